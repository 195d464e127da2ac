"""Round 28a: a hostile round on autograph (``hostile_programs28a.py``), written as users port
MXNet/TensorFlow/PyTorch code: value patterns written as dotted names matching objects that
hold collected lists, collected lists given to ``deque``, ``set``, ``functools.partial``,
``ChainMap``, ``Counter``, decoders, attention and beam loops, helpers, closures, defaults,
``*args``/``**kwargs``, generators, comprehensions, dict/list/dataclass state, ``try``,
``enumerate``/``zip``/``reversed``, early returns, nested loops, augmented assignment of items
and attributes, global state. Each program equals plain Python on NDArrays (the oracle),
eagerly and hybridized, values and gradients, or is refused at the user's line."""
import pytest

import gluon_cf

import hostile_harness
import hostile_programs28a as programs

FILES = [programs.__file__]
_classified = hostile_harness.cached_classifier(programs.PROGRAMS, FILES, export=False)

# refused hybridized at the user's line, by what each says (since round 30ag a dict's Python
# constants beside its arrays, items[i] = v and del items[i] of a collected list: Python's)
REFUSED = {
    programs.MatchDottedValueIsCollectedList: "compares a tensor with a literal or value",
    programs.MatchDottedValueTensorAttribute: "a value pattern of this match (case a.b:) is "
                                              "a tensor while hybridizing",
    programs.SetOfCollected: "set() of tensors while hybridizing: it hashes them",
    programs.FrozensetOfCollected: "frozenset() of tensors while hybridizing: it hashes",
    programs.SetDisplayOfCollected: "a set or dict of tensors while hybridizing: it hashes",
    programs.DictFromkeysOfCollected: "dict.fromkeys() given tensors while hybridizing",
    programs.CounterOfCollected: "Counter given tensors while hybridizing: it hashes them",
    programs.DictComprehensionKeyedByTensor: "a set or dict of tensors while hybridizing",
    programs.DefaultdictOfListsAppendedInLoop: "changes a Python list (.append)",
    programs.DictOfListsAppendedInLoop: "changes a Python list (.append)",
    programs.DataclassFieldListAppendedInLoop: "changes a Python list (.append)",
    programs.GeneratorOverCollectedPairs: "a generator function",
    programs.DataclassStateRebuiltInLoop: "variable 'st' is an Acc holding arrays",
    programs.ListStateItemAugmentedInLoop: "its body assigns attributes or items",
    programs.DataclassAttributeAugmentedInLoop: "its body assigns attributes or items",
    programs.SelfAttributeAugmentedInLoop: "its body assigns attributes or items",
    programs.GlobalCounterInTensorLoop: "its body assigns attributes or items",
    programs.TryFinallyCountingPythonSteps: "variable 'n' changes in this for loop on a tensor",
    programs.DequeSlidingWindowAppendedInTensorLoop: "changes a Python deque (.append)",
    programs.PartialHoldingListAppendedByLaterLoop: "changes the list 'outs' from outside it",
    programs.ContainsOfCollected: "this 'in' compares a tensor with the items (==)",
    programs.NotInPythonListOfRows: "this 'in' compares a tensor with the items (==)",
    programs.CountOfCollected: ".count() of a list the loop on a tensor at",
    programs.IndexOfCollected: ".index() of a list the loop on a tensor at",
    programs.LambdasStoredInTensorLoop: "its item is read after the loop",
    programs.ClassAttributeCounterInTensorLoop: "its body assigns attributes or items",
    programs.HelperAppendsToOuterListInTensorLoop: "changes a Python list (.append)",
    programs.WhileTrueReturnWithPythonCounter: "the loop may also end without it",
    programs.MatchClassKeywordValueIsOtherCollected: "this takes the truth of a tensor",
    programs.MatchLiteralOnTensorHeldByObject: "this takes the truth of a tensor",
    programs.DictDisplayKeyedByTensor: "a set or dict of tensors while hybridizing"}


@pytest.mark.parametrize("block_class", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_program_equals_its_oracle_or_is_refused_at_its_line(block_class):
    """Recorded, values and gradients. ``Reg.cur = Plain(outs, h); match Reg.cur: case
    Reg.cur:`` compared the subject's copy (made for the patterns, NOTE [autograph match])
    with the object itself: not equal hybridized, silently the other case
    (MatchDottedValue...); ``set(outs)``, ``{*outs}``, ``Counter(outs)``,
    ``dict.fromkeys(outs)``, ``{o: k for ...}``, ``{x[0]: 1}`` of tensors were Python's TypeError
    "unhashable type: 'Symbol'" naming no line; ``case {Reg.key: [a, *_]}:`` did not
    compile (a ValueError naming no line when the class was defined); ``item in outs`` and
    ``x[1] not in [x[0], x[2]]`` were MXNet's NotImplementedForSymbol naming no line, and
    ``outs.count(v)`` called the collected list's own ``count`` (a Symbol): TypeError;
    ``case Plain(items=Reg.other):``, ``case Plain(h=0):`` comparing tensors held by an
    object were MXNet's NotImplementedForSymbol naming no line."""
    result = _classified(block_class)
    hostile_harness.assert_kinds(result, refused=block_class in REFUSED)
    if block_class in REFUSED:
        error = hostile_harness.hybridized_error(block_class, *programs.PROGRAMS[block_class][0])
        assert isinstance(error, gluon_cf.AutographError), repr(error)
        assert REFUSED[block_class] in str(error), str(error)
