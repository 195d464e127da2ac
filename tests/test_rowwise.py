"""The batching executor's per-operator row-wise rules (NOTE [row-wise rules]).

* one unit test per rule: ``rowwise.check_symbol`` accepts an operator used row by row and
  rejects it used across rows, naming the operator;
* end to end: a recursive function whose combine step mixes rows without changing shapes
  (``h / norm(h)``, ``h - mean(h, axis=0)``, ``softmax(axis=0)``, ...) runs row by row with one
  warning at the user's line, and equals eager Python recursion, values and gradients; the
  row-wise way of writing each runs batched (no warning) and equals eager too.
"""
import re
import warnings

import mxnet as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from mxnet import autograd, gluon, nd

import gluon_cf
from gluon_cf import rowwise
from gluon_cf.data.trees import batchify_forest, build_vocab, encode_tree, synthetic_treebank

H = 4
R = rowwise.ROWS
TOL = dict(rtol=1e-5, atol=1e-6)


def verdict(build, batched, shared=()):
    """None if accepted, else the rejecting operator's name. ``build(**vars) -> Symbol``;
    ``batched``/``shared``: ``{name: shape}`` (batched shapes with R rows)."""
    names = list(batched) + list(shared)
    sym = build(**{n: mx.sym.var(n) for n in names})
    import json
    flags = {n: n in batched for n in names}
    shapes = dict(batched)
    shapes.update(shared)
    try:
        rowwise.check_symbol(sym, json.loads(sym.tojson()), flags, shapes)
    except rowwise.Rejected as rejected:
        return rejected.op or rejected.node
    return None


X = {"x": (R, H)}
W = {"w": (H, H)}
ROW = {"v": (1, H)}

# (id, build, batched, shared, expected: None = accepted, else the rejecting op)
CASES = [
    ("elementwise", lambda x: mx.sym.tanh(x) * 2 + 1, X, (), None),
    ("same_shape_both_batched", lambda x: x * x, X, (), None),
    ("same_shape_with_shared_R_rows", lambda x, v: mx.sym.elemwise_mul(x, v), X,
     {"v": (R, H)}, "elemwise_mul"),
    ("broadcast_shared_row", lambda x, v: mx.sym.broadcast_add(x, v), X, ROW, None),
    ("broadcast_shared_vector", lambda x, v: mx.sym.broadcast_mul(x, v), X, {"v": (H,)}, None),
    ("broadcast_shared_R_rows", lambda x, v: mx.sym.broadcast_add(x, v), X, {"v": (R, H)},
     "broadcast_add"),
    ("sum_axis1", lambda x: mx.sym.sum(x, axis=1, keepdims=True), X, (), None),
    ("sum_all", lambda x: mx.sym.broadcast_mul(x, mx.sym.sum(x)), X, (), "sum"),
    ("mean_axis0", lambda x: mx.sym.broadcast_sub(x, mx.sym.mean(x, axis=0, keepdims=True)),
     X, (), "mean"),
    ("sum_exclude_0", lambda x: mx.sym.sum(x, axis=0, exclude=True), X, (), None),
    ("norm_all", lambda x: mx.sym.broadcast_div(x, mx.sym.norm(x)), X, (), "norm"),
    ("norm_axis1", lambda x: mx.sym.broadcast_div(x, mx.sym.norm(x, axis=1, keepdims=True)),
     X, (), None),
    ("softmax_default", lambda x: mx.sym.softmax(x), X, (), None),
    ("softmax_axis0", lambda x: mx.sym.softmax(x, axis=0), X, (), "softmax"),
    ("softmax_1d_rows", lambda x: mx.sym.softmax(x), {"x": (R,)}, (), "softmax"),
    ("reshape_keep0", lambda x: mx.sym.reshape(x, (0, 2, 2)), X, (), None),
    ("reshape_minus1_first", lambda x: mx.sym.reshape(x, (-1, 2, 2)), X, (), None),
    ("reshape_const_rows", lambda x: mx.sym.reshape(x, (R, H)), X, (), "Reshape"),
    ("reshape_flat", lambda x: mx.sym.reshape(x, (-1,)), X, (), "Reshape"),
    ("flatten", lambda x: mx.sym.flatten(mx.sym.reshape(x, (0, 2, 2))), X, (), None),
    ("expand_dims1", lambda x: mx.sym.expand_dims(x, axis=1), X, (), None),
    ("expand_dims0", lambda x: mx.sym.expand_dims(x, axis=0), X, (), "expand_dims"),
    ("transpose_keep0", lambda x: mx.sym.transpose(mx.sym.reshape(x, (0, 2, 2)), axes=(0, 2, 1)),
     X, (), None),
    ("transpose_default", lambda x: mx.sym.transpose(x), X, (), "transpose"),
    ("slice_axis1", lambda x: mx.sym.slice_axis(x, axis=1, begin=0, end=2), X, (), None),
    ("slice_axis0", lambda x: mx.sym.slice_axis(x, axis=0, begin=0, end=1), X, (), "slice_axis"),
    ("concat_dim1", lambda x: mx.sym.concat(x, x, dim=1), X, (), None),
    ("concat_dim0", lambda x: mx.sym.concat(x, x, dim=0), X, (), "Concat"),
    ("stack_axis1", lambda x: mx.sym.stack(x, x, axis=1), X, (), None),
    ("split_axis1", lambda x: mx.sym.split(x, num_outputs=2, axis=1)[0], X, (), None),
    ("tile_cols", lambda x: mx.sym.tile(x, reps=(1, 2)), X, (), None),
    ("tile_rows", lambda x: mx.sym.tile(x, reps=(2, 1)), X, (), "tile"),
    ("fully_connected", lambda x, w: mx.sym.FullyConnected(x, w, no_bias=True, num_hidden=H),
     X, W, None),
    ("fully_connected_batched_weight",
     lambda x, w: mx.sym.FullyConnected(w, x, no_bias=True, num_hidden=R), {"x": (R, H)},
     {"w": (H, H)}, "FullyConnected"),
    ("dot_right", lambda x, w: mx.sym.dot(x, w), X, W, None),
    ("dot_left", lambda x, w: mx.sym.dot(w, x, transpose_b=True), X, W, "dot"),
    ("take_table", lambda i, w: mx.sym.take(w, i), {"i": (R,)}, W, None),
    ("take_rows_of_batch", lambda x, i: mx.sym.take(x, i), {"x": (R, H), "i": (R,)}, (),
     "take"),
    ("embedding", lambda i, w: mx.sym.Embedding(i, w, input_dim=H, output_dim=H),
     {"i": (R,)}, W, None),
    ("broadcast_like_rows", lambda x, v: mx.sym.broadcast_like(v, x, lhs_axes=(0,),
                                                              rhs_axes=(0,)), X, ROW, None),
    ("batch_norm", lambda x, g, b, m, s: mx.sym.BatchNorm(x, g, b, m, s), X,
     {"g": (H,), "b": (H,), "m": (H,), "s": (H,)}, "BatchNorm"),
    ("layer_norm", lambda x, g, b: mx.sym.LayerNorm(x, g, b), X, {"g": (H,), "b": (H,)}, None),
    ("unknown_op", lambda x: mx.sym.cumsum(x, axis=1) if hasattr(mx.sym, "cumsum")
     else mx.sym.khatri_rao(x, x), X, (), "<some>"),
    ("shared_only", lambda x, w: mx.sym.broadcast_add(x, mx.sym.sum(w)), X, W, None),
]


@pytest.mark.parametrize("build,batched,shared,expected", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_rule(build, batched, shared, expected):
    got = verdict(build, batched, dict(shared))
    if expected == "<some>":
        assert got is not None
    else:
        assert got == expected


# ---- end to end: batched hybridized vs eager Python recursion ---------------------------------

class Fold(gluon.HybridBlock):
    """A binary tree fold whose internal step is ``combine(F, left_h, right_h, W)``."""

    def __init__(self, combine, vocab_size, **kwargs):
        super().__init__(**kwargs)
        self.combine = combine
        with self.name_scope():
            self.embed = gluon.nn.Embedding(vocab_size, H)
            self.w = self.params.get("w", shape=(2 * H, H), init=mx.init.Uniform(0.5))

    def hybrid_forward(self, F, tokens, left, right, roots, w):
        @gluon_cf.recursive
        def node(idx):
            def internal():
                lh, rh = node(F.take(left, idx)), node(F.take(right, idx))
                return self.combine(F, lh, rh, w)

            return gluon_cf.cond(F.take(left, idx) < 0,
                                 lambda: F.tanh(self.embed(F.take(tokens, idx))), internal)

        out, _ = gluon_cf.foreach(lambda root, _: (node(root), []), roots, [])
        return F.reshape(out, (-3, 0))


def _step(F, lh, rh, w):
    return F.tanh(F.dot(F.concat(lh, rh, dim=1), w))


MIXING = {   # mixes the rows of a batch without changing shapes
    "norm_all": lambda F, lh, rh, w: F.broadcast_div(_step(F, lh, rh, w),
                                                    F.norm(_step(F, lh, rh, w)) + 1),
    "minus_mean_axis0": lambda F, lh, rh, w: F.broadcast_sub(
        _step(F, lh, rh, w), F.mean(_step(F, lh, rh, w), axis=0, keepdims=True)),
    "softmax_axis0": lambda F, lh, rh, w: F.softmax(_step(F, lh, rh, w), axis=0),
    "sum_all": lambda F, lh, rh, w: F.broadcast_mul(_step(F, lh, rh, w),
                                                   F.sum(_step(F, lh, rh, w))),
    "max_axis0": lambda F, lh, rh, w: F.broadcast_sub(
        _step(F, lh, rh, w), F.max(_step(F, lh, rh, w), axis=0, keepdims=True)),
}
ROWWISE = {   # the batch-agnostic way to write each
    "norm_axis1": lambda F, lh, rh, w: F.broadcast_div(
        _step(F, lh, rh, w), F.norm(_step(F, lh, rh, w), axis=1, keepdims=True) + 1),
    "minus_mean_axis1": lambda F, lh, rh, w: F.broadcast_sub(
        _step(F, lh, rh, w), F.mean(_step(F, lh, rh, w), axis=1, keepdims=True)),
    "softmax_last": lambda F, lh, rh, w: F.softmax(_step(F, lh, rh, w), axis=-1),
    "reshape_keep_rows": lambda F, lh, rh, w: F.reshape(
        F.reshape(_step(F, lh, rh, w), (0, 2, 2)), (0, -1)),
    "dense_like": lambda F, lh, rh, w: F.relu(F.FullyConnected(
        F.concat(lh, rh, dim=1), F.transpose(w), no_bias=True, num_hidden=H)),
}


def _forest_inputs(seed=3, num_trees=5, shape="sst"):
    trees = list(synthetic_treebank(num_trees, shape=shape, seed=seed, max_length=9))
    vocab = build_vocab(trees)
    forest = batchify_forest([encode_tree(t, vocab) for t in trees])
    return len(vocab), [nd.array(getattr(forest, n)) for n in ("tokens", "left", "right",
                                                              "roots")]


def _run(net, inputs):
    for p in net.collect_params().values():
        p.zero_grad()
    with autograd.record():
        out = net(*inputs)
        loss = (out * out).sum()
    loss.backward()
    return out.asnumpy(), {k: p.grad().asnumpy().copy() for k, p in
                           net.collect_params().items()}


def _batched_vs_eager(combine, **forest):
    vocab_size, inputs = _forest_inputs(**forest)
    mx.random.seed(1)
    net = Fold(combine, vocab_size)
    net.initialize()
    return _batched_equals_eager(net, inputs)


def _batched_equals_eager(net, inputs):
    """Run ``net`` eagerly, then hybridized with the batching executor: values and gradients
    must agree. Returns the "runs unbatched" warnings of the hybridized run."""
    expected, expected_grads = _run(net, inputs)
    net.hybridize()
    previous = gluon_cf.get_executor()
    gluon_cf.set_executor("batched")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got, grads = _run(net, inputs)
    finally:
        gluon_cf.set_executor(previous)
    np.testing.assert_allclose(got, expected, **TOL)
    for k in expected_grads:
        np.testing.assert_allclose(grads[k], expected_grads[k], err_msg=k, **TOL)
    return [w for w in caught if "runs unbatched" in str(w.message)]


@pytest.mark.parametrize("name", sorted(MIXING))
def test_row_mixing_body_runs_row_by_row_and_equals_eager(name):
    warned = _batched_vs_eager(MIXING[name])
    assert len(warned) == 1, [str(w.message) for w in warned]
    message = str(warned[0].message)
    assert "recursive function 'node' runs unbatched, row by row" in message
    # The warning points at the user's line (this file), not into gluon_cf or MXNet.
    assert warned[0].filename == __file__, warned[0].filename
    assert re.search(r"at %s:\d+" % re.escape(__file__), message), message


@pytest.mark.parametrize("name", sorted(ROWWISE))
def test_row_wise_body_runs_batched_and_equals_eager(name):
    assert _batched_vs_eager(ROWWISE[name]) == []


def test_reshape_with_constant_rows_names_the_fix():
    warned = _batched_vs_eager(lambda F, lh, rh, w: F.reshape(_step(F, lh, rh, w), (1, H)))
    assert len(warned) == 1
    assert "x.reshape((0, -1))" in str(warned[0].message)


COUNT = [0]


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(body=st.sampled_from(sorted(MIXING) + sorted(ROWWISE)), seed=st.integers(0, 10 ** 6),
       num_trees=st.integers(1, 6), shape=st.sampled_from(["sst", "balanced", "linear"]))
def test_random_forests_and_bodies_batched_equal_eager(body, seed, num_trees, shape):
    """Property (issue 10, item 11): on any forest, a row-wise body runs batched and a
    row-mixing one row by row, and both equal eager recursion, values and gradients."""
    combine = MIXING.get(body) or ROWWISE[body]
    warned = _batched_vs_eager(combine, seed=seed, num_trees=num_trees, shape=shape)
    if body in ROWWISE:
        assert warned == []
    COUNT[0] += 1


def test_report_examples_run():
    print("hypothesis examples run (batched vs eager):", COUNT[0])
    assert COUNT[0] > 0


class ScaledFold(gluon.HybridBlock):
    """Children get a constant built beside batched values as an argument:
    ``node(idx, scale)`` calls ``node(child, F.ones((1, 1)) * 0.5)``."""

    def __init__(self, vocab_size, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.embed = gluon.nn.Embedding(vocab_size, H)
            self.w = self.params.get("w", shape=(2 * H, H), init=mx.init.Uniform(0.5))

    def hybrid_forward(self, F, tokens, left, right, roots, w):
        @gluon_cf.recursive
        def node(idx, scale):
            def internal():
                half = F.ones((1, 1)) * 0.5          # shared, in the segment of batched takes
                lh = node(F.take(left, idx), half)
                rh = node(F.take(right, idx), half)
                return F.broadcast_mul(_step(F, lh, rh, w), scale)

            return gluon_cf.cond(F.take(left, idx) < 0,
                                 lambda: F.broadcast_mul(F.tanh(self.embed(F.take(tokens, idx))),
                                                         scale), internal)

        out, _ = gluon_cf.foreach(lambda root, _: (node(root, F.ones((1, 1))), []), roots, [])
        return F.reshape(out, (-3, 0))


def test_constant_beside_batched_values_stays_shared_and_equals_eager():
    """A constant built in the same segment as batched values and passed to a recursive call
    is shared, not batched: flagged batched, it was concatenated once per request, so a batch
    held fewer rows of it than invocations. Batched must equal eager, values and gradients."""
    vocab_size, inputs = _forest_inputs(seed=7, num_trees=6)
    net = ScaledFold(vocab_size)
    net.initialize()
    _batched_equals_eager(net, inputs)


def test_row_check_key_ignores_rows_of_take_tables_only():
    """A forest's tokens/child arrays change length every batch; they are used only as take
    tables, so the verdict is reused. A shared input used any other way keeps its rows in the
    key (a broadcast against the rows depends on its axis 0 being 1)."""
    from gluon_cf.graph import Graph
    idx, table, bias = mx.sym.var("idx"), mx.sym.var("table"), mx.sym.var("bias")
    out = mx.sym.broadcast_add(mx.sym.take(table, idx).reshape((-1, 1)), bias)
    graph = Graph({"json": out.tojson(), "inputs": [0, 1, 2], "num_outputs": 1})
    assert graph.take_tables() == {"table"}

    class Shaped:
        def __init__(self, *shape):
            self.shape = shape

    def key(rows, table_rows, bias_rows):
        values = {"idx": Shaped(rows), "table": Shaped(table_rows),
                  "bias": Shaped(bias_rows, 1)}
        names = graph.input_names
        return graph.row_check_key([values[n] for n in names], [n == "idx" for n in names])

    assert key(3, 10, 1) == key(5, 99, 1)
    assert key(3, 10, 1) != key(3, 10, 4)
    accepted = graph.rows_rejected(*_key_args(graph, 3, 10, 1))
    rejected = graph.rows_rejected(*_key_args(graph, 3, 10, 4))
    assert accepted is None and rejected is not None


def _key_args(graph, rows, table_rows, bias_rows):
    arrays = {"idx": mx.nd.zeros((rows,)), "table": mx.nd.zeros((table_rows,)),
              "bias": mx.nd.zeros((bias_rows, 1))}
    names = graph.input_names
    return [arrays[n] for n in names], [n == "idx" for n in names]


def test_take_tables_seen_through_recursion_and_cond():
    """The forest's arrays reach take only inside a recursive function's cond branches; the
    foreach body that holds the recursion node still sees them as take tables (so a new
    forest reuses the verdict), and the parameters, used otherwise, are not."""
    from gluon_cf.graph import decoded
    from gluon_cf.models.recursive import TreeRNN
    trees = synthetic_treebank(3, seed=2, max_length=6)
    vocab = build_vocab(trees)
    forest = batchify_forest([encode_tree(t, vocab) for t in trees])
    net = TreeRNN(len(vocab), embed_size=4, hidden_size=3, num_classes=2)
    net.initialize()
    net.hybridize()
    net(*[nd.array(getattr(forest, n)) for n in ("tokens", "left", "right", "roots")]).asnumpy()
    bodies = [node.graphs["body"] for (kind, _), node in decoded._SPECS.items()
              if kind == "foreach" and "recursion" in _kinds(node.graphs["body"])
              and any(n.startswith(net.prefix) for n in node.graphs["body"].input_names)]
    assert bodies
    for body in bodies:
        tables = body.take_tables()
        names = body.input_names
        assert sum(1 for n in names if n in tables) == 3, (names, tables)
        assert not any("weight" in n or "bias" in n for n in tables), tables


def _kinds(graph):
    import json
    from gluon_cf import registry
    return [registry.kind_of(n) for n in json.loads(graph.symbol.tojson())["nodes"]]
