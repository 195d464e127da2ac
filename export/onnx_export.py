"""Standard ONNX for gluon_cf models: cond -> If, foreach -> Scan, while_loop -> Loop.

    model = export_onnx(net, [x, h0], "model.onnx", dynamic_axes={"data0": [0]})

``net`` is a hybridized HybridBlock; ``example_inputs`` fix the dtypes and the shapes of the
non-dynamic axes.  Ordinary MXNet ops go through mx2onnx (``onnx_graph.symbol_to_onnx_graph``);
each gluon_cf node becomes a standard ONNX control-flow node whose subgraphs are converted the
same way, recursively, so nesting needs nothing special.  Parameters are initializers of the
main graph; subgraphs read them, and every other captured value, from the enclosing scope.
No custom ONNX domain is involved: any ONNX runtime can run the result.

See NOTE [gluon_cf ops as ONNX control flow] for the mapping and NOTE [shape plan] for shapes.
"""
# NOTE [gluon_cf ops as ONNX control flow]
# Node inputs are *slots* (NOTE [slots] in gluon_cf/tracing.py).  In ONNX, a slot that changes
# from step to step (a loop variable, a state, a data slice) is a formal input of the body;
# every other slot (captured values: parameters, outer symbols) is read from the enclosing
# scope under the node input's ONNX name -- ONNX subgraphs may refer to any outer value.
# * cond -> If.  pred is Cast to bool (true iff nonzero) and reshaped to a scalar; both
#   branches have no formal inputs.
# * foreach -> Scan (not Loop): Scan *is* foreach -- states in, data sliced along axis 0,
#   step outputs stacked -- and captured values are outer-scope reads in both.  Only the
#   orders differ (Scan: states before data, new states before step outputs), which we fix
#   by ordering the body's inputs and outputs.  1-D data is reshaped to (T, 1) first, since
#   gluon_cf's steps see shape (1,) slices where Scan would give scalars.
# * while_loop -> Loop with trip count max_iterations.  gluon_cf checks cond *before* each
#   step, ONNX Loop reads its condition input before the first iteration and the body's cond
#   output after each: so cond(loop_vars) is computed once outside (inlined into the
#   enclosing graph) and once at the end of the body on the new loop vars.  Loop stacks one
#   row per step taken; gluon_cf pads to max_iterations rows with zeros: we Pad after the
#   Loop.  When no step ran, the stacked outputs' row shape is unknown to the runtime
#   (onnxruntime makes unknown dims 0), so an If then builds the zeros from the shapes of one
#   probe call of func on the initial loop vars -- what gluon_cf's eager mode does too.
# * Other gluon_cf nodes (recursion, invoke) have no ONNX counterpart: NotImplementedError.
# Limits: opsets 12 and 13 only, and mx2onnx's op coverage (e.g. no `sign`, `_mod_scalar`,
# BatchNorm on axis != 1); what it cannot convert fails with NotImplementedError naming the
# MXNet node and op, before conversion where we can tell.  Inference only: no gradients.
#
# NOTE [shape plan]
# ONNX graphs want ranks (a top-level output must declare one, a body input of unknown rank
# defeats shape inference), but with dynamic axes MXNet's inference loses most shapes: its
# legacy semantics treat an unknown dim as an unknown shape.  So before converting we infer
# every shape twice with concrete sizes -- the example's, and the example's with each dynamic
# axis grown -- through every nesting level, and keep per dim what agrees (a dim that
# changed is dynamic: None; a model output's dim that changed exactly like a named input dim
# gets its name).  A run that fails means an axis declared dynamic is not.  gluon_cf nodes
# are looked up in the plan by their `spec` text (unique per traced call).  Converters called
# outside export_onnx (no plan) fall back to MXNet's partial shapes.

import contextlib
import contextvars
import io
import json
import os
import tempfile

import mxnet as mx
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from mxnet.onnx.mx2onnx._export_onnx import MXNetGraph

import gluon_cf  # noqa: F401  (registers the gluon_cf operators needed by load and inference)
from . import index_bounds
from .artifact_format import first_line
from .onnx_graph import (DEFAULT_OPSET, ValueSpec, make_onnx_model, register_custom_converter,
                         symbol_to_onnx_graph, value_info)

__all__ = ["export_onnx", "export_onnx_symbol"]

_OP_PREFIX = "_gluon_cf_"
_CONVERTIBLE_KINDS = ("cond", "foreach", "while_loop")
_PLAN = contextvars.ContextVar("gluon_cf_onnx_shape_plan", default=None)


# ----------------------------------------------------------------------------- public API

def export_onnx(net, example_inputs, path=None, opset=DEFAULT_OPSET, *, dynamic_axes=None,
                input_names=None, output_names=None):
    """Export the hybridized ``net`` as a standard ONNX model; save it to ``path`` if given.

    ``example_inputs``: the arrays (NDArray or numpy) ``net`` is called with, a single one or a
    (nested) list; ``net`` is run on them once.  ``dynamic_axes`` marks axes whose size may
    differ from the example's, torch-style: ``{input: [axis, ...]}`` or ``{input: {axis:
    "dim_name"}}``, ``input`` being a name or a position (e.g. ``{0: [0]}`` for the time axis
    of a foreach over the first input).  ONNX inputs are named ``input_names`` (default
    MXNet's ``data`` / ``data0``, ``data1``, ...), outputs ``output_names`` (default MXNet's
    output names).  Returns the ``onnx.ModelProto``, checked with ``full_check=True``.
    """
    sym, params, inputs = _net_symbol(net, example_inputs, "export_onnx")
    return export_onnx_symbol(sym, params, inputs, path, opset, dynamic_axes=dynamic_axes,
                              input_names=input_names, output_names=output_names)


def _net_symbol(net, example_inputs, api):
    """Run the hybridized ``net`` once on ``example_inputs`` and return its exported graph:
    ``(symbol, params, [(mxnet_name, shape, dtype) per data input])``."""
    if not isinstance(net, mx.gluon.HybridBlock):
        raise TypeError(f"{api}: net must be a gluon HybridBlock, got {type(net).__name__}")
    if not net._active:
        raise ValueError(f"{api}: net is not hybridized; call net.hybridize() first (the "
                         f"exported model is made from the hybridized graph)")
    flat_inputs = [_as_numpy(x) for x in _flatten_inputs(example_inputs)]
    with mx.autograd.predict_mode():
        call_args = example_inputs if isinstance(example_inputs, (list, tuple)) \
            else [example_inputs]
        net(*[_to_nd(x) for x in call_args])
    mx.nd.waitall()
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "net")
        net.export(prefix)
        sym = mx.sym.load(prefix + "-symbol.json")
        params = mx.nd.load(prefix + "-0000.params")
    mx_names = ["data"] if len(flat_inputs) == 1 else \
        [f"data{k}" for k in range(len(flat_inputs))]
    return sym, params, [(name, x.shape, x.dtype) for name, x in zip(mx_names, flat_inputs)]


def export_onnx_symbol(sym, params, inputs, path=None, opset=DEFAULT_OPSET, *,
                       dynamic_axes=None, input_names=None, output_names=None):
    """Export an MXNet symbol that may contain gluon_cf nodes (e.g. loaded from
    ``net.export`` files) with ``params`` (name -> array; ``arg:``/``aux:`` prefixes allowed).

    ``inputs``: ``(mxnet_name, example_shape, dtype)`` per data input, in ONNX input order.
    The other arguments are those of :func:`export_onnx`.
    """
    graph = _convert_symbol(sym, params, inputs, opset, dynamic_axes, input_names,
                            output_names, _CONVERTIBLE_KINDS)
    model = make_onnx_model(graph, opset)
    record_index_bounds(model, sym, inputs, input_names)
    if path is not None:
        onnx.save(model, str(path))
    return model


def _convert_symbol(sym, params, inputs, opset, dynamic_axes, input_names, output_names,
                    kinds):
    """The main ONNX graph of :func:`export_onnx_symbol` (gluon_cf nodes of ``kinds`` allowed;
    their converters must be registered)."""
    mx_names = [name for name, _, _ in inputs]
    onnx_names = list(input_names) if input_names is not None else list(mx_names)
    if len(onnx_names) != len(mx_names):
        raise ValueError(f"export_onnx: got {len(onnx_names)} input_names for "
                         f"{len(mx_names)} inputs {mx_names}")
    examples = {name: (tuple(int(d) for d in shape), np.dtype(dtype))
                for name, shape, dtype in inputs}
    dims = _dynamic_dims(dynamic_axes, mx_names, onnx_names, examples)
    outputs = sym.list_outputs()
    output_names = _unique(outputs) if output_names is None else list(output_names)
    if len(output_names) != len(outputs):
        raise ValueError(f"export_onnx: got {len(output_names)} output_names for the "
                         f"{len(outputs)} outputs of the model {outputs}")
    params = {name.split(":", 1)[-1]: value for name, value in (params or {}).items()}
    _check_convertible(json.loads(sym.tojson()), "the model", opset, kinds)

    plan, out_shapes = _shape_plan(sym, params, examples, dims)
    specs = [(name, tuple(dims[name].get(axis, d) for axis, d in enumerate(shape)), dtype)
             for name, (shape, dtype) in examples.items()]
    token = _PLAN.set(plan)
    try:
        # Silence what MXNet prints: a traceback for every failed shape inference of a Custom
        # node (expected with dynamic dims, e.g. in recursive function bodies) and mx2onnx's
        # debugging prints (NOTE [mx2onnx pitfalls]).
        with contextlib.redirect_stdout(io.StringIO()):
            converted = symbol_to_onnx_graph(sym, params, specs, output_names, "main", opset,
                                             input_names=onnx_names)
    finally:
        _PLAN.reset(token)
    for output_info, spec, planned in zip(converted.graph.output, converted.outputs, out_shapes):
        shape = _merge_dims(spec.shape, planned)
        output_info.CopyFrom(helper.make_tensor_value_info(
            spec.name, helper.np_dtype_to_tensor_dtype(spec.dtype), shape))
    return converted.graph


def record_index_bounds(model, sym, inputs, input_names):
    """Store in ``model``'s metadata the inputs that must be valid indices (NOTE [index
    bounds] in ``index_bounds.py``), named as the model names them."""
    mx_names = [name for name, _, _ in inputs]
    names = dict(zip(mx_names, input_names if input_names is not None else mx_names))
    bounds = index_bounds.find(sym.tojson(), names)
    if bounds:
        props = {p.key: p.value for p in model.metadata_props}
        props[index_bounds.METADATA_KEY] = json.dumps(bounds)
        helper.set_model_props(model, props)


# ----------------------------------------------------------------------------- inputs

def _flatten_inputs(value):
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in _flatten_inputs(item)]
    if isinstance(value, (mx.nd.NDArray, np.ndarray)):
        return [value]
    raise TypeError(f"export_onnx: example_inputs must be NDArrays or numpy arrays (or lists "
                    f"of them), got {type(value).__name__}")


def _as_numpy(x):
    return x.asnumpy() if isinstance(x, mx.nd.NDArray) else np.asarray(x)


def _to_nd(x):
    if isinstance(x, (list, tuple)):
        return [_to_nd(item) for item in x]
    return x if isinstance(x, mx.nd.NDArray) else mx.nd.array(x, dtype=np.asarray(x).dtype)


def _unique(names):
    seen, result = {}, []
    for name in names:
        seen[name] = seen.get(name, -1) + 1
        result.append(name if seen[name] == 0 else f"{name}_{seen[name]}")
    return result


def _dynamic_dims(dynamic_axes, mx_names, onnx_names, examples):
    """mxnet input name -> {axis: None or dim name} from the torch-style ``dynamic_axes``."""
    dims = {name: {} for name in mx_names}
    for key, axes in (dynamic_axes or {}).items():
        if isinstance(key, int) and 0 <= key < len(mx_names):
            name = mx_names[key]
        elif key in onnx_names:
            name = mx_names[onnx_names.index(key)]
        else:
            raise ValueError(f"export_onnx: dynamic_axes names input {key!r}, but the inputs "
                             f"are {onnx_names} (positions 0..{len(onnx_names) - 1})")
        rank = len(examples[name][0])
        named = axes if isinstance(axes, dict) else {axis: None for axis in axes}
        for axis, dim_name in named.items():
            if not isinstance(axis, int) or not -rank <= axis < rank:
                raise ValueError(f"export_onnx: dynamic_axes gives axis {axis!r} for input "
                                 f"{key!r}, which has rank {rank}")
            dims[name][axis % rank] = dim_name
    return dims


# ----------------------------------------------------------------------------- checks

def _check_convertible(graph_json, where, opset, kinds=_CONVERTIBLE_KINDS):
    """Fail before converting anything if some node, at any nesting level, has no ONNX form
    (gluon_cf nodes: only those of ``kinds``)."""
    for node in graph_json["nodes"]:
        op = node["op"]
        if op == "null":
            continue
        kind = _gluon_cf_kind(node)
        if kind is None and op != "Custom" and not _has_mx2onnx_converter(op, opset):
            raise NotImplementedError(
                f"export_onnx: node {node['name']!r} (MXNet op {op!r}) in {where} cannot be "
                f"converted: mx2onnx has no converter for {op!r} at opset {opset}")
        if kind is not None and kind not in kinds:
            hint = ("; export recursive models with gluon_cf.export.save_artifact"
                    if kind in ("recursion", "invoke") else "")
            raise NotImplementedError(
                f"export_onnx: node {node['name']!r} (gluon_cf op {kind!r}) in {where} cannot "
                f"be converted: ONNX has no counterpart for gluon_cf.{kind}; only "
                f"{', '.join(kinds)} are exported{hint}")
        if kind is not None:
            spec = json.loads(node["attrs"]["spec"])
            for graph_name, graph in spec["graphs"].items():
                _check_convertible(json.loads(graph["json"]),
                                   f"the {graph_name!r} graph of {kind} node {node['name']!r}",
                                   opset, kinds)


def _has_mx2onnx_converter(op, opset):
    return any(op in MXNetGraph.registry_.get(version, {}) for version in range(12, opset + 1))


def _gluon_cf_kind(node):
    op_type = node.get("attrs", {}).get("op_type", "")
    if node["op"] != "Custom" or not op_type.startswith(_OP_PREFIX):
        return None
    return op_type[len(_OP_PREFIX):]


# ----------------------------------------------------------------------------- shape plan

def _shape_plan(sym, params, examples, dims):
    """NOTE [shape plan]: ``({spec text: (input shapes, output shapes)}, model output shapes)``
    with ``None`` for dims that depend on the dynamic axes.

    Unnamed dynamic axes all grow by the same amount (they may have to stay equal); each dim
    name grows by its own, so that model outputs can be given the names of the input dims
    they follow.
    """
    names = sorted({d for axes in dims.values() for d in axes.values() if d is not None})
    growth = {None: 3, **{name: 4 + k for k, name in enumerate(names)}}
    base = {name: shape for name, (shape, _) in examples.items()}
    grown = {name: tuple(d + growth[dims[name][axis]] if axis in dims[name] else d
                         for axis, d in enumerate(shape))
             for name, shape in base.items()}
    named = {(d, d + growth[dims[name][axis]]): dims[name][axis]
             for name, shape in base.items() for axis, d in enumerate(shape)
             if dims[name].get(axis) is not None}
    param_shapes = {name: tuple(value.shape) for name, value in params.items()}
    plan, runs = {}, []
    for run, shapes in (("example", base), ("grown", grown)):
        try:
            arg_shapes = {**param_shapes, **shapes}
            _collect_shapes(sym, arg_shapes, plan, "the model")
            runs.append([tuple(s) for s in _infer_shapes(sym, arg_shapes, "the model")])
        except (mx.MXNetError, ValueError) as err:
            if run == "example":
                raise ValueError(f"export_onnx: MXNet cannot infer the model's shapes for the "
                                 f"example inputs {base}: {first_line(err)}") from None
            raise ValueError(
                f"export_onnx: the model's shapes do not allow the dynamic axes "
                f"{ {n: sorted(a) for n, a in dims.items() if a} } to change (inputs {grown} "
                f"fail: {first_line(err)}); remove those axes from dynamic_axes, or give "
                f"axes that must stay equal the same dim name") from None
    outputs = [tuple(a if a == b else named.get((a, b)) for a, b in zip(*pair))
               for pair in zip(*runs)]
    return plan, outputs


def _collect_shapes(sym, arg_shapes, plan, where):
    """Concrete shapes of every gluon_cf node in ``sym`` and, recursively, in its subgraphs,
    merged into ``plan``."""
    internals = sym.get_internals()
    graph = json.loads(internals.tojson())  # its heads are every entry, in order
    entry_shapes = _infer_shapes(internals, arg_shapes, where)
    shape_of = {(head[0], head[1]): tuple(entry_shapes[k])
                for k, head in enumerate(graph["heads"])}
    for idx, node in enumerate(graph["nodes"]):
        kind = _gluon_cf_kind(node)
        if kind is None:
            continue
        spec_text = node["attrs"]["spec"]
        spec = json.loads(spec_text)
        ins = [shape_of[(src, out)] for src, out, *_ in node["inputs"]]
        outs = [shape_of[(idx, k)] for k in range(spec["num_outputs"])]
        if spec_text in plan:  # seen in the other run (or elsewhere): keep what agrees
            old_ins, old_outs = plan[spec_text]
            plan[spec_text] = ([_merge_concrete(a, b) for a, b in zip(old_ins, ins)],
                               [_merge_concrete(a, b) for a, b in zip(old_outs, outs)])
        else:
            plan[spec_text] = (ins, outs)
        if kind == "invoke":  # the call's argument shapes, for _collect_function_shapes
            plan.setdefault(("calls", spec["function"]), set()).add(tuple(ins))
        if kind == "recursion":
            _collect_function_shapes(spec, ins, plan, node["name"])
            continue
        slots = _slot_shapes(kind, spec, ins)
        for graph_name, sub in spec["graphs"].items():
            sub_sym = mx.sym.load_json(sub["json"])
            _collect_shapes(sub_sym, {name: slots[slot] for name, slot
                                      in zip(sub_sym.list_inputs(), sub["inputs"])},
                            plan, f"the {graph_name!r} graph of node {node['name']!r}")


# A recursive function whose argument shapes change from call to call gets this many
# signatures inferred; its other calls keep the shapes that agree (None elsewhere).
_MAX_SIGNATURES = 32


def _collect_function_shapes(spec, in_shapes, plan, node_name):
    """The functions of a ``recursion`` node (NOTE [recursion design]): the entry function on
    the node's arguments, every other function on the argument shapes its call sites pass,
    until no new signature appears.  ``plan[("function", qname)]`` gets ``(argument shapes,
    output shapes)`` merged over all signatures, like the entries of the nodes."""
    num_args = spec["num_args"]
    env = list(in_shapes[num_args:])
    todo, done = [(spec["entry"], tuple(in_shapes[:num_args]))], set()
    while todo:
        qname, args = todo.pop()
        function = spec["graphs"].get(qname)
        if function is None or (qname, args) in done or any(a is None for a in args) \
                or sum(q == qname for q, _ in done) >= _MAX_SIGNATURES:
            continue
        done.add((qname, args))
        slots = list(args) + env
        sym = mx.sym.load_json(function["json"])
        arg_shapes = {name: slots[slot] for name, slot in zip(sym.list_inputs(),
                                                               function["inputs"])}
        where = f"function {function['name']!r} of recursion node {node_name!r}"
        _collect_shapes(sym, arg_shapes, plan, where)
        outs = [tuple(s) for s in _infer_shapes(sym, arg_shapes, where)]
        key = ("function", qname)
        if key in plan:
            old_args, old_outs = plan[key]
            plan[key] = ([_merge_concrete(a, b) for a, b in zip(old_args, args)],
                         [_merge_concrete(a, b) for a, b in zip(old_outs, outs)])
        else:
            plan[key] = (list(args), outs)
        for callee in spec["graphs"]:
            todo.extend((callee, call) for call in plan.get(("calls", callee), ()))


def _infer_shapes(sym, arg_shapes, where):
    known = set(sym.list_inputs())
    _, out_shapes, _ = sym.infer_shape(
        **{name: shape for name, shape in arg_shapes.items() if name in known})
    if out_shapes is None:
        raise ValueError(f"shapes in {where} are not fully determined by the inputs")
    return out_shapes


def _slot_shapes(kind, spec, in_shapes):
    """Shapes the subgraphs see: the node inputs', except foreach's data slots (one step)."""
    if kind != "foreach":
        return list(in_shapes)
    num_data = spec["num_data"]
    return [(s[1:] or (1,)) if k < num_data and s is not None else s
            for k, s in enumerate(in_shapes)]


def _merge_concrete(a, b):
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


def _merge_dims(onnx_shape, planned):
    """Per dim: ONNX's inferred value if known, else the plan's."""
    if planned is None:
        return onnx_shape
    if onnx_shape is None or len(onnx_shape) != len(planned):
        return planned
    return tuple(o if o is not None else p for o, p in zip(onnx_shape, planned))


# ----------------------------------------------------------------------------- converter kit

class _Emitter:
    """ONNX nodes under construction, with fresh names under one prefix."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.nodes = []
        self._count = 0

    def fresh(self, hint):
        self._count += 1
        return f"{self.prefix}/{hint}{self._count}"

    def add(self, op_type, inputs, outputs=None, **attrs):
        """Append an ONNX node; returns its output name (or list of names)."""
        outputs = list(outputs) if outputs is not None else [self.fresh(op_type.lower())]
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs,
                                           name=self.fresh(op_type), **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def const(self, value, dtype=np.int64):
        name = self.fresh("const")
        array = np.asarray(value, dtype=dtype)
        self.add("Constant", [], [name], value=numpy_helper.from_array(array, name))
        return name

    def truth(self, value, into=None):
        """``value`` (one element, any dtype) as an ONNX bool scalar: true iff nonzero."""
        as_bool = self.add("Cast", [value], to=TensorProto.BOOL)
        return self.add("Reshape", [as_bool, self.const(np.zeros((0,), np.int64))],
                        [into] if into else None)

    def inline(self, converted):
        """Emit the nodes of a converted graph that has no formal inputs (its names are
        unique already: prefixed with its graph name); returns its output names."""
        for init in converted.graph.initializer:
            self.add("Constant", [], [init.name], value=init)
        self.nodes.extend(converted.graph.node)
        return converted.output_names


class _Node(_Emitter):
    """One gluon_cf node being converted: its decoded spec, its slots, its subgraphs."""

    def __init__(self, node, kind):
        super().__init__(node.name)
        self.node, self.kind, self.name = node, kind, node.name
        self.spec = json.loads(node.attrs["spec"])
        planned = (_PLAN.get() or {}).get(node.attrs["spec"])
        if planned is not None:
            self.in_shapes, self.out_shapes = planned
        else:  # called outside export_onnx: MXNet's partial shapes
            self.in_shapes = node.input_shapes or [None] * len(node.inputs)
            self.out_shapes = node.output_shapes or [None] * len(node.outputs)
        self.slot_shapes = _slot_shapes(kind, self.spec, self.in_shapes)

    def slot(self, k, onnx_name=None):
        """ValueSpec of slot ``k``, named as the node input or ``onnx_name``."""
        return ValueSpec(onnx_name or self.node.inputs[k], self.slot_shapes[k],
                         self.node.input_dtypes[k])

    def convert(self, key, graph_name, formal=(), outer_slots=(), outer_values=None,
                output_order=None):
        """Convert subgraph ``key`` of the node with ``symbol_to_onnx_graph``.

        ``formal``: the ONNX graph's inputs, in order: a slot index, or a ValueSpec for an
        input that is no slot (Loop's iteration counter and condition).  Slots in
        ``outer_slots`` are read from the enclosing scope under the node input's name,
        ``outer_values[slot]`` (a ValueSpec) overrides that name.  ``output_order`` reorders
        the subgraph's outputs.  Returns the ``OnnxGraph``.
        """
        graph = self.spec["graphs"][key]
        sym = mx.sym.load_json(graph["json"])
        slot_of_var = list(zip(sym.list_inputs(), graph["inputs"]))  # before regrouping
        if output_order is not None:
            sym = mx.sym.Group([sym[k] for k in output_order])
            used = set(sym.list_inputs())
            slot_of_var = [(var, slot) for var, slot in slot_of_var if var in used]
        formal_slots = [item for item in formal if isinstance(item, int)]
        input_of_slot = {slot: f"{graph_name}/slot{slot}" for slot in formal_slots}
        outer_of_slot = {slot: self.slot(slot) for slot in outer_slots}
        outer_of_slot.update(outer_values or {})

        var_of_slot, outer = {}, {}
        for var, slot in slot_of_var:
            if slot in input_of_slot and slot not in var_of_slot:
                var_of_slot[slot] = var
            elif slot in input_of_slot:  # a second variable fed by the same formal input
                outer[var] = self.slot(slot, input_of_slot[slot])
            elif slot in outer_of_slot:
                outer[var] = outer_of_slot[slot]
            else:
                raise AssertionError(f"slot {slot} of {key!r} is neither formal nor outer")
        specs, names = [], []
        for item in formal:
            if isinstance(item, int):
                spec = self.slot(item)
                specs.append(spec._replace(name=var_of_slot.get(item, f"_gluon_cf_slot{item}")))
                names.append(input_of_slot[item])
            else:
                specs.append(item._replace(name=f"_gluon_cf_{item.name}"))
                names.append(f"{graph_name}/{item.name}")
        return symbol_to_onnx_graph(
            sym, None, specs, [f"{graph_name}/out{k}" for k in range(len(sym.list_outputs()))],
            graph_name, self.node.opset, input_names=names, outer=outer)


# ----------------------------------------------------------------------------- converters

def _convert_cond(custom_node):
    """cond -> If; both branches read every captured slot from the enclosing scope."""
    node = _Node(custom_node, "cond")
    pred = node.truth(custom_node.inputs[0])
    captured = range(1, len(custom_node.inputs))
    branches = [node.convert(key, f"{node.name}_{key}", outer_slots=captured)
                for key in ("then", "else")]
    node.add("If", [pred], custom_node.outputs, then_branch=branches[0].graph,
             else_branch=branches[1].graph)
    return node.nodes, [spec.dtype for spec in branches[0].outputs]


def _convert_foreach(custom_node):
    """foreach -> Scan over axis 0 (NOTE [gluon_cf ops as ONNX control flow])."""
    node = _Node(custom_node, "foreach")
    spec = node.spec
    num_data, num_states, num_out = spec["num_data"], spec["num_states"], spec["num_out_data"]
    data_slots = list(range(num_data))
    state_slots = list(range(num_data, num_data + num_states))
    captured = range(num_data + num_states, len(custom_node.inputs))

    data = []
    for k in data_slots:
        rank = _rank(node.in_shapes[k], f"data input {k}", node)
        name = custom_node.inputs[k]
        if rank == 1:  # steps see (1,) slices
            name = node.add("Reshape", [name, node.const([-1, 1])])
        data.append(name)
    num_body_out = num_out + num_states
    body = node.convert("body", f"{node.name}_body", formal=state_slots + data_slots,
                        outer_slots=captured,
                        output_order=list(range(num_out, num_body_out)) + list(range(num_out)))
    outs = custom_node.outputs
    node.add("Scan", [custom_node.inputs[k] for k in state_slots] + data,
             outs[num_out:] + outs[:num_out], body=body.graph, num_scan_inputs=num_data)
    dtypes = [v.dtype for v in body.outputs]
    return node.nodes, dtypes[num_states:] + dtypes[:num_states]


def _convert_while_loop(custom_node):
    """while_loop -> Loop (NOTE [gluon_cf ops as ONNX control flow])."""
    node = _Node(custom_node, "while_loop")
    spec = node.spec
    num_vars, num_out = spec["num_vars"], spec["num_out_data"]
    var_slots = list(range(num_vars))
    captured = range(num_vars, len(custom_node.inputs))

    # The condition before the first step, on the initial loop vars.
    first_cond = node.convert("cond", f"{node.name}_cond_init",
                              outer_slots=range(len(custom_node.inputs)))
    keep_going = node.truth(node.inline(first_cond)[0])

    # Body (i, cond, *vars) -> (cond(new_vars), *new_vars, *step_outputs).
    body_name = f"{node.name}_body"
    body = node.convert(
        "func", body_name, formal=[ValueSpec("iteration", (), np.dtype(np.int64)),
                                   ValueSpec("cond", (), np.dtype(bool))] + var_slots,
        outer_slots=captured,
        output_order=list(range(num_out, num_out + num_vars)) + list(range(num_out)))
    new_vars = {k: node.slot(k, name) for k, name in enumerate(body.output_names[:num_vars])}
    next_cond = node.convert("cond", f"{node.name}_cond_next", outer_slots=captured,
                             outer_values=new_vars)
    tail = _Emitter(f"{body_name}/cond_next")
    cond_out = tail.truth(tail.inline(next_cond)[0], into=f"{body_name}/cond_out")
    body.graph.node.extend(tail.nodes)
    _set_outputs(body.graph, [value_info(cond_out, bool, ())] + list(body.graph.output))

    stacked = [node.fresh("stacked") for _ in range(num_out)]
    node.add("Loop", [node.const(spec["max_iterations"]), keep_going]
             + [custom_node.inputs[k] for k in var_slots],
             custom_node.outputs[num_out:] + stacked, body=body.graph)
    dtypes = [v.dtype for v in body.outputs]
    if num_out:
        _pad_rows(node, stacked, dtypes[num_vars:])
    return node.nodes, dtypes[num_vars:] + dtypes[:num_vars]


def _pad_rows(node, stacked, dtypes):
    """Define the while_loop node's step outputs: ``stacked`` (one row per step taken) padded
    with zero rows to max_iterations rows.

    After zero steps the runtime does not know the row shape; an If then takes it from one
    probe call of func on the initial loop vars (NOTE [gluon_cf ops as ONNX control flow]).
    """
    max_iterations = node.spec["max_iterations"]
    outputs = node.node.outputs[:len(stacked)]
    out_ranks = [None if s is None else len(s) for s in node.out_shapes[:len(stacked)]]
    rows = node.add("Slice", [node.add("Shape", [stacked[0]]), node.const([0]), node.const([1])])
    no_step = node.truth(node.add("Equal", [rows, node.const([0])]))

    # then: zeros shaped (max_iterations, *shape of func's step outputs on the initial vars)
    probe_name = f"{node.name}_no_step"
    probe = node.convert("func", probe_name, outer_slots=range(len(node.node.inputs)),
                         output_order=range(len(stacked)))
    zeros = _Emitter(f"{probe_name}/zeros")
    rows_first = zeros.const([max_iterations])
    zero_outputs = [
        zeros.add("ConstantOfShape",
                  [zeros.add("Concat", [rows_first, zeros.add("Shape", [row])], axis=0)],
                  value=numpy_helper.from_array(np.zeros((1,), dtype)))
        for row, dtype in zip(probe.output_names, dtypes)]
    probe.graph.node.extend(zeros.nodes)
    _set_outputs(probe.graph, [value_info(name, dtype, rank)
                               for name, dtype, rank in zip(zero_outputs, dtypes, out_ranks)])

    # else: Pad(stacked, begin (0, ..., 0), end (max_iterations - rows, 0, ..., 0))
    pad = _Emitter(f"{node.name}_padded")
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

    node.add("If", [no_step], outputs, then_branch=probe.graph, else_branch=pad_graph)


def _set_outputs(graph, value_infos):
    del graph.output[:]
    graph.output.extend(value_infos)


def _rank(shape, what, node):
    if shape is None:
        raise ValueError(f"export_onnx: the rank of the {what} of {node.kind} node "
                         f"{node.name!r} is unknown; export through export_onnx / "
                         f"export_onnx_symbol, which infer it from example inputs")
    return len(shape)


# ----------------------------------------------------------------------------- registration

register_custom_converter(_OP_PREFIX + "cond", _convert_cond)
register_custom_converter(_OP_PREFIX + "foreach", _convert_foreach)
register_custom_converter(_OP_PREFIX + "while_loop", _convert_while_loop)
