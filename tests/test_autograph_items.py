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


class DecoderAppendsAfterBreak(gluon.HybridBlock):
    """The commonest decoder shape: a step, a tensor break, then the append."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.nn.Dense(2, in_units=2, flatten=False)

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        tokens = []
        for t in range(4):
            x = x * 2 + F.tanh(self.cell(x)) * 0.1
            if F.sum(x) > 3:
                break
            tokens.append(x * 2)
        return F.stack(*tokens)


def run_decoder(net, x, plain=False):
    x = mx.nd.array(x)
    x.attach_grad()
    with autograd.record():
        out = DecoderAppendsAfterBreak.hybrid_forward.__wrapped__(net, mx.nd, x) if plain \
            else net(x)
    out.backward()
    return [out.asnumpy(), x.grad.asnumpy()] + \
        [p.grad().asnumpy() for p in net.collect_params().values()]


@pytest.mark.parametrize("mode", MODES)
def test_append_after_a_tensor_break_equals_plain_python(mode):
    """Appended where no break happened, for 1 to 4 steps: values and gradients (of the input
    and the parameters) equal plain Python's; where the first step breaks the list is empty:
    plain Python's F.stack() of nothing fails, and hybridized it is an IndexError at the
    stack's line, on that call only."""
    mx.random.seed(1)
    net = DecoderAppendsAfterBreak()
    net.initialize(mx.init.Xavier())
    set_mode(net, mode)
    ran = set()
    for x in ([[0.02, 0.03]], [[0.2, 0.2]], [[0.3, 0.35]], [[0.6, 0.5]], [[2.0, 2.0]],
              [[0.02, 0.03]]):
        try:
            want = run_decoder(net, x, plain=True)
        except mx.MXNetError:
            want = None
        if want is None:
            error = mx.MXNetError if mode == "eager" else IndexError
            with pytest.raises(error, match="" if mode == "eager" else re.escape(
                    "return F.stack(*tokens): this unpacks a list that must hold an item (as "
                    "the call needs): the list holds 0 items this call (the loop at ")):
                run_decoder(net, x)
            continue
        ran.add(want[0].shape[0])
        for got, w in zip(run_decoder(net, x), want):
            np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
    assert ran == {1, 2, 3, 4}, ran            # several numbers of steps, and the empty list above


class WhileAppendsAfterBreak(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        tokens = [x]
        i = F.zeros((1,))
        while i < 4:
            i = i + 1
            x = x * 2
            if F.sum(x) > 5:
                break
            tokens.append(x)
        return F.stack(*tokens)


def test_append_after_a_tensor_break_in_a_while_is_refused_with_what_to_do():
    """In a graph's while loop the step that breaks would still give its row: refused at the
    loop's line, saying where to append."""
    x = mx.nd.ones((2,))
    want = WhileAppendsAfterBreak.hybrid_forward.__wrapped__(None, mx.nd, x).asnumpy()
    np.testing.assert_allclose(WhileAppendsAfterBreak()(x).asnumpy(), want)
    net = WhileAppendsAfterBreak()
    net.hybridize()
    lines = open(HERE).read().splitlines()
    line = next(i for i, text in enumerate(lines) if "class WhileAppendsAfterBreak" in text)
    line = next(i for i in range(line, len(lines)) if "while i < 4:" in lines[i]) + 1
    with pytest.raises(gluon_cf.AutographError, match=re.escape(
            f"{HERE}:{line}: while i < 4: this while loop is on a tensor and changes the list "
            f"'tokens' from outside it") + ".*in a while loop before any break"):
        net(x)
