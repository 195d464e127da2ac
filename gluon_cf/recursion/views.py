"""Views of rows of NDArrays, the inputs and outputs of a schedule's group calls.

NOTE [views off the tape]
    ``MXNDArraySlice`` (``NDArray::SliceWithRecord`` in MXNet 1.9.1) parses a fake ``slice``
    operator's parameters (strings into a ``SliceParam``) whenever recording is on, and then
    ``Imperative::RecordOp`` records nothing when the sliced array has no autograd entry: for
    a group of a few operators (TreeRNN's cell) that parsing was about 4% of the planned run's
    thread. A view of an array on no tape is the same either way, so the planned run
    (recursion/planned_backward.py) makes its views of the tables, the uploaded arguments and
    the indices (arrays it created, never recorded) inside :class:`Unrecorded`.

NOTE [group calls on raw views]
    An inference group call of an ahead-of-time schedule (a sized CachedOp, NOTE [padded
    rows] in recursion/value_graphs.py) reads two or three views (its arguments' rows, each
    call site's indices) and writes one per output: as NDArrays, each view is a Python object
    made and deleted (``NDArray.__init__``, ``__del__`` freeing the handle), and
    ``CachedOp.__call__`` builds two handle arrays through ``c_handle_array``, casts and
    keyword handling, around ~25 us of MXNet's own call: about a third of a TreeRNN group's
    host time (cProfile: 56 views per batch of 25 trees). :func:`call_on_rows` makes the
    views as bare handles (``MXNDArraySlice``, the same view, bounds checked by MXNet as in
    :func:`rows`), calls ``MXInvokeCachedOpEx`` with the given outputs as the wrapper does,
    and frees the handles after the call: MXNet's operators pushed by the call hold the
    arrays' memory themselves, as when a Python view is collected right after a call. Only
    where nothing is recorded (MXNDArraySlice records a slice while recording is on).
"""
import ctypes

from mxnet.base import _LIB, NDArrayHandle, check_call, mx_uint
from mxnet.ndarray import NDArray

_HANDLES: dict = {}   # n -> ctypes.c_void_p * n


def rows(array, start, stop):
    """Rows ``start:stop`` of ``array`` as a view: ``NDArray._slice`` without its Python
    bounds handling, which asks MXNet for the shape (a C call and a tuple) on every view, a
    few per group call in the forward and one per group in the planned backward;
    MXNDArraySlice checks the bounds itself ("Slice end index out of range",
    tests/test_schedule_tables.py), but not a negative start, which mx_uint wraps into a view
    of the memory before the array (a review found it)."""
    return NDArray(handle=_view_handle(array, start, stop), writable=array.writable)


def _view_handle(array, start, stop):
    """A new handle of rows ``start:stop`` of ``array`` (freed by its owner): the bounds as
    :func:`rows` says."""
    if start < 0:
        raise IndexError("gluon_cf schedule: rows %d:%d of an array of %d rows"
                         % (start, stop, array.shape[0]))
    handle = NDArrayHandle()
    check_call(_LIB.MXNDArraySlice(array.handle, mx_uint(start), mx_uint(stop),
                                   ctypes.byref(handle)))
    return handle


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


def call_on_rows(op, inputs, outputs):
    """``op(*inputs, out=outputs)`` for an ``mx.nd.CachedOp`` ``op`` outside recording, where
    an input or output may be ``(array, start, stop)``: rows ``start:stop`` of ``array``, as a
    bare view handle freed after the call. See NOTE [group calls on raw views]."""
    made = []
    try:
        handles = []
        for group in (inputs, outputs):
            kind = _HANDLES.get(len(group))
            if kind is None:
                kind = _HANDLES[len(group)] = ctypes.c_void_p * len(group)
            array = kind()
            for k, value in enumerate(group):
                if type(value) is tuple:
                    view = _view_handle(*value)
                    made.append(view)
                    array[k] = view.value
                else:
                    array[k] = value.handle.value
            handles.append(array)
        count = ctypes.c_int(len(outputs))
        written = ctypes.cast(handles[1], ctypes.POINTER(NDArrayHandle))
        stypes = ctypes.POINTER(ctypes.c_int)()
        check_call(_LIB.MXInvokeCachedOpEx(op.handle, ctypes.c_int(len(inputs)), handles[0],
                                           ctypes.byref(count), ctypes.byref(written),
                                           ctypes.byref(stypes)))
    finally:
        for view in made:
            check_call(_LIB.MXNDArrayFree(view))
