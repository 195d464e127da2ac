"""Symbolic loop bodies that leave an input unread: refused as MXNet 1.9.1 refuses them
(NOTE [loop inputs a symbolic body must read] in ``gluon_cf/ops/loops.py``), MXNet's own
``mx.sym.contrib`` / ``F.contrib`` ops the oracle.

Was: gluon_cf ran them, so MXNet's own ``test_foreach`` (vendored in ``tests/mxnet_suite``)
failed under gluon_cf: its step12 leaves a state unread, then calls backward with one head
gradient too few, which MXNet's AssertionError keeps from running.
"""
import inspect

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

import gluon_cf

OPS = {"mxnet": mx.sym.contrib, "gluon_cf": gluon_cf}
HERE = __file__


def _state_unread(ops):
    x, s0, s1 = mx.sym.var("x"), mx.sym.var("s0"), mx.sym.var("s1")
    return ops.foreach(lambda d, s: (d * 2, [s[0] + 1, s[0] + 2]), x, [s0, s1])


def _data_unread(ops):
    x, y, s = mx.sym.var("x"), mx.sym.var("y"), mx.sym.var("s")
    return ops.foreach(lambda d, st: (d[0] + st[0], [st[0] * 2]), [x, y], [s])


def _loop_var_read_by_cond_only(ops):
    i, s, t = mx.sym.var("i"), mx.sym.var("s"), mx.sym.var("t")
    return ops.while_loop(lambda i, s, t: (i + t).sum() < 3,
                          lambda i, s, t: (s * 2, [i + 1, s * 2, s]), [i, s, t],
                          max_iterations=4)


REFUSED = [
    (_state_unread, AssertionError, "the state arrays have to be used in the loop body",
     "init_states [1]"),
    (_data_unread, AssertionError, "the data arrays have to be used in the loop body",
     "data [1]"),
    (_loop_var_read_by_cond_only, ValueError,
     "The 3-th loop_var doesn't involve into the computation", "loop_vars[2]"),
]


@pytest.mark.parametrize("build, error, mxnet_text, ours", REFUSED,
                         ids=[case[0].__name__ for case in REFUSED])
def test_symbolic_body_leaving_an_input_unread_is_refused_as_mxnet(build, error, mxnet_text,
                                                                     ours):
    with pytest.raises(error, match=mxnet_text):
        build(OPS["mxnet"])
    with pytest.raises(error) as caught:
        build(OPS["gluon_cf"])
    message = str(caught.value)
    assert mxnet_text in message and ours in message
    line = inspect.getsourcelines(build)[1] + 2     # the line of the op's call
    assert "%s:%d" % (HERE, line) in message, message


class _UnreadState(gluon.HybridBlock):
    def __init__(self, ops):
        super().__init__()
        self.ops = ops

    def hybrid_forward(self, F, x, h, c):
        ops = F.contrib if self.ops == "mxnet" else gluon_cf
        outs, _ = ops.foreach(lambda d, s: (d + s[0], [s[0] * 2, s[0]]), x, [h, c])
        return outs


@pytest.mark.parametrize("ops", ["mxnet", "gluon_cf"])
def test_hybridized_block_leaving_a_state_unread(ops):
    """Eagerly both run with the same values; hybridized both refuse (F.contrib is the
    symbolic op there)."""
    x, h, c = nd.arange(6).reshape((3, 2)), nd.ones((2,)), nd.zeros((2,))
    net = _UnreadState(ops)
    eager = net(x, h, c).asnumpy()
    np.testing.assert_allclose(eager, mx.nd.contrib.foreach(
        lambda d, s: (d + s[0], [s[0] * 2, s[0]]), x, [h, c])[0].asnumpy())
    net.hybridize()
    with pytest.raises(AssertionError, match="the state arrays have to be used"):
        net(x, h, c)


def _passed_through(ops):
    """A state returned unchanged and a loop variable only copied are read, as in MXNet."""
    x, s, i, v = mx.sym.var("x"), mx.sym.var("s"), mx.sym.var("i"), mx.sym.var("v")
    outs, states = ops.foreach(lambda d, st: (d * 3, st), x, [s])
    ys, (i_end, v_end) = ops.while_loop(lambda i, v: i < 3, lambda i, v: (i * 1, [i + 1, v]),
                                        [i, v], max_iterations=3)
    return mx.sym.Group([outs, states[0], ys, i_end, v_end])


def test_inputs_returned_unchanged_count_as_read_and_match_mxnet():
    args = {"x": nd.array([[1.0, 2.0], [3.0, 4.0]]), "s": nd.array([5.0, 6.0]),
            "i": nd.array([0.0]), "v": nd.array([7.0])}
    results = {}
    for name, ops in OPS.items():
        grads = {k: nd.zeros_like(a) for k, a in args.items()}
        ex = _passed_through(ops).bind(mx.cpu(), dict(args), args_grad=grads)
        ex.forward(is_train=True)
        ex.backward([nd.ones_like(o) for o in ex.outputs])
        results[name] = [o.asnumpy() for o in ex.outputs] + [grads[k].asnumpy() for k in "xsv"]
    for ours, theirs in zip(results["gluon_cf"], results["mxnet"]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_eager_body_leaving_a_state_unread_runs_as_mxnet():
    x, s0, s1 = nd.arange(6).reshape((3, 2)), nd.ones((2,)), nd.full((2,), 3.0)
    body = lambda d, s: (d * 2 + s[0], [s[0] + 1, s[0] + 2])  # noqa: E731
    ours, theirs = gluon_cf.foreach(body, x, [s0, s1]), mx.nd.contrib.foreach(body, x, [s0, s1])
    for a, b in zip([ours[0]] + ours[1], [theirs[0]] + theirs[1]):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy())


class _LastRow(gluon.HybridBlock):
    """A Python loop carrying a variable it assigns but never reads (``last``)."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        last = F.zeros_like(x[0])
        total = F.zeros_like(x[0])
        for row in x:
            last = row * 2
            total = total + row
        return last + total


def test_autograph_loop_carrying_an_unread_variable_runs():
    """@autograph's loops carry what a Python loop assigns, read or not: they run, hybridized
    as eagerly (plain Python over the rows the reference)."""
    x = nd.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    expected = x[-1].asnumpy() * 2 + x.asnumpy().sum(axis=0)
    net = _LastRow()
    np.testing.assert_allclose(net(x).asnumpy(), expected)
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), expected)
