"""Other client code of MXNet's ``F.contrib`` control flow, switched to gluon_cf.

NOTE [other client code of F.contrib]
    Beyond MXNet's own control-flow tests and gluonnlp's beam search (the other files here),
    the code found calling ``F.contrib.foreach``/``while_loop``/``cond`` or their
    ``mx.sym.contrib`` forms: MXNet 1.9.1's control-flow benchmark (``ForeachRNN``,
    ``WhileRNN``) and ``dynamic_unroll`` test block, gluonnlp 0.10's ``BiLMEncoder``, sockeye
    2's ``SSRU``, gluonts' ``Binned.quantile``, keras-apache-mxnet's backend symbols and the
    TVM MXNet frontend's test symbols (client_programs26.py, each with its source). Each
    runs with MXNet's ops as the oracle and with gluon_cf's (the conftest's "gluon_cf"
    substitution): values, shapes and dtypes of the outputs, gradients of the inputs and
    parameters, eager and hybridized (static_alloc/static_shape for half of them), the
    hybridized block exported and loaded again (``mx.sym.load``, ``SymbolBlock.imports``);
    symbols through ``bind``, ``simple_bind`` and a JSON round trip. All agree. A second round
    (client_programs27.py: MXNet's control-flow tutorial, a CRF and Viterbi decoder of
    ``functools.partial`` bodies, an adaptive softmax loss, a TimeDistributed layer, MXNet
    2.0-alpha's RandomGray and HybridRandomApply, ``mx.sym.contrib``'s docstring examples, an
    eager CRF of ``nd.contrib.foreach``) runs through ``check_block`` too, and onnxruntime on
    the hybridized blocks' export.

    The oracle is MXNet's eager ops (for Symbols its ``bind``), because MXNet's own
    hybridized and symbolic ops fail or are wrong on some of this code, where gluon_cf gives
    the eager values: hybridized ``WhileRNN`` (and any while_loop) recorded with a gradient
    attached to a loop variable raises "Assigning to NDArrays that are already in a
    computational graph"; hybridized ``Scan`` gives uninitialised gradients of ``data``
    (~1e35 for [5, 4, 3, 2, 1]), as does hybridized ``WhileRNN`` for its parameters; the
    TVM test's ``cond`` symbol cannot be ``simple_bind``-ed (MXNet infers no shape through
    ``cond``; the README's table). Gradients of a ``valid_length`` or mask read by
    ``SequenceMask``/``SequenceReverse`` are not compared: MXNet leaves them unwritten
    (different garbage in two eager runs), with or without control flow.
"""
import contextlib
import os

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon
from mxnet.gluon import rnn

import gluon_cf

from mxnet_suite import client_programs26 as programs

OPS = ("foreach", "while_loop", "cond")
# taken when this file is collected, before the conftest's fixture replaces them
MXNET_OPS = {(module, op): getattr(module, op)
             for module in (mx.nd.contrib, mx.sym.contrib) for op in OPS}
assert all(f.__module__.startswith("mxnet.") for f in MXNET_OPS.values()), MXNET_OPS
TOL = 1e-5


@contextlib.contextmanager
def mxnet_ops():
    """MXNet's own control-flow ops, the oracle, for the duration of the block."""
    replaced = {key: getattr(*key) for key in MXNET_OPS}
    try:
        for (module, op), function in MXNET_OPS.items():
            setattr(module, op, function)
        yield
    finally:
        for (module, op), function in replaced.items():
            setattr(module, op, function)


def _normal(*shape, seed=0):
    return np.random.RandomState(seed).normal(size=shape).astype("float32")


def _mask():
    mask = np.ones((3, 5), "float32")
    mask[1, 3:] = 0
    mask[2, 1:] = 0
    return mask


def _probs():
    probs = np.abs(_normal(3, 5))
    return probs / probs.sum(axis=1, keepdims=True)


def _cell(cell_type, hybridized=False):
    def make(length, block=programs.ForeachRNN):
        cell = cell_type(5, input_size=5)
        if hybridized:
            cell.hybridize(static_alloc=True)
        return block(cell, length)
    return make


# name: (block factory, inputs, indices of inputs whose gradient is not compared, static)
BLOCKS = {
    "mxnet_benchmark_foreach_lstm": (
        lambda: _cell(rnn.LSTMCell)(4), [_normal(4, 3, 5), _normal(3, 5), _normal(3, 5, seed=1)],
        (), True),
    "mxnet_benchmark_while_gru": (
        lambda: _cell(rnn.GRUCell)(4, programs.WhileRNN),
        [_normal(4, 3, 5), np.zeros((1,), "float32"), _normal(3, 5)], (), False),
    "mxnet_benchmark_while_rnn_int32_counter_hybridized_cell": (
        lambda: _cell(rnn.RNNCell, hybridized=True)(3, programs.WhileRNN),
        [_normal(5, 2, 5), np.zeros((1,), "int32"), _normal(2, 5)], (), True),
    "mxnet_dynamic_unroll_lstm_ntc": (
        lambda: programs.TestRNNLayer(rnn.LSTMCell, 6, "NTC"),
        [_normal(3, 5, 4), np.array([5, 2, 1], "float32"), _normal(3, 6), _normal(3, 6, seed=1)],
        (1,), False),
    "mxnet_dynamic_unroll_gru_tnc": (
        lambda: programs.TestRNNLayer(rnn.GRUCell, 6, "TNC"),
        [_normal(5, 3, 4), np.array([1, 5, 3], "float32"), _normal(3, 6)], (1,), True),
    "gluonnlp_bilm_encoder_masked": (
        lambda: programs.BiLM(masked=True),
        [_normal(5, 3, 4), _mask()] + [_normal(3, k, seed=i) for i in range(4) for k in (4, 6)],
        (1,), False),
    "sockeye_ssru": (lambda: programs.SSRU(6), [_normal(3, 5, 6), _normal(3, 6)], (), True),
    "gluonts_binned_quantile": (
        programs.BinnedQuantile,
        [_probs(), np.tile(np.linspace(-1, 1, 5, dtype="float32"), (3, 1)),
         np.array([0.1, 0.5, 0.9], "float32")], (), False),
    "tvm_scan": (programs.Scan, [np.arange(programs.N_SCAN).astype("float32")], (), True),
}


def _flat(value):
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _flat(item)]
    return [value]


def _run(make, arrays, no_grad, hybridize=None):
    """Outputs (shape, dtype, values), then the gradients of the inputs and parameters, of a
    fresh block; hybridized blocks are called twice (the second call reuses the graph)."""
    mx.random.seed(0)
    net = make()
    net.initialize(mx.init.Xavier())
    if hybridize is not None:
        net.hybridize(**hybridize)
    for _ in range(2 if hybridize is not None else 1):
        inputs = [mx.nd.array(a, dtype=a.dtype) for a in arrays]
        for k, array in enumerate(inputs):
            if k not in no_grad and np.dtype(array.dtype).kind == "f":
                array.attach_grad()
        with autograd.record():
            outs = _flat(net(*inputs))
            total = sum((out.astype("float64") * (k + 1.5)).sum() for k, out in enumerate(outs)
                        if np.dtype(out.dtype).kind == "f")
        total.backward()
    results = [(out.shape, np.dtype(out.dtype), out.asnumpy()) for out in outs]
    grads = [array.grad.asnumpy() for array in inputs if array.grad is not None]
    grads += [param.grad().asnumpy() for param in net.collect_params().values()
              if param.grad_req != "null"]
    return results, grads, net


def _assert_same(want, got, what):
    assert len(want) == len(got), (what, len(want), len(got))
    for k, (w, g) in enumerate(zip(want, got)):
        if isinstance(w, tuple):
            assert w[:2] == g[:2], (what, k, w[:2], g[:2])
            w, g = w[2], g[2]
        np.testing.assert_allclose(g, w, rtol=TOL, atol=TOL, err_msg="%s %d" % (what, k))


@pytest.mark.substitutions("gluon_cf")
@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_client_block(name, tmp_path):
    check_block(*BLOCKS[name], tmp_path)


def check_block(make, arrays, no_grad, static, tmp_path):
    """The block of ``make`` with gluon_cf's ops gives MXNet's eager outputs and gradients,
    eager and hybridized, and so does its exported file; returns MXNet's outputs and the
    hybridized block."""
    assert mx.nd.contrib.foreach is gluon_cf.foreach  # the conftest's substitution
    with mxnet_ops():
        want, want_grads, _ = _run(make, arrays, no_grad)
    got, grads, _ = _run(make, arrays, no_grad)
    _assert_same(want, got, "eager outputs")
    _assert_same(want_grads, grads, "eager gradients")
    flags = {"static_alloc": True, "static_shape": True} if static else {}
    got, grads, net = _run(make, arrays, no_grad, hybridize=flags)
    _assert_same(want, got, "hybridized outputs")
    _assert_same(want_grads, grads, "hybridized gradients")
    path = os.path.join(str(tmp_path), "model")
    net.export(path)
    names = ["data%d" % k for k in range(len(arrays))] if len(arrays) > 1 else ["data"]
    assert mx.sym.load(path + "-symbol.json").list_outputs() == net._cached_graph[1].list_outputs()
    loaded = gluon.SymbolBlock.imports(path + "-symbol.json", names, path + "-0000.params")
    outs = _flat(loaded(*[mx.nd.array(a, dtype=a.dtype) for a in arrays]))
    _assert_same(want, [(o.shape, np.dtype(o.dtype), o.asnumpy()) for o in outs], "exported")
    return want, net


@pytest.mark.substitutions("gluon_cf")
def test_gluonnlp_beam_search_exported(tmp_path):
    """gluonnlp's hybridized beam search (MXNet's own ops fail on it: gluon-nlp issue 1020)
    gives MXNet's eager samples, scores and lengths, and so does its exported file."""
    inputs, states = mx.nd.array([1, 2]), mx.nd.array(_normal(2, 3))
    with mxnet_ops():
        want = [o.asnumpy() for o in programs.beam_search_sampler()(inputs, [states])]
    sampler = programs.beam_search_sampler()
    sampler.hybridize()
    _assert_same(want, [o.asnumpy() for o in sampler(inputs, [states])], "hybridized")
    path = os.path.join(str(tmp_path), "sampler")
    sampler.export(path)
    loaded = gluon.SymbolBlock.imports(path + "-symbol.json", ["data0", "data1"],
                                       path + "-0000.params")
    _assert_same(want, [o.asnumpy() for o in loaded(inputs, states)], "exported")


def _bind(symbol, args, grad_req, simple):
    """Outputs and gradients of ``symbol`` bound to ``args``, head gradients 1.5, 2.5..."""
    if simple:
        executor = symbol.simple_bind(mx.cpu(), grad_req=grad_req,
                                      type_dict={k: v.dtype for k, v in args.items()},
                                      **{k: v.shape for k, v in args.items()})
        for k, value in args.items():
            executor.arg_dict[k][:] = value
    else:
        grads = {k: mx.nd.zeros(v.shape, dtype=v.dtype) for k, v in args.items()}
        executor = symbol.bind(mx.cpu(), {k: mx.nd.array(v, dtype=v.dtype)
                                          for k, v in args.items()},
                               args_grad=grads, grad_req=grad_req)
    outs = executor.forward(is_train=True)
    executor.backward([mx.nd.ones(o.shape) * (k + 1.5) for k, o in enumerate(outs)])
    return ([(o.shape, np.dtype(o.dtype), o.asnumpy()) for o in outs],
            [executor.grad_dict[k].asnumpy() for k in sorted(args)
             if (grad_req if isinstance(grad_req, str) else grad_req[k]) != "null"])


TARGETS = np.array([[1, 2], [0, 2], [0, -1]], "float32")
KERAS_MASK = np.ones((2, 4, 3), "float32")
KERAS_MASK[1, 2:] = 0
# name: (symbol builder, arguments, grad_req)
SYMBOLS = {
    "keras_multi_hot_ce": (
        programs.keras_multi_hot_ce,
        {"output": np.abs(_normal(3, 3)) + 0.1, "target": TARGETS},
        {"output": "write", "target": "null"}),
    "keras_rnn_masked": (
        programs.keras_rnn_masked,
        {"inputs": _normal(2, 4, 5), "mask": KERAS_MASK, "h0": _normal(2, 3),
         "W": _normal(5, 3), "U": _normal(3, 3), "b": _normal(3)}, "write"),
    "tvm_forward_cond_then": (
        programs.tvm_forward_cond, {"a": np.array([1.0], "float32"),
                                    "b": np.array([2.0], "float32")}, "write"),
    "tvm_forward_cond_else": (
        programs.tvm_forward_cond, {"a": np.array([4.0], "float32"),
                                    "b": np.array([3.0], "float32")}, "write"),
    "tvm_cond_else": (
        programs.tvm_cond, {"x": _normal(2, 3) + 5, "y": _normal(2, 3), "z": _normal(2, 3, seed=1)},
        "write"),
}


@pytest.mark.substitutions("gluon_cf")
@pytest.mark.parametrize("name", sorted(SYMBOLS))
def test_client_symbol(name):
    build, args, grad_req = SYMBOLS[name]
    with mxnet_ops():
        want, want_grads = _bind(build(), args, grad_req, simple=False)
    symbol = build()
    shapes = {k: v.shape for k, v in args.items()}
    assert symbol.infer_shape(**shapes)[1] == [w[0] for w in want]
    for sym in (symbol, mx.sym.load_json(symbol.tojson())):
        for simple in (False, True):
            got, grads = _bind(sym, args, grad_req, simple)
            _assert_same(want, got, "outputs (simple_bind=%s)" % simple)
            _assert_same(want_grads, grads, "gradients (simple_bind=%s)" % simple)


def _module_steps():
    """Three SGD steps of a ``Module`` (keras-mxnet trains its symbols so) on the masked RNN,
    reshaped to batch 3 and back to 2: losses, then the trained weights."""
    loss = programs.keras_rnn_masked(units=(5, 3))
    loss = mx.sym.MakeLoss(mx.sym.sum(loss[0]) + mx.sym.sum(loss[1] * 2))
    module = mx.mod.Module(loss, data_names=["inputs", "mask", "h0"], label_names=None)
    shapes = lambda b: [("inputs", (b, 4, 5)), ("mask", (b, 4, 3)), ("h0", (b, 3))]  # noqa
    module.bind(data_shapes=shapes(2))
    mx.random.seed(0)
    module.init_params()
    module.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1})
    losses = []
    for batch in (2, 3, 2):
        module.reshape(data_shapes=shapes(batch))
        mask = np.ones((batch, 4, 3), "float32")
        mask[-1, 2:] = 0
        module.forward(mx.io.DataBatch([mx.nd.array(_normal(batch, 4, 5, seed=batch)),
                                        mx.nd.array(mask),
                                        mx.nd.array(_normal(batch, 3, seed=batch))]),
                       is_train=True)
        losses.append(module.get_outputs()[0].asnumpy())
        module.backward()
        module.update()
    weights = module.get_params()[0]
    return losses + [weights[k].asnumpy() for k in sorted(weights)]


@pytest.mark.substitutions("gluon_cf")
def test_keras_symbol_trained_by_module():
    with mxnet_ops():
        want = _module_steps()
    _assert_same(want, _module_steps(), "Module steps")


@pytest.mark.substitutions("gluon_cf")
def test_tvm_scan_cached_graph_binds():
    """TVM's frontend imports a hybridized block's ``_cached_graph[1]``: with gluon_cf's ops
    that Symbol binds and runs as MXNet's does, under MXNet's output names."""
    data = mx.nd.arange(programs.N_SCAN)
    graphs = {}
    for ops in ("mxnet", "gluon_cf"):
        with mxnet_ops() if ops == "mxnet" else contextlib.nullcontext():
            block = programs.Scan(prefix="scan_")
            block.hybridize()
            block(data)
            graphs[ops] = block._cached_graph[1]
    assert graphs["gluon_cf"].list_outputs() == graphs["mxnet"].list_outputs()
    with mxnet_ops():
        want = [o.asnumpy() for o in graphs["mxnet"].bind(mx.cpu(), {"data": data}).forward()]
    got = [o.asnumpy() for o in graphs["gluon_cf"].bind(mx.cpu(), {"data": data}).forward()]
    _assert_same(want, got, "cached graph")


class _ZoneoutTwice(gluon.HybridBlock):
    """MXNet's ZoneoutCell run by two foreach loops: the second body reads the cell's
    ``_prev_output``, a value of the first loop's last step (NOTE [a step's value read outside
    its body] in gluon_cf/errors.py)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.cell = rnn.ZoneoutCell(rnn.RNNCell(4, input_size=4), zoneout_outputs=0.5)

    def hybrid_forward(self, F, x, h):
        out, states = F.contrib.foreach(self.cell, x, [h])
        out, states = F.contrib.foreach(self.cell, out, states)
        return out


class _KeptStates(gluon.HybridBlock):
    """A while_loop func appending its state to a list read after the loop."""

    def hybrid_forward(self, F, x, h):
        kept = []

        def func(i, s):
            s = s * 2   # the line the error names
            kept.append(s)
            return s, [i + 1, s]
        out, _ = F.contrib.while_loop(lambda i, s: i < 3, func, [F.zeros((1,)), h],
                                      max_iterations=3)
        return out + kept[0]


@pytest.mark.substitutions("gluon_cf")
@pytest.mark.parametrize("block", [_ZoneoutTwice, _KeptStates])
def test_step_value_kept_outside_its_loop(block):
    """Hybridized, MXNet's ops and gluon_cf's both refuse the graph with an AssertionError;
    gluon_cf's names the line and what to change, not its internal variable."""
    arrays = [mx.nd.array(_normal(3, 2, 4)), mx.nd.array(_normal(2, 4))]
    errors = []
    for context in (mxnet_ops(), contextlib.nullcontext()):
        with context:
            net = block()
            net.initialize()
            net.hybridize()
            with pytest.raises(AssertionError) as info:
                net(*arrays)
            errors.append(str(info.value))
    assert "Unknown input to HybridBlock" in errors[0]
    assert "_gcf" not in errors[1] and "as a step output or a loop state" in errors[1]
    line = "s = s * 2" if block is _KeptStates else "F.contrib.foreach(self.cell, x, [h])"
    assert errors[1].startswith("%s:%d: " % (__file__, _line_of(block, line))), errors[1]


def _line_of(block, text):
    import inspect
    lines, first = inspect.getsourcelines(block)
    return first + next(k for k, line in enumerate(lines) if text in line)
