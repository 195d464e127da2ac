"""Issue 24, hostile recursion round 26r, part two (``hostile_programs26r.py`` has the
first): functions calling each other in turn (three, four, five; two cycles through one
function; NOTE [taint through a cycle of calls]), n-ary trees with loops inside and outside
the recursion, dtypes of indices and features, more cells (LSTMCell, GRUCell, LayerNorm, MXNet's
own foreach, attention) and heads, random operators, remat, ``gluon_cf.invoke``, and conds on
a predicate shared by every row of a batch. Each block's ``plain_forward`` is the oracle."""
import mxnet as mx
import numpy as np
from mxnet.gluon import nn

import gluon_cf

import hostile_harness
from hostile_programs25r import H, cat, walk
from hostile_programs25r_b import nary_walk
from hostile_programs26r import BIN, NARY, _Net, _Tree

PROGRAMS, program = hostile_harness.program_registry()


# ---- (D) functions calling each other in turn -----------------------------------------------

class _InTurn(_Net):
    """``COUNT`` functions in turn (f0 -> f1 -> ... -> f0), each with its own cell."""
    COUNT = 3

    def cells(self, F):
        return [lambda v: self.u(v), lambda v: F.tanh(self.w(F.concat(v, v, dim=1))),
                lambda v: v * 0.5, lambda v: F.sigmoid(self.u(v)) - 0.5,
                lambda v: F.broadcast_mul(v, F.sigmoid(self.v(v)))][:self.COUNT]

    def hybrid_forward(self, F, x, left, right, roots, bias):
        cells, table = self.cells(F), []

        def make(k):
            def body(i):
                nxt = table[(k + 1) % self.COUNT]
                return gluon_cf.cond(
                    F.take(left, i) < 0, lambda: cells[k](F.take(x, i)),
                    lambda: F.tanh(cells[k](nxt(F.take(left, i))) - nxt(F.take(right, i))))
            return gluon_cf.recursive(body, name="turn%d" % k)
        table.extend(make(k) for k in range(self.COUNT))
        return self.roots(F, table[0], roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        cells = self.cells(F)
        lt, rt = [int(v) for v in left.asnumpy()], [int(v) for v in right.asnumpy()]

        def f(k, i):
            if lt[i] < 0:
                return cells[k](x[i:i + 1])
            nxt = (k + 1) % self.COUNT
            return F.tanh(cells[k](f(nxt, lt[i])) - f(nxt, rt[i]))
        return F.concat(*[f(0, int(r)) for r in roots.asnumpy()], dim=0)


@program(*BIN)
class ThreeFunctionsInTurn(_InTurn):
    COUNT = 3


@program(*BIN)
class FourFunctionsInTurn(_InTurn):
    COUNT = 4


@program(*BIN)
class FiveFunctionsInTurn(_InTurn):
    COUNT = 5


@program(*BIN)
class TwoCyclesSharingAFunction(_Net):
    """f -> g -> f on left children and f -> h -> f on right ones: two cycles through f."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        table = {}

        def f(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: self.u(F.take(x, i)),
                                 lambda: F.tanh(table["g"](F.take(left, i)) +
                                                table["h"](F.take(right, i))))

        def g(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) * 2,
                                 lambda: self.u(table["f"](F.take(left, i))) +
                                 table["f"](F.take(right, i)))

        def h(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.broadcast_add(F.take(x, i),
                                                                             bias),
                                 lambda: table["f"](F.take(left, i)) * table["f"](
                                     F.take(right, i)))
        table.update(f=gluon_cf.recursive(f), g=gluon_cf.recursive(g), h=gluon_cf.recursive(h))
        return self.roots(F, table["f"], roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        lt, rt = [int(v) for v in left.asnumpy()], [int(v) for v in right.asnumpy()]

        def f(i):
            return self.u(x[i:i + 1]) if lt[i] < 0 else F.tanh(g(lt[i]) + h(rt[i]))

        def g(i):
            return x[i:i + 1] * 2 if lt[i] < 0 else self.u(f(lt[i])) + f(rt[i])

        def h(i):
            return x[i:i + 1] + bias if lt[i] < 0 else f(lt[i]) * f(rt[i])
        return F.concat(*[f(int(r)) for r in roots.asnumpy()], dim=0)


@program(*[tokens for tokens in
           ([np.random.RandomState(2610 + k).randint(0, 8, a[0].shape[0]).astype(np.float32)] +
            a[1:] for k, a in enumerate(BIN))])
class ThreeFunctionsInTurnEmbeddingLeaves(_Net):
    """Three functions in turn whose leaves embed their token (token ids need no gradient)."""
    NO_GRAD = (0, 1, 2, 3)

    def more(self):
        self.embed = nn.Embedding(8, H)

    def hybrid_forward(self, F, toks, left, right, roots, bias):
        table = []

        def make(k):
            def body(i):
                nxt = table[(k + 1) % 3]
                return gluon_cf.cond(
                    F.take(left, i) < 0, lambda: self.embed(F.take(toks, i)) * (k + 1),
                    lambda: F.tanh(self.w(F.concat(nxt(F.take(left, i)),
                                                   nxt(F.take(right, i)), dim=1))))
            return gluon_cf.recursive(body, name="emb%d" % k)
        table.extend(make(k) for k in range(3))
        return self.roots(F, table[0], roots)

    def plain_forward(self, F, toks, left, right, roots, bias):
        lt, rt = [int(v) for v in left.asnumpy()], [int(v) for v in right.asnumpy()]

        def f(k, i):
            if lt[i] < 0:
                return self.embed(toks[i:i + 1]) * (k + 1)
            nxt = (k + 1) % 3
            return F.tanh(self.w(F.concat(f(nxt, lt[i]), f(nxt, rt[i]), dim=1)))
        return F.concat(*[f(0, int(r)) for r in roots.asnumpy()], dim=0)


# ---- (E) n-ary trees, loops inside and outside ----------------------------------------------

@program(*NARY)
class NaryChildSumThenSoftmaxHead(_Net):
    """Child sum over CSR children in a while_loop; a softmax head and the argmax after."""

    def hybrid_forward(self, F, x, ptr, cidx, roots, bias):
        @gluon_cf.recursive
        def node(i):
            start, end = F.take(ptr, i), F.take(ptr, i + 1)
            _, (_, total) = gluon_cf.while_loop(
                lambda k, t: k < end,
                lambda k, t: (None, [k + 1, t + node(F.take(cidx, k))]),
                [start, F.zeros((1, H))], max_iterations=6)
            return F.tanh(self.u(F.take(x, i)) + total)
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        h = F.reshape(hs, (-3, -2))
        return F.softmax(h), F.argmax(h, axis=1)

    def plain_forward(self, F, x, ptr, cidx, roots, bias):
        def body(node, i, kids):
            total = F.zeros((1, H))
            for c in kids:
                total = total + node(c)
            return F.tanh(self.u(x[i:i + 1]) + total)
        h = F.concat(*nary_walk(F, x, ptr, cidx, roots, body), dim=0)
        return F.softmax(h), F.argmax(h, axis=1)


@program(*NARY)
class NaryLeafReturnsBiasMaxPool(_Net):
    """Leaves (no child) return the bias parameter; a node max-pools its children in a
    foreach over a fixed 3 child slots (a missing child reads -inf-like -1e4 rows)."""

    def hybrid_forward(self, F, x, ptr, cidx, roots, bias):
        @gluon_cf.recursive
        def node(i):
            start, end = F.take(ptr, i), F.take(ptr, i + 1)

            def pool():
                def step(k, best):
                    here = gluon_cf.cond(start + k < end,
                                         lambda: node(F.take(cidx, start + k)),
                                         lambda: F.ones((1, H)) * -1e4)
                    return [], F.maximum(best, here)
                _, best = gluon_cf.foreach(step, F.arange(3), F.ones((1, H)) * -1e4)
                return F.tanh(self.u(best) + F.take(x, i))
            return gluon_cf.cond(end > start, pool, lambda: bias)
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, -2))

    def plain_forward(self, F, x, ptr, cidx, roots, bias):
        def body(node, i, kids):
            if not kids:
                return bias
            best = F.ones((1, H)) * -1e4
            for c in kids[:3]:
                best = F.maximum(best, node(c))
            return F.tanh(self.u(best) + x[i:i + 1])
        return F.concat(*nary_walk(F, x, ptr, cidx, roots, body), dim=0)


@program(*BIN)
class RecursionInAWhileLoopOverRoots(_Net):
    """The block's while_loop visits the roots one by one, accumulating their rows."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        node = self.tree(F, x, left, right)
        count = F.sum(F.ones_like(roots))
        _, (_, acc) = gluon_cf.while_loop(
            lambda k, acc: k < count,
            lambda k, acc: (None, [k + 1, acc + node(F.take(roots, k))]),
            [F.zeros((1,)), F.zeros((1, H))], max_iterations=8)
        return acc

    def plain_forward(self, F, x, left, right, roots, bias):
        return F.sum(self.plain_tree(F, x, left, right, roots), axis=0, keepdims=True)


@program(*BIN)
class RecursionStateCarriedAcrossRoots(_Net):
    """A foreach over the roots carries a state added to every root's recursion result."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        node = self.tree(F, x, left, right)

        def step(r, s):
            h = F.tanh(node(r) + s)
            return h, h
        hs, last = gluon_cf.foreach(step, roots, bias)
        return F.reshape(hs, (-3, -2)), last

    def plain_forward(self, F, x, left, right, roots, bias):
        rows, s, out = self.plain_tree(F, x, left, right, roots), bias, []
        for k in range(rows.shape[0]):
            s = F.tanh(rows[k:k + 1] + s)
            out.append(s)
        return F.concat(*out, dim=0), s


@program(*BIN)
class RecursionOfFloat64Features(_Net):
    """x cast to float64 inside the block: leaves cast back to float32 for the Dense."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        x64 = F.cast(x, "float64")
        node = self.tree(F, x64, left, right, leaf=lambda i: F.cast(F.take(x64, i) * 2,
                                                                     "float32"))
        return self.roots(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        x64 = F.cast(x, "float64")
        return self.plain_tree(F, x, left, right, roots,
                               leaf=lambda i: F.cast(x64[i:i + 1] * 2, "float32"))


@program(*BIN)
class RecursionWithInt32Indices(_Net):
    """left, right and roots cast to int32 inside the block before the recursion."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        node = self.tree(F, x, F.cast(left, "int32"), F.cast(right, "int32"))
        return self.roots(F, node, F.cast(roots, "int32"))

    def plain_forward(self, F, x, left, right, roots, bias):
        return self.plain_tree(F, x, left, right, roots)


@program(*BIN)
class DepthAndSizeInt32AndRows(_Net):
    """The subtree's depth and size as int32 beside the rows; the head reads the depth."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        @gluon_cf.recursive
        def node(i):
            def internal():
                (ha, da, sa), (hb, db, sb) = node(F.take(left, i)), node(F.take(right, i))
                return [F.tanh(self.w(F.concat(ha, hb, dim=1))), F.maximum(da, db) + 1,
                        sa + sb + 1]
            one = F.ones((1, 1), dtype="int32")
            return gluon_cf.cond(F.take(left, i) < 0, lambda: [F.take(x, i), one, one],
                                 internal)
        (h, d, s), _ = gluon_cf.foreach(lambda r, _: (list(node(r)), []), roots, [])
        h = F.reshape(h, (-3, -2))
        return F.broadcast_mul(h, F.reshape(F.cast(d, "float32"), (-1, 1))), d, s

    def plain_forward(self, F, x, left, right, roots, bias):
        def body(node, i, lt, rt):
            one = F.ones((1, 1), dtype="int32")
            if lt < 0:
                return [x[i:i + 1], one, one]
            (ha, da, sa), (hb, db, sb) = node(lt), node(rt)
            return [F.tanh(self.w(F.concat(ha, hb, dim=1))), F.maximum(da, db) + 1,
                    sa + sb + 1]
        res = walk(F, left, right, roots, x.shape[0], body)
        h = F.concat(*[r[0] for r in res], dim=0)
        d, s = F.stack(*[r[1] for r in res]), F.stack(*[r[2] for r in res])
        return h * F.reshape(F.cast(d, "float32"), (-1, 1)), d, s


@program(*BIN)
class PassesDepthDownAndScales(_Net):
    """A depth argument passed down: a leaf scales its row by 1 / (1 + depth)."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        @gluon_cf.recursive
        def node(i, depth):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.broadcast_div(F.take(x, i), 1 + depth),
                lambda: F.tanh(self.w(F.concat(node(F.take(left, i), depth + 1),
                                               node(F.take(right, i), depth + 1), dim=1))))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r, F.zeros((1, 1))), []), roots, [])
        return F.reshape(hs, (-3, -2))

    def plain_forward(self, F, x, left, right, roots, bias):
        def body(node, i, lt, rt, depth):
            if lt < 0:
                return x[i:i + 1] / (1 + depth)
            return F.tanh(self.w(F.concat(node(lt, depth + 1), node(rt, depth + 1), dim=1)))
        return cat(F, walk(F, left, right, roots, x.shape[0], body, 0))


@program(*BIN)
class WhereSelectsBetweenChildren(_Net):
    """F.where picks, per feature, the larger child's value; pick reads a column by index."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        def combine(a, b, i):
            m = F.where(a > b, a, b)
            col = F.pick(m, F.zeros((1,)), axis=1, keepdims=True)
            return F.tanh(F.broadcast_add(self.u(m), col))
        return self.roots(F, self.tree(F, x, left, right, combine=combine), roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        def combine(a, b, i):
            m = F.where(a > b, a, b)
            return F.tanh(self.u(m) + m[:, 0:1])
        return self.plain_tree(F, x, left, right, roots, combine=combine)


@program(*BIN)
class RecursionOnANormalisedCopyPerCall(_Net):
    """The leaves read x normalised by its own norm (per call), the roots' rows then L2-
    normalised by the block."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        xn = F.broadcast_div(x, F.norm(x) + 1)
        h = self.roots(F, self.tree(F, xn, left, right), roots)
        return F.L2Normalization(h + 1e-3)

    def plain_forward(self, F, x, left, right, roots, bias):
        h = self.plain_tree(F, x / (F.norm(x) + 1), left, right, roots)
        return F.L2Normalization(h + 1e-3)


@program(*BIN)
class LeafBranchOnAStaticFlagPerFunction(_Net):
    """Two recursions made by one factory with a Python flag: mean or max leaves."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        outs = []
        for flag in (False, True):
            leaf = (lambda i: F.broadcast_mul(F.max(F.take(x, i), axis=1, keepdims=True),
                                              F.ones((1, H)))) \
                if flag else (lambda i: F.broadcast_mul(
                    F.mean(F.take(x, i), axis=1, keepdims=True), F.ones((1, H))))
            outs.append(self.roots(F, self.tree(F, x, left, right, "s%d" % flag, leaf=leaf),
                                   roots))
        return outs

    def plain_forward(self, F, x, left, right, roots, bias):
        return [self.plain_tree(F, x, left, right, roots,
                                leaf=lambda i: F.mean(x[i:i + 1], axis=1, keepdims=True) *
                                F.ones((1, H))),
                self.plain_tree(F, x, left, right, roots,
                                leaf=lambda i: F.max(x[i:i + 1], axis=1, keepdims=True) *
                                F.ones((1, H)))]


# ---- (F) more cells and heads ---------------------------------------------------------------

@program(*BIN)
class HeadRandomUniformTimesZero(_Tree):
    """A random operator in the block's graph (its draw multiplied by 0): inference stays the
    Custom operator's; the value is the rows'."""

    def head(self, F, h, x, bias):
        return F.broadcast_add(h, F.random.uniform(shape=(1, H)) * 0)


@program(*BIN)
class LeafRandomNormalTimesZero(_Net):
    """A random operator inside the recursion's leaf (its draw multiplied by 0)."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        node = self.tree(F, x, left, right, leaf=lambda i: F.take(x, i) + F.random.normal(
            shape=(1, H)) * 0)
        return self.roots(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        return self.plain_tree(F, x, left, right, roots)


class _CellCombine(_Net):
    """``_combine(F, a, b)`` (a program's cell) combines the children."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        return self.roots(F, self.tree(F, x, left, right,
                                       combine=lambda a, b, i: self._combine(F, a, b)), roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        return self.plain_tree(F, x, left, right, roots,
                               combine=lambda a, b, i: self._combine(F, a, b))


@program(*BIN)
class LstmCellCombine(_CellCombine):
    """An rnn.LSTMCell combines the children (its input their sum, its state the left's)."""

    def more(self):
        self.cell = mx.gluon.rnn.LSTMCell(H, input_size=H)

    def _combine(self, F, a, b):
        out, _ = self.cell(a + b, [a, b])
        return out


@program(*BIN)
class GruCellAndLayerNormCombine(_CellCombine):
    """A GRUCell then LayerNorm combine the children."""

    def more(self):
        self.cell = mx.gluon.rnn.GRUCell(H, input_size=H)
        self.norm = nn.LayerNorm(in_channels=H)

    def _combine(self, F, a, b):
        out, _ = self.cell(a, [b])
        return self.norm(out)


@program(*BIN)
class MxnetForeachInsideTheCombine(_Net):
    """MXNet's own F.contrib.foreach inside the combination (scans the two children)."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        def combine(a, b, i):
            outs, last = F.contrib.foreach(lambda d, s: (F.tanh(self.u(d) + s),
                                                         F.tanh(self.u(d) + s)),
                                           F.stack(a, b), F.zeros_like(a))
            return last + F.sum(outs, axis=0)
        return self.roots(F, self.tree(F, x, left, right, combine=combine), roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        def combine(a, b, i):
            s = F.zeros_like(a)
            total = F.zeros_like(a)
            for d in (a, b):
                s = F.tanh(self.u(d) + s)
                total = total + s
            return s + total
        return self.plain_tree(F, x, left, right, roots, combine=combine)


@program(*BIN)
class RematRecursionInPrediction(_Net):
    """``remat=True`` on the recursion (recomputed in backward), a Dense head."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        def body(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(x, i),
                lambda: F.tanh(self.w(F.concat(node(F.take(left, i)), node(F.take(right, i)),
                                               dim=1))))
        node = gluon_cf.recursive(body, remat=True)
        return self.u(self.roots(F, node, roots))

    def plain_forward(self, F, x, left, right, roots, bias):
        return self.u(self.plain_tree(F, x, left, right, roots))


@program(*BIN)
class SecondRecursionRootsFromTheFirstsArgmax(_Net):
    """The second recursion's roots are computed from the first's rows (argmax of their
    feature sums picks a root among the first's roots): data-decided roots."""
    TOL = (1e-4, 1e-5)

    def hybrid_forward(self, F, x, left, right, roots, bias):
        a = self.roots(F, self.tree(F, x, left, right, "a"), roots)
        pick = F.argmax(F.sum(a, axis=1), axis=0)
        root2 = F.take(roots, pick)
        b = self.roots(F, self.tree(F, x * -1, left, right, "b"), root2)
        return a, b

    def plain_forward(self, F, x, left, right, roots, bias):
        a = self.plain_tree(F, x, left, right, roots)
        pick = int(F.argmax(F.sum(a, axis=1), axis=0).asscalar())
        return a, self.plain_tree(F, x * -1, left, right, roots[pick:pick + 1])


@program(*BIN)
class HeadReordersRowsByArgsort(_Tree):
    """The rows reordered by the argsort of their first feature (take with the indices)."""

    def head(self, F, h, x, bias):
        order = F.argsort(F.slice_axis(h, axis=1, begin=0, end=1).reshape((-1,)))
        return F.take(h, order), order


@program(*BIN)
class LeafBroadcastsTheBiasLikeItsRow(_Net):
    """Leaves: zeros_like(row) + bias, as broadcast_like (one row per invocation)."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        node = self.tree(F, x, left, right, leaf=lambda i: F.zeros_like(F.take(x, i)) +
                         F.broadcast_like(bias, F.take(x, i)))
        return self.roots(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        return self.plain_tree(F, x, left, right, roots, leaf=lambda i: bias)


@program(*BIN)
class ExplicitInvokeOfTheRecursiveFunction(_Net):
    """``gluon_cf.invoke(fn, i)`` in place of calling the recursive function."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        def body(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(x, i) * 3,
                lambda: F.tanh(self.w(F.concat(gluon_cf.invoke(node, F.take(left, i)),
                                               gluon_cf.invoke(node, F.take(right, i)),
                                               dim=1))))
        node = gluon_cf.recursive(body, name="invoked")
        hs, _ = gluon_cf.foreach(lambda r, _: (gluon_cf.invoke(node, r), []), roots, [])
        return F.reshape(hs, (-3, -2))

    def plain_forward(self, F, x, left, right, roots, bias):
        return self.plain_tree(F, x, left, right, roots, leaf=lambda i: x[i:i + 1] * 3)


@program(*BIN)
class OutputsSlicedAndReshapedAfterward(_Tree):
    """The rows sliced to two features, flattened, reshaped to (-1, 1) and summed by row."""

    def head(self, F, h, x, bias):
        two = F.slice_axis(h, axis=1, begin=1, end=3)
        flat = F.reshape(two, (-1, 1))
        return flat, F.sum(two, axis=1, keepdims=True)


@program(*BIN)
class ChildrenAttentionSoftmax(_Net):
    """Attention over the two children: a softmax of their v-scores weighs them."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        def combine(a, b, i):
            scores = F.softmax(F.concat(self.v(a), self.v(b), dim=1), axis=1)
            wa = F.slice_axis(scores, axis=1, begin=0, end=1)
            wb = F.slice_axis(scores, axis=1, begin=1, end=2)
            return F.tanh(self.u(F.broadcast_mul(a, wa) + F.broadcast_mul(b, wb)))
        return self.roots(F, self.tree(F, x, left, right, combine=combine), roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        def combine(a, b, i):
            scores = F.softmax(F.concat(self.v(a), self.v(b), dim=1), axis=1)
            return F.tanh(self.u(a * scores[:, 0:1] + b * scores[:, 1:2]))
        return self.plain_tree(F, x, left, right, roots, combine=combine)


@program(*NARY)
class NaryCountAndMeanFloat64Count(_Net):
    """N-ary: the subtree's node count as float64 and the mean of the children's rows."""

    def hybrid_forward(self, F, x, ptr, cidx, roots, bias):
        @gluon_cf.recursive
        def node(i):
            start, end = F.take(ptr, i), F.take(ptr, i + 1)
            _, (_, total, count) = gluon_cf.while_loop(
                lambda k, t, c: k < end,
                lambda k, t, c: (None, [k + 1, t + node(F.take(cidx, k))[0],
                                        c + node(F.take(cidx, k))[1]]),
                [start, F.zeros((1, H)), F.zeros((1, 1), dtype="float64")], max_iterations=6)
            kids = F.reshape(end - start, (1, 1))
            mean = F.broadcast_div(total, F.maximum(kids, F.ones_like(kids)))
            return [F.tanh(self.u(F.take(x, i)) + mean), count + 1]
        (h, c), _ = gluon_cf.foreach(lambda r, _: (list(node(r)), []), roots, [])
        return F.reshape(h, (-3, -2)), c

    def plain_forward(self, F, x, ptr, cidx, roots, bias):
        def body(node, i, kids):
            total, count = F.zeros((1, H)), F.zeros((1, 1), dtype="float64")
            for c in kids:
                h, n = node(c)
                total, count = total + h, count + n
            mean = total / max(len(kids), 1)
            return [F.tanh(self.u(x[i:i + 1]) + mean), count + 1]
        res = nary_walk(F, x, ptr, cidx, roots, body)
        return F.concat(*[r[0] for r in res], dim=0), F.stack(*[r[1] for r in res])


@program(*BIN)
class LeafCondOnASharedPredicateReturnsTheBias(_Net):
    """A leaf's cond whose predicate reads only the bias parameter (the same for every row of
    a batch): the bias itself, or the leaf's row; the bias's sum decides."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        leaf = lambda i: gluon_cf.cond(F.sum(bias) > 0.3, lambda: bias,   # noqa: E731
                                       lambda: F.take(x, i))
        return self.roots(F, self.tree(F, x, left, right, leaf=leaf), roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        use = float(F.sum(bias).asscalar()) > 0.3
        return self.plain_tree(F, x, left, right, roots,
                               leaf=lambda i: bias if use else x[i:i + 1])


@program(*BIN)
class InternalCondOnASharedPredicateReturnsAConstant(_Net):
    """An internal node's cond on the bias's sum: a constant ones((1, H)) or the combination."""

    def hybrid_forward(self, F, x, left, right, roots, bias):
        def combine(a, b, i):
            return gluon_cf.cond(F.sum(bias) < 0.3, lambda: F.ones((1, H)) * 0.25,
                                 lambda: F.tanh(self.w(F.concat(a, b, dim=1))))
        return self.roots(F, self.tree(F, x, left, right, combine=combine), roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        const = float(F.sum(bias).asscalar()) < 0.3
        return self.plain_tree(F, x, left, right, roots, combine=lambda a, b, i: F.ones(
            (1, H)) * 0.25 if const else F.tanh(self.w(F.concat(a, b, dim=1))))
