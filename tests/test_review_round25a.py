"""Round 25ra: a hostile review of round 25c's conversions, ``for a, b in x`` (and every loop
unpacking its items now running as a converted for), ``outputs[t] = h`` and a helper
appending to the step's list (``hostile_programs25ra.py``). Each program equals plain Python
on NDArrays (the oracle), eagerly and hybridized, or is refused at the user's line."""
import mxnet as mx
import numpy as np
import pytest

import gluon_cf

import hostile_harness
import hostile_programs25ra as programs

FILES = [programs.__file__]
_classified = hostile_harness.cached_classifier(programs.PROGRAMS, FILES, export=False)

# item writes: plain MXNet refuses them under autograd, so they are compared unrecorded
WRITES = [c for c in programs.PROGRAMS if c.__name__.startswith("ItemWrite")]
WRITES_CONVERTED = {programs.ItemWriteNegativeAndStepped, programs.ItemWriteNumbersIntoInt32,
                    programs.ItemWriteOfACollectedList,   # (round 30ag: Python's, by length)
                    programs.ItemWriteOfThePreviousRow, programs.ItemWriteOfANumpyBuffer,
                    programs.ItemWritesThenALayer}
REFUSED = {programs.UnpackTargetIsTheIterable, programs.UnpackReturnInsidePause,
           programs.HelperAppendsToTheStepsListStoredInSelf,
           programs.HelperAppendsToTheStepsListKeptGlobally, programs.HelperAppendsToACopy,
           programs.HelperAppendsToARebindingOfAnOuterList,
           programs.HelperAppendsToTheStepsListReadAfter}
# a name an empty loop left unbound, read: refused eagerly too (Python's NameError would be
# caught by the program's except; noted, left)
REFUSED_EAGERLY = {programs.UnpackEmptyThenNameUnbound}


@pytest.mark.parametrize("block_class", [c for c in programs.PROGRAMS if c not in WRITES] +
                         [programs.ItemWriteNegativeAndStepped],
                         ids=lambda c: c.__name__)
def test_program_equals_its_oracle_or_is_refused_at_its_line(block_class):
    """Recorded, values and gradients (an item write's against its oracle's)."""
    hostile_harness.assert_kinds(_classified(block_class), block_class in REFUSED_EAGERLY,
                                 block_class in REFUSED)


@pytest.mark.parametrize("block_class", WRITES, ids=lambda c: c.__name__)
def test_item_writes_equal_plain_python_or_are_refused_at_the_line(block_class):
    """Unrecorded (plain MXNet's in-place write), eager and hybridized: the value of plain
    Python, or (hybridized) an AutographError at the user's line. A helper returning or
    keeping the array (``outputs = same(y)``, ``view = same(outputs)``, ``self.keep(
    outputs)``) was silently the graph's new array where plain Python's write reached the
    other name too; a value of another dtype was MXNet's concat error."""
    hostile_harness.assert_unrecorded_write(block_class, programs.PROGRAMS[block_class], FILES,
                                            block_class in WRITES_CONVERTED)


@pytest.mark.parametrize("block_class,written,holder", [
    (programs.ItemWriteThroughHelperAlias, "outputs[0] = x[1] * 2", "outputs = same(y)"),
    (programs.ItemWriteAfterHelperKeeps, "outputs[0] = x[1] * 2", "view = same(outputs)"),
    (programs.ItemWriteAfterMethodKeeps, "outputs[1] = x[0] * 3", "self.keep(outputs)")],
    ids=lambda v: getattr(v, "__name__", None))
def test_an_item_write_after_a_call_given_or_binding_the_array_names_the_call(
        block_class, written, holder):
    err = hostile_harness.hybridized_error(block_class, programs.TIMES[0][0])
    line = hostile_harness.line_in(programs.__file__, "        " + written, block_class)
    call = hostile_harness.line_in(programs.__file__, "        " + holder, block_class)
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    assert str(err).startswith(
        f"{programs.__file__}:{line}: {written}: on an NDArray this assignment changes the "
        f"array in place, and 'outputs' may hold an array something else holds too: a call "
        f"may return or keep it ({programs.__file__}:{call}: {holder})"), err


def test_an_item_write_of_another_dtype_says_to_cast():
    err = hostile_harness.hybridized_error(programs.ItemWriteOfAnotherDtype,
                                           programs.TIMES[0][0])
    text = 'outputs[0] = F.cast(x[1] * 10, "int32")'
    line = hostile_harness.line_in(programs.__file__, text, programs.ItemWriteOfAnotherDtype)
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    assert str(err).startswith(
        f"{programs.__file__}:{line}: {text}: this assigns an item of a tensor while "
        f"hybridizing, but its value is int32 and the array float32 (an NDArray casts the "
        f"value: write F.cast(value, 'float32'))"), err


def test_a_return_inside_a_with_in_a_loop_is_computed_inside_it():
    """``with autograd.pause(): return h + v * 3`` in a loop over a Python list: the return
    (a flag, its value read after the loop) was computed outside the pause, recorded: a
    gradient where plain Python gives none. It is computed where it returns."""
    net = hostile_harness._make(programs.UnpackReturnInsidePause)
    x = mx.nd.array(programs.PAIRS[0][0])
    x.attach_grad()
    with mx.autograd.record():
        y = net(x) + x[0, 0, 0]
    y.backward()
    want = np.zeros_like(programs.PAIRS[0][0])
    want[0, 0, 0] = 3.0          # (h = x[0, 0] * 2, and the + x[0, 0, 0]; v's none)
    np.testing.assert_allclose(x.grad.asnumpy(), want)
