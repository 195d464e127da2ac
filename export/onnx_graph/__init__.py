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

See NOTE [mx2onnx pitfalls] (``mx2onnx_fixes.py``) before writing a converter. The rooms: ``specs``
(the public types), ``variables`` (where each input variable comes from), ``conversion`` (node by
node through mx2onnx), ``renaming`` (per-graph prefixes), ``custom`` (Custom nodes),
``mx2onnx_fixes`` (what mx2onnx lacks), ``mx2onnx_added`` and ``mx2onnx_layers`` (ops mx2onnx lacks
or gets silently wrong, over ``mx2onnx_kit``), ``runtime_kernels`` (each node's MXNet node and line,
onnxruntime's kernels), ``model`` (checked ONNX models).
"""
from .conversion import symbol_to_onnx_graph
from .custom import register_custom_converter
from .model import (check_exported_model, export_symbol_onnx, make_onnx_model,
                    remove_unused_initializers)
from .runtime_kernels import unstamp
from .specs import (DEFAULT_OPSET, SUPPORTED_OPSETS, CustomOpNode, OnnxGraph, ValueSpec,
                    value_info)
# For the export rules and onnx_export: how an export error names its node and the user's line.
from .specs import NODE_OF_ERROR, source_prefix  # noqa: F401
from .variables import params_to_initializers
from .mx2onnx_added import ExportTieWarning

__all__ = [
    "DEFAULT_OPSET", "SUPPORTED_OPSETS", "ValueSpec", "OnnxGraph", "CustomOpNode",
    "register_custom_converter", "symbol_to_onnx_graph", "export_symbol_onnx",
    "make_onnx_model", "params_to_initializers", "remove_unused_initializers", "value_info",
    "ExportTieWarning", "check_exported_model", "unstamp",
]
