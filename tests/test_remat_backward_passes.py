"""Eager ``@gluon_cf.recursive(remat=True)`` over several outermost calls and backward passes
(NOTE [closure gradients per backward pass] in gluon_cf/remat_gates.py), against the same code
with ``remat=False`` (plain MXNet autograd: the oracle): outputs, gradients, fresh flags and
Adam steps, with ``grad_req`` ``'write'`` and ``'add'``.

Two outermost calls in one ``record()`` backpropagated separately failed in the second
``backward`` (the first cleared the node the calls shared): MXNet's "any container is empty" or
"There are no inputs in computation graph that require gradients"."""
import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from mxnet import autograd, gluon

import gluon_cf
from gluon_cf import remat_gates


class Net(gluon.Block):
    """A chain of depth ``n``: ``leaf`` at depth 0, ``odd``/``even`` by depth above (a call of
    depth 0 reads only ``leaf``, of depth 1 not ``even``)."""

    def __init__(self, remat, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.leaf = gluon.nn.Dense(3, in_units=3, prefix="leaf_")
            self.odd = gluon.nn.Dense(3, in_units=3, prefix="odd_")
            self.even = gluon.nn.Dense(3, in_units=3, prefix="even_")

        @gluon_cf.recursive(remat=remat)
        def f(x, n):
            k = int(n.asscalar())
            if k == 0:
                return mx.nd.tanh(self.leaf(x))
            return mx.nd.tanh((self.odd if k % 2 else self.even)(f(x, n - 1)))
        self.f = f

    def forward(self, x, depth):
        return self.f(x, mx.nd.array([depth]))


class World:
    """Two nets (same initial values for either ``remat``), a Trainer over both, and every
    gradient buffer filled with 7 (so that an unwritten one shows)."""

    def __init__(self, remat, req):
        self.nets = []
        for k in range(2):
            mx.random.seed(k)
            net = Net(remat, prefix="n%d_" % k)
            net.initialize(mx.init.Uniform(0.5))
            if req == "add":
                net.collect_params().setattr("grad_req", "add")
            self.nets.append(net)
        self.params = [p for net in self.nets for p in net.collect_params().values()]
        for p in self.params:
            p.grad()[:] = 7
        self.trainer = gluon.Trainer(self.params, "adam", {"learning_rate": 0.05})

    def state(self):
        return [(p.data().asnumpy(), p.grad().asnumpy(), p.list_data()[0]._fresh_grad)
                for p in self.params]


def inputs(seed):
    return mx.nd.array(np.random.RandomState(seed).uniform(-1, 1, (2, 3)))


def run(program, remat, req):
    """``program``: records, each ``(heads, passes, step)``: ``heads`` a list of heads, each a
    list of calls ``(net, depth, input seed)`` summed; ``passes`` a list of ``(heads, retain)``
    (one ``head.backward`` or one ``autograd.backward`` of several); ``step``: Trainer.step
    after the passes. The world's state after every pass and step, and the heads' values."""
    world = World(remat, req)
    seen = []
    for heads, passes, step in program:
        with autograd.record():
            ys = [sum((world.nets[n](inputs(s), d) * (j + 1)).sum() for j, (n, d, s) in
                      enumerate(calls)) for calls in heads]
        seen.append([y.asnumpy() for y in ys])
        for chosen, retain in passes:
            if len(chosen) == 1:
                ys[chosen[0]].backward(retain_graph=retain)
            else:
                autograd.backward([ys[k] for k in chosen], retain_graph=retain)
            seen.append(world.state())
        if step:
            world.trainer.step(1, ignore_stale_grad=True)
            seen.append(world.state())
    return seen


def assert_same(program, req="write"):
    got, want = run(program, True, req), run(program, False, req)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        for j, (a, b) in enumerate(zip(g, w)):
            if isinstance(a, tuple):
                assert a[2] == b[2], (k, j, "fresh flag")
                np.testing.assert_allclose(a[1], b[1], rtol=1e-5, atol=1e-6,
                                           err_msg="gradient %d %d" % (k, j))
                np.testing.assert_allclose(a[0], b[0], rtol=1e-5, atol=1e-6,
                                           err_msg="value %d %d" % (k, j))
            else:
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg="head %d" % k)


TWO_CALLS = [[(0, 2, 1)], [(0, 1, 2)]]        # one block
TWO_BLOCKS = [[(0, 2, 1)], [(1, 0, 2)]]       # y2's block reads only its leaf


@pytest.mark.parametrize("req", ["write", "add"])
def test_two_calls_one_record_two_backward_passes(req):
    """The reported failure: ``y1.backward(retain_graph=...)``, then ``y2.backward()``, then
    an Adam step; the calls of one block and of two (``y2``'s reads only its leaf), the
    other order too, a record per iteration."""
    assert_same([(heads, [([first], retain), ([1 - first], False)], True)
                 for heads in (TWO_CALLS, TWO_BLOCKS) for retain in (False, True)
                 for first in (0, 1)], req)


@pytest.mark.parametrize("req", ["write", "add"])
def test_both_heads_in_one_pass_and_a_retained_head_twice(req):
    assert_same([(TWO_CALLS, [([0, 1], False)], True),
                 (TWO_BLOCKS, [([0], True), ([0], True), ([1], True), ([0, 1], False)], True),
                 (TWO_CALLS, [([1], True), ([1], False), ([0], False)], True)], req)


@pytest.mark.parametrize("req", ["write", "add"])
def test_batches_of_trees_summed_and_single_calls(req):
    """One head summing several outermost calls (a batch of trees: a parameter only some
    read), a single call reading only ``leaf`` (the others left as they were, stale)."""
    assert_same([([[(0, 2, 1), (0, 0, 2), (1, 1, 3)]], [([0], False)], True),
                 ([[(0, 0, 4)]], [([0], False)], True),
                 ([[(0, 1, 5), (0, 1, 6)], [(0, 0, 7)]], [([1], False), ([0], False)], True)],
                req)


def test_a_pass_reading_a_parameter_directly_too():
    """A head reading ``odd`` directly besides through a call (MXNet writes that part by the
    parameter's ``grad_req``, the calls' part added) and one through calls only."""
    for req in ("write", "add"):
        got = []
        for remat in (True, False):
            world = World(remat, req)
            net = world.nets[0]
            with autograd.record():   # (arrays of their own: MXNet's first pass clears
                y1 = net(inputs(1), 1).sum() + net.odd(inputs(1)).sum()   # a read one's)
                y2 = net(inputs(2), 2).sum()
            y1.backward()
            got.append(world.state())
            y2.backward()
            got.append(world.state())
        for a, b in zip(got[:2], got[2:]):
            for (_, ga, fa), (_, gb, fb) in zip(a, b):
                assert fa == fb
                np.testing.assert_allclose(ga, gb, rtol=1e-5, atol=1e-6)


def test_autograd_grad_through_calls():
    """``autograd.grad`` asked for parameters read through calls and directly: the gradients
    of plain MXNet, no buffer written, no flag set; one nothing read is refused as MXNet
    refuses it (its closure holds it: every call's node could read it)."""
    got = []
    for remat in (True, False):
        world = World(remat, "write")
        net = world.nets[0]
        with autograd.record():
            x = inputs(2)
            y = net(x, 1).sum() * 2 + net.leaf(x).sum()
        asked = [net.odd.weight.data(), net.leaf.weight.data(), net.leaf.bias.data()]
        got.append([g.asnumpy() for g in autograd.grad(y, asked, retain_graph=True)] +
                   [world.state()])
        with pytest.raises(mx.MXNetError, match="Cannot differentiate with respect to the "
                           "2-th variable because it is unreachable from the outputs"):
            autograd.grad(y, [net.odd.weight.data(), net.even.weight.data()])
    for a, b in zip(got[0][:3], got[1][:3]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for (_, ga, fa), (_, gb, fb) in zip(got[0][3], got[1][3]):
        assert fa == fb and not fa
        np.testing.assert_allclose(ga, gb)
    assert not remat_gates._passed


CALL = st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, 9))


@st.composite
def records(draw):
    """A valid program's record: heads, passes (a head backpropagated without
    ``retain_graph`` is not used again, as in plain MXNet), a step or not."""
    heads = draw(st.lists(st.lists(CALL, min_size=1, max_size=2), min_size=1, max_size=3))
    open_heads = list(range(len(heads)))
    passes = []
    for _ in range(draw(st.integers(1, 3))):
        if not open_heads:
            break
        chosen = draw(st.lists(st.sampled_from(open_heads), min_size=1, max_size=2,
                               unique=True))
        retain = draw(st.booleans())
        passes.append((chosen, retain))
        if not retain:
            open_heads = [k for k in open_heads if k not in chosen]
    return heads, passes, draw(st.booleans())


@settings(max_examples=10, deadline=None, derandomize=True)
@given(st.lists(records(), min_size=1, max_size=2), st.sampled_from(["write", "add"]))
def test_programs_of_calls_and_passes_equal_plain_mxnet(program, req):
    assert_same(program, req)


def test_a_step_between_two_passes_of_one_record_is_refused():
    """A Trainer step between ``y1.backward()`` and ``y2.backward()`` changes the parameters
    the second pass's calls recompute from: their values differ from the forward's, so remat
    cannot give plain MXNet's gradient (which reads the forward's intermediates and the new
    parameters); refused, saying so."""
    world = World(True, "write")
    with autograd.record():
        ys = [world.nets[0](inputs(1), 2).sum(), world.nets[0](inputs(2), 1).sum()]
    ys[0].backward()
    world.trainer.step(1, ignore_stale_grad=True)
    with pytest.raises(RuntimeError, match=r"test_remat_backward_passes.py:\d+: with remat, "
                       r"recomputing a call of 'f' .*written between the forward and this "
                       r"backward \(a Trainer.step between"):
        ys[1].backward()
        mx.nd.waitall()


class WithEmbedding(gluon.Block):
    def __init__(self, remat, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.emb = gluon.nn.Embedding(10, 3, sparse_grad=True)
            self.cell = gluon.nn.Dense(3, in_units=3)

        @gluon_cf.recursive(remat=remat)
        def f(i, n, embed):
            if int(n.asscalar()) == 0:
                return mx.nd.tanh(self.emb(i)) if embed else mx.nd.tanh(i * 0.5)
            return mx.nd.tanh(self.cell(f(i, n - 1, embed)))
        self.f = f


def test_a_sparse_gradient_read_by_a_call_is_refused_and_one_unread_passes():
    """An ``Embedding(sparse_grad=True)`` in the body's closure: read by a call, refused
    naming the function and line (it failed in backward with a TypeError from the callback,
    or before with MXNet's storage type inference); unread, the others' gradients are plain
    MXNet's and its own is left as it was."""
    got = []
    for remat in (True, False):
        mx.random.seed(0)
        net = WithEmbedding(remat)
        net.initialize()
        with autograd.record():
            y = net.f(mx.nd.ones((2, 3)), mx.nd.array([2]), mx.nd.array([0])).sum()
        y.backward()
        got.append((net.cell.weight.grad().asnumpy(), net.emb.weight.list_data()[0]._fresh_grad))
    np.testing.assert_allclose(got[0][0], got[1][0], rtol=1e-5, atol=1e-6)
    assert not got[0][1] and not got[1][1]
    net = WithEmbedding(True)
    net.initialize()
    with autograd.record():
        y = net.f(mx.nd.array([1, 2]), mx.nd.array([1]), mx.nd.array([1])).sum()
    with pytest.raises(NotImplementedError, match=r"gluon_cf.recursive at .*test_remat_backward_"
                       r"passes.py:\d+: remat=True for 'f' whose body reads an array with a "
                       r"gradient of storage type 'row_sparse'"):
        y.backward()
        mx.nd.waitall()
