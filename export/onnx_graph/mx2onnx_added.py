"""Converters for MXNet ops that mx2onnx lacks or gets silently wrong, each emulating MXNet
1.9.1's arithmetic exactly (rounding of halves, the sign of NaN, the rows a length masks),
registered for opsets 12 and 13 at import (NOTE [added converters]). ``mx2onnx_fixes.py`` holds
the older fixes and NOTE [mx2onnx pitfalls]."""
import warnings

import numpy as np
import onnx
from onnx import helper, numpy_helper
from mxnet.onnx.mx2onnx._op_translations import _op_translations_opset12 as _mx2onnx

from .mx2onnx_kit import (_SCALAR_OPS, _flag, _original, _output_dtype,
                          _shape_of_input, _squeeze_axes, _start, _tensor_type, register)
from .specs import source_prefix

# NOTE [added converters]
#     Each converter here and in mx2onnx_layers.py was checked against MXNet on onnxruntime at 1e-5,
#     on ties, negative values, halves and lengths (tests/test_export_ops.py). MXNet's arithmetic,
#     which ONNX's nearest ops do not share:
#     * `round` rounds halves away from zero (C's roundf), ONNX's Round to even; `rint`
#       rounds halves *down* (mshadow's rint: floor unless x - floor(x) > ceil(x) - x), not to
#       even. Both are built from Floor and Ceil with MXNet's own comparisons.
#     * `sign` of NaN is 0 (mshadow's sign compares with 0), so it is (x > 0) - (x < 0).
#     * `softmax`/`log_softmax` with `use_length`: the positions at or past the length are
#       0 in the output, a length of 0 gives a row of 0, the max is over the kept positions
#       only. mx2onnx wrote the masked positions as -65500 before a Softmax, so a row of
#       values below -65500 (an attention mask of -1e9) put its weight on masked positions and
#       a length of 0 gave 1/n; with an axis other than -1 it exported a GlobalAveragePool.
#     * `SoftmaxOutput` is a softmax over the input flattened to (N, -1), or axis 1 with
#       multi_output, or the last axis with preserve_shape; mx2onnx took the last axis always.
#     * `LeakyReLU(act_type='prelu')`'s gamma applies along axis 1; mx2onnx gave it to PRelu
#       as is, which numpy-broadcasts it along the *last* axis: silently other values when the
#       last axis is as long as the channels. `rrelu` in inference is leaky with the slope
#       (lower_bound + upper_bound) / 2.
#     * `topk`/`argsort` order tied values by std::sort, whose order of ties is unspecified past
#       16 elements; ONNX's TopK puts the lower index first. The values agree, the indices of
#       ties may not: the converters warn (ExportTieWarning) when the axis may be longer.
#     * `SequenceLast` with lengths reads position length - 1 of each sequence (a length of 0
#       reads before the data in MXNet, undefined; here the last position).
#     * mx2onnx dropped or misread: `L2Normalization`'s eps (and took channel mode only),
#       `BilinearResize2D(align_corners=False)` (resized with aligned corners), `LRN`'s knorm
#       default (MXNet 2, mx2onnx 1: _MXNET_DEFAULT_ATTRS), `clip` with a_min > a_max (MXNet
#       tests a_max first). onnxruntime has no OneHot of int32 or float16 values: cast after.
#       Defaults mx2onnx assumes unlike MXNet when the JSON omits them (found by comparing each
#       converter's attrs.get defaults with MXNet's registry): Deconvolution no_bias (True),
#       split_v2 axis (1), box_nms force_suppress (False), a scalar op's scalar (1), LRN knorm.
#     * `topk` with k < 1 is every element, sorted (ONNX's TopK of k 0: none). `RNN` of several
#       layers or both directions: one ONNX op per layer (mx2onnx refused them, or split the
#       weights of layers whose input size is not the state size wrongly); projections refused.
#     * `GroupNorm` (mx2onnx has none): per group, population variance, MXNet 1.9.1's gamma and
#       beta per group (shape (num_groups,)).
#     * `BatchNorm`: mx2onnx ignored fix_gamma (MXNet's default True reads gamma as 1; Gluon's
#       BatchNorm(scale=False) sets it) and refused any axis but 1.
#     * `squeeze` of no axis drops every axis of 1 but keeps one when all are ((1, 1) -> (1,));
#       ONNX's Squeeze of no axes gives a scalar, at run time: the axes are taken from the
#       input's dims, an axis of run-time size that may be 1 beside another refused. Given
#       axes dropping every axis keep one too, and `axis=()` drops none (ONNX's Squeeze of
#       no axes dropped every axis of 1).
#     * `box_nms` by class (an id_index without force_suppress) is refused: ONNX's
#       NonMaxSuppression suppresses across classes, which mx2onnx only logged.
#     * `Pooling`: `lp` with p 1 or 3 is the sum of x or the cube root of the sum of x**3,
#       signed (ONNX's LpPool takes |x|: other values for negative inputs); `sum` pools are
#       average pools times the window. `pooling_convention='full'` (ceil_mode) keeps a last
#       window that starts in the right padding, ONNX's ceil mode drops it (another output
#       shape): refused when that happens or cannot be ruled out before run time.
#     * dtypes: MXNet casts a scalar op's scalar to an integer input's dtype towards 0
#       (`F.maximum(x, 2.5)` of int32 is `F.maximum(x, 2)`; mx2onnx's int() refused "2.5"),
#       a scalar the dtype cannot hold (inf, NaN, 3e9 of int32: an undefined C++ cast) refused;
#       round/rint/trunc/fix/floor/ceil of integers are the integers. A float64 LeakyReLU
#       (leaky, rrelu, prelu) keeps x > 0 and computes x * slope in float32, and gelu rounds x
#       to float32 whatever the dtype: the converters do the same. mx2onnx's LayerNorm
#       compared a negative axis other than -1 with positive ones (gamma of another shape)
#       and, as its SequenceMask and a float16 BatchNorm (Gluon keeps its parameters
#       float32), mixed float32 constants into float64/float16 graphs. onnxruntime has no
#       float16 CumSum (summed in float32) nor float16 Range (arange_like refused), nor
#       NonMaxSuppression other than float32 (box_nms refused). NOTE [onnxruntime kernels].


class ExportTieWarning(UserWarning):
    """An exported ``topk``/``argsort`` may order the indices of tied values differently from
    MXNet (NOTE [added converters])."""
    node_name = ""


# ----------------------------------------------------------------------------- elementwise

def _integer_identity(convert):
    """``convert`` for floating-point inputs; an integer input is its own result (ONNX's Floor,
    Ceil and Round take no integers)."""
    def convert_or_identity(node, **kwargs):
        out, (x,), _, dtype = _start(node, kwargs)
        if dtype.kind in "iub":
            out.add("Identity", [x], final=True)
            return out
        return convert(node, **kwargs)
    return convert_or_identity


def _original_unary(op):
    return lambda node, **kwargs: _original(op, kwargs)(node, **kwargs)


def _convert_round(node, **kwargs):
    """``round`` (halves away from zero) and ``rint`` (halves down), NOTE [added converters]."""
    out, (x,), _, dtype = _start(node, kwargs)
    if node["op"] == "rint":
        floor, ceil = out.add("Floor", [x]), out.add("Ceil", [x])
        below = out.add("LessOrEqual", [out.add("Sub", [x, floor]), out.add("Sub", [ceil, x])])
        out.add("Where", [below, floor, ceil], final=True)
        return out
    magnitude = out.add("Abs", [x])
    whole = out.add("Floor", [magnitude])
    up = out.add("GreaterOrEqual", [out.add("Sub", [magnitude, whole]),
                                    out.const([0.5], dtype)])
    rounded = out.add("Add", [whole, out.add("Cast", [up], to=_tensor_type(dtype))])
    negative = out.add("Less", [x, out.const([0], dtype)])
    out.add("Where", [negative, out.add("Neg", [rounded]), rounded], final=True)
    return out


def _convert_sign(node, **kwargs):
    out, (x,), _, dtype = _start(node, kwargs)
    zero = out.const([0], dtype)
    positive = out.add("Cast", [out.add("Greater", [x, zero])], to=_tensor_type(dtype))
    negative = out.add("Cast", [out.add("Less", [x, zero])], to=_tensor_type(dtype))
    out.add("Sub", [positive, negative], final=True)
    return out


def _convert_trunc(node, **kwargs):
    """``trunc`` and ``fix``: towards zero."""
    out, (x,), _, dtype = _start(node, kwargs)
    negative = out.add("Less", [x, out.const([0], dtype)])
    out.add("Where", [negative, out.add("Ceil", [x]), out.add("Floor", [x])], final=True)
    return out


def _elementwise(build):
    """A converter for a unary op written as ``build(out, x, dtype) -> value``."""
    def convert(node, **kwargs):
        out, inputs, _, dtype = _start(node, kwargs)
        value = build(out, inputs[0], dtype)
        out.add("Identity", [value], final=True)
        return out
    return convert


_UNARY = {
    "erf": lambda out, x, d: out.add("Erf", [x]),
    "sinh": lambda out, x, d: out.add("Sinh", [x]),
    "cosh": lambda out, x, d: out.add("Cosh", [x]),
    "arcsinh": lambda out, x, d: out.add("Asinh", [x]),
    "arccosh": lambda out, x, d: out.add("Acosh", [x]),
    "arctanh": lambda out, x, d: out.add("Atanh", [x]),
    "softsign": lambda out, x, d: out.add("Softsign", [x]),
    "log1p": lambda out, x, d: out.add("Log", [out.add("Add", [x, out.const([1], d)])]),
    "expm1": lambda out, x, d: out.add("Sub", [out.add("Exp", [x]), out.const([1], d)]),
    "rsqrt": lambda out, x, d: out.add("Reciprocal", [out.add("Sqrt", [x])]),
    "log10": lambda out, x, d: out.add("Div", [out.add("Log", [x]),
                                               out.const([np.log(10)], d)]),
    "degrees": lambda out, x, d: out.add("Mul", [x, out.const([180 / np.pi], d)]),
    "radians": lambda out, x, d: out.add("Mul", [x, out.const([np.pi / 180], d)]),
}


def _convert_maximum(node, **kwargs):
    out, (a, b), _, _ = _start(node, kwargs)
    out.add("Max", [a, b], final=True)
    return out


def _convert_hypot(node, **kwargs):
    out, (a, b), _, _ = _start(node, kwargs)
    out.add("Sqrt", [out.add("Add", [out.add("Mul", [a, a]), out.add("Mul", [b, b])])],
            final=True)
    return out


def _convert_scalar_power_or_mod(node, **kwargs):
    """``x % s``, ``s % x`` and ``s ** x``, the scalar a constant of x's dtype. MXNet's mod
    takes the sign of the divisor (fmod, plus the divisor when the signs differ and the
    remainder is not 0) and is 0 for a divisor 0."""
    out, (x,), attrs, dtype = _start(node, kwargs)
    scalar = out.const([float(attrs["scalar"])], dtype)
    if node["op"] == "_rpower_scalar":
        out.add("Pow", [scalar, x], final=True)
        return out
    a, b = (scalar, x) if node["op"] == "_rmod_scalar" else (x, scalar)
    zero = out.add("Sub", [b, b])
    remainder = out.add("Mod", [a, b], fmod=1)
    signs_differ = out.add("Xor", [out.add("Less", [a, zero]), out.add("Less", [b, zero])])
    nonzero = out.add("Not", [out.add("Equal", [remainder, zero])])
    shift = out.add("Where", [out.add("And", [signs_differ, nonzero]), b, zero])
    adjusted = out.add("Add", [remainder, shift])
    out.add("Where", [out.add("Equal", [b, zero]), zero, adjusted], final=True)
    return out


def _convert_float16_scalar_op(node, **kwargs):
    """``x + s``, ``s - x``, ... of a float16 x: the scalar a float16 constant (mx2onnx folds
    the op into a float16 parameter by multiplying with the scalar's bits, NOTE [mx2onnx
    pitfalls]); of other dtypes mx2onnx's converter."""
    dtype = np.dtype(_mx2onnx.get_input_dtypes(node, kwargs)[0])
    if dtype != np.float16:
        return _original(node["op"], kwargs)(node, **kwargs)
    out, (x,), attrs, dtype = _start(node, kwargs)
    scalar = out.const([float(attrs.get("scalar", "1"))], dtype)
    operands = [scalar, x] if node["op"] in ("_rminus_scalar", "_rdiv_scalar") else [x, scalar]
    out.add(_SCALAR_OPS[node["op"]], operands, final=True)
    return out


# ----------------------------------------------------------------------------- along an axis

def _convert_cumsum(node, **kwargs):
    """``cumsum(x, axis=None, dtype=None)``: over the flattened input when axis is None."""
    out, (x,), attrs, dtype = _start(node, kwargs)
    want = np.dtype(_output_dtype(node, kwargs) or dtype)
    # onnxruntime's CumSum has no float16: summed in float32 (MXNet sums float16 in float16:
    # equal within float16's precision)
    work = np.dtype(np.float32) if want == np.float16 else want
    if work != dtype:
        x = out.add("Cast", [x], to=_tensor_type(work))
    axis = attrs.get("axis", "None")
    if axis in ("None", None):
        x, axis = out.add("Reshape", [x, out.const([-1])]), 0
    total = out.add("CumSum", [x, out.const(int(axis))], final=work == want)
    if work != want:
        out.add("Cast", [total], final=True, to=_tensor_type(want))
    return out


def _warn_ties(node, kwargs, axis):
    shape = _shape_of_input(node, kwargs)
    if shape is None or shape[axis] is None or shape[axis] > 16:
        warning = ExportTieWarning(
            f"{source_prefix(node)}export_onnx: {node['op']} node {node['name']!r} orders the "
            f"indices of tied values as ONNX's TopK does (the lower index first); along an "
            f"axis longer than 16 MXNet's order of ties is std::sort's, which may differ "
            f"(NOTE [added converters])")
        warning.node_name = node["name"]       # export_onnx adds the user's line
        warnings.warn(warning, stacklevel=2)


def _convert_argmax_channel(node, **kwargs):
    """``argmax_channel``: the index of the largest value along the last axis (the first of
    ties), in the input's dtype. (A hybridized block cannot hold it: MXNet's CachedOp wants a
    gradient it lacks; symbols given to export_onnx_symbol can.)"""
    out, (x,), _, dtype = _start(node, kwargs)
    index = out.add("ArgMax", [x], axis=-1, keepdims=0)
    out.add("Cast", [index], final=True, to=_tensor_type(dtype))
    return out


def _convert_sort(node, **kwargs):
    """``sort(x, axis=-1, is_ascend=True)``: TopK of every element (axis None: flattened)."""
    out, (x,), attrs, _ = _start(node, kwargs)
    axis = attrs.get("axis", "-1")
    if axis == "None":
        x, axis = out.add("Reshape", [x, out.const([-1])]), 0
    axis = int(axis)
    largest = 0 if _flag(attrs, "is_ascend", "True") else 1
    out.append(helper.make_node("TopK", [x, out.dim(x, axis)], [out.name, out.name + "_idx"],
                                name=out.name, axis=axis, largest=largest, sorted=1))
    return out


def _convert_topk(node, **kwargs):
    """``topk`` with mx2onnx's converter, but ``ret_typ='mask'``: the input's shape, 1 where an
    element is among the top k, 0 elsewhere, in the input's dtype."""
    attrs = node.get("attrs", {})
    axis = attrs.get("axis", "-1")
    if axis == "None":
        raise NotImplementedError("topk with axis=None (over the flattened input): flatten "
                                  "it first (F.reshape(x, (-1,))) and give axis=0")
    if int(attrs.get("k", "1")) < 1:     # MXNet: every element, sorted (ONNX's TopK: none)
        shape = _shape_of_input(node, kwargs)
        if shape is None or shape[int(axis)] is None:
            return _topk_of_every_element(node, kwargs, int(axis))
        node = dict(node, attrs=dict(attrs, k=str(shape[int(axis)])))
        attrs = node["attrs"]
    if attrs.get("ret_typ", "indices") != "value":
        _warn_ties(node, kwargs, int(axis))
    if attrs.get("ret_typ", "indices") != "mask":
        return _original("topk", kwargs)(node, **kwargs)
    out, (x,), attrs, dtype = _start(node, kwargs)
    largest = 0 if _flag(attrs, "is_ascend") else 1
    out.append(helper.make_node("TopK", [x, out.const([int(attrs.get("k", 1))])],
                                [out.name + "_values", out.name + "_indices"],
                                axis=int(axis), largest=largest, sorted=1))
    zeros = out.add("ConstantOfShape", [out.add("Shape", [x])],
                    value=numpy_helper.from_array(np.zeros(1, dtype)))
    ones = out.add("ConstantOfShape", [out.add("Shape", [out.name + "_indices"])],
                   value=numpy_helper.from_array(np.ones(1, dtype)))
    out.add("ScatterElements", [zeros, out.name + "_indices", ones], final=True, axis=int(axis))
    return out


def _topk_of_every_element(node, kwargs, axis):
    """``topk`` with k < 1 (every element, sorted) along an axis whose length is known only at
    run time (a sequence truncated to a length, a boolean_mask's rows): ONNX's TopK with K
    the axis's length read at run time, as ``sort`` is converted (it was refused); a mask of
    every element is all ones."""
    out, (x,), attrs, dtype = _start(node, kwargs)
    ret_typ = attrs.get("ret_typ", "indices")
    if ret_typ == "mask":
        out.add("ConstantOfShape", [out.add("Shape", [x])], final=True,
                value=numpy_helper.from_array(np.ones(1, dtype)))
        return out
    if ret_typ != "value":
        _warn_ties(node, kwargs, axis)
    largest = 0 if _flag(attrs, "is_ascend") else 1
    names = {"value": [f"{out.name}0", f"{out.name}_indices"],
             "both": [f"{out.name}0", f"{out.name}_indices"]}.get(
                 ret_typ, [f"{out.name}_values", f"{out.name}_indices"])
    out.append(helper.make_node("TopK", [x, out.dim(x, axis)], names, axis=axis,
                                largest=largest, sorted=1))
    if ret_typ != "value":
        index_type = _tensor_type(attrs.get("dtype", "float32"))
        out.append(helper.make_node("Cast", [names[1]], [f"{out.name}1" if ret_typ == "both"
                                                         else out.name], to=index_type))
    return out


def _convert_argsort(node, **kwargs):
    axis = node.get("attrs", {}).get("axis", "-1")
    if axis != "None":
        _warn_ties(node, kwargs, int(axis))
    return _original("argsort", kwargs)(node, **kwargs)


def _convert_sequence_last(node, **kwargs):
    """``SequenceLast(data, sequence_length, use_sequence_length, axis)``: per sequence of the
    batch, the element at position length - 1 along ``axis`` (0: data is (T, B, ...), 1:
    (B, T, ...)), or the last one without lengths."""
    out, inputs, attrs, _ = _start(node, kwargs)
    axis = int(attrs.get("axis", "0"))
    if axis not in (0, 1):
        raise NotImplementedError(f"SequenceLast with axis={axis} (MXNet allows 0 and 1)")
    data = inputs[0]
    if not _flag(attrs, "use_sequence_length"):
        out.add("Gather", [data, out.const(-1)], final=True, axis=axis)
        return out
    position = out.add("Sub", [out.add("Cast", [inputs[1]], to=onnx.TensorProto.INT64),
                               out.const([1])])
    batch = out.add("Range", [out.const(0), out.add("Squeeze", [out.dim(data, 1 - axis)],
                                                    **_squeeze_axes(kwargs)),
                              out.const(1)])
    pair = [position, batch] if axis == 0 else [batch, position]
    column = out.const([-1, 1])
    index = out.add("Concat", [out.add("Reshape", [p, column]) for p in pair], axis=1)
    out.add("GatherND", [data, index], final=True)
    return out


# ----------------------------------------------------------------------------- softmax family

def _convert_softmax(node, **kwargs):
    """``softmax``, ``log_softmax`` and ``softmin`` with any axis, temperature, dtype and
    ``use_length``, as MXNet computes them (NOTE [added converters]): ``(x - max) / t``
    exponentiated and normalised over the kept positions, 0 at the others."""
    out, inputs, attrs, dtype = _start(node, kwargs)
    opset = kwargs.get("opset_version", 13)
    want = np.dtype(_output_dtype(node, kwargs) or dtype)
    x = inputs[0]
    result_dtype = want
    if want == np.float16:   # MXNet accumulates a float16 softmax in float32
        want = np.dtype(np.float32)
    if want != dtype:
        x = out.add("Cast", [x], to=_tensor_type(want))
    if node["op"] == "softmin":
        x = out.add("Neg", [x])
    axis = int(attrs.get("axis", "-1"))
    temperature = attrs.get("temperature", "None")
    temperature = 1.0 if temperature in ("None", None) else float(temperature)
    use_length = _flag(attrs, "use_length")
    keep = None
    if use_length:
        shape = _shape_of_input(node, kwargs)
        if shape is not None:
            axis %= len(shape)
            trailing = len(shape) - axis - 1
        elif axis < 0 and opset >= 11:
            # (a loop body's value of run-time rank: an axis counted from the end needs no
            # rank, ONNX's axes counting from the end too)
            trailing = -axis - 1
        else:
            raise NotImplementedError(f"{node['op']} with use_length=True of an input whose "
                                      f"rank is known only at run time, over axis {axis}: "
                                      f"count the axis from the end (axis=-1 is the last), "
                                      f"and export with opset 11 or later")
        positions = out.add("Range", [out.const(0), out.add("Squeeze", [out.dim(x, axis)],
                                                            **_squeeze_axes(kwargs)),
                                      out.const(1)])
        positions = out.add("Reshape", [positions, out.const([-1] + [1] * trailing)])
        length = out.add("Cast", [inputs[1]], to=onnx.TensorProto.INT64)
        length = out.add("Unsqueeze", [length, out.const([axis])]) if opset >= 13 else \
            out.add("Unsqueeze", [length], axes=[axis])
        keep = out.add("Less", [positions, length])
        lowest = out.const([-np.inf], want)
        x_kept = out.add("Where", [keep, x, lowest])
        top = out.add("ReduceMax", [x_kept], axes=[axis], keepdims=1)
        # a length of 0: no position kept, the max is -inf; MXNet writes 0 everywhere
        top = out.add("Where", [out.add("Equal", [top, lowest]), out.const([0], want), top])
    else:
        top = out.add("ReduceMax", [x], axes=[axis], keepdims=1)
    shifted = out.add("Sub", [x, top])
    if temperature != 1.0:
        shifted = out.add("Div", [shifted, out.const([temperature], want)])
    exp = out.add("Exp", [shifted])
    if keep is not None:
        exp = out.add("Where", [keep, exp, out.const([0], want)])
    total = out.reduce_sum(exp, axis, opset)
    if node["op"] == "log_softmax":
        result = out.add("Sub", [shifted, out.add("Log", [total])])
    else:
        result = out.add("Div", [exp, total])
    if keep is not None:
        result = out.add("Where", [keep, result, out.const([0], want)])
    if result_dtype != want:
        result = out.add("Cast", [result], to=_tensor_type(result_dtype))
    out.add("Identity", [result], final=True)
    return out, [result_dtype]


def _convert_softmax_output(node, **kwargs):
    """``SoftmaxOutput`` in inference: the softmax over axis 1 of the input flattened to (N, -1)
    (the default), over axis 1 (``multi_output``) or the last axis (``preserve_shape``); mx2onnx
    took the last axis in every mode, silently other values for inputs over 2-D."""
    out, inputs, attrs, _ = _start(node, kwargs)
    x, axis = inputs[0], 1
    if _flag(attrs, "preserve_shape"):
        axis = -1
    elif not _flag(attrs, "multi_output"):
        x = out.add("Reshape", [x, out.const([0, -1])])
    top = out.add("ReduceMax", [x], axes=[axis], keepdims=1)
    exp = out.add("Exp", [out.add("Sub", [x, top])])
    result = out.add("Div", [exp, out.reduce_sum(exp, axis, kwargs.get("opset_version", 13))])
    if x != inputs[0]:
        result = out.add("Reshape", [result, out.add("Shape", [inputs[0]])])
    out.add("Identity", [result], final=True)
    return out


# ----------------------------------------------------------------------------- others

def _convert_split_v2(node, **kwargs):
    """``split_v2`` at the given indices (mx2onnx's opset-13 converter gave Split one length
    fewer than outputs, a model onnxruntime refuses to load): one Slice per part."""
    attrs = node.get("attrs", {})
    indices = _mx2onnx.convert_string_to_list(attrs.get("indices", "[]"))
    if int(attrs.get("sections", 0)) > 0 or not indices:
        return _original("_split_v2", kwargs)(node, **kwargs)
    out, (x,), attrs, _ = _start(node, kwargs)
    axis = int(attrs.get("axis", 0))
    bounds = [int(i) for i in indices] + [np.iinfo(np.int64).max]
    if bounds[0] != 0:
        bounds = [0] + bounds
    squeeze = _flag(attrs, "squeeze_axis")
    for k, (begin, end) in enumerate(zip(bounds, bounds[1:])):
        part = f"{out.name}{k}"
        sliced = out.add("Slice", [x, out.const([begin]), out.const([end]), out.const([axis])])
        if squeeze:
            squeezed = out.add("Squeeze", [sliced, out.const([axis])]) \
                if kwargs.get("opset_version", 13) >= 13 else \
                out.add("Squeeze", [sliced], axes=[axis])
            sliced = squeezed
        out.append(helper.make_node("Identity", [sliced], [part], name=part))
    return out


def _convert_swap_axis(node, **kwargs):
    """``SwapAxis`` (``swapaxes``; InstanceNorm with a negative axis) with negative dims, which
    mx2onnx refuses: counted from the input's rank."""
    attrs = node.get("attrs", {})
    dims = [int(attrs.get("dim1", "0")), int(attrs.get("dim2", "0"))]
    if min(dims) < 0:
        shape = _shape_of_input(node, kwargs)
        if shape is None:
            raise NotImplementedError("SwapAxis with a negative dim of an input whose rank is "
                                      "known only at run time")
        out, (x,), _, _ = _start(node, kwargs)
        perm = list(range(len(shape)))
        first, second = (d % len(shape) for d in dims)
        perm[first], perm[second] = perm[second], perm[first]
        out.add("Transpose", [x], final=True, perm=perm)
        return out
    return _original("SwapAxis", kwargs)(node, **kwargs)


def _convert_squeeze(node, **kwargs):
    """``squeeze`` with no axis as MXNet's: every axis of size 1 dropped, but one kept when all
    are (a (1, 1) gives (1,)). mx2onnx's Squeeze of no axes dropped them all, at run time: a
    (n, 1) value of n = 1 became a scalar, so ``F.sum(F.squeeze(x), axis=0, keepdims=True)``
    gave () for MXNet's (1,) and a concat of two failed in onnxruntime. Here the axes are the
    input's dims of 1; an axis known only at run time is dropped when it is 1, so it is
    refused beside another axis that stays (the rank would depend on the input: an exported
    model declares one), and alone (a (n, 1) value) reshaped to (-1,)."""
    axis = str(node.get("attrs", {}).get("axis", "None"))
    shape = _shape_of_input(node, kwargs)
    out, (x,), _, _ = _start(node, kwargs)
    if axis != "None":
        return _squeeze_given_axes(node, kwargs, out, x, shape, axis)
    if shape is None:   # (a rank known only at run time: MXNet's rule, computed then)
        return _keeping_one_axis(out, out.add("Squeeze", [x]))
    run_time = [k for k, d in enumerate(shape) if d is None]
    stays = [k for k, d in enumerate(shape) if d is not None and d != 1]
    if run_time and len(run_time) + len(stays) > 1:
        raise NotImplementedError(
            f"squeeze with no axis of a value of shape {_shown(shape)}: MXNet drops an axis "
            f"known only at run time (axis {run_time[0]}) when it is 1, so the result's rank "
            f"would depend on the input, and an exported model declares one; give squeeze "
            f"the axes to drop (axis={tuple(k for k, d in enumerate(shape) if d == 1)})")
    if run_time or not stays:   # (n, 1, ...) -> (n,); all ones -> (1,)
        out.add("Reshape", [x, out.const([-1] if run_time else [1])], final=True)
    else:
        _squeeze(out, x, [k for k, d in enumerate(shape) if d == 1], kwargs, final=True)
    return out


def _squeeze(out, x, axes, kwargs, final=False):
    if kwargs.get("opset_version", 13) >= 13:
        return out.add("Squeeze", [x, out.const(axes)], final=final)
    return out.add("Squeeze", [x], final=final, axes=axes)


def _keeping_one_axis(out, squeezed):
    """``squeezed`` given the shape (1,) if it has none (MXNet's squeeze keeps one axis)."""
    dims = out.add("Shape", [squeezed])
    rank = out.add("Reshape", [out.add("Size", [dims]), out.const([1])])
    kept = out.add("Slice", [out.add("Concat", [dims, out.const([1])], axis=0),
                             out.const([0]), out.add("Max", [rank, out.const([1])])])
    out.add("Reshape", [squeezed, kept], final=True)
    return out


def _squeeze_given_axes(node, kwargs, out, x, shape, axis):
    """``squeeze`` of the given axes as MXNet's: ``axis=()`` drops none (the value itself;
    ONNX's Squeeze of no axes dropped every axis of 1: (3, 1) + (1, 3) broadcast to (1, 3)
    for MXNet's (3, 3), silently), and dropping every axis keeps one ((1, 1) -> (1,); ONNX's
    Squeeze made a scalar, which the model's rank-1 declaration refused)."""
    axes = {int(a) for a in _mx2onnx.convert_string_to_list(axis)}
    if not axes:
        out.add("Identity", [x], final=True)
        return out
    if shape is None:   # (every axis may be dropped)
        return _keeping_one_axis(out, _squeeze(out, x, sorted(axes), kwargs))
    if {a % len(shape) for a in axes} == set(range(len(shape))):
        out.add("Reshape", [x, out.const([1])], final=True)
        return out
    return _original("squeeze", kwargs)(node, **kwargs)


def _shown(shape):
    return "(%s)" % ", ".join("n" if d is None else str(d) for d in shape) + \
        ("," if len(shape) == 1 else "")


def _convert_clip(node, **kwargs):
    """``clip`` as MXNet's mshadow computes it: a_max above a_max, else a_min below a_min,
    else x (NaN stays NaN; with a_min > a_max the result differs from ONNX's Clip). MXNet's
    bounds are float32 (``real_t``): a float64 x is clipped at 2.0999999046325684 for 2.1."""
    out, (x,), attrs, dtype = _start(node, kwargs)
    low = out.const([np.float32(attrs["a_min"])], dtype)
    high = out.const([np.float32(attrs["a_max"])], dtype)
    above = out.add("Greater", [x, high])
    below = out.add("Where", [out.add("Less", [x, low]), low, x])
    out.add("Where", [above, high, below], final=True)
    return out


def _convert_reverse(node, **kwargs):
    """``reverse``/``flip`` over one or several axes: a Slice with step -1 on each."""
    out, (x,), attrs, _ = _start(node, kwargs)
    axes = [int(a) for a in _mx2onnx.convert_string_to_list(str(attrs["axis"]))]
    big = np.iinfo(np.int64).max
    out.add("Slice", [x, out.const([-1] * len(axes)), out.const([-big] * len(axes)),
                      out.const(axes), out.const([-1] * len(axes))], final=True)
    return out


def _convert_relu(node, **kwargs):
    """``relu``: mx2onnx's Relu, which takes no integers before opset 14: of integers
    Max(x, 0)."""
    out, (x,), _, dtype = _start(node, kwargs)
    if dtype.kind not in "iu":
        return _original("relu", kwargs)(node, **kwargs)
    out.add("Max", [x, out.const([0], dtype)], final=True)
    return out


def _convert_arange_like(node, **kwargs):
    """``arange_like``: of a float16 input refused (ONNX's Range has no float16). Along an
    axis, ``start + step * i`` for i below the axis's size, counted from the end when
    negative (mx2onnx's converter sliced the shape from axis to axis + 1, nothing for -1: a
    single 0, which broadcast silently); of the whole input, mx2onnx's converter."""
    out, (x,), attrs, dtype = _start(node, kwargs)
    if dtype == np.float16:
        raise NotImplementedError("arange_like of a float16 input (ONNX's Range has no "
                                  "float16): give it a float32 input of the same shape")
    axis = attrs.get("axis", "None")
    if axis in (None, "None") or int(attrs.get("repeat", 1)) != 1:
        return _original("_contrib_arange_like", kwargs)(node, **kwargs)
    start, step = float(attrs.get("start", 0.0)), float(attrs.get("step", 1.0))
    scalar = out.const(np.zeros(0, np.int64))
    size = out.add("Cast", [out.add("Reshape", [out.dim(x, int(axis)), scalar])],
                   to=_tensor_type(dtype))
    first, delta = out.const(start, dtype), out.const(step, dtype)
    # (the limit half a step short of the size-th value: Range counts ceil((limit - start) /
    # delta) values, which rounding must not make one more, as mx2onnx's converter does)
    limit = out.add("Add", [out.add("Mul", [size, delta]),
                            out.const(start - step * 0.5, dtype)])
    out.add("Range", [first, limit, delta], final=True)
    return out


def _convert_take(node, **kwargs):
    """``take`` with mx2onnx's converter; in mode 'raise' an index outside [0, size - 1]
    made one onnxruntime refuses, as MXNet refuses it ("take operator contains indices out of
    bound"): mx2onnx's plain Gather counted a negative one from the end, silently another row
    (-1: the last), and read -0.5 or 3.5 (of 4 rows) as rows 0 and 3."""
    if str(node.get("attrs", {}).get("mode", "clip")) != "raise":
        return _original("take", kwargs)(node, **kwargs)
    out, (data, index), attrs, _ = _start(node, kwargs)
    axis = int(attrs.get("axis", 0))
    # (compared as MXNet does, in the index's dtype: -0.5 and 3.5 of 4 rows are refused;
    # the bounds are scalars, so that a 0-d index stays one)
    dtype = np.dtype(_mx2onnx.get_input_dtypes(node, kwargs)[1])
    size = out.add("Gather", [out.add("Shape", [data]), out.const(axis)])
    last = out.add("Cast", [out.add("Sub", [size, out.const(1)])], to=_tensor_type(dtype))
    outside = out.add("Or", [out.add("Less", [index, out.const(0, dtype)]),
                             out.add("Greater", [index, last])])
    rows = out.add("Where", [outside, out.const(-2 ** 62),
                             out.add("Cast", [index], to=onnx.TensorProto.INT64)])
    out.add("Gather", [data, rows], final=True, axis=axis)
    return out


def _convert_index_copy(node, **kwargs):
    """``_contrib_index_copy(old, index, new)``: ``old`` with its rows ``index[k]`` replaced by
    the rows ``new[k]`` (a decoder writing each step's token into a buffer), a ScatterND of
    the rows. MXNet truncates the index to an integer, as Cast does, and checks no bounds (a
    row out of range writes outside the array; gluon_cf's graphs refuse it, NOTE [index_copy
    out of bounds] in gluon_cf/graph/cached_graph.py); onnxruntime refuses a row past the
    end, and a negative one is made one it refuses too (ScatterND would count it from the
    end: silently another row). Of rows given twice MXNet's kernel (parallel) writes either,
    onnxruntime's the last."""
    out, (old, index, new), _, _ = _start(node, kwargs)
    rows = out.add("Reshape", [out.add("Cast", [index], to=onnx.TensorProto.INT64),
                               out.const([-1, 1])])
    rows = out.add("Where", [out.add("Less", [rows, out.const([0])]), out.const([-2 ** 62]),
                             rows])
    out.add("ScatterND", [old, rows, new], final=True)
    return out


register({
    "_contrib_index_copy": _convert_index_copy, "take": _convert_take,
    "_contrib_arange_like": _convert_arange_like, "relu": _convert_relu,
    **{op: _integer_identity(convert) for op, convert in (
        ("round", _convert_round), ("rint", _convert_round), ("trunc", _convert_trunc),
        ("fix", _convert_trunc), ("floor", _original_unary("floor")),
        ("ceil", _original_unary("ceil")))},
    "sign": _convert_sign,
    **{op: _elementwise(build) for op, build in _UNARY.items()},
    "broadcast_maximum": _convert_maximum, "broadcast_hypot": _convert_hypot,
    "_mod_scalar": _convert_scalar_power_or_mod, "_rmod_scalar": _convert_scalar_power_or_mod,
    "_rpower_scalar": _convert_scalar_power_or_mod,
    **{op: _convert_float16_scalar_op for op in _SCALAR_OPS},
    "_np_cumsum": _convert_cumsum, "sort": _convert_sort, "topk": _convert_topk,
    "argmax_channel": _convert_argmax_channel,
    "argsort": _convert_argsort, "SequenceLast": _convert_sequence_last,
    "softmax": _convert_softmax, "log_softmax": _convert_softmax, "softmin": _convert_softmax,
    "SoftmaxOutput": _convert_softmax_output,
    "_split_v2": _convert_split_v2, "reverse": _convert_reverse,
    "SwapAxis": _convert_swap_axis, "clip": _convert_clip, "squeeze": _convert_squeeze,
})
