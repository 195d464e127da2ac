"""What a graph loop appends to lists: a tensor loop's ``items.append(value)`` rows joined to
the lists as :class:`~.data_structures.StepList` (NOTE [autograph lists] in
``data_structures.py``), one row or none where a tensor condition says (``appended_where``)."""
import mxnet as mx

from ..errors import AutographError, python_value
from .data_structures import StepList


def append_rows(lists, values, where):
    for items, value in zip(lists, values):
        items.append(value)          # Undefined raises: the list was never assigned


def appended_where(going, lists, values, where):
    """The lists after appending each of ``values`` where the array ``going`` holds (one row
    or none: StepLists)."""
    out = []
    for items, value in zip(lists, step_rows(values, where)):
        row = mx.sym.expand_dims(value, axis=0)
        if isinstance(items, list):
            if not all(isinstance(i, mx.sym.Symbol) for i in items):
                raise AutographError(f"{where}: this loop appends to a list under a tensor "
                                     f"condition (after a break under a tensor if), and the "
                                     f"list holds Python values before it; start it empty or "
                                     f"with arrays")
            if not items:       # its one row counts where `going` holds (NOTE [checked items])
                out.append(StepList(row, going, where, most=1, stale=True))
                continue
            items = StepList(mx.sym.stack(*items, axis=0), len(items), where)
        if not isinstance(items, StepList):
            raise AutographError(f"{where}: this loop on a tensor appends to {items!r}, which "
                                 f"is not a list")
        out.append(items.joined(row, going, 1, maybe_stale=True))
    return out


def step_rows(values, where):
    for value in values:
        if not isinstance(value, mx.sym.Symbol):
            raise AutographError(f"{where}: this loop on a tensor appends the Python value "
                                 f"{python_value(value)} to a list at each step; the steps "
                                 f"of a graph's loop are collected as rows of an array, so "
                                 f"append arrays" + (
                                     " (one list for each: hs.append(h); cs.append(c))"
                                     if isinstance(value, (tuple, list)) else ""))
    return list(values)


def extended(lists, rows, steps, where, most=None):
    """The lists a graph loop appended to, as StepLists: a list's earlier items come first.
    ``most``: the loop's bound on its steps (None: unknown)."""
    if not lists:
        return ()
    rows = rows if isinstance(rows, (list, tuple)) else [rows]
    out = []
    for items, stacked in zip(lists, rows):
        if isinstance(items, StepList):
            out.append(items.joined(stacked, steps, most))
        elif isinstance(items, list):
            if not all(isinstance(i, mx.sym.Symbol) for i in items):
                raise AutographError(f"{where}: a list this loop on a tensor appends to "
                                     f"already holds Python values; start it empty")
            first = StepList(mx.sym.stack(*items, axis=0), len(items), where) if items else \
                None
            out.append(first.joined(stacked, steps, most) if first is not None else
                       StepList(stacked, steps, where, most))
        else:
            raise AutographError(f"{where}: this loop on a tensor appends to {items!r}, which "
                                 f"is not a list")
    return tuple(out)
