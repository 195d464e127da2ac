"""Silently wrong values found while reviewing session 19's changes, each against an oracle."""
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_cf


class _AppendsItsState(gluon.HybridBlock):
    """A tensor loop appending a value computed before it (found by h19unroll's property test,
    wrong since the outermost foreach wrote into MXNet's output rows)."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.relu(x[0]) * 2
        for r in x:
            outs.append(h)
        return F.stack(*outs)


def test_a_recorded_loop_appending_a_value_of_no_step_writes_every_row():
    """Was: hybridized under ``autograd.record()`` only the first row was written, the others
    held whatever the memory held (NOTE [outputs MXNet would merge])."""
    x = mx.nd.array(np.arange(12).reshape((3, 4)) - 5.0)
    h = np.maximum(x.asnumpy()[0], 0) * 2
    expected = np.stack([h] * 3)
    grad = np.where(x.asnumpy()[0] > 0, 2.0 * 3, 0.0)   # three rows each hold 2 * relu(x[0])
    for hybrid in (False, True):
        net = _AppendsItsState()
        if hybrid:
            net.hybridize()
        for _ in range(2):
            xv = x.copy()
            xv.attach_grad()
            with autograd.record():
                y = net(xv)
            y.backward()
            np.testing.assert_allclose(y.asnumpy(), expected, err_msg="hybrid=%s" % hybrid)
            np.testing.assert_allclose(xv.grad.asnumpy()[0], grad)
            np.testing.assert_allclose(xv.grad.asnumpy()[1:], 0)
