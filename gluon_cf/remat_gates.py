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
    operator's or a remat node's backward) are left as they are, the user's pass around them
    moving what they wrote, except one reaching live gates from a Custom operator's backward
    (NOTE [a backward inside a Custom operator's backward]).

    Gates belong to the thread that recorded their calls, and a pass clears the flags of and
    moves its own thread's (a plain pass in another thread cleared this thread's parameters'
    flags while it ran, for a ``Trainer.step`` there to refuse as stale, and took the gates
    this thread's calls had read), and, where another thread's gates are alive, those of
    them its heads reach (the variables of its recorded graph, ``list_inputs``: never
    ``tojson``, NOTE [tojson keeps custom nodes alive]): so a ``backward`` or
    ``autograd.grad`` in a worker thread of a ``record()`` in this one is plain MXNet's. Each
    thread has a lock its passes hold, and a pass reaching other threads' gates holds their
    owners' too (taken in one order), so it never interleaves with the owners' passes over
    the same gates' flags and read sets. (A pass of this thread whose backward waits, from
    inside a Custom operator's or ``autograd.Function``'s backward, for an ordinary thread
    whose pass reaches this thread's gates waits for good: that pass waits for this thread's
    lock, held by the pass waiting for the Custom operator. Reproduced: a Function whose
    backward runs ``y.backward()`` of this thread's calls in a ``threading.Thread`` and joins
    it; not fixed: that thread cannot tell it is waited for. A pass started on MXNet's
    threads never waits for a lock: NOTE [a backward inside a Custom operator's
    backward].) A call whose backward runs outside such a pass (MXNet's ``autograd.backward``
    bound before gluon_cf was imported, ``from mxnet.autograd import backward``) is refused
    (``Call.backward``): nothing would move its gradients. The table of the threads' locks
    forgets a thread that ended once no gate of it is alive and no pass holds its lock
    (``_prune_owners``).

NOTE [a backward inside a Custom operator's backward]
    MXNet runs an ``autograd.Function``'s (or a Custom operator's) backward on one of its
    Custom-operator worker threads, as an asynchronous engine operation that completes after
    the callback returns. A ``y.backward()`` there of remat calls' results (or
    ``autograd.grad``) was left to MXNet, as any pass on MXNet's threads, the pass around it
    moving what its calls read. With the default threaded engine the program hung: the
    recording thread's ``backward`` waited in its ``waitall`` for good (it ran under
    ``NaiveEngine``, and with ``remat=False``). Not a ``waitall`` waiting for itself: that one
    runs in the user's thread. What was measured (gdb, and threads waiting for single arrays):
    every engine and Custom-operator worker idle, so an engine operation waits for a variable
    that never comes; the first call's backward ran, the next never started, the gradients
    of the gate variables never came; an operator the Function's callback pushed after the
    pass (``dy * 2``: ``_mul_scalar`` takes temporary space) never ran though its input was
    ready, while ``dy.copy()`` (none) ran. With ``MXNET_CPU_TEMP_COPY=4096`` it passed; with 1
    it hung. So the cycle runs through the temporary-space resources, engine variables written
    by the operators taking them, as in NOTE [nested custom backward] in
    ``tests/test_remat_nesting.py`` (the engine grants a variable's write to the first
    operation queued on it whatever its other dependencies). The same pass pushed from an
    ordinary Python thread, while the callback waits for it, passed every run, with one temp
    space too (the same calls backpropagated from the user's thread never hang either): which
    operation holds the variable when the pass is pushed from the Custom-operator thread was
    not pinned down (the wheel has no engine debug build).

    So a pass started on MXNet's threads (not inside record_node's backward: its recomputed
    graph reaches none of record_node's nodes) that reaches live gates is pushed from a new
    thread, which the callback waits for (``remat_record.pass_on_mxnet_thread``). That thread
    must not wait for the whole engine: the engine holds the callback's own operation, which
    completes only when the callback returns (a ``waitall`` there would wait for itself). It
    waits for the gates' variables' gradients instead (each of the pass's calls reading a
    gate lists all its variables as inputs, so they come once every such call's backward
    ran), and, for the gradients it hands on, for those arrays' gradients. Nor may it wait for
    a lock: the pass holding it may be the one running this callback. It takes the locks of
    the gates' owners that are free (``_enter_nested``), adopts those gates and moves their
    gradients as a pass of their owner would (the calls recorded in a thread running no pass:
    before, refused as a "backward bound before gluon_cf was imported"); the gates whose lock a
    running pass holds (the recording thread's own pass around the callback) are that pass's
    to move, as before. ``autograd.grad`` there runs the same way, but one reaching gates a
    running pass holds is refused: what its calls read would mix with that pass's, and the
    parameters' gradients would be written (before, MXNet's "unreachable" or a hang).

    Plain MXNet gives no gradient at all to a parameter of an eager ``mx.nd.contrib.foreach``
    backpropagated so (``y.backward()`` inside a Function's backward: 0 against 20.4 outside);
    gluon_cf's remat loops give the outside value. Not changed here.
"""
import threading
import weakref

import mxnet as mx
from mxnet import autograd

from . import remat_record as _record
from .node import _NOT_CONNECTED
from .operators import user_location

_live: "weakref.WeakSet[Gate]" = weakref.WeakSet()   # gates whose variables calls read
_passed: dict = {}   # id(gate) -> gate: gates some call's backward read through since the last pass
_lock = threading.Lock()   # (calls' backward run on MXNet's threads)
_running: dict = {}   # thread id -> the passes through the wrappers it is running
_owners: dict = {}   # thread id -> the lock its passes and others' passes on its gates hold
_prune_at = [16]   # how many more entries than live threads _owners has when it is pruned next


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
        if len(_owners) - threading.active_count() >= _prune_at[0]:
            _prune_owners()
        locks = [_owners.setdefault(owner, threading.RLock())
                 for owner in sorted({me} | {gate.owner for gate in foreign})]
    held = _acquire(locks)
    with _lock:
        _running[me] = _running.get(me, 0) + 1
        for gate in foreign:
            gate.adopted += 1
    return mine + foreign, foreign, held


def _prune_owners():
    """Drop (under ``_lock``) the locks of threads that ended, own no live gate, run no pass
    and whose lock no pass holds: a lock a pass may still take is never replaced by a new
    one. The table grew by one entry per thread that ever ran a pass (a thread pool's); it
    is pruned when the entries of ended threads double (amortised: a pass seldom walks it)."""
    alive = {thread.ident for thread in threading.enumerate()}
    owning = {gate.owner for gate in list(_live)}
    for owner, lock in list(_owners.items()):
        if owner in alive or owner in owning or owner in _running:
            continue
        if lock.acquire(blocking=False):   # (never waits: _lock is held)
            del _owners[owner]
            lock.release()
    _prune_at[0] = max(16, 2 * (len(_owners) - threading.active_count()))


def _acquire(locks):
    """Take those of ``locks`` (in their order: no two passes wait for each other) this
    thread does not hold already (a pass inside a pass of this thread, as on NaiveEngine,
    where a Custom operator's backward runs in the pass's thread); returns those taken.

    An exception while waiting (KeyboardInterrupt) releases them: a lock kept would hang its
    owner's next pass for good. So does one landing just after an ``acquire`` returned
    (Python runs signal handlers after a call returns, before its result is stored): the lock
    it was taking is released when this thread holds it (it held none of them before)."""
    wanted = [lock for lock in locks if not lock._is_owned()]
    taken = 0
    try:
        for lock in wanted:
            lock.acquire()
            taken += 1
    except BaseException:
        if taken < len(wanted) and wanted[taken]._is_owned():
            wanted[taken].release()
        for lock in reversed(wanted[:taken]):
            lock.release()
        raise
    return wanted


def _enter_nested(gates):
    """Start a pass on MXNet's threads reaching ``gates`` (NOTE [a backward inside a Custom
    operator's backward]): those whose owners' locks are free are adopted, their locks held;
    the others are left to the passes holding their locks. Never waits for a lock (that
    pass may be the one waiting for this). Returns (adopted, locks held)."""
    owners = sorted({gate.owner for gate in gates})
    with _lock:
        locks = [_owners.setdefault(owner, threading.RLock()) for owner in owners]
    held, free = [], set()
    for owner, lock in zip(owners, locks):
        if lock.acquire(blocking=False):
            held.append(lock)
            free.add(owner)
    adopted = [gate for gate in gates if gate.owner in free]
    with _lock:
        for gate in adopted:
            gate.adopted += 1
    return adopted, held


def _leave(adopted, held, nested=False):
    me = threading.get_ident()
    with _lock:
        if not nested:
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
    saved: dict = {}
    try:
        _cleared(gates, saved)
    except BaseException:   # (KeyboardInterrupt: the flags back, the locks released)
        _move(saved, [], True)
        _leave(adopted, held)
        raise
    return saved, adopted, held


def _cleared(gates, saved=None):
    """Clear the fresh flags of ``gates``' closure arrays; their old ones, by id, in
    ``saved``."""
    saved = {} if saved is None else saved
    for gate in gates:
        for c in gate.closure:
            if id(c) not in saved:
                saved[id(c)] = (c, c._fresh_grad)
                c._fresh_grad = False
    return saved


def _after(state, failed):
    saved, adopted, held = state
    try:
        _move(saved, _taken(adopted), failed)
    finally:
        _leave(adopted, held)


def _move(saved, reads, failed, wait_all=True):
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
        _hand(handed, wait_all)


def _hand(pairs, wait_all=True):
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
    if wait_all:
        mx.nd.waitall()
    else:   # (on MXNet's threads: NOTE [a backward inside a Custom operator's backward])
        for c in arrays:
            c.grad.wait_to_read()


_record.pass_hooks.append((_before, _after))


def _reached_gates(heads):
    """The live gates whose calls a pass of ``heads()`` reaches (none where MXNet refuses the
    heads: it says why itself)."""
    if not _live:   # (its length: no iteration guard, each group of a planned backward asks)
        return []
    gates = list(_live)
    if not gates:
        return []
    try:
        reached = _inputs_of(heads())
    except (mx.MXNetError, AttributeError, TypeError, KeyError, IndexError):
        return []
    return [gate for gate in gates if gate.reached_by(reached)]


def _wait_for(gates):
    """Wait for the gradients of ``gates``' variables: every call of the pass reading a gate
    has then run its backward (each lists all the gate's variables as inputs)."""
    for gate in gates:
        for v in gate.variables:
            v.grad.wait_to_read()


def _nested_pass(run, heads):
    """A backward pass started on MXNet's threads (NOTE [a backward inside a Custom
    operator's backward]): one reaching remat calls' gates is pushed from a thread of its
    own, and moves the gradients of the gates no other pass holds."""
    gates = _reached_gates(heads)
    if not gates:
        return run()
    for gate in gates:
        _nested_seen.add(gate)
    return _record.in_own_thread(lambda: _nested_backward(run, gates))


_nested_seen: "weakref.WeakSet[Gate]" = weakref.WeakSet()   # gates such passes reached


def reached_on_mxnet_thread(gate):
    """Whether a pass started on MXNet's threads reached ``gate`` (for a refusal to say so)."""
    return gate in _nested_seen


def _nested_backward(run, gates):
    adopted, held = _enter_nested(gates)
    try:
        saved = _cleared(adopted)
        failed = True
        try:
            result = run()
            _wait_for(adopted)
            failed = False
        finally:
            _move(saved, _taken(adopted), failed, wait_all=False)
    finally:
        _leave(adopted, held, nested=True)
    return result


_record.nested_passes.append(_nested_pass)
_grad = autograd.grad


def grad(heads, variables, head_grads=None, retain_graph=None, create_graph=False,
         train_mode=True):
    """MXNet's ``autograd.grad``, a closure array's gradient through the gates' variables added
    to the one MXNet gives (NOTE [closure gradients per backward pass]); an array neither read
    directly nor by a call refused as MXNet refuses one it cannot reach."""
    if not _live or _record.in_node_backward():   # (remat's own: plain)
        return _grad(heads, variables, head_grads, retain_graph, create_graph, train_mode)
    nested = None
    if _record.on_mxnet_thread():   # NOTE [a backward inside a Custom operator's backward]
        nested = _reached_gates(lambda: [heads] if isinstance(heads, mx.nd.NDArray)
                                else list(heads))
        if not nested:
            return _grad(heads, variables, head_grads, retain_graph, create_graph, train_mode)
        where = user_location()
        return _record.in_own_thread(lambda: _grad_pass(
            heads, variables, head_grads, retain_graph, create_graph, train_mode, nested,
            where))
    return _grad_pass(heads, variables, head_grads, retain_graph, create_graph, train_mode)


def _grad_pass(heads, variables, head_grads, retain_graph, create_graph, train_mode,
               nested=None, where=None):
    """:func:`grad` in this thread; ``nested``: the gates that one started on MXNet's threads
    (at the user's ``where``) reaches (NOTE [a backward inside a Custom operator's
    backward])."""
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
    if nested is None:
        gates, adopted, held = _enter(reached=reached)
    else:   # (waits for no lock; waits for the calls' gradients, not for the engine)
        adopted, held = _enter_nested(nested)
        gates = adopted
        if len(adopted) < len(nested):
            _leave(adopted, held, nested=True)
            raise NotImplementedError(
                "autograd.grad%s inside a Custom operator's or autograd.Function's backward "
                "reaches eager remat=True recursive calls while a backward pass over them "
                "runs (the pass of the thread that recorded them, or one reaching them: "
                "the pass running that backward?); what those calls' backward reads cannot "
                "be told apart from that pass's, so the gradients of their parameters would "
                "be wrong (NOTE [a backward inside a Custom operator's backward]). Call "
                "autograd.grad outside that backward, or use remat=False"
                % (" at %s" % where if where else ""))
    try:
        position = {id(x): k for k, x in enumerate(xs)}
        standing = [(gate, c, v) for gate in gates for c, v in zip(gate.closure, gate.variables)
                    if id(c) in position and _record._leaf_name(v) in reached]
        direct = [x for x in xs if _record._leaf_name(x) in reached]
        if not gates:
            return _grad(heads, variables, head_grads, retain_graph, create_graph, train_mode)
        if nested is not None:   # (the gates' variables asked too: waited for, dropped)
            asked = {id(v) for _, _, v in standing}
            extra = [v for gate in gates for v in gate.variables
                     if id(v) not in asked and _record._leaf_name(v) in reached]
            try:
                got = _grad(heads, direct + [v for _, _, v in standing] + extra, head_grads,
                            retain_graph, create_graph, train_mode)
                for g in got[len(direct):]:
                    g.wait_to_read()
            finally:
                read = {id(gate): r for gate, r in _taken(adopted)}
            got = got[:len(got) - len(extra)]
        elif not standing:   # (the calls' backward it runs read gates: not this pass's to
            try:           # move, and not the next pass's either)
                return _grad(heads, variables, head_grads, retain_graph, create_graph,
                             train_mode)
            finally:
                mx.nd.waitall()
                _taken(adopted)
        else:
            try:
                got = _grad(heads, direct + [v for _, _, v in standing], head_grads,
                            retain_graph, create_graph, train_mode)
                mx.nd.waitall()   # (the calls' backward, which read the gates)
            finally:
                read = {id(gate): r for gate, r in _taken(adopted)}
    finally:
        _leave(adopted, held, nested=nested is not None)
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
