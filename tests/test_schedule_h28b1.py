"""Recursion inference in the calling thread (issue 28, session 25; NOTE [recursion inference in
the calling thread] in gluon_cf/hybrid_inline.py): an inference call of a hybridized block holding a
recursion runs its nodes by their rules in the caller's thread, not as a Custom operator on
MXNet's Custom-op thread. Its outputs equal the Custom operator's (1e-6) and eager ones
(random forests, chains, single nodes, repeated roots, mutual recursion, forests of equal sizes
and other structures in sequence); training keeps the Custom operator and eager gradients; a
failing call gives the Custom operator's error; random graphs and train mode are not run so."""
import threading

import hypothesis.strategies as st
import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings
from mxnet import autograd, gluon, nd

import gluon_cf
from gluon_cf import hybrid_inline
from gluon_cf.data.trees import parse_tree, synthetic_treebank
from gluon_cf.models import TreeLSTM, TreeRNN
from gluon_cf.recursion import schedule
from test_schedule import TOL, _EvenOdd, _assert_same, _forest, _linear_tree, _run


@pytest.fixture(autouse=True)
def batched_executor():
    previous = gluon_cf.get_executor()
    gluon_cf.set_executor("batched", ahead_of_time=True)
    yield
    gluon_cf.set_executor(previous)
    hybrid_inline.INLINE[0] = True


def _threads(monkeypatch):
    """The threads ``schedule.run`` is called in, in order."""
    seen = []
    original = schedule.run

    def recording(*args, **kwargs):
        seen.append(threading.get_ident())
        return original(*args, **kwargs)

    monkeypatch.setattr(schedule, "run", recording)
    return seen


def _net(model, vocab, seed=0):
    mx.random.seed(seed)
    net = model(len(vocab), embed_size=5, hidden_size=4, num_classes=3)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    return net


def _both(net, inputs):
    """(outputs in the calling thread, outputs by the Custom operator) of an inference call."""
    hybrid_inline.INLINE[0] = True
    inline = [o.asnumpy() for o in _outputs(net(*inputs))]
    hybrid_inline.INLINE[0] = False
    custom = [o.asnumpy() for o in _outputs(net(*inputs))]
    hybrid_inline.INLINE[0] = True
    return inline, custom


def _outputs(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _eager(net, inputs):
    net.hybridize(active=False)
    try:
        return [o.asnumpy() for o in _outputs(net(*inputs))]
    finally:
        net.hybridize()


def _check(net, inputs):
    inline, custom = _both(net, inputs)
    for a, b in zip(inline, custom):   # (the head's Dense, a CachedOp segment of its own
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)   # here, may round otherwise)
    for a, b in zip(inline, _eager(net, inputs)):
        np.testing.assert_allclose(a, b, **TOL)


def test_inference_runs_in_the_calling_thread(monkeypatch):
    """The schedule runs in the caller's thread (before: MXNet's Custom-op thread), on the
    inline path, once per call."""
    vocab, inputs = _forest(synthetic_treebank(4, shape="sst", seed=5, max_length=12))
    net = _net(TreeLSTM, vocab)
    seen = _threads(monkeypatch)
    runs = hybrid_inline.INLINE_RUNS[0]
    net(*inputs)[0].wait_to_read()
    assert seen == [threading.get_ident()]
    assert hybrid_inline.INLINE_RUNS[0] == runs + 1


@pytest.mark.parametrize("model", [TreeLSTM, TreeRNN])
@pytest.mark.parametrize("trees", [
    lambda: [parse_tree("(1 good)")],
    lambda: [_linear_tree(300)],
    lambda: list(synthetic_treebank(25, shape="sst", seed=3, max_length=20)),
    lambda: list(synthetic_treebank(6, shape="balanced", seed=4, max_length=16))
    + [parse_tree("(1 good)"), _linear_tree(9)],
], ids=["single_node", "chain", "sst25", "mixed"])
def test_inline_equals_custom_operator_and_eager(model, trees):
    vocab, inputs = _forest(trees())
    _check(_net(model, vocab), inputs)


def test_repeated_roots_and_mutual_recursion():
    trees = list(synthetic_treebank(4, shape="sst", seed=7, max_length=10)) + \
        [parse_tree("(1 good)")]
    vocab, (tokens, left, right, roots) = _forest(trees)
    repeated = nd.array(np.concatenate([roots.asnumpy(), roots.asnumpy()[::-1]]))
    net = _net(TreeRNN, vocab)
    _check(net, [tokens, left, right, repeated])
    mx.random.seed(1)
    even_odd = _EvenOdd(len(vocab))
    even_odd.initialize(mx.init.Uniform(1.0))
    even_odd.hybridize()
    before = schedule.RUNS["even"]
    _check(even_odd, [tokens, left, right, repeated])
    assert schedule.RUNS["even"] > before


def _structures(seed):
    """Two forests of equal array lengths (tokens, nodes, roots), other trees: a balanced
    and a linear tree of 8 words each, in both orders."""
    rng = np.random.RandomState(seed)
    words = ["w%d" % k for k in rng.randint(0, 9, 8)]
    balanced = "(1 (1 (1 (1 %s) (1 %s)) (1 (1 %s) (1 %s))) (1 (1 (1 %s) (1 %s)) (1 (1 %s) " \
        "(1 %s))))" % tuple(words)
    linear = "(1 %s)" % words[0]
    for w in words[1:]:
        linear = "(1 %s (1 %s))" % (linear, w)
    return [parse_tree(balanced), parse_tree(linear)], [parse_tree(linear), parse_tree(balanced)]


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.sampled_from(["sst", "balanced", "linear"]),
                                        min_size=1, max_size=5))
def test_forests_in_sequence_equal_eager(seed, shapes):
    """Random forests, then two of the same array lengths but other structure, one after the
    other in one block: each call's outputs equal the Custom operator's and eager ones (a
    cache of the first forest's plan reused for the second would differ)."""
    trees = [t for k, shape in enumerate(shapes)
             for t in synthetic_treebank(1, shape=shape, seed=seed + k, max_length=12)]
    first, second = _structures(seed)
    vocab, inputs = _forest(trees + first + second)
    net = _net(TreeLSTM, vocab)
    for forest in (trees, first, second, trees):
        _, forest_inputs = _forest_with(vocab, forest)
        _check(net, forest_inputs)


def _forest_with(vocab, trees):
    from gluon_cf.data.trees import batchify_forest, encode_tree
    forest = batchify_forest([encode_tree(t, vocab) for t in trees])
    return vocab, [nd.array(getattr(forest, n)) for n in ("tokens", "left", "right", "roots")]


def test_training_keeps_the_custom_operator_and_eager_gradients(monkeypatch):
    """Recorded calls run as the Custom operator (the planned backward needs its forward):
    not in the calling thread; outputs and gradients equal eager ones; inference afterwards
    runs in the calling thread again."""
    vocab, inputs = _forest(synthetic_treebank(5, shape="sst", seed=2, max_length=12))
    net = _net(TreeLSTM, vocab)
    eager = _run(net, inputs, None)
    seen = _threads(monkeypatch)
    runs = hybrid_inline.INLINE_RUNS[0]
    trained = _run(net, inputs, "batched")
    assert seen and threading.get_ident() not in seen
    assert hybrid_inline.INLINE_RUNS[0] == runs
    _assert_same(trained, eager)
    net(*inputs)[0].wait_to_read()
    assert hybrid_inline.INLINE_RUNS[0] == runs + 1


def test_train_mode_and_random_graphs_keep_the_custom_operator():
    """Train mode (dropout would draw) and a graph drawing random numbers (the Custom
    operator's thread draws from the caller's seed) are not run in the calling thread."""
    vocab, inputs = _forest(synthetic_treebank(3, shape="sst", seed=6, max_length=10))
    net = _net(TreeRNN, vocab)
    runs = hybrid_inline.INLINE_RUNS[0]
    with autograd.train_mode():
        net(*inputs)[0].wait_to_read()
    assert hybrid_inline.INLINE_RUNS[0] == runs

    class Noisy(gluon.HybridBlock):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def hybrid_forward(self, F, *args):
            return F.Dropout(self.inner(*args)[0], p=0.5, mode="always")

    noisy = Noisy(net)
    noisy.hybridize()
    noisy(*inputs).wait_to_read()
    assert hybrid_inline.INLINE_RUNS[0] == runs


def test_a_failing_call_gives_the_custom_operators_error():
    """A forest deeper than max_depth: the call in the calling thread fails, and the Custom
    operator's run gives its error at the user's line (the block stays usable)."""
    class Shallow(gluon.HybridBlock):
        def hybrid_forward(self, F, left, roots):
            @gluon_cf.recursive(max_depth=3)
            def depth(idx):
                return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.ones_like(idx),
                                     lambda: depth(F.take(left, idx)) + 1)

            out, _ = gluon_cf.foreach(lambda root, _: (depth(root), []), roots, [])
            return out

    net = Shallow()
    net.hybridize()
    deep = nd.array([1, 2, 3, 4, 5, -1])
    failed = hybrid_inline.INLINE_FAILED[0]
    with pytest.raises(gluon_cf.RecursionDepthError, match="max_depth=3") as raised:
        net(deep, nd.array([0])).asnumpy()
    assert hybrid_inline.INLINE_FAILED[0] == failed + 1
    assert "test_schedule_h28b1.py:" in str(raised.value), str(raised.value)
    np.testing.assert_array_equal(net(nd.array([1, -1]), nd.array([0])).asnumpy(), [[2]])
