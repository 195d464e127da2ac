"""Round 26a: a hostile round on autograph (``hostile_programs26a.py``), first on session 25's
conversions (``for a, b in x``, ``outputs[t] = h`` and what may hold the array, helpers
changing the step's list, returns inside with/try in loops, try/else after jumps,
nonlocal/global loop targets), then decoders, closures, comprehensions, collected lists,
dtypes, ``del``, walrus and asserts. Each program equals plain Python on NDArrays (the
oracle), eagerly and hybridized, values and gradients, or is refused at the user's line."""
import pytest

import gluon_cf

import hostile_harness
import hostile_programs26a as programs

FILES = [programs.__file__]
_classified = hostile_harness.cached_classifier(programs.PROGRAMS, FILES, export=False)

# item writes: plain MXNet refuses them under autograd, so they are compared unrecorded
WRITES = [c for c in programs.PROGRAMS if c.__name__.startswith("ItemWrite")]
WRITES_CONVERTED = {
    programs.ItemWriteOfAOneDimensionalScore, programs.ItemWriteRowWithTrailingColon,
    programs.ItemWriteWithEllipsis, programs.ItemWriteThenReadSameLoop,
    programs.ItemWriteThenRebind, programs.ItemWriteIntoAnInputCopyViaIdentity,
    programs.ItemWriteAfterAStackedList, programs.ItemWriteOfAColumnOfAnotherBuffer,
    programs.ItemWriteInALoopOverRowsPython, programs.ItemWriteAfterInPlaceArithmetic,
    programs.ItemWriteTupleUnpackedBuffer, programs.ItemWriteOfSplitOutput,
    programs.ItemWriteOfAWhereResult, programs.ItemWriteAfterBroadcastToView,
    programs.ItemWriteSliceFromList, programs.ItemWriteAliasByAugmentedAssignOnAlias,
    programs.ItemWriteCaughtIndexError, programs.ItemWriteOneDimensionalSliceAndNegative,
    programs.ItemWriteMiddleAxisWithColons}
REFUSED = {
    programs.HelperAppendsToAListHeldByTheStepsList, programs.HelperAppendsToASliceCopy,
    programs.HelperAppendsToAnOuterListViaIf, programs.HelperAppendsToAnOuterListViaOr,
    programs.HelperAppendsToAWalrusBoundOuter, programs.HelperAppendsToStepListReboundInFor,
    programs.HelperAppendsToStepListReboundByUnpacking,
    programs.HelperAppendsToStepListReboundByWith, programs.ReturnInsideWithInTensorLoop,
    programs.NonlocalCounterInTensorLoopHelper, programs.GlobalLoopTargetInTensorLoop,
    programs.SliceOfCollectedListStacked,
    # (PopOfCollectedList, InsertIntoCollectedList: Python's since round 29ag, the input
    # shapes giving the length; DelOfCollectedItem, ItemAssignOfCollectedListThenStack since
    # round 30ag)
    programs.AssertOnATensorInsideLoop,
    programs.MethodSideEffectListInTensorLoop, programs.ReturnInsideTryFinallyInTensorLoop,
    programs.NonlocalTargetOfTensorLoopInHelper,
    programs.GlobalCounterInPythonLoopOverTensorRows, programs.HelperSetsAnItemOfAnOuterList,
    programs.HelperSetsAnItemOfTheStepsListUnderTensorIf, programs.ListOfTuplesCollected,
    programs.RangeOverRowsByIndex, programs.DictCarryWithNewKeyInLoop,
    programs.MethodSideEffectCounterInTensorIf, programs.WhileWithListOfTuplesAndStack,
    programs.HelperDeletesAnItemOfTheStepsList, programs.HelperSetsAnItemOfAListHeldByTheStepsList,
    programs.HelperSetsAnItemReturnedByAnotherHelper,
    programs.NonlocalTargetWithTensorBreakOverList, programs.LocalTargetWithTensorBreakOverList,
    programs.VariableReadOnlyThroughEvalAfterLoop,
    programs.VariableReadOnlyThroughLocalsAfterLoop,
    programs.EnumerateTensorBreakBothReadAfter, programs.ZipOfRowsAndShiftedRows,
    programs.PairsListLoopWithTensorContinueAndAppend, programs.CarryChangesDtypeInTensorLoop,
    programs.TensorIfBranchesOfTwoDtypes, programs.EvalReadsThePreviousStepsValue,
    programs.FunctionsDefinedInTensorIfBranches, programs.BooleanMaskPerRowInTensorLoop,
    programs.ComprehensionOverTheStepsRow, programs.SumOfGeneratorOverTheStepsRow,
    programs.ListOfTheStepsRow, programs.EvalInTensorIfBranchReadsAnOuterVariable,
    programs.EvalInTensorLoopReadsAnOuterVariable, programs.ListAugmentedInTensorLoop,
    programs.ListRebuiltInTensorLoop}


@pytest.mark.parametrize("block_class", [c for c in programs.PROGRAMS if c not in WRITES],
                         ids=lambda c: c.__name__)
def test_program_equals_its_oracle_or_is_refused_at_its_line(block_class):
    """Recorded, values and gradients. A helper's ``items[0] = v`` or ``d[k] = v`` of a
    container the step made (HelperSetsAnItemOfTheStepsList, HelperAppendsToDictOfStep)
    converts, as its ``append`` does (it was refused as a side effect), and a helper's
    append to ``parts: list = [row]`` (HelperAppendsToAnAnnotatedStepList). A variable a tensor
    loop or if assigns, read after it only by ``eval("g")``, ``locals()["g"]`` or
    ``vars()["g"]`` (VariableReadOnlyThrough...) was not carried out of it: silently its
    value before, eagerly and hybridized; read by ``eval("g")`` in the next step
    (EvalReadsThePreviousStepsValue), or ``eval("h")`` in an if's branch or a loop's step
    (EvalIn...ReadsAnOuterVariable), a NameError from the converted branch or step: such an
    if or loop runs as Python (refused on a tensor condition, at its line)."""
    hostile_harness.assert_kinds(_classified(block_class), refused=block_class in REFUSED)


@pytest.mark.parametrize("block_class", WRITES, ids=lambda c: c.__name__)
def test_item_writes_equal_plain_python_or_are_refused_at_the_line(block_class):
    """Unrecorded (plain MXNet's in-place write), eager and hybridized: the value of plain
    Python, or (hybridized) an AutographError at the user's line. ``keep =
    locals()["outputs"]`` (or ``vars()``) before a write was silently the graph's new array
    where plain Python's ``keep`` saw the write; ``scores[t] = F.sum(v)`` into a 1-D array,
    ``outputs[t, :] = h`` and ``outputs[..., t] = s`` were refused."""
    hostile_harness.assert_unrecorded_write(block_class, programs.PROGRAMS[block_class], FILES,
                                            block_class in WRITES_CONVERTED)


def _line(text, block_class):
    return hostile_harness.line_in(programs.__file__, "        " + text, block_class)


@pytest.mark.parametrize("block_class,written,holder", [
    (programs.ItemWriteAliasByExec, "outputs[0] = x[1] + 5", 'keep = locals()["outputs"]'),
    (programs.ItemWriteAliasByVars, "outputs[1] = x[2] - 5", 'keep = vars()["outputs"]'),
    (programs.ItemWriteAugmentedAfterLocals, "outputs += x", 'keep = locals()["outputs"]')],
    ids=lambda v: getattr(v, "__name__", None))
def test_a_write_after_reading_the_frames_dict_names_that_line(block_class, written, holder):
    """NOTE [a frame's dict shares every variable]: ``keep = locals()["outputs"]`` binds
    ``keep`` to the array with no name of it in the syntax."""
    err = hostile_harness.hybridized_error(block_class, programs.TIMES[0][0])
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    text = str(err)
    assert text.startswith(f"{programs.__file__}:{_line(written, block_class)}: {written}: "
                           f"on an NDArray this "), text
    assert f"'outputs' may hold an array something else holds too ({programs.__file__}:" \
        f"{_line(holder, block_class)}: {holder})" in text, text


def test_a_step_reading_the_list_it_appends_to_is_told_so():
    """``outs.append(outs[-1] * 0.5 + row)`` in a tensor for: the message said the loop
    "changes the list 'outs' from outside it" and to "append once per step", which it
    does; it names the read."""
    block_class = programs.SliceOfCollectedListStacked
    err = hostile_harness.hybridized_error(block_class, programs.ROWS[0][0])
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    assert str(err).startswith(
        f"{programs.__file__}:{_line('for row in x:', block_class)}: for row in x: this for "
        f"loop is on a tensor and its step reads the list 'outs' it appends to; "), err


def test_a_del_of_an_outside_item_in_a_tensor_loop_says_deletes():
    """``del items[0]`` in a helper called from a tensor loop: refused, the message said it
    "assigns items[0]"."""
    err = hostile_harness.hybridized_error(programs.HelperDeletesAnItemOfTheStepsList,
                                           programs.ROWS[0][0])
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    line = hostile_harness.line_in(programs.__file__, "        del items[0]",
                                   programs.HelperDeletesAnItemOfTheStepsList)
    assert str(err).startswith(f"{programs.__file__}:{line}: del items[0]: this statement "
                               f"deletes items[0], inside the for loop on a tensor at "), err


def test_a_tensor_for_whose_item_locals_may_read_says_so():
    """``return h + locals()["g"]`` after a tensor for: every variable is read there, the
    loop's item too, which a graph's loop does not keep."""
    block_class = programs.VariableReadOnlyThroughLocalsAfterLoop
    err = hostile_harness.hybridized_error(block_class, programs.ROWS[0][0])
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    assert str(err).startswith(
        f"{programs.__file__}:{_line('for row in x:', block_class)}: for row in x: this for "
        f"loop is on a tensor and its item is read after the loop (or by a return inside it, "
        f"such as return row, h, or by a closure, locals(), vars() or eval in the "
        f"function)"), err
