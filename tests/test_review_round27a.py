"""Round 27ag: a hostile review of autograph round 27a (``hostile_programs27ag.py``):
``isinstance``/``type`` of a list a tensor loop collected, ``match`` on such lists (class
patterns, captures, guards, stars, nested and mapping subjects), tensor ``while`` loops
carrying no array and jumps in ``match`` cases. Each program equals plain Python on NDArrays
(the oracle), eagerly and hybridized, values and gradients, or is refused at the user's
line."""
import pytest

import hostile_harness
import hostile_programs27ag as programs

FILES = [programs.__file__]
_classified = hostile_harness.cached_classifier(programs.PROGRAMS, FILES, export=False)

REFUSED = {
    programs.SubclassListCollected, programs.TupleCollectedByConcat,
    programs.IsinstanceInsideLoopOfCollected, programs.CarriesNothingPrintAndAppendInStep,
    programs.CarriesNothingAttributeWriteInStep, programs.CarriesNothingSelfCounterInStep,
    programs.CarriesNothingConditionReadsLogLength, programs.ReturnReadingCaptureInMatchInFor,
    programs.BreakInMatchAfterAppendInWhile, programs.CarriesNothingRefusalCaughtByUser,
    programs.CarriesNothingHelperSideEffect, programs.SingledispatchOnCollected}
# (MatchStarOfCollectedListsChanged: others[0] is outs since round 27's second review,
# its append Python's)


@pytest.mark.parametrize("block_class", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_program_equals_its_oracle_or_is_refused_at_its_line(block_class):
    """Recorded, values and gradients. A user's class with a ``python_type`` attribute
    answered ``isinstance(s, float)`` True and ``type(s)`` float, eagerly too
    (IsinstanceUserClassWithPythonType, TypeOfUserClassWithPythonType); ``match State(outs,
    h): case State(items=[a, b]):`` (a namedtuple or a dataclass holding a collected list)
    matched no case hybridized (MatchClassPattern...); a capture of the subject (``case [_,
    *_] as whole: whole.append(v)``, ``case State(...) as s``) was a copy: the append was lost
    and ``s is st`` False (MatchAsCaptureThenAppend, MatchCaptureWildcardThenAppend,
    MatchOnCollectedNamedtupleCaptured); a collected list given to a user function under
    ``functools.singledispatch`` ran it unconverted, dispatched as no list (a ValueError
    naming a library class; SingledispatchOnCollected); ``outs.__class__ is list`` was False
    (ClassAttributeOfCollected); ``case Mode.A:`` and ``case self.Holder(h=g):`` did not
    convert (MatchDottedValueAndClassPatternsInTensorFor)."""
    hostile_harness.assert_kinds(_classified(block_class), refused=block_class in REFUSED)


@pytest.mark.parametrize("block_class", [programs.MatchOnCollectedNamedtupleCaptured,
                                         programs.MatchAsCaptureThenAppend],
                         ids=lambda c: c.__name__)
def test_program_whatever_came_before_equals_a_fresh_block(block_class):
    inputs = programs.PROGRAMS[block_class]
    hostile_harness.check_call_history(block_class, inputs, hostile_harness._make,
                                       hostile_harness.eager_oracle(block_class, inputs),
                                       (1e-4, 1e-5))
