"""Tree cells and the eager reference implementations.

* every cell function: NDArray call == call with Symbols inside a hybridized parent
  (forward and gradients), and == an independent numpy implementation of its equations;
* every reference recursion == a plain recursive numpy implementation on small trees;
* the eager references survive a linear tree deeper than Python's recursion limit (they
  are loops; test_recursion.py also runs treernn_eager on a 5,001-node chain);
* reference gradients == central finite differences (float64, tiny trees);
* `python -m gluon_cf.bench --smoke` ends with one JSON line holding the required keys.
"""
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

from gluon_cf.models import (BinaryTreeLSTMCell, ChildSumTreeLSTMCell, RNTNCell,
                             TopDownTreeLSTMCell, TreeRNNCell, childsum_eager, rntn_eager,
                             topdown_eager, treelstm_eager, treernn_eager)

H, E, VOCAB = 6, 5, 11


# ---------------------------------------------------------------------------------------------
# Trees built by hand in the EncodedTree format (post-order, root last).

def encode(nested):
    """EncodedTree-like namespace of a nested tuple; ints are leaf tokens, tuples internal nodes.

    Internal nodes get token 0 (the padding index here); `left`/`right` are the first/last child.
    """
    tokens, left, right, ptr, idx = [], [], [], [0], []

    def visit(node):
        if isinstance(node, int):
            tokens.append(node), left.append(-1), right.append(-1), ptr.append(len(idx))
            return len(tokens) - 1
        kids = [visit(child) for child in node]
        tokens.append(0), left.append(kids[0]), right.append(kids[-1])
        idx.extend(kids), ptr.append(len(idx))
        return len(tokens) - 1

    visit(nested)
    i32 = lambda a: np.asarray(a, dtype=np.int32)  # noqa: E731
    return SimpleNamespace(tokens=i32(tokens), left=i32(left), right=i32(right),
                           labels=i32([0] * len(tokens)), child_ptr=i32(ptr), child_idx=i32(idx),
                           root=len(tokens) - 1)


def linear_tree(num_leaves):
    """Left-branching (((w1 w2) w3) ...) with 2 * num_leaves - 1 nodes, built without recursion."""
    n = 2 * num_leaves - 1
    tokens = np.zeros(n, np.int32)
    left, right = -np.ones(n, np.int32), -np.ones(n, np.int32)
    tokens[0] = 1
    for k in range(1, num_leaves):       # leaf k at 2k - 1, its parent at 2k
        tokens[2 * k - 1] = 1 + k % (VOCAB - 1)
        left[2 * k], right[2 * k] = 2 * k - 2, 2 * k - 1
    ptr = np.concatenate([[0], np.cumsum(np.where(left >= 0, 2, 0))]).astype(np.int32)
    idx = np.stack([left, right], 1)[left >= 0].ravel().astype(np.int32)
    return SimpleNamespace(tokens=tokens, left=left, right=right, labels=np.zeros(n, np.int32),
                           child_ptr=ptr, child_idx=idx, root=n - 1)


BINARY_TREES = [3, (1, 2), ((1, 2), 3), (1, (2, (3, 4))), (((1, 5), (6, 7)), ((2, 8), 10))]
NARY_TREES = [4, (1, 2, 3), ((1, 2), 3, (4, 5, 6, 7)), (((9,),), 2)]


# ---------------------------------------------------------------------------------------------
# Independent numpy implementations of the cell equations.

def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def params_of(block):
    """{parameter name without the block's prefix: numpy value}."""
    return {name[len(block.prefix):]: p.data().asnumpy()
            for name, p in block.collect_params().items()}


def affine(p, name, x):
    return x @ p[name + '_weight'].T + p[name + '_bias']


def np_treelstm_leaf(p, x):
    i, o, u = np.split(affine(p, 'leaf_iou', x), 3, axis=-1)
    c = sigmoid(i) * np.tanh(u)
    return sigmoid(o) * np.tanh(c), c


def np_treelstm_combine(p, hl, cl, hr, cr):
    z = affine(p, 'combine_gates', np.concatenate([hl, hr], -1))
    i, fl, fr, o, u = np.split(z, 5, axis=-1)
    c = sigmoid(i) * np.tanh(u) + sigmoid(fl) * cl + sigmoid(fr) * cr
    return sigmoid(o) * np.tanh(c), c


def np_childsum_forget(p, x, h, c):
    w = p['forget_f_weight']
    return sigmoid(x @ w[:, :E].T + h @ w[:, E:].T + p['forget_f_bias']) * c


def np_childsum_combine(p, x, h_sum, fc_sum):
    w = p['combine_iou_weight']
    i, o, u = np.split(x @ w[:, :E].T + h_sum @ w[:, E:].T + p['combine_iou_bias'], 3, -1)
    c = sigmoid(i) * np.tanh(u) + fc_sum
    return sigmoid(o) * np.tanh(c), c


def np_rnn_leaf(p, x):
    return np.tanh(affine(p, 'leaf', x))


def np_treernn_combine(p, hl, hr):
    return np.tanh(affine(p, 'combine_proj', np.concatenate([hl, hr], -1)))


def np_rntn_combine(p, hl, hr):
    ab = np.concatenate([hl, hr], -1)
    V = p['combine_V'].reshape(H, 2 * H, 2 * H)     # NOTE: [RNTN tensor layout]
    bilinear = np.einsum('bi,kij,bj->bk', ab, V, ab)
    return np.tanh(bilinear + affine(p, 'combine_linear', ab))


def np_lstm_step(p, side, h, c):
    x = np.broadcast_to(p[side + '_input'], (h.shape[0], p[side + '_input'].shape[1]))
    z = affine(p, 'lstm_i2h', x) + affine(p, 'lstm_h2h', h)
    i, f, g, o = np.split(z, 4, axis=-1)   # gluon.rnn.LSTMCell gate order
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c


# ---------------------------------------------------------------------------------------------
# Cells: NDArray == Symbol-in-hybridized-parent, and == numpy.

def make(cell_cls, *args, seed=0):
    mx.random.seed(seed)
    cell = cell_cls(*args)
    cell.initialize()
    return cell


class CallInParent(gluon.HybridBlock):
    """A parent that calls `fn(cell, *inputs)`; hybridized, the cell sees Symbols."""

    def __init__(self, cell, fn):
        super().__init__()
        self.cell = cell
        self._fn = fn

    def hybrid_forward(self, F, *inputs):
        return self._fn(self.cell, *inputs)


# (id, cell factory, function of (cell, *inputs), input widths, numpy oracle of (params, *inputs))
CELL_CASES = [
    ('treelstm.leaf', lambda: make(BinaryTreeLSTMCell, H, E), lambda m, x: m.leaf(x), [E],
     np_treelstm_leaf),
    ('treelstm.combine', lambda: make(BinaryTreeLSTMCell, H, E),
     lambda m, *s: m.combine(*s), [H, H, H, H], np_treelstm_combine),
    ('childsum.forget', lambda: make(ChildSumTreeLSTMCell, H, E),
     lambda m, *a: m.forget(*a), [E, H, H], np_childsum_forget),
    ('childsum.combine', lambda: make(ChildSumTreeLSTMCell, H, E),
     lambda m, *a: m.combine(*a), [E, H, H], np_childsum_combine),
    ('treernn.leaf', lambda: make(TreeRNNCell, H, E), lambda m, x: m.leaf(x), [E], np_rnn_leaf),
    ('treernn.combine', lambda: make(TreeRNNCell, H, E), lambda m, *a: m.combine(*a), [H, H],
     np_treernn_combine),
    ('rntn.leaf', lambda: make(RNTNCell, H, E), lambda m, x: m.leaf(x), [E], np_rnn_leaf),
    ('rntn.combine', lambda: make(RNTNCell, H, E), lambda m, *a: m.combine(*a), [H, H],
     np_rntn_combine),
    ('topdown.expand_logit', lambda: make(TopDownTreeLSTMCell, H, 3),
     lambda m, h: m.expand_logit(h), [H], lambda p, h: affine(p, 'expand', h)),
    ('topdown.output', lambda: make(TopDownTreeLSTMCell, H, 3), lambda m, h: m.output(h), [H],
     lambda p, h: affine(p, 'output', h)),
    ('topdown.left_child', lambda: make(TopDownTreeLSTMCell, H, 3),
     lambda m, *s: m.left_child(*s), [H, H], lambda p, h, c: np_lstm_step(p, 'left', h, c)),
    ('topdown.right_child', lambda: make(TopDownTreeLSTMCell, H, 3),
     lambda m, *s: m.right_child(*s), [H, H], lambda p, h, c: np_lstm_step(p, 'right', h, c)),
]


def as_list(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def run_with_grads(block, inputs, out_weights=None):
    """Outputs, input gradients and parameter gradients of sum_k <w_k, out_k>."""
    inputs = [mx.nd.array(x) for x in inputs]
    for x in inputs:
        x.attach_grad()
    with autograd.record():
        outs = as_list(block(*inputs))
        if out_weights is None:
            rng = np.random.RandomState(7)
            out_weights = [rng.normal(size=o.shape) for o in outs]
        loss = mx.nd.add_n(*[(o * mx.nd.array(w)).sum() for o, w in zip(outs, out_weights)])
    loss.backward()
    prefix = block.cell.prefix
    return ([o.asnumpy() for o in outs], [x.grad.asnumpy() for x in inputs],
            {k[len(prefix):]: p.grad().asnumpy()
             for k, p in sorted(block.cell.collect_params().items())})


@pytest.mark.filterwarnings('ignore:Parameter .* is not used by any computation')
@pytest.mark.parametrize('case', CELL_CASES, ids=[c[0] for c in CELL_CASES])
def test_cell_ndarray_equals_hybridized_symbol(case):
    _, factory, fn, widths, _ = case
    rng = np.random.RandomState(0)
    inputs = [rng.normal(size=(4, w)).astype(np.float32) for w in widths]
    eager = CallInParent(factory(), fn)
    hybrid = CallInParent(factory(), fn)       # same seed: same initial weights
    hybrid.hybridize()
    e_out, e_in_grad, e_param_grad = run_with_grads(eager, inputs)
    h_out, h_in_grad, h_param_grad = run_with_grads(hybrid, inputs)
    assert len(e_out) == len(h_out)
    for a, b in zip(e_out + e_in_grad, h_out + h_in_grad):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert list(e_param_grad) == list(h_param_grad)
    for name in e_param_grad:
        np.testing.assert_allclose(e_param_grad[name], h_param_grad[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)


@pytest.mark.parametrize('case', CELL_CASES, ids=[c[0] for c in CELL_CASES])
def test_cell_matches_numpy_equations(case):
    _, factory, fn, widths, oracle = case
    cell = factory()
    rng = np.random.RandomState(1)
    inputs = [rng.normal(size=(3, w)).astype(np.float32) for w in widths]
    got = as_list(fn(cell, *[mx.nd.array(x) for x in inputs]))
    want = as_list(oracle(params_of(cell), *[x.astype(np.float64) for x in inputs]))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('case', CELL_CASES, ids=[c[0] for c in CELL_CASES])
def test_cell_rows_are_independent(case):
    # NOTE: [Row independence] in cells.py: a row's output must not depend on other rows.
    _, factory, fn, widths, _ = case
    cell = factory()
    rng = np.random.RandomState(2)
    inputs = [rng.normal(size=(5, w)).astype(np.float32) for w in widths]
    full = [o.asnumpy() for o in as_list(fn(cell, *[mx.nd.array(x) for x in inputs]))]
    for b in range(5):
        rows = as_list(fn(cell, *[mx.nd.array(x[b:b + 1]) for x in inputs]))
        for row, out in zip(rows, full):
            np.testing.assert_allclose(row.asnumpy(), out[b:b + 1], rtol=1e-5, atol=1e-6)


def test_topdown_sides_share_the_lstm():
    cell = make(TopDownTreeLSTMCell, H)
    names = sorted(k[len(cell.prefix):] for k in cell.collect_params())
    assert names == ['expand_bias', 'expand_weight', 'left_input', 'lstm_h2h_bias',
                     'lstm_h2h_weight', 'lstm_i2h_bias', 'lstm_i2h_weight', 'output_bias',
                     'output_weight', 'right_input']
    assert cell.output_size == H


def test_cell_container_is_not_callable():
    cell = make(TreeRNNCell, H, E)
    with pytest.raises(TypeError, match=r'TreeRNNCell is a container .* \(leaf, combine\)'):
        cell(mx.nd.ones((1, E)))


def test_cells_are_deterministic_under_seed():
    a, b = make(RNTNCell, H, E, seed=3), make(RNTNCell, H, E, seed=3)
    for (_, pa), (_, pb) in zip(a.collect_params().items(), b.collect_params().items()):
        np.testing.assert_array_equal(pa.data().asnumpy(), pb.data().asnumpy())


# ---------------------------------------------------------------------------------------------
# Reference recursions == plain recursive numpy.

def make_embed(seed=0):
    mx.random.seed(seed)
    embed = gluon.nn.Embedding(VOCAB, E)
    embed.initialize(mx.init.Normal(1.0))
    return embed


def np_fold(tree, leaf, combine):
    """Recursive fold over the binary tree arrays: the definition the references unroll."""
    def node(n):
        if tree.left[n] < 0:
            return leaf(n)
        return combine(node(tree.left[n]), node(tree.right[n]))
    return node(tree.root)


BINARY_MODELS = {
    'treelstm': (BinaryTreeLSTMCell, treelstm_eager,
                 lambda p, x: np_treelstm_leaf(p, x),
                 lambda p, l, r: np_treelstm_combine(p, *l, *r)),
    'treernn': (TreeRNNCell, treernn_eager, np_rnn_leaf, np_treernn_combine),
    'rntn': (RNTNCell, rntn_eager, np_rnn_leaf, np_rntn_combine),
}


@pytest.mark.parametrize('model', sorted(BINARY_MODELS))
@pytest.mark.parametrize('nested', BINARY_TREES, ids=str)
def test_binary_reference_matches_numpy_recursion(model, nested):
    cell_cls, eager, np_leaf, np_combine = BINARY_MODELS[model]
    embed, cell = make_embed(), make(cell_cls, H, E)
    table, p = embed.weight.data().asnumpy().astype(np.float64), params_of(cell)
    tree = encode(nested)
    want = np_fold(tree, lambda n: np_leaf(p, table[tree.tokens[n:n + 1]]),
                   lambda l, r: np_combine(p, l, r))
    got = eager(embed, cell, tree)
    for g, w in zip(as_list(got), as_list(want)):
        assert g.shape == (1, H)
        np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-4, atol=1e-5)


def np_childsum(p, table, tree):
    def node(n):
        x = table[tree.tokens[n:n + 1]]
        kids = [node(k) for k in tree.child_idx[tree.child_ptr[n]:tree.child_ptr[n + 1]]]
        if not kids:
            return np_childsum_combine(p, x, np.zeros((1, H)), np.zeros((1, H)))
        h_sum = sum(h for h, _ in kids)
        fc_sum = sum(np_childsum_forget(p, x, h, c) for h, c in kids)
        return np_childsum_combine(p, x, h_sum, fc_sum)
    return node(tree.root)


@pytest.mark.parametrize('nested', NARY_TREES, ids=str)
def test_childsum_reference_matches_numpy_recursion(nested):
    embed, cell = make_embed(), make(ChildSumTreeLSTMCell, H, E)
    tree = encode(nested)
    want = np_childsum(params_of(cell), embed.weight.data().asnumpy().astype(np.float64), tree)
    for g, w in zip(childsum_eager(embed, cell, tree), want):
        np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-4, atol=1e-5)


def np_topdown(p, h, c, max_depth):
    def node(h, c, depth):
        out = affine(p, 'output', h)
        if depth < max_depth and affine(p, 'expand', h).item() > 0:
            lo, ln, ls = node(*np_lstm_step(p, 'left', h, c), depth + 1)
            ro, rn, rs = node(*np_lstm_step(p, 'right', h, c), depth + 1)
            return out + lo + ro, 1 + ln + rn, (ls, rs)
        return out, 1, ()
    return node(h, c, 0)


# Seeds chosen so the generated shapes vary: a single node, one split, lopsided and full trees.
@pytest.mark.parametrize('seed', [0, 1, 2, 5, 8, 13, 22, 25])
def test_topdown_reference_matches_numpy_recursion(seed):
    cell = make(TopDownTreeLSTMCell, H, 3, seed=seed)
    rng = np.random.RandomState(seed)
    h0, c0 = rng.normal(size=(1, H)), rng.normal(size=(1, H))
    p = params_of(cell)
    want_total, want_count, want_shape = np_topdown(p, h0, c0, max_depth=4)
    total, count, shape = topdown_eager(cell, mx.nd.array(h0), mx.nd.array(c0), max_depth=4)
    assert (count, shape) == (want_count, want_shape)
    np.testing.assert_allclose(total.asnumpy(), want_total, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('bias, max_depth, count', [(10.0, 3, 15), (-10.0, 3, 1), (10.0, 0, 1)])
def test_topdown_expansion_rule(bias, max_depth, count):
    cell = make(TopDownTreeLSTMCell, H)
    cell.expand_logit.weight.set_data(mx.nd.zeros((1, H)))
    cell.expand_logit.bias.set_data(mx.nd.array([bias]))
    total, n, shape = topdown_eager(cell, mx.nd.zeros((1, H)), mx.nd.zeros((1, H)), max_depth)
    assert n == count and total.shape == (1, H)
    full = ()
    for _ in range(max_depth if bias > 0 else 0):
        full = (full, full)
    assert shape == full


def test_references_survive_a_linear_tree_deeper_than_the_recursion_limit():
    """1,201 levels: a reference that recursed once per level would need more than Python's
    1,000 frames."""
    tree = linear_tree(1201)
    assert len(tree.tokens) == 2401
    embed, cell = make_embed(), make(BinaryTreeLSTMCell, H, E)
    with autograd.record():
        h, c = treelstm_eager(embed, cell, tree)
        loss = h.sum()
    loss.backward()
    assert np.isfinite(h.asnumpy()).all()
    assert np.isfinite(cell.combine.gates.weight.grad().asnumpy()).all()
    # A recursive numpy oracle would hit the recursion limit here: fold the chain in a loop.
    p, table = params_of(cell), embed.weight.data().asnumpy().astype(np.float64)
    state = np_treelstm_leaf(p, table[tree.tokens[:1]])
    for k in range(1, 1201):
        leaf = np_treelstm_leaf(p, table[tree.tokens[2 * k - 1:2 * k]])
        state = np_treelstm_combine(p, *state, *leaf)
    np.testing.assert_allclose(h.asnumpy(), state[0], rtol=1e-4, atol=1e-5)
    childsum_root = childsum_eager(embed, make(ChildSumTreeLSTMCell, H, E), tree)
    assert np.isfinite(childsum_root[0].asnumpy()).all()


# ---------------------------------------------------------------------------------------------
# Gradients of the references == finite differences (float64).

def fd_check(blocks, loss_fn, num_entries=3, eps=1e-6, seed=0):
    """Compare autograd gradients of loss_fn() with central differences on a few entries."""
    params = {}
    for block in blocks:
        params.update(block.collect_params())
    with autograd.record():
        loss = loss_fn()
    loss.backward()
    rng = np.random.RandomState(seed)
    checked = 0
    for name, p in sorted(params.items()):
        value, grad = p.data().asnumpy(), p.grad().asnumpy()
        for flat in rng.choice(value.size, size=min(num_entries, value.size), replace=False):
            idx = np.unravel_index(flat, value.shape)
            shifted = []
            for delta in (eps, -eps):
                v = value.copy()
                v[idx] += delta
                p.set_data(mx.nd.array(v, dtype='float64'))
                shifted.append(loss_fn().asscalar())
            p.set_data(mx.nd.array(value, dtype='float64'))
            numeric = (shifted[0] - shifted[1]) / (2 * eps)
            assert abs(numeric - grad[idx]) <= 1e-6 + 1e-5 * abs(numeric), (name, idx)
            checked += 1
    assert checked > 0


FD_MODELS = {
    'treelstm': (BinaryTreeLSTMCell, lambda e, m, t: treelstm_eager(e, m, t)[0]),
    'childsum': (ChildSumTreeLSTMCell, lambda e, m, t: childsum_eager(e, m, t)[0]),
    'treernn': (TreeRNNCell, treernn_eager),
    'rntn': (RNTNCell, rntn_eager),
}


@pytest.mark.parametrize('model', sorted(FD_MODELS))
def test_reference_gradients_match_finite_differences(model):
    cell_cls, eager = FD_MODELS[model]
    embed, cell = make_embed(), make(cell_cls, H, E)
    embed.cast('float64')
    cell.cast('float64')
    tree = encode(((1, 2), (3, (4, 5))) if model != 'childsum' else ((1, 2, 3), 4))
    w = mx.nd.array(np.random.RandomState(3).normal(size=(1, H)), dtype='float64')
    fd_check([embed, cell], lambda: (eager(embed, cell, tree) * w).sum())


def test_topdown_gradients_match_finite_differences():
    cell = make(TopDownTreeLSTMCell, H, 2, seed=1)
    cell.cast('float64')
    cell.expand_logit.bias.set_data(mx.nd.array([10.0], dtype='float64'))  # fixed shape
    h0 = mx.nd.array(np.random.RandomState(4).normal(size=(1, H)), dtype='float64')
    c0 = mx.nd.zeros((1, H), dtype='float64')
    w = mx.nd.array([[1.0, -2.0]], dtype='float64')
    fd_check([cell], lambda: (topdown_eager(cell, h0, c0, max_depth=2)[0] * w).sum())


# ---------------------------------------------------------------------------------------------
# The benchmark harness, end to end on tiny sizes.

REQUIRED_KEYS = {'treelstm_infer_b25_vs_eager', 'treelstm_train_b25_vs_eager',
                 'treelstm_infer_b25_vs_handbatched', 'treelstm_infer_b25_vs_torch',
                 'treelstm_infer_b1_vs_eager', 'treelstm_infer_b1_vs_torch',
                 'treelstm_infer_b25_vs_floor', 'treelstm_train_b25_vs_handbatched',
                 'treelstm_train_b25_vs_floor', 'treernn_infer_b25_vs_floor',
                 'treelstm_infer_b1_vs_floor'}


def test_bench_smoke_prints_json_last(tmp_path):
    plot = tmp_path / 'bench.png'
    proc = subprocess.run(
        [sys.executable, '-m', 'gluon_cf.bench', '--smoke', '--methods', 'a,c,d',
         '--plot', str(plot), '--json', str(tmp_path / 'summary.json')],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, 'PYTHONWARNINGS': 'ignore'})
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    result = json.loads(last)
    assert REQUIRED_KEYS <= set(result)
    assert all(result[k] is None for k in REQUIRED_KEYS)     # method e is not registered yet
    assert plot.exists() and plot.stat().st_size > 0
    assert json.loads((tmp_path / 'summary.json').read_text()) == result
    assert set(result['methods']) == {'a', 'c', 'd'}
    assert 'n/a' in proc.stdout


def test_bench_kinds_keeps_only_their_cells(tmp_path, capsys):
    """``--kinds treernn``: the smoke preset's TreeRNN cells only, said in the summary; an
    unknown kind is refused before anything runs (argparse's exit, here from main() in this
    process: no second interpreter just to parse the arguments)."""
    from gluon_cf.bench.__main__ import main
    run = lambda *extra: subprocess.run(  # noqa: E731
        [sys.executable, '-m', 'gluon_cf.bench', '--smoke', '--methods', 'a',
         '--plot', str(tmp_path / 'bench.png'), '--json', str(tmp_path / 'summary.json'),
         *extra], capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, 'PYTHONWARNINGS': 'ignore'})
    proc = run('--kinds', 'treernn')
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result['kinds'] == ['treernn']
    assert sorted(result['trees_per_second']) == ['treernn/linear/infer/b2',
                                                  'treernn/sst/infer/b2',
                                                  'treernn/sst/train/b2']
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        main(['--smoke', '--methods', 'a', '--plot', str(tmp_path / 'refused.png'),
              '--kinds', 'treelstm,tree_rnn'])
    output = capsys.readouterr()
    assert refused.value.code == 2 and "--kinds: expected some of" in output.err
    assert output.out == "" and not (tmp_path / 'refused.png').exists()


# ---------------------------------------------------------------------------------------------
# The benchmark baselines agree with each other: forward, and weights after one SGD step.

def _bench_batch(kinds=('sst', 'balanced', 'linear')):
    from gluon_cf.bench.baselines import Batch
    from gluon_cf.data.trees import batchify_forest, build_vocab, encode_tree, synthetic_treebank
    trees = [t for shape in kinds
             for t in synthetic_treebank(2, shape=shape, seed=1, mean_length=5.0)]
    trees += synthetic_treebank(1, seed=1, length=1)       # a single leaf
    vocab = build_vocab(trees)
    encoded = [encode_tree(t, vocab) for t in trees]
    return len(vocab), Batch(encoded, batchify_forest(encoded))


def _weights(runner):
    if hasattr(runner, 'model'):
        prefix = runner.model.prefix
        return {k[len(prefix):]: p.data().asnumpy()
                for k, p in runner.model.collect_params().items()}
    return {k: v.detach().numpy().reshape(-1, v.shape[-1]) if k == 'cell_combine_V'
            else v.detach().numpy() for k, v in runner.params.items()}


@pytest.mark.parametrize('kind', ['treelstm', 'treernn', 'rntn'])
def test_bench_baselines_agree_on_outputs_and_sgd_step(kind):
    from gluon_cf.bench import METHODS
    from gluon_cf.bench.baselines import Batch, MethodUnavailable, ModelConfig, make_model
    from gluon_cf.data.trees import batchify_forest
    vocab_size, batch = _bench_batch()
    assert batch.trees[-1].num_nodes == 1
    model = make_model(ModelConfig(kind, vocab_size, embed_size=E, hidden_size=H), seed=2)
    runners = {}
    for name in 'acdf':
        try:
            runners[name] = METHODS[name].builder(model)
        except MethodUnavailable:
            pass
    as_np = lambda x: x.asnumpy() if hasattr(x, 'asnumpy') else np.asarray(x)  # noqa: E731
    ref_h, ref_logits = [as_np(x) for x in runners['a'].infer(batch)]
    assert ref_h.shape == (batch.size, H) and ref_logits.shape == (batch.size, 5)
    for name, runner in runners.items():
        h, logits = [as_np(x) for x in runner.infer(batch)]
        np.testing.assert_allclose(h, ref_h, rtol=1e-4, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(logits, ref_logits, rtol=1e-4, atol=1e-5, err_msg=name)
    losses = {name: float(as_np(runner.train_step(batch))) for name, runner in runners.items()}
    before, ref_after = _weights(runners['a']), None
    for name, runner in runners.items():
        assert losses[name] == pytest.approx(losses['a'], rel=1e-4), name
        after = _weights(runner)
        ref_after = ref_after or after
        for k in ref_after:
            np.testing.assert_allclose(after[k], ref_after[k], rtol=1e-4, atol=1e-6,
                                       err_msg=f'{name}: {k}')
    model_values = {k[len(model.prefix):]: p.data().asnumpy()
                    for k, p in model.collect_params().items()}
    assert any(not np.allclose(before[k], model_values[k]) for k in before)  # SGD moved
    # A mini-batch whose trees are single leaves leaves `combine` without a gradient.
    leaf_batch = Batch(batch.trees[-1:], batchify_forest(batch.trees[-1:]))
    for name, runner in runners.items():
        runner.train_step(leaf_batch)


@pytest.mark.parametrize('kind', ['treelstm', 'treernn'])
def test_bench_floor_with_input_grads_trains_as_the_floor_and_fills_input_gradients(kind):
    """Method l is method g with every cell call's inputs needing gradients: the same loss and
    the same weights after one SGD step as g (the oracle: the same arithmetic), and its input
    gradient buffers hold what MXNet's own gradient of the same calls gives them."""
    from gluon_cf.bench import METHODS
    from gluon_cf.bench.baselines import ModelConfig, _as_tuple, make_model
    vocab_size, batch = _bench_batch()
    model = make_model(ModelConfig(kind, vocab_size, embed_size=E, hidden_size=H), seed=3)
    floor, with_grads = METHODS['g'].builder(model), METHODS['l'].builder(model)
    assert floor.checked is False and with_grads.checked is False
    h_g, h_l = floor.root_states(batch), with_grads.root_states(batch)   # inference: g's
    np.testing.assert_array_equal(h_l.asnumpy(), h_g.asnumpy())
    before = _weights(floor)
    loss_g, loss_l = floor.train_step(batch), with_grads.train_step(batch)
    assert float(loss_l.asnumpy()) == pytest.approx(float(loss_g.asnumpy()), rel=1e-6)
    after_g, after_l = _weights(floor), _weights(with_grads)
    for k in after_g:
        np.testing.assert_allclose(after_l[k], after_g[k], rtol=1e-5, atol=1e-7, err_msg=k)
    assert any(not np.allclose(before[k], after_g[k]) for k in before)   # SGD moved
    # The leaves' rows: the gradient of the loss (the sum of every call's outputs) is the
    # leaf call's own, which MXNet's autograd of a separate call on a copy gives (the oracle).
    with autograd.record():
        loss = mx.nd.add_n(*[o.sum() for out in with_grads._calls(batch) for o in out])
    loss.backward()
    rows = len(batch.forest.levels()[0])
    got = with_grads._grads[0][:rows].asnumpy()
    x = with_grads._x[:rows].copy()
    x.attach_grad()
    with autograd.record():
        total = mx.nd.add_n(*[o.sum() for o in _as_tuple(with_grads._leaf(x))])
    total.backward()
    assert np.abs(got).max() > 0
    np.testing.assert_allclose(got, x.grad.asnumpy(), rtol=1e-5, atol=1e-7)


def test_bench_check_rejects_a_wrong_method(monkeypatch):
    import gluon_cf.bench.__main__ as harness
    from gluon_cf.bench import METHODS, Method
    from gluon_cf.bench.baselines import EagerRunner, LevelBatchedRunner, ModelConfig, make_model

    class OffByOne(LevelBatchedRunner):
        def root_states(self, batch):
            return super().root_states(batch) + 1e-3

    monkeypatch.setitem(METHODS, 'z', Method('z', 'fast but wrong', OffByOne))
    vocab_size, batch = _bench_batch(('sst',))
    model = make_model(ModelConfig('treernn', vocab_size, embed_size=E, hidden_size=H))
    runners = {'a': EagerRunner(model), 'd': LevelBatchedRunner(model), 'z': OffByOne(model)}
    with pytest.raises(AssertionError, match=r'treernn: method z \(fast but wrong\) disagrees '
                                             r'with method a on the root states'):
        harness.check_agreement('treernn', runners, batch)
    del runners['z']
    harness.check_agreement('treernn', runners, batch)
