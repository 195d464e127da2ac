"""Found while reviewing the merges of h19rec (batching keys, recursion refusals) and h19export
(rank-varying cond outputs, Scans of run-time length, recursion at opset 12), each against an
oracle (plain numpy, or the eager block)."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf

# a binary forest: 0 = (1, 2); 3 = (4, 5); 6 alone (left < 0: a leaf)
X = np.random.RandomState(3).randn(7, 3).astype(np.float32)
LEFT = np.array([1, -1, -1, 4, -1, -1, -1], np.float32)
RIGHT = np.array([2, -1, -1, 5, -1, -1, -1], np.float32)
ROOTS = np.array([0, 3, 6], np.float32)


def _rows_of(F, node, roots):
    hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
    return F.reshape(hs, (-3, -2))


class _SpineInLoopBody(gluon.HybridBlock):
    """A recursive function defined in a loop body inside a recursive body, closing over the
    loop's step value (``LOOP``: foreach over two rows of x, or a while_loop's variable)."""
    LOOP = "foreach"

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            here = F.take(x, i)

            def spine_of(r):
                @gluon_cf.recursive
                def spine(j):
                    return gluon_cf.cond(F.take(left, j) < 0, lambda: F.broadcast_mul(F.take(x, j), r),
                                         lambda: F.take(x, j) + spine(F.take(left, j)) * 0.5)
                return F.broadcast_add(spine(F.take(right, i)), r)

            if self.LOOP == "foreach":
                outs, _ = gluon_cf.foreach(lambda r, s: (spine_of(r), s),
                                           F.slice_axis(x, 0, 0, 2), [])
                total = F.sum(outs, axis=0)
            else:
                _, (_, total) = gluon_cf.while_loop(
                    lambda k, acc: k < 2,
                    lambda k, acc: (None, (k + 1, acc + spine_of(F.take(x, k)))),
                    [F.zeros((1,)), F.zeros_like(here)], max_iterations=2)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: here,
                                 lambda: F.tanh(total + node(F.take(left, i))))
        return _rows_of(F, node, roots)


class _SpineInWhileBody(_SpineInLoopBody):
    LOOP = "while_loop"


def _spine_oracle():
    lt, rt = LEFT.astype(int), RIGHT.astype(int)

    def spine(j, r):
        here = X[j:j + 1]
        return here * r if lt[j] < 0 else here + spine(lt[j], r) * 0.5

    def node(i):
        here = X[i:i + 1]
        if lt[i] < 0:
            return here
        total = sum(spine(rt[i], X[k:k + 1]) + X[k:k + 1] for k in range(2))
        return np.tanh(total + node(lt[i]))
    return np.concatenate([node(int(r)) for r in ROOTS], axis=0)


@pytest.mark.parametrize("block_class", [_SpineInLoopBody, _SpineInWhileBody])
def test_a_recursion_closing_over_a_loop_step_inside_a_recursion_is_refused_at_its_line(
        block_class):
    """Was, hybridized: AssertionError 'Unknown input to HybridBlock: _gcf21_foreach_body_in0'
    (the inner function's environment held the loop's input; refusals.py only knew the
    inputs of recursive functions' traces). Eagerly it runs, equal to plain numpy."""
    args = [mx.nd.array(a) for a in (X, LEFT, RIGHT, ROOTS)]
    net = block_class()
    net.initialize()
    np.testing.assert_allclose(net(*args).asnumpy(), _spine_oracle(), rtol=1e-5, atol=1e-6)
    net.hybridize()
    with pytest.raises(NotImplementedError) as caught:
        net(*args)
    message = str(caught.value)
    assert message.startswith(__file__ + ":"), message
    assert "'spine' reads a value computed in a gluon_cf.%s" % block_class.LOOP in message
    assert "pass it to 'spine' as an argument" in message


class _SpineReadsOnlyInputsInLoopBody(gluon.HybridBlock):
    """The same nesting, the inner function closing over the block's inputs only: runs."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            def step(r, s):
                @gluon_cf.recursive
                def spine(j):
                    return gluon_cf.cond(F.take(left, j) < 0, lambda: F.take(x, j),
                                         lambda: F.take(x, j) + spine(F.take(left, j)) * 0.5)
                return F.broadcast_mul(spine(F.take(right, i)), r), s
            outs, _ = gluon_cf.foreach(step, F.slice_axis(x, 0, 0, 2), [])
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: F.tanh(F.sum(outs, axis=0) + node(F.take(left, i))))
        return _rows_of(F, node, roots)


def test_a_recursion_in_a_loop_body_inside_a_recursion_reading_inputs_only_runs():
    lt, rt = LEFT.astype(int), RIGHT.astype(int)

    def spine(j):
        return X[j:j + 1] if lt[j] < 0 else X[j:j + 1] + spine(lt[j]) * 0.5

    def node(i):
        if lt[i] < 0:
            return X[i:i + 1]
        return np.tanh(sum(spine(rt[i]) * X[k:k + 1] for k in range(2)) + node(lt[i]))
    want = np.concatenate([node(int(r)) for r in ROOTS], axis=0)
    for hybrid in (False, True):
        net = _SpineReadsOnlyInputsInLoopBody()
        net.initialize()
        if hybrid:
            net.hybridize()
        args = [mx.nd.array(a) for a in (X, LEFT, RIGHT, ROOTS)]
        args[0].attach_grad()
        with autograd.record():
            out = net(*args)
        out.backward()
        np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-5, atol=1e-6)
        assert np.abs(args[0].grad.asnumpy()).sum() > 0
