"""gluon_cf inside the rest of MXNet: the graph it produces, deferred initialisation, the legacy
``Symbol.bind`` executor, export / import (also in a fresh process), training with a Trainer, and
the MXNet issues gluon_cf exists to fix (16701, 18575; 12154 and 16188 are cases in
test_ops.py)."""
import json
import textwrap

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf
from conftest import (MODES, PY, assert_close, assert_same_results,
                      copy_params, flat, make_model, run, run_python, set_mode)

B, D, T = 2, 3, 4
RNG = np.random.RandomState(42)


def arr(*shape):
    return RNG.uniform(-1, 1, size=shape).astype(np.float32)


def dense(units=D, in_units=D):
    return lambda: gluon.nn.Dense(units, in_units=in_units, flatten=False)


def all_three_ops(F, cf, net, p, seq, h):
    """One model using every op: foreach whose body has a cond, then a while_loop."""
    def body(xt, s):
        a = F.tanh(net.dense(xt) + s)
        out = cf.cond(a.sum() > 0, lambda: a * 2, lambda: a - xt)
        return out, out
    outs, last = cf.foreach(body, seq, h)
    steps, (i, v) = cf.while_loop(lambda i, v: i < 2, lambda i, v: (v, [i + 1, F.sin(v) + last]),
                                  [(h * 0).sum(), last], max_iterations=2)
    return [outs, steps, v]


INPUTS = [arr(T, B, D), arr(B, D)]



# ---------------------------------------------------------------------------------------------
# The graph: our Custom nodes, none of MXNet's control-flow ops.

MXNET_CF_OPS = {"_cond", "_foreach", "_while_loop"}


def op_names(graph_json):
    return [n["op"] for n in json.loads(graph_json)["nodes"]]


def custom_op_types(graph_json):
    return sorted(n["attrs"]["op_type"] for n in json.loads(graph_json)["nodes"]
                  if n["op"] == "Custom")


def test_hybridized_graph_has_our_nodes_and_none_of_mxnets():
    net = make_model(all_three_ops, children={"dense": dense()})
    net.hybridize()
    net(*[mx.nd.array(x) for x in INPUTS])
    graph = net._cached_graph[1].tojson()
    assert not MXNET_CF_OPS & set(op_names(graph))
    # cond lives inside the foreach body, so the top graph has foreach and while_loop only.
    assert custom_op_types(graph) == ["_gluon_cf_foreach", "_gluon_cf_while_loop"]
    foreach_node = [n for n in json.loads(graph)["nodes"]
                    if n.get("attrs", {}).get("op_type") == "_gluon_cf_foreach"][0]
    assert "_gluon_cf_cond" in foreach_node["attrs"]["spec"]
    assert not any('\\"op\\": \\"%s\\"' % op in foreach_node["attrs"]["spec"] or
                   '\\"op\\":\\"%s\\"' % op in foreach_node["attrs"]["spec"]
                   for op in MXNET_CF_OPS)


def foreach_then_while(F, cf, net, p, seq, h):
    outs, last = cf.foreach(lambda xt, s: (F.tanh(net.dense(xt) + s),) * 2, seq, h)
    steps, (i, v) = cf.while_loop(lambda i, v: i < 2, lambda i, v: (v, [i + 1, F.sin(v) + last]),
                                  [(h * 0).sum(), last], max_iterations=2)
    return [outs, steps, v]


def test_mxnet_contrib_ops_do_produce_mxnet_nodes():
    """The graph check above can fail: MXNet's own ops do show up under the same names."""
    net = make_model(foreach_then_while, impl="mxnet", children={"dense": dense()})
    net.hybridize()
    net(*[mx.nd.array(x) for x in INPUTS])
    assert {"_foreach", "_while_loop"} <= set(op_names(net._cached_graph[1].tojson()))


# ---------------------------------------------------------------------------------------------
# Gluon deferred initialisation: a Dense without in_units used only inside a body.

def deferred_foreach(F, cf, net, p, x, h):
    return cf.foreach(lambda xt, s: (net.dense(xt) + s, s * 2), x, h)


def deferred_cond(F, cf, net, p, x):
    return cf.cond(x.sum() > 0, lambda: net.dense(x), lambda: net.dense(x * 2))


def deferred_while(F, cf, net, p, i, x):
    return cf.while_loop(lambda i, x: i < 2, lambda i, x: (net.dense(x), [i + 1, x * 2]),
                         [i, x], max_iterations=3)


@pytest.mark.parametrize("fn,inputs", [
    (deferred_foreach, [arr(T, B, D), arr(B, 5)]),
    (deferred_cond, [np.abs(arr(B, D))]),
    (deferred_while, [np.zeros(1, np.float32), arr(B, D)]),
], ids=["foreach", "cond", "while_loop"])
@pytest.mark.parametrize("mode", ["hybrid", "static"])
def test_deferred_initialisation_inside_body(fn, inputs, mode):
    units = 5 if fn is deferred_foreach else D
    net = make_model(fn, children={"dense": lambda: gluon.nn.Dense(units, flatten=False)})
    assert net.dense.weight.shape == (units, 0)  # really deferred
    set_mode(net, mode)
    ours = run(net, inputs)
    assert net.dense.weight.shape == (units, D)
    ref = make_model(fn, impl="python",
                     children={"dense": lambda: gluon.nn.Dense(units, in_units=D, flatten=False)})
    copy_params(ref, net)
    assert_same_results(ours, run(ref, inputs), "deferred init")


# ---------------------------------------------------------------------------------------------
# The legacy executor: symbols built with mx.sym directly, Symbol.bind, forward / backward.

def sym_foreach(F, cf, x, h, w):
    def body(xt, states):
        a = F.tanh(F.FullyConnected(xt, w, num_hidden=D, no_bias=True) + states[0])
        return a * 2, [a]
    outs, states = cf.foreach(body, x, [h])
    return [outs, states[0]]


def sym_cond(F, cf, x, h, w):
    return cf.cond((x * h).sum() > 0,
                   lambda: [F.FullyConnected(x, w, num_hidden=D, no_bias=True), h],
                   lambda: [x * h, F.sin(h)])


def sym_while(F, cf, x, h, w):
    def func(v, s):
        a = F.FullyConnected(v, w, num_hidden=D, no_bias=True)
        return a, [F.tanh(a + s), s * 2]
    outs, (v, s) = cf.while_loop(lambda v, s: (s.sum() < 20), func, [x, h],
                                 max_iterations=6)
    return [outs, v, s]


@pytest.mark.parametrize("fn,x_shape", [(sym_foreach, (T, B, D)), (sym_cond, (B, D)),
                                        (sym_while, (B, D))], ids=["foreach", "cond", "while_loop"])
def test_symbol_bind_executor(fn, x_shape):
    values = {"x": arr(*x_shape), "h": np.abs(arr(B, D)) + 0.5, "w": arr(D, D)}
    sym = mx.sym.Group(fn(mx.sym, gluon_cf, *[mx.sym.var(n) for n in ("x", "h", "w")]))
    args = {n: mx.nd.array(v) for n, v in values.items()}
    grads = {n: mx.nd.zeros(v.shape) for n, v in values.items()}
    exe = sym.bind(mx.cpu(), args=args, args_grad=grads)
    outs = exe.forward(is_train=True)
    heads = [mx.nd.array(RNG.uniform(-1, 1, size=o.shape)) for o in outs]
    exe.backward(heads)

    # The same function eagerly, with the Python reference, under autograd.
    nd_args = {n: mx.nd.array(v) for n, v in values.items()}
    for a in nd_args.values():
        a.attach_grad()
    with autograd.record():
        ref = flat(fn(mx.nd, PY, nd_args["x"], nd_args["h"], nd_args["w"]))
    autograd.backward(ref, heads)
    assert_close([o.asnumpy() for o in outs], [o.asnumpy() for o in ref], "outputs")
    assert_close([grads[n].asnumpy() for n in values], [nd_args[n].grad.asnumpy() for n in values],
                 "gradients")


# ---------------------------------------------------------------------------------------------
# export() / SymbolBlock.imports(), in this process and in a fresh one.

def exported(tmp_path, model=all_three_ops, mode="hybrid"):
    net = make_model(model, children={"dense": dense()})
    set_mode(net, mode)
    expected = run(net, INPUTS, grad=False).flat
    prefix = str(tmp_path / "model")
    net.export(prefix)
    input_names = [s.name for s in net._cached_graph[0]]
    return prefix, input_names, expected


@pytest.mark.parametrize("mode", ["hybrid", "static"])
def test_export_then_imports(tmp_path, mode):
    prefix, names, expected = exported(tmp_path, mode=mode)
    graph = open(prefix + "-symbol.json").read()
    assert not MXNET_CF_OPS & set(op_names(graph))
    assert "_gluon_cf_foreach" in custom_op_types(graph)
    loaded = gluon.SymbolBlock.imports(prefix + "-symbol.json", names, prefix + "-0000.params")
    assert_close(run(loaded, INPUTS, grad=False).flat, expected, "imported")
    loaded.hybridize()
    assert_close(run(loaded, INPUTS, grad=False).flat, expected, "imported, hybridized")


IMPORT_IN_FRESH_PROCESS = textwrap.dedent("""
    import os
    import numpy as np, mxnet as mx
    from mxnet import gluon
    import gluon_cf  # registers the operators the graph needs
    prefix, names = %r, %r
    inputs = np.load(os.path.join(os.path.dirname(prefix), "inputs.npz"))
    net = gluon.SymbolBlock.imports(prefix + "-symbol.json", names, prefix + "-0000.params")
    out = net(*[mx.nd.array(inputs["arr_%%d" %% i]) for i in range(len(names))])
    np.savez(os.path.join(os.path.dirname(prefix), "out.npz"), *[o.asnumpy() for o in out])
""")

@pytest.mark.parametrize("model", [foreach_then_while, all_three_ops], ids=["flat", "nested"])
def test_imports_in_fresh_process(tmp_path, model):
    prefix, names, expected = exported(tmp_path, model)
    np.savez(str(tmp_path / "inputs.npz"), *INPUTS)
    # Nested nodes once deadlocked here (decoding the inner node while holding a lock).
    proc = run_python(IMPORT_IN_FRESH_PROCESS % (prefix, names), timeout=60)
    assert proc is not None, "importing the exported model timed out (hangs)"
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.load(str(tmp_path / "out.npz"))
    assert_close([got["arr_%d" % i] for i in range(len(expected))], expected, "fresh process")


# ---------------------------------------------------------------------------------------------
# Training with a Trainer (MXNet issue 16701: NaN / wrong losses with control flow in training).

def rnn_cond_while(F, cf, net, p, seq, h):
    """Like all_three_ops, but each body reads its input once."""
    def body(xt, s):
        a = F.tanh(net.dense(xt) + s)
        out = cf.cond(a.sum() > 0, lambda: a * 2, lambda: a * 0.5)
        return out, out
    outs, last = cf.foreach(body, seq, h)
    steps, (i, v) = cf.while_loop(lambda i, v: i < 2, lambda i, v: (v, [i + 1, F.sin(v)]),
                                  [(h * 0).sum(), last], max_iterations=2)
    return [outs, steps, v]


def train(model, mode, steps=5):
    net = make_model(model, children={"dense": dense()})
    set_mode(net, mode)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    data = np.random.RandomState(3)
    losses = []
    for _ in range(steps):
        seq = mx.nd.array(data.uniform(-1, 1, size=(T, B, D)))
        h = mx.nd.array(data.uniform(-1, 1, size=(B, D)))
        target = mx.nd.array(data.uniform(-1, 1, size=(B, D)))
        with autograd.record():
            outs, steps_out, v = net(seq, h)
            loss = ((v - target) ** 2).mean() + (outs ** 2).mean() + (steps_out ** 2).mean()
        loss.backward()
        trainer.step(B)
        losses.append(loss.asscalar())
    return np.array(losses), [p.data().asnumpy() for p in net.collect_params().values()]


@pytest.mark.parametrize("model", [rnn_cond_while, all_three_ops],
                         ids=["rnn_cond_while", "all_three_ops"])
@pytest.mark.parametrize("mode", ["hybrid", "static"])
def test_training_loop_matches_eager(model, mode):
    eager_losses, eager_params = train(model, "eager")
    losses, params = train(model, mode)
    assert np.all(np.isfinite(losses))
    assert not np.allclose(losses[0], losses[-1])  # it did train
    assert_close(losses, eager_losses, "losses")
    assert_close(params, eager_params, "parameters after training")


class _AccumulatedForeach(gluon.HybridBlock):
    def __init__(self, foreach):
        super().__init__()
        self.foreach = foreach
        with self.name_scope():
            self.dense = gluon.nn.Dense(4, in_units=4, flatten=False)

    def hybrid_forward(self, F, x):
        out, states = self.foreach(lambda xt, s: (self.dense(xt) + s[0], [self.dense(xt) * s[0]]),
                                   x, [F.ones((2, 4))])
        return out.sum() + states[0].sum()


def test_grad_req_add_accumulates_like_mxnets_foreach():
    """Parameters with grad_req='add': MXNet asks the node for input gradients with req 'add',
    which must add (a node writes gradients by copy only for req write, _custom_ops's
    write_like_assign); two backward passes, MXNet's own foreach as the oracle (~1 s)."""
    x = mx.nd.array(np.random.RandomState(0).uniform(-1, 1, (3, 2, 4)))
    grads = []
    for foreach in (gluon_cf.foreach, mx.sym.contrib.foreach):
        net = _AccumulatedForeach(foreach)
        net.initialize(mx.init.Constant(0.1))
        net.hybridize()
        net.collect_params().setattr('grad_req', 'add')
        for _ in range(2):
            with autograd.record():
                loss = net(x)
            loss.backward()
        grads.append([p.grad().asnumpy() for p in net.collect_params().values()])
    assert_close(grads[0], grads[1], "accumulated parameter gradients")


# ---------------------------------------------------------------------------------------------
# MXNet issue 18575: a hybridized while_loop whose cond reads a float loop variable fails in
# MXNet 1.9.1 under autograd; ours must work.

def while_cond_on_loop_var(F, cf, net, p, v):
    return cf.while_loop(lambda v: v.sum() < 30, lambda v: (net.dense(v), v + 1), v,
                         max_iterations=5)


MXNET_18575 = textwrap.dedent("""
    import mxnet as mx
    from mxnet import autograd, gluon

    class Net(gluon.HybridBlock):
        def hybrid_forward(self, F, v):
            return F.contrib.while_loop(lambda v: v.sum() < 30, lambda v: (v * 2, v + 1), v,
                                        max_iterations=5)

    net = Net()
    net.hybridize()
    v = mx.nd.ones((2, 3))
    v.attach_grad()
    with autograd.record():
        out, last = net(v)
        loss = out[:3].sum() + last.sum()
    loss.backward()
    print(v.grad.asnumpy().sum())
""")


@pytest.mark.parametrize("mode", MODES)
def test_issue_18575_hybridized_while_loop(mode):
    inputs = [np.ones((B, D), np.float32)]
    net = make_model(while_cond_on_loop_var, children={"dense": dense()})
    set_mode(net, mode)
    ours = run(net, inputs)
    ref = run(make_model(while_cond_on_loop_var, impl="python", children={"dense": dense()}),
              inputs)
    assert_same_results(ours, ref, "while_loop")
    assert ours.flat[1].sum() == (B * D) * 5  # 4 steps: v = 1 -> 5


def test_issue_18575_mxnet_hybridized_while_loop_fails():
    """Documents the MXNet bug that the test above shows fixed. Run in a subprocess: a failing
    MXNet op must not take the test process with it."""
    proc = run_python(MXNET_18575, timeout=120)
    if proc is None or proc.returncode < 0:
        pytest.skip("MXNet's hybridized while_loop hung or crashed (%s)"
                    % ("timeout" if proc is None else "signal %d" % -proc.returncode))
    assert proc.returncode != 0, ("MXNet's hybridized while_loop works now (grad sum %s); "
                                  "update this test" % proc.stdout.strip())
    assert "Assigning to NDArrays that are already in a computational graph" in proc.stderr
