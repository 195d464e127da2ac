"""Rematerialisation in the positions issue 25 item 1 names that once failed or were refused:
a remat loop whose body calls a recursive function using Embedding (its float-typed indices were
marked for a gradient), a hybridized gluon_cf block run in a remat body, and a hybridized remat
loop inside a plain gluon_cf node (NOTE [nested custom backward] in tests/test_remat_nesting.py).
The oracle: the same model with remat=False; a count of recomputed steps shows remat ran."""
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
