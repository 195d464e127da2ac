"""Issue 24, fifth round (2/2): gluonnlp-0.10-style code (beam search and sequence samplers,
attention cells in decoding loops, F.contrib.foreach/while_loop bodies written for MXNet and
switched to gluon_cf), dtypes in loop states (float16, float64, int32), zero-size and
empty-mask steps after non-empty ones, and calls that fail before calls that work.
``PROGRAMS`` maps each block class to its input lists (hostile_harness.classify runs them)."""
import numpy as np
from mxnet import gluon
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness
from hostile_programs3 import _contrib_oracle
from hostile_programs8 import ROWS

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

MASKED = ([rand(4, 4), floats(1, 0, 1, 1)], [rand(2, 4, seed=1), floats(0, 0)],
          [rand(3, 4, seed=2), floats(1, 1, 1)], [rand(2, 4, seed=3), floats(0, 0)])


# ------------------------------------------------------------------------- gluonnlp-style

class _MLPAttentionCell(HybridBlock):
    """gluonnlp's MLPAttentionCell, reduced: score = v . tanh(Wq q + Wk k), masked softmax."""

    def __init__(self):
        super().__init__()
        self.query = gluon.nn.Dense(4, flatten=False, in_units=4, use_bias=False)
        self.key = gluon.nn.Dense(4, flatten=False, in_units=4, use_bias=False)
        self.v = gluon.nn.Dense(1, flatten=False, in_units=4, use_bias=False)

    def hybrid_forward(self, F, q, k, mask):
        score = self.v(F.tanh(F.broadcast_add(self.query(q).expand_dims(1), self.key(k))))
        score = F.where(mask.expand_dims(-1) > 0, score, F.ones_like(score) * -1e9)
        att = F.softmax(score, axis=1)
        return F.sum(F.broadcast_mul(att, k), axis=1)


@program([rand(2, 3, 4), floats(1, 1, 0, 1, 1, 1).reshape(2, 3)],
         [rand(2, 3, 4, seed=1), floats(1, 0, 0, 1, 1, 0).reshape(2, 3)])
class AttentionCellInDecodeLoop(HybridBlock):
    """An attention cell queried by its own context for three Python steps with a tensor
    stop."""
    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        self.att = _MLPAttentionCell()

    @autograph
    def hybrid_forward(self, F, mem, mask):
        q = F.mean(mem, axis=1)
        outs = []
        for _ in range(3):
            q = F.tanh(self.att(q, mem, mask) + q)
            outs.append(q)
            if F.max(q) > 0.95:
                break
        return F.stack(*outs, axis=1)


class _Projection(HybridBlock):
    def __init__(self):
        super().__init__()
        self.out = gluon.nn.Dense(5, in_units=4)
        self.cell = gluon.rnn.GRUCell(4, input_size=5)


@program([rand(2, 4)], [rand(2, 4, seed=1) * 3])
class SequenceSamplerGreedy(_Projection):
    """gluonnlp's SequenceSampler with argmax: tokens fed back one-hot, finished rows kept
    by an alive mask, a tensor while stopping when none is alive."""

    @autograph(max_iterations=5)
    def hybrid_forward(self, F, h):
        alive = F.ones((2,))
        tok = F.zeros((2,))
        steps = F.zeros((1,))
        total = F.zeros((2,))
        while F.sum(alive) > 0:
            h, _ = self.cell(F.one_hot(tok, 5), [h])
            logits = self.out(h)
            tok = F.argmax(logits, axis=1)
            total = total + F.max(F.log_softmax(logits), axis=1) * alive
            alive = alive * (tok != 0) * (steps < 3)
            steps = steps + 1
        return total, steps


@program([rand(2, 4)], [rand(2, 4, seed=1) * 3])
class BeamSearchScoresAndTake(_Projection):
    """A beam of 2 per sample (batch 1, rows = beams): topk of flat scores, states taken by
    beam, tokens by index % vocab, a Python range of 3 steps."""

    @autograph
    def hybrid_forward(self, F, h):
        scores = F.zeros((2,))
        tok = F.zeros((2,))
        for _ in range(3):
            h, _ = self.cell(F.one_hot(tok, 5), [h])
            cand = F.broadcast_add(scores.reshape((2, 1)), F.log_softmax(self.out(h)))
            best = F.topk(cand.reshape((1, -1)), k=2, ret_typ="both")
            scores, idx = best[0].reshape((-1,)), best[1].reshape((-1,))
            beam = F.floor(idx / 5)
            tok = idx - beam * 5
            h = F.take(h, beam)
        return scores, h


@program(*ROWS)
class ContribForeachSwitchedByImport(HybridBlock):
    """A body written for F.contrib.foreach (outputs and states as single arrays, not lists),
    run by gluon_cf.foreach."""

    def hybrid_forward(self, F, x):
        def body(r, h):
            h2 = F.tanh(h + r)
            return h2 * 2, h2
        outs, h = gluon_cf.foreach(body, x, F.zeros((4,)))
        return outs, h


@program(*ROWS)
class ContribWhileEmptyOutputs(HybridBlock):
    """F.contrib.while_loop's body returning ([], new_vars) (no step outputs)."""

    def hybrid_forward(self, F, x):
        row = F.mean(x, axis=0)
        _, (i, h) = gluon_cf.while_loop(
            lambda i, h: i < 3, lambda i, h: ([], (i + 1, F.tanh(h + row * i))),
            (F.zeros((1,)), row * 0), max_iterations=4)
        return h, i


@program(*ROWS)
class ContribForeachTwoDataTwoStates(HybridBlock):
    """data a list of two, states a list of two, outputs a list of two (gluonnlp's encoder)."""

    def hybrid_forward(self, F, x):
        def body(data, states):
            a, b = data
            h, c = states
            h = F.tanh(h + a * b)
            return [h, c], [h, c + h]
        (outs, cs), (h, c) = gluon_cf.foreach(body, [x, x * 0.5], [F.zeros((4,)), F.ones((4,))])
        return outs, cs, h + c


@program(*ROWS)
class ContribCondInsideForeach(HybridBlock):
    """F.contrib.cond inside a foreach body (both gluon_cf), branches closing over the row."""

    def hybrid_forward(self, F, x):
        def body(r, h):
            h = gluon_cf.cond(F.sum(r) > 0, lambda: h + r, lambda: h - r)
            return h, h
        outs, h = gluon_cf.foreach(body, x, F.zeros((4,)))
        return outs, h


@program(*ROWS)
class TFWhileBodyReturnsVarsOnly(HybridBlock):
    """tf.while_loop's body returns the loop variables only; MXNet's (and gluon_cf's) func
    returns (step outputs, loop variables): a port that forgot the outputs."""

    def hybrid_forward(self, F, x):
        row = F.mean(x, axis=0)
        _, (i, h) = gluon_cf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, h + row),
                                        (F.zeros((1,)), row * 0), max_iterations=4)
        return h


@program(*ROWS)
class MapOverPythonTupleOfStates(HybridBlock):
    """h, c = tuple(map(F.tanh, (h, c))): map over a Python tuple of arrays (not a tensor)."""

    @autograph
    def hybrid_forward(self, F, x):
        h, c = x[0] * 0, x[0] * 0 + 1
        for r in x:
            h, c = tuple(map(F.tanh, (h + r, c * r)))
        return h + c


@program(*ROWS)
class StateGetWithDefaultInLoop(HybridBlock):
    """state.get("h", default) read each step; the state rebuilt as a new dict."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0] * 0}
        for r in x:
            state = {"h": state.get("h", r) * 0.5 + r, "last": r}
        return state["h"] + state.get("last", x[0])


for _cls in (TFWhileBodyReturnsVarsOnly, ContribForeachSwitchedByImport, ContribWhileEmptyOutputs,
             ContribForeachTwoDataTwoStates, ContribCondInsideForeach):
    _cls.plain_forward = _contrib_oracle


# ------------------------------------------------------------------------- dtypes

@program([rand(3, 4).astype(np.float16)], [rand(2, 4, seed=1).astype(np.float16)])
class Float16State(HybridBlock):
    """float16 rows and a float16 state under a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            if F.sum(r) > 0:
                h = h + r
            else:
                h = h * 0.5
        return h


@program(*ROWS)
class Float64StateFromFloat32Rows(HybridBlock):
    """A float64 state fed with float32 rows cast in the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((4,), dtype="float64")
        for r in x:
            h = h * 0.5 + r.astype("float64")
        return h.astype("float32")


@program(*ROWS)
class Int32CounterBesideFloatState(HybridBlock):
    """An int32 counter state beside a float state, counting positive rows."""

    @autograph
    def hybrid_forward(self, F, x):
        n = F.zeros((1,), dtype="int32")
        h = x[0] * 0
        for r in x:
            if F.sum(r) > 0:
                n = n + 1
                h = h + r
        return h, n.astype("float32")


@program([np.array([[1, 2], [3, 4], [5, 6]], np.int32)], [np.array([[7, 8]], np.int32)])
class Int32RowsCumulative(HybridBlock):
    """int32 rows accumulated in an int32 state (no gradient)."""
    NO_GRAD = (0,)

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            h = h * 2 + r
        return h


@program(*ROWS)
class DtypeOfStateChangesInIf(HybridBlock):
    """A tensor if whose branches give the state two dtypes (float32 / float64)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        if F.sum(h) > 0:
            h = h.astype("float64") * 2
        else:
            h = h * 3
        return h


# ------------------------------------------------------------------------- zero-size and history

@program(*MASKED)
class EmptyMaskInsideWhileAfterNonEmpty(HybridBlock):
    """A while whose body sums the masked rows (none on the 2nd and 4th calls)."""
    NO_GRAD = (1,)

    @autograph(max_iterations=4)
    def hybrid_forward(self, F, x, m):
        i = F.zeros((1,))
        h = F.zeros((4,))
        while i < 2:
            h = h + F.sum(F.contrib.boolean_mask(x, m), axis=0) * (i + 1)
            i = i + 1
        return h

    def oracle_where_plain_fails(self, F, x, m):
        """The oracle where plain MXNet fails on the sum of no row; the kept rows' sum is the
        sum of the rows times the mask."""
        return F.sum(x * m.reshape((-1, 1)), axis=0) * 3


@program(*MASKED)
class EmptyMaskInsideTensorFor(HybridBlock):
    """A tensor for whose body adds the mean of the kept rows' sums, guarded by a count."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, m):
        h = F.zeros((4,))
        for r in x:
            kept = F.contrib.boolean_mask(x, m)
            h = h + r + F.sum(kept, axis=0)
        return h

    def oracle_where_plain_fails(self, F, x, m):
        """The oracle (as above): the rows times the mask for the kept rows."""
        h = F.zeros((4,))
        for r in x:
            h = h + r + F.sum(x * m.reshape((-1, 1)), axis=0)
        return h


@program([rand(3, 4)], [np.zeros((0, 4), np.float32)], [rand(2, 4, seed=1)],
         [np.zeros((0, 4), np.float32)])
class ZeroRowsWhileOverShape(HybridBlock):
    """A while over x's rows with a tensor counter; no row on the 2nd and 4th calls."""
    NO_GRAD = (0,)

    @autograph(max_iterations=6)
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = F.zeros((4,))
        while i < F.shape_array(x)[0:1].astype("float32"):
            h = h + F.take(x, i).reshape((-1,))
            i = i + 1
        return h


@program([rand(3, 4), floats(2)], [rand(3, 4, seed=1), floats(-1)], [rand(2, 4, seed=2),
                                                                     floats(1)])
class UserRaiseThenGoodCall(HybridBlock):
    """The user's own ValueError under a Python test of an argument's shape, then calls
    that work (the block stays usable)."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, k):
        if x.shape[0] == 3 and x.shape[1] != 4:
            raise ValueError("need 4 features")
        h = x[0] * 0
        for r in x:
            h = h + r * k
        return h


@program([rand(3, 4)], [rand(3, 5, seed=1)], [rand(2, 4, seed=2)])
class WrongWidthThenGoodCall(HybridBlock):
    """A call whose rows have 5 features where the state has 4 (MXNet's broadcast fails),
    then a call that works."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((4,))
        for r in x:
            h = h + r
        return h


@program(*ROWS)
class LambdasWithDefaultsFromPythonRange(HybridBlock):
    """fns = [lambda v, k=k: v * k for k in range(1, 4)], each applied in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        fns = [lambda v, k=k: v * k for k in range(1, 4)]
        h = x[0] * 0
        for r in x:
            for f in fns:
                h = F.tanh(h + f(r))
        return h


@program(*ROWS)
class ThresholdAttributeInTensorIf(HybridBlock):
    """self.threshold (a Python float set in __init__) compared under a tensor if in a
    while."""

    def __init__(self):
        super().__init__()
        self.threshold = 0.5

    @autograph(max_iterations=5)
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = x[0] * 0
        while i < 3:
            if F.max(h) > self.threshold:
                h = h - self.threshold
            else:
                h = h + F.mean(x, axis=0)
            i = i + 1
        return h


@program(*ROWS)
class GeneratorHelperYieldsScaledRows(HybridBlock):
    """A helper generator over a Python range yielding scaled copies of a state, summed in a
    tensor loop."""

    @staticmethod
    def scaled(h):
        for k in range(3):
            yield h * (k + 1)

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            for v in self.scaled(r):
                h = h * 0.5 + v
        return h


@program(*ROWS)
class PythonCounterWhileNoBreak(HybridBlock):
    """A Python-counter while over a tensor body, no break (unrolled as Python)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        i = 0
        while i < 3:
            if F.sum(h) > 0.5:
                h = h * 0.5
            else:
                h = h + F.mean(x, axis=0)
            i += 1
        return h


@program(*ROWS)
class InnerBreakOnPythonCounter(HybridBlock):
    """An inner for over the rows that breaks on a Python counter, the outer loop a tensor
    for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            n = 0
            for k in range(4):
                if n == 2:
                    break
                h = h + r * k
                n += 1
        return h


@program(*ROWS)
class PythonCounterBeforeTensorContinue(HybridBlock):
    """i += 1 before a tensor continue in a Python-counter while (the counter is the same on
    both paths)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        i = 0
        while i < 3:
            i += 1
            if F.sum(h) > 0.5:
                h = h * 0.5
                continue
            h = h + F.mean(x, axis=0) * i
        return h


@program(*ROWS)
class RangeContinueThenAppend(HybridBlock):
    """for t in range(3) with a tensor continue before an append: the list's length depends
    on values."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x[0] * 0
        for t in range(3):
            h = F.tanh(h + F.mean(x, axis=0))
            if F.sum(h) < 0:
                continue
            outs.append(h)
        return F.stack(*outs) if outs else h


@program(*ROWS)
class DefaultArgOfWhileState(HybridBlock):
    """lambda v, s=h: v + s defined in each step of a tensor while (the default is the
    step's h)."""

    @autograph(max_iterations=5)
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = F.mean(x, axis=0)
        while i < 3:
            add = lambda v, s=h: v * 0.5 + s  # noqa: E731
            h = F.tanh(add(h))
            i = i + 1
        return h


@program(*ROWS)
class NestedDefReadsRowInSameStep(HybridBlock):
    """def scaled(v): return v * r inside a tensor for, called in the same step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0 + 1
        for r in x:
            def scaled(v):
                return v * r
            h = F.tanh(scaled(h) + r)
        return h


@program(*ROWS)
class FibonacciSwapInWhile(HybridBlock):
    """a, b = b, a + b in a tensor while (a swap of two carried arrays)."""

    @autograph(max_iterations=6)
    def hybrid_forward(self, F, x):
        a, b = x[0] * 0, F.mean(x, axis=0)
        i = F.zeros((1,))
        while i < 4:
            a, b = b, a * 0.5 + b
            i = i + 1
        return a, b


@program(*ROWS)
class DictCallStateItemAssign(HybridBlock):
    """state = dict(h=...) (the dict() call) then state["h"] = ... in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        state = dict(h=x[0] * 0)
        for r in x:
            state["h"] = state["h"] * 0.5 + r
        return state["h"]


@program([rand(3, 4).astype(np.float16)], [rand(5, 4, seed=1).astype(np.float16)])
class Float16WhileCounter(HybridBlock):
    """A float16 counter and state in a tensor while, compared with a float16 bound."""

    @autograph(max_iterations=6)
    def hybrid_forward(self, F, x):
        i = F.zeros((1,), dtype="float16")
        h = x[0] * 0
        while i < F.shape_array(x)[0:1].astype("float16"):
            h = h * 0.5 + F.take(x, i).reshape((-1,))
            i = i + 1
        return h


@program([rand(3, 4).astype(np.float64)], [-np.abs(rand(2, 4, seed=1)).astype(np.float64)])
class Float64CondInFor(HybridBlock):
    """float64 rows under a tensor if in a tensor for, a float64 constant added."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((4,), dtype="float64")
        for r in x:
            if F.sum(r) > 0:
                h = h + r * 2
            else:
                h = h - F.ones((4,), dtype="float64")
        return h


@program([rand(3, 4).astype(np.float16)], [rand(2, 4, seed=1).astype(np.float16)])
class Float16ScalarArithmetic(HybridBlock):
    """float16 rows scaled and shifted by Python numbers in a tensor for (MXNet's scalar
    operators: _mul_scalar, _plus_scalar)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            h = h * 0.5 + r + 1
        return h
