"""Issue 24, twenty-third round: autograph blocks ported from MXNet, TensorFlow and PyTorch
code: greedy and beam decoders with ``break``, attention loops, helpers and methods with side
effects, closures (lambdas, nested defs, default arguments, ``functools.partial``, class
bodies) over variables the converted code reassigns, comprehensions and generator
expressions over tensors and collected lists, ``enumerate``/``zip``/``range``/``reversed``/
``len``, ``try``/``finally`` and ``with`` in tensor loops, augmented assignment of items and
attributes, tuple and star unpacking of loop state, nested tensor loops, early returns,
``global``/``nonlocal`` and ``del``. ``PROGRAMS`` maps each block class to its input lists;
the oracle is the plain Python function on NDArrays (``hybrid_forward.__wrapped__``)."""
import contextlib
import functools

from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

# one-row states: small (many steps), large (no step), negative
STATES = ([rand(4, seed=230)], [floats(5.0, 1.0)], [floats(-3.0, -2.0)])
# rows (T, 3), one of them a single row
ROWS = ([rand(4, 3, seed=231)], [rand(1, 3, seed=232) * 2], [rand(3, 3, seed=233) + 1])
# ... and one on which a decoder's while (below 10) runs no step
WHILE_STATES = STATES + ([floats(8.0, 4.0)],)
# two inputs of rows, the same count
PAIRS = ([rand(4, 3, seed=234), rand(4, 3, seed=235)], [rand(2, 3, seed=236) + 1,
                                                          rand(2, 3, seed=237)])

CALLS = []          # a module's list a helper appends to (GlobalListAppendInHelper)
COUNT = 0           # a global counter (GlobalCounterInHelper)


class _Cell(HybridBlock):
    """A Dense-and-tanh step with its parameters (for gradients through them)."""

    def __init__(self, units=3):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(units, in_units=units, flatten=False)


# ---- closures over variables the converted code reassigns -----------------------------------

@program(*STATES)
class LambdaReadsIfReassigned(HybridBlock):
    """The issue's lambda: made before a tensor if that reassigns what it reads."""

    @autograph
    def hybrid_forward(self, F, x):
        scale = x * 0 + 1
        f = lambda v: v * scale  # noqa: E731
        if F.sum(x) > 0:
            scale = scale * 3
        else:
            scale = scale * 5
        return f(x)


@program(*ROWS)
class DefReadsLoopCarried(HybridBlock):
    """The issue's nested def reading the state a tensor for reassigns."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0 + 1

        def step():
            return h * 2
        for row in x:
            h = step() + row
        return h


@program(*ROWS)
class LambdaReadsWhileCarriedAfterLoop(HybridBlock):
    """A lambda made before a tensor while, called after it: the loop's last value."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        g = lambda v: v + h  # noqa: E731
        while F.sum(h) < 4:
            gluon_cf.max_iterations(8)
            h = h * 1.5 + 1
        return g(x[-1])


@program(*STATES)
class DefaultArgFixedBeforeIf(HybridBlock):
    """``def g(v, s=scale)``: the default is the value where the def is written."""

    @autograph
    def hybrid_forward(self, F, x):
        scale = x * 2

        def g(v, s=scale):
            return v * s
        if F.sum(x) > 0:
            scale = scale + 10
        return g(x) + scale


@program(*STATES)
class PartialBindsBeforeWhile(HybridBlock):
    """``functools.partial(helper, k)``: bound before a loop that reassigns ``k``."""

    @staticmethod
    def _mix(k, v):
        return v * k + 1

    @autograph
    def hybrid_forward(self, F, x):
        k = F.tanh(x)
        mix = functools.partial(self._mix, k)
        while F.sum(k) < 3:
            gluon_cf.max_iterations(6)
            k = k + 1
        return mix(x) + k


@program(*STATES)
class ClassBodyReadsIfReassigned(HybridBlock):
    """A small class defined in the function whose method reads a reassigned variable."""

    @autograph
    def hybrid_forward(self, F, x):
        bias = x * 0.5

        class Shift:
            def __call__(self, v):
                return v + bias
        shift = Shift()
        if F.max(x) > 1:
            bias = bias * 4
        return shift(x)


@program(*ROWS)
class ClosureReadsTwoCarried(HybridBlock):
    """A def reading two carried states, one swapped each step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        c = x[0] * 0 + 1

        def cell(r):
            return F.tanh(h + c * r)
        for row in x:
            h, c = cell(row), h + 0.5
        return h + c


@program(*ROWS)
class LambdaInIfInsideLoop(HybridBlock):
    """A lambda made inside a tensor if inside a tensor for, reading the carried state."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            if F.sum(row) > 0:
                f = lambda v: v + h * 0.5  # noqa: E731
                h = f(row)
            else:
                h = h - row
        return h


# ---- helpers and methods with side effects ----------------------------------------------------

class _Counting(HybridBlock):
    def __init__(self):
        super().__init__()
        self.k = 1

    def step(self, h):
        self.k = self.k + 1
        return h * self.k


@program(*STATES)
class MethodCountsInWhile(_Counting):
    """The issue's method with a Python side effect called from a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        self.k = 1
        i = F.zeros((1,))
        h = x
        while i < 3:
            h = self.step(h)
            i = i + 1
        return h


@program(*STATES)
class GlobalListAppendInHelper(HybridBlock):
    """A helper logging into a module's list, called in a tensor if."""

    @staticmethod
    def _log(v):
        CALLS.append(1)
        return v * 2

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            x = self._log(x)
        return x + len(CALLS) * 0


def _bump(v):
    global COUNT
    COUNT += 1
    return v + 1


@program(*ROWS)
class GlobalCounterInHelper(HybridBlock):
    """A module function with ``global COUNT`` called per row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = _bump(h) * 0.5 + row
        return h


@program(*ROWS)
class NonlocalArrayCounter(HybridBlock):
    """A nested def adding to a ``nonlocal`` array each step (carried out of the loop)."""

    @autograph
    def hybrid_forward(self, F, x):
        total = x[0] * 0

        def add(r):
            nonlocal total
            total = total + r * 2
        for row in x:
            add(row)
        return total


@program(*STATES)
class NonlocalIntCounterInWhile(HybridBlock):
    """A nested def counting steps in a Python int: changed by a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        n = 0

        def tick(v):
            nonlocal n
            n += 1
            return v + 1
        h = x
        while F.sum(h) < 5:
            gluon_cf.max_iterations(10)
            h = tick(h)
        return h * n


@program(*STATES)
class MutableDefaultInHelper(HybridBlock):
    """A helper's mutable default list appended to inside a tensor if."""

    @staticmethod
    def _seen(v, seen=[]):       # noqa: B006 (the bug ported)
        seen.append(v)
        out = v * len(seen)
        seen.clear()              # (each call starts empty: the oracle is run again)
        return out

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) < 0:
            x = self._seen(x)
        return x


@program(*ROWS)
class DictArgumentUpdatedInLoop(HybridBlock):
    """A helper storing into a dict the caller passed, per row."""

    @staticmethod
    def _store(cache, r):
        cache["last"] = r
        return r

    @autograph
    def hybrid_forward(self, F, x):
        cache = {"last": x[0]}
        h = x[0] * 0
        for row in x:
            h = h + self._store(cache, row)
        return h + cache["last"]


# ---- comprehensions and generator expressions -------------------------------------------------

@program(*ROWS)
class ListCompOverTensorStacked(HybridBlock):
    """The issue's ``F.stack(*[r * 2 for r in x])``."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*[r * 2 for r in x])


@program(*ROWS)
class GeneratorSumOverTensor(HybridBlock):
    """``sum(F.tanh(r) for r in x)``."""

    @autograph
    def hybrid_forward(self, F, x):
        return sum(F.tanh(r) for r in x)


@program(*ROWS)
class ListCompWithTensorFilter(HybridBlock):
    """``[r for r in x if F.sum(r) > 0]``: how many rows pass only the run knows."""

    @autograph
    def hybrid_forward(self, F, x):
        kept = [r for r in x if F.sum(r) > 0]
        return F.add_n(x[0] * 0, *kept)


@program(*ROWS)
class ListCompOverCollected(_Cell):
    """Attention scores as a comprehension over the states a tensor for collected."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        states = []
        for row in x:
            h = F.tanh(self.fc(h) + row)
            states.append(h)
        scores = [F.sum(s * h) for s in states]
        weights = F.softmax(F.concat(*scores, dim=0))
        return F.dot(weights, F.stack(*states))


@program(*WHILE_STATES)
class ListCompOverWhileList(HybridBlock):
    """A comprehension over a list a tensor while collected."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            outs.append(h)
        doubled = [o * 2 for o in outs]
        return F.add_n(x, *doubled)


@program(*ROWS)
class EnumerateComprehension(HybridBlock):
    """``[r * i for i, r in enumerate(x)]``."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.add_n(*[r * (i + 1) for i, r in enumerate(x)])


@program(*ROWS)
class AnyOverRows(HybridBlock):
    """``any(F.sum(r) > 2 for r in x)`` as an if's test."""

    @autograph
    def hybrid_forward(self, F, x):
        if any(F.sum(r) > 2 for r in x):
            return x * 2
        return x - 1


@program(*ROWS)
class NestedComprehensionOverRows(HybridBlock):
    """``[[r * c for c in (1.0, 2.0)] for r in x]`` flattened."""

    @autograph
    def hybrid_forward(self, F, x):
        grid = [[r * c for c in (1.0, 2.0)] for r in x]
        return F.stack(*[F.stack(*g) for g in grid])


# ---- enumerate/zip/range/reversed/len --------------------------------------------------------

@program(*ROWS)
class EnumerateTensorLoop(HybridBlock):
    """``for i, row in enumerate(x)`` with ``i`` in arithmetic."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for i, row in enumerate(x):
            h = h * 0.5 + row * (i + 1)
        return h


@program(*PAIRS)
class ZipTwoTensors(HybridBlock):
    """``for a, b in zip(x, y)``."""

    @autograph
    def hybrid_forward(self, F, x, y):
        h = x[0] * 0
        for a, b in zip(x, y):
            h = F.tanh(h + a * b)
        return h


@program(*ROWS)
class ReversedTensorLoop(HybridBlock):
    """``for row in reversed(x)``: a backward RNN."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in reversed(x):
            h = F.tanh(h * 0.5 + row)
        return h


@program(*ROWS)
class RangeLenIndexing(HybridBlock):
    """``for t in range(len(x))`` with ``x[t]`` and ``x[len(x) - 1 - t]``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for t in range(len(x)):
            h = h + x[t] * x[len(x) - 1 - t]
        return h


@program(*ROWS)
class ZipTensorAndCollected(_Cell):
    """``zip(x, outs)`` where a tensor for over ``x`` collected ``outs``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        outs = []
        for row in x:
            h = F.tanh(self.fc(h) + row)
            outs.append(h)
        acc = F.zeros_like(h)
        for row, o in zip(x, outs):
            acc = acc + row * o
        return acc


# ---- try/finally and with inside tensor loops -------------------------------------------------

@program(*STATES)
class TryFinallyInWhile(HybridBlock):
    """A finally that updates a carried tensor in a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        n = F.zeros((1,))
        while F.sum(h) < 6:
            gluon_cf.max_iterations(12)
            try:
                h = h + 1
            finally:
                n = n + 1
        return h * n


@program(*ROWS)
class SuppressInsideFor(HybridBlock):
    """``with contextlib.suppress(ZeroDivisionError)`` around a step's update."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            with contextlib.suppress(ZeroDivisionError):
                h = h + row * 2
        return h


class _Recorder:
    """A user's context manager with Python state (enter/exit counted)."""

    def __init__(self):
        self.entered = 0

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc):
        return False


@program(*ROWS)
class CountingContextInFor(HybridBlock):
    """A user's counting context manager inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        rec = _Recorder()
        h = x[0] * 0
        for row in x:
            with rec:
                h = h + row
        return h * rec.entered


# ---- augmented assignment on items and attributes; unpacking ----------------------------------

@program(*ROWS)
class ListItemUpdatedInLoop(HybridBlock):
    """``hs[0] = hs[0] + row`` on a local list in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        hs = [x[0] * 0, x[0] * 0 + 1]
        for row in x:
            hs[0] = hs[0] + row
            hs[1] = hs[1] * 0.5
        return hs[0] + hs[1]


@program(*ROWS)
class AttributeAccumulatedInLoop(HybridBlock):
    """``self.acc = self.acc + row`` inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        self.acc = x[0] * 0
        for row in x:
            self.acc = self.acc + row
        return self.acc


@program(*ROWS)
class SwapUnpackInFor(HybridBlock):
    """``h, c = c, h + row``: a tuple swap of loop state."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        c = x[0] * 0 + 1
        for row in x:
            h, c = c, h + row
        return h * 2 + c


@program(*STATES)
class NestedUnpackInWhile(HybridBlock):
    """``(h, c), n = (h * 0.5 + 2, c + h), n + 1`` in a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        h, c = x, x * 0
        n = F.zeros((1,))
        while F.sum(h) < 5:
            gluon_cf.max_iterations(12)
            (h, c), n = (h * 0.5 + 2, c + h), n + 1
        return h + c * n


@program(*ROWS)
class StarUnpackCollected(_Cell):
    """``first, *rest = outs`` after a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        outs = []
        for row in x:
            h = F.tanh(self.fc(h) + row)
            outs.append(h)
        first, *rest = outs
        return first * 2 + F.add_n(h, *rest)


@program(*ROWS)
class StarUnpackLoopState(HybridBlock):
    """``h, *extra = state`` of a tuple state, per step of a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        state = (x[0] * 0, x[0] + 1, x[0] * 2)
        for row in x:
            h, *extra = state
            state = (h + row, *[e * 0.5 for e in extra])
        return F.add_n(*state)


# ---- nested tensor loops, early returns, del ------------------------------------------------

@program(*ROWS)
class NestedForOverRowsAndItems(HybridBlock):
    """``for row in x: for v in row:`` both on tensors."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1,))
        for row in x:
            for v in row:
                h = h * 0.5 + v
        return h


@program(*ROWS)
class WhileInsideFor(HybridBlock):
    """A tensor while per row of a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            g = row
            while F.sum(g) < 3:
                gluon_cf.max_iterations(8)
                g = F.abs(g) + 1
            h = h + g
        return h


@program(*STATES)
class EarlyReturnInNestedHelper(HybridBlock):
    """A helper returning early from inside a tensor if inside a tensor while."""

    @staticmethod
    def _grow(F, h):
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            if F.max(h) > 4:
                return h * 0.5
        return h

    @autograph
    def hybrid_forward(self, F, x):
        return self._grow(F, x) + 1


@program(*ROWS)
class DelTemporaryInFor(HybridBlock):
    """``del tmp`` at the end of each step of a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            tmp = row * 2
            h = h + tmp
            del tmp
        return h


@program(*ROWS)
class ReturnRowAndStateFromFor(HybridBlock):
    """``return row, h`` inside a tensor for (item 2)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = h + row
            if F.sum(h) > 1:
                return row, h
        return x[0] * 0, h


# ---- decoders and attention ------------------------------------------------------------------

@program(*ROWS)
class GreedyDecoderRangeBreak(_Cell):
    """``for t in range(6)`` with one append per step and a tensor break (EOS)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        outs = []
        for t in range(6):
            h = F.tanh(self.fc(h) + h * 0.5)
            outs.append(h)
            if F.argmax(h, axis=0) == 0:
                break
        return F.stack(*outs).sum(axis=0) + h


@program(*ROWS)
class BeamScoresPythonLoop(_Cell):
    """A beam step: topk of a score, each beam a Python loop over k."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.tanh(self.fc(x[0]))
        top = F.topk(h, k=2, ret_typ="value")
        beams = [h * top[i] for i in range(2)]
        best = beams[0]
        for b in beams[1:]:
            if F.sum(b) > F.sum(best):
                best = b
        return best


@program(*ROWS)
class AttentionOverRowsLoop(_Cell):
    """Additive attention: score each row against a query, in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        q = F.tanh(self.fc(x[-1]))
        ctx = F.zeros_like(q)
        norm = F.zeros((1,))
        for row in x:
            w = F.exp(F.sum(row * q, keepdims=True))
            ctx = ctx + w * row
            norm = norm + w
        return ctx / norm


@program(*WHILE_STATES)
class SumOfReversedWithStart(HybridBlock):
    """``sum(reversed(outs), start)`` of a while's list (item 2)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            outs.append(h)
        return sum(reversed(outs), x * 0.5)


@program(*STATES)
class TernaryOfNumbers(HybridBlock):
    """``2.0 if F.sum(x) > 0 else 0.5`` (item 2)."""

    @autograph
    def hybrid_forward(self, F, x):
        return x * (2.0 if F.sum(x) > 0 else 0.5)


@program(*WHILE_STATES)
class LenOfWhileListDivides(HybridBlock):
    """``len(outs)`` of a while's list as a divisor (item 2)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            outs.append(h)
        return F.add_n(x, *outs) / (len(outs) + 1)


@program(*WHILE_STATES)
class EnumerateZipWhileList(HybridBlock):
    """``enumerate(zip(outs, doubled))`` of a while's lists (item 2)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs, doubled = [], []
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            outs.append(h)
            doubled.append(h * 2)
        acc = F.zeros_like(x)
        for i, (a, b) in enumerate(zip(outs, doubled)):
            acc = acc + a * b * (i + 1)
        return acc


# ---- Python state consumed or changed through library code ----------------------------------

@program(*ROWS)
class NextOfIteratorPerRow(HybridBlock):
    """``next(it)`` of a Python iterator made before a tensor for: a weight per row."""

    @autograph
    def hybrid_forward(self, F, x):
        it = iter([1.0, 2.0, 3.0, 4.0, 5.0])
        h = x[0] * 0
        for row in x:
            h = h + row * next(it)
        return h


@program(*ROWS)
class ItertoolsCountPerRow(HybridBlock):
    """``next(counter)`` of ``itertools.count()`` per row."""

    @autograph
    def hybrid_forward(self, F, x):
        import itertools
        counter = itertools.count(1)
        h = x[0] * 0
        for row in x:
            h = h * 0.5 + row * next(counter)
        return h


@program(*WHILE_STATES)
class HeapPushInWhile(HybridBlock):
    """``heapq.heappush`` onto a Python list in a tensor while, its length read after."""

    @autograph
    def hybrid_forward(self, F, x):
        import heapq
        heap = []
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            heapq.heappush(heap, 1)
        return h * (len(heap) + 1)


@program(*ROWS)
class SetattrInFor(HybridBlock):
    """``setattr(self, "last", row)`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            setattr(self, "last", row)
            h = h + row
        return h + self.last


@program(*STATES)
class OperatorSetitemInIf(HybridBlock):
    """``operator.setitem(d, "k", ...)`` of a dict in a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        import operator
        d = {"k": 1.0}
        if F.sum(x) > 0:
            operator.setitem(d, "k", 3.0)
        return x * d["k"]


@program(*ROWS)
class ExtendListInFor(HybridBlock):
    """``scale.extend([...])`` of a Python list in a tensor for, its length read after."""

    @autograph
    def hybrid_forward(self, F, x):
        scale = []
        h = x[0] * 0
        for row in x:
            scale.extend([1])
            h = h + row
        return h * len(scale)


@program(*STATES)
class ClassAttributeBumpInIf(HybridBlock):
    """``type(self).calls += 1`` in a helper called from a tensor if."""

    calls = 0

    def _bump(self, v):
        type(self).calls += 1
        return v * 2

    @autograph
    def hybrid_forward(self, F, x):
        type(self).calls = 0
        if F.sum(x) > 0:
            x = self._bump(x)
        return x + type(self).calls


@program(*STATES)
class VarsDictWriteInIf(HybridBlock):
    """``vars(self)["k"] = 3.0`` in a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        vars(self)["k"] = 1.0
        if F.sum(x) > 0:
            vars(self)["k"] = 3.0
        return x * self.k


@program(*ROWS)
class GeneratorReadsReassignedLater(HybridBlock):
    """A generator expression made before a tensor if reassigns what it reads lazily."""

    @autograph
    def hybrid_forward(self, F, x):
        scale = x[0] * 0 + 1
        rows = (r * scale for r in x)
        if F.sum(x) > 0:
            scale = scale * 3
        return F.stack(*rows)


@program(*STATES)
class LambdaCalledInsideWhile(HybridBlock):
    """A lambda made before a tensor while reading the carried state, called each step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        f = lambda: h * 0.5 + 1  # noqa: E731
        while F.sum(h) < 6:
            gluon_cf.max_iterations(12)
            h = f() + 1
        return h


@program(*ROWS)
class FactoryClosureInFor(HybridBlock):
    """A closure factory called per row: each closure keeps its own argument."""

    @autograph
    def hybrid_forward(self, F, x):
        def make(k):
            return lambda v: v * k + 0.1
        h = x[0] * 0
        for row in x:
            f = make(row)
            h = f(h) + row
        return h


@program(*ROWS)
class DefaultArgInsideFor(HybridBlock):
    """``def g(v, s=h)`` made in a tensor for's body: its default is the step's ``h``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0 + 1
        for row in x:
            def g(v, s=h):
                return v + s * 0.5
            h = g(row)
        return h


@program(*WHILE_STATES)
class NonlocalListAppendInHelper(HybridBlock):
    """A nested def appending to the enclosing function's list, called in a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []

        def keep(v):
            outs.append(v)
            return v
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = keep(F.abs(h) * 2 + 1)
        return h * (len(outs) + 1)


@program(*STATES)
class ListSortInIf(HybridBlock):
    """``weights.sort()`` / ``reverse()`` of a Python list inside a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        weights = [3.0, 1.0, 2.0]
        if F.sum(x) > 0:
            weights.reverse()
        return x * weights[0]


@program(*WHILE_STATES)
class SumWithNumberStart(HybridBlock):
    """``x + sum(outs, 1.0)``: Python's 1.0 where the while ran no step (checked when the
    graph runs: a graph gives an array)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            outs.append(h)
        return x + sum(outs, 1.0)


@program(*WHILE_STATES)
class SumWithStartKeyword(HybridBlock):
    """``sum(outs[1:], start=h)``: a slice of a while's list from a start keyword."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            outs.append(h * 0.5)
        return sum(outs[1:], start=h)


@program(*ROWS)
class LibraryReadsListInLoop(HybridBlock):
    """``bisect.bisect(edges, 1.5)`` of a Python list in a tensor for: library code that only
    reads what it is given runs as it is."""

    @autograph
    def hybrid_forward(self, F, x):
        import bisect
        edges = [0.5, 1.0, 2.0]
        h = x[0] * 0
        for row in x:
            h = h + row * bisect.bisect(edges, 1.5)
        return h + len(edges)


@program(*ROWS)
class ReturnScaledRowFromFor(_Cell):
    """``return self.fc(row) * 2`` from inside a tensor for: the row of the step that
    returned, through a Dense (gradients to its parameters)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = F.tanh(h + row)
            if F.max(h) > 0.6:
                return self.fc(row) * 2 + h
        return h


@program(*ROWS)
class ReturnRowWithValueBefore(HybridBlock):
    """``row`` given a value before the loop, then returned from inside it."""

    @autograph
    def hybrid_forward(self, F, x):
        row = x[0] * 0 - 1
        h = F.zeros_like(x[0])
        for row in x:
            h = h + row
            if F.sum(h) < -0.5:
                return row * h
        return h


@program(*ROWS)
class ReturnRowOfMaskedRows(HybridBlock):
    """``return row`` in a for over ``boolean_mask`` rows, whose count only the run knows
    and no value before: refused (a loop of no step would leave no row)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in F.contrib.boolean_mask(x, F.sum(x, axis=1) > -10):
            h = h + row
            if F.sum(h) > 1:
                return row
        return h


@program(*ROWS)
class ItemReadAfterAndReturned(HybridBlock):
    """``return row`` in the loop and ``row`` read after it: refused as before (the last
    row is read where no return ran)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = h + row
            if F.sum(h) > 100:
                return row
        return h + row


# ---- library code iterating a tensor ---------------------------------------------------------

@program(*ROWS)
class ReduceOverRows(HybridBlock):
    """``functools.reduce(lambda a, b: a * 0.5 + b, x)``: a fold over the rows."""

    @autograph
    def hybrid_forward(self, F, x):
        return functools.reduce(lambda a, b: a * 0.5 + b, x)


@program(*ROWS)
class AccumulateOverRows(HybridBlock):
    """``list(itertools.accumulate(x))`` stacked: running sums of the rows."""

    @autograph
    def hybrid_forward(self, F, x):
        import itertools
        return F.stack(*list(itertools.accumulate(x)))


@program(*ROWS)
class ChainRowsAndExtra(HybridBlock):
    """``itertools.chain(x, [x[0]])`` unpacked into add_n."""

    @autograph
    def hybrid_forward(self, F, x):
        import itertools
        return F.add_n(*itertools.chain(x, [x[0] * 2]))


@program(*ROWS)
class TupleUnpackOfTensor(HybridBlock):
    """``first, *rest = x`` of a tensor's rows."""

    @autograph
    def hybrid_forward(self, F, x):
        first, *rest = x
        return first * 2 + sum(rest, first * 0)


@program(*ROWS)
class DequeOfRows(HybridBlock):
    """``collections.deque(x, maxlen=2)``: the last two rows."""

    @autograph
    def hybrid_forward(self, F, x):
        import collections
        last = collections.deque(x, maxlen=2)
        return F.add_n(*last)


@program(*ROWS)
class MapLambdaOverRows(HybridBlock):
    """``list(map(lambda r: r * 2, x))`` stacked."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*list(map(lambda r: r * 2, x)))


@program(*ROWS)
class RandomChoiceOfRows(HybridBlock):
    """``random.Random(0).choice(x)``: ``len`` and an index of the tensor in library code
    (hybridized, MXNet's len of a Symbol is its outputs: refused at the line)."""

    @autograph
    def hybrid_forward(self, F, x):
        import random
        return random.Random(0).choice(x) * 2


@program(*ROWS)
class NlargestOfRowSums(HybridBlock):
    """``heapq.nlargest(2, x, key=...)``: compares rows (their truth: refused hybridized)."""

    @autograph
    def hybrid_forward(self, F, x):
        import heapq
        return F.add_n(*heapq.nlargest(1, x, key=lambda r: F.sum(r).asscalar()))


# ---- names bound by walrus in comprehensions, defs in branches, named tuples ----------------

@program(*ROWS)
class WalrusInComprehensionUnderIf(HybridBlock):
    """``[last := r * 2 for r in x]`` in a tensor if's branch: the := binds ``last`` in the
    function (read after the if)."""

    @autograph
    def hybrid_forward(self, F, x):
        last = x[0] * 0
        if F.sum(x) > 0:
            doubled = [last := r * 2 for r in x]
            last = last + doubled[0]
        else:
            last = last - 1
        return last


@program(*ROWS)
class WalrusInComprehensionOnlyBinding(HybridBlock):
    """The := in the comprehension is the branch's only assignment of ``y``."""

    @autograph
    def hybrid_forward(self, F, x):
        y = x[0]
        if F.sum(x) > 0:
            F.stack(*[y := r * 3 for r in x])
        return y


@program(*STATES)
class DefInEachBranch(HybridBlock):
    """``def f`` written differently in each branch of a tensor if, called after."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            def f(v):
                return v * 2
        else:
            def f(v):
                return v * 3
        return f(x)


@program(*STATES)
class LambdaReassignedInBranch(HybridBlock):
    """A lambda reassigned in one branch of a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        f = lambda v: v + 1  # noqa: E731
        if F.sum(x) > 0:
            f = lambda v: v * 2  # noqa: E731
        return f(x)


@program(*ROWS)
class NamedTupleStateInFor(HybridBlock):
    """An LSTM-like state as a namedtuple, ``_replace``d each step."""

    @autograph
    def hybrid_forward(self, F, x):
        import collections
        State = collections.namedtuple("State", "h c")
        st = State(x[0] * 0, x[0] * 0 + 1)
        for row in x:
            st = st._replace(h=F.tanh(st.h + row * st.c), c=st.c * 0.5)
        return st.h + st.c


@program(*ROWS)
class StarUnpackSplit(HybridBlock):
    """``first, *rest = F.split(x, 3, axis=1)``: a Symbol of several outputs."""

    @autograph
    def hybrid_forward(self, F, x):
        first, *rest = F.split(x, 3, axis=1)
        return first * 2 + F.add_n(*rest)


@program(*STATES)
class NonlocalArrayInIf(HybridBlock):
    """A nested def writing a ``nonlocal`` array, called in one branch of a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        acc = x * 0

        def add(v):
            nonlocal acc
            acc = acc + v
        if F.sum(x) > 0:
            add(x * 2)
        else:
            add(x - 1)
        return acc


@program(*STATES)
class DelInOneBranch(HybridBlock):
    """``del tmp`` in one branch of a tensor if, ``tmp`` not read after."""

    @autograph
    def hybrid_forward(self, F, x):
        tmp = x * 2
        if F.sum(x) > 0:
            y = tmp + 1
            del tmp
        else:
            y = tmp - 1
        return y


# ---- jumps through try/finally and with inside tensor loops ---------------------------------

@program(*ROWS)
class ReturnThroughFinallyInFor(HybridBlock):
    """``return h`` inside ``try`` whose ``finally`` rebinds ``h``: Python returns the value
    before the finally."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            try:
                h = h + row
                if F.sum(h) > 0.5:
                    return h
            finally:
                h = h * 2
        return h - 1


@program(*STATES)
class ContinueThroughFinallyInWhile(HybridBlock):
    """``continue`` inside ``try`` in a tensor while: the finally still runs."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        n = F.zeros((1,))
        while F.sum(h) < 8:
            gluon_cf.max_iterations(12)
            try:
                h = h + 1
                if F.max(h) > 2:
                    continue
                h = h * 1.5
            finally:
                n = n + 1
        return h * n


@program(*STATES)
class BreakThroughFinallyInWhile(HybridBlock):
    """``break`` inside ``try`` in a tensor while: the finally runs on the way out."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        n = F.zeros((1,))
        while F.sum(h) < 8:
            gluon_cf.max_iterations(12)
            try:
                h = F.abs(h) + 1
                if F.max(h) > 3:
                    break
            finally:
                n = n + 2
        return h + n


@program(*ROWS)
class ReturnInsideWithInFor(HybridBlock):
    """``return`` inside a ``with contextlib.suppress(...)`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            with contextlib.suppress(KeyError):
                h = h + row
                if F.sum(h) > 0.5:
                    return h * 3
        return h


@program(*ROWS)
class ReturnKeptBeforeFinally(HybridBlock):
    """The same written as the message says: the value kept in a variable the finally
    leaves alone."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        out = x[0] * 0
        for row in x:
            try:
                h = h + row
                out = h
                if F.sum(h) > 0.5:
                    return out
            finally:
                h = h * 2
        return h - 1


@program(*ROWS)
class ReturnClosureThroughFinally(HybridBlock):
    """``return get()`` where the lambda ``get`` reads ``h``, which the finally reassigns."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        get = lambda: h * 1  # noqa: E731
        for row in x:
            try:
                h = h + row
                if F.sum(h) > 0.5:
                    return get()
            finally:
                h = h * 2
        return h - 1


# ---- more decoders -----------------------------------------------------------------------------

@program(*ROWS)
class DecoderRangeBreakClosureReadsStep(_Cell):
    """``for t in range(5)`` with a tensor break; a lambda reads ``t`` in the step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        outs = []
        for t in range(5):
            scale = lambda v: v * (t + 1) * 0.1  # noqa: E731
            h = F.tanh(self.fc(h)) + scale(x[-1])
            outs.append(h)
            if F.sum(h) > 1.0:
                break
        return F.stack(*outs).sum(axis=0)


@program(*STATES)
class WhileTrueReturnInside(HybridBlock):
    """``while True:`` whose only exit is a return under a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        while True:
            gluon_cf.max_iterations(30)
            h = F.abs(h) * 1.5 + 0.5
            if F.sum(h) > 7:
                return h * 2


@program(*ROWS)
class ForElseOverTensor(HybridBlock):
    """``for ... else`` over a tensor with a tensor break."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h + row
            if F.sum(h) > 1:
                break
        else:
            h = h * 10
        return h


@program(*STATES)
class NestedTensorIfEarlyReturns(HybridBlock):
    """Returns from both levels of nested tensor ifs and after them."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            y = x * 2
            if F.max(y) > 3:
                return y - 1
            y = y + 1
        else:
            y = -x
            if F.min(y) > 2.5:
                return y * 0.5
        return y * 3


@program(*ROWS)
class GeneratorHelperInLoop(HybridBlock):
    """A user generator function iterated inside a tensor for."""

    @staticmethod
    def _weights(n):
        for k in range(n):
            yield 0.5 ** k

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            for w in self._weights(2):
                h = h + row * w
        return h


# ---- class bodies and dict comprehensions ------------------------------------------------

@program(*STATES)
class ClassBodyAttributeReadsLocal(HybridBlock):
    """A class body reads a local when the class statement runs (before a tensor if
    reassigns it): its attribute keeps that value."""

    @autograph
    def hybrid_forward(self, F, x):
        scale = x * 2

        class Config:
            factor = scale
        if F.sum(x) > 0:
            scale = scale * 10
        return Config.factor + scale


@program(*ROWS)
class DictComprehensionOfRows(HybridBlock):
    """``{i: r for i, r in enumerate(x)}``, its first and last entries."""

    @autograph
    def hybrid_forward(self, F, x):
        rows = {i: r * (i + 1) for i, r in enumerate(x)}
        return rows[0] + rows[len(rows) - 1]


@program(*ROWS)
class DefaultArgLambdasInComprehension(HybridBlock):
    """``[lambda v, k=k: v * k for k in (1.0, 2.0)]`` applied in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        fs = [lambda v, k=k: v * k for k in (1.0, 2.0)]
        h = x[0] * 0
        for row in x:
            h = fs[1](h * 0.5) + fs[0](row)
        return h


# ---- user callbacks that library code and builtins call -------------------------------------

class _KeyCounting(HybridBlock):
    def _key(self, v):
        self.calls += 1
        return -v


@program(*ROWS)
class SortedKeyCountsInFor(_KeyCounting):
    """``sorted(ws, key=self._key)`` in a tensor for, the key method counting its calls."""

    @autograph
    def hybrid_forward(self, F, x):
        self.calls = 0
        h = x[0] * 0
        for row in x:
            order = sorted([3.0, 1.0, 2.0], key=self._key)
            h = h * 0.5 + row * order[0]
        return h * self.calls


@program(*ROWS)
class MapCallbackCountsInFor(_KeyCounting):
    """``list(map(self._key, ws))`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        self.calls = 0
        h = x[0] * 0
        for row in x:
            ws = list(map(self._key, [1.0, 2.0]))
            h = h + row * ws[1]
        return h * self.calls


@program(*ROWS)
class ReduceCallbackCountsInFor(_KeyCounting):
    """``functools.reduce(self._add, ws)`` in a tensor for, the callback counting."""

    def _add(self, a, b):
        self.calls += 1
        return a + b

    @autograph
    def hybrid_forward(self, F, x):
        self.calls = 0
        h = x[0] * 0
        for row in x:
            h = h + row * functools.reduce(self._add, [1.0, 2.0, 3.0])
        return h * self.calls
