"""The kit export rules use to turn one gluon_cf node into ONNX nodes (NOTE below).

Each op's export rule (``to_onnx`` in its op file, ``to_artifact`` for the recursion ops) gets
the MXNet node being converted and returns ONNX nodes and output dtypes; a
:class:`ConverterNode` gives it the node's decoded spec, its planned shapes (NOTE [shape plan]
in ``onnx_shapes.py``), its slots, and the conversion of its subgraphs.

NOTE [gluon_cf ops as ONNX control flow]
    Node inputs are *slots* (NOTE [slots] in gluon_cf/tracing.py).  In ONNX, a slot that changes
    from step to step (a loop variable, a state, a data slice) is a formal input of the body;
    every other slot (captured values: parameters, outer symbols) is read from the enclosing
    scope under the node input's ONNX name -- ONNX subgraphs may refer to any outer value.
    * cond -> If.  pred is Cast to bool (true iff nonzero) and reshaped to a scalar; both
      branches have no formal inputs.
    * foreach -> Scan (not Loop): Scan *is* foreach -- states in, data sliced along axis 0,
      step outputs stacked -- and captured values are outer-scope reads in both.  Only the
      orders differ (Scan: states before data, new states before step outputs), which we fix
      by ordering the body's inputs and outputs.  1-D data is reshaped to (T, 1) first, since
      gluon_cf's steps see shape (1,) slices where Scan would give scalars.
    * while_loop -> Loop with trip count max_iterations.  gluon_cf checks cond *before* each
      step, ONNX Loop reads its condition input before the first iteration and the body's cond
      output after each: so cond(loop_vars) is computed once outside (inlined into the
      enclosing graph) and once at the end of the body on the new loop vars.  Loop stacks one
      row per step taken; gluon_cf pads to max_iterations rows with zeros: we Pad after the
      Loop.  When no step ran, the stacked outputs' row shape is unknown to the runtime
      (onnxruntime makes unknown dims 0), so an If then builds the zeros from the shapes of one
      probe call of func on the initial loop vars -- what gluon_cf's eager mode does too.
    * recursion -> two Loops over the levels of its call trees, when its structure comes from
      its index arguments alone (NOTE [recursion as ONNX loops] in onnx_recursion/lowering.py); a
      stateless foreach around it whose body acts row by row runs its steps as rows (no
      Scan), so the levels batch across its steps.  Other recursion: NotImplementedError.
    Limits: opsets 12 and 13 only, and mx2onnx's op coverage (e.g. no `sign`, `_mod_scalar`,
    BatchNorm on axis != 1); what it cannot convert fails with NotImplementedError naming the
    MXNet node and op, before conversion where we can tell.  Inference only: no gradients.
"""
import json

import mxnet as mx
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from gluon_cf import registry
from gluon_cf.operators import SOURCE_ATTR

from .onnx_graph import ValueSpec, symbol_to_onnx_graph
from .onnx_shapes import PLAN


class Emitter:
    """ONNX nodes under construction, with fresh names under one prefix."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.nodes = []
        self._count = 0

    def fresh(self, hint):
        self._count += 1
        return f"{self.prefix}/{hint}{self._count}"

    def add(self, op_type, inputs, outputs=None, **attrs):
        """Append an ONNX node; returns its output name (or list of names)."""
        outputs = list(outputs) if outputs is not None else [self.fresh(op_type.lower())]
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs,
                                           name=self.fresh(op_type), **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def const(self, value, dtype=np.int64):
        name = self.fresh("const")
        array = np.asarray(value, dtype=dtype)
        self.add("Constant", [], [name], value=numpy_helper.from_array(array, name))
        return name

    def truth(self, value, into=None):
        """``value`` (one element, any dtype) as an ONNX bool scalar: true iff nonzero."""
        as_bool = self.add("Cast", [value], to=TensorProto.BOOL)
        return self.add("Reshape", [as_bool, self.const(np.zeros((0,), np.int64))],
                        [into] if into else None)

    def inline(self, converted):
        """Emit the nodes of a converted graph that has no formal inputs (its names are
        unique already: prefixed with its graph name); returns its output names."""
        for init in converted.graph.initializer:
            self.add("Constant", [], [init.name], value=init)
        self.nodes.extend(converted.graph.node)
        return converted.output_names


class ConverterNode(Emitter):
    """One gluon_cf node being converted: its decoded spec, its slots, its subgraphs."""

    def __init__(self, node, kind):
        super().__init__(node.name)
        self.node, self.kind, self.name = node, kind, node.name
        self.spec = json.loads(node.attrs["spec"])
        planned = (PLAN.get() or {}).get(node.attrs["spec"])
        if planned is not None:
            self.in_shapes, self.out_shapes = planned
        else:  # called outside export_onnx: MXNet's partial shapes
            self.in_shapes = node.input_shapes or [None] * len(node.inputs)
            self.out_shapes = node.output_shapes or [None] * len(node.outputs)
        # each run of the shape plan: (input shapes, output shapes), concrete where the
        # inputs' are (NOTE [dims a loop's rows follow] in ops/while_loop.py)
        self.runs = (PLAN.get() or {}).get(("runs", node.attrs["spec"]), ())
        rule = registry.rule_of(kind)
        self.slot_shapes = rule.slot_shapes(self.spec, self.in_shapes)
        # node inputs in slot order (NOTE [while_loop input order] in ops/while_loop.py)
        self.slot_names = rule.slot_order(self.spec, node.inputs)
        self.slot_dtypes = rule.slot_order(self.spec, node.input_dtypes)

    def where(self):
        """``"file:line: "`` of the user's code in the node's subgraphs (the node itself
        carries one only when traced inside another), or ``""``."""
        stack = [self.node.attrs]
        while stack:
            attrs = stack.pop(0)
            if attrs.get(SOURCE_ATTR):
                return f"{attrs[SOURCE_ATTR]}: "
            if "spec" in attrs:
                for graph in json.loads(attrs["spec"]).get("graphs", {}).values():
                    stack += [n.get("attrs", {}) for n in json.loads(graph["json"])["nodes"]]
        return ""

    def slot(self, k, onnx_name=None):
        """ValueSpec of slot ``k``, named as the node input or ``onnx_name``."""
        return ValueSpec(onnx_name or self.slot_names[k], self.slot_shapes[k],
                         self.slot_dtypes[k])

    def convert(self, key, graph_name, formal=(), outer_slots=(), outer_values=None,
                output_order=None):
        """Convert subgraph ``key`` of the node with ``symbol_to_onnx_graph``.

        ``formal``: the ONNX graph's inputs, in order: a slot index, or a ValueSpec for an
        input that is no slot (Loop's iteration counter and condition).  Slots in
        ``outer_slots`` are read from the enclosing scope under the node input's name,
        ``outer_values[slot]`` (a ValueSpec) overrides that name.  ``output_order`` reorders
        the subgraph's outputs.  Returns the ``OnnxGraph``.
        """
        graph = self.spec["graphs"][key]
        sym = mx.sym.load_json(graph["json"])
        slot_of_var = list(zip(sym.list_inputs(), graph["inputs"]))  # before regrouping
        if output_order is not None:
            sym = mx.sym.Group([sym[k] for k in output_order])
            used = set(sym.list_inputs())
            slot_of_var = [(var, slot) for var, slot in slot_of_var if var in used]
        formal_slots = [item for item in formal if isinstance(item, int)]
        input_of_slot = {slot: f"{graph_name}/slot{slot}" for slot in formal_slots}
        outer_of_slot = {slot: self.slot(slot) for slot in outer_slots}
        outer_of_slot.update(outer_values or {})

        var_of_slot, outer = {}, {}
        for var, slot in slot_of_var:
            if slot in input_of_slot and slot not in var_of_slot:
                var_of_slot[slot] = var
            elif slot in input_of_slot:  # a second variable fed by the same formal input
                outer[var] = self.slot(slot, input_of_slot[slot])
            elif slot in outer_of_slot:
                outer[var] = outer_of_slot[slot]
            else:
                raise AssertionError(f"slot {slot} of {key!r} is neither formal nor outer")
        specs, names = [], []
        for item in formal:
            if isinstance(item, int):
                spec = self.slot(item)
                specs.append(spec._replace(name=var_of_slot.get(item, f"_gluon_cf_slot{item}")))
                names.append(input_of_slot[item])
            else:
                specs.append(item._replace(name=f"_gluon_cf_{item.name}"))
                names.append(f"{graph_name}/{item.name}")
        return symbol_to_onnx_graph(
            sym, None, specs, [f"{graph_name}/out{k}" for k in range(len(sym.list_outputs()))],
            graph_name, self.node.opset, input_names=names, outer=outer)


def set_outputs(graph, value_infos):
    del graph.output[:]
    graph.output.extend(value_infos)


def rank(shape, what, node):
    if shape is None:
        if PLAN.get() is None:   # a converter called outside export_onnx: no shape plan
            raise ValueError(f"export_onnx: the rank of the {what} of {node.kind} node "
                             f"{node.name!r} is unknown; export through export_onnx / "
                             f"export_onnx_symbol, which infer it from example inputs")
        raise NotImplementedError(
            f"{node.where()}export_onnx: the {what} of {node.kind} node {node.name!r} has a "
            f"shape known only when the graph runs, not even its rank (shape inference on the "
            f"example inputs cannot tell it), which the ONNX {node.kind} needs; give it a "
            f"known rank (e.g. reshape it) before the {node.kind}")
    return len(shape)
