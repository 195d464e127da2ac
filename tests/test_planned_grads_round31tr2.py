"""Where a planned run's gradient tables are zeroed (``planned_backward.GRADS``, NOTE [the first
group in training] in gluon_cf/recursion/planned_backward.py): before the early first group's
call, after it, or in the loop; outputs and gradients equal eager recursion's in every case, on
random forests, chains, single nodes, repeated roots, mutual recursion, forests of changing
sizes in sequence through one net (tables kept from a larger forest), two recorded calls before
one backward (each call its own gradient tables), and an early call that the loop drops."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, nd

import gluon_cf
from gluon_cf.data.trees import batchify_forest, build_vocab, encode_tree, parse_tree, \
    synthetic_treebank
from gluon_cf.models.recursive import TreeLSTM, TreeRNN
from gluon_cf.recursion import first_group, planned_backward
from test_planned_first_round31tr import _net
from test_schedule import FORESTS, _EvenOdd, _assert_same, _forest, _linear_tree, _run

WAYS = ("before", "after", "run")


@pytest.fixture(autouse=True)
def restore():
    previous = gluon_cf.get_executor()
    yield
    gluon_cf.set_executor(previous)
    planned_backward.GRADS[0] = "before"
    planned_backward.EARLY[0] = True


def _every_way(net, inputs, pushed=True):
    """Each way's outputs and gradients equal eager's; the first group is called early."""
    eager = _run(net, inputs, None)
    for way in WAYS:
        planned_backward.GRADS[0] = way
        before, runs = planned_backward.PUSHED[0], planned_backward.RUNS[0]
        got = _run(net, inputs, "batched")
        assert planned_backward.RUNS[0] > runs
        assert (planned_backward.PUSHED[0] > before) == pushed, way
        _assert_same(got, eager)


@pytest.mark.parametrize("model", [TreeLSTM, TreeRNN])
@pytest.mark.parametrize("seed", [0, 2])
def test_random_forests(model, seed):
    rng = np.random.RandomState(10 + seed)
    trees = synthetic_treebank(int(rng.randint(1, 9)), shape=["sst", "balanced", "linear"][seed],
                               seed=20 + seed, max_length=int(rng.randint(2, 14)))
    vocab, inputs = _forest(trees)
    _every_way(_net(model, vocab, seed), inputs)


@pytest.mark.parametrize("forest", ["single_node", "mixed"])
def test_single_nodes_and_mixed(forest):
    vocab, inputs = _forest(FORESTS[forest]())
    _every_way(_net(TreeLSTM, vocab), inputs)


def test_chain_and_repeated_roots():
    vocab, inputs = _forest([_linear_tree(11), parse_tree("(1 good)")])
    roots = inputs[3].asnumpy()
    inputs[3] = nd.array(np.concatenate([roots, roots[::-1], roots[:1], roots[:1]]))
    _every_way(_net(TreeRNN, vocab, 1), inputs)


def test_mutual_recursion():
    vocab, inputs = _forest(FORESTS["mixed"]())
    mx.random.seed(2)
    net = _EvenOdd(len(vocab))
    net.initialize(mx.init.Uniform(1.0))
    _every_way(net, inputs)


def _inputs(trees, vocab):
    forest = batchify_forest([encode_tree(t, vocab) for t in trees])
    return [nd.array(getattr(forest, n)) for n in ("tokens", "left", "right", "roots")]


def test_forests_of_changing_sizes_in_sequence():
    """One net, forests of growing and shrinking sizes in turn (the tables' rows kept from a
    larger forest, NOTE [sized recorded groups]), each way in turn on every forest: every
    call's outputs and gradients are eager's."""
    forests = [synthetic_treebank(n, shape="sst", seed=n, max_length=12) for n in (9, 2, 6, 1)]
    forests += [FORESTS["single_node"](), FORESTS["balanced"]()]
    vocab = build_vocab([t for trees in forests for t in trees])
    net = _net(TreeLSTM, vocab, 5)
    for k, trees in enumerate(forests * 2):
        inputs = _inputs(trees, vocab)
        planned_backward.GRADS[0] = WAYS[k % len(WAYS)]
        got = _run(net, inputs, "batched")
        _assert_same(got, _run(net, inputs, None))


def _two_calls(net, first, second, mode):
    """Two recorded calls of ``net``, then one backward of both losses."""
    if mode is None:
        net.hybridize(active=False)
    else:
        gluon_cf.set_executor(mode)
        net.hybridize()
    with autograd.record():
        a, b = net(*first), net(*second)
        loss = (a * a).sum() + (b * b).sum()
    loss.backward()
    return [a.asnumpy(), b.asnumpy()], {k: p.grad().asnumpy()
                                        for k, p in net.collect_params().items()}


def test_two_calls_before_one_backward():
    """Each call zeroes gradient tables of its own: the second call's must not be the first's
    (a buffer shared across calls would add both calls' children's gradients together)."""
    small = synthetic_treebank(3, shape="sst", seed=7, max_length=9)
    large = synthetic_treebank(5, shape="balanced", seed=8, max_length=12)
    vocab = build_vocab(list(small) + list(large))
    net = _net(TreeRNN, vocab, 6)
    first, second = _inputs(small, vocab), _inputs(large, vocab)
    eager = _two_calls(net, first, second, None)
    for way in WAYS:
        planned_backward.GRADS[0] = way
        _assert_same(_two_calls(net, first, second, "batched"), eager)
        _assert_same(_two_calls(net, first, first, "batched"), _two_calls(net, first, first, None))


def test_a_dropped_early_call_zeroes_its_own_tables(monkeypatch):
    """An early call the loop does not use (its ids reversed): the loop's tables are new, and
    so are their gradient tables, zeroed in the loop."""
    vocab, inputs = _forest(synthetic_treebank(4, shape="sst", seed=3, max_length=9))
    net = _net(TreeRNN, vocab, 3)
    found = first_group.find

    def reversed_ids(*args):
        q, vid, ids = found(*args)
        return q, vid, ids[::-1].copy()
    monkeypatch.setattr(first_group, "find", reversed_ids)
    _every_way(net, inputs)
