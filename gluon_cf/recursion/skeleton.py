"""Skeleton analysis: which recursive functions an ahead-of-time schedule can run, and their
control skeletons. A function table becomes a :class:`_Plan` of :class:`_Function` s whose
bodies (:class:`_Body`, with their ``cond`` branches) know their skeleton program (evaluated in
numpy, all rows of a frontier at once, by :meth:`_Body.evaluate`), their invoke sites and their
variants; :func:`analyse` caches the plan or the reason a table is refused, and :func:`report`
says per function why (NOTE [ahead-of-time schedules] in recursion/schedule.py). The ONNX
lowering reuses it with ``export=True`` (``_Loop``: recursive calls inside a ``while_loop``).
"""
from typing import Dict, List, Optional
import json
import threading
import weakref

import numpy as np

from .. import registry
from .._graph_json import reached_ids
from ..operators import DYNAMIC_SHAPE_OPS, INDEX_INPUTS
from .host_rules import HOST_RULES, _NotPlannable


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
            codes = np.empty(rows, np.int64)
            keys: List[tuple] = []   # (branch taken, the branch's own key) per code
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
    return set(reached_ids(nodes, [h[0] for h in heads]))


class _Loop:
    """A ``while_loop`` whose ``func`` makes recursive calls (for the ONNX export only: NOTE
    [recursion as ONNX loops] in export/onnx_recursion.py). Each call site in ``func`` takes
    ``max_iterations`` consecutive site columns of the function, one per iteration. Its
    *skeleton variables* (those its ``cond`` and its calls' arguments read, and those their
    updates read) must not depend on what the calls return: then the expansion can run the
    loop's skeleton for every row before any value is known."""

    def __init__(self, node, ins, sites):
        from ..graph import decode
        spec = self.spec = json.loads(node["attrs"]["spec"])
        decoded = decode("while_loop", node["attrs"]["spec"])
        where = "while_loop (node %r)" % node["name"]
        self.ins, self.nv = self.in_slot_order(ins), spec["num_vars"]
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

    def in_slot_order(self, items):
        """The node's per-input ``items`` in slot order: loop variables first (NOTE
        [while_loop input order] in ops/while_loop.py)."""
        return registry.rule_of("while_loop").slot_order(self.spec, items)

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
        self.sites: List[str] = []   # site -> callee qname
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
        self._site_columns = None
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

    def site_columns(self):
        """``[(callee qname, its site columns, or None when they are all the sites)]``."""
        found = self._site_columns
        if found is None:
            by_callee: Dict[str, List[int]] = {}
            for site, callee in enumerate(self.sites):
                by_callee.setdefault(callee, []).append(site)
            found = self._site_columns = [
                (callee, None if len(columns) == len(self.sites) else columns)
                for callee, columns in by_callee.items()]
        return found

    def callees(self, vid):
        """The calls of variant ``vid``: ``[(callee qname, [site, ...]), ...]`` in order."""
        found = self._callees.get(vid)
        if found is None:
            by_callee: Dict[str, List[int]] = {}
            for site in self.body.sites_of(self.keys[vid]):
                by_callee.setdefault(self.sites[site], []).append(site)
            found = self._callees[vid] = list(by_callee.items())
        return found


# (id of the function graphs, entry qname) -> _Plan or the reason it is refused
_ANALYSES: dict = {}
# id of the function graphs -> their entries' qnames analysed: dropped with the recursion node
# that holds the graphs (NOTE [decoded nodes live as long as their users] in
# graph/decoded.py), before the id may be another node's
_ANALYSED: Dict[int, set] = {}
# (one thread's set replaced by another's left its analyses behind the node, for an id
# reused later; _forget runs in gc, in any thread, and takes no lock: dict.pop is atomic)
_ANALYSED_LOCK = threading.Lock()
_REPORT: dict = {}     # function name -> None (ahead of time) or why not


class _Plan:
    """The functions reachable from one entry, all plannable."""

    def __init__(self, context, entry, export=False):
        """``export``: for the ONNX lowering (export/onnx_recursion.py), whose skeleton runs
        as ONNX operators: any operator may compute it, and arguments may carry values."""
        self.entry = entry
        self.functions: Dict[str, _Function] = {}
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
        self.table_rows = {}  # qname -> its tables' rows (NOTE [sized recorded groups])


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
        with _ANALYSED_LOCK:   # two threads' first analyses of one node: both recorded
            _ANALYSES[key] = plan
            qnames = _ANALYSED.get(key[0])
            if qnames is None:
                qnames = _ANALYSED[key[0]] = set()
                weakref.finalize(context.node, _forget, key[0])
            qnames.add(qname)
    return plan if isinstance(plan, _Plan) else None


def _forget(graphs_id):
    """Drop the analyses of a recursion node's function graphs (the node is being freed)."""
    for qname in _ANALYSED.pop(graphs_id, ()):
        _ANALYSES.pop((graphs_id, qname), None)


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

