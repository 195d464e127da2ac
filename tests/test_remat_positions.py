"""Rematerialisation in the positions issue 25 item 1 names that once failed or were refused:
a remat loop whose body calls a recursive function using Embedding (its float-typed indices were
marked for a gradient), a hybridized gluon_cf block run in a remat body, and a hybridized remat
loop inside a plain gluon_cf node (NOTE [nested custom backward] in tests/test_remat_nesting.py).
The oracle: the same model with remat=False; a count of recomputed steps shows remat ran."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

import gluon_cf
from gluon_cf import remat as R


class _EmbeddingNet(gluon.HybridBlock):
    def __init__(self, remat, remat_calls):
        super().__init__()
        self.remat = remat
        with self.name_scope():
            self.emb = gluon.nn.Embedding(10, 3)
            self.d = gluon.nn.Dense(3, in_units=3)
        emb = self.emb

        @gluon_cf.recursive(remat=remat_calls)
        def f(n, ids):
            return gluon_cf.cond(n < 1, lambda: emb(ids).sum(axis=0, keepdims=True),
                                 lambda: f(n - 1, ids) * 0.5 + emb(ids).sum(axis=0, keepdims=True))
        self.f = f

    def hybrid_forward(self, F, xs, s0):
        def body(x, s):
            h = F.tanh(self.d(s[0]) + self.f(F.ones((1,)), x))
            return h, [h]
        return gluon_cf.foreach(body, xs, [s0], remat=self.remat)


def _embedding_run(remat, hybridize, remat_calls):
    mx.random.seed(1)
    net = _EmbeddingNet(remat, remat_calls)
    net.initialize()
    if hybridize:
        net.hybridize()
    ids = mx.nd.array([[1, 2], [3, 4], [5, 6], [7, 8]])   # float32 indices, no gradient
    s0 = mx.nd.random.normal(shape=(1, 3))
    s0.attach_grad()
    with autograd.record():
        out, st = net(ids, s0)
        loss = (out ** 2).sum() + st[0].sum()
    loss.backward()
    mx.nd.waitall()   # the remat backward runs on MXNet's worker threads
    return [loss, s0.grad] + [p.grad() for p in net.collect_params().values()]


def test_remat_loop_calling_a_recursion_with_embedding():
    """It failed with "Embedding layer doesn't support calculate data gradient": the loop marked
    its float data for a gradient in the recomputation although nothing needed one."""
    for hybridize in (False, True):
        want = _embedding_run(False, hybridize, False)
        for remat in (True, 2):
            before = R.recomputed.steps
            got = _embedding_run(remat, hybridize, not hybridize)
            assert R.recomputed.steps - before == 4, (hybridize, remat)
            for a, b in zip(want, got):
                np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-6,
                                           err_msg=str((hybridize, remat)))


IN_A_PLAIN_NODE = textwrap.dedent("""
    import sys
    import numpy as np
    import mxnet as mx
    from mxnet import autograd, gluon
    import gluon_cf
    from gluon_cf import remat as R

    class Net(gluon.HybridBlock):
        def __init__(self, case, remat):
            super().__init__()
            self.case, self.remat = case, remat
            with self.name_scope():
                self.dense = gluon.nn.Dense(3, in_units=3)
        def hybrid_forward(self, F, x, s):
            remat = self.remat
            if self.case == "cond":        # a remat foreach in a cond branch; its output is the node's
                return gluon_cf.cond(s.sum() > -1e9,
                                     lambda: gluon_cf.foreach(lambda xt, h: (F.tanh(self.dense(h) + xt),) * 2,
                                                              x, F.tanh(s), remat=remat)[0],
                                     lambda: F.zeros_like(x))
            if self.case == "captured":    # the inner body reads a value computed in the outer body
                def outer(xt, h):
                    w = F.tanh(self.dense(h))
                    outs, h2 = gluon_cf.foreach(lambda r, g: (F.tanh(g * w + r),) * 2, xt, h, remat=remat)
                    return outs.sum(axis=0), h2
                return gluon_cf.foreach(outer, x, s)[0]
            if self.case == "two":         # two remat loops in sequence in a plain foreach body
                def outer(xt, h):
                    o1, h1 = gluon_cf.foreach(lambda r, g: (F.tanh(self.dense(g) + r),) * 2, xt, h, remat=remat)
                    o2, h2 = gluon_cf.foreach(lambda r, g: (F.tanh(self.dense(g) * r),) * 2, o1, h1, remat=remat)
                    return o2.sum(axis=0) + o1.sum(axis=0), h2
                return gluon_cf.foreach(outer, x, s)[0]

    def run(case, remat):
        mx.random.seed(3)
        net = Net(case, remat); net.initialize(); net.hybridize()
        shape = (4, 2, 3) if case == "cond" else (3, 2, 2, 3)
        x, s = mx.nd.random.normal(shape=shape), mx.nd.random.normal(shape=(2, 3))
        x.attach_grad(); s.attach_grad()
        with autograd.record():
            loss = (net(x, s) ** 2).sum()
        loss.backward()
        mx.nd.waitall()
        return [loss, x.grad, s.grad] + [p.grad() for p in net.collect_params().values()]

    for case in sys.argv[1:]:   # (the steps recomputed: 4 for cond, 3 x 2 or 3 x 2 x 2)
        want = run(case, False)
        for remat in (True, 2):
            before = R.recomputed.steps
            got = run(case, remat)
            for a, b in zip(want, got):
                np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-6, err_msg=case)
            print(case, remat, "ok", R.recomputed.steps - before, flush=True)
""")


def test_hybridized_remat_loop_inside_a_plain_node():
    """A hybridized remat foreach in a cond branch (its output the node's), two in sequence in a
    plain foreach's body, and one whose body reads a value the plain body computed: refused
    before (their backward, a custom backward inside the node's, hung MXNet's engine); now
    recorded on the node's tape (``remat_record.record_handed``). Gradients equal remat=False's;
    one temp space (the hang's likeliest setting); in a fresh process with a timeout."""
    done = subprocess.run([sys.executable, "-c", IN_A_PLAIN_NODE, "cond", "two", "captured"],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, MXNET_CPU_TEMP_COPY="1"))
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    lines = [line.split() for line in done.stdout.splitlines()]
    assert lines == [["cond", "True", "ok", "4"], ["cond", "2", "ok", "4"],
                     ["two", "True", "ok", "12"], ["two", "2", "ok", "12"],
                     ["captured", "True", "ok", "6"], ["captured", "2", "ok", "6"]], done.stdout
