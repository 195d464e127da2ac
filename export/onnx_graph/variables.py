"""Where each input variable of a symbol comes from when it is converted: a graph input, a
parameter (embedded as an initializer, or read from the enclosing graph) or a value captured
from an enclosing graph; anything else, or a variable given twice, is refused naming it.
Parameters are normalized here (``.params`` prefixes stripped, NDArrays to numpy)."""
from dataclasses import dataclass

import mxnet as mx
import numpy as np
from onnx import numpy_helper

from .specs import ValueSpec, _value_spec


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


def params_to_initializers(params, names=None):
    """ONNX initializers for ``params`` (restricted to ``names`` if given), named as is --
    for graphs converted with ``embed_params=False``."""
    params = _normalize_params(params)
    names = params if names is None else names
    return [numpy_helper.from_array(params[name], name) for name in names]
