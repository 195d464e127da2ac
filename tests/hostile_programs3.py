"""Issue 24, second round continued (see hostile_programs2.py): gluon_cf's cond, foreach and
while_loop called the way F.contrib's are, mixed with F.contrib and converted code, blocks
calling converted blocks, ``@gluon_cf.recursive`` functions, and Python idioms on tensors
(``map``, ``functools.reduce``, ``not``, ``is None``, generators, dict iteration)."""
import contextlib
import functools

import mxnet as mx
import numpy as np
from mxnet import gluon
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph
from hostile_programs2 import POS_NEG, _rand, program


# ------------------------------------------------------------------------- gluon_cf like F.contrib

@program(*POS_NEG)
class WhileLoopContribSignature(HybridBlock):
    """F.contrib.while_loop ported by changing F.contrib to gluon_cf (outputs padded)."""

    def hybrid_forward(self, F, x):
        def cond(i, h):
            return i < 3

        def func(i, h):
            h = h * 0.5 + F.take(x, i).reshape((4,))
            return h, (i + 1, h)
        outs, (i, h) = gluon_cf.while_loop(cond, func, [F.zeros((1,)), F.mean(x, axis=0)],
                                           max_iterations=4)
        # (rows past the last step: MXNet pads with zeros hybridized, garbage eagerly)
        return F.broadcast_add(F.slice_axis(outs, axis=0, begin=0, end=3).sum(axis=0) + h, i)


@program(*POS_NEG)
class CondMultipleOutputsContrib(HybridBlock):
    def hybrid_forward(self, F, x):
        a, b = gluon_cf.cond(F.sum(x) > 0, lambda: [x * 2, x.sum(axis=0)],
                             lambda: [x - 1, x.max(axis=0)])
        return a.sum(axis=0) + b


@program(*POS_NEG)
class ForeachListDataListStates(HybridBlock):
    def hybrid_forward(self, F, x):
        def body(data, states):
            a, b = data
            h, n = states
            return a * b + h, [h + a, n + 1]
        outs, (h, n) = gluon_cf.foreach(body, [x, x * 2], [F.mean(x, axis=0), F.zeros((1,))])
        return outs.sum(axis=0) + F.broadcast_div(h, n)


@program(*POS_NEG)
class ContribForeachAroundGluonCFCond(HybridBlock):
    def hybrid_forward(self, F, x):
        def body(r, h):
            h = gluon_cf.cond(F.sum(r) > 0, lambda: h + r, lambda: h - r)
            return h, h
        outs, h = F.contrib.foreach(body, x, F.mean(x, axis=0))
        return outs.sum(axis=0) + h


@program(*POS_NEG)
class GluonCFWhileAroundAutographHelper(HybridBlock):
    def step(self, F, h):
        if F.sum(h) > 0:
            return h * 0.5
        return h + 1

    def hybrid_forward(self, F, x):
        convert = gluon_cf.autograph(self.step)
        _, (i, h) = gluon_cf.while_loop(lambda i, h: i < 3,
                                        lambda i, h: (None, (i + 1, convert(F, h))),
                                        [F.zeros((1,)), x], max_iterations=3)
        return h


@program(*POS_NEG)
class AutographLoopAroundContribForeach(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x:
            outs, h = F.contrib.foreach(lambda d, s: (d + s, d + s), x, h + r)
        return h


@program(*POS_NEG)
class CondPredicateFromPythonBool(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return gluon_cf.cond(F.ones((1,)) * (1 > 0), lambda: x * 2, lambda: x * 3)


@program(*POS_NEG)
class WhileLoopZeroIterationsOutputs(HybridBlock):
    def hybrid_forward(self, F, x):
        outs, (h,) = gluon_cf.while_loop(lambda h: F.sum(h) > 1e9, lambda h: (h * 2, (h * 2,)),
                                         [x], max_iterations=3)
        return h


# ------------------------------------------------------------------------- blocks in blocks

class _ClippedStep(HybridBlock):
    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(4, flatten=False, in_units=4)

    @autograph
    def hybrid_forward(self, F, h):
        h = self.dense(h)
        if F.sum(h) > 0:
            h = F.clip(h, -0.5, 0.5)
        return h


class _WhileChild(HybridBlock):
    @autograph(max_iterations=4)
    def hybrid_forward(self, F, h):
        i = F.zeros((1,))
        while i < 2:
            h = h * 0.9 + 0.1
            i = i + 1
        return h


@program(*POS_NEG)
class ChildWithTensorIfInTensorWhile(HybridBlock):
    def __init__(self):
        super().__init__()
        self.step = _ClippedStep()

    @autograph(max_iterations=4)
    def hybrid_forward(self, F, x):
        h = x
        i = F.zeros((1,))
        while i < 3:
            h = self.step(h)
            i = i + 1
        return h


@program(*POS_NEG)
class ChildWithWhileInTensorFor(HybridBlock):
    def __init__(self):
        super().__init__()
        self.child = _WhileChild()

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x:
            h = self.child(h + r)
        return h


@program(*POS_NEG)
class HybridizedChildInsideNonHybridizedParent(HybridBlock):
    def __init__(self):
        super().__init__()
        self.child = _ClippedStep()
        self.child.hybridize()

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        for _ in range(2):
            h = self.child(h)
        return h


@program(*POS_NEG)
class SequentialOfConvertedBlocks(HybridBlock):
    def __init__(self):
        super().__init__()
        self.seq = gluon.nn.HybridSequential()
        self.seq.add(_ClippedStep(), _WhileChild(), _ClippedStep())

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x:
            h = self.seq(h + r)
        return h


# ------------------------------------------------------------------------- recursion

@program([_rand(4, 3), np.array([1, 2, -1, -1], np.float32), np.array([3.0, -1, -1, -1],
                                                                       np.float32)])
class RecursiveSumOverChain(HybridBlock):
    """A user's recursive walk of a tree stored as index arrays, autograph converting its if."""

    NO_GRAD = (1, 2)

    @autograph
    def hybrid_forward(self, F, x, left, right):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)
            if F.take(left, idx) < 0:
                return here
            return here + node(F.take(left, idx)) * 0.5
        return node(F.zeros((1,)))


@program([_rand(4, 3), np.array([1, 2, 3, -1], np.float32)])
class RecursiveWithLoopInLeaf(HybridBlock):
    NO_GRAD = (1,)

    @autograph(max_iterations=3)
    def hybrid_forward(self, F, x, nxt):
        @gluon_cf.recursive
        def node(idx):
            h = F.take(x, idx)
            if F.take(nxt, idx) < 0:
                i = F.zeros((1,))
                while i < 2:
                    h = h * 0.5
                    i = i + 1
                return h
            return h + node(F.take(nxt, idx))
        return node(F.zeros((1,)))


@program([_rand(4, 3), np.array([1, 2, 3, -1], np.float32)])
class RecursiveExplicitCond(HybridBlock):
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, nxt):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(F.take(nxt, idx) < 0, lambda: F.take(x, idx),
                                 lambda: F.tanh(F.take(x, idx) + node(F.take(nxt, idx))))
        return node(F.zeros((1,)))


@program([_rand(4, 3), np.array([1, 2, 3, -1], np.float32)])
class RecursiveReturnsTuple(HybridBlock):
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, nxt):
        @gluon_cf.recursive
        def node(idx):
            h = F.take(x, idx)
            if F.take(nxt, idx) < 0:
                return h, h * 0 + 1
            s, n = node(F.take(nxt, idx))
            return s + h, n + 1
        s, n = node(F.zeros((1,)))
        return s / n


@program([_rand(4, 3), np.array([1, 2, 3, -1], np.float32)])
class RecursiveDefaultArgument(HybridBlock):
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, nxt):
        @gluon_cf.recursive
        def node(idx, scale=0.5):
            h = F.take(x, idx)
            if F.take(nxt, idx) < 0:
                return h
            return h + node(F.take(nxt, idx)) * scale
        return node(F.zeros((1,)))


# ------------------------------------------------------------------------- Python idioms

@program(*POS_NEG)
class MapOverTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*list(map(lambda r: r * 2, x)))


@program(*POS_NEG)
class ReduceOverSplit(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        parts = F.split(x, num_outputs=3, axis=0)
        return functools.reduce(lambda a, b: a * 0.5 + b, parts)


@program(*POS_NEG)
class NotOfTensorComparison(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        if not F.sum(x) > 0:
            return x * 3
        return x


@program(*POS_NEG)
class IsNoneCheckInTensorLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x, mask=None):
        h = x[0]
        for r in x:
            if mask is not None:
                r = r * mask
            h = h + r
        return h


@program(*POS_NEG)
class IterateDictOfTensorsInTensorLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        gates = {"a": x[0], "b": x[1]}
        h = x[2]
        for r in x:
            for name, g in gates.items():
                h = h + g * r
        return h


@program(*POS_NEG)
class IntegerDivisionCounterCondition(HybridBlock):
    @autograph(max_iterations=5)
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = x[0]
        while i < 4:
            if F.floor(i / 2) * 2 == i:
                h = h + 1
            else:
                h = h * 0.5
            i = i + 1
        return h


@program(*POS_NEG)
class InPlaceMultiplyInTensorLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 1
        for r in x:
            h *= 0.5
            h /= 2
            h -= r
        return h

    def plain_forward(self, F, x):
        """Plain MXNet refuses an in-place update under autograd: the same, out of place."""
        h = x[0] * 1
        for r in x:
            h = (h * 0.5) / 2 - r
        return h


@program(*POS_NEG)
class LoopVariableAfterTensorFor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        r = x[0]
        for r in x:
            pass
        return r


@program(*POS_NEG)
class TensorIfDifferentShapes(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            y = x[0]
        else:
            y = x
        return y * 2


@program(*POS_NEG)
class LoopStateChangesShape(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x:
            h = F.concat(h, r, dim=0)
        return h


@program(*POS_NEG)
class SumBuiltinWithStartInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x:
            h = sum([h, r, r * 2], x[0] * 0)
        return h


@program(*POS_NEG)
class AnyOverTensorRows(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        if any(F.sum(r) > 0 for r in x):
            return x * 2
        return x


@program(*POS_NEG)
class GeneratorHelperInPythonLoop(HybridBlock):
    @staticmethod
    def rows(F, x):
        for k in range(3):
            yield F.take(x, F.ones((1,)) * k)

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0:1] * 0
        for r in self.rows(F, x):
            if F.sum(r) > 0:
                h = h + r
        return h


@program(*POS_NEG)
class WhileElseNoBreak(HybridBlock):
    @autograph(max_iterations=4)
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = x[0]
        while i < 2:
            h = h + 1
            i = i + 1
        else:
            h = h * 2
        return h


@program(*POS_NEG)
class TensorIfInsideListComprehensionOfPythonRange(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        rows = [x[k] if F.sum(x[k]) > 0 else -x[k] for k in range(3)]
        return F.stack(*rows)


@program(*POS_NEG)
class ConditionalExpressionOnTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x:
            h = h + r if F.sum(r) > 0 else h - r
        return h


@program(*POS_NEG)
class LambdaCalledInTensorLoopReadsLoopState(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        bump = lambda: h * 0.5  # noqa: E731
        for r in x:
            h = bump() + r
        return h


@program(*POS_NEG)
class ReturnInsideWithInTensorIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            with contextlib.suppress(KeyError):
                return x * 2
        return x


@program(*POS_NEG)
class MinOfTensorsWithKey(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        rows = [x[0], x[1], x[2]]
        return min(rows, key=lambda r: r.sum())


@program(*POS_NEG)
class TensorIfAssignsPythonAndTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        scale = 1
        if F.sum(x) > 0:
            scale = x[0]
        return x * scale


@program(*POS_NEG)
class NestedWhileInFor(HybridBlock):
    @autograph(max_iterations=4)
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x:
            j = F.zeros((1,))
            while j < 2:
                h = h * 0.5 + r
                j = j + 1
        return h


def _contrib_oracle(net, F, *args, **params):
    """The block's hybrid_forward with gluon_cf.cond/foreach/while_loop replaced by MXNet's
    F.contrib ones (the independent oracle of the blocks calling gluon_cf's ops directly)."""
    saved = gluon_cf.cond, gluon_cf.foreach, gluon_cf.while_loop
    gluon_cf.cond, gluon_cf.foreach, gluon_cf.while_loop = \
        F.contrib.cond, F.contrib.foreach, F.contrib.while_loop
    try:
        forward = type(net).hybrid_forward
        return getattr(forward, "__wrapped__", forward)(net, F, *args, **params)
    finally:
        gluon_cf.cond, gluon_cf.foreach, gluon_cf.while_loop = saved


for _cls in (WhileLoopContribSignature, CondMultipleOutputsContrib, ForeachListDataListStates,
             ContribForeachAroundGluonCFCond, GluonCFWhileAroundAutographHelper,
             CondPredicateFromPythonBool, WhileLoopZeroIterationsOutputs, RecursiveExplicitCond):
    _cls.plain_forward = _contrib_oracle


# ------------------------------------------------------------------------- run-time lengths, history

MASKS = ([_rand(3, 4), np.array([1, 0, 1], np.float32)],
         [_rand(3, 4, seed=1), np.array([0, 0, 0], np.float32)],
         [_rand(3, 4, seed=2), np.array([0, 1, 0], np.float32)])


@program(*MASKS)
class LoopOverMaskedRows(HybridBlock):
    """for r in boolean_mask(x, m): a loop over a run-time number of rows, none when the
    mask keeps nothing (after calls where it kept some)."""

    NO_GRAD = (1,)

    @staticmethod
    def plain_fails(got):
        return True

    @autograph
    def hybrid_forward(self, F, x, m):
        h = F.sum(x, axis=0) * 0.5
        for r in F.contrib.boolean_mask(x, m):
            h = h * 0.5 + r
        return h


@program(*MASKS)
class MaskInForeachBodyHistory(HybridBlock):
    NO_GRAD = (1,)

    @staticmethod
    def plain_fails(got):
        return True

    @autograph
    def hybrid_forward(self, F, x, m):
        total = F.zeros((1,))
        for r in x:
            total = total + F.sum(F.contrib.boolean_mask(x, m) * F.sum(r))
        return total


@program([_rand(2, 4), np.array([3.0], np.float32)], [_rand(2, 4), np.array([0.0], np.float32)],
         [_rand(2, 4), np.array([1.0], np.float32)])
class CollectedInWhileMayBeEmpty(HybridBlock):
    NO_GRAD = (1,)

    @autograph(max_iterations=4)
    def hybrid_forward(self, F, x, n):
        i = F.zeros((1,))
        items = []
        while i < n:
            items.append(x * i)
            i = i + 1
        return F.stack(*items).sum(axis=0) if len(items) else x * 0


@program([_rand(2, 4), np.array([3.0], np.float32)], [_rand(2, 4), np.array([0.0], np.float32)])
class StackOfCollectedZeroSteps(HybridBlock):
    NO_GRAD = (1,)

    @autograph(max_iterations=4)
    def hybrid_forward(self, F, x, n):
        i = F.zeros((1,))
        items = []
        while i < n:
            items.append(x * (i + 1))
            i = i + 1
        return F.add_n(*items)


@program([_rand(2, 4)], [_rand(5, 4, seed=1)], [_rand(3, 4, seed=2) * 3])
class GreedyBreakVariableLength(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((4,))
        for r in x:
            h = F.tanh(h + r)
            if F.max(h) > 0.9:
                break
        return h


@program(*POS_NEG)
class SameChildOnTwoShapes(HybridBlock):
    def __init__(self):
        super().__init__()
        self.child = _WhileChild()

    @autograph
    def hybrid_forward(self, F, x):
        a = self.child(x)
        b = self.child(x[0])
        if F.sum(b) > 0:
            a = a * 2
        return a + b


@program(*POS_NEG)
class NestedForeachInnerBreak(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        total = F.zeros((1,))
        for r in x:
            for v in r:
                if v > 0.5:
                    break
                total = total + v
        return total


@program([_rand(2, 4), np.array([2.0], np.float32)], [_rand(2, 4), np.array([0.0], np.float32)])
class CollectedStackZeroSteps(HybridBlock):
    NO_GRAD = (1,)

    @autograph(max_iterations=4)
    def hybrid_forward(self, F, x, n):
        i = F.zeros((1,))
        items = []
        while i < n:
            items.append(x * (i + 1))
            i = i + 1
        return F.stack(*items, axis=1)


@program([_rand(3, 4), np.array([2.0], np.float32)], [_rand(3, 4), np.array([0.0], np.float32)],
         [_rand(3, 4, seed=3), np.array([1.0], np.float32)])
class CollectedStackInForBody(HybridBlock):
    NO_GRAD = (1,)

    @autograph(max_iterations=3)
    def hybrid_forward(self, F, x, n):
        h = x[0] * 0
        for r in x:
            i = F.zeros((1,))
            items = []
            while i < n:
                items.append(r * (i + 1))
                i = i + 1
            h = h + F.stack(*items).sum(axis=0)
        return h


@program([_rand(3, 4), np.array([2.0], np.float32)], [_rand(3, 4, seed=3), np.array([1.0],
                                                                                  np.float32)])
class CollectedStackInForBodySteps(CollectedStackInForBody):
    """The same with steps on every call (exported: the checked unpack inside a Scan body)."""
