"""MXNet ``Custom`` nodes in ONNX: gluon_cf's ops are Custom nodes, and mx2onnx looks converters
up by op name only, so one converter is registered for ``Custom`` (at import) and dispatches on
the node's ``op_type`` to the converter ``register_custom_converter`` holds for it, handing it
a ``CustomOpNode`` with what MXNet inferred of the node."""
import mxnet as mx
import numpy as np
from mxnet.onnx.mx2onnx._export_onnx import MXNetGraph
from mxnet.onnx.mx2onnx._op_translations import _op_translations_opset12

from .specs import CustomOpNode, _ENTRY_SPECS_KWARG


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


# Opset 12 is the lowest table; convert_layer falls back to it from 13.
MXNetGraph.register("Custom", opset_version=12)(_convert_custom)
