"""Gluon's deferred initialisation of a block holding gluon_cf nodes: the parameters' shapes
from ``infer_shape_partial`` (NOTE [unknown rank]), gluon_cf's errors through it as they are
(NOTE [errors through deferred initialisation]). Patches ``HybridBlock``'s methods."""
import json
import warnings
from typing import Dict, List

from mxnet.gluon import block as _block

from . import registry
from .errors import where_created
from .graph import decode, has_gluon_cf_nodes
from .operators import DYNAMIC_SHAPE_OPS, SOURCE_ATTR, user_location


# NOTE [unknown rank]
#     MXNet's ``Symbol.infer_shape`` answers None (with its warning) for a graph with an output
#     of unknown rank, a ``cond`` whose branches return different ranks, and so does ours;
#     ``infer_shape_partial`` gives () for it (MXNet's legacy "unknown"). Gluon's deferred
#     initialisation asks ``infer_shape`` for the parameters' shapes, so MXNet's own cond fails
#     there even when every parameter's shape is known; for a graph holding gluon_cf nodes the
#     parameters' shapes are taken from ``infer_shape_partial`` when all of them are complete.


def _infer_attrs(self, infer_fn, attr, *args):
    """``HybridBlock._infer_attrs``: NOTE [unknown rank]."""
    inputs, out = self._get_graph(*args)
    if infer_fn == "infer_shape" and has_gluon_cf_nodes(json.loads(out.tojson())):
        given = [a for a in _block._flatten(args, "input")[0] if a is not None]
        used = set(out.list_inputs())     # (an input the graph does not read: no shape to give;
        arg_shapes, _, aux_shapes = out.infer_shape_partial(   # MXNet's own fails on its name)
            **{i.name: a.shape for i, a in zip(inputs, given) if i.name in used})
        shapes = dict(zip(out.list_arguments(), arg_shapes))
        shapes.update(zip(out.list_auxiliary_states(), aux_shapes))
        params = [p for p in self.collect_params().values() if p.name in shapes]
        if all(registry.is_complete(shapes[p.name]) for p in params):
            for param in params:
                param.shape = shapes[param.name]
            return None
        try:
            return _mxnet_infer_attrs(self, infer_fn, attr, inputs, out, *args)
        except (ValueError, IndexError):   # (MXNet's IndexError: a warning it did not catch)
            undecided = [(p.name, shapes[p.name]) for p in params
                         if not registry.is_complete(shapes[p.name])]
            given_shapes = {i.name: a.shape for i, a in zip(inputs, given) if i.name in used}
            raise ValueError(_undecided(undecided, _causes(out, given_shapes, undecided),
                                        isinstance(self, _block.SymbolBlock))) from None
    return _mxnet_infer_attrs(self, infer_fn, attr, inputs, out, *args)


def _undecided(params, causes, symbol_block):
    """What to say of ``params`` (``[(name, shape known in part)]``) whose shapes the graph
    of a block holding gluon_cf nodes does not decide (NOTE [unknown rank]), ``causes``: what
    leaves each undecided (``_causes``)."""
    where = user_location()
    grouped: Dict[str, List[str]] = {}   # {cause: [parameter]}, in the parameters' order
    for name, shape in params:
        grouped.setdefault(causes.get(name) or "its layer's input has a shape not decided",
                           []).append("%r of shape %s" % (name, shape))
    return ("%s: " % where if where else "") + "; ".join(
        "parameter%s %s after inferring the block's graph (0: unknown): %s" % (
            "s" if len(names) > 1 else "", ", ".join(names), cause)
        for cause, names in grouped.items()) + (
        ". A SymbolBlock runs its graph: give such a parameter its shape (load it with its "
        "values, or set param.shape) or make the size fixed (a sum, a slice)" if symbol_block
        else ". Eagerly the layer takes the size of its first input; hybridized, give it "
        "(Dense(in_units=...)) or make the size fixed (a sum, a slice)")


def _causes(out, given, params):
    """``{parameter: what leaves its shape undecided}`` for ``params`` of graph ``out`` given
    input shapes ``given``: the first node before the parameter's layer whose output's shape
    is not decided though its inputs' are (a gluon_cf node, a dynamic-shape operator), or an
    input not given."""
    internals = out.get_internals()
    try:
        _, out_shapes, _ = internals.infer_shape_partial(**given)
    except Exception:   # noqa: BLE001 - the generic message then
        return {}
    complete: Dict[str, bool] = {}
    for name, shape in zip(internals.list_outputs(), out_shapes):
        node = name if name in given or not name.rsplit("_", 1)[-1].startswith("output") \
            else name.rsplit("_", 1)[0]
        complete[node] = complete.get(node, True) and registry.is_complete(shape)
    nodes = json.loads(out.tojson())["nodes"]
    causes = {}
    for name, _ in params:
        layer = next((n for n in nodes if n["op"] != "null" and
                      any(nodes[i[0]]["name"] == name for i in n["inputs"])), None)
        if layer is not None and layer["inputs"]:
            cause = _first_undecided(nodes, nodes[layer["inputs"][0][0]], complete, given)
            if cause is not None:
                causes[name] = "read by %s (node %r) whose input is %s" % (
                    layer["op"], layer["name"], cause)
    return causes


def _first_undecided(nodes, node, complete, given):
    seen = set()
    while node["name"] not in seen and not complete.get(node["name"], True):
        seen.add(node["name"])
        if node["op"] == "null":
            return ("graph input %r, not given" % node["name"] if node["name"] not in given
                    else "graph input %r, of shape %s" % (node["name"], given[node["name"]]))
        before = [nodes[i[0]] for i in node["inputs"]]
        pending = [n for n in before if not complete.get(n["name"], True) and n["op"] != "null"
                   or n["op"] == "null" and n["name"] not in given and
                   not complete.get(n["name"], True)]
        if not pending or node["op"] in DYNAMIC_SHAPE_OPS:
            return _what_node(node)
        node = pending[0]
    return None


def _what_node(node):
    kind = registry.kind_of(node)
    at = _at(node)
    if kind is not None:
        return ("the output of gluon_cf.%s%s (node %r), of a size known only at run time (%s)"
                % (kind, at, node["name"], _RUN_TIME_SIZES.get(kind, "its values decide it")))
    if node["op"] in DYNAMIC_SHAPE_OPS:
        return ("the output of %s%s (node %r), whose size depends on its values"
                % (node["op"], at, node["name"]))
    return "the output of %s (node %r), of a shape not decided" % (node["op"], node["name"])


def _at(node):
    """`` at file:line`` where the user made JSON ``node`` (or "")."""
    where = node.get("attrs", {}).get(SOURCE_ATTR)
    if where is None and registry.kind_of(node) is not None:
        try:
            where = where_created(decode(registry.kind_of(node), node["attrs"]["spec"]))
        except Exception:   # noqa: BLE001 - a message without the line then
            where = None
    return " at %s" % where if where else ""


_RUN_TIME_SIZES = {"cond": "its branches return values of different sizes, or read one",
                   "while_loop": "a loop of exact length, or a body reading one",
                   "foreach": "its data or body read a value of run-time size",
                   "recursion": "its result's size changes with the tree"}


def _mxnet_infer_attrs(self, infer_fn, attr, inputs, out, *args):
    used = set(out.list_inputs())
    if used >= set(i.name for i in inputs) | set(self.collect_params().keys()):
        return _original_infer_attrs(self, infer_fn, attr, *args)
    # MXNet's own, but an input the graph does not read gets no shape or dtype to give (MXNet
    # failed on its name, "InferShapeKeyword argument name data1 not found"), and a parameter
    # it does not read stays deferred, as eagerly, until a graph reads it (MXNet's KeyError)
    given = [a for a in _block._flatten(args, "input")[0] if a is not None]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")     # (a user's "ignore" would leave none to raise)
        arg_attrs, _, aux_attrs = getattr(out, infer_fn)(
            **{i.name: getattr(a, attr) for i, a in zip(inputs, given) if i.name in used})
        if arg_attrs is None:
            raise ValueError(caught[0].message)
    found = dict(zip(out.list_arguments(), arg_attrs))
    found.update(zip(out.list_auxiliary_states(), aux_attrs))
    for param in self.collect_params().values():
        if param.name in found:
            setattr(param, attr, found[param.name])
    return None


def _deferred_infer_shape(self, *args):
    """``HybridBlock._deferred_infer_shape``: NOTE [errors through deferred initialisation]."""
    # NOTE [errors through deferred initialisation]
    #     A block with a deferred parameter (a Dense without ``in_units``: gluonnlp's layers
    #     make them all so) infers its shapes from its graph on its first call, and MXNet
    #     wraps whatever that raises in "ValueError: Deferred initialization failed because
    #     shape cannot be inferred. ...". An error of gluon_cf's own there (an operator of a
    #     body refusing its shapes, an autograph refusal) already names the user's line and
    #     what to change, and is of the type the same block without deferred parameters
    #     raises: it reaches the user as it is. MXNet's own errors keep MXNet's wrapping.
    try:
        self.infer_shape(*args)
    except Exception as err:
        if type(err).__module__.partition(".")[0] == "gluon_cf":
            raise
        raise ValueError("Deferred initialization failed because shape cannot be inferred. "
                         "{}".format(err))


_original_infer_attrs = _block.HybridBlock._infer_attrs
_block.HybridBlock._deferred_infer_shape = _deferred_infer_shape
_block.HybridBlock._infer_attrs = _infer_attrs
