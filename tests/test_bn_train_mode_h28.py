"""Round 28bn: a BatchNorm (or Dropout) in a hybridized gluon_cf body called in training mode
without ``autograd.record()`` (NOTE [training refused by the node]). gluon_cf refused it, as it
refuses recorded training; MXNet's own hybridized ``F.contrib.foreach`` / ``cond`` /
``while_loop`` run it as eager code does: batch statistics, Dropout drawing, and the running
statistics unchanged (MXNet 1.9.1 updates them on the CPU in backward, which does not come).

Oracles: plain eager code with the same parameters, and MXNet's own control flow hybridized.
Recorded training stays refused at the block's call (tests/test_review_r28b.py).
"""
import numpy as np
import pytest

import mxnet as mx
from mxnet import autograd, gluon, nd

import gluon_cf

RNG = np.random.RandomState(28)
X3 = nd.array(RNG.rand(4, 2, 3) - 0.3)
X2 = nd.array(RNG.rand(5, 3) - 0.3)


def _foreach(cf, F, net, x, **kw):
    return cf.foreach(lambda r, s: (net.bn(r), s), x, [F.zeros((1,))], **kw)[0]


def _cond(cf, F, net, x):
    return cf.cond(x.sum() > 0, lambda: net.bn(x), lambda: x * 2)


def _while(cf, F, net, x):
    return cf.while_loop(lambda i, s: i < 2, lambda i, s: (net.bn(s), (i + 1, s * 2)),
                         [F.zeros((1,)), x], max_iterations=2)[0]


def _remat_foreach(cf, F, net, x):
    return _foreach(cf, F, net, x, remat=True)


def _masked_foreach(cf, F, net, x):
    """A boolean_mask first: the block runs partitioned (NOTE [run-time shapes])."""
    return _foreach(cf, F, net, F.contrib.boolean_mask(x, x.sum(axis=(1, 2)) > 0))


def _recursion(cf, F, net, x, remat=False):
    @gluon_cf.recursive(remat=remat)
    def down(v, k):
        return gluon_cf.cond(k < 1, lambda: net.bn(v), lambda: down(v * 2, k - 1))
    return down(x, F.ones((1,)))


def _remat_recursion(cf, F, net, x):
    return _recursion(cf, F, net, x, remat=True)


class Net(gluon.HybridBlock):
    def __init__(self, body, cf=gluon_cf, dropout=0.0):
        super().__init__()
        self.body, self.cf = body, cf
        with self.name_scope():
            self.bn = gluon.nn.BatchNorm(in_channels=3, axis=-1)
            self.drop = gluon.nn.Dropout(dropout)

    def hybrid_forward(self, F, x):
        return self.body(self.cf if self.cf is gluon_cf else F.contrib, F, self, x)


def _make(body, hybridize, like=None, **kw):
    net = Net(body, **kw)
    net.initialize()
    if like is None:   # running statistics that differ from any batch's
        net.bn.running_mean.set_data(nd.array([0.5, -0.5, 0.25]))
        net.bn.running_var.set_data(nd.array([2.0, 0.5, 3.0]))
    else:
        for mine, theirs in zip(net.collect_params().values(), like.collect_params().values()):
            mine.set_data(theirs.data())
    if hybridize:
        net.hybridize()
    return net


def _train(net, x):
    with autograd.train_mode():
        out = net(x)
    return [out.asnumpy(), net.bn.running_mean.data().asnumpy(),
            net.bn.running_var.data().asnumpy()]


BODIES = [_foreach, _cond, _while, _remat_foreach, _masked_foreach, _recursion,
          _remat_recursion]


@pytest.mark.parametrize("body", BODIES, ids=lambda b: b.__name__[1:])
def test_training_mode_not_recorded_runs_as_eager_code(body):
    x = X2 if body in (_cond, _while, _recursion, _remat_recursion) else X3
    eager = _make(body, hybridize=False)
    net = _make(body, hybridize=True, like=eager)
    before = [p.data().asnumpy() for p in eager.collect_params().values()]
    want = _train(eager, x)
    got = _train(net, x)   # (was: NotImplementedError, "the body calls BatchNorm")
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[1], before[2])   # running statistics: unchanged
    np.testing.assert_array_equal(got[2], before[3])
    with autograd.predict_mode():   # (training mode was used: batch statistics)
        assert not np.allclose(net(x).asnumpy(), got[0], atol=1e-3)
    with pytest.raises(NotImplementedError, match=r"BatchNorm at .*test_bn_train_mode_h28"):
        with autograd.record():   # recorded training: refused still, before anything ran
            net(x)
    np.testing.assert_array_equal(net.bn.running_mean.data().asnumpy(), before[2])


@pytest.mark.parametrize("body", [_foreach, _cond, _while], ids=lambda b: b.__name__[1:])
def test_training_mode_not_recorded_as_mxnets_own_control_flow(body):
    x = X2 if body in (_cond, _while) else X3
    theirs = _make(body, hybridize=True, cf=None)
    mine = _make(body, hybridize=True, like=theirs)
    for g, w in zip(_train(mine, x), _train(theirs, x)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_dropout_in_a_body_drops_in_training_mode_not_recorded():
    """Dropout(0.5) in the body: about half the inputs dropped, the rest doubled, as eager
    Dropout does (the draws themselves differ from eager code's)."""
    def body(cf, F, net, x):
        return cf.foreach(lambda r, s: (net.drop(r) + net.bn(r) * 0, s), x, [F.zeros((1,))])[0]
    net = _make(body, hybridize=True, dropout=0.5)
    x = nd.ones((50, 4, 3))
    with autograd.train_mode():
        out = net(x).asnumpy()
    assert set(np.unique(out)) <= {0.0, 2.0} and 0.3 < (out == 0).mean() < 0.7, out


def test_training_on_another_device_is_refused_recorded_or_not():
    """cuDNN updates the running statistics in the forward, and the body runs on copies of
    its inputs: refused off the CPU (checked on the node: this machine has no GPU)."""
    net = _make(_foreach, hybridize=True)
    with autograd.predict_mode():
        net(X3)
    node = net._gluon_cf_plan.refusing_training[0]
    node.refuse_training_call(False, "cpu")
    for recording, device in [(False, "gpu"), (True, "cpu")]:
        with pytest.raises(NotImplementedError, match="the body calls BatchNorm"):
            node.refuse_training_call(recording, device)


def test_an_executors_training_forward_runs_as_mxnets():
    """``forward(is_train=True)`` of a bound Symbol, no backward (inside ``train_mode()``,
    which MXNet's own bodies follow: NOTE [where MXNet 1.9.1's symbolic control flow is
    wrong] in tests/test_mxnet_semantics24.py): the values and auxiliary states of MXNet's."""
    results = []
    for ops in (mx.sym.contrib, gluon_cf):
        with mx.name.NameManager():
            outs, _ = ops.foreach(lambda d, s: (mx.sym.BatchNorm(d, name="bn") + s, s),
                                  mx.sym.var("x"), mx.sym.var("h"))
        ex = outs.simple_bind(mx.cpu(), grad_req="null", x=(4, 2, 3), h=(2, 3))
        for name, array in sorted(ex.arg_dict.items()) + sorted(ex.aux_dict.items()):
            array[:] = np.random.RandomState(len(name)).uniform(0.5, 1.5, array.shape)
        with autograd.train_mode():
            out = ex.forward(is_train=True)[0].asnumpy()
        results.append([out] + [a.asnumpy() for _, a in sorted(ex.aux_dict.items())])
        assert not np.allclose(ex.forward(is_train=False)[0].asnumpy(), out, atol=1e-3)
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
