"""Client programs of ``test_client_code28r.py`` (a review of round 28's variables of one name;
``client_programs28.py``'s docstring says what client programs are): symbolic ``cond`` branches
reading two outer variables of one name, which MXNet 1.9.1's ``cond`` binds as one argument,
the last of them (NOTE [variables of one name] in gluon_cf/tracing.py).
"""
import mxnet as mx
import numpy as np

from mxnet_suite.client_programs28 import _bind, _eager, _normal, registrar

PROGRAMS = {}
# program name: MXNet's answer where its own cond cannot give it (each says why)
ORACLES = {}
ARGS = {"x": np.abs(_normal(3, 2)), "w": _normal(2, seed=2)}

program = registrar(PROGRAMS, ORACLES)


def _two_ws_in_a_branch(sign, plain=False):
    """``x * w + 2x * w`` of two outer variables ``w`` in a branch, plus the last ``w`` outside
    the cond; ``plain``: the graph of the taken branch, one ``w``, no cond (MXNet's own cond
    drops one use's gradient of an argument a branch reads twice: 11.7 for 25.5)."""
    x, w2 = mx.sym.var("x"), mx.sym.var("w")
    w1 = w2 if plain else mx.sym.var("w")
    then = (lambda: mx.sym.broadcast_mul(x, w1) + mx.sym.broadcast_mul(x * 2, w2))
    if plain:
        out = then() if sign > 0 else x - 1
    else:
        out = mx.sym.contrib.cond(mx.sym.sum(x) > 0, then, lambda: x - 1)
    out = mx.sym.broadcast_add(out, w2)
    args = dict(ARGS, x=sign * ARGS["x"])
    return [out.list_arguments()] + _bind(out, args, grad_req="add")


@program(oracle=lambda: _two_ws_in_a_branch(1, plain=True))
def sym_cond_two_variables_of_one_name_the_last_also_outside():
    """(gluon_cf's cond read the first: the graph held two arguments "w", which ``bind``
    refused with "Duplicate names detected", where MXNet's binds.)"""
    return _two_ws_in_a_branch(1)


@program(oracle=lambda: _two_ws_in_a_branch(-1, plain=True))
def sym_cond_two_variables_of_one_name_else_taken():
    return _two_ws_in_a_branch(-1)


def _attributes(with_else_variable):
    """Which variable ``w`` is the argument: its attributes (``attr_dict``) and what an
    initializer reading them, as ``Module.init_params`` does, gives it."""
    x = mx.sym.var("x")
    first = mx.sym.var("w", init=mx.init.One(), lr_mult=0.0)
    last = mx.sym.var("w", init=mx.init.Constant(3.0), shape=(2,))
    other = mx.sym.var("w", init=mx.init.Constant(5.0), wd_mult=2.0)
    out = mx.sym.contrib.cond(
        mx.sym.sum(x) > 0,
        lambda: mx.sym.broadcast_mul(x, first) + mx.sym.broadcast_mul(x * 2, last),
        lambda: mx.sym.broadcast_mul(x, other) if with_else_variable else x - 1)
    attrs = out.attr_dict()["w"]
    weight = mx.nd.zeros((2,))
    mx.init.Uniform()(mx.init.InitDesc("w", attrs), weight)
    return [out.list_arguments(), out.list_auxiliary_states(),
            {k: v for k, v in attrs.items() if not k.startswith("__subgraph")}, weight]


@program
def sym_cond_two_variables_of_one_name_attributes():
    """(gluon_cf's cond took the first's: ``lr_mult`` 0 and initialised to ones, where
    MXNet's is the last, initialised to threes.)"""
    return _attributes(with_else_variable=False)


@program
def sym_cond_variables_of_one_name_in_both_branches_attributes():
    """Of several graphs the first graph's (the then branch's last): as before."""
    return _attributes(with_else_variable=True)


def _two_values_named_fc(eager):
    """A while_loop whose cond reads one value computed by an operator named "fc" and whose
    func reads another (MXNet's symbolic while_loop fails in backward when cond reads a value
    of the outer graph: the oracle is its eager one, which leaves the rows of steps not
    run unwritten: the loop runs max_iterations steps)."""
    def run(i, s, F):
        first, second = F.identity(s, name="fc"), F.identity(s * 2, name="fc")
        outs, states = F.contrib.while_loop(lambda i: i < first, lambda i: (i * second, [i + 1]),
                                            [i], max_iterations=3)
        return [outs, states[0]]
    i, s = np.array([0.5], "float32"), np.array([3.0], "float32")
    if eager:
        return _eager(lambda *a: run(*a, F=mx.nd), mx.nd.array(i), mx.nd.array(s))
    i_, s_ = mx.sym.var("i"), mx.sym.var("s")
    return _bind(mx.sym.Group(run(i_, s_, F=mx.sym)), {"i": i, "s": s})


@program(oracle=lambda: _two_values_named_fc(eager=True))
def sym_while_cond_and_func_read_two_values_of_one_name():
    """(gluon_cf refused them as two different outer values of one name.)"""
    return _two_values_named_fc(eager=False)
