"""Issue 24, autograph's remainder: ``items[i]`` of a list a tensor loop collected, past the
items the loop appended this call, is an IndexError naming the user's line, eagerly (plain
Python's) and hybridized (NOTE [checked items]), on every call whatever came before; in
range it equals plain Python, values and gradients."""
import re

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf

from conftest import MODES, set_mode

HERE = __file__


class ItemAfterUnboundedLoop(gluon.HybridBlock):
    def __init__(self, index):
        super().__init__()
        self.index = index

    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        items = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            items.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        return items[self.index] * x


class ItemAfterBoundedLoop(gluon.HybridBlock):
    def __init__(self, index):
        super().__init__()
        self.index = index

    @gluon_cf.autograph(max_iterations=4)
    def hybrid_forward(self, F, x, n):
        items = [x]
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            items.append(F.broadcast_mul(x, i + 2))
            i = i + 1
        return items[self.index] * x


def plain(model, index, x, n):
    """Plain Python on NDArrays (the unconverted function): value and gradient, or the error."""
    x = mx.nd.array(x)
    x.attach_grad()
    with autograd.record():
        out = type(model(index)).hybrid_forward.__wrapped__(model(index), mx.nd, x,
                                                             mx.nd.array([n]))
    out.backward()
    return out.asnumpy(), x.grad.asnumpy()


def converted(net, x, n):
    x = mx.nd.array(x)
    x.attach_grad()
    with autograd.record():
        out = net(x, mx.nd.array([n]))
    out.backward()
    return out.asnumpy(), x.grad.asnumpy()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("model, index, line, header", [
    (ItemAfterUnboundedLoop, 2, "return items[self.index] * x",
     "while F.sum(i) < F.sum(n):"),
    (ItemAfterUnboundedLoop, -3, "return items[self.index] * x",
     "while F.sum(i) < F.sum(n):"),
    (ItemAfterBoundedLoop, 3, "return items[self.index] * x", "while F.sum(i) < F.sum(n):"),
], ids=lambda v: getattr(v, "__name__", None))
def test_item_past_this_calls_items_is_an_index_error(mode, model, index, line, header):
    """Steps 3, 1, 0, 2, 3 in one block: in range it is plain Python's value and gradient;
    past the items appended this call it is an IndexError at the user's line (once MXNet's
    slice_axis error), and the block goes on working."""
    net = model(index)
    set_mode(net, mode)
    x = [1.0, -2.0]
    for n in (3, 1, 0, 2, 3):
        try:
            want = plain(model, index, x, n)
        except IndexError:
            want = None
        if want is not None:
            for got, w in zip(converted(net, x, n), want):
                np.testing.assert_allclose(got, w, rtol=1e-6)
            continue
        message = "list index out of range" if mode == "eager" else \
            re.escape(f"{HERE}:") + r"\d+" + re.escape(
                f": {line}: list index {index} out of range: the list holds ") + r"\d+" + \
            re.escape(f" items this call (the loop at {HERE}:") + r"\d+" + \
            re.escape(f" ({header}) appended them)")
        with pytest.raises(IndexError, match=message):
            converted(net, x, n)
