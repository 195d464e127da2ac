"""Issue 24, hostile recursion round 26r: blocks holding recursions written as users port
TreeRNN/TreeLSTM code, aimed at what session 25 added: inference of a hybridized block
holding a recursion runs in the calling thread, partitioned (NOTE [recursion inference in the
calling thread] in gluon_cf/hybrid_inline.py). Recursions beside random operators, BatchNorm,
Dropout, user CustomOps, boolean_mask, sorts and casts; two or three recursions in one block,
a recursion's outputs fed to another recursion or reused by several heads; outputs of several
dtypes; recursions inside the block's own cond; forests whose every row takes one branch of a
cond (``cond.from_batch``'s one-branch batch) with branches returning parameters, constants or
captured arrays. Part two: ``hostile_programs26r_b.py``.

Each block's ``plain_forward`` is the oracle: plain Python recursion on NDArrays (indices and
predicates read on the host)."""
import mxnet as mx
from mxnet.gluon import nn

import gluon_cf

import hostile_harness
from hostile_programs17b import BAL, comb, forest
import hostile_programs25r
from hostile_programs25r import H, cat, walk
from hostile_programs25r_b import csr

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

# (a) mixed shapes, repeated roots; (b) one node; (c) only leaves (every row of a batch takes
# the leaf branch); (d) two balanced trees (every row at a depth takes one branch); (e) a comb
MIXED = forest([BAL, None, (None, None), comb(3)], 2601, H)
MIXED = MIXED[:3] + [floats(0, 9, 10, 0, 13, 9)]
SINGLE = forest([None], 2602, H)
LEAVES = forest([None, None, None, None], 2603, H)
TWO_BAL = forest([((None, None), (None, None)), ((None, None), (None, None))], 2604, H)
COMB = forest([comb(6)], 2605, H)
BIN = (MIXED, SINGLE, LEAVES, TWO_BAL, COMB)
NARY = (csr([[1, 2, 3], [], [4], [], [5, 6], [], []], [0, 2, 6], 2606),
        csr([[], [], []], [2, 0, 1], 2607),
        csr([[1], [2], [3], []], [0], 2608))


class _Net(hostile_programs25r._Net):
    """Round 25r's layers (Dense ``w`` 2H -> H, ``u`` and ``u2`` H -> H, ``v`` H -> 1, an
    embedding) and a bias parameter (1, H); ``more()`` adds a program's own."""

    def extra(self):
        self.bias = self.params.get("bias", shape=(1, H), init=mx.init.Uniform(0.5))
        self.more()

    def more(self):
        pass

    # the TreeRNN cell every program shares: hybridized and plain
    def tree(self, F, x, left, right, name="node", leaf=None, combine=None):
        leaf = leaf or (lambda i: F.take(x, i))
        combine = combine or (lambda a, b, i: F.tanh(self.w(F.concat(a, b, dim=1))))

        def body(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: leaf(i),
                lambda: combine(node(F.take(left, i)), node(F.take(right, i)), i))
        node = gluon_cf.recursive(body, name=name)
        return node

    def roots(self, F, node, roots):
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, -2))

    def plain_tree(self, F, x, left, right, roots, leaf=None, combine=None):
        leaf = leaf or (lambda i: x[i:i + 1])
        combine = combine or (lambda a, b, i: F.tanh(self.w(F.concat(a, b, dim=1))))

        def body(node, i, lt, rt):
            return leaf(i) if lt < 0 else combine(node(lt), node(rt), i)
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


class _Tree(_Net):
    """``head(F, h, x)`` applied to the TreeRNN's rows: the programs below vary the head."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        return self.head(F, self.roots(F, self.tree(F, x, left, right), roots), x, bias)

    def plain_forward(self, F, x, left, right, roots, bias):
        return self.head(F, self.plain_tree(F, x, left, right, roots), x, bias)


# ---- (A) inference in the calling thread: what follows or surrounds the recursion ---------

@program(*BIN)
class HeadSoftmaxArgmaxAndSum(_Tree):
    """Three heads on the rows: a softmax, an int32 argmax, a float64 sum."""

    def head(self, F, h, x, bias):
        return [F.softmax(self.u(h)), F.argmax(h, axis=1).astype("int32"),
                F.sum(h, axis=1).astype("float64")]


@program(*BIN)
class HeadTopkBothAndSort(_Tree):
    """topk's values and indices, a sort and an argsort of the rows."""

    def head(self, F, h, x, bias):
        val, idx = F.topk(h, axis=1, k=2, ret_typ="both")
        return [val, idx, F.sort(h, axis=0), F.argsort(h, axis=1)]


@program(*BIN)
class HeadFloat16Cast(_Tree):
    """The rows cast to float16 then back, beside the float32 rows."""
    TOL = (2e-3, 2e-3)

    def head(self, F, h, x, bias):
        return [F.cast(h, "float16"), F.cast(F.cast(h, "float16"), "float32") * 2 + h]


@program(*BIN)
class HeadBatchNorm(_Tree):
    """BatchNorm over the rows (running statistics in prediction, the batch's in training)."""

    def more(self):
        self.bn = nn.BatchNorm(in_channels=H)

    def head(self, F, h, x, bias):
        return self.bn(h)


@program(*BIN)
class HeadDropout(_Tree):
    """Dropout over the rows: identity in prediction (a random operator in the graph)."""
    PREDICT_ONLY = True

    def more(self):
        self.drop = nn.Dropout(0.3)

    def head(self, F, h, x, bias):
        return self.drop(h) + 1


@program(*BIN)
class HeadBooleanMaskOfPositiveRows(_Tree):
    """boolean_mask keeps the rows whose sum is positive, after the recursion."""

    def head(self, F, h, x, bias):
        kept = F.contrib.boolean_mask(h, F.sum(h, axis=1) > -10)
        return F.sum(kept, axis=0, keepdims=True), h


@program(*BIN)
class HeadReusesRowsInAWhileLoop(_Tree):
    """The rows as a while_loop's state, doubled until their sum passes 5 (at most 4 steps)."""

    def head(self, F, h, x, bias):
        _, (out, k) = gluon_cf.while_loop(
            lambda s, k: (F.sum(F.abs(s)) < 5) * (k < 4), lambda s, k: (None, [s * 2, k + 1]),
            [h, F.zeros((1,))], max_iterations=4)
        return out, k

    def plain_forward(self, F, x, left, right, roots, bias):
        h, k = self.plain_tree(F, x, left, right, roots), 0
        while float(F.sum(F.abs(h)).asscalar()) < 5 and k < 4:
            h, k = h * 2, k + 1
        return h, F.array([k])


@program(*BIN)
class HeadCondOnTheRowsSum(_Tree):
    """A block-level cond on the rows' sum choosing a Dense or a negation."""

    def head(self, F, h, x, bias):
        return gluon_cf.cond(F.sum(h) > 0, lambda: self.u(h), lambda: -h)

    def plain_forward(self, F, x, left, right, roots, bias):
        h = self.plain_tree(F, x, left, right, roots)
        return self.u(h) if float(F.sum(h).asscalar()) > 0 else -h


@program(*BIN)
class HeadForeachScanOverRows(_Tree):
    """A foreach scanning the rows with a running state through Dense u."""

    def head(self, F, h, x, bias):
        outs, last = gluon_cf.foreach(lambda r, s: (F.tanh(self.u(r) + s), F.tanh(
            self.u(r) + s)), h.expand_dims(1), bias)
        return outs, last

    def plain_forward(self, F, x, left, right, roots, bias):
        h, s, outs = self.plain_tree(F, x, left, right, roots), bias, []
        for k in range(h.shape[0]):
            s = F.tanh(self.u(h[k:k + 1]) + s)
            outs.append(s)
        return F.stack(*outs), s


@program(*BIN)
class HeadReturnsAnInputAndTheRows(_Tree):
    """The block returns its input x unchanged beside the rows."""

    def head(self, F, h, x, bias):
        return h, x, F.identity(x)


@program(*BIN)
class HeadRowsTimesTheWholeInput(_Tree):
    """Each row scaled by a reduction of every node's features (a matmul with x's mean)."""

    def head(self, F, h, x, bias):
        return F.dot(h, F.transpose(F.mean(x, axis=0, keepdims=True)))


class Scale2(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0] * 2)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], out_grad[0] * 2)


@mx.operator.register("hostile26r_scale2")
class Scale2Prop(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=True)

    def list_arguments(self):
        return ["data"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return Scale2()


@program(*BIN)
class HeadUserCustomOp(_Tree):
    """A user's CustomOp doubling the rows after the recursion."""

    def head(self, F, h, x, bias):
        return F.Custom(h, op_type="hostile26r_scale2") + h

    def plain_forward(self, F, x, left, right, roots, bias):
        h = self.plain_tree(F, x, left, right, roots)
        return h * 3


@program(*BIN)
class UserCustomOpInTheLeaf(_Net):
    """A user's CustomOp inside the recursion's leaf."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        node = self.tree(F, x, left, right,
                         leaf=lambda i: F.Custom(F.take(x, i), op_type="hostile26r_scale2"))
        return self.roots(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        return self.plain_tree(F, x, left, right, roots, leaf=lambda i: x[i:i + 1] * 2)


@program(*BIN)
class InputThroughBatchNormThenRecursion(_Net):
    """x through BatchNorm (aux states) and Dense before the recursion reads it."""

    def more(self):
        self.bn = nn.BatchNorm(in_channels=H)

    def hybrid_forward(self, F, x, left, right, roots, bias):
        y = self.u(self.bn(x))
        return self.roots(F, self.tree(F, y, left, right), roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        return self.plain_tree(F, self.u(self.bn(x)), left, right, roots)


@program(*BIN)
class EmbeddingOfRowIdsBeforeRecursion(_Net):
    """The leaves read an Embedding of their row index computed for all rows before."""
    NO_GRAD = (0, 1, 2, 3)

    def more(self):
        self.embed = nn.Embedding(40, H)

    def hybrid_forward(self, F, x, left, right, roots, bias):
        e = self.embed(F.arange(40).slice_like(left, axes=(0,)))
        return F.broadcast_add(self.roots(F, self.tree(F, e, left, right), roots),
                               F.sum(x) * 0)

    def plain_forward(self, F, x, left, right, roots, bias):
        e = self.embed(F.arange(left.shape[0]))
        return self.plain_tree(F, e, left, right, roots)


# ---- (B) several recursions in one block ----------------------------------------------------

@program(*BIN)
class TwoRecursionsMultiplied(_Net):
    """Two recursions, one over x and one over 2x reading the roots reversed, multiplied."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        a = self.roots(F, self.tree(F, x, left, right, "a"), roots)
        b = self.roots(F, self.tree(F, x * 2, left, right, "b"), F.reverse(roots, axis=0))
        return a * b, a + b

    def plain_forward(self, F, x, left, right, roots, bias):
        a = self.plain_tree(F, x, left, right, roots)
        b = self.plain_tree(F, x * 2, left, right, F.array(roots.asnumpy()[::-1].copy()))
        return a * b, a + b


@program(*BIN)
class RecursionFeedsASecondRecursion(_Net):
    """The first recursion's rows, appended to x, are leaves of the second (roots as leaves)."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        a = self.roots(F, self.tree(F, x, left, right, "a"), roots)
        y = F.concat(x, a, dim=0)
        minus = -F.ones_like(roots)
        b = self.roots(F, self.tree(F, y, F.concat(left, minus, dim=0),
                                    F.concat(right, minus, dim=0), "b"),
                       F.concat(roots, F.broadcast_add(F.arange(0, 40).slice_like(roots),
                                                       F.sum(F.ones_like(left))), dim=0))
        return b

    def plain_forward(self, F, x, left, right, roots, bias):
        a = self.plain_tree(F, x, left, right, roots)
        n, r = x.shape[0], roots.shape[0]
        y = F.concat(x, a, dim=0)
        minus = -F.ones((r,))
        return self.plain_tree(F, y, F.concat(left, minus, dim=0),
                               F.concat(right, minus, dim=0),
                               F.concat(roots, F.arange(n, n + r), dim=0))


@program(*BIN)
class SameRecursionCalledFromTwoLoops(_Net):
    """One recursive function called by two foreach loops over the roots and their reverse."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        node = self.tree(F, x, left, right)
        return self.roots(F, node, roots) - self.roots(F, node, F.reverse(roots, axis=0))

    def plain_forward(self, F, x, left, right, roots, bias):
        a = self.plain_tree(F, x, left, right, roots)
        return a - self.plain_tree(F, x, left, right, F.array(roots.asnumpy()[::-1].copy()))


@program(*BIN)
class ThreeRecursionsSummed(_Net):
    """Three recursions with other cells (w, u, v-scaled) over the same forest, summed."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        cells = [lambda a, b, i: F.tanh(self.w(F.concat(a, b, dim=1))),
                 lambda a, b, i: F.tanh(self.u(a - b)),
                 lambda a, b, i: F.broadcast_mul(a + b, F.sigmoid(self.v(a)))]
        return sum(self.roots(F, self.tree(F, x, left, right, "n%d" % k, combine=c), roots)
                   for k, c in enumerate(cells))

    def plain_forward(self, F, x, left, right, roots, bias):
        cells = [lambda a, b, i: F.tanh(self.w(F.concat(a, b, dim=1))),
                 lambda a, b, i: F.tanh(self.u(a - b)),
                 lambda a, b, i: F.broadcast_mul(a + b, F.sigmoid(self.v(a)))]
        return sum(self.plain_tree(F, x, left, right, roots, combine=c) for c in cells)


@program(*BIN)
class RecursionInsideBlockCond(_Net):
    """The block's own cond on x's sum runs the recursion in one branch, a Dense in the other."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        node = self.tree(F, x, left, right)
        return gluon_cf.cond(F.sum(x) > 0, lambda: self.roots(F, node, roots),
                             lambda: self.u(F.take(x, roots)))

    def plain_forward(self, F, x, left, right, roots, bias):
        if float(F.sum(x).asscalar()) > 0:
            return self.plain_tree(F, x, left, right, roots)
        return self.u(F.take(x, roots))


# ---- (C) one-branch batches: every row of a batch takes the same branch ---------------------

@program(*BIN)
class LeafReturnsTheBiasParameter(_Net):
    """Leaves return the (1, H) bias parameter itself (shared by every leaf row)."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        return self.roots(F, self.tree(F, x, left, right, leaf=lambda i: bias), roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        return self.plain_tree(F, x, left, right, roots, leaf=lambda i: bias)


@program(*BIN)
class LeafReturnsAConstantAndItsRow(_Net):
    """Leaves return [ones((1, H)) * 0.5, their row]: two outputs, one shared by all rows."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        @gluon_cf.recursive
        def node(i):
            def internal():
                (ca, ha), (cb, hb) = node(F.take(left, i)), node(F.take(right, i))
                return [ca + cb, F.tanh(self.w(F.concat(ha, hb, dim=1)))]
            return gluon_cf.cond(F.take(left, i) < 0,
                                 lambda: [F.ones((1, H)) * 0.5, F.take(x, i)], internal)
        outs, _ = gluon_cf.foreach(lambda r, _: (list(node(r)), []), roots, [])
        return [F.reshape(o, (-3, -2)) for o in outs]

    def plain_forward(self, F, x, left, right, roots, bias):
        def body(node, i, lt, rt):
            if lt < 0:
                return [F.ones((1, H)) * 0.5, x[i:i + 1]]
            (ca, ha), (cb, hb) = node(lt), node(rt)
            return [ca + cb, F.tanh(self.w(F.concat(ha, hb, dim=1)))]
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class LeafReturnsACapturedArray(_Net):
    """Leaves return ``tanh(u(mean(x)))`` computed once before the recursion (shared)."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        shared = F.tanh(self.u(F.mean(x, axis=0, keepdims=True)))
        return self.roots(F, self.tree(F, x, left, right, leaf=lambda i: shared), roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        shared = F.tanh(self.u(F.mean(x, axis=0, keepdims=True)))
        return self.plain_tree(F, x, left, right, roots, leaf=lambda i: shared)


@program(*BIN)
class LeafCountsAndSharedScalar(_Net):
    """[leaf count as (1, 1) ones, a (1,) scalar constant, the row]: shapes of one element."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        @gluon_cf.recursive
        def node(i):
            def internal():
                (na, sa, ha), (nb, sb, hb) = node(F.take(left, i)), node(F.take(right, i))
                return [na + nb, sa * sb, ha + hb]
            return gluon_cf.cond(F.take(left, i) < 0,
                                 lambda: [F.ones((1, 1)), F.ones((1,)) * 1.5, F.take(x, i)],
                                 internal)
        outs, _ = gluon_cf.foreach(lambda r, _: (list(node(r)), []), roots, [])
        return outs

    def plain_forward(self, F, x, left, right, roots, bias):
        def body(node, i, lt, rt):
            if lt < 0:
                return [F.ones((1, 1)), F.ones((1,)) * 1.5, x[i:i + 1]]
            (na, sa, ha), (nb, sb, hb) = node(lt), node(rt)
            return [na + nb, sa * sb, ha + hb]
        res = walk(F, left, right, roots, x.shape[0], body)
        return [F.stack(*[r[k] for r in res]) for k in range(3)]


@program(*BIN)
class InternalReturnsBiasWhenBothChildrenAreLeaves(_Net):
    """An inner cond: a node whose children are both leaves returns bias * 2 (shared), else
    combines them."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        def combine(a, b, i):
            both = (F.take(left, F.take(left, i)) < 0) * (F.take(left, F.take(right, i)) < 0)
            return gluon_cf.cond(both, lambda: bias * 2,
                                 lambda: F.tanh(self.w(F.concat(a, b, dim=1))))
        return self.roots(F, self.tree(F, x, left, right, combine=combine), roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        lt = [int(v) for v in left.asnumpy()]
        rt = [int(v) for v in right.asnumpy()]

        def combine(a, b, i):
            if lt[lt[i]] < 0 and lt[rt[i]] < 0:
                return bias * 2
            return F.tanh(self.w(F.concat(a, b, dim=1)))
        return self.plain_tree(F, x, left, right, roots, combine=combine)


@program(*BIN)
class LeafOfTwoRowsFlattenedPerNode(_Net):
    """Leaves return their row and the bias as a (1, 2H) value; internal nodes project down."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        return self.roots(F, self.tree(
            F, x, left, right, leaf=lambda i: F.concat(F.take(x, i), bias, dim=1),
            combine=lambda a, b, i: F.concat(F.tanh(self.w(a)), F.tanh(self.w(b)), dim=1)),
            roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        return self.plain_tree(
            F, x, left, right, roots, leaf=lambda i: F.concat(x[i:i + 1], bias, dim=1),
            combine=lambda a, b, i: F.concat(F.tanh(self.w(a)), F.tanh(self.w(b)), dim=1))
