"""Two rewrites of an exported ONNX graph that remove work a runtime repeats (NOTE below).

NOTE [simplifying exported graphs]
    mx2onnx converts operator by operator, and gluon_cf's lowering of recursion inlines converted
    graphs into loop bodies, so an exported graph computes some values twice (two ``take`` of
    the same index in a predicate and a call's argument: ten nodes each in clip mode) and some
    values on every iteration of a loop although they never change (the shape of a table the
    body indexes). At batch 1, where a runtime's per-node cost is most of the time, both count.
    * **Common subexpressions**: within one graph, a node with the same domain, operator,
      inputs and attributes as an earlier one is dropped and its outputs are read from the
      earlier node's, in that graph and its subgraphs (outer-scope reads). Only operators whose
      result is a function of their inputs (``DETERMINISTIC``), without subgraphs, and never a
      node defining a graph output.
    * **Loop-invariant nodes**: a node of a ``Loop`` or ``Scan`` body that reads only values
      defined outside the body (or constants, or other such nodes) moves in front of the loop,
      when running it there cannot fail where the loop would not have run it (a loop may run
      zero times): ``Constant``; ``Shape``, ``Size``, ``Identity`` and ``Cast`` of anything;
      and elementwise arithmetic and comparisons of values so moved (shapes and constants).
    Both keep every value the graph computes; the tests compare exported models with Gluon, and
    with and without these rewrites.
"""
from typing import Dict

import onnx
from onnx import AttributeProto

# Operators whose outputs depend only on their inputs and attributes (no randomness, no state).
DETERMINISTIC = frozenset("""
    Abs Acos Add And ArgMax ArgMin Asin Atan BitShift Cast Ceil Clip Compress Concat Constant
    ConstantOfShape Cos Cosh CumSum Div Einsum Elu Equal Erf Exp Expand Flatten Floor Gather
    GatherElements GatherND Gemm Greater GreaterOrEqual HardSigmoid Identity LeakyRelu Less
    LessOrEqual Log LogSoftmax MatMul Max Mean Min Mod Mul Neg NonZero Not OneHot Or Pad Pow
    Range Reciprocal ReduceL1 ReduceL2 ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd
    ReduceSum ReduceSumSquare Relu Reshape ScatterND Selu Shape Sigmoid Sign Sin Sinh Size Slice
    Softmax Softplus Softsign Split Sqrt Squeeze Sub Sum Tan Tanh Tile TopK Transpose Unsqueeze
    Where Xor
""".split())
# Loop-invariant nodes moved in front of a loop: these never fail on any input...
_TOTAL = frozenset({"Constant", "Shape", "Size", "Identity", "Cast"})
# ... and these, elementwise, only on values that were moved themselves (shapes, constants).
_ON_MOVED = frozenset({"Add", "Sub", "Mul", "Max", "Min", "Equal", "Less", "Greater",
                       "LessOrEqual", "GreaterOrEqual", "And", "Or", "Not", "Slice"})
_LOOPS = frozenset({"Loop", "Scan"})


def simplify(graph):
    """Apply both rewrites to ``graph`` and its subgraphs, innermost first; returns how many
    nodes were merged and how many moved out of loops."""
    merged = moved = 0
    for node in list(graph.node):
        for attr in node.attribute:
            for sub in _subgraphs(attr):
                m, v = simplify(sub)
                merged, moved = merged + m, moved + v
    merged += _merge_common(graph)
    moved += _hoist_invariants(graph)
    if moved:   # what moved out may now repeat what is here
        merged += _merge_common(graph)
    return merged, moved


def _subgraphs(attr):
    if attr.type == AttributeProto.GRAPH:
        return [attr.g]
    if attr.type == AttributeProto.GRAPHS:
        return list(attr.graphs)
    return []


def _has_subgraph(node):
    return any(_subgraphs(a) for a in node.attribute)


def _merge_common(graph):
    outputs = {value.name for value in graph.output}
    seen: Dict[tuple, onnx.NodeProto] = {}   # (op, inputs, attributes) -> first such node
    renamed: Dict[str, str] = {}
    kept, merged = [], 0
    for node in graph.node:
        if renamed:
            _rename_inputs(node, renamed)
        if node.op_type in DETERMINISTIC and not node.domain and not _has_subgraph(node) \
                and not outputs.intersection(node.output):
            key = (node.op_type, tuple(node.input),
                   tuple(sorted(a.SerializeToString() for a in node.attribute)))
            earlier = seen.get(key)
            if earlier is not None and len(earlier.output) == len(node.output):
                renamed.update(zip(node.output, earlier.output))
                merged += 1
                continue
            seen.setdefault(key, node)
        kept.append(node)
    if merged:
        del graph.node[:]
        graph.node.extend(kept)
    return merged


def _rename_inputs(node, renamed):
    for k, name in enumerate(node.input):
        if name in renamed:
            node.input[k] = renamed[name]
    for attr in node.attribute:
        for sub in _subgraphs(attr):
            for inner in sub.node:
                _rename_inputs(inner, renamed)


def _hoist_invariants(graph):
    moved, rebuilt = 0, []
    for node in graph.node:
        if node.op_type in _LOOPS and not node.domain:
            for attr in node.attribute:
                if attr.name == "body":
                    hoisted = _invariants(attr.g)
                    rebuilt.extend(hoisted)
                    moved += len(hoisted)
        rebuilt.append(node)
    if moved:
        del graph.node[:]
        graph.node.extend(rebuilt)
    return moved


def _invariants(body):
    """Remove from ``body`` the nodes that may run once in front of its loop; return them."""
    defined = {value.name for value in body.input} | {init.name for init in body.initializer}
    for node in body.node:
        defined.update(node.output)
    outputs = {value.name for value in body.output}
    moved_names, hoisted, kept = set(), [], []
    for node in body.node:
        inside = [name for name in node.input if name and name in defined
                  and name not in moved_names]
        movable = not inside and not node.domain and not _has_subgraph(node) \
            and not outputs.intersection(node.output) and (
                node.op_type in _TOTAL or
                node.op_type in _ON_MOVED and all(not name or name in moved_names
                                                  for name in node.input))
        if movable:
            hoisted.append(node)
            moved_names.update(node.output)
        else:
            kept.append(node)
    if hoisted:
        del body.node[:]
        body.node.extend(kept)
    return hoisted
