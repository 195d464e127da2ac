"""Arrays that escape an eager remat body (NOTE [arrays escaping a remat body]).

NOTE [arrays escaping a remat body]
    An eager remat body runs without the history its arrays would have with ``remat=False``: a
    recursive call's body runs paused (NOTE [rematerialised recursive calls]) and a loop's step
    runs recorded from detached states (NOTE [rematerialisation]). What the body returns is
    recorded again as the outputs of the call's or loop's autograd node; an array that leaves
    the body another way (appended to an outer list, stored on an attribute, in a dict or a
    global, a view of such an array or of a result, a result also stored elsewhere: the
    machinery hands back a recorded copy, not that object) would give a loss using it a
    silently wrong gradient (a bushy tree's was 6.5 off). So every NDArray created in this
    thread while a body runs is watched (:class:`Watch`): every NDArray, views included
    (``_at``, ``_slice``, ``reshape``, ``detach``, ``copy``), is made by
    ``NDArrayBase.__init__`` and freed by its ``__del__`` (mxnet/_ctypes/ndarray.py, used by
    the installed MXNet 1.9.1, whose wheel has no Cython module), which are wrapped only while
    a remat body runs (:func:`hooks`). An NDArray takes no weak reference, so the watch keeps
    ids, removed by ``__del__``: CPython frees a body's locals when it returns, so an id still
    there once the machinery dropped what it keeps (the body's results after copying them;
    the arguments, results and saved results of the nested calls it made; views, made by
    gluon_cf, of what a recorded remat loop in it holds: :func:`aliases`) is an array that
    outlives the body. Before calling it an escape, garbage cycles are collected (a frame held
    by a traceback, a local function referring to itself), generation by generation, only on
    this path. Then the forward raises, naming the line of the user's code that created the
    array (the first frame outside MXNet and gluon_cf, found when the array is created: ~1 us;
    code run by ``exec`` or ``python -c``, file ``<string>``, is MXNet's generated operators
    only in MXNet's modules)
    and the fixes: return it, compute it outside the body, ``.detach()`` it, or remat=False.
    Writing history into an array made outside the body (``buf[t] = h``, ``h.copyto(buf)``, an
    ``out=``) is the same escape, found by the operator call (``_imperative_invoke``, wrapped
    too) when the user's line calls it directly.

    What escapes harmlessly, because it would carry no history with ``remat=False`` either:

    * ``x.detach()``, ``x.grad``, a fresh ``mx.nd.empty``/``array`` and Gluon's parameter
      storage (made in ``gluon/parameter.py`` or ``initializer.py``: deferred initialisation
      in a body), found by the code that made them;
    * an array marked with ``attach_grad`` (a leaf: its gradient goes to its own buffer);
    * the result of an operator all of whose array inputs are such arrays made in the body,
      none a marked leaf (a leaf passes its gradient on: ``(w ** 2).sum()`` of a weight
      initialised in the body has one), or that has none (``mx.nd.zeros``, ``ones``,
      ``arange``), and views of such arrays (``reshape``, ``x[1]``, ``x[1:2]``: made by the C
      API, found by the creating frame's ``self``).

    Anything else escaping is refused, integer arrays too: MXNet 1.9.1 carries a gradient
    through ``astype`` to an integer type and back (Cast's backward casts the head gradient),
    so an integer array computed from a float one is not provably without a gradient. Arrays
    made outside the body count as possibly recorded (knowing would take ``get_symbol`` per
    operator input), so ``n + 1`` of an index argument kept outside is refused: ``.detach()``
    it. Not watched: a while_loop's ``cond`` (its value steers the loop; it is not
    differentiated), a user's ``autograd.Function`` writing into its inputs, and recomputations
    in backward (the forward ran the same code and was watched). Only under recording: remat
    does nothing otherwise.
"""
import contextlib
import ctypes
import gc
import os
import sys
import threading

import mxnet as mx
from mxnet.base import _LIB, check_call
from mxnet.ndarray import ndarray as _nd_module, register as _register

from .errors import EscapedArrayError  # noqa: F401 (remat_escapes.EscapedArrayError)
from .operators import _USER_DIRS   # gluon_cf's models and benchmarks: the user's code
from .operators import is_mxnet_module, is_random_op

_Base = mx.nd.NDArray.__mro__[1]   # NDArrayBase (mxnet/_ctypes/ndarray.py)
_base_init, _base_del = _Base.__init__, _Base.__del__
_base_invoke = _register._imperative_invoke

_state = threading.local()   # .watch: the innermost running Watch; .clean: see _invoke
_owner: dict = {}            # id(array) -> the dict of the Watch that saw it made
_lock = threading.Lock()
# Held while Watch.escaped turns ids back into arrays and by _del while it forgets one: an id
# still watched under it is an array not yet freed (another thread's last reference dropped
# meanwhile waits in _del, before MXNet frees it). Re-entrant: reading an array's ``grad``
# makes and frees a temporary one.
_examining = threading.RLock()
_users = 0                   # hooks() entered and not left, all threads

_MXNET = os.path.dirname(mx.__file__) + os.sep
_OWN = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STORAGE = {os.path.join(_MXNET, "gluon", "parameter.py"), os.path.join(_MXNET, "initializer.py")}
_NO_HISTORY_CODES = {mx.nd.NDArray.detach.__code__, mx.nd.NDArray.grad.fget.__code__,
                     _nd_module.empty.__code__}
# MXNet's views made by the C API, not an operator (``reshape``, ``x[1]``, ``x[1:2]``): the
# creating frame's ``self`` is the base.
_VIEW_CODES = {mx.nd.NDArray.reshape.__code__, mx.nd.NDArray._slice.__code__,
               mx.nd.NDArray._at.__code__, mx.nd.NDArray._get_nd_basic_indexing.__code__}
_USER, _LIBRARY, _OWN_CODE, _NO_HISTORY, _EXECUTED = range(5)
_kinds: dict = {}            # a code's file name -> its kind
_random: dict = {}           # an operator handle's value -> whether it draws random numbers


def _kind(code):
    if code in _NO_HISTORY_CODES:
        return _NO_HISTORY
    name = code.co_filename
    kind = _kinds.get(name)
    if kind is None:
        if name in _STORAGE:
            kind = _NO_HISTORY
        elif name.startswith(_MXNET):
            kind = _LIBRARY
        elif name == "<string>":   # MXNet's generated operators, or the user's exec/python -c
            kind = _EXECUTED
        elif name.startswith(_OWN) and not name.startswith(_USER_DIRS):
            kind = _OWN_CODE
        else:
            kind = _USER
        _kinds[name] = kind
    return kind


def _site(frame):
    """``(no_history, direct, file, line, kept)`` of the array being made: whether a code
    making arrays without history made it, whether the user's line called MXNet without
    gluon_cf in between, that line (the first frame outside MXNet and gluon_cf), and False
    (:func:`keep`)."""
    no_history, direct = getattr(_state, "clean", False), True
    while frame is not None:
        kind = _kind(frame.f_code)
        if kind == _EXECUTED:   # (before: a write by an exec'd body went unseen)
            module = frame.f_globals.get("__name__") or ""
            # (NOTE [modules named like MXNet] in operators.py: mxnet_* is the user's)
            kind = _LIBRARY if is_mxnet_module(module) else _USER
        if kind == _USER:
            return no_history, direct, frame.f_code.co_filename, frame.f_lineno, False
        if kind == _NO_HISTORY:
            no_history = True
        elif kind == _OWN_CODE:
            direct = False
        frame = frame.f_back
    return no_history, False, None, None, False


def keep(arrays):
    """Mark ``arrays`` as kept by gluon_cf (a nested call's arguments and results, the views
    a recorded remat loop holds of its data and initial states): not escapes of the body that made
    them, whichever watch that was, and with history: a nested node's outputs are made by ``detach``
    (no history) and recorded afterwards, so what the body computes from them has history (before,
    ``f(n - 1) * 2`` kept outside a remat body passed as made from constants: x's gradient 0.53 off,
    silently)."""
    _mark(arrays, True)


def has_history(arrays):
    """Mark ``arrays`` (a recorded remat loop's outputs, which it does not hold) as having
    history, as :func:`keep` does, but still watched: kept by the user beyond the body that
    made them they escape it (their history stops at that body's detached inputs)."""
    _mark(arrays, False)


def _mark(arrays, kept):
    for a in arrays:
        created = _owner.get(id(a))
        if created is not None and id(a) in created:
            site = created[id(a)]
            created[id(a)] = (False,) + site[1:4] + (kept or site[4],)


def aliases(arrays):
    """What a recorded remat loop holds of ``arrays`` (its data and initial states): for an
    array a running body made (this one or one enclosing it), a view of it (recorded when the body
    is), which gluon_cf keeps (:func:`keep`), so that the user's own array is watched like any other
    (before, the loop's references hid it: an initial state also appended to a list by a remat
    recursive call's body, x's gradient silently 8 off); other arrays as they are. A marked leaf
    made in the body (``attach_grad``) stays itself: a view of it would not be marked."""
    if getattr(_state, "watch", None) is None:
        return list(arrays)
    held = [a.reshape(a.shape) if id(a) in _owner and a.grad is None else a for a in arrays]
    keep(held)
    return held


def _init(self, handle, writable=True):
    _base_init(self, handle, writable)
    watch = getattr(_state, "watch", None)
    if watch is not None:
        key = id(self)
        frame = sys._getframe(1)
        site = _site(frame)
        if not site[0] and frame.f_code in _VIEW_CODES:   # a view has its base's history
            if _without_gradient(watch.created, [frame.f_locals.get("self")]):
                site = (True,) + site[1:]
        watch.created[key] = site
        _owner[key] = watch.created


def _without_gradient(created, arrays):
    """Whether ``arrays`` were all made in the body without history and none is a marked
    leaf: an operator (or a view) of them carries no gradient. A leaf (Gluon's parameter
    storage initialised in the body, a constant given ``attach_grad``) has no history but
    passes its gradient on (``(w ** 2).sum()`` of a deferred weight: before, its escape went
    unseen and the weight's gradient lost it)."""
    if not all(created.get(id(a), (False,))[0] for a in arrays):
        return False
    return not any(a.grad is not None for a in arrays)   # (rare: constants only)


def _del(self):
    with _examining:   # (Watch.escaped reads the arrays by id)
        created = _owner.pop(id(self), None)
        if created is not None:
            created.pop(id(self), None)
    _base_del(self)


def _invoke(handle, ndargs, keys, vals, out, *rest):
    watch = getattr(_state, "watch", None)
    if watch is None:
        return _base_invoke(handle, ndargs, keys, vals, out, *rest)
    value = getattr(handle, "value", handle)
    watch.operators.add(value)
    random = _random.get(value)
    if random is None:
        random = _random[value] = is_random_op(_op_name(value))
    if random and not watch.draws:   # the user's own draw (not an initializer's, not ours)
        no_history, direct, name, line, _ = _site(sys._getframe(1))
        if direct and not no_history:
            watch.draws.append((_op_name(value), name, line))
    created = watch.created
    clean = _without_gradient(created, ndargs)
    if out is not None and not clean:   # history written into existing arrays
        for o in (out if isinstance(out, (list, tuple)) else [out]):
            site = created.get(id(o))
            if site is not None:
                created[id(o)] = (False,) + site[1:]
            else:
                _, direct, name, line, _ = _site(sys._getframe(1))
                if direct and name is not None:
                    watch.writes.append((name, line, o.shape))
    _state.clean = clean
    try:
        return _base_invoke(handle, ndargs, keys, vals, out, *rest)
    finally:
        _state.clean = False


@contextlib.contextmanager
def hooks():
    """Wrap ``NDArrayBase.__init__``/``__del__`` and the operator call while inside (any
    thread); outside every ``hooks()`` MXNet runs unwrapped."""
    global _users
    with _lock:
        if _users == 0:
            _Base.__init__, _Base.__del__ = _init, _del
            _register._imperative_invoke = _invoke
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                _Base.__init__, _Base.__del__ = _base_init, _base_del
                _register._imperative_invoke = _base_invoke


class Watch:
    """The arrays this thread makes from construction until :meth:`stop` (inside
    :func:`hooks`), and what outlives the body: :meth:`check`, then always :meth:`release`."""

    def __init__(self):
        self.created: dict = {}   # id -> _site(...), while alive
        self.writes: list = []    # (file, line, shape): history written into outer arrays
        self.operators: set = set()   # the handles of the operators called (:meth:`op_names`)
        # (operator, file, line) of the first random operator the user's code called
        self.draws: list = []
        self.outer = getattr(_state, "watch", None)
        self.running = True
        _state.watch = self

    def stop(self):
        if self.running:
            self.running = False
            _state.watch = self.outer
            if self.outer is not None:
                self.outer.operators |= self.operators

    def op_names(self):
        """The names of the operators called while running (a random operator without
        inputs, ``mx.nd.random.normal(shape=...)``, is not in the recorded graph)."""
        return [_op_name(value) for value in self.operators]

    def escaped(self):
        """The sites of the arrays made while running that are still alive, not kept
        (:func:`keep`) and not provably without history (NOTE [arrays escaping a remat
        body])."""
        def suspects():
            found = []
            collecting = gc.isenabled()
            gc.disable()   # no cycle freed in this thread between the check and the read
            try:
                with _examining:
                    for key, site in list(self.created.items()):
                        if site[0] or site[4] or key not in self.created:
                            continue
                        array = ctypes.cast(key, ctypes.py_object).value   # not freed: _del
                        if array.grad is None:   # (a marked leaf's gradient: its own buffer)
                            found.append((site, array.shape, array.dtype))
                        del array
            finally:
                if collecting:
                    gc.enable()
            return found
        found = suspects()
        for generation in range(3):   # garbage cycles (only on this path)
            if not found:
                break
            gc.collect(generation)
            found = suspects()
        return found

    def check(self, refuse):
        """Call ``refuse(text)`` (which raises) if an array escaped or history was written
        into an outer array; ``text`` names the user's line and the array."""
        self.stop()
        found = self.escaped()
        if found:
            (_, _, name, line, _), shape, dtype = found[0]
            where = "%s:%s" % (name, line) if name else "gluon_cf's code"
            refuse("created at %s (shape %s, %s)%s" % (
                where, shape, _dtype_name(dtype),
                " and %d more" % (len(found) - 1) if len(found) > 1 else ""), where)
        if self.writes:
            name, line, shape = self.writes[0]
            where = "%s:%s" % (name, line)
            refuse("written into an array of shape %s made outside the body, at %s"
                   % (shape, where), where)

    def release(self):
        self.stop()
        created, self.created = self.created, {}
        for key in created:
            if _owner.get(key) is created:
                del _owner[key]


def _op_name(value):
    """The name of the MXNet operator whose handle's value is ``value``."""
    name = ctypes.c_char_p()
    check_call(_LIB.MXSymbolGetAtomicSymbolName(ctypes.c_void_p(value), ctypes.byref(name)))
    return (name.value or b"").decode()


def _dtype_name(dtype):
    return getattr(dtype, "__name__", str(dtype))
