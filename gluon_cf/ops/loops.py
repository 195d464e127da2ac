"""What ``foreach`` and ``while_loop`` share: running one loop per row of a batch, the shape
of stacked step outputs, and the run-time check that loop state keeps its shape."""
import mxnet as mx

from .. import registry, rowwise
from ..checks import check_kept_shapes
from ..executor import Frame, Parallel
from ..graph import decode


def stacked_shape(rows, shape):
    """The shape of a step output of ``shape`` stacked over ``rows`` steps: either may be a
    :class:`registry.Dynamic` (e.g. the rows of an exact-length loop), or None (unknown yet)."""
    if registry.is_dynamic(rows) or registry.is_dynamic(shape):
        dims = registry.dims_of(shape)
        known_rows = rows if isinstance(rows, int) and rows > 0 else None
        return registry.Dynamic(None if dims is None else (known_rows,) + dims)
    return (rows,) + shape if shape is not None and rows is not None else None


def keeping_shapes(op, noun, plural, fn_name, run, old_values, where=None):
    """Generator: the result of the step ``run``, after checking that the loop state it
    returns last (``old_values`` before the step) kept its shapes and dtypes, as eager mode
    does (for bodies that may compute values of run-time shape; ``where``: the node's user
    line, NOTE [run-time loop checks name the user's line] in ``checks.py``)."""
    result = yield run
    check_kept_shapes(op, noun, plural, fn_name, old_values,
                      result[len(result) - len(old_values):], where)
    return result


def per_row(forward, node, inputs, out_shapes, frame):
    """Batching rule of the loops: run the loop once per row of the batched inputs, all rows as
    one Parallel request (so recursive calls inside batch across rows), then concatenate.

    NOTE [batching] (``recursion/batching.py``): a batched value holds one row per invocation.
    """
    works = []
    for r in range(frame.rows):
        row = [x[r:r + 1] if frame.batched(i) else x
               for i, x in enumerate(inputs)]
        works.append(forward(node, row, out_shapes,
                             Frame(frame.recursion, 1, frame.flags, frame.depth)))
    results = yield Parallel(works)
    return [mx.nd.concat(*column, dim=0) for column in zip(*results)]


def loop_batching_rule(rule, node, in_flags, in_shapes, used):
    """Batching rule of the loops (NOTE [row-wise rules]): they run once per row
    (:func:`per_row`) and their rows are concatenated, which is right when each row's used
    outputs hold exactly one row."""
    one_row = [(1,) + tuple(s[1:]) if f else tuple(s) for s, f in zip(in_shapes, in_flags)]
    try:
        _, outs = rule.infer_shape(decode(rule.kind, node["attrs"]["spec"]), one_row)
    except Exception as err:  # noqa: BLE001
        raise rowwise.Rejected(node, "cannot infer its shapes for one row (%s)" % err,
                               rowwise.HINT_UNKNOWN) from None
    for k, shape in enumerate(outs):
        if used[k] and (shape is None or shape[0] != 1):
            raise rowwise.Rejected(
                node, "returns %s for one invocation, not one row, so rows of several "
                "invocations cannot be told apart" % (shape,),
                "Return per-invocation values with a leading axis of 1 from the loop (e.g. the "
                "final states), or reshape its outputs to (1, ...)")
