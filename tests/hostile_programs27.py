"""Hostile round 27 (issue 24 items 2, 4-6): models written as users port real code, attacking
export and dynamic shapes (index modes that depend on the run-time length, reshape codes, splits
and repeats of run-time axes, squeezes of axes that may be 1, rows picked by 1-D conditions,
decoders in while_loop, cells in foreach, nested loops and conds of run-time sizes), exported
through ``export_onnx`` and ``save_artifact``; and call histories
(``tests/test_hostile_export27.py`` runs them)."""
import numpy as np
from mxnet.gluon import HybridBlock, nn, rnn

import gluon_cf

import hostile_harness
from hostile_programs26x import H, ints, mask

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats


# ---- indices whose meaning depends on the run-time length --------------------------------------

@program([rand(4, H), floats(5, 1)], [rand(8, H, seed=1), floats(5, 1)],
         [rand(2, H, seed=2), floats(5, 0)], [rand(7, H, seed=3), floats(6, 3)])
class TakeClipPastRunTimeRows(HybridBlock):
    """take (mode clip) of rows 5 and 1: past the end of a short input, row 5 of a long one."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, idx):
        return F.take(x, idx, axis=0, mode="clip") * 2


@program([rand(4, H), floats(5, -1)], [rand(7, H, seed=1), floats(5, -1)],
         [rand(3, H, seed=2), floats(-4, 2)])
class TakeWrapRunTimeRows(HybridBlock):
    """take (mode wrap): row 5 of 4 is row 1, of 7 row 5; -1 the last."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, idx):
        return F.take(x, idx, axis=0, mode="wrap")


@program([rand(2, 5), floats(7, 2)], [rand(2, 9, seed=1), floats(7, 2)],
         [rand(2, 3, seed=2), floats(-1, 8)])
class PickWrapOverRunTimeColumns(HybridBlock):
    """pick (wrap) of one column per row, columns of run-time count."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, idx):
        return F.pick(x, idx, axis=1, mode="wrap"), F.pick(x, idx, axis=-1, keepdims=True)


@program([rand(4, H), floats(1)], [rand(6, H, seed=1), floats(4)],
         [rand(3, H, seed=2), floats(0)])
class TakeLastRowsInWhile(HybridBlock):
    """A while_loop over n steps (max 4) taking row (len - 1 - i) of x, clipped."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        last = F.sum(F.ones_like(F.slice_axis(x, axis=1, begin=0, end=1))) - 1

        def func(i, s):
            row = F.take(x, last - i, axis=0)
            return [row], [i + 1, s + row]
        (rows,), (_, s) = gluon_cf.while_loop(lambda i, s: i < n, func,
                                              [F.zeros((1,)), F.zeros((1, H))],
                                              max_iterations=4)
        return rows, s


# ---- 1-D conditions, rows of run-time count ----------------------------------------------------

@program([rand(3, 3), mask(1, 0, 1)], [rand(5, 3, seed=1), mask(0, 1, 1, 0, 1)],
         [rand(1, 3, seed=2), mask(1)], [rand(2, 3, seed=3), mask(0, 1)])
class WhereRowsSquareWhenLengthIsWidth(HybridBlock):
    """where with a 1-D condition (per row) on (n, 3) rows: at n = 3 a (3,) condition is also
    a per-column one by broadcasting."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        return F.where(m, x, -x)


@program([rand(3, 3), mask(1, 0, 1)], [rand(5, 3, seed=1), mask(0, 1, 1, 0, 1)],
         [rand(2, 3, seed=2), mask(1, 1)])
class WhereRowsInForeachOverSteps(HybridBlock):
    """A foreach over steps of (n, 3) blocks, per-row where on the step's block."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        steps = F.stack(x, x * 2, axis=0)

        def body(s, st):
            y = F.where(m, s, F.zeros_like(s))
            return [y], [st[0] + F.sum(y, axis=0, keepdims=True)]
        (ys,), (tot,) = gluon_cf.foreach(body, steps, [F.zeros((1, 3))])
        return ys, tot


# ---- squeezes, splits and repeats of run-time axes ---------------------------------------------

@program([rand(2, 4)], [rand(1, 4, seed=1)], [rand(5, 4, seed=2)])
class SqueezeOfAxisThatMayBeOne(HybridBlock):
    """squeeze() with no axis of (n, 4, 1): the run-time axis goes too when n is 1."""

    def hybrid_forward(self, F, x):
        return F.squeeze(x.expand_dims(2)) * 3


@program([rand(4, H)], [rand(6, H, seed=1)], [rand(2, H, seed=2)], [rand(10, H, seed=3)])
class SplitRunTimeRowsInHalves(HybridBlock):
    """split of an even number of rows into two halves, summed."""

    def hybrid_forward(self, F, x):
        a, b = F.split(x, num_outputs=2, axis=0)
        return a + 2 * b


@program([rand(2, 4)], [rand(3, 4, seed=1)], [rand(1, 4, seed=2)])
class SplitSqueezeColumnsOfRunTimeRows(HybridBlock):
    """split of 4 columns with squeeze_axis, run-time rows."""

    def hybrid_forward(self, F, x):
        parts = F.split(x, num_outputs=4, axis=1, squeeze_axis=True)
        return parts[0] * parts[3] + parts[1], parts[2]


@program([rand(2, H)], [rand(5, H, seed=1)], [rand(1, H, seed=2)])
class RepeatTileRunTimeRows(HybridBlock):
    """repeat each row twice and tile the rows three times."""

    def hybrid_forward(self, F, x):
        return F.repeat(x, repeats=2, axis=0), F.tile(x, reps=(3, 1)), F.tile(x, reps=(2,))


@program([rand(2, 6, 4)], [rand(2, 10, 4, seed=1)], [rand(2, 2, 4, seed=2)])
class ReshapeMinusFourSplitsRunTimeAxis(HybridBlock):
    """(-4, ...) splitting the run-time time axis into pairs, (0, 0, -3) merging back, then
    a running sum over the merged rows (foreach). (Without a gluon_cf node, the block is
    MXNet's: an input of one more axis makes ``z.reshape((-3, 0))`` a reshape to fewer
    elements, which MXNet 1.9.1 runs, corrupting the heap.)"""

    def hybrid_forward(self, F, x):
        y = x.reshape((0, -4, -1, 2, -2))               # (2, n/2, 2, 4)
        z = F.sum(y, axis=2)                            # (2, n/2, 4)
        outs, _ = gluon_cf.foreach(lambda r, s: (r + s[0], [r + s[0]]), z.reshape((-3, 0)),
                                   [F.zeros((4,))])
        return outs, y.reshape((0, 0, -3))


@program([rand(3, 2, 4)], [rand(5, 2, 4, seed=1)], [rand(1, 2, 4, seed=2)])
class ReshapeReverseAndMinusTwo(HybridBlock):
    """reshape with reverse=True and -2 over a run-time first axis."""

    def hybrid_forward(self, F, x):
        a = F.reshape(x, shape=(-1, 0), reverse=True)   # (n*2, 4)
        b = F.reshape(x, shape=(-3, -2))                # (n*2, 4)
        return a * b, x.reshape((-1,))


@program([rand(3, 2, 4)], [rand(6, 2, 4, seed=1)], [rand(1, 2, 4, seed=2)])
class FlattenAndReshapeLikeRunTime(HybridBlock):
    """Flatten, then reshape_like back to the input's run-time shape."""

    def hybrid_forward(self, F, x):
        f = F.flatten(x) * 2
        return F.reshape_like(f, x), F.slice_like(f, x, axes=(0,))


# ---- sorting and selecting over run-time lengths -----------------------------------------------

@program([rand(5, H)], [rand(8, H, seed=1)], [rand(2, H, seed=2)])
class SortArgsortRunTimeRows(HybridBlock):
    """sort (descending) and argsort of each column over run-time rows, then the rows in the
    order of the first column (take)."""

    def hybrid_forward(self, F, x):
        order = F.argsort(F.slice_axis(x, axis=1, begin=0, end=1).reshape((-1,)),
                          is_ascend=False)
        return F.sort(x, axis=0, is_ascend=False), F.take(x, order), \
            F.argsort(x, axis=0, dtype="int32")


@program([rand(6, H), mask(1, 1, 0, 1, 1, 1)], [rand(6, H, seed=1), mask(1, 0, 0, 0, 1, 1)],
         [rand(6, H, seed=2), mask(1, 1, 1, 1, 1, 1)])
class TopkThreeOfKeptRows(HybridBlock):
    """topk(k=3) along the kept rows (at least three kept)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        return F.topk(kept, axis=0, k=3, ret_typ="value"), F.topk(kept, axis=0, k=3)


@program([rand(5, H)], [rand(7, H, seed=1)], [rand(3, H, seed=2)])
class GatherNdOfArgmaxRows(HybridBlock):
    """gather_nd with indices (argmax row of each column, column): the column maxima."""

    def hybrid_forward(self, F, x):
        rows = F.argmax(x, axis=0)
        cols = F.contrib.arange_like(rows)
        return F.gather_nd(x, F.stack(rows, cols, axis=0)), F.max(x, axis=0)


# ---- masks and lengths -------------------------------------------------------------------------

@program([rand(2, 5, H), floats(3, 5)], [rand(2, 7, H, seed=1), floats(1, 7)],
         [rand(2, 2, H, seed=2), floats(2, 1)])
class SequenceMaskReverseLastAxis1(HybridBlock):
    """SequenceMask, SequenceReverse and SequenceLast over (batch, time) data of run-time
    time (axis 1 for mask and last; reverse wants time first)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        masked = F.SequenceMask(x, n, use_sequence_length=True, axis=1, value=-1)
        rev = F.SequenceReverse(x.swapaxes(0, 1), n, use_sequence_length=True)
        last = F.SequenceLast(x, n, use_sequence_length=True, axis=1)
        return masked, rev.swapaxes(0, 1), last


@program([rand(2, 5), floats(3, 5)], [rand(2, 8, seed=1), floats(1, 8)],
         [rand(2, 1, seed=2), floats(1, 1)])
class SoftmaxWithLengthRunTime(HybridBlock):
    """softmax with use_length over run-time columns, and a mask by arange_like < length."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        a = F.softmax(x, length=n.astype("int32"), use_length=True, axis=-1)
        pos = F.contrib.arange_like(x, axis=1)
        keep = F.broadcast_lesser(pos.reshape((1, -1)), n.reshape((-1, 1)))
        b = F.softmax(F.where(keep, x, F.ones_like(x) * -1e9), axis=-1)
        return a, b


@program([rand(4, H), ints(0, 1, 2, 3)], [rand(4, H, seed=1), ints(2, 2, 1, 0)])
class EmbeddingTokensIntoLstmCellForeach(HybridBlock):
    """Embedding of int32 tokens, then an LSTMCell over them in foreach."""
    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.emb = nn.Embedding(5, H)
            self.cell = rnn.LSTMCell(H, input_size=H)

    def hybrid_forward(self, F, x, tok):
        e = self.emb(tok).expand_dims(1) + x.expand_dims(1)     # (T, 1, H)
        outs, st = gluon_cf.foreach(lambda d, s: self.cell(d, s), e,
                                    [F.zeros((1, H)), F.zeros((1, H))])
        return outs, st[1]


# ---- decoders in while_loop --------------------------------------------------------------------

class _Decoder(HybridBlock):
    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.emb = nn.Embedding(6, H)
            self.cell = rnn.GRUCell(H, input_size=H)
            self.out = nn.Dense(6, in_units=H)


@program([rand(4, H), floats(3)], [rand(6, H, seed=1), floats(5)], [rand(2, H, seed=2),
                                                                    floats(0)])
class GreedyAttentionDecoderMaxFromData(_Decoder):
    """A greedy GRU decoder attending over memory of run-time rows, n steps (max 5), its
    tokens, each step's attention and the final state."""

    def hybrid_forward(self, F, mem, n):
        def func(i, tok, h):
            e = self.emb(tok)
            att = F.softmax(F.dot(h, mem, transpose_b=True), axis=-1)
            ctx = F.dot(att, mem)
            out, (h2,) = self.cell(e + ctx, [h])
            tok2 = F.argmax(self.out(out), axis=-1)
            return [tok2, F.sum(att).reshape((1,))], [i + 1, tok2, h2]
        (toks, atts), (i, _, h) = gluon_cf.while_loop(
            lambda i, tok, h: i < n, func, [F.zeros((1,)), F.zeros((1,)), F.ones((1, H)) * 0.1],
            max_iterations=5)
        return toks, atts, h, i


@program([rand(4, H), floats(1)], [rand(6, H, seed=1), floats(3)], [rand(2, H, seed=2),
                                                                    floats(2)])
class DecoderStopsOnTokenThenMaskedMean(_Decoder):
    """A decoder stopping when its token equals a stop token (max 4 steps); outputs after
    the stop masked by SequenceMask with the step count."""

    def hybrid_forward(self, F, mem, stop):
        def func(i, tok, h, done):
            out, (h2,) = self.cell(self.emb(tok) + F.mean(mem, axis=0, keepdims=True), [h])
            tok2 = F.argmax(self.out(out), axis=-1)
            return [out], [i + 1, tok2, h2, tok2 == stop]
        (outs,), (i, _, _, _) = gluon_cf.while_loop(
            lambda i, tok, h, done: done < 1,
            func, [F.zeros((1,)), F.zeros((1,)), F.ones((1, H)) * 0.2, F.zeros((1,))],
            max_iterations=4)
        masked = F.SequenceMask(outs, i, use_sequence_length=True)
        return masked, F.broadcast_div(F.sum(masked, axis=0), F.maximum(i, 1))


# ---- boolean_mask keeping 0..all rows inside bodies and branches --------------------------------

@program([rand(5, H), mask(1, 0, 1, 0, 1)], [rand(5, H, seed=1), mask(0, 0, 0, 0, 0)],
         [rand(5, H, seed=2), mask(1, 1, 1, 1, 1)], [rand(5, H, seed=3), mask(0, 0, 0, 1, 0)])
class MaskedRowsGruCellInForeachInCond(HybridBlock):
    """cond(any kept): a GRUCell over the kept rows in foreach (final state); else zeros."""
    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.GRUCell(H, input_size=H)

    def hybrid_forward(self, F, x, m):
        def run():
            kept = F.contrib.boolean_mask(x, m).expand_dims(1)
            _, (h,) = gluon_cf.foreach(lambda d, s: self.cell(d, s), kept, [F.zeros((1, H))])
            return h
        return gluon_cf.cond(F.sum(m) > 0, run, lambda: F.zeros((1, H)))


@program([rand(4, H), mask(1, 0, 1, 0, 1, 1, 0, 0)], [rand(4, H, seed=1), mask(*[0] * 8)],
         [rand(4, H, seed=2), mask(*[1] * 8)])
class ForeachStepMasksByCondThenTopk(HybridBlock):
    """A foreach over two steps, each keeping the rows its mask keeps; cond(count >= 2): the
    two largest of column 0's kept values, else the first column's first two entries."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        ms = m.reshape((2, -1))

        def body(keep, st):
            kept = F.contrib.boolean_mask(x, keep)
            col = F.slice_axis(kept, axis=1, begin=0, end=1).reshape((-1,))
            top = gluon_cf.cond(F.sum(keep) >= 2,
                                lambda: F.topk(col, k=2, ret_typ="value"),
                                lambda: F.slice_axis(F.slice_axis(x, axis=0, begin=0, end=2),
                                                        axis=1, begin=0, end=1).reshape((-1,)))
            return [top], [st[0] + F.sum(top)]
        (tops,), (s,) = gluon_cf.foreach(body, ms, [F.zeros((1,))])
        return tops, s


@program([rand(6, H), mask(1, 0, 1, 1, 0, 1)], [rand(6, H, seed=1), mask(0, 0, 0, 0, 0, 0)],
         [rand(6, H, seed=2), mask(0, 0, 0, 0, 0, 1)])
class WhileOverKeptCountCondPicksRow(HybridBlock):
    """A while_loop over the kept count; each step a cond on the step's parity takes the
    kept row i or its negation (the kept rows read by take)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        n = F.sum(m)

        def func(i, s):
            row = F.take(kept, i, axis=0)
            v = gluon_cf.cond(F.broadcast_mod(i, F.ones((1,)) * 2) < 1, lambda: row,
                              lambda: -row)
            return [v], [i + 1, s + v]
        (vs,), (_, s) = gluon_cf.while_loop(lambda i, s: i < n, func,
                                            [F.zeros((1,)), F.zeros((1, H))],
                                            max_iterations=6)
        return vs, s


@program([rand(5, H), mask(1, 0, 1, 0, 1)], [rand(5, H, seed=1), mask(0, 0, 0, 0, 0)],
         [rand(5, H, seed=2), mask(1, 1, 1, 1, 1)])
class CondBranchesKeptVsAllRowsThenForeach(HybridBlock):
    """cond(sum > 0): the kept rows; else all rows (different sizes); then a foreach over
    the result summing a tanh recurrence."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        rows = gluon_cf.cond(F.sum(x) > 0, lambda: F.contrib.boolean_mask(x, m),
                             lambda: x * 2)
        outs, (h,) = gluon_cf.foreach(lambda r, s: (F.tanh(r + s[0]), [F.tanh(r + s[0])]),
                                      rows, [F.zeros((H,))])
        return outs, h


# ---- loops whose length comes from data; nested loops ------------------------------------------

@program([rand(3, H), floats(2, 0, 3)], [rand(3, H, seed=1), floats(0, 0, 0)],
         [rand(3, H, seed=2), floats(3, 3, 3)])
class ForeachRowsInnerWhileCountFromRow(HybridBlock):
    """A foreach over rows, each running an inner while_loop of count[r] steps (max 3)
    halving and adding its row."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, counts):
        def body(data, st):
            row, c = data

            def func(i, v):
                return [v], [i + 1, v * 0.5 + row]
            (vs,), (_, v) = gluon_cf.while_loop(lambda i, v: i < c, func,
                                                [F.zeros((1,)), st[0]], max_iterations=3)
            return [F.sum(vs, axis=0)], [v]
        (sums,), (h,) = gluon_cf.foreach(body, [x, counts], [F.zeros((H,))])
        return sums, h


@program([rand(4, H), floats(2)], [rand(4, H, seed=1), floats(0)], [rand(4, H, seed=2),
                                                                    floats(3)])
class WhileInWhileInnerForeachOverColumns(HybridBlock):
    """An outer while_loop (n steps, max 3) whose body runs a foreach over x's columns."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        def func(i, s):
            outs, (acc,) = gluon_cf.foreach(lambda c, st: (c * st[0], [st[0] + c]),
                                            F.transpose(x), [s])
            return [F.sum(outs, axis=0)], [i + 1, acc * 0.1]
        (o,), (_, s) = gluon_cf.while_loop(lambda i, s: i < n, func,
                                           [F.zeros((1,)), F.ones((4,))], max_iterations=3)
        return o, s


@program([rand(5, H), floats(0.3)], [rand(2, H, seed=1), floats(-5)],
         [rand(7, H, seed=2), floats(0.1)])
class ForeachInCondOverRunTimeRows(HybridBlock):
    """cond(threshold > 0): a foreach over the rows of run-time count keeping a running max;
    else the rows' mean repeated."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, t):
        def run():
            outs, (m,) = gluon_cf.foreach(lambda r, s: (F.maximum(r, s[0]),
                                                        [F.maximum(r, s[0])]),
                                          x, [F.ones((H,)) * -9])
            return outs
        return gluon_cf.cond(t > 0, run,
                             lambda: F.broadcast_like(F.mean(x, axis=0, keepdims=True), x))


@program([rand(6, H)], [rand(3, H, seed=1)], [rand(9, H, seed=2)])
class WhileConsumesRowsInPairsByLength(HybridBlock):
    """A while_loop reading rows two at a time while 2 i < len (max 5), slice_axis by the
    counter from a run-time length."""

    def hybrid_forward(self, F, x):
        n = F.sum(F.ones_like(F.slice_axis(x, axis=1, begin=0, end=1)))

        def func(i, s):
            pair = F.take(x, F.concat(2 * i, 2 * i + 1, dim=0), axis=0, mode="clip")
            return [F.sum(pair, axis=0)], [i + 1, s + F.sum(pair, axis=0)]
        (o,), (i, s) = gluon_cf.while_loop(lambda i, s: 2 * i < n, func,
                                           [F.zeros((1,)), F.zeros((H,))], max_iterations=5)
        return o, s, i


# ---- broadcasts and shape values ---------------------------------------------------------------

@program([rand(4, H)], [rand(7, H, seed=1)], [rand(1, H, seed=2)])
class ShapeArrayDividesByLength(HybridBlock):
    """The mean by hand: sum over rows divided by shape_array's first entry, size_array too."""

    def hybrid_forward(self, F, x):
        n = F.slice_axis(F.shape_array(x), axis=0, begin=0, end=1).astype("float32")
        return F.broadcast_div(F.sum(x, axis=0), n), F.size_array(x).astype("float32") * 1


@program([rand(4, 1), rand(1, H, seed=4)], [rand(6, 1, seed=1), rand(1, H, seed=5)],
         [rand(1, 1, seed=2), rand(1, H, seed=6)])
class BroadcastAxisLikeAndTo(HybridBlock):
    """broadcast_like over a run-time axis, broadcast_axis to a fixed size, broadcast_to
    with a 0 code."""

    def hybrid_forward(self, F, a, b):
        grid = F.broadcast_like(b, a, lhs_axes=(0,), rhs_axes=(0,))          # (n, H)
        wide = F.broadcast_axis(a, axis=1, size=H)                            # (n, H)
        return grid * wide, F.broadcast_to(a, shape=(0, 2))


@program([rand(2, 5, H)], [rand(2, 8, H, seed=1)], [rand(2, 1, H, seed=2)])
class SelfAttentionBatchDotRunTime(HybridBlock):
    """Self-attention by batch_dot over a run-time time axis, scaled by div_sqrt_dim, with a
    causal mask from arange_like."""

    def hybrid_forward(self, F, x):
        s = F.contrib.div_sqrt_dim(F.batch_dot(x, x, transpose_b=True))     # (2, n, n)
        pos = F.contrib.arange_like(x, axis=1)
        causal = F.broadcast_lesser_equal(pos.reshape((-1, 1)), pos.reshape((1, -1)))
        s = F.broadcast_add(s, (1 - F.transpose(causal)).expand_dims(0) * -1e9)
        return F.batch_dot(F.softmax(s, axis=-1), x)


@program([rand(3, 4, H)], [rand(3, 6, H, seed=1)], [rand(3, 1, H, seed=2)])
class LayerNormSwapaxesForeachOverTime(HybridBlock):
    """LayerNorm, time-major by swapaxes, a foreach over the run-time time axis with an
    LSTMCell, outputs back batch-major."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.norm = nn.LayerNorm(in_channels=H)
            self.cell = rnn.LSTMCell(H, input_size=H)

    def hybrid_forward(self, F, x):
        t = F.swapaxes(self.norm(x), 0, 1)
        outs, st = gluon_cf.foreach(lambda d, s: self.cell(d, s), t,
                                    [F.zeros((3, H)), F.zeros((3, H))])
        return F.transpose(outs, axes=(1, 0, 2)), st[0]


@program([rand(5, H)], [rand(2, H, seed=1)], [rand(8, H, seed=2)])
class SliceNegativeEndsStepsRunTime(HybridBlock):
    """slice with negative begins and ends and step -1 over run-time rows, slice_axis of the
    last two."""

    def hybrid_forward(self, F, x):
        a = F.slice(x, begin=(-1, None), end=(None, None), step=(-1, None))    # reversed
        b = F.slice_axis(x, axis=0, begin=-2, end=None)
        c = F.slice(x, begin=(1, 0), end=(-1, 2))
        return a, b, F.sum(c, axis=0)


@program([rand(4, H), ints(0, 2, 1)], [rand(6, H, seed=1), ints(5, 5, 0, 1)],
         [rand(2, H, seed=2), ints(1)])
class GatherNdRowsThenOneHotByLength(HybridBlock):
    """gather_nd of rows at int32 indices (run-time count), and one_hot of the indices with
    depth 6."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, idx):
        rows = F.gather_nd(x, idx.reshape((1, -1)))
        first = F.slice_axis(F.one_hot(idx, depth=6), axis=1, begin=0, end=1)
        return rows, F.one_hot(idx, depth=6), F.dot(first, F.slice_axis(rows, axis=0, begin=0,
                                                                         end=1))


@program([rand(3, 4)], [rand(5, 4, seed=1)], [rand(1, 4, seed=2)])
class NormsOverRunTimeAxis(HybridBlock):
    """norm (L2 over rows, L1 of columns), L2Normalization by instance, max and min over
    run-time rows with keepdims."""

    def hybrid_forward(self, F, x):
        return F.norm(x, axis=0), F.norm(x, ord=1, axis=1, keepdims=True), \
            F.L2Normalization(x, mode="instance"), F.max(x, axis=0, keepdims=True) - \
            F.min(x, axis=0, keepdims=True)


@program([rand(4, H), floats(2)], [rand(6, H, seed=1), floats(5)], [rand(3, H, seed=2),
                                                                    floats(0)])
class ArangeLikeStartStepMask(HybridBlock):
    """arange_like with start 1, step 2 over rows; rows whose value is below 2 n + 1 kept
    (boolean_mask), summed."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        pos = F.contrib.arange_like(x, start=1, step=2, axis=0)
        keep = F.broadcast_lesser(pos, 2 * n + 1)
        return F.sum(F.contrib.boolean_mask(x, keep), axis=0), pos


# ---- the same operators inside loop bodies over run-time lengths -------------------------------

@program([rand(2, 4, 1)], [rand(1, 4, 1, seed=1)], [rand(3, 4, 1, seed=2)])
class SqueezeAllInForeachBody(HybridBlock):
    """A foreach over 4 steps of (n, 1) columns, each squeezed with no axis (n = 1: to a
    (1,) value as MXNet squeezes every axis of size 1 but keeps one)."""

    def hybrid_forward(self, F, x):
        steps = F.transpose(x, axes=(1, 0, 2))                   # (4, n, 1)

        def body(c, st):
            v = F.squeeze(c)
            return [v * 2], [st[0] + F.sum(v)]
        outs, (s,) = gluon_cf.foreach(body, steps, [F.zeros((1,))])
        return outs, s


@program([rand(4, H)], [rand(6, H, seed=1)], [rand(2, H, seed=2)])
class SplitHalvesInWhileBody(HybridBlock):
    """A while_loop (2 steps) adding the second half of x's rows to the first."""

    def hybrid_forward(self, F, x):
        def func(i, s):
            a, b = F.split(s, num_outputs=2, axis=0)
            return [], [i + 1, F.concat(a + b, b * 0.5, dim=0)]
        _, (_, s) = gluon_cf.while_loop(lambda i, s: i < 2, func, [F.zeros((1,)), x],
                                        max_iterations=2)
        return s


@program([rand(3, H), rand(2, H, seed=4)], [rand(5, H, seed=1), rand(4, H, seed=5)],
         [rand(1, H, seed=2), rand(1, H, seed=6)])
class RepeatAndTileMemoryInForeach(HybridBlock):
    """A foreach over queries attending over memory repeated twice and tiled (run-time
    rows)."""

    def hybrid_forward(self, F, mem, q):
        big = F.concat(F.repeat(mem, repeats=2, axis=0), F.tile(mem, reps=(2, 1)), dim=0)

        def body(row, st):
            att = F.softmax(F.dot(big, row), axis=0)            # (4n,)
            return [F.dot(att, big)], [st[0] + F.sum(att * F.contrib.arange_like(att))]
        outs, (s,) = gluon_cf.foreach(body, q, [F.zeros((1,))])
        return outs, s


@program([rand(2, 6, 4), floats(3)], [rand(2, 10, 4, seed=1), floats(2)],
         [rand(2, 2, 4, seed=2), floats(1)])
class ReshapeCodesInWhileBody(HybridBlock):
    """A while_loop (n steps, max 3) folding the time axis in pairs and back each step."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        def func(i, s):
            pairs = s.reshape((0, -4, -1, 2, -2))                  # (2, t/2, 2, 4)
            swapped = F.reverse(pairs, axis=2).reshape((0, -3, 0))
            return [F.sum(swapped.reshape((-3, -2)), axis=0)], [i + 1, swapped * 0.9 + s]
        (o,), (_, s) = gluon_cf.while_loop(lambda i, s: i < n, func, [F.zeros((1,)), x],
                                           max_iterations=3)
        return o, s


@program([rand(5, H)], [rand(8, H, seed=1)], [rand(2, H, seed=2)])
class SortRowsInForeachOverColumns(HybridBlock):
    """A foreach over columns, each sorted (run-time length) and its argsort's first index
    taken."""

    def hybrid_forward(self, F, x):
        def body(col, st):
            srt = F.sort(col, is_ascend=False)
            first = F.take(col, F.slice_axis(F.argsort(col), axis=0, begin=0, end=1))
            return [srt, first], [st[0] + F.sum(srt * F.contrib.arange_like(srt))]
        (srt, first), (s,) = gluon_cf.foreach(body, F.transpose(x), [F.zeros((1,))])
        return srt, first, s


@program([rand(5, H), floats(3)], [rand(8, H, seed=1), floats(7)], [rand(2, H, seed=2),
                                                                    floats(1)])
class TakeWrapInWhileBody(HybridBlock):
    """A while_loop (n steps, max 4) taking row 2 i + 3 of x, wrapped (run-time rows)."""
    NO_GRAD = (1,)
    MODE, STRIDE = "wrap", 2

    def hybrid_forward(self, F, x, n):
        def func(i, s):
            row = F.take(x, self.STRIDE * i + 3, axis=0, mode=self.MODE)
            return [row], [i + 1, s + row]
        (rows,), (_, s) = gluon_cf.while_loop(lambda i, s: i < n, func,
                                              [F.zeros((1,)), F.zeros((1, H))],
                                              max_iterations=4)
        return rows, s


@program(*PROGRAMS[TakeWrapInWhileBody])
class TakeClipPastRowsInWhileBody(TakeWrapInWhileBody):
    """A while_loop (n steps, max 4) taking row i + 3 of x, clipped (run-time rows)."""
    MODE, STRIDE = "clip", 1


@program([rand(2, 5), floats(7, 2)], [rand(2, 9, seed=1), floats(7, 2)],
         [rand(2, 3, seed=2), floats(-1, 8)])
class PickWrapInForeachBody(HybridBlock):
    """A foreach over the two rows, each picking column idx (wrapped) of its row."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, idx):
        def body(data, st):
            row, i = data
            v = F.pick(row.reshape((1, -1)), i, axis=1, mode="wrap")
            return [v], [st[0] + v]
        (vs,), (s,) = gluon_cf.foreach(body, [x, idx], [F.zeros((1,))])
        return vs, s


@program([rand(3, 3), mask(1, 0, 1)], [rand(5, 3, seed=1), mask(0, 1, 1, 0, 1)],
         [rand(1, 3, seed=2), mask(1)], [rand(3, 3, seed=3), mask(0, 0, 1)])
class WhereRowsInWhileBodySquareByChance(HybridBlock):
    """A while_loop (2 steps) zeroing the rows its 1-D mask drops (n rows of width 3: at
    n = 3 a per-column mask would agree in shape)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        def func(i, s):
            return [], [i + 1, F.where(m, s * 2, F.zeros_like(s))]
        _, (_, s) = gluon_cf.while_loop(lambda i, s: i < 2, func, [F.zeros((1,)), x],
                                        max_iterations=2)
        return s


@program([rand(2, 5, H), floats(3, 5)], [rand(2, 7, H, seed=1), floats(1, 7)],
         [rand(2, 2, H, seed=2), floats(2, 1)])
class SequenceOpsInForeachOverBatch(HybridBlock):
    """A foreach over the batch, each step masking, reversing and taking the last of its
    sequence by its length (time of run-time length)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        def body(data, st):
            seq, length = data                                   # (T, H), (1,)
            seq = seq.expand_dims(1)                             # (T, 1, H)
            masked = F.SequenceMask(seq, length, use_sequence_length=True, value=-2)
            rev = F.SequenceReverse(seq, length, use_sequence_length=True)
            last = F.SequenceLast(seq, length, use_sequence_length=True)
            return [masked + rev], [st[0] + last]
        (outs,), (s,) = gluon_cf.foreach(body, [x, n], [F.zeros((1, H))])
        return outs, s


@program([rand(4, H), floats(2)], [rand(7, H, seed=1), floats(3)], [rand(1, H, seed=2),
                                                                    floats(1)])
class ShapeArrayInWhileBody(HybridBlock):
    """A while_loop (n steps) dividing by the number of rows read from shape_array."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        def func(i, s):
            rows = F.slice_axis(F.shape_array(x), axis=0, begin=0, end=1).astype("float32")
            return [], [i + 1, s + F.broadcast_div(F.sum(x, axis=0), rows)]
        _, (_, s) = gluon_cf.while_loop(lambda i, s: i < n, func,
                                        [F.zeros((1,)), F.zeros((H,))], max_iterations=3)
        return s


@program([rand(2, 4, H), floats(2)], [rand(2, 7, H, seed=1), floats(3)],
         [rand(2, 1, H, seed=2), floats(1)])
class BroadcastLikeAndSliceLikeInWhileBody(HybridBlock):
    """A while_loop whose state broadcast_like's a (1, 1, H) bias to x's run-time shape and
    slice_like's x to its own."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        def func(i, s):
            bias = F.broadcast_like(F.ones((1, 1, H)) * i, x)
            return [], [i + 1, F.slice_like(x, s) + s * 0.5 + bias]
        _, (_, s) = gluon_cf.while_loop(lambda i, s: i < n, func,
                                        [F.zeros((1,)), F.zeros_like(x)], max_iterations=3)
        return s


@program([rand(2, 6, 4)], [rand(2, 9, 4, seed=1)], [rand(2, 1, 4, seed=2)])
class FlattenInForeachOverBatch(HybridBlock):
    """A foreach over the batch flattening each (T, 4) step to (T*4,) via reshape (-1,) and
    Flatten of a (1, T, 4)."""

    def hybrid_forward(self, F, x):
        def body(seq, st):
            a = F.flatten(seq.expand_dims(0))                     # (1, T*4)
            b = seq.reshape((-1,))
            return [a.reshape((-1,)) * b], [st[0] + F.sum(b)]
        (outs,), (s,) = gluon_cf.foreach(body, x, [F.zeros((1,))])
        return outs, s


@program([rand(4, H), ints(0, 2, 1, 3)], [rand(4, H, seed=1), ints(3, 3, 3, 3)],
         [rand(4, H, seed=2), ints(1, 0, 0, 0)])
class GruDecoderTokensFromOneHotInForeach(HybridBlock):
    """A foreach over given tokens: one_hot (depth 5) times a Dense as the embedding, a
    GRUCell step, argmax's token compared to the next one."""
    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.emb = nn.Dense(H, in_units=5, use_bias=False)
            self.cell = rnn.GRUCell(H, input_size=H)
            self.out = nn.Dense(5, in_units=H)

    def hybrid_forward(self, F, x, tok):
        def body(data, st):
            row, t = data
            e = self.emb(F.one_hot(t, depth=5)) + row.reshape((1, -1))
            out, (h,) = self.cell(e, [st[0]])
            logits = self.out(out)
            return [F.pick(F.log_softmax(logits), t, axis=-1), F.argmax(logits, axis=-1)], [h]
        (lp, am), (h,) = gluon_cf.foreach(body, [x, tok], [F.zeros((1, H))])
        return lp, am, h


# ---- lengths deciding branches and bounds ------------------------------------------------------

@program([rand(6, H)], [rand(9, H, seed=1)], [rand(2, H, seed=2)], [rand(4, H, seed=3)])
class CondOnLengthTruncatesToFour(HybridBlock):
    """cond(rows > 4): the first four rows; else all (rows read from shape_array): four rows
    for every length over 4."""

    def hybrid_forward(self, F, x):
        n = F.slice_axis(F.shape_array(x), axis=0, begin=0, end=1).astype("float32")
        return gluon_cf.cond(n > 4, lambda: F.slice_axis(x, axis=0, begin=0, end=4) * 2,
                             lambda: x * 3)


@program([rand(6, H)], [rand(9, H, seed=1)], [rand(2, H, seed=2)], [rand(3, H, seed=3)])
class CondOnLengthThenForeach(HybridBlock):
    """cond(rows > 3): rows 0..3, else the rows reversed; a foreach running sum over the
    result."""

    def hybrid_forward(self, F, x):
        n = F.sum(F.ones_like(F.slice_axis(x, axis=1, begin=0, end=1)))
        rows = gluon_cf.cond(n > 3, lambda: F.slice_axis(x, axis=0, begin=0, end=3),
                             lambda: F.reverse(x, axis=0))
        outs, (s,) = gluon_cf.foreach(lambda r, st: (r + st[0], [r + st[0]]), rows,
                                      [F.zeros((H,))])
        return outs, s


@program([rand(5, 2, H)], [rand(8, 3, H, seed=1)], [rand(1, 1, H, seed=2)])
class LstmCellOverRunTimeBatchAndTime(HybridBlock):
    """An LSTMCell in foreach over (T, B, H) data, T and B of run-time size, its begin
    state zeros like the first step."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.LSTMCell(H, input_size=H)

    def hybrid_forward(self, F, x):
        zero = F.zeros_like(F.slice_axis(x, axis=0, begin=0, end=1)).reshape((-3, 0))
        outs, (h, c) = gluon_cf.foreach(lambda d, s: self.cell(d, s), x, [zero, zero])
        return F.max(outs, axis=0), h + c


@program([rand(4, H), floats(3)], [rand(7, H, seed=1), floats(5)], [rand(2, H, seed=2),
                                                                    floats(1)])
class WhileOutputsPaddedThenSequenceMask(HybridBlock):
    """A while_loop of n steps (max 5) emitting a row of memory each step; its padded
    outputs SequenceMask'ed by the step count and averaged."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, mem, n):
        def func(i, s):
            row = F.take(mem, i, axis=0)
            return [F.broadcast_mul(row, s)], [i + 1, s * 0.5]
        (rows,), (i, _) = gluon_cf.while_loop(lambda i, s: i < n, func,
                                              [F.zeros((1,)), F.ones((1,))],
                                              max_iterations=5)
        masked = F.SequenceMask(rows, i, use_sequence_length=True, value=0)
        return F.broadcast_div(F.sum(masked, axis=0), F.maximum(i, 1)), masked


@program([rand(3, 4, H), floats(2, 4, 1)], [rand(3, 6, H, seed=1), floats(6, 1, 3)],
         [rand(3, 2, H, seed=2), floats(1, 2, 2)])
class ForeachOverBatchInnerWhileOverItsLength(HybridBlock):
    """A foreach over the batch, each running a while_loop over its sequence's length
    (max 6) reading one position per step (run-time time axis)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, lengths):
        def body(data, st):
            seq, length = data

            def func(i, acc):
                return [], [i + 1, acc + F.take(seq, i, axis=0).reshape((-1,))]
            _, (_, acc) = gluon_cf.while_loop(lambda i, acc: i < length, func,
                                              [F.zeros((1,)), F.zeros((H,))],
                                              max_iterations=6)
            return [acc], [st[0] + acc]
        (accs,), (s,) = gluon_cf.foreach(body, [x, lengths], [F.zeros((H,))])
        return accs, s


@program([rand(6, H), mask(1, 1, 0, 1, 0, 1)], [rand(6, H, seed=1), mask(0, 0, 0, 0, 0, 0)],
         [rand(6, H, seed=2), mask(1, 0, 0, 0, 0, 0)])
class TopkOfMaskedScoresInCondInWhile(HybridBlock):
    """A while_loop (2 steps) whose body's cond(any kept): the kept rows' scores' top one
    (topk k=1 over a run-time length) added to the state; else the state halved."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        def func(i, s):
            def some():
                scores = F.sum(F.contrib.boolean_mask(x, m), axis=1)
                return s + F.topk(scores, k=1, ret_typ="value")
            return [], [i + 1, gluon_cf.cond(F.sum(m) > 0, some, lambda: s * 0.5)]
        _, (_, s) = gluon_cf.while_loop(lambda i, s: i < 2, func,
                                        [F.zeros((1,)), F.ones((1,))], max_iterations=2)
        return s


# ---- the same with remat ------------------------------------------------------------------------

@program([rand(6, H), mask(1, 0, 1, 1, 0, 1)], [rand(6, H, seed=1), mask(0, 0, 0, 0, 0, 0)],
         [rand(6, H, seed=2), mask(0, 0, 0, 0, 0, 1)], [rand(6, H, seed=3), mask(*[1] * 6)])
class RematWhileOverKeptRowsWithCond(HybridBlock):
    """WhileOverKeptCountCondPicksRow's loop with remat=True and a GRUCell step."""
    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.GRUCell(H, input_size=H)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        n = F.sum(m)

        def func(i, h):
            row = F.take(kept, i, axis=0).reshape((1, -1))
            out, (h2,) = self.cell(row, [h])
            v = gluon_cf.cond(F.sum(out) > 0, lambda: out, lambda: -out)
            return [v], [i + 1, h2]
        (vs,), (_, h) = gluon_cf.while_loop(lambda i, h: i < n, func,
                                            [F.zeros((1,)), F.zeros((1, H))],
                                            max_iterations=6, remat=True)
        return vs, h


@program([rand(5, H), mask(1, 0, 1, 0, 1)], [rand(5, H, seed=1), mask(0, 0, 0, 0, 1)],
         [rand(5, H, seed=2), mask(1, 1, 1, 1, 1)])
class RematForeachOverKeptRowsLstm(HybridBlock):
    """An LSTMCell in a remat foreach over the kept rows (at least one)."""
    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.LSTMCell(H, input_size=H)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m).expand_dims(1)
        outs, (h, c) = gluon_cf.foreach(lambda d, s: self.cell(d, s), kept,
                                        [F.zeros((1, H)), F.zeros((1, H))], remat=True)
        return F.sum(outs, axis=0), h * c


@program([rand(4, H), floats(2)], [rand(6, H, seed=1), floats(0)], [rand(2, H, seed=2),
                                                                    floats(3)],
         [rand(5, H, seed=3), floats(0)])
class WhileStepOutputsOfPlannedAndRunTimeShapes(HybridBlock):
    """A while_loop of n steps (max 3) emitting a row of fixed shape and the attention
    weights over memory of run-time rows (1, m); n = 0 runs no step."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, mem, n):
        def func(i, h):
            att = F.softmax(F.dot(h, mem, transpose_b=True), axis=-1)      # (1, m)
            ctx = F.dot(att, mem)                                          # (1, H)
            return [ctx, att], [i + 1, F.tanh(h + ctx)]
        (ctxs, atts), (_, h) = gluon_cf.while_loop(lambda i, h: i < n, func,
                                                   [F.zeros((1,)), F.ones((1, H)) * 0.3],
                                                   max_iterations=3)
        return ctxs, atts, h
