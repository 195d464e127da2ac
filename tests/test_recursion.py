"""Recursive models: hybridized output and gradients equal an eager Python-recursion reference."""
import numpy as np
import pytest
import mxnet as mx
from mxnet import autograd, gluon, nd

import gluon_cf
from gluon_cf import executor as executor_module
from gluon_cf.data.trees import (batchify_forest, build_vocab, encode_tree, parse_tree,
                                 synthetic_treebank)
from gluon_cf.models import reference
from gluon_cf.models.recursive import ChildSumTreeLSTM, RNTN, TopDownTreeLSTM, TreeLSTM, TreeRNN

TOL = dict(rtol=1e-5, atol=1e-5)


# Eager tests: no executor plays a part in them (eager recursion runs in Python, NOTE [eager
# recursion stack]), so they run under the batched executor only, where the fixture checks that
# no part of gluon_cf consulted the executor (whose mode or schedule choice it would have read).
_EAGER_TESTS = ("test_childsum_eager_tape_is_one_cached_op_per_node",)


@pytest.fixture(params=["batched", "dynamic", "unbatched"], autouse=True)
def executor(request, monkeypatch):
    """Every test runs with every executor of recursive functions (the batching one with and
    without ahead-of-time schedules); all must equal eager. An eager test (``hybridize``
    False) runs once, and must not consult the executor."""
    params = getattr(request.node, "callspec", None)
    eager = request.node.originalname in _EAGER_TESTS or (
        params is not None and params.params.get("hybridize") is False)
    if eager and request.param != "batched":
        pytest.skip("eager: the executor plays no part (the batched run checks it is not read)")
    consulted = []
    if eager:
        for name in ("get_executor", "ahead_of_time", "run_node"):
            original = getattr(executor_module, name)
            monkeypatch.setattr(executor_module, name, lambda *a, _n=name, _f=original:
                                consulted.append(_n) or _f(*a))
    previous = gluon_cf.get_executor()
    if request.param == "dynamic":
        gluon_cf.set_executor("batched", ahead_of_time=False)
    else:
        gluon_cf.set_executor(request.param)
    yield request.param
    gluon_cf.set_executor(previous)
    assert not consulted, "an eager test consulted the executor (%s): run it under every " \
        "executor (_EAGER_TESTS, the skip above)" % sorted(set(consulted))


def _forest(num_trees=4, seed=0, shape="sst", binary=True, extra=()):
    trees = synthetic_treebank(num_trees, shape=shape, seed=seed, max_length=12)
    trees = list(trees) + [parse_tree(s) for s in extra]
    vocab = build_vocab(trees)
    encoded = [encode_tree(t, vocab, binary=binary) for t in trees]
    return vocab, encoded, batchify_forest(encoded)


def _arrays(forest, names):
    return [nd.array(getattr(forest, n)) for n in names]


def _grads(net):
    return {k: v.grad().asnumpy().copy() for k, v in net.collect_params().items()
            if v.grad_req != "null"}


def _forward_only(net, inputs):
    net.hybridize()
    out = net(*inputs)
    return [o.asnumpy() for o in (out if isinstance(out, (list, tuple)) else [out])]


def _run(net, inputs, hybridize):
    if hybridize:
        net.hybridize()
    with autograd.record():
        out = net(*inputs)
        out = out if isinstance(out, (list, tuple)) else [out]
        loss = sum((o * o).sum() for o in out)
    loss.backward()
    return [o.asnumpy() for o in out], _grads(net)


def _reference_loss(net, encoded, fold):
    """Root logits of every tree by the eager reference, and the same loss as `_run`."""
    with autograd.record():
        logits = [net.out(fold(net.embed, net.cell, t)) for t in encoded]
        loss = sum((l * l).sum() for l in logits)
    loss.backward()
    return np.concatenate([l.asnumpy() for l in logits]), _grads(net)


@pytest.mark.parametrize("model, fold", [
    (TreeLSTM, lambda e, c, t: reference.treelstm_eager(e, c, t)[0]),
    (TreeRNN, reference.treernn_eager),
    (RNTN, reference.rntn_eager),
])
@pytest.mark.parametrize("hybridize", [False, True])
def test_binary_models_match_reference(model, fold, hybridize):
    vocab, encoded, forest = _forest(extra=["(1 good)"])   # a single-node tree too
    mx.random.seed(0)
    net = model(len(vocab), embed_size=6, hidden_size=5, num_classes=3)
    net.initialize(mx.init.Xavier())
    inputs = _arrays(forest, ["tokens", "left", "right", "roots"])
    expected, expected_grads = _reference_loss(net, encoded, fold)
    (got,), grads = _run(net, inputs, hybridize)
    np.testing.assert_allclose(got, expected, **TOL)
    for name in expected_grads:
        np.testing.assert_allclose(grads[name], expected_grads[name], err_msg=name, **TOL)


def _eager_binary_case(model, executor, extra_tree):
    """The forest (with ``extra_tree``), an initialized ``model`` and its input arrays, for
    the eager tests (skipped but once: eagerly the executor plays no part)."""
    if executor != "batched":
        pytest.skip("eager: the executor plays no part")
    vocab, encoded, forest = _forest(extra=[extra_tree])
    net = model(len(vocab), embed_size=6, hidden_size=5, num_classes=3)
    net.initialize(mx.init.Xavier())
    return forest, net, _arrays(forest, ["tokens", "left", "right", "roots"])


@pytest.mark.parametrize("model", [TreeLSTM, TreeRNN, RNTN])
def test_binary_models_eager_tape_is_one_cached_op_per_cell_call(model, executor):
    """Eagerly, each internal node is one ``_CachedOp`` on the tape, and all leaves of the
    forest, embeddings included, are one more, split into rows by a ``split`` per state
    (``SliceChannel``; NOTE [eager cells]), not their operators one by one; values and
    gradients are checked against the reference by test_binary_models_match_reference."""
    import json
    forest, net, inputs = _eager_binary_case(model, executor, "(1 good)")
    with autograd.record():
        loss = net(*inputs).sum()
    ops = [n["op"] for n in json.loads(autograd.get_symbol(loss).tojson())["nodes"]]
    internal = int((forest.left >= 0).sum())
    lone_leaves = int((forest.left[forest.roots.astype(int)] < 0).sum())
    assert lone_leaves and ops.count("_CachedOp") == internal + 1
    assert ops.count("SliceChannel") == net.cell.num_states   # h (and c)
    assert set(ops) == {"null", "_CachedOp", "SliceChannel", "stack", "Reshape",
                        "FullyConnected", "sum"}


@pytest.mark.parametrize("model", [TreeLSTM, TreeRNN, RNTN])
def test_binary_models_eager_read_a_childs_row_without_waiting(model, executor, monkeypatch):
    """Eagerly, a child's row is the one its parent read on the host: the child's index is
    not read back from MXNet (``asscalar`` waits for MXNet's engine, ~150 us a node), only
    the forest's ``left``/``right`` once and each root's index; values are checked by
    test_binary_models_match_reference."""
    forest, net, inputs = _eager_binary_case(model, executor,
                                             "(1 (2 (3 (1 a) (2 b)) (0 c)) (4 d))")
    mx.nd.waitall()
    reads = []
    asnumpy = mx.nd.NDArray.asnumpy
    monkeypatch.setattr(mx.nd.NDArray, "asnumpy", lambda self: reads.append(1) or asnumpy(self))
    with autograd.record():
        net(*inputs)
    internal = int((forest.left >= 0).sum())
    assert len(reads) == 2 + len(forest.roots) < internal, (len(reads), internal)


def _childsum_case():
    """A ChildSumTreeLSTM and a forest with 1-, 2-, 3- and 4-child nodes."""
    vocab, encoded, forest = _forest(binary=False, extra=[
        "(2 (1 a) (3 b) (2 c) (4 d))", "(3 (2 (1 x) (1 y) (0 z)) (4 w))", "(0 lone)"])
    mx.random.seed(1)
    net = ChildSumTreeLSTM(len(vocab), embed_size=6, hidden_size=5, num_classes=3,
                           max_children=8)
    net.initialize(mx.init.Xavier())
    inputs = _arrays(forest, ["tokens", "child_ptr", "child_idx", "roots"])
    return net, encoded, inputs


@pytest.mark.parametrize("hybridize", [False, True])
def test_childsum_matches_reference(hybridize):
    net, encoded, inputs = _childsum_case()
    expected, expected_grads = _reference_loss(
        net, encoded, lambda e, c, t: reference.childsum_eager(e, c, t)[0])
    (got,), grads = _run(net, inputs, hybridize)
    np.testing.assert_allclose(got, expected, **TOL)
    for name in expected_grads:
        np.testing.assert_allclose(grads[name], expected_grads[name], err_msg=name, **TOL)


def _topdown_reference(net, z):
    totals, counts, shapes = [], [], []
    with autograd.record():
        for row in range(z.shape[0]):
            h0, c0 = net.root_state(nd, z[row:row + 1])
            total, count, shape = reference.topdown_eager(net.cell, h0, c0, net.max_depth)
            totals.append(total)
            counts.append(count)
            shapes.append(shape)
        loss = sum((t * t).sum() for t in totals) + 0 * sum(counts)
    loss.backward()
    return np.concatenate([t.asnumpy() for t in totals]), counts, shapes, _grads(net)


@pytest.mark.parametrize("hybridize", [False, True])
def test_topdown_generator_matches_reference_and_shapes_differ(hybridize):
    mx.random.seed(3)
    net = TopDownTreeLSTM(input_size=4, hidden_size=6, max_depth=4)
    net.initialize(mx.init.Xavier())
    z = nd.random.normal(0, 3, shape=(6, 4))
    expected, counts, shapes, expected_grads = _topdown_reference(net, z)
    (got, got_counts), grads = _run(net, [z], hybridize)
    np.testing.assert_allclose(got, expected, **TOL)
    np.testing.assert_array_equal(got_counts[:, 0], counts)
    assert len(set(counts)) > 1, "the generator should grow different trees for different rows"
    for name in expected_grads:
        np.testing.assert_allclose(grads[name], expected_grads[name], err_msg=name, **TOL)


@pytest.mark.parametrize("piece_bytes", [None, 600])
@pytest.mark.parametrize("seed, bias", [(1, 0.1), (0, 0.2)])   # (0, 0.2): max_depth binds
def test_topdown_eager_equals_its_cells_operator_by_operator(executor, seed, bias,
                                                            piece_bytes, monkeypatch):
    """NOTE [eager top-down tree]: the eager model grows both children of a node as one
    two-row LSTM step on gates precomputed per tree and adds the biases of the outputs and
    logits once; its totals, node counts and the gradients of every parameter and of ``z``
    equal the cell's own blocks called node by node (``reference.topdown_eager``) to 1e-5,
    for 8 rows of trees up to max_depth 6 (H = 5, O = 3; 1 to 127 nodes). With pieces of
    600 bytes (3 heads of 2 x 24 float32) the heads are summed in up to 22 pieces, and no
    ``concat`` is larger than a piece."""
    if executor != "batched":
        pytest.skip("eager: the executor of hybridized recursion plays no part")
    from gluon_cf.models import recursive as recursive_models
    largest_concat = [0]
    if piece_bytes is not None:
        monkeypatch.setattr(recursive_models, "_HEADS_PIECE_BYTES", piece_bytes)
        concat = nd.concat

        def measured_concat(*args, **kwargs):
            out = concat(*args, **kwargs)
            largest_concat[0] = max(largest_concat[0], out.size * np.dtype(out.dtype).itemsize)
            return out
        monkeypatch.setattr(nd, "concat", measured_concat)
    mx.random.seed(seed)
    net = TopDownTreeLSTM(input_size=3, hidden_size=5, output_size=3, max_depth=6)
    net.initialize(mx.init.Xavier())
    net.cell.expand_logit.bias.set_data(nd.array([bias]))   # trees of many shapes
    z = nd.random.normal(0, 2, shape=(8, 3))
    z.attach_grad()
    expected, counts, _, expected_grads = _topdown_reference(net, z)
    expected_z_grad = z.grad.asnumpy().copy()
    largest_concat[0] = 0   # (the model's, not the reference's)
    (got, got_counts), grads = _run(net, [z], hybridize=False)
    np.testing.assert_array_equal(got_counts[:, 0], counts)
    assert len(set(counts)) > 1 and max(counts) > 20, counts
    if piece_bytes is not None:
        assert 0 < largest_concat[0] <= piece_bytes, largest_concat
    np.testing.assert_allclose(got, expected, **TOL)
    # float32 sums of per-node terms in another order: 1e-5 of each gradient's largest value
    for name, want in list(expected_grads.items()) + [("z", expected_z_grad)]:
        have = z.grad.asnumpy() if name == "z" else grads[name]
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5 * max(1, abs(want).max()),
                                   err_msg=name)


class _HalfRoot(TopDownTreeLSTM):
    """A user's model: its own root state (h0 / 2, c0 = 0.3)."""

    def root_state(self, F, z_row):
        h0 = self.init(z_row)
        return h0 * 0.5, F.ones_like(h0) * 0.3


def test_topdown_eager_keeps_a_users_root_state_blocks_and_trainer(executor):
    """The fused eager TopDownTreeLSTM (NOTE [eager top-down tree]) still (1) takes a
    subclass's ``root_state``, (2) calls a block the user swapped into the cell after a first
    call (a ReLU output, then another plain Dense) instead of the graphs fused from the old
    ones, and (3) lets a Trainer step: the expansion bias, whose gradient is zero, was read on
    the host only, its gradient stale (MXNet's Trainer raises), and weight decay moves it as
    hybridized. Each against ``reference.topdown_eager`` (the cell's blocks node by node)."""
    if executor != "batched":
        pytest.skip("eager: the executor of hybridized recursion plays no part")

    def check(net, what):
        z = nd.random.normal(0, 2, shape=(5, 3), ctx=mx.cpu())
        expected, counts, _, expected_grads = _topdown_reference(net, z)
        (got, got_counts), grads = _run(net, [z], hybridize=False)
        np.testing.assert_array_equal(got_counts[:, 0], counts, err_msg=what)
        np.testing.assert_allclose(got, expected, err_msg=what, **TOL)
        for name, want in expected_grads.items():
            np.testing.assert_allclose(grads[name], want, rtol=1e-5,
                                       atol=1e-5 * max(1, abs(want).max()),
                                       err_msg="%s: %s" % (what, name))

    def model(cls):
        mx.random.seed(1)
        net = cls(input_size=3, hidden_size=5, output_size=3, max_depth=5)
        net.initialize(mx.init.Xavier())
        net.cell.expand_logit.bias.set_data(nd.array([0.2]))
        return net

    check(model(_HalfRoot), "root_state")
    net = model(TopDownTreeLSTM)
    check(net, "fused")
    net.cell.output = gluon.nn.Dense(3, in_units=5, activation="relu", flatten=False)
    net.cell.output.initialize(mx.init.Uniform(1))
    check(net, "a ReLU output swapped in")
    net.cell.output = gluon.nn.Dense(3, in_units=5, flatten=False)
    net.cell.output.initialize(mx.init.Uniform(1))
    check(net, "a Dense output swapped in")
    biases = []
    for hybridize in (False, True):
        net = model(TopDownTreeLSTM)
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 1e-3, "wd": 0.5})
        _run(net, [nd.ones((2, 3))], hybridize)
        trainer.step(1)
        biases.append(net.cell.expand_logit.bias.data().asscalar())
    assert biases[0] == pytest.approx(biases[1]) and biases[0] < 0.2, biases


def test_childsum_hybridized_inference_matches_reference():
    net, encoded, inputs = _childsum_case()
    expected, _ = _reference_loss(net, encoded,
                                  lambda e, c, t: reference.childsum_eager(e, c, t)[0])
    np.testing.assert_allclose(_forward_only(net, inputs)[0], expected, **TOL)


def test_topdown_hybridized_inference_matches_reference():
    mx.random.seed(3)
    net = TopDownTreeLSTM(input_size=4, hidden_size=6, max_depth=4)
    net.initialize(mx.init.Xavier())
    z = nd.random.normal(0, 3, shape=(6, 4))
    expected, counts, shapes, _ = _topdown_reference(net, z)
    got, got_counts = _forward_only(net, [z])
    np.testing.assert_allclose(got, expected, **TOL)
    np.testing.assert_array_equal(got_counts[:, 0], counts)
    assert len(set(counts)) > 1


_LINEAR_REFERENCE = {}


def test_linear_tree_of_5000_nodes_hybridized():
    """A left-branching tree of 5,001 nodes (2,500 levels), hybridized with gradients, under
    every executor, against the eager reference. The reference folds the tree in plain Python
    recursion and plays no part of the executor: it is computed once, for the first executor,
    and reused (it took a third of each run)."""
    words = ["w%d" % (i % 7) for i in range(2501)]
    s = "(2 %s)" % words[0]
    for w in words[1:]:
        s = "(2 %s (2 %s))" % (s, w)
    tree = parse_tree(s)
    vocab = build_vocab([tree])
    enc = encode_tree(tree, vocab)
    assert enc.num_nodes >= 5000
    forest = batchify_forest([enc])
    mx.random.seed(0)
    net = TreeRNN(len(vocab), embed_size=4, hidden_size=4, num_classes=2)
    net.initialize(mx.init.Xavier())
    first = next(iter(net.cell.combine.collect_params()))   # combine's weight
    weights = {k[len(net.prefix):]: v.data().asnumpy() for k, v in net.collect_params().items()}
    if not _LINEAR_REFERENCE:
        expected, expected_grads = _reference_loss(net, [enc], reference.treernn_eager)
        _LINEAR_REFERENCE.update(weights=weights, expected=expected,
                                 grad=expected_grads[first],
                                 name=first[len(net.prefix):])
    cached = _LINEAR_REFERENCE   # same seed, same weights: the reference applies
    for name, value in weights.items():
        np.testing.assert_array_equal(value, cached["weights"][name], err_msg=name)
    (got,), grads = _run(net, _arrays(forest, ["tokens", "left", "right", "roots"]), True)
    np.testing.assert_allclose(got, cached["expected"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grads[first], cached["grad"], rtol=1e-3, atol=1e-5)
    assert first[len(net.prefix):] == cached["name"] == "cell_combine_proj_weight", first


# ---- issue 24, item 7: a hard bound never drops data ------------------------------------------

def _wide_case(children):
    """A root with ``children`` leaf children, and a ChildSumTreeLSTM bounded at 3 children."""
    tree = parse_tree("(2 %s)" % " ".join("(1 w%d)" % k for k in range(children)))
    vocab = build_vocab([tree])
    encoded = encode_tree(tree, vocab, binary=False)
    mx.random.seed(2)
    net = ChildSumTreeLSTM(len(vocab), embed_size=4, hidden_size=3, num_classes=2,
                           max_children=3)
    net.initialize(mx.init.Xavier())
    return net, encoded, _arrays(batchify_forest([encoded]),
                                 ["tokens", "child_ptr", "child_idx", "roots"])


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("children", [4, 7])
def test_childsum_refuses_more_children_than_max_children(children, hybridize):
    """Children past max_children were dropped silently (3, 4 and 7 children gave one output):
    now a ValueError names the node, its child count and the bound, eager and hybridized."""
    net, _, inputs = _wide_case(children)
    if hybridize:
        net.hybridize()
    with pytest.raises(ValueError, match=r"^ChildSumTreeLSTM: node \d+ has %d children, more than "
                       r"max_children=3: .* build the model with max_children >= %d$"
                       % (children, children)):
        net(*inputs)


@pytest.mark.parametrize("hybridize", [False, True])
def test_childsum_at_its_bound_matches_reference(hybridize):
    net, encoded, inputs = _wide_case(3)
    expected, expected_grads = _reference_loss(
        net, [encoded], lambda e, c, t: reference.childsum_eager(e, c, t)[0])
    (got,), grads = _run(net, inputs, hybridize)
    np.testing.assert_allclose(got, expected, **TOL)
    for name in expected_grads:
        np.testing.assert_allclose(grads[name], expected_grads[name], err_msg=name, **TOL)


def test_childsum_eager_tape_is_one_cached_op_per_node():
    """Issue 24, item 7: eagerly, the tape holds one node per tree node, a ``_CachedOp`` for
    its whole cell, and one ``Embedding`` of all tokens split into rows (NOTE [eager cells];
    25, later 17, then 2 operators a node, then one with its embedding); values and
    gradients stay those of the reference."""
    import json
    net, encoded, inputs = _childsum_case()
    nodes = len(inputs[1]) - 1
    with autograd.record():
        out = net(*inputs)
        loss = (out * out).sum()
    ops = [n["op"] for n in json.loads(autograd.get_symbol(loss).tojson())["nodes"]]
    loss.backward()
    got, grads = out.asnumpy(), _grads(net)
    assert ops.count("_CachedOp") == nodes
    # the rest: the roots' stack and reshape, the classifier and the loss; and the inputs
    assert set(ops) == {"null", "_CachedOp", "Embedding", "SliceChannel", "stack", "Reshape",
                        "FullyConnected", "broadcast_mul", "sum"}
    assert len(ops) - ops.count("null") == nodes + 7
    expected, expected_grads = _reference_loss(
        net, encoded, lambda e, c, t: reference.childsum_eager(e, c, t)[0])
    np.testing.assert_allclose(got, expected, **TOL)
    for name in expected_grads:
        np.testing.assert_allclose(grads[name], expected_grads[name], err_msg=name, **TOL)


def _random_nary_tree(draw_children, depth=0):
    """An s-expression whose nodes have ``draw_children(depth)`` children (0: a word)."""
    n = draw_children(depth)
    if not n:
        return "(1 w%d)" % draw_children(99)
    return "(2 %s)" % " ".join(_random_nary_tree(draw_children, depth + 1) for _ in range(n))


def test_childsum_eager_equals_hybridized_on_random_trees(executor):
    """Eagerly every node is one CachedOp of its number of children (``cell.node``), hybridized
    a ``while_loop`` over them: on random forests of nodes with 0 to 5 children, outputs and
    gradients agree (and with the reference, which folds each tree in Python)."""
    from hypothesis import HealthCheck, Phase, given, settings, strategies as st
    if executor == "dynamic":
        pytest.skip("the batched executor's two schedules: one is enough here")

    @settings(max_examples=6, deadline=None, derandomize=True,
              phases=[Phase.explicit, Phase.generate],    # a failure is reported as drawn
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.data())
    def check(data):
        def draw_children(depth):
            # a root has children: a forest of single words has no child_idx (shape (0,)),
            # which a hybridized graph cannot take
            low, high = (1, 5) if depth == 0 else (0, 5) if depth < 3 else (0, 0)
            return data.draw(st.integers(low, high) if depth < 99 else st.integers(0, 8))
        trees = [parse_tree(_random_nary_tree(draw_children))
                 for _ in range(data.draw(st.integers(1, 3)))]
        vocab = build_vocab(trees)
        encoded = [encode_tree(t, vocab, binary=False) for t in trees]
        inputs = _arrays(batchify_forest(encoded), ["tokens", "child_ptr", "child_idx", "roots"])
        child_counts.update(np.diff(inputs[1].asnumpy()).astype(int).tolist())
        mx.random.seed(4)
        net = ChildSumTreeLSTM(len(vocab), embed_size=4, hidden_size=3, num_classes=2,
                               max_children=5)
        net.initialize(mx.init.Xavier())
        for name, param in net.collect_params().items():
            if name.endswith("bias"):
                param.set_data(nd.random.uniform(-0.5, 0.5, shape=param.shape))
        expected, expected_grads = _reference_loss(
            net, encoded, lambda e, c, t: reference.childsum_eager(e, c, t)[0])
        for hybridize in (False, True):
            (got,), grads = _run(net, inputs, hybridize)
            np.testing.assert_allclose(got, expected, **TOL)
            for name in expected_grads:
                np.testing.assert_allclose(grads[name], expected_grads[name], err_msg=name,
                                           **TOL)

    child_counts: set = set()
    check()
    assert child_counts == {0, 1, 2, 3, 4, 5}


def test_childsum_inside_a_hybridized_parent_warns_at_its_bound():
    """Inside another block's graph no check sees the values: the loop over the children
    warns (TruncationWarning) when it stops at max_children with children left."""
    net, _, inputs = _wide_case(5)

    class Parent(gluon.HybridBlock):
        def __init__(self, child):
            super().__init__()
            self.child = child

        def hybrid_forward(self, F, *args):
            return self.child(*args) * 1.0

    parent = Parent(net)
    parent.hybridize()
    with pytest.warns(gluon_cf.TruncationWarning, match=r"ChildSumTreeLSTM\(max_children=3\): "
                      r"this loop stopped at its bound of 3 iterations .* steps \(a node has "
                      r"more children than max_children"):
        parent(*inputs).asnumpy()
