"""Round 26ra: a hostile review of autograph round 26a (``hostile_programs26ra.py``): item
writes of the new index forms, helpers' item writes on the step's containers, reads of the
frame's variables and a step reading its own list. Each program equals plain Python on
NDArrays (the oracle), eagerly and hybridized, values and gradients (item writes unrecorded,
as plain MXNet refuses them under autograd), or is refused at the user's line."""
import pytest

import gluon_cf

import hostile_harness
import hostile_programs26ra as programs

FILES = [programs.__file__]
_classified = hostile_harness.cached_classifier(programs.PROGRAMS, FILES, export=False)

# (an NDArray's IndexError, hybridized too: test_too_many_indices_...)
TOO_MANY = [programs.ItemWriteOneDimensionalWithTrailingColon,
            programs.ItemWriteTwoTrailingColonsOnTwoAxes]
# (a helper reading its caller's frame: refused eagerly too, test_a_callers_frame_...)
CALLERS = [programs.FrameReadByACallersFrameAfterLoop, programs.ItemWriteAliasByACallersFrame]
WRITES = [c for c in programs.PROGRAMS if c.__name__.startswith("ItemWrite") and
          c not in TOO_MANY + CALLERS]
WRITES_REFUSED = {
    programs.ItemWriteViewReadBeforeOverwrite,
    programs.ItemWriteSliceViewReadBeforeOverwrite,
    programs.ItemWriteFloat16BufferOfAFloat32Value,
    programs.ItemWriteOfAOneByOneIntoAOneDimensionalItem,
    programs.ItemWriteThroughAnItemOfAnItem, programs.ItemWriteAliasOfTheFramesDictByName,
    programs.ItemWriteAliasByEvalWithNone, programs.ItemWriteAliasByBuiltinsVars,
    programs.ItemWriteAfterAComprehensionOfRows}
EQUAL = {programs.FrameReadByANestedFunctionAfterLoop,
         programs.StepListWrittenThenReadAfterTheLoop}


@pytest.mark.parametrize("block_class", [c for c in programs.PROGRAMS
                                        if not c.__name__.startswith("ItemWrite") and
                                        c not in CALLERS],
                         ids=lambda c: c.__name__)
def test_program_equals_its_oracle_or_is_refused_at_its_line(block_class):
    """Recorded, values and gradients. ``L = locals`` ... ``L()["g"]`` or ``eval("g", None,
    None)`` after a tensor for (FrameReadThroughAnAliasOfLocalsAfterLoop,
    FrameReadThroughEvalWithNoneAfterLoop) read g's value before the loop, eagerly and
    hybridized, and so were ``getattr(sys._getframe(), "f_locals")``,
    ``inspect.getargvalues(inspect.currentframe())`` and ``builtins.locals()``; ``V()["h"]``
    (``V = vars``) in a tensor if's branch was a KeyError; a helper's ``d[row] = v`` on the
    step's dict was a TypeError naming no line."""
    # (a nested function's sys._getframe(1).f_locals: refused eagerly too, at the read)
    hostile_harness.assert_kinds(
        _classified(block_class), refused=block_class not in EQUAL,
        refused_eagerly=block_class is programs.FrameReadByANestedFunctionsCallerFrame)


@pytest.mark.parametrize("block_class", WRITES, ids=lambda c: c.__name__)
def test_item_writes_equal_plain_python_or_are_refused_at_the_line(block_class):
    """Unrecorded, eager and hybridized. ``scores[t, :] = v`` on a 1-D array and
    a write after ``keep = L()["outputs"]`` (``L = locals``) or
    ``keep = eval("outputs", None)`` (or ``builtins.vars()``) was silently the graph's new
    array."""
    hostile_harness.assert_unrecorded_write(block_class, programs.PROGRAMS[block_class], FILES,
                                            block_class not in WRITES_REFUSED)


@pytest.mark.parametrize("block_class,written,count", [
    (TOO_MANY[0], "scores[1, :] = F.sum(x[1])", 2), (TOO_MANY[1], "outputs[2, :, :] = x[0]", 3)],
    ids=lambda v: getattr(v, "__name__", None))
def test_too_many_indices_is_an_index_error_at_the_line(block_class, written, count):
    """``scores[t, :] = v`` on a 1-D array, ``outputs[t, :, :] = h`` on a 2-D one: an
    NDArray's IndexError (too many indices) eagerly; hybridized they were values (the
    trailing ':' dropped before the indices were counted)."""
    for hybridize in (False, True):
        net = hostile_harness._make(block_class)
        if hybridize:
            net.hybridize()
        err = hostile_harness._outcome(lambda: hostile_harness.run_with_gradients(
            net, programs.TIMES[0], record=False))[1]
        line = hostile_harness.line_in(programs.__file__, written, block_class)
        where = f"{programs.__file__}:{line}: {written}: " if hybridize else ""
        assert isinstance(err, IndexError) and str(err) == (
            f"{where}too many indices ({count}) for array with {count - 1} dimensions"), err


def test_a_tensor_key_of_a_dict_is_refused_at_its_line():
    block_class = programs.HelperWritesAStepDictWithATensorKey
    err = hostile_harness.hybridized_error(block_class, programs.ROWS[0][0])
    line = hostile_harness.line_in(programs.__file__, "d[k] = v", block_class)
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    assert str(err).startswith(f"{programs.__file__}:{line}: d[k] = v: this assigns an item "
                               f"of a dict keyed by a tensor while hybridizing"), err


@pytest.mark.parametrize("block_class", CALLERS, ids=lambda c: c.__name__)
def test_a_callers_frame_read_of_converted_code_is_refused_at_the_line(block_class):
    """``sys._getframe(1).f_locals["g"]`` in a helper called by
    converted code, after a tensor loop assigning g or before a write of ``outputs``, was
    silently g's value before the loop (eagerly too) or the graph's new array: converted
    code keeps a variable as written only where its own code reads it. Refused, eagerly
    and hybridized, at the read."""
    line = hostile_harness.line_in(programs.__file__, "def peek_caller") + 1
    arrays = (programs.TIMES if "ItemWrite" in block_class.__name__ else programs.ROWS)[0]
    for hybridize in (False, True):
        net = hostile_harness._make(block_class)
        if hybridize:
            net.hybridize()
        err = hostile_harness._outcome(lambda: hostile_harness.run_with_gradients(
            net, arrays, record=False))[1]
        assert isinstance(err, gluon_cf.AutographError), repr(err)
        assert str(err).startswith(
            f"{programs.__file__}:{line}: return sys._getframe(1).f_locals[name]: this reads "
            f"the variables of 'hybrid_forward' (at {programs.__file__}:"), err
