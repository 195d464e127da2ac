"""The batching executor's edge cases, each against eager Python recursion (same block, not
hybridized): functions that cannot be batched, and cond branches whose values do not depend on
the rows of a batch. The models of ``test_recursion.py`` cover the common cases."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

import gluon_cf
from gluon_cf.data.trees import batchify_forest, build_vocab, encode_tree, parse_tree, \
    synthetic_treebank

TOL = dict(rtol=1e-5, atol=1e-6)
H = 4


def _forest():
    """Six SST-like trees and a single-node tree, as one forest (post-order node arrays)."""
    trees = list(synthetic_treebank(6, shape="sst", seed=2, max_length=9))
    trees.append(parse_tree("(1 lone)"))
    vocab = build_vocab(trees)
    return batchify_forest([encode_tree(t, vocab) for t in trees])


@pytest.fixture(autouse=True)
def batched():
    previous = gluon_cf.get_executor()
    gluon_cf.set_executor("batched")
    yield
    gluon_cf.set_executor(previous)


class _Fold(gluon.HybridBlock):
    """A binary tree fold over node features ``x``; ``leaf(F, xi, a, b)`` is the leaf value."""

    def __init__(self, leaf, **kwargs):
        super().__init__(**kwargs)
        self.leaf = leaf
        with self.name_scope():
            self.a = self.params.get("a", shape=(1, H), init=mx.init.Uniform(1.0))
            self.b = self.params.get("b", shape=(1, H), init=mx.init.Uniform(1.0))

    def hybrid_forward(self, F, x, left, right, roots, a, b):
        @gluon_cf.recursive
        def node(idx):
            def internal():
                return F.tanh(node(F.take(left, idx)) * 0.5 + node(F.take(right, idx)))

            return gluon_cf.cond(F.take(left, idx) < 0,
                                 lambda: self.leaf(F, F.take(x, idx), a, b), internal)

        out, _ = gluon_cf.foreach(lambda root, _: (node(root), []), roots, [])
        return F.reshape(out, (-3, 0))


def _inputs():
    forest = _forest()
    x = nd.array(np.random.RandomState(0).uniform(-1, 1, (forest.num_nodes, H)))
    return [x, nd.array(forest.left), nd.array(forest.right), nd.array(forest.roots)]


def _run(net, inputs):
    for p in net.collect_params().values():
        p.zero_grad()
    inputs[0].attach_grad()
    with autograd.record():
        out = net(*inputs)
        loss = (out * out).sum()
    loss.backward()
    grads = {k: p.grad().asnumpy().copy() for k, p in net.collect_params().items()}
    return out.asnumpy(), grads, inputs[0].grad.asnumpy().copy()


def _check_against_eager(leaf):
    net = _Fold(leaf)
    net.initialize()
    inputs = _inputs()
    expected = _run(net, inputs)          # eager: plain Python recursion
    net.hybridize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _run(net, inputs)
        again = _run(net, inputs)
    for e, g, a in zip(expected, got, again):
        if isinstance(e, dict):
            for k in e:
                np.testing.assert_allclose(g[k], e[k], err_msg=k, **TOL)
                np.testing.assert_allclose(a[k], e[k], err_msg=k, **TOL)
        else:
            np.testing.assert_allclose(g, e, **TOL)
            np.testing.assert_allclose(a, e, **TOL)
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_unbatchable_function_warns_once_and_runs_unbatched():
    # a * xi with a of shape (1, H) is an element-wise product: it needs one row per call.
    messages = _check_against_eager(lambda F, xi, a, b: a * xi + b)
    unbatched = [m for m in messages if "runs unbatched" in m]
    assert len(unbatched) == 1, messages
    assert "'node'" in unbatched[0]
    assert "operator elemwise_mul" in unbatched[0]
    assert "combines a batched input with a shared one of the same shape" in unbatched[0]


def test_cond_branches_that_do_not_depend_on_the_rows():
    # Each leaf picks parameter a or b by its own feature sum: in a batch, the branches return
    # one row for all the rows that take them (a parameter), which must be repeated per row.
    def leaf(F, xi, a, b):
        bias = gluon_cf.cond(F.sum(xi, axis=1) > 0, lambda: a, lambda: b)
        return F.broadcast_add(xi, bias)

    messages = _check_against_eager(leaf)
    assert not [m for m in messages if "runs unbatched" in m], messages


def test_plain_branches_batched_across_levels_match_eager():
    # Leaves at different depths are deferred and computed in one batch (NOTE [batching]).
    messages = _check_against_eager(lambda F, xi, a, b: F.broadcast_mul(F.tanh(xi), a) + xi)
    assert not [m for m in messages if "runs unbatched" in m], messages
