"""Two changes to an inference batch on an ahead-of-time schedule (issue 28, session 24).

* Sized group calls without ``BlockGrad`` (NOTE [sized calls without BlockGrad] in
  gluon_cf/recursion/value_graphs.py): every ``BlockGrad`` that is not an output is skipped, its
  consumers reading its input; outputs equal eager ones, and recorded calls keep them
  (gradients equal eager ones).
* The first group before the layout (NOTE [the first group before the layout] in
  gluon_cf/recursion/first_group.py): outputs equal those of the group run in the loop, bit for
  bit, and eager ones; a first group found wrongly is run again by the loop."""
import json

import mxnet as mx
import numpy as np
from mxnet import nd

import gluon_cf
from gluon_cf.data.trees import synthetic_treebank
from gluon_cf.models import TreeRNN
from gluon_cf.recursion import first_group, schedule, value_graphs
from test_schedule import _assert_same, _forest, _run
from test_schedule_sizes import _FarLeaves, _nan_tables, fresh_plans  # noqa: F401
from test_schedule_tables import _forest_in


class _StoppedRight(_FarLeaves):
    """TreeRNN-like (``_FarLeaves``' parameters), with ``stop_gradient`` inside the body (the
    right child's term) and as a leaf's output: a recorded call that skipped it would give
    ``b`` and the embedding other gradients than eager's."""

    def __init__(self, vocab_size):
        super().__init__(vocab_size, "clip")

    def hybrid_forward(self, F, tokens, left, right, roots):
        return stopped_right_fold(
            F, self, lambda idx: F.stop_gradient(F.tanh(self.embed(F.take(tokens, idx)))),
            left, right, roots)


def stopped_right_fold(F, block, leaf, left, right, roots):
    """The roots' states of a tree fold (recursive function ``node``) whose leaves are
    ``leaf(idx)`` and whose nodes are ``tanh(a(left) + BlockGrad(b(right)))``, ``a`` and ``b``
    the layers of ``block``."""
    @gluon_cf.recursive
    def node(idx):
        def internal():
            return F.tanh(block.a(node(F.take(left, idx)))
                          + F.BlockGrad(block.b(node(F.take(right, idx)))))

        return gluon_cf.cond(F.take(left, idx) < 0, lambda: leaf(idx), internal)

    h, _ = gluon_cf.foreach(lambda root, _: (node(root), []), roots, [])
    return h


def _sized_symbols(monkeypatch):
    """The symbols of the CachedOps made with static shapes (the sized calls), as JSON."""
    made = []
    original = mx.nd.CachedOp

    def capturing(sym, flags=(), *args, **kwargs):
        if ("static_shape", True) in list(flags):
            made.append(json.loads(sym.tojson()))
        return original(sym, flags, *args, **kwargs)

    monkeypatch.setattr(value_graphs.mx.nd, "CachedOp", capturing)
    return made


def _skipped_kept(js):
    """(BlockGrad nodes that are not outputs, BlockGrad nodes that are) of graph JSON ``js``."""
    heads = {h[0] for h in js["heads"]}
    blocked = [nid for nid, n in enumerate(js["nodes"]) if n["op"] == "BlockGrad"]
    return [n for n in blocked if n not in heads], [n for n in blocked if n in heads]


def test_sized_calls_skip_block_grad_and_equal_eager(monkeypatch):
    """Forests of 3 to 30 trees in sequence, each twice (a graph reading the forest's arrays
    runs sized when they keep their shapes: groups of 1 to ~300 rows), the tables starting
    as NaN: outputs equal eager ones; every sized CachedOp holds no ``BlockGrad`` but the
    leaves' output (the index inputs' and the body's own are skipped)."""
    sizes = (3, 3, 30, 30, 7, 7, 22, 22)
    forests = [list(synthetic_treebank(n, shape="sst", seed=10 + n + k, max_length=16))
               for k, n in enumerate(sizes)]
    vocab, _ = _forest([tree for trees in forests for tree in trees])
    inputs = [_forest_in(trees, vocab) for trees in forests]
    mx.random.seed(3)
    net = _StoppedRight(len(vocab))
    net.initialize(mx.init.Uniform(0.5))
    eager = [_run(net, x, None, train=False) for x in inputs]
    _nan_tables(monkeypatch)
    sized = _sized_symbols(monkeypatch)
    for got, want in zip(_scheduled(net, inputs), eager):
        assert not np.isnan(got).any()
        _assert_same(([got], {}), want)
    assert sized, "no group ran sized"
    ops = [{n["op"] for n in js["nodes"]} for js in sized]
    assert any("Embedding" in o for o in ops) and any("FullyConnected" in o for o in ops)
    assert all(not _skipped_kept(js)[0] for js in sized), [_skipped_kept(js) for js in sized]
    assert any(_skipped_kept(js)[1] for js in sized)   # the leaves' output stays


def test_recorded_calls_keep_block_grad():
    """Training on a schedule (recorded group calls, planned backward): the loss's gradients
    equal eager ones, ``b`` and the embedding getting none through the stopped terms."""
    trees = list(synthetic_treebank(9, shape="sst", seed=4, max_length=14))
    vocab, inputs = _forest(trees)
    mx.random.seed(5)
    net = _StoppedRight(len(vocab))
    net.initialize(mx.init.Uniform(0.5))
    eager = _run(net, inputs, None)
    runs = schedule.RUNS["node"]
    scheduled = _run(net, inputs, "batched")
    assert schedule.RUNS["node"] > runs, schedule.report()
    _assert_same(scheduled, eager)
    for name, grad in eager[1].items():
        if name.endswith(("b_weight", "b_bias", "embedding0_weight")):
            assert not grad.any(), name


def test_without_block_grad_computes_the_same():
    """``_without_block_grad``: chained ``BlockGrad`` s and one of a variable are skipped, one
    that is an output stays; the inputs are those of the original, in its order, and a call
    of each on the same arrays gives the same outputs."""
    x, y, z = mx.sym.var("arg0"), mx.sym.var("c0_idx0"), mx.sym.var("env1")
    inner = mx.sym.BlockGrad(mx.sym.BlockGrad(x * 2))
    picked = mx.sym.take(z, mx.sym.BlockGrad(y), mode="clip")
    out = mx.sym.Group([inner + picked, mx.sym.BlockGrad(picked * 3)])
    stripped = value_graphs._without_block_grad(out)
    assert stripped.list_inputs() == out.list_inputs()
    assert _skipped_kept(json.loads(stripped.tojson())) == ([], [7])
    shapes = {"arg0": (4, 3), "c0_idx0": (4,), "env1": (6, 3)}
    rng = np.random.RandomState(0)
    arrays = [nd.array(rng.uniform(-1, 1, shapes[n]) if n != "c0_idx0" else [5, 0, 2, 9])
              for n in out.list_inputs()]
    for want, got in zip(mx.nd.CachedOp(out)(*arrays), mx.nd.CachedOp(stripped)(*arrays)):
        np.testing.assert_array_equal(got.asnumpy(), want.asnumpy())
    plain = x * 2 + 1
    assert value_graphs._without_block_grad(plain) is plain


def _treernn_forests():
    """A TreeRNN and forests of 2 to 40 SST-like trees, most sizes twice in a row (a sized
    call needs the forest's arrays to keep their shapes; 40 trees have more leaves than
    ``schedule.PADDED_ROWS``), with their eager outputs."""
    sizes = (2, 2, 25, 25, 40, 6, 6, 17, 17)
    forests = [list(synthetic_treebank(n, shape="sst", seed=30 + k, max_length=16))
               for k, n in enumerate(sizes)]
    vocab, _ = _forest([tree for trees in forests for tree in trees])
    inputs = [_forest_in(trees, vocab) for trees in forests]
    mx.random.seed(6)
    net = TreeRNN(len(vocab), embed_size=5, hidden_size=4, num_classes=3)
    net.initialize(mx.init.Uniform(0.5))
    return net, inputs, [_run(net, x, None, train=False) for x in inputs]


def _scheduled(net, inputs):
    gluon_cf.set_executor("batched")
    net.hybridize()
    runs = schedule.RUNS["node"]
    outputs = [net(*x).asnumpy() for x in inputs]
    assert schedule.RUNS["node"] == runs + len(inputs), schedule.report()
    return outputs


def test_first_group_before_the_layout_equals_the_loop_and_eager(monkeypatch):
    """With the tables starting as NaN: the leaves' group pushed before the layout, sized or
    unpadded (the first forest of a size, more than 512 leaves), gives the outputs of the
    group run in the loop, bit for bit, and eager ones."""
    net, inputs, eager = _treernn_forests()
    _nan_tables(monkeypatch)
    pushed = first_group.PUSHED[0]
    early = _scheduled(net, inputs)
    assert first_group.PUSHED[0] == pushed + len(inputs)
    monkeypatch.setattr(first_group, "EARLY", [False])
    pushed = first_group.PUSHED[0]
    in_loop = _scheduled(net, inputs)
    assert first_group.PUSHED[0] == pushed
    for got, loop, want in zip(early, in_loop, eager):
        assert not np.isnan(got).any()
        np.testing.assert_array_equal(got, loop)
        _assert_same(([got], {}), want)


def test_a_first_group_found_wrongly_is_run_again(monkeypatch):
    """A first group of the right function, variant and size but other rows (its ids
    reversed) is pushed, then run again by the loop, which writes the right rows: outputs
    equal eager ones."""
    net, inputs, eager = _treernn_forests()
    _nan_tables(monkeypatch)
    found = first_group.find

    def reversed_rows(plan, variants, children):
        q, vid, ids = found(plan, variants, children)
        return q, vid, ids[::-1].copy()

    monkeypatch.setattr(first_group, "find", reversed_rows)
    pushed = first_group.PUSHED[0]
    for got, want in zip(_scheduled(net, inputs), eager):
        _assert_same(([got], {}), want)
    assert first_group.PUSHED[0] > pushed
