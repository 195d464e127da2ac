"""Round 31h (review, issue 24): a 4-D convolution's value (MKLDNN keeps it in a blocked
layout, nChw8c) read by a gluon_cf node, and the gradient a convolution after the node hands
it. MXNet 1.9.1 runs a ``Custom`` operator (every gluon_cf node) asynchronously and gives it,
for an input in an MKLDNN layout, a default-layout *copy* that it frees when the operator's
``FStatefulComputeEx`` returns, before the Python callback reads it (NOTE [MKLDNN values read by
a node] in ``gluon_cf/_cachedop.py``). Before this round's fix the forward values were right
(r31h's fix) but every gradient through ``cond`` was other numbers (10 of 10 fresh blocks;
``foreach`` 5 of 5): the output gradient a Convolution's backward computes in a blocked layout.
Oracle: the same block eager (right, as every run with ``MXNET_MKLDNN_ENABLED=0``); MXNet's own
``F.contrib.cond`` is no oracle here: hybridized, its gradients are wrong the same way."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd
from mxnet.gluon import HybridBlock, nn

import gluon_cf


def _cond(F, h):
    return gluon_cf.cond(F.sum(h) > -1e9, lambda: h * 2, lambda: h)


def _foreach(F, h):
    zero = F.zeros_like(F.slice_axis(h, axis=0, begin=0, end=1).reshape((16, 6, 6)))
    out, _ = gluon_cf.foreach(lambda d, s: (d * 2 + s[0], [s[0] + 1]), h, [zero])
    return out


def _while_loop(F, h):
    out, _ = gluon_cf.while_loop(lambda i, v: i < 2, lambda i, v: (v, (i + 1, v * 1.5)),
                                 (F.zeros((1,)), h), max_iterations=2)
    return out.reshape((-1, 6, 6)).slice_axis(axis=0, begin=0, end=2 * 16).reshape(
        (2, 16, 6, 6)) + 0


def _nested(F, h):
    """A convolution inside a body, its value read by a nested node."""
    return gluon_cf.cond(F.sum(h) > -1e9, lambda: _cond(F, h * 1) + 1, lambda: h)


class ConvNodeConv(HybridBlock):
    def __init__(self, between):
        super().__init__()
        self.between = between
        with self.name_scope():
            self.c1 = nn.Conv2D(16, 3, padding=1, in_channels=4)
            self.c2 = nn.Conv2D(8, 3, padding=1, in_channels=16)

    def hybrid_forward(self, F, x):
        return self.c2(self.between(F, self.c1(x)))


def _run(between, hybridize, x, head):
    net = ConvNodeConv(between)
    net.initialize()
    for p in net.collect_params().values():
        seed = len(p.name.split("_", 1)[1])
        p.set_data(mx.nd.array(np.random.RandomState(seed).randn(*p.shape) * 0.1))
    if hybridize:
        net.hybridize()
    x = x.copy()
    x.attach_grad()
    with autograd.record():
        y = net(x)
    y.backward(head)
    return [y.asnumpy(), x.grad.asnumpy(), net.c1.weight.grad().asnumpy()]


@pytest.mark.parametrize("between", [_cond, _foreach, _while_loop, _nested])
def test_round_31h2_convolution_values_and_gradients_through_a_node(between):
    rng = np.random.RandomState(0)
    x = mx.nd.array(rng.randn(2, 4, 6, 6))
    head = mx.nd.array(rng.randn(2, 8, 6, 6))
    want = _run(between, False, x, head)
    wrong = 0
    for _ in range(8):
        got = _run(between, True, x, head)
        wrong += not all(np.allclose(g, w, rtol=1e-5, atol=1e-5) for g, w in zip(got, want))
    assert wrong == 0


class ConvValueIntoCond(HybridBlock):
    def hybrid_forward(self, F, h):
        return _cond(F, h)


def test_round_31h2_an_input_array_in_a_blocked_layout_read_by_a_node():
    """An eager convolution's output (a blocked layout) given to a hybridized block whose node
    reads it: 9 of 20 calls other numbers before (the block's inputs were not guarded)."""
    conv = nn.Conv2D(16, 3, padding=1, in_channels=4)
    conv.initialize()
    x = mx.nd.array(np.random.RandomState(0).randn(2, 4, 6, 6))
    want = conv(x).asnumpy() * 2
    wrong = 0
    for _ in range(12):
        net = ConvValueIntoCond()
        net.hybridize()
        wrong += not np.allclose(net(conv(x)).asnumpy(), want, rtol=1e-5, atol=1e-5)
    assert wrong == 0


_CONV_IN_A_BRANCH = r'''
import numpy as np, mxnet as mx
from mxnet.gluon import HybridBlock, nn
import gluon_cf
x = mx.nd.array(np.random.RandomState(0).randn(2, %(c)d, 6, 6))
class P(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.conv = nn.Conv2D(16, 3, padding=1, in_channels=%(c)d)
    def hybrid_forward(self, F, x):
        return gluon_cf.cond(F.sum(x) > -1e9, lambda: self.conv(x) * 2,
                             lambda: x.tile((1, 16 // %(c)d, 1, 1)))
wrong = 0
for _ in range(10):
    net = P(); net.initialize(); want = net(x).asnumpy(); net.hybridize()
    for _ in range(2):
        wrong += not np.allclose(net(x).asnumpy(), want, rtol=1e-5, atol=1e-5)
print("wrong", wrong)
'''


@pytest.mark.parametrize("channels", [4, 16])
def test_round_31h2_a_convolution_in_a_branch_for_inference(channels):
    """A Conv2D in a cond's branch, hybridized, for inference: MKLDNN wrote the blocked
    weight into the node's input buffer; "corrupted size vs. prev_size" or a segmentation
    fault before (NOTE [weights reordered in a body] in gluon_cf/node_storage.py)."""
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-c", _CONV_IN_A_BRANCH % {"c": channels}],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-1] == "0", run.stdout
