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
import contextlib
import io
import json
import os
import tempfile
import warnings
from typing import Any, Dict, Optional, Sequence

import mxnet as mx
import numpy as np
import onnx
from mxnet.attribute import AttrScope
from onnx import helper
from mxnet.onnx.mx2onnx._export_onnx import MXNetGraph

import gluon_cf  # noqa: F401  (registers the gluon_cf ops, which carry their export rules)
from gluon_cf import registry
from gluon_cf._typing import Path
from gluon_cf.errors import mxnet_message
from gluon_cf.operators import SOURCE_ATTR
from gluon_cf.tracing import user_location

from . import index_bounds
from .artifact_format import RECURSION_KEY
from .artifact_kit import SIGNATURES
from .onnx_graph import (DEFAULT_OPSET, NODE_OF_ERROR, SUPPORTED_OPSETS, ExportTieWarning,
                         make_onnx_model, register_custom_converter, source_prefix,
                         symbol_to_onnx_graph)
from .onnx_shapes import PLAN, merge_dims, shape_plan

__all__ = ["export_onnx", "export_onnx_symbol"]



# ----------------------------------------------------------------------------- public API

def export_onnx(net: Any, example_inputs: Any, path: Optional[Path] = None,
                opset: int = DEFAULT_OPSET, *,
                dynamic_axes: Optional[Dict[str, Dict[int, str]]] = None,
                input_names: Optional[Sequence[str]] = None,
                output_names: Optional[Sequence[str]] = None) -> onnx.ModelProto:
    """Export the hybridized ``net`` as a standard ONNX model; save it to ``path`` if given.

    ``example_inputs``: the arrays (NDArray or numpy) ``net`` is called with, a single one or a
    (nested) list; ``net`` is run on them once.  ``dynamic_axes`` marks axes whose size may
    differ from the example's, torch-style: ``{input: [axis, ...]}`` or ``{input: {axis:
    "dim_name"}}``, ``input`` being a name or a position (e.g. ``{0: [0]}`` for the time axis
    of a foreach over the first input).  ONNX inputs are named ``input_names`` (default
    MXNet's ``data`` / ``data0``, ``data1``, ...), outputs ``output_names`` (default MXNet's
    output names).  Returns the ``onnx.ModelProto``, checked with ``full_check=True``.

    ``cond`` becomes ONNX ``If``, ``foreach`` ``Scan`` and ``while_loop`` ``Loop``; any ONNX
    runtime runs the model. Recursion whose structure comes from integer inputs (TreeLSTM,
    TreeRNN, RNTN: the tree arrays decide every call) becomes loops over the levels of the
    call trees, standard ONNX too; other recursion raises ``NotImplementedError`` naming the
    function and why, and :func:`save_artifact` exports it.

    >>> import mxnet as mx, numpy as np, onnxruntime, gluon_cf
    >>> from gluon_cf.export import export_onnx
    >>> class Gate(mx.gluon.HybridBlock):
    ...     def hybrid_forward(self, F, x):
    ...         return gluon_cf.cond(x.sum() > 0, lambda: x * 2, lambda: -x)
    >>> net = Gate()
    >>> net.hybridize()
    >>> model = export_onnx(net, [np.ones((2, 3), np.float32)], "gate.onnx")
    >>> [node.op_type for node in model.graph.node if node.op_type == "If"]
    ['If']
    >>> session = onnxruntime.InferenceSession("gate.onnx", providers=["CPUExecutionProvider"])
    >>> session.run(None, {"data": -np.ones((2, 3), np.float32)})[0]
    array([[1., 1., 1.],
           [1., 1., 1.]], dtype=float32)
    """
    check_opset("export_onnx", opset)
    sym, params, inputs, ranks = _net_symbol(net, example_inputs, "export_onnx")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            return export_onnx_symbol(sym, params, inputs, path, opset,
                                      dynamic_axes=dynamic_axes, input_names=input_names,
                                      output_names=output_names, _output_ranks=ranks)
    except (NotImplementedError, ValueError) as err:
        # (a ValueError of the shape plan names a node too: NOTE [growths a model takes])
        where = None if type(err) not in (NotImplementedError, ValueError) else \
            _node_location(net, example_inputs, getattr(err, NODE_OF_ERROR, None))
        if where is None or str(err).startswith(where):
            raise
        raise type(err)(f"{where}: {err}") from None
    finally:
        _warn_again(caught, net, example_inputs)


def _warn_again(caught, net, example_inputs):
    """The warnings of a conversion, those about a node led by the user's line."""
    for record in caught:
        message = record.message
        if isinstance(message, ExportTieWarning):
            where = _node_location(net, example_inputs, message.node_name)
            if where is not None and not str(message).startswith(where):
                message = ExportTieWarning(f"{where}: {message}")
            warnings.warn(message, stacklevel=3)
        else:
            warnings.warn_explicit(message, record.category, record.filename, record.lineno)


def _node_location(net, example_inputs, node_name):
    """``"file:line"`` of the user's code that created the MXNet node ``node_name`` of
    ``net``'s graph, or None (NOTE [source locations] in gluon_cf/tracing.py).  Only nodes
    made inside a gluon_cf trace carry their line; for the others, ``net``'s graph is built
    again with every node stamped (its names come out the same: each block's name scope
    counts from zero)."""
    if node_name is None:
        return None
    count = len(_flatten_inputs(example_inputs))
    positions = iter(range(count))

    def symbols(value):   # as HybridBlock._get_graph names them
        if isinstance(value, (list, tuple)):
            return [symbols(item) for item in value]
        k = next(positions)
        return mx.sym.var("data" if count == 1 else f"data{k}")
    args = example_inputs if isinstance(example_inputs, (list, tuple)) else [example_inputs]
    try:
        with _StampingScope(), net.name_scope():
            out = net.hybrid_forward(mx.sym, *symbols(args),
                                     **{name: p.var() for name, p in net._reg_params.items()})
    except Exception:  # noqa: BLE001 - a location is a help; the export's error stands
        return None
    nodes = json.loads(mx.sym.Group(_flat_symbols(out)).tojson())["nodes"]
    for node in nodes:
        if node["name"] == node_name:
            return node.get("attrs", {}).get(SOURCE_ATTR)
    # an ONNX helper node's name: the MXNet node's with a suffix, the longest such
    prefixes = [n for n in nodes if n["op"] != "null" and node_name.startswith(n["name"])]
    if prefixes:
        return max(prefixes, key=lambda n: len(n["name"])).get("attrs", {}).get(SOURCE_ATTR)
    return None


def _flat_symbols(value):
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in _flat_symbols(item)]
    return [value]


class _StampingScope(AttrScope):
    """Stamps every node created under it with the user's source line (as a gluon_cf trace
    does, NOTE [source locations])."""

    def get(self, attr):
        attrs = dict(super().get(attr))
        where = user_location(2)
        if where is not None:
            attrs.setdefault(SOURCE_ATTR, where)
        return attrs


def check_opset(api, opset):
    """A ValueError naming ``api`` unless mx2onnx converts to ``opset``: before anything runs
    (at opset 11 it blamed the model's first node, "mx2onnx has no converter for '_zeros' at
    opset 11", and at 15 named an inner function, symbol_to_onnx_graph)."""
    if opset not in SUPPORTED_OPSETS:
        raise ValueError(f"{api}: opset {opset} is not supported; mx2onnx has converters for "
                         f"opsets {list(SUPPORTED_OPSETS)} only (default {DEFAULT_OPSET})")


def _net_symbol(net, example_inputs, api):
    """Run the hybridized ``net`` once on ``example_inputs`` and return its exported graph:
    ``(symbol, params, [(mxnet_name, shape, dtype) per data input], output ranks)``; the
    ranks of that run are what ONNX is told for outputs of run-time shape."""
    if not isinstance(net, mx.gluon.HybridBlock):
        raise TypeError(f"{api}: net must be a gluon HybridBlock, got {type(net).__name__}")
    # (a SymbolBlock, as SymbolBlock.imports returns, always runs its graph: hybridize() or
    # not, MXNet 1.9.1 calls its CachedOp, so it needs no hybridize() to be exported)
    symbol_block = isinstance(net, mx.gluon.SymbolBlock)
    if not net._active and not symbol_block:
        raise ValueError(f"{api}: net is not hybridized; call net.hybridize() first (the "
                         f"exported model is made from the hybridized graph)")
    flat_inputs = [_as_numpy(x) for x in _flatten_inputs(example_inputs, api)]
    with mx.autograd.predict_mode():
        call_args = example_inputs if isinstance(example_inputs, (list, tuple)) \
            else [example_inputs]
        outputs = _flatten_inputs(net(*[_to_nd(x) for x in call_args]))
    # (the example call's own outputs: mx.nd.waitall() raised the failure of any earlier
    # call whose result was never read, so export depended on the block's history)
    for output in outputs:
        output.wait_to_read()
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "net")
        net.export(prefix)
        sym = mx.sym.load(prefix + "-symbol.json")
        params = mx.nd.load(prefix + "-0000.params")
    mx_names = ["data"] if len(flat_inputs) == 1 else \
        [f"data{k}" for k in range(len(flat_inputs))]
    if symbol_block:   # (its inputs keep the names its file gave them)
        mx_names = [s.name for s in net._cached_graph[0]]
    return (sym, params, [(name, x.shape, x.dtype) for name, x in zip(mx_names, flat_inputs)],
            [len(o.shape) for o in outputs])


def export_onnx_symbol(sym: Any, params: Optional[Dict[str, Any]], inputs: Sequence[Any],
                       path: Optional[Path] = None, opset: int = DEFAULT_OPSET, *,
                       dynamic_axes: Optional[Dict[str, Dict[int, str]]] = None,
                       input_names: Optional[Sequence[str]] = None,
                       output_names: Optional[Sequence[str]] = None,
                       _output_ranks: Optional[Sequence[Optional[int]]] = None
                       ) -> onnx.ModelProto:
    """Export an MXNet symbol that may contain gluon_cf nodes (e.g. loaded from
    ``net.export`` files) with ``params`` (name -> array; ``arg:``/``aux:`` prefixes allowed).

    ``inputs``: ``(mxnet_name, example_shape, dtype)`` per data input, in ONNX input order.
    The other arguments are those of :func:`export_onnx`.

    >>> import mxnet as mx, numpy as np, gluon_cf
    >>> from gluon_cf.export import export_onnx_symbol
    >>> class Gate(mx.gluon.HybridBlock):
    ...     def hybrid_forward(self, F, x):
    ...         return gluon_cf.cond(x.sum() > 0, lambda: x * 2, lambda: -x)
    >>> net = Gate()
    >>> net.hybridize()
    >>> _ = net(mx.nd.ones((2, 3)))
    >>> net.export("gate")                   # gate-symbol.json, gate-0000.params
    >>> symbol = mx.sym.load("gate-symbol.json")
    >>> params = mx.nd.load("gate-0000.params")
    >>> model = export_onnx_symbol(symbol, params, [("data", (2, 3), np.float32)],
    ...                            dynamic_axes={"data": {0: "rows"}})
    >>> [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    ['rows', 3]
    """
    check_opset("export_onnx_symbol", opset)
    graph = _convert_symbol(sym, params, inputs, opset, dynamic_axes, input_names,
                            output_names, onnx_kinds(), _output_ranks)
    model = make_onnx_model(graph, opset)
    record_index_bounds(model, sym, inputs, input_names)
    if _has_recursion(json.loads(sym.tojson())):
        props = {p.key: p.value for p in model.metadata_props}
        props[RECURSION_KEY] = RECURSION_LOWERED
        helper.set_model_props(model, props)
    if path is not None:
        onnx.save(model, str(path))
    return model


RECURSION_LOWERED = ("lowered to standard ONNX Loops, level by level over the call trees "
                     "(no gluon_cf or MXNet needed to run it)")


def _has_recursion(graph_json):
    stack = [graph_json]
    while stack:
        for node in stack.pop()["nodes"]:
            kind = registry.kind_of(node)
            if kind == "recursion":
                return True
            if kind is not None:
                stack += [json.loads(g["json"])
                          for g in json.loads(node["attrs"]["spec"])["graphs"].values()]
    return False


def _convert_symbol(sym, params, inputs, opset, dynamic_axes, input_names, output_names,
                    kinds, output_ranks=None, varying_ranks=False):
    """The main ONNX graph of :func:`export_onnx_symbol` (gluon_cf nodes of ``kinds`` allowed;
    their converters must be registered). ``varying_ranks``: an output whose rank depends on a
    cond's branch declares the example's (save_artifact's runtime runs any rank); else it is
    refused (NOTE [outputs of varying rank])."""
    mx_names = [name for name, _, _ in inputs]
    onnx_names = list(input_names) if input_names is not None else list(mx_names)
    if len(onnx_names) != len(mx_names):
        raise ValueError(f"export_onnx: got {len(onnx_names)} input_names for "
                         f"{len(mx_names)} inputs {mx_names}")
    examples = {name: (tuple(int(d) for d in shape), np.dtype(dtype))
                for name, shape, dtype in inputs}
    dims = _dynamic_dims(dynamic_axes, mx_names, onnx_names, examples)
    outputs = sym.list_outputs()
    # an output that is an input itself (a block returning its input) gets a name of its own
    output_names = [f"{name}_output" if name in onnx_names else name
                    for name in _unique(outputs)] if output_names is None else list(output_names)
    if len(output_names) != len(outputs):
        raise ValueError(f"export_onnx: got {len(output_names)} output_names for the "
                         f"{len(outputs)} outputs of the model {outputs}")
    # (an ONNX graph names each value once: a repeated name was the ONNX checker's refusal,
    # "Graph must be in single static assignment (SSA) form", as a NotImplementedError)
    repeated = sorted({n for n in onnx_names + output_names
                       if (onnx_names + output_names).count(n) > 1})
    if repeated:
        raise ValueError(f"export_onnx: input_names and output_names must name each input and "
                         f"output once; repeated: {repeated}")
    params = {name.split(":", 1)[-1]: value for name, value in (params or {}).items()}
    _check_convertible(json.loads(sym.tojson()), "the model", opset, kinds)

    plan, out_shapes, conds_read = shape_plan(sym, params, examples, dims)
    _check_dtypes(sym, params, examples)
    specs = [(name, tuple(dims[name].get(axis, d) for axis, d in enumerate(shape)), dtype)
             for name, (shape, dtype) in examples.items()]
    token = PLAN.set(plan)
    try:
        # Silence what MXNet prints: a traceback for every failed shape inference of a Custom
        # node (expected with dynamic dims, e.g. in recursive function bodies) and mx2onnx's
        # debugging prints (NOTE [mx2onnx pitfalls]).
        with contextlib.redirect_stdout(io.StringIO()):
            converted = symbol_to_onnx_graph(sym, params, specs, output_names, "main", opset,
                                             input_names=onnx_names)
    finally:
        PLAN.reset(token)
    ranks = output_ranks or [None] * len(out_shapes)
    for output_info, spec, planned, rank, conds in zip(
            converted.graph.output, converted.outputs, out_shapes, ranks, conds_read):
        shape = merge_dims(spec.shape, planned)
        if shape is None and conds and not varying_ranks:
            _refuse_varying_rank(spec.name, conds, opset)
        if shape is None and rank is not None:   # a run-time shape: the example run's rank
            shape = (None,) * rank
        if shape is None:
            raise ValueError(
                f"export_onnx: output {spec.name!r} has a shape known only at run time, and "
                f"neither ONNX's shape inference nor MXNet's gives its rank, which an ONNX "
                f"model output must declare; export the block with export_onnx(net, ...), "
                f"which takes the rank from a run on the example inputs")
        output_info.CopyFrom(helper.make_tensor_value_info(
            spec.name, helper.np_dtype_to_tensor_dtype(spec.dtype), shape))
    return converted.graph


def _refuse_varying_rank(name, conds, opset):
    """Refuses model output ``name``, computed from ``conds`` (branches of different ranks).

    NOTE [outputs of varying rank]
    A cond whose branches return different ranks runs (as MXNet's), and ONNX's If may too
    (its branches' outputs need not agree in shape, and a subgraph's outputs need declare
    none); a value computed from it inside the model exports as a value of unknown rank. But a
    model output must declare a rank: onnx.checker requires a shape on every tensor output of
    the main graph (its dims may be unknown, its rank may not), and the one type of unknown
    rank it accepts there, optional(tensor), needs opset 15 (mx2onnx converts 12 and 13).
    Declaring the example's rank made onnxruntime warn on every run taking the other branch
    and told every other consumer of the model a wrong rank, so such an output is refused at
    the cond's line; save_artifact's outputs may change rank, and export it. An output MXNet
    cannot infer but of one rank whichever branch runs (``F.max(F.reshape(c, (-1, 3)),
    axis=1)``) is not refused: its shape is inferred with the cond's outputs taken from each
    branch in turn (``registry.COND_BRANCH_SHAPES``; one top-level cond, else refused)."""
    source, node_name, k, then_rank, else_rank = conds[0]
    where = f"{source}: " if source else ""
    refusal = NotImplementedError(
        f"{where}export_onnx: model output {name!r} has a rank that depends on which branch "
        f"of this cond runs (its then_func returns output {k} of rank {then_rank}, its "
        f"else_func of rank {else_rank}), and an ONNX model output must declare one rank "
        f"(onnx.checker requires it at opset {opset}); make both branches return the same "
        f"rank (e.g. reshape one of them), or export with save_artifact, whose outputs may "
        f"change rank")
    setattr(refusal, NODE_OF_ERROR, node_name)   # export_onnx finds a top-level cond's line
    raise refusal


def _check_dtypes(sym, params, examples):
    """MXNet's type inference must accept the inputs' and parameters' dtypes: a parameter
    file holding an int32 weight where the graph computes in float32 exported a model that
    onnxruntime rejects when it runs (the MXNet model refuses it at once)."""
    known = set(sym.list_inputs())
    dtypes = {name: dtype for name, (_, dtype) in examples.items() if name in known}
    dtypes.update((name, value.dtype) for name, value in params.items() if name in known)
    try:
        sym.infer_type_partial(**dtypes)
    except mx.MXNetError as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        useful = [line for line in lines if not line.startswith(("Traceback", "File \"", "["))]
        raise ValueError(f"export_onnx: the dtypes of the inputs and parameters do not fit "
                         f"the model: {mxnet_message((useful or lines or [''])[0])}") from None


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

def _flatten_inputs(value, api="export_onnx"):
    """The arrays of ``value``, nested lists flattened; ``api``, the function called, names
    a refusal."""
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in _flatten_inputs(item, api)]
    if isinstance(value, (mx.nd.NDArray, np.ndarray)):
        return [value]
    raise TypeError(f"{api}: example_inputs must be NDArrays or numpy arrays (or lists "
                    f"of them), got {type(value).__name__}")


def _as_numpy(x):
    return x.asnumpy() if isinstance(x, mx.nd.NDArray) else np.asarray(x)


def _to_nd(x):
    if isinstance(x, (list, tuple)):
        return [_to_nd(item) for item in x]
    return x if isinstance(x, mx.nd.NDArray) else mx.nd.array(x, dtype=np.asarray(x).dtype)


def _unique(names):
    seen: Dict[str, int] = {}
    result = []
    for name in names:
        seen[name] = seen.get(name, -1) + 1
        result.append(name if seen[name] == 0 else f"{name}_{seen[name]}")
    return result


def _dynamic_dims(dynamic_axes, mx_names, onnx_names, examples):
    """mxnet input name -> {axis: None or dim name} from the torch-style ``dynamic_axes``."""
    dims: Dict[str, Dict[int, Optional[str]]] = {name: {} for name in mx_names}
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

# MXNet's own control-flow operators: gluon_cf's, of the same signature, export
_MXNET_CONTROL_FLOW = {
    op: f" (MXNet's F.contrib.{name}: call gluon_cf.{name} instead, the same signature, "
        f"which exports as ONNX {onnx_op})"
    for op, name, onnx_op in (("_foreach", "foreach", "Scan"),
                              ("_while_loop", "while_loop", "Loop"), ("_cond", "cond", "If"))}


# MXNet's registered names of the operators under F's namespaces (``_linalg_gemm2``)
_NAMESPACES = (("_contrib_", "contrib"), ("_linalg_", "linalg"), ("_random_", "random"),
               ("_image_", "image"), ("_sparse_", "sparse"))


def _called_as(op):
    """How the user calls MXNet operator ``op`` from hybrid_forward (``_eye``: ``F.eye``,
    ``_linalg_gemm2``: ``F.linalg.gemm2``) where that is not ``op`` itself, else ''."""
    for prefix, namespace in _NAMESPACES:
        if op.startswith(prefix):
            name = op[len(prefix):]
            return f"F.{namespace}.{name}" if hasattr(getattr(mx.sym, namespace), name) \
                else ""
    name = op.lstrip("_")
    return f"F.{name}" if name != op and hasattr(mx.sym, name) else ""   # (F.op: as named)


def _check_convertible(graph_json, where, opset, kinds):
    """Fail before converting anything if some node, at any nesting level, has no ONNX form
    (gluon_cf nodes: only those of ``kinds``)."""
    for node in graph_json["nodes"]:
        op = node["op"]
        if op == "null":
            continue
        kind = registry.kind_of(node)
        if kind is None and op != "Custom" and not _has_mx2onnx_converter(op, opset):
            raise _naming(node, NotImplementedError(
                f"{source_prefix(node)}export_onnx: node {node['name']!r} (MXNet op {op!r}"
                f"{_called_as(op) and ', ' + _called_as(op)}) "
                f"in {where} cannot be converted: mx2onnx has no converter for {op!r} at "
                f"opset {opset}{_MXNET_CONTROL_FLOW.get(op, '')}"))
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


def _naming(node, error):
    """``error``, knowing the MXNet node it is about (export_onnx adds the user's line)."""
    setattr(error, NODE_OF_ERROR, node["name"])
    return error


def _has_mx2onnx_converter(op, opset):
    return any(op in MXNetGraph.registry_.get(version, {}) for version in range(12, opset + 1))


# ----------------------------------------------------------------------------- export rules

def onnx_kinds():
    """The op kinds standard ONNX can express: those whose rule has ``to_onnx``."""
    return tuple(k for k in registry.kinds() if getattr(registry.rule_of(k), "to_onnx", None))


def _register_export_rules(rule):
    """Each op's export rule (in its op file) converts its nodes: ``to_onnx`` for standard ONNX,
    ``to_artifact`` where artifacts have a form of their own (recursion)."""
    to_onnx, to_artifact = getattr(rule, "to_onnx", None), getattr(rule, "to_artifact", None)
    if to_onnx is not None and to_artifact is not None:
        def either(node):   # save_artifact keeps the artifact's own form (recursion)
            return (to_artifact if SIGNATURES.get() is not None else to_onnx)(node)
        register_custom_converter(registry.op_type(rule.kind), either)
    elif to_onnx is not None or to_artifact is not None:
        register_custom_converter(registry.op_type(rule.kind), to_onnx or to_artifact)


registry.on_register(_register_export_rules)
