"""Issue 24 items 2-7, session 23: models ported the way users port them and then exported
(greedy and beam decoders with conds inside loops, attention with SequenceMask and boolean_mask,
variable-length batches, tree models with ``@gluon_cf.recursive``, loops nesting loops and
conds, autograph decoders), each run eagerly and hybridized (values and gradients) against an
oracle, over a history of calls, and exported (``tests/test_hostile_export23.py``).

The oracle is ``plain_forward`` where a program has one (plain Python on NDArrays: loops,
masks and indices read on the host), the converted function's original for ``@autograph``
programs, and the eager gluon_cf block for models of ``gluon_cf.models``."""
import mxnet as mx
import numpy as np
from mxnet.gluon import HybridBlock, nn, rnn

import gluon_cf
from gluon_cf import autograph

import hostile_harness
from hostile_programs4 import _ids, _row
from hostile_programs14 import _rows_of, _scalar
from hostile_programs17b import BAL, comb, forest

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats
H, V = 4, 5


def tokens(*shape, seed=0, high=V):
    return np.random.RandomState(seed).randint(0, high, shape).astype(np.float32)


def _n(v):
    return int(round(_scalar(v)))


# ---- decoders ---------------------------------------------------------------------------------

class _Decoder(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = nn.Embedding(V, H)
            self.cell = rnn.GRUCell(H, input_size=H)
            self.proj = nn.Dense(V, in_units=H)


@program([floats(2), rand(1, H), floats(4)], [floats(0), rand(1, H, seed=1), floats(1)],
         [floats(3), rand(1, H, seed=2) * 3, floats(0)], [floats(1), rand(1, H, seed=3),
                                                          floats(5)])
class GreedyWhileCondOnEos(_Decoder):
    """A greedy decoder: while_loop of n steps (max 5); a cond inside the body keeps the state
    once EOS (token 0) was emitted, else steps the GRU; scores collected."""

    NO_GRAD = (0, 2)

    def hybrid_forward(self, F, token, h, n, **kw):
        def func(i, t, h):
            def step():
                out, (h2,) = self.cell(self.embed(t), [h])
                score = F.log_softmax(self.proj(out))
                return F.argmax(score, axis=-1), h2, F.max(score, axis=-1)
            t2, h2, s = gluon_cf.cond(t < 0.5, lambda: (t, h, F.zeros((1,))), step)
            return [s, t2], [i + 1, t2, h2]
        (scores, toks), (i, t, h) = gluon_cf.while_loop(
            lambda i, t, h: i < n, func, [F.zeros((1,)), token, h], max_iterations=5)
        return scores, toks, h, i

    def plain_forward(self, F, token, h, n, **kw):
        t, scores, toks, i = token, [], [], 0
        while i < min(_n(n), 5):
            if _scalar(t) < 0.5:
                s = F.zeros((1,))
            else:
                out, (h,) = self.cell(self.embed(t), [h])
                score = F.log_softmax(self.proj(out))
                t, s = F.argmax(score, axis=-1), F.max(score, axis=-1)
            scores.append(s)
            toks.append(t)
            i += 1
        pad = 5 - len(scores)
        scores = F.concat(*(scores + [F.zeros((1,))] * pad), dim=0).reshape((5, 1)) \
            if scores else F.zeros((5, 1))
        toks = F.concat(*(toks + [F.zeros((1,))] * pad), dim=0).reshape((5, 1)) \
            if toks else F.zeros((5, 1))
        return scores, toks, h, F.array([i])


@program([floats(1, 2, 3, 4).reshape(4, 1), floats(1, 0, 0, 1).reshape(4, 1), rand(1, H)],
         [floats(3).reshape(1, 1), floats(0).reshape(1, 1), rand(1, H, seed=1)],
         [floats(4, 4, 2, 1, 0, 3).reshape(6, 1), floats(0, 0, 0, 0, 0, 0).reshape(6, 1),
          rand(1, H, seed=2)])
class TeacherForcingForeachCond(_Decoder):
    """Scheduled sampling: a foreach over the target tokens; a cond per step on the force mask
    feeds the target or the model's own last prediction."""

    NO_GRAD = (0, 1)

    def hybrid_forward(self, F, target, force, h, **kw):
        def step(data, states):
            tgt, f = data
            h, prev = states
            t = gluon_cf.cond(f > 0.5, lambda: tgt.reshape((1,)), lambda: prev)
            out, (h,) = self.cell(self.embed(t), [h])
            logits = self.proj(out)
            return logits, [h, F.argmax(logits, axis=-1)]
        logits, (h, _) = gluon_cf.foreach(step, [target, force], [h, F.zeros((1,))])
        return logits, h

    def plain_forward(self, F, target, force, h, **kw):
        prev, outs = F.zeros((1,)), []
        for k in range(target.shape[0]):
            t = target[k:k + 1] if _scalar(force[k]) > 0.5 else prev
            out, (h,) = self.cell(self.embed(t), [h])
            logits = self.proj(out)
            outs.append(logits)
            prev = F.argmax(logits, axis=-1)
        return F.stack(*outs), h


@program([rand(1, H), floats(3)], [rand(1, H, seed=1), floats(1)], [rand(1, H, seed=2),
                                                                    floats(0)])
class BeamSearchWhileTwoBeams(_Decoder):
    """Beam search with 2 beams in a while_loop: each step expands both beams' GRU states,
    takes the top 2 of 2*V scores, and gathers the chosen beams' states with take."""

    NO_GRAD = (1,)

    def hybrid_forward(self, F, h0, n, **kw):
        def func(i, toks, hs, scores):
            out, (h2,) = self.cell(self.embed(toks), [hs])
            total = F.broadcast_add(F.log_softmax(self.proj(out)), scores.reshape((-1, 1)))
            best, idx = F.topk(total.reshape((1, -1)), k=2, ret_typ="both")
            best, idx = best.reshape((-1,)), idx.reshape((-1,))
            beam = F.floor(idx / V)
            return [idx - beam * V, beam], [i + 1, idx - beam * V, F.take(h2, beam), best]
        (toks, beams), (i, t, hs, scores) = gluon_cf.while_loop(
            lambda i, *_: i < n, func,
            [F.zeros((1,)), F.ones((2,)), F.broadcast_axis(h0, axis=0, size=2),
             F.concat(F.zeros((1,)), F.ones((1,)) * -1e4, dim=0)], max_iterations=3)
        return toks, beams, hs, scores

    def plain_forward(self, F, h0, n, **kw):
        toks, hs, scores = F.ones((2,)), F.broadcast_axis(h0, axis=0, size=2), F.array([0, -1e4])
        tl, bl = [], []
        for _ in range(min(_n(n), 3)):
            out, (h2,) = self.cell(self.embed(toks), [hs])
            total = F.broadcast_add(F.log_softmax(self.proj(out)), scores.reshape((-1, 1)))
            best, idx = F.topk(total.reshape((1, -1)), k=2, ret_typ="both")
            best, idx = best.reshape((-1,)), idx.reshape((-1,))
            beam = F.floor(idx / V)
            toks, hs, scores = idx - beam * V, F.take(h2, beam), best
            tl.append(toks)
            bl.append(beam)
        pad = [F.zeros((2,))] * (3 - len(tl))
        return F.stack(*(tl + pad)), F.stack(*(bl + pad)), hs, scores


@program([floats(2), rand(1, H)], [floats(0), rand(1, H, seed=1)], [floats(4), rand(1, H, seed=4)])
class AutographRangeDecoderBreak(_Decoder):
    """The commonest decoder shape: ``for t in range(5)`` with one append and a tensor
    ``break`` on EOS; the tokens stacked."""

    NO_GRAD = (0,)

    @autograph
    def hybrid_forward(self, F, token, h):
        outs = []
        for t in range(5):
            out, (h,) = self.cell(self.embed(token), [h])
            token = F.argmax(self.proj(out), axis=-1)
            outs.append(self.proj(out))
            if F.sum(token == 0) > 0:
                break
        return F.stack(*outs, axis=0), h


@program([rand(3, 1, H), floats(3)], [rand(5, 1, H, seed=1), floats(1)],
         [rand(2, 1, H, seed=2), floats(0)])
class Seq2SeqEncodeThenAttendDecode(HybridBlock):
    """An encoder foreach (GRU) over the source, then a while_loop decoder of n steps attending
    over the encoder outputs by dot product (softmax over source positions)."""

    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.enc = rnn.GRUCell(H, input_size=H)
            self.dec = rnn.GRUCell(H, input_size=H)

    def hybrid_forward(self, F, src, n):
        mem, (h,) = gluon_cf.foreach(lambda x, s: self.enc(x, s), src,
                                     [F.zeros_like(F.sum(src, axis=0))])
        mem = mem.reshape((-3, -2))                                  # (S, H)

        def func(i, h):
            w = F.softmax(F.dot(mem, h.reshape((-1,))))
            ctx = F.dot(w.reshape((1, -1)), mem)
            out, (h,) = self.dec(ctx, [h])
            return [out, w], [i + 1, h]
        (outs, ws), (i, h) = gluon_cf.while_loop(lambda i, h: i < n, func,
                                                 [F.zeros((1,)), h], max_iterations=3)
        return outs, ws, h

    def plain_forward(self, F, src, n):
        h, mem = F.zeros((1, H)), []
        for k in range(src.shape[0]):
            out, (h,) = self.enc(src[k], [h])
            mem.append(out)
        mem = F.concat(*mem, dim=0)
        outs, ws = [], []
        for _ in range(min(_n(n), 3)):
            w = F.softmax(F.dot(mem, h.reshape((-1,))))
            out, (h,) = self.dec(F.dot(w.reshape((1, -1)), mem), [h])
            outs.append(out)
            ws.append(w)
        pad = 3 - len(outs)
        outs = F.stack(*(outs + [F.zeros((1, H))] * pad))
        ws = F.stack(*(ws + [F.zeros((src.shape[0],))] * pad))
        return outs, ws, h


@program([rand(1, H)], [rand(1, H, seed=1) * 4], [rand(1, H, seed=2) - 1])
class AutographWhileDecoderIfElse(HybridBlock):
    """An autograph while over a tensor counter with an if/else inside on the state's sum; the
    outputs collected in a list and joined by concat."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(H, in_units=H)

    @autograph
    def hybrid_forward(self, F, h):
        i = F.zeros((1,))
        outs = []
        while i < 4:
            gluon_cf.max_iterations(4)
            if F.sum(h) > 0:
                h = F.tanh(self.fc(h))
            else:
                h = h * 0.5 + 0.25
            outs.append(h)
            i = i + 1
        return F.concat(*outs, dim=0), h


# ---- attention with masks, variable-length batches ----------------------------------------------

@program([rand(3, 2, H), rand(2, 4, H, seed=1), floats(4, 2)],
         [rand(1, 3, H, seed=2), rand(3, 2, H, seed=3), floats(1, 2, 2)],
         [rand(2, 1, H, seed=4), rand(1, 5, H, seed=5), floats(5)])
class SequenceMaskAttentionInForeach(HybridBlock):
    """Dot attention in a foreach over decoder steps (T, B, H): the scores (B, S) masked past
    each row's valid length by SequenceMask (value -1e9, axis 1), softmax, context."""

    NO_GRAD = (2,)

    def hybrid_forward(self, F, dec, memory, valid):
        def step(q, states):
            score = F.batch_dot(memory, (q + states[0]).expand_dims(2)).reshape((0, -1))
            score = F.SequenceMask(score, sequence_length=valid, use_sequence_length=True,
                                   value=-1e9, axis=1)
            w = F.softmax(score, axis=-1)
            ctx = F.batch_dot(w.expand_dims(1), memory).reshape((0, -1))
            return w, [F.tanh(ctx + q)]
        ws, (h,) = gluon_cf.foreach(step, dec, [F.zeros_like(F.sum(dec, axis=0))])
        return ws, h

    def plain_forward(self, F, dec, memory, valid):
        h, ws = F.zeros(dec.shape[1:]), []
        lens = _ids(valid)
        for t in range(dec.shape[0]):
            q = dec[t]
            score = F.batch_dot(memory, (q + h).expand_dims(2)).reshape((0, -1))
            keep = np.array([[1.0 if s < n else 0.0 for s in range(memory.shape[1])]
                             for n in lens], np.float32)
            score = F.where(F.array(keep), score, F.ones_like(score) * -1e9)
            w = F.softmax(score, axis=-1)
            h = F.tanh(F.batch_dot(w.expand_dims(1), memory).reshape((0, -1)) + q)
            ws.append(w)
        return F.stack(*ws), h


def _masked_sum(F, rows, mask):
    """The sum of the rows ``mask`` keeps, as plain MXNet can differentiate with none kept."""
    return F.sum(F.broadcast_mul(rows, mask.reshape((-1, 1))), axis=0)


@program([rand(3, 4, H), floats(1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1).reshape(3, 4)],
         [rand(2, 3, H, seed=1), floats(0, 0, 0, 0, 0, 0).reshape(2, 3)],
         [rand(1, 2, H, seed=2), floats(1, 1).reshape(1, 2)])
class BooleanMaskInForeachBodyEmptySteps(HybridBlock):
    """Each step keeps the rows of its slice a mask keeps (some steps keep none) by
    boolean_mask and sums them into the state; the count kept is the step's output."""

    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        def step(data, states):
            rows, mask = data
            kept = F.contrib.boolean_mask(rows, mask)
            return F.sum(mask).reshape((1,)), [states[0] + F.sum(kept, axis=0) * 2]
        counts, (s,) = gluon_cf.foreach(step, [x, m], [F.zeros((H,))])
        return counts, s

    def plain_forward(self, F, x, m):
        s = F.zeros((H,))
        counts = []
        for t in range(x.shape[0]):
            s = s + _masked_sum(F, x[t], m[t]) * 2
            counts.append(F.sum(m[t]).reshape((1,)))
        return F.stack(*counts), s


@program([rand(3, 1, seed=2), floats(-2)], [rand(5, 1), floats(0.5)],
         [rand(4, 1, seed=1), floats(2)])
class BooleanMaskInWhileBodyShrinks(HybridBlock):
    """A while_loop whose body keeps, by boolean_mask, the entries above a threshold and adds
    their sum (of none, some steps) to an accumulator; the threshold falls each step."""

    NO_GRAD = (1,)

    def hybrid_forward(self, F, v, thr):
        def func(i, acc, t):
            kept = F.contrib.boolean_mask(v, F.broadcast_greater(v, t).reshape((-1,)))
            return [], [i + 1, acc + F.sum(kept * kept), t - 0.75]
        _, (i, acc, t) = gluon_cf.while_loop(lambda i, acc, t: i < 3, func,
                                             [F.zeros((1,)), F.zeros((1,)), thr],
                                             max_iterations=3)
        return acc, t

    def plain_forward(self, F, v, thr):
        acc, t = F.zeros((1,)), thr
        for _ in range(3):
            acc = acc + F.sum(F.broadcast_greater(v, t) * v * v).reshape((1,))
            t = t - 0.75
        return acc, t


@program([rand(4, 2, H), floats(4, 1)], [rand(3, 3, H, seed=1), floats(0, 3, 2)],
         [rand(1, 1, H, seed=2), floats(1)], [rand(2, 2, H, seed=3), floats(0, 0)])
class VariableLengthMaskedMeanPool(HybridBlock):
    """Mean pooling over a padded batch (T, B, H) by valid lengths (some 0): SequenceMask, a
    sum over time divided by max(length, 1), then a Dense."""

    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(2, in_units=H)

    def hybrid_forward(self, F, x, lengths):
        masked = F.SequenceMask(x, sequence_length=lengths, use_sequence_length=True)
        mean = F.broadcast_div(F.sum(masked, axis=0),
                               F.maximum(lengths, F.ones_like(lengths)).reshape((-1, 1)))
        return self.fc(mean), masked

    def plain_forward(self, F, x, lengths):
        keep = np.array([[1.0 if t < n else 0.0 for n in _ids(lengths)]
                         for t in range(x.shape[0])], np.float32)
        masked = F.broadcast_mul(x, F.array(keep).expand_dims(2))
        mean = F.broadcast_div(F.sum(masked, axis=0),
                               F.maximum(lengths, F.ones_like(lengths)).reshape((-1, 1)))
        return self.fc(mean), masked


@program([rand(5, H), floats(1, 0, 1, 1, 0)], [rand(3, H, seed=1), floats(0, 0, 1)],
         [rand(2, H, seed=2), floats(1, 1)])
class BooleanMaskRowsThenForeachRnn(HybridBlock):
    """An RNN over the rows a mask keeps (a run-time number of steps, at least one)."""

    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.RNNCell(H, input_size=H)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        outs, (h,) = gluon_cf.foreach(lambda r, s: self.cell(r.reshape((1, -1)), s), kept,
                                      [F.zeros((1, H))])
        return outs, h

    def plain_forward(self, F, x, m):
        h, outs = F.zeros((1, H)), []
        for k, keep in enumerate(_ids(m)):
            if keep:
                out, (h,) = self.cell(x[k].reshape((1, -1)), [h])
                outs.append(out)
        return F.stack(*outs), h


@program([rand(3, H), floats(2), floats(1, 1, 0)], [rand(3, H, seed=1), floats(0), floats(0, 0, 0)],
         [rand(3, H, seed=2), floats(3), floats(1, 0, 1)])
class MaskedSoftmaxAttentionInWhile(HybridBlock):
    """A while_loop of n glimpses over memory rows a mask allows (none, in one input: then
    every weight is equal, softmax of equal -1e9s), the query moved by the context."""

    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, mem, n, allowed):
        def func(i, q):
            score = F.dot(mem, q.reshape((-1,)))
            score = F.where(allowed > 0, score, F.ones_like(score) * -1e9)
            w = F.softmax(score)
            return w, [i + 1, F.tanh(q + F.dot(w.reshape((1, -1)), mem))]
        ws, (i, q) = gluon_cf.while_loop(lambda i, q: i < n, func,
                                         [F.zeros((1,)), F.mean(mem, axis=0, keepdims=True)],
                                         max_iterations=3)
        return ws, q

    def plain_forward(self, F, mem, n, allowed):
        q, ws = F.mean(mem, axis=0, keepdims=True), []
        for _ in range(min(_n(n), 3)):
            score = F.dot(mem, q.reshape((-1,)))
            score = F.where(allowed > 0, score, F.ones_like(score) * -1e9)
            w = F.softmax(score)
            ws.append(w)
            q = F.tanh(q + F.dot(w.reshape((1, -1)), mem))
        ws = F.stack(*(ws + [F.zeros((mem.shape[0],))] * (3 - len(ws))))
        return ws, q


@program([rand(4, 2, H), floats(4, 2)], [rand(3, 3, H, seed=1), floats(1, 3, 2)],
         [rand(2, 1, H, seed=2), floats(2)])
class GruEncoderSequenceLastClassifier(HybridBlock):
    """A GRU cell in a foreach over a padded batch, the outputs' last valid step by
    SequenceLast, a Dense classifier on it."""

    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.GRUCell(H, input_size=H)
            self.out = nn.Dense(3, in_units=H)

    def hybrid_forward(self, F, x, lengths):
        outs, _ = gluon_cf.foreach(lambda r, s: self.cell(r, s), x,
                                   [F.zeros_like(F.sum(x, axis=0))])
        last = F.SequenceLast(outs, sequence_length=lengths, use_sequence_length=True)
        return F.log_softmax(self.out(last))

    def plain_forward(self, F, x, lengths):
        h, outs = F.zeros(x.shape[1:]), []
        for t in range(x.shape[0]):
            out, (h,) = self.cell(x[t], [h])
            outs.append(out)
        last = F.concat(*[outs[n - 1][b:b + 1] for b, n in enumerate(_ids(lengths))], dim=0)
        return F.log_softmax(self.out(last))


# ---- trees --------------------------------------------------------------------------------------

TREES = (forest([BAL, None, (None, None)], seed=201, features=H),
         forest([None], seed=202, features=H),
         forest([comb(4), BAL], seed=203, features=H))


@program(*TREES)
class TreeRnnCapturingOuterDenseAndContext(HybridBlock):
    """A user's TreeRNN: the recursive function reads a Dense of the block and a context
    vector computed outside it from all the nodes (a captured outer value)."""

    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.combine = nn.Dense(H, in_units=2 * H)

    def hybrid_forward(self, F, x, left, right, roots):
        ctx = F.mean(x, axis=0, keepdims=True) * 0.5

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.take(x, i) + ctx,
                lambda: F.tanh(self.combine(F.concat(node(F.take(left, i)),
                                                     node(F.take(right, i)), dim=1)) + ctx))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]
        ctx = F.mean(x, axis=0, keepdims=True) * 0.5

        def node(i):
            i = _row(i, n)
            if lt[i] < 0:
                return x[i:i + 1] + ctx
            return F.tanh(self.combine(F.concat(node(lt[i]), node(rt[i]), dim=1)) + ctx)
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*TREES)
class ThreeWayMutualRecursionByLevel(HybridBlock):
    """Three functions calling each other in turn by level (a -> b -> c -> a), each its own
    scale; leaves read x."""

    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        table = {}

        def make(name, scale, nxt):
            def body(i):
                return gluon_cf.cond(
                    F.take(left, i) < 0, lambda: F.take(x, i) * scale,
                    lambda: F.tanh(table[nxt](F.take(left, i)) * scale -
                                   table[nxt](F.take(right, i))))
            return gluon_cf.recursive(body, name=name)
        table["a"] = make("a", 1.0, "b")
        table["b"] = make("b", 2.0, "c")
        table["c"] = make("c", -0.5, "a")
        return _rows_of(F, table["a"], roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]
        scales = (1.0, 2.0, -0.5)

        def node(i, level):
            i, s = _row(i, n), scales[level % 3]
            if lt[i] < 0:
                return x[i:i + 1] * s
            return F.tanh(node(lt[i], level + 1) * s - node(rt[i], level + 1))
        return F.concat(*[node(r, 0) for r in _ids(roots)], dim=0)


def csr(children, roots, seed):
    """``[x, ptr, cidx, roots]`` of an n-ary forest: ``children[i]`` lists node i's children."""
    ptr, cidx = [0], []
    for kids in children:
        cidx.extend(kids)
        ptr.append(len(cidx))
    return [rand(len(children), H, seed=seed), floats(*ptr), floats(*(cidx or [0])),
            floats(*roots)]


# 0 -> (1, 2, 3), 2 -> (4), 4 -> (5, 6, 7, 8); 9 alone; 10 -> (4) (shared)
NARY = (csr([[1, 2, 3], [], [4], [], [5, 6, 7, 8], [], [], [], [], [], [4]], [0, 9, 10], 211),
        csr([[], [], []], [2, 0], 212),
        csr([[1], [2], [3], [4], []], [0, 3], 213))


@program(*NARY)
class NaryCountNodesEmptyLoopBase(HybridBlock):
    """Counting the nodes under each root of an n-ary CSR tree: count(i) = 1 + the sum of the
    children's counts in a while_loop over ptr[i]..ptr[i+1]; a leaf's loop runs no step (the
    base case is the empty loop), and a weighted feature sum rides along."""

    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, ptr, cidx, roots):
        @gluon_cf.recursive(max_depth=16)
        def count(i):
            def func(k, c, s):
                cc, cs = count(F.take(cidx, k))
                return [], [k + 1, c + cc, s + cs * 0.5]
            _, (_, c, s) = gluon_cf.while_loop(
                lambda k, c, s: k < F.take(ptr, i + 1), func,
                [F.take(ptr, i), F.ones((1,)), F.take(x, i)], max_iterations=4)
            return c, s
        cs, _ = gluon_cf.foreach(lambda r, _: (list(count(r.reshape((1,)))), []), roots, [])
        return cs[0], cs[1].reshape((-3, -2))

    def plain_forward(self, F, x, ptr, cidx, roots):
        p, c, n = _ids(ptr), _ids(cidx), x.shape[0]

        def count(i):
            i = _row(i, n)
            total, s = 1.0, x[i:i + 1]
            for k in range(p[i], min(p[i + 1], p[i] + 4)):
                cc, cs = count(c[k])
                total, s = total + cc, s + cs * 0.5
            return total, s
        res = [count(r) for r in _ids(roots)]
        return F.array([[t] for t, _ in res]), F.concat(*[s for _, s in res], dim=0)


@program(*NARY)
class NaryMutualNodeAndChildList(HybridBlock):
    """n-ary mutual recursion: node(i) = tanh(W [x_i, kids(ptr[i], ptr[i+1])]); kids(k, end)
    recurses along the child range (an empty range is zeros)."""

    NO_GRAD = (1, 2, 3)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.w = nn.Dense(H, in_units=2 * H)

    def hybrid_forward(self, F, x, ptr, cidx, roots):
        @gluon_cf.recursive
        def kids(k, end):
            return gluon_cf.cond(k >= end, lambda: F.zeros((1, H)),
                                 lambda: node(F.take(cidx, k)) + kids(k + 1, end))

        @gluon_cf.recursive
        def node(i):
            return F.tanh(self.w(F.concat(F.take(x, i), kids(F.take(ptr, i),
                                                              F.take(ptr, i + 1)), dim=1)))
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, ptr, cidx, roots):
        p, c, n = _ids(ptr), _ids(cidx), x.shape[0]

        def node(i):
            i = _row(i, n)
            ks = F.zeros((1, H))
            for k in range(p[i], p[i + 1]):
                ks = ks + node(c[k])
            return F.tanh(self.w(F.concat(x[i:i + 1], ks, dim=1)))
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


@program(*NARY)
class NaryForeachOverMaskedChildren(HybridBlock):
    """n-ary recursion whose internal nodes run a foreach over their children, taken from cidx
    by a boolean_mask of the range ptr[i]..ptr[i+1] (a run-time-length foreach inside the
    recursion); a leaf (no child) is a cond's other branch."""

    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, ptr, cidx, roots):
        positions = F.arange(0, 4096).slice_like(cidx, axes=(0,))

        @gluon_cf.recursive(max_depth=16)
        def node(i):
            start, end = F.take(ptr, i), F.take(ptr, i + 1)

            def internal():
                keep = F.broadcast_greater_equal(positions, start) * \
                    F.broadcast_lesser(positions, end)
                kids = F.contrib.boolean_mask(cidx, keep)
                _, (acc,) = gluon_cf.foreach(
                    lambda k, s: ([], [s[0] + node(k.reshape((1,)))]), kids,
                    [F.zeros_like(F.take(x, i))])
                return F.tanh(F.take(x, i) + acc)
            return gluon_cf.cond(end - start < 1, lambda: F.take(x, i) * 2, internal)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, ptr, cidx, roots):
        p, c, n = _ids(ptr), _ids(cidx), x.shape[0]

        def node(i):
            i = _row(i, n)
            if p[i + 1] - p[i] < 1:
                return x[i:i + 1] * 2
            acc = F.zeros((1, H))
            for k in range(p[i], p[i + 1]):
                acc = acc + node(c[k])
            return F.tanh(x[i:i + 1] + acc)
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


def _binary_tokens(trees, seed):
    x, left, right, roots = forest(trees, seed=seed, features=1)
    return [tokens(len(left), seed=seed), left, right, roots]


@program(_binary_tokens([BAL, (None, None)], 221), _binary_tokens([None], 222),
         _binary_tokens([comb(3)], 223))
class GluonCfTreeLstmModel(HybridBlock):
    """gluon_cf.models' TreeLSTM classifier over a forest of token trees (oracle: eager)."""

    NO_GRAD = (0, 1, 2, 3)
    EAGER_ORACLE = True

    def __init__(self):
        super().__init__()
        from gluon_cf.models.recursive import TreeLSTM
        with self.name_scope():
            self.tree = TreeLSTM(V, H, H, 3)

    def hybrid_forward(self, F, toks, left, right, roots):
        return self.tree(toks, left, right, roots)


def _nary_tokens(children, roots, seed):
    _, ptr, cidx, r = csr(children, roots, seed)
    return [tokens(len(children), seed=seed), ptr, cidx, r]


@program(_nary_tokens([[1, 2, 3], [], [4], [], []], [0], 231),
         _nary_tokens([[]], [0], 232),
         _nary_tokens([[1, 2], [], [], [4], []], [0, 3], 233))
class GluonCfChildSumTreeLstmModel(HybridBlock):
    """gluon_cf.models' ChildSumTreeLSTM (n-ary, CSR) with max_children=3 (oracle: eager)."""

    NO_GRAD = (0, 1, 2, 3)
    EAGER_ORACLE = True

    def __init__(self):
        super().__init__()
        from gluon_cf.models.recursive import ChildSumTreeLSTM
        with self.name_scope():
            self.tree = ChildSumTreeLSTM(V, H, H, 3, max_children=3)

    def hybrid_forward(self, F, toks, ptr, cidx, roots):
        return self.tree(toks, ptr, cidx, roots)


@program([rand(1, H)], [rand(1, H, seed=1) * 3], [rand(1, H, seed=2) - 1])
class TopDownTreeDecoderMaxDepth(HybridBlock):
    """A top-down decoder: a score decides whether a node splits (depth below 3); the two
    children come from two Dense cells; the leaves summed."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.score = nn.Dense(1, in_units=H)
            self.lc = nn.Dense(H, in_units=H)
            self.rc = nn.Dense(H, in_units=H)

    def hybrid_forward(self, F, h):
        @gluon_cf.recursive(max_depth=6)
        def grow(h, depth):
            split = (F.sum(self.score(h)) > -0.3) * (F.sum(depth) < 3)
            return gluon_cf.cond(split, lambda: grow(F.tanh(self.lc(h)), depth + 1) +
                                 grow(F.tanh(self.rc(h)) * 0.5, depth + 1), lambda: h)
        return grow(h, F.zeros((1,)))

    def plain_forward(self, F, h):
        def grow(h, depth):
            if _scalar(F.sum(self.score(h))) > -0.3 and depth < 3:
                return grow(F.tanh(self.lc(h)), depth + 1) + \
                    grow(F.tanh(self.rc(h)) * 0.5, depth + 1)
            return h
        return grow(h, 0)


@program(*TREES)
class RecursionLeafRunsWhileCondInside(HybridBlock):
    """Each leaf runs a while_loop of 2 steps with a cond inside on the state's sign; internal
    nodes add their children's values."""

    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        def leaf(i):
            def func(k, v):
                v = gluon_cf.cond(F.sum(v) > 0, lambda: v * 0.5, lambda: v - 0.25)
                return [], [k + 1, v]
            return gluon_cf.while_loop(lambda k, v: k < 2, func, [F.zeros((1,)), F.take(x, i)],
                                       max_iterations=2)[1][1]

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: leaf(i),
                                 lambda: node(F.take(left, i)) + node(F.take(right, i)) * 2)
        return _rows_of(F, node, roots)

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def node(i):
            i = _row(i, n)
            if lt[i] < 0:
                v = x[i:i + 1]
                for _ in range(2):
                    v = v * 0.5 if _scalar(F.sum(v)) > 0 else v - 0.25
                return v
            return node(lt[i]) + node(rt[i]) * 2
        return F.concat(*[node(r) for r in _ids(roots)], dim=0)


# ---- loops holding loops and conds --------------------------------------------------------------

@program([rand(3, H), floats(2)], [rand(2, H, seed=1), floats(0)], [rand(1, H, seed=2), floats(3)])
class ForeachWhileCondNested(HybridBlock):
    """A foreach over rows whose body runs a while_loop of n steps (max 3) whose body has a
    cond on the value's sum."""

    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        def step(row, states):
            def func(k, v):
                v = gluon_cf.cond(F.sum(v) > 0, lambda: F.tanh(v) - 0.5, lambda: v * -1.5)
                return [], [k + 1, v]
            _, (_, v) = gluon_cf.while_loop(lambda k, v: k < n, func,
                                            [F.zeros((1,)), row + states[0]], max_iterations=3)
            return v, [v * 0.5]
        outs, (s,) = gluon_cf.foreach(step, x, [F.zeros((H,))])
        return outs, s

    def plain_forward(self, F, x, n):
        s, outs = F.zeros((H,)), []
        for t in range(x.shape[0]):
            v = x[t] + s
            for _ in range(min(_n(n), 3)):
                v = F.tanh(v) - 0.5 if _scalar(F.sum(v)) > 0 else v * -1.5
            outs.append(v)
            s = v * 0.5
        return F.stack(*outs), s


@program([rand(3, H), floats(2)], [rand(1, H, seed=1), floats(0)], [rand(4, H, seed=2), floats(1)])
class WhileBodyRunsForeachOverData(HybridBlock):
    """A while_loop of n steps whose body runs a foreach over all the rows (an inner RNN pass
    per outer step), the inner final state feeding the outer state."""

    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.w = self.params.get("w", shape=(H,), init=mx.init.Uniform(0.9))

    def hybrid_forward(self, F, x, n, w):
        def func(i, h):
            outs, (g,) = gluon_cf.foreach(lambda r, s: (s[0] * w, [F.tanh(r + s[0] * w)]), x,
                                          [h])
            return F.sum(outs, axis=0), [i + 1, g]
        sums, (i, h) = gluon_cf.while_loop(lambda i, h: i < n, func,
                                           [F.zeros((1,)), F.zeros((H,))], max_iterations=3)
        return sums, h

    def plain_forward(self, F, x, n, w):
        h, sums = F.zeros((H,)), []
        for _ in range(min(_n(n), 3)):
            total = F.zeros((H,))
            for t in range(x.shape[0]):
                total = total + h * w
                h = F.tanh(x[t] + h * w)
            sums.append(total)
        return F.stack(*(sums + [F.zeros((H,))] * (3 - len(sums)))), h


@program([rand(3, H)], [rand(5, H, seed=1) - 1], [rand(1, H, seed=2) + 1])
class CondBranchesRunDifferentForeach(HybridBlock):
    """A cond whose branches each run a foreach, over the rows or over the reversed rows, with
    different cells."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.a = rnn.RNNCell(H, input_size=H)
            self.b = rnn.RNNCell(H, input_size=H)

    def hybrid_forward(self, F, x):
        def run(cell, data):
            _, (h,) = gluon_cf.foreach(lambda r, s: cell(r.reshape((1, -1)), s), data,
                                       [F.zeros((1, H))])
            return h
        return gluon_cf.cond(F.sum(x) > 0, lambda: run(self.a, x),
                             lambda: run(self.b, F.flip(x, axis=0)) * 2)

    def plain_forward(self, F, x):
        cell, rows, k = (self.a, x, 1) if _scalar(F.sum(x)) > 0 else \
            (self.b, F.flip(x, axis=0), 2)
        h = F.zeros((1, H))
        for t in range(rows.shape[0]):
            _, (h,) = cell(rows[t].reshape((1, -1)), [h])
        return h * k


@program([rand(2, 3, H)], [rand(1, 2, H, seed=1)], [rand(3, 1, H, seed=2)])
class ForeachForeachCondThreeLevels(HybridBlock):
    """foreach over sentences, foreach over words, a cond per word on its sum."""

    def hybrid_forward(self, F, x):
        def sentence(words, states):
            def word(w, s):
                v = gluon_cf.cond(F.sum(w) > 0, lambda: s[0] + w, lambda: s[0] * 0.5 - w)
                return v, [v]
            vs, (last,) = gluon_cf.foreach(word, words, [states[0]])
            return F.max(vs, axis=0), [last * 0.25]
        outs, (s,) = gluon_cf.foreach(sentence, x, [F.zeros((H,))])
        return outs, s

    def plain_forward(self, F, x):
        s, outs = F.zeros((H,)), []
        for i in range(x.shape[0]):
            v, vs = s, []
            for j in range(x.shape[1]):
                w = x[i, j]
                v = v + w if _scalar(F.sum(w)) > 0 else v * 0.5 - w
                vs.append(v)
            outs.append(F.max(F.stack(*vs), axis=0))
            s = v * 0.25
        return F.stack(*outs), s


@program([rand(4, 2)], [rand(0, 2)], [rand(1, 2, seed=1)])
class ZeroStepWhileReadsFinalVarsOnly(HybridBlock):
    """A while_loop over the rows (a count from shape_array, 0 for no row) whose final
    variables alone are read: a loop of no step returns its initial values."""

    def hybrid_forward(self, F, x):
        n = F.shape_array(x).slice_axis(axis=0, begin=0, end=1).astype("float32")
        _, (i, s) = gluon_cf.while_loop(
            lambda i, s: i < n, lambda i, s: ([], [i + 1, s * 0.5 + 1]),
            [F.zeros((1,)), F.ones((2,)) * 3], max_iterations=4)
        return i, F.broadcast_add(s, F.sum(x))

    def plain_forward(self, F, x):
        s = F.ones((2,)) * 3
        for _ in range(min(x.shape[0], 4)):
            s = s * 0.5 + 1
        return F.array([min(x.shape[0], 4)]), s + F.sum(x)


# ---- autograph ----------------------------------------------------------------------------------

@program([rand(2, 3, 2)], [rand(3, 1, 2, seed=1)], [rand(1, 4, 2, seed=2)])
class AutographNestedForIfInner(HybridBlock):
    """Nested for loops with an if/else in the inner body; per-sentence results collected."""

    @autograph
    def hybrid_forward(self, F, x):
        res = []
        for sent in x:
            acc = F.zeros((2,))
            for w in sent:
                if F.sum(w) > 0:
                    acc = acc + w
                else:
                    acc = acc * 0.5
            res.append(acc)
        return F.stack(*res)


@program([rand(4, 3)], [rand(2, 3, seed=1) + 2], [rand(5, 3, seed=2) - 0.5])
class AutographWhileBreakConcatItems(HybridBlock):
    """A while over rows with a break on a running sum; the collected rows joined by
    F.concat (dim 0) after the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        n = F.slice_axis(F.shape_array(x), axis=0, begin=0, end=1).astype("float32")
        i = F.zeros((1,))
        total = F.zeros((1, 3))
        items = []
        while i < n:
            gluon_cf.max_iterations(5)
            total = total + F.take(x, i)
            items.append(total * 2)
            i = i + 1
            if F.sum(total) > 3:
                break
        return F.concat(*items, dim=0), total


@program([rand(3, 2)], [rand(1, 2, seed=1)], [rand(4, 2, seed=2)])
class AutographListWithEarlierItemsTwoLoops(HybridBlock):
    """A list holding an item before the loops, appended by two loops (forward and reversed
    rows), stacked after."""

    @autograph
    def hybrid_forward(self, F, x):
        items = [F.ones((2,))]
        for r in x:
            items.append(r * 2)
        for r in reversed(x):
            items.append(F.tanh(r))
        return F.stack(*items)


@program([rand(4, 3)], [rand(2, 3, seed=1) - 1], [rand(3, 3, seed=2) + 1])
class AutographLoopAfterSizeChangingIf(HybridBlock):
    """An if whose branches give different row counts (the rows, or the rows twice), then a
    for over the result with a running value."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            rows = x
        else:
            rows = F.concat(x, x * -1, dim=0)
        h = F.zeros((3,))
        for r in rows:
            h = F.tanh(h + r)
        return h


@program([rand(3, 2), floats(1, 0, 1)], [rand(4, 2, seed=1), floats(1, 1, 1, 1)],
         [rand(2, 2, seed=2), floats(0, 1)])
class AutographForOverMaskedRowsWithIf(HybridBlock):
    """for over the rows boolean_mask keeps (at least one), with an if in the body."""

    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, m):
        h = F.zeros((2,))
        for r in F.contrib.boolean_mask(x, m):
            if F.sum(r) > 0:
                h = h + r
            else:
                h = h - r * 0.5
        return h


@program([floats(1), rand(1, H)], [floats(0), rand(1, H, seed=1)], [floats(3), rand(1, H, seed=2)])
class AutographGreedyIntTokensWhileBreak(_Decoder):
    """An autograph greedy decoder: a while over a step counter with a break on EOS, tokens
    kept as int32 in a list, stacked and returned as int32 and float."""

    NO_GRAD = (0,)

    @autograph
    def hybrid_forward(self, F, token, h):
        step = F.zeros((1,))
        toks = []
        while step < 4:
            gluon_cf.max_iterations(4)
            out, (h,) = self.cell(self.embed(token), [h])
            token = F.argmax(self.proj(out), axis=-1)
            toks.append(token.astype("int32"))
            step = step + 1
            if F.sum(token) < 0.5:
                break
        return F.stack(*toks), h
