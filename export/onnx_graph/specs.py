"""What converted graphs are made of and how they are described: ``ValueSpec`` (a value's
name, shape and dtype), ``OnnxGraph`` (what ``symbol_to_onnx_graph`` returns), ``CustomOpNode``
(what a Custom-op converter is given), the supported opsets, value infos, and how an export
error names the MXNet node and the user's line it is about."""
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np
import onnx
from onnx import helper

from gluon_cf.operators import SOURCE_ATTR


DEFAULT_OPSET = 13
SUPPORTED_OPSETS = (12, 13)


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

# The attribute of an export error that names the MXNet node it is about, so that export_onnx
# can add the user's line where the node itself does not carry it.
NODE_OF_ERROR = "gluon_cf_node"

# Extra keyword argument we pass through ``MXNetGraph.convert_layer`` to our Custom dispatcher
# (and the argmax fix of mx2onnx_fixes): MXNet's inferred (shape, dtype) of each node entry.
_ENTRY_SPECS_KWARG = "gluon_cf_entry_specs"


def source_prefix(node):
    """``"file:line: "`` of the user's code that created an MXNet JSON node, when the trace
    recorded it (NOTE [source locations] in gluon_cf/tracing.py: the nodes of gluon_cf's
    subgraphs), else ``""``: export errors start with it."""
    where = node.get("attrs", {}).get(SOURCE_ATTR)
    return f"{where}: " if where else ""
