"""Review r28bn of round 28bn (NOTE [training refused by the node] in gluon_cf/graph/decoded.py):
the node's forward no longer refuses training on the CPU, its backward does, in MXNet's worker
thread. An executor's backward ran the operators after the node first: a BatchNorm after the
loop had its running statistics and gradients updated, and the refusal came at a later read.

Oracle: the arrays before the call (a refused call changes nothing), and the forward of
the same executor in predict mode (the values a refusal must leave readable).
"""
import numpy as np
import pytest

import mxnet as mx
from mxnet import autograd, gluon, nd

import gluon_cf


def _executor(remat=False):
    with mx.name.NameManager():
        outs, _ = gluon_cf.foreach(lambda d, s: (mx.sym.BatchNorm(d, name="bn") + s, s),
                                   mx.sym.var("x"), mx.sym.var("h"), remat=remat)
        outs = mx.sym.BatchNorm(outs, name="bn2", axis=-1)
    ex = outs.simple_bind(mx.cpu(), grad_req="add", x=(4, 2, 3), h=(2, 3))
    for name, array in sorted(ex.arg_dict.items()) + sorted(ex.aux_dict.items()):
        array[:] = np.random.RandomState(len(name)).uniform(0.5, 1.5, array.shape)
    return ex


def _arrays(ex):
    return {k: v.asnumpy().copy() for d in (ex.aux_dict, ex.grad_dict) for k, v in d.items()}


def test_an_executors_training_backward_is_refused_before_it_runs():
    ex = _executor()
    before = _arrays(ex)
    out = ex.forward(is_train=True)[0]
    out.wait_to_read()   # (training mode not recorded runs: test_bn_train_mode_h28.py)
    with pytest.raises(NotImplementedError, match=r"the body calls BatchNorm at .*review_r28bn"):
        ex.backward(nd.ones_like(out))   # (was: ran, raised at the next read)
    nd.waitall()
    after = _arrays(ex)
    for name, value in before.items():   # (was: bn2's running statistics and bn2_beta's grad)
        np.testing.assert_array_equal(after[name], value, err_msg=name)
    ex.forward(is_train=False)   # a predict-mode forward and backward still run
    ex.backward(nd.ones_like(out))
    nd.waitall()


def test_an_executors_remat_backward_is_refused_in_every_mode():
    """NOTE [auxiliary state under remat]: a remat loop's backward holding a BatchNorm is
    refused whatever the forward's mode."""
    ex = _executor(remat=True)
    before = _arrays(ex)
    out = ex.forward(is_train=False)[0]
    out.wait_to_read()
    with pytest.raises(NotImplementedError, match="deadlocks"):
        ex.backward(nd.ones_like(out))
    nd.waitall()
    after = _arrays(ex)
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)


class _RematNet(gluon.HybridBlock):
    """A remat loop holding a BatchNorm, a Dense after it."""
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.bn = gluon.nn.BatchNorm(in_channels=3, axis=-1)
            self.dense = gluon.nn.Dense(3, in_units=3, flatten=False)

    def hybrid_forward(self, F, x):
        return self.dense(gluon_cf.foreach(lambda r, s: (self.bn(r), s), x, [F.zeros((1,))],
                                           remat=True)[0])


def test_a_remat_loops_call_recorded_in_predict_mode_is_refused_at_the_call():
    """``record(train_mode=False)``: the remat loop's backward is refused in every mode (NOTE
    [auxiliary state under remat]); it was refused in MXNet's worker thread, at a later read,
    after the Dense's gradients (``grad_req="add"``) had been added to."""
    net = _RematNet()
    net.initialize()
    net.hybridize()
    x = nd.array(np.random.RandomState(0).rand(4, 2, 3) - 0.3)
    want = net(x).asnumpy()   # (predict mode, not recorded: runs)
    for p in net.collect_params().values():
        p.grad_req = "add"
    before = {k: p.grad().asnumpy().copy() for k, p in net.collect_params().items()
              if p.grad_req != "null"}
    with pytest.raises(NotImplementedError, match=r"inside a loop with remat.*\n.*review_r28bn"
                       "|review_r28bn.*inside a loop with remat"):
        with autograd.record(train_mode=False):
            net(x)   # (was: ran; backward raised later)
    nd.waitall()
    for name, value in before.items():
        np.testing.assert_array_equal(net.collect_params()[name].grad().asnumpy(), value)
    with autograd.train_mode():   # the next unrecorded calls run
        net(x).wait_to_read()
    np.testing.assert_allclose(net(x).asnumpy(), want, rtol=1e-6)
