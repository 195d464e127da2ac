"""Issue 24, fourth round (3/3): more idioms of ported decoders: a while bound too small
(TruncationWarning), int32 tokens fed back, for/else with a tensor break, a list read and
appended in one loop, column slices, .T, nested loops over one tensor, dict keys
re-ordered in a while, dtypes changing between calls, deferred parameter shapes first known
in a loop's body, begin_state, a fused LSTM layer under a tensor if. PROGRAMS maps
each block class to its input lists (hostile_harness.classify runs them)."""
import numpy as np
from mxnet import gluon
from mxnet.gluon import HybridBlock

from gluon_cf import autograph

import hostile_harness
from hostile_programs6 import ROWS, _rand

PROGRAMS, program = hostile_harness.program_registry()


@program(*ROWS)
class MaxIterationsTooSmall(HybridBlock):
    """A while that needs up to 5 steps under max_iterations=2 (a user's guess): the bound
    holds eagerly and hybridized, with a TruncationWarning at the while's line (the README's
    table); the oracle is plain Python stopping at the bound."""

    @autograph(max_iterations=2)
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = x[0] * 0
        while i < F.shape_array(x)[0:1].astype("float32"):
            h = h * 0.5 + F.take(x, i).reshape((-1,))
            i = i + 1
        return h

    def plain_forward(self, F, x):
        h = x[0] * 0
        for r in x[:2]:
            h = h * 0.5 + r
        return h


@program([_rand(2, 4), np.array([[1, 2], [3, 0]], np.int32)],
         [_rand(2, 4, seed=1), np.array([[4, 4], [0, 1]], np.int32)])
class IntTokensFedBack(HybridBlock):
    """int32 token ids compared with argmax's float ids, fed back through one_hot."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, h, gold):
        hits = F.zeros((2,))
        for g in F.transpose(gold):
            tok = F.argmax(h, axis=1)
            hits = hits + (tok == g.astype("float32"))
            h = F.tanh(h + F.one_hot(g, 4))
        return h, hits


@program(*ROWS)
class ForElseWithTensorBreak(HybridBlock):
    """for ... else: the else runs only when no row broke the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            h = h + r
            if F.max(h) > 1.5:
                break
        else:
            h = h * 10
        return h


@program(*ROWS)
class LastCollectedReadInLoop(HybridBlock):
    """outs[-1] read inside the loop that appends to outs."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [x[0] * 0]
        for r in x:
            outs.append(F.tanh(outs[-1] + r))
        return F.stack(*outs)


@program(*ROWS)
class ColumnSliceInStaticRange(HybridBlock):
    """x[:, t] over a static range of columns."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=1) * 0
        for t in range(4):
            h = F.tanh(h + x[:, t])
            if F.sum(h) > 2:
                h = h - 1
        return h


@program(*ROWS)
class TransposePropertyLoop(HybridBlock):
    """for col in x.T: a loop over the columns through the .T property."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=1) * 0
        for col in x.T:
            h = h * 0.5 + col
        return h


@program(*ROWS)
class NestedLoopReadsOuterCollected(HybridBlock):
    """An inner loop over the rows reading the list the outer loop collects."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x[0] * 0
        for r in x:
            for s in x:
                h = h * 0.5 + r * s
            outs.append(h)
        return F.stack(*outs).sum(axis=0)


@program(*ROWS)
class WhileOnDictValueKeysReordered(HybridBlock):
    """A while on a dict's value whose keys come back in another order each step."""

    @autograph(max_iterations=6)
    def hybrid_forward(self, F, x):
        s = {"i": F.zeros((1,)), "h": x[0] * 0}
        while s["i"] < 3:
            s = {"h": s["h"] + F.take(x, F.minimum(s["i"], 0)).reshape((-1,)), "i": s["i"] + 1}
        return s["h"]


@program([_rand(3, 4)], [_rand(3, 4, seed=1).astype(np.float64)], [_rand(2, 4, seed=2)])
class DtypeChangesBetweenCalls(HybridBlock):
    """float32 rows, then float64 rows, then float32 again, on one block."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            if F.sum(r) > 0:
                h = h + r
        return h


@program(*ROWS)
class DeferredDenseInLoopBody(HybridBlock):
    """Dense(4) without in_units: its weight's shape is first known inside the loop's body."""

    def __init__(self):
        super().__init__()
        self.proj = gluon.nn.Dense(4)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1, 4))
        for r in x:
            h = F.tanh(self.proj(h + r.reshape((1, -1))))
        return h


@program([_rand(3, 2, 4)], [_rand(5, 2, 4, seed=1)])
class BeginStateInConvertedBlock(HybridBlock):
    """gluonnlp's decoder: cell.begin_state(batch_size, func=F.zeros), then a tensor loop."""

    def __init__(self):
        super().__init__()
        self.cell = gluon.rnn.LSTMCell(3, input_size=4)

    @autograph
    def hybrid_forward(self, F, x):
        states = self.cell.begin_state(batch_size=2, func=F.zeros)
        outs = []
        for x_t in x:
            out, states = self.cell(x_t, states)
            outs.append(out)
        return F.stack(*outs), states[1]


@program([_rand(3, 2, 4)], [_rand(5, 2, 4, seed=1)])
class FusedLSTMLayerInTensorIf(HybridBlock):
    """gluon.rnn.LSTM (the fused layer) run under a tensor if on its input's sign."""

    def __init__(self):
        super().__init__()
        self.rnn = gluon.rnn.LSTM(3, input_size=4)

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            out = self.rnn(x)
        else:
            out = self.rnn(-x) * 2
        return out


# ------------------------------------------------------------------------- aliasing, rebinding

@program(*ROWS)
class IterableReboundInBody(HybridBlock):
    """for r in x: ... x = x * 2: the loop runs over the x it started with (Python's rule)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            h = h + r
            x = x * 0.5
        return h, x


@program(*ROWS)
class AliasKeepsInitialState(HybridBlock):
    """a = h before the loop; the loop rebinds h; a stays the initial state."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] + 1
        first = h
        for r in x:
            h = h * r
        return first, h


@program(*ROWS)
class SwapStatesEachStep(HybridBlock):
    """h, c = c, h every step."""

    @autograph
    def hybrid_forward(self, F, x):
        h, c = x[0] * 0, x[0]
        for r in x:
            h, c = c + r, h
        return h - c


@program(*ROWS)
class SlidingWindowBuffer(HybridBlock):
    """A fixed-size cache of the last 2 rows: buf = concat(buf[1:], row) each step."""

    @autograph
    def hybrid_forward(self, F, x):
        buf = F.zeros((2, 4))
        out = []
        for r in x:
            buf = F.concat(buf[1:], r.reshape((1, -1)), dim=0)
            out.append(F.sum(buf, axis=0))
        return F.stack(*out)


@program(*ROWS)
class PythonTupleLoopTensorBreak(HybridBlock):
    """A loop over a Python tuple of rows that breaks on a tensor condition."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for w in (x[0], x[0] * 2, x[0] * 3):
            h = h + w
            if F.sum(h) > 1:
                break
        return h


@program(*ROWS)
class WhileTrueTwoBreaksAndContinue(HybridBlock):
    """while True with a continue and two different tensor breaks."""

    @autograph(max_iterations=8)
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = x[0] * 0
        while True:
            i = i + 1
            if i > F.shape_array(x)[0:1].astype("float32"):
                break
            row = F.take(x, i - 1).reshape((-1,))
            if F.sum(row) < 0:
                continue
            h = h + row
            if F.max(h) > 1.2:
                break
        return h, i


@program(*ROWS)
class PythonCounterWhileWithTensorBreak(HybridBlock):
    """while t < 4 on a Python int, with a tensor break inside."""

    @autograph
    def hybrid_forward(self, F, x):
        t = 0
        h = x[0] * 0
        while t < 4:
            h = h * 0.5 + x[0] * t
            if F.sum(h) > 1:
                break
            t += 1
        return h


@program(*ROWS)
class ListOfDictStates(HybridBlock):
    """Per-layer states as a list of dicts."""

    @autograph
    def hybrid_forward(self, F, x):
        layers = [{"h": x[0] * 0}, {"h": x[0] * 0 + 1}]
        for r in x:
            below = F.tanh(layers[0]["h"] + r)
            layers = [{"h": below}, {"h": layers[1]["h"] * below}]
        return layers[1]["h"] + layers[0]["h"]


@program(*ROWS)
class ArangeLoopNotFromInput(HybridBlock):
    """for i in F.arange(3): a loop over a constant tensor."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for i in F.arange(3):
            h = h * 0.5 + x[0] * i
        return h


@program([np.array([[1, 2, 3, 0], [3, 3, 1, 2]], np.int32)],
         [np.array([[0, 0, 0, 0]], np.int32)])
class Int32RowsFloatArithmetic(HybridBlock):
    """Rows of an int32 input in float arithmetic (MXNet keeps int32: 0.5 * 3 is 1)."""
    NO_GRAD = (0,)

    @autograph
    def hybrid_forward(self, F, ids):
        h = F.zeros((4,))
        for r in ids:
            h = h + (r * 0.5).astype("float32") + r.astype("float32") / 2
        return h


@program(*ROWS)
class IntBranchThenDivision(HybridBlock):
    """A tensor if whose branches return int32 and float32 arrays, divided after."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            y = (x[0] * 10).astype("int32")
        else:
            y = x[0] * 10
        return (y / 3).astype("float32")


@program([_rand(3, 4), np.array([1, 0, 1], np.float32)],
         [_rand(3, 4, seed=1), np.array([0, 0, 0], np.float32)],
         [_rand(2, 4, seed=2), np.array([1, 1], np.float32)],
         [_rand(2, 4, seed=3), np.array([0, 0], np.float32)])
class EmptyMaskFailsThenWorks(HybridBlock):
    """The max over the rows a mask kept: no row fails (as MXNet fails), the next call
    works."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        h = F.max(kept, axis=0)
        for r in kept:
            h = h + r
        return h


# ------------------------------------------------------------------------- failures inside loops

_POS = np.abs(_rand(3, 4)) + 0.1
_ONE_ROW_NEGATIVE = np.concatenate([_POS[:1], -_POS[1:2], _POS[2:]])


@program([_POS], [_ONE_ROW_NEGATIVE], [_POS * 2], [-_POS[:2]], [_POS[:2]])
class RowMaxOfPositivesFailsInsideLoop(HybridBlock):
    """Per row, the max of its positive entries: a row with none fails inside the loop's
    body (MXNet cannot take the max of no element), then the next call works."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            pos = F.contrib.boolean_mask(r, r > 0)
            h = h + F.max(pos) * r
        return h


@program([_POS, np.array([2], np.float32)], [_POS, np.array([0], np.float32)],
         [_POS * 0.5, np.array([3], np.float32)])
class WhileCollectsThenStacksSteps(HybridBlock):
    """A while that collects its steps for F.stack: zero steps (no row to stack) fail as
    plain Python fails, then calls with steps work."""
    NO_GRAD = (1,)

    @autograph(max_iterations=4)
    def hybrid_forward(self, F, x, n):
        i = F.zeros((1,))
        rows = []
        while i < n:
            rows.append(F.take(x, i).reshape((-1,)) * (i + 1))
            i = i + 1
        return F.stack(*rows)
