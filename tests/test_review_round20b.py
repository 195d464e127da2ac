"""Review round 20b: remat loops whose index-read states or data are recorded from arrays
needing a gradient only through operators passing none back (NOTE [loop states needing no
gradient] in gluon_cf/remat_record.py), against plain eager Python loops.

A greedy decoder's first token, ``argmax`` of logits computed from a parameter, fed to an
``Embedding`` as a loop state (or a token sequence computed so, as a loop's data) was marked in
the remat backward, which failed with MXNet's "Embedding layer doesn't support calculate data
gradient", where ``remat=False`` and plain Python ran; a counter started as ``zeros_like`` of a
parameter-derived array read by ``take`` failed with "wrong req"."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd

import gluon_cf

H, T, V = 3, 5, 8
TABLE = np.random.RandomState(0).randn(V, H).astype("float32")
XS = np.linspace(-1, 1, T).reshape(T, 1).astype("float32")


def _decoder(first, remat):
    """``tok`` fed back through an Embedding; its first value computed from ``w`` by ``first``;
    ``remat=None``: a plain Python loop. Returns the loss, the outputs and ``w``'s gradient."""
    w, table, xs = mx.nd.array([[0.5, -1.0, 2.0]]), mx.nd.array(TABLE), mx.nd.array(XS)
    w.attach_grad()

    def step(x, s):
        tok, h = s
        h = mx.nd.tanh(mx.nd.Embedding(tok, table, input_dim=V, output_dim=H) * w * x + h)
        return h, [mx.nd.argmax(mx.nd.dot(h, table.T), axis=1), h]
    with autograd.record():
        init = [first(w, table), mx.nd.zeros((1, H))]
        if remat is None:
            outs, s = [], init
            for t in range(T):
                o, s = step(xs[t], s)
                outs.append(o)
            outs = mx.nd.stack(*outs)
        else:
            outs, s = gluon_cf.foreach(step, xs, init, remat=remat)
        loss = (outs * mx.nd.arange(outs.size).reshape(outs.shape)).sum() + (s[1] ** 2).sum()
    loss.backward()
    return [loss.asnumpy(), outs.asnumpy(), w.grad.asnumpy()]


FIRSTS = {
    "argmax": lambda w, table: mx.nd.argmax(mx.nd.dot(w, table.T), axis=1),
    "zeros_like": lambda w, table: mx.nd.zeros_like(w[:, 0]),
}


@pytest.mark.parametrize("remat", [True, 2, 3, "auto"])
@pytest.mark.parametrize("first", sorted(FIRSTS))
def test_decoder_first_token_from_parameters_trains_with_remat(first, remat):
    want = _decoder(FIRSTS[first], None)
    for r in (False, remat):
        for g, e in zip(_decoder(FIRSTS[first], r), want):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("remat", [True, 2])
def test_counter_started_from_zeros_like_of_a_parameter_read_by_take(remat):
    """``i0 = zeros_like(...w...)``: recorded from ``w``, no gradient reaches ``w`` through it."""
    got = {}
    for r in (False, remat):
        w, table, xs = mx.nd.array([[0.5, -1.0, 2.0]]), mx.nd.array(TABLE), mx.nd.array(XS)
        w.attach_grad()
        with autograd.record():
            outs, s = gluon_cf.while_loop(
                lambda i, h: i < T,
                lambda i, h: (mx.nd.tanh(mx.nd.take(table, i) * w * mx.nd.take(xs, i) + h),
                              [i + 1, mx.nd.tanh(mx.nd.take(table, i) * w + h)]),
                [mx.nd.zeros_like(w.sum(axis=1)), mx.nd.zeros((1, H))],
                max_iterations=T, remat=r)
            loss = (outs * outs).sum() + (s[1] ** 2).sum()
        loss.backward()
        got[r] = [loss.asnumpy(), w.grad.asnumpy()]
    for g, e in zip(got[remat], got[False]):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("remat", [True, 2])
def test_token_data_computed_by_argmax_of_parameters_with_remat(remat):
    """A foreach's data, tokens ``argmax``-ed from ``w``, read by an Embedding."""
    def run(r):
        w, table = mx.nd.array([[0.5, -1.0, 2.0]]), mx.nd.array(TABLE)
        w.attach_grad()
        feats = mx.nd.array(np.random.RandomState(2).randn(T, H))

        def step(tok, s):
            h = mx.nd.tanh(mx.nd.Embedding(tok, table, input_dim=V, output_dim=H) * w + s[0])
            return h, [h]
        with autograd.record():
            toks = mx.nd.argmax(mx.nd.dot(feats * w, table.T), axis=1).reshape((T, 1))
            if r is None:
                h, outs = mx.nd.zeros((1, H)), []
                for t in range(T):
                    h, _ = step(toks[t], [h])
                    outs.append(h)
                outs = mx.nd.stack(*outs)
            else:
                outs, _ = gluon_cf.foreach(step, toks, [mx.nd.zeros((1, H))], remat=r)
            loss = (outs ** 2).sum()
        loss.backward()
        return [loss.asnumpy(), w.grad.asnumpy()]
    want = run(None)
    for r in (False, remat):
        for g, e in zip(run(r), want):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_a_parameter_derived_index_state_that_needs_a_gradient_stays_marked():
    """The counter reaches ``w`` through ``take``'s array (not its indices): it needs a
    gradient, is marked, and its gradient reaches ``w`` as in plain Python."""
    def run(r):
        w, table, xs = mx.nd.array([[0.5, -1.0, 2.0]]), mx.nd.array(TABLE), mx.nd.array(XS)
        w.attach_grad()

        def step(x, s):
            c, h = s
            h = mx.nd.tanh(w * x * c.reshape((1, 1)) + h)
            return h, [c * 0.9 + mx.nd.take(w.reshape((H,)), mx.nd.array([1])), h]
        with autograd.record():
            init = [mx.nd.take(w.reshape((H,)), mx.nd.array([0])), mx.nd.zeros((1, H))]
            if r is None:
                s, outs = init, []
                for t in range(T):
                    o, s = step(xs[t], s)
                    outs.append(o)
                outs = mx.nd.stack(*outs)
            else:
                outs, s = gluon_cf.foreach(step, xs, init, remat=r)
            loss = (outs ** 2).sum() + (s[0] ** 2).sum()
        loss.backward()
        return [loss.asnumpy(), w.grad.asnumpy()]
    want = run(None)
    for r in (False, True, 2):
        for g, e in zip(run(r), want):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
