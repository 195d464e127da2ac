"""MXNet's symbolic API (``mx.sym``, ``bind``, ``simple_bind``, ``backward``) with bodies that
ignore some of their inputs, states or captured values: outputs and gradients equal MXNet's own
``mx.sym.contrib`` ops, the oracle (issue 10, item 5)."""
import mxnet as mx
import numpy as np
import pytest

import gluon_cf

RTOL = 1e-5


def _cases(ops):
    x, s0, s1, w = (mx.sym.var(n) for n in ("x", "s0", "s1", "w"))
    cases = {}
    # foreach: state s1 passed through untouched; captured w used by the body.
    outs, st = ops.foreach(lambda d, s: (d * w + s[0], [s[0] + d, s[1]]), x, [s0, s1])
    cases["foreach_passes_a_state_through"] = mx.sym.Group([outs, st[0], st[1]])
    # foreach: only the outputs are used downstream (states dangle).
    outs, st = ops.foreach(lambda d, s: (d * 2 + s[0], [s[0] * d, s[1] + 1]), x, [s0, s1])
    cases["foreach_only_outputs_used"] = outs
    # cond: each branch reads a different input.
    cases["cond_branches_read_different_inputs"] = ops.cond(
        mx.sym.sum(s0) > 0, lambda: s0 * w, lambda: s1 + 1)
    # cond: the pred's input is not read by any branch.
    cases["cond_pred_input_unused"] = ops.cond(mx.sym.sum(x) > 100, lambda: s0 * 2,
                                               lambda: s1 * w)
    # while_loop: cond reads one var, func ignores another (passes it through).
    outs, final = ops.while_loop(lambda i, a, b: i < 3,
                                 lambda i, a, b: (a * w, [i + 1, a * 2, b]),
                                 [mx.sym.sum(s0) * 0, s0, s1], max_iterations=4)
    cases["while_passes_a_var_through"] = mx.sym.Group([final[1], final[2]])
    return cases


ARGS = {"x": (3, 2), "s0": (2,), "s1": (2,), "w": (2,)}
NAMES = sorted(_cases(gluon_cf))


def _values(seed):
    rng = np.random.RandomState(seed)
    return {k: mx.nd.array(rng.uniform(0.5, 1.5, shape)) for k, shape in ARGS.items()}


def _run(sym, how):
    args = {k: v for k, v in _values(0).items() if k in sym.list_arguments()}
    if how == "bind":
        grads = {k: mx.nd.zeros_like(v) for k, v in args.items()}
        ex = sym.bind(mx.cpu(), args, args_grad=grads)
    else:
        ex = sym.simple_bind(mx.cpu(), **{k: v.shape for k, v in args.items()})
        for k, v in args.items():
            ex.arg_dict[k][:] = v
        grads = ex.grad_dict
    ex.forward(is_train=True)
    heads = [mx.nd.array(np.random.RandomState(1).uniform(-1, 1, o.shape)) for o in ex.outputs]
    ex.backward(heads)
    return [o.asnumpy() for o in ex.outputs], {k: g.asnumpy() for k, g in grads.items()}


@pytest.mark.parametrize("how", ["bind", "simple_bind"])
@pytest.mark.parametrize("name", NAMES)
def test_symbolic_bind_backward_matches_mxnet(name, how):
    ours = _run(_cases(gluon_cf)[name], how)
    try:
        oracle = _run(_cases(mx.sym.contrib)[name], how)
    except RuntimeError:
        # MXNet's simple_bind cannot infer the shapes of its own ops' backward here (gluon_cf's
        # can): the same graph bound with bind() is the oracle.
        assert how == "simple_bind"
        oracle = _run(_cases(mx.sym.contrib)[name], "bind")
    for got, expected in zip(ours[0], oracle[0]):
        np.testing.assert_allclose(got[:len(expected)], expected, rtol=RTOL)
    assert sorted(ours[1]) == sorted(oracle[1])
    for k in oracle[1]:
        np.testing.assert_allclose(ours[1][k], oracle[1][k], rtol=RTOL, atol=1e-6, err_msg=k)


def test_infer_shape_partial_and_grad_of_ignored_state():
    """The ignored state's gradient is its head gradient passed through (not missing, not
    garbage); infer_shape_partial answers for a graph with unknown inputs."""
    sym = _cases(gluon_cf)["foreach_passes_a_state_through"]
    args, outs, _ = sym.infer_shape_partial(x=(3, 2))
    assert outs[0] in ([], (), None) or len(outs[0]) == 0 or outs[0] == (3, 2)
    out, grads = _run(sym, "bind")
    heads = [np.random.RandomState(1).uniform(-1, 1, o.shape) for o in out]
    np.testing.assert_allclose(grads["s1"], heads[2], rtol=RTOL)
