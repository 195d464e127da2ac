"""Hostile round 28x (issue 24): small blocks written as users port models (decoders in
while_loop and foreach, masks, conds of different-size branches, attention, ops with axis=-1
and negative indices, clip/take/where/slice/pad/topk/argmax/one_hot, the Sequence* ops,
LayerNorm, Embedding, int/float casts), each with input lists whose batch and length differ
from the first (the export example): ``tests/test_hostile28x.py`` exports them through
``export_onnx`` and ``save_artifact`` and compares with the hybridized block at every list."""
import numpy as np
from mxnet.gluon import HybridBlock, nn, rnn

import gluon_cf

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats


def ints(*values, dtype=np.int32):
    return np.array(values, dtype)


def mask(*values):
    return np.array(values, np.float32)


def seq(b, t, c=3, seed=0):
    return rand(b, t, c, seed=seed)


# ---- axis=-1 and negative indices ----------------------------------------------------------

@program([rand(2, 5), floats(-1, 2, 7)], [rand(3, 4, seed=1), floats(-1, 2, 7)],
         [rand(1, 9, seed=2), floats(-6, 0, 3)])
class TakeWrapLastAxisNegative(HybridBlock):
    def hybrid_forward(self, F, x, idx):
        return F.take(x, idx, axis=-1, mode="wrap")


@program([rand(2, 5), floats(-1, 2, 7)], [rand(3, 4, seed=1), floats(-1, 2, 7)],
         [rand(1, 9, seed=2), floats(-6, 0, 3)])
class ClipThenTakeLastAxis(HybridBlock):
    def hybrid_forward(self, F, x, idx):
        return F.take(x, F.clip(idx, -2, 3), axis=-1, mode="clip")


@program([rand(2, 5), floats(-1, 2, 7)], [rand(3, 4, seed=1), floats(-1, 2, 7)],
         [rand(1, 9, seed=2), floats(-6, 0, 3)])
class ClipToLengthThenTakeRaise(HybridBlock):
    """take (raise) of indices clipped to [0, len - 1] computed from the run-time length."""
    def hybrid_forward(self, F, x, idx):
        last = F.slice_axis(F.shape_array(x), axis=0, begin=-1, end=None).astype("float32")
        return F.take(x, F.broadcast_minimum(F.relu(idx), last - 1), axis=-1, mode="raise")


@program([rand(2, 3, 5), floats(1, 0)], [rand(3, 3, 4, seed=1), floats(2, 1, 0)],
         [rand(1, 3, 6, seed=2), floats(0)])
class PickLastAxisPerRow(HybridBlock):
    def hybrid_forward(self, F, x, idx):
        return F.pick(F.sum(x, axis=1), idx, axis=-1, mode="wrap")


@program([rand(2, 6)], [rand(4, 8, seed=1)], [rand(1, 5, seed=2)])
class SliceAxisNegativeBounds(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.slice_axis(x, axis=-1, begin=-4, end=-1) * 2


@program([rand(2, 6)], [rand(4, 8, seed=1)], [rand(1, 5, seed=2)])
class SliceNegativeBeginNoneEnd(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.slice(x, begin=(None, -3), end=(None, None))


@program([rand(2, 6)], [rand(4, 8, seed=1)], [rand(1, 7, seed=2)])
class SliceStepMinusOne(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.slice(x, begin=(None, -2), end=(None, 0), step=(1, -1))


@program([rand(2, 6)], [rand(4, 8, seed=1)], [rand(1, 5, seed=2)])
class ReverseLastAxisThenCumulativeMax(HybridBlock):
    def hybrid_forward(self, F, x):
        r = F.reverse(x, axis=1)
        return F.broadcast_maximum(r, F.max(r, axis=-1, keepdims=True) * 0.5)


@program([rand(2, 3, 6)], [rand(4, 3, 8, seed=1)], [rand(1, 3, 5, seed=2)])
class SplitLastAxisSqueeze(HybridBlock):
    def hybrid_forward(self, F, x):
        a, b, c = F.split(x, num_outputs=3, axis=1, squeeze_axis=True)
        return a * b - c


@program([rand(2, 6)], [rand(4, 8, seed=1)], [rand(1, 5, seed=2)])
class SwapaxesThenNegativeAxisSum(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.sum(F.swapaxes(F.expand_dims(x, -1), 0, 2), axis=-2)


# ---- clip, where, pad, topk, argmax, one_hot ------------------------------------------------

@program([rand(2, 5)], [rand(4, 7, seed=1)], [rand(1, 3, seed=2)])
class WhereAgainstZerosLike(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.sum(F.where(x > 0.2, x, F.zeros_like(x) - 1), axis=-1)


@program([rand(2, 5)], [rand(4, 7, seed=1)], [rand(1, 3, seed=2)])
class WhereOfRowConditionBroadcast(HybridBlock):
    def hybrid_forward(self, F, x):
        cond = F.sum(x, axis=-1) > 0
        return F.where(cond, F.max(x, axis=-1), F.min(x, axis=-1))


@program([rand(1, 2, 4, 5)], [rand(2, 2, 6, 3, seed=1)], [rand(3, 2, 1, 7, seed=2)])
class PadReflectSpatial(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.pad(x, mode="edge", pad_width=(0, 0, 0, 0, 1, 2, 2, 1))


@program([rand(1, 2, 4, 5)], [rand(2, 2, 6, 3, seed=1)], [rand(3, 2, 1, 7, seed=2)])
class PadConstantValue(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.pad(x, mode="constant", constant_value=-2, pad_width=(0, 0, 0, 0, 0, 1, 3, 0))


@program([rand(2, 6)], [rand(4, 8, seed=1)], [rand(1, 5, seed=2)])
class TopkBothLastAxis(HybridBlock):
    def hybrid_forward(self, F, x):
        values, idx = F.topk(x, k=3, axis=-1, ret_typ="both")
        return values, idx, F.take(x, idx.astype("int32"), axis=-1, mode="clip")


@program([rand(2, 6)], [rand(4, 8, seed=1)], [rand(1, 5, seed=2)])
class TopkMaskAscending(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.topk(x, k=2, axis=-1, ret_typ="mask", is_ascend=True) * x


@program([rand(2, 6)], [rand(4, 6, seed=1)], [rand(1, 6, seed=2)])
class ArgmaxOneHot(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.one_hot(F.argmax(x, axis=-1), depth=6, on_value=2, off_value=-1)


@program([floats(0, 3, 2)], [floats(1, 1, 4, 0, 2)], [floats(4)])
class OneHotOfFloatIndicesOutOfRange(HybridBlock):
    def hybrid_forward(self, F, idx):
        return F.one_hot(idx, depth=4)


@program([rand(2, 6)], [rand(4, 8, seed=1)], [rand(1, 5, seed=2)])
class ArgmaxArgminTie(HybridBlock):
    def hybrid_forward(self, F, x):
        r = F.round(x * 2)
        return F.argmax(r, axis=-1), F.argmin(r, axis=0, keepdims=True)


@program([rand(2, 6)], [rand(4, 8, seed=1)], [rand(1, 5, seed=2)])
class SortArgsortDescending(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.sort(x, axis=-1, is_ascend=False), F.argsort(x, axis=0, dtype="int32")


@program([rand(2, 6)], [rand(4, 8, seed=1)], [rand(1, 5, seed=2)])
class LogSumExpLastAxis(HybridBlock):
    def hybrid_forward(self, F, x):
        m = F.max(x, axis=-1, keepdims=True)
        return F.log(F.sum(F.exp(F.broadcast_sub(x, m)), axis=-1)) + F.reshape(m, (-1,))


@program([rand(2, 6), floats(1, 3)], [rand(4, 6, seed=1), floats(0, 5, 2, 1)],
         [rand(1, 6, seed=2), floats(4)])
class CrossEntropyPickLabel(HybridBlock):
    def hybrid_forward(self, F, x, label):
        return -F.pick(F.log_softmax(x, axis=-1), label, axis=-1, keepdims=True)


# ---- dtypes ---------------------------------------------------------------------------------

@program([rand(2, 5, high=4)], [rand(4, 7, seed=1, high=4)], [rand(1, 3, seed=2, high=4)])
class IntCastModuloFloorDiv(HybridBlock):
    def hybrid_forward(self, F, x):
        i = (x * 3).astype("int32")
        return (i % 4).astype("float32") + F.floor(i.astype("float32") / 3)


@program([ints(3, -2, 7)], [ints(0, 9, -5, 2, 1)], [ints(4)])
class Int32ClipAndScale(HybridBlock):
    def hybrid_forward(self, F, i):
        return F.clip(i, -1, 4) * 3, (F.clip(i, 0, 5).astype("float32") / 2).astype("int32")


@program([ints(3, 2, 7, dtype=np.int64)], [ints(0, 9, 5, 2, 1, dtype=np.int64)],
         [ints(4, dtype=np.int64)])
class Int64EmbeddingLookup(HybridBlock):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)

    def hybrid_forward(self, F, i):
        return self.embed(i.astype("float32"))


@program([rand(2, 5)], [rand(4, 7, seed=1)], [rand(1, 3, seed=2)])
class Float16RoundTrip(HybridBlock):
    TOL = (1e-2, 1e-2)

    def hybrid_forward(self, F, x):
        return (x.astype("float16") * 3).astype("float32") + x


@program([rand(2, 5)], [rand(4, 7, seed=1)], [rand(1, 3, seed=2)])
class ShapeArrayAsDivisor(HybridBlock):
    def hybrid_forward(self, F, x):
        n = F.slice_axis(F.shape_array(x), axis=0, begin=-1, end=None).astype("float32")
        return F.broadcast_div(F.sum(x, axis=-1), n)


@program([rand(2, 5)], [rand(4, 7, seed=1)], [rand(1, 3, seed=2)])
class ArangeLikeLastAxisWeights(HybridBlock):
    def hybrid_forward(self, F, x):
        pos = F.contrib.arange_like(x, axis=-1)
        return F.broadcast_mul(x, F.expand_dims(pos, 0))


# ---- Sequence* ops, LayerNorm, Embedding ----------------------------------------------------

@program([seq(4, 2), floats(2, 4)], [seq(6, 3, seed=1), floats(1, 6, 3)],
         [seq(1, 1, seed=2), floats(1)])
class SequenceMaskThenSoftmaxOverTime(HybridBlock):
    def hybrid_forward(self, F, x, lengths):
        masked = F.SequenceMask(x, sequence_length=lengths, use_sequence_length=True,
                                value=-1e4)
        return F.softmax(masked, axis=0)


@program([seq(4, 2), floats(2, 4)], [seq(6, 3, seed=1), floats(1, 6, 3)],
         [seq(1, 1, seed=2), floats(1)])
class SequenceReverseAndLast(HybridBlock):
    def hybrid_forward(self, F, x, lengths):
        rev = F.SequenceReverse(x, sequence_length=lengths, use_sequence_length=True)
        return rev, F.SequenceLast(x, sequence_length=lengths, use_sequence_length=True)


@program([seq(2, 4), floats(2, 4)], [seq(3, 6, seed=1), floats(1, 6, 3)],
         [seq(1, 1, seed=2), floats(1)])
class SequenceMaskBatchMajorAxis1(HybridBlock):
    def hybrid_forward(self, F, x, lengths):
        return F.SequenceMask(x, sequence_length=lengths, use_sequence_length=True, axis=1)


@program([seq(2, 4)], [seq(3, 6, seed=1)], [seq(1, 1, seed=2)])
class LayerNormLastAxis(HybridBlock):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(in_channels=3)

    def hybrid_forward(self, F, x):
        return self.norm(x)


@program([seq(2, 4)], [seq(3, 6, seed=1)], [seq(1, 1, seed=2)])
class LayerNormAxisOne(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.LayerNorm(F.swapaxes(x, 1, 2), F.ones((3,)), F.zeros((3,)), axis=1)


@program([floats(1, 4, 2), floats(3)], [floats(0, 9, 5, 2, 1), floats(5)],
         [floats(7), floats(1)])
class EmbeddingMeanOverLength(HybridBlock):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)

    def hybrid_forward(self, F, tokens, n):
        return F.broadcast_div(F.sum(self.embed(tokens), axis=0, keepdims=True), n)


# ---- attention ----------------------------------------------------------------------------

@program([seq(2, 4, 4), floats(4, 2)], [seq(3, 6, 4, seed=1), floats(1, 6, 3)],
         [seq(1, 1, 4, seed=2), floats(1)])
class MaskedDotAttention(HybridBlock):
    def hybrid_forward(self, F, x, lengths):
        scores = F.batch_dot(x, x, transpose_b=True) / 2.0     # (b, t, t)
        masked = F.SequenceMask(F.transpose(scores, (2, 0, 1)), sequence_length=lengths,
                                use_sequence_length=True, value=-1e9)
        weights = F.softmax(F.transpose(masked, (1, 2, 0)), axis=-1)
        return F.batch_dot(weights, x)


@program([seq(2, 4, 4), floats(4, 2)], [seq(3, 6, 4, seed=1), floats(1, 6, 3)],
         [seq(1, 1, 4, seed=2), floats(1)])
class SoftmaxUseLengthAttention(HybridBlock):
    def hybrid_forward(self, F, x, lengths):
        scores = F.batch_dot(x, x, transpose_b=True)
        full = F.broadcast_like(F.expand_dims(lengths, 1), F.sum(scores, axis=-1))
        weights = F.softmax(scores, full.astype("int32"), axis=-1, use_length=True)
        return F.batch_dot(weights, x)


@program([seq(2, 4, 4)], [seq(3, 6, 4, seed=1)], [seq(1, 1, 4, seed=2)])
class AttentionInForeachOverTime(HybridBlock):
    """Per step t, attend from x[:, t] over all steps; steps are x's axis 1."""
    def hybrid_forward(self, F, x):
        def step(q, s):
            w = F.softmax(F.batch_dot(x, F.expand_dims(q, 2)), axis=1)   # (b, t, 1)
            return F.sum(F.broadcast_mul(w, x), axis=1), s
        outs, _ = gluon_cf.foreach(step, F.swapaxes(x, 0, 1), [F.zeros((1,))])
        return outs


# ---- loops ----------------------------------------------------------------------------------

@program([seq(3, 2)], [seq(5, 4, seed=1)], [seq(1, 1, seed=2)])
class ForeachRnnDenseCell(HybridBlock):
    def __init__(self):
        super().__init__()
        self.cell = nn.Dense(3, in_units=6, flatten=False)

    def hybrid_forward(self, F, x):
        def step(xt, states):
            h = F.tanh(self.cell(F.concat(xt, states[0], dim=-1)))
            return h, [h]
        outs, last = gluon_cf.foreach(step, x, [F.zeros_like(F.sum(x, axis=0))])
        return outs, last[0]


@program([seq(3, 2), floats(3, 1)], [seq(5, 4, seed=1), floats(2, 5, 1, 4)],
         [seq(1, 1, seed=2), floats(1)])
class ForeachMaskedStateUpdate(HybridBlock):
    """Mean over valid steps: the state updates only where t < length."""
    def hybrid_forward(self, F, x, lengths):
        t = F.contrib.arange_like(x, axis=0)

        def step(data, states):
            xt, tt = data
            keep = F.expand_dims(F.broadcast_lesser(tt, lengths), -1)
            total = states[0] + F.broadcast_mul(xt, keep)
            return total, [total]
        _, (total,) = gluon_cf.foreach(step, [x, t], [F.zeros_like(F.sum(x, axis=0))])
        return F.broadcast_div(total, F.expand_dims(lengths, -1))


@program([seq(3, 2)], [seq(5, 4, seed=1)], [seq(1, 1, seed=2)])
class ForeachOverReversedSequence(HybridBlock):
    def hybrid_forward(self, F, x):
        outs, _ = gluon_cf.foreach(lambda xt, s: (xt + s[0], [s[0] + xt]),
                                   F.reverse(x, axis=0), [F.zeros_like(F.sum(x, axis=0))])
        return F.reverse(outs, axis=0)


@program([seq(3, 2)], [seq(5, 4, seed=1)], [seq(1, 1, seed=2)])
class NestedForeachRowsThenColumns(HybridBlock):
    def hybrid_forward(self, F, x):
        def row(xt, s):
            inner, _ = gluon_cf.foreach(lambda v, t: (F.broadcast_add(v * 2, t[0]), [t[0] + 1]), xt,
                                        [F.zeros((1,))])
            return F.sum(inner, axis=0), s
        outs, _ = gluon_cf.foreach(row, x, [F.zeros((1,))])
        return outs


@program([rand(2, 5)], [rand(4, 7, seed=1)], [rand(1, 3, seed=2)])
class WhileCountAboveThresholdDynamicWidth(HybridBlock):
    """Steps until the running row sum passes a threshold (data-dependent), width dynamic."""
    def hybrid_forward(self, F, x):
        row = F.sum(F.abs(x), axis=0)

        def body(i, acc):
            value = F.take(row, i, mode="clip")
            return F.broadcast_mul(F.ones_like(row), value), [i + 1, acc + value]
        outs, (i, acc) = gluon_cf.while_loop(lambda i, acc: acc < 1.5, body,
                                             [F.zeros((1,)), F.zeros((1,))],
                                             max_iterations=6)
        return outs, i, acc


@program([rand(2, 5)], [rand(4, 7, seed=1)], [rand(1, 3, seed=2)])
class WhileExactLengthOverColumns(HybridBlock):
    def hybrid_forward(self, F, x):
        n = F.slice_axis(F.shape_array(x), axis=0, begin=-1, end=None).astype("float32")

        def body(i, s):
            col = F.take(x, i, axis=-1, mode="raise")
            return col * 2, [i + 1, s + F.sum(col)]
        outs, (_, s) = gluon_cf.while_loop(lambda i, s: i < n, body,
                                           [F.zeros((1,)), F.zeros((1,))])
        return outs, s


@program([rand(2, 5), mask(1, 0)], [rand(4, 7, seed=1), mask(0, 0, 0, 0)],
         [rand(3, 3, seed=2), mask(1, 1, 1)], [rand(1, 4, seed=3), mask(0)])
class WhileOverKeptRowsTakeRaise(HybridBlock):
    """Open item 1: a loop of no step with step shapes of a dynamic axis."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m).reshape((1,))
        outs, _ = gluon_cf.while_loop(
            lambda i: i < count, lambda i: (F.take(kept, i, mode="raise") * 2, [i + 1]),
            [F.zeros((1,))], max_iterations=4)
        return outs


@program([rand(2, 5), mask(1, 0)], [rand(4, 7, seed=1), mask(0, 0, 0, 0)],
         [rand(3, 3, seed=2), mask(1, 1, 1)], [rand(1, 4, seed=3), mask(0)])
class WhileOverKeptRowsTwoStepOutputs(HybridBlock):
    """Two step outputs, one of a sum of the kept row's width, one of the row itself."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m).reshape((1,))

        def body(i, acc):
            r = F.take(kept, i, mode="raise")
            return [F.concat(r, r, dim=-1), F.sum(r, axis=-1)], [i + 1, acc + F.sum(r)]
        outs, (_, acc) = gluon_cf.while_loop(lambda i, acc: i < count, body,
                                             [F.zeros((1,)), F.zeros((1,))],
                                             max_iterations=3)
        return outs[0], outs[1], acc


@program([rand(3, 4), floats(2)], [rand(5, 6, seed=1), floats(0)],
         [rand(2, 3, seed=2), floats(5)])
class WhileNoStepPossibleReadsInputRow(HybridBlock):
    """A loop of no step (n = 0) whose step reads a row of x (dynamic width)."""
    def hybrid_forward(self, F, x, n):
        def body(i):
            return F.broadcast_add(F.take(x, i, mode="clip"), i), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < n, body, [F.zeros((1,))],
                                      max_iterations=3)
        return outs


@program([rand(3, 4), floats(2)], [rand(5, 6, seed=1), floats(0)],
         [rand(2, 3, seed=2), floats(5)])
class WhileNoStepStepOfTwiceTheWidth(HybridBlock):
    """A step output whose width follows no input dim (2 * width)."""
    def hybrid_forward(self, F, x, n):
        def body(i):
            r = F.take(x, i, mode="clip")
            return F.concat(r, r, dim=-1), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < n, body, [F.zeros((1,))],
                                      max_iterations=3)
        return outs


@program([rand(3, 4)], [rand(5, 6, seed=1)], [rand(1, 3, seed=2)])
class GreedyDecoderEmbeddingArgmax(HybridBlock):
    """A seq2seq decoder: feed back argmax through an embedding until token 0 or 5 steps."""
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(6, 4)
        self.proj = nn.Dense(6, in_units=4)

    def hybrid_forward(self, F, x):
        h0 = F.mean(x, axis=0, keepdims=True)            # (1, w)
        h0 = F.slice_axis(F.concat(h0, F.zeros((1, 4)), dim=-1), axis=-1, begin=0, end=4)

        def body(tok, h, done):
            h = F.tanh(h + self.embed(tok))
            logits = self.proj(h)
            nxt = F.argmax(logits, axis=-1)
            return [nxt, logits], [nxt, h, (nxt == 0)]
        outs, (tok, h, _) = gluon_cf.while_loop(
            lambda tok, h, done: F.sum(done) < 1, body,
            [F.ones((1,)), h0, F.zeros((1,))], max_iterations=5)
        return outs[0], outs[1], h


@program([seq(2, 3), floats(1, 2, 0)], [seq(4, 5, seed=1), floats(3, 0, 1, 2, 2)],
         [seq(1, 1, seed=2), floats(0)])
class GruCellDecoderForeachWithLengths(HybridBlock):
    def __init__(self):
        super().__init__()
        self.cell = rnn.GRUCell(4, input_size=3)

    def hybrid_forward(self, F, x, lengths):
        t = F.contrib.arange_like(x, axis=0)

        def step(data, states):
            xt, tt = data
            out, new = self.cell(xt, states)
            keep = F.expand_dims(F.broadcast_lesser(tt, lengths), -1)
            h = F.where(F.broadcast_like(keep, new[0]), new[0], states[0])
            return out * F.broadcast_like(keep, out), [h]
        outs, (h,) = gluon_cf.foreach(step, [x, t], self._begin(F, x))
        return outs, h

    def _begin(self, F, x):
        return [F.zeros_like(F.slice_axis(F.sum(x, axis=0), axis=-1, begin=0, end=1)).tile(
            (1, 4))]


# ---- cond ---------------------------------------------------------------------------------

@program([rand(3, 4)], [rand(5, 6, seed=1, low=0)], [rand(2, 3, seed=2, high=0)])
class CondDifferentSizeBranchesThenSum(HybridBlock):
    def hybrid_forward(self, F, x):
        y = gluon_cf.cond(F.sum(x) > 0, lambda: F.slice_axis(x, axis=0, begin=0, end=1) * 2,
                          lambda: F.concat(x, x, dim=0))
        return F.sum(y, axis=0)


@program([rand(3, 4)], [rand(5, 6, seed=1, low=0)], [rand(2, 3, seed=2, high=0)])
class CondDifferentSizeThenForeach(HybridBlock):
    def hybrid_forward(self, F, x):
        y = gluon_cf.cond(F.sum(x) > 0, lambda: F.slice_axis(x, axis=0, begin=0, end=1),
                          lambda: F.concat(x, x * 2, dim=0))
        outs, (s,) = gluon_cf.foreach(lambda r, st: (F.broadcast_mul(r, st[0]), [st[0] + 1]), y,
                                      [F.ones((1,))])
        return outs, s


@program([rand(3, 4)], [rand(5, 6, seed=1, low=0)], [rand(2, 3, seed=2, high=0)])
class CondInsideForeachRowSign(HybridBlock):
    def hybrid_forward(self, F, x):
        def step(r, s):
            v = gluon_cf.cond(F.sum(r) > 0, lambda: r * 2, lambda: -r)
            return v, [s[0] + F.sum(v)]
        outs, (s,) = gluon_cf.foreach(step, x, [F.zeros((1,))])
        return outs, s


@program([rand(3, 4), mask(1, 0, 1)], [rand(5, 6, seed=1), mask(0, 0, 0, 0, 0)],
         [rand(2, 3, seed=2), mask(1, 1)])
class CondOnKeptCount(HybridBlock):
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        return gluon_cf.cond(F.sum(m) > 0, lambda: F.sum(kept, axis=0, keepdims=True),
                             lambda: F.zeros_like(F.slice_axis(x, axis=0, begin=0, end=1)))


# ---- boolean masks -------------------------------------------------------------------------

@program([rand(3, 4), mask(1, 0, 1)], [rand(5, 6, seed=1), mask(0, 1, 1, 0, 1)],
         [rand(2, 3, seed=2), mask(1, 1)])
class BooleanMaskRowsNormalize(HybridBlock):
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        return F.broadcast_div(kept, F.sum(F.abs(kept), axis=-1, keepdims=True) + 1)


@program([rand(3, 4), mask(1, 0, 1)], [rand(5, 6, seed=1), mask(0, 1, 1, 0, 1)],
         [rand(2, 3, seed=2), mask(1, 1)])
class BooleanMaskThenForeachKept(HybridBlock):
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        outs, (s,) = gluon_cf.foreach(lambda r, st: (F.broadcast_add(r, st[0]), [st[0] + F.sum(r)]),
                                      kept,
                                      [F.zeros((1,))])
        return outs, s


@program([rand(3, 4), mask(1, 0, 1)], [rand(5, 6, seed=1), mask(0, 1, 1, 0, 1)],
         [rand(2, 3, seed=2), mask(1, 1)])
class BooleanMaskTakeLastKept(HybridBlock):
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        return F.take(kept, F.sum(m).reshape((1,)) - 1, mode="clip")


@program([rand(3, 4), mask(1, 0, 1)], [rand(5, 6, seed=1), mask(0, 1, 1, 0, 1)],
         [rand(2, 3, seed=2), mask(1, 1)])
class BooleanMaskColumnsViaTranspose(HybridBlock):
    def hybrid_forward(self, F, x, m):
        cols = F.contrib.boolean_mask(F.transpose(F.slice_axis(x, axis=-1, begin=0, end=3)),
                                      F.slice_axis(F.concat(m, m, m, dim=0), 0, 0, 3))
        return F.transpose(cols) * 3


@program([rand(3, 4)], [rand(5, 6, seed=1)], [rand(2, 3, seed=2)])
class BooleanMaskOfPositiveRowsInWhile(HybridBlock):
    def hybrid_forward(self, F, x):
        def body(i, s):
            kept = F.contrib.boolean_mask(x, F.broadcast_greater(F.sum(x, axis=-1), i * 0.1))
            return F.sum(kept, axis=0, keepdims=True), [i + 1, s + F.sum(kept)]
        outs, (_, s) = gluon_cf.while_loop(lambda i, s: i < 2, body,
                                           [F.zeros((1,)), F.zeros((1,))], max_iterations=2)
        return outs, s


# ---- reshapes, broadcasts, convolutions -----------------------------------------------------

@program([seq(2, 4)], [seq(3, 6, seed=1)], [seq(1, 1, seed=2)])
class ReshapeSpecialCodes(HybridBlock):
    def hybrid_forward(self, F, x):
        y = F.reshape(x, (0, -3))                        # (b, t * c)
        return F.reshape(y, (-4, 1, -1, -2)), F.reshape(x, (-1, 0), reverse=True)


@program([seq(2, 4)], [seq(3, 6, seed=1)], [seq(1, 1, seed=2)])
class BroadcastLikeAxesAndTile(HybridBlock):
    def hybrid_forward(self, F, x):
        first = F.slice_axis(x, axis=1, begin=0, end=1)
        return F.broadcast_like(first, x, lhs_axes=(1,), rhs_axes=(1,)) - x, \
            F.tile(first, (1, 2, 1)), F.repeat(first, repeats=2, axis=-1)


@program([seq(2, 6)], [seq(3, 9, seed=1)], [seq(1, 4, seed=2)])
class Conv1dGlobalPoolOverLength(HybridBlock):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1D(2, 3, padding=1, in_channels=3)

    def hybrid_forward(self, F, x):
        x = F.swapaxes(x, 1, 2)
        return F.max(F.relu(self.conv(x)), axis=-1)


@program([seq(2, 4)], [seq(3, 6, seed=1)], [seq(1, 1, seed=2)])
class NormAndL2Normalization(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.norm(x, axis=-1), F.L2Normalization(x, mode="spatial")


@program([rand(3, 4), floats(0, 2, 1)], [rand(5, 6, seed=1), floats(4, 0)],
         [rand(2, 3, seed=2), floats(1)])
class GatherNdRows(HybridBlock):
    def hybrid_forward(self, F, x, rows):
        return F.gather_nd(x, F.expand_dims(rows, 0))


@program([rand(3, 4), floats(0, 2), rand(2, 4, seed=5)],
         [rand(5, 6, seed=1), floats(4, 0), rand(2, 6, seed=6)],
         [rand(2, 3, seed=2), floats(1), rand(1, 3, seed=7)])
class IndexCopyRows(HybridBlock):
    def hybrid_forward(self, F, x, rows, new):
        return F.contrib.index_copy(x, rows, new)


# ---- zero-size ------------------------------------------------------------------------------

@program([rand(3, 4)], [rand(5, 6, seed=1)], [rand(2, 3, seed=2)])
class SliceOfAllButLastRowSummed(HybridBlock):
    """Rows 0..n-2 (none at n = 1: MXNet's zero-size limit)."""
    def hybrid_forward(self, F, x):
        return F.sum(F.slice_axis(x, axis=0, begin=0, end=-1), axis=0)


@program([rand(2, 5), ints(-1, 2, 7)], [rand(3, 4, seed=1), ints(-1, 2, 7)],
         [rand(1, 9, seed=2), ints(-6, 0, 3)])
class ClipInt32ThenTakeLastAxis(HybridBlock):
    def hybrid_forward(self, F, x, idx):
        return F.take(x, F.clip(idx, 0, 3), axis=-1), F.take(x, F.clip(idx, -2, 9), axis=-1,
                                                             mode="wrap")


@program([rand(2, 3, 5), ints(-1, 2, 7, dtype=np.int64)],
         [rand(3, 2, 4, seed=1), ints(-1, 2, 7, dtype=np.int64)],
         [rand(1, 1, 9, seed=2), ints(-6, 0, 3, dtype=np.int64)])
class ClipInt64ThenTakeLastAxisIn3d(HybridBlock):
    def hybrid_forward(self, F, x, idx):
        return F.take(x, F.clip(idx, -1, 4), axis=-1, mode="clip")


# ---- recursive tree models -------------------------------------------------------------------

def _forest(trees, seed, features=3):
    from hostile_programs17b import forest
    return forest(trees, seed=seed, features=features)


_BAL = ((None, None), (None, (None, None)))
TREES = (_forest([_BAL, (None, None)], 281), _forest([None, None], 282),
         _forest([((None, None), None), (None, (None, None))], 283, features=3))
WIDE_TREES = (_forest([_BAL], 284, features=5), _forest([None, (None, None)], 285, features=5))


@program(*TREES)
class TreeMaxPoolClipTakeLastAxis(HybridBlock):
    """A recursive max-pool over a tree; each node reads the feature its own value picks
    (clip then take along axis -1)."""
    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            row = F.take(x, i)                                      # (1, c)
            pick = F.clip(F.floor(F.abs(row) * 5), 0, 2)            # (1, c) in 0..2
            own = F.take(row, pick, axis=-1, mode="clip").reshape((1, -1))

            def internal():
                return F.maximum(node(F.take(left, i)), node(F.take(right, i))) + own
            return gluon_cf.cond(F.take(left, i) < 0, lambda: own, internal)
        outs, _ = gluon_cf.foreach(lambda r, _: (node(r.reshape((1,))), []), roots, [])
        return outs


@program(*TREES)
class TreeSoftmaxAttentionOverChildren(HybridBlock):
    """Each internal node attends over its two children (softmax along axis -1)."""
    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            own = F.take(x, i)

            def internal():
                a, b = node(F.take(left, i)), node(F.take(right, i))
                w = F.softmax(F.concat(F.sum(a * own, axis=-1, keepdims=True),
                                       F.sum(b * own, axis=-1, keepdims=True), dim=-1),
                              axis=-1)
                return F.broadcast_mul(F.slice_axis(w, axis=-1, begin=0, end=1), a) + \
                    F.broadcast_mul(F.slice_axis(w, axis=-1, begin=-1, end=None), b)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.tanh(own), internal)
        outs, _ = gluon_cf.foreach(lambda r, _: (node(r.reshape((1,))), []), roots, [])
        return outs


@program(*WIDE_TREES)
class TreeArgmaxOneHotVote(HybridBlock):
    """Leaves vote one_hot(argmax) of their features; internal nodes add their children's."""
    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            def leaf():
                return F.one_hot(F.argmax(F.take(x, i), axis=-1), depth=5)

            def internal():
                return node(F.take(left, i)) + node(F.take(right, i))
            return gluon_cf.cond(F.take(left, i) < 0, leaf, internal)
        outs, _ = gluon_cf.foreach(lambda r, _: (node(r.reshape((1,))), []), roots, [])
        return outs


# ---- rounding, integer arithmetic, index edge cases ----------------------------------------

@program([floats(0.5, 1.5, 2.5, -0.5, -1.5, 0.49)], [floats(-2.5, 3.5, 0.51)], [floats(4.5)])
class RoundRintFixHalves(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.round(x), F.rint(x), F.fix(x), F.trunc(x), F.ceil(x - 0.5)


@program([ints(7, -7, 5, -5, 0), ints(2, 2, -3, -3, 4)], [ints(9, -1), ints(-4, 4)],
         [ints(0), ints(1)])
class Int32ModAndDivNegative(HybridBlock):
    def hybrid_forward(self, F, a, b):
        return F.broadcast_mod(a, b), F.broadcast_div(a, b), (a.astype("float32") / 2)


@program([floats(0, 3, -1, 2)], [floats(-2, 1)], [floats(5)])
class OneHotNegativeIndex(HybridBlock):
    def hybrid_forward(self, F, idx):
        return F.one_hot(idx, depth=4), F.one_hot(idx.astype("int32"), depth=3, dtype="int32")


@program([floats(1, 4, 2), floats(3)], [floats(0, 12, -1, 2, 1), floats(5)],
         [floats(9), floats(1)])
class EmbeddingIndexOutOfRange(HybridBlock):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 2)

    def hybrid_forward(self, F, tokens, n):
        return self.embed(tokens)


@program([rand(2, 3, 4), floats(-1, 5)], [rand(3, 3, 6, seed=1), floats(-7, 0, 9)],
         [rand(1, 3, 2, seed=2), floats(3)])
class PickClipNegativeIndex(HybridBlock):
    def hybrid_forward(self, F, x, idx):
        s = F.sum(x, axis=1)
        return F.pick(s, idx, axis=-1, mode="clip"), F.pick(s, idx, axis=1, keepdims=True,
                                                            mode="wrap")


@program([seq(4, 2), floats(0, 4)], [seq(6, 3, seed=1), floats(1, 0, 3)],
         [seq(1, 1, seed=2), floats(1)])
class SequenceReverseZeroLength(HybridBlock):
    """(SequenceLast of a length 0 reads MXNet's memory before the array: not compared.)"""
    def hybrid_forward(self, F, x, lengths):
        return F.SequenceReverse(x, sequence_length=lengths, use_sequence_length=True)


@program([rand(1, 5)], [rand(4, 5, seed=1)], [rand(3, 5, seed=2)])
class ExampleOfBatchOneBroadcastsAgainstRows(HybridBlock):
    """Exported at batch 1: a mean over the batch broadcast back against it."""
    def hybrid_forward(self, F, x):
        mean = F.mean(x, axis=0, keepdims=True)
        return F.broadcast_sub(x, mean), F.broadcast_mul(F.sum(x, axis=0), x)


@program([rand(3, 1)], [rand(3, 4, seed=1)], [rand(3, 2, seed=2)])
class ExampleOfWidthOneReshapeAndSqueeze(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.reshape(x, (-1,)), F.sum(F.expand_dims(x, -1), axis=-1), \
            F.reshape(x, (0, -1, 1)).squeeze(axis=-1)


@program([rand(1, 1, 3)], [rand(2, 5, 3, seed=1)], [rand(3, 2, 3, seed=2)])
class ExampleOfOneStepForeach(HybridBlock):
    def hybrid_forward(self, F, x):
        outs, (s,) = gluon_cf.foreach(lambda r, st: (r * 2, [st[0] + r]), x,
                                      [F.zeros_like(F.sum(x, axis=0))])
        return outs, s


@program([rand(3, 4)], [rand(1, 4, seed=1)], [rand(5, 4, seed=2)])
class SplitIntoTwoAlongLengthOdd(HybridBlock):
    """split of a dynamic axis in 2: MXNet refuses an odd length (and the example is 3)."""
    def hybrid_forward(self, F, x):
        a, b = F.split(F.concat(x, x, dim=0), num_outputs=2, axis=0)
        return a - b


@program([rand(2, 4)], [rand(3, 6, seed=1)], [rand(1, 2, seed=2)])
class TopkLargerThanSomeLengths(HybridBlock):
    """topk k=2: a length of 2 keeps everything."""
    def hybrid_forward(self, F, x):
        return F.topk(x, k=2, axis=-1, ret_typ="value")


@program([rand(2, 6)], [rand(3, 9, seed=1)], [rand(1, 3, seed=2)])
class ReshapeLikeAndStackLastAxis(HybridBlock):
    def hybrid_forward(self, F, x):
        y = F.reshape_like(F.reshape(x, (-1,)), x)
        return F.stack(x, y * 2, axis=-1), F.concat(x, y, dim=-1)


@program([rand(2, 3, 4)], [rand(3, 2, 6, seed=1)], [rand(1, 1, 2, seed=2)])
class TransposeDefaultAndMeanOverTwoNegativeAxes(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.transpose(x), F.mean(x, axis=(-1, -2)), F.sum(x, axis=1, exclude=True)


@program([rand(2, 6)], [rand(3, 9, seed=1)], [rand(1, 3, seed=2)])
class BroadcastToZeroCodeAndExpandNegative(HybridBlock):
    def hybrid_forward(self, F, x):
        col = F.expand_dims(F.sum(x, axis=-1), axis=-1)      # (b, 1)
        return F.broadcast_to(col, shape=(0, 4)), F.broadcast_axis(col, axis=1, size=3)


@program([rand(2, 6)], [rand(3, 9, seed=1)], [rand(1, 3, seed=2)])
class SmoothL1NormOrd1SoftmaxTemperature(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.smooth_l1(x * 3, scalar=1.0), F.norm(x, ord=1, axis=-1), \
            F.softmax(x, axis=-1, temperature=0.5)


@program([rand(2, 6)], [rand(3, 9, seed=1)], [rand(1, 3, seed=2)])
class SliceEndPastLengthClipped(HybridBlock):
    """slice with an end past the run-time length (MXNet clips it to the length)."""
    def hybrid_forward(self, F, x):
        return F.slice(x, begin=(None, 1), end=(None, 5))


@program([rand(2, 6)], [rand(3, 9, seed=1)], [rand(1, 4, seed=2)])
class SliceAxisEndPastLength(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.slice_axis(x, axis=-1, begin=1, end=4)


@program([rand(2, 6), floats(1, 0)], [rand(3, 9, seed=1), floats(1, 1, 0)],
         [rand(1, 3, seed=2), floats(0)])
class WhereWithRowConditionAndScalarBranches(HybridBlock):
    def hybrid_forward(self, F, x, flags):
        cond = F.broadcast_like(F.expand_dims(flags, -1), x)
        return F.where(cond, x, F.ones_like(x) * -3), F.where(flags, F.sum(x, axis=-1),
                                                              F.max(x, axis=-1))


@program([seq(3, 2), floats(2, 1)], [seq(5, 4, seed=1), floats(1, 5, 0, 3)],
         [seq(1, 1, seed=2), floats(1)])
class WhileDecoderOverMaxLengthWithSequenceMask(HybridBlock):
    """A decoder running max(lengths) steps over time-major x; finished rows masked."""
    def hybrid_forward(self, F, x, lengths):
        steps = F.max(lengths).reshape((1,))

        def body(t, h):
            xt = F.take(x, t, mode="clip").reshape((-3, -2))             # (b, c)
            alive = F.expand_dims(F.broadcast_lesser(F.broadcast_like(t, lengths), lengths),
                                  -1)
            h = F.where(F.broadcast_like(alive, h), F.tanh(h + xt), h)
            return h, [t + 1, h]
        outs, (_, h) = gluon_cf.while_loop(lambda t, h: t < steps, body,
                                           [F.zeros((1,)), F.zeros_like(F.sum(x, axis=0))],
                                           max_iterations=6)
        return outs, h


@program([seq(3, 2), floats(2, 1)], [seq(5, 4, seed=1), floats(1, 5, 0, 3)],
         [seq(1, 1, seed=2), floats(1)])
class WhileExactLengthDecoderOverMaxLength(HybridBlock):
    """As WhileDecoderOverMaxLengthWithSequenceMask, of exact length (no max_iterations)."""
    def hybrid_forward(self, F, x, lengths):
        steps = F.max(lengths).reshape((1,))

        def body(t, h):
            xt = F.take(x, t, mode="clip").reshape((-3, -2))
            return h + xt, [t + 1, h + xt]
        outs, (_, h) = gluon_cf.while_loop(lambda t, h: t < steps, body,
                                           [F.zeros((1,)), F.zeros_like(F.sum(x, axis=0))])
        return F.sum(outs, axis=0), h


# ---- more axes and normalizations -------------------------------------------------------

I3 = ([rand(2, 3, 4)], [rand(3, 5, 4, seed=1)], [rand(1, 2, 4, seed=2)])


@program(*I3)
class BatchNormLastAxis(HybridBlock):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm(axis=-1, in_channels=4)

    def hybrid_forward(self, F, x):
        return self.bn(x * 3 + 1)


@program(*I3)
class SoftmaxLogSoftmaxAxisMinus2(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.softmax(x, axis=-2), F.log_softmax(x, axis=-2), F.argmax(x, axis=-2)


@program(*I3)
class SliceLikeNegativeAxes(HybridBlock):
    def hybrid_forward(self, F, x):
        y = F.slice_axis(x, axis=-1, begin=0, end=2)
        total = F.sum(x, axis=-1, keepdims=True)
        return F.slice_like(x, y, axes=(-1,)), \
            F.broadcast_like(total, x, lhs_axes=(-1,), rhs_axes=(-1,))


@program(*I3)
class MomentsNegativeAxes(HybridBlock):
    """(no converter: refused at the line)"""
    def hybrid_forward(self, F, x):
        m, v = F.moments(x, axes=(-1,), keepdims=True)
        return m, v


@program(*I3)
class ExpandDimsMinus2AndFlatten(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.expand_dims(x, axis=-2), F.flatten(x), F.Flatten(F.expand_dims(x, 1))


@program(*I3)
class SplitNegativeAxisSqueezeNo(HybridBlock):
    def hybrid_forward(self, F, x):
        a, b = F.split(x, num_outputs=2, axis=-1)
        return a * b


@program(*I3)
class InstanceNormOverChannels(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.InstanceNorm(F.swapaxes(x, 1, 2), F.ones((4,)), F.zeros((4,)))


@program(*I3)
class DiagNegativeK(HybridBlock):
    """(no converter: refused at the line)"""
    def hybrid_forward(self, F, x):
        return F.diag(F.sum(x, axis=0), k=-1)


@program(*I3)
class LayerNormAxisMinus2(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.LayerNorm(F.swapaxes(x, 1, 2), F.ones((4,)) * 2, F.ones((4,)), axis=-2)


@program(*I3)
class DotTransposeAndBatchDotTransposeA(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.batch_dot(x, x, transpose_a=True), F.dot(F.sum(x, axis=0), F.ones((4, 2)))


@program(*I3)
class MaxMinProdNegativeAxes(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.max(x, axis=-2, keepdims=True), F.min(x, axis=(-1, 0)), F.prod(x, axis=-1)


@program(*I3)
class PoolingGlobalAndFullOverLength(HybridBlock):
    def hybrid_forward(self, F, x):
        y = F.swapaxes(x, 1, 2)
        return F.Pooling(y, kernel=(1,), pool_type="avg", global_pool=True), \
            F.Pooling(y, kernel=(2,), stride=(2,), pool_type="max", pooling_convention="full")


@program(*I3)
class DropoutPredictAndActivations(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.Dropout(x, p=0.5), F.LeakyReLU(x, act_type="elu", slope=0.3), \
            F.LeakyReLU(x, act_type="leaky", slope=0.1), F.Activation(x, act_type="softrelu"), \
            F.sigmoid(x), F.hard_sigmoid(x)


@program(*I3)
class ErfGeluSelu(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.LeakyReLU(x, act_type="gelu"), F.LeakyReLU(x, act_type="selu"), F.erf(x)


# ---- loops of no step nested, and step shapes of several dims ---------------------------

@program([rand(2, 3, 4), floats(1, 0, 1)], [rand(3, 2, 5, seed=1), floats(0, 0)],
         [rand(1, 4, 3, seed=2), floats(0, 1, 1, 0)])
class ForeachBatchWhileOverKept(HybridBlock):
    def hybrid_forward(self, F, x, m):
        count = F.sum(m).reshape((1,))

        def row(xr, s):
            kept = F.contrib.boolean_mask(xr, m)
            outs, _ = gluon_cf.while_loop(
                lambda i: i < count, lambda i: (F.take(kept, i, mode="raise") * 2, [i + 1]),
                [F.zeros((1,))], max_iterations=3)
            return outs, s
        outs, _ = gluon_cf.foreach(row, x, [F.zeros((1,))])
        return outs


@program([rand(3, 4), floats(1, 0, 1)], [rand(2, 5, seed=1), floats(0, 0)],
         [rand(4, 3, seed=2), floats(0, 1, 1, 0)])
class CondThenWhileOverKept(HybridBlock):
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m).reshape((1,))

        def loop():
            outs, _ = gluon_cf.while_loop(
                lambda i: i < count,
                lambda i: (F.broadcast_add(F.take(kept, i, mode="raise"), i), [i + 1]),
                [F.zeros((1,))], max_iterations=3)
            return F.sum(outs, axis=0)
        return gluon_cf.cond(F.sum(x) > -100, loop,
                             lambda: F.zeros_like(F.slice_axis(x, 0, 0, 1)))


_NS = ([rand(3, 4), floats(2)], [rand(2, 5, seed=1), floats(0)],
       [rand(4, 3, seed=2), floats(1)])


@program(*_NS)
class WhileNoStepStepIsPaddedRow(HybridBlock):
    """step output: a row with two zeros after it (width + 2)."""
    def hybrid_forward(self, F, x, n):
        def body(i):
            r = F.take(x, i, mode="clip")
            return F.concat(r, F.zeros((1, 2)), dim=-1), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < n, body, [F.zeros((1,))],
                                      max_iterations=3)
        return outs


@program(*_NS)
class WhileNoStepOuterProductOfRow(HybridBlock):
    """step output (w, w): both dims follow the width."""
    def hybrid_forward(self, F, x, n):
        def body(i):
            r = F.take(x, i, mode="clip")
            return F.dot(r, r, transpose_a=True), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < n, body, [F.zeros((1,))],
                                      max_iterations=3)
        return outs


@program(*_NS)
class WhileNoStepRowsOfX(HybridBlock):
    """step output: x times i, (n, w): dims following two axes."""
    def hybrid_forward(self, F, x, n):
        outs, _ = gluon_cf.while_loop(lambda i: i < n, lambda i: (F.broadcast_mul(x, i),
                                                                 [i + 1]),
                                      [F.zeros((1,))], max_iterations=3)
        return outs
