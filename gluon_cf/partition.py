"""Running a subgraph that itself contains gluon_cf nodes: partition it at those nodes.

NOTE [partitioned execution]
    MXNet runs ``Custom`` operators on worker threads, and a Custom node whose forward blocks on a
    nested Custom node (a ``cond`` inside a ``foreach`` body, a recursive ``invoke``) deadlocks or
    needs a thread per nesting level. So only the *outermost* gluon_cf node of a graph is an MXNet
    Custom operator at run time. When a subgraph contains gluon_cf nodes, we cut it at them: the
    ordinary operators between them become CachedOp *segments*, and the gluon_cf nodes are run by
    their rules directly, in the calling thread. Under ``autograd.record()`` the whole thing is
    recorded as usual, so gradients need nothing special.

    A node's *stage* is the number of gluon_cf nodes on its longest path from the inputs. Segment
    ``s`` holds the ordinary nodes of stage ``s``; gluon_cf nodes of stage ``s`` run after segment
    ``s`` (they only read values of stage <= ``s``) and before segment ``s + 1``.
"""
import json

import mxnet as mx

from ._cachedop import CachedOpPair
from ._custom_ops import is_hidden
from .executor import Parallel, done

OP_PREFIX = "_gluon_cf_"


def gluon_cf_kind(node):
    """The gluon_cf op kind of a JSON node, or None for an ordinary node."""
    if node["op"] != "Custom":
        return None
    op_type = node.get("attrs", {}).get("op_type", "")
    return op_type[len(OP_PREFIX):] if op_type.startswith(OP_PREFIX) else None


def is_user_custom(node):
    """Whether a JSON node is a user's ``mx.operator.CustomOp`` (a Custom node not ours)."""
    return node["op"] == "Custom" and gluon_cf_kind(node) is None


def _step_kind(node):
    """What a JSON node is for partitioning: a gluon_cf op kind, ``"user_custom"`` or None."""
    return gluon_cf_kind(node) or ("user_custom" if is_user_custom(node) else None)


def user_custom_op_types(spec):
    """The ``op_type`` of every user CustomOp in a node's subgraphs, nested nodes included."""
    return sorted({n.get("attrs", {}).get("op_type", "?")
                   for n in _nodes_of(spec) if is_user_custom(n)})


def aux_state_nodes(spec, ops):
    """The JSON nodes of a node's subgraphs (nested included) whose operator is in ``ops``."""
    return [n for n in _nodes_of(spec) if n["op"] in ops]


def _nodes_of(spec):
    """Every JSON node of a node's subgraphs, nested gluon_cf nodes' subgraphs included."""
    for graph in spec.get("graphs", {}).values():
        for n in json.loads(graph["json"])["nodes"]:
            yield n
            if gluon_cf_kind(n):
                yield from _nodes_of(json.loads(n["attrs"]["spec"]))


def has_gluon_cf_nodes(graph_json):
    """Whether a graph must run partitioned (it holds gluon_cf nodes or user CustomOps)."""
    return any(_step_kind(n) for n in graph_json["nodes"])


class _Segment:
    """Ordinary operators between gluon_cf nodes, as one CachedOp."""

    def __init__(self, symbol, in_entries, out_entries, depends_on):
        self.symbol = symbol
        # out entry -> the in entries it is computed from: an output is batched only if one of
        # those is (a constant beside batched values stays shared, NOTE [batching]).
        self.depends_on = depends_on
        names = symbol.list_inputs()
        by_name = {"e%d_%d" % e: e for e in in_entries}
        self.in_entries = [by_name[n] for n in names]
        self.out_entries = out_entries
        self.op = CachedOpPair(symbol)

    def run(self, values):
        out = self.op(*[values[e] for e in self.in_entries])
        out = out if isinstance(out, (list, tuple)) else [out]
        values.update(zip(self.out_entries, out))


class _CfCall:
    def __init__(self, kind, spec, in_entries, out_entries):
        from . import node as _node  # node.py -> subgraph.py -> here: import late
        self.rule = _node.rule_of(kind)
        self.node = _node.decode(kind, spec)
        self.in_entries = in_entries
        self.out_entries = out_entries

    def run(self, values, ctx):
        inputs = [values[e] for e in self.in_entries]
        out_shapes = None  # inside a batch, rules that need them infer them per row
        if self.rule.needs_out_shapes and (ctx is None or ctx.rows == 1):
            _, out_shapes = self.rule.infer_shape(self.node, [x.shape for x in inputs])
        return self.rule.forward(self.node, inputs, out_shapes, ctx)



class _UserCustomCall:
    """A user's CustomOp, called imperatively from the executor's thread.

    NOTE [user CustomOps at run time]: inside a CachedOp that runs within a gluon_cf node (itself
    a Custom operator running on one of MXNet's custom-op worker threads), a user's Custom
    operator hangs MXNet about half the time in backward (all engine and custom-op threads idle,
    one completion lost). Called as an imperative ``mx.nd.Custom`` from our thread, as an
    eager model would, it records on the autograd tape like any other operator.
    """

    def __init__(self, attrs, in_entries, out_entries):
        self.attrs = {k: v for k, v in attrs.items() if not is_hidden(k)}
        self.in_entries = in_entries
        self.out_entries = out_entries

    def run(self, values, ctx):
        out = mx.nd.Custom(*[values[e] for e in self.in_entries], **self.attrs)
        return done(list(out) if isinstance(out, (list, tuple)) else [out])


class _CfGroup:
    """The gluon_cf nodes of one stage: independent of each other."""

    def __init__(self, calls):
        self.calls = calls


def _call_frame(ctx, flags, call):
    if ctx is None or flags is None:
        return ctx
    return ctx.with_flags([flags.get(e, False) for e in call.in_entries])


def _num_outputs(nodes, nid, heads):
    """How many outputs node ``nid`` has: one past the highest output index anything reads
    (a user CustomOp's count is its prop's business; unread trailing outputs do not matter)."""
    used = [idx for n in nodes for src, idx, *_ in n["inputs"] if src == nid]
    used += [idx for src, idx in heads if src == nid]
    return max(used, default=0) + 1


class PartitionedGraph:
    """Runs like a CachedOp, through ``run(inputs, ctx)``, inputs in ``list_inputs()`` order."""

    def __init__(self, symbol):
        js = json.loads(symbol.tojson())
        nodes, heads = js["nodes"], [tuple(h[:2]) for h in js["heads"]]
        var_entry = {n["name"]: (nid, 0) for nid, n in enumerate(nodes) if n["op"] == "null"}
        self.input_entries = [var_entry[name] for name in symbol.list_inputs()]
        self.heads = heads

        kinds = [_step_kind(n) for n in nodes]
        stage = {}
        for nid, n in enumerate(nodes):
            if n["op"] == "null":
                continue
            s = 0
            for src, _, *_ in n["inputs"]:
                if nodes[src]["op"] == "null":
                    continue
                s = max(s, stage[src] + (1 if kinds[src] else 0))
            stage[nid] = s

        # Which entries are read across a boundary (by a later segment, a gluon_cf node, a head).
        consumers = {}
        for nid, n in enumerate(nodes):
            for src, idx, *_ in n["inputs"]:
                consumers.setdefault((src, idx), []).append(nid)
        self.steps = []
        for s in range(max(stage.values(), default=-1) + 1):
            members = [nid for nid in sorted(stage) if stage[nid] == s and not kinds[nid]]
            if members:
                self.steps.append(self._segment(nodes, members, consumers, heads, js))
            calls = []
            for nid in sorted(stage):
                if stage[nid] == s and kinds[nid]:
                    n = nodes[nid]
                    ins = [tuple(i[:2]) for i in n["inputs"]]
                    if kinds[nid] == "user_custom":
                        outs = [(nid, k) for k in range(_num_outputs(nodes, nid, heads))]
                        calls.append(_UserCustomCall(n.get("attrs", {}), ins, outs))
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
            n["inputs"] = [[new_id[src], idx, 0] if src in member_set else [new_id[(src, idx)], 0, 0]
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
        return _Segment(symbol, in_entries, out_entries,
                        {e: reads[e[0]] for e in out_entries})

    def run(self, inputs, ctx):
        """Generator: run the steps in order; gluon_cf nodes are yielded to the executor."""
        values = dict(zip(self.input_entries, inputs))
        flags = self._entry_flags(ctx.flags) if ctx is not None and ctx.flags is not None \
            else None
        for step in self.steps:
            if isinstance(step, _Segment):
                step.run(values)
                continue
            works = [call.run(values, _call_frame(ctx, flags, call)) for call in step.calls]
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

