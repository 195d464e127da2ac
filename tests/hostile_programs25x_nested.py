"""Issue 24 item 4, session 25 (with ``hostile_programs25x.py``): nested loops (foreach in
while_loop in cond, while_loop per row of a foreach, foreach over columns in a foreach), conds
whose branches return other sizes followed by loops, int32/int64/float64 loop states,
Embedding/LayerNorm/BatchNorm/Dropout (inference) and LSTMCell/GRUCell stacks unrolled by
foreach, parameters shared between loop bodies, zero-step loops."""
import numpy as np
from mxnet.gluon import HybridBlock, nn, rnn

import gluon_cf

import hostile_harness
from hostile_programs25x import H, V, ints

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats


# ---- nested loops ------------------------------------------------------------------------------

@program([rand(4, H), floats(2)], [rand(3, H, seed=1) - 2, floats(3)],
         [rand(2, H, seed=2) + 1, floats(0)], [rand(5, H, seed=3), floats(1)])
class ForeachInWhileInCond(HybridBlock):
    """cond(sum(x) > 0): a while_loop of n passes (max 3), each a foreach GRU over x starting
    from the previous pass's state; else a Dense of the mean row."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.GRUCell(H, input_size=H)
            self.fc = nn.Dense(H, in_units=H)

    def hybrid_forward(self, F, x, n):
        def passes():
            def func(i, h):
                outs, (h,) = gluon_cf.foreach(lambda a, s: self.cell(a.reshape((1, -1)), s),
                                              x, [h])
                return [F.sum(outs)], [i + 1, h]
            (sums,), (_, h) = gluon_cf.while_loop(lambda i, h: i < n, func,
                                                  [F.zeros((1,)), F.zeros((1, H))],
                                                  max_iterations=3)
            return h, sums
        return gluon_cf.cond(F.sum(x) > 0, passes,
                             lambda: (self.fc(F.mean(x, axis=0, keepdims=True)), F.zeros((3, 1))))


@program([rand(4, 2, low=0, high=1)], [rand(2, 2, seed=1, low=0, high=1)],
         [rand(5, 2, seed=2, low=-1, high=0.4)])
class WhileOfDataCountPerForeachRow(HybridBlock):
    """For each row a while_loop of ceil(3 * row[0]) steps (0 to 3; max 3) halving a value;
    the counts and the values returned per row."""

    def hybrid_forward(self, F, x):
        def func(row, states):
            count = F.ceil(row.slice_axis(axis=0, begin=0, end=1) * 3)
            _, (k, v) = gluon_cf.while_loop(lambda k, v: k < count,
                                            lambda k, v: ([], [k + 1, v * 0.5 + row]),
                                            [F.zeros((1,)), row], max_iterations=3)
            return [k, v], [states[0] + v]
        (ks, vs), (total,) = gluon_cf.foreach(func, x, [F.zeros((2,))])
        return ks, vs, total


@program([rand(3, 4)], [rand(1, 4, seed=1)], [rand(5, 4, seed=2)])
class ForeachOverColumnsInForeachOverRows(HybridBlock):
    """A 2-D scan: an outer foreach over rows, an inner foreach over the row's elements
    carrying the running max; the row's running maxima are the outer outputs."""

    def hybrid_forward(self, F, x):
        def row_func(row, states):
            maxes, (m,) = gluon_cf.foreach(lambda e, s: (F.maximum(s[0], e), [F.maximum(
                s[0], e) + states[0] * 0.1]), row, [F.ones((1,)) * -5])
            return maxes.reshape((-1,)), [m]
        outs, (m,) = gluon_cf.foreach(row_func, x, [F.zeros((1,))])
        return outs, m


@program([rand(3, H), floats(2), floats(2)], [rand(5, H, seed=1), floats(0), floats(3)],
         [rand(2, H, seed=2), floats(3), floats(0)])
class WhileInWhileCountsFromState(HybridBlock):
    """A while_loop of n outer steps whose body runs an inner while_loop of m steps (max 3 each),
    both reading x (run-time rows) through a shared Dense."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(H, in_units=H)

    def hybrid_forward(self, F, x, n, m):
        def outer(i, h):
            _, (_, h) = gluon_cf.while_loop(
                lambda j, h: j < m,
                lambda j, h: ([], [j + 1, F.tanh(self.fc(h) + F.mean(x, axis=0, keepdims=True))]),
                [F.zeros((1,)), h], max_iterations=3)
            return [h], [i + 1, h * 0.5]
        (hs,), (i, h) = gluon_cf.while_loop(lambda i, h: i < n, outer,
                                            [F.zeros((1,)), F.ones((1, H))], max_iterations=3)
        return hs, h


@program([rand(4, H)], [rand(2, H, seed=1) - 1], [rand(6, H, seed=2)])
class CondInsideForeachChoosesSharedDense(HybridBlock):
    """Per row, a cond picks one of two Dense layers (each also used after the loop) by the
    sign of the row's sum; the state carries the chosen branch's count."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.a = nn.Dense(H, in_units=H)
            self.b = nn.Dense(H, in_units=H)

    def hybrid_forward(self, F, x):
        def func(row, states):
            r = row.reshape((1, -1))
            y = gluon_cf.cond(F.sum(r) > 0, lambda: self.a(r + states[0]),
                              lambda: self.b(r) - states[0])
            return y, [F.tanh(y), states[1] + (F.sum(r) > 0)]
        outs, (h, count) = gluon_cf.foreach(func, x, [F.zeros((1, H)), F.zeros((1,))])
        return outs, self.a(h) + self.b(h), count


# ---- conds whose branches differ in size, then loops ------------------------------------------

@program([rand(3, H), floats(1)], [rand(4, H, seed=1), floats(-1)], [rand(1, H, seed=2),
                                                                     floats(1)])
class CondDoublesRowsThenForeachGru(HybridBlock):
    """cond(flag > 0): the rows twice (2T rows) or the rows reversed (T rows); a foreach GRU over
    whichever came out."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.GRUCell(H, input_size=H)

    def hybrid_forward(self, F, x, flag):
        rows = gluon_cf.cond(flag > 0, lambda: F.concat(x, x * 0.5, dim=0),
                             lambda: F.reverse(x, axis=0))
        outs, (h,) = gluon_cf.foreach(lambda a, s: self.cell(a.reshape((1, -1)), s), rows,
                                      [F.zeros((1, H))])
        return outs, h


@program([rand(4, H), floats(2)], [rand(3, H, seed=1), floats(0)], [rand(5, H, seed=2),
                                                                    floats(3)])
class CondFirstRowOrAllThenWhileAttends(HybridBlock):
    """cond(n > 1): all rows, else only the first; a while_loop of n steps (max 3) attends over
    the cond's result (1 or T rows)."""

    def hybrid_forward(self, F, x, n):
        mem = gluon_cf.cond(n > 1, lambda: x * 1.0,
                            lambda: F.slice_axis(x, axis=0, begin=0, end=1))

        def func(i, q):
            w = F.softmax(F.dot(mem, q.reshape((-1,))))
            q = F.dot(w.reshape((1, -1)), mem) + q
            return [w.sum().reshape((1,)), F.max(w).reshape((1,))], [i + 1, q]
        (sums, peaks), (i, q) = gluon_cf.while_loop(
            lambda i, q: i < n, func, [F.zeros((1,)), F.ones((1, H))], max_iterations=3)
        return sums, peaks, q, F.sum(mem, axis=0)


@program([rand(4, 3), floats(1)], [rand(2, 3, seed=1), floats(-1)], [rand(5, 3, seed=2),
                                                                     floats(-2)])
class CondColumnsDifferThenWhileOverRowCount(HybridBlock):
    """cond: x (T, 3) or its rows' sums (T, 1); a while_loop as many steps as the result's
    rows (read from its shape, max 5) summing rows."""

    def hybrid_forward(self, F, x, flag):
        y = gluon_cf.cond(flag > 0, lambda: x * 2, lambda: F.sum(x, axis=1, keepdims=True))
        count = F.shape_array(y).slice_axis(axis=0, begin=0, end=1).astype("float32")
        _, (i, total) = gluon_cf.while_loop(
            lambda i, t: i < count, lambda i, t: ([], [i + 1, t + F.sum(F.take(y, i))]),
            [F.zeros((1,)), F.zeros((1,))], max_iterations=5)
        return total, i, F.sum(y, axis=0)


# ---- dtypes of loop states ----------------------------------------------------------------------

@program([ints(3), ints(4)], [ints(0), ints(2)], [ints(7), ints(1)])
class Int32StatesWhileSumOfSquares(HybridBlock):
    """All-int32 while_loop: i, sum of squares and a product (of a run-time count, max 8)."""

    def hybrid_forward(self, F, n, base):
        def func(i, s, p):
            return [i * i], [i + 1, s + i * i, p * base]
        (sq,), (i, s, p) = gluon_cf.while_loop(
            lambda i, s, p: i < n, func, [F.zeros((1,), dtype="int32"),
                                          F.zeros((1,), dtype="int32"),
                                          F.ones((1,), dtype="int32")], max_iterations=8)
        return sq, i, s, p


@program([ints(3, 1, 4, 1, 5, dtype=np.int64)], [ints(2, dtype=np.int64)],
         [ints(9, 2, 6, dtype=np.int64)])
class Int64ForeachRunningMaxAndSum(HybridBlock):
    """A foreach over int64 data of run-time length: int64 running max and sum states."""

    def hybrid_forward(self, F, x):
        def func(v, states):
            m, s = states
            m = F.maximum(m, v)
            return [m, s + v], [m, s + v]
        (ms, ss), (m, s) = gluon_cf.foreach(
            func, x, [F.zeros((1,), dtype="int64"), F.zeros((1,), dtype="int64")])
        return ms, ss, m, s


@program([rand(5, 3), floats(4)], [rand(2, 3, seed=1), floats(0)], [rand(3, 3, seed=2),
                                                                    floats(2)])
class Float64StateOverFloat32Data(HybridBlock):
    """A while_loop keeping a float64 accumulator of float32 rows (cast in the body), n steps
    (max 4); the result cast back to float32 next to the float64 state."""

    def hybrid_forward(self, F, x, n):
        def func(i, acc):
            row = F.take(x, F.minimum(i, 1)).reshape((-1,)).astype("float64")
            return [acc.astype("float32")], [i + 1, acc * 0.5 + row]
        (outs,), (i, acc) = gluon_cf.while_loop(
            lambda i, acc: i < n, func, [F.zeros((1,)), F.zeros((3,), dtype="float64")],
            max_iterations=4)
        return outs, acc, acc.astype("float32") * 2


# ---- layers inside loops -------------------------------------------------------------------------

@program([floats(1, 3, 2, 4), floats(2)], [floats(0), floats(3)], [floats(4, 4, 1, 2, 0, 3),
                                                                   floats(5)])
class EmbeddingLayerNormDropoutGru(HybridBlock):
    """Token ids (run-time count) embedded, layer-normed and dropped (inference) in a foreach
    GRU's body; the last state through a Dense."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = nn.Embedding(V, H)
            self.norm = nn.LayerNorm(in_channels=H)
            self.drop = nn.Dropout(0.5)
            self.cell = rnn.GRUCell(H, input_size=H)
            self.out = nn.Dense(2, in_units=H)

    def hybrid_forward(self, F, toks, scale):
        def func(t, s):
            e = self.drop(self.norm(F.broadcast_mul(self.embed(t.reshape((1,))), scale)))
            return self.cell(e, s)
        outs, (h,) = gluon_cf.foreach(func, toks, [F.zeros((1, H))])
        return outs, self.out(h)


@program([rand(1, H), floats(3)], [rand(1, H, seed=1), floats(0)], [rand(1, H, seed=2) * 5,
                                                                    floats(5)])
class BatchNormInferenceInWhileBody(HybridBlock):
    """A residual block with BatchNorm (inference, running statistics) applied n times
    (max 5) in a while_loop."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(H, in_units=H)
            self.bn = nn.BatchNorm(in_channels=H)

    def hybrid_forward(self, F, x, n):
        _, (i, y) = gluon_cf.while_loop(
            lambda i, y: i < n, lambda i, y: ([], [i + 1, y + F.relu(self.bn(self.fc(y)))]),
            [F.zeros((1,)), x], max_iterations=5)
        return y, i


@program([rand(3, 1, H), floats(1)], [rand(5, 1, H, seed=1), floats(-1)],
         [rand(1, 1, H, seed=2), floats(1)])
class DropoutInCondBranchesInForeach(HybridBlock):
    """A foreach whose body's cond applies Dropout (inference) on one branch and a Dense on the
    other."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.drop = nn.Dropout(0.3)
            self.fc = nn.Dense(H, in_units=H)

    def hybrid_forward(self, F, x, flag):
        def func(a, s):
            y = gluon_cf.cond(flag > 0, lambda: self.drop(a) + s[0], lambda: self.fc(a) * s[0])
            return y, [F.tanh(y)]
        outs, (h,) = gluon_cf.foreach(func, x, [F.ones((1, H))])
        return outs, h


@program([rand(4, 2, H)], [rand(1, 2, H, seed=1)], [rand(6, 2, H, seed=2)])
class TwoLayerLstmStackReturnsAllStates(HybridBlock):
    """Two LSTMCells stacked in one foreach (batch 2): four states; the top layer's outputs and
    every final state returned."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.l1 = rnn.LSTMCell(H, input_size=H)
            self.l2 = rnn.LSTMCell(H, input_size=H)

    def hybrid_forward(self, F, x):
        def func(a, s):
            o1, (h1, c1) = self.l1(a, [s[0], s[1]])
            o2, (h2, c2) = self.l2(o1, [s[2], s[3]])
            return o2, [h1, c1, h2, c2]
        z = F.zeros_like(F.sum(x, axis=0))
        outs, states = gluon_cf.foreach(func, x, [z, z, z, z])
        return [outs] + list(states)


@program([rand(5, 2, H), floats(3, 5)], [rand(2, 2, H, seed=1), floats(2, 1)],
         [rand(3, 2, H, seed=2), floats(1, 3)])
class BidirectionalGruConcatMaskedMax(HybridBlock):
    """A forward and a backward GRUCell (SequenceReverse by valid length), outputs concatenated,
    masked by SequenceMask(-1e4), max-pooled over time."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fwd = rnn.GRUCell(H, input_size=H)
            self.bwd = rnn.GRUCell(H, input_size=H)

    def hybrid_forward(self, F, x, valid):
        z = F.zeros_like(F.sum(x, axis=0))
        f, _ = gluon_cf.foreach(lambda a, s: self.fwd(a, s), x, [z])
        rev = F.SequenceReverse(x, valid, use_sequence_length=True)
        b, _ = gluon_cf.foreach(lambda a, s: self.bwd(a, s), rev, [z])
        b = F.SequenceReverse(b, valid, use_sequence_length=True)
        both = F.SequenceMask(F.concat(f, b, dim=2), valid, use_sequence_length=True,
                              value=-1e4)
        return F.max(both, axis=0)


# ---- parameters shared between loop bodies; zero-step loops ------------------------------------

@program([rand(4, 1, H), floats(3)], [rand(2, 1, H, seed=1), floats(0)],
         [rand(6, 1, H, seed=2), floats(2)])
class Seq2SeqTiedCellAndEmbedding(HybridBlock):
    """One GRUCell for the encoder (foreach) and the decoder (while_loop); the output layer
    is the embedding's weight transposed (tied), so the decoder's argmax feeds the embedding."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = nn.Embedding(V, H)
            self.cell = rnn.GRUCell(H, input_size=H)

    def hybrid_forward(self, F, src, n):
        _, (h,) = gluon_cf.foreach(lambda a, s: self.cell(a, s), src, [F.zeros((1, H))])
        weight = self.embed.weight.var() if F.__name__.endswith("symbol") else \
            self.embed.weight.data()

        def func(i, tok, h):
            out, (h,) = self.cell(self.embed(tok), [h])
            logits = F.dot(out, weight, transpose_b=True)
            return [logits], [i + 1, F.argmax(logits, axis=-1), h]
        (logits,), (i, tok, h) = gluon_cf.while_loop(
            lambda i, tok, h: i < n, func, [F.zeros((1,)), F.ones((1,)), h], max_iterations=3)
        return logits, tok, h


@program([rand(3, H), floats(0)], [rand(2, H, seed=1), floats(2)], [rand(4, H, seed=2),
                                                                    floats(0)])
class ZeroStepWhileOutputsAndStateThenDense(HybridBlock):
    """A while_loop that runs no step for n = 0 (its outputs zeros, its state the initial),
    both passed through the Dense its body uses."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(H, in_units=H)

    def hybrid_forward(self, F, x, n):
        (outs,), (i, h) = gluon_cf.while_loop(
            lambda i, h: i < n, lambda i, h: ([self.fc(h)], [i + 1, F.tanh(self.fc(h) + F.max(x, axis=0, keepdims=True))]),
            [F.zeros((1,)), F.mean(x, axis=0, keepdims=True)], max_iterations=3)
        return self.fc(outs.reshape((-3, -2))), self.fc(h), i


@program([rand(4, 2), floats(0, 2, 0, 1)], [rand(2, 2, seed=1), floats(0, 0)],
         [rand(3, 2, seed=2), floats(3, 3, 3)])
class ZeroStepInnerWhilePerForeachRow(HybridBlock):
    """A foreach whose per-row while_loop runs counts[t] steps (0 on some rows, max 3),
    returning the inner loop's outputs and states."""

    def hybrid_forward(self, F, x, counts):
        def func(step, states):
            row, c = step
            (vs,), (k, v) = gluon_cf.while_loop(
                lambda k, v: k < c, lambda k, v: ([v], [k + 1, v * 2 + states[0]]),
                [F.zeros((1,)), row], max_iterations=3)
            return [vs, k], [states[0] + v]
        (vs, ks), (total,) = gluon_cf.foreach(func, [x, counts], [F.zeros((2,))])
        return vs, ks, total


@program([rand(4, H), floats(0)], [rand(3, H, seed=1), floats(1)], [rand(5, H, seed=2),
                                                                    floats(0)])
class CondGuardsForeachZeroOrAllRows(HybridBlock):
    """A user's guard for an empty foreach: cond(n > 0) runs a foreach GRU over the rows, else
    returns the initial state; the same cell then steps once on the result."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.GRUCell(H, input_size=H)

    def hybrid_forward(self, F, x, n):
        def run():
            _, (h,) = gluon_cf.foreach(lambda a, s: self.cell(a.reshape((1, -1)), s), x,
                                       [F.zeros((1, H))])
            return h
        h = gluon_cf.cond(n > 0, run, lambda: F.zeros((1, H)))
        out, _ = self.cell(h, [h])
        return out
