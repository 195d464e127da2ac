"""Issue 24, twenty-second round (b): ported code against MXNet's own ``F.contrib`` ops. Blocks
of kind (d) (``ContribBlock``) are written once, with ``C = self.cf(F)`` in place of
``F.contrib``: their oracle is the same code on MXNet's own ``mx.nd.contrib`` ops (eager
MXNet: the gradients through its Python loops), and, hybridized, MXNet's own ``mx.sym.contrib``
ops too (``MXNET_HYBRID``). Blocks of kinds (b) and (c) (dynamic shapes inside loop bodies and
recursion, recursion deciding its own tree) have ``plain_forward``: plain Python on NDArrays,
masks and indices read on the host."""
import mxnet as mx
import numpy as np
from mxnet.gluon import HybridBlock, nn

import gluon_cf

import hostile_harness
from hostile_programs4 import _ids, _row
from hostile_programs14 import _rows_of, _scalar
from hostile_programs17b import BAL, comb, forest

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats


class ContribBlock(HybridBlock):
    """``self.cf(F)`` is gluon_cf, or MXNet's ``F.contrib`` when ``use_mxnet`` (the oracle)."""

    use_mxnet = False

    def cf(self, F):
        return F.contrib if self.use_mxnet else gluon_cf

    def plain_forward(self, F, *args, **kwargs):
        self.use_mxnet = True
        try:
            return type(self).hybrid_forward(self, F, *args, **kwargs)
        finally:
            del self.use_mxnet


# sequences (T, B, d) with states (B, d): several lengths, a batch of one, one step
SEQ = ([rand(4, 2, 3, seed=1), rand(2, 3, seed=2), rand(2, 3, seed=3)],
       [rand(1, 2, 3, seed=4), rand(2, 3, seed=5), rand(2, 3, seed=6)],
       [rand(6, 1, 3, seed=7), rand(1, 3, seed=8), rand(1, 3, seed=9)])


# ---- (d) F.contrib semantics, against MXNet's own ops -----------------------------------------

@program(*SEQ)
class ForeachTwoStatesLSTMish(ContribBlock):
    """foreach with two states and one output, as a hand-written LSTM-like cell."""

    def hybrid_forward(self, F, x, h0, c0):
        def body(xt, s):
            h, c = s
            c2 = c * 0.5 + F.tanh(xt + h)
            h2 = F.sigmoid(c2) * h + xt
            return h2 + c2, [h2, c2]
        outs, (h, c) = self.cf(F).foreach(body, x, [h0, c0])
        return outs, h, c


@program(*SEQ)
class ForeachNestedStateList(ContribBlock):
    """States as a nested list ``[h, [c, d]]`` and outputs as a list of two."""

    def hybrid_forward(self, F, x, h0, c0):
        def body(xt, s):
            h, (c, d) = s
            h2 = F.tanh(h + xt * c)
            return [h2, d * 2], [h2, [c + 0.1, d + h2]]
        (o1, o2), (h, (c, d)) = self.cf(F).foreach(body, x, [h0, [c0, h0 * c0]])
        return o1, o2, h, c, d


@program(*SEQ)
class ForeachTwoDataArrays(ContribBlock):
    """Data as a list of two arrays, the second a different function of the first."""

    def hybrid_forward(self, F, x, h0, c0):
        def body(ts, s):
            a, b = ts
            new = s[0] * F.sigmoid(b) + a
            return [new, a * b], [new]
        (o1, o2), (h,) = self.cf(F).foreach(body, [x, F.sin(x) * 2], [h0 + c0])
        return o1, o2, h


@program(*SEQ)
class ForeachOutputIsTheNewState(ContribBlock):
    """The step output is the very array returned as the new state."""

    def hybrid_forward(self, F, x, h0, c0):
        def body(xt, s):
            h = F.tanh(s[0] * c0 + xt)
            return h, [h]
        outs, (h,) = self.cf(F).foreach(body, x, [h0])
        return outs, h


@program(*SEQ)
class ForeachPassesDataThrough(ContribBlock):
    """The step output is the step's data itself; the state sums it."""

    def hybrid_forward(self, F, x, h0, c0):
        def body(xt, s):
            return xt, [s[0] + xt * c0]
        outs, (h,) = self.cf(F).foreach(body, x, [h0])
        return outs * 1.5, h


@program(*SEQ)
class ForeachWithDenseAndClosure(ContribBlock):
    """A Dense in the body and an outer value read by closure."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(3, in_units=3, flatten=False)

    def hybrid_forward(self, F, x, h0, c0):
        scale = F.sigmoid(c0)

        def body(xt, s):
            h = F.tanh(self.d(xt + s[0])) * scale
            return h * 2, [h]
        outs, (h,) = self.cf(F).foreach(body, x, [h0])
        return outs, h


@program([rand(3, 2, 6, seed=11)], [rand(1, 4, 6, seed=12)], [rand(5, 1, 6, seed=13)])
class ForeachReshapeCodesInBody(ContribBlock):
    """Reshape by 0, -4, -3, -2 and -1 inside the body."""

    def hybrid_forward(self, F, x):
        def body(xt, s):
            a = F.reshape(xt, (0, -4, 2, 3))            # (B, 2, 3)
            b = F.reshape(a, (-3, 0))                   # (2B, 3)
            c = F.reshape(F.sum(b, axis=0), (-1,))      # (3,)
            d = F.reshape(a, (0, -2))                   # (B, 2, 3)
            return F.sum(d, axis=1), [s[0] + c]
        outs, (s,) = self.cf(F).foreach(body, x, [F.zeros((3,))])
        return outs, s


# loop variables (i, s) and a bound n; max_iterations 3: hit exactly, stopped early, no step
WHILE = ([rand(2, 3, seed=21), floats(3)], [rand(2, 3, seed=22), floats(1)],
         [rand(1, 3, seed=23), floats(0)])
WHILE_NO_GRAD = (1,)


@program(*WHILE[:1])
class WhileHitsMaxIterationsExactly(ContribBlock):
    """cond turns false exactly when max_iterations is reached: outputs have every row."""

    NO_GRAD = WHILE_NO_GRAD

    def hybrid_forward(self, F, x, n):
        def func(i, s):
            return [F.broadcast_mul(s, i), F.sin(s)], [i + 1, F.tanh(s + x)]
        outs, (i, s) = self.cf(F).while_loop(lambda i, s: i < n, func,
                                             [F.zeros((1,)), x], max_iterations=3)
        return outs[0], outs[1], i, s


@program(*WHILE)
class WhileLoopVarsOnlyAnyStepCount(ContribBlock):
    """Only the final loop variables are read: 3, 1 and 0 steps."""

    NO_GRAD = WHILE_NO_GRAD

    def hybrid_forward(self, F, x, n):
        def func(i, s, w):
            return [s], [i + 1, s * w + 1, w]
        _, (i, s, w) = self.cf(F).while_loop(lambda i, s, w: i < n, func,
                                             [F.zeros((1,)), x, F.cos(x)], max_iterations=3)
        return i, s, w


@program(*WHILE[:1])
class WhileNestedListOutputs(ContribBlock):
    """func returns outputs as a nested list, loop variables as a list."""

    NO_GRAD = WHILE_NO_GRAD

    def hybrid_forward(self, F, x, n):
        def func(i, s):
            return [s, [s * 2, i * 2]], [i + 1, s * 0.5 + x]
        (a, (b, c)), (i, s) = self.cf(F).while_loop(lambda i, s: i < n, func,
                                                    [F.zeros((1,)), x], max_iterations=3)
        return a, b, c, s


@program(*WHILE)
class WhileSingleLoopVarNotAList(ContribBlock):
    """loop_vars a single array (not a list): the result is one array, as MXNet's."""

    NO_GRAD = WHILE_NO_GRAD

    def hybrid_forward(self, F, x, n):
        _, v = self.cf(F).while_loop(lambda v: F.sum(v) < F.sum(n) * 2 + 0.5,
                                     lambda v: ([], [v + F.abs(x) + 0.2]),
                                     x, max_iterations=4)
        return v


@program([rand(3, 4, seed=31)], [rand(2, 4, seed=32, low=-2, high=-1)],
         [rand(1, 4, seed=33, low=1, high=2)])
class CondNestedListOutputs(ContribBlock):
    """cond whose branches return ``[[a, b], c]``."""

    def hybrid_forward(self, F, x):
        (a, b), c = self.cf(F).cond(F.sum(x) > 0,
                                    lambda: [[x * 2, x + 1], F.sum(x, keepdims=True)],
                                    lambda: [[x * 3, x - 1], F.mean(x, keepdims=True)])
        return a, b, c


@program([rand(3, 4, seed=34)], [rand(2, 4, seed=35, low=-2, high=-1)])
class CondBothBranchesReturnInputs(ContribBlock):
    """Branches returning inputs unchanged (the same one, or another)."""

    def hybrid_forward(self, F, x):
        y = x * 2
        a = self.cf(F).cond(F.sum(x) > 0, lambda: x, lambda: y)
        b = self.cf(F).cond(F.sum(x) < 0, lambda: x, lambda: x)
        return a, b


@program([rand(3, 4, seed=36)], [rand(2, 4, seed=37, low=-2, high=-1)])
class CondPredFromDense(ContribBlock):
    """The predicate is a Dense's output; branches use the Dense too."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, x):
        h = self.d(x)
        return self.cf(F).cond(F.sum(h) > 0, lambda: F.tanh(self.d(h)), lambda: h * h)


@program(*SEQ)
class CondInsideForeachBody(ContribBlock):
    """A cond per step, decided by the step's data."""

    def hybrid_forward(self, F, x, h0, c0):
        C = self.cf(F)

        def body(xt, s):
            h = C.cond(F.sum(xt) > 0, lambda: s[0] + xt, lambda: s[0] * 0.5 - c0)
            return F.tanh(h), [h]
        outs, (h,) = C.foreach(body, x, [h0])
        return outs, h


@program(*SEQ)
class ForeachInsideCondBranch(ContribBlock):
    """A foreach in one branch of a cond, a plain value in the other."""

    def hybrid_forward(self, F, x, h0, c0):
        C = self.cf(F)

        def run():
            outs, (h,) = C.foreach(lambda xt, s: (xt * s[0], [s[0] + xt]), x, [h0])
            return [F.sum(outs, axis=0), h]
        return C.cond(F.sum(c0) > 0, run, lambda: [F.sum(x, axis=0), h0 * 2])


@program(*SEQ)
class WhileInsideForeachBody(ContribBlock):
    """Each step halves its state in a while_loop until its abs sum is below 1."""

    def hybrid_forward(self, F, x, h0, c0):
        C = self.cf(F)

        def body(xt, s):
            _, (h,) = C.while_loop(lambda h: F.sum(F.abs(h)) > 1,
                                   lambda h: ([], [h * 0.5]), [s[0] + xt], max_iterations=4)
            return h, [h]
        outs, (h,) = C.foreach(body, x, [h0 * 3])
        return outs, h


@program([rand(3, 2, 3, seed=41).astype(np.float64), rand(2, 3, seed=42).astype(np.float64)],
         [rand(1, 2, 3, seed=43).astype(np.float64), rand(2, 3, seed=44).astype(np.float64)])
class ForeachFloat64(ContribBlock):
    """float64 data and states, a float64 constant made in the body."""

    def hybrid_forward(self, F, x, h0):
        def body(xt, s):
            h = s[0] * F.ones_like(xt) * 0.5 + F.square(xt)
            return h.astype("float32"), [h]
        outs, (h,) = self.cf(F).foreach(body, x, [h0])
        return outs, h


@program([rand(4, 3, seed=45), rand(3, seed=46)], [rand(1, 3, seed=47), rand(3, seed=48)])
class ForeachOverWhileOutputs(ContribBlock):
    """A foreach over the (exactly filled) outputs of a while_loop."""

    def hybrid_forward(self, F, x, v):
        C = self.cf(F)
        outs, _ = C.while_loop(lambda i, s: i < 3,
                               lambda i, s: ([F.broadcast_mul(s, i)], [i + 1, s + v]),
                               [F.zeros((1,)), F.sum(x, axis=0)], max_iterations=3)
        ys, (acc,) = C.foreach(lambda r, s: (r - s[0], [s[0] + r]), outs[0], [v])
        return ys, acc


# ---- (b) dynamic shapes inside loops -------------------------------------------------------------

# steps of rows (T, n, d) and per-step masks (T, n): some steps keep no row
STEP_MASKS = ([rand(3, 4, 2, seed=51), np.array([[1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 1, 1]],
                                               np.float32)],
              [rand(2, 3, 2, seed=52), np.zeros((2, 3), np.float32)],
              [rand(1, 2, 2, seed=53), np.ones((1, 2), np.float32)])
MASK_NO_GRAD = (1,)


def _sum_kept(F, rows, mask):
    """The sum of the rows ``mask`` keeps, as plain MXNet can differentiate (no zero rows)."""
    return F.sum(rows * F.expand_dims(mask, 1), axis=0)


@program(*STEP_MASKS)
class ForeachMaskCountsAndSums(HybridBlock):
    """Each step keeps some rows of its data: the state sums them, the output counts them."""

    NO_GRAD = MASK_NO_GRAD

    def hybrid_forward(self, F, x, m):
        def body(ts, s):
            xt, mt = ts
            kept = F.contrib.boolean_mask(xt, mt)
            return F.sum(mt, keepdims=True), [s[0] * 0.5 + F.sum(kept, axis=0)]
        outs, (s,) = gluon_cf.foreach(body, [x, m], [F.zeros((2,))])
        return outs, s

    def plain_forward(self, F, x, m):
        s, outs = F.zeros((2,)), []
        for t in range(x.shape[0]):
            outs.append(F.sum(m[t]).reshape((1,)))
            s = s * 0.5 + _sum_kept(F, x[t], m[t])
        return F.stack(*outs), s


@program(STEP_MASKS[2], [rand(2, 3, 2, seed=54), floats(1, 0, 1, 0, 1, 1).reshape(2, 3)])
class ForeachIndexArrayOfKeptRows(HybridBlock):
    """index_array of the kept rows weights them by their position among the kept."""

    NO_GRAD = MASK_NO_GRAD

    def hybrid_forward(self, F, x, m):
        def body(ts, s):
            xt, mt = ts
            kept = F.contrib.boolean_mask(xt, mt)
            pos = F.contrib.index_array(kept, axes=(0,)).astype("float32")   # (k, 2, 1)
            w = F.reshape(pos, (0, -1)) + 1                               # (k, 2)
            return [], [s[0] + F.sum(kept * w, axis=0)]
        _, (s,) = gluon_cf.foreach(body, [x, m], [F.zeros((2,))])
        return s

    def plain_forward(self, F, x, m):
        s = F.zeros((2,))
        for t in range(x.shape[0]):
            mask = m[t].asnumpy()
            w = np.cumsum(mask) * mask
            s = s + F.sum(x[t] * F.array(w).expand_dims(1), axis=0)
        return s


# rows and a count n (0 .. all) of leading rows to take
LEADING = ([rand(5, 3, seed=61), floats(3)], [rand(4, 3, seed=62), floats(0)],
           [rand(2, 3, seed=63), floats(2)], [rand(3, 3, seed=64), floats(1)])


@program(*LEADING)
class TakeLeadingRowsThenForeach(HybridBlock):
    """Slice the first n rows (n computed at run time, arange_like < n) and foreach over them
    with a state only (no step outputs): zero rows runs no step."""

    NO_GRAD = MASK_NO_GRAD

    def hybrid_forward(self, F, x, n):
        keep = F.broadcast_lesser(F.contrib.arange_like(x, axis=0), n)
        rows = F.contrib.boolean_mask(x, keep)
        _, (s,) = gluon_cf.foreach(lambda r, s: ([], [F.tanh(s[0] + r)]), rows,
                                   [F.zeros((3,))])
        return s

    def plain_forward(self, F, x, n):
        s = F.zeros((3,))
        for k in range(int(n.asscalar())):
            s = F.tanh(s + x[k])
        return s


@program(LEADING[0], *LEADING[2:])
class WhileOverComputedLength(HybridBlock):
    """A while_loop over the first n rows (n read from data), max_iterations the row count
    bound, reading row i with take; outputs of exact length."""

    NO_GRAD = MASK_NO_GRAD

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, n):
        def func(i, h):
            h2 = F.tanh(self.d(F.take(x, i)) + h)
            return [h2], [i + 1, h2]
        outs, (_, h) = gluon_cf.while_loop(lambda i, h: i < n, func,
                                           [F.zeros((1,)), F.zeros((1, 3))],
                                           max_iterations=5, exact_length=True)
        return F.sum(outs[0], axis=0), h

    def plain_forward(self, F, x, n):
        h, total = F.zeros((1, 3)), F.zeros((1, 3))
        for k in range(int(n.asscalar())):
            h = F.tanh(self.d(x[k:k + 1]) + h)
            total = total + h
        return total, h


@program([rand(2, 6, seed=71), floats(3)], [rand(1, 6, seed=72), floats(0)],
         [rand(3, 6, seed=73), floats(1)])
class ReshapeMinus4InWhileBody(HybridBlock):
    """A while body permutes its loop variable by reshape -4, transpose and reshape -3."""

    NO_GRAD = MASK_NO_GRAD

    def hybrid_forward(self, F, x, n):
        def func(i, v):
            w = F.transpose(F.reshape(v, (0, -4, 2, 3)), (0, 2, 1))
            return [], [i + 1, F.reshape(w, (0, -3)) * 0.9 + 0.1]
        _, (_, v) = gluon_cf.while_loop(lambda i, v: i < n, func, [F.zeros((1,)), x],
                                        max_iterations=4)
        return v

    def plain_forward(self, F, x, n):
        v = x
        for _ in range(int(n.asscalar())):
            v = v.reshape((0, 2, 3)).transpose((0, 2, 1)).reshape((0, 6)) * 0.9 + 0.1
        return v


@program([rand(4, 3, seed=81)], [rand(1, 3, seed=82)], [rand(6, 3, seed=83, low=0.5)])
class MaskFromLoopCounterInWhile(HybridBlock):
    """Each step keeps the rows whose first column exceeds a threshold from the counter (as
    the loop goes on, fewer: none)."""

    def hybrid_forward(self, F, x):
        col = F.slice_axis(x, axis=1, begin=0, end=1).reshape((-1,))

        def func(i, s):
            kept = F.contrib.boolean_mask(x, F.broadcast_greater(col, i * 0.5 - 0.5))
            return [], [i + 1, s + F.sum(kept, axis=0)]
        _, (_, s) = gluon_cf.while_loop(lambda i, s: i < 4, func,
                                        [F.zeros((1,)), F.zeros((3,))], max_iterations=4)
        return s

    def plain_forward(self, F, x):
        s = F.zeros((3,))
        col = x[:, 0]
        for i in range(4):
            s = s + _sum_kept(F, x, col > (i * 0.5 - 0.5))
        return s


@program([rand(3, 2, 3, seed=91), rand(2, 3, seed=92)], [rand(1, 4, 3, seed=93),
                                                          rand(4, 3, seed=94)])
class NestedForeachClosuresAndParams(HybridBlock):
    """An inner foreach over each step's rows reads the outer step's state and a Dense."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, h0):
        def outer(xt, s):
            h = s[0]

            def inner(r, t):
                u = F.tanh(self.d(F.expand_dims(r, 0)) + F.sum(h, axis=0, keepdims=True) + t[0])
                return u, [u]
            us, (last,) = gluon_cf.foreach(inner, xt, [F.zeros((1, 3))])
            new = h * 0.5 + F.reshape(us, (-3, 0))
            return last, [new]
        outs, (h,) = gluon_cf.foreach(outer, x, [h0])
        return outs, h

    def plain_forward(self, F, x, h0):
        h, outs = h0, []
        for t in range(x.shape[0]):
            u, us = F.zeros((1, 3)), []
            for k in range(x.shape[1]):
                u = F.tanh(self.d(x[t][k:k + 1]) + F.sum(h, axis=0, keepdims=True) + u)
                us.append(u)
            outs.append(u)
            h = h * 0.5 + F.concat(*us, dim=0)
        return F.stack(*outs), h


@program(*SEQ)
class ForeachCondWhileNested(HybridBlock):
    """foreach -> cond -> while_loop, the loop's bound from the outer step's data."""

    def hybrid_forward(self, F, x, h0, c0):
        def body(xt, s):
            bound = F.sum(F.abs(xt))

            def grow():
                _, (v,) = gluon_cf.while_loop(lambda v: F.sum(F.abs(v)) < bound,
                                              lambda v: ([], [v * 1.5 + 0.1]), [s[0]],
                                              max_iterations=3)
                return v
            h = gluon_cf.cond(F.sum(xt) > 0, grow, lambda: s[0] - xt)
            return h, [h + c0 * 0.1]
        outs, (h,) = gluon_cf.foreach(body, x, [h0])
        return outs, h

    def plain_forward(self, F, x, h0, c0):
        h, outs = h0, []
        for t in range(x.shape[0]):
            xt = x[t]
            if _scalar(F.sum(xt)) > 0:
                v, k = h, 0
                while k < 3 and _scalar(F.sum(F.abs(v))) < _scalar(F.sum(F.abs(xt))):
                    v, k = v * 1.5 + 0.1, k + 1
            else:
                v = h - xt
            outs.append(v)
            h = v + c0 * 0.1
        return F.stack(*outs), h


# ---- (c) recursion ----------------------------------------------------------------------------

FORESTS = (forest([BAL, None, comb(5)], seed=101), forest([None], seed=102),
           forest([(BAL, BAL), (None, None)], seed=103))


@program(*FORESTS)
class DepthPassedDownAsArgument(HybridBlock):
    """Per-invocation state: the depth travels down as an argument and weights the leaves."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i, depth):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.broadcast_mul(F.take(x, i), depth),
                lambda: node(F.take(left, i), depth + 1) - node(F.take(right, i), depth * 2))
        return _rows_of(F, lambda r: node(r, F.ones((1,))), roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i, depth):
            i = _row(i, n)
            if lt[i] < 0:
                return x[i:i + 1] * depth
            return node(lt[i], depth + 1) - node(rt[i], depth * 2)
        return F.concat(*[node(r, 1.0) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class MutualEvenOddLevels(HybridBlock):
    """Two functions calling each other by level, each with its own Dense; leaves differ."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.even = nn.Dense(3, in_units=6)
            self.odd = nn.Dense(3, in_units=6)

    def hybrid_forward(self, F, x, left, right, roots):
        def make(cell, scale, other):
            def body(i):
                return gluon_cf.cond(
                    F.take(left, i) < 0, lambda: F.take(x, i) * scale,
                    lambda: F.tanh(cell(F.concat(other[0](F.take(left, i)),
                                                 other[0](F.take(right, i)), dim=1))))
            return body
        odd_ref, even_ref = [], []
        even = gluon_cf.recursive(make(self.even, 1.0, odd_ref), name="even")
        odd = gluon_cf.recursive(make(self.odd, -2.0, even_ref), name="odd")
        odd_ref.append(odd)
        even_ref.append(even)
        return _rows_of(F, even, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i, level):
            i = _row(i, n)
            if lt[i] < 0:
                return x[i:i + 1] * (1.0 if level % 2 == 0 else -2.0)
            cell = self.even if level % 2 == 0 else self.odd
            return F.tanh(cell(F.concat(node(lt[i], level + 1), node(rt[i], level + 1), dim=1)))
        return F.concat(*[node(r, 0) for r in _ids(roots)], dim=0)


@program([rand(2, 3, seed=111)], [rand(1, 3, seed=112, low=2, high=3)],
         [rand(3, 3, seed=113, low=-3, high=-2)])
class ModelDecidesTheTree(HybridBlock):
    """A top-down decoder: a Dense's score decides whether a node splits (depth bounded by an
    argument); two child cells; the result sums the leaves."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.score = nn.Dense(1, in_units=3)
            self.lc = nn.Dense(3, in_units=3)
            self.rc = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x):
        @gluon_cf.recursive(max_depth=8)
        def grow(h, depth):
            split = (F.sum(self.score(h)) > 0) * (F.sum(depth) < 3)
            return gluon_cf.cond(split,
                                 lambda: grow(F.tanh(self.lc(h)), depth + 1) +
                                 grow(F.tanh(self.rc(h)) * 0.5, depth + 1),
                                 lambda: h)
        return _rows_of(F, lambda r: grow(F.expand_dims(r, 0), F.zeros((1,))), x)

    def plain_forward(self, F, x):
        def grow(h, depth):
            if _scalar(F.sum(self.score(h))) > 0 and depth < 3:
                return grow(F.tanh(self.lc(h)), depth + 1) + \
                    grow(F.tanh(self.rc(h)) * 0.5, depth + 1)
            return h
        return F.concat(*[grow(x[k:k + 1], 0) for k in range(x.shape[0])], dim=0)


@program(*FORESTS)
class RecursionReturnsSumAndCount(HybridBlock):
    """A function returning a pair (sum of leaves, count of leaves); the root's mean."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            def inner():
                ls, lc = node(F.take(left, i))
                rs, rc = node(F.take(right, i))
                return [ls + rs, lc + rc]
            return gluon_cf.cond(F.take(left, i) < 0, lambda: [F.take(x, i), F.ones((1, 1))],
                                 inner)

        def mean(r):
            s, c = node(r)
            return F.broadcast_div(s, c)
        return _rows_of(F, mean, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            if lt[i] < 0:
                return x[i:i + 1], 1.0
            (ls, lc), (rs, rc) = node(lt[i]), node(rt[i])
            return ls + rs, lc + rc
        return F.concat(*[s / c for s, c in (node(r) for r in _ids(roots))], dim=0)


@program(*FORESTS)
class LeafRunsForeachOverItsFeatures(HybridBlock):
    """Each leaf runs a foreach over its own features (a running product state)."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            def leaf():
                feats = F.reshape(F.take(x, i), (-1, 1))          # (3, 1)
                outs, (p,) = gluon_cf.foreach(lambda f, s: (f * s[0], [s[0] * 0.5 + f]),
                                              feats, [F.ones((1,))])
                return F.broadcast_add(F.reshape(outs, (1, -1)), p)
            return gluon_cf.cond(F.take(left, i) < 0, leaf,
                                 lambda: node(F.take(left, i)) * node(F.take(right, i)))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            if lt[i] < 0:
                p, outs = F.ones((1,)), []
                for k in range(x.shape[1]):
                    f = x[i, k:k + 1]
                    outs.append(f * p)
                    p = p * 0.5 + f
                return F.concat(*outs, dim=0).reshape((1, -1)) + p
            return node(lt[i]) * node(rt[i])
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


# a DAG: node 0 = (1, 2), node 1 = (2, 2), node 2 a leaf; roots read it twice and node 1 alone
DAG = [rand(3, 3, seed=121), floats(1, 2, -1), floats(2, 2, -1), floats(0, 1, 0, 2)]


@program(DAG, FORESTS[0])
class SharedSubtrees(HybridBlock):
    """Children shared between parents (a DAG) and repeated roots: every path is its own
    call."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: self.d(F.take(x, i)),
                                 lambda: F.tanh(node(F.take(left, i)) + 2 * node(F.take(right, i))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            if lt[i] < 0:
                return self.d(x[i:i + 1])
            return F.tanh(node(lt[i]) + 2 * node(rt[i]))
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*FORESTS)
class BranchesChooseWhichChildToVisit(HybridBlock):
    """An inner cond decided by values picks which child the recursion visits."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            here = F.take(x, i)
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: here,
                lambda: gluon_cf.cond(F.sum(here) > 0, lambda: node(F.take(left, i)) * 2 + here,
                                      lambda: node(F.take(right, i)) - here))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            here = x[i:i + 1]
            if lt[i] < 0:
                return here
            if _scalar(F.sum(here)) > 0:
                return node(lt[i]) * 2 + here
            return node(rt[i]) - here
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program([rand(4, 3, seed=131), floats(1, 0, 1, 1)], [rand(3, 3, seed=132), floats(0, 0, 0)],
         [rand(2, 3, seed=133), floats(1, 1)])
class RecursionOverMaskedRowsCount(HybridBlock):
    """A recursion consuming the kept rows one by one: f(k) = row k + f(k + 1) until k
    reaches the kept count (no call past the base case when none is kept)."""

    NO_GRAD = MASK_NO_GRAD

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m, keepdims=True)

        @gluon_cf.recursive(max_depth=16)
        def rest(k):
            return gluon_cf.cond(k >= count, lambda: F.zeros((1, 3)),
                                 lambda: F.take(kept, k) * 0.5 + F.tanh(rest(k + 1)))
        return rest(F.zeros((1,)))

    def plain_forward(self, F, x, m):
        rows = [x[k:k + 1] for k, keep in enumerate(_ids(m)) if keep]

        def rest(k):
            if k >= len(rows):
                return F.zeros((1, 3))
            return rows[k] * 0.5 + F.tanh(rest(k + 1))
        return rest(0)


@program([rand(3, 3, seed=141), floats(2)], [rand(2, 3, seed=142), floats(0)],
         [rand(1, 3, seed=143), floats(4)])
class RecursionCallsWhileWithArgumentBound(HybridBlock):
    """Each call runs a while_loop of as many steps as its argument says, then recurses with
    one less (per-invocation loop counters)."""

    NO_GRAD = MASK_NO_GRAD

    def hybrid_forward(self, F, x, n):
        @gluon_cf.recursive(max_depth=8)
        def down(v, k):
            def step():
                _, (_, w) = gluon_cf.while_loop(lambda j, w: j < k,
                                                lambda j, w: ([], [j + 1, F.sin(w) + 0.1]),
                                                [F.zeros((1,)), v], max_iterations=4)
                return down(w, k - 1) + v
            return gluon_cf.cond(k <= 0, lambda: v * 2, step)
        return down(x, n)

    def plain_forward(self, F, x, n):
        def down(v, k):
            if k <= 0:
                return v * 2
            w = v
            for _ in range(min(k, 4)):
                w = F.sin(w) + 0.1
            return down(w, k - 1) + v
        return down(x, int(n.asscalar()))


# ---- more of (d) and (b) ------------------------------------------------------------------------

@program(*WHILE)
class WhilePaddedOutputsAreZeros(HybridBlock):
    """A loop stopping before max_iterations: the rows after its last step are zeros (MXNet's
    are uninitialised: the README's rule), 3, 1 and 0 steps of 4."""

    NO_GRAD = WHILE_NO_GRAD

    def hybrid_forward(self, F, x, n):
        outs, (_, s) = gluon_cf.while_loop(
            lambda i, s: i < n, lambda i, s: ([F.tanh(s), F.sum(s, keepdims=True)],
                                              [i + 1, s * 2 + x]),
            [F.zeros((1,)), x], max_iterations=4)
        return outs[0], outs[1], s

    def plain_forward(self, F, x, n):
        s, rows, sums = x, [], []
        for _ in range(int(n.asscalar())):
            rows.append(F.tanh(s))
            sums.append(F.sum(s, keepdims=True))
            s = s * 2 + x
        pad = 4 - len(rows)
        rows += [F.zeros_like(x)] * pad
        sums += [F.zeros((1, 1))] * pad
        return F.stack(*rows), F.stack(*sums), s


@program([rand(5, 3, seed=151), floats(0, 4, 2).astype(np.int32)],
         [rand(2, 3, seed=152), floats(1).astype(np.int32)])
class ForeachIntIndicesTakeRows(ContribBlock):
    """int32 indices as data: each step takes a row of x and counts in an int32 state."""

    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, idx):
        def body(i, s):
            h, k = s
            row = F.reshape(F.take(x, i), (-1,))
            return row * 2, [F.tanh(h + row), k + 1]
        outs, (h, k) = self.cf(F).foreach(body, idx, [F.zeros((3,)),
                                                      F.zeros((1,), dtype="int32")])
        return outs, h, k


@program(*WHILE)
class CondInWhileBodyWithDense(ContribBlock):
    """A cond in a while body picks a Dense or a decay by the loop variable's sum."""

    NO_GRAD = WHILE_NO_GRAD

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, n):
        C = self.cf(F)

        def func(i, s):
            s2 = C.cond(F.sum(s) > 0, lambda: F.tanh(self.d(s)), lambda: s * 0.5 - 0.1)
            return [], [i + 1, s2]
        _, (_, s) = C.while_loop(lambda i, s: i < n, func, [F.zeros((1,)), x],
                                 max_iterations=3)
        return s


@program(*WHILE)
class WhileMaxIterationsOne(ContribBlock):
    """max_iterations=1: one step at most, its output row exactly filled when it runs."""

    NO_GRAD = WHILE_NO_GRAD

    def hybrid_forward(self, F, x, n):
        _, (i, s) = self.cf(F).while_loop(lambda i, s: i < n,
                                          lambda i, s: ([], [i + 1, F.exp(s) - 1]),
                                          [F.zeros((1,)), x], max_iterations=1)
        return i, s


@program(*SEQ)
class ForeachStatesOnlyEmptyOutputs(ContribBlock):
    """A body returning no step outputs (``[]``) and two states, over data of 6, 1 steps."""

    def hybrid_forward(self, F, x, h0, c0):
        outs, (h, c) = self.cf(F).foreach(lambda xt, s: ([], [s[0] + xt * s[1], s[1] * 0.9]),
                                          x, [h0, c0])
        return h, c


@program(*FORESTS)
class RecursionFrozenDenseTrainedDense(HybridBlock):
    """Two Denses in the recursion, one frozen (grad_req 'null'): the other and the inputs
    still get their gradients."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.frozen = nn.Dense(3, in_units=3)
            self.trained = nn.Dense(3, in_units=6)
        self.frozen.collect_params().setattr("grad_req", "null")

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.tanh(self.frozen(F.take(x, i))),
                                 lambda: self.trained(F.concat(node(F.take(left, i)),
                                                               node(F.take(right, i)), dim=1)))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            if lt[i] < 0:
                return F.tanh(self.frozen(x[i:i + 1]))
            return self.trained(F.concat(node(lt[i]), node(rt[i]), dim=1))
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(forest([BAL, None, comb(4), (BAL, (None, BAL))], seed=161), forest([None], seed=162))
class MutualRecursionOfTwoArities(HybridBlock):
    """f(i, [h, c]) returns [h, c] and g(i, scale) one array: f calls g on its left child and
    itself on its right with a new state list; g calls itself and f."""

    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def f(i, st):
            h, c = st

            def inner():
                gl = g(F.take(left, i), h + 1)
                nh, nc = f(F.take(right, i), [gl, c * 0.5])
                return [nh + gl, nc]
            return gluon_cf.cond(F.take(left, i) < 0, lambda: [F.take(x, i) * h, c + 1], inner)

        @gluon_cf.recursive
        def g(i, scale):
            return gluon_cf.cond(F.take(left, i) < 0,
                                 lambda: F.tanh(self.d(F.take(x, i))) * scale,
                                 lambda: g(F.take(left, i), scale * 0.5) -
                                 f(F.take(right, i), [scale, scale])[0])

        def root(r):
            h, c = f(r, [F.ones((1, 3)), F.zeros((1, 3))])
            return h + c
        return _rows_of(F, root, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def f(i, h, c):
            i = _row(i, n)
            if lt[i] < 0:
                return x[i:i + 1] * h, c + 1
            gl = g(lt[i], h + 1)
            nh, nc = f(rt[i], gl, c * 0.5)
            return nh + gl, nc

        def g(i, scale):
            i = _row(i, n)
            if lt[i] < 0:
                return F.tanh(self.d(x[i:i + 1])) * scale
            return g(lt[i], scale * 0.5) - f(rt[i], scale, scale)[0]
        outs = [sum(f(r, F.ones((1, 3)), F.zeros((1, 3)))) for r in _ids(roots)]
        return F.concat(*outs, dim=0)
