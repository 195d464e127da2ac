"""Hostile review (round 24r) of an inference batch's two fast paths on an ahead-of-time
schedule: the first group called before the layout (NOTE [the first group before the layout]
in gluon_cf/recursion/first_group.py) and sized calls without ``BlockGrad`` (NOTE [sized calls
without BlockGrad] in gluon_cf/recursion/value_graphs.py).

Oracles: eager per-node Python recursion and the unbatched executor, forward values (the
schedule's tables starting as NaN, so a row read before it is written shows) and gradients.
Inputs: random forests that are DAGs (shared subtrees, single nodes, roots that are leaves,
repeated roots), a recursion with leaf variants reading the environment (a block input and a
parameter) and ``BlockGrad`` s of its own, one whose entry is never a leaf (its base case calls
another function, whose leaves are the first group), mutual recursion where both functions
have leaves; a first group of more than 512 rows (called unpadded); recorded calls in every
autograd mode interleaved with inference calls of the same block; results held across later
calls; two threads calling one block."""
import contextlib
import threading
from unittest import mock

import hypothesis.strategies as st
import mxnet as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from mxnet import autograd, gluon, nd

import gluon_cf
from gluon_cf.recursion import first_group, schedule
from test_schedule import _EvenOdd, _assert_same, _run
from test_schedule_h28perf import stopped_right_fold
from test_schedule_sizes import _nan_tables, fresh_plans  # noqa: F401

VOCAB, HIDDEN = 7, 3
TOL = dict(rtol=1e-4, atol=1e-5)


class _Variants(gluon.HybridBlock):
    """Two leaf variants, one reading a parameter, the other a block input (the environment)
    through the user's own ``BlockGrad``; the right child's term stopped too."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.embed = gluon.nn.Embedding(VOCAB, HIDDEN)
            self.a = gluon.nn.Dense(HIDDEN, in_units=HIDDEN, flatten=False)
            self.b = gluon.nn.Dense(HIDDEN, in_units=HIDDEN, flatten=False)
            self.scale = self.params.get("scale", shape=(1, HIDDEN))

    def hybrid_forward(self, F, tokens, left, right, roots, extra, scale):
        def leaf(idx):
            x = self.embed(F.take(tokens, idx))
            return gluon_cf.cond(F.take(tokens, idx) > 3,
                                 lambda: F.tanh(x) * F.broadcast_like(scale, x),
                                 lambda: F.BlockGrad(x) * 2 + F.broadcast_like(extra, x))

        return stopped_right_fold(F, self, leaf, left, right, roots)


class _NeverLeaf(gluon.HybridBlock):
    """The entry is never a leaf: its base case calls ``zleaf``, whose rows are the first
    group (a ``stop_gradient`` and a block input in its body)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.embed = gluon.nn.Embedding(VOCAB, HIDDEN)
            self.a = gluon.nn.Dense(HIDDEN, in_units=HIDDEN, flatten=False)

    def hybrid_forward(self, F, tokens, left, right, roots, extra):
        @gluon_cf.recursive
        def zleaf(idx):
            x = self.embed(F.take(tokens, idx))
            return F.stop_gradient(F.sigmoid(x)) + F.broadcast_like(extra, x)

        @gluon_cf.recursive
        def anode(idx):
            def internal():
                return F.tanh(self.a(anode(F.take(left, idx)) - anode(F.take(right, idx))))

            return gluon_cf.cond(F.take(left, idx) < 0, lambda: zleaf(idx) * 3, internal)

        h, _ = gluon_cf.foreach(lambda root, _: (anode(root), []), roots, [])
        return h


def _net(cls):
    mx.random.seed(1)
    net = _EvenOdd(VOCAB, hidden=HIDDEN) if cls is _EvenOdd else cls()
    net.initialize(mx.init.Uniform(0.7))
    return net


def _dag(seed, nodes, leaf_share, roots):
    """A forest's arrays whose trees share subtrees: node i's children are earlier nodes;
    roots any nodes (leaves too), repeated; and a block input for the environment."""
    rng = np.random.RandomState(seed)
    left, right = np.full(nodes, -1.0), np.full(nodes, -1.0)
    for i in range(1, nodes):
        if rng.rand() >= leaf_share:
            left[i], right[i] = rng.randint(0, i), rng.randint(0, i)
    arrays = [rng.randint(0, VOCAB, nodes), left, right, rng.randint(0, nodes, roots)]
    return [nd.array(a) for a in arrays] + [nd.array(rng.uniform(-1, 1, (1, HIDDEN)))]


def _inputs(net, arrays):
    return arrays if not isinstance(net, _EvenOdd) else arrays[:4]


def _inferred(net, arrays):
    gluon_cf.set_executor("batched")
    net.hybridize()
    return net(*arrays).asnumpy()


_NETS: dict = {}


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 10 ** 6), nodes=st.integers(1, 60),
       leaf_share=st.sampled_from([0.0, 0.3, 0.7, 1.0]), roots=st.integers(1, 24),
       cls=st.sampled_from([_Variants, _NeverLeaf, _EvenOdd]))
def test_first_group_pushed_early_equals_eager_and_unbatched(seed, nodes, leaf_share, roots,
                                                             cls):
    """Every inference batch pushes its first group before the layout, twice per forest
    (the second call sized): the outputs equal eager and unbatched ones, the tables starting
    as NaN, and bit for bit those of the group called in the loop."""
    net = _NETS.get(cls) or _NETS.setdefault(cls, _net(cls))
    arrays = _inputs(net, _dag(seed, nodes, leaf_share, roots))
    eager = _run(net, arrays, None, train=False)
    unbatched = _run(net, arrays, "unbatched", train=False)
    pushed = first_group.PUSHED[0]
    with pytest.MonkeyPatch.context() as patch:
        _nan_tables(patch)
        for _ in range(2):
            got = ([_inferred(net, arrays)], {})
            _assert_same(got, eager, TOL)
            _assert_same(got, unbatched, TOL)
        assert first_group.PUSHED[0] == pushed + 2
        patch.setattr(first_group, "EARLY", [False])   # the group called in the loop instead
        np.testing.assert_array_equal(_inferred(net, arrays), got[0][0])
    assert first_group.PUSHED[0] == pushed + 2


def test_first_group_of_more_than_512_rows_is_called_unpadded(monkeypatch):
    """1,300 leaves, every one a root, and trees over them: the first group (the leaves of
    one variant) has more than ``PADDED_ROWS`` rows, called unpadded before the layout;
    outputs equal eager ones on the first call and on the next ones."""
    rng = np.random.RandomState(4)
    leaves, inner = 1300, 40
    left = np.concatenate([np.full(leaves, -1.0), rng.randint(0, leaves, inner)])
    right = np.concatenate([np.full(leaves, -1.0), rng.randint(0, leaves, inner)])
    tokens = np.arange(leaves + inner) % VOCAB   # both leaf variants, over 512 leaves each
    roots = np.concatenate([np.arange(leaves + inner), [3, 3]])
    arrays = [nd.array(a) for a in (tokens, left, right, roots)] + \
        [nd.array(rng.uniform(-1, 1, (1, HIDDEN)))]
    net = _net(_Variants)
    eager = _run(net, arrays, None, train=False)
    _nan_tables(monkeypatch)
    unpadded = []
    call = first_group.call

    def counted(graph, sized, size, values, tables):
        unpadded.append(size if sized is None else 0)
        return call(graph, sized, size, values, tables)

    monkeypatch.setattr(first_group, "call", counted)
    for _ in range(3):
        _assert_same(([_inferred(net, arrays)], {}), eager, TOL)
    assert len(unpadded) == 3 and min(unpadded) > schedule.PADDED_ROWS, unpadded


@contextlib.contextmanager
def _predict_in_record():
    with autograd.record(), autograd.predict_mode():
        yield


@contextlib.contextmanager
def _paused_in_record(train_mode):
    """Recorded, with the block's second call under ``pause`` (its output a constant)."""
    with autograd.record():
        yield lambda: autograd.pause(train_mode=train_mode)


_MODES = {
    "record": lambda: autograd.record(),
    "record(train_mode=False)": lambda: autograd.record(train_mode=False),
    "predict_mode in record": _predict_in_record,
}


def _gradients(net, arrays, mode, static):
    """Outputs and parameter gradients of ``sum(out**2)`` (+ ``sum(out * paused)`` for a
    paused second call) under ``mode``: eager when ``static`` is None, else hybridized."""
    if static is None:
        net.hybridize(active=False)
    else:
        gluon_cf.set_executor("batched")
        net.hybridize(static_alloc=static)
    net.collect_params().zero_grad()
    paused = mode.startswith("pause")
    with (_paused_in_record(mode.endswith("True")) if paused else _MODES[mode]()) as pause:
        out = net(*arrays)
        loss = (out * out).sum()
        if paused:
            with pause():
                constant = net(*arrays)
            loss = loss + (out * constant).sum()
    loss.backward()
    return ([out.asnumpy()],
            {k: p.grad().asnumpy().copy() for k, p in net.collect_params().items()})


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("mode", sorted(_MODES) + ["pause(train_mode=False) in record",
                                                   "pause(train_mode=True) in record"])
@pytest.mark.parametrize("cls", [_Variants, _NeverLeaf])
def test_recorded_calls_between_inference_calls_keep_block_grad(cls, mode, static):
    """The same block alternates inference calls (sized, without ``BlockGrad``) and calls
    under autograd (recorded, or run unrecorded and recomputed recorded by backward): outputs
    and gradients equal eager ones, the user's ``BlockGrad`` s stopping what they stop."""
    net = _net(cls)
    forests = [_dag(seed, nodes, 0.4, roots) for seed, nodes, roots in
               ((1, 30, 6), (2, 9, 3), (3, 45, 11))]
    eager = [_gradients(net, arrays, mode, None) for arrays in forests]
    inferred = [_run(net, arrays, None, train=False)[0][0] for arrays in forests]
    pushed = first_group.PUSHED[0]
    for arrays, want, values in list(zip(forests, eager, inferred)) * 2:
        np.testing.assert_allclose(_inferred(net, arrays), values, **TOL)
        _assert_same(_gradients(net, arrays, mode, static), want, TOL)
    assert first_group.PUSHED[0] >= pushed + 6


def test_held_results_and_two_threads(monkeypatch):
    """Results of earlier calls, held while later calls of other sizes run, keep their
    values; two threads calling one block get eager's outputs."""
    net = _net(_Variants)
    forests = [_dag(10 + k, (20, 25, 300, 12)[k % 4], 0.4, 3 + 2 * k) for k in range(8)]
    eager = [_run(net, arrays, None, train=False)[0][0] for arrays in forests]
    gluon_cf.set_executor("batched")
    net.hybridize()
    held = [net(*arrays) for arrays in forests * 2]
    for got, want in zip(held, eager * 2):
        np.testing.assert_allclose(got.asnumpy(), want, **TOL)
    failures = []

    def calls(first):
        try:
            for _ in range(3):
                for k in range(first, len(forests), 2):
                    got = net(*forests[k]).asnumpy()
                    if not np.allclose(got, eager[k], **TOL):
                        failures.append((first, k, float(np.abs(got - eager[k]).max())))
        except Exception as error:   # noqa: B902 - reported by the assertion below
            failures.append(repr(error))

    threads = [threading.Thread(target=calls, args=(first,)) for first in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
