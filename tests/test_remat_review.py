"""Found by a hostile review of remat (issue 25): ``backward(retain_graph=True)`` then
``backward()`` through a hybridized gluon_cf node left MXNet's gradient buffers unwritten on the
second backward (garbage gradients, ~1e26, for an input a hybridized recursion read from its
closure; NOTE [backward of a failed forward] in gluon_cf/node.py). The oracle: the same model
run eagerly without gluon_cf (a Python-unrolled chain), and the first backward itself."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf

TOL = dict(rtol=1e-5, atol=1e-5)


class _Chain(gluon.HybridBlock):
    """``f(n) = tanh(cell(f(n - 1)) + x)``, ``f(0) = tanh(x + z)``, ``z = pre(x)`` read from
    the closure: by a gluon_cf recursion, a gluon_cf foreach, or unrolled (the oracle)."""

    def __init__(self, how, remat):
        super().__init__()
        self.how, self.remat = how, remat
        with self.name_scope():
            self.cell = gluon.nn.Dense(4, in_units=4)
            self.pre = gluon.nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, x, n, steps):
        cell, z = self.cell, self.pre(x)
        if self.how == "recursion":
            @gluon_cf.recursive(remat=self.remat)
            def f(n, x):
                return gluon_cf.cond(n < 1, lambda: F.tanh(x + z),
                                     lambda: F.tanh(cell(f(n - 1, x)) + x))
            return f(n, x)
        if self.how == "foreach":
            _, states = gluon_cf.foreach(lambda _, s: ([], [F.tanh(cell(s[0]) + x)]), steps,
                                         [F.tanh(x + z)], remat=self.remat)
            return states[0]
        h = F.tanh(x + z)
        for _ in range(3):
            h = F.tanh(cell(h) + x)
        return h


def _grads(how, remat, hybridize, retain):
    mx.random.seed(2)
    net = _Chain(how, remat)
    net.initialize(mx.init.Xavier())
    if hybridize:
        net.hybridize()
    x = mx.nd.array(np.random.RandomState(1).rand(1, 4))
    x.attach_grad()
    with autograd.record():
        loss = (net(x, mx.nd.array([3]), mx.nd.zeros((3, 1))) ** 2).sum()

    def read():
        return [x.grad.asnumpy().copy()] + [p.grad().asnumpy().copy()
                                            for p in net.collect_params().values()]
    if not retain:
        loss.backward()
        return [read()]
    loss.backward(retain_graph=True)
    first = read()
    loss.backward()
    return [first, read()]


@pytest.mark.parametrize("how, remat", [("recursion", False), ("recursion", True),
                                        ("foreach", False), ("foreach", True)])
def test_backward_twice_with_retain_graph(how, remat):
    oracle = _grads("unrolled", False, False, False)[0]
    for result in _grads(how, remat, True, True):
        for got, want in zip(result, oracle):
            np.testing.assert_allclose(got, want, **TOL)


class _ClosureLoop(gluon.HybridBlock):
    """``s <- tanh(0.5 s + cell(s) + x)`` over T steps, ``x`` (an input) read from the closure,
    the initial state computed from it: by gluon_cf.foreach or MXNet's own foreach."""

    def __init__(self, remat, mxnet_foreach=False):
        super().__init__()
        self.remat, self.mxnet_foreach = remat, mxnet_foreach
        with self.name_scope():
            self.cell = gluon.nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, x, steps):
        def body(d, s):
            h = F.tanh(s[0] * 0.5 + self.cell(s[0]) + x + d)
            return h * 2, [h]
        init = [F.tanh(x)]
        if self.mxnet_foreach:
            out, st = F.contrib.foreach(body, steps, init)
        else:
            out, st = gluon_cf.foreach(body, steps, init, remat=self.remat)
        return st[0] + out.sum(axis=0)


def _loop_grads(remat, hybridize, mxnet_foreach=False, length=4):
    mx.random.seed(4)
    net = _ClosureLoop(remat, mxnet_foreach)
    net.initialize(mx.init.Xavier())
    if hybridize:
        net.hybridize()
    rng = np.random.RandomState(5)
    x, steps = mx.nd.array(rng.rand(1, 4)), mx.nd.array(rng.rand(length, 1, 4) * 0.1)
    x.attach_grad()
    steps.attach_grad()
    with autograd.record():
        loss = (net(x, steps) ** 2).sum()
    loss.backward()
    return [x.grad.asnumpy(), steps.grad.asnumpy()] + [
        p.grad().asnumpy() for p in net.collect_params().values()]


@pytest.mark.parametrize("remat", [True, 2, "auto"])
def test_closure_gradient_of_a_hybridized_remat_foreach(remat):
    """remat=True and "auto" were off by ~1 (remat=2 right): the closure's "add" buffer was
    shared with a gradient inside the step (NOTE [closure gradients of a remat segment]).
    The oracle is MXNet's foreach run eagerly (hybridized, MXNet's ``_foreach`` gives other
    gradients for this body, off by ~150: not an oracle here)."""
    oracle = _loop_grads(False, False, mxnet_foreach=True)
    for hybridize in (True, False):
        for got, want in zip(_loop_grads(remat, hybridize), oracle):
            np.testing.assert_allclose(got, want, **TOL)
