"""gluon_cf.export.export_onnx: hybridized gluon_cf models -> standard ONNX (If / Scan / Loop).

Every case exports a hybridized block from example inputs, checks the model with
``onnx.checker.check_model(full_check=True)`` and compares onnxruntime with the hybridized Gluon
block on *other* inputs: other values, sequence lengths, batch sizes and while_loop step counts.
"""
import os
import re

import mxnet as mx
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from mxnet import autograd, gluon

import gluon_cf
from gluon_cf.export import export_onnx, export_onnx_symbol

TOL = dict(rtol=1e-5, atol=1e-5)
CONTROL_FLOW = {"If", "Loop", "Scan"}


def randn(*shape, seed=0, scale=1.0):
    return (np.random.RandomState(seed).randn(*shape) * scale).astype(np.float32)


class Model(gluon.HybridBlock):
    """``hybrid_forward`` is ``fn(F, self, *inputs)``; ``children`` become attributes."""

    def __init__(self, fn, **children):
        super().__init__()
        self._fn = fn
        with self.name_scope():
            for name, make in children.items():
                setattr(self, name, make())

    def hybrid_forward(self, F, *inputs):
        return self._fn(F, self, *inputs)


def build(fn, seed=0, **children):
    net = Model(fn, **children)
    mx.random.seed(seed)
    net.initialize(mx.init.Uniform(0.5))
    net.hybridize()
    return net


def dense(units, in_units):
    return lambda: gluon.nn.Dense(units, in_units=in_units, flatten=False)


def flat(value):
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in flat(item)]
    return [value]


def gluon_outputs(net, inputs):
    return [o.asnumpy() for o in flat(net(*[mx.nd.array(x, dtype=x.dtype) for x in inputs]))]


def check_export(net, example, others, dynamic_axes=None, opset=13):
    """Export from ``example``; onnxruntime must equal Gluon on ``example`` and ``others``."""
    model = export_onnx(net, example, dynamic_axes=dynamic_axes, opset=opset)
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    declared = [[d.dim_value if d.HasField("dim_value") else None
                 for d in output.type.tensor_type.shape.dim] for output in model.graph.output]
    for inputs in [example] + list(others):
        got = session.run(None, dict(zip(names, inputs)))
        want = gluon_outputs(net, inputs)
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            assert (g.shape, g.dtype) == (w.shape, w.dtype), f"output {k} vs gluon"
            np.testing.assert_allclose(g, w, err_msg=f"output {k}", **TOL)
            # a declared size is a promise (onnxruntime warns on every run that breaks it)
            assert len(declared[k]) == g.ndim and all(
                d is None or d == n for d, n in zip(declared[k], g.shape)), \
                f"output {k} declared {declared[k]}, is {g.shape}"
    return model


def op_types(graph):
    """Op types of ``graph`` and all its subgraphs."""
    types = []
    for node in graph.node:
        types.append(node.op_type)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                types += op_types(attr.g)
    return types


def defined_names(graph):
    """Every name defined in ``graph`` and its subgraphs, with repetitions."""
    names = [v.name for v in graph.input] + [i.name for i in graph.initializer]
    for node in graph.node:
        names += [out for out in node.output if out]
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                names += defined_names(attr.g)
    return names


def subgraphs(graph):
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield node.op_type, attr.g
                yield from subgraphs(attr.g)


# ----------------------------------------------------------------------------- no control flow

def test_plain_mlp_with_dynamic_batch(tmp_path):
    net = build(lambda F, net, x: net.out(F.relu(net.hidden(x))),
                hidden=dense(8, 5), out=dense(3, 8))
    path = tmp_path / "mlp.onnx"
    model = export_onnx(net, [randn(2, 5)], path, dynamic_axes={0: [0]})
    assert onnx.load(str(path)).graph == model.graph
    assert not CONTROL_FLOW & set(op_types(model.graph))
    check_export(net, [randn(2, 5)], [[randn(7, 5, seed=1)]], dynamic_axes={"data": {0: "batch"}})


# ----------------------------------------------------------------------------- cond

def cond_model(F, net, x, p):
    # pred is a float: true iff nonzero; the branches read a Dense layer and an outer symbol.
    outer = F.tanh(x)
    return gluon_cf.cond(F.sum(p), lambda: net.fc(outer) * 2,
                         lambda: F.broadcast_add(outer, F.sum(x, axis=1, keepdims=True)))


def test_cond_is_if_reading_params_and_outer_values_from_enclosing_scope():
    net = build(cond_model, fc=dense(3, 3))
    x, p = randn(2, 3), np.array([0.5], np.float32)
    model = check_export(net, [x, p], [[randn(4, 3, seed=1), np.array([0.], np.float32)],
                                       [randn(1, 3, seed=2), np.array([-3.], np.float32)]],
                         dynamic_axes={0: [0]})
    assert op_types(model.graph).count("If") == 1
    (kind, then), (_, other) = list(subgraphs(model.graph))
    assert kind == "If" and len(then.input) == len(other.input) == 0
    params = {init.name for init in model.graph.initializer}
    assert sum(name.endswith(("dense0_weight", "dense0_bias")) for name in params) == 2
    for _, graph in subgraphs(model.graph):
        assert not any(init.name.endswith(("_weight", "_bias")) for init in graph.initializer)


# ----------------------------------------------------------------------------- foreach

def rnn_model(F, net, xs, ys, h0):
    """Two data arrays, two states, an outer symbol and parameters captured by the body."""
    shift = F.mean(h0, axis=0, keepdims=True)

    def body(data, states):
        x, y = data
        h, total = states
        h = F.tanh(net.i2h(x) + net.h2h(h) + F.broadcast_mul(y, shift))
        return [h, h.sum(axis=1)], [h, total + h]

    (hs, sums), (h, total) = gluon_cf.foreach(body, [xs, ys], [h0, F.zeros_like(h0)])
    return hs, sums, h, total


def test_foreach_is_scan_over_dynamic_length_and_batch():
    net = build(rnn_model, i2h=dense(4, 3), h2h=dense(4, 4))
    example = [randn(5, 2, 3), randn(5, 2, 1), randn(2, 4)]
    others = [[randn(T, B, 3, seed=T), randn(T, B, 1, seed=T + 1), randn(B, 4, seed=T + 2)]
              for T, B in ((1, 1), (9, 3))]
    model = check_export(net, example, others,
                         dynamic_axes={0: {0: "time", 1: "batch"}, 1: {0: "time", 1: "batch"},
                                       2: {0: "batch"}})
    scans = [g for kind, g in subgraphs(model.graph) if kind == "Scan"]
    assert len(scans) == 1 and len(scans[0].input) == 2 + 2  # states + data, no captures
    assert [d.dim_param for d in model.graph.output[0].type.tensor_type.shape.dim[:2]] == \
        ["time", "batch"]


def test_foreach_over_1d_data_sees_one_element_slices():
    def fn(F, net, xs, w):
        return gluon_cf.foreach(lambda x, s: (x * w, [s[0] + x * w]), xs, [F.zeros((1,))])
    net = build(fn)
    check_export(net, [randn(4), randn(1)], [[randn(11, seed=3), randn(1, seed=4)]],
                 dynamic_axes={0: [0]})


def tagger_model(F, net, tokens, h0):
    """Embedding outside, BatchNorm (running stats are aux states) and Dropout in the body."""
    def body(x, states):
        h = F.tanh(net.bn(net.i2h(x)) + states[0])
        return net.drop(h), [h]
    return gluon_cf.foreach(body, net.embed(tokens), [h0])


def test_foreach_body_with_batchnorm_stats_and_dropout():
    net = build(tagger_model, embed=lambda: gluon.nn.Embedding(10, 3), i2h=dense(4, 3),
                bn=lambda: gluon.nn.BatchNorm(in_channels=4), drop=lambda: gluon.nn.Dropout(0.5))
    net.bn.running_mean.set_data(mx.nd.array(randn(4, seed=3)))
    net.bn.running_var.set_data(mx.nd.array(np.abs(randn(4, seed=4)) + 0.5))

    def tokens(T, B, seed):
        return np.random.RandomState(seed).randint(0, 10, size=(T, B)).astype(np.float32)
    check_export(net, [tokens(4, 2, 0), randn(2, 4)], [[tokens(9, 3, 1), randn(3, 4, seed=1)]],
                 dynamic_axes={0: [0, 1], 1: [0]})


# ----------------------------------------------------------------------------- while_loop

def countdown_model(F, net, limit, x):
    """Doubles x until its sum passes limit: the step count depends on the input values."""
    def cond(i, v):
        return F.broadcast_lesser(F.sum(v).reshape((1,)), limit)

    def func(i, v):
        return [net.fc(v), i], [i + 1, v * 2]

    (rows, steps), (i, v) = gluon_cf.while_loop(cond, func, [F.zeros((1,)), x],
                                                max_iterations=6)
    return rows, steps, i, v


def test_while_loop_is_loop_with_data_dependent_step_count_and_zero_padding():
    net = build(countdown_model, fc=dense(2, 3))
    x = np.abs(randn(2, 3)) + 0.1
    limits = [np.array([x.sum() * k], np.float32) for k in (1.5, 5, 100)]  # 1, 3, 6 steps
    model = check_export(net, [limits[0], x], [[limit, x] for limit in limits[1:]])
    assert "Loop" in op_types(model.graph)
    steps = gluon_outputs(net, [limits[1], x])[2]
    assert steps[0] == 3


def test_while_loop_zero_steps_with_dynamic_batch():
    # After zero steps, the rows of the step outputs have the (dynamic) batch dim of x.
    net = build(countdown_model, fc=dense(2, 3))
    x = np.abs(randn(2, 3)) + 0.1
    never = np.array([-1.0], np.float32)
    example = [np.array([x.sum() * 3], np.float32), x]
    others = [[never, x], [never, np.abs(randn(5, 3, seed=1))], [np.array([1e3], np.float32),
                                                                  np.abs(randn(4, 3, seed=2))]]
    check_export(net, example, others, dynamic_axes={1: [0]})
    rows = gluon_outputs(net, [never, np.abs(randn(5, 3, seed=1))])[0]
    assert rows.shape == (6, 5, 2) and not rows.any()


def test_while_loop_without_step_outputs_and_single_loop_var():
    def fn(F, net, x):
        return gluon_cf.while_loop(lambda v: F.sum(v) < 10, lambda v: (None, v + 1), x,
                                   max_iterations=20)[1]
    net = build(fn)
    check_export(net, [randn(3)], [[randn(3, seed=1) + 20], [randn(3, seed=2) - 5]])


def test_integer_tokens_and_counters_keep_their_dtype():
    def fn(F, net, tokens, n):
        embedded, (count,) = gluon_cf.foreach(lambda t, s: (net.embed(t), [s[0] + 1]), tokens,
                                              [F.zeros((1,), dtype="int32")])
        rows, (i,) = gluon_cf.while_loop(lambda i: F.broadcast_lesser(i, n),
                                         lambda i: (i * 2, [i + 1]),
                                         [F.zeros((1,), dtype="int32")], max_iterations=5)
        return embedded, count, rows, i
    net = build(fn, embed=lambda: gluon.nn.Embedding(10, 3))
    tokens = np.arange(1, 7, dtype=np.int32).reshape(3, 2)
    limit = [np.array([k], np.int32) for k in (3, 0, 9)]
    model = check_export(net, [tokens, limit[0]],
                         [[tokens[:2, :1], limit[1]], [np.tile(tokens, (3, 1)), limit[2]]],
                         dynamic_axes={0: [0, 1]})
    assert [o.type.tensor_type.elem_type for o in model.graph.output] == \
        [onnx.TensorProto.FLOAT] + [onnx.TensorProto.INT32] * 3


# ----------------------------------------------------------------------------- nesting

def nested_model(F, net, xs, h0):
    """while_loop > cond > foreach > cond, reading params and outer values at every level.

    The step count depends on the data: steps while ``i < (number of positive entries of
    sum(xs, axis=0)) - 1``, at most 4.
    """
    seq_total = F.sum(xs, axis=0)

    def rnn(x, states):
        h = F.tanh(net.i2h(x) + net.h2h(states[0]))
        h = gluon_cf.cond(F.sum(x) > 0, lambda: h, lambda: h * 0.5)
        return h, [h]

    def func(i, h):
        def run_rnn():
            hs, (last,) = gluon_cf.foreach(rnn, xs, [h])
            return last + F.mean(hs, axis=0)
        h = gluon_cf.cond(i < 2, run_rnn, lambda: h - net.i2h(seq_total) * 0.1)
        return h, [i + 1, h]

    def keep_going(i, h):
        return F.broadcast_lesser(i, F.sum(seq_total > 0).reshape((1,)) - 1) * \
            (F.mean(F.abs(h)) < 10)

    hs, (i, h) = gluon_cf.while_loop(keep_going, func, [F.zeros((1,)), h0], max_iterations=4)
    return hs, i, h


@pytest.mark.parametrize("opset", [12, 13])
def test_nested_while_cond_foreach(opset):
    net = build(nested_model, i2h=dense(4, 3), h2h=dense(4, 4))
    inputs = {steps: [randn(T, B, 3, seed=T, scale=sx), randn(B, 4, seed=B, scale=sh)]
              for steps, (T, B, sx, sh) in enumerate(
                  [(5, 1, 1.0, 0.5), (4, 2, 1.0, 0.01), (3, 2, 1.0, 0.1), (1, 3, 0.1, 1.0),
                   (6, 4, 1.0, 1.0)])}
    for steps, x in inputs.items():  # 0 to 4 (= max_iterations) steps
        assert gluon_outputs(net, x)[1] == [steps]
    model = check_export(net, inputs[2], [inputs[k] for k in (0, 1, 3, 4)],
                         dynamic_axes={0: [0, 1], 1: [0]}, opset=opset)
    assert model.opset_import[0].version == opset
    assert {"Loop", "If", "Scan"} <= set(op_types(model.graph))
    assert all(node.domain == "" for node in model.graph.node)
    names = defined_names(model.graph)
    assert len(names) == len(set(names))  # no shadowing, not even between sibling branches


# ----------------------------------------------------------------------------- a trained model

class SequenceRegressor(gluon.HybridBlock):
    """An Elman RNN over (T, B, 1) sequences predicting their running mean."""

    def __init__(self, hidden=8):
        super().__init__()
        with self.name_scope():
            self.i2h = gluon.nn.Dense(hidden, in_units=1, flatten=False)
            self.h2h = gluon.nn.Dense(hidden, in_units=hidden, flatten=False)
            self.out = gluon.nn.Dense(1, in_units=hidden, flatten=False)

    def hybrid_forward(self, F, xs, h0):
        def step(x, states):
            h = F.tanh(self.i2h(x) + self.h2h(states[0]))
            return self.out(h), [h]
        ys, _ = gluon_cf.foreach(step, xs, [h0])
        return ys


def test_trained_rnn_exports_with_trained_weights():
    net = SequenceRegressor()
    mx.random.seed(1)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.05})
    rng = np.random.RandomState(0)
    losses = []
    for _ in range(30):
        xs = rng.uniform(-1, 1, size=(6, 8, 1)).astype(np.float32)
        target = np.cumsum(xs, axis=0) / np.arange(1, 7).reshape(6, 1, 1)
        with autograd.record():
            loss = ((net(mx.nd.array(xs), mx.nd.zeros((8, 8))) - mx.nd.array(target)) ** 2).mean()
        loss.backward()
        trainer.step(1)
        losses.append(loss.asscalar())
    assert losses[-1] < losses[0]
    check_export(net, [randn(6, 2, 1), np.zeros((2, 8), np.float32)],
                 [[randn(15, 4, 1, seed=1), randn(4, 8, seed=2)]],
                 dynamic_axes={0: [0, 1], 1: [0]})


def test_export_from_net_export_files(tmp_path):
    # What a command-line tool starts from: the symbol and params files of net.export().
    net = build(rnn_model, i2h=dense(4, 3), h2h=dense(4, 4))
    example = [randn(5, 2, 3), randn(5, 2, 1), randn(2, 4)]
    gluon_outputs(net, example)
    net.export(str(tmp_path / "rnn"))
    sym = mx.sym.load(str(tmp_path / "rnn-symbol.json"))
    params = mx.nd.load(str(tmp_path / "rnn-0000.params"))
    model = export_onnx_symbol(
        sym, params, [(f"data{k}", x.shape, x.dtype) for k, x in enumerate(example)],
        tmp_path / "rnn.onnx", input_names=["xs", "ys", "h0"], output_names=["a", "b", "c", "d"],
        dynamic_axes={"xs": [0], "ys": [0]})
    assert os.path.exists(tmp_path / "rnn.onnx")
    assert [v.name for v in model.graph.output] == ["a", "b", "c", "d"]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    inputs = [randn(8, 2, 3, seed=5), randn(8, 2, 1, seed=6), randn(2, 4, seed=7)]
    got = session.run(None, dict(zip(["xs", "ys", "h0"], inputs)))
    for g, w in zip(got, gluon_outputs(net, inputs)):
        np.testing.assert_allclose(g, w, **TOL)


# ----------------------------------------------------------------------------- run-time shapes
# Blocks that hybridize with values whose shape is known only at run time (collected lists,
# boolean_mask, exact-length loops, conds whose branches differ in size), exported once and
# run on other lengths and masks (issue 24).

class Collected(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = gluon.nn.Dense(3, in_units=3, flatten=False)


class ConcatAfterFor(Collected):
    """The rows a for over a tensor collected, joined every way a list of them can be."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(F.sum(x, axis=0, keepdims=True))
        outs = []
        for row in x:
            h = F.tanh(F.broadcast_add(self.fc(h), row))
            outs.append(h * 2)
        return (F.concat(*outs, dim=0), F.concat(*outs, dim=1), F.stack(*outs, axis=1),
                F.add_n(*outs), outs[-1])


class EarlierItemsAndTwoLoops(Collected):
    """A list holding an item before a tensor while (whose step count depends on the
    values), appended to by that loop, by a for over the input's rows, and after both."""

    @gluon_cf.autograph(max_iterations=8)
    def hybrid_forward(self, F, x):
        h = self.fc(F.sum(x, axis=0, keepdims=True))
        outs = [h]
        while F.norm(h) > 0.5:
            h = h * 0.6
            outs.append(h)
        for row in x:
            h = F.broadcast_add(h, row)
            outs.append(h)
        outs.append(h + 1)
        return F.concat(*outs, dim=0), F.add_n(*outs), outs[1]


class EarlierItemsThenFor(Collected):
    """Items before a for over the input's rows: the rows joined after them (the model's
    output was declared with the earlier items' number of rows, onnxruntime warning on every
    run that its output broke the declared shape)."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        h = F.sum(x, axis=0, keepdims=True)
        outs = [h, h * 2]
        for row in x:
            h = F.tanh(F.broadcast_add(self.fc(h), row))
            outs.append(h)
        return F.stack(*outs), F.concat(*outs, dim=0)


def masked_rows(F, x):
    """The rows of x whose sum is positive (a boolean_mask: their number is known at run
    time)."""
    return F.contrib.boolean_mask(x, F.sum(x, axis=1) > 0)


def foreach_over_masked_rows(F, net, x):
    def step(row, states):
        h = F.tanh(net.fc(F.broadcast_add(states[0], row)))
        return h * 2, [h]
    hs, (h,) = gluon_cf.foreach(step, masked_rows(F, x), [F.zeros_like(F.sum(x, axis=0))])
    return hs, h


def while_reading_masked_rows(F, net, x):
    kept = masked_rows(F, x)

    def func(h, i):
        return h, [F.tanh(F.broadcast_add(h, F.sum(kept, axis=0))), i + 1]
    rows, (h, i) = gluon_cf.while_loop(lambda h, i: i < 3, func,
                                       [F.zeros_like(F.sum(x, axis=0)), F.zeros((1,))],
                                       max_iterations=4)
    return rows, h


def loops_after_a_resizing_cond(F, net, x):
    """foreach and while_loop over, or reading, a cond's value whose branches differ in rows."""
    y = gluon_cf.cond(F.sum(x) > 0, lambda: x, lambda: F.concat(x, x * 2, dim=0))
    hs, (total,) = gluon_cf.foreach(lambda r, s: (net.fc(r) * 2, [s[0] + r]), y,
                                    [F.zeros_like(F.sum(x, axis=0))])
    rows, (h, i) = gluon_cf.while_loop(
        lambda h, i: i < 2, lambda h, i: (h, [h + F.sum(y, axis=0), i + 1]),
        [F.zeros_like(F.sum(x, axis=0)), F.zeros((1,))], max_iterations=3)
    return hs, total, rows, h


def rows(lengths, shift=0.0):
    return [randn(n, 3, seed=n) + shift for n in lengths]


@pytest.mark.parametrize("block", [ConcatAfterFor, EarlierItemsAndTwoLoops, EarlierItemsThenFor],
                         ids=lambda b: b.__name__)
def test_collected_lists_export(block):
    """F.concat(*items) of collected rows (autograph's reshape merging two axes), a list
    with earlier items and two loops appending to it: several lengths and step counts."""
    mx.random.seed(0)
    net = block()
    net.initialize(mx.init.Xavier())
    net.hybridize()
    lengths = rows([3, 1, 2, 6]) + [randn(4, 3, seed=9, scale=0.01)]
    check_export(net, [lengths[0]], [[x] for x in lengths[1:]], dynamic_axes={0: [0]})


@pytest.mark.parametrize("fn", [foreach_over_masked_rows, while_reading_masked_rows,
                                loops_after_a_resizing_cond], ids=lambda f: f.__name__)
def test_loops_over_values_of_run_time_shape_export(fn):
    """foreach over boolean_mask's rows, a while_loop reading them, loops after a cond whose
    branches differ in size: several lengths, masks and branches."""
    net = build(fn, fc=dense(3, 3))
    xs = rows([4, 1, 5, 6, 7, 8])                   # 1 to 5 rows kept, both branches
    xs.append(-np.abs(randn(3, 3, seed=5)))
    xs[-1][1] *= -1                                 # one row kept
    model = check_export(net, [xs[0]], [[x] for x in xs[1:]], dynamic_axes={0: [0]})
    if fn is foreach_over_masked_rows:              # (a foreach needs at least one row)
        return
    # No row kept. (A fresh block: hybridized, this once depended on earlier calls.)
    x = -np.abs(randn(2, 3, seed=6))
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: x})
    for g, w in zip(got, gluon_outputs(build(fn, fc=dense(3, 3)), [x])):
        np.testing.assert_allclose(g, w, **TOL)


@pytest.mark.parametrize("fn", [foreach_over_masked_rows, loops_after_a_resizing_cond],
                         ids=lambda f: f.__name__)
def test_run_time_shapes_export_from_net_export_files(fn, tmp_path):
    """From net.export()'s files there is no run to take output ranks from: the shape plan
    gives them (what is known of each run-time shape)."""
    net = build(fn, fc=dense(3, 3))
    xs = rows([4, 1, 6, 8])
    gluon_outputs(net, [xs[0]])
    net.export(str(tmp_path / "net"))
    model = export_onnx_symbol(mx.sym.load(str(tmp_path / "net-symbol.json")),
                               mx.nd.load(str(tmp_path / "net-0000.params")),
                               [("data", xs[0].shape, xs[0].dtype)], dynamic_axes={"data": [0]})
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for x in xs:
        got = session.run(None, {"data": x})
        for g, w in zip(got, gluon_outputs(net, [x])):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, **TOL)


_EXPORTED = {}


def exported_session(fn):
    """The block of ``fn`` and its onnxruntime session, exported once per test run."""
    if fn not in _EXPORTED:
        net = build(fn, fc=dense(3, 3))
        model = export_onnx(net, [rows([4])[0]], dynamic_axes={0: [0]})
        _EXPORTED[fn] = net, ort.InferenceSession(model.SerializeToString(),
                                                  providers=["CPUExecutionProvider"])
    return _EXPORTED[fn]


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(fn=st.sampled_from([foreach_over_masked_rows, while_reading_masked_rows,
                           loops_after_a_resizing_cond]),
       signs=st.lists(st.booleans(), min_size=1, max_size=9).filter(any),
       seed=st.integers(0, 2 ** 16))
def test_run_time_shapes_export_on_random_lengths_and_masks(fn, signs, seed):
    """Random lengths and masks (rows kept where the sign is positive; at least one):
    onnxruntime equals the hybridized block."""
    net, session = exported_session(fn)
    magnitudes = np.abs(randn(len(signs), 3, seed=seed)) + 0.01
    x = np.where(np.array(signs)[:, None], magnitudes, -magnitudes).astype(np.float32)
    got = session.run(None, {session.get_inputs()[0].name: x})
    want = gluon_outputs(net, [x])
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, **TOL)


# ----------------------------------------------------------------------------- errors

def test_unconvertible_op_inside_a_body_is_named():
    def fn(F, net, xs):
        return gluon_cf.foreach(lambda x, s: (F.gammaln(x), [s[0] + x]), xs, [F.zeros((2,))])[0]
    net = build(fn)
    line = fn.__code__.co_firstlineno + 1
    with pytest.raises(NotImplementedError,
                       match=rf"^{re.escape(__file__)}:{line}: export_onnx: "
                             r"node '\w*gammaln\w*' \(MXNet op 'gammaln'\) in the 'body' graph of "
                             r"foreach node '\w*foreach\w*' cannot be converted: mx2onnx has no "
                             r"converter for 'gammaln' at opset 13"):
        export_onnx(net, [randn(3, 2)])


class NotOnnxOutside(gluon.HybridBlock):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        with self.name_scope():
            self.lstm = gluon.rnn.LSTM(2, projection_size=1, input_size=3)   # no ONNX LSTMP

    def hybrid_forward(self, F, x):
        if self.kind == "gammaln":
            return F.gammaln(x) + 1
        return F.broadcast_add(x, self.lstm(F.expand_dims(x, 0)).sum())


@pytest.mark.parametrize("kind", ["gammaln", "lstm"])
def test_refusals_outside_bodies_name_the_users_line(kind):
    """An op of the block itself (no gluon_cf trace recorded its line) that ONNX cannot take:
    the refusal starts with the user's file and line all the same; the block still runs."""
    net = NotOnnxOutside(kind)
    net.initialize()
    net.hybridize()
    line = NotOnnxOutside.hybrid_forward.__code__.co_firstlineno + (2 if kind == "gammaln" else 3)
    with pytest.raises(NotImplementedError, match=rf"^{re.escape(__file__)}:{line}: "
                                                  rf"(export_onnx: node|mx2onnx cannot)"):
        export_onnx(net, [randn(2, 3)])
    assert net(mx.nd.ones((2, 3))).shape == (2, 3)


def always_dropout(F, x):
    return F.Dropout(x, p=0.5, mode="always")


def test_mx2onnx_failure_inside_a_body_names_the_node():
    net = build(tagger_model, embed=lambda: gluon.nn.Embedding(10, 3), i2h=dense(4, 3),
                bn=lambda: gluon.nn.HybridLambda(always_dropout),
                drop=lambda: gluon.nn.Dropout(0.5))
    line = always_dropout.__code__.co_firstlineno + 1
    with pytest.raises(NotImplementedError,
                       match=rf"^{re.escape(__file__)}:{line}: "
                             r"mx2onnx cannot convert node '\w*dropout\w*' \(MXNet op "
                             r"'Dropout'\): NotImplementedError: Dropout does not currently "
                             r"support mode!='training'"):
        export_onnx(net, [np.zeros((4, 2), np.float32), randn(2, 4)])


def test_recursion_on_a_vector_argument_is_refused():
    @gluon_cf.recursive
    def halve(x):
        return gluon_cf.cond(mx.sym.sum(x) > 1, lambda: halve(x * 0.5), lambda: x)

    net = build(lambda F, net, x: halve(x))
    # One call on a (2,) vector: the loops stack calls as rows, so x would read as two calls.
    with pytest.raises(NotImplementedError, match=r"function 'halve'\) cannot be lowered to "
                                                  r"standard ONNX loops: its argument #0 has "
                                                  r"shape \(2,\), not one row per call.*"
                                                  r"save_artifact"):
        export_onnx(net, [np.ones(2, np.float32) * 5])


def test_not_hybridized_net_is_rejected():
    net = Model(lambda F, net, x: x * 2)
    with pytest.raises(ValueError, match=r"net is not hybridized; call net.hybridize\(\) first"):
        export_onnx(net, [randn(2)])


def test_dynamic_axes_errors():
    net = build(lambda F, net, x: net.fc(x), fc=dense(3, 3))
    with pytest.raises(ValueError, match=r"dynamic_axes names input 'x', but the inputs are "
                                         r"\['data'\]"):
        export_onnx(net, [randn(2, 3)], dynamic_axes={"x": [0]})
    with pytest.raises(ValueError, match=r"gives axis 2 for input 0, which has rank 2"):
        export_onnx(net, [randn(2, 3)], dynamic_axes={0: [2]})
    with pytest.raises(ValueError, match=r"the model's shapes do not allow the dynamic axes "
                                         r"\{'data': \[1\]\} to change"):
        export_onnx(net, [randn(2, 3)], dynamic_axes={0: [1]})


def test_unused_initializers_are_removed():
    """mx2onnx folds ``1 - w`` of a parameter into a constant and leaves ``w`` behind (NOTE
    [mx2onnx pitfalls]); the exported model holds only initializers something reads, and the
    conftest check (an independent implementation) finds the one left before pruning."""
    import onnx
    from conftest import unused_initializers
    from gluon_cf.export.onnx_graph import remove_unused_initializers

    class RMinus(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            self.w = self.params.get("w", shape=(3,))

        def hybrid_forward(self, F, x, w):
            return F.broadcast_mul(x, 1 - w)

    net = RMinus()
    net.initialize(mx.init.Uniform(1))
    net.hybridize()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = check_export(net, [x], [[x + 1]])
    assert len(model.graph.initializer) == 1      # the folded 1 - w, not w
    assert unused_initializers(model.graph) == []

    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
        [onnx.numpy_helper.from_array(np.ones(1, np.float32), "unused")])
    assert unused_initializers(graph) == ["main:unused"]
    assert remove_unused_initializers(graph) == ["g:unused"]
    assert unused_initializers(graph) == []
