"""Subgraphs at run time: :class:`Graph` (one body as a CachedOp per thread), the decoded
gluon_cf nodes inside graphs (:class:`Node`), and partitioned execution of graphs that contain
them.

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
import contextlib
import ctypes
import functools
import json
import threading

import mxnet as mx
from mxnet._ctypes.ndarray import _imperative_invoke

from . import registry, rowwise, staging
from ._cachedop import CachedOpPair
from ._custom_ops import is_hidden
from .errors import ZeroSizeError
from .executor import Parallel, done
from .operators import (AUX_STATE_OPS, DYNAMIC_SHAPE_OPS, DYNAMIC_SHAPE_RANKS, INDEX_INPUTS,
                        SOURCE_ATTR, describe_node)
from .symbol_entries import check_node_spec


def _step_kind(node):
    """What a JSON node is for partitioning: a gluon_cf op kind, ``"user_custom"`` or None."""
    return registry.kind_of(node) or ("user_custom" if registry.is_user_custom(node) else None)


def user_custom_op_types(spec):
    """The ``op_type`` of every user CustomOp in a node's subgraphs, nested nodes included."""
    return sorted({n.get("attrs", {}).get("op_type", "?")
                   for n in _nodes_of(spec) if registry.is_user_custom(n)})


def aux_state_nodes(spec, ops):
    """The JSON nodes of a node's subgraphs (nested included) whose operator is in ``ops``."""
    return [n for n in _nodes_of(spec) if n["op"] in ops]


def _nodes_of(spec):
    """Every JSON node of a node's subgraphs, nested gluon_cf nodes' subgraphs included."""
    for graph in spec.get("graphs", {}).values():
        for n in json.loads(graph["json"])["nodes"]:
            yield n
            if registry.kind_of(n):
                yield from _nodes_of(json.loads(n["attrs"]["spec"]))


def _piece_kind(node):
    """What a JSON node is for partitioning: :func:`_step_kind`, or ``"run_time_shape"`` for
    an operator of DYNAMIC_SHAPE_OPS (run on its own between CachedOps, NOTE [run-time
    shapes])."""
    return _step_kind(node) or ("run_time_shape" if node["op"] in DYNAMIC_SHAPE_OPS else None)


def has_gluon_cf_nodes(graph_json):
    """Whether a graph must run partitioned (it holds gluon_cf nodes or user CustomOps)."""
    return any(_step_kind(n) for n in graph_json["nodes"])


class CachedGraph(CachedOpPair):
    """The CachedOps of a graph (:class:`CachedOpPair`); a call with a zero-size input runs
    the graph's operators one by one instead, as eager code does (NOTE [zero-size calls]).

    ``origins`` names what computed each input (input name -> text), for the error a
    zero-size input gets."""

    _handles: dict = {}

    def __init__(self, symbol, origins=None):
        super().__init__(symbol)
        self.origins = origins or {}
        self._nodes = None

    def __call__(self, *args):
        if not self.constant and any(0 in a.shape for a in args):
            return self._op_by_op(args)
        return super().__call__(*args)

    def _op_by_op(self, args):
        if self._nodes is None:
            js = json.loads(self.symbol.tojson())
            self._nodes, self._heads = js["nodes"], [tuple(h[:2]) for h in js["heads"]]
        by_name = dict(zip(self.symbol.list_inputs(), args))
        values, origin = {}, {}   # entry -> NDArray; entry -> what made it zero-size
        for nid, n in enumerate(self._nodes):
            if n["op"] == "null":
                values[(nid, 0)] = by_name[n["name"]]
                origin[(nid, 0)] = self.origins.get(n["name"], "input %r" % n["name"])
                continue
            entries = [tuple(i[:2]) for i in n["inputs"]]
            inputs = [values[e] for e in entries]
            attrs = {k: v for k, v in n.get("attrs", {}).items() if not is_hidden(k)}
            try:
                unrecorded = inputs and all(0 in x.shape for x in inputs) and \
                    mx.autograd.is_recording()
                with mx.autograd.pause(train_mode=mx.autograd.is_training()) if unrecorded \
                        else contextlib.nullcontext():
                    out = _imperative_invoke(self._handle(n["op"]), inputs, list(attrs),
                                             list(attrs.values()), None, 0, 1)
            except mx.MXNetError as err:
                empty = [(k, e) for k, e in enumerate(entries) if 0 in values[e].shape]
                if not empty:
                    raise
                raise _zero_size_error(n, inputs, [(k, origin[e]) for k, e in empty],
                                       err) from None
            made = next((origin[e] for e in entries if 0 in values[e].shape), None)
            for k, o in enumerate(out):
                values[(nid, k)] = o
                if made is not None:
                    origin[(nid, k)] = made
        return [values[h] for h in self._heads]

    @classmethod
    def _handle(cls, op):
        handle = cls._handles.get(op)
        if handle is None:
            handle = mx.base.OpHandle()
            mx.base.check_call(mx.base._LIB.NNGetOpHandle(mx.base.c_str(op),
                                                         ctypes.byref(handle)))
            handle = cls._handles[op] = handle.value
        return handle


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


def _origin(node):
    """What a graph node computed, for the message of a zero-size input it fed."""
    where = node.get("attrs", {}).get(SOURCE_ATTR)
    at = " at " + where if where else ""
    kind = registry.kind_of(node)
    if kind is not None:
        return "an output of gluon_cf.%s%s" % (kind, at)
    if node["op"] == "null":
        return "input %r" % node["name"]
    return "the result of %s%s" % (node["op"], at)


def _zero_size_error(node, inputs, empty, err):
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
        out = out if isinstance(out, (list, tuple)) else [out]
        values.update(zip(self.out_entries, out))

    def infer_shape(self, shapes):
        """Shape inference of the segment by MXNet (NOTE [run-time shapes]); updates
        ``shapes`` (entry -> shape) with what it learns."""
        if self._json is None:
            self._json = json.loads(self.symbol.tojson())
        inputs, outs = infer_by_mxnet(self.symbol, self._json, self.names,
                                      [shapes.get(e) for e in self.in_entries])
        for name, e in zip(self.names, self.in_entries):
            _learn(shapes, e, inputs.get(name))
        for e, shape in zip(self.out_entries, outs):
            _learn(shapes, e, shape)


class _CfCall:
    def __init__(self, kind, spec, in_entries, out_entries):
        self.rule = registry.rule_of(kind)
        self.node = decode(kind, spec)
        self.in_entries = in_entries
        self.out_entries = out_entries

    def infer_shape(self, shapes):
        """The node's rule infers its shapes (NOTE [run-time shapes]); updates ``shapes``."""
        partial_ok = getattr(self.rule, "accepts_partial_shapes", False)
        ins = [_for_rule(shapes.get(e), partial_ok) for e in self.in_entries]
        ins, outs = self.rule.infer_shape(self.node, ins)
        for e, shape in zip(self.in_entries, ins):
            _learn(shapes, e, shape)
        for e, shape in zip(self.out_entries, outs):
            _learn(shapes, e, shape)

    def run(self, values, frame):
        inputs = [values[e] for e in self.in_entries]
        if frame is not None and any(frame.batched(i) for i in range(len(inputs))):
            return self.rule.forward_batched(self.node, inputs, frame)
        out_shapes = None  # inside a batch, rules that need them infer them per row
        if self.rule.needs_out_shapes and (frame is None or frame.rows == 1):
            _, out_shapes = self.rule.infer_shape(self.node, [x.shape for x in inputs])
        return self.rule.forward(self.node, inputs, out_shapes, frame)


class _UserCustomCall:
    """A user's CustomOp, called imperatively from the executor's thread.

    NOTE [user CustomOps at run time]: inside a CachedOp that runs within a gluon_cf node (itself
    a Custom operator running on one of MXNet's custom-op worker threads), a user's Custom
    operator hangs MXNet about half the time in backward (all engine and custom-op threads idle,
    one completion lost). Called as an imperative ``mx.nd.Custom`` from our thread, as an
    eager model would, it records on the autograd tape like any other operator.
    """

    def __init__(self, node, in_entries, out_entries):
        self.attrs = {k: v for k, v in node.get("attrs", {}).items() if not is_hidden(k)}
        self.in_entries = in_entries
        self.out_entries = out_entries

    def infer_shape(self, shapes):
        """MXNet infers the user's op (its prop's infer_shape); updates ``shapes``."""
        names = ["in%d" % k for k in range(len(self.in_entries))]
        symbol = mx.sym.Custom(*[mx.sym.var(n) for n in names], **self.attrs)
        ins = [shapes.get(e) for e in self.in_entries]
        known = {n: s for n, s in zip(names, ins) if isinstance(s, tuple)}
        inputs, outs = mxnet_infer_shape_partial(symbol, known)
        dynamic = any(registry.is_dynamic(s) for s in ins)
        for n, e in zip(names, self.in_entries):
            _learn(shapes, e, inputs.get(n))
        for e, shape in zip(self.out_entries, outs):
            _learn(shapes, e, shape if shape else registry.Dynamic() if dynamic else None)

    def run(self, values, frame):
        out = mx.nd.Custom(*[values[e] for e in self.in_entries], **self.attrs)
        return done(list(out) if isinstance(out, (list, tuple)) else [out])


class _RunTimeShapeCall:
    """An operator whose output shape depends on values (``boolean_mask``), invoked on its own
    between the CachedOps of its graph (NOTE [run-time shapes]): those stay CachedOps of static
    shapes, planned and reused, instead of MXNet running the whole graph op by op."""

    _handles: dict = {}

    def __init__(self, node, in_entries, out_entries):
        self.op = node["op"]
        self.attrs = {k: v for k, v in node.get("attrs", {}).items() if not is_hidden(k)}
        self.in_entries = in_entries
        self.out_entries = out_entries
        handle = self._handles.get(self.op)
        if handle is None:
            handle = self._handles[self.op] = mx.base.OpHandle()
            mx.base.check_call(mx.base._LIB.NNGetOpHandle(mx.base.c_str(self.op),
                                                         ctypes.byref(handle)))
        self.handle = handle.value

    def infer_shape(self, shapes):
        dims = _run_time_dims(self.op, self.attrs, registry.dims_of(shapes.get(self.in_entries[0])))
        for e in self.out_entries:
            _learn(shapes, e, registry.Dynamic(dims))

    def run(self, values, frame):
        out = _imperative_invoke(self.handle, [values[e] for e in self.in_entries],
                                 list(self.attrs), list(self.attrs.values()), None, 0, 1)
        return done(list(out))


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


def _learn(shapes, entry, shape):
    """Record ``shape`` for ``entry`` unless it tells less than what is known."""
    if shape is None or (isinstance(shape, tuple) and not shape):
        return
    old = shapes.get(entry)
    if old is None or (isinstance(shape, tuple) and registry.is_complete(shape)
                       and not registry.is_complete(old)):
        shapes[entry] = tuple(shape) if isinstance(shape, (tuple, list)) else shape


def _for_rule(shape, partial_ok):
    """What a rule sees of a shape: complete tuples, Dynamic, None; a shape with unknown
    dimensions is None unless the rule handles those (``accepts_partial_shapes``)."""
    if shape is None or registry.is_dynamic(shape) or registry.is_complete(shape):
        return shape
    return shape if partial_ok else None


_mxnet_infer_shape_impl = mx.sym.Symbol._infer_shape_impl


def mxnet_infer_shape_partial(symbol, known):
    """MXNet's own partial inference: ``({input name: shape}, [output shapes])``, unknown
    shapes as ``()`` (MXNet's form)."""
    args, outs, aux = _mxnet_infer_shape_impl(symbol, True, **known)
    inputs = dict(zip(symbol.list_arguments(), args or []))
    inputs.update(zip(symbol.list_auxiliary_states(), aux or []))
    return inputs, [tuple(o) for o in outs] if outs else [()] * len(symbol.list_outputs())


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
        consumers = {}
        for nid, n in enumerate(nodes):
            for src, idx, *_ in n["inputs"]:
                consumers.setdefault((src, idx), []).append(nid)
        self.steps = []
        for ordinary, special in grouped:  # NOTE [staging]
            members = [ops[k] for k in ordinary]
            if members:
                self.steps.append(self._segment(nodes, members, consumers, heads, js))
            calls = []
            for nid in (ops[k] for k in special):
                n = nodes[nid]
                ins = [tuple(i[:2]) for i in n["inputs"]]
                if kinds[nid] in ("user_custom", "run_time_shape"):
                    outs = [(nid, k) for k in range(_num_outputs(nodes, nid, heads))]
                    call = _UserCustomCall if kinds[nid] == "user_custom" else _RunTimeShapeCall
                    calls.append(call(n, ins, outs))
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
        new_nodes, new_id = [], {}
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
        reads = {}   # member node -> the segment inputs it is computed from (all its outputs)
        for nid in members:
            reads[nid] = set()
            for src, idx, *_ in nodes[nid]["inputs"]:
                reads[nid] |= reads[src] if src in member_set else {(src, idx)}
        origins = {"e%d_%d" % e: _origin(nodes[e[0]]) for e in in_entries}
        return _Segment(symbol, in_entries, out_entries,
                        {e: reads[e[0]] for e in out_entries}, origins)

    def infer_shape(self, in_shapes):
        """Shapes by inference in Python (NOTE [run-time shapes]): ``in_shapes`` in
        ``list_inputs()`` order, each a tuple (MXNet's 0 for an unknown dimension), None or
        :class:`registry.Dynamic`; returns ``(input shapes, output shapes)`` alike."""
        shapes = self.infer_entry_shapes(in_shapes)
        return ([shapes.get(e) for e in self.input_entries], [shapes.get(h) for h in self.heads])

    def infer_entry_shapes(self, in_shapes):
        """:meth:`infer_shape`, returning the shape of every entry it learnt."""
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
        return shapes

    def run(self, inputs, frame):
        """Generator: run the steps in order; gluon_cf nodes are yielded to the executor."""
        values = dict(zip(self.input_entries, inputs))
        flags = self._entry_flags(frame.flags) if frame is not None and frame.flags is not None \
            else None
        for step in self.steps:
            if isinstance(step, _Segment):
                step.run(values)
                continue
            works = [call.run(values, _call_frame(frame, flags, call)) for call in step.calls]
            results = (yield works[0]) if len(works) == 1 else (yield Parallel(works))
            for call, outputs in zip(step.calls, [results] if len(works) == 1 else results):
                values.update(zip(call.out_entries, outputs))
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


# ----------------------------------------------------------------------------------------- graphs

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
#     (node.py), which is also how unknown dimensions (MXNet's 0 placeholder) pass through
#     nodes. Where MXNet itself must run a node as a Custom operator (a Symbol executor), a
#     Dynamic output is refused with DynamicShapeError; a hybridized block runs such a graph
#     partitioned instead (NOTE [partitioned blocks] in ``hybrid.py``).


@functools.lru_cache(maxsize=64)
def inference_graph(symbol_json):
    """A PartitionedGraph of a symbol (by its JSON), for shape inference only."""
    return PartitionedGraph(mx.sym.load_json(symbol_json))


def holds_gluon_cf_nodes(symbol_json):
    """Whether a symbol's JSON text has gluon_cf nodes (MXNet must not infer it alone)."""
    return registry.OP_PREFIX in symbol_json and any(
        registry.kind_of(n) for n in json.loads(symbol_json)["nodes"])


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
    inputs = outs = None
    for attempt in ({**known, **partial}, known) if partial else (known,):
        try:
            inputs, outs = mxnet_infer_shape_partial(symbol, attempt)
            break
        except mx.MXNetError:
            if not dynamic:
                raise
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
    dynamic = []
    for n in js["nodes"]:
        dynamic.append(n["name"] in dynamic_inputs if n["op"] == "null"
                       else any(dynamic[i[0]] for i in n["inputs"]))
    return [dynamic[h[0]] for h in js["heads"]]


def _run_time_dims(op, attrs, data):
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
    return None if rule is None else (None,) * rule


class Graph:
    """A subgraph at run time: its Symbol, its slot map and a CachedOp per thread.

    MXNet runs Custom operators on a pool of worker threads, and one CachedOp must not be entered
    by two threads at once, so each thread compiles its own (they share nothing but the JSON).
    They are kept by thread id, not in a ``threading.local``: MXNet's worker threads are not
    Python threads, and Python gives such a thread a fresh thread state (so an empty
    ``threading.local``) on every callback, which rebuilt every CachedOp on every node call.
    """

    _cache: dict = {}
    _cache_lock = threading.Lock()

    def __init__(self, spec):
        graph_json = json.loads(spec["json"])
        self.partitioned = has_gluon_cf_nodes(graph_json) or any(
            n["op"] in DYNAMIC_SHAPE_OPS for n in graph_json["nodes"])
        blocked = block_index_gradients(graph_json)
        self.symbol = mx.sym.load_json(spec["json"] if blocked is None else blocked)
        self.slots = list(spec["inputs"])
        self.slot_set = frozenset(self.slots)
        self.input_names = self.symbol.list_inputs()
        self.num_outputs = spec["num_outputs"]
        self._ops = {}  # thread id -> CachedGraph or PartitionedGraph
        self._shape_cache = {}
        self._type_cache = {}
        self._row_checks = {}
        self._batched_outputs = {}
        self._take_tables = None
        self._json = None
        self._inference = None  # a PartitionedGraph for shape inference (partitioned graphs)

    @classmethod
    def from_spec(cls, spec):
        key = spec["json"]
        graph = cls._cache.get(key)
        if graph is None:
            # Built outside the lock: loading a graph decodes its nested nodes, which come back
            # here (a non-reentrant lock held across that deadlocked). A rare duplicate build
            # by two threads is harmless; the first one stored wins.
            built = cls(spec)
            with cls._cache_lock:
                graph = cls._cache.setdefault(key, built)
        if graph.slots != list(spec["inputs"]):  # same body, different slot map
            graph = graph._with_slots(spec["inputs"])
        return graph

    def _with_slots(self, slots):
        clone = object.__new__(Graph)
        clone.__dict__.update(self.__dict__)
        clone.slots = list(slots)
        clone.slot_set = frozenset(slots)
        return clone

    def cached_op(self):
        """A CachedOp for this thread, or a PartitionedGraph when the graph contains gluon_cf
        nodes (NOTE [partitioned execution] above)."""
        thread = threading.get_ident()
        op = self._ops.get(thread)
        if op is None:
            if self.partitioned:
                op = PartitionedGraph(self.symbol)
            else:
                op = CachedGraph(self.symbol)
            self._ops[thread] = op
        return op

    def run(self, slots, frame, record=True):
        """A generator computing the outputs (a list of NDArrays) from the slot values.

        ``frame`` is the recursion context of the enclosing recursive function, if any; it is
        passed on to nested gluon_cf nodes (NOTE [trampoline] in ``executor.py``).
        ``record=False`` keeps a plain graph off the autograd tape: for predicates, which are
        only read as Python booleans and never differentiated.
        """
        op = self.cached_op()
        args = [slots[s] for s in self.slots]
        if self.partitioned:
            if frame is not None and frame.flags is not None:  # slot flags -> graph input flags
                frame = frame.with_flags([frame.flags[s] for s in self.slots])
            return op.run(args, frame)
        if record and frame is not None and frame.flags is not None and frame.recursion is not None:
            flags = tuple(frame.flags[s] for s in self.slots)
            if any(flags) and self._rows_independent(args, flags):
                return _request(GraphCall(self, args, flags, frame.rows))
        if record:
            out = op(*args)
        else:
            with mx.autograd.pause(train_mode=mx.autograd.is_training()):
                out = op(*args)
        return done(list(out) if isinstance(out, (list, tuple)) else [out])

    def batched_outputs(self, flags):
        """For each output, whether it depends on an input marked in ``flags`` (per input, in
        ``list_inputs()`` order), so holds the rows of a batch (cached per flags)."""
        key = tuple(flags)
        verdict = self._batched_outputs.get(key)
        if verdict is None:
            if self._json is None:
                self._json = json.loads(self.symbol.tojson())
            batched = {n for n, f in zip(self.input_names, flags) if f}
            # dynamic_outputs tells which heads depend on the named inputs: here the batched.
            verdict = self._batched_outputs[key] = tuple(dynamic_outputs(self._json, batched))
        return verdict

    def _rows_independent(self, args, flags):
        """Whether calls may be concatenated: every operator acts row by row (NOTE [row-wise
        rules]); checked once per signature."""
        return self.rows_rejected(args, flags) is None

    def rows_rejected(self, args, flags):
        """None if the graph may run on stacked rows of its batched inputs (``flags``), else the
        :class:`rowwise.Rejected` saying which operator mixes rows (cached per signature)."""
        key = self.row_check_key(args, flags)
        if key not in self._row_checks:
            if self._json is None:
                self._json = json.loads(self.symbol.tojson())
            shapes = {n: (rowwise.ROWS,) + a.shape[1:] if f else a.shape
                      for n, a, f in zip(self.input_names, args, flags)}
            try:
                rowwise.check_symbol(self.symbol, self._json,
                                     dict(zip(self.input_names, flags)), shapes)
                self._row_checks[key] = None
            except rowwise.Rejected as rejected:
                # Kept without its traceback: the frames would keep the arrays of the call
                # that first asked alive until exit, when freeing them crashes MXNet.
                rejected.__context__ = rejected.__cause__ = None
                self._row_checks[key] = rejected.with_traceback(None)
            except Exception as err:  # noqa: BLE001 - no proof of rows: they run one by one
                first = str(err).strip().splitlines()[0] if str(err).strip() else \
                    type(err).__name__
                self._row_checks[key] = rowwise.Rejected(
                    {"name": "its batching analysis"}, "failed (%s: %s)"
                    % (type(err).__name__, first[:300]), rowwise.HINT_UNKNOWN)
        return self._row_checks[key]

    def row_check_key(self, args, flags):
        """What the row-wise verdict of ``rows_rejected`` depends on: the flags, the shapes of
        batched inputs without their rows, and the shapes of shared inputs - except the number
        of rows of a shared input used only as the table of ``take`` along axis 0 (the
        tokens and child arrays of a forest), which changes no shape inside the graph but
        that input's own, and no rule reads it (NOTE [row-wise rules])."""
        tables = self.take_tables()
        return (tuple(flags), tuple(
            a.shape[1:] if f else ("any rows",) + a.shape[1:] if name in tables else a.shape
            for a, f, name in zip(args, flags, self.input_names)))

    def take_tables(self):
        """Names of the inputs whose every use is as the table of ``take`` along axis 0, in
        this graph or, passed to a ``cond`` or a ``recursion`` node, in its branches or
        functions (cached)."""
        if self._take_tables is None:
            if self._json is None:
                self._json = json.loads(self.symbol.tojson())
            nodes = self._json["nodes"]
            ok = {nid: True for nid, n in enumerate(nodes) if n["op"] == "null"}
            for h in self._json["heads"]:
                ok[h[0]] = False
            for n in nodes:
                for pos, (src, *_) in enumerate(n["inputs"]):
                    if src in ok and ok[src]:
                        ok[src] = _used_as_take_table(n, pos)
            self._take_tables = frozenset(nodes[nid]["name"] for nid, good in ok.items()
                                          if good)
        return self._take_tables

    def infer_shape(self, slot_shapes):
        """Return ``(input_shapes_by_slot, output_shapes)``; unknown shapes are ``None``,
        shapes known only at run time :class:`registry.Dynamic` (NOTE [run-time shapes]).

        Uses partial inference so that shapes of captured parameters can be inferred backwards
        from the body (this is what makes Gluon's deferred initialisation work through a node).
        """
        given = [slot_shapes[s] for s in self.slots]
        key = tuple(given)
        if key in self._shape_cache:
            return self._shape_cache[key]
        if self.partitioned:
            if self._inference is None:
                self._inference = PartitionedGraph(self.symbol)
            ins, outs = self._inference.infer_shape(given)
        else:
            ins, outs = self._infer_plain(given)
        inferred = {s: tuple(x) for s, x in zip(self.slots, ins) if registry.is_complete(x)}
        outs = [o if registry.is_dynamic(o) or registry.is_complete(o) else None for o in outs]
        # Cache only complete answers: a partial one may be completed later (a recursive
        # function's shapes become known during inference, NOTE [recursion design]).
        if None not in outs:
            self._shape_cache[key] = (inferred, outs)
        return inferred, outs

    def _infer_plain(self, given):
        """MXNet infers a graph without gluon_cf nodes (:func:`infer_by_mxnet`)."""
        if self._json is None:
            self._json = json.loads(self.symbol.tojson())
        inputs, outs = infer_by_mxnet(self.symbol, self._json, self.input_names, given)
        return [inputs.get(n) for n in self.input_names], outs

    def infer_type(self, slot_types):
        known = {n: slot_types[s] for n, s in zip(self.input_names, self.slots)
                 if slot_types[s] is not None}
        key = tuple(sorted((k, str(v)) for k, v in known.items()))
        if key in self._type_cache:
            args, outs = self._type_cache[key]
        else:
            args, outs, _ = self.symbol.infer_type_partial(**known)
            if outs and all(o is not None for o in outs):
                self._type_cache[key] = (args, outs)
        inferred = {s: t for s, t in zip(self.slots, args or []) if t is not None}
        return inferred, list(outs) if outs else [None] * self.num_outputs


def _used_as_take_table(node, pos):
    """Whether input ``pos`` of JSON node ``node`` is only ever a table of take along axis 0."""
    if node["op"] == "take":
        return pos == 0 and int(node.get("attrs", {}).get("axis", "0")) == 0
    kind = registry.kind_of(node)
    if kind == "cond" and pos > 0:   # a captured value: what each branch does with it
        return all(name in branch.take_tables()
                   for branch in decode("cond", node["attrs"]["spec"]).graphs.values()
                   for name, slot in zip(branch.input_names, branch.slots) if slot == pos)
    if kind == "recursion":          # the environment: what each function does with it
        decoded = decode("recursion", node["attrs"]["spec"])
        env = pos - decoded.spec["num_args"]
        return env >= 0 and all(
            name in graph.take_tables()
            for qname, graph in decoded.graphs.items()
            for name, slot in zip(graph.input_names, graph.slots)
            if slot == decoded.spec["graphs"][qname]["num_args"] + env)
    return False


class GraphCall:
    """A request to run a plain graph on batched values (``flags`` marks the batched inputs,
    which hold ``rows`` rows). The batching executor defers it and runs the calls of one graph
    together (NOTE [batching] in ``recursion/batching.py``); :func:`executor.run` runs it now.
    """

    __slots__ = ("graph", "args", "flags", "rows")

    def __init__(self, graph, args, flags, rows):
        self.graph, self.args, self.flags, self.rows = graph, args, flags, rows

    def key(self):
        """Calls with equal keys may run as one: same graph, same shared (unbatched) inputs."""
        return (id(self.graph.symbol), self.flags,
                tuple(id(a) for a, f in zip(self.args, self.flags) if not f))

    def unbatched(self):
        out = self.graph.cached_op()(*self.args)
        return done(list(out) if isinstance(out, (list, tuple)) else [out])

    def batched_outputs(self):
        """For each output, whether it holds one row per invocation; an output computed from
        shared inputs alone (a loop's constant counter) is one value for every row."""
        return self.graph.batched_outputs(self.flags)


def _request(call):
    """A generator that hands ``call`` to the executor and returns its result."""
    return (yield call)


def block_index_gradients(js):
    """Put a ``BlockGrad`` on the index inputs of ops like ``Embedding``.

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
    if not any(n["op"] in INDEX_INPUTS for n in nodes):
        return None
    new_nodes, new_id = [], {}
    for nid, n in enumerate(nodes):
        n = dict(n, inputs=[[new_id[i[0]], i[1], 0] for i in n["inputs"]])
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




# ---------------------------------------------------------------------------------- decoded nodes

_SPECS: dict = {}


class Node:
    """A decoded ``spec``: the op's fields plus its subgraphs as runnable :class:`Graph` objects."""

    def __init__(self, kind, spec):
        self.kind = kind
        self.spec = spec
        self.num_inputs = spec["num_inputs"]
        self.num_outputs = spec["num_outputs"]
        self.graphs = {name: Graph.from_spec(g) for name, g in spec["graphs"].items()}
        self.wanted = None  # inputs whose gradient backward asked for (see _NodeOperator)
        self.user_custom_ops = user_custom_op_types(spec)
        self.aux_state_nodes = aux_state_nodes(spec, AUX_STATE_OPS)
        # Whether its subgraphs may compute values of run-time shape (NOTE [run-time shapes]):
        # an operator of DYNAMIC_SHAPE_OPS or a nested node (a cond may change sizes, a
        # while_loop may have exact length). Conservative: it only adds run-time checks.
        self.run_time_shapes = any(n["op"] in DYNAMIC_SHAPE_OPS or registry.kind_of(n)
                                   for n in _nodes_of(spec))


def decode(kind, spec_text):
    key = (kind, spec_text)
    node = _SPECS.get(key)
    if node is None:
        spec = check_node_spec(kind, spec_text)  # NOTE [files are checked before MXNet reads them]
        node = _SPECS[key] = Node(kind, spec)
    return node


registry.set_decoder(decode)
