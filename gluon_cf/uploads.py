"""Host arrays handed to MXNet without a round trip through its engine.

NOTE: [Uploads]
Host arrays (a mini-batch's forest, a level's indices, the labels) go to MXNet by `to_nd`:
`mx.nd.from_numpy` of a fresh copy, zero-copy, not `mx.nd.array`. The latter writes into a new
NDArray by `SyncCopyFromCPU`, whose `WaitToWrite` pushes an empty operation to the engine and
waits for it: a round trip through the engine's threads per array, 170-240 us of CPU here and
~0.5 ms of wall time on a loaded machine (py-spy), so the benchmark measured MXNet's upload
path rather than the methods (d uploads four arrays per level, e four per mini-batch, g none),
and the training loop of gluon_cf.models.train paid it five times per mini-batch. The copy
keeps the caller's array writable (`from_numpy` marks the array it is given read-only) and
costs a few microseconds.

NOTE [lean DLPack uploads]
MXNet 1.9.1's `mx.nd.from_numpy` builds its DLPack tensor through numpy's `ctypes` helper
objects and `str(dtype)` on every call: ~43 us of CPU per array, ~0.3 ms per batch of the
benchmark's e at batch 25 (four `to_nd` and three schedule uploads, 3% of a TreeRNN inference
batch). :func:`from_numpy` hands MXNet the same `DLManagedTensor` (the array's data pointer, its
dtype, its shape, no strides, the same deleter releasing the reference taken on the array)
filled directly: ~14 us. `MXNDArrayFromDLPackEx` with a transient handle copies the structure
and the shape before it returns (`TBlob(DLTensor)`), so the shape buffer needs to live only
through the call, as in MXNet's own. An array it does not cover (a dtype DLPack has no code
for here, not C-contiguous) goes through `mx.nd.from_numpy`, which raises as it always did.

NOTE [upload deleters at exit]
MXNet frees an uploaded array by calling the deleter of its `DLManagedTensor`, a ctypes callback,
whenever the last reference goes, which may be in the interpreter's last garbage collection. MXNet's
own deleter (`dl_managed_tensor_deleter`) is a global of `mxnet.ndarray.ndarray`: finalization
sets that module's globals to None, which freed the callback (SIGSEGV, or another callback called,
when an array outlived it: NOTE [Custom operators alive at exit] in ``_custom_ops.py``), and its
body reads `ctypes` from those globals. Uploads here are released by :data:`_RELEASE`, which reads
no module global (the array's address goes straight to a `Py_DecRef` of its own) and is given a
reference nothing releases: it works for as long as the process runs.
"""
import ctypes

import mxnet as mx
import numpy as np
from mxnet.base import _LIB, NDArrayHandle, check_call
from mxnet.ndarray import ndarray as _ndarray

from ._custom_ops import engine_calls_us
from ._interrupts import defer_interrupts_in

__all__ = ['to_nd', 'from_numpy']

_DL_TYPES = {np.dtype(name): code for name, code in _ndarray.DLDataType.TYPE_MAP.items()}
_SHAPE_TYPES: dict = {}   # ndim -> ctypes.c_int64 * ndim
_CPU = _ndarray.DLContext(1, 0)
# A function object of our own (indexing makes a new one; attribute access returns the one
# ctypes.pythonapi caches for the whole process): its argtypes neither change how other code's
# ``ctypes.pythonapi.Py_IncRef(c_void_p(address))`` counts, nor are changed by that code.
_incref = ctypes.pythonapi["Py_IncRef"]
_incref.argtypes = [ctypes.py_object]
_decref = ctypes.pythonapi["Py_DecRef"]
_decref.argtypes = [ctypes.c_void_p]
_decref.restype = None


def _release(managed, decref=_decref):
    """The uploads' deleter: releases the reference taken on the array (NOTE [upload deleters
    at exit]: no module global read, ``decref`` bound here)."""
    decref(managed.contents.manager_ctx)


_RELEASE = _ndarray.DeleterFunc(_release)
defer_interrupts_in(_release)   # NOTE [no KeyboardInterrupt inside MXNet's callbacks]
_incref(_RELEASE)   # for the whole process: NOTE [upload deleters at exit]


def from_numpy(array):
    """``mx.nd.from_numpy(array, zero_copy=True)`` (CPU; ``array`` becomes read-only and is
    kept alive by the NDArray) without its per-call overhead (NOTE [lean DLPack uploads])."""
    engine_calls_us()   # (its deleter, maybe on an engine thread)
    dtype = _DL_TYPES.get(array.dtype)
    if dtype is None or not array.flags.c_contiguous:
        return mx.nd.from_numpy(array, zero_copy=True)
    array.flags.writeable = False
    managed = _ndarray.DLManagedTensor()
    tensor = managed.dl_tensor
    tensor.data = array.__array_interface__["data"][0]
    tensor.ctx = _CPU
    ndim = tensor.ndim = array.ndim
    tensor.dtype = dtype
    shape_type = _SHAPE_TYPES.get(ndim)
    if shape_type is None:
        shape_type = _SHAPE_TYPES[ndim] = ctypes.c_int64 * ndim
    tensor.shape = shape_type(*array.shape)   # (kept by ``managed`` through the call)
    _incref(array)   # released by the deleter when MXNet frees the array
    managed.manager_ctx = id(array)
    managed.deleter = _RELEASE
    handle = NDArrayHandle()
    check_call(_LIB.MXNDArrayFromDLPackEx(ctypes.byref(managed), True, ctypes.byref(handle)))
    return mx.nd.NDArray(handle=handle)


def to_nd(values, dtype='float32'):
    """An NDArray (CPU) holding a copy of host `values` (NOTE: [Uploads]); float32 as
    `mx.nd.array`'s default."""
    return from_numpy(np.array(values, dtype=dtype))
