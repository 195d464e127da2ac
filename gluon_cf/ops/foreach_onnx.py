"""The ONNX export rules of ``foreach`` that the rule's ``to_onnx`` (ops/foreach.py) calls: the
Scan of a loop over data whose length is known only at run time, and the step outputs of such
a loop that runs no step (NOTE [a foreach of no step] in ops/foreach.py).

NOTE [rows of none of a run-time width]
    A converted ``for`` over kept rows that collects what its body computes from each row
    (``for r in F.contrib.boolean_mask(x, m): items.append(r * 2)``), hybridized, gives rows
    of none of the shapes MXNet's inference of its body's graph gives for one step where the
    mask keeps none (NOTE [a foreach of no step]), and refuses where inference cannot tell
    them. Exported with x's width a dynamic axis, the step's width is known only at run time,
    and the no-step branch failed in its guard (onnxruntime's 'indices element out of data
    bounds', no user line) where Gluon gives (0, w) rows (issue 24). Now that branch runs the
    body once on a probe, one row of ones of the data's run-time row shape with the initial
    states, and takes the step outputs' shapes from it, as the while_loop's probe does (NOTE
    [dims a loop's rows follow] in ops/while_loop_onnx.py): its gathers read copies of their
    data with a zero row appended, each index clipped into it (a take of a row of no row
    still has the row's shape), and the rows' shape reads the probe's values (NOTE [a probe
    read for its values]). Where Gluon's inference is incomplete (``gluon_infers`` asks it
    at export, per set of varying dims that are 0) the guard still fails, named after the
    for's line, on every call. Ones, not zeros: a body dividing integers by its row
    (``F.broadcast_div(c, r)``, ``broadcast_mod``) failed in onnxruntime's 'Integer division
    by zero', naming no line, where Gluon gives the rows of none (review 31x).
"""
import copy

import numpy as np

from .while_loop_onnx import gluon_infers, lines_of, probe_gathers, zero_of_values


def declare_step_shapes(step_outputs, out_shapes):
    """The body's step outputs declare the dims the shape plan knows of one step (the rows of
    the node's outputs): with no step, an artifact's Scan makes its empty outputs from them
    (a step's dims unknown there were 0: (0, 0) where Gluon's graph computes (0, 3))."""
    for info, shape in zip(step_outputs, out_shapes):
        dims = info.type.tensor_type.shape.dim
        if shape is None or not info.type.tensor_type.HasField("shape") or \
                len(dims) != len(shape) - 1:
            continue
        for dim, size in zip(dims, shape[1:]):
            if size is not None and not dim.HasField("dim_value"):
                dim.dim_value = size


def _onnx_dtype(dtype):
    from onnx import helper
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def standard_nodes_only(graph):
    """Whether ``graph`` and its subgraphs hold ONNX's own nodes only: a Scan whose body holds
    an artifact's Recursion runs in the artifact's interpreter, which runs no step itself."""
    for onnx_node in graph.node:
        if onnx_node.domain not in ("", "ai.onnx"):
            return False
        for attr in onnx_node.attribute:
            if any(not standard_nodes_only(g) for g in
                   ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)):
                return False
    return True


def _no_step_slots(node):
    """The slot shapes Gluon infers a converted for's rows of none from (``no_step_outputs``
    in ops/foreach_data.py): each data's row shape, then the states' and captured shapes."""
    num_data = node.spec["num_data"]
    return lambda shapes: [s[1:] if k < num_data else s for k, s in enumerate(shapes)]


def scan_of_any_length(node, states, data, body, dtypes, steps):
    """The Scan of a loop over data whose length is known at run time, under an If that, when
    there is no row, passes the states through and gives each step output its rows of none
    (``steps``: the dims of one step): onnxruntime's Scan fails on empty data ('Invalid
    dim0_offset of 0'), where the loop runs no step (a converted ``for r in
    F.contrib.boolean_mask(x, m)``, issue 24). A step dim known only at run time is taken
    from a probe step (NOTE [rows of none of a run-time width]); where Gluon's inference
    cannot tell it, the no-step branch fails in a Gather named after the user's line, as the
    hybridized foreach refuses data of no row."""
    from onnx import TensorProto, helper, numpy_helper

    from gluon_cf.export.onnx_graph import value_info
    from gluon_cf.export.onnx_kit import Emitter

    num_out = len(steps)
    shapes = node.out_shapes[num_out:] + node.out_shapes[:num_out]     # (the Scan's order)
    ranks = [None if s is None else len(s) for s in shapes]
    rows = node.add("Slice", [node.add("Shape", [data[0]]), node.const([0]), node.const([1])])
    has_rows = node.truth(node.add("Greater", [rows, node.const([0])]))
    scan, none = Emitter(f"{node.name}_steps"), Emitter(f"{node.name}_no_step")
    scanned = [scan.fresh("value") for _ in shapes]
    scan.add("Scan", states + data, scanned, body=body, num_scan_inputs=len(data))
    kept = [none.add("Identity", [s]) for s in states]
    guard, probed = None, None
    if any(None in step for step in steps) or not node.spec.get("no_steps_ok"):
        # (the user's own foreach refuses data of no row, as MXNet's: NOTE [a foreach of no
        # step]; a converted for's step shapes are Gluon's inference's)
        infers = gluon_infers(node, none, "body", _no_step_slots(node)) \
            if node.spec.get("no_steps_ok") and any(None in step for step in steps) else \
            bool(node.spec.get("no_steps_ok"))
        where = node.where().rstrip(": ")
        guard = f"{node.name}/no_step_gives_no_output_shape" + (f" ({where})" if where else "")
        if infers is True:
            guard = None
        else:   # (an index past the one-element table where Gluon refuses)
            # (1 computed from the rows, which no optimizer folds and warns of)
            past = none.add("Sub", [rows, none.add("Sub", [rows, none.const([1])])])
            if infers is not False:   # (0 where Gluon infers)
                past = none.add("Mul", [past, none.add("Reshape", [none.add(
                    "Cast", [none.add("Not", [infers])], to=TensorProto.INT64),
                    none.const([1])])])
            none.nodes.append(helper.make_node(
                "Gather", [none.const(np.zeros(1, np.int64)), past], [guard], name=guard))
        if infers is not False:
            probed = _probe_step(node, none, states, data, body, infers, len(dtypes))
    for k, (step, dtype) in enumerate(zip(steps, dtypes[len(states):])):
        if probed is not None and None in step:
            # (NOTE [a probe read for its values])
            value = probed[len(states) + k]
            shape = none.add("Add", [none.add("Concat", [none.const([0]), none.add("Slice", [
                none.add("Shape", [value]), none.const([1]),
                none.const([np.iinfo(np.int64).max])])], axis=0),
                zero_of_values(none, value)])
            empty = none.add("ConstantOfShape", [shape],
                             value=numpy_helper.from_array(np.zeros((1,), dtype)))
        else:
            empty = none.const(np.zeros((0,) + tuple(d or 0 for d in step), dtype), dtype)
        kept.append(empty if guard is None else
                    none.add("Add", [empty, none.add("Cast", [guard],
                                                      to=_onnx_dtype(dtype))]))
    branches = [helper.make_graph(emitter.nodes, emitter.prefix, [], [
        value_info(name, dtype, rank) for name, dtype, rank in zip(names, dtypes, ranks)])
        for emitter, names in ((scan, scanned), (none, kept))]
    outs = node.node.outputs
    node.add("If", [has_rows], outs[num_out:] + outs[:num_out], then_branch=branches[0],
             else_branch=branches[1])


def _probe_step(node, emitter, states, data, body, infers, count):
    """The Scan outputs (states, then step outputs) of ``body`` run once, in ``emitter``, on
    one row of ones of each data's run-time row shape and the initial ``states``, its
    gathers kept in range where Gluon ``infers`` (NOTE [rows of none of a run-time width])."""
    from onnx import numpy_helper

    probe = copy.deepcopy(body)
    probe.name = f"{body.name}_probe"
    probe_gathers(probe, infers, lines_of(node, "body"))
    rows = []
    for k, name in enumerate(data):
        shape = emitter.add("Concat", [emitter.const([1]), emitter.add("Slice", [
            emitter.add("Shape", [name]), emitter.const([1]),
            emitter.const([np.iinfo(np.int64).max])])], axis=0)
        dtype = np.dtype(node.node.input_dtypes[k])
        rows.append(emitter.add("ConstantOfShape", [shape],
                                value=numpy_helper.from_array(np.ones((1,), dtype))))
    outputs = [emitter.fresh("probed") for _ in range(count)]
    emitter.add("Scan", list(states) + rows, outputs, body=probe, num_scan_inputs=len(data))
    return outputs
