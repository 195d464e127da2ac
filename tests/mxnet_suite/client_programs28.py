"""A third round of client code of MXNet 1.9.1's ``F.contrib`` control flow, for
``test_client_code28.py`` (NOTE [other client code of F.contrib] in ``test_client_code26.py``):
small programs written as users of MXNet's symbolic API and Gluon write them, most around what
the earlier rounds did not reach: ``infer_shape_partial``, ``infer_type``, parameter shapes
inferred through a loop body, ``grad_req`` 'add' and 'null' (bind, simple_bind, Gluon),
``Executor.reshape``, ``mx.sym.save``/``load``, positional ``bind``, ``mx.mod.Module``,
``static_alloc``/``static_shape``, ``export`` then ``SymbolBlock.imports`` and training the
imported block, MXNet's own RNN cells as loop bodies, and the errors of misused ops.

Each program is a function of no arguments calling ``mx.sym.contrib.X``, ``mx.nd.contrib.X``
or ``F.contrib.X`` as MXNet's users do, so the test runs it with MXNet's ops and with gluon_cf's
(switched by replacing them) and compares what it returns (values, shapes, dtypes, names) or
the type of the exception it raises. Programs return a flat list.
"""
import os
import tempfile

import mxnet as mx
import numpy as np
from mxnet import autograd, nd

PROGRAMS = {}
# program name: what computes MXNet's answer where MXNet's own symbolic or hybridized ops
# cannot (each says why): MXNet's eager ops, or its graph without control flow
ORACLES = {}


def registrar(programs, oracles):
    """The decorator registering programs (and their oracles) in ``programs``/``oracles``."""
    def program(fn=None, oracle=None):
        if fn is None:
            return lambda f: program(f, oracle)
        programs[fn.__name__] = fn
        if oracle is not None:
            oracles[fn.__name__] = oracle
        return fn
    return program


program = registrar(PROGRAMS, ORACLES)


def _normal(*shape, seed=0):
    return np.random.RandomState(seed).normal(size=shape).astype("float32")


def _bind(symbol, args, grad_req="write", backward_twice=False, simple=False):
    """Outputs, then the gradients of ``args`` (sorted by name) not 'null', head gradients
    1.5, 2.5, ..."""
    req = (lambda k: grad_req if isinstance(grad_req, str) else grad_req[k])
    if simple:
        executor = symbol.simple_bind(mx.cpu(), grad_req=grad_req,
                                      type_dict={k: v.dtype for k, v in args.items()},
                                      **{k: v.shape for k, v in args.items()})
        for k, value in args.items():
            executor.arg_dict[k][:] = value
            if req(k) != "null":
                executor.grad_dict[k][:] = 0.25
    else:
        grads = {k: nd.ones(v.shape, dtype=v.dtype) * 0.25 for k, v in args.items()}
        executor = symbol.bind(mx.cpu(), {k: nd.array(v, dtype=v.dtype) for k, v in args.items()},
                               args_grad=grads, grad_req=grad_req)
    result = []
    for _ in range(2 if backward_twice else 1):
        outs = executor.forward(is_train=True)
        executor.backward([nd.ones(o.shape) * (k + 1.5) for k, o in enumerate(outs)])
        result += [o.copy() for o in outs]
    return result + [executor.grad_dict[k] for k in sorted(args) if req(k) != "null"]


def _rnn_symbol(hidden=4):
    """A tanh RNN over ``data`` (T, N, C) by foreach, its weights variables of the outer graph."""
    data, h0 = mx.sym.var("data"), mx.sym.var("h0")
    weight, bias = mx.sym.var("w"), mx.sym.var("b")

    def step(x, states):
        h = mx.sym.tanh(mx.sym.FullyConnected(mx.sym.concat(x, states[0], dim=1), weight=weight,
                                              bias=bias, num_hidden=hidden))
        return h, [h]
    outs, states = mx.sym.contrib.foreach(step, data, [h0])
    return mx.sym.Group([outs, states[0]])


def _count_symbol():
    """while_loop summing ``x`` (1,) into ``s`` until the counter reaches ``n``."""
    i, s, n, x = (mx.sym.var(k) for k in ("i", "s", "n", "x"))
    outs, (i2, s2) = mx.sym.contrib.while_loop(
        lambda i, s: i < n, lambda i, s: ([s * x], [i + 1, s + x]), [i, s], max_iterations=5)
    return mx.sym.Group([outs[0], i2, s2])


def _cond_symbol(second="b"):
    a, b = mx.sym.var("a"), mx.sym.var(second)
    return mx.sym.contrib.cond(mx.sym.sum(a) > mx.sym.sum(b), lambda: a * b + 1,
                               lambda: mx.sym.broadcast_mul(a, mx.sym.sum(b, keepdims=True)))


RNN_ARGS = {"data": _normal(3, 2, 5), "h0": _normal(2, 4, seed=1),
            "w": _normal(4, 9, seed=2) * 0.3, "b": _normal(4, seed=3)}
COUNT_ARGS = {"i": np.array([0], "float32"), "s": np.array([1], "float32"),
              "n": np.array([5], "float32"), "x": np.array([2], "float32")}


def _count_eager(args, grad_req="write", backward_twice=False):
    """``_bind`` of ``_count_symbol`` computed by MXNet's eager while_loop (MXNet's symbolic
    one fails in backward when cond reads a value of the outer graph: "Check failed:
    outputs.size() == num_forward_outputs + out_attrs->size()")."""
    req = (lambda k: grad_req if isinstance(grad_req, str) else grad_req[k])
    arrays = {k: nd.array(v) for k, v in args.items()}
    for k, a in arrays.items():
        if req(k) != "null":
            a.attach_grad(grad_req=req(k))
            a.grad[:] = 0.25
    result = []
    for _ in range(2 if backward_twice else 1):
        with autograd.record():
            x, n = arrays["x"], arrays["n"]
            outs, (i2, s2) = nd.contrib.while_loop(
                lambda i, s: i < n, lambda i, s: ([s * x], [i + 1, s + x]),
                [arrays["i"], arrays["s"]], max_iterations=5)
            heads = [outs[0], i2, s2]
            loss = sum((h * (k + 1.5)).sum() for k, h in enumerate(heads))
        loss.backward()
        result += [h.copy() for h in heads]
    return result + [arrays[k].grad for k in sorted(args) if req(k) != "null"]



# --------------------------------------------------------------------------------------------
# Shape and type inference of symbols


@program
def sym_foreach_infers_weight_shapes():
    arg, out, aux = _rnn_symbol().infer_shape(data=(3, 2, 5), h0=(2, 4))
    return [arg, out, aux]


def _unrolled_partial_arguments():
    """MXNet's own inference of the RNN unrolled (its foreach raises here: "axis 1 exceeds
    the input dimension of 1"): its legacy Concat takes the unknown data as 0 wide, so the
    weight's inferred shape is (4, 4), as gluon_cf's foreach gives too."""
    data, h = mx.sym.var("data"), mx.sym.var("h0")
    for x in mx.sym.split(data, num_outputs=3, axis=0, squeeze_axis=True):
        h = mx.sym.tanh(mx.sym.FullyConnected(mx.sym.concat(x, h, dim=1), weight=mx.sym.var("w"),
                                              bias=mx.sym.var("b"), num_hidden=4))
    return [list(x) for x in zip(*dict(zip(h.list_arguments(),
                                           h.infer_shape_partial(h0=(2, 4))[0])).items())]


@program(oracle=_unrolled_partial_arguments)
def sym_foreach_infer_shape_partial_without_data():
    sym = _rnn_symbol()
    return [sym.list_arguments(), sym.infer_shape_partial(h0=(2, 4))[0]]


@program
def error_foreach_infer_shape_partial_unknown_state():
    return list(_rnn_symbol().infer_shape_partial(data=(7, 2, 5)))


@program
def sym_foreach_infer_type_float64():
    return list(_rnn_symbol().infer_type(data="float64"))


@program
def sym_foreach_list_arguments_and_outputs():
    sym = _rnn_symbol()
    return [sym.list_arguments(), sym.list_outputs(), sym.list_auxiliary_states(),
            sym.list_inputs()]


def _count_eager_shapes():
    """MXNet's symbolic while_loop infers no output shape here (None; (), unknown, given all
    inputs); its eager one gives them (5 rows of (1,), then (1,), (1,))."""
    outs = _count_eager(COUNT_ARGS)[:3]
    return [([(1,)] * 4, [o.shape for o in outs], []), ["i", "n", "s", "x"]]


@program(oracle=_count_eager_shapes)
def sym_while_infer_shape():
    sym = _count_symbol()
    return [sym.infer_shape(i=(1,), s=(1,), n=(1,), x=(1,)), sym.list_arguments()]


@program
def sym_while_infer_type():
    return list(_count_symbol().infer_type(i="int32", s="float64", n="int32", x="float64"))


def _cond_eager_shape_and_type():
    """MXNet's symbolic cond infers no shape (None) and refuses float64 ("expected float64,
    got float32" in its own identity node); its eager cond gives both."""
    a, b = nd.array(_normal(2, 3), dtype="float64"), nd.array(_normal(2, 3), dtype="float64")
    out = nd.contrib.cond(nd.sum(a) > nd.sum(b), lambda: a * b + 1,
                          lambda: nd.broadcast_mul(a, nd.sum(b, keepdims=True)))
    return [([(2, 3), (2, 3)], [out.shape], []),
            ([np.float64, np.float64], [np.dtype(out.dtype).type], []), ["a", "b"]]


@program(oracle=_cond_eager_shape_and_type)
def sym_cond_infer_shape_and_type():
    sym = _cond_symbol()
    return [sym.infer_shape(a=(2, 3), b=(2, 3)), sym.infer_type(a="float64", b="float64"),
            sym.list_arguments()]


@program
def sym_foreach_batchnorm_aux_states():
    data, gamma, beta = mx.sym.var("data"), mx.sym.var("gamma"), mx.sym.var("beta")
    mean, var = mx.sym.var("mm"), mx.sym.var("mv")

    def step(x, states):
        y = mx.sym.BatchNorm(x, gamma, beta, mean, var, fix_gamma=False, use_global_stats=True)
        return y + states[0], [states[0] + 1]
    outs, _ = mx.sym.contrib.foreach(step, data, [mx.sym.var("s")])
    return [outs.list_arguments(), outs.list_auxiliary_states(),
            outs.infer_shape(data=(3, 2, 4), s=(2, 4))]


# --------------------------------------------------------------------------------------------
# bind / simple_bind / reshape / files


@program
def sym_foreach_bind_grad_add_twice():
    return _bind(_rnn_symbol(), RNN_ARGS, "add", backward_twice=True)


@program
def sym_foreach_simple_bind_grad_add():
    return _bind(_rnn_symbol(), RNN_ARGS, "add", simple=True)


@program
def sym_foreach_grad_null_for_weights():
    return _bind(_rnn_symbol(), RNN_ARGS, {"data": "write", "h0": "add", "w": "null",
                                           "b": "null"})


@program(oracle=lambda: _count_eager(
    COUNT_ARGS, {"i": "null", "s": "add", "n": "null", "x": "add"}, backward_twice=True))
def sym_while_bind_grad_add_and_null():
    return _bind(_count_symbol(), COUNT_ARGS, {"i": "null", "s": "add", "n": "null", "x": "add"},
                 backward_twice=True)


@program
def sym_cond_bind_both_branches():
    sym = _cond_symbol()
    first = _bind(sym, {"a": _normal(2, 3) + 2, "b": _normal(2, 3, seed=1)})
    return first + _bind(sym, {"a": _normal(2, 3), "b": _normal(2, 3, seed=1) + 2}, "add")


@program
def sym_foreach_bind_positional_args():
    sym = _rnn_symbol()
    names = sym.list_arguments()
    executor = sym.bind(mx.cpu(), [nd.array(RNN_ARGS[k]) for k in names])
    return [names] + executor.forward()


@program
def sym_foreach_executor_reshape():
    sym = _rnn_symbol()
    executor = sym.simple_bind(mx.cpu(), data=(3, 2, 5), h0=(2, 4))
    longer = executor.reshape(allow_up_sizing=True, data=(6, 2, 5), h0=(2, 4))
    for k, value in RNN_ARGS.items():
        longer.arg_dict[k][:] = value if k != "data" else np.concatenate([value, value])
    return longer.forward()


@program
def sym_save_and_load_file():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rnn-symbol.json")
        mx.sym.Group([_rnn_symbol(), _cond_symbol("c")]).save(path)
        loaded = mx.sym.load(path)
    args = dict(RNN_ARGS, a=_normal(2, 3), c=_normal(2, 3, seed=1) + 2)
    return [loaded.list_outputs(), loaded.list_arguments()] + _bind(loaded, args)


@program
def sym_nested_foreach_in_foreach():
    data, s = mx.sym.var("data"), mx.sym.var("s")

    def inner(x, states):
        return x * states[0], [states[0] + x]

    def outer(row, states):
        outs, inner_states = mx.sym.contrib.foreach(inner, row, [states[0]])
        return mx.sym.sum(outs, axis=0), inner_states
    outs, states = mx.sym.contrib.foreach(outer, data, [s])
    return _bind(mx.sym.Group([outs, states[0]]), {"data": _normal(3, 4, 2), "s": _normal(2)})


def _while_inside_cond_eager():
    """MXNet's symbolic while_loop fails in backward here (as in ``_count_eager``)."""
    result = []
    for n_value in (3, 0):
        a, n = nd.array(_normal(3)), nd.array([n_value])
        a.attach_grad()
        n.attach_grad()
        with autograd.record():
            out = nd.contrib.cond(nd.sum(n) > 1, lambda: nd.contrib.while_loop(
                lambda i, v: i < n, lambda i, v: (v, [i + 1, v * 2]), [nd.zeros((1,)), a],
                max_iterations=4)[1][1], lambda: a - 1)
            loss = (out * 1.5).sum()
        loss.backward()
        result += [out, a.grad, n.grad * 0]
    return result


@program(oracle=_while_inside_cond_eager)
def sym_while_inside_cond_branch():
    a, n = mx.sym.var("a"), mx.sym.var("n")

    def loop():
        outs, vs = mx.sym.contrib.while_loop(lambda i, v: i < n, lambda i, v: (v, [i + 1, v * 2]),
                                             [mx.sym.zeros((1,)), a], max_iterations=4)
        return vs[1]
    out = mx.sym.contrib.cond(mx.sym.sum(n) > 1, loop, lambda: a - 1)
    result = []
    for n_value in (3, 0):
        got = _bind(out, {"a": _normal(3), "n": np.array([n_value], "float32")})
        result += got[:2] + [got[2] * 0]
    return result


def _eager(run, *arrays):
    """``_bind``'s answer from MXNet's eager ops: the heads ``run(*arrays)`` returns, recorded,
    then the arrays' gradients of head gradients 1.5, 2.5, ..."""
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        heads = run(*arrays)
        loss = sum((h * (k + 1.5)).sum() for k, h in enumerate(heads))
    loss.backward()
    return heads + [a.grad for a in arrays]


def _cond_inside_foreach_eager():
    """MXNet's symbolic foreach cannot infer the shapes of a cond in its body."""
    def run(data, w):
        outs, states = nd.contrib.foreach(
            lambda x, st: (lambda y: (y, [st[0] + y]))(
                nd.contrib.cond(nd.sum(x) > 0, lambda: x * w, lambda: x - w)),
            data, [nd.zeros((3,))])
        return [outs, states[0]]
    return _eager(run, nd.array(_normal(4, 3)), nd.array(_normal(3)))


@program(oracle=_cond_inside_foreach_eager)
def sym_cond_inside_foreach_reads_outer_weight():
    data, w = mx.sym.var("data"), mx.sym.var("w")

    def step(x, states):
        y = mx.sym.contrib.cond(mx.sym.sum(x) > 0, lambda: x * w, lambda: x - w)
        return y, [states[0] + y]
    outs, states = mx.sym.contrib.foreach(step, data, [mx.sym.zeros((3,))])
    return _bind(mx.sym.Group([outs, states[0]]), {"data": _normal(4, 3), "w": _normal(3)})


@program
def sym_foreach_nested_list_data_and_states():
    a, b, c, d = (mx.sym.var(k) for k in "abcd")

    def step(xs, states):
        (x, y), (s, [t]) = xs, states
        return [x + s, [y * t]], [s + x, [t + 1]]
    outs, states = mx.sym.contrib.foreach(step, [a, b], [c, [d]])
    group = mx.sym.Group([outs[0], outs[1][0], states[0], states[1][0]])
    return _bind(group, {"a": _normal(3, 2), "b": _normal(3, 2, seed=1), "c": _normal(2, seed=2),
                         "d": _normal(2, seed=3)})


@program
def sym_while_int32_counter_float64_state():
    i, s = mx.sym.var("i"), mx.sym.var("s")
    outs, vs = mx.sym.contrib.while_loop(lambda i, s: i < 4, lambda i, s: (s * 2, [i + 1, s + 1]),
                                         [i, s], max_iterations=6)
    executor = mx.sym.Group([outs, vs[0], vs[1]]).bind(
        mx.cpu(), {"i": nd.array([1], dtype="int32"), "s": nd.array([0.5, 1.5], dtype="float64")})
    return [(o.dtype, o.shape, o.asnumpy()[:3]) for o in executor.forward()]


def _rnn_classifier(zeros=None):
    """A softmax over the last state of a tanh RNN by foreach over ``data`` (N, T, C)."""
    data, label = mx.sym.var("data"), mx.sym.var("softmax_label")
    w = mx.sym.var("fc_weight")

    def step(x, states):
        h = mx.sym.tanh(mx.sym.FullyConnected(x, weight=w, no_bias=True, num_hidden=4)
                        + states[0])
        return h, [h]
    if zeros is None:
        zeros = mx.sym.zeros_like(mx.sym.slice_axis(mx.sym.sum(data, axis=1), axis=1, begin=0,
                                                    end=4))
    _, states = mx.sym.contrib.foreach(step, mx.sym.transpose(data, axes=(1, 0, 2)), [zeros])
    return mx.sym.SoftmaxOutput(states[0], label)


@program
def sym_foreach_in_module_training():
    loss = _rnn_classifier(mx.sym.zeros((2, 4)))
    module = mx.mod.Module(loss, data_names=["data"], label_names=["softmax_label"])
    module.bind(data_shapes=[("data", (2, 3, 5))], label_shapes=[("softmax_label", (2,))])
    mx.random.seed(0)
    module.init_params(mx.init.Xavier())
    return _sgd_steps(module, [mx.io.DataBatch([nd.array(_normal(2, 3, 5, seed=k))],
                                               [nd.array([1, 3])]) for k in range(3)],
                      "fc_weight")


def _sgd_steps(module, batches, weight):
    """The outputs of a bound and initialised module's SGD steps, then its ``weight``."""
    module.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.5})
    result = []
    for batch in batches:
        module.forward(batch, is_train=True)
        result.append(module.get_outputs()[0].copy())
        module.backward()
        module.update()
    return result + [module.get_params()[0][weight]]


@program
def sym_json_round_trip_names():
    sym = mx.sym.Group([_rnn_symbol(), _cond_symbol("c"), _count_symbol()])
    loaded = mx.sym.load_json(sym.tojson())
    return [loaded.list_outputs(), loaded.list_arguments(),
            loaded.infer_shape(data=(3, 2, 5), h0=(2, 4))]


# --------------------------------------------------------------------------------------------
# More of the symbolic API around loops


@program
def sym_compose_loop_graph_with_new_input():
    sym = _rnn_symbol()
    pre = mx.sym.var("raw") * 2
    composed = sym(data=pre)
    args = dict(RNN_ARGS, raw=RNN_ARGS["data"] / 2)
    del args["data"]
    return [composed.list_arguments()] + _bind(composed, args)


@program
def sym_get_internals_of_loop_graph():
    internals = _rnn_symbol().get_internals()
    names = internals.list_outputs()
    picked = internals[names.index([n for n in names if n.startswith("_foreach")][0])]
    return [names, picked.list_outputs()] + _bind(picked, RNN_ARGS)


@program
def sym_named_loops_output_names():
    x, s = mx.sym.var("x"), mx.sym.var("s")
    outs, states = mx.sym.contrib.foreach(lambda d, st: (d * st[0], [st[0] + d]), x, [s],
                                          name="scan")
    w_outs, w_vars = mx.sym.contrib.while_loop(lambda v: mx.sym.sum(v) < 10,
                                               lambda v: (v, [v * 2]), [s], max_iterations=3,
                                               name="grow")
    c = mx.sym.contrib.cond(mx.sym.sum(s) > 0, lambda: s, lambda: -s, name="sign")
    group = mx.sym.Group([outs, states[0], w_outs, w_vars[0], c])
    return [group.list_outputs(), group.list_arguments()]


@program
def sym_eval_loop():
    return _rnn_symbol().eval(mx.cpu(), **{k: nd.array(v) for k, v in RNN_ARGS.items()})


@program
def sym_loop_under_attr_scope():
    with mx.AttrScope(ctx_group="dev1", lr_mult="0.5"):
        sym = _rnn_symbol()
    return [sym.attr_dict().get("w"), sym.list_arguments()] + _bind(sym, RNN_ARGS)


def _forward_twice(fresh=False):
    """A forward in predict mode, then one in training mode of other data, and its backward;
    ``fresh``: the second on an executor of its own."""
    executors = []
    for _ in range(2 if fresh else 1):
        executors.append(_rnn_symbol().simple_bind(mx.cpu(), data=(3, 2, 5), h0=(2, 4)))
        for k, value in RNN_ARGS.items():
            executors[-1].arg_dict[k][:] = value
    first = [o.copy() for o in executors[0].forward(is_train=False)]
    executor = executors[-1]
    executor.forward(is_train=True, data=nd.array(RNN_ARGS["data"] * 0.5))
    executor.backward([nd.ones((3, 2, 4)), nd.ones((2, 4))])
    return first + executor.outputs + [executor.grad_dict["w"], executor.grad_dict["data"]]


@program(oracle=lambda: _forward_twice(fresh=True))
def sym_executor_forward_predict_then_train():
    """(MXNet's own foreach computes the backward of an executor's second forward from the
    data of its first: w's gradient from the data given first, twice the size.)"""
    return _forward_twice()


@program
def sym_executor_copy_params_from():
    executor = _rnn_symbol().simple_bind(mx.cpu(), grad_req="null", data=(3, 2, 5), h0=(2, 4))
    executor.copy_params_from({k: nd.array(v) for k, v in RNN_ARGS.items()})
    return executor.forward()


def _bucket_sym_gen(length):
    data, label = mx.sym.var("data"), mx.sym.var("softmax_label")
    w = mx.sym.var("w", init=mx.init.Uniform())

    def step(x, states):
        h = mx.sym.tanh(mx.sym.FullyConnected(x, weight=w, no_bias=True, num_hidden=3)
                        + states[0])
        return h, [h]
    _, states = mx.sym.contrib.foreach(step, data, [mx.sym.zeros((2, 3))])
    return mx.sym.SoftmaxOutput(states[0], label), ("data",), ("softmax_label",)


@program
def sym_bucketing_module_two_lengths():
    module = mx.mod.BucketingModule(_bucket_sym_gen, default_bucket_key=5)
    module.bind(data_shapes=[mx.io.DataDesc("data", (5, 2, 4), layout="TNC")],
                label_shapes=[("softmax_label", (2,))])
    mx.random.seed(0)
    module.init_params(mx.init.Xavier())
    return _sgd_steps(module, [
        mx.io.DataBatch([nd.array(_normal(length, 2, 4, seed=length))], [nd.array([0, 2])],
                        bucket_key=length,
                        provide_data=[mx.io.DataDesc("data", (length, 2, 4), layout="TNC")],
                        provide_label=[mx.io.DataDesc("softmax_label", (2,))])
        for length in (5, 3, 5)], "w")


@program
def sym_foreach_int_data_float_states_infer_type():
    x, s = mx.sym.var("x"), mx.sym.var("s")
    outs, states = mx.sym.contrib.foreach(
        lambda d, st: (mx.sym.cast(d, "float32") * st[0], [st[0] + 1]), x, [s])
    group = mx.sym.Group([outs, states[0]])
    return [group.infer_type(x="int32", s="float32"),
            group.infer_type_partial(x="int32") if hasattr(group, "infer_type_partial") else 0]


NESTED_ARGS = {"a": np.array([0], "float32"), "b": _normal(2), "c": _normal(2, seed=1)}


def _nested_step(i, uv):
    return (uv[0] + uv[1], uv[0] * 2), (i + 1, [uv[1], uv[0]])


def _nested_eager():
    """MXNet's symbolic while_loop refuses nested loop_vars ("The number of loop_vars should
    be consistent during the loop": it compares the nested count with the flat one); its eager
    one runs them."""
    arrays = {k: nd.array(v) for k, v in NESTED_ARGS.items()}
    for a in arrays.values():
        a.attach_grad()
    with autograd.record():
        outs, (i, (u, v)) = nd.contrib.while_loop(lambda i, uv: i < 3, _nested_step,
                                                  (arrays["a"], [arrays["b"], arrays["c"]]),
                                                  max_iterations=3)
        heads = [outs[0], outs[1], i, u, v]
        loss = sum((h * (k + 1.5)).sum() for k, h in enumerate(heads))
    loss.backward()
    return heads + [arrays[k].grad for k in sorted(arrays)]


@program(oracle=_nested_eager)
def sym_while_loop_vars_nested_and_tuple():
    a, b, c = mx.sym.var("a"), mx.sym.var("b"), mx.sym.var("c")
    outs, (i, (u, v)) = mx.sym.contrib.while_loop(lambda i, uv: i < 3, _nested_step,
                                                  (a, [b, c]), max_iterations=3)
    return _bind(mx.sym.Group([outs[0], outs[1], i, u, v]), NESTED_ARGS)


@program
def sym_var_shape_and_dtype_attributes():
    data = mx.sym.var("data", shape=(3, 2, 5), dtype="float64")
    h0 = mx.sym.var("h0", shape=(2, 4), dtype="float64")
    w, b = mx.sym.var("w", dtype="float64"), mx.sym.var("b", dtype="float64")

    def step(x, states):
        h = mx.sym.tanh(mx.sym.FullyConnected(mx.sym.concat(x, states[0], dim=1), weight=w,
                                              bias=b, num_hidden=4))
        return h, [h]
    outs, states = mx.sym.contrib.foreach(step, data, [h0])
    group = mx.sym.Group([outs, states[0]])
    return [group.infer_shape(), group.infer_type()]


@program
def sym_makeloss_blockgrad_backward_without_heads():
    sym = _rnn_symbol()
    loss = mx.sym.MakeLoss(mx.sym.sum(sym[0]) + mx.sym.sum(mx.sym.BlockGrad(sym[1])))
    executor = loss.simple_bind(mx.cpu(), data=(3, 2, 5), h0=(2, 4))
    for k, value in RNN_ARGS.items():
        executor.arg_dict[k][:] = value
    executor.forward(is_train=True)
    executor.backward()
    return [executor.outputs[0], executor.grad_dict["w"], executor.grad_dict["h0"]]


def _backward_twice(forward_again=False):
    executor = _rnn_symbol().simple_bind(mx.cpu(), grad_req="add", data=(3, 2, 5), h0=(2, 4))
    for k, value in RNN_ARGS.items():
        executor.arg_dict[k][:] = value
    for grad in executor.grad_dict.values():
        grad[:] = 0
    for k in range(2):
        if k == 0 or forward_again:
            executor.forward(is_train=True)
        executor.backward([nd.ones((3, 2, 4)), nd.ones((2, 4)) * 2])
    return [executor.grad_dict["w"], executor.grad_dict["data"], executor.grad_dict["h0"]]


@program(oracle=lambda: _backward_twice(forward_again=True))
def sym_backward_twice_after_one_forward():
    """(MXNet's own foreach refuses a second backward: "We didn't record the computation for
    iteration 2".)"""
    return _backward_twice()


def _in_ctx_group(group2ctx=True):
    with mx.AttrScope(ctx_group="dev1"):
        sym = _rnn_symbol()
    executor = sym.bind(mx.cpu(0), {k: nd.array(v) for k, v in RNN_ARGS.items()},
                        group2ctx={"dev1": mx.cpu(1)} if group2ctx else None)
    return executor.forward()


@program(oracle=lambda: _in_ctx_group(group2ctx=False))
def sym_loop_placed_by_group2ctx():
    """(MXNet's own foreach fails there: "CachedOp requires all inputs to live on the same
    context".)"""
    return _in_ctx_group()


def _closure_shapes_eager():
    """MXNet's symbolic foreach infers the captured w as (1,) and refuses it; the shapes are
    those of its eager loop."""
    data, w, s = nd.ones((3, 2)), nd.ones((2,)), nd.ones((2,))
    outs, states = nd.contrib.foreach(lambda x, st: (x * w, [st[0] + x * w]), data, [s])
    return [([data.shape, w.shape, s.shape], [outs.shape, states[0].shape], [])]


@program(oracle=_closure_shapes_eager)
def sym_closure_shape_inferred_from_data():
    data, w = mx.sym.var("data"), mx.sym.var("w")
    outs, states = mx.sym.contrib.foreach(lambda x, st: (x * w, [st[0] + x * w]), data,
                                          [mx.sym.var("s")])
    return [mx.sym.Group([outs, states[0]]).infer_shape_partial(data=(3, 2))]


@program
def sym_stop_gradient_in_body():
    data, w = mx.sym.var("data"), mx.sym.var("w")

    def step(x, st):
        y = mx.sym.stop_gradient(x * w) + x * st[0]
        return y, [st[0] + mx.sym.BlockGrad(y)]
    outs, states = mx.sym.contrib.foreach(step, data, [w])
    return _bind(mx.sym.Group([outs, states[0]]), {"data": _normal(3, 2), "w": _normal(2)})


@program
def sym_module_fit_score_predict():
    x, y = _normal(10, 3, 4), np.arange(10) % 4
    result = []
    for last in ("pad", "roll_over"):
        train = mx.io.NDArrayIter(x, y, batch_size=4, last_batch_handle=last)
        module = mx.mod.Module(_rnn_classifier(), data_names=["data"],
                               label_names=["softmax_label"])
        mx.random.seed(0)
        module.fit(train, num_epoch=2, optimizer="sgd", initializer=mx.init.Xavier(),
                   optimizer_params={"learning_rate": 0.5}, eval_metric="acc")
        train.reset()
        score = module.score(train, "ce")[0][1]
        predicted = module.predict(mx.io.NDArrayIter(x, y, batch_size=4, last_batch_handle="pad"))
        result += [predicted, score, module.get_params()[0]["fc_weight"]]
    return result
