"""Issue 24, twenty-third round, review b: library code converted code calls with a tensor it
iterates (NOTE [a tensor iterated by library code]) where the Symbol is not one of the call's
own arguments: held by a ``functools.partial``, an item of a list argument
(``itertools.chain.from_iterable([x, y])``, a C class's method), or iterated lazily after
the call returned (``heapq.merge(x)``, a generator). Hybridized each silently saw the whole
array as one item; now rows as eagerly (or refused at the line). Oracle: the plain Python
function on NDArrays (``hybrid_forward.__wrapped__``), eager and hybridized with gradients
(``hostile_harness.classify``). The user's functions given to library code that takes them
as values (``pickle.dumps``, ``copy.copy``, ``functools.wraps``) are given unconverted (the
converted one failed to pickle, was not ``is`` the function: eagerly too). And that MXNet's own iteration of Symbols, with gluon_cf
imported, is MXNet's."""
import copy
import functools
import heapq
import itertools
import pickle

import mxnet as mx
import pytest
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
ROWS = ([hostile_harness.rand(4, 3, seed=2301)], [hostile_harness.rand(2, 3, seed=2302) + 1])
COLUMN = ([hostile_harness.rand(4, 1, seed=2303)], [hostile_harness.rand(2, 1, seed=2304)])


@program(*ROWS)
class ChainFromIterableOfTensors(HybridBlock):
    """``itertools.chain.from_iterable([x, y])``: the Symbols are items of a list argument,
    and chain iterates them lazily, after the call (hybridized: 2 items, not 2 T rows)."""

    @autograph
    def hybrid_forward(self, F, x):
        rows = list(itertools.chain.from_iterable([x, x * 2]))
        return F.stack(*rows[-3:]) * len(rows)


@program(*COLUMN)
class HeapqMergeOfRows(HybridBlock):
    """``heapq.merge(x)``, a library generator: it iterates ``x`` when consumed, after the
    call returned (hybridized: the whole array as one item)."""

    @autograph
    def hybrid_forward(self, F, x):
        rows = list(heapq.merge(x))
        return F.stack(*rows[-2:]) * len(rows)


@program(*ROWS)
class PartialHoldingTheTensor(HybridBlock):
    """``functools.partial(list, x)()``: the Symbol is in the partial, the call has no
    argument (hybridized: a list of one item). ``list`` measures it: refused at the line."""

    @autograph
    def hybrid_forward(self, F, x):
        rows = functools.partial(list, x)()
        return F.stack(*rows[-2:]) * len(rows)


def _doubled(v):
    return v * 2


@program(*ROWS)
class PickledHelper(HybridBlock):
    """``pickle.dumps(helper)``: the converted helper was pickled, "not the same object as
    ..._doubled" (PicklingError, eagerly too)."""

    @autograph
    def hybrid_forward(self, F, x):
        return _doubled(x) * (len(pickle.dumps(_doubled)) > 0)


@program(*ROWS)
class CopiedHelperIsItself(HybridBlock):
    """``copy.copy(f) is f`` and ``functools.wraps(f)(g).__wrapped__ is f``: False, eagerly
    too (the library was given the converted function)."""

    @autograph
    def hybrid_forward(self, F, x):
        same = copy.copy(_doubled) is _doubled
        wrapper = functools.wraps(_doubled)(lambda v: v + 1)
        return _doubled(x) * float(same) + wrapper(x) * float(wrapper.__wrapped__ is _doubled)


EQUAL = [ChainFromIterableOfTensors, HeapqMergeOfRows, PickledHelper, CopiedHelperIsItself]


@pytest.mark.parametrize("block_class", EQUAL, ids=lambda c: c.__name__)
def test_library_code_given_a_tensor_or_a_function_as_a_value_is_plain_pythons(block_class):
    result = hostile_harness.classify(block_class, PROGRAMS[block_class], [__file__],
                                      export=False)
    assert result == {"eager": ("equal", ""), "hybrid": ("equal", "")}, result


def test_a_partial_holding_the_tensor_is_refused_at_the_line():
    result = hostile_harness.classify(PartialHoldingTheTensor,
                                      PROGRAMS[PartialHoldingTheTensor], [__file__],
                                      export=False)
    assert result["eager"] == ("equal", ""), result
    assert result["hybrid"][0] == "refused", result
    net = PartialHoldingTheTensor()
    net.hybridize()
    with pytest.raises(gluon_cf.AutographError) as info:
        net(mx.nd.array(ROWS[0][0]))
    line = PartialHoldingTheTensor.hybrid_forward.__wrapped__.__code__.co_firstlineno + 2
    assert str(info.value).startswith(
        f"{__file__}:{line}: rows = functools.partial(list, x)(): "), info.value


def test_mxnet_symbol_iteration_is_mxnets_outside_converted_code():
    """The patched ``Symbol.__iter__``/``__len__`` (py_builtins) change nothing for code that
    is not a library call from converted code: a Group's outputs, a split's, one output."""
    a, b = mx.sym.var("a"), mx.sym.var("b")
    group = mx.sym.Group([a, b * 2, a + b])
    assert [s.list_outputs()[0] for s in group] == group.list_outputs() and len(group) == 3
    split = mx.sym.split(a, num_outputs=3)
    assert len(split) == 3 and len(list(split)) == 3
    assert len(a) == 1 and [s.name for s in a] == ["a"]
    assert list(heapq.merge(a))[0].name == "a"        # library code, not from converted code


def _added(F, x, n):
    for _ in range(n):
        x = functools.partial(F.broadcast_add, x * 0 + 1)(x)
    return x


def test_a_library_call_from_converted_code_does_not_read_its_partials_arrays(monkeypatch):
    """``functools.partial(F.broadcast_add, a)(x)`` eagerly: the check of library calls
    (``side_effects.lent``) took the partial's repr for its name on every call, which reads
    the NDArray it holds (asnumpy: a wait and a copy; 4-6x the plain loop for a 300x300
    array); now only when it refuses. Values as plain Python's."""
    reads = []
    original = mx.nd.NDArray.__repr__
    monkeypatch.setattr(mx.nd.NDArray, "__repr__", lambda a: reads.append(1) or original(a))
    x = mx.nd.array(ROWS[0][0])
    got = autograph(_added)(mx.nd, x, 3)
    assert reads == []
    assert (got.asnumpy() == _added(mx.nd, x, 3).asnumpy()).all()


class _CountingKey:
    """A key of a user class that counts its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, v):
        self.calls += 1
        return -v


@program(*ROWS)
class CallableObjectKeyCountsInFor(HybridBlock):
    """``sorted(..., key=counting_object)`` in a tensor for: its count ran while tracing only
    (hybridized silently 2 for any row count; eagerly 2 per row). Refused at its line."""

    @autograph
    def hybrid_forward(self, F, x):
        key = _CountingKey()
        h = F.zeros_like(x[0])
        for row in x:
            h = h + row * sorted([3, 1], key=key)[0]
        return h * key.calls


class _Scaled:
    def __init__(self, k):
        self.k = k

    def __call__(self, v):
        return v * self.k


@program(*ROWS)
class CallableObjectsMappedAndKeyed(HybridBlock):
    """A user callable object given to map and as max's key, without side effects: equal."""

    @autograph
    def hybrid_forward(self, F, x):
        parts = list(map(_Scaled(2.0), [x, x + 1]))
        best = max([(1.0, parts[0]), (3.0, parts[1])], key=_First())
        return best[1] + sum(map(_Scaled(3.0), [x]))


class _First:
    def __call__(self, pair):
        return pair[0]


def test_a_user_callable_object_given_as_a_key_runs_converted():
    result = hostile_harness.classify(CallableObjectKeyCountsInFor,
                                      PROGRAMS[CallableObjectKeyCountsInFor], [__file__],
                                      export=False)
    assert result["eager"] == ("equal", ""), result
    net = CallableObjectKeyCountsInFor()
    net.hybridize()
    with pytest.raises(gluon_cf.AutographError) as info:
        net(mx.nd.array(ROWS[0][0]))
    line = _CountingKey.__call__.__code__.co_firstlineno + 1
    assert str(info.value).startswith(f"{__file__}:{line}: self.calls += 1: "), info.value
    result = hostile_harness.classify(CallableObjectsMappedAndKeyed,
                                      PROGRAMS[CallableObjectsMappedAndKeyed], [__file__],
                                      export=False)
    assert result == {"eager": ("equal", ""), "hybrid": ("equal", "")}, result
