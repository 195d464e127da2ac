"""``items[i]`` of a list a tensor loop collected, as a graph node that checks the index
against the number of items when the graph runs (an IndexError at the user's line, as Python
raises, instead of MXNet's ``slice_axis`` error) and then computes the item.

NOTE [checked items]
    How many items such a list holds is known only when the graph runs (NOTE [autograph
    lists]), so ``items[i]`` cannot be checked while tracing unless bounded loops appended
    them (then ``i`` past the bound is an IndexError at once). Otherwise the item is an
    ``autograph_item`` node: its input 0 is the number of items, its subgraph ``value``
    slices the row; its forward raises IndexError naming the user's line when ``i`` is out of
    range, as Python does, before running the subgraph; where the rows' length is known at
    shape inference (a loop over an input of fixed length) an ``i`` past it is that
    IndexError already there (the slice would fail MXNet's inference, naming no line). It has no
    batching rule (it runs once per call). Exported, it is an ONNX ``If`` on the count whose
    branches both slice the row, the else branch (out of range) through a ``Gather`` that fails,
    named after the user's line: onnxruntime fails where Python raises (no silent value), without
    this message. Where the items the list surely holds cover ``i`` (``StepList.least``: items
    before the loops and appended after them), the item is a plain slice, no node.
"""
import operator

import mxnet as mx

from ... import node as _node, registry
from ...hybrid_trace import static_dtypes, static_shape
from ...ops.cond import cond
from ...tracing import merge_captures, trace
from ..errors import (AutographError, node_name, one_colon, op_name, python_value,
                      region_at)

OP = "autograph_item"


def checked_item(count, compute, index, error, described):
    """What ``compute()`` computes from a list's rows, checked when the graph runs: ``index``
    must be within ``count`` (a one-element array) items, else an IndexError whose message is
    ``error`` then "holds N items this call (``described``)"."""
    value = trace(OP, "value", 0, lambda _: compute())
    captured, slot_of = merge_captures(OP, [value], first_slot=1)
    spec = {"graphs": {"value": value.spec([], slot_of)}, "num_outputs": value.num_outputs,
            "index": str(index), "error": error, "described": described}
    return _node.make_node(OP, [count] + captured, spec, None)[0]


class ItemRule(registry.Rule):
    """Node inputs: ``[count, *captured]``; slots are the node inputs; output: the item."""

    kind = OP
    spec_fields = {"index": "text", "error": "text", "described": "text"}
    graph_roles = ("value",)
    outputs_graph = "value"

    def infer_shape(self, node, in_shapes):
        # The rows' length known here (a loop over an input of fixed length): an index past
        # it fails now, as the IndexError the forward would raise, not as MXNet's slice_axis
        # error naming no line of the user's (the value graph slices only the rows)
        rows = in_shapes[1] if len(in_shapes) == 2 else None
        if isinstance(rows, tuple) and rows and rows[0] is not None and rows[0] > 0:
            # (a shape known only at run time is no tuple: a loop's rows inside another's body)
            index = int(node.spec["index"])
            if not -rows[0] <= index < rows[0]:
                raise IndexError(one_colon(f"{node.spec['error']} holds {rows[0]} items "
                                           f"this call ({node.spec['described']})"))
        inferred, out = node.graphs["value"].infer_shape(in_shapes)
        shapes = list(in_shapes)
        for slot, shape in inferred.items():
            shapes[slot] = shapes[slot] or shape
        return shapes, out

    def infer_type(self, node, in_types):
        inferred, out = node.graphs["value"].infer_type(in_types)
        types = list(in_types)
        for slot, t in inferred.items():
            types[slot] = types[slot] if types[slot] is not None else t
        return types, out

    def forward(self, node, inputs, out_shapes, frame):
        index, count = int(node.spec["index"]), int(inputs[0].asnumpy().ravel()[0])
        if not -count <= index < count:
            raise IndexError(one_colon(f"{node.spec['error']} holds {count} items this call "
                                       f"({node.spec['described']})"))
        return (yield node.graphs["value"].run(inputs, frame))


def _to_onnx(self, custom_node):
    """Export rule: an ONNX ``If`` on whether the count covers the index (NOTE [gluon_cf ops
    as ONNX control flow] in ``export/onnx_kit.py``); its else branch adds to the item a
    ``Gather`` out of range, named after the user's line, so onnxruntime fails where Python
    raises (a slice past the rows was no error in ONNX: ``F.stack(*items)`` of no item gave
    (0, ...) rows)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from gluon_cf.export.onnx_kit import ConverterNode

    node = ConverterNode(custom_node, OP)
    index = int(node.spec["index"])
    count = node.add("Cast", [node.add("Reshape", [custom_node.inputs[0], node.const([-1])])],
                     to=TensorProto.INT64)
    covered = node.add("Greater", [count, node.const([index if index >= 0 else -index - 1])])
    captured = range(1, len(custom_node.inputs))
    branches = [node.convert("value", f"{node.name}_{key}", outer_slots=captured)
                for key in ("then", "else")]
    out_of_range = branches[1]
    dtype = out_of_range.outputs[0].dtype
    if np.dtype(dtype).kind in "iuf":      # (a bool item keeps the plain slice)
        graph, first = out_of_range.graph, out_of_range.graph.output[0]
        where = node.where().rstrip(": ")
        guard = f"{node.name}/index_out_of_range" + (f" ({where})" if where else "")
        zeros, past, guarded = (f"{node.name}_else/{n}" for n in ("zeros", "past", "item"))
        graph.node.extend([
            helper.make_node("Constant", [], [zeros], name=zeros, value=numpy_helper.from_array(
                np.zeros(1, np.dtype(dtype)), zeros)),
            # an index computed from the count (a constant one would be folded, and fail,
            # when onnxruntime loads the model)
            helper.make_node("Sub", [count, node.add("Sub", [count, node.const([1])])],
                             [past], name=past),
            helper.make_node("Gather", [zeros, past], [guard], name=guard),
            helper.make_node("Add", [first.name, guard], [guarded], name=guarded)])
        first.name = guarded
    node.add("If", [node.truth(covered)], custom_node.outputs,
             then_branch=branches[0].graph, else_branch=branches[1].graph)
    return node.nodes, [spec.dtype for spec in branches[0].outputs]


# Rule declares to_onnx = None (no export rule); the rule is attached as the op files' are,
# but without a method mypy would read as an incompatible override of that None.
setattr(ItemRule, "to_onnx", _to_onnx)
registry.register(ItemRule())


def summed(items, where, *start):
    """``sum(items, start)`` of a collected list whose length only the graph's run knows:
    Python's ``start + item + item ...``, the rows summed (added to ``start``, broadcasting
    as NDArrays add). Where the list may hold no item, Python gives ``start`` itself: an
    array ``start`` is chosen by a cond on the count; a Python number (0: ``sum(items)``),
    where a graph gives an array, is checked when the graph runs."""
    rows = items.rows
    first = start[0] if start else 0

    def total():
        added = mx.sym.sum(rows, axis=0)
        if isinstance(first, mx.sym.Symbol):
            return mx.sym.broadcast_add(first, added, name=op_name(where, "sum"))
        return added + first if start else added
    if items.least > 0:
        return total()
    if isinstance(first, mx.sym.Symbol):
        return cond(items.n_items > 0, total, lambda: first, name=node_name(where, "sum"))
    said = f"{python_value(first)}, a number" if start else "0, an int"
    return checked_item(items.n_items, total, 0,
                        f"{where}: sum() of a list that may hold no item (Python's {said}; "
                        f"a graph gives an array): the list",
                        f"the loop at {region_at(items.where)} appended them; add the first "
                        f"item outside the loop or use F.add_n(*items) where it holds one")


def list_index(index):
    """A list's index as Python takes it: an int (a bool, a numpy int: ``__index__``), a
    slice, or a Symbol (refused by the caller, saying what to write); anything else is
    Python's TypeError (it was a refusal about the list's length)."""
    if isinstance(index, (slice, mx.sym.Symbol)):
        return index
    if not hasattr(type(index), "__index__"):
        raise TypeError(f"list indices must be integers or slices, not "
                        f"{type(index).__name__}")
    return operator.index(index)


def rows_alike(rows, new, where, loop_where):
    """Refuse, at ``where``, an array of ``new`` (items put into a list a tensor loop at
    ``loop_where`` collected) whose shape or dtype, known while tracing, is not that of a
    row of ``rows``: the items are the rows of one array, restacked (MXNet's stack failed
    as the graph ran, naming none of the user's lines)."""
    if not new:
        return
    shape = static_shape(rows, where)
    dtypes = static_dtypes([rows] + list(new)) or [None] * (len(new) + 1)
    for value, dtype in zip(new, dtypes[1:]):
        got = static_shape(value, where)
        if shape is not None and got is not None and tuple(got) != tuple(shape[1:]):
            what = (f"shape {tuple(got)}", f"shape {tuple(shape[1:])}")
        elif dtype is not None and dtype != dtypes[0]:
            what = (f"dtype {_dtype_name(dtype)}", f"dtype {_dtype_name(dtypes[0])}")
        else:
            continue
        raise AutographError(one_colon(
            f"{where}: this puts an array of {what[0]} into a list the loop on a tensor at "
            f"{region_at(loop_where)} appended to, whose items are the rows of one array of "
            f"{what[1]}; put an array of the items' shape and dtype (reshape, pad or F.cast "
            f"it), or make a Python list of its own for arrays of several shapes"))


def _dtype_name(dtype):
    import numpy as np
    return np.dtype(dtype).name
