"""Hostile round 26x, second part (with ``hostile_programs26x.py``): values of run-time length
in loop bodies and recursion (empty masks, zero-step loops, zero-row values), for call
histories and exports; index_copy in loops and branches; clipped and strided lengths inside
bodies; reshape codes over masked rows."""
import numpy as np
from mxnet.gluon import HybridBlock, nn

import gluon_cf

import hostile_harness
from hostile_programs26x import H, ints, mask

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats


# ---- empty masks and zero-row values inside bodies ------------------------------------------

@program([rand(4, H), mask(1, 0, 1, 1), floats(2)], [rand(4, H, seed=1), mask(0, 0, 0, 0),
                                                     floats(2)],
         [rand(4, H, seed=2), mask(0, 1, 0, 0), floats(3)], [rand(4, H, seed=3),
                                                             mask(0, 0, 0, 0), floats(0)])
class MaskedSumInWhileBody(HybridBlock):
    """Each of n steps (max 3) adds the sum of the kept rows (none kept: 0) to its state."""
    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, x, m, n):
        def func(i, s):
            kept = F.contrib.boolean_mask(x, m)
            return [], [i + 1, s * 0.5 + F.sum(kept, axis=0)]
        _, (i, s) = gluon_cf.while_loop(lambda i, s: i < n, func,
                                        [F.zeros((1,)), F.zeros((H,))], max_iterations=3)
        return s, i


@program([rand(3, H), mask(1, 0, 1, 1, 0, 0, 1, 1, 1)], [rand(3, H, seed=1), mask(*[0] * 9)],
         [rand(3, H, seed=2), mask(0, 0, 0, 1, 0, 0, 0, 0, 0)],
         [rand(3, H, seed=3), mask(*[0] * 9)])
class MaskedRowsPerForeachStep(HybridBlock):
    """A foreach over rows; each step keeps the entries of its row the step's slice of the
    mask keeps, and adds their sum (none kept: 0)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        ms = m.reshape((-1, H))

        def body(data, states):
            row, keep = data
            kept = F.contrib.boolean_mask(row, keep)
            return [F.sum(kept).reshape((1,))], [states[0] + F.sum(kept)]
        (sums,), (total,) = gluon_cf.foreach(body, [x, ms], [F.zeros((1,))])
        return sums, total


@program([rand(5, H), mask(1, 0, 1, 0, 1)], [rand(5, H, seed=1), mask(0, 0, 0, 0, 0)],
         [rand(5, H, seed=2), mask(1, 1, 1, 1, 1)])
class MaskedRowsMeanInCond(HybridBlock):
    """cond(any kept): the mean of the kept rows; else zeros."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        return gluon_cf.cond(F.sum(m) > 0,
                             lambda: F.broadcast_div(F.sum(F.contrib.boolean_mask(x, m),
                                                           axis=0), F.sum(m)),
                             lambda: F.zeros((H,)))


@program([rand(5, H), mask(1, 0, 1, 0, 1)], [rand(5, H, seed=1), mask(0, 0, 0, 0, 0)],
         [rand(5, H, seed=2), mask(0, 0, 1, 0, 0)])
class MaskedRowsForeachZeroSteps(HybridBlock):
    """A foreach over the kept rows with states only (none kept: no step)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        _, (s, c) = gluon_cf.foreach(lambda r, st: ([], [st[0] + r, st[1] + 1]), kept,
                                     [F.zeros((H,)), F.zeros((1,))])
        return s, c


@program([rand(H), floats(2)], [rand(H, seed=1), floats(0)], [rand(H, seed=2), floats(3)],
         [rand(H, seed=3), floats(0)])
class ExactLoopThenSumOfSteps(HybridBlock):
    """An exact-length while_loop of n steps (max 4), its step outputs summed (no step: 0)
    and counted."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        (outs,), (i, _) = gluon_cf.while_loop(lambda i, v: i < n,
                                              lambda i, v: ([v], [i + 1, F.tanh(v + 1)]),
                                              [F.zeros((1,)), x], max_iterations=4,
                                              exact_length=True)
        return F.sum(outs, axis=0), i


@program([rand(H), floats(2)], [rand(H, seed=1), floats(1)], [rand(H, seed=2), floats(0.5)])
class ExactLoopInForeachOfStepCounts(HybridBlock):
    """A foreach over three step counts (n, n + 1, 1; max 3) each running an exact-length
    loop; its steps' sum is the step's output."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        counts = F.concat(n, n + 1, F.ones((1,)), dim=0)

        def body(c, states):
            (outs,), _ = gluon_cf.while_loop(lambda i, v: i < c,
                                             lambda i, v: ([v * 2], [i + 1, v + 1]),
                                             [F.zeros((1,)), states[0]], max_iterations=3,
                                             exact_length=True)
            total = F.sum(outs, axis=0)
            return [total], [states[0] + total * 0.1]
        (totals,), (h,) = gluon_cf.foreach(body, counts, [x])
        return totals, h


@program([rand(6, H), mask(1, 0, 1, 1, 0, 1)], [rand(6, H, seed=1), mask(0, 0, 0, 0, 0, 0)],
         [rand(6, H, seed=2), mask(0, 0, 0, 0, 0, 1)])
class RecursionOverMaskedRowCount(HybridBlock):
    """A recursive function summing halves of the kept rows' sum, depth by the kept count
    (max 6): the rows it reads may be none."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        total = F.sum(kept, axis=0)

        @gluon_cf.recursive(max_depth=8)
        def down(k, acc):
            return gluon_cf.cond(k <= 0, lambda: acc, lambda: down(k - 1, acc * 0.5 + total))
        return down(F.sum(m), F.zeros((H,)))


@program([rand(6, H), mask(1, 0, 1, 1, 0, 1)], [rand(6, H, seed=1), mask(0, 0, 0, 0, 0, 0)],
         [rand(6, H, seed=2), mask(1, 1, 1, 1, 1, 1)])
class DenseOfMaskedRowsInWhile(HybridBlock):
    """A while_loop (2 steps) applying a Dense to the kept rows and adding their sum."""
    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(H, in_units=H, flatten=False)

    def hybrid_forward(self, F, x, m):
        def func(i, s):
            kept = F.contrib.boolean_mask(x, m)
            return [], [i + 1, s + F.sum(self.fc(kept), axis=0)]
        _, (_, s) = gluon_cf.while_loop(lambda i, s: i < 2, func, [F.zeros((1,)),
                                                                   F.zeros((H,))],
                                        max_iterations=2)
        return s


# ---- index_copy in bodies --------------------------------------------------------------------

@program([rand(6, H), floats(3)], [rand(6, H, seed=1), floats(0)], [rand(6, H, seed=2),
                                                                    floats(6)])
class IndexCopyRowsCountedDown(HybridBlock):
    """A while_loop writing row 5 - i (i < n, max 6) of a buffer with i * 0.1."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, buf, n):
        def func(i, b):
            row = F.broadcast_mul(F.ones((1, H)), i * 0.1)
            return [], [i + 1, F.contrib.index_copy(b, (5 - i).astype("int64"), row)]
        _, (_, out) = gluon_cf.while_loop(lambda i, b: i < n, func, [F.zeros((1,)), buf],
                                          max_iterations=6)
        return out


@program([rand(4, H), rand(4, H, seed=1)], [rand(4, H, seed=2), rand(4, H, seed=3) - 1])
class IndexCopyPermutationInCond(HybridBlock):
    """cond(sum(new) > 0): rows written in reversed order (all four); else in order."""

    def hybrid_forward(self, F, old, new):
        rev = F.reverse(F.contrib.arange_like(new, axis=0), axis=0).astype("int32")
        fwd = F.contrib.arange_like(new, axis=0).astype("int32")
        return gluon_cf.cond(F.sum(new) > 0, lambda: F.contrib.index_copy(old, rev, new),
                             lambda: F.contrib.index_copy(old, fwd, new * 2))


@program([rand(5, H), ints(1, 3, dtype=np.int64), rand(2, 2, H, seed=1)],
         [rand(5, H, seed=2), ints(4, 4, dtype=np.int64), rand(3, 2, H, seed=3)])
class IndexCopyInForeachSameRowsEachStep(HybridBlock):
    """A foreach over steps each writing two rows at the same indices (the last step's
    rows remain)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, buf, idx, steps):
        def body(rows, states):
            b = F.contrib.index_copy(states[0], idx, rows)
            return [F.sum(b, axis=1)], [b]
        (sums,), (out,) = gluon_cf.foreach(body, steps, [buf])
        return sums, out


# ---- clipped, strided and reshaped lengths in bodies -----------------------------------------

@program([rand(10, H), rand(2, H, seed=5)], [rand(12, H, seed=1), rand(3, H, seed=6)],
         [rand(2, H, seed=2), rand(2, H, seed=7)], [rand(5, H, seed=3), rand(1, H, seed=8)])
class FirstFourMemoryRowsInWhile(HybridBlock):
    """A while_loop over targets attending to the first 4 rows of memory (fewer when the
    memory is shorter): scores of min(m, 4) columns per step."""

    def hybrid_forward(self, F, mem, targets):
        first = F.slice(mem, begin=(0, None), end=(4, None))

        def func(i, h):
            scores = F.dot(h, first, transpose_b=True)
            w = F.softmax(scores, axis=-1)
            h = F.dot(w, first) + F.take(targets, i)
            return [scores], [i + 1, h]
        (scores,), (_, h) = gluon_cf.while_loop(lambda i, h: i < 2, func,
                                                [F.zeros((1,)), F.ones((1, H)) * 0.1],
                                                max_iterations=2)
        return scores, h


@program([rand(7, H), mask(1, 1, 0, 1, 1, 1, 0)], [rand(9, H, seed=1), mask(*[1] * 9)],
         [rand(4, H, seed=2), mask(1, 0, 0, 1)], [rand(6, H, seed=3), mask(1, 1, 1, 1, 1, 1)])
class MaskedRowsEveryOtherInForeach(HybridBlock):
    """The kept rows, every other one (a strided slice), walked by a foreach."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        every = F.slice(kept, begin=(0, None), end=(None, None), step=(2, None))
        outs, (h,) = gluon_cf.foreach(lambda r, s: (r * s[0], [s[0] + r]), every,
                                      [F.ones((H,))])
        return outs, h


@program([rand(8, 4), mask(1, 1, 0, 1, 1, 1, 0, 1)], [rand(8, 4, seed=1), mask(*[1] * 8)],
         [rand(8, 4, seed=2), mask(1, 0, 0, 1, 0, 0, 0, 0)])
class MaskedRowsReshapedInWhileBody(HybridBlock):
    """A while_loop body reshaping the kept rows with (-1, 2), (0, -4, 2, -1) and (-3,)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)

        def func(i, s):
            pairs = kept.reshape((-1, 2))
            split = kept.reshape((0, -4, 2, -1))
            flat = kept.reshape((-3,))
            return [], [i + 1, F.broadcast_add(s + F.sum(pairs, axis=0) +
                                               F.sum(split, axis=(0, 2)), F.sum(flat))]
        _, (_, s) = gluon_cf.while_loop(lambda i, s: i < 2, func,
                                        [F.zeros((1,)), F.zeros((2,))], max_iterations=2)
        return s


@program([rand(7, H), floats(3)], [rand(9, H, seed=1), floats(1)], [rand(2, H, seed=2),
                                                                    floats(2)])
class SequenceLastOfTruncatedInForeach(HybridBlock):
    """A foreach over three lengths taking the last valid row of the sequence truncated to 5
    rows (SequenceLast by min(len, rows))."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        seq = F.slice(x, begin=(0, None), end=(5, None)).expand_dims(1)
        lens = F.concat(n, n + 1, F.ones((1,)), dim=0)
        rows = F.sum(F.ones_like(F.slice_axis(seq, axis=2, begin=0, end=1)))

        def body(length, states):
            last = F.SequenceLast(seq, F.minimum(length, rows), use_sequence_length=True)
            return [last.reshape((-1,))], [states[0] + last.reshape((-1,))]
        (lasts,), (s,) = gluon_cf.foreach(body, lens, [F.zeros((H,))])
        return lasts, s


@program([rand(6, 4)], [rand(9, 4, seed=1)], [rand(1, 4, seed=2)], [rand(3, 4, seed=3)])
class TopkTwoOfClippedRowsInForeach(HybridBlock):
    """A foreach over columns taking the top-2 values of the first 5 rows (fewer rows: an
    error in MXNet and onnxruntime alike for one row)."""

    def hybrid_forward(self, F, x):
        first = F.slice(x, begin=(0, None), end=(5, None))

        def body(col, states):
            top = F.topk(F.concat(col, col, dim=0), k=2, ret_typ="value")
            return [top], [states[0] + F.sum(top)]
        (tops,), (s,) = gluon_cf.foreach(body, first.transpose(), [F.zeros((1,))])
        return tops, s


@program([rand(2, 3, 8)], [rand(2, 3, 11, seed=1)], [rand(2, 3, 4, seed=2)])
class PoolStrideTwoOverTimeInForeach(HybridBlock):
    """A foreach over the batch max-pooling each (3, n) example with stride 2 (n // 2 out)."""

    def hybrid_forward(self, F, x):
        def body(ex, states):
            p = F.Pooling(ex.expand_dims(0), kernel=(2,), stride=(2,), pool_type="avg")
            return [p.reshape((3, -1))], [states[0] + F.sum(p)]
        (pooled,), (s,) = gluon_cf.foreach(body, x, [F.zeros((1,))])
        return pooled, s


# ---- exports of blocks with run-time-length data -----------------------------------------------

@program([rand(6, H), mask(1, 0, 1, 1, 0, 1), floats(2)],
         [rand(6, H, seed=1), mask(1, 1, 1, 1, 1, 1), floats(0)],
         [rand(6, H, seed=2), mask(0, 0, 1, 0, 0, 0), floats(3)])
class ExactLoopOverKeptRowsThenConcat(HybridBlock):
    """The kept rows, then an exact-length loop appending n rows of their mean; all joined."""
    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, x, m, n):
        kept = F.contrib.boolean_mask(x, m)
        mean = F.mean(kept, axis=0)
        (extra,), _ = gluon_cf.while_loop(lambda i, v: i < n,
                                          lambda i, v: ([v], [i + 1, v * 0.5]),
                                          [F.zeros((1,)), mean], max_iterations=3,
                                          exact_length=True)
        return F.concat(kept, extra, dim=0)


@program([rand(5, H), floats(1)], [rand(5, H, seed=1), floats(-1)], [rand(5, H, seed=2),
                                                                     floats(1)])
class CondOfTwoLengthsThenForeach(HybridBlock):
    """cond: the first 2 rows or all 5; then a foreach over the chosen rows."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, flag):
        rows = gluon_cf.cond(flag > 0, lambda: F.slice_axis(x, axis=0, begin=0, end=2),
                             lambda: x * 1)
        outs, (h,) = gluon_cf.foreach(lambda r, s: (F.tanh(r + s[0]), [s[0] + r]), rows,
                                      [F.zeros((H,))])
        return outs, h


@program([rand(6, H), mask(1, 0, 1, 1, 0, 1)], [rand(6, H, seed=1), mask(0, 1, 0, 0, 0, 0)],
         [rand(6, H, seed=2), mask(1, 1, 1, 1, 1, 1)])
class SortKeptRowsByScore(HybridBlock):
    """The kept rows sorted by their first column (argsort then take), int32 indices."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        order = F.argsort(F.slice_axis(kept, axis=1, begin=0, end=1).reshape((-1,)),
                          dtype="int32")
        return F.take(kept, order), order


@program([rand(6, H).astype(np.float64), mask(1, 0, 1, 1, 0, 1), floats(2).astype(np.float64)],
         [rand(6, H, seed=1).astype(np.float64), mask(1, 1, 1, 1, 1, 1),
          floats(1).astype(np.float64)])
class Float64ForeachOverKeptRows(HybridBlock):
    """A float64 foreach over the kept rows, its state scaled by a float64 factor."""
    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, x, m, a):
        kept = F.contrib.boolean_mask(x, m)
        outs, (h,) = gluon_cf.foreach(
            lambda r, s: (r + s[0], [F.broadcast_mul(s[0], a) + r]), kept,
            [F.zeros((H,), dtype="float64")])
        return outs, h


@program([ints(3, 1, 4, 1, 5, dtype=np.int64), ints(2, dtype=np.int64)],
         [ints(9, 2, 6, dtype=np.int64), ints(0, dtype=np.int64)],
         [ints(5, dtype=np.int64), ints(4, dtype=np.int64)])
class Int64SequenceKeepAbove(HybridBlock):
    """int64 tokens: those above a threshold (boolean_mask), their running sum (foreach in
    int64) and count."""
    NO_GRAD = (0, 1)

    def hybrid_forward(self, F, toks, t):
        kept = F.contrib.boolean_mask(toks, F.broadcast_greater(toks, t))
        outs, (s,) = gluon_cf.foreach(lambda r, st: (st[0] + r, [st[0] + r]), kept,
                                      [F.zeros((1,), dtype="int64")])
        return outs, s


# ---- more clips, codes and dtypes ------------------------------------------------------------------

@program([rand(1, 1, 40)], [rand(1, 1, 25, seed=1)], [rand(1, 1, 33, seed=2)],
         [rand(1, 1, 20, seed=3)])
class TruncateTo32ThenWideConv(HybridBlock):
    """Truncated to 32 steps, then a width-20 convolution (20 steps at least): 13 steps out
    for every length over 32, fewer below."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.conv = nn.Conv1D(1, 20, in_channels=1)

    def hybrid_forward(self, F, x):
        return self.conv(F.slice(x, begin=(None, None, 0), end=(None, None, 32)))


@program([rand(9, H), floats(4)], [rand(5, H, seed=1), floats(9)], [rand(3, H, seed=2),
                                                                    floats(1)])
class WindowOfRunTimeLengthInForeach(HybridBlock):
    """A foreach over the rows attending to the previous rows within a window of n (a
    SequenceMask of the scores by min(t + 1, n))."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        pos = F.contrib.arange_like(x, axis=0)

        def body(data, states):
            row, t = data
            scores = F.dot(x, row.reshape((-1, 1))).reshape((1, -1))
            valid = F.minimum(t + 1, n)
            masked = F.SequenceMask(scores.expand_dims(-1), valid, use_sequence_length=True,
                                    axis=1, value=-1e4).reshape((1, -1))
            return [F.softmax(masked)], [states[0] + F.sum(masked > -1e3)]
        (ws,), (c,) = gluon_cf.foreach(body, [x, pos], [F.zeros((1,))])
        return ws, c


@program([rand(4, 6)], [rand(7, 6, seed=1)], [rand(1, 6, seed=2)])
class ReshapeMinusThreeMinusTwoInWhile(HybridBlock):
    """A while_loop body reshaping a captured (n, 6) value with (-3,), (-1, 3) and (0, -4, 2,
    3) codes and summing: each step sees n rows (a run-time dim)."""

    def hybrid_forward(self, F, x):
        def func(i, s):
            a = x.reshape((-3,))
            b = x.reshape((-1, 3))
            c = x.reshape((0, -4, 2, 3))
            return [F.sum(b, axis=0)], [i + 1, s + F.sum(a) + F.sum(c)]
        (bs,), (_, s) = gluon_cf.while_loop(lambda i, s: i < 2, func, [F.zeros((1,)),
                                                                      F.zeros((1,))],
                                            max_iterations=2)
        return bs, s


@program([rand(3, 4).astype(np.float16), floats(2).astype(np.float16)],
         [rand(3, 4, seed=1).astype(np.float16), floats(0).astype(np.float16)])
class Float16WhileHalving(HybridBlock):
    """A float16 while_loop halving a matrix n times (max 3)."""
    TOL = (2e-3, 2e-3)
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        _, (i, v) = gluon_cf.while_loop(lambda i, v: i < n, lambda i, v: ([], [i + 1, v * 0.5]),
                                        [F.zeros((1,), dtype="float16"), x], max_iterations=3)
        return v, i


@program([rand(5, H), ints(4, 0, 2, dtype=np.int64)], [rand(5, H, seed=1),
                                                        ints(1, 1, 1, dtype=np.int64)])
class Int64IndicesPickInCondInForeach(HybridBlock):
    """A foreach over int64 indices: a cond on the index's parity picks the row or its
    negation."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, table, idx):
        def body(i, states):
            row = F.take(table, i)
            odd = F.broadcast_mod(i.astype("float32"), F.ones((1,)) * 2)
            v = gluon_cf.cond(F.sum(odd) > 0, lambda: row * -1, lambda: row)
            return [v], [states[0] + v]
        (vs,), (s,) = gluon_cf.foreach(body, idx, [F.zeros((1, H))])
        return vs, s


@program([rand(6, H), mask(1, 0, 1, 1, 0, 1), floats(2)],
         [rand(6, H, seed=1), mask(1, 1, 1, 1, 1, 1), floats(3)],
         [rand(6, H, seed=2), mask(0, 1, 0, 0, 0, 0), floats(1)])
class WhileOverKeptRowsByIndex(HybridBlock):
    """A while_loop reading the kept rows one by one (take by its counter, mode clip), n
    steps (max 4)."""
    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, x, m, n):
        kept = F.contrib.boolean_mask(x, m)

        def func(i, h):
            row = F.take(kept, i, mode="clip")
            h = F.tanh(h + row)
            return [h], [i + 1, h]
        (hs,), (_, h) = gluon_cf.while_loop(lambda i, h: i < n, func,
                                            [F.zeros((1,)), F.zeros((1, H))], max_iterations=4)
        return hs, h


@program([rand(8, H)], [rand(5, H, seed=1)], [rand(3, H, seed=2)])
class LastThreeRowsNegativeSlice(HybridBlock):
    """The last three rows (slice_axis begin=-3) and every row but the last (end=-1), in a
    foreach step each."""

    def hybrid_forward(self, F, x):
        last = F.slice_axis(x, axis=0, begin=-3, end=None)
        most = F.slice_axis(x, axis=0, begin=0, end=-1)
        outs, (h,) = gluon_cf.foreach(lambda r, s: (F.broadcast_add(r, F.sum(last)), [s[0] + r]), most,
                                      [F.zeros((H,))])
        return outs, h, last


for _cls in PROGRAMS:         # (the oracle: the same code run eagerly on NDArrays)
    _cls.plain_forward = _cls.hybrid_forward
