"""What a recursive function cannot do hybridized, said at the user's line instead of as a
misleading or internal error (issue 24): a recursive call inside MXNet's own control flow, a
function closing over a value of another's invocation."""
import os
import re
import sys
import types
from typing import Optional

from ..operators import SOURCE_ATTR, user_location

_MXNET_CONTRIB = os.path.join("mxnet", "symbol", "contrib.py")


# the fresh variables of a trace (tracing.trace): a recursive function's (_Table._trace), a
# foreach body's, a while_loop's cond or func
_TRACE_INPUT = re.compile(r"_gcf(\d+)_(recursive|foreach|while_loop)_(.+)_in\d+$")
_RECURSIVE_ROLE = re.compile(r"(.+)_(?:discover|body)$")


def refuse_captured_invocation_values(traced_functions, located, first_trace):
    """A function of the table closing over a value computed in another's body (a recursive
    function defined inside a recursive function, reading the enclosing invocation's values),
    or in a foreach/while_loop body inside the recursion (reading a step's values): that
    value differs per invocation (or step), while a function's environment is one value for
    the whole recursion; MXNet failed on an unknown input of the block (the loop's input).
    Refuse it by name. ``first_trace``: traces of larger ids ran inside the recursion (a
    recursion called in an outer foreach body may capture that body's values)."""
    for fn, traced in traced_functions.items():
        for _, sym in traced.captured:
            inner = [m for m in map(_TRACE_INPUT.match, sym.list_inputs())
                     if m and int(m.group(1)) > first_trace]
            if not inner:
                continue
            made = sym.attr(SOURCE_ATTR)
            at = " at %s" % made if made else ""
            owner = _RECURSIVE_ROLE.match(inner[0].group(3))
            if inner[0].group(2) == "recursive" and owner:
                name = owner.group(1)
                raise NotImplementedError(
                    "%sgluon_cf.recursive: %r reads a value computed in the body of %r%s (one "
                    "value per invocation of %r), which a recursive function cannot capture: "
                    "pass it to %r as an argument" % (located(fn), fn.name, name, at, name,
                                                      fn.name))
            raise NotImplementedError(
                "%sgluon_cf.recursive: %r reads a value computed in a gluon_cf.%s %s inside "
                "the recursion%s (one value per step), which a recursive function cannot "
                "capture: pass it to %r as an argument" % (
                    located(fn), fn.name, inner[0].group(2), inner[0].group(3), at, fn.name))


def refuse_call_inside_mxnet_control_flow(fn, body_code):
    """A recursive call traced inside MXNet's own ``F.contrib.foreach``/``cond``/``while_loop``
    in a recursive function's body: MXNet runs that subgraph itself, outside the recursion
    node that gives the call its functions (it failed at run time with "call of 'node_0@...'
    outside of its recursion node"). ``body_code``: the code of the function body's trace,
    where the walk up the stack stops."""
    frame: Optional[types.FrameType] = sys._getframe(1)
    while frame is not None and frame.f_code is not body_code:
        code = frame.f_code
        if code.co_filename.endswith(_MXNET_CONTRIB) and \
                code.co_name in ("foreach", "cond", "while_loop"):
            where = user_location()
            raise NotImplementedError(
                "%sgluon_cf.recursive: a call of %r inside MXNet's F.contrib.%s, whose body "
                "MXNet runs on its own, outside the recursion; call gluon_cf.%s instead (the "
                "same signature and results)" % (where + ": " if where else "", fn.name,
                                                 code.co_name, code.co_name))
        frame = frame.f_back
