"""Issue 24, left over: a list a tensor loop collected is sliced (``outs[-2:]``, ``outs[1:]``,
``outs[:3]``, ``outs[:-1]``, ``outs[-3:-1]``), reversed (``F.stack(*reversed(outs))``,
``for o in reversed(outs)``), iterated (``for o in outs``) and measured (``len(outs)``) as
plain Python does, eager and hybridized, values and gradients, on every call whatever came
before (NOTE [autograph lists]): exactly where the block's input shapes give the number of
items (a ``for`` over an input), and whatever it is when the graph runs otherwise (a ``while``
on a tensor); what cannot be computed (``len`` of a list whose length only the run knows, a
slice of step 2) is refused at the user's line."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf

from conftest import MODES, set_mode

HERE = __file__


class _While(gluon.HybridBlock):
    """``outs``: x * 1, x * 2, ... x * n (a while on a tensor: n known when the graph runs)."""


class LastTwo(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        return F.stack(*outs[-2:])


class AllButFirst(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        return F.stack(*outs[1:])


class FirstThree(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        return F.add_n(*outs[:3])


class AllButLast(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        return F.stack(*outs[:-1])


class Middle(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = [x * 10]
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        return F.stack(*outs[-3:-1])


class ReversedStack(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        return F.stack(*reversed(outs))


class ReversedLoop(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        acc = x * 0
        for o in reversed(outs):
            acc = acc * 3 + o * o
        return acc


class LoopOverItems(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        acc = x
        for o in outs[-3:]:
            acc = acc * 2 + o
        return acc


class BoundedLastTwoReversed(_While):
    """A bounded while (exact length: its rows are the steps that ran, not the bound)."""

    @gluon_cf.autograph(max_iterations=5)
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        acc = x * 0
        for o in reversed(outs):
            acc = acc * 3 + o
        return F.concat(F.stack(*outs[-2:]), F.expand_dims(acc, axis=0), dim=0)


class OverInput(gluon.HybridBlock):
    """A for over an input: the number of items is the input's rows (the graph traced for
    its shape)."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        h = F.zeros_like(x[0])
        for row in x:
            h = h * 2 + row
            outs.append(h)
        acc = h * len(outs)
        for o in reversed(outs):
            acc = acc + o * o
        return F.concat(F.stack(*outs[-2:]), F.stack(*outs[:-1]), dim=0) + acc


class LengthOfWhile(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        return x * len(outs)


class EverySecond(_While):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        return F.stack(*outs[::2])


def _line(text):
    with open(HERE) as f:
        return next(k for k, line in enumerate(f, 1) if line.strip() == text)


def _run(fn, x, n, grad=True):
    """Value and gradient of ``fn(x, n)``, or the exception's type."""
    x = mx.nd.array(x)
    x.attach_grad()
    try:
        with autograd.record():
            out = fn(x, mx.nd.array([n]))
            loss = (out * out).sum()
        if not grad:
            return (out.asnumpy(),)
        loss.backward()
        return out.asnumpy(), x.grad.asnumpy()
    except (ValueError, IndexError, TypeError, mx.MXNetError) as err:
        return type(err)


def _plain(block_class):
    return lambda x, n: block_class.hybrid_forward.__wrapped__(None, mx.nd, x, n)


WHILE_BLOCKS = [LastTwo, AllButFirst, FirstThree, AllButLast, Middle, ReversedStack,
                ReversedLoop, LoopOverItems, BoundedLastTwoReversed]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("block_class", WHILE_BLOCKS, ids=lambda c: c.__name__)
def test_slices_and_reversed_of_a_while_loops_list_are_pythons(mode, block_class):
    """Counts 3, 1, 4, 2, 5, 0, 3 in one block: plain Python's values and gradients; where
    Python raises (F.stack() of no item) an error too, and the block goes on working."""
    net = block_class()
    set_mode(net, mode)
    x = [1.5, -2.0]
    assert_counts_are_pythons(_plain(block_class), net, x, (3, 1, 4, 2, 5, 0, 3))


def assert_counts_are_pythons(plain, net, x, counts, rtol=1e-6, at_least=4, run=None):
    """For each loop count in turn on one block: ``plain``'s values and gradients, or, where
    plain Python raises, an error too (and the block goes on); ``at_least`` counts compared."""
    run = run or _run
    compared = 0
    for n in counts:
        want, got = run(plain, x, n), run(net, x, n)
        if isinstance(want, type):
            assert isinstance(got, type), (n, got)
            continue
        assert not isinstance(got, type), (n, got)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=rtol, err_msg=f"n={n}")
        compared += 1
    assert compared >= at_least


@pytest.mark.parametrize("mode", MODES)
def test_lists_of_a_for_over_an_input_are_pythons(mode):
    net = OverInput()
    set_mode(net, mode)
    for rows in (3, 2, 5, 3):
        x = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2) / 3 - 1
        want, got = _run(_plain(OverInput), x, 0), _run(net, x, 0)
        assert not isinstance(want, type) and not isinstance(got, type), (want, got)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize("block_class, text, words", [
    (LengthOfWhile, "return x * len(outs)", "measured with len()"),
    (EverySecond, "return F.stack(*outs[::2])", "[::2]")], ids=["len", "step"])
def test_what_only_the_run_knows_is_refused_at_the_line(block_class, text, words):
    assert not isinstance(_run(_plain(block_class), [1.0, 2.0], 3), type)
    net = block_class()
    net.hybridize()
    with pytest.raises(ValueError) as info:
        net(mx.nd.array([1.0, 2.0]), mx.nd.array([3]))
    assert f"{HERE}:{_line(text)}" in str(info.value) and words in str(info.value)


@pytest.mark.parametrize("block_class", [LastTwo, ReversedStack, Middle],
                         ids=lambda c: c.__name__)
def test_sliced_lists_export_as_gluon_computes_them(block_class):
    """onnxruntime equals the hybridized block (1e-5) on several counts."""
    import onnxruntime as ort
    from gluon_cf.export import export_onnx
    net = block_class()
    net.hybridize()
    x = np.array([1.5, -2.0], np.float32)
    model = export_onnx(net, [mx.nd.array(x), mx.nd.array([3])])
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for n in (3, 1, 4, 2):
        got = session.run(None, dict(zip(names, [x, np.array([n], np.float32)])))[0]
        want = net(mx.nd.array(x), mx.nd.array([n])).asnumpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_graph_for_input_shapes_is_refused_export_at_the_line():
    """The number of items read from the traced input shapes makes a graph for those shapes
    (NOTE [graphs traced for input shapes]): its export is refused at the user's line."""
    from gluon_cf.export import export_onnx
    net = OverInput()
    net.hybridize()
    with pytest.raises((NotImplementedError, ValueError)) as info:
        export_onnx(net, [mx.nd.ones((3, 2)), mx.nd.array([0])])
    assert HERE in str(info.value) and "input shapes" in str(info.value)
