"""The items of a tensor's rows for a graph's ``for`` that unpacks them (``for a, b in x``).

NOTE [autograph unpacking loops]
    The conversion writes ``for a, b in it: body`` as ``for __agu_N in it: a, b = __agu_N;
    body`` (``converters/loops.unpacked_targets``), the same Python: over a Python iterable
    (``enumerate(x)``, ``zip(x, y)``, a list) the loop runs as any Python ``for`` (its jumps
    flags, a tensor ``break`` under NOTE [autograph lists]' rules), and ``a`` and ``b`` are
    variables its body assigns (carried where read after it, so they need a value before a
    graph's loop, as any). Over a tensor, a graph's ``foreach`` has no shape for a step's row,
    so Python's unpacking of it could not run: :func:`row_items` makes each step's row the
    tuple of its items (``row[0]``, ``row[1]``, as iterating an NDArray's row yields them: a
    1-D row's items of shape (1,)), sliced in the step (a loop of no step slices nothing),
    which the unpacking assignment unpacks as Python's (nested: ``for (a, b), c in x``).
    Every level of a nested target is an assignment of its own (``i, (a, b) = v`` is ``i,
    t = v; a, b = t``: ``templates.unpacked_levels``, in assignments too), each unpacking a
    tensor as its rows (NOTE [autograph iteration]), not as MXNet's Symbol iterates (itself,
    once: ``(a,), c = x[0:1], h`` gave ``a`` the whole array).
    The rows' shape after the first axis must be given by the input shapes the graph is traced
    for (NOTE [graphs traced for input shapes]), else refused at the line; a target of other
    length than the rows is Python's ValueError, raised at the line where the rows surely
    exist (an AutographError, a ValueError), refused where they may not (a loop of no step
    raises nothing)."""
import mxnet as mx

from ...hybrid_trace import static_shape
from ..errors import AutographError, op_name


def row_items(data, structure, where):
    """The function making a step's row of ``data`` into the nested tuple of its items that
    the target ``structure`` unpacks (NOTE [autograph unpacking loops]); the counts are
    checked against the rows' shape here, before the loop."""
    shape = static_shape(data, where, trailing=True)
    if shape is None:
        raise AutographError(
            f"{where}: this for loop over a tensor unpacks each row, but the rows' shape is "
            f"known only when the graph runs (it is not given by the input shapes), so how "
            f"many items a row holds is not; loop over the rows (for row in x:) and index "
            f"them (row[0], row[1])")

    def check(row_shape, target):
        if row_shape[0] != len(target):
            _wrong_count(row_shape[0], len(target), shape[0], where)
        inner = tuple(row_shape[1:]) or (1,)     # (a 1-D row's items are of shape (1,))
        for sub in target:
            if sub is not None:
                check(inner, sub)
    row_shape = tuple(shape[1:]) or (1,)
    check(row_shape, structure)

    def items(row, row_shape, target):
        # (a step's slices: made in the loop's body, which a loop of no step never runs)
        out = []
        for k, sub in enumerate(target):
            part = mx.sym.slice_axis(row, axis=0, begin=k, end=k + 1,
                                     name=op_name(where, "item"))
            inner = tuple(row_shape[1:])
            if inner:
                part = mx.sym.reshape(part, shape=inner, name=op_name(where, "item"))
            out.append(part if sub is None else items(part, inner or (1,), sub))
        return tuple(out)
    def step_items(row):
        if len(shape) == 1:     # (a 1-D array's row is its item of shape (1,))
            row = mx.sym.reshape(row, shape=(1,), name=op_name(where, "item"))
        return items(row, row_shape, structure)
    return step_items


def _wrong_count(count, expected, rows, where):
    python = f"too many values to unpack (expected {expected})" if count > expected else \
        f"not enough values to unpack (expected {expected}, got {count})"
    if rows > 0:
        raise AutographError(f"{where}: {python}: each row of this for loop's tensor holds "
                             f"{count} items")
    raise AutographError(
        f"{where}: this for loop over a tensor unpacks each row into {expected} items, but "
        f"its rows hold {count} ({python} where a row exists) and how many rows there are is "
        f"known only when the graph runs; unpack as many items as a row holds")
