"""MXNet 1.9.1's own contrib ops as the oracle (session 23, issue 24): programs shaped as real
clients write them (gluonnlp 0.10.0's samplers and scan-style RNNs, MXNet's own control-flow
tests, user scripts on ``mx.sym``) built once with ``mx.sym.contrib``/``F.contrib`` and once
with gluon_cf, and everything a client observes compared: the structure returned (list or
single, nesting), ``list_arguments``/``list_outputs``/``list_auxiliary_states``,
``get_internals``, ``infer_shape_partial``/``infer_type``, ``bind`` forward and backward under
each ``grad_req`` (twice, with other data the second time), ``tojson``/``load_json``, executor
``reshape``, ``SymbolBlock``, and blocks hybridized with ``static_alloc``/``static_shape``.

NOTE [what gluon_cf accepts beyond MXNet's symbolic ops]
MXNet 1.9.1's symbolic ops refuse some programs its eager ops run. gluon_cf decides each:
- A loop variable func does not read (``while_loop``: ValueError "The 1-th loop_var doesn't
  involve into the computation"; ``foreach``: AssertionError "the state arrays have to be used
  in the loop body"), one Symbol passed twice as loop variables (AssertionError "The inputs of
  the subgraph don't have unique names"), a ``foreach`` datum the body does not read: accepted,
  harmless. Each has one meaning, the one MXNet's eager op computes, and gluon_cf gives it
  (values and gradients checked against eager MXNet below). MXNet's own
  test_contrib_control_flow.py wraps such calls in ``try/except AssertionError`` and compares
  what runs with its eager loop: accepting passes it.
- ``cond`` of a Python bool (or number) ``pred``: MXNet's symbolic cond fails flattening it
  (AssertionError); its eager cond takes ``bool(pred)``. gluon_cf decides the branch at once,
  in either mode (the graph holds the branch taken): eager MXNet's values. Harmless.
- ``max_iterations=None``: MXNet raises ValueError ("max_iterations should be specified"),
  eagerly and symbolically; gluon_cf runs the loop until cond fails (its documented exact
  length). Harmless: MXNet runs no such program.
- ``cond`` of a ``while_loop`` returning a list of one Symbol: MXNet's symbolic op raises
  ValueError ("Return of cond must be a Symbol"), its eager op takes ``bool([x])``, true
  whatever ``x`` holds (the loop runs ``max_iterations`` steps). gluon_cf read the Symbol in
  it: values MXNet gives nowhere. Refused now, with MXNet's ValueError, symbolically as
  eagerly (gluon_cf's eager loop refused it already, never silently true).
- ``cond`` whose ``pred`` is a list of one Symbol: MXNet's symbolic cond flattens pred and
  reads that Symbol; gluon_cf refused it. It is read as MXNet reads it now. A list of one
  NDArray stays refused eagerly (MXNet: ``bool([x])``, always the then branch).
- Nested ``loop_vars`` whose flat count differs from their top-level count (``(i, (h, c))``):
  MXNet's symbolic while_loop raises ValueError ("The number of loop_vars should be
  consistent"), comparing one with the other; its eager op runs them. Accepted, harmless as
  above. Eagerly the final loop vars come in the containers func returned last (a tuple
  nested in them a tuple), as MXNet's eager op returns them (gluon_cf made lists).

Left as it was (gluon_cf refuses what MXNet runs, with a clear error): a symbolic ``cond``
whose branches return different shapes, bound by a Symbol executor: MXNet runs it (the output
takes the taken branch's shape), gluon_cf raises DynamicShapeError (the executor needs shapes
before it runs) and runs it in a SymbolBlock (tests/test_symbolic_semantics2.py).

Eager loops whose state changes shape or dtype from one step to the next (a decoder growing a
sequence with ``concat``) or whose body returns more states than it was given: MXNet's eager
ops run them (states are not stacked; a foreach's extra state is returned), its symbolic ops
cannot. gluon_cf refused them eagerly too until session 26; its eager loops now run them as
MXNet's do (NOTE [eager loop states may change] in gluon_cf/ops/eager_loops.py), hybridized
they stay refused, saying why. A foreach over data of different lengths (MXNet takes the first
datum's length and drops the others' rows) stays refused eagerly: it would drop data. Both
checked below.

NOTE [shapes gluon_cf infers beyond MXNet's]
MXNet 1.9.1 infers no shape through its own ``cond`` and ``while_loop`` (``infer_shape`` answers
None with its warning, ``infer_shape_partial`` leaves every output unknown, so ``simple_bind``
and ``mx.mod.Module`` fail on them: "InferShape pass cannot decide shapes"), nor through a
``foreach`` one of whose data has an unknown shape (an MXNetError). gluon_cf infers them; every
shape MXNet does infer, gluon_cf infers alike (checked for each program below). Harmless: no
program MXNet runs sees another shape, and those MXNet cannot bind bind.
"""
import warnings
import zlib

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd
from mxnet.base import py_str

import gluon_cf

S = mx.sym
OPS = {"mxnet": mx.sym.contrib, "gluon_cf": gluon_cf}
F32 = "float32"
X, Y, Z = S.var("x"), S.var("y"), S.var("z")
H, C, W, V, I = S.var("h"), S.var("c"), S.var("w"), S.var("v"), S.var("i")

warnings.filterwarnings("ignore", message="Cannot decide type")


def _flat(value):
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in _flat(v)]
    return [value]


def _structure(value):
    """The container types and nesting of what an op returned (Symbols/NDArrays as 'A')."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_structure(v) for v in value])
    return "A" if isinstance(value, (S.Symbol, nd.NDArray)) else type(value).__name__


def _values(shapes, seed):
    """Values of each name drawn by name and seed (whichever other names are asked)."""
    out = {k: np.random.RandomState(seed * 1000 + zlib.crc32(k.encode()) % 1000).uniform(
        0.5, 1.5, s).astype(F32) for k, s in shapes.items()}
    if "i" in out:
        out["i"] = np.zeros(shapes["i"], F32)
    return out


def _assert_close(got, want, what):
    assert len(got) == len(want), (what, len(got), len(want))
    for k, (g, w) in enumerate(zip(got, want)):
        if w is None or g is None:
            assert g is None and w is None, (what, k)
            continue
        assert g.shape == w.shape and g.dtype == w.dtype, (what, k, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg="%s %d" % (what, k))


def _run(sym, shapes, grad_req, train, seeds=(0, 7)):
    """Forward (and backward) on one executor twice, with other data and heads the second time
    (``grad_req='add'`` accumulates across them)."""
    names = sym.list_arguments()
    first = _values(shapes, seeds[0])
    args = {k: nd.array(first[k]) for k in names}
    grads = {k: nd.zeros(shapes[k]) for k in names}
    ex = sym.bind(mx.cpu(), args, args_grad=grads if train else None, grad_req=grad_req)
    seen = []
    for seed in seeds:
        values = _values(shapes, seed)
        for k in names:
            ex.arg_dict[k][:] = values[k]
        outs = ex.forward(is_train=train)
        got = [o.asnumpy() for o in outs]
        if train:
            rng = np.random.RandomState(seed + 1)
            ex.backward([nd.array(rng.uniform(-1, 1, o.shape)) for o in got])
            got += [None if ex.grad_dict.get(k) is None else ex.grad_dict[k].asnumpy()
                    for k in names]
        seen.append(got)
    return seen


def _observe(ops, program, shapes, grad_req="write", train=True):
    with mx.name.NameManager():
        returned = program(ops, S, {k: S.var(k) for k in shapes})
    sym = S.Group(_flat(returned))
    known = {k: v for k, v in shapes.items() if k in sym.list_arguments()}
    reloaded = mx.sym.load_json(sym.tojson())
    return {"structure": _structure(returned), "arguments": sym.list_arguments(),
            "inputs": sym.list_inputs(), "outputs": sym.list_outputs(),
            "aux": sym.list_auxiliary_states(),
            "internals": sym.get_internals().list_outputs(),
            "types": sym.infer_type(**{k: F32 for k in known}),
            # (MXNet's symbolic cond cannot infer float64: it fails, gluon_cf may answer)
            "types64": _quiet(lambda: sym.infer_type_partial(**{list(known)[0]: "float64"})),
            "shapes": _quiet(lambda: sym.infer_shape(**known)),
            "partial_shapes": _quiet(lambda: sym.infer_shape_partial(
                **{k: known[k] for k in list(known)[:2]})),
            "reloaded": (reloaded.list_arguments(), reloaded.list_outputs()),
            "monitored": _monitored(sym, known),
            "runs": _run(sym, known, grad_req, train),
            "reloaded_runs": _run(reloaded, known, "write", False)}


def _monitored(sym, shapes):
    """The outputs an executor's monitor callback sees (MXNet's own ``monitor_all=True`` fails
    on its foreach: "in_array.size() == input_names.size()")."""
    seen = []
    ex = sym.bind(mx.cpu(), {k: nd.array(v) for k, v in _values(shapes, 0).items()})
    ex.set_monitor_callback(lambda name, _: seen.append(py_str(name)))
    ex.forward()
    nd.waitall()
    return seen


def _quiet(infer):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return infer()
        except mx.MXNetError as err:
            return err


def _assert_knows_what_mxnet_knows(got, want, what):
    """NOTE [shapes gluon_cf infers beyond MXNet's]: every shape MXNet infers, gluon_cf infers
    the same; where MXNet's answer is None (infer_shape), () (unknown, infer_shape_partial) or
    an error (its foreach inferring with a datum's shape unknown), gluon_cf may know more."""
    if isinstance(want, mx.MXNetError) or want[0] is None:
        return
    assert got is not None and not isinstance(got, Exception), (what, got, want)
    for g_list, w_list in zip(got, want):
        assert len(g_list) == len(w_list), what
        for g, w in zip(g_list, w_list):
            assert w == () or g == w, (what, got, want)


def _eager(ops, program, shapes, names, seeds=(0, 7)):
    """``program`` run eagerly (``ops``: mx.nd.contrib or gluon_cf) under autograd, as _run
    runs a bound symbol: outputs then the gradients of ``names`` (grad_req 'write')."""
    seen = []
    for seed in seeds:
        arrays = {k: nd.array(v) for k, v in _values(shapes, seed).items()}
        for a in arrays.values():
            a.attach_grad()
        with autograd.record():
            returned = program(ops, nd, arrays)
        outs = _flat(returned)
        rng = np.random.RandomState(seed + 1)
        autograd.backward(outs, [nd.array(rng.uniform(-1, 1, o.shape)) for o in outs])
        seen.append([o.asnumpy() for o in outs] + [arrays[k].grad.asnumpy() for k in names])
    return _structure(returned), seen


def _compare(program, shapes, grad_req="write", train=True, mxnet_symbolic=True,
             mxnet_values=True):
    """gluon_cf's symbol against MXNet's (``mxnet_symbolic`` False: MXNet's symbolic op fails
    on it, said where the program is listed), and both against eager MXNet, whose structure
    gluon_cf's eager op returns too."""
    got = _observe(gluon_cf, program, shapes, grad_req, train)
    if mxnet_symbolic:
        want = _observe(mx.sym.contrib, program, shapes, grad_req, train)
        for key in want:
            if key in ("shapes", "partial_shapes"):
                _assert_knows_what_mxnet_knows(got[key], want[key], key)
            elif key == "types64" and isinstance(want[key], mx.MXNetError):
                continue
            elif key.endswith("runs"):
                if not mxnet_values:
                    continue
                for k, (g, w) in enumerate(zip(got[key], want[key])):
                    _assert_close(g, w, "%s %d" % (key, k))
            else:
                assert got[key] == want[key], key
    names = got["arguments"]
    shapes = {k: shapes[k] for k in names}
    eager_want = _eager(mx.nd.contrib, program, shapes, names)
    eager_got = _eager(gluon_cf, program, shapes, names)
    assert eager_got[0] == eager_want[0]
    n_out = len(got["runs"][0]) - len(names)
    for k, (g, w) in enumerate(zip(eager_got[1], eager_want[1])):
        _assert_close(g, w, "eager run %d" % k)
    if grad_req == "write" and train:
        for k, (g, w) in enumerate(zip(got["runs"], eager_want[1])):
            _assert_close(g, w, "symbolic run %d against eager MXNet" % k)
    else:
        for k, (g, w) in enumerate(zip(got["runs"], eager_want[1])):
            _assert_close(g[:n_out], w[:n_out], "symbolic run %d against eager MXNet" % k)
    return got


def _lstm_step(F, v):
    def step(d, states):
        h, c = states
        gates = F.FullyConnected(d, weight=v["w"], bias=v["v"], num_hidden=12) + \
            F.FullyConnected(h, weight=v["z"], no_bias=True, num_hidden=12)
        i, f, g, o = F.split(gates, num_outputs=4, axis=1)
        c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
        h = F.sigmoid(o) * F.tanh(c)
        return h, [h, c]
    return step


LSTM_SHAPES = {"x": (4, 2, 5), "h": (2, 3), "c": (2, 3), "w": (12, 5), "v": (12,),
               "z": (12, 3)}
XHW = {"x": (4, 3), "y": (4, 3), "z": (4, 3), "h": (3,), "c": (3,), "w": (3,), "v": (3,)}
IHW = {"i": (1,), "h": (3,), "c": (3,), "w": (3,), "v": (3,), "x": (2, 3)}


def _p(fn):
    return fn


def _cond_in_foreach(ops, F, v):
    return ops.foreach(lambda d, s: (lambda o: (o, o + s))(ops.cond(
        F.sum(d) > F.sum(s), lambda: d * v["w"], lambda: s * v["v"])), v["x"], v["h"])


def _while_in_foreach(ops, F, v):
    def step(d, s):
        _, (_, t) = ops.while_loop(lambda j, t: j < 2, lambda j, t: ([], [j + 1, t * d + v["w"]]),
                                   [F.zeros((1,)), s], max_iterations=2)
        return t, t + s
    return ops.foreach(step, v["x"], v["h"])


def _two_loops_share_captured(ops, F, v):
    first = ops.foreach(lambda d, s: (d * v["w"], s + d), v["x"], v["c"])
    return ops.foreach(lambda d, s: (d * v["w"] + s, s * first[1]), v["y"], v["h"])


def _while_nested_loop_vars_tuple(ops, F, v):
    return ops.while_loop(
        lambda i, hc: i < 3,
        lambda i, hc: ([hc[0] * v["w"]], (i + 1, (hc[0] * hc[1], hc[1] + v["v"]))),
        (v["i"], (v["h"], v["c"])), max_iterations=3)


# name -> (program(ops, F, variables), shapes, options for _compare)
PROGRAMS = {
    # gluonnlp's scan-style RNN: begin_state a list of [h, c], parameters as free variables
    "scan_lstm_begin_state_list": (lambda ops, F, v: ops.foreach(
        _lstm_step(F, v), v["x"], [v["h"], v["c"]]), LSTM_SHAPES, {}),
    "scan_lstm_begin_state_tuple": (lambda ops, F, v: ops.foreach(
        _lstm_step(F, v), v["x"], (v["h"], v["c"])), LSTM_SHAPES, {}),
    "foreach_three_data_nested_states": (lambda ops, F, v: ops.foreach(
        lambda d, s: ([d[0] * s[0][0], (d[1] + s[1][1],)],
                      [[s[0][0] + d[2]], [s[1][0] * d[0], s[1][1] - d[1]]]),
        [v["x"], v["y"], v["z"]], [[v["h"]], [v["c"], v["w"]]]), XHW, {}),
    "foreach_returns_no_outputs": (lambda ops, F, v: ops.foreach(
        lambda d, s: ([], [s[0] + d * v["w"], s[1] * d]), v["x"], [v["h"], v["c"]]), XHW, {}),
    # (MXNet's symbolic foreach gives ``+ v`` the gradient of one step: eager is the oracle)
    "foreach_returns_no_states": (lambda ops, F, v: ops.foreach(
        lambda d, s: ([d * v["w"], d + v["v"]], []), v["x"], []), XHW,
        {"mxnet_symbolic": False}),
    "foreach_single_state": (lambda ops, F, v: ops.foreach(
        lambda d, s: (d * s, s + d * v["w"]), v["x"], v["h"]), XHW, {}),
    "foreach_state_tuple_returned_as_tuple": (lambda ops, F, v: ops.foreach(
        lambda d, s: ((d * s[0],), (s[0] + d, s[1] * v["w"])), v["x"], (v["h"], v["c"])),
        XHW, {}),
    "foreach_grad_req_add": (lambda ops, F, v: ops.foreach(
        lambda d, s: (d * s * v["w"], s + d * v["v"]), v["x"], v["h"]), XHW,
        {"grad_req": "add"}),
    "foreach_grad_req_mixed": (lambda ops, F, v: ops.foreach(
        lambda d, s: (d * s * v["w"], s + d * v["v"]), v["x"], v["h"]), XHW,
        {"grad_req": {"x": "null", "h": "add", "w": "write", "v": "null"}}),
    # (MXNet's symbolic while_loop compares func's flat new_loop_vars with len(loop_vars):
    # ValueError; its eager op runs it, NOTE [what gluon_cf accepts beyond MXNet's
    # symbolic ops])
    "while_nested_loop_vars_tuple": (_while_nested_loop_vars_tuple, IHW,
                                     {"mxnet_symbolic": False}),
    "while_single_loop_var": (lambda ops, F, v: ops.while_loop(
        lambda s: F.sum(s) < 1e9, lambda s: (s * 2, s * v["w"]), v["h"], max_iterations=3),
        IHW, {}),
    # (``+ v`` again: MXNet's symbolic backward gives it one step's gradient)
    "while_returns_no_outputs_exact_bound": (lambda ops, F, v: ops.while_loop(
        lambda i, s: i < 4, lambda i, s: ([], [i + 1, s * v["w"] + v["v"]]), [v["i"], v["h"]],
        max_iterations=4), IHW, {"mxnet_symbolic": False}),
    "while_truncated_by_max_iterations_exactly": (lambda ops, F, v: ops.while_loop(
        lambda i, s: i < 100, lambda i, s: ((s * v["w"], s + 1), [i + 1, s * v["w"]]),
        [v["i"], v["h"]], max_iterations=3), IHW, {}),
    "while_grad_req_add_to_captured": (lambda ops, F, v: ops.while_loop(
        lambda i, s: i < 2, lambda i, s: (s * v["v"], [i + 1, s * v["w"] * v["v"]]),
        [v["i"], v["h"]], max_iterations=2), IHW, {"grad_req": "add"}),
    "foreach_grad_req_null_everywhere": (lambda ops, F, v: ops.foreach(
        lambda d, s: (d * s * v["w"], s + d), v["x"], v["h"]), XHW, {"grad_req": "null"}),
    "while_loop_vars_tuple_of_one": (lambda ops, F, v: ops.while_loop(
        lambda s: F.sum(s) < 1e9, lambda s: ([s * v["w"]], (s * v["w"] + 1,)), (v["h"],),
        max_iterations=2), IHW, {}),
    # (what a body returns is its input itself: MXNet copies it through an identity)
    "foreach_passes_data_and_states_through": (lambda ops, F, v: ops.foreach(
        lambda d, s: ([d, s[1]], [s[0], s[1]]), v["x"], [v["h"], v["c"]]), XHW, {}),
    "while_returns_its_loop_vars_as_outputs": (lambda ops, F, v: ops.while_loop(
        lambda i, s: i < 2, lambda i, s: ([s, i], [i + 1, s * v["w"]]), [v["i"], v["h"]],
        max_iterations=2), IHW, {}),
    "cond_returns_captured_variables": (lambda ops, F, v: ops.cond(
        F.sum(v["x"]) > 1, lambda: [v["h"], v["x"]], lambda: [v["c"], v["x"] * 2]), XHW, {}),
    "while_step_output_none": (lambda ops, F, v: ops.while_loop(
        lambda i, s: i < 2, lambda i, s: (None, [i + 1, s * v["w"]]), [v["i"], v["h"]],
        max_iterations=2), IHW, {}),
    # (values computed outside the body, read inside: cut from the graph as MXNet cuts them)
    "foreach_reads_computed_outer_values": (lambda ops, F, v: (lambda a, b: ops.foreach(
        lambda d, s: (d * a + s, s * b + d), v["x"], v["h"]))(
        F.tanh(v["w"] * 2), F.sum(v["y"], axis=0) * 0.1), XHW, {}),
    "while_reads_computed_outer_values": (lambda ops, F, v: (lambda a: ops.while_loop(
        lambda i, s: i < 3, lambda i, s: ([s * a], [i + 1, F.sin(s) + a]),
        [v["i"], v["h"] * 2], max_iterations=3))(F.tanh(v["w"] + v["v"])), IHW, {}),
    # (MXNet's symbolic cond gives w a wrong gradient about 2 runs in 3 here, its branch
    # returning a value from outside it: eager MXNet is the oracle of the values)
    "cond_reads_computed_outer_values": (lambda ops, F, v: (lambda a: ops.cond(
        F.sum(a) > 1, lambda: [F.broadcast_mul(a, v["x"]), a], lambda: [v["x"], a * 2]))(
        F.sigmoid(v["w"]) * 3), XHW, {"mxnet_values": False}),
    "cond_tuples_of_different_nesting": (lambda ops, F, v: ops.cond(
        F.sum(v["x"]) > 5, lambda: (v["x"] * 2, (v["h"] + 1, v["c"] * v["w"])),
        lambda: [[v["x"] - 1], v["h"] * v["c"], [v["w"] * 1]]), XHW, {}),
    "cond_else_taken_nested": (lambda ops, F, v: ops.cond(
        F.sum(v["x"]) > 500, lambda: (v["x"] * 2, (v["h"] + 1, v["c"] * v["w"])),
        lambda: [[v["x"] - 1], v["h"] * v["c"], [v["w"] * 1]]), XHW, {}),
    "cond_single_in_list": (lambda ops, F, v: ops.cond(
        F.sum(v["h"]) < 100, lambda: [v["h"] * v["w"]], lambda: [v["h"] + v["c"]]), XHW, {}),
    "cond_pred_reads_captured_grad_mixed": (lambda ops, F, v: ops.cond(
        F.sum(v["w"]) > F.sum(v["v"]), lambda: v["h"] * v["w"], lambda: v["h"] * v["v"]), XHW,
        {"grad_req": {"h": "write", "w": "null", "v": "add"}}),
    # (MXNet's symbolic foreach cannot infer shapes through a cond or a while_loop in its body,
    # and fails in backward on a free variable read by two foreach: eager is the oracle)
    "cond_in_foreach_with_captured": (_cond_in_foreach, XHW, {"mxnet_symbolic": False}),
    "while_in_foreach_rows": (_while_in_foreach, XHW, {"mxnet_symbolic": False}),
    "two_foreach_share_a_captured_value": (_two_loops_share_captured, XHW,
                                           {"mxnet_symbolic": False}),
    "foreach_in_cond": (lambda ops, F, v: ops.cond(
        F.sum(v["h"]) > 1, lambda: ops.foreach(lambda d, s: (d * s, s + d), v["x"], v["h"]),
        lambda: [v["x"] * 2, v["h"] * v["w"]]), XHW, {}),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_observes_as_mxnet(name):
    program, shapes, options = PROGRAMS[name]
    _compare(program, shapes, **options)


# --------------------------------------- what gluon_cf accepts beyond MXNet's symbolic ops
def _unread_loop_var(ops, F, v):
    return ops.while_loop(lambda i, s: i < 3, lambda i, s: (i * 2, [i + 1, F.broadcast_mul(v["w"], i)]),
                          [v["i"], v["h"]], max_iterations=3)


ACCEPTED = {   # name -> (program, what MXNet's symbolic op raises)
    "while_func_reads_no_loop_var": (_unread_loop_var, ValueError),
    "while_one_symbol_twice": (lambda ops, F, v: ops.while_loop(
        lambda a, b: F.sum(a) < 1e9, lambda a, b: (a * b, [a * v["w"], b + a]),
        [v["h"], v["h"]], max_iterations=3), AssertionError),
    "foreach_state_unused": (lambda ops, F, v: ops.foreach(
        lambda d, s: (d * v["w"], [s[0] + d, v["w"] * d]), v["x"], [v["h"], v["c"]]),
        AssertionError),
    "foreach_datum_unused": (lambda ops, F, v: ops.foreach(
        lambda d, s: (d[0] * s, s + v["w"]), [v["x"], v["y"]], v["h"]), AssertionError),
    "cond_of_a_python_bool": (lambda ops, F, v: ops.cond(
        False, lambda: v["x"] * v["w"], lambda: [v["x"] * 3]), AssertionError),
    "foreach_one_symbol_twice_as_states": (lambda ops, F, v: ops.foreach(
        lambda d, s: (d * s[0], [s[0] + d, s[1] * d]), v["x"], [v["h"], v["h"]]),
        AssertionError),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_programs_mxnet_refuses_symbolically_run_as_its_eager_ops(name):
    """NOTE [what gluon_cf accepts beyond MXNet's symbolic ops]: MXNet's symbolic op raises;
    gluon_cf's symbol computes what MXNet's eager op computes, values and gradients."""
    program, raised = ACCEPTED[name]
    with pytest.raises(raised):
        with mx.name.NameManager():
            program(mx.sym.contrib, S, {k: S.var(k) for k in XHW if k != "i"} | {"i": I})
    _compare(program, dict(XHW, i=(1,)), mxnet_symbolic=False)


def test_a_while_cond_returning_a_list_of_one_symbol_is_refused_as_mxnet():
    """MXNet's symbolic while_loop raises ValueError; its eager one takes ``bool([x])``, always
    true (3 steps here where ``x`` says 2). gluon_cf read the Symbol (2 steps, values MXNet
    gives nowhere): it raises MXNet's ValueError, eagerly and symbolically, at the user's line."""
    def program(ops, i, h):
        return ops.while_loop(lambda i, s: [i < 2], lambda i, s: (s, [i + 1, s * 2]), [i, h],
                              max_iterations=3)

    with pytest.raises(ValueError, match="Return of cond must be a Symbol"):
        program(mx.sym.contrib, I, H)
    steps = program(mx.nd.contrib, nd.zeros(1), nd.ones(3))[1][0]
    assert steps.asscalar() == 3
    for i, h in ((I, H), (nd.zeros(1), nd.ones(3))):
        with pytest.raises(ValueError, match=r"^gluon_cf\.while_loop at .*"
                                             r"test_mxnet_semantics23\.py:\d+: .*list of 1"):
            program(gluon_cf, i, h)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_cond_pred_in_a_list_of_one_symbol_is_read_as_mxnets_symbolic_cond(sign):
    """MXNet's symbolic cond flattens pred and reads its one Symbol; gluon_cf refused the list
    (eagerly both take it: MXNet as ``bool([x])``, always true, gluon_cf refuses it)."""
    def program(ops):
        return ops.cond([S.sum(H) * sign > 0], lambda: [H * W, (H + 1,)], lambda: [H, (W,)])

    def run(sym):
        ex = S.Group(_flat(sym)).bind(mx.cpu(), {"h": nd.array([1.0, 2.0]),
                                                 "w": nd.array([3.0, 0.5])},
                                      args_grad={"h": nd.zeros(2), "w": nd.zeros(2)})
        outs = [o.asnumpy() for o in ex.forward(is_train=True)]
        ex.backward([nd.ones(2), nd.ones(2)])
        return _structure(sym), outs, [g.asnumpy() for g in ex.grad_arrays]

    got, want = (run(_build(ops, program)) for ops in (gluon_cf, mx.sym.contrib))
    assert got[0] == want[0]
    for g, w in zip(got[1] + got[2], want[1] + want[2]):
        np.testing.assert_allclose(g, w)
    with pytest.raises(ValueError, match="list of 1"):
        gluon_cf.cond([nd.ones(1)], lambda: nd.ones(1), lambda: nd.zeros(1))


def _build(ops, program):
    with mx.name.NameManager():
        return program(ops)


# ------------------------------------------------------------ hybridized client blocks
STATIC = {"static_alloc": True, "static_shape": True}


class _GreedySampler(gluon.HybridBlock):
    """gluonnlp 0.10.0's SequenceSampler shape: a while_loop over (step, token, begin_state
    list, scores), a decoder's embedding, GRU cell and projection read from the closure,
    max_iterations exactly hit (every row defined in MXNet too). ``ops`` None: F.contrib."""

    def __init__(self, ops, vocab=6, hidden=4, steps=4, **kwargs):
        super().__init__(**kwargs)
        self.ops, self.steps = ops, steps
        with self.name_scope():
            self.embed = gluon.nn.Embedding(vocab, hidden)
            self.cell = gluon.rnn.GRUCell(hidden, input_size=hidden)
            self.proj = gluon.nn.Dense(vocab, in_units=hidden, flatten=False)
            self.scale = self.params.get("scale", shape=(1,), init=mx.init.Constant(0.7))

    def hybrid_forward(self, F, tokens, h0, scale):
        ops = self.ops or F.contrib

        def body(i, token, states, scores):
            out, new_states = self.cell(self.embed(token), states)
            logp = F.log_softmax(F.broadcast_mul(self.proj(out), scale), axis=-1)
            best = F.max(logp, axis=-1)
            new_token = F.argmax(logp, axis=-1)
            return (new_token, best), (i + 1, new_token, new_states, scores + best)

        outs, (steps, _, states, scores) = ops.while_loop(
            lambda i, token, states, scores: i < self.steps, body,
            (F.zeros((1,)), tokens, [h0], F.zeros_like(tokens)), max_iterations=self.steps)
        return outs[0], outs[1], steps, states[0], scores


def _call(net, arrays, train):
    arrays = [nd.array(a) for a in arrays]
    if not train:
        return [o.asnumpy() for o in net(*arrays)], []
    for a in arrays[1:]:
        a.attach_grad()
    # (eagerly a parameter no branch taken reads keeps its last gradient; a graph writes 0)
    net.collect_params().zero_grad()
    with autograd.record():
        outs = net(*arrays)
        loss = sum((o * (k + 1.5)).sum() for k, o in enumerate(outs))
    loss.backward()
    return [o.asnumpy() for o in outs], [a.grad.asnumpy() for a in arrays[1:]] + [
        p.grad().asnumpy() for _, p in sorted(net.collect_params().items())]


def _sampler_inputs(batch, seed):
    rng = np.random.RandomState(seed)
    return [rng.randint(0, 6, (batch,)).astype(F32), rng.uniform(-1, 1, (batch, 4)).astype(F32)]


@pytest.mark.parametrize("hybridize", [{}, STATIC], ids=["hybridized", "static"])
def test_greedy_sampler_hybridized_as_mxnets(hybridize):
    """Forward against MXNet's hybridized while_loop (which cannot train: "Assigning to
    NDArrays that are already in a computational graph"), gradients against MXNet's eager
    while_loop, over calls of other batch sizes and back."""
    nets = {}
    for k, ops, hyb in (("mxnet", None, True), ("gluon_cf", gluon_cf, True),
                        ("mxnet_eager", None, False)):
        mx.random.seed(3)
        nets[k] = _GreedySampler(ops, prefix="sampler_")
        nets[k].initialize(mx.init.Xavier())
        if hyb:
            nets[k].hybridize(**hybridize)
    for batch, seed in ((2, 0), (3, 1), (2, 2)):
        data = _sampler_inputs(batch, seed)
        want = _call(nets["mxnet"], data, train=False)[0]
        got, got_grads = _call(nets["gluon_cf"], data, train=True)
        eager, eager_grads = _call(nets["mxnet_eager"], data, train=True)
        _assert_close(got, want, "outputs of batch %d" % batch)
        _assert_close(got, eager, "eager outputs of batch %d" % batch)
        _assert_close(got_grads, eager_grads, "gradients of batch %d" % batch)


class _ScanLSTM(gluon.HybridBlock):
    """A scan-style LSTM (gluonnlp's encoders): ``cell.begin_state`` a list [h, c] given in,
    foreach over time, the states returned as a tuple."""

    def __init__(self, ops, **kwargs):
        super().__init__(**kwargs)
        self.ops = ops
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(3, input_size=2)
            self.out = gluon.nn.Dense(2, in_units=3, flatten=False)

    def hybrid_forward(self, F, x, h, c):
        ops = self.ops or F.contrib

        def step(d, states):
            out, states = self.cell(d, states)
            return self.out(out), tuple(states)

        outs, (h, c) = ops.foreach(step, x, [h, c])
        return outs, h, c


@pytest.mark.parametrize("hybridize", [None, {}, STATIC], ids=["eager", "hybridized", "static"])
def test_scan_lstm_with_begin_state_list_trains_as_mxnets(hybridize):
    results = {}
    for k, ops in (("mxnet", None), ("gluon_cf", gluon_cf)):
        mx.random.seed(5)
        net = _ScanLSTM(ops, prefix="scan_")
        net.initialize(mx.init.Xavier())
        if hybridize is not None:
            net.hybridize(**hybridize)
        calls = []
        for length, batch in ((4, 2), (2, 3), (4, 2)):
            rng = np.random.RandomState(length + batch)
            data = [rng.uniform(-1, 1, s).astype(F32)
                    for s in ((length, batch, 2), (batch, 3), (batch, 3))]
            data = [np.zeros(1, F32)] + data   # (_call takes no gradient of its first input)
            calls.append(_call(_Skip(net), data, train=True))
        results[k] = calls
    for k, (got, want) in enumerate(zip(results["gluon_cf"], results["mxnet"])):
        _assert_close(got[0] + got[1], want[0] + want[1], "call %d" % k)


class _Skip(gluon.Block):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, _, *args):
        return self.net(*args)

    def collect_params(self, select=None):
        return self.net.collect_params(select)


# ------------------------------------------ executors reshaped, internals, SymbolBlock
def _loop_and_cond(ops):
    def func(i, s):
        return s * W, [i + 1, S.broadcast_add(s * W, S.sum(X))]
    outs, (_, last) = ops.while_loop(lambda i, s: i < 3, func, [I, H], max_iterations=3)
    picked = ops.cond(S.sum(X) > 0, lambda: (X * 2, [last + 1]), lambda: [X * 3, (last,)])
    return S.Group(_flat([outs, last, picked]))


def test_reshaped_executor_and_internal_outputs_as_mxnet():
    """A bound executor reshaped to a longer x (all shapes given, allow_up_sizing), run with
    other data, then an internal output (the loop's final state) bound alone."""
    results = {}
    args = {"x": nd.ones((2, 3)), "h": nd.ones(3), "w": nd.ones(3) * 1.1, "i": nd.zeros(1)}
    for k, ops in OPS.items():
        sym = _build(ops, _loop_and_cond)
        ex = sym.bind(mx.cpu(), args)
        first = [o.asnumpy() for o in ex.forward()]
        bigger = ex.reshape(allow_up_sizing=True, **{n: (4, 3) if n == "x" else v.shape
                                                      for n, v in args.items()})
        second = [o.asnumpy() for o in bigger.forward(x=nd.ones((4, 3)) * -0.5)]
        internals = sym.get_internals()
        inner = internals["_while_loop0_output1"]
        third = [o.asnumpy() for o in inner.bind(mx.cpu(), {n: args[n] for n in
                                                            inner.list_arguments()}).forward()]
        results[k] = (first, second, third, internals.list_outputs(), inner.list_arguments(),
                      list(bigger.output_dict))
    got, want = results["gluon_cf"], results["mxnet"]
    assert got[3:] == want[3:]
    for g, w in zip(got[:3], want[:3]):
        _assert_close(g, w, "reshaped")


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_symbol_block_static_of_a_loop_and_a_cond(sign):
    """SymbolBlock over the symbol, hybridized static, trained: MXNet's own fails in its
    while_loop's shape inference (its cached op cannot run it), so eager MXNet is the oracle
    (the same program on NDArrays); cond alone against MXNet's SymbolBlock."""
    def eager(x, h, w, i):
        outs, (_, last) = mx.nd.contrib.while_loop(
            lambda i, s: i < 3, lambda i, s: (s * w, [i + 1, nd.broadcast_add(s * w, x.sum())]),
            [i, h], max_iterations=3)
        picked = mx.nd.contrib.cond(x.sum() > 0, lambda: (x * 2, [last + 1]),
                                    lambda: [x * 3, (last,)])
        return _flat([outs, last, picked])

    values = [np.full((2, 3), sign, F32), np.ones(3, F32), np.full(3, 1.1, F32),
              np.zeros(1, F32)]
    results = {}
    for k, ops in (("gluon_cf", gluon_cf), ("eager", None)):
        arrays = [nd.array(v) for v in values]
        for a in arrays[:3]:
            a.attach_grad()
        if ops is not None:
            sym = _build(ops, _loop_and_cond)
            block = gluon.SymbolBlock(sym, [S.var(n) for n in ("x", "h", "w", "i")])
            block.hybridize(**STATIC)
        for _ in range(2):
            with autograd.record():
                outs = block(*arrays) if ops is not None else eager(*arrays)
                loss = sum((o * (k + 1.5)).sum() for k, o in enumerate(outs))
            loss.backward()
        results[k] = [o.asnumpy() for o in outs] + [a.grad.asnumpy() for a in arrays[:3]]
    _assert_close(results["gluon_cf"], results["eager"], "symbol block")
    cond_results = {}
    for k, ops in OPS.items():
        sym = _build(ops, lambda ops: S.Group(_flat(ops.cond(
            S.sum(X) > 0, lambda: (X * W, [X + 1]), lambda: [X * 3, (W * X,)]))))
        block = gluon.SymbolBlock(sym, [S.var("x"), S.var("w")])
        block.hybridize(**STATIC)
        x, w = nd.array(values[0]), nd.ones((2, 3)) * 0.3
        x.attach_grad()
        with autograd.record():
            outs = block(x, w)
            loss = outs[0].sum() * 2 + outs[1].sum()
        loss.backward()
        cond_results[k] = [o.asnumpy() for o in outs] + [x.grad.asnumpy()]
    _assert_close(cond_results["gluon_cf"], cond_results["mxnet"], "cond symbol block")


# --------------------------------------------------------------- errors and their moment
ERRORS = {   # name -> program(ops); MXNet's and gluon_cf's raised by the same call (or run)
    "foreach_data_of_two_lengths_infer_shape": lambda ops: S.Group(_flat(ops.foreach(
        lambda d, s: (d[0] + d[1], s), [X, Y], H))).infer_shape(x=(3, 2), y=(4, 2), h=(2,)),
    "foreach_states_change_nesting": lambda ops: ops.foreach(
        lambda d, s: (d, [[s[0] + d], s[1]]), X, [H, C]),
    "while_func_returns_three_of_two": lambda ops: ops.while_loop(
        lambda i, s: i < 2, lambda i, s: (s, [i + 1, s, s]), [I, H], max_iterations=2),
    "cond_branches_return_two_and_three": lambda ops: ops.cond(
        S.sum(X) > 0, lambda: (X, (H,)), lambda: [X, H, C]),
    # (gluon_cf's was a ValueError only: code catching MXNetError missed it)
    "foreach_data_of_two_lengths_runs": lambda ops: S.Group(_flat(ops.foreach(
        lambda d, s: (d[0] + d[1], s), [X, Y], H))).bind(
            mx.cpu(), {"x": nd.ones((3, 2)), "y": nd.ones((4, 2)), "h": nd.ones(2)}
            ).forward()[0].asnumpy(),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_raised_as_mxnet_raises_them(name):
    """The same call raises in both (building the symbol, or running it), gluon_cf's an
    instance of MXNet's type."""
    raised = {}
    for k, ops in OPS.items():
        try:
            _build(ops, ERRORS[name])
            raised[k] = None
        except Exception as err:   # noqa: BLE001 - the type is what is compared
            raised[k] = err
        mx.nd.waitall()
    assert raised["mxnet"] is not None, name
    assert isinstance(raised["gluon_cf"], type(raised["mxnet"])), (
        type(raised["gluon_cf"]).__mro__, raised["mxnet"])


class _StatesOnly(gluon.HybridBlock):
    """A cond returning a tuple nested otherwise than the other branch's list, a Dense and a
    Parameter in its branch; a foreach and a while_loop returning ([], states)."""

    def __init__(self, ops, **kwargs):
        super().__init__(**kwargs)
        self.ops = ops
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=3, flatten=False)
            self.w = self.params.get("w", shape=(3,), init=mx.init.Constant(0.5))

    def hybrid_forward(self, F, x, h, w):
        ops = self.ops or F.contrib
        picked = ops.cond(F.sum(x) > 0, lambda: (self.dense(x), (F.broadcast_mul(h, w),)),
                          lambda: [x * 2, [h + 1]])
        _, states = ops.foreach(lambda d, s: ([], [s[0] + d, s[1] * 2]), x, [h, h * 2])
        _, final = ops.while_loop(lambda i, s: i < 2,
                                  lambda i, s: ([], (i + 1, F.broadcast_mul(s, w))),
                                  (F.zeros((1,)), h), max_iterations=2)
        return picked[0], picked[1][0], states[0], states[1], final[1]


def test_states_only_loops_and_a_nested_cond_hybridized_static_as_mxnets():
    """Forward against MXNet's hybridized block; gradients against MXNet's eager block (its
    hybridized backward fails on a foreach of no step outputs: "storage_type_num_unknown")."""
    nets = {}
    for k, ops, hybridize in (("mxnet", None, True), ("gluon_cf", gluon_cf, True),
                              ("mxnet_eager", None, False)):
        mx.random.seed(1)
        nets[k] = _StatesOnly(ops, prefix="states_")
        nets[k].initialize(mx.init.Xavier())
        if hybridize:
            nets[k].hybridize(**STATIC)
    for sign in (1.0, -1.0, 1.0):
        data = [np.zeros(1, F32), np.full((4, 3), 0.3 * sign, F32), np.full(3, 0.7, F32)]
        want = [o.asnumpy() for o in nets["mxnet"](*[nd.array(a) for a in data[1:]])]
        got = _call(_Skip(nets["gluon_cf"]), data, train=True)
        eager = _call(_Skip(nets["mxnet_eager"]), data, train=True)
        _assert_close(got[0], want, "outputs")
        _assert_close(got[0] + got[1], eager[0] + eager[1], "eager")


def test_greedy_sampler_accumulates_gradients_as_mxnets():
    """grad_req 'add' on the parameters and the begin state (one parameter 'null'), two
    backward passes a call, static hybridized, against MXNet's eager while_loop."""
    results = {}
    for k, ops, hybridize in (("gluon_cf", gluon_cf, True), ("mxnet_eager", None, False)):
        mx.random.seed(3)
        net = _GreedySampler(ops, prefix="sampler_")
        net.initialize(mx.init.Xavier())
        net.collect_params().setattr("grad_req", "add")
        net.scale.grad_req = "null"
        if hybridize:
            net.hybridize(**STATIC)
        seen = []
        for batch, seed in ((2, 0), (3, 1), (2, 2)):
            data = [nd.array(a) for a in _sampler_inputs(batch, seed)]
            data[1].attach_grad(grad_req="add")
            for _ in range(2):
                with autograd.record():
                    outs = net(*data)
                    loss = sum((o * (j + 1.5)).sum() for j, o in enumerate(outs))
                loss.backward()
            seen.append([data[1].grad.asnumpy()] + [
                p.grad().asnumpy() for _, p in sorted(net.collect_params().items())
                if p.grad_req != "null"])
        results[k] = seen
    for k, (got, want) in enumerate(zip(results["gluon_cf"], results["mxnet_eager"])):
        _assert_close(got, want, "call %d" % k)


def _bilm_calls(hybridize):
    from gluonnlp.model.bilm_encoder import BiLMEncoder
    mx.random.seed(0)
    enc = BiLMEncoder("lstmpc", 2, 4, 5, proj_size=4, cell_clip=1, proj_clip=1, prefix="bilm_")
    enc.initialize(mx.init.Xavier())
    if hybridize is not None:
        enc.hybridize(**hybridize)
    calls = []
    for length, batch in ((5, 2), (3, 3), (5, 2)):
        rng = np.random.RandomState(length * batch)
        x = nd.array(rng.uniform(-1, 1, (length, batch, 4)))
        mask = nd.array((rng.uniform(0, 1, (batch, length)) > 0.2).astype(F32))
        mask[:, 0] = 1
        states = enc.begin_state(func=mx.nd.zeros, batch_size=batch)
        x.attach_grad()
        with autograd.record():
            out, final = enc(x, states, mask)
            loss = (out * 1.5).sum() + sum((s * 2).sum() for s in _flat(final))
        loss.backward()
        calls.append([out.asnumpy(), x.grad.asnumpy()] + [
            p.grad().asnumpy() for _, p in sorted(enc.collect_params().items())])
    return calls


@pytest.mark.parametrize("hybridize", [None, {}, STATIC], ids=["eager", "hybridized", "static"])
def test_gluonnlp_bilm_encoder_runs_as_with_mxnets_foreach(hybridize, monkeypatch):
    """gluonnlp 0.10.0's BiLMEncoder (F.contrib.foreach over LSTMPCellWithClip cells given as
    the body, begin_state lists per layer, masks through SequenceReverse), its F.contrib's
    foreach replaced by gluon_cf's: outputs, final states and gradients as MXNet's, over calls
    of other lengths and batch sizes."""
    pytest.importorskip("gluonnlp")
    want = _bilm_calls(hybridize)
    monkeypatch.setattr(mx.nd.contrib, "foreach", gluon_cf.foreach)
    monkeypatch.setattr(mx.sym.contrib, "foreach", gluon_cf.foreach)
    for k, (got, expected) in enumerate(zip(_bilm_calls(hybridize), want)):
        _assert_close(got, expected, "call %d" % k)


class _ListPred(gluon.HybridBlock):
    def __init__(self, ops, **kwargs):
        super().__init__(**kwargs)
        self.ops = ops

    def hybrid_forward(self, F, x):
        return (self.ops or F.contrib).cond([F.sum(x) > 0], lambda: x * 2, lambda: x * 3)


def test_a_cond_pred_in_a_list_of_one_runs_hybridized_as_mxnets():
    results = {}
    for k, ops in (("mxnet", None), ("gluon_cf", gluon_cf)):
        net = _ListPred(ops)
        net.hybridize(**STATIC)
        results[k] = [_call(_Skip(net), [np.zeros(1, F32), np.full(3, sign, F32)], train=True)
                      for sign in (1.0, -1.0)]
    for got, want in zip(results["gluon_cf"], results["mxnet"]):
        _assert_close(got[0] + got[1], want[0] + want[1], "list pred")


EAGER_REFUSED = {   # name -> (program(ops), gluon_cf's error type): eager MXNet runs each
    # (MXNet's eager foreach runs as many steps as its first datum has rows, dropping the
    # other's last row silently)
    "foreach_data_of_two_lengths": (lambda ops: ops.foreach(
        lambda d, s: (d[0] + d[1], s), [nd.ones((3, 2)), nd.ones((4, 2))], nd.ones(2)),
        "MismatchError"),
}

# States that change shape, dtype or structure: refused here once, run now as MXNet's eager
# loops run them (NOTE [eager loop states may change] in gluon_cf/ops/eager_loops.py).
EAGER_AS_MXNET = {
    "while_state_grows": lambda ops: ops.while_loop(
        lambda i, s: i < 3, lambda i, s: ([], [i + 1, nd.concat(s, s, dim=0)]),
        [nd.zeros(1), nd.ones(2)], max_iterations=3),
    "while_state_changes_dtype": lambda ops: ops.while_loop(
        lambda i, s: i < 2, lambda i, s: ([], [i + 1, s.astype("float64")]),
        [nd.zeros(1), nd.ones(2)], max_iterations=2),
    "foreach_state_grows": lambda ops: ops.foreach(
        lambda d, s: (d, nd.concat(s, d, dim=0)), nd.ones((3, 2)), nd.ones(2)),
    "foreach_body_returns_more_states": lambda ops: ops.foreach(
        lambda d, s: (d, [s[0] + d, s[0]]), nd.ones((3, 2)), [nd.ones(2)]),
}


@pytest.mark.parametrize("name", sorted(EAGER_REFUSED))
def test_eager_loops_mxnet_runs_are_refused_loudly(name):
    """The programs the module's docstring leaves refused: MXNet's eager op runs them,
    gluon_cf's raises its error (a ValueError) at the user's line, never a value."""
    program, error = EAGER_REFUSED[name]
    program(mx.nd.contrib)
    with pytest.raises(ValueError, match=r"^gluon_cf\.\w+ at .*test_mxnet_semantics23\.py:\d+"
                                         r": ") as raised:
        program(gluon_cf)
    assert type(raised.value).__name__ == error


def _leaves(value):
    if isinstance(value, (list, tuple)):
        return [type(value).__name__] + [x for v in value for x in _leaves(v)]
    return [(value.shape, str(value.dtype), value.asnumpy().tolist())]


@pytest.mark.parametrize("name", sorted(EAGER_AS_MXNET))
def test_eager_loops_whose_states_change_run_as_mxnets(name):
    """Outputs and final states, their containers, shapes and dtypes, as MXNet's eager op's."""
    assert _leaves(EAGER_AS_MXNET[name](gluon_cf)) == \
        _leaves(EAGER_AS_MXNET[name](mx.nd.contrib))


class _DeferredScale(gluon.HybridBlock):
    """A parameter of deferred shape (0,), read in the body through ``tanh`` computed outside
    it: its shape comes only from what the body needs (MXNet's foreach infers it)."""

    def __init__(self, ops, **kwargs):
        super().__init__(**kwargs)
        self.ops = ops
        with self.name_scope():
            self.scale = self.params.get("scale", shape=(0,), allow_deferred_init=True,
                                         init=mx.init.Constant(0.4))

    def hybrid_forward(self, F, x, h, scale):
        a = F.tanh(scale * 2)
        return (self.ops or F.contrib).foreach(lambda d, s: (d * a + s, s + d), x, h)


def test_a_deferred_parameter_shaped_by_a_body_through_outer_operators_as_mxnets():
    """gluon_cf's Python shape walk went forwards only: the parameter stayed of unknown shape
    where MXNet's foreach gives it (3,) (also ``infer_shape_partial`` above)."""
    results = {}
    for k, ops in (("mxnet", None), ("gluon_cf", gluon_cf)):
        net = _DeferredScale(ops, prefix="deferred_")
        net.initialize()
        net.hybridize(**STATIC)
        data = [np.zeros(1, F32), np.full((4, 3), 0.5, F32), np.ones(3, F32)]
        results[k] = _call(_Skip(net), data, train=True)
        assert net.scale.shape == (3,)
    _assert_close(results["gluon_cf"][0] + results["gluon_cf"][1],
                  results["mxnet"][0] + results["mxnet"][1], "deferred")
