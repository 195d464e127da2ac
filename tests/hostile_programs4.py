"""Issue 24, third round: users' own ``@gluon_cf.recursive`` functions over forests stored as
arrays (left/right child indices, CSR ``ptr``/``cidx``), mutual recursion, tuples, integer and
float arguments, loops inside recursion and recursion inside loops, shared subtrees, repeated
and out-of-range roots, single-node trees. Each block has a ``plain_forward``: the same model
as plain Python recursion on NDArrays, reading the indices on the host (the oracle)."""
import mxnet as mx
import numpy as np
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()


_rand = hostile_harness.rand
_f = hostile_harness.floats


def _row(value, n):
    """The row MXNet's take (mode 'clip') reads."""
    return min(max(int(value), 0), n - 1)


def _ids(a):
    return [int(v) for v in a.asnumpy().ravel()]


# Forests: x (n, 3), left, right, roots
#   two trees: 0 = (1, 2), 3 = (4, (5, 6)); a single-node tree; a shared subtree (node 2 is
#   the child of 0 and of 3); repeated roots; a root out of range (clipped by take)
X7 = _rand(7, 3)
TWO_TREES = [X7, _f(1, -1, -1, 4, -1, -1, -1), _f(2, -1, -1, 5, -1, -1, -1), _f(0, 3)]
DEEPER = [X7, _f(1, 2, -1, 4, -1, -1, -1), _f(6, 3, -1, 5, -1, -1, -1), _f(0)]
SHARED = [X7, _f(1, -1, -1, 2, -1, -1, -1), _f(2, -1, -1, 4, -1, -1, -1), _f(0, 3, 3)]
SINGLE = [X7[:1], _f(-1), _f(-1), _f(0)]
OUT_OF_RANGE = [X7, _f(1, -1, -1, 4, -1, -1, -1), _f(2, -1, -1, 5, -1, -1, -1), _f(9, -2)]
FORESTS = (TWO_TREES, DEEPER, SHARED, SINGLE)


def _plain_binary(F, x, left, right, roots, combine):
    lt, rt, n = _ids(left), _ids(right), x.shape[0]

    def node(i):
        i = _row(i, n)
        here = F.take(x, F.array([i]))
        if lt[i] < 0:
            return here
        return combine(F, here, node(lt[i]), node(rt[i]))
    return F.concat(*[node(r) for r in _ids(roots)], dim=0)


def _combine_tanh(F, here, a, b):
    return F.tanh(here + a + b * 0.5)


@program(*FORESTS)
class BinaryForestSum(HybridBlock):
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx),
                                 lambda: F.tanh(F.take(x, idx) + node(F.take(left, idx)) +
                                                node(F.take(right, idx)) * 0.5))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots, _combine_tanh)


@program(*FORESTS)
class BinaryForestAutographIf(HybridBlock):
    NO_GRAD = (1, 2, 3)

    @autograph
    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)
            if F.take(left, idx) < 0:
                return here
            return F.tanh(here + node(F.take(left, idx)) + node(F.take(right, idx)) * 0.5)
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots, _combine_tanh)


@program(OUT_OF_RANGE, TWO_TREES)
class RootsOutOfRange(BinaryForestSum):
    """take clips an index out of range (MXNet's rule, plain and hybridized alike)."""


@program(*[[f[0], f[1].astype(np.int32), f[2].astype(np.int32), f[3].astype(np.int32)]
           for f in FORESTS])
class IntegerIndexArrays(BinaryForestSum):
    """The same forests with int32 index arrays."""


def _dense_combine(net):
    def combine(F, here, a, b):
        return F.tanh(net.proj(F.concat(here, a, b, dim=1)))
    return combine


@program(*FORESTS)
class BinaryForestWithDense(HybridBlock):
    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.proj = mx.gluon.nn.Dense(3, in_units=9)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            def internal():
                return F.tanh(self.proj(F.concat(F.take(x, idx), node(F.take(left, idx)),
                                                 node(F.take(right, idx)), dim=1)))
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx), internal)
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots, **params):
        return _plain_binary(F, x, left, right, roots, _dense_combine(self))


@program(*FORESTS)
class RecursionReturnsTriple(HybridBlock):
    """(sum, number of nodes, height) of each tree: a tuple of three, two of shape (1, 1)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)

            def leaf():
                return here, F.ones_like(F.slice_axis(here, axis=1, begin=0, end=1)), \
                    F.zeros_like(F.slice_axis(here, axis=1, begin=0, end=1))

            def internal():
                ls, ln, lh = node(F.take(left, idx))
                rs, rn, rh = node(F.take(right, idx))
                return here + ls + rs, ln + rn + 1, F.maximum(lh, rh) + 1
            return gluon_cf.cond(F.take(left, idx) < 0, leaf, internal)
        (s, n, h), _ = gluon_cf.foreach(lambda r, _: (list(node(r)), []), roots, [])
        return F.broadcast_div(F.reshape(s, (-3, 0)), F.reshape(n, (-3, 0))), \
            F.reshape(h, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            one = F.ones((1, 1))
            if lt[i] < 0:
                return here, one, one * 0
            ls, ln, lh = node(lt[i])
            rs, rn, rh = node(rt[i])
            return here + ls + rs, ln + rn + 1, F.maximum(lh, rh) + 1
        outs = [node(r) for r in _ids(roots)]
        return F.concat(*[s / k for s, k, _ in outs], dim=0), \
            F.concat(*[h for _, _, h in outs], dim=0)


@program(*FORESTS)
class MutualRecursionAlternating(HybridBlock):
    """Even levels add, odd levels multiply: two functions calling each other."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def even(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx),
                                 lambda: F.take(x, idx) + odd(F.take(left, idx)) +
                                 odd(F.take(right, idx)))

        @gluon_cf.recursive
        def odd(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.tanh(F.take(x, idx)),
                                 lambda: F.take(x, idx) * even(F.take(left, idx)) *
                                 even(F.take(right, idx)))
        hs, _ = gluon_cf.foreach(lambda r, _: (even(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i, level):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return here if level == 0 else F.tanh(here)
            a, b = node(lt[i], 1 - level), node(rt[i], 1 - level)
            return here + a + b if level == 0 else here * a * b
        return F.concat(*[node(r, 0) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class ThreeWayMutualRecursion(HybridBlock):
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        def make(scale, nxt):
            @gluon_cf.recursive
            def fn(idx):
                return gluon_cf.cond(
                    F.take(left, idx) < 0, lambda: F.take(x, idx) * scale,
                    lambda: F.tanh(F.take(x, idx) + nxt[0](F.take(left, idx)) -
                                   nxt[0](F.take(right, idx)) * scale))
            return fn
        links = [[None], [None], [None]]
        a, b, c = make(1.0, links[1]), make(2.0, links[2]), make(3.0, links[0])
        links[0][0], links[1][0], links[2][0] = a, b, c
        hs, _ = gluon_cf.foreach(lambda r, _: (a(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]
        scales = [1.0, 2.0, 3.0]

        def node(i, k):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return here * scales[k]
            return F.tanh(here + node(lt[i], (k + 1) % 3) - node(rt[i], (k + 1) % 3) *
                          scales[k])
        return F.concat(*[node(r, 0) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class FloatArgumentPassedDown(HybridBlock):
    """A float argument (a decay) halved at each level, next to the index."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx, decay):
            here = F.broadcast_mul(F.take(x, idx), decay)
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: here,
                                 lambda: here + node(F.take(left, idx), decay * 0.5) +
                                 node(F.take(right, idx), decay * 0.25))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r, F.ones_like(r)), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i, d):
            i = _row(i, n)
            here = F.take(x, F.array([i])) * d
            if lt[i] < 0:
                return here
            return here + node(lt[i], d * 0.5) + node(rt[i], d * 0.25)
        return F.concat(*[node(r, 1.0) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class DepthArgumentInPredicate(HybridBlock):
    """An integer depth argument decides the base case as well as the tree."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx, depth):
            here = F.take(x, idx)
            stop = F.broadcast_logical_or(F.take(left, idx) < 0, depth >= 2)
            return gluon_cf.cond(stop, lambda: here * 2,
                                 lambda: here + node(F.take(left, idx), depth + 1) *
                                 node(F.take(right, idx), depth + 1))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r, F.zeros_like(r)), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i, depth):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0 or depth >= 2:
                return here * 2
            return here + node(lt[i], depth + 1) * node(rt[i], depth + 1)
        return F.concat(*[node(r, 0) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class DataDependentRecursion(HybridBlock):
    """Whether the right child is visited depends on what the left one returned."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)

            def internal():
                a = node(F.take(left, idx))
                return gluon_cf.cond(F.sum(a) > 0, lambda: here + a,
                                     lambda: here - node(F.take(right, idx)))
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.tanh(here), internal)
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return F.tanh(here)
            a = node(lt[i])
            if float(a.sum().asscalar()) > 0:
                return here + a
            return here - node(rt[i])
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class RecursionInWhileLoopOverRoots(HybridBlock):
    """The roots visited by a while_loop with a counter, not a foreach."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx),
                                 lambda: F.tanh(F.take(x, idx) + node(F.take(left, idx)) +
                                                node(F.take(right, idx)) * 0.5))
        total = F.sum(F.zeros_like(x), axis=0, keepdims=True)
        _, (_, total) = gluon_cf.while_loop(
            lambda i, t: i < F.sum(F.ones_like(roots)),
            lambda i, t: ([], [i + 1, t + node(F.take(roots, i))]),
            [F.zeros((1,)), total], max_iterations=4)
        return total

    def plain_forward(self, F, x, left, right, roots):
        out = _plain_binary(F, x, left, right, roots, _combine_tanh)
        return out.sum(axis=0, keepdims=True)


@program(*FORESTS)
class ForeachInsideRecursion(HybridBlock):
    """At each node a foreach over the node's features (a small RNN over a row)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            row = F.reshape(F.take(x, idx), (-1, 1))          # (3, 1)

            def step(v, h):
                h = F.tanh(h * 0.5 + F.reshape(v, (1, 1)))
                return h, h
            _, acc = gluon_cf.foreach(step, row, F.zeros((1, 1)))
            here = F.broadcast_mul(F.take(x, idx), acc)
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: here,
                                 lambda: here + node(F.take(left, idx)) -
                                 node(F.take(right, idx)))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            xi = F.take(x, F.array([i]))
            h = F.zeros((1, 1))
            for k in range(3):
                h = F.tanh(h * 0.5 + F.slice_axis(xi, axis=1, begin=k, end=k + 1))
            here = F.broadcast_mul(xi, h)
            if lt[i] < 0:
                return here
            return here + node(lt[i]) - node(rt[i])
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


# CSR forests: x (n, 3), ptr (n + 1,), cidx, roots
CSR_A = [X7, _f(0, 3, 3, 3, 5, 5, 5, 5), _f(1, 2, 3, 5, 6), _f(0)]      # 0:(1,2,3) 3:(5,6)
CSR_B = [X7, _f(0, 1, 2, 2, 2, 2, 2, 2), _f(1, 2), _f(0, 4)]            # chain 0-1-2, leaf 4
CSR_C = [X7[:1], _f(0, 0), _f(0), _f(0)]                                # one node
CSR_D = [X7, _f(0, 6, 6, 6, 6, 6, 6, 6), _f(1, 2, 3, 4, 5, 6), _f(0, 6)]  # six children
CSR = (CSR_A, CSR_B, CSR_C, CSR_D)


def _plain_csr(F, x, ptr, cidx, roots, combine):
    p, c, n = _ids(ptr), _ids(cidx), x.shape[0]

    def node(i):
        i = _row(i, n)
        here = F.take(x, F.array([i]))
        kids = [node(c[k]) for k in range(p[i], p[i + 1])]
        return combine(F, here, kids)
    return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*CSR)
class CsrChildSumWhile(HybridBlock):
    """n-ary trees as CSR: a while_loop over the children calls the function (no cond)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, ptr, cidx, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)
            _, (_, total) = gluon_cf.while_loop(
                lambda k, s: k < F.take(ptr, idx + 1),
                lambda k, s: ([], [k + 1, s + node(F.take(cidx, k))]),
                [F.take(ptr, idx), F.zeros_like(here)], max_iterations=6)
            return F.tanh(here + total * 0.5)
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, ptr, cidx, roots):
        return _plain_csr(F, x, ptr, cidx, roots,
                          lambda F, h, kids: F.tanh(h + sum(kids, F.zeros_like(h)) * 0.5))


@program(*CSR)
class CsrCountNodesAutograph(HybridBlock):
    """Number of nodes and the sum of the subtree, an autograph while with a counter."""
    NO_GRAD = (1, 2, 3)

    @autograph(max_iterations=6)
    def hybrid_forward(self, F, x, ptr, cidx, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)
            k = F.take(ptr, idx)
            count = F.ones_like(idx)
            total = here
            while k < F.take(ptr, idx + 1):
                c, t = node(F.take(cidx, k))
                count = count + c
                total = total + t
                k = k + 1
            return count, total
        outs, _ = gluon_cf.foreach(lambda r, _: (list(node(r)), []), roots, [])
        return outs[0], F.reshape(outs[1], (-3, 0))

    def plain_forward(self, F, x, ptr, cidx, roots):
        p, c, n = _ids(ptr), _ids(cidx), x.shape[0]

        def node(i):
            i = _row(i, n)
            count, total = F.ones((1,)), F.take(x, F.array([i]))
            for k in range(p[i], p[i + 1]):
                a, b = node(c[k])
                count, total = count + a, total + b
            return count, total
        outs = [node(r) for r in _ids(roots)]
        return F.stack(*[a for a, _ in outs]), F.concat(*[b for _, b in outs], dim=0)


@program(*CSR)
class CsrCondInsideLoopBody(HybridBlock):
    """The loop over the children decides per child (a cond in the loop body) whether to
    recurse or take the child's row."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, ptr, cidx, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)

            def body(k, s):
                child = F.take(cidx, k)
                leafy = F.take(ptr, child + 1) - F.take(ptr, child) < 1
                v = gluon_cf.cond(leafy, lambda: F.take(x, child) * 2,
                                  lambda: node(child))
                return [], [k + 1, s + v]
            _, (_, total) = gluon_cf.while_loop(
                lambda k, s: k < F.take(ptr, idx + 1), body,
                [F.take(ptr, idx), F.zeros_like(here)], max_iterations=6)
            return F.tanh(here - total)
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, ptr, cidx, roots):
        p, c, n = _ids(ptr), _ids(cidx), x.shape[0]

        def node(i):
            i = _row(i, n)
            total = F.zeros((1, 3))
            for k in range(p[i], p[i + 1]):
                j = _row(c[k], n)
                total = total + (F.take(x, F.array([j])) * 2 if p[j + 1] - p[j] < 1
                                 else node(j))
            return F.tanh(F.take(x, F.array([i])) - total)
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program([_rand(5, 3), _f(1, 2, 3, 4, -1), _f(0)], [_rand(5, 3, seed=1), _f(-1, 0, 1, 2, 3),
                                                   _f(4)], [_rand(1, 3), _f(-1), _f(0)])
class ChainWithEnvironmentArguments(HybridBlock):
    """A module-level recursive function taking the arrays it reads as arguments."""
    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, x, nxt, roots):
        hs, _ = gluon_cf.foreach(lambda r, _: (chain_walk(F, x, nxt, r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, nxt, roots):
        ids, n = _ids(nxt), x.shape[0]

        def node(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            return F.sin(here) if ids[i] < 0 else here + 0.5 * node(ids[i])
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


def chain_walk(F, x, nxt, idx):
    @gluon_cf.recursive
    def walk(x, nxt, idx):
        return gluon_cf.cond(F.take(nxt, idx) < 0, lambda: F.sin(F.take(x, idx)),
                             lambda: F.take(x, idx) + 0.5 * walk(x, nxt, F.take(nxt, idx)))
    return walk(x, nxt, idx)


@program(*FORESTS)
class RecursionWithRowSoftmax(HybridBlock):
    """softmax over the features and a reduction to (1, 1) inside the recursion."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.softmax(F.take(x, idx), axis=1)
            return gluon_cf.cond(F.take(left, idx) < 0,
                                 lambda: F.sum(here * here, axis=1, keepdims=True),
                                 lambda: F.sum(here, axis=1, keepdims=True) *
                                 node(F.take(left, idx)) + node(F.take(right, idx)))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            here = F.softmax(F.take(x, F.array([i])), axis=1)
            if lt[i] < 0:
                return F.sum(here * here, axis=1, keepdims=True)
            return F.sum(here, axis=1, keepdims=True) * node(lt[i]) + node(rt[i])
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


# ------------------------------------------------------------------------- second batch

SINGLE_FIRST = (SINGLE, TWO_TREES, DEEPER, SHARED)


@program(*SINGLE_FIRST)
class SingleNodeTreeAsExample(BinaryForestSum):
    """Exported with a one-node forest as the example input (every dynamic size is 1)."""


@program(*FORESTS)
class ConstantLeaf(HybridBlock):
    """A leaf returns a constant built from shared values only (no per-call row)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.ones((1, 3)) * 0.25,
                                 lambda: F.tanh(F.take(x, idx) + node(F.take(left, idx)) -
                                                node(F.take(right, idx))))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            if lt[i] < 0:
                return F.ones((1, 3)) * 0.25
            return F.tanh(F.take(x, F.array([i])) + node(lt[i]) - node(rt[i]))
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class LeafReadsParameter(HybridBlock):
    """A leaf returns a parameter (shared); internal nodes add the node's row."""
    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.leaf = self.params.get("leaf", shape=(1, 3), init=mx.init.Uniform(1.0))

    def hybrid_forward(self, F, x, left, right, roots, leaf):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: leaf * 2,
                                 lambda: F.take(x, idx) * node(F.take(left, idx)) +
                                 node(F.take(right, idx)))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots, leaf):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            if lt[i] < 0:
                return leaf * 2
            return F.take(x, F.array([i])) * node(lt[i]) + node(rt[i])
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class ReturnsIndexAndValue(HybridBlock):
    """The function returns the index of the deepest-left leaf with the value (an index
    output, read by take afterwards)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            def internal():
                leftmost, v = node(F.take(left, idx))
                _, w = node(F.take(right, idx))
                return leftmost, v + w * 2
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: (idx, F.take(x, idx)),
                                 internal)
        (ids, vs), _ = gluon_cf.foreach(lambda r, _: (list(node(r)), []), roots, [])
        return F.reshape(vs, (-3, 0)) + F.take(x, F.reshape(ids, (-1,)))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            if lt[i] < 0:
                return i, F.take(x, F.array([i]))
            a, v = node(lt[i])
            _, w = node(rt[i])
            return a, v + w * 2
        outs = [node(r) for r in _ids(roots)]
        return F.concat(*[v + F.take(x, F.array([a])) for a, v in outs], dim=0)


@program(*FORESTS)
class TwoTopLevelCallsNoForeach(HybridBlock):
    """node called on the first root and on the last root directly, not in a loop."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx),
                                 lambda: F.tanh(F.take(x, idx) + node(F.take(left, idx)) +
                                                node(F.take(right, idx)) * 0.5))
        first = F.slice_axis(roots, axis=0, begin=0, end=1)
        last = F.slice_axis(roots, axis=0, begin=-1, end=None)
        return node(first) - node(last) * 3

    def plain_forward(self, F, x, left, right, roots):
        out = _plain_binary(F, x, left, right, roots, _combine_tanh)
        return F.slice_axis(out, axis=0, begin=0, end=1) - \
            F.slice_axis(out, axis=0, begin=-1, end=None) * 3


@program(*FORESTS)
class NestedTupleState(HybridBlock):
    """Returns ((h, c), n): a nested structure."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)

            def internal():
                (lh, lc), ln = node(F.take(left, idx))
                (rh, rc), rn = node(F.take(right, idx))
                c = lc + rc + here
                return (F.tanh(c) * lh, c), ln + rn
            return gluon_cf.cond(F.take(left, idx) < 0,
                                 lambda: ((F.tanh(here), here), F.ones_like(here)), internal)
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r)[0][0] + node(r)[1], []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return (F.tanh(here), here), F.ones_like(here)
            (lh, lc), ln = node(lt[i])
            (rh, rc), rn = node(rt[i])
            c = lc + rc + here
            return (F.tanh(c) * lh, c), ln + rn
        return F.concat(*[node(r)[0][0] + node(r)[1] for r in _ids(roots)], dim=0)


@program(*[[f[0].astype(np.float64)] + f[1:] for f in FORESTS])
class Float64Features(BinaryForestSum):
    """float64 features."""


@program(*[[f[0], f[1].astype(np.int64), f[2].astype(np.int64), f[3].astype(np.int64)]
           for f in FORESTS])
class Int64IndexArrays(BinaryForestSum):
    """int64 index arrays."""


@program([X7, _f(1, -1, -1, 4, -1, -1, -1), _f(2, -1, -1, 5, -1, -1, -1), _f(0.9, 3.7)],
         [X7, _f(1.5, -1, -1, 4, -1, -1, -1), _f(2.2, -1, -1, 5, -1, -1, -1), _f(-0.5, 3)])
class FractionalIndices(BinaryForestSum):
    """Non-integer float indices (take truncates them)."""

    def plain_forward(self, F, x, left, right, roots):
        return BinaryForestSum.plain_forward(self, F, x, left, right, roots)


@program(*FORESTS)
class RecursionInsideChildBlock(HybridBlock):
    """The recursive function lives in a child block's hybrid_forward."""
    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.encoder = BinaryForestSum()
            self.out = mx.gluon.nn.Dense(2, in_units=3)

    def hybrid_forward(self, F, x, left, right, roots):
        return self.out(self.encoder(x, left, right, roots))

    def plain_forward(self, F, x, left, right, roots, **params):
        return self.out(_plain_binary(F, x, left, right, roots, _combine_tanh))


@program([_rand(5, 3), _f(1, 2, 3, 4, -1), _f(0)], [_rand(5, 3, seed=1), _f(-1, 0, 1, 2, 3),
                                                   _f(4, 2, 0)])
class ChainWhileCounterInLeaf(HybridBlock):
    """A chain; the leaf runs a while_loop with a constant counter (F.zeros((1,)))."""
    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, x, nxt, roots):
        @gluon_cf.recursive
        def node(idx):
            def leaf():
                _, (_, h) = gluon_cf.while_loop(
                    lambda i, h: i < 3, lambda i, h: ([], [i + 1, h * 0.5 + 1]),
                    [F.zeros((1,)), F.take(x, idx)], max_iterations=3)
                return h
            return gluon_cf.cond(F.take(nxt, idx) < 0, leaf,
                                 lambda: F.take(x, idx) * node(F.take(nxt, idx)))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, nxt, roots):
        ids, n = _ids(nxt), x.shape[0]

        def node(i):
            i = _row(i, n)
            h = F.take(x, F.array([i]))
            if ids[i] < 0:
                for _ in range(3):
                    h = h * 0.5 + 1
                return h
            return h * node(ids[i])
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


# ------------------------------------------------------------------------- index edge cases

@program([X7, _f(1, -1, -1, 40, -1, -1, -1), _f(2, -1, -1, 5, -1, -1, -1), _f(0, 3)],
         [X7, _f(1.9, -1, -1, 4.2, -1, -1, -1), _f(2.7, -1, -1, 5.5, -1, -1, -1), _f(0, 3)],
         [X7, _f(1, -5, -1, 4, -3, -1, -1), _f(2, -1, -1, 5, -1, -1, -1), _f(0, 3)])
class ChildIndicesOutOfRangeOrFractional(BinaryForestSum):
    """Children past the end (clipped to the last row, a leaf), fractional (truncated), and
    leaves marked by any negative number."""


@program(*[[f[0], f[1].astype(np.int32), f[2].astype(np.int32), f[3].astype(np.int32)]
           for f in CSR])
class CsrInt32(CsrChildSumWhile):
    """CSR arrays of int32 (idx + 1 in integers)."""


@program(*FORESTS)
class PredicateEqualsMinusOne(HybridBlock):
    """A leaf is 'left == -1' (other negative values are children, clipped to row 0)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) + 1 == 0, lambda: F.take(x, idx) * 3,
                                 lambda: F.take(x, idx) - node(F.take(left, idx)) *
                                 node(F.take(right, idx)))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] + 1 == 0:
                return here * 3
            return here - node(lt[i]) * node(rt[i])
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class SizeArithmeticPredicate(HybridBlock):
    """The base case is decided by arithmetic on the index (idx * 2 + 1 >= 7) as well as the
    tree: integer-scalar arithmetic in the skeleton."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            stop = F.broadcast_logical_or(F.take(left, idx) < 0, idx * 2 + 1 >= 7)
            return gluon_cf.cond(stop, lambda: F.take(x, idx),
                                 lambda: F.take(x, idx) + node(F.take(left, idx)) -
                                 node(F.take(right, idx)) * 2)
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i, raw):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0 or raw * 2 + 1 >= 7:
                return here
            return here + node(lt[i], lt[i]) - node(rt[i], rt[i]) * 2
        return F.concat(*[node(r, r) for r in _ids(roots)], dim=0)


# ------------------------------------------------------------------------- refusals

@program(DEEPER, TWO_TREES)
class OutputWidthGrowsWithDepth(HybridBlock):
    """An internal node concatenates its children: the output's width depends on the tree
    (eager (1, 12) for DEEPER). Hybridized, each call's shape known at run time (round 28r;
    refused before)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx),
                                 lambda: F.concat(node(F.take(left, idx)),
                                                  node(F.take(right, idx)), dim=1))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return hs

    def plain_forward(self, F, x, left, right, roots):
        out = _plain_binary(F, x, left, right, roots,
                            lambda F, here, a, b: F.concat(a, b, dim=1))
        return F.expand_dims(out, axis=1)


@program(TWO_TREES, DEEPER)
class MaxDepthTwo(HybridBlock):
    """max_depth=2 and a tree three calls deep (DEEPER): RecursionDepthError in every mode
    (plain Python recursion has no such bound: its value is what the others refuse)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive(max_depth=2)
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx),
                                 lambda: node(F.take(left, idx)) + node(F.take(right, idx)))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots, lambda F, here, a, b: a + b)
