"""Converters of MXNet's layer ops (LeakyReLU's prelu and rrelu, L2Normalization, 1-D
convolutions, Pooling, BatchNorm, GroupNorm, BilinearResize2D, RNN, box_nms) where mx2onnx's are
silently wrong, refuse what ONNX cannot match, or lack a layout, SequenceReverse of any rank,
registered for opsets 12 and 13 at import (NOTE [added converters] in ``mx2onnx_added.py``)."""
import numpy as np
from onnx import helper, numpy_helper
from mxnet.onnx.mx2onnx._op_translations import _op_translations_opset12 as _mx2onnx

from .mx2onnx_kit import _flag, _original, _shape_of_input, _start, _tensor_type, register

_FLOAT = _tensor_type(np.float32)

def _convert_leaky_relu(node, **kwargs):
    """``LeakyReLU`` with mx2onnx's converter, but ``prelu`` (gamma along axis 1) and ``rrelu``
    (inference: slope (lower + upper) / 2), NOTE [added converters]."""
    attrs = node.get("attrs", {})
    act_type = attrs.get("act_type", "leaky")
    dtype = np.dtype(_mx2onnx.get_input_dtypes(node, kwargs)[0])
    if act_type not in ("prelu", "rrelu", "gelu") and (act_type != "leaky" or dtype != np.float64):
        return _original("LeakyReLU", kwargs)(node, **kwargs)
    out, inputs, attrs, dtype = _start(node, kwargs)
    if act_type in ("leaky", "rrelu") and dtype == np.float64:
        # MXNet keeps a float64 x > 0 and computes x * slope in float32 (x rounded first)
        slope = float(attrs.get("slope", 0.25)) if act_type == "leaky" else (float(attrs.get(
            "lower_bound", 0.125)) + float(attrs.get("upper_bound", 0.334))) / 2
        scaled = out.add("Mul", [out.add("Cast", inputs[:1], to=_FLOAT),
                                 out.const([slope], np.float32)])
        positive = out.add("Greater", [inputs[0], out.const([0], dtype)])
        out.add("Where", [positive, inputs[0], out.add("Cast", [scaled], to=_tensor_type(
            dtype))], final=True)
        return out
    if act_type == "gelu":
        # mshadow's gelu rounds x to float32 whatever its dtype (then computes in double);
        # onnxruntime has Erf of float32 only: float16 and float64 are computed in float32
        x = inputs[0] if dtype == np.float32 else out.add("Cast", inputs[:1], to=_FLOAT)
        erf = out.add("Erf", [out.add("Div", [x, out.const([np.sqrt(2)], np.float32)])])
        half_x = out.add("Mul", [x, out.const([0.5], np.float32)])
        gelu = out.add("Mul", [half_x, out.add("Add", [erf, out.const([1], np.float32)])])
        out.add("Cast", [gelu], final=True, to=_tensor_type(dtype))
        return out
    if act_type == "rrelu":
        slope = (float(attrs.get("lower_bound", 0.125)) + float(attrs.get("upper_bound", 0.334)))
        out.add("LeakyRelu", inputs[:1], final=True, alpha=slope / 2)
        return out
    x, gamma = inputs[:2]
    # gamma as (C, 1, ..., 1): one 1 per axis of x after the channels
    trailing = out.add("Sub", [out.add("Shape", [out.add("Shape", [x])]), out.const([2])])
    ones = out.add("ConstantOfShape", [trailing],
                   value=numpy_helper.from_array(np.ones(1, np.int64)))
    shape = out.add("Concat", [out.const([-1]), ones], axis=0)
    gamma = out.add("Reshape", [gamma, shape])
    if dtype != np.float64:
        out.add("PRelu", [x, gamma], final=True)
        return out
    # as leaky: MXNet keeps a float64 x > 0 and computes x * gamma in float32
    scaled = out.add("Mul", [out.add("Cast", [x], to=_FLOAT), out.add("Cast", [gamma], to=_FLOAT)])
    positive = out.add("Greater", [x, out.const([0], dtype)])
    out.add("Where", [positive, x, out.add("Cast", [scaled], to=_tensor_type(dtype))], final=True)
    return out


def _convert_sequence_reverse(node, **kwargs):
    """``SequenceReverse`` without lengths reverses every sequence whole: ONNX ReverseSequence
    with the time axis' length for each batch entry. mx2onnx's split the input's shape into
    three, so a (time, batch) or 4-D input gave a model ONNX's checker refuses (a CRF's
    Viterbi path is 2-D); with lengths its converter is rank-agnostic and is kept."""
    if _flag(node.get("attrs", {}), "use_sequence_length"):
        return _original("SequenceReverse", kwargs)(node, **kwargs)
    out, inputs, _, _ = _start(node, kwargs)
    lengths = out.add("Expand", [out.dim(inputs[0], 0), out.dim(inputs[0], 1)])
    out.add("ReverseSequence", [inputs[0], lengths], final=True, batch_axis=1, time_axis=0)
    return out


def _convert_l2_normalization(node, **kwargs):
    """``L2Normalization``: ``x / sqrt(sum(x**2) + eps)`` over the axes of its mode (instance:
    all but the first, channel: axis 1, spatial: from axis 2); mx2onnx took channel mode only
    and dropped eps (silently other values for a large eps)."""
    out, (x,), attrs, dtype = _start(node, kwargs)
    mode = attrs.get("mode", "instance")
    shape = _shape_of_input(node, kwargs)
    if shape is None:
        raise NotImplementedError("L2Normalization of an input whose rank is known only at "
                                  "run time")
    axes = {"channel": [1], "spatial": list(range(2, len(shape)))}.get(
        mode, list(range(1, len(shape))))
    squares = out.add("ReduceSumSquare", [x], axes=axes, keepdims=1)
    norm = out.add("Sqrt", [out.add("Add", [squares, out.const([float(attrs.get(
        "eps", 1e-10))], dtype)])])
    out.add("Div", [x, norm], final=True)
    return out


def _convert_bilinear_resize(node, **kwargs):
    """``BilinearResize2D`` with mx2onnx's converter, which always resized with aligned corners:
    ``align_corners=False`` (MXNet: half-pixel centres clamped at 0, the first pixel for an
    output of 1, as ONNX's pytorch_half_pixel) exported silently other values."""
    nodes = _original("_contrib_BilinearResize2D", kwargs)(node, **kwargs)
    if not _flag(node.get("attrs", {}), "align_corners", "True"):
        for attr in nodes[-1].attribute:
            if attr.name == "coordinate_transformation_mode":
                attr.s = b"pytorch_half_pixel"
    return nodes


def _convert_rnn(node, **kwargs):
    """``RNN`` (Gluon's LSTM, GRU, RNN layers): mx2onnx's converter for one layer in one
    direction; several layers or both directions one ONNX LSTM/GRU/RNN per layer
    (``_convert_rnn_layers``), where mx2onnx refused them or split the weights of layers whose
    input size is not the state size wrongly (a model onnxruntime refuses)."""
    attrs = node.get("attrs", {})
    for key, default, why in (
            ("projection_size", "None", "ONNX's LSTM has no projection"),
            ("use_sequence_length", "False", "MXNet runs it on GPU only"),
            ("lstm_state_clip_min", "None", "ONNX's LSTM clips the cell's input, not its state"),
            ("lstm_state_clip_max", "None", "ONNX's LSTM clips the cell's input, not its state")):
        if str(attrs.get(key, default)) not in (default, "false", "0"):
            raise NotImplementedError(f"RNN with {key}={attrs[key]}: {why}")
    if int(attrs.get("num_layers", "1")) > 1 or _flag(attrs, "bidirectional"):
        return _convert_rnn_layers(node, **kwargs)
    return _original("RNN", kwargs)(node, **kwargs)


# MXNet's gates -> ONNX's: LSTM i, f, g, o -> i, o, f, c; GRU r, z, n -> z, r, h
_GATES = {"lstm": ("LSTM", [0, 3, 1, 2]), "gru": ("GRU", [1, 0, 2]),
          "rnn_relu": ("RNN", [0]), "rnn_tanh": ("RNN", [0])}


def _convert_rnn_layers(node, **kwargs):
    """``RNN`` of several layers and/or both directions: per layer one ONNX op over the
    previous layer's output (directions concatenated on the features, as MXNet), its weights
    sliced from MXNet's flat parameter vector (every layer's and direction's i2h and h2h
    weights, then their biases) with the gates reordered; the states of all layers
    concatenated. GRU is ONNX's with linear_before_reset (MXNet applies the reset gate after
    the h2h product)."""
    out, inputs, attrs, dtype = _start(node, kwargs)
    mode = attrs.get("mode", "lstm")
    shape = _shape_of_input(node, kwargs)
    if shape is None or shape[-1] is None:
        raise NotImplementedError("RNN of several layers or both directions, of an input "
                                  "whose feature size is known only at run time")
    op, order = _GATES[mode]
    gates, hidden = len(order), int(attrs["state_size"])
    layers, dirs = int(attrs.get("num_layers", "1")), 2 if _flag(attrs, "bidirectional") else 1
    x, param = inputs[:2]
    # the initial states to (layers * dirs, N, H): Gluon's default ones are zeros of batch 1
    every = out.add("Concat", [out.const([layers * dirs]), out.dim(x, 1), out.const([hidden])],
                    axis=0)
    h0 = out.add("Expand", [inputs[2], every])
    c0 = out.add("Expand", [inputs[3], every]) if mode == "lstm" else None
    offset = [0]

    def piece(size, shape):   # the next ``size`` values of the flat parameters, reordered
        begin = offset[0]
        offset[0] += size
        values = out.add("Slice", [param, out.const([begin]), out.const([begin + size]),
                                   out.const([0])])
        grouped = out.add("Reshape", [values, out.const([gates, hidden, *shape])])
        ordered = out.add("Gather", [grouped, out.const(order)], axis=0)
        return out.add("Reshape", [ordered, out.const([1, gates * hidden, *shape])])
    sizes = [shape[-1]] + [dirs * hidden] * (layers - 1)
    weights = [[(piece(gates * hidden * size, [size]), piece(gates * hidden * hidden, [hidden]))
                for _ in range(dirs)] for size in sizes]
    biases = [[out.add("Concat", [piece(gates * hidden, []), piece(gates * hidden, [])], axis=1)
               for _ in range(dirs)] for _ in sizes]
    extra = {"linear_before_reset": 1} if mode == "gru" else \
        {"activations": [mode[4:].capitalize()] * dirs} if op == "RNN" else {}
    h_n, c_n = [], []
    for layer in range(layers):
        def states(value, layer=layer):
            return out.add("Slice", [value, out.const([layer * dirs]),
                                     out.const([(layer + 1) * dirs]), out.const([0])])
        w, r = (out.add("Concat", [pair[k] for pair in weights[layer]], axis=0) for k in (0, 1))
        b = out.add("Reshape", [out.add("Concat", biases[layer], axis=0),
                                out.const([dirs, 2 * gates * hidden])])
        step = f"{out.name}_layer{layer}"
        results = [f"{step}_y", f"{step}_h"] + ([f"{step}_c"] if c0 else [])
        out.append(helper.make_node(
            op, [x, w, r, b, "", states(h0)] + ([states(c0)] if c0 else []), results,
            hidden_size=hidden, direction="bidirectional" if dirs == 2 else "forward", **extra))
        h_n.append(results[1])
        c_n += results[2:]
        # (T, dirs, N, H) -> (T, N, dirs * H)
        y = out.add("Transpose", [results[0]], perm=[0, 2, 1, 3])
        x = out.add("Reshape", [y, out.const([0, 0, -1])])
    out.add("Identity", [x], final=True)
    if _flag(attrs, "state_outputs"):
        for k, parts in ((1, h_n), (2, c_n)):
            if parts:
                out.append(helper.make_node("Identity", [out.add("Concat", parts, axis=0)],
                                            [f"{out.name}{k}"], name=f"{out.name}{k}"))
    return out


def _convert_box_nms(node, **kwargs):
    """``box_nms`` with mx2onnx's converter, but class-aware suppression (an ``id_index`` with
    ``force_suppress=False``, MXNet's default) refused: ONNX's NonMaxSuppression would also
    suppress boxes of other classes, which mx2onnx only logged."""
    attrs = node.get("attrs", {})
    dtype = np.dtype(_mx2onnx.get_input_dtypes(node, kwargs)[0])
    if dtype != np.float32:
        raise NotImplementedError(f"box_nms of {dtype} boxes: ONNX's NonMaxSuppression takes "
                                  f"float32 only, and overlaps computed in float32 could keep "
                                  f"other boxes than MXNet's; cast the boxes to float32")
    if int(attrs.get("id_index", "-1")) != -1 and not _flag(attrs, "force_suppress"):
        raise NotImplementedError("box_nms with an id_index and force_suppress=False (boxes "
                                  "of different classes do not suppress each other in MXNet; "
                                  "ONNX's NonMaxSuppression has no classes here): pass "
                                  "force_suppress=True or id_index=-1 if that is what you want")
    return _original("_contrib_box_nms", kwargs)(node, **kwargs)


def _one_dimensional(op):
    """mx2onnx's ``Convolution``, which refuses MXNet's 1-D layout ``NCW`` (Gluon's Conv1D)
    though ONNX's Conv takes a 1-D kernel as it is."""
    def convert(node, **kwargs):
        attrs = node.get("attrs", {})
        if attrs.get("layout") == "NCW":
            node = dict(node, attrs={k: v for k, v in attrs.items() if k != "layout"})
        return _original(op, kwargs)(node, **kwargs)
    return convert


def _convert_pooling(node, **kwargs):
    """``Pooling`` with mx2onnx's converter, and: the 1-D layout ``NCW``; ``sum`` pools and
    ``lp`` pools of p 1 and 3, which MXNet computes without absolute values (sum of x, cube
    root of the sum of x**3) where ONNX's LpPool takes |x|: silently other values for negative
    inputs; and ``pooling_convention='full'`` checked window by window: ONNX's ceil mode drops
    a last window that starts in the padding, MXNet's keeps it (another output shape)."""
    attrs = dict(node.get("attrs", {}))
    if attrs.get("layout") == "NCW":
        del attrs["layout"]
    node = dict(node, attrs=attrs)
    glob = _flag(attrs, "global_pool")
    if attrs.get("pooling_convention", "valid") == "full" and not glob:
        _check_full_convention(node, kwargs)
    pool_type, p = attrs.get("pool_type", "max"), attrs.get("p_value", "None")
    if not (pool_type == "sum" or (pool_type == "lp" and p in ("1", "3"))):
        return _original("Pooling", kwargs)(node, **kwargs)
    out, (x,), attrs, dtype = _start(node, kwargs)
    if pool_type == "lp" and p == "3":
        x = out.add("Mul", [out.add("Mul", [x, x]), x])
    kernel = [int(k) for k in _mx2onnx.convert_string_to_list(attrs.get("kernel", "()"))]
    if glob:
        shape = _shape_of_input(node, kwargs)
        if shape is None:
            raise NotImplementedError(f"global {pool_type} pooling of an input whose rank is "
                                      f"known only at run time")
        axes = list(range(2, len(shape)))
        total = out.add("ReduceSum", [x, out.const(axes)], keepdims=1) \
            if kwargs.get("opset_version", 13) >= 13 else \
            out.add("ReduceSum", [x], axes=axes, keepdims=1)
    else:
        if attrs.get("pooling_convention", "valid") != "valid":
            raise NotImplementedError(f"{pool_type} pooling with pooling_convention="
                                      f"{attrs['pooling_convention']!r}")
        pad = [int(k) for k in _mx2onnx.convert_string_to_list(attrs.get("pad", "()"))]
        stride = [int(k) for k in _mx2onnx.convert_string_to_list(attrs.get("stride", "()"))]
        mean = out.add("AveragePool", [x], kernel_shape=kernel, count_include_pad=1,
                       **({"pads": pad + pad} if pad else {}),
                       **({"strides": stride} if stride else {}))
        total = out.add("Mul", [mean, out.const([float(np.prod(kernel))], dtype)])
    if pool_type == "lp" and p == "3":   # the signed cube root
        root = out.add("Pow", [out.add("Abs", [total]), out.const([1 / 3], dtype)])
        negative = out.add("Less", [total, out.const([0], dtype)])
        total = out.add("Where", [negative, out.add("Neg", [root]), root])
    out.add("Identity", [total], final=True)
    return out


def _check_full_convention(node, kwargs):
    attrs = node["attrs"]
    shape = _shape_of_input(node, kwargs)
    kernel = [int(k) for k in _mx2onnx.convert_string_to_list(attrs.get("kernel", "()"))]
    n = len(kernel)
    pad = [int(k) for k in _mx2onnx.convert_string_to_list(attrs.get("pad", "()"))] or [0] * n
    stride = [int(k) for k in _mx2onnx.convert_string_to_list(attrs.get("stride", "()"))] \
        or [1] * n
    spatial = shape[2:] if shape is not None else [None] * n
    for size, k, p, s in zip(spatial, kernel, pad, stride):
        if size is None and (p > 0 or s > k):
            raise NotImplementedError(
                "Pooling with pooling_convention='full' (ceil_mode) and padding or a stride "
                "over the kernel, of an input whose spatial size is known only at run time: "
                "ONNX's ceil mode drops a last window that starts in the padding, MXNet's "
                "keeps it")
        if size is not None:
            mxnet_out = 1 + -(-(size + 2 * p - k) // s)
            if (mxnet_out - 1) * s >= size + p:
                raise NotImplementedError(
                    f"Pooling with pooling_convention='full' (ceil_mode) whose last window "
                    f"starts in the right padding or past it (input size {size}, kernel {k}, "
                    f"stride {s}, pad {p}): ONNX drops that window, MXNet keeps it")


def _convert_batch_norm(node, **kwargs):
    """``BatchNorm`` in inference, ``(x - mean) / sqrt(var + eps) * gamma + beta`` along its
    axis: mx2onnx's for axis 1, but it refused any other axis (``BatchNorm(axis=-1)`` over
    features) and ignored ``fix_gamma`` (MXNet's default True: gamma read as 1), which gave
    silently other values for a gamma other than 1."""
    attrs = node.get("attrs", {})
    fix_gamma = _flag(attrs, "fix_gamma", "True")
    axis = int(attrs.get("axis", "1"))
    # Gluon keeps a float16 BatchNorm's parameters in float32 (so does MXNet's arithmetic)
    work = np.dtype(_mx2onnx.get_input_dtypes(node, kwargs)[1])
    if axis == 1 and not fix_gamma and work == _mx2onnx.get_input_dtypes(node, kwargs)[0]:
        return _original("BatchNorm", kwargs)(node, **kwargs)
    out, inputs, attrs, dtype = _start(node, kwargs)
    x, gamma, beta, mean, var = inputs[:5]
    if work != dtype:
        x = out.add("Cast", [x], to=_tensor_type(work))
    shape = _shape_of_input(node, kwargs)
    if shape is None:
        raise NotImplementedError("BatchNorm with fix_gamma or an axis other than 1, of an "
                                  "input whose rank is known only at run time")
    axis %= len(shape)
    along = out.const([-1] + [1] * (len(shape) - axis - 1))

    def param(value):
        return out.add("Reshape", [value, along])
    eps = out.const([float(attrs.get("eps", "0.001"))], work)
    scale = out.add("Sqrt", [out.add("Add", [param(var), eps])])
    normal = out.add("Div", [out.add("Sub", [x, param(mean)]), scale])
    if not fix_gamma:
        normal = out.add("Mul", [normal, param(gamma)])
    result = out.add("Add", [normal, param(beta)], final=work == dtype)
    if work != dtype:
        out.add("Cast", [result], final=True, to=_tensor_type(dtype))
    return out


def _convert_group_norm(node, **kwargs):
    """``GroupNorm`` (mx2onnx has none): the channels in ``num_groups`` groups, each normalised
    over its channels and positions with the population variance, then scaled and shifted by
    the group's gamma and beta (MXNet 1.9.1's are per group, shape (num_groups,))."""
    out, inputs, attrs, dtype = _start(node, kwargs)
    if _flag(attrs, "output_mean_var"):
        raise NotImplementedError("GroupNorm with output_mean_var=True")
    x, gamma, beta = inputs[:3]
    groups = int(attrs.get("num_groups", "1"))
    grouped = out.add("Reshape", [x, out.const([0, groups, -1])])
    mean = out.add("ReduceMean", [grouped], axes=[2], keepdims=1)
    centred = out.add("Sub", [grouped, mean])
    var = out.add("ReduceMean", [out.add("Mul", [centred, centred])], axes=[2], keepdims=1)
    eps = out.const([float(attrs.get("eps", "1e-05"))], dtype)
    normal = out.add("Div", [centred, out.add("Sqrt", [out.add("Add", [var, eps])])])
    per_group = out.const([groups, 1])
    scaled = out.add("Add", [out.add("Mul", [normal, out.add("Reshape", [gamma, per_group])]),
                             out.add("Reshape", [beta, per_group])])
    out.add("Reshape", [scaled, out.add("Shape", [x])], final=True)
    return out


def _convert_layer_norm(node, **kwargs):
    """``LayerNorm``: ``(x - mean) / sqrt(var + eps) * gamma + beta`` along its axis, the
    population variance; mx2onnx's compared a negative axis other than -1 with the positive
    axes (gamma of another shape, a model onnxruntime fails on) and added a float32 eps to
    float64 or float16 values (a model ONNX's checker refuses). A float16 input is normalised
    in float32."""
    out, (x, gamma, beta), attrs, dtype = _start(node, kwargs)
    if _flag(attrs, "output_mean_var"):
        raise NotImplementedError("LayerNorm with output_mean_var=True")
    shape = _shape_of_input(node, kwargs)
    axis = int(attrs.get("axis", "-1"))
    if shape is None and axis != -1:
        raise NotImplementedError(f"LayerNorm with axis={axis} of an input whose rank is "
                                  f"known only at run time")
    work = np.dtype(np.float32) if dtype == np.float16 else dtype
    if work != dtype:
        x, gamma, beta = (out.add("Cast", [v], to=_tensor_type(work)) for v in (x, gamma, beta))
    axis = -1 if axis == -1 else axis % len(shape)
    along = out.const([-1] + [1] * (len(shape) - axis - 1 if axis != -1 else 0))
    mean = out.add("ReduceMean", [x], axes=[axis], keepdims=1)
    centred = out.add("Sub", [x, mean])
    var = out.add("ReduceMean", [out.add("Mul", [centred, centred])], axes=[axis], keepdims=1)
    eps = out.const([float(attrs.get("eps", "1e-05"))], work)
    normal = out.add("Div", [centred, out.add("Sqrt", [out.add("Add", [var, eps])])])
    scaled = out.add("Add", [out.add("Mul", [normal, out.add("Reshape", [gamma, along])]),
                             out.add("Reshape", [beta, along])])
    out.add("Cast", [scaled], final=True, to=_tensor_type(dtype))
    return out


register({
    "LayerNorm": _convert_layer_norm,
    "LeakyReLU": _convert_leaky_relu, "L2Normalization": _convert_l2_normalization,
    "_contrib_BilinearResize2D": _convert_bilinear_resize, "_contrib_box_nms": _convert_box_nms,
    "RNN": _convert_rnn, "Convolution": _one_dimensional("Convolution"),
    "Pooling": _convert_pooling, "BatchNorm": _convert_batch_norm,
    "GroupNorm": _convert_group_norm, "SequenceReverse": _convert_sequence_reverse,
})
