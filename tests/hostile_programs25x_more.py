"""Issue 24 item 4, session 25 (with ``hostile_programs25x.py``): more layers and ops in loop
bodies over values of run-time size: batch_dot attention masked on axis 1, a GRU over a
run-time batch, coverage stops, conds of other sizes inside a loop body, topk, gather_nd,
int64 ids, float64 cells, MXNet's own foreach."""
import numpy as np
from mxnet.gluon import HybridBlock, nn, rnn

import gluon_cf

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats
H, V = 4, 5


def _i32(*values):
    return np.array(values, np.int32)


def _i64(*values):
    return np.array(values, np.int64)


@program([rand(2, 5, H), floats(3, 5), floats(2)], [rand(2, 3, H, seed=1), floats(1, 2), floats(0)],
         [rand(2, 6, H, seed=2), floats(6, 1), floats(3)])
class BatchDotAttentionMaskAxis1(HybridBlock):
    """Batched attention by batch_dot over (2, T, H) memory, the (2, T) scores masked by
    SequenceMask(axis=1), div_sqrt_dim, a LayerNorm residual; n steps (max 3)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.norm = nn.LayerNorm(in_channels=H)

    def hybrid_forward(self, F, mem, valid, n):
        def func(i, q):
            s = F.batch_dot(q, mem, transpose_b=True)            # (2,1,T)
            s = F.SequenceMask(s.reshape((0, -1)), valid, use_sequence_length=True, axis=1,
                               value=-1e9)
            w = F.softmax(F.contrib.div_sqrt_dim(s), axis=-1).expand_dims(1)
            q = self.norm(F.batch_dot(w, mem) + q)
            return [F.norm(q, axis=-1)], [i + 1, q]
        (norms,), (i, q) = gluon_cf.while_loop(lambda i, q: i < n, func,
                                               [F.zeros((1,)), F.ones((2, 1, H))], max_iterations=3)
        return norms, q


@program([rand(3, 2, H)], [rand(5, 3, H, seed=1)], [rand(1, 1, H, seed=2)])
class GruOverRunTimeBatch(HybridBlock):
    """A GRU over (T, B, H) of run-time T and B, BatchNorm (inference) on each step's input;
    SequenceLast of the outputs."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.GRUCell(H, input_size=H)
            self.bn = nn.BatchNorm(in_channels=H)

    def hybrid_forward(self, F, x):
        outs, (h,) = gluon_cf.foreach(lambda a, s: self.cell(self.bn(a), s), x,
                                      [F.zeros_like(F.sum(x, axis=0))])
        return outs, h, F.SequenceLast(outs)


@program([rand(4, 2, H), floats(2)], [rand(2, 2, H, seed=1), floats(0)],
         [rand(6, 2, H, seed=2), floats(1)])
class UnchangedStateAndDuplicateOutputs(HybridBlock):
    """A while_loop of max_iterations 1 with a state it never changes; outputs and states
    returned twice each."""

    def hybrid_forward(self, F, x, n):
        mem = F.SequenceLast(x)
        (o,), (i, keep, h) = gluon_cf.while_loop(
            lambda i, k, h: i < n, lambda i, k, h: ([h], [i + 1, k, h * 0.5 + mem]),
            [F.zeros((1,)), F.ones((2, 3)), F.zeros((2, H))], max_iterations=1)
        return o, o, keep, h, h, i


@program([rand(5, H), floats(3)], [rand(3, H, seed=1), floats(0)], [rand(6, H, seed=2), floats(4)])
class CoverageStopWhenSumExceeds(HybridBlock):
    """A coverage vector of memory length (run-time) in the state stops the loop once any
    position is covered 1.5 times (max 5 steps)."""

    def hybrid_forward(self, F, mem, n):
        def func(i, q, cover):
            w = F.softmax(F.dot(mem, q.reshape((-1,))) - cover)
            return [F.max(w)], [i + 1, F.dot(w.reshape((1, -1)), mem), cover + w]
        (ps,), (i, q, cover) = gluon_cf.while_loop(
            lambda i, q, cover: (F.max(cover) < 1.5) * (i < n), func,
            [F.zeros((1,)), F.ones((1, H)), F.zeros_like(F.sum(mem, 1))], max_iterations=5)
        return ps, q, cover, i


@program([rand(4, H), floats(1)], [rand(2, H, seed=1), floats(-1)], [rand(5, H, seed=2), floats(1)])
class CondInWhileDifferentSizeThenReduce(HybridBlock):
    """A cond in a while_loop body returning 2T or T rows by step, reduced over rows in the
    same body."""

    def hybrid_forward(self, F, x, flag):
        def func(i, acc):
            rows = gluon_cf.cond(flag * (i < 1) > 0, lambda: F.concat(x, x, dim=0), lambda: x * 1.0)
            return [F.sum(rows, axis=0)], [i + 1, acc + F.sum(rows)]
        (o,), (i, acc) = gluon_cf.while_loop(lambda i, a: i < 3, func,
                                             [F.zeros((1,)), F.zeros((1,))], max_iterations=3)
        return o, acc


@program([rand(4, 3), floats(2)], [rand(1, 3, seed=1), floats(0)], [rand(6, 3, seed=2), floats(5)])
class TopkOfRunTimeRowsInWhile(HybridBlock):
    """topk (k=1, both) over scores of run-time rows in a while_loop body; the best row
    taken back into the state."""

    def hybrid_forward(self, F, x, n):
        def func(i, q):
            s = F.dot(x, q)
            v, idx = F.topk(s, k=1, ret_typ="both")
            return [idx, v], [i + 1, F.take(x, idx).reshape((-1,)) + q]
        (idx, v), (i, q) = gluon_cf.while_loop(lambda i, q: i < n, func,
                                               [F.zeros((1,)), F.ones((3,))], max_iterations=5)
        return idx, v, q


@program([rand(3, H), floats(2)], [rand(5, H, seed=1), floats(0)])
class ForeachInsideWhileOverCapturedRunTimeRows(HybridBlock):
    """A while_loop whose body runs a foreach over a captured value of run-time rows, its
    state the outer state."""

    def hybrid_forward(self, F, x, n):
        def func(i, h):
            outs, (h2,) = gluon_cf.foreach(lambda r, s: (F.dot(r, s[0]), [s[0] * 0.5 + r]), x, [h])
            return [F.sum(outs).reshape((1,))], [i + 1, h2]
        (o,), (i, h) = gluon_cf.while_loop(lambda i, h: i < n, func,
                                           [F.zeros((1,)), F.ones((H,))], max_iterations=3)
        return o, h


@program([np.array([1, 3, 2], np.int64), rand(1, H)], [np.array([4], np.int64), rand(1, H, seed=1)])
class Int64TokensEmbeddingDirect(HybridBlock):
    """int64 token ids fed to Embedding directly (no cast) in a foreach GRU."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = nn.Embedding(V, H)
            self.cell = rnn.GRUCell(H, input_size=H)

    def hybrid_forward(self, F, toks, h):
        outs, (h,) = gluon_cf.foreach(lambda t, s: self.cell(self.embed(t.reshape((1,))), s),
                                      toks, [h])
        return outs, h


@program([rand(5, 3), floats(2)], [rand(3, 3, seed=1), floats(0)], [rand(6, 3, seed=2), floats(6)])
class SoftmaxLengthZeroInWhile(HybridBlock):
    """softmax(length=valid, axis=-1) in a while_loop body over memory of run-time rows,
    valid 0 on some inputs (all weights 0)."""

    def hybrid_forward(self, F, mem, valid):
        def func(i, q):
            s = F.dot(q, mem, transpose_b=True)
            w = F.softmax(s, length=valid.astype("int32"), use_length=True, axis=-1)
            return [w], [i + 1, F.dot(w, mem) + q]
        (ws,), (i, q) = gluon_cf.while_loop(lambda i, q: i < 2, func,
                                            [F.zeros((1,)), F.ones((1, 3))], max_iterations=2)
        return ws, q


@program([rand(4, 3), floats(1, 0, 1, 1)], [rand(2, 3, seed=1), floats(0, 0)],
         [rand(3, 3, seed=2), floats(1, 1, 1)])
class WhereMaskedRowsInForeachThenSequenceMaskAxis1(HybridBlock):
    """A foreach over (row, mask) pairs adding the kept rows by where; its outputs then
    masked by SequenceMask(axis=1)."""

    def hybrid_forward(self, F, x, mask):
        def func(step, s):
            row, m = step
            s2 = F.where(m, s[0] + row, s[0])
            return [s2], [s2]
        (outs,), (s,) = gluon_cf.foreach(func, [x, mask], [F.zeros((3,))])
        o = F.SequenceMask(outs.expand_dims(0), F.ones((1,)) * 2, use_sequence_length=True, axis=1)
        return o, s


@program([rand(3, 2, H).astype(np.float64)], [rand(5, 2, H, seed=1).astype(np.float64)])
class Float64GruForeach(HybridBlock):
    """A float64 GRUCell (block cast to float64) over float64 data by foreach."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.GRUCell(H, input_size=H)
        self.cast("float64")

    def hybrid_forward(self, F, x):
        outs, (h,) = gluon_cf.foreach(lambda a, s: self.cell(a, s), x,
                                      [F.zeros_like(F.sum(x, axis=0))])
        return outs, h


@program([rand(4, 3), floats(2)], [rand(2, 3, seed=1), floats(0)], [rand(5, 3, seed=2), floats(3)])
class MxnetContribForeachInBlock(HybridBlock):
    """MXNet's own F.contrib.foreach in a block: hybridizes; export refuses at the user's
    line, saying to call gluon_cf.foreach."""

    def hybrid_forward(self, F, x, n):
        outs, s = F.contrib.foreach(lambda a, s: (a * 2, [s[0] + a]), x, [F.zeros((3,))])
        return outs, s[0]


@program([rand(4, 3), floats(2)], [rand(2, 3, seed=1), floats(0)])
class GatherNdInWhileState(HybridBlock):
    """gather_nd of x at (i, 1) in each step of a while_loop, i the loop counter."""

    def hybrid_forward(self, F, x, n):
        def func(i, acc):
            idx = F.concat(i, F.zeros((1,)) + 1, dim=0).reshape((2, 1))
            return [F.gather_nd(x, idx)], [i + 1, acc + F.gather_nd(x, idx)]
        (o,), (i, acc) = gluon_cf.while_loop(lambda i, acc: i < n, func,
                                             [F.zeros((1,)), F.zeros((1,))], max_iterations=3)
        return o, acc


@program([_i32(7, -7, 5), _i32(3)], [_i32(-9, 4, 0), _i32(2)], [_i32(1, -1, 100), _i32(0)])
class Int32DivModInWhile(HybridBlock):
    """int32 division and modulo by scalars and by negative arrays (MXNet's truncation and
    sign rules) in a while_loop of run-time steps (max 3)."""

    def hybrid_forward(self, F, x, n):
        def func(i, v):
            a = v / 2
            b = v % 3
            c = F.broadcast_div(v, F.ones_like(v) * -3)
            d = F.broadcast_mod(v, F.ones_like(v) * -4)
            return [a, b, c, d, v], [i + 1, a + b - c + d]
        (a, b, c, d, e), (i, v) = gluon_cf.while_loop(
            lambda i, v: i < n, func, [F.zeros((1,), dtype="int32"), x], max_iterations=3)
        return a, b, c, d, e, v


@program([rand(6, 3) * 5, floats(3)], [rand(2, 3, seed=1) * 5, floats(0)])
class FloatRoundFloorModInForeach(HybridBlock):
    """round/fix/trunc/rint/sign and modulo by a negative divisor on float rows in a foreach."""

    def hybrid_forward(self, F, x, n):
        def func(r, s):
            a = F.round(r * 2) / 2
            b = F.broadcast_mod(r, F.ones_like(r) * -1.5)
            c = r % 1.25
            d = F.fix(r) + F.trunc(-r) + F.rint(r + 0.5)
            return [a, b, c, d], [s[0] + F.sign(r)]
        (a, b, c, d), (s,) = gluon_cf.foreach(func, x, [F.zeros((3,))])
        return a, b, c, d, s


@program([rand(5, 4)], [rand(3, 4, seed=1)])
class TiesInTopkArgmaxSortInForeach(HybridBlock):
    """topk, argmax and argsort of rounded rows (many ties) in a foreach: the tie order is
    MXNet's."""

    def hybrid_forward(self, F, x):
        def func(r, s):
            q = F.round(r)   # many ties
            v, idx = F.topk(q, k=2, ret_typ="both")
            am = F.argmax(q, axis=0)
            srt = F.argsort(q)
            return [v, idx, am, srt], [s[0] + q]
        outs, (s,) = gluon_cf.foreach(func, x, [F.zeros((4,))])
        return list(outs) + [s]


@program([_i32(3, 1, 2), _i32(2)], [_i32(0, 0, 0), _i32(1)])
class Int32ClipCastAndComparisons(HybridBlock):
    """clip, float casts and comparisons of int32 values in a while_loop; maximum with a
    fractional scalar."""

    def hybrid_forward(self, F, x, n):
        def func(i, v):
            w = F.clip(v * 7 - 5, -4, 9)
            f = (w.astype("float32") / 3).astype("int32")
            g = F.maximum(w, 2.5)
            h = (w > 1) + (w <= 0)
            return [w, f, g, h], [i + 1, w + f]
        outs, (i, v) = gluon_cf.while_loop(
            lambda i, v: i < n, func, [F.zeros((1,), dtype="int32"), x], max_iterations=2)
        return list(outs) + [v]


@program([_i64(2**40 + 1, -(2**41) + 3, 7), _i64(3)], [_i64(2**52 + 1, 1, -1), _i64(1)])
class Int64LargeValuesInWhile(HybridBlock):
    """int64 states beyond float precision (2**52 + 1) through scalar ops in a while_loop."""

    def hybrid_forward(self, F, x, n):
        def func(i, v):
            w = v + 1
            w = w * 3 - 5
            w = F.maximum(w, v - 7)
            return [w], [i + 1, w]
        (o,), (i, v) = gluon_cf.while_loop(
            lambda i, v: i < n, func, [F.zeros((1,), dtype="int64"), x], max_iterations=3)
        return o, v


@program([rand(4, 5), floats(1, 0, 1, 1, 0)], [rand(2, 5, seed=1), floats(1, 1, 1, 1, 1)])
class NegInfMaskSoftmaxInForeach(HybridBlock):
    """Scores masked to -inf by where before softmax and log_softmax in a foreach."""

    def hybrid_forward(self, F, x, keep):
        def func(r, s):
            sc = F.where(keep, r, F.ones_like(r) * -np.inf)
            w = F.softmax(sc)
            lw = F.log_softmax(sc + s[0])
            return [w, F.where(keep, lw, F.zeros_like(lw))], [s[0] + w]
        (w, lw), (s,) = gluon_cf.foreach(func, x, [F.zeros((5,))])
        return w, lw, s


@program([rand(3, 4).astype(np.float64), floats(3)],
         [rand(5, 4, seed=1).astype(np.float64), floats(1)])
class Float64ScalarsAccumulate(HybridBlock):
    """float64 states of 1e8 accumulating float64 scalar ops in a while_loop."""

    def hybrid_forward(self, F, x, n):
        def func(i, v):
            return [v * 0.1], [i + 1, v * 1.0000001 + 0.1 - 1e-9 + F.sum(x, axis=0) / 3.3]
        (o,), (i, v) = gluon_cf.while_loop(
            lambda i, v: i < n, func, [F.zeros((1,)), F.ones((4,), dtype="float64") * 1e8],
            max_iterations=3)
        return o, v
