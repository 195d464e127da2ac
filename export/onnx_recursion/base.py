"""What the two Loops of a lowered recursion node share: the node's functions in a fixed order
(entry first), their argument and environment specs, packed output layouts and variants; small
ONNX builders (value infos, filled and empty tensors, row counts); converting an MXNet graph of
a function into ONNX nodes, with MXNet's inference of its shapes; and a ``while_loop`` making
calls run on rows: its ``cond`` or ``func`` graph, the start of an inner Loop's step, and how
its predicate is read (NOTE [recursion as ONNX loops])."""
import json

import mxnet as mx
import numpy as np
from onnx import TensorProto, helper

from gluon_cf import registry
from gluon_cf.recursion import skeleton, value_graphs

from ..onnx_graph import ValueSpec, symbol_to_onnx_graph
from ..onnx_kit import Emitter

from .plan import _variant_keys


class LoweringBase:
    """What the Loops of one recursion node share: per function of its table (entry first),
    its argument specs, packed output layout and variants, and the node's environment."""

    def __init__(self, node, custom_node, plan, arg_specs, layouts):
        self.node, self.custom = node, custom_node
        self.order = [plan.entry] + sorted(q for q in plan.functions if q != plan.entry)
        self.functions = {q: plan.functions[q] for q in self.order}
        self.layouts = layouts
        num_args = node.spec["num_args"]
        self.entry_inputs = list(custom_node.inputs[:num_args])
        # Per function, its arguments by shape (rows unknown) and dtype: no ONNX value yet.
        self.args = {q: [ValueSpec("", (None,) + tuple(shape[1:]), dtype)
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

    def _unsqueeze(self, em, value, axis):
        """``value`` with a new axis ``axis``: Unsqueeze takes its axes as an input from
        opset 13, as an attribute before (an input at opset 12 failed ONNX's checker)."""
        if self.custom.opset >= 13:
            return em.add("Unsqueeze", [value, em.const([axis])])
        return em.add("Unsqueeze", [value], axes=[axis])

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

    def _row_shape(self, spec):
        """The dimensions of one row of ``spec`` (an argument), which the loops' state must
        declare."""
        rest = None if spec.shape is None else list(spec.shape[1:])
        if rest is None or any(d is None for d in rest):
            raise NotImplementedError(
                f"export_onnx: recursion node {self.node.name!r}: a callee's argument has "
                f"dimensions known only at run time ({spec.shape}); the lowering needs them")
        return rest

    def _empty(self, em, spec):
        """A tensor of zero rows shaped like ``spec``'s rows."""
        rest = self._row_shape(spec)
        return em.add("ConstantOfShape", [em.const([0] + rest)], value=helper.make_tensor(
            "zero", helper.np_dtype_to_tensor_dtype(spec.dtype), [1], [0]))


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

    # ---------------------------------------------------------------------- a while_loop on rows
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


    def _step_inputs(self, it, cond_in, state, alive_in):
        """The value infos of an inner Loop's body inputs (``_loop_step``'s names): the step,
        the condition, the loop variables, the rows still looping."""
        return [self._info(it, TensorProto.INT64, []),
                self._info(cond_in, TensorProto.BOOL, [])] + \
            [self._info(v.name, v.dtype, list(v.shape)) for v in state] + \
            [self._info(alive_in, TensorProto.BOOL, [None])]

    def _cond_shape(self, loop, bound):
        """The shape of ``loop``'s predicate for these bound inputs (MXNet's inference)."""
        sym = mx.sym.load_json(json.dumps(loop.cond_json))
        shapes = {name: bound[slot].shape for name, slot in
                  zip(loop.cond_graph.input_names, loop.cond_graph.slots)}
        known = {n: tuple(3 if k == 0 and d is None else 2 if d is None else d
                          for k, d in enumerate(shapes[n])) for n in sym.list_inputs()}
        _, outs, _ = sym.infer_shape(**known)
        return outs[0]
