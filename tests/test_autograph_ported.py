"""Blocks written the way people port MXNet and TensorFlow code, each of which hybridized to a
silently different value or an internal-looking error before: indexing a tensor as an NDArray
(``x[0]``, ``x[:, -1]``, ``x[1:]``, ``x[..., 0]``), ``x.T``, properties and classes of the
user's whose code has tensor ifs and loops, a library's decorator around a user function, and
what a Symbol cannot do (``x.shape``, ``x.context``, item assignment, ``assert``, ``any()``),
refused at the user's line (NOTE [autograph indexing], NOTE [autograph calls]). Oracle: the
unconverted ``hybrid_forward`` run on NDArrays (plain Python), values and input gradients,
against the converted block eager and hybridized."""
import functools
import importlib.util
import re

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph


def _outputs_and_grads(net, arrays, plain):
    inputs = [mx.nd.array(a) for a in arrays]
    for a in inputs:
        a.attach_grad()
    with autograd.record():
        out = type(net).hybrid_forward.__wrapped__(net, mx.nd, *inputs) if plain \
            else net(*inputs)
        outs = out if isinstance(out, (list, tuple)) else [out]
        total = sum((o * (i + 1.5)).sum() for i, o in enumerate(outs))
    total.backward()
    return [o.asnumpy() for o in outs] + [a.grad.asnumpy() for a in inputs]


def _check_equal(block_class, *shapes):
    """The converted block, eager and hybridized, equals plain Python (values, shapes and
    input gradients) on inputs of both signs."""
    rng = np.random.RandomState(0)
    for sign in (1, -1):
        arrays = [sign * (np.abs(rng.uniform(-1, 1, s)) + 0.1).astype(np.float32)
                  for s in shapes]
        net = block_class()
        want = _outputs_and_grads(net, arrays, plain=True)
        for hybrid in (False, True):
            if hybrid:
                net.hybridize()
            got = _outputs_and_grads(net, arrays, plain=False)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.shape == w.shape, (block_class.__name__, hybrid, g.shape, w.shape)
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _refused_at(block_class, shapes, line_text, words):
    """Eagerly plain Python's value; hybridized an AutographError at the line holding
    ``line_text``, naming ``words``, with no double colon."""
    arrays = [np.ones(s, np.float32) for s in shapes]
    net = block_class()
    _outputs_and_grads(net, arrays, plain=False)
    net.hybridize()
    with pytest.raises(gluon_cf.AutographError) as info:
        _outputs_and_grads(net, arrays, plain=False)
    message = str(info.value)
    assert re.match(rf"{re.escape(__file__)}:\d+: .*{re.escape(line_text)}", message), message
    assert "::" not in message and words in message, message


# ---------------------------------------------------------------- indexing (x[0] was all of x)

class FirstRowDecoder(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for row in x:
            h = F.tanh(h * 0.5 + row)
        return h + x[-1]


class Columns(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return x[:, 0] * 2 + x[:, -1] + x[1:].sum(axis=1)[1] + x[::-1][:, 0]


class Ellipsis3D(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return x[..., 0] + x[..., 1:3].sum(axis=-1) + x[0, 1:, ::2].sum() + x[-1, 0, 2]


class IndexedInLoops(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        parts = [x[i] * i for i in range(3)]         # a comprehension over a Python range
        h = sum(x[i] for i in range(3)) + F.stack(*parts).sum(axis=0)
        for i in range(3):
            h = h + x[i] * x[2 - i]
        return h


class SplitOutputsStillSelect(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        parts = F.split(x, num_outputs=3, axis=0)      # a Symbol of three outputs
        return parts[0] * 2 + parts[2] + F.dot(x, x.T)[0, :2]


@pytest.mark.parametrize("block_class, shape", [
    (FirstRowDecoder, (3, 2)), (Columns, (3, 4)), (Ellipsis3D, (2, 3, 4)),
    (IndexedInLoops, (3, 2)), (SplitOutputsStillSelect, (3, 2))])
def test_indexing_a_tensor_hybridized_equals_plain_python(block_class, shape):
    _check_equal(block_class, shape)


# ---------------------------------------------------------------- properties, user classes

class GatedProperty(HybridBlock):
    def __init__(self):
        super().__init__()
        self.h = None

    @property
    def gated(self):                       # a tensor if in a property: converted
        if self.h.sum() > 0:
            return self.h * 2
        return self.h - 1

    @autograph
    def hybrid_forward(self, F, x):
        self.h = x
        return self.gated


class Accumulated:
    """A user class made inside hybrid_forward: its __init__ runs a loop and a tensor if."""

    def __init__(self, F, h):
        acc = h * 0
        for row in h:
            acc = acc + row * 0.5
        if F.sum(acc) > 0:
            acc = acc * 3
        self.acc = acc                     # (the object being made: no side effect)

    @property
    def doubled(self):
        return self.acc * 2


class MadeInside(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        state = Accumulated(F, x)
        return state.doubled + state.acc


@pytest.mark.parametrize("block_class", [GatedProperty, MadeInside])
def test_properties_and_constructors_of_user_classes_are_converted(block_class):
    _check_equal(block_class, (3, 2) if block_class is MadeInside else (2,))


class Counted:
    made = 0

    def __init__(self, h):
        Counted.made = Counted.made + 1      # outside state: refused in a tensor loop
        self.h = h


class ConstructedInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        for row in x:
            x = Counted(x).h * 0.5
        return x


def test_a_constructor_changing_class_state_in_a_tensor_loop_is_refused():
    _refused_at(ConstructedInLoop, [(3,)], "Counted.made = Counted.made + 1",
                "inside the for loop on a tensor")


# ---------------------------------------------------------------- a library's decorators

LIBRARY_DECORATORS = '''\
import functools
CALLS = [0]


def counted(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        CALLS[0] += 1
        return fn(*args, **kwargs)
    return wrapper


def scaled(k):
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs) * k
        return wrapper
    return decorate
'''


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """A decorator module in a site-packages directory: library code (NOTE [autograph
    calls])."""
    path = tmp_path_factory.mktemp("lib") / "site-packages" / "gluon_cf_test_decorators.py"
    path.parent.mkdir()
    path.write_text(LIBRARY_DECORATORS)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_library_decorator_runs_around_the_converted_function(library):
    class Decorated(HybridBlock):
        @library.counted
        def gate(self, F, h):
            if F.sum(h) > 0:
                return h * 2
            return h + 1

        @autograph
        def hybrid_forward(self, F, x):
            @library.scaled(3)
            def step(h):
                if F.sum(h) > 0:
                    return h * 2
                return h
            return step(self.gate(F, x))

    _check_equal(Decorated, (2,))
    # the decorator's code ran on every call: plain, eager and the trace, per input sign
    assert library.CALLS[0] >= 6


class Cached(HybridBlock):
    @functools.lru_cache(maxsize=None)
    def factor(self, k):
        return k * 2

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            x = x * self.factor(3)
        return x


def test_lru_cache_on_python_values_runs_as_python():
    _check_equal(Cached, (2,))


# ---------------------------------------------------------------- what a Symbol cannot do

class UsesShape(HybridBlock):
    """(The shape of a loop's row: an input's is known while tracing, NOTE [graphs traced
    for input shapes].)"""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            h = h + r / r.shape[0]
        return h


class UsesContext(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return x + F.zeros((2,), ctx=x.context)


class IndexedByTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return x[F.argmax(x.sum(axis=1), axis=0)]


class AssignsItems(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        y = x + 0
        y[:] = x * 3
        return y


class AssignsSteppedItems(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        y = x + 0
        y[::2] = x * 3
        return y


class AssertsOnTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        assert F.sum(x * x) >= 0
        return x * 2


class AnyOfTensors(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        if any(v > 0 for v in [F.sum(x), F.max(x)]):
            x = x + 1
        return x


class BoolOfTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return x * bool(F.sum(x) > 0)


class SlicesCollectedRows(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row * 2)
        return F.stack(*outs[1:])


@pytest.mark.parametrize("block_class, shape, line_text, words", [
    (BoolOfTensor, (2,), "x * bool(F.sum(x) > 0)", "bool() of a tensor"),
    (UsesShape, (3, 2), "r.shape[0]", ".shape of a tensor"),
    (UsesContext, (2,), "ctx=x.context", "F.zeros_like"),
    (IndexedByTensor, (3, 2), "return x[F.argmax", "F.take"),
    # (AssignsItems, y[:] = x * 3, converts since round 25c: test_autograph_round25c.py)
    (AssignsSteppedItems, (2,), "y[::2] = x * 3", "assigns an item of a tensor"),
    (AssertsOnTensor, (2,), "assert F.sum", "asserts a condition on a tensor"),
    (AnyOfTensors, (2,), "if any(v > 0", "any() of tensors"),
])
def test_what_a_symbol_cannot_do_is_refused_at_the_users_line(block_class, shape, line_text,
                                                              words):
    if block_class is AssignsSteppedItems:   # (plain Python fails eagerly under autograd)
        net = block_class()
        net.hybridize()
        with pytest.raises(gluon_cf.AutographError, match=re.escape(line_text)):
            net(mx.nd.ones(shape))
        return
    _refused_at(block_class, [shape], line_text, words)


def test_a_slice_of_collected_rows_is_pythons():
    """``F.stack(*outs[1:])`` after a for over an input was refused; the graph traced for the
    input's shape knows the number of rows (NOTE [autograph lists]): the eager value."""
    net = SlicesCollectedRows()
    for rows in (3, 2, 4):
        x = mx.nd.array(np.arange(rows * 2).reshape(rows, 2))
        want = net(x).asnumpy()
        net.hybridize()
        got = net(x).asnumpy()
        net.hybridize(active=False)
        assert got.shape == (rows - 1, 2)
        np.testing.assert_allclose(got, want)


# ---------------------------------------------------------------- recursion in helpers

def factorial(n):
    """Recursive on Python values: its own name in its body is the module's (the converted
    function was compiled with it as a closure variable of the factory: a KeyError)."""
    return 1 if n <= 1 else n * factorial(n - 1)


def halved_until_small(F, h):
    if F.sum(h) > 1:
        return halved_until_small(F, h * 0.5)
    return h


class CallsRecursiveHelpers(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def depth(n):
            return 0 if n == 0 else 1 + depth(n - 1)
        return x[depth(2)] * factorial(4) + x[np.int64(1)]     # (numpy's ints index too)


def test_recursive_python_helpers_are_converted():
    _check_equal(CallsRecursiveHelpers, (3, 2))


class RecursesOnTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return halved_until_small(F, x * 3)


def test_recursion_under_a_tensor_condition_is_refused_at_its_if():
    """Traced, both branches run, so it never reaches its base case: an AutographError at
    the if (it was Python's RecursionError)."""
    _refused_at(RecursesOnTensor, [(2,)], "if F.sum(h) > 1:", "@gluon_cf.recursive")
    net = RecursesOnTensor()
    np.testing.assert_allclose(net(mx.nd.array([0.1, 0.2])).asnumpy(), [0.3, 0.6], rtol=1e-6)


class CountingProperty(HybridBlock):
    def __init__(self):
        super().__init__()
        self.n = 0

    @property
    def bump(self):
        self.n += 1
        return self.n

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for row in x:
            h = h + row * self.bump
        return h


def test_a_property_changing_state_in_a_tensor_loop_is_refused():
    _refused_at(CountingProperty, [(3, 2)], "self.n += 1", "inside the for loop on a tensor")


def test_any_and_all_still_stop_early_on_python_values():
    """The check of any()/all() items reads them as the builtin does: lazily (an infinite
    generator ends at the first true item)."""
    import itertools

    class StopsEarly(HybridBlock):
        @autograph
        def hybrid_forward(self, F, x):
            if any(v > 2 for v in itertools.count()) and not all(v < 2 for v in
                                                                  itertools.count()):
                x = x * max(v for v in (1, 3, 2))
            return x

    _check_equal(StopsEarly, (2,))


# ---------------------------------------------------------------- loops with an else clause

class ForElseSearch(HybridBlock):
    """A search loop: the else clause runs when no row breaks (it was refused on tensors)."""

    @autograph
    def hybrid_forward(self, F, x):
        found = F.zeros_like(x[0])
        for row in x:
            if row.sum() > 1.5:
                found = row
                break
        else:
            found = x[-1] * 3
        for i in range(2):                   # a Python loop's else, after a tensor break
            found = found * 1.5
            if found.sum() > 100:
                break
        else:
            found = found + 1
        return found


def test_loops_with_an_else_clause_equal_plain_python():
    _check_equal(ForElseSearch, (3, 2))
    # a row that breaks: scaled up so that one does, and the else clause does not run
    net, x = ForElseSearch(), np.array([[0.1, 0.2], [2.0, 1.0], [0.3, 0.1]], np.float32)
    want = _outputs_and_grads(net, [x], plain=True)
    net.hybridize()
    for g, w in zip(_outputs_and_grads(net, [x], plain=False), want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


class Bidirectional(HybridBlock):
    """A bidirectional pass: for row in reversed(x) is a foreach over the reversed rows (it
    was refused: reversed() of a tensor)."""

    @autograph
    def hybrid_forward(self, F, x):
        forward = F.zeros_like(x[0])
        outs = []
        for row in x:
            forward = F.tanh(forward * 0.5 + row)
            outs.append(forward)
        backward = F.zeros_like(x[0])
        for row in reversed(x):
            backward = F.tanh(backward * 0.5 + row)
        return F.stack(*outs).sum(axis=0) + backward * 2


def test_a_for_over_reversed_rows_equals_plain_python():
    _check_equal(Bidirectional, (4, 2))
