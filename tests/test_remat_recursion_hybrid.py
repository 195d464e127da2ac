"""Hybridized ``@gluon_cf.recursive(remat=True)`` (NOTE [hybridized remat recursion] in
gluon_cf/recursion/planned_backward.py): outputs and gradients (parameters and inputs) equal
those of ``remat=False`` and of eager Python recursion, on every executor; counters prove the
recomputation happened (per group on a planned schedule, per node elsewhere); random operators
replay their draws or the backward fails naming the function and the user's line."""
import hypothesis.strategies as st
import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings
from mxnet import autograd, gluon, nd

import gluon_cf
from gluon_cf import node as _node
from gluon_cf.data.trees import synthetic_treebank
from gluon_cf.models.recursive import ChildSumTreeLSTM, TreeLSTM, TreeRNN
from gluon_cf.recursion import planned_backward
from test_schedule import _forest

TOL = dict(rtol=1e-5, atol=1e-5)
EXECUTORS = [("batched", True), ("batched", False), ("unbatched", True)]


@pytest.fixture(autouse=True)
def restore_executor():
    previous = gluon_cf.get_executor()
    yield
    gluon_cf.set_executor(previous)
    planned_backward.SEED_GROUPS[0] = True


def _counts():
    return planned_backward.RECOMPUTED[0], _node.REMAT_RERUNS[0]


def _train(net, inputs, executor, grad_inputs=()):
    """Outputs, parameter gradients (in parameter order) and gradients of the inputs at
    ``grad_inputs`` of ``sum(out ** 2)``; eager when ``executor`` is None. Also the groups
    and nodes recomputed."""
    if executor is None:
        net.hybridize(active=False)
    else:
        gluon_cf.set_executor(*executor)
        net.hybridize()
    inputs = [x.copy() for x in inputs]
    for i in grad_inputs:
        inputs[i].attach_grad()
    before = _counts()
    with autograd.record():
        out = net(*inputs)
        loss = (out * out).sum()
    loss.backward()
    grads = [p.grad().asnumpy().copy() for p in net.collect_params().values()
             if p.grad_req != "null"]
    grads += [inputs[i].grad.asnumpy().copy() for i in grad_inputs]
    after = _counts()
    return out.asnumpy(), grads, (after[0] - before[0], after[1] - before[1])


def _assert_same(got, expected):
    np.testing.assert_allclose(got[0], expected[0], **TOL)
    assert len(got[1]) == len(expected[1])
    for g, e in zip(got[1], expected[1]):
        np.testing.assert_allclose(g, e, **TOL)


def _three_ways(make, inputs, executor, grad_inputs=()):
    """remat=True hybridized == remat=False hybridized == remat=False eager (== remat=True
    eager); returns the counts of the hybridized remat=True run."""
    eager = _train(make(False), inputs, None, grad_inputs)
    plain = _train(make(False), inputs, executor, grad_inputs)
    remat = _train(make(True), inputs, executor, grad_inputs)
    assert plain[2] == (0, 0)
    _assert_same(plain, eager)
    _assert_same(remat, eager)
    _assert_same(_train(make(True), inputs, None, grad_inputs), eager)
    return remat[2]


def _model(cls, vocab, seed=0, **kwargs):
    def make(remat):
        mx.random.seed(seed)
        net = cls(len(vocab), embed_size=3, hidden_size=3, num_classes=2, remat=remat,
                  **kwargs)
        net.initialize(mx.init.Xavier())
        return net
    return make


# ---- the models: a recursion inside a foreach over the roots --------------------------------

@settings(max_examples=4, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10 ** 6), shape=st.sampled_from(["sst", "balanced", "linear"]),
       trees=st.integers(1, 4), length=st.integers(1, 9),
       model=st.sampled_from([TreeLSTM, TreeRNN]))
def test_models_on_random_forests_recompute_every_group(seed, shape, trees, length, model):
    vocab, inputs = _forest(synthetic_treebank(trees, shape=shape, seed=seed, max_length=length))
    groups, _ = _three_ways(_model(model, vocab, seed % 5), inputs, ("batched", True))
    assert groups >= 1


@pytest.mark.parametrize("executor", EXECUTORS[1:])
def test_models_on_other_executors(executor):
    """Inside the models' foreach the recursion is not planned here: recorded on the
    foreach's tape (NOTE [hybridized remat recursion]), gradients unchanged."""
    vocab, inputs = _forest(synthetic_treebank(3, shape="sst", seed=5, max_length=8))
    _three_ways(_model(TreeLSTM, vocab), inputs, executor)


def test_child_sum_tree_lstm():
    """A while_loop inside the recursion, the recursion inside a foreach."""
    tokens = nd.array([1, 2, 3, 4, 0, 5])
    child_ptr = nd.array([0, 0, 0, 0, 3, 3, 5])   # node 3: children 0-2; node 5: 3, 4
    child_idx = nd.array([0, 1, 2, 3, 4])
    roots = nd.array([5, 3])
    _three_ways(_model(ChildSumTreeLSTM, range(6)), [tokens, child_ptr, child_idx, roots],
                ("batched", True))


class _RootsLoop(gluon.HybridBlock):
    """A TreeRNN whose foreach over the roots may itself have remat (a remat recursion in a
    remat loop's step)."""

    def __init__(self, remat, loop_remat, **kwargs):
        super().__init__(**kwargs)
        self.remat, self.loop_remat = remat, loop_remat
        with self.name_scope():
            self.embed = gluon.nn.Embedding(20, 4)
            self.cell = gluon.nn.Dense(4, in_units=8, activation="tanh")

    def hybrid_forward(self, F, tokens, left, right, roots):
        @gluon_cf.recursive(remat=self.remat)
        def node(i):
            return gluon_cf.cond(
                F.take(left, i) < 0, lambda: F.tanh(self.embed(F.take(tokens, i))),
                lambda: self.cell(F.concat(node(F.take(left, i)), node(F.take(right, i)),
                                           dim=1)))
        hs, _ = gluon_cf.foreach(lambda root, _: (node(root), []), roots, [],
                                 remat=self.loop_remat)
        return hs


@pytest.mark.parametrize("executor", EXECUTORS[:2])
@pytest.mark.parametrize("loop_remat", [False, True])
def test_recursion_inside_a_remat_foreach(executor, loop_remat):
    _, inputs = _forest(synthetic_treebank(3, shape="sst", seed=5, max_length=8))
    inputs[0] = inputs[0] % 20

    def make(remat):
        mx.random.seed(1)
        net = _RootsLoop(remat, loop_remat)
        net.initialize(mx.init.Uniform(0.7))
        return net
    groups, _ = _three_ways(make, inputs, executor)
    assert groups > 0 or executor != ("batched", True)


# ---- a recursion called by hybrid_forward itself: the node is the top-level one -------------

class _Chain(gluon.HybridBlock):
    """``h(i) = tanh(W [x_i; h(i - 1)])`` down a chain, ``x`` an input needing a gradient; with
    ``loop``, the body also runs a foreach (a loop inside the recursion)."""

    def __init__(self, remat, loop=False, dropout=0.0, hidden=4, leaf_dropout=0.0,
                 noise=False, **kwargs):
        super().__init__(**kwargs)
        self.remat, self.loop, self.hidden, self.noise = remat, loop, hidden, noise
        with self.name_scope():
            self.cell = gluon.nn.Dense(hidden, in_units=2 * hidden, activation="tanh",
                                       flatten=False)
            self.drop = gluon.nn.Dropout(dropout) if dropout else None
            self.leaf_drop = gluon.nn.Dropout(leaf_dropout) if leaf_dropout else None

    def hybrid_forward(self, F, x, n):
        @gluon_cf.recursive(remat=self.remat)
        def chain(i):
            xi = F.Embedding(i, x, input_dim=7, output_dim=self.hidden)
            if self.drop is not None:
                xi = self.drop(xi)
            if self.noise:   # a random operator with an input: its draws are seeded
                xi = xi + 0.1 * F.random.uniform_like(xi)
            if self.loop:   # three steps of a scan over x's first rows, xi the state
                def step(row, states):
                    scaled = F.broadcast_mul(states[0], row.reshape((1, -1)))
                    return [], [F.tanh(scaled + 0.5)]
                _, (xi,) = gluon_cf.foreach(step, F.slice_axis(x, axis=0, begin=0, end=3),
                                            [xi])

            def inner():
                return self.cell(F.concat(xi, chain(i - 1), dim=1))
            def leaf():
                return F.tanh(xi if self.leaf_drop is None else self.leaf_drop(xi))
            return gluon_cf.cond(i < 1, leaf, inner)
        return chain(n)


def _chain(remat, **kwargs):
    mx.random.seed(3)
    net = _Chain(remat, **kwargs)
    net.initialize(mx.init.Uniform(0.7))
    return net


CHAIN = [nd.array(np.random.RandomState(0).uniform(-1, 1, (7, 4))), nd.array([6])]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_chain_on_every_executor(executor):
    groups, nodes = _three_ways(_chain, CHAIN, executor, grad_inputs=[0])
    if executor == ("batched", True):   # planned: every level a group, recomputed alone
        assert (groups, nodes) == (7, 0)
    else:   # the whole node re-run in its backward
        assert (groups, nodes) == (0, 1)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_foreach_inside_the_recursive_body(executor):
    groups, nodes = _three_ways(lambda remat: _chain(remat, loop=True), CHAIN, executor,
                                grad_inputs=[0])
    assert (groups, nodes) == (0, 1)   # a loop in the body: no schedule, the node re-runs


class _EvenOdd(gluon.HybridBlock):
    """Two mutually recursive functions, only ``odd`` with remat (the node is rematerialised
    when any function of its table is)."""

    def __init__(self, remat, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.a = gluon.nn.Dense(3, in_units=3, activation="tanh")
            self.b = gluon.nn.Dense(3, in_units=3, activation="sigmoid")
        self.remat = remat

    def hybrid_forward(self, F, x, n):
        @gluon_cf.recursive
        def even(i):
            return gluon_cf.cond(i < 1, lambda: F.take(x, i),
                                 lambda: self.a(odd(i - 1) + F.take(x, i)))

        @gluon_cf.recursive(remat=self.remat)
        def odd(i):
            return self.b(even(i - 1) * F.take(x, i))
        return even(n)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_mutual_recursion(executor):
    def make(remat):
        mx.random.seed(4)
        net = _EvenOdd(remat)
        net.initialize(mx.init.Uniform(0.7))
        return net
    inputs = [nd.array(np.random.RandomState(1).uniform(-1, 1, (9, 3))), nd.array([8])]
    groups, nodes = _three_ways(make, inputs, executor, grad_inputs=[0])
    assert groups + nodes >= 1


# ---- randomness -----------------------------------------------------------------------------

def _train_counting(net, monkeypatch):
    """``_train`` on CHAIN, planned, with the calls of ``mx.random.seed`` it made and the
    groups recomputed from their kept draws and seeded (NOTE [replayed draws])."""
    seeds = []
    seed = mx.random.seed
    monkeypatch.setattr(mx.random, "seed", lambda *a, **k: (seeds.append(a), seed(*a, **k)))
    replayed, seeded = planned_backward.REPLAYED[0], planned_backward.SEEDED[0]
    got = _train(net, CHAIN, ("batched", True), grad_inputs=[0])
    monkeypatch.setattr(mx.random, "seed", seed)
    return got, len(seeds), (planned_backward.REPLAYED[0] - replayed,
                             planned_backward.SEEDED[0] - seeded)


def _fixed_node_seed(monkeypatch):
    """The node seeds the generator of the thread its forward runs on (MXNet 1.9.1 keeps one
    per thread, which the user's ``mx.random.seed`` does not reach: NOTE [replayed draws])
    with a seed drawn from it; fixed here, so that two runs draw the same numbers."""
    monkeypatch.setattr(_node, "drawn_seed", lambda: 1234)


def test_dropout_gradients_equal_remat_false_with_the_same_seed(monkeypatch):
    """Dropout in every group of a planned remat recursion: each group keeps its mask and its
    recomputation reads it back, so outputs and gradients are those of remat=False with the
    same seed (the same draws, in the same order), on the first call and the next; MXNet's
    generator is seeded by the node only (its own replay: in its forward, and again when its
    backward re-runs it for other marks), never per group."""
    _fixed_node_seed(monkeypatch)
    got = {}
    for remat in (False, True):
        net = _chain(remat, dropout=0.5)
        got[remat] = [_train_counting(net, monkeypatch) for _ in range(2)]
    for call in range(2):
        (remat, seeds, (replayed, seeded)), plain = got[True][call], got[False][call][0]
        assert remat[2] == (7, 0) and (replayed, seeded) == (7, 0) and seeds <= 2
        _assert_same(remat, plain)
    undropped = _train(_chain(False), CHAIN, ("batched", True), grad_inputs=[0])
    assert not np.allclose(undropped[0], got[True][0][0][0])   # Dropout did drop


def test_a_group_drawing_nothing_is_not_reseeded(monkeypatch):
    """Dropout in the base case only: the leaves' group keeps its mask; the cell's groups draw
    nothing and are recomputed as they are. Gradients equal remat=False's."""
    _fixed_node_seed(monkeypatch)
    got = {}
    for remat in (False, True):
        got[remat] = _train_counting(_chain(remat, leaf_dropout=0.5), monkeypatch)
    assert got[True][1] <= 2 and got[True][2] == (1, 0)
    _assert_same(got[True][0], got[False][0])


def test_draws_that_cannot_be_kept_are_seeded_per_group(monkeypatch):
    """``uniform_like(x)`` (a random operator with an input): its group is seeded, in the
    forward (each run of the node's: its backward may re-run it for other marks) and the
    recomputation, whose outputs are compared with the forward's."""
    runs = _node.node_runs()
    (_, grads, counts), seeds, (replayed, seeded) = _train_counting(
        _chain(True, noise=True), monkeypatch)
    runs = _node.node_runs() - runs
    assert counts == (7, 0) and (replayed, seeded) == (0, 7 * (runs + 1))
    assert seeds == runs + seeded   # the node's seed in each run, and the groups' seeds
    assert np.isfinite(grads[-1]).all()


def test_seeded_groups_without_seeds_fail_the_backward():
    """The check that proves the seeded replay: without the per-group seeds the recomputation
    draws other numbers, and the backward fails naming the function, the op and the line."""
    planned_backward.SEED_GROUPS[0] = False
    net = _chain(True, noise=True)
    with pytest.raises(RuntimeError, match=r"gluon_cf.recursive 'chain' at .*"
                       r"test_remat_recursion_hybrid.py:\d+: with remat=True, a group of calls "
                       r"recomputed in backward gave other values than in the forward "
                       r"\(random operators: _random_uniform_like\)"):
        _train(net, CHAIN, ("batched", True), grad_inputs=[0])
        mx.nd.waitall()


@pytest.mark.parametrize("executor", EXECUTORS[1:])
def test_dropout_on_a_node_re_run(executor):
    """Re-run whole: seeded as its forward, compared with the forward's outputs; the same
    draws here (the same executor path), so the backward passes."""
    net = _chain(True, dropout=0.5)
    out, grads, counts = _train(net, CHAIN, executor, grad_inputs=[0])
    assert counts == (0, 1) and np.isfinite(grads[-1]).all()


# ---- memory ---------------------------------------------------------------------------------

def test_remat_keeps_less_memory_in_a_fresh_process():
    """Peak RSS growth of one forward+backward of the hybridized TreeLSTM (H=150) on a
    4,000-node chain, each run in a fresh process by the memory benchmark: 152-159 and 58-74
    MB measured (ratio 0.36-0.49), 129-148 and 66-92 under load (0.48-0.67, a failure at 0.7
    in one loaded run); a loose bound (the groups recomputed one at a time keep far less). On
    1,500 nodes the heap's noise (~20 MB) put the ratio at 0.30-0.65, and over 0.7
    once under load. Beside another job (load ~3) the smaller of two runs was 0.72 once
    (remat 102 MB both times, where 59-70 quiet: MXNet's threaded engine holds more work in
    flight when its threads wait for a core), hence up to three."""
    from gluon_cf.bench import memory
    peak: dict = {}
    for attempt in range(3):   # the heap's noise only adds: the smallest of the runs each
        for impl in ("gluon_cf", "gluon_cf_remat"):
            result = memory.measure(memory.Cell("treelstm_chain", impl, "train", 4000), 8, 2,
                                    150, timeout=300)
            assert "peak_mb" in result, result
            peak[impl] = min(peak.get(impl, result["peak_mb"]), result["peak_mb"])
        if peak["gluon_cf_remat"] < 0.7 * peak["gluon_cf"]:
            break
    assert peak["gluon_cf_remat"] < 0.7 * peak["gluon_cf"], peak
