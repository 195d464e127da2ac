"""Ctrl-C (SIGINT) while MXNet calls back into Python on the main thread.

NOTE [no KeyboardInterrupt inside MXNet's callbacks]
    A Custom operator's callbacks (``infer_shape``, ``infer_storage_type``, ``create_operator``,
    ... of ``mx.operator.register``) run on the thread that called MXNet: for a hybridized
    gluon_cf node, the main thread, inside ``CachedOp`` calls. Python runs a signal's handler in
    the main thread at the next instruction boundary, there too, and the default handler raises
    KeyboardInterrupt: MXNet's callbacks catch ``Exception`` only (and the handler may run on a
    callback's first line, before its ``try``), so it escaped the ctypes callback, which printed
    "Exception ignored on calling ctypes callback function" and returned whatever was in its
    return slot to C++. MXNet took that for success with outputs never written: a Ctrl-C during
    a training loop of a hybridized model with a gluon_cf node aborted the process ("terminate
    called without an active exception" after SIGSEGV, 1 run of 6 with a foreach) or hung it
    in a corrupted heap (2 runs of 6 with a TreeLSTM); plain MXNet models, which call no Python
    callback there, always ended with the KeyboardInterrupt.

    So while a frame of such a callback is on the main thread's stack, the SIGINT handler that
    was in place when gluon_cf was imported (Python's ``default_int_handler``, or the user's) is
    not run: the signal is sent to the main thread again a few milliseconds later, until it
    lands outside every callback, where it raises as usual, in the user's code, about as fast
    as Ctrl-C does without gluon_cf (callbacks last microseconds to a trace's seconds). A
    ``__del__`` is held the same way: Python drops an exception raised in one ("Exception
    ignored in: <function NDArrayBase.__del__ ...> KeyboardInterrupt"), so a Ctrl-C landing in
    MXNet's (1 run of 8 of a while_loop model, after the fix above) was lost, and training went
    on. So is gluon_cf's wait at exit: a Ctrl-C landing there (sent just before the script
    ended, held in a callback) skipped what it keeps alive for the interpreter's end.

    A handler installed after ``import gluon_cf`` is held the same way: ``signal.signal``
    installs any SIGINT handler so guarded (a user's ``sys.exit`` on Ctrl-C, raising
    ``SystemExit`` inside a callback, aborted the process; asyncio's own, ``asyncio.run``'s),
    and ``signal.signal`` and ``signal.getsignal`` answer with the handler as it was given:
    ``asyncio.run`` installs its handler only where ``getsignal`` answers Python's
    ``default_int_handler``, so a Ctrl-C no longer cancelled the main task, it raised inside
    the event loop (review 28). A module that bound them by name before ``import gluon_cf``
    (``from signal import signal``) is given ours: ipykernel's installs Python's handler
    before each cell it runs, so a kernel interrupt during a hybridized call of a cell after
    the one importing gluon_cf killed the kernel (SIGSEGV, then abort).
    ``import gluon_cf`` in a thread other than the main one cannot install a handler (Python
    allows it in the main thread only): the main thread's first hybridized call does
    (:func:`guard_sigint`; a Ctrl-C in a callback of it crashed the process, review 28). So
    does every hybridized call of the main thread, whose handler may have been installed by
    ``signal.signal`` itself, kept by a name other than ``signal`` before ``import gluon_cf``
    (``_orig = signal.signal``): a Ctrl-C at a random time of a training loop so set up
    aborted the process (SIGSEGV, then abort) in 2 runs of 30, ended it with exit 0 (the
    interrupt escaped a callback, training went on) in 1 and with an MXNetError in 1; 0 of
    30 after (review 29).

    The guard is no function of ours that calls the handler: a KeyboardInterrupt's traceback
    ended in it, where Python's ends in the line interrupted (review 29). Its ``__call__`` is
    a property that answers what to call, the handler or the redelivery: Python calls that
    from C.
"""
import functools
import signal
import sys
import threading
import types
import weakref

import mxnet as mx

__all__ = ["defer_interrupts_in", "guard_sigint"]

_REDELIVER_AFTER = 0.005   # seconds
_callback_codes: set = set()


def _nested_codes(code):
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const
            yield from _nested_codes(const)


def defer_interrupts_in(*functions):
    """Hold a SIGINT raised in ``functions`` (ctypes callbacks MXNet calls, and the functions
    defined inside them) until it lands outside them: NOTE [no KeyboardInterrupt inside
    MXNet's callbacks]."""
    for function in functions:
        _callback_codes.add(function.__code__)
        _callback_codes.update(_nested_codes(function.__code__))


def _in_callback(frame):
    while frame is not None:
        if frame.f_code in _callback_codes or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _interrupt(thread, signum):
    signal.pthread_kill(thread, signum)   # (it wakes a sleep)


_guards: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # guard -> handler


class _Guarded:
    """A SIGINT handler: ``handler``, held while the signal lands in a callback (NOTE [no
    KeyboardInterrupt inside MXNet's callbacks]). ``__call__`` is a property: it picks what
    Python calls, which Python then calls from C, so a KeyboardInterrupt's traceback ends in
    the line it interrupted, as with Python's own handler (a method of ours raising it left
    its own frame last, review 29)."""

    __slots__ = ("_handler", "__weakref__")

    def __init__(self, handler):
        self._handler = handler

    @property
    def __call__(self):
        # (Python calls a handler from the frame it interrupted: the one below this getter)
        if _in_callback(sys._getframe(1)):   # (a handler runs in the main thread: this one)
            return _redeliver
        return self._handler


def _redeliver(signum, frame):
    timer = threading.Timer(_REDELIVER_AFTER, _interrupt, (threading.get_ident(), signum))
    timer.daemon = True
    timer.start()


def _guarded_handler(handler):
    guard = _Guarded(handler)
    _guards[guard] = handler
    return guard


def _as_given(handler):
    try:
        return _guards.get(handler, handler)
    except TypeError:   # (not weakly referable, so none of ours: an int, SIG_DFL)
        return handler


def _signal(signalnum, handler):
    if signalnum == signal.SIGINT and callable(handler):
        handler = _guarded_handler(handler)
    return _as_given(_original_signal(signalnum, handler))


def _getsignal(signalnum):
    return _as_given(_original_getsignal(signalnum))


_original_signal, _original_getsignal = signal.signal, signal.getsignal
# (their docs; their names stay ours, so that pickle finds them where they are)
functools.update_wrapper(_signal, _original_signal, assigned=("__doc__",))
functools.update_wrapper(_getsignal, _original_getsignal, assigned=("__doc__",))


def guard_sigint():
    """In the main thread, guard its SIGINT handler if it is not (gluon_cf imported in another
    thread; a handler installed by a reference to ``signal.signal`` taken before ``import
    gluon_cf``): NOTE [no KeyboardInterrupt inside MXNet's callbacks]."""
    if threading.current_thread() is threading.main_thread():
        handler = _original_getsignal(signal.SIGINT)
        if callable(handler) and not isinstance(handler, _Guarded):
            _signal(signal.SIGINT, handler)


def _install():
    signal.signal, signal.getsignal = _signal, _getsignal
    for module in list(sys.modules.values()):   # ``from signal import signal`` before us
        namespace = vars(module) if isinstance(module, types.ModuleType) else None
        if isinstance(namespace, dict) and namespace.get("__name__") != "_signal":
            for name, ours, original in (("signal", _signal, _original_signal),
                                         ("getsignal", _getsignal, _original_getsignal)):
                if namespace.get(name) is original:
                    namespace[name] = ours
    guard_sigint()   # (only the main thread may set a handler: imported elsewhere, none is
    #                   set, until the main thread's first hybridized call)


# MXNet's Python callbacks: the nested functions of the functions that make them (Custom
# operators': ``_custom_ops`` adds MXNet's ``register``, which it replaces)
defer_interrupts_in(mx.operator.NumpyOp.get_symbol, mx.operator.NDArrayOp.get_symbol,
                    mx.autograd.Function.__call__)
_install()
