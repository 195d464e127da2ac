"""Hostile round 29h (issue 24 item 5): the mistakes people make while porting, inside tensor
loops and ``if``s: a missing dict key, an attribute the block lacks, a helper called with the
wrong arguments, an index past the rows, a body whose shapes disagree, a cell given the wrong
state list, ``boolean_mask`` given a mask of another length. Hybridized, each is Python's own
error (as eagerly) or an error naming the user's file and line, never a library internal."""
import numpy as np
import pytest
from mxnet.gluon import HybridBlock, nn, rnn

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats
ROWS = ([rand(4, 3, seed=2991)], [rand(2, 3, seed=2992)])


def two_args(h, row):
    return h + row


@program(*ROWS)
class MissingDictKeyInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0]}
        for row in x:
            state = {"h": state["hidden"] + row}
        return state["h"]


@program(*ROWS)
class MissingAttributeInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for row in x:
            h = h * self.decay + row
        return h


@program(*ROWS)
class HelperCalledWithTooFewArguments(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for row in x:
            h = two_args(h)
        return h


@program(*ROWS)
class IndexPastTheRowsAfterLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for row in x:
            h = h + row
        return h + x[6]


@program(*ROWS)
class BodyShapesDisagree(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((2,))
        for row in x:
            h = F.elemwise_add(h, row)
        return h


@program(*ROWS)
class CellGivenStateNotInList(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.LSTMCell(3, input_size=3)

    @autograph
    def hybrid_forward(self, F, x):
        h, c = F.zeros((1, 3)), F.zeros((1, 3))
        for row in x:
            out, (h, c) = self.cell(row.reshape((1, -1)), h)
        return h


@program([rand(4, 3, seed=2993), floats(1, 0, 1)], [rand(2, 3, seed=2994), floats(1, 1, 1)])
class MaskOfAnotherLengthInWhile(HybridBlock):
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, mask):
        h = F.zeros((1, 3))
        i = F.zeros((1,))
        while F.sum(i) < 2:
            h = h + F.sum(F.contrib.boolean_mask(x, mask), axis=0, keepdims=True)
            i = i + 1
        return h


@program(*ROWS)
class DenseOfWrongInUnitsInLoop(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=5)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1, 3))
        for row in x:
            h = self.fc(h) + row
        return h


@program(*ROWS)
class GruCellGivenTupleOfTwoStates(HybridBlock):
    """A GRUCell (one state) given ``[h, h]`` (an LSTM's two)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.GRUCell(3, input_size=3)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1, 3))
        for row in x:
            out, (h,) = self.cell(row.reshape((1, -1)), [h, h])
        return h


@program(*ROWS)
class UnpackOneOutputIntoTwo(HybridBlock):
    """``a, b = F.split(row, num_outputs=3)`` (three outputs into two names)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1,))
        for row in x:
            a, b = F.split(row, num_outputs=3, axis=0)
            h = h + a + b
        return h


@program(*ROWS)
class CallingAnArrayInLoop(HybridBlock):
    """``h = h(row)``: an array called as a function."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for row in x:
            h = h(row)
        return h


@program(*ROWS)
class StringPlusTensorInLoop(HybridBlock):
    """``name = "step" + h``: a string added to an array."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for row in x:
            h = "step" + h
        return h


@program(*ROWS)
class WrongAxisReduceInLoop(HybridBlock):
    """``F.sum(row, axis=2)`` of a 1-D row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1,))
        for row in x:
            h = h + F.sum(row, axis=2)
        return h


@program(*ROWS)
class TakeWithFloatIndexOutOfRangeInWhile(HybridBlock):
    """``F.take(x, idx)`` with ``idx`` past the rows (MXNet clips: a value, as eagerly)."""

    @autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = F.zeros((1, 3))
        while F.sum(i) < 3:
            h = h + F.take(x, i + 5)
            i = i + 1
        return h


@program(*ROWS)
class IntPlusListInLoop(HybridBlock):
    """``outs + 1`` of a collected list: Python's TypeError, naming no internal type."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row)
        return outs + 1


@program(*ROWS)
class IntPlusListReflected(HybridBlock):
    """``2 + outs`` of a collected list."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row)
        return 2 + outs


@program(*ROWS)
class LenOfTensorInWhile(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        i = F.zeros((1,))
        while F.sum(i) < len(h):
            h = h * 2
            i = i + 1
        return h


@program(*ROWS)
class FloatOfTensorInIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for row in x:
            if float(F.sum(row)) > 0:
                h = h + row
        return h


@program(*ROWS)
class IntIndexFromTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        k = F.argmax(F.sum(x, axis=1), axis=0)
        return x[int(k.asscalar())]


@program(*ROWS)
class ListIndexByTensorAfterLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = [x[0], x[0] * 2]
        k = F.sum(x) > 0
        return outs[k]


@program(*ROWS)
class ReturnNoneFromOneBranch(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for row in x:
            h = h + row
        if F.sum(h) > 0:
            return h
        return None


@program(*ROWS)
class KeywordArgToCellWrong(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.GRUCell(3, input_size=3)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1, 3))
        for row in x:
            out, (h,) = self.cell(row.reshape((1, -1)), states=[h])
        return h


@program(*ROWS)
class DenseGivenTwoArgs(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1, 3))
        for row in x:
            h = self.fc(h, row)
        return h


@program(*ROWS)
class NumpyOnTensorInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for row in x:
            h = h + np.tanh(row)
        return h


def collect(F, x):
    outs = []
    for row in x:
        outs.append(row * 2)
    return outs


@program(*ROWS)
class ListTimesFloat(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = collect(F, x)
        return F.stack(*(outs * 1.5))


@program(*ROWS)
class ListIndexFloat(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = collect(F, x)
        return outs[1.5]


@program(*ROWS)
class AppendTwoArgs(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row, row)
        return F.stack(*outs)


@program(*ROWS)
class ListPlusTuple(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = collect(F, x)
        return F.stack(*(outs + (x[0],)))


@program(*ROWS)
class ListTimesBool(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = collect(F, x)
        return F.stack(*(outs * True))


@program(*ROWS)
class ListStrIndex(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = collect(F, x)
        return outs["a"]


@program(*ROWS)
class UnpackCollectedIntoTwo(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = collect(F, x)
        a, b = outs
        return a + b


_classified = hostile_harness.cached_classifier(PROGRAMS, [__file__], export=False)


@pytest.mark.parametrize("block_class", list(PROGRAMS), ids=lambda c: c.__name__)
def test_mistake_is_pythons_error_or_names_the_users_line(block_class):
    result = _classified(block_class)
    assert not hostile_harness.not_equal_or_refused(result), result


def test_a_cell_given_one_array_for_its_states_names_the_users_line():
    """Gluon's LSTMCell reads ``states[1]``; given one array, hybridized that is MXNet's
    ``Symbol[1]`` (an output past the symbol's one), whose bare ``IndexError()`` named no
    line (eagerly MXNet's shape error). Now an IndexError at the user's call."""
    cls = CellGivenStateNotInList
    error = hostile_harness.hybridized_error(cls, *PROGRAMS[cls][0])
    line = hostile_harness.line_in(__file__, "out, (h, c) = self.cell(", cls)
    assert type(error) is IndexError, repr(error)
    assert str(error).startswith("%s:%d: out, (h, c) = self.cell(" % (__file__, line)), error
    assert "an RNN cell's states [h, c]" in str(error)


def test_a_tensor_called_as_a_function_names_the_users_line():
    """``h = h(row)``: eagerly Python's TypeError; hybridized MXNet's Symbol is callable
    (it composes a graph into the symbol) and the call failed as a HashedSymbolError
    "this hashes a tensor (a set's item, a dict's key)", which the code does not do. Now a
    TypeError (an AutographError) at the call saying a tensor was called."""
    cls = CallingAnArrayInLoop
    error = hostile_harness.hybridized_error(cls, *PROGRAMS[cls][0])
    line = hostile_harness.line_in(__file__, "h = h(row)\n", cls)
    assert isinstance(error, TypeError) and isinstance(error, gluon_cf.AutographError), \
        repr(error)
    assert str(error).startswith("%s:%d: h = h(row): this calls a tensor as a function"
                                 % (__file__, line)), error


@pytest.mark.parametrize("block_class, text", [
    (IntPlusListInLoop, 'can only concatenate list (not "int") to list'),
    (IntPlusListReflected, "unsupported operand type(s) for +: 'int' and 'list'"),
    (ListTimesFloat, "can't multiply sequence by non-int of type 'float'")])
def test_a_collected_list_plus_a_number_is_pythons_type_error(block_class, text):
    """Hybridized, ``outs + 1`` of a list a tensor loop collected was "unsupported operand
    type(s) for +: 'StepList' and 'int'" (``outs * 1.5`` alike), naming gluon_cf's own type:
    now Python's words; ``outs * True`` is the list, as Python's (was refused alike)."""
    error = hostile_harness.hybridized_error(block_class, *PROGRAMS[block_class][0])
    assert type(error) is TypeError and str(error) == text, repr(error)
