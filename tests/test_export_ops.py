"""export_onnx op by op: each MXNet op and setting that Gluon layers and gluonnlp models use,
one small hybridized block per case, exported from its first inputs; onnxruntime must equal the
hybridized block (MXNet, the oracle) at 1e-5 on every input (ties, negative values, halves,
lengths of 0), or export must refuse with a NotImplementedError that starts with this file's
line and names the op and the reason (NOTE [added converters]). A silent difference fails.
About 160 cases, ~10 s."""
import re
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

import gluon_cf
from gluon_cf.export import export_onnx
from gluon_cf.export.onnx_graph import ExportTieWarning
from test_export_onnx import build, check_export

nn, rnn = gluon.nn, gluon.rnn
_RANDOM = np.random.RandomState(0)


def rn(*shape):
    return _RANDOM.randn(*shape).astype(np.float32)


def ties(*shape):
    """Multiples of 0.5: ties, halves, zeros and negative values."""
    return (np.round(_RANDOM.randn(*shape) * 4) / 2).astype(np.float32)


HALVES = np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], [0., -0., 3.5, -3.49, 1e-8, -7.]],
                  np.float32)
X2 = [[rn(2, 6)], [ties(2, 6)], [HALVES]]
X3 = [[rn(2, 3, 4)], [ties(2, 3, 4)]]
X4 = [[rn(2, 4, 6, 6)], [ties(2, 4, 6, 6)]]
X1D = [[rn(2, 3, 7)], [ties(2, 3, 7)]]
LENGTHS = np.array([[1, 5, 0], [2, 0, 4]], np.int32)     # per row of a (2, 3, 5)
IDX = np.array([[0, 7, -1], [2, -4, 4]], np.float32)      # out of range both ways


BOXES = np.array([[[0, 0.9, 0, 0, 1, 1], [1, 0.8, 0, 0, 1, 1], [0, 0.7, 0.5, 0.5, 1.5, 1.5],
                   [0, 0.6, 0, 0, 0.9, 0.9]]], np.float32)   # (class, score, box)


def case(name, fn, inputs, **children):
    return pytest.param(fn, inputs, children, id=name)


EQUAL = [
    # the ops mx2onnx lacked (NOTE [added converters])
    case("round", lambda F, n, x: F.round(x), X2),
    case("rint", lambda F, n, x: F.rint(x * 3), X2),
    case("sign", lambda F, n, x: F.sign(x), X2 + [[np.array([[np.nan, -0., 0., 2., -3., np.inf]],
                                                            np.float32).repeat(2, 0)]]),
    case("trunc_fix", lambda F, n, x: F.trunc(x * 2) + F.fix(x * 3) * 10, X2),
    case("erf", lambda F, n, x: F.erf(x), X2),
    case("cumsum_axis", lambda F, n, x: F.cumsum(x, axis=1), X2),
    case("cumsum_flat", lambda F, n, x: F.cumsum(x), X2),
    case("cumsum_dtype", lambda F, n, x: F.cumsum(x, axis=0, dtype="float64"), X2),
    case("cumsum_int", lambda F, n, x: F.cumsum(F.cast(x * 3, "int32"), axis=1), X2),
    case("sort", lambda F, n, x: F.sort(x, axis=-1), X2),
    case("sort_desc_axis0", lambda F, n, x: F.sort(x, axis=0, is_ascend=False), X2),
    case("sort_flat", lambda F, n, x: F.sort(x, axis=None), X2),
    case("topk_mask", lambda F, n, x: F.topk(x, k=2, ret_typ="mask"), X2),
    case("topk_mask_asc_axis0", lambda F, n, x: F.topk(x, k=1, axis=0, ret_typ="mask",
                                                       is_ascend=True), X2),
    case("topk_both_ties", lambda F, n, x: F.topk(x, k=3, axis=1, ret_typ="both"), X2),
    case("topk_int32_asc", lambda F, n, x: F.topk(x, k=2, axis=0, dtype="int32",
                                                  is_ascend=True), X2),
    case("topk_every_element", lambda F, n, x: (F.topk(x, k=0, axis=1, ret_typ="value"),
                                                F.topk(x, k=-1, axis=1)), X2),
    case("the_input_itself", lambda F, n, x: (x, x * 2), X2),
    case("argsort_ties_desc", lambda F, n, x: F.argsort(x, axis=1, is_ascend=False), X2),
    case("sequence_last", lambda F, n, x: F.SequenceLast(x), X3),
    case("sequence_last_axis1", lambda F, n, x: F.SequenceLast(x, axis=1), X3),
    case("sequence_last_lengths", lambda F, n, x, l: F.SequenceLast(
        x, l, use_sequence_length=True), [[rn(4, 3, 2), np.array([1, 4, 2], np.float32)],
                                          [rn(4, 3, 2), np.array([4, 4, 1], np.float32)]]),
    case("sequence_last_lengths_axis1", lambda F, n, x, l: F.SequenceLast(
        x, l, use_sequence_length=True, axis=1), [[rn(3, 4, 2), np.array([1, 4, 2], np.int32)]]),
    case("sequence_last_lengths_2d", lambda F, n, x, l: F.SequenceLast(
        x, l, use_sequence_length=True), [[rn(4, 3), np.array([3, 1, 2], np.int32)]]),
    *[case(op, (lambda o: lambda F, n, x: getattr(F, o)(x))(op), [[rn(3, 5)], [ties(3, 5) / 8]])
      for op in ("log1p", "expm1", "sinh", "cosh", "arcsinh", "degrees", "radians", "softsign")],
    case("rsqrt_log10", lambda F, n, x: F.rsqrt(F.abs(x) + 0.5) + F.log10(F.abs(x) + 0.5), X2),
    case("arccosh_arctanh", lambda F, n, x: F.arccosh(F.abs(x) + 1) + F.arctanh(x * 0.1), X2),
    case("broadcast_maximum", lambda F, n, x, y: F.broadcast_maximum(x, y), [[rn(3, 5), rn(1, 5)]]),
    case("broadcast_hypot", lambda F, n, x, y: F.broadcast_hypot(x, y), [[rn(3, 5), rn(1, 5)]]),
    case("mod_scalar", lambda F, n, x: (x * 5 % 3) + (x * 5 % -3) * 10 + (x % 0) * 100, X2),
    case("rmod_scalar", lambda F, n, x: 3 % (x * 4), X2),
    case("rpower_scalar", lambda F, n, x: 2 ** x, X2),
    case("reverse_two_axes", lambda F, n, x: F.reverse(x, axis=(0, 2)), X3),
    case("split_v2_indices", lambda F, n, x: F.split_v2(x, (1, 3), axis=-1), X3),
    case("split_v2_squeeze", lambda F, n, x: F.split_v2(x, (1, 2), axis=1, squeeze_axis=True), X3),
    case("swapaxes_negative", lambda F, n, x: F.swapaxes(x, -1, 0), X3),
    # softmax family (mx2onnx's use_length was silently wrong)
    case("softmax_length", lambda F, n, x, l: F.softmax(x, l, axis=-1, use_length=True),
         [[rn(2, 3, 5), LENGTHS], [rn(2, 3, 5) * 1e6, LENGTHS]]),
    case("softmax_length_axis1_temperature", lambda F, n, x, l: F.softmax(
        x, l, axis=1, use_length=True, temperature=0.7), [[rn(2, 5, 3), LENGTHS]]),
    case("softmax_length_axis0", lambda F, n, x, l: F.softmax(x, l, axis=0, use_length=True),
         [[rn(5, 2, 3), LENGTHS]]),
    case("softmax_temperature", lambda F, n, x: F.softmax(x, temperature=2.0), X2),
    case("softmax_negative_temperature", lambda F, n, x: F.softmax(x, temperature=-2.0), X2),
    case("softmax_axis0_float64", lambda F, n, x: F.softmax(x, axis=0, dtype="float64"), X2),
    case("softmax_large", lambda F, n, x: F.softmax(x * 1e4, axis=1), X2),
    case("log_softmax_temperature_axis0", lambda F, n, x: F.log_softmax(x, axis=0,
                                                                        temperature=0.5), X2),
    case("log_softmax_axis1_3d", lambda F, n, x: F.log_softmax(x, axis=1), X3),
    case("softmax_output_flattened", lambda F, n, x, l: F.SoftmaxOutput(x, l),
         [[rn(2, 3, 4), np.zeros((2, 3), np.float32)]]),
    case("softmax_output_multi_output", lambda F, n, x, l: F.SoftmaxOutput(
        x, l, multi_output=True), [[rn(2, 3, 4), np.zeros((2, 4), np.float32)]]),
    case("softmax_output_preserve_shape", lambda F, n, x, l: F.SoftmaxOutput(
        x, l, preserve_shape=True), [[rn(2, 3, 4), np.zeros((2, 3), np.float32)]]),
    case("softmin", lambda F, n, x: F.softmin(x, axis=0, temperature=0.5), X2),
    # activations
    *[case(f"leaky_relu_{a}", (lambda a: lambda F, n, x: F.LeakyReLU(x, act_type=a,
                                                                     slope=0.3))(a), X2)
      for a in ("elu", "selu", "gelu", "leaky")],
    case("rrelu_inference", lambda F, n, x: F.LeakyReLU(x, act_type="rrelu", lower_bound=0.1,
                                                        upper_bound=0.3)[0], X2),
    case("prelu_channels_3d", lambda F, n, x: n.l(x), [[rn(2, 4, 4)], [ties(2, 4, 4)]],
         l=lambda: nn.PReLU(alpha_initializer=mx.init.Uniform(0.5), in_channels=4)),
    case("prelu_channels_4d", lambda F, n, x: n.l(x), X4,
         l=lambda: nn.PReLU(alpha_initializer=mx.init.Uniform(0.5), in_channels=4)),
    case("prelu_channels_2d", lambda F, n, x: n.l(x), [[rn(3, 4)]],
         l=lambda: nn.PReLU(alpha_initializer=mx.init.Uniform(0.5), in_channels=4)),
    case("prelu_one_slope", lambda F, n, x: n.l(x), X3, l=lambda: nn.PReLU()),
    case("elu_selu_gelu_swish_layers", lambda F, n, x: n.a(x) + n.b(x) + n.c(x) + n.d(x), X2,
         a=lambda: nn.ELU(0.7), b=nn.SELU, c=nn.GELU, d=lambda: nn.Swish(1.5)),
    *[case(f"activation_{a}", (lambda a: lambda F, n, x: F.Activation(x, act_type=a))(a), X2)
      for a in ("softrelu", "softsign", "sigmoid", "tanh", "relu")],
    case("hard_sigmoid", lambda F, n, x: F.hard_sigmoid(x, alpha=0.3, beta=0.4), X2),
    # normalisation
    case("layer_norm_axis1", lambda F, n, x: n.l(x), X3, l=lambda: nn.LayerNorm(axis=1,
                                                                                in_channels=3)),
    case("layer_norm_eps_plain", lambda F, n, x: n.l(x), X3, l=lambda: nn.LayerNorm(
        epsilon=0.1, center=False, scale=False, in_channels=4)),
    case("instance_norm", lambda F, n, x: n.l(x), X4, l=lambda: nn.InstanceNorm(in_channels=4)),
    case("instance_norm_last_axis", lambda F, n, x: n.l(x), X3,
         l=lambda: nn.InstanceNorm(axis=-1, in_channels=4)),
    case("batch_norm_running", lambda F, n, x: n.l(x), X4, l=lambda: nn.BatchNorm(
        in_channels=4, running_mean_initializer=mx.init.Uniform(1),
        running_variance_initializer=mx.init.Constant(2.0))),
    case("batch_norm_global_stats", lambda F, n, x: n.l(x), X4, l=lambda: nn.BatchNorm(
        in_channels=4, use_global_stats=True, running_mean_initializer=mx.init.Uniform(1))),
    case("group_norm", lambda F, n, x: (n.a(x), n.b(x[0])), X4,
         a=lambda: nn.GroupNorm(num_groups=2, gamma_initializer=mx.init.Uniform(1),
                                beta_initializer=mx.init.Uniform(1)),
         b=lambda: nn.GroupNorm(num_groups=4, epsilon=0.5, scale=False)),
    case("batch_norm_fixed_gamma", lambda F, n, x: n.l(x), X4, l=lambda: nn.BatchNorm(
        scale=False, in_channels=4, gamma_initializer=mx.init.Constant(2.0),
        running_mean_initializer=mx.init.Uniform(1))),
    case("batch_norm_last_axis", lambda F, n, x: (n.a(x), n.b(x[0])), X3,
         a=lambda: nn.BatchNorm(axis=-1, in_channels=4, gamma_initializer=mx.init.Uniform(1),
                                running_mean_initializer=mx.init.Uniform(1)),
         b=lambda: nn.BatchNorm(axis=-1, scale=False, in_channels=4)),
    case("batch_norm_plain_3d", lambda F, n, x: n.l(x), X3, l=lambda: nn.BatchNorm(
        in_channels=3, scale=False, center=False, epsilon=0.1)),
    case("l2_normalization_channel", lambda F, n, x: F.L2Normalization(x, mode="channel"), X3),
    case("l2_normalization_modes_eps", lambda F, n, x: (
        F.L2Normalization(x, eps=0.5), F.L2Normalization(x, mode="spatial"),
        F.L2Normalization(x, mode="channel", eps=2.0)), X4),
    case("lrn", lambda F, n, x: (F.LRN(x, nsize=3), F.LRN(x, nsize=5, alpha=0.1, beta=0.5,
                                                          knorm=1.5)), X4),
    case("bilinear_resize", lambda F, n, x: (
        F.contrib.BilinearResize2D(x, height=9, width=7, align_corners=False),
        F.contrib.BilinearResize2D(x, height=1, width=3, align_corners=False),
        F.contrib.BilinearResize2D(x, height=3, width=4)), X4),
    # pooling
    case("max_pool_pad", lambda F, n, x: n.l(x), X4, l=lambda: nn.MaxPool2D(3, 2, 1)),
    case("max_pool_ceil_pad", lambda F, n, x: n.l(x), X4,
         l=lambda: nn.MaxPool2D(3, 2, 1, ceil_mode=True)),
    case("avg_pool_pad", lambda F, n, x: n.l(x), X4, l=lambda: nn.AvgPool2D(3, 2, 1)),
    case("avg_pool_ceil_pad_excluded", lambda F, n, x: n.l(x), X4,
         l=lambda: nn.AvgPool2D(3, 2, 1, ceil_mode=True, count_include_pad=False)),
    case("avg_pool_ceil", lambda F, n, x: n.l(x), X4, l=lambda: nn.AvgPool2D(3, 2,
                                                                             ceil_mode=True)),
    case("global_pools", lambda F, n, x: n.a(x) + n.b(x), X4, a=nn.GlobalAvgPool2D,
         b=nn.GlobalMaxPool2D),
    case("pools_1d", lambda F, n, x: n.a(x) + n.b(x), X1D,
         a=lambda: nn.MaxPool1D(3, 2, 1, ceil_mode=True), b=lambda: nn.AvgPool1D(3, 2, 1)),
    case("lp_pool_p2", lambda F, n, x: F.Pooling(x, kernel=(3, 3), pool_type="lp", p_value=2,
                                                 stride=(2, 2), pad=(1, 1)), X4),
    case("lp_pool_p1", lambda F, n, x: F.Pooling(x, kernel=(2, 2), pool_type="lp", p_value=1,
                                                 stride=(1, 1)), X4),
    case("lp_pool_p3", lambda F, n, x: F.Pooling(x, kernel=(2, 2), pool_type="lp", p_value=3,
                                                 stride=(1, 1), pad=(1, 0)), X4),
    case("lp_pool_global_p3", lambda F, n, x: F.Pooling(x, kernel=(1, 1), pool_type="lp",
                                                        p_value=3, global_pool=True), X4),
    case("sum_pool", lambda F, n, x: F.Pooling(x, kernel=(2, 2), pool_type="sum",
                                               stride=(1, 1), pad=(1, 0)), X4),
    case("sum_pool_global", lambda F, n, x: F.Pooling(x, kernel=(1, 1), pool_type="sum",
                                                      global_pool=True), X4),
    # convolutions
    case("conv_groups_dilation", lambda F, n, x: n.l(x), X4, l=lambda: nn.Conv2D(
        4, 3, padding=2, dilation=2, groups=2, in_channels=4)),
    case("conv_strides_no_bias", lambda F, n, x: n.l(x), X4, l=lambda: nn.Conv2D(
        3, (3, 2), strides=(2, 1), padding=(1, 0), use_bias=False, in_channels=4)),
    case("conv_1d", lambda F, n, x: n.l(x), X1D, l=lambda: nn.Conv1D(
        2, 2, dilation=2, padding=1, strides=2, in_channels=3)),
    case("conv_1d_depthwise", lambda F, n, x: n.l(x), X1D, l=lambda: nn.Conv1D(
        3, 3, groups=3, in_channels=3)),
    case("deconv_output_padding", lambda F, n, x: n.l(x), X4, l=lambda: nn.Conv2DTranspose(
        3, 3, strides=2, padding=1, output_padding=1, in_channels=4)),
    case("deconv_groups_dilation", lambda F, n, x: n.l(x), X4, l=lambda: nn.Conv2DTranspose(
        4, 3, padding=1, groups=2, dilation=2, in_channels=4)),
    case("deconv_1d", lambda F, n, x: n.l(x), X1D, l=lambda: nn.Conv1DTranspose(
        2, 3, strides=2, in_channels=3)),
    # recurrent layers, dropout, embedding
    case("lstm", lambda F, n, x: n.l(x), X3, l=lambda: rnn.LSTM(5, input_size=4)),
    case("lstm_ntc", lambda F, n, x: n.l(x), X3, l=lambda: rnn.LSTM(5, layout="NTC",
                                                                    input_size=4)),
    case("gru", lambda F, n, x: n.l(x), X3, l=lambda: rnn.GRU(5, input_size=4)),
    case("gru_lstm_two_layers", lambda F, n, x: (n.a(x), n.b(x)), X3,
         a=lambda: rnn.GRU(4, num_layers=2, input_size=4),
         b=lambda: rnn.LSTM(4, num_layers=2, input_size=4)),
    case("rnn_relu", lambda F, n, x: n.l(x), X3, l=lambda: rnn.RNN(5, activation="relu",
                                                                   input_size=4)),
    case("lstm_cell", lambda F, n, x: n.l(x, [F.zeros((2, 5)), F.ones((2, 5))])[0], X2,
         l=lambda: rnn.LSTMCell(5, input_size=6)),
    case("dropout_inference", lambda F, n, x: n.l(x) + F.Dropout(x, p=0.3, axes=(0,)), X2,
         l=lambda: nn.Dropout(0.5)),
    case("embedding_out_of_range", lambda F, n, x: n.l(x), [[IDX]], l=lambda: nn.Embedding(
        6, 4)),
    # indexing, shapes
    case("take_clip", lambda F, n, x, i: F.take(x, i, axis=1, mode="clip"), [[rn(3, 5), IDX]]),
    case("take_wrap_negative_axis", lambda F, n, x, i: F.take(x, i, axis=-1, mode="wrap"),
         [[rn(3, 5), IDX]]),
    case("pick_wrap_keepdims", lambda F, n, x, i: F.pick(x, i, axis=0, keepdims=True,
                                                          mode="wrap"),
         [[rn(3, 5), np.array([0, 4, -1, 2, 7], np.float32)]]),
    case("slice_steps", lambda F, n, x: F.slice(x, begin=(None, -1), end=(None, 0),
                                                step=(-1, -2)), X2),
    case("slice_negative", lambda F, n, x: F.slice(x, begin=(-2, -4), end=(None, -1)), X2),
    case("slice_axis_negative", lambda F, n, x: F.slice_axis(x, axis=-1, begin=1, end=-1), X3),
    case("slice_like_axes", lambda F, n, x, y: F.slice_like(x, y, axes=(-1, 0)),
         [[rn(3, 5), rn(2, 3)]]),
    case("where_broadcast_condition", lambda F, n, c, a, b: F.where(c, a, b),
         [[np.array([2, 0], np.float32), rn(2, 3), rn(2, 3)]]),
    case("clip", lambda F, n, x: (F.clip(x * 10, -np.inf, 3), F.clip(x, -0.5, 0.5),
                                  F.clip(x, 1, -1), F.clip(F.log(x), -1, 0.5)), X2),
    case("one_hot_dtypes", lambda F, n, x: (F.one_hot(x, 4, dtype="int32"), F.one_hot(
        x, 4, dtype="float16", on_value=2.5), F.one_hot(x, 4, dtype="int64")),
        [[np.array([0, 3, -1, 5], np.float32)]]),
    case("expand_squeeze", lambda F, n, x: F.squeeze(F.expand_dims(x, axis=-2), axis=-2), X3),
    case("tile_repeat", lambda F, n, x: (F.tile(x, reps=(2, 1, 1, 2)), F.tile(x, reps=(2,)),
                                         F.repeat(x, repeats=2, axis=-1), F.repeat(x, 3)), X3),
    case("pad_modes", lambda F, n, x: F.pad(x, mode="edge", pad_width=(0, 0, 0, 0, 1, 2, 2, 1))
         + F.pad(x, mode="reflect", pad_width=(0, 0, 0, 0, 1, 2, 2, 1))
         + F.pad(x, mode="constant", pad_width=(0, 0, 0, 0, 1, 2, 2, 1), constant_value=0.5),
         X4),
    case("reshape_split_axis", lambda F, n, x: (
        F.reshape(x, (0, -4, 3, -1, 0)), F.reshape(x, (-1, -4, 2, 3, 0)),
        F.reshape(x, (-4, 1, 2, -3)), F.reshape(x, (-4, -1, 1, -2)),
        F.transpose(F.reshape(x, (0, 0, -4, 2, -1)), (0, 2, 1, 3)).reshape((-3, 0, 0))),
        [[rn(2, 6, 4)]]),
    case("reshape_like_ranges", lambda F, n, x, y: F.reshape_like(
        x, y, lhs_begin=1, lhs_end=None, rhs_begin=1, rhs_end=3), [[rn(2, 6), rn(3, 2, 3)]]),
    case("broadcast_like_axes", lambda F, n, x, y: F.broadcast_like(
        x, y, lhs_axes=(-1,), rhs_axes=(-2,)), [[rn(3, 1), rn(4, 5)]]),
    case("arange_like", lambda F, n, x: (F.contrib.arange_like(x, start=2.0, step=0.5, axis=0),
                                         F.contrib.arange_like(x, axis=1)), X2),
    case("sequence_reverse_lengths", lambda F, n, x, l: F.SequenceReverse(
        x, l, use_sequence_length=True), [[rn(4, 3, 2), np.array([0, 4, 2], np.int32)]]),
    case("sequence_mask_axis1", lambda F, n, x, l: F.SequenceMask(
        x, l, use_sequence_length=True, axis=1, value=-3.0),
        [[rn(3, 4, 2), np.array([0, 4, 2], np.float32)]]),
    case("defaults_mx2onnx_misread", lambda F, n, x: (
        F.Deconvolution(x, F.ones((4, 2, 3, 3)), kernel=(3, 3), num_filter=2),
        F._internal._maximum_scalar(x), F._internal._split_v2(x, indices=(0, 2))[1]), X4),
    case("box_nms_force_suppress", lambda F, n, x: F.contrib.box_nms(
        x, overlap_thresh=0.5, coord_start=2, score_index=1, id_index=0, force_suppress=True),
        [[BOXES]]),
    # products and reductions
    case("batch_dot_transposes", lambda F, n, a, b: F.batch_dot(a, b, transpose_a=True,
                                                                transpose_b=True),
         [[rn(2, 4, 3), rn(2, 5, 4)]]),
    case("batch_dot_4d", lambda F, n, a, b: F.batch_dot(a, b), [[rn(2, 2, 3, 4), rn(2, 2, 4, 5)]]),
    case("linalg_gemm2", lambda F, n, a, b: F.linalg.gemm2(a, b, transpose_b=True, alpha=2.0),
         [[rn(2, 3, 4), rn(2, 5, 4)]]),
    case("interleaved_attention", lambda F, n, x, a: (F.contrib.interleaved_matmul_selfatt_qk(
        x, heads=2), F.contrib.interleaved_matmul_selfatt_valatt(x, a, heads=2)),
        [[rn(3, 2, 12), rn(4, 3, 3)]]),
    case("norm_ord1_axes_keepdims", lambda F, n, x: F.norm(x, ord=1, axis=(0, 2),
                                                           keepdims=True), X3),
    case("norm_ord2_negative_axis", lambda F, n, x: F.norm(x, axis=-1), X3),
    case("argmax_argmin_keepdims", lambda F, n, x: F.argmax(x, axis=-2, keepdims=True)
         + F.argmin(x, axis=1, keepdims=True), X3),
    case("reductions_exclude_keepdims", lambda F, n, x: (
        F.sum(x, axis=-1, exclude=True), F.max(x, axis=(1, 2)), F.mean(x, keepdims=True),
        F.sum(x, keepdims=True)), X3),     # mx2onnx's opset-13 sum reshaped it to (1,)
]

# (case, what the refusal must say): MXNet ops or settings ONNX has no exact counterpart for
REFUSED = [
    (case("lstm_projection", lambda F, n, x: n.l(x), X3, l=lambda: rnn.LSTM(
        5, projection_size=3, input_size=4)), "projection_size"),
    (case("dropout_always", lambda F, n, x: F.Dropout(x, p=0.3, mode="always"), X2),
     "mode!='training'"),
    (case("max_pool_ceil_window_in_padding", lambda F, n, x: n.l(x), [[rn(2, 3, 7, 7)]],
          l=lambda: nn.MaxPool2D(2, 3, 1, ceil_mode=True)),
     "last window starts in the right padding or past it"),
    (case("avg_pool_1d_nwc", lambda F, n, x: n.l(x), X1D,
          l=lambda: nn.AvgPool1D(2, layout="NWC")), "layout"),
    (case("rrelu_mask_output", lambda F, n, x: F.LeakyReLU(x, act_type="rrelu"), X2),
     "output 1 of node .* has no ONNX counterpart"),
    (case("topk_flattened", lambda F, n, x: F.topk(x, axis=None, k=3), X2),
     r"topk with axis=None .*flatten it first"),
    (case("box_nms_by_class", lambda F, n, x: F.contrib.box_nms(
        x, overlap_thresh=0.5, coord_start=2, score_index=1, id_index=0), [[BOXES]]),
     "box_nms with an id_index and force_suppress=False"),
    (case("gemm2_axis", lambda F, n, a, b: F.linalg.gemm2(a, b, axis=-3),
          [[rn(3, 2, 4), rn(4, 2, 5)]]), "axis!=None"),
    (case("bilinear_resize_scale", lambda F, n, x: F.contrib.BilinearResize2D(
        x, scale_height=2., scale_width=2., mode="odd_scale"), X4), "mode other than"),
    (case("sqrt_of_int32", lambda F, n, x: F.sqrt(F.cast(F.abs(x), "int32")), X2),
     r"the ONNX Sqrt converted from node .* is not valid ONNX: .*tensor\(int32\)"),
    (case("add_of_int8", lambda F, n, x: F.cast(x, "int8") + 3, X2), r"ONNX Add .*int8"),
    *[(case(op, (lambda o: lambda F, n, x: getattr(F, o)(F.abs(x) + 0.5))(op), X2),
       f"no converter for '{op}'")
      for op in ("cbrt", "gamma", "gammaln", "erfinv", "nansum", "diag", "smooth_l1")],
]


@pytest.mark.parametrize("opset", [13, 12])
@pytest.mark.parametrize("fn, inputs, children", EQUAL)
def test_onnxruntime_equals_mxnet(fn, inputs, children, opset):
    net = build(fn, **children)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExportTieWarning)   # ties: test_tied_values_warn
        check_export(net, inputs[0], inputs[1:], opset=opset)


@pytest.mark.parametrize("fn, inputs, children, reason",
                         [pytest.param(*p.values, reason, id=p.id) for p, reason in REFUSED])
def test_refusal_names_the_users_line_and_the_op(fn, inputs, children, reason):
    net = build(fn, **children)
    line = fn.__code__.co_firstlineno
    with pytest.raises(NotImplementedError, match=rf"^{re.escape(__file__)}:{line}: .*{reason}"):
        export_onnx(net, inputs[0])


def test_tied_values_warn_at_the_users_line():
    """``topk`` along more than 16 elements: the values equal MXNet's, the indices of ties may
    be in another order (std::sort's, NOTE [added converters]), so export warns at the line."""
    x = np.round(np.random.RandomState(3).randn(3, 40)).astype(np.float32)
    net = build(lambda F, n, x: F.topk(x, axis=1, k=4, ret_typ="value")
                + F.topk(x, axis=1, k=4) * 0)
    line = test_tied_values_warn_at_the_users_line.__code__.co_firstlineno + 5
    with pytest.warns(ExportTieWarning, match=rf"^{re.escape(__file__)}:{line}: export_onnx: "
                                              r"topk node .* orders the indices of tied"):
        check_export(net, [x], [])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExportTieWarning)   # short axes: no warning
        check_export(build(lambda F, n, x: F.topk(x, axis=0, k=2)), [x], [])


def test_converters_inside_a_foreach_body():
    """The converters in a Scan body, where shapes come from the body's own inference."""
    def fn(F, net, xs, lengths):
        def step(inp, states):
            x, length = inp
            y = (F.round(x) + F.rint(x) * 10 + F.sign(x) * 100 + F.cumsum(x, axis=1)
                 + F.topk(x, k=2, ret_typ="mask") + F.softmax(x, length, use_length=True))
            return F.SequenceLast(F.swapaxes(y, 0, 1), length, use_sequence_length=True), \
                [states[0] + y]
        return gluon_cf.foreach(step, [xs, lengths], [F.zeros((2, 4))])
    x = ties(3, 2, 4) * 1.5
    lengths = np.array([[1, 2], [4, 1], [3, 3]], np.int32)   # MXNet reads before 0 for 0
    check_export(build(fn), [x, lengths], [[HALVES[:, :4].reshape(2, 1, 4).repeat(3, 0)
                                           .reshape(3, 2, 4), lengths[::-1].copy()]])


@pytest.mark.parametrize("fn", [
    lambda F, n, x: F.cast(x, "float16") * 1.1 + 0.3,
    lambda F, n, x: 2 - F.cast(x, "float16") / 3,
    lambda F, n, x: F.cast(x, "float16") ** 2,
    lambda F, n, x: F.clip(F.cast(x, "float16"), -1, 1) + F.maximum(F.cast(x, "float16"), 0.5),
    lambda F, n, x: F.softmax(F.cast(x, "float16")),
    lambda F, n, x: F.round(F.cast(x, "float16")) + F.sign(F.cast(x, "float16")),
], ids=["mul_plus", "rminus_div", "power", "clip_maximum", "softmax", "round_sign"])
def test_float16_constants(fn):
    """mx2onnx wrote the bits of float16 constants as their values (``x * 1.1`` exported as
    ``x * 15464``, NOTE [mx2onnx pitfalls]): equal to MXNet within float16's precision."""
    import onnxruntime as ort
    net = build(fn)
    x = np.array([[-3.7, -2.5, -1.2, 0], [1.5, 2.5, 3.2, 7.9]], np.float32)
    model = export_onnx(net, [x])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: x})[0]
    want = net(mx.nd.array(x)).asnumpy()
    assert got.dtype == want.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3,
                               atol=2e-3)


def test_argmax_channel_of_a_symbol():
    """``argmax_channel`` cannot be hybridized (MXNet's CachedOp wants a gradient it lacks) but
    a symbol holding it exports: the first of tied maxima along the last axis, as MXNet."""
    import onnxruntime as ort
    from gluon_cf.export import export_onnx_symbol
    x = np.array([[1, 3, 3, 0], [2, 2, 1, 2], [-1, -3, -1, -2]], np.float32)
    model = export_onnx_symbol(mx.sym.argmax_channel(mx.sym.var("data")), {},
                               [("data", x.shape, np.float32)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"data": x})[0]
    want = mx.nd.argmax_channel(mx.nd.array(x)).asnumpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("opset", [13, 12])
def test_reductions_over_every_axis_are_one_element(opset):
    """MXNet has no rank 0: ``F.sum(x)`` and ``F.sum(x, axis=(0, 1))`` of a matrix are (1,);
    mx2onnx's gave ONNX's scalar (a model ONNX's checker refused), also as a foreach state."""
    def fn(F, n, x):
        total = gluon_cf.foreach(lambda row, s: (row, [s[0] + F.sum(row)]), x,
                                 [F.sum(x * 0)])[1][0]
        return (F.sum(x), F.sum(x, axis=(0, 1)), F.max(x, axis=(1, 0)), F.mean(x),
                F.sum(x, axis=1), total)
    check_export(build(fn), [HALVES], [], opset=opset)
