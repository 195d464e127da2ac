"""Round 26a: a hostile round on autograph, written as users porting MXNet/TensorFlow/PyTorch
decoders into hybridized blocks: first session 25's conversions (``for a, b in x``,
``outputs[t] = h``, helpers appending to the step's list, returns inside with/try in loops,
try/else after jumps, nonlocal/global loop targets), then decoders, attention loops, masks,
closures, comprehensions, enumerate/zip/range, dtype changes, dict carries, ``del``, walrus.
``PROGRAMS`` maps each block class to its input lists; the oracle is the plain Python
function on NDArrays (``hybrid_forward.__wrapped__``)."""
import numpy as np
from mxnet.gluon import HybridBlock, nn

from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

PAIRS = ([rand(4, 2, 3, seed=2601)], [rand(1, 2, 3, seed=2602) + 1],
         [np.zeros((0, 2, 3), np.float32)])
FULL_PAIRS = ([rand(4, 2, 3, seed=2604)], [rand(2, 2, 3, seed=2605) + 0.5])
TIMES = ([rand(4, 3, seed=2606) * 2],)
ROWS = ([rand(5, 3, seed=2608)], [rand(1, 3, seed=2609) + 1])
STATES = ([floats(1.0, 2.0)], [floats(5.0, 1.0)], [floats(-3.0, -2.0)], [floats(20.0, 4.0)])
COLUMNS = ([rand(4, 2, seed=2611)], [rand(1, 2, seed=2612) * 2])


def add_to(items, v):
    items.append(v)


def add_and_return(items, v):
    items.append(v)
    return items


def extend_with(items, v):
    items.extend([v, v * 2])


def add_twice(items, v):
    items += [v]
    items.insert(0, v * 0.5)


def set_first(items, v):
    items[0] = v


# ---------------------------------------------------------------- unpacking loops


@program(*PAIRS)
class UnpackSwapInBody(HybridBlock):
    """``a, b = b, a`` inside ``for a, b in x``, then both read after (values before)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        a = h + 1
        b = h + 2
        for a, b in x:
            a, b = b, a * 2
            h = F.tanh(h + a - b)
        return h + a * 3 + b


@program(*PAIRS)
class UnpackTargetReassignedAfterUse(HybridBlock):
    """The unpacked name reassigned in the body: the last step's new value after."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        a = h - 1
        for a, b in x:
            h = h + a * b
            a = a * 2 + h
        return h, a


@program(*PAIRS)
class UnpackAugmented(HybridBlock):
    """``h += a * b`` and ``h *= 0.5`` in the unpacking loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        for a, b in x:
            h += a * b
            h *= 0.5
        return h

    @staticmethod
    def oracle_where_plain_fails(net, F, x):
        # (+= on a recorded NDArray: MXNet's error; the same loop out of place)
        h = F.ones((3,))
        for a, b in x:
            h = (h + a * b) * 0.5
        return h


@program(*PAIRS)
class UnpackSecondNameOnlyInIf(HybridBlock):
    """``b`` read only under a tensor if, ``a`` under its else."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, b in x:
            if F.sum(h) > 0:
                h = h - b * 0.5
            else:
                h = h + a
        return h


@program(*PAIRS)
class UnpackOfTransposed(HybridBlock):
    """``for a, b in x.transpose((0, 1, 2))`` and of ``F.swapaxes`` (rows of other axes)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, b in F.swapaxes(F.swapaxes(x, 1, 2), 1, 2):
            h = h + a - b * 0.25
        return h


@program(*FULL_PAIRS)
class UnpackOfASlicedTensor(HybridBlock):
    """``for a, b in x[1:]`` and ``for a, b in x[:, :, :2]``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((2,))
        for a, b in x[1:, :, :2]:
            h = h * 0.5 + a * b
        return h


@program(*PAIRS)
class UnpackReadBothOutsideViaHelper(HybridBlock):
    """A helper given the unpacked names each step (a converted function)."""

    def mix(self, F, a, b):
        return F.tanh(a) * b

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, b in x:
            h = h + self.mix(F, a, b)
        return h


@program(*PAIRS)
class UnpackWithWhileInside(HybridBlock):
    """A tensor while inside the unpacking loop's step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, b in x:
            i = F.zeros((1,))
            while F.sum(i) < 2:
                h = h + a * 0.5 - b * 0.25
                i = i + 1
        return h


@program(*PAIRS)
class UnpackThreeDeep(HybridBlock):
    """``for a, (b, c) in pairs_of(x)`` over a zip of a tensor's rows and (b, c) pairs."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row, (b, c) in zip(x, x):
            h = h + row[0] * b - c
        return h


@program(*PAIRS)
class UnpackStepsOutputsStackedAndReturnedFirst(HybridBlock):
    """Two lists collected by the unpacking loop, one stacked, its first row read."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        hs = []
        gs = []
        for a, b in x:
            h = F.tanh(h + a)
            hs.append(h)
            gs.append(b * h)
        return F.stack(h, *hs) if len(hs) == 0 else F.stack(*hs) + F.stack(*gs)


@program(*FULL_PAIRS)
class UnpackDictCarry(HybridBlock):
    """A dict of state carried by the unpacking loop."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": F.zeros((3,)), "c": F.ones((3,))}
        for a, b in x:
            c = state["c"] * F.sigmoid(a) + b
            state = {"h": F.tanh(c), "c": c}
        return state["h"] + state["c"]


@program(*FULL_PAIRS)
class UnpackDictItemWrite(HybridBlock):
    """``state["h"] = ...`` in the unpacking loop's step, a dict made before the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": F.zeros((3,))}
        for a, b in x:
            state["h"] = state["h"] + a * b
        return state["h"]


@program(*PAIRS)
class UnpackBreakOnFirstRowValue(HybridBlock):
    """A break whose condition reads the unpacked ``b``; ``a`` read after the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        a = h + 5
        for a, b in x:
            if F.max(b) > 0.8:
                break
            h = h + a
        return h + a


@program(*PAIRS)
class UnpackContinueThenAugmented(HybridBlock):
    """``continue`` skipping ``k += 1``: a tensor count of the rows kept."""

    @autograph
    def hybrid_forward(self, F, x):
        k = F.zeros((1,))
        h = F.zeros((3,))
        for a, b in x:
            if F.sum(a * b) < 0:
                continue
            k += 1
            h = h + a
        return h, k


# ---------------------------------------------------------------- item assignment


@program(*TIMES)
class ItemWriteOfAOneDimensionalScore(HybridBlock):
    """``scores[t] = F.sum(x[t])``: a (1,) value into a 1-D array's item (MXNet 1.x's
    ``scores[t]`` is of shape (1,))."""

    @autograph
    def hybrid_forward(self, F, x):
        scores = F.zeros((4,))
        for t in range(4):
            scores[t] = F.sum(x[t])
        return scores * 2


@program(*TIMES)
class ItemWriteRowWithTrailingColon(HybridBlock):
    """``outputs[t, :] = h``: the row written with its trailing axes spelled out."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros((4, 3))
        h = F.zeros((3,))
        for t in range(4):
            h = F.tanh(h + x[t])
            outputs[t, :] = h
        return outputs


@program(*TIMES)
class ItemWriteWithEllipsis(HybridBlock):
    """``outputs[..., t] = s``: a column through an Ellipsis."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros((4, 3))
        for t in range(3):
            outputs[..., t] = x[:, t] * (t + 1)
        return outputs


@program(*TIMES)
class ItemWriteThenReadSameLoop(HybridBlock):
    """A recurrence reading the row it wrote the step before (``outputs[t - 1]``)."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        outputs[0] = x[0]
        for t in range(1, 4):
            outputs[t] = outputs[t - 1] * 0.5 + x[t]
        return outputs


@program(*TIMES)
class ItemWriteThenRebind(HybridBlock):
    """Writes, a rebinding (``outputs = outputs * 2``), more writes: the second array."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        outputs[0] = x[1]
        outputs = outputs * 2
        outputs[1] = x[0]
        return outputs


@program(*TIMES)
class ItemWriteOfACopyMethod(HybridBlock):
    """``outputs = x.copy()``: an NDArray's copy; the input unchanged."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = x.copy()
        outputs[0] = x[1] * 3
        return outputs + x


@program(*TIMES)
class ItemWriteIntoAnInputCopyViaIdentity(HybridBlock):
    """``outputs = F.identity(x)``: MXNet's identity is a new array eagerly."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.identity(x)
        outputs[2] = x[0] - 1
        return outputs * x


@program(*TIMES)
class ItemWriteAfterAStackedList(HybridBlock):
    """``outputs = F.stack(*hs)`` of a loop's list, then one row overwritten."""

    @autograph
    def hybrid_forward(self, F, x):
        hs = []
        h = F.zeros((3,))
        for row in x:
            h = F.tanh(h + row)
            hs.append(h)
        outputs = F.stack(*hs)
        outputs[0] = h
        return outputs


@program(*TIMES)
class ItemWriteOfAColumnOfAnotherBuffer(HybridBlock):
    """``out[:, t] = other[:, t]`` where ``other`` is itself written."""

    @autograph
    def hybrid_forward(self, F, x):
        other = F.ones_like(x)
        out = F.zeros_like(x)
        for t in range(3):
            other[:, t] = x[:, t] * 2
            out[:, t] = other[:, t] + other[:, 0]
        return out, other


@program(*TIMES)
class ItemWriteInALoopOverRowsPython(HybridBlock):
    """``for t, row in enumerate(x): outputs[t] = row * t`` (enumerate of a tensor)."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros((4, 3))
        for t, row in enumerate(x):
            outputs[t] = row * t
        return outputs


@program(*TIMES)
class ItemWriteAfterInPlaceArithmetic(HybridBlock):
    """``outputs *= 2`` between writes (in place on an NDArray)."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x) + 1
        outputs[0] = x[0]
        outputs *= 2
        outputs[1] = x[1]
        return outputs


@program(*TIMES)
class ItemWriteListOfBuffers(HybridBlock):
    """Writes into ``bufs[0]`` (an item of a Python list): the list holds the array."""

    @autograph
    def hybrid_forward(self, F, x):
        bufs = [F.zeros_like(x), F.ones_like(x)]
        out = bufs[0]
        out[0] = x[1]
        return bufs[0] + out


@program(*TIMES)
class ItemWriteTupleUnpackedBuffer(HybridBlock):
    """``a, b = F.zeros_like(x), F.ones_like(x)`` then writes to each."""

    @autograph
    def hybrid_forward(self, F, x):
        a, b = F.zeros_like(x), F.ones_like(x)
        a[0] = x[1]
        b[1] = a[0] * 2
        return a + b


@program(*TIMES)
class ItemWriteOfSplitOutput(HybridBlock):
    """``first, second = F.split(x, 2, axis=1)``... a split's output written."""

    @autograph
    def hybrid_forward(self, F, x):
        parts = F.split(x, num_outputs=3, axis=1)
        first = parts[0] * 1
        first[0] = x[3, 0:1]
        return first


@program(*TIMES)
class ItemWriteOfAWhereResult(HybridBlock):
    """A buffer from ``F.where``, then written by a mask loop."""

    @autograph
    def hybrid_forward(self, F, x):
        out = F.where(x > 0, x, F.zeros_like(x))
        for t in range(4):
            out[t] = out[t] * (t + 1)
        return out


@program(*TIMES)
class ItemWriteAfterBroadcastToView(HybridBlock):
    """``out = F.broadcast_to(h, (4, 3))`` written row by row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        out = F.broadcast_to(F.expand_dims(h, 0), shape=(4, 3))
        for t in range(4):
            out[t] = out[t] - x[t]
        return out


@program(*TIMES)
class ItemWriteGivenToAHelperAfter(HybridBlock):
    """The buffer given to a converted helper after the writes, which writes it too."""

    def finish(self, F, buf):
        buf[3] = buf[0] + buf[1]
        return buf

    @autograph
    def hybrid_forward(self, F, x):
        buf = F.zeros_like(x)
        for t in range(3):
            buf[t] = x[t] * 2
        out = self.finish(F, buf)
        return out + buf


@program(*TIMES)
class ItemWriteSliceFromList(HybridBlock):
    """``outputs[1:3] = F.stack(*hs)``: a block of rows from a Python list."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        hs = [x[0] * 2, x[1] - 1]
        outputs[1:3] = F.stack(*hs)
        return outputs


# ---------------------------------------------------------------- helpers and the step's list


@program(*ROWS)
class HelperReturnsTheStepsList(HybridBlock):
    """``parts = add_and_return(parts, h)``: the helper returns the list it changed."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            parts = [row]
            parts = add_and_return(parts, row * 2)
            outs.append(F.stack(*parts).sum(axis=0))
        return F.stack(*outs) if outs else F.zeros((1, 3))


@program(*ROWS)
class HelperExtendsTheStepsList(HybridBlock):
    """``items.extend([v, v * 2])`` in a helper, a list the step made."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            parts = [row]
            extend_with(parts, h)
            h = F.tanh(sum(parts))
        return h


@program(*ROWS)
class HelperAugmentsAndInserts(HybridBlock):
    """``items += [v]`` and ``items.insert(0, v)`` in a helper on the step's list."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            parts = [row]
            add_twice(parts, h + 1)
            h = F.tanh(parts[0] + parts[1] * 2 - parts[2])
        return h


@program(*ROWS)
class HelperSetsAnItemOfTheStepsList(HybridBlock):
    """``items[0] = v`` in a helper, on the step's list."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            parts = [row, h]
            set_first(parts, row * 3)
            h = F.tanh(parts[0] - parts[1])
        return h


@program(*ROWS)
class HelperLambdaAppends(HybridBlock):
    """A lambda appending to the step's list."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        push = lambda items, v: items.append(v)  # noqa: E731
        for row in x:
            parts = [row]
            push(parts, h)
            h = F.tanh(parts[0] + parts[1])
        return h


@program(*ROWS)
class HelperMethodAppendsInTensorWhile(HybridBlock):
    """A method appending to the step's list in a tensor while."""

    def push(self, items, v):
        items.append(v * 0.5)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        i = F.zeros((1,))
        while F.sum(i) < 3:
            parts = [h]
            self.push(parts, h + 1)
            h = parts[0] - parts[1]
            i = i + 1
        return h


@program(*ROWS)
class HelperAppendsToAStepListAliasedFromAnOuterItem(HybridBlock):
    """``parts = [row]; alias = parts`` then the helper appends through the alias."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            parts = [row]
            alias = parts
            add_to(alias, h)
            h = F.tanh(parts[0] + parts[-1])
        return h


@program(*ROWS)
class HelperAppendsToAListHeldByTheStepsList(HybridBlock):
    """``parts = [outer]``: the helper appends to the outer list held in the step's."""

    @autograph
    def hybrid_forward(self, F, x):
        outer = []
        h = F.zeros((3,))
        for row in x:
            parts = [outer]
            add_to(parts[0], row)
            h = h + row
        return h * (len(outer) + 1)


@program(*ROWS)
class HelperAppendsToAListBuiltByList(HybridBlock):
    """``parts = list(outer)``: a copy the step made (Python's list())."""

    @autograph
    def hybrid_forward(self, F, x):
        outer = [F.zeros((3,))]
        h = F.zeros((3,))
        for row in x:
            parts = list(outer)
            add_to(parts, row)
            h = h + parts[-1] + parts[0]
        return h * (len(outer) + 1)


@program(*ROWS)
class HelperAppendsToASliceCopy(HybridBlock):
    """``parts = outer[:]``: a copy the step made."""

    @autograph
    def hybrid_forward(self, F, x):
        outer = [F.zeros((3,))]
        h = F.zeros((3,))
        for row in x:
            parts = outer[:]
            add_to(parts, row)
            h = h + parts[-1]
        return h * (len(outer) + 1)


@program(*ROWS)
class HelperAppendsToAnOuterListViaIf(HybridBlock):
    """``parts = outer if True else []``: a conditional expression binding the outer list."""

    @autograph
    def hybrid_forward(self, F, x):
        outer = []
        h = F.zeros((3,))
        for row in x:
            parts = outer if len(outer) >= 0 else []
            add_to(parts, row)
            h = h + row
        return h * (len(outer) + 1)


@program(*ROWS)
class HelperAppendsToAnOuterListViaOr(HybridBlock):
    """``parts = outer or []``: the outer list where it holds items, else a new one."""

    @autograph
    def hybrid_forward(self, F, x):
        outer = [F.zeros((3,))]
        h = F.zeros((3,))
        for row in x:
            parts = outer or []
            add_to(parts, row)
            h = h + row
        return h * (len(outer) + 1)


@program(*ROWS)
class HelperAppendsToAWalrusBoundOuter(HybridBlock):
    """``(parts := outer)``: a walrus binding the outer list in the step."""

    @autograph
    def hybrid_forward(self, F, x):
        outer = []
        h = F.zeros((3,))
        for row in x:
            if (parts := outer) is not None:
                add_to(parts, row)
            h = h + row
        return h * (len(outer) + 1)


@program(*ROWS)
class HelperAppendsToStepListReboundInFor(HybridBlock):
    """``for parts in [outer]:`` inside the step: a loop target bound to the outer list."""

    @autograph
    def hybrid_forward(self, F, x):
        outer = []
        h = F.zeros((3,))
        for row in x:
            parts = [row]
            for parts in [outer]:
                pass
            add_to(parts, row)
            h = h + row
        return h * (len(outer) + 1)


@program(*ROWS)
class HelperAppendsToStepListReboundByUnpacking(HybridBlock):
    """``parts, other = outer, []`` in the step: a tuple assignment binding the outer list."""

    @autograph
    def hybrid_forward(self, F, x):
        outer = []
        h = F.zeros((3,))
        for row in x:
            parts = [row]
            parts, other = outer, [row]
            add_to(parts, row)
            h = h + other[0]
        return h * (len(outer) + 1)


@program(*ROWS)
class HelperAppendsToStepListReboundByWith(HybridBlock):
    """``with keep(outer) as parts:`` in the step: a with target bound to the outer list."""

    @autograph
    def hybrid_forward(self, F, x):
        import contextlib
        outer = []
        h = F.zeros((3,))
        for row in x:
            parts = [row]
            with contextlib.nullcontext(outer) as parts:
                add_to(parts, row)
            h = h + row
        return h * (len(outer) + 1)


# ---------------------------------------------------------------- item writes and aliases


@program(*TIMES)
class ItemWriteAfterACallStoringIt(HybridBlock):
    """A write, ``self.keep(outputs)`` storing it, a second write: ``self.kept`` sees both."""

    def keep(self, a):
        self.kept = a

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        outputs[0] = x[1]
        self.keep(outputs)
        outputs[1] = x[2]
        return self.kept * 1


@program(*TIMES)
class ItemWritePrevAliasInPythonLoop(HybridBlock):
    """``prev = outputs`` in a Python loop before the write: ``prev`` is the array."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        prev = outputs * 1
        for t in range(4):
            prev = outputs
            outputs[t] = x[t] + 1
        return prev * 1


@program(*TIMES)
class ItemWriteDoubleBufferSwap(HybridBlock):
    """Two buffers swapped each step (``cur, nxt = nxt, cur``): no alias, distinct arrays."""

    @autograph
    def hybrid_forward(self, F, x):
        cur = F.zeros_like(x)
        nxt = F.ones_like(x)
        for t in range(4):
            nxt[t] = cur[t] + x[t]
            cur, nxt = nxt, cur
        return cur + nxt * 2


@program(*TIMES)
class ItemWriteAliasInTensorIfBranch(HybridBlock):
    """``keep = outputs`` in one branch of a tensor if, then a write: plain Python's ``keep``
    sees it where that branch ran."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        if F.sum(x) > 0:
            keep = outputs
        else:
            keep = outputs * 2
        outputs[0] = x[1] + 5
        return keep * 1


@program(*TIMES)
class ItemWriteAliasByWalrus(HybridBlock):
    """``(keep := outputs)`` then a write."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        if (keep := outputs) is not None:
            outputs[0] = x[1] + 5
        return keep * 1


@program(*TIMES)
class ItemWriteAliasByForTarget(HybridBlock):
    """``for keep in [outputs]: pass`` then a write."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        for keep in [outputs]:
            pass
        outputs[0] = x[1] + 5
        return keep * 1


@program(*TIMES)
class ItemWriteAliasByLambdaDefault(HybridBlock):
    """``f = lambda o=outputs: o * 1``: the default is the array, which the write changes."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        f = lambda o=outputs: o * 1  # noqa: E731
        outputs[0] = x[1] + 5
        return f()


@program(*TIMES)
class ItemWriteAliasByWithTarget(HybridBlock):
    """``with nullcontext(outputs) as keep:`` then a write."""

    @autograph
    def hybrid_forward(self, F, x):
        import contextlib
        outputs = F.zeros_like(x)
        with contextlib.nullcontext(outputs) as keep:
            outputs[0] = x[1] + 5
        return keep * 1


@program(*TIMES)
class ItemWriteAliasByAttribute(HybridBlock):
    """``self.buf = outputs`` then a write."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        self.buf = outputs
        outputs[0] = x[1] + 5
        return self.buf * 1


@program(*TIMES)
class ItemWriteAliasByTernary(HybridBlock):
    """``keep = outputs if True else x`` then a write."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        keep = outputs if x is not None else x
        outputs[0] = x[1] + 5
        return keep * 1


@program(*TIMES)
class ItemWriteAliasByTupleIndex(HybridBlock):
    """``keep = (outputs, 1)[0]`` then a write."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        keep = (outputs, 1)[0]
        outputs[0] = x[1] + 5
        return keep * 1


@program(*TIMES)
class ItemWriteAliasByStarred(HybridBlock):
    """``keep, *_ = outputs, 1`` then a write."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        keep, *_ = outputs, 1
        outputs[0] = x[1] + 5
        return keep * 1


@program(*TIMES)
class ItemWriteViewByReshapeMethod(HybridBlock):
    """``flat = outputs.reshape((12,))``: an NDArray's reshape is a view."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        flat = outputs.reshape((12,))
        outputs[0] = x[1] + 5
        return flat * 1


@program(*TIMES)
class ItemWriteViewByDetach(HybridBlock):
    """``d = outputs.detach()``: the same memory."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        d = outputs.detach()
        outputs[0] = x[1] + 5
        return d * 1 + outputs


@program(*TIMES)
class ItemWriteAliasByAugmentedAssignOnAlias(HybridBlock):
    """A buffer written, then ``other += outputs`` where ``other`` is a new array."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        other = x * 2
        outputs[0] = x[1] + 5
        other += outputs
        outputs[1] = x[0]
        return other + outputs


@program(*TIMES)
class ItemWriteAliasThroughGlobal(HybridBlock):
    """``global KEPT; KEPT = outputs`` then a write."""

    @autograph
    def hybrid_forward(self, F, x):
        global KEPT
        outputs = F.zeros_like(x)
        KEPT = outputs
        outputs[0] = x[1] + 5
        return KEPT * 1


@program(*TIMES)
class ItemWriteAliasThroughNonlocal(HybridBlock):
    """A nested function binding ``keep = outputs`` through ``nonlocal``, then a write."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        keep = x

        def hold():
            nonlocal keep
            keep = outputs
        hold()
        outputs[0] = x[1] + 5
        return keep * 1


@program(*TIMES)
class ItemWriteAliasByDictValue(HybridBlock):
    """``d = {"o": outputs}`` then a write, ``d["o"]`` read."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        d = {"o": outputs}
        outputs[0] = x[1] + 5
        return d["o"] * 1


@program(*TIMES)
class ItemWriteAliasByExec(HybridBlock):
    """``keep = locals()["outputs"]`` then a write."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        keep = locals()["outputs"]
        outputs[0] = x[1] + 5
        return keep * 1


@program(*TIMES)
class ItemWriteAliasByNamedExpressionInCall(HybridBlock):
    """``s = F.sum(keep := outputs)`` then a write."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        s = F.sum(keep := outputs)
        outputs[0] = x[1] + 5
        return keep * 1 + s


@program(*TIMES)
class ItemWriteAliasByChainedAssignment(HybridBlock):
    """``outputs = keep = F.zeros_like(x)`` then a write."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = keep = F.zeros_like(x)
        outputs[0] = x[1] + 5
        return keep * 1


@program(*TIMES)
class ItemWriteInComprehensionOfAlias(HybridBlock):
    """``keeps = [outputs for _ in range(2)]`` then a write."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        keeps = [outputs for _ in range(2)]
        outputs[0] = x[1] + 5
        return keeps[0] + keeps[1]


@program(*TIMES)
class ItemWriteAliasByVars(HybridBlock):
    """``keep = vars()["outputs"]`` then a write (vars() is locals())."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        keep = vars()["outputs"]
        outputs[1] = x[2] - 5
        return keep * 1


@program(*TIMES)
class ItemWriteAugmentedAfterLocals(HybridBlock):
    """``keep = locals()["outputs"]`` then ``outputs += 1`` (in place on an NDArray)."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        keep = locals()["outputs"]
        outputs += x
        return keep * 1


# ---------------------------------------------------------------- returns in with/try, try/else


class _Scale:
    """A context manager whose exit changes a list the body reads."""

    def __init__(self, log):
        self.log = log

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.log.append(1)
        return False


@program(*ROWS)
class ReturnInsideWithInTensorLoop(HybridBlock):
    """``with autograd.pause(): ...`` then a return under a tensor if, in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        import mxnet as mx
        h = F.zeros((3,))
        for row in x:
            with mx.autograd.record():
                h = h + row
            if F.sum(h) > 1:
                return h * 2
        return h


@program(*ROWS)
class ReturnInsideTryExceptInPythonLoop(HybridBlock):
    """A return inside a try whose except catches the user's own KeyError."""

    @autograph
    def hybrid_forward(self, F, x):
        table = {0: 1.0, 2: 3.0}
        h = F.sum(x, axis=0)
        for k in range(4):
            try:
                scale = table[k]
            except KeyError:
                continue
            if k == 2:
                return h * scale
            h = h + scale
        return h


@program(*ROWS)
class ReturnFromWithExitCounting(HybridBlock):
    """A return inside a with in a Python loop: __exit__ runs, counted by the result."""

    @autograph
    def hybrid_forward(self, F, x):
        log = []
        h = F.sum(x, axis=0)
        for k in range(3):
            with _Scale(log):
                if k == 1:
                    return h * (len(log) + 1)
                h = h * 2
        return h


@program(*ROWS)
class TryElseAfterBreakInRange(HybridBlock):
    """``try: ... break ... else:`` in a range loop: the else skipped after the break."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        for k in range(3):
            try:
                if k == 1:
                    break
                h = h * 2
            except ValueError:
                h = h * 0
            else:
                h = h + 1
        return h


@program(*ROWS)
class TryElseFinallyInTensorLoop(HybridBlock):
    """try/else/finally around a tensor if in a tensor for (nothing raised)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            try:
                if F.sum(row) > 0:
                    h = h + row
            except ValueError:
                h = h * 0
            else:
                h = h * 0.5
            finally:
                h = h + 0.25
        return h


@program(*ROWS)
class ContinueInsideTryInWhile(HybridBlock):
    """A Python continue inside a try in a Python while, the try's else skipped."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        k = 0
        while k < 4:
            k += 1
            try:
                if k % 2 == 0:
                    continue
                h = h + k
            finally:
                h = h * 0.5
        return h


# ---------------------------------------------------------------- nonlocal / global


@program(*ROWS)
class NonlocalCounterInTensorLoopHelper(HybridBlock):
    """A nested function's ``nonlocal steps`` (a Python int) from a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        steps = 0

        def step(h, row):
            nonlocal steps
            steps += 1
            return h + row

        h = F.zeros((3,))
        for row in x:
            h = step(h, row)
        return h * (steps + 1)


@program(*ROWS)
class NonlocalTensorStateInTensorLoop(HybridBlock):
    """A nested function's ``nonlocal h`` (a tensor the loop carries) from a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))

        def step(row):
            nonlocal h
            h = F.tanh(h + row)

        for row in x:
            step(row)
        return h


@program(*ROWS)
class NonlocalLoopTargetInPythonLoop(HybridBlock):
    """``nonlocal last; for last in pieces:`` in a nested function (a Python list)."""

    @autograph
    def hybrid_forward(self, F, x):
        last = F.zeros((3,))

        def scan(pieces):
            nonlocal last
            for last in pieces:
                pass

        scan([x[0] * 2, F.sum(x, axis=0)])
        return last


@program(*ROWS)
class GlobalLoopTargetInTensorLoop(HybridBlock):
    """``global LAST_ROW; for LAST_ROW in x:`` a tensor loop binding a global."""

    @autograph
    def hybrid_forward(self, F, x):
        global LAST_ROW
        LAST_ROW = F.zeros((3,))
        h = F.zeros((3,))
        for LAST_ROW in x:
            h = h + LAST_ROW
        return h + LAST_ROW


@program(*ROWS)
class NonlocalReadAfterNestedTensorWhile(HybridBlock):
    """A nested function runs a tensor while assigning its ``nonlocal`` tensor."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)

        def shrink():
            nonlocal h
            while F.sum(F.abs(h)) > 1:
                h = h * 0.5

        shrink()
        return h


# ---------------------------------------------------------------- decoders


@program(*STATES)
class GreedyDecoderWithBreakAndLength(HybridBlock):
    """A greedy decoder: range loop, a tensor break, one append, its length counted."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        outs = []
        n = F.zeros((1,))
        for t in range(6):
            h = F.tanh(h * 1.5 + 0.1)
            outs.append(h)
            n = n + 1
            if F.sum(h) > 1.5:
                break
        return h, n


@program(*STATES)
class BeamLikeTopScoresInTensorWhile(HybridBlock):
    """A tensor while keeping the best score (F.maximum) and the step it was seen."""

    @autograph
    def hybrid_forward(self, F, x):
        best = F.ones((1,)) * -10
        at = F.zeros((1,))
        t = F.zeros((1,))
        h = x
        while F.sum(t) < 4:
            h = F.sin(h * 1.3 + t)
            score = F.sum(h)
            better = score > best
            best = F.where(better, score, best)
            at = F.where(better, t, at)
            t = t + 1
        return best, at


@program(*ROWS)
class AttentionLoopWithMaskAndSoftmax(HybridBlock):
    """Attention over rows in a tensor for: a mask by a tensor if, softmax after."""

    @autograph
    def hybrid_forward(self, F, x):
        q = F.sum(x, axis=0)
        scores = []
        for row in x:
            s = F.sum(row * q)
            if F.sum(row) < 0:
                s = s - 100
            scores.append(s)
        w = F.softmax(F.concat(*scores, dim=0))
        return F.dot(w, x)


@program(*ROWS)
class DecoderWithEarlyReturnAndElse(HybridBlock):
    """``for ... else`` with a tensor break and a return after."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = h + row
            if F.max(h) > 1.2:
                break
        else:
            return h * 10
        return h


# ---------------------------------------------------------------- closures, comprehensions


@program(*ROWS)
class LambdaDefaultCapturesLoopCarry(HybridBlock):
    """``f = lambda v, s=h: v * s`` made before a tensor loop that reassigns ``h``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        f = lambda v, s=h: v * s  # noqa: E731
        for row in x:
            h = h + row
        return f(h)


@program(*ROWS)
class LambdaReadsCarryAfterTensorLoop(HybridBlock):
    """``f = lambda v: v * h`` made before, called after a tensor loop reassigning ``h``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        f = lambda v: v * h  # noqa: E731
        for row in x:
            h = F.tanh(h + row)
        return f(x[0])


@program(*ROWS)
class LambdaCalledInsideTensorLoopReadsCarry(HybridBlock):
    """A lambda reading the carry ``h``, called inside the tensor loop after ``h`` changes."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        g = lambda v: v + h * 0.5  # noqa: E731
        for row in x:
            h = F.tanh(h + row)
            h = g(row)
        return h


@program(*ROWS)
class ClosuresCollectedInPythonLoop(HybridBlock):
    """Late binding: closures made in a Python range loop all read the last ``k``."""

    @autograph
    def hybrid_forward(self, F, x):
        fs = [lambda v: v * k for k in range(3)]
        h = F.sum(x, axis=0)
        return F.stack(*[f(h) for f in fs])


@program(*ROWS)
class ComprehensionOverTensorRows(HybridBlock):
    """``F.stack(*[r * 2 for r in x])``: a comprehension over a tensor's rows."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*[r * 2 for r in x]).sum(axis=0)


@program(*ROWS)
class SumOfAGeneratorOverRows(HybridBlock):
    """``sum(r * r for r in x)``: a generator over a tensor's rows."""

    @autograph
    def hybrid_forward(self, F, x):
        return sum(r * r for r in x) + F.zeros((3,))


@program(*ROWS)
class DictComprehensionOfCollectedList(HybridBlock):
    """A dict comprehension over a tensor loop's collected list."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(F.tanh(row))
        d = {k: v * k for k, v in enumerate(outs)}
        return sum(d.values()) + F.zeros((3,))


@program(*ROWS)
class NestedFunctionReadsLoopItem(HybridBlock):
    """``def mix(): return row * h`` inside the tensor loop's body."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        for row in x:
            def mix():
                return row * h
            h = F.tanh(mix() + h)
        return h


# ---------------------------------------------------------------- collected lists


@program(*ROWS)
class SliceOfCollectedListStacked(HybridBlock):
    """``F.stack(*outs[1:])`` and ``outs[-1]`` of a tensor loop's list."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [F.zeros((3,))]
        for row in x:
            outs.append(outs[-1] * 0.5 + row)
        return F.stack(*outs[1:]).sum(axis=0) + outs[-1]


@program(*ROWS)
class ReversedCollectedList(HybridBlock):
    """``outs[::-1]`` of a tensor for's list, stacked."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros((3,))
        for row in x:
            h = F.tanh(h + row)
            outs.append(h)
        return F.stack(*outs[::-1]) * F.arange(len(outs)).reshape((-1, 1))


@program(*ROWS)
class DelOfCollectedItem(HybridBlock):
    """``del outs[0]`` after a tensor loop collected ``outs``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [F.ones((3,))]
        for row in x:
            outs.append(row * 2)
        del outs[0]
        return F.stack(*outs).sum(axis=0)


@program(*ROWS)
class PopOfCollectedList(HybridBlock):
    """``last = outs.pop()`` after a tensor loop collected ``outs``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [F.ones((3,))]
        for row in x:
            outs.append(row * 2)
        last = outs.pop()
        return last + F.stack(*outs).sum(axis=0)


@program(*ROWS)
class ItemAssignOfCollectedListThenStack(HybridBlock):
    """``outs[-1] = outs[-1] * 10`` on a tensor loop's list, then stacked."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row * 2)
        outs[-1] = outs[-1] * 10
        return F.stack(*outs).sum(axis=0)


@program(*ROWS)
class InsertIntoCollectedList(HybridBlock):
    """``outs.insert(0, h)`` after the tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros((3,))
        for row in x:
            h = h + row
            outs.append(h)
        outs.insert(0, h * 3)
        return F.stack(*outs)[0] + F.stack(*outs)[-1]


@program(*ROWS)
class ZipOfTwoCollectedLists(HybridBlock):
    """``for a, b in zip(hs, gs)`` over two lists a tensor for collected."""

    @autograph
    def hybrid_forward(self, F, x):
        hs, gs = [], []
        for row in x:
            hs.append(row * 2)
            gs.append(row - 1)
        total = F.zeros((3,))
        for a, b in zip(hs, gs):
            total = total + a * b
        return total


@program(*ROWS)
class EnumerateRangeLenOfCollected(HybridBlock):
    """``for i in range(len(outs))`` over a tensor for's list."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row + 1)
        total = F.zeros((3,))
        for i in range(len(outs)):
            total = total + outs[i] * (i + 1)
        return total


# ---------------------------------------------------------------- dtypes, del, walrus, asserts


@program(*ROWS)
class DtypeChangeInLoopCarry(HybridBlock):
    """A carry cast to float16 and back inside a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = F.cast(F.cast(h + row, "float16"), "float32")
        return h


@program(*ROWS)
class IntCounterCarryInTensorLoop(HybridBlock):
    """An int32 counter carried with a float state, used to scale after."""

    @autograph
    def hybrid_forward(self, F, x):
        n = F.zeros((1,), dtype="int32")
        h = F.zeros((3,))
        for row in x:
            if F.sum(row) > 0:
                n = n + 1
            h = h + row
        return h * F.cast(n, "float32")


@program(*ROWS)
class DelOfCarryInsideTensorLoop(HybridBlock):
    """``del tmp`` inside the tensor loop's body (a step temporary)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            tmp = row * 2
            h = h + tmp
            del tmp
        return h


@program(*ROWS)
class WalrusInTensorIfCondition(HybridBlock):
    """``if (s := F.sum(row)) > 0:`` in a tensor loop, ``s`` used after."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            if (s := F.sum(row)) > 0:
                h = h + row * s
            else:
                h = h - s
        return h


@program(*ROWS)
class FStringAndAssertOnTensor(HybridBlock):
    """An f-string of a tensor's shape and an assert on a Python value in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        names = []
        for row in x:
            assert row is not None, f"row {row}"
            h = h + row
        names.append(f"{len(names)}")
        return h * len(names)


@program(*ROWS)
class AssertOnATensorInsideLoop(HybridBlock):
    """``assert F.sum(row) < 100``: a tensor assertion in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            assert F.sum(row) < 100
            h = h + row
        return h


@program(*ROWS)
class RecursionInsideTensorLoopBoundedByDepth(HybridBlock):
    """A converted helper recursing on a Python depth, called in a tensor for."""

    def deep(self, F, h, depth):
        if depth == 0:
            return h
        return self.deep(F, F.tanh(h) + 0.5, depth - 1)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = self.deep(F, h + row, 2)
        return h


@program(*ROWS)
class MethodSideEffectListInTensorLoop(HybridBlock):
    """A method appending to ``self.trace`` called from a tensor loop: refused."""

    def step(self, h):
        self.trace.append(1)
        return h * 0.5

    @autograph
    def hybrid_forward(self, F, x):
        self.trace = []
        h = F.zeros((3,))
        for row in x:
            h = self.step(h + row)
        return h * len(self.trace)


# ---------------------------------------------------------------- more of session 25's


@program(*ROWS)
class ReturnInsideTryFinallyInTensorLoop(HybridBlock):
    """A tensor-conditioned return inside try/finally; the finally changes ``h`` after the
    return's value is computed."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            try:
                h = h + row
                if F.sum(h) > 0.5:
                    return h * 2
            finally:
                h = h + 1
        return h


@program(*ROWS)
class ReturnInsideNullcontextInTensorLoop(HybridBlock):
    """A tensor-conditioned return inside ``with nullcontext():`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        import contextlib
        h = F.zeros((3,))
        for row in x:
            with contextlib.nullcontext():
                h = F.tanh(h + row)
                if F.sum(h) > 0.5:
                    return h * 3
        return h


@program(*TIMES)
class ItemWriteCaughtIndexError(HybridBlock):
    """``outputs[t] = ...`` past the end inside try/except IndexError: break."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros((4, 3))
        for t in range(6):
            try:
                outputs[t] = x[t % 3] * (t + 1)
            except IndexError:
                break
        return outputs


@program(*PAIRS)
class UnpackEachArrayOfAPythonList(HybridBlock):
    """``for a, b in [x[0], x[-1]]``: each (2, 3) array unpacked into its rows."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        if len(x) == 0:
            return h
        for a, b in [x[0], x[-1] * 2]:
            h = h + a - b * 0.5
        return h


@program(*FULL_PAIRS)
class UnpackAfterTensorIfChangingIterable(HybridBlock):
    """The iterable chosen by a tensor if before ``for a, b in y``."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            y = x * 2
        else:
            y = x[::-1]
        h = F.zeros((3,))
        for a, b in y:
            h = F.tanh(h + a * b)
        return h


@program(*FULL_PAIRS)
class UnpackClosureCapturesItemsCalledAfter(HybridBlock):
    """Lambdas capturing the unpacked names inside a tensor loop, called after it."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        a = h + 1
        b = h + 2
        f = lambda: a * b  # noqa: E731
        for a, b in x:
            h = h + f()
        return h + f()


@program(*COLUMNS)
class UnpackItemsOfShapeOneIntoList(HybridBlock):
    """``for a, b in x`` over (T, 2), items appended and concatenated."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for a, b in x:
            outs.append(a * 2 - b)
        return F.concat(*outs, dim=0)


@program(*FULL_PAIRS)
class UnpackInNestedHelperLoop(HybridBlock):
    """A converted helper with its own ``for a, b in pairs`` loop, called twice."""

    def run(self, F, pairs, h):
        for a, b in pairs:
            h = F.tanh(h * b + a)
        return h

    @autograph
    def hybrid_forward(self, F, x):
        h = self.run(F, x, F.zeros((3,)))
        return self.run(F, x[::-1], h)


@program(*ROWS)
class HelperAppendsInPythonIfInsideStep(HybridBlock):
    """The helper's append under a Python condition, in the step, on the step's list."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for k, row in enumerate(x):
            parts = [row]
            if k % 2 == 0:
                add_to(parts, h)
            h = F.tanh(sum(parts))
        return h


@program(*ROWS)
class HelperAppendsTwiceToStepListReadByLen(HybridBlock):
    """``len(parts)`` after two helper appends in a tensor for's step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            parts = []
            add_to(parts, row)
            add_to(parts, h)
            h = h + row * len(parts)
        return h


@program(*ROWS)
class HelperAppendsToDictOfStep(HybridBlock):
    """A helper setting a key of a dict the step made."""

    def put(self, d, v):
        d["v"] = v

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            d = {"h": h}
            self.put(d, row * 2)
            h = F.tanh(d["h"] + d["v"])
        return h


@program(*STATES)
class WhileElseWithTensorBreak(HybridBlock):
    """``while ... else:`` with a tensor break (the else runs where no break)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        i = F.zeros((1,))
        while F.sum(i) < 3:
            h = h * 1.5
            if F.sum(h) > 20:
                break
            i = i + 1
        else:
            h = h - 100
        return h


@program(*ROWS)
class NonlocalTargetOfTensorLoopInHelper(HybridBlock):
    """``nonlocal last; for last in x:`` a tensor loop in a nested function."""

    @autograph
    def hybrid_forward(self, F, x):
        last = F.zeros((3,))

        def scan():
            nonlocal last
            for last in x:
                pass

        scan()
        return last


@program(*ROWS)
class GlobalCounterInPythonLoopOverTensorRows(HybridBlock):
    """A global Python counter in a tensor for: refused (changes once while tracing)."""

    @autograph
    def hybrid_forward(self, F, x):
        global STEPS
        STEPS = 0
        h = F.zeros((3,))
        for row in x:
            STEPS = STEPS + 1
            h = h + row
        return h * STEPS


@program(*ROWS)
class HelperSetsAnItemOfAnOuterList(HybridBlock):
    """``items[0] = v`` in a helper, on a list made before the tensor loop: refused."""

    @autograph
    def hybrid_forward(self, F, x):
        parts = [F.zeros((3,)), F.ones((3,))]
        h = F.zeros((3,))
        for row in x:
            set_first(parts, row * 3)
            h = F.tanh(h + parts[0] - parts[1])
        return h


@program(*ROWS)
class HelperSetsAnItemOfTheStepsListUnderTensorIf(HybridBlock):
    """``items[0] = v`` in a helper under a tensor if inside the step, on the step's list:
    the if's branch did not make it (refused)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            parts = [row, h]
            if F.sum(row) > 0:
                set_first(parts, row * 3)
            h = F.tanh(parts[0] - parts[1])
        return h


# ---------------------------------------------------------------- masks, tuples, nesting


@program(*ROWS)
class MaskedMeanInTensorLoop(HybridBlock):
    """A mask of positive entries per row; a running masked mean."""

    @autograph
    def hybrid_forward(self, F, x):
        total = F.zeros((1,))
        count = F.zeros((1,)) + 1e-3
        for row in x:
            mask = row > 0
            total = total + F.sum(row * mask)
            count = count + F.sum(mask)
        return total / count


@program(*ROWS)
class ListOfTuplesCollected(HybridBlock):
    """``outs.append((h, c))`` in a tensor for; unpacked in a Python loop after."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        c = F.ones((3,))
        outs = []
        for row in x:
            c = c * 0.5 + row
            h = F.tanh(c)
            outs.append((h, c))
        total = F.zeros((3,))
        for a, b in outs:
            total = total + a - b * 0.1
        return total


@program(*ROWS)
class NestedTensorLoopsWithInnerBreak(HybridBlock):
    """A tensor for inside a tensor for, the inner one ended by a tensor break."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            for col in x:
                h = h + col * 0.1
                if F.sum(h) > F.sum(row):
                    break
            h = F.tanh(h)
        return h


@program(*ROWS)
class EarlyReturnFromNestedLoop(HybridBlock):
    """A return from an inner tensor loop inside an outer one."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            for col in x:
                h = h + row * col
                if F.max(h) > 2:
                    return h
        return -h


@program(*ROWS)
class ZipOfTensorAndRange(HybridBlock):
    """``for k, row in zip(range(10), x)``: Python ints with a tensor's rows."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for k, row in zip(range(10), x):
            h = h * 0.5 + row * (k + 1)
        return h


@program(*ROWS)
class EnumerateWithStartOfTensor(HybridBlock):
    """``for k, row in enumerate(x, 1)``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for k, row in enumerate(x, 1):
            h = h + row / k
        return h


@program(*ROWS)
class RangeOverRowsByIndex(HybridBlock):
    """``for t in range(3): x[t]`` where x may hold fewer rows (IndexError as an NDArray)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for t in range(2):
            h = h + x[t] * (t + 1)
        return h


@program(*ROWS)
class DictCarryWithNewKeyInLoop(HybridBlock):
    """A dict carried by a tensor loop that adds a key in the step: refused or equal."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": F.zeros((3,))}
        for row in x:
            state = dict(state, extra=row)
            state["h"] = state["h"] + state["extra"]
        return state["h"]


@program(*ROWS)
class MethodSideEffectCounterInTensorIf(HybridBlock):
    """A method increments ``self.n`` under a tensor if: refused."""

    def bump(self, h):
        self.n = self.n + 1
        return h * self.n

    @autograph
    def hybrid_forward(self, F, x):
        self.n = 0
        h = F.sum(x, axis=0)
        if F.sum(h) > 0:
            h = self.bump(h)
        return h


@program(*ROWS)
class RecursionOnPythonListInsideTensorLoop(HybridBlock):
    """A recursive helper over a Python list, called in a tensor for."""

    def fold(self, F, items):
        if len(items) == 1:
            return items[0]
        return F.tanh(items[0] + self.fold(F, items[1:]))

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = self.fold(F, [h, row, row * 2])
        return h


@program(*ROWS)
class AugmentedCarryOfCollectedSlice(HybridBlock):
    """``total += F.stack(*outs[:2]).sum(axis=0)`` after a loop (out of place)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row * 2)
        total = F.zeros((3,))
        total = total + F.stack(*outs[:2]).sum(axis=0)
        return total


@program(*STATES)
class WhileWithListOfTuplesAndStack(HybridBlock):
    """A tensor while appending pairs, stacked by a comprehension after."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        pairs = []
        while F.sum(F.abs(h)) < 10:
            h = h * 2
            pairs.append(h)
        return F.stack(*[p for p in pairs]).sum(axis=0) if pairs else h


# ---------------------------------------------------------------- round two


CUBES = ([rand(4, 2, 3, seed=2613)], [rand(4, 2, 3, seed=2614) * 2])


@program(*PAIRS)
class UnpackDuplicateTargetName(HybridBlock):
    """``for a, a in x``: Python binds ``a`` to the second item."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, a in x:  # noqa: B007
            h = h * 0.5 + a
        return h


@program(*PAIRS)
class UnpackIntoAListTarget(HybridBlock):
    """``for [a, b] in x`` and ``for _, b in x``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for [a, b] in x:
            h = h + a * 2 - b
        for _, b in x:
            h = h * 0.5 + b
        return h


@program(*PAIRS)
class UnpackIterableRebound(HybridBlock):
    """``x = x * 0`` in the body: the iterable was evaluated once, before."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, b in x:
            h = h + a * b
            x = x * 0
        return h + F.sum(x)


@program(*PAIRS)
class UnpackEnumerateIntoItemWrite(HybridBlock):
    """``for t, (a, b) in enumerate(x)``, the pair's product collected and stacked."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [F.zeros((3,))]
        for t, (a, b) in enumerate(x):
            outs.append(a * b * t)
        return F.stack(*outs)


@program(*TIMES)
class ItemWriteOneDimensionalSliceAndNegative(HybridBlock):
    """A 1-D array: ``s[-1] = F.max(v)``, ``s[1:3] = v[:2]``, ``s[0] = 2.5``."""

    @autograph
    def hybrid_forward(self, F, x):
        s = F.zeros((4,))
        s[-1] = F.max(x[0])
        s[1:3] = x[1, :2]
        s[0] = 2.5
        return s * x[2, 0]


@program(*CUBES)
class ItemWriteMiddleAxisWithColons(HybridBlock):
    """``out[:, t, :] = s`` and ``out[..., t, :]`` of a (4, 2, 3) buffer."""

    @autograph
    def hybrid_forward(self, F, x):
        out = F.zeros_like(x)
        out[:, 0, :] = x[:, 1, :] * 2
        out[..., 1, :] = x[:, 0] - 1
        out[3, ...] = x[0]
        return out


@program(*TIMES)
class ItemWriteWrongBroadcastWithColon(HybridBlock):
    """``outputs[t, :] = x`` (a (4, 3) value into a row): an NDArray's error."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        outputs[0, :] = x
        return outputs


@program(*TIMES)
class ItemWriteTwoEllipses(HybridBlock):
    """``outputs[..., ...] = 1``: numpy's and MXNet's error; refused."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        outputs[0, ..., ...] = 1.0
        return outputs + x


@program(*ROWS)
class HelperSetsAKeyOfADictItMadeInStepWhile(HybridBlock):
    """A tensor while's step makes a dict and a helper sets two keys."""

    def fill(self, d, h):
        d["a"] = h * 0.5
        d["b"] = h + 1

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        i = F.zeros((1,))
        while F.sum(i) < 3:
            d = {}
            self.fill(d, h)
            h = d["a"] - d["b"] * 0.1
            i = i + 1
        return h


@program(*ROWS)
class HelperDeletesAnItemOfTheStepsList(HybridBlock):
    """``del items[0]`` in a helper on the step's list."""

    def drop(self, items):
        del items[0]

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            parts = [h, row, row * 2]
            self.drop(parts)
            h = F.tanh(parts[0] + parts[1])
        return h


@program(*ROWS)
class HelperSetsAnItemOfAListHeldByTheStepsList(HybridBlock):
    """``set_first(parts[0], v)``: the outer list held by the step's: refused."""

    @autograph
    def hybrid_forward(self, F, x):
        outer = [F.zeros((3,))]
        h = F.zeros((3,))
        for row in x:
            parts = [outer]
            set_first(parts[0], row)
            h = h + row
        return h + outer[0]


@program(*ROWS)
class HelperSetsAnItemReturnedByAnotherHelper(HybridBlock):
    """``parts = self.get()`` (an outer list returned) then ``set_first(parts, v)``."""

    def get(self):
        return self.store

    @autograph
    def hybrid_forward(self, F, x):
        self.store = [F.zeros((3,))]
        h = F.zeros((3,))
        for row in x:
            parts = self.get()
            set_first(parts, row)
            h = h + row
        return h + self.store[0]


def _set_last(items):
    global LAST
    for LAST in items:
        pass


@program(*ROWS)
class GlobalLoopTargetInHelperReadAfter(HybridBlock):
    """A helper's ``global LAST; for LAST in items: pass``, ``LAST`` read after the call."""

    @autograph
    def hybrid_forward(self, F, x):
        _set_last([x[0], F.sum(x, axis=0) * 2])
        return LAST * 1


@program(*ROWS)
class NonlocalTargetWithTensorBreakOverList(HybridBlock):
    """``nonlocal last; for last in [...]:`` with a tensor break: the row at the break."""

    @autograph
    def hybrid_forward(self, F, x):
        last = F.zeros((3,))
        h = F.sum(x, axis=0)

        def scan():
            nonlocal last
            for last in [h * 0.5, h - 1, h * 3]:
                if F.sum(last) > 0:
                    break

        scan()
        return last


@program(*ROWS)
class LocalTargetWithTensorBreakOverList(HybridBlock):
    """``for last in [...]:`` with a tensor break, ``last`` read after: the row at the
    break."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        for last in [h * 0.5, h - 1, h * 3]:
            if F.sum(last) > 0:
                break
        return last + h


@program(*ROWS)
class VariableReadOnlyThroughEvalAfterLoop(HybridBlock):
    """``g`` assigned in a tensor loop, read after it only by ``eval("g")``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        g = F.ones((3,))
        for row in x:
            h = h + row
            g = row * 2
        return h + eval("g")


@program(*ROWS)
class VariableReadOnlyThroughLocalsAfterLoop(HybridBlock):
    """``g`` assigned in a tensor loop, read after it only by ``locals()["g"]``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        g = F.ones((3,))
        for row in x:
            h = h + row
            g = row * 2
        return h + locals()["g"]


@program(*ROWS)
class TryElseAfterTensorBreakInTensorLoop(HybridBlock):
    """A tensor break inside a try's body in a tensor for: the else skipped on that step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            try:
                h = h + row
                if F.sum(h) > 0.5:
                    break
            except ValueError:
                h = h * 0
            else:
                h = h * 0.5
        return h


@program(*ROWS)
class TryElseAfterTensorReturnInRange(HybridBlock):
    """A tensor return inside a try's body in a range loop: its else and later steps skipped."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        for k in range(3):
            try:
                h = h * 1.5 + k
                if F.sum(h) > 2:
                    return h
            except ValueError:
                h = h * 0
            else:
                h = h - 0.25
        return -h


@program(*ROWS)
class EnumerateTensorBreakBothReadAfter(HybridBlock):
    """``for i, row in enumerate(x)`` with a tensor break; ``i`` and ``row`` read after."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        i, row = 0, h
        for i, row in enumerate(x):
            h = h + row
            if F.sum(h) > 0.5:
                break
        return h + row * i


@program(*ROWS)
class ZipOfRowsAndShiftedRows(HybridBlock):
    """``for a, b in zip(x, x[1:])``: the shorter length, as Python's zip."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, b in zip(x, x[1:]):
            h = h + a * b
        return h


@program(*ROWS)
class DictItemAugmentedInTensorWhile(HybridBlock):
    """``d["h"] += v`` on a dict carried by a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        d = {"h": F.sum(x, axis=0), "n": F.zeros((1,))}
        while F.sum(d["n"]) < 3:
            d["h"] = d["h"] * 0.5 + 1
            d["n"] = d["n"] + 1
        return d["h"]


@program(*TIMES)
class VariableReadOnlyThroughEvalAfterTensorIf(HybridBlock):
    """``g`` assigned by a tensor if's branches, read after it only by ``eval("g")``."""

    @autograph
    def hybrid_forward(self, F, x):
        g = x[0]
        if F.sum(x[1]) > 0:
            g = x[1] * 2
        else:
            g = x[2] - 1
        return x[3] + eval("g")


@program(*STATES)
class VariableReadOnlyThroughVarsAfterTensorWhile(HybridBlock):
    """``g`` assigned in a tensor while, read after it only by ``vars()["g"]``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        g = x * 0
        while F.sum(F.abs(h)) < 10:
            h = h * 2
            g = h + 1
        return h + vars()["g"]


@program(*ROWS)
class GeneratorKeptPastATensorLoop(HybridBlock):
    """``gen = (r * h for r in [x[0]])`` made before a tensor loop reassigning ``h``,
    consumed after it: the generator reads the last ``h``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        gen = (r * h for r in [x[0], x[0] * 2])
        for row in x:
            h = F.tanh(h + row)
        return sum(gen)


@program(*ROWS)
class DefaultArgumentOfTheStepsRow(HybridBlock):
    """``def scale(v, s=row)`` defined in the tensor loop's step, called in it."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        for row in x:
            def scale(v, s=row):
                return v * s
            h = F.tanh(scale(h) + row)
        return h


@program([rand(4, 2, 3, seed=2615).astype(np.float16)],
         [rand(2, 2, 3, seed=2616).astype(np.float16)])
class UnpackFloat16Rows(HybridBlock):
    """``for a, b in x`` over float16 rows, a float16 carry."""

    TOL = (1e-2, 1e-2)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0, 0])
        for a, b in x:
            h = h * 0.5 + a * b
        return h


@program(*ROWS)
class ClassBodyReadsCarryAfterLoop(HybridBlock):
    """A class body after a tensor loop reads its carry (runs where written)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = h + row

        class Holder:
            value = h * 2
        return Holder.value


@program(*TIMES)
class DictItemsLoopWithTensorBreak(HybridBlock):
    """``for k, v in d.items()`` with a tensor break: the rows summed up to it."""

    @autograph
    def hybrid_forward(self, F, x):
        d = {"a": x[0], "b": x[1] * 2, "c": x[2] - 1}
        h = F.zeros((3,))
        for k, v in d.items():
            h = h + v
            if F.sum(h) > 0.5:
                break
        return h


@program(*TIMES)
class DictItemsLoopWithTensorReturn(HybridBlock):
    """``for k, v in d.items()`` with a tensor return of ``v``."""

    @autograph
    def hybrid_forward(self, F, x):
        d = {"a": x[0], "b": x[1] * 2, "c": x[2] - 1}
        h = F.zeros((3,))
        for k, v in d.items():
            h = h * 0.5 + v
            if F.sum(v) > 0:
                return v * 3 + h
        return h


@program(*TIMES)
class PairsListLoopWithTensorContinueAndAppend(HybridBlock):
    """A list of pairs unpacked, a tensor continue, an append after it (collected)."""

    @autograph
    def hybrid_forward(self, F, x):
        pairs = [(x[0], x[1]), (x[1], x[2]), (x[2], x[3])]
        h = F.zeros((3,))
        outs = []
        for a, b in pairs:
            h = h + a * b
            if F.sum(a) < 0:
                continue
            outs.append(h)
        return F.stack(*outs).sum(axis=0) if len(outs) == 3 else h


@program(*ROWS)
class StepsListStashedByNonlocalThenItemSet(HybridBlock):
    """The step's list stashed by a closure's ``nonlocal`` write, then a helper sets its
    item: the stashed list sees it, as in Python."""

    @autograph
    def hybrid_forward(self, F, x):
        keep = [F.zeros((3,))]

        def stash(p):
            nonlocal keep
            keep = p

        h = F.zeros((3,))
        for row in x:
            parts = [row * 1]
            stash(parts)
            set_first(parts, row * 3 + h)
            h = h + parts[0]
        return h + keep[0]


@program(*TIMES)
class ItemWriteAfterAGeneratorOverTheBuffer(HybridBlock):
    """``gen = (r * 1 for r in outputs)`` made before a write, consumed after it."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        gen = (r * 1 for r in outputs)
        outputs[0] = x[1] + 5
        return F.stack(*list(gen))


@program(*TIMES)
class ItemWriteAfterAMapOverTheBuffer(HybridBlock):
    """``m = map(lambda r: r * 1, outputs)`` (lazy) before a write, consumed after it."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        m = map(lambda r: r * 1, outputs)
        outputs[0] = x[1] + 5
        return F.stack(*list(m))


@program(*ROWS)
class CarryChangesDtypeInTensorLoop(HybridBlock):
    """The carry becomes float16 in the first step (float32 before): refused hybridized."""

    TOL = (1e-2, 1e-2)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = F.cast(F.cast(h, "float32") + row, "float16")
        return F.cast(h, "float32")


@program(*ROWS)
class TensorIfBranchesOfTwoDtypes(HybridBlock):
    """One branch float16, the other float32, cast back after."""

    TOL = (1e-2, 1e-2)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        if F.sum(h) > 0:
            h = F.cast(h * 2, "float16")
        else:
            h = h - 1
        return F.cast(h, "float32")


@program(*ROWS)
class EvalReadsThePreviousStepsValue(HybridBlock):
    """``h = h + eval("g"); g = row``: each step reads the row of the step before."""

    @autograph
    def hybrid_forward(self, F, x):
        g = F.zeros((3,))
        h = F.zeros((3,))
        for row in x:
            h = h * 0.5 + eval("g")
            g = row * 2
        return h


@program(*ROWS)
class FunctionsDefinedInTensorIfBranches(HybridBlock):
    """``def f`` in each branch of a tensor if, called after it: a Python value per branch."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        if F.sum(h) > 0:
            def f(v):
                return v * 2
        else:
            def f(v):
                return v * 3
        return f(h)


@program(*ROWS)
class WalrusInComprehensionInTensorLoop(HybridBlock):
    """``[y := row * k for k in (1, 2)]`` in a tensor for's step: ``y`` is the function's."""

    @autograph
    def hybrid_forward(self, F, x):
        y = F.zeros((3,))
        h = F.zeros((3,))
        for row in x:
            _ = [y := row * k for k in (1, 2)]
            h = h + y * 0.5
        return h + y


@program(*ROWS)
class WalrusInComprehensionInTensorIf(HybridBlock):
    """``[y := v for v in (h * 2,)]`` in one branch of a tensor if, ``y`` read after."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        y = h - 1
        if F.sum(h) > 0:
            _ = [y := v for v in (h * 2,)]
        return y + h


@program(*STATES)
class WalrusInGeneratorInTensorWhile(HybridBlock):
    """``any((m := ...) is None for ...)`` in a tensor while's step binds ``m``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        m = x * 0
        while F.sum(F.abs(h)) < 10:
            h = h * 2
            _ = [m := h + k for k in (1,)]
        return h + m


@program([floats(1.0, -2.0, 3.0, -1.0, -1.0, -1.0).reshape(2, 3)],
         [floats(-1.0, -2.0, -3.0, 2.0, 1.0, -1.0).reshape(2, 3)])
class BooleanMaskPerRowInTensorLoop(HybridBlock):
    """``F.contrib.boolean_mask(row, row > 0)`` in a tensor for: some rows keep nothing."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1,))
        for row in x:
            kept = F.contrib.boolean_mask(row, row > 0)
            h = h + F.sum(kept)
        return h


@program(*ROWS)
class TensorBreakInTryWithElseAndFinallyInRange(HybridBlock):
    """A tensor break inside a try's body in a range loop: else skipped, finally run."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        for k in range(4):
            try:
                h = h * 1.5 + k
                if F.sum(h) > 3:
                    break
            except ValueError:
                h = h * 0
            else:
                h = h - 0.5
            finally:
                h = h + 0.125
        return h


@program(*ROWS)
class TensorContinueInsideWithInRange(HybridBlock):
    """A tensor continue inside ``with nullcontext():`` in a range loop."""

    @autograph
    def hybrid_forward(self, F, x):
        import contextlib
        h = F.sum(x, axis=0)
        for k in range(3):
            with contextlib.nullcontext():
                h = h * 0.5 + k
                if F.sum(h) < 1:
                    continue
                h = h - 2
        return h


@program(*ROWS)
class TensorReturnInsideFinallyLessTryInTensorWhile(HybridBlock):
    """A tensor return inside try/except in a tensor while (nothing raised)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        i = F.zeros((1,))
        while F.sum(i) < 4:
            try:
                h = h * 1.25 + 0.5
                if F.sum(h) > 4:
                    return h * 10
            except ValueError:
                h = h * 0
            i = i + 1
        return h


@program(*ROWS)
class NonlocalAssignedInTensorIfOfNestedFunction(HybridBlock):
    """A nested function's tensor if assigns its ``nonlocal best`` in both branches."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        best = h * 0

        def pick():
            nonlocal best
            if F.sum(h) > 0:
                best = h * 2
            else:
                best = h * 3

        pick()
        return best + h


@program(*ROWS)
class NonlocalAssignedInOneBranchOfNestedTensorIf(HybridBlock):
    """``nonlocal best`` assigned in one branch only: the value before in the other."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        best = h - 1

        def pick():
            nonlocal best
            if F.sum(h) > 0:
                best = h * 2

        pick()
        return best + h


@program(*FULL_PAIRS)
class ComprehensionOverTheStepsRow(HybridBlock):
    """``F.stack(*[r * 2 for r in pair])`` over a tensor for's (2, 3) row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((2, 3))
        for pair in x:
            h = h + F.stack(*[r * 2 for r in pair])
        return h


@program(*FULL_PAIRS)
class SumOfGeneratorOverTheStepsRow(HybridBlock):
    """``sum(r for r in pair)`` over a tensor for's (2, 3) row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for pair in x:
            h = h + sum(r for r in pair)
        return h


@program(*FULL_PAIRS)
class NestedForOverTheStepsRow(HybridBlock):
    """``for r in pair:`` inside ``for pair in x:`` (a tensor loop in a tensor loop)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for pair in x:
            for r in pair:
                h = h * 0.5 + r
        return h


@program(*FULL_PAIRS)
class ListOfTheStepsRow(HybridBlock):
    """``a, b = list(pair)`` in a tensor for's step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for pair in x:
            a, b = list(pair)
            h = h + a * b
        return h


@program(*TIMES)
class ItemWriteOfALoopsFloat16Output(HybridBlock):
    """A float16 value a tensor loop computed, written into a float32 buffer."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.cast(x[0], "float16")
        for row in x:
            h = h * 0.5 + F.cast(row, "float16")
        outputs = F.zeros_like(x)
        outputs[0] = h
        return outputs


@program(*TIMES)
class ItemWriteOfATensorIfsInt32Output(HybridBlock):
    """An int32 value a tensor if chose, written into a float32 buffer."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            k = F.cast(x[1] * 10, "int32")
        else:
            k = F.cast(x[2] * 10, "int32")
        outputs = F.zeros_like(x)
        outputs[3] = k
        return outputs


@program(*ROWS)
class HelperAppendsToAnAnnotatedStepList(HybridBlock):
    """``parts: list = [row]`` (annotated) then a helper appends, in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            parts: list = [row]
            add_to(parts, h)
            h = F.tanh(parts[0] + parts[1])
        return h


@program(*ROWS)
class EvalInTensorIfBranchReadsAnOuterVariable(HybridBlock):
    """``g = eval("h * 2")`` in a tensor if's branch, ``h`` named nowhere else in it."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        s = F.sum(h)
        if s > 0:
            g = eval("h * 2")
        else:
            g = s - 1
        return g


@program(*ROWS)
class EvalInTensorLoopReadsAnOuterVariable(HybridBlock):
    """``acc = acc + eval("w")`` in a tensor for, ``w`` assigned only before the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        w = F.sum(x, axis=0) * 0.5
        acc = F.zeros((3,))
        for row in x:
            acc = acc + row * eval("w")
        return acc


@program(*ROWS)
class ListAugmentedInTensorLoop(HybridBlock):
    """``outs += [row * 2]`` in a tensor for (Python's extend)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [F.zeros((3,))]
        for row in x:
            outs += [row * 2]
        return F.stack(*outs).sum(axis=0)


@program(*ROWS)
class ListRebuiltInTensorLoop(HybridBlock):
    """``outs = outs + [row]`` in a tensor for: a list growing each step."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [F.zeros((3,))]
        for row in x:
            outs = outs + [row]
        return F.stack(*outs).sum(axis=0)


@program(*ROWS)
class TupleCarryRebuiltInTensorLoop(HybridBlock):
    """``state = (h, c)`` rebuilt each step (same structure), unpacked after."""

    @autograph
    def hybrid_forward(self, F, x):
        state = (F.zeros((3,)), F.ones((3,)))
        for row in x:
            h, c = state
            c = c * 0.5 + row
            state = (F.tanh(c) + h * 0.1, c)
        h, c = state
        return h + c
