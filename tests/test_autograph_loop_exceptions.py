"""An exception leaving a converted loop partway, caught by the user's own try/except,
contextlib.suppress or a suppressing ``with`` (NOTE [an exception leaving a loop]): the loop's
variables and the lists it appended to hold what plain Python's hold (once they were back at
their values before the loop, silently). Every block is checked against its hybrid_forward
unconverted, run on NDArrays (``__wrapped__``: plain Python), values and input gradients,
eager and hybridized; a loop on a tensor whose exception the user's code catches while it is
traced is refused at the user's line."""
import contextlib
import inspect
import os
import traceback

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf
from gluon_cf import AutographError

from conftest import MODES, set_mode

HERE = os.path.abspath(__file__)


class Base(gluon.HybridBlock):
    def __init__(self, raise_at=1):
        super().__init__()
        self.raise_at = raise_at
        with self.name_scope():
            self.fcf = gluon.nn.Dense(2, in_units=2)

    def check(self, i):
        if i == self.raise_at:
            raise KeyError(i)


class ForRange(Base):
    """The issue's example, with a list appended in the loop."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        h = F.relu(x[0:1])
        rows = []
        try:
            for i in range(3):
                h = self.fcf(x[i % 2:i % 2 + 1])
                rows.append(h * (i + 1))
                if i == self.raise_at:
                    raise KeyError(i)
        except KeyError:
            pass
        for r in rows:
            h = h + r
        return h + x * len(rows)


class WhileCounter(Base):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        h = F.relu(x[0:1])
        i = 0
        rows = []
        try:
            while i < 3:
                h = self.fcf(x[i % 2:i % 2 + 1]) + h
                rows.append(h)
                if i == self.raise_at:
                    raise KeyError(i)
                i = i + 1
        except KeyError:
            pass
        for r in rows:
            h = h * r
        return h + x * (i + 1)


class Nested(Base):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        h = x[1:2] * 2
        try:
            for j in range(2):
                k = 0
                while k < 2:
                    h = self.fcf(h) + j
                    self.check(2 * j + k)       # raises at j=0, k=1 (a helper's raise)
                    k = k + 1
        except KeyError:
            pass
        return h * (j + 1) + x


class BreakContinue(Base):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        h = x[0:1]
        seen = []
        try:
            for i in range(5):
                if i == 0:
                    continue
                h = self.fcf(h) * i
                seen.append(h)
                if i == 4:
                    break
                self.check(i)
        except KeyError:
            pass
        return h + x * len(seen)


class Suppressed(Base):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        h = x[0:1]
        with contextlib.suppress(KeyError):
            for i in range(3):
                h = self.fcf(h) + i
                self.check(i)
        return h * x


class BoundOnlyInLoop(Base):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        try:
            for i in range(3):
                g = self.fcf(x[i % 2:i % 2 + 1]) * (i + 1)
                self.check(i)
        except KeyError:
            pass
        return g + x


class ConditionRaises(Base):
    """The while condition's helper raises: the variables hold the last step's values."""

    def more(self, i):
        self.check(i)
        return i < 3

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        h = x[1:2]
        i = 0
        try:
            while self.more(i):
                h = self.fcf(h) - i
                i = i + 1
        except KeyError:
            pass
        return h * (i + 1) + x


class IfBranch(Base):
    """An if on a Python value: its branches are functions too."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        h = x[0:1]
        try:
            if self.raise_at is not None:
                h = self.fcf(h) * 3
                g = h + 1
                self.check(self.raise_at)
            else:
                g = h * 2
        except KeyError:
            pass
        return h + g * x


class Suppressing:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        return kind is KeyError


class WithSuppressing(Base):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        h = x[0:1]
        total = 0
        with Suppressing():
            for i in range(4):
                h = self.fcf(h)
                total = total + i
                self.check(i)
        return h * total + x


class TensorRows(Base):
    """A loop over an array's rows: Python's eagerly, a graph's hybridized."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        h = x[0:1] * 0
        try:
            for row in x:
                h = h + self.fcf(F.expand_dims(row, axis=0))
                self.helper_raises()
        except KeyError:
            pass
        return h + x

    def helper_raises(self):
        if self.raise_at is not None:
            raise KeyError("stop")


def _grads(call, args):
    inputs = [mx.nd.array(a) for a in args]
    for a in inputs:
        a.attach_grad()
    with autograd.record():
        out = call(*inputs)
    out.backward(mx.nd.ones_like(out))
    return [out.asnumpy()] + [a.grad.asnumpy() for a in inputs]


def compare_with_plain(factory, args, modes=MODES):
    """Plain Python (the unconverted hybrid_forward on NDArrays), then the converted block in
    ``modes``: values and input gradients must agree."""
    net = factory()
    net.initialize(mx.init.Xavier(), force_reinit=True)
    params = {k: v.data().copy() for k, v in net.collect_params().items()}
    want = _grads(lambda *a: type(net).hybrid_forward.__wrapped__(net, mx.nd, *a), args)
    for mode in modes:
        net = factory()
        net.initialize()
        for (k, v), p in zip(net.collect_params().items(), params.values()):
            v.set_data(p)
        set_mode(net, mode)
        for g, w in zip(_grads(net, args), want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=mode)
    return want


X = [[1.0, -2.0], [3.0, 0.5]]


@pytest.mark.parametrize("model, raise_at", [
    (model, raise_at) for model in [ForRange, WhileCounter, Nested, Suppressed, IfBranch]
    for raise_at in [0, 1, 2]] + [
    (BreakContinue, 1), (BreakContinue, 2), (ConditionRaises, 1), (ConditionRaises, 2),
    (WithSuppressing, 1), (WithSuppressing, 2)])
def test_variables_and_lists_after_a_caught_exception(model, raise_at):
    """Python-range loops (and an if on a Python value): eager, and hybridized (they run as
    Python while tracing); then the same block raising nothing: the results as before."""
    compare_with_plain(lambda: model(raise_at), [X])
    compare_with_plain(lambda: model(None), [X])


@pytest.mark.parametrize("raise_at", [0, 1, 2])
def test_a_variable_bound_only_in_the_loop(raise_at):
    compare_with_plain(lambda: BoundOnlyInLoop(raise_at), [X])


class Loud(Base):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        h = x[0:1]
        try:
            for i in range(3):
                h = self.fcf(h)
                self.check(i)
        except KeyError as err:
            err.h = h
            raise
        return h


def test_the_exception_and_its_traceback_are_the_users():
    """The same exception object leaves the function, its traceback ending in the user's
    raise; the variables were rebound before the user's handler ran."""
    net = Loud(raise_at=1)
    net.initialize()
    x = mx.nd.array(X)
    with pytest.raises(KeyError) as info:
        net(x)
    assert info.value.args == (1,)
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert (last.filename, last.name, last.line) == (HERE, "check", "raise KeyError(i)")
    want = net.fcf(net.fcf(x[0:1]))
    np.testing.assert_allclose(info.value.h.asnumpy(), want.asnumpy(), rtol=1e-6)


def test_rows_of_an_array_eagerly():
    compare_with_plain(lambda: TensorRows(1), [X], modes=("eager",))
    compare_with_plain(lambda: TensorRows(None), [X])


@pytest.mark.parametrize("mode", ["hybrid", "static"])
def test_a_tensor_loop_whose_exception_is_caught_is_refused(mode):
    """Traced, the rows' loop is one graph op: the exception leaves it while it is traced, and
    the user's except would give the values before the loop (plain Python's hold the first
    row's step)."""
    net = TensorRows(1)
    net.initialize()
    set_mode(net, mode)
    with pytest.raises(AutographError) as info:
        net(mx.nd.array(X))
    line = inspect.getsourcelines(TensorRows.hybrid_forward.__wrapped__)[1] + 4
    assert f"{HERE}:{line}:" in str(info.value) and "for row in x" in str(info.value)
    assert "KeyError" in str(info.value)


class RefusalSwallowed(Base):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        h = x[0:1]
        try:
            for row in x:
                if F.sum(row) > 100:
                    raise KeyError("big")     # a raise under a tensor if: refused traced
                h = h + row
        except Exception:
            pass
        return h + x


def test_a_refusal_in_a_tensor_loop_is_not_swallowed():
    net = RefusalSwallowed()
    net.initialize()
    net.hybridize()
    with pytest.raises(AutographError) as info:
        net(mx.nd.array(X))
    line = inspect.getsourcelines(RefusalSwallowed.hybrid_forward.__wrapped__)[1] + 5
    assert f"{HERE}:{line}:" in str(info.value)
