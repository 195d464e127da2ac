"""Round 29x (issue 24, item 4): blocks written as people port code (autograph loops
collecting lists, masks keeping nothing, decoders with tensor breaks, conds of different-size
branches before loops, loops in conds, nested loops, recursion), each with input lists whose
lengths and masks differ from the first (the export example): ``tests/test_export_r29x.py``
exports them through ``export_onnx`` and ``save_artifact`` and compares with Gluon."""
import numpy as np
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness
from hostile_programs28x import TREES, mask

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

ROWS = ([rand(3, 4)], [rand(5, 4, seed=1)], [rand(1, 4, seed=2)])
MASKED = ([rand(3, 4), mask(1, 0, 1)], [rand(4, 4, seed=1), mask(0, 0, 0, 0)],
          [rand(2, 4, seed=2), mask(1, 1)], [rand(5, 4, seed=3), mask(0, 1, 0, 0, 1)])
KEEPS_ONE = ([rand(3, 4), mask(1, 0, 1)], [rand(4, 4, seed=1), mask(0, 0, 1, 0)],
             [rand(2, 4, seed=2), mask(1, 1)])


# ---- autograph: collected lists --------------------------------------------------------------

@program(*ROWS)
class CollectDoubledRowsConcat(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        return F.concat(*items, dim=0)


@program(*ROWS)
class CollectRunningSumStack(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        items = []
        for r in x:
            h = h + r
            items.append(F.tanh(h))
        return F.stack(*items, axis=0), h


@program(*ROWS)
class CollectAfterAnEarlierItem(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = [F.ones_like(x[0]), x[0] * 3]
        for r in x:
            items.append(r + 1)
        return F.concat(*items, dim=0)


@program(*ROWS)
class TwoLoopsAppendToOneList(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r)
        for r in x:
            items.append(r * r)
        return F.concat(*items, dim=0)


@program(*ROWS)
class CollectConditionalRows(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            if F.sum(r) > 0:
                items.append(r)
            else:
                items.append(-r)
        return F.concat(*items, dim=0)


@program(*ROWS)
class EnumerateWeightedRows(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for i, r in enumerate(x):
            h = h * 0.5 + r
        return h


@program([rand(3, 4), rand(3, 4, seed=9)], [rand(5, 4, seed=1), rand(5, 4, seed=8)],
         [rand(1, 4, seed=2), rand(1, 4, seed=7)])
class ZipTwoSequences(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x, y):
        h = F.zeros_like(x[0])
        outs = []
        for a, b in zip(x, y):
            h = F.tanh(h + a * b)
            outs.append(h)
        return F.concat(*outs, dim=0)


# ---- autograph: masks and decoders -------------------------------------------------------------

@program(*MASKED)
class SumOverKeptRowsLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x, m):
        h = F.zeros((1, 4))
        for r in F.contrib.boolean_mask(x, m):
            h = h + r * 2
        return h


@program(*MASKED)
class MaxOverKeptRowsLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x, m):
        h = F.ones((4,)) * -5
        for r in F.contrib.boolean_mask(x, m):
            h = F.maximum(h, r)
        return h


@program(*ROWS)
class DecoderRangeBreak(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.mean(x, axis=0, keepdims=True)
        outs = []
        for t in range(6):
            h = F.tanh(h * 1.5 + 0.1)
            outs.append(h)
            if F.sum(h) > 1.0:
                break
        return F.concat(*outs, dim=0)


@program(*ROWS)
class WhileTensorCounter(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = F.sum(x, axis=0, keepdims=True)
        while i < 4:
            h = h * 0.5 + 1
            i = i + 1
        return h, i


@program(*ROWS)
class EarlyReturnInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            h = h + r
            if F.max(h) > 1.5:
                return h * 10
        return h


@program(*ROWS)
class NestedRowsAndColumns(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        total = F.zeros((1,))
        for r in x:
            for v in r:
                total = total + v * v
        return total


@program(*ROWS)
class CondOfDifferentSizesThenLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            y = F.concat(x, x, dim=0)
        else:
            y = x * 3
        h = F.zeros_like(x[0])
        for r in y:
            h = h + r
        return h


# ---- explicit ops ----------------------------------------------------------------------------

@program(*KEEPS_ONE)
class ForeachOverKeptRowsWithOutputs(HybridBlock):
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)

        def body(r, states):
            h = states[0] + r
            return h * 2, [h]
        outs, states = gluon_cf.foreach(body, kept, [F.zeros((4,))])
        return outs, states[0]


@program(*MASKED)
class WhileOverKeptRowsRunningMean(HybridBlock):
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m).reshape((1,))

        def body(i, acc):
            r = F.take(kept, i, mode="raise")
            return F.concat(r, acc.reshape((1, 1)), dim=-1), \
                [i + 1, (acc * i + F.sum(r)) / (i + 1)]
        outs, (i, acc) = gluon_cf.while_loop(lambda i, acc: i < count, body,
                                             [F.zeros((1,)), F.zeros((1,))], max_iterations=5)
        return outs, acc


@program(*MASKED)
class WhileOverKeptRowsGramDiagonal(HybridBlock):
    """Step output (1, d * d) and (1,): the row's outer product flattened, its trace."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m).reshape((1,))

        def body(i):
            r = F.take(kept, i, mode="raise").reshape((-1, 1))
            gram = F.dot(r, r, transpose_b=True)
            return [gram.reshape((1, -1)), F.sum(r * r).reshape((1,))], [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < count, body, [F.zeros((1,))],
                                      max_iterations=5)
        return outs[0], outs[1]


@program([rand(3, 4), floats(2)], [rand(5, 4, seed=1), floats(0)], [rand(2, 4, seed=2), floats(4)])
class WhileCountFromInputCollects(HybridBlock):
    def hybrid_forward(self, F, x, n):
        def body(i, h):
            h = F.tanh(F.broadcast_add(h, F.take(x, i, mode="wrap")))
            return h, [i + 1, h]
        outs, (i, h) = gluon_cf.while_loop(lambda i, h: i < n, body,
                                           [F.zeros((1,)), F.zeros((1, 4))], max_iterations=4)
        return outs, h


@program(*ROWS)
class CondInsideForeach(HybridBlock):
    def hybrid_forward(self, F, x):
        def body(r, states):
            h = gluon_cf.cond(F.sum(r) > 0, lambda: states[0] + r, lambda: states[0] * 0.5)
            return h, [h]
        outs, states = gluon_cf.foreach(body, x, [F.zeros((4,))])
        return outs, states[0]


@program([rand(3, 4), floats(1)], [rand(5, 4, seed=1), floats(-1)], [rand(1, 4, seed=2), floats(2)])
class WhileLoopInsideCondBranch(HybridBlock):
    def hybrid_forward(self, F, x, s):
        def looped():
            outs, (i, h) = gluon_cf.while_loop(
                lambda i, h: i < 3, lambda i, h: (None, [i + 1, h * 0.5 + 1]),
                [F.zeros((1,)), F.sum(x, axis=0)], max_iterations=3)
            return h
        return gluon_cf.cond(s > 0, looped, lambda: F.max(x, axis=0))


@program([rand(3, 2, 4)], [rand(5, 3, 4, seed=1)], [rand(1, 1, 4, seed=2)])
class NestedForeachRowsOfRows(HybridBlock):
    def hybrid_forward(self, F, x):
        def outer(block, states):
            def inner(r, s):
                return F.broadcast_mul(r, s[0]), [s[0] + F.sum(r)]
            outs, s = gluon_cf.foreach(inner, block, [states[0]])
            return F.sum(outs, axis=0), s
        outs, s = gluon_cf.foreach(outer, x, [F.ones((1,))])
        return outs, s[0]


@program(*MASKED)
class ForeachBodyMasksItsRow(HybridBlock):
    """A boolean_mask inside the body: the row's entries above zero, summed."""
    def hybrid_forward(self, F, x, m):
        def body(r, states):
            kept = F.contrib.boolean_mask(r, r > 0)
            s = F.sum(kept).reshape((1,))
            return s, [states[0] + s]
        outs, states = gluon_cf.foreach(body, x, [F.zeros((1,))])
        return outs, states[0]


@program(*MASKED)
class MaskedMeanWithEmptyGuard(HybridBlock):
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m)
        return gluon_cf.cond(count > 0, lambda: F.broadcast_div(F.sum(kept, axis=0), count),
                             lambda: F.zeros((4,)))


@program(*ROWS)
class WhileConvergence(HybridBlock):
    """A fixed-point iteration until the change is small (data-dependent step count)."""
    def hybrid_forward(self, F, x):
        def body(h, delta):
            new = F.cos(h)
            return new, [new, F.max(F.abs(new - h)).reshape((1,))]
        outs, (h, d) = gluon_cf.while_loop(lambda h, d: d > 1e-3, body,
                                           [F.sum(x, axis=0), F.ones((1,))],
                                           max_iterations=30)
        return h, d


class _GRUish(HybridBlock):
    def __init__(self):
        super().__init__()
        self.cell = nn.Dense(4, in_units=8, flatten=False)

    def step(self, F, r, h):
        return F.tanh(self.cell(F.concat(r, h, dim=-1)))


@program(*ROWS)
class DenseCellOverRows(_GRUish):
    def hybrid_forward(self, F, x):
        outs, states = gluon_cf.foreach(
            lambda r, s: (lambda h: (h, [h]))(self.step(F, r.reshape((1, 4)), s[0])),
            x, [F.zeros((1, 4))])
        return outs, states[0]


@program(*MASKED)
class DenseCellOverKeptRowsAutograph(_GRUish):
    @autograph
    def hybrid_forward(self, F, x, m):
        h = F.zeros((1, 4))
        for r in F.contrib.boolean_mask(x, m):
            h = self.step(F, r.reshape((1, 4)), h)
        return h


@program(*ROWS)
class ArgmaxDecoderWhile(HybridBlock):
    """Feeds back one_hot(argmax) until class 0 or 5 steps: rows collected."""
    def hybrid_forward(self, F, x):
        w = F.sum(x, axis=0).reshape((1, 4))

        def body(tok, done):
            scores = F.broadcast_mul(tok + 0.1, w) + F.arange(4).reshape((1, 4)) * 0.05
            new = F.one_hot(F.argmax(scores, axis=-1), 4)
            return new, [new, F.argmax(scores, axis=-1) == 0]
        outs, (tok, done) = gluon_cf.while_loop(
            lambda tok, done: done < 1, body, [F.one_hot(F.ones((1,)), 4), F.zeros((1,))],
            max_iterations=5)
        return outs, tok


@program(*ROWS)
class CumulativeProductForeach(HybridBlock):
    def hybrid_forward(self, F, x):
        outs, states = gluon_cf.foreach(lambda r, s: (r * s[0], [r * s[0]]), x * 0.9 + 1,
                                        [F.ones((4,))])
        return outs


@program(*ROWS)
class SequenceReverseThenForeach(HybridBlock):
    def hybrid_forward(self, F, x):
        rev = F.reverse(x, axis=0)
        outs, states = gluon_cf.foreach(lambda r, s: (r - s[0], [r]), rev, [F.zeros((4,))])
        return F.concat(outs, x, dim=-1)


@program(*ROWS)
class TopkInsideLoopBody(HybridBlock):
    def hybrid_forward(self, F, x):
        def body(r, s):
            top = F.topk(r, k=2, ret_typ="value")
            return top, [s[0] + F.sum(top)]
        outs, s = gluon_cf.foreach(body, x, [F.zeros((1,))])
        return outs, s[0]


@program(*KEEPS_ONE)
class PickPerKeptRow(HybridBlock):
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        idx = F.argmax(kept, axis=-1)
        return F.pick(kept, idx, axis=-1), F.one_hot(idx, 4)


@program(*ROWS)
class WhileWithTwoExitConditions(HybridBlock):
    def hybrid_forward(self, F, x):
        limit = F.sum(F.abs(x)).reshape((1,))

        def body(i, acc):
            return acc, [i + 1, acc + i * 0.5]
        outs, (i, acc) = gluon_cf.while_loop(
            lambda i, acc: F.broadcast_logical_and(i < 6, acc < limit), body,
            [F.zeros((1,)), F.zeros((1,))], max_iterations=6)
        return outs, i, acc


# ---- recursion ---------------------------------------------------------------------------

@program(*TREES)
class TreeDepthWeightedSum(HybridBlock):
    """A recursive sum where each internal node halves its children's sum."""
    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            own = F.take(x, i)

            def internal():
                return (node(F.take(left, i)) + node(F.take(right, i))) * 0.5 + own
            return gluon_cf.cond(F.take(left, i) < 0, lambda: own, internal)
        outs, _ = gluon_cf.foreach(lambda r, _: (node(r.reshape((1,))), []), roots, [])
        return outs


@program(*TREES)
class TreeMaxChildGate(HybridBlock):
    """Each internal node keeps the larger child (by sum), gated by its own row."""
    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            own = F.take(x, i)

            def internal():
                a, b = node(F.take(left, i)), node(F.take(right, i))
                pick_a = F.sum(a) > F.sum(b)
                return F.sigmoid(own) * gluon_cf.cond(pick_a, lambda: a, lambda: b)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.tanh(own), internal)
        outs, _ = gluon_cf.foreach(lambda r, _: (node(r.reshape((1,))), []), roots, [])
        return outs


# ---- more ports ------------------------------------------------------------------------------

@program(*ROWS)
class ListOfTwoCollectedPerStep(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        evens, odds = [], []
        for r in x:
            evens.append(r * 2)
            odds.append(F.sum(r, keepdims=True))
        return F.concat(*evens, dim=0), F.concat(*odds, dim=0)


@program(*MASKED)
class CollectKeptRowsThenMean(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x, m):
        items = [F.zeros((4,))]
        for r in F.contrib.boolean_mask(x, m):
            items.append(r)
        return F.mean(F.stack(*items, axis=0), axis=0)


@program(*ROWS)
class WhileHalvingUntilSmall(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(F.abs(x), axis=0) + 1
        steps = F.zeros((1,))
        while F.max(h) > 0.5:
            h = h * 0.5
            steps = steps + 1
        return h, steps


@program(*ROWS)
class ForContinueSkipsNegativeRows(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            if F.sum(r) < 0:
                continue
            h = h + r
        return h


@program(*ROWS)
class SoftmaxAttentionOverRowsForeach(HybridBlock):
    def hybrid_forward(self, F, x):
        def body(q, s):
            scores = F.softmax(F.dot(x, q.reshape((4, 1))).reshape((1, -1)), axis=-1)
            ctx = F.dot(scores, x)
            return ctx, [s[0] + ctx]
        outs, s = gluon_cf.foreach(body, x, [F.zeros((1, 4))])
        return outs, s[0]


@program([rand(3, 4), floats(2)], [rand(5, 4, seed=1), floats(0)], [rand(2, 4, seed=2), floats(5)])
class WhileNoStepStepOfSquaredWidth(HybridBlock):
    """A loop of no step at n = 0 whose step is (1, d * d) (issue 24, the probe's gathers)."""
    def hybrid_forward(self, F, x, n):
        def body(i):
            r = F.take(x, i, mode="raise").reshape((-1, 1))
            return F.dot(r, r, transpose_b=True).reshape((1, -1)), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < F.minimum(n, F.ones((1,)) * 2), body,
                                      [F.zeros((1,))], max_iterations=3)
        return outs


@program([rand(3, 4), floats(2)], [rand(5, 4, seed=1), floats(0)], [rand(2, 4, seed=2), floats(5)])
class RecursiveCountdown(HybridBlock):
    """A recursive function on a scalar counter (n, n - 1, ..., 0), each level adding a row."""
    def hybrid_forward(self, F, x, n):
        @gluon_cf.recursive
        def down(k):
            row = F.take(x, F.minimum(k, F.ones((1,)) * 0), mode="clip")
            return gluon_cf.cond(k < 1, lambda: row, lambda: down(k - 1) * 0.5 + row)
        return down(F.minimum(n, F.ones((1,)) * 3))


# ---- edges: nothing kept, other dtypes, masks inside bodies ----------------------------------

@program(*MASKED)
class CollectKeptRowsConcatNoneKept(HybridBlock):
    """A list collected over kept rows, joined by concat: no row kept gives (0, 4)."""
    @autograph
    def hybrid_forward(self, F, x, m):
        items = []
        for r in F.contrib.boolean_mask(x, m):
            items.append(r.reshape((1, 4)) * 2)
        return F.concat(*items, dim=0)


@program(*MASKED)
class WhileNoStepMaskInsideBody(HybridBlock):
    """The step's width is the row's positive entries (follows no input): no row kept."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.minimum(F.sum(m), F.ones((1,))).reshape((1,))

        def body(i):
            r = F.take(kept, i, mode="raise").reshape((-1,))
            return F.contrib.boolean_mask(r, r > 0).reshape((1, -1)), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < count, body, [F.zeros((1,))],
                                      max_iterations=2)
        return outs


@program([rand(3, 4).astype(np.float64), mask(1, 0, 1)],
         [rand(4, 4, seed=1).astype(np.float64), mask(0, 0, 0, 0)],
         [rand(2, 4, seed=2).astype(np.float64), mask(1, 1)])
class Float64WhileOverKeptRows(HybridBlock):
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m).reshape((1,)).astype("float64")

        def body(i):
            r = F.take(kept, i, mode="raise")
            return F.concat(r, r * r, dim=-1), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < count, body,
                                      [F.zeros((1,), dtype="float64")], max_iterations=3)
        return outs


@program([rand(3, 4), np.array([1, 0, 1], np.int32)],
         [rand(4, 4, seed=1), np.array([0, 0, 0, 0], np.int32)],
         [rand(2, 4, seed=2), np.array([1, 1], np.int32)])
class Int32MaskLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x, m):
        h = F.zeros((4,))
        for r in F.contrib.boolean_mask(x, m):
            h = h * 0.5 + r
        return h


@program([rand(3, 4), floats(2)], [rand(5, 4, seed=1), floats(0)], [rand(2, 4, seed=2), floats(5)])
class WhileIntStepOutputsNoStep(HybridBlock):
    """Step outputs of int32 and float32; n = 0 runs no step."""
    def hybrid_forward(self, F, x, n):
        def body(i):
            r = F.take(x, i, mode="clip")
            return [F.argmax(r, axis=-1).astype("int32"), r * 2], [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < n, body, [F.zeros((1,))],
                                      max_iterations=4)
        return outs[0], outs[1]


@program([rand(2, 3, 4), floats(2, 3)], [rand(3, 5, 4, seed=1), floats(1, 5, 0)],
         [rand(1, 2, 4, seed=2), floats(2)])
class SequenceMaskThenForeachOverTime(HybridBlock):
    def hybrid_forward(self, F, x, lengths):
        masked = F.SequenceMask(F.swapaxes(x, 0, 1), lengths, use_sequence_length=True)

        def body(r, s):
            h = F.tanh(s[0] + r)
            return h, [h]
        outs, s = gluon_cf.foreach(body, masked, [F.zeros_like(F.sum(x, axis=1))])
        return outs, s[0]


@program(*ROWS)
class CondBranchesOfTwoOutputs(HybridBlock):
    def hybrid_forward(self, F, x):
        a, b = gluon_cf.cond(F.sum(x) > 0, lambda: (x * 2, F.sum(x, axis=0)),
                             lambda: (x - 1, F.max(x, axis=0)))
        return F.concat(a, b.reshape((1, 4)), dim=0)


@program(*ROWS)
class WhileStepOutputsPaddedPastSteps(HybridBlock):
    """max_iterations 6 past the rows' count: the outputs are padded with zero rows."""
    def hybrid_forward(self, F, x):
        n = F.slice_axis(F.shape_array(x), axis=0, begin=0, end=1).astype("float32")

        def body(i, h):
            r = F.take(x, i, mode="raise")
            return [r, h], [i + 1, h + F.sum(r)]
        outs, (i, h) = gluon_cf.while_loop(lambda i, h: i < n, body,
                                           [F.zeros((1,)), F.zeros((1,))], max_iterations=6)
        return outs[0], outs[1], h


@program(*MASKED)
class ForeachOverKeptRowsStatesOnly(HybridBlock):
    """A converted for whose body has states only: no row kept runs no step."""
    @autograph
    def hybrid_forward(self, F, x, m):
        h = F.ones((4,))
        count = F.zeros((1,))
        for r in F.contrib.boolean_mask(x, m):
            h = h * r
            count = count + 1
        return h, count


# ---- MXNet's own control flow, nested loops ------------------------------------------------

@program(*ROWS)
class MxnetContribForeachCumsum(HybridBlock):
    def hybrid_forward(self, F, x):
        outs, states = F.contrib.foreach(lambda r, s: (r + s[0], [r + s[0]]), x,
                                         [F.zeros((4,))])
        return outs, states[0]


@program(*ROWS)
class MxnetContribCond(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.contrib.cond(F.sum(x) > 0, lambda: x * 2, lambda: x - 1)


@program(*ROWS)
class MxnetContribWhileLoop(HybridBlock):
    def hybrid_forward(self, F, x):
        outs, (i, s) = F.contrib.while_loop(
            lambda i, s: i < 3, lambda i, s: (s, [i + 1, s * 0.5 + 1]),
            [F.zeros((1,)), F.sum(x, axis=0)], max_iterations=4)
        return outs, s


@program(*MASKED)
class ForeachRowsWhileOverPositiveEntries(HybridBlock):
    """Per row, a while_loop over the row's positive entries (none in some rows)."""
    def hybrid_forward(self, F, x, m):
        def body(r, states):
            pos = F.contrib.boolean_mask(r, r > 0)
            count = F.sum(r > 0).reshape((1,))

            def step(i, acc):
                v = F.take(pos, i, mode="raise")
                return v * 2, [i + 1, acc + v]
            outs, (_, acc) = gluon_cf.while_loop(lambda i, acc: i < count, step,
                                                 [F.zeros((1,)), F.zeros((1,))],
                                                 max_iterations=4)
            return outs.reshape((1, 4)), [states[0] + acc]
        outs, states = gluon_cf.foreach(body, x, [F.zeros((1,))])
        return outs, states[0]


@program(*ROWS)
class AutographWhileInsideFor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        total = F.zeros((1,))
        for r in x:
            v = F.sum(F.abs(r)).reshape((1,))
            while v > 0.25:
                v = v * 0.5
                total = total + 1
        return total


@program(*ROWS)
class AutographWhileBreakCollects(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.mean(x, axis=0)
        i = F.zeros((1,))
        outs = []
        while i < 5:
            h = F.sin(h * 2 + 0.3)
            outs.append(h)
            if F.min(h) < -0.5:
                break
            i = i + 1
        return F.stack(*outs, axis=0), i


@program([rand(3, 4), floats(1, 0, 1)], [rand(5, 4, seed=1), floats(0, 0, 0, 0, 0)],
         [rand(2, 4, seed=2), floats(1, 1)])
class AutographForRangeTensorIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x, m):
        h = F.zeros((4,))
        for t in range(3):
            if F.sum(m) > t:
                h = h + F.take(x, F.ones((1,)) * t, mode="clip").reshape((4,))
            else:
                h = h * 0.5
        return h


@program(*ROWS)
class BeamTopkWhile(HybridBlock):
    """A beam-search-like loop: keep the top 2 scores of (beam + row) for 3 steps."""
    def hybrid_forward(self, F, x):
        def body(i, beam):
            row = F.take(x, i, mode="wrap").reshape((1, 4))
            scores = F.broadcast_add(beam.reshape((2, 1)), row).reshape((1, -1))
            top = F.topk(scores, k=2, ret_typ="value").reshape((2,))
            return top, [i + 1, top]
        outs, (i, beam) = gluon_cf.while_loop(lambda i, beam: i < 3, body,
                                              [F.zeros((1,)), F.zeros((2,))], max_iterations=3)
        return outs, beam
