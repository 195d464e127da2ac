"""Round 27a: a hostile round on autograph (``hostile_programs27a.py``), written as users port
PyTorch/TensorFlow/MXNet code: ``match`` in tensor loops, walrus, chained comparisons and
``and``/``or``/``not`` mixing tensors and Python values, ternaries, generators,
``functools``, ``*args``, decorators, callable objects and child blocks in loops,
``try``/``except``, collected lists read back, comprehensions, early returns and breaks in
nested loops, structured carries, decoders and attention loops. Each program equals plain
Python on NDArrays (the oracle), eagerly and hybridized, values and gradients, or is refused
at the user's line; and a hybridized block's calls equal a fresh block's whatever came
before."""
import re

import pytest

import gluon_cf

import hostile_harness
import hostile_programs27a as programs

FILES = [programs.__file__]
_classified = hostile_harness.cached_classifier(programs.PROGRAMS, FILES, export=False)

REFUSED = {
    programs.GeneratorOfPythonScalesInTensorLoop, programs.GeneratorOfRowsBeforeTensorIf,
    # (TryExceptIndexErrorOnRowInFor: Python's since round 30ag, the row's shape traced)
    programs.DataclassReplaceInTensorWhile,
    programs.HelperEarlyReturnInPythonLoopCalledInTensorFor,
    programs.TwoAppendsToOneListPerStep, programs.AppendInPythonRangeInsideTensorFor,
    programs.AppendThenLastItemInSameStep, programs.TernaryOfTuplesUnpackedInFor,
    programs.WalrusPythonCounterInWhileCondition, programs.PythonCounterOnlyInTensorWhile,
    programs.DictWithPythonCountInTensorWhile, programs.HelperMutableDefaultAccumulator,
    programs.NestedWhileInnerCounterReset, programs.ComprehensionFilterOnTensorCondition,
    programs.ComprehensionWalrusFilterOnTensor, programs.FilterBuiltinWithTensorLambda,
    programs.GenexpAnyWithTensorInIf, programs.SumOfGenexpWithTensorCondFilter,
    programs.MatchSequencePatternOnWhileCollected}


@pytest.mark.parametrize("block_class", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_program_equals_its_oracle_or_is_refused_at_its_line(block_class):
    """Recorded, values and gradients. ``match outs: case [a, b, *rest]:`` on a list a tensor
    loop collected matched no sequence pattern hybridized: silently another case's value
    (MatchSequencePatternOn...Collected, MatchMappingHoldingCollected); it matches as the
    list of its items where their number is known while tracing, else is refused at the
    line. ``isinstance(outs, list)`` and ``type(outs) == list`` of such a list were False
    (IsinstanceOfWhileCollectedList, TypeOfForCollectedListComparedToList). ``break``, ``continue`` or ``return`` in a ``match``
    case inside a tensor loop (BreakInsideMatchCaseInTensorFor, ...) was refused as a jump
    "a graph's loop cannot express yet"; a tensor ``while`` carrying only a dataclass holding
    a Python value (DataclassReplaceInTensorWhile, PythonCounterOnlyInTensorWhile, ...) named
    while_loop's "loop_vars"."""
    hostile_harness.assert_kinds(_classified(block_class), refused=block_class in REFUSED)


def _oracle(cls, inputs):
    oracles = {}

    def oracle(k):
        if k not in oracles:
            oracles[k] = hostile_harness._outcome(lambda: hostile_harness.run_with_gradients(
                hostile_harness._make(cls), inputs[k], forward=cls.hybrid_forward.__wrapped__))
        return oracles[k]
    return oracle


# (every program's history equals a fresh block's; these loops and jumps, for the suite's time)
HISTORIES = [c for c in programs.PROGRAMS if c not in REFUSED and re.search(
    "While|Decoder|Match|Attention|Beam", c.__name__)]


@pytest.mark.parametrize("block_class", HISTORIES, ids=lambda c: c.__name__)
def test_program_whatever_came_before_equals_a_fresh_block(block_class):
    inputs = programs.PROGRAMS[block_class]
    hostile_harness.check_call_history(block_class, inputs, hostile_harness._make,
                                       _oracle(block_class, inputs),
                                       getattr(block_class, "TOL", None) or (1e-4, 1e-5))


@pytest.mark.parametrize("block_class,line,variable", [
    (programs.DataclassReplaceInTensorWhile, "while F.sum(st.n) < 3:",
     "variable 'st' is a Carry holding arrays (and other values) that this while loop on a "
     "tensor changes"),
    (programs.DictWithPythonCountInTensorWhile, 'while F.sum(st["h"]) < 10:',
     "variable 'st' is a dict {'h': an array, 'n': 0}, then a dict {'h': an array, 'n': 1} "
     "in this while loop on a tensor; a graph carries the same arrays throughout, so keep its "
     "structure and its Python values"),
    (programs.PythonCounterOnlyInTensorWhile, "while F.sum(x) > k:",
     "variable 'k' changes in this while loop on a tensor but is the Python value 0")], ids=lambda v: getattr(v, "__name__", None))
def test_a_tensor_while_carrying_no_array_names_the_variable(block_class, line, variable):
    """NOTE [a tensor while carrying no array]: the while's only variable a Python value
    (a counter, a dataclass, a dict holding a Python number): while_loop's "loop_vars must
    contain at least one array"; the step traced once names the variable."""
    err = hostile_harness.hybridized_error(block_class, *programs.PROGRAMS[block_class][0])
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    at = hostile_harness.line_in(programs.__file__, "        " + line, block_class)
    assert str(err).startswith(f"{programs.__file__}:{at}: {line} {variable}"), err
