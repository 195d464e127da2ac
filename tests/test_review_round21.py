"""Review of round 17b (h21b): boolean_mask's mask gradient, per-call environments of a
recursion, row-wise shapes by position."""
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_cf


def _masked_by_first_column(F, x):
    m = F.reshape(F.slice_axis(x, axis=1, begin=0, end=1), (-1,))
    kept = F.contrib.boolean_mask(x, m)
    spread = F.broadcast_mul(F.expand_dims(m, 1), x * 3 + 1)   # the mask read elsewhere too
    return (F.sum(kept) + F.sum(spread) * 0).reshape((1,))


class MaskBesideACond(gluon.HybridBlock):
    """A boolean_mask no gluon_cf node reads: the block ran as one CachedOp."""

    def hybrid_forward(self, F, x):
        c = gluon_cf.cond(F.sum(x) > 0, lambda: F.sum(x, keepdims=True).reshape((1,)),
                          lambda: F.zeros((1,)))
        return _masked_by_first_column(F, x) + c


def test_a_mask_read_elsewhere_beside_a_node_gets_no_uninitialised_gradient():
    """A hybridized block with a gluon_cf node that MXNet ran as one CachedOp added
    boolean_mask's never-written mask gradient into x's column 0 (-1.04e34, 3.0 where 2.0):
    a recorded call now runs partitioned, the mask detached, as numpy: x.grad is 1 + 1 on
    the kept rows."""
    rng = np.random.RandomState(0)
    net = MaskBesideACond()
    net.hybridize()
    for _ in range(4):
        xn = rng.rand(6, 4)
        xn[[1, 4], 0] = 0
        x = mx.nd.array(xn)
        x.attach_grad()
        with autograd.record():
            y = net(x)
        y.backward()
        want = np.ones_like(xn)
        want[xn[:, 0] != 0] += 1
        np.testing.assert_array_equal(x.grad.asnumpy(), want)
        np.testing.assert_allclose(y.asnumpy(), [xn[xn[:, 0] != 0].sum() + xn.sum()],
                                   rtol=1e-5)
        np.testing.assert_allclose(net(x).asnumpy(), y.asnumpy(), rtol=1e-6)   # (not recorded)


class MaskedSumOfParameter(gluon.HybridBlock):
    """The data of a boolean_mask is a leaf (a parameter), beside a while_loop counting."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.w = self.params.get("w", shape=(5, 3), init=mx.init.Uniform())

    def hybrid_forward(self, F, x, m, w):
        kept = F.contrib.boolean_mask(w, m)
        count = F.sum(m, keepdims=True)
        _, (_, h) = gluon_cf.while_loop(
            lambda k, h: k < count, lambda k, h: ([], [k + 1, h + F.take(kept, k)]),
            [F.zeros((1,)), F.zeros((1, 3))], max_iterations=6)
        return h * x


def test_a_masked_leaf_accumulates_its_gradient_on_every_row():
    """grad_req='add' on the data of a boolean_mask gluon_cf runs: MXNet 1.9.1's kAddTo
    kernel runs once per row, reading one element each, so w.grad was [[3, 0, 0], [0, 0, 0],
    ...] after 3 steps where numpy says 3 on every kept row (row 0 alone, partly)."""
    net = MaskedSumOfParameter()
    net.initialize()
    net.hybridize()
    net.w.grad_req = "add"
    mask = np.array([1, 0, 1, 0, 1])
    x = mx.nd.array([[1.0, 2.0, 3.0]])
    for _ in range(3):
        with autograd.record():
            y = net(x, mx.nd.array(mask))
        y.backward()
    w = net.w.data().asnumpy()
    np.testing.assert_allclose(y.asnumpy(), w[mask > 0].sum(0, keepdims=True) * [1, 2, 3],
                               rtol=1e-5)
    want = np.zeros((5, 3))
    want[mask > 0] = 3 * np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(net.w.grad().asnumpy(), want)


def test_two_threads_calling_one_recursion_with_two_environment_widths():
    """Was RecursionDepthError ("does it reach a base case?") in either thread: a call's
    bodies inferred at run time read the table's last-seen environment, which the other
    thread's call of another width had set meanwhile. Each call equals the eager block's,
    forward and gradient."""
    import threading
    import warnings

    from test_hostile_round17b import ChildLoopOfRowWidth
    tree = [mx.nd.array(a) for a in ([0, 4, 4, 4, 4, 4], [1, 2, 3, 4], [0, 3, 0])]
    inputs = {w: mx.nd.array(np.random.RandomState(w).rand(5, w)) for w in (2, 3)}

    def call(net, v):
        v = v.copy()
        v.attach_grad()
        with autograd.record():
            y = net(v, *tree)
        y.backward()
        return y.asnumpy(), v.grad.asnumpy()

    want = {w: call(ChildLoopOfRowWidth(), v) for w, v in inputs.items()}
    net = ChildLoopOfRowWidth()
    net.hybridize()
    failures = []

    def worker(width):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for _ in range(6):
                    for got, expected in zip(call(net, inputs[width]), want[width]):
                        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
        except Exception as err:    # (reported below, from the main thread)
            failures.append("width %d: %s: %s" % (width, type(err).__name__, err))
    threads = [threading.Thread(target=worker, args=(w,)) for w in (2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
