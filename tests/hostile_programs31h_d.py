"""Round 31h (issue 24): autograph ports (plain Python on NDArrays is the oracle: ``ORACLE =
"python"``) of decoders and DP loops, dtypes float16/float64, batches of 1 and 0 rows, long
loops, and blocks shared by several parents."""
from mxnet.gluon import HybridBlock, nn, rnn

import hostile_harness
from gluon_cf import autograph
from hostile_harness31h import C, PythonOracle

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

SEQ = ([rand(4, 2, 3)], [rand(1, 1, 3, seed=1)], [rand(6, 3, 3, seed=2)])


def first(F, x):
    """x's first row (``x[0]`` on a Symbol is its first output: the whole array)."""
    return F.squeeze(F.slice_axis(x, axis=0, begin=0, end=1), axis=0)


@program(*SEQ)
class AutographForRowsGRUCollect(PythonOracle):
    def __init__(self):
        super().__init__()
        self.cell = rnn.GRUCell(3, input_size=3)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        outs = []
        for r in x:
            o, (h,) = self.cell(r, [h])
            outs.append(o)
        return F.stack(*outs, axis=0), h


@program(*SEQ)
class AutographWhileGreedyStopOnThreshold(PythonOracle):
    """A greedy decoder: feeds back its output until the mean falls below -0.2 or 5 steps."""
    def __init__(self):
        super().__init__()
        self.d = nn.Dense(3, in_units=3)

    @autograph
    def hybrid_forward(self, F, x):
        y = F.mean(x, axis=0)
        i = F.zeros((1,))
        while (i < 5) and (F.mean(y) > -0.2):
            y = F.tanh(self.d(y)) - 0.1
            i = i + 1
        return y, i


@program(*SEQ)
class AutographIfInsideForClip(PythonOracle):
    """Gradient-clipping style: if the state's norm exceeds 1, rescale; in a for over rows."""
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            h = h * 1.5 + r
            n = F.sqrt(F.sum(h * h))
            if n > 1.0:
                h = h / n
        return h


@program(*SEQ)
class AutographCTCStyleDP(PythonOracle):
    """A DP over time in log space, the recursion written with Python ops on rows."""
    @autograph
    def hybrid_forward(self, F, x):
        alpha = F.log_softmax(x[0], axis=-1)
        for r in x[1:]:
            lp = F.log_softmax(r, axis=-1)
            shifted = F.concat(F.ones_like(F.slice_axis(alpha, axis=-1, begin=0, end=1)) * -1e4,
                               F.slice_axis(alpha, axis=-1, begin=0, end=-1), dim=-1)
            m = F.maximum(alpha, shifted)
            alpha = m + F.log(F.exp(alpha - m) + F.exp(shifted - m)) + lp
        return alpha


@program(*SEQ)
class AutographBreakOnConvergence(PythonOracle):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            new = F.tanh(h + r)
            if F.max(F.abs(new - h)) < 0.05:
                break
            h = new
        return h


@program(*SEQ)
class AutographNestedForTimeThenLayers(PythonOracle):
    def __init__(self):
        super().__init__()
        self.cells = nn.HybridSequential()
        for _ in range(2):
            self.cells.add(rnn.RNNCell(3, input_size=3))

    @autograph
    def hybrid_forward(self, F, x):
        hs = [F.zeros_like(x[0]), F.zeros_like(x[0])]
        out = F.zeros_like(x[0])
        for r in x:
            inp = r
            new = []
            for k in range(2):
                inp, (h,) = self.cells[k](inp, [hs[k]])
                new.append(h)
            hs = new
            out = out + inp
        return out, hs[0], hs[1]


@program(*SEQ)
class AutographContinueMaskedRows(PythonOracle):
    @autograph
    def hybrid_forward(self, F, x):
        acc = F.zeros_like(x[0])
        for r in x:
            if F.sum(r) < 0:
                continue
            acc = acc + r * r
        return acc


# dtypes and sizes (MXNet's F.contrib ops are the oracle)
def _dtype_inputs(dtype):
    return ([rand(3, 2, 4).astype(dtype)], [rand(1, 1, 4, seed=1).astype(dtype)],
            [rand(5, 3, 4, seed=2).astype(dtype)])


def _typed(dtype, base):
    cls = type(f"{base.__name__}{dtype.capitalize()}", (base,), {"DTYPE": dtype})
    if dtype == "float16":
        cls.TOL = (1e-2, 1e-2)
    return program(*_dtype_inputs(dtype))(cls)


class _TypedForeachDense(HybridBlock):
    DTYPE = "float32"

    def __init__(self):
        super().__init__()
        self.d = nn.Dense(4, in_units=8)
        self.cast(self.DTYPE)

    def hybrid_forward(self, F, x):
        def step(r, s):
            h = F.tanh(self.d(F.concat(r, s[0], dim=-1)))
            return h, [h]
        outs, last = C.foreach(step, x, [F.zeros_like(first(F, x))])
        return outs, last[0]


class _TypedWhileCond(HybridBlock):
    DTYPE = "float32"

    def __init__(self):
        super().__init__()
        self.d = nn.Dense(4, in_units=4)
        self.cast(self.DTYPE)

    def hybrid_forward(self, F, x):
        first = F.sum(x, axis=0)

        def body(i, h):
            h = C.cond(F.sum(h) > 0, lambda: self.d(h), lambda: h * 0.5)
            return h, [i + 1, h]
        outs, (i, h) = C.while_loop(lambda i, h: i < 3, body,
                                    [F.zeros((1,), dtype=self.DTYPE), first],
                                    max_iterations=3)
        return outs, h


class _TypedGRUForeach(HybridBlock):
    DTYPE = "float32"

    def __init__(self):
        super().__init__()
        self.cell = rnn.GRUCell(4, input_size=4)
        self.cast(self.DTYPE)

    def hybrid_forward(self, F, x):
        def step(r, s):
            o, s = self.cell(r, s)
            return o, s
        outs, last = C.foreach(step, x, [F.zeros_like(first(F, x))])
        return outs, last[0]


TYPED = [_typed(d, b) for d in ("float64", "float16")
         for b in (_TypedForeachDense, _TypedWhileCond, _TypedGRUForeach)]
globals().update({c.__name__: c for c in TYPED})

BATCH0 = ([rand(3, 0, 4)], [rand(3, 1, 4, seed=1)], [rand(3, 0, 4, seed=2)],
          [rand(2, 2, 4, seed=3)])


@program(*BATCH0)
class ForeachBatchOfZeroRows(HybridBlock):
    def __init__(self):
        super().__init__()
        self.d = nn.Dense(4, in_units=8)

    def hybrid_forward(self, F, x):
        def step(r, s):
            h = F.tanh(self.d(F.concat(r, s[0], dim=-1)))
            return h, [h]
        outs, last = C.foreach(step, x, [F.zeros_like(F.sum(x, axis=0))])
        return outs, last[0]


@program(*BATCH0)
class WhileBatchOfZeroRows(HybridBlock):
    def __init__(self):
        super().__init__()
        self.cell = rnn.LSTMCell(4, input_size=4)

    def hybrid_forward(self, F, x):
        h0 = F.sum(x, axis=0) * 0

        def body(i, h, c):
            o, (h, c) = self.cell(F.take(x, i, mode="clip").reshape((-3, 0)), [h, c])
            return o, [i + 1, h, c]
        outs, (_, h, c) = C.while_loop(lambda i, h, c: i < 3, body, [F.zeros((1,)), h0, h0],
                                       max_iterations=3)
        return outs, h + c


LONG = ([rand(300, 2)], [rand(1, 2, seed=1)], [rand(257, 2, seed=2)])


@program(*LONG)
class LongForeachLeakyIntegrator(HybridBlock):
    def hybrid_forward(self, F, x):
        def step(r, s):
            h = s[0] * 0.99 + r
            return F.sum(h, keepdims=True), [h]
        outs, last = C.foreach(step, x, [F.zeros_like(first(F, x))])
        return outs, last[0]


@program(*LONG)
class LongWhileCounterToLength(HybridBlock):
    """A while_loop of up to 400 steps, as many as x has rows (max_iterations=400)."""
    def hybrid_forward(self, F, x):
        n = F.sum(F.ones_like(F.slice_axis(x, axis=1, begin=0, end=1))).reshape((1,))

        def body(i, h):
            r = F.take(x, i, mode="clip").reshape((-1,))
            return F.sum(h, keepdims=True), [i + 1, F.tanh(h + r)]
        outs, (i, h) = C.while_loop(lambda i, h: i < n, body, [F.zeros((1,)), first(F, x) * 0],
                                    max_iterations=400)
        return outs, i, h
