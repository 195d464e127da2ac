"""Recursive bodies that change Python state deeper than one name (round 29r): items of items,
attributes of attributes, a Block's own underscored attributes, numpy arrays, helpers' closures
and globals, class attributes. Each body counts its calls and reads the count in its value:
plain Python gives [[87, 97, 107]] on the tree of tests/test_recursion_r28r.py."""
import collections
import itertools
import types

import numpy as np
from mxnet.gluon import HybridBlock

import gluon_cf

NS = types.SimpleNamespace
G_NESTED = {"a": {"n": 0}}
G_OBJ = NS(inner=NS(n=0))
G_CALLS = 0


def _bump_global():
    global G_CALLS
    G_CALLS += 1
    return G_CALLS


class _Counter:
    n = 0

    def __init__(self):
        self.box = NS(n=0)

    def bump(self):
        self.box.n += 1
        return self.box.n


class _Slotted:
    __slots__ = ("n",)

    def __init__(self):
        self.n = 0


class _Tree(HybridBlock):
    """x, left, right, root: node(i) = x_i at a leaf, else node(l) + node(r) * count."""

    def hybrid_forward(self, F, x, left, right, root):
        node = self.make(F, x, left, right)
        return node(root)

    def make(self, F, x, left, right):
        raise NotImplementedError


class AttrOfAttr(_Tree):
    def make(self, F, x, left, right):
        self.stats = NS(n=0)

        @gluon_cf.recursive
        def node(i):
            self.stats.n += 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * self.stats.n)
        return node


class ListInDict(_Tree):
    def make(self, F, x, left, right):
        state = {"n": [0]}

        @gluon_cf.recursive
        def node(i):
            state["n"][0] += 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * state["n"][0])
        return node


class ListInList(_Tree):
    def make(self, F, x, left, right):
        box = [[0]]

        @gluon_cf.recursive
        def node(i):
            box[0][0] += 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * box[0][0])
        return node


class UnderscoredAttr(_Tree):
    def make(self, F, x, left, right):
        self._calls = 0

        @gluon_cf.recursive
        def node(i):
            self._calls += 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * self._calls)
        return node


class NumpyCounter(_Tree):
    def make(self, F, x, left, right):
        counts = np.zeros(1)

        @gluon_cf.recursive
        def node(i):
            counts[0] += 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * float(counts[0]))
        return node


class HelperClosure(_Tree):
    def make(self, F, x, left, right):
        counts = [0]

        def bump():
            counts[0] += 1
            return counts[0]

        @gluon_cf.recursive
        def node(i):
            k = [bump()]
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * (k[0] + counts[0] - k[0]))
        return node


class HelperNonlocal(_Tree):
    def make(self, F, x, left, right):
        n = 0

        def bump():
            nonlocal n
            n += 1

        def read():
            return n

        @gluon_cf.recursive
        def node(i):
            bump()
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * read())
        return node


class GlobalNested(_Tree):
    def make(self, F, x, left, right):
        G_NESTED["a"]["n"] = 0

        @gluon_cf.recursive
        def node(i):
            G_NESTED["a"]["n"] += 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * G_NESTED["a"]["n"])
        return node


class GlobalObjectAttr(_Tree):
    def make(self, F, x, left, right):
        G_OBJ.inner.n = 0

        @gluon_cf.recursive
        def node(i):
            G_OBJ.inner.n += 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * G_OBJ.inner.n)
        return node


class GlobalThroughHelper(_Tree):
    def make(self, F, x, left, right):
        global G_CALLS
        G_CALLS = 0

        @gluon_cf.recursive
        def node(i):
            _bump_global()
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * G_CALLS)
        return node


class ClassAttr(_Tree):
    def make(self, F, x, left, right):
        _Counter.n = 0

        @gluon_cf.recursive
        def node(i):
            _Counter.n += 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * _Counter.n)
        return node


class ObjectInList(_Tree):
    def make(self, F, x, left, right):
        objs = [NS(n=0)]

        @gluon_cf.recursive
        def node(i):
            objs[0].n += 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * objs[0].n)
        return node


class MethodOfHelper(_Tree):
    def make(self, F, x, left, right):
        counter = _Counter()

        @gluon_cf.recursive
        def node(i):
            counter.bump()
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * counter.box.n)
        return node


class ChildBlockAttr(_Tree):
    def __init__(self):
        super().__init__()
        self.child = HybridBlock()

    def make(self, F, x, left, right):
        self.child.calls = 0

        @gluon_cf.recursive
        def node(i):
            self.child.calls += 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * self.child.calls)
        return node


class DequeLength(_Tree):
    def make(self, F, x, left, right):
        seen = collections.deque()

        @gluon_cf.recursive
        def node(i):
            seen.append(1)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * len(seen))
        return node


class SlottedAttr(_Tree):
    def make(self, F, x, left, right):
        box = _Slotted()

        @gluon_cf.recursive
        def node(i):
            box.n += 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * box.n)
        return node


class DictOfCounts(_Tree):
    def make(self, F, x, left, right):
        self.cfg = {"depth": {"calls": 0}}

        @gluon_cf.recursive
        def node(i):
            self.cfg["depth"]["calls"] += 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * self.cfg["depth"]["calls"])
        return node


class NextOfCount(_Tree):
    """The count taken at entry (AT_ENTRY: plain Python reads it before the children)."""

    AT_ENTRY = True

    def make(self, F, x, left, right):
        counter = itertools.count(1)

        @gluon_cf.recursive
        def node(i):
            k = next(counter)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * k)
        return node


class NextOfIterator(_Tree):
    """The same count from a builtin iterator over a range."""

    AT_ENTRY = True

    def make(self, F, x, left, right):
        numbers = iter(range(1, 100))

        @gluon_cf.recursive
        def node(i):
            k = next(numbers)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * k)
        return node


# (class, the text of the statement that changes the state: the refusal names its line)
READ = [(AttrOfAttr, "self.stats.n += 1"), (ListInDict, 'state["n"][0] += 1'),
        (ListInList, "box[0][0] += 1"), (UnderscoredAttr, "self._calls += 1"),
        (NumpyCounter, "counts[0] += 1"), (HelperClosure, "counts[0] += 1"),
        (HelperNonlocal, "n += 1"), (GlobalNested, 'G_NESTED["a"]["n"] += 1'),
        (GlobalObjectAttr, "G_OBJ.inner.n += 1"), (GlobalThroughHelper, "G_CALLS += 1"),
        (ClassAttr, "_Counter.n += 1"), (ObjectInList, "objs[0].n += 1"),
        (MethodOfHelper, "counter.bump()"), (ChildBlockAttr, "self.child.calls += 1"),
        (DequeLength, "seen.append(1)"), (SlottedAttr, "box.n += 1"),
        (DictOfCounts, 'self.cfg["depth"]["calls"] += 1'),
        (NextOfCount, "k = next(counter)"), (NextOfIterator, "k = next(numbers)")]


class DeepLog(_Tree):
    """A log the value does not read: node(l) + node(r) * 2."""

    def make(self, F, x, left, right):
        self.log = {"calls": []}

        @gluon_cf.recursive
        def node(i):
            self.log["calls"].append(1)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * 2)
        return node


def scaled(i):
    """DeepLog's value in plain Python."""
    left, right = [1, 3, -1, -1, -1], [2, 4, -1, -1, -1]
    if left[i] < 0:
        return np.arange(15, dtype="float32").reshape(5, 3)[i:i + 1]
    return scaled(left[i]) + scaled(right[i]) * 2
