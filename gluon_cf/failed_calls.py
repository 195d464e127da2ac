"""Failed calls of gluon_cf's nodes on MXNet's Custom-op threads, carried by their own outputs
(NOTE [failures carried by the outputs])."""
import collections
import os
import re
import threading

import mxnet as mx
from mxnet import autograd

# NOTE [failures carried by the outputs]
#     MXNet 1.9.1 keeps ONE failure for all its Custom operators (``CustomOperator::exception_``,
#     src/operator/custom/custom-inl.h): a callback's error is stored there and taken by the
#     next "CustomOperatorWait" engine op to run, whichever call's it is, and a second failure
#     overwrites the first. Six blocks recursing past ``max_depth`` under autograd.record(),
#     their outputs read after all ran: one output raised another call's error and others
#     read their unwritten memory (7.5e+22) instead of raising. So a node's forward or backward
#     failing on MXNet's thread does not fail: it keeps its exception under a number
#     (``KEPT``) and writes each of its outputs with an engine op that fails when it runs,
#     naming the number: a ``cumsum`` of a one-element array along axis ``_BASE + number``
#     ("axis value 1000000042 out of range", checked by its kernel in the engine, not when
#     pushed), each output a ``broadcast_add`` reading that one failed op, so that they share
#     one engine failure. Neither op asks MXNet for a resource, and that is essential: MXNet
#     marks every variable a failed (or skipped) op writes with its failure, the temporary
#     space it was lent too (one of four copies, MXNET_CPU_TEMP_COPY, shared by every CPU op
#     asking for one), and the next op on that copy whose own inputs are fine takes the failure
#     over and is skipped. Round 29 carried failures with a ``gather_nd``, which asks for
#     temporary space: a later call's failing op, or a healthy ``nd.sum`` of the user's, took
#     an earlier call's failure (raising its error), the first read cleared it for all
#     (MXNet's one shared exception_ptr), and the earlier call's outputs then read unwritten
#     memory (1.87e+35 in a whole-suite run; tests/test_failed_calls_r30fail.py shows it
#     without timing). CustomOperatorWait rethrows the failure of any array of the call
#     (``Engine::Throw`` of each var) and fails the Custom op with it: the call's real outputs
#     carry it, as does every op downstream of them, each call its own. Reading one (or
#     ``mx.nd.waitall()``) raises it, and ``node.py``'s ``get_last_ffi_error`` maps the number
#     back to exactly the kept exception (``exception_for``). As for MXNet's own ops, a call's
#     outputs share one failure: reading one raises it and clears it for the others (MXNet's
#     ``ThrowException``), so read each call's failure once. Ops downstream of a failed call
#     that ask for a resource still mark it, as after MXNet's own failing ops: a healthy op
#     pushed before the failure is read can take it over (NOTE [failed calls read later] in
#     ``errors.py`` says what was seen). Under NaiveEngine MXNet runs
#     the callback within the push (no shared slot; a failing op would fail there too), and a
#     call whose outputs are all empty has nothing to carry it: both still raise, the old way
#     (NOTE [failed calls read later] in ``errors.py``).
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

    def clear(self):
        with self._lock:
            self._kept.clear()

    def __len__(self):
        return len(self._kept)


KEPT = _Kept()


def carry(exc, arrays):
    """Keep ``exc`` and write ``arrays`` (the outputs of the failed call) with engine ops that
    fail naming it; False when it cannot (NOTE [failures carried by the outputs])."""
    if _NAIVE or any(a.stype != "default" for a in arrays):
        return False   # (a sparse output: MXNet would lend its op temporary space)
    arrays = [a for a in arrays if a.size > 0]
    if not arrays:
        return False
    index = _BASE + KEPT.add(exc)
    try:
        with autograd.pause():
            # (a cumsum along an axis that does not exist fails when it runs, not when
            # pushed, and asks no resource: NOTE [failures carried by the outputs])
            failed = mx.nd.cumsum(mx.nd.zeros((1,), mx.cpu()), axis=index)
            for out in arrays:
                data = failed.as_in_context(out.context).astype(out.dtype, copy=False)
                mx.nd.broadcast_add(out, data.reshape((1,) * out.ndim), out=out)
    except Exception:  # noqa: BLE001 - not pushed (an output's dtype, say): raised the old way
        KEPT.take(index - _BASE)
        return False
    return True


def exception_for(text):
    """The kept exception of the failed call named in MXNet's error ``text``; an MXNetError
    saying so when it was dropped; None when ``text`` names none."""
    match = _INDEX_ERROR.search(text)
    if match is None:
        return None
    exc, issued = KEPT.take(int(match.group(1)) - _BASE)
    if exc is not None:
        return exc
    if not issued:
        return None
    return mx.MXNetError(
        "a call of a gluon_cf node failed, but its exception was dropped: more than %d failed "
        "calls were left unread. Read each call's outputs (or call mx.nd.waitall()) before "
        "making more calls that may fail" % _Kept.LIMIT)
