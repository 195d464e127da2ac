"""Issue 24, twenty-fourth round: autograph blocks in styles the earlier rounds left out:
TensorFlow 2 ports (TensorArray-like user classes, ``while`` on a reduction, early returns in
helpers), PyTorch ports (greedy decoders with ``.min()``/``.max()`` method conditions, ``cat``
of collected steps, preallocated outputs written by index, ``.clip``/``.relu`` methods), loop
state in ``dataclasses.replace``/``_replace``/``{**d}``/``SimpleNamespace``/attribute dicts,
``yield from`` generators, ``*args``/``**kwargs`` pass-through helpers, ``lru_cache``d and
user-decorated helpers, ``logging``/``warnings`` in tensor loops, ``isinstance`` checks,
``try``/``except`` around tensor code, Python builtins given tensors (``min``, ``max``,
``round``, ``float``), ``.asnumpy()`` in graph regions, and the leftovers of item 1 (``len``/
``enumerate``/``zip`` of a while's list, a ternary of numbers, ``functools.reduce`` over a
tensor). ``PROGRAMS`` maps each block class to its input lists; the oracle is the plain
Python function on NDArrays (``hybrid_forward.__wrapped__``)."""
import collections
import contextlib
import dataclasses
import functools
import itertools
import logging
import math
import operator
import types
import warnings

from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

STATES = ([rand(4, seed=240)], [floats(5.0, 1.0)], [floats(-3.0, -2.0)])
ROWS = ([rand(4, 3, seed=241)], [rand(1, 3, seed=242) * 2], [rand(3, 3, seed=243) + 1])
WHILE_STATES = STATES + ([floats(8.0, 4.0)],)
PAIRS = ([rand(4, 3, seed=244), rand(4, 3, seed=245)], [rand(2, 3, seed=246) + 1,
                                                          rand(2, 3, seed=247)])
LOG = logging.getLogger("hostile_programs24a")


class _Dense(HybridBlock):
    def __init__(self, units=3):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(units, in_units=units, flatten=False)


# ---- TensorFlow 2 ports -------------------------------------------------------------------

class _TensorArray:
    """A user's TensorArray: ``write`` returns a new array (TF's functional style)."""

    def __init__(self, items=()):
        self.items = tuple(items)

    def write(self, v):
        return _TensorArray(self.items + (v,))

    def stack(self, F):
        return F.stack(*self.items)


@program(*ROWS)
class FunctionalTensorArrayInFor(HybridBlock):
    """``ta = ta.write(h)`` per row, ``ta.stack()`` after the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        ta = _TensorArray([x[0] * 0])
        h = x[0] * 0
        for row in x:
            h = F.tanh(h + row)
            ta = ta.write(h)
        return ta.stack(F)


class _MutableTensorArray:
    def __init__(self):
        self.items = []

    def write(self, v):
        self.items.append(v)
        return self


@program(*ROWS)
class MutatingTensorArrayInFor(HybridBlock):
    """``ta.write(h)`` appending to the object's own list per row (a side effect)."""

    @autograph
    def hybrid_forward(self, F, x):
        ta = _MutableTensorArray()
        h = x[0] * 0
        for row in x:
            h = h * 0.5 + row
            ta.write(h)
        return F.stack(*ta.items)


@program(*WHILE_STATES)
class WhileReduceAnyStyle(HybridBlock):
    """``while F.max(h < 3) > 0`` (TF's ``reduce_any``)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        while F.max(h < 3) > 0:
            gluon_cf.max_iterations(20)
            h = h + F.abs(h) * 0.5 + 0.25
        return h


@program(*WHILE_STATES)
class WhileReduceAllStyleMethod(HybridBlock):
    """``while (h < 6).min() > 0``: the method form, PyTorch's ``.all()``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        while (h < 6).min() > 0:
            gluon_cf.max_iterations(20)
            h = h.abs() * 1.5 + 0.5
        return h


@program(*ROWS)
class TfRangeWithIndexedRead(HybridBlock):
    """``for i in range(n): h = h + x[i]`` with ``n = x.shape[0]`` computed by ``F``."""

    @autograph
    def hybrid_forward(self, F, x):
        n = F.shape_array(x)[0]
        i = F.zeros((1,))
        h = x[0] * 0
        while i < n:
            h = h * 0.5 + F.take(x, i)[0]
            i = i + 1
        return h


@program(*STATES)
class TfCondStyleLambdas(HybridBlock):
    """TF's ``tf.cond(pred, lambda: a, lambda: b)`` ported as a helper taking lambdas."""

    @staticmethod
    def _cond(pred, true_fn, false_fn):
        if pred:
            return true_fn()
        return false_fn()

    @autograph
    def hybrid_forward(self, F, x):
        return self._cond(F.sum(x) > 0, lambda: x * 2, lambda: x - 1)


# ---- PyTorch ports --------------------------------------------------------------------------

class _GreedyBase(_Dense):
    EOS = 0.9


@program(*ROWS)
class TorchGreedyRangeBreakAll(_GreedyBase):
    """``for t in range(max_len): ... if (tok > eos).min() > 0: break`` then ``cat``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        outs = []
        for t in range(5):
            h = F.tanh(self.fc(h.reshape((1, -1)))).reshape((-1,))
            outs.append(h.reshape((1, -1)))
            if (h > -self.EOS).min() > 0 and (h < self.EOS).min() > 0:
                break
        return F.concat(*outs, dim=0)


@program(*ROWS)
class PreallocatedOutputsWrittenByIndex(HybridBlock):
    """PyTorch's ``outputs = zeros(T, H); for t in range(T): outputs[t] = h``."""

    @autograph
    def hybrid_forward(self, F, x):
        outputs = F.zeros_like(x)
        h = x[0] * 0
        for t in range(3):
            h = F.tanh(h + x[0] * (t + 1))
            outputs[t:t + 1] = h.reshape((1, -1))
        return outputs + x

    @staticmethod
    def oracle_where_plain_fails(net, F, x):
        """(Plain MXNet refuses the in-place write of a recorded array: the same rows
        stacked; round 25c, NOTE [autograph item assignment].)"""
        h, rows = x[0] * 0, []
        for t in range(3):
            h = F.tanh(h + x[0] * (t + 1))
            rows.append(h)
        return F.stack(*(rows + [x[0] * 0] * (len(x) - 3))[:len(x)]) + x


@program(*WHILE_STATES)
class ClipAndReluMethodsInWhile(HybridBlock):
    """``h.clip(-1, 1)`` and ``h.relu()`` methods (ported ``clamp``/``relu``)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        while h.sum() < 10:
            gluon_cf.max_iterations(20)
            h = h.clip(-1, 1).relu() + h.abs() + 0.5
        return h


@program(*ROWS)
class TorchStyleItemInCondition(HybridBlock):
    """``if h.sum().asscalar() > 0`` in a tensor for (``.item()`` ported)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            if row.sum().asscalar() > 0:
                h = h + row
        return h


@program(*ROWS)
class AsnumpyInTensorLoop(HybridBlock):
    """``row.asnumpy().max()`` in a tensor for (debug-style read)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h + row * float(row.asnumpy().max())
        return h


@program(*ROWS)
class TorchCatThenSplitBack(HybridBlock):
    """Collected steps concatenated then split back into a Python list."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x[0]
        for row in x:
            h = h * 0.5 + row
            outs.append(h.reshape((1, -1)))
        cat = F.concat(*outs, dim=0)
        return F.sum(cat, axis=0) + outs[-1].reshape((-1,))


@program(*ROWS)
class MaskedFillLikeTorch(HybridBlock):
    """``h = F.where(row > 0, h, F.ones_like(h) * -1e4)`` each step (``masked_fill``)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = F.where(row > 0, h + row, F.ones_like(h) * -2)
        return F.softmax(h)


@program(*ROWS)
class NoGradDetachInLoop(HybridBlock):
    """``h = h.detach()`` every other step (truncated BPTT), Python step count."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for t in range(4):
            h = F.tanh(h + x[0])
            if t % 2 == 1:
                h = F.stop_gradient(h)
        return h


# ---- loop state in records ------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _State:
    h: object
    c: object


@program(*ROWS)
class DataclassReplaceInFor(HybridBlock):
    """``state = dataclasses.replace(state, h=...)`` per row."""

    @autograph
    def hybrid_forward(self, F, x):
        state = _State(x[0] * 0, x[0] * 0 + 1)
        for row in x:
            state = dataclasses.replace(state, h=F.tanh(state.h + state.c * row))
            state = dataclasses.replace(state, c=state.c * 0.9)
        return state.h + state.c


_Pair = collections.namedtuple("_Pair", ["h", "n"])


@program(*WHILE_STATES)
class NamedTupleReplaceInWhile(HybridBlock):
    """``st = st._replace(h=...)`` in a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        st = _Pair(x, x * 0)
        while F.sum(st.h) < 10:
            gluon_cf.max_iterations(20)
            st = st._replace(h=F.abs(st.h) * 2 + 1, n=st.n + 1)
        return st.h + st.n


@program(*ROWS)
class DictSpreadUpdateInFor(HybridBlock):
    """``state = {**state, "h": ...}`` per row."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0] * 0, "k": x[0] * 0 + 2}
        for row in x:
            state = {**state, "h": state["h"] * 0.5 + row * state["k"]}
        return state["h"]


@program(*ROWS)
class SimpleNamespaceAttributeInFor(HybridBlock):
    """``s.h = s.h + row`` on a ``types.SimpleNamespace`` made in the function."""

    @autograph
    def hybrid_forward(self, F, x):
        s = types.SimpleNamespace(h=x[0] * 0)
        for row in x:
            s.h = s.h * 0.5 + row
        return s.h


class _AttrDict(dict):
    __getattr__ = dict.__getitem__
    __setattr__ = dict.__setitem__


@program(*STATES)
class AttrDictStateInIf(HybridBlock):
    """An attribute-dict's item set in one branch of a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        s = _AttrDict(h=x)
        if F.sum(x) > 0:
            s.h = x * 3
        return s.h + 1


@program(*ROWS)
class MutableDataclassAttributeInFor(HybridBlock):
    """A mutable dataclass made in the function whose field a tensor for reassigns."""

    @dataclasses.dataclass
    class _Acc:
        total: object

    @autograph
    def hybrid_forward(self, F, x):
        acc = self._Acc(x[0] * 0)
        for row in x:
            acc.total = acc.total + row * 2
        return acc.total


@program(*ROWS)
class DictOfListsCollected(HybridBlock):
    """``hist["h"].append(h)`` (a list inside a dict) per row, stacked after."""

    @autograph
    def hybrid_forward(self, F, x):
        hist = {"h": []}
        h = x[0] * 0
        for row in x:
            h = h + row
            hist["h"].append(h)
        return F.stack(*hist["h"])


@program(*ROWS)
class TupleStateRebuiltWithStar(HybridBlock):
    """``state = (*state[1:], new)``: a sliding window of the last two states."""

    @autograph
    def hybrid_forward(self, F, x):
        state = (x[0] * 0, x[0] * 0)
        for row in x:
            state = (*state[1:], state[0] * 0.5 + row)
        return state[0] + state[1] * 2


# ---- generators, pass-through and decorated helpers ------------------------------------------

def _rows_doubled(x):
    yield from (r * 2 for r in x)


@program(*ROWS)
class YieldFromGeneratorOverTensor(HybridBlock):
    """``for r in _rows_doubled(x)`` where the helper is ``yield from`` over the rows."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in _rows_doubled(x):
            h = h * 0.5 + r
        return h


def _pairs(items):
    for a, b in zip(items, items[1:]):
        yield a, b


@program(*ROWS)
class GeneratorOverCollectedPairs(HybridBlock):
    """A generator of neighbouring pairs of a for's collected list."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [x[0]]
        for row in x:
            outs.append(outs[-1] * 0.5 + row)
        total = x[0] * 0
        for a, b in _pairs(outs):
            total = total + a * b
        return total


def _apply(fn, *args, **kwargs):
    return fn(*args, **kwargs)


@program(*ROWS)
class ArgsKwargsPassThroughInFor(HybridBlock):
    """``_apply(F.broadcast_mul, h, row, **{})`` and a keyword pass-through per row."""

    @staticmethod
    def _mix(a, b, *, w=1.0):
        return a * w + b

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0 + 1
        for row in x:
            h = _apply(self._mix, h, row, w=0.5)
            h = _apply(F.tanh, h)
        return h


@functools.lru_cache(maxsize=None)
def _coefficient(k):
    return 0.5 ** k


@program(*ROWS)
class LruCachedHelperInTensorFor(HybridBlock):
    """An ``lru_cache`` helper of a Python constant called per row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h * _coefficient(1) + row * _coefficient(2)
        return h


def _scaled(factor):
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args):
            return fn(*args) * factor
        return wrapper
    return decorate


@_scaled(2.0)
def _gate(F, v):
    if F.sum(v) > 0:
        return v
    return -v


@program(*ROWS)
class DecoratedHelperWithTensorIf(HybridBlock):
    """A user decorator around a helper that has a tensor if and two returns."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h * 0.25 + _gate(F, row)
        return h


_calls = []


def _counted(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        _calls.append(fn.__name__)
        out = fn(*args)
        _calls.clear()
        return out
    return wrapper


@_counted
def _step(v, r):
    return v * 0.5 + r


@program(*ROWS)
class CountingDecoratorInTensorFor(HybridBlock):
    """A decorator recording calls in a module list, around a helper called per row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = _step(h, row)
        return h + len(_calls)


@program(*STATES)
class PartialOfOperatorMulInWhile(HybridBlock):
    """``functools.partial(operator.mul, 2.0)`` and ``operator.add`` in a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        double = functools.partial(operator.mul, 2.0)
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = operator.add(double(F.abs(h)), 1)
        return h


class _Scaler:
    def __init__(self, k):
        self.k = k

    def __call__(self, v):
        return v * self.k


@program(*ROWS)
class CallableObjectMadeInLoopBody(HybridBlock):
    """A callable object made each step with a Python constant, called on the row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h + _Scaler(0.5)(row)
        return h


@program(*ROWS)
class MethodReferenceTakenBeforeLoop(HybridBlock):
    """``step = self._step`` bound method stored before a tensor for."""

    def _step(self, h, r):
        return F_tanh(h + r)

    @autograph
    def hybrid_forward(self, F, x):
        step = self._step
        h = x[0] * 0
        for row in x:
            h = step(h, row)
        return h


def F_tanh(v):
    return v.tanh()


# ---- logging, warnings, isinstance, try/except ----------------------------------------------

@program(*ROWS)
class LoggingDebugInTensorFor(HybridBlock):
    """``LOG.debug("h=%s", h)`` per row (disabled: never formatted)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h + row
            LOG.debug("h=%s", h)
        return h


@program(*STATES)
class WarningsCatchInTensorIf(HybridBlock):
    """``with warnings.catch_warnings():`` around a tensor if's branch."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                x = x * 2
        return x


@program(*ROWS)
class NullcontextInTensorFor(HybridBlock):
    """``with contextlib.nullcontext():`` inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            with contextlib.nullcontext():
                h = h * 0.5 + row
        return h


@program(*ROWS)
class IsinstanceOfListInLoop(HybridBlock):
    """``isinstance(state, (list, tuple))`` deciding in a tensor for (a Python fact)."""

    @autograph
    def hybrid_forward(self, F, x):
        state = [x[0] * 0]
        for row in x:
            if isinstance(state, (list, tuple)):
                state = [state[0] + row]
            else:
                state = state + row
        return state[0]


@program(*ROWS)
class TryExceptIndexErrorInTensorFor(HybridBlock):
    """``try: w = weights[k] except IndexError:`` with a Python constant index."""

    WEIGHTS = (0.5, 0.25)

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            try:
                w = self.WEIGHTS[5]
            except IndexError:
                w = 1.0
            h = h + row * w
        return h


@program(*STATES)
class TryExceptAroundTensorIf(HybridBlock):
    """A tensor if inside a try whose except never runs."""

    @autograph
    def hybrid_forward(self, F, x):
        try:
            if F.sum(x) > 0:
                x = x * 2
            else:
                x = x + 1
        except ValueError:
            x = x * 0
        return x


@program(*STATES)
class RaiseInTensorIfCaughtOutside(HybridBlock):
    """A ``raise`` under a tensor if caught by the caller's except (a value by exception)."""

    @autograph
    def hybrid_forward(self, F, x):
        try:
            if F.sum(x) > 100:
                raise ValueError("too big")
            y = x * 2
        except ValueError:
            y = x * 0
        return y


@program(*ROWS)
class AssertOfTensorInLoop(HybridBlock):
    """``assert F.min(h) > -100`` inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h + row
            assert F.min(h) > -100, "diverged"
        return h


@program(*ROWS)
class FStringOfShapeInTensorFor(HybridBlock):
    """An f-string of a Python counter kept in a list of names (no tensor formatted)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        tag = "step"
        for row in x:
            tag = f"{tag}+"
            h = h + row
        return h * len(tag)


# ---- Python builtins given tensors ----------------------------------------------------------

@program(*PAIRS)
class BuiltinMaxOfTwoTensorsInLoop(HybridBlock):
    """``max(a, b)`` of two rows' sums inside a tensor for (a comparison's truth)."""

    @autograph
    def hybrid_forward(self, F, x, y):
        h = x[0] * 0
        for a, b in zip(x, y):
            h = h + max(F.sum(a), F.sum(b))
        return h


@program(*STATES)
class BuiltinMinWithNumber(HybridBlock):
    """``min(F.sum(x), 1.0)`` at the top level."""

    @autograph
    def hybrid_forward(self, F, x):
        return x * min(F.sum(x), 1.0)


@program(*STATES)
class BuiltinRoundOfTensor(HybridBlock):
    """``round(x)`` (NDArray has ``__round__``? plain Python decides)."""

    @autograph
    def hybrid_forward(self, F, x):
        return x + F.round(x * 2)


@program(*STATES)
class FloatOfSumInTensorWhile(HybridBlock):
    """``float(F.sum(h))`` inside a tensor while: a value known only when the graph runs."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        k = 0.0
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            k = float(F.sum(h))
        return h + k


@program(*STATES)
class IntOfArgmaxTopLevel(HybridBlock):
    """``int(F.argmax(x, axis=0))`` used as a Python index."""

    @autograph
    def hybrid_forward(self, F, x):
        k = int(F.argmax(x, axis=0).asscalar())
        return x * (k + 1)


@program(*ROWS)
class SumBuiltinOverTensorRows(HybridBlock):
    """``sum(x)`` of a tensor: Python adds its rows to 0."""

    @autograph
    def hybrid_forward(self, F, x):
        return sum(x) * 2


@program(*ROWS)
class ListOfTensor(HybridBlock):
    """``list(x)``: the rows, stacked back reversed."""

    @autograph
    def hybrid_forward(self, F, x):
        rows = list(x)
        return F.stack(*rows[::-1])


@program(*ROWS)
class AllBuiltinOverRowSums(HybridBlock):
    """``all(F.sum(r) > -10 for r in x)`` deciding a Python if."""

    @autograph
    def hybrid_forward(self, F, x):
        if all(F.sum(r) > -10 for r in x):
            return x * 2
        return x


@program(*ROWS)
class MaxWithKeyOverRowsNoTruth(HybridBlock):
    """``max(range(n), key=lambda i: ...)`` of Python floats (no tensor truth)."""

    @autograph
    def hybrid_forward(self, F, x):
        weights = [0.1, 0.7, 0.2]
        best = max(range(3), key=lambda i: weights[i])
        return x * best


@program(*STATES)
class AbsAndDivmodPythonOnly(HybridBlock):
    """Python ``abs``/``divmod``/``math.floor`` of numbers beside tensors."""

    @autograph
    def hybrid_forward(self, F, x):
        q, r = divmod(7, 3)
        return x * abs(-q) + math.floor(r + 0.5)


# ---- loops over dicts, items, nested loops ---------------------------------------------------

@program(*WHILE_STATES)
class DictItemsLoopInsideWhile(HybridBlock):
    """``for name, w in weights.items()`` (Python) inside a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        weights = {"a": 1.5, "b": 1.0}
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            for name, w in weights.items():
                h = F.abs(h) * w + (1 if name == "a" else 0.5)
        return h


@program(*ROWS)
class ItertoolsProductInsideTensorFor(HybridBlock):
    """``itertools.product(range(2), range(2))`` in a tensor for's body."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            for i, j in itertools.product(range(2), range(2)):
                h = h + row * (i + j) * 0.25
        return h


@program(*PAIRS)
class EnumerateZipNestedUnpackOverTensors(HybridBlock):
    """``for i, (a, b) in enumerate(zip(x, y))``."""

    @autograph
    def hybrid_forward(self, F, x, y):
        h = x[0] * 0
        for i, (a, b) in enumerate(zip(x, y)):
            h = h * 0.5 + a * b + i
        return h


@program(*ROWS)
class ReversedRangeIndexingOfShape(HybridBlock):
    """``for t in range(T - 1, -1, -1): h = h + x[t]`` with ``T`` from a Python constant."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for t in range(0, -1, -1):
            h = h * 0.5 + x[t]
        return h


@program(*ROWS)
class NestedTensorForsBreakOuterWithFlag(HybridBlock):
    """Inner tensor for with a tensor break, outer checking a flag set inside."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            for v in row:
                h = h + v
                if F.sum(h) > 1:
                    break
            h = h * 0.5
        return h


@program(*WHILE_STATES)
class WhileWithContinueAndCounter(HybridBlock):
    """A tensor while with a tensor continue skipping an update."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        i = F.zeros((1,))
        acc = x * 0
        while i < 4:
            i = i + 1
            h = F.abs(h) + 1
            if F.sum(h) > 12:
                continue
            acc = acc + h
        return acc + h


@program(*ROWS)
class ForOverRowsWithPythonCounterAfter(HybridBlock):
    """A Python counter ``n += 1`` in a tensor for, used after it."""

    @autograph
    def hybrid_forward(self, F, x):
        n = 0
        h = x[0] * 0
        for row in x:
            h = h + row
            n += 1
        return h / n


@program(*ROWS)
class RowsOfTransposeViaSwapaxes(HybridBlock):
    """``for col in F.swapaxes(x, 0, 1)`` a tensor for over columns."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[:, 0] * 0
        for col in F.swapaxes(x, 0, 1):
            h = F.tanh(h + col)
        return h


# ---- the collected list read after a tensor while --------------------------------------------

def _while_collect(F, x):
    outs = []
    h = x
    while F.sum(h) < 10:
        gluon_cf.max_iterations(20)
        h = F.abs(h) * 2 + 1
        outs.append(h)
    return outs


@program(*WHILE_STATES)
class LenOfWhileListInPythonIf(HybridBlock):
    """``if len(outs) > 2:`` of a while's list (item 3)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = _while_collect(F, x)
        if len(outs) > 2:
            return x * 2
        return x + 1


@program(*WHILE_STATES)
class ZipWhileListWithItsShift(HybridBlock):
    """``zip(outs, outs[1:])`` of a while's list (item 3)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = _while_collect(F, x)
        acc = x * 0
        for a, b in zip(outs, outs[1:]):
            acc = acc + a - b
        return acc


@program(*WHILE_STATES)
class StarUnpackWhileList(HybridBlock):
    """``first, *rest = outs`` of a while's list (may hold none)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = _while_collect(F, x)
        first, *rest = outs + [x]
        return first + len(rest)


@program(*WHILE_STATES)
class StackOfWhileListReturnedByHelper(HybridBlock):
    """A helper's while list summed by ``F.add_n`` with the input."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.add_n(x, *_while_collect(F, x))


@program(*WHILE_STATES)
class ReduceOperatorAddOverWhileList(HybridBlock):
    """``functools.reduce(operator.add, outs, x)`` of a while's list."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = _while_collect(F, x)
        return functools.reduce(operator.add, outs, x)


# ---- the other leftovers ---------------------------------------------------------------------

@program(*ROWS)
class ReduceLambdaOverTensorWithInit(HybridBlock):
    """``functools.reduce(lambda a, r: a * 0.5 + r, x, init)`` over a tensor (item 3)."""

    @autograph
    def hybrid_forward(self, F, x):
        return functools.reduce(lambda a, r: a * 0.5 + r, x, x[0] * 0)


@program(*ROWS)
class ReduceOperatorMulOverTensor(HybridBlock):
    """``functools.reduce(operator.mul, x)`` over a tensor (item 3)."""

    @autograph
    def hybrid_forward(self, F, x):
        return functools.reduce(operator.mul, x) + 1


@program(*STATES)
class TernaryOfNumbersAssigned(HybridBlock):
    """``scale = 2.0 if F.sum(x) > 0 else 0.5`` then used in tensor arithmetic (item 3)."""

    @autograph
    def hybrid_forward(self, F, x):
        scale = 2.0 if F.sum(x) > 0 else 0.5
        return x * scale


@program(*STATES)
class TernaryOfNumbersAsRangeBound(HybridBlock):
    """``n = 3 if F.sum(x) > 0 else 1`` then ``range(n)``: a count only the run knows."""

    @autograph
    def hybrid_forward(self, F, x):
        n = 3 if F.sum(x) > 0 else 1
        h = x
        for _ in range(n):
            h = h * 0.5 + 1
        return h


@program(*STATES)
class IfAssigningNumbersThenArithmetic(HybridBlock):
    """``if F.sum(x) > 0: k = 2.0 else: k = 0.5`` (the statement form)."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            k = 2.0
        else:
            k = 0.5
        return x * k


# ---- closures and side effects in other shapes -----------------------------------------------

@program(*ROWS)
class LambdaListBuiltInTensorLoop(HybridBlock):
    """``fns.append(lambda v, r=row: v + r)`` per row, applied after (the rows as defaults)."""

    @autograph
    def hybrid_forward(self, F, x):
        fns = []
        for row in x:
            fns.append(lambda v, r=row: v + r)
        h = x[0] * 0
        for fn in fns:
            h = fn(h)
        return h


@program(*STATES)
class PropertyWithSideEffectInWhile(HybridBlock):
    """A property whose getter counts reads, read in a tensor while."""

    def __init__(self):
        super().__init__()
        self.reads = 0

    @property
    def rate(self):
        self.reads += 1
        return 2.0

    @autograph
    def hybrid_forward(self, F, x):
        self.reads = 0
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * self.rate + 1
        return h + self.reads


@program(*ROWS)
class ClassmethodFactoryPerRow(HybridBlock):
    """A classmethod returning a Python constant, called per row."""

    SCALE = 0.5

    @classmethod
    def _scale(cls):
        return cls.SCALE

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h * self._scale() + row
        return h


@program(*STATES)
class SelfListAppendInTensorIf(HybridBlock):
    """``self.history.append(x)`` in a tensor if (a debug buffer)."""

    def __init__(self):
        super().__init__()
        self.history = []

    @autograph
    def hybrid_forward(self, F, x):
        self.history = []
        if F.sum(x) > 0:
            self.history.append(1)
        return x * (len(self.history) + 1)


@program(*ROWS)
class SetAddInTensorFor(HybridBlock):
    """``seen.add(k)`` of a Python int per row, its size used after."""

    @autograph
    def hybrid_forward(self, F, x):
        seen = set()
        h = x[0] * 0
        k = 0
        for row in x:
            seen.add(1)
            h = h + row
        return h * len(seen) + k


@program(*ROWS)
class CounterUpdateInTensorFor(HybridBlock):
    """``collections.Counter`` updated per row."""

    @autograph
    def hybrid_forward(self, F, x):
        counts = collections.Counter()
        h = x[0] * 0
        for row in x:
            counts["rows"] += 1
            h = h + row
        return h / counts["rows"]


@program(*STATES)
class ClosureReadsAfterTensorIfWithDefault(HybridBlock):
    """``def f(v, s=None): s = scale if s is None else s`` reading a variable an if changes."""

    @autograph
    def hybrid_forward(self, F, x):
        scale = x * 0 + 2

        def f(v, s=None):
            s = scale if s is None else s
            return v * s
        if F.sum(x) > 0:
            scale = scale + 3
        return f(x)


@program(*WHILE_STATES)
class GeneratorExpressionMadeBeforeWhile(HybridBlock):
    """A generator over a Python list made before a tensor while that reassigns what it
    reads, consumed after."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        gen = (h * w for w in (1.0, 2.0))
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
        return sum(gen)


@program(*ROWS)
class ClassDefinedInLoopBody(HybridBlock):
    """A class statement inside a tensor for, its method reading the row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            class Step:
                def apply(self, v):
                    return v * 0.5 + row
            h = Step().apply(h)
        return h


@program(*STATES)
class GlobalReadOfModuleConstantList(HybridBlock):
    """A module tuple read by index in a tensor while (no side effect)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * _WEIGHTS[1] + _WEIGHTS[0]
        return h


_WEIGHTS = (1.0, 2.0)


@program(*ROWS)
class SliceAugmentedAssignOnLocalArray(HybridBlock):
    """``acc[0:1] += row[0:1]`` on a local array per row."""

    @autograph
    def hybrid_forward(self, F, x):
        acc = F.zeros_like(x[0])
        for row in x:
            acc[0:1] += row[0:1]
        return acc * 2


@program(*ROWS)
class ItemAugmentedOnListOfTensors(HybridBlock):
    """``hs[1] += row`` on a Python list of two tensors per row."""

    @autograph
    def hybrid_forward(self, F, x):
        hs = [x[0] * 0, x[0] * 0]
        for row in x:
            hs[1] += row
            hs[0] = hs[0] + hs[1] * 0.5
        return hs[0] + hs[1]

    def oracle_where_plain_fails(self, F, x):
        hs = [x[0] * 0, x[0] * 0]
        for row in x:
            hs[1] = hs[1] + row
            hs[0] = hs[0] + hs[1] * 0.5
        return hs[0] + hs[1]


@program(*ROWS)
class DelOfLoopRowAfterUse(HybridBlock):
    """``del row`` at the end of a tensor for's body (freeing, ported)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h + row * 2
            del row
        return h


@program(*STATES)
class ChainedComparisonBothTensors(HybridBlock):
    """``if -1 < F.sum(x) < 1:``."""

    @autograph
    def hybrid_forward(self, F, x):
        if -1 < F.sum(x) < 1:
            return x * 3
        return x


@program(*STATES)
class NotOfIsNoneAndTensor(HybridBlock):
    """``if mask is not None and F.sum(x) > 0`` with ``mask = None``."""

    @autograph
    def hybrid_forward(self, F, x, mask=None):
        if mask is not None and F.sum(x) > 0:
            x = x * mask
        elif not F.sum(x) > 0:
            x = x - 1
        return x


@program(*ROWS)
class MapWithTwoIterablesOverTensors(HybridBlock):
    """``list(map(lambda a, b: a * b, x, x))`` stacked."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*list(map(lambda a, b: a * b, x, x)))


@program(*ROWS)
class FilterNoneOverCollected(HybridBlock):
    """``[o for o in outs if o is not None]`` of a tensor for's collected list."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x[0] * 0
        for row in x:
            h = h + row
            outs.append(h)
        return F.stack(*[o for o in outs if o is not None])


@program(*ROWS)
class WalrusInsideTensorForBody(HybridBlock):
    """``if (s := F.sum(row)) > 0: h = h + s`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            if (s := F.sum(row)) > 0:
                h = h + s
            else:
                h = h - s
        return h


@program(*ROWS)
class MinOfCollectedSumsPython(HybridBlock):
    """``min(outs, key=lambda o: float(o.sum().asscalar()))`` after a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x[0] * 0
        for row in x:
            h = h + row
            outs.append(h)
        return min(outs, key=lambda o: float(o.sum().asscalar()))


@program(*ROWS)
class SortedCollectedByPythonKey(HybridBlock):
    """``sorted(range(len(outs)), reverse=True)`` then indexing the collected list."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x[0] * 0
        for row in x:
            h = h + row
            outs.append(h)
        order = sorted(range(len(outs)), reverse=True)
        return F.stack(*[outs[i] for i in order])


# ---- more iteration shapes over tensors ------------------------------------------------------

COLUMN_PAIRS = ([rand(4, 2, seed=248)], [rand(1, 2, seed=249) + 1])


@program(*ROWS)
class EnumerateWithStartOverTensor(HybridBlock):
    """``for i, row in enumerate(x, start=1)``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for i, row in enumerate(x, start=1):
            h = h * 0.5 + row * i
        return h


@program(*ROWS)
class ZipTensorWithPythonRange(HybridBlock):
    """``for row, k in zip(x, range(100))``: the rows with their index."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row, k in zip(x, range(100)):
            h = h + row * (k + 1)
        return h


@program(*ROWS)
class ForOverTransposeAttribute(HybridBlock):
    """``for col in x.T`` (NumPy's attribute, on NDArray)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[:, 0] * 0
        for col in x.T:
            h = h * 0.5 + col
        return h


@program(*COLUMN_PAIRS)
class UnpackEachRowIntoTwo(HybridBlock):
    """``for a, b in x`` where each row holds two values."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0, 0:1] * 0
        for a, b in x:
            h = h + a * b
        return h


@program(*ROWS)
class LambdaWithTensorIfExpCalledPerRow(HybridBlock):
    """``f = lambda v: v * 2 if F.sum(v) > 0 else -v`` called in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        f = lambda v: v * 2 if F.sum(v) > 0 else -v  # noqa: E731
        h = x[0] * 0
        for row in x:
            h = h + f(row)
        return h


@program(*WHILE_STATES)
class IfExpOnCarryInWhile(HybridBlock):
    """``h = h * 2 if F.max(h) > 2 else h + 3`` inside a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 if F.max(h) > 2 else F.abs(h) + 3
        return h


@program(*ROWS)
class MatchOnPythonModeInTensorFor(HybridBlock):
    """``match self.mode:`` inside a tensor for."""

    mode = "mean"

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            match self.mode:
                case "sum":
                    h = h + row
                case "mean":
                    h = h * 0.5 + row * 0.5
        return h


@program(*ROWS)
class ForElseInsideTensorWhile(HybridBlock):
    """A Python for-else (no break) inside a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        i = F.zeros((1,))
        while i < 2:
            for k in range(2):
                h = h + k
            else:
                h = h * 0.5
            i = i + 1
        return h


@program(*ROWS)
class ReturnInsideWithInWhile(HybridBlock):
    """A return inside ``with contextlib.nullcontext():`` inside a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        i = F.zeros((1,))
        while i < 5:
            with contextlib.nullcontext():
                h = h * 1.5 + 1
                if F.sum(h) > 6:
                    return h
            i = i + 1
        return h - 1


@program(*ROWS)
class SumOfListCompWithArrayStart(HybridBlock):
    """``sum([F.tanh(r) for r in x], F.zeros_like(x[0]))``."""

    @autograph
    def hybrid_forward(self, F, x):
        return sum([F.tanh(r) for r in x], F.zeros_like(x[0]))


@program(*ROWS)
class WalrusInElifInsideTensorFor(HybridBlock):
    """``elif (m := F.max(row)) > 0.5: h = h + m`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            if F.sum(row) > 1:
                h = h + row
            elif (m := F.max(row)) > 0.5:
                h = h + m
            else:
                h = h - 1
        return h


@program(*WHILE_STATES)
class WalrusInIfInsideWhileReadAfterBranch(HybridBlock):
    """``if (d := F.abs(h) * 2) ... :`` in a tensor while, ``d`` read after the if."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            if F.sum(d := F.abs(h) * 2) > 3:
                h = d + 1
            else:
                h = d + 2
            h = h + d * 0
        return h


@program(*ROWS)
class WalrusInShortCircuitInsideTensorFor(HybridBlock):
    """``if F.sum(row) > 0 and (m := F.max(row)) > 0.2:`` (m bound only sometimes)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            if F.sum(row) > 0 and (m := F.max(row)) > 0.2:
                h = h + row
        return h


@program(*ROWS)
class NextOfGeneratorMadeOutsideLoop(HybridBlock):
    """``it = iter(x); first = next(it); for row in it`` (the rest of the rows)."""

    @autograph
    def hybrid_forward(self, F, x):
        it = iter(x)
        h = next(it)
        for row in it:
            h = h * 0.5 + row
        return h


# ---- what the user's except may catch, lists made inside a step -----------------------------

@program([floats(0.5)], [floats(-2.0)])
class TryAsscalarExceptException(HybridBlock):
    """``try: v = F.sum(x).asscalar() except Exception: v = 0.0`` (a broad except)."""

    @autograph
    def hybrid_forward(self, F, x):
        try:
            v = float(F.sum(x).asscalar())
        except Exception:
            v = 0.0
        return x * 2 + v


@program(*STATES)
class SuppressExceptionAroundFloat(HybridBlock):
    """``with contextlib.suppress(Exception): k = float(F.max(x))``."""

    @autograph
    def hybrid_forward(self, F, x):
        k = 1.0
        with contextlib.suppress(Exception):
            k = float(F.max(x).asscalar())
        return x * k


class _Fallback(HybridBlock):
    def __init__(self):
        super().__init__()
        self.k = 0

    def _count(self, v):
        self.k = self.k + 1
        return v * 2

    def _safe(self, v):
        try:
            return self._count(v)
        except Exception:
            return v


@program(*ROWS)
class HelperExceptCatchesSideEffectRefusal(_Fallback):
    """A helper's ``try: return self._count(v) except Exception: return v`` in a tensor for
    (the counting method's side effect in a graph region)."""

    @autograph
    def hybrid_forward(self, F, x):
        self.k = 0
        h = x[0] * 0
        for row in x:
            h = h + self._safe(row)
        return h


@program(*ROWS)
class ExceptCatchesIterationOfTensorInLoop(HybridBlock):
    """``try: n = len(list(map(float, row))) except Exception: n = 3`` per row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            try:
                s = sum(float(v.asscalar()) for v in row)
            except Exception:
                s = 1.0
            h = h + row * s
        return h


@program(*ROWS)
class ListMadeAndPoppedInsideStep(HybridBlock):
    """A list made in a tensor for's body, appended to and popped in the same step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            stack = [row, row * 2]
            stack.append(h * 0.5)
            while stack:
                h = h + stack.pop() * 0.25
        return h


@program(*ROWS)
class PartsListAddedNInsideStep(HybridBlock):
    """``parts = []; parts.append(...); h = F.add_n(*parts)`` in each step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            parts = []
            parts.append(row)
            parts.append(h * 0.5)
            h = F.add_n(*parts)
        return h


@program(*ROWS)
class DictMadeInsideStep(HybridBlock):
    """``d = {}; d["a"] = row; d.update(b=h)`` inside a tensor for's body."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            d = {}
            d["a"] = row
            d.update(b=h * 0.5)
            h = d["a"] + d["b"]
        return h


@program(*ROWS)
class IfExpInsideComprehensionOverRows(HybridBlock):
    """``[r if F.sum(r) > 0 else -r for r in x]`` stacked."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*[r if F.sum(r) > 0 else -r for r in x])


@program(*ROWS)
class NestedComprehensionOverRows(HybridBlock):
    """``[[r * c for c in (1, 2)] for r in x]`` flattened and stacked."""

    @autograph
    def hybrid_forward(self, F, x):
        grid = [[r * c for c in (1, 2)] for r in x]
        return F.stack(*[v for row in grid for v in row])


@program(*ROWS)
class StackOfMapOverRows(HybridBlock):
    """``F.stack(*map(F.tanh, x))``."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*map(F.tanh, x))


@program(*ROWS)
class IsTrainingBranchInTensorFor(HybridBlock):
    """``if mx.autograd.is_training(): h = h * 0.9`` inside a tensor for (dropout ported)."""

    @autograph
    def hybrid_forward(self, F, x):
        from mxnet import autograd
        h = x[0] * 0
        for row in x:
            h = h + row
            if autograd.is_training():
                h = h * 0.9
        return h


@program(*WHILE_STATES)
class WhileConditionThroughHelper(HybridBlock):
    """``while self._going(h):`` a method returning the tensor comparison."""

    @staticmethod
    def _going(h):
        return h.sum() < 10

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        while self._going(h):
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
        return h


@program(*WHILE_STATES)
class WhileNotOfComparison(HybridBlock):
    """``while not F.sum(h) > 10:``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        while not F.sum(h) > 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
        return h


class _Layers(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.layers = nn.HybridSequential()
            for _ in range(2):
                self.layers.add(nn.Dense(2, in_units=2, flatten=False))


@program(*WHILE_STATES[1:])
class SequentialLayersIndexedInWhile(_Layers):
    """``for i in range(len(self.layers)): h = self.layers[i](h)`` in a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        n = F.zeros((1,))
        while n < 2:
            for i in range(len(self.layers)):
                h = F.tanh(self.layers[i](h.reshape((1, -1)))).reshape((-1,))
            n = n + 1
        return h


@program(*ROWS)
class ZipStarOfCollectedPairs(HybridBlock):
    """``hs, cs = zip(*pairs)`` of pairs a tensor for collected."""

    @autograph
    def hybrid_forward(self, F, x):
        pairs = []
        h = x[0] * 0
        for row in x:
            h = h * 0.5 + row
            pairs.append((h, h * 2))
        hs, cs = zip(*pairs)
        return F.stack(*hs) + F.stack(*cs)


@program(*ROWS)
class CopyOfStateEachStep(HybridBlock):
    """``state = copy.copy(state)`` of a dict of arrays per row."""

    @autograph
    def hybrid_forward(self, F, x):
        import copy
        state = {"h": x[0] * 0}
        for row in x:
            state = copy.copy(state)
            state = {"h": state["h"] * 0.5 + row}
        return state["h"]


@program(*ROWS)
class DictGetWithTensorDefaultInFor(HybridBlock):
    """``w = cfg.get("w", row)`` per row."""

    @autograph
    def hybrid_forward(self, F, x):
        cfg = {"scale": 0.5}
        h = x[0] * 0
        for row in x:
            h = h * cfg.get("scale", 1.0) + cfg.get("w", row)
        return h


@program(*ROWS)
class IteratorAdvancedInsideTensorFor(HybridBlock):
    """``next(weights)`` of a Python iterator made before a tensor for, per row."""

    @autograph
    def hybrid_forward(self, F, x):
        weights = iter([1.0, 2.0, 3.0, 4.0])
        h = x[0] * 0
        for row in x:
            h = h + row * next(weights)
        return h


@program(*ROWS)
class AccumulateWithCallbackOverTensor(HybridBlock):
    """``itertools.accumulate(x, lambda a, b: a * 0.5 + b)`` stacked."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*itertools.accumulate(x, lambda a, b: a * 0.5 + b))


@program(*ROWS)
class ReduceOverTensorWithCountingCallback(_Fallback):
    """``functools.reduce(self._add, x)`` whose callback counts its calls."""

    def _add(self, a, b):
        self.k = self.k + 1
        return a * 0.5 + b

    @autograph
    def hybrid_forward(self, F, x):
        self.k = 0
        return functools.reduce(self._add, x) * 1.0 + self.k


@program(*ROWS)
class SortedRowsByConstantKey(HybridBlock):
    """``sorted(x, key=lambda r: 0)`` (stable: the rows in order) stacked."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*sorted(x, key=lambda r: 0))


@program(*PAIRS)
class MaxOfPairByPythonKey(HybridBlock):
    """``max([(1, x), (2, y)], key=lambda p: p[0])[1]``."""

    @autograph
    def hybrid_forward(self, F, x, y):
        return max([(1, x), (2, y)], key=lambda p: p[0])[1] * 2


@program(*ROWS)
class MinOfRowsByTensorKey(HybridBlock):
    """``min(x, key=lambda r: F.sum(r))``: the keys are tensors."""

    @autograph
    def hybrid_forward(self, F, x):
        return min(x, key=lambda r: F.sum(r)) * 2


@program(*ROWS)
class ReduceOverMaskedRows(HybridBlock):
    """``functools.reduce`` over ``boolean_mask``'s rows: how many only the run knows."""

    @autograph
    def hybrid_forward(self, F, x):
        kept = F.contrib.boolean_mask(x, F.sum(x, axis=1) > -10)
        return functools.reduce(lambda a, r: a * 0.5 + r, kept, x[0] * 0)


@program(*STATES)
class BoundAppendOfFreshListInTensorIf(HybridBlock):
    """``push = items.append`` of a list the function made, called in a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        items = []
        push = items.append
        if F.sum(x) > 0:
            push(1)
        return x * (len(items) + 1)


@program(*ROWS)
class FreshListOfStepStoredInOuterDict(HybridBlock):
    """A list made in the step, appended to, then stored in a dict made before the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        keep = {}
        h = x[0] * 0
        for row in x:
            parts = []
            parts.append(row)
            keep["last"] = parts
            h = h + parts[0]
        return h


# ---- the rows library code and keyed builtins now see ---------------------------------------

@program(*STATES)
class ReduceOverOneDimensionalTensor(HybridBlock):
    """``functools.reduce(lambda a, b: a * 0.5 + b, x)`` over a 1-D tensor's items."""

    @autograph
    def hybrid_forward(self, F, x):
        return x + functools.reduce(lambda a, b: a * 0.5 + b, x)


@program(*ROWS)
class IsliceAndPairwiseOfRows(HybridBlock):
    """``itertools.islice(x, 2)`` and ``itertools.pairwise(x)`` of a tensor's rows."""

    @autograph
    def hybrid_forward(self, F, x):
        first = sum(itertools.islice(x, 2))
        steps = [b - a for a, b in itertools.pairwise(x)]
        return first + sum(steps, x[0] * 0)


@program(*ROWS)
class ReduceOverRowInsideTensorFor(HybridBlock):
    """``functools.reduce`` over each row inside a tensor for (its items only the body
    knows)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h + functools.reduce(lambda a, b: a + b, row)
        return h


@program(*STATES)
class MaxOfItemsByConstantKey(HybridBlock):
    """``max(x, key=lambda v: 1)``: the first item (all keys equal)."""

    @autograph
    def hybrid_forward(self, F, x):
        return x * max(x, key=lambda v: 1)


@program(*WHILE_STATES)
class WalrusCarriedThroughWhileIf(HybridBlock):
    """``s`` given a value before a tensor while, rebound by a ``:=`` in an if's test inside
    it, read after the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        s = x * 0
        while F.sum(h) < 10:
            gluon_cf.max_iterations(20)
            h = F.abs(h) * 2 + 1
            if F.sum(s := h * 0.5) > 2:
                h = h + s
        return h + s


@program(*ROWS)
class OwnListPassedToHelperInStep(HybridBlock):
    """A list the step makes, given to a helper that appends to it."""

    @staticmethod
    def _fill(items, v):
        items.append(v * 2)
        return items

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            parts = [row]
            self._fill(parts, h)
            h = F.add_n(*parts) * 0.5
        return h


@program(*ROWS)
class OwnDictSetdefaultInStep(HybridBlock):
    """A dict the step makes, ``setdefault`` and ``pop`` on it."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            d = {"r": row}
            d.setdefault("h", h * 0.5)
            h = d.pop("r") + d["h"]
        return h


@program(*ROWS)
class CompressRowsByTensorMask(HybridBlock):
    """``itertools.compress(x, x[:, 0] > 0)``: each row kept by a tensor's truth."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*itertools.compress(x, x[:, 0] > -5))


@program(*ROWS)
class TakewhileWithTensorPredicate(HybridBlock):
    """``itertools.takewhile(lambda r: F.sum(r) > -5, x)``."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*itertools.takewhile(lambda r: F.sum(r) > -5, x))


@program(*STATES)
class AccumulateWithBuiltinMax(HybridBlock):
    """``itertools.accumulate(x, max)``: the running maximum, by comparing items."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.concat(*itertools.accumulate(x, max), dim=0)


@program(*STATES)
class GroupbyOfItems(HybridBlock):
    """``itertools.groupby(x)``: neighbouring items compared."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.concat(*[k for k, _ in itertools.groupby(x)], dim=0)
