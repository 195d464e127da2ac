"""Issue 24, sixth round: code ported from TensorFlow and PyTorch the way people write it:
shapes read as numbers (``range(x.shape[0])``, ``x.shape[-1]``), closures over a loop's row,
dict states changed by ``update``/``pop``/``del``/``dict(...)``, augmented assignments that
plain NDArrays run in place (aliases, lists, chained names, tuple states), helpers with side
effects, globals, generators, comprehensions, enumerate/zip, early exits, while ... else and
try/finally in loops. ``PROGRAMS`` maps each block class to its input lists
(``hostile_harness.classify`` runs them)."""
import numpy as np
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness
from hostile_programs8 import PAIRS, ROWS

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

STEPS = 0    # a global counter (GlobalCounterInTensorLoop)


# ------------------------------------------------------------------------- shapes as numbers

@program(*ROWS)
class RangeOfShapeThroughDense(HybridBlock):
    """for i in range(x.shape[0]) on a Dense's output, x.ndim and x.shape[-1] as numbers."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(3, flatten=False, in_units=4)

    @autograph
    def hybrid_forward(self, F, x):
        y = self.fc(x)
        h = y[0] * 0
        for i in range(y.shape[0]):
            h = h * 0.5 + y[i] * (i + 1)
        return h / y.shape[-1] + y.ndim


@program(*ROWS)
class ShapeSplitsInHalves(HybridBlock):
    """x[: x.shape[0] // 2] and the rest: PyTorch's split by a computed size."""

    @autograph
    def hybrid_forward(self, F, x):
        half = x.shape[0] // 2
        return F.sum(x[:half], axis=0) - F.sum(x[half:], axis=0) * 0.5


@program(*ROWS)
class ReshapeByShape(HybridBlock):
    """F.reshape(x, (x.shape[0] * x.shape[1],)) then a mean by the size."""

    @autograph
    def hybrid_forward(self, F, x):
        flat = F.reshape(x, (x.shape[0] * x.shape[1],))
        return flat * 2 / (x.shape[0] * x.shape[1])


@program(*ROWS)
class ShapeReadInsideTensorLoop(HybridBlock):
    """The outer input's shape read in the body of a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            h = h + r / x.shape[0]
        return h


# ------------------------------------------------------------------------- closures in loops

@program(*ROWS)
class LambdaAndDefReadTheRow(HybridBlock):
    """A lambda and a def made in the body of a tensor for, reading its row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            f = lambda v: v * 0.5 + r  # noqa: E731

            def g(v):
                return v - r * 0.1
            h = g(f(h))
        return h


@program(*ROWS)
class CondLambdasReadTheRow(HybridBlock):
    """tf.cond(pred, lambda: h + r, lambda: h - r) per row (gluon_cf.cond)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            h = gluon_cf.cond(F.sum(r) > 0, lambda: h + r, lambda: h - r * 0.5)
        return h

    def plain_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            h = h + r if F.sum(r).asscalar() > 0 else h - r * 0.5
        return h


@program(*ROWS)
class ClosuresKeptPastTheLoop(HybridBlock):
    """fs.append(lambda: r * k): the closures outlive the loop (each reads the last row)."""

    @autograph
    def hybrid_forward(self, F, x):
        fs = []
        for r in x:
            fs.append(lambda: r * 2)
        return fs[0]() + fs[-1]()


# ------------------------------------------------------------------------- dict states

@program(*ROWS)
class DictUpdateEachStep(HybridBlock):
    """state.update(h=..., c=...) per row."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0] * 0, "c": x[0]}
        for r in x:
            state.update(h=F.tanh(state["h"] + r), c=state["c"] * 0.5)
        return state["h"] + state["c"]


@program(*ROWS)
class DictUpdateWithDisplay(HybridBlock):
    """state.update({"h": ...}) under a tensor if, in a loop."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0] * 0}
        for r in x:
            if F.sum(r) > 0:
                state.update({"h": state["h"] + r})
        return state["h"]


@program(*ROWS)
class DictPopTemporary(HybridBlock):
    """A temporary key set, then popped into the state, each step."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0] * 0}
        for r in x:
            state["tmp"] = r * 2
            state["h"] = state["h"] + state.pop("tmp")
        return state["h"], F.ones((1,)) * len(state)


@program(*ROWS)
class DictMadeByDictCall(HybridBlock):
    """d = dict(h=..., n=...) then item assignments in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        d = dict(h=x[0] * 0, n=F.zeros((1,)))
        for r in x:
            d["h"] = d["h"] + r * r
            d["n"] = d["n"] + 1
        return d["h"] / d["n"]


@program(*ROWS)
class DictDelThenSet(HybridBlock):
    """del d["tmp"] after using it, each step, and pop with a default."""

    @autograph
    def hybrid_forward(self, F, x):
        d = {"h": x[0] * 0}
        for r in x:
            d["tmp"] = F.relu(r)
            d["h"] = d["h"] + d["tmp"]
            del d["tmp"]
        return d["h"] + d.pop("missing", 1.0)


# ------------------------------------------------------------------------- in-place updates

@program(*ROWS)
class AliasThenAugmented(HybridBlock):
    """z = y; z += 1: plain MXNet writes y too (refused while recording y's graph)."""

    @autograph
    def hybrid_forward(self, F, x):
        y = x * 2
        z = y
        z += 1
        return y * z

    def oracle_where_plain_fails(self, F, x):
        y = x * 2
        z = y + 1
        return y * z


@program(*ROWS)
class FreshAugmentedInLoop(HybridBlock):
    """h = x[0] * 0 then h += r per row: nothing else holds h's array."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            h += r
            h *= 0.9
        return h

    def oracle_where_plain_fails(self, F, x):
        h = x[0] * 0
        for r in x:
            h = (h + r) * 0.9
        return h


@program(*ROWS)
class AppendThenAugmented(HybridBlock):
    """outs.append(h); h += r: the list holds the array plain MXNet changes in place."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x[0] * 1
        for t in range(2):
            outs.append(h)
            h += x[t]
        return F.stack(*outs)

    def oracle_where_plain_fails(self, F, x):
        outs = []
        h = x[0] * 1
        for t in range(2):
            outs.append(h)
            h = h + x[t]
        return F.stack(*outs)


@program(*ROWS)
class ChainedNamesAugmented(HybridBlock):
    """h = h0 = F.zeros_like(...); h += r: both names hold one array."""

    @autograph
    def hybrid_forward(self, F, x):
        h = h0 = F.zeros_like(x[0])
        h += x[0]
        return h + h0

    def oracle_where_plain_fails(self, F, x):
        h = h0 = F.zeros_like(x[0])
        h = h + x[0]
        return h + h0


@program(*ROWS)
class TupleStateUnpackedAugmented(HybridBlock):
    """h, c = state; h += ...: the tuple holds h's array."""

    @autograph
    def hybrid_forward(self, F, x):
        state = (x[0] * 1, x[1] * 1)
        h, c = state
        h += c
        return h + state[0]

    def oracle_where_plain_fails(self, F, x):
        state = (x[0] * 1, x[1] * 1)
        h, c = state
        h = h + c
        return h + state[0]


@program(*ROWS)
class HelperAugmentsItsArgument(HybridBlock):
    """def bump(v): v += 1: plain MXNet changes the caller's array."""

    def bump(self, v):
        v += 1
        return v * 2

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 1
        out = self.bump(h)
        return out + h

    def oracle_where_plain_fails(self, F, x):
        h = x[0] * 1
        return (h + 1) * 2 + h


# ------------------------------------------------------------------------- side effects

@program(*ROWS)
class HelperCountsCallsOutsideLoops(HybridBlock):
    """A helper counting its calls in self, called twice outside tensor loops."""

    def scale(self, v):
        self.calls = getattr(self, "calls", 0) + 1
        return v * 0.5

    @autograph
    def hybrid_forward(self, F, x):
        self.calls = 0
        h = self.scale(x[0]) + self.scale(x[-1])
        return h * self.calls


@program(*ROWS)
class GlobalCounterInTensorLoop(HybridBlock):
    """global STEPS; STEPS += 1 in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        global STEPS
        STEPS = 0
        h = x[0] * 0
        for r in x:
            STEPS += 1
            h = h + r
        return h * STEPS


@program(*ROWS)
class AttributeAccumulatorNoLoop(HybridBlock):
    """self.acc = ...; self.acc += x[1]: an attribute updated out of loops."""

    @autograph
    def hybrid_forward(self, F, x):
        self.acc = x[0] * 1
        self.acc = self.acc + x[1]
        return self.acc * 2


# ------------------------------------------------------------------------- iteration

@program(*ROWS)
class GeneratorHelperOverRows(HybridBlock):
    """def rows(x): for r in x: yield r * 2, then a for over it."""

    def rows(self, x):
        for r in x:
            yield r * 2

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in self.rows(x):
            h = h + r
        return h


@program(*ROWS)
class EnumerateSkipOdd(HybridBlock):
    """for i, r in enumerate(x): if i % 2: continue."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for i, r in enumerate(x):
            if i % 2:
                continue
            h = h + r * (i + 1)
        return h


@program(*PAIRS)
class ZipWithIndexWeight(HybridBlock):
    """for k, (a, b) in enumerate(zip(x, y)): h += a * b * k, out of place."""

    @autograph
    def hybrid_forward(self, F, x, y):
        h = x[0] * 0
        for k, (a, b) in enumerate(zip(x, y)):
            h = h + a * b * k
        return h


@program(*ROWS)
class SumOfGeneratorOverRows(HybridBlock):
    """sum(F.tanh(r) for r in x)."""

    @autograph
    def hybrid_forward(self, F, x):
        return sum(F.tanh(r) for r in x)


@program(*ROWS)
class ListCompOfRowsStacked(HybridBlock):
    """F.stack(*[r * 2 for r in x])."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*[r * 2 + 1 for r in x])


# ------------------------------------------------------------------------- early exits

@program(*ROWS)
class EarlyReturnInTensorFor(HybridBlock):
    """return inside a tensor for, under a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            h = h + r
            if F.sum(h) > 1.5:
                return h * 10
        return h


@program(*ROWS)
class NestedRangeAndTensorLoops(HybridBlock):
    """for k in range(2): for r in x: a Python loop around a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for k in range(2):
            for r in x:
                h = h * 0.5 + r * (k + 1)
        return h


@program(*ROWS)
class WhileElseNoBreak(HybridBlock):
    """while i < n: ... else: h = h * 2 (no break: the else always runs)."""

    @autograph(max_iterations=8)
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        i = F.zeros((1,))
        while i < 3:
            h = h + x[0] * i
            i = i + 1
        else:
            h = h * 2
        return h


@program(*ROWS)
class TryFinallyInTensorLoop(HybridBlock):
    """try: h = ... finally: k = k + 1 in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        k = F.zeros((1,))
        for r in x:
            try:
                h = h + r
            finally:
                k = k + 1
        return h / k


@program(*ROWS)
class BreakAfterPythonRange(HybridBlock):
    """for t in range(4): h = ...; if tensor: break (the decoder shape)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for t in range(4):
            h = F.tanh(h + x[0] * (t + 1))
            if F.max(h) > 0.9:
                break
        return h


# ------------------------------------------------------------------------- more shapes

@program(*ROWS)
class PythonIfOnShape(HybridBlock):
    """if x.shape[0] > 2: one computation, else another (a graph per shape)."""

    @autograph
    def hybrid_forward(self, F, x):
        if x.shape[0] > 2:
            return F.sum(x[:2], axis=0) * 2
        return F.sum(x, axis=0)


@program(*ROWS)
class LenOfTensorAsBound(HybridBlock):
    """n = len(x); for i in range(n): PyTorch's len of the first axis."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for i in range(len(x)):
            h = h + x[i] * (i % 2)
        return h


@program(*ROWS)
class PythonWhileOverShape(HybridBlock):
    """i = 0; while i < x.shape[0]: h = h + x[i]; i += 1 (a Python loop)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        i = 0
        while i < x.shape[0]:
            h = h * 0.5 + x[i]
            i += 1
        return h


@program(*ROWS)
class ReshapeByNumpyProduct(HybridBlock):
    """x.reshape((int(np.prod(x.shape)),)) then a split at the middle."""

    @autograph
    def hybrid_forward(self, F, x):
        n = int(np.prod(x.shape))
        flat = x.reshape((n,))
        return flat[: n // 2] * 2


# ------------------------------------------------------------------------- more closures

@program(*ROWS)
class LambdaInBodyReadsCarriedState(HybridBlock):
    """g = lambda: h * 0.5 made each step, reading the carried h."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0 + 1
        for r in x:
            g = lambda: h * 0.5  # noqa: E731
            h = g() + r
        return h


@program(*ROWS)
class ClosureInWhileBody(HybridBlock):
    """def step(v): return v * i made in a tensor while's body."""

    @autograph(max_iterations=6)
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        i = F.zeros((1,))
        while i < 3:
            def step(v):
                return v + x[0] * i
            h = step(h)
            i = i + 1
        return h


# ------------------------------------------------------------------------- more in place

@program(*ROWS)
class ListItemAugmented(HybridBlock):
    """outs[0] += x[1]: an item of a list, in place on its NDArray."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [x[0] * 1, x[1] * 1]
        outs[0] += x[1]
        return outs[0] + outs[1]

    def oracle_where_plain_fails(self, F, x):
        outs = [x[0] * 1, x[1] * 1]
        outs[0] = outs[0] + x[1]
        return outs[0] + outs[1]


@program(*ROWS)
class AttributeAugmented(HybridBlock):
    """self.total = ...; self.total += x[1] (an attribute, in place on its NDArray)."""

    @autograph
    def hybrid_forward(self, F, x):
        self.total = x[0] * 1
        self.total += x[1]
        return self.total * 2

    def oracle_where_plain_fails(self, F, x):
        self.total = x[0] * 1
        self.total = self.total + x[1]
        return self.total * 2


@program(*ROWS)
class DictUpdateWithAliasThenAugmented(HybridBlock):
    """state.update(h=h) then state["h"] += r: the dict holds h's array."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 1
        state = {"n": 0}
        state.update(h=h)
        state["h"] += x[1]
        return h + state["h"]

    def oracle_where_plain_fails(self, F, x):
        h = x[0] * 1
        return h + h + x[1]


# ------------------------------------------------------------------------- more iteration

@program(*ROWS)
class ForOverTransposeAndSlice(HybridBlock):
    """for c in x.T[1:]: columns after the first."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[:, 0] * 0
        for c in x.T[1:]:
            h = h * 0.5 + c
        return h


@program(*ROWS)
class WhereKeepsStateInLoop(HybridBlock):
    """h = F.where(r > 0, r, h): a masked state update per row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            h = F.where(r > 0, r, h)
        return h
