"""Issue 24, fifth round (1/2): code ported from TensorFlow (tf.while_loop state tuples,
TensorArray-like lists, tf.cond with lambdas, ``for i in tf.range``, early returns, break and
continue in nested loops, while ... else, Python-counter whiles with a tensor break),
closures and default arguments capturing loop variables, methods reading ``self`` in loops,
generators and comprehensions over tensors, enumerate/zip/range(len(x))/x.shape[0], and dict
states updated in tensor loops. ``PROGRAMS`` maps each block class to its input lists
(hostile_harness.classify runs them)."""
import functools

import numpy as np
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness
from hostile_programs3 import _contrib_oracle

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

# rows (T, 4): lengths change from call to call, positive then negative sums (one row:
# earlier rounds' ROWS)
ROWS = ([rand(3, 4)], [rand(5, 4, seed=1) * 2], [-np.abs(rand(2, 4, seed=2))])
# two row arrays of one length
PAIRS = ([rand(3, 4), rand(3, 4, seed=5)], [rand(2, 4, seed=1), rand(2, 4, seed=6) * 3])


# ------------------------------------------------------------------------- TensorFlow idioms

@program(*ROWS)
class TFWhileStateTuple(HybridBlock):
    """tf.while_loop's (i, h) state written as one tuple assignment per step."""

    @autograph(max_iterations=6)
    def hybrid_forward(self, F, x):
        i, h = F.zeros((1,)), x[0] * 0
        while i < 3:
            i, h = i + 1, F.tanh(h + F.take(x, F.minimum(i, 0)).reshape((-1,)) * i)
        return h, i


@program(*ROWS)
class TensorArrayLikeList(HybridBlock):
    """ta = [] then ta.append(...) per step of range(x.shape[0]); ta stacked (TensorArray)."""

    @autograph
    def hybrid_forward(self, F, x):
        ta = []
        h = x[0] * 0
        for t in range(x.shape[0]):
            h = F.tanh(h + x[t])
            ta.append(h)
        return F.stack(*ta)


@program(*ROWS)
class TFCondLambdas(HybridBlock):
    """tf.cond(pred, lambda: ..., lambda: ...) as gluon_cf.cond (MXNet's cond the oracle)."""

    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        return gluon_cf.cond(F.sum(h) > 0, lambda: h * 2, lambda: F.abs(h) + 1)


@program(*ROWS)
class ForOverArange(HybridBlock):
    """for i in F.arange(3): tf.range's port, i a tensor used as an index."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for i in F.arange(3):
            h = h + F.take(x, i) * (i + 1)
        return h


@program(*ROWS)
class EarlyReturnInsideWhile(HybridBlock):
    """return inside a tensor while (autograph's early return)."""

    @autograph(max_iterations=6)
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = x[0] * 0
        while i < F.shape_array(x)[0:1].astype("float32"):
            h = h + F.take(x, i).reshape((-1,))
            if F.sum(h) > 1:
                return h * 10
            i = i + 1
        return h


@program(*ROWS)
class BreakInnerContinueOuter(HybridBlock):
    """Nested tensor loops: the inner breaks, the outer continues on a tensor test."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            if F.sum(r) < -1:
                continue
            for s in x:
                h = h + r * s
                if F.sum(h) > 1:
                    break
        return h


@program(*ROWS)
class WhileElseWithTensorBreak(HybridBlock):
    """while ... else with a tensor break: the else runs only when the loop ran out."""

    @autograph(max_iterations=6)
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = x[0] * 0
        while i < F.shape_array(x)[0:1].astype("float32"):
            h = h + F.take(x, i).reshape((-1,))
            if F.max(h) > 1.2:
                break
            i = i + 1
        else:
            h = h - 100
        return h


@program(*ROWS)
class PythonCounterWhileTensorBreak(HybridBlock):
    """i = 0; while i < 4: ...; if <tensor>: break; i += 1 (a Python counter, a tensor break)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        i = 0
        while i < 4:
            h = F.tanh(h + x[0] * (i + 1))
            if F.sum(h) > 1:
                break
            i += 1
        return h


@program(*ROWS)
class PythonCounterWhileTensorBreakCollect(HybridBlock):
    """The same decoder shape collecting a step output before the break."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        outs = []
        i = 0
        while i < 3:
            h = F.tanh(h + x[0])
            outs.append(h)
            if F.max(h) > 0.9:
                break
            i = i + 1
        return F.stack(*outs)


@program(*ROWS)
class ContinueInNestedRangeLoops(HybridBlock):
    """continue on a tensor test inside nested Python ranges."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for a in range(2):
            for b in range(3):
                if F.sum(h) > 0.5:
                    continue
                h = h + x[0] * (a + b + 1) * 0.1
        return h


# ------------------------------------------------------------------------- closures

@program(*ROWS)
class DefaultArgCapturesLoopRow(HybridBlock):
    """lambda v, s=r: ... defined per row of a tensor loop (the default binds the row)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            shift = lambda v, s=r: v * 0.5 + s  # noqa: E731
            h = shift(h)
        return h


@program(*ROWS)
class LambdaBeforeLoopReadsState(HybridBlock):
    """f = lambda: h * 2 defined before the loop that reassigns h (Python reads h late)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0 + 1
        f = lambda: h * 0.5  # noqa: E731
        for r in x:
            h = f() + r
        return h


@program(*ROWS)
class NestedDefReadsWhileState(HybridBlock):
    """A nested def reading a variable a tensor while reassigns."""

    @autograph(max_iterations=6)
    def hybrid_forward(self, F, x):
        h = x[0] * 0 + 1

        def step():
            return h * 0.5
        i = F.zeros((1,))
        while i < 2:
            h = step() + x[0]
            i = i + 1
        return h


@program(*ROWS)
class ReduceOverRows(HybridBlock):
    """functools.reduce over the rows of a tensor."""

    @autograph
    def hybrid_forward(self, F, x):
        return functools.reduce(lambda a, b: a * 0.5 + b, x)


@program(*ROWS)
class ClosureReadsAfterTensorIfAssign(HybridBlock):
    """A nested def defined before a tensor if that reassigns what it reads, called after."""

    @autograph
    def hybrid_forward(self, F, x):
        w = F.sum(x, axis=0)

        def scaled(v):
            return v * w
        if F.sum(w) > 0:
            w = w + 1
        return scaled(x[0])


# ------------------------------------------------------------------------- self in loops

@program(*ROWS)
class MethodReadsSelfScaleInWhile(HybridBlock):
    """A method reading a Python attribute of the block, called in a tensor while."""

    def __init__(self):
        super().__init__()
        self.scale = 0.5

    def step(self, h, r):
        return h * self.scale + r

    @autograph(max_iterations=6)
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = x[0] * 0
        while i < 3:
            h = self.step(h, x[0])
            i = i + 1
        return h


@program(*ROWS)
class MethodAppendsSelfHistoryInLoop(HybridBlock):
    """self.history.append(h) in a tensor loop: a Python side effect per step."""

    def __init__(self):
        super().__init__()
        self.history = []

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in x:
            h = h + r
            self.history.append(h)
        return h


@program(*ROWS)
class MethodCountsCallsInTensorIf(HybridBlock):
    """self.calls += 1 inside a helper method called under a tensor if."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def bump(self, h):
        self.calls += 1
        return h * self.calls

    @autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0)
        if F.sum(h) > 0:
            h = self.bump(h)
        return h


# ------------------------------------------------------------------------- generators, comprehensions

@program(*ROWS)
class GeneratorSumOverRows(HybridBlock):
    """sum(r * r for r in x): a generator expression over a tensor."""

    @autograph
    def hybrid_forward(self, F, x):
        return sum(r * r for r in x)


@program(*ROWS)
class ListCompThenStack(HybridBlock):
    """F.stack(*[F.tanh(r) for r in x])."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*[F.tanh(r) for r in x])


@program(*ROWS)
class DictCompOverEnumerate(HybridBlock):
    """{i: r for i, r in enumerate(x)} then the values summed."""

    @autograph
    def hybrid_forward(self, F, x):
        rows = {i: r * (i + 1) for i, r in enumerate(x)}
        return F.stack(*rows.values()).sum(axis=0)


@program(*PAIRS)
class NestedComprehensionPairs(HybridBlock):
    """[[F.sum(a * b) for b in y] for a in x]: a nested comprehension over two tensors."""

    @autograph
    def hybrid_forward(self, F, x, y):
        return F.stack(*[F.concat(*[F.sum(a * b).reshape((1,)) for b in y], dim=0)
                         for a in x])


@program(*ROWS)
class MaxOverGenerator(HybridBlock):
    """max(F.sum(r) for r in x): a max over a generator (a tensor comparison)."""

    @autograph
    def hybrid_forward(self, F, x):
        return max(F.sum(r) for r in x) * x[0]


# ------------------------------------------------------------------------- enumerate, zip, shape

@program(*ROWS)
class RangeOfShapeZero(HybridBlock):
    """for i in range(x.shape[0]): h = h + x[i] * i."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for i in range(x.shape[0]):
            h = h + x[i] * i
        return h


@program(*PAIRS)
class ZipTwoTensors(HybridBlock):
    """for a, b in zip(x, y): a loop over two tensors at once."""

    @autograph
    def hybrid_forward(self, F, x, y):
        h = x[0] * 0
        for a, b in zip(x, y):
            h = F.tanh(h + a * b)
        return h


@program(*PAIRS)
class EnumerateZip(HybridBlock):
    """for i, (a, b) in enumerate(zip(x, y))."""

    @autograph
    def hybrid_forward(self, F, x, y):
        h = x[0] * 0
        for i, (a, b) in enumerate(zip(x, y)):
            h = h + (a - b) * (i + 1)
        return h


@program(*ROWS)
class EnumerateSkipFirst(HybridBlock):
    """for i, r in enumerate(x): if i == 0: continue."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for i, r in enumerate(x):
            if i == 0:
                continue
            h = h + r
        return h


@program(*ROWS)
class ReversedRangeOfShape(HybridBlock):
    """for t in range(x.shape[0] - 1, -1, -1): a backward pass."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for t in range(x.shape[0] - 1, -1, -1):
            h = h * 0.5 + x[t]
        return h


@program(*ROWS)
class ReversedRows(HybridBlock):
    """for r in reversed(x)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for r in reversed(x):
            h = h * 0.5 + r
        return h


@program(*ROWS)
class ShapeZeroAsNumber(HybridBlock):
    """x.shape[0] used as a number: sum / x.shape[0]."""

    @autograph
    def hybrid_forward(self, F, x):
        return F.sum(x, axis=0) / x.shape[0]


# ------------------------------------------------------------------------- dict states

@program(*ROWS)
class DictAugAssignInTensorFor(HybridBlock):
    """state["h"] += r in a tensor for (no break)."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0] * 0, "n": F.zeros((1,))}
        for r in x:
            state["h"] += r
            state["n"] += 1
        return state["h"], state["n"]

    def oracle_where_plain_fails(self, F, x):
        """Plain MXNet refuses += on a recorded NDArray; converted, it is out of place."""
        state = {"h": x[0] * 0, "n": F.zeros((1,))}
        for r in x:
            state["h"] = state["h"] + r
            state["n"] = state["n"] + 1
        return state["h"], state["n"]


@program(*ROWS)
class DictUpdateKwargsInLoop(HybridBlock):
    """state.update(h=...) each step of a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0] * 0, "c": x[0]}
        for r in x:
            state.update(h=F.tanh(state["h"] + r), c=state["c"] * 0.5)
        return state["h"] + state["c"]


@program(*ROWS)
class DictPopTemporaryInLoop(HybridBlock):
    """A temporary key added then popped in each step of a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0] * 0}
        for r in x:
            state["tmp"] = r * 2
            state["h"] = state["h"] + state.pop("tmp")
        return state["h"]


@program(*ROWS)
class DictAugAssignInTensorIf(HybridBlock):
    """state["h"] *= 2 under a tensor if (no loop)."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": F.sum(x, axis=0)}
        if F.sum(state["h"]) > 0:
            state["h"] *= 2
        return state["h"]

    def oracle_where_plain_fails(self, F, x):
        state = {"h": F.sum(x, axis=0)}
        if F.sum(state["h"]) > 0:
            state["h"] = state["h"] * 2
        return state["h"]


for _cls in (TFCondLambdas,):
    _cls.plain_forward = _contrib_oracle


@program(*ROWS)
class DictItemAssignInTensorWhile(HybridBlock):
    """state["h"] = ... (a plain item assignment) in a tensor while with a break."""

    @autograph(max_iterations=6)
    def hybrid_forward(self, F, x):
        state = {"h": x[0] * 0, "i": F.zeros((1,))}
        while state["i"] < F.shape_array(x)[0:1].astype("float32"):
            state["h"] = state["h"] * 0.5 + F.take(x, state["i"]).reshape((-1,))
            state["i"] = state["i"] + 1
            if F.max(state["h"]) > 1.5:
                break
        return state["h"], state["i"]


@program(*ROWS)
class DictAliasedThenItemAssignedInLoop(HybridBlock):
    """alias = state, then state["h"] = ... in a tensor loop: the alias sees every change in
    Python, so the item assignment cannot become a rebinding (refused hybridized)."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0] * 0}
        alias = state
        for r in x:
            state["h"] = state["h"] + r
        return alias["h"]


@program(*ROWS)
class DictHandedToHelperThenItemAssigned(HybridBlock):
    """A helper keeps the dict it is given; item assignments after it must not rebind."""

    def remember(self, d):
        self.kept = d
        return d["h"]

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": x[0] * 0}
        first = self.remember(state)
        for r in x:
            state["h"] = state["h"] + r
        return first + self.kept["h"]
