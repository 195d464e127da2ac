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


def inferred_step_rows(func_graph, shapes, num_out):
    """The shapes of the ``num_out`` step outputs of a loop of no step as MXNet infers them
    from its body's graph on the slots' ``shapes`` (0: MXNet's legacy unknown dim), or None
    where it cannot: a hybridized while_loop then runs func's graph once for them, or
    refuses (NOTE [loops of no step] in ``while_loop.py``), and its export asks this to do
    the same (NOTE [dims a loop's rows follow]); a converted ``for`` over no row refuses
    (NOTE [a foreach of no step])."""
    key = (tuple(shapes), num_out)
    try:   # (NOTE [step rows are remembered])
        cache = func_graph.__dict__.setdefault("_step_rows", {})
        if key in cache:
            found = cache[key]
            return None if found is None else list(found)
    except TypeError:   # (a shape that is no tuple of ints: not remembered)
        cache = None
    pending = registry.provisional_shapes()
    rows = _rows_of(func_graph, shapes, num_out)
    for size in NOT_ZERO if rows is not None and any(
            isinstance(s, tuple) and 0 in s for s in shapes) else ():
        # (NOTE [a dim of 0 read as unknown]: the answer must not change with that dim)
        unknown = [tuple(size if d == 0 else d for d in s) if isinstance(s, tuple) else s
                   for s in shapes]
        rows = rows if rows is not None and _rows_of(func_graph, unknown, num_out) == rows \
            else None
    if cache is not None and registry.provisional_shapes() == pending:
        if len(cache) >= _MOST_REMEMBERED:
            cache.clear()
        cache[key] = None if rows is None else tuple(rows)
    return rows


# NOTE [step rows are remembered]
#     A hybridized loop that runs no step asks ``inferred_step_rows`` on every call, and
#     MXNet's inference of a body's graph on shapes holding a 0 (a mask keeping no row) is
#     never cached by ``Graph.infer_shape`` (an incomplete answer may complete later), so each
#     such call inferred twice (NOTE [a dim of 0 read as unknown]): 16% of the call. The
#     answer is a function of the graph and the shapes alone, so it is remembered per graph
#     and shapes, except an answer given while a recursive function's shapes were pending
#     (NOTE [one shape per call]), as ``Graph.infer_shape`` does; a few shapes at most.
_MOST_REMEMBERED = 64


# NOTE [a dim of 0 read as unknown]
#     MXNet's legacy inference reads a dim of 0 as unknown, and some operators then answer a
#     wrong shape rather than none: a gather_nd of a (0, 3) value infers nothing, the
#     reshape((1, -1)) after it answers (1, 0), and a concat of it with a (1, 3) row sums
#     that 0 into a complete (1, 3), where the step's row is (1, 6) or, run on no row, an
#     error. A loop of no step took that (1, 3) for its zero rows (issue 24), silently. A
#     complete answer that a dim of 0 cannot change (a take of a kept row: the row's width)
#     is the same with that dim any other size; so the rows are taken from inference only
#     where inferring again with every 0 made each size of ``NOT_ZERO`` gives the same rows,
#     and otherwise a hybridized loop of no step refuses at its line, on every call (an input
#     of a dim of 0: NOTE [loops of no step]; func's graph ran on it until round 31x).
#     One size is not enough: ``kept + t`` of kept rows (0, 4), t (2, 4), infers (2, 4) with
#     the 0 read as unknown and with it made 2, where the step's add fails on no row (0 vs
#     2), and the loop gave (3, 2, 4) zeros (issue 24, round 31x); made 3 too, the add's
#     inference refuses and the step's own error is raised at its line. Two sizes are still
#     a check from shapes, not a proof per operator: an operator equating a dim of 0 with
#     both 2 and 3 (none of MXNet's elementwise, concat or dot rules does) would pass.
NOT_ZERO = (2, 3)


def _rows_of(func_graph, shapes, num_out):
    """MXNet's inference of the step rows on ``shapes``, None where incomplete or refused."""
    try:
        _, row_shapes = func_graph.infer_shape(list(shapes))
    except (mx.MXNetError, ValueError):
        return None
    rows = complete_rows(row_shapes, num_out)
    return None if rows is None else [tuple(r) for r in rows]


def complete_rows(row_shapes, num_out):
    """The first ``num_out`` of ``row_shapes`` if each is complete, else None."""
    rows = row_shapes[:num_out]
    return rows if all(registry.is_complete(r) for r in rows) else None
