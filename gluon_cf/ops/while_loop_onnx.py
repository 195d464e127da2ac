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


# NOTE [dims a loop's rows follow]
#     A while_loop that ran no step gives max_iterations zero rows of its step outputs' shapes
#     (NOTE [loops of no step]), or none of them at exact length (the Loop's own empty
#     scan outputs took the dims its body declares, 0 where unknown: (0, 1, 0) for
#     (0, 1, d)). A step shape the shape plan knows is a constant; a dim that
#     changes with the dynamic axes was taken from one probe call of func on the initial loop
#     vars, and func may fail there where Gluon runs nothing (a take of kept row i with no row
#     kept: onnxruntime's Gather error, no user line; but see the end). The plan keeps every
#     run's concrete shapes per node (NOTE [shape plan]: the example, the grown run, the
#     smallest and a large size): a step dim equal in every run (three at least, two sizes
#     at least) to p * d + q, d a dim of one of the node's inputs, p and q integers (a copy
#     of it, or ``concat(r, r)`` of a row: twice it), is computed from that input's shape
#     at run time, no probe. Only a dim that follows no input so (a row count of a mask in
#     the body) is still probed.
#     The runs vouch for the line only between the sizes they had: a row clipped to 1100
#     (``x[:, :1100]``) follows x's width at every size probed, 1031 the largest, and gave
#     (3, 1, 2000) zero rows at width 2000 where Gluon gives (3, 1, 1100); and two inputs of
#     equal widths in the example are equal in every run (unnamed dynamic axes grow alike),
#     so the line followed the first where the rows were the other's. So the line is used
#     where each input dim it may follow lies within the sizes the runs had and all those
#     lines agree; elsewhere func is probed. A dim that follows no input so (``dot(r, r.T)``
#     flattened, d * d) or one past the sizes the runs had is probed too (issue 24), and the
#     probe must not fail where Gluon, which infers shapes and runs no operator, gives zero
#     rows: in the probe every Gather (and GatherElements) reads a copy of its data with one
#     zero row more on its axis, each index wrapped and clipped into it, and an index taken
#     modulo a dim (mode 'wrap') is taken modulo 1 where the dim is 0 (``probe_gathers``).
#     A probe whose gathers were in range computes what it did; one that took a row of none
#     gets the shapes MXNet's inference gives (the row's), its values unused (zeros are
#     returned). The probe's other operators still fail where func's would on the initial
#     loop vars. Only where Gluon infers the step shapes: where MXNet's inference of func's
#     graph on the call's input shapes is incomplete (a ``boolean_mask`` not followed by a
#     take, a ``gather_nd`` or a nested ``cond`` of branches of other sizes reading a value
#     of no row: MXNet's legacy shapes read a dim of 0 as unknown), hybridized gluon_cf runs
#     func's graph once for them (NOTE [loops of no step]), failing where a take of no row
#     fails (BlockZeroSizeError); there the probe's gathers keep an index out of range out
#     of range, and every gather is named after the user's line, so that the exported model
#     fails too, at that line. Which of the two Gluon does is not guessed from the operators'
#     names (a text search for ``boolean_mask`` in func's graph took the zero rows of a take
#     of a masked row to fail, and a nested cond to infer): ``gluon_infers`` asks the same
#     inference (``inferred_step_rows``) at export, once for each set of the inputs' varying
#     dims that may be 0 (the only way sizes change its answer), and the model picks the
#     answer by the dims that are 0 at run time.


def _dims_followed(node, k):
    """Per dim of step output ``k`` (its rows axis left out), its size, or the lines through
    every run of the shape plan, best first: ``(input position, axis, p, q, lowest, highest)``
    with the dim ``p * d + q`` of that input's dim d, which was between lowest and highest;
    None when a dim follows no input (NOTE [dims a loop's rows follow])."""
    planned = node.out_shapes[k]
    if planned is None:
        return None
    runs = [(ins, outs[k]) for ins, outs in node.runs
            if outs[k] is not None and len(outs[k]) == len(planned) and None not in outs[k]]
    if len(runs) < 3:
        return None
    dims = []
    for j, size in enumerate(planned[1:], 1):
        sizes = [out[j] for _, out in runs]
        if size is not None or len(set(sizes)) < 2:
            dims.append(size if size is not None else sizes[0])
            continue
        found = []
        for m, shape in enumerate(runs[0][0]):
            for axis in range(len(shape or ())):
                ds = [ins[m][axis] if ins[m] is not None and len(ins[m]) == len(shape) else None
                      for ins, _ in runs]
                line = _line_through(list(zip(ds, sizes)))
                if line is not None:   # (every run had the dim: _line_through saw no None)
                    known = [d for d in ds if d is not None]
                    found.append((m, axis) + line + (min(known), max(known)))
        if not found:
            return None
        dims.append(sorted(found, key=lambda f: (f[2:4] != (1, 0), f)))   # (a copy first)
    return dims


def _affine(emitter, dim, p, q):
    """``p * dim + q`` of a 1-D int64 ``dim``, in ``emitter``."""
    if p != 1:
        dim = emitter.add("Mul", [dim, emitter.const([p])])
    return dim if q == 0 else emitter.add("Add", [dim, emitter.const([q])])


def _line_through(points):
    """``(p, q)``, integers with ``size == p * dim + q`` at every ``(dim, size)`` of
    ``points`` (p nonzero: ``concat(r, r)`` has twice r's width), else None."""
    if any(dim is None for dim, _ in points) or len({dim for dim, _ in points}) < 2:
        return None
    (d1, s1), (d2, s2) = sorted(set(points))[:2]
    if d1 == d2 or (s2 - s1) % (d2 - d1):
        return None
    p = (s2 - s1) // (d2 - d1)
    q = s1 - p * d1
    return (p, q) if p and all(size == p * dim + q for dim, size in points) else None


def _input_dim(emitter, node, m, axis):
    """The 1-D int64 dim ``axis`` of the node's input ``m``, in ``emitter``."""
    return emitter.add("Slice", [emitter.add("Shape", [node.node.inputs[m]]),
                                 emitter.const([axis]), emitter.const([axis + 1])])


def _lines_hold(emitter, node, followed):
    """The bool scalar: every line of ``followed`` (``_dims_followed``) is vouched for by
    the runs at this call's input dims: each within the sizes the runs had, all lines of a
    dim agreeing (NOTE [dims a loop's rows follow])."""
    checks = []
    for lines in (d for dims in followed if dims for d in dims if not isinstance(d, int)):
        values = []
        for m, axis, p, q, lowest, highest in lines:
            dim = _input_dim(emitter, node, m, axis)
            checks += [emitter.add("Not", [emitter.add("Less", [dim, emitter.const([lowest])])]),
                       emitter.add("Not", [emitter.add("Greater",
                                                       [dim, emitter.const([highest])])])]
            values.append(_affine(emitter, dim, p, q))
        checks += [emitter.add("Equal", [values[0], other]) for other in values[1:]]
    held = checks[0] if checks else emitter.const([True], bool)   # (no line: constant dims)
    for check in checks[1:]:
        held = emitter.add("And", [held, check])
    return emitter.truth(held)


def gluon_infers(node, emitter, key="func", slot_shapes=None, or_runs=False):
    """Whether Gluon infers the step shapes of this loop of no step (True), or runs func's
    graph for them (False; a converted ``for``: refuses), as ``inferred_step_rows`` answers
    on the call's input shapes (of graph ``key``'s slots: ``slot_shapes`` of the inputs'
    shapes, the rule's by default): a
    Python bool where every call answers alike, else an ONNX bool scalar computed in
    ``emitter`` from which of the inputs' varying dims are 0 (MXNet's legacy unknown dim,
    the only way an input's sizes change that answer: NOTE [dims a loop's rows follow]).
    ``or_runs``: True where Gluon runs func's graph instead (no input dim is 0, no recursive
    call: ``_rows_of_a_run`` in ops/while_loop.py)."""
    found = _infers_table(node, key, slot_shapes)
    if found is None:
        return True   # (no rank known: the padded probe)
    varying, table = found
    from .while_loop_arguments import calls_recursively
    if or_runs and not calls_recursively(node.spec) and not any(
            d == 0 for shape in node.in_shapes if shape is not None for d in shape):
        table = [ok or not bits for bits, ok in enumerate(table)]   # (no varying dim 0)
    if all(table) or not any(table):
        return table[0]
    from onnx import TensorProto
    index = emitter.const([0])
    for j, (m, axis) in enumerate(varying):
        zero = emitter.add("Cast", [emitter.add("Equal", [_input_dim(emitter, node, m, axis),
                                                          emitter.const([0])])],
                           to=TensorProto.INT64)
        index = emitter.add("Add", [index, emitter.add("Mul", [zero, emitter.const([1 << j])])])
    return emitter.truth(emitter.add("Gather", [emitter.const(table), index]))


# (2 ** this many MXNet shape inferences at most; further varying dims are taken nonzero)
_MOST_VARYING = 8


def _infers_table(node, key, slot_shapes):
    """``(varying dims, answers)`` of ``gluon_infers``, one answer per set of the varying
    dims that are 0, or None where an input's rank is unknown; computed once per node (the
    If choosing the lines and the probe asks it twice; each answer is an inference)."""
    cache = node.__dict__.setdefault("_gluon_infers_tables", {})
    if key in cache:
        return cache[key]
    from gluon_cf import registry
    from gluon_cf.graph import Graph

    from .loops import inferred_step_rows
    example = node.runs[0][0] if node.runs else node.in_shapes
    if any(shape is None for shape in example):
        found = None
    else:
        varying = [(m, axis) for m, shape in enumerate(example) for axis in range(len(shape))
                   if shape[axis] is None or node.in_shapes[m] is None or
                   node.in_shapes[m][axis] is None][:_MOST_VARYING]
        example = [tuple(1 if d is None else d for d in shape) for shape in example]
        func, rule = Graph.from_spec(node.spec["graphs"][key]), registry.rule_of(node.kind)
        slot_shapes = slot_shapes or (lambda shapes: rule.slot_shapes(node.spec, shapes))
        table = []
        for bits in range(2 ** len(varying)):
            shapes = [list(shape) for shape in example]
            for j, (m, axis) in enumerate(varying):
                if bits >> j & 1:
                    shapes[m][axis] = 0
            table.append(inferred_step_rows(func, slot_shapes([
                tuple(shape) for shape in shapes]), node.spec["num_out_data"]) is not None)
        found = (varying, table)
    cache[key] = found
    return found


def lines_of(node, key="func"):
    """``{MXNet node name: the user's "file:line"}`` of graph ``key`` (func's), and ``""``:
    the line of the loop (a nested node's operators have their own graphs)."""
    import json

    from gluon_cf.operators import SOURCE_ATTR
    nodes = json.loads(node.spec["graphs"][key]["json"])["nodes"]
    lines = {n["name"]: n["attrs"][SOURCE_ATTR] for n in nodes
             if SOURCE_ATTR in n.get("attrs", {})}
    lines[""] = node.where().rstrip(": ")
    return lines


def probe_gathers(graph, infers, lines):
    """Make every ``Gather`` and ``GatherElements`` of ``graph`` (and of its subgraphs)
    index a copy of its data with one zero row appended on its axis, where Gluon ``infers``
    the step shapes (``gluon_infers``: True, False or an ONNX bool): each index wrapped
    (negative from the end) and clipped into that copy, and every index modulo a dim (mode
    'wrap') modulo 1 where that dim is 0; where no index was out of range the values are the
    same, elsewhere the shapes are. Where Gluon runs func's graph instead (which fails where
    they fail), an index out of its data's range stays out of the copy's, and the gathers
    are named after the user's line in ``lines`` (``lines_of``; NOTE [dims a loop's
    rows follow])."""
    from onnx import AttributeProto, TensorProto, helper

    from gluon_cf.export.onnx_kit import Emitter

    if infers is not True:
        for node in (n for n in graph.node
                     if n.op_type in ("Gather", "GatherElements", "GatherND")):
            made = node.name.rsplit("/", 1)[-1]
            where = lines.get(made) or lines[""]
            node.name += f" (the body of a loop of no step at {where})" if where else ""

    nodes, shapes = [], {n.output[0] for n in graph.node if n.op_type == "Shape"}
    dims = {n.output[0] for n in graph.node   # (dims of shapes: int64, 0 for a row of none)
            if n.op_type in ("Slice", "Gather") and n.input[0] in shapes}
    for node in graph.node:
        for attr in node.attribute:
            for sub in ([attr.g] if attr.type == AttributeProto.GRAPH else
                        attr.graphs if attr.type == AttributeProto.GRAPHS else []):
                probe_gathers(sub, infers, lines)
        if infers is False:   # (its subgraphs' gathers named)
            nodes.append(node)
            continue
        if node.op_type == "Mod" and node.input[1] in dims:
            # take's and pick's mode 'wrap': an index modulo a dim of none
            e = Emitter(f"{node.output[0]}/in_range")
            node.input[1] = e.add("Max", [node.input[1], e.const([1]) if infers is True else
                                          e.add("Cast", [infers], to=TensorProto.INT64)])
            nodes += e.nodes
        if node.op_type not in ("Gather", "GatherElements") or node.input[0] in shapes:
            # (a dim of a shape: its rank is fixed, its indices the converters' own)
            nodes.append(node)
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        e = Emitter(f"{node.output[0]}/in_range")   # (outputs are prefixed by graph)
        data, indices = node.input[0], node.input[1]
        shape = e.add("Shape", [data])
        at = e.const(axis)
        if axis < 0:
            at = e.add("Add", [e.add("Size", [shape]), at])
        one_hot = e.add("Cast", [e.add("Equal", [
            e.add("Range", [e.const(0), e.add("Size", [shape]), e.const(1)]), at])],
            to=TensorProto.INT64)
        padded = e.add("Pad", [data, e.add("Concat", [e.add("Sub", [one_hot, one_hot]),
                                                      one_hot], axis=0)])
        size, zero = e.add("Gather", [shape, at]), e.const(0)
        index = e.add("Cast", [indices], to=TensorProto.INT64)
        index = e.add("Where", [e.add("Less", [index, zero]), e.add("Add", [index, size]),
                                index])
        clipped = e.add("Max", [e.add("Min", [index, size]), zero])
        if infers is not True:   # (out of data's range: out of the copy's, size + 1 rows)
            outside = e.add("Or", [e.add("Less", [index, zero]),
                                   e.add("Not", [e.add("Less", [index, size])])])
            index = e.add("Where", [infers, clipped, e.add("Where", [
                outside, e.add("Add", [size, e.const(1)]), index])])
        else:
            index = clipped
        nodes += e.nodes + [helper.make_node(node.op_type, [padded, index], list(node.output),
                                             name=node.name, domain=node.domain)]
        nodes[-1].attribute.extend(node.attribute)
    del graph.node[:]
    graph.node.extend(nodes)


# NOTE [a probe read for its values]
#     The zero rows of a probed step output take only its Shape, and onnxruntime's default
#     optimizations fold a Shape it can infer statically (the sum of a gather_nd's row of
#     (1, 4)) and drop the probe's operators that only fed it: the probe's gather_nd of no
#     row, which must fail at the user's line where Gluon's run of func's graph fails, never
#     ran, and onnxruntime gave (2, 1, 4) zeros where Gluon, and the artifact (which runs
#     unoptimized), fail. So the zero rows' shape also reads the probe's values: plus 0 times
#     the count of its NaNs (an int64, whatever the output's dtype: never NaN itself), which
#     no optimizer folds.
def zero_of_values(emitter, probed):
    """An int64 scalar 0 computed from ``probed``'s values (NOTE [a probe read for its
    values]): 0 times the count of its NaNs."""
    from onnx import TensorProto

    nans = emitter.add("ReduceSum", [emitter.add("Cast", [emitter.add("IsNaN", [
        emitter.add("Cast", [probed], to=TensorProto.DOUBLE)])], to=TensorProto.INT64)],
        keepdims=0)
    return emitter.add("Mul", [nans, emitter.const(np.array(0, np.int64))])


def _zero_rows_graph(node, name, dtypes, planned, followed, probed, count):
    """A graph of no inputs giving the zero rows of a loop that ran no step, one output per
    step output: of its planned shape, of ``followed``'s lines (``_dims_followed``) or, for
    ``probed`` outputs, of one probe call of func on the initial loop vars."""
    from onnx import helper, numpy_helper

    from gluon_cf.export.onnx_graph import value_info
    from gluon_cf.export.onnx_kit import Emitter, set_outputs

    out_ranks = [None if s is None else len(s) for s in node.out_shapes[:len(dtypes)]]
    probe = node.convert("func", name, outer_slots=range(len(node.node.inputs)),
                         output_order=probed) if probed else None
    zeros = Emitter(f"{name}/zeros")
    probed_names = dict(zip(probed, probe.output_names if probe else ()))

    def shape_of(k):
        if planned[k] is not None:
            return zeros.const(planned[k])
        if k in probed_names:   # (NOTE [a probe read for its values])
            return zeros.add("Add", [zeros.add("Concat", [zeros.const([count]), zeros.add(
                "Shape", [probed_names[k]])], axis=0), zero_of_values(zeros, probed_names[k])])
        return zeros.add("Concat", [zeros.const([count])] + [
            zeros.const([d]) if isinstance(d, int) else
            _affine(zeros, _input_dim(zeros, node, *d[0][:2]), *d[0][2:4])
            for d in followed[k]], axis=0)
    zero_outputs = [zeros.add("ConstantOfShape", [shape_of(k)],
                              value=numpy_helper.from_array(np.zeros((1,), dtype)))
                    for k, dtype in enumerate(dtypes)]
    outputs = [value_info(name_, dtype, rank)
               for name_, dtype, rank in zip(zero_outputs, dtypes, out_ranks)]
    if probe is None:
        return helper.make_graph(zeros.nodes, name, [], outputs)
    choice = Emitter(f"{name}/gluon_infers")
    probe_gathers(probe.graph, gluon_infers(node, choice), lines_of(node))
    nodes = choice.nodes + list(probe.graph.node) + zeros.nodes
    del probe.graph.node[:]
    probe.graph.node.extend(nodes)
    set_outputs(probe.graph, outputs)
    return probe.graph


def onnx_pad_rows(node, stacked, dtypes, exact=False):
    """Define the while_loop node's step outputs: ``stacked`` (one row per step taken) padded
    with zero rows to max_iterations rows.

    After zero steps the rows of none are zeros of the step outputs' planned shapes; an output
    whose shape the plan leaves open takes it from one probe call of func on the initial loop
    vars, in an If (NOTE [gluon_cf ops as ONNX control flow]). A planned shape is never probed:
    the loop that ran no step must not run func (NOTE [loops of no step]), whose operators may
    fail on the initial vars (a take of a row of none) where Gluon runs none of them; nor is
    a shape of dims following the node's inputs where the runs vouch for them (NOTE [dims a
    loop's rows follow]).
    """
    from onnx import helper, numpy_helper

    from gluon_cf.export.onnx_graph import value_info
    from gluon_cf.export.onnx_kit import Emitter

    # (a loop of exact length that ran no step has rows of none: the Loop's own empty scan
    # outputs take the dims its body declares, 0 where unknown: (0, 1, 0) for (0, 1, d))
    count = 0 if exact else node.spec["max_iterations"]
    outputs = node.node.outputs[:len(stacked)]
    out_ranks = [None if s is None else len(s) for s in node.out_shapes[:len(stacked)]]
    rows = node.add("Slice", [node.add("Shape", [stacked[0]]), node.const([0]), node.const([1])])
    no_step = node.truth(node.add("Equal", [rows, node.const([0])]))

    # then: zeros shaped (max_iterations, *shape of func's step outputs on the initial vars)
    probe_name = f"{node.name}_no_step"
    planned = [(count,) + tuple(s[1:]) if s is not None and None not in s[1:] else None
               for s in node.out_shapes[:len(stacked)]]
    followed = [None if s is not None else _dims_followed(node, k)
                for k, s in enumerate(planned)]
    unplanned = [k for k, s in enumerate(planned) if s is None]
    if any(followed[k] is None for k in unplanned):    # func is probed anyway: for them all
        then_graph = _zero_rows_graph(node, probe_name, dtypes, planned, followed, unplanned,
                                      count)
    elif unplanned:    # the lines where the runs vouch for them, else a probe
        check = Emitter(f"{probe_name}/lines")
        held = _lines_hold(check, node, followed)
        infers = gluon_infers(node, check)
        if infers is False:   # (Gluon runs func: the probe fails where func fails)
            held = check.const(False, bool)
        elif infers is not True:
            held = check.add("And", [held, infers])
        chosen = [check.fresh("zeros") for _ in dtypes]
        check.add("If", [held], chosen, then_branch=_zero_rows_graph(
            node, f"{probe_name}_lines", dtypes, planned, followed, [], count),
            else_branch=_zero_rows_graph(node, probe_name, dtypes, planned, followed,
                                         unplanned, count))
        then_graph = helper.make_graph(check.nodes, check.prefix, [], [
            value_info(name, dtype, rank) for name, dtype, rank in zip(chosen, dtypes,
                                                                         out_ranks)])
    else:
        then_graph = _zero_rows_graph(node, probe_name, dtypes, planned, followed, [], count)

    then_graph = _refused_where_gluon_refuses(node, then_graph, rows, dtypes)

    # else: Pad(stacked, begin (0, ..., 0), end (max_iterations - rows, 0, ..., 0))
    pad = Emitter(f"{node.name}_padded")
    missing = pad.add("Sub", [pad.const([count]), rows])
    padded = []
    int_zero = numpy_helper.from_array(np.zeros((1,), np.int64))
    for value in ([] if exact else stacked):
        rank = pad.add("Shape", [pad.add("Shape", [value])])
        before = pad.add("ConstantOfShape", [rank], value=int_zero)
        after = pad.add("ConstantOfShape", [pad.add("Sub", [rank, pad.const([1])])],
                        value=int_zero)
        pads = pad.add("Concat", [before, missing, after], axis=0)
        padded.append(pad.add("Pad", [value, pads]))
    padded += [pad.add("Identity", [value]) for value in (stacked if exact else [])]
    pad_graph = helper.make_graph(pad.nodes, pad.prefix, [], [
        value_info(name, dtype, rank) for name, dtype, rank in zip(padded, dtypes, out_ranks)])

    node.add("If", [no_step], outputs, then_branch=then_graph, else_branch=pad_graph)


def _refused_where_gluon_refuses(node, then_graph, rows, dtypes):
    """``then_graph`` (the zero rows of a loop of no step) failing in a Gather named after the
    loop's line where Gluon refuses the call, as ``inferred_step_rows`` answers on the call's
    input shapes (``gluon_infers``, or running func's graph where no input dim is 0):
    hybridized, such a loop raises at its line (NOTE [loops of no step]); its zero rows of
    planned shapes were given here (a ``kept + t`` of kept rows (0, 4) and t (2, 4): (3, 2,
    4) zeros, round 31x)."""
    from onnx import TensorProto, helper

    from gluon_cf.errors import where_created
    from gluon_cf.graph import decode
    from gluon_cf.export.onnx_kit import Emitter

    infers = gluon_infers(node, node, or_runs=True)
    if infers is True:
        return then_graph
    where = where_created(decode(node.kind, node.node.attrs["spec"])) or \
        node.where().rstrip(": ")
    guard = f"{node.name}/no_step_gives_no_output_shape" + (
        f" (the body of a loop of no step at {where})" if where else "")
    check = Emitter(f"{node.name}_no_step_check")
    past = check.add("Sub", [check.add("Add", [rows, check.const([1])]), rows])   # (1, unfolded)
    if infers is not False:   # (0 where Gluon infers)
        past = check.add("Mul", [past, check.add("Reshape", [check.add(
            "Cast", [check.add("Not", [infers])], to=TensorProto.INT64), check.const([1])])])
    check.nodes.append(helper.make_node(
        "Gather", [check.const(np.zeros(1, np.int64)), past], [guard], name=guard))
    outputs = []
    for info, dtype in zip(list(then_graph.output), dtypes):
        zero = check.add("Cast", [guard], to=helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
        outputs.append(check.add("Add", [info.name, zero]))
    nodes = check.nodes[:-2 * len(outputs)] + list(then_graph.node) + \
        check.nodes[-2 * len(outputs):]
    del then_graph.node[:]
    then_graph.node.extend(nodes)
    for info, name in zip(then_graph.output, outputs):
        info.name = name
    return then_graph
