"""The one subgraph mechanism shared by every gluon_cf op: trace -> capture closure -> CachedOp.

NOTE [closure capture]
    A body function is traced once on fresh variables under an ``AttrScope`` that marks every node
    it creates with MXNet's ``__subgraph_name__`` attribute (a unique name per trace). Anything the
    body uses that does not carry the mark was created outside: a Gluon parameter, an outer input,
    the output of an outer op, or a value captured by a lambda. MXNet's ``MXSymbolCutSubgraph``
    replaces each such edge by a variable named after the outer value; we collect those outer
    Symbols and make them explicit inputs of the control-flow node (``captured``). Variables that
    were created *inside* the trace but are not the fresh inputs (a Gluon parameter whose ``var()``
    was first requested inside the body) are free variables and are captured the same way.
    Nesting works because an inner node is created in the outer trace's scope, so the inner node's
    own captured inputs are, in turn, cut by the outer trace.

NOTE [source locations]
    The trace's scope (:class:`_TraceScope`) also stamps every node it creates with the hidden
    attribute ``__gcf_src__``: the file and line of the user's code that created it (the first
    frame outside MXNet and gluon_cf's core). Errors and warnings about a node (e.g. the
    batching executor's, NOTE [row-wise rules]) point there, not into gluon_cf. Hidden
    attributes are ignored by MXNet's operators (and by user CustomOps, NOTE [user CustomOps]).

NOTE [slots]
    A node's subgraphs do not see node inputs directly; they see *slots*. Each op defines its slot
    layout (e.g. foreach: data slices, then states, then captured values) and a subgraph records,
    for each of its inputs in ``list_inputs()`` order, the slot that feeds it. Several subgraphs of
    one node (cond's branches, while_loop's cond and body) share one pool of captured slots, so
    every subgraph accepts the captures of all of them (as JAX pads cond branches).
"""
import ctypes
import itertools
import json
import os
import sys
import threading

import mxnet as mx
from mxnet.attribute import AttrScope
from mxnet.base import _LIB, SymbolHandle, check_call

from . import _custom_ops, rowwise
from ._structure import flatten
from .executor import done
from ._cachedop import CachedOpPair
from .partition import PartitionedGraph, has_gluon_cf_nodes, is_user_custom

_TAG = "__subgraph_name__"
_trace_ids = itertools.count()
_MXNET_DIR = os.path.dirname(os.path.abspath(mx.__file__)) + os.sep
_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_USER_DIRS = tuple(_OWN_DIR + d + os.sep for d in ("models", "bench"))  # our own "user" code


def user_location(skip=1):
    """``"file:line"`` of the innermost caller outside MXNet and gluon_cf's core, or None."""
    frame = sys._getframe(skip)
    while frame is not None:
        path = frame.f_code.co_filename
        # MXNet's operator functions are generated with exec() (file "<string>") in its modules.
        module = frame.f_globals.get("__name__") or ""
        if not module.startswith("mxnet") and not path.startswith(_MXNET_DIR) and (
                not path.startswith(_OWN_DIR) or path.startswith(_USER_DIRS)):
            return "%s:%d" % (path, frame.f_lineno)
        frame = frame.f_back
    return None


class _TraceScope(AttrScope):
    """The trace's AttrScope: the trace's mark plus the user's source line on every node."""

    def get(self, attr):
        attrs = dict(super().get(attr))
        location = user_location(2)
        if location is not None:
            attrs[rowwise.SOURCE_ATTR] = location
        return attrs


# MXNet 1.9.1's operators whose output shape depends on input values (found by their names in
# MXNet's operator registry). Inside a traced body they give wrong shapes or abort the process,
# so tracing refuses them until value-dependent shapes are supported.
DYNAMIC_SHAPE_OPS = frozenset({"_contrib_boolean_mask", "_npi_boolean_mask", "_npi_nonzero",
                               "_npx_nonzero", "_npi_unique"})


# Operators that update auxiliary state (running statistics) in training. Inside a node, MXNet
# neither writes the update back (a model trained hybridized predicts with stale statistics) nor
# finishes cleanly (the process may hang at exit), so training through them is refused: when
# the body is traced in training mode, else when a node runs a training forward (node.py).
# Inference and export read the statistics only, and work.
AUX_STATE_OPS = frozenset({"BatchNorm", "BatchNorm_v1", "SyncBatchNorm", "_contrib_SyncBatchNorm",
                           "_contrib_BatchNormWithReLU"})


class PendingSignature(Exception):
    """Raised while tracing when a recursive call's result structure is not known yet.

    See NOTE [recursion design] in ``recursion/api.py``: ``cond`` catches it from one branch and
    uses the other branch; the recursion machinery turns an uncaught one into a clear error.
    """

    def __init__(self, key):
        super().__init__(key)
        self.key = key


class PendingShape(Exception):
    """Raised by shape inference of a recursive call whose shapes are being inferred.

    MXNet's Custom operators cannot report "unknown" output shapes, so a recursive call raises
    instead; ``cond`` infers the other branch (NOTE [recursion design]). ``pending_shapes()``
    counts these per thread, which lets ``cond`` tell them from genuine errors after MXNet has
    wrapped them in an MXNetError.
    """

    _count = threading.local()

    def __init__(self, what):
        super().__init__(what)
        PendingShape._count.value = pending_shapes() + 1


def pending_shapes():
    return getattr(PendingShape._count, "value", 0)


class Traced:
    """A body function traced into a Symbol, still linked to the outer graph by ``captured``.

    ``symbol``: the body graph (a Group of its flat outputs); ``input_names``: names of the fresh
    variables standing for the explicit inputs; ``captured``: ordered ``[(name, outer_symbol)]``;
    ``out_fmt``: structure of the outputs (see ``_structure``); ``outputs``: the flat outputs before
    grouping, for op-specific checks.
    """

    def __init__(self, symbol, input_names, captured, out_value, out_fmt):
        self.symbol = symbol
        self.input_names = input_names
        self.captured = captured
        self.out_value = out_value
        self.out_fmt = out_fmt
        self.num_outputs = len(symbol.list_outputs())

    def spec(self, explicit_slots, capture_slots):
        """Serialisable description of this graph: JSON plus the slot feeding each input."""
        slot_of = dict(zip(self.input_names, explicit_slots))
        slot_of.update(capture_slots)
        return {"json": self.symbol.tojson(),
                "inputs": [slot_of[name] for name in self.symbol.list_inputs()],
                "num_outputs": self.num_outputs}


def trace(op, role, num_inputs, call):
    """Trace ``call(fresh_vars) -> structure`` into a :class:`Traced` graph.

    ``op``/``role`` name the public op and the function's role for error messages and node names.
    """
    uid = "_gcf%d_%s_%s" % (next(_trace_ids), op, role)
    _custom_ops.rewire_registered()  # NOTE [user CustomOps]
    with _TraceScope(**{_TAG: uid}):
        fresh = [mx.sym.var("%s_in%d" % (uid, k)) for k in range(num_inputs)]
        value = call(fresh)
        flat, fmt = flatten(value, "gluon_cf." + op, "the value returned by %s" % role)
        for out in flat:
            if not isinstance(out, mx.sym.Symbol):
                raise TypeError("gluon_cf.%s: %s returned an NDArray in symbolic mode; return "
                                "Symbols computed from its inputs" % (op, role))
        # MXSymbolCutSubgraph needs every head to be a marked op node, and a head may not be an
        # input: copy inputs, outer values and variables through an identity inside the scope.
        flat = [o if _is_own_op(o, uid) else mx.sym.identity(o) for o in flat]
        group = mx.sym.Group(flat)
    _refuse_unsupported_ops(group, op, role)
    captured = _cut(group, uid, op)
    fresh_names = {v.name for v in fresh}
    internals = None
    for name in group.list_inputs():
        if name in fresh_names or name in captured:
            continue
        # A free variable created inside the trace (e.g. a parameter first used in the body).
        internals = internals if internals is not None else group.get_internals()
        captured[name] = internals[name]
    return Traced(group, [v.name for v in fresh], list(captured.items()), value, fmt)


def _refuse_unsupported_ops(group, op, role):
    """Refuse operators a body cannot hold yet: value-dependent shapes, auxiliary state."""
    training = mx.autograd.is_training()
    recording = mx.autograd.is_recording()
    for node in json.loads(group.tojson())["nodes"]:
        if node["op"] in AUX_STATE_OPS and training:
            raise aux_state_error(op, "%s calls %s" % (role, describe_node(node)))
        if recording and is_user_custom(node):
            raise user_custom_op_error(op, "%s calls the user CustomOp %r (%s)" % (
                role, node["attrs"].get("op_type"), describe_node(node)))
        if node["op"] in DYNAMIC_SHAPE_OPS:
            raise NotImplementedError(
                "gluon_cf.%s: %s calls %s, whose output shape depends on the values of its "
                "input; value-dependent shapes inside a hybridized gluon_cf body are not "
                "supported yet. Run the block without hybridize(), or keep the shape static "
                "(e.g. multiply by the mask instead of selecting with it)"
                % (op, role, describe_node(node)))


def describe_node(node):
    """``op at file:line (node 'name')`` for error messages (NOTE [source locations])."""
    where = node.get("attrs", {}).get(rowwise.SOURCE_ATTR)
    return "%s%s (node %r)" % (node["op"], " at " + where if where else "", node["name"])


def aux_state_error(op, what):
    return NotImplementedError(
        "gluon_cf.%s: %s, whose running statistics would not be updated by hybridized training "
        "through a gluon_cf node (a model trained this way predicts differently from one "
        "trained eagerly), so training is refused. Inference works; to train, use LayerNorm or "
        "InstanceNorm inside the body, apply it outside the control flow, or run the block "
        "without hybridize()" % (op, what))


def user_custom_op_error(op, what):
    return NotImplementedError(
        "gluon_cf.%s: %s; differentiating through a user CustomOp inside a "
        "hybridized gluon_cf node hangs MXNet 1.9.1's engine (NOTE [user CustomOps at run "
        "time]), so training is refused. Inference works; to train, run the block without "
        "hybridize() or write the op with MXNet operators" % (op, what))


def _is_own_op(sym, uid):
    return len(sym.list_outputs()) == 1 and sym.get_children() is not None \
        and sym.attr(_TAG) == uid


def _cut(group, uid, op):
    """Cut the edges from outer nodes into ``group`` (in place); return ``{name: outer_symbol}``."""
    num = ctypes.c_int(0)
    handles = ctypes.POINTER(SymbolHandle)()
    check_call(_LIB.MXSymbolCutSubgraph(group.handle, ctypes.byref(handles), ctypes.byref(num)))
    captured = {}
    for i in range(num.value):
        outer = mx.sym.Symbol(ctypes.cast(handles[i], SymbolHandle))
        name = outer.list_outputs()[0]
        if name in captured and captured[name].tojson() != outer.tojson():
            raise ValueError("gluon_cf.%s: two different outer values are both named %r; give "
                             "them distinct names" % (op, name))
        captured.setdefault(name, outer)
    return captured


def merge_captures(op, traced_graphs, first_slot):
    """Pool the captured values of several graphs of one node.

    Returns ``(outer_symbols, slot_of_name)``: the node's captured inputs in slot order, and the
    slot (``first_slot`` + position) of each captured name.
    """
    pooled = {}
    for graph in traced_graphs:
        for name, sym in graph.captured:
            if name in pooled:
                if pooled[name] is not sym and pooled[name].tojson() != sym.tojson():
                    raise ValueError("gluon_cf.%s: two different outer values are both named %r;"
                                     " give them distinct names" % (op, name))
                continue
            pooled[name] = sym
    names = list(pooled)
    return [pooled[n] for n in names], {n: first_slot + i for i, n in enumerate(names)}


class Graph:
    """A subgraph at run time: its Symbol, its slot map and a CachedOp per thread.

    MXNet runs Custom operators on a pool of worker threads, and one CachedOp must not be entered
    by two threads at once, so each thread compiles its own (they share nothing but the JSON).
    They are kept by thread id, not in a ``threading.local``: MXNet's worker threads are not
    Python threads, and Python gives such a thread a fresh thread state (so an empty
    ``threading.local``) on every callback, which rebuilt every CachedOp on every node call.
    """

    _cache = {}
    _cache_lock = threading.Lock()

    def __init__(self, spec):
        graph_json = json.loads(spec["json"])
        self.partitioned = has_gluon_cf_nodes(graph_json)
        blocked = block_index_gradients(graph_json)
        self.symbol = mx.sym.load_json(spec["json"] if blocked is None else blocked)
        self.slots = list(spec["inputs"])
        self.slot_set = frozenset(self.slots)
        self.input_names = self.symbol.list_inputs()
        self.num_outputs = spec["num_outputs"]
        self._ops = {}  # thread id -> CachedOpPair or PartitionedGraph
        self._shape_cache = {}
        self._type_cache = {}
        self._row_checks = {}
        self._json = None

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
        nodes (NOTE [partitioned execution] in ``partition.py``)."""
        thread = threading.get_ident()
        op = self._ops.get(thread)
        if op is None:
            if self.partitioned:
                op = PartitionedGraph(self.symbol)
            else:
                op = CachedOpPair(self.symbol)
            self._ops[thread] = op
        return op

    def run(self, slots, ctx, record=True):
        """A generator computing the outputs (a list of NDArrays) from the slot values.

        ``ctx`` is the recursion context of the enclosing recursive function, if any; it is
        passed on to nested gluon_cf nodes (NOTE [trampoline] in ``executor.py``).
        ``record=False`` keeps a plain graph off the autograd tape: for predicates, which are
        only read as Python booleans and never differentiated.
        """
        op = self.cached_op()
        args = [slots[s] for s in self.slots]
        if self.partitioned:
            if ctx is not None and ctx.flags is not None:  # slot flags -> graph input flags
                ctx = ctx.with_flags([ctx.flags[s] for s in self.slots])
            return op.run(args, ctx)
        if record and ctx is not None and ctx.flags is not None and ctx.recursion is not None:
            flags = tuple(ctx.flags[s] for s in self.slots)
            if any(flags) and self._rows_independent(args, flags):
                return _request(GraphCall(self, args, flags, ctx.rows))
        if record:
            out = op(*args)
        else:
            with mx.autograd.pause(train_mode=mx.autograd.is_training()):
                out = op(*args)
        return done(list(out) if isinstance(out, (list, tuple)) else [out])

    def _rows_independent(self, args, flags):
        """Whether calls may be concatenated: every operator acts row by row (NOTE [row-wise
        rules]); checked once per signature."""
        return self.rows_rejected(args, flags) is None

    def rows_rejected(self, args, flags):
        """None if the graph may run on stacked rows of its batched inputs (``flags``), else the
        :class:`rowwise.Rejected` saying which operator mixes rows (cached per signature)."""
        key = (tuple(flags), tuple(a.shape[1:] if f else a.shape for a, f in zip(args, flags)))
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
                self._row_checks[key] = rejected
        return self._row_checks[key]

    def infer_shape(self, slot_shapes):
        """Return ``(input_shapes_by_slot, output_shapes)``; unknown shapes are ``None``.

        Uses partial inference so that shapes of captured parameters can be inferred backwards
        from the body (this is what makes Gluon's deferred initialisation work through a node).
        """
        known = {n: tuple(slot_shapes[s]) for n, s in zip(self.input_names, self.slots)
                 if slot_shapes[s] is not None}
        key = tuple(sorted(known.items()))
        if key in self._shape_cache:
            args, outs = self._shape_cache[key]
        else:
            args, outs, _ = self.symbol.infer_shape_partial(**known)
            # Cache only complete answers: a partial one may be completed later (a recursive
            # function's shapes become known during inference, NOTE [recursion design]).
            if outs and all(o is not None and _complete(o) for o in outs):
                self._shape_cache[key] = (args, outs)
        inferred = {}
        for s, shape in zip(self.slots, args or [None] * len(self.slots)):
            if shape is not None and _complete(shape):
                inferred[s] = tuple(shape)
        outs = [tuple(o) if o is not None and _complete(o) else None
                for o in (outs or [None] * self.num_outputs)]
        return inferred, outs

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


def _request(call):
    """A generator that hands ``call`` to the executor and returns its result."""
    return (yield call)


# Operators whose listed inputs are indices, with no gradient defined (MXNet refuses to compute one).
_INDEX_INPUTS = {"Embedding": (0,), "_contrib_SparseEmbedding": (0,), "take": (1,),
                 "batch_take": (1,), "pick": (1,), "gather_nd": (1,), "one_hot": (0,)}


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
    if not any(n["op"] in _INDEX_INPUTS for n in nodes):
        return None
    new_nodes, new_id = [], {}
    for nid, n in enumerate(nodes):
        n = dict(n, inputs=[[new_id[i[0]], i[1], 0] for i in n["inputs"]])
        for k in _INDEX_INPUTS.get(n["op"], ()):
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


def _complete(shape):
    # MXNet's legacy shape semantics: () and 0-sized dims mean "unknown".
    return len(shape) > 0 and all(d > 0 for d in shape)


def dumps(spec):
    return json.dumps(spec, separators=(",", ":"), sort_keys=True)
