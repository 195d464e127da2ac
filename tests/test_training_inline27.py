"""Training of a hybridized block holding a recursion with its gluon_cf nodes run in the
calling thread (NOTE [recursion training in the calling thread] in gluon_cf/hybrid_training.py):
the same outputs and gradients as the block's Custom operator (``INLINE`` off) and eager
Python, with grad_req='add', several calls before one backward, a call never backpropagated,
a failing call, threads; graphs drawing random numbers keep the Custom operator."""
import gc
import subprocess
import sys
import textwrap
import threading

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

import gluon_cf
from gluon_cf import hybrid_training, remat_record
from gluon_cf.data.trees import (batchify_forest, build_vocab, encode_tree, parse_tree,
                                  synthetic_treebank)
from gluon_cf.models.recursive import RNTN, ChildSumTreeLSTM, TopDownTreeLSTM, TreeLSTM, TreeRNN
from gluon_cf.recursion import planned_backward

TOL = dict(rtol=1e-5, atol=1e-6)
TREES = list(synthetic_treebank(4, shape="sst", seed=5, max_length=9)) + \
    [parse_tree("(1 good)"), parse_tree("(2 (1 a) (3 b) (2 c))")]
VOCAB = build_vocab(TREES)


@pytest.fixture(autouse=True)
def restore():
    previous = gluon_cf.get_executor()
    gluon_cf.set_executor("batched")
    yield
    gluon_cf.set_executor(previous)
    hybrid_training.INLINE[0] = True


def _forest(trees, binary=True, names=("tokens", "left", "right", "roots")):
    forest = batchify_forest([encode_tree(t, VOCAB, binary=binary) for t in trees])
    return [nd.array(getattr(forest, n)) for n in names]


def _model(name):
    """A small model and two batches of its inputs."""
    mx.random.seed(1)
    if name == "TopDownTreeLSTM":
        net = TopDownTreeLSTM(input_size=3, hidden_size=4, max_depth=3)
        batches = [[nd.array(np.random.RandomState(k).normal(0, 3, (n, 3)))]
                   for k, n in ((0, 4), (1, 3))]
    elif name == "ChildSumTreeLSTM":
        net = ChildSumTreeLSTM(len(VOCAB), embed_size=3, hidden_size=4, num_classes=2,
                               max_children=4)
        names = ("tokens", "child_ptr", "child_idx", "roots")
        batches = [_forest(TREES[:4], False, names), _forest(TREES[3:], False, names)]
    else:
        net = {"TreeLSTM": TreeLSTM, "TreeRNN": TreeRNN, "RNTN": RNTN}[name](
            len(VOCAB), embed_size=3, hidden_size=4, num_classes=2)
        batches = [_forest(TREES[:4]), _forest(TREES[2:5])]
    net.initialize(mx.init.Xavier())
    return net, batches


def _loss(out):
    outs = out if isinstance(out, (list, tuple)) else [out]
    return sum((o.astype("float32") * o.astype("float32")).sum() for o in outs[:1])


def _train(net, batches, way, grad_req="write", rounds=1):
    """Outputs and parameter gradients of ``rounds`` backwards, each of one record() holding a
    call per batch; ``way``: eager, custom (the Custom operator) or inline. Also how many
    nodes ran in the calling thread."""
    net.hybridize(active=way != "eager")
    hybrid_training.INLINE[0] = way == "inline"
    params = net.collect_params()
    for p in params.values():
        p.grad_req = grad_req
        p.zero_grad()
    runs = hybrid_training.RUNS[0]
    outs = []
    for _ in range(rounds):
        with autograd.record():
            out = [net(*inputs) for inputs in batches]
            loss = sum(_loss(o) for o in out)
        loss.backward()
        outs += [(o[0] if isinstance(o, (list, tuple)) else o).asnumpy() for o in out]
    grads = {k: p.grad().asnumpy().copy() for k, p in params.items()}
    return outs, grads, hybrid_training.RUNS[0] - runs


def _same(got, expected):
    for g, e in zip(got[0], expected[0]):
        np.testing.assert_allclose(g, e, **TOL)
    for k in expected[1]:
        np.testing.assert_allclose(got[1][k], expected[1][k], err_msg=k, **TOL)


@pytest.mark.parametrize("name", ["TreeLSTM", "TreeRNN", "ChildSumTreeLSTM", "RNTN",
                                  "TopDownTreeLSTM"])
def test_gradients_as_the_custom_operator_and_eager(name):
    net, batches = _model(name)
    eager = _train(net, batches[:1], "eager")
    custom = _train(net, batches[:1], "custom")
    inline = _train(net, batches[:1], "inline")
    assert custom[2] == 0 and inline[2] >= 1
    _same(inline, custom)
    _same(inline, eager)
    # grad_req='add', two calls before one backward, two backwards
    eager = _train(net, batches, "eager", "add", rounds=2)
    inline = _train(net, batches, "inline", "add", rounds=2)
    assert inline[2] >= 4
    _same(inline, eager)


def test_planned_backward_runs_in_the_calling_threads_node():
    net, batches = _model("TreeLSTM")
    _train(net, batches, "inline")   # (the first call learns which inputs need gradients)
    runs = planned_backward.RUNS[0]
    _train(net, batches, "inline")
    assert planned_backward.RUNS[0] - runs == 2


def test_a_call_never_backpropagated_and_a_failing_call():
    net, batches = _model("TreeRNN")
    expected = _train(net, batches[:1], "custom")
    hybrid_training.INLINE[0] = True
    alive = len(remat_record._alive)
    with autograd.record():
        dropped = net(*batches[1])   # never backpropagated
    del dropped
    gc.collect()
    mx.nd.waitall()
    assert len(remat_record._alive) == alive   # the node went with its outputs
    cycle = [a.copy() for a in batches[0]]
    left = cycle[1].asnumpy()
    left[int(cycle[3].asnumpy()[0])] = cycle[3].asnumpy()[0]   # a root its own child
    cycle[1] = nd.array(left)
    with pytest.raises(Exception, match="(?i)depth|cycle"):
        with autograd.record():
            _loss(net(*cycle)).backward()
        mx.nd.waitall()
    _same(_train(net, batches[:1], "inline"), expected)   # still usable, the same gradients


class _Dropped(gluon.HybridBlock):
    """A tree model whose output goes through Dropout: random numbers in the graph."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def hybrid_forward(self, F, *inputs):
        return F.Dropout(self.net(*inputs), p=0.5)


def test_random_numbers_keep_the_custom_operator():
    net, batches = _model("TreeRNN")
    block = _Dropped(net)
    block.hybridize()
    runs = hybrid_training.RUNS[0]
    with autograd.record():
        loss = _loss(block(*batches[0]))
    loss.backward()
    assert hybrid_training.RUNS[0] == runs and np.isfinite(loss.asscalar())


def test_threads():
    nets = [_model("TreeLSTM") for _ in range(3)]
    expected = [_train(net, batches, "inline") for net, batches in nets]
    got: dict = {}

    def train(k):
        net, batches = nets[k]
        for p in net.collect_params().values():
            p.zero_grad()
        with autograd.record():
            loss = sum(_loss(net(*inputs)) for inputs in batches)
        loss.backward()
        got[k] = {n: p.grad().asnumpy().copy() for n, p in net.collect_params().items()}

    threads = [threading.Thread(target=train, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for k, (_, grads, runs) in enumerate(expected):
        assert runs >= 2
        _same(([], got[k]), ([], grads))


# The usual loop, a parameter update pushed right after the backward (Trainer.step, or an
# update by autograd.grad's gradients), without a wait: the node's backward, run later on
# MXNet's thread, pushes reads of the parameters behind the update, which waits for the
# gradient that backward computes (NOTE [recursion training in the calling thread]: a hang
# without backward()'s and grad()'s wait). In a subprocess with a timeout.
_UPDATES = textwrap.dedent("""
    import mxnet as mx
    from mxnet import autograd, gluon, nd
    import gluon_cf
    from gluon_cf import hybrid_training
    from gluon_cf.data.trees import batchify_forest, build_vocab, encode_tree, synthetic_treebank
    from gluon_cf.models.recursive import TreeRNN
    trees = synthetic_treebank(12, shape="sst", seed=0, max_length=8)
    vocab = build_vocab(trees)
    forests = [batchify_forest([encode_tree(t, vocab) for t in trees[k:k + 3]])
               for k in range(0, 12, 3)]
    net = TreeRNN(len(vocab), embed_size=3, hidden_size=4, num_classes=2)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    params = [p.data() for p in net.collect_params().values()]
    for step in range(12):
        f = forests[step % 4]
        with autograd.record():
            out = net(*[nd.array(getattr(f, n)) for n in ("tokens", "left", "right", "roots")])
            loss = (out * out).sum()
        if step % 2:
            for p, g in zip(params, autograd.grad(loss, params)):
                p[:] -= 0.1 * g
        else:
            loss.backward()
            trainer.step(1)
    print(hybrid_training.RUNS[0], loss.asscalar())
""")


def test_updates_right_after_backward_do_not_hang():
    proc = subprocess.run([sys.executable, "-c", _UPDATES], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs, loss = proc.stdout.split()
    assert int(runs) == 12 and np.isfinite(float(loss))
