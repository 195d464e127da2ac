"""Handles of their own for arrays that need no gradient, recorded from several threads.

NOTE [inputs shared between threads]
    MXNet 1.9.1 keeps an array's autograd history on the array's handle: recording an
    operator on an array in no graph attaches a fresh variable node to its handle
    (``Imperative::RecordOp``), and every ``backward``/``grad`` without ``retain_graph``
    empties the nodes of the graph it walked that need no gradient (``AGInfo::Clear``), with
    no lock. Two threads recording on one array share that node: one thread's backward
    empties it under the other's recording or backward - "The any container is empty
    requested=...AGInfo", "shape_num_unknown_nodes (8 vs. 0)", or a segmentation fault, "pure
    virtual method called", "double free". Two cases:

    * two threads training hybridized gluon_cf nets on the same batch arrays (4 runs in 6
      failed; plain Gluon fails alike, eager or hybridized): a recorded call of a block with
      gluon_cf nodes (``hybrid.py``) passes its inputs through :func:`own_handles`;
    * a remat loop's backward, on one of MXNet's Custom-operator worker threads, recording its
      steps again while other remat loops' backwards (other worker threads) or the user's
      ``backward`` walk graphs that read the same array from a closure or a global (an
      embedding table ``take``-n in nested remat loops: up to 1 call in 6 failed under load):
      the recomputation runs under :func:`private_leaves`, which hands every operator such an
      input as a handle of its own (through ``zero_size``'s operator call; the outputs it made
      are remembered meanwhile, so that reading them again asks MXNet nothing).

    An array needing no gradient is one in no graph, or a graph's leaf that asks none (MXNet
    names those variables "null<n>"). Its own handle is ``detach()``: the same memory, no
    history, so the variable node that recording makes is this thread's alone. Nothing
    changes but the handle: no gradient ever reached such an array. Arrays with gradients
    (``attach_grad``) and outputs of recorded operators are passed as they are. The user's own
    operators on a shared array outside gluon_cf stay MXNet's.
"""
import contextlib
import ctypes
import threading

import mxnet as mx
from mxnet.base import _LIB, SymbolHandle, check_call

__all__ = ["own_handles", "private_leaves", "own_inputs", "produced", "active",
           "needs_no_gradient"]

_state = threading.local()   # .cache: {handle value: (array, its own handle)} in private_leaves


def _needs_no_gradient(array):
    # MXNet's C calls themselves: ``autograd.get_symbol`` builds a Python exception for an
    # array in no graph (~20 us), and a remat recomputation asks for every array it reads.
    symbol = SymbolHandle()
    if _LIB.MXAutogradGetSymbol(array.handle, ctypes.byref(symbol)) != 0:
        return True   # in no graph
    try:
        name, success = ctypes.c_char_p(), ctypes.c_int()
        check_call(_LIB.MXSymbolGetName(symbol, ctypes.byref(name), ctypes.byref(success)))
        return bool(success.value) and (name.value or b"").startswith(b"null")
    finally:
        check_call(_LIB.MXSymbolFree(symbol))


needs_no_gradient = _needs_no_gradient   # (index_guard.py: no guard where none is asked)


def own_handles(value):
    """``value`` (an array, or lists/tuples of them) with each array that needs no gradient
    replaced by a handle of its own (NOTE [inputs shared between threads])."""
    if isinstance(value, (list, tuple)):
        return type(value)(own_handles(v) for v in value)
    if isinstance(value, mx.nd.NDArray) and _needs_no_gradient(value):
        return value.detach()
    return value


@contextlib.contextmanager
def private_leaves():
    """While inside (this thread), operators recorded get inputs needing no gradient as
    handles of their own, one per array (NOTE [inputs shared between threads])."""
    outer = getattr(_state, "cache", None)
    _state.cache = {}
    try:
        yield
    finally:
        _state.cache = outer


def active():
    return getattr(_state, "cache", None) is not None


def own_inputs(ndargs):
    """An operator's inputs under :func:`private_leaves` (called by the operator call; an
    operator the body runs paused gets the same handles: no gradient either way)."""
    cache = _state.cache
    result = []
    for a in ndargs:
        if not isinstance(a, mx.nd.NDArray):
            result.append(a)
            continue
        kept = cache.get(a.handle.value)
        if kept is None or kept[0] is not a:
            # (``a`` kept alive in the cache: its address is not reused meanwhile)
            kept = cache[a.handle.value] = (a, a.detach() if _needs_no_gradient(a) else a)
        result.append(kept[1])
    return result


def produced(out):
    """An operator's outputs under :func:`private_leaves`: recorded ones, passed as they are
    (without asking MXNet each time they are read)."""
    cache = _state.cache
    for o in out if isinstance(out, (list, tuple)) else [out]:
        if isinstance(o, mx.nd.NDArray):
            cache[o.handle.value] = (o, o)
