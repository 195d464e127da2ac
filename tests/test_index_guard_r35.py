"""A gradient asked of an Embedding's indices in a block that runs partitioned (a loop
collecting a list of run-time length, a boolean_mask before a loop) came back as zeros,
silently, where MXNet refuses it eagerly and gluon_cf refused it for the same block run as
one Custom operator (hostile review of session 35; NOTE [index gradients of a partitioned
block] in gluon_cf/index_guard.py). Now the same IndexGradientError; an index computed by
ops MXNet asks no gradient through (argmax, round) still trains. Oracle: the block eager
(MXNet's own refusal, MXNet's own gradients)."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf
from gluon_cf.graph.index_gradients import IndexGradientError


class _Decoder(gluon.HybridBlock):
    """A greedy decoder whose loop collects its tokens (a list of run-time length: the block
    runs partitioned)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.emb = gluon.nn.Embedding(6, 4)
            self.proj = gluon.nn.Dense(6, in_units=4, flatten=False)

    @gluon_cf.autograph
    def hybrid_forward(self, F, tok, h):
        score = F.zeros((2,))
        steps = []
        while True:
            gluon_cf.max_iterations(5)
            h = F.tanh(h + self.emb(tok))
            logits = F.log_softmax(self.proj(h), axis=-1)
            tok = F.argmax(logits, axis=-1)
            score = score + F.max(logits, axis=-1)
            steps.append(tok)
            if F.sum(tok == 0) == 2:
                break
        return score


class _MaskedEmbedding(gluon.HybridBlock):
    """An Embedding in the block's own graph, then a boolean_mask and a loop."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.emb = gluon.nn.Embedding(6, 4)

    def hybrid_forward(self, F, tok, mask):
        kept = F.contrib.boolean_mask(self.emb(tok), mask)
        out, _ = gluon_cf.foreach(lambda r, s: (r * 2, s), kept, [])
        return F.sum(out)


def _decoder_inputs():
    return mx.nd.array([1, 2]), mx.nd.array(np.random.RandomState(0).randn(2, 4))


def _masked_inputs():
    return mx.nd.array([1, 2, 3]), mx.nd.array([1, 0, 1])


def _fresh(cls, hybridize):
    mx.random.seed(0)
    net = cls()
    net.initialize(mx.init.Uniform(0.5))
    if hybridize:
        net.hybridize()
    return net


def _run(net, inputs, wanted):
    """Forward and backward recorded, the gradients of the inputs in ``wanted`` read."""
    for k in wanted:
        inputs[k].attach_grad()
    with autograd.record():
        y = net(*inputs).sum()
    y.backward()
    return [inputs[k].grad.asnumpy() for k in wanted]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("cls, inputs", [(_Decoder, _decoder_inputs),
                                         (_MaskedEmbedding, _masked_inputs)])
def test_a_gradient_asked_of_indices_is_refused_as_eagerly(cls, inputs):
    with pytest.raises(mx.MXNetError, match="Embedding layer doesn't support"):
        _run(_fresh(cls, False), list(inputs()), [0])
    net = _fresh(cls, True)
    for _ in range(2):   # (the same on every call; the block stays usable)
        with pytest.raises(IndexGradientError, match="input 'tok'.* reaches the indices of "
                                                     "Embedding"):
            _run(net, list(inputs()), [0])
    if cls is _Decoder:  # no gradient of the indices asked: trains, as eagerly
        want = _run(_fresh(cls, False), list(inputs()), [1])
        got = _run(net, list(inputs()), [1])
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


class _RoundedIndices(gluon.HybridBlock):
    """Indices computed by round inside the block from an input needing a gradient: MXNet
    asks no gradient through round (NOTE [gradients asked of indices])."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.emb = gluon.nn.Embedding(6, 4)

    def hybrid_forward(self, F, x, mask):
        scaled = F.broadcast_mul(self.emb(F.round(x)), F.expand_dims(x, 1))
        kept = F.contrib.boolean_mask(scaled, mask)
        out, _ = gluon_cf.foreach(lambda r, s: (r * 2, s), kept, [])
        return F.sum(out)


def test_indices_through_round_train_as_eagerly():
    x, mask = mx.nd.array([1.2, 2.4, 3.1]), mx.nd.array([1, 0, 1])
    want = _run(_fresh(_RoundedIndices, False), [x.copy(), mask], [0])
    got = _run(_fresh(_RoundedIndices, True), [x.copy(), mask], [0])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    assert np.abs(want[0]).sum() > 0


class _ArgmaxTokens(gluon.HybridBlock):
    """Tokens computed inside a remat loop's body by argmax of a recorded value (MXNet asks no
    gradient through argmax), then the partitioned block."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.inner = _MaskedEmbedding()
            self.scale = self.params.get("scale", shape=(1,), init=mx.init.One())

    def forward(self, xs, mask):
        def body(x, states):
            toks = mx.nd.argmax(x * self.scale.data(), axis=-1)
            return self.inner(toks, mask) * self.scale.data(), states
        out, _ = gluon_cf.foreach(body, xs, [], remat=True)
        return out.sum()


@pytest.mark.parametrize("hybridize", [False, True])
def test_a_remat_loop_calling_the_block_refuses_or_trains_as_eagerly(hybridize):
    """A remat loop's body calling the partitioned block: its recomputation runs the block
    partitioned in the remat node's backward, where the guard is MXNet's own Embedding
    (NOTE [index gradients of a partitioned block]): asked the tokens' gradient it refuses
    with MXNet's message, as eagerly (it trained to zeros); argmax-made tokens train."""
    inner = _fresh(_MaskedEmbedding, hybridize)
    mask = mx.nd.array([1, 0, 1])
    toks = mx.nd.array([[1, 2, 3], [2, 3, 4]])
    toks.attach_grad()
    with pytest.raises(mx.MXNetError, match="Embedding layer doesn't support"):
        with autograd.record():
            out, _ = gluon_cf.foreach(lambda t, s: (inner(t, mask), s), toks, [], remat=True)
            y = out.sum()
        y.backward()
        toks.grad.asnumpy()
    grads = []
    for hybrid in (False, hybridize):
        net = _fresh(_ArgmaxTokens, False)
        if hybrid:
            net.inner.hybridize()
        xs = mx.nd.array(np.random.RandomState(1).rand(2, 3, 5))
        with autograd.record():
            y = net(xs, mask)
        y.backward()
        grads.append(net.scale.grad().asnumpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5)
    assert np.abs(grads[0]).sum() > 0
