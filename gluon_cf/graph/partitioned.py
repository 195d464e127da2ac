"""Partitioned execution: :class:`PartitionedGraph` runs a graph holding gluon_cf nodes, user
CustomOps or dynamic-shape operators as CachedOp segments of its ordinary operators and, between
them, those pieces called one by one in the calling thread; it also infers such a graph's shapes
in Python, piece by piece (NOTE [run-time shapes] in ``shape_inference.py``).

NOTE [partitioned execution]
    MXNet runs ``Custom`` operators on worker threads, and a Custom node whose forward blocks on a
    nested Custom node (a ``cond`` inside a ``foreach`` body, a recursive ``invoke``) deadlocks or
    needs a thread per nesting level. So only the *outermost* gluon_cf node of a graph is an MXNet
    Custom operator at run time. When a subgraph contains gluon_cf nodes, we cut it at them: the
    ordinary operators between them become CachedOp *segments*, and the gluon_cf nodes are run by
    their rules directly, in the calling thread. Under ``autograd.record()`` the whole thing is
    recorded as usual, so gradients need nothing special.

    Segments and nodes are ordered by stage (NOTE [staging] in ``staging.py``, shared with the
    artifact loader).
"""
import functools
import json
from typing import Dict, List, Set, Union

import mxnet as mx
import numpy as np

from .. import registry, staging
from .._cachedop import default_layout
from .._custom_ops import engine_calls_us
from ..errors import ZeroSizeError, note_no_element
from ..executor import Parallel, done
from ..operators import (CRASH_DETAIL, DYNAMIC_SHAPE_OPS, SOURCE_ATTR, crashing_zero_size,
                         describe_node, reshaped_shape)
from .cached_graph import (CachedGraph, Entry, JsonNode, as_list, invoke, origin_of,
                           reshape_error, visible_attrs, zero_size_error)
from .operator_errors import operator_error
from .shape_inference import (for_rule, infer_by_mxnet, learn, mxnet_infer_shape_partial,
                              run_time_dims)


def _step_kind(node):
    """What a JSON node is for partitioning: a gluon_cf op kind, ``"user_custom"`` or None."""
    return registry.kind_of(node) or ("user_custom" if registry.is_user_custom(node) else None)


def _piece_kind(node):
    """What a JSON node is for partitioning: :func:`_step_kind`, or ``"run_time_shape"`` for
    an operator of DYNAMIC_SHAPE_OPS (run on its own between CachedOps, NOTE [run-time
    shapes])."""
    return _step_kind(node) or ("run_time_shape" if node["op"] in DYNAMIC_SHAPE_OPS else None)


def has_gluon_cf_nodes(graph_json):
    """Whether a graph must run partitioned (it holds gluon_cf nodes or user CustomOps)."""
    return any(_step_kind(n) for n in graph_json["nodes"])


class _Segment:
    """Ordinary operators between gluon_cf nodes, as one CachedOp."""

    def __init__(self, symbol, in_entries, out_entries, depends_on, origins):
        self.symbol = symbol
        self.origins = origins   # input name -> what computed it, for ZeroSizeError
        # out entry -> the in entries it is computed from: an output is batched only if one of
        # those is (a constant beside batched values stays shared, NOTE [batching]).
        self.depends_on = depends_on
        names = symbol.list_inputs()
        by_name = {"e%d_%d" % e: e for e in in_entries}
        self.in_entries = [by_name[n] for n in names]
        self.names = names
        self.out_entries = out_entries
        self._op = None
        self._json = None

    @property
    def op(self):
        if self._op is None:   # built on first run (inference alone needs none)
            self._op = CachedGraph(self.symbol, self.origins)
        return self._op

    def run(self, values):
        out = self.op(*[values[e] for e in self.in_entries])
        values.update(zip(self.out_entries, as_list(out)))

    def infer_shape(self, shapes):
        """Shape inference of the segment by MXNet (NOTE [run-time shapes]); updates
        ``shapes`` (entry -> shape) with what it learns."""
        if self._json is None:
            self._json = json.loads(self.symbol.tojson())
        inputs, outs = infer_by_mxnet(self.symbol, self._json, self.names,
                                      [shapes.get(e) for e in self.in_entries])
        for name, e in zip(self.names, self.in_entries):
            learn(shapes, e, inputs.get(name))
        for e, shape in zip(self.out_entries, outs):
            learn(shapes, e, shape)
        self._infer_backwards(shapes)

    def _infer_backwards(self, shapes):
        """Inputs left unknown, from the shapes the segment's outputs must have (learned from
        the gluon_cf nodes reading them): MXNet infers backwards through operators, and its
        own foreach tells what its body needs of a value computed outside it (``tanh(w)``
        read in the body gives ``w``'s shape); the walk went forwards only. Each such output
        is added to a variable of its shape (``elemwise_add`` infers either way)."""
        complete = registry.is_complete
        missing = [n for n, e in zip(self.names, self.in_entries) if not complete(shapes.get(e))]
        wanted = {k: tuple(shapes[e]) for k, e in enumerate(self.out_entries)
                  if complete(shapes.get(e))}
        if not missing or not wanted:
            return
        # (partial shapes too, 0 for an unknown dimension: a parameter's declared (0,) gives
        # its rank, which MXNet's whole-graph pass has; without it, expand_dims or transpose
        # before a reshape(-1) inferred nothing backwards)
        known = {n: tuple(shapes[e]) for n, e in zip(self.names, self.in_entries)
                 if isinstance(shapes.get(e), (tuple, list)) and len(shapes[e]) > 0}
        known.update(("__gluon_cf_shape%d" % k, shape) for k, shape in wanted.items())
        constrained = mx.sym.Group([mx.sym.elemwise_add(
            self.symbol[k], mx.sym.var("__gluon_cf_shape%d" % k)) for k in wanted])
        try:
            inputs, _ = mxnet_infer_shape_partial(constrained, known)
        except mx.MXNetError:
            return   # (shapes that disagree: the forward inference or the run says where)
        for name, e in zip(self.names, self.in_entries):
            if name in missing:
                learn(shapes, e, inputs.get(name))


class _CfCall:
    """A gluon_cf node of the graph, run by its op's rules in the calling thread."""

    def __init__(self, kind, spec, in_entries, out_entries):
        self.rule = registry.rule_of(kind)
        self.node = registry.decode(kind, spec)
        self.in_entries = in_entries
        self.out_entries = out_entries

    def infer_shape(self, shapes):
        """The node's rule infers its shapes (NOTE [run-time shapes]); updates ``shapes``."""
        partial_ok = getattr(self.rule, "accepts_partial_shapes", False)
        ins = [for_rule(shapes.get(e), partial_ok) for e in self.in_entries]
        ins, outs = self.rule.infer_shape(self.node, ins)
        for e, shape in zip(self.in_entries, ins):
            learn(shapes, e, shape)
        for e, shape in zip(self.out_entries, outs):
            learn(shapes, e, shape)

    def run(self, values, frame):
        # (recorded training, or on another device, was refused by the block's call: NOTE
        # [training refused by the node] in decoded.py)
        inputs = [values[e] for e in self.in_entries]
        if frame is not None and any(frame.batched(i) for i in range(len(inputs))):
            return self.rule.forward_batched(self.node, inputs, frame)
        out_shapes = None  # inside a batch, rules that need them infer them per row
        if self.rule.needs_out_shapes and (frame is None or frame.rows == 1):
            _, out_shapes = self.rule.infer_shape(self.node, [x.shape for x in inputs])
        return self.rule.forward(self.node, inputs, out_shapes, frame)

    def check_declared(self, values):
        """Raise :class:`UndeclaredShape` when an output's shape or dtype is not the one the
        node's rules declare for its inputs', which MXNet's CachedOp would have inferred (and
        refused) and allocated (NOTE [declared shapes in the calling thread])."""
        _, types = self.rule.infer_type(self.node, [values[e].dtype for e in self.in_entries])
        _, outs = self.rule.infer_shape(self.node, [values[e].shape for e in self.in_entries])
        for e, shape, dtype in zip(self.out_entries, outs, types):
            if not registry.is_complete(shape) or tuple(shape) != values[e].shape or \
                    dtype is None or np.dtype(dtype) != np.dtype(values[e].dtype):
                raise UndeclaredShape(self.node.kind, e, shape, values[e].shape)


class UndeclaredShape(Exception):
    """A gluon_cf node's output of a shape other than its rule declared, on the inline path
    (NOTE [declared shapes in the calling thread]): the call is run again as the CachedOp."""


class _OperatorCall:
    """An MXNet operator of a partitioned graph called on its own, imperatively, between its
    CachedOp segments (JSON node ``node``, reading ``in_entries``, computing ``out_entries``)."""

    def __init__(self, node, in_entries, out_entries, written=()):
        self.written = written   # inputs Python wrote (a gluon_cf node's, a user CustomOp's)
        self.op = node["op"]
        self.node = node
        self.attrs = visible_attrs(node)
        self.in_entries = in_entries
        self.out_entries = out_entries


class _UserCustomCall(_OperatorCall):
    """A user's CustomOp, called imperatively from the executor's thread.

    NOTE [user CustomOps at run time]: inside a CachedOp that runs within a gluon_cf node (itself
    a Custom operator running on one of MXNet's custom-op worker threads), a user's Custom
    operator hangs MXNet about half the time in backward (all engine and custom-op threads idle,
    one completion lost). Called as an imperative ``mx.nd.Custom`` from our thread, as an
    eager model would, it records on the autograd tape like any other operator. In forward
    too: a hybridized foreach whose body calls a user CustomOp hung within 6 predict calls, 3
    runs of 3 (review 29), so a block whose gluon_cf nodes hold one always runs partitioned
    (``hybrid.py``), its nodes in the calling thread; recorded, it is refused (NOTE [training
    refused by the node] in ``decoded.py``).
    """

    def infer_shape(self, shapes):
        """MXNet infers the user's op (its prop's infer_shape); updates ``shapes``."""
        names = ["in%d" % k for k in range(len(self.in_entries))]
        symbol = mx.sym.Custom(*[mx.sym.var(n) for n in names], **self.attrs)
        ins = [shapes.get(e) for e in self.in_entries]
        known = {n: s for n, s in zip(names, ins) if isinstance(s, tuple)}
        inputs, outs = mxnet_infer_shape_partial(symbol, known)
        dynamic = any(registry.is_dynamic(s) for s in ins)
        for n, e in zip(names, self.in_entries):
            learn(shapes, e, inputs.get(n))
        for e, shape in zip(self.out_entries, outs):
            learn(shapes, e, shape if shape else registry.Dynamic() if dynamic else None)

    def run(self, values, frame):
        engine_calls_us()   # NOTE [exit with work pending]
        # NOTE [MKLDNN values read by a node] in _cachedop.py
        out = mx.nd.Custom(*[values[e] if e in self.written else default_layout(values[e])
                             for e in self.in_entries], **self.attrs)
        return done(as_list(out))


class _RunTimeShapeCall(_OperatorCall):
    """An operator whose output shape depends on values (``boolean_mask``), invoked on its own
    between the CachedOps of its graph (NOTE [run-time shapes]): those stay CachedOps of static
    shapes, planned and reused, instead of MXNet running the whole graph op by op."""

    def infer_shape(self, shapes):
        dims = run_time_dims(self.op, self.attrs, registry.dims_of(shapes.get(self.in_entries[0])))
        for e in self.out_entries:
            learn(shapes, e, registry.Dynamic(dims))

    def run(self, values, frame):
        inputs = [values[e] for e in self.in_entries]
        crashing = crashing_zero_size(self.op, [x.shape for x in inputs])
        if crashing:   # (a boolean_mask's mask of no element: MXNet would end the process)
            raise zero_size_error(self.node, inputs, [(k, "given to it") for k in crashing],
                                  CRASH_DETAIL)
        refused = _mask_refusal(self.op, self.attrs, inputs)
        if refused is not None:
            # in MXNet's words for a shape refused ("Error in operator n: Shape inconsistent"),
            # which gluon_cf turns into an error at the user's line (a body's operator) or at
            # the block's hybrid_forward; invoked on its own, MXNet's own check names no node
            err = mx.MXNetError("Error in operator %s: Shape inconsistent, %s"
                                % (self.node["name"], refused))
            raise operator_error(self.node, inputs, err) or err
        if self.op == "Reshape" and inputs:   # NOTE [a reshape to another size]
            error = reshape_error(self.node, inputs[0].shape,
                                  reshaped_shape(self.attrs, inputs[0].shape))
            if error is not None:
                raise error
        return done(list(invoke(self.op, inputs, self.attrs)))

    def no_element(self, values):
        """The ZeroSizeError of using an output that MXNet cannot hold, or None (NOTE [a
        one-dimensional result of no element])."""
        for e in self.out_entries:
            try:
                values[e].shape   # noqa: B018 - read for MXNet's error
            except mx.MXNetError:
                error = _no_element_error(self.node, [values[i] for i in self.in_entries])
                note_no_element(values[e].handle.value, str(error), error.located)
                return error
        return None


def _mask_refusal(op, attrs, inputs):
    """What is wrong with a boolean_mask's data and mask of other lengths, or None."""
    if op != "_contrib_boolean_mask" or len(inputs) != 2:
        return None
    data, mask = inputs
    axis = int(attrs.get("axis", 0))
    rows = data.shape[axis] if -len(data.shape) <= axis < len(data.shape) else None
    if len(mask.shape) == 1 and rows == mask.shape[0]:
        return None
    return "the mask (shape %s) must be 1-D with one element per row of the data (shape %s) " \
        "along axis %d" % (mask.shape, data.shape, axis)


# NOTE [a one-dimensional result of no element]
#     MXNet 1.x's legacy shapes cannot hold a one-dimensional array of no element ((0,) is an
#     unknown shape: even ``mx.nd.zeros((0,))`` fails), so a ``boolean_mask`` of 1-D data that
#     keeps nothing makes an array whose shape cannot be read ("Shape is unknown", raised by
#     whatever reads it next, with no line). Eager MXNet fails alike. Using such a result (an
#     operator's input, the graph's output) is a ZeroSizeError at the user's line of the
#     boolean_mask, on every call; a result never used is no error, as in MXNet (a gluon_cf
#     node is given it: a cond whose branch that uses it is not taken). Data with a trailing
#     axis (``x.reshape((-1, 1))``) gives a (0, 1) array, which MXNet can hold.


def _no_element_error(node, inputs):
    return ZeroSizeError(
        "gluon_cf: %s kept no element of its 1-D input (shape %s): MXNet 1.x cannot hold a "
        "one-dimensional array of no element (its legacy shapes read (0,) as unknown), eagerly "
        "either. Give the data a trailing axis (x.reshape((-1, 1)), then (0, 1) rows are "
        "possible) or guard the call with gluon_cf.cond on the mask's sum"
        % (describe_node(node), inputs[0].shape if inputs else "?"),
        located=SOURCE_ATTR in node.get("attrs", {}))


class _CfGroup:
    """The gluon_cf nodes of one stage: independent of each other."""

    def __init__(self, calls):
        self.calls = calls


def _call_frame(frame, flags, call):
    if frame is None or flags is None:
        return frame
    return frame.with_flags([flags.get(e, False) for e in call.in_entries])


def _num_outputs(nodes, nid, heads):
    """How many outputs node ``nid`` has: one past the highest output index anything reads
    (a user CustomOp's count is its prop's business; unread trailing outputs do not matter)."""
    used = [idx for n in nodes for src, idx, *_ in n["inputs"] if src == nid]
    used += [idx for src, idx in heads if src == nid]
    return max(used, default=0) + 1


def _declared_shape(var):
    """The ``__shape__`` attribute of a variable node, as a tuple (None if absent)."""
    text = var.get("attrs", {}).get("__shape__")
    if not text:
        return None
    shape = tuple(int(d) for d in text.strip("()[] ").replace(" ", "").split(",") if d)
    return shape or None


class PartitionedGraph:
    """Runs like a CachedOp, through ``run(inputs, frame)``, inputs in ``list_inputs()`` order."""

    def __init__(self, symbol):
        js = json.loads(symbol.tojson())
        nodes, heads = js["nodes"], [tuple(h[:2]) for h in js["heads"]]
        var_entry = {n["name"]: (nid, 0) for nid, n in enumerate(nodes) if n["op"] == "null"}
        self.input_entries = [var_entry[name] for name in symbol.list_inputs()]
        # Shapes declared on the variables (``mx.sym.var(shape=...)``, known parameters), which
        # MXNet's inference starts from; ours does too.
        self.declared_shapes = [_declared_shape(nodes[e[0]]) for e in self.input_entries]
        self.heads = heads

        kinds = [_piece_kind(n) for n in nodes]
        ops = [nid for nid, n in enumerate(nodes) if n["op"] != "null"]  # staged items
        item_of = {nid: k for k, nid in enumerate(ops)}
        grouped = staging.stages(
            [[item_of[src] for src, *_ in nodes[nid]["inputs"] if src in item_of] for nid in ops],
            [kinds[nid] for nid in ops])

        # Which entries are read across a boundary (by a later segment, a gluon_cf node, a head).
        consumers: Dict[Entry, List[int]] = {}
        for nid, n in enumerate(nodes):
            for src, idx, *_ in n["inputs"]:
                consumers.setdefault((src, idx), []).append(nid)
        self.steps = []
        for ordinary, special in grouped:  # NOTE [staging]
            members = [ops[k] for k in ordinary]
            if members:
                self.steps.append(self._segment(nodes, members, consumers, heads, js))
            calls: List[Union[_CfCall, _OperatorCall]] = []
            for nid in (ops[k] for k in special):
                n = nodes[nid]
                ins = [tuple(i[:2]) for i in n["inputs"]]
                if kinds[nid] in ("user_custom", "run_time_shape"):
                    outs = [(nid, k) for k in range(_num_outputs(nodes, nid, heads))]
                    call = _UserCustomCall if kinds[nid] == "user_custom" else _RunTimeShapeCall
                    calls.append(call(n, ins, outs, {e for e in ins if _step_kind(nodes[e[0]])}))
                    continue
                num_out = json.loads(n["attrs"]["spec"])["num_outputs"]
                calls.append(_CfCall(kinds[nid], n["attrs"]["spec"], ins,
                                     [(nid, k) for k in range(num_out)]))
            if calls:  # independent of each other: one Parallel request (NOTE [batching])
                self.steps.append(_CfGroup(calls))
        self._flag_cache = {}

    @staticmethod
    def _segment(nodes, members, consumers, heads, js):
        member_set = set(members)
        in_entries, seen = [], set()
        for nid in members:
            for src, idx, *_ in nodes[nid]["inputs"]:
                e = (src, idx)
                if src not in member_set and e not in seen:
                    seen.add(e)
                    in_entries.append(e)
        # Outputs: entries of members read outside the segment (later steps or the heads).
        head_set = set(heads)
        out_entries = sorted(e for e, users in consumers.items() if e[0] in member_set
                             and any(u not in member_set for u in users))
        out_entries += sorted(e for e in head_set if e[0] in member_set and e not in out_entries)
        new_nodes: List[JsonNode] = []
        new_id: Dict[Union[Entry, int], int] = {}   # segment input entry or member -> new id
        for e in in_entries:
            new_id[e] = len(new_nodes)
            new_nodes.append({"op": "null", "name": "e%d_%d" % e, "inputs": []})
        arg_nodes = list(range(len(new_nodes)))
        for nid in members:
            n = dict(nodes[nid])
            n["inputs"] = [[new_id[src], idx, 0] if src in member_set
                           else [new_id[(src, idx)], 0, 0]
                           for src, idx, *_ in nodes[nid]["inputs"]]
            new_id[nid] = len(new_nodes)
            new_nodes.append(n)
        graph = {"nodes": new_nodes, "arg_nodes": arg_nodes,
                 "heads": [[new_id[src], idx, 0] for src, idx in out_entries],
                 "attrs": js.get("attrs", {"mxnet_version": ["int", 10901]})}
        symbol = mx.sym.load_json(json.dumps(graph))
        # member node -> the segment inputs it is computed from (all its outputs)
        reads: Dict[int, Set[Entry]] = {}
        for nid in members:
            reads[nid] = set()
            for src, idx, *_ in nodes[nid]["inputs"]:
                reads[nid] |= reads[src] if src in member_set else {(src, idx)}
        origins = {"e%d_%d" % e: origin_of(nodes[e[0]]) for e in in_entries}
        return _Segment(symbol, in_entries, out_entries,
                        {e: reads[e[0]] for e in out_entries}, origins)

    def infer_shape(self, in_shapes):
        """Shapes by inference in Python (NOTE [run-time shapes]): ``in_shapes`` in
        ``list_inputs()`` order, each a tuple (MXNet's 0 for an unknown dimension), None or
        :class:`registry.Dynamic`; returns ``(input shapes, output shapes)`` alike."""
        shapes = {e: s if s is not None else declared for e, s, declared in
                  zip(self.input_entries, in_shapes, self.declared_shapes)
                  if s is not None or declared is not None}
        for _ in range(3):   # a later step may complete an input an earlier one needed
            before = dict(shapes)
            for step in self.steps:
                for item in step.calls if isinstance(step, _CfGroup) else (step,):
                    item.infer_shape(shapes)
            if shapes == before:
                break
        return ([shapes.get(e) for e in self.input_entries], [shapes.get(h) for h in self.heads])

    def run(self, inputs, frame, declared=False, running=None):
        """Generator: run the steps in order; gluon_cf nodes are yielded to the executor.
        ``declared``: check the nodes' outputs against their rules' declared shapes (NOTE
        [declared shapes in the calling thread]). ``running``: a list holding the gluon_cf nodes
        running (those of one step), empty otherwise: where an error came from (the batching
        executor raises it from a node's innermost work, not through this generator)."""
        values = dict(zip(self.input_entries, inputs))
        flags = self._entry_flags(frame.flags) if frame is not None and frame.flags is not None \
            else None
        # entry -> the error of using it (NOTE [a one-dimensional result of no element])
        no_element: Dict[Entry, ZeroSizeError] = {}

        def check(entries):
            error = next((no_element[e] for e in entries if e in no_element), None)
            if error is not None:
                raise error

        for step in self.steps:
            if isinstance(step, _Segment):
                check(step.in_entries)
                step.run(values)
                continue
            for call in step.calls:
                if not isinstance(call, _CfCall):
                    check(call.in_entries)
            if running is not None:   # (NOTE [a failure lost to another thread])
                running[:] = [c.node for c in step.calls if isinstance(c, _CfCall)]
            works = [call.run(values, _call_frame(frame, flags, call)) for call in step.calls]
            results = (yield works[0]) if len(works) == 1 else (yield Parallel(works))
            if running is not None:
                running[:] = []
            for call, outputs in zip(step.calls, [results] if len(works) == 1 else results):
                values.update(zip(call.out_entries, outputs))
                if declared and frame is None and isinstance(call, _CfCall):
                    call.check_declared(values)
                error = call.no_element(values) if isinstance(call, _RunTimeShapeCall) else None
                if error is not None:
                    no_element.update((e, error) for e in call.out_entries)
        check(self.heads)
        return [values[h] for h in self.heads]

    def _entry_flags(self, input_flags):
        """Which entries hold batched values, given which graph inputs do (cached)."""
        key = tuple(input_flags)
        flags = self._flag_cache.get(key)
        if flags is None:
            flags = dict(zip(self.input_entries, key))
            for step in self.steps:
                if isinstance(step, _Segment):
                    flags.update((e, any(flags.get(i, False) for i in step.depends_on[e]))
                                 for e in step.out_entries)
                else:
                    for call in step.calls:
                        batched = any(flags.get(e, False) for e in call.in_entries)
                        flags.update((e, batched) for e in call.out_entries)
            self._flag_cache[key] = flags
        return flags


def inference_graph(symbol_json):
    """A PartitionedGraph of a symbol (by its JSON), for shape inference only."""
    return PartitionedGraph(mx.sym.load_json(symbol_json))


def holds_gluon_cf_nodes(symbol_json):
    """Whether a symbol's JSON text has gluon_cf nodes (MXNet must not infer it alone)."""
    return registry.OP_PREFIX in symbol_json and any(
        registry.kind_of(n) for n in json.loads(symbol_json)["nodes"])
