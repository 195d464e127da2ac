"""The expansion Loop of a lowered recursion node (NOTE [recursion as ONNX loops], 1): a Loop
over call depths whose state per function is the frontier (the arguments of one depth's calls,
one row each) and the flat arguments, variant codes, child positions and level offsets of every
depth so far. Each step runs the functions' skeletons on their whole frontiers, both sides of
every ``cond``, and a ``while_loop`` making calls as an inner Loop over its steps; it stops at
the largest ``max_depth`` or ``MAX_INVOCATIONS`` calls, and a guard fails a run whose loop still
held after ``max_iterations`` steps."""
from typing import Dict, List, Tuple

import numpy as np
from onnx import TensorProto, helper

from gluon_cf.recursion import skeleton, value_graphs

from ..onnx_graph import ValueSpec
from ..onnx_kit import Emitter

from .base import LoweringBase
from .plan import MAX_INVOCATIONS, Entry, _emit_skeleton


class ExpansionLoop(LoweringBase):
    """The body of the expansion Loop and what it is built from."""

    def _expansion_loop(self):
        """The body of the expansion Loop (NOTE [recursion as ONNX loops], 1)."""
        em = Emitter(f"{self.node.name}/expand")
        iteration, cond_in = (f"{em.prefix}/{n}" for n in ("iter", "cond_in"))
        count_in = f"{em.prefix}/count"
        inputs_info = [self._info(iteration, TensorProto.INT64, []),
                       self._info(cond_in, TensorProto.BOOL, [])]
        names = {}
        parts: Dict[str, List[List[str]]] = {q: [] for q in self.order}   # per callee, per site
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
                kids[q] = em.add("Concat", [self._unsqueeze(em, c, 1) for c in children],
                                 axis=1)
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
        preds: Dict[tuple, Entry] = {}
        site_args: Dict[int, List[Entry]] = {}
        loops: Dict[int, Tuple[skeleton._Loop, List[Entry]]] = {}
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
        loop_inputs: Dict[int, List[ValueSpec]] = {}
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
        truth = {path: self._first_of_rows(em, name, rank)
                 for (path, name), rank in zip(pred_names.items(), ranks)}
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
                                rest=self._row_shape(a)) for a in arg_specs] + \
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
        infos_in = self._step_inputs(it, cond_in, state, alive_in)
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
