"""Issue 24 items 2, 4-6, session 26 (hostile round 26x): models written as users port real
code, attacking session 25's export probes (dims agreeing by chance at the probe sizes: sizes
clipped to a constant, pools and strided slices, reshape codes), index_copy (ScatterND:
duplicates, negative and out-of-range rows, in loop bodies), dtype corners (float16,
float64, int64 counts, int32 indices), nested cond/foreach/while_loop and values of run-time
length (boolean_mask, exact-length loops), exported through ``export_onnx`` and
``save_artifact``; and call histories (``tests/test_hostile_export26.py`` runs them).

The oracle is plain MXNet eager (``hostile_harness.classify``) and, for export, the
hybridized block (``export_harness.export_outcomes``)."""
import numpy as np
from mxnet.gluon import HybridBlock, nn, rnn

import gluon_cf

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats
H = 3


def ints(*values, dtype=np.int32):
    return np.array(values, dtype)


def mask(*values):
    return np.array(values, np.float32)


# ---- dims agreeing by chance ------------------------------------------------------------------

@program([rand(1, 2, 10)], [rand(1, 2, 12, seed=1)], [rand(1, 2, 5, seed=2)],
         [rand(1, 2, 3, seed=3)], [rand(1, 2, 8, seed=4)])
class TruncateToEightThenConv(HybridBlock):
    """A sequence truncated to its first 8 steps (a max length), then a width-3 convolution:
    8 steps out for every length over 8 (the example's 10 and the plan's 13, 1031), 3 fails
    the convolution, fewer steps out for shorter sequences."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.conv = nn.Conv1D(2, 3, in_channels=2)

    def hybrid_forward(self, F, x):
        x = F.slice_axis(x, axis=2, begin=0, end=None)
        x = F.slice(x, begin=(None, None, 0), end=(None, None, 8))
        return self.conv(x)


@program([rand(1, 2, 10)], [rand(1, 2, 12, seed=1)], [rand(1, 2, 5, seed=2)],
         [rand(1, 2, 3, seed=3)])
class TruncateConvThenSortAll(HybridBlock):
    """Truncated to 8 steps, a width-3 convolution, then topk of every step (k=0) sorting each
    channel's outputs."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.conv = nn.Conv1D(2, 3, in_channels=2)

    def hybrid_forward(self, F, x):
        x = F.slice(x, begin=(None, None, 0), end=(None, None, 8))
        y = self.conv(x)
        return F.topk(y, axis=2, k=0, ret_typ="value"), F.topk(y, axis=2, k=0)


@program([rand(10, H), rand(2, H, seed=5)], [rand(12, H, seed=1), rand(3, H, seed=6)],
         [rand(5, H, seed=2), rand(1, H, seed=7)], [rand(3, H, seed=3), rand(2, H, seed=8)])
class TruncatedMemoryPooledInForeach(HybridBlock):
    """A decoder step attending over memory truncated to 8 rows, max-pooled over windows of 3
    rows: the step's pooled scores have 6 columns for every memory over 8 rows."""

    def hybrid_forward(self, F, mem, targets):
        mem = F.slice(mem, begin=(0, None), end=(8, None))

        def body(y, states):
            scores = F.dot(states[0], mem, transpose_b=True)       # (1, m)
            pooled = F.Pooling(scores.reshape((1, 1, -1)), kernel=(3,), stride=(1,),
                               pool_type="avg").reshape((1, -1))
            h = states[0] + F.broadcast_mul(y.reshape((1, -1)), F.sum(pooled))
            return pooled, [h]
        outs, (h,) = gluon_cf.foreach(body, targets, [F.ones((1, H)) * 0.1])
        return outs, h


@program([rand(10, H), mask(1, 0, 1, 1, 1, 1, 1, 1, 1, 1)],
         [rand(6, H, seed=1), mask(1, 1, 1, 0, 0, 1)], [rand(4, H, seed=2), mask(1, 1, 1, 0)],
         [rand(12, H, seed=3), mask(*[1] * 12)])
class MaskedRowsTruncatedThenConv(HybridBlock):
    """The kept rows (boolean_mask) truncated to 8, then a width-3 convolution over them."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.conv = nn.Conv1D(2, 3, in_channels=H)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        kept = F.slice(kept, begin=(0, None), end=(8, None))
        return self.conv(kept.transpose().expand_dims(0))


@program([rand(1, 1, 12)], [rand(1, 1, 30, seed=1)], [rand(1, 1, 7, seed=2)],
         [rand(1, 1, 45, seed=3)])
class StridedSliceStepTen(HybridBlock):
    """Every tenth step of a sequence (x[..., 2::10]) summed with a pooled copy (stride 10)."""

    def hybrid_forward(self, F, x):
        a = F.slice(x, begin=(None, None, 2), end=(None, None, None), step=(None, None, 10))
        b = F.Pooling(F.slice_axis(x, axis=2, begin=2, end=None), kernel=(1,), stride=(10,),
                      pool_type="max")
        return a + b


@program([rand(2, 6, 4)], [rand(2, 9, 4, seed=1)], [rand(2, 1, 4, seed=2)])
class ReshapeCodesOnDynamicAxis(HybridBlock):
    """reshape with MXNet's codes over a dynamic length n: (-3, 0) merges batch and time,
    (-4, -1, 2, 0) splits the features, (0, -1) flattens, (-2,) copies the rest."""

    def hybrid_forward(self, F, x):
        a = x.reshape((-3, 0))                       # (2n, 4)
        b = a.reshape((0, -4, -1, 2))                # (2n, 2, 2)
        c = b.reshape((0, -1))                       # (2n, 4)
        d = x.reshape((0, 0, -4, 2, -1)).reshape((-2,))   # (2, n, 2, 2)
        return F.sum(c, axis=1), d.reshape((0, -3, -2)), F.reshape_like(c, a) * 2


@program([rand(2, 6, 4)], [rand(2, 9, 4, seed=1)], [rand(2, 2, 4, seed=2)])
class ReshapeMinusOneInForeachBody(HybridBlock):
    """A foreach over the batch whose step reshapes its (n, 4) row with (-1, 2) and with
    (0, -4, 2, -1), summing a column."""

    def hybrid_forward(self, F, x):
        def body(row, states):
            pairs = row.reshape((-1, 2))                     # (2n, 2)
            split = row.reshape((0, -4, 2, -1))              # (n, 2, 2)
            return [F.sum(pairs, axis=0), F.sum(split, axis=(0, 2))], \
                [states[0] + F.sum(pairs)]
        (a, b), (s,) = gluon_cf.foreach(body, x, [F.zeros((1,))])
        return a, b, s


@program([rand(8, H)], [rand(6, H, seed=1)], [rand(2, H, seed=2)], [rand(4, H, seed=3)])
class EvenPairsReshape(HybridBlock):
    """Rows taken two by two (reshape (-4, -1, 2, 0)): a length that must be even."""

    def hybrid_forward(self, F, x):
        pairs = x.reshape((-4, -1, 2, 0))
        return F.sum(pairs, axis=1), pairs.reshape((0, -3))


@program([rand(6, H), floats(3)], [rand(9, H, seed=1), floats(5)],
         [rand(2, H, seed=2), floats(1)], [rand(4, H, seed=3), floats(0)])
class SequenceMaskAndLastDynamic(HybridBlock):
    """SequenceLast and SequenceMask of a (n, 1, H) sequence by a run-time length, then the
    positions (arange_like) weighted."""
    NO_GRAD = (1,)     # (MXNet writes no gradient of a length or a mask: garbage)

    def hybrid_forward(self, F, x, n):
        seq = x.expand_dims(1)
        last = F.SequenceLast(seq, F.maximum(n, 1), use_sequence_length=True)
        masked = F.SequenceMask(seq, n, use_sequence_length=True)
        pos = F.contrib.arange_like(x, axis=0)
        return last, F.broadcast_mul(masked.reshape((0, -1)), pos.reshape((-1, 1)))


@program([rand(7, H), mask(1, 0, 1, 1, 0, 1, 1)], [rand(5, H, seed=1), mask(0, 0, 1, 0, 0)],
         [rand(4, H, seed=2), mask(1, 1, 1, 1)], [rand(3, H, seed=3), mask(0, 1, 0)])
class MaskedTopkAllAndFirstTwo(HybridBlock):
    """boolean_mask's kept rows sorted (topk k=0 of each column) and the first two kept rows
    (a slice clipped to 2), summed."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        first = F.slice(kept, begin=(0, None), end=(2, None))
        return F.sort(kept, axis=0), F.sum(first, axis=0), F.sum(kept, axis=0)


@program([rand(6, H)], [rand(9, H, seed=1)], [rand(1, H, seed=2)], [rand(3, H, seed=3)])
class ClipToFourThenPadToFour(HybridBlock):
    """The first 4 rows, padded back to 4 with zeros (concat then slice): always 4 rows."""

    def hybrid_forward(self, F, x):
        first = F.slice(x, begin=(0, None), end=(4, None))
        padded = F.concat(first, F.zeros((4, H)), dim=0)
        return F.slice(padded, begin=(0, None), end=(4, None)), first * 2


# ---- index_copy ---------------------------------------------------------------------------------

@program([rand(5, H), ints(1, 3, 1), rand(3, H, seed=1)],
         [rand(5, H, seed=2), ints(0, 0, 0), rand(3, H, seed=3)],
         [rand(5, H, seed=4), ints(4, 2, 0), rand(3, H, seed=5)])
class IndexCopyDuplicatesInt32(HybridBlock):
    """index_copy of three rows, an int32 index with duplicates (the last row given wins)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, old, idx, new):
        return F.contrib.index_copy(old, idx, new) * 2


@program([rand(6, H), rand(3, H, seed=1)], [rand(6, H, seed=2), rand(1, H, seed=3)],
         [rand(6, H, seed=4), rand(2, H, seed=5)])
class IndexCopyInForeachWritesStepRows(HybridBlock):
    """A foreach writing each step's row into row 2 * t of a buffer with index_copy
    (t counted in the state)."""

    def hybrid_forward(self, F, buf, rows):
        def body(r, states):
            t, b = states
            b = F.contrib.index_copy(b, (t * 2).astype("int64"), r.reshape((1, -1)) + 1)
            return [F.sum(b)], [t + 1, b]
        (sums,), (_, out) = gluon_cf.foreach(body, rows, [F.zeros((1,)), buf])
        return sums, out


@program([rand(5, 2, 2), ints(4, 0, dtype=np.int64), rand(2, 2, 2, seed=1)],
         [rand(5, 2, 2, seed=2), ints(2, 2, dtype=np.int64), rand(2, 2, 2, seed=3)])
class IndexCopyThreeDimensional(HybridBlock):
    """index_copy of (2, 2) matrices into a (5, 2, 2) stack."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, old, idx, new):
        return F.contrib.index_copy(old, idx, new)


@program([rand(5, H), mask(1, 0, 1, 0, 0), rand(5, H, seed=1)],
         [rand(5, H, seed=2), mask(0, 0, 0, 0, 1), rand(5, H, seed=3)],
         [rand(5, H, seed=4), mask(1, 1, 1, 1, 1), rand(5, H, seed=5)])
class IndexCopyOfMaskedRows(HybridBlock):
    """index_copy of the rows a mask keeps (boolean_mask of the new rows and of their row
    numbers): a count known at run time."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, old, m, new):
        rows = F.contrib.boolean_mask(F.contrib.arange_like(m), m)
        return F.contrib.index_copy(old, rows.astype("int64"), F.contrib.boolean_mask(new, m))


@program([rand(5, H), floats(2), rand(2, H, seed=1)], [rand(5, H, seed=2), floats(0),
                                                        rand(2, H, seed=3)],
         [rand(5, H, seed=4), floats(4), rand(2, H, seed=5)])
class IndexCopyInWhileTwoRowsPerStep(HybridBlock):
    """A while_loop of n steps (max 3) each writing two rows (i and i + 1) of the buffer."""

    def hybrid_forward(self, F, buf, n, rows):
        def func(i, b):
            idx = F.concat(i, i + 1, dim=0).astype("int32")
            return [], [i + 1, F.contrib.index_copy(b, idx, F.broadcast_mul(rows, i + 1))]
        _, (i, out) = gluon_cf.while_loop(lambda i, b: i < F.minimum(n, 3), func,
                                          [F.zeros((1,)), buf], max_iterations=3)
        return i, out


@program([rand(5, H), ints(3, dtype=np.int64),
          rand(1, H, seed=1)],
         [rand(5, H, seed=2), ints(0, dtype=np.int64), rand(1, H, seed=3)])
class IndexCopyInCondBranchFloat64(HybridBlock):
    """index_copy in a cond branch, computed in float64."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, old, idx, new):
        old64, new64 = old.astype("float64"), new.astype("float64")
        out = gluon_cf.cond(F.sum(old) > 0, lambda: F.contrib.index_copy(old64, idx, new64),
                            lambda: old64 * 2)
        return out.astype("float32")


# ---- dtype corners ------------------------------------------------------------------------------

@program([rand(4, H).astype(np.float16)], [rand(2, H, seed=1).astype(np.float16)],
         [rand(6, H, seed=2).astype(np.float16)])
class Float16ForeachRunningSum(HybridBlock):
    """A foreach running sum and max over float16 rows."""
    TOL = (2e-3, 2e-3)

    def hybrid_forward(self, F, x):
        def body(r, states):
            s, m = states
            return [r * 2], [s + r, F.maximum(m, r)]
        outs, (s, m) = gluon_cf.foreach(body, x, [F.zeros((H,), dtype="float16"),
                                                  F.ones((H,), dtype="float16") * -5])
        return outs, s, m


@program([rand(H).astype(np.float64), floats(3).astype(np.float64)],
         [rand(H, seed=1).astype(np.float64), floats(1).astype(np.float64)],
         [rand(H, seed=2).astype(np.float64), floats(5).astype(np.float64)])
class Float64WhileNewtonSteps(HybridBlock):
    """n Newton steps (max 5) for sqrt(2 + x^2) in float64; exact length step outputs."""

    def hybrid_forward(self, F, x, n):
        target = 2 + x * x

        def func(i, y):
            y = 0.5 * (y + target / y)
            return [y], [i + 1, y]
        (ys,), (i, y) = gluon_cf.while_loop(lambda i, y: i < n, func,
                                            [F.zeros((1,), dtype="float64"), F.ones_like(x)],
                                            max_iterations=5, exact_length=True)
        return ys, y, i


@program([rand(2, H), ints(3, dtype=np.int64)], [rand(2, H, seed=1), ints(0, dtype=np.int64)],
         [rand(2, H, seed=2), ints(1, dtype=np.int64)])
class Int64CountWhile(HybridBlock):
    """A while_loop counting in int64 up to an int64 input (max 4)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        def func(i, h):
            return [h], [i + 1, F.tanh(h + 1)]
        _, (i, h) = gluon_cf.while_loop(lambda i, h: i < n, func,
                                        [F.zeros((1,), dtype="int64"), x], max_iterations=4)
        return h, i


@program([rand(6, H), ints(5, 0, 2, 2)], [rand(6, H, seed=1), ints(1, 1, 1, 1)],
         [rand(6, H, seed=2), ints(3, 4, 0, 5)])
class Int32IndicesTakeInForeach(HybridBlock):
    """A foreach over int32 indices taking each row of a table (an embedding lookup)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, table, idx):
        def body(i, states):
            row = F.take(table, i)
            return [row], [states[0] + row]
        rows, (s,) = gluon_cf.foreach(body, idx, [F.zeros((1, H))])
        return rows, s


@program([rand(5, H).astype(np.float64), mask(1, 0, 1, 1, 0)],
         [rand(5, H, seed=1).astype(np.float64), mask(0, 0, 0, 0, 1)],
         [rand(5, H, seed=2).astype(np.float64), mask(1, 1, 1, 1, 1)])
class Float64BooleanMaskMean(HybridBlock):
    """The mean of the kept float64 rows (mask as float32)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        return F.broadcast_div(F.sum(kept, axis=0), F.sum(m).astype("float64")), kept


@program([rand(4, H).astype(np.float16), mask(1, 0, 1, 1)],
         [rand(4, H, seed=1).astype(np.float16), mask(0, 1, 0, 0)])
class Float16BooleanMaskInCond(HybridBlock):
    """float16 rows kept by a mask in a cond branch."""
    TOL = (2e-3, 2e-3)

    def hybrid_forward(self, F, x, m):
        return gluon_cf.cond(F.sum(m) > 1,
                             lambda: F.sum(F.contrib.boolean_mask(x, m), axis=0),
                             lambda: F.sum(x, axis=0) * 0.5)


# ---- nesting ------------------------------------------------------------------------------------

@program([rand(4, H), floats(2)], [rand(3, H, seed=1) - 1, floats(3)],
         [rand(2, H, seed=2), floats(1)])
class CondInForeachInWhile(HybridBlock):
    """n passes (max 3) each a foreach whose step picks tanh or doubling by the row's sign."""

    def hybrid_forward(self, F, x, n):
        def func(i, h):
            def step(r, states):
                v = gluon_cf.cond(F.sum(r) > 0, lambda: F.tanh(states[0] + r),
                                  lambda: states[0] * 2 - r)
                return [v], [v]
            (outs,), (h,) = gluon_cf.foreach(step, x, [h])
            return [F.sum(outs, axis=0)], [i + 1, h]
        (sums,), (i, h) = gluon_cf.while_loop(lambda i, h: i < n, func,
                                              [F.zeros((1,)), F.zeros((H,))], max_iterations=3)
        return sums, h, i


@program([rand(H), floats(3)], [rand(H, seed=1) - 2, floats(2)], [rand(H, seed=2), floats(0)])
class ExactWhileInCondBranch(HybridBlock):
    """cond(sum(x) > 0): an exact-length while_loop of n steps collecting x * i, summed; else
    x itself."""

    def hybrid_forward(self, F, x, n):
        def loop():
            (outs,), _ = gluon_cf.while_loop(lambda i, v: i < n,
                                             lambda i, v: ([F.broadcast_mul(v, i)], [i + 1, v]),
                                             [F.zeros((1,)), x], max_iterations=4,
                                             exact_length=True)
            return F.sum(outs, axis=0)
        return gluon_cf.cond(F.sum(x) > 0, loop, lambda: x)


@program([rand(6, H), mask(1, 0, 1, 1, 0, 1)], [rand(4, H, seed=1), mask(0, 0, 1, 0)],
         [rand(5, H, seed=2), mask(1, 1, 1, 1, 1)])
class ForeachOverMaskedRowsWithCond(HybridBlock):
    """A foreach over the kept rows (boolean_mask) whose step branches on the row's sum."""

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)

        def step(r, states):
            v = gluon_cf.cond(F.sum(r) > 1.5, lambda: states[0] + r, lambda: states[0] - r)
            return [v * 2], [v]
        outs, (h,) = gluon_cf.foreach(step, kept, [F.zeros((H,))])
        return outs, h


@program([rand(5, H), floats(2)], [rand(3, H, seed=1), floats(1)], [rand(7, H, seed=2),
                                                                    floats(3)])
class WhileInForeachExactInner(HybridBlock):
    """A foreach over rows whose step runs an exact-length while_loop of n steps (max 3) and
    sums its step outputs."""

    def hybrid_forward(self, F, x, n):
        def step(r, states):
            (vs,), (_, v) = gluon_cf.while_loop(lambda i, v: i < n,
                                                lambda i, v: ([v], [i + 1, v * 0.5]),
                                                [F.zeros((1,)), r], max_iterations=3,
                                                exact_length=True)
            return [F.sum(vs, axis=0) + v], [states[0] + v]
        (outs,), (s,) = gluon_cf.foreach(step, x, [F.zeros((H,))])
        return outs, s


for _cls in PROGRAMS:         # (the oracle: the same code run eagerly on NDArrays)
    _cls.plain_forward = _cls.hybrid_forward
