"""Round fix31b: a hybridized block whose graph MXNet records operator by operator (at most
``inline_limit`` operators, 2 by default: a foreach after ``F.ones``) kept being recorded so
after the MKLDNN copies (NOTE [MKLDNN values read by a node] in ``gluon_cf/_cachedop.py``)
grew its graph. Before: the guarded graph, of more operators, was recorded as one
``_CachedOp``, and ``autograd.grad(..., create_graph=True)`` through the block raised MXNet's
"CachedOp does not support higher order gradients" (it worked with MXNET_MKLDNN_ENABLED=0);
a second-order gradient then met the copies' ``_backward_reshape`` ("non-differentiable",
naming no node) before the node's ``_backward_Custom``. Found in round fix31b, fixed in session
34: a block's output that is a node's, read by an eager convolution after the block: the
gradient that convolution hands the node (MKLDNN's blocked layout) was read freed (every
gradient before the block wrong, 10 of 10 fresh blocks, recorded by operators or as one
CachedOp; right with MXNET_MKLDNN_ENABLED=0); such an output now passes through a ``Cast`` to
its own dtype in the CachedOp's graph (NOTE [MKLDNN values read by a node]).
Oracles: the same block eager, numpy."""
import re

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd
from mxnet.gluon import HybridBlock, nn

import gluon_cf


class _Product(HybridBlock):
    def hybrid_forward(self, F, x):
        _, s = gluon_cf.foreach(lambda d, s: ([], [s[0] * d]), x, [F.ones((2,))])
        return s[0]


class _Doubled(HybridBlock):
    def hybrid_forward(self, F, h):
        out, _ = gluon_cf.foreach(lambda d, s: (d * 2 + s[0], [s[0] + 1]), h,
                                  [F.zeros((16, 6, 6))])
        return out


@pytest.mark.parametrize("hybridize", [False, True])
def test_a_first_order_gradient_with_create_graph_through_a_small_block(hybridize):
    net = _Product()
    if hybridize:
        net.hybridize()
    x = mx.nd.array([[1., 2.], [3., 4.]])
    x.attach_grad()
    with autograd.record():
        y = net(x)
        g = autograd.grad(y, [x], create_graph=True)[0]
    np.testing.assert_allclose(y.asnumpy(), [3., 8.], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.asnumpy(), [[3., 4.], [1., 2.]], rtol=1e-5, atol=1e-6)
    if not hybridize:   # (eagerly the body's own operators: MXNet's _backward_slice refuses)
        return
    with autograd.record():
        z = (autograd.grad(net(x), [x], create_graph=True)[0] ** 2).sum()
    with pytest.raises(NotImplementedError) as err:
        z.backward()
    assert re.match(r"gluon_cf\.foreach \(node '[^']+'\) at %s:\d+: a second-order gradient "
                    r"through it is not supported" % re.escape(__file__), str(err.value))


def _conv_block_conv(hybridize, x, after=True):
    """An eager convolution's value (MKLDNN's blocked layout) into a small hybridized block,
    its output into another convolution (``after``, else summed); values and gradients."""
    c1 = nn.Conv2D(16, 3, padding=1, in_channels=4)
    c2 = nn.Conv2D(8, 3, padding=1, in_channels=16)
    net = _Doubled()
    for k, c in enumerate((c1, c2)):
        c.initialize()
        for j, p in enumerate(c.collect_params().values()):
            p.set_data(mx.nd.array(np.random.RandomState(10 * k + j).randn(*p.shape) * 0.1))
    if hybridize:
        net.hybridize()
    x = x.copy()
    x.attach_grad()
    with autograd.record():
        out = c2(net(c1(x))) if after else net(c1(x))
        loss = (out * out).sum()
    loss.backward()
    grads = [p.grad().asnumpy() for c in ((c1, c2) if after else (c1,))
             for p in c.collect_params().values()]
    return [out.asnumpy(), x.grad.asnumpy()] + grads


def test_an_mkldnn_value_into_a_block_recorded_by_operators_is_right():
    """10 fresh blocks, each recorded by operators (two operators: zeros and the node), equal
    the eager block: the copies stay in the graph recorded so."""
    x = mx.nd.array(np.random.RandomState(0).randn(2, 4, 6, 6))
    want = _conv_block_conv(False, x, after=False)
    for _ in range(10):
        for w, g in zip(want, _conv_block_conv(True, x, after=False)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_a_convolution_after_a_block_returning_a_nodes_output():
    x = mx.nd.array(np.random.RandomState(0).randn(2, 4, 6, 6))
    want = _conv_block_conv(False, x)
    for _ in range(3):
        for w, g in zip(want, _conv_block_conv(True, x)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


class _Picked(HybridBlock):
    def hybrid_forward(self, F, x, m):
        return gluon_cf.cond(F.sum(x) > 0, lambda: m, lambda: m)


@pytest.mark.parametrize("dtype", ["bool", "int8", "int64", "float16", "float64"])
def test_a_nodes_output_returned_by_the_block_keeps_its_dtype(dtype):
    """The block's outputs that are a node's pass through a ``Cast`` to their dtype where
    MKLDNN is on (``_mul_scalar`` by 1, tried first, made a bool output int64); the eager
    block's dtype and values, also when one block is called with another dtype after the
    first (the Cast is for the dtypes of the call it was built for: the block rebuilds it)."""
    x = mx.nd.array([1., 2.])
    net = _Picked()
    net.hybridize()
    for first in ("float32", dtype):
        net(x, mx.nd.array([1, 0, 1], dtype=first)).asnumpy()
        for given in (dtype, "float32", dtype):
            m = mx.nd.array([1, 0, 1], dtype=given)
            want = _Picked()(x, m)
            got = net(x, m)
            assert got.dtype == want.dtype == np.dtype(given), (first, given, got.dtype)
            np.testing.assert_array_equal(got.asnumpy(), want.asnumpy())
        with autograd.record():   # (recorded: the CachedOp MXNet records, the same guard)
            m.attach_grad()
            got = net(x, m)
        assert got.dtype == np.dtype(dtype)


class _ToCSR(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0].tostype("csr"))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], out_grad[0].tostype("default"))


@mx.operator.register("fix31b_tocsr")
class _ToCSRProp(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=True)

    def list_arguments(self):
        return ["data"]

    def list_outputs(self):
        return ["output"]

    def infer_shape(self, in_shape):
        return in_shape, in_shape, []

    def infer_storage_type(self, in_stype):
        return in_stype, ["csr"], []

    def create_operator(self, ctx, shapes, dtypes):
        return _ToCSR()


class _UserCSR(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.Custom(x, op_type="fix31b_tocsr")


def test_a_user_custom_ops_sparse_output_returned_by_the_block_stays_sparse():
    """Review of session 33: the guard of a block's outputs first took every Custom node's, a
    user CustomOp's csr output too, which the copy made dense (hybridized ``default``
    where eager and plain MXNet give ``csr``); only gluon_cf's nodes, whose outputs are dense,
    are guarded."""
    x = mx.nd.array([[0, 1.], [2, 0]])
    want = _UserCSR()(x)
    net = _UserCSR()
    net.hybridize()
    got = net(x)
    assert got.stype == want.stype == "csr"
    np.testing.assert_array_equal(got.indices.asnumpy(), want.indices.asnumpy())
    np.testing.assert_array_equal(got.asnumpy(), want.asnumpy())
