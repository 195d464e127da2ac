"""Value graphs: the CachedOps an ahead-of-time schedule runs. One group's graph is a
function's body for one variant (its ``cond`` branches inlined) with each recursive call
replaced by a gather of the callees' rows, from the outputs of earlier groups or from the
callee's table (:func:`_value_graph`); :func:`_result_graph` gathers and unpacks the roots'
rows. :class:`_Emitter` builds the symbol JSON node by node (the ONNX lowering uses it and
:func:`_inline` too) (NOTE [ahead-of-time schedules] in recursion/schedule.py).

NOTE [one table per output]
    Where a schedule keeps its rows in tables written in place (inference, and training with a
    planned backward, NOTE [planned backward] in recursion/planned_backward.py), each output of
    a function has a table of its own, ``(invocations,) + the output's row shape``. A group's
    graph reads a callee's outputs at call site ``t`` by one ``take`` per output of the site's
    rows (``c<i>_idx<t>``, the site's part of the site-major indices, cut on the host) from
    the output's table, and returns its outputs as they are, each written into its rows of
    its table (``out=``). A packed table (all outputs side by side in one row) cost, per
    group, a ``Reshape`` and a ``SliceChannel`` splitting the sites, a ``SliceChannel`` per
    site unpacking the outputs and a ``Concat`` packing them, and the backward of each.
    ``SliceChannel`` is one of MXNet's legacy operators, which create an operator state (and
    an engine variable, deleted through the engine) on every call of a CachedOp: about half of
    a TreeLSTM group call's host time at batch 1 (py-spy). ``_split_v2``, the other split,
    measured 30-40% slower per call than ``Reshape`` and ``SliceChannel`` (a TreeRNN group,
    forward and backward). Each site reads a table through an input of its own
    (``c<i>_table<k>_<t>``): under a planned backward each is an alias of the table of its
    own, marked with the same gradient table, because one variable read by two ``take`` s of
    a group gets its gradient from each into a zeroed array the size of the whole table, then
    summed (2.7 ms and 0.6 ms on a 1M-float table, against 3 us for one ``take`` adding its
    rows into the gradient table). A body returning one entry twice is two outputs of the
    CachedOp, each written into its table (MXNet copies; tests/test_schedule_tables.py). The
    recorded path (outputs of earlier groups gathered by ``take``, ``Concat`` and a
    permutation) keeps packed rows.

NOTE [padded rows]
    A CachedOp called with other input shapes than on its last call infers shapes, plans
    memory and sets up its operators again, and without ``static_shape`` creates every
    stateful operator's state anew on each call (the cell's own ``SliceChannel``, a legacy
    operator whose state is deleted through the engine): most of a small group's call. So in
    inference (tables written in place) a group of at most ``PADDED_ROWS`` (512) rows runs on
    ``_padded(rows)`` rows (up to 16 the next power of two, then four size classes per
    doubling: at most a quarter more rows) by a CachedOp with ``static_shape`` kept per row
    count (:meth:`_ValueGraph.sized`), which sets itself up once per shape. Its other inputs
    keep their shapes from batch to batch too: the tables' rows are rounded up to a multiple
    of ``PADDED_TABLE_BYTES`` (4 MiB); an environment value the graph reads only as the table
    of ``take`` along axis 0 in mode ``clip`` (the forest's tokens, read by the leaves:
    ``_clip_tables``) is given to it *edged*, followed by copies of its last row up to the
    next power of two of rows (``schedule._edged``, one ``take`` per batch), which ``take``
    reads exactly as the value itself whatever the index, since it clips an index past the
    end to the last row, whose copies the extra rows are ("wrap" would read other rows, so it
    is not edged); and a graph reading any other environment value whose shape changed since
    the last sized call of the graph (on any thread) runs unpadded until two calls see the
    same shapes. (Tried first: tables of exactly the rows needed, the tables' shapes changing
    with every batch, saved nothing in the benchmark.) This is exact because
    * the body is proven to act row by row for these argument shapes (its layout exists,
      ``schedule._layout``), so the padding rows change no real row;
    * the padding rows read what follows the group's rows in the argument and index arrays
      (other real rows, or copies of the last one at the end) and every gather is a ``take``
      with ``mode="clip"``, so any index read is in range;
    * they are written into the rows of the output tables after the group's own, which
      belong to groups later in run order (a function's groups run in the order of their
      rows) or to slack rows at the end of the tables, and every row is read only after the
      group owning it wrote it: each padded write lands before the owner's write (the
      engine orders writes to one array as they were pushed).
    Larger groups, where padding would cost arithmetic, run unpadded as before; a sized call
    that fails runs the group unpadded, so its error is the one it always was. But a padding
    row may read rows not yet written (whatever the memory held: the last site's padding
    reads the next group's indices) and arguments of another variant: acting row by row, no
    operator lets that change a real row, but one that checks values may fail or crash on it
    (``take(mode="raise")``: "indices out of bound", where eager runs; ``SequenceLast`` given
    a length out of range: a segfault), and a random draw would shift the real rows' draws.
    Graphs holding such an operator (``_VALUE_CHECKED``) run unpadded
    (tests/test_schedule_tables.py; size classes and edged values: tests/test_schedule_sizes.py,
    whose tables start as NaN).

NOTE [sized calls without BlockGrad]
    A group's graph puts a ``BlockGrad`` on every index input of ``take`` and ``Embedding``
    (``block_index_gradients``: recorded, a CachedOp is one autograd node, and the indices'
    gradient must be refused), and a body may hold its own. A ``BlockGrad`` copies its input
    in a forward pass and only changes the backward. The sized calls (NOTE [padded rows]) run
    only where nothing is recorded (``views.call_on_rows``), so their CachedOps run the graph
    with every ``BlockGrad`` that is not an output skipped, its consumers reading its input
    (:func:`_without_block_grad`; the graph as it is when that would change its inputs or
    their order): the same values, one operator less per index input. Counted by MXNet's
    profiler (``aggregate_stats``, the benchmark's cells): TreeRNN batch 25 inference 158 ->
    121 engine operations per batch (g: 76), TreeLSTM batch 1 178 -> 157 per tree (g: 191).
    The recorded calls and the unpadded ones keep them (tests/test_schedule_h28perf.py).
"""
import json
import threading
from typing import Dict, List, Tuple

import mxnet as mx

from .._cachedop import CachedOpPair
from ..graph import CachedGraph, block_index_gradients
from .skeleton import _entry


class _Emitter:
    """Builds a symbol JSON node by node; knows which entries hold rows."""

    def __init__(self):
        self.nodes = []
        self.rows = set()     # entries with one row per invocation
        self.names = set()

    def _add(self, node, batched):
        name = node["name"]
        while name in self.names:
            name += "_"
        self.names.add(name)
        node["name"] = name
        self.nodes.append(node)
        nid = len(self.nodes) - 1
        if batched:
            self.rows.add(nid)
        return nid

    def var(self, name, batched):
        return (self._add({"op": "null", "name": name, "inputs": []}, batched), 0)

    def copy(self, node, inputs):
        new = {k: v for k, v in node.items() if k not in ("inputs", "name")}
        new["name"] = node["name"]
        new["inputs"] = [[e[0], e[1], 0] for e in inputs]
        return self._add(new, any(e[0] in self.rows for e in inputs))

    def op(self, op, inputs, **attrs):
        nid = self._add({"op": op, "name": "_gcf_schedule_%s%d" % (op, len(self.nodes)),
                         "attrs": {k: str(v) for k, v in attrs.items()},
                         "inputs": [[e[0], e[1], 0] for e in inputs]},
                        any(e[0] in self.rows for e in inputs))
        return (nid, 0)

    def gather(self, prefix, sources):
        """Rows gathered from ``sources`` earlier outputs (inputs ``src``/``idx``/``perm``)."""
        taken = [self.op("take", [self.var("%s_src%d" % (prefix, j), False),
                                  self.var("%s_idx%d" % (prefix, j), True)], axis=0, mode="clip")
                 for j in range(sources)]
        if sources == 1:
            return taken[0]
        joined = self.op("Concat", taken, dim=0, num_args=sources)
        return self.op("take", [joined, self.var("%s_perm" % prefix, True)], axis=0, mode="clip")

    def take_sites(self, prefix, sites, layout):
        """A callee's outputs for each of ``sites`` call sites: per site and output, one
        ``take`` of the site's rows (input ``idx<site>``) from that output's table, an input of
        its own per site (``table<k>_<site>``, NOTE [one table per output])."""
        per_site = []
        for t in range(sites):
            index = self.var("%s_idx%d" % (prefix, t), True)
            per_site.append([self.op("take", [self.var("%s_table%d_%d" % (prefix, k, t), False),
                                              index], axis=0, mode="clip")
                             for k in range(len(layout["shapes"]))])
        return per_site

    def unpack(self, packed, layout):
        """A function's outputs from its packed rows."""
        outs, offset, sizes = [], 0, layout["sizes"]
        split = None
        if len(sizes) > 1 and len(set(sizes)) == 1:   # one operator for all the outputs
            split = self.op("SliceChannel", [packed], axis=1, num_outputs=len(sizes))[0]
        for j, (shape, size) in enumerate(zip(layout["shapes"], sizes)):
            if len(sizes) == 1:
                part = packed
            elif split is not None:
                part = (split, j)
            else:
                part = self.op("slice_axis", [packed], axis=1, begin=offset, end=offset + size)
            offset += size
            outs.append(part if len(shape) == 1 else
                        self.op("Reshape", [part], shape=(-1,) + tuple(shape)))
        return outs

    def symbol(self, heads):
        graph = {"nodes": self.nodes,
                 "arg_nodes": [i for i, n in enumerate(self.nodes) if n["op"] == "null"],
                 "heads": [[e[0], e[1], 0] for e in heads],
                 "attrs": {"mxnet_version": ["int", 10901]}}
        blocked = block_index_gradients(graph)
        return mx.sym.load_json(blocked if blocked is not None else json.dumps(graph))


EDGED = [True]   # NOTE [padded rows]: tests compare with eager
UNBLOCKED = [True]   # NOTE [sized calls without BlockGrad] (False: as before, to measure)


class _ValueGraph:
    """A CachedOp and what each of its inputs is: ``(role, i, j, site)`` with role ``arg`` (the
    group's argument i), ``env`` (environment value i), ``src``/``idx`` (callee i's source
    output j and its row indices), ``perm`` (callee i's permutation) or ``table`` (callee i's
    output j's table, read by call site ``site``, whose rows are at ``idx`` ``site``: NOTE
    [one table per output]); ``site`` is 0 but for tables."""

    def __init__(self, symbol):
        self.op = CachedGraph(symbol)
        # A schedule whose inputs hold no zero-size array (:meth:`_Schedule.nonempty`) calls
        # the CachedOps without the check for one, which asks every input for its shape.
        self.nonempty = CachedOpPair.__call__.__get__(self.op)
        self._sized: Dict[int, mx.nd.CachedOp] = {}
        self.inputs = []
        for name in symbol.list_inputs():
            if name.startswith("arg") or name.startswith("env"):
                self.inputs.append((name[:3], int(name[3:]), 0, 0))
            else:
                callee, role, *site = name.split("_")
                kind = role.rstrip("0123456789")
                self.inputs.append((kind, int(callee[1:]), int(role[len(kind):] or 0),
                                    int(site[0]) if site else 0))
        self.env = sorted({i for role, i, _, _ in self.inputs if role == "env"})
        # The environment shapes of the last sized call, shared by the graph's copies of all
        # threads (set by _value_graph): batches take turns on MXNet's custom-op threads.
        self.last_env: list = [(None,)]
        js = json.loads(symbol.tojson())
        self.value_checked = _value_checked(js)
        self._clip_tables = _clip_tables(js)
        self._seen: tuple = (None, None)   # the last environment shapes asked and their key
        # The symbol of the sized calls (NOTE [sized calls without BlockGrad])
        self._forward = None

    def sized(self, rows, env_shapes):
        """This graph as a CachedOp with static shapes for calls of ``rows`` rows (NOTE
        [padded rows] above), one per row count, when the shapes of the environment values it
        reads (``env_shapes``, all of them) are those of its last call: else None, as for a
        graph without inputs (run by an executor, :class:`CachedOpPair`)."""
        if self.op.constant or self.value_checked:
            return None
        seen, env = self._seen
        if seen is not env_shapes:   # once per batch, not per group (the tuple is kept)
            edged = self.edged()
            env = tuple((_edged_rows(env_shapes[i][0]),) + tuple(env_shapes[i][1:])
                        if i in edged else env_shapes[i] for i in self.env)
            self._seen = (env_shapes, env)
        if env != self.last_env[0]:   # a forest's arrays change with every batch: not worth it
            self.last_env[0] = env
            return None
        op = self._sized.get(rows)
        if op is None:
            if self._forward is None:   # NOTE [sized calls without BlockGrad]
                self._forward = _without_block_grad(self.op.symbol) if UNBLOCKED[0] \
                    else self.op.symbol
            op = self._sized[rows] = mx.nd.CachedOp(
                self._forward, flags=[("static_alloc", True), ("static_shape", True)])
        return op

    def edged(self):
        """The environment values a sized call reads edged (NOTE [padded rows] above)."""
        return self._clip_tables if EDGED[0] else frozenset()

    def forget(self, rows):
        """Drop the CachedOp of ``rows`` rows (one whose call failed keeps half its state)."""
        self._sized.pop(rows, None)


def _without_block_grad(symbol):
    """``symbol`` without its ``BlockGrad`` nodes, each one's consumers reading its input
    instead, when its inputs stay those of ``symbol`` in the same order (else ``symbol``)
    (NOTE [sized calls without BlockGrad])."""
    js = json.loads(symbol.tojson())
    nodes, heads = js["nodes"], js["heads"]
    outputs = {h[0] for h in heads}
    skipped = {nid for nid, n in enumerate(nodes)
               if n["op"] in _IDENTITY_FORWARD and nid not in outputs and len(n["inputs"]) == 1}
    if not skipped:
        return symbol

    def source(entry):
        while entry[0] in skipped:
            entry = nodes[entry[0]]["inputs"][0]
        return entry

    kept = [nid for nid in range(len(nodes)) if nid not in skipped]
    new_id = {nid: k for k, nid in enumerate(kept)}
    new_nodes = []
    for nid in kept:
        n = dict(nodes[nid])
        n["inputs"] = [[new_id[e[0]], e[1], 0] for e in map(source, n["inputs"])]
        new_nodes.append(n)
    forward = {"nodes": new_nodes,
               "arg_nodes": [k for k, n in enumerate(new_nodes) if n["op"] == "null"],
               "heads": [[new_id[h[0]], h[1], 0] for h in heads],
               "attrs": js.get("attrs", {})}
    stripped = mx.sym.load_json(json.dumps(forward))
    return stripped if stripped.list_inputs() == symbol.list_inputs() else symbol


# Operators that copy their one input in a forward pass (their names in a symbol's JSON).
_IDENTITY_FORWARD = frozenset({"BlockGrad", "stop_gradient"})


# Operators whose success, memory safety or values depend on the values of their inputs
# beyond acting on each row (NOTE [padded rows] above): each checked on CPU with an index out
# of range, or a sequence length, or a matrix, of a row not yet written.
_VALUE_CHECKED = frozenset({
    "gather_nd", "scatter_nd", "_scatter_set_nd", "_backward_gather_nd",   # IndexError
    "SequenceLast", "SequenceMask", "SequenceReverse",   # a length out of range: segfault
    "_contrib_index_copy", "_ravel_multi_index", "_unravel_index", "_histogram"})
_VALUE_CHECKED_PREFIXES = ("_linalg_", "_random_", "_sample_", "_npi_random", "_np_")


def _value_checked(js):
    """The first operator of graph JSON ``js`` that a padding row could make fail, crash or
    draw other numbers (NOTE [padded rows]), or None."""
    for n in js["nodes"]:
        op = n["op"]
        if op == "null":
            continue
        if op in _VALUE_CHECKED or op.startswith(_VALUE_CHECKED_PREFIXES) \
                or op == "Custom" or "random" in op.lower() \
                or (op == "take" and n.get("attrs", {}).get("mode") == "raise"):
            return op
    return None


def _clip_tables(js):
    """The environment values (numbers) graph JSON ``js`` reads only as the table of ``take``
    along axis 0 in mode ``clip``, which reads the same from the value followed by copies of
    its last row, whatever the index (NOTE [padded rows])."""
    nodes = js["nodes"]
    only = {nid: True for nid, n in enumerate(nodes)
            if n["op"] == "null" and n["name"].startswith("env")}
    for head in js["heads"]:
        if head[0] in only:
            only[head[0]] = False
    for n in nodes:
        attrs = n.get("attrs", {})
        for pos, (src, *_) in enumerate(n["inputs"]):
            if only.get(src):
                only[src] = n["op"] == "take" and pos == 0 \
                    and int(attrs.get("axis", "0")) == 0 and attrs.get("mode", "clip") == "clip"
    return frozenset(int(nodes[nid]["name"][3:]) for nid, good in only.items() if good)


def _edged_rows(rows):
    """The rows an environment value read only by ``take`` in mode ``clip`` is given to sized
    calls: the next power of two (NOTE [padded rows])."""
    return 1 << (rows - 1).bit_length() if rows > 1 else 1


def _value_graph(plan, layouts, qname, vid, sources):
    """The graph of one group: ``qname``'s body for variant ``vid`` with each invoke replaced
    by its rows gathered from ``sources[i]`` earlier outputs of callee i, or from callee i's
    table when ``sources`` is None (cached)."""
    # One CachedOp per thread: MXNet's CachedOp must not be entered by two threads at once.
    # The layouts are in the key: another batch's environment (an embedding of another
    # width) gives the same function other output shapes, which a graph unpacks by them.
    function = plan.functions[qname]
    key = (qname, vid, sources, threading.get_ident(),
           _shapes(layouts, [qname] + [callee for callee, _ in function.callees(vid)]))
    graph = plan.graphs.get(key)
    if graph is not None:
        return graph
    em = _Emitter()
    inputs = {name: em.var("%s%d" % (kind, k), kind == "arg")
              for name, (kind, k) in function.body.inputs.items()}
    site_outputs: Dict[int, list] = {}   # call site -> the callee's outputs there
    for i, (callee, sites) in enumerate(function.callees(vid)):
        layout = layouts[callee]
        if sources is None:   # NOTE [one table per output]
            site_outputs.update(zip(sites, em.take_sites("c%d" % i, len(sites), layout)))
            continue
        gathered = em.gather("c%d" % i, None if sources is None else sources[i])
        if len(sites) > 1:   # site-major rows: (sites, rows, width), one slice per site
            per_site = em.op("Reshape", [gathered], shape=(len(sites), -1, layout["width"]))
            per_site = em.op("SliceChannel", [per_site], axis=0, num_outputs=len(sites),
                             squeeze_axis=True)[0]
        for t, site in enumerate(sites):
            part = gathered if len(sites) == 1 else (per_site, t)
            site_outputs[site] = em.unpack(part, layout)
    heads = _inline(function.body, function.keys[vid], inputs, em, site_outputs)
    reference = next((e for name, e in inputs.items() if function.body.inputs[name][0] == "arg"),
                     None)
    if reference is None:   # a body that reads no argument: the rows are argument 0's
        reference = em.var("arg0", True)
    packed = []
    for head, shape in zip(heads, layouts[qname]["shapes"]):
        if head[0] not in em.rows:   # one row for all invocations (a constant): one per row
            head = em.op("broadcast_like", [head, reference], lhs_axes=(0,), rhs_axes=(0,))
        if sources is None:   # each output into its own table, as it is
            packed.append(head)
            continue
        packed.append(head if len(shape) == 1 else em.op("Reshape", [head], shape=(0, -1)))
    if sources is None:
        graph = plan.graphs[key] = _ValueGraph(em.symbol(packed))
        graph.last_env = plan.graphs.setdefault(("last env",) + key[:3] + key[4:], [(None,)])
        return graph
    out = packed[0] if len(packed) == 1 else em.op("Concat", packed, dim=1,
                                                    num_args=len(packed))
    graph = plan.graphs[key] = _ValueGraph(em.symbol([out]))
    return graph


def _shapes(layouts, qnames):
    """The output shapes of the layouts of ``qnames`` (a cache key)."""
    return tuple(tuple(layouts[q]["shapes"]) for q in qnames)


def _result_graph(plan, layouts, sources):
    """The roots' rows gathered from ``sources`` outputs (None: from the entry's table) and
    unpacked (cached)."""
    key = ("result", sources, threading.get_ident(), _shapes(layouts, [plan.entry]))
    graph = plan.graphs.get(key)
    if graph is None:
        em = _Emitter()
        heads = em.take_sites("c0", 1, layouts[plan.entry])[0] if sources is None else \
            em.unpack(em.gather("c0", sources), layouts[plan.entry])
        graph = plan.graphs[key] = _ValueGraph(em.symbol(heads))
    return graph


def _inline(body, key, inputs, em, site_outputs, loop_outputs=None):
    """Emit ``body`` with the branches of variant ``key`` in place of its conds; ``inputs``:
    input name -> emitted entry. A ``while_loop`` making recursive calls (export only) is
    ``loop_outputs(loop, its emitted inputs)`` -> its outputs' entries. Returns the emitted
    entries of its outputs."""
    emitted: Dict[Tuple[int, int], Tuple[int, int]] = {}   # body entry -> emitted entry
    copied: Dict[int, int] = {}                  # body node id -> emitted node id
    conds = {nid: (i, branches) for i, (nid, _, branches) in enumerate(body.conds)}

    def get(ref):
        return (copied[ref[0]], ref[1]) if ref[0] in copied else emitted[_entry(ref)]

    for nid, n in enumerate(body.nodes):
        if n["op"] == "null":
            emitted[(nid, 0)] = inputs[n["name"]]
        elif nid in conds:
            i, branches = conds[nid]
            choice, sub = key[i]
            branch = branches[choice][0]
            outs = _inline(branch, sub, {name: get(e) for name, e in branch.inputs.items()},
                           em, site_outputs, loop_outputs)
            emitted.update(((nid, k), e) for k, e in enumerate(outs))
        elif nid in body.site_of:
            emitted.update(((nid, k), e) for k, e in enumerate(site_outputs[body.site_of[nid]]))
        elif nid in body.loops:
            loop = body.loops[nid]
            outs = loop_outputs(loop, loop.in_slot_order([get(i) for i in n["inputs"]]))
            emitted.update(((nid, k), e) for k, e in enumerate(outs))
        else:
            copied[nid] = em.copy(n, [get(i) for i in n["inputs"]])
    return [get(h) for h in body.heads]

