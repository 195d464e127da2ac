"""Round 27 (a second review of autograph round 27a, ``hostile_programs27ar.py``): ``match``
on lists a tensor loop collected held in stars, ``**rest``, slotted, frozen and nested
objects, objects with a ``__copy__`` of their own, and ``isinstance`` of such lists with
``abc``/``typing`` classes and a metaclass's ``__instancecheck__``. Each program equals plain
Python on NDArrays (the oracle), eagerly and hybridized, values and gradients."""
import pytest

import hostile_harness
import hostile_programs27ar as programs

_classified = hostile_harness.cached_classifier(programs.PROGRAMS, [programs.__file__],
                                                export=False)


@pytest.mark.parametrize("block_class", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_program_equals_its_oracle(block_class):
    """Hybridized, silently another value before: a star's list or a mapping's ``**rest``
    held match_items' copy of ``outs`` (``case (h, *others)``, then ``outs.append``: the
    copy kept the old items; ``others[0] is outs`` False; MatchStar..., MatchMappingRest...,
    MatchObjectStarOthersIs); a slotted dataclass or an object nested deeper than one level
    was not looked into, so ``case Slotted(items=[a, b])`` matched nothing (MatchSlotted...,
    MatchNestedObjectDepth); the copy a class pattern reads was made by ``copy.copy``,
    running the user's ``__copy__`` (MatchCopyDunder); ``isinstance(outs, LongList)`` with a
    metaclass's ``__instancecheck__`` looking at the object was False
    (IsinstanceUserInstancecheck)."""
    hostile_harness.assert_kinds(_classified(block_class))
