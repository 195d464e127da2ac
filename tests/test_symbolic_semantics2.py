"""MXNet 1.9.1's semantics where gluon_cf differed (session 18): MXNet's own ``F.contrib`` ops
are the oracle, symbolic (``infer_shape``, ``infer_shape_partial``, ``bind``) and hybridized.

- A ``cond`` whose branches return different ranks: MXNet runs it (the taken branch decides);
  gluon_cf refused it with a ValueError.
- A ``while_loop`` whose func changes a loop variable's shape: MXNet's ``Symbol.infer_shape``
  answers None (``infer_shape_partial``: unknown), as it infers nothing through its while_loop;
  gluon_cf raised. Running it is an error in both.
- A gradient asked of an Embedding's indices through a hybridized node: MXNet refuses it;
  gluon_cf gave 0 silently (NOTE [gradients asked of indices]).
- float64 export rewrites were skipped when onnxruntime lacks its kernel registry.
"""
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

import gluon_cf
from gluon_cf.graph.index_gradients import IndexGradientError

OPS = {"mxnet": mx.sym.contrib, "gluon_cf": gluon_cf}


def _ranks_cond(ops):
    x = mx.sym.var("x")
    return ops.cond(mx.sym.sum(x) > 0, lambda: x * 2, lambda: mx.sym.sum(x, axis=0) * 3)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_symbolic_cond_of_different_ranks_runs_as_mxnets_bind(sign):
    """MXNet binds it; gluon_cf's output has a run-time shape, so a Symbol executor refuses it
    (DynamicShapeError, as for branches of different sizes) and a SymbolBlock runs it."""
    value = nd.array([[1.0, 2.0], [3.0, 0.5]]) * sign
    sym = _ranks_cond(mx.sym.contrib)
    grad = nd.zeros((2, 2))
    ex = sym.bind(mx.cpu(), {"x": value}, args_grad={"x": grad})
    ex.forward(is_train=True)
    ex.backward([nd.ones(ex.outputs[0].shape) * 0.5])
    want = ex.outputs[0].asnumpy(), grad.asnumpy()

    sym = _ranks_cond(gluon_cf)
    assert sym.infer_shape_partial(x=(2, 2))[0] == [(2, 2)]
    with pytest.raises(gluon_cf.DynamicShapeError, match="SymbolBlock"):
        sym.bind(mx.cpu(), {"x": value}).forward()
    block = gluon.SymbolBlock(sym, [mx.sym.var("x")])
    block.hybridize(static_alloc=True, static_shape=True)
    value.attach_grad()
    with autograd.record():
        out = block(value)
    out.backward(nd.ones(out.shape) * 0.5)
    for got, expected in zip((out.asnumpy(), value.grad.asnumpy()), want):
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-6)


class _RanksBlock(gluon.HybridBlock):
    def __init__(self, ops):
        super().__init__()
        self.ops = ops

    def hybrid_forward(self, F, x):
        ops = self.ops or F.contrib
        return ops.cond(F.sum(x) > 0, lambda: x * 2, lambda: F.sum(x, axis=0))


def test_hybridized_cond_of_different_ranks_matches_mxnet_with_static_alloc():
    nets = {k: _RanksBlock(ops) for k, ops in (("mxnet", None), ("gluon_cf", gluon_cf))}
    for net in nets.values():
        net.hybridize(static_alloc=True, static_shape=True)
    for v in ([[1.0, 2.0]], [[-1.0, -2.0]], [[3.0, 4.0]]):
        results = {}
        for name, net in nets.items():
            x = nd.array(v)
            x.attach_grad()
            with autograd.record():
                y = net(x)
            y.backward()
            results[name] = y.asnumpy(), x.grad.asnumpy()
        for got, want in zip(results["gluon_cf"], results["mxnet"]):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-6)


def _growing_while(ops):
    x = mx.sym.var("x")
    outs, (_, grown) = ops.while_loop(
        lambda i, a: i < 3, lambda i, a: (a, [i + 1, mx.sym.concat(a, a, dim=0)]),
        [mx.sym.sum(x) * 0, x], max_iterations=4)
    return mx.sym.Group([outs, grown])


def test_infer_shape_of_a_while_loop_changing_a_variables_shape_answers_as_mxnet():
    answers = {}
    for name, ops in OPS.items():
        sym = _growing_while(ops)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            full = sym.infer_shape(x=(1, 2))
        assert any("Cannot decide shape" in str(w.message) for w in caught)
        answers[name] = full, sym.infer_shape_partial(x=(1, 2)), sym.infer_type(x="float32")
    assert answers["gluon_cf"] == answers["mxnet"]
    assert answers["gluon_cf"][0] == (None, None, None)
    # Running it is an error in both (MXNet: "operands shape mismatch" in forward).
    with pytest.raises(ValueError, match="loop variable shapes before and after func differ"):
        ex = _growing_while(gluon_cf).bind(mx.cpu(), {"x": nd.ones((1, 2))})
        ex.forward()
        ex.outputs[0].wait_to_read()


class _EmbeddingInCond(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.emb = gluon.nn.Embedding(10, 3)

    def hybrid_forward(self, F, idx, x):
        return gluon_cf.cond(F.sum(x) > 0, lambda: self.emb(idx * 1) + x, lambda: x * 2)


def test_gradient_asked_of_embedding_indices_through_a_cond_is_refused_as_mxnet():
    """Eager, MXNet refuses it (and MXNet's own hybridized cond); hybridized gluon_cf gave 0."""
    net = _EmbeddingInCond()
    net.initialize()
    idx, x = nd.array([1, 2]), nd.ones((2, 3))
    idx.attach_grad()
    with pytest.raises(mx.MXNetError, match="doesn't support calculate data gradient"):
        with autograd.record():
            y = net(idx, x)
        y.backward()
        idx.grad.asnumpy()
    net.hybridize()
    with pytest.raises(IndexGradientError, match=r"(?s)input 1.*Embedding at .*"
                       r"test_symbolic_semantics2.py:\d+.*F.BlockGrad"):
        with autograd.record():
            y = net(idx, x)
        y.backward()
        idx.grad.asnumpy()
    # Without a gradient asked of the indices: x's and the weight's, as eagerly.
    idx = nd.array([1, 2])
    grads = []
    for hybrid in (False, True):
        fresh = _EmbeddingInCond()
        fresh.initialize(mx.init.Constant(0.25))
        if hybrid:
            fresh.hybridize()
        xg = nd.array([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]])
        xg.attach_grad()
        with autograd.record():
            y = fresh(idx, xg)
            loss = y * y
        loss.backward()
        grads.append((y.asnumpy(), xg.grad.asnumpy(), fresh.emb.weight.grad().asnumpy()))
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_embedding_of_a_loop_counter_still_differentiates_where_mxnet_refuses():
    """MXNet's own foreach refuses this body in backward; the counter's gradient is asked by no
    one, so gluon_cf runs it (values and gradients as eagerly)."""
    class Counter(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.emb = gluon.nn.Embedding(10, 3)

        def hybrid_forward(self, F, x):
            def body(d, s):
                h = self.emb(s[0]) * d + s[1]
                return h, [s[0] + 1, h]
            return gluon_cf.foreach(body, x, [F.zeros((2,)), F.zeros((2, 3))])[1][1]

    results = []
    for hybrid in (False, True):
        net = Counter()
        net.initialize(mx.init.Uniform(0.5))
        mx.random.seed(0)
        net.initialize(mx.init.Uniform(0.5), force_reinit=True)
        if hybrid:
            net.hybridize()
        x = nd.array(np.arange(18).reshape(3, 2, 3) / 10.0)
        x.attach_grad()
        with autograd.record():
            y = net(x)
        y.backward()
        results.append((y.asnumpy(), x.grad.asnumpy()))
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_float64_rewrites_are_made_without_onnxruntimes_kernel_registry(monkeypatch):
    ort = pytest.importorskip("onnxruntime")
    from gluon_cf.export import export_onnx
    from gluon_cf.export.onnx_graph import runtime_kernels
    from test_export_onnx import build, gluon_outputs

    monkeypatch.setattr(runtime_kernels, "_kernels", lambda: None)
    x = np.array([[1e-17, -1e-12, 0.5, -3.0, 1e8, 709.9]])
    net = build(lambda F, n, x: (F.arcsinh(x), F.sinh(x), F.Activation(x, "softrelu")))
    net.cast("float64")
    model = export_onnx(net, [x])
    ops = {node.op_type for node in model.graph.node}
    assert not ops & {"Asinh", "Sinh", "Softplus"}, ops
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for got, want in zip(session.run(None, {session.get_inputs()[0].name: x}),
                         gluon_outputs(net, [x])):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)


def test_subgraph_names_are_counted_as_mxnets(monkeypatch):
    """MXNet's test_scope reads ``AttrScope._subgraph_names`` after two blocks' ``cond``s."""
    from collections import defaultdict
    from mxnet.attribute import AttrScope

    counts = {}
    for name, ops in OPS.items():
        monkeypatch.setattr(AttrScope, "_subgraph_names", defaultdict(int))
        x = mx.sym.var("x")
        for _ in range(2):
            ops.cond(mx.sym.sum(x) > 0, lambda: x * 2, lambda: x * 3, name="my_cond")
        ops.foreach(lambda d, s: (d + s, s * 2), x, mx.sym.var("h"), name="fe")
        ops.while_loop(lambda i: i < 2, lambda i: (i * 2, i + 1), x, max_iterations=2, name="w")
        counts[name] = dict(AttrScope._subgraph_names)
    assert counts["gluon_cf"] == counts["mxnet"]
    assert counts["mxnet"]["my_cond_then"] == 2


def _dtype_mismatches(ops):
    x = mx.sym.var("x")
    yield ops.cond(mx.sym.sum(x) > 0, lambda: x * 2, lambda: mx.sym.cast(x, "float64"))
    yield ops.while_loop(lambda i, a: i < 3, lambda i, a: (a, [i + 1, mx.sym.cast(a, "float64")]),
                         [mx.sym.sum(x) * 0, x], max_iterations=4)[1][1]


def test_disagreeing_dtypes_raise_the_error_types_mxnet_raises(capfd):
    """infer_type, bind and simple_bind: MXNet raises MXNetError (simple_bind: RuntimeError);
    gluon_cf's error is an MXNetError too (and a ValueError), naming the node."""
    for ours, theirs in zip(_dtype_mismatches(gluon_cf), _dtype_mismatches(mx.sym.contrib)):
        for sym in (ours, theirs):
            with pytest.raises(mx.MXNetError):
                sym.infer_type(x="float32")
            with pytest.raises(RuntimeError, match="simple_bind error"):
                sym.simple_bind(mx.cpu(), x=(1, 2))
        with pytest.raises(ValueError, match=r"(?s)dtypes .* differ.*in gluon_cf node"):
            ours.infer_type(x="float32")
        with pytest.raises(mx.MXNetError, match=r"(?s)dtypes .* differ.*in gluon_cf node"):
            ours.bind(mx.cpu(), {"x": nd.ones((1, 2))}).forward()


INDEX_OF = {   # indices computed from x, which needs a gradient: MXNet refuses only "cast"
    "round": lambda F, x: F.round(F.sum(x, axis=1)),
    "argmax": lambda F, x: F.argmax(x, axis=1),
    "topk_indices": lambda F, x: F.topk(x, k=1, axis=1, ret_typ="both")[1].reshape((-1,)),
    "greater": lambda F, x: F.sum(x, axis=1) > 1,
    "cast": lambda F, x: F.cast(F.sum(x, axis=1) * 3, "int32"),
}


@pytest.mark.parametrize("how", sorted(INDEX_OF))
def test_indices_computed_from_a_value_needing_a_gradient_as_mxnet_decides(how):
    """Through ops that pass no gradient back (round, argmax, topk's indices, comparisons)
    the indices need none and the block runs as eagerly; through ``cast`` MXNet refuses, and
    so does the node."""
    class Indexed(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.emb = gluon.nn.Embedding(10, 3)

        def hybrid_forward(self, F, x):
            return gluon_cf.cond(F.sum(x) > 0, lambda: self.emb(INDEX_OF[how](F, x)) * x,
                                 lambda: x)

    results = []
    for hybrid in (False, True):
        net = Indexed()
        net.initialize(mx.init.Uniform(0.5))
        net.emb.weight.set_data(nd.array(np.arange(30).reshape(10, 3) / 10.0))
        if hybrid:
            net.hybridize()
        x = nd.array([[0.1, 0.5, 0.2], [0.3, 0.1, 0.9]])
        x.attach_grad()
        try:
            with autograd.record():
                y = net(x)
            y.backward()
            results.append((y.asnumpy(), x.grad.asnumpy()))
        except mx.MXNetError as err:
            results.append(type(err))
    if how == "cast":
        assert results == [mx.MXNetError, IndexGradientError]
        return
    for got, want in zip(*results[::-1]):
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("remat", [False, True])
def test_eager_foreach_returns_the_states_its_body_returned_as_mxnet(remat):
    """MXNet's eager foreach returns the body's last states object: a tuple stays a tuple."""
    x, h = nd.array([[1.0, 2.0], [3.0, 4.0]]), nd.ones((2,))
    for init in ((h, h * 2), [h, h * 2]):
        for returned in (tuple, list):
            def body(d, s, returned=returned):
                return d, returned([s[0] + d, s[1] * d])
            ours = gluon_cf.foreach(body, x, init, remat=remat)[1]
            theirs = mx.nd.contrib.foreach(body, x, init)[1]
            assert type(ours) is type(theirs) is returned
            for a, b in zip(ours, theirs):
                np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_bind_with_mixed_grad_req_equals_eager_autograd():
    """grad_req 'write', 'null' and 'add' in one bind, through a while_loop: 'add' adds the
    eager gradient to what the buffer held, 'null' leaves it. (MXNet's own while_loop bound
    this way gives 1e20s: its oracle here is eager autograd.)"""
    rng = np.random.RandomState(0)
    values = {"x": rng.uniform(-1, 1, (2, 3)), "h": rng.uniform(-1, 1, (2, 3)),
              "w": rng.uniform(-1, 1, (3, 3))}
    heads = [rng.uniform(-1, 1, (3, 2, 3)), rng.uniform(-1, 1, (2, 3))]

    def step(F, s, w, x):
        return F.tanh(F.broadcast_add(F.dot(s, w), x * 0.5))

    x, h, w = (mx.sym.var(n) for n in ("x", "h", "w"))
    outs, (_, last) = gluon_cf.while_loop(
        lambda i, s: i < 3, lambda i, s: ([mx.sym.dot(s, w)], [i + 1, step(mx.sym, s, w, x)]),
        [mx.sym.sum(h) * 0, h], max_iterations=3)
    grads = {k: nd.ones(v.shape) for k, v in values.items()}
    ex = mx.sym.Group([outs[0], last]).bind(
        mx.cpu(), {k: nd.array(v) for k, v in values.items()}, args_grad=grads,
        grad_req={"x": "write", "h": "null", "w": "add"})
    ex.forward(is_train=True)
    ex.backward([nd.array(g) for g in heads])

    arrays = {k: nd.array(v) for k, v in values.items()}
    for a in arrays.values():
        a.attach_grad()
    with autograd.record():
        s, rows = arrays["h"], []
        for _ in range(3):
            rows.append(nd.dot(s, arrays["w"]))
            s = step(nd, s, arrays["w"], arrays["x"])
        loss = (nd.stack(*rows) * nd.array(heads[0])).sum() + (s * nd.array(heads[1])).sum()
    loss.backward()
    np.testing.assert_allclose(grads["x"].asnumpy(), arrays["x"].grad.asnumpy(), rtol=1e-5)
    np.testing.assert_array_equal(grads["h"].asnumpy(), np.ones((2, 3)))
    np.testing.assert_allclose(grads["w"].asnumpy(), 1 + arrays["w"].grad.asnumpy(), rtol=1e-5)


def test_infer_shape_of_a_cond_of_different_ranks_answers_as_mxnet():
    """Was ``([(2, 2)], [()], [])`` from infer_shape, () read as a scalar: MXNet answers None
    (with its warning) and () (legacy "unknown") from infer_shape_partial, also downstream."""
    answers = {}
    for name, ops in OPS.items():
        x = mx.sym.var("x")
        out = ops.cond(mx.sym.sum(x) > 0, lambda: x * 2, lambda: mx.sym.sum(x, axis=0) * 3)
        sym = mx.sym.Group([out + 1, x * 1])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            full = sym.infer_shape(x=(2, 2))
        assert any("Cannot decide shape" in str(w.message) for w in caught)
        answers[name] = (full, sym.infer_shape_partial(x=(2, 2)), out.infer_shape_partial(),
                         sym.infer_type(x="float32"))
    assert answers["gluon_cf"] == answers["mxnet"]
    assert answers["gluon_cf"][:2] == ((None, None, None), ([(2, 2)], [(), (2, 2)], []))


class _DenseThenRanks(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(2, flatten=False)   # in_units from the graph

    def hybrid_forward(self, F, x):
        h = self.dense(x)
        return gluon_cf.cond(F.sum(h) > 0, lambda: h * 2, lambda: F.sum(h, axis=0))


def test_deferred_initialisation_before_a_cond_of_different_ranks_still_runs():
    """MXNet's own cond fails here (its infer_shape answers None); gluon_cf takes the
    parameters' shapes from infer_shape_partial (NOTE [unknown rank])."""
    net = _DenseThenRanks()
    net.initialize(mx.init.Constant(0.5))
    net.hybridize()
    eager = _DenseThenRanks()
    eager.initialize(mx.init.Constant(0.5))
    for v in (np.ones((3, 4)), -np.ones((3, 4))):
        out = net(nd.array(v))
        np.testing.assert_allclose(out.asnumpy(), eager(nd.array(v)).asnumpy(), rtol=1e-6)
    assert net.dense.weight.shape == (2, 4)
