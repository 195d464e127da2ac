"""The errors of a node's shapes in our words: shapes known only at run time where MXNet needs
them all (DynamicShapeError), a 0 dimension MXNet reads as unknown (IncompleteShapeError)."""
import re
import threading

import mxnet as mx

from . import registry
from .errors import created_at

_unknown_dims = threading.local()      # {node name: [(input, shape)]}: see explain_unknown_dims


def names_node(text, name):
    """Whether MXNet's error ``text`` is about graph node ``name`` ("Error in operator
    <prefix>name: ..."; Gluon prefixes the block's name)."""
    return re.search(r"Error in operator \S*%s:" % re.escape(name), text) is not None


class IncompleteShapeError(ValueError, mx.MXNetError):
    """A gluon_cf node in a graph was given a shape with a 0 dimension: a zero-size array, or a
    dimension MXNet does not know yet (its placeholder 0, as in ``infer_shape_partial``). MXNet
    1.9.1's legacy shapes cannot tell the two apart; see ``explain_unknown_dims``."""


class DynamicShapeError(ValueError, mx.MXNetError):
    """A gluon_cf node whose output shape is known only at run time (``boolean_mask``, a
    ``while_loop`` of exact length, branches of different shapes) is held where MXNet needs
    static shapes: a Symbol executor (``bind``, ``simple_bind``) or a graph MXNet runs itself.
    Hybridized Gluon blocks never raise it: they run such graphs partitioned, each static piece
    still compiled, with shapes inferred just before it runs."""


def refuse_run_time_shapes(node, outs):
    outputs = ", ".join("output %d" % k for k, s in enumerate(outs) if registry.is_dynamic(s))
    return DynamicShapeError(
        "gluon_cf.%s (node %r): %s %s a shape known only at run time (it depends on values: "
        "boolean_mask, an exact-length while_loop, cond branches of different sizes), but this "
        "graph is run by MXNet, which needs every shape before it runs (a Symbol executor from "
        "bind/simple_bind). Run it in a hybridized Gluon block (e.g. "
        "gluon.SymbolBlock(outputs, inputs)), which runs such graphs partitioned"
        % (node.kind, node.spec.get("node") or "", outputs,
           "has" if outputs.count(",") == 0 else "have"))


def note_unknown_dims(node, in_shapes):
    """Remember which inputs of ``node`` MXNet gave us with a 0 (unknown) dimension."""
    partial = [(i, tuple(s)) for i, s in enumerate(in_shapes) if s and any(d <= 0 for d in s)]
    table = getattr(_unknown_dims, "value", None)
    if table is None:
        table = _unknown_dims.value = {}
    name = node.spec.get("node") or ""
    if partial:
        table[name] = (node, partial)
    else:
        table.pop(name, None)


def explain_unknown_dims(err, text):
    """MXNet's "Shape inconsistent" for a node given a shape with a 0 dimension, in our words.

    MXNet 1.x's legacy shapes read a 0 as "unknown": a zero-size array reaches a hybridized
    node as a partial shape (``(0, 2)`` as ``[-1, 2]``), like a dimension not known yet. Our
    shape rules need complete input shapes (handing MXNet back its partial shape crashes its
    Custom-op callback while exporting with dynamic axes), so MXNet reports "Shape inconsistent,
    Provided = [-1,2], inferred shape=[]", naming only the node. For zero-size arrays an error
    is right (MXNet's hybridized ``x + 1`` refuses them too); an unknown dimension reaches here
    only from a Symbol executor given a partial shape (``Symbol.infer_shape_partial`` is ours
    and passes unknown dimensions through, NOTE [run-time shapes] in ``graph/``). This error
    names the op, the node and the input, and says both."""
    table = getattr(_unknown_dims, "value", None) or {}
    for name, (node, partial) in table.items():
        if name and names_node(text, name):
            del table[name]
            inputs = ", ".join("input %d has shape %s" % (i, tuple(d if d > 0 else 0 for d in s))
                               for i, s in partial)
            return IncompleteShapeError(
                "gluon_cf.%s%s (node %r): %s, with a 0 dimension: a zero-size array, which a "
                "hybridized MXNet 1.9.1 graph cannot take (its legacy shapes read 0 as "
                "'unknown'; MXNet's own operators refuse them too), or a dimension not known "
                "yet, which a graph MXNet runs itself (a Symbol executor) needs. Skip the call "
                "for empty inputs or run the block without hybridize(); give complete shapes to "
                "bind/simple_bind"
                % (node.kind, created_at(node), name, inputs))
    return err
