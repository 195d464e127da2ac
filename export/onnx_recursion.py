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
    Functions outside this class (loops around recursive calls as in the child-sum TreeLSTM,
    mutual recursion, bodies that mix rows) raise NotImplementedError naming the function and
    why: export them with ``save_artifact``.
"""
import itertools
import types

import numpy as np
from onnx import TensorProto, helper

from gluon_cf.graph import decode
from gluon_cf.rowwise import Shaped
from gluon_cf.recursion import schedule
from gluon_cf.recursion.table import _FunctionTable

from .onnx_graph import ValueSpec, symbol_to_onnx_graph
from .onnx_kit import ConverterNode, Emitter

MAX_INVOCATIONS = schedule.MAX_INVOCATIONS


def lower_recursion(custom_node):
    """Export rule of the recursion node for standard ONNX (NOTE [recursion as ONNX loops])."""
    node = ConverterNode(custom_node, "recursion")
    function, layout = _plan(custom_node, node)
    return _Lowering(node, custom_node, function, layout).emit()


def _plan(custom_node, node):
    spec = node.spec
    entry = spec["entry"]
    decoded = decode("recursion", custom_node.attrs["spec"])
    context = types.SimpleNamespace(graphs=decoded.graphs, specs=spec["graphs"],
                                    namespace=spec["namespace"])
    name = spec["graphs"][entry]["name"]
    where = f"recursion node {node.name!r} (function {name!r})"
    try:
        plan = schedule._Plan(context, entry, export=True)
    except schedule._NotPlannable as why:
        raise NotImplementedError(
            f"export_onnx: {where} cannot be lowered to standard ONNX loops: {why}. Export "
            f"the model with gluon_cf.export.save_artifact") from None
    if len(plan.functions) != 1:
        names = sorted(f.name for f in plan.functions.values())
        raise NotImplementedError(
            f"export_onnx: {where} calls other recursive functions ({names}); standard ONNX "
            f"export lowers one self-recursive function per recursion node so far. Export the "
            f"model with gluon_cf.export.save_artifact")
    function = plan.functions[entry]
    num_args = spec["num_args"]
    if any(s is None for s in node.in_shapes):
        raise NotImplementedError(
            f"export_onnx: {where}: the shapes of its inputs are not known (MXNet inferred "
            f"{node.in_shapes}); the ONNX lowering needs their ranks")
    arg_shapes = [(1,) + tuple(1 if d is None else d for d in s[1:])
                  for s in node.in_shapes[:num_args]]
    arg_types = [np.dtype(d) for d in custom_node.input_dtypes[:num_args]]
    # A function's output rows must not depend on the sizes of the environment's dynamic
    # dimensions (a forest's node count): inferred with each at two sizes, in a table of our
    # own (the process's tables serve the run-time inference).
    found = []
    for size in (2, 3):
        table = _FunctionTable(decoded)
        table.env_shapes = [tuple(size if d is None else d for d in s)
                            for s in node.in_shapes[num_args:]]
        table.env_types = [np.dtype(d) for d in custom_node.input_dtypes[num_args:]]
        try:
            shapes = table.out_shapes(entry, arg_shapes)
        except ValueError:
            shapes = None
        found.append((shapes, table.out_types(entry, arg_types)))
        # Every level runs the body on all its calls at once: it must act row by row.
        graph = decoded.graphs[entry]
        values = [Shaped((size,) + s[1:]) for s in arg_shapes] + \
            [Shaped(s) for s in table.env_shapes]
        flags = [True] * num_args + [False] * len(table.env_shapes)
        rejected = graph.rows_rejected([values[k] for k in graph.slots],
                                       [flags[k] for k in graph.slots])
        if rejected is not None:
            raise NotImplementedError(
                f"export_onnx: {where} cannot be lowered to standard ONNX loops, which run each "
                f"level's calls together: its body does not act row by row: "
                f"{rejected.describe()}. Export the model with gluon_cf.export.save_artifact")
    (shapes, dtypes), other = found
    if other != (shapes, dtypes) or not shapes or None in shapes \
            or any(not s or s[0] != 1 for s in shapes) \
            or not dtypes or None in dtypes or len({np.dtype(d) for d in dtypes}) != 1:
        raise NotImplementedError(
            f"export_onnx: {where}: its outputs (shapes {shapes}, dtypes {dtypes}) are not one "
            f"row per call of one dtype whatever the dynamic dimensions, which the ONNX "
            f"lowering packs. Export the model with gluon_cf.export.save_artifact")
    sizes = [int(np.prod(s[1:], dtype=np.int64)) for s in shapes]
    layout = {"shapes": [tuple(s[1:]) for s in shapes], "sizes": sizes, "width": sum(sizes),
              "dtype": np.dtype(dtypes[0])}
    return function, layout


def _variant_keys(body):
    """Every variant of ``body``: per ``cond``, in order, (choice, the taken branch's key) -
    the keys the schedule's host expansion gives (``_Body.evaluate``)."""
    options = [[(choice, sub) for choice in (True, False)
                for sub in _variant_keys(branches[choice][0])]
               for _, _, branches in body.conds]
    return [tuple(combo) for combo in itertools.product(*options)]


class _Lowering:
    """The ONNX nodes of one recursion node."""

    def __init__(self, node, custom_node, function, layout):
        self.node, self.custom, self.function, self.layout = node, custom_node, function, layout
        spec = node.spec
        self.num_args = spec["num_args"]
        self.args = [ValueSpec(custom_node.inputs[k],
                               None if node.in_shapes[k] is None
                               else (None,) + tuple(node.in_shapes[k][1:]),
                               np.dtype(custom_node.input_dtypes[k]))
                     for k in range(self.num_args)]
        self.env = [ValueSpec(custom_node.inputs[self.num_args + i],
                              node.in_shapes[self.num_args + i],
                              np.dtype(custom_node.input_dtypes[self.num_args + i]))
                    for i in range(len(custom_node.inputs) - self.num_args)]
        self.keys = _variant_keys(function.body)
        self.sites = len(function.sites)
        self.width = layout["width"]
        self.elem = helper.np_dtype_to_tensor_dtype(layout["dtype"])

    # ---------------------------------------------------------------------- helpers
    def _info(self, name, spec_or_dtype, shape):
        dtype = spec_or_dtype if isinstance(spec_or_dtype, int) else \
            helper.np_dtype_to_tensor_dtype(np.dtype(spec_or_dtype))
        return helper.make_tensor_value_info(name, dtype, shape)

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

    # ---------------------------------------------------------------------- emission
    def emit(self):
        node = self.node
        expansion = self._expansion_loop()
        empty_args = [node.add("Slice", [a.name, node.const([0]), node.const([0]),
                                         node.const([0])]) for a in self.args]
        flat_codes0 = node.const(np.zeros((0,), np.int64))
        kids0 = node.const(np.zeros((0, self.sites), np.int64))
        offsets0 = node.const([0])
        count0 = node.const(0)
        trips = node.const(int(self.function.max_depth))
        true = node.const(True, np.bool_)
        outs = [node.fresh("frontier%d" % k) for k in range(self.num_args)] + \
            [node.fresh("flat_arg%d" % k) for k in range(self.num_args)] + \
            [node.fresh("codes"), node.fresh("kids"), node.fresh("offsets"), node.fresh("count")]
        # Arguments shared by all root calls (one row, e.g. a constant depth) get one per call.
        roots = node.add("ReduceMax", [node.add("Concat", [
            self._rows_of(node, a.name, keep_dims=True) for a in self.args], axis=0)],
            keepdims=1)
        starts = [node.add("Expand", [a.name, node.add("Concat", [roots, node.add("Slice", [
            node.add("Shape", [a.name]), node.const([1]), node.const([np.iinfo(np.int64).max])])],
            axis=0)]) for a in self.args]
        node.add("Loop", [trips, true] + starts + empty_args +
                 [flat_codes0, kids0, offsets0, count0], outs, body=expansion)
        frontier = outs[0]
        flat_args = outs[self.num_args:2 * self.num_args]
        codes, kids, offsets = outs[2 * self.num_args:2 * self.num_args + 3]
        # A frontier left over: deeper than max_depth or too many calls. Fail the run.
        left = self._rows_of(node, frontier)
        guard = f"{node.name}/max_depth_exceeded"
        node.nodes.append(helper.make_node(
            "Gather", [node.const(np.zeros(1, np.int64)),
                       node.add("Reshape", [left, node.const([1])])], [guard], name=guard))
        offsets = node.add("Add", [offsets, guard])
        levels = node.add("Sub", [node.add("Size", [offsets]), node.const(1)])
        values0 = node.add("ConstantOfShape", [node.const([0, self.width])],
                           value=helper.make_tensor("zero", self.elem, [1], [0]))
        final = node.fresh("values")
        node.add("Loop", [levels, true, values0], [final],
                 body=self._values_loop(flat_args, codes, kids, offsets, levels))
        return self._unpack_result(final)

    def _expansion_loop(self):
        """The body of the expansion Loop (NOTE [recursion as ONNX loops], 1)."""
        body = self.function.body
        em = Emitter(f"{self.node.name}/expand")
        names = [f"{em.prefix}/{n}" for n in ("iter", "cond_in")]
        frontier = [f"{em.prefix}/frontier{k}" for k in range(self.num_args)]
        flat = [f"{em.prefix}/flat{k}" for k in range(self.num_args)]
        codes_in, kids_in, offsets_in, count_in = (f"{em.prefix}/{n}" for n in
                                                   ("codes", "kids", "offsets", "count"))
        rows = self._rows_of(em, frontier[0])

        # The skeleton, both sides of every cond, on all rows.
        sk = schedule._Emitter()
        inputs = {name: sk.var("%s%d" % (kind, k), kind == "arg")
                  for name, (kind, k) in body.inputs.items()}
        preds, site_args = {}, {}
        _emit_skeleton(body, inputs, sk, preds, site_args, path=())
        reference = next((e for name, e in inputs.items() if body.inputs[name][0] == "arg"))
        heads = []
        for entry in list(preds.values()) + [e for s in sorted(site_args) for e in site_args[s]]:
            if entry[0] not in sk.rows:     # one value for all rows: one per row
                entry = sk.op("broadcast_like", [entry, reference], lhs_axes=(0,),
                              rhs_axes=(0,))
            heads.append(entry)
        outer = {"arg%d" % k: ValueSpec(frontier[k], self.args[k].shape, self.args[k].dtype)
                 for k in range(self.num_args)}
        outer.update({"env%d" % i: spec for i, spec in enumerate(self.env)})
        out_names = self._convert(em, sk.symbol(heads), f"{em.prefix}/skeleton", outer) \
            if heads else []
        pred_names = dict(zip(preds, out_names[:len(preds)]))
        arg_names, k = {}, len(preds)
        for site in sorted(site_args):
            arg_names[site] = out_names[k:k + len(site_args[site])]
            k += len(site_args[site])

        truth = {}
        for path, name in pred_names.items():
            flat_pred = em.add("Flatten", [name], axis=1)
            first = em.add("Gather", [flat_pred, em.const(0)], axis=1)
            truth[path] = em.add("Cast", [first], to=TensorProto.BOOL)

        # Each row's variant, and which call sites each variant reaches.
        masks = [self._mask(em, body, key, (), truth, rows) for key in self.keys]
        code = None
        for vid, mask in enumerate(masks):
            term = em.add("Mul", [em.add("Cast", [mask], to=TensorProto.INT64), em.const(vid)])
            code = term if code is None else em.add("Add", [code, term])
        if code is None:
            code = em.add("ConstantOfShape", [em.add("Reshape", [rows, em.const([1])])],
                          value=helper.make_tensor("z", TensorProto.INT64, [1], [0]))
        reached_by = {site: [vid for vid, key in enumerate(self.keys)
                             if site in body.sites_of(key)] for site in range(self.sites)}
        parts = [[] for _ in range(self.num_args)]
        children, offset = [], em.const(0)
        for site in range(self.sites):
            reached = None
            for vid in reached_by[site]:
                reached = masks[vid] if reached is None else em.add("Or", [reached, masks[vid]])
            if reached is None:   # a site no variant reaches
                children.append(em.add("Sub", [em.add("Mul", [code, em.const(0)]),
                                               em.const(1)]))
                continue
            as_int = em.add("Cast", [reached], to=TensorProto.INT64)
            rank = em.add("Sub", [em.add("CumSum", [as_int, em.const(0)]), em.const(1)])
            position = em.add("Add", [rank, offset])
            children.append(em.add("Where", [reached, position, em.const(-1)]))
            offset = em.add("Add", [offset, em.add("ReduceSum", [as_int], keepdims=0)])
            for a in range(self.num_args):
                parts[a].append(em.add("Compress", [arg_names[site][a], reached], axis=0))
        if children:
            kids = em.add("Concat", [em.add("Unsqueeze", [c, em.const([1])])
                                     for c in children], axis=1)
        else:
            kids = em.add("ConstantOfShape", [em.add("Concat", [
                em.add("Reshape", [rows, em.const([1])]), em.const([0])], axis=0)],
                value=helper.make_tensor("z", TensorProto.INT64, [1], [0]))
        next_frontier = []
        for a in range(self.num_args):
            if parts[a]:
                next_frontier.append(parts[a][0] if len(parts[a]) == 1 else
                                     em.add("Concat", parts[a], axis=0))
            else:
                next_frontier.append(em.add("Slice", [frontier[a], em.const([0]),
                                                      em.const([0]), em.const([0])]))
        count = em.add("Add", [count_in, rows])
        outs = [em.add("Identity", [f]) for f in next_frontier]
        outs += [em.add("Concat", [flat[a], frontier[a]], axis=0) for a in range(self.num_args)]
        outs += [em.add("Concat", [codes_in, code], axis=0),
                 em.add("Concat", [kids_in, kids], axis=0),
                 em.add("Concat", [offsets_in, em.add("Reshape", [count, em.const([1])])],
                        axis=0),
                 count]
        next_rows = self._rows_of(em, next_frontier[0])
        go_on = em.add("And", [
            em.add("Greater", [next_rows, em.const(0)]),
            em.add("LessOrEqual", [em.add("Add", [count, next_rows]),
                                   em.const(MAX_INVOCATIONS)])])

        arg_infos = [self._info(n, a.dtype, a.shape and [None] + list(a.shape[1:]))
                     for n, a in zip(frontier, self.args)]
        flat_infos = [self._info(n, a.dtype, a.shape and [None] + list(a.shape[1:]))
                      for n, a in zip(flat, self.args)]
        inputs_info = [self._info(names[0], TensorProto.INT64, []),
                       self._info(names[1], TensorProto.BOOL, [])] + arg_infos + flat_infos + [
            self._info(codes_in, TensorProto.INT64, [None]),
            self._info(kids_in, TensorProto.INT64, [None, self.sites]),
            self._info(offsets_in, TensorProto.INT64, [None]),
            self._info(count_in, TensorProto.INT64, [])]
        outputs_info = [self._info(go_on, TensorProto.BOOL, [])] + [
            self._info(o, info.type.tensor_type.elem_type, None)
            for o, info in zip(outs, inputs_info[2:])]
        return helper.make_graph(em.nodes, f"{em.prefix}", inputs_info, outputs_info)

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
            mask = em.add("Cast", [em.add("ConstantOfShape", [
                em.add("Reshape", [rows, em.const([1])])],
                value=helper.make_tensor("one", TensorProto.INT64, [1], [1]))],
                to=TensorProto.BOOL)
        return mask

    def _values_loop(self, flat_args, codes, kids, offsets, levels):
        """The body of the values Loop (NOTE [recursion as ONNX loops], 2)."""
        em = Emitter(f"{self.node.name}/values")
        it, cond_in, below = (f"{em.prefix}/{n}" for n in ("iter", "cond_in", "below"))
        level = em.add("Sub", [em.add("Sub", [levels, it]), em.const(1)])
        start = em.add("Gather", [offsets, em.add("Reshape", [level, em.const([1])])])
        stop = em.add("Gather", [offsets, em.add("Reshape", [em.add("Add", [level,
                                                                            em.const(1)]),
                                                             em.const([1])])])
        zero_axis = em.const([0])
        args = [em.add("Slice", [a, start, stop, zero_axis]) for a in flat_args]
        level_codes = em.add("Slice", [codes, start, stop, zero_axis])
        level_kids = em.add("Slice", [kids, start, stop, zero_axis])
        rows = self._rows_of(em, level_codes)
        values = em.add("ConstantOfShape", [em.add("Concat", [
            em.add("Reshape", [rows, em.const([1])]), em.const([self.width])], axis=0)],
            value=helper.make_tensor("zero", self.elem, [1], [0]))
        for vid, key in enumerate(self.keys):
            taking = em.add("NonZero", [em.add("Equal", [level_codes, em.const(vid)])])
            picked = em.add("Reshape", [taking, em.const([-1])])
            # Only when some row takes the variant (most levels lack some variant, and a body
            # run on zero rows is wasted work some runtimes refuse: Reshape of an empty (0, -1)).
            taken = em.add("Greater", [em.add("Size", [picked]), em.const(0)])
            branch = Emitter(f"{em.prefix}/v{vid}")
            scattered = self._variant_rows(branch, key, picked, args, level_kids, below,
                                           values)
            keep = Emitter(f"{em.prefix}/v{vid}_none")
            kept = keep.add("Identity", [values])
            out_info = [self._info(scattered, self.elem, [None, self.width])]
            values = em.add("If", [taken], then_branch=helper.make_graph(
                branch.nodes, branch.prefix, [], out_info),
                else_branch=helper.make_graph(keep.nodes, keep.prefix, [], [
                    self._info(kept, self.elem, [None, self.width])]))
        out = em.add("Identity", [values])
        go_on = em.add("Identity", [cond_in])
        inputs_info = [self._info(it, TensorProto.INT64, []),
                       self._info(cond_in, TensorProto.BOOL, []),
                       self._info(below, self.elem, [None, self.width])]
        outputs_info = [self._info(go_on, TensorProto.BOOL, []),
                        self._info(out, self.elem, [None, self.width])]
        return helper.make_graph(em.nodes, em.prefix, inputs_info, outputs_info)

    def _variant_rows(self, em, key, picked, args, level_kids, below, values):
        """Emit into ``em`` the rows ``picked`` of the level taking variant ``key``: their
        packed values scattered into ``values``; returns the name of the result."""
        sym, site_order = self._variant_symbol(key)
        outer = {"arg%d" % k: ValueSpec(em.add("Gather", [args[k], picked]),
                                        self.args[k].shape, self.args[k].dtype)
                 for k in range(self.num_args)}
        outer.update({"env%d" % i: spec for i, spec in enumerate(self.env)})
        for site in site_order:
            column = em.add("Gather", [level_kids, em.const(site)], axis=1)
            child = em.add("Gather", [column, picked])
            outer["site%d" % site] = ValueSpec(em.add("Gather", [below, child]),
                                               (None, self.width), self.layout["dtype"])
        packed = self._convert(em, sym, f"{em.prefix}/body", outer)[0]
        return em.add("ScatterND", [values, em.add("Unsqueeze", [picked, em.const([1])]),
                                    packed])

    def _variant_symbol(self, key):
        """The body of variant ``key`` as an MXNet symbol: inputs ``arg<k>``, ``env<i>``
        (one row per call, or shared) and ``site<s>`` (the packed rows of call site s);
        output the packed rows. Returns it and the sites it reads."""
        function, layout = self.function, self.layout
        em = schedule._Emitter()
        inputs = {name: em.var("%s%d" % (kind, k), kind == "arg")
                  for name, (kind, k) in function.body.inputs.items()}
        sites = function.body.sites_of(key)
        site_outputs = {site: em.unpack(em.var("site%d" % site, True), layout)
                        for site in sites}
        heads = schedule._inline(function.body, key, inputs, em, site_outputs)
        reference = next(e for name, e in inputs.items()
                         if function.body.inputs[name][0] == "arg")
        packed = []
        for head, shape in zip(heads, layout["shapes"]):
            if head[0] not in em.rows:
                head = em.op("broadcast_like", [head, reference], lhs_axes=(0,), rhs_axes=(0,))
            packed.append(head if len(shape) == 1 else em.op("Reshape", [head], shape=(0, -1)))
        out = packed[0] if len(packed) == 1 else em.op("Concat", packed, dim=1,
                                                        num_args=len(packed))
        return em.symbol([out]), sites

    def _unpack_result(self, final):
        node, layout = self.node, self.layout
        offset = 0
        for out_name, shape, size in zip(self.custom.outputs, layout["shapes"], layout["sizes"]):
            part = node.add("Slice", [final, node.const([offset]), node.const([offset + size]),
                                      node.const([1])])
            offset += size
            node.add("Reshape", [part, node.const([-1] + list(shape))], [out_name])
        return node.nodes, [layout["dtype"]] * len(self.custom.outputs)


def _emit_skeleton(body, inputs, em, preds, site_args, path):
    """Emit ``body``'s skeleton with both sides of every cond: ``preds[path]`` gets each cond's
    predicate (path: cond index, choice, cond index, ...), ``site_args[site]`` each call's
    arguments."""
    emitted, copied = {}, {}
    cond_index = {nid: i for i, (nid, _, _) in enumerate(body.conds)}

    def get(ref):
        ref = schedule._entry(ref)
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
                _emit_skeleton(branch, sub_inputs, em, preds, site_args, path + (i, choice))
        elif nid in body.site_of:
            site_args[body.site_of[nid]] = [get(i) for i in n["inputs"]]
    return emitted
