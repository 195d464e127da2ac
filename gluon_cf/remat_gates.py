"""Variables that eager remat recursive calls read in place of their closure arrays, and those
arrays' gradients written once per backward pass (NOTE [closure gradients per backward pass]).

NOTE [closure gradients per backward pass]
    The nodes of eager remat calls (NOTE [rematerialised recursive calls]) list every array
    their body may read from its closure (all of a block's parameters) as inputs. Read
    directly, a parameter no call read got a gradient of 0 and MXNet's fresh flag (NOTE
    [parameters no step reads]); read through one node per outermost call, a batch of several
    trees (several outermost calls, one ``backward``) gave a parameter several readers, which
    MXNet sums and writes, so an unread one was written 0 again (Adam then moved it). One node
    shared by the outermost calls while on the tape fixed that, but two outermost calls in one
    ``record()`` backpropagated separately (``y1.backward(); y2.backward()``, which plain
    MXNet runs) failed: the first ``backward`` clears the graph it ran, that shared node with
    it, and the second found it cleared (MXNet's "any container is empty" or "There are no
    inputs in computation graph that require gradients").

    So the calls read a :class:`Gate`'s *variables* instead: arrays sharing the closure
    arrays' memory, marked (``mark_variables``, buffers of their own, ``'write'``), which no
    ``backward`` clears; the calls' backward still recomputes from the closure arrays
    themselves and records which it read (:meth:`Gate.reading`). A ``backward`` pass
    (``NDArray.backward``, ``autograd.backward``) then, around MXNet's:

    * before: clears the fresh flag of every live gate's closure arrays, keeping the old ones
      (MXNet sets the flag of each variable of the graph it differentiates, synchronously:
      afterwards a set flag means the pass read the array directly too);
    * after (the engine waited for, NOTE [a remat backward reads what it recomputes from]):
      for every closure array some call of the pass read, the sum of its gates' variables'
      gradients is added to its gradient where the pass read it directly too (MXNet wrote
      that part by its ``grad_req``), and otherwise handed to it by one more node reading
      it (``_hand``: MXNet writes or adds by its ``grad_req`` and marks it fresh); an array
      nothing in the pass read gets its old flag back, its gradient untouched.

    So whatever one ``backward`` covers (one call, a batch of trees summed, two calls'
    results in ``autograd.backward([y1, y2])``, one of two calls, again with
    ``retain_graph``) is one gate pass, and the parameters' gradients and fresh flags are
    plain MXNet's. ``autograd.grad`` asked for a closure array also asks for its gates'
    variables and adds theirs; asked for other arrays only, what its calls read is dropped
    (before, the next pass of the process, plain code's too, added those stale gradients).
    A gate lives while a call's node reads it (the cache holds it weakly); its buffers are
    the size of the closure arrays. Backward passes on MXNet's own threads (inside a Custom
    operator's or a remat node's backward) are left as they are; the user's pass around them
    moves what they wrote.

    Gates belong to the thread that recorded their calls, and a pass clears the flags of and
    moves its own thread's (a plain pass in another thread cleared this thread's parameters'
    flags while it ran, for a ``Trainer.step`` there to refuse as stale, and took the gates
    this thread's calls had read), and, where another thread's gates are alive, those of
    them its heads reach (the variables of its recorded graph, ``list_inputs``: never
    ``tojson``, NOTE [tojson keeps custom nodes alive]): so a ``backward`` or
    ``autograd.grad`` in a worker thread of a ``record()`` in this one is plain MXNet's. Each
    thread has a lock its passes hold, and a pass reaching other threads' gates holds their
    owners' too (taken in one order), so it never interleaves with the owners' passes over
    the same gates' flags and read sets. (A pass of this thread whose backward waits for
    another thread's pass reaching this thread's gates, from inside a Custom operator,
    would wait for good: not a program met so far.) A call whose backward runs outside such
    a pass (MXNet's ``autograd.backward`` bound before gluon_cf was imported, ``from
    mxnet.autograd import backward``) is refused (``Call.backward``): nothing would move its
    gradients.
"""
import threading
import weakref

import mxnet as mx
from mxnet import autograd

from . import remat_record as _record
from .node import _NOT_CONNECTED

_live: "weakref.WeakSet[Gate]" = weakref.WeakSet()   # gates whose variables calls read
_passed: dict = {}   # id(gate) -> gate: gates some call's backward read through since the last pass
_lock = threading.Lock()   # (calls' backward run on MXNet's threads)
_running: dict = {}   # thread id -> the passes through the wrappers it is running
_owners: dict = {}   # thread id -> the lock its passes and others' passes on its gates hold


def in_pass(gate):
    """Whether a backward pass through the wrappers moves what ``gate``'s calls' backward
    reads: one of the thread that recorded them, or one in another thread reaching them (not
    one of MXNet's functions bound before gluon_cf was imported)."""
    return gate.owner in _running or gate.adopted > 0


def _inputs_of(heads):
    return set(mx.sym.Group([autograd.get_symbol(h) for h in heads]).list_inputs())


def _enter(heads=None, reached=None):
    """Start a pass of this thread whose heads are ``heads()`` (or whose graph's variables
    are ``reached``): its gates are this thread's and those of other threads it reaches
    (NOTE [closure gradients per backward pass]). Returns (gates, adopted, locks held)."""
    me = threading.get_ident()
    mine: "list[Gate]" = []
    foreign: "list[Gate]" = []
    for gate in list(_live):
        (mine if gate.owner == me else foreign).append(gate)
    if foreign:
        if reached is None and heads is not None:
            try:
                reached = _inputs_of(heads())
            except (mx.MXNetError, AttributeError, TypeError, KeyError, IndexError):
                reached = set()   # (MXNet refuses such heads itself)
        foreign = [gate for gate in foreign if reached and gate.reached_by(reached)]
    with _lock:
        held = [_owners.setdefault(owner, threading.RLock())
                for owner in sorted({me} | {gate.owner for gate in foreign})]
    taken = 0
    try:
        for lock in held:   # (in one order: no two passes wait for each other)
            lock.acquire()
            taken += 1
    except BaseException:   # (KeyboardInterrupt while waiting: a lock kept would hang
        for lock in reversed(held[:taken]):   # its owner's next pass for good)
            lock.release()
        raise
    with _lock:
        _running[me] = _running.get(me, 0) + 1
        for gate in foreign:
            gate.adopted += 1
    return mine + foreign, foreign, held


def _leave(adopted, held):
    me = threading.get_ident()
    with _lock:
        _running[me] -= 1
        if not _running[me]:
            del _running[me]
        for gate in adopted:
            gate.adopted -= 1
    for lock in reversed(held):
        lock.release()


class Gate:
    """Marked variables standing for ``closure`` in the nodes of remat calls."""

    _cache = threading.local()

    def __init__(self, closure):
        self.closure = list(closure)
        self.variables = _record.fresh(self.closure)
        self.read: set = set()   # ids of the closure arrays the calls' backward read
        self.owner = threading.get_ident()   # (the cache is per thread: so are passes)
        self.adopted = 0   # passes of other threads reaching its calls running
        self.names: list = []   # its variables' names in recorded graphs
        # ids of those with a gradient of a storage type other than dense: remat carries
        # dense gradients only, a call reading one is refused (Call.backward)
        self.sparse = {id(c) for c in self.closure if c.grad.stype != "default"}
        if self.closure:
            # (not filled: a pass reaching them writes them, and only such a pass reads them)
            autograd.mark_variables(self.variables, [mx.nd.empty(c.shape, c.context, c.dtype)
                                                     for c in self.closure], "write")
            _live.add(self)

    @classmethod
    def of(cls, closure):
        """The gate of ``closure``'s arrays (the same arrays, the same gate while alive)."""
        gates = cls._cache.__dict__.setdefault("gates", weakref.WeakValueDictionary())
        key = tuple(id(c) for c in closure)
        gate = gates.get(key)
        if gate is None or any(a is not b for a, b in zip(gate.closure, closure)):
            gate = gates[key] = cls(closure)
        return gate

    def reached_by(self, reached):
        """Whether a graph whose variables are named ``reached`` reads this gate."""
        if not self.names:
            self.names = [_record._leaf_name(v) for v in self.variables]
        return any(name in reached for name in self.names)

    def reading(self, arrays):
        """A call's backward read ``arrays`` (closure arrays) from its recomputation."""
        with _lock:
            self.read.update(id(a) for a in arrays)
            _passed[id(self)] = self


def _taken(adopted=()):
    """The gates of this thread and ``adopted`` read through since its last pass, and their
    read sets, emptied."""
    me = threading.get_ident()
    others = {id(gate) for gate in adopted}
    with _lock:
        gates = [gate for gate in _passed.values() if gate.owner == me or id(gate) in others]
        for gate in gates:
            del _passed[id(gate)]
        reads = [(gate, gate.read) for gate in gates]
        for gate in gates:
            gate.read = set()
    return reads


def _before(heads):
    gates, adopted, held = _enter(heads)
    saved = {}
    for gate in gates:
        for c in gate.closure:
            if id(c) not in saved:
                saved[id(c)] = (c, c._fresh_grad)
                c._fresh_grad = False
    return saved, adopted, held


def _after(state, failed):
    saved, adopted, held = state
    try:
        _move(saved, _taken(adopted), failed)
    finally:
        _leave(adopted, held)


def _move(saved, reads, failed):
    if failed:
        for c, was in saved.values():
            if not c._fresh_grad:
                c._fresh_grad = was
        return
    grads: dict = {}   # id(closure array) -> (array, its gates' variables' gradients)
    for gate, read in reads:
        for c, v in zip(gate.closure, gate.variables):
            if id(c) in read:
                grads.setdefault(id(c), (c, []))[1].append(v.grad)
    handed = []
    for key, (c, parts) in grads.items():
        total = parts[0] if len(parts) == 1 else mx.nd.add_n(*parts)
        if key in saved and c._fresh_grad:   # read directly too: MXNet wrote that part
            c.grad[:] += total
        else:
            handed.append((c, total))
    for key, (c, was) in saved.items():
        if key not in grads and not c._fresh_grad:
            c._fresh_grad = was
    if handed:
        _hand(handed)


def _hand(pairs):
    """Give each array its gradient as MXNet gives a variable's (by its ``grad_req``, marked
    fresh): one node reading them, backpropagated."""
    arrays, grads = [c for c, _ in pairs], [g for _, g in pairs]
    outputs = _record.fresh(arrays)
    with autograd.record():
        _record.record_node(arrays, outputs, lambda _: grads)
    try:
        _record.unsynchronised_backward(outputs, grads)
    except mx.MXNetError as err:   # (only 'null' arrays: nothing to write)
        if _NOT_CONNECTED not in str(err):
            raise
    mx.nd.waitall()


_record.pass_hooks.append((_before, _after))
_grad = autograd.grad


def grad(heads, variables, head_grads=None, retain_graph=None, create_graph=False,
         train_mode=True):
    """MXNet's ``autograd.grad``, a closure array's gradient through the gates' variables added
    to the one MXNet gives (NOTE [closure gradients per backward pass]); an array neither read
    directly nor by a call refused as MXNet refuses one it cannot reach."""
    if not _live or _record.on_mxnet_thread():
        return _grad(heads, variables, head_grads, retain_graph, create_graph, train_mode)
    single = isinstance(variables, mx.nd.NDArray)
    xs = [variables] if single else list(variables)
    hs = [heads] if isinstance(heads, mx.nd.NDArray) else list(heads)
    try:
        if any(x.grad is None for x in xs):
            raise mx.MXNetError("not a variable")
        reached = _inputs_of(hs)
    except (mx.MXNetError, AttributeError):   # MXNet's own refusal, from MXNet
        reached = set()
        xs = []
    gates, adopted, held = _enter(reached=reached)
    try:
        position = {id(x): k for k, x in enumerate(xs)}
        standing = [(gate, c, v) for gate in gates for c, v in zip(gate.closure, gate.variables)
                    if id(c) in position and _record._leaf_name(v) in reached]
        direct = [x for x in xs if _record._leaf_name(x) in reached]
        if not gates:
            return _grad(heads, variables, head_grads, retain_graph, create_graph, train_mode)
        if not standing:   # (the calls' backward it runs read gates: not this pass's to
            try:           # move, and not the next pass's either)
                return _grad(heads, variables, head_grads, retain_graph, create_graph,
                             train_mode)
            finally:
                mx.nd.waitall()
                _taken(adopted)
        try:
            got = _grad(heads, direct + [v for _, _, v in standing], head_grads, retain_graph,
                        create_graph, train_mode)
            mx.nd.waitall()   # (the calls' backward, which read the gates)
        finally:
            read = {id(gate): r for gate, r in _taken(adopted)}
    finally:
        _leave(adopted, held)
    out: list = [None] * len(xs)
    for x, g in zip(direct, got):
        out[position[id(x)]] = g
    for (gate, c, _), g in zip(standing, got[len(direct):]):
        if id(c) in read.get(id(gate), ()):
            k = position[id(c)]
            out[k] = g if out[k] is None else out[k] + g
    for k, g in enumerate(out):
        if g is None:
            raise mx.MXNetError(
                "Cannot differentiate with respect to the %d-th variable because it is "
                "unreachable from the outputs (no operator and no remat call read it)" % (k + 1))
    return out[0] if single else out


autograd.grad = grad
