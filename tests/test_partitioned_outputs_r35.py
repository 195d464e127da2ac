"""A block that runs partitioned (a boolean_mask before its loop) returned its parameter, its
input and a twice-returned output as the very arrays: writing into one changed the block's
parameter (and so the next call's result), the caller's data, or the other output. MXNet's
CachedOp, and the same block when it is not partitioned, return arrays of their own
(hostile review of session 35; ``hybrid._owned``). Oracle: the block without the mask (one
CachedOp), and numpy."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf


class _ReturnsItsOwn(gluon.HybridBlock):
    def __init__(self, masked):
        super().__init__()
        self.masked = masked
        with self.name_scope():
            self.w = self.params.get("w", shape=(2, 3), init=mx.init.One())

    def hybrid_forward(self, F, x, mask, w):
        rows = F.contrib.boolean_mask(x, mask) if self.masked else x
        outs, _ = gluon_cf.foreach(
            lambda r, s: (F.broadcast_mul(r, w.sum(axis=0)), [s[0] + r]), rows, [F.zeros((3,))])
        return outs, w, outs, x


@pytest.mark.parametrize("masked", [False, True])
def test_returned_parameter_input_and_repeated_output_are_arrays_of_their_own(masked):
    net = _ReturnsItsOwn(masked)
    net.initialize()
    net.hybridize()
    x, mask = mx.nd.ones((4, 3)), mx.nd.ones((4,))
    outs, w, outs_again, x_out = net(x, mask)
    w[:] = 5
    outs_again[:] = -1
    x_out[:] = 7
    assert net.w.data().asnumpy().tolist() == np.ones((2, 3)).tolist()
    assert outs.asnumpy().tolist() == np.full((4, 3), 2.0).tolist()
    assert x.asnumpy().tolist() == np.ones((4, 3)).tolist()
    assert net(x, mask)[0].asnumpy().tolist() == np.full((4, 3), 2.0).tolist()
    with autograd.record():   # recorded: the returned weight's gradient reaches the parameter
        outs, w, _, _ = net(x, mask)
        loss = (outs.sum() + (w * 3).sum())
    loss.backward()
    np.testing.assert_allclose(net.w.grad().asnumpy(), np.full((2, 3), 4.0 + 3.0))
