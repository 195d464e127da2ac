"""The export rule of the recursion node for standard ONNX: plan its table, emit the expansion
Loop, guard its depth, emit the values Loop and unpack the roots' rows into the node's outputs.

NOTE [recursion as ONNX loops]
    ONNX has no calls, so a recursion node becomes loops over the levels of its call trees. It
    reuses the analysis of the ahead-of-time schedules (NOTE [ahead-of-time schedules] in
    gluon_cf/recursion/schedule.py; the analysis is in skeleton.py) with two rules relaxed, since an
    exported model is run by ONNX operators and has no gradients: the *skeleton* (what computes
    every ``cond`` predicate and every recursive call's argument) may use any operator, so arguments
    may carry values (the top-down generator's ``h``, ``c``); the function's body must hold only
    ordinary operators, ``cond`` and its own recursive calls, act row by row (checked), and return
    one row per call of one dtype. Then:

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
    them with ``save_artifact``."""
import numpy as np
from onnx import helper

from ..onnx_kit import ConverterNode

from .expansion import ExpansionLoop
from .plan import _plan
from .values import ValuesLoop


def lower_recursion(custom_node):
    """Export rule of the recursion node for standard ONNX (NOTE [recursion as ONNX loops])."""
    node = ConverterNode(custom_node, "recursion")
    try:
        return _Lowering(node, custom_node, *_plan(custom_node, node)).emit()
    except NotImplementedError as err:
        where = node.where()
        if not where or str(err).startswith(where):
            raise
        # the refusal names the function; the user's line says where it was written (issue 24)
        raise NotImplementedError(f"{where}{err}") from None


class _Lowering(ExpansionLoop, ValuesLoop):
    """The ONNX nodes of one recursion node: the expansion Loop, the depth guard, the values
    Loop, and the roots' packed rows unpacked into the node's outputs."""

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


    def _unpack_result(self, final):
        node, layout = self.node, self.layouts[self.order[0]]
        offset = 0
        for out_name, shape, size in zip(self.custom.outputs, layout["shapes"], layout["sizes"]):
            part = node.add("Slice", [final, node.const([offset]), node.const([offset + size]),
                                      node.const([1])])
            offset += size
            node.add("Reshape", [part, node.const([-1] + list(shape))], [out_name])
        return node.nodes, [layout["dtype"]] * len(self.custom.outputs)

