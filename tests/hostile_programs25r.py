"""Issue 24, hostile recursion round 25r (binary trees): recursive functions written the way
users port TreeLSTM, TreeRNN, RNTN and Fold-style code. Tuples of states and several outputs of
several dtypes, Python branching on static attributes, closures over parameters, constants and
arrays computed before the call, state passed down, base cases decided by values, reductions
and softmax over the children, loops inside bodies and recursion inside loops, three functions
in turn, forests of one tree, of 500 trees, chains of 3,000 nodes, repeated roots, and forests
of one size but another structure given to one block in turn.

Each block's ``plain_forward`` is the oracle: the same model as plain Python recursion on
NDArrays (indices and predicates read on the host)."""
import mxnet as mx
import numpy as np
from mxnet.gluon import HybridBlock, nn, rnn

import gluon_cf

import hostile_harness
from hostile_programs4 import _ids, _row
from hostile_programs14 import _rows_of
from hostile_programs17b import BAL, comb, forest

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats
H, V = 3, 6


def _with_roots(arrays, *roots):
    return arrays[:3] + [floats(*roots)]


# (a) a forest mixing shapes, roots repeated; (b) one single node; (c), (d): nine nodes and one
# root each, one balanced, one a comb (one size, another structure: the block's caches)
MIXED = _with_roots(forest([BAL, None, (None, None)], 251, H), 0, 9, 10, 0, 9)
SINGLE = forest([None], 252, H)
BALANCED9 = forest([BAL], 253, H)
COMB9 = forest([comb(4)], 254, H)
BIN = (MIXED, SINGLE, BALANCED9, COMB9)


def tokens_of(arrays, seed):
    """``arrays`` with x replaced by float token ids in [0, V)."""
    n = arrays[0].shape[0]
    return [np.random.RandomState(seed).randint(0, V, n).astype(np.float32)] + arrays[1:]


def walk(F, left, right, roots, n, body, *start):
    """Plain recursion: ``body(node, i, l, r, *args)`` per node; a list of each root's result."""
    lt, rt = _ids(left), _ids(right)

    def node(i, *args):
        i = _row(i, n)
        return body(node, i, lt[i], rt[i], *args)
    return [node(r, *start) for r in _ids(roots)]


def cat(F, results):
    """Results of the roots, each an array or a tuple (nested one level), concatenated."""
    first = results[0]
    if isinstance(first, (list, tuple)):
        return [cat(F, [r[k] for r in results]) for k in range(len(first))]
    return F.concat(*results, dim=0)


def rows_tuple(F, node, roots, count):
    """``node`` of every root returning ``count`` arrays, in a foreach over ``roots``."""
    outs, _ = gluon_cf.foreach(lambda r, _: (list(node(r)), []), roots, [])
    return [F.reshape(o, (-3, -2)) for o in outs[:count]]


class _Net(HybridBlock):
    """Dense layers ``w`` (2H -> H), ``u`` and ``u2`` (H -> H), ``v`` (H -> 1), an embedding."""

    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.w = nn.Dense(H, in_units=2 * H, flatten=False)
            self.u = nn.Dense(H, in_units=H, flatten=False)
            self.u2 = nn.Dense(H, in_units=H, flatten=False)
            self.v = nn.Dense(1, in_units=H, flatten=False)
            self.embed = nn.Embedding(V, H)
            self.extra()

    def extra(self):
        pass


# ---- states and outputs ---------------------------------------------------------------------

def _lstm_leaf(self, F, xi):
    c = self.u(xi)
    return F.tanh(c), c


def _lstm_combine(self, F, hl, cl, hr, cr):
    z = self.w(F.concat(hl, hr, dim=1))
    c = F.sigmoid(z) * (cl + cr) + F.tanh(z) * 0.5
    return F.tanh(c) * F.sigmoid(self.u2(hl)), c


@program(*BIN)
class TreeLstmReturnsHAndC(_Net):
    """A TreeLSTM returning the tuple (h, c); both are outputs of the block."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def internal():
                hl, cl = node(F.take(left, i))
                hr, cr = node(F.take(right, i))
                return list(_lstm_combine(self, F, hl, cl, hr, cr))
            return gluon_cf.cond(F.take(left, i) < 0,
                                 lambda: list(_lstm_leaf(self, F, F.take(x, i))), internal)
        return rows_tuple(F, node, roots, 2)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return _lstm_leaf(self, F, x[i:i + 1])
            return _lstm_combine(self, F, *node(lt), *node(rt))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class RematTreeLstmHAndC(TreeLstmReturnsHAndC):
    """The same TreeLSTM with ``remat=True``: gradients recomputed in backward."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive(remat=True)
        def node(i):
            def internal():
                hl, cl = node(F.take(left, i))
                hr, cr = node(F.take(right, i))
                return list(_lstm_combine(self, F, hl, cl, hr, cr))
            return gluon_cf.cond(F.take(left, i) < 0,
                                 lambda: list(_lstm_leaf(self, F, F.take(x, i))), internal)
        return rows_tuple(F, node, roots, 2)


@program(*BIN)
class SizeHeightAndVectorDtypes(_Net):
    """Three outputs of three dtypes: a float32 vector, the subtree's size as int32 and its
    height as float64 (height = 1 + the children's maximum)."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def leaf():
                one = F.ones_like(F.take(left, i)).reshape((-1, 1))
                return [F.take(x, i), one.astype("int32"), one.astype("float64")]

            def internal():
                hl, sl, dl = node(F.take(left, i))
                hr, sr, dr = node(F.take(right, i))
                return [F.tanh(self.w(F.concat(hl, hr, dim=1))), sl + sr + 1,
                        F.maximum(dl, dr) + 1]
            return gluon_cf.cond(F.take(left, i) < 0, leaf, internal)
        return rows_tuple(F, node, roots, 3)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return [x[i:i + 1], F.ones((1, 1), dtype="int32"),
                        F.ones((1, 1), dtype="float64")]
            (hl, sl, dl), (hr, sr, dr) = node(lt), node(rt)
            return [F.tanh(self.w(F.concat(hl, hr, dim=1))), sl + sr + 1,
                    F.maximum(dl, dr) + 1]
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class NestedListReturnedAndArgmaxLabel(_Net):
    """A nested list [h, [sum, label]]: the label an int32 argmax of h, read by no parent."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def pack(h):
                return [h, [F.sum(h, axis=1, keepdims=True),
                            F.argmax(h, axis=1, keepdims=True).astype("int32")]]

            def internal():
                hl, _ = node(F.take(left, i))
                hr, (sr, _) = node(F.take(right, i))
                return pack(F.tanh(self.w(F.concat(hl, F.broadcast_mul(hr, sr), dim=1))))
            return gluon_cf.cond(F.take(left, i) < 0, lambda: pack(F.take(x, i) * 2),
                                 internal)
        outs, _ = gluon_cf.foreach(lambda r, _: (list(node(r)), []), roots, [])
        return [F.reshape(o, (-3, -2)) for o in [outs[0]] + list(outs[1])]

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            def pack(h):
                return [h, [F.sum(h, axis=1, keepdims=True),
                            F.argmax(h, axis=1, keepdims=True).astype("int32")]]
            if lt < 0:
                return pack(x[i:i + 1] * 2)
            hl, _ = node(lt)
            hr, (sr, _) = node(rt)
            return pack(F.tanh(self.w(F.concat(hl, F.broadcast_mul(hr, sr), dim=1))))
        res = walk(F, left, right, roots, x.shape[0], body)
        return cat(F, [[h, s, lab] for h, (s, lab) in res])


# ---- static attributes, closures, constants ------------------------------------------------

class _Combining(_Net):
    """A TreeRNN whose leaves are their rows and whose internal nodes ``_combine`` children."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(x, i),
                lambda: self._combine(F, node(F.take(left, i)), node(F.take(right, i))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            return x[i:i + 1] if lt < 0 else self._combine(F, node(lt), node(rt))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


class _Pooled(_Combining):
    POOL = "sum"

    def _combine(self, F, hl, hr):
        if self.POOL == "max":                 # a Python branch on a static attribute
            pooled = F.maximum(hl, hr)
        elif self.POOL == "mean":
            pooled = (hl + hr) / 2
        else:
            pooled = hl + hr
        return F.tanh(self.u(pooled))


@program(*BIN)
class StaticPoolMax(_Pooled):
    """TreeRNN pooling the children by a class attribute: max."""
    POOL = "max"


@program(*BIN)
class StaticPoolMean(_Pooled):
    """The same code, mean pooling."""
    POOL = "mean"


@program(*BIN)
class ClosureOverProjectionComputedBefore(_Net):
    """Leaves read rows of ``tanh(u(x))`` computed before the recursion (a captured array
    whose gradient reaches u and x); internal nodes add their own projected row."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        proj = F.tanh(self.u(x))

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(proj, i),
                lambda: F.tanh(self.w(F.concat(node(F.take(left, i)), node(F.take(right, i)),
                                               dim=1)) + F.take(proj, i)))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        proj = F.tanh(self.u(x))

        def body(node, i, lt, rt):
            if lt < 0:
                return proj[i:i + 1]
            return F.tanh(self.w(F.concat(node(lt), node(rt), dim=1)) + proj[i:i + 1])
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class CapturedPythonAndArrayConstants(_Net):
    """A Python float, an array constant ``F.ones((1, H))`` and ``F.arange`` captured."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        scale = 0.5
        bias = F.ones((1, H)) * 0.1
        ramp = F.arange(H).reshape((1, H)) / H

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.broadcast_add(F.take(x, i), ramp),
                lambda: F.tanh(F.broadcast_add(node(F.take(left, i)) * scale,
                                               bias) - node(F.take(right, i))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        ramp = F.arange(H).reshape((1, H)) / H

        def body(node, i, lt, rt):
            if lt < 0:
                return x[i:i + 1] + ramp
            return F.tanh(node(lt) * 0.5 + 0.1 - node(rt))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class ContextFromAllNodesChangesPerCall(_Net):
    """A softmax context over all nodes' features, computed per call before the recursion:
    another forest, another context (a cached closure would keep the first)."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        ctx = F.softmax(F.sum(x, axis=0, keepdims=True), axis=1)

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(x, i) * ctx,
                lambda: F.tanh(self.w(F.concat(node(F.take(left, i)), node(F.take(right, i)),
                                               dim=1))) * ctx)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        ctx = F.softmax(F.sum(x, axis=0, keepdims=True), axis=1)

        def body(node, i, lt, rt):
            if lt < 0:
                return x[i:i + 1] * ctx
            return F.tanh(self.w(F.concat(node(lt), node(rt), dim=1))) * ctx
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class ScaleParameterBroadcastAndListOfDenses(_Net):
    """A (1, H) parameter broadcast onto each node and a Python list of Dense blocks, one per
    child position (a static index)."""

    def extra(self):
        self.scale = self.params.get("scale", shape=(1, H), init=mx.init.Constant(0.7))
        self.pos = [nn.Dense(H, in_units=H, flatten=False) for _ in range(2)]
        for k, d in enumerate(self.pos):
            self.register_child(d, "pos%d" % k)

    def hybrid_forward(self, F, x, left, right, roots, scale, **kw):
        @gluon_cf.recursive
        def node(i):
            def internal():
                kids = [node(F.take(left, i)), node(F.take(right, i))]
                return F.tanh(sum(d(k) for d, k in zip(self.pos, kids)))
            return gluon_cf.cond(F.take(left, i) < 0,
                                 lambda: F.broadcast_mul(F.take(x, i), scale), internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, scale, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return x[i:i + 1] * scale
            return F.tanh(self.pos[0](node(lt)) + self.pos[1](node(rt)))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


# ---- base cases decided by values -------------------------------------------------------------

@program(*BIN)
class BaseCaseByFeatureSum(_Net):
    """A node is a base case when it is a leaf or when its feature sum is above 0.4 (decided by
    the values, in the body)."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            stop = (F.take(left, i) < 0) + (F.sum(F.take(x, i), axis=1) > 0.4)
            return gluon_cf.cond(
                stop > 0, lambda: F.take(x, i) * 3,
                lambda: F.tanh(self.w(F.concat(node(F.take(left, i)), node(F.take(right, i)),
                                               dim=1))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0 or float(x[i].sum().asscalar()) > 0.4:
                return x[i:i + 1] * 3
            return F.tanh(self.w(F.concat(node(lt), node(rt), dim=1)))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class NestedCondsOnStructureAndValue(_Net):
    """Nested conds: a leaf splits on the sign of its first feature, an internal node on the
    sign of its left child's result."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def leaf():
                xi = F.take(x, i)
                return gluon_cf.cond(F.slice_axis(xi, axis=1, begin=0, end=1).reshape((-1,)) > 0,
                                     lambda: xi * 2, lambda: F.tanh(self.u(xi)))

            def internal():
                hl, hr = node(F.take(left, i)), node(F.take(right, i))
                return gluon_cf.cond(F.sum(hl, axis=1) > 0, lambda: hl * hr,
                                     lambda: self.u2(hl) - hr)
            return gluon_cf.cond(F.take(left, i) < 0, leaf, internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                xi = x[i:i + 1]
                return xi * 2 if float(xi[0, 0].asscalar()) > 0 else F.tanh(self.u(xi))
            hl, hr = node(lt), node(rt)
            return hl * hr if float(hl.sum().asscalar()) > 0 else self.u2(hl) - hr
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


# ---- bodies with reductions, softmax and loops ------------------------------------------------

@program(*BIN)
class SoftmaxAttentionOverTwoChildren(_Net):
    """The children stacked on axis 1 and weighted by a softmax over them (not over rows)."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def internal():
                kids = F.stack(node(F.take(left, i)), node(F.take(right, i)), axis=1)
                att = F.softmax(self.v(kids).reshape((0, -1)), axis=1)
                return F.tanh(F.sum(F.broadcast_mul(kids, att.expand_dims(2)), axis=1) +
                              F.take(x, i))
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return x[i:i + 1]
            kids = F.stack(node(lt), node(rt), axis=1)
            att = F.softmax(self.v(kids).reshape((0, -1)), axis=1)
            return F.tanh(F.sum(kids * att.expand_dims(2), axis=1) + x[i:i + 1])
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class MaxReductionAndRowNorm(_Net):
    """Elementwise max of the children plus their product's max over features, normalised by
    the row's own L2 norm."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def internal():
                hl, hr = node(F.take(left, i)), node(F.take(right, i))
                h = F.broadcast_add(F.maximum(hl, hr), F.max(hl * hr, axis=1, keepdims=True))
                return F.broadcast_div(h, F.norm(h, axis=1, keepdims=True) + 1)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return x[i:i + 1]
            hl, hr = node(lt), node(rt)
            h = F.broadcast_add(F.maximum(hl, hr), F.max(hl * hr, axis=1, keepdims=True))
            return F.broadcast_div(h, F.norm(h, axis=1, keepdims=True) + 1)
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class RntnBilinearTensor(_Net):
    """RNTN: tanh(W [a; b] + [a; b]^T V [a; b]) with V a (2H, 2H * H) parameter."""

    def extra(self):
        self.vt = self.params.get("vt", shape=(2 * H, 2 * H * H), init=mx.init.Uniform(0.3))

    def _combine(self, F, a, b, vt):
        ab = F.concat(a, b, dim=1)
        bil = F.dot(ab, vt).reshape((0, 2 * H, H))
        return F.tanh(self.w(ab) + F.batch_dot(ab.expand_dims(1), bil).reshape((0, -1)))

    def hybrid_forward(self, F, x, left, right, roots, vt, **kw):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(x, i),
                lambda: self._combine(F, node(F.take(left, i)), node(F.take(right, i)), vt))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, vt, **kw):
        def body(node, i, lt, rt):
            return x[i:i + 1] if lt < 0 else self._combine(F, node(lt), node(rt), vt)
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class LeafWhileLoopWithConstantCounter(_Net):
    """A leaf smooths its row in a while_loop whose counter is ``F.zeros((1,))`` (a constant,
    issue 24's refused case); internal nodes run a while_loop of a per-invocation counter."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def leaf():
                _, (_, h) = gluon_cf.while_loop(
                    lambda k, h: k < 3, lambda k, h: ([], [k + 1, F.tanh(h * 0.9 + 0.1)]),
                    [F.zeros((1,)), F.take(x, i)], max_iterations=5)
                return h

            def internal():
                h0 = node(F.take(left, i)) - node(F.take(right, i))
                _, (_, h) = gluon_cf.while_loop(
                    lambda k, h: k < 2, lambda k, h: ([], [k + 1, F.tanh(self.u(h))]),
                    [F.zeros_like(F.take(left, i)), h0], max_iterations=3)
                return h
            return gluon_cf.cond(F.take(left, i) < 0, leaf, internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                h = x[i:i + 1]
                for _ in range(3):
                    h = F.tanh(h * 0.9 + 0.1)
                return h
            h = node(lt) - node(rt)
            for _ in range(2):
                h = F.tanh(self.u(h))
            return h
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class InternalForeachRnnOverChildren(_Net):
    """An internal node runs an RNN (foreach) over its two children as a sequence of two
    steps, starting from its own row."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def internal():
                seq = F.stack(node(F.take(left, i)), node(F.take(right, i)))
                _, (h,) = gluon_cf.foreach(
                    lambda row, s: ([], [F.tanh(self.u(s[0]) + row)]), seq, [F.take(x, i)])
                return h
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return x[i:i + 1]
            h = x[i:i + 1]
            for row in (node(lt), node(rt)):
                h = F.tanh(self.u(h) + row)
            return h
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class GruCellSplitAndWhere(_Combining):
    """A GRUCell combining the children, a split of a Dense into two gates and an F.where
    choosing per element."""

    def extra(self):
        self.cell = rnn.GRUCell(H, input_size=H)
        self.gates = nn.Dense(2 * H, in_units=H, flatten=False)

    def _combine(self, F, hl, hr):
        out, _ = self.cell(hl, [hr])
        a, b = F.split(self.gates(out), num_outputs=2, axis=1)
        return F.where(a > b, F.tanh(a), F.sigmoid(b) * 0.5)


@program(*BIN)
class LayerNormCombineAndBlockGradRight(_Net):
    """LayerNorm in the combination; the right child's result under BlockGrad."""

    def extra(self):
        self.norm = nn.LayerNorm(in_channels=H)

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(x, i),
                lambda: self.norm(self.u(node(F.take(left, i))) +
                                  F.BlockGrad(node(F.take(right, i)))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return x[i:i + 1]
            return self.norm(self.u(node(lt)) + F.BlockGrad(node(rt)))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


# ---- leaves with embeddings, state passed down, arguments ---------------------------------------

TOKENS = tuple(tokens_of(a, 260 + k) for k, a in enumerate(BIN))


@program(*TOKENS)
class EmbeddingLeavesTreeRnn(_Net):
    """Leaves embed their token (Embedding of ``take(tokens, i)``), internal nodes combine."""

    NO_GRAD = (0, 1, 2, 3)

    def hybrid_forward(self, F, toks, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: self.embed(F.take(toks, i)),
                lambda: F.tanh(self.w(F.concat(node(F.take(left, i)), node(F.take(right, i)),
                                               dim=1))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, toks, left, right, roots, **kw):
        t = _ids(toks)

        def body(node, i, lt, rt):
            if lt < 0:
                return self.embed(F.array([t[i]]))
            return F.tanh(self.w(F.concat(node(lt), node(rt), dim=1)))
        return cat(F, walk(F, left, right, roots, toks.shape[0], body))


@program(*BIN)
class TopDownPathStatePassedDown(_Net):
    """State passed down: node(i, s) gives a leaf x_i * s; an internal node passes
    tanh(u(s) + x_i) to the left and half of it to the right, and sums."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i, s):
            def internal():
                s2 = F.tanh(self.u(s) + F.take(x, i))
                return node(F.take(left, i), s2) + node(F.take(right, i), s2 * 0.5)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) * s, internal)
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r, F.ones((1, H))), []), roots, [])
        return F.reshape(hs, (-3, -2))

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt, s):
            if lt < 0:
                return x[i:i + 1] * s
            s2 = F.tanh(self.u(s) + x[i:i + 1])
            return node(lt, s2) + node(rt, s2 * 0.5)
        return cat(F, walk(F, left, right, roots, x.shape[0], body, F.ones((1, H))))


@program(*BIN)
class DepthArgumentAndKeywordCall(_Net):
    """node(i, d) with the depth an array argument passed by keyword; leaves scaled by it."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i, d):
            def internal():
                hl = node(i=F.take(left, i), d=d + 1)
                hr = node(d=d + 1, i=F.take(right, i))
                return F.broadcast_add(F.tanh(self.w(F.concat(hl, hr, dim=1))),
                                       d.reshape((-1, 1)) * 0.1)
            return gluon_cf.cond(F.take(left, i) < 0,
                                 lambda: F.broadcast_mul(F.take(x, i), d.reshape((-1, 1))),
                                 internal)
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r, F.ones_like(r)), []), roots, [])
        return F.reshape(hs, (-3, -2))

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt, d):
            if lt < 0:
                return x[i:i + 1] * d
            return F.tanh(self.w(F.concat(node(lt, d + 1), node(rt, d + 1), dim=1))) + d * 0.1
        return cat(F, walk(F, left, right, roots, x.shape[0], body, 1.0))
