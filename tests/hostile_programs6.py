"""Issue 24, fourth round (2/2): Python values in loop states (None, strings, ints), the
block's methods and properties read in loops, dict-valued states updated in place, spread,
popped and re-inserted (key order changing between iterations), ``len``/``range`` of tensors
whose lengths change from call to call, gluon_cf's ops with F.contrib's signatures and nested
list/tuple states (the oracle: MXNet's own F.contrib ops), recursion with loops in its body,
exported models with constant outputs, and call histories on one hybridized block: calls of
different lengths and masks, and calls that fail (cleanly) followed by calls that work.
``PROGRAMS`` maps each block class to its input lists (hostile_harness.classify runs them)."""
import numpy as np
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness
from hostile_programs3 import _contrib_oracle

PROGRAMS, program = hostile_harness.program_registry()


_rand = hostile_harness.rand
_f = hostile_harness.floats


# rows (T, 4): lengths change from call to call, positive then negative sums
ROWS = ([_rand(3, 4)], [_rand(5, 4, seed=1) * 2], [-np.abs(_rand(2, 4, seed=2))], [_rand(1, 4)])
# rows (T, 4) and a 0/1 mask (T,)
MASKED = ([_rand(4, 4), _f(1, 0, 1, 1)], [_rand(2, 4, seed=1), _f(0, 0)],
          [_rand(3, 4, seed=2), _f(1, 1, 1)])


# ------------------------------------------------------------------------- Python values in state

@program(*ROWS)
class PreviousRowStartsAsNone(HybridBlock):
    """prev = None before the loop, a row after the first step (PyTorch's 'if prev is not
    None' idiom)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        prev = None
        for r in x:
            if prev is not None:
                h = h + prev * r
            prev = r
        return h


@program(*ROWS)
class ModeStringReadInLoop(HybridBlock):
    """A decoding mode string chosen before the loop and compared inside it."""

    def __init__(self, mode="sample"):
        super().__init__()
        self.mode = mode

    @autograph
    def hybrid_forward(self, F, x):
        mode = self.mode
        h = x[0] * 0
        for r in x:
            if mode == "greedy":
                h = F.maximum(h, r)
            else:
                h = h * 0.5 + F.tanh(r)
        return h


@program(*ROWS)
class ModeStringChangesInLoop(HybridBlock):
    """The mode string switches after the first step ('first' then 'rest')."""

    @autograph
    def hybrid_forward(self, F, x):
        mode = "first"
        h = x[0] * 0
        for r in x:
            h = h + r if mode == "first" else h * r
            mode = "rest"
        return h


@program(*ROWS)
class IntStepIndexesPythonList(HybridBlock):
    """A Python int step counter indexing a list of per-step scales."""
    SCALES = [1.0, 0.5, 0.25, 0.125, 0.0625]

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        k = 0
        for r in x:
            h = h + self.SCALES[k] * r
            k += 1
        return h, F.ones((1,)) * k


@program(*ROWS)
class TemperaturePropertyInLoop(HybridBlock):
    """A property of the block (a Python float) read in every step, and a method with a
    tensor if of its own."""

    def __init__(self):
        super().__init__()
        self.base = 4.0

    @property
    def temperature(self):
        return self.base / 2

    def clip(self, F, h):
        if F.norm(h) > 1.5:
            return h / F.norm(h)
        return h

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            h = self.clip(F, h + F.softmax(r / self.temperature))
        return h


@program(*ROWS)
class MethodWithEarlyReturnInWhile(TemperaturePropertyInLoop):
    """The same method called from a while over a tensor counter."""

    @autograph(max_iterations=6)
    def hybrid_forward(self, F, x):
        n = F.shape_array(x)[0:1].astype("float32")
        i = F.zeros((1,))
        h = x[0] * 0
        while i < n:
            h = self.clip(F, h * self.temperature + F.take(x, i).reshape((-1,)))
            i = i + 1
        return h


# ------------------------------------------------------------------------- dict states

@program(*ROWS)
class DictAugAssignInWhileWithBreak(HybridBlock):
    """state["h"] += r in a while over a counter that breaks on the state's norm."""

    @autograph(max_iterations=6)
    def hybrid_forward(self, F, x):
        state = {"h": x[0] * 0, "n": F.zeros((1,))}
        while state["n"] < F.shape_array(x)[0:1].astype("float32"):
            state["h"] += F.take(x, state["n"]).reshape((-1,))
            state["n"] += 1
            if F.norm(state["h"]) > 2:
                break
        return state["h"], state["n"]

    def oracle_where_plain_fails(self, F, x):
        """Plain MXNet refuses += on a recorded NDArray; converted it is out of place (NOTE
        [autograph dict items])."""
        state = {"h": x[0] * 0, "n": F.zeros((1,))}
        while state["n"] < F.shape_array(x)[0:1].astype("float32"):
            state["h"] = state["h"] + F.take(x, state["n"]).reshape((-1,))
            state["n"] = state["n"] + 1
            if F.norm(state["h"]) > 2:
                break
        return state["h"], state["n"]


@program(*ROWS)
class DictSpreadUpdateInLoop(HybridBlock):
    """state = {**state, "h": ...} each step, the other keys carried along."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0] * 0, "c": x[0], "steps": F.zeros((1,))}
        for r in x:
            state = {**state, "h": F.tanh(state["h"] + r + state["c"])}
            state = {**state, "steps": state["steps"] + 1}
        return state["h"] * state["steps"], state["c"]


@program(*ROWS)
class DictPopReinsertReordersKeys(HybridBlock):
    """state["h"] = state.pop("h") + r moves 'h' to the end: the key order changes after the
    first step."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0] * 0, "c": x[0]}
        for r in x:
            state["h"] = state.pop("h") + r * state["c"]
            state["c"] = F.tanh(state["c"] + r)
        return state["h"] - state["c"]


@program(*ROWS)
class DictUpdateMethodInTensorIf(HybridBlock):
    """state.update(...) under a tensor if inside a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0] * 0, "hits": F.zeros((1,))}
        for r in x:
            if F.sum(r) > 0:
                state.update(h=state["h"] + r, hits=state["hits"] + 1)
            else:
                state.update(h=state["h"] * 0.5)
        return state["h"], state["hits"]


@program(*ROWS)
class DictComprehensionState(HybridBlock):
    """Every value of the state decayed by a dict comprehension each step."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"fast": x[0] * 0, "slow": x[0] * 0}
        for r in x:
            rates = {"fast": 0.5, "slow": 0.9}
            state = {k: v * rates[k] + r * (1 - rates[k]) for k, v in state.items()}
        return state["fast"] - state["slow"]


@program(*ROWS)
class DictOfListsState(HybridBlock):
    """A dict holding a list of layer states and a step count."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"layers": [x[0] * 0, x[0] * 0], "n": F.zeros((1,))}
        for r in x:
            first = F.tanh(state["layers"][0] + r)
            state = {"layers": [first, state["layers"][1] + first], "n": state["n"] + 1}
        return state["layers"][1] / state["n"]


# ------------------------------------------------------------------------- len / range of tensors

@program(*ROWS)
class RangeLenRunTimeLengths(HybridBlock):
    """for t in range(len(x)) on inputs whose length changes from call to call."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for t in range(len(x)):
            h = h * 0.5 + x[t]
        return h


@program(*ROWS)
class RangeLenDifferences(HybridBlock):
    """for t in range(1, len(x)): x[t] - x[t - 1]."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for t in range(1, len(x)):
            h = h + F.abs(x[t] - x[t - 1])
        return h


@program(*ROWS)
class LenInWhileCondition(HybridBlock):
    """while i < len(x) with a tensor counter."""

    @autograph(max_iterations=6)
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = x[0] * 0
        while i < len(x):
            h = h + F.take(x, i).reshape((-1,)) * (i + 1)
            i = i + 1
        return h


@program(*MASKED)
class RangeOfMaskSum(HybridBlock):
    """for t in range(F.sum(mask)): a range over a tensor's value."""

    @autograph(max_iterations=5)
    def hybrid_forward(self, F, x, mask):
        h = x[0] * 0
        for t in range(F.sum(mask)):
            h = h + x[t]
        return h


@program(*ROWS)
class LenTimesWeight(HybridBlock):
    """len(x) used as a number: the mean over rows written sum / len(x)."""

    @autograph
    def hybrid_forward(self, F, x):
        total = x[0] * 0
        for r in x:
            total = total + r
        return total / len(x)


@program(*ROWS)
class EnumerateFromOne(HybridBlock):
    """enumerate(x, 1): the step number weights each row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for i, r in enumerate(x, 1):
            h = h + r / i
        return h


# ------------------------------------------------------------------------- F.contrib signatures

@program(*MASKED)
class ForeachNestedListStates(HybridBlock):
    """gluonnlp-style body: data [x, mask], states [[h, c], n] (MXNet's foreach is the oracle)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, mask):
        def body(data, states):
            r, m = data
            (h, c), n = states
            h2 = F.tanh(h + r + c)
            keep = F.broadcast_like(m.reshape((1,)), h2)
            return [h2 * keep, keep], [[F.where(keep > 0, h2, h), c * 0.9], n + m]
        (outs, keeps), ((h, c), n) = gluon_cf.foreach(
            body, [x, mask], [[F.mean(x, axis=0) * 0, F.ones((4,))], F.zeros((1,))])
        return outs, keeps, h + c, n


@program(*ROWS)
class WhileLoopNestedVarsPadded(HybridBlock):
    """while_loop with loop_vars (i, [h, (a, b)]) and step outputs, max_iterations=4 (the
    outputs' rows past the 3 steps are padding, left undefined by MXNet: not returned)."""

    def hybrid_forward(self, F, x):
        def cond(i, state):
            return i < 3

        def func(i, state):
            h, (a, b) = state
            h = F.tanh(h + a * b)
            return [h, a + b], [i + 1, [h, (a * 0.5, b + h)]]
        outs, (i, (h, (a, b))) = gluon_cf.while_loop(
            cond, func, [F.zeros((1,)), [F.max(x, axis=0), (F.mean(x, axis=0), F.zeros((4,)))]],
            max_iterations=4)
        return F.slice_axis(outs[0], axis=0, begin=0, end=3), \
            F.slice_axis(outs[1], axis=0, begin=0, end=3), h + a - b, i


@program(*ROWS)
class CondNestedTupleOutputs(HybridBlock):
    """cond whose branches return ((a, b), c)."""

    def hybrid_forward(self, F, x):
        s = F.sum(x)
        m = F.max(x, axis=0)
        (a, b), c = gluon_cf.cond(s > 0, lambda: ((m * 2, m + 1), s * 2),
                                  lambda: ((m - 1, m * m), s - 1))
        return F.broadcast_add(a * b, c)


@program([_rand(3, 4)], [np.zeros((0, 4), np.float32)], [_rand(2, 4, seed=1)])
class ForeachOverZeroRowsThenRows(HybridBlock):
    """foreach over data that has no rows on the second call (MXNet's own foreach fails on
    it, eagerly and in a graph), then rows again."""
    NO_GRAD = (0,)    # (MXNet cannot attach a gradient to an array with no rows)

    def hybrid_forward(self, F, x):
        outs, h = gluon_cf.foreach(lambda r, h: (r * 2, h + r), x, F.ones((4,)))
        return outs, h


for _cls in (ForeachNestedListStates, WhileLoopNestedVarsPadded, CondNestedTupleOutputs,
             ForeachOverZeroRowsThenRows):
    _cls.plain_forward = _contrib_oracle


# ------------------------------------------------------------------------- recursion with loops

# chains: x (n, 3), next index (-1 ends), a start
CHAINS = ([_rand(4, 3), _f(1, 2, 3, -1), _f(0)], [_rand(4, 3, seed=1), _f(-1, 0, 1, 2), _f(3)],
          [_rand(4, 3, seed=2), _f(2, -1, 1, -1), _f(0)])


def _chain_ids(nxt, start):
    ids, i = [], int(start.asnumpy()[0])
    nxt = [int(v) for v in nxt.asnumpy()]
    while i >= 0:
        ids.append(i)
        i = nxt[i]
    return ids


@program(*CHAINS)
class RecursionWithForeachBody(HybridBlock):
    """A recursive walk whose body smooths the node's row with a foreach over its features."""
    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, x, nxt, start):
        @gluon_cf.recursive
        def walk(i):
            row = F.take(x, i).reshape((-1,))
            outs, acc = gluon_cf.foreach(lambda v, a: (a * 0.5 + v, a * 0.5 + v), row,
                                         F.zeros((1,)))
            here = F.broadcast_add(outs.reshape((1, -1)), acc)
            return gluon_cf.cond(F.take(nxt, i) < 0, lambda: here,
                                 lambda: F.tanh(here + walk(F.take(nxt, i))))
        return walk(start)

    def plain_forward(self, F, x, nxt, start):
        ids = _chain_ids(nxt, start)

        def smooth(i):
            acc, outs = F.zeros((1,)), []
            for v in x[i]:
                acc = acc * 0.5 + v.reshape((1,))
                outs.append(acc)
            return F.concat(*outs, dim=0).reshape((1, -1)) + acc
        h = smooth(ids[-1])
        for i in reversed(ids[:-1]):
            h = F.tanh(smooth(i) + h)
        return h


@program(*CHAINS)
class RecursionWithAutographForInBody(HybridBlock):
    """The same walk written with autograph: a tensor for in the recursive body, an if."""
    NO_GRAD = (1, 2)

    @autograph
    def hybrid_forward(self, F, x, nxt, start):
        @gluon_cf.recursive
        def walk(i):
            acc = F.zeros((1,))
            outs = []
            for v in F.take(x, i).reshape((-1,)):
                acc = acc * 0.5 + v
                outs.append(acc)
            here = F.broadcast_add(F.stack(*outs).reshape((1, -1)), acc)
            if F.take(nxt, i) < 0:
                return here
            return F.tanh(here + walk(F.take(nxt, i)))
        return walk(start)

    plain_forward = RecursionWithForeachBody.plain_forward


@program(*CHAINS)
class RecursionReturnsConstantLeaf(HybridBlock):
    """A leaf that returns a constant (no input reaches it) under a loop over the chain."""
    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, x, nxt, start):
        @gluon_cf.recursive
        def walk(i):
            return gluon_cf.cond(F.take(nxt, i) < 0, lambda: F.ones((1, 3)) * 0.5,
                                 lambda: F.take(x, i) * walk(F.take(nxt, i)))
        return walk(start), F.ones((2,))

    def plain_forward(self, F, x, nxt, start):
        ids = _chain_ids(nxt, start)
        h = F.ones((1, 3)) * 0.5
        for i in reversed(ids[:-1]):
            h = x[i:i + 1] * h
        return h, F.ones((2,))


# ------------------------------------------------------------------------- constants under export

@program(*ROWS)
class ConstantOutputsBesideLoop(HybridBlock):
    """Outputs that depend on no input: a constant and a counter loop over constants."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            h = h + r
        k = F.zeros((1,))
        c = F.ones((2,))
        while k < 3:
            c = c * 2
            k = k + 1
        return h, F.ones((1,)) * 3, c


@program(*ROWS)
class ConstantInOneBranch(HybridBlock):
    """A tensor if returning a constant row in one branch and the input in the other."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            y = F.ones((1, 4))
        else:
            y = x[0:1] * 2
        return y


# ------------------------------------------------------------------------- call histories

@program([_rand(3, 4), _f(-1)], [_rand(3, 4, seed=1), _f(2)], [_rand(5, 4, seed=2), _f(-3)],
         [_rand(2, 4, seed=3), _f(1)])
class RaiseOnBadArgumentThenWork(HybridBlock):
    """A ValueError the user raises under a tensor if (a negative step count), then calls
    that work: the block stays usable after its failed calls."""
    NO_GRAD = (1,)

    @autograph(max_iterations=4)
    def hybrid_forward(self, F, x, steps):
        if F.sum(steps) < 0:
            raise ValueError("steps must be >= 0")
        i = F.zeros((1,))
        h = x[0] * 0
        while i < steps:
            h = F.tanh(h + F.take(x, i).reshape((-1,)))
            i = i + 1
        return h


@program([np.zeros((0, 4), np.float32)], [_rand(3, 4)], [np.zeros((0, 4), np.float32)],
         [_rand(5, 4, seed=1)])
class ZeroRowsThenRows(HybridBlock):
    """A sum loop over rows called with no rows (plain Python returns zeros), then rows."""
    NO_GRAD = (0,)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((4,))
        for r in x:
            h = h + r * r
        return h


@program([_rand(2, 4), _f(1, 0)], [_rand(3, 4, seed=1), _f(0, 0, 1)], [_rand(2, 4, seed=2),
                                                                        _f(1, 1)])
class MaskShapesChangeBetweenCalls(HybridBlock):
    """Masks of changing batch size on one block: rows masked out keep their state."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, mask):
        h = x * 0
        for k in range(3):
            h = F.where(F.broadcast_like(mask.reshape((-1, 1)), h) > 0, F.tanh(h + x * k), h)
            if F.sum(h) > 1:
                h = h * 0.5
        return h


@program(*MASKED)
class ContinueOnMaskedStepsCollect(HybridBlock):
    """Masked steps skipped with continue; kept steps summed and counted."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, mask):
        h = x[0] * 0
        n = F.zeros((1,))
        for t in range(3):
            if F.sum(F.take(mask, F.ones((1,)) * min(t, 1))) == 0:
                continue
            h = h * 0.5 + F.take(x, F.ones((1,)) * t).reshape((-1,))
            n = n + 1
        return h, n


@program(*ROWS)
class BlockGradStateInLoop(HybridBlock):
    """A running mean carried under F.BlockGrad (no gradient through the statistics)."""

    @autograph
    def hybrid_forward(self, F, x):
        mean = x[0] * 0
        out = x[0] * 0
        for r in x:
            out = out + (r - F.BlockGrad(mean))
            mean = mean * 0.9 + r * 0.1
        return out, mean


@program([_rand(2, 5), _rand(2, 4, seed=1)], [_rand(2, 5, seed=2) * 3, _rand(2, 4, seed=3)])
class BeamReorderStatesWithTake(HybridBlock):
    """A beam step's topk over flattened scores, then the states reordered with F.take by the
    chosen beams (beam = index // vocab) and the tokens kept as index % vocab."""
    NO_GRAD = ()

    @autograph
    def hybrid_forward(self, F, logits, h):
        scores = F.zeros((2, 1))
        tokens = []
        for t in range(3):
            total = F.broadcast_add(scores, F.log_softmax(logits + h.sum(axis=1, keepdims=True)))
            best, idx = F.topk(total.reshape((1, -1)), k=2, ret_typ="both")
            beam = F.floor(idx / 5).reshape((-1,))
            tokens.append(idx.reshape((-1,)) - beam * 5)
            h = F.tanh(F.take(h, beam) + 0.1)
            scores = best.reshape((-1, 1))
        return scores, F.stack(*tokens), h
