"""Client programs of ``test_client_code28.py``, continued from ``client_programs28.py`` (its
docstring says what they are): symbolic bodies reading variables of one name, or outer values
also given as their states or read by their pred.
"""
import mxnet as mx
import numpy as np
from mxnet import autograd, nd

from mxnet_suite.client_programs28 import _bind, _eager, _normal, program


# Variables of one name: one argument (NOTE [variables of one name] in gluon_cf/tracing.py)
ONE_NAME_ARGS = {"x": _normal(3, 2), "s": _normal(2, seed=1), "w": _normal(2, seed=2)}


def _foreach_of_w(first_w, second_w):
    x, s = mx.sym.var("x"), mx.sym.var("s")
    outs, states = mx.sym.contrib.foreach(
        lambda d, st: (d * first_w(), [st[0] * second_w() + d]), x, [s])
    return _bind(mx.sym.Group([outs, states[0]]), ONE_NAME_ARGS)


@program(oracle=lambda: _foreach_of_w(*[lambda w=mx.sym.var("w"): w] * 2))
def sym_foreach_two_variables_of_one_name():
    """(MXNet's symbolic foreach refuses them: "The inputs of the subgraph don't have unique
    names"; the oracle is one variable read twice.)"""
    w1, w2 = mx.sym.var("w"), mx.sym.var("w")
    return _foreach_of_w(lambda: w1, lambda: w2)


@program(oracle=lambda: _foreach_of_w(*[lambda w=mx.sym.var("w"): w] * 2))
def sym_foreach_body_variable_named_as_an_outer_one():
    w = mx.sym.var("w")
    return _foreach_of_w(lambda: mx.sym.var("w"), lambda: w)


@program
def sym_cond_branch_variable_named_as_an_outer_one():
    a, w = mx.sym.var("x"), mx.sym.var("w")
    out = mx.sym.contrib.cond(mx.sym.sum(a) > 0,
                              lambda: mx.sym.broadcast_mul(a, mx.sym.var("w")),
                              lambda: mx.sym.broadcast_sub(a, w))
    x = np.abs(ONE_NAME_ARGS["x"])
    return (_bind(out, {"x": x, "w": ONE_NAME_ARGS["w"]})
            + _bind(out, {"x": -x, "w": ONE_NAME_ARGS["w"]}))


def _while_of_w_eager():
    """(MXNet's symbolic while_loop fails in backward, as in ``_count_eager``.)"""
    def run(i, w):
        outs, states = nd.contrib.while_loop(lambda i: i < w, lambda i: (i * w, [i + 1]), [i],
                                             max_iterations=3)
        return [outs, states[0]]
    return _eager(run, nd.array([0]), nd.array([3]))


@program(oracle=_while_of_w_eager)
def sym_while_cond_variable_named_as_a_func_one():
    i, w = mx.sym.var("i"), mx.sym.var("w")
    outs, states = mx.sym.contrib.while_loop(lambda i: i < mx.sym.var("w"),
                                             lambda i: (i * w, [i + 1]), [i], max_iterations=3)
    return _bind(mx.sym.Group([outs, states[0]]), {"i": np.array([0], "float32"),
                                                   "w": np.array([3], "float32")})


@program
def error_foreach_two_computed_values_of_one_name():
    x, s = mx.sym.var("x"), mx.sym.var("s")
    computed = mx.sym.identity(s, name="fc")   # (both outputs are named "fc_output")
    other = mx.sym.identity(s * 2, name="fc")
    return list(mx.sym.contrib.foreach(lambda d, st: (d * computed, [st[0] + d * other]), x,
                                       [s]))


def _state_read_by_closure(eager):
    """The initial state also read by the body's closure; ``eager``: by MXNet's eager foreach
    (its symbolic one fails in backward: "storage_type_num_unknown_nodes")."""
    if not eager:
        x, s = mx.sym.var("x"), mx.sym.var("s")
        outs, states = mx.sym.contrib.foreach(lambda d, st: (d * s, [st[0] + d * s]), x, [s])
        return _bind(mx.sym.Group([outs, states[0]]), ONE_NAME_ARGS_XS)
    x, s = nd.array(ONE_NAME_ARGS_XS["x"]), nd.array(ONE_NAME_ARGS_XS["s"])
    for a in (s, x):
        a.attach_grad()
    with autograd.record():
        outs, states = nd.contrib.foreach(lambda d, st: (d * s, [st[0] + d * s]), x, [s])
        loss = (outs * 1.5).sum() + (states[0] * 2.5).sum()
    loss.backward()
    return [outs, states[0], s.grad, x.grad]


@program(oracle=lambda: _state_read_by_closure(eager=True))
def sym_foreach_state_also_read_by_closure():
    return _state_read_by_closure(eager=False)


def _shared_outer_value(eager):
    """A cond's pred and branches reading one outer value; ``eager``: MXNet's eager cond (the
    gradient of its symbolic one holds an unwritten element, ~1e28)."""
    if not eager:
        x = mx.sym.var("x")
        y = x * 2
        return _bind(mx.sym.contrib.cond(mx.sym.sum(y) > 0, lambda: y * 3, lambda: y - x),
                     {"x": ONE_NAME_ARGS_XS["x"]})
    x = nd.array(ONE_NAME_ARGS_XS["x"])
    x.attach_grad()
    with autograd.record():
        y = x * 2
        out = nd.contrib.cond(nd.sum(y) > 0, lambda: y * 3, lambda: y - x)
        loss = (out * 1.5).sum()
    loss.backward()
    return [out, x.grad]


@program(oracle=lambda: _shared_outer_value(eager=True))
def sym_cond_pred_and_branch_read_one_outer_value():
    return _shared_outer_value(eager=False)


ONE_NAME_ARGS_XS = {"x": np.abs(_normal(3, 2)), "s": _normal(2, seed=1)}
