"""Silently wrong values found while reviewing session 19's changes, each against an oracle."""
import textwrap

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_cf
from conftest import run_python


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


REMAT_BATCHNORM = """
    import mxnet as mx, numpy as np
    from mxnet import nd, autograd, gluon
    import gluon_cf
    class Net(gluon.HybridBlock):
        def __init__(self, frozen):
            super().__init__()
            with self.name_scope():
                self.bn = gluon.nn.BatchNorm(use_global_stats=frozen, in_channels=3)
        def hybrid_forward(self, F, x):
            return gluon_cf.foreach(lambda r, s: (self.bn(r) * s[0], [s[0] + 1]), x,
                                    [F.ones((2, 3))], remat=1)[0]
    for frozen in (True, False):
        for record_train in (True, False):
            for backward_train in (True, False):
                net = Net(frozen)
                net.initialize()
                net.hybridize()
                x = nd.array(np.random.RandomState(0).normal(size=(4, 2, 3)))
                x.attach_grad()
                try:
                    with autograd.record(train_mode=record_train):
                        out = net(x)
                    out.backward(nd.ones_like(out), train_mode=backward_train)
                    x.grad.asnumpy()
                    print("ran", frozen, record_train, backward_train)
                except (NotImplementedError, mx.MXNetError) as err:
                    assert ("inside a loop with remat" in str(err) or
                            "so training is refused" in str(err)), str(err)
                    assert "test_review_round19" in str(err) or "<string>" in str(err), str(err)
                    print("refused", flush=True)
"""


def test_batchnorm_in_a_remat_loop_is_refused_not_a_hang():
    """Was: the backward of a hybridized remat foreach holding a BatchNorm deadlocked MXNet's
    engine (use_global_stats=True in every mode; False once recorded with train_mode=False,
    which session 19 stopped refusing); NOTE [auxiliary state under remat]."""
    proc = run_python(textwrap.dedent(REMAT_BATCHNORM), timeout=240)
    assert proc is not None, "hung"
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split().count("refused") == 8, proc.stdout
