"""Issue 24 item 4, session 22: models people export, written the way they port them (greedy and
beam decoders, attention loops with masks, RNN loops over variable-length batches, Viterbi and
pointer decoders, users' own recursion, autograph control flow, gluonnlp layers), each exported
through ``export_onnx``, ``save_artifact`` and the CLI and compared with the hybridized block on
several lengths, batches and masks (``tests/test_hostile_export22.py``)."""
import numpy as np
from mxnet.gluon import HybridBlock, nn, rnn

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats
H, V = 6, 7


def ints(*values, dtype=np.int32):
    return np.array(values, dtype)


def tokens(*shape, seed=0, high=V, dtype=np.float32):
    return np.random.RandomState(seed).randint(0, high, shape).astype(dtype)


# ------------------------------------------------------------------- decoders

class _Decoder(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = nn.Embedding(V, H)
            self.cell = rnn.GRUCell(H, input_size=H)
            self.proj = nn.Dense(V, in_units=H)


@program([floats(3), rand(1, H)], [floats(1, 4, 2), rand(3, H, seed=1)],
         [floats(0, 6), rand(2, H, seed=2) * 3])
class GreedyBatchUntilAllDone(_Decoder):
    """Autograph greedy decoding of a batch: stops when every row has emitted EOS; finished
    rows emit EOS again (masked); tokens and per-row lengths returned."""

    NO_GRAD = (0,)

    @autograph
    def hybrid_forward(self, F, token, h):
        done = token * 0
        length = token * 0
        outs = []
        step = F.sum(token) * 0
        while step < 8:
            gluon_cf.max_iterations(8)
            out, (h,) = self.cell(self.embed(token), [h])
            token = F.argmax(self.proj(out), axis=-1)
            token = F.where(done > 0, token * 0, token)
            length = length + (1 - done)
            done = F.maximum(done, token == 0)
            outs.append(token)
            step = step + 1
            if F.min(done) > 0:
                break
        return F.stack(*outs, axis=1), length, h


@program([ints(2), rand(1, H), floats(5)], [ints(1, 3, 5), rand(3, H, seed=3), floats(3)],
         [ints(4, 4), rand(2, H, seed=4), floats(0)])
class WhileLoopGreedyInt32(_Decoder):
    """An explicit while_loop of a run-time count of steps over int32 tokens: the scores
    collected as step outputs (padded to max_iterations), the token cast back to int32."""

    NO_GRAD = (0, 2)

    def hybrid_forward(self, F, token, h, n):
        def cond(i, t, h):
            return i < n

        def func(i, t, h):
            out, (h,) = self.cell(self.embed(t), [h])
            score = F.log_softmax(self.proj(out))
            t = F.argmax(score, axis=-1).astype("int32")
            return [F.max(score, axis=-1), t], [i + 1, t, h]
        (scores, toks), (i, t, h) = gluon_cf.while_loop(
            cond, func, [F.zeros((1,)), token, h], max_iterations=6)
        return scores, toks, t, i


@program([rand(2, 3, V), rand(2, 3)], [rand(1, 3, V, seed=5), rand(1, 3, seed=6)],
         [rand(3, 3, V, seed=7), rand(3, 3, seed=8)])
class BeamSearchStep(HybridBlock):
    """One beam-search step (gluonnlp's shape): scores (B, K) plus log-probs (B, K, V) ->
    top K over K*V, the beams each came from and the tokens, the new scores."""

    def hybrid_forward(self, F, log_probs, scores):
        total = F.broadcast_add(F.log_softmax(log_probs), scores.expand_dims(2))
        flat = total.reshape((0, -1))
        best, idx = F.topk(flat, k=3, ret_typ="both")
        beam = F.floor(idx / V)
        token = idx - beam * V
        return best, beam, token


@program([rand(4, 2, V), floats(0)], [rand(6, 2, V, seed=9), floats(1)],
         [rand(2, 2, V, seed=10), floats(0)])
class BeamSearchForeachBacktrack(HybridBlock):
    """Beam search over T steps of given log-probs (T, K, V): foreach keeps the beam scores and
    collects backpointers and tokens; a second foreach over the reversed steps backtracks the
    best beam with pick."""

    def hybrid_forward(self, F, log_probs, start):
        def step(lp, scores):
            total = F.broadcast_add(F.log_softmax(lp), scores.expand_dims(1))
            best, idx = F.topk(total.reshape((1, -1)), k=2, ret_typ="both")
            best, idx = best.reshape((-1,)), idx.reshape((-1,))
            beam = F.floor(idx / V)
            return [beam, idx - beam * V], best
        (beams, toks), final = gluon_cf.foreach(step, log_probs, F.broadcast_add(F.zeros((2,)), start))
        best = F.argmax(final, axis=0)

        def back(bt, k):
            beam, tok = bt
            return F.pick(tok, k, axis=0), F.pick(beam, k, axis=0)
        path, _ = gluon_cf.foreach(back, [F.flip(beams, axis=0), F.flip(toks, axis=0)], best)
        return F.flip(path, axis=0), final


@program([rand(2, 5, H), floats(5, 2), rand(3, 2, H, seed=1)],
         [rand(3, 4, H, seed=2), floats(1, 4, 3), rand(1, 3, H, seed=3)],
         [rand(1, 2, H, seed=4), floats(2), rand(5, 1, H, seed=5)])
class AttentionDecoderWithMask(HybridBlock):
    """Bahdanau-style attention in a foreach over the decoder inputs (T, B, H): scores over the
    encoder memory (B, S, H) masked past each row's valid length (softmax of -1e9), context fed
    to a GRU cell; the attention weights returned too."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.GRUCell(H, input_size=2 * H)
            self.query = nn.Dense(H, in_units=H, flatten=False)

    def hybrid_forward(self, F, memory, valid, dec):
        steps = F.arange(0, 64).slice_like(memory.transpose((1, 0, 2)), axes=(0,))
        mask = F.broadcast_lesser(steps.reshape((1, -1)), valid.reshape((-1, 1)))

        def step(x, states):
            h = states[0]
            q = self.query(h).expand_dims(1)                   # (B, 1, H)
            score = F.batch_dot(q, memory, transpose_b=True).reshape((0, -1))
            score = F.where(mask, score, F.ones_like(score) * -1e9)
            weights = F.softmax(score, axis=-1)
            ctx = F.batch_dot(weights.expand_dims(1), memory).reshape((0, -1))
            out, new = self.cell(F.concat(x, ctx, dim=1), [h])
            return [out, weights], new
        (outs, weights), h = gluon_cf.foreach(step, dec, [F.zeros_like(F.sum(dec, axis=0))])
        return outs, weights, h[0]


@program([rand(5, 2, H), floats(5, 3)], [rand(3, 3, H, seed=1), floats(1, 3, 2)],
         [rand(4, 1, H, seed=2), floats(4)], [rand(6, 4, H, seed=3), floats(6, 1, 1, 5)])
class MaskedRnnOverLengths(HybridBlock):
    """An LSTM cell in a foreach over (T, B, H) that keeps each row's state past its length
    (F.where on a step counter), then SequenceLast and SequenceMask with the lengths."""

    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.LSTMCell(H, input_size=H)

    def hybrid_forward(self, F, x, lengths):
        def step(xt, states):
            h, c, t = states
            out, (h2, c2) = self.cell(xt, [h, c])
            live = F.broadcast_lesser(t, lengths).reshape((-1, 1))
            h = F.where(F.broadcast_like(live, h), h2, h)
            c = F.where(F.broadcast_like(live, c), c2, c)
            return out, [h, c, t + 1]
        zeros = F.zeros_like(F.sum(x, axis=0))
        outs, (h, c, _) = gluon_cf.foreach(step, x, [zeros, zeros, F.zeros((1,))])
        masked = F.SequenceMask(outs, sequence_length=lengths, use_sequence_length=True)
        last = F.SequenceLast(outs, sequence_length=lengths, use_sequence_length=True)
        return masked, last, h, c


@program([rand(5, 2, H), floats(5, 3)], [rand(3, 3, H, seed=1), floats(1, 3, 2)],
         [rand(2, 1, H, seed=2), floats(2)])
class BidirectionalBySequenceReverse(HybridBlock):
    """A hand-written bidirectional RNN: foreach forward, foreach over SequenceReverse with the
    lengths backward, reversed back and concatenated."""

    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fwd = rnn.RNNCell(H, input_size=H)
            self.bwd = rnn.RNNCell(H, input_size=H)

    def hybrid_forward(self, F, x, lengths):
        h0 = F.zeros_like(F.sum(x, axis=0))
        f, _ = gluon_cf.foreach(lambda xt, s: self.fwd(xt, s), x, [h0])
        rev = F.SequenceReverse(x, sequence_length=lengths, use_sequence_length=True)
        b, _ = gluon_cf.foreach(lambda xt, s: self.bwd(xt, s), rev, [h0])
        b = F.SequenceReverse(b, sequence_length=lengths, use_sequence_length=True)
        out = F.concat(f, b, dim=2)
        return F.SequenceMask(out, sequence_length=lengths, use_sequence_length=True)


@program([rand(4, 3), rand(3, 3, seed=1), ints(1, 2, 0, 1)],
         [rand(6, 3, seed=2), rand(3, 3, seed=3), ints(0, 0, 2, 1, 1, 2)],
         [rand(1, 3, seed=4), rand(3, 3, seed=5), ints(2)])
class ViterbiCrf(HybridBlock):
    """CRF Viterbi decoding: a foreach over emissions (T, C) keeps the best scores and collects
    argmax backpointers; a foreach over the reversed backpointers follows them with pick. The
    int32 gold tags give the gold path's score (pick of emissions, take of transitions)."""

    NO_GRAD = (2,)

    def hybrid_forward(self, F, emissions, transitions, gold):
        def forward(e, score):
            total = F.broadcast_add(score.reshape((-1, 1)), transitions)
            return F.argmax(total, axis=0), F.max(total, axis=0) + e
        back, score = gluon_cf.foreach(forward, emissions, F.zeros((3,)))
        best = F.argmax(score, axis=0)

        def follow(ptr, tag):
            return tag, F.pick(ptr, tag, axis=0)
        path, _ = gluon_cf.foreach(follow, F.flip(back, axis=0), best)
        goldf = gold.astype("float32")
        emit = F.sum(F.pick(emissions, goldf, axis=1))
        pairs = F.take(transitions.reshape((-1,)),
                       F.slice_axis(goldf, axis=0, begin=0, end=-1) * 3 +
                       F.slice_axis(goldf, axis=0, begin=1, end=None))
        return F.flip(path, axis=0), F.max(score), emit + F.sum(pairs)


@program([rand(5, H), floats(1, 1, 1, 1, 1)], [rand(3, H, seed=1), floats(1, 0, 1)],
         [rand(6, H, seed=2), floats(1, 1, 0, 0, 1, 0)])
class PointerNetworkDecode(HybridBlock):
    """Pointer-network decoding: a while_loop picks the best unvisited allowed input (scores
    masked by a visited mask updated with one_hot) until every allowed input is taken."""

    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.key = nn.Dense(H, in_units=H, flatten=False)

    def hybrid_forward(self, F, x, allowed):
        keys = self.key(x)                                          # (N, H)
        n_allowed = F.sum(allowed)

        def cond(i, visited, q):
            return i < n_allowed

        def func(i, visited, q):
            score = F.dot(keys, q.reshape((-1,)))
            score = F.where(visited > 0, F.ones_like(score) * -1e9, score)
            pick = F.argmax(score, axis=0)
            visited = visited + F.broadcast_equal(F.arange(0, 1000).slice_like(visited, axes=(0,)), pick)
            q = F.take(x, pick).reshape((-1,))
            return pick, [i + 1, visited, q]
        picks, (i, visited, q) = gluon_cf.while_loop(
            cond, func, [F.zeros((1,)), 1 - allowed, F.mean(x, axis=0)], max_iterations=6)
        return picks, i, visited


@program([rand(2, 5, H), floats(5, 2)], [rand(3, 3, H, seed=1), floats(3, 1, 2)],
         [rand(1, 4, H, seed=2), floats(1)])
class GluonnlpAttentionCellLoop(HybridBlock):
    """gluonnlp's MLPAttentionCell and DotProductAttentionCell called in a foreach over the
    decoder steps, the memory masked by valid length (the mask argument gluonnlp takes)."""

    def __init__(self):
        super().__init__()
        import gluonnlp
        with self.name_scope():
            self.mlp = gluonnlp.model.MLPAttentionCell(H)
            self.dot = gluonnlp.model.DotProductAttentionCell(scaled=True)

    def hybrid_forward(self, F, memory, valid):
        steps = F.arange(0, 64).slice_like(memory.transpose((1, 0, 2)), axes=(0,))
        mask = F.broadcast_lesser(steps.reshape((1, 1, -1)), valid.reshape((-1, 1, 1)))

        def step(x, states):
            q = (x + states[0]).expand_dims(1)
            c1, w1 = self.mlp(q, memory, memory, mask)
            c2, w2 = self.dot(q, memory, None, mask)
            h = (c1 + c2).reshape((0, -1))
            return [w1, w2], [h]
        (w1, w2), h = gluon_cf.foreach(step, memory.transpose((1, 0, 2)),
                                       [F.zeros_like(F.sum(memory, axis=1))])
        return w1, w2, h[0]


# ------------------------------------------------------------------- autograph

@program([rand(4, 3)], [rand(6, 3, seed=1) * 3], [rand(1, 3, seed=2)], [-np.abs(rand(3, 3))])
class AutographEarlyStopWhile(HybridBlock):
    """The loop autograph's refusal of a for with a tensor break advises: a while over a
    counter up to the row count (shape_array), a running sum passing a threshold breaks after
    an append; the stacked items concatenated after a start row."""

    @autograph
    def hybrid_forward(self, F, x):
        n = F.slice_axis(F.shape_array(x), axis=0, begin=0, end=1).astype("float32")
        i = F.zeros((1,))
        total = F.zeros((3,))
        items = []
        while i < n:
            gluon_cf.max_iterations(8)
            total = total + F.take(x, i).reshape((-1,))
            items.append(total * 2)
            i = i + 1
            if F.sum(total) > 2:
                break
        return F.concat(F.ones((1, 3)), F.stack(*items), dim=0), total, i


@program([rand(4, 3), floats(2)], [rand(5, 3, seed=1), floats(0)], [rand(2, 3, seed=2), floats(7)])
class AutographWhileTwoConditions(HybridBlock):
    """while i < n and the norm is small: two conditions, one a counter of a run-time n."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3)

    @autograph
    def hybrid_forward(self, F, x, n):
        h = F.mean(x, axis=0, keepdims=True)
        i = n * 0
        while i < n and F.sum(F.abs(h)) < 50:
            gluon_cf.max_iterations(10)
            h = F.tanh(self.fc(h)) * 3 + h
            i = i + 1
        return h, i


@program([rand(4, 3)], [rand(6, 3, seed=1)], [rand(1, 3, seed=2) - 2])
class AutographCondThenLoopOverMasked(HybridBlock):
    """An if whose branches give different row counts (rows kept by a mask vs all rows), then
    a for over the result collecting a running max, stacked."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            rows = F.contrib.boolean_mask(x, F.sum(x, axis=1) > -10)
        else:
            rows = F.concat(x, x, dim=0)
        best = F.ones((3,)) * -5
        outs = []
        for r in rows:
            best = F.maximum(best, r)
            outs.append(best)
        return F.stack(*outs), best


@program([rand(3, 4, 2)], [rand(2, 5, 2, seed=1)], [rand(1, 1, 2, seed=2)])
class AutographNestedForLoops(HybridBlock):
    """Nested for loops (sentences, then words): an inner sum, collected per sentence, outer
    list stacked; both lists appended once per step."""

    @autograph
    def hybrid_forward(self, F, x):
        sentences = []
        for sent in x:
            acc = F.zeros((2,))
            for word in sent:
                acc = acc * 0.5 + word
            sentences.append(acc)
        return F.stack(*sentences)


@program([rand(4, 3)], [rand(2, 3, seed=1) + 1], [rand(5, 3, seed=2) - 1])
class AutographReversedForWithIf(HybridBlock):
    """for over reversed rows with an if/else inside the body on each row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        outs = []
        for row in reversed(x):
            if F.sum(row) > 0:
                h = h + row
            else:
                h = h * 0.5 - row
            outs.append(h)
        return F.stack(*outs, axis=0), h


@program([rand(4, 3), floats(1, 0, 1, 1)], [rand(3, 3, seed=1), floats(0, 0, 1)],
         [rand(5, 3, seed=2), floats(1, 1, 1, 1, 1)])
class AutographForOverBooleanMask(HybridBlock):
    """for over the rows a mask keeps (at least one kept), through a Dense each step."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3)

    @autograph
    def hybrid_forward(self, F, x, m):
        h = F.zeros((1, 3))
        for r in F.contrib.boolean_mask(x, m):
            h = F.tanh(self.fc(r.reshape((1, -1))) + h)
        return h


@program([rand(3, 2)], [rand(5, 2, seed=1)], [rand(1, 2, seed=2)])
class AutographTwoListsConcatDim1(HybridBlock):
    """Two lists appended in one loop, joined by concat on dim 1 and by add_n."""

    @autograph
    def hybrid_forward(self, F, x):
        a, b = [], []
        for r in x:
            a.append(r.reshape((1, 2)) * 2)
            b.append(F.exp(r.reshape((1, 2))))
        return F.concat(*a, dim=1), F.add_n(*b)


# ------------------------------------------------------------------- explicit loops

@program([rand(4, 3), floats(3)], [rand(4, 3, seed=1), floats(0)], [rand(4, 3, seed=2), floats(8)])
class WhileInsideCondBranch(HybridBlock):
    """A cond whose taken branch runs a while_loop reading a parameter each step (a power
    iteration with a Dense); the other branch is a plain op."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3, use_bias=False)

    def hybrid_forward(self, F, x, n):
        def loop():
            def func(i, v):
                v = self.fc(v)
                return [], [i + 1, F.broadcast_div(v, F.norm(v))]
            _, (i, v) = gluon_cf.while_loop(lambda i, v: i < n, func,
                                            [F.zeros((1,)), x], max_iterations=10)
            return v
        return gluon_cf.cond(n > 0, loop, lambda: x * 0 + 1)


@program([rand(3, 4, 2), rand(2, 2)], [rand(5, 2, 2, seed=1), rand(2, 2, seed=2)],
         [rand(1, 3, 2, seed=3), rand(2, 2, seed=4)])
class CondInsideScanWithTwoData(HybridBlock):
    """A foreach over two data arrays (T, B, 2) and (T, ...) slices with a cond in the body on
    the step's data, two states, and two step outputs of different shapes."""

    def hybrid_forward(self, F, x, w):
        def step(data, states):
            xt, = data
            h, count = states
            h = gluon_cf.cond(F.sum(xt) > 0, lambda: F.tanh(F.dot(xt, w) + h),
                              lambda: h * 0.5)
            return [h, F.sum(h, axis=1)], [h, count + (F.sum(xt) > 0)]
        (hs, sums), (h, count) = gluon_cf.foreach(step, [x], [F.zeros_like(F.sum(x, axis=0)), F.zeros((1,))])
        return hs, sums, count


@program([rand(3, 4, 2)], [rand(2, 6, 2, seed=1)], [rand(4, 1, 2, seed=2)])
class NestedForeachCharWord(HybridBlock):
    """Char-level words: a foreach over words (W, C, 2), an inner foreach over each word's
    characters with an RNN cell, the word vectors fed to an outer cell."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.char = rnn.RNNCell(3, input_size=2)
            self.word = rnn.GRUCell(3, input_size=3)

    def hybrid_forward(self, F, words):
        def word_step(chars, states):
            _, h = gluon_cf.foreach(lambda c, s: self.char(c.reshape((1, -1)), s), chars,
                                    [F.zeros((1, 3))])
            return self.word(h[0], states)
        outs, h = gluon_cf.foreach(word_step, words, [F.zeros((1, 3))])
        return outs, h[0]


@program([rand(4, 3), floats(2)], [rand(4, 3, seed=1), floats(0)], [rand(4, 3, seed=2), floats(5)])
class WhileInsideForeachBody(HybridBlock):
    """A while_loop with a run-time count inside a foreach body, reading the step's row and a
    parameter; its padded step outputs summed."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.w = self.params.get("w", shape=(1, 3))

    def hybrid_forward(self, F, x, n, w):
        def step(row, states):
            def func(i, v):
                v = v * w.reshape((-1,)) + row
                return v, [i + 1, v]
            outs, (_, v) = gluon_cf.while_loop(lambda i, v: i < n, func,
                                               [F.zeros((1,)), states[0]], max_iterations=4)
            return F.sum(outs, axis=0), [v]
        outs, h = gluon_cf.foreach(step, x, [F.zeros((3,))])
        return outs, h[0]


@program([rand(5, 3), floats(1, 0, 1, 1, 0)], [rand(4, 3, seed=1), floats(0, 0, 0, 1)],
         [rand(2, 3, seed=2), floats(1, 1)])
class MaskOpsCombined(HybridBlock):
    """boolean_mask rows, then SequenceLast over the kept rows as (T, 1, 3), a SequenceMask
    of the full rows by the kept count, and sums of both."""

    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        last = F.SequenceLast(kept.expand_dims(1))
        count = F.sum(m).reshape((1,))
        masked = F.SequenceMask(x.expand_dims(1), sequence_length=count,
                                use_sequence_length=True)
        return last, masked.reshape((0, -1)), F.sum(kept, axis=0)


@program([ints(3, 1, 4, 1), ints(4), rand(V, H)], [ints(2, 2), ints(1), rand(V, H, seed=1)],
         [ints(5, 0, 6, 1, 2, 3), ints(6), rand(V, H, seed=2)])
class IntTokensAndLengthThreeOutputs(HybridBlock):
    """int32 token ids and an int32 length: an embedding looked up by take, a foreach over the
    looked-up rows, a running argmax kept as int32; three outputs of three dtypes."""

    NO_GRAD = (0, 1)

    def hybrid_forward(self, F, toks, length, table):
        rows = F.take(table, toks)

        def step(r, states):
            best, t = states
            better = F.sum(r) > F.sum(best)
            best = F.where(F.broadcast_like(better, r), r, best)
            return F.sum(r).astype("int32"), [best, t + 1]
        sums, (best, t) = gluon_cf.foreach(step, rows, [F.ones((H,)) * -9, F.zeros((1,))])
        return best, sums, (t.astype("int32") == length).astype("int32")


@program([rand(2, 4, 3)], [rand(1, 4, 3, seed=1)], [rand(5, 4, 3, seed=2)])
class FusedLstmThenForeachPooling(HybridBlock):
    """A gluon.rnn.LSTM layer (fused RNN op, NTC) followed by a foreach over time computing an
    attention-pooling state, with batch 1 and larger."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.lstm = rnn.LSTM(4, layout="NTC", input_size=3)
            self.score = nn.Dense(1, in_units=4, flatten=False)

    def hybrid_forward(self, F, x):
        out = self.lstm(x)                                    # (B, T, 4)
        tnc = out.transpose((1, 0, 2))

        def step(o, states):
            acc, norm = states
            e = F.exp(self.score(o))                          # (B, 1)
            return e, [acc + F.broadcast_mul(e, o), norm + e]
        zeros = F.zeros_like(F.sum(tnc, axis=0))
        es, (acc, norm) = gluon_cf.foreach(step, tnc, [zeros, zeros.slice_axis(
            axis=1, begin=0, end=1)])
        return F.broadcast_div(acc, norm), es


@program([rand(4, 3), floats(2)], [rand(4, 3, seed=1), floats(4)], [rand(4, 3, seed=2), floats(1)])
class CacheScatterDecode(HybridBlock):
    """Incremental decoding with a fixed-size cache (4, 3): each while_loop step writes its
    state into row i of the cache through a one_hot mask and attends over the rows so far."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, n):
        def func(i, cache, h):
            row = F.broadcast_equal(F.arange(0, 4), i).reshape((-1, 1))
            h = F.tanh(self.fc(h + F.take(x, i)))
            cache = F.where(F.broadcast_like(row, cache), F.broadcast_like(h, cache), cache)
            seen = F.broadcast_lesser_equal(F.arange(0, 4), i)
            score = F.where(seen, F.dot(cache, h.reshape((-1,))), F.ones((4,)) * -1e9)
            ctx = F.dot(F.softmax(score).reshape((1, -1)), cache)
            return ctx, [i + 1, cache, h + ctx]
        ctxs, (i, cache, h) = gluon_cf.while_loop(
            lambda i, cache, h: i < n, func, [F.zeros((1,)), F.zeros((4, 3)), F.zeros((1, 3))],
            max_iterations=4)
        return ctxs, cache, h


@program([rand(3, 2).astype(np.float64), floats(3).astype(np.float64)],
         [rand(5, 2, seed=1).astype(np.float64), floats(1).astype(np.float64)])
class Float64WelfordLoop(HybridBlock):
    """A float64 Welford running mean/variance over the first n rows (while_loop)."""

    def hybrid_forward(self, F, x, n):
        def func(i, mean, m2):
            row = F.take(x, i).reshape((-1,))
            delta = row - mean
            mean = mean + F.broadcast_div(delta, i + 1)
            m2 = m2 + delta * (row - mean)
            return [], [i + 1, mean, m2]
        zero = F.zeros((1,), dtype="float64")
        _, (i, mean, m2) = gluon_cf.while_loop(lambda i, mean, m2: i < n, func,
                                               [zero, F.zeros((2,), dtype="float64"),
                                                F.zeros((2,), dtype="float64")],
                                               max_iterations=5)
        return mean, F.broadcast_div(m2, F.maximum(i, F.ones_like(i)))


# ------------------------------------------------------------------- recursion

@program([floats(0, 1, 2, 0, 0), floats(3, 1, -1, -1, -1), floats(2, 4, -1, 1, 3),
          floats(1, 2, -1, 5, 7), floats(0)],
         [floats(0, 0, 0), floats(1, -1, -1), floats(2, -1, -1), floats(0, 3, 4), floats(0)],
         [floats(0), floats(-1), floats(-1), floats(2.5), floats(0)])
class ExpressionTreeEvaluator(HybridBlock):
    """A user's evaluator of an expression tree: op 0 a leaf value, 1 add, 2 multiply (a cond
    inside a cond), children by left/right arrays."""

    NO_GRAD = (0, 1, 2, 4)

    def hybrid_forward(self, F, op, left, right, value, root):
        @gluon_cf.recursive
        def ev(i):
            o = F.take(op, i)

            def inner():
                a = ev(F.take(left, i))
                b = ev(F.take(right, i))
                return gluon_cf.cond(o < 1.5, lambda: a + b, lambda: a * b)
            return gluon_cf.cond(o < 0.5, lambda: F.take(value, i), inner)
        return ev(root)


@program([tokens(5, seed=1), floats(1, 3, -1, -1, -1), floats(2, 4, -1, -1, -1), floats(0)],
         [tokens(3, seed=2), floats(-1, 0, 1), floats(-1, -1, -1), floats(0, 2)],
         [tokens(1, seed=3), floats(-1), floats(-1), floats(0)])
class TreeMaxPoolWithDepth(HybridBlock):
    """A recursive encoder returning two values per node: the max-pool of the embeddings under
    it and its depth; several roots (a forest; the second input list's roots are leaves)."""

    NO_GRAD = (0, 1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = nn.Embedding(V, H)

    def hybrid_forward(self, F, toks, left, right, roots):
        @gluon_cf.recursive
        def enc(i):
            e = self.embed(F.take(toks, i))

            def internal():
                lv, ld = enc(F.take(left, i))
                rv, rd = enc(F.take(right, i))
                return F.maximum(F.maximum(lv, rv), e), F.maximum(ld, rd) + 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: (e, F.ones((1,))), internal)

        def per_root(r, states):
            v, d = enc(r.reshape((1,)))
            return [v.reshape((-1,)), d], states
        (vs, ds), _ = gluon_cf.foreach(per_root, roots, [])
        return vs, ds


@program([floats(0, 1, 2, 3), floats(-1, 0, 1, 2), floats(3)],
         [floats(0, 1), floats(-1, 0), floats(1)],
         [floats(0, 1, 2, 3, 4, 5), floats(-1, 0, 0, 1, 1, 2), floats(5)])
class ParentChainRecursionWithLoopAfter(HybridBlock):
    """A recursion up a parent chain (distance to the root), then a while_loop that many
    steps doubling a value: a loop whose trip count comes from a recursive result."""

    NO_GRAD = (0, 1, 2)

    def hybrid_forward(self, F, node, parent, start):
        @gluon_cf.recursive
        def depth(i):
            p = F.take(parent, i)
            return gluon_cf.cond(p < 0, lambda: F.zeros((1,)), lambda: depth(p) + 1)
        d = depth(start)
        _, (i, v) = gluon_cf.while_loop(lambda i, v: i < d, lambda i, v: ([], [i + 1, v * 2]),
                                        [F.zeros((1,)), F.ones((1,))], max_iterations=8)
        return d, v


@program([tokens(5, seed=1), floats(1, 3, -1, -1, -1), floats(2, 4, -1, -1, -1), floats(0)],
         [tokens(7, seed=2), floats(1, 2, 3, -1, -1, -1, -1), floats(6, 5, 4, -1, -1, -1, -1),
          floats(0)],
         [tokens(1, seed=3), floats(-1), floats(-1), floats(0)])
class TreeLstmThenClassifierLoop(HybridBlock):
    """gluon_cf's TreeLSTM root state, then a while_loop refining it with a Dense until its
    norm is small or 3 steps: recursion followed by a data-dependent loop."""

    NO_GRAD = (0, 1, 2, 3)

    def __init__(self):
        super().__init__()
        from gluon_cf.models.recursive import TreeLSTM
        with self.name_scope():
            self.tree = TreeLSTM(V, H, H, 3)
            self.fc = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, toks, left, right, roots):
        logits = self.tree(toks, left, right, roots)

        def func(i, v):
            return [], [i + 1, F.tanh(self.fc(v)) * 0.5]
        _, (i, v) = gluon_cf.while_loop(lambda i, v: (i < 3) * (F.norm(v) > 0.1), func,
                                        [F.zeros((1,)), logits], max_iterations=3)
        return v, i
