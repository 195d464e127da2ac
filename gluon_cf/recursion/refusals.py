"""What a recursive function cannot do hybridized, said at the user's line instead of as a
misleading or internal error (issue 24): a recursive call inside MXNet's own control flow, a
function closing over a value of another's invocation."""
import os
import re

from ..operators import SOURCE_ATTR


def refuse_mxnet_control_flow(fn, tb, located):
    """A recursive call inside MXNet's own ``F.contrib.cond``/``while_loop`` (which MXNet traces
    itself, so gluon_cf's ``cond`` never sees the call to pick the base case) reads as "no base
    case"; say what it is, at the user's line calling the MXNet op."""
    user_line = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename.endswith(os.path.join("mxnet", "symbol", "contrib.py")) and \
                code.co_name in ("cond", "while_loop"):
            raise NotImplementedError(
                "%sgluon_cf.recursive: %r calls itself inside MXNet's F.contrib.%s, which "
                "cannot hold a recursive call (gluon_cf never sees its base case); call "
                "gluon_cf.%s instead (the same signature and results)"
                % (user_line + ": " if user_line else located, fn.name, code.co_name,
                   code.co_name)) from None
        if not tb.tb_frame.f_globals.get("__name__", "").startswith(("mxnet", "gluon_cf")):
            user_line = "%s:%d" % (code.co_filename, tb.tb_lineno)
        tb = tb.tb_next


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
