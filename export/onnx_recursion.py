"""Recursion as standard ONNX: the ``recursion`` node lowered to two ``Loop``s (NOTE below).

NOTE [recursion as ONNX loops]
    ONNX has no calls, so a recursion node becomes loops over the levels of its call trees. It
    reuses the analysis of the ahead-of-time schedules (NOTE [ahead-of-time schedules] in
    gluon_cf/recursion/schedule.py) with two rules relaxed, since an exported model is run by
    ONNX operators and has no gradients: the *skeleton* (what computes every ``cond`` predicate
    and every recursive call's argument) may use any operator, so arguments may carry values
    (the top-down generator's ``h``, ``c``); the function's body must hold only ordinary
    operators, ``cond`` and its own recursive calls, act row by row (checked), and return one
    row per call of one dtype. Then:

    1. **Expansion** (a ``Loop`` over call depths). The frontier holds the arguments of the
       calls at one depth, one row each. The skeleton of the body runs on all of them at once,
       with *both* sides of every ``cond`` (a row's values on a side it does not take are
       computed and dropped: ``take`` clips, and a NaN there reaches nothing): the predicates
       give each row its *variant* (the branches it
       takes), the arguments of the calls its variant makes become the next frontier
       (site-major, rows in order, by ``Compress``), and each call's position in that frontier
       is recorded (``CumSum`` of the mask). Each level's arguments, variants and child
       positions are appended to flat tensors, with the level offsets.
    2. **Values** (a ``Loop`` from the deepest level up). A level's calls read only their
       children, which sit in the level below; so the carried state is that level's values,
       one packed row of width W (all outputs side by side) per call. Per variant, the rows
       taking it are selected (``NonZero``), their children's rows gathered, and the variant's
       body - its branches inlined, each recursive call replaced by the gathered rows, the same
       graph the schedules run in MXNet - computes their packed rows, which ``ScatterND``
       places into the level's values. The last level's rows are the roots' results.

    ONNX cannot raise an error by itself: a call tree deeper than the function's
    ``max_depth`` (or of more than ``MAX_INVOCATIONS`` calls, e.g. a cycle in the tree arrays)
    ends the expansion early, and a ``Gather`` named ``.../max_depth_exceeded`` then indexes
    past its one-element table, which makes every runtime fail the run, naming that node.
    Mutual recursion is the same with one frontier, one set of flat tensors and one level of
    values per function, all advancing together; a call's position is in its callee's next
    frontier, which takes the rows of every (caller, site) calling it in a fixed order. Each
    function keeps its own ``max_depth``.

    A ``while_loop`` around recursive calls (the child-sum TreeLSTM's loop over a node's
    children) needs ``max_iterations``, and its *skeleton variables* (what its ``cond`` and its
    calls' arguments read, and what their updates read) must not depend on what the calls
    return (``skeleton._Loop``). Each call in it takes ``max_iterations`` site columns, one per
    step. The expansion runs the loop's skeleton for all rows as an inner ``Loop`` (its steps
    computed only while some row still loops: a forest without edges has an empty child table),
    whose scan outputs say which rows make which step's call. In the values, the body is split
    around the loop: the part before gives its inputs, an inner ``Loop`` runs the steps while
    any row still loops, each step gathering its calls' rows from the level below (rows that
    stopped read an appended zero row and keep their variables), and the part after reads its
    final variables. Functions outside all this (a loop whose steps depend on what its calls
    return, bodies that mix rows) raise NotImplementedError naming the function and why: export
    them with ``save_artifact``.
"""
import itertools
import json
import types

import mxnet as mx
import numpy as np
from onnx import TensorProto, helper

from gluon_cf import registry
from gluon_cf.graph import decode
from gluon_cf.rowwise import Shaped
from gluon_cf.recursion import schedule, skeleton, value_graphs
from gluon_cf.recursion.table import _FunctionTable

from .onnx_graph import ValueSpec, symbol_to_onnx_graph
from .onnx_kit import ConverterNode, Emitter

MAX_INVOCATIONS = schedule.MAX_INVOCATIONS


def lower_recursion(custom_node):
    """Export rule of the recursion node for standard ONNX (NOTE [recursion as ONNX loops])."""
    node = ConverterNode(custom_node, "recursion")
    return _Lowering(node, custom_node, *_plan(custom_node, node)).emit()


def _refuse(where, why):
    return NotImplementedError(f"export_onnx: {where} cannot be lowered to standard ONNX loops: "
                               f"{why}. Export the model with gluon_cf.export.save_artifact")


def _plan(custom_node, node):
    """``(plan, {qname: argument ValueSpecs}, {qname: output layout})`` of the recursion node:
    the functions reachable from its entry, each one's argument shapes (rows unknown) and
    dtypes - the entry's from the node's inputs, a callee's from what its callers pass - and
    how its outputs pack into one row per call."""
    spec = node.spec
    entry = spec["entry"]
    decoded = decode("recursion", custom_node.attrs["spec"])
    context = types.SimpleNamespace(graphs=decoded.graphs, specs=spec["graphs"],
                                    namespace=spec["namespace"])
    where = f"recursion node {node.name!r} (function {spec['graphs'][entry]['name']!r})"
    try:
        plan = skeleton._Plan(context, entry, export=True)
    except skeleton._NotPlannable as why:
        raise _refuse(where, why) from None
    num_args = spec["num_args"]
    if any(s is None for s in node.in_shapes):
        raise _refuse(where, f"the shapes of its inputs are not known (MXNet inferred "
                             f"{node.in_shapes}); the lowering needs their ranks")
    for k, shape in enumerate(node.in_shapes[:num_args]):
        if not shape or shape[0] != 1:
            raise _refuse(where, f"its argument #{k} has shape {shape}, not one row per call "
                                 f"(the loops stack the calls of a level as rows): give "
                                 f"per-call arguments a leading axis of 1")
        if None in shape:
            raise _refuse(where, f"its argument #{k} has shape {shape}, with dimensions known "
                                 f"only at run time, which the loops' state must declare")
    env_types = [np.dtype(d) for d in custom_node.input_dtypes[num_args:]]
    arg_specs = {entry: [(tuple(s), np.dtype(t)) for s, t in
                         zip(node.in_shapes[:num_args], custom_node.input_dtypes[:num_args])]}
    # A function's output rows must not depend on the sizes of the environment's dynamic
    # dimensions (a forest's node count): everything is inferred with each at two sizes, in
    # tables of our own (the process's tables serve the run-time inference).
    found = []
    for size in (2, 3):
        env_shapes = [tuple(size if d is None else d for d in s)
                      for s in node.in_shapes[num_args:]]
        table = _FunctionTable(decoded)
        table.env_shapes, table.env_types = env_shapes, env_types
        layouts, todo = {}, [entry]
        while todo:
            qname = todo.pop(0)
            if qname in layouts:
                continue
            function = plan.functions[qname]
            name = f"function {function.name!r}"
            shapes = [s for s, _ in arg_specs[qname]]
            dtypes = [t for _, t in arg_specs[qname]]
            # Every level runs the body on all its calls at once: it must act row by row.
            graph = decoded.graphs[qname]
            values = [Shaped((size,) + s[1:]) for s in shapes] + [Shaped(s) for s in env_shapes]
            flags = [True] * len(shapes) + [False] * len(env_shapes)
            rejected = graph.rows_rejected([values[k] for k in graph.slots],
                                           [flags[k] for k in graph.slots])
            if rejected is not None:
                raise _refuse(where, f"{name}: its body does not act row by row (the loops run "
                                     f"each level's calls together): {rejected.describe()}")
            try:
                outs = table.out_shapes(qname, shapes)
            except ValueError:
                outs = None
            types_ = table.out_types(qname, dtypes)
            if not outs or None in outs or any(not o or o[0] != 1 for o in outs) \
                    or not types_ or None in types_ or len({np.dtype(t) for t in types_}) != 1:
                raise _refuse(where, f"{name}: its outputs (shapes {outs}, dtypes {types_}) are "
                                     f"not one row per call of one dtype, which the lowering "
                                     f"packs")
            sizes = [int(np.prod(o[1:], dtype=np.int64)) for o in outs]
            layouts[qname] = {"shapes": [tuple(o[1:]) for o in outs], "sizes": sizes,
                              "width": sum(sizes), "dtype": np.dtype(types_[0])}
            for callee, passed in _call_signatures(function, shapes, dtypes, env_shapes,
                                                   env_types):
                known = arg_specs.setdefault(callee, passed)
                if known != passed:
                    raise _refuse(where, f"{name} calls {plan.functions[callee].name!r} with "
                                         f"arguments {passed}, another call with {known}")
                todo.append(callee)
        found.append(layouts)
    if found[0] != found[1]:
        raise _refuse(where, f"its outputs change with the dynamic dimensions ({found[0]} vs "
                             f"{found[1]})")
    return plan, arg_specs, found[0]


def _call_signatures(function, shapes, dtypes, env_shapes, env_types):
    """``[(callee, [(shape, dtype) per argument])]`` of each call site of ``function``, from
    MXNet's inference on its skeleton (one row per call)."""
    if not function.sites:
        return []
    em = value_graphs._Emitter()
    body = function.body
    inputs = {name: em.var("%s%d" % (kind, k), kind == "arg")
              for name, (kind, k) in body.inputs.items()}
    preds, site_args = {}, {}
    _emit_skeleton(body, inputs, em, preds, site_args, path=())
    heads = [e for site in sorted(site_args) for e in site_args[site]]
    sym = em.symbol(heads)
    known = {"arg%d" % k: s for k, s in enumerate(shapes)}
    known.update({"env%d" % i: s for i, s in enumerate(env_shapes)})
    kinds = {"arg%d" % k: t for k, t in enumerate(dtypes)}
    kinds.update({"env%d" % i: t for i, t in enumerate(env_types)})
    used = sym.list_inputs()
    _, out_shapes, _ = sym.infer_shape(**{n: known[n] for n in used})
    _, out_types, _ = sym.infer_type(**{n: kinds[n] for n in used})
    if out_shapes is None or out_types is None or None in out_types \
            or any(not s for s in out_shapes):
        raise _refuse(f"function {function.name!r}",
                      f"MXNet cannot infer the shapes and dtypes of its calls' arguments (got "
                      f"{out_shapes}, {out_types})")
    calls, k = [], 0
    for site in sorted(site_args):
        n = len(site_args[site])
        calls.append((function.sites[site],
                      [((1,) + tuple(s[1:]), np.dtype(t))
                       for s, t in zip(out_shapes[k:k + n], out_types[k:k + n])]))
        k += n
    return calls


def _variant_keys(body):
    """Every variant of ``body``: per ``cond``, in order, (choice, the taken branch's key) -
    the keys the schedule's host expansion gives (``_Body.evaluate``)."""
    options = [[(choice, sub) for choice in (True, False)
                for sub in _variant_keys(branches[choice][0])]
               for _, _, branches in body.conds]
    return [tuple(combo) for combo in itertools.product(*options)]


class _Lowering:
    """The ONNX nodes of one recursion node: per function of its table (entry first), its
    frontier, flat arguments, variants, children and level offsets in the expansion Loop, and
    its level's values in the values Loop."""

    def __init__(self, node, custom_node, plan, arg_specs, layouts):
        self.node, self.custom = node, custom_node
        self.order = [plan.entry] + sorted(q for q in plan.functions if q != plan.entry)
        self.functions = {q: plan.functions[q] for q in self.order}
        self.layouts = layouts
        num_args = node.spec["num_args"]
        self.entry_inputs = list(custom_node.inputs[:num_args])
        self.args = {q: [ValueSpec(None, (None,) + tuple(shape[1:]), dtype)
                         for shape, dtype in arg_specs[q]] for q in self.order}
        self.env = [ValueSpec(custom_node.inputs[num_args + i], node.in_shapes[num_args + i],
                              np.dtype(custom_node.input_dtypes[num_args + i]))
                    for i in range(len(custom_node.inputs) - num_args)]
        self.keys = {q: _variant_keys(f.body) for q, f in self.functions.items()}
        self.max_depth = max(f.max_depth for f in self.functions.values())

    # ---------------------------------------------------------------------- helpers
    def _info(self, name, spec_or_dtype, shape):
        dtype = spec_or_dtype if isinstance(spec_or_dtype, int) else \
            helper.np_dtype_to_tensor_dtype(np.dtype(spec_or_dtype))
        return helper.make_tensor_value_info(name, dtype, shape)

    def _elem(self, q):
        return helper.np_dtype_to_tensor_dtype(self.layouts[q]["dtype"])

    def _convert(self, em, sym, graph_name, outer):
        """Convert an MXNet symbol whose variables are all read from ``outer`` (variable name
        -> ValueSpec) and emit its nodes into ``em``; returns its output names."""
        used = set(sym.list_inputs())
        converted = symbol_to_onnx_graph(
            sym, None, [], [f"{graph_name}/out{k}" for k in range(len(sym.list_outputs()))],
            graph_name, self.custom.opset, input_names=[],
            outer={name: spec for name, spec in outer.items() if name in used})
        return em.inline(converted)

    def _rows_of(self, em, value, keep_dims=False):
        return em.add("Gather", [em.add("Shape", [value]), em.const([0] if keep_dims else 0)])

    def _filled(self, em, rows, value, elem, rest=()):
        """A tensor of shape ``(rows, *rest)`` (``rows`` a scalar name) holding ``value``."""
        shape = em.add("Reshape", [rows, em.const([1])])
        if rest:
            shape = em.add("Concat", [shape, em.const(list(rest))], axis=0)
        return em.add("ConstantOfShape", [shape],
                      value=helper.make_tensor("value", elem, [1], [value]))

    def _empty(self, em, spec):
        """A tensor of zero rows shaped like ``spec``'s rows."""
        rest = list(spec.shape[1:])
        if any(d is None for d in rest):
            raise NotImplementedError(
                f"export_onnx: recursion node {self.node.name!r}: a callee's argument has "
                f"dimensions known only at run time ({spec.shape}); the lowering needs them")
        return em.add("ConstantOfShape", [em.const([0] + rest)], value=helper.make_tensor(
            "zero", helper.np_dtype_to_tensor_dtype(spec.dtype), [1], [0]))

    # ---------------------------------------------------------------------- emission
    def emit(self):
        node, entry = self.node, self.order[0]
        true = node.const(True, np.bool_)
        # Arguments shared by all root calls (one row, e.g. a constant depth) get one per call.
        roots = node.add("ReduceMax", [node.add("Concat", [
            self._rows_of(node, name, keep_dims=True) for name in self.entry_inputs], axis=0)],
            keepdims=1)
        initial, outs = [], []
        for q in self.order:
            specs = self.args[q]
            if q == entry:
                frontier = [node.add("Expand", [name, node.add("Concat", [roots, node.add(
                    "Slice", [node.add("Shape", [name]), node.const([1]),
                              node.const([np.iinfo(np.int64).max])])], axis=0)])
                            for name in self.entry_inputs]
            else:
                frontier = [self._empty(node, a) for a in specs]
            initial += frontier + [self._empty(node, a) for a in specs] + [
                node.const(np.zeros((0,), np.int64)),
                node.const(np.zeros((0, len(self.functions[q].sites)), np.int64)),
                node.const([0])]
            outs += [node.fresh(f"{q}_{role}") for role in
                     [f"frontier{k}" for k in range(len(specs))] +
                     [f"flat{k}" for k in range(len(specs))] + ["codes", "kids", "offsets"]]
        initial.append(node.const(0))
        outs.append(node.fresh("count"))
        node.add("Loop", [node.const(int(self.max_depth)), true] + initial, outs,
                 body=self._expansion_loop())
        state, k = {}, 0
        for q in self.order:
            n = len(self.args[q])
            state[q] = dict(frontier=outs[k:k + n], flat=outs[k + n:k + 2 * n],
                            codes=outs[k + 2 * n], kids=outs[k + 2 * n + 1],
                            offsets=outs[k + 2 * n + 2])
            k += 2 * n + 3
        # A frontier left over (deeper than the largest max_depth, or too many calls), or
        # calls of a function deeper than its own max_depth: fail the run.
        left = None
        for q in self.order:
            rows = self._rows_of(node, state[q]["frontier"][0])
            offsets = state[q]["offsets"]
            last = node.add("Gather", [offsets, node.const(-1)])
            bound = node.add("Min", [node.const(int(self.functions[q].max_depth)),
                                     node.add("Sub", [node.add("Size", [offsets]),
                                                      node.const(1)])])
            deeper = node.add("Sub", [last, node.add("Gather", [offsets, bound])])
            rows = node.add("Add", [rows, deeper])
            left = rows if left is None else node.add("Add", [left, rows])
        guard = f"{node.name}/max_depth_exceeded"
        node.nodes.append(helper.make_node(
            "Gather", [node.const(np.zeros(1, np.int64)),
                       node.add("Reshape", [left, node.const([1])])], [guard], name=guard))
        for q in self.order:
            state[q]["offsets"] = node.add("Add", [state[q]["offsets"], guard])
        levels = node.add("Sub", [node.add("Size", [state[entry]["offsets"]]), node.const(1)])
        values0 = [node.add("ConstantOfShape", [node.const([0, self.layouts[q]["width"]])],
                            value=helper.make_tensor("zero", self._elem(q), [1], [0]))
                   for q in self.order]
        finals = [node.fresh(f"{q}_values") for q in self.order]
        node.add("Loop", [levels, true] + values0, finals,
                 body=self._values_loop(state, levels))
        return self._unpack_result(finals[0])

    def _expansion_loop(self):
        """The body of the expansion Loop (NOTE [recursion as ONNX loops], 1)."""
        em = Emitter(f"{self.node.name}/expand")
        iteration, cond_in = (f"{em.prefix}/{n}" for n in ("iter", "cond_in"))
        count_in = f"{em.prefix}/count"
        inputs_info = [self._info(iteration, TensorProto.INT64, []),
                       self._info(cond_in, TensorProto.BOOL, [])]
        names, parts = {}, {q: [] for q in self.order}
        for q in self.order:
            specs = self.args[q]
            names[q] = dict(
                frontier=[f"{em.prefix}/{q}/frontier{k}" for k in range(len(specs))],
                flat=[f"{em.prefix}/{q}/flat{k}" for k in range(len(specs))],
                codes=f"{em.prefix}/{q}/codes", kids=f"{em.prefix}/{q}/kids",
                offsets=f"{em.prefix}/{q}/offsets")
            shapes = [None if a.shape is None else [None] + list(a.shape[1:]) for a in specs]
            inputs_info += [self._info(n, a.dtype, sh)
                            for n, a, sh in zip(names[q]["frontier"], specs, shapes)]
            inputs_info += [self._info(n, a.dtype, sh)
                            for n, a, sh in zip(names[q]["flat"], specs, shapes)]
            inputs_info += [self._info(names[q]["codes"], TensorProto.INT64, [None]),
                            self._info(names[q]["kids"], TensorProto.INT64,
                                       [None, len(self.functions[q].sites)]),
                            self._info(names[q]["offsets"], TensorProto.INT64, [None])]
        inputs_info.append(self._info(count_in, TensorProto.INT64, []))

        # Per function: its calls' variants, and per call site the rows calling and their args.
        codes, kids, counts = {}, {}, {}
        offsets = {q: em.const(0) for q in self.order}   # rows of each callee's next frontier
        for q in self.order:
            counts[q] = self._rows_of(em, names[q]["frontier"][0])
            codes[q], site_rows = self._level_calls(em, q, names[q]["frontier"], counts[q])
            children = []
            for site, callee in enumerate(self.functions[q].sites):
                reached, site_args = site_rows[site]
                as_int = em.add("Cast", [reached], to=TensorProto.INT64)
                rank = em.add("Sub", [em.add("CumSum", [as_int, em.const(0)]), em.const(1)])
                position = em.add("Add", [rank, offsets[callee]])
                children.append(em.add("Where", [reached, position, em.const(-1)]))
                offsets[callee] = em.add("Add", [offsets[callee],
                                                 em.add("ReduceSum", [as_int], keepdims=0)])
                parts[callee].append([em.add("Compress", [a, reached], axis=0)
                                      for a in site_args])
            if children:
                kids[q] = em.add("Concat", [em.add("Unsqueeze", [c, em.const([1])])
                                            for c in children], axis=1)
            else:
                kids[q] = self._filled(em, counts[q], 0, TensorProto.INT64, rest=[0])
        count = count_in
        for q in self.order:
            count = em.add("Add", [count, counts[q]])
        outs, next_rows = [], None
        for q in self.order:
            specs = self.args[q]
            if parts[q]:
                frontier = [em.add("Concat", list(column), axis=0) if len(column) > 1
                            else em.add("Identity", [column[0]]) for column in zip(*parts[q])]
            else:
                frontier = [self._empty(em, a) for a in specs]
            rows = self._rows_of(em, frontier[0])
            next_rows = rows if next_rows is None else em.add("Add", [next_rows, rows])
            outs += frontier
            outs += [em.add("Concat", [f, g], axis=0)
                     for f, g in zip(names[q]["flat"], names[q]["frontier"])]
            outs += [em.add("Concat", [names[q]["codes"], codes[q]], axis=0),
                     em.add("Concat", [names[q]["kids"], kids[q]], axis=0),
                     em.add("Concat", [names[q]["offsets"], em.add("Reshape", [
                         em.add("Add", [em.add("Gather", [names[q]["offsets"], em.const(-1)]),
                                        counts[q]]), em.const([1])])], axis=0)]
        outs.append(em.add("Identity", [count]))
        go_on = em.add("And", [
            em.add("Greater", [next_rows, em.const(0)]),
            em.add("LessOrEqual", [em.add("Add", [count, next_rows]),
                                   em.const(MAX_INVOCATIONS)])])
        outputs_info = [self._info(go_on, TensorProto.BOOL, [])] + [
            self._info(o, info.type.tensor_type.elem_type, None)
            for o, info in zip(outs, inputs_info[2:])]
        return helper.make_graph(em.nodes, em.prefix, inputs_info, outputs_info)

    def _level_calls(self, em, q, frontier, rows):
        """Function ``q``'s skeleton on the ``rows`` rows of ``frontier``, both sides of every
        cond: returns each row's variant code and, per call site, (which rows reach it, the
        call's argument names)."""
        function, body = self.functions[q], self.functions[q].body
        alive_at = {}   # loop column -> which rows make that call
        sk = value_graphs._Emitter()
        inputs = {name: sk.var("%s%d" % (kind, k), kind == "arg")
                  for name, (kind, k) in body.inputs.items()}
        preds, site_args, loops = {}, {}, {}
        _emit_skeleton(body, inputs, sk, preds, site_args, path=(), loops=loops)
        reference = next((e for name, e in inputs.items() if body.inputs[name][0] == "arg"))
        heads = []
        loop_heads = [(first, k, entry) for first in sorted(loops)
                      for k, entry in enumerate(loops[first][1])]
        for entry in list(preds.values()) + [e for s in sorted(site_args) for e in site_args[s]]:
            if entry[0] not in sk.rows:     # one value for all rows: one per row
                entry = sk.op("broadcast_like", [entry, reference], lhs_axes=(0,),
                              rhs_axes=(0,))
            heads.append(entry)
        env_of = {inputs[name]: index for name, (kind, index) in body.inputs.items()
                  if kind == "env"}
        for first, k, entry in loop_heads:   # a loop's variables get one row per call too
            if entry in env_of:
                continue                     # read as the environment value itself
            if k < loops[first][0].nv and entry[0] not in sk.rows:
                entry = sk.op("broadcast_like", [entry, reference], lhs_axes=(0,),
                              rhs_axes=(0,))
            heads.append(entry)
        outer = {"arg%d" % k: ValueSpec(frontier[k], a.shape, a.dtype)
                 for k, a in enumerate(self.args[q])}
        outer.update({"env%d" % i: spec for i, spec in enumerate(self.env)})
        out_names = self._convert(em, sk.symbol(heads), f"{em.prefix}/{q}/skeleton", outer) \
            if heads else []
        pred_names = dict(zip(preds, out_names[:len(preds)]))
        arg_names, k = {}, len(preds)
        for site in sorted(site_args):
            arg_names[site] = out_names[k:k + len(site_args[site])]
            k += len(site_args[site])
        loop_specs = iter(self._infer(sk.symbol(heads), q)[k:] if loop_heads else [])
        loop_names = iter(out_names[k:])
        loop_inputs = {}
        for first, _, entry in loop_heads:
            spec = self.env[env_of[entry]] if entry in env_of else \
                ValueSpec(next(loop_names), *next(loop_specs))
            loop_inputs.setdefault(first, []).append(spec)
        for first, (loop, _) in loops.items():
            alive, calls = self._loop_expansion(em, q, loop, loop_inputs[first], rows)
            for j in range(loop.max_iterations):
                for (column, _, _), call_args in zip(loop.calls, calls):
                    arg_names[column + j] = [em.add("Gather", [a, em.const(j)])
                                             for a in call_args]
                    alive_at[column + j] = em.add("Gather", [alive, em.const(j)])
        # A row's predicate is its first element (as MXNet's cond reads it). Sliced, not
        # flattened: a function may have no calls at a level, and Flatten of zero rows is
        # (0, -1), which not every runtime computes.
        ranks = [len(shape) for shape, _ in self._infer(sk.symbol(heads), q)] if heads else []
        truth = {}
        for (path, name), rank in zip(pred_names.items(), ranks):
            first = name
            if rank > 1:
                axes = list(range(1, rank))
                first = em.add("Slice", [name, em.const([0] * len(axes)),
                                         em.const([1] * len(axes)), em.const(axes)])
            first = em.add("Reshape", [first, em.const([-1])])
            truth[path] = em.add("Cast", [first], to=TensorProto.BOOL)
        keys = self.keys[q]
        masks = [self._mask(em, body, key, (), truth, rows) for key in keys]
        code = None
        for vid, mask in enumerate(masks):
            term = em.add("Mul", [em.add("Cast", [mask], to=TensorProto.INT64), em.const(vid)])
            code = term if code is None else em.add("Add", [code, term])
        site_rows = {}
        for site in range(len(function.sites)):
            reached = None
            for vid, key in enumerate(keys):
                if site in body.sites_of(key):
                    reached = masks[vid] if reached is None else \
                        em.add("Or", [reached, masks[vid]])
            if reached is None:   # a site no variant reaches: no row
                reached = self._filled(em, rows, False, TensorProto.BOOL)
            if site in alive_at:   # a call in a loop: made at step j only by rows still looping
                reached = em.add("And", [reached, alive_at[site]])
            site_rows[site] = (reached, arg_names[site])
        return code, site_rows

    def _infer(self, sym, q, extra=()):
        """``(shape, dtype)`` of ``sym``'s outputs (a graph of ``q`` over ``arg<k>``,
        ``env<i>`` and the ValueSpecs of ``extra``, a dict), from MXNet's inference with
        three rows per argument and each unknown dimension at 2; rows are None in the shapes
        of outputs with rows (those not shared by every call)."""
        def fill(shape, rows):
            return tuple(rows if k == 0 and rows else 2 if d is None else d
                         for k, d in enumerate(shape))
        known = {"arg%d" % k: fill(a.shape, 3) for k, a in enumerate(self.args[q])}
        known.update({"env%d" % i: fill(e.shape, 0) for i, e in enumerate(self.env)})
        kinds = {"arg%d" % k: a.dtype for k, a in enumerate(self.args[q])}
        kinds.update({"env%d" % i: e.dtype for i, e in enumerate(self.env)})
        for name, spec in dict(extra).items():
            known[name] = fill(spec.shape, 3 if spec.shape and spec.shape[0] is None else 0)
            kinds[name] = spec.dtype
        used = sym.list_inputs()
        _, shapes, _ = sym.infer_shape(**{n: known[n] for n in used})
        _, types_, _ = sym.infer_type(**{n: kinds[n] for n in used})
        return [((None,) + tuple(s[1:]) if s and s[0] == 3 else tuple(s), np.dtype(t))
                for s, t in zip(shapes, types_)]

    def _loop_graph(self, loop, which, inputs, em, replace=None):
        """Emit ``loop``'s ``cond`` or ``func`` graph into ``em`` (an ONNX Emitter) with its
        slots bound to ``inputs`` (ValueSpecs: the loop variables, then what it captured);
        ``replace``: func's call nid -> ValueSpec of the call's packed rows (the calls are
        then replaced by their rows, unpacked), else only the skeleton variables' new values
        and the calls' arguments are emitted. Returns the output names."""
        graph = loop.cond_graph if which == "cond" else loop.func_graph
        graph_json = loop.cond_json if which == "cond" else loop.func_json
        sk = value_graphs._Emitter()
        outer, emitted = {}, {}
        for name, slot in zip(graph.input_names, graph.slots):
            outer[name] = inputs[slot]
        nodes, heads_json = graph_json["nodes"], graph_json["heads"]
        if which == "cond":
            wanted = [heads_json[0]]
        elif replace is not None:
            wanted = list(heads_json)
        else:
            wanted = [i for _, fnid, _ in loop.calls for i in nodes[fnid]["inputs"]] + \
                [heads_json[k] for k in loop.skeleton_vars]
        # Only what the outputs need: a call's argument (a take from a table that may be empty)
        # is not computed where the call's rows replace the call.
        needed = skeleton._reached(nodes, [skeleton._entry(e) for e in wanted])
        for nid, n in enumerate(nodes):
            if nid not in needed:
                continue
            if n["op"] == "null":
                emitted[(nid, 0)] = sk.var(n["name"], True)
            elif registry.kind_of(n) == "invoke":
                if replace is not None:
                    spec = replace[nid]
                    callee = next(c for _, fnid, c in loop.calls if fnid == nid)
                    name = "call%d" % nid
                    outer[name] = spec
                    for k, e in enumerate(sk.unpack(sk.var(name, True), self.layouts[callee])):
                        emitted[(nid, k)] = e
            elif all(skeleton._entry(i) in emitted for i in n["inputs"]):
                out = sk.copy(n, [emitted[skeleton._entry(i)] for i in n["inputs"]])
                for k in range(8):
                    emitted[(nid, k)] = (out, k)
        heads = [emitted[skeleton._entry(e)] for e in wanted]
        return self._convert(em, sk.symbol(heads), f"{em.prefix}/{which}", outer)

    def _first_of_rows(self, em, value, rank):
        """Bool (rows,): each row's first element is nonzero (how cond reads a predicate)."""
        if rank > 1:
            axes = list(range(1, rank))
            value = em.add("Slice", [value, em.const([0] * len(axes)), em.const([1] * len(axes)),
                                     em.const(axes)])
        return em.add("Cast", [em.add("Reshape", [value, em.const([-1])])], to=TensorProto.BOOL)

    def _loop_step(self, prefix, loop, inputs):
        """The start of an inner Loop's body running ``loop`` on rows: (its emitter, the names
        of its step and condition inputs and of the rows still looping before the step, the
        loop variables' ValueSpecs, what ``cond`` and ``func`` read, the rows looping after
        ``cond``)."""
        body = Emitter(prefix)
        it, cond_in, alive_in = (f"{prefix}/{n}" for n in ("iter", "cond_in", "alive"))
        state = [ValueSpec(f"{prefix}/var{k}", inputs[k].shape, inputs[k].dtype)
                 for k in range(loop.nv)]
        bound = state + list(inputs[loop.nv:])
        (pred,) = self._loop_graph(loop, "cond", bound, body)
        alive = body.add("And", [alive_in, self._first_of_rows(
            body, pred, len(self._cond_shape(loop, bound)))])
        return body, it, cond_in, alive_in, state, bound, alive

    def _loop_expansion(self, em, q, loop, inputs, rows):
        """The skeleton of ``loop`` (a while_loop making calls) for every row, as an inner
        Loop of max_iterations steps: returns (alive (M, rows): which rows still loop at each
        step, [per call: its argument names, each (M, rows, ...)])."""
        nv, prefix = loop.nv, f"{em.prefix}/{q}/loop{loop.calls[0][0]}"
        body, it, cond_in, alive_in, state, bound, alive = self._loop_step(prefix, loop, inputs)
        # The calls' arguments and the skeleton variables' updates, only while some row still
        # loops: a row that does not would read past its children (clipped), and a forest
        # without children has an empty child table, which no gather can read.
        looping = body.add("Greater", [body.add("ReduceSum", [
            body.add("Cast", [alive], to=TensorProto.INT64)], keepdims=0), body.const(0)])
        then = Emitter(f"{prefix}/step")
        produced = self._loop_graph(loop, "func", bound, then)
        idle = Emitter(f"{prefix}/idle")
        arg_specs = [a for _, _, callee in loop.calls for a in self.args[callee]]
        rows_here = self._rows_of(idle, alive)
        skipped = [self._filled(idle, rows_here, 0, helper.np_dtype_to_tensor_dtype(a.dtype),
                                rest=list(a.shape[1:])) for a in arg_specs] + \
            [idle.add("Identity", [state[k].name]) for k in loop.skeleton_vars]
        out_specs = arg_specs + [state[k] for k in loop.skeleton_vars]
        then_out = [then.add("Identity", [p]) for p in produced]
        produced = body.add("If", [looping], [body.fresh("step") for _ in out_specs],
                            then_branch=helper.make_graph(then.nodes, then.prefix, [], [
                                self._info(o, v.dtype, None) for o, v in zip(then_out, out_specs)]),
                            else_branch=helper.make_graph(idle.nodes, idle.prefix, [], [
                                self._info(o, v.dtype, None) for o, v in zip(skipped, out_specs)]))
        produced = produced if isinstance(produced, list) else [produced]
        num_call_args = [len(loop.func_json["nodes"][fnid]["inputs"]) for _, fnid, _ in loop.calls]
        call_args, k = [], 0
        for n in num_call_args:
            call_args.append(produced[k:k + n])
            k += n
        new = dict(zip(loop.skeleton_vars, produced[k:]))
        outs = [body.add("Identity", [new.get(v, state[v].name)]) for v in range(nv)]
        go_on = body.add("Identity", [body.const(True, np.bool_)])
        scans = [body.add("Identity", [alive])] + \
            [body.add("Identity", [a]) for args in call_args for a in args]
        infos_in = [self._info(it, TensorProto.INT64, []),
                    self._info(cond_in, TensorProto.BOOL, [])] + \
            [self._info(v.name, v.dtype, list(v.shape)) for v in state] + \
            [self._info(alive_in, TensorProto.BOOL, [None])]
        arg_dtypes = [a.dtype for _, _, callee in loop.calls for a in self.args[callee]]
        infos_out = [self._info(go_on, TensorProto.BOOL, [])] + \
            [self._info(o, v.dtype, None) for o, v in zip(outs, state)] + \
            [self._info(alive, TensorProto.BOOL, [None]),
             self._info(scans[0], TensorProto.BOOL, [None])] + \
            [self._info(o, dtype, None) for o, dtype in zip(scans[1:], arg_dtypes)]
        graph = helper.make_graph(body.nodes, prefix, infos_in, infos_out)
        all_true = self._filled(em, rows, True, TensorProto.BOOL)
        results = em.add("Loop", [em.const(int(loop.max_iterations)), em.const(True, np.bool_)] +
                         [v.name for v in inputs[:nv]] + [all_true],
                         [em.fresh("loop_out") for _ in range(nv + 1 + len(scans))],
                         body=graph)
        seq = results[nv + 1:]
        alive_seq, args_seq, k = seq[0], [], 1
        alive_seq = em.add("And", [alive_seq, self._bound_guard(em, loop, inputs, results)])
        for n in num_call_args:
            args_seq.append(seq[k:k + n])
            k += n
        return alive_seq, args_seq

    def _bound_guard(self, em, loop, inputs, results):
        """Bool (1,), true; but a row whose ``cond`` still holds after max_iterations steps
        (a node with more children than the child-sum TreeLSTM's ``max_children``) would lose
        the rest of its steps: a ``Gather`` named ``.../max_iterations_exceeded`` then indexes
        past its one-element table, which fails the run, naming that node (as the depth bound,
        ONNX has no error of its own)."""
        nv = loop.nv
        final = [ValueSpec(results[k], inputs[k].shape, inputs[k].dtype) for k in range(nv)]
        bound = final + list(inputs[nv:])
        (pred,) = self._loop_graph(loop, "cond", bound, em)
        still = em.add("And", [results[nv], self._first_of_rows(
            em, pred, len(self._cond_shape(loop, bound)))])
        over = em.add("ReduceSum", [em.add("Cast", [still], to=TensorProto.INT64)], keepdims=1)
        guard = f"{em.prefix}/loop{loop.calls[0][0]}/max_iterations_exceeded"
        em.nodes.append(helper.make_node(
            "Gather", [em.const(np.zeros(1, np.int64)), em.add("Reshape", [over, em.const([1])])],
            [guard], name=guard))
        return em.add("Equal", [guard, em.const(np.zeros(1, np.int64))])

    def _cond_shape(self, loop, bound):
        """The shape of ``loop``'s predicate for these bound inputs (MXNet's inference)."""
        sym = mx.sym.load_json(json.dumps(loop.cond_json))
        shapes = {name: bound[slot].shape for name, slot in
                  zip(loop.cond_graph.input_names, loop.cond_graph.slots)}
        known = {n: tuple(3 if k == 0 and d is None else 2 if d is None else d
                          for k, d in enumerate(shapes[n])) for n in sym.list_inputs()}
        _, outs, _ = sym.infer_shape(**known)
        return outs[0]

    def _mask(self, em, body, key, path, truth, rows):
        """Bool (rows,): which rows take variant ``key`` of ``body`` (at ``path``)."""
        mask = None
        for i, ((nid, _, branches), (choice, sub)) in enumerate(zip(body.conds, key)):
            here = path + (i,)
            term = truth[here] if choice else em.add("Not", [truth[here]])
            inner = self._mask(em, branches[choice][0], sub, here + (choice,), truth, rows)
            if inner is not None:
                term = em.add("And", [term, inner])
            mask = term if mask is None else em.add("And", [mask, term])
        if mask is None and not path:   # no cond at all: every row
            mask = self._filled(em, rows, True, TensorProto.BOOL)
        return mask

    def _values_loop(self, state, levels):
        """The body of the values Loop (NOTE [recursion as ONNX loops], 2)."""
        em = Emitter(f"{self.node.name}/values")
        it, cond_in = (f"{em.prefix}/{n}" for n in ("iter", "cond_in"))
        below = {q: f"{em.prefix}/{q}/below" for q in self.order}
        level = em.add("Sub", [em.add("Sub", [levels, it]), em.const(1)])
        here = em.add("Reshape", [level, em.const([1])])
        next_ = em.add("Add", [here, em.const([1])])
        zero_axis = em.const([0])
        outs = []
        for q in self.order:
            start = em.add("Gather", [state[q]["offsets"], here])
            stop = em.add("Gather", [state[q]["offsets"], next_])
            args = [em.add("Slice", [a, start, stop, zero_axis]) for a in state[q]["flat"]]
            level_codes = em.add("Slice", [state[q]["codes"], start, stop, zero_axis])
            level_kids = em.add("Slice", [state[q]["kids"], start, stop, zero_axis])
            rows = self._rows_of(em, level_codes)
            width, elem = self.layouts[q]["width"], self._elem(q)
            values = self._filled(em, rows, 0, elem, rest=[width])
            for vid, key in enumerate(self.keys[q]):
                taking = em.add("NonZero", [em.add("Equal", [level_codes, em.const(vid)])])
                picked = em.add("Reshape", [taking, em.const([-1])])
                # Only when some row takes the variant (most levels lack some variant, and a
                # body run on zero rows is wasted work some runtimes refuse: Reshape of an
                # empty (0, -1)).
                taken = em.add("Greater", [em.add("Size", [picked]), em.const(0)])
                branch = Emitter(f"{em.prefix}/{q}/v{vid}")
                scattered = self._variant_rows(branch, q, key, picked, args, level_kids, below,
                                               values)
                keep = Emitter(f"{em.prefix}/{q}/v{vid}_none")
                kept = keep.add("Identity", [values])
                values = em.add("If", [taken], then_branch=helper.make_graph(
                    branch.nodes, branch.prefix, [],
                    [self._info(scattered, elem, [None, width])]),
                    else_branch=helper.make_graph(keep.nodes, keep.prefix, [], [
                        self._info(kept, elem, [None, width])]))
            outs.append(em.add("Identity", [values]))
        go_on = em.add("Identity", [cond_in])
        inputs_info = [self._info(it, TensorProto.INT64, []),
                       self._info(cond_in, TensorProto.BOOL, [])] + [
            self._info(below[q], self._elem(q), [None, self.layouts[q]["width"]])
            for q in self.order]
        outputs_info = [self._info(go_on, TensorProto.BOOL, [])] + [
            self._info(o, self._elem(q), [None, self.layouts[q]["width"]])
            for o, q in zip(outs, self.order)]
        return helper.make_graph(em.nodes, em.prefix, inputs_info, outputs_info)

    def _variant_rows(self, em, q, key, picked, args, level_kids, below, values):
        """Emit into ``em`` the rows ``picked`` of the level taking variant ``key`` of ``q``:
        their packed values scattered into ``values``; returns the name of the result.

        A ``while_loop`` making calls splits the body: the part before it gives the loop's
        inputs, an inner Loop runs it (each step reading its calls' rows from the level
        below), the part after reads its final variables."""
        function = self.functions[q]
        outer = {"arg%d" % k: ValueSpec(em.add("Gather", [args[k], picked]), a.shape, a.dtype)
                 for k, a in enumerate(self.args[q])}
        outer.update({"env%d" % i: spec for i, spec in enumerate(self.env)})
        in_loops = {c for loop in _loops_of(function.body) for c in loop.columns()}
        sites = [site for site in function.body.sites_of(key) if site not in in_loops]
        for site in sites:
            callee = function.sites[site]
            column = em.add("Gather", [level_kids, em.const(site)], axis=1)
            child = em.add("Gather", [column, picked])
            outer["site%d" % site] = ValueSpec(
                em.add("Gather", [below[callee], child]), (None, self.layouts[callee]["width"]),
                self.layouts[callee]["dtype"])
        recorded = []

        def before(loop, ins):            # the loop's inputs; its outputs stand for nothing yet
            recorded.append((loop, ins))
            return ins[:loop.nv]
        sym_em, pre_heads = self._variant_heads(q, key, sites, before)
        if recorded:
            kids_picked = em.add("Gather", [level_kids, picked])
            heads = []
            inputs = sym_em.inputs
            env_entries = {inputs[name]: index for name, (kind, index)
                           in function.body.inputs.items() if kind == "env"}
            for loop, ins in recorded:
                for k, entry in enumerate(ins):
                    if entry not in env_entries:
                        if k < loop.nv and entry[0] not in sym_em.rows:
                            entry = sym_em.op("broadcast_like", [entry, sym_em.reference],
                                              lhs_axes=(0,), rhs_axes=(0,))
                        heads.append(entry)
            site_specs = {n: v for n, v in outer.items() if n.startswith("site")}
            pre = sym_em.symbol(heads)
            names = iter(self._convert(em, pre, f"{em.prefix}/before", outer))
            specs = iter(self._infer(pre, q, site_specs))
            for loop, ins in recorded:
                bound = [self.env[env_entries[e]] if e in env_entries else
                         ValueSpec(next(names), *next(specs)) for e in ins]
                finals = self._loop_values(em, q, loop, bound, kids_picked, below)
                first = loop.calls[0][0]
                for k, name in enumerate(finals):
                    outer["loop%d_out%d" % (first, k)] = ValueSpec(name, bound[k].shape,
                                                                   bound[k].dtype)

            def after(loop, ins):
                return [post_em.var("loop%d_out%d" % (loop.calls[0][0], k), True)
                        for k in range(loop.nv)]
            post_em = value_graphs._Emitter()
            post_em, post_heads = self._variant_heads(q, key, sites, after, post_em)
            sym = post_em.symbol([self._packed(post_em, q, post_heads)])
        else:
            sym = sym_em.symbol([self._packed(sym_em, q, pre_heads)])
        packed = self._convert(em, sym, f"{em.prefix}/body", outer)[0]
        return em.add("ScatterND", [values, em.add("Unsqueeze", [picked, em.const([1])]),
                                    packed])

    def _variant_heads(self, q, key, sites, loop_outputs, em=None):
        """Variant ``key`` of ``q`` inlined as an MXNet graph over ``arg<k>``, ``env<i>`` and
        ``site<s>`` (the packed rows of call site s, for ``sites``): (its emitter, the entries
        of the function's outputs). ``loop_outputs`` stands in for while_loops making calls."""
        function = self.functions[q]
        em = em or value_graphs._Emitter()
        em.inputs = {name: em.var("%s%d" % (kind, k), kind == "arg")
                     for name, (kind, k) in function.body.inputs.items()}
        em.reference = next(e for name, e in em.inputs.items()
                            if function.body.inputs[name][0] == "arg")
        site_outputs = {site: em.unpack(em.var("site%d" % site, True),
                                        self.layouts[function.sites[site]])
                        for site in sites}
        heads = value_graphs._inline(function.body, key, em.inputs, em, site_outputs, loop_outputs)
        return em, heads

    def _packed(self, em, q, heads):
        """The function's outputs as one packed row per call."""
        packed = []
        for head, shape in zip(heads, self.layouts[q]["shapes"]):
            if head[0] not in em.rows:
                head = em.op("broadcast_like", [head, em.reference], lhs_axes=(0,),
                             rhs_axes=(0,))
            packed.append(head if len(shape) == 1 else em.op("Reshape", [head], shape=(0, -1)))
        return packed[0] if len(packed) == 1 else em.op("Concat", packed, dim=1,
                                                         num_args=len(packed))

    def _loop_values(self, em, q, loop, inputs, kids, below):
        """``loop`` (a while_loop making calls) on the rows of a variant, as an inner Loop of
        at most max_iterations steps: each step, the rows still looping read their call's rows
        (column first + step of ``kids``) from the level below and update their variables;
        the others keep theirs. Returns the final variables' names."""
        nv, prefix = loop.nv, f"{em.prefix}/loop{loop.calls[0][0]}"
        body, it, cond_in, alive_in, state, bound, alive = self._loop_step(prefix, loop, inputs)
        replace = {}
        for first, fnid, callee in loop.calls:
            width, dtype = self.layouts[callee]["width"], self.layouts[callee]["dtype"]
            # Rows not looping read an appended zero row instead of position -1.
            table = em.add("Concat", [below[callee], em.add("ConstantOfShape", [
                em.const([1, width])], value=helper.make_tensor(
                    "zero", helper.np_dtype_to_tensor_dtype(dtype), [1], [0]))], axis=0)
            pad = self._rows_of(em, below[callee])
            kid = body.add("Gather", [kids, body.add("Add", [it, body.const(first)])], axis=1)
            safe = body.add("Where", [alive, kid, pad])
            replace[fnid] = ValueSpec(body.add("Gather", [table, safe]), (None, width), dtype)
        new = self._loop_graph(loop, "func", bound, body, replace)
        outs = []
        for k, v in enumerate(state):
            mask = body.add("Reshape", [alive, body.const([-1] + [1] * (len(v.shape) - 1))])
            outs.append(body.add("Where", [mask, new[k], v.name]))
        go_on = body.add("Greater", [body.add("ReduceSum", [
            body.add("Cast", [alive], to=TensorProto.INT64)], keepdims=0), body.const(0)])
        infos_in = [self._info(it, TensorProto.INT64, []),
                    self._info(cond_in, TensorProto.BOOL, [])] + \
            [self._info(v.name, v.dtype, list(v.shape)) for v in state] + \
            [self._info(alive_in, TensorProto.BOOL, [None])]
        alive_out = body.add("Identity", [alive])
        infos_out = [self._info(go_on, TensorProto.BOOL, [])] + \
            [self._info(o, v.dtype, None) for o, v in zip(outs, state)] + \
            [self._info(alive_out, TensorProto.BOOL, [None])]
        rows = self._rows_of(em, inputs[0].name)
        all_true = self._filled(em, rows, True, TensorProto.BOOL)
        results = em.add("Loop", [em.const(int(loop.max_iterations)), em.const(True, np.bool_)] +
                         [v.name for v in inputs[:nv]] + [all_true],
                         [em.fresh("loop_var") for _ in range(nv + 1)],
                         body=helper.make_graph(body.nodes, prefix, infos_in, infos_out))
        return results[:nv]

    def _unpack_result(self, final):
        node, layout = self.node, self.layouts[self.order[0]]
        offset = 0
        for out_name, shape, size in zip(self.custom.outputs, layout["shapes"], layout["sizes"]):
            part = node.add("Slice", [final, node.const([offset]), node.const([offset + size]),
                                      node.const([1])])
            offset += size
            node.add("Reshape", [part, node.const([-1] + list(shape))], [out_name])
        return node.nodes, [layout["dtype"]] * len(self.custom.outputs)


def _loops_of(body):
    """The while_loops making calls in ``body`` and its branches."""
    found = list(body.loops.values())
    for _, _, branches in body.conds:
        for choice in (True, False):
            found += _loops_of(branches[choice][0])
    return found


def _emit_skeleton(body, inputs, em, preds, site_args, path, loops=None):
    """Emit ``body``'s skeleton with both sides of every cond: ``preds[path]`` gets each cond's
    predicate (path: cond index, choice, cond index, ...), ``site_args[site]`` each call's
    arguments, ``loops[first column]`` each while_loop making calls and its inputs."""
    emitted, copied = {}, {}
    cond_index = {nid: i for i, (nid, _, _) in enumerate(body.conds)}

    def get(ref):
        ref = skeleton._entry(ref)
        return (copied[ref[0]], ref[1]) if ref[0] in copied else emitted[ref]

    for nid, n in enumerate(body.nodes):
        if n["op"] == "null":
            if n["name"] in inputs:
                emitted[(nid, 0)] = inputs[n["name"]]
        elif nid in body.rules:
            copied[nid] = em.copy(n, [get(i) for i in n["inputs"]])
        elif nid in cond_index:
            i = cond_index[nid]
            _, pred, branches = body.conds[i]
            preds[path + (i,)] = get(pred)
            for choice in (True, False):
                branch = branches[choice][0]
                sub_inputs = {name: get(entry) for name, entry in branches[choice][1]}
                _emit_skeleton(branch, sub_inputs, em, preds, site_args, path + (i, choice),
                               loops)
        elif nid in body.site_of:
            site_args[body.site_of[nid]] = [get(i) for i in n["inputs"]]
        elif nid in body.loops and loops is not None:
            loop = body.loops[nid]
            loops[loop.calls[0][0]] = (loop, [get(i) for i in n["inputs"]])
    return emitted
