"""Failed calls of gluon_cf's nodes on MXNet's Custom-op threads, carried by their own outputs
(NOTE [failures carried by the outputs])."""
import collections
import copy
import itertools
import os
import re
import sys
import threading
import types
import weakref
from typing import Optional

import mxnet as mx
from mxnet import autograd
from mxnet._ctypes.ndarray import NDArrayBase

# NOTE [failures carried by the outputs]
#     MXNet 1.9.1 keeps ONE failure for all its Custom operators (``CustomOperator::exception_``,
#     src/operator/custom/custom-inl.h): a callback's error is stored there and taken by the next
#     "CustomOperatorWait" engine op to run, whichever call's it is, and a second failure overwrites
#     the first. Six blocks recursing past ``max_depth`` under autograd.record(), their outputs read
#     after all ran: one output raised another call's error and others read their unwritten memory
#     (7.5e+22) instead of raising. So a node's forward or backward failing on MXNet's thread does
#     not fail: it keeps its exception under a number (``KEPT``) and writes each of its outputs with
#     an engine op that fails when it runs, naming the number: a ``cumsum`` of a one-element array
#     along axis ``_BASE + number`` ("axis value 1000000042 out of range", checked by its kernel in
#     the engine, not when pushed), each output a ``broadcast_add`` reading that one failed op, so
#     that they share one engine failure. Neither op asks MXNet for a resource, and that is
#     essential: MXNet marks every variable a failed (or skipped) op writes with its failure, the
#     temporary space it was lent too (one of four copies, MXNET_CPU_TEMP_COPY, shared by every CPU
#     op asking for one), and the next op on that copy whose own inputs are fine takes the failure
#     over and is skipped. Round 29 carried failures with a ``gather_nd``, which asks for temporary
#     space: a later call's failing op, or a healthy ``nd.sum`` of the user's, took an earlier
#     call's failure (raising its error), the first read cleared it for all (MXNet's one shared
#     exception_ptr), and the earlier call's outputs then read unwritten memory (1.87e+35 in a
#     whole-suite run; tests/test_failed_calls_r30fail.py shows it without timing).
#     CustomOperatorWait rethrows the failure of any array of the call (``Engine::Throw`` of each
#     var) and fails the Custom op with it: the call's real outputs carry it, as does every op
#     downstream of them, each call its own. Reading one (or ``mx.nd.waitall()``) raises it, and
#     ``node.py``'s ``get_last_ffi_error`` maps the number back to exactly the kept exception
#     (``exception_for``). As for MXNet's own ops, a call's outputs share one failure: reading one
#     raises it and clears it for the others (MXNet's ``ThrowException``); a hybridized block's are
#     marked again (NOTE [each output raises]). Ops downstream of a failed call that ask for a
#     resource still mark it, as after MXNet's own failing ops: a healthy op pushed before the
#     failure is read can take it over (NOTE [failed calls read later] in ``errors.py`` says what
#     was seen). Under NaiveEngine MXNet runs the callback within the push (no shared slot; a
#     failing op would fail there too), and a call whose outputs are all empty has nothing to carry
#     it: both still raise, the old way (NOTE [failed calls read later] in ``errors.py``).
# NOTE [a failed input run inline]
#     A block's inference run in the calling thread (NOTE [recursion inference in the calling
#     thread] in ``hybrid_inline.py``) reads its inputs there. One carrying a failed call's
#     failure raised it and MXNet cleared it (its one exception_ptr); the block's CachedOp,
#     run again after an inline failure, then read the input's unwritten memory as a value
#     (review round 30: a failed ``max_depth=3`` call fed to a ``max_depth=6`` block raised
#     the block's own depth error, 11 runs of 60 under load; a small value would have been
#     returned). So the inputs are waited for first: a failed one raises its failure at the
#     call (and a block's output stays failed: NOTE [each output raises]).
# NOTE [a whole-engine wait of gluon_cf's]
#     gluon_cf waits for the whole engine where it must (a ``backward()`` while remat nodes are
#     alive: NOTE [a remat backward reads what it recomputes from] in ``remat_record.py``; the
#     gates' passes in ``remat_gates.py``): MXNet's WaitForAll raises the oldest failure pending
#     from any call and empties all the others. A failed block's output left unread, then a
#     healthy eager remat call's ``backward()`` raised that block's RecursionDepthError, and
#     the block's output then read unwritten memory (review round 30). A wait on the pass's
#     own gradients (round 30rw) weakens the wait that stops a Trainer step's hang. So the
#     wait stays whole (``node.wait_engine``), and a failure it meets that a block's call's
#     forward carried (its node was told the call, ``calling``) is not raised there: that
#     call's grouped outputs depending on the failed node are marked with it again (NOTE [each
#     output raises]), so reading them raises it. Failures of no known call (a backward's,
#     carried by its gradients; a static_alloc block's call; a user's own op) are raised
#     there, as before.
_FAILED_NODE = "_gluon_cf_failed_call_node"
_FAILED_CALL = "_gluon_cf_failed_call"
_BASE = 1000000000   # (+ number < 2**31: an int axis)
_INDEX_ERROR = re.compile(r"axis value (1\d{9}) out of range")
_NAIVE = os.environ.get("MXNET_ENGINE_TYPE") == "NaiveEngine"   # (read by MXNet at start)


class _Kept:
    """Exceptions of failed calls not read yet, by number; the oldest are dropped past LIMIT
    (a failure never read must not hold its arrays forever)."""

    LIMIT = 64

    def __init__(self):
        self._lock = threading.Lock()
        self._kept: "collections.OrderedDict[int, Exception]" = collections.OrderedDict()
        self._next = 0
        self._issued = 0

    def add(self, exc):
        with self._lock:
            number, self._next = self._next, (self._next + 1) % _BASE
            self._issued = min(self._issued + 1, _BASE)
            self._kept[number] = exc
            while len(self._kept) > self.LIMIT:
                self._kept.popitem(last=False)
        return number

    def take(self, number):
        """The exception kept under ``number`` (once), or None; and whether it was issued."""
        with self._lock:
            issued = self._issued >= _BASE or number < self._next
            return self._kept.pop(number, None), issued

    def clear(self, keep=()):
        """Forget all; returns the exceptions not under a number of ``keep``, oldest first."""
        with self._lock:
            kept, self._kept = self._kept, collections.OrderedDict()
        return [exc for number, exc in kept.items() if number not in keep]

    def __len__(self):   # (failures no read took: not the marks of NOTE [each output raises])
        return sum(1 for number in list(self._kept) if number not in _MARKS)


KEPT = _Kept()


def carry(exc, arrays, node=None, call=None):
    """Keep ``exc`` and write ``arrays`` (the outputs of the failed call of the graph's node
    named ``node``, of the block's call ``call``: ``calling``) with engine ops that fail naming
    it; False when it cannot (NOTE [failures carried by the outputs])."""
    try:   # (read by mark_again and after_waitall)
        setattr(exc, _FAILED_NODE, node)
        setattr(exc, _FAILED_CALL, call)
    except AttributeError:
        pass
    return _push(exc, arrays) is not None


def _push(exc, arrays):
    """The number of ``exc`` kept and carried by ``arrays``; None when it cannot be."""
    if _NAIVE or any(a.stype != "default" for a in arrays):
        return None   # (a sparse output: MXNet would lend its op temporary space)
    arrays = [a for a in arrays if a.size > 0]
    if not arrays:
        return None
    number = KEPT.add(exc)
    try:
        with autograd.pause():
            # (a cumsum along an axis that does not exist fails when it runs, not when
            # pushed, and asks no resource: NOTE [failures carried by the outputs])
            failed = mx.nd.cumsum(mx.nd.zeros((1,), mx.cpu()), axis=_BASE + number)
            for out in arrays:
                data = failed.as_in_context(out.context).astype(out.dtype, copy=False)
                mx.nd.broadcast_add(out, data.reshape((1,) * out.ndim), out=out)
    except Exception:  # noqa: BLE001 - not pushed (an output's dtype, say): raised the old way
        KEPT.take(number)
        return None
    return number


# NOTE [each output raises]
#     MXNet gives all the arrays a failure reached one exception_ptr (a call's outputs, and
#     every op's downstream of them): the first read raises it and empties it, and the others
#     then read their unwritten memory as values, the array first read too when read again
#     (round 31: a block returning a failed recursion's two outputs, or ``y, y + 1, exp(y)``:
#     one read raised, every other read gave a value such as -1e-38). So the outputs of each
#     call of a hybridized block (not static_alloc, whose arrays the next call reuses: NOTE
#     [failed calls read later] (3) in ``errors.py``) are grouped (``group``), by weak
#     references to their handles, with the names of the gluon_cf nodes each depends on. A
#     read that raises a carried failure (``node.py``) marks failed again, each by its own
#     carrier (``mark_again``), the array read if grouped, and its group's outputs depending
#     on the failed node (named by ``carry``): every later read of them, and every op reading
#     them, raises that failure again. Only grouped arrays: a gradient buffer or an ``out=``
#     array is written again later, and the write would take the mark's failure over (MXNet
#     fails an op writing a failed array; round 29's failing backward's next, healthy one
#     raised). ``mx.nd.waitall()`` (MXNet's WaitForAll raises the first failure it holds and
#     empties all) is ours (``node.py``): it marks the marked arrays again (not at exit), and
#     the outputs of every failed call it met whose block call is known (``calling``; a read
#     of any array a call's failure reached marks that call's outputs too); when what
#     WaitForAll raised was a mark's, a failure read already, it raises instead the oldest
#     carried failure that no read took, or nothing. Arrays the user computed from a
#     failed output before its first read share its exception_ptr and are not grouped: left
#     as MXNet leaves them (NOTE [failed calls read later] (1)).
_GROUPS: dict = {}   # id(an output's handle) -> (its weakref, [(weakref, nodes)], call number)
_MARKED: dict = {}   # id(a handle marked again) -> (its weakref, number, exception), pending
_MARKS: dict = {}    # number -> id(handle) of _MARKED (None: the array is gone), pending
_LOCK = threading.RLock()   # (re-entered: an NDArray freed by a collection under it)
_state = threading.local()   # .taken: the handle whose mark a read took; .waiting: in waitall


_CALLS = itertools.count(1)


def calling(call=True):
    """A block's call starts in this thread (its number: the nodes MXNet makes for it are
    told, ``current_call``; give it to ``group``), or ended (``call`` None)."""
    _state.call = next(_CALLS) if call is True else call
    return _state.call


def current_call():
    """The number of the block's call running in this thread (or None)."""
    return getattr(_state, "call", None)


def group(arrays, nodes, call=None):
    """Group the outputs ``arrays`` of block call ``call``, ``nodes[i]`` the names of the
    gluon_cf nodes output i depends on (NOTE [each output raises])."""
    if _NAIVE:
        return
    members = []
    for array, names in zip(arrays, nodes):
        if names and array is not None and getattr(array, "stype", None) == "default":
            members.append((weakref.ref(array.handle, _forgetting(id(array.handle))), names))
    with _LOCK:
        for ref, _ in members:
            _GROUPS[id(ref())] = (ref, members, call)


def _freeing(free):
    """``NDArray.__del__``: a grouped or marked array's handle is forgotten before MXNet frees
    it (a handle object may outlive its array: never used after)."""
    def __del__(self, groups=_GROUPS, marked=_MARKED):   # (module globals go at exit)
        try:
            key = id(self.handle)
            if key in groups or key in marked:
                forget = _forgetting(key)
                forget(groups.get(key, (None,))[0])
                forget(marked.get(key, (None,))[0])
        finally:
            free(self)
    return __del__


NDArrayBase.__del__ = _freeing(NDArrayBase.__del__)


def _forgetting(key):
    def forget(ref):
        if ref is None:
            return
        with _LOCK:
            if _GROUPS.get(key, (None,))[0] is ref:
                del _GROUPS[key]
            if _MARKED.get(key, (None,))[0] is ref:
                _MARKS[_MARKED.pop(key)[1]] = None   # (pending still: a mark, of no array)
    return forget


def _mark(exc, handle):
    """Carry ``exc`` again by the grouped array of ``handle`` (alone), unless it carries it
    still."""
    key = id(handle)
    with _LOCK:
        if _MARKED.get(key, (lambda: None,))[0]() is handle:
            return
        if _GROUPS.get(key, (lambda: None,))[0]() is not handle:
            return   # (not grouped, or its array was freed: _freeing)
    exc = copy.copy(exc)   # (not the raised one: its traceback holds the reader's frames)
    array = mx.nd.NDArray(handle)
    try:
        number = _push(exc, [array])
    finally:
        array.handle = None   # (not freed: its owner frees it)
    if number is not None:
        with _LOCK:
            _MARKED[key] = (weakref.ref(handle, _forgetting(key)), number, exc)
            _MARKS[number] = key


def mark_again(exc):
    """Mark failed again, each with its own carrier, the array whose read raised ``exc``, the
    array whose mark that read took, and the outputs of their calls that depend on the
    failed node (NOTE [each output raises])."""
    if getattr(_state, "waiting", False):
        return   # (after_waitall marks them all again)
    taken, _state.taken = getattr(_state, "taken", None), None
    members = _members_of(exc)   # (the failed call's own outputs, whatever array was read)
    if members is not None:
        _mark_members(exc, members)
    for handle in {id(h): h for h in (_read_handle(), taken) if h is not None}.values():
        with _LOCK:
            ref, members, _ = _GROUPS.get(id(handle), (None, (), None))
        if ref is None or ref() is not handle:
            continue   # (not a call's output: a gradient buffer, say, written again later)
        _mark(exc, handle)
        _mark_members(exc, members)


def _mark_members(exc, members):
    node = getattr(exc, _FAILED_NODE, None)
    known = set().union(*(names for _, names in members))
    for ref, names in members:
        live = ref()
        if live is not None and (node in names or node not in known):
            _mark(exc, live)


def _members_of(exc):
    """The grouped outputs of the block call whose node failed with ``exc`` (or None)."""
    call = getattr(exc, _FAILED_CALL, None)
    if call is None:
        return None
    with _LOCK:
        for ref, members, number in _GROUPS.values():
            if number == call and ref() is not None:
                return members
    return None


def _read_handle():
    """The handle of the NDArray whose method's MXNet call is raising (or None)."""
    frame: "Optional[types.FrameType]" = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if isinstance(owner, mx.nd.NDArray):
            return owner.handle
        frame = frame.f_back
    return None


def raise_failed_input(arrays):
    """Raise the failure an array of ``arrays`` carries (NOTE [a failed input run inline]; a
    call's output is marked again by the read: NOTE [each output raises])."""
    for array in arrays:
        array.wait_to_read()


def waiting(on):
    """Tell that this thread's ``mx.nd.waitall()`` starts (True) or ended (False)."""
    _state.waiting = on
    _state.mark_raised = None


def after_waitall(error, mark=True, own=False):
    """After ``mx.nd.waitall()`` raised ``error`` (None: returned): the arrays marked again
    carry their failures again (MXNet's WaitForAll cleared them; not if ``mark`` is
    False: at exit); returns what to raise and whether ``error`` was a mark's (a failure
    read already: then the oldest carried failure no read took, as WaitForAll raises the
    first it holds and forgets the others, or None). ``own``: gluon_cf's own wait (NOTE [a
    whole-engine wait of gluon_cf's]), which raises no block call's failure but marks that
    call's outputs with it."""
    raised_mark = error is not None and getattr(_state, "mark_raised", None) is error
    taken, _state.taken = getattr(_state, "taken", None), None
    _state.waiting, _state.mark_raised = False, None
    with _LOCK:
        marked = [(ref, exc) for ref, _, exc in _MARKED.values()]
        if raised_mark and taken is not None:   # (the mark WaitForAll raised)
            marked.append((lambda: taken, error))
        numbers = set(_MARKS)
        _MARKED.clear()
        _MARKS.clear()
    unread = KEPT.clear(keep=numbers)
    for ref, exc in marked if mark else ():
        handle = ref()
        if handle is not None:
            _mark(exc, handle)
    others = []   # (failures of no known call's: raised by gluon_cf's own wait)
    for exc in unread + ([error] if error is not None and not raised_mark else []):
        members = _members_of(exc)
        if members is None:
            others.append(exc)
        elif mark:   # (the call's outputs raise it when read, not at the next waitall)
            _mark_members(exc, members)
    if own:
        if error is not None and (raised_mark or error not in others):
            return (others[0] if others else None), True
        return error, False
    if raised_mark:
        return (unread[0] if unread else None), True
    return error, False


def exception_for(text):
    """The kept exception of the failed call named in MXNet's error ``text``; an MXNetError
    saying so when it was dropped; None when ``text`` names none."""
    match = _INDEX_ERROR.search(text)
    if match is None:
        return None
    number = int(match.group(1)) - _BASE
    exc, issued = KEPT.take(number)
    with _LOCK:
        is_mark = number in _MARKS
        key = _MARKS.pop(number, None)
        entry = _MARKED.get(key)
        if entry is not None and entry[1] == number:
            del _MARKED[key]
    _state.taken = entry[0]() if entry is not None and entry[1] == number else None
    if exc is None and issued:
        exc = mx.MXNetError(
            "a call of a gluon_cf node failed, but its exception was dropped: more than %d "
            "failed calls were left unread. Read each call's outputs (or call mx.nd.waitall()) "
            "before making more calls that may fail" % _Kept.LIMIT)
    if is_mark and getattr(_state, "waiting", False):
        _state.mark_raised = exc   # (after_waitall: a failure read already)
    return exc
