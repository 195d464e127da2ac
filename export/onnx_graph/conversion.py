"""``symbol_to_onnx_graph``: an MXNet symbol converted node by node by mx2onnx's converters
(``MXNetGraph.convert_layer``, NOTE [mx2onnx pitfalls] in ``mx2onnx_fixes.py``), with the graph
plumbing done here: graph inputs, parameters and outer-scope values under placeholder names,
output names, dtypes and shapes from MXNet's inference merged with ONNX's, one definition per
ONNX name, and every name prefixed with the graph's (``renaming.py``)."""
import json
import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

import mxnet as mx
import numpy as np
import onnx
from onnx import helper, numpy_helper
from mxnet.onnx.mx2onnx._export_onnx import MXNetGraph

from . import mx2onnx_fixes  # noqa: F401 -- mx2onnx's converters work only once it has run
from . import mx2onnx_added  # noqa: F401 -- converters mx2onnx lacks (NOTE [added converters])
from . import mx2onnx_layers  # noqa: F401 -- layer ops mx2onnx gets wrong (same NOTE)
from .custom import _ENTRY_SPECS_KWARG
from .probing import probed_shapes
from .renaming import _prefix_names
from .runtime_kernels import stamp
from .specs import (DEFAULT_OPSET, NODE_OF_ERROR, SOURCE_ATTR, OnnxGraph, ValueSpec,
                    _check_opset,
                    _spec_value_info, source_prefix, value_info)
from .variables import _classify_variables


def symbol_to_onnx_graph(sym, params=None, input_specs=(), output_names=None,
                         graph_name="graph", opset=DEFAULT_OPSET, *, input_names=None,
                         outer=None, embed_params=True):
    """Convert ``sym`` into an :class:`OnnxGraph`.

    Every input variable of ``sym`` must be exactly one of:

    * a graph input, listed in ``input_specs`` as ``(name, shape, dtype)``, in order.  Names
      not used by ``sym`` are allowed (e.g. a Loop body's iteration counter);
    * a parameter in ``params`` (name -> NDArray / np.ndarray).  With ``embed_params=True``
      it becomes an initializer of this graph, otherwise an outer-scope reference under its
      own name;
    * a captured value, ``outer[name] = (onnx_name, shape, dtype)``: the graph refers to
      ``onnx_name``, which an enclosing graph defines.

    Graph inputs are named ``input_names`` (default ``<graph_name>/<name>``), outputs
    ``output_names`` (default ``<graph_name>/<mxnet output name>``); every other name
    defined in the graph is prefixed with ``<graph_name>/``.
    """
    _check_opset("symbol_to_onnx_graph", opset)
    sources = _classify_variables(sym, params, input_specs, outer, embed_params)
    heads = sym.list_outputs()
    if output_names is None:
        output_names = [f"{graph_name}/{name}" for name in heads]
    output_names = list(output_names)
    if len(output_names) != len(heads):
        raise ValueError(f"symbol_to_onnx_graph: the symbol has {len(heads)} outputs {heads} "
                         f"but {len(output_names)} output_names were given: {output_names}")
    if input_names is None:
        input_names = [f"{graph_name}/{spec.name}" for spec in sources.inputs]
    input_names = list(input_names)
    if len(input_names) != len(sources.inputs):
        raise ValueError(f"symbol_to_onnx_graph: got {len(input_names)} input_names for "
                         f"{len(sources.inputs)} input_specs")

    converted = _convert_nodes(sym, sources, opset)

    graph = helper.make_graph(
        converted.nodes, graph_name,
        [_spec_value_info(spec) for spec in sources.inputs], [], converted.initializers)
    fixed = {spec.name: final for spec, final in zip(sources.inputs, input_names)}
    fixed.update(converted.outer_names)
    renamed = _prefix_names(graph, f"{graph_name}/", fixed)

    # Outputs are always fresh Identity nodes: a head may be a graph input, an outer value
    # or appear twice, none of which could simply be renamed to the requested output name.
    for value, out_name in zip(converted.heads, output_names):
        graph.node.append(helper.make_node("Identity", [renamed.get(value.name, value.name)],
                                           [out_name], name=f"{graph_name}/{out_name}"))
        graph.output.append(value_info(out_name, value.dtype, None))
    onnx_shapes = _onnx_output_shapes(graph, converted.outer_used, opset)
    outputs = []
    for output_info, value, onnx_shape, mx_shape in zip(
            graph.output, converted.heads, onnx_shapes, converted.head_shapes):
        spec = ValueSpec(output_info.name, _merge_shapes(onnx_shape, mx_shape), value.dtype)
        output_info.CopyFrom(_spec_value_info(spec))
        outputs.append(spec)

    inputs = [spec._replace(name=final) for spec, final in zip(sources.inputs, input_names)]
    return OnnxGraph(graph, inputs, outputs, list(converted.outer_used))


# ----------------------------------------------------------------------------- node by node

class _Value:
    """An entry of mx2onnx's ``outputs_lookup``: the ONNX name and numpy dtype of one output."""
    def __init__(self, name, dtype):
        self.name = name
        self.dtype = np.dtype(dtype)


@dataclass
class _Converted:
    nodes: list
    initializers: list
    heads: list           # _Value per symbol output
    head_shapes: list
    outer_names: dict     # placeholder name -> enclosing graph's name
    outer_used: list      # ValueSpec of the outer values actually read


# Free (outer-scope) variables are converted under placeholder names that no MXNet node can
# have, so that renaming afterwards cannot confuse them with names defined in the graph.
_OUTER_PLACEHOLDER = "\x00outer{}"

# MXNet defaults that mx2onnx's converters get wrong when the attribute is absent from the
# JSON (only explicitly set attributes are saved).
# (found by comparing every converter's attrs.get defaults with MXNet's operator registry)
_MXNET_DEFAULT_ATTRS = {
    "FullyConnected": {"flatten": "True"}, "LRN": {"knorm": "2"},
    "Deconvolution": {"no_bias": "True"}, "_split_v2": {"axis": "1"},
    "_contrib_box_nms": {"force_suppress": "False"},
    **{op: {"scalar": "1"} for op in (
        "_maximum_scalar", "_minimum_scalar", "_mod_scalar", "_rmod_scalar", "_rpower_scalar",
        "_lesser_equal_scalar", "_greater_equal_scalar", "_not_equal_scalar")}}

def _integer_scalar(node, name, mx_name, dtype):
    """A scalar op's scalar as MXNet casts it to an integer input's dtype: towards 0
    (F.maximum(x, 2.5) of int32 is F.maximum(x, 2), 2.7 - x is 2 - x). A scalar that is not
    finite or whose integer part is outside the dtype is refused: C++'s cast of it is
    undefined (x86 gives the dtype's minimum; x + 3e9 of int32 would have wrapped instead)."""
    value = float(node["attrs"]["scalar"])
    limits = np.iinfo(dtype) if dtype.kind in "iu" else None
    if math.isfinite(value) and (limits is None or limits.min <= math.trunc(value) <= limits.max):
        return str(int(value))
    error = NotImplementedError(
        f"{source_prefix(node)}export_onnx: node {name!r} (MXNet op {node['op']!r}) of an "
        f"input of {dtype} has the scalar {node['attrs']['scalar']}, which {dtype} cannot hold: "
        f"MXNet's cast of it to {dtype} is undefined; compute it in a floating-point dtype")
    setattr(error, NODE_OF_ERROR, mx_name)
    raise error


def _convert_nodes(sym, sources, opset):
    """Run mx2onnx's converters over the nodes of ``sym`` (see NOTE [mx2onnx pitfalls])."""
    mx_graph = json.loads(sym.tojson())
    mx_nodes = mx_graph["nodes"]
    entry_specs = _infer_entry_specs(sym, mx_nodes, sources)
    input_dtypes = {spec.name: spec.dtype for spec in sources.inputs}

    nodes: List[onnx.NodeProto] = []
    initializers: List[onnx.TensorProto] = []
    outputs_lookup: List[List[_Value]] = []   # per MXNet node, its outputs (mx2onnx's table)
    outer_names: Dict[str, str] = {}
    outer_used: List[ValueSpec] = []
    seen_names = set()
    for idx, node in enumerate(mx_nodes):
        name = node["name"]
        if node["op"] == "null":
            if name in input_dtypes:
                outputs_lookup.append([_Value(name, input_dtypes[name])])
            elif name in sources.embedded:
                value = sources.embedded[name]
                initializers.append(numpy_helper.from_array(value, name))
                outputs_lookup.append([_Value(name, value.dtype)])
            else:
                spec = sources.outer[name]
                placeholder = _OUTER_PLACEHOLDER.format(len(outer_names))
                outer_names[placeholder] = spec.name
                outer_used.append(spec)
                outputs_lookup.append([_Value(placeholder, spec.dtype)])
            seen_names.add(name)
            continue

        node = dict(node, name=_conversion_name(node, idx, seen_names),
                    attrs={**_MXNET_DEFAULT_ATTRS.get(node["op"], {}), **node.get("attrs", {})})
        if "scalar" in node["attrs"] and node["inputs"]:
            src, out = node["inputs"][0][:2]
            if outputs_lookup[src][out].dtype.kind in "iub":
                node["attrs"]["scalar"] = _integer_scalar(node, name, mx_nodes[idx]["name"],
                                                          outputs_lookup[src][out].dtype)
        try:
            with mx2onnx_fixes.float16_constants():
                converted, dtypes = MXNetGraph.convert_layer(
                    node, is_input=False, mx_graph=mx_nodes, weights=sources.embedded,
                    proc_nodes=nodes, initializer=initializers, outputs_lookup=outputs_lookup,
                    idx=idx, opset_version=opset, **{_ENTRY_SPECS_KWARG: entry_specs})
        except Exception as err:  # noqa: BLE001 -- mx2onnx raises anything; name the node
            if node["op"] == "Custom":
                raise  # Custom-op converters name their node themselves
            error = NotImplementedError(
                f"{source_prefix(node)}mx2onnx cannot convert node {name!r} (MXNet op "
                f"{node['op']!r}): {type(err).__name__}: {err}")
            setattr(error, NODE_OF_ERROR, mx_nodes[idx]["name"])
            raise error from err
        stamp([item for item in converted if isinstance(item, onnx.NodeProto)], name,
              node["attrs"].get(SOURCE_ATTR))
        produced = []
        for item in converted:
            if isinstance(item, onnx.NodeProto):
                nodes.append(item)
                produced.extend(item.output)
            elif not isinstance(item, onnx.ValueInfoProto):
                raise TypeError(f"mx2onnx converter for {node['op']!r} returned {type(item)}")
        out_names = _node_output_names(node["name"], produced, converted)
        if dtypes is None:
            dtypes = [_entry_dtype(entry_specs, (idx, k), node, outputs_lookup)
                      for k in range(len(out_names))]
        outputs_lookup.append([_Value(n, d) for n, d in zip(out_names, dtypes)])

    _check_single_assignment(nodes, initializers, [spec.name for spec in sources.inputs])
    heads = [(node_idx, out_idx) for node_idx, out_idx, _ in mx_graph["heads"]]
    for node_idx, out_idx in heads:
        if out_idx >= len(outputs_lookup[node_idx]):
            node = mx_nodes[node_idx]
            error = NotImplementedError(
                f"{source_prefix(node)}export_onnx: output {out_idx} of node {node['name']!r} "
                f"(MXNet op {node['op']!r}) has no ONNX counterpart; return only its first "
                f"output")
            setattr(error, NODE_OF_ERROR, node["name"])
            raise error
    return _Converted(
        nodes, initializers,
        heads=[outputs_lookup[i][k] for i, k in heads],
        head_shapes=_head_shapes(mx_nodes, entry_specs, heads),
        outer_names=outer_names, outer_used=outer_used)


def _head_shapes(mx_nodes, entry_specs, heads):
    """MXNet's inferred shapes of the heads, only the rank kept for a head computed from a
    value of unknown size (a gluon_cf node's output of run-time shape, a dynamic axis):
    MXNet's partial inference may take such a size as none, so ``concat(start, items)`` of
    ``items`` of (unknown,) came out as (1,), declared as an If branch's output, and
    onnxruntime refused every run with items ("has shape {1} but the computed output shape
    for this run is {3}"). ONNX's inference, where it knows a dim, still gives it."""
    def unknown(entry):
        shape = entry_specs.get(entry, (None,))[0]
        return shape is None or None in shape

    unsure: Set[Tuple[int, int]] = set()   # entries computed from a value of unknown size
    for idx, node in enumerate(mx_nodes):
        if node["op"] != "null" and any(
                tuple(e[:2]) in unsure or unknown(tuple(e[:2])) for e in node["inputs"]):
            unsure.update(entry for entry in entry_specs if entry[0] == idx)
    shapes = []
    for head in heads:
        shape = entry_specs.get(head, (None, None))[0]
        shapes.append((None,) * len(shape) if shape is not None and head in unsure else shape)
    return shapes


def _conversion_name(node, idx, seen_names):
    """The node name handed to mx2onnx: unique, and with the prefix that the scalar-op
    converters look for (NOTE [mx2onnx pitfalls])."""
    name = node["name"]
    marker = {"_rminus_scalar": "_rminusscalar", "_rdiv_scalar": "_rdivscalar"}.get(node["op"])
    if marker and not name.startswith(marker):
        name = f"{marker}/{name}"
    if name in seen_names:
        name = f"idx_{idx}_{name}"
    seen_names.add(name)
    return name


def _node_output_names(name, produced, converted):
    """mx2onnx's convention: outputs are called ``name`` or ``name<k>``, ordered by ``k``; a
    converter producing neither names its (single) output after its last returned item."""
    index = {name: -1, **{f"{name}{k}": k for k in range(100)}}
    names = sorted((n for n in produced if n in index), key=index.__getitem__)
    return names or [converted[-1].name]


def _entry_dtype(entry_specs, entry, node, outputs_lookup):
    dtype = entry_specs.get(entry, (None, None))[1]
    if dtype is not None:
        return dtype
    if not node["inputs"]:
        raise ValueError(f"cannot tell the dtype of output {entry[1]} of node {node['name']!r} "
                         f"({node['op']}): MXNet's infer_type failed and it has no inputs")
    src, out = node["inputs"][0][:2]
    return outputs_lookup[src][out].dtype


def _infer_entry_specs(sym, mx_nodes, sources):
    """(node index, output index) -> (shape or None, dtype or None) for every visible output
    of every node, from MXNet's inference; best effort, empty where inference fails."""
    known = [(spec.name, spec.shape, spec.dtype) for spec in sources.inputs]
    known += [(name, value.shape, value.dtype) for name, value in sources.embedded.items()]
    known += [(name, spec.shape, spec.dtype) for name, spec in sources.outer.items()]
    variables = set(sym.list_inputs())
    known = [entry for entry in known if entry[0] in variables]

    internals = sym.get_internals()
    internals_graph = json.loads(internals.tojson())
    if [n["name"] for n in internals_graph["nodes"]] != [n["name"] for n in mx_nodes]:
        return {}  # node order differs; no safe way to line the entries up
    entries = [(node_idx, out_idx) for node_idx, out_idx, _ in internals_graph["heads"]]

    unknown_dim = -1 if mx.util.is_np_shape() else 0
    shapes = {name: tuple(d if isinstance(d, (int, np.integer)) else unknown_dim for d in shape)
              for name, shape, _ in known if shape is not None}
    try:
        _, out_shapes, _ = internals.infer_shape_partial(**shapes)
        out_shapes = [_onnx_shape(s) for s in out_shapes]
    except mx.base.MXNetError:
        out_shapes = None
    if out_shapes is None or None in out_shapes:
        # Where MXNet refuses the unknown dims' 0 (F.dot of a (1, 0) and a (0, 4) in a loop
        # body reading a value of run-time rows) or loses a rank to it (F.dot of a (0,) and a
        # (0, 3) has none), the shapes are probed, as the shape plan does: NOTE [probing
        # run-time dims]. Without it converters needing a rank (a softmax by length over
        # axis 1) refused the graph, and a Scan body's output had no shape, which
        # onnxruntime refuses at run time ("Subgraph must have the shape set for all
        # outputs").
        probed = probed_shapes(internals, {
            name: tuple(d if isinstance(d, (int, np.integer)) else None for d in shape)
            for name, shape, _ in known if shape is not None}, variables)
        if probed is not None:
            out_shapes = probed if out_shapes is None else \
                [p if s is None else s for s, p in zip(out_shapes, probed)]
    try:
        _, out_types, _ = internals.infer_type(**{name: dtype for name, _, dtype in known})
    except mx.base.MXNetError:
        out_types = None

    specs = {}
    for k, entry in enumerate(entries):
        shape = out_shapes[k] if out_shapes else None
        dtype = np.dtype(out_types[k]) if out_types and out_types[k] is not None else None
        specs[entry] = (shape, dtype)
    return specs


def _onnx_shape(mx_shape):
    """MXNet's partially inferred shape -> ONNX shape with ``None`` for unknown dims."""
    np_shape = mx.util.is_np_shape()
    if mx_shape is None or (not np_shape and len(mx_shape) == 0):
        return None  # unknown rank; with legacy shape semantics () means "unknown"
    unknown_dim = -1 if np_shape else 0
    return tuple(None if d == unknown_dim else d for d in mx_shape)


def _onnx_output_shapes(graph, outer_inputs, opset):
    """Output shapes from ONNX shape inference (with data propagation, so the Shape/Slice/
    Concat chains mx2onnx emits resolve), ``None`` where unknown.

    Inference runs on a throw-away copy that declares the outer-scope values as inputs and
    has no outputs, so that the outputs' inferred types land in ``value_info``.
    """
    probe = onnx.GraphProto()
    probe.CopyFrom(graph)
    del probe.output[:]
    declared = {vi.name for vi in probe.input}
    for spec in outer_inputs:
        if spec.name not in declared:
            probe.input.append(_spec_value_info(spec))
            declared.add(spec.name)
    opset_id = helper.make_opsetid("", opset)
    model = helper.make_model(probe, opset_imports=[opset_id],
                              ir_version=helper.find_min_ir_version_for([opset_id]))
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except onnx.shape_inference.InferenceError:
        return [None] * len(graph.output)
    value_types = {vi.name: vi.type.tensor_type for vi in inferred.graph.value_info}
    shapes: List[Optional[Tuple[object, ...]]] = []   # per dim: int, a dim name or None
    for output in graph.output:
        tensor_type = value_types.get(output.name)
        if tensor_type is None or not tensor_type.HasField("shape"):
            shapes.append(None)
            continue
        # Unknown dims come back as invented "unk__<n>" symbols; keep only real information.
        shapes.append(tuple(
            d.dim_value if d.HasField("dim_value") else
            d.dim_param if d.HasField("dim_param") and not d.dim_param.startswith("unk__")
            else None
            for d in tensor_type.shape.dim))
    return shapes


def _merge_shapes(onnx_shape, mx_shape):
    """Per dim, what ONNX inferred, else what MXNet inferred."""
    if onnx_shape is None:
        return mx_shape
    if mx_shape is None or len(mx_shape) != len(onnx_shape):
        return onnx_shape
    return tuple(m if o is None else o for o, m in zip(onnx_shape, mx_shape))


def _check_single_assignment(nodes, initializers, input_names):
    defined: Dict[str, str] = {}   # ONNX name -> what defines it
    definitions = ([(name, "graph input") for name in input_names]
                   + [(init.name, "initializer") for init in initializers]
                   + [(out, f"node {node.name or node.op_type!r}")
                      for node in nodes for out in node.output if out])
    for name, where in definitions:
        if name in defined:
            raise ValueError(f"symbol_to_onnx_graph: mx2onnx defines the ONNX name {name!r} "
                             f"twice ({defined[name]} and {where}); rename the MXNet node or "
                             f"variable whose name makes it clash")
        defined[name] = where

