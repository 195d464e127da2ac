"""Issue 24, twenty-fourth round (item 1, autograph never changes a value): the blocks of
``hostile_programs24a.py`` (TensorFlow 2 and PyTorch ports, loop state in records, generators,
pass-through and decorated helpers, logging and excepts around tensor code, Python builtins
and library functions given tensors, the leftovers of item 1) run as plain Python on NDArrays
(the oracle), eagerly and hybridized with gradients (``hostile_harness.classify``, in this
process). And what this round fixed, each on its own."""

import mxnet as mx
import pytest

import gluon_cf

import hostile_harness
import hostile_programs8
import hostile_programs23a
import hostile_programs24a as programs

FILES = [programs.__file__]
_classified = hostile_harness.cached_classifier(programs.PROGRAMS, FILES, export=False)

# refused hybridized at the user's line (the rest converts, equal to plain Python eagerly and
# hybridized)
REFUSED = {
    # Python state changed inside a tensor if or loop (NOTE [autograph side effects]), through
    # a method, a decorator, a property, a library callback or an iterator
    programs.MutatingTensorArrayInFor, programs.CountingDecoratorInTensorFor,
    programs.PropertyWithSideEffectInWhile, programs.SelfListAppendInTensorIf,
    programs.SetAddInTensorFor, programs.CounterUpdateInTensorFor,
    programs.DictOfListsCollected, programs.GeneratorOverCollectedPairs,
    programs.HelperExceptCatchesSideEffectRefusal, programs.IteratorAdvancedInsideTensorFor,
    programs.BoundAppendOfFreshListInTensorIf, programs.ForOverRowsWithPythonCounterAfter,
    programs.FStringOfShapeInTensorFor,
    # attributes and items assigned in a graph region, loop state a graph cannot carry
    programs.FunctionalTensorArrayInFor, programs.DataclassReplaceInFor,
    programs.SimpleNamespaceAttributeInFor, programs.AttrDictStateInIf,
    programs.MutableDataclassAttributeInFor, programs.SliceAugmentedAssignOnLocalArray,
    programs.ItemAugmentedOnListOfTensors, programs.PreallocatedOutputsWrittenByIndex,
    programs.FreshListOfStepStoredInOuterDict, programs.LambdaListBuiltInTensorLoop,
    programs.ZipStarOfCollectedPairs,
    programs.ClassDefinedInLoopBody, programs.WalrusInShortCircuitInsideTensorFor,
    # a tensor's value as a Python one (asscalar, float, min, max, all; an except catching
    # the refusal does not hide it: NOTE [a refusal the user's code catches])
    programs.TorchStyleItemInCondition, programs.AsnumpyInTensorLoop,
    programs.BuiltinMaxOfTwoTensorsInLoop, programs.BuiltinMinWithNumber,
    programs.FloatOfSumInTensorWhile, programs.IntOfArgmaxTopLevel,
    programs.AllBuiltinOverRowSums, programs.MinOfCollectedSumsPython,
    programs.MinOfRowsByTensorKey, programs.TryAsscalarExceptException,
    programs.SuppressExceptionAroundFloat, programs.ExceptCatchesIterationOfTensorInLoop,
    programs.AssertOfTensorInLoop, programs.RaiseInTensorIfCaughtOutside,
    # item 1's leftovers: a while's list measured or iterated, numbers chosen by a tensor,
    # rows of a run-time count
    programs.LenOfWhileListInPythonIf, programs.ZipWhileListWithItsShift,
    programs.StarUnpackWhileList,
    programs.ReduceOperatorAddOverWhileList, programs.TernaryOfNumbersAssigned,
    programs.TernaryOfNumbersAsRangeBound, programs.IfAssigningNumbersThenArithmetic,
    programs.ReduceOverMaskedRows, programs.ReduceOverRowInsideTensorFor,
    # (UnpackEachRowIntoTwo and OwnListPassedToHelperInStep convert since round 25c:
    # tests/test_autograph_round25c.py)
    # library code taking the truth of the rows it iterates (compress, takewhile, max, groupby)
    programs.CompressRowsByTensorMask, programs.TakewhileWithTensorPredicate,
    programs.AccumulateWithBuiltinMax, programs.GroupbyOfItems,
    # a generator function called while hybridizing; MXNet's dtypes (float32 < int64)
    programs.YieldFromGeneratorOverTensor, programs.TfRangeWithIndexedRead}


@pytest.mark.parametrize("block_class", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_hostile_program_equals_its_oracle_or_is_refused_at_its_line(block_class):
    hostile_harness.assert_kinds(_classified(block_class), refused=block_class in REFUSED)


def _line(text, block_class=None):
    """The line of ``text`` (in ``block_class``'s source when given)."""
    return hostile_harness.line_in(programs.__file__, text, block_class)


_hybridized_error = hostile_harness.hybridized_error


def _converts(block_class, op=None):
    """Equal to plain Python eagerly and hybridized; with ``op``, one graph holding it."""
    result = _classified(block_class)
    assert {mode: kind for mode, (kind, _) in result.items()} == {
        "eager": "equal", "hybrid": "equal"}, result
    if op is not None:
        net = hostile_harness._make(block_class)
        net.hybridize()
        net(*[mx.nd.array(a) for a in programs.PROGRAMS[block_class][0]])
        assert op in net._cached_graph[1].tojson()


@pytest.mark.parametrize("block_class", [programs.WalrusInsideTensorForBody,
                                         programs.WalrusInElifInsideTensorFor],
                         ids=lambda c: c.__name__)
def test_a_walrus_in_a_tensor_ifs_test_inside_a_tensor_loop_is_a_temporary_of_the_step(
        block_class):
    """``if (s := F.sum(row)) > 0: h = h + s`` in a tensor for was refused ("'s' is assigned
    in this for loop on a tensor but has no value before it"), though ``s = F.sum(row)`` as a
    statement before the if converts: the branches' reads of ``s`` counted as reads before
    the step assigns it. A ``:=`` the test surely evaluates binds before the branches run."""
    _converts(block_class, "foreach")


def test_a_walrus_that_may_not_run_still_needs_its_value_before_the_loop():
    """(``a and (m := ...)``: the short-circuit may skip it; refused at the line, as before.)"""
    err = _hybridized_error(programs.WalrusInShortCircuitInsideTensorFor, programs.ROWS[0][0])
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    assert str(err).startswith(f"{programs.__file__}:"), err


def test_sorted_with_a_key_of_numbers_sorts_a_tensors_rows():
    """``sorted(x, key=lambda r: 0)`` was refused ("no rows to iterate"; of a list of
    tensors, "it compares them or takes their truth") though only the keys, Python numbers,
    are compared: a tensor's rows (the shapes give them) are sorted by them."""
    _converts(programs.SortedRowsByConstantKey)


def test_a_key_that_is_a_tensor_is_refused_at_the_call():
    err = _hybridized_error(programs.MinOfRowsByTensorKey, programs.ROWS[0][0])
    text = "return min(x, key=lambda r: F.sum(r)) * 2"
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    assert str(err).startswith(f"{programs.__file__}:{_line(text)}: {text}: min() of "
                               f"tensors while hybridizing: it compares them"), err


@pytest.mark.parametrize("block_class", [
    programs.ReduceLambdaOverTensorWithInit, programs.ReduceOperatorMulOverTensor,
    programs.AccumulateWithCallbackOverTensor, programs.ReduceOverTensorWithCountingCallback,
    hostile_programs23a.ReduceOverRows, hostile_programs23a.AccumulateOverRows,
    hostile_programs23a.ChainRowsAndExtra, hostile_programs8.ReduceOverRows],
    ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_library_functions_iterating_a_tensor_see_its_rows(block_class):
    """``functools.reduce(f, x)``, ``itertools.accumulate(x, f)``, ``chain`` (item 1's
    leftover) were refused while hybridizing; they iterate the rows the input shapes give,
    as the builtins (``sum(x)``) and plain NDArrays do (NOTE [autograph iteration])."""
    module = __import__(block_class.__module__)
    result = hostile_harness.classify(block_class, module.PROGRAMS[block_class],
                                      [module.__file__], export=False)
    assert {mode: kind for mode, (kind, _) in result.items()} == {
        "eager": "equal", "hybrid": "equal"}, result


@pytest.mark.parametrize("block_class,call", [
    (programs.CompressRowsByTensorMask, "itertools.compress"),
    (programs.TakewhileWithTensorPredicate, "itertools.takewhile"),
    (programs.AccumulateWithBuiltinMax, "itertools.accumulate"),
    (programs.GroupbyOfItems, "itertools.groupby")], ids=lambda v: getattr(v, "__name__", v))
def test_library_code_taking_the_truth_of_rows_is_refused_at_the_call(block_class, call):
    """Once the rows are given to library code, what it tests of them (a row's truth, a
    predicate's tensor, ``max`` comparing two) was MXNet's NotImplementedForSymbol naming no
    line, raised as the lazy iterator ran: refused at the call, also while iterated."""
    err = _hybridized_error(block_class, programs.PROGRAMS[block_class][0][0])
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    line = _line("        return F.", block_class)
    assert str(err).startswith(f"{programs.__file__}:{line}: "), err
    assert f"{call}() of tensors while hybridizing: it compares them or takes their " \
        f"truth" in str(err), err


def test_a_library_function_over_rows_of_a_run_time_count_is_refused_at_the_call():
    err = _hybridized_error(programs.ReduceOverMaskedRows, programs.ROWS[0][0])
    text = "return functools.reduce(lambda a, r: a * 0.5 + r, kept, x[0] * 0)"
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    assert str(err).startswith(f"{programs.__file__}:{_line(text)}: {text}: "
                               f"functools.reduce() of a tensor"), err


@pytest.mark.parametrize("block_class", [programs.ListMadeAndPoppedInsideStep,
                                         programs.PartsListAddedNInsideStep],
                         ids=lambda c: c.__name__)
def test_a_list_a_step_makes_and_changes_is_python_in_the_step(block_class):
    """``parts = []; parts.append(row); h = F.add_n(*parts)`` in a tensor for's body was
    refused ("changes a Python list (.append) ... the change would happen once"): the list
    is made anew in each step, changed by it alone. Lists from outside the step stay
    refused (BoundAppendOfFreshListInTensorIf, SetAddInTensorFor)."""
    _converts(block_class, "foreach")
    err = _hybridized_error(programs.BoundAppendOfFreshListInTensorIf, programs.STATES[0][0])
    assert str(err).startswith(f"{programs.__file__}:{_line('push(1)')}: push(1): this "
                               f"statement changes a Python list (.append), inside the if "
                               f"on a tensor"), err


def test_appending_a_tuple_of_arrays_per_step_names_no_graph_node():
    """The refusal quoted MXNet's ``<Symbol zipstarofcollectedpairs2_broadcast_add0>`` (an
    internal node's name) for the tuple appended; it says what the value is and what to do."""
    err = _hybridized_error(programs.ZipStarOfCollectedPairs, programs.ROWS[0][0])
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    assert "<Symbol" not in str(err), err
    assert "appends the Python value a tuple of 2 arrays to a list at each step" in str(err)
    assert "(one list for each: hs.append(h); cs.append(c))" in str(err)
