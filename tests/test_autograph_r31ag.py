"""Round 31ag, issue 24 items 1 and 5: operators a list has not on a collected list (Python's
TypeError for a list, not the stand-in's class), ``x.dtype(2)`` refused at the line on a
Symbol, ``d.__setitem__(k, v)`` converted as ``d[k] = v``, an append in a ``finally`` of a
tensor loop refused saying why, and an int index in a generator's ``try`` catching
IndexError as Python runs it. Each compared with plain Python on NDArrays, eager and
hybridized, values and gradients (``hostile_harness.classify``)."""
import contextlib

import mxnet as mx
import numpy as np
import pytest
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness

rand = hostile_harness.rand
SEQ = ([rand(4, 3, seed=1)], [rand(2, 3, seed=2)])
FILES = [__file__]


def _collected(F, x):
    items = []
    for r in x:
        items.append(r * 2)
    return items


class RSubList(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        return 1 - items


class NegList(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        return -items


class MatmulList(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        return items @ items


class ListMinusArray(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        return items - x


class ArrayMinusList(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        return x - items


class AbsList(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        return abs(items)


@pytest.mark.parametrize("cls", [RSubList, NegList, MatmulList, AbsList],
                         ids=lambda c: c.__name__)
def test_operator_a_list_has_not_is_pythons_type_error_for_a_list(cls):
    result = hostile_harness.classify(cls, SEQ, FILES, export=False)
    assert result == {"eager": ("equal", ""), "hybrid": ("equal", "")}, result
    err = hostile_harness.hybridized_error(cls, *SEQ[0])
    assert type(err) is TypeError and "'list'" in str(err) and "StepList" not in str(err)


@pytest.mark.parametrize("cls", [ListMinusArray, ArrayMinusList], ids=lambda c: c.__name__)
def test_list_and_array_operator_names_no_internal_class(cls):
    err = hostile_harness.hybridized_error(cls, *SEQ[0])
    assert isinstance(err, TypeError) and "list" in str(err), repr(err)
    assert "StepList" not in str(err) and "gluon_cf" not in str(err), str(err)


class DtypeCalled(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return x * x.dtype(2)


class DtypeOfCast(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        y = x.astype("float64")
        return (y * y.dtype(3) + (y.dtype == np.float64)).astype("float32")


class DtypeInLoopBody(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            h = h + r * r.dtype(2)
        return h


class DtypeBranch(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        if x.dtype == np.float64:
            return x * 2
        return x * 3


@pytest.mark.parametrize("cls", [DtypeCalled, DtypeOfCast], ids=lambda c: c.__name__)
def test_dtype_read_where_the_traced_inputs_give_it_equals_python(cls):
    result = hostile_harness.classify(cls, SEQ, FILES, export=False)
    assert result == {"eager": ("equal", ""), "hybrid": ("equal", "")}, result


def test_dtype_read_makes_a_graph_per_input_dtype():
    net = DtypeBranch()
    net.initialize()
    net.hybridize()
    for dtype, want in (("float32", 3), ("float64", 2), ("float32", 3), ("float16", 3)):
        out = net(mx.nd.ones((2,), dtype=dtype))
        assert out.dtype == np.dtype(dtype) and (out.asnumpy() == want).all(), (dtype, out)


def test_dtype_in_a_loop_body_is_refused_at_the_line():
    result = hostile_harness.classify(DtypeInLoopBody, SEQ, FILES, export=False)
    assert result["eager"] == ("equal", "") and result["hybrid"][0] == "refused", result
    err = hostile_harness.hybridized_error(DtypeInLoopBody, *SEQ[0])
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    line = hostile_harness.line_in(__file__, "r.dtype(2)", DtypeInLoopBody)
    assert str(err).startswith(f"{__file__}:{line}: ") and "before the loop" in str(err)


class DictSetitem(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": F.zeros((3,))}
        for r in x:
            state.__setitem__("h", state["h"] * 0.5 + r)
        return state["h"]


class ListSetitem(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        state = [F.zeros((3,))]
        for r in x:
            state.__setitem__(0, state[0] + r)
        return state[0]


class ListSetitemSubscript(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        state = [F.zeros((3,))]
        for r in x:
            state[0] = state[0] + r
        return state[0]


def test_setitem_method_of_a_dict_in_a_tensor_loop_equals_python():
    result = hostile_harness.classify(DictSetitem, SEQ, FILES, export=False)
    assert result == {"eager": ("equal", ""), "hybrid": ("equal", "")}, result


def test_setitem_method_of_a_list_in_a_tensor_loop_is_refused_as_item_assignment():
    result = hostile_harness.classify(ListSetitem, SEQ, FILES, export=False)
    assert result["eager"] == ("equal", "") and result["hybrid"][0] == "refused", result
    err = hostile_harness.hybridized_error(ListSetitem, *SEQ[0])
    same = hostile_harness.hybridized_error(ListSetitemSubscript, *SEQ[0])
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    assert str(err).split(": ", 2)[2] == str(same).split(": ", 2)[2]


class FinallyAppendAfterBreak(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        h = F.zeros((3,))
        for r in x:
            try:
                h = h + r
                if F.sum(h) > 0.5:
                    break
            finally:
                items.append(h)
        return F.stack(*items).sum(axis=0)


class FinallyContinues(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            try:
                h = h * 0.5 + r
                if F.sum(r) > 0:
                    h = h * 2
            finally:
                continue
        return h


def test_finally_that_always_continues_equals_python():
    result = hostile_harness.classify(FinallyContinues, SEQ, FILES, export=False)
    assert result == {"eager": ("equal", ""), "hybrid": ("equal", "")}, result


def test_append_in_a_finally_of_a_tensor_loop_is_refused_saying_why():
    result = hostile_harness.classify(FinallyAppendAfterBreak, SEQ, FILES, export=False)
    assert result["eager"] == ("equal", "") and result["hybrid"][0] == "refused", result
    err = hostile_harness.hybridized_error(FinallyAppendAfterBreak, *SEQ[0])
    line = hostile_harness.line_in(__file__, "items.append(h)", FinallyAppendAfterBreak)
    assert f"in the finally at {__file__}:{line};" in str(err), str(err)
    assert "after the try" in str(err), str(err)


class GeneratorTryIndex(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def rows():
            for i in range(3):
                try:
                    yield x[i] * 2
                except IndexError:
                    return
        return F.stack(*list(rows())).sum(axis=0)


class GeneratorTryAssign(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def rows():
            try:
                v = x[2]
                got = yield v * 3
                yield x[3] + 1
            except IndexError:
                yield x[0]
        return F.stack(*rows()).sum(axis=0)


class SuppressIndex(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 1
        for i in range(4):
            with contextlib.suppress(IndexError):
                h = h + x[i] * i
        return h


class GeneratorSuppress(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def rows():
            with contextlib.suppress(IndexError):
                for i in range(4):
                    yield x[i]
        return F.stack(*rows()).sum(axis=0)


@pytest.mark.parametrize("cls", [GeneratorTryIndex, GeneratorTryAssign, SuppressIndex,
                                 GeneratorSuppress], ids=lambda c: c.__name__)
def test_int_index_in_a_try_of_a_generator_equals_python(cls):
    result = hostile_harness.classify(cls, SEQ, FILES, export=False)
    assert result == {"eager": ("equal", ""), "hybrid": ("equal", "")}, result


class PowModList(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        return pow(items, 2, 3)


def test_three_argument_pow_of_a_collected_list_is_pythons_type_error():
    result = hostile_harness.classify(PowModList, SEQ, FILES, export=False)
    assert result == {"eager": ("equal", ""), "hybrid": ("equal", "")}, result
