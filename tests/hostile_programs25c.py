"""Issue 24 item 1, round 25c: the shapes decoders ported from MXNet/TensorFlow write that were
refused at the user's line: ``for a, b in x`` unpacking each row of a tensor (nested targets,
1-D rows, with break, continue, return, tensor ifs, appends, reversed, nested loops, over a
list a loop collected), and its variants that stay refused. ``PROGRAMS`` maps each block class
to its input lists (0, 1 and several rows where legal); the oracle is the plain Python
function on NDArrays (``hybrid_forward.__wrapped__``)."""
import numpy as np
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

# rows of two items of shape (3,): 4, 1 and 0 rows
PAIRS = ([rand(4, 2, 3, seed=250)], [rand(1, 2, 3, seed=251) + 1], [rand(3, 2, 3, seed=252)],
         [np.zeros((0, 2, 3), np.float32)])
# rows of two numbers: items of shape (1,), as an NDArray's 1-D row yields them
COLUMNS = ([rand(4, 2, seed=253)], [rand(1, 2, seed=254) * 2], [np.zeros((0, 2), np.float32)])
NESTED = ([rand(3, 2, 2, 3, seed=255)], [rand(1, 2, 2, 3, seed=256)])
TRIPLES = ([rand(4, 3, 3, seed=257)], [rand(2, 3, 3, seed=258)])
STATES = ([floats(1.0, 2.0)], [floats(5.0, 1.0)], [floats(-3.0, -2.0)], [floats(20.0, 4.0)])


@program(*PAIRS)
class UnpackEachRow(HybridBlock):
    """``for a, b in x``: an attention-style loop over (key, value) rows."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, b in x:
            h = F.tanh(h + a * b)
        return h


@program(*COLUMNS)
class UnpackEachRowOfNumbers(HybridBlock):
    """``for a, b in x`` over a (T, 2) tensor: each item of shape (1,)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1,))
        for a, b in x:
            h = h * 0.5 + a * b - b
        return h


@program(*NESTED)
class UnpackNestedTargets(HybridBlock):
    """``for (a, b), (c, d) in x`` over a (T, 2, 2, 3) tensor."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0, 0, 0] * 0
        for (a, b), (c, d) in x:
            h = F.tanh(h + a * b - c * 0.5 + d)
        return h


@program(*PAIRS)
class UnpackWithTensorBreak(HybridBlock):
    """A tensor ``break`` in the unpacking loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, b in x:
            h = F.tanh(h + a * b)
            if F.sum(h) > 0.5:
                break
        return h


@program(*PAIRS)
class UnpackWithContinueAndIf(HybridBlock):
    """``continue`` and an if/else on a tensor in the body."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, b in x:
            if F.sum(a) < -0.5:
                continue
            if F.sum(b) > 0:
                h = h + a
            else:
                h = h - b * 0.5
        return h


@program(*PAIRS)
class UnpackWithReturn(HybridBlock):
    """A ``return`` under a tensor if reading an unpacked name with a value before the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        a = h + 1
        for a, b in x:
            h = h + b
            if F.sum(h) > 1:
                return h * a
        return h - a


@program(*PAIRS)
class UnpackAndCollect(HybridBlock):
    """Appending per step to a list that holds an item before the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        outs = [h]
        for a, b in x:
            h = F.tanh(h + a * b)
            outs.append(h + a)
        return F.stack(*outs)


@program(*PAIRS)
class UnpackedNamesReadAfter(HybridBlock):
    """``a`` (with a value before the loop) read after it: the last row's, or the value
    before where no row ran."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        a = h + 1
        for a, b in x:
            h = F.tanh(h + a * b)
        return h + a


@program(*PAIRS)
class UnpackInsideUnpack(HybridBlock):
    """Two nested unpacking loops over the same tensor."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, b in x:
            for c, d in x:
                h = F.tanh(h + a * d - b * c)
        return h


@program(*PAIRS)
class UnpackReversedRows(HybridBlock):
    """``for a, b in reversed(x)``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, b in reversed(x):
            h = F.tanh(h * 0.5 + a - b)
        return h


@program(*PAIRS)
class UnpackIntoCarriedNames(HybridBlock):
    """The target names are the loop's state (``for h, b in x``; ``for b, a in x``)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        a = h + 1
        for h, b in x:
            h = h * b + a
            a = a * 0.5 + h
        return a + h


@program(*PAIRS)
class UnpackCollectedRows(HybridBlock):
    """``for a, b in outs`` over the list a tensor for collected."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row * 2)
        h = F.zeros((3,))
        for a, b in outs:
            h = h + a - b
        return h


@program(*STATES)
class UnpackWhileCollectedRows(HybridBlock):
    """``for a, b in outs`` over a while's list (which may hold no item)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            outs.append(F.stack(h, h * 2))
        acc = x * 0
        for a, b in outs:
            acc = acc + a - b
        return acc


class _Cell(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3, flatten=False)


@program(*PAIRS[:3])
class UnpackDecoderWithLayer(_Cell):
    """A decoder step with a Dense layer over (input, gate) rows, its outputs stacked."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1, 3))
        outs = []
        for inp, gate in x:
            h = F.tanh(self.fc(h + inp.reshape((1, 3)))) * F.sigmoid(gate)
            outs.append(h)
        return F.concat(*outs, dim=0)


# ---- a helper changing a list the step made (item 5) ------------------------------------

def _add(items, v):
    items.append(v)


def _push_and_count(items, v):
    items.append(v)
    return len(items)


ROWS = ([rand(4, 3, seed=259)], [rand(1, 3, seed=260) * 2], [np.zeros((0, 3), np.float32)])


@program(*ROWS)
class HelperAppendsToTheStepsList(HybridBlock):
    """``parts = [row]; add(parts, h)``: a helper appends to a list the step made."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            parts = [row]
            _add(parts, h * 2)
            h = F.add_n(*parts) * 0.5
        return h


@program(*STATES)
class HelperAppendsToTheWhileStepsList(HybridBlock):
    """In a tensor while's step: ``parts = list()`` then helpers append (one measures it)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            parts = list()
            n = _push_and_count(parts, h)
            _add(parts, h * n)
            h = F.abs(F.add_n(*parts)) + 1
        return h


@program(*ROWS)
class HelperAppendsToTheStepsCarriedList(HybridBlock):
    """The step's list is a loop variable (a list of two arrays before, in and after)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        parts = [h, h + 1]
        for row in x:
            parts = [row]
            _add(parts, h)
            h = parts[0] + parts[1] * 0.5
        return h + parts[1]


# ---- variants that stay refused at the user's line ------------------------------------

@program(*TRIPLES)
class UnpackTooFewNames(HybridBlock):
    """Rows of three items unpacked into two: Python's ValueError where a row exists."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0, 0] * 0
        for a, b in x:
            h = h + a * b
        return h


@program(*PAIRS[:3])
class UnpackedNameWithoutValueReadAfter(HybridBlock):
    """``a`` read after the loop with no value before it (a loop of no step leaves none)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, b in x:
            h = F.tanh(h + a * b)
        return h + a


@program(*PAIRS[:3])
class UnpackStarredTarget(HybridBlock):
    """``for a, *rest in x``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a, *rest in x:
            h = h + a
        return h


@program(*PAIRS[:3])
class UnpackAppendAndBreak(HybridBlock):
    """Appending and a tensor break in a for over a tensor (write a while)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [x[0, 0]]
        for a, b in x:
            outs.append(a * b)
            if F.sum(a) > 0:
                break
        return F.stack(*outs)


@program(*STATES)
class EnumerateOfWhileList(HybridBlock):
    """``enumerate(outs)`` of a while's list: the count only the run knows (item 2)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            outs.append(h)
        acc = x * 0
        for i, o in enumerate(outs):
            acc = acc + o * i
        return acc


@program(*ROWS[:2])
class HelperAppendsToTheStepsListUnderTensorIf(HybridBlock):
    """The helper's append under a tensor if inside the step: that if's graph is traced
    once, whatever its condition (the list is the step's, not the if's)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            parts = [row]
            if F.sum(row) > 0:
                _add(parts, h * 2)
            h = F.add_n(*parts) * 0.5
        return h


@program(*ROWS[:2])
class HelperAppendsToAListMadeBeforeTheLoop(HybridBlock):
    """A list made before the loop, appended to by a helper in each step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        parts = [h]
        for row in x:
            _add(parts, row)
            h = h + row
        return h + parts[0]


# ---- a ternary of numbers on a tensor test (item 6: stays refused, saying what to write) --

@program(*STATES)
class TernaryOfTwoNumbers(HybridBlock):
    """``k = 2 if F.sum(x) > 0 else 3``: an int in Python, only an array in a graph."""

    @autograph
    def hybrid_forward(self, F, x):
        k = 2 if F.sum(x) > 0 else 3
        return x * k


@program(*STATES)
class TernaryOfTwoNumbersAsTheMessageSays(HybridBlock):
    """The refusal's suggestion, written out: the choice as an array, used as one."""

    @autograph
    def hybrid_forward(self, F, x):
        k = F.where(F.sum(x) > 0, F.full((1,), 2), F.full((1,), 3))
        return x * k


# ---- nested unpacking of a tensor's rows (a Symbol yields itself once, not its rows) -----

@program(*PAIRS[:3])
class EnumerateWithNestedTarget(HybridBlock):
    """``for i, (a, b) in enumerate(x)``: the inner target unpacks a row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for i, (a, b) in enumerate(x):
            h = F.tanh(h + a * b * (i + 1))
        return h


@program(*PAIRS[:3])
class NestedUnpackingAssignment(HybridBlock):
    """``i, (a, b) = 2, x[0]``."""

    @autograph
    def hybrid_forward(self, F, x):
        i, (a, b) = 2, x[0]
        return a * b + i


@program(*PAIRS[:3])
class NestedUnpackingOfOneRow(HybridBlock):
    """``(a,), c = x[0:1], x[0]``: ``a`` is the one row of ``x[0:1]``, not ``x[0:1]``."""

    @autograph
    def hybrid_forward(self, F, x):
        (a,), c = x[0:1], x[0]
        return a * 2 + c


@program(*PAIRS[:3])
class NestedUnpackingInATensorStep(HybridBlock):
    """``(a, b), c = row, h`` in a tensor for: the step's row has no shape while traced."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            (a, b), c = row, h
            h = F.tanh(c + a * b)
        return h


# ---- rows of a preallocated array written by index (item 3: NOTE [autograph item
# assignment]); plain MXNet refuses the in-place write of a recorded array, so the oracle
# under autograd is the same loop collecting the rows (``oracle_where_plain_fails``) ----

TIMES = ([rand(3, 4, seed=261)], [rand(1, 4, seed=262)], [rand(4, 2, seed=263) * 2])
# (two rows or more: the oracles below concatenate the rows after the first)
TIMES2 = (TIMES[0], TIMES[2])


def _steps(F, x):
    h = x[0] * 0
    hs = []
    for t in range(len(x)):
        h = F.tanh(h * 0.5 + x[t] * (t + 1))
        hs.append(h)
    return hs


@program(*TIMES)
class PreallocatedRowsWrittenByIndex(HybridBlock):
    """PyTorch's ``outputs = zeros(T, H); for t in range(T): outputs[t] = h``."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        h = x[0] * 0
        for t in range(len(x)):
            h = F.tanh(h * 0.5 + x[t] * (t + 1))
            outputs[t] = h
        return outputs + x

    @staticmethod
    def oracle_where_plain_fails(net, F, x):
        return F.stack(*_steps(F, x)) + x


@program(*TIMES)
class PreallocatedRowsWrittenBySlice(HybridBlock):
    """``outputs[t:t + 1] = h.reshape((1, -1))``, the last row written first."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        h = x[0] * 0
        for t in range(len(x)):
            h = F.tanh(h * 0.5 + x[t] * (t + 1))
            outputs[len(x) - 1 - t:len(x) - t] = h.reshape((1, -1))
        return outputs * 2

    @staticmethod
    def oracle_where_plain_fails(net, F, x):
        return F.stack(*reversed(_steps(F, x))) * 2


@program(*TIMES2)
class PreallocatedColumnsAndNumbers(HybridBlock):
    """``outputs[:, 0] = s`` (a column), ``outputs[-1] = 1.5`` (a number fills a row) and a
    value broadcast along the row (``outputs[0] = x[0, 0:1]``)."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = x * 1
        outputs[0] = x[0, 0:1] * 3
        outputs[:, 0] = F.sum(x, axis=1)
        outputs[-1] = 1.5
        return outputs * x

    @staticmethod
    def oracle_where_plain_fails(net, F, x):
        rows = [F.broadcast_to(x[0, 0:1] * 3, shape=(x.shape[1],))] + \
            [x[k] * 1 for k in range(1, len(x))]
        out = F.stack(*rows)
        out = F.concat(F.sum(x, axis=1).reshape((-1, 1)), out[:, 1:], dim=1)
        out = F.concat(out[:-1], F.ones((1, x.shape[1])) * 1.5, dim=0)
        return out * x


@program(*TIMES)
class PreallocatedRowWrittenAtATensorIndex(HybridBlock):
    """``outputs[i] = h`` with ``i`` an array: refused (the index only the graph knows)."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        i = F.argmax(F.sum(x, axis=1), axis=0)
        outputs[i] = x[0]
        return outputs + x


@program(*TIMES2)
class PreallocatedRowsWithAnAlias(HybridBlock):
    """``keep = outputs`` then ``outputs[0] = ...``: the alias sees the change in Python."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        keep = outputs
        outputs[0] = x[0] * 2
        return keep + outputs

    @staticmethod
    def oracle_where_plain_fails(net, F, x):
        return F.zeros_like(x) + F.concat(x[0:1] * 2, F.zeros_like(x)[1:], dim=0)


@program(*TIMES2)
class PreallocatedRowWrittenInATensorLoop(HybridBlock):
    """``outputs[0] = outputs[0] + row`` in a tensor for: refused (a graph's loop)."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        for row in x:
            outputs[0] = outputs[0] + row
        return outputs * 2

    @staticmethod
    def oracle_where_plain_fails(net, F, x):
        return F.concat(F.sum(x, axis=0, keepdims=True), F.zeros_like(x)[1:], dim=0) * 2
