"""The first group of a planned run called before the layout (NOTE [the first group in
training] in gluon_cf/recursion/planned_backward.py): outputs and gradients equal the loop's
own call of it and eager recursion's, on forests where the first group is called early, and
when the early call is not the layout's first group (the loop then calls it again)."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import nd

import gluon_cf
from gluon_cf.data.trees import (batchify_forest, build_vocab, encode_tree, parse_tree,
                                 synthetic_treebank)
from gluon_cf.models.recursive import TreeLSTM, TreeRNN
from gluon_cf.recursion import first_group, planned_backward
from test_schedule import FORESTS, _EvenOdd, _assert_same, _forest, _linear_tree, _run


@pytest.fixture(autouse=True)
def restore():
    previous = gluon_cf.get_executor()
    yield
    gluon_cf.set_executor(previous)
    planned_backward.EARLY[0] = planned_backward.ENABLED[0] = True
    planned_backward.BULK[0] = 0


def _planned(net, inputs, early):
    """``_run``'s outputs and gradients, planned, the first group early and unbulked, or
    neither (bulked as before, NOTE [bulked groups]); and how many first groups were called
    early."""
    planned_backward.EARLY[0] = early
    planned_backward.BULK[0] = 0 if early else 64
    before, runs = planned_backward.PUSHED[0], planned_backward.RUNS[0]
    got = _run(net, inputs, "batched")
    assert planned_backward.RUNS[0] > runs
    return got, planned_backward.PUSHED[0] - before


def _both_ways(net, inputs, pushed=True):
    eager = _run(net, inputs, None)
    early, calls = _planned(net, inputs, True)
    late, none = _planned(net, inputs, False)
    assert none == 0 and (calls > 0) == pushed, (calls, none)
    _assert_same(early, eager)
    _assert_same(late, eager)


def _net(model, vocab, seed=0):
    mx.random.seed(seed)
    net = model(len(vocab), embed_size=3, hidden_size=4, num_classes=2)
    net.initialize(mx.init.Xavier())
    return net


@pytest.mark.parametrize("model", [TreeLSTM, TreeRNN])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_forests(model, seed):
    rng = np.random.RandomState(seed)
    trees = synthetic_treebank(int(rng.randint(1, 9)), shape=["sst", "balanced", "linear"][seed],
                               seed=seed, max_length=int(rng.randint(2, 14)))
    vocab, inputs = _forest(trees)
    _both_ways(_net(model, vocab, seed), inputs)


@pytest.mark.parametrize("forest", sorted(FORESTS))   # single nodes, sst, balanced, mixed
def test_forests(forest):
    vocab, inputs = _forest(FORESTS[forest]())
    _both_ways(_net(TreeRNN, vocab), inputs)


def test_chain_and_repeated_roots():
    trees = [_linear_tree(9), parse_tree("(1 good)")]
    vocab, inputs = _forest(trees)
    roots = inputs[3].asnumpy()
    inputs[3] = nd.array(np.concatenate([roots, roots[::-1], roots[:1]]))
    _both_ways(_net(TreeLSTM, vocab), inputs)


def test_long_chain_is_not_called_early():
    """More expansion steps than static groups allow: the loop calls every group."""
    vocab, inputs = _forest([_linear_tree(planned_backward.STATIC_GROUPS + 10)])
    _both_ways(_net(TreeRNN, vocab), inputs, pushed=False)


def test_mutual_recursion():
    """Two functions (NOTE [the first group in training]: the first group is the first
    function in the plan's order with leaves)."""
    vocab, inputs = _forest(FORESTS["mixed"]())
    mx.random.seed(1)
    net = _EvenOdd(len(vocab))
    net.initialize(mx.init.Uniform(1.0))
    eager = _run(net, inputs, None)
    early, calls = _planned(net, inputs, True)
    assert calls == 1
    _assert_same(early, eager)


def test_an_early_call_of_other_rows_is_called_again(monkeypatch):
    """An early group that is not the layout's first (here: its ids reversed, so its rows hold
    other leaves' values) is not used: the loop calls group 0 itself, and every value and
    gradient is eager's. Without that check the leaves' rows would be swapped."""
    vocab, inputs = _forest(synthetic_treebank(4, shape="sst", seed=3, max_length=9))
    net = _net(TreeRNN, vocab, 3)
    eager = _run(net, inputs, None)
    found = first_group.find

    def reversed_ids(*args):
        q, vid, ids = found(*args)
        return q, vid, ids[::-1].copy()
    monkeypatch.setattr(first_group, "find", reversed_ids)
    got, calls = _planned(net, inputs, True)
    assert calls > 0
    _assert_same(got, eager)


def test_sequence_of_forests_on_kept_tables():
    """Forests of one vocabulary in sequence through one hybridized net: the early call's
    tables are the rows kept from an earlier, larger forest (NOTE [sized recorded groups])."""
    forests = [FORESTS[name]() for name in ("sst", "mixed", "single_node", "balanced")]
    forests.append(synthetic_treebank(9, shape="sst", seed=5, max_length=12))
    vocab = build_vocab([t for trees in forests for t in trees])
    net = _net(TreeLSTM, vocab, 4)
    for trees in forests:
        forest = batchify_forest([encode_tree(t, vocab) for t in trees])
        inputs = [nd.array(getattr(forest, n)) for n in ("tokens", "left", "right", "roots")]
        early, _ = _planned(net, inputs, True)
        _assert_same(early, _run(net, inputs, None))
