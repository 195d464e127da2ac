"""The batching executor's edge cases, each against eager Python recursion (same block, not
hybridized): functions that cannot be batched, and cond branches whose values do not depend on
the rows of a batch. The models of ``test_recursion.py`` cover the common cases."""
import re
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

import gluon_cf
from gluon_cf.data.trees import batchify_forest, build_vocab, encode_tree, parse_tree, \
    synthetic_treebank

TOL = dict(rtol=1e-5, atol=1e-6)
H = 4


def _forest():
    """Six SST-like trees and a single-node tree, as one forest (post-order node arrays)."""
    trees = list(synthetic_treebank(6, shape="sst", seed=2, max_length=9))
    trees.append(parse_tree("(1 lone)"))
    vocab = build_vocab(trees)
    return batchify_forest([encode_tree(t, vocab) for t in trees])


@pytest.fixture(autouse=True)
def batched():
    previous = gluon_cf.get_executor()
    gluon_cf.set_executor("batched")
    yield
    gluon_cf.set_executor(previous)


class _Fold(gluon.HybridBlock):
    """A binary tree fold over node features ``x``; ``leaf(F, xi, a, b)`` is the leaf value."""

    def __init__(self, leaf, **kwargs):
        super().__init__(**kwargs)
        self.leaf = leaf
        with self.name_scope():
            self.a = self.params.get("a", shape=(1, H), init=mx.init.Uniform(1.0))
            self.b = self.params.get("b", shape=(1, H), init=mx.init.Uniform(1.0))

    def hybrid_forward(self, F, x, left, right, roots, a, b):
        @gluon_cf.recursive
        def node(idx):
            def internal():
                return F.tanh(node(F.take(left, idx)) * 0.5 + node(F.take(right, idx)))

            return gluon_cf.cond(F.take(left, idx) < 0,
                                 lambda: self.leaf(F, F.take(x, idx), a, b), internal)

        out, _ = gluon_cf.foreach(lambda root, _: (node(root), []), roots, [])
        return F.reshape(out, (-3, 0))


def _inputs():
    forest = _forest()
    x = nd.array(np.random.RandomState(0).uniform(-1, 1, (forest.num_nodes, H)))
    return [x, nd.array(forest.left), nd.array(forest.right), nd.array(forest.roots)]


def _run(net, inputs):
    for p in net.collect_params().values():
        p.zero_grad()
    inputs[0].attach_grad()
    with autograd.record():
        out = net(*inputs)
        loss = (out * out).sum()
    loss.backward()
    grads = {k: p.grad().asnumpy().copy() for k, p in net.collect_params().items()}
    return out.asnumpy(), grads, inputs[0].grad.asnumpy().copy()


def _check_against_eager(leaf):
    net = _Fold(leaf)
    net.initialize()
    inputs = _inputs()
    expected = _run(net, inputs)          # eager: plain Python recursion
    net.hybridize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _run(net, inputs)
        again = _run(net, inputs)
    for e, g, a in zip(expected, got, again):
        if isinstance(e, dict):
            for k in e:
                np.testing.assert_allclose(g[k], e[k], err_msg=k, **TOL)
                np.testing.assert_allclose(a[k], e[k], err_msg=k, **TOL)
        else:
            np.testing.assert_allclose(g, e, **TOL)
            np.testing.assert_allclose(a, e, **TOL)
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_unbatchable_function_warns_once_and_runs_unbatched():
    # a * xi with a of shape (1, H) is an element-wise product: it needs one row per call.
    messages = _check_against_eager(lambda F, xi, a, b: a * xi + b)
    unbatched = [m for m in messages if "runs unbatched" in m]
    assert len(unbatched) == 1, messages
    assert "'node'" in unbatched[0]
    assert "operator elemwise_mul" in unbatched[0]
    assert "combines a batched input with a shared one of the same shape" in unbatched[0]


def test_cond_branches_that_do_not_depend_on_the_rows():
    # Each leaf picks parameter a or b by its own feature sum: in a batch, the branches return
    # one row for all the rows that take them (a parameter), which must be repeated per row.
    def leaf(F, xi, a, b):
        bias = gluon_cf.cond(F.sum(xi, axis=1) > 0, lambda: a, lambda: b)
        return F.broadcast_add(xi, bias)

    messages = _check_against_eager(leaf)
    assert not [m for m in messages if "runs unbatched" in m], messages


def test_plain_branches_batched_across_levels_match_eager():
    # Leaves at different depths are deferred and computed in one batch (NOTE [batching]).
    messages = _check_against_eager(lambda F, xi, a, b: F.broadcast_mul(F.tanh(xi), a) + xi)
    assert not [m for m in messages if "runs unbatched" in m], messages


# ---- issue 24, item 3: the batching executor never refuses what the unbatched one runs ------

def _check_against_both(leaf, ahead_of_time=True):
    """:func:`_check_against_eager`, and the unbatched executor's values and gradients."""
    gluon_cf.set_executor("batched", ahead_of_time=ahead_of_time)
    try:
        messages = _check_against_eager(leaf)
        net = _Fold(leaf)
        net.initialize()
        inputs = _inputs()
        expected = _run(net, inputs)
        net.hybridize()
        gluon_cf.set_executor("unbatched")
        unbatched = _run(net, inputs)
        gluon_cf.set_executor("batched", ahead_of_time=ahead_of_time)
        batched = _run(net, inputs)
    finally:
        gluon_cf.set_executor("batched")
    for u, b, e in zip(unbatched, batched, expected):
        if isinstance(e, dict):
            for k in e:
                np.testing.assert_allclose(u[k], e[k], err_msg=k, **TOL)
                np.testing.assert_allclose(b[k], e[k], err_msg=k, **TOL)
        else:
            np.testing.assert_allclose(u, e, **TOL)
            np.testing.assert_allclose(b, e, **TOL)
    return messages


def test_leaf_while_loop_with_a_constant_counter():
    """The issue's case: a while_loop whose counter is a constant (F.zeros((1,))), shared by
    every row of a batch. Its step graph's counter and predicate are one value for all the
    invocations of a batch, once cut into rows as if each had its own (all but the first got
    shape (0,): "the value returned by cond must have exactly one element")."""
    def leaf(F, xi, a, b):
        _, (v, _) = gluon_cf.while_loop(
            lambda v, i: i < 2, lambda v, i: ([], [F.tanh(F.broadcast_add(v * 0.5, a)), i + 1]),
            [xi, F.zeros((1,))], max_iterations=3)
        return v

    messages = _check_against_both(leaf)
    assert not [m for m in messages if "runs unbatched" in m or "row by row" in m], messages


def test_leaf_while_loop_returning_its_constant_counter_and_outputs():
    """The counter itself, and the step outputs, flow out of the leaf."""
    def leaf(F, xi, a, b):
        outs, (v, i) = gluon_cf.while_loop(
            lambda v, i: i < 2, lambda v, i: (v.sum(axis=1), [F.broadcast_mul(v, b), i + 1]),
            [xi, F.zeros((1,))], max_iterations=3)
        return F.broadcast_add(F.broadcast_add(v, F.transpose(outs.sum(axis=0, keepdims=True))), i)

    _check_against_both(leaf)


def test_leaf_foreach_with_a_constant_state():
    def leaf(F, xi, a, b):
        outs, (count,) = gluon_cf.foreach(
            lambda t, s: (F.broadcast_mul(t, s[0] + 1), [s[0] + 1]), F.transpose(xi),
            [F.zeros((1,))])
        return F.broadcast_add(F.transpose(outs), count)

    _check_against_both(leaf)


def test_a_failing_batching_analysis_runs_row_by_row_with_a_warning(monkeypatch):
    """Any failure of the analysis that decides whether a body may run on stacked rows means
    "not proven": the function runs row by row, with the documented warning at the user's
    line, never an error the unbatched executor would not raise. (A rule that raises stands in
    for an analysis that fails on some operator.)"""
    from gluon_cf import rowwise

    def broken_rule(*args):
        raise ValueError("cannot read this operator's attributes")

    monkeypatch.setitem(rowwise.RULES, "broadcast_add", broken_rule)
    monkeypatch.setattr(gluon_cf.recursion.batching, "_checked", {})
    monkeypatch.setattr(gluon_cf.recursion.batching, "_seen", {})
    monkeypatch.setattr(gluon_cf.recursion.batching, "_warned", set())

    def leaf(F, xi, a, b):
        return F.broadcast_add(F.tanh(xi), b)

    messages = _check_against_both(leaf)
    unbatched = [m for m in messages if "runs unbatched" in m]
    assert len(unbatched) == 1, messages
    assert "its batching analysis failed (ValueError: cannot read this operator's " \
        "attributes)" in unbatched[0], unbatched


@pytest.mark.parametrize("ahead_of_time", [True, False], ids=["schedule", "dynamic"])
def test_a_function_that_reads_no_argument(ahead_of_time):
    """A recursive function computing its result from the environment alone: every
    invocation's value is that one value (the schedule had no argument to take the rows from,
    StopIteration; the dynamic executor cut the one row into empty ones, ZeroSizeError)."""
    def leaf(F, xi, a, b):
        @gluon_cf.recursive
        def shared(v):
            return F.tanh(a * 2)
        return F.broadcast_add(xi, shared(xi))

    _check_against_both(leaf, ahead_of_time)
