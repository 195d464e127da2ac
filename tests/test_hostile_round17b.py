"""Issue 24 (items 2, 3, 4, 6, 7), seventeenth round (b): recursion, export and files; here what
the round fixed, each on its own."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf

import hostile_harness
from test_recursion_hostile2 import make, with_mode


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


# ---- fixed: a failed call of other shapes left the recursion's environment behind ----------

class ChildLoopOverRoots(gluon.HybridBlock):
    """A recursive function looping over a CSR node's children, mapped over the roots."""

    def hybrid_forward(self, F, v, ptr, cidx, roots):
        @gluon_cf.recursive(max_depth=12)
        def node(k):
            def func(j, acc):
                return [], [j + 1, acc + node(F.take(cidx, j))]
            _, (_, acc) = gluon_cf.while_loop(lambda j, acc: j < F.take(ptr, k + 1), func,
                                              [F.take(ptr, k), F.zeros((1, 2))],
                                              max_iterations=5)
            return F.take(v, k) + F.tanh(acc)
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return hs


@pytest.mark.parametrize("executor", ["batched", "unbatched"])
def test_a_call_failing_on_other_shapes_leaves_the_recursion_usable(executor):
    """Was: after a call whose data had one more axis (refused at the user's line), the next
    call of the shapes seen before recursed until RecursionDepthError (with the default
    max_depth, 80 s): the function table's last-seen environment was the failed call's, and
    the cached call's bodies were inferred with it. A call's recursion node now sets it."""
    # node 0's children are 1 to 4; roots 0, 3, 0
    arrays = [np.random.RandomState(13).uniform(-1, 1, (5, 2)).astype(np.float32),
              np.array([0, 4, 4, 4, 4, 4], np.float32), np.array([1, 2, 3, 4], np.float32),
              np.array([0, 3, 0], np.float32)]
    want = make(ChildLoopOverRoots)(*[mx.nd.array(a) for a in arrays]).asnumpy()
    net = make(ChildLoopOverRoots)
    net.hybridize()
    deeper = [arrays[0][None]] + arrays[1:]
    for call in (arrays, deeper, arrays, deeper, deeper, arrays, arrays):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # (row by row: a shared (1, 2) zeros per call)
            got = hostile_harness._outcome(lambda: with_mode(executor, lambda: net(
                *[mx.nd.array(a) for a in call]).asnumpy()))
        if call is deeper:
            assert isinstance(got[1], ValueError) and str(got[1]).startswith(__file__), got
        else:
            assert got[0] == "value", got
            np.testing.assert_allclose(got[1], want, rtol=1e-6)


# ---- fixed: a mask of another length than the data, hybridized -------------------------------

class MaskOfOtherLength(gluon.HybridBlock):
    def hybrid_forward(self, F, x, m, c):
        kept = F.contrib.boolean_mask(x, m)

        def body(row, states):
            picked = F.contrib.boolean_mask(F.reshape(row, (-1, 1)), c)
            return F.sum(picked, keepdims=True), [states[0] + F.sum(picked)]
        outs, _ = gluon_cf.foreach(body, kept, [F.zeros((1,))])
        return outs


def test_a_mask_of_another_length_names_the_users_line():
    """Was MXNet's own "Check failed: data.shape()[axis] == idx.shape()[0] (1 vs. 4)", no
    line: gluon_cf runs a boolean_mask between the CachedOps of a graph on its own. Now at
    the block's hybrid_forward (an operator of the block's own graph) or, in a body, at the
    mask's line, on every such call."""
    net = MaskOfOtherLength()
    net.hybridize()
    x = mx.nd.array(np.arange(12).reshape(4, 3))
    ok = [mx.nd.array([1, 0, 1, 1]), mx.nd.array([0, 1, 1])]
    want = np.array([[3.], [15.], [21.]])       # columns 1 and 2 of rows 0, 2 and 3
    np.testing.assert_array_equal(net(x, *ok).asnumpy().reshape(3, 1), want)
    line = next(k for k, text in enumerate(open(__file__), 1)
                if "picked = F.contrib.boolean_mask(F.reshape(row" in text)
    for _ in range(2):
        with pytest.raises(ValueError) as outer:
            net(x, mx.nd.array([1, 0, 1, 1, 0]), ok[1])
        assert str(outer.value).startswith(__file__ + ":%d: hybrid_forward of block" % (
            line - 4)) and "the mask (shape (5,)) must be 1-D with one element per row of the " \
            "data (shape (4, 3)) along axis 0" in str(outer.value), outer.value
        with pytest.raises(ValueError) as inner:
            net(x, ok[0], mx.nd.array([1, 0, 0, 1]))
        assert str(inner.value).startswith(__file__ + ":%d: _contrib_boolean_mask" % line) \
            and "the mask (shape (4,)) must be 1-D with one element per row of the data " \
            "(shape (3, 1))" in str(inner.value), inner.value
    np.testing.assert_array_equal(net(x, *ok).asnumpy().reshape(3, 1), want)
