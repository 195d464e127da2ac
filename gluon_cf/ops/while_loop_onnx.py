"""The ONNX export rules of ``while_loop`` that the rule's ``to_onnx`` (ops/while_loop.py) calls:
the guard of a loop that must not be truncated, and the padding of its step outputs to
max_iterations rows (NOTE [loops of no step] in ops/while_loop.py)."""
import numpy as np


def onnx_bound_guard(node, custom_node, finals):
    """A loop whose truncation drops data (``truncation_advice``: the child-sum TreeLSTM's
    loop over a node's children) and whose ``cond`` still holds after max_iterations steps
    fails the run at a ``Gather`` named ``.../max_iterations_exceeded``, which indexes past its
    one-element table (ONNX has no error of its own). Its result (a zero) is added to the first
    final loop var, so that no runtime prunes it."""
    from onnx import TensorProto, helper

    num_out, num_vars = node.spec["num_out_data"], node.spec["num_vars"]
    captured = range(num_vars, len(custom_node.inputs))
    values = {k: node.slot(k, name) for k, name in enumerate(finals)}
    last_cond = node.convert("cond", f"{node.name}_cond_last", outer_slots=captured,
                             outer_values=values)
    still = node.add("Cast", [node.truth(node.inline(last_cond)[0])], to=TensorProto.INT64)
    guard = f"{node.name}/max_iterations_exceeded"
    node.nodes.append(helper.make_node(
        "Gather", [node.const(np.zeros(1, np.int64)),
                   node.add("Reshape", [still, node.const([1])])], [guard], name=guard))
    dtype = helper.np_dtype_to_tensor_dtype(np.dtype(node.slot(0).dtype))
    node.add("Add", [finals[0], node.add("Cast", [guard], to=dtype)],
             [custom_node.outputs[num_out]])


def onnx_pad_rows(node, stacked, dtypes):
    """Define the while_loop node's step outputs: ``stacked`` (one row per step taken) padded
    with zero rows to max_iterations rows.

    After zero steps the rows of none are zeros of the step outputs' planned shapes; an output
    whose shape the plan leaves open takes it from one probe call of func on the initial loop
    vars, in an If (NOTE [gluon_cf ops as ONNX control flow]). A planned shape is never probed:
    the loop that ran no step must not run func (NOTE [loops of no step]), whose operators may
    fail on the initial vars (a take of a row of none) where Gluon runs none of them.
    """
    from onnx import helper, numpy_helper

    from gluon_cf.export.onnx_graph import value_info
    from gluon_cf.export.onnx_kit import Emitter, set_outputs

    max_iterations = node.spec["max_iterations"]
    outputs = node.node.outputs[:len(stacked)]
    out_ranks = [None if s is None else len(s) for s in node.out_shapes[:len(stacked)]]
    rows = node.add("Slice", [node.add("Shape", [stacked[0]]), node.const([0]), node.const([1])])
    no_step = node.truth(node.add("Equal", [rows, node.const([0])]))

    # then: zeros shaped (max_iterations, *shape of func's step outputs on the initial vars)
    probe_name = f"{node.name}_no_step"
    planned = [s if s is not None and None not in s else None
               for s in node.out_shapes[:len(stacked)]]
    open_ = [k for k, s in enumerate(planned) if s is None]
    probe = node.convert("func", probe_name, outer_slots=range(len(node.node.inputs)),
                         output_order=open_) if open_ else None
    zeros = Emitter(f"{probe_name}/zeros")
    probed = dict(zip(open_, probe.output_names if probe else ()))
    zero_outputs = [
        zeros.add("ConstantOfShape", [zeros.const(planned[k]) if planned[k] is not None else
                                      zeros.add("Concat", [zeros.const([max_iterations]),
                                                           zeros.add("Shape", [probed[k]])],
                                                axis=0)],
                  value=numpy_helper.from_array(np.zeros((1,), dtype)))
        for k, dtype in enumerate(dtypes)]
    then_outputs = [value_info(name, dtype, rank)
                    for name, dtype, rank in zip(zero_outputs, dtypes, out_ranks)]
    if probe is None:
        then_graph = helper.make_graph(zeros.nodes, probe_name, [], then_outputs)
    else:
        then_graph = probe.graph
        then_graph.node.extend(zeros.nodes)
        set_outputs(then_graph, then_outputs)

    # else: Pad(stacked, begin (0, ..., 0), end (max_iterations - rows, 0, ..., 0))
    pad = Emitter(f"{node.name}_padded")
    missing = pad.add("Sub", [pad.const([max_iterations]), rows])
    padded = []
    int_zero = numpy_helper.from_array(np.zeros((1,), np.int64))
    for value in stacked:
        rank = pad.add("Shape", [pad.add("Shape", [value])])
        before = pad.add("ConstantOfShape", [rank], value=int_zero)
        after = pad.add("ConstantOfShape", [pad.add("Sub", [rank, pad.const([1])])],
                        value=int_zero)
        pads = pad.add("Concat", [before, missing, after], axis=0)
        padded.append(pad.add("Pad", [value, pads]))
    pad_graph = helper.make_graph(pad.nodes, pad.prefix, [], [
        value_info(name, dtype, rank) for name, dtype, rank in zip(padded, dtypes, out_ranks)])

    node.add("If", [no_step], outputs, then_branch=then_graph, else_branch=pad_graph)
