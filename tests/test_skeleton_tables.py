"""Skeleton tables (NOTE [skeleton tables] in gluon_cf/recursion/skeleton_tables.py): a
frontier looked up in the table of every index equals the frontier evaluated directly - the
call tree, the groups, their gather indices and arguments, and the errors - for random forests
(hypothesis), roots that are not the table's rows (fractions, -0.0, out of range, negative) and
mutual recursion; and the values and gradients equal eager ones for a skeleton that tells a
fraction from its integer part."""
import contextlib
import copy
import inspect
import re

import hypothesis.strategies as st
import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings
from mxnet import gluon, nd

import gluon_cf
from gluon_cf.errors import CallTreeTooLargeError, RecursionDepthError
from gluon_cf.models import recursive
from gluon_cf.models.recursive import TreeRNN
from gluon_cf.recursion import schedule, skeleton_tables

from test_schedule import FORESTS, TOL, _EvenOdd, _forest, _linear_tree


@pytest.fixture(autouse=True)
def restore_executor():
    previous = gluon_cf.get_executor()
    yield
    gluon_cf.set_executor(previous)
    schedule.SKELETON_TABLES[0] = True
    schedule.CHAINED[0] = True


def _captured(net, inputs):
    """(plan, context, root arguments, depth) of the schedule of one inference of ``net``
    (run twice: the second run finds the layout the first proved)."""
    got = []
    expand = schedule._Schedule.expand

    def capture(self, root_args, depth):
        context = copy.copy(self.context)   # the node's input arrays are MXNet's to reuse
        context.env = [value.copy() for value in context.env]
        got.append((self.plan, context, [a.copy() for a in root_args], depth))
        return expand(self, root_args, depth)

    gluon_cf.set_executor("batched")
    net.hybridize()
    schedule._Schedule.expand = capture
    try:
        for _ in range(2):
            net(*inputs).asnumpy()
    finally:
        schedule._Schedule.expand = expand
    return got[-1]


def _laid_out(plan, context, roots, depth, tables, chained=True):
    """The schedule with skeleton tables on or off (and chained expansion, NOTE [chained
    expansion]), or the error its expansion raised."""
    schedule.SKELETON_TABLES[0] = tables
    schedule.CHAINED[0] = chained
    found = schedule._Schedule(plan, context)
    try:
        found.expand(roots, depth)
    except (RecursionDepthError, CallTreeTooLargeError) as err:
        return type(err), str(err)
    assert found.lay_out(in_place=True)
    return found


def _assert_same_schedule(got, expected):
    if isinstance(expected, tuple):
        assert got == expected
        return
    assert got.counts == expected.counts and got.roots == expected.roots
    assert [g[:4] for g in got.groups] == [g[:4] for g in expected.groups]
    assert [g[4] for g in got.groups] == [g[4] for g in expected.groups]
    np.testing.assert_array_equal(got.indices, expected.indices)
    assert got.result == expected.result
    for q, args in expected.sorted_args.items():
        for a, b in zip(got.sorted_args[q], args):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


def _with_env(context, plan, arrays):
    """``context`` with the skeleton's environment arrays replaced (same order as
    ``plan.env_needs``)."""
    other = copy.copy(context)
    other.env = list(context.env)
    for i, value in zip(plan.env_needs, arrays):
        other.env[i] = nd.array(value, dtype=context.env[i].dtype)
    other.env_shapes = tuple(e.shape for e in other.env)
    return other


@pytest.fixture(scope="module")
def tree_rnn():
    vocab, inputs = _forest(FORESTS["sst"]())
    mx.random.seed(0)
    net = TreeRNN(len(vocab), embed_size=3, hidden_size=3, num_classes=2)
    net.initialize(mx.init.Xavier())
    return _captured(net, inputs)


_ROOT = st.one_of(st.integers(-3, 40), st.sampled_from([0.5, 1.5, -0.0, 2.25, 1e9, -1e9]))


@settings(max_examples=80, deadline=None)
@given(nodes=st.integers(1, 30), data=st.data())
def test_lookup_equals_evaluation_on_random_forests(tree_rnn, nodes, data):
    """Random child arrays (trees, shared subtrees, cycles, indices out of range) and roots
    (none, fractions, -0.0, out of range): the same schedule, or the same error, either way."""
    plan, context, _, depth = tree_rnn
    child = st.lists(st.integers(-2, nodes + 2), min_size=nodes, max_size=nodes)
    arrays = {i: np.array(data.draw(child), np.float32) for i in plan.env_needs}
    roots = np.array(data.draw(st.lists(_ROOT, min_size=0, max_size=6)), np.float32)
    other = _with_env(context, plan, [arrays[i] for i in plan.env_needs])
    before, limit = skeleton_tables.LOOKUPS[0], schedule.MAX_INVOCATIONS
    schedule.MAX_INVOCATIONS = 3000   # a cycle doubles the calls at every level: refused sooner
    try:
        expected = _laid_out(plan, other, [roots], depth, tables=False)
        assert skeleton_tables.LOOKUPS[0] == before
        _assert_same_schedule(_laid_out(plan, other, [roots], depth, tables=True), expected)
        _assert_same_schedule(_laid_out(plan, other, [roots], depth, tables=True,
                                        chained=False), expected)
    finally:
        schedule.MAX_INVOCATIONS = limit



def _arrays_around_the_threshold(data, nodes):
    """Child arrays of ``nodes`` entries: a forest (children after their parent, shared
    subtrees), a chain, a bushy tree, or arbitrary entries (cycles, out of range)."""
    kind = data.draw(st.sampled_from(["forest", "chain", "bushy", "arbitrary"]))
    seed = data.draw(st.integers(0, 2 ** 31 - 1))
    rng = np.random.RandomState(seed)
    left, right = np.full(nodes, -1, np.float32), np.full(nodes, -1, np.float32)
    at = np.arange(nodes)
    if kind == "forest":
        inner = (rng.rand(nodes) < 0.5) & (at + 2 < nodes)
        left[inner] = [rng.randint(i + 1, nodes) for i in at[inner]]
        right[inner] = [rng.randint(i + 1, nodes) for i in at[inner]]
    elif kind == "chain":
        left[:-1] = at[1:]
    elif kind == "bushy":
        inner = 2 * at + 2 < nodes
        left[inner], right[inner] = 2 * at[inner] + 1, 2 * at[inner] + 2
    else:
        left = rng.randint(-2, nodes + 2, nodes).astype(np.float32)
        right = rng.randint(-2, nodes + 2, nodes).astype(np.float32)
    return left, right


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_lookup_equals_evaluation_around_the_table_threshold(tree_rnn, data):
    """Review (session 21, TABLE_ROWS_PER_LEVEL 512 -> 1024, chained expansion numbered at the
    end): arrays of about one or two thresholds' rows, so the table is built at the first,
    second or third frontier and the rest chained: the same schedule (or error) as evaluated
    frontier by frontier, and as looked up without chaining."""
    plan, context, _, depth = tree_rnn
    per_level = schedule.TABLE_ROWS_PER_LEVEL
    nodes = data.draw(st.sampled_from([per_level - 1, per_level, per_level + 1,
                                       2 * per_level + 1]))
    arrays = _arrays_around_the_threshold(data, nodes)
    roots = np.array(data.draw(st.lists(st.integers(0, nodes - 1), min_size=1, max_size=6)),
                     np.float32)
    if data.draw(st.booleans()):
        roots[:] = roots[0]   # the same root repeated
    other = _with_env(context, plan, [arrays[k % 2] for k in range(len(plan.env_needs))])
    limit = schedule.MAX_INVOCATIONS
    schedule.MAX_INVOCATIONS = 20000
    try:
        expected = _laid_out(plan, other, [roots], depth, tables=False)
        _assert_same_schedule(_laid_out(plan, other, [roots], depth, tables=True), expected)
        _assert_same_schedule(_laid_out(plan, other, [roots], depth, tables=True,
                                        chained=False), expected)
    finally:
        schedule.MAX_INVOCATIONS = limit

@pytest.mark.parametrize("tables, chained", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("record", [False, True])
def test_an_empty_batch_gives_outputs_of_no_rows(tree_rnn, tables, chained, record):
    """Issue 28: a batch of no roots failed in the expansion (chained: the arguments of no
    frontier concatenated; frontier by frontier: the roots' rows gathered from the entry's
    table, which no call made). It makes no call and gives the outputs a batch of roots
    gives, with no rows (inference, and under autograd, where the backward is planned)."""
    plan, context, roots, depth = tree_rnn
    schedule.SKELETON_TABLES[0], schedule.CHAINED[0] = tables, chained
    gluon_cf.set_executor("batched")
    ctx = context.env[0].context
    with mx.autograd.record() if record else contextlib.nullcontext():
        full = schedule.run(context, plan.entry, [nd.array(roots[0])], len(roots[0]), depth)
        before = dict(schedule.RUNS)
        empty = schedule.run(context, plan.entry, [nd.array(roots[0][:0])], 0, depth)
    assert full is not None and empty is not None and len(empty) == len(full)
    for got, rows in zip(empty, full):
        assert got.shape == (0,) + rows.shape[1:] and got.dtype == rows.dtype
        assert got.context == ctx
    assert sum(schedule.RUNS.values()) == sum(before.values()) + 1
    laid_out = _laid_out(plan, context, [roots[0][:0]], depth, tables, chained)
    assert laid_out.groups == [] and laid_out.indices is None
    assert laid_out.counts == dict.fromkeys(plan.functions, 0)


@pytest.mark.parametrize("mode", [None, "unbatched", "batched"])
def test_a_model_given_no_roots_is_refused_at_the_foreach(mode):
    """End to end a forest of no trees never reaches a schedule: the models' foreach over the
    roots refuses data of no rows, eagerly and hybridized, at its line (the user's model)."""
    vocab, (tokens, left, right, roots) = _forest(FORESTS["sst"]())
    net = TreeRNN(len(vocab), embed_size=3, hidden_size=3, num_classes=2)
    net.initialize()
    if mode is not None:
        gluon_cf.set_executor(mode)
        net.hybridize()
    line = inspect.getsourcelines(recursive.encode_binary_trees)
    where = "gluon_cf.foreach at %s:%d" % (
        recursive.__file__, line[1] + next(i for i, text in enumerate(line[0])
                                           if "gluon_cf.foreach(" in text))
    with pytest.raises(ValueError, match=re.escape(where) + ".*(length 0|with a 0 dimension)"):
        net(tokens, left, right, roots[:0]).asnumpy()


def _chains(monkeypatch):
    """A list that gets one entry per chained expansion."""
    entered = []
    expand_chain = schedule._Schedule._expand_chain

    def counted(self, *args):
        entered.append(args[2])
        return expand_chain(self, *args)

    monkeypatch.setattr(schedule._Schedule, "_expand_chain", counted)
    return entered


def test_a_forest_is_expanded_as_a_chain(tree_rnn, monkeypatch):
    """TreeRNN's table closes on itself: from the first frontier on, every frontier is one
    lookup in its chain, and the schedule is the frontier by frontier one, values included."""
    plan, context, roots, depth = tree_rnn
    expected = _laid_out(plan, context, roots, depth, tables=True, chained=False)
    entered = _chains(monkeypatch)
    _assert_same_schedule(_laid_out(plan, context, roots, depth, tables=True), expected)
    assert len(entered) == 1 and len(entered[0]) == len(roots[0])   # from the roots on


def test_trees_are_looked_up(tree_rnn):
    plan, context, roots, depth = tree_rnn
    expected = _laid_out(plan, context, roots, depth, tables=False)
    before = skeleton_tables.LOOKUPS[0]
    _assert_same_schedule(_laid_out(plan, context, roots, depth, tables=True), expected)
    assert skeleton_tables.LOOKUPS[0] - before == len(expected.steps)   # every frontier


def test_a_long_chain_is_looked_up_after_some_frontiers():
    """1,201 nodes: the table is built at the second frontier (n / TABLE_ROWS_PER_LEVEL)."""
    assert schedule.TABLE_ROWS_PER_LEVEL < 1201 <= 2 * schedule.TABLE_ROWS_PER_LEVEL
    vocab, inputs = _forest([_linear_tree(601)])
    mx.random.seed(0)
    net = TreeRNN(len(vocab), embed_size=3, hidden_size=3, num_classes=2)
    net.initialize(mx.init.Xavier())
    plan, context, roots, depth = _captured(net, inputs)
    expected = _laid_out(plan, context, roots, depth, tables=False)
    before = skeleton_tables.LOOKUPS[0]
    _assert_same_schedule(_laid_out(plan, context, roots, depth, tables=True), expected)
    assert skeleton_tables.LOOKUPS[0] - before == len(expected.steps) - 1


def test_mutual_recursion_is_looked_up():
    vocab, inputs = _forest(FORESTS["mixed"]())
    mx.random.seed(1)
    net = _EvenOdd(len(vocab))
    net.initialize(mx.init.Uniform(1.0))
    plan, context, roots, depth = _captured(net, inputs)
    expected = _laid_out(plan, context, roots, depth, tables=False)
    before = skeleton_tables.LOOKUPS[0]
    _assert_same_schedule(_laid_out(plan, context, roots, depth, tables=True), expected)
    assert skeleton_tables.LOOKUPS[0] - before == sum(len(step) for step in expected.steps)


class _HalfSteps(gluon.HybridBlock):
    """A tree fold whose predicate reads the index itself (``idx * 2 < limit``): a root of
    1.5 is a leaf where a root of 1 is not, so a frontier row must be the table's row bit for
    bit before it is looked up."""

    def __init__(self, vocab_size, limit, hidden=3, **kwargs):
        super().__init__(**kwargs)
        self.limit = limit
        with self.name_scope():
            self.embed = gluon.nn.Embedding(vocab_size, hidden)
            self.cell = gluon.nn.Dense(hidden, in_units=2 * hidden, activation="tanh",
                                       flatten=False)

    def hybrid_forward(self, F, tokens, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            def internal():
                return self.cell(F.concat(node(F.take(left, idx)), node(F.take(right, idx)),
                                          dim=-1))
            go_on = (F.take(left, idx) >= 0) * (idx * 2 < self.limit)
            return gluon_cf.cond(go_on, internal, lambda: self.embed(F.take(tokens, idx)))

        hs, _ = gluon_cf.foreach(lambda root, _: (node(root), []), roots, [])
        return F.reshape(hs, (-3, 0))


def _twice(net, inputs):
    """Outputs and parameter gradients of ``sum(out**2)``, hybridized, on the second call of
    the block (the first proves the layout, the second looks frontiers up: NOTE [skeleton
    tables]); inference, then training."""
    gluon_cf.set_executor("batched")
    net.hybridize()
    for _ in range(2):
        inferred = net(*inputs).asnumpy()
    for _ in range(2):
        with mx.autograd.record():
            out = net(*inputs)
            loss = (out * out).sum()
        loss.backward()
    grads = {k: p.grad().asnumpy().copy() for k, p in net.collect_params().items()}
    return inferred, out.asnumpy(), grads


@pytest.mark.parametrize("tables", [True, False])
def test_fractional_roots_equal_eager(tables):
    vocab, inputs = _forest(FORESTS["sst"]())
    tokens, left, right, roots = inputs
    internal = np.flatnonzero(left.asnumpy() >= 0)
    # A root r + 0.5 takes node r's children (take truncates) but is a leaf by the
    # predicate, as 2r + 1 < limit fails for the last internal node r: a lookup of row r
    # would make it internal.
    r = int(internal.max())
    roots = nd.array(np.concatenate([roots.asnumpy(), [r + 0.5, r, -0.0, 0.5]]))
    inputs = [tokens, left, right, roots]
    mx.random.seed(2)
    net = _HalfSteps(len(vocab), 2 * r + 1)
    net.initialize(mx.init.Uniform(1.0))
    schedule.SKELETON_TABLES[0] = tables
    before, runs = skeleton_tables.LOOKUPS[0], schedule.RUNS["node"]
    inferred, trained, grads = _twice(net, inputs)
    assert schedule.RUNS["node"] == runs + 4
    assert (skeleton_tables.LOOKUPS[0] > before) == tables
    net.hybridize(active=False)
    with mx.autograd.record():
        out = net(*inputs)
        loss = (out * out).sum()
    loss.backward()
    for got in (inferred, trained):
        np.testing.assert_allclose(got, out.asnumpy(), **TOL)
    for k, p in net.collect_params().items():
        np.testing.assert_allclose(grads[k], p.grad().asnumpy(), err_msg=k, **TOL)


def test_a_chain_refused_as_too_large_builds_no_steps(tree_rnn, monkeypatch):
    """Review (session 21): a chained expansion refused at MAX_INVOCATIONS numbered and built
    the steps of all its frontiers first, only for the message's level count (a cycle that
    doubles, 4M calls: 1.3 s and +115 MB, where frontier by frontier took 0.4 s). It raises the
    error the frontier by frontier expansion raises, without building them."""
    plan, context, _, depth = tree_rnn
    nodes = np.arange(40, dtype=np.float32)   # every node calls itself twice: a cycle
    other = _with_env(context, plan, [nodes] * len(plan.env_needs))
    roots = np.array([3, 7], np.float32)
    limit = schedule.MAX_INVOCATIONS
    schedule.MAX_INVOCATIONS = 5000
    try:
        expected = _laid_out(plan, other, [roots], depth, tables=False)
        assert expected[0] is CallTreeTooLargeError and "(11 levels deep so far)" in expected[1]
        built = []
        chain_steps = schedule._Schedule._chain_steps
        monkeypatch.setattr(schedule._Schedule, "_chain_steps",
                            lambda self, *a: built.append(1) or chain_steps(self, *a))
        entered = _chains(monkeypatch)
        assert _laid_out(plan, other, [roots], depth, tables=True) == expected
        assert len(entered) == 1 and built == []
    finally:
        schedule.MAX_INVOCATIONS = limit
