"""Session 34's export round (issue 24): 45 ported models exported equal to Gluon; one
call gave an internal-looking error. A hybridized block of two inputs called (or exported
with ``export_onnx``) with one: a bare ``IndexError: list index out of range`` from
gluon_cf's zero-size check (``hybrid._makes_zero_size``), where plain Gluon (the same block
with MXNet's ``F.contrib.foreach``) raises its ValueError about the argument structure.
Oracle: that plain Gluon block. And a name repeated in ``input_names``/``output_names`` was
the ONNX checker's refusal as a NotImplementedError, now a ValueError about the argument."""
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


@pytest.mark.parametrize("names", [{"input_names": ["x", "x"]}, {"output_names": ["o", "o"]},
                                   {"input_names": ["a", "b"], "output_names": ["a", "c"]}])
def test_repeated_names_are_refused_as_an_argument_error(names, tmp_path):
    """A name given twice (two inputs, two outputs, an input and an output) was the ONNX
    checker's "Graph must be in single static assignment (SSA) form" as a
    NotImplementedError; now a ValueError naming the argument and the name."""
    net = _two_inputs(True)
    example = [mx.nd.ones((3, 2)), mx.nd.ones((1,))]
    err = _error(lambda: export_onnx(net, example, str(tmp_path / "two.onnx"), **names))
    assert isinstance(err, ValueError), repr(err)
    assert str(err).startswith("export_onnx: input_names and output_names must name each "
                               "input and output once; repeated: ['")
    assert not (tmp_path / "two.onnx").exists()
    model = export_onnx(net, example, input_names=["a", "b"], output_names=["c", "d"])
    assert [i.name for i in model.graph.input] == ["a", "b"]
    assert [o.name for o in model.graph.output] == ["c", "d"]


class _EyeInBody(HybridBlock):
    def hybrid_forward(self, F, x):
        def body(m, st):
            return m, [st[0] + F.sum(F.eye(4) * m)]   # (F.eye: MXNet's _eye, no converter)
        return gluon_cf.foreach(body, x, [F.zeros((1,))])[0]


def test_an_operator_without_converter_is_named_as_the_user_calls_it():
    """The refusal named MXNet's registered name only ('_eye'); it adds the name the user
    wrote (F.eye), with the user's line."""
    net = _EyeInBody()
    net.hybridize()
    net(mx.nd.ones((3, 4, 4)))
    err = _error(lambda: export_onnx(net, [mx.nd.ones((3, 4, 4))]))
    assert isinstance(err, NotImplementedError), repr(err)
    line = _EyeInBody.hybrid_forward.__code__.co_firstlineno + 2
    assert str(err).startswith("%s:%d: export_onnx: node " % (__file__, line)), str(err)
    assert "(MXNet op '_eye', F.eye)" in str(err), str(err)
