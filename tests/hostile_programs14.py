"""Issue 24, recursion as users write it (eighth round): top-down decoders whose tree the model
decides, n-ary CSR trees walked by mutual recursion over child ranges, three functions calling
each other with a base case on values, loops and conds in bodies and leaves, state passed down,
closures over values computed before the call and over other blocks' parameters, float64 and
integer indices, tuples of several shapes, forests mixing single nodes and deep chains, DAGs
and repeated roots, recursion inside a foreach carrying state across the batch, BatchNorm and
LayerNorm in cells, two functions of one code object, a module-level recursive function, heap
trees indexed by integer arithmetic. Each block's ``plain_forward`` is the same model as
plain Python recursion on NDArrays, reading indices and predicates on the host (the oracle)."""
import mxnet as mx
import numpy as np
from mxnet.gluon import HybridBlock, nn

import gluon_cf

import hostile_harness
from hostile_programs4 import _ids, _row

PROGRAMS, program = hostile_harness.program_registry()

_rand = hostile_harness.rand
_f = hostile_harness.floats


def _i32(*values):
    return np.array(values, np.int32)


def _scalar(v):
    return float(v.asnumpy().ravel()[0])


def _rows_of(F, node, roots):
    """``node`` of every root, in a foreach over ``roots`` (one (1, d) row each)."""
    hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
    return F.reshape(hs, (-3, -2))


# ---- forests ---------------------------------------------------------------------------------
# binary: x, left, right, roots.  0 = (1, 2); 3 = (4, (5, 6)); 7 single; a chain 8 -> 9 -> ... 13
X14 = _rand(14, 3, seed=3)
_L = [1, -1, -1, 4, -1, 6 - 1 + 1, -1, -1, 9, 10, 11, 12, 13, -1]
_R = [2, -1, -1, 5, -1, -1, -1, -1, 9, 10, 11, 12, 13, -1]
# node 5 = (6, 6)? no: 5's left is 6 and right -1 would be unbalanced; make 5 = (6, 6), a DAG
_L[5], _R[5] = 6, 6
MIXED = [X14, _f(*_L), _f(*_R), _f(0, 3, 7, 8, 7, 13)]
DIAMOND = [_rand(6, 3, seed=4), _f(1, 3, 3, 5, -1, -1), _f(2, 3, 4, 5, -1, -1), _f(0, 0, 3, 5)]
ONE_NODE = [_rand(1, 3, seed=5), _f(-1), _f(-1), _f(0, 0)]
CHAIN = [_rand(7, 3, seed=6), _f(1, 2, 3, 4, 5, 6, -1), _f(1, 2, 3, 4, 5, 6, -1), _f(0, 4, 6)]
BINARY = (MIXED, DIAMOND, ONE_NODE, CHAIN)

# CSR n-ary: x, ptr, cidx, roots.  0 -> (1, 2, 3); 1 -> (); 2 -> (4); 3 -> (); 4 -> (5, 6, 7, 8);
# 9 alone; 10 -> (4) (a shared subtree)
_PTR = [0, 3, 3, 4, 4, 8, 8, 8, 8, 8, 8, 9]
_CIDX = [1, 2, 3, 4, 5, 6, 7, 8, 4]
CSR_A = [_rand(11, 3, seed=7), _f(*_PTR), _f(*_CIDX), _f(0, 9, 10, 4)]
CSR_LEAVES = [_rand(3, 3, seed=8), _f(0, 0, 0, 0), _f(0), _f(2, 1, 0)]
CSR_CHAIN = [_rand(5, 3, seed=9), _f(0, 1, 2, 3, 4, 4), _f(1, 2, 3, 4, 0), _f(0, 2)]
CSR = (CSR_A, CSR_LEAVES, CSR_CHAIN)


def _plain_binary(F, x, left, right, roots, leaf, combine):
    lt, rt, n = _ids(left), _ids(right), x.shape[0]

    def node(i):
        i = _row(i, n)
        here = F.take(x, F.array([i]))
        if lt[i] < 0:
            return leaf(here)
        return combine(here, node(lt[i]), node(rt[i]))
    return F.concat(*[node(r) for r in _ids(roots)], dim=0)


# ---- top-down decoders: the model decides the tree --------------------------------------------
H0 = [_rand(3, 4, seed=11)]
H0_B = [_rand(5, 4, seed=12, low=-2, high=2)]
H0_ONE = [_rand(1, 4, seed=13)]


@program(H0, H0_B, H0_ONE)
class ScoreDecoderWithDepthCounter(HybridBlock):
    """Expand a node while its score w.h > 0 and its depth (a tensor passed down) < 3."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.w = self.params.get("w", shape=(1, 4))
            self.left = nn.Dense(4, in_units=4)
            self.right = nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, h0, w):
        @gluon_cf.recursive
        def grow(h, depth):
            score = F.sum(h * w)

            def expand():
                return h + grow(F.tanh(self.left(h)), depth + 1) + \
                    grow(F.tanh(self.right(h)), depth + 1) * 0.5
            return gluon_cf.cond((score > 0) * (depth < 3), expand, lambda: h * 2)
        hs, _ = gluon_cf.foreach(
            lambda r, _: (grow(F.expand_dims(r, 0), F.zeros_like(F.slice_axis(r, 0, 0, 1))), []),
            h0, [])
        return F.reshape(hs, (-3, -2))

    def plain_forward(self, F, h0, w):
        def grow(h, depth):
            if _scalar(F.sum(h * w)) > 0 and depth < 3:
                return h + grow(F.tanh(self.left(h)), depth + 1) + \
                    grow(F.tanh(self.right(h)), depth + 1) * 0.5
            return h * 2
        return F.concat(*[grow(h0[k:k + 1], 0) for k in range(h0.shape[0])], dim=0)


@program(H0, H0_B, H0_ONE)
class NormDecoderNoCounter(HybridBlock):
    """Expand while the norm of h exceeds 0.4; the children shrink by learned scales, so the
    depth is decided by the values alone (max_depth as a guard)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.a = self.params.get("a", shape=(1, 4), init=mx.init.Constant(0.6))
            self.b = self.params.get("b", shape=(1, 4), init=mx.init.Constant(0.35))

    def hybrid_forward(self, F, h0, a, b):
        @gluon_cf.recursive(max_depth=64)
        def grow(h):
            return gluon_cf.cond(F.norm(h) > 0.4,
                                 lambda: F.tanh(h) + grow(h * a) - grow(h * b),
                                 lambda: F.sigmoid(h))
        return _rows_of(F, lambda r: grow(F.expand_dims(r, 0)), h0)

    def plain_forward(self, F, h0, a, b):
        def grow(h):
            if _scalar(F.norm(h)) > 0.4:
                return F.tanh(h) + grow(h * a) - grow(h * b)
            return F.sigmoid(h)
        return F.concat(*[grow(h0[k:k + 1]) for k in range(h0.shape[0])], dim=0)


@program(H0, H0_B, H0_ONE)
class LinearDecoderReturnsLength(HybridBlock):
    """A decoder as tail recursion: step the cell until the score is <= 0 or 6 steps; return
    the final state and the number of steps (int32, a second output of another shape)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = nn.Dense(4, in_units=4)
            self.score = nn.Dense(1, in_units=4)

    def hybrid_forward(self, F, h0):
        @gluon_cf.recursive
        def gen(h, t):
            def more():
                h2, t2 = gen(F.tanh(self.cell(h)) + h * 0.5, t + 1)
                return h2, t2
            return gluon_cf.cond((F.sum(self.score(h)) > 0) * (t < 6), more, lambda: (h, t))
        outs, _ = gluon_cf.foreach(
            lambda r, _: (list(gen(F.expand_dims(r, 0),
                                   F.zeros_like(F.slice_axis(r, 0, 0, 1)))), []), h0, [])
        return F.reshape(outs[0], (-3, -2)), F.cast(outs[1], "int32")

    def plain_forward(self, F, h0):
        finals, lengths = [], []
        for k in range(h0.shape[0]):
            h, t = h0[k:k + 1], 0
            while _scalar(F.sum(self.score(h))) > 0 and t < 6:
                h, t = F.tanh(self.cell(h)) + h * 0.5, t + 1
            finals.append(h)
            lengths.append(t)
        return F.concat(*finals, dim=0), F.array(np.array(lengths, np.int32).reshape(-1, 1),
                                                 dtype="int32")


# ---- CSR trees --------------------------------------------------------------------------------
def _plain_csr(F, x, ptr, cidx, roots, combine):
    p, c, n = _ids(ptr), _ids(cidx), x.shape[0]

    def node(i):
        i = _row(i, n)
        return combine(F.take(x, F.array([i])), [node(c[k]) for k in range(p[i], p[i + 1])])
    return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*CSR)
class CsrMutualNodeAndChildRange(HybridBlock):
    """node(i) = tanh(x_i + kids(ptr[i], ptr[i+1])); kids(k, end) recurses over the child
    range (no loop): zero-child nodes are an empty range."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, ptr, cidx, roots):
        @gluon_cf.recursive
        def kids(k, end):
            return gluon_cf.cond(k >= end, lambda: F.take(x, F.zeros_like(k)) * 0,
                                 lambda: node(F.take(cidx, k)) + kids(k + 1, end))

        @gluon_cf.recursive
        def node(i):
            return F.tanh(F.take(x, i) + kids(F.take(ptr, i), F.take(ptr, i + 1)))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, ptr, cidx, roots):
        return _plain_csr(F, x, ptr, cidx, roots,
                          lambda here, ks: F.tanh(here + sum(ks, F.zeros_like(here))))


@program(*CSR)
class CsrMaxOfChildrenWhile(HybridBlock):
    """Max-pool of the children in a while_loop (no step for a zero-child node), the leaf told
    apart by a where on the pooled value."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, ptr, cidx, roots):
        @gluon_cf.recursive
        def node(i):
            here = F.take(x, i)
            _, (_, pooled) = gluon_cf.while_loop(
                lambda k, m: k < F.take(ptr, i + 1),
                lambda k, m: ([], [k + 1, F.maximum(m, node(F.take(cidx, k)))]),
                [F.take(ptr, i), F.ones_like(here) * -1e4], max_iterations=5)
            return F.where(pooled < -1e3, F.tanh(here), F.tanh(here + pooled))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, ptr, cidx, roots):
        def combine(here, ks):
            if not ks:
                return F.tanh(here)
            m = ks[0]
            for k in ks[1:]:
                m = F.maximum(m, k)
            return F.tanh(here + m)
        return _plain_csr(F, x, ptr, cidx, roots, combine)


@program(*CSR)
class CsrLeafByEmptyRangeCond(HybridBlock):
    """A node is a leaf when ptr[i] == ptr[i+1]; internal nodes average their children with a
    Dense, counting them as a float computed from ptr."""
    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.mix = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, ptr, cidx, roots):
        @gluon_cf.recursive
        def node(i):
            here = F.take(x, i)
            begin, end = F.take(ptr, i), F.take(ptr, i + 1)

            def internal():
                _, (_, total) = gluon_cf.while_loop(
                    lambda k, s: k < end, lambda k, s: ([], [k + 1, s + node(F.take(cidx, k))]),
                    [begin, F.zeros_like(here)], max_iterations=5)
                return F.tanh(self.mix(F.broadcast_div(total, F.reshape(end - begin, (1, 1))))
                              + here)
            return gluon_cf.cond(begin == end, lambda: here * 3, internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, ptr, cidx, roots):
        def combine(here, ks):
            if not ks:
                return here * 3
            return F.tanh(self.mix(sum(ks[1:], ks[0]) / len(ks)) + here)
        return _plain_csr(F, x, ptr, cidx, roots, combine)


# ---- mutual recursion, base cases on values ----------------------------------------------------
V3 = [_rand(4, 3, seed=21, low=-3, high=3)]
V3_SMALL = [_rand(2, 3, seed=22, low=-0.2, high=0.2)]
V3_MIX = [np.concatenate([_rand(2, 3, seed=23, low=-5, high=5), _rand(1, 3, seed=24,
                                                                     low=-.1, high=.1)])]


@program(V3, V3_SMALL, V3_MIX)
class ThreeFunctionsBaseCaseOnValue(HybridBlock):
    """a -> b -> c -> a; only a has a base case (the sum of |v| under 0.5)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, v0):
        @gluon_cf.recursive
        def a(v):
            return gluon_cf.cond(F.sum(F.abs(v)) < 0.5, lambda: self.d(v), lambda: b(v * 0.8))

        @gluon_cf.recursive
        def b(v):
            return c(v * 0.9 + F.sin(v) * 0.01) * 0.5

        @gluon_cf.recursive
        def c(v):
            return a(v) + F.tanh(v)
        return _rows_of(F, lambda r: a(F.expand_dims(r, 0)), v0)

    def plain_forward(self, F, v0):
        def a(v):
            if _scalar(F.sum(F.abs(v))) < 0.5:
                return self.d(v)
            return b(v * 0.8)

        def b(v):
            return c(v * 0.9 + F.sin(v) * 0.01) * 0.5

        def c(v):
            return a(v) + F.tanh(v)
        return F.concat(*[a(v0[k:k + 1]) for k in range(v0.shape[0])], dim=0)


@program(V3, V3_SMALL, V3_MIX)
class HalvingReturnsValueAndCount(HybridBlock):
    """Halve until max |v| < 1, returning (v, number of halvings) of shapes (1, 3), (1, 1)."""

    def hybrid_forward(self, F, v0):
        @gluon_cf.recursive
        def halve(v):
            def again():
                u, count = halve(v * 0.5)
                return u + v * 0.01, count + 1
            return gluon_cf.cond(F.max(F.abs(v)) < 1,
                                 lambda: (v, F.zeros_like(F.slice_axis(v, 1, 0, 1))), again)
        outs, _ = gluon_cf.foreach(lambda r, _: (list(halve(F.expand_dims(r, 0))), []), v0, [])
        return F.reshape(outs[0], (-3, -2)), F.reshape(outs[1], (-3, -2))

    def plain_forward(self, F, v0):
        def halve(v):
            if _scalar(F.max(F.abs(v))) < 1:
                return v, F.zeros((1, 1))
            u, count = halve(v * 0.5)
            return u + v * 0.01, count + 1
        outs = [halve(v0[k:k + 1]) for k in range(v0.shape[0])]
        return F.concat(*[o[0] for o in outs], dim=0), F.concat(*[o[1] for o in outs], dim=0)


COLLATZ = [np.array([[1], [2], [3], [6], [7]], np.float64)]
COLLATZ_B = [np.array([[12], [9]], np.float64)]


@program(COLLATZ, COLLATZ_B)
class CollatzStepsFloat64(HybridBlock):
    """Collatz steps of float64 integers: a base case and a branch chosen by values."""

    def hybrid_forward(self, F, n0):
        @gluon_cf.recursive(max_depth=200)
        def steps(n):
            nxt = F.where(F.broadcast_mod(n, F.ones_like(n) * 2) == 0, n / 2, n * 3 + 1)
            return gluon_cf.cond(n <= 1, lambda: n * 0, lambda: steps(nxt) + 1)
        outs, _ = gluon_cf.foreach(lambda r, _: (steps(r), []), n0, [])
        return outs

    def plain_forward(self, F, n0):
        counts = []
        for k in range(n0.shape[0]):
            n, s = float(n0[k].asnumpy()[0]), 0
            while n > 1:
                n, s = (n / 2 if n % 2 == 0 else 3 * n + 1), s + 1
            counts.append([s])
        return F.array(np.array(counts, np.float64), dtype="float64") + n0 * 0


@program([np.array([[0], [1], [5], [7]], np.float32), _rand(1, 3, seed=31)],
         [np.array([[2]], np.float32), _rand(1, 3, seed=32)])
class FibonacciTreeOfCalls(HybridBlock):
    """fib(n) = tanh(fib(n-1)) + 0.5 fib(n-2), fib(0) = 0*x, fib(1) = x: exponentially many
    invocations at many depths, repeated subproblems; x is a closure."""
    NO_GRAD = (0,)

    def hybrid_forward(self, F, n0, x):
        @gluon_cf.recursive
        def fib(n):
            return gluon_cf.cond(n < 2, lambda: F.broadcast_mul(F.reshape(n, (1, 1)), x),
                                 lambda: F.tanh(fib(n - 1)) + fib(n - 2) * 0.5)
        return _rows_of(F, fib, n0)

    def plain_forward(self, F, n0, x):
        def fib(n):
            if n < 2:
                return x * n
            return F.tanh(fib(n - 1)) + fib(n - 2) * 0.5
        return F.concat(*[fib(int(v)) for v in _ids(n0)], dim=0)


# ---- loops and conds in bodies and leaves, closures over precomputed values ------------------
@program(*BINARY)
class LeafForeachOverPrecomputedSequence(HybridBlock):
    """A sequence computed before the call (a Dense of x) is read by a foreach in every leaf."""
    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.enc = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, left, right, roots):
        seq = F.tanh(self.enc(F.slice_axis(x, 0, 0, 1) + 1))       # (1, 3): one step

        def leaf(here):
            _, (h,) = gluon_cf.foreach(
                lambda s, st: ([], [F.tanh(F.broadcast_add(st[0], s * 0.5))]),
                F.concat(seq, seq * 2, dim=0), [here])
            return h

        @gluon_cf.recursive
        def node(i):
            here = F.take(x, i)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: leaf(here),
                                 lambda: here + node(F.take(left, i)) * node(F.take(right, i)))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        seq = F.tanh(self.enc(x[0:1] + 1))

        def leaf(here):
            for s in (seq, seq * 2):
                here = F.tanh(here + s * 0.5)
            return here
        return _plain_binary(F, x, left, right, roots, leaf, lambda h, a, b: h + a * b)


STEPS_MIXED = MIXED + [_f(0, 2, 1, 0, 3, 0, 1, 2, 0, 1, 2, 3, 0, 1)]
STEPS_CHAIN = CHAIN + [_f(1, 0, 0, 2, 0, 1, 3)]


@program(STEPS_MIXED, STEPS_CHAIN)
class BodyWhileLoopOfPerNodeSteps(HybridBlock):
    """Every node runs its own number of loop steps (0 for some) before combining."""
    NO_GRAD = (1, 2, 3, 4)

    def hybrid_forward(self, F, x, left, right, roots, steps):
        @gluon_cf.recursive
        def node(i):
            _, (_, h) = gluon_cf.while_loop(
                lambda k, h: k < F.take(steps, i), lambda k, h: ([], [k + 1, F.tanh(h * 1.5)]),
                [F.zeros_like(i), F.take(x, i)], max_iterations=4)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: h,
                                 lambda: h - node(F.take(left, i)) + node(F.take(right, i)))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, steps):
        st, lt, rt, n = _ids(steps), _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            h = F.take(x, F.array([i]))
            for _ in range(st[i]):
                h = F.tanh(h * 1.5)
            if lt[i] < 0:
                return h
            return h - node(lt[i]) + node(rt[i])
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*BINARY)
class NestedCondsOnValuesInLeafAndNode(HybridBlock):
    """The leaf picks by its value's sign; the node picks tanh or sigmoid by its children."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            here = F.take(x, i)

            def internal():
                s = node(F.take(left, i)) + node(F.take(right, i))
                return gluon_cf.cond(F.sum(s) > 0, lambda: F.tanh(s + here),
                                     lambda: F.sigmoid(s - here))
            return gluon_cf.cond(F.take(left, i) < 0,
                                 lambda: gluon_cf.cond(F.sum(here) > 0, lambda: here * 2,
                                                       lambda: -here), internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        def leaf(here):
            return here * 2 if _scalar(F.sum(here)) > 0 else -here

        def combine(here, a, b):
            s = a + b
            return F.tanh(s + here) if _scalar(F.sum(s)) > 0 else F.sigmoid(s - here)
        return _plain_binary(F, x, left, right, roots, leaf, combine)


class _Shared(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = nn.Dense(3, in_units=3)


@program(*BINARY)
class TwoFunctionsShareACellTopDownAndBottomUp(_Shared):
    """A bottom-up pass and a top-down pass (the parent's state passed down) share one Dense;
    the top-down pass reads the bottom-up result of the root, a value computed before it."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def up(i):
            here = F.take(x, i)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.tanh(self.cell(here)),
                                 lambda: F.tanh(self.cell(here + up(F.take(left, i)) +
                                                          up(F.take(right, i)))))

        @gluon_cf.recursive
        def down(i, parent):
            h = F.tanh(self.cell(F.take(x, i)) + parent)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: h,
                                 lambda: down(F.take(left, i), h) + down(F.take(right, i), h))

        def per_root(r):
            return down(r, up(r) * 0.5)
        return _rows_of(F, per_root, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def up(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return F.tanh(self.cell(here))
            return F.tanh(self.cell(here + up(lt[i]) + up(rt[i])))

        def down(i, parent):
            i = _row(i, n)
            h = F.tanh(self.cell(F.take(x, F.array([i]))) + parent)
            if lt[i] < 0:
                return h
            return down(lt[i], h) + down(rt[i], h)
        return F.concat(*[down(r, up(r) * 0.5) for r in _ids(roots)], dim=0)


@program(*BINARY)
class TopDownTupleStatePassedDown(HybridBlock):
    """(h, c) passed down as a tuple argument; leaves return c - h."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def down(i, state):
            h, c = state
            here = F.take(x, i)
            nh, nc = F.tanh(h + here), c * 0.5 + here
            return gluon_cf.cond(F.take(left, i) < 0, lambda: nc - nh,
                                 lambda: down(F.take(left, i), (nh, nc)) * 0.7 +
                                 down(F.take(right, i), (nc, nh)) * 0.3)

        def per_root(r):
            z = F.zeros_like(F.take(x, r))
            return down(r, (z, z + 1))
        return _rows_of(F, per_root, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def down(i, h, c):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            nh, nc = F.tanh(h + here), c * 0.5 + here
            if lt[i] < 0:
                return nc - nh
            return down(lt[i], nh, nc) * 0.7 + down(rt[i], nc, nh) * 0.3
        return F.concat(*[down(r, F.zeros((1, 3)), F.ones((1, 3))) for r in _ids(roots)],
                        dim=0)


@program(*BINARY)
class ReturnsThreeShapesIncludingOuterProduct(HybridBlock):
    """Returns [h (1, 3), outer sum (1, 3, 3), leaves (1,)]."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            here = F.take(x, i)

            def leaf():
                return [F.tanh(here), F.batch_dot(F.expand_dims(here, 2), F.expand_dims(here, 1)),
                        F.ones_like(i)]

            def internal():
                lh, lo, ln = node(F.take(left, i))
                rh, ro, rn = node(F.take(right, i))
                h = F.tanh(here + lh - rh)
                return [h, lo + ro * 0.5 + F.batch_dot(F.expand_dims(h, 2), F.expand_dims(h, 1)),
                        ln + rn]
            return gluon_cf.cond(F.take(left, i) < 0, leaf, internal)
        outs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(outs[0], (-3, -2)), F.reshape(outs[1], (-3, -2)), outs[2]

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def outer(h):
            return F.batch_dot(F.expand_dims(h, 2), F.expand_dims(h, 1))

        def node(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return F.tanh(here), outer(here), F.ones((1,))
            lh, lo, ln = node(lt[i])
            rh, ro, rn = node(rt[i])
            h = F.tanh(here + lh - rh)
            return h, lo + ro * 0.5 + outer(h), ln + rn
        outs = [node(r) for r in _ids(roots)]
        return tuple(F.concat(*[o[k] for o in outs], dim=0) for k in range(2)) + \
            (F.stack(*[o[2] for o in outs]),)


@program(*BINARY)
class ForeachCarriesStateAcrossRoots(HybridBlock):
    """The foreach's state (a running summary of earlier trees) is passed into each tree's
    recursion and read at every leaf."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i, memory):
            here = F.take(x, i)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: here * memory,
                                 lambda: F.tanh(node(F.take(left, i), memory) +
                                                node(F.take(right, i), memory * 0.5) + here))

        def body(r, states):
            h = node(r, states[0])
            return h, [states[0] * 0.5 + h]
        hs, _ = gluon_cf.foreach(body, roots, [F.ones_like(F.slice_axis(x, 0, 0, 1))])
        return F.reshape(hs, (-3, -2))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i, memory):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return here * memory
            return F.tanh(node(lt[i], memory) + node(rt[i], memory * 0.5) + here)
        memory, hs = F.ones((1, 3)), []
        for r in _ids(roots):
            h = node(r, memory)
            hs.append(h)
            memory = memory * 0.5 + h
        return F.concat(*hs, dim=0)


@program(*BINARY)
class NonCommutativeDenseCombine(HybridBlock):
    """Dense(concat(left, right, here)): the order of children matters."""
    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.proj = nn.Dense(3, in_units=9, activation="tanh")

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: self.proj(F.concat(node(F.take(left, i)),
                                                            node(F.take(right, i)),
                                                            F.take(x, i), dim=1)))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots, lambda h: h,
                             lambda h, a, b: self.proj(F.concat(a, b, h, dim=1)))


@program(*BINARY)
class AttentionOverTwoChildren(HybridBlock):
    """Softmax over the two children's scores (axis 1), a weighted sum."""
    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.score = nn.Dense(1, in_units=3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            def internal():
                a, b = node(F.take(left, i)), node(F.take(right, i))
                w = F.softmax(F.concat(self.score(a), self.score(b), dim=1), axis=1)
                return F.tanh(F.broadcast_mul(a, F.slice_axis(w, 1, 0, 1)) +
                              F.broadcast_mul(b, F.slice_axis(w, 1, 1, 2)) + F.take(x, i))
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        def combine(h, a, b):
            w = F.softmax(F.concat(self.score(a), self.score(b), dim=1), axis=1)
            return F.tanh(a * w[:, 0:1] + b * w[:, 1:2] + h)
        return _plain_binary(F, x, left, right, roots, lambda h: h, combine)


@program(*BINARY)
class SortInsideNode(HybridBlock):
    """A node sorts its children's sum along the features (a row-wise sort)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.sort(F.take(x, i), axis=1),
                lambda: F.sort(node(F.take(left, i)) + node(F.take(right, i)) * 2, axis=1,
                               is_ascend=False) * 0.5 + F.take(x, i))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots, lambda h: F.sort(h, axis=1),
                             lambda h, a, b: F.sort(a + b * 2, axis=1, is_ascend=False) * 0.5 + h)


@program(*BINARY)
class DepthAsInt32Output(HybridBlock):
    """Returns (h, height) with the height cast to int32 inside the recursion."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            here = F.take(x, i)

            def internal():
                lh, ld = node(F.take(left, i))
                rh, rd = node(F.take(right, i))
                return F.tanh(here + lh + rh), F.maximum(ld, rd) + 1
            return gluon_cf.cond(F.take(left, i) < 0,
                                 lambda: (here, F.cast(F.zeros_like(i), "int32")), internal)
        outs, _ = gluon_cf.foreach(lambda r, _: (list(node(r)), []), roots, [])
        return F.reshape(outs[0], (-3, -2)), outs[1]

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return here, 0
            (lh, ld), (rh, rd) = node(lt[i]), node(rt[i])
            return F.tanh(here + lh + rh), max(ld, rd) + 1
        outs = [node(r) for r in _ids(roots)]
        return F.concat(*[o[0] for o in outs], dim=0), \
            F.array(np.array([[o[1]] for o in outs], np.int32), dtype="int32")


@program(*BINARY)
class SameCodeTwoClosures(HybridBlock):
    """Two recursive functions made by one Python loop (one code object), closing over
    different scales; both are called."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        functions = []
        for scale in (1.0, -2.0):
            def make(scale):
                @gluon_cf.recursive
                def node(i):
                    return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) * scale,
                                         lambda: F.tanh(node(F.take(left, i)) +
                                                        node(F.take(right, i)) * scale))
                return node
            functions.append(make(scale))
        return _rows_of(F, lambda r: functions[0](r) + functions[1](r) * 0.1, roots)

    def plain_forward(self, F, x, left, right, roots):
        outs = [_plain_binary(F, x, left, right, roots, lambda h, s=s: h * s,
                              lambda h, a, b, s=s: F.tanh(a + b * s)) for s in (1.0, -2.0)]
        return outs[0] + outs[1] * 0.1


@gluon_cf.recursive
def module_level_tree_sum(x, left, i):
    """A module-level recursive function (no closure): it finds F from its argument."""
    F = mx.sym if isinstance(x, mx.sym.Symbol) else mx.nd
    return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                         lambda: F.take(x, i) * 0.5 +
                         module_level_tree_sum(x, left, F.take(left, i)) * 0.9)


@program(*BINARY)
class ModuleLevelFunctionOnTwoArrays(HybridBlock):
    """One module-level recursive function called on x and on tanh(x), down left spines."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        y = F.tanh(x)
        return _rows_of(F, lambda r: module_level_tree_sum(x, left, r) -
                        module_level_tree_sum(y, left, r), roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, n = _ids(left), x.shape[0]

        def spine(a, i):
            i = _row(i, n)
            here = F.take(a, F.array([i]))
            return here if lt[i] < 0 else here * 0.5 + spine(a, lt[i]) * 0.9
        y = F.tanh(x)
        return F.concat(*[spine(x, r) - spine(y, r) for r in _ids(roots)], dim=0)


@program(*BINARY)
class ExplicitInvokeMutual(HybridBlock):
    """Mutual recursion through gluon_cf.invoke on plain functions (even and odd levels)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        def even(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: gluon_cf.invoke(odd, F.take(left, i)) +
                                 gluon_cf.invoke(odd, F.take(right, i)))

        def odd(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: -F.take(x, i),
                                 lambda: F.tanh(gluon_cf.invoke(even, F.take(left, i)) -
                                                gluon_cf.invoke(even, F.take(right, i))))
        return _rows_of(F, lambda r: gluon_cf.invoke(even, r), roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i, parity):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return here if parity == 0 else -here
            a, b = node(lt[i], 1 - parity), node(rt[i], 1 - parity)
            return a + b if parity == 0 else F.tanh(a - b)
        return F.concat(*[node(r, 0) for r in _ids(roots)], dim=0)


# ---- heap-ordered trees: children by integer arithmetic ---------------------------------------
HEAP7 = [_rand(7, 3, seed=41), _i32(7), _i32(0, 1, 0, 6)]
HEAP6 = [_rand(6, 3, seed=42), _i32(6), _i32(2, 0)]
HEAP1 = [_rand(1, 3, seed=43), _i32(1), _i32(0)]


@program(HEAP7, HEAP6, HEAP1)
class HeapTreeIntArithmetic(HybridBlock):
    """Children 2i+1 and 2i+2 of int32 indices; a node with one child (n even) combines it
    alone; n is an input."""
    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, x, count, roots):
        @gluon_cf.recursive
        def node(i):
            here = F.take(x, i)
            first = i * 2 + 1
            return gluon_cf.cond(
                first >= count, lambda: here,
                lambda: gluon_cf.cond(first + 1 >= count,
                                      lambda: F.tanh(here + node(first)),
                                      lambda: F.tanh(here + node(first) - node(first + 1))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, count, roots):
        n = int(count.asnumpy()[0])

        def node(i):
            here = F.take(x, F.array([i]))
            if 2 * i + 1 >= n:
                return here
            if 2 * i + 2 >= n:
                return F.tanh(here + node(2 * i + 1))
            return F.tanh(here + node(2 * i + 1) - node(2 * i + 2))
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program([_rand(7, 3, seed=44), _f(6, 3, 0, 5, 5)], [_rand(4, 3, seed=45), _f(3)])
class UpwardPathToRootFloor(HybridBlock):
    """From a node up to the root of a heap: parent = floor((i - 1) / 2)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, starts):
        @gluon_cf.recursive
        def up(i):
            return gluon_cf.cond(i <= 0, lambda: F.take(x, i),
                                 lambda: F.take(x, i) + up(F.floor((i - 1) / 2)) * 0.5)
        return _rows_of(F, up, starts)

    def plain_forward(self, F, x, starts):
        def up(i):
            here = F.take(x, F.array([i]))
            return here if i <= 0 else here + up((i - 1) // 2) * 0.5
        return F.concat(*[up(r) for r in _ids(starts)], dim=0)


# ---- nesting of recursive functions -----------------------------------------------------------
# documents: a doc tree over sentences (dleft/dright), each sentence leaf is a word tree
DOCS = [_rand(7, 3, seed=51), _f(1, -1, -1, 4, -1, -1, -1), _f(2, -1, -1, 5, -1, -1, -1),
        _f(1, -1, -1), _f(2, -1, -1), _f(0, 3, 6), _f(0, 1)]
DOCS_ONE = [_rand(7, 3, seed=52), _f(1, -1, -1, 4, -1, -1, -1), _f(2, -1, -1, 5, -1, -1, -1),
            _f(-1), _f(-1), _f(3), _f(0)]


@program(DOCS, DOCS_ONE)
class SentenceTreesInsideDocumentTree(HybridBlock):
    """An outer recursion over a document tree whose leaves run an inner recursion over a
    sentence's word tree (two functions, one nested in the other's leaf)."""
    NO_GRAD = (1, 2, 3, 4, 5, 6)

    def hybrid_forward(self, F, x, left, right, dleft, dright, sroot, docs):
        @gluon_cf.recursive
        def word(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: F.tanh(word(F.take(left, i)) + word(F.take(right, i))))

        @gluon_cf.recursive
        def doc(j):
            return gluon_cf.cond(F.take(dleft, j) < 0, lambda: word(F.take(sroot, j)),
                                 lambda: doc(F.take(dleft, j)) * 0.5 - doc(F.take(dright, j)))
        return _rows_of(F, doc, docs)

    def plain_forward(self, F, x, left, right, dleft, dright, sroot, docs):
        lt, rt, dl, dr, sr = map(_ids, (left, right, dleft, dright, sroot))

        def word(i):
            here = F.take(x, F.array([i]))
            return here if lt[i] < 0 else F.tanh(word(lt[i]) + word(rt[i]))

        def doc(j):
            if dl[j] < 0:
                return word(sr[j])
            return doc(dl[j]) * 0.5 - doc(dr[j])
        return F.concat(*[doc(r) for r in _ids(docs)], dim=0)


# ---- normalisation in cells -------------------------------------------------------------------
@program(*BINARY)
class LayerNormOnThreeDimValues(HybridBlock):
    """Values of shape (1, 2, 3): a Dense(flatten=False) and a LayerNorm in the cell."""
    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.proj = nn.Dense(3, in_units=3, flatten=False)
            self.norm = nn.LayerNorm(in_channels=3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            here = F.reshape(F.concat(F.take(x, i), F.take(x, i) * -1, dim=1), (-1, 2, 3))
            return gluon_cf.cond(F.take(left, i) < 0, lambda: here,
                                 lambda: self.norm(self.proj(node(F.take(left, i)) +
                                                             node(F.take(right, i))) + here))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, -2))

    def plain_forward(self, F, x, left, right, roots):
        def lift(h):
            return F.reshape(F.concat(h, h * -1, dim=1), (-1, 2, 3))
        return _plain_binary(F, x, left, right, roots, lift,
                             lambda h, a, b: self.norm(self.proj(a + b) + lift(h)))


@program(*BINARY)
class ZerosConstantInBody(HybridBlock):
    """F.zeros((1, 3)) in the body (the README's "not batchable" example): row by row with the
    warning, values equal."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            bias = F.zeros((1, 3)) + 0.25
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) + bias,
                                 lambda: F.tanh(node(F.take(left, i)) - node(F.take(right, i)) +
                                                bias))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots, lambda h: h + 0.25,
                             lambda h, a, b: F.tanh(a - b + 0.25))


@program(*BINARY)
class TransposeMovingRowAxisInLeaf(HybridBlock):
    """A leaf runs a foreach over its own features, made the time axis by a transpose that
    moves axis 0 (no batching rule: row by row with the warning)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        def leaf(here):
            _, (h,) = gluon_cf.foreach(
                lambda s, st: ([], [F.tanh(F.broadcast_add(st[0] * 0.5, s))]),
                F.transpose(here), [F.zeros_like(F.slice_axis(here, 1, 0, 1))])
            return F.broadcast_add(here, h)

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: leaf(F.take(x, i)),
                                 lambda: node(F.take(left, i)) * node(F.take(right, i)))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        def leaf(here):
            h = F.zeros((1, 1))
            for k in range(3):
                h = F.tanh(h * 0.5 + here[:, k:k + 1])
            return here + h
        return _plain_binary(F, x, left, right, roots, leaf, lambda h, a, b: a * b)


@program(*[[f[0].astype(np.float64), f[1].astype(np.int64), f[2].astype(np.int64),
            f[3].astype(np.int64)] for f in BINARY])
class Float64ParametersInt64Indices(HybridBlock):
    """float64 features and parameters (net.cast), int64 index arrays."""
    NO_GRAD = (1, 2, 3)
    DTYPE = "float64"

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.proj = nn.Dense(3, in_units=6)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) * 1e-3,
                                 lambda: F.tanh(self.proj(F.concat(node(F.take(left, i)),
                                                                   node(F.take(right, i)),
                                                                   dim=1))) + F.take(x, i))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots, lambda h: h * 1e-3,
                             lambda h, a, b: F.tanh(self.proj(F.concat(a, b, dim=1))) + h)


@program(*BINARY)
class ParameterOnlyGradients(HybridBlock):
    """No input needs a gradient; the Dense's parameters do (through every level)."""
    NO_GRAD = (0, 1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = nn.Dense(3, in_units=3)
            self.bias = self.params.get("bias", shape=(1, 3), init=mx.init.Constant(0.1))

    def hybrid_forward(self, F, x, left, right, roots, bias):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.broadcast_add(F.take(x, i), bias),
                                 lambda: F.tanh(self.cell(node(F.take(left, i)) +
                                                          node(F.take(right, i)))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, bias):
        return _plain_binary(F, x, left, right, roots, lambda h: h + bias,
                             lambda h, a, b: F.tanh(self.cell(a + b)))


@program(*BINARY)
class RecursionCalledTwiceOnSameRootOutsideLoop(HybridBlock):
    """The recursion called directly (no foreach) on the first root twice and on a
    value-chosen root, its results combined."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.sigmoid(F.take(x, i)),
                                 lambda: node(F.take(left, i)) - node(F.take(right, i)) * 0.5)
        first = F.slice_axis(roots, 0, 0, 1)
        last = F.slice_axis(roots, 0, -1, None)
        return node(first) * 2 + node(first) + node(last)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            if lt[i] < 0:
                return F.sigmoid(F.take(x, F.array([i])))
            return node(lt[i]) - node(rt[i]) * 0.5
        ids = _ids(roots)
        return node(ids[0]) * 3 + node(ids[-1])


class BatchNormInCell(HybridBlock):
    """A BatchNorm over channels of (1, 2, 3) node values: in training each call normalises
    its own value and moves the running statistics (eagerly; hybridized training is refused,
    as the README says); in prediction it reads them."""
    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.norm = nn.BatchNorm(axis=1, in_channels=2)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            here = F.reshape(F.concat(F.take(x, i), F.take(x, i) * 2, dim=1), (-1, 2, 3))
            return gluon_cf.cond(F.take(left, i) < 0, lambda: here,
                                 lambda: F.tanh(self.norm(node(F.take(left, i)) +
                                                          node(F.take(right, i)) * here)))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, -2))

    def plain_forward(self, F, x, left, right, roots, **params):
        def lift(h):
            return F.reshape(F.concat(h, h * 2, dim=1), (-1, 2, 3))
        return _plain_binary(F, x, left, right, roots, lift,
                             lambda h, a, b: F.tanh(self.norm(a + b * lift(h))))


class ContribCondInsideRecursion(HybridBlock):
    """MXNet's own F.contrib.cond (not gluon_cf.cond) as the recursion's base case: runs
    eagerly, refused hybridized (README: call gluon_cf.cond)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return F.contrib.cond(F.take(left, i) < 0, lambda: F.take(x, i) * 3,
                                  lambda: F.tanh(node(F.take(left, i)) + node(F.take(right, i))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots, lambda h: h * 3,
                             lambda h, a, b: F.tanh(a + b))


class DropoutInLeaves(HybridBlock):
    """Dropout(0.5) on each leaf, combined by sums: in prediction the identity (checked
    against the oracle); in training see test_dropout_in_leaves_draws_a_mask_per_leaf."""
    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.drop = nn.Dropout(0.5)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: self.drop(F.take(x, i)),
                                 lambda: node(F.take(left, i)) + node(F.take(right, i)))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots, self.drop, lambda h, a, b: a + b)


class RowsOfAllRootsAtOnce(HybridBlock):
    """The recursion called once on all roots (shape (B,)): its cond's predicate then has B
    elements, refused as eager MXNet refuses it."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: node(F.take(left, i)) + node(F.take(right, i)))
        return node(roots)


@program(*BINARY)
class FactoryOfDepthFunctions(HybridBlock):
    """Per-invocation Python state the allowed way: make(d) builds a recursive function for
    depth d (closing over the Python int), which calls make(d - 1)'s; depth 0 is a leaf."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        made = {}

        def make(d):
            if d in made:
                return made[d]

            @gluon_cf.recursive(name="level%d" % d)
            def node(i):
                here = F.take(x, i) * (d + 1)
                if d == 0:
                    return here
                return gluon_cf.cond(F.take(left, i) < 0, lambda: here,
                                     lambda: F.tanh(make(d - 1)(F.take(left, i)) + here))
            made[d] = node
            return node
        return _rows_of(F, make(3), roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, n = _ids(left), x.shape[0]

        def node(i, d):
            i = _row(i, n)
            here = F.take(x, F.array([i])) * (d + 1)
            if d == 0 or lt[i] < 0:
                return here
            return F.tanh(node(lt[i], d - 1) + here)
        return F.concat(*[node(r, 3) for r in _ids(roots)], dim=0)


@program(HEAP7, HEAP6, HEAP1)
class HeapCountFromShapeArray(HybridBlock):
    """The heap's size read from x's shape (shape_array) inside the recursion."""
    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, x, count, roots):
        @gluon_cf.recursive
        def node(i):
            n = F.cast(F.slice_axis(F.shape_array(x), 0, 0, 1), "int32")
            return gluon_cf.cond(i * 2 + 2 >= n, lambda: F.take(x, i),
                                 lambda: F.take(x, i) * node(i * 2 + 1) + node(i * 2 + 2))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, count, roots):
        n = x.shape[0]

        def node(i):
            here = F.take(x, F.array([i]))
            return here if 2 * i + 2 >= n else here * node(2 * i + 1) + node(2 * i + 2)
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*BINARY)
class RematBottomUpWithDense(HybridBlock):
    """remat=True on a bottom-up recursion (indices passed down) with a Dense combine."""
    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = nn.Dense(3, in_units=3, activation="tanh")

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive(remat=True)
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: self.cell(node(F.take(left, i)) * 0.5 +
                                                   node(F.take(right, i)) + F.take(x, i)))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots, lambda h: h,
                             lambda h, a, b: self.cell(a * 0.5 + b + h))


class _LoopBlock(HybridBlock):
    """A child block with its own foreach (control flow inside a block the recursion calls)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.w = self.params.get("w", shape=(1, 3), init=mx.init.Constant(0.5))

    def hybrid_forward(self, F, h, w):
        _, (s,) = gluon_cf.foreach(lambda t, st: ([], [F.tanh(st[0] * w + t)]),
                                   F.stack(h, h * 2, axis=0), [F.zeros_like(h)])
        return s


@program(*BINARY)
class ChildBlockWithForeachCalledInRecursion(HybridBlock):
    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.loop = _LoopBlock()

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: self.loop(F.take(x, i)),
                                 lambda: self.loop(node(F.take(left, i)) -
                                                   node(F.take(right, i))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots, self.loop,
                             lambda h, a, b: self.loop(a - b))


@program([_rand(9, 3, seed=61), _f(1, 2, 3, 4, 5, 6, 7, 8, -1), _f(0, 5, 8)],
         [_rand(3, 3, seed=62), _f(1, 2, -1), _f(0)])
class ChainWithMixedDtypeIndexArithmetic(HybridBlock):
    """A unary chain whose index is float32 but whose next index goes through int32 and
    float64 casts; every node's value is scaled by its own index."""
    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, x, nxt, roots):
        @gluon_cf.recursive
        def node(i):
            j = F.cast(F.cast(F.take(nxt, i), "int32"), "float64")
            here = F.broadcast_mul(F.take(x, i), F.reshape(i + 1, (1, 1)))
            return gluon_cf.cond(j < 0, lambda: here,
                                 lambda: F.tanh(here) + node(F.cast(j, "float32")))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, nxt, roots):
        nx = _ids(nxt)

        def node(i):
            here = F.take(x, F.array([i])) * (i + 1)
            return here if nx[i] < 0 else F.tanh(here) + node(nx[i])
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


class InnerRecursionClosesOverOuterInvocation(HybridBlock):
    """A recursive function defined inside another's body, closing over the outer
    invocation's own value (here = x[i]): the inner recursion's environment differs per
    outer invocation. Runs eagerly; refused hybridized (pass the value as an argument)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            here = F.take(x, i)

            @gluon_cf.recursive
            def spine(j):
                return gluon_cf.cond(F.take(left, j) < 0, lambda: F.take(x, j) * here,
                                     lambda: F.take(x, j) + spine(F.take(left, j)) * 0.5)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: here,
                                 lambda: F.tanh(spine(F.take(right, i)) + node(F.take(left, i))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def spine(j, here):
            j = _row(j, n)
            h = F.take(x, F.array([j]))
            return h * here if lt[j] < 0 else h + spine(lt[j], here) * 0.5

        def node(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return here
            return F.tanh(spine(rt[i], here) + node(lt[i]))
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*BINARY)
class RecursionDefinedInForeachBodyClosingOverStep(HybridBlock):
    """The recursive function is defined inside the foreach body and closes over the step's
    data row (the root as a float) and the carried state."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        def body(r, states):
            weight = F.reshape(r, (1, 1)) * 0.1 + 1

            @gluon_cf.recursive
            def node(i):
                return gluon_cf.cond(
                    F.take(left, i) < 0,
                    lambda: F.broadcast_mul(F.take(x, i), weight) + states[0],
                    lambda: F.tanh(node(F.take(left, i)) - node(F.take(right, i))))
            h = node(r)
            return h, [states[0] * 0.5 + h * 0.1]
        hs, _ = gluon_cf.foreach(body, roots, [F.zeros_like(F.slice_axis(x, 0, 0, 1))])
        return F.reshape(hs, (-3, -2))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]
        memory, hs = F.zeros((1, 3)), []
        for r in _ids(roots):
            weight = r * 0.1 + 1

            def node(i):
                i = _row(i, n)
                if lt[i] < 0:
                    return F.take(x, F.array([i])) * weight + memory
                return F.tanh(node(lt[i]) - node(rt[i]))
            h = node(r)
            hs.append(h)
            memory = memory * 0.5 + h * 0.1
        return F.concat(*hs, dim=0)


@program(*[[f[0], f[1], f[2], f[3].astype(np.int32)] for f in BINARY])
class RootsInt32ChildrenFloat32(NonCommutativeDenseCombine):
    """The outermost calls pass int32 roots, the inner calls float32 children (take of a
    float32 left/right): one function, its argument of two dtypes."""


@program(*BINARY)
class SecondRecursionClosesOverFirstsResult(HybridBlock):
    """Two outermost calls: the second function closes over the first one's result."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def up(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: F.tanh(up(F.take(left, i)) + up(F.take(right, i))))
        summary = up(F.slice_axis(roots, 0, 0, 1))

        @gluon_cf.recursive
        def down(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) * summary,
                                 lambda: down(F.take(left, i)) - down(F.take(right, i)))
        return _rows_of(F, down, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def up(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            return here if lt[i] < 0 else F.tanh(up(lt[i]) + up(rt[i]))
        summary = up(_ids(roots)[0])

        def down(i):
            i = _row(i, n)
            here = F.take(x, F.array([i]))
            return here * summary if lt[i] < 0 else down(lt[i]) - down(rt[i])
        return F.concat(*[down(r) for r in _ids(roots)], dim=0)


class ContribForeachOverChildren(HybridBlock):
    """MXNet's own F.contrib.foreach over the two children, calling the function in its body
    (the base case in a gluon_cf.cond): runs eagerly; refused hybridized."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            def internal():
                kids = F.stack(F.take(left, i), F.take(right, i), axis=0)
                outs, _ = F.contrib.foreach(lambda k, s: (node(k), s), kids, [])
                return F.tanh(F.sum(outs, axis=0) + F.take(x, i))
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots, lambda h: h,
                             lambda h, a, b: F.tanh(a + b + h))


@program(*BINARY)
class ContribForeachOverRootsAroundRecursion(HybridBlock):
    """MXNet's own F.contrib.foreach over the roots around the outermost call (allowed)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: F.tanh(node(F.take(left, i)) + node(F.take(right, i)) +
                                                F.take(x, i)))
        hs, _ = F.contrib.foreach(lambda r, s: (node(r), s), roots, [])
        return F.reshape(hs, (-3, -2))

    def plain_forward(self, F, x, left, right, roots):
        return _plain_binary(F, x, left, right, roots, lambda h: h,
                             lambda h, a, b: F.tanh(a + b + h))


@program(*[f[:4] + [np.minimum(f[4] + 1, 4)] for f in (STEPS_MIXED, STEPS_CHAIN)])
class WhileLoopStepOutputsSummedInBody(HybridBlock):
    """Every node runs its own number of loop steps (1 to 4), collecting step outputs that
    it sums (eagerly as many rows as steps; hybridized padded to max_iterations with zeros).
    (A loop of no step returns [] eagerly, as MXNet 1.9.1: NOTE [loops of no step].)"""
    NO_GRAD = (1, 2, 3, 4)

    def hybrid_forward(self, F, x, left, right, roots, steps):
        @gluon_cf.recursive
        def node(i):
            outs, (_, h) = gluon_cf.while_loop(
                lambda k, h: k < F.take(steps, i),
                lambda k, h: (h * 2, [k + 1, F.tanh(h + 0.5)]),
                [F.zeros_like(i), F.take(x, i)], max_iterations=4)
            total = F.sum(outs, axis=0) + h
            return gluon_cf.cond(F.take(left, i) < 0, lambda: total,
                                 lambda: total * node(F.take(left, i)) - node(F.take(right, i)))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, steps):
        st, lt, rt, n = _ids(steps), _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            h, total = F.take(x, F.array([i])), F.zeros((1, 3))
            for _ in range(st[i]):
                total, h = total + h * 2, F.tanh(h + 0.5)
            total = total + h
            if lt[i] < 0:
                return total
            return total * node(lt[i]) - node(rt[i])
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)
