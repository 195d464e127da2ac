"""Issue 24 (items 2, 3, 4, 7), seventeenth round (b): recursion, call history and export as
users write them. Recursive models: three functions calling each other in turn, base cases
decided by tensor values, recursion inside ``foreach``/``while_loop`` bodies and loops inside
recursion, tuples and nested lists returned, decoders that decide the tree, forests mixing
single nodes, balanced trees and deep combs, per-invocation state, values captured from the
call that change between calls, parameters shared between functions, float64; dynamic shapes
(``boolean_mask`` keeping no, some or all rows, loops of no step) inside bodies and
recursion; autograph lists collected and joined. Each block's oracle is ``plain_forward``
(plain Python recursion on NDArrays, indices and predicates read on the host) or, for
autograph blocks, the Python function itself."""
import mxnet as mx
import numpy as np
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness
from hostile_programs4 import _ids, _row
from hostile_programs14 import _rows_of, _scalar
from hostile_programs16 import _plain_while

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats


def forest(trees, seed, features=3):
    """``[x, left, right, roots]`` of binary trees, each None (a leaf) or (left, right)."""
    left, right, roots = [], [], []

    def add(tree):
        k = len(left)
        left.append(-1)
        right.append(-1)
        if tree is not None:
            a = add(tree[0])
            b = add(tree[1])
            left[k], right[k] = a, b
        return k
    for tree in trees:
        roots.append(add(tree))
    return [rand(len(left), features, seed=seed), floats(*left), floats(*right), floats(*roots)]


def comb(depth):
    tree = None
    for _ in range(depth):
        tree = (tree, None)
    return tree


BAL = ((None, None), (None, (None, None)))
# a forest mixing a single node, a balanced tree, a deep comb and a pair
MIXED = forest([None, BAL, comb(25), (None, None)], seed=1)
SINGLES = forest([None, None, None], seed=2)
DEEP = forest([comb(30)], seed=3)
FORESTS = (MIXED, SINGLES, DEEP)


def _plain_tree(F, x, left, right, roots, leaf, combine):
    """Plain Python recursion over every root: ``leaf(row, i)``, ``combine(row, l, r, i)``."""
    lt, rt, n = _ids(left), _ids(right), x.shape[0]

    def node(i):
        i = _row(i, n)
        here = F.take(x, F.array([i]))
        if lt[i] < 0:
            return leaf(here)
        return combine(here, node(lt[i]), node(rt[i]))
    return F.concat(*[node(r) for r in _ids(roots)], dim=0)


# ---- (a) recursion -------------------------------------------------------------------------

@program(*FORESTS)
class ThreeFunctionsInTurn(HybridBlock):
    """f calls g on its children, g calls h, h calls f: three cells in turn down the tree."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cells = [nn.Dense(3, in_units=6, prefix="c%d_" % k) for k in range(3)]
            for k, cell in enumerate(self.cells):
                self.register_child(cell, "c%d" % k)

    def hybrid_forward(self, F, x, left, right, roots):
        fns = []

        def make(k):
            def body(i):
                here = F.take(x, i)
                nxt = fns[(k + 1) % 3]
                return gluon_cf.cond(
                    F.take(left, i) < 0, lambda: here * (k + 1),
                    lambda: F.tanh(self.cells[k](F.concat(
                        nxt(F.take(left, i)) + here, nxt(F.take(right, i)), dim=1))))
            return gluon_cf.recursive(body, name="fn%d" % k)
        fns.extend(make(k) for k in range(3))
        return _rows_of(F, fns[0], roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def fn(k, i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return here * (k + 1)
            return F.tanh(self.cells[k](F.concat(fn((k + 1) % 3, lt[i]) + here,
                                                 fn((k + 1) % 3, rt[i]), dim=1)))
        return F.concat(*[fn(0, r) for r in _ids(roots)], dim=0)


ROWS = ([rand(3, 4, seed=5, low=-3, high=3)], [rand(5, 4, seed=6, low=-0.2, high=0.2)],
        [rand(1, 4, seed=7, low=2, high=4)])


@program(*ROWS)
class HalveUntilSmallByValue(HybridBlock):
    """The base case is decided by the values: halve a row until its L1 norm < 0.5."""

    def hybrid_forward(self, F, x):
        @gluon_cf.recursive(max_depth=64)
        def shrink(v):
            return gluon_cf.cond(F.sum(F.abs(v)) < 0.5, lambda: v * 2,
                                 lambda: shrink(v * 0.5) + F.sin(v))
        return _rows_of(F, lambda r: shrink(F.expand_dims(r, 0)), x)

    def plain_forward(self, F, x):
        def shrink(v):
            if _scalar(F.sum(F.abs(v))) < 0.5:
                return v * 2
            return shrink(v * 0.5) + F.sin(v)
        return F.concat(*[shrink(x[k:k + 1]) for k in range(x.shape[0])], dim=0)


@program(*FORESTS)
class RecursionInWhileBody(HybridBlock):
    """A while_loop over the roots calls the recursion in its body, summing the results."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.tanh(self.d(F.take(x, i))),
                                 lambda: node(F.take(left, i)) * 0.5 + node(F.take(right, i)))
        count = F.sum(F.ones_like(roots), keepdims=True)

        def func(k, acc):
            return [], [k + 1, acc + node(F.take(roots, k))]
        _, (_, acc) = gluon_cf.while_loop(lambda k, acc: k < count, func,
                                          [F.zeros_like(count), F.zeros((1, 3))],
                                          max_iterations=8)
        return acc

    def plain_forward(self, F, x, left, right, roots):
        out = _plain_tree(F, x, left, right, roots, lambda h: F.tanh(self.d(h)),
                          lambda h, a, b: a * 0.5 + b)
        return F.sum(out, axis=0, keepdims=True)


@program(*FORESTS)
class ForeachCarriesStateAcrossTrees(HybridBlock):
    """A foreach over the roots carries a state that each tree's value updates."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: F.maximum(node(F.take(left, i)),
                                                   node(F.take(right, i))) - 0.1)

        def body(r, states):
            out = node(r) + states[0]
            return out, [F.tanh(states[0] * 0.5 + out)]
        outs, (s,) = gluon_cf.foreach(body, roots, [F.zeros((1, 3))])
        return F.reshape(outs, (-3, -2)), s

    def plain_forward(self, F, x, left, right, roots):
        vals = _plain_tree(F, x, left, right, roots, lambda h: h,
                           lambda h, a, b: F.maximum(a, b) - 0.1)
        s, outs = F.zeros((1, 3)), []
        for k in range(vals.shape[0]):
            out = vals[k:k + 1] + s
            outs.append(out)
            s = F.tanh(s * 0.5 + out)
        return F.concat(*outs, dim=0), s


@program(*FORESTS)
class LeafRunsLoopOfItsOwnCount(HybridBlock):
    """Each leaf runs a while_loop whose trip count is read from its row (0 to 2 steps), its
    counter made per invocation (zeros_like)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            def leaf():
                h = F.take(x, i)
                n = F.floor(F.abs(F.slice_axis(h, axis=1, begin=0, end=1)) * 3)
                _, (h, _) = gluon_cf.while_loop(
                    lambda h, k: F.sum(k < n) > 0, lambda h, k: ([], [F.tanh(self.d(h)), k + 1]),
                    [h, F.zeros_like(n)], max_iterations=3)
                return h
            return gluon_cf.cond(F.take(left, i) < 0, leaf,
                                 lambda: node(F.take(left, i)) - node(F.take(right, i)))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        def leaf(h):
            n = F.floor(F.abs(h[:, 0:1]) * 3)
            return _plain_while(lambda h, k: F.sum(k < n) > 0,
                                lambda h, k: [F.tanh(self.d(h)), k + 1],
                                [h, F.zeros_like(n)], 3)[0]
        return _plain_tree(F, x, left, right, roots, leaf, lambda h, a, b: a - b)


@program(*FORESTS)
class LeafLoopWithConstantCounter(HybridBlock):
    """Item 3: a leaf's while_loop counts from F.zeros((1,)), a constant shared by all
    invocations (the batching executor must run it, row by row if it cannot batch it)."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            def leaf():
                _, (h, _) = gluon_cf.while_loop(
                    lambda h, k: k < 2, lambda h, k: ([], [h * 0.5 + 1, k + 1]),
                    [F.take(x, i), F.zeros((1,))], max_iterations=4)
                return h
            return gluon_cf.cond(F.take(left, i) < 0, leaf,
                                 lambda: node(F.take(left, i)) * node(F.take(right, i)))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_tree(F, x, left, right, roots, lambda h: (h * 0.5 + 1) * 0.5 + 1,
                           lambda h, a, b: a * b)


@program(*FORESTS)
class ReturnsTupleOfThreeShapes(HybridBlock):
    """The recursion returns (h (1, 3), size (1, 1), depth (1,)): a tuple of three shapes."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            def internal():
                hl, sl, dl = node(F.take(left, i))
                hr, sr, dr = node(F.take(right, i))
                return hl + hr * 0.5, sl + sr + 1, F.maximum(dl, dr) + 1
            return gluon_cf.cond(F.take(left, i) < 0,
                                 lambda: (F.take(x, i), F.ones((1, 1)), F.zeros((1,))),
                                 internal)

        def body(r, _):
            return list(node(r)), []
        (h, s, d), _ = gluon_cf.foreach(body, roots, [])
        return F.reshape(h, (-3, -2)), F.reshape(s, (-3, -2)) * h.slice_axis(
            axis=2, begin=0, end=1).reshape((-3, -2)), d

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            if lt[i] < 0:
                return F.take(x, F.array([i])), F.ones((1, 1)), F.zeros((1,))
            hl, sl, dl = node(lt[i])
            hr, sr, dr = node(rt[i])
            return hl + hr * 0.5, sl + sr + 1, F.maximum(dl, dr) + 1
        got = [node(r) for r in _ids(roots)]
        h = F.concat(*[g[0] for g in got], dim=0)
        s = F.concat(*[g[1] for g in got], dim=0)
        return h, s * h[:, 0:1], F.stack(*[g[2] for g in got])


@program(*FORESTS)
class ReturnsNestedList(HybridBlock):
    """The recursion returns [h, [lo, hi]]: a nested list, unpacked by the caller."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            def internal():
                a, (alo, ahi) = node(F.take(left, i))
                b, (blo, bhi) = node(F.take(right, i))
                return [F.tanh(a + b), [F.minimum(alo, blo), F.maximum(ahi, bhi)]]
            h = F.take(x, i)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: [h, [h, h]], internal)

        def body(r, _):
            h, (lo, hi) = node(r)
            return h * 2 + hi - lo, []
        outs, _ = gluon_cf.foreach(body, roots, [])
        return F.reshape(outs, (-3, -2))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            h = F.take(x, F.array([i]))
            if lt[i] < 0:
                return [h, [h, h]]
            a, (alo, ahi) = node(lt[i])
            b, (blo, bhi) = node(rt[i])
            return [F.tanh(a + b), [F.minimum(alo, blo), F.maximum(ahi, bhi)]]
        outs = []
        for r in _ids(roots):
            h, (lo, hi) = node(r)
            outs.append(h * 2 + hi - lo)
        return F.concat(*outs, dim=0)


H0 = ([rand(3, 4, seed=8)], [rand(2, 4, seed=9, low=0.2, high=1)], [rand(1, 4, seed=10) - 1])


@program(*H0)
class DecoderCountsItsNodes(HybridBlock):
    """A top-down decoder: a node expands while max(h) > 0 and its depth < 4; it returns the
    sum of its subtree's states and the number of nodes it made."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.l = nn.Dense(4, in_units=4)
            self.r = nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, h0):
        @gluon_cf.recursive
        def grow(h, depth):
            def expand():
                a, na = grow(F.tanh(self.l(h)), depth + 1)
                b, nb = grow(F.tanh(self.r(h)) - 0.1, depth + 1)
                return h + a + b, na + nb + 1
            return gluon_cf.cond((F.max(h) > 0) * (depth < 4), expand,
                                 lambda: (h, F.ones_like(depth)))

        def body(row, _):
            h, count = grow(F.expand_dims(row, 0), F.zeros((1,)))
            return [h, count], []
        (hs, counts), _ = gluon_cf.foreach(body, h0, [])
        return F.reshape(hs, (-3, -2)), counts

    def plain_forward(self, F, h0):
        def grow(h, depth):
            if _scalar(F.max(h)) > 0 and depth < 4:
                a, na = grow(F.tanh(self.l(h)), depth + 1)
                b, nb = grow(F.tanh(self.r(h)) - 0.1, depth + 1)
                return h + a + b, na + nb + 1
            return h, 1
        got = [grow(h0[k:k + 1], 0) for k in range(h0.shape[0])]
        return F.concat(*[g[0] for g in got], dim=0), \
            F.array([[g[1]] for g in got], dtype="float32")


@program(*FORESTS)
class DepthPassedDown(HybridBlock):
    """Per-invocation state: the depth is an argument; a leaf is scaled by 1 / (1 + depth)."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i, depth):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.broadcast_div(F.take(x, i), 1 + depth),
                lambda: node(F.take(left, i), depth + 1) + node(F.take(right, i), depth + 1))
        return _rows_of(F, lambda r: node(r, F.zeros_like(F.reshape(r, (1,)))), roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i, depth):
            i = _row(i, n)
            if lt[i] < 0:
                return F.take(x, F.array([i])) / (1 + depth)
            return node(lt[i], depth + 1) + node(rt[i], depth + 1)
        return F.concat(*[node(r, 0) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class ClosureOverThisCallsMean(HybridBlock):
    """The recursion closes over a value computed from this call's input (the mean row): it
    changes from call to call, and every call must read its own."""

    def hybrid_forward(self, F, x, left, right, roots):
        centre = F.mean(x, axis=0, keepdims=True)
        spread = F.max(F.abs(F.broadcast_sub(x, centre)))

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0,
                                 lambda: F.broadcast_div(F.take(x, i) - centre, spread),
                                 lambda: node(F.take(left, i)) + node(F.take(right, i)) * centre)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        centre = F.mean(x, axis=0, keepdims=True)
        spread = F.max(F.abs(x - centre))
        return _plain_tree(F, x, left, right, roots,
                           lambda h: (h - centre) / spread, lambda h, a, b: a + b * centre)


@program(*FORESTS)
class TwoFunctionsShareOneDense(HybridBlock):
    """up() and side() call each other and both apply the same Dense (shared parameters)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def up(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: self.d(F.take(x, i)),
                                 lambda: F.tanh(self.d(side(F.take(left, i)) +
                                                       up(F.take(right, i)))))

        @gluon_cf.recursive
        def side(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) * 2,
                                 lambda: self.d(up(F.take(left, i))) - side(F.take(right, i)))
        return _rows_of(F, up, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def up(i):
            i = _row(i, n)
            if lt[i] < 0:
                return self.d(F.take(x, F.array([i])))
            return F.tanh(self.d(side(lt[i]) + up(rt[i])))

        def side(i):
            i = _row(i, n)
            if lt[i] < 0:
                return F.take(x, F.array([i])) * 2
            return self.d(up(lt[i])) - side(rt[i])
        return F.concat(*[up(r) for r in _ids(roots)], dim=0)


@program(*[[a.astype(np.float64) for a in f] for f in FORESTS])
class Float64TreeWithDense(HybridBlock):
    """A float64 model: the recursion's values and parameters all float64."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(3, in_units=6, dtype="float64")

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) * 1e-3,
                                 lambda: F.tanh(self.d(F.concat(node(F.take(left, i)),
                                                                node(F.take(right, i)), dim=1))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_tree(F, x, left, right, roots, lambda h: h * 1e-3,
                           lambda h, a, b: F.tanh(self.d(F.concat(a, b, dim=1))))


@program(*FORESTS)
class ExplicitInvokeOfPlainFunction(HybridBlock):
    """gluon_cf.invoke(fn, ...) on a plain function that invokes itself by name."""

    def hybrid_forward(self, F, x, left, right, roots):
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.relu(F.take(x, i)),
                                 lambda: gluon_cf.invoke(node, F.take(left, i)) * 2 -
                                 gluon_cf.invoke(node, F.take(right, i)))
        hs, _ = gluon_cf.foreach(lambda r, _: (gluon_cf.invoke(node, r), []), roots, [])
        return F.reshape(hs, (-3, -2))

    def plain_forward(self, F, x, left, right, roots):
        return _plain_tree(F, x, left, right, roots, F.relu, lambda h, a, b: a * 2 - b)


@program(*FORESTS)
class WhileOverStepsCallsRecursionEachStep(HybridBlock):
    """A loop inside a loop around recursion: three refinement steps, each calling the tree
    function on every root (foreach) with the state so far as an argument."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i, s):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) + s,
                                 lambda: F.tanh(node(F.take(left, i), s * 0.5) +
                                                node(F.take(right, i), s)))

        def step(s, k):
            hs, _ = gluon_cf.foreach(lambda r, _: (node(r, s), []), roots, [])
            return [], [F.mean(F.reshape(hs, (-3, -2)), axis=0, keepdims=True), k + 1]
        _, (s, _) = gluon_cf.while_loop(lambda s, k: k < 3, step,
                                        [F.zeros((1, 3)), F.zeros((1,))], max_iterations=3)
        return s

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i, s):
            i = _row(i, n)
            if lt[i] < 0:
                return F.take(x, F.array([i])) + s
            return F.tanh(node(lt[i], s * 0.5) + node(rt[i], s))
        s = F.zeros((1, 3))
        for _ in range(3):
            s = F.mean(F.concat(*[node(r, s) for r in _ids(roots)], dim=0), axis=0,
                       keepdims=True)
        return s


@program(*FORESTS)
class RecursionUnderOuterCond(HybridBlock):
    """The recursion runs only in one branch of a cond decided by the input's sum."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: node(F.take(left, i)) * node(F.take(right, i)) + 0.1)
        return gluon_cf.cond(F.sum(x) > 0, lambda: _rows_of(F, node, roots),
                             lambda: F.take(x, roots) * -1)

    def plain_forward(self, F, x, left, right, roots):
        if _scalar(F.sum(x)) > 0:
            return _plain_tree(F, x, left, right, roots, lambda h: h,
                               lambda h, a, b: a * b + 0.1)
        return F.take(x, roots) * -1


# n-ary trees as CSR: v (n,), ptr (n + 1,), cidx; roots
CSR_A = [rand(6, 2, seed=11), floats(0, 2, 3, 3, 4, 4, 4), floats(1, 2, 3, 4), floats(0, 5)]
CSR_LEAF = [rand(1, 2, seed=12), floats(0, 0), floats(0), floats(0)]
CSR_WIDE = [rand(5, 2, seed=13), floats(0, 4, 4, 4, 4, 4), floats(1, 2, 3, 4), floats(0, 3, 0)]
CSR = (CSR_A, CSR_LEAF, CSR_WIDE)


@program(*CSR)
class EvenOddLevelsOverChildLoop(HybridBlock):
    """even() loops over a node's children (a while_loop of no step at a leaf) calling odd(),
    which loops calling even(): two functions, each with a loop of run-time length."""

    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, v, ptr, cidx, roots):
        def level(sign, other):
            def fn(k):
                start, stop = F.take(ptr, k), F.take(ptr, k + 1)

                def func(j, acc):
                    return [], [j + 1, acc + other[0](F.take(cidx, j))]
                _, (_, acc) = gluon_cf.while_loop(lambda j, acc: j < stop, func,
                                                  [start, F.zeros((1, 2))], max_iterations=5)
                return F.take(v, k) * sign + F.tanh(acc)
            return fn
        odd_ref = []
        even = gluon_cf.recursive(level(1.0, odd_ref), name="even")
        odd = gluon_cf.recursive(level(-1.0, [even]), name="odd")
        odd_ref.append(odd)
        return _rows_of(F, even, roots)

    def plain_forward(self, F, v, ptr, cidx, roots):
        p, c = _ids(ptr), _ids(cidx)

        def fn(k, sign):
            acc = F.zeros((1, 2))
            for j in range(p[k], p[k + 1]):
                acc = acc + fn(c[j], -sign)
            return F.take(v, F.array([k])) * sign + F.tanh(acc)
        return F.concat(*[fn(r, 1.0) for r in _ids(roots)], dim=0)


# ---- (b) dynamic shapes in bodies and recursion (call history) ----------------------------

@program(*FORESTS)
class RecursionMasksItsRow(HybridBlock):
    """Each leaf keeps its positive entries (boolean_mask: none, some or all) and sums them."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            def leaf():
                row = F.reshape(F.take(x, i), (-1, 1))
                kept = F.contrib.boolean_mask(row, F.reshape(row > 0, (-1,)))
                return F.reshape(F.sum(kept) + F.sum(row) * 0.1, (1, 1))
            return gluon_cf.cond(F.take(left, i) < 0, leaf,
                                 lambda: node(F.take(left, i)) + node(F.take(right, i)) * 2)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        def leaf(h):
            v = h.asnumpy().ravel()
            return F.reshape(F.sum(h * F.array(v > 0, dtype="float32")) + F.sum(h) * 0.1,
                             (1, 1))
        return _plain_tree(F, x, left, right, roots, leaf, lambda h, a, b: a + b * 2)


MASKS = ([rand(4, 3, seed=14), floats(1, 0, 1, 1)], [rand(3, 3, seed=15), floats(0, 0, 0)],
         [rand(2, 3, seed=16), floats(1, 1)], [rand(5, 3, seed=17), floats(0, 0, 0, 0, 1)])


@program(*MASKS)
class ForeachMasksEachStepRow(HybridBlock):
    """A foreach over rows: each step keeps the row's entries above the state's mean (none
    to all of them) and carries their sum."""

    def hybrid_forward(self, F, x, m):
        def body(row, states):
            column = F.reshape(row, (-1, 1))
            kept = F.contrib.boolean_mask(column, F.broadcast_greater(row, F.mean(states[0])))
            s = states[0] * 0.5 + F.sum(kept)
            return s, [s]
        outs, _ = gluon_cf.foreach(body, x, [F.zeros((1,))])
        return outs

    def plain_forward(self, F, x, m):
        s, outs = F.zeros((1,)), []
        for k in range(x.shape[0]):
            row = x[k]
            keep = (row > F.mean(s)).asnumpy().astype(bool)
            s = s * 0.5 + F.sum(row * F.array(keep.astype("float32")))
            outs.append(s)
        return F.stack(*outs)


@program(*MASKS)
class MaskThenWhileOverKept(HybridBlock):
    """boolean_mask by the mask (keeping 0 rows to all), then a while_loop over the kept rows
    count (no step when none is kept), then a Dense of the carry."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(2, in_units=3)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m, keepdims=True)

        def func(k, h):
            return [], [k + 1, F.tanh(h + F.take(kept, k))]
        _, (_, h) = gluon_cf.while_loop(lambda k, h: k < count, func,
                                        [F.zeros((1,)), F.zeros((1, 3))], max_iterations=6)
        return self.d(h)

    def plain_forward(self, F, x, m):
        keep = np.flatnonzero(m.asnumpy() > 0)
        h = F.zeros((1, 3))
        for k in keep:
            h = F.tanh(h + x[int(k):int(k) + 1])
        return self.d(h)


@program(*MASKS)
class MaskedRowsIntoRecursiveHalving(HybridBlock):
    """The kept rows' sum enters a recursion whose depth its size decides (zero rows kept:
    a sum of none, the base case at once)."""

    def hybrid_forward(self, F, x, m):
        total = F.sum(F.contrib.boolean_mask(x, m), axis=0, keepdims=True)

        @gluon_cf.recursive(max_depth=40)
        def halve(v):
            return gluon_cf.cond(F.sum(F.abs(v)) < 1, lambda: v + 1,
                                 lambda: halve(v * 0.5) * 2)
        return halve(total + F.sum(x, axis=0, keepdims=True) * 0.01)

    def plain_forward(self, F, x, m):
        return _plain_halving(F, x, F.contrib.boolean_mask(x, m))

    def oracle_where_plain_fails(self, F, x, m):
        # (eager MXNet cannot differentiate through the zero-row array of a mask keeping none)
        keep = F.array((m.asnumpy() > 0).astype("float32")).reshape((-1, 1))
        return _plain_halving(F, x, x * keep)


def _plain_halving(F, x, kept):
    def halve(v):
        return v + 1 if _scalar(F.sum(F.abs(v))) < 1 else halve(v * 0.5) * 2
    return halve(F.sum(kept, axis=0, keepdims=True) + F.sum(x, axis=0, keepdims=True) * 0.01)


# ---- (c) autograph lists and loops for export --------------------------------------------

TS = ([rand(3, 4, seed=18)], [rand(6, 4, seed=19)], [rand(1, 4, seed=20)])


@program(*TS)
class CollectedConcatOnAxisOne(HybridBlock):
    """Rows collected by a for, joined by concat on axis 1 (not axis 0)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros((1, 4))
        for row in x:
            h = F.tanh(h + row.expand_dims(0))
            outs.append(h)
        return F.concat(*outs, dim=1)


@program(*TS)
class TwoEarlierItemsThenStack(HybridBlock):
    """Two items before the loop, the loop's rows after, joined by stack on axis 1."""

    @autograph
    def hybrid_forward(self, F, x):
        first = F.sum(x, axis=0)
        outs = [first, first * -1]
        for row in x:
            outs.append(row * first)
        return F.stack(*outs, axis=1)


@program(*MASKS)
class TwoLoopsSecondOverMaskedRows(HybridBlock):
    """Two loops append to one list: the rows, then the masked rows (maybe none)."""

    @autograph
    def hybrid_forward(self, F, x, m):
        outs = []
        for row in x:
            outs.append(row.expand_dims(0) * 2)
        for row in F.contrib.boolean_mask(x, m):
            outs.append(row.expand_dims(0) - 1)
        return F.concat(*outs, dim=0)

    def plain_forward(self, F, x, m):
        keep = np.flatnonzero(m.asnumpy() > 0)
        outs = [x[k:k + 1] * 2 for k in range(x.shape[0])]
        outs += [x[int(k):int(k) + 1] - 1 for k in keep]
        return F.concat(*outs, dim=0)


@program(*MASKS[:1], MASKS[2], MASKS[3])
class ForeachOverMaskedRowsWithState(HybridBlock):
    """gluon_cf.foreach over boolean_mask's rows (run-time length) with a Dense carry."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)

        def body(row, states):
            h = F.tanh(F.reshape(self.d(F.expand_dims(states[0], 0)), (-1,)) + row)
            return h, [h]
        outs, (h,) = gluon_cf.foreach(body, kept, [F.zeros((3,))])
        return outs, h

    def plain_forward(self, F, x, m):
        h, outs = F.zeros((3,)), []
        for k in np.flatnonzero(m.asnumpy() > 0):
            h = F.tanh(self.d(h.expand_dims(0)).reshape((-1,)) + x[int(k)])
            outs.append(h)
        return F.stack(*outs), h


@program(*MASKS[:1], MASKS[2], MASKS[3])
class LoopAfterSizeChangingCond(HybridBlock):
    """A cond whose branches differ in size (the masked rows or the first two rows), then a
    for over what it gave, collecting sums."""

    @autograph
    def hybrid_forward(self, F, x, m):
        if F.sum(m) > 1:
            rows = F.contrib.boolean_mask(x, m)
        else:
            rows = F.slice_axis(x, axis=0, begin=0, end=2)
        total = F.zeros((3,))
        for row in rows:
            total = total + row * row
        return total, F.sum(rows, axis=0)

    def plain_forward(self, F, x, m):
        if _scalar(F.sum(m)) > 1:
            rows = F.concat(*[x[int(k):int(k) + 1] for k in np.flatnonzero(m.asnumpy() > 0)],
                            dim=0)
        else:
            rows = x[0:2]
        return F.sum(rows * rows, axis=0), F.sum(rows, axis=0)


COUNTED = ([rand(5, 4, seed=21), floats(3)], [rand(5, 4, seed=22), floats(0)],
           [rand(6, 4, seed=23), floats(6)])


@program(*COUNTED)
class RangeOfTensorCollectsWithBreak(HybridBlock):
    """for t in range(6) appending h each step and breaking when the step reaches n."""

    @autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        h = F.zeros((1, 4))
        for t in range(6):
            if t >= n:
                break
            h = F.tanh(h + F.slice_axis(x, axis=0, begin=t, end=t + 1))
            outs.append(h)
        return F.sum(h), h

    def plain_forward(self, F, x, n):
        h = F.zeros((1, 4))
        for t in range(min(6, int(_scalar(n)))):
            h = F.tanh(h + x[t:t + 1])
        return F.sum(h), h


@program(*TS)
class NestedLoopsCollectInner(HybridBlock):
    """An inner for over each row's entries inside an outer for over rows; the outer loop
    collects each row's inner result."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            acc = F.zeros((1,))
            for v in row:
                acc = acc * 0.5 + v
            outs.append(acc)
        return F.concat(*outs, dim=0)


# ---- (a) more recursion ---------------------------------------------------------------------

INT_FORESTS = tuple([f[0]] + [a.astype(np.int32) for a in f[1:]] for f in FORESTS)


@program(*INT_FORESTS)
class Int32IndexArrays(HybridBlock):
    """left, right and roots as int32 arrays; a Dense combines."""

    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: F.tanh(self.d(node(F.take(left, i)) -
                                                       node(F.take(right, i)))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_tree(F, x, left, right, roots, lambda h: h,
                           lambda h, a, b: F.tanh(self.d(a - b)))


@program(*FORESTS)
class KeywordArgumentsOutOfOrder(HybridBlock):
    """The recursive call passes its arguments by name, in another order than declared."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i, scale):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.broadcast_mul(F.take(x, i), scale),
                lambda: node(scale=scale * 0.5, i=F.take(left, i)) +
                node(scale=scale * 2, i=F.take(right, i)))
        return _rows_of(F, lambda r: node(scale=F.ones_like(F.reshape(r, (1,))), i=r), roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i, scale):
            i = _row(i, n)
            if lt[i] < 0:
                return F.take(x, F.array([i])) * scale
            return node(lt[i], scale * 0.5) + node(rt[i], scale * 2)
        return F.concat(*[node(r, 1.0) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class ArgumentReturnedAsIs(HybridBlock):
    """A leaf returns its argument h unchanged (passed down from the root), so gradients
    reach the roots' rows through the calls' arguments alone."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i, h):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: h,
                lambda: node(F.take(left, i), F.tanh(h + F.take(x, i))) *
                node(F.take(right, i), h * 0.5))
        return _rows_of(F, lambda r: node(r, F.take(x, r)), roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i, h):
            i = _row(i, n)
            if lt[i] < 0:
                return h
            return node(lt[i], F.tanh(h + F.take(x, F.array([i])))) * node(rt[i], h * 0.5)
        return F.concat(*[node(r, F.take(x, F.array([_row(r, n)]))) for r in _ids(roots)],
                        dim=0)


@program(*FORESTS)
class ForeachInsideEachCall(HybridBlock):
    """Every call runs a stateful foreach over its node's three features."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            row = F.take(x, i)

            def leaf():
                def body(v, states):
                    s = states[0] * 0.5 + v
                    return s, [s]
                outs, (s,) = gluon_cf.foreach(body, F.transpose(row), [F.zeros((1,))])
                return F.broadcast_add(F.transpose(outs), s)
            return gluon_cf.cond(F.take(left, i) < 0, leaf,
                                 lambda: node(F.take(left, i)) - node(F.take(right, i)) * 0.5)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        def leaf(h):
            s, outs = F.zeros((1,)), []
            for c in range(h.shape[1]):
                s = s * 0.5 + h[0, c:c + 1]
                outs.append(s)
            return F.reshape(F.concat(*outs, dim=0), (1, -1)) + s
        return _plain_tree(F, x, left, right, roots, leaf, lambda h, a, b: a - b * 0.5)


@program(*FORESTS)
class ThreeLeafKindsByValue(HybridBlock):
    """Nested conds pick one of three leaf computations by the node's first value."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            h = F.take(x, i)
            first = F.slice_axis(h, axis=1, begin=0, end=1)

            def leaf():
                return gluon_cf.cond(
                    F.sum(first) > 0.3, lambda: h * 3,
                    lambda: gluon_cf.cond(F.sum(first) < -0.3, lambda: F.abs(h), lambda: h - 1))
            return gluon_cf.cond(F.take(left, i) < 0, leaf,
                                 lambda: F.maximum(node(F.take(left, i)), node(F.take(right, i))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        def leaf(h):
            first = _scalar(h[0, 0])
            return h * 3 if first > 0.3 else F.abs(h) if first < -0.3 else h - 1
        return _plain_tree(F, x, left, right, roots, leaf, lambda h, a, b: F.maximum(a, b))


@program(*FORESTS)
class HelperFunctionWithoutRecursion(HybridBlock):
    """A recursive function calls a second @recursive function that never recurses."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def squash(h):
            return F.tanh(self.d(h))

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: squash(F.take(x, i)),
                                 lambda: squash(node(F.take(left, i)) + node(F.take(right, i))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_tree(F, x, left, right, roots, lambda h: F.tanh(self.d(h)),
                           lambda h, a, b: F.tanh(self.d(a + b)))


@program(*H0)
class DecoderWithPerCallCounter(HybridBlock):
    """A top-down decoder whose depth counter is built from the state (zeros_like): values
    decide the tree and every operator acts row by row, so it batches."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.l = nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, h0):
        @gluon_cf.recursive
        def grow(h, depth):
            score = F.sum(h, axis=1)

            def expand():
                a = grow(F.tanh(self.l(h)), depth + 1)
                b = grow(F.tanh(self.l(h) * -1), depth + 1)
                return h + a * 0.5 + b * 0.25
            return gluon_cf.cond((score > -0.5) * (depth < 3), expand, lambda: h * 2)
        hs, _ = gluon_cf.foreach(
            lambda row, _: (grow(F.expand_dims(row, 0),
                                 F.zeros_like(F.slice_axis(row, axis=0, begin=0, end=1))), []),
            h0, [])
        return F.reshape(hs, (-3, -2))

    def plain_forward(self, F, h0):
        def grow(h, depth):
            if _scalar(F.sum(h)) > -0.5 and depth < 3:
                return h + grow(F.tanh(self.l(h)), depth + 1) * 0.5 + \
                    grow(F.tanh(self.l(h) * -1), depth + 1) * 0.25
            return h * 2
        return F.concat(*[grow(h0[k:k + 1], 0) for k in range(h0.shape[0])], dim=0)


@program(*FORESTS)
class LeafKeepsRowsAboveItsValue(HybridBlock):
    """Each leaf keeps the rows of x whose first value exceeds its own (none for the
    largest) and sums them into its row."""

    def hybrid_forward(self, F, x, left, right, roots):
        first = F.slice_axis(x, axis=1, begin=0, end=1)

        @gluon_cf.recursive
        def node(i):
            def leaf():
                mine = F.take(first, i)
                mask = F.reshape(F.broadcast_greater(first, mine), (-1,))
                kept = F.contrib.boolean_mask(x, mask)
                return F.take(x, i) + F.sum(kept, axis=0, keepdims=True) * 0.01
            return gluon_cf.cond(F.take(left, i) < 0, leaf,
                                 lambda: node(F.take(left, i)) + node(F.take(right, i)))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        values = x.asnumpy()[:, 0]

        def leaf(h):
            keep = (values > _scalar(h[0, 0])).astype("float32").reshape(-1, 1)
            return h + F.sum(x * F.array(keep), axis=0, keepdims=True) * 0.01
        return _plain_tree(F, x, left, right, roots, leaf, lambda h, a, b: a + b)
