"""Issue 24, eighth round: PyTorch code ported to Gluon the way people port it: ``new_zeros``
as ``F.zeros_like``, ``torch.where`` on loop carries, lists of tuples and dicts of states keyed
by strings built in the loop, early ``return``/``continue``/``break`` in tensor loops (nested,
with ``else``), ``while`` conditions mixing Python and tensor values with and/or, ``assert`` and
``print`` of tensors in bodies, ``try``/``except`` around a step, generator and recursive
helpers called on tensors, default-argument lambdas made in loops, ``functools.partial``,
static and class methods, ``super()`` in ``hybrid_forward``, properties, slices, negative
indices, ``reversed``/``len`` of what a tensor loop collected, tuple unpacking of carries,
``outs[i] += ...``, ``extend``/``insert``/``+=`` on collected lists, beam and greedy decoders
with ``topk``/``argmax`` and early stop, masked attention steps, and users' own
``gluon_cf.recursive`` functions. ``PROGRAMS`` maps each block class to its input lists
(``hostile_harness.classify`` runs them plain, eager, hybridized with gradients, exported)."""
import functools
import math

import mxnet as mx
import numpy as np
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

# rows (T, 3) of several lengths, sums of both signs
ROWS = ([rand(4, 3)], [rand(6, 3, seed=1) * 2], [-np.abs(rand(3, 3, seed=2))],
        [np.abs(rand(2, 3, seed=3)) + 0.1])
# a state (3,) and rows (T, 3)
STATE_ROWS = ([rand(3, seed=4), rand(4, 3, seed=5)], [rand(3, seed=6) * 3, rand(2, 3, seed=7)],
              [-np.abs(rand(3, seed=8)), rand(5, 3, seed=9)])
# logits (T, V) of a toy decoder whose end token 0 is reached at different steps
LOGITS = ([rand(6, 4, seed=10)], [rand(4, 4, seed=11) * 3], [rand(3, 4, seed=12)])
# a batch (B, T, 3) and per-row lengths, one 0
LENGTHS = ([rand(2, 4, 3, seed=13), floats(3, 0)], [rand(3, 3, 3, seed=14), floats(1, 3, 2)])
# a square-ish matrix (R, C) for nested loops
GRID = ([rand(3, 4, seed=15)], [rand(2, 5, seed=16) * 2], [np.abs(rand(4, 3, seed=17))])


def _double_then(v, k):
    """A plain helper: recursion on a Python int, called on a tensor."""
    if k == 0:
        return v
    return _double_then(v * 2 - 0.5, k - 1)


def _pairs(v):
    """A generator helper."""
    yield v
    yield v * 0.5
    yield -v


def _masked_fill(v, mask, value):
    """torch's masked_fill."""
    return v * (1 - mask) + mask * value


# ------------------------------------------------------------------ torch idioms on carries

@program(*ROWS)
class NewZerosThenWhereCarry(HybridBlock):
    """acc = x.new_zeros(...) (F.zeros_like of a row), torch.where on the carry each step."""

    @autograph
    def hybrid_forward(self, F, x):
        acc = F.zeros_like(x[0])
        for row in x:
            acc = F.where(row > 0, acc + row, acc * 0.5)
        return acc


@program(*ROWS)
class WhereOnScalarCarry(HybridBlock):
    """A scalar-like carry (1,) updated by where of its own comparison."""

    @autograph
    def hybrid_forward(self, F, x):
        best = F.zeros((1,)) - 10
        for row in x:
            s = F.sum(row, keepdims=True).reshape((1,))
            best = F.where(s > best, s, best)
        return best


@program(*ROWS)
class MaskedFillHelperInLoop(HybridBlock):
    """masked_fill as a helper, called in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones_like(x[0])
        for row in x:
            h = F.tanh(_masked_fill(h, row > 0, -1.0) + row)
        return h


@program(*ROWS)
class ListOfTuplesCollected(HybridBlock):
    """outs.append((h, c)) per step; the h's and c's stacked after the loop by comprehension."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        c = F.zeros_like(x[0])
        outs = []
        for row in x:
            c = c * 0.5 + row
            h = F.tanh(c)
            outs.append((h, c))
        return F.stack(*[o[0] for o in outs]), F.stack(*[o[1] for o in outs])


@program(*ROWS)
class ListOfTuplesUnpackedInFor(HybridBlock):
    """outs of (h, c) pairs, then `for h, c in outs:` summed."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        outs = []
        for row in x:
            h = h * 0.5 + row
            outs.append((h, h * h))
        total = F.zeros_like(h)
        for a, b in outs:
            total = total + a - b
        return total


@program(*STATE_ROWS)
class DictStatesKeyedByFString(HybridBlock):
    """states[f"layer{k}"] for two layers updated in a tensor for."""

    @autograph
    def hybrid_forward(self, F, h0, x):
        states = {f"layer{k}": h0 * (k + 1) for k in range(2)}
        for row in x:
            for k in range(2):
                key = f"layer{k}"
                states[key] = F.tanh(states[key] + row * (k + 1))
        return states["layer0"], states["layer1"]


@program(*STATE_ROWS)
class DictItemsRewrittenInLoop(HybridBlock):
    """for name, v in states.items(): new[name] = ... inside a tensor loop."""

    @autograph
    def hybrid_forward(self, F, h0, x):
        states = {"h": h0, "c": h0 * 0}
        for row in x:
            new = {}
            for name, v in states.items():
                new[name] = v * 0.5 + row
            states = new
        return states["h"] + states["c"]


# ------------------------------------------------------------------ jumps

@program(*ROWS)
class EarlyReturnOfTupleInFor(HybridBlock):
    """return (h, step) inside a tensor for when the sum turns negative, else after the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        n = F.zeros((1,))
        for row in x:
            h = h + row
            n = n + 1
            if F.sum(h) < -0.5:
                return h * 2, n
        return h, n


@program(*ROWS)
class ContinueSkipsNegativeRowsCollect(HybridBlock):
    """continue on a tensor condition, then h updated and kept; mean of h over kept steps."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        kept = F.zeros((1,))
        for row in x:
            if F.sum(row) < 0:
                continue
            h = h + row
            kept = kept + 1
        return h / F.maximum(kept, F.ones_like(kept))


@program(*GRID)
class NestedTensorLoopsInnerBreakCarry(HybridBlock):
    """for row in x: for v in row: break on v > 0.5; the outer carry sums what the inner saw."""

    @autograph
    def hybrid_forward(self, F, x):
        total = F.zeros((1,))
        for row in x:
            part = F.zeros((1,))
            for v in row:
                if F.sum(v) > 0.5:
                    break
                part = part + v
            total = total * 0.5 + part
        return total


@program(*GRID)
class NestedTensorLoopsInnerContinueOuterBreak(HybridBlock):
    """inner continue on negative values, outer break once the total passes 1."""

    @autograph
    def hybrid_forward(self, F, x):
        total = F.zeros((1,))
        for row in x:
            for v in row:
                if F.sum(v) < 0:
                    continue
                total = total + v
            if F.sum(total) > 1:
                break
        return total


@program(*STATE_ROWS)
class WhileAndOrPythonAndTensor(HybridBlock):
    """while i < 2 and (F.sum(h) < 3 or self.always): a tensor counter, a tensor and a Python
    attribute (False)."""
    always = False

    @autograph
    def hybrid_forward(self, F, h, x):
        i = F.zeros((1,))
        while i < 2 and (F.sum(h) < 3 or self.always):
            h = h + F.abs(F.take(x, i)[0])
            i = i + 1
        return h, i


@program(*STATE_ROWS)
class WhileTensorAndNotDone(HybridBlock):
    """while t < T and not done, done a tensor flag, t a tensor counter."""

    @autograph
    def hybrid_forward(self, F, h, x):
        t = F.zeros((1,))
        done = F.zeros((1,))
        while t < 2 and not done:
            h = h * 0.9 + F.take(x, t)[0]
            done = F.sum(h) > 1
            t = t + 1
        return h, t


@program(*STATE_ROWS)
class ForElseWithTensorBreakAndContinue(HybridBlock):
    """for/else: continue on some rows, break on others, the else adds a bonus."""

    @autograph
    def hybrid_forward(self, F, h, x):
        for row in x:
            if F.sum(row) < -0.5:
                continue
            h = h + row
            if F.sum(h) > 2:
                break
        else:
            h = h + 10
        return h


# ------------------------------------------------------------------ statements in bodies

@program(*ROWS)
class AssertShapeInTensorLoop(HybridBlock):
    """assert on a Python shape fact inside a tensor loop (torch code asserts shapes)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            assert len(row.shape) == 1, "rows must be vectors"
            h = h + row * 2
        return h


@program(*ROWS)
class AssertOnTensorBeforeLoop(HybridBlock):
    """assert F.sum(x * x) >= 0 (true for every input) before a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        assert F.sum(x * x) >= 0, "a square is not negative"
        h = F.zeros_like(x[0])
        for row in x:
            h = F.maximum(h, row)
        return h


@program(*ROWS)
class PrintFStringInTensorLoop(HybridBlock):
    """print(f"...") of the step's tensor, debug output left in."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = h + row
            print(f"h is {h.shape if hasattr(h, 'shape') else h}", end="\r")
        return h


@program(*ROWS)
class TryExceptAroundPythonLookupInLoop(HybridBlock):
    """try/except KeyError around a dict lookup (Python) in a tensor loop."""
    SCALES = {"a": 2.0}

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            try:
                s = self.SCALES["b"]
            except KeyError:
                s = 0.5
            h = h * s + row
        return h


@program(*ROWS)
class GeneratorHelperInsideTensorLoop(HybridBlock):
    """for v in _pairs(h): ... a Python loop over a generator of the carry, in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones_like(x[0])
        for row in x:
            acc = F.zeros_like(h)
            for v in _pairs(h):
                acc = acc + v
            h = F.tanh(acc + row)
        return h


@program(*ROWS)
class SumOfGeneratorHelperInLoop(HybridBlock):
    """sum(_pairs(row)) in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = h + sum(_pairs(row))
        return h


@program(*ROWS)
class RecursivePlainHelperInLoop(HybridBlock):
    """A helper recursing on a Python int, called on the carry in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = F.tanh(_double_then(h, 2) + row)
        return h


@program(*ROWS)
class RecursiveHelperWithTensorIf(HybridBlock):
    """A nested recursive helper (Python depth) whose body has a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        def walk(v, depth):
            if depth == 0:
                return v
            if F.sum(v) > 0:
                v = v - 0.25
            else:
                v = v + 0.5
            return walk(v, depth - 1)
        h = F.zeros_like(x[0])
        for row in x:
            h = walk(h + row, 2)
        return h


# ------------------------------------------------------------------ closures and callables

@program(*ROWS)
class DefaultArgLambdasMadeInLoop(HybridBlock):
    """fs = [lambda v, k=k: v * k ...] made in a Python loop, applied in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        fs = []
        for k in range(1, 4):
            fs.append(lambda v, k=k: v * k)
        h = F.zeros_like(x[0])
        for row in x:
            for f in fs:
                h = F.tanh(f(h) + row)
        return h


@program(*ROWS)
class DefaultArgLambdaMadeInTensorLoop(HybridBlock):
    """A lambda with a default from the loop row, made and called in the same step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            f = lambda v, r=row: v * 0.5 + r     # noqa: E731
            h = f(h)
        return h


@program(*ROWS)
class PartialOfHelperWithTensorKeyword(HybridBlock):
    """functools.partial(_masked_fill, value=-2.0) used in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        fill = functools.partial(_masked_fill, value=-2.0)
        h = F.zeros_like(x[0])
        for row in x:
            h = F.tanh(fill(h + row, row < 0))
        return h


@program(*ROWS)
class PartialOfFOperator(HybridBlock):
    """step = functools.partial(F.clip, a_min=-1, a_max=1) in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        step = functools.partial(F.clip, a_min=-0.5, a_max=0.5)
        h = F.zeros_like(x[0])
        for row in x:
            h = step(h + row * 2)
        return h


class _Helpers:
    SCALE = 0.25

    @staticmethod
    def squash(v, F):
        if F.sum(v) > 0:
            return F.tanh(v)
        return v * 0.5

    @classmethod
    def scaled(cls, v):
        return v * cls.SCALE


@program(*ROWS)
class StaticAndClassMethodWithTensorIfInLoop(HybridBlock):
    """A staticmethod with a tensor if and a classmethod reading a class constant, called from
    a tensor loop on another class."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = _Helpers.squash(h + row, F) + _Helpers.scaled(row)
        return h


class _BaseCell(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.proj = nn.Dense(3, in_units=3, flatten=False)

    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = F.tanh(self.proj(row.expand_dims(0))[0] + h)
        return h


@program(*ROWS)
class SuperCallThenTensorIf(_BaseCell):
    """hybrid_forward calls super().hybrid_forward (a loop) then a tensor if on its result."""

    @autograph
    def hybrid_forward(self, F, x):
        h = super().hybrid_forward(F, x)
        if F.sum(h) > 0:
            h = h * 2
        return h


class _ScaledBase(HybridBlock):
    def step(self, F, h, row):
        return h * 0.5 + row


@program(*ROWS)
class SuperMethodCalledInTensorLoop(_ScaledBase):
    """An overriding method calls super().step(...) inside a tensor loop."""

    def step(self, F, h, row):
        out = super().step(F, h, row)
        return F.tanh(out)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = self.step(F, h, row)
        return h


@program(*ROWS)
class PropertyComputedFromAttribute(HybridBlock):
    """A property returning a Python float derived from attributes, read each step."""

    def __init__(self):
        super().__init__()
        self.hidden = 4

    @property
    def scale(self):
        return 1.0 / math.sqrt(self.hidden)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = F.tanh(h + row * self.scale)
        return h


@program(*ROWS)
class ClosureReadsCarryDefinedBeforeLoop(HybridBlock):
    """def energy(): return F.sum(h * h) defined before the loop, called in the loop's if."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones_like(x[0])

        def energy():
            return F.sum(h * h)
        for row in x:
            if energy() > 2:
                h = h * 0.5
            h = h + row
        return h


# ------------------------------------------------------------------ collected outputs

@program(*ROWS)
class NegativeIndexSliceOfCollected(HybridBlock):
    """outs[-2:] and outs[0] after a tensor loop (inputs have >= 2 rows)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros_like(x[0])
        for row in x:
            h = h * 0.5 + row
            outs.append(h)
        return F.stack(*outs[-2:]), outs[0]


@program(*ROWS)
class ReversedCollectedStacked(HybridBlock):
    """F.stack(*reversed(outs)) (a backward direction of a bi-RNN)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros_like(x[0])
        for row in x:
            h = F.tanh(h + row)
            outs.append(h)
        return F.stack(*reversed(outs))


@program(*ROWS)
class LenOfCollectedDividesSum(HybridBlock):
    """sum(outs) / len(outs) after a tensor loop that may break."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            if F.sum(row) < -1:
                break
            outs.append(row * 2)
        if len(outs) == 0:
            return F.zeros_like(x[0])
        return F.add_n(*outs) / len(outs)


@program(*ROWS)
class LastCollectedAfterBreak(HybridBlock):
    """outs[-1] after a loop broken on a tensor condition (at least one append first)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [x[0]]
        h = x[0]
        for row in x:
            h = h + row
            if F.sum(h) > 1:
                break
            outs.append(h)
        return outs[-1] * 3


@program(*ROWS)
class AugmentedItemAfterLoop(HybridBlock):
    """outs[i] += bonus for a Python i, after a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row * 2)
        outs[0] += 1
        outs[-1] *= 3
        return F.stack(*outs)


@program(*ROWS)
class ExtendInTensorLoop(HybridBlock):
    """outs.extend([a, b]) each step."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.extend([row, row * 2])
        return F.stack(*outs)


@program(*ROWS)
class PlusEqualsListInTensorLoop(HybridBlock):
    """outs += [row * 2] each step."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs += [row * 2]
        return F.stack(*outs)


@program(*ROWS)
class InsertAtFrontInTensorLoop(HybridBlock):
    """outs.insert(0, h): a backward RNN prepending its outputs."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros_like(x[0])
        for row in x:
            h = h * 0.5 + row
            outs.insert(0, h)
        return F.stack(*outs)


@program(*ROWS)
class PopLastInTensorLoop(HybridBlock):
    """A stack: push each step, pop when the row sum is negative."""

    @autograph
    def hybrid_forward(self, F, x):
        stack = [F.zeros_like(x[0])]
        for row in x:
            stack.append(row)
            if F.sum(row) < 0:
                stack.pop()
        return stack[-1]


@program(*ROWS)
class ZipCollectedWithReversed(HybridBlock):
    """[a + b for a, b in zip(outs, reversed(outs))] after a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(F.tanh(row))
        return F.stack(*[a + b for a, b in zip(outs, reversed(outs))])


@program(*ROWS)
class MiddleItemOfCollected(HybridBlock):
    """outs[len(outs) // 2] after a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row + 1)
        return outs[len(outs) // 2]


@program(*ROWS)
class WeightedSumGeneratorOverCollected(HybridBlock):
    """sum(w * o for w, o in zip(weights, outs)) after a loop over a Python range."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros_like(x[0])
        for t in range(2):
            h = F.tanh(h + x[t])
            if F.sum(h) > 5:
                h = h * 0
            outs.append(h)
        weights = [0.3, 0.7]
        return sum(w * o for w, o in zip(weights, outs))


# ------------------------------------------------------------------ tuple carries

@program(*STATE_ROWS)
class NestedTupleUnpackOfCarries(HybridBlock):
    """h, (c, n) = ..., a nested tuple of carries swapped each step."""

    @autograph
    def hybrid_forward(self, F, h, x):
        c = h * 0
        n = F.zeros((1,))
        for row in x:
            h, (c, n) = F.tanh(c + row), (h, n + 1)
        return h, c, n


@program(*STATE_ROWS)
class StarredUnpackOfCarries(HybridBlock):
    """first, *rest = states with three carries rotated each step."""

    @autograph
    def hybrid_forward(self, F, h, x):
        states = [h, h * 2, h * 3]
        for row in x:
            first, *rest = states
            states = rest + [F.tanh(first + row)]
        return states[0], states[2]


# ------------------------------------------------------------------ decoders

@program(*LOGITS)
class GreedyArgmaxEarlyStopReturnsTokens(HybridBlock):
    """Greedy over precomputed logits: argmax token collected, stop at the end token 0."""

    @autograph
    def hybrid_forward(self, F, logits):
        tokens = []
        score = F.zeros((1,))
        for t in range(logits.shape[0]):
            tok = F.argmax(logits[t], axis=0)
            score = score + F.max(logits[t], axis=0, keepdims=True)
            tokens.append(tok)
            if F.sum(tok == 0) > 0:
                break
        return score, F.concat(*tokens, dim=0)


@program(*LOGITS)
class TopKTwoBeamsKeepBest(HybridBlock):
    """Two beams: topk of the step's logits each step, cumulative scores, stop when the best
    token is 0."""

    @autograph
    def hybrid_forward(self, F, logits):
        scores = F.zeros((2,))
        t = F.zeros((1,))
        while t < logits.shape[0]:
            row = F.log_softmax(F.take(logits, t)[0])
            top_v = F.topk(row, k=2, ret_typ="value")
            top_i = F.topk(row, k=2, ret_typ="indices")
            scores = scores + top_v
            t = t + 1
            if F.sum(top_i[0] == 0) > 0:
                break
        return scores, t


@program(*LOGITS)
class SampledLikeDecoderWithTemperatureProperty(HybridBlock):
    """Softmax with a temperature read from a property; expected token accumulated; stop when
    the probability of the end token passes 0.4."""

    @property
    def temperature(self):
        return 0.5

    @autograph
    def hybrid_forward(self, F, logits):
        acc = F.zeros((1,))
        for row in logits:
            p = F.softmax(row / self.temperature)
            acc = acc + F.sum(p * F.arange(4))
            if F.sum(F.slice_axis(p, axis=0, begin=0, end=1)) > 0.4:
                break
        return acc


@program(*LOGITS)
class BeamLengthPenaltyAfterLoop(HybridBlock):
    """Beam score divided by a length penalty computed from the Python step count of a
    Python-range loop with a tensor break (the count after the loop is a tensor)."""

    @autograph
    def hybrid_forward(self, F, logits):
        score = F.zeros((1,))
        steps = 0
        for t in range(3):
            score = score + F.max(F.log_softmax(logits[t]), axis=0, keepdims=True)
            steps += 1
            if F.sum(F.argmax(logits[t], axis=0) == 0) > 0:
                break
        return score / ((5 + steps) / 6) ** 0.6


# ------------------------------------------------------------------ attention

@program(*LENGTHS)
class MaskedAttentionPerStepWithMaskedFill(HybridBlock):
    """Per query step, scores masked by masked_fill(-1e9) over each row's length; a row of
    length 0 attends uniformly."""

    @autograph
    def hybrid_forward(self, F, x, lengths):
        steps = F.contrib.arange_like(x, axis=1)
        pad = F.broadcast_greater_equal(steps.reshape((1, -1)), lengths.reshape((-1, 1)))
        ctx = F.zeros_like(x[:, 0, :])
        for t in range(x.shape[1]):
            q = x[:, t, :] + ctx
            score = F.batch_dot(x, q.expand_dims(2)).reshape((0, -1))
            score = _masked_fill(score, pad, -1e9)
            ctx = F.batch_dot(F.softmax(score).expand_dims(1), x).reshape((0, -1))
        return ctx


@program(*LENGTHS)
class AttentionLoopOverBatchRowsWithTensorIf(HybridBlock):
    """for b in range(B): a tensor if on the row's length picks mean pooling or zeros."""

    @autograph
    def hybrid_forward(self, F, x, lengths):
        outs = []
        for b in range(x.shape[0]):
            n = lengths[b]
            if n > 0:
                keep = F.contrib.arange_like(x[b], axis=0) < n
                pooled = F.sum(x[b] * keep.expand_dims(1), axis=0) / n
            else:
                pooled = F.zeros_like(x[b][0])
            outs.append(pooled)
        return F.stack(*outs)


# ------------------------------------------------------------------ Python values in loops

@program(*ROWS)
class MathSqrtScaleAndNumpyScalar(HybridBlock):
    """math.sqrt and numpy float32 scalars multiplying tensors in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        scale = np.float32(1 / math.sqrt(3))
        h = F.zeros_like(x[0])
        for row in x:
            h = F.tanh(h * scale + row * np.float32(0.5))
        return h


@program(*ROWS)
class PythonMinOfCounterAndConstant(HybridBlock):
    """A Python counter clipped by min() picking a weight from a Python list."""

    @autograph
    def hybrid_forward(self, F, x):
        weights = [1.0, 0.5, 0.25]
        h = F.zeros_like(x[0])
        k = 0
        for t in range(x.shape[0]):
            h = h + x[t] * weights[min(k, 2)]
            k += 1
            if F.sum(h) > 3:
                h = h * 0.1
        return h


@program(*ROWS)
class LayerPickedByPythonKeyInLoop(HybridBlock):
    """self.layers[name] picked by a Python string alternating each step of a tensor loop
    (which layer runs at step t is the same in every run: a run-time step would need it)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.even = nn.Dense(3, in_units=3, flatten=False)
            self.odd = nn.Dense(3, in_units=3, flatten=False)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for t in range(x.shape[0]):
            layer = self.even if t % 2 == 0 else self.odd
            h = F.tanh(layer(x[t].expand_dims(0))[0] + h)
            if F.sum(h) > 2:
                break
        return h


@program(*ROWS)
class BlockGradDetachOfCarry(HybridBlock):
    """h = h.detach()-like BlockGrad every other step (truncated backprop)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        k = 0
        for row in x:
            h = F.tanh(h + row)
            if k % 2 == 1:
                h = F.BlockGrad(h)
            k += 1
        return h


@program(*ROWS)
class ClipByNormInTensorLoop(HybridBlock):
    """if F.norm(h) > 1: h = h / F.norm(h) inside a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = h + row * 2
            if F.norm(h) > 1:
                h = h / F.norm(h)
        return h


@program(*ROWS)
class NestedIfInWhileInFor(HybridBlock):
    """A tensor if inside a tensor while inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            k = F.zeros((1,))
            while k < 2:
                if F.sum(row) > 0:
                    h = h + row * 0.5
                else:
                    h = h - 0.1
                k = k + 1
        return h


@program(*ROWS)
class ConditionalExpressionPythonFlagInLoop(HybridBlock):
    """h = h * 2 if self.double else h inside a tensor loop (Python flag)."""
    double = True

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = (h * 0.5 if self.double else h) + row
        return h


@program(*ROWS)
class AnyAllOverPythonListOfTensorChecks(HybridBlock):
    """if any(F.sum(r) > 1 for r in parts): over a Python list of split rows."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            parts = [row * 1, row * 2]
            if any(F.sum(r) > 1 for r in parts):
                h = h + row
            else:
                h = h - row
        return h


@program(*ROWS)
class SplitIntoPythonListThenTensorBreak(HybridBlock):
    """for part in F.split(x[:2], num_outputs=2, axis=0) with a tensor break."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for part in F.split(x[:2], num_outputs=2, axis=0):
            h = h + part[0]
            if F.sum(h) > 0:
                break
        return h


@program(*STATE_ROWS)
class WhileElseContinueTensorCounter(HybridBlock):
    """while/else with a continue: the else always runs (no break)."""

    @autograph
    def hybrid_forward(self, F, h, x):
        t = F.zeros((1,))
        while t < 2:
            t = t + 1
            if F.sum(h) > 1:
                continue
            h = h + F.take(x, t - 1)[0]
        else:
            h = h * 3
        return h, t


@program(*ROWS)
class ReversedRangeWithTensorBreak(HybridBlock):
    """for t in reversed(range(x.shape[0])) with a tensor break."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for t in reversed(range(x.shape[0])):
            h = h * 0.5 + x[t]
            if F.sum(h) > 1:
                break
        return h


@program(*ROWS)
class RangeWithStepAndTensorContinue(HybridBlock):
    """for t in range(0, n, 2): every other row, continue on a tensor condition."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for t in range(0, x.shape[0], 2):
            if F.sum(x[t]) < 0:
                continue
            h = h + x[t]
        return h


@program(*ROWS)
class DivmodOfPythonCounterInTensorLoop(HybridBlock):
    """q, r = divmod(k, 2) picking scales in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        k = 0
        for row in x:
            q, r = divmod(k, 2)
            h = h * (0.5 + r) + row * (q + 1)
            k += 1
        return h


# ------------------------------------------------------------------ users' recursion

# binary forests: features (N, 3), left/right child (-1 for a leaf), roots
_X = rand(5, 3, seed=20)
FOREST = ([_X, floats(-1, -1, 0, -1, 2), floats(-1, -1, 1, -1, 3), floats(4)],
          [_X, floats(-1, -1, 0, -1, -1), floats(-1, -1, 1, -1, -1), floats(2)],
          [_X, floats(-1, -1, 0, -1, 2), floats(-1, -1, 1, -1, 3), floats(0)])


def _plain_tree(F, x, left, right, roots, combine, leaf):
    lt = [int(v) for v in left.asnumpy()]
    rt = [int(v) for v in right.asnumpy()]

    def node(i):
        here = F.take(x, F.array([i]))
        if lt[i] < 0:
            return leaf(F, here)
        return combine(F, here, node(lt[i]), node(rt[i]))
    return F.concat(*[node(int(r)) for r in roots.asnumpy()], dim=0)


@program(*FOREST)
class RecursiveWithHelperHavingTensorIf(HybridBlock):
    """A recursive function combining children through a user helper with a tensor if."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @autograph
        def mix(F, here, a, b):
            if F.sum(a) > F.sum(b):
                return F.tanh(here + a)
            return F.tanh(here + b)

        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: here * 2,
                                 lambda: mix(F, here, node(F.take(left, idx)),
                                             node(F.take(right, idx))))
        return gluon_cf.foreach(lambda r, _: (node(r.reshape((1,))), []), roots, [])[0] \
            .reshape((-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        def combine(F, here, a, b):
            return F.tanh(here + (a if F.sum(a).asscalar() > F.sum(b).asscalar() else b))
        return _plain_tree(F, x, left, right, roots, combine, lambda F, h: h * 2)


@program(*FOREST)
class RecursiveDepthCountedInTuple(HybridBlock):
    """Returns (value, depth) and weights the value by 1 / (1 + depth)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)

            def inner():
                a, da = node(F.take(left, idx))
                b, db = node(F.take(right, idx))
                d = F.maximum(da, db) + 1
                return here + F.broadcast_div(a + b, 1 + d), d
            return gluon_cf.cond(F.take(left, idx) < 0,
                                 lambda: (here, F.zeros((1,))), inner)
        out, _ = gluon_cf.foreach(lambda r, _: (node(r.reshape((1,)))[0], []), roots, [])
        return out.reshape((-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        lt = [int(v) for v in left.asnumpy()]
        rt = [int(v) for v in right.asnumpy()]

        def node(i):
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return here, 0
            a, da = node(lt[i])
            b, db = node(rt[i])
            d = max(da, db) + 1
            return here + (a + b) / (1 + d), d
        return F.concat(*[node(int(r))[0] for r in roots.asnumpy()], dim=0)


# ------------------------------------------------------------------ side effects through other doors

_MODULE_LOG = []


@program(*ROWS)
class BoundAppendAliasInTensorLoop(HybridBlock):
    """push = outs.append before the loop, push(h) in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        push = outs.append
        h = F.zeros_like(x[0])
        for row in x:
            h = h * 0.5 + row
            push(h)
        return F.stack(*outs)


@program(*ROWS)
class SetattrInTensorIf(HybridBlock):
    """setattr(self, "last", h) under a tensor if, read after."""

    @autograph
    def hybrid_forward(self, F, x):
        self.last = F.zeros_like(x[0])
        h = F.sum(x, axis=0)
        if F.sum(h) > 0:
            setattr(self, "last", h * 2)
        return h + self.last


@program(*ROWS)
class ModuleListAppendedInTensorLoop(HybridBlock):
    """A module-level list appended to in a tensor loop (a debug log), its length returned."""

    @autograph
    def hybrid_forward(self, F, x):
        del _MODULE_LOG[:]
        h = F.zeros_like(x[0])
        for row in x:
            h = h + row
            _MODULE_LOG.append(1)
        return h * len(_MODULE_LOG)


@program(*ROWS)
class DictSetdefaultInTensorLoop(HybridBlock):
    """cache.setdefault("n", []).append(...) in a tensor loop, the count used."""

    @autograph
    def hybrid_forward(self, F, x):
        cache = {}
        h = F.zeros_like(x[0])
        for row in x:
            h = h + row
            cache.setdefault("n", []).append(row)
        return h * len(cache["n"])


@program(*ROWS)
class DequeMaxlenInTensorLoop(HybridBlock):
    """A collections.deque(maxlen=2) window of the last rows, summed after the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        import collections
        window = collections.deque(maxlen=2)
        for row in x:
            window.append(row * 2)
        return sum(window)


@program(*ROWS)
class NonlocalCounterInClosureCalledInLoop(HybridBlock):
    """A closure with nonlocal n, called each step of a tensor loop, n used after."""

    @autograph
    def hybrid_forward(self, F, x):
        n = 0

        def bump(v):
            nonlocal n
            n += 1
            return v * 0.5
        h = F.zeros_like(x[0])
        for row in x:
            h = bump(h) + row
        return h * n


@program(*ROWS)
class ClassCounterViaTypeInTensorIf(HybridBlock):
    """type(self).hits += 1 under a tensor if (a class-level counter), reset at the start."""
    hits = 0

    @autograph
    def hybrid_forward(self, F, x):
        type(self).hits = 0
        h = F.sum(x, axis=0)
        if F.sum(h) > 0:
            type(self).hits += 1
        return h * (1 + type(self).hits)


# ------------------------------------------------------------------ tensors unpacked as Python

@program(*ROWS)
class StarredTensorIntoConcat(HybridBlock):
    """F.concat(*x, dim=0): the rows of x joined (torch.cat(list(x)))."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.concat(*x, dim=0) * 2


@program(*ROWS)
class ListOfTensorThenStack(HybridBlock):
    """rows = list(x); F.stack(*rows[::-1])."""

    @autograph
    def hybrid_forward(self, F, x):
        rows = list(x)
        return F.stack(*rows[::-1])


@program(*GRID)
class UnpackFirstRowsOfTensor(HybridBlock):
    """a, b, *rest = x (at least two rows)."""

    @autograph
    def hybrid_forward(self, F, x):
        a, b, *rest = x
        return a * 2 + b


@program(*ROWS)
class TupleOfTensorLength(HybridBlock):
    """n = len(tuple(x)) scaling the sum."""

    @autograph
    def hybrid_forward(self, F, x):
        n = len(tuple(x))
        return F.sum(x, axis=0) / n


@program(*ROWS)
class MaxBuiltinOverTensorRowsWithKey(HybridBlock):
    """max(x, key=lambda r: F.sum(r)) picks a row."""

    @autograph
    def hybrid_forward(self, F, x):
        return max(x, key=lambda r: F.sum(r).asscalar()) * 2


@program(*ROWS)
class DictZipNamesWithRows(HybridBlock):
    """parts = dict(zip(["a", "b"], x)): the first two rows by name."""

    @autograph
    def hybrid_forward(self, F, x):
        parts = dict(zip(["a", "b"], x))
        return parts["a"] - parts["b"] * 0.5


@program(*ROWS)
class SliceAssignOnCarry(HybridBlock):
    """h[0] = 0 on the carry in a loop (torch's in-place index assign)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones_like(x[0])
        for row in x:
            h = h + row
            h[0] = 0
        return h


@program(*ROWS)
class IntOfArgmaxIndexesPythonList(HybridBlock):
    """k = int(F.argmax(...)) indexing a Python list of scales."""

    @autograph
    def hybrid_forward(self, F, x):
        scales = [1.0, 2.0, 3.0]
        k = int(F.argmax(F.sum(x, axis=0), axis=0).asscalar())
        return x * scales[k]


@program(*ROWS)
class FloatOfTensorInPythonIf(HybridBlock):
    """if float(F.sum(x)) > 0: torch's .item() in a Python condition."""

    @autograph
    def hybrid_forward(self, F, x):
        if float(F.sum(x).asscalar()) > 0:
            return x * 2
        return x


@program(*ROWS)
class MapBuiltinOverTensor(HybridBlock):
    """F.stack(*map(F.tanh, x))."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*map(F.tanh, x))


@program(*ROWS)
class FilterBuiltinOverTensor(HybridBlock):
    """kept = list(filter(lambda r: F.sum(r) > 0, x)) then count."""

    @autograph
    def hybrid_forward(self, F, x):
        kept = list(filter(lambda r: F.sum(r) > 0, x))
        return F.sum(x, axis=0) * len(kept)


@program(*ROWS)
class SortedRowsByKey(HybridBlock):
    """sorted(x, key=...) of rows."""

    @autograph
    def hybrid_forward(self, F, x):
        rows = sorted(x, key=lambda r: r.sum().asscalar())
        return rows[0] - rows[-1]


@program(*ROWS)
class EnumerateTransposeColumns(HybridBlock):
    """for j, col in enumerate(x.T): a weighted sum of columns."""

    @autograph
    def hybrid_forward(self, F, x):
        acc = F.zeros_like(x[:, 0])
        for j, col in enumerate(x.T):
            acc = acc + col * (j + 1)
        return acc


@program(*ROWS)
class TensorRowsInPythonSetMembership(HybridBlock):
    """any(row is x[0] ...) - identity of rows; a Python list made from rows by slicing."""

    @autograph
    def hybrid_forward(self, F, x):
        rows = [x[i] for i in range(2)]
        return rows[0] * 3 + rows[1]


# ------------------------------------------------------------------ closures vs reassignment

@program(*STATE_ROWS)
class LambdaDefaultFrozenBeforeLoop(HybridBlock):
    """f = lambda v, s=h: v + s defined before the loop that changes h: s is h's first
    value."""

    @autograph
    def hybrid_forward(self, F, h, x):
        f = lambda v, s=h: v + s       # noqa: E731
        for row in x:
            h = F.tanh(f(h) + row)
        return h


@program(*STATE_ROWS)
class ClosureReadsNameAssignedOnlyAfterLoop(HybridBlock):
    """def out(): return g * 2 defined before the loop, g assigned after it."""

    @autograph
    def hybrid_forward(self, F, h, x):
        def out():
            return g * 2
        for row in x:
            h = h * 0.5 + row
        g = h + 1
        return out()


@program(*STATE_ROWS)
class ClosureMadeInTensorIfBranchCalledAfter(HybridBlock):
    """Each branch of a tensor if defines f reading h; h changes after; f called at the end."""

    @autograph
    def hybrid_forward(self, F, h, x):
        if F.sum(h) > 0:
            def f(v):
                return v * h
        else:
            def f(v):
                return v - h
        h = h + 1
        return f(F.sum(x, axis=0))


@program(*STATE_ROWS)
class ClosureOverCarryCalledInsideWhileCondition(HybridBlock):
    """while small(): with small() reading h, h changed in the body."""

    @autograph
    def hybrid_forward(self, F, h, x):
        def small():
            return F.sum(F.abs(h)) < 4
        t = F.zeros((1,))
        while small() and t < 5:
            h = h + F.abs(F.take(x, F.minimum(t, F.ones_like(t)))[0]) + 0.5
            t = t + 1
        return h, t


@program(*STATE_ROWS)
class ClassBodyReadsLoopRow(HybridBlock):
    """A class defined inside the loop body whose attribute is the step's row."""

    @autograph
    def hybrid_forward(self, F, h, x):
        for row in x:
            class Step:
                value = row * 2
            h = h * 0.5 + Step.value
        return h


@program(*STATE_ROWS)
class PartialBoundToCarryBeforeLoop(HybridBlock):
    """add_h = functools.partial(F.broadcast_add, h) before the loop: the first h."""

    @autograph
    def hybrid_forward(self, F, h, x):
        add_h = functools.partial(F.broadcast_add, h)
        for row in x:
            h = F.tanh(add_h(row) + h)
        return h


@program(*STATE_ROWS)
class DefaultArgFromCarryInNestedDefInLoop(HybridBlock):
    """def f(v, s=h) made inside each step: the default is this step's h."""

    @autograph
    def hybrid_forward(self, F, h, x):
        for row in x:
            def f(v, s=h):
                return v + s * 0.5
            h = f(row)
        return h


def _steps_into(F, x, outs):
    """A helper filling the caller's list (torch code passes output lists around)."""
    h = F.zeros_like(x[0])
    for row in x:
        h = h * 0.5 + row
        outs.append(h)
    return h


@program(*ROWS)
class HelperAppendsToCallersListInTensorLoop(HybridBlock):
    """_steps_into(F, x, outs) appends in its tensor loop; the caller stacks outs."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = _steps_into(F, x, outs)
        return h, F.stack(*outs)


@program(*ROWS)
class AliasOfListTakenBeforeLoop(HybridBlock):
    """history = outs before the loop; the loop appends to outs; history is stacked."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        history = outs
        for row in x:
            outs.append(row * 2)
        return F.stack(*history)


@program(*ROWS)
class ListKeptInDictBeforeLoop(HybridBlock):
    """state = {"outs": outs} before the loop appending to outs."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        state = {"outs": outs}
        for row in x:
            outs.append(F.tanh(row))
        return F.stack(*state["outs"])


@program(*ROWS)
class ListStoredOnSelfBeforeLoop(HybridBlock):
    """self.trace = outs before the loop; the loop appends; self.trace stacked."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        self.trace = outs
        for row in x:
            outs.append(row + 1)
        return F.stack(*self.trace)


@program(*STATE_ROWS)
class TensorOrPythonTrueInIf(HybridBlock):
    """if F.sum(h) > 5 or self.force: with force True (the if always taken)."""
    force = True

    @autograph
    def hybrid_forward(self, F, h, x):
        for row in x:
            if F.sum(h) > 5 or self.force:
                h = h * 0.5 + row
        return h


@program(*STATE_ROWS)
class TensorAndPythonZeroInWhile(HybridBlock):
    """while (t < 3 and self.limit) or t < 1: self.limit 0 (falsy int)."""
    limit = 0

    @autograph
    def hybrid_forward(self, F, h, x):
        t = F.zeros((1,))
        while (t < 3 and self.limit) or t < 1:
            h = h + F.take(x, t)[0]
            t = t + 1
        return h, t


# ------------------------------------------------------------------ Python operators on tensors

@program(*ROWS)
class ValueOfOrWithTensorFallback(HybridBlock):
    """bias = (F.sum(row) > 0) or row * 0.5: Python's value (1, or the fallback) per step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            bias = (F.sum(row) > 0) or row * 0.5
            h = h + bias
        return h


@program(*ROWS)
class AbsAndPowBuiltinsInLoop(HybridBlock):
    """abs(row) and pow(h, 2) (the builtins) in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = F.tanh(pow(h, 2) + abs(row))
        return h


@program(*ROWS)
class NewAxisAndEllipsisIndexing(HybridBlock):
    """x[None] and x[..., 0] (numpy-style indexing as torch code writes it)."""

    @autograph
    def hybrid_forward(self, F, x):
        return x[None] * 2, x[..., 0]


@program(*GRID)
class ListOfIndicesIndexing(HybridBlock):
    """x[[0, 2]]: rows by a Python list of indices (inputs have >= 3 rows or fail alike)."""

    @autograph
    def hybrid_forward(self, F, x):
        return x[[0, 1]] * 3


@program(*GRID)
class NegativeColumnSliceInLoop(HybridBlock):
    """row[-2:] and row[:-1] of each row in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0][:-1])
        for row in x:
            h = h + row[:-1] * row[-1]
        return h


@program(*ROWS)
class UnaryPlusAndNegInLoop(HybridBlock):
    """h = -h + row and +row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = -h * 0.5 + (+row)
        return h


@program(*ROWS)
class ChainedComparisonOfCarryInWhile(HybridBlock):
    """while -2 < F.sum(h) < 2 and t < 4."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        t = F.zeros((1,))
        while -2 < F.sum(h) < 2 and t < 4:
            h = h + F.take(x, F.minimum(t, F.ones_like(t)))[0]
            t = t + 1
        return h, t


@program(*ROWS)
class NotOfNonBooleanTensorInIf(HybridBlock):
    """if not F.sum(row > 0): (no positive item) inside a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            if not F.sum(row > 0):
                h = h - 1
            else:
                h = h + row
        return h


@program(*FOREST)
class RecursiveLeafRunsAutographWhile(HybridBlock):
    """The leaf halves its feature in a converted while (a tensor counter from F.zeros)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @autograph
        def leaf(F, here):
            k = F.zeros((1,))
            while k < 2:
                here = here * 0.5
                k = k + 1
            return here

        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: leaf(F, here),
                                 lambda: F.tanh(here + node(F.take(left, idx)) -
                                                node(F.take(right, idx))))
        return gluon_cf.foreach(lambda r, _: (node(r.reshape((1,))), []), roots, [])[0] \
            .reshape((-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        return _plain_tree(F, x, left, right, roots,
                           lambda F, here, a, b: F.tanh(here + a - b),
                           lambda F, h: h * 0.25)


@program(*FOREST)
class RecursiveReturnsDictOfStates(HybridBlock):
    """The function returns {"h": ..., "c": ...} (a dict, as ported TreeLSTM code does)."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)

            def inner():
                a, b = node(F.take(left, idx)), node(F.take(right, idx))
                return {"h": F.tanh(a["h"] + b["c"] + here), "c": a["c"] + here}
            return gluon_cf.cond(F.take(left, idx) < 0,
                                 lambda: {"h": F.tanh(here), "c": here}, inner)
        return gluon_cf.foreach(lambda r, _: (node(r.reshape((1,)))["h"], []), roots,
                                [])[0].reshape((-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        lt = [int(v) for v in left.asnumpy()]
        rt = [int(v) for v in right.asnumpy()]

        def node(i):
            here = F.take(x, F.array([i]))
            if lt[i] < 0:
                return {"h": F.tanh(here), "c": here}
            a, b = node(lt[i]), node(rt[i])
            return {"h": F.tanh(a["h"] + b["c"] + here), "c": a["c"] + here}
        return F.concat(*[node(int(r))["h"] for r in roots.asnumpy()], dim=0)


@program(*FOREST)
class RecursiveCalledFromAutographForOverRoots(HybridBlock):
    """An autograph for over the roots calls the recursive function and collects rows."""
    NO_GRAD = (1, 2, 3)

    @autograph
    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: here,
                                 lambda: here * 0.5 + node(F.take(left, idx)) *
                                 node(F.take(right, idx)))
        outs = []
        for r in roots:
            outs.append(node(r.reshape((1,)))[0])
        return F.stack(*outs)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_tree(F, x, left, right, roots,
                           lambda F, here, a, b: here * 0.5 + a * b, lambda F, h: h)


# ------------------------------------------------------------------ last batch: mixed idioms

@program(*ROWS)
class CollectedListTruthAfterLoop(HybridBlock):
    """last = outs[-1] if outs else x[0] after a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(F.tanh(row))
        last = outs[-1] if outs else x[0]
        return last * 2


@program(*ROWS)
class CollectedInsideOuterPythonLoop(HybridBlock):
    """Two passes (a Python range) each collecting a tensor loop's rows into a fresh list."""

    @autograph
    def hybrid_forward(self, F, x):
        results = []
        for scale in (1.0, 2.0):
            outs = []
            for row in x:
                outs.append(row * scale)
            results.append(F.stack(*outs))
        return results[0] + results[1]


@program(*STATE_ROWS)
class DictStateWhereUpdateInWhile(HybridBlock):
    """state = {"h": ..., "n": ...} rebuilt each step of a tensor while with where."""

    @autograph
    def hybrid_forward(self, F, h, x):
        state = {"h": h, "n": F.zeros((1,))}
        while state["n"] < 2:
            row = F.take(x, state["n"])[0]
            new_h = F.where(row > 0, state["h"] + row, state["h"])
            state = {"h": new_h, "n": state["n"] + 1}
        return state["h"]


@program(*LOGITS)
class GreedyWithFinishedFlagAndOr(HybridBlock):
    """A greedy loop whose stop test is `finished or t >= 3` (tensor or tensor)."""

    @autograph
    def hybrid_forward(self, F, logits):
        t = F.zeros((1,))
        finished = F.zeros((1,))
        total = F.zeros((1,))
        while not (finished or t >= 3):
            row = F.take(logits, t)[0]
            total = total + F.max(row, axis=0, keepdims=True)
            finished = F.argmax(row, axis=0) == 0
            t = t + 1
        return total, t


@program(*ROWS)
class LambdaOfAndOrAppliedInLoop(HybridBlock):
    """gate = lambda v: (F.sum(v) > 0) and v (Python's value: v or 0) in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        gate = lambda v: (F.sum(v) > 0) and v      # noqa: E731
        h = F.zeros_like(x[0])
        for row in x:
            h = h + gate(row)
        return h


@program(*ROWS)
class OrDefaultOnOptionalTensor(HybridBlock):
    """scale = self.scale or 1.0 (a Python None attribute), used in a tensor loop."""
    scale = None

    @autograph
    def hybrid_forward(self, F, x):
        scale = self.scale or 0.5
        h = F.zeros_like(x[0])
        for row in x:
            h = h * scale + row
        return h


@program(*ROWS)
class EnumerateCollectedAfterLoop(HybridBlock):
    """for k, o in enumerate(outs): weighted after a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row * 2)
        acc = F.zeros_like(x[0])
        for k, o in enumerate(outs):
            acc = acc + o * (k + 1)
        return acc


@program(*ROWS)
class ListCompOverRangeOfShapeInsideLoopBody(HybridBlock):
    """[row[j] for j in range(3)] (a Python range) inside a tensor loop's body."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1,))
        for row in x:
            parts = [row[j] * (j + 1) for j in range(3)]
            h = h + F.add_n(*parts)
        return h
