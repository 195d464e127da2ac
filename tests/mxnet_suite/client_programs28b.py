"""Client programs of ``test_client_code28.py``, continued from ``client_programs28.py`` (its
docstring says what they are): Gluon blocks, eager ``nd.contrib`` code and misused ops.
"""
import os
import tempfile

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon, nd
from mxnet.gluon import HybridBlock, nn, rnn

from mxnet_suite.client_programs28 import (COUNT_ARGS, RNN_ARGS, _count_symbol, _normal,
                                           _rnn_symbol, program)

# --------------------------------------------------------------------------------------------
# Gluon


class ForeachCell(HybridBlock):
    """MXNet's own cell as the body of foreach."""

    def __init__(self, cell, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.cell = cell

    def hybrid_forward(self, F, x, *states):
        out, states = F.contrib.foreach(self.cell, x, list(states))
        return [out] + states


class WhileCount(HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense = nn.Dense(3, in_units=3, flatten=False)

    def hybrid_forward(self, F, x, n):
        def func(i, h):
            h = F.tanh(self.dense(h))
            return h, [i + 1, h]
        outs, (i, h) = F.contrib.while_loop(lambda i, h: i < n, func, [F.zeros((1,)), x],
                                            max_iterations=4)
        return outs, i, h


class CondNet(HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.a = nn.Dense(3, in_units=3)
            self.b = nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x):
        return F.contrib.cond(F.sum(x) > 0, lambda: self.a(x), lambda: self.b(x) * 2)


def _train(net, inputs, hybridize=None, steps=2, grad_req=None):
    """Outputs of each step, then the parameters and gradients after ``steps`` SGD steps."""
    mx.random.seed(0)
    net.initialize(mx.init.Xavier() if not isinstance(net, gluon.SymbolBlock)
                   else mx.init.Uniform())
    if grad_req:
        for name, param in net.collect_params().items():
            param.grad_req = grad_req(name)
    if hybridize is not None:
        net.hybridize(**hybridize)
    trainer = (gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
               if list(net.collect_params().keys()) else None)
    result = []
    for _ in range(steps):
        arrays = [nd.array(a, dtype=a.dtype) for a in inputs]
        for a in arrays[:1]:
            a.attach_grad()
        with autograd.record():
            outs = net(*arrays)
            outs = outs if isinstance(outs, (list, tuple)) else [outs]
            loss = sum((o.astype("float32") * (k + 1)).sum() for k, o in enumerate(outs))
        loss.backward()
        if trainer is not None:
            trainer.step(1, ignore_stale_grad=True)
        result += [o.copy() for o in outs] + [arrays[0].grad]
    params = net.collect_params()
    return result + [params[k].data() for k in sorted(params)] + [
        params[k].grad() for k in sorted(params) if params[k].grad_req != "null"]


LSTM_IN = [_normal(4, 2, 3), _normal(2, 5, seed=1), _normal(2, 5, seed=2)]


@program
def gluon_foreach_lstm_static_alloc_static_shape():
    return _train(ForeachCell(rnn.LSTMCell(5, input_size=3)), LSTM_IN,
                  {"static_alloc": True, "static_shape": True})


@program
def gluon_foreach_gru_static_alloc_two_lengths():
    net = ForeachCell(rnn.GRUCell(5, input_size=3))
    mx.random.seed(0)
    net.initialize(mx.init.Xavier())
    net.hybridize(static_alloc=True)
    h = nd.array(_normal(2, 5, seed=1))
    return (net(nd.array(_normal(4, 2, 3)), h) + net(nd.array(_normal(6, 2, 3)), h)
            + net(nd.array(_normal(4, 2, 3, seed=5)), h))


@program
def gluon_foreach_lstm_grad_req_add():
    return _train(ForeachCell(rnn.LSTMCell(5, input_size=3)), LSTM_IN, {},
                  grad_req=lambda name: "add")


@program
def gluon_foreach_lstm_grad_req_null_bias():
    return _train(ForeachCell(rnn.LSTMCell(5, input_size=3)), LSTM_IN, {},
                  grad_req=lambda name: "null" if "bias" in name else "write")


@program
def gluon_foreach_lstmp_cell():
    cell = gluon.contrib.rnn.LSTMPCell(6, 3, input_size=3)
    return _train(ForeachCell(cell), [_normal(4, 2, 3), _normal(2, 3, seed=1),
                                      _normal(2, 6, seed=2)], {})


@program
def gluon_foreach_residual_rnn_cell():
    cell = rnn.ResidualCell(rnn.RNNCell(3, input_size=3))
    return _train(ForeachCell(cell), [_normal(4, 2, 3), _normal(2, 3, seed=1)], {})


@program
def gluon_foreach_sequential_cell():
    cell = rnn.HybridSequentialRNNCell()
    with cell.name_scope():
        cell.add(rnn.GRUCell(4, input_size=3))
        cell.add(rnn.RNNCell(3, input_size=4))
    return _train(ForeachCell(cell), [_normal(4, 2, 3), _normal(2, 4, seed=1),
                                      _normal(2, 3, seed=2)], {})


WHILE_IN = [_normal(2, 3), np.array([4], "float32")]


@program(oracle=lambda: _train(WhileCount(), WHILE_IN, None))
def gluon_while_count_static():
    """(MXNet's hybridized while_loop fails in backward, as in ``_count_eager``.)"""
    return _train(WhileCount(), WHILE_IN, {"static_alloc": True, "static_shape": True})


@program
def gluon_while_count_eager():
    return _train(WhileCount(), WHILE_IN, None)


@program
def gluon_cond_both_branches_hybridized():
    net = CondNet()
    first = _train(net, [np.abs(_normal(2, 3)) + 1], {}, steps=1)
    return first + [net(nd.array(-np.abs(_normal(2, 3)) - 1))]


@program
def gluon_export_imports_and_train():
    net = ForeachCell(rnn.GRUCell(4, input_size=3))
    mx.random.seed(0)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    x, h = nd.array(_normal(4, 2, 3)), nd.array(_normal(2, 4, seed=1))
    want = net(x, h)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gru")
        net.export(path, epoch=3)
        loaded = gluon.SymbolBlock.imports(path + "-symbol.json", ["data0", "data1"],
                                           path + "-0003.params")
    loaded.hybridize(static_alloc=True)
    trainer = gluon.Trainer(loaded.collect_params(), "sgd", {"learning_rate": 0.1})
    x.attach_grad()
    with autograd.record():
        outs = loaded(x, h)
        loss = outs[0].sum() + (outs[1] * 2).sum()
    loss.backward()
    trainer.step(1)
    params = loaded.collect_params()
    return want + outs + [x.grad] + [params[k].data() for k in sorted(params)]


@program
def gluon_export_while_and_cond_reimported():
    net = WhileCount()
    mx.random.seed(0)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    args = [nd.array(_normal(2, 3)), nd.array([4])]
    want = list(net(*args))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "while")
        net.export(path)
        sym = mx.sym.load(path + "-symbol.json")
        params = nd.load(path + "-0000.params")
    loaded = gluon.SymbolBlock(sym, [mx.sym.var("data0"), mx.sym.var("data1")])
    for name, param in loaded.collect_params().items():
        param._load_init(params["arg:" + name], mx.cpu())
    return want + list(loaded(*args)) + [sym.list_outputs()]


@program
def gluon_cached_graph_symbol_infer_shape():
    net = WhileCount()
    net.initialize()
    net.hybridize()
    net(nd.array(_normal(2, 3)), nd.array([4]))
    sym = net._cached_graph[1]
    return [sym.list_outputs(), sym.list_arguments(),
            sym.infer_type(data0="float32", data1="float32")[1]]


class Decoder(HybridBlock):
    """A greedy decoder in sockeye's style: while_loop over an embedding, a GRU cell and an
    output layer, stopping when every row emitted EOS (or at the bound)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.embed = nn.Embedding(6, 4)
            self.cell = rnn.GRUCell(4, input_size=4)
            self.out = nn.Dense(6, in_units=4)

    def hybrid_forward(self, F, tokens, h):
        def cond(t, h, done, n):
            return F.sum(1 - done) > 0

        def func(t, h, done, n):
            out, [h] = self.cell(self.embed(t), [h])
            logits = self.out(out)
            nxt = F.argmax(logits, axis=1)
            done = F.maximum(done, nxt == 5)
            return [nxt, F.max(logits, axis=1)], [nxt, h, done, n + 1]
        (steps, scores), (t, h, done, n) = F.contrib.while_loop(
            cond, func, [tokens, h, F.zeros_like(tokens), F.zeros((1,))], max_iterations=5)
        return steps, scores, h, done, n


@program
def gluon_greedy_decoder_hybridized():
    net = Decoder()
    mx.random.seed(3)
    net.initialize(mx.init.Normal(1.0))
    net.hybridize()
    result = []
    for tokens, seed in (([1, 2, 3], 0), ([0, 4, 2], 1)):
        steps, scores, h, done, n = net(nd.array(tokens), nd.array(_normal(3, 4, seed=seed)))
        n = int(n.asscalar())   # (rows past the last step: arbitrary in MXNet, 0 in gluon_cf)
        result += [n, steps[:n], scores[:n], h, done]
    return result


class BeamPrune(HybridBlock):
    """d2l style: a cond choosing a masked softmax or a plain one, inside foreach."""

    def hybrid_forward(self, F, scores, mask):
        def step(row, states):
            s, m = row
            p = F.contrib.cond(F.sum(m) > 0,
                               lambda: F.softmax(F.where(m > 0, s, F.ones_like(s) * -1e6)),
                               lambda: F.softmax(s))
            return p, [states[0] + p]
        probs, [total] = F.contrib.foreach(step, [scores, mask],
                                           [F.zeros_like(F.sum(scores, axis=0))])
        return probs, total


MASK = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 0], [0, 0, 0]], "float32")


@program(oracle=lambda: _train(BeamPrune(), [_normal(4, 3), MASK], None))
def gluon_masked_softmax_cond_in_foreach():
    """(MXNet's hybridized foreach cannot infer the shapes of a cond in its body.)"""
    return _train(BeamPrune(), [_normal(4, 3), MASK], {"static_alloc": True})


class StateOnly(HybridBlock):
    def hybrid_forward(self, F, x):
        _, s = F.contrib.foreach(lambda d, s: ([], s + d), x, F.zeros_like(F.sum(x, axis=0)))
        outs, _ = F.contrib.foreach(lambda d, s: (d * 2, []), x, [])
        return s, outs


@program(oracle=lambda: _train(StateOnly(), [_normal(3, 2)], None) * 2)
def gluon_foreach_states_only_and_outputs_only():
    """(MXNet's hybridized foreach of no state fails in backward: "storage_type_num_unknown_
    nodes".)"""
    return _train(StateOnly(), [_normal(3, 2)], {}) + _train(StateOnly(), [_normal(3, 2)], None)


class Float64Loop(HybridBlock):
    def hybrid_forward(self, F, x, i):
        outs, (i, x) = F.contrib.while_loop(lambda i, x: i < 3,
                                            lambda i, x: (x * 0.5, [i + 1, x * x]),
                                            [i, x], max_iterations=4)
        return outs, i, x


@program
def gluon_while_float64_int64_dtypes():
    net = Float64Loop()
    net.hybridize()
    outs = net(nd.array([1.5, 0.5], dtype="float64"), nd.array([0], dtype="int64"))
    # (the rows past the loop's 3 steps: arbitrary in MXNet, empty memory; 0 in gluon_cf)
    return [(o.dtype, o.shape, o.asnumpy()[:3]) for o in outs]


# --------------------------------------------------------------------------------------------
# Eager (nd.contrib)


@program
def nd_foreach_rnn_with_grad():
    cell = rnn.RNNCell(4, input_size=3)
    mx.random.seed(0)
    cell.initialize()
    x, h = nd.array(_normal(5, 2, 3)), nd.array(_normal(2, 4, seed=1))
    x.attach_grad()
    with autograd.record():
        out, [h2] = nd.contrib.foreach(cell, x, [h])
        loss = (out * 2).sum() + h2.sum()
    loss.backward()
    return [out, h2, x.grad, cell.i2h_weight.grad()]


@program
def nd_while_loop_no_step():
    outs, vs = nd.contrib.while_loop(lambda i, s: i < 0, lambda i, s: (s, [i + 1, s * 2]),
                                     [nd.array([0]), nd.array([1.0, 2.0])], max_iterations=3)
    return [outs, vs]


@program
def nd_cond_python_bool_like_pred():
    x = nd.array([1.0, 2.0])
    return [nd.contrib.cond(nd.array([0]), lambda: x * 2, lambda: x * 3),
            nd.contrib.cond(nd.array([2]), lambda: [x, x + 1], lambda: [x - 1, x])]


@program
def nd_foreach_record_grad_add():
    x = nd.array(_normal(3, 2))
    x.attach_grad(grad_req="add")
    for k in range(2):
        with autograd.record():
            out, s = nd.contrib.foreach(lambda d, s: (d * s, s + d), x, nd.ones((2,)))
            loss = out.sum() + (s * (k + 1)).sum()
        loss.backward()
    return [out, s, x.grad]


# --------------------------------------------------------------------------------------------
# Misuse: the type of the error (compared; its message is each library's own)


@program
def error_foreach_body_a_symbol_with_list_states():
    x = mx.sym.var("x")
    return list(mx.sym.contrib.foreach(x * 2, x, [mx.sym.var("s")]))


@program
def error_foreach_body_a_symbol_with_one_state():
    x = mx.sym.var("x")
    return list(mx.sym.contrib.foreach(x + mx.sym.var("s"), x, mx.sym.var("s")))


@program
def error_while_func_a_symbol():
    x = mx.sym.var("x")
    return list(mx.sym.contrib.while_loop(lambda v: v < 3, x + 1, [x], max_iterations=3))


@program
def error_while_cond_a_symbol():
    x = mx.sym.var("x")
    return list(mx.sym.contrib.while_loop(x < 3, lambda v: (v, [v + 1]), [x], max_iterations=3))


@program
def error_while_cond_a_symbol_in_gluon():
    class Net(HybridBlock):
        def hybrid_forward(self, F, x):
            return F.contrib.while_loop(x < 3, lambda v: (v, [v + 1]), [x], max_iterations=3)[0]
    net = Net()
    net.hybridize()
    return [net(nd.array([1]))]


@program
def error_while_empty_loop_vars():
    return list(mx.sym.contrib.while_loop(lambda: True, lambda: ([], []), [], max_iterations=3))


@program
def error_foreach_states_structure_changes():
    x, s = mx.sym.var("x"), mx.sym.var("s")
    return list(mx.sym.contrib.foreach(lambda d, st: (d, [st[0], st[0]]), x, [s]))


@program
def error_while_loop_vars_count_changes():
    x = mx.sym.var("x")
    return list(mx.sym.contrib.while_loop(lambda v, w: v < 3, lambda v, w: (v, [v + 1]), [x, x],
                                          max_iterations=3))


@program
def error_cond_branches_differ_in_count():
    a = mx.sym.var("a")
    return [mx.sym.contrib.cond(a > 0, lambda: [a, a], lambda: a)]


@program
def error_foreach_data_not_symbol():
    return list(mx.sym.contrib.foreach(lambda d, s: (d, s), [mx.sym.var("x"), 3],
                                       [mx.sym.var("s")]))


@program
def error_nd_foreach_body_an_ndarray():
    x = nd.ones((2, 2))
    return list(nd.contrib.foreach(x, x, [x]))


@program
def error_sym_bind_missing_argument():
    executor = _count_symbol().bind(mx.cpu(), {k: nd.array(v) for k, v in COUNT_ARGS.items()
                                               if k != "x"})
    return executor.forward()


@program
def error_nd_while_func_returns_one_value():
    return list(nd.contrib.while_loop(lambda v: v < 3, lambda v: v + 1, [nd.array([0])],
                                      max_iterations=3))


@program
def sym_symbolblock_from_loop_symbol_trained():
    data, h0 = mx.sym.var("data"), mx.sym.var("h0")
    net = gluon.SymbolBlock(_rnn_symbol(), [data, h0])
    mx.random.seed(0)
    net.initialize(mx.init.Uniform())
    return _train(net, [RNN_ARGS["data"], RNN_ARGS["h0"]], {}, steps=2)


@program
def gluon_optimize_for_mkldnn():
    net = ForeachCell(rnn.GRUCell(5, input_size=3))
    mx.random.seed(0)
    net.initialize()
    x, h = nd.array(_normal(4, 2, 3)), nd.array(_normal(2, 5, seed=1))
    net.hybridize()
    net.optimize_for(x, h, backend="MKLDNN")
    return net(x, h) + net(x * 2, h)


@program
def gluon_static_alloc_grad_req_add_three_backward():
    net = ForeachCell(rnn.GRUCell(5, input_size=3))
    mx.random.seed(0)
    net.initialize()
    net.collect_params().setattr("grad_req", "add")
    net.hybridize(static_alloc=True, static_shape=True)
    x, h = nd.array(_normal(4, 2, 3)), nd.array(_normal(2, 5, seed=1))
    for k in range(3):
        with autograd.record():
            outs = net(x * (k + 1), h)
            loss = outs[0].sum() + (outs[1] * 2).sum()
        loss.backward()
    params = net.collect_params()
    return [params[k].grad() for k in sorted(params)]


@program
def gluon_cast_float64():
    net = ForeachCell(rnn.LSTMCell(5, input_size=3))
    mx.random.seed(0)
    net.initialize()
    net.cast("float64")
    net.hybridize()
    x = nd.array(_normal(4, 2, 3), dtype="float64")
    h, c = (nd.array(_normal(2, 5, seed=k), dtype="float64") for k in (1, 2))
    x.attach_grad()
    with autograd.record():
        outs = net(x, h, c)
        loss = outs[0].sum() + outs[2].sum()
    loss.backward()
    return outs + [x.grad, net.cell.h2h_weight.grad()]


@program
def gluon_export_load_checkpoint_module():
    net = ForeachCell(rnn.GRUCell(5, input_size=3))
    mx.random.seed(0)
    net.initialize()
    net.hybridize()
    x, h = nd.array(_normal(4, 2, 3)), nd.array(_normal(2, 5, seed=1))
    want = net(x, h)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gru")
        net.export(path)
        sym, args, aux = mx.model.load_checkpoint(path, 0)
    module = mx.mod.Module(sym, data_names=["data0", "data1"], label_names=None)
    module.bind(data_shapes=[mx.io.DataDesc("data0", (4, 2, 3), layout="TNC"),
                             mx.io.DataDesc("data1", (2, 5))], for_training=False)
    module.set_params(args, aux)
    module.forward(mx.io.DataBatch([x, h]), is_train=False)
    return want + module.get_outputs()


class DropoutSteps(HybridBlock):
    def hybrid_forward(self, F, x):
        out, _ = F.contrib.foreach(
            lambda d, st: (F.broadcast_add(F.Dropout(d, p=0.5), st[0]), st), x, [F.zeros((1,))])
        return out


@program
def gluon_dropout_in_body_predict_mode_while_recording():
    net = DropoutSteps()
    net.hybridize()
    x = nd.array(_normal(3, 4))
    with autograd.record(train_mode=False):
        recorded = net(x)
    with autograd.predict_mode():
        predicted = net(x)
    return [recorded, predicted]


def _data_parallel(make, arrays, hybridize=True):
    """Two SGD steps of ``make()`` on cpu(0) and cpu(1), each half a batch (``arrays``: (value,
    batch axis)): the losses, then the parameters."""
    ctxs = [mx.cpu(0), mx.cpu(1)]
    net = make()
    mx.random.seed(0)
    net.initialize(ctx=ctxs)
    if hybridize:
        net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    result = []
    for _ in range(2):
        parts = [gluon.utils.split_and_load(nd.array(a), ctxs, batch_axis=axis)
                 for a, axis in arrays]
        with autograd.record():
            outs = [net(*args) for args in zip(*parts)]
            losses = [sum(o.sum() for o in (out if isinstance(out, (list, tuple)) else [out]))
                      for out in outs]
        autograd.backward(losses)
        trainer.step(4)
        result += [loss.as_in_context(mx.cpu()) for loss in losses]
    params = net.collect_params()
    return result + [params[k].data(mx.cpu(1)) for k in sorted(params)]


@program
def gluon_data_parallel_foreach_lstm():
    return _data_parallel(lambda: ForeachCell(rnn.LSTMCell(5, input_size=3)),
                          [(_normal(4, 4, 3), 1), (_normal(4, 5, seed=1), 0),
                           (_normal(4, 5, seed=2), 0)])


DP_WHILE = [(_normal(4, 3), 0), (np.array([4.0, 4.0]), 0)]


@program(oracle=lambda: _data_parallel(WhileCount, DP_WHILE, hybridize=False))
def gluon_data_parallel_while():
    """(MXNet's hybridized while_loop fails in backward, as in ``_count_eager``.)"""
    return _data_parallel(WhileCount, DP_WHILE)


class SinSteps(HybridBlock):
    def hybrid_forward(self, F, x, h):
        out, states = F.contrib.foreach(lambda d, st: (F.sin(d * st[0]), [st[0] + F.sin(d)]),
                                        x, [h])
        return out, states[0]


@program
def error_second_order_gradient_hybridized():
    net = SinSteps()
    net.hybridize()
    x, h = nd.array(_normal(3, 2)), nd.array(_normal(2, seed=1))
    x.attach_grad()
    with autograd.record():
        loss = sum(o.sum() for o in net(x, h))
        grad = autograd.grad(loss, [x], create_graph=True, retain_graph=True)[0]
        penalty = (grad * grad).sum()
    penalty.backward()
    return [x.grad]
