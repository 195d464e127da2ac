"""Issue 24 (items 2, 3, 4, 6, 7), seventeenth round (b): recursion, export and files; here what
the round fixed, each on its own."""
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_cf


# ---- fixed: the gradient of a mask also used elsewhere ---------------------------------------

class MaskAndCount(gluon.HybridBlock):
    """boolean_mask by ``m`` and a while_loop over ``sum(m)`` kept rows."""

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m, keepdims=True)
        _, (_, h) = gluon_cf.while_loop(
            lambda k, h: k < count, lambda k, h: ([], [k + 1, h + F.take(kept, k)]),
            [F.zeros((1,)), F.zeros((1, 3))], max_iterations=6)
        return h


def test_the_gradient_of_a_mask_also_summed_is_zero_not_uninitialised_memory():
    """MXNet 1.9.1's boolean_mask backward never writes its index's gradient: with the mask
    also used by ``sum`` (the loop's count), the block ran partitioned and autograd added that
    unwritten buffer: ``m.grad`` was [1.1e-16, 4.6e-41], [2.9e15, ...]. The mask's gradient
    is 0 (it only selects rows; plain Python reading it on the host gives 0)."""
    net = MaskAndCount()
    net.hybridize()
    rng = np.random.RandomState(0)
    for mask in ([1, 1], [1, 0, 1], [0, 0], [1, 1, 1, 1]):
        for _ in range(3):
            x = mx.nd.array(rng.rand(len(mask), 3))
            m = mx.nd.array(mask)
            x.attach_grad()
            m.attach_grad()
            with autograd.record():
                y = net(x, m)
            y.backward()
            assert m.grad.asnumpy().tolist() == [0.0] * len(mask), (mask, m.grad)
            want = np.zeros((len(mask), 3))
            want[np.array(mask) > 0] = 1
            np.testing.assert_array_equal(x.grad.asnumpy(), want)
            np.testing.assert_allclose(y.asnumpy()[0], x.asnumpy()[np.array(mask) > 0].sum(0),
                                       rtol=1e-6)
