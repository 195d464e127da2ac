"""Hostile round 29h (issue 24): autograd the way people use it around loops: ``grad_req='add'``
over two backwards, ``backward(retain_graph=True)`` twice, ``autograd.grad``, a second
backward without ``retain_graph``, head gradients, recording in predict mode, ``detach`` and
``F.stop_gradient`` inside bodies, states that skip steps (updated under a tensor ``if``), and
``autograd.pause()`` in a body (refused hybridized). Each against the eager block (plain Python
on NDArrays for the programs), values and gradients."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd
from mxnet.gluon import HybridBlock, nn

from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats
TOL = (1e-5, 1e-6)
ROWS = ([rand(4, 3, seed=2941)], [rand(2, 3, seed=2942) + 0.5], [rand(5, 3, seed=2943) - 0.5])


class _Fc(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3)


@program(*ROWS)
class DetachEveryOtherStep(_Fc):
    """``h = h.detach()`` on the odd rows of a tensor ``for`` (truncated BPTT by hand)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0]).reshape((1, -1))
        k = F.zeros((1,))
        for row in x:
            if F.sum(k % 2) > 0:
                h = h.detach()
            h = F.tanh(self.fc(h) + row.reshape((1, -1)))
            k = k + 1
        return h


@program(*ROWS)
class StopGradientOnCarriedSum(_Fc):
    """``s = F.stop_gradient(s) + F.sum(row)``: the carried sum's history cut at each step."""

    @autograph
    def hybrid_forward(self, F, x):
        s = F.zeros((1,))
        h = F.zeros((1, 3))
        for row in x:
            s = F.stop_gradient(s) + F.sum(row)
            h = F.tanh(self.fc(h) * s)
        return h, s


@program(*ROWS)
class StateSkipsStepsUnderTensorIf(_Fc):
    """``h`` updated only on rows of positive sum; other steps carry it unchanged."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((1, 3))
        for row in x:
            if F.sum(row) > 0:
                h = F.tanh(self.fc(h) + row.reshape((1, -1)))
        return h


@program(*ROWS)
class TwoStatesOneSkippedInWhile(_Fc):
    """``a`` updated each step, ``b`` only while ``i < 1``: ``b``'s gradient from one step."""

    @autograph
    def hybrid_forward(self, F, x):
        a, b = x[0], x[1]
        i = F.zeros((1,))
        while F.sum(i) < 3:
            a = F.tanh(self.fc(a.reshape((1, -1)))).reshape((-1,)) + b
            if F.sum(i) < 1:
                b = b * 2
            i = i + 1
        return a, b


@program(*ROWS)
class OutputUnusedInLossHasZeroGradient(_Fc):
    """Two outputs of a loop; the harness weighs both, and the loop's carried counter too."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        n = F.zeros((1,))
        for row in x:
            h = h * F.sigmoid(row) + 0.1
            n = n + F.sum(row > 0)
        return h, n


@program(*ROWS)
class PauseInsideBody(_Fc):
    """``with autograd.pause():`` in a tensor loop body: refused hybridized at its line."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for row in x:
            with autograd.pause():
                g = row * 2
            h = h + g
        return h


REFUSED = {PauseInsideBody: "pause"}
_classified = hostile_harness.cached_classifier(PROGRAMS, [__file__], export=False)


@pytest.mark.parametrize("block_class", list(PROGRAMS), ids=lambda c: c.__name__)
def test_program_equals_its_oracle_or_is_refused_at_its_line(block_class):
    hostile_harness.assert_program(block_class, PROGRAMS, _classified, REFUSED)


def _pair(cls):
    eager, hybrid = hostile_harness._make(cls), hostile_harness._make(cls)
    hybrid.hybridize()
    return eager, hybrid


def _grads(net):
    return [p.grad().asnumpy() for _, p in sorted(net.collect_params().items())
            if p.grad_req != "null"]


def _both(cls, fn):
    """``fn(net)`` (a list of arrays) on an eager and a hybridized block: equal."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager, hybrid = _pair(cls)
        want, got = fn(eager), fn(hybrid)
    assert hostile_harness._compare(want, got, TOL)
    return want


def test_grad_req_add_over_two_backwards_with_other_lengths():
    def run(net):
        net.collect_params().setattr("grad_req", "add")
        net.collect_params().zero_grad()
        out = []
        for arrays in ROWS[:2]:
            x = mx.nd.array(arrays[0])
            x.attach_grad()
            with autograd.record():
                y = net(x)
            y.backward()
            out += [y.asnumpy(), x.grad.asnumpy()] + _grads(net)
        return out
    got = _both(StateSkipsStepsUnderTensorIf, run)
    params = (len(got) - 4) // 2          # (the two calls' output and input gradient first)
    assert not np.allclose(got[2], got[4 + params]), "the second backward added nothing"


def test_retain_graph_backward_twice():
    def run(net):
        x = mx.nd.array(ROWS[0][0])
        x.attach_grad(grad_req="add")
        with autograd.record():
            y = net(x)
        y.backward(retain_graph=True)
        first = x.grad.asnumpy().copy()
        y.backward(mx.nd.ones_like(y) * 3)
        return [y.asnumpy(), first, x.grad.asnumpy()]
    want = _both(DetachEveryOtherStep, run)
    np.testing.assert_allclose(want[2], want[1] * 4, rtol=1e-5, atol=1e-6)


def test_autograd_grad_of_a_loop_output():
    def run(net):
        x = mx.nd.array(ROWS[2][0])
        x.attach_grad()
        with autograd.record():
            a, b = net(x)
            loss = (a * a).sum() + b.sum()
        (gx,) = autograd.grad(loss, [x], retain_graph=False)
        return [a.asnumpy(), b.asnumpy(), gx.asnumpy()]
    _both(TwoStatesOneSkippedInWhile, run)


def test_second_backward_without_retain_graph_fails_as_mxnet():
    def run(net):
        x = mx.nd.array(ROWS[0][0])
        x.attach_grad()
        with autograd.record():
            y = net(x)
        y.backward()
        try:
            y.backward()
        except mx.MXNetError as err:
            return [np.array([1.0]), np.array([float("Check failed" in str(err)
                                                      or "retain_graph" in str(err))])]
        return [np.array([0.0])]
    _both(StateSkipsStepsUnderTensorIf, run)


def test_record_in_predict_mode_with_head_gradient():
    def run(net):
        x = mx.nd.array(ROWS[1][0])
        x.attach_grad()
        with autograd.record(train_mode=False):
            h, s = net(x)
        autograd.backward([h, s], [mx.nd.ones_like(h) * 2, mx.nd.ones_like(s) * -1])
        return [h.asnumpy(), s.asnumpy(), x.grad.asnumpy()] + _grads(net)
    _both(StopGradientOnCarriedSum, run)
