"""Round 27 (review 2 of 27a): ``match`` and ``isinstance``/``type`` on lists a tensor loop
collected. ``PROGRAMS`` maps each block class to its input lists; the oracle is the plain
Python function on NDArrays (``hybrid_forward.__wrapped__``)."""
import collections.abc
import dataclasses
import typing

from mxnet.gluon import HybridBlock

from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand = hostile_harness.rand

TWO = ([rand(2, 3, seed=2721)], [rand(3, 3, seed=2722)])


def doubled(F, x):
    outs = []
    for row in x:
        outs.append(row * 2)
    return outs


@dataclasses.dataclass(slots=True)
class Slotted:
    items: object
    h: object


class Plain:
    __match_args__ = ("items", "h")

    def __init__(self, items, h):
        self.items, self.h = items, h


@dataclasses.dataclass(frozen=True)
class Frozen:
    items: object
    h: object


@program(*TWO)
class MatchStarKeepsCollectedThenAppend(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(F, x)
        match (x[0], outs):
            case (h, *others):
                pass
        outs.append(h * 10)
        return F.stack(*others[0]).sum(axis=0)


@program(*TWO)
class MatchMappingRestThenAppend(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(F, x)
        match {"h": x[0], "o": outs}:
            case {"h": h, **rest}:
                pass
        outs.append(h * 10)
        return F.stack(*rest["o"]).sum(axis=0)


@program(*TWO)
class MatchSlottedDataclass(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(F, x)
        match Slotted(outs, x[0]):
            case Slotted(items=[a, b]):
                return a + b * 3
            case Slotted(items=[a, b, c]):
                return a + b * 3 + c * 5
        return x[0]


@program(*TWO)
class MatchNestedObjectDepth(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(F, x)
        match {"a": [Plain(outs, x[0])]}:
            case {"a": [Plain([a, b], _)]}:
                return a + b * 3
            case {"a": [Plain([a, b, c], _)]}:
                return a + b * 3 + c * 5
        return x[0]


@program(*TWO)
class MatchFrozenCaptured(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(F, x)
        st = Frozen(outs, x[0])
        match st:
            case Frozen([a, *_]) as s if s == st:
                r = a * 2
            case _:
                r = x[0]
        return r + len(s.items)


@program(*TWO)
class IsinstanceAbcAndTyping(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(F, x)
        r = x[0]
        if isinstance(outs, collections.abc.Sequence):
            r = r + 1
        if isinstance(outs, typing.List):
            r = r + 2
        if isinstance(outs, typing.Sized):
            r = r + 4
        if type(outs).__name__ == "list":
            r = r + 8
        return r


class _ListOfMeta(type):
    def __instancecheck__(cls, obj):
        return type(obj) is list and len(obj) > 2


class LongList(metaclass=_ListOfMeta):
    pass


@program(*TWO)
class IsinstanceUserInstancecheck(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(F, x)
        if isinstance(outs, LongList):
            return x[0] + 1
        return x[0] - 1


@typing.runtime_checkable
class HasItems(typing.Protocol):
    size: int


@program(*TWO)
class IsinstanceDataProtocol(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(F, x)
        if isinstance(outs, HasItems):
            return x[0] + 1
        return x[0] - 1


def _first(F, outs):
    match outs:
        case [a, *_] as whole:
            return a, whole
    return None, None


@program(*TWO)
class MatchInHelperTwice(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(F, x)
        sq = doubled(F, x * x)
        a, w1 = _first(F, outs)
        b, w2 = _first(F, sq)
        w1.append(b)
        w2.append(a)
        return F.stack(*outs).sum(axis=0) + F.stack(*sq).sum(axis=0) * 3


@program(*TWO)
class MatchInTensorLoopOverCollected(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(F, x)
        acc = F.zeros_like(x[0])
        for row in x:
            match outs:
                case [a, b]:
                    acc = acc + row * a
                case [a, b, *rest]:
                    acc = acc + row * b
        return acc


@program(*TWO)
class MatchCopyDunder(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(F, x)
        box = Counting(outs, x[0])
        match box:
            case Counting([a, *_], h):
                r = a + h
        return r * box.copies


class Counting:
    __match_args__ = ("items", "h")
    copies = 1

    def __init__(self, items, h):
        self.items, self.h = items, h

    def __copy__(self):
        type(self).copies += 1
        return Counting(self.items, self.h)


@program(*TWO)
class MatchSameListNestedIdentity(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(F, x)
        match (outs, outs):
            case (a, b) if a is b:
                match outs:
                    case [p, *q]:
                        r = p + len(q)
                a.append(x[0])
            case _:
                r = x[0]
        return r + F.stack(*outs).sum(axis=0) * 2


@program(*TWO)
class MatchObjectStarOthersIs(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(F, x)
        match [Plain(outs, x[0]), outs]:
            case [Plain([a, *_], h), *others] if others[0] is outs:
                r = a + h
            case _:
                r = x[0]
        return r



class Found(Exception):
    __match_args__ = ("items",)

    def __init__(self, items):
        super().__init__("found")
        self.items = items


@program(*TWO)
class MatchExceptionHoldingCollected(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = doubled(F, x)
        match Found(outs):
            case Found([a, b]) as e if e.args == ("found",):
                return a + b * 3
            case Found([a, b, c]):
                return a + b * 3 + c * 5
        return x[0]
