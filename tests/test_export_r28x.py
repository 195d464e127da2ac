"""Review round 28x (of the h28x merge) on export: what was silently wrong or refused.

* a loop that ran no step gave zero rows shaped by a line through the shape plan's runs
  (NOTE [dims a loop's rows follow]) at sizes the runs never had (a row clipped to 1100 gave
  2000 columns at width 2000) and after the wrong one of two inputs of equal example widths:
  now the line only where the runs vouch for it, else func probed as before;
* ``boolean_mask``'s guard of the mask's length added to the mask, which ONNX's Add takes in
  no uint8, int8 or bool: exports of such masks, which MXNet takes, were refused;
* ``load()``'s artifact converted a float64 (or int) input of a float32 model to float32,
  where the hybridized block computes in float64 or refuses it and onnxruntime refuses it.
"""
import warnings

import mxnet as mx
import numpy as np
import pytest

import gluon_cf


def _runs(net, example, axes, tmp_path):
    """onnxruntime on ``export_onnx``'s model and ``load`` of ``save_artifact``'s."""
    import onnxruntime as ort
    from gluon_cf.export import export_onnx, load, save_artifact
    arrays = [mx.nd.array(a, dtype=a.dtype) for a in example]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = export_onnx(net, arrays, dynamic_axes=axes)
        save_artifact(net, arrays, str(tmp_path / "m.onnx"), dynamic_axes=axes)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    artifact = load(str(tmp_path / "m.onnx"))
    return [lambda *xs: session.run(None, dict(zip(names, xs))), artifact]


def _assert_runs_equal(net, runs, cases):
    for arrays in cases:
        want = net(*[mx.nd.array(a, dtype=a.dtype) for a in arrays]).asnumpy()
        for run in runs:
            got, = run(*arrays)
            assert got.shape == want.shape, ([a.shape for a in arrays], got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class _RowsClippedTo1100(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x, n):
        def body(i):
            return F.take(x, i, mode="clip").slice(begin=(None, 0), end=(None, 1100)), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < n, body, [F.zeros((1,))], max_iterations=3)
        return outs


class _RowsOfTheSecondInput(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x, y, n):
        def body(i):
            return [F.sum(x).reshape((1,)), F.take(y, i, mode="clip") * 2], [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < n, body, [F.zeros((1,))], max_iterations=3)
        return outs[1]


def _rows(*widths, steps, seed=0):
    rng = np.random.RandomState(seed)
    return [rng.uniform(-1, 1, (2, w)).astype(np.float32) for w in widths] + \
        [np.array([steps], np.float32)]


def test_no_step_rows_beyond_the_probed_widths_are_shaped_as_gluon(tmp_path):
    """Rows of x clipped to 1100 columns: the shape plan's runs (widths 5, 8, 1, 1031) all
    follow x's width, and a loop of no step at width 1200 or 2000 gave (3, 1, 1200) and
    (3, 1, 2000) zero rows in onnxruntime and the artifact; Gluon gives (3, 1, 1100)."""
    net = _RowsClippedTo1100()
    net.hybridize()
    runs = _runs(net, _rows(5, steps=2), {0: [1]}, tmp_path)
    _assert_runs_equal(net, runs, [_rows(w, steps=s) for w, s in
                                   ((5, 0), (7, 0), (7, 2), (1200, 0), (1200, 1), (2000, 0))])


def test_no_step_rows_follow_the_input_they_come_from(tmp_path):
    """Rows of y while x of the same example width is an input of the loop too: the runs
    cannot tell the widths apart, and a loop of no step gave zero rows of x's width."""
    net = _RowsOfTheSecondInput()
    net.hybridize()
    runs = _runs(net, _rows(4, 4, steps=2), {0: [1], 1: [1]}, tmp_path)
    _assert_runs_equal(net, runs, [_rows(dx, dy, steps=s) for dx, dy, s in
                                   ((4, 4, 0), (5, 7, 0), (7, 5, 0), (5, 7, 1), (2000, 3, 0))])


class _Kept(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x, m):
        return F.contrib.boolean_mask(x, m) * 2


@pytest.mark.parametrize("dtype", ["uint8", "int8", "bool"])
def test_boolean_mask_of_any_mask_dtype_exports(dtype, tmp_path):
    """Masks of uint8, int8 or bool (MXNet takes them): the export was refused ("ONNX's Add
    does not take tensor(uint8)", the length guard's); now the rows numpy keeps, and a mask
    of the wrong length still fails the run at the guard."""
    net = _Kept()
    net.hybridize()
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    mask = lambda *flags: np.array(flags, dtype)   # noqa: E731
    runs = _runs(net, [x[:3], mask(1, 0, 1)], {0: [0], 1: [0]}, tmp_path)
    for rows, flags in ((x[:3], mask(0, 1, 1)), (x, mask(1, 1, 0, 1)), (x[:2], mask(0, 0)),
                        (x[:0], mask())):
        want = x[:len(flags)][flags.astype(bool)] * 2
        for run in runs:
            got, = run(rows, flags)
            assert got.shape == want.shape
            np.testing.assert_array_equal(got, want)
    for run in runs:
        with pytest.raises(Exception, match="mask_length_differs_from_rows"):
            run(x, mask(1, 1))


class _Dense(mx.gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        self.dense = mx.gluon.nn.Dense(2, in_units=3)

    def hybrid_forward(self, F, x):
        return self.dense(x) * 2


@pytest.mark.parametrize("dtype", ["float64", "float16", "int32"])
def test_artifact_refuses_an_input_of_another_dtype(dtype, tmp_path):
    """A float32 model given float64 (float16, int32 of values float32 rounds): the
    hybridized block refuses it (its weight is float32), onnxruntime refuses it; the artifact
    cast it to float32 and answered. Integers float32 holds exactly are still cast (indices
    of the tree models)."""
    import onnxruntime as ort
    net = _Dense()
    net.initialize()
    net.hybridize()
    x = np.full((2, 3), 1 / 3, np.float32)
    session, artifact = _runs(net, [x], None, tmp_path)
    other = (x + 1e-9).astype(dtype) if dtype != "int32" else \
        np.full((2, 3), 2 ** 24 + 1, np.int32)
    with pytest.raises(mx.MXNetError, match="Incompatible attr"):
        net(mx.nd.array(other, dtype=dtype))
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidArgument):
        session(other)
    with pytest.raises(ValueError, match=r"artifact: input 'data' must have dtype float32, "
                                         r"got %s%s \(cast it first" % (
                                             dtype, " of values it changes" * (dtype == "int32"))):
        artifact(other)
    np.testing.assert_allclose(artifact(x)[0], net(mx.nd.array(x)).asnumpy(), rtol=1e-5, atol=1e-6)
    exact = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.testing.assert_allclose(artifact(exact)[0],
                               net(mx.nd.array(exact, dtype="float32")).asnumpy(),
                               rtol=1e-5, atol=1e-6)
