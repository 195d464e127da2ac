"""Hostile round 28x (issue 24) on export and dynamic shapes: the programs of
``hostile_programs28x.py`` exported (``export_onnx`` through onnxruntime and ``save_artifact``
through ``load``) at the example's shapes and at other lengths and batches, against the
hybridized block, and what the round fixed:

* ``infer_shape`` of a symbol holding a while_loop (or cond) whose predicate has more than one
  element raised PredShapeError where MXNet 1.9.1's own ops answer (None, None, None) (their
  check is at run time): now as MXNet, and the run (bind, a hybridized block, export) raises
  PredShapeError naming the node and the user's line;
"""
import re
import warnings

import mxnet as mx
import numpy as np
import pytest

import gluon_cf
from gluon_cf.checks import PredShapeError


def _while_pred_of_many(F, i, x):
    return gluon_cf.while_loop(lambda a, b: a < 3, lambda a, b: ([a * 2], [a + 1, b * 2]),
                               [i, x], max_iterations=5)


def _mxnet_while_pred_of_many(F, i, x):
    return F.contrib.while_loop(lambda a, b: a < 3, lambda a, b: ([a * 2], [a + 1, b * 2]),
                                [i, x], max_iterations=5)


@pytest.mark.parametrize("op", ["while_loop", "cond"])
def test_infer_shape_of_a_predicate_of_many_elements_answers_as_mxnet(op):
    """MXNet's symbolic while_loop and cond check the predicate's size when they run:
    infer_shape answers (None, None, None), infer_shape_partial leaves the outputs unknown.
    gluon_cf's raised PredShapeError from shape inference; now the same answers, and running
    the graph raises PredShapeError naming the node and the line that made it."""
    i, x = mx.sym.var("i"), mx.sym.var("x")
    if op == "while_loop":
        ours = mx.sym.Group(sum(map(list, _while_pred_of_many(mx.sym, i, x)), []))
        theirs = mx.sym.Group(sum(map(list, _mxnet_while_pred_of_many(mx.sym, i, x)), []))
        line = _while_pred_of_many.__code__.co_firstlineno + 1
    else:
        ours = gluon_cf.cond(i < 3, lambda: x * 2, lambda: x * 3)
        theirs = mx.sym.contrib.cond(i < 3, lambda: x * 2, lambda: x * 3)
        line = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ours.infer_shape(i=(2,), x=(3,)) == theirs.infer_shape(i=(2,), x=(3,)) == \
            (None, None, None)
        partial = ours.infer_shape_partial(i=(2,), x=(3,))
    assert partial[0] == [(2,), (3,)] and all(s == () for s in partial[1]), partial
    if op == "while_loop":
        assert partial == theirs.infer_shape_partial(i=(2,), x=(3,))
    with pytest.raises(PredShapeError, match="must have exactly one element, got "
                       r"shape \(2,\)\n\(in gluon_cf node '\w+' at %s:%s\)" % (
                           re.escape(__file__), line or r"\d+")):
        ours.bind(mx.cpu(), {"i": mx.nd.array([0, 1]), "x": mx.nd.ones(3)}).forward()


class _WhilePredOfMany(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, i, x):
        outs, vars_ = _while_pred_of_many(F, i, x)
        return outs[0], vars_[1]


def test_a_hybridized_predicate_of_many_elements_names_the_users_line():
    net = _WhilePredOfMany()
    net.hybridize()
    line = _while_pred_of_many.__code__.co_firstlineno + 1
    with pytest.raises(PredShapeError, match=r"\(in gluon_cf node '\w+' at %s:%d\)"
                       % (re.escape(__file__), line)):
        net(mx.nd.array([0, 1]), mx.nd.ones(3))
    outs, x = net(mx.nd.array([0]), mx.nd.ones(3))
    np.testing.assert_array_equal(x.asnumpy(), [8, 8, 8])
    np.testing.assert_array_equal(outs.asnumpy()[:3, 0], [0, 2, 4])


def _session(model, optimized=True):
    import onnxruntime as ort
    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return lambda *arrays: session.run(None, dict(zip(names, arrays)))


def test_while_loop_of_no_step_with_step_shapes_of_dynamic_axes_exports(tmp_path):
    """Step outputs (1, d), d a dynamic axis of x: with no row kept Gluon gives four zero
    rows (4, 1, d); onnxruntime and the artifact failed in the body's Gather. Now equal to
    Gluon on masks keeping 0, 1 and 2 rows at widths 3, 4 and 5."""
    from gluon_cf.export import export_onnx, load, save_artifact
    import hostile_programs28x as P
    net = P.WhileOverKeptRowsTakeRaise()
    net.hybridize()
    example = [mx.nd.array(np.arange(12).reshape(3, 4)), mx.nd.array([1, 0, 1])]
    axes = {0: [0, 1], 1: [0]}
    model = export_onnx(net, example, dynamic_axes=axes)
    save_artifact(net, example, str(tmp_path / "m.onnx"), dynamic_axes=axes)
    runs = [_session(model), _session(model, optimized=False), load(str(tmp_path / "m.onnx"))]
    rng = np.random.RandomState(0)
    for n, d, mask in ((3, 3, [0, 0, 0]), (2, 5, [0, 1]), (3, 4, [1, 0, 1]), (1, 3, [0])):
        x, m = rng.uniform(-1, 1, (n, d)).astype(np.float32), np.array(mask, np.float32)
        want = net(mx.nd.array(x), mx.nd.array(m)).asnumpy()
        assert want.shape == (4, 1, d)
        for run in runs:
            got, = run(x, m)
            assert got.shape == want.shape, (mask, got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)   # (other kernels)


@pytest.mark.parametrize("axis", [-1, -2, 0, 1, 2])
@pytest.mark.parametrize("start,step,dtype", [(0.0, 1.0, "float32"), (1.5, -0.5, "float32"),
                                              (2.0, 3.0, "int32"), (0.0, 0.1, "float64")])
def test_arange_like_along_a_negative_axis_exports_as_mxnet(axis, start, step, dtype):
    """numpy's ``start + step * arange(n)`` along ``axis`` (MXNet's arange_like), exported
    with every axis dynamic: equal at the example's shape and two others."""
    from gluon_cf.export import export_onnx

    class Positions(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return F.contrib.arange_like(x, start=start, step=step, axis=axis)

    net = Positions()
    net.hybridize()
    run = _session(export_onnx(net, [mx.nd.ones((2, 3, 4), dtype=dtype)],
                               dynamic_axes={0: [0, 1, 2]}))
    for shape in ((2, 3, 4), (1, 5, 2), (3, 1, 6)):
        x = np.ones(shape, dtype)
        n = shape[axis]
        want = (np.array(start, dtype) + np.array(step, dtype) * np.arange(n)).astype(dtype)
        np.testing.assert_allclose(net(mx.nd.array(x, dtype=dtype)).asnumpy(), want, 1e-6)
        got, = run(x)
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)   # (onnxruntime's Range)


def test_boolean_mask_of_another_length_than_the_rows_fails_the_exported_run(tmp_path):
    """Masks of 2 and 4 flags for 3 rows: MXNet refuses both; the exported model ran the
    first (rows 0 and 1 kept). Now both runs fail at the guard named for the mask's length;
    a mask of 3 flags still equals Gluon."""
    import onnxruntime as ort
    from gluon_cf.export import ArtifactError, export_onnx, load, save_artifact
    import hostile_programs28x as P
    net = P.WhileOverKeptRowsTakeRaise()
    net.hybridize()
    example = [mx.nd.array(np.arange(12).reshape(3, 4)), mx.nd.array([1, 0, 1])]
    axes = {0: [0, 1], 1: [0]}
    run = _session(export_onnx(net, example, dynamic_axes=axes))
    save_artifact(net, example, str(tmp_path / "m.onnx"), dynamic_axes=axes)
    artifact = load(str(tmp_path / "m.onnx"))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for flags in ([1, 1], [0, 1, 1, 1]):
        mask = np.array(flags, np.float32)
        with pytest.raises(Exception, match="Shape inconsistent, the mask"):
            net(mx.nd.array(x), mx.nd.array(mask))
        with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidArgument,
                           match="mask_length_differs_from_rows"):
            run(x, mask)
        with pytest.raises(ArtifactError, match="mask_length_differs_from_rows"):
            artifact(x, mask)
    mask = np.array([0, 1, 1], np.float32)
    want = net(mx.nd.array(x), mx.nd.array(mask)).asnumpy()
    for got in (run(x, mask)[0], artifact(x, mask)[0]):
        np.testing.assert_array_equal(got, want)


# ---- the round's programs -------------------------------------------------------------------

# A sample of hostile_programs28x's 90 programs (all of them, eager, hybridized and exported
# both ways: ~22 s): each exported model equals the hybridized block at the example's shapes
# and at the other lengths and batches (or refuses at the user's line where noted).
EXPORTED = ["ClipThenTakeLastAxis", "ClipToLengthThenTakeRaise", "ClipInt32ThenTakeLastAxis",
            "SliceStepMinusOne", "TopkBothLastAxis", "OneHotNegativeIndex",
            "RoundRintFixHalves", "Int32ModAndDivNegative", "SequenceReverseZeroLength",
            "MaskedDotAttention", "ArangeLikeLastAxisWeights", "ForeachMaskedStateUpdate",
            "WhileOverKeptRowsTakeRaise", "WhileOverKeptRowsTwoStepOutputs",
            "GreedyDecoderEmbeddingArgmax", "WhileExactLengthDecoderOverMaxLength",
            "CondDifferentSizeThenForeach", "BooleanMaskThenForeachKept",
            "ExampleOfBatchOneBroadcastsAgainstRows", "TreeSoftmaxAttentionOverChildren"]
REFUSED = {"SmoothL1NormOrd1SoftmaxTemperature": {"onnx": "no converter for 'smooth_l1'",
                                                  "artifact": "no converter for 'smooth_l1'"}}


@pytest.mark.parametrize("name", EXPORTED + sorted(REFUSED))
def test_round_28x_exports_equal_gluon(name):
    import export_harness
    import hostile_programs28x as P
    cls = getattr(P, name)
    result = export_harness.export_outcomes(cls, P.PROGRAMS[cls], [P.__file__])
    export_harness.assert_equal_or_refused(result, REFUSED.get(name, {}))
