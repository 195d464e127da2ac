"""Issue 24, seventh round (recursion and export): users' own ``@gluon_cf.recursive`` functions
written the way people port tree models: an ``LSTMCell`` and several blocks' parameters read
inside the recursion, tuples with an output left unused, three functions calling each other
with tuples, recursion under a top-level ``cond`` and in an autograph ``for`` over roots,
``boolean_mask`` in a leaf, default and keyword arguments, wide CSR nodes, float16 and int32
features, ``max_depth`` exactly the tree's depth, a recursion whose results feed an RNN
``foreach``. Each block's ``plain_forward`` is the same model as plain Python recursion on
NDArrays, reading the indices on the host (the oracle)."""
import mxnet as mx
import numpy as np
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness
from hostile_programs4 import (DEEPER, FORESTS, SHARED, SINGLE, TWO_TREES, X7, _ids,
                               _plain_binary, _row)

PROGRAMS, program = hostile_harness.program_registry()

_rand = hostile_harness.rand
_f = hostile_harness.floats


def _foreach_roots(F, node, roots):
    hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
    return F.reshape(hs, (-3, 0))


@program(*FORESTS)
class LstmCellInsideRecursion(HybridBlock):
    """A gluon ``LSTMCell`` combines the children's (h, c) at every internal node."""
    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = mx.gluon.rnn.LSTMCell(3, input_size=3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)

            def internal():
                lh, lc = node(F.take(left, idx))
                rh, rc = node(F.take(right, idx))
                out, (h, c) = self.cell(here, [lh + rh, lc + rc])
                return out, c
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: (F.tanh(here), here),
                                 internal)
        return _foreach_roots(F, lambda r: node(r)[0], roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return F.tanh(here), here
            lh, lc = node(lt[i])
            rh, rc = node(rt[i])
            out, (h, c) = self.cell(here, [lh + rh, lc + rc])
            return out, c
        return F.concat(*[node(r)[0] for r in _ids(roots)], dim=0)


@program(*FORESTS)
class ParametersOfThreeBlocks(HybridBlock):
    """A leaf projection, a mixing Dense and the block's own parameter (a hybrid_forward
    keyword), all read inside the recursive function."""
    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.leaf_proj = mx.gluon.nn.Dense(3, in_units=3, flatten=False)
            self.mix = mx.gluon.nn.Dense(3, in_units=6, flatten=False)
            self.scale = self.params.get("scale", shape=(1, 3), init=mx.init.Constant(0.7))

    def hybrid_forward(self, F, x, left, right, roots, scale):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)
            return gluon_cf.cond(
                F.take(left, idx) < 0, lambda: F.tanh(self.leaf_proj(here)),
                lambda: F.broadcast_mul(self.mix(F.concat(
                    node(F.take(left, idx)), node(F.take(right, idx)), dim=1)), scale) + here)
        return _foreach_roots(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, scale):
        return _plain_three_blocks(self, F, x, left, right, roots, scale)


def _plain_three_blocks(net, F, x, left, right, roots, scale):
    lt, rt, n = _ids(left), _ids(right), x.shape[0]

    def node(i):
        i = _row(i, n)
        here = F.take(x, F.array([i]))
        if lt[i] < 0:
            return F.tanh(net.leaf_proj(here))
        return F.broadcast_mul(net.mix(F.concat(node(lt[i]), node(rt[i]), dim=1)),
                               scale) + here
    return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class PairWithAnUnusedOutput(HybridBlock):
    """The function returns (value, count of leaves); the caller uses only the value."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)

            def internal():
                a, na = node(F.take(left, idx))
                b, nb = node(F.take(right, idx))
                return F.tanh(here + a * 0.5 - b), na + nb
            return gluon_cf.cond(F.take(left, idx) < 0,
                                 lambda: (here, F.ones_like(idx)), internal)
        return _foreach_roots(F, lambda r: node(r)[0], roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots,
                             lambda F, here, a, b: F.tanh(here + a * 0.5 - b))


@program(*FORESTS)
class ThreeFunctionCycleOfPairs(HybridBlock):
    """a -> b -> c -> a, each returning (sum, max) of its subtree, combined differently."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        def children(fn, idx):
            (s1, m1), (s2, m2) = fn(F.take(left, idx)), fn(F.take(right, idx))
            return s1, m1, s2, m2

        def leaf(idx, k):
            return F.take(x, idx) * k, F.take(x, idx)

        @gluon_cf.recursive
        def a(idx):
            def inner():
                s1, m1, s2, m2 = children(b, idx)
                return s1 + s2 + F.take(x, idx), F.maximum(m1, m2)
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: leaf(idx, 1.0), inner)

        @gluon_cf.recursive
        def b(idx):
            def inner():
                s1, m1, s2, m2 = children(c, idx)
                return s1 - s2, F.maximum(F.maximum(m1, m2), F.take(x, idx))
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: leaf(idx, 2.0), inner)

        @gluon_cf.recursive
        def c(idx):
            def inner():
                s1, m1, s2, m2 = children(a, idx)
                return s1 * s2, F.minimum(m1, m2)
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: leaf(idx, 3.0), inner)
        hs, _ = gluon_cf.foreach(lambda r, _: (list(a(r)), []), roots, [])
        return F.reshape(hs[0], (-3, 0)), F.reshape(hs[1], (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def fn(i, k):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return here * (k + 1.0), here
            (s1, m1), (s2, m2) = fn(lt[i], (k + 1) % 3), fn(rt[i], (k + 1) % 3)
            if k == 0:
                return s1 + s2 + here, F.maximum(m1, m2)
            if k == 1:
                return s1 - s2, F.maximum(F.maximum(m1, m2), here)
            return s1 * s2, F.minimum(m1, m2)
        outs = [fn(r, 0) for r in _ids(roots)]
        return F.concat(*[s for s, _ in outs], dim=0), F.concat(*[m for _, m in outs], dim=0)


@program(*FORESTS)
class RecursionUnderTopLevelCond(HybridBlock):
    """In the loop over roots, a cond decides whether to recurse: leaves are not visited
    through the function at all."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx) * 2,
                                 lambda: F.tanh(F.take(x, idx) - node(F.take(left, idx)) *
                                                node(F.take(right, idx))))
        return _foreach_roots(F, lambda r: gluon_cf.cond(
            F.take(left, r) < 0, lambda: F.take(x, r) - 10, lambda: node(r)), roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return here * 2
            return F.tanh(here - node(lt[i]) * node(rt[i]))
        return F.concat(*[F.take(x, F.array([_row(r, n)])) - 10 if lt[_row(r, n)] < 0
                          else node(r) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class AutographForOverRoots(HybridBlock):
    """A tensor ``for`` over the roots (autograph) summing the recursion's results."""
    NO_GRAD = (1, 2, 3)

    @autograph
    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)
            if F.take(left, idx) < 0:
                return here
            return here * 0.5 + node(F.take(left, idx)) * node(F.take(right, idx))
        total = F.zeros_like(F.slice_axis(x, axis=0, begin=0, end=1))
        for r in roots:
            total = total + node(F.reshape(r, (1,)))
        return total

    def plain_forward(self, F, x, left, right, roots):
        out = _plain_binary(F, x, left, right, roots,
                            lambda F, here, a, b: here * 0.5 + a * b)
        return F.sum(out, axis=0, keepdims=True)


@program(*FORESTS)
class BooleanMaskInLeaf(HybridBlock):
    """A leaf sums the positive entries of its row (boolean_mask; a row with none would keep
    no entry, so the row's max is kept too)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            row = F.reshape(F.take(x, idx), (-1,))
            keep = F.broadcast_logical_or(row > 0, F.broadcast_equal(row, F.max(row)))

            def leaf():
                return F.reshape(F.sum(F.contrib.boolean_mask(row, keep)), (1, 1))
            return gluon_cf.cond(F.take(left, idx) < 0, leaf,
                                 lambda: node(F.take(left, idx)) - node(F.take(right, idx)) +
                                 F.reshape(F.sum(row), (1, 1)))
        return _foreach_roots(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            row = F.reshape(F.take(x, F.array([i])), (-1,))
            if lt[i] < 0:
                keep = F.broadcast_logical_or(row > 0, row == F.max(row))
                return F.reshape(F.sum(F.contrib.boolean_mask(row, keep)), (1, 1))
            return node(lt[i]) - node(rt[i]) + F.reshape(F.sum(row), (1, 1))
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class DefaultArgumentNotPassed(HybridBlock):
    """``def node(idx, scale=0.5)`` called with the index only, down the tree."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx, scale=0.5):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx),
                                 lambda: F.take(x, idx) + node(F.take(left, idx)) * scale -
                                 node(F.take(right, idx)))
        return _foreach_roots(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots,
                             lambda F, here, a, b: here + a * 0.5 - b)


@program(*FORESTS)
class KeywordArgumentCall(HybridBlock):
    """The recursive call names its argument: ``node(idx=...)``."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx),
                                 lambda: F.take(x, idx) + node(idx=F.take(left, idx)) -
                                 node(idx=F.take(right, idx)))
        return _foreach_roots(F, lambda r: node(idx=r), roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots, lambda F, here, a, b: here + a - b)


X14 = _rand(14, 3, seed=3)
WIDE = [X14, _f(0, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12),
        _f(*range(1, 13)), _f(0, 13)]                       # 0 has 12 children; 13 alone
WIDE2 = [X14, _f(0, 2, 2, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5), _f(1, 2, 3, 4, 5),
         _f(0, 2)]                                          # 0:(1,2) 2:(3,4,5)
CSR_LEAF = [X14[:1], _f(0, 0), _f(0), _f(0)]


@program(WIDE, WIDE2, CSR_LEAF)
class VeryWideCsrNodes(HybridBlock):
    """n-ary trees as CSR with up to 12 children a node: a while over the children with a
    bound of exactly 12 steps."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, ptr, cidx, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)
            _, (_, total, big) = gluon_cf.while_loop(
                lambda k, s, m: k < F.take(ptr, idx + 1),
                lambda k, s, m: ([], [k + 1, s + node(F.take(cidx, k)),
                                      F.maximum(m, F.max(node(F.take(cidx, k))))]),
                [F.take(ptr, idx), F.zeros_like(here), F.zeros((1,)) - 5], max_iterations=12)
            return F.broadcast_add(F.tanh(here + total * 0.25), F.reshape(big, (1, 1)))
        return _foreach_roots(F, node, roots)

    def plain_forward(self, F, x, ptr, cidx, roots):
        p, c, n = _ids(ptr), _ids(cidx), x.shape[0]

        def node(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            total, big = F.zeros_like(here), F.zeros((1,)) - 5
            for k in range(p[i], p[i + 1]):
                total = total + node(c[k])
                big = F.maximum(big, F.max(node(c[k])))
            return F.tanh(here + total * 0.25) + F.reshape(big, (1, 1))
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*[[f[0].astype(np.float16)] + f[1:] for f in FORESTS])
class Float16Features(HybridBlock):
    """float16 features, float32 indices."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx),
                                 lambda: F.take(x, idx) * 0.5 + node(F.take(left, idx)) -
                                 node(F.take(right, idx)) * 0.25)
        return _foreach_roots(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots,
                             lambda F, here, a, b: here * 0.5 + a - b * 0.25)


INT_FORESTS = [[(f[0] * 10).astype(np.int32), f[1].astype(np.int32), f[2].astype(np.int32),
                f[3].astype(np.int32)] for f in FORESTS]


@program(*INT_FORESTS)
class Int32FeaturesAndIndices(HybridBlock):
    """Everything int32: a subtree's sum and its largest value."""
    NO_GRAD = (0, 1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx),
                                 lambda: F.take(x, idx) + node(F.take(left, idx)) * 2 -
                                 node(F.take(right, idx)))
        return _foreach_roots(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            here = F.take(x, F.array([i], dtype="int32"))
            if lt[i] < 0:
                return here
            return here + node(lt[i]) * 2 - node(rt[i])
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*[[f[0].astype(np.float64), f[1].astype(np.float64), f[2].astype(np.float64),
            f[3].astype(np.float64)] for f in FORESTS])
class Float64Everything(HybridBlock):
    """float64 features and float64 indices, a Dense in float64 inside the recursion."""
    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.mix = mx.gluon.nn.Dense(3, in_units=3, flatten=False, dtype="float64")

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx),
                                 lambda: F.tanh(self.mix(node(F.take(left, idx)) +
                                                         node(F.take(right, idx)))))
        return _foreach_roots(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots,
                             lambda F, here, a, b: F.tanh(self.mix(a + b)))


@program(DEEPER, TWO_TREES, SINGLE)
class MaxDepthIsExactlyTheDepth(HybridBlock):
    """DEEPER is four nested calls deep (0, 1, 3, 4): max_depth=4 must run it in every mode
    (no off-by-one)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive(max_depth=4)
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx),
                                 lambda: node(F.take(left, idx)) * 2 + node(F.take(right, idx)))
        return _foreach_roots(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots, lambda F, here, a, b: a * 2 + b)


@program(*FORESTS)
class RecursionFeedsAnRnnForeach(HybridBlock):
    """The roots' vectors, in order, run through an RNN foreach afterwards."""
    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.rnn = mx.gluon.rnn.RNNCell(3, input_size=3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx),
                                 lambda: F.tanh(F.take(x, idx) + node(F.take(left, idx)) -
                                                node(F.take(right, idx))))
        seq = F.expand_dims(_foreach_roots(F, node, roots), axis=1)     # (roots, 1, 3)
        outs, last = gluon_cf.foreach(lambda v, s: self.rnn(v, s), seq,
                                      [F.zeros((1, 3))])
        return outs, last[0]

    def plain_forward(self, F, x, left, right, roots):
        seq = _plain_binary(F, x, left, right, roots,
                            lambda F, here, a, b: F.tanh(here + a - b))
        s, outs = [F.zeros((1, 3))], []
        for k in range(seq.shape[0]):
            out, s = self.rnn(F.slice_axis(seq, axis=0, begin=k, end=k + 1), s)
            outs.append(out)
        return F.stack(*outs), s[0]


@program(*FORESTS)
class LeftChildCalledTwice(HybridBlock):
    """The left child's call is made twice (no sharing); the right child is never visited."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.sin(F.take(x, idx)),
                                 lambda: node(F.take(left, idx)) * node(F.take(left, idx)) +
                                 F.take(x, idx))
        return _foreach_roots(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, n = _ids(left), x.shape[0]

        def node(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return F.sin(here)
            return node(lt[i]) * node(lt[i]) + here
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class ListFromOneBranchTupleFromTheOther(HybridBlock):
    """A leaf returns a list [h, c], an internal node a tuple (h, c)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)

            def internal():
                lh, lc = node(F.take(left, idx))
                rh, rc = node(F.take(right, idx))
                return F.tanh(lc + rc) + lh, lc - rc + here
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: [here, here * 2], internal)
        return _foreach_roots(F, lambda r: node(r)[0] + node(r)[1], roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return here, here * 2
            lh, lc = node(lt[i])
            rh, rc = node(rt[i])
            return F.tanh(lc + rc) + lh, lc - rc + here
        return F.concat(*[node(r)[0] + node(r)[1] for r in _ids(roots)], dim=0)


@program(*FORESTS)
class UndecoratedHelperBetweenCalls(HybridBlock):
    """A plain Python helper (not recursive itself) calls the recursive function for both
    children and combines them with a method of the block."""
    NO_GRAD = (1, 2, 3)

    def combine(self, F, here, a, b):
        return F.tanh(here + F.broadcast_mul(a, b))

    def hybrid_forward(self, F, x, left, right, roots):
        def both(idx):
            return self.combine(F, F.take(x, idx), node(F.take(left, idx)),
                                node(F.take(right, idx)))

        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx),
                                 lambda: both(idx))
        return _foreach_roots(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots,
                             lambda F, here, a, b: self.combine(F, here, a, b))


@program(*FORESTS)
class PythonIntArgument(HybridBlock):
    """A Python int (a level number) passed as a recursive argument next to the index."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx, level):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx) * level,
                                 lambda: node(F.take(left, idx), level + 1) +
                                 node(F.take(right, idx), level + 1))
        return _foreach_roots(F, lambda r: node(r, 1), roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i, level):
            i = _row(i, n)
            if lt[i] < 0:
                return F.take(x, F.array([i])) * level
            return node(lt[i], level + 1) + node(rt[i], level + 1)
        return F.concat(*[node(r, 1) for r in _ids(roots)], dim=0)


@program(TWO_TREES, SHARED)
class WhereInsteadOfCond(HybridBlock):
    """``F.where`` instead of ``cond``: both sides are computed, so every call recurses (a leaf's
    child -1 is clipped to row 0): no base case. Plain Python recurses until RecursionError."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive(max_depth=40)
        def node(idx):
            here = F.take(x, idx)
            return F.where(F.broadcast_like(F.reshape(F.take(left, idx) < 0, (1, 1)), here),
                           here, here + node(F.take(left, idx)))
        return _foreach_roots(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, n = _ids(left), x.shape[0]

        def node(i, depth=1):
            if depth > 40:
                raise gluon_cf.RecursionDepthError("plain: deeper than 40")
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            return F.where(F.ones_like(here) * (lt[i] < 0), here, here + node(lt[i], depth + 1))
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


KIDS = [X7, _f(1, 2, 3, -1, 4, -1, 5, 6, -1, -1, -1, -1, -1, -1).reshape(7, 2), _f(0)]
KIDS2 = [X7, _f(-1, -1, 0, 3, -1, -1, 4, 5, -1, -1, -1, -1, 1, -1).reshape(7, 2), _f(2, 6, 4)]
KIDS_LEAF = [X7[:1], _f(-1, -1).reshape(1, 2), _f(0)]


@program(KIDS, KIDS2, KIDS_LEAF)
class ForeachOverChildrenCallsTheFunction(HybridBlock):
    """Children as a padded (n, 2) matrix: a foreach over a node's children row calls the
    function in a cond for each real child (recursion inside foreach inside recursion)."""
    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, x, kids, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)

            def step(child, total):
                value = gluon_cf.cond(child < 0, lambda: F.zeros_like(here),
                                      lambda: node(child))
                return value, total + value
            _, total = gluon_cf.foreach(step, F.reshape(F.take(kids, idx), (-1, 1)),
                                        F.zeros_like(here))
            return F.tanh(here + total * 0.5)
        return _foreach_roots(F, node, roots)

    def plain_forward(self, F, x, kids, roots):
        table, n = [[int(v) for v in row] for row in kids.asnumpy()], x.shape[0]

        def node(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            total = F.zeros_like(here)
            for c in table[i]:
                if c >= 0:
                    total = total + node(c)
            return F.tanh(here + total * 0.5)
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class NestedListArgument(HybridBlock):
    """The argument is a nested list ``[idx, [h]]``: a hidden state passed down with the
    index; leaves return their state."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(args):
            idx, (h,) = args
            h = F.tanh(h + F.take(x, idx))
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: h,
                                 lambda: node([F.take(left, idx), [h * 0.5]]) -
                                 node([F.take(right, idx), [h]]))
        return _foreach_roots(F, lambda r: node([r, [F.zeros_like(F.take(x, r))]]), roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i, h):
            i = _row(i, n)
            h = F.tanh(h + F.take(x, F.array([i])))
            if lt[i] < 0:
                return h
            return node(lt[i], h * 0.5) - node(rt[i], h)
        return F.concat(*[node(r, F.zeros((1, 3))) for r in _ids(roots)], dim=0)
