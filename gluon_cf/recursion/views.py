"""Views of rows of NDArrays, the inputs and outputs of a schedule's group calls.

NOTE [views off the tape]
    ``MXNDArraySlice`` (``NDArray::SliceWithRecord`` in MXNet 1.9.1) parses a fake ``slice``
    operator's parameters (strings into a ``SliceParam``) whenever recording is on, and then
    ``Imperative::RecordOp`` records nothing when the sliced array has no autograd entry: for
    a group of a few operators (TreeRNN's cell) that parsing was about 4% of the planned run's
    thread. A view of an array on no tape is the same either way, so the planned run
    (recursion/planned_backward.py) makes its views of the tables, the uploaded arguments and
    the indices (arrays it created, never recorded) inside :class:`Unrecorded`.
"""
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


class Unrecorded:
    """Autograd's recording off, for views of arrays on no tape.
    See NOTE [views off the tape]."""

    __slots__ = ("recording",)

    def __enter__(self):
        recording = ctypes.c_int()
        check_call(_LIB.MXAutogradSetIsRecording(ctypes.c_int(0), ctypes.byref(recording)))
        self.recording = recording.value

    def __exit__(self, *_):
        check_call(_LIB.MXAutogradSetIsRecording(ctypes.c_int(self.recording),
                                                 ctypes.byref(ctypes.c_int())))
