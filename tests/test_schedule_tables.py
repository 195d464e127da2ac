"""Schedules keep one table per output (NOTE [one table per output] in
gluon_cf/recursion/value_graphs.py): a group's graph takes each child output by one ``take`` per
callee (a ``_split_v2`` cutting its call sites), with no legacy split, reshape or packing around
the body; its values and gradients equal eager recursion's, also for an output returned twice."""
import collections
import json
import threading

import hypothesis.strategies as st
import mxnet as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from mxnet import gluon, nd

import gluon_cf
from gluon_cf.data.trees import batchify_forest, encode_tree, synthetic_treebank
from gluon_cf.recursion import planned_backward, schedule, skeleton, value_graphs, views
from test_planned_backward import _three_ways
from test_schedule import FORESTS, _assert_same, _forest, _run


@pytest.fixture(autouse=True)
def fresh_plans(monkeypatch):
    previous = gluon_cf.get_executor()
    monkeypatch.setattr(skeleton, "_ANALYSES", {})
    yield
    gluon_cf.set_executor(previous)
    planned_backward.ENABLED[0] = True


class _TwoStates(gluon.HybridBlock):
    """A recursion with two outputs and no split, reshape or concat of its own."""

    def __init__(self, vocab_size, hidden=3, same=False, **kwargs):
        super().__init__(**kwargs)
        self.same = same
        with self.name_scope():
            self.embed = gluon.nn.Embedding(vocab_size, hidden)
            self.a = gluon.nn.Dense(hidden, in_units=hidden, flatten=False)
            self.b = gluon.nn.Dense(hidden, in_units=hidden, flatten=False)

    def hybrid_forward(self, F, tokens, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            def leaf():
                x = self.embed(F.take(tokens, idx))
                return F.tanh(x), x

            def internal():
                hl, cl = node(F.take(left, idx))
                hr, cr = node(F.take(right, idx))
                h = F.tanh(self.a(hl) + self.b(hr))
                return (h, h) if self.same else (h, cl * hr + cr)

            return gluon_cf.cond(F.take(left, idx) < 0, leaf, internal)

        (h, c), _ = gluon_cf.foreach(lambda root, _: (list(node(root)), []), roots, [])
        return h * 2 + c


def _in_place_ops():
    """The operators of every group graph run on tables in place so far; checks that each
    table is read by one operator (NOTE [one table per output]: the gradient of a table read
    twice is summed from two zeroed arrays the size of the table)."""
    ops = set()
    for plan in skeleton._ANALYSES.values():
        for key, graph in getattr(plan, "graphs", {}).items():
            if key[0] != "result" and key[2] is None:
                nodes = json.loads(graph.op.symbol.tojson())["nodes"]
                ops |= {n["op"] for n in nodes}
                readers = collections.Counter(i[0] for n in nodes for i in n["inputs"])
                tables = [k for k, n in enumerate(nodes) if "_table" in n["name"]]
                assert all(readers[k] == 1 for k in tables), nodes
    return ops


def _net(vocab, **kwargs):
    mx.random.seed(1)
    net = _TwoStates(len(vocab), **kwargs)
    net.initialize(mx.init.Uniform(0.3))
    return net


@pytest.mark.parametrize("forest", sorted(FORESTS))
def test_groups_take_each_output_by_call_site(forest):
    vocab, inputs = _forest(FORESTS[forest]())
    net = _net(vocab)
    before = sum(schedule.RUNS.values())
    inferred = _run(net, inputs, "batched", train=False)
    assert sum(schedule.RUNS.values()) > before
    _assert_same(inferred, _run(net, inputs, None, train=False))
    ops = _in_place_ops()
    assert "take" in ops and ("FullyConnected" in ops) == (forest != "single_node"), ops
    assert not ops & {"SliceChannel", "Concat", "Reshape"}, ops
    _three_ways(net, inputs)   # planned backward (in place) == recorded == eager


def test_an_output_returned_twice():
    vocab, inputs = _forest(FORESTS["mixed"]())
    net = _net(vocab, same=True)
    _assert_same(_run(net, inputs, "batched", train=False),
                 _run(net, inputs, None, train=False))
    pass
    _three_ways(net, inputs)



def test_roots_in_one_run_of_rows_are_views_that_outlive_the_next_batch(monkeypatch):
    """A forest of one tree: its root is one row of the entry's tables, returned as a view
    without the result graph's call; the first forest's outputs, kept, still equal eager ones
    after a second forest ran (its tables are new arrays)."""
    # Work an earlier test left queued in MXNet's engine (a Custom operator runs when its
    # inputs are ready, on a worker thread) must not run a schedule of its own while this test
    # counts: it is drained first, and only calls for this test's plans are counted.
    mx.nd.waitall()
    result_graphs = []
    result_graph = schedule._result_graph

    def counted(plan, *args):
        if any(plan is mine for mine in skeleton._ANALYSES.values()):
            result_graphs.append((plan.entry, threading.current_thread().name))
        return result_graph(plan, *args)

    monkeypatch.setattr(schedule, "_result_graph", counted)
    forests = [_forest([tree]) for tree in FORESTS["sst"]()[:2]]
    mx.random.seed(0)
    net = _TwoStates(max(len(v) for v, _ in forests))
    net.initialize(mx.init.Xavier())
    eager = [_run(net, inputs, None, train=False)[0][0] for _, inputs in forests]
    gluon_cf.set_executor("batched")
    net.hybridize()
    before = schedule.RUNS["node"]
    kept = [net(*inputs) for _, inputs in forests]
    mx.nd.waitall()
    for got, want in zip(kept, eager):
        _assert_same(([got.asnumpy()], {}), ([want], {}))
    assert schedule.RUNS["node"] == before + 2
    assert not result_graphs, result_graphs


def test_row_views_equal_slices_and_refuse_rows_out_of_range():
    """``schedule._rows``, the views a schedule's group calls read and write, is NDArray's
    ``_slice`` without its Python bounds handling: the same view (a write through it lands in
    the array), and rows out of range are MXNet's error, not a view past the end."""
    table = mx.nd.arange(12).reshape((4, 3))
    view = schedule._rows(table, 1, 3)
    assert view.shape == (2, 3) and (view.asnumpy() == table._slice(1, 3).asnumpy()).all()
    view[:] = -1
    assert (table.asnumpy()[1:3] == -1).all() and (table.asnumpy()[[0, 3]] >= 0).all()
    for start, stop in ((3, 5), (3, 2)):
        with pytest.raises(mx.MXNetError, match="Slice end index out of range|Invalid slicing"):
            schedule._rows(table, start, stop)
    for start, stop in ((-1, 2), (-3, 0)):
        with pytest.raises(IndexError, match="rows %d:%d of an array of 4 rows" % (start, stop)):
            schedule._rows(table, start, stop)


def test_group_calls_on_raw_views_equal_calls_on_views():
    """``views.call_on_rows`` (NOTE [group calls on raw views]): a CachedOp on bare view handles
    writes what the same call on NDArray views writes, into the same rows; rows out of range
    are MXNet's error or an IndexError as for ``_rows``, and the arrays are whole after."""
    x, idx = mx.sym.var("x"), mx.sym.var("idx")
    graph = mx.sym.tanh(mx.sym.take(x, idx, axis=0, mode="clip") * 2)
    op = mx.nd.CachedOp(graph, flags=[("static_alloc", True), ("static_shape", True)])
    table = mx.nd.array(np.random.RandomState(0).uniform(-1, 1, (6, 3)))
    index = mx.nd.array([5, 0, 2, 1, 4, 3, 0, 1], dtype="int32")
    want, got = mx.nd.full((8, 3), 7.0), mx.nd.full((8, 3), 7.0)
    op(table, schedule._rows(index, 2, 6), out=[schedule._rows(want, 3, 7)])
    views.call_on_rows(op, [table, (index, 2, 6)], [(got, 3, 7)])
    np.testing.assert_array_equal(got.asnumpy(), want.asnumpy())
    assert (got.asnumpy()[[0, 1, 2, 7]] == 7).all()
    np.testing.assert_allclose(got.asnumpy()[3:7], np.tanh(2 * table.asnumpy()[[2, 1, 4, 3]]),
                               rtol=1e-6)
    with pytest.raises(mx.MXNetError, match="Slice end index out of range|Invalid slicing"):
        views.call_on_rows(op, [table, (index, 6, 10)], [(got, 3, 7)])
    with pytest.raises(IndexError, match="rows -1:3 of an array of 8 rows"):
        views.call_on_rows(op, [table, (index, -1, 3)], [(got, 3, 7)])
    np.testing.assert_array_equal(got.asnumpy(), want.asnumpy())


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seeds=st.lists(st.integers(0, 10 ** 6), min_size=3, max_size=4))
def test_padded_groups_equal_eager_across_batches(seeds):
    """NOTE [padded rows]: groups of a few rows run padded to a power of two by CachedOps with
    static shapes, reused by later batches of other sizes; every batch's outputs equal eager
    ones, so no padding row overwrote a row read later or was read as a real one."""
    forests = [list(synthetic_treebank(1 + seed % 5, shape=("sst", "balanced", "linear")[seed % 3],
                                       seed=seed, max_length=4 + seed % 13)) for seed in seeds]
    vocab, _ = _forest([tree for trees in forests for tree in trees])
    inputs = [_forest_in(trees, vocab) for trees in forests]
    net = _net(vocab)
    eager = [_run(net, x, None, train=False) for x in inputs]
    sized = []
    original = value_graphs._ValueGraph.sized

    def counted(self, rows, env_shapes):
        op = original(self, rows, env_shapes)
        sized.append(op is not None)
        return op

    value_graphs._ValueGraph.sized = counted
    try:
        gluon_cf.set_executor("batched")
        net.hybridize()
        for x, want in zip(inputs, eager):
            _assert_same(([net(*x).asnumpy()], {}), want)
    finally:
        value_graphs._ValueGraph.sized = original
    assert any(sized), "no group ran padded"


def _forest_in(trees, vocab):
    """The forest arrays of ``trees`` encoded with ``vocab`` (shared by several forests)."""
    forest = batchify_forest([encode_tree(t, vocab) for t in trees])
    return [nd.array(getattr(forest, n)) for n in ("tokens", "left", "right", "roots")]


def test_padded_tables_round_up_to_whole_steps_of_bytes():
    """NOTE [padded rows]: a table's rows are rounded up to a multiple of 4 MiB of rows (its
    shape then stays from batch to batch), never fewer than asked; a row of more bytes than
    that is not rounded."""
    step = schedule.PADDED_TABLE_BYTES // 600
    assert [schedule._round_up(n, 600) for n in (1, step, step + 1)] == [step, step, 2 * step]
    assert schedule._round_up(3, schedule.PADDED_TABLE_BYTES + 4) == 3
    assert schedule._round_up(5, 0) == 5


class _RaisingTake(gluon.HybridBlock):
    """A node's output is a token id; an internal node's, its left child's looked up in
    ``perm`` by ``take(mode="raise")`` (the right child's too, times 0), which fails on an
    index out of range."""

    def hybrid_forward(self, F, ids, perm, tokens, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            def leaf():
                return F.Embedding(F.take(tokens, idx), ids, input_dim=self.vocab_size,
                                   output_dim=1)

            def internal():
                a = node(F.take(left, idx))
                b = node(F.take(right, idx))
                return F.take(perm, F.cast(a, "int32"), mode="raise") \
                    + 0 * F.take(perm, F.cast(b, "int32"), mode="raise")

            return gluon_cf.cond(F.take(left, idx) < 0, leaf, internal)

        h, _ = gluon_cf.foreach(lambda root, _: (node(root), []), roots, [])
        return h


def test_padding_rows_never_reach_an_operator_checking_values(monkeypatch):
    """NOTE [padded rows]: padding rows may read table rows not yet written; a graph with an
    operator that fails on such values (``take(mode="raise")``) runs unpadded. Was: with the
    tables' memory holding 1e9 (what an earlier array left there), "take operator contains
    indices out of bound" where eager ran."""
    trees = list(synthetic_treebank(3, shape="sst", seed=3, max_length=9))
    vocab, inputs = _forest(trees)
    net = _RaisingTake()
    net.vocab_size = len(vocab)
    ids = nd.arange(len(vocab)).reshape((-1, 1))
    perm = nd.array(np.random.RandomState(0).permutation(len(vocab)))
    want = net(ids, perm, *inputs).asnumpy()
    original = schedule._Schedule.tables

    def garbage(self, ctx, slack=0, round_up=False):
        tables = original(self, ctx, slack, round_up)
        for arrays in tables.values():
            for table in arrays:
                table[:] = 1e9
        return tables

    monkeypatch.setattr(schedule._Schedule, "tables", garbage)
    gluon_cf.set_executor("batched")
    net.hybridize()
    before = schedule.RUNS["node"]
    for _ in range(3):   # the second call on runs padded when it may
        np.testing.assert_array_equal(net(ids, perm, *inputs).asnumpy(), want)
    assert schedule.RUNS["node"] == before + 3, schedule.report()
    assert value_graphs._value_checked(json.loads(
        mx.sym.take(mx.sym.var("a"), mx.sym.var("i"), mode="raise").tojson())) == "take"
    assert value_graphs._value_checked(json.loads(
        mx.sym.take(mx.sym.var("a"), mx.sym.var("i")).tojson())) is None
