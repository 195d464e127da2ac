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
import itertools
import os
import queue
import sys
import threading
import uuid
import weakref
from typing import Callable, Optional, Union, overload

import mxnet as mx

from .. import node as _node
from .._structure import describe, flatten, regroup
from ..checks import check_callable, mode_of
from ..remat import Remat, check_remat
from ..errors import RecursionDepthError
from ..tracing import PendingSignature, merge_captures, trace
from .._typing import Arrays

DEFAULT_MAX_DEPTH = 20000


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
                 max_depth: int = DEFAULT_MAX_DEPTH) -> None:
        check_callable("recursive", fn=fn)
        if not isinstance(max_depth, int) or isinstance(max_depth, bool) or max_depth < 1:
            raise ValueError("gluon_cf.recursive: max_depth must be a positive int, got %r"
                             % (max_depth,))
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "recursive")
        self.max_depth = max_depth
        self.uid = next(self._ids)

    def __call__(self, *args: Arrays) -> Arrays:
        """The call, same as ``invoke(self, *args)`` (which calls this)."""
        flat, fmt = flatten(list(args), "gluon_cf.invoke", "the arguments of %r" % self.name)
        mode = mode_of("invoke", flat, "the arguments of %r" % self.name)
        if mode == "symbol":
            return _invoke_symbolic(self, flat, fmt)
        # Eager mode, inline (every frame of a level counts, NOTE [eager recursion stack]).
        depth = getattr(_eager, "depth", 0) + 1
        if depth > self.max_depth:
            raise RecursionDepthError("gluon_cf.recursive: %r exceeded max_depth=%d nested calls; "
                                      "does it reach a base case?"
                                      % (self.name, self.max_depth))
        try:
            if depth > 1 and _stack_is_deep():
                return _call_on_hop_thread(self, args, depth)
            _eager.depth = depth
            try:
                return self.fn(*args)
            finally:
                _eager.depth = depth - 1
        except BaseException as exc:
            if depth == 1:
                if isinstance(exc, RecursionDepthError):   # the user's call is where it happened
                    raise exc.with_traceback(None) from None
                _cut_traceback(exc)
            raise

    def __repr__(self):
        return "<gluon_cf.recursive %s>" % self.name


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
    if check_remat("recursive", remat) is not False:
        raise NotImplementedError(
            "gluon_cf.recursive: remat=%r is not implemented yet for recursive functions (only "
            "foreach and while_loop rematerialise); use remat=False" % (remat,))
    if fn is None:
        return lambda f: RecursiveFunction(f, name=name, max_depth=max_depth)
    return RecursiveFunction(fn, name=name, max_depth=max_depth)


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
#     around depth 6,000. Instead, whenever the current thread holds all but ``_HEADROOM`` of the
#     frames the recursion limit allows, the next call continues on another thread (a fresh
#     Python and C stack) while the caller waits for it. The recursion limit is never touched,
#     and depth is bounded only by ``max_depth``. The hop thread gets the caller's MXNet
#     thread-local state (autograd recording and training mode, default context, NumPy shape
#     semantics), so values and gradients are those of plain recursion. Exceptions travel back
#     to the caller; at the outermost call their traceback is cut to its two ends.
#
#     Hop threads are a pool, reused across hops and calls, and each level costs as few frames
#     of ours as it can (``invoke`` runs the eager call inline). A thread is not cheap: besides
#     its stack, MXNet keeps about 4.5 MB per thread that ever ran an operator with attributes
#     (``take``, ``FullyConnected``, scalar arithmetic), never returned, even when the thread
#     ends. Once, every hop started a new thread with the default 8 MB stack: a 19,999-deep
#     TreeRNN chain held ~400 threads and ~9 GB of address space, and every deep call leaked its
#     threads' MXNet memory again. Now a chain of that depth holds ~150 hop threads (~3.5 GB), each
#     with a ``_HOP_STACK`` stack, and the pool's threads are paid for once per process.
#     ``_HOP_STACK`` holds ``_HEADROOM`` + the frames of one hop with a wide margin: Python 3.11
#     keeps Python frames off the C stack, and a level's C frames are a few hundred bytes.

_eager = threading.local()
_HEADROOM = 400             # frames of the recursion limit left to the code between two calls
_HOP_STACK = 2 << 20        # C stack of a hop thread (bytes)
_TRACEBACK_ENDS = 12        # frames kept at each end of a traceback cut at the outermost call


def _stack_is_deep():
    try:
        # C-speed walk: raises if the stack is shallower
        sys._getframe(max(50, sys.getrecursionlimit() - _HEADROOM))
    except ValueError:
        return False
    return True


class _HopPool:
    """Idle hop threads, each waiting on its own job queue (NOTE [eager recursion stack])."""

    def __init__(self):
        self.lock = threading.Lock()
        self.idle = []              # job queues of idle threads
        self.started = 0

    def run(self, job):
        """Run ``job()`` on an idle hop thread (a new one if none is idle); wait for it."""
        with self.lock:
            jobs = self.idle.pop() if self.idle else None
        if jobs is None:
            jobs = self._start()
        outcome = []
        finished = threading.Event()
        jobs.put((job, outcome, finished))
        finished.wait()
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    def _start(self):
        jobs = queue.SimpleQueue()
        with self.lock:
            self.started += 1
            name = "gluon_cf eager recursion %d" % self.started
            # threading has no per-thread stack size: set it for this start only.
            previous = threading.stack_size(_HOP_STACK)
            try:
                threading.Thread(target=self._serve, args=(jobs,), name=name,
                                 daemon=True).start()
            finally:
                threading.stack_size(previous)
        return jobs

    def _serve(self, jobs):
        while True:
            job, outcome, finished = jobs.get()
            try:
                outcome.append((True, job()))
            except BaseException as exc:  # noqa: B902 - handed to the waiting caller
                outcome.append((False, exc))
            del job, outcome
            with self.lock:
                self.idle.append(jobs)
            finished.set()

    def forget(self):
        """After ``fork``: the child has none of the parent's threads."""
        self.lock = threading.Lock()
        self.idle = []


_hops = _HopPool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_hops.forget)


def _call_on_hop_thread(fn, args, depth):
    """Run the invocation at ``depth`` on a hop thread with the caller's MXNet state."""
    recording, training = mx.autograd.is_recording(), mx.autograd.is_training()
    device = mx.context.current_context()
    np_shape = mx.util.is_np_shape()

    def job():
        mx.autograd.set_recording(recording)
        mx.autograd.set_training(training)
        mx.util.set_np_shape(np_shape)
        _eager.depth = depth
        with device:
            return fn.fn(*args)

    return _hops.run(job)


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

    def qname(self, fn):
        if fn not in self.qnames:
            self.qnames[fn] = "%s_%d@%s" % (fn.name, len(self.qnames), self.namespace)
        return self.qnames[fn]

    def _trace(self, fn, num_args, arg_fmt, role):
        return trace("recursive", "%s_%s" % (fn.name, role), num_args,
                     lambda vs: fn.fn(*regroup(vs, arg_fmt)))

    def signature(self, fn, num_args, arg_fmt):
        sig = self.signatures.get(fn)
        if sig is not None:
            if sig[:2] != (num_args, arg_fmt):
                raise TypeError("gluon_cf.invoke: %r is called with arguments %s here, but with "
                                "%s elsewhere; every call must pass the same structure"
                                % (fn.name, describe(arg_fmt), describe(sig[1])))
            return sig
        if fn in self.discovering:
            raise PendingSignature(fn)
        self.discovering.append(fn)
        try:
            traced = self._trace(fn, num_args, arg_fmt, "discover")
        except PendingSignature as pending:
            if pending.key is fn:
                raise ValueError("gluon_cf.recursive: %r has no base case: every path through its "
                                 "body calls %r again. Put the recursive call in a gluon_cf.cond "
                                 "branch and return without recursing in the other" %
                                 (fn.name, fn.name)) from None
            raise
        finally:
            self.discovering.remove(fn)
        sig = self.signatures[fn] = (num_args, arg_fmt, traced.out_fmt, traced.num_outputs)
        self.pending.append(fn)
        return sig

    def trace_pending(self):
        while self.pending:
            fn = self.pending.pop()
            if fn in self.traced:
                continue
            num_args, arg_fmt, out_fmt, _ = self.signatures[fn]
            traced = self._trace(fn, num_args, arg_fmt, "body")
            if traced.out_fmt != out_fmt:
                raise ValueError("gluon_cf.recursive: %r returns %s on one path and %s on another"
                                 % (fn.name, describe(out_fmt), describe(traced.out_fmt)))
            self.traced[fn] = traced


def _source(fn):
    """``file:line`` where the user's function is defined (for warnings about it)."""
    code = getattr(fn, "__code__", None)
    return "%s:%d" % (code.co_filename, code.co_firstlineno) if code is not None else None


def _invoke_symbolic(fn, flat, fmt):
    table = getattr(_Table.current, "value", None)
    if table is not None:
        _, _, out_fmt, num_outputs = table.signature(fn, len(flat), fmt)
        spec = {"graphs": {}, "function": table.qname(fn), "num_outputs": num_outputs}
        return regroup(_node.make_node("invoke", flat, spec, fn.name), out_fmt)
    # The outermost call: build the function table, then one recursion node.
    table = _Table.current.value = _Table()
    try:
        _, _, out_fmt, num_outputs = table.signature(fn, len(flat), fmt)
        table.trace_pending()
    finally:
        _Table.current.value = None
    fns = list(table.traced)
    env, slot_of = merge_captures("recursive", [table.traced[f] for f in fns], first_slot=0)
    functions = {}
    for f in fns:
        n = table.signatures[f][0]
        functions[table.qname(f)] = dict(
            table.traced[f].spec(range(n), {k: n + v for k, v in slot_of.items()}),
            num_args=n, max_depth=f.max_depth, name=f.name, source=_source(f.fn))
    spec = {"graphs": functions, "entry": table.qname(fn), "num_args": len(flat),
            "num_outputs": num_outputs, "namespace": table.namespace}
    return regroup(_node.make_node("recursion", flat + env, spec, fn.name), out_fmt)
