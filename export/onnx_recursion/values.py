"""The values Loop of a lowered recursion node (NOTE [recursion as ONNX loops], 2): a Loop from
the deepest level up whose state per function is one level's values, a packed row per call. Per
variant, the rows taking it gather their children's rows from the level below and run the
variant's body (branches inlined, each recursive call replaced by those rows), scattered into
the level's values; a ``while_loop`` making calls splits the body around an inner Loop whose
steps read their calls' rows."""
import numpy as np
from onnx import TensorProto, helper

from gluon_cf.recursion import value_graphs

from ..onnx_graph import ValueSpec
from ..onnx_kit import Emitter

from .base import LoweringBase
from .plan import _loops_of


class ValuesLoop(LoweringBase):
    """The body of the values Loop and what it is built from."""

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
        return em.add("ScatterND", [values, self._unsqueeze(em, picked, 1), packed])

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
        infos_in = self._step_inputs(it, cond_in, state, alive_in)
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
