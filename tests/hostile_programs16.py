"""Issue 24, sixteenth round: blocks written the way people port MXNet, TensorFlow and PyTorch
code, aimed at what earlier rounds hit less: (a) dynamic shapes a block sees in any order
(masks that keep no row, loops of no step, batches of one), (b) parameters used in one branch
only, loop bodies that skip a parameter, ``stop_gradient``/``detach`` in bodies, Dropout and
frozen BatchNorm in bodies, (c) float16, float64 and int32 through ``cond``/``foreach``/
``while_loop`` and mixed int/float loop states, (d) nested control flow (a ``cond`` in a
``foreach`` in a ``while_loop``, loops inside ``gluon_cf.recursive``, closures over outer loop
variables). ``PROGRAMS`` maps each block class to its input lists; autograph blocks' oracle
is the plain Python function on NDArrays, the others have a ``plain_forward`` written as
plain Python loops. ``TOL`` (rtol, atol) on a class loosens the comparison (float16)."""
import mxnet as mx
import numpy as np
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

# rows (T, 3) of several lengths, one of them a single row
ROWS = ([rand(4, 3)], [rand(1, 3, seed=1) * 2], [-np.abs(rand(6, 3, seed=2))],
        [rand(2, 3, seed=3) + 1])
# rows and a mask over them: some, none, a single row kept, one of five
MASKS = ([rand(4, 3, seed=4), floats(1, 0, 1, 1)], [rand(4, 3, seed=5), floats(0, 0, 0, 0)],
         [rand(1, 3, seed=6), floats(1)], [rand(5, 3, seed=7), floats(0, 1, 0, 0, 0)],
         [rand(2, 3, seed=8), floats(0, 0)])
# rows and a count n of steps (0: a loop of no step)
COUNTS = ([rand(5, 3, seed=9), floats(3)], [rand(5, 3, seed=10), floats(0)],
          [rand(2, 3, seed=11), floats(2)], [rand(7, 3, seed=12), floats(1)])
# a batch (B, T, 3) and per-row lengths (a batch of one, a length 0)
BATCH = ([rand(2, 4, 3, seed=13), floats(4, 2)], [rand(1, 3, 3, seed=14), floats(3)],
         [rand(3, 2, 3, seed=15), floats(0, 2, 1)], [rand(1, 1, 3, seed=16), floats(0)])
FLOAT64_ROWS = tuple([a.astype(np.float64) for a in arrays] for arrays in ROWS)
FLOAT16_ROWS = tuple([a.astype(np.float16) for a in arrays] for arrays in ROWS)
FLOAT64_COUNTS = tuple([arrays[0].astype(np.float64), arrays[1]] for arrays in COUNTS)
FP16_TOL = (1e-3, 1e-3)
# MXNet 1.9.1's boolean_mask backward never writes the mask's gradient: where the mask has
# another use, its gradient is uninitialised memory in plain MXNet too (not asked here)
MASK_NO_GRAD = (1,)


def _plain_while(cond, func, loop_vars, max_iterations):
    """MXNet's while_loop as plain Python: the final loop variables."""
    steps = 0
    while steps < max_iterations and cond(*loop_vars).asscalar():
        loop_vars = func(*loop_vars)
        steps += 1
    return loop_vars


# ------------------------------------------------------------- (a) shapes seen in any order

@program(*MASKS)
class ForOverMaskedRows(HybridBlock):
    """for over the rows a mask keeps (none: no step), a carry updated per row."""

    NO_GRAD = MASK_NO_GRAD

    @autograph
    def hybrid_forward(self, F, x, m):
        acc = F.zeros((3,))
        for r in F.contrib.boolean_mask(x, m):
            acc = acc * 0.5 + F.tanh(r)
        return acc + F.sum(x, axis=0) * 0.1


@program(*MASKS)
class MaskedRowsReducedInIf(HybridBlock):
    """The kept rows summed; a tensor if on how many were kept."""

    NO_GRAD = MASK_NO_GRAD

    @autograph
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        total = F.sum(kept, axis=0)
        if F.sum(m) > 1:
            out = total / F.sum(m)
        else:
            out = total + x[0]
        return out

    def oracle_where_plain_fails(self, F, x, m):
        """Plain MXNet cannot differentiate a sum of no row (a zero-size array): it is zeros."""
        total = F.sum(F.contrib.boolean_mask(x, m), axis=0) if F.sum(m).asscalar() else \
            F.zeros_like(x[0])
        return total / F.sum(m) if F.sum(m).asscalar() > 1 else total + x[0]


@program(*COUNTS)
class ExplicitWhileOfCount(HybridBlock):
    """gluon_cf.while_loop of n steps (0: none) with no step outputs."""

    def hybrid_forward(self, F, x, n):
        def func(h, i):
            return [], [F.tanh(h + F.take(x, i).reshape((3,))), i + 1]
        _, (h, i) = gluon_cf.while_loop(lambda h, i: i < n, func, [F.zeros((3,)), F.zeros((1,))],
                                        max_iterations=7)
        return h, i

    def plain_forward(self, F, x, n):
        return _plain_while(lambda h, i: i < n, lambda h, i: [F.tanh(h + F.take(x, i).reshape((3,))), i + 1],
                            [F.zeros((3,)), F.zeros((1,))], 7)


@program(*COUNTS)
class WhileOfCountCollectsPadded(HybridBlock):
    """The step outputs of a bounded while_loop, padded with zero rows, summed by row index."""

    def hybrid_forward(self, F, x, n):
        def func(h, i):
            h = h * 0.5 + F.take(x, i).reshape((3,))
            return F.broadcast_mul(h, i + 1), [h, i + 1]
        outs, (h, _) = gluon_cf.while_loop(lambda h, i: i < n, func,
                                           [F.zeros((3,)), F.zeros((1,))], max_iterations=7)
        return outs, h

    def plain_forward(self, F, x, n):
        h, i, outs = F.zeros((3,)), F.zeros((1,)), []
        while len(outs) < 7 and (i < n).asscalar():
            h = h * 0.5 + F.take(x, i).reshape((3,))
            outs.append(h * (i + 1))
            i = i + 1
        if not outs:
            return [], h    # (MXNet's eager while_loop of no step: a plain empty list)
        outs += [F.zeros((3,))] * (7 - len(outs))
        return F.stack(*outs), h

    def oracle_where_plain_fails(self, F, x, n):
        """Hybridized, a loop of no step has max_iterations rows of zeros (the README)."""
        outs, h = self.plain_forward(F, x, n)
        return (F.zeros((7, 3)) if isinstance(outs, list) else outs), h


@program(*BATCH)
class LengthMaskedRecurrenceOverBatch(HybridBlock):
    """An RNN over a batch (B, T, 3) whose rows have their own lengths (0 included): the carry
    of a row stops changing after its length (SequenceMask-like, as ported from TF)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = nn.Dense(3, in_units=6, flatten=False)

    def hybrid_forward(self, F, x, lengths):
        def body(xt, states):
            h, t = states
            new = F.tanh(self.cell(F.concat(xt, h, dim=1)))
            keep = F.broadcast_lesser(t, lengths).reshape((-1, 1))
            h = F.broadcast_add(F.broadcast_mul(keep, new), F.broadcast_mul(1 - keep, h))
            return h, [h, t + 1]
        outs, (h, _) = gluon_cf.foreach(body, F.transpose(x, axes=(1, 0, 2)),
                                        [F.sum(x, axis=1) * 0, F.zeros((1,))])
        return outs, h

    def plain_forward(self, F, x, lengths, **params):
        h, outs = F.sum(x, axis=1) * 0, []
        for t in range(x.shape[1]):
            new = F.tanh(self.cell(F.concat(x[:, t], h, dim=1)))
            keep = (lengths > t).reshape((-1, 1))
            h = keep * new + (1 - keep) * h
            outs.append(h)
        return F.stack(*outs), h


@program(*COUNTS)
class AutographWhileHalvesUntilSmall(HybridBlock):
    """while norm > bound: halve (no step where it is small already), a counter carried."""

    @autograph
    def hybrid_forward(self, F, x, n):
        h = F.sum(x, axis=0) * (n + 0.5)
        steps = F.zeros((1,))
        while F.norm(h) > 1:
            gluon_cf.max_iterations(12)
            h = h * 0.5
            steps = steps + 1
        return h, steps


@program(*BATCH)
class AutographTimeLoopWithLengthIf(HybridBlock):
    """for over time of a (B, T, 3) batch, an if on whether any row is still running."""

    @autograph
    def hybrid_forward(self, F, x, lengths):
        h = F.sum(x, axis=1) * 0
        t = F.zeros((1,))
        for xt in F.transpose(x, axes=(1, 0, 2)):
            if F.sum(F.broadcast_lesser(t, lengths)) > 0:
                h = h * 0.9 + xt
            else:
                h = h - 0.01
            t = t + 1
        return h


# ------------------------------------------------------------------- (b) training shapes

@program(*ROWS)
class ParameterInOneBranchOnly(HybridBlock):
    """Two Dense, each used in one branch of a tensor if (the other gets no gradient)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.pos = nn.Dense(3, in_units=3, flatten=False)
            self.neg = nn.Dense(3, in_units=3, flatten=False, use_bias=False)

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            y = self.pos(x)
        else:
            y = F.relu(self.neg(x))
        return y


@program(*ROWS)
class LoopBodySkipsParameter(HybridBlock):
    """A parameter used before and after a foreach whose body does not read it."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.inp = nn.Dense(3, in_units=3, flatten=False)
            self.scale = self.params.get("scale", shape=(3,), init=mx.init.Constant(0.7))

    def hybrid_forward(self, F, x, scale):
        y = self.inp(x)
        outs, h = gluon_cf.foreach(lambda r, h: (h * r, F.tanh(h + r)), y, F.ones((3,)))
        return F.broadcast_mul(h, scale) + F.sum(outs, axis=0)

    def plain_forward(self, F, x, scale, **params):
        y, h, outs = self.inp(x), F.ones((3,)), []
        for r in y:
            outs.append(h * r)
            h = F.tanh(h + r)
        return h * scale + F.sum(F.stack(*outs), axis=0)


@program(*ROWS)
class DetachedCarryIntoDense(HybridBlock):
    """Truncated backprop as ported from PyTorch: the carry is ``detach()``ed each step, the
    Dense is not. (``F.stop_gradient`` there kills plain MXNet 1.9.1 in backward: SIGSEGV.)"""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3, flatten=False)

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = F.tanh(self.fc(row) + h.detach() * 0.5)
        return h


@program(*ROWS)
class StopGradientOnCarry(HybridBlock):
    """The carry stop_gradient'ed each step, no Dense in the body."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = F.tanh(row * 2 + F.stop_gradient(h) * 0.5) * (h + 1)
        return h


@program(*ROWS)
class DetachHalfOfState(HybridBlock):
    """Two states, one detached in the body; the cond picks which one is returned."""

    def hybrid_forward(self, F, x):
        def body(r, states):
            a, b = states
            a2 = a * 0.5 + r
            b2 = F.BlockGrad(a2) * b + r * 0.1
            return a2 + b2, [a2, b2]
        outs, (a, b) = gluon_cf.foreach(body, x, [F.zeros((3,)), F.ones((3,))])
        return gluon_cf.cond(F.sum(a) > F.sum(b), lambda: a * b, lambda: b - a), outs

    def plain_forward(self, F, x):
        a, b, outs = F.zeros((3,)), F.ones((3,)), []
        for r in x:
            a2 = a * 0.5 + r
            b2 = F.BlockGrad(a2) * b + r * 0.1
            outs.append(a2 + b2)
            a, b = a2, b2
        y = a * b if (F.sum(a) > F.sum(b)).asscalar() else b - a
        return y, F.stack(*outs)


@program(*ROWS)
class FrozenBatchNormInLoopBody(HybridBlock):
    """BatchNorm with use_global_stats (frozen) applied to each row in a foreach body."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.bn = nn.BatchNorm(in_channels=3, use_global_stats=True,
                                   running_mean_initializer=mx.init.Constant(0.2),
                                   running_variance_initializer=mx.init.Constant(2.0),
                                   gamma_initializer=mx.init.Constant(1.5))

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1, 3))
        for row in x:
            h = self.bn(row.reshape((1, 3)) + h * 0.5)
        return h


@program(*ROWS)
class DropoutZeroRateInWhile(HybridBlock):
    """Dropout(0.0) and a Dense in a while_loop body (deterministic under training)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3, flatten=False)
            self.drop = nn.Dropout(0.0)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        k = F.zeros((1,))
        while k < 3:
            h = self.drop(F.tanh(self.fc(h.reshape((1, 3))).reshape((3,))))
            k = k + 1
        return h


# --------------------------------------------------------------------------- (c) dtypes

@program(*FLOAT64_ROWS)
class Float64ForWithSmallConstants(HybridBlock):
    """float64 rows; constants below float32's resolution must survive (1 + 1e-9)."""

    TOL = (1e-12, 1e-12)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            h = h * (1 + 1e-9) + r * 1e-9 + 1e-10
        return h * 1e6


@program(*FLOAT64_ROWS)
class Float64CondOfPreciseSums(HybridBlock):
    """float64 cond whose predicate differs from its float32 rounding."""

    TOL = (1e-12, 1e-12)

    def hybrid_forward(self, F, x):
        s = F.sum(x) + 1e-12
        return gluon_cf.cond(s - F.sum(x) > 0, lambda: x * 1.000000001, lambda: x * 3)

    def plain_forward(self, F, x):
        s = F.sum(x) + 1e-12
        return x * 1.000000001 if (s - F.sum(x) > 0).asscalar() else x * 3


@program(*FLOAT16_ROWS)
class Float16ForeachRecurrence(HybridBlock):
    """float16 foreach, a carry in float16."""

    TOL = FP16_TOL

    def hybrid_forward(self, F, x):
        outs, h = gluon_cf.foreach(lambda r, h: (h * r, F.tanh(h * 0.5 + r)), x,
                                   F.sum(x, axis=0) * 0)
        return outs, h

    def plain_forward(self, F, x):
        h, outs = F.zeros_like(x[0]), []
        for r in x:
            outs.append(h * r)
            h = F.tanh(h * 0.5 + r)
        return F.stack(*outs), h


@program(*FLOAT16_ROWS)
class Float16AutographWhile(HybridBlock):
    """float16 carries in a tensor while, the counter float16 too."""

    TOL = FP16_TOL

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        i = F.zeros_like(h[0:1])
        while F.sum(F.abs(h)) > 0.5:
            gluon_cf.max_iterations(6)
            h = h * 0.5
            i = i + 1
        return h, i


@program(*FLOAT16_ROWS)
class Float16CondOfTwoOutputs(HybridBlock):
    """float16 cond, branches of two outputs."""

    TOL = FP16_TOL

    @autograph
    def hybrid_forward(self, F, x):
        if F.mean(x) > 0:
            a, b = x * 2, F.sum(x, axis=0)
        else:
            a, b = F.abs(x), F.max(x, axis=0)
        return a, b


@program(*COUNTS)
class Int32CounterWithFloatState(HybridBlock):
    """A while_loop whose counter is int32 and whose state is float32."""

    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        n = F.cast(n, "int32")

        def func(h, i):
            row = F.take(x, F.cast(i, "float32")).reshape((3,))
            return [], [h * 0.5 + row, i + 1]
        _, (h, i) = gluon_cf.while_loop(lambda h, i: i < n, func,
                                        [F.zeros((3,)), F.zeros((1,), dtype="int32")],
                                        max_iterations=7)
        return h, F.cast(i, "float32")

    def plain_forward(self, F, x, n):
        n = F.cast(n, "int32")
        h, i = _plain_while(lambda h, i: i < n,
                            lambda h, i: [h * 0.5 + F.take(x, F.cast(i, "float32")).reshape((3,)),
                                         i + 1],
                            [F.zeros((3,)), F.zeros((1,), dtype="int32")], 7)
        return h, F.cast(i, "float32")


@program(*FLOAT64_ROWS)
class Float64ForeachCountsPositiveRowsInt32(HybridBlock):
    """foreach over float64 rows with a float64 sum and an int32 count of positive rows."""

    TOL = (1e-12, 1e-12)

    def hybrid_forward(self, F, x):
        def body(r, states):
            acc, count = states
            pos = F.sum(r) > 0
            return F.broadcast_mul(F.cast(count, "float64"), r), [
                acc + F.broadcast_mul(r, F.cast(pos, "float64")), count + F.cast(pos, "int32")]
        outs, (acc, count) = gluon_cf.foreach(
            body, x, [F.sum(x, axis=0) * 0, F.zeros((1,), dtype="int32")])
        return outs, acc, F.cast(count, "float64")

    def plain_forward(self, F, x):
        acc, count, outs = F.zeros_like(x[0]), F.zeros((1,), dtype="int32"), []
        for r in x:
            pos = F.sum(r) > 0
            outs.append(F.cast(count, "float64") * r)
            acc, count = acc + r * F.cast(pos, "float64"), count + F.cast(pos, "int32")
        return F.stack(*outs), acc, F.cast(count, "float64")


@program(*FLOAT64_COUNTS)
class Float64AutographWhileWithPythonFloats(HybridBlock):
    """A float64 while with Python float arithmetic on the carry and a float32 count input."""

    TOL = (1e-12, 1e-12)
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, n):
        n = F.cast(n, "float64")
        h = F.zeros_like(x[0]) + 0.1
        i = F.zeros((1,), dtype="float64")
        while i < n:
            gluon_cf.max_iterations(7)
            h = h / 3.0 + F.take(x, i)[0] * 0.3
            i = i + 1
        return h


# ------------------------------------------------------------------ (d) nested control flow

@program(*COUNTS)
class CondInForeachInWhile(HybridBlock):
    """while_loop of n steps, each a foreach over the rows with a cond per row."""

    def hybrid_forward(self, F, x, n):
        def row_body(r, h):
            h2 = gluon_cf.cond(F.sum(r * h) > 0, lambda: h + r, lambda: h * 0.5 - r)
            return [], h2

        def func(h, i):
            _, h = gluon_cf.foreach(row_body, x, h)
            return [], [F.tanh(h), i + 1]
        _, (h, _) = gluon_cf.while_loop(lambda h, i: i < n, func, [F.ones((3,)), F.zeros((1,))],
                                        max_iterations=4)
        return h

    def plain_forward(self, F, x, n):
        def func(h, i):
            for r in x:
                h = h + r if (F.sum(r * h) > 0).asscalar() else h * 0.5 - r
            return [F.tanh(h), i + 1]
        return _plain_while(lambda h, i: i < n, func, [F.ones((3,)), F.zeros((1,))], 4)[0]


@program(*COUNTS)
class AutographNestedWhileForIf(HybridBlock):
    """The same nesting written as Python: while over a count, for over rows, if per row."""

    @autograph
    def hybrid_forward(self, F, x, n):
        h = F.ones((3,))
        i = F.zeros((1,))
        while i < n:
            gluon_cf.max_iterations(4)
            for r in x:
                if F.sum(r * h) > 0:
                    h = h + r
                else:
                    h = h * 0.5 - r
            h = F.tanh(h)
            i = i + 1
        return h


@program(*ROWS)
class ClosureOverOuterLoopVariable(HybridBlock):
    """A nested function reads the outer loop's row and the carry; a lambda made before reads
    a variable the loop reassigns."""

    @autograph
    def hybrid_forward(self, F, x):
        scale = F.ones((3,))
        apply = lambda v: v * scale  # noqa: E731
        h = F.zeros((3,))
        for row in x:
            def step(v):
                return F.tanh(v + row)
            h = step(h)
            scale = scale * 0.5 + h
        return apply(h)


@program(*ROWS)
class InnerLoopReadsOuterRow(HybridBlock):
    """for row in x: for col in x: uses row and col; the carry of the inner loop reset."""

    @autograph
    def hybrid_forward(self, F, x):
        total = F.zeros((3,))
        for row in x:
            inner = F.zeros((3,))
            for col in x:
                inner = inner + row * col
            total = total + F.tanh(inner)
        return total


@program(*COUNTS)
class RecursiveHalvingWithWhileInside(HybridBlock):
    """A recursive function whose body runs a while_loop (n steps, maybe none) and recurses
    while the norm is large."""

    def hybrid_forward(self, F, x, n):
        @gluon_cf.recursive
        def shrink(v):
            def func(u, i):
                return [], [u * 0.75, i + 1]
            _, (u, _) = gluon_cf.while_loop(lambda u, i: i < n, func, [v, F.zeros((1,))],
                                            max_iterations=7)
            return gluon_cf.cond(F.norm(u) < 1, lambda: u, lambda: shrink(u * 0.5))
        return shrink(F.sum(x, axis=0) * 3)

    def plain_forward(self, F, x, n):
        def shrink(v):
            u = _plain_while(lambda u, i: i < n, lambda u, i: [u * 0.75, i + 1],
                             [v, F.zeros((1,))], 7)[0]
            return u if (F.norm(u) < 1).asscalar() else shrink(u * 0.5)
        return shrink(F.sum(x, axis=0) * 3)


# an n-ary tree as CSR: node k's children are cidx[ptr[k]:ptr[k + 1]]
_TREE_A = [floats(0, 2, 3, 3, 4, 4), floats(1, 2, 3, 4)]    # 0 -> 1, 2; 1 -> 3; 2 -> 4
_TREE_B = [floats(0, 0), floats(0)]                          # a single leaf
_TREE_C = [floats(0, 3, 3, 3, 3), floats(1, 2, 3)]           # a root with three leaves


@program(*[[floats(1, 2, 3, 4, 5)[:len(t[0]) - 1]] + t for t in (_TREE_A, _TREE_B, _TREE_C)])
class RecursiveSumOverChildrenLoop(HybridBlock):
    """A recursive function over an n-ary tree stored as CSR: a while_loop over a node's
    children (none at a leaf: no step) sums what the recursive calls return."""

    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, v, ptr, cidx):
        @gluon_cf.recursive
        def total(k):
            start, stop = F.take(ptr, k), F.take(ptr, k + 1)

            def func(j, acc):
                return [], [j + 1, acc + total(F.take(cidx, j))]
            _, (_, acc) = gluon_cf.while_loop(lambda j, acc: j < stop, func,
                                              [start, F.zeros((1,))], max_iterations=4)
            return F.take(v, k) + acc * 0.5
        return total(F.zeros((1,)))

    def plain_forward(self, F, v, ptr, cidx):
        p, c = ptr.asnumpy().astype(int), cidx.asnumpy().astype(int)

        def total(k):
            acc = F.zeros((1,))
            for j in range(p[k], p[k + 1]):
                acc = acc + total(c[j])
            return F.take(v, F.array([k])) + acc * 0.5
        return total(0)


@program(*ROWS)
class AutographRecursiveWithForInside(HybridBlock):
    """A recursive function (in autograph) whose body is a tensor if that recurses, and a
    Python for over the rows in its base case."""

    @autograph
    def hybrid_forward(self, F, x):
        @gluon_cf.recursive
        def reduce(h):
            if F.norm(h) > 0.3:
                return reduce(h * 0.5)
            for r in x:
                h = h * 0.9 + r * 0.01
            return h
        return reduce(F.sum(x, axis=0))


# ------------------------------------------------------------------------ more of each kind

@program(*COUNTS)
class ParameterOnlyInsideLoopOfCount(HybridBlock):
    """A Dense used only inside a while of n steps (none: the Dense gets no gradient)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3, flatten=False)

    @autograph
    def hybrid_forward(self, F, x, n):
        h = F.sum(x, axis=0)
        i = F.zeros((1,))
        while i < n:
            gluon_cf.max_iterations(7)
            h = F.tanh(self.fc(h))
            i = i + 1
        return h


@program(*BATCH)
class DeferredDenseInForeachBody(HybridBlock):
    """A Dense of deferred in_units used in a foreach body over time, batch sizes vary."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, flatten=False)

    def hybrid_forward(self, F, x, lengths):
        outs, h = gluon_cf.foreach(lambda xt, h: (self.fc(xt) + h, F.tanh(self.fc(xt) + h)),
                                   F.transpose(x, axes=(1, 0, 2)), F.sum(x, axis=1) * 0)
        return outs, h

    def plain_forward(self, F, x, lengths, **params):
        h, outs = F.sum(x, axis=1) * 0, []
        for t in range(x.shape[1]):
            outs.append(self.fc(x[:, t]) + h)
            h = F.tanh(self.fc(x[:, t]) + h)
        return F.stack(*outs), h


@program(*COUNTS)
class AutographInt32CounterTakesRows(HybridBlock):
    """An int32 counter in a tensor while indexes the rows with take (mixed loop variables)."""

    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, n):
        i = F.zeros((1,), dtype="int32")
        stop = F.cast(n, "int32")
        h = F.zeros_like(x[0])
        while i < stop:
            gluon_cf.max_iterations(7)
            h = h * 0.5 + F.take(x, i).reshape((-1,))
            i = i + 1
        return h, F.cast(i, "float32")


@program(*ROWS)
class RecursiveFunctionReadsLoopRow(HybridBlock):
    """A recursive function defined before a tensor for, called in its body with the row."""

    @autograph
    def hybrid_forward(self, F, x):
        @gluon_cf.recursive
        def shrink(v, row):
            if F.norm(v) > 1:
                return shrink(v * 0.5 + row * 0.01, row)
            return v
        h = F.ones_like(x[0])
        for row in x:
            h = shrink(h * 3 + row, row)
        return h


@program(*ROWS)
class BreakInInnerForOfWhile(HybridBlock):
    """A tensor break in a for nested in a tensor while: only the inner loop stops."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        k = F.zeros((1,))
        while k < 2:
            for row in x:
                if F.sum(row * h) < -0.1:
                    break
                h = h + row * (k + 1)
            k = k + 1
        return h


@program(*ROWS)
class ListOfListsStateInForeach(HybridBlock):
    """Nested list states in foreach: [[h, c], [g]]."""

    def hybrid_forward(self, F, x):
        def body(r, states):
            (h, c), (g,) = states
            c = c * 0.5 + r
            h = F.tanh(c) + g
            return [h, c * 2], [[h, c], [g + r * 0.1]]
        z = F.sum(x, axis=0) * 0
        (hs, cs), ((h, c), (g,)) = gluon_cf.foreach(body, x, [[z, z + 1], [z - 1]])
        return hs, cs, h, c, g

    def plain_forward(self, F, x):
        z = F.sum(x, axis=0) * 0
        h, c, g, hs, cs = z, z + 1, z - 1, [], []
        for r in x:
            c = c * 0.5 + r
            h = F.tanh(c) + g
            hs.append(h)
            cs.append(c * 2)
            g = g + r * 0.1
        return F.stack(*hs), F.stack(*cs), h, c, g


@program(*MASKS)
class WhileOverKeptRowsCount(HybridBlock):
    """A while whose bound is how many rows a mask keeps (none: no step), reading them."""

    NO_GRAD = MASK_NO_GRAD

    @autograph
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        n = F.sum(m)
        i = F.zeros((1,))
        h = F.zeros_like(x[0])
        while i < n:
            gluon_cf.max_iterations(5)
            h = h + F.take(kept, i).reshape((-1,)) * (i + 1)
            i = i + 1
        return h


@program(*FLOAT16_ROWS)
class Float16ForCollectsAndIf(HybridBlock):
    """float16 rows: a for collecting rows under a tensor if, stacked."""

    TOL = FP16_TOL

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        outs = []
        for row in x:
            if F.sum(row) > 0:
                h = h + row
            else:
                h = h * 0.5
            outs.append(h * 2)
        return F.stack(*outs), h


@program([rand(4, 3, seed=20)], [rand(2, 3, seed=21)], [-np.abs(rand(3, 3, seed=22))],
         [rand(5, 3, seed=23)])
class CallsAfterAnIndexError(HybridBlock):
    """``x[2]`` of two rows is Python's IndexError (at the line, hybridized); the block's
    later calls are unaffected."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3, flatten=False)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            if F.sum(row) > 0:
                h = self.fc(h + row)
            else:
                h = h - row
        return h + x[2]


@program(*ROWS)
class LambdaWithDefaultOfLoopRow(HybridBlock):
    """A lambda made each step with the row as a default argument, applied in the step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones_like(x[0])
        for row in x:
            f = lambda v, r=row: F.tanh(v * r + 1)  # noqa: E731
            h = f(h)
        return h


@program(*COUNTS)
class ClosureMadeInLoopCalledAfter(HybridBlock):
    """A closure made in a tensor while's body reads the carry and counter; called after the
    loop it sees their final values (late binding), as Python does."""

    @autograph
    def hybrid_forward(self, F, x, n):
        h = F.sum(x, axis=0)
        i = F.zeros((1,))
        last = lambda: h * 0  # noqa: E731
        while i < n:
            gluon_cf.max_iterations(7)
            h = F.tanh(h) + 0.5
            i = i + 1
            last = lambda: h * i  # noqa: E731
        return last()


@program(*ROWS)
class NestedFunctionReadsCarryBeforeAssignment(HybridBlock):
    """A nested function defined before the loop reads the carry the loop reassigns."""

    @autograph
    def hybrid_forward(self, F, x):
        def double():
            return h * 2
        h = F.ones_like(x[0]) * 0.1
        for row in x:
            h = F.tanh(double() + row)
        return h


@program(*[[rand(len(t[0]) - 1, 3, seed=30 + k)] + t
           for k, t in enumerate((_TREE_A, _TREE_B, _TREE_C))])
class RecursiveDenseOverChildrenLoop(HybridBlock):
    """A child-sum recursion with a Dense: each node's state is a Dense of its row plus the
    sum of its children's (a while_loop over the children; none at a leaf)."""

    NO_GRAD = (1, 2)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3)
            self.scale = self.params.get("scale", shape=(1, 3), init=mx.init.Constant(0.5))

    def hybrid_forward(self, F, v, ptr, cidx, scale):
        @gluon_cf.recursive
        def node(k):
            start, stop = F.take(ptr, k), F.take(ptr, k + 1)

            def func(j, acc):
                return [], [j + 1, acc + node(F.take(cidx, j))]
            _, (_, acc) = gluon_cf.while_loop(lambda j, acc: j < stop, func,
                                              [start, F.zeros((1, 3))], max_iterations=4)
            return F.tanh(self.fc(F.take(v, k)) + F.broadcast_mul(acc, scale))
        return node(F.zeros((1,)))

    def plain_forward(self, F, v, ptr, cidx, scale):
        p, c = ptr.asnumpy().astype(int), cidx.asnumpy().astype(int)

        def node(k):
            acc = F.zeros((1, 3))
            for j in range(p[k], p[k + 1]):
                acc = acc + node(c[j])
            return F.tanh(self.fc(F.take(v, F.array([k]))) + acc * scale)
        return node(0)


@program(*FLOAT64_COUNTS)
class Float64RecursionWithLoopInside(HybridBlock):
    """float64 through a recursive function whose body runs a while_loop; constants below
    float32's resolution."""

    TOL = (1e-12, 1e-12)
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, n):
        n = F.cast(n, "float64")

        @gluon_cf.recursive
        def shrink(v):
            def func(u, i):
                return [], [u * 0.75 + 1e-9, i + 1]
            _, (u, _) = gluon_cf.while_loop(lambda u, i: i < n, func,
                                            [v, F.zeros((1,), dtype="float64")], max_iterations=7)
            return gluon_cf.cond(F.norm(u) < 1, lambda: u * (1 + 1e-10),
                                 lambda: shrink(u * 0.5))
        return shrink(F.sum(x, axis=0) * 3)

    def plain_forward(self, F, x, n):
        n = F.cast(n, "float64")

        def shrink(v):
            u = _plain_while(lambda u, i: i < n, lambda u, i: [u * 0.75 + 1e-9, i + 1],
                             [v, F.zeros((1,), dtype="float64")], 7)[0]
            return u * (1 + 1e-10) if (F.norm(u) < 1).asscalar() else shrink(u * 0.5)
        return shrink(F.sum(x, axis=0) * 3)


@program(*FLOAT16_ROWS)
class Float16AutographRecursion(HybridBlock):
    """float16 through an autograph recursive function with a tensor if."""

    TOL = FP16_TOL

    @autograph
    def hybrid_forward(self, F, x):
        @gluon_cf.recursive
        def halve(h):
            if F.sum(F.abs(h)) > 1:
                return halve(h * 0.5)
            return h + 0.125
        return halve(F.sum(x, axis=0) * 4)


@program(*[[rand(len(t[0]) - 1, 3, seed=40 + k).astype(np.float64)] + t
           for k, t in enumerate((_TREE_A, _TREE_B, _TREE_C))])
class Float64ChildSumOverTree(HybridBlock):
    """A child-sum over a CSR tree in float64 (the tree arrays float32)."""

    TOL = (1e-12, 1e-12)
    NO_GRAD = (1, 2)

    def hybrid_forward(self, F, v, ptr, cidx):
        @gluon_cf.recursive
        def node(k):
            start, stop = F.take(ptr, k), F.take(ptr, k + 1)

            def func(j, acc):
                return [], [j + 1, acc + node(F.take(cidx, j))]
            _, (_, acc) = gluon_cf.while_loop(lambda j, acc: j < stop, func,
                                              [start, F.zeros((1, 3), dtype="float64")],
                                              max_iterations=4)
            return F.tanh(F.take(v, k) * (1 + 1e-9)) + acc * 0.5
        return node(F.zeros((1,)))

    def plain_forward(self, F, v, ptr, cidx):
        p, c = ptr.asnumpy().astype(int), cidx.asnumpy().astype(int)

        def node(k):
            acc = F.zeros((1, 3), dtype="float64")
            for j in range(p[k], p[k + 1]):
                acc = acc + node(c[j])
            return F.tanh(F.take(v, F.array([k])) * (1 + 1e-9)) + acc * 0.5
        return node(0)


@program(*ROWS)
class Int32CountPlusFloatComparison(HybridBlock):
    """An int32 count plus a float comparison (MXNet does not promote: an error at the line,
    eagerly and hybridized alike)."""

    @autograph
    def hybrid_forward(self, F, x):
        count = F.zeros((1,), dtype="int32")
        h = F.zeros_like(x[0])
        for row in x:
            count = count + (F.sum(row) > 0)
            h = h + row
        return h, F.cast(count, "float32")


@program(*ROWS)
class Int32CountCastInLoop(HybridBlock):
    """The same count cast to int32 each step, read as float after the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        count = F.zeros((1,), dtype="int32")
        h = F.zeros_like(x[0])
        for row in x:
            count = count + F.cast(F.sum(row) > 0, "int32")
            h = h * 0.5 + row * F.cast(count, "float32")
        return h, F.cast(count, "float32")


@program(*FLOAT16_ROWS)
class Float16WhileTruncatedAtBound(HybridBlock):
    """A float16 while stopped by its bound while the condition still holds (warns)."""

    TOL = FP16_TOL

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0) + 10
        while F.sum(h) > 0:
            gluon_cf.max_iterations(3)
            h = h - 1
        return h

    def plain_forward(self, F, x):
        """The bound holds eagerly too (the README): three steps at most."""
        h, steps = F.sum(x, axis=0) + 10, 0
        while steps < 3 and (F.sum(h) > 0).asscalar():
            h, steps = h - 1, steps + 1
        return h
