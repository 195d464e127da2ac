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


class ScalarInputError(ValueError, mx.MXNetError):
    """A gluon_cf cond in a graph MXNet runs was given a 0-d predicate (shape ()), which MXNet
    1.9.1's legacy shapes read as a shape not known (NOTE [a 0-d predicate of a node])."""


# NOTE [a 0-d predicate of a node]
#     Outside numpy-shape mode a 0-d NDArray (``nd.array(1).reshape(())``) has a shape MXNet
#     reads as "unknown". MXNet 1.9.1's own ``F.contrib.cond`` given one as its predicate
#     always fails, at the call of a hybridized block and at a Symbol executor's forward (its
#     ``cond_pred`` subgraph's ``_copy``: "Operator _copy inferring shapes failed"); a gluon_cf
#     cond read it and gave a value ([6.]). So a cond node MXNet creates with a 0-d predicate
#     refuses at once, naming the op, the node and the user's line: at the block's call (a
#     CachedOp creates its operators there) and at bind for a Symbol executor (one step
#     before MXNet's forward). Other 0-d inputs are not refused: MXNet's own loops run a
#     body on them where its operators take them (a foreach's 0-d state added to a 0-d row:
#     [[3], [5], [9]] from both), and where an operator refuses one, it fails as MXNet's
#     does, naming the operator and the user's line. Eagerly both libraries read a 0-d
#     predicate (``asscalar``).
def refuse_scalar_inputs(node, in_shapes):
    """The error of a cond ``node`` created by MXNet with a 0-d predicate (legacy shapes), or
    None (NOTE [a 0-d predicate of a node])."""
    if mx.util.is_np_shape() or node.kind != "cond" or not in_shapes or len(in_shapes[0]):
        return None
    return ScalarInputError(
        "gluon_cf.cond%s (node %r): its predicate is a 0-d array (shape ()), which MXNet 1.9.1 "
        "reads as a shape not known outside numpy-shape mode (MXNet's own F.contrib.cond "
        "refuses it too). Give it shape (1,) (pred.reshape((1,)))"
        % (created_at(node), node.spec.get("node") or ""))
