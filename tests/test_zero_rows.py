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
