"""Issue 24, seventeenth round: autograph blocks written the way people port PyTorch,
TensorFlow and MXNet code, aimed at Python constructs earlier rounds hit less: ``match``
statements, ``:=``, ``assert``, ``try``/``except``/``finally`` and ``with`` around and inside
tensor loops, augmented assignment of items and attributes, dict and tuple carries, starred
unpacking, chained comparisons, ``and``/``or`` of tensors and Python values, several returns,
``continue``, nested loops, ``range`` of Python ints, ``while True``, generators, recursion,
decorators, globals, default arguments, class attributes, helpers in another module,
``functools.partial``, ``getattr`` of child blocks, ``print`` and closures made in loops.
``PROGRAMS`` maps each block class to its input lists; the oracle is the plain Python function
on NDArrays (``hybrid_forward.__wrapped__``)."""
import functools
import logging

import numpy as np
from mxnet import autograd
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness
import hostile_helpers17 as helpers

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

# rows (T, 3) of several lengths, one of them a single row, one all negative
ROWS = ([rand(4, 3, seed=170)], [rand(1, 3, seed=171) * 2], [-np.abs(rand(5, 3, seed=172))],
        [rand(2, 3, seed=173) + 1])
# rows and a count n of steps (0: a loop of no step)
COUNTS = ([rand(5, 3, seed=174), floats(3)], [rand(5, 3, seed=175), floats(0)],
          [rand(2, 3, seed=176), floats(2)], [rand(4, 3, seed=177), floats(1)])

_LOG = logging.getLogger("hostile17")
_STEPS_SEEN = 0
_GAIN = 1.5


# ------------------------------------------------------------------------------ match

@program(*ROWS)
class MatchOnPythonModeAroundLoop(HybridBlock):
    """``match`` on a Python attribute choosing the reduction of a tensor loop."""

    mode = "decay"

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            match self.mode:
                case "sum":
                    h = h + row
                case "decay":
                    h = h * 0.5 + F.tanh(row)
                case _:
                    h = row
        return h


@program(*ROWS)
class MatchOnTensorLiteral(HybridBlock):
    """``match`` whose subject is a one-element tensor: a literal pattern compares with ``==``."""

    @autograph
    def hybrid_forward(self, F, x):
        n = F.sum(x > 0)
        match n:
            case 0:
                y = x * 2
            case _:
                y = x - 1
        return y


@program(*ROWS)
class MatchSequenceOfSplitOutputs(HybridBlock):
    """``match`` on the Python list ``F.split`` gives: a sequence pattern binds its items."""

    @autograph
    def hybrid_forward(self, F, x):
        parts = list(F.split(x, num_outputs=3, axis=1))
        match parts:
            case [a, b, c]:
                y = a * b + c
            case _:
                y = x
        if F.sum(y) > 0:
            y = y * 2
        return y


@program(*ROWS)
class MatchGuardOnTensor(HybridBlock):
    """A ``case`` guard that is a tensor condition."""

    kind = "scaled"

    @autograph
    def hybrid_forward(self, F, x):
        match self.kind:
            case "scaled" if F.sum(x) > 0:
                y = x * 3
            case _:
                y = x + 1
        return y


@program(*ROWS)
class MatchMappingOnConfigInLoop(HybridBlock):
    """``match`` on a dict of Python settings, inside a tensor for (the pattern binds a rate)."""

    config = {"cell": "leaky", "rate": 0.25}

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            match self.config:
                case {"cell": "leaky", "rate": rate}:
                    h = h * (1 - rate) + row * rate
                case _:
                    h = row
        return h


@program(*ROWS)
class MatchAssignsTemporaryInLoop(HybridBlock):
    """Every case of a ``match`` (one irrefutable) assigns the step's temporary ``t``, read after
    the ``match`` in the same step of a tensor for."""

    mode = "half"

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            match self.mode:
                case "half":
                    t = row * 0.5
                case other:
                    t = row if other else -row
            h = F.tanh(h + t)
        return h


@program(*ROWS)
class MatchCaptureInTensorIf(HybridBlock):
    """A ``case [a]:`` pattern rebinding ``a`` inside a tensor if; ``a`` read after the if."""

    @autograph
    def hybrid_forward(self, F, x):
        a = x * 0
        if F.sum(x) > 0:
            match [x * 2]:
                case [a]:
                    pass
        return a


@program(*ROWS)
class MatchCaptureTemporaryInLoop(HybridBlock):
    """``case [b, *rest]:`` binding the step's temporaries in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        a = x[0] * 0
        for row in x:
            match [row * 2, row, 1.5]:
                case [b, *rest]:
                    a = a * 0.5 + b * rest[-1]
        return a


# ------------------------------------------------------------------------------ walrus

@program(*ROWS)
class WalrusInTensorWhileCondition(HybridBlock):
    """``while (s := F.sum(h)) < 4``: ``s`` after the loop is the value that ended it."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.abs(x[0]) + 0.1
        while (s := F.sum(h)) < 4:
            gluon_cf.max_iterations(10)
            h = h * 1.7
        return h, s


@program(*ROWS)
class WalrusInTensorIfCondition(HybridBlock):
    """``if (m := F.max(x)) > 0``: ``m`` read in the branch and after it."""

    @autograph
    def hybrid_forward(self, F, x):
        if (m := F.max(x)) > 0:
            y = x / (m + 1)
        else:
            y = x * m
        return y + m


@program(*ROWS)
class WalrusInLoopBodyIf(HybridBlock):
    """``:=`` inside an ``if`` inside a tensor for, the name read later in the step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        t = F.zeros((1,))
        for row in x:
            if (t := F.sum(row)) > 0:
                h = h + row
            h = h + t * 0.1
        return h, t


# ------------------------------------------------------------------------------ assert

@program(*ROWS)
class AssertOnPythonShapeInLoop(HybridBlock):
    """``assert`` on a Python value (the row width from ``x.shape``) inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            assert x.shape[-1] == 3, "rows of three"
            h = h + row * 0.5
        return h


@program(*ROWS)
class AssertOnTensorAtTop(HybridBlock):
    """``assert F.sum(x) > -100`` (as ported from PyTorch): holds for every input."""

    @autograph
    def hybrid_forward(self, F, x):
        assert F.sum(x * x) >= 0
        return x * 2


# ------------------------------------------------------------------------------ try / with

@program(*ROWS)
class TryFinallyAroundTensorLoop(HybridBlock):
    """``try: for row in x ... finally: h = h * 2``: the finally runs after the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        try:
            for row in x:
                h = h * 0.5 + row
        finally:
            h = h * 2
        return h


@program(*ROWS)
class TryExceptInsideTensorLoop(HybridBlock):
    """A ``try``/``except`` inside a tensor for whose body raises nothing."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            try:
                h = h + F.tanh(row)
            except ValueError:
                h = h - row
        return h


@program(*ROWS)
class TryExceptKeyErrorOnPythonDict(HybridBlock):
    """``except KeyError`` on a Python dict lookup, around a tensor if."""

    weights = {"a": 2.0}

    @autograph
    def hybrid_forward(self, F, x):
        try:
            w = self.weights["b"]
        except KeyError:
            w = 0.5
        if F.sum(x) > 0:
            y = x * w
        else:
            y = x + w
        return y


@program(*COUNTS)
class TryExceptIndexErrorOnCollectedList(HybridBlock):
    """``items[2]`` in ``try`` after a tensor while collected a run-time number of rows,
    ``except IndexError`` falling back to the first (Python catches it; a graph cannot)."""

    @autograph
    def hybrid_forward(self, F, x, n):
        items = [x[0]]
        i = F.zeros((1,))
        while i < n:
            gluon_cf.max_iterations(5)
            items.append(F.take(x, i).reshape((3,)) * 2)
            i = i + 1
        try:
            y = items[2]
        except IndexError:
            y = items[0] - 1
        return y


@program(*ROWS)
class WithNameScopeInsideLoop(HybridBlock):
    """``with self.name_scope():`` around a tensor loop's body (no parameter made in it)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3, flatten=False)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            with self.name_scope():
                h = F.tanh(self.fc(row) + h)
        return h


@program(*ROWS)
class WithScopeTemporaryInLoop(HybridBlock):
    """A temporary assigned inside a ``with`` in each step of a tensor for, read after the
    ``with`` (no value before the loop: it is the step's own)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3, flatten=False)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            with self.name_scope():
                t = self.fc(row)
            h = F.tanh(t + h)
        return h


@program(*ROWS)
class WithAsInBothBranches(HybridBlock):
    """``with ... as k:`` assigning the branch's output in both branches of a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        import contextlib
        if F.sum(x) > 0:
            with contextlib.nullcontext(3.0) as k:
                y = x * k
        else:
            with contextlib.nullcontext(3.0) as k:
                y = x - k
        return y * k


@program(*ROWS)
class WithPauseInsideTensorLoop(HybridBlock):
    """``with autograd.pause():`` in a tensor for (ported from ``torch.no_grad()``): the paused
    product gets no gradient eagerly."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            with autograd.pause():
                c = row * 2
            h = h + c * row
        return h


@program(*ROWS)
class WithNullContextInTensorIf(HybridBlock):
    """A ``with`` of a Python context manager inside a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        import contextlib
        if F.sum(x) > 0:
            with contextlib.nullcontext(2.0) as k:
                y = x * k
        else:
            y = x - 1
        return y


# ------------------------------------------------------------------------------ assignment forms

@program(*ROWS)
class AugmentedItemOfStateList(HybridBlock):
    """``state[0] += row`` on a list of two arrays carried by a tensor for (PyTorch style)."""

    @autograph
    def hybrid_forward(self, F, x):
        state = [F.zeros_like(x[0]), F.ones_like(x[0])]
        for row in x:
            state[0] += row
            state[1] = state[1] * 0.5 + state[0]
        return state[0], state[1]

    def oracle_where_plain_fails(self, F, x):
        """Plain MXNet refuses ``+=`` on a recorded array; gluon_cf runs it out of place."""
        state = [F.zeros_like(x[0]), F.ones_like(x[0])]
        for row in x:
            state[0] = state[0] + row
            state[1] = state[1] * 0.5 + state[0]
        return state[0], state[1]


@program(*ROWS)
class AugmentedAttributeInTensorLoop(HybridBlock):
    """``self.acc += row`` in a tensor for (an accumulator on the block)."""

    @autograph
    def hybrid_forward(self, F, x):
        self.acc = F.zeros_like(x[0])
        for row in x:
            self.acc += row
        return self.acc * 2

    def oracle_where_plain_fails(self, F, x):
        """Plain MXNet refuses ``+=`` on a recorded array; gluon_cf runs it out of place."""
        acc = F.zeros_like(x[0])
        for row in x:
            acc = acc + row
        return acc * 2


@program(*ROWS)
class DictCarryTwoKeys(HybridBlock):
    """``d['h']``, ``d['c']`` assigned in a tensor for (an LSTM-ish state dict)."""

    @autograph
    def hybrid_forward(self, F, x):
        d = {"h": F.zeros_like(x[0]), "c": F.ones_like(x[0])}
        for row in x:
            d["c"] = d["c"] * 0.5 + row
            d["h"] = F.tanh(d["c"]) * d["h"] + row
        return d["h"], d["c"]


@program(*ROWS)
class DictAugmentedInTensorIf(HybridBlock):
    """``d['h'] *= 2`` in one branch of a tensor if, ``d['h'] -= x`` in the other."""

    @autograph
    def hybrid_forward(self, F, x):
        d = {"h": x * 1.0, "n": 3}
        if F.sum(x) > 0:
            d["h"] *= 2
        else:
            d["h"] -= x
        return d["h"] * d["n"]

    def oracle_where_plain_fails(self, F, x):
        """Plain MXNet refuses ``*=`` on a recorded array; gluon_cf runs it out of place."""
        h = x * 1.0
        h = h * 2 if F.sum(x).asscalar() > 0 else h - x
        return h * 3


@program(*ROWS)
class TupleSwapOfCarries(HybridBlock):
    """``a, b = b, a + row``: a Fibonacci-like swap of two carries."""

    @autograph
    def hybrid_forward(self, F, x):
        a, b = F.zeros_like(x[0]), F.ones_like(x[0])
        for row in x:
            a, b = b, a * 0.5 + row
        return a, b


@program(*ROWS)
class StarredUnpackOfSplitInLoop(HybridBlock):
    """``first, *rest = F.split(row, 3)`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1,))
        for row in x:
            first, *rest = F.split(row, num_outputs=3, axis=0)
            h = h * 0.5 + first * rest[-1] + rest[0]
        return h


@program(*ROWS)
class NestedTupleCarry(HybridBlock):
    """``(h, (c, m))`` carried and unpacked in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        state = (F.zeros_like(x[0]), (F.ones_like(x[0]), x[0] * 0))
        for row in x:
            h, (c, m) = state
            c = c * 0.5 + row
            state = (F.tanh(c) + h * 0.1, (c, F.maximum(m, row)))
        return state[0], state[1][0], state[1][1]


@program(*ROWS)
class PowerAndFloorDivAugmented(HybridBlock):
    """``h **= 2`` and ``h //= 1``-free forms: ``**=`` on a carry in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones_like(x[0])
        for row in x:
            h = h * 0.5 + F.sigmoid(row)
            h **= 2
        return h


@program(*ROWS)
class DelOfTemporaryInLoop(HybridBlock):
    """``del t`` at the end of each step of a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            t = row * 2
            h = h + t * t
            del t
        return h


# ------------------------------------------------------------------------------ expressions

@program(*ROWS)
class ChainedComparisonOfSum(HybridBlock):
    """``if -1 < F.sum(x) < 1`` on a one-element sum."""

    @autograph
    def hybrid_forward(self, F, x):
        if -1 < F.sum(x) < 1:
            y = x * 10
        else:
            y = x
        return y


@program(*ROWS)
class ChainedComparisonOfRowsAsMask(HybridBlock):
    """``-0.5 < x < 0.5`` of a many-element array (Python: an ambiguous truth value)."""

    @autograph
    def hybrid_forward(self, F, x):
        m = -0.5 < x < 0.5
        return x * m


@program(*ROWS)
class AndOfPythonFlagAndTensor(HybridBlock):
    """``if self.use_gate and F.sum(x) > 0``: the Python flag first (False: not evaluated)."""

    use_gate = True

    @autograph
    def hybrid_forward(self, F, x):
        if self.use_gate and F.sum(x) > 0:
            y = F.sigmoid(x)
        else:
            y = x
        return y


@program(*ROWS)
class OrOfTensorAndPythonNumber(HybridBlock):
    """``scale = F.max(x) > 0 or 0.25``: a tensor first, a Python number second."""

    @autograph
    def hybrid_forward(self, F, x):
        scale = (F.max(x) > 0) or 0.25
        return x * scale


@program(*ROWS)
class TernaryInTensorLoop(HybridBlock):
    """``h = h * 2 if F.sum(h) < 1 else h - row`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones_like(x[0]) * 0.1
        for row in x:
            h = h * 2 if F.sum(h) < 1 else h - row
        return h


@program(*ROWS)
class NotOfTensorInWhile(HybridBlock):
    """``while not F.sum(h) > 3`` (negated tensor condition)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.abs(x[0]) + 0.2
        while not F.sum(h) > 3:
            gluon_cf.max_iterations(8)
            h = h * 1.5
        return h


@program(*ROWS)
class AbsAndNegOfTensorBuiltin(HybridBlock):
    """``abs(x)`` and ``-h`` (Python builtins and operators on tensors) in a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            y = abs(x) * 2
        else:
            y = -abs(x)
        return y


# ------------------------------------------------------------------------------ jumps

@program(*ROWS)
class EarlyReturnInLoopTwoStructures(HybridBlock):
    """``return row, h`` in a tensor for, ``return h, h * 0`` after it."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = h + row
            if F.sum(h) > 1.5:
                return row, h
        return h, h * 0


@program(*ROWS)
class ReturnsOfDifferentArity(HybridBlock):
    """One branch returns two arrays, the other one (refused or Python's)."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            return x, x * 2
        return x


@program(*ROWS)
class ContinueSkipsNegativeRows(HybridBlock):
    """``continue`` on rows of negative sum."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        n = F.zeros((1,))
        for row in x:
            if F.sum(row) < 0:
                continue
            h = h + row
            n = n + 1
        return h, n


@program(*ROWS)
class NestedForInnerBreak(HybridBlock):
    """A tensor for over the rows, an inner tensor for over each row's items with a break."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1,))
        for row in x:
            for v in row:
                if v > 0.5:
                    break
                h = h + v
        return h


@program(*ROWS)
class RangeOfPythonIntWithTensorIf(HybridBlock):
    """``for i in range(self.steps)`` (a Python int) with a tensor if in it."""

    steps = 3

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for i in range(self.steps):
            if F.sum(h) > 0:
                h = h * 0.5 - i
            else:
                h = h + x[-1]
        return h


@program(*COUNTS)
class RangeOfTensorCount(HybridBlock):
    """``for i in range(n)`` with ``n`` a one-element tensor."""

    @autograph
    def hybrid_forward(self, F, x, n):
        h = F.zeros_like(x[0])
        for i in range(n):
            h = h + x[0]
        return h


@program(*ROWS)
class WhileTrueWithTensorBreak(HybridBlock):
    """``while True:`` bounded, doubling until the sum passes 4."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.abs(x[0]) + 0.05
        steps = F.zeros((1,))
        while True:
            gluon_cf.max_iterations(9)
            h = h * 2
            steps = steps + 1
            if F.sum(h) > 4:
                break
        return h, steps


@program(*COUNTS)
class WhileElseWithoutBreak(HybridBlock):
    """``while i < n: ... else: h = h * 3`` (no break: the else always runs)."""

    @autograph
    def hybrid_forward(self, F, x, n):
        h = x[0] * 1.0
        i = F.zeros((1,))
        while i < n:
            gluon_cf.max_iterations(5)
            h = F.tanh(h + x[1])
            i = i + 1
        else:
            h = h * 3
        return h


# ------------------------------------------------------------------------------ helpers

def _rows_of(x, n):
    """A generator of the user's (yield) over Python indices."""
    for i in range(n):
        yield x[i]


def _double(h):
    return h * 2


def _scaled(h, row, scale):
    return h * scale + row


@functools.lru_cache(maxsize=None)
def _coefficient(k):
    return 0.5 ** k


@program(*ROWS)
class GeneratorOfPythonIndices(HybridBlock):
    """A user generator over Python indices drives a Python for around a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in _rows_of(x, 1):
            if F.sum(r) > 0:
                h = h + r
            else:
                h = h - r
        return h


@program(*ROWS)
class PythonRecursionInTensorBranches(HybridBlock):
    """A recursive Python helper (another module) called with different depths per branch."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            y = helpers.power(x, 3)
        else:
            y = helpers.power(x, 2)
        return y


@program(*ROWS)
class WrapsDecoratedHelperInLoop(HybridBlock):
    """A helper under the user's functools.wraps decorator (another module), in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        step = helpers.counted(_double)
        h = F.ones_like(x[0]) * 0.1
        for row in x:
            h = step(h) * 0.3 + row
        return h


@program(*ROWS)
class LruCachedCoefficientInLoop(HybridBlock):
    """An ``lru_cache`` helper of a Python int, inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = h * _coefficient(1) + row * _coefficient(2)
        return h


@program(*ROWS)
class GlobalReadInTensorLoop(HybridBlock):
    """A module global read (not written) inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = h + row * _GAIN
        return h


@program(*ROWS)
class GlobalCounterInTensorLoop(HybridBlock):
    """``global _STEPS_SEEN; _STEPS_SEEN += 1`` in a tensor for (refused: Python state)."""

    @autograph
    def hybrid_forward(self, F, x):
        global _STEPS_SEEN
        h = F.zeros_like(x[0])
        for row in x:
            _STEPS_SEEN += 1
            h = h + row
        return h


@program(*ROWS)
class DefaultArgumentClosures(HybridBlock):
    """``[lambda v, k=k: v * k for k in range(3)]`` applied in a tensor for (the defaults)."""

    @autograph
    def hybrid_forward(self, F, x):
        scales = [lambda v, k=k: v * (k + 1) for k in range(3)]
        h = F.zeros_like(x[0])
        for row in x:
            for f in scales:
                h = f(h) * 0.2 + row
        return h


@program(*ROWS)
class LateBindingLambdas(HybridBlock):
    """``[lambda v: v * k for k in range(3)]``: every lambda sees k = 2 (Python's late binding)."""

    @autograph
    def hybrid_forward(self, F, x):
        scales = [lambda v: v * (k + 1) for k in range(3)]
        h = F.zeros_like(x[0])
        for row in x:
            h = scales[0](h) * 0.2 + row
        return h


@program(*ROWS)
class LambdaDefaultCapturesBeforeIf(HybridBlock):
    """``f = lambda v, s=scale: v * s`` then a tensor if reassigns ``scale``: the default keeps
    the value at creation, the closure ``g`` sees the new one."""

    @autograph
    def hybrid_forward(self, F, x):
        scale = x[0] * 0 + 2
        f = lambda v, s=scale: v * s      # noqa: E731
        g = lambda v: v * scale           # noqa: E731
        if F.sum(x) > 0:
            scale = scale * 3
        else:
            scale = scale - 5
        return f(x), g(x)


@program(*ROWS)
class ClosureMadeInLoopCalledInStep(HybridBlock):
    """A lambda over the loop item, made and called in the same step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            f = lambda v: v * 0.5 + row      # noqa: E731
            h = f(h)
        return h


@program(*ROWS)
class ClosureMadeInLoopCalledAfter(HybridBlock):
    """A lambda over the loop carry made in each step, called after the loop (sees the last)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        f = lambda v: v          # noqa: E731
        for row in x:
            h = h * 0.5 + row
            f = lambda v: v + h  # noqa: E731
        return f(x[0])


@program(*ROWS)
class ClassAttributeInTensorLoop(HybridBlock):
    """A class-level constant and a class-level list of rates, read in a tensor for."""

    RATE = 0.3
    RATES = (0.1, 0.2)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = h * self.RATE + row * type(self).RATES[1]
        return h


@program(*ROWS)
class HelperFromOtherModuleInLoop(HybridBlock):
    """A step helper in another module (its own tensor if) called in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones_like(x[0])
        for row in x:
            h = helpers.decay(h, row)
        return h


@program(*ROWS)
class PartialOfHelperInLoop(HybridBlock):
    """``functools.partial(_scaled, scale=0.4)`` called in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        step = functools.partial(_scaled, scale=0.4)
        h = F.zeros_like(x[0])
        for row in x:
            h = step(h, row)
        return h


class _Layers(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            for k in range(3):
                setattr(self, f"fc{k}", nn.Dense(3, in_units=3, flatten=False))
            self.layers = nn.HybridSequential()
            for _ in range(2):
                self.layers.add(nn.Dense(3, in_units=3, flatten=False, activation="tanh"))


@program(*ROWS)
class GetattrChildBlocksInTensorIf(_Layers):
    """``getattr(self, f'fc{i}')`` over Python ``i`` inside a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            h = x
            for i in range(3):
                h = getattr(self, f"fc{i}")(h)
        else:
            h = self.fc0(x) * 0.5
        return h


@program(*ROWS)
class LayersIndexedInTensorLoop(_Layers):
    """``self.layers[i](h)`` for Python ``i`` inside a tensor for over rows."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            for i in range(len(self.layers)):
                h = self.layers[i](h + row)
        return h


@program(*ROWS)
class EnumerateLayersInTensorWhile(_Layers):
    """``for k, layer in enumerate(self.layers)`` inside a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        while F.sum(F.abs(h)) < 5:
            gluon_cf.max_iterations(4)
            for k, layer in enumerate(self.layers):
                h = layer(h) * (k + 2)
        return h


@program(*ROWS)
class PrintAndLogInTensorLoop(HybridBlock):
    """``print`` and ``logger.debug`` with an f-string of a tensor inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            _LOG.debug(f"row {row}")
            h = h + row
        return h


@program(*ROWS)
class IsinstanceOfStateInLoop(HybridBlock):
    """``isinstance(state, (list, tuple))`` on a Python structure inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        state = [F.zeros_like(x[0])]
        for row in x:
            if isinstance(state, (list, tuple)):
                state = [state[0] * 0.5 + row]
            else:
                state = state + row
        return state[0]


@program(*ROWS)
class ShapeOfInputInsideLoop(HybridBlock):
    """``x.shape[0]`` read in each step of a tensor for (a mean over the rows)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = h + row / x.shape[0]
        return h


@program(*ROWS)
class RangeOfShapeIndexing(HybridBlock):
    """``for i in range(x.shape[0])`` with ``x[i]`` and a tensor if (PyTorch's time loop)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for i in range(x.shape[0]):
            if F.sum(x[i]) > 0:
                h = h + x[i]
            else:
                h = h * 0.5
        return h


@program(*ROWS)
class SumBuiltinOfPythonListAfterLoop(HybridBlock):
    """``sum([...])`` of a Python list of arrays made after a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = h * 0.5 + row
        return sum([h * k for k in range(1, 4)])


@program(*ROWS)
class ClassDefinedInForward(HybridBlock):
    """A small class defined in ``hybrid_forward`` whose method has a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        class Gate:
            def __init__(self, k):
                self.k = k

            def __call__(self, v):
                if F.sum(v) > 0:
                    v = v * self.k
                return v
        gate = Gate(3.0)
        h = F.zeros_like(x[0])
        for row in x:
            h = gate(h + row)
        return h


@program(*ROWS)
class NestedFunctionNonlocalInTensorIf(HybridBlock):
    """A nested function with ``nonlocal total`` called in both branches of a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        total = F.zeros_like(x[0])

        def add(v):
            nonlocal total
            total = total + v

        if F.sum(x) > 0:
            add(x[0])
        else:
            add(x[-1] * 2)
        return total


@program(*ROWS)
class MinOfPythonIntsInLoop(HybridBlock):
    """``min(k, 2)`` of a Python counter in a Python for around a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for k in range(4):
            for row in x:
                h = h * 0.5 + row * min(k, 2)
        return h


# ------------------------------------------------------------------------------ more forms

@program(*ROWS)
class ForElseWithTensorBreak(HybridBlock):
    """``for row in x: if F.sum(row) > 1: break`` with an ``else`` that runs without a break."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            if F.sum(h + row) > 1:
                break
            h = h + row
        else:
            h = h * -1
        return h


@program(*COUNTS)
class WhileWithContinueOnParity(HybridBlock):
    """A tensor while whose body ``continue``s on odd counts."""

    @autograph
    def hybrid_forward(self, F, x, n):
        i = F.zeros((1,))
        h = x[0] * 1
        while i < n:
            gluon_cf.max_iterations(6)
            i = i + 1
            if F.sum(F.round(i / 2) * 2 - i) != 0:
                continue
            h = F.tanh(h + x[1])
        return h, i


@program(*ROWS)
class TernaryWithPythonNumberBranch(HybridBlock):
    """``y = x * 2 if F.sum(x) > 0 else 0.0`` (a Python number in one branch)."""

    @autograph
    def hybrid_forward(self, F, x):
        y = x * 2 if F.sum(x) > 0 else 0.0
        return x + y


@program(*ROWS)
class ReturnInWhileTrue(HybridBlock):
    """``while True:`` whose only exit is a ``return`` inside a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.abs(x[0]) + 0.1
        while True:
            gluon_cf.max_iterations(8)
            h = h * 1.5
            if F.sum(h) > 3:
                return h
        return h * 0


@program(*ROWS)
class StaticAndClassMethodHelpersInLoop(HybridBlock):
    """A staticmethod and a classmethod helper (each with a tensor if) in a tensor for."""

    GAIN = 0.7

    @staticmethod
    def _clip(v):
        if F_sum(v) > 2:
            v = v * 0.5
        return v

    @classmethod
    def _gain(cls, v):
        return v * cls.GAIN

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = self._clip(self._gain(h) + row)
        return h


def F_sum(v):
    """``v.sum()`` of an NDArray or a Symbol (a helper's F-less reduction)."""
    return v.sum()


@program(*ROWS)
class LambdaAttributeFromInit(HybridBlock):
    """``self.act = lambda v: ...`` set in ``__init__``, called in a tensor for."""

    def __init__(self):
        super().__init__()
        self.act = lambda v: v * 0.5 + 0.1      # noqa: E731

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = self.act(h) + row
        return h


@program(*ROWS)
class NamedTupleStateReplaced(HybridBlock):
    """A namedtuple state rebuilt with ``_replace`` in each step of a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        import collections
        State = collections.namedtuple("State", "h c")
        s = State(F.zeros_like(x[0]), F.ones_like(x[0]))
        for row in x:
            s = s._replace(c=s.c * 0.5 + row)
            s = s._replace(h=F.tanh(s.c) + s.h * 0.1)
        return s.h, s.c


@program(*ROWS)
class ZipOfLayersAndScalesInLoop(_Layers):
    """``for layer, k in zip(self.layers, (1.0, 0.5))`` inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            for layer, k in zip(self.layers, (1.0, 0.5)):
                h = layer(h + row) * k
        return h


@program(*ROWS)
class ReduceOverLayersInTensorIf(_Layers):
    """``functools.reduce(lambda h, f: f(h), self.layers, x)`` in a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            y = functools.reduce(lambda h, f: f(h), self.layers, x)
        else:
            y = x * 0.5
        return y


@program(*ROWS)
class DataclassStateAttributeInLoop(HybridBlock):
    """A dataclass-like state whose attribute is assigned in a tensor for (Python state)."""

    @autograph
    def hybrid_forward(self, F, x):
        class State:
            pass
        state = State()
        state.h = F.zeros_like(x[0])
        for row in x:
            state.h = state.h * 0.5 + row
        return state.h


@program(*ROWS)
class ListOfStatesIndexAssignedInIf(HybridBlock):
    """``hs[0] = ...`` in a tensor if on a list the function made."""

    @autograph
    def hybrid_forward(self, F, x):
        hs = [x[0], x[-1]]
        if F.sum(x) > 0:
            hs[0] = hs[0] * 3
        return hs[0] + hs[1]


@program(*ROWS)
class TryFinallyWithReturnInTensorIf(HybridBlock):
    """A tensor if that returns, inside ``try:`` with a ``finally`` reading nothing."""

    @autograph
    def hybrid_forward(self, F, x):
        y = x * 1
        try:
            if F.sum(x) > 0:
                return y * 2
            y = y - 1
        finally:
            pass
        return y


@program(*ROWS)
class RecursiveHelperDepthFromShape(HybridBlock):
    """A recursive Python helper whose depth is ``x.shape[0]``, called in a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            y = helpers.power(x[0], x.shape[0])
        else:
            y = x[0] * 2
        return y


@program(*ROWS)
class IteratorMadeInsideLoopStep(HybridBlock):
    """``it = iter([row, row * 2])`` made and consumed with ``next`` in the same step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            it = iter([row, row * 2])
            h = h * 0.5 + next(it) + next(it)
        return h


@program(*ROWS)
class DelInOneBranch(HybridBlock):
    """``del a`` in one branch of a tensor if after reading it (``a`` not read afterwards)."""

    @autograph
    def hybrid_forward(self, F, x):
        a = x[0] * 2
        b = x[1 % x.shape[0]]
        if F.sum(x) > 0:
            b = a * b
            del a
        else:
            b = b * 3
        return b


@program(*ROWS)
class DelThenReadAfterIf(HybridBlock):
    """``del a`` in one branch, ``a`` read after the if: Python's NameError on that path."""

    @autograph
    def hybrid_forward(self, F, x):
        a = x[0] * 2
        if F.sum(x) > 0:
            del a
            a2 = x * 1
        else:
            a2 = x * 2
        return a2 + a


@program(*ROWS)
class WalrusInTernarySide(HybridBlock):
    """``y = (m := x[0] * 2) if F.sum(x) > 0 else x[0] - m`` (a := in a side)."""

    @autograph
    def hybrid_forward(self, F, x):
        m = x[0] * 0
        y = (m := x[0] * 2) if F.sum(x) > 0 else x[0] - m
        return y + m


@program(*ROWS)
class WalrusInTernaryTest(HybridBlock):
    """``y = x * 2 if (s := F.sum(x)) > 0 else x - s`` (a := in the test only)."""

    @autograph
    def hybrid_forward(self, F, x):
        y = x * 2 if (s := F.sum(x)) > 0 else x - s
        return y * s


@program(*ROWS)
class DefaultArgumentCapturesRow(HybridBlock):
    """``f = lambda v, r=row: ...`` made in each step of a tensor for (the default: this row)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            f = lambda v, r=row: v * 0.5 + r      # noqa: E731
            h = f(h)
        return h


@program(*ROWS)
class ReturnInsideWithInTensorIf(HybridBlock):
    """``return`` inside a ``with`` inside a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        import contextlib
        if F.sum(x) > 0:
            with contextlib.nullcontext():
                return x * 2
        return x - 1


@program(*ROWS)
class ChildrenItemsInTensorLoop(HybridBlock):
    """``for name, child in self._children.items()`` inside a tensor for."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.a = nn.Dense(3, in_units=3, flatten=False)
            self.b = nn.Dense(3, in_units=3, flatten=False)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            for name, child in self._children.items():
                h = F.tanh(child(h + row))
        return h


@program(*ROWS)
class NestedRecursiveHelperWithTensorIf(HybridBlock):
    """A nested recursive function on a Python depth, with a tensor if at each level."""

    @autograph
    def hybrid_forward(self, F, x):
        def down(h, k):
            if k == 0:
                return h
            if F.sum(h) > 0:
                h = h * 0.5
            else:
                h = h + 1
            return down(h, k - 1)
        return down(x, 3)


@program(*ROWS)
class TwoReturnsInTensorFor(HybridBlock):
    """Two tensor ifs in a tensor for, each returning a different value."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = h + row
            if F.sum(h) > 2:
                return h * 10
            if F.sum(h) < -2:
                return h * -10
        return h


@program(*ROWS)
class BreakInWhileNestedInFor(HybridBlock):
    """A tensor while with a break, nested in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            i = F.zeros((1,))
            while i < 3:
                gluon_cf.max_iterations(3)
                h = h + row * 0.5
                i = i + 1
                if F.sum(h) > 1:
                    break
        return h


@program(*ROWS)
class ContinueAndBreakInWhileTrue(HybridBlock):
    """``while True:`` with a tensor ``continue`` and a tensor ``break``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 1
        i = F.zeros((1,))
        while True:
            gluon_cf.max_iterations(6)
            i = i + 1
            if F.sum(h) < 0:
                h = h + 1
                continue
            h = h * 1.5
            if i > 3:
                break
        return h, i


@program(*ROWS)
class WalrusInComprehensionInTensorIf(HybridBlock):
    """``[(last := x[i] * 2) for i in range(2)]`` in a tensor if: ``last`` read after it."""

    @autograph
    def hybrid_forward(self, F, x):
        last = x[0] * 0
        if F.sum(x) > 0:
            ys = [(last := x[i % x.shape[0]] * (i + 2)) for i in range(2)]
            y = ys[0]
        else:
            y = x[0]
        return y + last


@program(*ROWS)
class NestedDefReadsCarryAfterLoop(HybridBlock):
    """A nested function reading the carry, defined before a tensor for and called after it."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])

        def doubled():
            return h * 2
        for row in x:
            h = h * 0.5 + row
        return doubled()


@program(*ROWS)
class RowShapePrintedInLoop(HybridBlock):
    """``print(row.shape)`` in a tensor for (the row's shape while hybridizing)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            _LOG.debug("%s", row.shape)
            h = h + row
        return h


@program(*ROWS)
class TryAsscalarWithFallback(HybridBlock):
    """``try: s = x.sum().asscalar() except Exception: s = 0.0`` (a fast path with a fallback):
    hybridized the refusal of ``asscalar`` must reach the user, not the fallback."""

    @autograph
    def hybrid_forward(self, F, x):
        try:
            s = x.sum().asscalar()
        except Exception:
            s = 0.0
        return x * 2 + s


@program(*ROWS)
class TryFloatInLoopWithFallback(HybridBlock):
    """``except ValueError:`` around ``float(...)`` of a tensor inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            try:
                h = h + row * float(F.sum(row))
            except ValueError:
                h = h + row
        return h


@program(*ROWS)
class TryFallbackOnAutographErrorNamed(HybridBlock):
    """``except gluon_cf.AutographError:`` written by the user: the fallback they chose."""

    @autograph
    def hybrid_forward(self, F, x):
        try:
            s = x.sum().asscalar()
        except gluon_cf.AutographError:
            s = F.stop_gradient(F.sum(x))
        return x * 2 + s


@program(*ROWS)
class SuppressAroundAsscalar(HybridBlock):
    """``with contextlib.suppress(Exception): s = x.sum().asscalar()`` after ``s = 0.0``."""

    @autograph
    def hybrid_forward(self, F, x):
        import contextlib
        s = 0.0
        with contextlib.suppress(Exception):
            s = x.sum().asscalar()
        return x * 2 + s



@program(*ROWS)
class StarredCarryList(HybridBlock):
    """``h, *rest = states`` and ``states = [h + row, *rest]`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        states = [x[0] * 0, x[0] * 1, x[0] * 2]
        for row in x:
            h, *rest = states
            states = [h + row, *rest]
        return states[0] + states[2]


@program(*ROWS)
class DictRebuiltWithDictCall(HybridBlock):
    """``d = dict(d, h=...)`` rebuilding a dict carry in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        d = {"h": x[0] * 0, "c": x[0] * 1}
        for row in x:
            d = dict(d, h=d["h"] * 0.5 + row)
        return d["h"] + d["c"]


@program(*ROWS)
class DictUpdateInLoop(HybridBlock):
    """``d.update(h=...)`` on a dict the function made, in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        d = {"h": x[0] * 0}
        for row in x:
            d.update(h=d["h"] * 0.5 + row)
        return d["h"]


@program(*ROWS)
class TupleCarryGrowsRefused(HybridBlock):
    """A tuple carry that grows each step (refused: its structure changes)."""

    @autograph
    def hybrid_forward(self, F, x):
        t = (x[0],)
        for row in x:
            t = t + (row,)
        return t[-1]


@program(*ROWS)
class SwapThroughTempInIf(HybridBlock):
    """A swap through a temporary in a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        a, b = x[0], x[-1]
        if F.sum(x) > 0:
            tmp = a
            a = b
            b = tmp
        return a - b


@program(*ROWS)
class AugAssignTupleElem(HybridBlock):
    """``h, c = c * 0.5, h + row`` then ``c = c * 2`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h, c = x[0] * 0, x[0] * 1
        for row in x:
            h, c = c * 0.5, h + row
            c = c * 2
        return h, c


@program(*ROWS)
class ListCarryReassignedItemwise(HybridBlock):
    """``hs = [hs[1] + row, hs[0] * 0.5]`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        hs = [x[0] * 0, x[0] * 0]
        for row in x:
            hs = [hs[1] + row, hs[0] * 0.5]
        return hs[0], hs[1]


@program(*ROWS)
class NestedDictCarry(HybridBlock):
    """A dict of a dict and an array carried by a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        st = {"enc": {"h": x[0] * 0}, "dec": x[0] * 1}
        for row in x:
            st = {"enc": {"h": st["enc"]["h"] + row}, "dec": st["dec"] * 0.5}
        return st["enc"]["h"] + st["dec"]


@program(*ROWS)
class WithPauseAroundTarget(HybridBlock):
    """A target computed under ``with autograd.pause():`` (PyTorch's ``torch.no_grad()``):
    eagerly it gets no gradient; hybridized the pause changed nothing in the graph."""

    @autograph
    def hybrid_forward(self, F, x):
        with autograd.pause():
            target = F.tanh(x) * 2
        return (x - target) ** 2



@program(*ROWS)
class DelCollectedList(HybridBlock):
    """``del items`` after ``F.stack(*items)`` of a list a tensor for collected."""

    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for row in x:
            items.append(row * 2)
        y = F.stack(*items)
        del items
        return y


@program(*ROWS)
class DelCarryThenReassign(HybridBlock):
    """``del h`` then ``h = ...`` in each step of a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            t = h + row
            del h
            h = t * 0.5
        return h


@program(*ROWS)
class DelInWhileBody(HybridBlock):
    """``del t`` then ``t = ...`` in the body of a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 1
        t = h * 0
        while F.sum(h) < 4:
            gluon_cf.max_iterations(5)
            t = F.abs(h) * 2
            h = t + 0.5
            del t
            t = h * 0
        return h



@program(*ROWS)
class ClosureInMatchCase(HybridBlock):
    """A lambda made in a ``match`` case reads a variable a later tensor if reassigns."""

    mode = "a"

    @autograph
    def hybrid_forward(self, F, x):
        scale = x * 0 + 2
        match self.mode:
            case "a":
                f = lambda v: v * scale      # noqa: E731
            case _:
                f = lambda v: v      # noqa: E731
        if F.sum(x) > 0:
            scale = scale * 3
        return f(x)


@program(*ROWS)
class ClosureAssignedInWith(HybridBlock):
    """A lambda reads a variable a ``with`` inside a tensor for reassigns."""

    @autograph
    def hybrid_forward(self, F, x):
        import contextlib
        scale = x * 0 + 2
        f = lambda v: v * scale      # noqa: E731
        for row in x:
            with contextlib.nullcontext():
                scale = scale * 0.5 + row
        return f(x[0])
