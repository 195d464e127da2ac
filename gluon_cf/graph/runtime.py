"""Subgraphs at run time: :class:`Graph` is one body of a gluon_cf node, its Symbol and slot
map, run as a CachedOp per thread or partitioned (NOTE [partitioned execution] in
``partitioned.py``), with its shape and dtype inference and the row-wise verdicts the batching
scheduler asks of it; :class:`GraphCall` is a request to run it on batched rows.
"""
import json
import threading
import weakref

import mxnet as mx

from .. import registry, rowwise
from ..executor import done
from ..operators import DYNAMIC_SHAPE_OPS
from .cached_graph import (CachedGraph, ReshapeChecks, as_list, block_index_gradients,
                           check_reshapes)
from .partitioned import PartitionedGraph, has_gluon_cf_nodes
from .operator_errors import graph_operator_error
from .shape_inference import dynamic_outputs, infer_by_mxnet


class Graph:
    """A subgraph at run time: its Symbol, its slot map and a CachedOp per thread.

    MXNet runs Custom operators on a pool of worker threads, and one CachedOp must not be entered
    by two threads at once, so each thread compiles its own (they share nothing but the JSON).
    They are kept by thread id, not in a ``threading.local``: MXNet's worker threads are not
    Python threads, and Python gives such a thread a fresh thread state (so an empty
    ``threading.local``) on every callback, which rebuilt every CachedOp on every node call.
    """

    # Weak (NOTE [decoded nodes live as long as their users] in decoded.py): a Graph lives
    # while a decoded node (or a clone with other slots, an unrolled loop's cache) holds it.
    _cache: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()
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
        self._reshape_checks = ReshapeChecks()   # NOTE [a reshape to another size]
        self._type_cache = {}
        self._row_checks = {}
        self._batched_outputs = {}
        self._take_tables = None
        self._callees = None   # functions called by invoke nodes here or in nested branches
        self._json = None
        self._inference = None  # a PartitionedGraph for shape inference (partitioned graphs)
        self._base: "Graph | None" = None  # a clone's cached Graph (see _with_slots)

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
        clone._base = self   # keeps the cached Graph (whose dicts it shares) alive with it
        return clone

    def _symbol_json(self):
        """The symbol's JSON, parsed (once: the row-wise and shape checks read it)."""
        if self._json is None:
            self._json = json.loads(self.symbol.tojson())
        return self._json

    def cached_op(self):
        """A CachedOp for this thread, or a PartitionedGraph when the graph contains gluon_cf
        nodes (NOTE [partitioned execution])."""
        thread = threading.get_ident()
        op = self._ops.get(thread)
        if op is None:
            if self.partitioned:
                op = PartitionedGraph(self.symbol)
            else:
                op = CachedGraph(self.symbol, reshape_checks=self._reshape_checks)
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
        return done(as_list(out))

    def batched_outputs(self, flags):
        """For each output, whether it depends on an input marked in ``flags`` (per input, in
        ``list_inputs()`` order), so holds the rows of a batch (cached per flags)."""
        key = tuple(flags)
        verdict = self._batched_outputs.get(key)
        if verdict is None:
            batched = {n for n, f in zip(self.input_names, flags) if f}
            # dynamic_outputs tells which heads depend on the named inputs: here the batched.
            verdict = self._batched_outputs[key] = tuple(
                dynamic_outputs(self._symbol_json(), batched))
        return verdict

    def _rows_independent(self, args, flags):
        """Whether calls may be concatenated: every operator acts row by row (NOTE [row-wise
        rules]); checked once per signature."""
        return self.rows_rejected(args, flags) is None

    def rows_rejected(self, args, flags):
        """None if the graph may run on stacked rows of its batched inputs (``flags``), else the
        :class:`rowwise.Rejected` saying which operator mixes rows (cached per signature)."""
        # (per mode: NOTE [loops lowered on rows] in rowwise.py)
        key = (self.row_check_key(args, flags), rowwise.lowering_now())
        if key not in self._row_checks:
            js = self._symbol_json()
            shapes = {n: (rowwise.ROWS,) + a.shape[1:] if f else a.shape
                      for n, a, f in zip(self.input_names, args, flags)}
            try:
                rowwise.check_symbol(self.symbol, js,
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
            js = self._symbol_json()
            nodes = js["nodes"]
            ok = {nid: True for nid, n in enumerate(nodes) if n["op"] == "null"}
            for h in js["heads"]:
                ok[h[0]] = False
            for n in nodes:
                for pos, (src, *_) in enumerate(n["inputs"]):
                    if src in ok and ok[src]:
                        ok[src] = _used_as_take_table(n, pos)
            self._take_tables = frozenset(nodes[nid]["name"] for nid, good in ok.items()
                                          if good)
        return self._take_tables

    def infer_shape(self, slot_shapes, keep_partial=False):
        """Return ``(input_shapes_by_slot, output_shapes)``; unknown shapes are ``None``,
        shapes known only at run time :class:`registry.Dynamic` (NOTE [run-time shapes]).
        ``keep_partial``: shapes MXNet knows in part (its 0 for an unknown dimension) are
        answered as such, not as None (a foreach's rule, as MXNet's foreach answers them).

        Uses partial inference so that shapes of captured parameters can be inferred backwards
        from the body (this is what makes Gluon's deferred initialisation work through a node).
        """
        given = [slot_shapes[s] for s in self.slots]
        key = (tuple(given), self._callee_key("shapes"), keep_partial)
        if key in self._shape_cache:
            return self._shape_cache[key]
        pending = registry.provisional_shapes()
        if self.partitioned:
            if self._inference is None:
                self._inference = PartitionedGraph(self.symbol)
            ins, outs = self._inference.infer_shape(given)
        else:
            ins, outs = self._infer_plain(given)
            if all(registry.is_complete(g) for g in given):
                # raised here, when MXNet asks the node's shapes, and not as the body runs on
                # MXNet's engine, where the error would wait for the next read of anything
                check_reshapes(self.symbol, self._symbol_json()["nodes"], given,
                               self._reshape_checks)

        def known(shape):
            return registry.is_complete(shape) or keep_partial and isinstance(
                shape, tuple) and len(shape) > 0
        inferred = {s: tuple(x) for s, x in zip(self.slots, ins) if known(x)}
        outs = [o if registry.is_dynamic(o) or known(o) else None for o in outs]
        # Cache only complete answers: a partial one may be completed later (a recursive
        # function's shapes become known during inference, NOTE [recursion design]; a weight
        # only its recursive branch shapes, NOTE [an environment known in part], also one
        # given in part, a Dense's (3, 0) before Gluon's deferred initialisation), nor one
        # given while a recursive call's shapes were pending (NOTE [one shape per call]).
        if registry.provisional_shapes() == pending and \
                all(registry.is_dynamic(o) or registry.is_complete(o) for o in outs) and \
                all(registry.is_complete(inferred.get(s)) for s, g in zip(self.slots, given)
                    if not (registry.is_complete(g) or registry.is_dynamic(g))):
            self._shape_cache[key] = (inferred, outs)
        return inferred, outs

    # NOTE [inference of graphs with calls]
    #     A recursive function's body (and a ``cond`` branch in it) holds ``invoke`` nodes
    #     whose output shapes and dtypes come from the function table and its environment
    #     (the recursion node's inputs after the entry's arguments), not from this graph's
    #     inputs: a branch reading no environment value has the same inputs for an embedding
    #     of float32 and of float64, or of width 3 and 5. So the inference caches key with
    #     the environment the called tables see (``InvokeRule.inference_key``); without it a
    #     batch of another environment dtype than an earlier one's got the earlier dtypes (a
    #     spurious cond dtype error), and one of another width ran row by row
    #     (tests/test_schedule_environment.py).
    def _callee_key(self, question):
        """What inferring this graph depends on besides its inputs (NOTE [inference of
        graphs with calls]): None for a graph without calls."""
        if self._callees is None:
            self._callees = tuple(sorted(_callees(self._symbol_json())))
        if not self._callees:
            return None
        return registry.rule_of("invoke").inference_key(self._callees, question)

    def _infer_plain(self, given):
        """MXNet infers a graph without gluon_cf nodes (:func:`infer_by_mxnet`)."""
        inputs, outs = infer_by_mxnet(self.symbol, self._symbol_json(), self.input_names, given)
        return [inputs.get(n) for n in self.input_names], outs

    def infer_type(self, slot_types, out_types=None):
        """``({slot: dtype}, [output dtypes])`` from the dtypes known of the slots, and of the
        outputs (``out_types``, None where unknown: a cond's other branch decided them, which
        MXNet's ``CondType`` also infers each branch's inputs from)."""
        known = {n: slot_types[s] for n, s in zip(self.input_names, self.slots)
                 if slot_types[s] is not None}
        hints = {i: t for i, t in enumerate(out_types or ()) if t is not None}
        key = (tuple(sorted((k, str(v)) for k, v in known.items())), self._callee_key("types"),
               tuple(sorted((i, str(t)) for i, t in hints.items())))
        if key in self._type_cache:
            args, outs = self._type_cache[key]
        else:
            pending = registry.pending_types()
            try:
                args, outs = self._infer_type_hinted(known, hints)
            except mx.MXNetError as err:   # NOTE [operators refusing shapes at run time]
                ours = graph_operator_error(self._symbol_json()["nodes"], err)
                if ours is None:
                    raise
                raise ours from None
            # (not an answer given while a recursive call's dtypes were pending: NOTE [dtypes
            # of a call being inferred] in ops/cond.py)
            if outs and all(o is not None for o in outs) and \
                    registry.pending_types() == pending:
                self._type_cache[key] = (args, outs)
        inferred = {s: t for s, t in zip(self.slots, args or []) if t is not None}
        return inferred, list(outs) if outs else [None] * self.num_outputs

    def _infer_type_hinted(self, known, hints):
        """MXNet's partial type inference, each output of a known dtype (``hints``) first
        added to a variable of that dtype: the addition's dtype rule makes them one, and the
        pass carries it back into the graph's inputs. Input dtypes in ``input_names``' order
        (``list_inputs``: the auxiliary states of a body's BatchNorm among them, which MXNet
        answers apart from the arguments; zipping its arguments' answer with ``input_names``
        gave a slot another's dtype, and a float16 body's BatchNorm then a float16 mean)."""
        outputs = [self.symbol[i] for i in range(self.num_outputs)]
        for i in hints:
            outputs[i] = mx.sym.elemwise_add(outputs[i],
                                             mx.sym.var(f"__gluon_cf_output_type{i}"))
        hinted = mx.sym.Group(outputs) if hints else self.symbol
        given = dict(known, **{f"__gluon_cf_output_type{i}": t for i, t in hints.items()})
        args, outs, aux = hinted.infer_type_partial(**given)
        by_name = dict(zip(hinted.list_arguments(), args or []))
        by_name.update(zip(hinted.list_auxiliary_states(), aux or []))
        return [by_name.get(n) for n in self.input_names], outs


def _callees(js):
    """The functions ``invoke`` nodes of graph JSON ``js`` call, also inside the subgraphs
    of its other nodes but a recursion node's (whose calls see its own inputs as their
    environment: NOTE [inference of graphs with calls])."""
    found = set()
    for n in js["nodes"]:
        kind = registry.kind_of(n)
        if kind is None or kind == "recursion":
            continue
        decoded = registry.decode(kind, n["attrs"]["spec"])
        if kind == "invoke":
            found.add(decoded.spec["function"])
        for graph in decoded.graphs.values():
            found.update(_callees(graph._symbol_json()))
    return found


def _used_as_take_table(node, pos):
    """Whether input ``pos`` of JSON node ``node`` is only ever a table of take along axis 0."""
    if node["op"] == "take":
        return pos == 0 and int(node.get("attrs", {}).get("axis", "0")) == 0
    kind = registry.kind_of(node)
    if kind == "cond" and pos > 0:   # a captured value: what each branch does with it
        return all(name in branch.take_tables()
                   for branch in registry.decode("cond", node["attrs"]["spec"]).graphs.values()
                   for name, slot in zip(branch.input_names, branch.slots) if slot == pos)
    if kind == "recursion":          # the environment: what each function does with it
        decoded = registry.decode("recursion", node["attrs"]["spec"])
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
        """Calls with equal keys may run as one: same graph, same shared (unbatched) inputs,
        batched inputs that concatenate (equal dtypes and shapes past axis 0: a function's
        argument may be int32 at one call site and float32 at another)."""
        return (id(self.graph.symbol), self.flags,
                tuple(id(a) if not f else (a.dtype, a.shape[1:])
                      for a, f in zip(self.args, self.flags)))

    def unbatched(self):
        out = self.graph.cached_op()(*self.args)
        return done(as_list(out))

    def batched_outputs(self):
        """For each output, whether it holds one row per invocation; an output computed from
        shared inputs alone (a loop's constant counter) is one value for every row."""
        return self.graph.batched_outputs(self.flags)


def _request(call):
    """A generator that hands ``call`` to the executor and returns its result."""
    return (yield call)
