"""Round 28a: a hostile round on autograph, written as users port MXNet/TensorFlow/PyTorch code
into hybridized blocks: value patterns written as dotted names matching objects that hold
collected lists, collected lists given to ``collections.deque``, ``set``,
``functools.partial`` and ``ChainMap``, greedy/beam decoders and attention loops, helpers,
methods, closures and default arguments, ``*args``/``**kwargs``, generators, comprehensions
over collected lists, dict/list/dataclass state, ``try``/``except``, ``enumerate``/``zip``/
``reversed``, early returns in loops, nested loops, augmented assignment of items and
attributes, global state. ``PROGRAMS`` maps each block class to its input lists; the oracle is
the plain Python function on NDArrays (``hybrid_forward.__wrapped__``)."""
import collections
import dataclasses
import functools
import heapq
import itertools

import mxnet as mx
import numpy as np
from mxnet.gluon import HybridBlock, nn

from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

ROWS = ([rand(4, 3, seed=2801)], [rand(1, 3, seed=2802) + 1], [rand(3, 3, seed=2803) - 0.5])
THREE = ([rand(3, 2, seed=2804)], [rand(3, 2, seed=2805) * 2])
STATES = ([floats(1.0, 2.0)], [floats(5.0, 1.0)], [floats(-3.0, -2.0)], [floats(0.25, 0.1)])
PAIR = ([rand(4, 3, seed=2806), rand(3, seed=2807)], [rand(2, 3, seed=2808), rand(3, seed=2809)])

SCALE = 0.5
CALLS = [0]


class Plain:
    """A user's object (no ``__eq__``: equal only to itself)."""

    def __init__(self, items, h):
        self.items, self.h = items, h


@dataclasses.dataclass
class Held:
    items: object
    h: object


class Reg:
    """Module state a port keeps as class attributes (``Reg.cur``)."""
    cur = None
    other = None
    outs = None


def doubled(x):
    outs = []
    for row in x:
        outs.append(row * 2)
    return outs


# ---------------------------------------------------------------- match: dotted value patterns


@program(*ROWS)
class MatchDottedValueIsSubjectHoldingCollected(HybridBlock):
    """``Reg.cur = Plain(outs, h); match Reg.cur: case Reg.cur:``: hybridized the subject was a
    copy, compared with the object itself: not equal, silently the other case."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = x[0]
        for row in x:
            outs.append(row * 2)
        Reg.cur = Plain(outs, h)
        match Reg.cur:
            case Reg.cur:
                return F.stack(*outs).sum(axis=0) * 3
            case _:
                return h * 5


@program(*ROWS)
class MatchDottedValueInTupleHoldingCollected(HybridBlock):
    """``match (Reg.cur, 1): case (Reg.cur, 1):`` (the object inside a tuple subject)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(F.tanh(row))
        Reg.cur = Plain(outs, 2.0)
        match (Reg.cur, 1):
            case (Reg.cur, 2):
                return x[0]
            case (Reg.cur, 1):
                return F.stack(*outs).sum(axis=0)
        return x[0] * 0


@program(*ROWS)
class MatchDottedValueEqualDataclass(HybridBlock):
    """A dataclass's ``__eq__`` comparing the fields of two objects holding the same list."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        Reg.cur, Reg.other = Held(outs, 1.0), Held(outs, 1.0)
        match Reg.cur:
            case Reg.other:
                return F.stack(*outs).max(axis=0)
            case _:
                return x[0]


@program(*ROWS)
class MatchDottedValueOtherObjectNotEqual(HybridBlock):
    """``case Reg.other:`` of another ``Plain`` holding the same list: not equal (Python's)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        Reg.cur, Reg.other = Plain(outs, 1.0), Plain(outs, 1.0)
        match Reg.cur:
            case Reg.other:
                return x[0]
            case Plain(items=[first, *_]):
                return first * 4
        return x[0] * 0


@program(*ROWS)
class MatchDottedValueIsCollectedList(HybridBlock):
    """``Reg.outs = outs; match outs: case Reg.outs:``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        Reg.outs = outs
        match outs:
            case Reg.outs:
                return outs[-1] * 2
        return x[0]


@program(*ROWS)
class MatchDottedOrPatternHoldingCollected(HybridBlock):
    """``case Reg.other | Reg.cur:`` (an or-pattern of dotted values)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        Reg.cur, Reg.other = Plain(outs, 0), Plain([], 0)
        match Reg.cur:
            case Reg.other | Reg.cur:
                return F.add_n(*outs)
        return x[0]


@program(*ROWS)
class MatchDottedValueInTensorForOnPythonMode(HybridBlock):
    """``case self.modes.SUM:`` reading Python strings in each step of a tensor for."""

    class Modes:
        SUM, GATE = "sum", "gate"

    def __init__(self):
        super().__init__()
        self.mode = "gate"

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            match self.mode:
                case self.Modes.SUM:
                    h = h + row
                case self.Modes.GATE:
                    h = F.sigmoid(row) * h + row
        return h


@program(*ROWS)
class MatchDottedValueTensorAttribute(HybridBlock):
    """``case Reg.cur:`` where ``Reg.cur`` is a tensor: Python takes ``1 == x[0]``'s truth
    (one element eagerly fails); refused hybridized at the line."""

    @autograph
    def hybrid_forward(self, F, x):
        Reg.cur = F.sum(x)
        match 1:
            case Reg.cur:
                return x[0]
        return x[0] * 2


# ---------------------------------------------------------------- deque, set, partial


@program(*ROWS)
class DequeOfCollectedAppendLeft(HybridBlock):
    """``collections.deque(outs)``, ``appendleft``, ``F.stack(*d)`` and ``d[-1]``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        d = collections.deque(outs)
        d.appendleft(x[0])
        return F.stack(*d).sum(axis=0) + d[-1]


@program(*ROWS)
class DequeMaxlenOfCollected(HybridBlock):
    """``deque(outs, maxlen=2)``: the last two items."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        d = collections.deque(outs, maxlen=2)
        return d[0] * 3 + d[-1]


@program(*ROWS)
class DequeExtendRotate(HybridBlock):
    """``d.extend(outs); d.rotate(1)``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        d = collections.deque()
        d.extend(outs)
        d.rotate(1)
        return d[0] * 10 + d[-1]


@program(*ROWS)
class DequeHoldingCollectedList(HybridBlock):
    """``deque([outs])[0]`` unpacked into ``F.stack``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        d = collections.deque([outs])
        return F.stack(*d[0]).sum(axis=0) + len(d[0])


@program(*ROWS)
class SetOfCollected(HybridBlock):
    """``set(outs)``: NDArrays hash by identity; a Symbol has no hash (TypeError naming no
    line): refused at the line."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        s = set(outs)
        return F.add_n(*s) * 0 + x[0] * len(s)


@program(*ROWS)
class FrozensetOfCollected(HybridBlock):
    """``frozenset(outs)``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        return x[0] * len(frozenset(outs))


@program(*ROWS)
class SetDisplayOfCollected(HybridBlock):
    """``{*outs}``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        return x[0] * len({*outs})


@program(*ROWS)
class DictFromkeysOfCollected(HybridBlock):
    """``dict.fromkeys(outs, 1)``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        return x[0] * len(dict.fromkeys(outs, 1))


@program(*ROWS)
class CounterOfCollected(HybridBlock):
    """``collections.Counter(outs)``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        return x[0] * sum(collections.Counter(outs).values())


@program(*ROWS)
class SetOfIdsOfCollected(HybridBlock):
    """``{id(o) for o in outs}``: Python ints."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        return x[0] * len({id(o) for o in outs})


def stacked(F, *items):
    return F.stack(*items)


@program(*ROWS)
class PartialStarOfCollected(HybridBlock):
    """``functools.partial(stacked, F, *outs)()``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        f = functools.partial(stacked, F, *outs)
        return f().sum(axis=0)


@program(*ROWS)
class PartialKeywordCollected(HybridBlock):
    """``functools.partial(g, items=outs)``, ``f.keywords['items']``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        f = functools.partial(lambda items, F: F.stack(*items), items=outs)
        return f(F=F).sum(axis=0) + len(f.keywords["items"])


@program(*ROWS)
class PartialAppliedInTensorLoop(HybridBlock):
    """``step = functools.partial(F.broadcast_mul, x[0])`` called in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        step = functools.partial(F.broadcast_mul, x[0])
        h = F.zeros((3,))
        for row in x:
            h = F.tanh(step(h) + row)
        return h


@program(*ROWS)
class PartialOfCollectedAppendLater(HybridBlock):
    """A partial holding ``outs``; an append after it is seen through it."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        f = functools.partial(lambda items: F.stack(*items).sum(axis=0), outs)
        outs.append(x[0] * 100)
        return f()


@program(*ROWS)
class ChainMapHoldingCollected(HybridBlock):
    """``collections.ChainMap({'o': outs}, {'p': 1})['o']``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        m = collections.ChainMap({"o": outs}, {"p": 1})
        return F.stack(*m["o"]).sum(axis=0) * m["p"]


@program(*ROWS)
class DefaultdictOfListsAppendedInLoop(HybridBlock):
    """``buf = defaultdict(list); buf['a'].append(row)`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        buf = collections.defaultdict(list)
        for row in x:
            buf["a"].append(row * 2)
        return F.stack(*buf["a"]).sum(axis=0)


@program(*ROWS)
class DictOfListsAppendedInLoop(HybridBlock):
    """``buf = {'a': [], 'b': []}``, both appended in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        buf = {"a": [], "b": []}
        for row in x:
            buf["a"].append(row)
            buf["b"].append(row * row)
        return F.stack(*buf["a"]).sum(axis=0) + F.stack(*buf["b"]).sum(axis=0)


@program(*ROWS)
class HeapOfPythonScoresBesideTensors(HybridBlock):
    """``heapq`` of (score, index) Python pairs choosing collected items."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        heap = [(-(k % 3), k) for k in range(len(outs))]
        heapq.heapify(heap)
        _, best = heapq.heappop(heap)
        return outs[best] + 1


# ---------------------------------------------------------------- decoders, attention, search


@program(*ROWS)
class GreedyDecoderRangeBreakOnArgmax(HybridBlock):
    """A greedy decoder: ``for t in range(5)`` feeding back its output, a tensor ``break``
    when the argmax is the end token."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        outs = []
        for t in range(5):
            h = F.tanh(h * 1.5 + 0.1 * t)
            outs.append(h)
            if F.argmax(h, axis=0) == 0:
                break
        return F.stack(*outs).sum(axis=0)


@program(*ROWS)
class AttentionOverRowsSoftmaxOfScores(HybridBlock):
    """Scores appended per encoder row, softmaxed, the context a weighted sum."""

    @autograph
    def hybrid_forward(self, F, x):
        q = x[0] * 0.5
        scores = []
        for enc in x:
            scores.append(F.sum(enc * q, keepdims=True))
        w = F.softmax(F.concat(*scores, dim=0))
        return F.sum(F.broadcast_mul(x, w.reshape((-1, 1))), axis=0)


@program(*ROWS)
class BahdanauAttentionWithDenseInLoop(HybridBlock):
    """A Dense child scoring each row in a tensor for (additive attention)."""

    def __init__(self):
        super().__init__()
        self.score = nn.Dense(1, in_units=3)

    @autograph
    def hybrid_forward(self, F, x):
        energies = []
        for enc in x:
            energies.append(self.score(F.tanh(enc).reshape((1, 3))).reshape((1,)))
        w = F.softmax(F.concat(*energies, dim=0))
        return F.dot(w, x)


@program(*ROWS)
class BeamTopkInPythonRange(HybridBlock):
    """Beam search: ``F.topk`` of running scores in a Python range, beams in a list."""

    @autograph
    def hybrid_forward(self, F, x):
        beams = [x[0]]
        for t in range(2):
            new = []
            for b in beams:
                new.append(b + F.topk(b, k=1, ret_typ="value") * 0.1)
                new.append(b - 0.2)
            beams = new[:2]
        return F.stack(*beams).sum(axis=0)


@program(*ROWS)
class LSTMStateTupleUnpackedInLoop(HybridBlock):
    """``h, c = state`` each step; ``state = (h, c)``."""

    @autograph
    def hybrid_forward(self, F, x):
        state = (F.zeros((3,)), F.zeros((3,)))
        for row in x:
            h, c = state
            c = F.sigmoid(row) * c + F.tanh(row + h)
            h = F.tanh(c) * 0.9
            state = (h, c)
        return state[0] + state[1]


@program(*ROWS)
class GRUCellChildCollectingStates(HybridBlock):
    """An ``nn.GRUCell`` child stepped over the rows, its states collected."""

    def __init__(self):
        super().__init__()
        self.cell = mx.gluon.rnn.GRUCell(4, input_size=3)

    @autograph
    def hybrid_forward(self, F, x):
        states = [F.zeros((1, 4))]
        hs = []
        for row in x:
            out, states = self.cell(row.reshape((1, 3)), states)
            hs.append(out)
        return F.concat(*hs, dim=0).sum(axis=0)


@program(*ROWS)
class BidirectionalZipOfCollectedAndReversed(HybridBlock):
    """Forward and backward passes collected, joined by ``zip(fw, reversed(bw))``."""

    @autograph
    def hybrid_forward(self, F, x):
        fw, bw = [], []
        h = F.zeros((3,))
        for row in x:
            h = F.tanh(h + row)
            fw.append(h)
        g = F.zeros((3,))
        for row in reversed(x):
            g = F.tanh(g * 0.5 + row)
            bw.append(g)
        return F.stack(*[a * 2 + b for a, b in zip(fw, reversed(bw))]).sum(axis=0)


@program(*ROWS)
class EnumerateWeightsOverCollected(HybridBlock):
    """``sum(o * (k + 1) for k, o in enumerate(outs))``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        return sum(o * (k + 1) for k, o in enumerate(outs))


@program(*ROWS)
class EarlyReturnInTensorFor(HybridBlock):
    """``return row * 2`` from inside a tensor for when a row's sum passes 0.5."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            if F.sum(row) > 0.5:
                return row * 2 + h
            h = h + row
        return h


@program(*ROWS)
class EarlyReturnInNestedLoops(HybridBlock):
    """A return from a tensor for nested in a Python range."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for k in range(2):
            for row in x:
                h = h + row * (k + 1)
                if F.sum(h) > 2:
                    return h * 10
        return h


@program(*ROWS)
class NestedTensorLoops(HybridBlock):
    """A tensor for inside a tensor for over the same rows."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for a in x:
            for b in x:
                h = F.tanh(h + a * b)
        return h


@program(*STATES)
class WhileBreakInNestedIf(HybridBlock):
    """A tensor while with a break inside a nested tensor if."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        i = F.zeros((1,))
        while F.sum(i) < 6:
            if F.sum(h) > 0:
                if F.max(h) > 4:
                    break
                h = h * 1.5
            else:
                h = h + 1
            i = i + 1
        return h + i


@program(*STATES)
class WhileContinueOnPythonParity(HybridBlock):
    """``continue`` in a tensor while on a counter's parity (a tensor)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        i = F.zeros((1,))
        while F.sum(i) < 5:
            i = i + 1
            if F.sum(F.round(i / 2) * 2 - i) == 0:
                continue
            h = h * 0.5 + 1
        return h


# ---------------------------------------------------------------- helpers, closures, defaults


@program(*ROWS)
class NestedHelperReadingWeightBeforeLoop(HybridBlock):
    """``def step(h, row): return F.tanh(h + row * w)`` with ``w`` set before the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        w = x[0] * 0.5

        def step(h, row):
            return F.tanh(h + row * w)
        h = F.zeros((3,))
        for row in x:
            h = step(h, row)
        return h


@program(*ROWS)
class LambdaDefinedInLoopBodyReadingRow(HybridBlock):
    """``f = lambda v: v + row`` made in each step, called there."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            f = lambda v: v * 0.5 + row    # noqa: E731
            h = f(h)
        return h


@program(*ROWS)
class DefaultArgumentCapturedAtDefinition(HybridBlock):
    """``def f(v, base=h)``: the default is ``h`` when defined, not after the loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]

        def f(v, base=h):
            return v + base
        for row in x:
            h = h + row
        return f(h)


@program(*ROWS)
class DefaultScaleFromModuleConstant(HybridBlock):
    """``def step(h, row, scale=SCALE)`` called in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        def step(h, row, scale=SCALE):
            return h * scale + row
        h = F.zeros((3,))
        for row in x:
            h = step(h, row)
        return h


def mix(F, *hs):
    return F.add_n(*hs) / len(hs)


@program(*ROWS)
class StarArgsHelperInLoop(HybridBlock):
    """``mix(F, h, row, h)`` with ``*hs``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        for row in x:
            h = mix(F, h, row, h * 0.5)
        return h


def cell(h, **kw):
    return h * kw["a"] + kw["b"]


@program(*ROWS)
class KwargsHelperInLoop(HybridBlock):
    """``cell(h, a=0.5, b=row)`` with ``**kw``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = cell(h, a=0.5, b=row)
        return h


@program(*ROWS)
class KwargsDictSplatInLoop(HybridBlock):
    """``cell(h, **opts)`` with ``opts`` a dict holding the row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            opts = {"a": 0.25, "b": row}
            h = cell(h, **opts)
        return h


@program(*ROWS)
class MethodHelperWithSelfInLoop(HybridBlock):
    """``self._step(h, row)`` reading ``self.alpha``."""

    def __init__(self):
        super().__init__()
        self.alpha = 0.75

    def _step(self, F, h, row):
        if F.sum(row) > 0:
            return h * self.alpha + row
        return h - row

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = self._step(F, h, row)
        return h


@program(*ROWS)
class StaticAndClassMethodHelpers(HybridBlock):
    """A staticmethod and a classmethod called in a tensor for."""
    K = 0.5

    @staticmethod
    def _scale(h):
        return h * 2

    @classmethod
    def _shift(cls, h):
        return h - cls.K

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = self._shift(self._scale(F.tanh(h + row)))
        return h


@program(*ROWS)
class KeywordOnlyHelper(HybridBlock):
    """``def step(h, *, row, gate=True)``."""

    @autograph
    def hybrid_forward(self, F, x):
        def step(h, *, row, gate=True):
            return F.sigmoid(row) * h + row if gate else h + row
        h = F.zeros((3,))
        for row in x:
            h = step(h, row=row)
        h = step(h, row=x[0], gate=False)
        return h


@program(*ROWS)
class RecursiveHelperOnPythonDepth(HybridBlock):
    """A helper recursing on a Python depth, a tensor if at each level."""

    @autograph
    def hybrid_forward(self, F, x):
        def deep(h, n):
            if n == 0:
                return h
            if F.sum(h) > 0:
                return deep(h * 0.5, n - 1)
            return deep(h + 1, n - 1)
        return deep(x.sum(axis=0), 3)


@program(*ROWS)
class HelperWithOwnTensorLoopCalledTwice(HybridBlock):
    """A helper holding its own tensor for, called twice."""

    @autograph
    def hybrid_forward(self, F, x):
        def run(h, rows):
            for row in rows:
                h = F.tanh(h + row)
            return h
        return run(run(F.zeros((3,)), x), x * 0.5)


@program(*ROWS)
class ConditionalExpressionInLoop(HybridBlock):
    """``h = h * 2 if F.sum(row) > 0 else h - row``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        for row in x:
            h = h * 0.5 + row if F.sum(row) > 0 else h - row
        return h


@program(*ROWS)
class LambdaWithPythonModeTernary(HybridBlock):
    """``act = lambda v: F.relu(v) if self.relu else F.tanh(v)`` in a tensor for."""

    def __init__(self):
        super().__init__()
        self.relu = False

    @autograph
    def hybrid_forward(self, F, x):
        act = lambda v: F.relu(v) if self.relu else F.tanh(v)    # noqa: E731
        h = F.zeros((3,))
        for row in x:
            h = act(h + row)
        return h


# ---------------------------------------------------------------- generators, comprehensions


def index_gen(n):
    for i in range(n):
        yield i


@program(*ROWS)
class GeneratorOfPythonIndicesReadingRows(HybridBlock):
    """``for i in index_gen(2): h = h + x[i]`` (a user generator of ints)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for i in index_gen(1):
            h = h + x[i]
        return h


def pairs(items):
    for a, b in zip(items, items[1:]):
        yield a - b


@program(*ROWS)
class GeneratorOverCollectedPairs(HybridBlock):
    """A user generator over a collected list's neighbours."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        return sum(pairs(outs), x[0] * 0)


@program(*ROWS)
class ListComprehensionOverCollected(HybridBlock):
    """``F.stack(*[o * 2 for o in outs])``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        return F.stack(*[o * k for k, o in enumerate(outs)]).sum(axis=0)


@program(*ROWS)
class DictComprehensionOverEnumerate(HybridBlock):
    """``{k: o for k, o in enumerate(outs)}`` read back by key."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        d = {k: o for k, o in enumerate(outs)}
        return d[0] + d[len(d) - 1]


@program(*ROWS)
class DictComprehensionKeyedByTensor(HybridBlock):
    """``{o: k for k, o in enumerate(outs)}``: NDArrays are keys by identity."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        d = {o: k for k, o in enumerate(outs)}
        return x[0] * len(d)


@program(*ROWS)
class NestedComprehensionOverCollected(HybridBlock):
    """``[[o * k for k in range(2)] for o in outs]`` flattened."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        grid = [[o * (k + 1) for k in range(2)] for o in outs]
        return F.add_n(*[g for row in grid for g in row])


@program(*ROWS)
class GeneratorExpressionIntoAddN(HybridBlock):
    """``F.add_n(*(o * 0.5 for o in outs))``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        return F.add_n(*(o * 0.5 for o in outs))


@program(*ROWS)
class IterAndNextOverCollected(HybridBlock):
    """``it = iter(outs); a = next(it); b = next(it, a)``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        it = iter(outs)
        a = next(it)
        b = next(it, a * 10)
        return a + b


@program(*ROWS)
class TryStopIterationOverCollected(HybridBlock):
    """``try: next(it) except StopIteration:`` after reading every item."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        it = iter(outs)
        total = x[0] * 0
        while True:
            try:
                total = total + next(it)
            except StopIteration:
                break
        return total


@program(*ROWS)
class ItertoolsAccumulateOverCollected(HybridBlock):
    """``list(itertools.accumulate(outs))[-1]``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        return list(itertools.accumulate(outs))[-1]


@program(*ROWS)
class ReduceOverCollected(HybridBlock):
    """``functools.reduce(lambda a, b: a * 0.5 + b, outs)``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        return functools.reduce(lambda a, b: a * 0.5 + b, outs)


# ---------------------------------------------------------------- state: dicts, lists, objects


@dataclasses.dataclass
class Acc:
    h: object
    n: float = 0.0
    items: list = dataclasses.field(default_factory=list)


@program(*ROWS)
class DictStateItemUpdatedInLoop(HybridBlock):
    """``state['h'] = state['h'] + row`` on a dict made before a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": F.zeros((3,)), "scale": 0.5}
        for row in x:
            state["h"] = state["h"] * state["scale"] + row
        return state["h"]


@program(*ROWS)
class ListStateItemAugmentedInLoop(HybridBlock):
    """``hs[0] += row`` on a list of two states in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        hs = [F.zeros((3,)), F.ones((3,))]
        for row in x:
            hs[0] += row
            hs[1] = hs[1] * 0.5 + hs[0]
        return hs[0] + hs[1]


@program(*ROWS)
class DataclassStateRebuiltInLoop(HybridBlock):
    """``st = Acc(st.h + row, st.n)`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        st = Acc(F.zeros((3,)), 1.0)
        for row in x:
            st = Acc(F.tanh(st.h + row), st.n)
        return st.h * st.n


@program(*ROWS)
class DataclassAttributeAugmentedInLoop(HybridBlock):
    """``st.h += row`` on a dataclass made in the function."""

    @autograph
    def hybrid_forward(self, F, x):
        st = Acc(F.zeros((3,)))
        for row in x:
            st.h += row * 2
        return st.h


@program(*ROWS)
class DataclassFieldListAppendedInLoop(HybridBlock):
    """``st.items.append(row)`` (a ``default_factory`` list) in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        st = Acc(F.zeros((3,)))
        for row in x:
            st.items.append(row)
        return F.stack(*st.items).sum(axis=0)


@program(*ROWS)
class SelfAttributeAugmentedInLoop(HybridBlock):
    """``self.acc += row`` in a tensor for: Python state changed per step."""

    @autograph
    def hybrid_forward(self, F, x):
        self.acc = F.zeros((3,))
        for row in x:
            self.acc += row
        return self.acc


@program(*ROWS)
class GlobalCounterInTensorLoop(HybridBlock):
    """``CALLS[0] += 1`` in a tensor for (module state changed per step)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        CALLS[0] = 0
        for row in x:
            CALLS[0] += 1
            h = h + row
        return h * CALLS[0]


@program(*ROWS)
class GlobalScaleReadInLoop(HybridBlock):
    """``global SCALE`` read in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        global SCALE
        h = F.zeros((3,))
        for row in x:
            h = h * SCALE + row
        return h


@program(*ROWS)
class NamedtupleReplaceInLoop(HybridBlock):
    """``st = st._replace(h=...)`` of a namedtuple in a tensor for."""
    State = collections.namedtuple("State", "h c")

    @autograph
    def hybrid_forward(self, F, x):
        st = self.State(F.zeros((3,)), F.ones((3,)))
        for row in x:
            st = st._replace(h=st.h * 0.5 + row * st.c)
        return st.h + st.c


@program(*ROWS)
class InPlaceSliceAssignmentOnCollectedCopy(HybridBlock):
    """``outs[0] = outs[0] * 0`` after the loop (a list item rebound)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        outs[0] = outs[0] * 0 + 1
        return F.stack(*outs).sum(axis=0)


@program(*ROWS)
class DelFirstOfCollected(HybridBlock):
    """``del outs[0]`` then ``F.stack(*outs)`` (ROWS[1] has one row: an empty stack)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        outs.insert(0, x[0])
        del outs[0]
        return F.stack(*outs).sum(axis=0)


@program(*ROWS)
class CollectedPlusListAndRepeat(HybridBlock):
    """``outs + [x[0]]`` and ``outs * 2``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        more = outs + [x[0]]
        twice = outs * 2
        return F.stack(*more).sum(axis=0) + F.add_n(*twice)


@program(*ROWS)
class StarUnpackFirstRestOfCollected(HybridBlock):
    """``first, *rest = outs``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        first, *rest = outs
        return first * 3 + sum(rest, x[0] * 0)


@program(*ROWS)
class PopLastAndSlicesOfCollected(HybridBlock):
    """``outs.pop()``, ``outs[::-1]``, ``outs[1:]``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        outs.append(x[0])
        last = outs.pop()
        back = outs[::-1]
        return last + back[0] + F.add_n(*outs[1:], x[0])


@program(*ROWS)
class ExtendCollectedByOtherCollected(HybridBlock):
    """``a.extend(b)`` of two collected lists."""

    @autograph
    def hybrid_forward(self, F, x):
        a = doubled(x)
        b = []
        for row in x:
            b.append(row - 1)
        a.extend(b)
        return F.stack(*a).sum(axis=0) + len(a)


# ---------------------------------------------------------------- try/except, assert, misc


@program(*ROWS)
class TryExceptAroundTensorOpInLoop(HybridBlock):
    """``try: h = h + row except ValueError: h = h * 0`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            try:
                h = F.tanh(h + row)
            except ValueError:
                h = h * 0
        return h


@program(*ROWS)
class TryFinallyCountingPythonSteps(HybridBlock):
    """``try: ... finally: n += 1`` in a tensor for (a Python counter changed per step)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        n = 0
        for row in x:
            try:
                h = h + row
            finally:
                n += 1
        return h * n


@program(*ROWS)
class TryExceptKeyErrorOnPythonDict(HybridBlock):
    """A ``KeyError`` caught around a Python dict lookup before a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        opts = {"a": 1.0}
        try:
            scale = opts["b"]
        except KeyError:
            scale = 0.25
        h = F.zeros((3,))
        for row in x:
            h = h * scale + row
        return h


@program(*ROWS)
class AssertOnPythonValueInLoop(HybridBlock):
    """``assert self.depth > 0`` inside a tensor for."""
    depth = 2

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            assert self.depth > 0
            h = h + row * self.depth
        return h


@program(*PAIR)
class ZipOverTwoTensorsInFor(HybridBlock):
    """``for a, b in zip(x, F.stack(y, y * 2, y * 3, y * 4)[:len(x)])``."""

    @autograph
    def hybrid_forward(self, F, x, y):
        h = F.zeros((3,))
        ys = F.stack(y, y * 2, y * 3, y * 4).slice_axis(axis=0, begin=0, end=len(x))
        for a, b in zip(x, ys):
            h = F.tanh(h + a * b)
        return h


@program(*ROWS)
class EnumerateOverTensorRowsContinue(HybridBlock):
    """``for k, row in enumerate(x): if k == 1: continue``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for k, row in enumerate(x):
            if k == 1:
                continue
            h = h + row * (k + 1)
        return h


@program(*ROWS)
class ReversedRangeIndexingRows(HybridBlock):
    """``for i in reversed(range(len(x))): h = h * 0.5 + x[i]``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for i in reversed(range(len(x))):
            h = h * 0.5 + x[i]
        return h


@program(*ROWS)
class ChildBlocksInSequentialWithTensorIf(HybridBlock):
    """A Python for over a Sequential's children, a tensor if in each."""

    def __init__(self):
        super().__init__()
        self.layers = nn.HybridSequential()
        self.layers.add(nn.Dense(3, in_units=3), nn.Dense(3, in_units=3))

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        for layer in self.layers:
            out = layer(h)
            if F.sum(out) > 0:
                h = F.relu(out)
            else:
                h = out * 0.5
        return h


@program(*ROWS)
class MaskedAttentionWithWhereInLoop(HybridBlock):
    """``F.where(mask, s, -1e9 * ones)`` per step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            s = row + h
            mask = s > 0
            s = F.where(mask, s, F.ones_like(s) * -1e9)
            h = F.sum(F.broadcast_mul(F.softmax(s).reshape((1, 3)), x), axis=0)
        return h


@program(*STATES)
class WalrusInTensorWhileCondition(HybridBlock):
    """``while F.sum(h := h * 0.5) > 0.3:`` (the walrus rebinding the carried state)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        n = F.zeros((1,))
        while F.sum(F.abs(h := h * 0.5)) > 0.3:
            n = n + 1
        return h + n


@program(*ROWS)
class MatchInHelperCalledFromLoop(HybridBlock):
    """A helper with ``match kind:`` on a Python str, called in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        def act(v, kind):
            match kind:
                case "tanh":
                    return F.tanh(v)
                case "relu" | "gelu":
                    return F.relu(v)
            return v
        h = F.zeros((3,))
        for row in x:
            h = act(h + row, "tanh") + act(row, "relu")
        return h


@program(*ROWS)
class MatchTupleOfPythonIndexAndRow(HybridBlock):
    """``match (k, row): case (0, r):`` inside ``for k, row in enumerate(x)``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for k, row in enumerate(x):
            match (k, row):
                case (0, r):
                    h = h + r * 10
                case (_, r):
                    h = h + r
        return h


@program(*ROWS)
class MatchMappingWithDottedKeyHoldingCollected(HybridBlock):
    """``case {Reg.key: [a, *_]}`` on a dict holding a collected list."""

    @autograph
    def hybrid_forward(self, F, x):
        Reg.key = "o"
        outs = doubled(x)
        match {"o": outs, "n": 1}:
            case {Reg.key: [a, *_]}:
                return a * 2
        return x[0]


@program(*ROWS)
class MatchValuePatternAfterAppendInTensorFor(HybridBlock):
    """``Reg.cur = Plain(outs, h)`` matched by ``case Reg.cur`` inside a tensor for's body
    (the subject copied each step)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        Reg.cur = Plain([x[0]], 1.0)
        for row in x:
            match Reg.cur:
                case Reg.cur:
                    h = h + row
                case _:
                    h = h - row
        return h


@program(*ROWS)
class MatchDottedValueMangledPrivateAttribute(HybridBlock):
    """``case self.__mode:`` (a private name, mangled) in a tensor for."""

    def __init__(self):
        super().__init__()
        self.__mode = "fast"
        self.kind = "fast"

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            match self.kind:
                case self.__mode:
                    h = h * 0.5 + row
                case _:
                    h = h - row
        return h


@program(*ROWS)
class MatchDottedValueOfLocalObjectInLoop(HybridBlock):
    """``case cfg.kind:`` of a local object made before a tensor for, read in each step."""

    @autograph
    def hybrid_forward(self, F, x):
        cfg = Plain([], 2.0)
        cfg.kind = "b"
        h = F.zeros((3,))
        for row in x:
            match "b":
                case cfg.kind if cfg.h > 1:
                    h = h + row * cfg.h
                case _:
                    h = h - row
        return h


@program(*ROWS)
class MatchDottedValueGuardRunsNestedMatch(HybridBlock):
    """A guard calling a helper that runs its own ``match`` on another collected list,
    then a later case's dotted value compared with the outer subject."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        other = doubled(x * 3)

        def first_of(items):
            match items:
                case [a, *_]:
                    return a
            return None
        Reg.cur = Plain(outs, 1.0)
        match Reg.cur:
            case Plain(h=2.0) if first_of(other) is not None:
                return x[0]
            case Reg.cur:
                return F.stack(*outs).sum(axis=0) + first_of(other)
        return x[0] * 0


@program(*ROWS)
class DequeSlidingWindowAppendedInTensorLoop(HybridBlock):
    """``window = deque(maxlen=2); window.append(row)`` per step of a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        window = collections.deque(maxlen=2)
        h = F.zeros((3,))
        for row in x:
            window.append(row)
            h = h + row
        return h + window[-1]


@program(*ROWS)
class PartialHoldingListAppendedByLaterLoop(HybridBlock):
    """``f = partial(summed, outs)`` made before the tensor loop that appends to ``outs``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [x[0]]
        f = functools.partial(lambda items: F.add_n(*items), outs)
        for row in x:
            outs.append(row * 2)
        return f()


@program(*ROWS)
class DequeOfCollectedReadInTensorLoop(HybridBlock):
    """``d = deque(outs)`` read by index inside a later tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        d = collections.deque(outs)
        h = F.zeros((3,))
        for row in x:
            h = h * 0.5 + row * d[0]
        return h


@program(*ROWS)
class SetOfPythonKeysBesideCollected(HybridBlock):
    """``seen = {"a"}`` of strings beside a collected list (no tensor hashed)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        seen = {"a", "b"}
        keys = {k for k in ("a", "c") if k in seen}
        return F.stack(*outs).sum(axis=0) * len(keys)


@program(*ROWS)
class DictComprehensionOfRowInTensorLoop(HybridBlock):
    """``parts = {k: row * (k + 1) for k in range(2)}`` made and read in each step."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            parts = {k: row * (k + 1) for k in range(2)}
            names = {"a", "b"}
            h = F.tanh(h + parts[1] - parts[0] * len(names))
        return h


@program(*ROWS)
class SetComprehensionWithWalrusOfPythonValues(HybridBlock):
    """``{(m := k * 2) for k in range(3)}``, then ``m`` (bound in the function)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        kinds = {(m := k * 2) for k in range(3)}
        return F.stack(*outs).sum(axis=0) * (len(kinds) + m)


# ---------------------------------------------------------------- more reads of collected lists


@program(*THREE, [rand(3, 1, seed=2810)])
class ContainsOfCollected(HybridBlock):
    """``outs[-1] in outs``: Python compares the items before it (==, one element: else
    ValueError); hybridized MXNet's NotImplementedForSymbol named no line."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        last = outs[-1]
        return last * (last in outs)


@program(*THREE, [rand(3, 1, seed=2811)])
class NotInPythonListOfRows(HybridBlock):
    """``x[1] not in [x[0], x[2]]`` (== of one-element rows eagerly)."""

    @autograph
    def hybrid_forward(self, F, x):
        return x[0] * (x[1] not in [x[0], x[2]])


@program(*THREE, [rand(3, 1, seed=2812)])
class CountOfCollected(HybridBlock):
    """``outs.count(outs[0])``: the collected list's own ``count`` attribute (the number of
    its rows, a Symbol) was called: ``TypeError: unhashable type: 'Symbol'``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        return x[0] * outs.count(outs[0])


@program(*ROWS)
class IndexOfCollected(HybridBlock):
    """``outs.index(outs[0])``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        return outs[outs.index(outs[0])]


@program(*ROWS)
class InOfPythonStrings(HybridBlock):
    """``if self.mode in ("a", "b")`` in a tensor for (Python's)."""
    mode = "b"

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            if self.mode in ("a", "b") and "c" not in self.mode:
                h = h + row
        return h


@program(*ROWS)
class EnumerateStartOverCollected(HybridBlock):
    """``for k, o in enumerate(outs, start=1)`` (a Python for over the list's items)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        h = x[0] * 0
        for k, o in enumerate(outs, start=1):
            h = h + o / k
        return h


@program(*ROWS)
class ZipRowsWithReversedCollectedInTensorFor(HybridBlock):
    """``for row, o in zip(x, reversed(outs))`` after the loop collecting ``outs``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        h = F.zeros((3,))
        for row, o in zip(x, reversed(outs)):
            h = F.tanh(h + row * o)
        return h


@program(*ROWS)
class ForElseOverTensorWithoutBreak(HybridBlock):
    """``for row in x: ... else: h = h * 2`` (no break: the else runs)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = h + row
        else:
            h = h * 2
        return h


@program(*ROWS)
class ForElseWithTensorBreak(HybridBlock):
    """``for ... else`` with a tensor ``break``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = h + row
            if F.sum(h) > 1:
                break
        else:
            h = h * 0
        return h


@program(*PAIR)
class EnumerateZipNestedUnpackInFor(HybridBlock):
    """``for k, (a, b) in enumerate(zip(x, x * 2))``."""

    @autograph
    def hybrid_forward(self, F, x, y):
        h = y
        for k, (a, b) in enumerate(zip(x, x * 2)):
            h = h * 0.5 + a * b * (k + 1)
        return h


@program(*ROWS)
class RangeOfShapeInPythonLoop(HybridBlock):
    """``for i in range(x.shape[0])`` (the traced input's shape)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for i in range(x.shape[0]):
            h = h * 0.5 + x[i]
        return h


@program(*ROWS)
class SplitOutputsZippedWithWeights(HybridBlock):
    """``F.split`` of several outputs zipped with Python weights."""

    @autograph
    def hybrid_forward(self, F, x):
        parts = F.split(x.reshape((-1,)).slice_axis(axis=0, begin=0, end=3), num_outputs=3,
                        axis=0)
        h = x[0] * 0
        for p, w in zip(parts, (0.5, 1.0, 2.0)):
            h = h + p * w
        return h


@program(*ROWS)
class LambdasStoredInTensorLoop(HybridBlock):
    """``fns.append(lambda: row)`` per step (a Python list of closures, called after)."""

    @autograph
    def hybrid_forward(self, F, x):
        fns = []
        for row in x:
            fns.append(lambda: row * 2)
        return fns[-1]()


@program(*ROWS)
class ClassAttributeCounterInTensorLoop(HybridBlock):
    """``type(self).steps += 1`` in a tensor for."""
    steps = 0

    @autograph
    def hybrid_forward(self, F, x):
        type(self).steps = 0
        h = F.zeros((3,))
        for row in x:
            type(self).steps += 1
            h = h + row
        return h * type(self).steps


@program(*ROWS)
class HelperAppendsToOuterListInTensorLoop(HybridBlock):
    """A nested helper appending to the enclosing function's list, called per step."""

    @autograph
    def hybrid_forward(self, F, x):
        log = []

        def step(h, row):
            log.append(1)
            return h + row
        h = F.zeros((3,))
        for row in x:
            h = step(h, row)
        return h * len(log)


@program(*ROWS)
class HelperMutableDefaultInPythonLoop(HybridBlock):
    """``def f(v, acc=[])`` called in a Python range: the default list grows per call."""

    @autograph
    def hybrid_forward(self, F, x):
        def f(v, acc=[]):
            acc.append(v)
            return F.add_n(*acc), len(acc)
        total, n = f(x[0])
        total, n = f(x[-1])
        return total / n


@dataclasses.dataclass
class Decoder:
    scale: float

    def __post_init__(self):
        self.shift = self.scale * 2


@program(*ROWS)
class DataclassPostInitConfigInLoop(HybridBlock):
    """A dataclass config (``__post_init__``) read in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        cfg = Decoder(0.25)
        h = F.zeros((3,))
        for row in x:
            h = h * cfg.scale + row - cfg.shift
        return h


@program(*STATES)
class WhileTrueReturnWithPythonCounter(HybridBlock):
    """``while True:`` with a tensor return and a Python step bound."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        k = F.zeros((1,))
        while True:
            h = h * 0.5 + 1
            k = k + 1
            if F.sum(k) >= 4:
                return h + k
            if F.max(h) < 1.5:
                return h * 10


# ---------------------------------------------------------------- more helpers and patterns


@program(*ROWS)
class MatchPositionalClassPatternOnDataclassHoldingCollected(HybridBlock):
    """``case Held(items, h) if len(items) > 1:`` (``__match_args__`` of a dataclass)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        match Held(outs, x[0]):
            case Held([first, *_], h) if len(outs) > 1:
                return first + h
            case Held(items, h):
                return F.add_n(*items) - h
        return x[0]


@program(*ROWS)
class NonlocalBumpOutsideLoops(HybridBlock):
    """A nested ``bump()`` with ``nonlocal h`` called twice (no tensor loop around it)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]

        def bump():
            nonlocal h
            h = h * 2 + 1
        bump()
        bump()
        return h


@program(*ROWS)
class LambdaDefaultsCaptureEachK(HybridBlock):
    """``[lambda v, k=k: v * k for k in range(3)]`` applied in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        fns = [lambda v, k=k: v * (k + 1) for k in range(3)]
        h = F.zeros((3,))
        for row in x:
            for f in fns:
                h = F.tanh(h + f(row))
        return h


@program(*ROWS)
class MapAndPairwiseOverCollected(HybridBlock):
    """``list(map(F.relu, outs))`` and ``itertools.pairwise(outs)``."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x - 0.5)
        relued = list(map(F.relu, outs))
        diffs = [b - a for a, b in itertools.pairwise(relued)]
        return F.add_n(*relued, *diffs)


@program(*ROWS)
class ZipStarOfPythonPairs(HybridBlock):
    """``hs, cs = zip(*pairs)`` of tuples built in a Python range."""

    @autograph
    def hybrid_forward(self, F, x):
        pairs = [(x[0] * k, x[-1] + k) for k in range(3)]
        hs, cs = zip(*pairs)
        return F.add_n(*hs) + F.stack(*cs).sum(axis=0)


@program(*ROWS)
class MethodReturningTupleInTensorWhile(HybridBlock):
    """``h, c = self._cell(F, h, c)`` in a tensor while."""

    def _cell(self, F, h, c):
        c = c * 0.5 + F.tanh(h)
        return F.tanh(c), c

    @autograph
    def hybrid_forward(self, F, x):
        h, c = x[0], x[0] * 0
        i = F.zeros((1,))
        while F.sum(i) < 3:
            h, c = self._cell(F, h, c)
            i = i + 1
        return h + c


def apply(f, *a, **kw):
    return f(*a, **kw)


@program(*ROWS)
class ForwardingHelperStarArgsInLoop(HybridBlock):
    """``apply(F.broadcast_add, h, row)`` forwarding ``*a``/``**kw`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            h = apply(F.tanh, apply(F.broadcast_add, h, row))
            h = apply(F.clip, h, a_min=-0.5, a_max=0.5)
        return h


@program(*ROWS)
class DelTemporaryInTensorLoop(HybridBlock):
    """``tmp = ...; h = h + tmp; del tmp`` in a tensor for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            tmp = row * 2
            h = h + tmp
            del tmp
        return h


@program(*ROWS)
class DataclassesReplaceOutsideLoop(HybridBlock):
    """``dataclasses.replace(st, h=...)`` of a dataclass holding a collected list."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        st = Held(outs, x[0])
        st2 = dataclasses.replace(st, h=st.h * 3)
        return F.stack(*st2.items).sum(axis=0) + st2.h


@program(*ROWS)
class WithUserContextManagerInTensorLoop(HybridBlock):
    """A user's context manager (a no-op) around the step of a tensor for."""

    class Scope:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            with self.Scope():
                h = F.tanh(h + row)
        return h


@program(*ROWS)
class SortedIndicesByPythonScores(HybridBlock):
    """``sorted(range(n), key=lambda i: scores[i])`` of Python scores picking items."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        scores = [(k * 7) % 5 for k in range(len(outs))]
        order = sorted(range(len(outs)), key=lambda i: scores[i])
        return F.stack(*[outs[i] * (r + 1) for r, i in enumerate(order)]).sum(axis=0)


@program(*ROWS)
class MatchClassKeywordValueIsSameCollected(HybridBlock):
    """``case Plain(items=Reg.outs):`` where ``Reg.outs`` is the list the object holds."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        Reg.outs = outs
        match Plain(outs, 1.0):
            case Plain(items=Reg.outs, h=h):
                return F.add_n(*outs) * h
        return x[0]


@program(*THREE, [rand(3, 1, seed=2813)])
class MatchClassKeywordValueIsOtherCollected(HybridBlock):
    """``case Plain(items=Reg.other):`` of another collected list: Python compares the items
    (==, one element: else ValueError)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(x)
        Reg.other = doubled(x * 1)
        match Plain(outs, 1.0):
            case Plain(items=Reg.other):
                return F.add_n(*outs)
        return x[0]


@program([rand(3, 1, seed=2814)], [rand(2, 1, seed=2815) * 0])
class MatchLiteralOnTensorHeldByObject(HybridBlock):
    """``case Plain(h=0):`` where ``h`` is a one-element tensor (Python takes the truth of
    ``h == 0``): MXNet's NotImplementedForSymbol named no line hybridized."""

    @autograph
    def hybrid_forward(self, F, x):
        match Plain([], x[0]):
            case Plain(h=0):
                return x[0] + 1
        return x[0] * 2


@program(*ROWS)
class DictDisplayKeyedByTensor(HybridBlock):
    """``{x[0]: 1, "n": 2}``: NDArray keys hash by identity; a Symbol has no hash."""

    @autograph
    def hybrid_forward(self, F, x):
        d = {x[0]: 1, "n": 2}
        return x[0] * len(d)


@program(*ROWS)
class DisplaysMadeInTensorLoopChanged(HybridBlock):
    """A set and a dict comprehension made in each step, changed there (their own)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        for row in x:
            seen = {k for k in range(3)}
            seen.add(7)
            parts = {k: row * k for k in range(2)}
            parts[0] = row
            h = h + parts[0] + parts[1] * len(seen)
        return h
