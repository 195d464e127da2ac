"""A graph as one MXNet CachedOp: :class:`CachedGraph` runs a graph's CachedOps, or, on a call
given a zero-size array, its operators one by one as eager code does (NOTE [zero-size calls]),
with the :class:`ZeroSizeError` an operator refusing such an array gets; :func:`invoke` calls
one operator imperatively (shared with the partitioned execution); and
:func:`block_index_gradients` marks the index inputs of a graph that autograd sees as one node.
"""
import contextlib
import ctypes
import json
from typing import Any, Dict, List, Optional, Tuple

import mxnet as mx
from mxnet._ctypes.ndarray import _imperative_invoke

from .. import registry
from .._cachedop import CachedOpPair
from .._custom_ops import is_hidden
from ..errors import ZeroSizeError, named_after
from ..zero_size import shape_or_no_element
from ..operators import (CRASH_DETAIL, DYNAMIC_SHAPE_OPS, INDEX_INPUTS, NO_ADDED_GRADIENT_INPUTS,
                         NO_GRADIENT_INPUTS, SAME_WHEN_EMPTY, SOURCE_ATTR, crashing_zero_size,
                         describe_node, reshape_to_another_size)
from .operator_errors import (CHECKS_ATTR, bounds_checking_nodes, bounds_error,
                              graph_operator_error, operator_error)

# A node of a symbol's JSON, as MXNet writes it (``op``, ``name``, ``inputs``, ``attrs``): its
# fields' types depend on the field, so it stays a plain dict. An entry is one output of a
# node: (node id, output index).
JsonNode = Dict[str, Any]
Entry = Tuple[int, int]

_OP_HANDLES: Dict[str, int] = {}


def visible_attrs(node):
    """A JSON node's attributes an operator takes (gluon_cf's hidden ones left out)."""
    return {k: v for k, v in node.get("attrs", {}).items() if not is_hidden(k)}


def invoke(op, inputs, attrs):
    """Operator ``op`` (by name) called imperatively on NDArrays ``inputs``, recorded by autograd
    like eager code; returns its outputs (a list)."""
    handle = _OP_HANDLES.get(op)
    if handle is None:
        handle = mx.base.OpHandle()
        mx.base.check_call(mx.base._LIB.NNGetOpHandle(mx.base.c_str(op), ctypes.byref(handle)))
        handle = _OP_HANDLES[op] = handle.value
    if op in NO_GRADIENT_INPUTS and mx.autograd.is_recording():
        inputs = [a.detach() if k in NO_GRADIENT_INPUTS[op] else a for k, a in enumerate(inputs)]
    if op in NO_ADDED_GRADIENT_INPUTS and mx.autograd.is_recording():
        inputs = [invoke("_copy", [a], {})[0] if k in NO_ADDED_GRADIENT_INPUTS[op] and
                  0 not in a.shape else a for k, a in enumerate(inputs)]   # (SAME_WHEN_EMPTY)
    return _imperative_invoke(handle, inputs, list(attrs), list(attrs.values()), None, 0, 1)


# NOTE [a reshape to another size]
#     MXNet 1.9.1 compiles out Reshape's check that the target shape has as many elements as
#     the source (``#if 0`` in ReshapeShape, src/operator/tensor/matrix_op-inl.h): reshaping a
#     (3, 4) value to (1, 4) copies 12 elements into 4 and corrupts the heap, so the process
#     aborts later ("double free or corruption"), in a graph and imperatively alike (a loop
#     body's ``row.reshape((1, H))`` given rows of another width). The graphs gluon_cf runs
#     check every Reshape once per input shapes, and an operator it invokes alone before it
#     runs: an OperatorShapeError at the user's line, with the shapes, as MXNet's check said.
#     In an op's body run eagerly, ``F.reshape`` (MXNet's operator; NDArray's ``reshape``
#     method checks) is a ValueError at the user's line, as the method's own error is.
#     The check is MXNet's shape inference of the whole graph, which for a block holding a
#     recursion node runs its shape rules in Python (~ms): run for every new input shape, it
#     cost TreeRNN's batching executor 35% of its inference speed at batch 25 (each batch
#     is a forest of another size). What a Reshape's ``shape`` codes decide (ReshapeShape in
#     matrix_op-inl.h) makes the check rarer: without a positive number (a given dimension)
#     and with a -1 (the size divided by the other dimensions, all copied from the source) or
#     a -2 (the rest of the source), the size is kept for any input (-4's split is checked by
#     MXNet); without a positive number, with neither, only the source's rank decides whether
#     dimensions are dropped, so it is checked once per input ranks; otherwise (a given
#     dimension, a legacy ``target_shape``) once per input shapes. A hybridized block without
#     gluon_cf nodes is checked too (its CachedOp corrupted the heap alike), and a plain
#     Symbol bound (``bind``, ``eval``, ``simple_bind``, ``Executor.reshape``): only when a
#     Reshape of its graph may change the size (read once per graph, ``reshapes_may_resize``),
#     so a block whose Reshapes all keep it is called as MXNet calls it; otherwise a call of
#     data shapes already checked costs a set lookup (~2.4 us), a new one ~60 us of shape
#     inference (the internals' JSON read once per graph), where MXNet's CachedOp plans the
#     new shapes in ~200-300 us. The shapes checked are kept per graph, at most 1024.


def reshape_error(node, source, target):
    """The error of JSON node ``node``, a Reshape of a ``source``-shaped value to ``target``,
    when their sizes differ (NOTE [a reshape to another size]); None otherwise or unknown."""
    wrong = reshape_to_another_size(source, target)
    if wrong is None:
        return None
    err = mx.MXNetError("Error in operator %s: Shape inconsistent, %s" % (node["name"], wrong))
    return operator_error(node, None, err) or err


def _reshape_kind(node):
    """What decides whether JSON Reshape ``node`` keeps its value's size (NOTE [a reshape to
    another size]): "kept" (always), "ranks" (the source's rank) or "shapes"."""
    attrs = node.get("attrs", {})
    if attrs.get("target_shape", "()") not in ("()", "[]", "(,)"):
        return "shapes"
    try:
        codes = [int(c) for c in attrs.get("shape", "()").strip("()[] ").replace(
            "L", "").split(",") if c.strip()]
    except ValueError:
        return "shapes"
    kept, k = [], 0
    while k < len(codes):
        kept.append(codes[k])
        k += 3 if codes[k] == -4 else 1   # (-4's two split dimensions: MXNet checks them)
    if any(c > 0 for c in kept):
        return "shapes"
    return "kept" if -1 in kept or -2 in kept else "ranks"


class ReshapeChecks:
    """What a graph's Reshape checks know (NOTE [a reshape to another size]): the kinds of its
    Reshapes, read once, and the keys of the checks made."""

    def __init__(self) -> None:
        self.kinds: Optional[frozenset] = None
        self.keys: set = set()
        self.internals: Optional[Tuple[Any, list, list]] = None   # + their heads, inputs
        self.plain = False   # the graph holds no gluon_cf node


# MXNet's Symbol._infer_shape_impl, before bind_shapes (which imports this module) patches it
_MXNET_INFER_SHAPE = mx.sym.Symbol._infer_shape_impl
if not _MXNET_INFER_SHAPE.__module__.startswith("mxnet."):
    _MXNET_INFER_SHAPE = None


def _reshape_kinds(nodes):
    return frozenset(_reshape_kind(n) for n in nodes if n["op"] == "Reshape")


def reshapes_may_resize(nodes):
    """Whether a Reshape among JSON ``nodes`` may change its value's size for some inputs, so
    that their calls need :func:`check_reshapes` (NOTE [a reshape to another size])."""
    return not _reshape_kinds(nodes) <= {"kept"}


def _reshape_check_key(kinds, shapes):
    """The key under which a check of Reshapes of ``kinds`` for inputs of ``shapes`` holds for
    other inputs too; None when no check is needed."""
    if kinds <= {"kept"}:
        return None
    if "shapes" in kinds:
        return ("shapes", tuple(shapes))
    return ("ranks", tuple(None if s is None else len(s) for s in shapes))


def check_reshapes(symbol, nodes, shapes, checks=None):
    """Raise the error of a Reshape among JSON ``nodes`` (``symbol``'s) changing the size of
    its value, for inputs (``symbol.list_inputs()``) of ``shapes`` (NOTE [a reshape to another
    size]). ``checks``: the graph's :class:`ReshapeChecks`, kept across calls."""
    if checks is None:
        kinds = _reshape_kinds(nodes)
    else:
        if checks.kinds is None:   # (read once: a graph's call runs this on every call)
            checks.kinds = _reshape_kinds(nodes)
        kinds = checks.kinds
    key = _reshape_check_key(kinds, shapes)
    if key is None or checks is not None and key in checks.keys:
        return
    _check_reshapes(symbol, nodes, shapes, checks)
    if checks is not None:   # (after the check: a failing one fails again)
        if len(checks.keys) >= 1024:
            checks.keys.clear()
        checks.keys.add(key)


def _check_reshapes(symbol, nodes, shapes, checks):
    if checks is not None and checks.internals is not None:
        internals, heads, names = checks.internals
    else:   # (read once per graph: its JSON, ~40 us for a small MLP's)
        internals = symbol.get_internals()
        heads = json.loads(internals.tojson())["heads"]
        names = symbol.list_inputs()
        if checks is not None:
            checks.internals = internals, heads, names
    # (a parameter not yet initialized, SymbolBlock.imports's, has no shape: left unknown)
    given = {name: tuple(shape) for name, shape in zip(names, shapes) if shape is not None}
    try:
        if checks is not None and checks.plain and _MXNET_INFER_SHAPE is not None:
            # (MXNet's own: gluon_cf's reads the graph's JSON first, ~50 us, to find nodes)
            _, outs, _ = _MXNET_INFER_SHAPE(internals, True, **given)
        else:
            _, outs, _ = internals.infer_shape_partial(**given)
    except mx.MXNetError:
        return      # (MXNet's own error follows, where the graph runs)
    shape_of = {tuple(h[:2]): tuple(o) for h, o in zip(heads, outs or ())}
    for nid, n in enumerate(nodes):
        if n["op"] == "Reshape" and n["inputs"]:
            error = reshape_error(n, shape_of.get(tuple(n["inputs"][0][:2])),
                                  shape_of.get((nid, 0)))
            if error is not None:
                raise error


def as_list(out):
    """A CachedOp's outputs as a list (it returns a graph's only output alone)."""
    return list(out) if isinstance(out, (list, tuple)) else [out]


class CachedGraph(CachedOpPair):
    """The CachedOps of a graph (:class:`CachedOpPair`); a call with a zero-size input runs
    the graph's operators one by one instead, as eager code does (NOTE [zero-size calls]).

    ``origins`` names what computed each input (input name -> text), for the error a
    zero-size input gets."""

    def __init__(self, symbol, origins=None, reshape_checks=None):
        super().__init__(symbol)
        self.origins = origins or {}
        self._nodes = None
        self._checking = None
        # NOTE [a reshape to another size]; a Graph's threads share its own: a check holds
        # for the graph, whichever of MXNet's Custom-op threads runs it
        self._reshape_checks = ReshapeChecks() if reshape_checks is None else reshape_checks
        # input shapes -> the nodes computing a zero-size array from them, by name: its shape
        # (NOTE [zero-size values computed inside a graph])
        self._zero_size_nodes: Dict[tuple, Dict[str, tuple]] = {}

    def __call__(self, *args, out=None):
        shapes = () if self.constant else tuple(shape_or_no_element(a) for a in args)
        if not self.constant and (any(0 in s for s in shapes) or
                                  self.zero_size_nodes(shapes)):
            outputs = self._op_by_op(args, shapes)
            if out is None:
                return outputs
            for dst, value in zip(out, outputs):
                dst[:] = value
            return out
        if not self.constant:
            self.check_reshapes(shapes)
        checking = self.bounds_checking()
        try:
            outputs = super().__call__(*args, out=out)
            if checking:   # NOTE [an index out of bounds at run time]
                for o in as_list(outputs):
                    o.wait_to_read()
            return outputs
        except mx.MXNetError as err:   # NOTE [operators refusing shapes at run time]
            ours = bounds_error(checking, err) or graph_operator_error(self._json_nodes(), err)
            if ours is None:
                raise
            raise ours from None

    def bounds_checking(self):
        """The nodes of this graph that check their indices when they run (NOTE [an index
        out of bounds at run time]), found once."""
        if self._checking is None:
            self._checking = bounds_checking_nodes(self._json_nodes())
        return self._checking

    def zero_size_nodes(self, shapes):
        """The nodes that compute a zero-size array from inputs of ``shapes`` (none of them
        zero-size), by name: the array's shape, by MXNet's shape inference, once per shapes."""
        known = self._zero_size_nodes.get(shapes)
        if known is None:
            known = {}
            ops = [n["op"] for n in self._json_nodes()]
            if any(_may_make_zero_size(op) for op in ops) and \
                    not any(op == "Custom" or op in DYNAMIC_SHAPE_OPS for op in ops):
                names = set(self.symbol.list_arguments())
                try:
                    internals = self.symbol.get_internals()
                    _, outs, _ = internals.infer_shape_partial(**{
                        n: s for n, s in zip(self.symbol.list_inputs(), shapes) if n in names})
                    known = {name[:-len("_output")]: tuple(shape) for name, shape in
                             zip(internals.list_outputs(), outs or ())
                             if shape and 0 in shape}
                except mx.MXNetError:
                    pass
            if len(self._zero_size_nodes) >= 1024:
                self._zero_size_nodes.clear()
            self._zero_size_nodes[shapes] = known
        return known

    def check_reshapes(self, shapes):
        """Raise the error of a Reshape of another size in the graph, for inputs of ``shapes``
        (NOTE [a reshape to another size])."""
        check_reshapes(self.symbol, self._json_nodes(), shapes, self._reshape_checks)

    def _json_nodes(self):
        if self._nodes is None:
            js = json.loads(self.symbol.tojson())
            self._nodes, self._heads = js["nodes"], [tuple(h[:2]) for h in js["heads"]]
        return self._nodes

    def _op_by_op(self, args, shapes):
        nodes = self._json_nodes()
        by_name = dict(zip(self.symbol.list_inputs(), args))
        values, origin = {}, {}   # entry -> NDArray; entry -> what made it zero-size
        made_here = self.zero_size_nodes(shapes)   # (as __call__ read them)
        for nid, n in enumerate(nodes):
            if n["op"] == "null":
                values[(nid, 0)] = by_name[n["name"]]
                origin[(nid, 0)] = self.origins.get(n["name"], "input %r" % n["name"])
                continue
            entries = [tuple(i[:2]) for i in n["inputs"]]
            inputs = [values[e] for e in entries]
            if n["op"] in SAME_WHEN_EMPTY and len(inputs) == 1 and 0 in inputs[0].shape:
                values[(nid, 0)], origin[(nid, 0)] = inputs[0], origin[entries[0]]
                continue        # (no element to copy or reverse: the array itself)
            crashing = crashing_zero_size(n["op"], [x.shape for x in inputs])
            if crashing:
                raise zero_size_error(n, inputs, [(k, origin[entries[k]]) for k in crashing],
                                       CRASH_DETAIL)
            if n["op"] in _SLICES and n["name"] in made_here and _indexing(n["name"]) and \
                    not any(0 in x.shape for x in inputs):
                # (an index keeping nothing, autograph's ``x[1:]`` of one row: eagerly a view
                # of no row; the slice operator's MKLDNN kernel fails on it, "delay_alloc")
                values[(nid, 0)] = mx.nd.empty(made_here[n["name"]], ctx=inputs[0].context,
                                               dtype=inputs[0].dtype)
                origin[(nid, 0)] = "%s (node %r)" % (n["op"], n["name"])
                continue
            try:
                unrecorded = inputs and all(0 in x.shape for x in inputs) and \
                    mx.autograd.is_recording()
                with mx.autograd.pause(train_mode=mx.autograd.is_training()) if unrecorded \
                        else contextlib.nullcontext():
                    out = invoke(n["op"], inputs, visible_attrs(n))
                if n["name"] in made_here and not any(0 in x.shape for x in inputs):
                    # (MXNet makes its shape, and computes it or fails, "delay_alloc", later)
                    try:
                        for o in out:
                            o.wait_to_read()
                    except mx.MXNetError:
                        raise _zero_size_made(n, inputs) from None
            except mx.MXNetError as err:
                empty = [(k, e) for k, e in enumerate(entries) if 0 in values[e].shape]
                if not empty:
                    ours = operator_error(n, inputs, err)
                    if ours is None:
                        raise
                    raise ours from None
                raise zero_size_error(n, inputs, [(k, origin[e]) for k, e in empty],
                                       err) from None
            made = next((origin[e] for e in entries if 0 in values[e].shape), None)
            for k, o in enumerate(out):
                values[(nid, k)] = o
                if made is not None:
                    origin[(nid, k)] = made
                elif 0 in o.shape:     # (made here from inputs of some size: a slice)
                    origin[(nid, k)] = origin_of(n)
        return [values[h] for h in self._heads]


# NOTE [zero-size calls]
#     MXNet 1.x reads a 0 in a shape as "unknown" (its legacy shape semantics), and a CachedOp
#     keeps what it inferred and planned for the input shapes it last saw. A CachedOp that has
#     run on (3, 3) and is then given the (0, 3) rows of a boolean_mask that kept none fails
#     ("Cannot find attribute forward_mem_plan"), while a fresh one computes the same call (a
#     sum over no rows): whether a call worked depended on the calls before it. So a call with
#     a zero-size input never reaches a CachedOp: the graph's operators run one by one,
#     imperatively, recorded by autograd like eager code, which holds no state between calls.
#     What works eagerly on zero-size arrays (reductions, slices, boolean_mask itself) then
#     works hybridized, on every call; an operator MXNet 1.x refuses on them (FullyConnected,
#     scalar arithmetic) is a ZeroSizeError naming that operator, its line in the user's code
#     and what computed the zero-size array, the same on every call. Such calls are rare (empty
#     masks, loops of no step), so their speed does not matter.
#     Under autograd, an operator whose every input is zero-size runs unrecorded: what it
#     computes (a sum over no rows) depends on no element of anything, so its gradient is
#     zero, and MXNet 1.x's backward cannot pass through a zero-size array at all ("Shape dim
#     size cannot be a negative value -1", eagerly too). An operator that also reads other
#     arrays stays recorded, so their gradients are kept.


def origin_of(node):
    """What a graph node computed, for the message of a zero-size input it fed."""
    where = node.get("attrs", {}).get(SOURCE_ATTR)
    at = " at " + where if where else ""
    kind = registry.kind_of(node)
    if kind is not None:
        return "an output of gluon_cf.%s%s" % (kind, at)
    if node["op"] == "null":
        return "input %r" % node["name"]
    return "the result of %s%s" % (node["op"], at)


# NOTE [zero-size values computed inside a graph]
#     A slice keeping nothing (``F.slice(x, begin=(3,), end=(None,))`` of 3 rows) makes a
#     zero-size array inside a graph whose inputs are not: a CachedOp ran it or failed
#     ("Check failed: delay_alloc") depending on the calls before, and its backward could not
#     be planned ("shape_num_unknown_nodes"), MXNet's raw messages. Where MXNet's shape
#     inference gives a node of the graph a zero-size output for the call's input shapes,
#     the graph's operators run one by one as for a zero-size input (NOTE [zero-size calls]),
#     as eager code does: MXNet computes the array (``repeat`` of 0) or fails ("delay_alloc",
#     a slice: its MKLDNN kernel), and then the operator making it is a ZeroSizeError naming
#     it and the user's line, on every call. Inferred once per input shapes, and only for graphs
#     holding an operator that can make such an array (``_ZERO_SIZE_MAKERS``: a slice ...; the rest
#     cost no inference); graphs holding Custom operators (gluon_cf nodes) are not inferred here.
#     Autograph's indexing keeping no row (``x[1:]`` of one row, a ``slice`` node named after
#     the user's line, ``_indexing``) is eagerly NDArray indexing, a view of no row that
#     works: its value is made from the inferred shape (an empty array), not by the
#     operator; an ``F.slice`` the user wrote fails eagerly and so here.


# Words in the names of the operators that can make an array with a zero dimension from
# arrays of some size (slices, crops, splits, tiles, repeats, pads, reshapes, broadcasts): a
# graph holding none is not inferred for it (a graph per call shape costs an inference)
_ZERO_SIZE_MAKERS = ("slice", "crop", "split", "tile", "repeat", "pad", "reshape", "broadcast")


# Slices (one output, of their first input's dtype) of autograph's indexing keeping nothing:
# their zero-size value is made from its shape, not by the operator (NOTE [zero-size values
# computed inside a graph])
_SLICES = ("slice", "slice_axis", "slice_like", "crop")


def _indexing(name):
    """Whether node ``name`` is autograph's indexing of a tensor (``model_line12_index0``:
    ``x[1:]``, eagerly NDArray indexing, a view of no row where it keeps none), not an
    ``F.slice`` the user wrote (eagerly MXNet's operator, which fails on it too)."""
    return named_after(name, "_index") is not None


def _may_make_zero_size(op):
    name = op.lower()
    return any(word in name for word in _ZERO_SIZE_MAKERS)


# NOTE [zero-size values in a block's own graph]
#     A block's graph holding gluon_cf nodes runs as MXNet's CachedOp, which does not look at
#     what its operators make: a slice keeping no row (``F.slice(x, begin=(1,), end=(-1,))`` of
#     2 rows) summed there killed the process (SIGFPE in the reduction, an allocated array of
#     no element; the same graph without gluon_cf nodes fails with "Check failed:
#     delay_alloc"). So a call whose input shapes make a slice, crop, split, tile or repeat of
#     the graph give a zero-size output (MXNet's inference, once per input shapes, of those
#     operators' outputs only) runs partitioned, where the segments are CachedGraphs (NOTE
#     [zero-size values computed inside a graph]): its ZeroSizeError names the operator, on
#     every call. A 0 that is an unknown dim (MXNet's legacy shapes: after a node of run-time
#     shape) also runs it partitioned, which such graphs do anyway. Outputs gluon_cf nodes
#     read count too (since session 34): a foreach over autograph's ``x[1:]`` of one row was
#     the CachedOp's, whose node refused the zero-size input (IncompleteShapeError, "Skip the
#     call for empty inputs"), where eagerly it runs no step and a zero-size block input
#     ran it partitioned.
SIZE_CUTTERS = ("slice", "crop", "split", "tile", "repeat")


def makes_zero_size(symbol, nodes, shapes):
    """Whether a slice, crop, split, tile or repeat among JSON ``nodes`` (``symbol``'s) gives
    a zero-size output that an operator other than a gluon_cf node reads, for inputs
    (``symbol.list_inputs()``) of ``shapes`` (NOTE [zero-size values in a block's own
    graph])."""
    cutters = {k for k, n in enumerate(nodes)
               if n["op"] != "null" and any(w in n["op"].lower() for w in SIZE_CUTTERS)}
    read = sorted({(node, index) for reader in nodes if reader["op"] != "null"
                   for node, index, *_ in reader["inputs"] if node in cutters})
    if not read:
        return False
    group = _entries_of(nodes, read)
    known = set(group.list_inputs())
    try:
        _, outs, _ = group.infer_shape_partial(**{
            name: tuple(shape) for name, shape in zip(symbol.list_inputs(), shapes)
            if name in known and shape is not None})
    except mx.MXNetError:
        return False   # (MXNet's own error follows, where the graph runs)
    return any(shape is not None and 0 in shape for shape in outs or ())


# (the version MXNet's JSON carries: without it, load_json upgrades the graph as an old file's)
_MXNET_VERSION = int("".join("%02d" % int(v) for v in mx.__version__.split(".")[:3]))


def _entries_of(nodes, entries):
    """A symbol of the outputs ``entries`` ((node id, output index) of JSON ``nodes``) and
    what they read. By node id, not name: a block called twice in one
    graph (a shared encoder) makes nodes of one name where autograph names them after the
    user's line, and a name would also select the other call's node, read otherwise."""
    keep, todo = set(), [node for node, _ in entries]
    while todo:
        node = todo.pop()
        if node not in keep:
            keep.add(node)
            todo.extend(i[0] for i in nodes[node]["inputs"])
    new_id = {old: new for new, old in enumerate(sorted(keep))}
    kept = [dict(nodes[old], inputs=[[new_id[i[0]]] + list(i[1:]) for i in nodes[old]["inputs"]])
            for old in sorted(keep)]
    return mx.sym.load_json(json.dumps({
        "nodes": kept, "arg_nodes": [k for k, n in enumerate(kept) if n["op"] == "null"],
        "heads": [[new_id[node], index, 0] for node, index in entries],
        "attrs": {"mxnet_version": ["int", _MXNET_VERSION]}}))


def _zero_size_made(node, inputs):
    """ZeroSizeError for operator ``node`` (a JSON node) making a zero-size array from
    ``inputs`` of some size (NOTE [zero-size values computed inside a graph])."""
    return ZeroSizeError(
        "gluon_cf: %s computes a zero-size array from inputs of shapes %s; MXNet 1.x reads a "
        "0 in a shape as an unknown size and cannot compute it, eagerly either (\"Check "
        "failed: delay_alloc\"), nor its backward. Guard the computation with gluon_cf.cond "
        "on the number of rows, or keep at least one row"
        % (describe_node(node), ", ".join(str(x.shape) for x in inputs)),
        located=SOURCE_ATTR in node.get("attrs", {}))


def zero_size_error(node, inputs, empty, err):
    """ZeroSizeError for operator ``node`` (a JSON node) refusing its zero-size inputs
    (``empty``: (input position, what computed it)), MXNet's error ``err``."""
    detail = next((line.strip() for line in str(err).splitlines()
                   if line.strip().startswith("MXNetError") or "Check failed" in line),
                  str(err).strip().splitlines()[-1] if str(err).strip() else "").rstrip(".")
    return ZeroSizeError(
        "gluon_cf: %s was given a zero-size array (%s); MXNet 1.x reads a 0 in a shape as an "
        "unknown size, and this operator cannot compute on it, eagerly either (%s). Guard "
        "the computation with gluon_cf.cond on the number of rows, or keep at least one row"
        % (describe_node(node),
           "; ".join("input %d of shape %s, %s" % (k, inputs[k].shape, what)
                     for k, what in empty), detail),
        located=SOURCE_ATTR in node.get("attrs", {}))


def block_index_gradients(js):
    """Put a ``BlockGrad`` on the index inputs of ops like ``Embedding``, and the bounds check
    of NOTE [index_copy out of bounds] on ``index_copy``'s rows.

    ``js`` is a parsed symbol JSON (left unchanged); returns the new JSON text, or ``None`` when
    the graph has no such op.

    A subgraph runs as one CachedOp, which autograd sees as one node: every output of a recorded
    call counts as depending on every input. So an index computed next to differentiable values
    (a loop counter updated in the same body as the states) looks differentiable, and backward
    asks ``Embedding`` for a gradient w.r.t. its indices, which MXNet refuses. That gradient is
    not defined anyway; blocking it says so explicitly (``take`` likewise cannot accumulate into
    its indices' gradient).
    """
    nodes = js["nodes"]
    if not any(n["op"] in INDEX_INPUTS or n["op"] == INDEX_COPY for n in nodes):
        return None
    new_nodes: List[JsonNode] = []
    new_id: Dict[int, int] = {}   # old node id -> new
    for nid, n in enumerate(nodes):
        n = dict(n, inputs=[[new_id[i[0]], i[1], 0] for i in n["inputs"]])
        if n["op"] == INDEX_COPY and len(n["inputs"]) == 3:
            n["inputs"][1] = _checked_rows(new_nodes, n)
        for k in INDEX_INPUTS.get(n["op"], ()):
            new_nodes.append({"op": "BlockGrad", "name": "%s_index%d_blockgrad" % (n["name"], k),
                              "inputs": [n["inputs"][k]]})
            n["inputs"][k] = [len(new_nodes) - 1, 0, 0]
        new_id[nid] = len(new_nodes)
        new_nodes.append(n)
    blocked = {k: v for k, v in js.items() if k != "node_row_ptr"}
    blocked["nodes"] = new_nodes
    blocked["arg_nodes"] = [i for i, n in enumerate(new_nodes) if n["op"] == "null"]
    blocked["heads"] = [[new_id[h[0]], h[1], 0] for h in js["heads"]]
    return json.dumps(blocked)


# NOTE [index_copy out of bounds]
#     MXNet 1.9.1's ``index_copy`` kernel checks no row it writes (index_copy.cc: a memcpy to
#     ``out + idx[i] * row size``): an index out of range, or negative, writes outside the
#     array, and the process aborts later ("terminate called without an active exception"),
#     in a loop body or a cond branch as eagerly. In the graphs gluon_cf runs (as
#     ``block_index_gradients`` rewrites them: bodies, branches, recursions' functions) the
#     rows it writes are checked first, by ``take(arange_like(old, axis=0), fix(index),
#     mode='raise')`` (``fix``: the kernel's truncation of a float index), which reads the
#     indices on the host and fails when one is outside [0, rows); the index reaches
#     index_copy through ``where(checked, index, index)``, so that MXNet's engine skips the
#     copy when the check failed. The take carries the index_copy's source line and
#     ``CHECKS_ATTR``: the error is an IndexOutOfBoundsError at the user's line naming
#     index_copy (NOTE [an index out of bounds at run time]). Only graphs holding index_copy
#     pay (a take of one element per row copied). Eager MXNet outside gluon_cf's graphs, and
#     MXNet's own CachedOp of a block's top-level graph, are MXNet's own.
INDEX_COPY = "_contrib_index_copy"


def _checked_rows(new_nodes, node):
    """Append to ``new_nodes`` the check of the rows JSON ``index_copy`` ``node`` writes (its
    inputs already renumbered); the entry of its checked index (NOTE [index_copy out of
    bounds])."""
    old, index = node["inputs"][0], node["inputs"][1]
    attrs = {key: value for key, value in node.get("attrs", {}).items() if key == SOURCE_ATTR}
    prefix = "%s_index_bounds" % node["name"]

    def add(op, inputs, **op_attrs):
        new_nodes.append({"op": op, "name": "%s_%s" % (prefix, op.strip("_")),
                          "attrs": {k: str(v) for k, v in op_attrs.items()}, "inputs": inputs})
        return [len(new_nodes) - 1, 0, 0]

    rows = add("_contrib_arange_like", [old], axis=0)
    checked = add("take", [rows, add("fix", [index])], mode="raise", axis=0,
                  **attrs, **{CHECKS_ATTR: INDEX_COPY})
    return add("BlockGrad", [add("where", [checked, index, index])])
