"""Hostile review of the caller's wait for its recursion node's first group (NOTE [the caller
waits for the first group] in gluon_cf/node_progress.py) and of the gradient tables zeroed before
the early first group (``planned_backward.GRADS``): each setting in a fresh interpreter with a
time limit, failing on a hang or a signal; outputs and gradients equal eager recursion's."""
import textwrap
import threading

import numpy as np
from mxnet import autograd

import gluon_cf
from gluon_cf import node_progress
from gluon_cf.data.trees import synthetic_treebank
from gluon_cf.models.recursive import TreeLSTM
from conftest import run_python
from test_planned_first_round31tr import _net
from test_schedule import _forest, _run

PRELUDE = """
import os, signal, sys, threading, time
sys.path.insert(0, "tests")
import numpy as np, mxnet as mx
from mxnet import autograd, gluon
import gluon_cf
from gluon_cf import node_progress
from gluon_cf.data.trees import synthetic_treebank
from gluon_cf.models.recursive import TreeLSTM, TreeRNN
from gluon_cf.recursion import planned_backward, schedule
from test_planned_first_round31tr import _net
from test_schedule import _assert_same, _forest, _run
trees = synthetic_treebank(7, shape="sst", seed=3, max_length=8)
vocab, _ = _forest(trees)
forests = [_forest(trees[:k])[1] for k in (4, 1, 7)]
"""


def _ok(code, env=None):
    done = run_python(PRELUDE + textwrap.dedent(code), timeout=100, env=env)
    assert done is not None, "hung"
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    assert done.stdout.strip().endswith("ok"), done.stdout


def test_naive_engine_sizes_in_sequence_and_two_calls_before_one_backward():
    """NaiveEngine (the node runs inside the block's call): every way of zeroing the gradient
    tables on forests of changing sizes through one net, then two recorded calls (outputs read
    at once) before one backward; as eager."""
    _ok("""
        net = _net(TreeLSTM, vocab, 1)
        for way in ("before", "after", "run"):
            planned_backward.GRADS[0] = way
            for inputs in forests:
                _assert_same(_run(net, inputs, "batched"), _run(net, inputs, None))

        def two(hybridized):
            gluon_cf.set_executor("batched")
            net.hybridize(active=hybridized)
            with autograd.record():
                a = net(*forests[0])
                first = a.asnumpy()
                b = net(*forests[2])
                loss = (a * a).sum() + (b * b * 2).sum()
            loss.backward()
            return [first, b.asnumpy()], {
                k: p.grad().asnumpy().copy() for k, p in net.collect_params().items()}
        _assert_same(two(True), two(False))
        print("ok")
        """, env={"MXNET_ENGINE_TYPE": "NaiveEngine"})


def test_sigint_in_the_wait_custom_op_thread_and_a_long_computation_before_remat():
    """SIGINT while a call waits (its node's expansion slowed): KeyboardInterrupt, and the next
    calls right; a user CustomOp's forward calling the block recorded on MXNet's custom-op
    thread; a remat recursion nested in a block whose inputs wait on a long computation."""
    _ok("""
        class Outer(gluon.HybridBlock):
            def __init__(self, inner, **kw):
                super().__init__(**kw)
                with self.name_scope():
                    self.inner = inner

            def hybrid_forward(self, F, tokens, left, right, roots, big):
                x = big
                for _ in range(20):
                    x = F.tanh(F.dot(x, x) * 1e-3)
                zero = F.reshape(F.sum(x) * 0, (1,))
                return self.inner(F.broadcast_add(tokens, zero), left, right, roots)

        big = mx.nd.random.uniform(shape=(300, 300))
        mx.random.seed(1)
        inner = TreeLSTM(len(vocab), embed_size=3, hidden_size=4, num_classes=2, remat=True)
        inner.initialize(mx.init.Xavier())
        net = Outer(inner)
        for inputs in forests[1:]:
            args = list(inputs) + [big]
            _assert_same(_run(net, args, "batched"), _run(net, args, None))

        args = list(forests[0]) + [big]
        eager = _run(net, args, None)
        plain = _net(TreeLSTM, vocab, 1)
        plain_eager = _run(plain, forests[0], None)
        gluon_cf.set_executor("batched")
        plain.hybridize()
        _run(plain, forests[0], "batched")   # (built: the next call runs the CachedOp)
        # (both steps of the wait long: under load the node's forward can start after the
        # default 1 ms START_S, and the call then returned before the SIGINT: CI of session 33)
        node_progress.WAIT_S[0] = node_progress.START_S[0] = 30.0
        expand, slowed = schedule._Schedule.expand, []

        def slow(*a, **k):
            slowed.append(1)
            time.sleep(1.0)
            return expand(*a, **k)
        schedule._Schedule.expand = slow
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        start = time.time()
        try:
            with autograd.record():
                plain(*forests[0])
            raise AssertionError("no KeyboardInterrupt")
        except KeyboardInterrupt:
            assert time.time() - start < 5
        mx.nd.waitall()
        schedule._Schedule.expand = expand
        node_progress.WAIT_S[0], node_progress.START_S[0] = 0.005, 0.001
        assert slowed
        _assert_same(_run(plain, forests[0], "batched"), plain_eager)
        net.hybridize()

        class Op(mx.operator.CustomOp):
            def forward(self, is_train, req, in_data, out_data, aux):
                with autograd.record():
                    o = net(*args)
                self.assign(out_data[0], req[0], in_data[0] + float(o.asnumpy().sum()))

            def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
                self.assign(in_grad[0], req[0], out_grad[0])

        @mx.operator.register("r31tr2_calls_net")
        class Prop(mx.operator.CustomOpProp):
            def __init__(self):
                super().__init__(need_top_grad=True)

            def list_arguments(self):
                return ["x"]

            def infer_shape(self, s):
                return s, [s[0]], []

            def create_operator(self, ctx, shapes, dtypes):
                return Op()
        for _ in range(2):
            y = mx.nd.Custom(mx.nd.zeros((1,)), op_type="r31tr2_calls_net")
            np.testing.assert_allclose(y.asnumpy()[0], eager[0][0].sum(), rtol=1e-5, atol=1e-5)
        print("ok")
        """)


def test_threads_switching_shapes_on_one_block():
    """Three threads calling one block recorded, each going through forests of other sizes
    (the block's lock is released before a call's wait): each output is eager's for its
    forest."""
    trees = synthetic_treebank(7, shape="sst", seed=3, max_length=8)
    vocab, _ = _forest(trees)
    forests = [_forest(trees[:k])[1] for k in (4, 1, 7)]
    net = _net(TreeLSTM, vocab, 1)
    eager = [_run(net, f, None)[0][0] for f in forests]
    previous = gluon_cf.get_executor()
    gluon_cf.set_executor("batched")
    net.hybridize()
    waits, outputs, errors = node_progress.WAITS[0], [], []

    def work(i):
        try:
            for r in range(3):
                k = (i + r) % len(forests)
                with autograd.record():
                    out = net(*forests[k])
                outputs.append((k, out.asnumpy()))
        except Exception as err:   # noqa: BLE001 - reported below
            errors.append(err)
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        gluon_cf.set_executor(previous)
    assert not errors and len(outputs) == 9, errors
    assert node_progress.WAITS[0] - waits == 9
    for k, out in outputs:
        np.testing.assert_allclose(out, eager[k], rtol=1e-5, atol=1e-6)
