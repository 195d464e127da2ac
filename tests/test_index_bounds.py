"""Index inputs of exported models (NOTE [index bounds] in export/index_bounds.py).

A value that is unconditionally a ``take`` index into a model input must be in range when the
exported model runs: the artifact runtime, ``load`` for plain ONNX and the CLI refuse it with
one line instead of clipping it as MXNet does. Indices behind a ``cond`` or in a
``while_loop`` body are the model's business and keep MXNet's clipping.
"""
import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from mxnet import nd

import gluon_cf
from gluon_cf.data.trees import batchify_forest, build_vocab, encode_tree, synthetic_treebank
from gluon_cf.export import (ArtifactError, export_onnx, index_bounds, load, save_artifact)
from gluon_cf.models.recursive import ChildSumTreeLSTM, TreeLSTM

from conftest import REPO, Block

TREE_INPUTS = ["tokens", "left", "right", "roots"]
NODE_AXES = {0: [0], 1: [0], 2: [0], 3: [0]}


def bounds_of(fn, *arrays):
    """The bounds recorded for a hybridized block of ``fn`` exported on ``arrays``."""
    net = Block(fn)
    net.hybridize()
    net(*arrays)
    model = export_onnx(net, list(arrays))
    props = {p.key: p.value for p in model.metadata_props}
    return index_bounds.read(props), model


def gather_rows(F, table, idx):
    return gluon_cf.foreach(lambda i, s: (F.take(table, i), s), idx, [])[0]


def guarded_rows(F, table, idx):
    return gluon_cf.foreach(
        lambda i, s: (gluon_cf.cond(i < 0, lambda: F.zeros((1, 3)), lambda: F.take(table, i)), s),
        idx, [])[0]


TABLE = nd.array(np.arange(12).reshape(4, 3))
IDX = nd.array([[0], [3], [1]])


# ----------------------------------------------------------------------------- what is found

def test_unconditional_take_through_foreach_is_recorded():
    bounds, _ = bounds_of(gather_rows, TABLE, IDX)
    assert [(b["input"], b["indexes"], b["axis"]) for b in bounds] == [("data1", "data0", 0)]


@pytest.mark.parametrize("fn", [
    guarded_rows,
    # a while_loop body may not run
    lambda F, table, idx: gluon_cf.while_loop(
        lambda i: i.sum() < 0, lambda i: (F.take(table, i), i), idx[0], max_iterations=2)[0],
    # the indexed side is computed, not a model input: its size is not an input's size
    lambda F, table, idx: gluon_cf.foreach(lambda i, s: (F.take(table * 2, i), s), idx, [])[0],
    # the index is computed from the input
    lambda F, table, idx: gluon_cf.foreach(lambda i, s: (F.take(table, i + 1), s), idx, [])[0],
    # only clip mode clips; 'wrap' is the model's explicit choice
    lambda F, table, idx: gluon_cf.foreach(lambda i, s: (F.take(table, i, mode="wrap"), s),
                                           idx, [])[0],
], ids=["cond_branch", "while_body", "computed_table", "computed_index", "wrap_mode"])
def test_conditional_or_computed_indices_are_not_recorded(fn):
    bounds, _ = bounds_of(fn, TABLE, IDX)
    assert bounds == []


def tree_forest(num_trees=3, seed=0):
    trees = synthetic_treebank(num_trees, seed=seed, max_length=7)
    vocab = build_vocab(trees)
    forest = batchify_forest([encode_tree(t, vocab) for t in trees])
    return vocab, [getattr(forest, name) for name in TREE_INPUTS]


def test_recursive_tree_models_record_roots_indexing_the_node_arrays(tmp_path):
    vocab, arrays = tree_forest()
    net = TreeLSTM(len(vocab), embed_size=5, hidden_size=4, num_classes=3, prefix="t_")
    net.initialize()
    net.hybridize()
    net(*[nd.array(a) for a in arrays])
    model = save_artifact(net, [nd.array(a) for a in arrays], tmp_path / "t.onnx",
                          dynamic_axes=NODE_AXES, input_names=TREE_INPUTS)
    bounds = index_bounds.read({p.key: p.value for p in model.metadata_props})
    # roots reach F.take(left, idx) < 0, the leaf test every call makes; the token lookup
    # and the children's lookups sit in cond branches
    assert [(b["input"], b["indexes"], b["axis"]) for b in bounds] == [("roots", "left", 0)]


def test_child_sum_tree_lstm_records_roots_for_tokens_and_child_ptr():
    vocab, _ = tree_forest()
    # ChildSum reads tokens[idx] and child_ptr[idx] unconditionally (child_ptr[idx + 1] is
    # computed, so not a must on its own)
    net = ChildSumTreeLSTM(len(vocab), embed_size=5, hidden_size=4, num_classes=3)
    net.initialize()
    net.hybridize()
    tokens = nd.array([1, 2, 3])
    child_ptr = nd.array([0, 2, 2, 2])
    child_idx = nd.array([1, 2])
    roots = nd.array([0])
    net(tokens, child_ptr, child_idx, roots)
    sym = net._cached_graph[1]
    found = index_bounds.find(sym.tojson())
    got = {(b["input"], b["indexes"]) for b in found}
    assert got == {("data3", "data0"), ("data3", "data1")}, found


# ----------------------------------------------------------------------------- what is refused

def test_load_refuses_out_of_range_root_and_runs_valid_ones(tmp_path):
    vocab, arrays = tree_forest()
    net = TreeLSTM(len(vocab), embed_size=5, hidden_size=4, num_classes=3, prefix="t_")
    net.initialize()
    net.hybridize()
    expected = net(*[nd.array(a) for a in arrays]).asnumpy()
    save_artifact(net, [nd.array(a) for a in arrays], tmp_path / "t.onnx",
                  dynamic_axes=NODE_AXES, input_names=TREE_INPUTS)
    artifact = load(tmp_path / "t.onnx")
    np.testing.assert_allclose(artifact(*arrays)[0], expected, rtol=1e-5, atol=1e-5)
    n = len(arrays[1])
    for bad in (n, -1, 10 ** 6):
        roots = arrays[3].copy()
        roots[1] = bad
        with pytest.raises(ValueError, match=r"^artifact: input 'roots' holds %d at \[1\], but "
                           r"its values index axis 0 of 'left' \(size %d\) in '\S+take\d+', so "
                           r"they must lie in \[0, %d\]" % (bad, n, n - 1)):
            artifact(*arrays[:3], roots)
    # MXNet itself clips: the refusal is ours, made for deployment
    clipped = arrays[3].copy()
    clipped[1] = n
    assert net(*[nd.array(a) for a in arrays[:3] + [clipped]]).shape == expected.shape


def test_plain_onnx_through_load_refuses_and_guarded_index_keeps_clipping(tmp_path):
    _, model = bounds_of(gather_rows, TABLE, IDX)
    onnx.save(model, str(tmp_path / "g.onnx"))
    runner = load(tmp_path / "g.onnx")
    np.testing.assert_array_equal(runner(TABLE.asnumpy(), IDX.asnumpy())[0],
                                  gather_rows(nd, TABLE, IDX).asnumpy())
    with pytest.raises(ValueError, match="input 'data1' holds 4 at"):
        runner(TABLE.asnumpy(), np.array([[0], [4], [1]], np.float32))
    # behind a cond: -1 is the model's own "no row" and 7 is clipped, exactly as MXNet does
    _, model = bounds_of(guarded_rows, TABLE, IDX)
    onnx.save(model, str(tmp_path / "h.onnx"))
    idx = np.array([[-1], [7], [1]], np.float32)
    np.testing.assert_array_equal(load(tmp_path / "h.onnx")(TABLE.asnumpy(), idx)[0],
                                  guarded_rows(nd, TABLE, nd.array(idx)).asnumpy())


def cli(*args):
    return subprocess.run([sys.executable, "-m", "gluon_cf.export.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=180, cwd=REPO)


@pytest.mark.parametrize("kind", ["artifact", "onnx"])
def test_cli_run_prints_one_line_for_out_of_range_index(tmp_path, kind):
    if kind == "artifact":
        vocab, arrays = tree_forest()
        net = TreeLSTM(len(vocab), embed_size=5, hidden_size=4, num_classes=3, prefix="t_")
        net.initialize()
        net.hybridize()
        net(*[nd.array(a) for a in arrays])
        save_artifact(net, [nd.array(a) for a in arrays], tmp_path / "m.onnx",
                      dynamic_axes=NODE_AXES, input_names=TREE_INPUTS)
        bad = arrays[3].copy()
        bad[0] = len(arrays[1]) + 2
        arrays = arrays[:3] + [bad]
        name = "roots"
    else:
        _, model = bounds_of(gather_rows, TABLE, IDX)
        onnx.save(model, str(tmp_path / "m.onnx"))
        arrays = [TABLE.asnumpy(), np.array([[0], [9], [1]], np.float32)]
        name = "data1"
    paths = []
    for k, a in enumerate(arrays):
        paths.append(tmp_path / f"in{k}.npy")
        np.save(paths[-1], a)
    result = cli("run", tmp_path / "m.onnx", "--input", *paths, "-o", tmp_path / "out")
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("gluon-cf-export: error: ") and f"input {name!r} holds" in line, line
    assert "must lie in [0, " in line


@pytest.mark.parametrize("text", ["not json", json.dumps({"input": "x"}),
                                  json.dumps([{"input": "x", "indexes": "y", "axis": -1,
                                               "node": "n"}])])
def test_malformed_bounds_metadata_is_an_artifact_error(tmp_path, text):
    _, model = bounds_of(gather_rows, TABLE, IDX)
    props = {p.key: p.value for p in model.metadata_props}
    props[index_bounds.METADATA_KEY] = text
    onnx.helper.set_model_props(model, props)
    with pytest.raises(ArtifactError, match="gluon_cf.index_bounds metadata"):
        load(model.SerializeToString())


def test_child_sum_eager_reads_the_rows_its_graph_reads_for_any_root(tmp_path):
    """Eager ChildSum indexed child_ptr in Python (a root of -3 read ptr[-3], 5 raised
    IndexError) where the hybridized graph's take clips: the same rows now, values and the
    embedding's gradient, for roots outside [0, N) and fractional ones."""
    import mxnet as mx
    from mxnet import autograd
    mx.random.seed(0)
    eager = ChildSumTreeLSTM(9, embed_size=4, hidden_size=3, num_classes=2, prefix="cs_")
    eager.initialize(mx.init.Xavier())
    eager.save_parameters(str(tmp_path / "p.params"))
    hybrid = ChildSumTreeLSTM(9, embed_size=4, hidden_size=3, num_classes=2, prefix="cs_")
    hybrid.load_parameters(str(tmp_path / "p.params"))
    hybrid.hybridize()
    # nodes: 0 leaf, 1 leaf, 2 -> [0, 1], 3 leaf
    tokens, ptr, idx = nd.array([1, 2, 3, 4]), nd.array([0, 0, 0, 2, 2]), nd.array([0, 1])
    roots = nd.array([-3, -1, 0, 2, 3, 4, 5, 2.5])
    results = []
    for net in (eager, hybrid):
        with autograd.record():
            out = net(tokens, ptr, idx, roots)
        out.backward()
        results.append((out.asnumpy(), net.embed.weight.grad().asnumpy().copy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
