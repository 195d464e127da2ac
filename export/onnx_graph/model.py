"""Converted graphs made into ONNX models: ``export_symbol_onnx`` (a symbol with its parameters
to a checked model file), ``make_onnx_model`` (simplified, NOTE [simplifying exported graphs],
without unused initializers, checked) and ``remove_unused_initializers``."""
import onnx
from onnx import helper

from ..onnx_simplify import simplify
from .conversion import symbol_to_onnx_graph
from .runtime_kernels import check_runtime_kernels, rejection, unstamp
from .specs import DEFAULT_OPSET, _check_opset, _value_spec


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
        check_exported_model(model)
    unstamp(model.graph)
    return model


def check_exported_model(model):
    """``check_model(full_check=True)`` on ``model``, whose nodes are stamped with their MXNet
    nodes (``runtime_kernels.stamp``), then onnxruntime's kernels for each (NOTE [onnxruntime
    kernels]); a node either refuses is a NotImplementedError at the user's line."""
    try:
        onnx.checker.check_model(model, full_check=True)
        if check_runtime_kernels(model):
            onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        raise rejection(err, model) from None


def remove_unused_initializers(graph):
    """Drop, in ``graph`` and every subgraph, the initializers and ``Constant`` nodes no node,
    nested subgraph or output reads (constant folding in mx2onnx's converters leaves the folded
    parameter behind, and onnxruntime warns about each one).  An initializer that is also a graph
    input stays: it is that input's default value.  Returns the names removed, as
    ``graph/...:name``."""
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

