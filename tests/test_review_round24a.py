"""Issue 24, review of round 24a (what it widened autograph to run: ``sorted``/``min``/``max``
given a ``key=``, a container a loop's step makes changed as Python, ``functools``/
``itertools`` over a tensor's rows, a ``:=`` in a tensor test): programs a port from
TensorFlow/PyTorch would write, aimed at those paths, run as plain Python on NDArrays (the
oracle) and converted, eagerly and hybridized with gradients (``hostile_harness.classify``).
Each equals its oracle or is refused at the user's line; these were silently other values,
MXNet's NotImplementedForSymbol, or a refusal of what runs."""
import functools
import itertools

import pytest
from mxnet.gluon import HybridBlock

from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand = hostile_harness.rand

ROWS = ([rand(4, 3, seed=2410)], [rand(1, 3, seed=2411) * 2], [rand(3, 3, seed=2412) + 1])
TALL = ([rand(4, 3, seed=2413)], [rand(5, 3, seed=2414)])


# ---- builtins given as a key or callback: len measures a tensor's rows -----------------------

@program(*TALL)
class SortedByLen(HybridBlock):
    """``sorted(parts, key=len)`` of slices of different lengths (shortest first)."""

    @autograph
    def hybrid_forward(self, F, x):
        parts = [x[:3], x[:1], x[:2]]
        ordered = sorted(parts, key=len)
        return F.concat(*ordered, dim=0) * F.arange(1, 7).reshape((6, 1))


@program(*TALL)
class MaxByLen(HybridBlock):
    """``max(parts, key=len)``: the longest slice."""

    @autograph
    def hybrid_forward(self, F, x):
        parts = [x[:1], x[:3], x[:2]]
        return max(parts, key=len) * 2


@program(*TALL)
class ListSortByLen(HybridBlock):
    """``parts.sort(key=len)`` of a list the function made."""

    @autograph
    def hybrid_forward(self, F, x):
        parts = [x[:3], x[:1], x[:2]]
        parts.sort(key=len)
        return F.concat(*parts, dim=0) * F.arange(1, 7).reshape((6, 1))


@program(*TALL)
class MapLenOverParts(HybridBlock):
    """``sum(map(len, parts))``: the rows of the slices, counted."""

    @autograph
    def hybrid_forward(self, F, x):
        parts = [x[:3], x[:1], x[:2]]
        return x * sum(map(len, parts))


@program(*TALL)
class LenThroughAnotherName(HybridBlock):
    """``count = len`` ... ``count(x)``."""

    @autograph
    def hybrid_forward(self, F, x):
        count = len
        return x * count(x)


# ---- a container the step makes: its sort and remove compare tensors -------------------------

@program(*ROWS)
class StepListSortedByTensorKey(HybridBlock):
    """``parts.sort(key=lambda r: F.sum(r))`` of a list the step made."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            parts = [row, h * 0.5 + 0.1, row * -1]
            parts.sort(key=lambda r: F.sum(r))
            h = parts[0] + h
        return h


@program(*ROWS)
class StepListRemove(HybridBlock):
    """``parts.remove(a)`` of a list the step made (Python compares ``h == a``)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            a = row * 2
            parts = [h, a, row]
            parts.remove(a)
            h = F.add_n(*parts)
        return h


# ---- Python iterators made outside the step, read by calls in it -----------------------------

@program(*ROWS)
class StepListExtendedByOuterGenerator(HybridBlock):
    """``parts.extend(gen)``: the generator is used up by the first step."""

    @autograph
    def hybrid_forward(self, F, x):
        gen = (v for v in [1.0, 2.0, 3.0, 4.0, 5.0])
        h = x[0] * 0
        for row in x:
            parts = [row, 1.0]
            parts.extend(gen)
            h = h + sum(parts)
        return h


@program(*ROWS)
class StepListExtendedByIsliceOfOuterIterator(HybridBlock):
    """``parts.extend(itertools.islice(it, 1))``: one number of ``it`` per step."""

    @autograph
    def hybrid_forward(self, F, x):
        it = iter([1.0, 2.0, 3.0, 4.0, 5.0])
        h = x[0] * 0
        for row in x:
            parts = [row]
            parts.extend(itertools.islice(it, 1))
            h = h + sum(parts)
        return h


@program(*ROWS)
class StepDictUpdatedFromOuterIterator(HybridBlock):
    """``d = {}; d.update(itertools.islice(pairs, 1))`` per step."""

    @autograph
    def hybrid_forward(self, F, x):
        pairs = iter([("a", 1.0), ("a", 2.0), ("a", 3.0), ("a", 4.0), ("a", 5.0)])
        h = x[0] * 0
        for row in x:
            d = {}
            d.update(itertools.islice(pairs, 1))
            h = h + row * d["a"]
        return h


def _first(items):
    return next(items)


@program(*ROWS)
class HelperReadsOuterIteratorInStep(HybridBlock):
    """A helper's ``next(items)`` of an iterator the function made before the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        it = iter([1.0, 2.0, 3.0, 4.0, 5.0])
        h = x[0] * 0
        for row in x:
            h = h + row * _first(it)
        return h


# ---- a name every assignment of which makes a new object, bound by a match pattern too -------

@program(*ROWS)
class MatchCaptureOfOuterList(HybridBlock):
    """``parts = []`` then ``case {"buf": parts}``: parts is the block's list."""

    def __init__(self):
        super().__init__()
        self.cfg = {"buf": []}

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            parts = []
            match self.cfg:
                case {"buf": parts}:
                    pass
            parts.append(1)
            h = h + row * len(parts)
        return h


# ---- itertools given the tensor by keyword, or None among the other arguments ----------------

@program(*TALL)
class AccumulateByKeyword(HybridBlock):
    """``itertools.accumulate(iterable=x)``."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*itertools.accumulate(iterable=x))


@program(*TALL)
class IsliceWithoutStop(HybridBlock):
    """``itertools.islice(x, 1, None)``: all rows but the first."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*itertools.islice(x, 1, None)) * 2


@program(*TALL)
class ReduceWithInitializerAndKeyedMin(HybridBlock):
    """``functools.reduce`` with an initializer and ``min(..., key=, default=)``."""

    @autograph
    def hybrid_forward(self, F, x):
        parts = [x[:3], x[:1], x[:2]]
        short = min(parts, key=lambda p: p.shape[0], default=x)
        return functools.reduce(lambda a, b: a * 0.5 + b, x, short[0] * 3)


# ---- a list's extend given a tensor: its rows, as an NDArray's --------------------------------

@program(*TALL)
class ListExtendedByTensor(HybridBlock):
    """``parts.extend(x)``: the rows of ``x``, counted after."""

    @autograph
    def hybrid_forward(self, F, x):
        parts = [x[0]]
        parts.extend(x)
        return F.stack(*parts) * len(parts)


@program(*ROWS)
class StepListExtendedByTensor(HybridBlock):
    """``parts = []; parts.extend(F.stack(row, h * 0.5))`` in a tensor loop's step (the
    step's values have no shape the traced inputs give: refused, as ``sum`` of one is)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            parts = []
            parts.extend(F.stack(row, h * 0.5))
            h = F.add_n(*parts) + h * 0.1
        return h


# ---- a set a step makes, given tensors to hash -------------------------------------------------

@program(*ROWS)
class StepSetOfRows(HybridBlock):
    """``seen = set(); seen.add(row); seen.add(h)`` (NDArrays hash by identity)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            seen = set()
            seen.add(row)
            seen.add(h)
            h = h + row * len(seen)
        return h


@program(*TALL)
class SetUpdatedByTensor(HybridBlock):
    """``seen = set(); seen.update(x)``: one item per row."""

    @autograph
    def hybrid_forward(self, F, x):
        seen = set()
        seen.update(x)
        return x * len(seen)


REFUSED = {StepListSortedByTensorKey, StepListRemove, StepListExtendedByOuterGenerator,
           StepListExtendedByIsliceOfOuterIterator, StepDictUpdatedFromOuterIterator,
           HelperReadsOuterIteratorInStep, MatchCaptureOfOuterList, StepListExtendedByTensor,
           StepSetOfRows, SetUpdatedByTensor}

_classified = hostile_harness.cached_classifier(PROGRAMS, [__file__], export=False)


@pytest.mark.parametrize("block_class", list(PROGRAMS), ids=lambda c: c.__name__)
def test_review_program_equals_its_oracle_or_is_refused_at_its_line(block_class):
    """``key=len`` (and ``map(len, ...)``, ``len`` under another name) measured a Symbol's
    outputs, 1, hybridized: another order or sum; a step's ``parts.sort()``/``.remove()``
    raised MXNet's NotImplementedForSymbol; a step's own container read a Python iterator
    made before the loop, once while tracing, and so did library code and helpers given it;
    a ``match`` capture counted as a new list; ``accumulate(iterable=x)`` and
    ``parts.extend(x)`` saw the whole Symbol as one item; a set given a tensor raised
    ``TypeError: unhashable type: 'Symbol'``; ``islice(x, 1, None)`` was refused. Now each equals plain Python or
    is refused at its line."""
    result = _classified(block_class)
    assert not hostile_harness.not_equal_or_refused(result), result
    kinds = {mode: kind for mode, (kind, _) in result.items()}
    want = "refused" if block_class in REFUSED else "equal"
    assert kinds == {"eager": "equal", "hybrid": want}, result


class TopLevelSortOfTensors(HybridBlock):
    """``parts.sort()`` of two rows, outside any tensor if or loop."""

    @autograph
    def hybrid_forward(self, F, x):
        parts = [x[0], x[1]]
        parts.sort()
        return parts[0]


def test_a_lists_sort_of_tensors_outside_a_region_names_the_line():
    """Outside a tensor if or loop, ``parts.sort()`` of tensors while hybridizing is refused
    at its line, not MXNet's NotImplementedForSymbol."""
    err = hostile_harness.hybridized_error(TopLevelSortOfTensors, TALL[0][0])
    line = hostile_harness.line_in(__file__, "        parts.sort()", TopLevelSortOfTensors)
    assert str(err).startswith(f"{__file__}:{line}: parts.sort(): .sort() of a list of "
                               f"tensors while hybridizing: it compares them"), err


def test_a_steps_list_extended_by_a_tensor_is_refused_at_the_call():
    """(It was gluon_cf.foreach's state shapes differing: the list held the whole Symbol.)"""
    err = hostile_harness.hybridized_error(StepListExtendedByTensor, ROWS[0][0])
    line = hostile_harness.line_in(__file__, "            parts.extend(F.stack(",
                                     StepListExtendedByTensor)
    assert str(err).startswith(f"{__file__}:{line}: parts.extend(F.stack(row, h * 0.5)): "
                               f"list.extend() of a tensor: while hybridizing"), err
