"""Round 26ra: a hostile review of autograph round 26a, as users porting decoders, attention
loops and helpers: item writes of the new index forms (``outputs[t, :]``, ``[..., t]``, a 1-D
array's item), helpers' item writes on the step's containers, and reads of the frame's
variables. ``PROGRAMS`` maps each block class to its input lists; the oracle is the plain
Python function on NDArrays (``hybrid_forward.__wrapped__``)."""
import builtins
import inspect
import sys

import numpy as np
from mxnet.gluon import HybridBlock

from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand = hostile_harness.rand

TIMES = ([rand(4, 3, seed=2661) * 2],)
ROWS = ([rand(5, 3, seed=2662)], [rand(1, 3, seed=2663) + 1])
CUBES = ([rand(2, 4, 3, seed=2664)],)


# ---------------------------------------------------------------- item writes


@program(*TIMES)
class ItemWriteOneDimensionalWithTrailingColon(HybridBlock):
    """``scores[t, :] = v`` on a 1-D array: an NDArray raises (too many indices)."""

    @autograph
    def hybrid_forward(self, F, x):
        scores = F.zeros((4,))
        scores[1, :] = F.sum(x[1])
        return scores


@program(*TIMES)
class ItemWriteTwoTrailingColonsOnTwoAxes(HybridBlock):
    """``outputs[t, :, :] = h`` on a 2-D array: an NDArray raises (too many indices)."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros((4, 3))
        outputs[2, :, :] = x[0]
        return outputs


@program(*TIMES)
class ItemWriteWholeEllipsis(HybridBlock):
    """``outputs[...] = v``: the whole array."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros((4, 3))
        outputs[...] = x[1]
        return outputs + 1


@program(*CUBES)
class ItemWriteMiddleAxisOfThreeWithNegative(HybridBlock):
    """``out[:, t, :] = v`` with negative t, over every step, read back the step after."""

    @autograph
    def hybrid_forward(self, F, x):
        out = F.zeros_like(x)
        h = F.zeros((2, 3))
        for t in range(-4, 0):
            h = F.tanh(h + x[:, t, :])
            out[:, t, :] = h + out[:, t + 3, :] * 0.5
        return out


@program(*CUBES)
class ItemWriteEllipsisOnMiddleAxis(HybridBlock):
    """``out[..., t, :] = v`` on a 3-D array (the middle axis through an Ellipsis)."""

    @autograph
    def hybrid_forward(self, F, x):
        out = F.ones_like(x)
        for t in range(4):
            out[..., t, :] = x[:, 3 - t, :] * 2
        return out


@program(*TIMES)
class ItemWriteViewReadBeforeOverwrite(HybridBlock):
    """``prev = outputs[1]`` (an NDArray view of the row), then ``outputs[1] = ...``."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        outputs[1] = x[0]
        prev = outputs[1]
        outputs[1] = x[2] * 3
        return prev + 1


@program(*TIMES)
class ItemWriteSliceViewReadBeforeOverwrite(HybridBlock):
    """``head = outputs[0:2]`` (an NDArray view), then ``outputs[1, :] = ...``."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        head = outputs[0:2]
        outputs[1, :] = x[2] * 3
        return head * 2


@program(*TIMES)
class ItemWriteIntIntoIntBuffer(HybridBlock):
    """An int32 buffer given Python floats (an NDArray truncates them)."""

    @autograph
    def hybrid_forward(self, F, x):
        counts = F.zeros((4,), dtype="int32")
        for t in range(4):
            counts[t] = 2.7 * t - 3.2
        return x + F.cast(counts, "float32").reshape((4, 1))


@program(*TIMES)
class ItemWriteFloat16BufferOfAFloat32Value(HybridBlock):
    """A float16 buffer given a float32 row: an NDArray casts it."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros((4, 3), dtype="float16")
        outputs[1, :] = x[1]
        return outputs


@program(*TIMES)
class ItemWriteFloat64BufferOfANumber(HybridBlock):
    """A float64 buffer given numbers, then an item of the buffer into a float32 one."""

    @autograph
    def hybrid_forward(self, F, x):
        wide = F.zeros((4, 3), dtype="float64")
        wide[..., 1] = 1e-9
        return x + F.cast(wide, "float32") * 1e9


@program(*TIMES)
class ItemWriteOfAOneByOneIntoAOneDimensionalItem(HybridBlock):
    """``scores[t] = v`` with v of shape (1, 1)."""

    @autograph
    def hybrid_forward(self, F, x):
        scores = F.zeros((4,))
        scores[2] = F.sum(x, axis=(0, 1), keepdims=True)
        return scores


@program(*TIMES)
class ItemWriteThroughAnItemOfAnItem(HybridBlock):
    """``outputs[t][:] = h``: through the NDArray view of row t."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        for t in range(4):
            outputs[t][:] = x[3 - t]
        return outputs


@program(*TIMES)
class ItemWriteRowOfAOneColumnWithScalarSum(HybridBlock):
    """``scores[t, 0] = F.sum(v)`` on a (4, 1) array: several axes, refused."""

    @autograph
    def hybrid_forward(self, F, x):
        scores = F.zeros((4, 1))
        for t in range(4):
            scores[t, :] = F.sum(x[t])
        return scores


@program(*TIMES)
class ItemWriteAliasOfTheFramesDictByName(HybridBlock):
    """``L = locals`` then ``keep = L()["outputs"]`` then a write."""

    @autograph
    def hybrid_forward(self, F, x):
        L = locals
        outputs = F.zeros_like(x)
        keep = L()["outputs"]
        outputs[0] = x[1] + 5
        return keep


@program(*TIMES)
class ItemWriteAliasByEvalWithNone(HybridBlock):
    """``keep = eval("outputs", None)``: None's globals and locals are the frame's."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        keep = eval("outputs", None)
        outputs[0] = x[1] + 5
        return keep


# ---------------------------------------------------------------- the frame's variables


@program(*ROWS)
class FrameReadThroughAnAliasOfLocalsAfterLoop(HybridBlock):
    """``L = locals`` before a tensor for; ``L()["g"]`` after it."""

    @autograph
    def hybrid_forward(self, F, x):
        L = locals
        h = F.zeros((3,))
        g = F.ones((3,))
        for row in x:
            h = h + row
            g = row * 2
        return h + L()["g"]


@program(*ROWS)
class FrameReadThroughEvalWithNoneAfterLoop(HybridBlock):
    """``eval("g", None, None)`` after a tensor for: None's dicts are the frame's."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        g = F.ones((3,))
        for row in x:
            h = h + row
            g = row * 2
        return h + eval("g", None, None)


@program(*ROWS)
class FrameReadThroughGetframeAfterLoop(HybridBlock):
    """``sys._getframe().f_locals["g"]`` after a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        g = F.ones((3,))
        for row in x:
            h = h + row
            g = row * 2
        return h + sys._getframe().f_locals["g"]


@program(*ROWS)
class FrameReadByKeywordsOfLocalsAfterLoop(HybridBlock):
    """``self.mix(**locals())`` after a tensor for (a helper taking the variables by name)."""

    def mix(self, h, g, **rest):
        return h + g * 3

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        g = F.ones((3,))
        for row in x:
            h = h + row
            g = row * 2
        return self.mix(**{k: v for k, v in locals().items() if k in ("h", "g")})


@program(*ROWS)
class FrameReadByANestedFunctionAfterLoop(HybridBlock):
    """A nested function reading ``g`` (a closure) after a tensor for, called after it."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        g = F.ones((3,))

        def read():
            return g * 2
        for row in x:
            h = h + row
            g = row * 2
        return h + read()


@program(*ROWS)
class FrameReadInATensorIfThroughAnAlias(HybridBlock):
    """``g = V()["h"] * 2`` (``V = vars``) in a tensor if's branch."""

    @autograph
    def hybrid_forward(self, F, x):
        V = vars
        h = x[0] * 3
        g = x[0]
        if F.sum(x[0]) > 0:
            g = V()["h"] * 2
        return g


@program(*ROWS)
class FrameReadByFormatOfLocals(HybridBlock):
    """``"{n}".format(**locals())`` with a Python counter a loop over rows sets."""

    @autograph
    def hybrid_forward(self, F, x):
        n = 0
        h = F.zeros((3,))
        for row in x:
            h = h + row
            n = n + 1
        label = "{n}".format(**locals())
        return h * len(label)


# ---------------------------------------------------------------- the step's containers


@program(*ROWS)
class StepListHoldingAnOuterListWrittenThroughIt(HybridBlock):
    """``items = [outer]; items[0][0] = row``: the outer list changed in a tensor step."""

    @autograph
    def hybrid_forward(self, F, x):
        outer = [F.zeros((3,))]
        h = F.zeros((3,))
        for row in x:
            items = [outer]
            h = h + items[0][0]
            items[0][0] = row
        return h


@program(*ROWS)
class StepDictHoldingAnOuterDictWrittenThroughIt(HybridBlock):
    """``state = {"mem": memory}; state["mem"]["last"] = row`` in a tensor step."""

    @autograph
    def hybrid_forward(self, F, x):
        memory = {"last": F.zeros((3,))}
        h = F.zeros((3,))
        for row in x:
            state = {"mem": memory}
            h = h * 0.5 + state["mem"]["last"]
            state["mem"]["last"] = row
        return h


@program(*ROWS)
class HelperWritesTheOuterListHeldByTheStepsList(HybridBlock):
    """A helper's ``box[0][0] = v`` of the step's ``[outer]``."""

    @staticmethod
    def put(box, v):
        box[0][0] = v

    @autograph
    def hybrid_forward(self, F, x):
        outer = [F.zeros((3,))]
        h = F.zeros((3,))
        for row in x:
            h = h + outer[0]
            self.put([outer], row)
        return h


@program(*ROWS)
class HelperWritesAListMadeOutsideAndPassedIn(HybridBlock):
    """``set_item(memory, 0, row)`` of a list made before the tensor loop."""

    @staticmethod
    def set_item(items, k, v):
        items[k] = v
        return items

    @autograph
    def hybrid_forward(self, F, x):
        memory = [F.zeros((3,))]
        h = F.zeros((3,))
        for row in x:
            h = h + memory[0]
            memory = self.set_item(memory, 0, row)
        return h


@program(*ROWS)
class HelperWritesItsDefaultList(HybridBlock):
    """A helper's ``cache[0] = v`` of its default list (made once, at its def)."""

    @staticmethod
    def remember(v, cache=[None]):
        previous = cache[0]
        cache[0] = v
        return previous

    @autograph
    def hybrid_forward(self, F, x):
        self.remember(None)             # (the default of the call before)
        h = F.zeros((3,))
        for row in x:
            last = self.remember(row)
            if last is not None:
                h = h + last
        return h


@program(*ROWS)
class HelperWritesAStepDictWithATensorKey(HybridBlock):
    """``d[row] = v`` in a helper, of a dict the step made (a tensor as key)."""

    @staticmethod
    def note(d, k, v):
        d[k] = v
        return len(d)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            d = {}
            n = self.note(d, row, row * 2)
            n = self.note(d, row, row * 3) + n
            h = h + d[row] * n
        return h


@program(*ROWS)
class HelperWritesAStepListAliasedByAClosure(HybridBlock):
    """A closure made in the step writes the step's list: ``put(v)`` is ``buf[0] = v``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            buf = [row]

            def put(v):
                buf[0] = v
            put(row * 2 + h)
            h = h + buf[0]
        return h


@program(*ROWS)
class StepListWrittenThenReadAfterTheLoop(HybridBlock):
    """``parts: list = [row]``, a helper's ``parts[0] = ...``, ``parts`` read after the loop."""

    @staticmethod
    def scale(parts, k):
        parts[0] = parts[0] * k

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        parts: list = [h]
        for row in x:
            parts: list = [row]
            self.scale(parts, 2)
            h = h + parts[0]
        return h + parts[0]


# ---------------------------------------------------------------- a step reading its list


@program(*ROWS)
class StepReadsTheLengthOfTheListItAppendsTo(HybridBlock):
    """``outs.append(row * len(outs))`` in a tensor for: each step sees one more item."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row * (len(outs) + 1))
        return F.stack(*outs) if outs else x


@program(*ROWS)
class StepReadsTheListAHelperAppendsTo(HybridBlock):
    """``add_to(outs, h)`` then ``h = h + outs[0]`` in a tensor for."""

    @staticmethod
    def add_to(items, v):
        items.append(v)

    @autograph
    def hybrid_forward(self, F, x):
        outs = [F.zeros((3,))]
        h = F.zeros((3,))
        for row in x:
            self.add_to(outs, row + h)
            h = h + outs[-1] * 0.5
        return h


# ---------------------------------------------------------------- more frames and writes


@program(*ROWS)
class FrameReadByGetattrOfTheFrame(HybridBlock):
    """``getattr(sys._getframe(), "f_locals")["g"]`` after a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        g = F.ones((3,))
        for row in x:
            h = h + row
            g = row * 2
        return h + getattr(sys._getframe(), "f_locals")["g"]


@program(*ROWS)
class FrameReadByArgvalues(HybridBlock):
    """``inspect.getargvalues(inspect.currentframe()).locals["g"]`` after a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        g = F.ones((3,))
        for row in x:
            h = h + row
            g = row * 2
        return h + inspect.getargvalues(inspect.currentframe()).locals["g"]


@program(*ROWS)
class FrameReadByBuiltinsLocals(HybridBlock):
    """``builtins.locals()["g"]`` after a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        g = F.ones((3,))
        for row in x:
            h = h + row
            g = row * 2
        return h + builtins.locals()["g"]


@program(*ROWS)
class FrameReadByANestedFunctionsCallerFrame(HybridBlock):
    """A nested ``peek("g")`` reading ``sys._getframe(1).f_locals``, its caller's."""

    @autograph
    def hybrid_forward(self, F, x):
        def peek(name):
            return sys._getframe(1).f_locals[name]
        h = F.zeros((3,))
        g = F.ones((3,))
        for row in x:
            h = h + row
            g = row * 2
        return h + peek("g")


@program(*TIMES)
class ItemWriteAliasByBuiltinsVars(HybridBlock):
    """``keep = builtins.vars()["outputs"]`` then a write."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        keep = builtins.vars()["outputs"]
        outputs[0] = x[1] + 5
        return keep


@program(*TIMES)
class ItemWriteFloat16BufferOfNumbers(HybridBlock):
    """A float16 buffer given Python floats (an NDArray casts them)."""

    @autograph
    def hybrid_forward(self, F, x):
        half = F.zeros((4, 3), dtype="float16")
        for t in range(4):
            half[t, :] = 0.1 * t + 1e-4
        return x + F.cast(half, "float32")


@program(*TIMES)
class ItemWriteAfterAComprehensionOfRows(HybridBlock):
    """``rows = [outputs[i] for i in range(2)]`` (NDArray views) then a write."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        rows = [outputs[i] for i in range(2)]
        outputs[0] = x[1] + 5
        return rows[0] * 2


@program(*TIMES)
class ItemWriteNestedPythonLoopsOverlapping(HybridBlock):
    """Nested loops writing columns and rows of one buffer, each read back."""

    @autograph
    def hybrid_forward(self, F, x):
        out = F.zeros_like(x)
        for i in range(4):
            for j in range(3):
                out[..., j] = out[:, j] + x[:, j] * (i + 1)
                out[i, :] = out[i] * 0.5
        return out


@program(*TIMES)
class ItemWriteReturnedMidLoop(HybridBlock):
    """``outputs`` (``x * 1``) written by numpy ints and returned inside the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = x * 1
        for t in np.arange(4):
            outputs[t, :] = outputs[t - 1] * 2
            if t == 2:
                return outputs
        return outputs


def peek_caller(name):
    return sys._getframe(1).f_locals[name]


@program(*ROWS)
class FrameReadByACallersFrameAfterLoop(HybridBlock):
    """``peek_caller("g")`` after a tensor for: a helper reading its caller's frame."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        g = F.ones((3,))
        for row in x:
            h = h + row
            g = row * 2
        return h + peek_caller("g")


@program(*TIMES)
class ItemWriteAliasByACallersFrame(HybridBlock):
    """``keep = peek_caller("outputs")``: a helper reading its caller's frame."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        keep = peek_caller("outputs")
        outputs[0] = x[1] + 5
        return keep
