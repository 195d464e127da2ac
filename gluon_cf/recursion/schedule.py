"""Ahead-of-time schedules: recursion whose control flow depends only on integer inputs.

NOTE [ahead-of-time schedules]
    In most recursive models (TreeLSTM, TreeRNN, RNTN) every ``cond`` predicate and every
    recursive call's argument is computed from the function's index arguments and integer
    inputs of the block (``left``, ``right``), never from parameters or computed values. Then the
    whole call tree of a mini-batch is known before any value is computed (what TF Fold asks its
    users to provide), and the dynamic batching executor's per-level work (a predicate read to
    the host, splits, concatenations, one call per piece) can be replaced by a schedule:

    1. **Analysis**, once per function table (:func:`analyse`). A function qualifies when
       * its body (with every nested ``cond`` branch) holds only ordinary operators, ``cond``
         and ``invoke`` nodes of the same table (no loops, nested recursion nodes, CustomOps or
         run-time-shape operators);
       * its *control skeleton* - the operators computing each ``cond`` predicate and each
         ``invoke`` argument - reads only the function's arguments and the environment through
         operators with a host rule (``HOST_RULES``: ``take``, comparisons, integer-scalar
         arithmetic, copies, casts), each exact in numpy for the values MXNet computes;
       * its arguments are *index-only*: everything computed from them reaches only the
         skeleton and index inputs (``take``'s indices, ``Embedding``'s data), so no gradient
         flows into them and a host copy of them is as good as the original;
       * its outputs have one row per invocation and one dtype (they are stored packed).
       Anything else keeps the dynamic executor; :func:`report` says why, per function.
    2. **Host expansion** (:meth:`_Schedule.expand`): starting from the batch's root calls, the
       skeleton is evaluated in numpy one frontier (call depth) at a time, for all rows at
       once: the predicate of every ``cond`` picks each row's branch, the arguments of every
       ``invoke`` become the next frontier. The result is the call tree: for every invocation
       its *variant* (the branches it takes), its arguments and its children. The depth bound
       is checked here, before any value is computed.
    3. **Values** (:meth:`_Schedule.run`): invocations are grouped by (height above the leaves,
       function, variant) and every group runs as **one** CachedOp call: the variant's body
       with the chosen branches inlined and each ``invoke`` replaced by a gather of the
       children's rows from the outputs of earlier groups (:func:`_value_graph`). The
       arguments and all gather indices of the whole schedule are uploaded once. A batch
       costs one call per (height, variant) plus two host reads (root arguments, the
       environment's integer arrays), where the dynamic executor pays several calls and one
       host read per level.

    Autograd records the group calls like any other, so training gets the same gradients; the
    skeleton's operators are not recorded, which changes nothing because, being index-only,
    they receive no gradient in the dynamic executor either. When a value the skeleton reads
    from the environment has a gradient buffer attached, the dynamic executor runs instead, so
    that buffer is written exactly as before.
"""
import collections
from typing import Dict, Optional
import json
import threading

import mxnet as mx
import numpy as np

from .. import executor, registry, rowwise
from ..errors import CallTreeTooLargeError, RecursionDepthError
from ..graph import CachedGraph, block_index_gradients
from ..operators import DYNAMIC_SHAPE_OPS, INDEX_INPUTS
from .table import table as _table

# Invocations one schedule may hold: beyond, the call tree is refused with CallTreeTooLargeError
# before any value is computed (a cycle in the tree arrays doubles it at every level, and the
# dynamic executor would exhaust memory long before max_depth).
MAX_INVOCATIONS = 1 << 22
_EXACT_SCALAR = 1 << 24     # integer scalars below this are exact in float32 too


class _NotPlannable(Exception):
    """Why a function keeps the dynamic executor (a sentence naming the node)."""


# ------------------------------------------------------------------------------- host rules

def _small_integer(node):
    text = node.get("attrs", {}).get("scalar", "0")
    value = float(text)
    if not value.is_integer() or abs(value) >= _EXACT_SCALAR:
        raise _NotPlannable("operator %s (node %r) uses the scalar %s, which is not a small "
                            "integer" % (node["op"], node["name"], text))
    return value


def _compare(fn, scalar=False):
    def rule(node):
        if scalar:
            value = _small_integer(node)
            return lambda x: fn(x, x.dtype.type(value)).astype(x.dtype)
        return lambda x, y: fn(x, y).astype(x.dtype)
    return rule


def _arithmetic(fn, scalar=False, reverse=False):
    def rule(node):
        if scalar:
            value = _small_integer(node)
            if reverse:
                return lambda x: fn(x.dtype.type(value), x)
            return lambda x: fn(x, x.dtype.type(value))
        return fn
    return rule


def _take(node):
    attrs = node.get("attrs", {})
    mode = attrs.get("mode", "clip")
    if int(attrs.get("axis", "0")) != 0 or mode not in ("clip", "wrap"):
        raise _NotPlannable("operator take (node %r) has axis=%s, mode=%s; the schedule "
                            "evaluates take only on axis 0 in clip or wrap mode"
                            % (node["name"], attrs.get("axis", "0"), mode))

    def take(table, indices):
        # MXNet casts the indices to integers (truncation) and then clips or wraps them.
        index = indices.astype(np.int64)
        if mode == "wrap":
            return table[np.mod(index, len(table))]
        np.maximum(index, 0, out=index)
        np.minimum(index, len(table) - 1, out=index)
        return table[index]
    return take


def _cast(node):
    dtype = np.dtype(node["attrs"]["dtype"])
    return lambda x: x.astype(dtype)


def _same(node):
    return lambda x: x


# Operator -> rule(node) returning a numpy function equal to MXNet's operator on that node.
HOST_RULES = {
    "take": _take,
    "Cast": _cast, "cast": _cast,
    "BlockGrad": _same, "stop_gradient": _same, "_copy": _same, "identity": _same,
    "negative": lambda node: np.negative, "abs": lambda node: np.abs,
    "zeros_like": lambda node: np.zeros_like, "ones_like": lambda node: np.ones_like,
    "_plus_scalar": _arithmetic(np.add, True), "_minus_scalar": _arithmetic(np.subtract, True),
    "_rminus_scalar": _arithmetic(np.subtract, True, True),
    "_mul_scalar": _arithmetic(np.multiply, True),
    "_maximum_scalar": _arithmetic(np.maximum, True),
    "_minimum_scalar": _arithmetic(np.minimum, True),
    "elemwise_add": _arithmetic(np.add), "elemwise_sub": _arithmetic(np.subtract),
    "elemwise_mul": _arithmetic(np.multiply),
    "broadcast_add": _arithmetic(np.add), "broadcast_plus": _arithmetic(np.add),
    "broadcast_sub": _arithmetic(np.subtract), "broadcast_minus": _arithmetic(np.subtract),
    "broadcast_mul": _arithmetic(np.multiply),
    "_maximum": _arithmetic(np.maximum), "_minimum": _arithmetic(np.minimum),
    "broadcast_maximum": _arithmetic(np.maximum), "broadcast_minimum": _arithmetic(np.minimum),
}
for _name, _fn in (("lesser", np.less), ("greater", np.greater), ("equal", np.equal),
                   ("not_equal", np.not_equal), ("lesser_equal", np.less_equal),
                   ("greater_equal", np.greater_equal)):
    HOST_RULES["_%s" % _name] = _compare(_fn)
    HOST_RULES["broadcast_%s" % _name] = _compare(_fn)
    HOST_RULES["_%s_scalar" % _name] = _compare(_fn, scalar=True)


# ------------------------------------------------------------------------------------ analysis

def _entry(ref):
    return (ref[0], ref[1])


class _Body:
    """One graph of a function (its body or a ``cond`` branch) as the schedule sees it.

    ``inputs``: variable name -> where its value comes from (``("arg", k)``, ``("env", i)``
    for a function body; the enclosing graph's entry for a branch). ``batched``: per input
    name, whether it holds one row per invocation.
    """

    def __init__(self, graph_json, inputs, batched, sites, export=False):
        self.export = export      # for ONNX: any operator may compute the skeleton
        self.nodes = graph_json["nodes"]
        self.heads = [_entry(h) for h in graph_json["heads"]]
        self.inputs = inputs
        self.rules = {}           # nid -> numpy function (skeleton nodes)
        self.conds = []           # (nid, pred entry, {choice: (_Body, [(name, entry)])})
        self.invokes = []         # (nid, site, callee qname, [entries])
        self.site_of = {}         # invoke nid -> site index in the function
        self.loops = {}           # while_loop nid -> _Loop (export only: calls inside loops)
        self.batched = {}         # nid -> whether its outputs hold rows
        self._analyse(batched, sites)

    def _analyse(self, input_batched, sites):
        from ..graph import decode
        nodes = self.nodes
        for nid, n in enumerate(nodes):
            kind = registry.kind_of(n)
            ins = [_entry(i) for i in n["inputs"]]
            if n["op"] == "null":
                self.batched[nid] = input_batched[n["name"]]
                continue
            self.batched[nid] = any(self.batched[src] for src, _ in ins)
            if kind == "cond":
                node = decode("cond", n["attrs"]["spec"])
                branches = {}
                for choice, role in ((True, "then"), (False, "else")):
                    graph = node.graphs[role]
                    mapping = {name: ins[slot] for name, slot in zip(graph.input_names,
                                                                     graph.slots)}
                    body = _Body(json.loads(node.spec["graphs"][role]["json"]), mapping,
                                 {name: self.batched[e[0]] for name, e in mapping.items()},
                                 sites, self.export)
                    branches[choice] = (body, [(name, mapping[name]) for name in body.needs])
                self.conds.append((nid, ins[0], branches))
            elif kind == "invoke":
                spec = json.loads(n["attrs"]["spec"])
                site = len(sites)
                sites.append(spec["function"])
                self.site_of[nid] = site
                self.invokes.append((nid, site, spec["function"], ins))
            elif kind == "while_loop" and self.export and _calls_inside(n):
                self.loops[nid] = _Loop(n, ins, sites)
            elif kind is not None or registry.is_user_custom(n) or n["op"] in DYNAMIC_SHAPE_OPS:
                raise _NotPlannable("its body holds %s (node %r), which the schedule does not "
                                    "inline" % (kind or n["op"], n["name"]))
        self._find_skeleton()

    def _find_skeleton(self):
        """The skeleton: nodes computing predicates, invoke arguments and what branches need."""
        wanted = []
        for nid, pred, branches in self.conds:
            wanted.append(pred)
            for body, needs in branches.values():
                wanted += [entry for _, entry in needs]
        for _, _, _, ins in self.invokes:
            wanted += ins
        for loop in self.loops.values():
            wanted += loop.ins
        needed, self.needs, stack = set(), [], list(wanted)
        while stack:
            nid, k = stack.pop()
            if nid in needed:
                continue
            needed.add(nid)
            n = self.nodes[nid]
            if n["op"] == "null":
                self.needs.append(n["name"])
                continue
            if registry.kind_of(n) is None and self.export:
                self.rules[nid] = None   # emitted as an ONNX operator, never run on the host
                stack += [_entry(i) for i in n["inputs"]]
                continue
            rule = HOST_RULES.get(n["op"])
            if registry.kind_of(n) is not None or rule is None:
                raise _NotPlannable(
                    "a cond predicate or a recursive call's argument is computed by %s (node "
                    "%r), which the schedule cannot evaluate ahead of time (it depends on a "
                    "computed value, or has no host rule)" % (registry.kind_of(n) or n["op"],
                                                               n["name"]))
            self.rules[nid] = rule(n)
            stack += [_entry(i) for i in n["inputs"]]
        self.needs = sorted(set(self.needs))
        # What evaluate() runs: the needed inputs, then each skeleton node in graph order.
        self.variables = [((nid, 0), n["name"]) for nid, n in enumerate(self.nodes)
                          if n["op"] == "null" and n["name"] in self.needs]
        self.program = [((nid, 0), self.rules[nid], [_entry(i) for i in self.nodes[nid]["inputs"]])
                        for nid in sorted(self.rules) if self.rules[nid] is not None]

    def check_index_only(self, derived):
        """Raise unless the values in ``derived`` (input names computed from the function's
        arguments) reach only the skeleton and index inputs (NOTE [ahead-of-time schedules])."""
        reached = {(nid, 0) for nid, n in enumerate(self.nodes)
                   if n["op"] == "null" and n["name"] in derived}
        cond_at = {nid: branches for nid, _, branches in self.conds}
        for nid, n in enumerate(self.nodes):
            for pos, ref in enumerate(n["inputs"]):
                if _entry(ref) not in reached:
                    continue
                if nid in self.site_of:
                    continue
                if n["op"] in HOST_RULES and registry.kind_of(n) is None:
                    reached.add((nid, 0))
                elif nid in cond_at:
                    if pos == 0:
                        continue
                    for body, _ in cond_at[nid].values():
                        body.check_index_only({name for name, e in body.inputs.items()
                                               if e == _entry(ref)})
                elif pos not in INDEX_INPUTS.get(n["op"], ()):
                    raise _NotPlannable(
                        "an argument reaches operator %s (node %r) as a value, not an index"
                        % (n["op"], n["name"]))
        if any(h in reached for h in self.heads):
            raise _NotPlannable("it returns a value computed from its arguments")

    def evaluate(self, values, rows):
        """The skeleton on ``rows`` invocations: ``values`` maps the needed input names to
        numpy arrays (rows along axis 0 where batched). Returns ``(codes, keys, calls)``: each
        row's variant as an index into ``keys`` (nested tuples of branch choices), and per
        ``invoke`` reached ``(site, row indices, callee, argument arrays)``."""
        if not self.conds and not self.invokes:     # no control flow here: one variant
            return np.zeros(rows, np.int64), [()], []
        vals = {entry: values[name] for entry, name in self.variables}
        for entry, rule, ins in self.program:
            vals[entry] = rule(*[vals[e] for e in ins])
        columns, calls = [], []
        for nid, pred, branches in self.conds:
            value = vals[pred]
            if self.batched[pred[0]]:
                taken = value.reshape(rows, -1)[:, 0] != 0
            else:
                taken = np.full(rows, bool(value.reshape(-1)[0] != 0))
            codes, keys = np.empty(rows, np.int64), []
            for choice in (True, False):
                picked = np.flatnonzero(taken if choice else ~taken)
                if not len(picked):
                    continue
                body, needs = branches[choice]
                sub = {name: vals[e][picked] if self.batched[e[0]] else vals[e]
                       for name, e in needs}
                sub_codes, sub_keys, sub_calls = body.evaluate(sub, len(picked))
                codes[picked] = sub_codes + len(keys)
                keys += [(choice, k) for k in sub_keys]
                calls += [(site, picked[r], callee, args)
                          for site, r, callee, args in sub_calls]
            columns.append((codes, keys))
        everyone = None
        for nid, site, callee, ins in self.invokes:
            if everyone is None:
                everyone = np.arange(rows)
            args = [vals[e] if self.batched[e[0]] else np.repeat(vals[e], rows, axis=0)
                    for e in ins]
            calls.append((site, everyone, callee, args))
        if not columns:
            return np.zeros(rows, np.int64), [()], calls
        if len(columns) == 1:
            codes, keys = columns[0]
            return codes, [(k,) for k in keys], calls
        unique, codes = np.unique(np.stack([c for c, _ in columns], axis=1), axis=0,
                                  return_inverse=True)
        return codes.reshape(-1), [tuple(columns[i][1][u] for i, u in enumerate(row))
                                   for row in unique], calls

    def sites_of(self, key):
        """The invoke sites reached under variant ``key``, in the order they are inlined."""
        sites = []
        conds = {nid: (key[i], branches) for i, (nid, _, branches) in enumerate(self.conds)}
        for nid in range(len(self.nodes)):
            if nid in conds:
                (choice, sub), branches = conds[nid]
                sites += branches[choice][0].sites_of(sub)
            elif nid in self.site_of:
                sites.append(self.site_of[nid])
            elif nid in self.loops:
                sites += self.loops[nid].columns()
        return sites


def _calls_inside(node):
    """Whether a gluon_cf node's graphs hold recursive calls at their top level."""
    spec = json.loads(node["attrs"]["spec"])
    return any(registry.kind_of(n) == "invoke"
               for graph in spec["graphs"].values() for n in json.loads(graph["json"])["nodes"])


def _reached(nodes, heads):
    """The node ids ``heads`` (entries) are computed from, inputs included."""
    seen, stack = set(), [h[0] for h in heads]
    while stack:
        nid = stack.pop()
        if nid not in seen:
            seen.add(nid)
            stack += [i[0] for i in nodes[nid]["inputs"]]
    return seen


class _Loop:
    """A ``while_loop`` whose ``func`` makes recursive calls (for the ONNX export only: NOTE
    [recursion as ONNX loops] in export/onnx_recursion.py). Each call site in ``func`` takes
    ``max_iterations`` consecutive site columns of the function, one per iteration. Its
    *skeleton variables* (those its ``cond`` and its calls' arguments read, and those their
    updates read) must not depend on what the calls return: then the expansion can run the
    loop's skeleton for every row before any value is known."""

    def __init__(self, node, ins, sites):
        from ..graph import decode
        spec = json.loads(node["attrs"]["spec"])
        decoded = decode("while_loop", node["attrs"]["spec"])
        where = "while_loop (node %r)" % node["name"]
        self.ins, self.nv = ins, spec["num_vars"]
        self.max_iterations = spec.get("max_iterations")
        if not isinstance(self.max_iterations, int) or spec["num_out_data"]:
            raise _NotPlannable("its %s makes recursive calls, and has no max_iterations or "
                                "has step outputs" % where)
        self.cond_json = json.loads(spec["graphs"]["cond"]["json"])
        self.func_json = json.loads(spec["graphs"]["func"]["json"])
        self.cond_graph, self.func_graph = decoded.graphs["cond"], decoded.graphs["func"]
        for n in self.cond_json["nodes"]:
            if registry.kind_of(n) is not None:
                raise _NotPlannable("the cond of its %s holds %s" % (where, registry.kind_of(n)))
        self.calls = []          # (first column, invoke nid in func, callee)
        for fnid, n in enumerate(self.func_json["nodes"]):
            kind = registry.kind_of(n)
            if kind == "invoke":
                callee = json.loads(n["attrs"]["spec"])["function"]
                self.calls.append((len(sites), fnid, callee))
                sites += [callee] * self.max_iterations
            elif kind is not None:
                raise _NotPlannable("the func of its %s holds %s" % (where, kind))
        nodes, heads = self.func_json["nodes"], self.func_json["heads"]
        var_of = {name: slot for name, slot in zip(self.func_graph.input_names,
                                                  self.func_graph.slots) if slot < self.nv}
        cond_vars = {slot for name, slot in zip(self.cond_graph.input_names,
                                                self.cond_graph.slots) if slot < self.nv}
        calls = {fnid for _, fnid, _ in self.calls}

        def vars_read(entries):
            reached = _reached(nodes, entries)
            if reached & calls:
                return None
            return {var_of[nodes[i]["name"]] for i in reached
                    if nodes[i]["op"] == "null" and nodes[i]["name"] in var_of}
        skeleton = set(cond_vars)
        for _, fnid, _ in self.calls:
            skeleton |= vars_read([_entry(i) for i in nodes[fnid]["inputs"]])
        while True:
            grown = set(skeleton)
            for k in skeleton:
                read = vars_read([_entry(heads[k])])
                if read is None:
                    raise _NotPlannable("loop variable #%d of its %s, which decides its steps "
                                        "or its calls' arguments, is computed from what a "
                                        "recursive call returns" % (k, where))
                grown |= read
            if grown == skeleton:
                break
            skeleton = grown
        self.skeleton_vars = sorted(skeleton)

    def columns(self):
        return [first + j for first, _, _ in self.calls for j in range(self.max_iterations)]


class _Function:
    """A function of the table as the schedule sees it."""

    def __init__(self, context, qname, export=False):
        self.qname = qname
        spec = context.specs[qname]
        self.name = spec["name"]
        self.label = _label(spec)
        self.num_args = spec["num_args"]
        self.max_depth = spec["max_depth"]
        graph = context.graphs[qname]
        self.graph = graph
        inputs = {name: ("arg", s) if s < self.num_args else ("env", s - self.num_args)
                  for name, s in zip(graph.input_names, graph.slots)}
        self.sites = []   # site -> callee qname
        self.body = _Body(json.loads(spec["json"]), inputs,
                          {name: kind == "arg" for name, (kind, _) in inputs.items()},
                          self.sites, export)
        if self.num_args == 0:
            raise _NotPlannable("it takes no arguments")
        if not export:   # the exported model has no gradients to keep away from the skeleton
            self.body.check_index_only({name for name, (kind, _) in inputs.items()
                                        if kind == "arg"})
        # Host values of the skeleton's inputs: body input name -> argument / environment index.
        self.host_args = {name: inputs[name][1] for name in self.body.needs
                          if inputs[name][0] == "arg"}
        self.host_env = {name: inputs[name][1] for name in self.body.needs
                         if inputs[name][0] == "env"}
        self.env_needs = sorted(self.host_env.values())
        self._callees = {}
        self.variants = {}    # key -> variant id
        self.keys = []
        self._lock = threading.Lock()

    def variant(self, key):
        vid = self.variants.get(key)
        if vid is None:
            with self._lock:   # blocks of several threads share the function's variants
                vid = self.variants.get(key)
                if vid is None:
                    self.keys.append(key)
                    vid = self.variants[key] = len(self.keys) - 1
        return vid

    def callees(self, vid):
        """The calls of variant ``vid``: ``[(callee qname, [site, ...]), ...]`` in order."""
        found = self._callees.get(vid)
        if found is None:
            by_callee = {}
            for site in self.body.sites_of(self.keys[vid]):
                by_callee.setdefault(self.sites[site], []).append(site)
            found = self._callees[vid] = list(by_callee.items())
        return found


RUNS: collections.Counter = collections.Counter()   # function name -> batches run on a schedule (for tests, tools)
_ANALYSES: dict = {}   # (id of the function graphs, entry qname) -> _Plan or the reason it is refused
_REPORT: dict = {}     # function name -> None (ahead of time) or why not


class _Plan:
    """The functions reachable from one entry, all plannable."""

    def __init__(self, context, entry, export=False):
        """``export``: for the ONNX lowering (export/onnx_recursion.py), whose skeleton runs
        as ONNX operators: any operator may compute it, and arguments may carry values."""
        self.entry = entry
        self.functions = {}
        todo = [entry]
        while todo:
            qname = todo.pop()
            if qname in self.functions:
                continue
            if qname not in context.graphs:
                raise _NotPlannable("it calls %r, a function of an enclosing recursion" % qname)
            try:
                function = self.functions[qname] = _Function(context, qname, export)
            except _NotPlannable as why:
                raise _NotPlannable("%s: %s" % (context.specs[qname]["name"], why)) from None
            todo += function.sites
        self.env_needs = sorted({i for f in self.functions.values() for i in f.env_needs})
        self.order = {q: i for i, q in enumerate(sorted(self.functions))}
        self.graphs = {}      # (qname, variant, sources per callee) -> _ValueGraph
        self.layouts = {}     # (qname, argument shapes and dtypes, env shapes) -> layout


def analyse(context, qname):
    """The :class:`_Plan` of ``qname``'s table, or None when it runs dynamically (cached)."""
    key = (id(context.graphs), qname)
    plan = _ANALYSES.get(key)
    if plan is None:
        try:
            plan = _Plan(context, qname)
            for f in plan.functions.values():
                _REPORT[f.label] = None
        except _NotPlannable as why:
            plan = str(why)
            _REPORT[_label(context.specs[qname])] = plan
        _ANALYSES[key] = plan
    return plan if isinstance(plan, _Plan) else None


def report() -> Dict[str, Optional[str]]:
    """Per recursive function run so far by the batching executor (``"name at file:line"``):
    ``None`` if it runs on an ahead-of-time schedule, else the reason it runs dynamically
    (``gluon_cf.set_executor`` turns schedules off).

    The reasons name what in the function's body depends on computed values. Example: the
    TreeRNN's recursion is planned ahead (its structure comes from ``left``/``right`` alone):

    >>> import mxnet as mx
    >>> from gluon_cf.data import batchify_forest, build_vocab, encode_tree, synthetic_treebank
    >>> from gluon_cf.models import TreeRNN
    >>> from gluon_cf.recursion import schedule
    >>> trees = synthetic_treebank(4, seed=1)
    >>> vocab = build_vocab(trees)
    >>> forest = batchify_forest([encode_tree(tree, vocab) for tree in trees])
    >>> net = TreeRNN(len(vocab), embed_size=8, hidden_size=8)
    >>> net.initialize()
    >>> net.hybridize()
    >>> arrays = [mx.nd.array(a) for a in (forest.tokens, forest.left, forest.right, forest.roots)]
    >>> net(*arrays).asnumpy().shape
    (4, 5)
    >>> planned = [where for where, why in schedule.report().items() if why is None]
    >>> any(where.startswith("node at") and "models/recursive.py" in where for where in planned)
    True
    """
    return dict(_REPORT)


def _label(spec):
    return "%s at %s" % (spec["name"], spec.get("source", "?"))


# ------------------------------------------------------------------------------------- running

def run(context, qname, args, rows, depth):
    """The outputs of ``rows`` invocations of ``qname`` on ``args`` (one row each) on an
    ahead-of-time schedule, or None when the dynamic executor must run them."""
    if not executor.ahead_of_time():
        return None
    plan = analyse(context, qname)
    if plan is None:
        return None
    if mx.autograd.is_recording() and any(context.env[i].grad is not None
                                          for i in plan.env_needs):
        return None
    schedule = _Schedule(plan, context)
    schedule.expand([a.asnumpy() for a in args], depth)
    if not schedule.lay_out():
        return None
    outputs = schedule.run(args[0].context)
    RUNS[plan.functions[qname].name] += 1
    return outputs


def _layout(plan, context, qname, arg_shapes, arg_dtypes):
    """How ``qname``'s outputs are packed into one row per invocation, for these argument
    shapes: ``{"shapes", "sizes", "width"}``; None if they cannot be, or if its body is not
    known to act row by row for them (cached)."""
    function = plan.functions[qname]
    graph = function.graph
    values = [rowwise.Shaped((3,) + s[1:]) for s in arg_shapes] + \
        [rowwise.Shaped(s) for s in context.env_shapes]
    values, flags = ([values[s] for s in graph.slots],
                     [s < function.num_args for s in graph.slots])
    key = (qname, tuple(arg_shapes), tuple(str(d) for d in arg_dtypes),
           graph.row_check_key(values, flags))
    if key in plan.layouts:
        return plan.layouts[key]
    table = _table(context.namespace)
    layout = None
    outs = table.out_shapes(qname, list(arg_shapes)) if table is not None else None
    types = table.out_types(qname, list(arg_dtypes)) if table is not None else None
    if not outs or None in outs or any(registry.is_dynamic(o) or not o or o[0] != 1
                                       for o in outs) \
            or not types or None in types or len({np.dtype(t) for t in types}) != 1:
        _REPORT[function.label] = ("its outputs (shapes %s, dtypes %s) are not one row per "
                                  "invocation of one dtype" % (outs, types))
    else:
        rejected = graph.rows_rejected(values, flags)
        if rejected is not None:
            _REPORT[function.label] = "it does not act row by row: " + rejected.describe()
        else:
            sizes = [int(np.prod(o[1:], dtype=np.int64)) for o in outs]
            layout = {"shapes": [tuple(o[1:]) for o in outs], "sizes": sizes,
                      "width": sum(sizes), "dtype": np.dtype(types[0])}
    plan.layouts[key] = layout
    return layout


class _Schedule:
    """One batch's call tree (host expansion) and its run (NOTE [ahead-of-time schedules])."""

    def __init__(self, plan, context):
        self.plan = plan
        self.context = context

    def expand(self, root_args, depth):
        """Evaluate the skeleton frontier by frontier from the root calls."""
        plan = self.plan
        env = {i: self.context.env[i].asnumpy() for i in plan.env_needs}
        counts = dict.fromkeys(plan.functions, 0)
        self.steps = []      # per depth: [(qname, first id, variant ids, children)]
        self.args = {q: [] for q in plan.functions}
        frontier = {plan.entry: list(root_args)}
        total = 0
        while frontier:
            step, following = [], {}
            for qname, args in frontier.items():
                function = plan.functions[qname]
                if depth > function.max_depth:
                    raise RecursionDepthError(
                        "gluon_cf.recursive: %r exceeded max_depth=%d nested calls; does it "
                        "reach a base case?" % (function.name, function.max_depth))
                rows = len(args[0])
                values = {name: args[k] for name, k in function.host_args.items()}
                values.update((name, env[i]) for name, i in function.host_env.items())
                codes, keys, calls = function.body.evaluate(values, rows)
                variant_ids = np.array([function.variant(k) for k in keys], np.int64)[codes]
                children = np.full((rows, len(function.sites)), -1, np.int64)
                for site, picked, callee, callee_args in calls:
                    chunks = following.setdefault(callee, [0, []])
                    children[picked, site] = chunks[0] + np.arange(len(picked))
                    chunks[0] += len(picked)
                    chunks[1].append(callee_args)
                step.append((qname, counts[qname], variant_ids, children))
                self.args[qname].append(args)
                counts[qname] += rows
                total += rows
            # Children were numbered within the next frontier; make them ids of their callee.
            for qname, _, _, children in step:
                for site, callee in enumerate(plan.functions[qname].sites):
                    column = children[:, site]
                    column[column >= 0] += counts[callee]
            self.steps.append(step)
            if total + sum(c[0] for c in following.values()) > MAX_INVOCATIONS:
                names = sorted({plan.functions[q].name for q in frontier})
                raise CallTreeTooLargeError(
                    "gluon_cf.recursive: %s would make more than %d calls for one batch (%d "
                    "levels deep so far); does it reach a base case, or do the tree arrays "
                    "hold a cycle?" % (", ".join(map(repr, names)), MAX_INVOCATIONS,
                                       len(self.steps)))
            frontier = {callee: [np.concatenate(parts) for parts in zip(*chunks[1])]
                        for callee, chunks in following.items()}
            depth += 1
        self.counts = counts
        self.roots = len(root_args[0])

    def lay_out(self):
        """Group the invocations by (height, function, variant), in the order they run, and
        compute every gather index. False if some function's outputs cannot be packed."""
        plan, counts = self.plan, self.counts
        live = [q for q in plan.functions if counts[q]]
        variants = {q: np.concatenate([s[2] for step in self.steps for s in step if s[0] == q])
                    for q in live}
        children = {q: np.concatenate([s[3] for step in self.steps for s in step if s[0] == q])
                    for q in live}
        args = {q: [np.concatenate(parts) for parts in zip(*self.args[q])] for q in live}
        self.layouts = {}
        for q in live:
            layout = _layout(plan, self.context, q, [(1,) + a.shape[1:] for a in args[q]],
                             [a.dtype for a in args[q]])
            if layout is None:
                return False
            self.layouts[q] = layout
        heights = {q: np.zeros(counts[q], np.int64) for q in live}
        for step in reversed(self.steps):
            for qname, first, _, kids in step:
                mine = heights[qname][first:first + len(kids)]
                for site, callee in enumerate(plan.functions[qname].sites):
                    column = kids[:, site]
                    reached = column >= 0
                    if reached.any():
                        mine[reached] = np.maximum(mine[reached],
                                                   heights[callee][column[reached]] + 1)

        groups = []   # (height, function order, variant, qname, ids, first position)
        self.sorted_args, orders = {}, {}
        for q in live:
            width = len(plan.functions[q].keys)
            key = heights[q] * width + variants[q]
            order = np.argsort(key, kind="stable")
            ordered = key[order]
            bounds = np.concatenate([[0], np.flatnonzero(np.diff(ordered)) + 1, [len(order)]])
            for a, b in zip(bounds[:-1], bounds[1:]):
                groups.append((int(ordered[a] // width), plan.order[q], int(ordered[a] % width),
                               q, order[a:b], int(a)))
            self.sorted_args[q] = [a[order] for a in args[q]]
            orders[q] = order
        groups.sort(key=lambda g: g[:3])
        group_of = {q: np.empty(counts[q], np.int64) for q in live}
        row_of = {q: np.empty(counts[q], np.int64) for q in live}
        for g, (_, _, _, q, ids, _) in enumerate(groups):
            group_of[q][ids] = g
            row_of[q][ids] = np.arange(len(ids))

        indices = []
        self.offset = 0
        # Inference: every function's rows live in one table, in run order (a group's rows
        # are one slice of it), so a gather is one take. Under autograd a table written in
        # place cannot be recorded: rows are gathered from the outputs of the source groups.
        self.in_place = not mx.autograd.is_recording()
        if self.in_place:
            position = {}
            for q in live:
                position[q] = np.empty(counts[q], np.int64)
                position[q][orders[q]] = np.arange(counts[q])

        def gather(callee, wanted):
            """Where the rows of invocations ``wanted`` (ids of ``callee``) are: (source
            groups, index slices into each, the permutation slice or None); in place: the
            positions in the callee's table."""
            if self.in_place:
                return None, [self._push(indices, position[callee][wanted])], None
            sources, rows = group_of[callee][wanted], row_of[callee][wanted]
            if (sources == sources[0]).all():
                return [int(sources[0])], [self._push(indices, rows)], None
            order = np.argsort(sources, kind="stable")
            ordered = sources[order]
            bounds = np.concatenate([[0], np.flatnonzero(np.diff(ordered)) + 1, [len(order)]])
            picked = rows[order]
            parts = [self._push(indices, picked[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
            perm = np.empty_like(order)
            perm[order] = np.arange(len(order))
            return [int(ordered[a]) for a in bounds[:-1]], parts, self._push(indices, perm)

        self.groups = []
        for height, _, vid, q, ids, first in groups:
            calls = []
            for callee, sites in plan.functions[q].callees(vid):
                wanted = children[q][ids][:, sites].T.reshape(-1)   # site-major
                calls.append(gather(callee, wanted))
            self.groups.append((q, vid, first, len(ids), calls))
        self.result = gather(plan.entry, np.arange(self.roots))
        self.indices = np.concatenate(indices).astype(np.int32) if indices else None
        return True

    def _push(self, indices, values):
        start = self.offset
        indices.append(values)
        self.offset += len(values)
        return (start, self.offset)

    def run(self, ctx):
        """The values: one CachedOp call per group, then the roots' rows, unpacked."""
        plan, env = self.plan, self.context.env
        index = _upload(self.indices, ctx) if self.indices is not None else None
        uploaded = {q: [_upload(a, ctx) for a in args] for q, args in self.sorted_args.items()}
        outputs = []
        tables = {q: mx.nd.empty((n, self.layouts[q]["width"]), ctx=ctx,
                                 dtype=self.layouts[q]["dtype"])
                  for q, n in self.counts.items() if n} if self.in_place else None
        callees = {}

        def value(role, i, j, q, first, rows, calls):
            if role == "arg":
                return uploaded[q][i][first:first + rows]
            if role == "env":
                return env[i]
            if role == "src":
                return outputs[calls[i][0][j]]
            if role == "table":
                return tables[callees[q][i]]
            a, b = calls[i][2] if role == "perm" else calls[i][1][j]
            return index[a:b]

        for q, vid, first, rows, calls in self.groups:
            if self.in_place:
                callees[q] = [callee for callee, _ in plan.functions[q].callees(vid)]
                sources = None
            else:
                sources = tuple(len(sources) for sources, _, _ in calls)
            graph = _value_graph(plan, self.layouts, q, vid, sources)
            out = graph.op(*[value(*i, q, first, rows, calls) for i in graph.inputs])
            out = out[0] if isinstance(out, (list, tuple)) else out
            if self.in_place:
                out.copyto(tables[q][first:first + rows])   # a view: one copy, no indexing
            else:
                outputs.append(out)
        callees[None] = [plan.entry]
        graph = _result_graph(plan, self.layouts,
                              None if self.in_place else len(self.result[0]))
        out = graph.op(*[value(*i, None, 0, 0, [self.result]) for i in graph.inputs])
        return list(out) if isinstance(out, (list, tuple)) else [out]


def _upload(array, ctx):
    """An NDArray of a fresh numpy array: without a copy on the CPU (the NDArray keeps it)."""
    value = mx.nd.from_numpy(np.ascontiguousarray(array), zero_copy=True)
    return value if value.context == ctx else value.as_in_context(ctx)


# ---------------------------------------------------------------------------------- value graphs

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
        """Rows gathered from ``sources`` earlier outputs (inputs ``src``/``idx``/``perm``), or
        from the callee's table (``sources`` None; inputs ``table``/``idx``)."""
        if sources is None:
            return self.op("take", [self.var("%s_table" % prefix, False),
                                    self.var("%s_idx0" % prefix, True)], axis=0, mode="clip")
        taken = [self.op("take", [self.var("%s_src%d" % (prefix, j), False),
                                  self.var("%s_idx%d" % (prefix, j), True)], axis=0, mode="clip")
                 for j in range(sources)]
        if sources == 1:
            return taken[0]
        joined = self.op("Concat", taken, dim=0, num_args=sources)
        return self.op("take", [joined, self.var("%s_perm" % prefix, True)], axis=0, mode="clip")

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


class _ValueGraph:
    """A CachedOp and what each of its inputs is: ``(role, i, j)`` with role ``arg`` (the
    group's argument i), ``env`` (environment value i), ``src``/``idx`` (callee i's source
    output j and its row indices), ``perm`` (callee i's permutation) or ``table`` (callee i's
    table, with its rows at ``idx`` 0)."""

    def __init__(self, symbol):
        self.op = CachedGraph(symbol)
        self.inputs = []
        for name in symbol.list_inputs():
            if name.startswith("arg") or name.startswith("env"):
                self.inputs.append((name[:3], int(name[3:]), 0))
            else:
                callee, role = name.split("_")
                kind = role.rstrip("0123456789")
                self.inputs.append((kind, int(callee[1:]), int(role[len(kind):] or 0)))


def _value_graph(plan, layouts, qname, vid, sources):
    """The graph of one group: ``qname``'s body for variant ``vid`` with each invoke replaced
    by its rows gathered from ``sources[i]`` earlier outputs of callee i, or from callee i's
    table when ``sources`` is None (cached)."""
    # One CachedOp per thread: MXNet's CachedOp must not be entered by two threads at once.
    key = (qname, vid, sources, threading.get_ident())
    graph = plan.graphs.get(key)
    if graph is not None:
        return graph
    function = plan.functions[qname]
    em = _Emitter()
    inputs = {name: em.var("%s%d" % (kind, k), kind == "arg")
              for name, (kind, k) in function.body.inputs.items()}
    site_outputs = {}
    for i, (callee, sites) in enumerate(function.callees(vid)):
        layout = layouts[callee]
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
        packed.append(head if len(shape) == 1 else em.op("Reshape", [head], shape=(0, -1)))
    out = packed[0] if len(packed) == 1 else em.op("Concat", packed, dim=1,
                                                    num_args=len(packed))
    graph = plan.graphs[key] = _ValueGraph(em.symbol([out]))
    return graph


def _result_graph(plan, layouts, sources):
    """The roots' rows gathered from ``sources`` outputs (None: from the entry's table) and
    unpacked (cached)."""
    key = ("result", sources, threading.get_ident())
    graph = plan.graphs.get(key)
    if graph is None:
        em = _Emitter()
        heads = em.unpack(em.gather("c0", sources), layouts[plan.entry])
        graph = plan.graphs[key] = _ValueGraph(em.symbol(heads))
    return graph


def _inline(body, key, inputs, em, site_outputs, loop_outputs=None):
    """Emit ``body`` with the branches of variant ``key`` in place of its conds; ``inputs``:
    input name -> emitted entry. A ``while_loop`` making recursive calls (export only) is
    ``loop_outputs(loop, its emitted inputs)`` -> its outputs' entries. Returns the emitted
    entries of its outputs."""
    emitted, copied = {}, {}
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
            outs = loop_outputs(body.loops[nid], [get(i) for i in n["inputs"]])
            emitted.update(((nid, k), e) for k, e in enumerate(outs))
        else:
            copied[nid] = em.copy(n, [get(i) for i in n["inputs"]])
    return [get(h) for h in body.heads]

