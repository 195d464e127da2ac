"""Issue 24 item 4, session 25: models people export, in families the earlier export rounds
(``hostile_programs23x.py``, ``hostile_programs24x.py``) did not write: greedy decoders stopping
on a tensor (an EOS flag in the loop state), returning the loop's outputs only or its state
only, beam search with back-pointers followed by a backtracking foreach and a length penalty, a
pointer network masking what it picked, attention decoders over memory of run-time length
(SequenceMask on the scores, softmax by length, coverage vectors as loop state), foreach with
states of several shapes and dtypes, Viterbi and CTC-style dynamic programming, nested loops
(foreach in while_loop in cond), conds whose branches return other sizes followed by loops,
int32/int64/float64 loop states, Embedding/LayerNorm/BatchNorm/Dropout (inference) and
LSTMCell/GRUCell stacks unrolled by foreach, zero-step loops (``tests/test_hostile_export25.py``
exports them; ``hostile_programs25x_trees.py`` holds the recursion models).

The oracle is the hybridized block: export must equal it (onnxruntime and ``load``), on
every input list, or refuse at the user's line."""
import numpy as np
from mxnet.gluon import HybridBlock, nn, rnn

import gluon_cf

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats
H, V, K = 4, 5, 2


def ints(*values, dtype=np.int32):
    return np.array(values, dtype)


class _Decoder(HybridBlock):
    def __init__(self, cell="gru"):
        super().__init__()
        with self.name_scope():
            self.embed = nn.Embedding(V, H)
            self.cell = rnn.GRUCell(H, input_size=H) if cell == "gru" else \
                rnn.LSTMCell(H, input_size=H)
            self.proj = nn.Dense(V, in_units=H)

    def logits(self, F, tok, states):
        out, states = self.cell(self.embed(tok.astype("float32")), states)
        return self.proj(out), states


# ---- greedy decoders -----------------------------------------------------------------------------

@program([rand(1, H), floats(4)], [rand(1, H, seed=1) * 3, floats(0)],
         [rand(1, H, seed=2) * 2, floats(6)], [rand(1, H, seed=3) - 1, floats(1)])
class GreedyEosFlagInt64Tokens(_Decoder):
    """Greedy decoding until every step has produced EOS (token 0) or n steps (max 6): a
    float finished flag and int64 tokens in the state, the cond a product of two tests."""

    def hybrid_forward(self, F, h, n, **kw):
        def func(i, tok, h, done):
            logits, (h,) = self.logits(F, tok, [h])
            tok = F.argmax(logits, axis=-1).astype("int64")
            done = F.maximum(done, (tok == 0).astype("float32"))
            return [tok, F.max(F.log_softmax(logits), axis=-1)], [i + 1, tok, h, done]
        (toks, scores), (i, tok, h, done) = gluon_cf.while_loop(
            lambda i, tok, h, done: (i < n) * (1 - done), func,
            [F.zeros((1,)), F.ones((1,), dtype="int64"), h, F.zeros((1,))], max_iterations=6)
        return toks, scores, i, tok, h, done


@program([ints(3), rand(1, H), floats(3)], [ints(1), rand(1, H, seed=1), floats(0)],
         [ints(4), rand(1, H, seed=2) * 4, floats(5)])
class GreedyReturnsStepOutputsOnly(_Decoder):
    """A greedy LSTM decoder returning only its per-step logits (the loop's outputs, padded
    to max_iterations 5), none of its state."""

    def __init__(self):
        super().__init__("lstm")

    def hybrid_forward(self, F, tok, h, n, **kw):
        def func(i, tok, h, c):
            logits, (h, c) = self.logits(F, tok, [h, c])
            return [logits], [i + 1, F.argmax(logits, axis=-1).astype("int32"), h, c]
        (logits,), _ = gluon_cf.while_loop(lambda i, *_: i < n, func,
                                           [F.zeros((1,)), tok, h, F.zeros_like(h)],
                                           max_iterations=5)
        return logits


@program([rand(1, H), floats(2)], [rand(1, H, seed=1), floats(0)], [rand(1, H, seed=2),
                                                                    floats(7)])
class GreedyReturnsFinalStateOnly(_Decoder):
    """A greedy decoder returning only its final state and step count (n of 0 runs no step)."""

    def hybrid_forward(self, F, h, n, **kw):
        def func(i, tok, h):
            logits, (h,) = self.logits(F, tok, [h])
            return [], [i + 1, F.argmax(logits, axis=-1), h]
        _, (i, tok, h) = gluon_cf.while_loop(lambda i, tok, h: i < n, func,
                                             [F.zeros((1,)), F.ones((1,)), h], max_iterations=7)
        return h, i, tok


# ---- beam search ---------------------------------------------------------------------------------

class _Beam(_Decoder):
    def step(self, F, toks, hs, scores):
        logits, (h2,) = self.logits(F, toks, [hs])
        total = F.broadcast_add(F.log_softmax(logits), scores.reshape((-1, 1)))
        best, idx = F.topk(total.reshape((1, -1)), k=K, ret_typ="both")
        best, idx = best.reshape((-1,)), idx.reshape((-1,))
        parent = F.floor(idx / V)
        return idx - parent * V, parent, F.take(h2, parent), best

    def start(self, F, h0):
        return [F.ones((K,)), F.broadcast_axis(h0, axis=0, size=K),
                F.concat(F.zeros((1,)), F.ones((K - 1,)) * -1e4, dim=0)]


@program([rand(1, H), floats(3)], [rand(1, H, seed=1), floats(1)], [rand(1, H, seed=2) * 3,
                                                                    floats(4)])
class BeamSearchBackpointersThenBacktrack(_Beam):
    """Beam search (2 beams, n steps, max 4) collecting tokens and parents, then a foreach
    over the reversed steps following the best beam's back-pointers (an int32 state)."""

    def hybrid_forward(self, F, h0, n, **kw):
        def func(i, toks, hs, scores):
            toks, parent, hs, scores = self.step(F, toks, hs, scores)
            return [toks, parent.astype("int32")], [i + 1, toks, hs, scores]
        (toks, parents), (_, _, _, scores) = gluon_cf.while_loop(
            lambda i, *_: i < n, func, [F.zeros((1,))] + self.start(F, h0), max_iterations=4)

        def back(step, beam):
            tok, parent = step
            b = beam[0]
            return [F.take(tok, b)], [F.take(parent, b).astype("int32")]
        best = F.argmax(scores, axis=0).astype("int32").reshape((1,))
        (path,), (root,) = gluon_cf.foreach(back, [F.reverse(toks, axis=0),
                                                F.reverse(parents, axis=0)], [best])
        return F.reverse(path, axis=0), root, scores


@program([rand(1, H), floats(4), floats(0.6)], [rand(1, H, seed=1), floats(2), floats(1.0)],
         [rand(1, H, seed=2), floats(0), floats(0.0)])
class BeamSearchLengthPenaltyFinishedBeams(_Beam):
    """Beam search whose beams finish at EOS (their length stops growing); the final
    scores divided by GNMT's length penalty ((5 + len) / 6) ** alpha, alpha a run-time input."""

    def hybrid_forward(self, F, h0, n, alpha, **kw):
        def func(i, toks, hs, scores, lengths):
            alive = (toks != 0)
            toks, parent, hs, scores = self.step(F, toks, hs, scores)
            lengths = F.take(lengths + alive, parent)
            return [toks], [i + 1, toks, hs, scores, lengths]
        (toks,), (i, _, _, scores, lengths) = gluon_cf.while_loop(
            lambda i, *_: i < n, func, [F.zeros((1,))] + self.start(F, h0) + [F.zeros((K,))],
            max_iterations=4)
        penalty = F.broadcast_power((5 + lengths) / 6, alpha)
        return toks, scores / penalty, lengths, i


@program([rand(5, H), floats(3)], [rand(3, H, seed=1), floats(3)], [rand(6, H, seed=2),
                                                                    floats(0)],
         [rand(2, H, seed=3), floats(1)])
class PointerNetworkMasksPickedRows(HybridBlock):
    """A pointer network: n steps (max 3) each pick the best-scoring row of the memory not
    picked before (a (T,) mask in the state, T run-time), the picked row the next query."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.query = nn.Dense(H, in_units=H)

    def hybrid_forward(self, F, mem, n):
        def func(i, q, used):
            scores = F.dot(mem, self.query(q).reshape((-1,))) - used * 1e4
            pick = F.argmax(scores, axis=0)
            used = F.maximum(used, F.broadcast_equal(F.contrib.arange_like(used), pick))
            return [pick.astype("int32"), F.max(F.softmax(scores))], \
                [i + 1, F.take(mem, pick), used]
        (picks, probs), (_, q, used) = gluon_cf.while_loop(
            lambda i, q, used: i < n, func,
            [F.zeros((1,)), F.mean(mem, axis=0, keepdims=True), F.zeros_like(F.sum(mem, 1))],
            max_iterations=3)
        return picks, probs, used, q


@program([rand(1, H), floats(3)], [rand(1, H, seed=1), floats(0)], [rand(1, H, seed=2),
                                                                    floats(5)])
class GreedyWritesTokensIntoBufferByIndexCopy(_Decoder):
    """A greedy decoder writing step i's token into row i of a (5, 1) buffer of -1s with
    index_copy (the loop's state), n steps (max 5); the buffer and the step count returned."""

    def hybrid_forward(self, F, h, n, **kw):
        def func(i, tok, h, buf):
            logits, (h,) = self.logits(F, tok, [h])
            tok = F.argmax(logits, axis=-1)
            buf = F.contrib.index_copy(buf, i.astype("int64"), tok.reshape((1, 1)))
            return [], [i + 1, tok, h, buf]
        _, (i, _, _, buf) = gluon_cf.while_loop(
            lambda i, *_: i < n, func, [F.zeros((1,)), F.ones((1,)), h, F.ones((5, 1)) * -1],
            max_iterations=5)
        return buf, i


@program([rand(1, H), floats(2)], [rand(1, H, seed=1), floats(0)], [rand(1, H, seed=2) * 3,
                                                                    floats(5)])
class GreedyOutputsCutToStepsByBooleanMask(_Decoder):
    """A greedy decoder's per-step logits (padded to max_iterations 5) cut to the steps run
    by a boolean_mask of arange_like < i: a result of run-time rows, none for n = 0."""

    def hybrid_forward(self, F, h, n, **kw):
        def func(i, tok, h):
            logits, (h,) = self.logits(F, tok, [h])
            return [logits], [i + 1, F.argmax(logits, axis=-1), h]
        (logits,), (i, _, h) = gluon_cf.while_loop(
            lambda i, *_: i < n, func, [F.zeros((1,)), F.ones((1,)), h], max_iterations=5)
        keep = F.broadcast_lesser(F.contrib.arange_like(logits, axis=0), i)
        return F.contrib.boolean_mask(logits.reshape((-3, -2)), keep), h


# ---- attention decoders over memory of run-time length ------------------------------------------

class _Attend(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.GRUCell(H, input_size=2 * H)
            self.key = nn.Dense(H, in_units=H, flatten=False)


@program([rand(4, 2, H), floats(2, 4), floats(3)], [rand(2, 2, H, seed=1), floats(1, 2),
                                                    floats(2)],
         [rand(6, 2, H, seed=2), floats(6, 1), floats(0)], [rand(1, 2, H, seed=3), floats(1, 1),
                                                           floats(1)])
class AttentionDecoderSequenceMaskOnScores(_Attend):
    """Batched (2) attention decoder over (T, 2, H) memory: the (T, 2) scores masked past each
    row's valid length by SequenceMask(value=-1e9), softmax over time; n steps (max 3)."""

    def hybrid_forward(self, F, mem, valid, n):
        keys = self.key(mem)

        def func(i, h):
            scores = F.sum(F.broadcast_mul(keys, h.expand_dims(0)), axis=2)
            scores = F.SequenceMask(scores, valid, use_sequence_length=True, value=-1e9)
            w = F.softmax(scores, axis=0).expand_dims(2)
            ctx = F.sum(F.broadcast_mul(w, mem), axis=0)
            out, (h,) = self.cell(F.concat(ctx, h, dim=1), [h])
            return [out, w.reshape((0, 0))], [i + 1, h]
        (outs, ws), (_, h) = gluon_cf.while_loop(
            lambda i, h: i < n, func, [F.zeros((1,)), F.sum(mem, axis=0)], max_iterations=3)
        return outs, ws, h


@program([rand(5, H), floats(3), rand(3, H, seed=9)], [rand(2, H, seed=1), floats(2),
                                                       rand(4, H, seed=8)],
         [rand(7, H, seed=2), floats(1), rand(1, H, seed=7)])
class TeacherForcedAttentionSoftmaxLength(_Attend):
    """Teacher forcing: a foreach over target rows (run-time count) attends over memory rows
    (another run-time count) with softmax(length=valid), the GRU state (1, H)."""

    def hybrid_forward(self, F, mem, valid, targets):
        keys = self.key(mem)

        def func(y, states):
            h = states[0]
            scores = F.dot(h, keys, transpose_b=True)
            w = F.softmax(scores, length=valid.astype("int32"), use_length=True, axis=1)
            out, (h,) = self.cell(F.concat(F.dot(w, mem), y.reshape((1, -1)) + h, dim=1), [h])
            return out, [h]
        outs, (h,) = gluon_cf.foreach(func, targets, [F.zeros((1, H))])
        return outs, h


@program([rand(4, H), floats(3)], [rand(7, H, seed=1), floats(2)], [rand(1, H, seed=2),
                                                                    floats(2)],
         [rand(3, H, seed=3), floats(0)])
class CoverageAttentionStateOfMemoryLength(_Attend):
    """Attention with coverage: the loop state holds the (T,) sum of earlier attention
    weights (T the memory's run-time length), subtracted from the next scores."""

    def hybrid_forward(self, F, mem, n):
        keys = self.key(mem)

        def func(i, h, cover):
            w = F.softmax(F.dot(keys, h.reshape((-1,))) - cover)
            ctx = F.dot(w.reshape((1, -1)), mem)
            out, (h,) = self.cell(F.concat(ctx, h, dim=1), [h])
            return [F.max(w)], [i + 1, h, cover + w]
        (peaks,), (_, h, cover) = gluon_cf.while_loop(
            lambda i, h, cover: i < n, func,
            [F.zeros((1,)), F.mean(mem, axis=0, keepdims=True), F.zeros_like(F.sum(mem, 1))],
            max_iterations=4)
        return peaks, h, cover


@program([rand(5, H), floats(1, 0, 1, 1, 0), floats(2)],
         [rand(3, H, seed=1), floats(1, 1, 1), floats(3)],
         [rand(4, H, seed=2), floats(0, 0, 1, 0), floats(1)])
class BooleanMaskMemoryThenWhileAttention(_Attend):
    """Memory rows kept by a boolean mask (a run-time count), attended over by a while_loop
    decoder of n steps (max 3) that stops early when its attention is peaked (a tensor stop)."""

    def hybrid_forward(self, F, x, mask, n):
        mem = F.contrib.boolean_mask(x, mask)
        keys = self.key(mem)

        def func(i, h, peak):
            w = F.softmax(F.dot(keys, h.reshape((-1,))) * 3)
            out, (h,) = self.cell(F.concat(F.dot(w.reshape((1, -1)), mem), h, dim=1), [h])
            return [out], [i + 1, h, F.max(w).reshape((1,))]
        (outs,), (i, h, peak) = gluon_cf.while_loop(
            lambda i, h, peak: (i < n) * (peak < 0.95), func,
            [F.zeros((1,)), F.ones((1, H)), F.zeros((1,))], max_iterations=3)
        return outs, h, i


@program([rand(4, H)], [rand(2, H, seed=1)], [rand(7, H, seed=2)])
class CausalSelfAttentionByArangeInForeach(HybridBlock):
    """Causal self-attention written as a loop: a foreach over (row, position) pairs, each
    step attending over the rows up to its position (arange_like, where -1e9), its state a
    step count."""

    def hybrid_forward(self, F, x):
        pos = F.contrib.arange_like(x, axis=0)

        def func(step, states):
            row, p = step
            scores = F.dot(x, row)
            keep = F.broadcast_lesser_equal(pos, p)
            w = F.softmax(F.where(keep, scores, F.ones_like(scores) * -1e9))
            return [F.dot(w, x)], [states[0] + 1]
        (outs,), (k,) = gluon_cf.foreach(func, [x, pos], [F.zeros((1,))])
        return outs, k


# ---- foreach with states of several shapes and dtypes -----------------------------------------

@program([rand(5, H)], [rand(1, H, seed=1)], [rand(8, H, seed=2)])
class ForeachStatesOfFiveShapes(HybridBlock):
    """One foreach carrying (1, H), (H,), (2, H), a (1,) float count and a (1,) int32 count;
    outputs a row and a scalar per step."""

    def hybrid_forward(self, F, x):
        def func(row, states):
            a, b, c, k, m = states
            a = F.tanh(a + row.reshape((1, -1)))
            b = F.maximum(b, row)
            c = F.concat(c.slice_axis(axis=0, begin=1, end=2), row.reshape((1, -1)), dim=0)
            return [F.broadcast_mul(a, k), F.sum(row)], [a, b, c, k + 1, m + (F.sum(row) > 0).astype("int32")]
        (rows, sums), states = gluon_cf.foreach(
            func, x, [F.zeros((1, H)), F.ones((H,)) * -9, F.zeros((2, H)), F.ones((1,)),
                      F.zeros((1,), dtype="int32")])
        return [rows, sums] + list(states)


@program([rand(4, H)], [rand(2, H, seed=1)], [rand(6, H, seed=2)])
class ForeachOuterProductAccumulatorStateOnly(HybridBlock):
    """A fast-weights memory: the (H, H) state accumulates decayed outer products of the rows;
    only the states are returned (the foreach has no outputs)."""

    def hybrid_forward(self, F, x):
        def func(row, states):
            m, r = states
            r = F.dot(m, row) + row
            return [], [m * 0.9 + F.dot(row.reshape((-1, 1)), row.reshape((1, -1))), r]
        _, (m, r) = gluon_cf.foreach(func, x, [F.zeros((H, H)), F.zeros((H,))])
        return m, r


@program([rand(6, 2)], [rand(1, 2, seed=1)], [rand(3, 2, seed=2)])
class ForeachCumulativeOutputsOnly(HybridBlock):
    """A cumulative sum and running max by foreach, returning only the per-step outputs."""

    def hybrid_forward(self, F, x):
        def func(row, states):
            s, m = states
            s, m = s + row, F.maximum(m, row)
            return [s, m], [s, m]
        (sums, maxes), _ = gluon_cf.foreach(func, x, [F.zeros((2,)), F.ones((2,)) * -5])
        return sums, maxes


@program([rand(5, H), floats(1, 0, 1, 1, 0)], [rand(3, H, seed=1), floats(0, 1, 0)],
         [rand(4, H, seed=2), floats(1, 1, 1, 1)])
class ForeachOverMaskedRowsTwoStateShapes(HybridBlock):
    """A foreach over the rows a mask keeps (a run-time count), carrying a (1, H) state and an
    (H, 2) state through a Dense."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(H, in_units=H)

    def hybrid_forward(self, F, x, mask):
        def func(row, states):
            h, p = states
            h = F.tanh(self.fc(row.reshape((1, -1))) + h)
            p = F.concat(p.slice_axis(axis=1, begin=1, end=2), h.reshape((-1, 1)), dim=1)
            return h, [h, p]
        outs, (h, p) = gluon_cf.foreach(func, F.contrib.boolean_mask(x, mask),
                                        [F.zeros((1, H)), F.zeros((H, 2))])
        return outs, h, p


# ---- dynamic programming ----------------------------------------------------------------------

@program([rand(5, 3)], [rand(2, 3, seed=1)], [rand(7, 3, seed=2) * 3])
class ViterbiBackpointersThenBacktrack(HybridBlock):
    """Viterbi over (T, S) emissions with a learned (S, S) transition: a foreach of max-plus
    steps emitting int32 back-pointers, then a reversed foreach backtracking the best path."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.trans = self.params.get("trans", shape=(3, 3))

    def hybrid_forward(self, F, emit, trans):
        first = F.slice_axis(emit, axis=0, begin=0, end=1).reshape((-1,))
        rest = F.slice_axis(emit, axis=0, begin=1, end=None)

        def forward(e, states):
            total = F.broadcast_add(states[0].reshape((-1, 1)), trans)
            return [F.argmax(total, axis=0).astype("int32")], [F.max(total, axis=0) + e]
        # (a one-row emission runs no step: the foreach is guarded by a cond)
        count = F.shape_array(emit).slice_axis(axis=0, begin=0, end=1)

        def run():
            (bps,), (score,) = gluon_cf.foreach(forward, rest, [first])
            best = F.argmax(score, axis=0).astype("int32").reshape((1,))
            (path,), _ = gluon_cf.foreach(
                lambda bp, s: ([s[0]], [F.take(bp, s[0])]), F.reverse(bps, axis=0), [best])
            return F.max(score).reshape((1,)), F.sum(path.astype("float32")).reshape((1,))
        return gluon_cf.cond(count > 1, run,
                             lambda: (F.max(first).reshape((1,)), F.zeros((1,))))


@program([rand(6, 4)], [rand(2, 4, seed=1)], [rand(9, 4, seed=2)])
class CtcStyleForwardLogSumExp(HybridBlock):
    """A CTC-style forward pass: alpha (S,) updated by log-sum-exp of staying and advancing
    (a shift by concat), over (T, S) log-probabilities of run-time T; outputs alpha per step."""

    def hybrid_forward(self, F, logits):
        logp = F.log_softmax(logits, axis=1)

        def func(lp, states):
            a = states[0]
            shifted = F.concat(F.ones((1,)) * -1e4, a.slice_axis(axis=0, begin=0, end=-1), dim=0)
            m = F.maximum(a, shifted)
            a = m + F.log(F.exp(a - m) + F.exp(shifted - m)) + lp
            return a, [a]
        alphas, (a,) = gluon_cf.foreach(
            func, logp, [F.concat(F.zeros((1,)), F.ones((3,)) * -1e4, dim=0)])
        return alphas, a
