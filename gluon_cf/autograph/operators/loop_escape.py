"""An exception leaving a converted loop run as Python carries the loop's variables out
(NOTE [an exception leaving a loop])."""
from .data_structures import append_rows
from .variables import Undefined

# NOTE [an exception leaving a loop]
# A converted loop's body is a function returning the loop's variables, which the statement
# `names = for_stmt(...)` rebinds when the loop ends. An exception leaving the loop partway
# (a raise in the body, a helper it calls, an iterator or a while condition) skips that
# assignment; where the user's own try/except (contextlib.suppress, a `with` suppressing it)
# catches it, plain Python's variables hold what the steps run so far made, and its lists
# the rows appended so far. So when the loop runs as Python (its iterable or condition is no
# tensor, eagerly or while tracing), for_stmt and while_stmt record on the exception the
# variables' current values: those of the body's frame (its locals when the exception left
# it, an unbound one absent) when it came from the body, else the last step's; and append to
# the collected lists the rows the failing step appended before the exception (a kept row,
# appended at the end of its step, was not). The code around the loop statement rebinds the
# variables recorded and re-raises the same exception object (`raise`: its traceback
# unchanged). A loop on a tensor is one graph op: an exception while it is traced is no step
# of it, and the variables keep their values before it (the op never ran).

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
