"""Parameters a training step does not reach, in recursion, eagerly and hybridized, against plain
eager Python recursion (README: Recursion, "Parameters a step does not reach").

MXNet 1.9.1's ``Trainer.step`` raises a ``UserWarning`` for a parameter whose gradient
``backward`` did not write since the last step (``ignore_stale_grad=True`` skips it). Eagerly
a parameter the step's calls never read is such a one, as in plain Python. Hybridized, every
parameter of the block's graph is written by ``backward`` (MXNet marks every variable of the
recorded graph): gluon_cf writes 0 into those no call read (``add``: adds nothing), which is
their gradient; so SGD steps equal eager ones, and Adam's (whose momentum moves a parameter
with a zero gradient) equal eager ones in which every parameter is read. (MXNet's own
hybridized ``F.contrib.cond`` leaves the untaken branch's buffer as it was, last step's
gradient, and marks it written: Adam then applies that old gradient again.)"""
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf

H = 4
X = np.random.RandomState(0).randn(6, 3).astype("float32")
# nodes 0-2 leaves; 3 = (0, 1) kind 0; 4 = (3, 2) kind 1; 5 = (0, 2) kind 0
LEFT, RIGHT = [-1, -1, -1, 0, 3, 0], [-1, -1, -1, 1, 2, 2]
KIND = [0, 0, 0, 0, 1, 0]
# every parameter; c1 unread; c0 and c1 unread; c1 unread
BATCHES = [[4], [3, 5], [1, 2], [5]]
MODES = [("batched", True), ("batched", False), ("unbatched", True)]


class Trees(gluon.HybridBlock):
    """A leaf ``Dense`` and two combining ones chosen per node by ``kind``."""

    def __init__(self, remat=False):
        super().__init__()
        self.remat = remat
        with self.name_scope():
            self.leaf = gluon.nn.Dense(H, in_units=3, prefix="leaf_")
            self.c0 = gluon.nn.Dense(H, in_units=2 * H, prefix="c0_")
            self.c1 = gluon.nn.Dense(H, in_units=2 * H, prefix="c1_")

    def hybrid_forward(self, F, x, left, right, kind, roots):
        @gluon_cf.recursive(remat=self.remat)
        def node(i):
            def internal():
                h = F.concat(node(F.take(left, i)), node(F.take(right, i)), dim=1)
                return gluon_cf.cond(F.take(kind, i) > 0, lambda: F.tanh(self.c1(h)),
                                     lambda: F.tanh(self.c0(h)))
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.tanh(self.leaf(F.take(x, i))),
                                 internal)
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return hs.sum()


def oracle(net, x, roots, read_all):
    """Plain Python recursion; ``read_all``: plus 0 * every parameter."""
    def node(i):
        if LEFT[i] < 0:
            return mx.nd.tanh(net.leaf(x[i:i + 1]))
        h = mx.nd.concat(node(LEFT[i]), node(RIGHT[i]), dim=1)
        return mx.nd.tanh((net.c1 if KIND[i] else net.c0)(h))
    out = sum(node(r).sum() for r in roots)
    if read_all:
        out = out + sum(0 * p.data().sum() for p in net.collect_params().values())
    return out


def make(remat=False, reqs=None):
    mx.random.seed(0)
    net = Trees(remat)
    net.initialize(mx.init.Uniform(0.5))
    for name, param in net.collect_params().items():
        param.grad_req = (reqs or {}).get(name.split("_", 1)[1], param.grad_req)
    return net


def _short(name):
    return name.split("_", 1)[1]


def _step(net, mode, roots, read_all=False):
    """One recorded forward and backward: plain Python (``mode`` None) or ``net``."""
    x = mx.nd.array(X)
    if mode is None:
        with autograd.record():
            y = oracle(net, x, roots, read_all)
        y.backward()
        return
    gluon_cf.set_executor(mode[0], ahead_of_time=mode[1])
    try:
        with autograd.record():
            y = net(x, *[mx.nd.array(a) for a in (LEFT, RIGHT, KIND, roots)])
        y.backward()
        mx.nd.waitall()
    finally:
        gluon_cf.set_executor("batched")


def train(mode, optimizer, remat=False, read_all=False):
    """Parameters after a Trainer step per batch of BATCHES (stale gradients skipped)."""
    net = make(remat)
    if mode is not None and mode != "eager":
        net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), optimizer, {"learning_rate": 0.1})
    for roots in BATCHES:
        _step(net, None if mode is None else (mode if mode != "eager" else ("batched", True)),
              roots, read_all)
        trainer.step(1, ignore_stale_grad=True)
    return {_short(k): p.data().asnumpy() for k, p in net.collect_params().items()}


def assert_same(got, want, where):
    assert sorted(got) == sorted(want), where
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6, err_msg="%s %s"
                                   % (where, k))


@pytest.mark.parametrize("remat", [False, True])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: "%s-%s" % m)
def test_hybridized_unread_parameters_get_a_zero_gradient(mode, remat):
    """Buffers filled with 7 before each backward: a parameter no call read holds 0 after it,
    written (fresh), the others plain Python's gradient."""
    net = make(remat)
    net.hybridize()
    want = make()
    for roots in BATCHES:
        for p in list(net.collect_params().values()) + list(want.collect_params().values()):
            p.grad()[:] = 7
        _step(net, mode, roots)
        _step(want, None, roots)
        for (k, p), q in zip(net.collect_params().items(), want.collect_params().values()):
            got = p.grad().asnumpy()
            assert p.list_data()[0]._fresh_grad, (roots, k)
            if q.list_data()[0]._fresh_grad:
                np.testing.assert_allclose(got, q.grad().asnumpy(), rtol=1e-5, atol=1e-6)
            else:   # plain Python left it as it was: unread
                assert (got == 0).all(), (roots, k, got)
                assert (q.grad().asnumpy() == 7).all()
            p.list_data()[0]._fresh_grad = q.list_data()[0]._fresh_grad = False   # (as step)


@pytest.mark.parametrize("remat", [False, True])
def test_eager_unread_parameters_are_stale_as_in_plain_python(remat):
    """Eagerly a parameter no call reads is left as plain Python leaves it: not written, and
    Trainer.step refuses it unless told to skip it. (remat=True: every parameter the body may
    read is an input of each call's node, so it is written, 0, as hybridized.)"""
    net = make(remat)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    _step(net, ("batched", True), [1, 2])
    fresh = {_short(k): p.list_data()[0]._fresh_grad for k, p in net.collect_params().items()}
    assert fresh == {"leaf_weight": True, "leaf_bias": True, "c0_weight": remat,
                     "c0_bias": remat, "c1_weight": remat, "c1_bias": remat}
    if not remat:
        with pytest.raises(UserWarning, match="has not been updated by backward"):
            trainer.step(1)


@pytest.mark.parametrize("mode", ["eager"] + MODES, ids=str)
def test_sgd_steps_equal_plain_python(mode):
    want = train(None, "sgd")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(train(mode, "sgd"), want, mode)


@pytest.mark.parametrize("remat", [False, True])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: "%s-%s" % m)
def test_hybridized_adam_steps_equal_plain_python_reading_every_parameter(mode, remat):
    """Adam moves a parameter whose gradient is 0 (its momentum): hybridized, the steps are
    those of plain Python in which every parameter is read (its gradient 0, written), not
    those skipping it; the two differ here (checked), so the comparison can fail."""
    want = train(None, "adam", read_all=True)
    skipped = train(None, "adam")
    assert np.abs(want["c1_weight"] - skipped["c1_weight"]).max() > 1e-3
    assert_same(train(mode, "adam", remat=remat), want, "%s remat=%s" % (mode, remat))


@pytest.mark.parametrize("remat", [False, True])
@pytest.mark.parametrize("mode", ["eager"] + MODES, ids=str)
def test_grad_req_add_and_null_over_backward_passes(mode, remat):
    """``grad_req='add'`` sums over three backward passes reaching different parameters
    (unread ones add nothing), ``'null'`` parameters get no buffer; as plain Python."""
    reqs = {"leaf_weight": "add", "leaf_bias": "add", "c0_weight": "add", "c0_bias": "add",
            "c1_weight": "null", "c1_bias": "null"}
    got, want = make(remat, reqs), make(False, reqs)
    if mode != "eager":
        got.hybridize()
    for roots in ([3, 5], [4], [1, 2]):
        _step(got, mode if mode != "eager" else ("batched", True), roots)
        _step(want, None, roots)
    for (k, p), q in zip(got.collect_params().items(), want.collect_params().values()):
        if reqs[_short(k)] == "null":
            assert p.grad_req == "null" and p._grad is None
        else:
            np.testing.assert_allclose(p.grad().asnumpy(), q.grad().asnumpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=k)
    assert np.abs(got.c0.weight.grad().asnumpy()).max() > 0.01
