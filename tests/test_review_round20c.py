"""Hostile review (session 20) of NOTE [sized recorded groups] and NOTE [bulked groups] in
gluon_cf/recursion/planned_backward.py: the static CachedOps of a row count, their states and
the power-of-two tables are reused from batch to batch, so every test runs a sequence of
batches through one net and compares each batch with plain eager recursion (the oracle),
float64 at 1e-10: parameters moved by Trainer.step in between (a CachedOp state must read
the new values), groups of 1, 63, 64, 65 and 128 rows and tables across powers of two,
mutual recursion, grad_req toggled between 'write', 'null' and 'add', a gradient asked of an
input, several forwards of one net before one backward (one state per outstanding call).
No defect of the change was found; these keep it so. (Two threads training two hybridized
recursive nets at once on the same batches failed or crashed with or without the change,
planned backward or not: MXNet's history on the shared input arrays, fixed since, see
tests/test_threads_shared_inputs.py.)"""
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon, nd

import gluon_cf
from gluon_cf.data.trees import batchify_forest, build_vocab, encode_tree, parse_tree
from gluon_cf.models.recursive import TreeLSTM, TreeRNN
from gluon_cf.recursion import planned_backward
from test_schedule import _EvenOdd

WORDS = ["w%d" % i for i in range(5)]


def _trees(n, depth):
    """``n`` chains of ``depth`` combines: groups of ``n`` rows per level, ``2 n`` leaves at
    the bottom (and ``n`` at every other level)."""
    trees = []
    for i in range(n):
        s = "(2 %s)" % WORDS[i % 5]
        for d in range(depth):
            s = "(2 %s (2 %s))" % (s, WORDS[(i + d) % 5])
        trees.append(parse_tree(s))
    return trees


# rows 1, 33, 63, 64, 65, 128 and tables of 3 .. 384 rows (powers of two crossed both ways)
SHAPES = [(32, 1), (64, 1), (65, 1), (1, 1), (63, 2), (128, 1), (1, 3), (64, 1)]
VOCAB = build_vocab(_trees(5, 1))


def _inputs(trees):
    forest = batchify_forest([encode_tree(t, VOCAB) for t in trees])
    return [nd.array(getattr(forest, n)) for n in ("tokens", "left", "right", "roots")]


BATCHES = [_inputs(_trees(n, d)) for n, d in SHAPES]


def _net(make):
    mx.random.seed(3)
    net = make()
    net.initialize(mx.init.Xavier())
    net.cast("float64")
    return net


def _pair(make):
    """The same parameters eagerly and hybridized on the planned backward."""
    gluon_cf.set_executor("batched", ahead_of_time=True)
    eager, planned = _net(make), _net(make)
    planned.hybridize()
    return eager, planned


def _step(net, inputs, trainer=None):
    """Output and parameter gradients of ``mean(out ** 2)``; then ``trainer.step``."""
    for p in net.collect_params().values():
        if p.grad_req == "write":
            p.zero_grad()
    with autograd.record():
        out = net(*inputs)
        loss = (out * out).mean()
    loss.backward()
    got = [out.asnumpy()] + [p.grad().asnumpy().copy() if p.grad_req != "null" else np.zeros(1)
                             for p in net.collect_params().values()]
    if trainer is not None:
        trainer.step(1, ignore_stale_grad=True)
    return got


def _same(got, expected, what):
    for i, (g, e) in enumerate(zip(got, expected)):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12, err_msg="%s: array %d" % (what, i))


def _params(net):
    return [p.data().asnumpy() for p in net.collect_params().values()]


def _sized_calls():
    return planned_backward.SIZED_CALLS[0]


def _check_training(make, batches):
    eager, planned = _pair(make)
    trainers = [gluon.Trainer(n.collect_params(), "sgd", {"learning_rate": 0.3})
                for n in (eager, planned)]
    before, runs = _sized_calls(), planned_backward.RUNS[0]
    for k, inputs in enumerate(batches):
        expected = _step(eager, inputs, trainers[0])
        _same(_step(planned, inputs, trainers[1]), expected, "batch %d" % k)
        _same(_params(planned), _params(eager), "parameters after step %d" % k)
    assert planned_backward.RUNS[0] - runs == len(batches)
    assert _sized_calls() > before


def test_trainer_steps_between_batches_of_other_row_counts():
    """Batch after batch the groups of a row count run by the same static CachedOp (and
    state) on parameters the Trainer changed in place: equal to eager, gradients and the
    parameters after each step."""
    _check_training(lambda: TreeLSTM(len(VOCAB), embed_size=4, hidden_size=3, num_classes=2),
                    BATCHES + BATCHES[:3])


def test_mutual_recursion_between_trainer_steps():
    _check_training(lambda: _EvenOdd(len(VOCAB)), BATCHES[:6])


def test_grad_req_changed_between_batches():
    """'null' (no gradient buffer: an unmarked alias), 'add' and back to 'write' on the
    same CachedOps of a row count: the backward's requests change from call to call."""
    eager, planned = _pair(lambda: TreeRNN(len(VOCAB), embed_size=4, hidden_size=3,
                                           num_classes=2))
    patterns = [{}, {"embedding": "null"}, {"leaf": "null", "embedding": "null"},
                {"combine": "null"}, {"embedding": "add", "dense": "add"}, {}]
    before = _sized_calls()
    for k, pattern in enumerate(patterns):
        for net in (eager, planned):
            for name, p in net.collect_params().items():
                p.grad_req = next((r for frag, r in pattern.items() if frag in name), "write")
        inputs = BATCHES[(k * 3) % len(BATCHES)]
        _same(_step(planned, inputs), _step(eager, inputs), "pattern %s" % pattern)
    assert _sized_calls() > before


class _Features(gluon.HybridBlock):
    """Leaves and internal nodes read rows of an input ``x`` that asks for a gradient."""

    def __init__(self, hidden=4, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.cell = gluon.nn.Dense(hidden, in_units=2 * hidden, activation="tanh",
                                       flatten=False)
            self.leaf = gluon.nn.Dense(hidden, in_units=hidden, activation="tanh",
                                       flatten=False)

    def hybrid_forward(self, F, x, left, right, roots):
        def row(idx):
            return F.Embedding(idx, x, input_dim=512, output_dim=4)

        @gluon_cf.recursive
        def node(idx):
            def internal():
                children = F.concat(node(F.take(left, idx)), node(F.take(right, idx)), dim=-1)
                return self.cell(children) + row(idx)
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: self.leaf(row(idx)) * row(idx),
                                 internal)
        outs, _ = gluon_cf.foreach(lambda r, _: (node(r.reshape((1,))), []), roots, [])
        return outs


def test_input_gradient_added_across_batches():
    """A marked input (grad_req 'add', its buffer holding ones already) through the sized
    CachedOps, batch after batch: its gradient and the parameters' are eager's."""
    eager, planned = _pair(_Features)
    rng = np.random.RandomState(0)
    before = _sized_calls()
    for k, (_, left, right, roots) in enumerate(BATCHES[:6]):
        features = rng.uniform(-1, 1, (512, 4))
        got = []
        for net in (eager, planned):
            x = nd.array(features, dtype="float64")
            x.attach_grad(grad_req="add")
            x.grad[:] = 1
            got.append(_step(net, [x, left, right, roots]) + [x.grad.asnumpy()])
        _same(got[1], got[0], "batch %d" % k)
    assert _sized_calls() > before


def test_several_forwards_before_one_backward():
    """Calls of one row count outstanding at once (one net, several batches on one tape,
    the same batch twice): each its own CachedOp state, so each backward reads its own."""
    eager, planned = _pair(lambda: TreeLSTM(len(VOCAB), embed_size=4, hidden_size=3,
                                            num_classes=2))
    before = _sized_calls()
    for order in ([1, 1], [0, 1, 7, 3, 1]):
        got = []
        for net in (eager, planned):
            net.collect_params().zero_grad()
            with autograd.record():
                loss = sum((k + 1) * (o * o).mean()
                           for k, o in enumerate(net(*BATCHES[i]) for i in order))
            loss.backward()
            got.append([p.grad().asnumpy().copy() for p in net.collect_params().values()])
        _same(got[1], got[0], "order %s" % order)
    assert _sized_calls() > before
