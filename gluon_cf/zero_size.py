"""Zero-size arrays in the eager bodies of gluon_cf's ops, computed as their graphs compute them.

NOTE [eager zero-size values]
    Hybridized, an operator whose every input is zero-size runs unrecorded (NOTE [zero-size
    calls] in ``graph/cached_graph.py``): what it computes (a sum over no rows) depends on no
    element of anything, so its gradient is zero, and MXNet 1.x's backward cannot pass through a
    zero-size array at all. Eagerly, a body of an op (foreach's body, while_loop's cond and func,
    the branch cond runs) is the user's Python, each MXNet operator recorded as it runs, and the
    same body made backward fail: "Shape dim size cannot be a negative value -1", raised
    asynchronously at the next read of a gradient, naming no line of the user's (the body
    ``lambda r, s: (r, s + F.contrib.boolean_mask(x, m).sum())`` with a mask that keeps no row
    worked hybridized and not eagerly). So while gluon_cf runs an op's body eagerly
    (:func:`eager_body`, per thread), MXNet's generated operators run one whose every array input is
    zero-size unrecorded, as the graph does: eager and hybridized give the same values and
    gradients; and an operator that refuses a zero-size input (scalar arithmetic, concat with other
    rows) is a ZeroSizeError naming it and the user's line, as hybridized (MXNet's own message named
    no line of the user's). Outside those bodies MXNet's eager code runs as MXNet runs it (plain
    ``boolean_mask(x, m).sum()`` under autograd fails at backward there too); the check costs a
    thread-local read per operator outside them.
"""
import contextlib
import sys
import threading

import mxnet as mx
from mxnet.ndarray import register as _register

from .errors import ZeroSizeError, no_element_error, note_no_element
from .operators import (CRASH_DETAIL, crashing_zero_size, reshape_to_another_size,
                        reshaped_shape, user_location)
from . import shared_handles
from ._custom_ops import park_while_waiting

__all__ = ["eager_body"]

_state = threading.local()
_original_invoke = _register._imperative_invoke


def _invoke(handle, ndargs, *rest):
    """MXNet's ``_imperative_invoke`` for its generated NDArray operators: inside an eager
    body under autograd, an operator of only zero-size inputs runs unrecorded, and one that
    refuses a zero-size input is a ZeroSizeError at the user's line (NOTE above); so is a
    ``boolean_mask`` of 1-D data keeping nothing (NOTE [a one-dimensional result of no
    element] in ``graph/partitioned.py``)."""
    park_while_waiting()   # NOTE [daemon threads at exit]
    if shared_handles.active():   # See NOTE [inputs shared between threads]
        out = _invoke_unshared(handle, shared_handles.own_inputs(ndargs), *rest)
        shared_handles.produced(out)
        return out
    return _invoke_unshared(handle, ndargs, *rest)


def _invoke_unshared(handle, ndargs, *rest):   # (called by _invoke: the operator is 2 up)
    if not getattr(_state, "depth", 0) or not ndargs:
        if len(ndargs) == 2 and getattr(handle, "value", handle) == _boolean_mask_handle() and \
                0 in ndargs[1].shape:
            raise _mask_of_no_element(ndargs)
        return _original_invoke(handle, ndargs, *rest)
    frame = sys._getframe(2)       # MXNet's generated function: the op (past wrappers of
    while frame.f_code.co_name == "_invoke" and frame.f_back is not None:   # _invoke's)
        frame = frame.f_back
    op = frame.f_code.co_name
    if op in ("reshape", "Reshape") and rest:   # NOTE [a reshape to another size]
        wrong = reshape_to_another_size(ndargs[0].shape, reshaped_shape(
            dict(zip(rest[0], rest[1])), ndargs[0].shape))
        if wrong is not None:
            where = user_location()
            raise ValueError("gluon_cf: reshape%s: %s" % (" at %s" % where if where else "",
                                                          wrong))
    empty = [k for k, a in enumerate(ndargs) if 0 in shape_or_no_element(a)]
    crashing = crashing_zero_size(op, [a.shape for a in ndargs]) if empty else []
    if crashing:
        raise _refused(op, user_location(),
                       [(k, ndargs[k].shape) for k in crashing], CRASH_DETAIL)
    try:
        if empty and len(empty) == len(ndargs) and mx.autograd.is_recording():
            with mx.autograd.pause(train_mode=mx.autograd.is_training()):
                return _original_invoke(handle, ndargs, *rest)
        out = _original_invoke(handle, ndargs, *rest)
        outs = out if isinstance(out, (list, tuple)) else [out]
        if not empty and op not in _VALUE_SHAPED and any(0 in o.shape for o in outs):
            # (NOTE [zero-size values computed inside a graph] in graph/cached_graph.py): read
            # here, MXNet's failure to compute it would surface later, naming nothing
            try:
                for o in outs:
                    o.wait_to_read()
            except mx.MXNetError:
                raise _made(op, user_location(), [a.shape for a in ndargs]) from None
        if op == "boolean_mask":
            try:
                out.shape   # noqa: B018 - read for MXNet's error
            except mx.MXNetError:
                # raised where it is used: a result never used (a cond's branch not taken)
                # is no error, as in MXNet
                note_no_element(out.handle.value, 
                    "gluon_cf: boolean_mask%s kept no element of its 1-D input (shape %s) "
                    "in an op's body run eagerly: MXNet 1.x cannot hold a one-dimensional "
                    "array of no element (its legacy shapes read (0,) as unknown). Give the "
                    "data a trailing axis (x.reshape((-1, 1)), then (0, 1) rows are possible) "
                    "or guard the call with gluon_cf.cond on the mask's sum"
                    % (" at %s" % user_location() if user_location() else "",
                       ndargs[0].shape), user_location() is not None)
        return out
    except mx.MXNetError as err:
        if not empty:
            raise
        raise _refused(op, user_location(), [(k, ndargs[k].shape) for k in empty], err) \
            from None


def shape_or_no_element(array):
    """``array.shape``; the ZeroSizeError of using a boolean_mask's 1-D result of no element
    (:func:`errors.note_no_element`) instead of MXNet's "Shape is unknown"."""
    try:
        return array.shape
    except mx.MXNetError:   # (NOTE [a one-dimensional result of no element])
        error = no_element_error(array.handle.value)
        if error is None:
            raise
        raise error from None


# The generated functions of the operators whose output shape depends on values: a zero-size
# result of theirs is computed (a boolean_mask keeping no row)
_VALUE_SHAPED = {"boolean_mask", "nonzero", "unique"}


def _made(op, where, shapes):
    return ZeroSizeError(
        "gluon_cf: %s%s computes a zero-size array from inputs of shapes %s in an op's body "
        "run eagerly; MXNet 1.x reads a 0 in a shape as an unknown size and cannot compute it "
        "(\"Check failed: delay_alloc\", at the next read), nor its backward. Guard the "
        "computation with gluon_cf.cond on the number of rows, or keep at least one row"
        % (op, " at %s" % where if where else "", ", ".join(str(s) for s in shapes)),
        located=where is not None)


# NOTE [a mask of no element]
#     MXNet 1.9.1's boolean_mask ends the process ("terminate called without an active
#     exception") when its mask has no element (data of no row), eagerly as in a graph. A
#     converted ``for r in F.contrib.boolean_mask(x, m):`` runs it eagerly outside any op's
#     body, on a batch of no row, so that check is made for every eager call (a comparison of
#     the operator's handle): a ZeroSizeError at the user's line, as a graph refuses it
#     (CRASHES_ON_ZERO_SIZE in operators.py).
_MASK_HANDLE: list = []   # (the operator handle, found once)


def _boolean_mask_handle():
    if not _MASK_HANDLE:
        import ctypes
        from mxnet.base import _LIB, OpHandle, c_str, check_call
        found = OpHandle()
        check_call(_LIB.NNGetOpHandle(c_str("_contrib_boolean_mask"), ctypes.byref(found)))
        _MASK_HANDLE.append(found.value)
    return _MASK_HANDLE[0]


def _mask_of_no_element(ndargs):
    where = user_location()
    return ZeroSizeError(
        "gluon_cf: boolean_mask%s was given a mask of no element (data of shape %s, mask of "
        "shape %s): %s. Skip the call for a batch of no row, or guard it with gluon_cf.cond "
        "on the number of rows" % (" at %s" % where if where else "", ndargs[0].shape,
                                   ndargs[1].shape, CRASH_DETAIL), located=where is not None)


def _refused(op, where, empty, err):
    detail = next((line.strip() for line in str(err).splitlines()
                   if line.strip().startswith("MXNetError") or "Check failed" in line),
                  str(err).strip().splitlines()[-1] if str(err).strip() else "").rstrip(".")
    return ZeroSizeError(
        "gluon_cf: %s%s was given a zero-size array (%s) in an op's body run eagerly; MXNet "
        "1.x reads a 0 in a shape as an unknown size, and this operator cannot compute on it "
        "(%s). Guard the computation with gluon_cf.cond on the number of rows, or keep at "
        "least one row" % (op, " at %s" % where if where else "",
                           "; ".join("input %d of shape %s" % e for e in empty), detail),
        located=where is not None)


@contextlib.contextmanager
def eager_body():
    """While an op runs the user's body eagerly (NOTE [eager zero-size values])."""
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1


def eagerly(fn, *args):
    """``fn(*args)`` as an eager body (:func:`eager_body`)."""
    with eager_body():
        return fn(*args)


_register._imperative_invoke = _invoke
