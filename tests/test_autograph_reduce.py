"""``functools.reduce`` and generator expressions in converted code (issue 24): over a Python
list of tensors they run as Python (the list's items are the graph's arrays), eager and
hybridized, values and gradients equal to plain Python; over a tensor a generator converts
(``sum(r * 2 for r in x)``, its rows) and so does ``functools.reduce`` (since round 24a;
refused before, at the user's line)."""
import functools
import inspect

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd
from mxnet.gluon import HybridBlock

from gluon_cf import autograph


def _weighted(a, b):
    return a + b * 2


class ReduceOverAList(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        parts = [x * 1, F.tanh(x), x * 3]
        total = functools.reduce(_weighted, parts)
        squares = sum(p * p for p in parts)
        return total + squares + F.add_n(*(p + 1 for p in parts))


class GeneratorOverATensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return sum(r * 2 for r in x) + x[0]


class ReduceOverATensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return functools.reduce(lambda a, b: a + b, x)


def _value_and_gradient(net, x):
    x = mx.nd.array(x)
    x.attach_grad()
    with autograd.record():
        out = net(x)
        (out * mx.nd.array(np.arange(out.size).reshape(out.shape) + 1.0)).sum().backward()
    return out.asnumpy(), x.grad.asnumpy()


# (ReduceOverATensor was refused hybridized until round 24a: it folds the rows the input
# shapes give; over rows of a run-time count it is refused, test_hostile_round24a)
@pytest.mark.parametrize("block_class", [ReduceOverAList, GeneratorOverATensor,
                                         ReduceOverATensor],
                         ids=lambda c: c.__name__)
def test_reduce_and_generators_equal_plain_python(block_class):
    x = np.random.RandomState(0).uniform(-1, 1, (2, 3)).astype("float32")
    net = block_class()
    plain = _value_and_gradient(
        lambda v: inspect.unwrap(block_class.hybrid_forward)(net, mx.nd, v), x)
    eager = _value_and_gradient(net, x)
    net.hybridize()
    hybrid = _value_and_gradient(net, x)
    for got in (eager, hybrid):
        for g, want in zip(got, plain):
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
