"""What converted code asks of a hybridized block's graph while it is traced: the shapes and
dtypes the inputs it is traced for give a value, checks on shapes run once the trace ends, and
the autograph mode the graph is traced in (NOTE [graphs traced for input shapes] in
``hybrid.py``, which sets :data:`TRACED` around a block's trace)."""
import threading
import warnings

import mxnet as mx

__all__ = ["TRACED", "autograd_mode_read", "check_shapes", "graph_traced", "shape_checked",
           "shape_hint", "static_dtype", "static_dtypes", "static_shape"]

TRACED = threading.local()   # .trace: the dict of the block's trace running on this thread


def autograd_mode_read(where):
    """Converted code read ``autograd.is_training()`` or ``is_recording()`` at ``where``: while
    a block's graph is traced, the graph is one for the autograd mode of the call that traced
    it (NOTE [graphs traced for input shapes])."""
    trace = getattr(TRACED, "trace", None)
    if trace is not None and trace["mode"] is None:
        trace["mode"] = where


def graph_traced():
    """Whether a hybridized block's graph is being traced on this thread (converted code
    hybridizing), not a block's traced only to infer its deferred parameters' shapes
    (eagerly, its code runs again on arrays)."""
    trace = getattr(TRACED, "trace", None)
    return trace is not None and trace["hybridized"]


def shape_checked(symbol, check):
    """``check(shape)`` called with the shape of ``symbol`` (one output) in the hybridized
    block's graph being traced, where the shapes of the inputs it is traced for give it, once
    the trace ends (:func:`check_shapes`); an error it raises refuses the trace. The graph
    stays one for any input shapes."""
    trace = getattr(TRACED, "trace", None)
    if trace is not None and trace["hybridized"] and len(symbol.list_outputs()) == 1:
        trace["checks"].append((symbol, check))


def check_shapes(trace):
    """The checks of :func:`shape_checked`, their symbols' shapes inferred together: one
    inference over the graph, not one per check (a check per ``and`` in a loop of a hundred
    steps made the trace five times slower, each inferring the graph so far)."""
    if not trace["checks"]:
        return
    shapes = _inferred([symbol for symbol, _ in trace["checks"]], trace["shapes"])
    if shapes is None:      # (one cannot tell, a branch's or step's own: each on its own)
        shapes = [(_inferred([symbol], trace["shapes"]) or [None])[0]
                  for symbol, _ in trace["checks"]]
    for (_, check), shape in zip(trace["checks"], shapes):
        if shape and all(d > 0 for d in shape):
            check(tuple(shape))


def _inferred(symbols, inputs, what="shape"):
    """The shapes (``what`` "type": dtypes) of ``symbols`` from those of the graph's
    ``inputs``, or None."""
    group = mx.sym.Group(symbols)
    arguments = set(group.list_arguments())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, found, _ = getattr(group, f"infer_{what}_partial")(
                **{n: s for n, s in inputs.items() if n in arguments})
    except Exception:       # (a node that cannot tell: checked when it runs)
        return None
    return found


def static_shape(symbol, where, trailing=False, hinted=False):
    """The shape of ``symbol`` (one output) in the block's graph being traced, inferred from
    the shapes of the inputs it is traced for, or None (NOTE [graphs traced for input
    shapes]); a shape given makes the graph one for those input shapes (``where`` read it).
    ``trailing``: only the axes after the first must be known (the first may be 0: no rows,
    or unknown, as MXNet's legacy shapes write both). ``hinted``: a loop body's row and
    carried values too, by :func:`shape_hint`."""
    trace = getattr(TRACED, "trace", None)
    if trace is None or len(symbol.list_outputs()) != 1:
        return None
    arguments = set(symbol.list_arguments())
    known = {n: s for n, s in trace["shapes"].items() if n in arguments}
    for name in sorted(arguments - set(known)) if hinted else ():
        shape = trace.get("hints", {}).get(name, lambda: None)()
        if shape:
            known[name] = shape
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, shapes, _ = symbol.infer_shape_partial(**known)
    except Exception:           # (a node that cannot tell: the shape is not static)
        return None
    shape = shapes[0] if shapes else None
    if not shape or any(d <= 0 for d in shape[1 if trailing else 0:]):
        # (0: unknown in MXNet's legacy shapes)
        return None
    if trace["read"] is None:
        trace["read"] = where
    return tuple(shape)


def shape_hint(variable, shape_of):
    """A loop body's input ``variable`` (its row, a carried value) has the shape
    ``shape_of()`` gives (or None) where the shapes the graph is traced for give it: read by
    :func:`static_shape` only where asked (``hinted``: an int index inside a try catching
    IndexError, NOTE [an index error the user's try catches])."""
    trace = getattr(TRACED, "trace", None)
    if trace is not None and variable.get_children() is None and \
            len(variable.list_outputs()) == 1:
        trace.setdefault("hints", {})[variable.name] = shape_of


def static_dtype(symbol, where):
    """``symbol.dtype`` (NDArray's: a numpy type) in the block's graph being traced, from the
    dtypes of the inputs it is traced for, or None; given, the graph is one for those input
    shapes and dtypes (``where`` read it: NOTE [graphs traced for input shapes])."""
    trace = getattr(TRACED, "trace", None)
    types = static_dtypes([symbol])
    if trace is None or types is None:
        return None
    if trace["read"] is None:
        trace["read"], trace["read_dtype"] = where, True    # (export's refusal says dtype)
    return types[0]


def static_dtypes(symbols):
    """The dtypes of ``symbols`` (one output each) in the graph being traced, inferred from
    those of the inputs of the call tracing it, or None where one is not known."""
    trace = getattr(TRACED, "trace", None)
    if trace is None or any(len(s.list_outputs()) != 1 for s in symbols):
        return None
    # (every variable's dtype given, the inputs' or its own: MXNet's inference fills one
    # unknown with an op's default, a loop row's Embedding weight float32 where it is float64)
    group = mx.sym.Group(symbols)
    given = trace.get("dtypes", {})
    attributes = group.attr_dict()
    if any(name not in given and "__dtype__" not in attributes.get(name, {})
           for name in group.list_arguments() + group.list_auxiliary_states()):
        return None
    types = _inferred(symbols, given, "type")
    return None if not types or any(t is None for t in types) else list(types)
