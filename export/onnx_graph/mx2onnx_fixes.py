"""What mx2onnx (MXNet 1.9.1's ONNX converters) gets wrong or lacks, fixed once at import:
its converter modules are given an ``onnx`` that still has ``onnx.mapping``, and converters are
registered for the comparisons, ``boolean_mask`` and ``pick`` it lacks and for the ``Reshape``
codes it refuses (NOTE [reshape codes]). NOTE [mx2onnx pitfalls] lists every trap known, for whoever
writes a converter."""
import contextlib
import types

import numpy as np
import onnx
from onnx import helper, numpy_helper
from mxnet.onnx.mx2onnx._export_onnx import MXNetGraph
from mxnet.onnx.mx2onnx._op_translations import (_op_translations_opset12,
                                                 _op_translations_opset13)

from .specs import _ENTRY_SPECS_KWARG


# NOTE [mx2onnx pitfalls] -- for whoever writes the control-flow converters
# * mx2onnx (MXNet 1.9.1) uses `onnx.mapping`, which current onnx releases removed, so its
#   converters crash and `mx.onnx.export_model` fails on `from onnx import mapping`.  We give
#   the two converter modules a private `onnx` that has `mapping` again
#   (`_patch_mx2onnx_onnx_mapping`); the real onnx package is untouched, so
#   `mx.onnx.export_model` itself still fails -- export through this module.
# * mx2onnx gives onnx's `make_tensor` the *bits* of float16 constants, which current onnx
#   takes as values (a float16 `x * 1.1` became `x * 15464`): `float16_constants` reads them
#   back as bits while a converter runs (onnx.helper.make_tensor is swapped for that time),
#   and the scalar ops of a float16 input are converted without mx2onnx's folding into a
#   parameter, which multiplied by the bits (`_convert_float16_scalar_op`).
# * mx2onnx has converter tables for opsets 12 and 13 only and silently falls back to them for
#   newer opsets.  Declaring opset >= 14 would pair old-style nodes (ReduceMean `axes`
#   attribute, Split `split` attribute, ...) with newer schemas, so we accept 12 and 13 only
#   (default 13; Loop-13, If-13 and Scan-11 exist there).
# * `MXNetGraph.create_onnx_graph_proto` cannot build subgraphs: it wants a static shape for
#   every input, turns every free variable into a graph input and ends with
#   `checker.check_graph`, which rejects outer-scope references.  We drive
#   `MXNetGraph.convert_layer` ourselves and handle `null` (variable) nodes here.
# * Converters name outputs after the MXNet node (`fc`; `fc0`, `fc1`, ... when there are
#   several -- a Custom converter must define exactly `CustomOpNode.outputs`), helper values
#   `fc_1`, `fc_-1`, ..., plus `scalar_op<idx>`.  Separately converted graphs therefore clash,
#   so every name defined in a graph, nested subgraphs included, gets `<graph_name>/` in front
#   afterwards.  Sibling subgraphs (then/else) may reuse local names; nested ones may not
#   shadow.  A name defined twice within one graph is reported (rename the MXNet node).
# * mx2onnx has no converters for the elementwise comparisons (`a < b` of two Symbols:
#   `_lesser`, ...) nor for `_lesser_equal_scalar`, `_greater_equal_scalar`,
#   `_not_equal_scalar`, nor for `_contrib_boolean_mask` (-> Compress) and `pick`
#   (-> GatherElements), its `dot` is numpy's matmul (silently other values and shapes for
#   inputs over 2-D: `_convert_dot`), its reductions ignore `exclude=True` (`_excluding`)
#   and give a scalar over every axis (MXNet: (1,), `_one_element`),
#   its `one_hot` counts negative indices from the end (`_convert_one_hot`), its
#   `Embedding` reads them from the end too (MXNet clips: `_convert_embedding`), its
#   `broadcast_to` takes a 0 in the shape as a size (`_convert_broadcast_to`), and its
#   `Reshape` refuses the codes -3 (merge two axes) and -2 (keep the rest) but for a few
#   fixed patterns; `_register_missing_ops` adds them (NOTE [reshape codes]).
# * Converters may return ValueInfoProtos for the constants they add (IR < 4 style, where
#   initializers are graph inputs too).  We drop them.
# * Converters read only the attributes present in the JSON, and MXNet saves only explicitly
#   set ones; a converter default that differs from MXNet's is silently wrong.  Known case:
#   FullyConnected `flatten` (MXNet True, mx2onnx False) -- filled in by _MXNET_DEFAULT_ATTRS.
# * `_rminus_scalar` / `_rdiv_scalar` (`1 - x`, `1 / x`) are recognised by the *node name*
#   prefix `_rminusscalar`; Gluon names them `<block>__rminusscalar0`, and when the input is a
#   parameter the constant-folding branch then computes `x - 1`.  We rename such nodes before
#   conversion.  (That converter also `print`s -- export_onnx_symbol silences stdout while
#   converting -- and folding leaves the original parameter as an unused initializer that
#   onnxruntime warns about; make_onnx_model removes unused initializers.)
# * `take`/`Embedding` Cast indices to int64, so int32, int64 and MXNet's default float32
#   indices all work; the graph input keeps its declared dtype.  But `take` in mode 'clip'
#   (the default) or 'wrap' broadcasts a 0-d index (a Loop's iteration counter) to shape [1],
#   adding a leading axis; only mode='raise' emits a plain Gather.  MXNet itself has no 0-d
#   arrays (legacy shape semantics), so bodies traced in MXNet never see a true scalar.
# * dtypes: converters that do not report output dtypes are assumed by mx2onnx to keep their
#   first input's dtype.  We prefer MXNet's infer_type for those; graph output dtypes are the
#   ones the ONNX nodes actually produce.  If cond / Loop condition must be bool.
# * shapes: MXNet's legacy inference treats 0 as an unknown dim and () as an unknown shape,
#   and many ops (take, argmax, ...) give up entirely on any unknown dim.  Output shapes come
#   from ONNX shape inference with data propagation, merged with MXNet's; but the shapes in a
#   CustomOpNode (seen during conversion) are MXNet's only and often None.
# * `.params` files prefix names with `arg:` / `aux:`; we strip them like mx2onnx does.
# * Initializers inside a subgraph are copied into every branch/body: for big weights use
#   `embed_params=False` and define them once in the main graph (params_to_initializers).

# ----------------------------------------------------------------------------- onnx.mapping

def _patch_mx2onnx_onnx_mapping():
    """Give mx2onnx's converter modules an ``onnx`` that still has ``onnx.mapping``.

    The real ``onnx`` package stays untouched: the converters see a module object that
    forwards every attribute to it and adds ``mapping``.
    """
    tensor_types = [getattr(onnx.TensorProto, t) for t in (
        "FLOAT", "DOUBLE", "FLOAT16", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16",
        "UINT32", "UINT64", "BOOL", "COMPLEX64", "COMPLEX128")]
    tensor_to_np = {t: helper.tensor_dtype_to_np_dtype(t) for t in tensor_types}

    class _NpToTensorType(dict):
        def __getitem__(self, dtype):  # accepts np.dtype, numpy type objects and strings
            return dict.__getitem__(self, np.dtype(dtype))

    mapping = types.SimpleNamespace(
        TENSOR_TYPE_TO_NP_TYPE=tensor_to_np,
        NP_TYPE_TO_TENSOR_TYPE=_NpToTensorType({d: t for t, d in tensor_to_np.items()}))

    class _OnnxWithMapping(types.ModuleType):
        mapping: types.SimpleNamespace

        def __getattr__(self, attr):
            return getattr(onnx, attr)

    patched = _OnnxWithMapping("onnx")
    patched.mapping = mapping
    for module in (_op_translations_opset12, _op_translations_opset13):
        if not hasattr(module.onnx, "mapping"):
            module.onnx = patched


# ----------------------------------------------------------------------------- float16

@contextlib.contextmanager
def float16_constants():
    """While mx2onnx's converters run: a float16 constant they make holds the value they mean.

    They pass float16 values to ``onnx.helper.make_tensor`` as their bits (``np.float16(v)
    .view(np.uint16)``), as onnx releases before 1.10 wanted; current ones convert the values
    themselves, so the bits were stored as numbers: ``x * 1.1`` of a float16 x exported as
    ``x * 15464.0``, silently. Integer values given for a FLOAT16 tensor are read back as bits.
    """
    original = helper.make_tensor

    def make_tensor(name, data_type, dims, vals, raw=False):
        if data_type == onnx.TensorProto.FLOAT16 and not raw:
            values = np.asarray(vals)
            if values.dtype.kind in "ui":
                vals = values.astype(np.uint16).view(np.float16)
        return original(name, data_type, dims, vals, raw)
    helper.make_tensor = make_tensor
    try:
        yield
    finally:
        helper.make_tensor = original


# ----------------------------------------------------------------------------- missing ops

# Comparisons mx2onnx lacks (what `a < b` on two Symbols and `x <= 1` produce).  The
# elementwise ones are the broadcast ones restricted to equal shapes: same converters.
_SAME_AS_BROADCAST = ("lesser", "greater", "equal", "not_equal", "lesser_equal", "greater_equal")
# op -> (ONNX comparison, negate); MXNet casts the scalar to the input's dtype.
_SCALAR_COMPARISONS = {"_lesser_equal_scalar": ("LessOrEqual", False),
                       "_greater_equal_scalar": ("GreaterOrEqual", False),
                       "_not_equal_scalar": ("Equal", True)}


def _convert_scalar_comparison(node, **kwargs):
    """``x <op> scalar`` -> Constant, comparison (, Not), Cast back to x's dtype (MXNet's
    comparisons return 0/1 in the input's dtype)."""
    name, input_names, attrs = _op_translations_opset12.get_inputs(node, kwargs)
    dtype = np.dtype(_op_translations_opset12.get_input_dtypes(node, kwargs)[0])
    compare, negate = _SCALAR_COMPARISONS[node["op"]]
    scalar = np.array([float(attrs["scalar"])]).astype(dtype)
    nodes = [helper.make_node("Constant", [], [name + "_rhs"],
                              value=numpy_helper.from_array(scalar, name + "_scalar")),
             helper.make_node(compare, [input_names[0], name + "_rhs"], [name + "_cmp"])]
    if negate:
        nodes.append(helper.make_node("Not", [name + "_cmp"], [name + "_not"]))
    nodes.append(helper.make_node("Cast", [nodes[-1].output[0]], [name], name=name,
                                  to=helper.np_dtype_to_tensor_dtype(dtype)))
    return nodes


def _convert_boolean_mask(node, **kwargs):
    """``boolean_mask(data, index, axis)`` -> ``Compress(data, index != 0, axis)``: the rows
    whose index is non-zero, in order; a shape known only at run time, as in MXNet. MXNet
    refuses an index of another length than data's axis; Compress took a shorter one as the
    first rows' flags, silently (and a longer one failed further on): a Gather named
    ``<node>/mask_length_differs_from_rows`` past its one-element table fails the run there.
    Its result (False) is or-ed into the flags, so that no runtime prunes it (an Add to the
    index took no uint8, int8 or bool index, which MXNet takes)."""
    name, (data, index), attrs = _op_translations_opset12.get_inputs(node, kwargs)
    axis = int(attrs.get("axis", 0))

    def const(suffix, value):
        return helper.make_node("Constant", [], [name + suffix], value=numpy_helper.from_array(
            np.array(value, np.int64), name + suffix))
    guard = name + "/mask_length_differs_from_rows"
    return [const("_axis", [axis]), const("_first", [0]), const("_table", [0]),
            helper.make_node("Shape", [data], [name + "_data_shape"]),
            helper.make_node("Gather", [name + "_data_shape", name + "_axis"], [name + "_rows"]),
            helper.make_node("Shape", [index], [name + "_index_shape"]),
            helper.make_node("Gather", [name + "_index_shape", name + "_first"],
                             [name + "_flags"]),
            helper.make_node("Equal", [name + "_rows", name + "_flags"], [name + "_agree"]),
            helper.make_node("Not", [name + "_agree"], [name + "_differ"]),
            helper.make_node("Cast", [name + "_differ"], [name + "_at"],
                             to=onnx.TensorProto.INT64),
            helper.make_node("Gather", [name + "_table", name + "_at"], [guard], name=guard),
            helper.make_node("Cast", [guard], [name + "_false"], to=onnx.TensorProto.BOOL),
            helper.make_node("Cast", [index], [name + "_nonzero"], to=onnx.TensorProto.BOOL),
            helper.make_node("Or", [name + "_nonzero", name + "_false"], [name + "_keep"]),
            helper.make_node("Compress", [data, name + "_keep"], [name], name=name, axis=axis)]


def _convert_reshape(node, **kwargs):
    """``Reshape`` whose shape merges axes (-3), keeps the rest (-2) or splits an axis (-4:
    gluonnlp's attention heads), MXNet's codes that
    mx2onnx refuses (autograph's ``F.concat(*items)`` of collected rows is such a reshape):
    the target shape is computed from the input's, code by code (NOTE [reshape codes]); any
    other reshape goes to mx2onnx's converter."""
    attrs = node.get("attrs", {})
    codes = [int(c) for c in _op_translations_opset12.convert_string_to_list(attrs["shape"])]
    reverse = attrs.get("reverse", "False") in ("True", "true", "1")
    splits = [k for k, code in enumerate(codes) if code == -4]
    if reverse or not ({-4, -3, -2} & set(codes)) or -2 in codes[:-1] or any(
            len(codes) < k + 3 or codes[k + 1] < -1 or codes[k + 2] < -1 or
            0 in codes[k + 1:k + 3] or codes[k + 1:k + 3] == [-1, -1] for k in splits):
        return _MX2ONNX_RESHAPE(node, **kwargs)
    plain = [k for k, code in enumerate(codes) if code == -1 and not any(
        k - 2 <= s < k for s in splits)]
    if splits and any(k > splits[0] for k in plain):
        raise NotImplementedError("Reshape with a -1 after a -4: MXNet 1.9.1 infers that -1 "
                                  "wrongly (an output smaller than the input); give the size")
    name, input_names, _ = _op_translations_opset12.get_inputs(node, kwargs)
    nodes = [helper.make_node("Shape", [input_names[0]], [name + "_in_shape"])]

    def constant(value, hint):
        out = f"{name}_{hint}{len(nodes)}"
        nodes.append(helper.make_node("Constant", [], [out], value=numpy_helper.from_array(
            np.array(value, dtype=np.int64), out)))
        return out

    def dims(begin, end):   # the input's dims begin..end, a 1-D int64 tensor
        out = f"{name}_dims{len(nodes)}"
        nodes.append(helper.make_node("Slice", [name + "_in_shape", constant([begin], "from"),
                                                constant([end], "to")], [out]))
        return out

    pieces, axis, rest = [], 0, list(codes)
    while rest:
        code = rest.pop(0)
        if code == -4:      # one axis split in two sizes, one of them maybe -1 (the quotient)
            first, second = rest.pop(0), rest.pop(0)
            if -1 in (first, second):
                known = constant([second if first == -1 else first], "known")
                quotient = f"{name}_quotient{len(nodes)}"
                nodes.append(helper.make_node("Div", [dims(axis, axis + 1), known], [quotient]))
                pieces += [quotient, known] if first == -1 else [known, quotient]
            else:
                pieces += [constant([first], "size"), constant([second], "size")]
            axis += 1
        elif code == -3:
            merged = f"{name}_merged{len(nodes)}"
            nodes.append(helper.make_node("ReduceProd", [dims(axis, axis + 2)], [merged],
                                          keepdims=1))
            pieces.append(merged)
            axis += 2
        elif code == -2:
            pieces.append(dims(axis, np.iinfo(np.int64).max))
        elif code == 0:
            pieces.append(dims(axis, axis + 1))
            axis += 1
        else:               # a size, or -1 (inferred), as in ONNX
            pieces.append(constant([code], "size"))
            axis += 1
    nodes.append(helper.make_node("Concat", pieces, [name + "_shape"], axis=0))
    nodes.append(helper.make_node("Reshape", [input_names[0], name + "_shape"], [name],
                                  name=name))
    return nodes


# NOTE [reshape codes]
#     MXNet's reshape reads its target shape code by code, each consuming input axes: a size or
#     -1 one axis, 0 copies one, -3 multiplies two, -2 copies all that are left (so nothing
#     may follow it here), -4 splits one in the two sizes that follow (-1: the quotient).
#     ONNX's Reshape has only 0 (copy the axis at the *same* position,
#     not the next unread one) and -1, so the target is built at run time from Shape(x):
#     Slice per copied axis, ReduceProd per merged pair, Concat.  mx2onnx knows only fixed
#     patterns of -3 and none of -2.
_MX2ONNX_RESHAPE = MXNetGraph.registry_[12]["Reshape"]


def _convert_arg_extreme(node, **kwargs):
    """``argmax``/``argmin`` along an axis, without keepdims: ONNX's ArgMax of a 1-D input
    is a scalar where MXNet's is one element of shape (1,) (MXNet 1.x has no rank 0), so rows
    collected in a loop exported as (n,) instead of (n, 1) and failed ONNX's checker (issue
    24). Of an input MXNet knows to be 1-D, ArgMax with keepdims; of one of unknown rank,
    ArgMax with keepdims, then the axis dropped unless it was the only one (a shape computed
    at run time); mx2onnx's otherwise."""
    attrs = node.get("attrs", {})
    keepdims = attrs.get("keepdims", "False") in ("True", "true", "1")
    shape = ((kwargs.get(_ENTRY_SPECS_KWARG) or {}).get(tuple(node["inputs"][0][:2])) or
             (None, None))[0] or None     # (MXNet's () is an unknown shape)
    if attrs.get("axis", "None") == "None" or keepdims or (shape is not None and len(shape) > 1):
        return _MX2ONNX_ARG_EXTREME[node["op"]](node, **kwargs)
    name, input_names, _ = _op_translations_opset12.get_inputs(node, kwargs)
    dtype = np.dtype(_op_translations_opset12.get_input_dtypes(node, kwargs)[0])
    axis = int(attrs["axis"])
    onnx_op = "ArgMax" if node["op"] == "argmax" else "ArgMin"
    if shape is not None:
        return [helper.make_node(onnx_op, [input_names[0]], [name + "_index"], axis=axis,
                                 keepdims=1),
                helper.make_node("Cast", [name + "_index"], [name], name=name,
                                 to=helper.np_dtype_to_tensor_dtype(dtype))]
    last = np.iinfo(np.int64).max

    def constant(value, hint):
        return helper.make_node("Constant", [], [f"{name}_{hint}"], value=numpy_helper.from_array(
            np.array(value, dtype=np.int64), f"{name}_{hint}"))
    return [
        helper.make_node(onnx_op, [input_names[0]], [name + "_kept"], axis=axis, keepdims=1),
        helper.make_node("Shape", [name + "_kept"], [name + "_kept_shape"]),
        constant([0], "zero"), constant([axis], "axis"),
        constant([axis + 1 if axis != -1 else last], "after"), constant([last], "last"),
        constant([1], "one"),
        helper.make_node("Slice", [name + "_kept_shape", name + "_zero", name + "_axis"],
                         [name + "_before"]),
        helper.make_node("Slice", [name + "_kept_shape", name + "_after", name + "_last"],
                         [name + "_rest"]),
        # the dims without the axis, then a 1 kept only when they are none
        helper.make_node("Concat", [name + "_before", name + "_rest", name + "_one"],
                         [name + "_padded"], axis=0),
        helper.make_node("Size", [name + "_before"], [name + "_n_before"]),
        helper.make_node("Size", [name + "_rest"], [name + "_n_rest"]),
        helper.make_node("Add", [name + "_n_before", name + "_n_rest"], [name + "_n"]),
        helper.make_node("Reshape", [name + "_n", name + "_one"], [name + "_n1"]),
        helper.make_node("Max", [name + "_n1", name + "_one"], [name + "_end"]),
        helper.make_node("Slice", [name + "_padded", name + "_zero", name + "_end"],
                         [name + "_shape"]),
        helper.make_node("Reshape", [name + "_kept", name + "_shape"], [name + "_index"]),
        helper.make_node("Cast", [name + "_index"], [name], name=name,
                         to=helper.np_dtype_to_tensor_dtype(dtype)),
    ]


def _convert_slice(node, **kwargs):
    """``slice`` with a negative step (autograph's ``x[::-1]``, ``r[3:0:-1]``), which mx2onnx
    refuses: ONNX's Slice takes negative steps with Python's meaning; an omitted begin is the
    last element and an omitted end is past the first (the largest and smallest int64, which
    Slice clamps). Slices with positive steps go to mx2onnx's converter."""
    attrs = node.get("attrs", {})
    convert = _op_translations_opset12.convert_string_to_list
    steps = convert(attrs.get("step", "[]"))
    if not any(step is not None and step < 0 for step in steps):
        return _MX2ONNX_SLICE(node, **kwargs)
    name, input_names, _ = _op_translations_opset12.get_inputs(node, kwargs)
    begins, ends = convert(attrs["begin"]), convert(attrs["end"])
    steps = [1 if step is None else step for step in steps]
    big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    starts = [(big if step < 0 else 0) if b is None else b for b, step in zip(begins, steps)]
    stops = [(small if step < 0 else big) if e is None else e for e, step in zip(ends, steps)]
    parts = {"starts": starts, "ends": stops, "axes": list(range(len(starts))), "steps": steps}
    nodes = [helper.make_node("Constant", [], [f"{name}_{key}"], value=numpy_helper.from_array(
        np.array(value, dtype=np.int64), f"{name}_{key}")) for key, value in parts.items()]
    nodes.append(helper.make_node("Slice", [input_names[0]] + [f"{name}_{key}" for key in parts],
                                  [name], name=name))
    return nodes


def _convert_pick(node, **kwargs):
    """``pick(data, index, axis, mode, keepdims)`` (gluonnlp's losses and beam searches read
    one class per row with it), which mx2onnx lacks: the index cast to int64, clipped to
    ``[0, n - 1]`` (mode 'clip', MXNet's default) or taken modulo ``n`` ('wrap'), reshaped to
    data's shape with 1 on ``axis``, GatherElements; without keepdims, the index's shape
    (data's without ``axis``, as MXNet's output). An axis of None (pick over the flattened
    data) stays refused."""
    attrs = node.get("attrs", {})
    if attrs.get("axis", "-1") == "None":
        raise NotImplementedError("pick with axis=None")
    name, input_names, _ = _op_translations_opset12.get_inputs(node, kwargs)
    data, index = input_names[:2]
    axis = int(attrs.get("axis", "-1"))
    keepdims = attrs.get("keepdims", "False") in ("True", "true", "1")
    last = np.iinfo(np.int64).max

    def constant(value, hint):
        return helper.make_node("Constant", [], [f"{name}_{hint}"], value=numpy_helper.from_array(
            np.array(value, dtype=np.int64), f"{name}_{hint}"))
    nodes = [
        constant([0], "zero"), constant([axis], "axis"), constant([1], "one"),
        constant([axis + 1 if axis != -1 else last], "after"), constant([last], "last"),
        helper.make_node("Shape", [data], [name + "_shape"]),
        helper.make_node("Slice", [name + "_shape", name + "_axis", name + "_after"],
                         [name + "_n"]),
        helper.make_node("Cast", [index], [name + "_raw"], to=onnx.TensorProto.INT64)]
    if attrs.get("mode", "clip") == "wrap":
        nodes.append(helper.make_node("Mod", [name + "_raw", name + "_n"], [name + "_index"]))
    else:
        nodes += [helper.make_node("Sub", [name + "_n", name + "_one"], [name + "_top"]),
                  helper.make_node("Max", [name + "_raw", name + "_zero"], [name + "_low"]),
                  helper.make_node("Min", [name + "_low", name + "_top"], [name + "_index"])]
    nodes += [
        helper.make_node("Slice", [name + "_shape", name + "_zero", name + "_axis"],
                         [name + "_before"]),
        helper.make_node("Slice", [name + "_shape", name + "_after", name + "_last"],
                         [name + "_rest"]),
        helper.make_node("Concat", [name + "_before", name + "_one", name + "_rest"],
                         [name + "_kept_shape"], axis=0),
        helper.make_node("Reshape", [name + "_index", name + "_kept_shape"], [name + "_at"]),
        helper.make_node("GatherElements", [data, name + "_at"],
                         [name + ("" if keepdims else "_kept")], axis=axis,
                         **({"name": name} if keepdims else {}))]
    if not keepdims:
        nodes += [helper.make_node("Shape", [index], [name + "_out_shape"]),
                  helper.make_node("Reshape", [name + "_kept", name + "_out_shape"], [name],
                                   name=name)]
    return nodes


def _convert_dot(node, **kwargs):
    """``dot(a, b, transpose_a, transpose_b)`` as MXNet computes it for inputs of any rank:
    the sum over a's last axis (its first, with transpose_a) and b's first (its last, with
    transpose_b), the output's shape a's other axes then b's, (1,) when none are left. mx2onnx
    emits Transpose + MatMul, which is numpy's matmul: for inputs over 2-D another shape and
    other values, silently (a (4, 2, 3) with transpose_a gave (3, 2, 5) for MXNet's (2, 3, 5))
    or an error of onnxruntime's. Here both are reshaped to matrices around the summed axis,
    multiplied, and the product reshaped to MXNet's shape."""
    name, input_names, attrs = _op_translations_opset12.get_inputs(node, kwargs)
    a, b = input_names[:2]
    trans_a = attrs.get("transpose_a", "False") in ("True", "true", "1")
    trans_b = attrs.get("transpose_b", "False") in ("True", "true", "1")
    last = np.iinfo(np.int64).max

    def constant(value, hint):
        return helper.make_node("Constant", [], [f"{name}_{hint}"], value=numpy_helper.from_array(
            np.array(value, dtype=np.int64), f"{name}_{hint}"))

    def part(shape, start, end, out):
        return helper.make_node("Slice", [shape, f"{name}_{start}", f"{name}_{end}"],
                                [f"{name}_{out}"])
    nodes = [constant([0], "zero"), constant([1], "one"), constant([-1], "minus_one"),
             constant([last], "last"),
             helper.make_node("Shape", [a], [name + "_a_shape"]),
             helper.make_node("Shape", [b], [name + "_b_shape"])]
    # the summed axis K, a's other axes, b's other axes
    if trans_a:
        nodes += [part(name + "_a_shape", "zero", "one", "k"),
                  part(name + "_a_shape", "one", "last", "a_rest")]
    else:
        nodes += [part(name + "_a_shape", "minus_one", "last", "k"),
                  part(name + "_a_shape", "zero", "minus_one", "a_rest")]
    nodes.append(part(name + "_b_shape", "zero", "minus_one", "b_rest") if trans_b else
                 part(name + "_b_shape", "one", "last", "b_rest"))
    k_first = helper.make_node("Concat", [name + "_k", name + "_minus_one"], [name + "_k_n"],
                               axis=0)
    k_last = helper.make_node("Concat", [name + "_minus_one", name + "_k"], [name + "_n_k"],
                              axis=0)
    nodes += [k_first, k_last]
    if trans_a:    # (K, M) -> (M, K)
        nodes += [helper.make_node("Reshape", [a, name + "_k_n"], [name + "_a_km"]),
                  helper.make_node("Transpose", [name + "_a_km"], [name + "_a2"], perm=[1, 0])]
    else:
        nodes.append(helper.make_node("Reshape", [a, name + "_n_k"], [name + "_a2"]))
    if trans_b:    # (N, K) -> (K, N)
        nodes += [helper.make_node("Reshape", [b, name + "_n_k"], [name + "_b_nk"]),
                  helper.make_node("Transpose", [name + "_b_nk"], [name + "_b2"], perm=[1, 0])]
    else:
        nodes.append(helper.make_node("Reshape", [b, name + "_k_n"], [name + "_b2"]))
    nodes += [
        helper.make_node("MatMul", [name + "_a2", name + "_b2"], [name + "_product"]),
        # a's other axes, b's, and a 1 kept only when there are none (MXNet has no rank 0)
        helper.make_node("Concat", [name + "_a_rest", name + "_b_rest", name + "_one"],
                         [name + "_padded"], axis=0),
        helper.make_node("Size", [name + "_a_rest"], [name + "_n_a"]),
        helper.make_node("Size", [name + "_b_rest"], [name + "_n_b"]),
        helper.make_node("Add", [name + "_n_a", name + "_n_b"], [name + "_n"]),
        helper.make_node("Reshape", [name + "_n", name + "_one"], [name + "_n1"]),
        helper.make_node("Max", [name + "_n1", name + "_one"], [name + "_end"]),
        helper.make_node("Slice", [name + "_padded", name + "_zero", name + "_end"],
                         [name + "_out_shape"]),
        helper.make_node("Reshape", [name + "_product", name + "_out_shape"], [name],
                         name=name)]
    return nodes


def _excluding(convert):
    """A reduction's converter (sum, mean, prod, max, min) that also takes ``exclude=True``
    (reduce the axes *not* listed), which mx2onnx's ignore: ``F.mean(x, axis=1,
    exclude=True)`` of a (2, 3, 4) input exported as the mean over axis 1, (2, 4) for
    MXNet's (3,), silently. The listed axes are replaced by the others, from the input's rank
    (an input whose rank is known only at run time is refused)."""
    def convert_reduction(node, **kwargs):
        attrs = node.get("attrs", {})
        if attrs.get("exclude", "False") not in ("True", "true", "1"):
            return convert(node, **kwargs)
        shape = ((kwargs.get(_ENTRY_SPECS_KWARG) or {}).get(tuple(node["inputs"][0][:2])) or
                 (None, None))[0] or None
        listed = _op_translations_opset12.convert_string_to_list(attrs.get("axis", "()")) \
            if attrs.get("axis", "None") != "None" else []
        if shape is None or not listed:
            raise NotImplementedError(
                f"{node['op']} with exclude=True " + ("of an input whose rank is known only "
                                                      "at run time" if shape is None else
                                                      "and no axis"))
        listed = {a % len(shape) for a in listed}
        others = tuple(a for a in range(len(shape)) if a not in listed)
        if not others:
            raise NotImplementedError(f"{node['op']} with exclude=True of every axis")
        return convert(dict(node, attrs=dict(attrs, axis=str(others), exclude="False")),
                       **kwargs)
    return convert_reduction


def _one_element(convert):
    """A reduction's converter whose result over every axis without keepdims is MXNet's (1,)
    (MXNet has no rank 0): mx2onnx's gave a scalar for ``F.sum(x)`` at opset 12 and for
    ``F.sum(x, axis=(0, 1))`` of a matrix, a model ONNX's checker refused; its opset-13 sum
    over every axis with keepdims reshaped the kept (1, 1, ...) to (1,): refused too."""
    def convert_reduction(node, **kwargs):
        result = convert(node, **kwargs)
        attrs = node.get("attrs", {})
        if attrs.get("keepdims", "False") in ("True", "true", "1"):
            for made in result[0] if isinstance(result, tuple) else result:
                if isinstance(made, onnx.NodeProto) and made.op_type == "Reshape" and \
                        made.input[1] == made.output[0] + "_1":
                    made.op_type = "Identity"
                    del made.input[1:]
            return result
        axis = attrs.get("axis", "None")
        shape = ((kwargs.get(_ENTRY_SPECS_KWARG) or {}).get(tuple(node["inputs"][0][:2])) or
                 (None, None))[0] or None
        listed = [] if axis in ("None", "()", "[]") else \
            _op_translations_opset12.convert_string_to_list(axis)
        if listed and (shape is None or {a % len(shape) for a in listed} != set(
                range(len(shape)))):
            return result
        nodes = result[0] if isinstance(result, tuple) else result
        name = _op_translations_opset12.get_inputs(node, kwargs)[0]
        for made in nodes:
            if isinstance(made, onnx.NodeProto) and name in made.output:
                made.output[list(made.output).index(name)] = name + "_all_axes"
                made.name = name + "_all_axes"
        nodes += [helper.make_node("Constant", [], [name + "_one"],
                                   value=numpy_helper.from_array(np.array([1], np.int64),
                                                                 name + "_one")),
                  helper.make_node("Reshape", [name + "_all_axes", name + "_one"], [name],
                                   name=name)]
        return result
    return convert_reduction


def _convert_one_hot(node, **kwargs):
    """``one_hot`` with mx2onnx's converter, a negative index made out of range first: MXNet
    gives a row of off_value for any index outside ``[0, depth)`` (a padding label -1 one-hot
    encodes to zeros), ONNX's OneHot counts negative ones from the end (-1: the last class),
    which exported silently other rows."""
    dtype = np.dtype(node.get("attrs", {}).get("dtype", "float32"))
    if dtype not in (np.float32, np.int64):   # onnxruntime's OneHot has no other values
        node = dict(node, attrs=dict(node["attrs"], dtype="float32"))
    nodes = _MX2ONNX_ONE_HOT(node, **kwargs)
    cast, one_hot = nodes[-2:]
    name = one_hot.output[0]
    index = name + "_in_range"
    extra = [helper.make_node("Constant", [], [name + "_zero"], value=numpy_helper.from_array(
                 np.array([0], dtype=np.int64), name + "_zero")),
             helper.make_node("Less", [cast.output[0], name + "_zero"], [name + "_negative"]),
             helper.make_node("Where", [name + "_negative", one_hot.input[1], cast.output[0]],
                              [index])]
    one_hot.input[0] = index
    if dtype in (np.float32, np.int64):
        return nodes[:-1] + extra + [one_hot]
    one_hot.output[0] = name + "_float"
    return nodes[:-1] + extra + [one_hot, helper.make_node(
        "Cast", [name + "_float"], [name], to=helper.np_dtype_to_tensor_dtype(dtype))]


def _convert_embedding(node, **kwargs):
    """``Embedding`` with mx2onnx's converter, its indices clipped to ``[0, input_dim - 1]``
    first as MXNet clips them (an index -1, a padding id, reads row 0): ONNX's Gather read
    row -1 from the end, silently, and failed the run on an index past the end."""
    nodes, _ = _MX2ONNX_EMBEDDING(node, **kwargs)
    # the weight's dtype (mx2onnx took the dtype attribute, float32 after net.cast('float64'))
    dtypes = (_op_translations_opset12.get_input_dtypes(node, kwargs)[1],)
    cast, gather = nodes
    name = gather.output[0]

    def constant(value, hint):
        return helper.make_node("Constant", [], [f"{name}_{hint}"], value=numpy_helper.from_array(
            np.array(value, dtype=np.int64), f"{name}_{hint}"))
    extra = [constant([0], "zero"), constant([1], "one"),
             helper.make_node("Shape", [gather.input[0]], [name + "_weight_shape"]),
             helper.make_node("Slice", [name + "_weight_shape", name + "_zero", name + "_one"],
                              [name + "_rows"]),
             helper.make_node("Sub", [name + "_rows", name + "_one"], [name + "_top"]),
             helper.make_node("Max", [cast.output[0], name + "_zero"], [name + "_low"]),
             helper.make_node("Min", [name + "_low", name + "_top"], [name + "_in_range"])]
    gather.input[1] = name + "_in_range"
    return [cast] + extra + [gather], dtypes


def _convert_broadcast_to(node, **kwargs):
    """``broadcast_to`` whose shape holds a 0 (MXNet: keep that dimension of the input), which
    mx2onnx passed to Expand as a 0 (an error of onnxruntime's): each 0 is replaced by the
    input's dimension when the model runs. Other shapes go to mx2onnx's converter."""
    shape = _op_translations_opset12.convert_string_to_list(node["attrs"]["shape"])
    if 0 not in shape:
        return _MX2ONNX_BROADCAST_TO(node, **kwargs)
    name, input_names, _ = _op_translations_opset12.get_inputs(node, kwargs)
    return [helper.make_node("Constant", [], [name + "_given"], value=numpy_helper.from_array(
                np.array(shape, dtype=np.int64), name + "_given")),
            helper.make_node("Constant", [], [name + "_zero"], value=numpy_helper.from_array(
                np.array([0], dtype=np.int64), name + "_zero")),
            helper.make_node("Shape", [input_names[0]], [name + "_in_shape"]),
            helper.make_node("Equal", [name + "_given", name + "_zero"], [name + "_kept"]),
            helper.make_node("Where", [name + "_kept", name + "_in_shape", name + "_given"],
                             [name + "_shape"]),
            helper.make_node("Expand", [input_names[0], name + "_shape"], [name], name=name)]


def _convert_where(node, **kwargs):
    """``where(cond, x, y)``: MXNet's x and y have one shape, and cond either that shape or
    (x.shape[0],), picking rows. mx2onnx reshaped cond to x's rank by a shape built with
    ``Pad``, which ONNX's shape inference cannot follow: the result had no shape, and a loop
    body's state computed by ``where`` made onnxruntime refuse the Scan ("Subgraph must have
    the shape set for all outputs"). Here cond's rank decides, as MXNet inferred it: x's rank,
    a plain Where; 1, cond reshaped to (-1, 1, ..., 1); unknown, Where over the three
    transposed (axes reversed: a 1-D cond then broadcasts along x's first axis, a cond of
    x's shape stays aligned) and the result transposed back."""
    name, (cond, x, y), _ = _op_translations_opset12.get_inputs(node, kwargs)
    specs = kwargs.get(_ENTRY_SPECS_KWARG) or {}
    cond_rank, x_rank = (len(shape) if shape else None for shape in (
        (specs.get(tuple(entry[:2])) or (None, None))[0] for entry in node["inputs"][:2]))
    nodes = []
    if cond_rank == 1 and x_rank is not None and x_rank > 1:
        nodes.append(helper.make_node("Constant", [], [name + "_rows"],
                                      value=numpy_helper.from_array(
                                          np.array([-1] + [1] * (x_rank - 1), np.int64),
                                          name + "_rows")))
        nodes.append(helper.make_node("Reshape", [cond, name + "_rows"], [name + "_cond"]))
        cond = name + "_cond"
    transposed = cond_rank is None or x_rank is None
    if transposed:
        for value in (cond, x, y):
            nodes.append(helper.make_node("Transpose", [value], [f"{value}_{name}_t"]))
        cond, x, y = (f"{value}_{name}_t" for value in (cond, x, y))
    nodes.append(helper.make_node("Cast", [cond], [name + "_bool"], to=onnx.TensorProto.BOOL))
    out = name + "_t" if transposed else name
    nodes.append(helper.make_node("Where", [name + "_bool", x, y], [out], name=out))
    if transposed:
        nodes.append(helper.make_node("Transpose", [out], [name], name=name))
    return nodes


_MX2ONNX_ONE_HOT = MXNetGraph.registry_[12]["one_hot"]
_MX2ONNX_EMBEDDING = MXNetGraph.registry_[12]["Embedding"]
_MX2ONNX_BROADCAST_TO = MXNetGraph.registry_[12]["broadcast_to"]
_MX2ONNX_SLICE = MXNetGraph.registry_[12]["slice"]
_MX2ONNX_SEQUENCE_MASK = {v: MXNetGraph.registry_[v]["SequenceMask"] for v in (12, 13)}
_MX2ONNX_ARG_EXTREME = {op: MXNetGraph.registry_[12][op] for op in ("argmax", "argmin")}


def _convert_sequence_mask(node, **kwargs):
    """``SequenceMask`` with mx2onnx's converter, its mask value made of the data's dtype
    (mx2onnx's is float32: float64 or float16 data gave a model ONNX's checker refuses)."""
    nodes = _MX2ONNX_SEQUENCE_MASK[kwargs.get("opset_version", 13)](node, **kwargs)
    name = _op_translations_opset12.get_inputs(node, kwargs)[0]
    dtype = np.dtype(_op_translations_opset12.get_input_dtypes(node, kwargs)[0])
    initializers = kwargs["initializer"]
    for k, init in enumerate(initializers):
        if init.name == name + "_mask_val":
            value = numpy_helper.to_array(init).astype(dtype)
            initializers[k] = numpy_helper.from_array(value, init.name)
    return nodes


def _register_missing_ops():
    table = MXNetGraph.registry_[12]
    if "_contrib_boolean_mask" not in table:
        MXNetGraph.register("_contrib_boolean_mask", opset_version=12)(_convert_boolean_mask)
    for op in _SAME_AS_BROADCAST:
        if f"_{op}" not in table:
            MXNetGraph.register(f"_{op}", opset_version=12)(table[f"broadcast_{op}"])
    for op in _SCALAR_COMPARISONS:
        if op not in table:
            MXNetGraph.register(op, opset_version=12)(_convert_scalar_comparison)
    MXNetGraph.register("Reshape", opset_version=12)(_convert_reshape)
    MXNetGraph.register("slice", opset_version=12)(_convert_slice)
    MXNetGraph.register("dot", opset_version=12)(_convert_dot)
    MXNetGraph.register("one_hot", opset_version=12)(_convert_one_hot)
    MXNetGraph.register("Embedding", opset_version=12)(_convert_embedding)
    for version in (12, 13):
        MXNetGraph.register("SequenceMask", opset_version=version)(_convert_sequence_mask)
    MXNetGraph.register("broadcast_to", opset_version=12)(_convert_broadcast_to)
    MXNetGraph.register("where", opset_version=12)(_convert_where)
    for version in (12, 13):
        for op in ("sum", "mean", "prod", "max", "min"):
            if op in MXNetGraph.registry_.get(version, {}):
                MXNetGraph.register(op, opset_version=version)(
                    _excluding(_one_element(MXNetGraph.registry_[version][op])))
    if "pick" not in table:
        MXNetGraph.register("pick", opset_version=12)(_convert_pick)
    for op in _MX2ONNX_ARG_EXTREME:
        MXNetGraph.register(op, opset_version=12)(_convert_arg_extreme)


_patch_mx2onnx_onnx_mapping()
_register_missing_ops()
