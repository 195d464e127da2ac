"""What the exported nodes need from onnxruntime: every ONNX node made from an MXNet node
carries that node's name and the user's line while the export runs (``stamp``), so that ONNX's
checker refusing a node, nested in loop bodies or not, and a node onnxruntime has no kernel for
are errors at the user's line (``rejection``, ``check_runtime_kernels``); nodes of float64
without an onnxruntime kernel are computed from ops that have one where that is exact
(NOTE [onnxruntime kernels])."""
import json
import math
import re
from functools import lru_cache
from typing import Dict, Set

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .specs import NODE_OF_ERROR

# NOTE [onnxruntime kernels]
#     An exported model is valid ONNX for every node's dtypes, yet onnxruntime (CPU) has no
#     kernel for many of them: nothing in float64 for Erf, Sinh, Cosh, Asinh, Acosh, Atanh,
#     Softsign, Softplus, Elu, Selu, LeakyRelu, PRelu, HardSigmoid, Conv, ConvTranspose,
#     AveragePool, GlobalAveragePool, GlobalMaxPool, LpPool, Resize, RNN; LSTM and GRU
#     register float64 kernels that fail at run time ("does not support double yet"). A session of
#     such a model fails to load or to run, far from the user's code. So after ONNX's checker, every
#     node of the default domain (loop bodies included) is matched against onnxruntime's own kernel
#     registry (``get_all_opkernel_def``) with the dtypes ONNX's type inference gives its inputs and
#     outputs:
#     * float64 nodes with an exact decomposition into ops that have float64 kernels are
#       replaced by it (``_DOUBLE_REWRITES``): sinh and cosh from Exp (e^|x|/2 as
#       exp(|x|/2)^2/2: finite up to 710.47 as MXNet's), asinh/acosh/atanh from Log and Sqrt
#       (log(2|x|) past 1e8, where x*x would overflow), softsign, softplus (as MXNet's
#       softrelu: x past 20), Elu/Selu/LeakyRelu/PRelu from Where, HardSigmoid from Min/Max,
#       GlobalAveragePool and GlobalMaxPool as ReduceMean and ReduceMax. MXNet computes them
#       with log1p and expm1, which ONNX lacks: log(1 + u) and exp(x) - 1 lose every digit of
#       a tiny result (asinh(1e-17) would be 0, elu(-1e-12) 2e-5 off), so they are Kahan's
#       and Goldberg's exact forms (``_Builder.log1p``, ``expm1``). Each was compared with
#       MXNet in float64, relative error at tiny and huge x included.
#     * any other node without a kernel is refused at export: the MXNet node, the user's line
#       (its stamp), the ONNX op, its dtypes and the dtypes onnxruntime has. Erf (and gelu),
#       convolutions, pools, resizing and the recurrent layers have no exact float64
#       decomposition here: compute them in float32.
#     Ops onnxruntime runs by expanding their ONNX function (no kernel registered) are let
#     through. Without the registry (an onnxruntime that lacks it) nothing is refused, but the
#     float64 rewrites are still made: they are exact, where ONNX's own ops computed as
#     log(1 + u) or exp(x) - 1 (by any runtime) lose the digits MXNet keeps, and the model
#     must not depend on which onnxruntime exported it.

_STAMP = "gluon_cf.export:"
_INF = 2 ** 31 - 1


# ----------------------------------------------------------------------------- stamps

def stamp(nodes, mx_name, where):
    """Mark the ONNX ``nodes`` converted from the MXNet node ``mx_name`` (made at ``where``,
    ``"file:line"`` or None); a node without a name is named after its first output, so that
    ONNX's checker names it. ``unstamp`` removes the marks."""
    mark = _STAMP + json.dumps([mx_name, where])
    names = {node.name for node in nodes}
    seen = set()
    for k, node in enumerate(nodes):
        if (not node.name or node.name in seen) and node.output:
            # onnxruntime refuses two nodes of one name
            node.name = node.output[0] if node.output[0] not in names else \
                f"{node.output[0]}/node{k}"
            names.add(node.name)
        seen.add(node.name)
        if not node.doc_string:
            node.doc_string = mark


def _origin(node):
    if not node.doc_string.startswith(_STAMP):
        return None, None
    mx_name, where = json.loads(node.doc_string[len(_STAMP):])
    return mx_name, where


def unstamp(graph):
    for node in graph.node:
        if node.doc_string.startswith(_STAMP):
            node.doc_string = ""
        for sub in _subgraphs(node):
            unstamp(sub)


def _subgraphs(node):
    return [g for attr in node.attribute
            for g in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)]


def _all_nodes(graph):
    for node in graph.node:
        yield node
        for sub in _subgraphs(node):
            yield from _all_nodes(sub)


def _located(message, node):
    """A NotImplementedError about the ONNX ``node``: led by the user's line when its MXNet
    node has one, else naming the MXNet node (export_onnx adds its line)."""
    mx_name, where = _origin(node)
    error = NotImplementedError(f"{where}: {message}" if where else message)
    if not where:
        setattr(error, NODE_OF_ERROR, mx_name or node.name.rsplit("/", 1)[-1])
    return error


def rejection(err, model):
    """ONNX's checker refusing a converted node (an MXNet dtype the ONNX operator does not
    take: ``sqrt`` of int32, ``+`` of int8), in a loop body or not: a NotImplementedError about
    the innermost node the checker names, at the user's line."""
    text = str(err)
    first = text.strip().split("\n")[0]     # the later lines follow from the first
    found = list(re.finditer(r"\(op_type:(\w+), node name: ([^)]*)\): ", first))
    if not found:
        return NotImplementedError(f"export_onnx: ONNX's checker rejects the converted model: "
                                   f"{text}")
    innermost = found[-1]
    op_type, onnx_name = innermost.groups()
    reason = first[innermost.end():].strip()
    node = next((n for n in _all_nodes(model.graph) if n.name == onnx_name), None)
    mx_name = _origin(node)[0] if node is not None else None
    mx_name = mx_name or onnx_name.rsplit("/", 1)[-1]
    message = (f"export_onnx: the ONNX {op_type} converted from node {mx_name!r} is not valid "
               f"ONNX: {reason} (an input dtype ONNX's {op_type} does not take? cast it to "
               f"float32 first)")
    if node is None:
        error = NotImplementedError(message)
        setattr(error, NODE_OF_ERROR, mx_name)
        return error
    return _located(message, node)


# ----------------------------------------------------------------------------- kernels

@lru_cache(maxsize=None)
def _kernels():
    """op type -> [(first version, last version, {type parameter: dtypes})] of onnxruntime's
    CPU kernels, or None when this onnxruntime does not list them."""
    try:
        from onnxruntime.capi import _pybind_state
        defs = _pybind_state.get_all_opkernel_def()
    except (ImportError, AttributeError):
        return None
    table: Dict[str, list] = {}
    for k in defs:
        if k.provider == "CPUExecutionProvider" and k.domain in ("", "ai.onnx"):
            table.setdefault(k.op_name, []).append(
                (k.version_range[0], k.version_range[1],
                 {t: set(types) for t, types in k.type_constraints.items()}))
    return table


# registered, yet failing at run time ("LSTM operator does not support double yet")
_FAILS_AT_RUN_TIME = {("LSTM", "tensor(double)"), ("GRU", "tensor(double)")}


def _type_name(value_type):
    if not value_type.HasField("tensor_type") or not value_type.tensor_type.elem_type:
        return None
    name = onnx.TensorProto.DataType.Name(value_type.tensor_type.elem_type).lower()
    return f"tensor({name})"


def _bound_types(node, schema, types):
    """Type parameter -> the dtype ``node``'s inputs and outputs bind it to."""
    bound: Dict[str, str] = {}
    for formals, actuals in ((schema.inputs, node.input), (schema.outputs, node.output)):
        for k, name in enumerate(actuals):
            if not formals or not name:
                continue
            formal = formals[min(k, len(formals) - 1)]
            variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
            if k >= len(formals) and formal.option != variadic:
                continue
            if name in types and types[name] is not None:
                bound.setdefault(formal.type_str, types[name])
    return bound


def _missing_kernel(node, opset, types):
    """None when onnxruntime has a CPU kernel for ``node`` with its dtypes, else (the dtypes
    it binds that no kernel takes, the dtypes onnxruntime has for those type parameters)."""
    table = _kernels()
    if node.domain not in ("", "ai.onnx") or (table is None and node.op_type not in
                                              _DOUBLE_REWRITES):
        return None
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except onnx.defs.SchemaError:
        return None
    bound = _bound_types(node, schema, types)
    if table is None:   # only the exact float64 rewrites (NOTE [onnxruntime kernels])
        return (bound, {}) if set(bound.values()) == {"tensor(double)"} else None
    if node.op_type not in table:     # Constant, ops run as their ONNX function
        return None
    failing = {t for op, t in _FAILS_AT_RUN_TIME if op == node.op_type}
    # onnxruntime casts float16 nodes it has no kernel for to float32 itself
    kernels = [{t: dtypes - failing | ({"tensor(float16)"} if "tensor(float)" in dtypes else set())
                for t, dtypes in c.items()}
               for first, last, c in table[node.op_type]
               if first <= schema.since_version <= last]
    if any(all(t not in c or dtype in c[t] for t, dtype in bound.items()) for c in kernels):
        return None
    unmatched = {t: dtype for t, dtype in bound.items()
                 if not any(t not in c or dtype in c[t] for c in kernels)} or bound
    available: Dict[str, Set[str]] = {}
    for first, last, constraints in table[node.op_type]:
        for t in unmatched:
            if first <= schema.since_version <= last:
                available.setdefault(t, set()).update(constraints.get(t, set()) - failing)
    return unmatched, available


def check_runtime_kernels(model):
    """Replace, in ``model`` (checked, any opset), each float64 node onnxruntime has no kernel
    for by an exact decomposition, and refuse any other node it has no kernel for, at the
    user's line (NOTE [onnxruntime kernels]). Returns whether a node was replaced."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    return _check_graph(model.graph, inferred.graph, opset, {})


def _value_types(graph):
    values = list(graph.input) + list(graph.output) + list(graph.value_info)
    types = {v.name: _type_name(v.type) for v in values}
    types.update({init.name: f"tensor({onnx.TensorProto.DataType.Name(init.data_type).lower()})"
                  for init in graph.initializer})
    shapes = {v.name: len(v.type.tensor_type.shape.dim) for v in values
              if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")}
    return types, shapes


def _check_graph(graph, inferred, opset, outer):
    types, ranks = _value_types(inferred)
    types = {**outer.get("types", {}), **types}
    ranks = {**outer.get("ranks", {}), **ranks}
    scope = {"types": types, "ranks": ranks}
    replaced, nodes = False, []
    for node, seen in zip(graph.node, inferred.node):
        for sub, sub_seen in zip(_subgraphs(node), _subgraphs(seen)):
            replaced |= _check_graph(sub, sub_seen, opset, scope)
        missing = _missing_kernel(node, opset, types)
        if missing is None:
            nodes.append(node)
            continue
        bound, available = missing
        rewrite = _DOUBLE_REWRITES.get(node.op_type)
        if rewrite is not None and set(bound.values()) == {"tensor(double)"}:
            replacement = _Builder(node, opset)
            if rewrite(replacement, *node.input, rank=ranks.get(node.input[0]),
                       **{a.name: helper.get_attribute_value(a) for a in node.attribute}
                       ) is not False:
                nodes += replacement.nodes
                replaced = True
                continue
        if _kernels() is None:     # nothing to check against: kept as it is
            nodes.append(node)
            continue
        has = "; ".join(f"{t}: {', '.join(sorted(d))}" for t, d in sorted(available.items()))
        mx_name = _origin(node)[0] or node.name
        raise _located(
            f"export_onnx: onnxruntime has no kernel for ONNX's {node.op_type} (converted from "
            f"node {mx_name!r}) of {', '.join(f'{t}={d}' for t, d in sorted(bound.items()))}"
            + (f" (it has {has})" if has else " (none at all)")
            + ": compute it in a dtype onnxruntime has (F.cast to float32 and back, or "
              "net.cast('float32'))", node)
    if replaced:
        del graph.node[:]
        graph.node.extend(nodes)
    return replaced


# ----------------------------------------------------------------------------- float64

class _Builder:
    """The nodes replacing ``node``: the last one writes its output."""

    def __init__(self, node, opset):
        self.node, self.opset, self.nodes = node, opset, []

    def add(self, op, *inputs, final=False, **attrs):
        out = self.node.output[0] if final else f"{self.node.output[0]}/f64_{len(self.nodes)}"
        made = helper.make_node(op, list(inputs), [out], name=f"{self.node.name}/f64_"
                                f"{len(self.nodes)}", doc_string=self.node.doc_string, **attrs)
        self.nodes.append(made)
        return out

    def const(self, value):
        out = f"{self.node.output[0]}/f64_{len(self.nodes)}"
        self.nodes.append(helper.make_node("Constant", [], [out], value=numpy_helper.from_array(
            np.array([value], np.float64), out), doc_string=self.node.doc_string))
        return out

    def where_negative(self, x, negative, final=True):
        """``negative`` where x < 0 (not for NaN or 0), x elsewhere."""
        below = self.add("Less", x, self.const(0.0))
        return self.add("Where", below, negative, x, final=final)

    def with_sign_of(self, x, magnitude):
        """``magnitude`` negated where x < 0: the result."""
        return self.add("Where", self.add("Less", x, self.const(0.0)),
                        self.add("Neg", magnitude), magnitude, final=True)

    def log1p(self, u, final=False):
        """log(1 + u) to the last digits for |u| < 1 (Goldberg: log(w) * u / (w - 1) with
        w = 1 + u rounded, u itself where w is 1), log(1 + u) elsewhere."""
        w = self.add("Add", u, self.const(1.0))
        w_minus_one = self.add("Sub", w, self.const(1.0))
        exact = self.add("Mul", self.add("Log", w), self.add("Div", u, w_minus_one))
        small = self.add("Where", self.add("Equal", w_minus_one, self.const(0.0)), u, exact)
        return self.add("Where", self.add("Less", self.add("Abs", u), self.const(1.0)), small,
                        self.add("Log", w), final=final)

    def expm1(self, x):
        """exp(x) - 1 to the last digits for |x| < 1 (Kahan: (u - 1) * x / log(u) with
        u = exp(x) rounded, x itself where u is 1), exp(x) - 1 elsewhere."""
        u = self.add("Exp", x)
        u_minus_one = self.add("Sub", u, self.const(1.0))
        exact = self.add("Mul", self.add("Div", u_minus_one, self.add("Log", u)), x)
        small = self.add("Where", self.add("Equal", u, self.const(1.0)), x, exact)
        return self.add("Where", self.add("Less", self.add("Abs", x), self.const(1.0)), small,
                        u_minus_one)

    def half_exp(self, magnitude):
        """exp(|x|) / 2 as exp(|x| / 2) ** 2 / 2: finite wherever the result is."""
        root = self.add("Exp", self.add("Mul", magnitude, self.const(0.5)))
        return self.add("Mul", self.add("Mul", root, self.const(0.5)), root)


def _asinh(b, x, **_):
    """log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), log(2|x|) past 1e8 (x^2 would overflow)."""
    magnitude = b.add("Abs", x)
    square = b.add("Mul", magnitude, magnitude)
    root = b.add("Add", b.add("Sqrt", b.add("Add", square, b.const(1.0))), b.const(1.0))
    small = b.log1p(b.add("Add", magnitude, b.add("Div", square, root)))
    large = b.add("Add", b.add("Log", magnitude), b.const(math.log(2)))
    b.with_sign_of(x, b.add("Where", b.add("Greater", magnitude, b.const(1e8)), large, small))


def _acosh(b, x, **_):
    """log1p(t + sqrt(t * (t + 2))) with t = x - 1 (exact near 1), log(2x) past 1e8."""
    t = b.add("Sub", x, b.const(1.0))
    inner = b.add("Sqrt", b.add("Mul", t, b.add("Add", t, b.const(2.0))))
    small = b.log1p(b.add("Add", t, inner))
    large = b.add("Add", b.add("Log", x), b.const(math.log(2)))
    b.add("Where", b.add("Greater", x, b.const(1e8)), large, small, final=True)


def _atanh(b, x, **_):
    """log1p(2|x| / (1 - |x|)) / 2 with x's sign."""
    magnitude = b.add("Abs", x)
    ratio = b.add("Div", b.add("Add", magnitude, magnitude),
                  b.add("Sub", b.const(1.0), magnitude))
    b.with_sign_of(x, b.add("Mul", b.log1p(ratio), b.const(0.5)))


def _sinh(b, x, **_):
    """(e + e / (e + 1)) / 2 with e = expm1(|x|) below 1 (no cancellation), else
    exp(|x|) / 2 - exp(-|x|) / 2; x's sign."""
    magnitude = b.add("Abs", x)
    e = b.expm1(magnitude)
    small = b.add("Mul", b.add("Add", e, b.add("Div", e, b.add("Add", e, b.const(1.0)))),
                  b.const(0.5))
    half = b.half_exp(magnitude)
    large = b.add("Sub", half, b.add("Div", b.const(0.25), half))
    b.with_sign_of(x, b.add("Where", b.add("Less", magnitude, b.const(1.0)), small, large))


def _cosh(b, x, **_):
    """exp(|x|) / 2 + exp(-|x|) / 2."""
    half = b.half_exp(b.add("Abs", x))
    b.add("Add", half, b.add("Div", b.const(0.25), half), final=True)


def _softsign(b, x, **_):
    b.add("Div", x, b.add("Add", b.add("Abs", x), b.const(1.0)), final=True)


def _softplus(b, x, **_):
    """MXNet's softrelu: x past 20, else log1p(exp(x))."""
    small = b.log1p(b.add("Exp", x))
    b.add("Where", b.add("Greater", x, b.const(20.0)), x, small, final=True)


def _elu(b, x, alpha=1.0, **_):
    exp_minus_one = b.expm1(x)
    b.where_negative(x, b.add("Mul", exp_minus_one, b.const(alpha)))


def _selu(b, x, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875, **_):
    # ONNX's defaults: MXNet's constants rounded to float32, as MXNet's float64 selu uses them
    exp_minus_one = b.expm1(x)
    inner = b.where_negative(x, b.add("Mul", exp_minus_one, b.const(alpha)), final=False)
    b.add("Mul", inner, b.const(gamma), final=True)


def _leaky_relu(b, x, alpha=0.01, **_):
    b.where_negative(x, b.add("Mul", x, b.const(alpha)))


def _prelu(b, x, slope, **_):
    b.where_negative(x, b.add("Mul", x, slope))


def _hard_sigmoid(b, x, alpha=0.2, beta=0.5, **_):
    line = b.add("Add", b.add("Mul", x, b.const(alpha)), b.const(beta))
    b.add("Max", b.add("Min", line, b.const(1.0)), b.const(0.0), final=True)


def _global_pool(reduce):
    def rewrite(b, x, rank=None, **_):
        if rank is None:
            return False     # the caller refuses it
        return b.add(reduce, x, final=True, axes=list(range(2, rank)), keepdims=1)
    return rewrite


_DOUBLE_REWRITES = {
    "Sinh": _sinh, "Cosh": _cosh, "Asinh": _asinh, "Acosh": _acosh,
    "Atanh": _atanh, "Softsign": _softsign, "Softplus": _softplus, "Elu": _elu, "Selu": _selu,
    "LeakyRelu": _leaky_relu, "PRelu": _prelu, "HardSigmoid": _hard_sigmoid,
    "GlobalAveragePool": _global_pool("ReduceMean"), "GlobalMaxPool": _global_pool("ReduceMax"),
}
