"""Shape inference of graphs whose shapes may be known only at run time (NOTE [run-time
shapes]): MXNet's own partial inference of the ordinary operators (:func:`infer_by_mxnet`), which
outputs depend on a run-time shape (:func:`dynamic_outputs`), what is known of the output of a
dynamic-shape operator, and how a walk records what it learns of each entry (:func:`learn`).
The partitioned execution walks graphs holding gluon_cf nodes with these.
"""
from typing import Dict, List, Optional, Tuple

import mxnet as mx

from .. import registry
from ..errors import where_created
from ..operators import DYNAMIC_SHAPE_RANKS
from .operator_errors import graph_operator_error

# NOTE [run-time shapes]
#     Some shapes are known only when the graph runs: the output of an operator whose shape
#     depends on values (``boolean_mask``, DYNAMIC_SHAPE_OPS), of an exact-length while_loop, of
#     a cond whose branches return different sizes, and whatever is computed from those. Shape
#     rules say so with ``registry.Dynamic`` instead of guessing. MXNet has no word for it: its
#     own inference reports such outputs as unknown, and a Python Custom op cannot even report
#     unknown (node.py: what it returns is read as a known shape). So MXNet never infers a graph
#     that holds gluon_cf nodes: :meth:`PartitionedGraph.infer_shape` walks it in Python, the
#     ordinary operators between nodes inferred by MXNet piece by piece (where
#     :func:`dynamic_outputs` tells an output MXNet could not infer because it depends on a
#     run-time shape (Dynamic) from one not inferable yet (None)), the nodes and the
#     dynamic-shape operators (``_RunTimeShapeCall``) by their own rules.
#     ``Symbol.infer_shape`` and ``infer_shape_partial`` of such graphs take the same path
#     (bind_shapes.py), which is also how unknown dimensions (MXNet's 0 placeholder) pass through
#     nodes. Where MXNet itself must run a node as a Custom operator (a Symbol executor), a
#     Dynamic output is refused with DynamicShapeError; a hybridized block runs such a graph
#     partitioned instead (NOTE [partitioned blocks] in ``hybrid.py``).


def learn(shapes, entry, shape):
    """Record ``shape`` for ``entry`` unless it tells less than what is known; a partial
    shape (MXNet's 0 for an unknown dimension) adds the dimensions it knows to a partial one
    of its rank (a foreach's data completed by its body, as MXNet answers it)."""
    if shape is None or (isinstance(shape, tuple) and not shape):
        return
    old = shapes.get(entry)
    if old is None or (isinstance(shape, tuple) and registry.is_complete(shape)
                       and not registry.is_complete(old)):
        shapes[entry] = tuple(shape) if isinstance(shape, (tuple, list)) else shape
    elif type(shape) is tuple and type(old) is tuple and len(old) == len(shape) and \
            all(not o or not d or o == d for o, d in zip(old, shape)):
        shapes[entry] = tuple(o or d for o, d in zip(old, shape))


def for_rule(shape, partial_ok):
    """What a rule sees of a shape: complete tuples, Dynamic, None; a shape with unknown
    dimensions is None unless the rule handles those (``accepts_partial_shapes``)."""
    if shape is None or registry.is_dynamic(shape) or registry.is_complete(shape):
        return shape
    return shape if partial_ok else None


_mxnet_infer_shape_impl = mx.sym.Symbol._infer_shape_impl


def mxnet_infer_shape_partial(symbol, known) -> Tuple[Dict[str, tuple], List[tuple]]:
    """MXNet's own partial inference: ``({input name: shape}, [output shapes])``, unknown
    shapes as ``()`` (MXNet's form)."""
    args, outs, aux = _mxnet_infer_shape_impl(symbol, True, **known)
    inputs = dict(zip(symbol.list_arguments(), args or []))
    inputs.update(zip(symbol.list_auxiliary_states(), aux or []))
    return inputs, [() if o is None else tuple(o) for o in outs] if outs \
        else [()] * len(symbol.list_outputs())


def infer_by_mxnet(symbol, js, names, given):
    """MXNet's inference of a graph without gluon_cf nodes (``symbol``, its JSON ``js``), from
    the shapes ``given`` for its inputs ``names``, which may be :class:`registry.Dynamic`
    (NOTE [run-time shapes]). Returns ``({input name: shape}, [output shapes])``; an output is
    a tuple (static: also when computed from run-time shapes, e.g. a sum over their rows),
    Dynamic when it depends on a run-time shape, else a partial tuple or None (not inferable
    yet). A run-time shape reaches MXNet as what is known of it (MXNet's 0 for the unknown
    dimensions), so parameters after it still get their shapes (``Dense`` after
    ``boolean_mask``)."""
    known, dynamic, partial = {}, set(), {}
    for name, shape in zip(names, given):
        if registry.is_dynamic(shape):
            dynamic.add(name)
            if shape.dims:
                partial[name] = tuple(0 if d is None else d for d in shape.dims)
        elif shape is not None:
            known[name] = tuple(shape)
    inputs: Dict[str, tuple] = {}
    outs: Optional[List[tuple]] = None
    for attempt in ({**known, **partial}, known) if partial else (known,):
        try:
            inputs, outs = mxnet_infer_shape_partial(symbol, attempt)
            break
        except mx.MXNetError as err:
            if not dynamic:   # NOTE [operators refusing shapes at run time]
                ours = graph_operator_error(js["nodes"], err)
                if ours is None:
                    raise
                raise ours from None
            # An operator that cannot take a run-time shape as unknown (arange_like checks
            # the rank of an unknown input): what depends on it is Dynamic.
    if outs is None:
        inputs, outs, known = {}, [()] * len(symbol.list_outputs()), {}
    for name in dynamic:
        inputs.pop(name, None)
    if all(registry.is_complete(o) for o in outs):
        return inputs, outs
    flags = dynamic_outputs(js, dynamic)
    return inputs, [_inferred(o, flag) for o, flag in zip(outs, flags)]


def _inferred(shape, dynamic):
    """An output MXNet inferred as ``shape`` (its legacy form), ``dynamic`` if it depends on a
    run-time shape: complete, a :class:`registry.Dynamic` of what is known, a partial tuple,
    or None."""
    if registry.is_complete(shape) or not dynamic:
        return shape or None
    return registry.Dynamic(tuple(d or None for d in shape) if shape else None)


def dynamic_outputs(js, dynamic_inputs):
    """For each head of a graph without gluon_cf nodes or dynamic-shape operators (symbol JSON
    ``js``): whether its shape can depend on an input named in ``dynamic_inputs``. Operators
    pass it on from any input: conservative, which costs at most a partitioned run, never a
    wrong shape."""
    dynamic: List[bool] = []
    for n in js["nodes"]:
        dynamic.append(n["name"] in dynamic_inputs if n["op"] == "null"
                       else any(dynamic[i[0]] for i in n["inputs"]))
    return [dynamic[h[0]] for h in js["heads"]]


def run_time_dims(op, attrs, data):
    """What is known of the output of a DYNAMIC_SHAPE_OPS operator, from the dims of its first
    input ``data`` (None: unknown rank): ``boolean_mask`` keeps all but its axis."""
    rule = DYNAMIC_SHAPE_RANKS.get(op)
    if rule == "data":
        if data is None:
            return None
        axis = int(attrs.get("axis", 0)) % max(len(data), 1)
        return tuple(None if k == axis else d for k, d in enumerate(data))
    if op in ("_npi_nonzero", "_npx_nonzero"):   # (number of non-zeros, rank of data)
        return (None, None if data is None else len(data))
    return (None,) * rule if isinstance(rule, int) else None


class NumpyShapeError(ValueError, mx.MXNetError):
    """A gluon_cf node read a 0-d value under MXNet's numpy-shape mode (NOTE [numpy-shape
    mode])."""


# NOTE [numpy-shape mode]
#     gluon_cf's shapes are MXNet 1.9.1's legacy ones, where () means "not known yet". Under
#     numpy-shape mode (``mx.util.set_np_shape(True)``, ``@mx.util.use_np_shape``) () is a 0-d
#     array, a scalar: a node reading one as a body's value (not only as a cond's predicate)
#     could not infer its outputs, and answered MXNet () for them, which that mode reads as
#     "a scalar" (a bind raised a TypeError from our plumbing, or MXNet's "inferring shapes
#     failed" naming an internal node), or inferred it of shape (1,) (MXNet's "Provided = [],
#     inferred shape=[1]"). MXNet 1.9.1's own contrib control-flow ops refuse such
#     values in that mode too (foreach: "[1] vs. []"; cond, while_loop: "cannot decide
#     shapes"); eagerly both run them. So the node refuses them, naming itself and the user's
#     line. Values of one or more dimensions work in that mode, as MXNet's ops do.
def refuse_numpy_scalars(node, in_shapes, ins, outs):
    """The error of ``node`` given 0-d ``in_shapes`` in numpy-shape mode, when its rule could
    not infer its outputs (``outs``) or inferred such an input (``ins``) of other shape; None
    otherwise (a cond's 0-d predicate)."""
    scalars = [i for i, s in enumerate(in_shapes) if s is not None and len(s) == 0]
    if not mx.util.is_np_shape() or not scalars or (
            all(registry.is_complete(o) for o in outs) and
            not any(registry.is_complete(ins[i]) for i in scalars if i < len(ins))):
        return None
    return NumpyShapeError(
        "%s: gluon_cf.%s (node %r) reads %s of shape () (0-d, a scalar) under MXNet's "
        "numpy-shape mode (mx.util.set_np_shape(True) or @mx.util.use_np_shape), which gluon_cf "
        "nodes do not support in a graph (MXNet 1.9.1's own contrib control-flow ops refuse it "
        "too). Give the value shape (1,) (x.reshape((1,))), or turn numpy-shape mode off"
        % ((where_created(node) or "<unknown>"), node.kind, node.spec.get("node") or "",
           ", ".join("input %d" % i for i in scalars)))
