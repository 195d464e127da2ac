"""Parameters a training step does not reach, in recursion, eagerly and hybridized, against plain
eager Python recursion (README: Recursion, "Parameters a step does not reach").

MXNet 1.9.1's ``Trainer.step`` raises a ``UserWarning`` for a parameter whose gradient
``backward`` did not write since the last step (``ignore_stale_grad=True`` skips it). Eagerly
a parameter the step's calls never read is such a one, as in plain Python, with remat too
(NOTE [parameters no step reads]); also an eager remat loop's. Hybridized, every
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
    Trainer.step refuses it unless told to skip it; with remat=True too (every parameter the
    body may read is an input of the calls' nodes: it was written 0 and marked fresh, NOTE
    [parameters no step reads]). Buffers filled with 7 before each backward; batches of
    several trees (outermost calls) and of one."""
    net, want = make(remat), make()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    for roots in BATCHES:
        for p in list(net.collect_params().values()) + list(want.collect_params().values()):
            p.grad()[:] = 7
        _step(net, ("batched", True), roots)
        _step(want, None, roots)
        for (k, p), q in zip(net.collect_params().items(), want.collect_params().values()):
            fresh = q.list_data()[0]._fresh_grad
            assert p.list_data()[0]._fresh_grad == fresh, (roots, k)
            np.testing.assert_allclose(p.grad().asnumpy(), q.grad().asnumpy(), rtol=1e-5,
                                       atol=1e-6, err_msg="%s %s" % (roots, k))
        if roots == [1, 2]:
            assert not net.c0.weight.list_data()[0]._fresh_grad
            assert (net.c0.weight.grad().asnumpy() == 7).all()
            with pytest.raises(UserWarning, match="has not been updated by backward"):
                trainer.step(1)
        for p in list(net.collect_params().values()) + list(want.collect_params().values()):
            p.list_data()[0]._fresh_grad = False   # (as step)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_eager_remat_steps_equal_plain_python(optimizer):
    """Adam skips a stale parameter (ignore_stale_grad) and moves a fresh one whose gradient
    is 0: eager remat takes plain Python's steps, which differ from those reading every
    parameter (checked)."""
    want = train(None, optimizer)
    if optimizer == "adam":
        every = train(None, optimizer, read_all=True)
        assert np.abs(want["c1_weight"] - every["c1_weight"]).max() > 1e-3
    assert_same(train("eager", optimizer, remat=True), want, "eager remat")


class RematLoop(gluon.Block):
    """An eager remat foreach whose steps read ``b`` only where the row's sum is over 100."""

    def __init__(self, remat, **kwargs):
        super().__init__(**kwargs)
        self.remat = remat
        with self.name_scope():
            self.a = gluon.nn.Dense(2, in_units=2, prefix="a_")
            self.b = gluon.nn.Dense(2, in_units=2, prefix="b_")

    def forward(self, xs, h, extra):
        def step(x, states):
            layer = self.b if float(x.sum().asscalar()) > 100 else self.a
            h = mx.nd.tanh(layer(states[0]) + x)
            return h, [h]
        outs, _ = gluon_cf.foreach(step, xs, [h], remat=self.remat)
        return outs.sum() + (self.b(h + 1).sum() if extra else 0)


@pytest.mark.parametrize("extra", [False, True], ids=["b_unread", "b_read_after"])
@pytest.mark.parametrize("big", [False, True], ids=["small_rows", "a_big_row"])
def test_eager_remat_loop_leaves_unread_parameters_as_plain_python(big, extra):
    """A parameter no step reads: left as it was and not fresh, as without remat; read by a
    step or after the loop: the same gradient as without remat, fresh."""
    xs = np.random.RandomState(1).rand(3, 1, 2).astype("float32")
    if big:
        xs[1] += 200
    grads = []
    for remat in (False, True):
        mx.random.seed(0)
        net = RematLoop(remat)
        net.initialize(mx.init.Uniform(0.5))
        for p in net.collect_params().values():
            p.grad()[:] = 7
        with autograd.record():
            y = net(mx.nd.array(xs), mx.nd.zeros((1, 2)), extra)
        y.backward()
        grads.append({_short(k): (p.grad().asnumpy(), p.list_data()[0]._fresh_grad)
                      for k, p in net.collect_params().items()})
    plain, remat = grads
    assert plain["b_weight"][1] == (big or extra)
    for k in plain:
        assert remat[k][1] == plain[k][1], k
        np.testing.assert_allclose(remat[k][0], plain[k][0], rtol=1e-5, atol=1e-6, err_msg=k)


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
