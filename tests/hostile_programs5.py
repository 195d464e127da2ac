"""Issue 24, fourth round (1/2): decoders and dynamic programs ported from MXNet, gluonnlp,
TensorFlow and PyTorch code: attention decoders with coverage vectors, pointer networks,
Viterbi and CTC-style forward recursions (argmax and gathers over time), beam-search-like state
dicts with alive masks, stacked cells with nested list/tuple states, ``F.SequenceMask``,
``F.take``/``F.pick``/``F.where`` masks, early exits with several outputs, and blocks called
with different lengths and masks one after the other (call history on one hybridized block).
``PROGRAMS`` maps each block class to its input lists (hostile_harness.classify runs them)."""
import numpy as np
from mxnet import gluon
from mxnet.gluon import HybridBlock

from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()


_rand = hostile_harness.rand
_f = hostile_harness.floats


# encoder states (B, T, C) and decoder inputs (S, B, C): lengths change from call to call
ENC_DEC = ([_rand(2, 5, 4), _rand(3, 2, 4, seed=1)],
           [_rand(2, 3, 4, seed=2), _rand(4, 2, 4, seed=3)],
           [_rand(2, 5, 4, seed=4), _rand(1, 2, 4, seed=5)])
# emissions (T, K) and transitions (K, K)
EMIT = ([_rand(5, 3), _rand(3, 3, seed=1)], [_rand(2, 3, seed=2) * 4, _rand(3, 3, seed=3)],
        [_rand(7, 3, seed=4), _rand(3, 3, seed=5)])
# sequences (B, T, C) with lengths (B,)
SEQ_LENS = ([_rand(3, 4, 2), _f(4, 1, 2)], [_rand(3, 2, 2, seed=1), _f(1, 2, 2)],
            [_rand(3, 5, 2, seed=2), _f(0, 5, 3)])


class _Decoder(HybridBlock):
    def __init__(self, units=4, vocab=5):
        super().__init__()
        self.query = gluon.nn.Dense(units, flatten=False, in_units=2 * units)
        self.cell = gluon.nn.Dense(units, flatten=False, in_units=units)
        self.out = gluon.nn.Dense(vocab, flatten=False, in_units=units)


@program(*ENC_DEC)
class CoverageAttentionDecoder(_Decoder):
    """See et al.'s pointer-generator attention: scores minus the coverage so far."""

    @autograph
    def hybrid_forward(self, F, enc, tgt):
        h = F.sum(enc, axis=1) * 0
        coverage = F.sum(enc, axis=2) * 0
        outs = []
        for y in tgt:
            q = F.tanh(self.query(F.concat(h, y, dim=1)))
            scores = F.batch_dot(enc, q.expand_dims(2)).reshape((0, -1)) - coverage
            att = F.softmax(scores, axis=1)
            ctx = F.batch_dot(att.expand_dims(1), enc).reshape((0, -1))
            coverage = coverage + att
            h = F.tanh(ctx + y)
            outs.append(h)
        return F.stack(*outs), coverage


@program(*ENC_DEC)
class CoverageDecoderStopsWhenCovered(_Decoder):
    """The same, stopping once every source position got attention 0.8 (a tensor break),
    returning the outputs, the coverage and the number of steps taken."""

    @autograph
    def hybrid_forward(self, F, enc, tgt):
        h = F.sum(enc, axis=1) * 0
        coverage = F.sum(enc, axis=2) * 0
        steps = F.zeros((1,))
        outs = []
        for y in tgt:
            scores = F.batch_dot(enc, F.tanh(self.query(F.concat(h, y, dim=1))).expand_dims(2))
            att = F.softmax(scores.reshape((0, -1)) - coverage, axis=1)
            coverage = coverage + att
            h = F.tanh(F.batch_dot(att.expand_dims(1), enc).reshape((0, -1)) + y)
            outs.append(h)
            steps = steps + 1
            if F.min(coverage) > 0.25:
                break
        return F.stack(*outs), coverage, steps


@program(*ENC_DEC)
class CoverageLossSummed(_Decoder):
    """The coverage loss sum(min(att, coverage)) accumulated as a Python float-started total."""

    @autograph
    def hybrid_forward(self, F, enc, tgt):
        h = F.mean(enc, axis=1)
        coverage = F.sum(enc, axis=2) * 0
        loss = 0.0
        for y in tgt:
            att = F.softmax(F.batch_dot(enc, (h + y).expand_dims(2)).reshape((0, -1)), axis=1)
            loss = loss + F.sum(F.minimum(att, coverage))
            coverage = coverage + att
            h = F.tanh(F.batch_dot(att.expand_dims(1), enc).reshape((0, -1)))
        return h, loss


@program([_rand(2, 4, 3)], [_rand(2, 2, 3, seed=1)], [_rand(2, 5, 3, seed=2)])
class PointerNetworkGreedy(HybridBlock):
    """Vinyals' pointer network, greedy: point at the best unvisited input, feed it back."""

    @autograph
    def hybrid_forward(self, F, x):
        visited = F.sum(x, axis=2) * 0
        q = F.mean(x, axis=1)
        scores, order = [], []
        for step in range(x.shape[1]):
            s = F.batch_dot(x, q.expand_dims(2)).reshape((0, -1))
            s = F.where(visited > 0, F.ones_like(s) * -1e9, s)
            idx = F.argmax(s, axis=1)
            scores.append(F.pick(s, idx, axis=1))
            order.append(idx)
            chosen = F.one_hot(idx, x.shape[1])
            visited = visited + chosen
            q = F.sum(x * chosen.expand_dims(2), axis=1)
        return F.stack(*scores, axis=1), F.stack(*order, axis=1)


@program([_rand(2, 4, 3)], [_rand(2, 2, 3, seed=1)], [_rand(2, 5, 3, seed=2)])
class PointerNetworkTensorLoop(HybridBlock):
    """The same pointing loop over the inputs' time axis moved first (a tensor loop)."""

    @autograph
    def hybrid_forward(self, F, x):
        visited = F.sum(x, axis=2) * 0
        q = F.mean(x, axis=1)
        scores = []
        for _ in F.swapaxes(x, 0, 1):
            s = F.batch_dot(x, q.expand_dims(2)).reshape((0, -1))
            s = F.where(visited > 0, F.ones_like(s) * -1e9, s)
            idx = F.argmax(s, axis=1)
            scores.append(F.pick(s, idx, axis=1))
            chosen = F.one_hot(idx, 5).slice_like(visited, axes=(1,))
            visited = visited + chosen
            q = F.sum(x * chosen.expand_dims(2), axis=1)
        return F.stack(*scores, axis=1)


@program(*EMIT)
class ViterbiDecode(HybridBlock):
    """The CRF's Viterbi: max-product forward with backpointers, then backtracking."""
    NO_GRAD = ()

    @autograph
    def hybrid_forward(self, F, emissions, trans):
        score = emissions[0]
        backpointers = []
        for e in emissions[1:]:
            total = score.expand_dims(1) + trans
            backpointers.append(F.argmax(total, axis=0))
            score = F.max(total, axis=0) + e
        best = F.argmax(score, axis=0)
        path = [best]
        for bp in reversed(backpointers):
            best = F.take(bp, best)
            path.append(best)
        return F.max(score), F.concat(*path[::-1], dim=0)


@program(*EMIT)
class ViterbiStackedBackpointers(HybridBlock):
    """Backpointers stacked into one array, the backtrack a loop over a static range."""

    @autograph
    def hybrid_forward(self, F, emissions, trans):
        score = emissions[0]
        bps = []
        for e in emissions[1:]:
            total = score.expand_dims(1) + trans
            bps.append(F.argmax(total, axis=0))
            score = F.max(total, axis=0) + e
        bps = F.stack(*bps)
        best = F.argmax(score, axis=0)
        path = [best]
        for t in range(emissions.shape[0] - 2, -1, -1):
            best = F.take(bps[t], best)
            path.insert(0, best)
        return F.max(score), F.concat(*path, dim=0)


@program(*EMIT)
class ViterbiScoreOnly(HybridBlock):
    """The best path's score only, over a while loop with a tensor counter."""

    @autograph(max_iterations=8)
    def hybrid_forward(self, F, emissions, trans):
        n = F.shape_array(emissions)[0:1].astype("float32")
        score = F.take(emissions, F.zeros((1,))).reshape((-1,))
        t = F.ones((1,))
        while t < n:
            score = F.max(score.expand_dims(1) + trans, axis=0) + \
                F.take(emissions, t).reshape((-1,))
            t = t + 1
        return F.max(score)


@program(*EMIT)
class ForwardAlgorithmLogSumExp(HybridBlock):
    """The CRF partition function: log-sum-exp instead of max, and its gradient."""

    @autograph
    def hybrid_forward(self, F, emissions, trans):
        alpha = emissions[0]
        for e in emissions[1:]:
            total = alpha.expand_dims(1) + trans
            top = F.max(total, axis=0)
            alpha = top + F.log(F.sum(F.exp(F.broadcast_sub(total, top.expand_dims(0))),
                                      axis=0)) + e
        top = F.max(alpha)
        return top + F.log(F.sum(F.exp(alpha - top)))


@program([_rand(4, 5), _f(1, 3)], [_rand(2, 5, seed=1), _f(2, 2)], [_rand(6, 5, seed=2), _f(4, 1)])
class CTCForwardOverLabels(HybridBlock):
    """CTC's alpha recursion over the blank-extended labels [_, l1, _, l2, _]: a shift by one
    and by two (where the labels differ), log-sum-exp'd, over time."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, logits, labels):
        logp = F.log_softmax(logits, axis=-1)
        ext = F.stack(F.zeros((1,)), labels[0:1], F.zeros((1,)), labels[1:2], F.zeros((1,)))
        ext = ext.reshape((-1,))
        skip = F.concat(F.zeros((3,)), (labels[1:2] != labels[0:1]), F.zeros((1,)), dim=0)
        neg = F.ones((5,)) * -1e4
        alpha = F.where(F.arange(5) < 2, F.take(logp[0], ext), neg)
        for lp in logp[1:]:
            a1 = F.concat(neg[0:1], alpha[0:4], dim=0)
            a2 = F.where(skip > 0, F.concat(neg[0:2], alpha[0:3], dim=0), neg)
            top = F.maximum(F.maximum(alpha, a1), a2)
            alpha = top + F.log(F.exp(alpha - top) + F.exp(a1 - top) + F.exp(a2 - top)) + \
                F.take(lp, ext)
        top = F.maximum(alpha[3], alpha[4])
        return -(top + F.log(F.exp(alpha[3] - top) + F.exp(alpha[4] - top)))


@program(*SEQ_LENS)
class MaskedRecurrenceWithLengths(HybridBlock):
    """A recurrence that stops updating each row after its length: F.where on a time mask."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, lens):
        h = F.sum(x, axis=1) * 0
        t = 0
        for x_t in F.swapaxes(x, 0, 1):
            alive = (lens > t).reshape((-1, 1))
            h = F.where(F.broadcast_like(alive, h), F.tanh(h + x_t), h)
            t = t + 1
        return h


@program(*SEQ_LENS)
class SequenceMaskPerStep(HybridBlock):
    """F.SequenceMask (time-major) applied after every step of a Python loop over 3 steps,
    with lengths that shrink as a loop state of a tensor while."""
    NO_GRAD = (1,)

    @autograph(max_iterations=6)
    def hybrid_forward(self, F, x, lens):
        h = F.swapaxes(x, 0, 1)
        while F.max(lens) > 0:
            h = F.SequenceMask(F.tanh(h + 0.5), sequence_length=lens,
                               use_sequence_length=True)
            lens = F.relu(lens - 2)
        return F.swapaxes(h, 0, 1)


@program(*SEQ_LENS)
class SequenceLastAfterLoop(HybridBlock):
    """A GRU cell over time, then F.SequenceLast picks each row's last valid output."""
    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        self.cell = gluon.rnn.GRUCell(3, input_size=2)

    @autograph
    def hybrid_forward(self, F, x, lens):
        states = [F.zeros_like(F.sum(x, axis=1)).slice_axis(axis=1, begin=0, end=1)
                  .broadcast_axes(axis=1, size=3)]
        outs = []
        for x_t in F.swapaxes(x, 0, 1):
            out, states = self.cell(x_t, states)
            outs.append(out)
        return F.SequenceLast(F.stack(*outs), sequence_length=F.maximum(lens, 1),
                              use_sequence_length=True)


@program([_rand(2, 4), _f(1, 4, 2)], [_rand(2, 4, seed=1), _f(0, 0, 0)])
class BeamStateDictAliveMask(_Decoder):
    """gluonnlp's search state as a dict (hidden, scores, alive), updated each step, stopping
    when no beam is alive."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, h, eos):
        state = {"h": h, "scores": F.zeros((2, 1)), "alive": F.ones((2, 1))}
        for t in range(4):
            logp = F.log_softmax(self.out(state["h"]))
            tok = F.argmax(logp, axis=1).reshape((-1, 1))
            done = F.broadcast_equal(tok, F.take(eos, F.zeros((1,)) + min(t, 2)))
            state = {"h": F.tanh(self.cell(state["h"])),
                     "scores": state["scores"] + F.max(logp, axis=1, keepdims=True) *
                     state["alive"],
                     "alive": state["alive"] * (1 - done)}
            if F.sum(state["alive"]) == 0:
                break
        return state["scores"], state["alive"], state["h"]


@program([_rand(3, 2, 4), _rand(2, 4, seed=1)], [_rand(1, 2, 4, seed=2), _rand(2, 4, seed=3)])
class StackedCellsNestedStates(HybridBlock):
    """Two LSTM layers whose states are a list of a list and a tuple: [[h1, c1], (h2, c2)]."""

    def __init__(self):
        super().__init__()
        self.l1 = gluon.rnn.LSTMCell(4, input_size=4)
        self.l2 = gluon.rnn.LSTMCell(4, input_size=4)

    @autograph
    def hybrid_forward(self, F, x, h0):
        states = [[h0, h0 * 0], (h0 * 0, h0)]
        outs = []
        for x_t in x:
            o1, s1 = self.l1(x_t, states[0])
            o2, s2 = self.l2(o1, list(states[1]))
            states = [s1, tuple(s2)]
            outs.append(o2)
        (h1, c1), (h2, c2) = states
        return F.stack(*outs), h1 + c1, h2 - c2


@program([_rand(3, 2, 4), _rand(2, 4, seed=1)], [_rand(2, 2, 4, seed=2) * 3, _rand(2, 4)])
class StackedCellsEarlyExit(StackedCellsNestedStates):
    """The same stack, leaving the loop once the top output's norm passes a bound."""

    @autograph
    def hybrid_forward(self, F, x, h0):
        states = [[h0, h0 * 0], (h0 * 0, h0)]
        outs = []
        for x_t in x:
            o1, s1 = self.l1(x_t, states[0])
            o2, s2 = self.l2(o1, list(states[1]))
            states = [s1, tuple(s2)]
            outs.append(o2)
            if F.norm(o2) > 0.6:
                break
        return F.stack(*outs), states[1][0]


@program([np.array([[1, 3, 0], [2, 2, 4]], np.float32)],
         [np.array([[4, 0, 1, 1], [3, 1, 0, 2]], np.float32)])
class TeacherForcedEmbeddingPick(HybridBlock):
    """Teacher forcing: embed token t, predict, F.pick the log-probability of token t + 1."""
    NO_GRAD = (0,)

    def __init__(self):
        super().__init__()
        self.embed = gluon.nn.Embedding(5, 4)
        self.out = gluon.nn.Dense(5, in_units=4)

    @autograph
    def hybrid_forward(self, F, tokens):
        cols = F.swapaxes(tokens, 0, 1)
        h = F.zeros((2, 4))
        nll = F.zeros((2,))
        prev = cols[0]
        for nxt in cols[1:]:
            h = F.tanh(h + self.embed(prev))
            nll = nll - F.pick(F.log_softmax(self.out(h)), nxt, axis=1)
            prev = nxt
        return nll


@program([_rand(2, 4)], [_rand(2, 4, seed=1) * 5])
class GreedyGrowingSequenceConcat(_Decoder):
    """gluonnlp-style greedy search growing the sample with F.concat each step and stopping
    when every row emitted token 0 (a tensor break around a growing state)."""

    @autograph
    def hybrid_forward(self, F, h):
        samples = F.zeros((2, 1))
        for t in range(4):
            tok = F.argmax(self.out(h), axis=1).reshape((-1, 1))
            samples = F.concat(samples, tok, dim=1)
            h = F.tanh(self.cell(h) + tok)
            if F.sum(tok == 0) == 2:
                break
        return samples, h


@program([_rand(2, 4)], [_rand(2, 4, seed=1) * 5])
class GreedyPaddedSamples(_Decoder):
    """The same search written the TF way: a fixed-size sample buffer written with F.where on
    a one-hot of the step, so its shape stays."""

    @autograph
    def hybrid_forward(self, F, h):
        samples = F.zeros((2, 4))
        t = F.zeros((1,))
        while t < 4:
            tok = F.argmax(self.out(h), axis=1).reshape((-1, 1))
            here = F.broadcast_like(F.one_hot(t, 4), samples)
            samples = F.where(here > 0, F.broadcast_like(tok, samples), samples)
            h = F.tanh(self.cell(h) + tok)
            t = t + 1
            if F.sum(tok == 0) == 2:
                break
        return samples, h, t


@program([_rand(3, 4)], [_rand(1, 4, seed=1)], [_rand(5, 4, seed=2)])
class BidirectionalReversedLoop(HybridBlock):
    """A bidirectional RNN: a forward loop and one over reversed(x), outputs re-reversed."""

    def __init__(self):
        super().__init__()
        self.fw = gluon.nn.Dense(4, in_units=4)
        self.bw = gluon.nn.Dense(4, in_units=4)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1, 4))
        fw = []
        for r in x:
            h = F.tanh(self.fw(h) + r)
            fw.append(h)
        h = F.zeros((1, 4))
        bw = []
        for r in reversed(x):
            h = F.tanh(self.bw(h) + r)
            bw.append(h)
        return F.concat(F.concat(*fw, dim=0), F.concat(*bw[::-1], dim=0), dim=1)


@program(*SEQ_LENS)
class SequenceReverseWithLengths(HybridBlock):
    """The backward direction over F.SequenceReverse with lengths, a cumulative sum loop."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, lens):
        rev = F.SequenceReverse(F.swapaxes(x, 0, 1), sequence_length=F.maximum(lens, 1),
                                use_sequence_length=True)
        acc = rev[0] * 0
        outs = []
        for r in rev:
            acc = acc * 0.5 + r
            outs.append(acc)
        return F.swapaxes(F.stack(*outs), 0, 1)


@program(*SEQ_LENS)
class MaskedSoftmaxAttentionSteps(HybridBlock):
    """Attention over a padded memory with F.SequenceMask(value=-1e9) on the scores, queried
    by its own output for three Python steps, then once more under a tensor if."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, mem, lens):
        q = F.mean(mem, axis=1)
        for _ in range(3):
            s = F.batch_dot(mem, q.expand_dims(2)).reshape((0, -1))
            s = F.SequenceMask(s, sequence_length=F.maximum(lens, 1), use_sequence_length=True,
                               value=-1e9, axis=1)
            q = F.batch_dot(F.softmax(s, axis=1).expand_dims(1), mem).reshape((0, -1))
        if F.sum(q) > 0:
            q = q * 2
        return q


@program([_rand(4, 3), _f(0, 2, 1, 3)], [_rand(4, 3, seed=1), _f(3, 3, 3, 3)])
class TakeRowsByScheduledIndices(HybridBlock):
    """Each step reads the row a schedule names (F.take of a gathered index), the Python loop
    count from the schedule's static length."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, table, schedule):
        h = F.zeros((3,))
        for k in range(schedule.shape[0]):
            row = F.take(table, schedule[k]).reshape((-1,))
            if F.sum(row * h) > 0.1:
                h = h - row
            else:
                h = F.tanh(h + row)
        return h


@program([_rand(3, 5), _f(4, 0, 2)], [_rand(3, 5, seed=1), _f(1, 1, 1)])
class PickWhereLabelSmoothing(HybridBlock):
    """A loss loop: F.pick the gold class, F.where ignores label 0 (padding)."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, logits, labels):
        total = F.zeros((1,))
        for row, y in zip(logits, labels):
            logp = F.log_softmax(row)
            nll = -(0.9 * F.pick(logp, y, axis=0) + 0.1 * F.mean(logp))
            total = total + F.where(y > 0, nll, F.zeros_like(nll))
        return total
