"""Issue 24, round 25h: code ported the way people port MXNet and TensorFlow code, in styles
the earlier rounds did not write: ``tf.while_loop`` ports whose loop variables are tuples of
tuples and nested lists (and ``F.contrib`` ops on int32/float16/float64 values), gluonnlp 0.10's
layers (multi-head attention, transformer cells, position-wise FFN, highway) inside gluon_cf's
loops, and autograph ``hybrid_forward``s using properties, static- and classmethods,
``functools.partial``/``wraps``, frozen dataclass configs, ``*args``/``**kwargs`` forwarding,
default-argument closures, generators, Python recursion of helpers, ``super()`` in helpers,
early returns and nested loops with ``break``/``continue`` at both levels, in-place updates,
negative-step slices, ``x.shape`` reads, dtype casts, masks keeping every or no row, and
zero-length inputs. ``PROGRAMS`` maps each block class to its input lists.

The oracle: ``ContribBlock`` programs run the same code on MXNet's own ``mx.nd.contrib`` ops;
``plain_forward`` where a program has one (plain Python on NDArrays); else the autograph
function's plain Python (``hybrid_forward.__wrapped__``)."""
import dataclasses
import functools

import mxnet as mx
import numpy as np
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness
from hostile_programs22b import ContribBlock
from hostile_programs24a import _Dense

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

STATES = ([rand(4, seed=2500)], [floats(5.0, 1.0)], [floats(-3.0, -2.0)])
ROWS = ([rand(4, 3, seed=2501)], [rand(1, 3, seed=2502) * 2], [rand(3, 3, seed=2503) + 1])
SEQ = ([rand(4, 2, 3, seed=2504), rand(2, 3, seed=2505)],
       [rand(1, 2, 3, seed=2506), rand(2, 3, seed=2507)],
       [rand(5, 1, 3, seed=2508), rand(1, 3, seed=2509)])
MASKS = ([rand(4, 3, seed=2510), floats(1, 0, 1, 1)], [rand(4, 3, seed=2511), floats(0, 0, 0, 0)],
         [rand(4, 3, seed=2512), floats(1, 1, 1, 1)], [rand(2, 3, seed=2513), floats(0, 1)])


# ---- tf.while_loop ports: tuples of tuples, nested lists (against MXNet's own ops) ----------

@program(*STATES)
class TfWhileTupleOfTuplesVars(ContribBlock):
    """``tf.while_loop(c, b, (i, (h, c), (acc,)))`` ported loop variable for loop variable."""

    def hybrid_forward(self, F, x):
        def cond(i, hc, acc):
            return i < 3

        def body(i, hc, acc):
            h, c = hc
            (a,) = acc
            c2 = c * 0.5 + F.tanh(h)
            h2 = h + c2 * x
            return [], (i + 1, (h2, c2), (a + h2,))
        _, (i, (h, c), (a,)) = self.cf(F).while_loop(
            cond, body, (F.zeros((1,)), (x, x * 0), (x * 0,)), max_iterations=5)
        return h, c, a, i


@program(*STATES)
class TfWhileNestedListStatesFullSteps(ContribBlock):
    """Loop variables ``[i, [h, [c, d]]]`` and step outputs ``(h, [c])``, every step run."""

    def hybrid_forward(self, F, x):
        def body(i, rest):
            h, (c, d) = rest
            h2 = F.sigmoid(h + c) * d
            return (h2, [c * h2]), [i + 1, [h2, [c + 1, d * 0.5 + h2]]]
        outs, (i, (h, (c, d))) = self.cf(F).while_loop(
            lambda i, rest: i < 3, body, [F.zeros((1,)), [x, [x * 2, x + 1]]], max_iterations=3)
        return outs[0], outs[1][0], h, c, d


@program(*STATES)
class TfWhileInt32Counter(ContribBlock):
    """An int32 counter (``tf.int32``) beside a float state, the bound a Python int."""

    def hybrid_forward(self, F, x):
        def body(i, h):
            return [], [i + 1, h * 0.5 + F.broadcast_mul(F.cast(i, "float32"), x)]
        _, (i, h) = self.cf(F).while_loop(lambda i, h: i < 4, body,
                                          [F.zeros((1,), dtype="int32"), x], max_iterations=6)
        return h, F.cast(i, "float32")


@program([rand(4, seed=2514).astype(np.float64)], [floats(2.0, -1.0).astype(np.float64)])
class TfWhileFloat64State(ContribBlock):
    """A float64 state (``tf.float64`` models) and a float64 counter made like it."""

    def hybrid_forward(self, F, x):
        def body(i, h):
            return [], [i + 1, F.tanh(h) * 1.5 + x]
        _, (i, h) = self.cf(F).while_loop(lambda i, h: i < 3, body,
                                          [F.zeros_like(F.sum(x, keepdims=True)), x],
                                          max_iterations=5)
        return h, i


@program(*STATES, [floats(9.0, 9.0)])
class TfWhileStopsOnValueNoOutputs(ContribBlock):
    """``while reduce_sum(h) < 10`` with loop variables only (no step outputs): any count of
    steps, none included."""

    def hybrid_forward(self, F, x):
        _, h = self.cf(F).while_loop(lambda h: F.sum(h) < 10,
                                     lambda h: ([], [h * 1.5 + F.abs(x) + 0.5]), [x],
                                     max_iterations=8)
        return h[0] if isinstance(h, list) else h


@program(*STATES)
class TfWhileCondReadsOuterTensor(ContribBlock):
    """The condition closes over the block's input (``tf.while_loop`` with a captured tensor)."""

    def hybrid_forward(self, F, x):
        limit = F.sum(F.abs(x)) * 3 + 1

        def body(i, h):
            return [], (i + 1, h + F.abs(x) + 0.1)
        _, (i, h) = self.cf(F).while_loop(lambda i, h: F.sum(h) < limit, body,
                                          (F.zeros((1,)), x * 0), max_iterations=40)
        return h, i


@program(*SEQ)
class TfForeachTupleOfTuplesStates(ContribBlock):
    """foreach states ``((h,), (c, d))``: a TF ``scan`` initializer of nested tuples."""

    def hybrid_forward(self, F, x, h0):
        def body(xt, states):
            (h,), (c, d) = states
            c2 = c * 0.5 + xt * d
            h2 = F.tanh(h + c2)
            return h2 * 2, ((h2,), (c2, d + 0.1))
        outs, ((h,), (c, d)) = self.cf(F).foreach(body, x, ((h0,), (h0 * 0, h0 + 1)))
        return outs, h, c, d


@program(*SEQ)
class TfForeachTupleDataTupleOutputs(ContribBlock):
    """foreach over the tuple ``(x, x * 2)`` with the outputs ``(a, (b, c))``."""

    def hybrid_forward(self, F, x, h0):
        def body(data, h):
            a, b = data
            h2 = h[0] * 0.5 + a - b * 0.25
            return (h2, (a * h2, F.relu(b))), [h2]
        (o1, (o2, o3)), h = self.cf(F).foreach(body, (x, x * 2), [h0])
        return o1, o2, o3, h[0]


@program([rand(2, 3, seed=2515), rand(2, 3, seed=2516)],
         [rand(2, 3, seed=2517) - 2, rand(2, 3, seed=2518)])
class TfCondReturnsTupleOfTuples(ContribBlock):
    """``tf.cond`` whose branches return ``((a, b), c)``."""

    def hybrid_forward(self, F, x, y):
        (a, b), c = self.cf(F).cond(F.sum(x) > 0, lambda: ((x, y * 2), x + y),
                                    lambda: ((y - 1, x * 3), x * y))
        return a, b, c


@program(*STATES)
class TfWhileInsideCondBranch(ContribBlock):
    """A while_loop only in one branch of a cond (a refinement loop run when needed)."""

    def hybrid_forward(self, F, x):
        cf = self.cf(F)

        def refine():
            _, (i, h) = cf.while_loop(lambda i, h: i < 3,
                                      lambda i, h: ([], (i + 1, F.tanh(h) + x)),
                                      (F.zeros((1,)), x), max_iterations=3)
            return h
        return cf.cond(F.sum(x) > 0, refine, lambda: x * -2)


@program(*SEQ)
class TfCondInsideForeachNestedStates(ContribBlock):
    """A cond per step choosing between two updates of nested states ``[h, (c,)]``."""

    def hybrid_forward(self, F, x, h0):
        cf = self.cf(F)

        def body(xt, states):
            h, (c,) = states
            h2 = cf.cond(F.sum(xt) > 0, lambda: h + xt * c, lambda: h * 0.5 - xt)
            return h2, [h2, (c + 0.5,)]
        outs, (h, (c,)) = cf.foreach(body, x, [h0, (h0 * 0 + 1,)])
        return outs, h, c


@program(*STATES)
class TfWhileNegativeStepSliceInBody(ContribBlock):
    """The body reverses its state with ``F.reverse`` (``tf.reverse``; MXNet's Symbol takes no
    ``h[::-1]``, plain MXNet's TypeError)."""

    def hybrid_forward(self, F, x):
        def body(i, h):
            return F.reverse(h, axis=0), [i + 1, F.reverse(h, axis=0) * 0.5 + x]
        outs, (i, h) = self.cf(F).while_loop(lambda i, h: i < 3, body, [F.zeros((1,)), x],
                                             max_iterations=3)
        return outs, h


@program(*STATES)
class TfWhileOutputsNestedFullSteps(ContribBlock):
    """Step outputs ``((a, b), c)`` over every step."""

    def hybrid_forward(self, F, x):
        def body(i, h):
            h2 = F.broadcast_add(h * 0.9, i)
            return ((h2, h2 * 2), F.sum(h2, keepdims=True)), [i + 1, h2]
        ((a, b), c), _ = self.cf(F).while_loop(lambda i, h: i < 4, body,
                                               [F.zeros((1,)), x], max_iterations=4)
        return a, b, c


@program([np.array([[1, 2, 3], [4, 5, 6]], np.int32), rand(3, seed=2519)],
         [np.array([[-1, 0, 2]], np.int32), rand(3, seed=2520)])
class ForeachInt32DataFloatState(ContribBlock):
    """foreach over int32 token ids cast per step, a float state."""
    NO_GRAD = (0,)

    def hybrid_forward(self, F, ids, h0):
        def body(t, h):
            v = F.cast(t, "float32")
            h2 = h[0] * 0.5 + v * 0.1
            return F.cast(t * 2, "int32"), [h2]
        outs, h = self.cf(F).foreach(body, ids, [h0])
        return outs, h[0]


@program([rand(3, 4, seed=2521).astype(np.float16), rand(4, seed=2522).astype(np.float16)],
         [rand(1, 4, seed=2523).astype(np.float16), rand(4, seed=2524).astype(np.float16)])
class ForeachFloat16(ContribBlock):
    """foreach on float16 data and states (mixed-precision models)."""
    TOL = (1e-2, 1e-2)

    def hybrid_forward(self, F, x, h0):
        def body(xt, h):
            h2 = F.tanh(h[0] + xt) * 0.5
            return h2, [h2]
        outs, h = self.cf(F).foreach(body, x, [h0])
        return outs, h[0]


@program([np.array([3, 1], np.int32), rand(2, seed=2525)],
         [np.array([-3, 1], np.int32), rand(2, seed=2526)])
class CondOnInt32Sum(ContribBlock):
    """A cond whose predicate is an int32 sum and whose branches return int32 and float."""
    NO_GRAD = (0,)

    def hybrid_forward(self, F, n, x):
        a, b = self.cf(F).cond(F.sum(n) > 0, lambda: (n * 2, x * 2), lambda: (n - 1, x + 1))
        return a, b


# ---- gluonnlp 0.10 layers inside gluon_cf's loops ------------------------------------------

def _nlp():
    import gluonnlp
    return gluonnlp


@program([rand(2, 1, 4, seed=2527), rand(2, 5, 4, seed=2528)],
         [rand(1, 1, 4, seed=2529), rand(1, 2, 4, seed=2530)])
class NlpMultiHeadAttentionInWhile(ContribBlock):
    """gluonnlp's MultiHeadAttentionCell (scaled dot product, two heads) attending over the
    memory each step of a while_loop, the query its state (a decoder's self-refinement)."""
    TOL = (1e-4, 1e-5)

    def __init__(self):
        super().__init__()
        nlp = _nlp()
        with self.name_scope():
            self.att = nlp.model.MultiHeadAttentionCell(
                nlp.model.DotProductAttentionCell(scaled=True), 4, 4, 4, 2)

    def hybrid_forward(self, F, q, mem):
        def body(i, h):
            ctx, _ = self.att(h, mem)
            h2 = F.tanh(h + ctx)
            return h2, [i + 1, h2]
        outs, (i, h) = self.cf(F).while_loop(lambda i, h: i < 3, body, [F.zeros((1,)), q],
                                             max_iterations=3)
        return outs, h


@program([rand(3, 2, 4, seed=2531)], [rand(1, 1, 4, seed=2532)])
class NlpPositionwiseFFNInForeach(ContribBlock):
    """gluonnlp's PositionwiseFFN (residual, LayerNorm) applied to each step in a foreach."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.ffn = _nlp().model.transformer.PositionwiseFFN(units=4, hidden_size=8)

    def hybrid_forward(self, F, x):
        def body(xt, s):
            y = self.ffn(xt + s[0])
            return y, [s[0] * 0.5 + y]
        outs, s = self.cf(F).foreach(body, x, [F.zeros_like(F.sum(x, axis=0))])
        return outs, s[0]


@program([rand(2, 3, 4, seed=2533)], [rand(1, 5, 4, seed=2534)])
class NlpUniversalTransformerEncoderCell(ContribBlock):
    """A universal transformer: gluonnlp's TransformerEncoderCell applied three times in a
    while_loop (one cell, shared weights)."""
    TOL = (1e-4, 1e-5)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = _nlp().model.transformer.TransformerEncoderCell(
                units=4, hidden_size=8, num_heads=2)

    def hybrid_forward(self, F, x):
        def body(i, h):
            out = self.cell(h)
            out = out[0] if isinstance(out, (list, tuple)) else out
            return [], [i + 1, out]
        _, (i, h) = self.cf(F).while_loop(lambda i, h: i < 3, body, [F.zeros((1,)), x],
                                          max_iterations=3)
        return h


@program([rand(3, 2, 3, seed=2535)], [rand(1, 4, 3, seed=2536)])
class NlpHighwayInForeach(ContribBlock):
    """gluonnlp's Highway (two layers) on each step's input in a foreach."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.hw = _nlp().model.Highway(3, 2)

    def hybrid_forward(self, F, x):
        def body(xt, s):
            y = self.hw(xt) + s[0]
            return y, [y * 0.5]
        outs, s = self.cf(F).foreach(body, x, [F.zeros_like(F.sum(x, axis=0))])
        return outs, s[0]


@program([rand(2, 1, 4, seed=2537), rand(2, 4, 4, seed=2538), floats(4, 2)],
         [rand(2, 1, 4, seed=2539), rand(2, 4, 4, seed=2540), floats(1, 3)])
class NlpDotAttentionMaskedInCondInWhile(ContribBlock):
    """gluonnlp's DotProductAttentionCell (Luong style) masked by valid length, chosen by a
    cond per step of a while_loop (attend, or keep the state)."""
    NO_GRAD = (2,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.att = _nlp().model.DotProductAttentionCell(units=4, luong_style=True)

    def hybrid_forward(self, F, q, mem, length):
        cf = self.cf(F)
        steps = F.arange(4).reshape((1, 1, 4))
        mask = F.broadcast_lesser(steps, length.reshape((-1, 1, 1)))

        def body(i, h):
            h2 = cf.cond(F.sum(h) > 0, lambda: self.att(h, mem, None, mask)[0] + h,
                         lambda: h * 0.5 + 0.25)
            return [], [i + 1, h2]
        _, (i, h) = cf.while_loop(lambda i, h: i < 3, body, [F.zeros((1,)), q],
                                  max_iterations=3)
        return h


@program(*SEQ)
class GluonLSTMPCellInForeach(ContribBlock):
    """MXNet's contrib LSTMPCell (projected LSTM, gluonnlp's language models) unrolled by a
    foreach with its two states."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = mx.gluon.contrib.rnn.LSTMPCell(4, 3, input_size=3)

    def hybrid_forward(self, F, x, h0):
        def body(xt, states):
            out, new = self.cell(xt, states)
            return out, new
        c0 = F.concat(h0, F.slice_axis(h0, axis=1, begin=0, end=1), dim=1) * 0
        outs, (h, c) = self.cf(F).foreach(body, x, [h0, c0])
        return outs, h, c


# ---- autograph: Python's ways of organising code around tensor control flow ------------------

class PropertyScaleReadInTensorFor(HybridBlock):
    """A ``@property`` computing a Python constant, read in each step of a tensor for."""

    @property
    def decay(self):
        return 0.5 if self.prefix else 0.25

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h * self.decay + F.tanh(row)
        return h


program(*ROWS)(PropertyScaleReadInTensorFor)


@program(*STATES)
class StaticmethodStepInTensorWhile(HybridBlock):
    """A ``@staticmethod`` step (taking ``F``) called in a tensor while."""

    @staticmethod
    def _step(F, h):
        return F.tanh(h) * 1.5 + 0.5

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        while F.sum(h) < 3:
            gluon_cf.max_iterations(10)
            h = self._step(F, h)
        return h


@program(*ROWS)
class ClassmethodReadsClassConstantInTensorIf(HybridBlock):
    """A ``@classmethod`` returning a class constant, called in a tensor if in a for."""
    ALPHA = 0.3

    @classmethod
    def alpha(cls):
        return cls.ALPHA * 2

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            if F.sum(row) > 0:
                h = h + row * self.alpha()
            else:
                h = h - row * type(self).alpha()
        return h


def _clip_step(F, h, row, lo, hi):
    if F.max(h) > hi:
        return F.clip(h, lo, hi) + row
    return h + row


@program(*ROWS)
class PartialOfHelperWithTensorIf(HybridBlock):
    """``functools.partial(_clip_step, lo=..., hi=...)`` made before a tensor for, the helper
    holding a tensor if and two returns."""

    @autograph
    def hybrid_forward(self, F, x):
        step = functools.partial(_clip_step, F, lo=-0.5, hi=0.75)
        h = x[0] * 0
        for row in x:
            h = step(h, row)
        return h


def _traced(fn):
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    return wrapper


@program(*ROWS)
class WrapsDecoratedMethodWithTensorFor(HybridBlock):
    """A method decorated with a ``functools.wraps`` wrapper, holding a tensor for, called
    from the converted forward."""

    @_traced
    def _encode(self, F, x):
        h = x[0] * 0
        for row in x:
            h = F.tanh(h + row)
        return h

    @autograph
    def hybrid_forward(self, F, x):
        h = self._encode(F, x)
        if F.sum(h) > 0:
            h = h * 2
        return h


@dataclasses.dataclass(frozen=True)
class _Config:
    steps: int = 3
    alpha: float = 0.5
    threshold: float = 1.5


@program(*ROWS)
class FrozenDataclassConfigBoundsTensorLoop(HybridBlock):
    """A frozen dataclass config: ``for _ in range(cfg.steps)`` with a tensor break on
    ``cfg.threshold``."""
    cfg = _Config()

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for _ in range(self.cfg.steps):
            h = h * self.cfg.alpha + F.sum(x, axis=0)
            if F.max(h) > self.cfg.threshold:
                break
        return h


def _forward_args(fn, *args, **kwargs):
    return fn(*args, **kwargs)


def _scaled_update(F, h, row, *, scale=1.0, act=None):
    out = h * scale + row
    if act is not None:
        out = act(out)
    if F.sum(out) < 0:
        out = -out
    return out


@program(*ROWS)
class ArgsKwargsForwardingToHelperWithTensorIf(HybridBlock):
    """``*args``/``**kwargs`` forwarded through a generic caller to a helper with a tensor if
    and a keyword-only activation."""

    @autograph
    def hybrid_forward(self, F, x):
        opts = {"scale": 0.5, "act": F.tanh}
        h = x[0] * 0
        for row in x:
            h = _forward_args(_scaled_update, F, h, row, **opts)
        return h


@program(*ROWS)
class DefaultArgLambdasInPythonLoopInsideTensorFor(HybridBlock):
    """``[lambda v, k=k: v * k for k in ...]`` made once, applied in a Python loop nested in
    a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        fns = [lambda v, k=k: v * (0.5 ** k) for k in range(1, 4)]
        h = x[0] * 0
        for row in x:
            for f in fns:
                h = f(h) + row
        return h


@program(*STATES)
class DefaultArgCapturesValueBeforeTensorIf(HybridBlock):
    """``f = lambda v, s=scale: v * s`` then ``scale`` reassigned by a tensor if: the default
    keeps the value at the lambda's definition (Python's rule)."""

    @autograph
    def hybrid_forward(self, F, x):
        scale = x * 0 + 2
        f = lambda v, s=scale: v * s      # noqa: E731 (a ported TF lambda)
        if F.sum(x) > 0:
            scale = scale * 3
        else:
            scale = scale * 5
        return f(x) + scale


def _scales(n):
    for k in range(n):
        yield 1.0 / (k + 2)


@program(*ROWS)
class GeneratorHelperYieldingConstantsInTensorFor(HybridBlock):
    """A generator of Python numbers iterated inside each step of a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            for s in _scales(3):
                h = h * s + row
        return h


def _deep(F, h, n):
    return h if n == 0 else _deep(F, F.tanh(h) * 0.9 + 0.1, n - 1)


@program(*ROWS)
class PythonRecursiveHelperInTensorFor(HybridBlock):
    """A helper recursing in Python on a Python depth, called per step of a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = _deep(F, h + row, 3)
        return h


def _deep_if(F, h, n):
    if n == 0:
        return h
    if F.sum(h) > 0:
        return _deep_if(F, h * 0.5, n - 1)
    return _deep_if(F, h + 1, n - 1)


@program(*STATES)
class PythonRecursiveHelperWithTensorIf(HybridBlock):
    """A Python-recursive helper (Python depth) whose every level has a tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        return _deep_if(F, x, 3)


@program(*ROWS)
class EarlyReturnInsideTensorFor(HybridBlock):
    """``return`` from inside a tensor for when the running sum passes a bound."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h + row
            if F.sum(h) > 2:
                return h * 2
        return h


@program(*STATES, [floats(20.0, 1.0)])
class EarlyReturnInsideTensorWhile(HybridBlock):
    """``return`` from inside a tensor while; the loop's own exit returns something else."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        while F.sum(h) < 10:
            gluon_cf.max_iterations(12)
            h = h + F.abs(h) + 0.5
            if F.max(h) > 6:
                return h - 6
        return h * 0.1


@program(*ROWS, [rand(4, 3, seed=2541) - 0.5])
class NestedTensorForsBreakContinueBothLevels(HybridBlock):
    """Rows, then each row's values: ``continue`` outer on a negative row, ``break`` inner on
    a large value, ``break`` outer on a large total."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x[0]) * 0
        for row in x:
            if F.sum(row) < 0:
                continue
            for v in row:
                if v > 0.6:
                    break
                h = h + v
            if h > 1.5:
                break
        return h


@program(*ROWS)
class WhileInsideForWithContinue(HybridBlock):
    """A tensor while inside a tensor for, with a ``continue`` of the for before it."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            if F.min(row) > 0.9:
                continue
            k = F.sum(row) * 0
            while k < 2:
                h = h * 0.5 + row
                k = k + 1
        return h


@program(*ROWS)
class ShapeReadInsideTensorFor(HybridBlock):
    """``x.shape[0]`` and ``row.shape[-1]`` (Python ints) read in each step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h + row / x.shape[0] + row.shape[-1]
        return h


@program(*ROWS)
class ForRangeOfShapeWithTensorBreak(HybridBlock):
    """``for t in range(x.shape[0])`` indexing ``x[t]``, with a tensor break."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for t in range(x.shape[0]):
            h = h + x[t] * (t + 1)
            if F.sum(h) > 3:
                break
        return h


@program(*ROWS)
class ReversedRowsByNegativeStep(HybridBlock):
    """``for row in x[::-1]`` (a backward RNN ported from ``tf.reverse``)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x[::-1]:
            h = F.tanh(h * 0.5 + row)
        return h


# (not one row: ``x[-1:0:-2]`` of one row has none, and plain MXNet's backward of a slice of
# no row fails, eager and hybridized: MXNet 1.9.1's own zero-size limit)
@program(ROWS[0], ROWS[2], [rand(5, 3, seed=2542)])
class NegativeStepSlicesInsideTensorFor(HybridBlock):
    """``row[::-1]`` and ``x[-1:0:-2]`` inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h * 0.5 + row[::-1]
        return h + F.sum(x[-1:0:-2], axis=0)


@program([np.array([[1, 2, 3], [0, -1, 4]], np.int32)], [np.array([[5, 5, 5]], np.int32)])
class Int32RowsCastInTensorFor(HybridBlock):
    """int32 rows cast to float32 in a tensor for; a tensor if on the int sum."""
    NO_GRAD = (0,)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            if F.sum(row) > 5:
                h = h + F.cast(row, "float32") * 0.5
            else:
                h = h - 1
        return h


@program([rand(3, 4, seed=2543).astype(np.float16)], [rand(1, 4, seed=2544).astype(np.float16)])
class Float16RowsTensorFor(HybridBlock):
    """float16 rows and state in a tensor for with a tensor if."""
    TOL = (1e-2, 1e-2)

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            if F.sum(row) > 0:
                h = h * 0.5 + row
            else:
                h = h - row
        return h


@program([rand(4, seed=2545).astype(np.float64)], [floats(-3.0, 1.0).astype(np.float64)])
class Float64TensorWhile(HybridBlock):
    """A float64 state in a tensor while."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        while F.sum(h) < 5:
            gluon_cf.max_iterations(10)
            h = h + F.abs(h) + 0.5
        return h


@program(*ROWS)
class CastRoundTripInsideLoop(HybridBlock):
    """``cast(cast(h * 10, int32), float32) / 10`` (quantisation) inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            q = F.cast(F.cast(h * 10, "int32"), "float32") / 10
            h = q + row * 0.5 + h * 0.1
        return h


@program(*ROWS, [rand(2, 3, seed=2546) - 2])
class ConditionalExpressionOfTensorInFor(HybridBlock):
    """``h = a if tensor_pred else b`` inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h * 2 + row if F.sum(row) > 0 else h - row
        return h


@program(*ROWS, [rand(2, 3, seed=2547) - 2])
class AndOrNotOfTensorConditions(HybridBlock):
    """``if a > 0 and not b < c or ...`` of tensors in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            if F.sum(row) > 0 and not F.max(row) > 0.9:
                h = h + row
            elif F.min(row) < -1.5 or F.sum(h) > 1:
                h = h * 0.5
            else:
                h = h - 0.1
        return h


@program(*STATES)
class WhileTrueWithTensorBreak(HybridBlock):
    """``while True:`` with a tensor ``break`` (TF's ``while`` with an inner ``tf.cond``)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        while True:
            gluon_cf.max_iterations(10)
            h = F.abs(h) * 1.5 + 1
            if F.sum(h) > 5:
                break
        return h


def _pair_update(F, h, row):
    if F.sum(row) > 0:
        return h + row, row * 2
    return h - row, row * 0


@program(*ROWS, [rand(3, 3, seed=2548) - 0.5])
class HelperReturnsTupleFromTensorIf(HybridBlock):
    """A helper returning a tuple from each side of a tensor if, unpacked in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        acc = x[0] * 0
        for row in x:
            h, extra = _pair_update(F, h, row)
            acc = acc + extra
        return h, acc


class _Base(HybridBlock):
    def _step(self, F, h, row):
        return F.tanh(h + row)


@program(*ROWS)
class SuperHelperCalledInTensorFor(_Base):
    """A subclass helper calling ``super()._step`` (zero-argument super) per row."""

    def _step(self, F, h, row):
        return super()._step(F, h, row) * 2

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = self._step(F, h, row)
        return h


@program(*ROWS)
class SuperCalledDirectlyInConvertedForward(_Base):
    """``super()._step`` called in the converted ``hybrid_forward`` itself, in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            if F.sum(row) > 0:
                h = super()._step(F, h, row)
            else:
                h = h * 0.5
        return h


@program(*ROWS)
class GetattrOfFByNameInTensorFor(HybridBlock):
    """``getattr(F, self.act)(h)``: the activation named in the config."""
    act = "sigmoid"

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = getattr(F, self.act)(h + row)
        return h


_ACTS = {"tanh": lambda F, v: F.tanh(v), "relu": lambda F, v: F.relu(v)}


@program(*ROWS, [rand(3, 3, seed=2549) - 0.5])
class DictDispatchOfActivationsInTensorIf(HybridBlock):
    """A module dict of lambdas chosen by a tensor if per row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            if F.sum(row) > 0:
                h = _ACTS["tanh"](F, h + row)
            else:
                h = _ACTS["relu"](F, h - row)
        return h


@program(*ROWS)
class StarredUnpackOfStateTuple(HybridBlock):
    """``h, *rest = (a, b, c)`` each step; the rest carried as a list."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        c = x[0] * 0
        for row in x:
            h, *rest = (F.tanh(h + row), c + row, row * 2)
            c = rest[0] * 0.5 + rest[1] * 0.1
        return h, c


@program(*ROWS)
class ChainedMethodCallsInTensorFor(HybridBlock):
    """``row.reshape((1, -1)).tanh().sum(axis=0)`` fluent calls per row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h * 0.5 + row.reshape((1, -1)).tanh().sum(axis=0)
        return h


@program(*ROWS)
class ListCompOverPythonRangeInTensorFor(HybridBlock):
    """``F.add_n(*[h * k for k in range(1, 3)])`` inside a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0 + 0.1
        for row in x:
            h = F.add_n(*[h * (0.25 * k) for k in range(1, 3)]) + row
        return h


@program(*ROWS)
class OptionalStateIsNoneInTensorFor(HybridBlock):
    """``if h is None: h = row`` (the first step), then updates: a Python check per step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = None
        for row in x:
            if h is None:
                h = row
            else:
                h = h * 0.5 + row
        return h


@program(*ROWS)
class TryFinallyInTensorFor(HybridBlock):
    """``try: ... finally: pass`` around each step's update."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            try:
                h = F.tanh(h + row)
            finally:
                pass
        return h


@program(*ROWS)
class ForElseWithoutTensorBreak(HybridBlock):
    """``for ... else`` with no break: the else always runs after the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = h + row
        else:
            h = h * 10
        return h


@program(*STATES)
class WhileElseWithoutBreak(HybridBlock):
    """``while ... else`` with no break."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        while F.sum(h) < 8:
            gluon_cf.max_iterations(10)
            h = h + F.abs(h) + 1
        else:
            h = h - 1
        return h


class _WithInner(HybridBlock):
    def _inner(self, F, h, row):
        for v in row:
            h = h + v * 0.1
        return h


@program(*ROWS, [rand(3, 3, seed=2550) - 0.5])
class MethodWithTensorForCalledInTensorIf(_WithInner):
    """A method with its own tensor for over a row's values, called in a tensor if per row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x[0]) * 0
        for row in x:
            if F.sum(row) > 0:
                h = self._inner(F, h, row)
            else:
                h = h - 0.5
        return h


@program(*ROWS)
class OptionalBiasKeywordInHelper(HybridBlock):
    """A helper with ``bias=None`` (a Python check) given a tensor on some calls."""

    @staticmethod
    def _step(F, h, row, bias=None):
        out = h * 0.5 + row
        if bias is not None:
            out = out + bias
        return out

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = self._step(F, h, row)
            h = self._step(F, h, row, bias=row * 0.1)
        return h


@program(*ROWS)
class AssertOnPythonShapeBeforeLoop(HybridBlock):
    """``assert x.shape[1] == 3`` (Python ints) before a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        assert x.shape[-1] == 3, "three features"
        h = x[0] * 0
        for row in x:
            h = h + row
        return h


@program(*ROWS, [rand(3, 3, seed=2551) - 0.5])
class ParamUsedInOneBranchOnly(_Dense):
    """A Dense (declared with its input size) read in one branch of a tensor if per row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            if F.sum(row) > 0:
                h = self.fc(F.expand_dims(h + row, 0))[0]
            else:
                h = h - row
        return h


class DeferredDenseUsedInOneBranch(HybridBlock):
    """A Dense without its input size (deferred initialisation) read in one branch only."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, flatten=False)

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            return self.fc(x)
        return x * 2


program([rand(2, 3, seed=2553) - 2], [rand(2, 3, seed=2552) + 1])(DeferredDenseUsedInOneBranch)


@program(*ROWS)
class AugAssignAliasInTensorFor(HybridBlock):
    """``prev = h; h = h + row`` vs augmented ``+=`` on a fresh value: rebinding semantics
    only (the value ``prev`` names is the old one)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        acc = x[0] * 0
        for row in x:
            prev = h
            h = h * 1
            h += row
            acc = acc + prev
        return h, acc

    @staticmethod
    def oracle_where_plain_fails(self, F, x):
        # (plain MXNet refuses += on a recorded NDArray: the same, out of place)
        h = x[0] * 0
        acc = x[0] * 0
        for row in x:
            prev = h
            h = h * 1 + row
            acc = acc + prev
        return h, acc


@program(*ROWS)
class AugAssignOperatorsChainInTensorFor(HybridBlock):
    """``h *= 0.5; h += row; h -= 0.1; h /= 2`` per row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h *= 0.5
            h += row
            h -= 0.1
            h /= 2
        return h

    @staticmethod
    def oracle_where_plain_fails(self, F, x):
        h = x[0] * 0
        for row in x:
            h = (h * 0.5 + row - 0.1) / 2
        return h


# ---- masks keeping every or no row, zero-length inputs (plain Python oracles) ----------------

def _masked_sum(F, x, m):
    """The sum of the rows of ``x`` that ``m`` keeps, without boolean_mask (the oracle's)."""
    return F.sum(x * F.expand_dims(m, 1), axis=0)


@program(*MASKS)
class ForeachBodySumsMaskedRows(HybridBlock):
    """A foreach body summing ``boolean_mask(x, m)`` (a closure) each step."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        def body(xt, h):
            kept = F.contrib.boolean_mask(x, m)
            h2 = h[0] * 0.5 + F.sum(kept, axis=0) + xt
            return h2, [h2]
        outs, h = gluon_cf.foreach(body, x, [F.zeros_like(F.sum(x, axis=0))])
        return outs, h[0]

    def plain_forward(self, F, x, m):
        h, outs = x[0] * 0, []
        for t in range(x.shape[0]):
            h = h * 0.5 + _masked_sum(F, x, m) + x[t]
            outs.append(h)
        return F.stack(*outs), h


@program(*MASKS)
class WhileBodySumsMaskedRows(HybridBlock):
    """A while_loop body summing ``boolean_mask(x * i, m)`` (the counter inside the mask)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        def body(i, h):
            kept = F.contrib.boolean_mask(F.broadcast_mul(x, i + 1), m)
            return [], [i + 1, h + F.sum(kept, axis=0)]
        _, (i, h) = gluon_cf.while_loop(lambda i, h: i < 3, body,
                                        [F.zeros((1,)), F.zeros_like(F.sum(x, axis=0))],
                                        max_iterations=3)
        return h

    def plain_forward(self, F, x, m):
        h = x[0] * 0
        for i in range(3):
            h = h + _masked_sum(F, x * (i + 1), m)
        return h


@program(*MASKS)
class CondBranchOfMaskedMean(HybridBlock):
    """``cond(sum(m) > 0, mean of the kept rows, -1)``: the mean only where a row is kept."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        return gluon_cf.cond(F.sum(m) > 0,
                             lambda: F.mean(F.contrib.boolean_mask(x, m), axis=0),
                             lambda: F.zeros_like(F.sum(x, axis=0)) - 1)

    def plain_forward(self, F, x, m):
        n = float(m.sum().asscalar())
        return _masked_sum(F, x, m) / n if n > 0 else x[0] * 0 - 1


@program(*MASKS)
class AutographForOverMaskedRows(HybridBlock):
    """``for row in boolean_mask(x, m)``: a loop over the kept rows, none on some calls."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, m):
        h = x[0] * 0
        for row in F.contrib.boolean_mask(x, m):
            h = F.tanh(h + row)
        return h

    def plain_forward(self, F, x, m):
        h = x[0] * 0
        for t in range(x.shape[0]):
            if m[t].asscalar() > 0:
                h = F.tanh(h + x[t])
        return h


@program(*MASKS)
class AutographMaskedMeanInTensorIf(HybridBlock):
    """``kept = boolean_mask(x, m)`` then a tensor if on ``sum(m)`` reading ``kept``'s mean."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        if F.sum(m) > 0:
            h = F.mean(kept, axis=0)
        else:
            h = x[0] * 0
        return h

    def plain_forward(self, F, x, m):
        n = float(m.sum().asscalar())
        return _masked_sum(F, x, m) / n if n > 0 else x[0] * 0


@program(*MASKS)
class MaskedRowsCountBoundsWhile(HybridBlock):
    """``n = sum(m)``; a while over ``i < n`` reading ``x[i]`` with take (a count of zero on
    some calls)."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, m):
        n = F.sum(m)
        i = F.zeros((1,))
        h = x[0] * 0
        while i < n:
            gluon_cf.max_iterations(8)
            h = h * 0.5 + F.take(x, i)[0]
            i = i + 1
        return h

    def plain_forward(self, F, x, m):
        h = x[0] * 0
        for i in range(int(m.sum().asscalar())):
            h = h * 0.5 + x[i]
        return h


@program([rand(3, 3, seed=2554)], [np.zeros((0, 3), np.float32)], [rand(1, 3, seed=2555)])
class AutographForOverZeroRows(HybridBlock):
    """``for row in x`` where x may have no row: the state made from ``sum(x, axis=0)``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0) * 0
        for row in x:
            h = F.tanh(h + row)
        return h + 1


@program(*MASKS)
class ForeachOverKeptRows(HybridBlock):
    """gluon_cf.foreach over ``boolean_mask(x, m)`` itself (no kept row on some calls)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        outs, h = gluon_cf.foreach(lambda r, h: (h[0] + r, [h[0] * 0.5 + r]), kept,
                                   [F.sum(x, axis=0) * 0])
        return h[0]

    def plain_forward(self, F, x, m):
        h = x[0] * 0
        for t in range(x.shape[0]):
            if m[t].asscalar() > 0:
                h = h * 0.5 + x[t]
        return h


@program(*MASKS)
class RecursionOverMaskedPrefix(HybridBlock):
    """A user's recursion (gluon_cf.recursive) summing the kept rows from index i on."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, m):
        @gluon_cf.recursive
        def walk(i):
            return gluon_cf.cond(i < F.sum(F.ones_like(m)),
                                 lambda: walk(i + 1) + F.broadcast_mul(
                                     F.take(x, i).reshape((-1,)), F.take(m, i)),
                                 lambda: F.zeros_like(F.sum(x, axis=0)))
        return walk(F.zeros((1,)))

    def plain_forward(self, F, x, m):
        return _masked_sum(F, x, m)


# ---- child blocks inside loop bodies ----------------------------------------------------------

class _GateChild(HybridBlock):
    """A child block whose own ``hybrid_forward`` is converted (a tensor if)."""

    @autograph
    def hybrid_forward(self, F, v):
        if F.sum(v) > 0:
            return F.tanh(v)
        return v * 0.5


@program(*SEQ)
class AutographChildInForeachBody(ContribBlock):
    """A child block with a converted tensor if, called in each step of a foreach."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.gate = _GateChild()

    def hybrid_forward(self, F, x, h0):
        def body(xt, s):
            h2 = self.gate(s[0] + xt)
            return h2, [h2]
        outs, s = self.cf(F).foreach(body, x, [h0])
        return outs, s[0]


@program(*ROWS)
class AutographChildInParentTensorFor(HybridBlock):
    """A converted child block called in the converted parent's tensor for."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.gate = _GateChild()

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            h = self.gate(h + row)
        return h


@program(*STATES)
class SequentialInWhileBody(ContribBlock):
    """An ``nn.HybridSequential`` (Dense, Activation, Dense) as a while_loop's body."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.mlp = nn.HybridSequential()
            self.mlp.add(nn.Dense(5, in_units=1, flatten=False), nn.Activation("tanh"),
                         nn.Dense(1, in_units=5, flatten=False))

    def hybrid_forward(self, F, x):
        def body(i, h):
            h2 = self.mlp(h.reshape((-1, 1))).reshape((-1,)) + h
            return [], [i + 1, h2]
        _, (i, h) = self.cf(F).while_loop(lambda i, h: i < 3, body, [F.zeros((1,)), x],
                                          max_iterations=3)
        return h


@program([np.array([1, 3], np.float32), rand(2, 4, seed=2556)],
         [np.array([0], np.float32), rand(1, 4, seed=2557)])
class GreedyDecodeEmbeddingInWhile(ContribBlock):
    """A greedy decoder: embed the token, a Dense to logits, argmax as the next token, for a
    fixed number of steps (a while_loop, tokens carried as floats as MXNet's argmax gives)."""
    NO_GRAD = (0,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.emb = nn.Embedding(5, 4)
            self.out = nn.Dense(5, in_units=4)

    def hybrid_forward(self, F, tok, h0):
        def body(i, t, h):
            h2 = F.tanh(self.emb(t) + h)
            t2 = F.argmax(self.out(h2), axis=1)
            return [t2, h2], [i + 1, t2, h2]
        outs, (i, t, h) = self.cf(F).while_loop(lambda i, t, h: i < 3, body,
                                                [F.zeros((1,)), tok, h0], max_iterations=3)
        return outs[0], outs[1], h


@program(*SEQ)
class BatchNormInForeachBodyTraining(ContribBlock):
    """BatchNorm on each step's rows in a foreach, trained (recorded): hybridized, gluon_cf
    refuses training it (its running statistics would not be updated) at the user's line."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.bn = nn.BatchNorm(in_channels=3)

    def hybrid_forward(self, F, x, h0):
        def body(xt, s):
            h2 = self.bn(xt) + s[0] * 0.5
            return h2, [h2]
        outs, s = self.cf(F).foreach(body, x, [h0])
        return outs, s[0]


@program(*SEQ)
class DropoutZeroRateInForeach(ContribBlock):
    """Dropout(0) in a foreach body while recording (a config that turns dropout off)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.drop = nn.Dropout(0.0)

    def hybrid_forward(self, F, x, h0):
        def body(xt, s):
            h2 = self.drop(F.tanh(xt + s[0]))
            return h2, [h2]
        outs, s = self.cf(F).foreach(body, x, [h0])
        return outs, s[0]
