"""Saving artifacts: :func:`save_artifact`, MXNet graphs with ``recursion`` / ``invoke`` nodes ->
ONNX with ``Recursion`` / ``Invoke`` nodes in the ``ai.gluon_cf`` domain (format: NOTE [artifact
format] in ``artifact_format.py``).

Every node is converted by ``onnx_export`` (mx2onnx for ordinary ops) and the gluon_cf ops'
export rules in their op files (If / Scan / Loop for cond / foreach / while_loop, Recursion /
Invoke for the recursion ops, whose kit is ``artifact_kit.py``); this module runs the
conversion with the function signatures it collects, and checks them.
"""
import os
import re
from typing import Any, Dict, Optional, Sequence

import numpy as np
import onnx
from onnx import helper

from gluon_cf import registry
from gluon_cf._typing import Path
from gluon_cf.symbol_entries import check_symbol_file_contents, load_parameter_file

from .artifact_format import DOMAIN, DOMAIN_VERSION, FORMAT, FORMAT_VERSION
from .artifact_kit import SIGNATURES, Signatures
from .onnx_export import (_convert_symbol, _net_symbol, _node_location, check_opset,
                          record_index_bounds)
from .onnx_graph import (DEFAULT_OPSET, NODE_OF_ERROR, check_exported_model,
                         remove_unused_initializers, unstamp)


def artifact_kinds():
    """The op kinds an artifact can express: those with an export rule."""
    return tuple(k for k in registry.kinds() if getattr(registry.rule_of(k), "to_onnx", None)
                 or getattr(registry.rule_of(k), "to_artifact", None))




def save_artifact(net_or_symbol_files: Any, example_inputs: Any, path: Path, *,
                  dynamic_axes: Optional[Dict[str, Dict[int, str]]] = None,
                  input_names: Optional[Sequence[str]] = None,
                  output_names: Optional[Sequence[str]] = None,
                  opset: int = 13) -> onnx.ModelProto:
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

    Example: a recursive block, saved and run by the artifact runtime (which needs only numpy,
    onnx and onnxruntime, not MXNet or the block's class):

    >>> import mxnet as mx, numpy as np, gluon_cf
    >>> from gluon_cf.export import load, save_artifact
    >>> class SumTo(mx.gluon.HybridBlock):
    ...     def hybrid_forward(self, F, values, n):
    ...         @gluon_cf.recursive
    ...         def total(i):
    ...             return gluon_cf.cond(i < 1, lambda: F.take(values, i),
    ...                                  lambda: F.take(values, i) + total(i - 1))
    ...         return total(n)
    >>> net = SumTo()
    >>> net.hybridize()
    >>> _ = save_artifact(net, [mx.nd.array([1, 2, 3, 4]), mx.nd.array([3])], "sum_to.onnx")
    >>> load("sum_to.onnx")(np.array([1, 2, 3, 4], np.float32), np.array([2], np.float32))
    [array([6.], dtype=float32)]
    """
    check_opset("save_artifact", opset)
    ranks = None
    if isinstance(net_or_symbol_files, (tuple, list)):
        sym, params, inputs = _symbol_files(net_or_symbol_files, example_inputs)
    else:
        sym, params, inputs, ranks = _net_symbol(net_or_symbol_files, example_inputs,
                                                 "save_artifact")
    try:
        model = convert(sym, params, inputs, opset, dynamic_axes=dynamic_axes,
                        input_names=input_names, output_names=output_names,
                        output_ranks=ranks)
    except (NotImplementedError, ValueError) as err:
        if type(err) not in (NotImplementedError, ValueError):
            raise
        # the user's line that made the node, as export_onnx names it
        where = None if isinstance(net_or_symbol_files, (tuple, list)) else _node_location(
            net_or_symbol_files, example_inputs, getattr(err, NODE_OF_ERROR, None))
        text = str(err) if where is None or str(err).startswith(where) else f"{where}: {err}"
        # the conversion is export_onnx's: its refusals begin "export_onnx: " after the line,
        # which misled a user who called save_artifact
        text = _EXPORT_ONNX.sub(r"\1save_artifact: ", text, count=1)
        if text == str(err):
            raise
        raise type(err)(text) from None
    onnx.save(model, os.fspath(path))
    return model


# "export_onnx: " at the start of a message or after its "file:line: "
_EXPORT_ONNX = re.compile(r"^((?:[^\n]*?:\d+: )?)export_onnx: ")


def _symbol_files(files, example_inputs):
    """``(symbol, params, [(name, shape, dtype)])`` from ``net.export()`` files."""
    import mxnet as mx

    if len(files) != 2:
        raise ValueError(f"save_artifact: give a HybridBlock or (symbol_json_path, params_path),"
                         f" got {len(files)} paths")
    if not all(isinstance(f, (str, bytes, os.PathLike)) for f in files):
        # (a Symbol and its parameters: os.fspath's "expected str, ... not Symbol" said less)
        raise TypeError(f"save_artifact: give a HybridBlock or the paths (symbol_json_path, "
                        f"params_path) of the files net.export() writes, got a pair of "
                        f"{type(files[0]).__name__} and {type(files[1]).__name__}; to save a "
                        f"Symbol and its parameters, write them first (sym.save(json_path), "
                        f"mx.nd.save(params_path, {{'arg:' + name: array}}))")
    _check_file_examples(example_inputs)
    # Checked before MXNet reads it (NOTE [files are checked before MXNet reads them]).
    check_symbol_file_contents(os.fspath(files[0]))
    sym = mx.sym.load(os.fspath(files[0]))
    params = load_parameter_file(os.fspath(files[1]))
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


def _check_file_examples(example_inputs):
    """A TypeError saying what a symbol file's ``example_inputs`` must be, for a value that
    is none of them (a string, a single array: its len() counted letters or rows, and the
    refusal said "got 3 example inputs")."""
    def example(value):
        return hasattr(value, "shape") or (isinstance(value, tuple) and len(value) == 2)
    if isinstance(example_inputs, dict):
        values = list(example_inputs.values())
    elif isinstance(example_inputs, (list, tuple)):
        values = list(example_inputs)
    else:
        values = None
    if values is None or not all(example(v) for v in values):
        got = type(example_inputs).__name__ if values is None else ", ".join(
            type(v).__name__ for v in values)
        raise TypeError(f"save_artifact: example_inputs for symbol files must be a list of "
                        f"arrays (or (shape, dtype) pairs), one per data input of the symbol "
                        f"in order, or a dict from those inputs' names, got {got}")


def convert(sym, params, inputs, opset=DEFAULT_OPSET, *, dynamic_axes=None, input_names=None,
            output_names=None, output_ranks=None):
    """The artifact ModelProto of ``sym`` (see ``onnx_export.export_onnx_symbol`` for the
    arguments); checked with ``onnx.checker``."""
    signatures = Signatures()
    token = SIGNATURES.set(signatures)
    try:
        graph = _convert_symbol(sym, params, inputs, opset, dynamic_axes, input_names,
                                output_names, artifact_kinds(), output_ranks,
                                varying_ranks=True)
    finally:
        SIGNATURES.reset(token)
    for qname, node_name, dtypes in signatures.calls:
        declared = signatures.outputs.get(qname)
        if declared is not None and [np.dtype(d) for d in dtypes] != declared:
            raise ValueError(f"save_artifact: call {node_name!r} of {signatures.names[qname]!r} "
                             f"expects outputs of dtypes {[str(d) for d in dtypes]}, but the "
                             f"function returns {[str(d) for d in declared]}")
    remove_unused_initializers(graph)
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, DOMAIN_VERSION)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="gluon_cf",
                              ir_version=helper.find_min_ir_version_for(opsets[:1]))
    helper.set_model_props(model, {"format": FORMAT, "format_version": FORMAT_VERSION})
    record_index_bounds(model, sym, inputs, input_names)
    check_exported_model(model)     # NOTE [onnxruntime kernels]
    unstamp(model.graph)
    return model
