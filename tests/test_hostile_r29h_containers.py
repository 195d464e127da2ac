"""Hostile round 29h (issue 24), autograph over Python containers and builtins holding tensors,
written as people port TensorFlow AutoGraph and PyTorch code: dicts keyed by strings updated in
tensor loops, lists of lists, tuple swaps, ``for``/``while`` with ``else``, nested
``break``/``continue``, early returns, walrus, chained comparisons, ``and``/``or``/``not``,
``sum``/``max``/``min``/``sorted``/``reversed``/``len``/``any``/``all``, ``functools.partial``,
decorators, properties, static and class methods, generators. Each program equals plain Python
on NDArrays (``hybrid_forward.__wrapped__``), eagerly and hybridized, values and gradients, or
is refused hybridized at the user's line (``REFUSED``)."""
import functools

import pytest
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

ROWS = ([rand(4, 3, seed=2901)], [rand(1, 3, seed=2902) + 1])
STATES = ([floats(1.0, 2.0)], [floats(5.0, 1.0)], [floats(-3.0, -2.0)])
PAIRS = ([rand(3, 2, seed=2904), rand(3, 2, seed=2905)],
         [rand(2, 2, seed=2906), rand(2, 2, seed=2907) * 3])


def traced(fn):
    """A user's decorator (``functools.wraps``) around a helper."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) * 1.0
    return wrapper


@traced
def halve_until_small(h, limit):
    while F_sum(h) > limit:
        h = h * 0.5
    return h


def F_sum(h):
    return h.sum()


def scaled(h, k, bias):
    return h * k + bias


# ---------------------------------------------------------------- dicts and lists


@program(*STATES)
class DictStringKeysUpdatedInWhile(HybridBlock):
    """TF-style state dict: ``state["h"]``/``state["n"]`` reassigned in a tensor ``while``."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x, "n": F.zeros((1,))}
        while F.sum(state["n"]) < 3:
            state["h"] = state["h"] * 0.5 + 1
            state["n"] = state["n"] + 1
        return state["h"] * state["n"]


@program(*ROWS)
class DictAugmentedItemInFor(HybridBlock):
    """``acc["s"] = acc["s"] + row * row`` over a tensor's rows."""

    @autograph
    def hybrid_forward(self, F, x):
        acc = {"s": F.zeros_like(x[0]), "m": x[0]}
        for row in x:
            acc["s"] = acc["s"] + row * row
            acc["m"] = F.maximum(acc["m"], row)
        return acc["s"] + acc["m"]


@program(*ROWS)
class DictRebuiltByComprehensionAfterLoop(HybridBlock):
    """``{k: F.relu(v) for k, v in d.items()}`` of string keys after a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        d = {"a": x[0], "b": x[0] * 2}
        for row in x:
            d = {"a": d["a"] + row, "b": d["b"] * 0.5 + row}
        e = {k: F.relu(v) for k, v in d.items()}
        return e["a"] + e["b"] * 3


@program(*ROWS)
class ListStateRebuiltInFor(HybridBlock):
    """``pair = [b, a + b]``: a list of two arrays carried by a tensor ``for``."""

    @autograph
    def hybrid_forward(self, F, x):
        pair = [x[0], x[0] * 0]
        for row in x:
            pair = [pair[1] + row, pair[0] * 0.5]
        return pair[0] - pair[1]


@program(*ROWS)
class ListOfListsPythonGridThenTensorLoop(HybridBlock):
    """A Python list of lists of rows, summed per row in Python, then a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        grid = [[x[0], x[0] * 2], [x[0] * 3, x[0] * 4]]
        sums = [a + b for a, b in grid]
        h = sums[0] - sums[1]
        for row in x:
            h = F.tanh(h + row)
        return h


@program(*STATES)
class TupleSwapFibonacciInWhile(HybridBlock):
    """``a, b = b, a + b`` in a tensor ``while``."""

    @autograph
    def hybrid_forward(self, F, x):
        a, b = x * 0 + 1, x
        i = F.zeros((1,))
        while F.sum(i) < 4:
            a, b = b, a + b
            i = i + 1
        return a * 2 + b


# ---------------------------------------------------------------- else clauses, break, continue


@program(*STATES)
class RangeForElseWithTensorBreak(HybridBlock):
    """``for t in range(3): ... if tensor: break / else: h = h - 1``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        for t in range(3):
            h = h * 2
            if F.sum(h) > 10:
                break
        else:
            h = h - 1
        return h


@program(*STATES)
class WhileElseWithTensorBreak(HybridBlock):
    """``while ...: if tensor: break / else: h = -h``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.abs(x) + 0.1
        while F.sum(h) < 20:
            gluon_cf.max_iterations(8)
            h = h * 2
            if F.max(h) > 7:
                break
        else:
            h = -h
        return h


@program(*STATES)
class WhileElseWithoutBreak(HybridBlock):
    """``while ... else`` where nothing breaks: the ``else`` always runs."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        while F.sum(F.abs(h)) < 10:
            gluon_cf.max_iterations(8)
            h = h * 3
        else:
            h = h + 100
        return h


@program(*ROWS)
class NestedContinueAndInnerBreak(HybridBlock):
    """A tensor ``for`` with ``continue``, holding a ``while`` that breaks."""

    @autograph
    def hybrid_forward(self, F, x):
        acc = F.zeros_like(x[0])
        for row in x:
            if F.sum(row) < 0:
                continue
            j = F.zeros((1,))
            while F.sum(j) < 3:
                j = j + 1
                if F.sum(row * j) > 1.5:
                    break
            acc = acc + row * j
        return acc


@program(*STATES)
class EarlyReturnInsideWhile(HybridBlock):
    """``return h * 10`` inside a tensor ``while``, else the ``h`` after it."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        i = F.zeros((1,))
        while F.sum(i) < 4:
            h = h + 1
            i = i + 1
            if F.max(h) > 3:
                return h * 10
        return h


@program(*ROWS)
class EarlyReturnInsideForOverRows(HybridBlock):
    """``return`` of the running sum inside a tensor ``for``."""

    @autograph
    def hybrid_forward(self, F, x):
        s = F.zeros_like(x[0])
        for row in x:
            s = s + row
            if F.sum(s) > 1:
                return s * 2
        return s - 1


# ---------------------------------------------------------------- walrus, comparisons, logic


@program(*STATES)
class WalrusConditionReadAfter(HybridBlock):
    """``while (s := F.sum(h)) < 10`` and ``s`` read after the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.abs(x) + 0.5
        while (s := F.sum(h)) < 10:
            gluon_cf.max_iterations(10)
            h = h * 2
        return h + s


@program(*STATES)
class ChainedComparisonInIf(HybridBlock):
    """``if 0 < F.sum(x) < 4``."""

    @autograph
    def hybrid_forward(self, F, x):
        if 0 < F.sum(x) < 4:
            y = x * 2
        else:
            y = x - 1
        return y


@program(*STATES)
class AndNotOnTensorsInIf(HybridBlock):
    """``if F.sum(x) > 0 and not F.max(x) > 3``."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0 and not F.max(x) > 3:
            return x * 3
        return x * 0.5


@program(*STATES)
class OrValueOfTensors(HybridBlock):
    """``m = (F.sum(x) > 100) or F.sum(x)``: the operand itself, as Python's."""

    @autograph
    def hybrid_forward(self, F, x):
        m = (F.sum(x) > 100) or F.sum(x)
        return x * m


@program(*STATES)
class AndInWhileCondition(HybridBlock):
    """``while F.sum(i) < 5 and F.sum(h) < 30``."""

    @autograph
    def hybrid_forward(self, F, x):
        h, i = F.abs(x), F.zeros((1,))
        while F.sum(i) < 5 and F.sum(h) < 30:
            h = h * 2 + 1
            i = i + 1
        return h, i


# ---------------------------------------------------------------- builtins


@program(*ROWS)
class SumOfCollectedList(HybridBlock):
    """``sum(outs)`` of rows a tensor ``for`` collected."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(F.sigmoid(row) * 2)
        return sum(outs)


@program(*ROWS)
class MaxOfCollectedList(HybridBlock):
    """``max(outs)`` of collected rows: eagerly Python's ValueError (truth of 3 elements)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row)
        return max(outs)


@program(*ROWS)
class LenOfInputInRange(HybridBlock):
    """``for i in range(len(x))`` with ``x[i]``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for i in range(len(x)):
            h = h * 0.5 + x[i] * (i + 1)
        return h


@program(*ROWS)
class ReversedTensorLoop(HybridBlock):
    """``for row in reversed(x)``: the rows backwards."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        outs = []
        for row in reversed(x):
            h = F.tanh(h * 2 + row)
            outs.append(h)
        return F.stack(*outs), h


@program(*ROWS)
class SortedPythonKeysOfRows(HybridBlock):
    """``sorted(range(3), key=lambda k: -k)`` indexing rows: Python numbers as keys."""

    @autograph
    def hybrid_forward(self, F, x):
        order = sorted(range(3), key=lambda k: -k)
        return F.stack(*[x[0][k] for k in order])


@program(*ROWS)
class AllOfPythonFlagsThenTensorIf(HybridBlock):
    """``all(...)``/``any(...)`` of Python flags, then a tensor ``if``."""

    FLAGS = (True, True, False)

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        if all(self.FLAGS[:2]) and not any(self.FLAGS[2:]):
            if F.sum(h) > 0:
                h = h * 4
        return h


@program(*ROWS)
class EnumerateRowsWeightedByIndex(HybridBlock):
    """``for i, row in enumerate(x): h = h + row * i``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for i, row in enumerate(x):
            h = h + row * i
        return h


@program(*PAIRS)
class ZipTwoInputsInTensorIf(HybridBlock):
    """``for a, b in zip(x, y)`` with a tensor ``if`` per step."""

    @autograph
    def hybrid_forward(self, F, x, y):
        h = F.zeros_like(x[0])
        for a, b in zip(x, y):
            if F.sum(a) > F.sum(b):
                h = h + a
            else:
                h = h - b
        return h


# ---------------------------------------------------------------- helpers and methods


@program(*STATES)
class PartialHelperInWhile(HybridBlock):
    """``functools.partial(scaled, k=0.5)`` called in a tensor ``while``."""

    @autograph
    def hybrid_forward(self, F, x):
        step = functools.partial(scaled, k=0.5, bias=1.0)
        h, i = x, F.zeros((1,))
        while F.sum(i) < 3:
            h = step(h)
            i = i + 1
        return h


@program(*STATES)
class DecoratedHelperHoldingWhile(HybridBlock):
    """A helper under the user's ``functools.wraps`` decorator, holding a tensor ``while``."""

    @autograph
    def hybrid_forward(self, F, x):
        return halve_until_small(F.abs(x) * 4, 1.0)


@program(*STATES)
class PropertyWithTensorIfReadInLoop(HybridBlock):
    """A property whose getter is a Python number, read in a tensor loop."""

    @property
    def rate(self):
        return 0.25

    @autograph
    def hybrid_forward(self, F, x):
        h, i = x, F.zeros((1,))
        while F.sum(i) < 2:
            h = h * (1 - self.rate) + self.rate
            i = i + 1
        return h


@program(*STATES)
class StaticAndClassMethodsInLoop(HybridBlock):
    """``self.cell(h)`` a staticmethod with a tensor ``if``; ``self.scale()`` a classmethod."""

    K = 3.0

    @staticmethod
    def cell(h):
        if h.sum() > 2:
            return h * 0.5
        return h + 1

    @classmethod
    def scale(cls):
        return cls.K

    @autograph
    def hybrid_forward(self, F, x):
        h, i = x, F.zeros((1,))
        while F.sum(i) < 3:
            h = self.cell(h) * self.scale()
            i = i + 1
        return h


@program(*ROWS)
class GeneratorHelperInTensorLoop(HybridBlock):
    """A user generator function called in a tensor loop: refused hybridized."""

    @staticmethod
    def pieces(row):
        yield row * 2
        yield row + 1

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            for p in self.pieces(row):
                h = h + p
        return h


@program(*ROWS)
class LambdaDefaultCapturesLoopIndex(HybridBlock):
    """``fs = [lambda v, k=k: v * k for k in range(3)]`` applied in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        fs = [lambda v, k=k: v * (k + 1) for k in range(3)]
        h = F.zeros_like(x[0])
        for row in x:
            for f in fs:
                h = h + f(row)
        return h


@program(*ROWS)
class NestedFunctionReadsLoopVariableAfterLoop(HybridBlock):
    """``def read(): return h * 2`` defined before, called after a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]

        def read():
            return h * 2
        for row in x:
            h = F.tanh(h + row)
        return read()


@program(*ROWS)
class ConditionalExpressionInLoop(HybridBlock):
    """``h = h + row if F.sum(row) > 0 else h - row`` in a tensor ``for``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = h + row if F.sum(row) > 0 else h - row * 2
        return h


@program(*ROWS)
class DenseInTensorLoopWithDictOfOutputs(HybridBlock):
    """A Dense layer applied per row, outputs in a dict of string keys built after the loop."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0]).reshape((1, -1))
        outs = []
        for row in x:
            h = F.tanh(self.fc(h) + row.reshape((1, -1)))
            outs.append(h)
        res = {"last": h, "all": F.concat(*outs, dim=0)}
        return res["all"].sum(axis=0) + res["last"].reshape((-1,))


REFUSED = {
    MaxOfCollectedList: "max",
    GeneratorHelperInTensorLoop: "generator",
}

FILES = [__file__]
_classified = hostile_harness.cached_classifier(PROGRAMS, FILES, export=False)


@pytest.mark.parametrize("block_class", list(PROGRAMS), ids=lambda c: c.__name__)
def test_program_equals_its_oracle_or_is_refused_at_its_line(block_class):
    """Recorded, values and gradients, eager and hybridized."""
    hostile_harness.assert_program(block_class, PROGRAMS, _classified, REFUSED)
