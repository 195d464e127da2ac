"""What the converters of ``mx2onnx_added`` and ``mx2onnx_layers`` share: the ONNX nodes of
one converter (:class:`_Nodes`), MXNet's inferred shapes and dtypes, and mx2onnx's own converters
as they were before either module registered its own (NOTE [added converters])."""
import numpy as np
from onnx import helper, numpy_helper
from mxnet.onnx.mx2onnx._export_onnx import MXNetGraph
from mxnet.onnx.mx2onnx._op_translations import _op_translations_opset12 as _mx2onnx

from .specs import _ENTRY_SPECS_KWARG

def _flag(attrs, key, default="False"):
    return str(attrs.get(key, default)) in ("True", "true", "1")


def _shape_of_input(node, kwargs, k=0):
    """MXNet's inferred shape of ``node``'s input ``k``, or None (() is unknown in MXNet)."""
    specs = kwargs.get(_ENTRY_SPECS_KWARG) or {}
    return (specs.get(tuple(node["inputs"][k][:2])) or (None, None))[0] or None


def _output_dtype(node, kwargs):
    specs = kwargs.get(_ENTRY_SPECS_KWARG) or {}
    return (specs.get((kwargs["idx"], 0)) or (None, None))[1]


class _Nodes(list):
    """The ONNX nodes of one converter, each helper value named ``<node>_<hint><k>``."""

    def __init__(self, name):
        super().__init__()
        self.name = name

    def add(self, op, inputs, hint="", final=False, **attrs):
        out = self.name if final else f"{self.name}_{hint or op.lower()}{len(self)}"
        self.append(helper.make_node(op, list(inputs), [out],
                                     **({"name": self.name} if final else {}), **attrs))
        return out

    def const(self, value, dtype=np.int64):
        out = f"{self.name}_const{len(self)}"
        self.append(helper.make_node("Constant", [], [out], value=numpy_helper.from_array(
            np.array(value, dtype=dtype), out)))
        return out

    def dim(self, data, axis):
        """Shape(data)[axis] as a 1-D tensor of one element."""
        last = np.iinfo(np.int64).max
        return self.add("Slice", [self.add("Shape", [data]), self.const([axis]),
                                  self.const([axis + 1 if axis != -1 else last])])

    def reduce_sum(self, data, axis, opset, final=False):
        if opset >= 13:
            return self.add("ReduceSum", [data, self.const([axis])], final=final, keepdims=1)
        return self.add("ReduceSum", [data], final=final, axes=[axis], keepdims=1)


def _start(node, kwargs):
    name, inputs, attrs = _mx2onnx.get_inputs(node, kwargs)
    dtype = np.dtype(_mx2onnx.get_input_dtypes(node, kwargs)[0])
    return _Nodes(name), inputs, attrs, dtype


def _tensor_type(dtype):
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _squeeze_axes(kwargs):
    return {} if kwargs.get("opset_version", 13) >= 13 else {"axes": [0]}


_SCALAR_OPS = {"_plus_scalar": "Add", "_minus_scalar": "Sub", "_rminus_scalar": "Sub",
               "_mul_scalar": "Mul", "_div_scalar": "Div", "_rdiv_scalar": "Div",
               "_power_scalar": "Pow"}


_ORIGINALS = {(version, op): MXNetGraph.registry_[version][op] for version in (12, 13)
              for op in ("topk", "argsort", "LeakyReLU", "Convolution", "Pooling", "SwapAxis",
                         "_contrib_BilinearResize2D", "_contrib_box_nms", "_split_v2", "RNN",
                         "BatchNorm", "floor", "ceil", "_contrib_arange_like", "relu", "squeeze",
                         "take", "SequenceReverse",
                         *_SCALAR_OPS)
              if op in MXNetGraph.registry_.get(version, {})}


def _original(op, kwargs):
    """mx2onnx's own converter of ``op`` at the export's opset (its opset-12 one where it has
    no other), which a converter of ours wraps."""
    return _ORIGINALS.get((kwargs.get("opset_version", 13), op)) or _ORIGINALS[(12, op)]


def register(converters):
    """Each converter of ``converters`` (MXNet op -> converter) for opsets 12 and 13."""
    for op, convert in converters.items():
        for version in (12, 13):
            MXNetGraph.register(op, opset_version=version)(convert)
