"""Session 34's export round (issue 24): 45 ported models exported equal to Gluon; one
call gave an internal-looking error. A hybridized block of two inputs called (or exported
with ``export_onnx``) with one: a bare ``IndexError: list index out of range`` from
gluon_cf's zero-size check (``hybrid._makes_zero_size``), where plain Gluon (the same block
with MXNet's ``F.contrib.foreach``) raises its ValueError about the argument structure.
Oracle: that plain Gluon block."""
import mxnet as mx
import pytest
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf.export import export_onnx


def _two_inputs(ours):
    class Two(HybridBlock):
        def hybrid_forward(self, F, x, n):
            loop = gluon_cf.foreach if ours else F.contrib.foreach
            outs, (s,) = loop(lambda r, st: (r * 2, [st[0] + r]), x,
                              [F.zeros_like(F.sum(x, axis=0))])
            return outs, F.broadcast_mul(s, n)
    net = Two()
    net.initialize()
    net.hybridize()
    net(mx.nd.ones((3, 2)), mx.nd.ones((1,)))
    return net


def _error(call):
    with pytest.raises(Exception) as err:
        call()
    return err.value


def test_a_call_missing_an_input_raises_gluons_error():
    plain = _error(lambda: _two_inputs(False)(mx.nd.ones((3, 2))))
    ours = _error(lambda: _two_inputs(True)(mx.nd.ones((3, 2))))
    assert type(ours) is type(plain) is ValueError
    assert str(ours) == str(plain)
    assert str(ours).startswith("The argument structure of HybridBlock does not match")


def test_export_missing_an_input_raises_gluons_error(tmp_path):
    net = _two_inputs(True)
    err = _error(lambda: export_onnx(net, [mx.nd.ones((3, 2))], str(tmp_path / "two.onnx")))
    assert isinstance(err, ValueError), repr(err)
    assert str(err).startswith("The argument structure of HybridBlock does not match"), str(err)
    assert not (tmp_path / "two.onnx").exists()
