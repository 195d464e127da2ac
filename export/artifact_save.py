"""Saving artifacts: :func:`save_artifact`, MXNet graphs with ``recursion`` / ``invoke`` nodes ->
ONNX with ``Recursion`` / ``Invoke`` nodes in the ``ai.gluon_cf`` domain (format: NOTE [artifact
format] in ``artifact_format.py``).

Everything but the two recursion nodes is converted by ``onnx_export`` (mx2onnx for ordinary
ops, If / Scan / Loop for cond / foreach / while_loop); this module adds the two converters.

NOTE [function signatures at conversion]
    A function graph declares its formal inputs ``[*args, *environment]`` with dtypes, and every
    ``Invoke`` its output dtypes.  The environment's dtypes are the recursion node's input
    dtypes and the entry function's argument dtypes its first inputs'.  The argument dtypes of
    the other functions (mutual recursion) are those their call sites pass, which we only see
    while converting the callers: so functions are converted in call order, entry first, each
    once its first call site has been converted.  Output dtypes come from MXNet's type
    inference through gluon_cf's function table; at the end every ``Invoke`` is checked
    against the graph it calls.  Shapes come from the export's shape plan
    (``onnx_export._collect_function_shapes``), dims that differ between calls or with the
    dynamic axes being ``None``.
"""
import contextvars
import json
import os

import numpy as np
import onnx
from onnx import helper

from gluon_cf import registry

from .artifact_format import DOMAIN, DOMAIN_VERSION, FORMAT, FORMAT_VERSION
from .onnx_export import _convert_symbol, _net_symbol, _Node, record_index_bounds
from .onnx_graph import DEFAULT_OPSET, ValueSpec, register_custom_converter

KINDS = ("cond", "foreach", "while_loop", "recursion", "invoke")


class _Signatures:
    """What the conversion learns about functions (NOTE [function signatures at conversion])."""

    def __init__(self):
        self.arg_dtypes = {}   # qname -> [dtype per argument], from the first call converted
        self.calls = []        # (qname, invoke node name, [output dtypes]) per Invoke
        self.outputs = {}      # qname -> [output dtype], once converted
        self.names = {}        # qname -> the Python name of the function


_SIGNATURES = contextvars.ContextVar("gluon_cf_artifact_signatures", default=None)


def save_artifact(net_or_symbol_files, example_inputs, path, *, dynamic_axes=None,
                  input_names=None, output_names=None, opset=13):
    """Save a gluon_cf model, recursive or not, as an artifact at ``path``; returns the
    ``onnx.ModelProto``.

    ``net_or_symbol_files``: a hybridized ``HybridBlock`` (run once on ``example_inputs``), or
    the pair ``(symbol_json_path, params_path)`` written by ``net.export()``.  For a block,
    ``example_inputs`` are its arrays; for files, a list of arrays (or ``(shape, dtype)``
    pairs) for the symbol's data inputs ``data`` / ``data0``, ``data1``, ... in order, or a
    dict from those names.  ``dynamic_axes``, ``input_names``, ``output_names`` and ``opset``
    are those of :func:`gluon_cf.export.export_onnx`; give ``dynamic_axes`` for every axis
    whose size changes between calls (e.g. the node axis of tree inputs), since :func:`load`
    enforces the other declared dims.
    """
    if isinstance(net_or_symbol_files, (tuple, list)):
        sym, params, inputs = _symbol_files(net_or_symbol_files, example_inputs)
    else:
        sym, params, inputs = _net_symbol(net_or_symbol_files, example_inputs, "save_artifact")
    model = convert(sym, params, inputs, opset, dynamic_axes=dynamic_axes,
                                      input_names=input_names, output_names=output_names)
    onnx.save(model, os.fspath(path))
    return model


def _symbol_files(files, example_inputs):
    """``(symbol, params, [(name, shape, dtype)])`` from ``net.export()`` files."""
    import mxnet as mx

    if len(files) != 2:
        raise ValueError(f"save_artifact: give a HybridBlock or (symbol_json_path, params_path),"
                         f" got {len(files)} paths")
    sym = mx.sym.load(os.fspath(files[0]))
    params = mx.nd.load(os.fspath(files[1]))
    param_names = {name.split(":", 1)[-1] for name in params}
    data_names = sorted((n for n in sym.list_inputs() if n not in param_names),
                        key=lambda n: (len(n), n))
    if isinstance(example_inputs, dict):
        unknown = sorted(set(example_inputs) - set(data_names))
        missing = [n for n in data_names if n not in example_inputs]
        if unknown or missing:
            raise ValueError(f"save_artifact: the symbol's data inputs are {data_names}; "
                             f"missing {missing}, unknown {unknown}")
        examples = [(n, example_inputs[n]) for n in data_names]
    else:
        if len(example_inputs) != len(data_names):
            raise ValueError(f"save_artifact: the symbol has {len(data_names)} data inputs "
                             f"{data_names}, got {len(example_inputs)} example inputs")
        examples = list(zip(data_names, example_inputs))
    inputs = []
    for name, value in examples:
        if isinstance(value, tuple) and len(value) == 2 and not hasattr(value, "shape"):
            shape, dtype = value
        else:
            value = value.asnumpy() if hasattr(value, "asnumpy") else np.asarray(value)
            shape, dtype = value.shape, value.dtype
        inputs.append((name, tuple(shape), np.dtype(dtype)))
    return sym, params, inputs


def convert(sym, params, inputs, opset=DEFAULT_OPSET, *, dynamic_axes=None, input_names=None,
            output_names=None):
    """The artifact ModelProto of ``sym`` (see ``onnx_export.export_onnx_symbol`` for the
    arguments); checked with ``onnx.checker``."""
    signatures = _Signatures()
    token = _SIGNATURES.set(signatures)
    try:
        graph = _convert_symbol(sym, params, inputs, opset, dynamic_axes, input_names,
                                output_names, KINDS)
    finally:
        _SIGNATURES.reset(token)
    for qname, node_name, dtypes in signatures.calls:
        declared = signatures.outputs.get(qname)
        if declared is not None and [np.dtype(d) for d in dtypes] != declared:
            raise ValueError(f"save_artifact: call {node_name!r} of {signatures.names[qname]!r} "
                             f"expects outputs of dtypes {[str(d) for d in dtypes]}, but the "
                             f"function returns {[str(d) for d in declared]}")
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, DOMAIN_VERSION)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="gluon_cf",
                              ir_version=helper.find_min_ir_version_for(opsets[:1]))
    helper.set_model_props(model, {"format": FORMAT, "format_version": FORMAT_VERSION})
    record_index_bounds(model, sym, inputs, input_names)
    onnx.checker.check_model(model)
    return model


# ----------------------------------------------------------------------------- converters

class _Function(_Node):
    """One function of a recursion node: its slots are ``[*its args, *environment]``."""

    def __init__(self, custom_node, slot_specs):
        super().__init__(custom_node, "recursion")
        self.slot_specs = slot_specs  # [(shape or None, dtype)] per slot

    def slot(self, k, onnx_name=None):
        shape, dtype = self.slot_specs[k]
        return ValueSpec(onnx_name or f"_gluon_cf_slot{k}", shape, dtype)


def _convert_recursion(custom_node):
    """recursion -> Recursion(*entry_args, *environment) holding the function graphs."""
    signatures = _signatures()
    node = _Node(custom_node, "recursion")
    spec = node.spec
    num_args, entry, functions = spec["num_args"], spec["entry"], spec["graphs"]
    env = [(shape, dtype) for shape, dtype in zip(node.in_shapes[num_args:],
                                                  custom_node.input_dtypes[num_args:])]
    for qname, function in functions.items():
        signatures.names[qname] = function["name"]
    signatures.arg_dtypes.setdefault(entry, list(custom_node.input_dtypes[:num_args]))

    graphs = {}
    while len(graphs) < len(functions):
        ready = [q for q in functions if q not in graphs and q in signatures.arg_dtypes]
        if not ready:
            missing = [functions[q]["name"] for q in functions if q not in graphs]
            raise ValueError(f"save_artifact: recursion node {node.name!r}: functions {missing} "
                             f"are in its table but no converted call reaches them")
        for qname in ready:
            graphs[qname] = _convert_function(custom_node, qname, functions[qname], env,
                                              signatures)
    order = [entry] + [q for q in functions if q != entry]
    onnx_node = helper.make_node(
        "Recursion", list(custom_node.inputs), list(custom_node.outputs),
        name=node.fresh("Recursion"), domain=DOMAIN, entry=entry,
        functions=[graphs[q] for q in order],
        num_args=[functions[q]["num_args"] for q in order],
        max_depth=[functions[q]["max_depth"] for q in order],
        function_names=[functions[q]["name"] for q in order])
    return [onnx_node], signatures.outputs[entry]


def _convert_function(custom_node, qname, function, env, signatures):
    num_args = function["num_args"]
    arg_dtypes = signatures.arg_dtypes[qname]
    if len(arg_dtypes) != num_args:
        raise ValueError(f"save_artifact: {function['name']!r} takes {num_args} arguments but "
                         f"is called with {len(arg_dtypes)}")
    planned = (_plan().get(("function", qname)) or ([None] * num_args, None))[0]
    slot_specs = list(zip(planned, arg_dtypes)) + env
    converted = _Function(custom_node, slot_specs).convert(
        qname, qname, formal=range(len(slot_specs)))
    converted.graph.name = qname
    signatures.outputs[qname] = [np.dtype(v.dtype) for v in converted.outputs]
    return converted.graph


def _convert_invoke(custom_node):
    """invoke -> Invoke(*args), attribute ``function``: the callee's qualified name."""
    signatures = _signatures()
    spec = json.loads(custom_node.attrs["spec"])
    qname = spec["function"]
    dtypes = list(custom_node.input_dtypes)
    known = signatures.arg_dtypes.setdefault(qname, dtypes)
    if [np.dtype(d) for d in known] != [np.dtype(d) for d in dtypes]:
        raise ValueError(f"save_artifact: call {custom_node.name!r} passes arguments of dtypes "
                         f"{[str(d) for d in dtypes]} to {qname!r}, another call "
                         f"{[str(d) for d in known]}; every call must pass the same dtypes")
    out_dtypes = custom_node.output_dtypes
    if out_dtypes is None or any(d is None for d in out_dtypes):
        out_dtypes = signatures.outputs.get(qname)
    if out_dtypes is None:
        raise ValueError(f"save_artifact: MXNet cannot infer the output dtypes of call "
                         f"{custom_node.name!r} of {qname!r}")
    signatures.calls.append((qname, custom_node.name, list(out_dtypes)))
    onnx_node = helper.make_node("Invoke", list(custom_node.inputs), list(custom_node.outputs),
                                 name=f"{custom_node.name}/Invoke", domain=DOMAIN,
                                 function=qname)
    return [onnx_node], list(out_dtypes)


def _signatures():
    signatures = _SIGNATURES.get()
    if signatures is None:
        raise ValueError("gluon_cf recursion nodes are converted by save_artifact only; "
                         "export_onnx produces standard ONNX, which has no recursion")
    return signatures


def _plan():
    from .onnx_export import _PLAN
    return _PLAN.get() or {}


register_custom_converter(registry.op_type("recursion"), _convert_recursion)
register_custom_converter(registry.op_type("invoke"), _convert_invoke)
