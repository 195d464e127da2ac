"""Recursive functions inside ``hybrid_forward``: ``@gluon_cf.recursive`` and ``gluon_cf.invoke``.

NOTE [recursion design]
    Following Jeong et al. (EuroSys'18), a recursive function is a *SubGraph*: a function over graph
    values, traced once into a graph, and every call site is an ``invoke`` node naming it. In a
    hybridized block the outermost call becomes one ``recursion`` node holding the *function
    table* (every function reachable from the call, each traced once) and taking as inputs the
    call's arguments plus the *environment*: everything any function in the table captures
    (NOTE [closure capture]). Call sites inside the bodies are ``invoke`` nodes whose inputs are
    just the arguments; the executor supplies the environment.

    Forward declaration is automatic. To emit an ``invoke`` node we need the callee's *signature*
    (the structure of what it returns). When a function is first called, its body is traced once
    in *discovery* mode; a recursive call met during discovery raises :class:`PendingSignature`,
    and ``cond`` answers that by using the branch that does not recurse (the base case) for the
    discovery trace. The discovered structure is then used for the real trace. A function whose
    every path recurses has no base case and is rejected with an error naming it.

    Shapes follow the same idea at graph-build time: a recursive call whose shapes are being
    inferred contributes "unknown", ``cond`` takes the shapes of the branch that is known, and
    inference is repeated until the function's output shapes are known and consistent.
"""
import gc
import inspect
import itertools
import os
import sys
import threading
import types
import uuid
import weakref
from typing import Callable, Optional, Union, overload

import greenlet
import mxnet as mx

from .. import node as _node
from .._structure import describe, flatten, regroup
from ..checks import check_callable, mode_of
from ..remat import Remat, check_remat
from ..errors import AddressSpaceError, RecursionDepthError
from ..tracing import PendingSignature, merge_captures, trace, trace_mark, user_location
from . import malloc_arenas, python_state, refusals, remat_calls
from .table import MAX_DEPTH
from .._typing import Arrays

DEFAULT_MAX_DEPTH = 20000
_MADE = itertools.count()   # (RecursiveFunctions in order made: NOTE [two traces, one graph])


class RecursiveFunction:
    """A Python function usable recursively in eager and hybridized mode; see :func:`recursive`.

    >>> import gluon_cf
    >>> @gluon_cf.recursive(max_depth=100)
    ... def node(i):
    ...     return i
    >>> node
    <gluon_cf.recursive node>
    >>> node.name, node.max_depth
    ('node', 100)
    """

    _ids = itertools.count()

    def __init__(self, fn: Callable[..., Arrays], name: Optional[str] = None,
                 max_depth: int = DEFAULT_MAX_DEPTH, remat: bool = False) -> None:
        check_callable("recursive", fn=fn)
        if not isinstance(max_depth, int) or isinstance(max_depth, bool) or \
                not 1 <= max_depth <= MAX_DEPTH:
            raise ValueError("%sgluon_cf.recursive: max_depth must be an int from 1 to %d, got "
                             "%r" % (_at_call(), MAX_DEPTH, max_depth))
        self.fn = fn
        self.made = next(_MADE)
        self.name = name or getattr(fn, "__name__", "recursive")
        self.max_depth = max_depth
        self.remat = remat
        self.uid = next(self._ids)
        self._signature: Optional[inspect.Signature] = None   # (for keyword arguments)

    def __call__(self, *args: Arrays, **kwargs: Arrays) -> Arrays:
        """The call, same as ``invoke(self, *args)`` (which calls this). Arguments passed by
        name are bound to the function's parameters as Python binds them."""
        if kwargs:
            args = self._bind(args, kwargs)
        try:
            flat, fmt = flatten(list(args), "gluon_cf.invoke", "the arguments of %r" % self.name)
        except TypeError:
            raise self._not_arrays(args) from None
        mode = mode_of("invoke", flat, "the arguments of %r" % self.name)
        if mode == "symbol":   # remat: NOTE [hybridized remat recursion] in planned_backward.py
            return _invoke_symbolic(self, flat, fmt)
        if remat_calls.replaying() and self.remat and not remat_calls.inlined(self, args):
            return remat_calls.call(self, args)   # NOTE [rematerialised recursive calls]
        fn = self.fn
        if remat_calls.wanted(self):
            where = user_location() if not remat_calls.inside() else None
            fn = lambda *a: remat_calls.call(self, a, where)  # noqa: E731
        # Eager mode, inline (every frame of a level counts, NOTE [eager recursion stack]).
        depth = getattr(_eager, "depth", 0) + 1
        if depth > self.max_depth:
            raise RecursionDepthError("gluon_cf.recursive: %r exceeded max_depth=%d nested calls; "
                                      "does it reach a base case?"
                                      % (self.name, self.max_depth))
        try:
            if depth == 1:
                return _serve_hops(fn, args)
            limited = getattr(_eager, "address_space_limit", None) is not None
            if limited:   # NOTE [address-space headroom]
                _check_headroom(self, depth)
            if _stack_is_deep():
                value = _hop(fn, args, depth)
            else:
                _eager.depth = depth
                try:
                    value = fn(*args)
                finally:
                    _eager.depth = depth - 1
            if limited:
                _check_headroom(self, depth)
            return value
        except BaseException as exc:
            if depth == 1:
                # the user's call is where it happened
                if isinstance(exc, (RecursionDepthError, AddressSpaceError)):
                    where = user_location()
                    # a call from one of our models names the user's line that called it
                    outer = user_location(models_are_user=False) or where
                    if where and len(exc.args) == 1 and isinstance(exc.args[0], str) \
                            and outer and not exc.args[0].startswith(outer):   # (nested)
                        exc.args = ("%s: %s%s" % (outer, exc.args[0], "" if outer == where else
                                                  " (the recursion's call: %s)" % where),)
                    exc = exc.with_traceback(None)
                    if isinstance(exc, AddressSpaceError):
                        # free what the calls held (NOTE [memory after an address-space error])
                        gc.collect()
                    raise exc from None
                _cut_traceback(exc)
            raise

    def __repr__(self):
        return "<gluon_cf.recursive %s>" % self.name

    def _bind(self, args, kwargs):
        """``args`` and ``kwargs`` as positional arguments of the user's function: Python's
        own binding (its TypeError, at the user's call, when they do not fit)."""
        try:
            if self._signature is None:
                self._signature = inspect.signature(self.fn)
            bound = self._signature.bind(*args, **kwargs)
        except (TypeError, ValueError) as err:   # (ValueError: a callable of no signature)
            raise TypeError("%sgluon_cf.recursive: %r: %s" % (
                _at_call(), self.name, err)) from None
        skipped = [p.name for p in self._signature.parameters.values()
                   if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                   and p.name not in bound.arguments]
        if bound.kwargs and skipped and skipped[0] not in bound.kwargs and any(
                self._signature.parameters[n].kind == inspect.Parameter.POSITIONAL_OR_KEYWORD
                for n in bound.kwargs):   # (a default left out before a parameter given)
            raise TypeError("%sgluon_cf.recursive: %r is called without %r, which comes before "
                            "%s given by name: a recursive function's arguments are passed "
                            "positionally, as arrays, so its parameters' defaults can be left "
                            "out only at the end; pass %r too" % (
                                _at_call(), self.name, skipped[0],
                                ", ".join(map(repr, bound.kwargs)), skipped[0]))
        if bound.kwargs:   # keyword-only parameters: the graph's arguments are positional
            raise TypeError("%sgluon_cf.recursive: %r takes %s by keyword only; a recursive "
                            "function's arguments are positional: make %s positional" % (
                                _at_call(), self.name,
                                ", ".join(map(repr, bound.kwargs)),
                                "it" if len(bound.kwargs) == 1 else "them"))
        return bound.args

    def _not_arrays(self, args):
        """The ValueError, at the user's call, for an argument that is no array (a Python
        number would have to be a constant of the traced function, which differs per call)."""
        for k, arg in enumerate(args):
            try:
                flatten(arg, "gluon_cf.invoke", "")
            except TypeError:
                break
        return ValueError(
            "%sgluon_cf.recursive: argument #%d of %r is of type %s (%.40r), not an NDArray/Symbol "
            "or a (nested) list of them: a recursive function's arguments are arrays. Pass a "
            "number as an array (e.g. F.ones_like(idx) * value) or read it from the enclosing "
            "scope instead of passing it" % (_at_call(), k, self.name,
                                              type(arg).__name__, arg))


@overload
def recursive(fn: Callable[..., Arrays], *, name: Optional[str] = None,
              max_depth: int = DEFAULT_MAX_DEPTH, remat: Remat = False) -> RecursiveFunction: ...


@overload
def recursive(fn: None = None, *, name: Optional[str] = None,
              max_depth: int = DEFAULT_MAX_DEPTH, remat: Remat = False
              ) -> Callable[[Callable[..., Arrays]], RecursiveFunction]: ...


def recursive(fn: Optional[Callable[..., Arrays]] = None, *, name: Optional[str] = None,
              max_depth: int = DEFAULT_MAX_DEPTH, remat: Remat = False
              ) -> Union[RecursiveFunction, Callable[[Callable[..., Arrays]], RecursiveFunction]]:
    """Decorator making ``fn`` a recursive SubGraph callable from ``hybrid_forward``.

    ``fn`` takes arrays (NDArrays eagerly, Symbols when hybridized) and returns an array or a
    nested list of arrays. It may call itself or other recursive functions; outer values it reads
    (parameters, inputs of ``hybrid_forward``) are captured automatically. Its semantics are
    those of the plain Python function; ``max_depth`` bounds the depth of nested calls (exceeding
    it raises :class:`RecursionDepthError` naming the function), in both modes.

    ``remat=True``: under ``autograd.record()`` what is kept for backward is the calls'
    arguments and results, and their intermediates are recomputed in backward (the README's
    section on ``remat``); gradients are those of ``remat=False``. Eagerly each call is
    recomputed on its own. Hybridized, the unit is the outermost call's ``recursion`` node,
    rematerialised when any function it can reach has ``remat=True``: on an ahead-of-time
    schedule with a planned backward each group of calls is recomputed on its own (one
    group's intermediates alive at a time); on the dynamic or unbatched executor a node
    called by ``hybrid_forward`` keeps only its inputs and outputs and recomputes the whole
    recursion at once in backward (a backward peak like ``remat=False``'s); a recursion in a
    loop's step off a planned schedule runs as with ``remat=False``. Random operators replay
    their draws (seeded, compared with the forward's).

    Use it as ``@recursive`` or ``@recursive(name=..., max_depth=...)``. Example: the sum of
    ``values[0..n]`` by recursion on ``n``, in a hybridized block:

    >>> import mxnet as mx, gluon_cf
    >>> class SumTo(mx.gluon.HybridBlock):
    ...     def hybrid_forward(self, F, values, n):
    ...         @gluon_cf.recursive
    ...         def total(i):
    ...             return gluon_cf.cond(i < 1, lambda: F.take(values, i),
    ...                                  lambda: F.take(values, i) + total(i - 1))
    ...         return total(n)
    >>> net = SumTo()
    >>> net.hybridize()
    >>> net(mx.nd.array([1, 2, 3, 4]), mx.nd.array([3])).asnumpy()
    array([10.], dtype=float32)
    """
    if check_remat("recursive", remat) is not False and remat is not True:
        where = user_location()
        raise NotImplementedError(
            "gluon_cf.recursive%s: remat=%r is not implemented for recursive functions%s (only "
            "remat=True: NOTE [rematerialised recursive calls]); use remat=True or "
            "False" % (" at %s" % where if where else "", remat,
                       " (%r)" % getattr(fn, "__name__", "") if fn is not None else ""))
    if fn is None:
        return lambda f: RecursiveFunction(f, name=name, max_depth=max_depth,
                                           remat=remat is True)
    return RecursiveFunction(fn, name=name, max_depth=max_depth, remat=remat is True)


# Plain functions passed to invoke(), wrapped once each; weak, because a function defined inside
# hybrid_forward is a new object on every call and must not be kept alive by us.
_wrappers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _as_recursive(fn) -> RecursiveFunction:
    if isinstance(fn, RecursiveFunction):
        return fn
    check_callable("invoke", fn=fn)
    wrapped = _wrappers.get(fn)
    if wrapped is None:
        wrapped = _wrappers[fn] = RecursiveFunction(fn)
    return wrapped


def invoke(fn: Union[RecursiveFunction, Callable[..., Arrays]], *args: Arrays) -> Arrays:
    """Call the recursive function ``fn`` on ``args``: an ``invoke`` node in hybridized mode.

    ``fn`` is a :class:`RecursiveFunction` or a plain Python function (wrapped once). Calling a
    ``@recursive`` function is the same as ``invoke(fn, *args)``:

    >>> import mxnet as mx, gluon_cf
    >>> def depth(i):
    ...     return gluon_cf.cond(i < 1, lambda: i * 0, lambda: gluon_cf.invoke(depth, i - 1) + 1)
    >>> gluon_cf.invoke(depth, mx.nd.array([3])).asnumpy()
    array([3.], dtype=float32)
    """
    return _as_recursive(fn)(*args)


# ---- eager mode: plain Python recursion, with the depth bound -----------------------------------
#
# NOTE [eager recursion stack]
#     Eagerly, a recursive function is the user's own Python function calling itself, so every
#     level costs Python frames and C stack. Raising ``sys.setrecursionlimit`` (what this code did
#     once) only moves the failure: the C stack overflows first and the process dies with SIGSEGV
#     around depth 6,000. Instead, the outermost call becomes a *hub*, and whenever the running
#     code holds all but ``_HEADROOM`` of the frames the recursion limit allows, the next call
#     continues in a new *segment*: a greenlet the hub starts from its own shallow stack, while
#     the caller waits, suspended. Greenlets switch C stacks within one thread (the suspended
#     caller's part of the stack is copied to the heap, as much as it uses), and a greenlet
#     starts with the Python frame count of the point it was started from: the hub's. So no
#     segment holds more than one segment's stack, the recursion limit is never touched, and
#     depth is bounded only by ``max_depth``. All segments run on the caller's thread: MXNet's
#     thread-local state (autograd recording and training mode, default context, NumPy shape
#     semantics) and the caller's ``contextvars`` are simply there, so values and gradients
#     are those of plain recursion. Exceptions travel back to the caller; at the outermost call
#     their traceback is cut to its two ends.
#
#     Once, every hop continued on another *thread* (a fresh Python and C stack), later on a
#     pool of them. A thread is not cheap: its stack, a glibc malloc arena for each of the first
#     8 per core (64 MB of address space each), and about 5 MB that MXNet keeps per thread that
#     ever ran an operator with attributes (``take``, ``FullyConnected``, scalar arithmetic),
#     never returned. A 19,999-deep TreeRNN chain held ~150 threads and ~3.5 GB of address space
#     (~9 GB before the pool); with segments it starts no thread and runs under a 2 GB
#     address-space limit (tests/test_no_crash.py). This is why gluon_cf depends on greenlet.

# depth: eager calls in progress; hub, base: see _serve_hops; address_space_limit: RLIMIT_AS in
# bytes during an outermost eager call, if one is set (NOTE [address-space headroom]);
# free_credit: see _freed_memory_covers
_eager = threading.local()
_HEADROOM = 400             # frames of the recursion limit left to the code between two calls
_TRACEBACK_ENDS = 12        # frames kept at each end of a traceback cut at the outermost call


def eager_depth() -> int:
    """The number of eager recursive calls in progress on this thread (0 outside any)."""
    return getattr(_eager, "depth", 0)


def _stack_is_deep():
    """Whether this segment holds all but ``_HEADROOM`` of the frames the limit allows."""
    try:
        # C-speed walk, within this segment: raises if it is shallower
        sys._getframe(max(50, sys.getrecursionlimit() - _HEADROOM - _eager.base))
    except ValueError:
        return False
    return True


def _frame_depth():
    """The number of Python frames below this one, in O(log depth) ``sys._getframe`` calls."""
    low, high = 0, 1
    try:
        while True:
            sys._getframe(high)
            low, high = high, 2 * high
    except ValueError:
        pass
    while high - low > 1:
        middle = (low + high) // 2
        try:
            sys._getframe(middle)
            low = middle
        except ValueError:
            high = middle
    return low


# NOTE [the hub holds no array]
#     The hub (``_serve_hops``) passes every hopped call's arguments to its segment and its
#     outcome back to the caller. Its locals held the last ones while the other segments ran,
#     so an array a remat body made and passed down (NOTE [arguments computed in a remat
#     body]: the calls run inside it) was alive when the body's escape watch looked, and a
#     chain past ~100 levels was refused as an array escaping ``down = tanh(u(top))`` (round
#     29r review). The hub drops them before it switches, and hands an outcome in a list the
#     caller empties (``_hop``). The recomputation in backward runs such inlined calls through
#     the same depth count and hops (``remat_calls.inlined``), not inline on one stack, which
#     ran out of Python's recursion limit.


def _serve_hops(fn, args):
    """The outermost eager call ``fn(*args)``: run it in a segment, and start a segment for
    every hop of the calls below, from here (NOTE [eager recursion stack])."""
    _eager.hub, _eager.base = greenlet.getcurrent(), _frame_depth()
    _eager.address_space_limit = _address_space_limit()
    _eager.free_credit = None
    if _eager.address_space_limit is not None:
        malloc_arenas.cap_arenas()   # NOTE [malloc arenas under a limit]
    try:
        message = _start_segment(fn, args, 1, _eager.hub.gr_context, None)
        while True:
            # (the hub keeps no call's arguments or results while the others run: NOTE
            # [the hub holds no array])
            kind, what, waiting = message
            message = None
            if kind == "hop":
                callee, callee_args, depth, context = what
                what = None
                message = _start_segment(callee, callee_args, depth, context, waiting)
                callee = callee_args = None
            elif waiting is not None:   # a segment returned: what is its outcome
                box, what = [what], None
                message = waiting.switch(box)   # (emptied by _hop)
            else:
                break
    finally:
        _eager.hub = None
        _eager.depth = 0
        _eager.address_space_limit = None
        _eager.free_credit = None
    ok, value = what
    if not ok:
        raise value
    return value


def _start_segment(fn, args, depth, context, waiting):
    segment = greenlet.greenlet(_run_segment)
    segment.gr_context = context     # shared: a ContextVar set in it is set for the caller
    return segment.switch(fn, args, depth, waiting)


def _run_segment(fn, args, depth, waiting):
    """The body of a segment: ``("return", (ok, value or exception), waiting)`` to the hub."""
    _eager.depth = depth
    try:
        outcome = (True, fn(*args))
    except greenlet.GreenletExit:   # the segment is being collected (its hub has gone)
        raise
    except BaseException as exc:  # noqa: B902 - handed to the waiting caller
        outcome = (False, exc)
    _eager.depth = depth - 1
    return ("return", outcome, waiting)


def _hop(fn, args, depth):
    """Run the call at ``depth`` in a new segment; wait for it (NOTE [eager recursion stack])."""
    current = greenlet.getcurrent()
    ok, value = _eager.hub.switch(("hop", (fn, args, depth, current.gr_context), current)).pop()
    if not ok:
        raise value
    return value


# NOTE [address-space headroom]
#     Under an address-space limit (RLIMIT_AS, what ``ulimit -v`` sets), MXNet 1.9.1 does not
#     survive running out: a ``std::bad_alloc`` in an engine thread, in a CachedOp call or in
#     an NDArray's destructor terminates the process (SIGABRT, once SIGSEGV), where Python's
#     own allocations would raise MemoryError. A deep eager recursion whose autograd record
#     grows with its depth reaches the limit inside an operator: a 19,999-level
#     TopDownTreeLSTM chain with gradients (~3.7 GB) died so under 2 GiB, a different way on
#     each of three runs. So while a limit is set, every nested eager call checks the address
#     space (``/proc/self/statm``, ~12 us) before it runs and after it returns, and with less
#     than ``ADDRESS_SPACE_HEADROOM`` left raises :class:`AddressSpaceError` (a MemoryError)
#     naming the function, the depth and the limit, at the user's call: the calls unwind,
#     what they recorded is freed, and the process goes on. The headroom is what MXNet needs
#     to finish the operators in flight and free the record (one level adds < 1 MiB); the
#     check is only a guard: ``backward``, which needs about as much again as the forward
#     recorded, runs inside MXNet, which then fails with its own ``MXNetError`` (bad_alloc),
#     the process alive (measured: TreeLSTM, RNTN, ChildSumTreeLSTM chains under 2 GiB).
#
# NOTE [memory after an address-space error]
#     The error must leave the process able to run a recursion that fits. A TopDownTreeLSTM
#     chain (H = 256) stopped at depth ~15,200 with 946 MB still allocated after the error had
#     reached the user: its tree's record sat in a reference cycle (a recursive function
#     defined in ``hybrid_forward`` holds itself through its closure, and the closure held
#     the tree's heads), freed only at Python's next full collection, so the next call, of
#     10,000 levels, stopped at depth 443. The model now empties what its closure holds when
#     a call fails, and the outermost call runs ``gc.collect()`` before raising an
#     ``AddressSpaceError`` (a user's recursive function may hold as much in a cycle): 59 MB
#     allocated after it. glibc keeps the address space it reserved (VmSize ~1,960 of
#     2,048 MiB: ``malloc_trim`` returned 1 MiB, a live chunk pins each arena's heaps), and
#     the next call's allocations reuse the freed memory inside it. But VmSize alone would
#     stop the next call at once where it stayed within the headroom of the limit. So when
#     the address space lacks the headroom, the check counts what malloc holds free
#     (``mallinfo2``, glibc's; ~5 ms with 70,000 free chunks, so read again only after as
#     many checks as the slack has 2 MiB, or when VmSize has grown), and never lets VmSize
#     come within ``ADDRESS_SPACE_FLOOR`` of the limit (malloc may need fresh space for a
#     size its free chunks do not fit). Where it cannot be read (not glibc) only VmSize
#     counts, as before. Tests: tests/test_eager_depth_memory.py.
#
#     What a check that passes guarantees: ``ADDRESS_SPACE_FLOOR`` of fresh address space,
#     and ``ADDRESS_SPACE_HEADROOM`` of fresh space and free chunks together. The free bytes
#     are not all reusable: small fragments stay free while VmSize grows (in that test's
#     first call, mallinfo2 read ~20.4 MiB free at every reading while VmSize grew 20 MiB
#     into the headroom, to 44 MiB below the limit), so the credit moves the stop by at most
#     the headroom less the floor, and what is sure is the floor: 16 MiB, where one level
#     allocates < 1 MiB between two checks, is what MXNet needs to finish the operators in
#     flight and, after an error, to free the record (the unwinding allocates little).
#     After the outermost call returns no check runs, so what the caller allocates next must
#     fit in what is left (the floor at worst); a block larger than that is MXNet's bad_alloc
#     ("Failed to allocate CPU Memory"), the process alive. So gluon_cf's models allocate
#     nothing of the recursion's size in one block after it: TopDownTreeLSTM's one
#     ``concat`` of all heads was 78 MiB at H = 256 and 10,000 levels, more than the
#     headroom itself, and failed that test's second call about 1 run in 8 (VmSize before it
#     1,642-1,962 MiB from run to run, under 2,048; 3 of 5 runs peaked within 0.4 MiB of the
#     limit). It now sums them in 1 MiB pieces (NOTE [eager top-down tree]): VmSize does not
#     grow past the start of the sum (15 runs). The second call itself reused the first's
#     freed memory, more than the headroom below the limit, and never read mallinfo2.

ADDRESS_SPACE_HEADROOM = 64 << 20
ADDRESS_SPACE_FLOOR = 16 << 20    # left unreserved whatever malloc holds free


def _address_space_limit():
    """RLIMIT_AS in bytes, or None where there is none (or no /proc to measure against it)."""
    try:
        import resource
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        _address_space()
    except (ImportError, OSError, ValueError):
        return None
    return None if limit == resource.RLIM_INFINITY else limit


def _address_space():
    """The address space of this process, bytes (VmSize)."""
    fd = os.open("/proc/self/statm", os.O_RDONLY)
    try:
        return int(os.read(fd, 64).split()[0]) * _PAGE_SIZE
    finally:
        os.close(fd)


_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
if _address_space_limit() is not None:   # before MXNet's first operator starts its threads
    malloc_arenas.cap_arenas()   # NOTE [malloc arenas under a limit]


def _check_headroom(fn, depth):
    """``AddressSpaceError`` if less than ``ADDRESS_SPACE_HEADROOM`` of the address-space
    limit is left (NOTE [address-space headroom])."""
    used, limit = _address_space(), _eager.address_space_limit
    if used + ADDRESS_SPACE_HEADROOM > limit and not _freed_memory_covers(used, limit):
        raise AddressSpaceError(
            "gluon_cf.recursive: %r stopped at depth %d of nested calls: the process's address "
            "space is %d MiB, within %d MiB of its limit of %d MiB (RLIMIT_AS, ulimit -v), and "
            "MXNet aborts the process when an operator runs out of it; the calls are "
            "unwound and what they hold is released. This recursion needs a higher limit, "
            "or less address space reserved before it (OMP_NUM_THREADS=1 in the environment "
            "saves 128 MiB a core; import gluon_cf before MXNet's first operator: it caps "
            "glibc's malloc arenas under a limit, ~256 MiB with 2 cores)"
            % (fn.name, depth, used >> 20, ADDRESS_SPACE_HEADROOM >> 20, limit >> 20))


def _freed_memory_covers(used, limit):
    """Whether memory free inside malloc's heaps makes up the headroom that the address
    space lacks (NOTE [memory after an address-space error])."""
    if used + ADDRESS_SPACE_FLOOR > limit:
        return False
    credit = _eager.free_credit   # (address space when read, checks it covers unread)
    if credit is not None and used <= credit[0] and credit[1] > 0:
        _eager.free_credit = (credit[0], credit[1] - 1)
        return True
    free = malloc_arenas.free_bytes()
    slack = -1 if free is None else limit - ADDRESS_SPACE_HEADROOM - (used - free)
    # a check's level allocates well under 2 MiB: the next checks cannot use up the slack
    _eager.free_credit = (used, slack >> 21) if slack > 0 else None
    return slack > 0


def _cut_traceback(exc):
    """Keep the first and last frames of a long traceback (thousands of recursive levels)."""
    entries = []
    tb = exc.__traceback__
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    if len(entries) > 3 * _TRACEBACK_ENDS:
        entries[_TRACEBACK_ENDS - 1].tb_next = entries[-_TRACEBACK_ENDS]
        exc.add_note("(gluon_cf: %d frames of recursive calls left out of this traceback)"
                     % (len(entries) - 2 * _TRACEBACK_ENDS))


# ---- symbolic mode: function table, discovery, invoke nodes -------------------------------------

class _Table:
    """The functions reachable from one outermost call, while they are being traced."""

    current = threading.local()

    def __init__(self):
        self.namespace = uuid.uuid4().hex[:10]
        self.qnames = {}        # RecursiveFunction -> qualified name in this table
        self.signatures = {}    # RecursiveFunction -> (num_args, arg_fmt, out_fmt, num_outputs)
        self.discovering = []
        self.traced = {}        # RecursiveFunction -> Traced (real trace)
        self.pending = []
        self.first_trace = trace_mark()   # the traces of the table's functions come after

    def qname(self, fn):
        if fn not in self.qnames:
            self.qnames[fn] = "%s_%d@%s" % (fn.name, len(self.qnames), self.namespace)
        return self.qnames[fn]

    def _trace(self, fn, num_args, arg_fmt, role):
        def body(values):
            value = fn.fn(*regroup(values, arg_fmt))
            try:
                flatten(value, "gluon_cf.recursive", "")
            except TypeError:   # (named by the trace's role, 'node_discover', otherwise)
                raise TypeError("%sgluon_cf.recursive: %r returned %s, not an NDArray/Symbol "
                                "or a (nested) list of them: every path through its body must "
                                "return its value" % (_located(fn), fn.name,
                                                      _described(value))) from None
            return value
        return trace("recursive", "%s_%s" % (fn.name, role), num_args, body)

    def signature(self, fn, num_args, arg_fmt):
        sig = self.signatures.get(fn)
        if sig is not None:
            if sig[:2] != (num_args, arg_fmt):
                raise TypeError("%sgluon_cf.invoke: %r is called with arguments %s here, but "
                                "with %s elsewhere; every call must pass the same structure"
                                % (_at_call(), fn.name, describe(arg_fmt),
                                   describe(sig[1])))
            return sig
        if fn in self.discovering:
            raise PendingSignature(fn)
        self.discovering.append(fn)
        try:
            traced = self._trace(fn, num_args, arg_fmt, "discover")
        except PendingSignature as pending:
            if pending.key is fn:
                raise ValueError("%sgluon_cf.recursive: %r has no base case: every path "
                                 "through its body calls %r again. Put the recursive call in a "
                                 "gluon_cf.cond branch and return without recursing in the "
                                 "other (F.where computes both sides)" %
                                 (_located(fn), fn.name, fn.name)) from None
            raise
        finally:
            self.discovering.remove(fn)
        sig = self.signatures[fn] = (num_args, arg_fmt, traced.out_fmt, traced.num_outputs)
        self.pending.append(fn)
        return sig

    def trace_body(self, fn):
        """A trace of the body of ``fn``, whose signature is known."""
        num_args, arg_fmt, _, _ = self.signatures[fn]
        return self._trace(fn, num_args, arg_fmt, "body")

    def trace_pending(self):
        while self.pending:
            fn = self.pending.pop()
            if fn in self.traced:
                continue
            out_fmt = self.signatures[fn][2]
            before, made = python_state.snapshot(fn.fn), next(_MADE)   # NOTE [Python state in
            traced = self.trace_body(fn)                                # a recursive body]
            python_state.check_trace(fn, before, traced, self, made)
            if traced.out_fmt != out_fmt:
                raise ValueError("%sgluon_cf.recursive: %r returns %s on one path and %s on "
                                 "another" % (_located(fn), fn.name, describe(out_fmt),
                                              describe(traced.out_fmt)))
            self.traced[fn] = traced


# the code of _Table._trace's body: a call's walk up the stack ends at its function's trace
_BODY_CODE = next(c for c in _Table._trace.__code__.co_consts
                  if isinstance(c, types.CodeType) and c.co_name == "body")


def _described(value):
    """What a returned value is, for an error: ``None``, ``a list holding None``..."""
    if isinstance(value, (list, tuple)):
        return "a %s holding %s" % (type(value).__name__, ", ".join(
            sorted({type(v).__name__ for v in value})))
    return "None" if value is None else "a %s" % type(value).__name__


def _at_call():
    """``"file:line: "`` of the user's call being run (or "")."""
    where = user_location()
    return "%s: " % where if where else ""


def _located(fn):
    """``"file:line: "`` of the user's ``def`` of recursive function ``fn`` (or "")."""
    where = _source(fn.fn)
    return "%s: " % where if where else ""


def _source(fn):
    """``file:line`` where the user's function is defined (for warnings about it)."""
    code = getattr(fn, "__code__", None)
    return "%s:%d" % (code.co_filename, code.co_firstlineno) if code is not None else None


def _invoke_symbolic(fn, flat, fmt):
    table = getattr(_Table.current, "value", None)
    if table is not None:
        refusals.refuse_call_inside_mxnet_control_flow(fn, _BODY_CODE)
        _, _, out_fmt, num_outputs = table.signature(fn, len(flat), fmt)
        spec = {"graphs": {}, "function": table.qname(fn), "num_outputs": num_outputs}
        return regroup(_node.make_node("invoke", flat, spec, fn.name, user_location()), out_fmt)
    # The outermost call: build the function table, then one recursion node.
    table = _Table.current.value = _Table()
    try:
        _, _, out_fmt, num_outputs = table.signature(fn, len(flat), fmt)
        table.trace_pending()
    finally:
        _Table.current.value = None
    fns = list(table.traced)
    refusals.refuse_captured_invocation_values(table.traced, _located, table.first_trace)
    env, slot_of = merge_captures("recursive", [table.traced[f] for f in fns], first_slot=0)
    functions = {}
    for f in fns:
        n = table.signatures[f][0]
        functions[table.qname(f)] = dict(
            table.traced[f].spec(range(n), {k: n + v for k, v in slot_of.items()}),
            num_args=n, max_depth=f.max_depth, name=f.name, source=_source(f.fn))
        if f.remat:
            functions[table.qname(f)]["remat"] = True
    spec = {"graphs": functions, "entry": table.qname(fn), "num_args": len(flat),
            "num_outputs": num_outputs, "namespace": table.namespace}
    return regroup(_node.make_node("recursion", flat + env, spec, fn.name,
                                     user_location()), out_fmt)
