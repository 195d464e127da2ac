"""Size classes and edged environment values of padded group calls (NOTE [padded rows] in
gluon_cf/recursion/value_graphs.py): groups of up to ``schedule.PADDED_ROWS`` rows run on a few
row counts by CachedOps with static shapes, and an environment value read only by ``take`` in
mode ``clip`` (the forest's tokens, read by the leaves) is given to them followed by copies of
its last row, so that its shape stays from batch to batch. Outputs equal eager ones over
forests of several sizes in sequence, with the tables' unwritten rows holding NaN."""
import json

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

import gluon_cf
from gluon_cf.data.trees import synthetic_treebank
from gluon_cf.recursion import schedule, skeleton, value_graphs
from test_schedule import _assert_same, _forest, _run
from test_schedule_tables import _forest_in


@pytest.fixture(autouse=True)
def fresh_plans(monkeypatch):
    previous = gluon_cf.get_executor()
    monkeypatch.setattr(skeleton, "_ANALYSES", {})
    yield
    gluon_cf.set_executor(previous)


class _FarLeaves(gluon.HybridBlock):
    """TreeRNN-like; a leaf reads token ``2 * idx + 1``, past the forest's tokens for the
    later half of its nodes: ``take`` in ``mode`` clips it to the last token, or wraps it."""

    def __init__(self, vocab_size, mode, hidden=3, **kwargs):
        super().__init__(**kwargs)
        self.mode = mode
        with self.name_scope():
            self.embed = gluon.nn.Embedding(vocab_size, hidden)
            self.a = gluon.nn.Dense(hidden, in_units=hidden, flatten=False)
            self.b = gluon.nn.Dense(hidden, in_units=hidden, flatten=False)

    def hybrid_forward(self, F, tokens, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            def leaf():
                return F.tanh(self.embed(F.take(tokens, idx * 2 + 1, mode=self.mode)))

            def internal():
                return F.tanh(self.a(node(F.take(left, idx))) + self.b(node(F.take(right, idx))))

            return gluon_cf.cond(F.take(left, idx) < 0, leaf, internal)

        h, _ = gluon_cf.foreach(lambda root, _: (node(root), []), roots, [])
        return h


def _nan_tables(monkeypatch):
    """Every schedule's tables start as NaN: a real row computed from a row nobody wrote is
    NaN (acting row by row, a padding row's NaN reaches no real row)."""
    original = schedule._Schedule.tables

    def nan(self, ctx, slack=0, round_up=False):
        tables = original(self, ctx, slack, round_up)
        for arrays in tables.values():
            for table in arrays:
                table[:] = np.nan
        return tables

    monkeypatch.setattr(schedule._Schedule, "tables", nan)


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_sized_calls_equal_eager_over_forests_of_several_sizes(monkeypatch, mode):
    """Forests of 2 to 44 trees in sequence: groups of 1 to ~600 rows, the tokens' length
    crossing powers of two (50, 662, 800, 107, 1096, 1222 nodes: the 26 trees' leaves run
    sized on the tokens of the 24 trees' shape). In mode ``clip`` the leaves' calls run sized on the tokens edged
    by copies of their last token (so a leaf reading past the end reads the token ``take``
    clips to: padding by zeros, or by any other row, would give other embeddings); in mode
    ``wrap`` the tokens are never edged (wrapping around more rows reads other tokens)."""
    sizes = (2, 24, 26, 5, 40, 44)
    forests = [list(synthetic_treebank(n, shape="sst", seed=n + k, max_length=18))
               for k, n in enumerate(sizes)]
    vocab, _ = _forest([tree for trees in forests for tree in trees])
    inputs = [_forest_in(trees, vocab) for trees in forests]
    mx.random.seed(2)
    net = _FarLeaves(len(vocab), mode)
    net.initialize(mx.init.Uniform(0.5))
    eager = [_run(net, x, None, train=False) for x in inputs]
    _nan_tables(monkeypatch)
    edged, rows = [], []
    original_edged, original_sized = schedule._edged, value_graphs._ValueGraph.sized

    def counted_edged(array, ctx):
        out = original_edged(array, ctx)
        edged.append(out.shape[0] - array.shape[0])
        return out

    def counted_sized(self, size, env_shapes):
        op = original_sized(self, size, env_shapes)
        if op is not None:
            rows.append(size)
        return op

    monkeypatch.setattr(schedule, "_edged", counted_edged)
    monkeypatch.setattr(value_graphs._ValueGraph, "sized", counted_sized)
    gluon_cf.set_executor("batched")
    net.hybridize()
    runs = schedule.RUNS["node"]
    for x, want in zip(inputs, eager):
        got = net(*x).asnumpy()
        assert not np.isnan(got).any()
        _assert_same(([got], {}), want)
    assert schedule.RUNS["node"] == runs + len(inputs), schedule.report()
    assert max(rows) > 16, rows   # size classes above the powers of two ran
    assert (mode == "clip") == any(edged), edged


def _graph(build):
    tokens, idx = mx.sym.var("env0"), mx.sym.var("arg0")
    return json.loads(build(tokens, idx).tojson())


def test_only_values_read_by_take_clip_along_axis_0_are_edged():
    """``_clip_tables``: an environment value is edged only when every use is the table of
    ``take`` along axis 0 in mode ``clip`` (the default), which reads the same from it and
    from it followed by copies of its last row, whatever the index."""
    take = mx.sym.take
    assert value_graphs._clip_tables(_graph(lambda t, i: take(t, i))) == {0}
    assert value_graphs._clip_tables(_graph(lambda t, i: take(t, i, mode="clip") * 2)) == {0}
    for refused in (lambda t, i: take(t, i, mode="wrap"),   # wraps around more rows
                    lambda t, i: take(t, i, axis=1),        # other rows than the padded ones
                    lambda t, i: take(t, i) + mx.sym.sum(t),   # reads every row
                    lambda t, i: take(i, t),                # an index: more rows out
                    lambda t, i: mx.sym.Group([take(t, i), t])):   # an output as it is
        assert value_graphs._clip_tables(_graph(refused)) == frozenset()


def test_edged_values_read_like_the_originals_for_any_index():
    """``schedule._edged``: the value followed by copies of its last row, up to the next power
    of two of rows; ``take(mode="clip")`` of it equals that of the original for indices in and
    out of range, negative and fractional ones."""
    value = nd.array(np.arange(15).reshape((5, 3)) + 1)
    edged = schedule._edged(value, mx.cpu())
    assert edged.shape == (8, 3)
    np.testing.assert_array_equal(edged.asnumpy()[:5], value.asnumpy())
    np.testing.assert_array_equal(edged.asnumpy()[5:], np.repeat(value.asnumpy()[-1:], 3, 0))
    index = nd.array([-3, 0, 2.7, 4, 5, 7, 8, 100])
    np.testing.assert_array_equal(nd.take(edged, index).asnumpy(),
                                  nd.take(value, index).asnumpy())
    assert schedule._edged(edged, mx.cpu()) is edged   # a power of two already


def test_size_classes_hold_every_group_and_stay_few():
    """``_padded``: up to 16 rows the next power of two, then four classes per doubling up to
    ``PADDED_ROWS`` (never fewer rows, at most a quarter more), above it the rows."""
    classes = {schedule._padded(rows) for rows in range(1, schedule.PADDED_ROWS + 1)}
    for rows in range(1, 2 * schedule.PADDED_ROWS):
        size = schedule._padded(rows)
        assert rows <= size <= max(2 * rows - 1, rows * 5 // 4 + 1)
        assert size == rows or rows <= schedule.PADDED_ROWS
    assert len(classes) == 5 + 4 * (schedule.PADDED_ROWS.bit_length() - 5)
