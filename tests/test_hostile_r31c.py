"""Round 31c review: a recursive body reading Python state it changes, on a tree of four inner
nodes, against plain Python recursion (NOTE [state a body changes and reads])."""
import inspect
import random
import warnings

import numpy as np
import pytest
from mxnet import autograd, nd
from mxnet.gluon import HybridBlock

import gluon_cf

LEFT, RIGHT = [1, 3, 5, 7, -1, -1, -1, -1, -1], [2, 4, 6, 8, -1, -1, -1, -1, -1]
XS = np.arange(27, dtype="float32").reshape(9, 3)
TOL = dict(rtol=1e-5, atol=1e-6)
RULES = {"threshold3": lambda n, log: 2.0 if n > 3 else 1.0,
         "threshold5": lambda n, log: 2.0 if n > 5 else 1.0,
         "modulus": lambda n, log: 2.0 if n % 2 else 1.0,
         "flag": lambda n, log: 2.0 if log else 1.0,
         "length": lambda n, log: 2.0 if len(log) > 3 else 1.0}


def _line(marker):
    lines, _ = inspect.getsourcelines(inspect.getmodule(_line))
    return "%s:%d" % (__file__, next(k + 1 for k, text in enumerate(lines)
                                     if text.rstrip().endswith("# " + marker)))


class _Counted(HybridBlock):
    """node(i) = x_i at a leaf, else node(l) + node(r) * k, k a rule of the count of calls
    (and of a log filled once the count passes 3); ``rule`` None: the count is never read."""

    def __init__(self, rule):
        super().__init__()
        self.rule = rule

    def hybrid_forward(self, F, x, left, right, root):
        state, log = {"n": 0}, []
        rule = self.rule

        @gluon_cf.recursive
        def node(i):
            state["n"] += 1   # count
            if rule is not None:
                if state["n"] == 4:   # flag
                    log.append(1)
                k = RULES[rule](state["n"], log)
            else:
                k = 2.0
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * k)
        return node(root)


def _plain(i, rule, state, log):
    state[0] += 1
    if rule is not None and state[0] == 4:
        log.append(1)
    k = 2.0 if rule is None else RULES[rule](state[0], log)
    if LEFT[i] < 0:
        return XS[i:i + 1]
    return _plain(LEFT[i], rule, state, log) + _plain(RIGHT[i], rule, state, log) * k


def _args():
    return [nd.array(a) for a in (XS, LEFT, RIGHT, [0])]


@pytest.mark.parametrize("rule", sorted(RULES))
def test_a_count_read_by_the_body_is_refused_whatever_the_traces_see(rule):
    """Before: thresholds 3 and 5 (past the third trace's count), a flag set at the fourth
    call, a list's length past 3: one graph over the sampled traces, a warning, and
    hybridized [[90, 95, 100]] where plain Python gives [[108, 114, 120]]. Now: eager is
    plain Python's; hybridized refused at the count's line, naming the read's."""
    want = _plain(0, rule, [0], [])
    np.testing.assert_allclose(_Counted(rule)(*_args()).asnumpy(), want, **TOL)
    net = _Counted(rule)
    net.hybridize()
    with pytest.raises(NotImplementedError) as err:
        net(*_args())
    text = str(err.value)
    assert text.startswith("%s: gluon_cf.recursive: 'node' changes Python state (" % (
        _line("count"))) and "that its value depends on (read at " in text, text
    assert "(read at %s)" % _line("count") not in text, text   # (its own update)


def test_a_count_never_read_is_a_warning_and_plain_pythons_values_and_gradients():
    want = _plain(0, None, [0], [])
    for hybrid in (False, True):
        net = _Counted(None)
        if hybrid:
            net.hybridize()
        x, left, right, root = _args()
        x.attach_grad()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with autograd.record():
                out = net(x, left, right, root)
            out.backward()
        np.testing.assert_allclose(out.asnumpy(), want, **TOL)
        grad = np.zeros_like(XS)   # (node0 = node1 + 2 node2, node1 = node3 + 2 x4, node2 =
        grad[[4, 5, 6, 7, 8]] = np.array([[2], [2], [4], [1], [2]])   # x5 + 2 x6, node3 =
        # x7 + 2 x8)
        np.testing.assert_allclose(x.grad.asnumpy(), grad, **TOL)
        mine = [w for w in caught if "changes Python state (state['n']) while" in
                str(w.message)]
        assert len(mine) == hybrid, [str(w.message) for w in caught]


class _Helper(HybridBlock):
    """The count read by a method the body calls (``self.scale()``), or by a helper given
    the container whole (``scale_of(self)``)."""

    def __init__(self, whole):
        super().__init__()
        self.whole, self.calls = whole, 0

    def scale(self):
        return 2.0 if self.calls > 3 else 1.0   # method

    def hybrid_forward(self, F, x, left, right, root):
        self.calls = 0

        @gluon_cf.recursive
        def node(i):
            self.calls += 1   # calls
            k = _scale_of(self) if self.whole else self.scale()   # k
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * k)
        return node(root)


def _scale_of(block):
    return 2.0 if block.calls > 3 else 1.0   # helper


@pytest.mark.parametrize("whole", [False, True])
def test_a_count_read_by_a_method_or_a_helper_is_refused(whole):
    want = _plain(0, "threshold3", [0], [])
    np.testing.assert_allclose(_Helper(whole)(*_args()).asnumpy(), want, **TOL)
    net = _Helper(whole)
    net.hybridize()
    with pytest.raises(NotImplementedError) as err:
        net(*_args())
    text = str(err.value)
    assert text.startswith("%s: gluon_cf.recursive: 'node' changes Python state "
                           "(self.calls) that its value depends on (read at " % _line("calls"))
    reads = [_line("k"), _line("helper")] if whole else [_line("helper"), _line("method")]
    assert any("(read at %s)" % line in text for line in reads), text


class _Recorded(dict):
    """A mapping recording every value written to it."""

    def __init__(self):
        super().__init__(n=0)
        self.writes = []

    def __setitem__(self, key, value):
        self.writes.append(value)
        super().__setitem__(key, value)


class _Logged(HybridBlock):
    def __init__(self):
        super().__init__()
        self.state = _Recorded()

    def hybrid_forward(self, F, x, left, right, root):
        state = self.state

        @gluon_cf.recursive
        def node(i):
            state["n"] += 1   # (a count for logging, never read)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * 2.0)
        return node(root)


def test_the_users_objects_are_written_by_the_users_statements_only():
    """Before: hybridized, a logging count in a mapping of the user's was set back to 0 for an
    extra trace and put back (its ``__setitem__`` saw 1, 2, 3, 0, 1, 3): the user's objects are
    written only by the body's own statements now, one count up each."""
    net = _Logged()
    net.hybridize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(net(*_args()).asnumpy(), _plain(0, None, [0], []), **TOL)
    writes = net.state.writes
    assert writes == list(range(1, len(writes) + 1)), writes


class _Aliased(HybridBlock):
    """The count changed by one name and read by another for the same object: a list
    (``seen``, ``self.log``) or a mapping (``box``, ``self.box``)."""

    def __init__(self, how):
        super().__init__()
        self.how, self.log, self.box = how, [], {"n": 0}

    def hybrid_forward(self, F, x, left, right, root):
        seen, box, how = self.log, self.box, self.how
        box["n"] = 0
        del seen[:]

        @gluon_cf.recursive
        def node(i):
            if how == "list":
                seen.append(1)   # list
                k = 2.0 if len(self.log) > 3 else 1.0
            else:
                box["n"] += 1   # dict
                k = 2.0 if self.box["n"] > 3 else 1.0
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * k)
        return node(root)


@pytest.mark.parametrize("how", ["list", "dict"])
def test_a_count_changed_by_one_name_and_read_by_another_is_refused(how):
    """Before (this round's first rule): the change seen under ``seen``, the read of
    ``self.log`` not: a warning, and [[90, 95, 100]] where plain Python gives [[108, 114,
    120]]."""
    want = _plain(0, "threshold3", [0], [])
    np.testing.assert_allclose(_Aliased(how)(*_args()).asnumpy(), want, **TOL)
    net = _Aliased(how)
    net.hybridize()
    with pytest.raises(NotImplementedError) as err:
        net(*_args())
    assert str(err.value).startswith("%s: gluon_cf.recursive: 'node' changes Python state (" %
                                     _line(how)), str(err.value)
    assert "that its value depends on (read at %s:%d)" % (
        __file__, int(_line(how).rsplit(":", 1)[1]) + 1) in str(err.value), str(err.value)


class _Counter:
    """A count read by a method Python runs unnamed: ``counter.big``."""

    def __init__(self):
        self.n = 0

    def __getattr__(self, name):
        return self.n > 3   # getattr


class _Property(HybridBlock):
    """The count read by a property (``self.scale``) or by a counter's ``__getattr__``."""

    def __init__(self, how):
        super().__init__()
        self.how, self.calls, self.counter = how, 0, _Counter()

    @property
    def scale(self):
        return 2.0 if self.calls > 3 else 1.0   # property

    def hybrid_forward(self, F, x, left, right, root):
        self.calls, self.counter.n = 0, 0
        counter = self.counter

        @gluon_cf.recursive
        def node(i):
            if self.how == "property":
                self.calls += 1
                k = self.scale
            else:
                counter.n += 1
                k = 2.0 if counter.big else 1.0
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * k)
        return node(root)


@pytest.mark.parametrize("how", ["property", "getattr"])
def test_a_count_read_by_a_property_or_a_dunder_is_refused(how):
    """Before: the property's getter (not a plain function of the class) was never looked at:
    a warning and [[90, 95, 100]] where plain Python gives [[108, 114, 120]]."""
    want = _plain(0, "threshold3", [0], [])
    np.testing.assert_allclose(_Property(how)(*_args()).asnumpy(), want, **TOL)
    net = _Property(how)
    net.hybridize()
    with pytest.raises(NotImplementedError) as err:
        net(*_args())
    assert "that its value depends on (read at %s)" % _line(how) in str(err.value), str(
        err.value)


class _TwoLogs(HybridBlock):
    """Two counts for logging, never read, one by ``x = x + 1``."""

    def hybrid_forward(self, F, x, left, right, root):
        self.calls, self.total = 0, 0

        @gluon_cf.recursive
        def node(i):
            self.calls += 1
            self.total = self.total + 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * 2.0)
        return node(root)


def test_two_counts_never_read_are_a_warning():
    """Before (this round's first rule): looking for reads of the first count emptied the
    parsed assignments' targets, so ``self.total = self.total + 1`` was a read of the second:
    refused."""
    net = _TwoLogs()
    net.hybridize()
    with pytest.warns(UserWarning, match=r"changes Python state \(self.calls, self.total\)"):
        np.testing.assert_allclose(net(*_args()).asnumpy(), _plain(0, None, [0], []), **TOL)


class _Drawn(HybridBlock):
    """k = 2 when a draw of a seeded Python generator passes 0.8, else 1."""

    def __init__(self):
        super().__init__()
        self.rng = random.Random(0)

    def hybrid_forward(self, F, x, left, right, root):
        @gluon_cf.recursive
        def node(i):
            k = 2.0 if self.rng.random() > 0.8 else 1.0   # draw
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * k)
        return node(root)


def _plain_drawn(i, rng):
    k = 2.0 if rng.random() > 0.8 else 1.0
    if LEFT[i] < 0:
        return XS[i:i + 1]
    return _plain_drawn(LEFT[i], rng) + _plain_drawn(RIGHT[i], rng) * k


def test_a_draw_read_past_a_threshold_is_refused():
    """Before: two traces' draws both under 0.8, one graph, a warning, and hybridized
    [[90, 95, 100]] where plain Python with the same seed gives [[123, 130, 137]]."""
    want = _plain_drawn(0, random.Random(0))
    np.testing.assert_allclose(_Drawn()(*_args()).asnumpy(), want, **TOL)
    net = _Drawn()
    net.hybridize()
    with pytest.raises(NotImplementedError) as err:
        net(*_args())
    assert str(err.value).startswith("%s: gluon_cf.recursive: 'node' changes Python state "
                                     "(self.rng) that its value depends on (read at %s)" % (
                                         _line("draw"), _line("draw"))), str(err.value)


SHADOWED = False   # (a global the body's lambda shadows by its argument)


class _Shadowed(HybridBlock):
    def hybrid_forward(self, F, x, left, right, root):
        state = {"n": 0}

        @gluon_cf.recursive
        def node(i):
            state["n"] += 1
            k = (lambda SHADOWED: (2.0 if state["n"] > 3 else 1.0) if SHADOWED else 1.0)(True)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * k)
        return node(root)


def test_a_branch_test_named_by_a_lambdas_argument_is_not_read_from_the_global():
    """Before (this round's first rule): the test ``SHADOWED`` was read from the module's
    global (False), the count's read taken as a branch no call takes: a warning and
    [[90, 95, 100]] where plain Python gives [[108, 114, 120]]."""
    want = _plain(0, "threshold3", [0], [])
    np.testing.assert_allclose(_Shadowed()(*_args()).asnumpy(), want, **TOL)
    net = _Shadowed()
    net.hybridize()
    with pytest.raises(NotImplementedError, match="that its value depends on"):
        net(*_args())
