"""Tests for gluon_cf.export.onnx_graph: MXNet symbols -> (nestable) ONNX graphs.

Every model is checked with ``onnx.checker.check_model(full_check=True)`` (inside
``make_onnx_model`` / ``export_symbol_onnx``) and run in onnxruntime against MXNet or numpy.
"""
import mxnet as mx
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from gluon_cf.export.onnx_graph import (
    CustomOpNode, ValueSpec, export_symbol_onnx, make_onnx_model, params_to_initializers,
    register_custom_converter, symbol_to_onnx_graph)

TOL = dict(rtol=1e-5, atol=1e-5)
RNG = np.random.RandomState(0)


def run(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def randn(*shape):
    return RNG.randn(*shape).astype(np.float32)


def all_defined_names(graph):
    """Every name defined in ``graph`` and its subgraphs, with repetitions."""
    names = [v.name for v in graph.input] + [i.name for i in graph.initializer]
    for node in graph.node:
        names += [o for o in node.output if o]
        for attr in node.attribute:
            for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs):
                names += all_defined_names(sub)
    return names


# ----------------------------------------------------------------------------- plain export

def test_mlp_export_matches_mxnet_with_dynamic_batch(tmp_path):
    net = mx.gluon.nn.HybridSequential()
    net.add(mx.gluon.nn.Dense(16, activation="relu"), mx.gluon.nn.BatchNorm(),
            mx.gluon.nn.Dense(3))
    net.initialize(mx.init.Xavier())
    net.hybridize()
    net(mx.nd.array(randn(2, 5)))  # build the cached graph
    sym = net._cached_graph[1]
    params = {p.name: p.data() for p in net.collect_params().values()}

    path = tmp_path / "mlp.onnx"
    model = export_symbol_onnx(sym, params, [("data", (None, 5), "float32")], path)

    assert [v.name for v in model.graph.input] == ["data"]
    assert [v.name for v in model.graph.output] == sym.list_outputs()
    assert model.opset_import[0].version == 13
    assert onnx.load(str(path)).graph.node == model.graph.node
    for batch in (4, 7):
        x = randn(batch, 5)
        (got,) = run(model, {"data": x})
        np.testing.assert_allclose(got, net(mx.nd.array(x)).asnumpy(), **TOL)


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_integer_index_inputs_keep_their_dtype(index_dtype):
    table, idx = mx.sym.var("table"), mx.sym.var("idx")
    sym = mx.sym.take(table, idx) * 2
    table_value = randn(10, 3)
    model = export_symbol_onnx(sym, {"table": table_value}, [("idx", (None,), index_dtype)],
                               output_names=["rows"])

    assert model.graph.input[0].type.tensor_type.elem_type == \
        helper.np_dtype_to_tensor_dtype(np.dtype(index_dtype))
    indices = np.array([3, 0, 9, 3], dtype=index_dtype)
    (got,) = run(model, {"idx": indices})
    want = mx.nd.take(mx.nd.array(table_value), mx.nd.array(indices, dtype=index_dtype)) * 2
    np.testing.assert_allclose(got, want.asnumpy(), **TOL)


def test_graph_reports_output_specs_and_prefixes_names():
    x, w = mx.sym.var("x"), mx.sym.var("w")
    fc = mx.sym.FullyConnected(x, w, no_bias=True, num_hidden=4, name="fc")
    sym = mx.sym.Group([mx.sym.relu(fc), mx.sym.argmax(fc, axis=1), x])
    converted = symbol_to_onnx_graph(sym, {"w": randn(4, 5)}, [("x", (None, 5), "float32")],
                                     ["a", "b", "c"], graph_name="g")

    assert converted.input_names == ["g/x"]
    assert converted.outputs == [ValueSpec("a", (None, 4), np.dtype("float32")),
                                 ValueSpec("b", (None,), np.dtype("float32")),
                                 ValueSpec("c", (None, 5), np.dtype("float32"))]
    defined = all_defined_names(converted.graph)
    assert len(defined) == len(set(defined))
    assert all(n.startswith("g/") for n in defined if n not in ("a", "b", "c"))


def test_rminus_scalar_on_a_gluon_named_parameter():
    # mx2onnx recognises `1 - w` by the node name; Gluon's names used to make it `w - 1`.
    w, x = mx.sym.var("w"), mx.sym.var("x")
    sym = mx.sym._internal._rminus_scalar(w, scalar=1.0, name="block0__rminusscalar0") + x
    w_value, x_value = randn(3), randn(3)
    model = export_symbol_onnx(sym, {"w": w_value}, [("x", (3,), "float32")])
    (got,) = run(model, {"x": x_value})
    np.testing.assert_allclose(got, 1 - w_value + x_value, **TOL)


def test_fully_connected_default_flatten_on_3d_input():
    # MXNet flattens by default; mx2onnx assumes flatten=False when the attribute is absent.
    x, w = mx.sym.var("x"), mx.sym.var("w")
    sym = mx.sym.FullyConnected(x, w, no_bias=True, num_hidden=4)
    x_value, w_value = randn(2, 3, 5), randn(4, 15)
    model = export_symbol_onnx(sym, {"w": w_value}, [("x", (None, 3, 5), "float32")])
    (got,) = run(model, {"x": x_value})
    np.testing.assert_allclose(got, x_value.reshape(2, 15) @ w_value.T, **TOL)


@pytest.mark.parametrize("codes,rank", [((-3, -2), 4), ((0, -3, -2), 4), ((-3, 0), 3),
                                        ((0, 0, -3), 4), ((-3, -1), 4), ((-1, -3), 4),
                                        ((2, -3, 0), 4), ((0, -2), 4), ((-3, -3), 4),
                                        ((-3, -2), 2)])
@pytest.mark.parametrize("opset", [12, 13])
def test_reshape_codes_merging_axes_on_dynamic_dims(codes, rank, opset):
    """MXNet's -3 (merge two axes) and -2 (keep the rest), which mx2onnx refuses but for fixed
    patterns (autograph's F.concat of collected rows reshapes by (-3, -2)): the target shape
    is computed from the input's at run time, so every dim may be dynamic."""
    x = mx.sym.var("x")
    sym = mx.sym.reshape(x, shape=codes)
    model = export_symbol_onnx(sym, None, [("x", (None,) * rank, "float32")], opset=opset)
    for shape in [(2, 3, 4, 5), (2, 1, 1, 1), (2, 5, 3, 2)]:
        value = randn(*shape[:rank])
        (got,) = run(model, {"x": value})
        want = mx.nd.reshape(mx.nd.array(value), shape=codes).asnumpy()
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_names_with_special_characters():
    x = mx.sym.var("in put:0/x")
    sym = mx.sym.relu(mx.sym.broadcast_add(x, mx.sym.var("b/ias:0"), name="add/0:x"),
                      name="re lu")
    b_value, x_value = randn(3), randn(2, 3)
    model = export_symbol_onnx(sym, {"arg:b/ias:0": b_value}, [("in put:0/x", (2, 3), "float32")],
                               output_names=["out:0"])
    (got,) = run(model, {"in put:0/x": x_value})
    np.testing.assert_allclose(got, np.maximum(x_value + b_value, 0), **TOL)


# ----------------------------------------------------------------------------- nesting: If

def test_if_branches_read_outer_parameter_by_name():
    x, w = mx.sym.var("x"), mx.sym.var("w")
    fc = lambda: mx.sym.FullyConnected(x, w, no_bias=True, num_hidden=4, name="fc")  # noqa: E731
    w_value = randn(4, 5)
    branches = {}
    for name, body in (("then", mx.sym.tanh(fc())), ("else", mx.sym.relu(fc()))):
        branches[name] = symbol_to_onnx_graph(
            body, {"w": w_value}, output_names=[f"{name}_y"], graph_name=f"if0_{name}",
            outer={"x": ("x", (None, 5), "float32")}, embed_params=False)
        assert branches[name].graph.input == []          # outer values are not branch inputs
        assert sorted(v.name for v in branches[name].outer_inputs) == ["w", "x"]

    main = helper.make_graph(
        [helper.make_node("If", ["pred"], ["y"], then_branch=branches["then"].graph,
                          else_branch=branches["else"].graph)],
        "main",
        [helper.make_tensor_value_info("pred", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
        params_to_initializers({"w": w_value}))
    model = make_onnx_model(main)  # full_check

    defined = all_defined_names(model.graph)
    assert len(defined) == len(set(defined))
    x_value = randn(3, 5)
    for pred, activation in ((True, np.tanh), (False, lambda v: np.maximum(v, 0))):
        (got,) = run(model, {"pred": np.array(pred), "x": x_value})
        np.testing.assert_allclose(got, activation(x_value @ w_value.T), **TOL)


# ----------------------------------------------------------------------------- nesting: Loop

def rnn_step_symbol():
    """One RNN step over the outer sequence ``xs``: Loop-13 body (i, cond, h) -> (cond, h, y)."""
    i, cond, h, xs = (mx.sym.var(n) for n in ("i", "cond", "h", "xs"))
    W, U = mx.sym.var("W"), mx.sym.var("U")
    x_t = mx.sym.take(xs, i, mode="raise")  # see NOTE [mx2onnx pitfalls] on 0-d indices
    h_new = mx.sym.tanh(mx.sym.FullyConnected(x_t, W, no_bias=True, num_hidden=4, name="in")
                        + mx.sym.FullyConnected(h, U, no_bias=True, num_hidden=4, name="rec"))
    return mx.sym.Group([cond, h_new, h_new])


def test_loop_body_rnn_step_with_carried_state_scan_output_and_outer_weights():
    T, B, D, H = 6, 2, 3, 4
    params = {"W": randn(H, D), "U": randn(H, H)}
    body = symbol_to_onnx_graph(
        rnn_step_symbol(), params,
        [("i", (), "int64"), ("cond", (), "bool"), ("h", (None, H), "float32")],
        ["cond_out", "h_out", "y_out"], graph_name="loop0_body",
        outer={"xs": ("xs", (None, None, D), "float32")}, embed_params=False)
    assert body.input_names == ["loop0_body/i", "loop0_body/cond", "loop0_body/h"]
    assert body.outputs == [ValueSpec("cond_out", (), np.dtype(bool)),
                            ValueSpec("h_out", (None, H), np.dtype("float32")),
                            ValueSpec("y_out", (None, H), np.dtype("float32"))]

    main = helper.make_graph(
        [helper.make_node("Shape", ["xs"], ["xs_shape"]),
         helper.make_node("Constant", [], ["zero"], value=helper.make_tensor(
             "zero", TensorProto.INT64, [], [0])),
         helper.make_node("Gather", ["xs_shape", "zero"], ["trip_count"]),
         helper.make_node("Constant", [], ["true"], value=helper.make_tensor(
             "true", TensorProto.BOOL, [], [True])),
         helper.make_node("Loop", ["trip_count", "true", "h0"], ["h_final", "ys"],
                          body=body.graph)],
        "main",
        [helper.make_tensor_value_info("xs", TensorProto.FLOAT, [None, None, D]),
         helper.make_tensor_value_info("h0", TensorProto.FLOAT, [None, H])],
        [helper.make_tensor_value_info("h_final", TensorProto.FLOAT, [None, H]),
         helper.make_tensor_value_info("ys", TensorProto.FLOAT, [None, None, H])],
        params_to_initializers(params))
    model = make_onnx_model(main)

    xs, h0 = randn(T, B, D), randn(B, H)
    h_final, ys = run(model, {"xs": xs, "h0": h0})

    h, want_ys = mx.nd.array(h0), []
    W, U = mx.nd.array(params["W"]), mx.nd.array(params["U"])
    for t in range(T):
        h = mx.nd.tanh(mx.nd.FullyConnected(mx.nd.array(xs[t]), W, no_bias=True, num_hidden=H)
                       + mx.nd.FullyConnected(h, U, no_bias=True, num_hidden=H))
        want_ys.append(h.asnumpy())
    np.testing.assert_allclose(ys, np.stack(want_ys), **TOL)
    np.testing.assert_allclose(h_final, h.asnumpy(), **TOL)


# ----------------------------------------------------------------------------- Custom nodes

class _Scale(mx.operator.CustomOp):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0] * self.factor)


@mx.operator.register("_test_gluon_cf_scale")
class _ScaleProp(mx.operator.CustomOpProp):
    def __init__(self, factor):
        super().__init__(need_top_grad=True)
        self.factor = float(factor)

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return _Scale(self.factor)


class _Select(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        pred, x = in_data
        out = mx.nd.tanh(x) if pred.asscalar() > 0 else mx.nd.relu(x)
        self.assign(out_data[0], req[0], out)


@mx.operator.register("_test_gluon_cf_select")
class _SelectProp(mx.operator.CustomOpProp):
    """A miniature cond: ``tanh(x) if pred > 0 else relu(x)``."""
    def list_arguments(self):
        return ["pred", "x"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[1]], []

    def create_operator(self, ctx, shapes, dtypes):
        return _Select()


seen_calls = []


@register_custom_converter("_test_gluon_cf_scale")
def _convert_scale(node: CustomOpNode):
    seen_calls.append(node)
    factor = helper.make_tensor(node.name + "_factor", TensorProto.FLOAT, [],
                                [float(node.attrs["factor"])])
    return [helper.make_node("Constant", [], [node.name + "_factor"], value=factor),
            helper.make_node("Mul", [node.inputs[0], node.name + "_factor"], node.outputs)]


@register_custom_converter("_test_gluon_cf_select")
def _convert_select(node: CustomOpNode):
    """Like the real cond converter will: If whose branches read ``x`` from outside."""
    pred, x = node.inputs
    outer = {"x": (x, node.input_shapes[1], node.input_dtypes[1])}
    var = mx.sym.var("x")
    then_graph, else_graph = (
        symbol_to_onnx_graph(body, output_names=[f"{branch}_y"],
                             graph_name=f"{node.name}_{branch}",
                             outer=outer, opset=node.opset).graph
        for branch, body in (("then", mx.sym.tanh(var)), ("else", mx.sym.relu(var))))
    zero = helper.make_tensor(node.name + "_zero", TensorProto.FLOAT, [], [0.0])
    return [helper.make_node("Constant", [], [node.name + "_zero"], value=zero),
            helper.make_node("Greater", [pred, node.name + "_zero"], [node.name + "_pred"]),
            helper.make_node("If", [node.name + "_pred"], node.outputs,
                             then_branch=then_graph, else_branch=else_graph)]


def test_custom_converter_is_dispatched_on_op_type():
    x = mx.sym.var("x")
    sym = mx.sym.relu(mx.sym.Custom(x, op_type="_test_gluon_cf_scale", factor=3, name="scale0"))
    model = export_symbol_onnx(sym, {}, [("x", (2, None), "float32")], output_names=["y"])

    node = seen_calls[-1]
    assert (node.op_type, node.name, node.outputs, node.opset) == \
        ("_test_gluon_cf_scale", "scale0", ["scale0"], 13)
    assert node.attrs["factor"] == "3"
    assert node.input_dtypes == [np.dtype("float32")]
    assert node.input_shapes == [(2, None)]
    x_value = randn(2, 3)
    (got,) = run(model, {"x": x_value})
    np.testing.assert_allclose(got, np.maximum(3 * x_value, 0), **TOL)


def test_custom_converter_can_nest_subgraphs_reading_the_enclosing_graph():
    pred, x, w = mx.sym.var("pred"), mx.sym.var("x"), mx.sym.var("w")
    fc = mx.sym.FullyConnected(x, w, no_bias=True, num_hidden=4, name="fc")
    sym = mx.sym.Custom(pred, fc, op_type="_test_gluon_cf_select", name="cond0") * 2
    w_value = randn(4, 5)
    model = export_symbol_onnx(sym, {"w": w_value},
                               [("pred", (1,), "float32"), ("x", (None, 5), "float32")])

    defined = all_defined_names(model.graph)
    assert len(defined) == len(set(defined))
    # names in the branches get the enclosing graph's prefix in front of their own
    assert "main/then_y" in defined
    assert any(name.startswith("main/cond0_then/") for name in defined)
    x_value = randn(3, 5)
    for pred_value in (1.0, -1.0):
        feeds = {"pred": np.array([pred_value], np.float32), "x": x_value}
        (got,) = run(model, feeds)
        want = sym.eval(pred=mx.nd.array(feeds["pred"]), x=mx.nd.array(x_value),
                        w=mx.nd.array(w_value))[0]
        np.testing.assert_allclose(got, want.asnumpy(), **TOL)


# ----------------------------------------------------------------------------- errors

@mx.operator.register("_test_gluon_cf_unconverted")
class _UnconvertedProp(_ScaleProp):
    """An MXNet Custom op with no ONNX converter."""


def test_unregistered_custom_op_type_is_named():
    x = mx.sym.var("x")
    sym = mx.sym.Custom(x, op_type="_test_gluon_cf_unconverted", factor=1, name="c0")
    with pytest.raises(NotImplementedError,
                       match=r"no ONNX converter for Custom op_type '_test_gluon_cf_unconverted' "
                             r"\(node 'c0'\)"):
        export_symbol_onnx(sym, {}, [("x", (2,), "float32")])


def test_unplaced_variable_error_says_how_to_fix():
    sym = mx.sym.var("x") + mx.sym.var("h")
    with pytest.raises(ValueError, match=r"symbol input 'h' is not in input_specs, params or "
                                         r"outer; add \('h', shape, dtype\) to input_specs"):
        symbol_to_onnx_graph(sym, {}, [("x", (2,), "float32")])


def test_variable_given_twice_is_rejected():
    sym = mx.sym.var("x") * 2
    with pytest.raises(ValueError, match="variable 'x' is given in both input_specs and params"):
        symbol_to_onnx_graph(sym, {"x": randn(2)}, [("x", (2,), "float32")])


def test_unsupported_opset_is_rejected():
    with pytest.raises(ValueError, match=r"opset 17 is not supported; mx2onnx has converters "
                                         r"for opsets \[12, 13\] only"):
        symbol_to_onnx_graph(mx.sym.var("x") * 2, {}, [("x", (2,), "float32")], opset=17)


def test_opset_12_export():
    sym = mx.sym.sum(mx.sym.var("x"), axis=1)
    model = export_symbol_onnx(sym, {}, [("x", (None, 3), "float32")], opset=12)
    assert model.opset_import[0].version == 12
    x_value = randn(2, 3)
    np.testing.assert_allclose(run(model, {"x": x_value})[0], x_value.sum(axis=1), **TOL)
