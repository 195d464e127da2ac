"""Session 33, issue 24 items 1 and 5: a collected list ordered against a list (``items <=
items``: Python compares the items, arrays whose truth exists only when the graph runs) is
refused at the user's line, where it was Python's TypeError naming no line; ``complex()`` of
a collected list is Python's TypeError for a list (it named the stand-in ``StepList``) and of
a tensor refused at the line, as ``float()`` is. Compared with plain Python on NDArrays, eager
and hybridized (``hostile_harness.classify``)."""
import re

import pytest
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness

rand = hostile_harness.rand
ONES = ([rand(3, 1, seed=1) * 0 + 1], [rand(2, 1, seed=2) * 0 + 1])   # rows of one element
FILES = [__file__]


class ItemsLeItems(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        # (eagerly: one-element rows compare)
        if items <= items:
            return F.stack(*items)
        return x


class PythonListGeItems(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        first = [x[0] * 2]
        # (list.__ge__ gives way: the collected list's reflected <=)
        if first >= items:
            return x * 3
        return x


class ItemsLtNumber(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        # Python's TypeError for a list and an int, eager and hybridized
        if items < 3:
            return x
        return x * 2


class ComplexOfItems(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        c = complex(items)
        return x * c.real


class ComplexOfTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        c = complex(F.sum(x))
        return x * c.real


@pytest.mark.parametrize("cls", [ItemsLeItems, PythonListGeItems], ids=lambda c: c.__name__)
def test_an_ordered_comparison_of_a_collected_list_is_refused_at_its_line(cls):
    result = hostile_harness.classify(cls, ONES, FILES, export=False)
    assert result["eager"] == ("equal", ""), result
    assert result["hybrid"][0] == "refused", result
    err = hostile_harness.hybridized_error(cls, *ONES[0])
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    assert re.match(re.escape(__file__) + r":\d+: if \w+ [<>]= \w+: a list the loop on a "
                    r"tensor at .* appended to is compared with <", str(err)), str(err)


@pytest.mark.parametrize("cls", [ItemsLtNumber, ComplexOfItems], ids=lambda c: c.__name__)
def test_a_collected_list_given_what_a_list_refuses_is_pythons_type_error(cls):
    result = hostile_harness.classify(cls, ONES, FILES, export=False)
    assert result == {"eager": ("equal", ""), "hybrid": ("equal", "")}, result
    err = hostile_harness.hybridized_error(cls, *ONES[0])
    assert type(err) is TypeError and "'list'" in str(err), repr(err)
    assert "StepList" not in str(err) and "gluon_cf" not in str(err), str(err)


def test_complex_of_a_tensor_is_refused_at_its_line_hybridized():
    result = hostile_harness.classify(ComplexOfTensor, ONES, FILES, export=False)
    assert result["eager"] == ("equal", ""), result
    err = hostile_harness.hybridized_error(ComplexOfTensor, *ONES[0])
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    assert re.match(re.escape(__file__) + r":\d+: c = complex\(F\.sum\(x\)\): complex\(\) of a tensor "
                    r"while hybridizing",
                    str(err)), str(err)


# Review of session 33: against an empty list Python compares no item, only the lengths.
class ItemsGtEmpty(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        if items > []:
            return x * 3
        return x


class EmptyLtItemsAppendedAfter(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        items.append(x[0])
        if [] < items:   # (it surely holds an item)
            return x * 3
        return x


class ItemsLeEmpty(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        if items <= []:
            return x * 3
        return x * 1   # (x itself: MXNet's CachedOp cannot differentiate an input returned)


class ItemsLtTuple(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        if items < (1, 2):   # Python's TypeError for a list and a tuple
            return x
        return x * 2


class ComplexOfAKeyword(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        c = complex(real=F.sum(x))
        return x * c.real


@pytest.mark.parametrize("cls", [ItemsGtEmpty, EmptyLtItemsAppendedAfter, ItemsLeEmpty],
                         ids=lambda c: c.__name__)
def test_a_collected_list_against_an_empty_list_compares_lengths(cls):
    result = hostile_harness.classify(cls, ONES, FILES, export=False)
    assert result == {"eager": ("equal", ""), "hybrid": ("equal", "")}, result


def test_a_collected_list_and_a_tuple_ordered_is_pythons_type_error():
    result = hostile_harness.classify(ItemsLtTuple, ONES, FILES, export=False)
    assert result == {"eager": ("equal", ""), "hybrid": ("equal", "")}, result


def test_complex_of_a_tensor_given_by_keyword_is_refused_at_its_line_hybridized():
    err = hostile_harness.hybridized_error(ComplexOfAKeyword, *ONES[0])
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    assert re.match(re.escape(__file__) + r":\d+: c = complex\(real=F\.sum\(x\)\): complex\(\) "
                    r"of a tensor while hybridizing", str(err)), str(err)
