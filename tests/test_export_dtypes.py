"""export_onnx of float64, float16 and integer blocks (NOTE [onnxruntime kernels]): onnxruntime
equals the hybridized block (MXNet, the oracle) -- float64 at 1e-9 where the export computes in
float64, float16 at float16's precision -- or export refuses at the user's line, naming the op
and the dtype; never a model onnxruntime cannot load or run, nor one ONNX's checker refuses."""
import re
import warnings

import mxnet as mx
import numpy as np
import onnxruntime as ort
import pytest
from mxnet import gluon

import gluon_cf
from gluon_cf.export import export_onnx
from test_export_onnx import build, gluon_outputs

nn, rnn = gluon.nn, gluon.rnn
_RANDOM = np.random.RandomState(7)
X2 = np.concatenate([_RANDOM.randn(2, 6) * 3, [[-40., -1e-9, 0., 1e-9, 21., 40.]],
                     [[-3e10, -2.5, -0.5, 0.5, 2.5, 3e10]]])       # (4, 6)
X3 = _RANDOM.randn(2, 3, 4)
X4 = _RANDOM.randn(2, 3, 5, 5)
PROBS = np.tanh(X2[:2]) * 0.99                                     # inside (-1, 1)


def case(name, fn, inputs, **children):
    return pytest.param(fn, inputs, children, id=name)


def compare(net, inputs, dtype, tol, opset=13):
    inputs = [x.astype(dtype) if x.dtype.kind == "f" else x for x in inputs]
    model = export_onnx(net, inputs, opset=opset)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, dict(zip([i.name for i in session.get_inputs()], inputs)))
    want = gluon_outputs(net, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert (g.dtype, g.shape) == (w.dtype, w.shape)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol, atol=tol)
    return model


# float64 nodes onnxruntime has no kernel for, computed from ops it has (NOTE [onnxruntime
# kernels]): equal to MXNet's float64 at 1e-9
FLOAT64_EXACT = [
    case("sinh_cosh", lambda F, n, x: (F.sinh(x / 100), F.cosh(x / 100)), [X2]),
    case("arcsinh_huge_negative", lambda F, n, x: F.arcsinh(x), [X2]),
    case("arccosh_huge", lambda F, n, x: F.arccosh(F.abs(x) + 1), [X2]),
    case("arctanh", lambda F, n, x: F.arctanh(x), [PROBS]),
    case("softsign_softrelu", lambda F, n, x: (F.softsign(x), F.Activation(x, "softrelu"),
                                               F.Activation(x, "softsign")), [X2]),
    case("leaky_elu_selu", lambda F, n, x: (F.LeakyReLU(x, act_type="elu", slope=0.7),
                                            F.LeakyReLU(x / 1e3, act_type="selu"),
                                            F.LeakyReLU(x, slope=0.2)), [X2]),
    case("prelu_layer_elu_selu_layers", lambda F, n, x: n.p(x) + n.e(x) + n.s(x), [X3],
         p=lambda: nn.PReLU(alpha_initializer=mx.init.Uniform(0.5), in_channels=3),
         e=lambda: nn.ELU(0.3), s=nn.SELU),
    case("hard_sigmoid", lambda F, n, x: F.hard_sigmoid(x, alpha=0.3, beta=0.4), [X2]),
    # MXNet's clip bounds are float32 (real_t): x clipped at 2.0999999046325684 (h17review2)
    case("clip_float32_bounds", lambda F, n, x: F.clip(x, -2.1, 0.1), [X2]),
    case("global_pools", lambda F, n, x: (n.a(x), n.m(x)), [X4], a=nn.GlobalAvgPool2D,
         m=nn.GlobalMaxPool2D),
    case("in_a_foreach_body", lambda F, n, xs: gluon_cf.foreach(
        lambda x, s: (F.sinh(x) + F.LeakyReLU(x, act_type="elu"), [s[0] + F.softsign(x)]),
        xs, [F.zeros((3, 4), dtype="float64")]), [X3]),
    # mx2onnx's float32 constants and dtypes in float64 graphs (a model ONNX's checker refused)
    case("layer_norm_batch_norm", lambda F, n, x: n.l(x) + n.b(x), [X3],
         l=lambda: nn.LayerNorm(axis=1, in_channels=3), b=lambda: nn.BatchNorm(in_channels=3)),
    case("embedding_sequence_mask", lambda F, n, i, x, l: (n.e(i), F.SequenceMask(
        x, l, use_sequence_length=True, value=-2.5)), [np.array([[0, 3, -1]], np.float32), X3,
                                                        np.array([1, 2, 0], np.float32)],
         e=lambda: nn.Embedding(4, 2)),
]


@pytest.mark.parametrize("opset", [13, 12])
@pytest.mark.parametrize("fn, inputs, children", FLOAT64_EXACT)
def test_float64_equals_mxnet(fn, inputs, children, opset):
    net = build(fn, **children)
    net.cast("float64")
    compare(net, inputs, np.float64, 1e-9, opset)



def test_float64_rewrites_keep_every_digit_at_tiny_and_huge_inputs():
    """MXNet computes these with log1p, expm1 and sinh, which ONNX lacks: log(1 + u) and
    exp(x) - 1 made asinh, atanh and sinh of 1e-17 zero, elu(-1e-12) 2e-5 off, softrelu(-40)
    zero, and sinh/cosh past 709.78 inf where MXNet's are finite (to 710.47). Relative error
    of every element, the whole float64 range (h17review2)."""
    tiny = np.array([1e-300, 1e-17, 1e-12, 1e-8, 1e-3, 0.5, 0.999999])
    x = np.concatenate([tiny, -tiny, [0., 20.5, -40., -700., 709.9, -710.4, 1e8, 3e8, 1e300,
                                      np.inf, -np.inf, np.nan]])[None]
    net = build(lambda F, n, x: (
        F.sinh(x), F.cosh(x), F.arcsinh(x), F.arccosh(F.abs(x) + 1),
        F.arccosh(1 + F.abs(x) * 1e-3), F.arctanh(F.clip(x, -1, 1)),
        F.Activation(x, "softrelu"), F.LeakyReLU(x, act_type="elu"),
        F.LeakyReLU(x, act_type="selu")))
    net.cast("float64")
    compare(net, [x], np.float64, 1e-13)
    model = export_onnx(net, [x])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for got, want in zip(session.run(None, {session.get_inputs()[0].name: x}),
                         gluon_outputs(net, [x])):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)

def test_float64_gelu_is_computed_in_float32():
    """mshadow's gelu rounds its input to float32 whatever the dtype; onnxruntime has Erf of
    float32 only, so the export computes it in float32: within float32's precision."""
    net = build(lambda F, n, x: (F.LeakyReLU(x, act_type="gelu"), n.g(x)), g=nn.GELU)
    net.cast("float64")
    compare(net, [X2[:3]], np.float64, 1e-6)


# float64 without an onnxruntime kernel nor an exact decomposition: refused at the user's line
FLOAT64_REFUSED = [
    (case("erf", lambda F, n, x: F.erf(x), [X3]), "Erf"),
    (case("conv", lambda F, n, x: n.c(x), [X4], c=lambda: nn.Conv2D(2, 3, in_channels=3)),
     "Conv"),
    (case("avg_pool", lambda F, n, x: n.p(x), [X4], p=lambda: nn.AvgPool2D(2)), "AveragePool"),
    (case("lstm_fails_at_run_time", lambda F, n, x: n.l(x), [X3],
          l=lambda: rnn.LSTM(3, input_size=4)), "LSTM"),
    (case("bilinear_resize", lambda F, n, x: F.contrib.BilinearResize2D(x, height=7, width=3),
          [X4]), "Resize"),
    (case("erf_in_a_foreach_body", lambda F, n, xs: gluon_cf.foreach(
        lambda x, s: (F.erf(x), [s[0] + x]), xs, [F.zeros((3, 4), dtype="float64")]), [X3]),
     "Erf"),
]


@pytest.mark.parametrize("fn, inputs, children, op",
                         [pytest.param(*p.values, op, id=p.id) for p, op in FLOAT64_REFUSED])
def test_float64_without_a_kernel_is_refused_at_the_users_line(fn, inputs, children, op):
    net = build(fn, **children)
    net.cast("float64")
    line = fn.__code__.co_firstlineno + (1 if "foreach" in fn.__code__.co_names else 0)
    with pytest.raises(NotImplementedError, match=rf"^{re.escape(__file__)}:{line}: export_onnx: "
                                                  rf"onnxruntime has no kernel for ONNX's {op} .*"
                                                  r"tensor\(double\).*float32"):
        export_onnx(net, [x.astype(np.float64) for x in inputs])


FLOAT16 = [
    case("batch_norm_float32_parameters", lambda F, n, x: (n.a(x), n.b(x), n.c(x)), [X3],
         a=lambda: nn.BatchNorm(in_channels=3), b=lambda: nn.BatchNorm(scale=False,
                                                                         in_channels=3),
         c=lambda: nn.BatchNorm(axis=-1, in_channels=4)),
    case("layer_norm_gelu", lambda F, n, x: (n.l(x), F.LeakyReLU(x, act_type="gelu")), [X3],
         l=lambda: nn.LayerNorm(in_channels=4)),
    case("cumsum_sequence_mask", lambda F, n, x, l: (F.cumsum(x, axis=1), F.SequenceMask(
        x, l, use_sequence_length=True, value=-2.5)), [X3, np.array([1, 2, 0], np.float32)]),
]


@pytest.mark.parametrize("fn, inputs, children", FLOAT16)
def test_float16_equals_mxnet(fn, inputs, children):
    net = build(fn, **children)
    net.cast("float16")
    compare(net, inputs, np.float16, 4e-3)


INTS = np.array([[-3, -2, 0, 1, 5, 7]], np.float32)


@pytest.mark.parametrize("opset", [13, 12])
def test_integer_inputs(opset):
    """round/trunc/rint/fix/floor/ceil of integers are the integers (ONNX's Floor and Round
    take none); a scalar op's float scalar is cast to the integer dtype towards 0, as MXNet
    does (F.maximum(x, 2.5) of int32 is F.maximum(x, 2)); relu of integers (ONNX's Relu takes
    none before opset 14); LayerNorm along axis -2."""
    def fn(F, n, x):
        i = F.cast(x, "int32")
        return (F.round(i) + F.trunc(i) + F.rint(i) + F.fix(i) + F.floor(i) + F.ceil(i),
                F.maximum(i, -2.7), F.minimum(i, 2.5), i > -2.5, 2.7 - i, i * 2.9, i % 2.5,
                F.cast(x, "int64") + 2.9, i ** 2.5, n.l(F.reshape(x, (1, 2, 3))),
                F.relu(i), F.relu(F.cast(x, "int64")))
    net = build(fn, l=lambda: nn.LayerNorm(axis=-2, in_channels=2))
    compare(net, [INTS], np.float32, 1e-5, opset)



@pytest.mark.parametrize("op, scalar", [(lambda F, i: i + 3e9, "3000000000.0"),
                                        (lambda F, i: F.minimum(i, float("inf")), "inf"),
                                        (lambda F, i: F.cast(i, "uint8") > -1, "-1")],
                         ids=["int32_plus_3e9", "int32_minimum_inf", "uint8_greater_minus_1"])
def test_integer_scalar_outside_the_dtype_is_refused_at_the_users_line(op, scalar):
    """A scalar an integer dtype cannot hold: MXNet's C++ cast of it is undefined (x86 gives
    the minimum), ONNX's int32 constant wrapped (x + 3e9 silently other values) and inf or NaN
    was a bare OverflowError from inside the export (h17review2)."""
    net = build(lambda F, n, x: op(F, F.cast(x, "int32")))
    line = op.__code__.co_firstlineno
    with pytest.raises(NotImplementedError, match=rf"^{re.escape(__file__)}:{line}: export_onnx: "
                                                  rf".* has the scalar {re.escape(scalar)}, "
                                                  r"which u?int\w+ cannot hold"):
        export_onnx(net, [INTS])

def test_checker_error_in_a_loop_body_names_the_users_line():
    """ONNX's checker refusing a node in a Scan body: the body's node and line, not the Scan."""
    def fn(F, n, xs):
        return gluon_cf.foreach(
            lambda x, s: (F.sqrt(F.cast(F.abs(x), "int32")), [s[0] + 1]), xs, [F.zeros((2,))])
    line = fn.__code__.co_firstlineno + 2
    with warnings.catch_warnings():
        with pytest.raises(NotImplementedError, match=rf"^{re.escape(__file__)}:{line}: "
                                                      r"export_onnx: the ONNX Sqrt converted "
                                                      r"from node '\w*sqrt0' .*int32"):
            export_onnx(build(fn), [np.ones((3, 2), np.float32)])


def test_load_keeps_a_float64_product_by_nearly_one(tmp_path):
    """onnxruntime's NoopElimination drops a float64 Mul/Div by a constant within float32's
    rounding of 1 and an Add/Sub of one rounding to float32's 0: load() ran x * 1.00000005 as
    x (h17review2); its sessions run without that optimizer."""
    net = build(lambda F, n, x: (F.abs(x) * 1.00000005 + 1, F.abs(x) / 1.00000005 + 1,
                                 F.abs(x) + 1e-300))
    net.cast("float64")
    x = np.array([[3.0, -2.0, 1e-300]])
    gluon_cf.export.save_artifact(net, [x], tmp_path / "m.onnx")
    for got, want in zip(gluon_cf.export.load(tmp_path / "m.onnx")(x), gluon_outputs(net, [x])):
        np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)
