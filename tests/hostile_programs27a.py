"""Round 27a: a hostile round on autograph, written as users port PyTorch/TensorFlow/MXNet code
into hybridized blocks: ``match`` on Python values inside tensor loops, walrus in tensor
conditions and comprehensions, chained comparisons and ``not``/``and``/``or`` mixing tensors
and Python values, ternaries on tensors in loops, generators, ``functools``, ``*args``,
decorators, callable objects and child blocks in loops, ``try``/``except`` around tensor ops,
collected lists read back (``reversed``, ``sorted``, slices), dict/set comprehensions, early
returns and breaks in nested loops, structured carries, decoders and attention loops.
``PROGRAMS`` maps each block class to its input lists; the oracle is the plain Python function
on NDArrays (``hybrid_forward.__wrapped__``)."""
import collections
import dataclasses
import functools
import operator

import numpy as np
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

ROWS = ([rand(4, 3, seed=2701)], [rand(1, 3, seed=2702) + 1], [rand(3, 3, seed=2703) - 0.5])
SEQ = ([rand(5, 2, seed=2704) * 2], [rand(2, 2, seed=2705) + 0.5])
STATES = ([floats(1.0, 2.0)], [floats(5.0, 1.0)], [floats(-3.0, -2.0)], [floats(0.25, 0.1)])
POSITIVE = ([floats(1.0, 2.0)], [floats(5.0, 1.0)], [floats(0.25, 0.1)])
PAIR = ([rand(4, 3, seed=2706), rand(3, seed=2707)], [rand(2, 3, seed=2708), rand(3, seed=2709)])

Pair = collections.namedtuple("Pair", "h c")


@dataclasses.dataclass
class Carry:
    h: object
    n: object


SCALE = 0.5


# ---------------------------------------------------------------- match inside tensor loops


@program(*ROWS)
class MatchStrModeInTensorFor(HybridBlock):
    """``match self.mode`` (a Python str) in each step of a tensor for."""

    def __init__(self):
        super().__init__()
        self.mode = "gate"

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            match self.mode:
                case "sum":
                    h = h + row
                case "gate":
                    h = F.sigmoid(row) * h + row
                case _:
                    h = h - row
        return h


@program(*ROWS)
class MatchTupleCaptureInTensorWhile(HybridBlock):
    """``match (k, self.scale)`` capturing ``s`` inside a tensor while."""

    def __init__(self):
        super().__init__()
        self.scale = 0.5

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        i = F.zeros((1,))
        k = 2
        while F.sum(i) < 3:
            match (k, self.scale):
                case (1, s):
                    h = h + s
                case (2, s):
                    h = h * s + 1
                case _:
                    h = h * 0
            i = i + 1
        return h


@program(*STATES)
class MatchClassPatternOnNamedTupleCarry(HybridBlock):
    """``match st: case Pair(h=a, c=b)`` on a namedtuple carried by a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        st = Pair(x, x * 0)
        while F.sum(st.h) < 8:
            match st:
                case Pair(h=a, c=b):
                    st = Pair(F.abs(a) + 1, b + a)
        return st.h + st.c


@program(*ROWS)
class MatchListLengthOfPythonList(HybridBlock):
    """``match weights: case [a, b]`` on a Python list inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        weights = [0.5, 2.0]
        h = F.zeros((3,))
        for row in x:
            match weights:
                case [a]:
                    h = h + a * row
                case [a, b]:
                    h = F.tanh(h * a + row * b)
        return h


# ---------------------------------------------------------------- walrus


@program(*ROWS)
class WalrusInTensorIfInFor(HybridBlock):
    """``if (s := F.sum(row)) > 0: h = h + s`` in a tensor for; ``s`` only inside."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1,))
        for row in x:
            if (s := F.sum(row)) > 0:
                h = h + s
            else:
                h = h - s * 0.5
        return h


@program(*ROWS)
class WalrusInComprehensionInTensorFor(HybridBlock):
    """``[(z := row * k) for k in range(3)]`` then ``z`` (the last) in the step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            ys = [(z := row * k) for k in range(1, 4)]
            h = F.tanh(h + F.add_n(*ys)) + z * 0.1
        return h


@program(*ROWS)
class WalrusInWhileConditionWithAnd(HybridBlock):
    """``while (n := F.norm(h)) > 0.5 and F.sum(i) < 4:`` then ``n`` read after."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 3
        i = F.zeros((1,))
        while (n := F.norm(h)) > 0.5 and F.sum(i) < 4:
            h = h * 0.5
            i = i + 1
        return h + n


@program(*ROWS)
class WalrusInDictComprehension(HybridBlock):
    """``{k: (v := row * w) for k, w in ...}`` in a tensor for, ``v`` after it in the step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            parts = {k: (v := row * w) for k, w in (("a", 1.0), ("b", -2.0))}
            h = h + parts["a"] - parts["b"] * 0.25 + v
        return h


# ---------------------------------------------------------------- comparisons and boolean ops


@program(*STATES)
class ChainedPythonBoundsInWhile(HybridBlock):
    """``while 0 < F.sum(h) < 10:`` (Python's ``and`` of two tests)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        i = F.zeros((1,))
        while 0 < F.sum(h) < 10:
            h = h * 1.5 + 0.25
            i = i + 1
        return h, i


@program(*ROWS)
class NotAndOrMixedInRangeLoop(HybridBlock):
    """``if not flag and F.sum(h) > 0 or k == 2:`` in a Python range."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        flag = False
        for k in range(4):
            if not flag and F.sum(h) > 0 or k == 2:
                h = h - 0.75
            else:
                h = h * 1.5
            flag = k == 1
        return h


@program(*ROWS)
class OrWithPythonFirstTensorSecondInFor(HybridBlock):
    """``if self.always or F.max(row) > 0.5:`` with ``always`` False, in a tensor for."""

    def __init__(self):
        super().__init__()
        self.always = False

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            if self.always or F.max(row) > 0.5:
                h = h + row
        return h


@program(*ROWS)
class NotOfTensorComparisonInTernary(HybridBlock):
    """``h = h + row if not F.sum(row) > 0 else h - row`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        for row in x:
            h = h + row if not F.sum(row) > 0 else h * 0.5 - row
        return h


@program(*ROWS)
class ChainedComparisonTensorMiddleInIf(HybridBlock):
    """``if -0.5 < F.mean(row) <= 0.5:`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            if -0.5 < F.mean(row) <= 0.5:
                h = h + row * 2
            else:
                h = h - 1
        return h


# ---------------------------------------------------------------- asserts, ternaries


@program(*ROWS)
class AssertOnPythonConfigInHelperInLoop(HybridBlock):
    """A helper asserting a Python value, called in a tensor for."""

    def step(self, F, h, row, k):
        assert k > 0, "k must be positive"
        return h * (1.0 / k) + row

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = self.step(F, h, row, 2)
        return h


@program(*ROWS)
class NestedTernaryOfTensorsInFor(HybridBlock):
    """``a if c1 else (b if c2 else d)`` with tensor conditions in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = h + row if F.sum(row) > 0.5 else (h - row if F.sum(row) < -0.5 else h * 0.5)
        return h


@program(*ROWS)
class TernaryOfPythonCondInTensorWhile(HybridBlock):
    """``row * 2 if k % 2 else -row`` with ``k`` a Python counter of the enclosing range."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for k in range(3):
            i = F.zeros((1,))
            while F.sum(i) < 2:
                h = h + (x[0] * 2 if k % 2 else -x[0])
                i = i + 1
        return h


# ---------------------------------------------------------------- counters, generators, functools


class Counted(HybridBlock):
    steps = 3


@program(*ROWS)
class ClassAttributeStepsInWhile(Counted):
    """A class attribute (``type(self).steps``) bounding a tensor while's counter."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        i = F.zeros((1,))
        while F.sum(i) < type(self).steps:
            h = F.tanh(h * 2)
            i = i + 1
        return h


@program(*ROWS)
class GlobalScaleReadInHelperInLoop(HybridBlock):
    """A module global read by a helper called in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = scaled_add(h, row)
        return h


def scaled_add(h, row):
    return h * SCALE + row


def python_scales():
    yield 0.5
    yield 2.0


def rows_of(F, x, n):
    for k in range(n):
        yield x[k]


@program(*ROWS)
class GeneratorOfPythonScalesInTensorLoop(HybridBlock):
    """``for s in python_scales():`` (a user generator) inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            for s in python_scales():
                h = h * s + row
        return h


@program(*ROWS)
class GeneratorOfRowsBeforeTensorIf(HybridBlock):
    """``sum(rows_of(F, x, 1))`` (a user generator of tensor rows) then a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        total = sum(rows_of(F, x, 1))
        if F.sum(total) > 0:
            total = total * 2
        return total


@program(*ROWS)
class ReduceOverTensorsInTensorFor(HybridBlock):
    """``functools.reduce(lambda a, b: a * 0.5 + b, [row, h, row * 2])`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        for row in x:
            h = functools.reduce(lambda a, b: a * 0.5 + b, [row, h, row * 2])
        return h


@program(*ROWS)
class ReduceWithOperatorInTensorIf(HybridBlock):
    """``functools.reduce(operator.mul, [...], h)`` in a tensor if's branch."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        if F.sum(h) > 0:
            h = functools.reduce(operator.mul, [F.tanh(x[0]), x[0] + 1], h)
        else:
            h = functools.reduce(operator.add, [x[0], h])
        return h


def gated(h, row, *, gate, bias=0.0):
    return h * gate + row + bias


@program(*ROWS)
class PartialWithTensorGateInWhile(HybridBlock):
    """``functools.partial(gated, gate=g)`` made before a tensor while, called inside."""

    @autograph
    def hybrid_forward(self, F, x):
        g = F.sigmoid(x[0])
        step = functools.partial(gated, gate=g, bias=0.25)
        h = F.zeros((3,))
        i = F.zeros((1,))
        while F.sum(i) < 3:
            h = step(h, x[0])
            i = i + 1
        return h


def mix(*values, scale=1.0, **extra):
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total * scale + extra.get("bias", 0.0)


@program(*ROWS)
class StarArgsKwargsHelperInTensorFor(HybridBlock):
    """``mix(h, row, row * 2, scale=0.5, **opts)`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        opts = {"bias": 0.1}
        for row in x:
            h = mix(h, row, row * 2, scale=0.5, **opts)
        return h


@program(*ROWS)
class StarredListIntoHelperInTensorFor(HybridBlock):
    """``mix(*parts)`` with ``parts`` a list the step makes."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            parts = [h, row]
            if True:
                parts.append(row * 3)
            h = F.tanh(mix(*parts))
        return h


def doubling(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) * 2
    return wrapper


def plain_doubling(fn):
    def wrapper(*args):
        return fn(*args) * 2
    return wrapper


@doubling
def clipped_step(F, h, row):
    if F.sum(h) > 1:
        h = h * 0.25
    return h + row


@plain_doubling
def plain_decorated_step(F, h, row):
    if F.sum(row) > 0:
        return h * 0.5 + row
    return h - row


@program(*ROWS)
class WrapsDecoratedHelperWithTensorIfInFor(HybridBlock):
    """A ``functools.wraps`` decorated helper with a tensor if, in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = clipped_step(F, h, row) * 0.25
        return h


@program(*ROWS)
class PlainDecoratedHelperWithTensorReturnInFor(HybridBlock):
    """A decorator without ``wraps`` around a helper that returns under a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = plain_decorated_step(F, h, row) * 0.25
        return h


# ---------------------------------------------------------------- callables and child blocks


class Scaler:
    def __init__(self, k):
        self.k = k

    @property
    def half(self):
        return self.k / 2

    def __call__(self, F, h):
        if F.sum(h) > 0:
            return h * self.half
        return h * self.k


@program(*ROWS)
class CallableObjectWithPropertyInFor(HybridBlock):
    """A plain object's ``__call__`` (a tensor if, a property) in a tensor for."""

    def __init__(self):
        super().__init__()
        self.scaler = Scaler(3.0)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        for row in x:
            h = self.scaler(F, h - row)
        return h


class GatedChild(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = nn.Dense(3, in_units=3)

    @property
    def factor(self):
        return 0.5

    @autograph
    def hybrid_forward(self, F, h):
        out = self.dense(h)
        if F.sum(out) > 0:
            out = F.tanh(out) * self.factor
        else:
            out = out * 0.1
        return out


@program(*ROWS)
class AutographChildWithPropertyInWhile(HybridBlock):
    """A child block (autograph, a tensor if, a property) called in a tensor while."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.child = GatedChild()

    @autograph
    def hybrid_forward(self, F, x):
        h = x[:1]
        i = F.zeros((1,))
        while F.sum(i) < 3:
            h = self.child(h) + x[:1]
            i = i + 1
        return h


@program(*ROWS)
class ChildBlocksInListCalledByIndexInFor(HybridBlock):
    """``self.layers[k % 2]`` in a Python range inside a tensor for."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.layers = nn.HybridSequential()
            self.layers.add(nn.Dense(3, in_units=3), nn.Dense(3, in_units=3))

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1, 3))
        for row in x:
            for k in range(3):
                h = F.tanh(self.layers[k % 2](h + row.reshape((1, 3))))
        return h


# ---------------------------------------------------------------- try/except


@program(*ROWS)
class TryExceptIndexErrorOnRowInFor(HybridBlock):
    """``try: h = h + row[5] except IndexError: h = h + row`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            try:
                h = h + row[5]
            except IndexError:
                h = h + row * 0.5
        return h


@program(*ROWS)
class TryExceptZeroDivisionPythonInFor(HybridBlock):
    """``1.0 / k`` of a Python zero caught in a tensor for's step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        k = 0
        for row in x:
            try:
                w = 1.0 / k
            except ZeroDivisionError:
                w = 0.5
            h = h * w + row
        return h


@program(*ROWS)
class TryElseFinallyInTensorWhile(HybridBlock):
    """``try/except/else/finally`` with tensor ops in each part, in a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        g = F.zeros((3,))
        i = F.zeros((1,))
        while F.sum(i) < 2:
            try:
                h = h * 2
            except ValueError:
                h = h * 0
            else:
                g = g + h
            finally:
                i = i + 1
        return h + g


# ---------------------------------------------------------------- collected lists


@program(*ROWS)
class RangeLenOfPythonCollectedWithTensorIf(HybridBlock):
    """Rows collected by a Python range, then ``for i in range(len(outs))`` with a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros((3,))
        for k in range(3):
            h = F.tanh(h + x[0] * k)
            outs.append(h)
        total = F.zeros((3,))
        for i in range(len(outs)):
            if F.sum(outs[i]) > 0:
                total = total + outs[i] * i
            else:
                total = total - outs[-1 - i]
        return total


@program(*ROWS)
class SortedReversedSlicedPythonCollected(HybridBlock):
    """``sorted(range(len(outs)), key=...)``, ``reversed(outs)`` and ``outs[1::2]``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        weights = [0.3, 0.1, 0.2, 0.4]
        h = x[0]
        for k in range(4):
            h = h * 0.5 + k
            outs.append(h)
        order = sorted(range(len(outs)), key=lambda j: weights[j])
        first = F.stack(*[outs[j] for j in order])
        back = F.stack(*reversed(outs))
        odd = F.stack(*outs[1::2])
        return first, back, odd


@program(*ROWS)
class ReversedOfTensorLoopCollectedFirstItem(HybridBlock):
    """Rows collected by a tensor for, then ``list(reversed(outs))[0]`` (the last)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros((3,))
        for row in x:
            h = h + row
            outs.append(h)
        back = list(reversed(outs))
        return back[0] * 2


@program(*ROWS)
class ZipPairsTransposedFromPythonLoop(HybridBlock):
    """``hs, cs = zip(*pairs)`` of (h, c) tuples a Python range collected."""

    @autograph
    def hybrid_forward(self, F, x):
        pairs = []
        h = x[0]
        c = x[0] * 0
        for k in range(3):
            if F.sum(h) > 0:
                h = h * 0.5
            c = c + h
            pairs.append((h, c))
        hs, cs = zip(*pairs)
        return F.stack(*hs) + F.stack(*cs)


@program(*ROWS)
class StarUnpackOfPythonCollected(HybridBlock):
    """``first, *rest = outs`` of a Python range's collected rows."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x[0]
        for k in range(3):
            h = F.relu(h + 0.5) - 0.25
            outs.append(h)
        first, *rest = outs
        return first * 3 + F.add_n(*rest)


# ---------------------------------------------------------------- comprehensions, prints


@program(*ROWS)
class DictComprehensionCarryInTensorFor(HybridBlock):
    """A dict carry rebuilt by a comprehension each step."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"a": F.zeros((3,)), "b": F.ones((3,))}
        for row in x:
            state = {k: v * 0.5 + row for k, v in state.items()}
        return state["a"] + state["b"] * 2


@program(*ROWS)
class SetComprehensionOfPythonKeysInTensorFor(HybridBlock):
    """``{k % 2 for k in range(5)}`` (a Python set) used in a tensor for's step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            keys = {k % 2 for k in range(5)}
            h = h + row * len(keys) + (1 if 1 in keys else 0)
        return h


@program(*ROWS)
class FStringOfTensorInTensorIf(HybridBlock):
    """``msg = f"{h}"`` (a str never used as a value) under a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        if F.sum(h) > 0:
            msg = f"positive {F.sum(h)}"
            h = h * 2
        return h


# ---------------------------------------------------------------- returns, breaks, else


@program(*ROWS)
class EarlyReturnInsideNestedTensorAndRangeLoops(HybridBlock):
    """``return`` inside ``for k in range(2)`` inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            for k in range(2):
                h = h + row * (k + 1)
                if F.sum(h) > 2:
                    return h * 10
        return h


@program(*ROWS)
class BreakInInnerTensorWhileInTensorFor(HybridBlock):
    """A tensor while with a tensor break, inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            i = F.zeros((1,))
            while F.sum(i) < 4:
                h = h + row * 0.5
                i = i + 1
                if F.sum(h) > 1:
                    break
        return h


@program(*ROWS)
class ForElseOnRangeWithTensorBreakInTensorFor(HybridBlock):
    """``for k in range(3): ... break ... else: h = h * 0`` inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            for k in range(3):
                h = h + row
                if F.sum(h) > 1:
                    break
            else:
                h = h * 0.5
        return h


@program(*ROWS)
class ForElseOnPythonListNoBreak(HybridBlock):
    """``for w in weights: ... else:`` with a tensor if in the body (no break)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for w in [0.5, 2.0]:
            if F.sum(h) > 0:
                h = h * w
        else:
            h = h + 1
        return h


# ---------------------------------------------------------------- structured carries


@program(*ROWS)
class NamedTupleReplaceInTensorForWithIf(HybridBlock):
    """``st = st._replace(h=...)`` under a tensor if in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        st = Pair(F.zeros((3,)), F.ones((3,)))
        for row in x:
            if F.sum(row) > 0:
                st = st._replace(h=st.h + row)
            else:
                st = st._replace(c=st.c * row)
        return st.h - st.c


@program(*STATES)
class DataclassReplaceInTensorWhile(HybridBlock):
    """``st = dataclasses.replace(st, h=...)`` carried by a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        st = Carry(x, F.zeros((1,)))
        while F.sum(st.n) < 3:
            st = dataclasses.replace(st, h=st.h * 0.5 + 1, n=st.n + 1)
        return st.h


@program(*POSITIVE)
class PythonCounterOnlyInTensorWhile(HybridBlock):
    """``k = k + 1`` (a Python int, the while's only variable) under a tensor condition."""

    @autograph
    def hybrid_forward(self, F, x):
        k = 0
        while F.sum(x) > k:
            gluon_cf.max_iterations(40)
            k = k + 1
        return x * k


@program(*POSITIVE)
class DictWithPythonCountInTensorWhile(HybridBlock):
    """``st = {"h": ..., "n": st["n"] + 1}`` (a Python count beside the array)."""

    @autograph
    def hybrid_forward(self, F, x):
        st = {"h": x, "n": 0}
        while F.sum(st["h"]) < 10:
            gluon_cf.max_iterations(40)
            st = {"h": st["h"] * 2, "n": st["n"] + 1}
        return st["h"] * st["n"]


@program(*ROWS)
class TupleCarrySwappedAndUnpackedInFor(HybridBlock):
    """``state = (b, a + row)`` with ``a, b = state`` at the start of each step."""

    @autograph
    def hybrid_forward(self, F, x):
        state = (F.zeros((3,)), F.ones((3,)))
        for row in x:
            a, b = state
            state = (b, a + row)
        return state[0] * 2 + state[1]


# ---------------------------------------------------------------- decoders and attention


@program([floats(0.1, 0.5, 0.2, 0.9, 0.3, 0.6)], [floats(0.9, 0.1, 0.1, 0.1, 0.2, 0.3)])
class GreedyDecoderPythonMaxLenTensorStop(HybridBlock):
    """A greedy decoder over a Python range with a tensor stop (``argmax == 0``) break."""

    @autograph
    def hybrid_forward(self, F, logits):
        h = logits.reshape((2, 3))
        tokens = []
        for t in range(4):
            tok = F.argmax(h, axis=1)
            tokens.append(tok)
            if F.sum(tok == 0) > 0:
                break
            h = h * 0.5 + F.one_hot(tok, 3)
        return F.stack(*tokens)


@program([rand(3, 4, seed=2710)], [rand(3, 4, seed=2711) + 0.2])
class BeamTopKWithTensorStopInWhile(HybridBlock):
    """A two-beam top-k loop carrying scores, stopping on a tensor score threshold."""

    @autograph
    def hybrid_forward(self, F, x):
        scores = F.zeros((2,))
        i = F.zeros((1,))
        best = F.zeros((1,))
        while F.sum(i) < 3 and F.max(scores) < 2.5:
            step = F.take(x, F.minimum(i, 2)).reshape((4,))
            cand = F.broadcast_add(scores.reshape((2, 1)), step.reshape((1, 4)))
            top = F.topk(cand.reshape((8,)), k=2, ret_typ="value")
            scores = top
            best = F.max(top).reshape((1,))
            i = i + 1
        return scores, best


@program([rand(4, 3, seed=2712), floats(3)], [rand(4, 3, seed=2713), floats(1)])
class MaskedAttentionOverTimeStepsInFor(HybridBlock):
    """Attention over time with a length mask (``F.where``) and a tensor skip per step."""

    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, length):
        steps = F.arange(4)
        mask = F.broadcast_lesser(steps, length)
        query = F.ones((3,))
        ctx = F.zeros((3,))
        for t in range(4):
            scores = F.dot(x, query)
            scores = F.where(mask, scores, F.ones_like(scores) * -1e4)
            att = F.softmax(scores)
            if F.sum(att) > 0:
                ctx = F.dot(att, x)
            query = F.tanh(query + ctx)
        return ctx, query


@program(*SEQ)
class EncoderLoopWithPythonStepCounterTernary(HybridBlock):
    """``alpha = 0.5 if t == 0 else 0.9`` with ``t`` from ``enumerate`` over a Python range."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((2,))
        for t, k in enumerate(range(3)):
            alpha = 0.5 if t == 0 else 0.9
            for row in x:
                h = alpha * h + (1 - alpha) * row * (k + 1)
        return h


@program(*PAIR)
class OperatorDictOfLambdasInTensorFor(HybridBlock):
    """``ops[name](h, row)`` from a dict of lambdas, the name chosen by a Python counter."""

    @autograph
    def hybrid_forward(self, F, x, b):
        ops = {"add": lambda a, c: a + c, "mul": lambda a, c: a * c + 0.1}
        names = ["add", "mul"]
        h = b
        for row in x:
            for k in range(2):
                h = ops[names[k]](h, row)
        return h


@program(*ROWS)
class HelperEarlyReturnInPythonLoopCalledInTensorFor(HybridBlock):
    """A helper returning from inside its own Python for (a tensor if there)."""

    def pick(self, F, h, row):
        for w in (0.25, 0.5, 1.0):
            if F.sum(h * w) > 1:
                return h * w
        return h + row

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        for row in x:
            h = self.pick(F, h, row)
        return h


@program(*ROWS)
class ApplyForwardingArgsAndKwargs(HybridBlock):
    """``apply(fn, *args, **kwargs)`` forwarding to a helper with a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        return apply_to(halve_until, F, x[0], limit=0.5)


def apply_to(fn, *args, **kwargs):
    return fn(*args, **kwargs)


def halve_until(F, h, limit=1.0):
    while F.norm(h) > limit:
        h = h * 0.5
    return h


# ---------------------------------------------------------------- round two: appends, jumps


@program(*ROWS)
class TwoAppendsToOneListPerStep(HybridBlock):
    """``outs.append(h); outs.append(c)`` in one step of a tensor for: interleaved rows."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros((3,))
        for row in x:
            h = h + row
            outs.append(h)
            outs.append(row * 2)
        return F.stack(*outs)


@program(*ROWS)
class AppendInPythonRangeInsideTensorFor(HybridBlock):
    """``for k in range(2): outs.append(row * k)`` inside a tensor for (two rows a step)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            for k in range(2):
                outs.append(row * (k + 1))
        return F.stack(*outs)


@program(*ROWS)
class AppendThenLastItemInSameStep(HybridBlock):
    """``outs.append(h)`` then ``outs[-1]`` read in the same step of a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [x[0]]
        h = F.zeros((3,))
        for row in x:
            outs.append(h + row)
            h = outs[-1] * 0.5
        return h


@program(*ROWS)
class BreakInsideMatchCaseInTensorFor(HybridBlock):
    """``match self.mode: case "stop": if tensor: break`` in a tensor for."""

    def __init__(self):
        super().__init__()
        self.mode = "stop"

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = h + row
            match self.mode:
                case "stop":
                    if F.sum(h) > 1:
                        break
                case _:
                    pass
        return h


@program(*ROWS)
class ContinueInsideMatchCaseInTensorWhile(HybridBlock):
    """``continue`` under a tensor if inside a match case, in a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        i = F.zeros((1,))
        kind = 1
        while F.sum(i) < 4:
            i = i + 1
            match kind:
                case 1:
                    if F.sum(i) < 3:
                        continue
            h = h * 2
        return h, i


@program(*ROWS)
class ReturnInsideMatchCaseInTensorFor(HybridBlock):
    """``return`` from a match case under a tensor if, in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = h + row
            match (1, 2):
                case (1, _):
                    if F.max(h) > 1:
                        return h * 3
        return h - 1


@program(*ROWS)
class TernaryOfTuplesUnpackedInFor(HybridBlock):
    """``a, b = (b, a) if F.sum(a) > 0 else (a * 2, b)`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        a = F.ones((3,))
        b = F.zeros((3,))
        for row in x:
            a, b = (b + row, a) if F.sum(a) > 0 else (a * 2, b - row)
        return a, b


@program(*ROWS)
class AugmentedTensorCounterInWhileWithPythonLimit(HybridBlock):
    """``i += 1`` on a tensor counter in ``while i < n`` (``n`` a Python int)."""

    @autograph
    def hybrid_forward(self, F, x):
        n = 3
        i = F.zeros((1,))
        h = x[0]
        while i < n:
            h = F.tanh(h) + x[0]
            i += 1
        return h, i


@program(*ROWS)
class SortedDictItemsInTensorWhile(HybridBlock):
    """``for k, v in sorted(weights.items())`` (a Python dict of arrays) in a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        weights = {"b": x[0] * 2, "a": x[0] - 1}
        h = F.zeros((3,))
        i = F.zeros((1,))
        while F.sum(i) < 2:
            for k, v in sorted(weights.items()):
                h = h * 0.5 + v
            i = i + 1
        return h


@program(*ROWS)
class WalrusPythonCounterInWhileCondition(HybridBlock):
    """``while (n := n - 1) > 0 and F.sum(h) < 5:`` (a Python counter the condition changes)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.abs(x[0])
        n = 4
        while (n := n - 1) > 0 and F.sum(h) < 5:
            h = h * 2
        return h


@program(*ROWS)
class ReversedRangeWithTensorContinueAndCollect(HybridBlock):
    """``for k in reversed(range(3)):`` with a tensor continue then an append."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x[0]
        for k in reversed(range(3)):
            h = h * 0.5 + k
            outs.append(h)
            if F.sum(h) > 2:
                continue
            h = h - 1
        return F.stack(*outs), h


@program(*ROWS)
class EnumerateZipOfPythonCollectedInTensorIf(HybridBlock):
    """``for i, (a, b) in enumerate(zip(hs, cs))`` under a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        hs, cs = [], []
        for k in range(2):
            hs.append(x[0] * k)
            cs.append(x[0] + k)
        total = F.zeros((3,))
        if F.sum(x) > 0:
            for i, (a, b) in enumerate(zip(hs, cs)):
                total = total + a * b * (i + 1)
        else:
            total = total - x[0]
        return total


@program(*ROWS)
class MeanOfPythonCollectedBySumAndLen(HybridBlock):
    """``sum(outs) / len(outs)`` of rows a Python range collected, then a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [x[0] * k for k in range(1, 4)]
        mean = sum(outs) / len(outs)
        for row in x:
            mean = mean * 0.5 + row
        return mean


@program(*ROWS)
class StackEveryOtherOfTensorLoopCollected(HybridBlock):
    """``F.stack(*outs[::2])`` of rows a tensor for collected."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros((3,))
        for row in x:
            h = h + row
            outs.append(h)
        return F.stack(*outs[::2])


@program(*ROWS)
class TensorIfInsideWithInsideFor(HybridBlock):
    """A tensor if inside ``with self.name_scope():`` inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            with self.name_scope():
                if F.sum(row) > 0:
                    h = h + row
                else:
                    h = h * 0.5
        return h


@program(*ROWS)
class ReturnInForElseInsideTensorWhile(HybridBlock):
    """``for ... else: return`` (a Python range) inside a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        i = F.zeros((1,))
        while F.sum(i) < 3:
            i = i + 1
            for k in range(2):
                h = h + k
                if F.sum(h) > 4:
                    break
            else:
                h = h * 0.5
        return h


@program(*ROWS)
class ConditionOfIntDtypeSumInTensorFor(HybridBlock):
    """``if F.sum(row > 0).astype("int32") >= 2:`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            if F.sum(row > 0).astype("int32") >= 2:
                h = h + row
            else:
                h = h - row * 0.5
        return h


@program(*ROWS)
class LambdaClosureOverCarryCalledInTernary(HybridBlock):
    """``f = lambda: h * 2`` read by a ternary on a tensor condition in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        f = lambda: h * 2
        for row in x:
            h = f() - row if F.sum(row) > 0 else h + row
        return h


@program(*ROWS)
class PartialOfMethodBoundInLoop(HybridBlock):
    """``functools.partial(self.step, scale=k)`` made in a Python range inside a tensor for."""

    def step(self, F, h, row, scale):
        if F.sum(h) > 0:
            return h * scale + row
        return h + row * scale

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            for k in (0.5, 2.0):
                f = functools.partial(self.step, scale=k)
                h = f(F, h, row)
        return h


@program(*ROWS)
class GeneratorExpressionIntoAddNInTensorWhile(HybridBlock):
    """``F.add_n(*(h * k for k in range(3)))`` inside a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        i = F.zeros((1,))
        while F.sum(i) < 2:
            h = F.tanh(F.add_n(*(h * k for k in range(1, 4))))
            i = i + 1
        return h


@program(*ROWS)
class AnyOfPythonFlagsAndAllInTensorFor(HybridBlock):
    """``if any(flags) and F.sum(row) > 0:`` with ``flags`` a Python list in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        flags = [False, True]
        h = F.zeros((3,))
        for row in x:
            if any(flags) and F.sum(row) > 0:
                h = h + row
            elif all(flags):
                h = h * 0
        return h


@program(*ROWS)
class AttentionWithSequenceMaskPerStepAndCollect(HybridBlock):
    """Attention each step over the rows so far (``F.SequenceMask`` by a tensor count)."""

    @autograph
    def hybrid_forward(self, F, x):
        ctxs = []
        n = F.zeros((1,))
        q = F.ones((3,))
        for row in x:
            n = n + 1
            scores = F.dot(x, q).reshape((-1, 1))
            masked = F.SequenceMask(scores, sequence_length=n, use_sequence_length=True,
                                    value=-1e4)
            att = F.softmax(masked, axis=0)
            ctx = F.sum(F.broadcast_mul(att, x), axis=0)
            ctxs.append(ctx)
            q = F.tanh(q + row + ctx)
        return F.stack(*ctxs)


@program(*ROWS)
class NestedFunctionWithDefaultPythonIntInLoop(HybridBlock):
    """``def f(v, k=k)`` made in a Python range inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            for k in range(2):
                def f(v, k=k):
                    return v * (k + 0.5)
                h = f(h) + row
        return h


# ---------------------------------------------------------------- round three: rebinding, filters

TWO = ([rand(3, seed=2714), rand(3, seed=2715)], [rand(3, seed=2716) - 1, rand(3, seed=2717)])

@program(*ROWS)
class IterableReboundInTensorFor(HybridBlock):
    """``x = x * 2`` in ``for row in x``: Python iterates the original rows."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = h + row
            x = x * 2
        return h, x


@program(*ROWS)
class IterableReboundByReluInTensorFor(HybridBlock):
    """``x = F.relu(x - 0.25)`` in ``for row in x``, ``x`` read after."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = h * 0.5 + row
            x = F.relu(x - 0.25)
        return h + F.sum(x)


@program(*ROWS)
class WalrusOrderInAddition(HybridBlock):
    """``h = h + (h := h * 0.5 + row)``: the left ``h`` read before the walrus."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        for row in x:
            h = h + (h := h * 0.5 + row)
        return h


@program(*ROWS)
class ChainedAssignmentAliasInLoop(HybridBlock):
    """``a = b = a + row`` then ``b = b * 2`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        a = b = F.zeros((3,))
        for row in x:
            a = b = a + row
            b = b * 2
        return a, b


@program(*ROWS)
class TruthOfFloatSumInIf(HybridBlock):
    """``if F.sum(row > 0):`` (the truth of a count, no comparison)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            if F.sum(row > 0):
                h = h + row
        return h


@program(*ROWS)
class AndReturnsFirstOperandInWhile(HybridBlock):
    """``while F.sum(i) < 3 and F.sum(h * 0 + 1):`` (a float's truth)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        i = F.zeros((1,))
        while F.sum(i) < 3 and F.sum(h * 0 + 1):
            h = h * 2
            i = i + 1
        return h


@program(*ROWS)
class BuiltinSumWithStartInTensorFor(HybridBlock):
    """``sum([row, h * 0.5], F.ones((3,)))`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = sum([row, h * 0.5], F.ones((3,)))
        return h


@program(*ROWS)
class InnerForOverRowItems(HybridBlock):
    """``for v in row:`` (a 1-D row's items) with a tensor if, in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1,))
        for row in x:
            for v in row:
                if F.sum(v) > 0:
                    h = h + v
                else:
                    h = h * 0.5
        return h


@program(*ROWS)
class DelLoopItemInTensorFor(HybridBlock):
    """``del row`` at the end of a tensor for's step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = h + row
            del row
        return h


@program(*ROWS)
class RaiseCaughtInSameStep(HybridBlock):
    """A Python ``raise`` caught by the step's own ``except``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        k = 0
        for row in x:
            try:
                if k == 0:
                    raise ValueError("first")
                h = h + row
            except ValueError:
                h = h - row
        return h


@program(*ROWS)
class HelperMutableDefaultAccumulator(HybridBlock):
    """``seen = [] if seen is None else seen; seen.append(row)``."""

    def step(self, F, h, row, seen=None):
        seen = [] if seen is None else seen
        seen.append(row)
        return h + F.add_n(*seen)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = self.step(F, h, row)
        return h


@program(*ROWS)
class ReturnFromWithInTensorIf(HybridBlock):
    """``return`` inside ``with self.name_scope():`` in a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        if F.sum(h) > 0:
            with self.name_scope():
                return h * 2
        return h - 1


@program(*ROWS)
class LoopOverTransposeCollectReversedStack(HybridBlock):
    """``for col in x.T``, ``reversed(outs)``, ``outs[-2:]``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros_like(x[:, 0])
        for col in x.T:
            h = F.tanh(h + col)
            outs.append(h)
        return F.stack(*reversed(outs)), F.concat(*outs[-2:], dim=0)


@program(*ROWS)
class NestedWhileInnerCounterReset(HybridBlock):
    """``j = i * 0`` made in the outer while, read after both loops."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        i = F.zeros((1,))
        while F.sum(i) < 2:
            j = i * 0
            while F.sum(j) < F.sum(i) + 1:
                h = h + 0.5
                j = j + 1
            i = i + 1
        return h, j


@program(*ROWS)
class ContinueThenAppendInTensorWhile(HybridBlock):
    """An append before a tensor ``continue`` in a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x[0]
        i = F.zeros((1,))
        while F.sum(i) < 4:
            gluon_cf.max_iterations(4)
            i = i + 1
            h = h * 0.5
            outs.append(h)
            if F.sum(i) < 2:
                continue
            h = h + 1
        return F.stack(*outs), h


@program(*ROWS)
class GreedyWhileTrueBreakOnAllDone(HybridBlock):
    """``while True`` with a batch's done flags and an ``or`` break."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        done = F.zeros_like(x[:, 0])
        toks = []
        i = F.zeros((1,))
        while True:
            gluon_cf.max_iterations(5)
            i = i + 1
            tok = F.argmax(h, axis=1)
            done = F.maximum(done, tok == 0)
            toks.append(tok * (1 - done))
            if F.min(done) > 0 or F.sum(i) >= 4:
                break
            h = F.tanh(h + F.one_hot(tok, 3))
        return F.stack(*toks)


@program(*ROWS)
class StaticmethodDecoratedByUserInLoop(HybridBlock):
    """``@staticmethod @functools.lru_cache`` on Python numbers."""

    @staticmethod
    @functools.lru_cache(maxsize=None)
    def coef(k):
        return 1.0 / (k + 1)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            for k in range(2):
                h = h * self.coef(k) + row
        return h

@program(*ROWS)
class ComprehensionFilterOnTensorCondition(HybridBlock):
    """``[r for r in rows if F.sum(r) > 0]``."""

    @autograph
    def hybrid_forward(self, F, x):
        rows = [x[0], x[0] - 1, x[0] + 1]
        kept = [r for r in rows if F.sum(r) > 0]
        return F.add_n(*kept) if kept else x[0] * 0


@program(*ROWS)
class ComprehensionWalrusFilterOnTensor(HybridBlock):
    """``[s for r in rows if (s := F.sum(r)) > 0]``."""

    @autograph
    def hybrid_forward(self, F, x):
        rows = [x[0], x[0] - 1]
        kept = [s for r in rows if (s := F.sum(r)) > 0]
        return len(kept)


@program(*ROWS)
class FilterBuiltinWithTensorLambda(HybridBlock):
    """``filter(lambda r: F.sum(r) > 0, rows)``."""

    @autograph
    def hybrid_forward(self, F, x):
        rows = [x[0], x[0] - 1, x[0] + 1]
        kept = list(filter(lambda r: F.sum(r) > 0, rows))
        return F.stack(*kept)


@program(*ROWS)
class TernaryInLambdaCalledInLoop(HybridBlock):
    """A lambda holding a tensor ternary, called in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        f = lambda v: v * 2 if F.sum(v) > 0 else v - 1
        h = F.zeros((3,))
        for row in x:
            h = f(h + row)
        return h


@program(*TWO)
class StarInputsLoopedInPython(HybridBlock):
    """``hybrid_forward(self, F, *xs)`` looped over with a tensor if."""

    @autograph
    def hybrid_forward(self, F, *xs):
        h = F.zeros((3,))
        for v in xs:
            if F.sum(v) > 0:
                h = h + v
            else:
                h = h - v * 0.5
        return h


@program(*ROWS)
class GenexpAnyWithTensorInIf(HybridBlock):
    """``if any(F.sum(r) > 0 for r in rows):``."""

    @autograph
    def hybrid_forward(self, F, x):
        rows = [x[0], x[0] - 1]
        if any(F.sum(r) > 0 for r in rows):
            return x[0] * 2
        return x[0]


@program(*ROWS)
class ConditionalComprehensionInsideTensorFor(HybridBlock):
    """``[row * k for k in range(3) if k != 1]``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            parts = [row * k for k in range(3) if k != 1]
            h = h + F.add_n(*parts)
        return h


@program(*ROWS)
class NestedComprehensionOverPythonRanges(HybridBlock):
    """Two ``for`` clauses over Python ranges in a step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = h + F.add_n(*[row * i * j for i in range(1, 3) for j in range(1, 3)])
        return h


@program(*ROWS)
class IfExpTensorCondPythonBothSidesSameInLoop(HybridBlock):
    """``w = row * 2 if F.sum(row) > 0 else row * 0.5``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            w = row * 2 if F.sum(row) > 0 else row * 0.5
            h = h + w
        return h


@program(*ROWS)
class SumOfGenexpWithTensorCondFilter(HybridBlock):
    """``sum(r for r in rows if F.sum(r) > 0)``."""

    @autograph
    def hybrid_forward(self, F, x):
        rows = [x[0], x[0] - 1, x[0] + 1]
        return sum(r for r in rows if F.sum(r) > 0) * 1.0 + x[0] * 0


# ---------------------------------------------------------------- match on collected lists


@program(*POSITIVE)
class MatchSequencePatternOnWhileCollected(HybridBlock):
    """``match outs: case [a]: ... case [a, b, *rest]:`` on a list a tensor while collected:
    hybridized no case matched (a collected list is no Sequence), silently ``return x``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x
        while F.sum(h) < 4:
            gluon_cf.max_iterations(5)
            h = h * 2
            outs.append(h)
        match outs:
            case []:
                return x
            case [a]:
                return a * 10
            case [a, b, *rest]:
                return a + b * 100
        return x


@program(*ROWS)
class MatchSequencePatternOnForCollected(HybridBlock):
    """``match outs: case [a, b]:`` on a list a tensor for over an input collected (its
    length known while tracing): hybridized no case matched, silently ``return x[0]``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row * 2)
        match outs:
            case [a]:
                return a * 10
            case [a, b, *rest]:
                return a + b * 3
        return x[0]


@program(*ROWS)
class MatchMappingHoldingCollected(HybridBlock):
    """``match {"o": outs}: case {"o": [a, b]}:``: hybridized no case matched, silently
    ``return x[0]``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row * 2)
        match {"o": outs}:
            case {"o": [a, b, *rest]}:
                return a + b
        return x[0]


# ---------------------------------------------------------------- the type of a collected list


@program(*POSITIVE)
class IsinstanceOfWhileCollectedList(HybridBlock):
    """``if isinstance(outs, (list, tuple)):`` on a list a tensor while collected: False
    hybridized, silently the other branch (or a ValueError naming a library class)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [x]
        h = x
        while F.sum(h) < 4:
            gluon_cf.max_iterations(5)
            h = h * 2
            outs.append(h)
        if isinstance(outs, (list, tuple)):
            return F.stack(*outs).sum(axis=0)
        return x * 0


@program(*ROWS)
class TypeOfForCollectedListComparedToList(HybridBlock):
    """``F.stack(*outs) if type(outs) == list else x``: silently ``x`` hybridized."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row * 2)
        return F.stack(*outs) if type(outs) == list else x


@program(*ROWS)
class IsinstanceOfReversedCollected(HybridBlock):
    """``isinstance(reversed(outs), list)``: False, as Python's iterator is no list."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros((3,))
        for row in x:
            h = h + row
            outs.append(h)
        back = reversed(outs)
        return (h * 2 if isinstance(back, list) else h - 1), F.stack(*back)
