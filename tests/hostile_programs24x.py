"""Issue 24 items 2, 4-6, session 24: models people export, in styles the earlier rounds did
not write: encoders with valid lengths (SequenceMask, SequenceReverse, softmax by length),
universal-transformer layers in a while_loop, decoders with int32 tokens, finished beams and
score thresholds, boolean_mask feeding loops and reductions, foreach over data whose length is
a run-time value, conds whose branches return other shapes followed by more ops, recursion over
spans whose split the model decides, TreeLSTMs returning (h, c), nested loops of run-time
counts, int32/float16/float64 values and parameters shared between loop bodies
(``tests/test_hostile_export24.py`` runs them).

The oracle is each program's ``plain_forward``: plain Python on NDArrays (loops, masks and
indices read on the host) computing the same step functions."""
import mxnet as mx
import numpy as np
from mxnet.gluon import HybridBlock, nn, rnn

import gluon_cf

import hostile_harness
from hostile_programs4 import _ids, _row
from hostile_programs14 import _rows_of, _scalar
from hostile_programs17b import BAL, _plain_tree, comb, forest
from hostile_programs23x import csr

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats
H, V = 4, 5


def _n(v):
    return int(round(_scalar(v)))


def _stack_padded(F, rows, steps, shape):
    """``rows`` stacked, padded with zeros of ``shape`` to ``steps`` (a while_loop's outputs)."""
    return F.stack(*(rows + [F.zeros(shape)] * (steps - len(rows))))


def _lengths_mask(np_lengths, steps):
    """(steps, len(np_lengths)) float mask: row t of column b is t < length b."""
    return mx.nd.array((np.arange(steps)[:, None] < np.asarray(np_lengths)[None, :])
                       .astype(np.float32))


class _Gru(HybridBlock):
    def __init__(self, extra=()):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.GRUCell(H, input_size=H)
            self.fc = nn.Dense(H, in_units=H)
            for name, block in extra:
                setattr(self, name, block)


# ---- encoders with valid lengths -----------------------------------------------------------------

@program([rand(4, 3, H), floats(4, 1, 2)], [rand(2, 3, H, seed=1), floats(2, 2, 2)],
         [rand(6, 3, H, seed=2), floats(0, 6, 3)], [rand(1, 3, H, seed=3), floats(1, 0, 1)])
class GruEncoderSequenceMaskMeanAndLast(_Gru):
    """A GRU encoder (foreach over time, batch 3) with per-row valid lengths: the outputs
    masked by SequenceMask, mean-pooled over the valid steps, and SequenceLast's state."""

    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, valid, **kw):
        outs, _ = gluon_cf.foreach(lambda a, s: self.cell(a, s), x,
                                   [F.zeros_like(F.sum(x, axis=0))])
        masked = F.SequenceMask(outs, valid, use_sequence_length=True)
        mean = F.broadcast_div(F.sum(masked, axis=0), F.maximum(valid, 1).reshape((-1, 1)))
        last = F.SequenceLast(outs, F.maximum(valid, 1), use_sequence_length=True)
        return mean, self.fc(last)

    def plain_forward(self, F, x, valid, **kw):
        h, outs = F.zeros((3, H)), []
        for t in range(x.shape[0]):
            out, (h,) = self.cell(x[t], [h])
            outs.append(out)
        lengths = _ids(valid)
        mask = _lengths_mask(lengths, x.shape[0]).expand_dims(2)
        mean = F.sum(F.stack(*outs) * mask, axis=0) / \
            F.array([[max(v, 1)] for v in lengths])
        last = F.concat(*[outs[max(v, 1) - 1][b:b + 1] for b, v in enumerate(lengths)], dim=0)
        return mean, self.fc(last)


@program([rand(5, H), floats(3)], [rand(3, H, seed=1), floats(1)], [rand(6, H, seed=2),
                                                                    floats(6)])
class MaskedSelfAttentionThenForeachCell(_Gru):
    """Self-attention over (T, H) with the keys past a run-time valid length masked to -1e9
    (arange_like, where), then a foreach GRU over the attended rows."""

    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, valid, **kw):
        scores = F.dot(x, x, transpose_b=True) * 0.5
        keep = F.broadcast_lesser(F.contrib.arange_like(scores, axis=1), valid)
        keep = F.broadcast_like(keep.reshape((1, -1)), scores)
        att = F.dot(F.softmax(F.where(keep, scores, F.ones_like(scores) * -1e9)), x)
        outs, (h,) = gluon_cf.foreach(lambda a, s: self.cell(a.reshape((1, -1)), s), att,
                                      [F.zeros((1, H))])
        return outs, h

    def plain_forward(self, F, x, valid, **kw):
        scores = F.dot(x, x, transpose_b=True) * 0.5
        keep = F.array(np.arange(x.shape[0]) < _n(valid)).reshape((1, -1))
        att = F.dot(F.softmax(scores * keep + (1 - keep) * -1e9), x)
        h, outs = F.zeros((1, H)), []
        for t in range(x.shape[0]):
            out, (h,) = self.cell(att[t:t + 1], [h])
            outs.append(out)
        return F.stack(*outs), h


@program([rand(5, H), floats(3), floats(2)], [rand(3, H, seed=1), floats(3), floats(0)],
         [rand(4, H, seed=2), floats(1), floats(4)])
class UniversalTransformerLayersInWhile(_Gru):
    """A universal transformer: one layer (softmax(QK^T, length) attention, residual, shared
    Dense) applied n times in a while_loop, n a run-time input (max 4)."""

    NO_GRAD = (1, 2)

    def layer(self, F, x, lengths):
        att = F.softmax(F.dot(x, x, transpose_b=True), length=lengths, use_length=True)
        return F.tanh(self.fc(F.dot(att, x))) + x

    def _lengths(self, F, x, valid):
        return F.broadcast_like(valid, F.sum(x, axis=1)).astype("int32")

    def hybrid_forward(self, F, x, valid, n, **kw):
        lengths = self._lengths(F, x, valid)
        _, (i, y) = gluon_cf.while_loop(
            lambda i, y: i < n, lambda i, y: ([], [i + 1, self.layer(F, y, lengths)]),
            [F.zeros((1,)), x], max_iterations=4)
        return y, i

    def plain_forward(self, F, x, valid, n, **kw):
        lengths, i = self._lengths(F, x, valid), 0
        while i < min(_n(n), 4):
            x, i = self.layer(F, x, lengths), i + 1
        return x, F.array([i])


@program([rand(4, 1, H), floats(3)], [rand(2, 1, H, seed=1), floats(2)],
         [rand(5, 1, H, seed=2), floats(1)])
class BidirectionalSharedCellSequenceReverse(_Gru):
    """A bidirectional encoder sharing one GRU cell between its two foreach bodies: the
    backward pass reads SequenceReverse(x, valid) and its outputs are reversed back."""

    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, valid, **kw):
        def run(seq):
            return gluon_cf.foreach(lambda a, s: self.cell(a, s), seq, [F.zeros((1, H))])[0]
        fwd = run(x)
        bwd = F.SequenceReverse(run(F.SequenceReverse(x, valid, use_sequence_length=True)),
                                valid, use_sequence_length=True)
        mask = F.SequenceMask(F.ones_like(fwd), valid, use_sequence_length=True)
        return self.fc(((fwd + bwd) * mask).reshape((-1, H)))

    def plain_forward(self, F, x, valid, **kw):
        n, steps = _n(valid), x.shape[0]
        order = list(range(n))[::-1] + list(range(n, steps))

        def run(seq):
            h, outs = F.zeros((1, H)), []
            for t in range(steps):
                out, (h,) = self.cell(seq[t], [h])
                outs.append(out)
            return outs
        fwd = run(x)
        back = run(F.stack(*[x[k] for k in order]))
        bwd = [back[order.index(t)] for t in range(steps)]
        rows = [(fwd[t] + bwd[t]) * (1 if t < n else 0) for t in range(steps)]
        return self.fc(F.concat(*rows, dim=0))


# ---- decoders -----------------------------------------------------------------------------------

class _Decoder(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = nn.Embedding(V, H)
            self.cell = rnn.GRUCell(H, input_size=H)
            self.proj = nn.Dense(V, in_units=H)

    def greedy(self, F, t, h):
        out, (h,) = self.cell(self.embed(t.astype("float32")), [h])
        score = F.log_softmax(self.proj(out))
        return F.argmax(score, axis=-1).astype("int32"), h, F.max(score, axis=-1)


@program([np.array([2], np.int32), rand(1, H), floats(4)],
         [np.array([0], np.int32), rand(1, H, seed=1), floats(0)],
         [np.array([4], np.int32), rand(1, H, seed=2) * 3, floats(6)])
class GreedyDecoderInt32Tokens(_Decoder):
    """A greedy decoder whose tokens are int32 loop variables (cast for the embedding, the
    argmax cast back), n steps of a run-time n (max 5); int32 tokens and scores collected."""

    NO_GRAD = (0, 2)

    def hybrid_forward(self, F, token, h, n, **kw):
        def func(i, t, h):
            t, h, s = self.greedy(F, t, h)
            return [t, s], [i + 1, t, h]
        (toks, scores), (i, t, h) = gluon_cf.while_loop(
            lambda i, t, h: i < n, func, [F.zeros((1,)), token, h], max_iterations=5)
        return toks, scores, t, h

    def plain_forward(self, F, token, h, n, **kw):
        toks, scores, t = [], [], token
        for _ in range(min(_n(n), 5)):
            t, h, s = self.greedy(F, t, h)
            toks.append(t)
            scores.append(s)
        return (_stack_padded(F, [v.astype("float32") for v in toks], 5, (1,)).astype("int32"),
                _stack_padded(F, scores, 5, (1,)), t, h)


@program([rand(1, H), floats(4)], [rand(1, H, seed=5), floats(1)], [rand(1, H, seed=7) * 2,
                                                                    floats(3)])
class BeamSearchThreeBeamsFinishedFlags(_Decoder):
    """Beam search with 3 beams: a finished beam (last token 0) only extends by token 0 at no
    cost; top 3 of 3*V; states, tokens and finished flags gathered by take (n steps, max 4)."""

    NO_GRAD = (1,)

    def step(self, F, toks, hs, scores):
        out, (h2,) = self.cell(self.embed(toks), [hs])
        logp = F.log_softmax(self.proj(out))
        done = (toks == 0).reshape((-1, 1))
        frozen = F.concat(F.zeros((3, 1)), F.ones((3, V - 1)) * -1e4, dim=1)
        total = F.broadcast_add(F.where(F.broadcast_like(done, logp), frozen, logp),
                                scores.reshape((-1, 1)))
        best, idx = F.topk(total.reshape((1, -1)), k=3, ret_typ="both")
        best, idx = best.reshape((-1,)), idx.reshape((-1,))
        beam = F.floor(idx / V)
        return idx - beam * V, F.take(h2, beam), best

    def hybrid_forward(self, F, h0, n, **kw):
        def func(i, toks, hs, scores):
            toks, hs, scores = self.step(F, toks, hs, scores)
            return [toks], [i + 1, toks, hs, scores]
        (toks,), (_, _, hs, scores) = gluon_cf.while_loop(
            lambda i, *_: i < n, func,
            [F.zeros((1,)), F.ones((3,)), F.broadcast_axis(h0, axis=0, size=3),
             F.concat(F.zeros((1,)), F.ones((2,)) * -1e4, dim=0)], max_iterations=4)
        return toks, hs, scores

    def plain_forward(self, F, h0, n, **kw):
        toks, hs = F.ones((3,)), F.broadcast_axis(h0, axis=0, size=3)
        scores, out = F.array([0, -1e4, -1e4]), []
        for _ in range(min(_n(n), 4)):
            toks, hs, scores = self.step(F, toks, hs, scores)
            out.append(toks)
        return _stack_padded(F, out, 4, (3,)), hs, scores


@program([rand(1, H), floats(-3)], [rand(1, H, seed=1), floats(0)], [rand(1, H, seed=2) * 2,
                                                                     floats(-100)])
class DecoderStopsOnCumulativeScore(_Decoder):
    """Sampling-free decoding until the cumulative log-probability falls below a run-time
    threshold (max 6 steps): the while_loop's cond reads a loop variable the body computes."""

    NO_GRAD = (1,)

    def hybrid_forward(self, F, h, threshold, **kw):
        def func(t, h, total):
            t, h, s = self.greedy(F, t, h)
            return [s], [t, h, total + s]
        (scores,), (t, h, total) = gluon_cf.while_loop(
            lambda t, h, total: total > threshold, func,
            [F.ones((1,), dtype="int32"), h, F.zeros((1,))], max_iterations=6)
        return scores, h, total

    def plain_forward(self, F, h, threshold, **kw):
        t, total, scores = F.ones((1,), dtype="int32"), F.zeros((1,)), []
        while len(scores) < 6 and _scalar(total) > _scalar(threshold):
            t, h, s = self.greedy(F, t, h)
            total = total + s
            scores.append(s)
        return _stack_padded(F, scores, 6, (1,)), h, total


@program([rand(3, 1, H), floats(2), floats(3)], [rand(5, 1, H, seed=1), floats(5), floats(1)],
         [rand(2, 1, H, seed=2), floats(1), floats(0)])
class AttentionDecoderOverMaskedEncoderRows(HybridBlock):
    """An encoder foreach, its rows past a run-time valid length dropped by boolean_mask, then
    a while_loop decoder of n steps (max 3) attending over the kept rows (a value of run-time
    shape read by the loop body)."""

    NO_GRAD = (1, 2)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.enc = rnn.GRUCell(H, input_size=H)
            self.dec = rnn.GRUCell(H, input_size=H)

    def attend(self, F, mem, h):
        w = F.softmax(F.dot(mem, h.reshape((-1,))))
        out, (h,) = self.dec(F.dot(w.reshape((1, -1)), mem), [h])
        return out, h

    def hybrid_forward(self, F, src, valid, n):
        mem, (h,) = gluon_cf.foreach(lambda x, s: self.enc(x, s), src, [F.zeros((1, H))])
        mem = mem.reshape((-3, -2))
        mem = F.contrib.boolean_mask(
            mem, F.broadcast_lesser(F.contrib.arange_like(mem, axis=0), valid))

        def func(i, h):
            out, h = self.attend(F, mem, h)
            return [out], [i + 1, h]
        (outs,), (_, h) = gluon_cf.while_loop(lambda i, h: i < n, func, [F.zeros((1,)), h],
                                              max_iterations=3)
        return outs, h

    def plain_forward(self, F, src, valid, n):
        h, mem = F.zeros((1, H)), []
        for k in range(src.shape[0]):
            out, (h,) = self.enc(src[k], [h])
            mem.append(out)
        mem = F.concat(*mem[:_n(valid)], dim=0)
        outs = []
        for _ in range(min(_n(n), 3)):
            out, h = self.attend(F, mem, h)
            outs.append(out)
        return _stack_padded(F, outs, 3, (1, H)), h


@program([rand(1, H), floats(3)], [rand(1, H, seed=1), floats(0)], [rand(1, H, seed=2),
                                                                    floats(5)])
class StackedTwoLayerGruDecoderInWhile(_Decoder):
    """A two-layer GRU decoder (the second layer its own cell, the embedding shared with the
    output projection's input side) stepping n times; logits collected."""

    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell2 = rnn.GRUCell(H, input_size=H)

    def step(self, F, t, h1, h2):
        o1, (h1,) = self.cell(self.embed(t), [h1])
        o2, (h2,) = self.cell2(o1, [h2])
        logits = self.proj(o2 + o1)
        return logits, F.argmax(logits, axis=-1), h1, h2

    def hybrid_forward(self, F, h, n, **kw):
        def func(i, t, h1, h2):
            logits, t, h1, h2 = self.step(F, t, h1, h2)
            return [logits], [i + 1, t, h1, h2]
        (logits,), (_, t, h1, h2) = gluon_cf.while_loop(
            lambda i, *_: i < n, func, [F.zeros((1,)), F.ones((1,)), h, h * 0.5],
            max_iterations=4)
        return logits, h1, h2

    def plain_forward(self, F, h, n, **kw):
        t, h1, h2, out = F.ones((1,)), h, h * 0.5, []
        for _ in range(min(_n(n), 4)):
            logits, t, h1, h2 = self.step(F, t, h1, h2)
            out.append(logits)
        return _stack_padded(F, out, 4, (1, V)), h1, h2


# ---- boolean_mask feeding loops and reductions --------------------------------------------------

MASKED = ([rand(5, H), floats(1, 0, 1, 1, 0)], [rand(3, H, seed=1), floats(0, 0, 0)],
          [rand(4, H, seed=2), floats(1, 1, 1, 1)], [rand(1, H, seed=3), floats(1)])


@program(*MASKED)
class BooleanMaskRowsThenForeachCellState(_Gru):
    """The rows a mask keeps, run through a foreach GRU (no step when the mask keeps none):
    the final state and the number kept."""

    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, mask, **kw):
        kept = F.contrib.boolean_mask(x, mask)
        _, (h,) = gluon_cf.foreach(lambda a, s: self.cell(a.reshape((1, -1)), s), kept,
                                   [F.ones((1, H)) * 0.1])
        return self.fc(h), F.sum(mask)

    def plain_forward(self, F, x, mask, **kw):
        h = F.ones((1, H)) * 0.1
        for k, m in enumerate(_ids(mask)):
            if m:
                _, (h,) = self.cell(x[k:k + 1], [h])
        return self.fc(h), F.sum(mask)


@program(*MASKED)
class BooleanMaskCountDrivesWhileMax(HybridBlock):
    """A running max over the kept rows in a while_loop whose count is the mask's sum (max 5
    steps; no step for an empty mask), each row taken from the masked value by index."""

    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, mask):
        kept = F.contrib.boolean_mask(x, mask)

        def func(i, best):
            return [], [i + 1, F.maximum(best, F.take(kept, i))]
        _, (i, best) = gluon_cf.while_loop(lambda i, b: i < F.sum(mask), func,
                                           [F.zeros((1,)), F.ones((1, H)) * -2],
                                           max_iterations=5)
        return best * 2, i

    def plain_forward(self, F, x, mask):
        best, i = F.ones((1, H)) * -2, 0
        for k, m in enumerate(_ids(mask)):
            if m:
                best, i = F.maximum(best, x[k:k + 1]), i + 1
        return best * 2, F.array([i])


@program(*MASKED)
class BooleanMaskReductionsGuardedByCond(HybridBlock):
    """Mean, max and L2 norm of the kept rows, in a cond on the number kept (zeros when the
    mask keeps none), then a tanh layer over them."""

    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(H, in_units=3 * H)

    def stats(self, F, kept):
        return F.concat(F.mean(kept, axis=0, keepdims=True), F.max(kept, axis=0, keepdims=True),
                        F.sqrt(F.sum(kept * kept, axis=0, keepdims=True) + 1e-6), dim=1)

    def hybrid_forward(self, F, x, mask):
        kept = F.contrib.boolean_mask(x, mask)
        pooled = gluon_cf.cond(F.sum(mask) > 0, lambda: self.stats(F, kept),
                               lambda: F.zeros((1, 3 * H)))
        return F.tanh(self.fc(pooled))

    def plain_forward(self, F, x, mask):
        rows = [x[k:k + 1] for k, m in enumerate(_ids(mask)) if m]
        pooled = self.stats(F, F.concat(*rows, dim=0)) if rows else F.zeros((1, 3 * H))
        return F.tanh(self.fc(pooled))


@program([rand(5, H), rand(5, H, seed=9), floats(1, 0, 1, 1, 0)],
         [rand(3, H, seed=1), rand(3, H, seed=8), floats(0, 0, 0)],
         [rand(4, H, seed=2), rand(4, H, seed=7), floats(0, 1, 0, 1)])
class BooleanMaskIndicesThenForeachTakeTwo(HybridBlock):
    """The indices a mask keeps (boolean_mask of arange_like), a foreach over them taking a
    row of each of two inputs and combining them with a shared Dense."""

    NO_GRAD = (2,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(H, in_units=H)

    def hybrid_forward(self, F, x, y, mask):
        idx = F.contrib.boolean_mask(F.contrib.arange_like(x, axis=0), mask)
        outs, (s,) = gluon_cf.foreach(
            lambda i, st: ([], [F.tanh(self.fc(F.take(x, i)) + self.fc(F.take(y, i)) * st[0])]),
            idx, [F.ones((1, H))])
        return s

    def plain_forward(self, F, x, y, mask):
        s = F.ones((1, H))
        for k, m in enumerate(_ids(mask)):
            if m:
                s = F.tanh(self.fc(x[k:k + 1]) + self.fc(y[k:k + 1]) * s)
        return s


@program([rand(6, 2), floats(2), floats(-0.6)], [rand(6, 2, seed=1), floats(0), floats(3)],
         [rand(4, 2, seed=2), floats(3), floats(-1.5)], [rand(3, 2, seed=3), floats(3), floats(2)])
class WhileBodyBooleanMaskThenForeach(HybridBlock):
    """A while_loop of n steps (max 3) whose body keeps the rows with x[:, 0] above a level
    that rises each step and runs a foreach summing them (MXNet's foreach refuses a step that
    keeps none: the last input)."""

    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, x, n, bias):
        col = F.slice_axis(x, axis=1, begin=0, end=1).reshape((-1,))

        def func(i, acc):
            kept = F.contrib.boolean_mask(x, F.broadcast_greater(col, i * 0.6 - 0.5 + bias))
            _, (s,) = gluon_cf.foreach(lambda r, st: ([], [st[0] + r * r]), kept,
                                       [F.zeros((2,))])
            return [], [i + 1, acc * 0.5 + s]
        _, (i, acc) = gluon_cf.while_loop(lambda i, a: i < n, func,
                                          [F.zeros((1,)), F.zeros((2,))], max_iterations=3)
        return acc, i

    def plain_forward(self, F, x, n, bias):
        acc, rows = F.zeros((2,)), x.asnumpy()[:, 0]
        for i in range(min(_n(n), 3)):
            s = F.zeros((2,))
            for k in range(x.shape[0]):
                if rows[k] > np.float32(i * 0.6 - 0.5) + _scalar(bias):
                    s = s + x[k] * x[k]
            acc = acc * 0.5 + s
        return acc, F.array([min(_n(n), 3)])


# ---- foreach over data of run-time length -------------------------------------------------------

@program([rand(5, H), floats(3)], [rand(5, H, seed=1), floats(0)], [rand(4, H, seed=2), floats(4)],
         [rand(2, H, seed=3), floats(1)])
class ForeachOverFirstNRowsThenReversed(_Gru):
    """The first n rows (n a run-time input; boolean_mask of arange_like < n) run forward
    through a foreach GRU, then the outputs reversed through a second foreach."""

    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n, **kw):
        head = F.contrib.boolean_mask(x, F.broadcast_lesser(F.contrib.arange_like(x, axis=0),
                                                            n))
        outs, (h,) = gluon_cf.foreach(lambda a, s: self.cell(a.reshape((1, -1)), s), head,
                                      [F.zeros((1, H))])
        _, (g,) = gluon_cf.foreach(lambda a, s: ([], [F.tanh(self.fc(a) + s[0])]),
                                   F.reverse(outs, axis=0), [h])
        return g

    def plain_forward(self, F, x, n, **kw):
        h, outs = F.zeros((1, H)), []
        for k in range(min(_n(n), x.shape[0])):
            out, (h,) = self.cell(x[k:k + 1], [h])
            outs.append(out)
        g = h
        for out in outs[::-1]:
            g = F.tanh(self.fc(out) + g)
        return g


@program([rand(8)], [rand(2, seed=1)], [rand(12, seed=2)])
class ForeachOverPairsOfFlatData(HybridBlock):
    """Flat data reshaped into pairs (a length known only from the input's shape), a 2x2
    linear recurrence with a learned matrix in a foreach; the outputs' running max."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.w = self.params.get("w", shape=(2, 2))

    def hybrid_forward(self, F, x, w):
        outs, (s,) = gluon_cf.foreach(
            lambda p, st: (F.maximum(st[0], p), [F.tanh(F.dot(w, st[0]) + p)]),
            x.reshape((-1, 2)), [F.zeros((2,))])
        return outs, s

    def plain_forward(self, F, x, w):
        s, outs = F.zeros((2,)), []
        for p in x.reshape((-1, 2)):
            outs.append(F.maximum(s, p))
            s = F.tanh(F.dot(w, s) + p)
        return F.stack(*outs), s


# ---- conds whose branches differ in shape, then more ops ----------------------------------------

@program([rand(3, H)], [rand(4, H, seed=1) - 1], [rand(2, H, seed=2) + 1])
class CondRowsDifferThenDenseAndForeach(_Gru):
    """A cond keeping the first two rows or the rows doubled (2 or 2T rows), a Dense over the
    result, then a foreach GRU over its rows."""

    def hybrid_forward(self, F, x, **kw):
        y = gluon_cf.cond(F.sum(x) > 0, lambda: F.slice_axis(x, axis=0, begin=0, end=2),
                          lambda: F.concat(x, x * -1, dim=0))
        _, (h,) = gluon_cf.foreach(lambda a, s: self.cell(a.reshape((1, -1)), s), self.fc(y),
                                   [F.zeros((1, H))])
        return h, F.sum(y, axis=0)

    def plain_forward(self, F, x, **kw):
        y = x[:2] if _scalar(F.sum(x)) > 0 else F.concat(x, x * -1, dim=0)
        h = F.zeros((1, H))
        for row in self.fc(y):
            _, (h,) = self.cell(row.reshape((1, -1)), [h])
        return h, F.sum(y, axis=0)


@program([rand(4, H)], [rand(3, H, seed=1) - 1], [rand(5, H, seed=2) + 0.5])
class CondMaskedOrAllRowsThenWhileOverCount(HybridBlock):
    """A cond returning the rows of positive first column (boolean_mask) or all rows, then a
    while_loop over the result's row count (shape_array) accumulating a weighted sum."""

    def hybrid_forward(self, F, x):
        col = F.slice_axis(x, axis=1, begin=0, end=1).reshape((-1,))
        y = gluon_cf.cond(F.sum(x) > 0, lambda: F.contrib.boolean_mask(x, col > 0), lambda: x)
        count = F.shape_array(y).slice_axis(axis=0, begin=0, end=1).astype("float32")
        _, (i, acc) = gluon_cf.while_loop(
            lambda i, a: i < count, lambda i, a: ([], [i + 1, a * 0.5 + F.take(y, i)]),
            [F.zeros((1,)), F.zeros((1, H))], max_iterations=6)
        return acc, i

    def plain_forward(self, F, x):
        rows = [x[k:k + 1] for k in range(x.shape[0])]
        if _scalar(F.sum(x)) > 0:
            rows = [r for r in rows if _scalar(r[0, 0]) > 0]
        acc = F.zeros((1, H))
        for r in rows[:6]:
            acc = acc * 0.5 + r
        return acc, F.array([min(len(rows), 6)])


@program([rand(3, H)], [rand(3, H, seed=1) - 1], [rand(1, H, seed=2) + 1])
class CondSwapsTupleShapesThenDot(HybridBlock):
    """A cond returning (x * 2, column sums) or (the first row, x): the two outputs swap shapes
    between the branches; a dot of them and a softmax follow."""

    def hybrid_forward(self, F, x):
        a, b = gluon_cf.cond(F.sum(x) > 0,
                             lambda: (x * 2, F.sum(x, axis=0, keepdims=True)),
                             lambda: (F.slice_axis(x, axis=0, begin=0, end=1), x))
        return F.softmax(F.dot(a, b, transpose_b=True)), F.sum(a) + F.sum(b)

    def plain_forward(self, F, x):
        if _scalar(F.sum(x)) > 0:
            a, b = x * 2, F.sum(x, axis=0, keepdims=True)
        else:
            a, b = x[:1], x
        return F.softmax(F.dot(a, b, transpose_b=True)), F.sum(a) + F.sum(b)


# ---- recursion ----------------------------------------------------------------------------------

TREES = (forest([BAL, (None, None)], seed=241, features=H),
         forest([None, None], seed=242, features=H),
         forest([comb(3), (None, (None, None))], seed=243, features=H))


@program(*TREES)
class BinaryTreeLstmReturnsHAndC(HybridBlock):
    """A binary TreeLSTM written by a user: the recursive function returns (h, c); leaves run
    an input gate layer, internal nodes gate both children's (h, c)."""

    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.leaf = nn.Dense(2 * H, in_units=H)
            self.gates = nn.Dense(4 * H, in_units=2 * H)

    def leaf_state(self, F, x):
        i, u = F.split(self.leaf(x), num_outputs=2, axis=1)
        c = F.sigmoid(i) * F.tanh(u)
        return F.tanh(c), c

    def combine(self, F, hl, cl, hr, cr):
        i, fl, fr, u = F.split(self.gates(F.concat(hl, hr, dim=1)), num_outputs=4, axis=1)
        c = F.sigmoid(i) * F.tanh(u) + F.sigmoid(fl) * cl + F.sigmoid(fr) * cr
        return F.tanh(c), c

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            def internal():
                hl, cl = node(F.take(left, i))
                hr, cr = node(F.take(right, i))
                return self.combine(F, hl, cl, hr, cr)
            return gluon_cf.cond(F.take(left, i) < 0,
                                 lambda: self.leaf_state(F, F.take(x, i)), internal)
        hs, _ = gluon_cf.foreach(lambda r, _: (list(node(r.reshape((1,)))), []), roots, [])
        return hs[0].reshape((-3, -2)), hs[1].reshape((-3, -2))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            if lt[i] < 0:
                return self.leaf_state(F, x[i:i + 1])
            return self.combine(F, *node(lt[i]), *node(rt[i]))
        res = [node(r) for r in _ids(roots)]
        return F.concat(*[h for h, _ in res], dim=0), F.concat(*[c for _, c in res], dim=0)


@program([rand(5, H)], [rand(1, H, seed=1)], [rand(8, H, seed=2)], [rand(3, H, seed=3)])
class SpanRecursionBalancedOverRuntimeLength(HybridBlock):
    """A balanced binary tree over a sequence of run-time length (a model building its own
    tree): span(lo, hi) is the row lo when hi - lo is 1, else a Dense of the halves' concat."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.merge = nn.Dense(H, in_units=2 * H)

    def hybrid_forward(self, F, x):
        @gluon_cf.recursive(max_depth=8)
        def span(lo, hi):
            mid = F.floor((lo + hi) / 2)
            return gluon_cf.cond(hi - lo < 1.5, lambda: F.take(x, lo),
                                 lambda: F.tanh(self.merge(F.concat(span(lo, mid), span(mid, hi),
                                                                    dim=1))))
        count = F.shape_array(x).slice_axis(axis=0, begin=0, end=1).astype("float32")
        return span(F.zeros((1,)), count)

    def plain_forward(self, F, x):
        def span(lo, hi):
            if hi - lo < 2:
                return x[lo:lo + 1]
            mid = (lo + hi) // 2
            return F.tanh(self.merge(F.concat(span(lo, mid), span(mid, hi), dim=1)))
        return span(0, x.shape[0])


@program([rand(5, H)], [rand(2, H, seed=1)], [rand(7, H, seed=2) * 3], [rand(4, H, seed=3) - 1])
class SpanRecursionModelDecidesSplit(HybridBlock):
    """A tree the model decides: span(lo, hi) splits after lo + 1 + floor(sigmoid(score(x_lo))
    * (hi - lo - 1)) rows, the score a learned dot with the span's first row; it returns the node's
    vector and the span's depth."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.w = self.params.get("w", shape=(1, H))
            self.merge = nn.Dense(H, in_units=2 * H)

    def split(self, F, x_lo, w, lo, hi):
        # (the score is a dot with a weight, not a Dense: MXNet 1.9.1's eager backward of
        # take's indices computed from a FullyConnected crashes the process, gluon_cf or not)
        frac = F.sigmoid(F.dot(x_lo, w, transpose_b=True))
        frac = frac.reshape((1,)) * 0.999
        return lo + 1 + F.floor(frac * (hi - lo - 1))

    def hybrid_forward(self, F, x, w):
        @gluon_cf.recursive(max_depth=10)
        def span(lo, hi):
            def internal():
                mid = self.split(F, F.take(x, lo), w, lo, hi)
                (a, da), (b, db) = span(lo, mid), span(mid, hi)
                return F.tanh(self.merge(F.concat(a, b, dim=1))), F.maximum(da, db) + 1
            return gluon_cf.cond(hi - lo < 1.5, lambda: (F.take(x, lo), F.zeros((1,))),
                                 internal)
        count = F.shape_array(x).slice_axis(axis=0, begin=0, end=1).astype("float32")
        return span(F.zeros((1,)), count)

    def plain_forward(self, F, x, w):
        def span(lo, hi):
            if hi - lo < 2:
                return x[lo:lo + 1], 0
            mid = int(_scalar(self.split(F, x[lo:lo + 1], w, F.array([lo]),
                                              F.array([hi]))))
            (a, da), (b, db) = span(lo, mid), span(mid, hi)
            return F.tanh(self.merge(F.concat(a, b, dim=1))), max(da, db) + 1
        h, depth = span(0, x.shape[0])
        return h, F.array([depth])


@program([rand(1, H)], [rand(1, H, seed=1) * 2], [rand(1, H, seed=3) - 1])
class TopDownDecoderReturnsLeafSumAndCount(HybridBlock):
    """A top-down tree decoder splitting while its state's first feature is positive (depth
    below 3): it returns the sum of its leaves and how many there are."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.lc = nn.Dense(H, in_units=H)
            self.rc = nn.Dense(H, in_units=H)

    def hybrid_forward(self, F, h):
        @gluon_cf.recursive(max_depth=6)
        def grow(h, depth):
            def split():
                (a, na), (b, nb) = grow(F.tanh(self.lc(h)), depth + 1), \
                    grow(F.tanh(self.rc(h)), depth + 1)
                return a + b, na + nb
            go = (F.slice_axis(h, axis=1, begin=0, end=1).reshape((1,)) > 0) * (depth < 3)
            return gluon_cf.cond(go, split, lambda: (h, F.ones((1,))))
        return grow(h, F.zeros((1,)))

    def plain_forward(self, F, h):
        def grow(h, depth):
            if _scalar(h[0, 0]) > 0 and depth < 3:
                (a, na), (b, nb) = grow(F.tanh(self.lc(h)), depth + 1), \
                    grow(F.tanh(self.rc(h)), depth + 1)
                return a + b, na + nb
            return h, 1
        h, count = grow(h, 0)
        return h, F.array([count])


def _f64(arrays):
    return [arrays[0].astype(np.float64)] + list(arrays[1:])


@program(*[_f64(t) for t in TREES])
class TreeRnnFloat64Parameters(HybridBlock):
    """A TreeRNN whose features and Dense are float64 (indices float32)."""

    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.combine = nn.Dense(H, in_units=2 * H, dtype="float64")

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(x, i) * 1.5,
                lambda: F.tanh(self.combine(F.concat(node(F.take(left, i)),
                                                     node(F.take(right, i)), dim=1))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        return _plain_tree(F, x, left, right, roots, lambda row: row * 1.5,
                           lambda row, a, b: F.tanh(self.combine(F.concat(a, b, dim=1))))


def _sentence_tree(trees, seed):
    x, left, right, roots = forest(trees, seed=seed, features=H)
    return [x.reshape((-1, 1, H)), left, right, roots]


@program(_sentence_tree([BAL, (None, None)], 251), _sentence_tree([None], 252),
         _sentence_tree([comb(2)], 253))
class ForeachEncoderThenTreeRnnOverItsOutputs(_Gru):
    """A foreach GRU over the tokens gives each tree node its vector; a TreeRNN over the
    outputs, sharing the encoder's Dense with its combine step."""

    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots, **kw):
        outs, _ = gluon_cf.foreach(lambda a, s: self.cell(a, s), x, [F.zeros((1, H))])
        enc = outs.reshape((-3, -2))

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: self.fc(F.take(enc, i)),
                lambda: F.tanh(self.fc(node(F.take(left, i)) - node(F.take(right, i)))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots, **kw):
        h, enc = F.zeros((1, H)), []
        for t in range(x.shape[0]):
            out, (h,) = self.cell(x[t], [h])
            enc.append(out)
        return _plain_tree(F, F.concat(*enc, dim=0), left, right, roots, self.fc,
                           lambda row, a, b: F.tanh(self.fc(a - b)))


@program(*TREES)
class RecursionCalledFromWhileOverRoots(HybridBlock):
    """A while_loop over the roots (a count read from the roots' shape) calling the recursion
    on each and accumulating a decayed sum of the root vectors."""

    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: F.maximum(node(F.take(left, i)),
                                                   node(F.take(right, i))) * 0.9)
        count = F.shape_array(roots).astype("float32")
        _, (_, acc) = gluon_cf.while_loop(
            lambda k, a: k < count,
            lambda k, a: ([], [k + 1, a * 0.5 + node(F.take(roots, k))]),
            [F.zeros((1,)), F.zeros((1, H))], max_iterations=4)
        return acc

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            if lt[i] < 0:
                return x[i:i + 1]
            return F.maximum(node(lt[i]), node(rt[i])) * 0.9
        acc = F.zeros((1, H))
        for r in _ids(roots)[:4]:
            acc = acc * 0.5 + node(r)
        return acc


@program(csr([[1, 2, 3], [], [4], [], [5, 6], [], []], [0], 261), csr([[]], [0], 262),
         csr([[1], [2], []], [0, 2], 263))
class NaryMaxPoolChildrenInWhile(HybridBlock):
    """n-ary recursion pooling its children by max in a while_loop over ptr[i]..ptr[i+1]; a
    node without children (the loop runs no step) pools zeros (a cond on the count)."""

    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(H, in_units=H)

    def hybrid_forward(self, F, x, ptr, cidx, roots):
        @gluon_cf.recursive(max_depth=8)
        def node(i):
            start, end = F.take(ptr, i), F.take(ptr, i + 1)
            _, (_, best) = gluon_cf.while_loop(
                lambda k, b: k < end,
                lambda k, b: ([], [k + 1, F.maximum(b, node(F.take(cidx, k)))]),
                [start, F.ones((1, H)) * -1e4], max_iterations=3)
            pooled = gluon_cf.cond(end - start > 0.5, lambda: best, lambda: F.zeros((1, H)))
            return F.tanh(self.fc(pooled) + F.take(x, i))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, ptr, cidx, roots):
        p, c, n = _ids(ptr), _ids(cidx), x.shape[0]

        def node(i):
            i = _row(i, n)
            best = F.zeros((1, H))
            kids = [node(c[k]) for k in range(p[i], min(p[i + 1], p[i] + 3))]
            for k, v in enumerate(kids):
                best = v if k == 0 else F.maximum(best, v)
            return F.tanh(self.fc(best) + x[i:i + 1])
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


# ---- nested loops, dtypes, shared parameters, all three ops -------------------------------------

@program([rand(3, 2), floats(3), floats(2, 0, 1)], [rand(3, 2, seed=1), floats(1), floats(0, 3, 3)],
         [rand(3, 2, seed=2), floats(0), floats(1, 1, 1)])
class NestedWhileInnerCountFromData(HybridBlock):
    """An outer while_loop of n steps (max 3) whose body runs an inner while_loop of m[i]
    steps (max 3, m an input), each inner step adding a row of x scaled by its counter."""

    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, x, n, m):
        def outer(i, acc):
            row = F.take(x, i)
            _, (_, inner) = gluon_cf.while_loop(
                lambda j, a: j < F.take(m, i),
                lambda j, a: ([], [j + 1, F.tanh(a + F.broadcast_mul(row, j + 1))]),
                [F.zeros((1,)), acc], max_iterations=3)
            return [inner], [i + 1, inner * 0.5]
        (steps,), (i, acc) = gluon_cf.while_loop(lambda i, a: i < n, outer,
                                                 [F.zeros((1,)), F.zeros((1, 2))],
                                                 max_iterations=3)
        return steps, acc

    def plain_forward(self, F, x, n, m):
        acc, ms, steps = F.zeros((1, 2)), _ids(m), []
        for i in range(min(_n(n), 3)):
            for j in range(min(ms[i], 3)):
                acc = F.tanh(acc + x[i:i + 1] * (j + 1))
            steps.append(acc)
            acc = acc * 0.5
        return _stack_padded(F, steps, 3, (1, 2)), acc


@program([rand(4, 2).astype(np.float16)], [rand(1, 2, seed=1).astype(np.float16)],
         [rand(6, 2, seed=2).astype(np.float16)])
class Float16ForeachRecurrence(HybridBlock):
    """A float16 recurrence in a foreach (h = h * 0.5 + x_t, then relu-like max with x_t) and
    its outputs' sum, all in float16."""

    def hybrid_forward(self, F, x):
        outs, (h,) = gluon_cf.foreach(
            lambda a, s: (F.maximum(s[0], a), [s[0] * 0.5 + a]), x,
            [F.zeros_like(F.slice_axis(x, axis=0, begin=0, end=1)).reshape((-1,))])
        return F.sum(outs, axis=0), h

    def plain_forward(self, F, x):
        h, outs = F.zeros((2,), dtype="float16"), []
        for a in x:
            outs.append(F.maximum(h, a))
            h = h * 0.5 + a
        return F.sum(F.stack(*outs), axis=0), h


@program([rand(5, H), np.array([3], np.int32)], [rand(2, H, seed=1), np.array([0], np.int32)],
         [rand(4, H, seed=2), np.array([4], np.int32)])
class Int32CountersWhileLoop(HybridBlock):
    """A while_loop whose counter and bound are int32 (taking rows by the int32 counter),
    returning the int32 counter and the rows' decayed sum."""

    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        _, (i, acc) = gluon_cf.while_loop(
            lambda i, a: i < n, lambda i, a: ([], [i + 1, a * 0.5 + F.take(x, i)]),
            [F.zeros((1,), dtype="int32"), F.zeros((1, H))], max_iterations=5)
        return i, acc

    def plain_forward(self, F, x, n):
        acc, i = F.zeros((1, H)), 0
        while i < min(_n(n), 5):
            acc, i = acc * 0.5 + x[i:i + 1], i + 1
        return F.array([i], dtype="int32"), acc


@program([rand(1, H).astype(np.float64), floats(3)],
         [rand(1, H, seed=1).astype(np.float64), floats(0)],
         [rand(1, H, seed=2).astype(np.float64) * 3, floats(5)])
class Float64DenseInWhileWithCond(HybridBlock):
    """A float64 Dense stepped in a while_loop (run-time n, max 4) with a cond inside halving
    the state when its sum is negative; float32 counter."""

    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(H, in_units=H, dtype="float64")

    def hybrid_forward(self, F, h, n):
        def func(i, h):
            h = F.tanh(self.fc(h))
            h = gluon_cf.cond(F.sum(h) < 0, lambda: h * 0.5, lambda: h)
            return [h], [i + 1, h]
        (hs,), (_, h) = gluon_cf.while_loop(lambda i, h: i < n, func, [F.zeros((1,)), h],
                                            max_iterations=4)
        return hs, h

    def plain_forward(self, F, h, n):
        hs = []
        for _ in range(min(_n(n), 4)):
            h = F.tanh(self.fc(h))
            if _scalar(F.sum(h)) < 0:
                h = h * 0.5
            hs.append(h)
        return F.stack(*(hs + [F.zeros((1, H), dtype="float64")] * (4 - len(hs)))), h


@program([rand(3, H), floats(2)], [rand(1, H, seed=1), floats(0)], [rand(4, H, seed=2) - 1,
                                                                    floats(3)])
class OneDenseSharedByForeachWhileAndCond(HybridBlock):
    """One Dense used in a foreach body, a while_loop body, a cond branch and outside them:
    its gradient sums all four uses."""

    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(H, in_units=H)

    def hybrid_forward(self, F, x, n):
        outs, (h,) = gluon_cf.foreach(
            lambda a, s: ([], [F.tanh(self.fc(a.reshape((1, H))) + s[0])]), x,
            [F.zeros((1, H))])
        _, (_, g) = gluon_cf.while_loop(
            lambda i, g: i < n, lambda i, g: ([], [i + 1, F.tanh(self.fc(g))]),
            [F.zeros((1,)), h], max_iterations=3)
        y = gluon_cf.cond(F.sum(g) > 0, lambda: self.fc(g * 2), lambda: g)
        return self.fc(y) + g

    def plain_forward(self, F, x, n):
        g = F.zeros((1, H))
        for a in x:
            g = F.tanh(self.fc(a.reshape((1, H))) + g)
        for _ in range(min(_n(n), 3)):
            g = F.tanh(self.fc(g))
        y = self.fc(g * 2) if _scalar(F.sum(g)) > 0 else g
        return self.fc(y) + g


@program([rand(4, 2)], [rand(2, 2, seed=1) - 1], [rand(5, 2, seed=2) + 0.3])
class ForeachCondWhileByRowSign(HybridBlock):
    """A foreach over rows whose body conds on the row's sum: positive rows run a while_loop
    halving them until their sum is below 0.25 (max 4 steps), others are negated."""

    def hybrid_forward(self, F, x):
        def step(row, states):
            def shrink():
                _, (v, k) = gluon_cf.while_loop(
                    lambda v, k: F.sum(v) >= 0.25, lambda v, k: ([], [v * 0.5, k + 1]),
                    [row, F.zeros((1,))], max_iterations=4)
                return v, k
            v, k = gluon_cf.cond(F.sum(row) > 0, shrink, lambda: (row * -1, F.zeros((1,))))
            return [v], [states[0] + k]
        (vs,), (count,) = gluon_cf.foreach(step, x, [F.zeros((1,))])
        return vs, count

    def plain_forward(self, F, x):
        vs, count = [], 0
        for row in x:
            if _scalar(F.sum(row)) > 0:
                k = 0
                while k < 4 and _scalar(F.sum(row)) >= 0.25:
                    row, k = row * 0.5, k + 1
                count += k
            else:
                row = row * -1
            vs.append(row)
        return F.stack(*vs), F.array([count])


@program([rand(3, H), floats(1, 0, 1), *forest([(None, None)], seed=271, features=H)[1:]],
         [rand(3, H, seed=1), floats(0, 0, 0), *forest([(None, None)], seed=272,
                                                       features=H)[1:]],
         [rand(3, H, seed=2), floats(1, 1, 1), *forest([(None, None)], seed=273,
                                                       features=H)[1:]])
class MaskedForeachThenCondThenTree(HybridBlock):
    """All three ops: a foreach over the masked rows builds a summary, a cond on the number
    kept picks the summary or zeros, and a TreeRNN over x adds it at every leaf."""

    NO_GRAD = (1, 2, 3, 4)

    def hybrid_forward(self, F, x, mask, left, right, roots):
        kept = F.contrib.boolean_mask(x, mask)
        _, (s,) = gluon_cf.foreach(lambda r, st: ([], [st[0] * 0.5 + r]), kept, [F.zeros((H,))])
        ctx = gluon_cf.cond(F.sum(mask) > 0, lambda: s.reshape((1, H)), lambda: F.ones((1, H)))

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) * ctx,
                                 lambda: F.tanh(node(F.take(left, i)) + node(F.take(right, i))))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, mask, left, right, roots):
        s = F.zeros((H,))
        for k, m in enumerate(_ids(mask)):
            if m:
                s = s * 0.5 + x[k]
        ctx = s.reshape((1, H)) if sum(_ids(mask)) else F.ones((1, H))
        return _plain_tree(F, x, left, right, roots, lambda row: row * ctx,
                           lambda row, a, b: F.tanh(a + b))
