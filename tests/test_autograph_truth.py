"""Issue 24, left over: ``not x`` of a tensor is Python's truth, eager and hybridized. On one
element it is plain Python's value (and gradient through the rest); on more, Python's
ValueError (``NDArray.__bool__``: ambiguous) at the user's line in every mode, never MXNet's
elementwise logical_not computed silently while hybridized (NOTE [autograph and/or])."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf

from conftest import MODES, set_mode

HERE = __file__


class NotAsValue(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        flag = not F.sum(x) > 0
        return x * (1 + flag)


class NotOfTheInput(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        flag = not x
        return flag


class IfNotOfTheInput(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        if not x:
            return x * 2
        return x * 3


def _line(text):
    with open(HERE) as f:
        return next(n for n, line in enumerate(f, 1) if line.strip() == text)


def _plain(block_class, x):
    """The unconverted function on NDArrays: plain Python's value and gradient."""
    x = mx.nd.array(x)
    x.attach_grad()
    with autograd.record():
        out = block_class.hybrid_forward.__wrapped__(None, mx.nd, x)
        out = out if isinstance(out, mx.nd.NDArray) else mx.nd.array([float(out)])
    out.backward()
    return out.asnumpy(), x.grad.asnumpy()


@pytest.mark.parametrize("mode", MODES)
def test_not_of_one_element_is_plain_pythons(mode):
    net = NotAsValue()
    set_mode(net, mode)
    for x in ([1.0, 2.0], [-1.0, -2.0], [0.5, -3.0], [1.0, 2.0]):
        want, want_grad = _plain(NotAsValue, x)
        a = mx.nd.array(x)
        a.attach_grad()
        with autograd.record():
            out = net(a)
        out.backward()
        np.testing.assert_allclose(out.asnumpy(), want)
        np.testing.assert_allclose(a.grad.asnumpy(), want_grad)
    # (the value, not only the function of it: 1 where Python's not is True)
    assert _plain(NotAsValue, [-1.0])[0].tolist() == [-2.0]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("block_class, text", [
    (NotOfTheInput, "flag = not x"), (IfNotOfTheInput, "if not x:")],
    ids=["value", "if"])
def test_not_of_many_elements_is_pythons_value_error_at_the_line(mode, block_class, text):
    """Python's ``not`` of a two-element NDArray raises ValueError (ambiguous); hybridized the
    not was MXNet's elementwise logical_not, [0, 0] for [1, 2], silently."""
    with pytest.raises(ValueError, match="ambiguous"):
        block_class.hybrid_forward.__wrapped__(None, mx.nd, mx.nd.array([1.0, 2.0]))
    net = block_class()
    set_mode(net, mode)
    for x in ([1.0, 2.0], [0.0, 0.0, 0.0]):
        with pytest.raises(ValueError) as info:
            net(mx.nd.array(x)).wait_to_read()
        assert f"{HERE}:{_line(text)}" in str(info.value)
        assert f"shape ({len(x)},)" in str(info.value)
    # one element: the block still works, Python's value (a bool as a number hybridized)
    for x in ([0.0], [3.0]):
        got = net(mx.nd.array(x))
        want = block_class.hybrid_forward.__wrapped__(None, mx.nd, mx.nd.array(x))
        want = float(want) if isinstance(want, bool) else want.asnumpy()
        got = got if isinstance(got, bool) else got.asnumpy()
        np.testing.assert_allclose(np.asarray(got, dtype=float).ravel(),
                                   np.asarray(want, dtype=float).ravel())


def test_not_exports_as_pythons_truth():
    """Exported, onnxruntime equals the hybridized block (1e-5) on both truths."""
    import onnxruntime as ort
    from gluon_cf.export import export_onnx
    net = NotAsValue()
    net.hybridize()
    model = export_onnx(net, [mx.nd.array([1.0, 2.0])])
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    for x in ([1.0, 2.0], [-1.0, -2.0]):
        got = session.run(None, {name: np.array(x, np.float32)})[0]
        np.testing.assert_allclose(got, net(mx.nd.array(x)).asnumpy(), rtol=1e-5)
        np.testing.assert_allclose(got, _plain(NotAsValue, x)[0], rtol=1e-5)
