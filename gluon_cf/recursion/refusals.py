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


# the fresh variables of a recursive function's trace (tracing.trace, _Table._trace)
_TRACE_INPUT = re.compile(r"_gcf\d+_recursive_(.+)_(?:discover|body)_in\d+$")


def refuse_captured_invocation_values(traced_functions, located):
    """A function of the table closing over a value computed in another's body (a recursive
    function defined inside a recursive function, reading the enclosing invocation's values):
    that value differs per invocation, while a function's environment is one value for the
    whole recursion; MXNet would fail on an unknown input of the block. Refuse it by name."""
    for fn, traced in traced_functions.items():
        for _, sym in traced.captured:
            owners = [m.group(1) for m in map(_TRACE_INPUT.match, sym.list_inputs()) if m]
            if not owners:
                continue
            made = sym.attr(SOURCE_ATTR)
            raise NotImplementedError(
                "%sgluon_cf.recursive: %r reads a value computed in the body of %r%s (one "
                "value per invocation of %r), which a recursive function cannot capture: pass "
                "it to %r as an argument" % (
                    located(fn), fn.name, owners[0], " at %s" % made if made else "",
                    owners[0], fn.name))


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
