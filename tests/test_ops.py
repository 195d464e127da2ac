"""cond / foreach / while_loop against two oracles, forward and gradients, in every mode.

Each case is one model function run three ways (NOTE [three implementations of one model] in
conftest.py): gluon_cf in MODES (eager, hybridize(), hybridize(static_alloc, static_shape)),
MXNet's ``F.contrib`` ops eagerly, and plain Python loops. Outputs, input gradients and Gluon
parameter gradients must agree at rtol 1e-5. For while_loop, MXNet pads its outputs with
uninitialised memory, so only the valid rows are compared with it; our padding must be exactly
zero, which the Python reference (zero padded) checks.
"""
from collections import namedtuple

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

import gluon_cf
from conftest import (MODES, assert_close, assert_same_results, flat,
                      head_grads, make_model, run, set_mode)

B, D, T = 2, 3, 4


def arr(*shape, positive=None, seed=None):
    """Uniform(-1, 1) float32 data, deterministic per (shape, seed); optionally all > 0 / < 0."""
    r = np.random.RandomState(seed if seed is not None else sum(shape) * 7 + len(shape))
    x = r.uniform(-1, 1, size=shape).astype(np.float32)
    if positive is True:
        x = np.abs(x) + 0.1
    elif positive is False:
        x = -np.abs(x) - 0.1
    return x


def dense(units=D, in_units=D):
    return lambda: gluon.nn.Dense(units, in_units=in_units, flatten=False)


DENSE = {"dense": dense()}
W = {"w": (1, D)}


class Case(namedtuple("Case", "name fn inputs children params mx_view")):
    """``inputs``: list of numpy arrays; ``mx_view(flat_outputs) -> flat_outputs`` selects what
    is comparable with MXNet's ops (``None``: everything; ``"skip"``: nothing)."""


def case(name, fn, inputs, children=None, params=None, mx_view=None):
    return Case(name, fn, inputs, children or {}, params or {}, mx_view)


def valid_rows(rows, num_step_outputs):
    """mx_view for while_loop: the first ``rows`` rows of the step outputs, states as they are."""
    return lambda outs: [o[:rows] for o in outs[:num_step_outputs]] + outs[num_step_outputs:]


# ---------------------------------------------------------------------------------------------
# cond

def cond_single(F, cf, net, p, x):
    # The predicate is a computed Symbol in hybridized mode.
    return cf.cond(x.sum() > 0,
                   lambda: F.broadcast_mul(net.dense(x), p.w),
                   lambda: F.tanh(x) - 1)


def cond_nested(F, cf, net, p, x, y):
    outer = F.sigmoid(y)  # an outer computed value, captured by both branches
    return cf.cond((x * y).sum() < 1,
                   lambda: [net.dense(x), [x * outer, F.broadcast_add(y, p.w)]],
                   lambda: [outer * 2, [x - y, F.relu(x)]])


def cond_constants(F, cf, net, p, x):
    # MXNet issue 12154: branches that use no input at all.
    out = cf.cond(x.sum() > 0, lambda: F.ones((B, D)) * 2, lambda: F.zeros((B, D)))
    return [out, out * x]


def cond_round(F, cf, net, p, x):
    # MXNet issue 16188: ops without a gradient (round, floor, argmax) in a branch under autograd.
    def then():
        h = net.dense(x)
        idx = F.argmax(x, axis=1, keepdims=True)
        return [F.round(h * 3) + F.floor(x) + F.broadcast_add(F.zeros_like(x), idx), h]
    return cf.cond(x.sum() > 0, then, lambda: [F.round(x), x * 2])


def cond_two_level_pred(F, cf, net, p, x):
    # A predicate computed from a parameter and the input; a branch with a cond of its own.
    pred = F.broadcast_mul(x, p.w).sum() > 0
    return cf.cond(pred,
                   lambda: cf.cond(x.max() > 0.5, lambda: x * 3, lambda: net.dense(x)),
                   lambda: x * 5)


COND_CASES = [
    case("cond_single_then", cond_single, [arr(B, D, positive=True)], DENSE, W),
    case("cond_single_else", cond_single, [arr(B, D, positive=False)], DENSE, W),
    case("cond_nested_then", cond_nested, [arr(B, D, seed=1), arr(B, D, seed=2) * 0.1],
         DENSE, W),
    case("cond_nested_else", cond_nested, [arr(B, D, positive=True), arr(B, D, positive=True)],
         DENSE, W),
    case("cond_constants_then", cond_constants, [arr(B, D, positive=True)]),
    case("cond_constants_else", cond_constants, [arr(B, D, positive=False)]),
    case("cond_round", cond_round, [arr(B, D, positive=True)], DENSE),
    case("cond_pred_from_param", cond_two_level_pred, [arr(B, D, seed=3)], DENSE, W),
]


# ---------------------------------------------------------------------------------------------
# foreach

def foreach_single(F, cf, net, p, x, h):
    # A single data array and a single state array (not a list): body gets and returns arrays.
    def body(xt, s):
        out = F.tanh(net.dense(xt) + s)
        return out, out * 0.5
    return cf.foreach(body, x, h)


def foreach_lists(F, cf, net, p, x, y, h, c):
    def body(data, states):
        xt, yt = data
        s, m = states
        a = F.tanh(net.dense(xt) + s * yt)
        return [a, m + yt], [a, m * 0.9 + xt]
    return cf.foreach(body, [x, y], [h, c])


def foreach_nested(F, cf, net, p, x, y, h, c, d):
    def body(data, states):
        xt, yt = data
        s, [m, n] = states
        a = F.sigmoid(net.dense(xt) + m)
        return [a * n, [s + yt]], [a, [m + yt, n * xt]]
    return cf.foreach(body, [x, y], [h, [c, d]])


def foreach_nested_once(F, cf, net, p, x, y, h, c, d):
    # foreach_nested with each body input read once.
    def body(data, states):
        xt, yt = data
        s, [m, n] = states
        a = F.sigmoid(net.dense(xt) + m)
        return [a, [s * 2]], [a * 0.5, [yt * 3, F.tanh(n)]]
    return cf.foreach(body, [x, y], [h, [c, d]])


def foreach_nested_data(F, cf, net, p, x, y, h):
    # Nested data lists; MXNet's eager foreach indexes the inner list instead of its arrays.
    def body(data, s):
        xt, [yt, [zt]] = data
        return [s * yt], F.tanh(net.dense(xt) + zt * s)
    return cf.foreach(body, [x, [y, [x * 2]]], h)


def foreach_1d(F, cf, net, p, z, s):
    # 1-D data: a step sees a (1,)-shaped slice, as NDArray indexing gives.
    return cf.foreach(lambda zt, st: ([zt * st[0], zt + 1], [st[0] + zt * zt]), z, [s])


def foreach_no_output(F, cf, net, p, x, h):
    return cf.foreach(lambda xt, s: ([], [s[0] * xt + 1]), x, [h])


def foreach_captures(F, cf, net, p, x, h):
    g = F.sigmoid(h) * 2  # outer computed value, captured by the lambda
    body = lambda xt, s: (F.broadcast_mul(net.dense(xt), p.w) + g * s[0],  # noqa: E731
                          [F.tanh(s[0] + xt) * g])
    return cf.foreach(body, x, [h])


FOREACH_CASES = [
    case("foreach_single", foreach_single, [arr(T, B, D), arr(B, D)], DENSE),
    case("foreach_lists", foreach_lists, [arr(T, B, D), arr(T, B, D, seed=4), arr(B, D),
                                          arr(B, D, seed=5)], DENSE),
    case("foreach_nested", foreach_nested, [arr(T, B, D), arr(T, B, D, seed=6), arr(B, D),
                                            arr(B, D, seed=7), arr(B, D, seed=8)], DENSE),
    case("foreach_nested_once", foreach_nested_once, [arr(T, B, D), arr(T, B, D, seed=6),
                                                      arr(B, D), arr(B, D, seed=7),
                                                      arr(B, D, seed=8)], DENSE),
    case("foreach_nested_data", foreach_nested_data, [arr(T, B, D), arr(T, B, D, seed=6),
                                                      arr(B, D)], DENSE, mx_view="skip"),
    case("foreach_1d", foreach_1d, [arr(5), arr(1)]),
    case("foreach_no_output", foreach_no_output, [arr(T, B, D), arr(B, D)]),
    case("foreach_captures", foreach_captures, [arr(T, B, D), arr(B, D)], DENSE, W),
]


# ---------------------------------------------------------------------------------------------
# while_loop

def while_single(F, cf, net, p, v):
    # A single-array loop variable; returns a single array. Runs 4 steps of 6.
    return cf.while_loop(lambda v: v.max() < 5, lambda v: (net.dense(v), v + 1), v,
                         max_iterations=6)


def while_lists(F, cf, net, p, i, v, u):
    # Three loop variables, nested step outputs; 3 steps of 5.
    def func(i, v, u):
        h = F.tanh(net.dense(v) + u)
        return [h, [F.broadcast_mul(v, i), u * 2]], [i + 1, h, u + v]
    return cf.while_loop(lambda i, v, u: i < 3, func, [i, v, u], max_iterations=5)


def while_none_output(F, cf, net, p, i, v):
    return cf.while_loop(lambda i, v: i < 3, lambda i, v: (None, [i + 1, F.sin(v) * 2]), [i, v],
                         max_iterations=4)


def while_empty_output(F, cf, net, p, i, v):
    return cf.while_loop(lambda i, v: i < 3, lambda i, v: ([], [i + 1, net.dense(v)]), [i, v],
                         max_iterations=4)


def while_hits_max(F, cf, net, p, i, v):
    # cond is still true when max_iterations stops the loop.
    return cf.while_loop(lambda i, v: i < 100,
                         lambda i, v: (F.broadcast_mul(v, i), [i + 1, net.dense(v)]),
                         [i, v], max_iterations=3)


def while_zero_steps(F, cf, net, p, i, v):
    return cf.while_loop(lambda i, v: i > 100, lambda i, v: ([v * 2, net.dense(v)], [i + 1, v]),
                         [i, v], max_iterations=3)


def while_captures(F, cf, net, p, i, v):
    g = F.sigmoid(v).sum()  # outer computed value used by cond (through a lambda) and by func
    cond = lambda i, s: F.broadcast_lesser(i * F.ones_like(g), g + 1.5)  # noqa: E731

    def func(i, s):
        out = F.broadcast_mul(net.dense(s), p.w) + F.broadcast_mul(s, g)
        return out, [i + 1, F.tanh(out)]
    return cf.while_loop(cond, func, [i, v], max_iterations=6)


COUNTER = np.zeros(1, np.float32)
WHILE_CASES = [
    case("while_single", while_single, [np.array([[1.5, 0.0, -1.0], [0.5, 1.0, 0.2]],
                                                 np.float32)], DENSE, mx_view=valid_rows(4, 1)),
    case("while_lists", while_lists, [COUNTER, arr(B, D), arr(B, D, seed=9)], DENSE,
         mx_view=valid_rows(3, 3)),
    case("while_none_output", while_none_output, [COUNTER, arr(B, D)]),
    case("while_empty_output", while_empty_output, [COUNTER, arr(B, D)], DENSE),
    case("while_hits_max", while_hits_max, [COUNTER, arr(B, D)], DENSE),
    # MXNet returns no step outputs at all for a loop that runs zero times: nothing comparable.
    case("while_zero_steps", while_zero_steps, [COUNTER, arr(B, D)], DENSE, mx_view="skip"),
    case("while_captures", while_captures, [COUNTER, arr(B, D, positive=True)], DENSE, W,
         mx_view=valid_rows(3, 1)),
]


# ---------------------------------------------------------------------------------------------
# nesting

def nest_foreach_in_cond_in_while(F, cf, net, p, i, v, seq):
    def func(i, v):
        def then():
            body = lambda xt, s: (s, F.tanh(net.dense(xt) + s))  # noqa: E731
            outs, last = cf.foreach(body, seq, v)
            return [outs.sum(axis=0), last]
        v2 = cf.cond(i < 1.5, then, lambda: [v * 0.5, v + 1])
        return v2[0], [i + 1, v2[1]]
    return cf.while_loop(lambda i, v: i < 3, func, [i, v], max_iterations=3)


def nest_cond_in_foreach(F, cf, net, p, x, h):
    def body(xt, s):
        out = cf.cond(xt.sum() > 0, lambda: net.dense(xt) + s, lambda: s * 2 - xt)
        return out, out
    return cf.foreach(body, x, h)


def nest_while_in_foreach(F, cf, net, p, x, h):
    # The inner counter starts from a constant: a piece of the outer body that reads no input.
    def body(xt, s):
        outs, (j, v) = cf.while_loop(lambda j, v: j < 2, lambda j, v: (v * xt, [j + 1, v + xt]),
                                     [F.zeros((1,)), s], max_iterations=2)
        return outs, F.tanh(net.dense(v))
    return cf.foreach(body, x, h)


def nest_while_in_foreach_no_constant(F, cf, net, p, x, h):
    # As above, but the inner counter starts from a value computed from an input.
    def body(xt, s):
        outs, (j, v) = cf.while_loop(lambda j, v: j < 2, lambda j, v: (v * xt, [j + 1, v + xt]),
                                     [(s * 0).sum(), s], max_iterations=2)
        return outs, F.tanh(net.dense(v))
    return cf.foreach(body, x, h)


def nest_two_level_capture(F, cf, net, p, x, h):
    g = F.tanh(h)  # outermost graph

    def body(xt, s):
        u = F.sigmoid(xt + s)  # computed in the outer body
        inner = lambda yt, r: (F.broadcast_mul(net.dense(u * yt) + g, p.w) + r,  # noqa: E731
                               r * u + g)
        outs, r = cf.foreach(inner, x, s)
        return outs.sum(axis=0), r
    return cf.foreach(body, x, h)


NEST_CASES = [
    case("nest_foreach_cond_while", nest_foreach_in_cond_in_while,
         [COUNTER, arr(B, D), arr(T, B, D, seed=10)], DENSE),
    case("nest_cond_in_foreach", nest_cond_in_foreach, [arr(T, B, D, seed=11), arr(B, D)],
         DENSE),
    case("nest_while_in_foreach", nest_while_in_foreach, [arr(T, B, D, seed=12) * 0.5,
                                                         arr(B, D)], DENSE),
    case("nest_while_in_foreach_no_constant", nest_while_in_foreach_no_constant,
         [arr(T, B, D, seed=12) * 0.5, arr(B, D)], DENSE),
    case("nest_two_level_capture", nest_two_level_capture, [arr(3, B, D, seed=13), arr(B, D)],
         DENSE, W),
]

CASES = {c.name: c for c in COND_CASES + FOREACH_CASES + WHILE_CASES + NEST_CASES}

# Known bugs in gluon_cf: (case, mode or None for every non-eager mode) -> reason.
BUGS = {}

_oracles = {}


def oracle(c, impl):
    """Result of ``c`` eagerly with MXNet's ops ('mxnet') or the Python reference ('python')."""
    key = (c.name, impl)
    if key not in _oracles:
        net = make_model(c.fn, impl, c.children, c.params)
        _oracles[key] = run(net, c.inputs)
    return _oracles[key]


# Cases whose eager results are not those of the reference by design (checked on their own).
EAGER_APART = {"while_zero_steps": "test_while_loop_zero_steps_eager_never_calls_func"}


def params():
    out = []
    for name in CASES:
        for mode in MODES:
            if mode == "eager" and name in EAGER_APART:
                continue
            reason = BUGS.get((name, mode)) or (BUGS.get((name, None)) if mode != "eager"
                                                  else None)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(name, mode, marks=marks, id="%s-%s" % (name, mode)))
    return out


@pytest.mark.parametrize("name,mode", params())
def test_matches_oracles(name, mode):
    c = CASES[name]
    net = make_model(c.fn, "ours", c.children, c.params)
    set_mode(net, mode)
    ours = run(net, c.inputs)
    ref = oracle(c, "python")
    assert_same_results(ours, ref, "%s vs python reference" % name)
    if c.mx_view != "skip":
        mx_ = oracle(c, "mxnet")
        view = c.mx_view or (lambda outs: outs)
        assert_close(view(ours.flat), view(mx_.flat), "%s outputs vs mx.nd.contrib" % name)
        assert_same_results(ours, mx_, "%s vs mx.nd.contrib" % name, outputs=False)


def test_oracles_agree():
    """The Python reference itself agrees with MXNet's ops where both are defined."""
    for c in CASES.values():
        if c.mx_view == "skip":
            continue
        view = c.mx_view or (lambda outs: outs)
        ref, mx_ = oracle(c, "python"), oracle(c, "mxnet")
        assert_close(view(ref.flat), view(mx_.flat), c.name)
        assert_same_results(ref, mx_, c.name, outputs=False)


# ---------------------------------------------------------------------------------------------
# Properties the oracle comparison does not pin down on its own.

@pytest.mark.parametrize("mode", ["hybrid", "static"])
def test_cond_takes_both_branches_in_one_hybridized_graph(mode):
    """One cached graph, predicates alternating between calls: each call runs its own branch."""
    c = CASES["cond_single_then"]
    net = make_model(c.fn, "ours", c.children, c.params)
    set_mode(net, mode)
    ref = make_model(c.fn, "python", c.children, c.params)
    for x in [arr(B, D, positive=True), arr(B, D, positive=False), arr(B, D, positive=True)]:
        assert_same_results(run(net, [x]), run(ref, [x]), "cond")


@pytest.mark.parametrize("mode", MODES)
def test_cond_gradient_through_round_is_zero(mode):
    """MXNet issue 16188: round/floor/argmax in a branch under autograd; their gradient is 0."""
    c = CASES["cond_round"]
    net = make_model(c.fn, "ours", c.children, c.params)
    set_mode(net, mode)
    only_first = lambda outs: [mx.nd.ones_like(outs[0]), mx.nd.zeros_like(outs[1])]  # noqa
    result = run(net, c.inputs, heads=only_first)
    assert np.abs(result.flat[0]).sum() > 0
    assert not result.grads[0].any()
    assert not any(g.any() for g in result.param_grads)


@pytest.mark.parametrize("mode", MODES)
def test_while_loop_pads_with_exact_zeros(mode):
    c = CASES["while_single"]  # 4 steps of max_iterations=6
    net = make_model(c.fn, "ours", c.children, c.params)
    set_mode(net, mode)
    outputs = run(net, c.inputs).flat[0]
    assert outputs.shape == (6, B, D)
    assert np.all(outputs[4:] == 0)
    assert np.all(np.abs(outputs[:4]).sum(axis=(1, 2)) > 0)


@pytest.mark.parametrize("mode", ["hybrid", "static"])
def test_while_loop_zero_steps(mode):
    """Hybridized: max_iterations rows of zeros, the initial loop variables, and their gradient
    is the head gradient (identity); the body's parameters get a zero gradient."""
    c = CASES["while_zero_steps"]
    net = make_model(c.fn, "ours", c.children, c.params)
    set_mode(net, mode)
    result = run(net, c.inputs)
    (steps_a, steps_b), (i, v) = result.out
    assert steps_a.shape == steps_b.shape == (3, B, D)
    assert not steps_a.any() and not steps_b.any()
    assert_close([i, v], c.inputs, "final loop_vars")
    heads = [h.asnumpy() for h in head_grads([mx.nd.array(o) for o in result.flat])]
    assert_close(result.grads, heads[2:], "loop_vars gradient")
    assert not any(g.any() for g in result.param_grads)


def test_while_loop_eager_without_max_iterations():
    """Eager mode may omit max_iterations: exactly as many rows as steps, zero steps included."""
    v = mx.nd.array([1.0, 2.0])
    steps, last = gluon_cf.while_loop(lambda v: v.sum() < 10, lambda v: (v * 2, v + 1), v)
    assert_close(steps.asnumpy(), np.array([[2, 4], [4, 6], [6, 8], [8, 10]]), "steps")
    assert_close(last.asnumpy(), np.array([5, 6]), "last")


@pytest.mark.parametrize("max_iterations", [None, 3])
@pytest.mark.parametrize("single", [True, False])
def test_while_loop_zero_steps_eager_never_calls_func(max_iterations, single):
    """A loop of no step never calls func (MXNet's neither): no Python side effect, no
    recorded work. Its final loop vars are the initial ones (gradient: identity); its step
    outputs are what MXNet 1.9.1's eager while_loop returns, a plain ``[]`` (NOTE [loops of no
    step]), whatever func would return, checked against MXNet's own loop."""
    calls = []

    def func(v):
        calls.append(v)
        return (v * 2, [v]), v + 1

    def loop(impl, bound):
        v = mx.nd.array([1.0, 2.0])
        v.attach_grad()
        with autograd.record():
            steps, last = impl(lambda v: v.sum() > 10, func, v if single else [v], bound)
            last = last if single else last[0]
            loss = (last * mx.nd.array([3.0, 4.0])).sum()
        loss.backward()
        return steps, last, v.grad

    steps, last, grad = loop(gluon_cf.while_loop, max_iterations)
    # (MXNet's eager loop needs max_iterations)
    want_steps, want_last, want_grad = loop(mx.nd.contrib.while_loop, max_iterations or 5)
    assert calls == []
    assert type(steps) is list and steps == [] and type(want_steps) is list and want_steps == []
    assert_close(last.asnumpy(), want_last.asnumpy(), "last")
    assert_close(last.asnumpy(), np.array([1, 2]), "last")
    assert_close(grad.asnumpy(), want_grad.asnumpy(), "gradient of the loop vars")
    assert_close(grad.asnumpy(), np.array([3, 4]), "gradient of the loop vars")


def test_while_loop_zero_steps_eager_in_a_block_never_calls_func():
    """The test_ops case of a loop of no step, eagerly: the final loop vars and their
    gradients are the reference's; func (which holds a Dense) runs for no step."""
    c = CASES["while_zero_steps"]
    calls = []

    def fn(F, cf, net, p, i, v):
        def func(i, v):
            calls.append(1)
            return [v * 2, net.dense(v)], [i + 1, v]
        steps, final = cf.while_loop(lambda i, v: i > 100, func, [i, v], max_iterations=3)
        assert type(steps) is list and steps == []         # as MXNet's eager loop
        return final

    net = make_model(fn, "ours", c.children, c.params)
    result = run(net, c.inputs)
    assert calls == []
    assert_close(result.flat, c.inputs, "final loop_vars")
    heads = [h.asnumpy() for h in head_grads([mx.nd.array(o) for o in result.flat])]
    assert_close(result.grads, heads, "loop_vars gradient")


@pytest.mark.parametrize("mode", MODES)
def test_while_loop_integer_counter(mode):
    """An int32 loop variable next to float ones: no gradient for it, the others still get one."""
    def fn(F, cf, net, p, i, v):
        return cf.while_loop(lambda i, v: i < 3, lambda i, v: (net.dense(v), [i + 1, v * 2]),
                             [i, v], max_iterations=4)
    inputs = [np.zeros(1, np.int32), arr(B, D)]
    net = make_model(fn, "ours", DENSE)
    set_mode(net, mode)
    ours = run(net, inputs)
    assert ours.flat[1].dtype == np.int32 and ours.flat[1][0] == 3
    assert_same_results(ours, run(make_model(fn, "python", DENSE), inputs), "int counter")


@pytest.mark.parametrize("mode", ["hybrid", "static"])
def test_inference_without_autograd(mode):
    """Outside autograd.record() (the usual inference path) outputs are the same."""
    for name in ("foreach_lists", "while_lists", "cond_nested_then", "nest_cond_in_foreach"):
        c = CASES[name]
        net = make_model(c.fn, "ours", c.children, c.params)
        set_mode(net, mode)
        out = flat(net(*[mx.nd.array(x) for x in c.inputs]))
        assert_close([o.asnumpy() for o in out], oracle(c, "python").flat, name)


# ---------------------------------------------------------------------------------------------
# numpy: one forward check per op written with numpy only, independent of MXNet's operators.

def np_params(net):
    return {name[len(net.prefix):]: p.data().asnumpy() for name, p in
            net.collect_params().items()}


def np_dense(p, x):
    return x @ p["dense0_weight"].T + p["dense0_bias"]


@pytest.mark.parametrize("mode", MODES)
def test_forward_matches_numpy(mode):
    outs = {}
    for name in ("cond_single_then", "cond_single_else", "foreach_single", "while_single"):
        c = CASES[name]
        net = make_model(c.fn, "ours", c.children, c.params)
        set_mode(net, mode)
        outs[name] = (run(net, c.inputs, grad=False).flat, np_params(net), c.inputs)

    for name in ("cond_single_then", "cond_single_else"):
        (got,), p, (x,) = outs[name]
        want = np_dense(p, x) * p["w"] if x.sum() > 0 else np.tanh(x) - 1
        assert_close(got, want, name)

    (got_outs, got_last), p, (x, h) = outs["foreach_single"]
    s, want = h, []
    for t in range(len(x)):
        out = np.tanh(np_dense(p, x[t]) + s)
        want.append(out)
        s = out * 0.5
    assert_close([got_outs, got_last], [np.stack(want), s], "foreach_single")

    (got_outs, got_last), p, (v,) = outs["while_single"]
    want = []
    while len(want) < 6 and v.max() < 5:
        want.append(np_dense(p, v))
        v = v + 1
    want += [np.zeros_like(want[0])] * (6 - len(want))
    assert_close([got_outs, got_last], [np.stack(want), v], "while_single")


@pytest.mark.parametrize("mode", ["hybrid", "static"])
def test_foreach_gradient_passed_straight_through(mode):
    """Regression: MXNet's CachedOp backward failed ('storage_type_num_unknown_nodes') on
    chained calls of a body whose input gradient is an output gradient passed as is (m + xt)."""
    def fn(F, cf, net, p, x, h, c):
        return cf.foreach(lambda xt, s: (xt * 2, [s[0] * 2, s[1] + xt]), x, [h, c])
    inputs = [arr(2, 2), arr(2), arr(2, seed=1)]
    net = make_model(fn)
    set_mode(net, mode)
    assert_same_results(run(net, inputs), run(make_model(fn, "python"), inputs), "foreach")


@pytest.mark.parametrize("length", [1, 10, 23])
@pytest.mark.parametrize("impl_data", ["2-D", "1-D"])
def test_unrolled_foreach_equals_mxnet_foreach(length, impl_data):
    """NOTE [unrolled steps]: a plain stateful body runs ten steps per call; chunks of 10, 10
    and 3 must give MXNet's _foreach values and gradients (parameters, data, states)."""
    rng = np.random.RandomState(length)

    class Scan(gluon.HybridBlock):
        def __init__(self, impl):
            super().__init__()
            self.impl = impl
            with self.name_scope():
                self.cell = gluon.rnn.LSTMCell(4, input_size=3)
                self.scale = self.params.get("scale", shape=(1,), init=mx.init.One())

        def hybrid_forward(self, F, seq, h, c, scale):
            foreach = gluon_cf.foreach if self.impl == "ours" else F.contrib.foreach
            if impl_data == "1-D":
                seq = F.broadcast_mul(seq.reshape((-1, 1, 1)), F.ones((1, 2, 3)))

            def body(x, states):
                out, states = self.cell(x, states)
                return F.broadcast_mul(out, scale), states
            outs, (h, c) = foreach(body, seq, [h, c])
            return outs, h, c

    shape = (length, 2, 3) if impl_data == "2-D" else (length,)
    args = [nd.array(rng.randn(*s)) for s in (shape, (2, 4), (2, 4))]
    results = {}
    for impl in ("ours", "mxnet"):
        mx.random.seed(0)
        net = Scan(impl)
        net.initialize(mx.init.Uniform(0.5))
        net.hybridize()
        xs = [a.copy() for a in args]
        for x in xs:
            x.attach_grad()
        with autograd.record():
            outs = net(*xs)
            loss = sum(((o * o).sum() for o in outs), nd.zeros(1))
        loss.backward()
        results[impl] = ([o.asnumpy() for o in outs] + [x.grad.asnumpy() for x in xs]
                         + [p.grad().asnumpy() for p in net.collect_params().values()])
    for ours, theirs in zip(results["ours"], results["mxnet"]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
