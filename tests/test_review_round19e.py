"""Review of the static recorded groups (NOTE [static recorded groups] in
gluon_cf/recursion/planned_backward.py): gradients of planned training runs whose recorded group
calls are static CachedOps equal eager Python recursion's, over sequences of batches that keep
several recorded graphs alive at once (states reused across calls), accumulate into
``grad_req="add"`` buffers, read input gradients and run backward twice; and each operator the
proof stops at hands an input a gradient node of its own in MXNet 1.9.1 (a static CachedOp adds
into a ``grad_req="add"`` buffer through it). No wrong gradient was found: these guard the
fast path's rules. (A group graph's inputs reach its outputs through ``take``, ``Embedding`` or
``broadcast_like``, whose gradients are nodes, so no cell here makes an input get an output's
gradient as is: the proof keeps ``* 1`` for some of them only because it stops at the
operators of ``_GRADIENT_NODE_OPS`` alone.)"""
import json

import hypothesis.strategies as st
import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings
from mxnet import autograd, gluon, nd

import gluon_cf
from gluon_cf.data import batchify_forest, build_vocab, encode_tree
from gluon_cf.data.trees import synthetic_treebank
from gluon_cf.recursion import planned_backward

_CELLS = {   # combine(self, F, left, right): a child's state passed on, or computed from both
    "dense tanh": lambda s, F, l, r: F.tanh(s.cell(F.concat(l, r, dim=-1))),
    "left child as is": lambda s, F, l, r: l,
    "slice of a concat": lambda s, F, l, r: F.slice_axis(F.concat(r, l, dim=-1), axis=-1,
                                                         begin=1, end=4),
    "child plus dense": lambda s, F, l, r: l + F.tanh(s.cell(F.concat(l, r, dim=-1))),
    "sum of tanhs": lambda s, F, l, r: F.tanh(l) + F.tanh(s.cell(F.concat(l, r, dim=-1))),
    "gated": lambda s, F, l, r: F.sigmoid(l) * r + F.sigmoid(r) * l,
    "softrelu": lambda s, F, l, r: F.Activation(s.cell(F.concat(l, r, dim=-1)),
                                                act_type="softrelu") * 0.5,
}


class _Tree(gluon.HybridBlock):
    """Leaves: rows of the float input ``x`` (its gradient asked for); internal nodes: a cell of
    ``_CELLS``, whose Dense also reads the roots outside the recursion (a shared parameter)."""

    def __init__(self, vocab_size, cell, **kwargs):
        super().__init__(**kwargs)
        self.combine, self.vocab_size = _CELLS[cell], vocab_size
        with self.name_scope():
            self.cell = gluon.nn.Dense(3, in_units=6, flatten=False)

    def hybrid_forward(self, F, x, tokens, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(
                F.take(left, idx) < 0,
                lambda: F.Embedding(F.take(tokens, idx), x, input_dim=self.vocab_size,
                                    output_dim=3),
                lambda: self.combine(self, F, node(F.take(left, idx)), node(F.take(right, idx))))
        hs, _ = gluon_cf.foreach(lambda root, _: (node(root), []), roots, [])
        h = F.reshape(hs, (-3, 0))
        return F.concat(h, self.cell(F.concat(h, h, dim=-1)), dim=-1)


_TREES = list(synthetic_treebank(40, shape="sst", seed=11, max_length=12))
_VOCAB = build_vocab(_TREES)


def _batches(seed, count):
    rng = np.random.RandomState(seed)
    batches = []
    for _ in range(count):
        forest = batchify_forest([encode_tree(_TREES[i], _VOCAB)
                                  for i in rng.choice(len(_TREES), rng.randint(1, 6))])
        batches.append([nd.array(getattr(forest, n)) for n in ("tokens", "left", "right", "roots")])
    return batches


def _play(hybrid, cell, steps, dtype, batches):
    """Outputs of every step and the gradients (``grad_req="add"`` throughout) after ``steps``:
    ("backward", b) records batch b and runs one backward of every graph kept so far; "keep"
    records it and keeps its graph; "twice" records it, runs a backward that keeps its graph
    and keeps it (its gradient counts twice)."""
    mx.random.seed(0)
    net = _Tree(len(_VOCAB), cell)
    net.initialize(mx.init.Xavier())
    net.cast(dtype)
    for p in net.collect_params().values():
        p.grad_req = "add"
    if hybrid:
        gluon_cf.set_executor("batched")
    net.hybridize(active=hybrid)
    x = nd.array(np.random.RandomState(1).uniform(-1, 1, (len(_VOCAB), 3)), dtype=dtype)
    x.attach_grad(grad_req="add")
    outputs, kept = [], []
    for how, b in steps:
        with autograd.record():
            out = net(x, *batches[b])
            loss = (out * out).sum()
        outputs.append(out)
        if how == "twice":
            loss.backward(retain_graph=True)
        kept.append(loss)
        if how == "backward":   # (one call: the graphs share the unmarked index arrays)
            autograd.backward(kept)
            kept = []
    if kept:
        autograd.backward(kept)
    got = [o.asnumpy() for o in outputs] + [x.grad.asnumpy()]
    return got + [p.grad().asnumpy() for p in net.collect_params().values()]


@settings(max_examples=8, deadline=None, derandomize=True)
@given(cell=st.sampled_from(sorted(_CELLS)), dtype=st.sampled_from(["float32", "float64"]),
       steps=st.lists(st.tuples(st.sampled_from(["backward", "keep", "twice"]),
                                st.integers(0, 3)), min_size=2, max_size=4))
def test_static_groups_over_batches_equal_eager(cell, dtype, steps):
    """Hybridized (static recorded groups, counted) equals eager recursion at 1e-5."""
    batches = _batches(len(steps), 4)
    eager = _play(False, cell, steps, dtype, batches)
    before = planned_backward.STATIC_CALLS[0]
    static = _play(True, cell, steps, dtype, batches)
    assert planned_backward.STATIC_CALLS[0] > before
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=1e-7, atol=1e-9)
    for k, (s, e) in enumerate(zip(static, eager)):
        np.testing.assert_allclose(s, e, err_msg="array %d" % k, **tol)


_ONE_OP = {   # an operator of _GRADIENT_NODE_OPS applied to inputs x, y of shape (3, 4)
    "Activation": lambda F, x, y: F.Activation(x, act_type="relu"),
    "FullyConnected": lambda F, x, y: F.FullyConnected(x, y, num_hidden=3, no_bias=True),
    "Concat": lambda F, x, y: F.concat(x, y, dim=0),
    "elemwise_mul": lambda F, x, y: x * y,
    "broadcast_mul": lambda F, x, y: F.broadcast_mul(x, y),
    "tanh": lambda F, x, y: F.tanh(x),
    "sigmoid": lambda F, x, y: F.sigmoid(y),
}


@pytest.mark.parametrize("op", sorted(planned_backward._GRADIENT_NODE_OPS))
def test_each_gradient_node_operator_adds_into_add_buffers(op):
    """Every operator the proof stops at: a static CachedOp of ``op`` alone (no ``* 1``, as
    the proof allows) adds its gradient into ``grad_req="add"`` buffers holding 5, twice over
    two recorded calls kept at once (two states). Oracle: the operator eagerly."""
    graph = _ONE_OP[op]
    symbol = graph(mx.sym, mx.sym.var("x"), mx.sym.var("y"))
    assert symbol.tojson().count('"op": "%s"' % op) == 1
    assert not planned_backward._gradient_passes_through(json.loads(symbol.tojson()))
    rng = np.random.RandomState(0)
    values = [rng.uniform(-1, 1, (3, 4)) for _ in range(2)]
    x, y = (nd.array(v) for v in values)
    x.attach_grad(), y.attach_grad()
    with autograd.record():
        out = graph(nd, x, y)
    out.backward(nd.ones(out.shape) * 2)
    cached = mx.nd.CachedOp(symbol, flags=[("static_alloc", True)])
    names = symbol.list_inputs()   # a unary operator reads one of them
    arrays = {n: nd.array(v) for n, v in zip("xy", values)}
    buffers = {n: nd.ones((3, 4)) * 5 for n in "xy"}
    autograd.mark_variables([arrays[n] for n in names], [buffers[n] for n in names],
                            grad_reqs="add")
    with autograd.record():
        first, second = (cached(*[arrays[n] for n in names]) for _ in range(2))
    autograd.backward([first, second], [nd.ones(out.shape) * 2] * 2)
    for name, expected in (("x", x), ("y", y)):
        np.testing.assert_allclose(buffers[name].asnumpy(), 5 + 2 * expected.grad.asnumpy(),
                                   rtol=1e-5, atol=1e-6, err_msg="%s %s" % (op, name))
