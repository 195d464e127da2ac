"""Session 33: a recursive body changing Python state and reading it through ``eval``/``exec``
(a read the code does not show by name) is refused at the change, naming the call's line
(NOTE [state a body changes and reads] in gluon_cf/recursion/state_reads.py). Before: a
warning, and hybridized the first traces' scale for every call, [[90, 95, 100]] where plain
Python gives [[108, 114, 120]] (round 31c's tree of four inner nodes). Oracle: plain Python
recursion (``_plain`` of test_hostile_r31c)."""
import builtins
import types
import warnings

import numpy as np
import pytest
from mxnet.gluon import HybridBlock

import gluon_cf
from test_hostile_r31c import TOL, _args, _plain


def _line(marker):
    with open(__file__) as source:
        return "%s:%d" % (__file__, next(k + 1 for k, text in enumerate(source)
                                         if text.rstrip().endswith("# " + marker)))

SOURCES = {"threshold3": '2.0 if state["n"] > 3 else 1.0',
           "threshold5": '2.0 if state["n"] > 5 else 1.0'}


class _Evaled(HybridBlock):
    def __init__(self, rule):
        super().__init__()
        self.rule = rule

    def hybrid_forward(self, F, x, left, right, root):
        state = {"n": 0}
        source = SOURCES[self.rule]

        @gluon_cf.recursive
        def node(i):
            state["n"] += 1   # counted by eval
            k = eval(source)   # read by eval
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * k)
        return node(root)


class _Executed(_Evaled):
    def hybrid_forward(self, F, x, left, right, root):
        state = {"n": 0}
        source = SOURCES[self.rule]

        @gluon_cf.recursive
        def node(i):
            state["n"] += 1   # counted by exec
            found = []
            exec("found.append(%s)" % source)   # read by exec
            k = found[0]
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * k)
        return node(root)


@pytest.mark.parametrize("how", ["eval", "exec"])
@pytest.mark.parametrize("rule", sorted(SOURCES))
def test_a_count_read_through_eval_or_exec_is_refused(rule, how):
    want = _plain(0, rule, [0], [])
    block = {"eval": _Evaled, "exec": _Executed}[how]
    np.testing.assert_allclose(block(rule)(*_args()).asnumpy(), want, **TOL)
    net = block(rule)
    net.hybridize()
    with pytest.raises(NotImplementedError) as err:
        net(*_args())
    text = str(err.value)
    assert text.startswith("%s: gluon_cf.recursive: 'node' changes Python state (" % (
        _line("counted by " + how))), text
    assert "(read at %s)" % _line("read by " + how) in text, text


# Review of session 33: eval spelled otherwise (refused), and calls that cannot read the count
# (values, as before with a warning: they were refused).
EV = eval


def _combined(F, node, x, left, right, i, k):
    return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
        F.take(left, i)) + node(F.take(right, i)) * k)


class _BuiltinsEval(HybridBlock):
    def hybrid_forward(self, F, x, left, right, root):
        state = {"n": 0}

        @gluon_cf.recursive
        def node(i):
            state["n"] += 1   # counted by builtins.eval
            k = builtins.eval('2.0 if state["n"] > 3 else 1.0')   # read by builtins.eval
            return _combined(F, node, x, left, right, i, k)
        return node(root)


class _AliasedEval(HybridBlock):
    def hybrid_forward(self, F, x, left, right, root):
        state = {"n": 0}

        @gluon_cf.recursive
        def node(i):
            state["n"] += 1   # counted by an alias
            k = EV('2.0 if state["n"] > 3 else 1.0')   # read by an alias
            return _combined(F, node, x, left, right, i, k)
        return node(root)


class _EvalOfAConstant(HybridBlock):
    def hybrid_forward(self, F, x, left, right, root):
        state = {"n": 0}

        @gluon_cf.recursive
        def node(i):
            state["n"] += 1
            k = eval("2.0")
            return _combined(F, node, x, left, right, i, k)
        return node(root)


class _EvalInEmptyNamespaces(HybridBlock):
    def hybrid_forward(self, F, x, left, right, root):
        state = {"n": 0}
        source = "1.0 + 1.0"

        @gluon_cf.recursive
        def node(i):
            state["n"] += 1
            k = eval(source, {}, {})
            return _combined(F, node, x, left, right, i, k)
        return node(root)


class _ALambdasOwnEval(HybridBlock):
    def hybrid_forward(self, F, x, left, right, root):
        state = {"n": 0}

        @gluon_cf.recursive
        def node(i):
            state["n"] += 1
            k = (lambda eval: eval("2.0"))(float)
            return _combined(F, node, x, left, right, i, k)
        return node(root)


class _VarsOfAnotherObject(HybridBlock):
    def hybrid_forward(self, F, x, left, right, root):
        state = {"n": 0}
        cfg = types.SimpleNamespace(scale=2.0)

        @gluon_cf.recursive
        def node(i):
            state["n"] += 1
            k = vars(cfg)["scale"]
            return _combined(F, node, x, left, right, i, k)
        return node(root)


@pytest.mark.parametrize("block,how", [(_BuiltinsEval, "builtins.eval"),
                                       (_AliasedEval, "an alias")], ids=["builtins", "alias"])
def test_eval_spelled_otherwise_is_refused_too(block, how):
    want = _plain(0, "threshold3", [0], [])
    np.testing.assert_allclose(block()(*_args()).asnumpy(), want, **TOL)
    net = block()
    net.hybridize()
    with pytest.raises(NotImplementedError) as err:
        net(*_args())
    text = str(err.value)
    assert text.startswith("%s: gluon_cf.recursive: 'node' changes Python state (" % (
        _line("counted by " + how))), text
    assert "(read at %s)" % _line("read by " + how) in text, text


@pytest.mark.parametrize("block", [_EvalOfAConstant, _EvalInEmptyNamespaces, _ALambdasOwnEval,
                                   _VarsOfAnotherObject], ids=lambda b: b.__name__)
def test_eval_or_vars_that_cannot_read_the_count_gives_pythons_value(block):
    want = _plain(0, None, [0], [])   # (k = 2.0 at every call)
    net = block()
    net.hybridize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # (the count, never read: a warning)
        np.testing.assert_allclose(net(*_args()).asnumpy(), want, **TOL)
