"""Review of round 29r (issue 24): the Python state a hybridized recursive body can reach
(NOTE [Python state in a recursive body]) on the objects a real model holds: a vocabulary, a
huge ``range``, embedding tables in numpy, a user's mapping that fails; against plain
Python recursion (the oracle), eager and hybridized."""
import collections.abc
import random
from random import random as _rand
import tracemalloc
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import nd
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf.recursion import python_state

LEFT, RIGHT = [1, 3, -1, -1, -1], [2, 4, -1, -1, -1]
XS = np.arange(15, dtype="float32").reshape(5, 3)
ARGS = [XS, np.array(LEFT, "float32"), np.array(RIGHT, "float32"), np.array([0], "float32")]


def plain(i, scale):
    """node(i) = x_i at a leaf, else node(l) + node(r) * scale."""
    if LEFT[i] < 0:
        return XS[i:i + 1]
    return plain(LEFT[i], scale) + plain(RIGHT[i], scale) * scale


class _Counted(collections.abc.Sequence):
    """A user's lazy sequence of a billion rows that counts the rows read."""

    read = [0]   # (not the instance's: the snapshot reads its attributes too)

    def __len__(self):
        return 10 ** 9

    def __getitem__(self, k):
        if isinstance(k, slice) or not 0 <= k < len(self):
            raise IndexError(k)
        self.read[0] += 1
        assert self.read[0] <= 10 ** 4, "read whole"   # (before: all 1e9 rows, for minutes)
        return k % 7


class _Failing(collections.abc.Mapping):
    """A user's config mapping whose lookups fail (an unresolved entry): a KeyError."""

    def __getitem__(self, key):
        raise KeyError(key)

    def __iter__(self):
        return iter(["scale"])

    def __len__(self):
        return 1


class _Holder(HybridBlock):
    """A tree model holding what real models hold, read (not changed) by its body."""

    def __init__(self, held):
        super().__init__()
        self.held = held
        self.scale = 2

    def hybrid_forward(self, F, x, left, right, root):
        @gluon_cf.recursive
        def node(i):
            assert self.held is not None   # (the body names what the model holds)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * self.scale)
        return node(root)


@pytest.mark.parametrize("kind", ["lazy", "range", "failing"])
def test_a_model_holding_huge_or_failing_containers_runs_hybridized(kind):
    """Before: a snapshot listed every item of a container before keeping 256: the lazy
    sequence of 1e9 rows was read whole (minutes), ``range(10**12)`` ran out of memory (a
    MemoryError or the machine's memory), a user's mapping raising KeyError made the call
    fail with it. After: the first 256 items, and a mapping that fails keeps its identity."""
    held = {"lazy": _Counted, "range": lambda: range(10 ** 12), "failing": _Failing}[kind]()
    want = plain(0, 2)
    for hybrid in (False, True):
        net = _Holder(held)
        if hybrid:
            net.hybridize()
        with warnings.catch_warnings():
            warnings.simplefilter("error")   # (nothing changes: no warning either)
            np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want)
    if kind == "lazy":
        assert 0 < held.read[0] <= 4 * python_state._MAX_ITEMS, held.read


def test_a_snapshot_of_many_numpy_tables_does_not_copy_them():
    """Before: every array of <= 4096 elements was copied (``tobytes``) into the snapshot, up
    to 4096 of them: 32 MB here, twice per body trace. After: a digest of each within 1 MB
    in all, no copy."""
    tables = [[np.random.RandomState(k).rand(4096) for _ in range(16)] for k in range(64)]

    def body(i):
        return tables

    tracemalloc.start()
    try:
        snap = python_state.snapshot(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak
    assert len(snap.state) > 64 * 16
    before = python_state.snapshot(body)
    tables[0][0][5] += 1   # (a change in a digested array is still seen)
    assert python_state.changed(before, python_state.snapshot(body))


# ---- a Python random generator in a recursive body (NOTE [a Python random generator in a
# recursive body]) --------------------------------------------------------------------------
class _Drawn(HybridBlock):
    """node(i) = x_i at a leaf, else node(l) + node(r) * s, s drawn from a generator per call
    (``how``), or drawn for nothing (``kept``: s = 2)."""

    def __init__(self, how, kept=False):
        super().__init__()
        self.how, self.kept = how, kept
        self.rng = random.Random(3)

    def hybrid_forward(self, F, x, left, right, root):
        how, kept = self.how, self.kept

        @gluon_cf.recursive
        def node(i):
            if how == "instance":
                s = self.rng.randint(1, 9)
            elif how == "module":
                s = random.randint(1, 9)
            elif how == "numpy":
                s = int(np.random.randint(1, 9))
            else:
                s = int(_rand() * 8) + 1
            s = 2 if kept else s
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * s)
        return node(root)


def _plain_drawn(i, how, rng):
    s = {"instance": lambda: rng.randint(1, 9), "module": lambda: random.randint(1, 9),
         "numpy": lambda: int(np.random.randint(1, 9)), "bound": lambda: int(_rand() * 8) + 1
         }[how]()
    if LEFT[i] < 0:
        return XS[i:i + 1]
    return _plain_drawn(LEFT[i], how, rng) + _plain_drawn(RIGHT[i], how, rng) * s


DRAWS = {"instance": "s = self.rng.randint(1, 9)", "module": "s = random.randint(1, 9)",
         "numpy": "s = int(np.random.randint(1, 9))", "bound": "s = int(_rand() * 8) + 1"}


@pytest.mark.parametrize("how", sorted(DRAWS))
def test_a_value_drawn_per_call_from_a_python_generator_is_refused_hybridized(how):
    """Before: hybridized, the draw of one trace was the graph's constant for every call
    (numpy: eager [[135, 149, 163]], hybridized [[153, 170, 187]]), silently. After: eager
    is plain Python's; hybridized refused at the draw's line. Drawn for nothing: a warning."""
    random.seed(5)
    np.random.seed(5)
    want = _plain_drawn(0, how, random.Random(3))
    random.seed(5)
    np.random.seed(5)
    np.testing.assert_allclose(_Drawn(how)(*map(nd.array, ARGS)).asnumpy(), want)
    net = _Drawn(how)
    net.hybridize()
    with pytest.raises(NotImplementedError, match="changes Python state") as err:
        net(*map(nd.array, ARGS))
    lines = open(__file__.rstrip("c")).read().splitlines()
    same = ["module", "bound"] if how in ("module", "bound") else [how]   # (one generator)
    found = {"%s:%d: " % (__file__, k + 1) for k, text in enumerate(lines)
             if text.strip() in [DRAWS[h] for h in same]}
    assert str(err.value).split("gluon_cf")[0] in found, str(err.value)
    net = _Drawn(how, kept=True)
    net.hybridize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), plain(0, 2))
    assert [w for w in caught if "changes Python state" in str(w.message)], caught


# ---- eager remat, a computed argument passed down a deep chain (NOTE [arguments computed in
# a remat body], NOTE [the hub holds no array]) -------------------------------------------------
class _Chain(HybridBlock):
    def __init__(self, remat):
        super().__init__()
        self.remat = remat
        with self.name_scope():
            self.u = mx.gluon.nn.Dense(3, in_units=3, flatten=False)

    def hybrid_forward(self, F, x, left, root):
        @gluon_cf.recursive(remat=self.remat, max_depth=10000)
        def node(i, top):
            down = F.tanh(self.u(top))
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i) * down, lambda: node(
                F.take(left, i), down) + F.take(x, i) * down)
        return node(root, F.ones((1, 3)))


def test_eager_remat_passing_a_computed_argument_down_a_deep_chain_equals_remat_false():
    """A top-down chain 150 deep passing ``tanh(u(top))`` down, eagerly with remat. Before:
    past the depth where eager recursion continues on a fresh stack (~100 levels) an
    EscapedArrayError blamed ``down`` (the stack's hub held the arguments and results of the
    calls it moved), and past that the recomputation in backward, which ran such calls
    inline with no fresh stack, a RecursionError. After: remat=False's values and
    gradients."""
    n = 150
    left = nd.array([k + 1 for k in range(n - 1)] + [-1])
    got = []
    for remat in (False, True):
        mx.random.seed(0)
        net = _Chain(remat)
        net.initialize(mx.init.Xavier())
        x = nd.array(np.random.RandomState(0).rand(n, 3) / 10)
        x.attach_grad()
        with mx.autograd.record():
            y = net(x, left, nd.array([0]))
        y.backward()
        got.append([y.asnumpy(), x.grad.asnumpy(), net.u.weight.grad().asnumpy()])
    for a, b in zip(*got):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


class _CellTree(HybridBlock):
    """A TreeLSTM whose leaves call Gluon's LSTMCell (``begin_state`` and its call count
    themselves in ``_init_counter`` and ``_counter``)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = mx.gluon.rnn.LSTMCell(4, input_size=3)
            self.combine = mx.gluon.nn.Dense(8, in_units=8, flatten=False)

    def hybrid_forward(self, F, x, left, right, root):
        def leaf(i):
            _, (h, c) = self.cell(F.take(x, i), self.cell.begin_state(1, func=F.zeros))
            return F.concat(h, c, dim=1)

        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: leaf(i), lambda: F.tanh(
                self.combine(node(F.take(left, i)) + node(F.take(right, i)))))
        return node(root)


def test_a_gluon_cells_own_counters_are_not_the_users_state():
    """Before: hybridized, "'node' changes Python state (self.cell._init_counter)": Gluon's
    bookkeeping in an LSTMCell was taken for the user's. After: no such warning, and the
    values are eager mode's."""
    got = []
    for hybrid in (False, True):
        net = _CellTree()
        mx.random.seed(1)
        net.initialize(mx.init.Normal(0.5))
        if hybrid:
            net.hybridize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got.append(net(nd.array(XS / 10), *map(nd.array, ARGS[1:])).asnumpy())
        assert not [w for w in caught if "changes Python state" in str(w.message)], [
            str(w.message) for w in caught]
    np.testing.assert_allclose(got[1], got[0], rtol=1e-5, atol=1e-6)


class _CastByState(HybridBlock):
    def hybrid_forward(self, F, x, left, right, root):
        state = {"k": 0}

        @gluon_cf.recursive
        def node(i):
            state["k"] += 1   # the change
            dtype = ["float16", "float32"][state["k"] % 2]
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: F.cast(
                F.cast(node(F.take(left, i)) + node(F.take(right, i)), dtype=dtype),
                dtype="float32"))
        return node(root)


def test_a_dtype_chosen_by_changed_state_is_refused_not_a_warning():
    """Before: two traces casting to float16 and float32 were "one graph" (MXNet's numbering
    stripped from every string, dtypes too): a warning saying the values do not depend on the
    state, and one trace's dtype for every call ([[27.890625, ...]] against plain Python's
    [[27.89375, ...]]). After: refused at the statement."""
    xs = XS + 0.3
    np.testing.assert_allclose(_CastByState()(nd.array(xs), *map(nd.array, ARGS[1:])).asnumpy(),
                               [[27.89375, 30.89375, 33.89375]], rtol=1e-6)
    net = _CastByState()
    net.hybridize()
    with pytest.raises(NotImplementedError, match=r"state\['k'\]\) that its value depends"):
        net(nd.array(xs), *map(nd.array, ARGS[1:]))


class _LogRead(HybridBlock):
    def __init__(self):
        super().__init__()
        self.table = {"w": 1.0}
        self.log = []

    def hybrid_forward(self, F, x, left, right, root):
        @gluon_cf.recursive
        def node(i):
            w = self.table.get("w", 1.0)   # a read
            self.log.append(w)   # the change
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * len(self.log))
        return node(root)


def test_the_refusal_names_the_statement_changing_the_state_not_another_on_self():
    """Before: the first statement naming ``self`` with a method call, ``self.table.get``
    (a read), was named for ``self.log``'s change. After: ``self.log.append(w)``."""
    net = _LogRead()
    net.hybridize()
    with pytest.raises(NotImplementedError, match=r"\(self\.log\) that its value") as err:
        net(*map(nd.array, ARGS))
    lines = open(__file__.rstrip("c")).read().splitlines()
    line = next(k + 1 for k, text in enumerate(lines) if text.strip().endswith("# the change")
                and "self.log" in text)
    assert str(err.value).startswith("%s:%d: " % (__file__, line)), str(err.value)
