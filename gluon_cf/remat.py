"""Rematerialisation: loops that keep less for backward and recompute the rest.

NOTE [rematerialisation]
    Under ``autograd.record()`` a loop normally keeps, for backward, every intermediate value of
    every step. With ``remat`` (``foreach(..., remat=...)``, ``while_loop(..., remat=...)``) the
    loop is one autograd node instead (``record_node``): its forward runs the steps recorded as
    usual but drops each step's graph as soon as the step is done, keeping only

    * the loop state at the start of every segment of ``k`` steps (``remat=True`` is ``k=1``:
      the state every step receives), the *checkpoints*;
    * the step outputs (the loop's stacked outputs, which it returns anyway);
    * the loop's inputs (data, initial states, and the arrays the body reads from its closure).

    Its backward walks the segments last to first: it re-runs a segment's steps under
    ``record()`` from its checkpoint, and backpropagates the segment alone with the incoming
    head gradients (the stacked outputs' rows of those steps and the gradient of the state
    after the segment, computed by the later segment), giving the gradient of the state before
    it; at most one segment's intermediates are alive at a time. Every step is computed twice,
    whatever ``k``: ``k`` trades the checkpoints (``ceil(T/k)`` states) against the
    intermediates of the segment being recomputed (``k`` steps'), so ``k ~ sqrt(T)`` keeps
    ``O(sqrt(T))``. ``"auto"`` and :class:`MemoryBudget` choose ``k`` from the loop length and
    the measured size of one step (NOTE [remat budgets] in ``remat_budget.py``).

    The same values, or an error, never a different gradient:

    * Randomness (``Dropout``, ``mx.nd.random.*``): the forward seeds MXNet's generator before
      each segment with a seed drawn once per loop (``seed + segment``) and the recomputation
      seeds it the same way, so the same draws come back. A hybridized body is seeded only if
      its graph holds a random operator (seeding costs ~2 ms); an eager body if its step 0
      called one: found in its recorded graph, or, for one without inputs that MXNet does not
      record (``mx.nd.random.normal(shape=...)``), among the operators the escape watch saw
      called (``remat_escapes.Watch.op_names``).
    * Every recomputed segment's outputs and final state are compared with the forward's; a
      difference (randomness the seeding could not replay, e.g. drawn between the segment's
      steps by concurrent work) fails the backward with an error naming the op and the user's
      line.
    * Auxiliary state (BatchNorm's running statistics) would be updated twice: refused under
      training, naming the op.
    * In eager mode an array a step makes that outlives it other than as its outputs or
      states has a history cut at the step's detached states: refused at the forward, naming
      the line that made it (NOTE [arrays escaping a remat body] in ``remat_escapes.py``).
    * In eager mode the arrays the body reads from its closure are found from the body
      (``closure_arrays``: Gluon blocks and parameters, arrays, in its closure, ``self``,
      defaults and globals); an array needing a gradient that the recomputed graph reads
      but that was not found fails the backward with an error naming the op (its gradient
      would be lost). Hybridized, the closure is explicit (the node's captured inputs).

    Export ignores ``remat``: it is about what training keeps. Recursive calls
    (``@recursive(remat=True)``) are rematerialised per call eagerly, reusing ``record_node``
    and ``closure_arrays`` (NOTE [rematerialised recursive calls]), and per group of calls or
    per node hybridized (NOTE [hybridized remat recursion]). No custom
    backward runs inside another (it hung MXNet 1.9.1's engine: NOTE [nested custom backward]
    in ``tests/test_remat_nesting.py``): loops and calls inside a remat loop's body run as
    with ``remat=False`` (``applies``), the outer loop recomputing them; a hybridized block
    holding gluon_cf ops runs partitioned in a remat body (``running_body``, ``hybrid.py``);
    and a hybridized remat loop inside another gluon_cf node is recorded on that node's tape
    (``nested_in_node``, ``remat_record.record_handed``), its backward run by the node's.
"""
import contextlib
import math
import numbers
import threading
from typing import Optional, Union

import mxnet as mx
import numpy as np
from mxnet import autograd

from . import node as _node, remat_escapes as _escapes
from .graph.decoded import holds_random_ops  # noqa: F401 (remat.holds_random_ops)
from .operators import is_random_op
from .executor import run
from ._cachedop import copy_of
from .shared_handles import private_leaves
# The interval for "auto"/a budget (NOTE [remat budgets]); these names are remat's too.
from .remat_budget import (AUTO_BUDGET, UNKNOWN_LENGTH, choose_interval,  # noqa: F401
                           graph_bytes_of, graph_step_bytes, nbytes as _nbytes, peak_bytes,
                           SEGMENTS_ALIVE, working_bytes)
from .remat_record import (UNREAD, _leaf_name, closure_arrays, fresh, gradient_leaves,  # noqa: F401
                           live, live_integer, needs_gradient, record_handed, record_node,
                           recorded_graph, states_needing_gradients)


class MemoryBudget:
    """``remat=MemoryBudget(nbytes)``: choose the checkpoint interval so that what the loop keeps
    for backward (checkpoints plus one segment's intermediates) stays within ``nbytes``.

    >>> import gluon_cf
    >>> gluon_cf.MemoryBudget(64 << 20)
    MemoryBudget(67108864)
    """

    nbytes: int

    def __init__(self, nbytes: int) -> None:
        if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Integral):
            raise TypeError("gluon_cf.MemoryBudget: nbytes must be an int (bytes), got %r"
                            % (nbytes,))
        if nbytes <= 0:
            raise ValueError("gluon_cf.MemoryBudget: nbytes must be positive, got %d" % nbytes)
        self.nbytes = int(nbytes)

    def __repr__(self):
        return "MemoryBudget(%d)" % self.nbytes

    def __eq__(self, other):
        return isinstance(other, MemoryBudget) and other.nbytes == self.nbytes

    def __hash__(self):
        return hash(("MemoryBudget", self.nbytes))


# What ``remat=`` accepts: False, True, an int k >= 1, "auto" or a MemoryBudget.
Remat = Union[bool, int, str, MemoryBudget]


def check_remat(op, remat):
    """``remat`` as given by the user, checked: False, an int k >= 1 (True is 1), "auto" or a
    :class:`MemoryBudget`."""
    if remat is False:
        return False
    if remat is True:
        return 1
    if isinstance(remat, numbers.Integral) and not isinstance(remat, bool):
        if remat < 1:
            raise ValueError("gluon_cf.%s: remat=%d; an interval must be an int >= 1 (1 is "
                             "remat=True: keep every step's state)" % (op, remat))
        return int(remat)
    if isinstance(remat, str):
        if remat == "auto":
            return remat
        raise ValueError("gluon_cf.%s: remat=%r; expected False, True, an int k >= 1, 'auto' "
                         "or gluon_cf.MemoryBudget(nbytes)" % (op, remat))
    if isinstance(remat, MemoryBudget):
        return remat
    raise TypeError("gluon_cf.%s: remat must be False, True, an int k >= 1, 'auto' or "
                    "gluon_cf.MemoryBudget(nbytes), got %s %r" % (op, type(remat).__name__, remat))


def to_text(remat):
    """``remat`` (checked) as a node spec holds it."""
    return "budget:%d" % remat.nbytes if isinstance(remat, MemoryBudget) else str(remat)


def from_text(op, text):
    """The inverse of :func:`to_text`, for a spec read from a file: a clear error if invalid."""
    try:
        if text == "auto":
            return text
        if text.startswith("budget:"):
            return MemoryBudget(int(text[len("budget:"):]))
        return check_remat(op, int(text))
    except (TypeError, ValueError):
        raise ValueError("gluon_cf.%s: the node's remat field %r is invalid (expected an int "
                         ">= 1, 'auto' or 'budget:<bytes>')" % (op, text)) from None


class _Counter:
    """How many steps rematerialisation recomputed in this process (tests read it: remat must
    not silently be a no-op)."""

    def __init__(self):
        self.steps = 0
        self.lock = threading.Lock()

    def add(self, n):
        with self.lock:
            self.steps += n


recomputed = _Counter()


# ---------------------------------------------------------------------------------------------
# Random operators


# NOTE [values recorded before a remat loop]
#     An eager remat body may read, from its closure, an array recorded before the loop
#     (``z = dense(x)``, then ``tanh(h + z)`` in the body). Such an array is not an input of
#     the loop's autograd node (only arrays with a gradient buffer are found in the closure),
#     so the gradient through it can only come from the recomputation in backward reaching its
#     history; but the user's ``backward`` clears that history as it goes (MXNet's
#     ``AGInfo::Clear``, before or while the loop's backward runs on a worker thread), and the
#     recomputation then sees a constant: a silently lost gradient when the history was gone,
#     MXNet's "any container is empty" when it went mid-way. Step 0's recorded graph shows such
#     reads while the history is still whole: MXNet names recorded operators ``node_<count>``
#     from one counter, so an operator numbered below a probe recorded just before step 0 was
#     recorded before the loop. The body is refused then, at the forward.


def next_recorded_node():
    """The number MXNet's autograd gives the next operator it records (``node_<number>``)."""
    probe = mx.nd.zeros((1,))
    probe.attach_grad()
    with autograd.record():
        copied = probe.copy()
    last = [n["name"] for n in recorded_graph(copied)["nodes"] if n["op"] != "null"][-1]
    return int(last[5:]) + 1


_seed_base = _node.drawn_seed   # a remat loop's first segment seed (foreach_remat's too)


# ---------------------------------------------------------------------------------------------
# A loop run with rematerialisation

_inside = threading.local()   # .loop: the remat loop running in this thread (its description)


# (op, " at file:line", what is an integer, what of a step remat does not carry gradients through)
_LIVE_INTEGER = (
    "gluon_cf.%s%s: with remat, %s is an array of an integer type computed from values needing "
    "a gradient; MXNet passes gradients through Cast to integer types, and remat does not carry "
    "them through a step's integer %s (NOTE [integers computed from values needing a "
    "gradient]): compute it from integers only, .detach() it if it needs no gradient, or use "
    "remat=False")


def refuse_wanted_integers(op, node, inputs):
    """A hybridized remat loop (``node``) asked for the gradient of an integer input: it was
    computed from values needing one (MXNet passes gradients through Cast), which remat does
    not carry through a step (NOTE [integers computed from values needing a gradient]). Its
    backward hung in MXNet's engine (a foreach with an int32 state from ``F.cast(x * 4)``)."""
    bad = [i for i in getattr(node, "wanted", None) or () if i < len(inputs)
           and not _float(inputs[i])]
    if bad:
        where = node.spec.get("remat_where") or ""
        raise NotImplementedError(_LIVE_INTEGER % (
            op, " at %s" % where if where else "", "input %d of the loop (its data, states and "
            "the values its body reads, in that order)" % bad[0], "inputs"))


def _float(a):
    return np.issubdtype(np.dtype(a.dtype), np.floating)


def running_body():
    """Whether a remat loop's or call's body runs in this thread (its forward or its
    recomputation): a hybridized block holding gluon_cf nodes then runs partitioned, its nodes
    inline (``hybrid.py``; NOTE [nested custom backward] in ``tests/test_remat_nesting.py``)."""
    return getattr(_inside, "loop", None) is not None or getattr(_inside, "call", False)


def applies(remat):
    """Whether a loop given ``remat`` runs rematerialised here: under recording, and not
    inside a remat loop's or call's run, where it runs as with remat=False, recomputed with
    the enclosing one (NOTE [nested custom backward])."""
    return bool(remat) and autograd.is_recording() and getattr(_inside, "loop", None) is None


class Loop:
    """One loop run with rematerialisation (NOTE [rematerialisation]).

    ``data``: arrays whose row ``t`` step ``t`` reads (foreach), ``states``: the initial loop
    state, ``closure``: what else the step reads that may need a gradient (a node's captured
    inputs; an eager body's :func:`closure_arrays`). ``step(t, slices, states)`` is a generator
    returning the step's flat outputs followed by its new states. ``eager``: the step runs the
    user's Python code (its graph is only known once recorded)."""

    segments_alive = SEGMENTS_ALIVE   # segments recomputed at once, for a budget's estimate

    def __init__(self, op, remat, where, data, states, closure, step, *, eager, random=True,
                 step_bytes=None, length=None):
        self.op, self.remat, self.where = op, remat, where
        self.data, self.init = _escapes.aliases(data), _escapes.aliases(states)
        self.closure = list(closure)
        # Data needing no gradient stay unmarked in the recomputation (Embedding's indices).
        self.live_data = [live(d) for d in self.data]
        self.live_closure = [live(c) for c in self.closure]
        # which states may need a gradient; an eager body's, from its step 0 (NOTE [loop
        # states needing no gradient])
        self.live_init = [live(s) for s in self.init]
        self.live_states = [True] * len(self.init)
        self.step, self.eager, self.random = step, eager, random
        self.step_bytes, self.length = step_bytes, length
        self.training = autograd.is_training()
        self.ctx = (self.init or self.data)[0].context
        self.seed_base: Optional[int] = None   # set by the forward's first random segment
        self.nested = False   # set by nested_in_node

    # -- forward --------------------------------------------------------------------------

    def forward(self, more=None):
        """Generator: :meth:`forward_steps` with this loop marked as running (loops and calls
        inside it run as with remat=False: :func:`applies`)."""
        _inside.loop = "gluon_cf.%s%s" % (self.op, self._at())
        runs = _node.node_runs()
        try:
            with _escapes.hooks() if self.eager else contextlib.nullcontext():
                per_step, states = yield from self.forward_steps(more)
        finally:
            _inside.loop = None
        if self.eager:   # a node run in the body (NOTE [nested custom backward])
            _throttle([o for outs in per_step for o in outs] + states)
            if _node.node_runs() != runs:
                raise NotImplementedError(
                    "gluon_cf.%s%s: remat with a body that runs a hybridized block holding "
                    "gluon_cf ops (cond, loops, recursion) is not supported (their backward "
                    "inside the loop's hangs MXNet 1.9.1's engine); use remat=False, or the "
                    "block without hybridize()" % (self.op, self._at()))
        return per_step, states

    def forward_steps(self, more=None):
        """Generator: run the loop, keeping checkpoints; returns ``(per_step_outputs,
        final_states)`` (detached). ``more(states)``, a generator returning a bool, is asked
        before each step (while_loop); else ``length`` steps run."""
        k = self.remat if isinstance(self.remat, int) else None
        states, per_step, self.checkpoints = list(self.init), [], {}
        t = 0
        while self.length is None or t < self.length:
            if more is not None and not (yield more(states)):
                break
            if k is None or t % k == 0:
                self.checkpoints[t] = [s.detach() for s in states]
                self._seed(t if k is None else t // k)
            slices = [d[t] for d in self.data]
            watches: list = []   # an eager step's (NOTE [arrays escaping a remat body])
            try:
                if t == 0:
                    result = yield from self._first_step(slices, states, watches)
                elif self.eager:
                    result = self._eager_step(t, slices, states, watches)
                else:
                    result = yield self.step(t, slices, states)
                cut = len(result) - len(states)
                per_step.append([o.detach() for o in result[:cut]])
                _throttle(states)
                states = [s.detach() for s in result[cut:]]
                del result   # the step's own results: what is alive now escaped
                for watch in watches:
                    watch.check(self._refuse_escape)
            finally:
                for watch in watches:
                    watch.release()
            if k is None:   # "auto"/a budget; segment 0 began at step 0 whatever k is
                k = self._interval(states)
            t += 1
        self.k, self.steps, self.final = k or 1, t, states
        return per_step, states

    def _eager_step(self, t, slices, states, watches):
        """Step ``t`` of an eager body, run now (not through the caller's executor, whose
        last value would keep its results alive) and watched (NOTE [arrays escaping a remat
        body])."""
        watches.append(_escapes.Watch())
        try:
            return run(self.step(t, slices, states))
        finally:
            watches[-1].stop()

    def _refuse_escape(self, what, where):
        raise _escapes.EscapedArrayError(
            "gluon_cf.%s%s: with remat, an array %s by the body outlives its step other than "
            "as the step's outputs or states (kept in a list, an attribute, a dict or a global, "
            "a view of a step's array or of its result, or a result also stored elsewhere): "
            "the step runs recorded from detached states, so its history stops at the step "
            "and a loss reading it would get a wrong gradient (NOTE [arrays escaping a remat "
            "body]). Return it as a step output, compute it outside the loop, .detach() it if "
            "it needs no gradient, or use remat=False" % (self.op, self._at(), what), where)

    def _first_step(self, slices, states, watches):
        """Step 0, inspected: its recorded graph tells an eager body's auxiliary state,
        randomness and size (a node's graph tells them before it runs)."""
        if not self.eager:   # a node's body: its marked inputs are the node's wanted ones
            result = yield self.step(0, slices, states)
            self._refuse_live_integers(result)
            return result
        marked = [copy_of(x) for x in list(slices) + list(states)]
        for x in marked:
            if _float(x):
                x.attach_grad()
        first_node = next_recorded_node()
        result = self._eager_step(0, marked[:len(slices)], marked[len(slices):], watches)
        self._refuse_live_integers(result)
        self.live_states = self._states_needing_gradients(marked, len(slices), result)
        heads = [r for r in result if _node.recorded(r)]
        if heads:
            sym = mx.sym.Group([autograd.get_symbol(h) for h in heads])
            nodes = recorded_graph(*heads)["nodes"]
            self._refuse_recorded_before(nodes, first_node)
            ops = {n["op"] for n in nodes}
            from .operators import AUX_STATE_OPS
            aux = sorted(ops & AUX_STATE_OPS)
            if aux and self.training:
                raise NotImplementedError(
                    "gluon_cf.%s%s: remat with a body that updates auxiliary state (%s: its "
                    "running statistics) under training; recomputing a step would update them "
                    "twice. Use remat=False, or LayerNorm/InstanceNorm in the body"
                    % (self.op, self._at(), ", ".join(aux)))
            if not any(is_random_op(op) for op in ops | set(watches[-1].op_names())):
                self.random = False
            elif self.seed_base is None:
                raise NotImplementedError("gluon_cf.%s%s: internal: random body not seeded"
                                          % (self.op, self._at()))
            if self.step_bytes is None:
                shapes = {}
                for x in marked + [c for c in self.closure]:
                    if x.grad is not None:
                        shapes[_leaf_name(x)] = x.shape
                self.step_bytes = graph_step_bytes(sym, shapes)
        else:
            self.random = False
        return [r.detach() for r in result]

    def _states_needing_gradients(self, marked, num_data, result):
        """Which states are marked in backward (NOTE [loop states needing no gradient]):
        ``marked``, step 0's data and states, marked; ``result``, its outputs and new
        states."""
        slots = {_leaf_name(x): ("data", j) if j < num_data else ("state", j - num_data)
                 for j, x in enumerate(marked) if x.grad is not None}
        closure = {_leaf_name(c) for c in self.closure if c.grad is not None}
        # (data and initial states recorded from marked arrays read as indices: those that a
        # gradient reaches only through operators passing none back, an argmax, need none)
        live_states, self.live_data = states_needing_gradients(
            slots, closure, result, self.live_init, self.live_data,
            lambda kind, k: needs_gradient((self.data if kind == "data" else self.init)[k]))
        return live_states

    def _check_states_needing_gradients(self, current, marked):
        """Refuse if a state found to need no gradient (NOTE [loop states needing no
        gradient]) was recomputed from ``marked`` arrays (needing one) after all."""
        if all(self.live_states):
            return
        names = {_leaf_name(x) for x in marked if x.grad is not None}
        for j, state in enumerate(current):
            if (not self.live_states[j] and _float(state) and _node.recorded(state) and
                    gradient_leaves(recorded_graph(state)) & names):
                raise NotImplementedError(
                    "gluon_cf.%s%s: with remat, loop state %d needed no gradient in step 0 and "
                    "needs one in a later step (its step-0 value was computed without the "
                    "values needing a gradient that a later step uses); use remat=False, or "
                    "make step 0 compute it as the later steps do" % (self.op, self._at(), j))

    def _refuse_live_integers(self, result):
        """NOTE [integers computed from values needing a gradient] in ``remat_record.py``."""
        bad = [j for j, r in enumerate(result) if live_integer(r)]
        if bad:
            cut = len(result) - len(self.init)
            what = "step output %d" % bad[0] if bad[0] < cut else "state %d" % (bad[0] - cut)
            raise NotImplementedError(_LIVE_INTEGER % (self.op, self._at(), "the body's " + what,
                                                       "outputs or states"))

    def _refuse_recorded_before(self, nodes, first_node):
        """Refuse an eager body that reads an array recorded before the loop (NOTE [values
        recorded before a remat loop]): ``nodes``, step 0's recorded graph, holds an operator
        recorded before ``first_node``."""
        outside = [n for n in nodes if n["op"] != "null" and n["name"].startswith("node_")
                   and int(n["name"][5:]) < first_node]
        if outside:
            raise NotImplementedError(
                "gluon_cf.%s%s: with remat, the body reads an array computed under "
                "autograd.record() before the loop (from its closure: the result of %s); the "
                "recomputation in backward cannot reach that array's history, so the gradient "
                "through it would be lost. Pass it to the loop as data or as a state, or use "
                "remat=False" % (self.op, self._at(), outside[-1]["op"]))

    def _seed(self, segment):
        if not self.random:
            return
        if self.seed_base is None:
            self.seed_base = _seed_base()
        mx.random.seed(self.seed_base + segment, ctx=self.ctx)

    def _interval(self, states):
        """The interval for "auto"/a budget given the checkpointed ``states`` and
        ``step_bytes`` (NOTE [remat budgets])."""
        length = self.length or UNKNOWN_LENGTH
        state_bytes = sum(_nbytes(s) for s in states)
        step_bytes = self.step_bytes or 0
        if step_bytes <= 0:   # not measurable (e.g. an opaque hybridized block): sqrt(T)
            return max(1, int(math.ceil(math.sqrt(length))))
        return choose_interval(self.op, self.remat, length, state_bytes, step_bytes, self.where,
                               working_bytes(self.closure, step_bytes), self.segments_alive)

    def _at(self):
        return " at %s" % self.where if self.where else ""

    # -- recording ------------------------------------------------------------------------

    def record(self, outputs, per_step):
        """Record the loop as one autograd node: its inputs are the data, the initial states
        and the closure; ``outputs`` (stacked step outputs, then final states) its outputs.
        Returns the outputs to hand to the caller."""
        outputs = fresh(outputs)
        _escapes.has_history(outputs)   # (from an enclosing remat body: not held here)
        self.per_step = per_step
        self.num_out = len(outputs) - len(self.init)
        if self.nested:   # in a hybridized gluon_cf node's forward (not its own)
            record_handed(self.data + self.init + self.closure, outputs, self.backward,
                          "gluon_cf.%s%s" % (self.op, self._at()))
        else:
            record_node(self.data + self.init + self.closure, outputs, self.backward)
        return outputs

    # -- backward -------------------------------------------------------------------------

    def backward(self, out_grads):
        """The gradients of the loop's inputs from ``out_grads``, segment by segment, last to
        first (NOTE [rematerialisation])."""
        _inside.loop = "gluon_cf.%s%s" % (self.op, self._at())
        try:
            return self.backward_segments(out_grads)
        finally:
            _inside.loop = None

    def backward_segments(self, out_grads):
        """(See :meth:`backward`.) A closure array recorded on an enclosing node's tape
        (hybridized, nested: ``nested_in_node``) is read as a leaf of its own, whose gradient
        is the node input's: the step reads ``self.closure``."""
        kept = self.closure
        self.closure = [c.detach() if c.grad is None and w else c
                        for c, w in zip(kept, self.live_closure)]
        for c, k in zip(self.closure, kept):
            if c is not k:
                c.attach_grad()
        try:
            return self._backward_segments(out_grads)
        finally:
            self.closure = kept

    def _backward_segments(self, out_grads):
        num_out = self.num_out
        step_grads, state_grads = out_grads[:num_out], list(out_grads[num_out:])
        data_grads = [mx.nd.zeros(d.shape, ctx=d.context, dtype=d.dtype) if wanted else None
                      for d, wanted in zip(self.data, self.live_data)]
        closure = [c for c in self.closure if c.grad is not None]
        closure_grads = {id(c): None for c in closure}
        names = {_leaf_name(c): c for c in closure}
        mismatches = []
        begins = list(range(0, self.steps, self.k))
        for segment in reversed(range(len(begins))):
            b = begins[segment]
            e = min(b + self.k, self.steps)
            states = [s.copy() for s in self.checkpoints[b]]
            blocks = [copy_of(d[b:e]) for d in self.data]
            for x in ([s for s, w in zip(states, self.live_states) if w] +
                      [blk for blk, w in zip(blocks, self.live_data) if w]):
                if _float(x):
                    x.attach_grad()
            heads, head_grads = [], []
            # See NOTE [inputs shared between threads]
            with autograd.record(train_mode=self.training), private_leaves():
                if self.random and self.seed_base is not None:
                    mx.random.seed(self.seed_base + segment, ctx=self.ctx)
                current = states
                for t in range(b, e):
                    result = run(self.step(t, [blk[t - b] for blk in blocks], current))
                    if self.eager:
                        self._refuse_live_integers(result)
                    cut = len(result) - len(current)
                    for j, (o, kept) in enumerate(zip(result[:cut], self.per_step[t])):
                        mismatches.append(_differs(o, kept))
                        heads.append(o)
                        head_grads.append(step_grads[j][t])
                    current = result[cut:]
            recomputed.add(e - b)
            self._check_states_needing_gradients(current, states + blocks + closure)
            after = self.checkpoints.get(e) if e < self.steps else self.final
            if after is not None:
                mismatches.extend(_differs(o, kept) for o, kept in zip(current, after))
            heads += current
            head_grads += state_grads
            keep = _node.merged_heads([(h, g) for h, g in zip(heads, head_grads)
                            if _float(h) and _node.recorded(h)])
            variables = [x for x in states + blocks if x.grad is not None] + closure
            grads = {}
            if keep:
                reached = set(mx.sym.Group([autograd.get_symbol(h) for h, _ in keep])
                              .list_inputs())
                self._check_leaves(reached, variables, names)
                used = [x for x in variables if _leaf_name(x) in reached]
                if used:
                    values = autograd.grad([h for h, _ in keep], used, [g for _, g in keep],
                                           train_mode=autograd.is_training())
                    grads = {id(x): g for x, g in zip(used, values)}
            _throttle(state_grads)
            state_grads = [grads.get(id(s)) if id(s) in grads else mx.nd.zeros_like(s)
                           for s in states]
            for dg, blk in zip(data_grads, blocks):
                if dg is not None and id(blk) in grads:
                    dg[b:e] = grads[id(blk)]
            for c in closure:
                g = grads.get(id(c))
                if g is not None:
                    prev = closure_grads[id(c)]
                    closure_grads[id(c)] = g if prev is None else prev + g
        self._check_mismatches(mismatches)
        # (a parameter no step of an eager body read: NOTE [parameters no step reads] in
        # remat_record.py; a node's inputs are its own arrays, whose gradient it passes on)
        return data_grads + state_grads + [
            UNREAD if self.eager and id(c) in closure_grads and closure_grads[id(c)] is None
            else closure_grads.get(id(c)) for c in self.closure]

    def _check_leaves(self, reached, variables, names):
        refuse_unknown_leaves(reached, {_leaf_name(x) for x in variables} | set(names),
                              "gluon_cf.%s%s" % (self.op, self._at()), "the body",
                              "Pass them through the loop's states or data")

    def _check_mismatches(self, mismatches):
        flags = [m for m in mismatches if m is not None]
        if flags and mx.nd.add_n(*flags).asscalar() > 0:
            raise RuntimeError(
                "gluon_cf.%s%s: with remat, recomputing the loop's steps in backward gave "
                "different values from the forward (randomness that could not be replayed, "
                "e.g. random numbers drawn outside an operator MXNet records, or a body that "
                "is not deterministic), so its gradient would not be that of the forward: use "
                "remat=False for this loop" % (self.op, self._at()))


def _throttle(arrays):
    """Wait for ``arrays`` (the previous step's or segment's results) before going on:
    MXNet allocates an operator's outputs when Python pushes it, so a loop that ran ahead of
    the engine would hold the intermediates of every pushed step at once, which is what
    remat is there to avoid. One step of lag keeps the engine busy."""
    for a in arrays:
        if a is not None:
            a.wait_to_read()


def refuse_unknown_leaves(reached, known, where, reader, advice):
    """A NotImplementedError from ``where`` when the recomputed graph reads (``reached``:
    its input names) an array needing a gradient that is not among the ``known`` leaves:
    its gradient would be lost."""
    unknown = sorted(n for n in reached if n.startswith("var") and n not in known)
    if unknown:
        raise NotImplementedError(
            "%s: with remat, %s reads %d array(s) needing a gradient that gluon_cf could not "
            "find in its closure (Gluon blocks, parameters and arrays in its closure, defaults, "
            "self and globals are found); their gradient would be lost. %s, or use remat=False"
            % (where, reader, len(unknown), advice))


def _differs(a, b):
    """An NDArray holding 1.0 when ``a`` and ``b`` differ beyond rounding, else 0.0 (None for
    values that cannot be compared)."""
    if a.shape != b.shape:
        # (on cpu() as the others: NOTE [arrays of a node on another context] in node.py)
        return mx.nd.ones((1,), ctx=mx.cpu())
    if a.size == 0:
        return None
    a32, b32 = a.astype("float32"), b.astype("float32")
    with autograd.pause():
        bad = mx.nd.abs(a32.detach() - b32) > (1e-5 + 1e-4 * mx.nd.abs(b32))
        return bad.sum().reshape((1,)).clip(0, 1).as_in_context(mx.cpu())



def nested_in_node(loop, node):
    """Mark ``loop``, the remat loop of ``node``, as nested when ``node`` runs inside another
    hybridized gluon_cf node's forward: it is recorded by ``remat_record.record_handed``, its
    backward run by that node's (a custom backward inside the node's hangs MXNet 1.9.1: NOTE
    [nested custom backward] in ``tests/test_remat_nesting.py``). Nodes in its body run
    inline, and their loops without remat."""
    top = _node.top_level_node()
    loop.nested = top is not None and top is not node
    return loop
