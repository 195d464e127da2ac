"""Turn an MXNet Symbol into an ONNX GraphProto that can stand alone or be nested.

This is the building block of gluon_cf's ONNX export.  Ordinary MXNet ops are converted by
MXNet's own exporter (``mxnet.onnx.mx2onnx``): we call its converter registry node by node
(``MXNetGraph.convert_layer``) and only do the graph plumbing ourselves -- graph inputs,
parameters, values captured from an enclosing graph, output names and per-graph name
prefixes.  gluon_cf's control-flow ops are MXNet ``Custom`` nodes; their converters plug in
with :func:`register_custom_converter` and are reached through mx2onnx's own dispatch.

    graph = symbol_to_onnx_graph(sym, params, [("x", (None, 5), "float32")],
                                 output_names=["y"], graph_name="then")
    graph.graph            # onnx.GraphProto: input "then/x", output "y", names "then/..."
    graph.outputs          # [ValueSpec("y", (None, 4), float32)]
    graph.outer_inputs     # names the graph reads from an enclosing scope

See NOTE [mx2onnx pitfalls] below before writing a converter.
"""
# NOTE [mx2onnx pitfalls] -- for whoever writes the control-flow converters
# * mx2onnx (MXNet 1.9.1) uses `onnx.mapping`, which current onnx releases removed, so its
#   converters crash and `mx.onnx.export_model` fails on `from onnx import mapping`.  We give
#   the two converter modules a private `onnx` that has `mapping` again
#   (`_patch_mx2onnx_onnx_mapping`); the real onnx package is untouched, so
#   `mx.onnx.export_model` itself still fails -- export through this module.
# * mx2onnx has converter tables for opsets 12 and 13 only and silently falls back to them for
#   newer opsets.  Declaring opset >= 14 would pair old-style nodes (ReduceMean `axes`
#   attribute, Split `split` attribute, ...) with newer schemas, so we accept 12 and 13 only
#   (default 13; Loop-13, If-13 and Scan-11 exist there).
# * `MXNetGraph.create_onnx_graph_proto` cannot build subgraphs: it wants a static shape for
#   every input, turns every free variable into a graph input and ends with
#   `checker.check_graph`, which rejects outer-scope references.  We drive
#   `MXNetGraph.convert_layer` ourselves and handle `null` (variable) nodes here.
# * Converters name outputs after the MXNet node (`fc`; `fc0`, `fc1`, ... when there are
#   several -- a Custom converter must define exactly `CustomOpNode.outputs`), helper values
#   `fc_1`, `fc_-1`, ..., plus `scalar_op<idx>`.  Separately converted graphs therefore clash,
#   so every name defined in a graph, nested subgraphs included, gets `<graph_name>/` in front
#   afterwards.  Sibling subgraphs (then/else) may reuse local names; nested ones may not
#   shadow.  A name defined twice within one graph is reported (rename the MXNet node).
# * mx2onnx has no converters for the elementwise comparisons (`a < b` of two Symbols:
#   `_lesser`, ...) nor for `_lesser_equal_scalar`, `_greater_equal_scalar`,
#   `_not_equal_scalar`, nor for `_contrib_boolean_mask` (-> Compress), and its `Reshape`
#   refuses the codes -3 (merge two axes) and -2 (keep the rest) but for a few fixed patterns;
#   `_register_missing_ops` adds them (NOTE [reshape codes]).
# * Converters may return ValueInfoProtos for the constants they add (IR < 4 style, where
#   initializers are graph inputs too).  We drop them.
# * Converters read only the attributes present in the JSON, and MXNet saves only explicitly
#   set ones; a converter default that differs from MXNet's is silently wrong.  Known case:
#   FullyConnected `flatten` (MXNet True, mx2onnx False) -- filled in by _MXNET_DEFAULT_ATTRS.
# * `_rminus_scalar` / `_rdiv_scalar` (`1 - x`, `1 / x`) are recognised by the *node name*
#   prefix `_rminusscalar`; Gluon names them `<block>__rminusscalar0`, and when the input is a
#   parameter the constant-folding branch then computes `x - 1`.  We rename such nodes before
#   conversion.  (That converter also `print`s -- export_onnx_symbol silences stdout while
#   converting -- and folding leaves the original parameter as an unused initializer that
#   onnxruntime warns about; make_onnx_model removes unused initializers.)
# * `take`/`Embedding` Cast indices to int64, so int32, int64 and MXNet's default float32
#   indices all work; the graph input keeps its declared dtype.  But `take` in mode 'clip'
#   (the default) or 'wrap' broadcasts a 0-d index (a Loop's iteration counter) to shape [1],
#   adding a leading axis; only mode='raise' emits a plain Gather.  MXNet itself has no 0-d
#   arrays (legacy shape semantics), so bodies traced in MXNet never see a true scalar.
# * dtypes: converters that do not report output dtypes are assumed by mx2onnx to keep their
#   first input's dtype.  We prefer MXNet's infer_type for those; graph output dtypes are the
#   ones the ONNX nodes actually produce.  If cond / Loop condition must be bool.
# * shapes: MXNet's legacy inference treats 0 as an unknown dim and () as an unknown shape,
#   and many ops (take, argmax, ...) give up entirely on any unknown dim.  Output shapes come
#   from ONNX shape inference with data propagation, merged with MXNet's; but the shapes in a
#   CustomOpNode (seen during conversion) are MXNet's only and often None.
# * `.params` files prefix names with `arg:` / `aux:`; we strip them like mx2onnx does.
# * Initializers inside a subgraph are copied into every branch/body: for big weights use
#   `embed_params=False` and define them once in the main graph (params_to_initializers).

import json
import types
from dataclasses import dataclass
from typing import NamedTuple, Optional

import mxnet as mx
import numpy as np
import onnx
from onnx import helper, numpy_helper
from mxnet.onnx.mx2onnx._export_onnx import MXNetGraph

from gluon_cf.operators import SOURCE_ATTR

from .onnx_simplify import simplify
from mxnet.onnx.mx2onnx._op_translations import (_op_translations_opset12,
                                                 _op_translations_opset13)

__all__ = [
    "DEFAULT_OPSET", "SUPPORTED_OPSETS", "ValueSpec", "OnnxGraph", "CustomOpNode",
    "register_custom_converter", "symbol_to_onnx_graph", "export_symbol_onnx",
    "make_onnx_model", "params_to_initializers", "remove_unused_initializers",
]

DEFAULT_OPSET = 13
SUPPORTED_OPSETS = (12, 13)


# ----------------------------------------------------------------------------- public types

class ValueSpec(NamedTuple):
    """Name, shape and dtype of a value.  ``shape`` may hold ``None`` or a string (symbolic
    dim) per axis, or be ``None`` altogether (unknown rank)."""
    name: str
    shape: Optional[tuple]
    dtype: np.dtype


@dataclass
class OnnxGraph:
    """Result of :func:`symbol_to_onnx_graph`.

    ``graph`` holds its initializers.  ``inputs``/``outputs`` describe its formal inputs and
    outputs (final ONNX names); ``outer_inputs`` the enclosing-scope names it reads, which
    the caller must define in an enclosing graph.
    """
    graph: onnx.GraphProto
    inputs: list
    outputs: list
    outer_inputs: list

    @property
    def input_names(self):
        return [v.name for v in self.inputs]

    @property
    def output_names(self):
        return [v.name for v in self.outputs]


@dataclass(frozen=True)
class CustomOpNode:
    """What a Custom-op converter gets: one MXNet ``Custom`` node, seen from ONNX.

    ``inputs`` are ONNX value names (they may be names of the graph being built or of an
    enclosing one -- use them as outer-scope references inside subgraphs); the converter
    must define every name in ``outputs``, in order.  ``input_shapes``, ``output_dtypes`` and
    ``output_shapes`` come from MXNet's inference and are ``None`` where unknown (always
    ``None`` when called from ``mx.onnx.export_model``).  Name any subgraph it builds after
    ``name`` (e.g. ``graph_name=node.name + "_then"``); the enclosing graph adds its prefix.
    """
    op_type: str
    name: str
    attrs: dict
    inputs: list
    outputs: list
    opset: int
    input_dtypes: list
    input_shapes: Optional[list] = None
    output_dtypes: Optional[list] = None
    output_shapes: Optional[list] = None


_CUSTOM_CONVERTERS: dict = {}  # op_type -> fn(CustomOpNode)


def register_custom_converter(op_type, fn=None):
    """Register ``fn(node: CustomOpNode)`` for MXNet ``Custom`` nodes whose ``op_type``
    attribute is ``op_type``; usable as a decorator, re-registering replaces.

    ``fn`` returns a list of NodeProtos defining ``node.outputs``, or the tuple
    ``(nodes, output_dtypes)`` if the dtypes differ from ``node.output_dtypes``.
    """
    def register(f):
        _CUSTOM_CONVERTERS[op_type] = f
        return f
    return register if fn is None else register(fn)


# ----------------------------------------------------------------------------- public API

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


def export_symbol_onnx(sym, params, input_specs, path=None, opset=DEFAULT_OPSET,
                       output_names=None, graph_name="main"):
    """Export ``sym`` with ``params`` embedded as a checked ONNX model; save it to ``path`` if
    given.  Graph inputs keep the names in ``input_specs``; outputs default to MXNet's output
    names.  Returns the ``onnx.ModelProto``."""
    input_specs = [_value_spec(spec) for spec in input_specs]
    if output_names is None:
        output_names = sym.list_outputs()
    converted = symbol_to_onnx_graph(sym, params, input_specs, output_names, graph_name, opset,
                                     input_names=[spec.name for spec in input_specs])
    if converted.outer_inputs:
        raise ValueError(f"export_symbol_onnx: a top-level graph cannot read outer-scope values, "
                         f"got {[v.name for v in converted.outer_inputs]}")
    unranked = [spec.name for spec in converted.outputs if spec.shape is None]
    if unranked:
        raise ValueError(f"export_symbol_onnx: neither MXNet nor ONNX shape inference found the "
                         f"rank of outputs {unranked}, which a top-level ONNX graph must declare; "
                         f"give more static dims in input_specs")
    model = make_onnx_model(converted.graph, opset)
    if path is not None:
        onnx.save(model, path)
    return model


def make_onnx_model(graph, opset=DEFAULT_OPSET, check=True):
    """Wrap ``graph`` in a ModelProto importing the default ONNX domain at ``opset`` (with the
    matching minimal IR version), simplified and without unused initializers, and, if
    ``check``, run ``check_model(full_check=True)``."""
    _check_opset("make_onnx_model", opset)
    simplify(graph)              # NOTE [simplifying exported graphs] in onnx_simplify.py
    remove_unused_initializers(graph)
    opset_id = helper.make_opsetid("", opset)
    model = helper.make_model(graph, opset_imports=[opset_id], producer_name="gluon_cf",
                              ir_version=helper.find_min_ir_version_for([opset_id]))
    if check:
        onnx.checker.check_model(model, full_check=True)
    return model


def remove_unused_initializers(graph):
    """Drop, in ``graph`` and every subgraph, the initializers and ``Constant`` nodes no node,
    nested subgraph or output reads (constant folding in mx2onnx's converters leaves the folded
    parameter behind, and onnxruntime warns about each one).  An initializer that is also a graph input stays: it
    is that input's default value.  Returns the names removed, as ``graph/...:name``."""
    return _remove_unused(graph, graph.name)


def _remove_unused(graph, where):
    removed = []
    for node in graph.node:
        for attr in node.attribute:
            for sub in _subgraphs(attr):
                removed += _remove_unused(sub, f"{where}/{node.name}.{attr.name}")
    # ONNX forbids a subgraph to shadow an outer name, so a name read anywhere below this
    # graph that this graph defines is this graph's. Constant nodes nothing reads go too
    # (converted graphs inlined into loop bodies carry their initializers as Constants).
    while True:
        read = _names_read(graph)
        dead = [n for n in graph.node if n.op_type == "Constant" and n.output[0] not in read]
        if not dead:
            break
        removed += [f"{where}:{n.output[0]}" for n in dead]
        for n in dead:
            graph.node.remove(n)
    read = _names_read(graph) | {value.name for value in graph.input}
    kept = [init for init in graph.initializer if init.name in read]
    if len(kept) < len(graph.initializer):
        removed += [f"{where}:{init.name}" for init in graph.initializer
                    if init.name not in read]
        del graph.initializer[:]
        graph.initializer.extend(kept)
    return removed


def _subgraphs(attr):
    return ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)


def _names_read(graph):
    names = {value.name for value in graph.output}
    for node in graph.node:
        names.update(name for name in node.input if name)
        for attr in node.attribute:
            for sub in _subgraphs(attr):
                names |= _names_read(sub)
    return names


def params_to_initializers(params, names=None):
    """ONNX initializers for ``params`` (restricted to ``names`` if given), named as is --
    for graphs converted with ``embed_params=False``."""
    params = _normalize_params(params)
    names = params if names is None else names
    return [numpy_helper.from_array(params[name], name) for name in names]


# ----------------------------------------------------------------------------- classification

@dataclass
class _Sources:
    """Where each input variable of the symbol comes from."""
    inputs: list          # ValueSpec per graph input, in order (MXNet variable names)
    embedded: dict        # variable name -> np.ndarray (becomes an initializer)
    outer: dict           # variable name -> ValueSpec with the enclosing graph's name


def _classify_variables(sym, params, input_specs, outer, embed_params):
    params = _normalize_params(params)
    inputs = [_value_spec(spec) for spec in input_specs]
    outer = {name: _value_spec(spec) for name, spec in (outer or {}).items()}
    input_names = [spec.name for spec in inputs]
    duplicates = sorted({n for n in input_names if input_names.count(n) > 1})
    if duplicates:
        raise ValueError(f"symbol_to_onnx_graph: input_specs names repeat: {duplicates}")

    sources = _Sources(inputs, {}, {})
    for name in sym.list_inputs():
        places = [where for where, found in (("input_specs", name in input_names),
                                             ("params", name in params),
                                             ("outer", name in outer)) if found]
        if len(places) > 1:
            raise ValueError(f"symbol_to_onnx_graph: variable {name!r} is given in both "
                             f"{places[0]} and {places[1]}; give it in one place only")
        if places == ["params"] and embed_params:
            sources.embedded[name] = params[name]
        elif places == ["params"]:
            value = params[name]
            sources.outer[name] = ValueSpec(name, value.shape, value.dtype)
        elif places == ["outer"]:
            sources.outer[name] = outer[name]
        elif not places:
            raise ValueError(
                f"symbol_to_onnx_graph: symbol input {name!r} is not in input_specs, params "
                f"or outer; add ({name!r}, shape, dtype) to input_specs, its value to "
                f"params, or outer[{name!r}] = (enclosing_name, shape, dtype)")
    return sources


def _normalize_params(params):
    """name -> np.ndarray, with the ``arg:``/``aux:`` prefixes of .params files stripped."""
    normalized = {}
    for name, value in (params or {}).items():
        if name.startswith(("arg:", "aux:")):
            name = name[4:]
        if isinstance(value, mx.nd.NDArray):
            value = value.asnumpy()
        normalized[name] = np.asarray(value)
    return normalized


def _value_spec(spec):
    name, shape, dtype = spec
    return ValueSpec(name, None if shape is None else tuple(shape), np.dtype(dtype))


def value_info(name, dtype, rank_or_shape):
    """ValueInfo of ``name``; ``rank_or_shape``: a shape, a rank (unknown dims) or None."""
    shape = [None] * rank_or_shape if isinstance(rank_or_shape, int) else rank_or_shape
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                         shape)


def _spec_value_info(spec):
    return value_info(spec.name, spec.dtype, spec.shape)


def _check_opset(api, opset):
    if opset not in SUPPORTED_OPSETS:
        raise ValueError(f"{api}: opset {opset} is not supported; mx2onnx has converters for "
                         f"opsets {list(SUPPORTED_OPSETS)} only (default {DEFAULT_OPSET})")


# ----------------------------------------------------------------------------- conversion

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
_MXNET_DEFAULT_ATTRS = {"FullyConnected": {"flatten": "True"}}

# Extra keyword argument we pass through ``MXNetGraph.convert_layer`` to our Custom dispatcher.
_ENTRY_SPECS_KWARG = "gluon_cf_entry_specs"


def _convert_nodes(sym, sources, opset):
    """Run mx2onnx's converters over the nodes of ``sym`` (see NOTE [mx2onnx pitfalls])."""
    mx_graph = json.loads(sym.tojson())
    mx_nodes = mx_graph["nodes"]
    entry_specs = _infer_entry_specs(sym, mx_nodes, sources)
    input_dtypes = {spec.name: spec.dtype for spec in sources.inputs}

    nodes, initializers, outputs_lookup = [], [], []
    outer_names, outer_used = {}, []
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
        try:
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
    return _Converted(
        nodes, initializers,
        heads=[outputs_lookup[i][k] for i, k in heads],
        head_shapes=[entry_specs.get(head, (None, None))[0] for head in heads],
        outer_names=outer_names, outer_used=outer_used)


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
    names = sorted((n for n in produced if n in index), key=index.get)
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
    except mx.base.MXNetError:
        out_shapes = None
    try:
        _, out_types, _ = internals.infer_type(**{name: dtype for name, _, dtype in known})
    except mx.base.MXNetError:
        out_types = None

    specs = {}
    for k, entry in enumerate(entries):
        shape = _onnx_shape(out_shapes[k]) if out_shapes else None
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
    shapes = []
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
    defined = {}
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


# ----------------------------------------------------------------------------- renaming

def _defined_names(graph):
    names = [vi.name for vi in graph.input] + [init.name for init in graph.initializer]
    names += [out for node in graph.node for out in node.output if out]
    return names


def _prefix_names(graph, prefix, fixed, scope=None):
    """Prefix every name defined in ``graph`` and its nested subgraphs, in place.

    ``fixed`` gives final names for some names defined (or referenced) at this level;
    ``scope`` maps names visible from enclosing graphs.  Names resolve lexically, as ONNX
    does, and names defined nowhere are left alone.  Returns the mapping for this level.
    """
    mapping = dict(scope or {})
    mapping.update({name: prefix + name for name in _defined_names(graph)})
    mapping.update(fixed)
    rename = lambda name: mapping.get(name, name) if name else name  # noqa: E731

    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        value.name = rename(value.name)
    for init in graph.initializer:
        init.name = rename(init.name)
    for node in graph.node:
        node.input[:] = [rename(n) for n in node.input]
        node.output[:] = [rename(n) for n in node.output]
        if node.name:
            node.name = prefix + node.name
        for attr in node.attribute:
            subgraphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs
            for subgraph in subgraphs:
                _prefix_names(subgraph, prefix, {}, mapping)
    return mapping


# ----------------------------------------------------------------------------- Custom nodes

def _convert_custom(node, **kwargs):
    """mx2onnx converter for ``Custom``: dispatch on ``op_type`` to the registered converter.

    mx2onnx looks converters up by ``node["op"]`` only, and every Custom op shares the op name
    ``Custom``; so one converter is registered for it and dispatches on the attribute.
    """
    name, input_names, attrs = _op_translations_opset12.get_inputs(node, kwargs)
    op_type = attrs.get("op_type")
    fn = _CUSTOM_CONVERTERS.get(op_type)
    if fn is None:
        raise NotImplementedError(
            f"no ONNX converter for Custom op_type {op_type!r} (node {name!r}); registered: "
            f"{sorted(_CUSTOM_CONVERTERS)}. Add one with "
            f"register_custom_converter({op_type!r}, fn)")

    idx, lookup = kwargs.get("idx"), kwargs["outputs_lookup"]
    entry_specs = kwargs.get(_ENTRY_SPECS_KWARG) or {}  # absent under mx.onnx.export_model
    input_entries = [tuple(entry[:2]) for entry in node["inputs"]]
    output_entries = sorted(entry for entry in entry_specs if entry[0] == idx)
    if not output_entries:
        num_outputs = _count_custom_outputs(attrs, len(input_entries))
        output_entries = [(idx, k) for k in range(num_outputs)]

    def inferred(entries, field):  # field 0: shape, 1: dtype
        if not all(entry in entry_specs for entry in entries):
            return None
        return [entry_specs[entry][field] for entry in entries]

    call = CustomOpNode(
        op_type=op_type, name=name, attrs=dict(attrs), inputs=list(input_names),
        outputs=[name] if len(output_entries) == 1 else
                [f"{name}{k}" for k in range(len(output_entries))],
        opset=kwargs["opset_version"],
        input_dtypes=[lookup[src][out].dtype for src, out in input_entries],
        input_shapes=inferred(input_entries, 0), output_dtypes=inferred(output_entries, 1),
        output_shapes=inferred(output_entries, 0))
    result = fn(call)
    onnx_nodes, dtypes = result if isinstance(result, tuple) else (result, call.output_dtypes)
    onnx_nodes = list(onnx_nodes)
    produced = {out for n in onnx_nodes for out in n.output}
    missing = [out for out in call.outputs if out not in produced]
    if missing:
        raise ValueError(f"Custom-op converter {fn.__name__!r} for op_type {op_type!r} did not "
                         f"define outputs {missing}; it must define {call.outputs}")
    if dtypes is None or any(d is None for d in dtypes):
        return onnx_nodes  # mx2onnx then assumes the dtype of the first input
    return onnx_nodes, [np.dtype(d) for d in dtypes]


def _count_custom_outputs(attrs, num_inputs):
    """Number of outputs of a Custom node, asked from its registered CustomOpProp."""
    args = [mx.sym.var(f"in{k}") for k in range(num_inputs)]
    return len(mx.sym.Custom(*args, **attrs).list_outputs())


# ----------------------------------------------------------------------------- registration

def _patch_mx2onnx_onnx_mapping():
    """Give mx2onnx's converter modules an ``onnx`` that still has ``onnx.mapping``.

    The real ``onnx`` package stays untouched: the converters see a module object that
    forwards every attribute to it and adds ``mapping``.
    """
    tensor_types = [getattr(onnx.TensorProto, t) for t in (
        "FLOAT", "DOUBLE", "FLOAT16", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16",
        "UINT32", "UINT64", "BOOL", "COMPLEX64", "COMPLEX128")]
    tensor_to_np = {t: helper.tensor_dtype_to_np_dtype(t) for t in tensor_types}

    class _NpToTensorType(dict):
        def __getitem__(self, dtype):  # accepts np.dtype, numpy type objects and strings
            return dict.__getitem__(self, np.dtype(dtype))

    mapping = types.SimpleNamespace(
        TENSOR_TYPE_TO_NP_TYPE=tensor_to_np,
        NP_TYPE_TO_TENSOR_TYPE=_NpToTensorType({d: t for t, d in tensor_to_np.items()}))

    class _OnnxWithMapping(types.ModuleType):
        def __getattr__(self, attr):
            return getattr(onnx, attr)

    patched = _OnnxWithMapping("onnx")
    patched.mapping = mapping
    for module in (_op_translations_opset12, _op_translations_opset13):
        if not hasattr(module.onnx, "mapping"):
            module.onnx = patched


# The attribute of an export error that names the MXNet node it is about, so that export_onnx
# can add the user's line where the node itself does not carry it.
NODE_OF_ERROR = "gluon_cf_node"


def source_prefix(node):
    """``"file:line: "`` of the user's code that created an MXNet JSON node, when the trace
    recorded it (NOTE [source locations] in gluon_cf/tracing.py: the nodes of gluon_cf's
    subgraphs), else ``""``: export errors start with it."""
    where = node.get("attrs", {}).get(SOURCE_ATTR)
    return f"{where}: " if where else ""


# ----------------------------------------------------------------------------- missing ops

# Comparisons mx2onnx lacks (what `a < b` on two Symbols and `x <= 1` produce).  The
# elementwise ones are the broadcast ones restricted to equal shapes: same converters.
_SAME_AS_BROADCAST = ("lesser", "greater", "equal", "not_equal", "lesser_equal", "greater_equal")
# op -> (ONNX comparison, negate); MXNet casts the scalar to the input's dtype.
_SCALAR_COMPARISONS = {"_lesser_equal_scalar": ("LessOrEqual", False),
                       "_greater_equal_scalar": ("GreaterOrEqual", False),
                       "_not_equal_scalar": ("Equal", True)}


def _convert_scalar_comparison(node, **kwargs):
    """``x <op> scalar`` -> Constant, comparison (, Not), Cast back to x's dtype (MXNet's
    comparisons return 0/1 in the input's dtype)."""
    name, input_names, attrs = _op_translations_opset12.get_inputs(node, kwargs)
    dtype = np.dtype(_op_translations_opset12.get_input_dtypes(node, kwargs)[0])
    compare, negate = _SCALAR_COMPARISONS[node["op"]]
    scalar = np.array([float(attrs["scalar"])]).astype(dtype)
    nodes = [helper.make_node("Constant", [], [name + "_rhs"],
                              value=numpy_helper.from_array(scalar, name + "_scalar")),
             helper.make_node(compare, [input_names[0], name + "_rhs"], [name + "_cmp"])]
    if negate:
        nodes.append(helper.make_node("Not", [name + "_cmp"], [name + "_not"]))
    nodes.append(helper.make_node("Cast", [nodes[-1].output[0]], [name], name=name,
                                  to=helper.np_dtype_to_tensor_dtype(dtype)))
    return nodes


def _convert_boolean_mask(node, **kwargs):
    """``boolean_mask(data, index, axis)`` -> ``Compress(data, index != 0, axis)``: the rows
    whose index is non-zero, in order; a shape known only at run time, as in MXNet."""
    name, input_names, attrs = _op_translations_opset12.get_inputs(node, kwargs)
    axis = int(attrs.get("axis", 0))
    return [helper.make_node("Cast", [input_names[1]], [name + "_keep"],
                             to=onnx.TensorProto.BOOL),
            helper.make_node("Compress", [input_names[0], name + "_keep"], [name], name=name,
                             axis=axis)]


def _convert_reshape(node, **kwargs):
    """``Reshape`` whose shape merges axes (-3) or keeps the rest (-2), MXNet's codes that
    mx2onnx refuses (autograph's ``F.concat(*items)`` of collected rows is such a reshape):
    the target shape is computed from the input's, code by code (NOTE [reshape codes]); any
    other reshape goes to mx2onnx's converter."""
    attrs = node.get("attrs", {})
    codes = [int(c) for c in _op_translations_opset12.convert_string_to_list(attrs["shape"])]
    reverse = attrs.get("reverse", "False") in ("True", "true", "1")
    if reverse or -4 in codes or not ({-3, -2} & set(codes)) or -2 in codes[:-1]:
        return _MX2ONNX_RESHAPE(node, **kwargs)
    name, input_names, _ = _op_translations_opset12.get_inputs(node, kwargs)
    nodes = [helper.make_node("Shape", [input_names[0]], [name + "_in_shape"])]

    def constant(value, hint):
        out = f"{name}_{hint}{len(nodes)}"
        nodes.append(helper.make_node("Constant", [], [out], value=numpy_helper.from_array(
            np.array(value, dtype=np.int64), out)))
        return out

    def dims(begin, end):   # the input's dims begin..end, a 1-D int64 tensor
        out = f"{name}_dims{len(nodes)}"
        nodes.append(helper.make_node("Slice", [name + "_in_shape", constant([begin], "from"),
                                                constant([end], "to")], [out]))
        return out

    pieces, axis = [], 0
    for code in codes:
        if code == -3:
            merged = f"{name}_merged{len(nodes)}"
            nodes.append(helper.make_node("ReduceProd", [dims(axis, axis + 2)], [merged],
                                          keepdims=1))
            pieces.append(merged)
            axis += 2
        elif code == -2:
            pieces.append(dims(axis, np.iinfo(np.int64).max))
        elif code == 0:
            pieces.append(dims(axis, axis + 1))
            axis += 1
        else:               # a size, or -1 (inferred), as in ONNX
            pieces.append(constant([code], "size"))
            axis += 1
    nodes.append(helper.make_node("Concat", pieces, [name + "_shape"], axis=0))
    nodes.append(helper.make_node("Reshape", [input_names[0], name + "_shape"], [name],
                                  name=name))
    return nodes


# NOTE [reshape codes]
#     MXNet's reshape reads its target shape code by code, each consuming input axes: a size or
#     -1 one axis, 0 copies one, -3 multiplies two, -2 copies all that are left (so nothing
#     may follow it here).  ONNX's Reshape has only 0 (copy the axis at the *same* position,
#     not the next unread one) and -1, so the target is built at run time from Shape(x):
#     Slice per copied axis, ReduceProd per merged pair, Concat.  mx2onnx knows only fixed
#     patterns of -3 and none of -2.
_MX2ONNX_RESHAPE = MXNetGraph.registry_[12]["Reshape"]


def _register_missing_ops():
    table = MXNetGraph.registry_[12]
    if "_contrib_boolean_mask" not in table:
        MXNetGraph.register("_contrib_boolean_mask", opset_version=12)(_convert_boolean_mask)
    for op in _SAME_AS_BROADCAST:
        if f"_{op}" not in table:
            MXNetGraph.register(f"_{op}", opset_version=12)(table[f"broadcast_{op}"])
    for op in _SCALAR_COMPARISONS:
        if op not in table:
            MXNetGraph.register(op, opset_version=12)(_convert_scalar_comparison)
    MXNetGraph.register("Reshape", opset_version=12)(_convert_reshape)


_patch_mx2onnx_onnx_mapping()
_register_missing_ops()
# Opset 12 is the lowest table; convert_layer falls back to it from 13.
MXNetGraph.register("Custom", opset_version=12)(_convert_custom)
