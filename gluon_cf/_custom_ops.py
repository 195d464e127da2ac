"""User ``mx.operator.CustomOp`` operators inside traced bodies.

NOTE [user CustomOps]
    MXNet builds a ``Custom`` node's ``CustomOpProp`` from *every* attribute of the node: its
    ``creator`` callback calls ``prop_cls(**attrs)``. Tracing a body marks every node it creates
    with the hidden attribute ``__subgraph_name__`` (NOTE [closure capture]), so a user's prop,
    whose ``__init__`` takes its own parameters only, gets an unexpected keyword argument. The
    ``creator`` has no ``try``: the ``TypeError`` escapes a ctypes callback and the process dies
    with SIGSEGV (MXNet's own ``F.contrib`` ops crash the same way, and so does a user's
    ``AttrScope(ctx_group=...)`` around a ``Custom`` call).

    Hidden attributes (``__name__``-style keys) are never parameters of an operator (dmlc's
    parameter parsing skips them as well), so we give each registered prop class a subclass that
    drops them before calling the user's ``__init__``. Classes registered after ``import
    gluon_cf`` are wrapped by :func:`mx.operator.register`; classes registered before are
    rewired where MXNet keeps them, in the closure of their ``creator`` (reached through the
    ctypes thunk MXNet keeps alive in ``mx.operator._registry``), each time a body is traced.
"""
import collections
import ctypes
import gc
import threading

import mxnet as mx

from ._interrupts import defer_interrupts_in, guard_sigint

_next_key = [0]   # registry keys below this one were looked at
_lock = threading.Lock()
_original_register = mx.operator.register


def is_hidden(key):
    """Whether an attribute key is MXNet's hidden kind (``__name__``): never an op parameter."""
    return len(key) > 4 and key.startswith("__") and key.endswith("__")


def tolerant(prop_cls):
    """A subclass of ``prop_cls`` whose constructor ignores hidden attributes."""
    if getattr(prop_cls, "_gluon_cf_tolerant", False):
        return prop_cls

    def __init__(self, **kwargs):
        prop_cls.__init__(self, **{k: v for k, v in kwargs.items() if not is_hidden(k)})

    return type(prop_cls.__name__, (prop_cls,),
                {"__init__": __init__, "_gluon_cf_tolerant": True,
                 "__module__": prop_cls.__module__, "__qualname__": prop_cls.__qualname__})


def register(reg_name):
    """``mx.operator.register``, registering a prop class that tolerates hidden attributes."""
    do_register = _original_register(reg_name)

    def wrapped(prop_cls):
        do_register(tolerant(prop_cls))
        return prop_cls

    return wrapped


def rewire_registered():
    """Make every prop class registered so far tolerate hidden attributes (cheap when none is
    new). MXNet's registry is a dict keyed by a counter that its worker threads also add to (an
    entry per Custom node built), so it is read key by key, never iterated."""
    registry = mx.operator._registry
    if _next_key[0] >= registry.counter:
        return
    with _lock:
        end = registry.counter
        for key in range(_next_key[0], end):
            ref = registry.ref_holder.get(key)
            if ref is None:   # counted but not stored yet (MXNet stores it just after): retry
                end = key
                break
            creator = _creator_of(ref)
            if creator is None:
                continue
            cells = dict(zip(creator.__code__.co_freevars, creator.__closure__))
            cell = cells.get("prop_cls")
            if cell is not None:
                cell.cell_contents = tolerant(cell.cell_contents)
        _next_key[0] = end


def _creator_of(ref):
    """The Python ``creator`` behind a registered ctypes callback, or None for other entries."""
    thunks = getattr(ref, "_objects", None)
    if not isinstance(thunks, dict):
        return None
    for thunk in thunks.values():
        for obj in gc.get_referents(thunk):
            code = getattr(obj, "__code__", None)
            if code is not None and code.co_name == "creator" and "prop_cls" in code.co_freevars:
                return obj
    return None


mx.operator.register = register


# Our own operators' registration (NOTE [callbacks never take the process down] in node.py)

NOT_UTF8 = "\ufffd (gluon_cf: the spec attribute is not UTF-8 text)"
_creator_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                                 ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p),
                                 ctypes.POINTER(mx.base.MXCallbackList))
_guarded_creators: list = []   # alive as long as MXNet may call them: the process


def _guarded(creator):
    """MXNet's ``creator`` callback for our operators, given only the ``spec`` attribute, as
    UTF-8 (NOTE [callbacks never take the process down]): MXNet's own decodes every attribute
    as UTF-8 and passes them all as keyword arguments, outside any ``try``, so a file with a
    non-UTF-8 attribute or an attribute named ``self`` killed the process."""
    def guarded_creator(op_type, argc, keys, vals, ret):
        spec = next((vals[i] for i in range(argc) if keys[i] == b"spec"), None)
        if spec is not None:
            try:
                spec.decode("utf-8")
            except UnicodeDecodeError:
                spec = NOT_UTF8.encode("utf-8")
        keys = (ctypes.c_char_p * 1)(b"spec")
        vals = (ctypes.c_char_p * 1)(spec)
        return creator(op_type, 0 if spec is None else 1, keys, vals, ret)
    return guarded_creator


class _GuardedRegistration:
    """``mx.operator``'s ``_LIB`` while we register an operator: registers MXNet's creator
    callback wrapped by ``_guarded``."""

    def __init__(self, lib):
        self._lib = lib

    def __getattr__(self, name):
        return getattr(self._lib, name)

    def MXCustomOpRegister(self, name, creator):  # noqa: N802 - MXNet's C API name
        guarded = _creator_type(_guarded(creator))
        _guarded_creators.append((creator, guarded))
        return self._lib.MXCustomOpRegister(name, guarded)


def register_guarded(op_type, prop_class):
    """``mx.operator.register(op_type)(prop_class)``, MXNet's creator callback wrapped by
    ``_guarded``."""
    lib = mx.operator._LIB
    mx.operator._LIB = _GuardedRegistration(lib)
    try:
        mx.operator.register(op_type)(prop_class)
    finally:
        mx.operator._LIB = lib


# their callbacks: NOTE [no KeyboardInterrupt inside MXNet's callbacks] in _interrupts.py
defer_interrupts_in(_original_register, _guarded)


def write_like_assign(op, dst, req, value):
    """``op.assign(dst, req, value)`` (a ``CustomOp``'s output or input gradient): by
    ``value.copyto(dst)`` where assign's ``dst[:] = value`` is that same copy (plain NDArrays of
    one shape and dtype, req write or inplace), without MXNet's Python indexing around it
    (~0.2 ms of CPU per call, py-spy; five per TreeLSTM training batch in a node's backward)."""
    if req in ("write", "inplace") and type(value) is mx.nd.NDArray \
            and type(dst) is mx.nd.NDArray and value.handle is not dst.handle \
            and value.dtype == dst.dtype and value.shape == dst.shape:
        value.copyto(dst)
    else:
        op.assign(dst, req, value)


# Process-wide repairs of MXNet around Custom operators, made once when gluon_cf is imported.

# NOTE [exit with work pending]
#     A script that calls a hybridized block and exits without reading the output (or after an
#     error) leaves a node's forward queued or running on MXNet's custom-op worker thread. MXNet's
#     atexit handler (``mxnet.base._notify_shutdown``) then shuts the engine down under it, and
#     the node's forward, which itself pushes CachedOps and reads values, never completes: the
#     process hangs at exit (MXNet's own Custom operators only assign, so they do not). So
#     pending work is let finish just before MXNet's shutdown, inside its atexit handler
#     (``_LIB.MXNotifyShutdown``, which it looks up at call time, is ours), after every other
#     atexit handler registered since ``import mxnet``: one registered before ``import
#     gluon_cf`` that joins a daemon thread calling a hybridized block (a handler of our own,
#     run first, parked that thread: the join hung, review 29) gets its result, as with plain
#     MXNet. An error in that work was the unread output's to report; at exit it is dropped,
#     as MXNet drops it for its own operators.


#     Only a process in which gluon_cf gave MXNet's engine work that calls back into Python (a
#     node's operator, a remat node, an upload's deleter: :func:`engine_calls_us`) waits: a
#     daemon thread's backlog of plain operators (``mx.nd.dot`` of 600x600 arrays pushed for
#     0.2 s) held a script that merely imported gluon_cf 37 s at exit; plain MXNet drops it.
_engine_calls_us = [False]


def engine_calls_us():
    """Note that MXNet's engine may run gluon_cf's Python callbacks from now on (NOTE [exit
    with work pending])."""
    _engine_calls_us[0] = True


def _finish_pending_work():
    _EXITING.set()   # NOTE [daemon threads at exit]
    if _engine_calls_us[0]:
        _WAITING.set()
        try:
            mx.nd.waitall()
        except Exception:  # noqa: BLE001 - see the NOTE: nobody is left to read it
            pass
        _let_workers_release_their_last_operations()
        _WAITING.clear()
        _WAITED.set()
    _keep_callbacks_to_the_end()


# (a Ctrl-C that lands here waits: NOTE [no KeyboardInterrupt inside MXNet's callbacks])
defer_interrupts_in(_finish_pending_work)


def _shutting_down(notify_shutdown):
    def notify():
        _finish_pending_work()   # NOTE [exit with work pending]
        return notify_shutdown()
    return notify


# NOTE [daemon threads at exit]
#     atexit handlers run while daemon threads still run: one that keeps calling a hybridized
#     block (a training loop in a daemon thread) kept pushing work, and the ``waitall`` above
#     never returned: the process hung at exit (plain MXNet, having no such wait, exits); so
#     did one pushing plain MXNet operators (``mx.nd.dot`` or ``mx.np.dot`` in a loop, no
#     block: 3 runs of 3). Once MXNet's shutdown begins, a hybridized call from a thread
#     threading made, other than the main thread, waits until the process ends
#     (:func:`park_if_exiting`), as Python parks a daemon thread that asks for the interpreter
#     after finalization; an MXNet operator (``_imperative_invoke``, wrapped in
#     ``zero_size.py``; ``mx.np``'s through MXNet's FFI, wrapped below) waits only while that
#     ``waitall`` runs (:func:`park_while_waiting`). A user's atexit handler may wait for a
#     daemon thread's result (``thread.join()``, then ``asnumpy``), which plain MXNet computes:
#     parked for ever, it hung (review 28: an operator; review 29: a hybridized call, parked
#     by our atexit handler, which ran first); every atexit handler registered after ``import
#     mxnet`` now runs before the parking. MXNet's own threads (a node's forward, run on a
#     custom-operator worker: a ``_DummyThread``) go on, their work is what is waited.
_EXITING = threading.Event()
_WAITING = threading.Event()
_WAITED = threading.Event()


def _parkable():
    thread = threading.current_thread()
    return thread is not threading.main_thread() \
        and not isinstance(thread, threading._DummyThread)


def park_if_exiting():
    """Wait for the end of the process in a daemon thread calling a block at exit: NOTE
    [daemon threads at exit]. (Called before each hybridized call: in the main thread, it
    also guards its SIGINT handler if gluon_cf was imported in another one.)"""
    guard_sigint()
    if _EXITING.is_set() and _parkable():
        threading.Event().wait()


def park_while_waiting():
    """Wait, in a daemon thread pushing an MXNet operator, until gluon_cf's wait at exit is
    over: NOTE [daemon threads at exit]."""
    if _WAITING.is_set() and _parkable():
        _WAITED.wait()


def _parking(ffi_call):
    def call(self, *args):
        park_while_waiting()   # NOTE [daemon threads at exit]
        return ffi_call(self, *args)
    call.__doc__ = ffi_call.__doc__
    return call


_ffi_function = mx._ffi.function._FunctionBase
if _ffi_function.__module__ == "mxnet._ffi._ctypes.function":   # (a Cython build's is fixed)
    _ffi_function.__call__ = _parking(_ffi_function.__call__)


# NOTE [operations released after waitall]
#     MXNet's engine tells ``waitall`` that its last operation is done before the worker thread
#     that ran it frees the operation's closure, with the arrays it holds. When that closure
#     holds the last reference to a recorded output of a hybridized gluon_cf node (a script that
#     computed ``out.sum()`` outside ``autograd.record()``, whose ``backward()`` then failed, and
#     dropped ``out``), freeing it frees the node's Custom-operator state, whose destructor calls
#     back into Python: if the interpreter is finalizing by then, the callback cannot take the
#     GIL, its thread exits inside a C++ destructor, and the process aborts ("terminate called
#     without an active exception": 8 runs of 16; gdb shows an engine worker in OnComplete
#     freeing a PushFCompute closure's arrays, down to CustomParam's state deleter and
#     PyGILState_Ensure). A worker frees a closure before it takes its next operation: at exit,
#     the workers are given a few more operations, each waited for, so that the closures before
#     them are gone before Python finalizes (0 runs of 28 aborted after).
def _let_workers_release_their_last_operations():
    try:
        for _ in range(_ENGINE_WORKERS):
            done = [mx.nd.zeros((1,)) + k for k in range(_ENGINE_WORKERS)]
            for d in done:
                d.wait_to_read()
    except Exception:  # noqa: BLE001 - at exit: nobody is left to read it
        pass


# CPU worker threads MXNet's threaded engine may run an operation on (its normal, copy and
# priority workers, MXNET_CPU_WORKER_NTHREADS each, and 1 by default)
_ENGINE_WORKERS = 4


# NOTE [Custom operators alive at exit]
#     A recorded output of a hybridized gluon_cf node still alive when the script ends (``out``
#     at module level) keeps its Custom operator, whose ctypes callbacks MXNet holds only through
#     ``mx.operator._registry.ref_holder``. With a class defined in the script, ``__main__``'s
#     globals are freed by the interpreter's last garbage collection, which may clear the
#     operator's callbacks (a cycle) before the output: freeing the output then called a freed
#     callback, SIGSEGV at exit (review, session 19). At exit, the operators alive are given a
#     reference nothing releases: their callbacks outlive every array (the process's memory is
#     returned to the system anyway).
#     The same holds for every other ctypes callback C++ calls when it frees an array. The
#     interpreter's finalization sets the globals of every module still alive to None (mxnet's
#     before those imported before it), then collects what that freed: an array held in a
#     cycle reachable only from such a module (a suspended generator of a batched cond's split,
#     its frame holding the index it uploaded, after a failed call) was freed after
#     ``mxnet.ndarray.ndarray``'s DLPack deleter, SIGSEGV at exit (session 27: two tests in one
#     pytest process, 2 runs of 2). gluon_cf's uploads now use a deleter of their own (NOTE
#     [upload deleters at exit] in ``uploads.py``); MXNet's (``mx.nd.from_numpy``'s arrays: it
#     then reports an AttributeError, its body reading ``ctypes`` from its cleared globals, and
#     leaves the numpy array to the process's end) and its DLPack capsule destructor are kept
#     for ever too, with the callbacks of remat's recorded nodes (``remat_record._alive``,
#     passed to :func:`keep_to_the_end`).
_kept_to_the_end: list = []


def keep_to_the_end(obj):
    """Keep ``obj`` (holding ctypes callbacks C++ may call while freeing arrays) alive through
    the interpreter's finalization: NOTE [Custom operators alive at exit]."""
    _kept_to_the_end.append(obj)


def _keep_callbacks_to_the_end():
    holder = getattr(getattr(mx.operator, "_registry", None), "ref_holder", None)
    kept = list(_kept_to_the_end)
    if isinstance(holder, dict):
        kept += [holder] + list(holder.values())
    dlpack = mx.nd.ndarray
    kept += [getattr(dlpack, name) for name in ("dl_managed_tensor_deleter", "_c_dlpack_deleter")
             if hasattr(dlpack, name)]
    # A function object of our own: another library may have set argtypes on the one
    # ctypes.pythonapi caches for the process (``[c_void_p]``: this call would then raise).
    incref = ctypes.pythonapi["Py_IncRef"]
    incref.argtypes = [ctypes.py_object]
    for obj in kept:
        incref(obj)


mx.base._LIB.MXNotifyShutdown = _shutting_down(mx.base._LIB.MXNotifyShutdown)

# NOTE [concurrent shape inference]
#     MXNet's Custom-op shape callback writes the answer into fresh ``c_array_buf`` buffers and
#     keeps them alive only through ``infer_shape_entry._ref_holder``, one slot per graph node.
#     When two threads infer the same node at once (a block's first calls with new shapes from
#     several threads), the second call replaces the slot before C++ has copied the first
#     thread's answer, which then reads freed memory (shapes like [1446870432]). The callbacks
#     look ``c_array_buf`` up in ``mx.operator``'s globals at call time, so ours keeps the most
#     recent buffers alive a while longer; C++ copies them as soon as the callback returns.
_recent_buffers: collections.deque = collections.deque(maxlen=1 << 16)
_original_c_array_buf = mx.operator.c_array_buf


def _kept_c_array_buf(ctype, buf):
    array = _original_c_array_buf(ctype, buf)
    _recent_buffers.append(array)
    return array


mx.operator.c_array_buf = _kept_c_array_buf

# NOTE [tojson leaks the graph]
#     MXNet 1.9.1's ``Symbol.tojson()`` and ``Symbol.save(fname)`` (``remove_amp_cast=True``,
#     their default) copy the graph with ``MXSymbolRemoveAmpCast`` into a new C++ Symbol, save
#     that, and never free it: every call kept a whole copy of the graph, whose nodes share
#     their operators' parsed attributes, alive for the process (~1.2 kB a node; a 200-node
#     graph's 1,000 ``tojson()`` grew the process by 246 MiB). A Custom node's copy keeps its
#     ``CustomOpProp`` in MXNet's registry, and a gluon_cf node's prop holds its decoded node,
#     subgraphs and their per-thread CachedOps (NOTE [decoded nodes live as long as their
#     users] in graph/decoded.py): gluon_cf reads a graph's JSON when it traces, builds and
#     infers it, so each block built and deleted left its graphs behind. The copy is given to
#     a Symbol, which frees it; the text is MXNet's, byte for byte.
def _tojson(self, remove_amp_cast=True):
    if not remove_amp_cast:
        return _original_tojson(self, remove_amp_cast=False)
    return _amp_cast_removed(self).tojson(remove_amp_cast=False)


def _save(self, fname, remove_amp_cast=True):
    if not remove_amp_cast:
        return _original_save(self, fname, remove_amp_cast=False)
    return _amp_cast_removed(self).save(fname, remove_amp_cast=False)


def _amp_cast_removed(symbol):
    """``symbol``'s copy without ``amp_cast`` nodes, as a Symbol (which frees it)."""
    handle = mx.base.SymbolHandle()
    mx.base.check_call(mx.base._LIB.MXSymbolRemoveAmpCast(symbol.handle, ctypes.byref(handle)))
    return mx.sym.Symbol(handle)


_original_tojson, _original_save = mx.sym.Symbol.tojson, mx.sym.Symbol.save
_tojson.__doc__, _save.__doc__ = _original_tojson.__doc__, _original_save.__doc__
mx.sym.Symbol.tojson, mx.sym.Symbol.save = _tojson, _save
