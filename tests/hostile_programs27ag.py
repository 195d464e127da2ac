"""Round 27ag: a hostile review of autograph round 27a (``isinstance``/``type`` of collected
lists, ``match`` on them, tensor ``while`` loops carrying no array, jumps in ``match`` cases).
``PROGRAMS`` maps each block class to its input lists; the oracle is the plain Python function
on NDArrays (``hybrid_forward.__wrapped__``)."""
import collections
import copy
import dataclasses
import enum
import functools

from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

ROWS = ([rand(4, 3, seed=2701)], [rand(1, 3, seed=2702) + 1], [rand(3, 3, seed=2703) - 0.5])
TWO = ([rand(2, 3, seed=2711)], [rand(3, 3, seed=2712)])
POSITIVE = ([floats(1.0, 2.0)], [floats(5.0, 1.0)], [floats(0.25, 0.1)])

State = collections.namedtuple("State", "items h")


@dataclasses.dataclass
class Box:
    items: object
    h: object


class Spec:
    python_type = float

    def __init__(self, v):
        self.v = v


class MyList(list):
    pass


def doubled_rows(F, x):
    """The rows of ``x`` times 2, collected by a tensor for (a list standing for its rows
    while hybridizing)."""
    outs = []
    for row in x:
        outs.append(row * 2)
    return outs


@program(*TWO)
class MatchClassPatternNamedtupleHoldingCollected(HybridBlock):
    """``case State(items=[a, b]):`` on a namedtuple holding a collected list."""
    Holder = State

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        match self.Holder(outs, x[0]):
            case self.Holder(items=[a, b]):
                return a + b * 3
            case self.Holder(items=[a, b, c]):
                return a + b * 3 + c * 5
        return x[0]


@program(*TWO)
class MatchClassPatternDataclassHoldingCollected(MatchClassPatternNamedtupleHoldingCollected):
    """``case Box(items=[a, b]):`` on a dataclass holding a collected list."""
    Holder = Box



@program(*TWO)
class MatchClassPatternListOnCollected(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        match outs:
            case list() if len(outs) == 2:
                return outs[0] + 1
            case [*_]:
                return outs[0] - 1
        return x[0]


@program(*ROWS)
class MatchGuardStarMiddleCollected(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        match outs:
            case [a, *mid, b] if len(mid) > 0:
                return a + b * 3 + F.stack(*mid).sum(axis=0)
            case [a, *mid, b]:
                return a - b
            case [a] | (a, ):
                return a * 7
        return x[0]


@program(*ROWS)
class MatchAsCaptureThenAppend(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        match outs:
            case [_, *_] as whole:
                whole.append(x[0] * 10)
        return F.stack(*outs).sum(axis=0)


@program(*ROWS)
class MatchCaptureWildcardThenAppend(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        match outs:
            case whole:
                whole.append(x[0] * 10)
        return F.stack(*outs).sum(axis=0)


@program(*ROWS)
class MatchTupleOfCollected(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs, sq = [], []
        for row in x:
            outs.append(row * 2)
            sq.append(row * row)
        match (outs, sq):
            case ([a, *_], [b, *_]):
                return a + b
        return x[0]


@program(*ROWS)
class MatchNestedLists(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        match [outs, [x[0]]]:
            case [[a, *_], [b]]:
                return a + b
        return x[0]


def _helper_match(F, outs, x):
    match outs:
        case [a, b, *_]:
            return a * b
        case [a]:
            return a + 1
    return x[0]


@program(*ROWS)
class MatchInHelperOnCollected(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        return _helper_match(F, outs, x)


@program(*ROWS)
class IsinstanceUserClassWithPythonType(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        s = Spec(2.0)
        return x * 3 if isinstance(s, float) else x * 5


@program(*ROWS)
class TypeOfUserClassWithPythonType(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        s = Spec(2.0)
        return x * 3 if type(s) is Spec else x * 5


@program(*ROWS)
class TypeOfCollectedAsConstructor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        back = type(outs)(reversed(outs))
        return F.stack(*back)


@program(*ROWS)
class SubclassListCollected(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = MyList()
        for row in x:
            outs.append(row * 2)
        return x[0] * 3 if type(outs) is MyList else x[0] * 5


@program(*ROWS)
class TupleCollectedByConcat(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = ()
        for row in x:
            outs = outs + (row * 2,)
        return x[0] * 3 if isinstance(outs, tuple) else x[0] * 5



def _is_list(v):
    return isinstance(v, list)


@program(*ROWS)
class IsinstanceInHelperAndLambda(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        f = lambda v: isinstance(v, list)    # noqa: E731
        return (x[0] * 3 if _is_list(outs) else x[0] * 5) + (x[0] if f(outs) else x[0] * 7)



@program(*ROWS)
class IsinstanceSequenceAbc(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        back = reversed(outs)
        a = x[0] * 3 if isinstance(outs, collections.abc.Sequence) else x[0] * 5
        b = x[0] * 3 if isinstance(back, collections.abc.Sequence) else x[0] * 5
        return a + b * 2 + F.stack(*back).sum(axis=0)


@program(*ROWS)
class IsinstanceInsideLoopOfCollected(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros((3,))
        for row in x:
            outs.append(row * 2)
            h = h + (row if isinstance(outs, list) else row * 5)
        return h


BIG = ([floats(5.0, 1.0)], [floats(2.0, 2.0)])


@program(*BIG)
class CarriesNothingPrintAndAppendInStep(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        log = []
        k = 0
        while F.sum(x) < 3:
            gluon_cf.max_iterations(4)
            log.append(k)
            k = k + 1
        return x * (len(log) + 1)


class Counter:
    def __init__(self):
        self.n = 0


@program(*BIG)
class CarriesNothingAttributeWriteInStep(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        c = Counter()
        while F.sum(x) < 3:
            gluon_cf.max_iterations(4)
            c.n = c.n + 1
        return x * (c.n + 1)


@program(*BIG)
class CarriesNothingSelfCounterInStep(HybridBlock):
    calls = 0

    @autograph
    def hybrid_forward(self, F, x):
        while F.sum(x) < 3:
            gluon_cf.max_iterations(4)
            type(self).calls += 1
        return x * 2


@program(*ROWS)
class BreakInMatchCaseWithCapture(HybridBlock):
    mode = ("scale", 2.0)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            match self.mode:
                case ("scale", s) if s > 1:
                    if F.sum(row) > 0.5:
                        break
                    h = h + row * s
                case _:
                    continue
            h = h * 0.5
        return h


@program(*ROWS)
class ReturnInMatchCaseNestedIf(HybridBlock):
    mode = "a"

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            match self.mode:
                case "a" | "b":
                    if F.sum(row) > 1:
                        return h * 3
                    elif F.sum(row) < -1:
                        continue
                case "c":
                    break
            h = h + row
        return h + 1


@program(*POSITIVE)
class ContinueInMatchInWhile(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x
        i = F.zeros((1,))
        while F.sum(i) < 4:
            gluon_cf.max_iterations(5)
            i = i + 1
            match [1, 2]:
                case [1, b]:
                    if F.sum(h) > 4:
                        continue
                    h = h * b
            h = h + 1
        return h


@program(*ROWS)
class BreakInMatchInNestedLoops(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            for k in range(2):
                match k:
                    case 1:
                        if F.sum(h) > 1:
                            break
                    case _:
                        pass
                h = h + row * (k + 1)
        return h


@program(*ROWS)
class MatchOnCollectedThenBreakInLaterLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        h = F.zeros((3,))
        for row in x:
            match outs:
                case [a, *_]:
                    if F.sum(row + a) > 1:
                        break
            h = h + row
        return h


@program(*POSITIVE)
class CarriesNothingConditionReadsLogLength(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        log = []
        while F.sum(x) + len(log) < 3:
            gluon_cf.max_iterations(4)
            log.append(1)
        return x * (len(log) + 1)


@program(*ROWS)
class ReturnReadingCaptureInMatchInFor(HybridBlock):
    mode = ("scale", 3.0)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            match self.mode:
                case ("scale", s):
                    if F.sum(row) > 0.5:
                        return h * s + row
            h = h + row
        return h



@program(*POSITIVE)
class BreakInMatchAfterAppendInWhile(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x
        outs = []
        while F.sum(h) < 20:
            gluon_cf.max_iterations(6)
            h = h * 2
            match ("go", 1):
                case (_, n) if n > 0:
                    if F.sum(h) > 6:
                        break
            outs.append(h)
        return h, F.stack(x, *outs).sum(axis=0)


@program(*ROWS)
class MatchOnCollectedNamedtupleCaptured(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        st = State(outs, x[0])
        match st:
            case State(items=[a, *rest], h=h) as s:
                return a + h + F.stack(*s.items).sum(axis=0) + (x[0] if s is st else x[0] * 9)
        return x[0]


@program(*BIG)
class CarriesNothingRefusalCaughtByUser(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        log = [1]
        try:
            while F.sum(x) < 3:
                gluon_cf.max_iterations(4)
                log.append(2)
        except Exception:
            pass
        return x * len(log)


@program(*BIG)
class CarriesNothingHelperSideEffect(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        seen = []

        def note(v):
            seen.append(1)
            return v

        k = 0
        try:
            while F.sum(note(x)) < 3:
                gluon_cf.max_iterations(4)
                k = k + 1
        except Exception:
            pass
        return x * len(seen)


@functools.singledispatch
def _total(v, F):
    return v * 100


@_total.register
def _(v: list, F):
    return F.stack(*v).sum(axis=0)


@program(*ROWS)
class SingledispatchOnCollected(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        return _total(outs, F)


def _plain_is_list(v):
    return 3 if isinstance(v, list) else 5


@program(*ROWS)
class IsinstanceInUnconvertedLibraryHelper(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        return x[0] * _plain_is_list(outs)


@program(*ROWS)
class CopyOfCollected(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        c = copy.copy(outs)
        c.append(x[0])
        return F.stack(*c).sum(axis=0) + len(outs)



@program(*ROWS)
class MatchStarOfCollectedListsChanged(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs, sq = [], []
        for row in x:
            outs.append(row * 2)
            sq.append(row * row)
        match (x[0], outs, sq):
            case (first, *others):
                others[0].append(first)
        return F.stack(*outs).sum(axis=0)


class Mode(enum.Enum):
    A = 1
    B = 2


@program(*ROWS)
class MatchDottedValueAndClassPatternsInTensorFor(HybridBlock):
    """``case Mode.A:`` and ``case self.Holder(h=h):`` in a tensor for: the conversion's
    attribute reads in the patterns did not compile (a ValueError naming no line)."""
    Holder = State
    mode = Mode.B

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for row in x:
            match self.mode:
                case Mode.A:
                    h = h + row
                case Mode.B:
                    h = h + row * 3
            match self.Holder([], h):
                case self.Holder(h=g) if g is h:
                    h = g * 0.5
        return h


@program(*ROWS)
class ClassAttributeOfCollected(HybridBlock):
    """``outs.__class__ is list`` of a collected list: False hybridized (the stand-in's)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        return x[0] * 3 if outs.__class__ is list else x[0] * 5


@program(*ROWS)
class MatchGuardReadingCaptureIdentity(HybridBlock):
    """``case [_, *_] as whole if whole is outs:``: the guard saw the copy (False)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled_rows(F, x)
        match outs:
            case [_, *_] as whole if whole is outs:
                return F.stack(*whole).sum(axis=0)
        return x[0]
