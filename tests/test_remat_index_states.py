"""Remat loops whose states are read as indices, and remat's replayed Dropout masks, against
plain eager Python loops (NOTE [loop states needing no gradient] in gluon_cf/remat_record.py).

An eager remat loop marked every float state of a recomputed segment, so a loop counter read
by ``take(xs, i)`` (``xs`` needing no gradient) failed in backward with MXNet's "wrong req",
and an ``Embedding`` of it with "doesn't support calculate data gradient", where
``remat=False`` and plain Python ran."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf

H, T = 3, 5
TABLE = np.random.RandomState(0).randn(T, H).astype("float32")


def _read(op, table, i):
    if op == "take":
        return mx.nd.take(table, i)
    if op == "embedding":
        return mx.nd.Embedding(i, table, input_dim=T, output_dim=H)
    return mx.nd.pick(table, mx.nd.broadcast_to(i, (T,)), axis=1).reshape((1, T))[:, :H]


def _loop(op, kind, remat, w, table, xs):
    """``h = tanh(read(table, i) * w * x + h)``, ``i += 1``: outputs and final h."""
    def step(x, i, h):
        h = mx.nd.tanh(_read(op, table, i) * w * x + h)
        return h, [i + 1, h]
    init = [mx.nd.zeros((1,)), mx.nd.zeros((1, H))]
    if kind == "foreach":
        outs, states = gluon_cf.foreach(lambda x, s: step(x, *s), xs, init, remat=remat)
    else:
        outs, states = gluon_cf.while_loop(
            lambda i, h: i < T, lambda i, h: step(mx.nd.take(xs, i), i, h), init,
            max_iterations=T, remat=remat)
    return outs, states[1]


def _oracle(op, w, table, xs):
    """The same loop as plain Python."""
    h, outs = mx.nd.zeros((1, H)), []
    for t in range(T):
        h = mx.nd.tanh(_read(op, table, mx.nd.array([t])) * w * xs[t] + h)
        outs.append(h)
    return mx.nd.stack(*outs), h


def _grads(fn, table_grad):
    w = mx.nd.array([[0.5, -1.0, 2.0]])
    table, xs = mx.nd.array(TABLE), mx.nd.array(np.linspace(-1, 1, T).reshape(T, 1))
    w.attach_grad()
    if table_grad:
        table.attach_grad()
    with autograd.record():
        outs, h = fn(w, table, xs)
        loss = (outs * mx.nd.arange(outs.size).reshape(outs.shape)).sum() + (h * h).sum()
    loss.backward()
    return [outs.asnumpy(), h.asnumpy(), w.grad.asnumpy()] + (
        [table.grad.asnumpy()] if table_grad else [])


@pytest.mark.parametrize("remat", [True, 2])
@pytest.mark.parametrize("kind", ["foreach", "while_loop"])
@pytest.mark.parametrize("op", ["take", "embedding", "pick"])
def test_a_counter_read_as_indices_trains_with_remat(op, kind, remat):
    want = _grads(lambda *a: _oracle(op, *a), False)
    got = _grads(lambda *a: _loop(op, kind, remat, *a), False)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["foreach", "while_loop"])
def test_a_counter_read_as_take_indices_of_a_table_needing_a_gradient(kind):
    """``take``'s array needs a gradient: MXNet gives the indices 0, remat as plain Python."""
    want = _grads(lambda *a: _oracle("take", *a), True)
    got = _grads(lambda *a: _loop("take", kind, True, *a), True)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


class _Hybrid(gluon.HybridBlock):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        with self.name_scope():
            self.w = self.params.get("w", shape=(1, H), init=mx.init.Constant(0.5))

    def hybrid_forward(self, F, xs, table, w):
        def step(x, i, h):
            h = F.tanh(F.broadcast_mul(F.broadcast_mul(F.take(table, i), w),
                                       F.reshape(x, (1, 1))) + h)
            return h, [i + 1, h]
        init = [F.zeros((1,)), F.zeros((1, H))]
        if self.kind == "foreach":
            outs, states = gluon_cf.foreach(lambda x, s: step(x, *s), xs, init, remat=True)
        else:
            outs, states = gluon_cf.while_loop(
                lambda i, h: i < T, lambda i, h: step(F.take(xs, i), i, h), init,
                max_iterations=T, remat=True)
        return outs, states[1]


@pytest.mark.parametrize("kind", ["foreach", "while_loop"])
def test_hybridized_counter_read_as_indices_with_remat(kind):
    """Hybridized bodies block index gradients in their graphs: the same values."""
    net = _Hybrid(kind)
    net.initialize()
    net.hybridize()
    want = _grads(lambda w, table, xs: _oracle("take", w, table, xs), False)
    w = net.w.data()
    w[:] = mx.nd.array([[0.5, -1.0, 2.0]])
    table, xs = mx.nd.array(TABLE), mx.nd.array(np.linspace(-1, 1, T).reshape(T, 1))
    with autograd.record():
        outs, h = net(xs, table)
        loss = (outs * mx.nd.arange(outs.size).reshape(outs.shape)).sum() + (h * h).sum()
    loss.backward()
    for g, e in zip([outs.asnumpy(), h.asnumpy(), net.w.grad().asnumpy()], want):
        np.testing.assert_allclose(g.reshape(e.shape), e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("remat", [True, 2])
def test_a_counter_read_as_indices_by_step_outputs_only(remat):
    """The counter's indices are read by the step's output alone (its states: the counter)."""
    got = {}
    for r in (False, remat):
        w = mx.nd.array([[0.5, -1.0, 2.0]])
        w.attach_grad()
        with autograd.record():
            outs, _ = gluon_cf.foreach(
                lambda x, s: (mx.nd.take(mx.nd.array(TABLE), s[0]) * w * x, [s[0] + 1]),
                mx.nd.array(np.linspace(-1, 1, T).reshape(T, 1)), [mx.nd.zeros((1,))],
                remat=r)
            loss = (outs * outs).sum()
        loss.backward()
        got[r] = [outs.asnumpy(), w.grad.asnumpy()]
    for g, e in zip(got[remat], got[False]):
        np.testing.assert_allclose(g, e, rtol=1e-5)


def test_a_state_computed_without_parameters_in_step_zero_is_still_marked():
    """``h = h + x`` in step 0 and ``tanh(h + x * w)`` later (Python branching): h needs no
    gradient after step 0 but does later; it is not read as indices, so it stays marked and
    the gradient is plain Python's."""
    xs = np.array([[-1.0], [2.0], [3.0], [1.0]], dtype="float32")

    def body(x, s):
        h = mx.nd.tanh(s[0] + x * w) if x.asscalar() > 0 else s[0] + x
        return h * 2, [h]
    got = {}
    for remat in (False, True, 2):
        w = mx.nd.array([[0.5, -1.0]])
        w.attach_grad()
        with autograd.record():
            outs, st = gluon_cf.foreach(body, mx.nd.array(xs), [mx.nd.zeros((1, 2))],
                                        remat=remat)
            loss = (outs * mx.nd.array([[1, 2]])).sum() + st[0].sum()
        loss.backward()
        got[remat] = w.grad.asnumpy()
    assert np.abs(got[False]).min() > 0.1
    for remat in (True, 2):
        np.testing.assert_allclose(got[remat], got[False], rtol=1e-5)


def test_a_counter_needing_a_gradient_only_after_step_zero_is_refused():
    """A counter read as indices, computed without ``w`` in step 0 and from ``w`` later: not
    marked from step 0, so its later dependence is refused when recomputed, naming the loop
    and the state, not a lost gradient."""
    w = mx.nd.array([[0.5, -1.0]])
    table = mx.nd.array(np.arange(8).reshape(4, 2))
    w.attach_grad()
    table.attach_grad()

    def body(x, s):
        i, h = s
        h = mx.nd.tanh(h + mx.nd.take(table, i) * w)
        return h, [i + 1 if x.asscalar() < 0 else i + 1 + 0 * w.sum(), h]
    with pytest.raises(NotImplementedError,
                       match=r"gluon_cf.foreach at .*test_remat_index_states.py:\d+: with remat, "
                             r"loop state 0 needed no gradient in step 0 and needs one in a "
                             r"later step"):
        with autograd.record():
            outs, _ = gluon_cf.foreach(body, mx.nd.array([[-1.0], [2.0], [3.0]]),
                                       [mx.nd.zeros((1,)), mx.nd.zeros((1, 2))], remat=True)
            loss = outs.sum()
        loss.backward()
        w.grad.asnumpy()


# ---------------------------------------------------------------------------------------------
# Dropout under remat: the gradient is the forward masks' (an oracle built from the masks)


class _DropoutLoop(gluon.HybridBlock):
    """``dx = drop(x)``, ``h = drop(tanh(d(dx) + h))``; both masks show in the outputs."""

    def __init__(self, remat, kind):
        super().__init__()
        self.remat, self.kind = remat, kind
        with self.name_scope():
            self.d = gluon.nn.Dense(H, in_units=H, prefix="d_")
            self.drop = gluon.nn.Dropout(0.5)

    def hybrid_forward(self, F, xs, h0):
        def step(x, h):
            dx = self.drop(x)
            h = self.drop(F.tanh(self.d(dx) + h))
            return [dx, h], [h]
        if self.kind == "foreach":
            outs, _ = gluon_cf.foreach(lambda x, s: step(x, s[0]), xs, [h0], remat=self.remat)
        else:
            def func(i, h):
                outs, states = step(F.reshape(F.take(xs, i), (1, -1)), h)
                return outs, [i + 1] + states
            outs, _ = gluon_cf.while_loop(lambda i, h: i < 7, func, [F.zeros((1,)), h0],
                                          max_iterations=7, remat=self.remat)
        return outs


def _dropout_run(kind, hybridize, remat):
    mx.random.seed(0)
    net = _DropoutLoop(remat, kind)
    net.initialize(mx.init.Uniform(0.5))
    if hybridize:
        net.hybridize()
    xs = mx.nd.array(np.random.RandomState(1).randn(7, 1, H))
    xs.attach_grad()
    mx.random.seed(5)
    with autograd.record():
        dx, hs = net(xs, mx.nd.zeros((1, H)))
        loss = dx.sum() + (hs * mx.nd.arange(hs.size).reshape(hs.shape)).sum()
    loss.backward()
    return net, dx.asnumpy(), hs.asnumpy(), xs.grad.asnumpy(), net.d.weight.grad().asnumpy()


def _dropout_oracle(net, dx, hs):
    """The loop in plain Python with the forward's masks (``dx != 0``, ``hs != 0``) as
    constants."""
    xs = mx.nd.array(np.random.RandomState(1).randn(7, 1, H))
    xs.attach_grad()
    m1 = mx.nd.array((dx != 0).reshape(7, 1, H) * 2.0)
    m2 = mx.nd.array((hs != 0).reshape(7, 1, H) * 2.0)
    h, ds, outs = mx.nd.zeros((1, H)), [], []
    with autograd.record():
        for t in range(7):
            d = xs[t] * m1[t]
            h = mx.nd.tanh(net.d(d) + h) * m2[t]
            ds.append(d)
            outs.append(h)
        d, o = mx.nd.stack(*ds), mx.nd.stack(*outs)
        loss = d.sum() + (o * mx.nd.arange(o.size).reshape(o.shape)).sum()
    net.d.weight.grad()[:] = 0
    loss.backward()
    return xs.grad.asnumpy(), net.d.weight.grad().asnumpy()


@pytest.mark.parametrize("remat", [False, True, 3])
@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("kind", ["foreach", "while_loop"])
def test_dropout_gradient_is_that_of_the_forward_masks(kind, hybridize, remat):
    net, dx, hs, x_grad, w_grad = _dropout_run(kind, hybridize, remat)
    assert 0 < (hs == 0).sum() < hs.size and 0 < (dx == 0).sum() < dx.size   # real masks
    want_x, want_w = _dropout_oracle(net, dx.reshape(7, 1, H), hs.reshape(7, 1, H))
    np.testing.assert_allclose(x_grad, want_x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(w_grad, want_w, rtol=1e-5, atol=1e-4)


class _DropoutTrees(gluon.HybridBlock):
    """Leaves ``drop(x_i)``, internal nodes ``drop(tanh(c([left; right])))``."""

    def __init__(self, remat):
        super().__init__()
        self.remat = remat
        with self.name_scope():
            self.c = gluon.nn.Dense(8, in_units=16, prefix="c_")
            self.drop = gluon.nn.Dropout(0.5)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive(remat=self.remat)
        def node(i):
            def internal():
                h = F.concat(node(F.take(left, i)), node(F.take(right, i)), dim=1)
                return self.drop(F.tanh(self.c(h)))
            return gluon_cf.cond(F.take(left, i) < 0, lambda: self.drop(F.take(x, i)),
                                 internal)
        return gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])[0]


# leaves 0-5; 6 = (0, 1), 7 = (2, 3), 8 = (6, 7), 9 = (4, 5), 10 = (8, 9)
_LEFT, _RIGHT = [-1] * 6 + [0, 2, 6, 4, 8], [-1] * 6 + [1, 3, 7, 5, 9]


def _trees_run(remat, roots, mode):
    mx.random.seed(0)
    net = _DropoutTrees(remat)
    net.initialize(mx.init.Uniform(0.5))
    net.hybridize()
    x = mx.nd.array(np.random.RandomState(0).randn(11, 8))
    x.attach_grad()
    gluon_cf.set_executor(mode[0], ahead_of_time=mode[1])
    try:
        mx.random.seed(3)
        with autograd.record():
            y = net(x, mx.nd.array(_LEFT), mx.nd.array(_RIGHT), mx.nd.array(roots))
        y.backward(mx.nd.ones_like(y))
        return y.asnumpy(), x.grad.asnumpy(), net.c.weight.grad().asnumpy()
    finally:
        gluon_cf.set_executor("batched")


@pytest.mark.parametrize("mode", [("batched", True), ("batched", False), ("unbatched", True)],
                         ids=str)
def test_recursion_dropout_under_remat(mode):
    """Hybridized remat recursion with Dropout in every call: leaves' gradients are the
    forward's masks (2 where a root leaf's output is kept, else 0, exactly), and a tree's
    outputs and gradients are remat=False's with the same seed (each draw replayed)."""
    y, x_grad, _ = _trees_run(True, [0, 3], mode)
    want = np.zeros_like(x_grad)
    want[[0, 3]] = 2 * (y[:, 0] != 0)
    assert 0 < (y == 0).sum() < y.size
    np.testing.assert_array_equal(x_grad, want)
    got, plain = _trees_run(True, [10], mode), _trees_run(False, [10], mode)
    assert 0 < (got[0] == 0).sum() < got[0].size
    for g, e in zip(got, plain):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7)
