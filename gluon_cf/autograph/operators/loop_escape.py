"""An exception leaving a converted loop run as Python carries the loop's variables out
(NOTE [an exception leaving a loop])."""
from ..errors import AutographError
from .loop_lists import append_rows
from .variables import Undefined

from .side_effects import in_graph_region


class _ReturnBox:
    """The value of a return inside a ``with`` or ``try`` in a loop, computed where it
    returns (NOTE [autograph jumps])."""
    __slots__ = ("value", "kept")

    def __init__(self):
        self.value, self.kept = None, False


def return_box():
    return _ReturnBox()


def keep_return(box, value):
    """At a return inside a ``with`` or ``try`` in a loop: its value, computed now where the
    loop runs as Python (a graph's step, traced once, leaves it for after the loop)."""
    if not in_graph_region():
        box.value, box.kept = value(), True


def kept_return(box, value):
    """After the loop: the value kept where it returned, else ``value()``."""
    return box.value if box.kept else value()


def returned_through_finally(where, names, via=""):
    """A return inside a loop, inside a ``try`` whose ``finally`` assigns ``names`` that
    its value reads (``via``: through the functions it calls): refused where it returns
    (NOTE [autograph jumps])."""
    raise AutographError(
        f"{where}: this return is inside a try whose finally assigns {names}, which the "
        f"returned value reads{via}; Python returns the value computed here, before the finally "
        f"runs, but a return inside a loop returns after the loop, where the finally has "
        f"run. Assign the value to a variable the finally does not assign, given a value "
        f"before the loop, and return that (out = F.zeros_like(h) before the loop; out = h; "
        f"return out)")

# NOTE [an exception leaving a loop]
# A converted loop's body (and an if's branch) is a function returning the variables it
# assigns, which the statement `names = for_stmt(...)` (while_stmt, if_stmt, `return
# if_return(...)`) rebinds when it returns. An exception leaving it partway (a raise in the
# body, a helper it calls, an iterator, a while condition) skips that assignment; where the
# user's own try/except (contextlib.suppress, a `with` suppressing it) catches it, plain
# Python's variables hold what ran before the exception made, and its lists the rows
# appended so far. So when the loop or if runs as Python (its iterable or condition is no
# tensor: eagerly, or while tracing), the operator records on the exception the variables'
# current values: the body's or branch's frame's (its locals when the exception left it; an
# unbound one absent) when it came from there, else the last step's; and appends to the
# collected lists the rows the failing step appended before it (a kept row is appended at
# the end of its step, which the exception did not reach). The code around the statement
# (`except BaseException`) rebinds the variables recorded, innermost first, and re-raises
# the same exception object (a bare `raise`: its traceback unchanged).
# A loop or if on a tensor is one graph op: an exception leaving it while it is traced is no
# run-time event, and a user's except around it would run on with the values before it.
# Such an exception (an AutographError, or any but gluon_cf's own signals) is made known to
# surfacing_refusals (call_results.surfaced): if the user's code catches it, the decorated
# function raises the refusal when it returns (an AutographError as is, another exception as
# the AutographError at the loop's line); if it propagates, it leaves as it is.

_VALUES = "_gluon_cf_loop_values"


def record(exc, tb, body, names, values, lists=(), list_names=(), kept=()):
    """Record on ``exc`` (caught by a loop operator whose frame's traceback entry is ``tb``)
    the loop's variables ``names``: the body's frame's when the exception came out of
    ``body``, else ``values``; append to ``lists`` (named ``list_names``) the rows the body's
    frame had collected."""
    frame = tb.tb_next.tb_frame if tb is not None and tb.tb_next is not None else None
    current = dict(zip(names, values))
    if frame is not None and frame.f_code is body.__code__:
        found = frame.f_locals
        current = {n: found[n] for n in names if n in found}
        kept = list(kept) or [False] * len(list_names)
        for items, name, at_end in zip(lists, list_names, kept):
            row = found.get("__agc_" + name)
            # (a kept row is appended at the end of its step, which the exception left)
            if not at_end and isinstance(items, list) and row is not None and \
                    not isinstance(row, Undefined):
                append_rows([items], [row], None)
    try:
        setattr(exc, _VALUES, current)
    except AttributeError:      # (an exception object without attributes: nothing carried)
        pass


def escaped(exc):
    """The variables recorded on ``exc`` by the loop it left (taken off it), or ``{}``."""
    current = getattr(exc, _VALUES, None)
    if current is None:
        return {}
    try:
        delattr(exc, _VALUES)
    except AttributeError:
        pass
    return current
