"""Hostile round 29h (issue 24): seq2seq greedy and beam decoders with early stop, written as
people port them (gluonnlp's ``BeamSearchSampler``: a fixed-size token buffer written by one-hot
masks, ``topk`` over ``beam * vocab`` scores, parents by ``//`` and words by ``%``, finished flags
and an all-finished stop), as autograph Python and as ``gluon_cf.while_loop`` (oracle: MXNet's
own ``F.contrib.while_loop`` eagerly). Values and gradients, eager and hybridized, and the
history of calls on one hybridized block equals fresh blocks (issue 24 item 2)."""
import re
import warnings

import mxnet as mx
import pytest
from mxnet.gluon import HybridBlock, nn, rnn

import gluon_cf
from gluon_cf import autograph
from gluon_cf.checks import MismatchError

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats
V, H, BEAM, T = 6, 4, 2, 5

STARTS = ([floats(1), rand(1, H, seed=2911)], [floats(3), rand(1, H, seed=2912) * 3],
          [floats(0), rand(1, H, seed=2913) - 1], [floats(5), rand(1, H, seed=2914) * 0])
SOURCES = ([rand(4, H, seed=2915), floats(2)], [rand(1, H, seed=2916) * 2, floats(0)],
           [rand(6, H, seed=2917) - 0.5, floats(4)])


class _Seq2Seq(HybridBlock):
    NO_GRAD = (0,)     # (token ids)
    TOL = (1e-5, 1e-6)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = nn.Embedding(V, H)
            self.cell = rnn.GRUCell(H, input_size=H)
            self.proj = nn.Dense(V, in_units=H)


@program(*STARTS)
class GreedyRangeAppendThenBreak(_Seq2Seq):
    """``for t in range(T)``: one append, then a tensor ``break`` on EOS (the commonest)."""

    @autograph
    def hybrid_forward(self, F, token, h):
        tokens, logits = [], []
        for t in range(T):
            out, (h,) = self.cell(self.embed(token), [h])
            logit = self.proj(out)
            token = F.argmax(logit, axis=-1)
            tokens.append(token)
            logits.append(F.max(F.log_softmax(logit), axis=-1))
            if F.sum(token == 0) > 0:
                break
        return F.concat(*tokens, dim=0), F.add_n(*logits), h


@program(*STARTS)
class GreedyWhileTrueReturnInside(_Seq2Seq):
    """``while True`` with the bound, a ``return`` on EOS inside, ``h`` after it otherwise."""

    @autograph
    def hybrid_forward(self, F, token, h):
        score = F.zeros((1,))
        n = F.zeros((1,))
        while True:
            gluon_cf.max_iterations(T)
            out, (h,) = self.cell(self.embed(token), [h])
            logp = F.log_softmax(self.proj(out))
            token = F.argmax(logp, axis=-1)
            score = score + F.max(logp, axis=-1)
            n = n + 1
            if F.sum(token == 1) > 0:
                return score * 10, h
            if F.sum(n) >= T:
                break
        return score, h


@program(*STARTS)
class GreedyStopsBeforeAppendingEos(_Seq2Seq):
    """The ``break`` before the append: EOS itself is not collected; at least one step."""

    @autograph
    def hybrid_forward(self, F, token, h):
        tokens = [token]
        for t in range(T):
            out, (h,) = self.cell(self.embed(token), [h])
            token = F.argmax(self.proj(out), axis=-1)
            if F.sum(token == 2) > 0:
                break
            tokens.append(token)
        return F.stack(*tokens), h


@program(*STARTS)
class BeamSearchOneHotBufferAutograph(_Seq2Seq):
    """gluonnlp-style beam search: scores (BEAM,), a (BEAM, T) buffer written through one-hot
    masks, ``topk`` over BEAM * V, parents ``//``, words ``%``, stop once all beams end."""

    @autograph
    def hybrid_forward(self, F, token, h):
        hs = F.concat(h, h, dim=0)
        words = F.concat(token, token, dim=0)
        scores = F.concat(F.zeros((1,)), F.ones((1,)) * -1e4, dim=0)
        buf = F.zeros((BEAM, T))
        done = F.zeros((BEAM,))
        t = F.zeros((1,))
        while F.sum(t) < T and F.min(done) < 1:
            out, (hs,) = self.cell(self.embed(words), [hs])
            logp = F.log_softmax(self.proj(out))
            cand = F.broadcast_add(scores.reshape((-1, 1)), logp).reshape((-1,))
            top, idx = F.topk(cand, k=BEAM, ret_typ="both")
            parent = F.floor(idx / V)
            words = idx - parent * V
            hs = F.take(hs, parent)
            buf = F.take(buf, parent)
            done = F.take(done, parent)
            scores = top
            mask = F.one_hot(t, T)
            buf = buf * (1 - mask) + F.broadcast_mul(words.reshape((-1, 1)), mask)
            done = F.maximum(done, words == 0)
            t = t + 1
        return buf, scores, t


def _beam_cond(t, words, hs, scores, buf, done):
    return (t < T) * (done.min() < 1)


class BeamSearchFunctionalWhileLoop(_Seq2Seq):
    """The same beam search as ``gluon_cf.while_loop(cond, body, loop_vars, max_iterations)``
    (a port of MXNet code calling ``F.contrib.while_loop``: the oracle)."""

    def _search(self, F, while_loop, token, h):
        def body(t, words, hs, scores, buf, done):
            out, (hs2,) = self.cell(self.embed(words), [hs])
            logp = F.log_softmax(self.proj(out))
            cand = F.broadcast_add(scores.reshape((-1, 1)), logp).reshape((-1,))
            top, idx = F.topk(cand, k=BEAM, ret_typ="both")
            parent = F.floor(idx / V)
            words = idx - parent * V
            mask = F.one_hot(t, T)
            buf = F.broadcast_mul(F.take(buf, parent), 1 - mask) + \
                F.broadcast_mul(words.reshape((-1, 1)), mask)
            done = F.maximum(F.take(done, parent), words == 0)
            return top, [t + 1, words, F.take(hs2, parent), top, buf, done]
        init = [F.zeros((1,)), F.concat(token, token, dim=0), F.concat(h, h, dim=0),
                F.concat(F.zeros((1,)), F.ones((1,)) * -1e4, dim=0), F.zeros((BEAM, T)),
                F.zeros((BEAM,))]
        _, (t, _, _, scores, buf, _) = while_loop(_beam_cond, body, init, max_iterations=T)
        return buf, scores, t

    def hybrid_forward(self, F, token, h):
        return self._search(F, gluon_cf.while_loop, token, h)

    def plain_forward(self, F, token, h, **params):
        return self._search(F, F.contrib.while_loop, token, h)


PROGRAMS[BeamSearchFunctionalWhileLoop] = list(STARTS)


@program(*SOURCES)
class AttentionGreedyOverEncoderRows(_Seq2Seq):
    """Encode the source rows with a ``for``, collect them, then a greedy ``while`` attending
    over them (dot scores, softmax), stopping on EOS or after ``T`` steps."""

    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, src, token):
        h = F.zeros((1, H))
        mem = []
        for row in src:
            h, _ = self.cell(row.reshape((1, -1)), [h])
            mem.append(h)
        keys = F.concat(*mem, dim=0)
        total = F.zeros((1, V))
        n = F.zeros((1,))
        while F.sum(n) < T:
            att = F.softmax(F.dot(h, keys, transpose_b=True), axis=-1)
            ctx = F.dot(att, keys)
            out, (h,) = self.cell(self.embed(token) + ctx, [h])
            logit = self.proj(out)
            total = total + logit
            token = F.argmax(logit, axis=-1)
            n = n + 1
            if F.sum(token == 3) > 0:
                break
        return total, n


@program(*STARTS)
class GreedyBatchAllFinishedFlags(_Seq2Seq):
    """A batch of two decoded together: finished rows keep their token, the loop stops once
    every row finished (``F.min(done) < 1``)."""

    @autograph
    def hybrid_forward(self, F, token, h):
        tokens = F.concat(token, (token + 1) % V, dim=0)
        hs = F.concat(h, -h, dim=0)
        done = F.zeros((2,))
        lengths = F.zeros((2,))
        n = F.zeros((1,))
        while F.min(done) < 1 and F.sum(n) < T:
            gluon_cf.max_iterations(T)
            n = n + 1
            out, (hs,) = self.cell(self.embed(tokens), [hs])
            new = F.argmax(self.proj(out), axis=-1)
            tokens = F.where(done, tokens, new)
            lengths = lengths + (1 - done)
            done = F.maximum(done, tokens == 4)
        return tokens, lengths, hs


@pytest.mark.parametrize("block_class", list(PROGRAMS), ids=lambda c: c.__name__)
def test_decoder_equals_its_oracle(block_class):
    """Recorded: the decoded values, the scores and every gradient, eager and hybridized."""
    result = hostile_harness.classify(block_class, PROGRAMS[block_class], [__file__],
                                      export=False)
    hostile_harness.assert_kinds(result)


@pytest.mark.parametrize("block_class", [BeamSearchOneHotBufferAutograph],
                         ids=lambda c: c.__name__)
def test_decoder_call_history(block_class):
    inputs = PROGRAMS[block_class]
    hostile_harness.check_call_history(block_class, inputs, hostile_harness._make,
                                       hostile_harness.eager_oracle(block_class, inputs),
                                       (1e-5, 1e-6))


def test_int32_start_token_carried_as_float_is_refused_at_the_while_line():
    """A start token given as int32 while ``F.argmax`` gives float32: eagerly the variable
    changes dtype as Python allows; hybridized a graph's loop variable has one dtype, and the
    refusal names the ``while`` line (it names the carried value by position, not as
    ``token``: left as found)."""
    cls = GreedyWhileTrueReturnInside
    token, h = PROGRAMS[cls][0]
    net = hostile_harness._make(cls)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net(mx.nd.array(token, dtype="int32"), mx.nd.array(h))
        net.hybridize()
        line = hostile_harness.line_in(__file__, "while True:", cls)
        with pytest.raises(MismatchError, match=r"loop variable dtypes before and after func "
                           r"differ(.|\n)*at %s:%d\)" % (re.escape(__file__), line)):
            net(mx.nd.array(token, dtype="int32"), mx.nd.array(h))
        net(mx.nd.array(token), mx.nd.array(h))    # (and the block stays usable)
