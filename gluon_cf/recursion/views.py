"""Views of rows of NDArrays, the inputs and outputs of a schedule's group calls."""
import ctypes

from mxnet.base import _LIB, NDArrayHandle, check_call, mx_uint
from mxnet.ndarray import NDArray


def rows(array, start, stop):
    """Rows ``start:stop`` of ``array`` as a view: ``NDArray._slice`` without its Python
    bounds handling, which asks MXNet for the shape (a C call and a tuple) on every view, a
    few per group call in the forward and one per group in the planned backward;
    MXNDArraySlice checks the bounds itself ("Slice end index out of range",
    tests/test_schedule_tables.py), but not a negative start, which mx_uint wraps into a view
    of the memory before the array (a review found it)."""
    if start < 0:
        raise IndexError("gluon_cf schedule: rows %d:%d of an array of %d rows"
                         % (start, stop, array.shape[0]))
    handle = NDArrayHandle()
    check_call(_LIB.MXNDArraySlice(array.handle, mx_uint(start), mx_uint(stop),
                                   ctypes.byref(handle)))
    return NDArray(handle=handle, writable=array.writable)
