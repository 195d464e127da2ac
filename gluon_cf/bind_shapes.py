"""Shape inference and binding of Symbols holding gluon_cf nodes: ``Symbol.infer_shape`` and
``infer_shape_partial`` answered in Python (NOTE [run-time shapes] in ``graph/``), the
arguments they take checked as MXNet checks them; ``Symbol.simple_bind`` and
``Executor.reshape`` refusing an argument whose shape the given shapes do not decide, as MXNet
refuses it for its own graphs.

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
import json
import re
from typing import Set

import mxnet as mx

from . import registry
from .checks import ArgumentValueError, LoopVarShapeChange
from .errors import mxnet_message, where_created
from .graph import decode, holds_gluon_cf_nodes, inference_graph, refusing_training
from .graph.cached_graph import check_reshapes, reshapes_may_resize
from .graph.decoded import holds_recursion
from .node import IncompleteShapeError

_original_infer_shape_impl = mx.sym.Symbol._infer_shape_impl


def _infer_shape_impl(self, partial, *args, **kwargs):
    """``Symbol.infer_shape``/``_partial`` of a graph holding gluon_cf nodes, in Python (NOTE
    [run-time shapes] in ``graph/``): unknown dimensions pass through nodes; an output known
    only at run time has 0 for its unknown dimensions in ``infer_shape_partial``'s answer
    (MXNet's: wholly unknown, ()), and ``infer_shape`` answers None for it with MXNet's warning,
    as MXNet's for any graph of undecided shapes (Gluon's deferred initialisation asks
    ``infer_shape_partial``: NOTE [unknown rank])."""
    text = self.tojson()
    if not holds_gluon_cf_nodes(text):
        return _original_infer_shape_impl(self, partial, *args, **kwargs)
    arg_names = self.list_arguments()
    _check_shape_arguments(args, kwargs, arg_names)
    # (MXNet 1.9.1's legacy shapes: -1 and 0 both say "unknown"; its answers write 0)
    known = {n: tuple(0 if d == -1 else d for d in s) for n, s in zip(arg_names, args)
             if s is not None}
    known.update((n, tuple(0 if d == -1 else d for d in s)) for n, s in kwargs.items())
    names = self.list_inputs()
    unknown_names = set(known) - set(names)
    if unknown_names:
        # (an MXNetError as MXNet's "InferShapeKeyword argument name ... not found")
        raise ArgumentValueError("infer_shape: %s %s not an input of this symbol (its "
                                 "inputs: %s)" % (", ".join(sorted(unknown_names)), "is" if len(
                                     unknown_names) == 1 else "are", names))
    try:
        ins, outs = inference_graph(text).infer_shape([known.get(n) for n in names])
    except LoopVarShapeChange:   # MXNet's answer: it infers nothing through a while_loop
        ins, outs = [known.get(n) for n in names], [None] * len(self.list_outputs())
    by_name = dict(zip(names, ins))

    def mxnet_form(shape):   # MXNet's legacy form: 0 for an unknown dim, () unknown rank
        if registry.is_dynamic(shape):
            return tuple(0 if d is None else d for d in shape.dims or ())
        return () if shape is None else tuple(shape)

    arg_shapes = [mxnet_form(by_name.get(n)) for n in arg_names]
    aux_shapes = [mxnet_form(by_name.get(n)) for n in self.list_auxiliary_states()]
    out_shapes = [mxnet_form(o) for o in outs]
    inferred = all(registry.is_complete(s) for s in arg_shapes + aux_shapes + out_shapes)
    if not partial and not inferred:
        # MXNet's answer (its infer_shape warns), for an unknown rank too (NOTE [unknown rank])
        return None, None, None
    return arg_shapes, out_shapes, aux_shapes


mx.sym.Symbol._infer_shape_impl = _infer_shape_impl

def _check_shape_arguments(args, kwargs, arg_names):
    """The checks MXNet's own ``_infer_shape_impl`` makes in Python before its C call, with
    its exception types; and more shapes given by position than there are arguments (MXNet
    1.9.1 answers any positional shapes with a C++ "basic_string" error)."""
    if args and kwargs:
        raise ValueError("Can only specify known argument shapes either by positional or "
                         "kwargs way.")
    for i, s in enumerate(args):
        if s is not None and not isinstance(s, tuple):
            raise TypeError("Arguments need to be shapes (tuple), but argument %d is %s."
                            % (i, type(s)))
    for k, v in kwargs.items():
        if not isinstance(v, tuple):
            raise TypeError("Arguments need to be shapes (tuple), but '%s' is %s." % (k, type(v)))
    if len(args) > len(arg_names):
        raise ArgumentValueError("infer_shape: %d shapes given by position for the %d "
                                 "arguments of this symbol (%s)" % (
                                     len(args), len(arg_names), arg_names))


_original_simple_bind = mx.sym.Symbol.simple_bind
_original_bind = mx.sym.Symbol.bind
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


def _check_reshapes(executor):
    """Raise the error of a Reshape in ``executor``'s graph changing the size of its value
    (NOTE [a reshape to another size]: a gluon_cf node's output reshaped to another size bound
    and ran, reading past the array, where MXNet's own cond refuses the graph as undecided; a
    plain graph bound to such shapes, ``Symbol.bind`` or ``eval``, corrupted the heap)."""
    symbol = executor._symbol
    text = symbol.tojson()
    if '"Reshape"' not in text:
        return
    nodes = json.loads(text)["nodes"]
    if not reshapes_may_resize(nodes):
        return
    shapes = {n: a.shape for n, a in zip(symbol.list_arguments(), executor.arg_arrays)}
    shapes.update((n, a.shape) for n, a in zip(symbol.list_auxiliary_states(),
                                                executor.aux_arrays))
    check_reshapes(symbol, nodes, [shapes.get(n) for n in symbol.list_inputs()])


def _message(undecided):
    return ("InferShape pass cannot decide shapes for the following arguments: %s (read "
            "inside gluon_cf control-flow nodes, and shaped by nothing given). Please consider "
            "providing them as inputs" % ", ".join(undecided))


# NOTE [an argument shaped only after a node]
#     MXNet's shape pass visits nodes in order, once forward: a gluon_cf node reading an
#     argument that no given shape decides yet answers () for it (node.py), and an operator
#     after the node that does decide it (``w + y`` given y) then finds the two disagreeing:
#     "Incompatible attr in node _plus3 at 1-th input: expected [], got [3]", naming only
#     that operator. MXNet's own control-flow ops refuse such a graph too ("cannot decide
#     shapes"): so does simple_bind, naming the argument, the node, the user's line that made
#     it and the shape to give (what gluon_cf's own inference finds, when it does).
_SHAPED_AFTER = re.compile(r"expected \[\], got \[|inferred shape=\[\]")


def _shaped_after_node(symbol, given, err, call="simple_bind"):
    """``call``'s error (simple_bind or reshape) for MXNet's ``err`` about an argument read by
    a gluon_cf node before any ``given`` shape decided it (NOTE [an argument shaped only after
    a node]); None for other errors."""
    if not _SHAPED_AFTER.search(str(err)):
        return None
    text = symbol.tojson()
    if not holds_gluon_cf_nodes(text):
        return None
    nodes = json.loads(text)["nodes"]
    read = [(nodes[i]["name"], n) for n in nodes if registry.kind_of(n)
            for i, *_ in n["inputs"] if nodes[i]["op"] == "null" and nodes[i]["name"] not in given]
    if not read:
        return None
    failing = re.search(r"Error in operator (\S+?):", str(err))
    refusing = next((n for n in nodes if failing and n["name"] == failing.group(1)), None)
    if refusing is not None:   # the argument the refusing operator reads first, if one is
        names = {nodes[i]["name"] for i, *_ in refusing["inputs"]}
        read.sort(key=lambda pair: pair[0] not in names)
    try:
        inferred = dict(zip(symbol.list_arguments(), symbol.infer_shape_partial(**given)[0]))
    except mx.MXNetError:
        inferred = {}
    name, node = read[0]
    decoded = decode(registry.kind_of(node), node["attrs"]["spec"])
    shape = inferred.get(name)
    advice = "%s=%s" % (name, shape) if shape and registry.is_complete(shape) else \
        "%s=<its shape>" % name
    return _ERROR_OF[call](
        "%s: %s cannot decide the shape of argument %r, read by gluon_cf.%s (node %r): "
        "only an operator after the node shapes it, and MXNet infers shapes in order (MXNet "
        "1.9.1's own control-flow ops refuse it too). Give it to %s (%s)"
        % (where_created(decoded) or "<unknown>", call, name, decoded.kind, node["name"],
           call, advice))


def _refused_node_output(symbol, err, call="simple_bind"):
    """``call``'s error for MXNet's ``err`` about an operator of ``symbol`` outside gluon_cf
    nodes refusing the shapes of its inputs, one of them a gluon_cf node's output: named at
    the user's line that made that node (the operator, a ``mx.sym`` call, has none); None
    for other errors."""
    text = str(err)
    match = _REFUSING_OPERATOR.search(text)
    if match is None or not holds_gluon_cf_nodes(symbol.tojson()):
        return None
    nodes = json.loads(symbol.tojson())["nodes"]
    refusing = next((n for n in nodes if n["name"] == match.group(1)), None)
    if refusing is None or registry.kind_of(refusing):
        return None
    read = [i for i, *_ in refusing["inputs"]]
    fed = [(nodes[i], "the output of") for i in read if registry.kind_of(nodes[i])] + [
        (n, "argument %r, which is read by" % nodes[i]["name"]) for i in read
        if nodes[i]["op"] == "null" for n in nodes
        if registry.kind_of(n) and any(j == i for j, *_ in n["inputs"])]
    if not fed:
        return None
    node, what = fed[0]
    decoded = decode(registry.kind_of(node), node["attrs"]["spec"])
    detail = next(mxnet_message(line) for line in text.splitlines() if match.group(0) in line)
    return _ERROR_OF[call](
        "%s: %s (node %r), reading %s gluon_cf.%s (node %r) made at this line, refused its "
        "inputs' shapes (%s). Check the shapes it combines with that value"
        % (where_created(decoded) or "<unknown>", refusing["op"], refusing["name"], what,
           decoded.kind, node["name"], detail))


_REFUSING_OPERATOR = re.compile(r"Error in operator (\S+?): .*(?:Incompatible attr|"
                                r"Shape inconsistent)")


# NOTE [shape conflicts named alike by simple_bind, bind and reshape]
#     The two errors above are MXNet's shape pass failing at an operator outside gluon_cf
#     nodes; simple_bind, bind with arrays and Executor.reshape run that same pass, so each
#     maps it alike (once only simple_bind did: bind and reshape showed MXNet's raw text,
#     "Incompatible attr in node _plus1 ... elemwise_op_common.h"). Each keeps the type MXNet
#     raises from it: simple_bind a RuntimeError, bind and reshape an MXNetError (a
#     RuntimeError too).
_ERROR_OF = {"simple_bind": RuntimeError, "bind": mx.MXNetError, "reshape": mx.MXNetError}


def _shape_error(symbol, given, err, call):
    """gluon_cf's error for MXNet's shape error ``err`` in ``call`` of ``symbol`` given the
    shapes ``given``, or None where it is not about a gluon_cf node's value."""
    return _shaped_after_node(symbol, given, err, call) or \
        _refused_node_output(symbol, err, call)


def _undecided_before(symbol, kwargs):
    """Names of the arguments and auxiliary states of ``symbol`` (holding gluon_cf nodes) of
    which gluon_cf's inference from the shapes in ``kwargs`` decides nothing.

    NOTE [undecided before MXNet's pass]: a gluon_cf node's output that its rule cannot
    shape (it reads such an argument) is answered to MXNet as () (NOTE [arguments of
    undecided shape]), which MXNet's pass reads as a known 0-d shape: a ``reshape(out, (-3,
    -2))`` after it (a TreeRNN's rows merged, the weight read only in the recursion, not
    given) crashed the process in MXNet's Reshape shape function (segmentation fault), a
    ``flatten`` raised MXNet's internal "index = 0 must be in range [0, 0)". Such a bind
    can only end in "cannot decide shapes" (the argument would be bound 0-d, refused
    after), so simple_bind says so before MXNet's pass runs (review round 26r)."""
    if mx.util.is_np_shape() or not holds_gluon_cf_nodes(symbol.tojson()):
        return []   # (under numpy shapes, () is a scalar's shape)
    try:
        args, _, aux = symbol.infer_shape_partial(
            **{k: v for k, v in kwargs.items() if isinstance(v, tuple)})
    except Exception:   # noqa: BLE001 - (MXNet's pass, then, says what is wrong)
        return []
    names = symbol.list_arguments() + symbol.list_auxiliary_states()
    return [n for n, shape in zip(names, list(args or []) + list(aux or []))
            if shape is not None and len(shape) == 0 and n not in kwargs]


# NOTE [after MXNet's own cond or while_loop]
#     MXNet 1.9.1's own ``_cond`` and ``_while_loop`` (``mx.sym.contrib``) infer no output
#     shape: MXNet's executor shapes them and what follows them only when they run. A gluon_cf
#     node reading such an output (a client's ``mx.sym.contrib.cond`` fed to gluon_cf's loop)
#     is a Custom operator, whose shape callback can answer only () for it, which MXNet's
#     bind reads as a known 0-d shape: ``bind`` crashed the process (segmentation fault) or
#     raised "std::bad_alloc". No shape a Custom operator can answer is right there, so the
#     bind is refused, naming both nodes and the user's line (round 30s).
_MXNET_RUN_TIME_SHAPED = ("_cond", "_while_loop")


def _after_mxnet_control_flow(symbol):
    """Refuse binding ``symbol`` if a gluon_cf node reads, directly or through other
    operators, an output of MXNet's own ``_cond``/``_while_loop`` (NOTE [after MXNet's own
    cond or while_loop])."""
    text = symbol.tojson()
    if not any('"%s"' % op in text for op in _MXNET_RUN_TIME_SHAPED) or \
            not holds_gluon_cf_nodes(text):
        return
    nodes = json.loads(text)["nodes"]
    source = {}   # node index -> the MXNet control-flow node whose output it reads
    for k, node in enumerate(nodes):
        if node["op"] in _MXNET_RUN_TIME_SHAPED:
            source[k] = node
            continue
        fed = next((source[i] for i, *_ in node["inputs"] if i in source), None)
        if fed is None:
            continue
        kind = registry.kind_of(node)
        if kind:
            decoded = decode(kind, node["attrs"]["spec"])
            raise ArgumentValueError(
                "%s: gluon_cf.%s (node %r) reads the output of MXNet's own %s (node %r), "
                "whose shape MXNet decides only when it runs, which a gluon_cf node in a "
                "Symbol executor cannot follow. Use gluon_cf.%s for that op too, or run the "
                "graph in a hybridized Gluon block (gluon.SymbolBlock(outputs, inputs))"
                % (where_created(decoded) or "<unknown>", decoded.kind, node["name"],
                   fed["op"].lstrip("_"), fed["name"], fed["op"].lstrip("_")))
        source[k] = fed


def _simple_bind(self, *args, **kwargs):
    _after_mxnet_control_flow(self)   # NOTE [after MXNet's own cond or while_loop]
    undecided = _undecided_before(self, kwargs)   # NOTE [undecided before MXNet's pass]
    if undecided:
        given = "".join("%s: %s\n" % (k, v) for k, v in kwargs.items()
                        if isinstance(v, tuple))
        raise RuntimeError("simple_bind error. Arguments:\n%s%s" % (given, _message(undecided)))
    try:
        executor = _original_simple_bind(self, *args, **kwargs)
    except (RuntimeError, mx.MXNetError) as err:
        ours = _shape_error(self, {k: v for k, v in kwargs.items() if isinstance(v, tuple)},
                            err, "simple_bind")
        if ours is None:
            raise
        raise ours from None
    _check_reshapes(executor)
    undecided = _undecided(executor)
    if undecided:
        given = "".join("%s: %s\n" % (k, v) for k, v in kwargs.items()
                        if isinstance(v, tuple))
        raise RuntimeError("simple_bind error. Arguments:\n%s%s" % (given, _message(undecided)))
    return executor


def _bind(self, *args, **kwargs):
    _after_mxnet_control_flow(self)   # NOTE [after MXNet's own cond or while_loop]
    try:
        executor = _original_bind(self, *args, **kwargs)
    except mx.MXNetError as err:
        ours = _shape_error(self, _bound_shapes(self, args[1:2] or [kwargs.get("args")]), err,
                            "bind")
        if ours is None:
            raise
        raise ours from None
    _check_reshapes(executor)
    return executor


def _bound_shapes(symbol, given):
    """The shapes of the arrays given to ``bind`` (``args``: a list or a dict)."""
    arrays = given[0] if given else None
    if isinstance(arrays, dict):
        return {k: v.shape for k, v in arrays.items() if hasattr(v, "shape")}
    if isinstance(arrays, (list, tuple)):
        return {k: v.shape for k, v in zip(symbol.list_arguments(), arrays)
                if hasattr(v, "shape")}
    return {}


def _reshape(self, *args, **kwargs):
    kwargs.update(_kept_shapes(self, kwargs))
    try:
        executor = _original_reshape(self, *args, **kwargs)
    except mx.MXNetError as err:
        ours = _shape_error(self._symbol, {k: v for k, v in kwargs.items()
                                           if isinstance(v, tuple)}, err, "reshape")
        if ours is None:
            raise
        raise ours from None
    _check_reshapes(executor)
    undecided = _undecided(executor)
    if undecided:
        raise IncompleteShapeError("Executor.reshape: " + _message(undecided) + " to reshape")
    return executor


def _kept_shapes(executor, kwargs):
    """The bound shapes of the arguments ``reshape`` is not given and cannot infer from those
    it is, for a symbol holding gluon_cf nodes.

    NOTE [arguments a reshape leaves]: MXNet's ``Executor.reshape`` infers every argument it
    is not given and refuses one that comes out otherwise ("Shape of unspecifie arg: w
    changed"); a layer's weight inside a recursion's function was not inferred from the data
    (round 27r infers what its layer's data decide, NOTE [an environment known in part] in
    recursion/table.py), so ``reshape(x=...,
    roots=...)``, as ``Module.reshape`` and a BucketingModule call it with the data's shapes
    alone, failed where it was bound with the weight's shape (MXNet's own foreach infers a
    layer's weight in its body). An argument read by a node holding a recursion keeps the
    shape it was bound with (round 26r), unless the given shapes contradict it (then the
    reshape's own error asks for it); others are left to MXNet's inference, whose refusals
    its own control flow shares."""
    symbol = executor._symbol
    text = symbol.tojson()
    if not holds_gluon_cf_nodes(text):
        return {}
    read = _read_by_recursions(json.loads(text))
    given = {k: v for k, v in kwargs.items() if isinstance(v, tuple)}
    try:
        inferred, _, _ = symbol.infer_shape_partial(**given)
    except mx.MXNetError:
        return {}    # (the reshape itself says what is wrong)
    kept = {name: array.shape for name, shape, array in
            zip(symbol.list_arguments(), inferred, executor.arg_arrays)
            if name in read and name not in given and array is not None and
            not registry.is_complete(shape)}
    try:   # (a kept shape the given ones contradict: the reshape's own error says which)
        symbol.infer_shape_partial(**given, **kept)
    except Exception:   # noqa: BLE001 - MXNet's or a gluon_cf rule's refusal alike
        return {}
    return kept


def _read_by_recursions(graph_json):
    """Names of the variables read by a gluon_cf node holding a recursion."""
    nodes = graph_json["nodes"]
    names: Set[str] = set()
    for n in nodes:
        if holds_recursion(n):
            names.update(nodes[src]["name"] for src, *_ in n["inputs"]
                         if nodes[src]["op"] == "null")
    return names


_original_forward = mx.executor.Executor.forward
_original_backward = mx.executor.Executor.backward


def _forward(self, is_train=False, **kwargs):
    self._gluon_cf_train = is_train   # (read by _backward)
    return _original_forward(self, is_train, **kwargs)


def _backward(self, out_grads=None, is_train=True):
    """An executor's backward refuses, before it runs, what its gluon_cf nodes' backward
    would refuse in MXNet's worker thread (NOTE [training refused by the node] in
    ``graph/decoded.py``): raised there, at a later read, the backward of the operators after
    the node had run, a BatchNorm's running statistics and gradients updated."""
    nodes = getattr(self, "_gluon_cf_refusing", None)
    if nodes is None:
        nodes = self._gluon_cf_refusing = refusing_training(json.loads(self._symbol.tojson()))
    for node in nodes:   # (the forward's mode decides, as in node.py's backward)
        node.refuse_training_call(True, self._ctx.device_type,
                                  getattr(self, "_gluon_cf_train", False))
    return _original_backward(self, out_grads, is_train)


_forward.__doc__ = _original_forward.__doc__
_backward.__doc__ = _original_backward.__doc__
mx.executor.Executor.forward = _forward
mx.executor.Executor.backward = _backward
_simple_bind.__doc__ = _original_simple_bind.__doc__
_reshape.__doc__ = _original_reshape.__doc__
_bind.__doc__ = _original_bind.__doc__
mx.sym.Symbol.bind = _bind
mx.sym.Symbol.simple_bind = _simple_bind
mx.executor.Executor.reshape = _reshape
