"""A recursion's environment (the recursion node's inputs after the entry's arguments) of
another dtype or width than an earlier batch's: the function's outputs take its dtype and
shape, so what was inferred or laid out for the earlier batch must not be reused (NOTE
[inference of graphs with calls] in gluon_cf/graph/runtime.py). Each batch equals eager."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

import gluon_cf
from gluon_cf.recursion import planned_backward, schedule
from test_schedule import FORESTS, _forest


@pytest.fixture(autouse=True)
def restore():
    previous = gluon_cf.get_executor()
    yield
    gluon_cf.set_executor(previous)
    planned_backward.ENABLED[0] = True


class _EnvNet(gluon.HybridBlock):
    """Leaves read rows of ``emb`` (an input: of any dtype, by ``Embedding`` of ``width``,
    or width, by ``dot``); internal nodes
    combine their children by ``tanh`` (``sign``: by ``where`` on them, whose condition's
    dtype is free, so the value graph infers whatever dtype its child tables have)."""

    def __init__(self, vocab_size, sign=False, width=None, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.sign, self.width = vocab_size, sign, width

    def hybrid_forward(self, F, emb, tokens, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            def embedded():   # of emb's dtype (Embedding), or of any width (dot)
                if self.width:
                    return F.Embedding(F.take(tokens, idx), emb, input_dim=self.vocab_size,
                                       output_dim=self.width)
                return F.dot(F.one_hot(F.take(tokens, idx), self.vocab_size), emb)

            def leaf():
                return F.tanh(embedded()), embedded() * 2

            def internal():
                a, b = node(F.take(left, idx))
                c, d = node(F.take(right, idx))
                if self.sign:
                    e = embedded()
                    return F.where(a - c > 0, e * 0.5, e * 0.25 + 0.1), F.where(b > d, e, -e)
                return F.tanh(a + d), b * c

            return gluon_cf.cond(F.take(left, idx) < 0, leaf, internal)

        (h, c), _ = gluon_cf.foreach(lambda root, _: (list(node(root)), []), roots, [])
        return h + c


def _runs(net, inputs, embeddings, train):
    """Per embedding: (output, gradient of the embedding or None)."""
    got = []
    for emb in embeddings:
        emb = emb.copy()
        if not train:
            got.append((net(emb, *inputs).asnumpy(), None))
            continue
        emb.attach_grad()
        with autograd.record():
            out = net(emb, *inputs)
        out.backward(out)   # the gradient of sum(out ** 2) / 2
        got.append((out.asnumpy(), emb.grad.asnumpy()))
    return got


def _assert_equal_eager(net, inputs, embeddings, train):
    net.hybridize(active=False)
    eager = _runs(net, inputs, embeddings, train)
    gluon_cf.set_executor("batched")
    net.hybridize()
    before = schedule.RUNS["node"]
    batched = _runs(net, inputs, embeddings, train)
    assert schedule.RUNS["node"] == before + len(embeddings), schedule.report()
    for (out, grad), (want, want_grad), emb in zip(batched, eager, embeddings):
        assert out.dtype == want.dtype == emb.dtype
        tol = 2e-3 if emb.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
        if train:
            np.testing.assert_allclose(grad, want_grad, rtol=tol, atol=tol)


@pytest.mark.parametrize("sign", [False, True])
def test_environment_of_another_dtype_than_the_last_batch(sign):
    """Was: after a float32 batch, a float64 one failed with a spurious cond dtype error (a
    branch's inference cached without the environment), or its group wrote float64 rows into
    a float32 table (the layout's key had no environment dtypes)."""
    vocab, inputs = _forest(FORESTS["sst"]())
    emb = np.random.RandomState(0).randn(len(vocab), 3)
    net = _EnvNet(len(vocab), sign=sign, width=3)
    _assert_equal_eager(net, inputs, [nd.array(emb, dtype=d)
                                      for d in ("float32", "float64", "float16", "float32")],
                        train=False)


@pytest.mark.parametrize("planned", [True, False])
def test_environment_of_another_width_than_the_last_batch(planned):
    """Was: a batch whose embedding was wider than the last batch's ran row by row (a
    branch's inferred shapes cached without the environment), and on the recorded path
    without a planned backward its groups unpacked rows by the last widths (a Concat shape
    error)."""
    planned_backward.ENABLED[0] = planned
    vocab, inputs = _forest(FORESTS["sst"]())
    rng = np.random.RandomState(1)
    net = _EnvNet(len(vocab))
    _assert_equal_eager(net, inputs, [nd.array(rng.randn(len(vocab), w)) for w in (3, 5, 3)],
                        train=True)
