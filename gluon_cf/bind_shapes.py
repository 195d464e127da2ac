"""``Symbol.simple_bind`` and ``Executor.reshape`` of a graph holding gluon_cf nodes refuse an
argument whose shape the given shapes do not decide, as MXNet refuses it for its own graphs.

NOTE [arguments of undecided shape]
    MXNet's shape pass calls a gluon_cf node's shape callback (a Custom operator's) with an
    input of unknown shape as with any; the callback answers () for what it cannot infer, the
    only "unknown" a Python Custom operator can write back (node.py). MXNet 1.9.1 reads that
    () as a known shape of no dimensions (a scalar): ``simple_bind(x=..., h=...)`` of a loop
    whose body reads a ``w`` nothing else shapes bound ``w`` as a 0-d array, and a reshaped
    executor (``partial_shaping=True``) did too, where MXNet's own ``foreach`` (and any graph
    of its own operators) refuses: simple_bind raises RuntimeError ("InferShape pass cannot
    decide shapes for the following arguments"), reshape MXNetError ("Shape is unknown").
    An argument or auxiliary state bound 0-d is never what the user gave (MXNet's legacy
    shapes read a given () as "unknown" too), so an executor holding one is refused here, with
    the arguments named, the error types MXNet raises.
"""
import mxnet as mx

from .graph import holds_gluon_cf_nodes
from .node import IncompleteShapeError

_original_simple_bind = mx.sym.Symbol.simple_bind
_original_reshape = mx.executor.Executor.reshape


def _undecided(executor):
    """Names of the arguments and auxiliary states ``executor`` bound 0-d, if its symbol
    holds gluon_cf nodes (NOTE [arguments of undecided shape])."""
    symbol = executor._symbol
    names = symbol.list_arguments() + symbol.list_auxiliary_states()
    arrays = list(executor.arg_arrays) + list(executor.aux_arrays)
    undecided = [n for n, a in zip(names, arrays) if a is not None and a.shape == ()]
    if not undecided or not holds_gluon_cf_nodes(symbol.tojson()):
        return []
    return undecided


def _message(undecided):
    return ("InferShape pass cannot decide shapes for the following arguments: %s (read "
            "inside gluon_cf control-flow nodes, and shaped by nothing given). Please consider "
            "providing them as inputs" % ", ".join(undecided))


def _simple_bind(self, *args, **kwargs):
    executor = _original_simple_bind(self, *args, **kwargs)
    undecided = _undecided(executor)
    if undecided:
        given = "".join("%s: %s\n" % (k, v) for k, v in kwargs.items()
                        if isinstance(v, tuple))
        raise RuntimeError("simple_bind error. Arguments:\n%s%s" % (given, _message(undecided)))
    return executor


def _reshape(self, *args, **kwargs):
    executor = _original_reshape(self, *args, **kwargs)
    undecided = _undecided(executor)
    if undecided:
        raise IncompleteShapeError("Executor.reshape: " + _message(undecided) + " to reshape")
    return executor


_simple_bind.__doc__ = _original_simple_bind.__doc__
_reshape.__doc__ = _original_reshape.__doc__
mx.sym.Symbol.simple_bind = _simple_bind
mx.executor.Executor.reshape = _reshape
