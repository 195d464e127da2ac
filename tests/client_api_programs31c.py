"""Programs for tests/test_client_api_oracle31c.py: each builds a Symbol from a namespace of
control-flow ops, MXNet 1.9.1's own (``mx.sym.contrib``) or gluon_cf's, so that one program
runs on both and MXNet's is the oracle. Inputs: ``{name: shape}``; ``params``: the names
Module fit trains."""
import types

import mxnet as mx

import gluon_cf

MXNET = types.SimpleNamespace(cond=mx.sym.contrib.cond, foreach=mx.sym.contrib.foreach,
                              while_loop=mx.sym.contrib.while_loop)
MXNET_EAGER = types.SimpleNamespace(cond=mx.nd.contrib.cond, foreach=mx.nd.contrib.foreach,
                                    while_loop=mx.nd.contrib.while_loop)
GLUON_CF = types.SimpleNamespace(cond=gluon_cf.cond, foreach=gluon_cf.foreach,
                                 while_loop=gluon_cf.while_loop)


def _first(out):
    return out[0] if isinstance(out, (list, tuple)) else out


def cond_pair(F, C, a, b):
    return _first(C.cond(F.sum(a) > F.sum(b), lambda: a * b + 1,
                         lambda: F.tanh(a - b)))


def cond_free(F, C, a, w):
    return _first(C.cond(F.sum(a) < 0, lambda: F.FullyConnected(a, w, num_hidden=4, no_bias=True),
                         lambda: F.FullyConnected(a * 2, w, num_hidden=4, no_bias=True) - 1))


def foreach_rnn(F, C, data, h, w):
    def step(x, states):
        new = F.tanh(F.FullyConnected(x, w, num_hidden=3, no_bias=True) + states[0])
        return new * 2, [new]
    outs, states = C.foreach(step, data, [h])
    return ([outs, states[0]])


def while_count(F, C, a, w):
    def cond(i, s):
        return i < 3

    def func(i, s):
        new = F.FullyConnected(s, w, num_hidden=3, no_bias=True) * 0.5 + 1
        return new, [i + 1, new]
    outs, states = C.while_loop(cond, func, [F.zeros((1,)), a], max_iterations=4)
    return ([outs, states[1]])


def foreach_of_cond(F, C, data, h):
    def step(x, states):
        s = states[0]
        out = _first(C.cond(F.sum(x) > 0, lambda: x * s, lambda: x + s))
        return out, [out + s]
    outs, states = C.foreach(step, data, [h])
    return ([outs, states[0]])


def cond_of_foreach(F, C, data, h):
    def then():
        outs, states = C.foreach(lambda x, s: (x + s[0], [s[0] * 2]), data, [h])
        return outs
    return _first(C.cond(F.sum(h) > 0, then, lambda: data * 3))


def while_of_cond(F, C, a, b):
    def func(i, s):
        new = _first(C.cond(F.sum(s) > 2, lambda: s * 0.5, lambda: s + b))
        return new, [i + 1, new]
    outs, states = C.while_loop(lambda i, s: i < 4, func, [F.zeros((1,)), a],
                                max_iterations=5)
    return ([outs, states[1]])


def foreach_of_foreach(F, C, data, h):
    def outer(row, states):
        inner, last = C.foreach(lambda x, s: (x * s[0], [s[0] + x]), row, [states[0]])
        return inner, [last[0]]
    outs, states = C.foreach(outer, data, [h])
    return ([outs, states[0]])


def dense_rnn(F, C, data, h, w, b):
    """A trainable program (Module fit): a foreach over a FullyConnected cell, then a cond."""
    def step(x, states):
        new = F.tanh(F.FullyConnected(x, w, b, num_hidden=3) + states[0])
        return new, [new]
    outs, states = C.foreach(step, data, [h])
    last = states[0]
    return _first(C.cond(F.sum(last) > 0, lambda: last * 2, lambda: last - 1))


# name: (program, {input: shape}, parameters for Module fit)
PROGRAMS = {
    "cond_pair": (cond_pair, {"a": (2, 3), "b": (2, 3)}, ()),
    "cond_free": (cond_free, {"a": (2, 3), "w": (4, 3)}, ("w",)),
    "foreach_rnn": (foreach_rnn, {"data": (4, 2, 3), "h": (2, 3), "w": (3, 3)}, ("w",)),
    "while_count": (while_count, {"a": (2, 3), "w": (3, 3)}, ("w",)),
    "foreach_of_cond": (foreach_of_cond, {"data": (3, 2, 3), "h": (2, 3)}, ()),
    "cond_of_foreach": (cond_of_foreach, {"data": (3, 2), "h": (2,)}, ()),
    "while_of_cond": (while_of_cond, {"a": (2, 2), "b": (2, 2)}, ()),
    "foreach_of_foreach": (foreach_of_foreach, {"data": (2, 3, 2), "h": (2,)}, ()),
    "dense_rnn": (dense_rnn, {"data": (3, 2, 4), "h": (2, 3), "w": (3, 4), "b": (3,)},
                  ("w", "b")),
}


def build(name, C):
    """The program ``name`` on ops ``C``: its Symbol, its inputs' shapes."""
    program, shapes, _ = PROGRAMS[name]
    out = program(mx.sym, C, *[mx.sym.var(n) for n in shapes])
    return (mx.sym.Group(list(out)) if isinstance(out, (tuple, list)) else out), shapes


def run_eager(name, arrays):
    """The program ``name`` run eagerly on MXNet's own ops (``arrays`` in its inputs' order)."""
    out = PROGRAMS[name][0](mx.nd, MXNET_EAGER, *arrays)
    return list(out) if isinstance(out, (tuple, list)) else [out]
