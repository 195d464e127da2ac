"""Review of the gates of eager remat recursive calls (NOTE [closure gradients per backward
pass] in gluon_cf/remat_gates.py), against the same code with ``remat=False`` (plain MXNet
autograd: the oracle).

* ``autograd.grad`` asked for an input only left the gates its calls' backward read in the
  pending set: the next backward pass of the process (plain code too) added their stale
  gradients to the parameters'.
* The passes' bookkeeping was global: a plain ``backward`` in another thread cleared the
  fresh flags of this thread's parameters while it ran (a ``Trainer.step`` then refused them
  as stale, or skipped them with ``ignore_stale_grad=True``), and took the gates this
  thread's calls had read.
* MXNet's ``autograd.backward`` bound before gluon_cf was imported left the parameters'
  gradients unwritten, silently; now refused."""
import threading

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf
from gluon_cf import remat_gates, remat_record


class Net(gluon.Block):
    def __init__(self, remat, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.leaf = gluon.nn.Dense(3, in_units=3, prefix="leaf_")
            self.odd = gluon.nn.Dense(3, in_units=3, prefix="odd_")

        @gluon_cf.recursive(remat=remat)
        def f(x, n):
            if int(n.asscalar()) == 0:
                return mx.nd.tanh(self.leaf(x))
            return mx.nd.tanh(self.odd(f(x, n - 1)))
        self.f = f

    def forward(self, x, depth):
        return self.f(x, mx.nd.array([depth]))


def net_of(remat, seed=0):
    mx.random.seed(seed)
    net = Net(remat, prefix="n_")
    net.initialize(mx.init.Uniform(0.5))
    return net


class ThenTwice(autograd.Function):
    """2 x, whose backward first runs ``then()`` (a backward inside a Function's backward:
    tests/test_remat_hangs23.py, tests/test_review_round23.py)."""

    def __init__(self, then):
        super().__init__()
        self.then = then

    def forward(self, x):
        return x * 2

    def backward(self, dy):
        self.then()
        return dy * 2


def inputs(seed):
    return mx.nd.array(np.random.RandomState(seed).uniform(-1, 1, (2, 3)))


def state(net):
    return [(p.data().asnumpy(), p.grad().asnumpy(), p.list_data()[0]._fresh_grad)
            for _, p in sorted(net.collect_params().items())]


def assert_same(got, want):
    for a, b in zip(got, want):
        for (da, ga, fa), (db, gb, fb) in zip(a, b):
            assert fa == fb
            np.testing.assert_allclose(ga, gb, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(da, db, rtol=1e-5, atol=1e-6)


def test_autograd_grad_of_an_input_leaves_nothing_for_the_next_pass():
    """``autograd.grad(y, [x])`` (the calls read ``odd``), then a plain pass reading ``odd``:
    its gradient is the plain pass's, not that plus the gates' gradients of an earlier
    ``y.backward(retain_graph=True)`` (2.8 off before)."""
    got = {}
    for remat in (True, False):
        net = net_of(remat)
        with autograd.record():
            y = net(inputs(1), 2).sum()
        y.backward(retain_graph=True)
        x = inputs(2)
        x.attach_grad()
        with autograd.record():
            y2 = net(x, 2).sum()
        gx = autograd.grad(y2, [x])[0].asnumpy()
        with autograd.record():
            z = net.odd(inputs(3)).sum()
        z.backward()
        got[remat] = (gx, state(net))
        assert not remat_gates._passed
    np.testing.assert_allclose(got[True][0], got[False][0], rtol=1e-5, atol=1e-6)
    assert_same([got[True][1]], [got[False][1]])


class Wait(autograd.Function):
    """Identity whose backward runs ``then`` in a thread of its own and waits for it."""

    def __init__(self, then):
        super().__init__()
        self.then = then

    def forward(self, x):
        return x.copy()

    def backward(self, dy):
        thread = threading.Thread(target=self.then)
        thread.start()
        thread.join(60)
        return dy.copy()


def test_a_plain_pass_in_another_thread_leaves_this_threads_parameters():
    """This thread's step runs while another thread's plain pass is running, a record of this
    thread's remat calls alive: before, that pass had cleared the fresh flags of this
    thread's parameters (the step refused them as stale and moved nothing)."""
    got = {}
    for remat in (True, False):
        net, other = net_of(remat), net_of(False, 1)
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        errors = []

        def step():
            try:
                trainer.step(1)
            except UserWarning as err:
                errors.append(err)

        def other_thread():
            x = inputs(5)
            x.attach_grad()
            with autograd.record():
                z = other.odd(Wait(step)(x)).sum()
            z.backward()
        with autograd.record():
            y1, y2 = net(inputs(1), 2).sum(), net(inputs(2), 1).sum()
        y1.backward()
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join(120)
        assert not errors
        got[remat] = [state(net), state(other)]
        del y2
    assert_same(got[True], got[False])


def test_mxnets_backward_bound_before_gluon_cf_is_refused():
    """``from mxnet.autograd import backward`` before ``import gluon_cf`` (MXNet's own
    function, which gluon_cf does not see): refused naming the function and line, where the
    parameters' gradients were left unwritten; the next passes are plain MXNet's."""
    net = net_of(True)
    with autograd.record():
        y = net(inputs(1), 2).sum()
    with pytest.raises(RuntimeError, match=r"gluon_cf.recursive at .*test_remat_gates_review"
                       r".py:\d+: remat=True for 'f' is differentiated by a backward gluon_cf "
                       r"does not see \(MXNet's autograd.backward"):
        remat_record.unsynchronised_backward([y])
        mx.nd.waitall()
    got = {}
    for remat in (True, False):
        net = net_of(remat)
        with autograd.record():
            y = net(inputs(1), 2).sum()
        y.backward()
        got[remat] = state(net)
    assert_same([got[True]], [got[False]])
