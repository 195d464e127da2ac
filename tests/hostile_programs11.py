"""Issue 24, seventh round: code ported from MXNet, gluonnlp and TensorFlow the way people
write it: decoders that stop when every row has finished, beam steps reordering states,
attention over lengths with masks keeping nothing, helpers with keyword-only and ``None``
defaults, methods calling methods, class constants, ``while True`` with several exits,
tensor conditions joined by ``and``/``or``/``not`` (with Python operands too), ``is None``
on optional state, tuples and dicts of states, ``x.shape[0]`` loops, ``F.contrib`` calls
beside converted control flow, ``zip``/``enumerate`` over Python lists of tensors, strided
slices, in-place updates of results, norm layers and deferred layers in loops.
``PROGRAMS`` maps each block class to its input lists (``hostile_harness.classify`` runs
them plain, eager, hybridized with gradients and exported)."""
import functools

import mxnet as mx
import numpy as np
from mxnet import gluon
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

# rows (T, 4) of several lengths, sums of both signs
ROWS = ([rand(3, 4)], [rand(5, 4, seed=1) * 2], [-np.abs(rand(2, 4, seed=2))],
        [rand(1, 4, seed=3)])
# a batch (B, T, 4) and per-row lengths, one length 0
LENGTHS = ([rand(2, 4, 4, seed=4), floats(3, 1)], [rand(3, 5, 4, seed=5), floats(5, 0, 2)],
           [rand(2, 2, 4, seed=6), floats(0, 0)])
# logits (T, V) of a toy decoder: the end token 0 reached at different steps
LOGITS = ([rand(6, 5, seed=7)], [rand(4, 5, seed=8) * 3], [rand(2, 5, seed=9)])
# a state (B, 4) and steps (T, B, 4)
BATCHED = ([rand(4, 2, 4, seed=10), rand(2, 4, seed=11)],
           [rand(2, 3, 4, seed=12) * 2, rand(3, 4, seed=13)])


def _scaled(h, r, *, scale=0.5, bias=None):
    """A helper with keyword-only arguments and an optional tensor."""
    out = h * scale + r
    if bias is not None:
        out = out + bias
    return out


def _gate(v, lo=-0.5, hi=0.5):
    return F_clip(v, lo, hi)


def F_clip(v, lo, hi):       # noqa: N802  (a helper calling a helper)
    return v.clip(lo, hi)


# ------------------------------------------------------------------------- decoders

@program(*LOGITS)
class GreedyStopsWhenEndReached(HybridBlock):
    """Greedy decode over precomputed logits: while True, argmax, stop at token 0 or at the
    last row (Python counter beside a tensor counter)."""

    @autograph
    def hybrid_forward(self, F, logits):
        t = F.zeros((1,))
        total = F.zeros((1,))
        while True:
            gluon_cf.max_iterations(8)
            row = F.take(logits, t)
            token = F.argmax(row, axis=-1)
            total = total + F.max(row, axis=-1)
            t = t + 1
            if F.sum(token == 0) > 0:
                break
            if F.sum(t >= 4) > 0:
                break
        return total, t


@program(*BATCHED)
class BatchDecoderAllFinished(HybridBlock):
    """A batch decoder keeping a finished mask; stops when ``F.min(finished)`` is 1."""

    @autograph
    def hybrid_forward(self, F, steps, h):
        finished = F.zeros_like(F.sum(h, axis=1))
        i = F.zeros((1,))
        while F.min(finished) < 1:
            gluon_cf.max_iterations(4)
            step = F.take(steps, i)[0]
            h = F.where(finished.expand_dims(1).broadcast_like(h) > 0, h, F.tanh(h + step))
            finished = F.maximum(finished, F.sum(h, axis=1) > 0.5)
            i = i + 1
            if F.sum(i >= 4) > 0:
                break
        return h, finished


@program([rand(3, 6, seed=14), floats(0.1, 0.2, 0.3)],
         [rand(2, 6, seed=15) * 2, floats(-0.1, 0.5, 0)])
class BeamStepReorders(HybridBlock):
    """Beam steps: topk over flattened (beam, vocab) scores, the beam by floor division and the
    token by %, states reordered by F.take each step."""
    VOCAB = 2

    @autograph
    def hybrid_forward(self, F, logits, scores):
        states = scores.reshape((3, 1)) * F.ones((1, 4))
        for row in logits:
            cand = F.broadcast_add(scores.reshape((3, 1)), row.reshape((3, self.VOCAB)))
            top = F.topk(cand.reshape((-1,)), k=3, ret_typ="indices")
            beam = F.floor(top / self.VOCAB)
            token = top % self.VOCAB
            scores = F.take(cand.reshape((-1,)), top)
            states = F.take(states, beam) + token.reshape((3, 1))
        return scores, states


@program(*LOGITS)
class DecoderCollectsUntilEnd(HybridBlock):
    """for t in range(logits.shape[0]) collecting tokens, a tensor break before the append;
    the tokens stacked and the count returned."""

    @autograph
    def hybrid_forward(self, F, logits):
        scores = []
        for t in range(logits.shape[0]):
            token = F.argmax(logits[t], axis=0)
            if F.sum(token == 0) > 0:
                break
            scores.append(F.max(logits[t], axis=0, keepdims=True))
        return F.concat(F.zeros((1,)), *scores, dim=0)


@program(*LOGITS)
class DoneFlagNotInWhile(HybridBlock):
    """while not done: with done a tensor set from the step's argmax."""

    @autograph
    def hybrid_forward(self, F, logits):
        done = F.zeros((1,))
        acc = F.zeros((5,))
        t = F.zeros((1,))
        while not done:
            gluon_cf.max_iterations(6)
            row = F.take(logits, t)[0]
            acc = acc + F.softmax(row)
            done = (F.argmax(row, axis=0) == 0) + (t >= logits.shape[0] - 1) > 0
            t = t + 1
        return acc, t


# ------------------------------------------------------------------------- attention

@program(*LENGTHS)
class AttentionOverLengthsPerStep(HybridBlock):
    """Per query step (a Python loop over T), a masked softmax over keys of each row's length;
    a row of length 0 keeps no key (a uniform softmax of -1e9s)."""

    @autograph
    def hybrid_forward(self, F, x, lengths):
        steps = F.contrib.arange_like(x, axis=1)
        mask = F.broadcast_lesser(steps.reshape((1, -1)), lengths.reshape((-1, 1)))
        outs = []
        for t in range(x.shape[1]):
            q = x[:, t, :]
            score = F.batch_dot(x, q.expand_dims(2)).reshape((0, -1))
            score = F.where(mask > 0, score, F.ones_like(score) * -1e9)
            outs.append(F.batch_dot(F.softmax(score).expand_dims(1), x).reshape((0, -1)))
        return F.stack(*outs, axis=1)


@program(*LENGTHS)
class SequenceMaskThenTensorLoop(HybridBlock):
    """F.SequenceMask by lengths, then a tensor for over the time axis (swapaxes)."""

    @autograph
    def hybrid_forward(self, F, x, lengths):
        masked = F.SequenceMask(x.swapaxes(0, 1), sequence_length=lengths,
                                use_sequence_length=True)
        h = F.zeros_like(masked[0])
        for step in masked:
            h = F.tanh(h * 0.5 + step)
        return h


@program(*LENGTHS)
class MaskedMaxPoolNothingKept(HybridBlock):
    """A max over the kept steps (F.where with -1e4), 0 where a row keeps nothing: a tensor
    if on the number kept."""

    @autograph
    def hybrid_forward(self, F, x, lengths):
        steps = F.contrib.arange_like(x, axis=1)
        keep = F.broadcast_lesser(steps.reshape((1, -1)), lengths.reshape((-1, 1)))
        outs = []
        for b in range(x.shape[0]):
            row = x[b]
            k = keep[b]
            if F.sum(k) > 0:
                pooled = F.max(F.where(k.reshape((-1, 1)).broadcast_like(row) > 0, row,
                                       F.ones_like(row) * -1e4), axis=0)
            else:
                pooled = F.zeros_like(row[0])
            outs.append(pooled)
        return F.stack(*outs)


@program(*LENGTHS)
class BooleanMaskPerRowInRangeLoop(HybridBlock):
    """F.contrib.boolean_mask of each row's kept steps in a Python loop, summed; a row keeping
    nothing (length 0) is MXNet's zero-size limit."""

    @autograph
    def hybrid_forward(self, F, x, lengths):
        steps = F.contrib.arange_like(x, axis=1)
        total = F.zeros((4,))
        for b in range(x.shape[0]):
            kept = F.contrib.boolean_mask(x[b], steps < lengths[b])
            total = total + kept.sum(axis=0)
        return total


# ------------------------------------------------------------------------- helpers, methods

@program(*ROWS)
class KeywordOnlyHelperInLoop(HybridBlock):
    """A helper with keyword-only args and a bias=None default called in a tensor for, once
    with a bias and once without."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            h = _scaled(h, r, scale=0.25)
            h = _scaled(h, r * 0, bias=r * 0.1)
        return h


@program(*ROWS)
class HelperDefaultsChainInTensorIf(HybridBlock):
    """A helper with defaults calling a helper, under a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x[1:]:
            if F.sum(r) > 0:
                h = _gate(h + r)
            else:
                h = _gate(h - r, hi=0.25)
        return h


@program(*ROWS)
class MethodsCallMethods(HybridBlock):
    """step calls gate calls norm; a class constant read by the innermost."""
    EPS = 1e-3

    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, in_units=4, flatten=False)

    def norm(self, v):
        return v / (F_norm(v) + self.EPS)

    def gate(self, v, r):
        return self.norm(F_sigmoid(v) * r)

    def step(self, h, r):
        if (r.sum() > 0):
            return self.gate(self.fc(h), r)
        return h - r

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0]).reshape((1, -1))
        for r in x:
            h = self.step(h, r.reshape((1, -1)))
        return h


def F_norm(v):               # noqa: N802
    return (v * v).sum().sqrt()


def F_sigmoid(v):            # noqa: N802
    return v.sigmoid()


@program(*ROWS)
class StaticHelperAndClassConstantTuple(HybridBlock):
    """A staticmethod combining two states, weights from a class-level tuple indexed by a
    Python counter in a Python loop nested in a tensor loop."""
    WEIGHTS = (0.5, 0.25, 0.125)

    @staticmethod
    def combine(a, b, w):
        return a * w + b * (1 - w)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            for k, w in enumerate(self.WEIGHTS):
                h = self.combine(h, r * (k + 1), w)
        return h


@program(*ROWS)
class MethodKeywordCallInWhile(HybridBlock):
    """self.update(h=..., x=...) called by keyword in a while over a tensor counter."""

    def update(self, x, h, decay=0.9):
        return h * decay + x

    @autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = F.zeros_like(x[0])
        while i < x.shape[0]:
            h = self.update(h=h, x=F.take(x, i)[0])
            i = i + 1
        return h


@program(*ROWS)
class PropertyReadInTensorLoop(HybridBlock):
    """A block property (a computed Python constant) read in a tensor for."""

    def __init__(self):
        super().__init__()
        self._temperature = 2.0

    @property
    def inverse_temperature(self):
        return 1.0 / self._temperature

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            h = F.softmax((h + r) * self.inverse_temperature)
        return h


@program(*ROWS)
class ReduceOverPythonListInLoop(HybridBlock):
    """functools.reduce over a Python list of the row's transforms, in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            parts = [r, r * r, F.tanh(r)]
            h = h + functools.reduce(lambda a, b: a * 0.5 + b, parts)
        return h


# ------------------------------------------------------------------------- conditions

@program(*ROWS)
class AndOrNotOfTensors(HybridBlock):
    """(a and b) or not c on tensor comparisons, per row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            if (F.sum(r) > 0 and F.max(r) < 0.9) or not F.min(r) > -0.5:
                h = h + r
            else:
                h = h - 0.5 * r
        return h


@program(*ROWS)
class PythonFlagAndTensorInWhile(HybridBlock):
    """while i < 3 and F.sum(h) < 10: a tensor counter and a tensor sum joined by and."""

    @autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = x[0]
        while i < 3 and F.sum(F.abs(h)) < 10:
            gluon_cf.max_iterations(3)
            h = h * 2 + 0.1
            i = i + 1
        return h, i


@program(*ROWS)
class PythonBoolOrTensor(HybridBlock):
    """A Python setting joined to a tensor condition by or (the setting false)."""

    def __init__(self):
        super().__init__()
        self.always = False

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            if self.always or F.sum(r) > 0:
                h = h + r
        return h


@program(*ROWS)
class OptionalStateIsNoneBeforeLoop(HybridBlock):
    """prev = None before a tensor for, set in it; ``if prev is None`` in the body (Python
    would take the first row's branch once)."""

    @autograph
    def hybrid_forward(self, F, x):
        prev = None
        h = F.zeros_like(x[0])
        for r in x:
            if prev is None:
                h = h + r
            else:
                h = h + r * prev
            prev = r
        return h


@program(*ROWS)
class OptionalBiasIsNotNoneAndTensor(HybridBlock):
    """``if bias is not None and F.sum(bias) > 0`` with bias an argument default None."""

    @autograph
    def hybrid_forward(self, F, x, bias=None):
        h = x[0]
        if bias is not None and F.sum(bias) > 0:
            h = h + bias
        for r in x:
            h = h * 0.5 + r
        return h


@program(*ROWS)
class TernaryOnNoneThenLoop(HybridBlock):
    """h = init if init is not None else zeros; then a while with break."""

    @autograph
    def hybrid_forward(self, F, x, init=None):
        h = init if init is not None else F.zeros_like(x[0])
        i = F.zeros((1,))
        while True:
            gluon_cf.max_iterations(5)
            h = h + F.take(x, i)[0]
            i = i + 1
            if i >= x.shape[0]:
                break
        return h


# ------------------------------------------------------------------------- loops

@program(*ROWS)
class WhileTrueThreeExits(HybridBlock):
    """while True: a break on a counter, one on a tensor sum, a continue on the sign."""

    @autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = F.zeros_like(x[0])
        while True:
            gluon_cf.max_iterations(6)
            r = F.take(x, F.minimum(i, x.shape[0] - 1))[0]
            i = i + 1
            if i > x.shape[0]:
                break
            if F.sum(r) < 0:
                continue
            h = h + r
            if F.sum(h) > 2:
                break
        return h, i


@program(*ROWS)
class NestedForContinueOnTensor(HybridBlock):
    """An inner tensor for over a row's elements with continue on the sign, in an outer
    tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        total = F.zeros((1,))
        for r in x:
            for e in r:
                if e < 0:
                    continue
                total = total + e
        return total


@program(*ROWS)
class TupleAndDictStatesInWhile(HybridBlock):
    """A tuple (h, c) and a dict {"n": ...} carried by a while."""

    @autograph
    def hybrid_forward(self, F, x):
        state = (F.zeros_like(x[0]), F.zeros_like(x[0]))
        stats = {"n": F.zeros((1,)), "peak": F.zeros((1,))}
        i = F.zeros((1,))
        while i < x.shape[0]:
            h, c = state
            r = F.take(x, i)[0]
            c = c * 0.5 + r
            state = (F.tanh(c) + h * 0.1, c)
            stats = {"n": stats["n"] + 1, "peak": F.maximum(stats["peak"], F.max(r))}
            i = i + 1
        return state[0], stats["n"], stats["peak"]


@program(*ROWS)
class ShapeZeroLoopCollectsSoftmax(HybridBlock):
    """for b in range(x.shape[0]): outs.append(softmax(x[b])) then stack (a Python loop)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for b in range(x.shape[0]):
            outs.append(F.softmax(x[b] * (b + 1)))
        return F.stack(*outs)


@program(*ROWS)
class ZipEnumeratePythonListsOfTensors(HybridBlock):
    """zip/enumerate over Python lists of tensors built from the input, inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        weights = [x[0] * 0 + 0.5, x[0] * 0 + 2]
        h = F.zeros_like(x[0])
        for r in x:
            for k, (w, f) in enumerate(zip(weights, [F.tanh, F.sigmoid])):
                h = h + f(r) * w * (k + 1)
        return h


@program(*ROWS)
class StridedSlicesNegativeStep(HybridBlock):
    """x[::-2], x[-1::-1] and a row's [::-1] inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x[::-1]:
            h = h * 0.5 + r[::-1]
        return h + F.sum(x[::-2], axis=0) + x[-1::-1][0]


@program(*ROWS)
class InPlaceOnLoopOutput(HybridBlock):
    """out = stack(collected); out *= 2 (plain MXNet: in place, refused under autograd's
    recording, so the oracle there is out = out * 2); then its last row read."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros_like(x[0])
        for r in x:
            h = h + r
            outs.append(h)
        out = F.stack(*outs)
        out *= 2
        last = out[-1] + 1
        return out, last

    def oracle_where_plain_fails(self, F, x):
        out = F.stack(*[x[:k + 1].sum(axis=0) for k in range(x.shape[0])]) * 2
        return out, out[-1] + 1


@program(*ROWS)
class ComprehensionOfRangeInsideTensorLoop(HybridBlock):
    """F.add_n(*[r * k for k in range(3)]) inside a tensor for (a Python comprehension)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            h = h + F.add_n(*[r * (k + 1) for k in range(3)])
        return h


@program(*ROWS)
class GeneratorOverPythonListInTensorIf(HybridBlock):
    """sum(w * r for w in WEIGHTS) under a tensor if."""
    WEIGHTS = [0.1, 0.2, 0.3]

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            if F.sum(r) > 0:
                h = h + sum(w * r for w in self.WEIGHTS)
        return h


@program(*ROWS)
class ComprehensionOverTensorRows(HybridBlock):
    """[F.relu(r) for r in x] then F.stack: a comprehension over a tensor."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*[F.relu(r) * 2 for r in x])


@program(*ROWS)
class EnumerateOverTensorRows(HybridBlock):
    """for i, r in enumerate(x): a tensor's rows with their index."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for i, r in enumerate(x):
            h = h + r * (i + 1)
        return h


# ------------------------------------------------------------------------- layers in loops

@program(*ROWS)
class LayerNormDeferredInWhile(HybridBlock):
    """A deferred-init LayerNorm and Dense (no in_units) called inside a tensor while."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm()
        self.fc = nn.Dense(4, flatten=False)

    @autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = F.zeros_like(x[0]).reshape((1, -1))
        while i < x.shape[0]:
            h = self.norm(self.fc(h) + F.take(x, i))
            i = i + 1
        return h


@program(*ROWS)
class GlobalStatsBatchNormInFor(HybridBlock):
    """A BatchNorm using its global statistics, and Dropout(0) (identity), in a tensor for."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm(in_channels=4, use_global_stats=True)
        self.drop = nn.Dropout(0.0)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1, 4))
        for r in x:
            h = self.drop(self.bn(h + r.reshape((1, -1))))
        return h


@program(*BATCHED)
class LSTMCellTupleStatesWithFinished(HybridBlock):
    """An LSTMCell over steps, a row's states frozen once its output norm passes 1."""

    def __init__(self):
        super().__init__()
        self.cell = gluon.rnn.LSTMCell(4, input_size=4)

    @autograph
    def hybrid_forward(self, F, steps, h):
        states = [h, F.zeros_like(h)]
        for step in steps:
            out, new = self.cell(step, states)
            keep = (F.norm(out, axis=1, keepdims=True) > 1).broadcast_like(out)
            states = [F.where(keep, states[0], new[0]), F.where(keep, states[1], new[1])]
        return states[0]


@program(*ROWS)
class ParamsLoopOverKwargs(HybridBlock):
    """Parameters arrive as hybrid_forward's kwargs and a Python loop over them runs inside a
    tensor for."""

    def __init__(self):
        super().__init__()
        self.w1 = self.params.get("w1", shape=(4,), init=mx.init.Constant(0.5))
        self.w2 = self.params.get("w2", shape=(4,), init=mx.init.Constant(-0.25))

    @autograph
    def hybrid_forward(self, F, x, w1, w2):
        h = F.zeros_like(x[0])
        for r in x:
            for w in (w1, w2):
                h = F.tanh(h * w + r)
        return h


# ------------------------------------------------------------------------- F.contrib beside

@program(*ROWS)
class ContribForeachBodyHasTensorIf(HybridBlock):
    """F.contrib.foreach (MXNet's own) with a body holding a tensor if, inside converted code."""

    @autograph
    def hybrid_forward(self, F, x):
        def body(r, st):
            if F.sum(r) > 0:
                new = st[0] + r
            else:
                new = st[0] * 0.5
            return new, [new]
        outs, st = F.contrib.foreach(body, x, [F.zeros_like(x[0])])
        return outs, st[0]


@program(*ROWS)
class ContribCondThenAutographLoop(HybridBlock):
    """F.contrib.cond picks an initial state, then an autograph for runs."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.contrib.cond(F.sum(x) > 0, lambda: x[0] * 2, lambda: x[0] * -1)
        for r in x:
            h = h * 0.5 + r
        return h


@program(*ROWS)
class ContribWhileInsideTensorFor(HybridBlock):
    """gluon_cf.while_loop (TF-style signature) inside an autograph for over rows."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            _, (k, acc) = gluon_cf.while_loop(lambda k, a: k < 2,
                                              lambda k, a: ([], [k + 1, a * 0.5 + r]),
                                              [F.zeros((1,)), h], max_iterations=2)
            h = acc
        return h


# ------------------------------------------------------------------------- closures, side effects

@program(*ROWS)
class ClosureReadsStateAfterWhile(HybridBlock):
    """A lambda made before a while reads h; the while reassigns h; called after."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        f = lambda v: v + h   # noqa: E731
        i = F.zeros((1,))
        while i < 2:
            h = h * 2
            i = i + 1
        return f(x[0])


@program(*ROWS)
class NestedDefDefaultFromLoopRow(HybridBlock):
    """A nested def whose default is the current row, called next step (closure over a loop
    variable through its default)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        prev = F.zeros_like(x[0])
        for r in x:
            def mix(v, p=prev):
                return v * 0.5 + p
            h = mix(h) + r
            prev = r
        return h


@program(*ROWS)
class SelfCacheDictWrittenInTensorIf(HybridBlock):
    """self.cache["last"] = r under a tensor if (a side effect on Python state)."""

    def __init__(self):
        super().__init__()
        self.cache = {}

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            if F.sum(r) > 0:
                self.cache["last"] = r
            h = h + r
        return h


@program(*ROWS)
class HelperAppendsToModuleListInTensorLoop(HybridBlock):
    """A helper appending to a module-level log inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            h = _logged(h + r)
        return h


_LOG = []


def _logged(v):
    _LOG.append(1)
    return v * 0.5


# ------------------------------------------------------------------------- exits

@program(*ROWS)
class ReturnFromWhileTrueWithCollected(HybridBlock):
    """while True collecting rows, return the stack from inside the loop at a tensor test."""

    @autograph
    def hybrid_forward(self, F, x):
        items = []
        i = F.zeros((1,))
        while True:
            gluon_cf.max_iterations(5)
            r = F.take(x, i)[0]
            items.append(r * 2)
            i = i + 1
            if i >= x.shape[0]:
                return F.stack(*items).sum(axis=0)


@program(*ROWS)
class BreakThenElseOnPythonRange(HybridBlock):
    """for ... else over range(len(x)) with a tensor break: the else adds a bias."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for t in range(len(x)):
            h = h + x[t]
            if F.sum(h) > 3:
                break
        else:
            h = h - 1
        return h


# ------------------------------------------------------------------------- second batch: where,
# lists joined with other arrays, closures whose parameters shadow state

@program(*BATCHED)
class WhereRowsInForBody(HybridBlock):
    """F.where(cond of (B,), new, old): MXNet picks rows by a 1-D cond; in a tensor for."""

    @autograph
    def hybrid_forward(self, F, steps, h):
        for step in steps:
            active = F.sum(step, axis=1) > 0
            h = F.where(active, F.tanh(h + step), h)
        return h


@program(*BATCHED)
class WhereSameShapeInWhile(HybridBlock):
    """F.where(cond of h's shape, ...) carried by a while over a tensor counter."""

    @autograph
    def hybrid_forward(self, F, steps, h):
        i = F.zeros((1,))
        while i < 2:
            h = F.where(h > 0, h * 0.5, h + F.take(steps, i)[0])
            i = i + 1
        return h


@program(*LOGITS)
class ConcatStartTokenAndCollected(HybridBlock):
    """F.concat(start, *scores, end, dim=0) after a while True that collects a score per
    step, the end token's included."""

    @autograph
    def hybrid_forward(self, F, logits):
        scores = []
        t = F.zeros((1,))
        while True:
            gluon_cf.max_iterations(6)
            row = F.take(logits, t)[0]
            scores.append(F.max(row, axis=0, keepdims=True))
            t = t + 1
            if F.sum(F.argmax(row, axis=0) == 0) + F.sum(t >= 4) > 0:
                break
        return F.concat(F.ones((1,)) * 7, *scores, F.zeros((1,)), dim=0)


@program(*ROWS)
class StackInitialStateAndCollected(HybridBlock):
    """F.stack(h0, *states) and F.add_n(h0, *states): the first state with the collected."""

    @autograph
    def hybrid_forward(self, F, x):
        h0 = F.zeros_like(x[0]) + 0.5
        h = h0
        states = []
        for r in x:
            h = F.tanh(h + r)
            states.append(h)
        return F.stack(h0, *states), F.add_n(h0, *states)


@program(*ROWS)
class LambdaParameterShadowsState(HybridBlock):
    """A lambda whose parameter is named like the loop's state, in a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        i = F.zeros((1,))
        while i < 3:
            step = lambda h, k=2: h * 0.5 + k  # noqa: E731
            h = step(h)
            i = i + 1
        return h


@program(*ROWS)
class StarredGeneratorInTensorFor(HybridBlock):
    """F.add_n(*(r * w for w in WEIGHTS)) in a tensor for (a generator unpacked)."""
    WEIGHTS = (0.5, -1.0, 2.0)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            h = h * 0.5 + F.add_n(*(r * w for w in self.WEIGHTS))
        return h


@program(*ROWS)
class ReturnInWhileTrueAndAfter(HybridBlock):
    """while True with a return inside, and a return after it (the loop's bound reached)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        i = F.zeros((1,))
        while True:
            gluon_cf.max_iterations(8)
            h = h + F.take(x, i)[0]
            i = i + 1
            if F.sum(h) > 1:
                return h
            if i >= x.shape[0]:
                break
        return h * 0


@program(*ROWS)
class GlobalStatsBatchNormInCond(HybridBlock):
    """A frozen BatchNorm (use_global_stats) under a tensor if, with running statistics
    that are not the initial ones."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm(in_channels=4, use_global_stats=True,
                               running_mean_initializer=mx.init.Constant(0.25),
                               running_variance_initializer=mx.init.Constant(2.0))

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            y = self.bn(x)
        else:
            y = x * 2
        return y


@program(*ROWS)
class NoneOrTensorCondition(HybridBlock):
    """``if mask is None or F.sum(mask * r) > 0`` with the mask argument left None."""

    @autograph
    def hybrid_forward(self, F, x, mask=None):
        h = F.zeros_like(x[0])
        for r in x:
            if mask is None or F.sum(mask * r) > 0:
                h = h + r
        return h


@program(*ROWS)
class DictComprehensionInTensorLoop(HybridBlock):
    """A dict comprehension over a Python list of names, in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            parts = {name: f(r) for name, f in (("a", F.tanh), ("b", F.relu))}
            h = h + parts["a"] * parts["b"]
        return h


@program(*LOGITS)
class TopKPickEarlyStop(HybridBlock):
    """Per step, the best score by F.topk and F.pick, accumulated until it falls under 0.5."""

    @autograph
    def hybrid_forward(self, F, logits):
        total = F.zeros((1,))
        t = F.zeros((1,))
        while t < logits.shape[0]:
            row = F.take(logits, t)
            best = F.topk(row, k=1, axis=-1, ret_typ="indices")
            score = F.pick(row, best.reshape((-1,)), axis=-1)
            if F.sum(score) < 0.5:
                break
            total = total + score
            t = t + 1
        return total, t


@program(*ROWS)
class PythonMinOfCounterAroundTensorIf(HybridBlock):
    """A Python loop with min()/max() on ints around a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for k in range(4):
            j = min(k, 1)
            if F.sum(x[j]) > max(k - 3, 0):
                h = h + x[j] * (k + 1)
            else:
                h = h - 0.5
        return h


@program(*ROWS)
class ReversedNegativeStepWhere(HybridBlock):
    """Rows backwards with x[::-1] and a where-masked accumulation, then [::-1] again."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros_like(x[0])
        for r in x[::-1]:
            h = F.where(r > 0, h + r, h)
            outs.append(h)
        return F.stack(*outs)[::-1]


@program(*ROWS)
class EnumerateZipInWhile(HybridBlock):
    """enumerate(zip(...)) over Python lists of arrays inside a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        gates = [F.sigmoid(x[0]), F.tanh(x[0])]
        biases = [0.1, -0.2]
        h = F.zeros_like(x[0])
        i = F.zeros((1,))
        while i < 2:
            for k, (g, b) in enumerate(zip(gates, biases)):
                h = h * g + b * (k + 1)
            i = i + 1
        return h


# ------------------------------------------------------------------------- third batch: gluonnlp
# length ops, class-level dicts, helpers reading shapes, nonlocal outside loops, deferred layers


@program(*LENGTHS)
class SoftmaxWithLengthInLoop(HybridBlock):
    """F.softmax(score, length=lengths, use_length=True) per step of a Python loop."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, lengths):
        h = F.zeros_like(x[:, 0, :])
        for t in range(2):
            score = F.batch_dot(x, h.expand_dims(2) + 1).reshape((0, -1))
            att = F.softmax(score, length=lengths, use_length=True, axis=-1)
            h = F.batch_dot(att.expand_dims(1), x).reshape((0, -1))
        return h


@program(*LENGTHS)
class SequenceLastThenTensorIf(HybridBlock):
    """F.SequenceLast by lengths (a length 0 row reads row -1), then a tensor if."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, lengths):
        last = F.SequenceLast(x.swapaxes(0, 1), sequence_length=F.maximum(lengths, 1),
                              use_sequence_length=True)
        if F.sum(last) > 0:
            last = last * 2
        return last


@program(*ROWS)
class ClassDictConstantInLoop(HybridBlock):
    """A class-level dict of coefficients read by key in a tensor for."""
    COEF = {"decay": 0.5, "gain": 2.0}

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            h = h * self.COEF["decay"] + r * self.COEF.get("gain", 1.0)
        return h


@program(*ROWS)
class NoneStateSetInTensorIf(HybridBlock):
    """best = None, then set under a tensor if in a Python loop (None in one branch)."""

    @autograph
    def hybrid_forward(self, F, x):
        best = x[0] * 0
        for k in range(2):
            if F.sum(x[k % x.shape[0]]) > 0:
                best = best + x[k % x.shape[0]]
        return best


@program(*ROWS)
class HelperReadsShapeOfArgument(HybridBlock):
    """A helper computing a mean with v.shape[0] on its argument, called in a tensor while."""

    def mean_rows(self, v):
        return v.sum(axis=0) / v.shape[0]

    @autograph
    def hybrid_forward(self, F, x):
        h = self.mean_rows(x)
        i = F.zeros((1,))
        while i < 2:
            h = h * 0.5 + self.mean_rows(x * h)
            i = i + 1
        return h


@program(*ROWS)
class ContinueAndBreakOverShapeRange(HybridBlock):
    """for t in range(x.shape[0]) with a tensor continue and a tensor break."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for t in range(x.shape[0]):
            if F.sum(x[t]) < 0:
                continue
            h = h + x[t]
            if F.sum(h) > 2:
                break
        return h


@program(*ROWS)
class NestedHelperNonlocalCounterOutsideLoops(HybridBlock):
    """A nested function with nonlocal, called outside any tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        total = x[0] * 0

        def add(v):
            nonlocal total
            total = total + v
        add(x[0])
        add(x[-1] * 2)
        if F.sum(total) > 0:
            total = total * 3
        return total


@program(*ROWS)
class ArangeLikeInWhile(HybridBlock):
    """F.contrib.arange_like of a row as a position weight inside a while."""

    @autograph
    def hybrid_forward(self, F, x):
        pos = F.contrib.arange_like(x[0])
        h = F.zeros_like(x[0])
        i = F.zeros((1,))
        while i < 3:
            h = h + F.take(x, F.minimum(i, 0))[0] * (pos + i)
            i = i + 1
        return h


@program(*BATCHED)
class DenseDeferredInForBody(HybridBlock):
    """A deferred Dense (flatten=False) in a tensor for over steps (B, 4), states where'd."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, flatten=False)

    @autograph
    def hybrid_forward(self, F, steps, h):
        for step in steps:
            h = F.where(F.sum(step, axis=1) > 0, F.tanh(self.fc(h) + step), h)
        return h
