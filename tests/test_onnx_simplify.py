"""NOTE [simplifying exported graphs]: common subexpressions merged, loop-invariant nodes moved
in front of their loop, values unchanged (onnxruntime before and after), and nothing moved
that could fail where the loop would not have run it."""
import copy

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from gluon_cf.export.onnx_simplify import simplify


def run(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def const(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.asarray(value, dtype), name))


def loop_model():
    """y = table[i mod n] summed over `trips` iterations; the body computes n = Shape(table)[0]
    twice (a common subexpression, and loop-invariant) and gathers from `table` (not moved:
    Gather of an empty table would fail even when the loop runs zero times)."""
    body = helper.make_graph([
        const("one", [1]), const("zero", [0]),
        helper.make_node("Shape", ["table"], ["shape_a"]),
        helper.make_node("Shape", ["table"], ["shape_b"]),
        helper.make_node("Slice", ["shape_a", "zero", "one"], ["n_a"]),
        helper.make_node("Slice", ["shape_b", "zero", "one"], ["n_b"]),
        helper.make_node("Reshape", ["i", "one"], ["i1"]),
        helper.make_node("Mod", ["i1", "n_a"], ["k"]),
        helper.make_node("Gather", ["table", "k"], ["row"]),
        helper.make_node("Cast", ["n_b"], ["n_float"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["acc", "row"], ["acc_plus"]),
        helper.make_node("Add", ["acc_plus", "n_float"], ["acc_out"]),
        helper.make_node("Identity", ["cond"], ["cond_out"]),
    ], "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                helper.make_tensor_value_info("acc", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [1])])
    graph = helper.make_graph([
        const("acc0", [0.0], np.float32), const("go", True, np.bool_),
        helper.make_node("Loop", ["trips", "go", "acc0"], ["y"], body=body),
    ], "main", [helper.make_tensor_value_info("table", TensorProto.FLOAT, [None]),
                helper.make_tensor_value_info("trips", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)


def test_values_are_unchanged_and_work_leaves_the_loop():
    model = loop_model()
    simplified = copy.deepcopy(model)
    merged, moved = simplify(simplified.graph)
    onnx.checker.check_model(simplified, full_check=True)
    assert merged >= 2                         # the second Shape and Slice
    body = simplified.graph.node[-1].attribute[0].g
    ops = [n.op_type for n in body.node]
    assert "Shape" not in ops and "Gather" in ops
    assert moved >= 3
    for table, trips in ((np.arange(5, dtype=np.float32), 7), (np.ones(3, np.float32), 1)):
        feeds = {"table": table, "trips": np.array(trips, np.int64)}
        np.testing.assert_array_equal(run(simplified, feeds)[0], run(model, feeds)[0])


def test_a_loop_that_runs_zero_times_still_runs():
    """An empty table with zero trips: nothing that fails on it (Gather) left the loop."""
    simplified = copy.deepcopy(loop_model())
    simplify(simplified.graph)
    feeds = {"table": np.zeros(0, np.float32), "trips": np.array(0, np.int64)}
    np.testing.assert_array_equal(run(simplified, feeds)[0], [0.0])


def test_random_operators_and_graph_outputs_are_not_merged():
    graph = helper.make_graph([
        helper.make_node("RandomUniform", [], ["r1"], shape=[2]),
        helper.make_node("RandomUniform", [], ["r2"], shape=[2]),
        helper.make_node("Identity", ["x"], ["a"]),
        helper.make_node("Identity", ["x"], ["b"]),
    ], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("r1", "r2", "a",
                                                                         "b")])
    merged, _ = simplify(graph)
    assert merged == 0 and len(graph.node) == 4
