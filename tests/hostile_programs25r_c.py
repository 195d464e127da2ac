"""Issue 24, hostile recursion round 25r (c): one function called on two index arrays, sorted
and transposed children, per-node classifiers summed over the tree, outputs no caller reads,
leaves reading an embedding's weight by ``take``, two functions of one factory differing by a
static flag, int32 indices, n-ary decoders whose number of children the values decide, two
recursions over swapped children. Oracles: each block's ``plain_forward`` (plain Python
recursion on NDArrays)."""
import numpy as np
from mxnet.gluon import nn

import gluon_cf

import hostile_harness
from hostile_programs4 import _ids, _row
from hostile_programs14 import _rows_of
from hostile_programs25r import BIN, H, TOKENS, V, _Combining, _Net, cat, rows_tuple, walk
from hostile_programs25r_b import STARTS, DagSharedSubtreesRepeatedRoots

PROGRAMS, program = hostile_harness.program_registry()
floats = hostile_harness.floats


@program(*BIN)
class SameFunctionOnRootsAndLeftChildren(_Net):
    """One recursive function called twice per root: on the root and on its left child (a
    leaf root's is row 0, MXNet's take clipping -1)."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(x, i),
                lambda: F.tanh(self.u(node(F.take(left, i))) + node(F.take(right, i))))
        hs, _ = gluon_cf.foreach(
            lambda r, _: ([node(r), node(F.take(left, r))], []), roots, [])
        return F.reshape(hs[0], (-3, -2)) - F.reshape(hs[1], (-3, -2))

    def plain_forward(self, F, x, left, right, roots, **kw):
        lt = _ids(left)

        def body(node, i, l, r):
            return x[i:i + 1] if l < 0 else F.tanh(self.u(node(l)) + node(r))
        a = cat(F, walk(F, left, right, roots, x.shape[0], body))
        kids = floats(*[lt[_row(r, x.shape[0])] for r in _ids(roots)])
        return a - cat(F, walk(F, left, right, F.array(kids), x.shape[0], body))


@program(*BIN)
class SortedChildrenFeaturesIntoDense(_Net):
    """The children's features concatenated and sorted along the feature axis (per row)."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(x, i),
                lambda: F.tanh(self.w(F.sort(F.concat(node(F.take(left, i)),
                                                      node(F.take(right, i)), dim=1), axis=1))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                return x[i:i + 1]
            return F.tanh(self.w(F.sort(F.concat(node(lt), node(rt), dim=1), axis=1)))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class StackTransposeReshapeChildren(_Combining):
    """Children stacked on a new axis 2, transposed (0, 2, 1), reshaped (0, -1) into w."""

    def _combine(self, F, hl, hr):
        both = F.stack(hl, hr, axis=2).transpose((0, 2, 1)).reshape((0, -1))
        return F.tanh(self.w(both))


@program(*BIN)
class ClassifierAtEveryNodeSummed(_Net):
    """As an SST TreeLSTM trains: every node's log_softmax over 2 classes, summed over the
    subtree and returned with h; clip and smooth_l1 on the way."""

    def extra(self):
        self.cls = nn.Dense(2, in_units=H, flatten=False)

    def _score(self, F, h):
        return F.log_softmax(self.cls(F.clip(h, -0.8, 0.8)), axis=1)

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def leaf():
                h = F.smooth_l1(F.take(x, i), scalar=1.0)
                return [h, self._score(F, h)]

            def internal():
                hl, sl = node(F.take(left, i))
                hr, sr = node(F.take(right, i))
                h = F.tanh(self.w(F.concat(hl, hr, dim=1)))
                return [h, sl + sr + self._score(F, h)]
            return gluon_cf.cond(F.take(left, i) < 0, leaf, internal)
        return rows_tuple(F, node, roots, 2)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            if lt < 0:
                h = F.smooth_l1(x[i:i + 1], scalar=1.0)
                return [h, self._score(F, h)]
            (hl, sl), (hr, sr) = node(lt), node(rt)
            h = F.tanh(self.w(F.concat(hl, hr, dim=1)))
            return [h, sl + sr + self._score(F, h)]
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*BIN)
class SecondOutputNoCallerReads(_Net):
    """Each call returns (h, a product no caller reads); the block returns only h."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i):
            def internal():
                hl, _ = node(F.take(left, i))
                hr, _ = node(F.take(right, i))
                h = F.tanh(self.u(hl) + hr)
                return [h, h * hl * 100]
            return gluon_cf.cond(F.take(left, i) < 0,
                                 lambda: [F.take(x, i), F.exp(F.take(x, i))], internal)
        return rows_tuple(F, node, roots, 1)[0]

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt):
            return x[i:i + 1] if lt < 0 else F.tanh(self.u(node(lt)) + node(rt))
        return cat(F, walk(F, left, right, roots, x.shape[0], body))


@program(*TOKENS)
class LeafTakesEmbeddingWeight(_Net):
    """Leaves read a row of a (V, H) parameter by ``F.take`` of their token (the Embedding
    written by hand), internal nodes a gated sum."""

    NO_GRAD = (0, 1, 2, 3)

    def extra(self):
        self.table = self.params.get("table", shape=(V, H))

    def hybrid_forward(self, F, toks, left, right, roots, table, **kw):
        @gluon_cf.recursive
        def node(i):
            def internal():
                hl, hr = node(F.take(left, i)), node(F.take(right, i))
                return F.sigmoid(self.u(hl)) * hl + hr
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(table, F.take(toks, i)),
                                 internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, toks, left, right, roots, table, **kw):
        t = _ids(toks)

        def body(node, i, lt, rt):
            if lt < 0:
                return table[t[i]:t[i] + 1]
            hl, hr = node(lt), node(rt)
            return F.sigmoid(self.u(hl)) * hl + hr
        return cat(F, walk(F, left, right, roots, toks.shape[0], body))


@program(*BIN)
class TwoFunctionsOfOneFactoryStaticFlag(_Net):
    """One Python factory makes two recursive functions differing by a static flag (gated or
    not); the gated one handles left children, the plain one right children."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        table = {}

        def make(gated):
            def body(i):
                def internal():
                    hl, hr = table[True](F.take(left, i)), table[False](F.take(right, i))
                    h = hl + hr
                    if gated:                    # a Python branch: two graphs
                        h = h * F.sigmoid(self.u(h))
                    return F.tanh(h)
                return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) * (
                    2 if gated else -1), internal)
            return gluon_cf.recursive(body, name="gated" if gated else "plain")
        table[True], table[False] = make(True), make(False)
        return _rows_of(F, table[False], roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt, gated):
            if lt < 0:
                return x[i:i + 1] * (2 if gated else -1)
            h = node(lt, True) + node(rt, False)
            return F.tanh(h * F.sigmoid(self.u(h)) if gated else h)
        return cat(F, walk(F, left, right, roots, x.shape[0], body, False))


@program(*[[a[0]] + [v.astype(np.int32) for v in a[1:]] for a in BIN])
class Int32IndexArrays(DagSharedSubtreesRepeatedRoots):
    """The TreeRNN with left, right and roots as int32 arrays (the indices' dtype)."""


@program(*STARTS)
class NaryDecoderChildCountFromValue(_Net):
    """An n-ary generator: a node makes 1 + (its first feature > 0) children in a while_loop
    (depth < 2), child k's state tanh(u(h) + k); sums the leaves."""

    NO_GRAD = ()

    def hybrid_forward(self, F, starts, **kw):
        @gluon_cf.recursive
        def node(h, d):
            first = F.slice_axis(h, axis=1, begin=0, end=1).reshape((-1,))
            count = 1 + (first > 0)

            def expand():
                _, (_, acc) = gluon_cf.while_loop(
                    lambda k, acc: k < count,
                    lambda k, acc: ([], [k + 1, acc + node(
                        F.tanh(F.broadcast_add(self.u(h), k.reshape((-1, 1)))), d + 1)]),
                    [F.zeros_like(d), F.zeros_like(h)], max_iterations=2)
                return acc
            return gluon_cf.cond(d < 2, expand, lambda: h)
        hs, _ = gluon_cf.foreach(lambda s, _: (node(s.expand_dims(0), F.zeros((1,))), []),
                                 starts, [])
        return F.reshape(hs, (-3, -2))

    def plain_forward(self, F, starts, **kw):
        def node(h, d):
            if d >= 2:
                return h
            acc = F.zeros_like(h)
            for k in range(1 + int(float(h[0, 0].asscalar()) > 0)):
                acc = acc + node(F.tanh(self.u(h) + k), d + 1)
            return acc
        return F.concat(*[node(starts[k:k + 1], 0) for k in range(starts.shape[0])], dim=0)


@program(*BIN)
class TwoRecursionsOverSwappedChildren(_Net):
    """Two recursive functions, one walking (left, right), one (right, left) with another
    combination; the block returns their difference."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def lr(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(x, i),
                lambda: F.tanh(self.w(F.concat(lr(F.take(left, i)), lr(F.take(right, i)),
                                               dim=1))))

        @gluon_cf.recursive
        def rl(i):
            return gluon_cf.cond(
                F.take(right, i) < 0, lambda: F.take(x, i) * 0.5,
                lambda: self.u(rl(F.take(right, i))) * rl(F.take(left, i)))
        return _rows_of(F, lr, roots) - _rows_of(F, rl, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        def a(node, i, lt, rt):
            return x[i:i + 1] if lt < 0 else F.tanh(self.w(F.concat(node(lt), node(rt), dim=1)))

        def b(node, i, lt, rt):   # (walked with left and right swapped)
            return x[i:i + 1] * 0.5 if lt < 0 else self.u(node(lt)) * node(rt)
        n = x.shape[0]
        return cat(F, walk(F, left, right, roots, n, a)) - \
            cat(F, walk(F, right, left, roots, n, b))


@program(*BIN)
class ParentStateGatesChildrenTopDownAndUp(_Net):
    """Down and up in one function: node(i, p) passes sigmoid(u(p)) down as the children's
    gate and returns the gated sum of their results plus its own row."""

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        @gluon_cf.recursive
        def node(i, p):
            def internal():
                g = F.sigmoid(self.u(p))
                return g * node(F.take(left, i), g) + (1 - g) * node(F.take(right, i), -g) + \
                    F.take(x, i)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) + p, internal)
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r, F.zeros((1, H))), []), roots, [])
        return F.reshape(hs, (-3, -2))

    def plain_forward(self, F, x, left, right, roots, **kw):
        def body(node, i, lt, rt, p):
            if lt < 0:
                return x[i:i + 1] + p
            g = F.sigmoid(self.u(p))
            return g * node(lt, g) + (1 - g) * node(rt, -g) + x[i:i + 1]
        return cat(F, walk(F, left, right, roots, x.shape[0], body, F.zeros((1, H))))


