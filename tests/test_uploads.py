"""gluon_cf.uploads.from_numpy (NOTE [lean DLPack uploads]) against MXNet's own
``mx.nd.from_numpy``: the same values, dtype and shape for every dtype DLPack codes here,
the array kept alive and read-only, and what it does not cover handed to MXNet's."""
import ctypes
import gc
import sys

import mxnet as mx
import numpy as np
import pytest

from gluon_cf.uploads import from_numpy, to_nd


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64",
                                   "uint8", "bool"])
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (0, 3), ()])
def test_same_as_mxnets(dtype, shape):
    host = (np.arange(int(np.prod(shape)), dtype=np.int64) % 7).astype(dtype).reshape(shape)
    got = from_numpy(host.copy())
    want = mx.nd.from_numpy(host.copy(), zero_copy=True)
    assert got.shape == want.shape == shape
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.asnumpy(), want.asnumpy())
    np.testing.assert_array_equal(got.asnumpy(), host)


def test_array_kept_alive_and_read_only():
    host = np.arange(1000, dtype=np.float32)
    got = from_numpy(host)
    assert not host.flags.writeable   # as mx.nd.from_numpy marks it
    del host
    gc.collect()
    [np.ones(1000, np.float32) * 7 for _ in range(50)]   # reuse of freed memory shows
    np.testing.assert_array_equal(got.asnumpy(), np.arange(1000, dtype=np.float32))
    np.testing.assert_array_equal((got + 1).asnumpy(), np.arange(1, 1001, dtype=np.float32))


def test_reference_released_with_the_ndarray():
    host = np.arange(10, dtype=np.int32)
    before = __import__("sys").getrefcount(host)
    got = from_numpy(host)
    assert __import__("sys").getrefcount(host) == before + 1
    del got
    mx.nd.waitall()
    gc.collect()
    assert __import__("sys").getrefcount(host) == before


def test_not_covered_goes_to_mxnets():
    strided = np.arange(20, dtype=np.float32)[::2]
    with pytest.raises(ValueError, match="c-contiguous"):
        mx.nd.from_numpy(strided, zero_copy=True)
    with pytest.raises(ValueError, match="c-contiguous"):
        from_numpy(strided)
    with pytest.raises(ValueError, match="not supported"):
        from_numpy(np.arange(3, dtype=np.int16))


def test_to_nd_copies():
    values = [[1, 2], [3, 4]]
    got = to_nd(values)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.asnumpy(), np.array(values, np.float32))
    host = np.arange(4.0)
    to_nd(host, dtype="float64")
    assert host.flags.writeable   # the caller's array untouched


def test_python_apis_function_shared_by_the_process_left_alone():
    """Review (session 21): ``from_numpy`` set ``argtypes`` on ``ctypes.pythonapi.Py_IncRef``,
    the one function object ctypes hands every caller: after ``import gluon_cf``, another
    library's ``Py_IncRef(c_void_p(id(x)))`` counted the c_void_p, not ``x`` (a silent
    refcount error), and a library setting ``argtypes = [c_void_p]`` made from_numpy raise."""
    shared = ctypes.pythonapi.Py_IncRef
    assert shared.argtypes is None   # not set by gluon_cf's import
    x = object()
    before = sys.getrefcount(x)
    shared(ctypes.c_void_p(id(x)))
    assert sys.getrefcount(x) == before + 1
    ctypes.pythonapi.Py_DecRef(ctypes.c_void_p(id(x)))
    shared.argtypes = [ctypes.c_void_p]   # as another library may
    try:
        host = np.arange(5, dtype=np.float32)
        before = sys.getrefcount(host)
        got = from_numpy(host)
        assert sys.getrefcount(host) == before + 1   # the NDArray's
        np.testing.assert_array_equal(got.asnumpy(), np.arange(5))
        del got   # released by the uploads' own deleter (NOTE [upload deleters at exit])
        mx.nd.waitall()
        assert sys.getrefcount(host) == before
        assert ctypes.pythonapi.Py_DecRef.argtypes is None
    finally:
        shared.argtypes = None


def test_exit_guard_independent_of_the_shared_py_incref():
    """Review (session 21): NOTE [Custom operators alive at exit]'s guard called the shared
    ``ctypes.pythonapi.Py_IncRef``: with ``argtypes = [c_void_p]`` set by another library it
    raised at exit ("Exception ignored in atexit callback") and kept no operator alive."""
    from gluon_cf import _custom_ops
    holder = mx.operator._registry.ref_holder
    shared = ctypes.pythonapi.Py_IncRef
    shared.argtypes = [ctypes.c_void_p]   # as another library may
    try:
        before = sys.getrefcount(holder)
        _custom_ops._keep_callbacks_to_the_end()   # (a reference kept for ever, as at exit)
        assert sys.getrefcount(holder) == before + 1
    finally:
        shared.argtypes = None
