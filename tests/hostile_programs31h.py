"""Round 31h (issue 24): seq2seq decoders as ported from MXNet/gluonnlp code, written against
``C`` (gluon_cf's ops, or MXNet's F.contrib as the oracle; see ``hostile_harness31h``):
attention decoders over foreach and while_loop, greedy and sampled decoding, pointer
networks, incremental transformer decoders with state dicts, CTC-like recursions,
variable-length RNNs (SequenceMask, SequenceLast), clipping inside loops."""
from mxnet.gluon import HybridBlock, nn, rnn

import hostile_harness
from hostile_harness31h import C, log_add

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

SRC = ([rand(2, 5, 4), rand(2, 3, 4, seed=1)], [rand(1, 5, 4, seed=2), rand(1, 3, 4, seed=3)],
       [rand(3, 5, 4, seed=4), rand(3, 3, 4, seed=5)])
SRC0 = SRC + ([rand(0, 5, 4), rand(0, 3, 4)],)


def _dot_attention(F, query, keys):
    """query (B, H), keys (B, T, H): context (B, H), weights (B, T)."""
    scores = F.batch_dot(keys, query.expand_dims(2)).reshape((0, -1))
    weights = F.softmax(scores, axis=-1)
    return F.batch_dot(weights.expand_dims(1), keys).reshape((0, -1)), weights


class _Seq2Seq(HybridBlock):
    def __init__(self, hidden=4, cell="gru"):
        super().__init__()
        with self.name_scope():
            self.enc = nn.Dense(hidden, flatten=False, in_units=4)
            make = {"gru": rnn.GRUCell, "lstm": rnn.LSTMCell, "rnn": rnn.RNNCell}[cell]
            self.cell = make(hidden, input_size=8)
            self.out = nn.Dense(4, in_units=8)


@program(*SRC0)
class ForeachDotAttentionGRU(_Seq2Seq):
    """Teacher-forced decoder: foreach over targets (time major), dot attention each step."""
    def hybrid_forward(self, F, src, tgt):
        keys = F.tanh(self.enc(src))
        h0 = F.sum(keys, axis=1) * 0

        def step(y, states):
            h = states[0]
            ctx, w = _dot_attention(F, h, keys)
            out, new = self.cell(F.concat(y, ctx, dim=-1), [h])
            return [self.out(F.concat(out, ctx, dim=-1)), w], new
        (outs, weights), last = C.foreach(step, F.transpose(tgt, (1, 0, 2)), [h0])
        return outs, weights, last[0]


@program(*SRC0)
class ForeachAttentionLSTMTwoStates(HybridBlock):
    def __init__(self):
        super().__init__()
        self.enc = nn.Dense(4, flatten=False, in_units=4)
        self.cell = rnn.LSTMCell(4, input_size=8)
        self.out = nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, src, tgt):
        keys = self.enc(src)
        h0 = F.zeros_like(F.sum(keys, axis=1))

        def step(y, states):
            ctx, _ = _dot_attention(F, states[0], keys)
            out, new = self.cell(F.concat(y, ctx, dim=-1), states)
            return self.out(out), new
        outs, (h, c) = C.foreach(step, F.swapaxes(tgt, 0, 1), [h0, h0])
        return F.swapaxes(outs, 0, 1), h + c


@program(*SRC)
class GreedyWhileDecoderWithAttention(_Seq2Seq):
    """Greedy decoding: feed back the softmax of the last output, up to 4 steps, stop when
    every row's max probability is above 0.9 (never here) or after 4."""
    def hybrid_forward(self, F, src, tgt):
        keys = F.tanh(self.enc(src))
        y0 = F.slice_axis(tgt, axis=1, begin=0, end=1).reshape((0, -1))
        h0 = F.zeros_like(y0)

        def cond(i, y, h):
            return (i < 4) * (F.min(F.max(y, axis=-1)) < 0.9)

        def body(i, y, h):
            ctx, _ = _dot_attention(F, h, keys)
            out, (h,) = self.cell(F.concat(y, ctx, dim=-1), [h])
            y = F.softmax(self.out(F.concat(out, ctx, dim=-1)))
            return y, [i + 1, y, h]
        outs, (n, y, h) = C.while_loop(cond, body, [F.zeros((1,)), y0, h0],
                                       max_iterations=4)
        return outs, n, y, h


@program(*SRC)
class WhileDecoderStopsOnEos(_Seq2Seq):
    """Stops when all rows have emitted argmax 0 (eos) once: the alive mask is a loop var."""
    def hybrid_forward(self, F, src, tgt):
        keys = F.tanh(self.enc(src))
        y0 = F.slice_axis(tgt, axis=1, begin=0, end=1).reshape((0, -1))
        alive0 = F.ones_like(F.sum(y0, axis=-1))

        def cond(y, h, alive):
            return F.sum(alive) > 0

        def body(y, h, alive):
            ctx, w = _dot_attention(F, h, keys)
            out, (h,) = self.cell(F.concat(y, ctx, dim=-1), [h])
            logits = self.out(F.concat(out, ctx, dim=-1))
            alive = alive * (F.argmax(logits, axis=-1) != 0)
            return [logits * alive.expand_dims(1), w], [F.softmax(logits), h, alive]
        (logits, w), (_, h, alive) = C.while_loop(cond, body, [y0, F.zeros_like(y0), alive0],
                                                  max_iterations=5)
        return logits, w, h


@program(*SRC0)
class ForeachAdditiveAttention(HybridBlock):
    """Bahdanau attention: v . tanh(W k + U q), masked by a length from the source sum."""
    def __init__(self):
        super().__init__()
        self.wk = nn.Dense(5, flatten=False, in_units=4, use_bias=False)
        self.uq = nn.Dense(5, in_units=4)
        self.v = nn.Dense(1, flatten=False, in_units=5, use_bias=False)
        self.cell = rnn.RNNCell(4, input_size=8, activation="tanh")

    def hybrid_forward(self, F, src, tgt):
        proj = self.wk(src)

        def step(y, states):
            h = states[0]
            e = self.v(F.tanh(F.broadcast_add(proj, self.uq(h).expand_dims(1))))
            a = F.softmax(e.reshape((0, -1)), axis=-1)
            ctx = F.batch_dot(a.expand_dims(1), src).reshape((0, -1))
            out, new = self.cell(F.concat(y, ctx, dim=-1), [h])
            return out, new
        h0 = F.zeros_like(F.slice_axis(src, axis=1, begin=0, end=1).reshape((0, -1)))
        outs, _ = C.foreach(step, F.transpose(tgt, (1, 0, 2)), [h0])
        return outs


@program(*SRC0)
class PointerNetworkForeach(HybridBlock):
    """A pointer network: each step points to a source position (softmax over T) and feeds
    the pointed row back; a coverage vector accumulates the pointer weights."""
    def __init__(self):
        super().__init__()
        self.q = nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, src, tgt):
        def step(y, states):
            inp, cov = states
            scores = F.batch_dot(src, self.q(inp).expand_dims(2)).reshape((0, -1)) - cov
            p = F.softmax(scores, axis=-1)
            pointed = F.batch_dot(p.expand_dims(1), src).reshape((0, -1))
            return p, [F.tanh(pointed + y), cov + p]
        init = F.zeros_like(F.slice_axis(src, axis=1, begin=0, end=1).reshape((0, -1)))
        cov = F.zeros_like(F.sum(src, axis=-1))
        ps, (last, cov) = C.foreach(step, F.swapaxes(tgt, 0, 1), [init, cov])
        return ps, last, cov


@program(*SRC)
class PointerNetworkHardPointerWhile(HybridBlock):
    """Hard pointing: argmax position gathered with pick/take each step (no gradient through
    the index), masked so a position is chosen once; runs T steps."""
    def hybrid_forward(self, F, src, tgt):
        t = 5

        def cond(i, mask, inp):
            return i < t

        def body(i, mask, inp):
            scores = F.batch_dot(src, inp.expand_dims(2)).reshape((0, -1)) + mask * -30.0
            idx = F.argmax(scores, axis=-1)
            chosen = F.one_hot(idx, t)
            row = F.batch_dot(chosen.expand_dims(1), src).reshape((0, -1))
            return [idx, F.max(F.log_softmax(scores), axis=-1)], \
                [i + 1, mask + chosen, F.tanh(row + inp)]
        first = F.slice_axis(tgt, axis=1, begin=0, end=1).reshape((0, -1))
        (idx, lp), (_, mask, inp) = C.while_loop(
            cond, body, [F.zeros((1,)), F.zeros_like(F.sum(src, axis=-1)), first],
            max_iterations=t)
        return idx, lp, mask, inp


CTC = ([rand(6, 2, 5, seed=7), floats(1, 2, 1, 3, 0, 2)],
       [rand(3, 2, 5, seed=8), floats(4, 4, 1, 1, 2, 2)],
       [rand(1, 2, 5, seed=9), floats(1, 1, 1, 1, 1, 1)])


@program(*CTC)
class CTCForwardAlphaForeach(HybridBlock):
    """CTC's alpha recursion in log space over time (foreach), labels of 3 per row (blank 0)
    extended to 7 with blanks; logsumexp written with max for stability."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, logits, labels):
        lab = labels.reshape((2, 3))
        ext = F.stack(F.zeros_like(lab), lab, axis=2).reshape((2, 6))
        ext = F.concat(ext, F.zeros((2, 1)), dim=1)                       # (2, 7)
        same = F.concat(F.ones((2, 2)), F.slice_axis(ext, axis=1, begin=2, end=None) ==
                        F.slice_axis(ext, axis=1, begin=0, end=-2), dim=1)
        neg = -1e4
        alpha0 = F.concat(F.zeros((2, 2)), F.ones((2, 5)) * neg, dim=1)

        def lse(a, b):
            return log_add(F, a, b)

        def step(lp, states):
            alpha = states[0]
            lp = F.log_softmax(lp, axis=-1)
            emit = F.pick(lp, ext, axis=-1)
            s1 = F.concat(F.ones((2, 1)) * neg, F.slice_axis(alpha, axis=1, begin=0, end=-1),
                          dim=1)
            s2 = F.concat(F.ones((2, 2)) * neg, F.slice_axis(alpha, axis=1, begin=0, end=-2),
                          dim=1)
            s2 = F.where(same, F.ones_like(s2) * neg, s2)
            new = lse(lse(alpha, s1), s2) + emit
            return new, [new]
        alphas, (last,) = C.foreach(step, logits, [alpha0])
        end = lse(F.slice_axis(last, axis=1, begin=-1, end=None),
                  F.slice_axis(last, axis=1, begin=-2, end=-1))
        return -end, alphas


LENS = ([rand(4, 2, 3), floats(4, 2)], [rand(4, 3, 3, seed=1), floats(1, 4, 3)],
        [rand(2, 1, 3, seed=2), floats(2)], [rand(3, 2, 3, seed=3), floats(1, 1)])


@program(*LENS)
class ForeachRNNThenSequenceMaskLast(HybridBlock):
    """A cell over time, outputs masked by length, SequenceLast for the final state (MXNet's
    usual variable-length recipe), then a state carried only while t < length."""
    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        self.cell = rnn.GRUCell(3, input_size=3)

    def hybrid_forward(self, F, x, length):
        h0 = F.zeros_like(F.slice_axis(x, axis=0, begin=0, end=1).reshape((-3, 0)))

        def step(data, states):
            xt, t = data
            h, = states
            out, (new,) = self.cell(xt, [h])
            keep = (t < length).expand_dims(1)
            h = F.where(F.broadcast_like(keep, new), new, h)
            return out, [h]
        steps = F.arange(0, 4).slice_like(F.sum(x, axis=(1, 2)), axes=(0,))
        steps = F.broadcast_like(steps.expand_dims(1), F.sum(x, axis=2))
        outs, (h,) = C.foreach(step, [x, steps], [h0])
        masked = F.SequenceMask(outs, sequence_length=length, use_sequence_length=True)
        last = F.SequenceLast(outs, sequence_length=length, use_sequence_length=True)
        return masked, last, h


@program(*LENS)
class WhileRNNToMaxLength(HybridBlock):
    """Runs to the largest length (a while over max(length)), rows past their own length
    keep their state; outputs padded by max_iterations=4."""
    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        self.cell = rnn.RNNCell(3, input_size=3)

    def hybrid_forward(self, F, x, length):
        top = F.max(length).reshape((1,))
        h0 = F.zeros_like(F.slice_axis(x, axis=0, begin=0, end=1).reshape((-3, 0)))

        def body(i, h):
            xt = F.take(x, i, mode="clip").reshape((-3, 0))
            out, (new,) = self.cell(xt, [h])
            keep = F.broadcast_like((i < length).expand_dims(1), new)
            return out * keep, [i + 1, F.where(keep, new, h)]
        outs, (i, h) = C.while_loop(lambda i, h: i < top, body, [F.zeros((1,)), h0],
                                    max_iterations=4)
        return outs, i, h


@program(*LENS)
class ForeachClipInsideLoop(HybridBlock):
    """States clipped each step (F.clip) and a gradient-clipping style rescale by norm."""
    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        self.d = nn.Dense(3, in_units=6)

    def hybrid_forward(self, F, x, length):
        def step(xt, states):
            h = F.clip(self.d(F.concat(xt, states[0], dim=-1)) * 3, -1, 1)
            norm = F.sqrt(F.sum(h * h, axis=-1, keepdims=True) + 1e-6)
            h = F.broadcast_div(h, F.maximum(norm, F.ones_like(norm) * 0.5))
            return h, [h]
        h0 = F.zeros_like(F.slice_axis(x, axis=0, begin=0, end=1).reshape((-3, 0)))
        outs, _ = C.foreach(step, x, [h0])
        return F.SequenceMask(outs, sequence_length=length, use_sequence_length=True)
