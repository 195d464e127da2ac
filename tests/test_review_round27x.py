"""Review of hostile round 27x (export of squeeze and take, while_loops of no step, zero-size
values in a block's own graph): what the review found in the round's converters.

* ``squeeze`` given ``axis=()`` drops no axis in MXNet (the value itself); the round's
  converter read it as "no axis" (every axis of 1 dropped), as mx2onnx's had: a (3, 1) value
  squeezed and broadcast with a (1, 3) gave (1, 3) for MXNet's (3, 3), silently;
* ``squeeze`` given axes that drop every axis keeps one in MXNet ((1, 1) -> (1,)); ONNX's
  Squeeze made a scalar, which the model's declared rank refused with a message about an
  Identity's dtype (``F.squeeze(F.sum(x, axis=0, keepdims=True), axis=0)``);
* ``take(mode='raise')`` compares its indices with 0 and size - 1 in their own dtype: -0.5 and
  3.5 (of 4 rows) are refused by MXNet; the exported Gather read rows 0 and 3, silently.
"""
import mxnet as mx
import numpy as np
import pytest

import gluon_cf


def _session(model):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 4
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def _run(session, arrays):
    return session.run(None, dict(zip([i.name for i in session.get_inputs()], arrays)))


def _block(fn):
    class Block(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, *xs):
            return fn(F, *xs)
    return Block()


def _foreach_squeeze_none(F, x, y):
    outs, _ = gluon_cf.foreach(
        lambda r, s: (F.broadcast_add(F.squeeze(r, axis=()), y), s), x, [F.zeros((1,))])
    return outs


_GIVEN_AXES = {
    # name: (fn, example inputs, dynamic axes, inputs to run)
    "none_dropped": (lambda F, x, y: F.broadcast_add(F.squeeze(x, axis=()), y),
                     [(3, 1), (1, 3)], None, [[(3, 1), (1, 3)]]),
    "none_dropped_in_foreach": (_foreach_squeeze_none, [(2, 3, 1), (1, 3)], {0: [0]},
                                [[(1, 3, 1), (1, 3)], [(4, 3, 1), (1, 3)]]),
    "every_axis": (lambda F, x: F.squeeze(F.sum(x, axis=0, keepdims=True), axis=0) * 2,
                   [(3,)], {0: [0]}, [[(1,)], [(5,)]]),
    "every_axis_negative": (lambda F, x: F.concat(F.squeeze(F.sum(x, keepdims=True),
                                                            axis=(0, -1)), F.sum(x, axis=1), dim=0),
                            [(3, 2)], {0: [0]}, [[(1, 2)], [(4, 2)]]),
}


@pytest.mark.parametrize("opset", [12, 13])
def test_squeeze_of_given_axes_exports_as_mxnet(opset):
    from gluon_cf.export import export_onnx
    rng = np.random.RandomState(0)
    for name, (fn, example, dynamic, runs) in _GIVEN_AXES.items():
        net = _block(fn)
        net.hybridize()
        session = _session(export_onnx(net, [mx.nd.array(rng.rand(*s)) for s in example],
                                       dynamic_axes=dynamic, opset=opset))
        for shapes in runs:
            arrays = [rng.rand(*s).astype(np.float32) for s in shapes]
            want = fn(mx.nd, *[mx.nd.array(a) for a in arrays]).asnumpy()   # MXNet eager
            hybrid = net(*[mx.nd.array(a) for a in arrays]).asnumpy()
            got, = _run(session, arrays)
            for other in (hybrid, got):
                assert other.shape == want.shape, (name, shapes, other.shape, want.shape)
                np.testing.assert_allclose(other, want, rtol=1e-5)


def test_take_raise_refuses_fractional_indices_outside_the_rows_as_mxnet(tmp_path):
    """MXNet's take(mode='raise') refuses an index below 0 or above size - 1 compared in the
    index's dtype (-0.5, 3.5 of 4 rows); the exported Gather cast them to rows 0 and 3."""
    from gluon_cf.export import export_onnx, load, save_artifact
    net = _block(lambda F, x, i: F.take(x, i, axis=0, mode="raise") * 2)
    net.hybridize()
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    example = [mx.nd.array(x), mx.nd.array([1, 2])]
    session = _session(export_onnx(net, example, dynamic_axes={0: [0], 1: [0]}))
    save_artifact(net, example, str(tmp_path / "m.onnx"), dynamic_axes={0: [0], 1: [0]})
    artifact = load(str(tmp_path / "m.onnx"))
    for rows, index in ((4, [2.9, 0]), (4, [-0.5, 1]), (4, [3.5, 0]), (2, [1.5, -0.9]),
                        (2, [1.0, 0.2])):
        data = x[:rows]
        arrays = [data, np.array(index, np.float32)]
        try:
            want = net(*[mx.nd.array(a) for a in arrays]).asnumpy()
        except mx.MXNetError:
            want = None
        for run in (lambda: _run(session, arrays)[0], lambda: artifact(*arrays)[0]):
            if want is None:
                with pytest.raises(Exception, match="out of data bounds|out of bound"):
                    run()
            else:
                np.testing.assert_array_equal(run(), want)
