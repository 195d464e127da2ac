"""Round 25ra: a hostile review of round 25c's conversions (``for a, b in x``, ``outputs[t] =
h``, a helper appending to the step's list), as users porting decoders write them."""
import numpy as np
from mxnet.gluon import HybridBlock

from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

TIMES = ([rand(4, 3, seed=2501)], [rand(2, 3, seed=2502)])
PAIRS = ([rand(4, 2, 3, seed=2503)], [rand(1, 2, 3, seed=2504)], [rand(3, 2, 3, seed=2505)])


def same(a):
    return a


@program(*TIMES)
class ItemWriteThroughHelperAlias(HybridBlock):
    """``outputs = same(x)``: plain Python writes the input itself."""

    @autograph
    def hybrid_forward(self, F, x):
        y = x * 1
        outputs = same(y)
        outputs[0] = x[1] * 2
        return outputs + y


@program(*TIMES)
class ItemWriteAfterHelperKeeps(HybridBlock):
    """``view = same(outputs)`` before the write: the view sees it in plain Python."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        view = same(outputs)
        outputs[0] = x[1] * 2
        return outputs + view


@program(*PAIRS)
class UnpackClosuresLateBinding(HybridBlock):
    """Closures made in a loop unpacking a Python list read the names' last values."""

    @autograph
    def hybrid_forward(self, F, x):
        fs = []
        for a, b in [(x[0, 0], x[0, 1]), (x[0, 1] * 2, x[0, 0] * 3)]:
            fs.append(lambda: a * b)
        return F.stack(*[f() for f in fs])


@program(*PAIRS)
class UnpackIteratorReusedAfterBreak(HybridBlock):
    """``it = iter(pairs); for a, b in it: break; for c, d in it: ...``."""

    @autograph
    def hybrid_forward(self, F, x):
        pairs = [(x[0, 0], x[0, 1]), (x[0, 1], x[0, 0] * 2), (x[0, 0] * 3, x[0, 1])]
        it = iter(pairs)
        h = x[0, 0] * 0
        for a, b in it:
            h = h + a
            break
        for c, d in it:
            h = h * c + d
        return h, a, b, c, d


@program(*PAIRS)
class UnpackGeneratorLazily(HybridBlock):
    """A generator's side effects interleave with the body's, as in Python."""

    @autograph
    def hybrid_forward(self, F, x):
        log = []

        def gen():
            for i in range(3):
                log.append(i)
                yield x[0, 0] * i, x[0, 1] + i
        h = x[0, 0] * 0
        for a, b in gen():
            h = h + a * len(log) + b
        return h


@program(*PAIRS)
class UnpackEndlessWithBreak(HybridBlock):
    """``for i, v in enumerate(itertools.repeat(h))`` ended by a Python break."""

    @autograph
    def hybrid_forward(self, F, x):
        import itertools
        h = x[0, 0]
        for i, v in enumerate(itertools.repeat(x[0, 1])):
            if i >= 3:
                break
            h = h * 0.5 + v
        return h, v


@program(*PAIRS)
class UnpackDictWithElse(HybridBlock):
    """``for k, v in d.items(): ... else:`` with continue."""

    @autograph
    def hybrid_forward(self, F, x):
        d = {"a": x[0, 0], "b": x[0, 1], "c": x[0, 0] * 2}
        h = x[0, 0] * 0
        for k, v in d.items():
            if k == "b":
                continue
            h = h + v
        else:
            h = h * 3
        return h, v


@program(*PAIRS)
class UnpackReturnInsideTryFinally(HybridBlock):
    """A return inside try/finally inside a loop unpacking a list."""

    @autograph
    def hybrid_forward(self, F, x):
        log = []
        h = x[0, 0] * 0
        for k, v in [(0, x[0, 0]), (1, x[0, 1]), (2, x[0, 0])]:
            try:
                h = h + v
                if k == 1:
                    return h * (len(log) + 1)
            finally:
                log.append(k)
        return h


@program(*PAIRS)
class UnpackBreakInsideWith(HybridBlock):
    """A break inside a with inside a loop unpacking a list: __exit__ runs."""

    @autograph
    def hybrid_forward(self, F, x):
        import contextlib
        log = []

        @contextlib.contextmanager
        def step(k):
            yield
            log.append(k)
        h = x[0, 0] * 0
        for k, v in [(0, x[0, 0]), (1, x[0, 1]), (2, x[0, 0])]:
            with step(k):
                h = h + v
                if k == 1:
                    break
        return h * len(log)


@program(*PAIRS)
class UnpackEmptyThenNameUnbound(HybridBlock):
    """A loop over no pairs leaves its names unbound: reading one is UnboundLocalError."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0, 0] * 1
        for a, b in []:
            h = h + a
        try:
            return h + a
        except NameError:
            return h * 2


@program(*PAIRS)
class UnpackLastValuesAfterLoop(HybridBlock):
    """Python keeps the last item's names after the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0, 0] * 0
        for i, (a, b) in enumerate(zip([x[0, 0], x[0, 1]], [x[0, 1], x[0, 0]])):
            h = h + a * b * i
        return h * i, a, b


@program(*PAIRS)
class UnpackIntoAttribute(HybridBlock):
    """``for self.a, b in pairs``: an attribute target."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0, 0] * 0
        for self.a, b in [(x[0, 0], x[0, 1]), (x[0, 1], x[0, 0])]:
            h = h + self.a * b
        return h


@program(*PAIRS)
class UnpackIntoSubscript(HybridBlock):
    """``for d[k], v in ...``: an item target."""

    @autograph
    def hybrid_forward(self, F, x):
        d = {}
        h = x[0, 0] * 0
        for d["a"], v in [(x[0, 0], x[0, 1]), (x[0, 1], x[0, 0])]:
            h = h + d["a"] * v
        return h, d["a"]


@program(*PAIRS)
class UnpackTargetIsTheIterable(HybridBlock):
    """``for a, x in x``: the iterable is evaluated once."""

    @autograph
    def hybrid_forward(self, F, x):
        x = x[0, :, 0:2]
        h = F.zeros((1,))
        for a, x in x:
            h = h + F.sum(a) * F.sum(x)
        return h, x


@program(*PAIRS)
class UnpackTensorTargetIsTheIterable(HybridBlock):
    """``for a, x in x`` over a tensor."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, x in x:
            h = h + a * x
        return h


@program(*PAIRS)
class UnpackWrongLengthPythonList(HybridBlock):
    """A Python pair list with a triple: ValueError after the first step's effects."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0, 0] * 0
        outs = []
        try:
            for a, b in [(x[0, 0], x[0, 1]), (x[0, 1], x[0, 0], x[0, 0])]:
                h = h + a * b
                outs.append(h)
        except ValueError:
            h = h * 5
        return h, len(outs) * h


class _Keeper(HybridBlock):
    def keep(self, a):
        self.kept = a
        return a


@program(*TIMES)
class ItemWriteAfterMethodKeeps(_Keeper):
    """``self.keep(outputs)`` stores the array: plain Python's write reaches ``self.kept``."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = x * 1
        self.keep(outputs)
        outputs[1] = x[0] * 3
        return self.kept * 2 + outputs


@program(*TIMES)
class ItemWriteAfterViewTaken(HybridBlock):
    """``first = outputs[0]`` (a view) before ``outputs[0] = ...``."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = x * 1
        first = outputs[0]
        outputs[0] = x[1] * 2
        return first + outputs


@program(*TIMES)
class ItemWriteOfTheInput(HybridBlock):
    """``x[0] = ...`` on the input: the caller's array."""

    @autograph
    def hybrid_forward(self, F, x):
        y = x * 2
        x[0] = y[1]
        return x + y


@program(*TIMES)
class ItemWriteNegativeAndStepped(HybridBlock):
    """Negative indices, a range with a step, a repeated write to one row, a read after."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        for t in range(len(x) - 1, -1, -2):
            outputs[t] = x[t] * 2
            outputs[t] = outputs[t] + 1
        outputs[-1] = outputs[-1] * 3 + x[0]
        outputs[-2:] = 0.5
        outputs[:, -1] = F.sum(x, axis=1)
        return outputs

    @staticmethod
    def oracle_where_plain_fails(net, F, x):
        rows = [F.zeros_like(x[0]) for _ in range(len(x))]
        for t in range(len(x) - 1, -1, -2):
            rows[t] = x[t] * 2 + 1
        rows[-1] = rows[-1] * 3 + x[0]
        rows[-2:] = [F.ones_like(x[0]) * 0.5] * 2
        out = F.stack(*rows)
        return F.concat(out[:, :-1], F.sum(x, axis=1).reshape((-1, 1)), dim=1)


@program(*TIMES)
class ItemWriteOfAnotherDtype(HybridBlock):
    """An int32 value written into a float32 array: the array's dtype, as an NDArray's."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        outputs[0] = F.cast(x[1] * 10, "int32")
        outputs[1] = 2
        return outputs


@program(*TIMES)
class ItemWriteIntoAnInt32Array(HybridBlock):
    """Numbers and float rows written into an int32 array: truncated, as an NDArray's."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.cast(x * 10, "int32")
        outputs[0] = -2.7
        outputs[1] = x[0] * 10
        return F.cast(outputs, "float32")


@program(*TIMES)
class ItemWriteBroadcastRow(HybridBlock):
    """``outputs[t] = h.reshape((1, -1))``: an NDArray drops the leading 1."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        outputs[0] = x[1].reshape((1, -1))
        return outputs


@program(*TIMES)
class ItemWriteUnderPythonBreak(HybridBlock):
    """A write in a range loop that a tensor break may end."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        h = x[0] * 0
        for t in range(len(x)):
            h = F.tanh(h + x[t])
            if F.sum(h) > 0.5:
                break
            outputs[t] = h
        return outputs


@program(*TIMES)
class ItemWriteAugmented(HybridBlock):
    """``outputs[t] += h``."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        for t in range(len(x)):
            outputs[t] += x[t] * 2
        return outputs


@program(*TIMES)
class ItemWriteOfARowOfARow(HybridBlock):
    """``outputs[0][1] = v``: a view's item; plain Python writes the array."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = x * 1
        outputs[0][1] = 5.0
        return outputs


@program(*TIMES)
class ItemWriteReturnedTwice(HybridBlock):
    """``both = (outputs, outputs)`` then a write: the tuple holds the array."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = x * 1
        both = (outputs, x)
        outputs[0] = x[1]
        return both[0] + outputs


@program(*TIMES)
class ItemWriteInAClosure(HybridBlock):
    """A nested function writing ``outputs[t]`` of its enclosing function's array."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = x * 1

        def write(t, v):
            outputs[t] = v
        write(0, x[1] * 2)
        return outputs


@program(*TIMES)
class ItemWriteNumbersIntoInt32(HybridBlock):
    """Numbers written into an int32 array: truncated toward zero, as an NDArray's."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.cast(x * 10, "int32")
        outputs[0] = -2.7
        outputs[1] = 3.9
        outputs[:, 0] = 7
        return F.cast(outputs, "float32")


ROWS = ([rand(4, 3, seed=2506)], [rand(1, 3, seed=2507)], [rand(3, 3, seed=2508) + 1])
KEPT = []


def add(items, v):
    items.append(v)


@program(*ROWS)
class HelperAppendsToTheStepsListStoredInSelf(HybridBlock):
    """The step's list stored in ``self`` then changed by a helper."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            parts = [row]
            self.parts = parts
            add(parts, h)
            h = F.tanh(F.add_n(*parts))
        return h


@program(*ROWS)
class HelperAppendsToTheStepsListKeptGlobally(HybridBlock):
    """The step's list appended to a global list, then changed by a helper."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            parts = [row]
            KEPT.append(parts)
            add(parts, h)
            h = F.tanh(F.add_n(*parts))
        return h


@program(*ROWS)
class HelperAppendsFromTwoRegions(HybridBlock):
    """One helper called on the step's list and on an inner if's own list."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            parts = [row]
            add(parts, h)
            if F.sum(row) > 0:
                inner = list(parts)
                add(inner, row * 2)
                h = F.tanh(F.add_n(*inner))
            else:
                h = F.tanh(F.add_n(*parts))
        return h


@program(*ROWS)
class HelperAppendsToAComprehensionsList(HybridBlock):
    """A list made by a comprehension in the step, changed by a helper."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            parts = [row * k for k in range(2)]
            add(parts, h)
            h = F.tanh(F.add_n(*parts))
        return h


@program(*ROWS)
class HelperAppendsToACopy(HybridBlock):
    """``copy.copy`` of an outer list in the step, changed by a helper."""

    @autograph
    def hybrid_forward(self, F, x):
        import copy
        base = [x[0]]
        h = x[0] * 0
        for row in x:
            parts = copy.copy(base)
            add(parts, row)
            h = F.tanh(F.add_n(*parts) + h)
        return h


@program(*ROWS)
class HelperAppendsToARebindingOfAnOuterList(HybridBlock):
    """``parts = [row]`` then ``parts = outer`` in the step: the helper changes the outer."""

    @autograph
    def hybrid_forward(self, F, x):
        outer = [x[0]]
        h = x[0] * 0
        for row in x:
            parts = [row]
            if len(parts) > 0:
                parts = outer
            add(parts, h)
            h = F.tanh(F.add_n(*parts))
        return h


@program(*ROWS)
class HelperAppendsToTheStepsListReadAfter(HybridBlock):
    """The step's list, changed by a helper, read after the loop (the last step's)."""

    @autograph
    def hybrid_forward(self, F, x):
        parts = [x[0]]
        h = x[0] * 0
        for row in x:
            parts = [row]
            add(parts, h)
            h = F.tanh(F.add_n(*parts))
        return h * len(parts) + parts[-1]


QUADS = ([rand(3, 2, 2, 3, seed=2509)], [rand(1, 2, 2, 3, seed=2510)])


@program(*QUADS)
class UnpackRowsOfMatrices(HybridBlock):
    """``for a, b in x`` over (T, 2, 2, 3): each item a (2, 3) matrix; the last kept."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((2, 3))
        a = h + 1
        b = h - 1
        for a, b in x:
            h = F.tanh(h + F.dot(a, b, transpose_b=True).sum() * b)
        return h, a, b


@program(*PAIRS)
class UnpackEnumerateNested(HybridBlock):
    """``for i, (a, b) in enumerate(x)`` over a tensor: i a Python int."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for i, (a, b) in enumerate(x):
            h = h * 0.5 + a * (i + 1) - b
        return h


@program(*PAIRS)
class UnpackZipOfTensors(HybridBlock):
    """``for (a, b), c in zip(x, x * 2)``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for (a, b), c in zip(x, x * 2):
            h = F.tanh(h + a * b + c[0])
        return h


@program(*PAIRS)
class UnpackSingleItem(HybridBlock):
    """``for (a,) in x[:, 0:1]``: rows of one item."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for (a,) in x[:, 0:1]:
            h = h + a
        return h


@program(*PAIRS)
class UnpackElseOverTensor(HybridBlock):
    """``for a, b in x: ... else:`` over a tensor."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, b in x:
            h = h + a * b
        else:
            h = h * 2
        return h


@program(*PAIRS)
class UnpackBreakSkipsTryElse(HybridBlock):
    """A break inside a try's body skips its else clause (Python's rule)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0, 0] * 0
        for k, v in [(0, x[0, 0]), (1, x[0, 1]), (2, x[0, 0] * 3)]:
            try:
                if k == 1:
                    break
            except ZeroDivisionError:
                h = h - 1
            else:
                h = h + v
        return h


@program(*PAIRS)
class ContinueSkipsTryElse(HybridBlock):
    """A continue inside a try's body skips its else clause, in a range loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0, 0] * 0
        for k in range(3):
            try:
                if k == 1:
                    continue
            except ZeroDivisionError:
                h = h - 1
            else:
                h = h + x[0, 0] * (k + 1)
        return h


@program(*PAIRS)
class UnpackReturnInsidePause(HybridBlock):
    """A return computed inside ``autograd.pause()`` in a loop: no gradient through it."""

    @autograph
    def hybrid_forward(self, F, x):
        from mxnet import autograd
        h = x[0, 0] * 2
        for k, v in [(0, x[0, 0]), (1, x[0, 1])]:
            with autograd.pause():
                if k == 1:
                    return h + v * 3
        return h


@program(*PAIRS)
class ReturnInsideTryCaughtError(HybridBlock):
    """A return whose value raises inside a try in a loop: the loop's handler catches it."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0, 0] * 1
        for k in range(3):
            try:
                if k == 1:
                    return h * {0: 2}[k]
            except KeyError:
                h = h + 10
        return h


@program(*PAIRS)
class NonlocalLoopTargets(HybridBlock):
    """A nested function's loop assigning its enclosing function's variables (``nonlocal``):
    the last item's, after it returns."""

    @autograph
    def hybrid_forward(self, F, x):
        n = 0
        m = 0

        def inner():
            nonlocal n, m
            h = x[0, 0] * 0
            for n, b in [(1, x[0, 1]), (3, x[0, 0])]:
                h = h + b
            for m in [2, 5]:
                h = h * 0.5
            return h
        h = inner()
        return h * n + m


@program(*TIMES)
class ItemWriteShiftedByAView(HybridBlock):
    """``outputs[1:] = outputs[:-1]``: MXNet copies the overlapping rows in place, in order
    (every row becomes the first), not numpy's shift: refused (a view kept by an item)."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = x * 1
        outputs[1:] = outputs[:-1]
        return outputs


@program(*TIMES)
class ItemWriteOfThePreviousRow(HybridBlock):
    """``outputs[t] = outputs[t - 1] * 0.5 + x[t]``: a new value of an earlier row."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = x * 1
        for t in range(1, len(x)):
            outputs[t] = outputs[t - 1] * 0.5 + x[t]
        return outputs


@program(*PAIRS)
class UnpackTensorContinueSkipsTryElse(HybridBlock):
    """A tensor ``continue`` inside a try's body in a tensor loop skips its else clause."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, b in x:
            try:
                if F.sum(a) > 0:
                    continue
            except ZeroDivisionError:
                h = h - 1
            else:
                h = h + b
            h = h * 0.9
        return h


@program(*TIMES)
class ItemWriteInATupleTarget(HybridBlock):
    """``outputs[t], h = h, x[t]``: an item among several targets."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        h = x[0] * 0
        for t in range(len(x)):
            outputs[t], h = h, x[t] * 2
        return outputs


@program(*TIMES)
class ItemWriteOfACollectedList(HybridBlock):
    """``outs[0] = x[0]`` after a tensor loop collected ``outs``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row * 2)
        outs[0] = x[0]
        return F.stack(*outs)


@program(*TIMES)
class ItemWriteOfANumpyBuffer(HybridBlock):
    """A numpy buffer written by index while hybridizing (Python values)."""

    @autograph
    def hybrid_forward(self, F, x):
        import numpy
        scale = numpy.ones(3, numpy.float32)
        for t in range(3):
            scale[t] = t + 1
        return x * float(scale.sum())


class _Projected(HybridBlock):
    def __init__(self):
        super().__init__()
        from mxnet.gluon import nn
        with self.name_scope():
            self.proj = nn.Dense(2, flatten=False)


@program(*TIMES)
class ItemWritesThenALayer(_Projected):
    """A buffer written by index, then given to a layer (after every write: converts)."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        for t in range(len(x)):
            outputs[t] = x[t] * (t + 1)
        return self.proj(outputs)


@program(*TIMES)
class ItemWritesAroundALayerInALoop(_Projected):
    """A layer given the buffer in the loop that writes it (before the next write)."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        total = F.zeros((len(x), 2))
        for t in range(len(x)):
            total = total + self.proj(outputs)
            outputs[t] = x[t] * (t + 1)
        return total
