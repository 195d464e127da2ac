"""CachedOpPair: a CachedOp per input-shape signature seen twice (LRU), static memory within a
budget, the shared CachedOp for signatures seen once; values and gradients against numpy."""
import mxnet as mx
import numpy as np
import pytest

from gluon_cf import _cachedop
from gluon_cf._cachedop import CachedOpPair


def _symbol():
    x, w = mx.sym.var("x"), mx.sym.var("w")
    h = mx.sym.FullyConnected(x, w, num_hidden=4, no_bias=True)
    return mx.sym.Group([mx.sym.tanh(h), h.sum(axis=1)])


def _oracle(x, w):
    h = x @ w.T
    return [np.tanh(h), h.sum(axis=1)]


def _call_rows(pair, rows_list, w):
    for rows in rows_list:
        x = np.random.RandomState(rows).uniform(-1, 1, (rows, 3)).astype(np.float32)
        got = pair(mx.nd.array(x), mx.nd.array(w))
        for g, want in zip(got, _oracle(x, w)):
            np.testing.assert_allclose(g.asnumpy(), want, rtol=1e-5, atol=1e-6)


@pytest.fixture
def budget(monkeypatch):
    """Run with a fresh process-wide static budget of the given size."""
    def set_budget(nbytes, kept=_cachedop.SHAPES_KEPT):
        monkeypatch.setattr(_cachedop, "STATIC_BYTES", nbytes)
        monkeypatch.setattr(_cachedop, "SHAPES_KEPT", kept)
        monkeypatch.setitem(_cachedop._static, "bytes", 0)
    return set_budget


def test_a_signature_seen_twice_gets_its_own_op(budget):
    budget(1 << 20)
    w = np.random.RandomState(0).uniform(-1, 1, (4, 3)).astype(np.float32)
    pair = CachedOpPair(_symbol())
    _call_rows(pair, [1, 5, 2, 7], w)     # all seen once: the shared op ran them
    assert not pair.ops[0]
    _call_rows(pair, [5, 1, 5, 1, 2], w)
    assert list(k[0][0] for k in pair.ops[0]) == [5, 1, 2]   # least recently used first
    # Static memory was counted for every own op: internals of (rows, 3) @ (4, 3)...
    assert all(size > 0 for _, size in pair.ops[0].values())
    assert _cachedop._static["bytes"] == sum(size for _, size in pair.ops[0].values())


def test_static_budget_is_respected_and_released(budget):
    w = np.random.RandomState(1).uniform(-1, 1, (4, 3)).astype(np.float32)
    budget(0)
    pair = CachedOpPair(_symbol())
    _call_rows(pair, [3, 4, 3, 4], w)
    assert [size for _, size in pair.ops[0].values()] == [0, 0]   # no room: dynamic ops

    budget(1 << 20, kept=2)
    pair = CachedOpPair(_symbol())
    _call_rows(pair, [3, 4, 6, 3, 4, 3, 6], w)    # 4 is the least recently used when 6 comes
    assert list(k[0][0] for k in pair.ops[0]) == [3, 6]
    assert _cachedop._static["bytes"] == sum(size for _, size in pair.ops[0].values())


def test_recorded_calls_use_their_own_ops_and_give_gradients(budget):
    budget(1 << 20)
    w = np.random.RandomState(2).uniform(-1, 1, (4, 3)).astype(np.float32)
    x = np.random.RandomState(3).uniform(-1, 1, (2, 3)).astype(np.float32)
    h = x @ w.T
    want = ((1 - np.tanh(h) ** 2) + 1).T @ x
    pair = CachedOpPair(_symbol())
    for _ in range(2):                    # the shared op, then the signature's own
        xs, ws = mx.nd.array(x), mx.nd.array(w)
        ws.attach_grad()
        with mx.autograd.record():
            out = pair(xs, ws)
            loss = out[0].sum() + out[1].sum()
        loss.backward()
        np.testing.assert_allclose(ws.grad.asnumpy(), want, rtol=1e-5, atol=1e-6)
    assert len(pair.ops[1]) == 1 and len(pair.ops[0]) == 0
    assert [size for _, size in pair.ops[1].values()] == [0]   # never static when recorded
