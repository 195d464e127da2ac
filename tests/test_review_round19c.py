"""Review of hostile round 8's and/or and collected lists (round 19c): each program runs plain
(Python on NDArrays, the oracle), converted eagerly and hybridized with gradients
(``hostile_harness.classify``), and must equal the oracle or be refused at its line.

and/or were an elementwise ``where`` of every operand: a one-element operand broadcast to the
other's shape, the side Python never evaluates was run (its side effects; a NaN gradient of
``total / n`` where ``n`` is 0), a value came back where Python raises, a Python number side
was an array eagerly, and a ``:=`` in one was MXNet's ``__bool__`` error. A loop collected a
list another name held too (``outs = self.outs = []``), which then held no item."""
import numpy as np
import pytest
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats
_classified = hostile_harness.cached_classifier(PROGRAMS, [__file__])

# a vector whose sum is positive, zero and negative
VECTORS = ([rand(3)], [floats(0, 0, 0)], [-np.abs(rand(3, seed=2))])
ROWS = ([rand(4, 3)], [rand(2, 3, seed=1)])


# ---- and/or: Python's operand itself, the right side only where Python evaluates it -----

@program(*VECTORS)
class OrOfSumAndVector(HybridBlock):
    """Python's value is the sum (shape (1,)) where it is not 0: it was the sum broadcast to
    x's shape (three times its sum downstream)."""

    @autograph
    def hybrid_forward(self, F, x):
        y = x.sum() or x
        return y.sum() * 2 + x


@program(*VECTORS)
class AndFalseIsTheTest(HybridBlock):
    """A false test is Python's value, shape (1,): it was a row of zeros of x's shape."""

    @autograph
    def hybrid_forward(self, F, x):
        y = (x.sum() > 100) and x
        return F.concat(y, x, dim=0)


@program([rand(3), floats(0, 0, 0)], [rand(3), floats(1, 0, 1)])
class MeanWhereAnyMasked(HybridBlock):
    """``(n > 0) and total / n``: where n is 0 Python never divides; the where did, and its
    gradient through the unchosen 0/0 was NaN."""

    @autograph
    def hybrid_forward(self, F, x, mask):
        n = mask.sum()
        mean = (n > 0) and ((x * mask).sum() / n)
        return mean + x


class ChecksOnlyWhenPositive(HybridBlock):
    """A side effect in the right side: Python runs it only where the left side is true (it
    ran every call); hybridized, refused at its line (a graph traces it once)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def check(self, x):
        self.calls.append(1)
        return x * 2

    @autograph
    def hybrid_forward(self, F, x):
        y = (x.sum() > 0) and self.check(x)
        return y + len(self.calls)


program(*VECTORS)(ChecksOnlyWhenPositive)


@program(*ROWS)
class AndOrIdiomOnRows(HybridBlock):
    """``c and row or -row``: Python takes the truth of ``row`` (3 elements) and raises; it
    gave the elementwise ``where``: now refused at the line, eagerly and hybridized."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = h + ((row.sum() > 0) and row or -row)
        return h


@program(*VECTORS)
class WalrusInFirstOperand(HybridBlock):
    """A ``:=`` in an and/or was left as Python's ``and``: hybridized, MXNet's Symbol
    ``__bool__`` error naming no line."""

    @autograph
    def hybrid_forward(self, F, x):
        if (s := x.sum()) > 0 and s < 5:
            return x * s
        return (t := x.max()) and x * t


@program(*VECTORS)
class WalrusInLaterOperand(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        if x.sum() > 0 and (m := x.max()) > 0.5:
            return x * m
        return x


@program(*VECTORS)
class ChainOfAndOr(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return ((x.sum() > -1) and (x.max() > 0) and x.min() or x.mean()) * x


_CONVERT = [OrOfSumAndVector, AndFalseIsTheTest, MeanWhereAnyMasked, WalrusInFirstOperand,
            ChainOfAndOr]


@pytest.mark.parametrize("block_class", _CONVERT, ids=lambda c: c.__name__)
def test_and_or_equal_python(block_class):
    result = _classified(block_class)
    assert {m: k for m, (k, _) in result.items()} == {
        "eager": "equal", "hybrid": "equal", "export": "equal"}, result


def _refused_at(block_class, source, modes=("hybrid",)):
    result = _classified(block_class)
    assert not hostile_harness.not_equal_or_refused(result), result
    for mode in ("eager", "hybrid"):
        want = "refused" if mode in modes else "equal"
        assert result[mode][0] == want, result
        if want == "refused":
            line = next(k for k, text in enumerate(open(__file__), 1)
                        if text.strip() == source and k > _first_line(block_class))
            assert "%s:%d" % (__file__, line) in result[mode][1], result


def _first_line(block_class):
    import inspect
    return inspect.getsourcelines(block_class)[1]


def test_a_side_effect_of_the_right_side_runs_only_where_python_runs_it():
    _refused_at(ChecksOnlyWhenPositive, "self.calls.append(1)")


def test_the_truth_of_an_array_of_several_elements_is_refused():
    _refused_at(AndOrIdiomOnRows, "h = h + ((row.sum() > 0) and row or -row)",
                modes=("eager", "hybrid"))


def test_a_walrus_after_the_first_operand_is_refused_at_its_line():
    _refused_at(WalrusInLaterOperand, "if x.sum() > 0 and (m := x.max()) > 0.5:")


class PythonNumberSide(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        k = (x.sum() > 0) and 2 or 1
        return F.concat(*[x] * k, dim=0)


@pytest.mark.parametrize("values", [[1.0, 2.0], [-1.0, -2.0]])
def test_a_python_number_side_stays_a_python_number_eagerly(values):
    """Eagerly Python's ``k`` is the int 2 or 1 (it was an NDArray: ``[x] * k`` failed)."""
    import mxnet as mx
    x = mx.nd.array(values)
    want = PythonNumberSide.hybrid_forward.__wrapped__(None, mx.nd, x)
    got = PythonNumberSide()(x)
    assert want.shape == got.shape and np.allclose(want.asnumpy(), got.asnumpy())


# ---- lists: collected only when no other name holds them ---------------------------------

@program(*ROWS)
class ChainedAttributeList(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = self.outs = []
        for row in x:
            outs.append(row * 2)
        return F.concat(x, *self.outs, dim=0)


@program(*ROWS)
class ListGivenAnotherName(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        history = []
        outs = history
        for row in x:
            outs.append(row * 2)
        return F.concat(x, *history, dim=0)


@program(*ROWS)
class ChainedLocalLists(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        a = b = []
        for row in x:
            b.append(row + 1)
        return F.concat(x, *a, dim=0)


@pytest.mark.parametrize("block_class", [ChainedAttributeList, ListGivenAnotherName,
                                         ChainedLocalLists], ids=lambda c: c.__name__)
def test_a_list_another_name_holds_is_not_collected(block_class):
    _refused_at(block_class, "for row in x:")


@program(*ROWS)
class NewListsStillCollected(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs, start = [], [x[0]]
        more = list(start)
        for row in x:
            outs.append(row + 1)
            more.append(row)
        return F.stack(*outs), F.concat(*more, dim=0)


def test_lists_the_function_makes_are_still_collected():
    result = _classified(NewListsStillCollected)
    assert {m: k for m, (k, _) in result.items()} == {
        "eager": "equal", "hybrid": "equal", "export": "equal"}, result


# ---- not: Python's bool eagerly ----------------------------------------------------------

class NotPicksFromAList(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return [x * 2, x * 3][not (x.sum() > 0)]


@pytest.mark.parametrize("values", [[1.0, 2.0], [-1.0, -2.0]])
def test_not_of_an_ndarray_is_pythons_bool_eagerly(values):
    """``[a, b][not c]``: Python's bool indexes the list (an NDArray of 0 or 1 did not)."""
    import mxnet as mx
    x = mx.nd.array(values)
    want = NotPicksFromAList.hybrid_forward.__wrapped__(None, mx.nd, x)
    got = NotPicksFromAList()(x)
    assert np.allclose(want.asnumpy(), got.asnumpy())


@program(*ROWS)
class NotOfARow(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        if x.sum() > 100:
            h = x[1]
        return h * (not h)


def test_not_of_an_ndarray_of_several_elements_is_refused_eagerly():
    """Python raises ValueError; it was the elementwise logical not. (Hybridized a Symbol's
    ``not`` stays the elementwise logical not: its size is known only when the graph runs.)"""
    result = _classified(NotOfARow)
    assert result["eager"][0] == "refused" and "return h * (not h)" in result["eager"][1], \
        result


# ---- a Python number side in an integer tensor's dtype ------------------------------------

@program([np.array([1, 2, 3], np.int32), hostile_harness.floats(0.5, 0.5, 1)],
         [np.array([0, 0, 0], np.int32), hostile_harness.floats(0.5, 0.5, 1)])
class IntTestAndHalf(HybridBlock):
    """``(ids.sum() > 0) and 2.5`` on int32 ids: hybridized 2.5 became an int32 array, 2
    (silently x * 2); now refused at its line (a graph's output has one dtype, Python's value
    is an int array or a float)."""
    NO_GRAD = (0,)

    @autograph
    def hybrid_forward(self, F, ids, x):
        k = (ids.sum() > 0) and 2.5
        return x * (k if isinstance(k, float) else k.astype("float32"))


def test_a_fractional_python_number_side_of_an_integer_test_is_refused():
    _refused_at(IntTestAndHalf, "k = (ids.sum() > 0) and 2.5")
