"""Issue 12: values of run-time shape (boolean_mask, exact-length while_loop, cond branches of
different sizes) in every position, hybridized == eager for values and gradients.

Oracle: the same block run eagerly (plain NDArray code, where these shapes are ordinary), and
numpy for the masked computations. Each position runs eager, hybridized, and hybridized with
``static_alloc``/``static_shape``, forward and backward.
"""
import re

import numpy as np
import pytest

import mxnet as mx
from mxnet import autograd, gluon, nd

import gluon_cf

TOL = dict(rtol=1e-5, atol=1e-5)
RNG = np.random.RandomState(0)
X = nd.array(RNG.randn(5, 3))
MASK = nd.array([0, 1, 0, 1, 1])
SEQ = nd.array(RNG.randn(4, 5, 3))


def _mask(F, v, m):
    return F.contrib.boolean_mask(v, m)


class Net(gluon.HybridBlock):
    """A Dense layer, then ``body(F, dense(x), m)``: parameters before the dynamic part get
    gradients through it."""

    def __init__(self, body, units=3):
        super().__init__()
        self.body = body
        with self.name_scope():
            self.dense = gluon.nn.Dense(units, in_units=3, flatten=False)
            self.after = gluon.nn.Dense(2, in_units=units, flatten=False)

    def hybrid_forward(self, F, x, m):
        return self.body(F, self, self.dense(x), m)


def cond_mask_flows_out(F, net, y, m):
    """boolean_mask in a cond branch, its rows flowing out of the node into a Dense."""
    picked = gluon_cf.cond(m.sum() > 2, lambda: _mask(F, y, m) * 2, lambda: y)
    return net.after(picked)


def cond_mask_reduced_inside(F, net, y, m):
    """boolean_mask in a branch, reduced inside: the node's output shape is static."""
    return gluon_cf.cond(m.sum() > 0, lambda: _mask(F, y, m).mean(axis=0, keepdims=True),
                         lambda: y.sum(axis=0, keepdims=True))


def cond_sizes_differ(F, net, y, m):
    """Branches of one rank, different sizes: the taken branch decides the shape."""
    return gluon_cf.cond(m.sum() > 2, lambda: F.slice_axis(y, axis=0, begin=0, end=2),
                         lambda: y * 3)


def foreach_masked_mean(F, net, y, m):
    """A masked mean inside a foreach body: static output, dynamic inside."""
    def body(t, states):
        mean = _mask(F, F.broadcast_mul(y, t.reshape((1, 1))), m).mean(axis=0)
        return mean, [states[0] + mean]
    outs, (total,) = gluon_cf.foreach(body, F.arange(1, 4), [F.zeros((3,))])
    return F.broadcast_add(outs, total)


def foreach_mask_flows_out(F, net, y, m):
    """boolean_mask in a foreach body, stacked and flowing out (same rows at every step)."""
    def body(t, states):
        rows = F.broadcast_mul(_mask(F, y, m), t.reshape((1, 1)))
        return rows, [states[0] + rows.sum()]
    outs, (total,) = gluon_cf.foreach(body, F.arange(1, 4), [F.zeros((1,))])
    return F.broadcast_add(net.after(outs), total)


def while_exact_length(F, net, y, m):
    """Exact-length while_loop (max_iterations=None): as many rows as steps ran."""
    def cond(v, i):
        return v.norm() > 0.5

    def func(v, i):
        return v.sum(axis=0), [v * 0.5, i + 1]
    outs, (final, steps) = gluon_cf.while_loop(cond, func, [y, F.zeros((1,))])
    return net.after(outs), final, steps


def while_exact_under_bound(F, net, y, m):
    """exact_length=True under a bound: stops at the bound or when cond fails."""
    outs, _ = gluon_cf.while_loop(lambda v: v.norm() > 0.5, lambda v: (v * 2, v * 0.5), y,
                                  max_iterations=3, exact_length=True)
    return outs


def while_mask_in_body(F, net, y, m):
    """boolean_mask inside a padded while_loop body: the padded shape stays static."""
    def func(v, i):
        return _mask(F, v, m).sum(axis=0), [v * 0.5, i + 1]
    outs, _ = gluon_cf.while_loop(lambda v, i: i < 3, func, [y, F.zeros((1,))],
                                  max_iterations=4)
    return outs


def nested_cond_in_foreach(F, net, y, m):
    """A cond of different-size branches inside a foreach body, reduced per step."""
    def body(t, states):
        part = gluon_cf.cond(t.sum() > 1.5, lambda: _mask(F, y, m), lambda: y)
        return F.broadcast_mul(part.sum(axis=0), t), states
    outs, _ = gluon_cf.foreach(body, F.arange(1, 4).reshape((3, 1)), [F.zeros((1,))])
    return outs


def recursive_mask(F, net, y, m):
    """A recursive function whose argument shrinks with boolean_mask at each call."""
    @gluon_cf.recursive
    def shrink(v, keep):
        return gluon_cf.cond(v.sum() > 4, lambda: v,
                             lambda: shrink(_mask(F, v, keep) * 2 + 1, keep))
    return shrink(F.abs(y).sum(axis=1), (m > -1) * 1)


POSITIONS = {f.__name__: f for f in (
    cond_mask_flows_out, cond_mask_reduced_inside, cond_sizes_differ, foreach_masked_mean,
    foreach_mask_flows_out, while_exact_length, while_exact_under_bound, while_mask_in_body,
    nested_cond_in_foreach, recursive_mask)}


def _run(net, x, m):
    """Forward and backward; returns outputs and every parameter's gradient, as numpy."""
    for p in net.collect_params().values():
        p.zero_grad()
    x = x.copy()
    x.attach_grad()
    with autograd.record():
        out = net(x, m)
        outs = out if isinstance(out, (list, tuple)) else [out]
        loss = sum((o.astype("float32") * (k + 1)).sum() for k, o in enumerate(outs))
    loss.backward()
    grads = {k: p.grad().asnumpy().copy() for k, p in net.collect_params().items()}
    grads["x"] = x.grad.asnumpy().copy()
    return [o.asnumpy() for o in outs], grads


def _compare(got, expected):
    (outs, grads), (e_outs, e_grads) = got, expected
    assert [o.shape for o in outs] == [o.shape for o in e_outs]
    for o, e in zip(outs, e_outs):
        np.testing.assert_allclose(o, e, **TOL)
    for k in e_grads:
        np.testing.assert_allclose(grads[k], e_grads[k], err_msg=k, **TOL)


@pytest.mark.parametrize("flags", [{}, {"static_alloc": True, "static_shape": True}],
                         ids=["hybridized", "static_alloc"])
@pytest.mark.parametrize("name", sorted(POSITIONS))
def test_hybridized_equals_eager(name, flags):
    mx.random.seed(0)
    net = Net(POSITIONS[name])
    net.initialize(mx.init.Xavier())
    masks = [MASK, nd.array([1, 1, 1, 1, 0]), nd.array([1, 0, 0, 0, 0])]
    expected = [_run(net, X, m) for m in masks]
    net.hybridize(**flags)
    for m, e in zip(masks, expected):   # new masks: new run-time shapes, same block
        _compare(_run(net, X, m), e)
    # Inference (no autograd) gives the same values.
    for m, e in zip(masks, expected):
        out = net(X, m)
        outs = out if isinstance(out, (list, tuple)) else [out]
        for o, eo in zip(outs, e[0]):
            np.testing.assert_allclose(o.asnumpy(), eo, **TOL)


@pytest.mark.parametrize("executor", gluon_cf.executor.MODES)
def test_recursion_with_run_time_shapes_both_executors(executor):
    previous = gluon_cf.get_executor()
    gluon_cf.set_executor(executor)
    try:
        test_hybridized_equals_eager("recursive_mask", {})
    finally:
        gluon_cf.set_executor(previous)


def test_masked_values_match_numpy():
    net = Net(cond_mask_flows_out)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    y = net.dense(X).asnumpy()
    expected = net.after(nd.array(y[MASK.asnumpy() != 0] * 2)).asnumpy()
    np.testing.assert_allclose(net(X, MASK).asnumpy(), expected, **TOL)
    assert net(X, MASK).shape == (3, 2)


def test_exact_length_rows_equal_steps_and_padded_keeps_mxnet_shape():
    x = nd.array([[4.0, 0.0]])

    class Loop(gluon.HybridBlock):
        def __init__(self, **kwargs):
            super().__init__()
            self.kwargs = kwargs

        def hybrid_forward(self, F, v):
            return gluon_cf.while_loop(lambda v, i: v.norm() > 0.5,
                                       lambda v, i: (v, [v * 0.5, i + 1]),
                                       [v, F.zeros((1,))], **self.kwargs)

    # |v| = 4, 2, 1 run a step each; 0.5 stops: three steps.
    for kwargs, rows in (({}, 3), ({"max_iterations": 10}, 10),
                         ({"max_iterations": 10, "exact_length": True}, 3),
                         ({"max_iterations": 2, "exact_length": True}, 2)):
        block = Loop(**kwargs)
        eager = block(x)
        block.hybridize()
        hybrid = block(x)
        assert eager[0].shape == hybrid[0].shape == (rows, 1, 2), kwargs
        np.testing.assert_allclose(hybrid[0].asnumpy(), eager[0].asnumpy())
        steps = min(3, kwargs.get("max_iterations", 3))
        np.testing.assert_allclose(hybrid[0].asnumpy()[:steps, 0, 0],
                                   4.0 * 0.5 ** np.arange(steps))


def test_exact_length_zero_steps_gives_zero_rows():
    class Loop(gluon.HybridBlock):
        def hybrid_forward(self, F, v):
            outs, final = gluon_cf.while_loop(lambda v: v.sum() > 100, lambda v: (v * 2, v), v)
            return outs, final

    block = Loop()
    eager = block(nd.ones((1, 2)))   # func is never called: MXNet's eager [] (no rows known)
    assert type(eager[0]) is list and eager[0] == []
    block.hybridize()
    hybrid = block(nd.ones((1, 2)))
    assert hybrid[0].shape == (0, 1, 2)


def test_infer_shape_through_a_node_of_run_time_shape_keeps_what_is_known():
    """MXNet reports boolean_mask's output as wholly unknown; through gluon_cf nodes the known
    dimensions stay (0 = unknown, MXNet's legacy form), so a Dense after it gets its weight."""
    data, m = mx.sym.var("data"), mx.sym.var("m")
    ours = gluon_cf.cond(m.sum() > 0, lambda: mx.sym.contrib.boolean_mask(data, m),
                         lambda: data)
    theirs = mx.sym.contrib.boolean_mask(data, m)
    for sym, out in ((ours, (0, 3)), (theirs, ())):
        args, outs, aux = sym.infer_shape_partial(data=(5, 3), m=(5,))
        assert dict(zip(sym.list_arguments(), args)) == {"data": (5, 3), "m": (5,)}
        assert (outs, aux) == ([out], [])
    dense = mx.sym.FullyConnected(ours, num_hidden=2, flatten=False, name="fc")
    args, outs, _ = dense.infer_shape_partial(data=(5, 3), m=(5,))
    assert dict(zip(dense.list_arguments(), args))["fc_weight"] == (2, 3)
    assert outs == [(0, 2)]
    # (infer_shape: MXNet's None and warning for shapes not all decided, round 29r)
    with pytest.warns(UserWarning, match="Cannot decide shape"):
        assert dense.infer_shape(data=(5, 3), m=(5,)) == (None, None, None)


def test_deferred_initialisation_after_a_run_time_shape():
    class Net(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.dense = gluon.nn.Dense(2, flatten=False)   # in_units from the graph

        def hybrid_forward(self, F, x, m):
            picked = gluon_cf.cond(m.sum() > 0, lambda: _mask(F, x, m), lambda: x)
            return self.dense(picked)

    net = Net()
    net.initialize()
    net.hybridize()
    assert net(X, MASK).shape == (3, 2)
    assert net.dense.weight.shape == (2, 3)


def test_symbol_executor_refuses_run_time_shapes_naming_the_node():
    data, m = mx.sym.var("data"), mx.sym.var("m")
    out = gluon_cf.cond(m.sum() > 0, lambda: mx.sym.contrib.boolean_mask(data, m),
                        lambda: data * 2, name="picks")   # (names subgraphs, as MXNet's)
    args = {"data": nd.ones((5, 3)), "m": MASK}
    with pytest.raises(gluon_cf.DynamicShapeError, match=r"gluon_cf\.cond \(node '_cond\d+'\): "
                       r"output 0 has a shape known only at run time"):
        out.bind(mx.cpu(), args).forward()
    # simple_bind: MXNet wraps every error in its own RuntimeError; ours is its message.
    with pytest.raises(RuntimeError, match=r"(?s)simple_bind error.*gluon_cf\.cond \(node "
                       r"'_cond\d+'\): output 0 has a shape known only at run time"):
        out.simple_bind(mx.cpu(), data=(5, 3), m=(5,))
    # The same graph in a SymbolBlock runs partitioned.
    block = gluon.SymbolBlock(out, [data, m])
    block.hybridize()
    np.testing.assert_allclose(block(*args.values()).asnumpy(), np.ones((3, 3)))


def test_cond_branches_of_different_ranks_run_as_eagerly():
    """Was a ValueError; MXNet 1.9.1's own cond runs branches of different ranks."""
    class Ranks(gluon.HybridBlock):
        def hybrid_forward(self, F, x, m):
            return gluon_cf.cond(m.sum() > 0, lambda: _mask(F, x, m), lambda: x.sum())

    expected = [Ranks()(X, m).asnumpy() for m in (MASK, MASK * 0)]
    block = Ranks()
    block.hybridize()
    for m, want in zip((MASK, MASK * 0), expected):
        np.testing.assert_allclose(block(X, m).asnumpy(), want, rtol=1e-6)


def test_foreach_steps_of_different_shapes_is_a_clear_error():
    class Bad(gluon.HybridBlock):
        def hybrid_forward(self, F, x, m):
            def body(t, states):
                keep = F.broadcast_lesser(F.arange(5), t.reshape((1,)))
                return _mask(F, x, keep), states
            return gluon_cf.foreach(body, F.arange(1, 4), [F.zeros((1,))])[0]
    line = Bad.hybrid_forward.__code__.co_firstlineno + 4

    for hybridize in (False, True):
        block = Bad()
        if hybridize:
            block.hybridize()
        # (named at the foreach's line: NOTE [run-time loop checks name the user's line])
        with pytest.raises(ValueError, match=r"gluon_cf\.foreach at %s:%d: step output 0 changes "
                           r"shape across steps:\n  step 0: \(1, 3\)\n  step 1: \(2, 3\)"
                           % (re.escape(__file__), line)):
            block(X, MASK)


# ---- export (item 5): onnxruntime == Gluon for several masks and loop lengths ---------------

EXPORT_INPUTS = [(X, MASK), (X, nd.array([1, 1, 1, 1, 0])), (X * 4, nd.array([1, 0, 0, 0, 0])),
                 (X * 0.4, nd.array([0, 0, 1, 0, 1]))]


def _gluon_outputs(net, x, m):
    out = net(x, m)
    return [o.asnumpy() for o in (out if isinstance(out, (list, tuple)) else [out])]


@pytest.mark.parametrize("name", sorted(set(POSITIONS) - {"recursive_mask"}))
def test_standard_onnx_equals_gluon(name, tmp_path):
    import onnxruntime as ort
    from gluon_cf.export import export_onnx

    net = Net(POSITIONS[name])
    net.initialize(mx.init.Xavier())
    net.hybridize()
    model = export_onnx(net, [X, MASK], str(tmp_path / "model.onnx"))
    assert {n.domain for n in model.graph.node} <= {""}   # standard ONNX only
    session = ort.InferenceSession(str(tmp_path / "model.onnx"))
    names = [i.name for i in session.get_inputs()]
    lengths = set()
    for x, m in EXPORT_INPUTS:
        got = session.run(None, dict(zip(names, (x.asnumpy(), m.asnumpy()))))
        expected = _gluon_outputs(net, x, m)
        assert [g.shape for g in got] == [e.shape for e in expected]
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, **TOL)
        lengths.add(got[0].shape[0])
    if name == "while_exact_length":
        assert len(lengths) >= 3, lengths   # several loop lengths were exercised


@pytest.mark.parametrize("name", ["recursive_mask", "cond_mask_flows_out", "while_exact_length"])
def test_artifact_equals_gluon(name, tmp_path):
    from gluon_cf.export import load, save_artifact

    net = Net(POSITIONS[name])
    net.initialize(mx.init.Xavier())
    net.hybridize()
    save_artifact(net, [X, MASK], str(tmp_path / "model.onnx"))
    model = load(str(tmp_path / "model.onnx"))
    for x, m in EXPORT_INPUTS:
        got = model(x.asnumpy(), m.asnumpy())
        got = got if isinstance(got, (list, tuple)) else [got]
        for g, e in zip(got, _gluon_outputs(net, x, m)):
            np.testing.assert_allclose(g, e, **TOL)


def test_batching_executor_runs_bodies_with_run_time_shapes_per_row_and_warns():
    """Recursive calls from the steps of a foreach batch across steps; a body holding
    boolean_mask has no row-wise rule, so it runs per row, with the one-time warning."""
    import warnings

    class Net(gluon.HybridBlock):
        def hybrid_forward(self, F, rows):
            @gluon_cf.recursive
            def grow(v):   # row-wise but for boolean_mask, which has no row-wise rule
                kept = F.contrib.boolean_mask(v, v.sum(axis=1) > 2)   # this row, or none
                return gluon_cf.cond(v.sum(axis=1) > 20, lambda: kept.sum(axis=1) * 10,
                                     lambda: grow(v * 2))

            # No state: the steps are independent, and their calls batch (NOTE [batching]).
            return gluon_cf.foreach(lambda r, s: (grow(r.reshape((1, -1))), s), rows, [])[0]

    rows = nd.array(RNG.uniform(0.5, 2, size=(6, 3)))
    net = Net()
    previous = gluon_cf.get_executor()
    gluon_cf.set_executor("batched")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            expected = net(rows)        # eager recursion batches too: the warning comes here
            net.hybridize()
            got = net(rows)
    finally:
        gluon_cf.set_executor(previous)
    np.testing.assert_allclose(got.asnumpy(), expected.asnumpy(), **TOL)
    unbatched = [w for w in caught if "runs unbatched" in str(w.message)]
    assert len(unbatched) == 1 and "boolean_mask" in str(unbatched[0].message), \
        [str(w.message) for w in caught]


def test_partitioned_block_called_from_threads():
    """Each thread runs its own CachedOps of the partitioned graph (one must not be entered by
    two threads at once); results equal the serial ones."""
    import threading

    net = Net(cond_mask_flows_out)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    masks = [nd.array(RNG.randint(0, 2, size=5)) + nd.array([1, 0, 0, 0, 0]) for _ in range(8)]
    expected = [net(X, m).asnumpy() for m in masks]
    results, errors = {}, []

    def work(k):
        try:
            for _ in range(5):
                results[k] = net(X, masks[k]).asnumpy()
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(masks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    for k, e in enumerate(expected):
        np.testing.assert_allclose(results[k], e, **TOL)


def _positive_rows(F, v):
    return F.contrib.boolean_mask(v, F.sum(v, axis=1) > 1)


def test_loop_variable_changing_shape_runs_eagerly_as_mxnet_and_is_refused_hybridized():
    """Eagerly a loop variable may change shape, as in MXNet's eager while_loop (NOTE [eager
    loop states may change]); hybridized it cannot, refused naming the loop's line."""
    class Bad(gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return gluon_cf.while_loop(lambda v: v.sum() > -1,
                                       lambda v: (v.sum(), _positive_rows(F, v)),
                                       x, max_iterations=3)

    rows = int((X.sum(axis=1) > 1).sum().asscalar())
    sums, final = Bad()(X)
    want_sums, want_final = nd.contrib.while_loop(lambda v: v.sum() > -1,
                                                  lambda v: (v.sum(), _positive_rows(nd, v)),
                                                  X, max_iterations=3)
    assert final.shape == (rows, 3) != X.shape
    np.testing.assert_allclose(final.asnumpy(), want_final.asnumpy(), **TOL)
    np.testing.assert_allclose(sums.asnumpy(), want_sums.asnumpy(), **TOL)
    message = (r"gluon_cf\.while_loop at %s:%d: loop variable 0 changed from shape \(5, 3\) "
               r"float32 to \(%d, 3\) float32 in func; loop variables changing shape or dtype "
               r"across steps cannot be hybridized"
               % (re.escape(__file__), Bad.hybrid_forward.__code__.co_firstlineno + 1, rows))
    block = Bad()
    block.hybridize()
    with pytest.raises(ValueError, match=message):
        block(X)


def test_three_levels_deep():
    """cond > foreach > exact-length while_loop, with boolean_mask at the bottom."""
    def body(F, net, y, m):
        def step(t, states):
            rows = _mask(F, F.broadcast_mul(y, t.reshape((1, 1))), m)
            outs, _ = gluon_cf.while_loop(lambda v: v.norm() > 1, lambda v: (v.sum(), v * 0.5),
                                          rows)
            return outs.sum(axis=0), states
        looped = gluon_cf.foreach(step, F.arange(1, 3), [F.zeros((1,))])[0]
        return gluon_cf.cond(m.sum() > 1, lambda: looped, lambda: looped * 2)

    POSITIONS["three_levels"] = body
    try:
        test_hybridized_equals_eager("three_levels", {})
    finally:
        del POSITIONS["three_levels"]


def test_exported_block_reimported_as_symbolblock(tmp_path):
    """net.export() then SymbolBlock.imports: the loaded graph runs partitioned as well."""
    net = Net(POSITIONS["while_exact_length"])
    net.initialize(mx.init.Xavier())
    net.hybridize()
    expected = net(X, MASK)
    net.export(str(tmp_path / "model"))
    block = gluon.SymbolBlock.imports(str(tmp_path / "model-symbol.json"), ["data0", "data1"],
                                      str(tmp_path / "model-0000.params"))
    block.hybridize()
    for x in (X, X * 4):
        got, want = block(x, MASK), net(x, MASK)
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), **TOL)
    assert expected[0].shape[0] != net(X * 4, MASK)[0].shape[0]   # two loop lengths
