"""Issue 24, item 2: a foreach over data of no rows (given so, or the rows a boolean_mask kept
when it kept none) is refused the same way on every call, eager and hybridized, whatever the
block ran before, with the user's line of the foreach; the calls around it give what a fresh
block gives (values and gradients against numpy)."""
import re

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

import gluon_cf

HERE = __file__


def line_in(text):
    lines = open(HERE).read().splitlines()
    return next(i for i, line in enumerate(lines) if line.strip() == text) + 1


class ForeachOverRows(gluon.HybridBlock):
    def hybrid_forward(self, F, x, h):
        outs, last = gluon_cf.foreach(lambda r, s: (r * 2 + s, s + r), x, h)
        return outs.sum() + last.sum()


class ForeachOverKeptRows(gluon.HybridBlock):
    def hybrid_forward(self, F, x, m, h):
        kept = F.contrib.boolean_mask(x, m)
        outs, last = gluon_cf.foreach(lambda r, s: (r * 2 + s, s * r), kept, h)
        return outs.sum() + last.sum()


def numpy_rows(x, h, product):
    """The oracle: (sum of outputs + final state, d/dx, d/dh) by hand."""
    outs, s = [], h.copy()
    for r in x:
        outs.append(r * 2 + s)
        s = s * r if product else s + r
    return float(np.sum(outs) + s.sum())


def call(net, hybridize, x, *rest):
    args = [nd.array(x)] + [nd.array(a) for a in rest]
    if len(x):               # (MXNet 1.x cannot make a zero-size gradient buffer at all)
        args[0].attach_grad()
    args[-1].attach_grad()
    with autograd.record():
        out = net(*args)
    out.backward()
    return out.asscalar(), args[0].grad.asnumpy(), args[-1].grad.asnumpy()


def fresh(model, hybridize):
    net = model()
    if hybridize:
        net.hybridize()
    return net


X = np.array([[1.0, 2.0], [0.5, -1.0], [2.0, 0.5]], np.float32)
H = np.array([1.0, -0.5], np.float32)


@pytest.mark.parametrize("hybridize", [False, True])
def test_foreach_over_no_rows_is_the_same_error_on_every_call(hybridize):
    line = line_in("outs, last = gluon_cf.foreach(lambda r, s: (r * 2 + s, s + r), x, h)")
    message = re.escape(f"gluon_cf.foreach at {HERE}:{line}")
    net = fresh(ForeachOverRows, hybridize)
    for x in (X, X[:0], X[:2], X[:0], X):
        if len(x) == 0:
            with pytest.raises(ValueError, match=message + r".*(length 0|with a 0 dimension)"):
                call(net, hybridize, x, H)
            continue
        got = call(net, hybridize, x, H)
        want = call(fresh(ForeachOverRows, hybridize), hybridize, x, H)
        assert got[0] == pytest.approx(numpy_rows(x, H, product=False), rel=1e-5)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6)


@pytest.mark.parametrize("hybridize", [False, True])
def test_foreach_over_a_mask_that_kept_no_row_is_the_same_error_on_every_call(hybridize):
    line = line_in("outs, last = gluon_cf.foreach(lambda r, s: (r * 2 + s, s * r), kept, h)")
    message = re.escape(f"gluon_cf.foreach at {HERE}:{line}: data has length 0 along axis 0")
    net = fresh(ForeachOverKeptRows, hybridize)
    for mask in ([1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 0, 0], [0, 1, 0]):
        if not any(mask):
            with pytest.raises(ValueError, match=message):
                call(net, hybridize, X, mask, H)
            continue
        got = call(net, hybridize, X, mask, H)
        want = call(fresh(ForeachOverKeptRows, hybridize), hybridize, X, mask, H)
        kept = X[np.array(mask, bool)]
        assert got[0] == pytest.approx(numpy_rows(kept, H, product=True), rel=1e-5)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6)


# ---- zero-size values inside an op's body, eagerly as hybridized (NOTE [eager zero-size values])

class MaskedSumInBodies(gluon.HybridBlock):
    """Each op's body reduces the rows a mask kept (none, for an all-zero mask)."""

    def hybrid_forward(self, F, x, m):
        def body(r, s):
            return r * 2, s + F.contrib.boolean_mask(x, m).sum() + r.sum()
        outs, last = gluon_cf.foreach(body, x, F.zeros((1,)))
        _, (i, w) = gluon_cf.while_loop(
            lambda i, w: i < 2,
            lambda i, w: ([], [i + 1, w + F.contrib.boolean_mask(x, m).sum() * 0.5]),
            [F.zeros((1,)), F.zeros((1,))], max_iterations=3)
        picked = gluon_cf.cond(F.sum(m) >= 0, lambda: F.contrib.boolean_mask(x, m).sum() * 3,
                               lambda: F.zeros((1,)))
        return outs.sum() + last.sum() + w.sum() + picked.sum()


def masked_sum_oracle(x, m):
    kept = x[np.array(m, bool)].sum()
    value = 2 * x.sum() + (len(x) * kept + x.sum()) + kept + 3 * kept
    grad = np.ones_like(x) * 3 + np.array(m, np.float32)[:, None] * (len(x) + 4)
    return value, grad


@pytest.mark.parametrize("hybridize", [False, True])
def test_a_mask_that_kept_no_row_inside_bodies_gives_values_and_gradients(hybridize):
    """Eagerly, MXNet's backward through the sum of no rows failed at the next read of a
    gradient ("Shape dim size cannot be a negative value -1", no line of the user's) where the
    hybridized block worked; now both give numpy's values and gradients, on every call."""
    net = fresh(MaskedSumInBodies, hybridize)
    for mask in ([1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 0, 0], [0, 1, 0]):
        x = nd.array(X)
        x.attach_grad()
        with autograd.record():
            out = net(x, nd.array(mask))
        out.backward()
        value, grad = masked_sum_oracle(X, mask)
        assert out.asscalar() == pytest.approx(value, rel=1e-5), mask
        np.testing.assert_allclose(x.grad.asnumpy(), grad, rtol=1e-5, err_msg=str(mask))


class ScalesMaskedRows(gluon.HybridBlock):
    def hybrid_forward(self, F, x, m):
        return gluon_cf.cond(F.sum(x) > 0, lambda: F.contrib.boolean_mask(x, m) * 2,
                             lambda: x).sum()


@pytest.mark.parametrize("hybridize", [False, True])
def test_an_operator_refusing_no_rows_in_a_body_is_a_zero_size_error_at_its_line(hybridize):
    """``rows * 2`` on the rows of a mask that kept none: MXNet 1.x cannot compute it (eagerly
    its own shape-inference message, naming no line). Eager and hybridized: a ZeroSizeError
    naming the operator and the user's line, the same on every call; the calls between work."""
    line = line_in("return gluon_cf.cond(F.sum(x) > 0, lambda: F.contrib.boolean_mask(x, m) "
                   "* 2,")
    net = fresh(ScalesMaskedRows, hybridize)
    for mask in ([1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 0, 0]):
        if not any(mask):
            with pytest.raises(gluon_cf.ZeroSizeError, match=re.escape(
                    f"gluon_cf: _mul_scalar at {HERE}:{line}")):
                net(nd.array(X), nd.array(mask)).wait_to_read()
            continue
        got = net(nd.array(X), nd.array(mask)).asscalar()
        assert got == pytest.approx(2 * X[np.array(mask, bool)].sum(), rel=1e-5)


def test_eager_code_outside_bodies_runs_as_mxnet_runs_it():
    """The oracle the tests above changed: plain MXNet, eagerly, cannot take the gradient of a
    sum of no rows (gluon_cf leaves code outside its ops' bodies alone)."""
    x = nd.array(X)
    x.attach_grad()
    with autograd.record():
        out = nd.contrib.boolean_mask(x, nd.array([0, 0, 0])).sum() + x.sum()
    # (raised by backward() itself where it waits for the engine, NOTE [a remat backward
    # reads what it recomputes from]: once an earlier test in the process left remat nodes)
    with pytest.raises(mx.MXNetError, match="Shape dim size cannot be a negative value"):
        out.backward()
        x.grad.asnumpy()
