"""Ahead-of-time schedules (NOTE [ahead-of-time schedules] in gluon_cf/recursion/schedule.py):
the scheduled run equals the dynamic batching executor and eager Python recursion, values and
gradients; functions whose control flow depends on computed values are detected and run
dynamically."""
import inspect

import hypothesis.strategies as st
import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings
from mxnet import autograd, gluon, nd

import gluon_cf
from gluon_cf.data.trees import (batchify_forest, build_vocab, encode_tree, parse_tree,
                                 synthetic_treebank)
from gluon_cf.models.recursive import (RNTN, TopDownTreeLSTM, TreeLSTM, TreeRNN,
                                      encode_binary_trees)
from gluon_cf.graph.index_gradients import IndexGradientError
from gluon_cf.recursion import host_rules, schedule

TOL = dict(rtol=1e-5, atol=1e-6)


@pytest.fixture(autouse=True)
def restore_executor():
    previous = gluon_cf.get_executor()
    yield
    gluon_cf.set_executor(previous)


def _forest(trees):
    vocab = build_vocab(trees)
    encoded = [encode_tree(t, vocab) for t in trees]
    forest = batchify_forest(encoded)
    return vocab, [nd.array(getattr(forest, n)) for n in ("tokens", "left", "right", "roots")]


def _linear_tree(num_words):
    s = "(2 w0)"
    for i in range(1, num_words):
        s = "(2 %s (2 w%d))" % (s, i % 7)
    return parse_tree(s)


FORESTS = {
    "single_node": lambda: [parse_tree("(1 good)")],
    "sst": lambda: synthetic_treebank(6, shape="sst", seed=1, max_length=14),
    "balanced": lambda: synthetic_treebank(5, shape="balanced", seed=2, max_length=16),
    "mixed": lambda: (list(synthetic_treebank(3, shape="linear", seed=3, max_length=9))
                      + [parse_tree("(1 good)")]
                      + list(synthetic_treebank(3, shape="balanced", seed=4, max_length=12))),
}


def _run(net, inputs, mode, ahead_of_time=True, train=True):
    """Outputs and parameter gradients of ``sum(out**2)``: eager (mode None) or hybridized."""
    if mode is None:
        net.hybridize(active=False)
    else:
        gluon_cf.set_executor(mode, ahead_of_time=ahead_of_time)
        net.hybridize()
    if not train:
        return [net(*inputs).asnumpy()], {}
    with autograd.record():
        out = net(*inputs)
        loss = (out * out).sum()
    loss.backward()
    grads = {k: p.grad().asnumpy().copy() for k, p in net.collect_params().items()}
    return [out.asnumpy()], grads


def _reason(name, defined_in):
    """``schedule.report()``'s entry for the recursive function ``name`` defined inside the
    source of ``defined_in`` (a class or function)."""
    lines, start = inspect.getsourcelines(defined_in)
    source = inspect.getsourcefile(defined_in)
    found = [why for label, why in schedule.report().items()
             if label.startswith(name + " at " + source + ":")
             and start <= int(label.rsplit(":", 1)[1]) < start + len(lines)]
    assert len(found) == 1, (name, source, schedule.report())
    return found[0]


def _every_way(net, inputs, entry):
    """Eager, dynamic batching, then on a schedule (training, then inference, which gathers
    from tables written in place: another path); each equals eager. Returns the scheduled
    training run. ``entry``: the name of the function the schedule runs."""
    eager = _run(net, inputs, None)
    dynamic = _run(net, inputs, "batched", ahead_of_time=False)
    before = schedule.RUNS[entry]
    scheduled = _run(net, inputs, "batched")
    inferred = _run(net, inputs, "batched", train=False)
    assert schedule.RUNS[entry] == before + 2, schedule.report()
    for got in (dynamic, scheduled, inferred):
        _assert_same(got, eager)
    return scheduled


def _assert_same(got, expected, tol=TOL):
    for g, e in zip(got[0], expected[0]):
        np.testing.assert_allclose(g, e, **tol)
    for k in got[1]:
        np.testing.assert_allclose(got[1][k], expected[1][k], err_msg=k, **tol)


@pytest.mark.parametrize("model", [TreeLSTM, TreeRNN, RNTN])
@pytest.mark.parametrize("forest", sorted(FORESTS))
def test_scheduled_equals_dynamic_and_eager(model, forest):
    vocab, inputs = _forest(FORESTS[forest]())
    mx.random.seed(0)
    net = model(len(vocab), embed_size=5, hidden_size=4, num_classes=3)
    net.initialize(mx.init.Xavier())
    _every_way(net, inputs, "node")
    assert _reason("node", encode_binary_trees) is None


def test_linear_tree_deeper_than_the_recursion_limit():
    """A chain of 1,201 levels (2,401 nodes): more than Python's 1,000 frames would allow a
    scheduler that recursed once per level. Equality is the point here, not depth, which
    tests/test_recursion.py (5,001 nodes hybridized) and test_no_crash.py (19,999 levels
    eagerly) prove."""
    vocab, inputs = _forest([_linear_tree(1201)])
    mx.random.seed(0)
    net = TreeRNN(len(vocab), embed_size=4, hidden_size=4, num_classes=2)
    net.initialize(mx.init.Xavier())
    dynamic = _run(net, inputs, "batched", ahead_of_time=False)
    before = sum(schedule.RUNS.values())
    scheduled = _run(net, inputs, "batched")
    assert sum(schedule.RUNS.values()) == before + 1
    _assert_same(scheduled, dynamic, dict(rtol=1e-4, atol=1e-6))
    _assert_same(_run(net, inputs, "batched", train=False), dynamic, dict(rtol=1e-4, atol=1e-6))
    eager = _run(net, inputs, None)
    _assert_same(scheduled, eager, dict(rtol=1e-4, atol=1e-6))


class _EvenOdd(gluon.HybridBlock):
    """Two mutually recursive functions with different cells, a nested cond and an index
    computed by arithmetic (``take(right, idx) + 0``)."""

    def __init__(self, vocab_size, hidden=4, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.embed = gluon.nn.Embedding(vocab_size, hidden)
            self.even_cell = gluon.nn.Dense(hidden, in_units=2 * hidden, activation="tanh",
                                            flatten=False)
            self.odd_cell = gluon.nn.Dense(hidden, in_units=2 * hidden, activation="sigmoid",
                                           flatten=False)

    def hybrid_forward(self, F, tokens, left, right, roots):
        def children(idx):
            return F.take(left, idx), F.take(right, idx) + 0

        @gluon_cf.recursive
        def even(idx):
            def internal():
                l, r = children(idx)
                return self.even_cell(F.concat(odd(l), odd(r), dim=-1))
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: self.embed(F.take(tokens, idx)),
                                 internal)

        @gluon_cf.recursive
        def odd(idx):
            def internal():
                l, r = children(idx)
                return self.odd_cell(F.concat(even(l), even(r), dim=-1))

            def leaf():
                x = self.embed(F.take(tokens, idx))
                return gluon_cf.cond(F.take(tokens, idx) > 2, lambda: F.tanh(x), lambda: x * 2)
            return gluon_cf.cond(F.take(left, idx) >= 0, internal, leaf)

        hs, _ = gluon_cf.foreach(lambda root, _: (even(root), []), roots, [])
        return F.reshape(hs, (-3, 0))


def test_mutual_recursion_and_nested_conds():
    trees = list(synthetic_treebank(5, shape="sst", seed=7, max_length=10)) + \
        [parse_tree("(1 good)")]
    vocab, inputs = _forest(trees)
    mx.random.seed(1)
    net = _EvenOdd(len(vocab))
    net.initialize(mx.init.Uniform(1.0))
    _every_way(net, inputs, "even")


def test_computed_predicate_runs_dynamically():
    # TopDownTreeLSTM decides from each node's hidden state whether to expand.
    mx.random.seed(0)
    net = TopDownTreeLSTM(input_size=4, hidden_size=5, max_depth=4)
    net.initialize(mx.init.Xavier())
    z = nd.random.normal(0, 3, shape=(5, 4))
    gluon_cf.set_executor("batched")
    net.hybridize()
    before = schedule.RUNS["node"]
    total, count = (x.asnumpy() for x in net(z))   # the node runs asynchronously: wait
    assert schedule.RUNS["node"] == before
    reason = _reason("node", TopDownTreeLSTM)
    assert reason is not None and "computed" in reason, reason
    net.hybridize(active=False)
    eager_total, eager_count = net(z)
    np.testing.assert_allclose(total, eager_total.asnumpy(), **TOL)
    np.testing.assert_array_equal(count, eager_count.asnumpy())


class _ValueArgument(gluon.HybridBlock):
    """A recursive function whose argument is a value (a running sum), not an index."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.scale = self.params.get("scale", shape=(1, 1), init=mx.init.One())

    def hybrid_forward(self, F, n, scale):
        @gluon_cf.recursive
        def count(k, acc):
            return gluon_cf.cond(k < 1, lambda: acc,
                                 lambda: count(k - 1, F.broadcast_mul(acc, scale) + k))

        outs, _ = gluon_cf.foreach(lambda k, _: (count(k, F.zeros_like(k)), []), n, [])
        return outs


def test_value_argument_runs_dynamically_with_the_reason():
    net = _ValueArgument()
    net.initialize()
    n = nd.array([[[3]], [[0]], [[5]]])
    eager = _run(net, [n], None)
    got = _run(net, [n], "batched")
    assert "value computed from its arguments" in _reason("count", _ValueArgument), schedule.report()
    _assert_same(got, eager)


def test_gradient_buffer_on_an_index_input_is_refused_as_mxnet_refuses_it():
    """A gradient asked of the child indices ``left``: they reach the Embedding's indices
    (``take(left, idx)`` is the callee's ``idx``, ``embed(take(tokens, idx))``), where eager
    MXNet 1.9.1 refuses ("Embedding layer doesn't support calculate data gradient"; NOTE
    [gradients asked of indices]). Both executors refuse, and no schedule runs (this case
    once ran on the dynamic executor and wrote zeros)."""
    vocab, inputs = _forest(FORESTS["sst"]())
    net = TreeRNN(len(vocab), embed_size=4, hidden_size=3, num_classes=2)
    net.initialize(mx.init.Xavier())
    left = inputs[1]
    left.attach_grad()
    before = schedule.RUNS["node"]
    for ahead_of_time in (False, True):
        with pytest.raises(IndexGradientError, match="Embedding"):
            _run(net, inputs, "batched", ahead_of_time=ahead_of_time)
    assert schedule.RUNS["node"] == before


def test_depth_bound_is_checked_before_any_value():
    # A cycle: node 2's left child is node 2 itself.
    tokens, left, right, roots = (nd.array([0, 1, 0]), nd.array([-1, -1, 2]),
                                  nd.array([-1, -1, 1]), nd.array([2]))
    net = TreeRNN(3, embed_size=4, hidden_size=3, num_classes=2)
    net.initialize()
    gluon_cf.set_executor("batched")
    net.hybridize()
    with pytest.raises(gluon_cf.RecursionDepthError, match="max_depth"):
        net(tokens, left, right, roots).asnumpy()


# ------------------------------------------------------------------------ host rules vs MXNet

_OPS = st.sampled_from([
    ("take", {"mode": "clip"}), ("take", {"mode": "wrap"}),
    ("_lesser_scalar", {"scalar": 0}), ("_greater_equal_scalar", {"scalar": 2}),
    ("_equal_scalar", {"scalar": -1}), ("_plus_scalar", {"scalar": 3}),
    ("_minus_scalar", {"scalar": 1}), ("_rminus_scalar", {"scalar": 4}),
    ("_mul_scalar", {"scalar": -2}), ("elemwise_add", {}), ("elemwise_sub", {}),
    ("_lesser", {}), ("_not_equal", {}), ("broadcast_maximum", {}), ("negative", {}),
    ("Cast", {"dtype": "int32"}),
])


@settings(max_examples=60, deadline=None)
@given(op=_OPS, dtype=st.sampled_from(["float32", "int32"]),
       values=st.lists(st.integers(-9, 9), min_size=1, max_size=8),
       table=st.lists(st.integers(-50, 50), min_size=1, max_size=6),
       fraction=st.sampled_from([0.0, 0.25, 0.5, 0.75]))
def test_host_rules_equal_mxnet(op, dtype, values, table, fraction):
    name, attrs = op
    x = np.array(values, dtype=dtype)
    if dtype == "float32":
        x = x + np.float32(fraction) * np.sign(x)   # indices MXNet must truncate
    y = np.roll(x, 1)
    node = {"op": name, "name": "n", "attrs": {k: str(v) for k, v in attrs.items()}}
    rule = host_rules.HOST_RULES[name](node)
    if name == "take":
        t = np.array(table, dtype=dtype)
        expected = nd.take(nd.array(t, dtype=dtype), nd.array(x, dtype=dtype), axis=0,
                           mode=attrs["mode"]).asnumpy()
        got = rule(t, x)
    else:
        fn = getattr(nd, name) if hasattr(nd, name) else getattr(nd._internal, name)
        args = [nd.array(x, dtype=dtype)]
        if name in ("elemwise_add", "elemwise_sub", "_lesser", "_not_equal",
                    "broadcast_maximum"):
            args.append(nd.array(y, dtype=dtype))
        expected = fn(*args, **attrs).asnumpy()
        got = rule(*[a.asnumpy() for a in args])
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_non_integer_scalar_keeps_the_dynamic_executor():
    node = {"op": "_lesser_scalar", "name": "n", "attrs": {"scalar": "0.5"}}
    with pytest.raises(host_rules._NotPlannable, match="not a small integer"):
        host_rules.HOST_RULES["_lesser_scalar"](node)


@pytest.mark.parametrize("shape", [(5,), (5, 1, 4)])
def test_stateless_foreach_as_rows_equals_steps(shape):
    """NOTE [steps as rows] in ops/foreach.py: one run of the body on all steps' rows."""

    class Map(gluon.HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.dense = gluon.nn.Dense(3, activation="tanh", flatten=False)

        def hybrid_forward(self, F, x):
            outs, _ = gluon_cf.foreach(
                lambda xi, _: (self.dense(F.reshape(xi, (1, -1))), []), x, [])
            return outs

    x = nd.random.uniform(-1, 1, shape=shape)
    net = Map()
    net.initialize(mx.init.Xavier())
    eager = _run(net, [x], None)
    per_step = _run(net, [x], "unbatched")
    got = _run(net, [x], "batched")
    assert got[0][0].shape == (5, 1, 3)
    _assert_same(got, eager)
    _assert_same(got, per_step)


class _DepthLimited(gluon.HybridBlock):
    """A tree fold cut at a depth limit: a second, index-only argument (``depth + 1``) in the
    predicate (a product of two comparisons), and three outputs of different sizes and ranks
    (``h`` (1, H), a count (1, 1) and ``h`` twice as (1, 2, H))."""

    def __init__(self, vocab_size, hidden=3, limit=3, **kwargs):
        super().__init__(**kwargs)
        self.limit = limit
        with self.name_scope():
            self.embed = gluon.nn.Embedding(vocab_size, hidden)
            self.cell = gluon.nn.Dense(hidden, in_units=2 * hidden, activation="tanh",
                                       flatten=False)

    def hybrid_forward(self, F, tokens, left, right, roots):
        @gluon_cf.recursive
        def node(idx, depth):
            def leaf():
                h = self.embed(F.take(tokens, idx))
                return [h, F.ones_like(F.slice_axis(h, axis=1, begin=0, end=1)),
                        F.stack(h, h, axis=1)]

            def internal():
                hl, cl, _ = node(F.take(left, idx), depth + 1)
                hr, cr, _ = node(F.take(right, idx), depth + 1)
                h = self.cell(F.concat(hl, hr, dim=-1))
                return [h, cl + cr + 1, F.stack(h, hl, axis=1)]

            go_on = (F.take(left, idx) >= 0) * (depth < self.limit)
            return gluon_cf.cond(go_on, internal, leaf)

        def per_root(root, _):
            h, count, pair = node(root, F.zeros_like(root))
            return [h, count, pair], []

        (h, count, pair), _ = gluon_cf.foreach(per_root, roots, [])
        return F.concat(F.reshape(h, (-3, 0)), F.reshape(count, (-3, 0)),
                        F.reshape(pair, (-3, -3)), dim=-1)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_index_only_second_argument_and_outputs_of_different_sizes(dtype):
    trees = list(synthetic_treebank(5, shape="sst", seed=9, max_length=12)) + \
        [parse_tree("(1 good)")]
    vocab = build_vocab(trees)
    forest = batchify_forest([encode_tree(t, vocab) for t in trees])
    inputs = [nd.array(getattr(forest, n), dtype=dtype)
              for n in ("tokens", "left", "right", "roots")]
    mx.random.seed(3)
    net = _DepthLimited(len(vocab))
    net.initialize(mx.init.Uniform(1.0))
    scheduled = _every_way(net, inputs, "node")
    counts = scheduled[0][0][:, 3]
    assert counts.max() > 1 and counts.min() == 1   # some trees were cut, one is a leaf
