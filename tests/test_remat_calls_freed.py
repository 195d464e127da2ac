"""Eager remat recursion frees each training step's calls (NOTE [tojson keeps custom nodes
alive] in ``remat_record.py``): MXNet 1.9.1's ``tojson()`` of a recorded graph holding a
``_CustomFunction`` node kept the node, its backward and the remat call it holds (saved
results, arguments) for good, so every step kept all its calls and a deleted block stayed
alive (found by a hostile review: 7 calls and ~4 MB a step for a 6-deep recursion)."""
import gc
import json
import time
import weakref

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_cf
from gluon_cf import remat_record

from conftest import run_python


class Chain(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(4, in_units=4)

    def forward(self, x, n):
        @gluon_cf.recursive(remat=True)
        def f(x, n):
            if float(n.asscalar()) == 0:
                return x
            return mx.nd.tanh(self.dense(f(x, n - 1)))
        return f(x, n)


def _step(net):
    x = mx.nd.ones((2, 4))
    with autograd.record():
        y = net(x, mx.nd.array([4])).sum()
    y.backward()
    mx.nd.waitall()
    for _ in range(3):    # (a call frees the calls below it as it goes: one level a pass)
        gc.collect()


def test_training_steps_free_their_calls_and_a_deleted_block():
    """In a fresh process: its gc.collect() passes over a test worker's whole heap took ~49 s
    of a CI run."""
    done = run_python("import sys; sys.path.insert(0, 'tests'); import test_remat_calls_freed "
                      "as t; t.steps_free_their_calls_and_a_deleted_block(); print('freed')",
                      timeout=120)
    assert done is not None, "timed out"
    assert done.returncode == 0 and done.stdout.split()[-1:] == ["freed"], \
        (done.returncode, done.stdout[-2000:], done.stderr[-3000:])


def _settled(done, seconds=20.0):
    """``done()`` once MXNet freed what it let go: its threaded engine wakes ``waitall()``
    before it deletes the finished operator (``ThreadedEngine::OnComplete`` in 1.9.1), and that
    operator's closure holds the recorded node whose delete callback pops ``_alive``, so the
    last step's node may leave a moment after ``waitall()`` returned (CI saw one left)."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        mx.nd.waitall()
        gc.collect()
        time.sleep(0.01)
    return done()


def steps_free_their_calls_and_a_deleted_block():
    net = Chain()
    net.initialize()
    for _ in range(2):
        _step(net)
    _settled(lambda: False, seconds=0.2)
    before = len(remat_record._alive)
    for _ in range(4):
        _step(net)
    assert _settled(lambda: len(remat_record._alive) <= before), \
        (len(remat_record._alive), before)   # (was 5 more a step)
    block = weakref.ref(net)
    del net
    gc.collect()
    other = Chain()        # (a new block's call: the old one's gate leaves the cache)
    other.initialize()
    _step(other)
    assert _settled(lambda: block() is None)


def test_recorded_graph_reads_what_tojson_gives():
    """Nodes, their inputs and the heads, for several heads, a split's second output, a
    variable as head and a record_node's node."""
    a = mx.nd.ones((2,))
    b = mx.nd.ones((2,))
    a.attach_grad()
    b.attach_grad()
    with autograd.record():
        c = a * b
        d, e = mx.nd.split(mx.nd.concat(c, a, dim=0), num_outputs=2, axis=0)
        o = remat_record.fresh([c * 1])
        remat_record.record_node([c], o, lambda g: [g[0]])
        h = d + c * e + mx.nd.take(o[0], mx.nd.array([1, 0])) + 1
    for arrays in ([h], [h, e], [e], [o[0]], [c, h]):
        want = json.loads(mx.sym.Group([autograd.get_symbol(x) for x in arrays]).tojson())
        got = remat_record.recorded_graph(*arrays)
        assert _by_name(got) == _by_name(want)
    np.testing.assert_allclose(h.asnumpy(), [4, 4])


def _by_name(graph):
    names = [n["name"] for n in graph["nodes"]]
    return ({n["name"]: (n["op"], [(names[e[0]], e[1]) for e in n["inputs"]])
             for n in graph["nodes"]}, [(names[e[0]], e[1]) for e in graph["heads"]])


TRAINER_RIGHT_AFTER_BACKWARD = r'''
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
import gluon_cf


def train(remat):
    mx.random.seed(0)
    net = gluon.nn.Dense(4, in_units=4)
    net.initialize(mx.init.Uniform(0.5))
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.1})

    @gluon_cf.recursive(remat=remat)
    def f(x, n):
        if float(n.asscalar()) == 0:
            return x
        return mx.nd.tanh(net(f(x, n - 1)))
    for step in range(4):
        with autograd.record():
            y = f(mx.nd.ones((2, 4)) * (step + 1), mx.nd.array([3])).sum()
        y.backward() if step % 2 else autograd.backward([y])
        trainer.step(1)          # (no waitall between)
    return net.weight.data().asnumpy()


def train_loop(remat):
    mx.random.seed(0)
    net = gluon.nn.Dense(4, in_units=4)
    net.initialize(mx.init.Uniform(0.5))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})

    def step(x, states):
        h = mx.nd.tanh(net(states[0]) + x)
        return h, [h]
    for k in range(4):
        with autograd.record():
            outs, _ = gluon_cf.foreach(step, mx.nd.ones((3, 2, 4)) * (k + 1),
                                       [mx.nd.zeros((2, 4))], remat=remat)
            y = outs.sum()
        y.backward()
        trainer.step(1)
    return net.weight.data().asnumpy()


np.testing.assert_allclose(train(True), train(False), rtol=1e-5, atol=1e-6)
np.testing.assert_allclose(train_loop(True), train_loop(False), rtol=1e-5, atol=1e-6)
'''


def test_a_trainer_step_right_after_backward_does_not_hang():
    """NOTE [a remat backward reads what it recomputes from]: recursion and a loop; the
    recomputation, run by the engine after ``backward()`` returned, read the parameters behind the update waiting for
    its gradient: the second step hung (a subprocess with a timeout: a hang fails)."""
    done = run_python(TRAINER_RIGHT_AFTER_BACKWARD, timeout=120)
    assert done is not None, "hung"
    assert done.returncode == 0, done.stderr[-2000:]
