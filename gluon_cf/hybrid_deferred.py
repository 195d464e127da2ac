"""Gluon's deferred initialisation of a block holding gluon_cf nodes: the parameters' shapes
from ``infer_shape_partial`` (NOTE [unknown rank]), gluon_cf's errors through it as they are
(NOTE [errors through deferred initialisation]). Patches ``HybridBlock``'s methods."""
import json
import warnings

from mxnet.gluon import block as _block

from . import registry
from .graph import has_gluon_cf_nodes
from .operators import user_location


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
            raise ValueError(_undecided([(p.name, shapes[p.name]) for p in params if
                                              not registry.is_complete(shapes[p.name])])) from None
    return _mxnet_infer_attrs(self, infer_fn, attr, inputs, out, *args)


def _undecided(params):
    """What to say of ``params`` (``[(name, shape known in part)]``) whose shapes the graph
    of a block holding gluon_cf nodes does not decide (NOTE [unknown rank])."""
    where = user_location()
    return ("%s: " % where if where else "") + "; ".join(
        "parameter %r has shape %s after inferring the block's graph (0: unknown)" % (
            name, shape)
        for name, shape in params) + (
        ": the input of its layer has a size known only at run time (cond branches of "
        "different sizes, a recursive function whose result's size changes with the tree, "
        "boolean_mask), or not given. Eagerly the layer takes the size of its first input; "
        "hybridized, give it (Dense(in_units=...)) or make the size one (a sum, a slice)")


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
