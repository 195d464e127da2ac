"""The outermost hybridized ``foreach`` with ``remat``: outputs written into MXNet's arrays,
checkpoints in one buffer per state, steps run unrecorded.

NOTE [where a rematerialised loop's memory goes]
    Measured (hybridized LSTMCell H=256, B=32, T=1,600, ``remat=True``, RSS at the start of
    the loop's backward): 305 MB, 0.23 MB per step at the peak, of which only the step
    outputs (50 MB) and the incoming output gradient (50 MB) are needed by any scheme. The
    rest, kept by the generic :class:`remat.Loop` run inside the node:

    * each step's outputs (50 MB), kept beside their stacked copy (50 MB) to compare the
      recomputation with, and the stacked copy again in MXNet's output array (50 MB);
    * the checkpoints as two arrays per step, h and c (100 MB), where h is the step's output
      (an LSTM returns its new h as output and as state) already kept in the outputs;
    * a zero gradient for the data (52 MB), which needs none here;
    * every step of the forward recorded (its graph dropped at once, but its buffers
      allocated for backward each step).

    So the outermost stateful node runs here instead (``ForeachRule.forward_into``): the
    forward runs the body unrolled once (``_step_graph`` of ``foreach_memory.py``, NOTE
    [where a loop's memory goes]) on its static-memory CachedOp, not recorded, writing each
    step's outputs into their row of MXNet's output arrays and each checkpoint into its row of
    one buffer per state (``ceil(T / k)`` rows). A state that is a step output (the graph's
    head is the same entry) is not kept at all: the state entering step ``t`` is row ``t - 1``
    of that output. MXNet's output arrays are the recorded node's outputs, kept for backward
    by MXNet itself (a Custom operator's backward depends on its outputs). The backward
    recomputes segment by segment as :class:`remat.Loop` does, reading the checkpoints from
    the buffers and the recomputed outputs' head gradients from the rows of the output
    gradient, and allocates gradients only for the inputs that need one. Recomputed values are
    compared with the forward's when the body draws random numbers (NOTE
    [rematerialisation]); a body without random operators is one graph run on the same
    inputs twice. Values and gradients are those of ``remat=False`` (the tests' oracle).

    After: 150-160 MB at T=1,600 (0.095-0.1 MB per step: the outputs, their gradient and
    the c checkpoints, 50 MB each), see the README's memory table. With "auto" or a budget the
    interval comes from one step measured before the loop runs, and the backward recomputes a
    segment as one graph per step, backpropagated step by step (NOTE [remat budgets]).

NOTE [closure gradients of a remat segment]
    The closure's gradient sums over every recomputed segment (or step). It was summed by
    marking the closure's detached copies with grad_req "add" into one buffer, but MXNet 1.9.1
    then shares that buffer with gradients inside the step (seen: ``tanh(0.5 * s + x)`` with
    ``x`` from the closure, one step per segment: the state's gradient came out as 0.5 times
    the closure's running sum, so remat=True and "auto" gave gradients off by ~1 where
    remat=2 was right). So each segment's backward writes into arrays of its own (a mark
    "write" per segment; ``autograd.grad`` per step for budgets), added into the sum after;
    tests/test_remat_review.py.
"""
import math
from typing import List

import mxnet as mx
import numpy as np

from .. import node as _node, remat as _remat, remat_budget as _budget
from .._cachedop import CachedOpPair
from .foreach_memory import IN_FLIGHT, _args, _step_graph

# Segments recomputed and backpropagated at once, and the most bytes of intermediates they may
# hold (NOTE [the engine's work in a remat backward]).
MERGED_MOST, MERGED_BYTES = 16, 4 << 20


def forward_into(node, inputs, out_data, is_train):
    """Run ``node`` (a stateful foreach with ``remat``, recorded) writing its outputs into
    ``out_data``; the heads for backward ``[(array, output index, None)]``, or None when it
    does not run here (the caller then runs the rule's ``forward``, :class:`remat.Loop`)."""
    spec = node.spec
    nd_, ns, num_out = spec["num_data"], spec["num_states"], spec["num_out_data"]
    body = node.graphs["body"]
    _remat.refuse_wanted_integers("foreach", node, inputs)
    if ns == 0 or node.run_time_shapes or body.partitioned or len(out_data) != num_out + ns:
        return None
    length = inputs[0].shape[0]
    if length == 0 or any(d.shape[0] != length for d in inputs[:nd_]) or \
            any(0 in a.shape for a in inputs):
        return None   # checked and reported by the rule's forward
    slot_shapes = [d.shape[1:] for d in inputs[:nd_]] + [a.shape for a in inputs[nd_:]]
    if body.cached_op().zero_size_nodes(tuple(slot_shapes[s] for s in body.slots)):
        return None   # (NOTE [zero-size values computed inside a graph] in graph/cached_graph.py)
    loop = IntoLoop(node, inputs, out_data)
    loop.run_forward(is_train)
    outputs = _remat.fresh(out_data)
    _remat.record_node(loop.data + loop.init + loop.closure, outputs, loop.backward)
    return [(o, k, None) for k, o in enumerate(outputs)]


class IntoLoop(_remat.Loop):
    """A :class:`remat.Loop` over a node's graph, its outputs and checkpoints in arrays of
    their own (NOTE [where a rematerialised loop's memory goes])."""

    segments_alive = 1   # a budget's backward recomputes one segment at a time (backward_steps)

    def __init__(self, node, inputs, out_data):
        spec = node.spec
        nd_, ns = spec["num_data"], spec["num_states"]
        self.node, self.out_data = node, list(out_data)
        self.num_out = spec["num_out_data"]
        data, states, captured = inputs[:nd_], inputs[nd_:nd_ + ns], inputs[nd_ + ns:]
        body = node.graphs["body"]
        slots = [d[0] for d in data] + list(states) + list(captured)
        super().__init__("foreach", _remat.from_text("foreach", spec["remat"]),
                         spec.get("remat_where") or None, data, states, captured, None,
                         eager=False, random=_remat.holds_random_ops(spec),
                         step_bytes=_budget.graph_bytes_of(body, slots), length=data[0].shape[0])
        self.graph = _step_graph(node, 1, [d.shape[1:] for d in data], stacked=False)

    # -- forward --------------------------------------------------------------------------

    def run_forward(self, is_train):
        _remat._inside.loop = "gluon_cf.%s%s" % (self.op, self._at())
        try:
            with mx.autograd.pause(train_mode=is_train):
                self._forward_steps()
        finally:
            _remat._inside.loop = None

    def _forward_steps(self):
        graph, ns, num_out, length = self.graph, len(self.init), self.num_out, self.length
        op = graph.cached_op()
        own = [k for k in range(ns) if k not in graph.aliases]   # states with arrays of their own
        k = self.remat if isinstance(self.remat, int) else self._measured_interval(own)
        self.k, self.steps = k, length
        # checkpoints[i][s]: state own[i] entering step s * k (row 0: the initial state)
        # (on the states' context: NOTE [arrays of a node on another context])
        segments = math.ceil(length / k)
        self.buffers = [mx.nd.empty((segments,) + self.init[i].shape, self.init[i].context,
                                    self.init[i].dtype)
                        for i in own]
        for buf, i in zip(self.buffers, own):
            buf[0] = self.init[i]
        scratch = None
        in_flight: List[List[mx.nd.NDArray]] = []
        states = list(self.init)
        for t in range(length):
            if len(in_flight) > IN_FLIGHT:
                for s in in_flight.pop(0):
                    s.wait_to_read()
            if t % k == 0:
                self._seed(t // k)
            if t == length - 1:
                targets = [self.out_data[num_out + i] for i in own]
            elif (t + 1) % k == 0:
                targets = [buf[(t + 1) // k] for buf in self.buffers]
            else:
                if scratch is None:
                    scratch = [[mx.nd.empty(self.init[i].shape, self.init[i].context,
                                         self.init[i].dtype)
                                for i in own] for _ in range(2)]
                targets = scratch[t % 2]
            rows = [self.out_data[j][t] for j in range(num_out)]
            CachedOpPair.__call__(op, *_args(op, [d[t] for d in self.data], states,
                                             self.closure), out=rows + targets)
            states = graph.states_of(rows + targets, ns, num_out)
            in_flight.append(states)
        for i, j in graph.aliases.items():   # a final state that is the last step's output
            self.out_data[num_out + i][:] = self.out_data[j][length - 1]

    def _measured_interval(self, own):
        """The interval for "auto"/a budget from the measured size of one step and the
        checkpoints of the states ``own`` (NOTE [remat budgets]): the first steps recorded
        as the backward records them, once per node and shapes."""
        key = (tuple(a.shape for a in self.data + self.init + self.closure), self.training)
        measured = self.node.__dict__.setdefault("remat_step_bytes", {})
        if self.random and self.seed_base is None:   # drawn before the probe's draws: a
            self.seed_base = _remat._seed_base()     # forward run again draws the same
        if key not in measured:
            measured[key] = _budget.measure_step_bytes(
                self._probe(), min(_budget.PROBE_STEPS, self.length),
                self.data + self.init + self.closure)
        if measured[key]:
            self.step_bytes = measured[key]
        return self._interval([self.init[i] for i in own])

    def _probe(self):
        """``run_steps(n)``: record the first ``n`` steps as :meth:`backward_steps` records
        them; returns their outputs (holding the recorded graphs)."""
        closure = self._marked_closure()[0]
        for a in closure:   # allocated before the measure begins
            a.wait_to_read()
            if a.grad is not None:
                a.grad.wait_to_read()

        def run_steps(steps):
            held, current = [], list(self.init)
            with mx.autograd.record(train_mode=self.training):
                for t in range(steps):
                    result = self._record_step(t, current, closure)[2]
                    held += result
                    current = self.graph.states_of(result, len(self.init), self.num_out)
            return held
        return run_steps

    def _marked_closure(self):
        """The closure as the recomputation reads it: an array needing a gradient enters as a
        detached copy marked into a buffer of its own, with the buffers (the steps' gradients
        are added there by the caller: NOTE [closure gradients of a remat segment])."""
        slots, offset = set(self.graph.graph.slots), len(self.data) + len(self.init)
        closure, grads = list(self.closure), [None] * len(self.closure)
        for i, c in enumerate(self.closure):
            if c.grad is not None and offset + i in slots:
                closure[i] = c.detach()
                grads[i] = mx.nd.zeros(c.shape, ctx=c.context, dtype=c.dtype)
                mx.autograd.mark_variables([closure[i]], [mx.nd.zeros_like(grads[i])],
                                           "write")
        return closure, grads

    def _record_step(self, t, states, closure):
        """Step ``t`` recorded (under ``record()``) from marked aliases of ``states``, with a
        graph of its own: ``(marked states, [(data index, marked row)], results)``."""
        graph, nd_ = self.graph, len(self.data)
        slots = set(graph.graph.slots)
        starts = [s.detach() for s in states]
        for i, s in enumerate(starts):
            if _remat._float(s) and nd_ + i in slots:
                s.attach_grad()
        step_data, data_vars = [d[t] for d in self.data], []
        for n, d in enumerate(self.data):
            if d.grad is not None and _remat._float(d) and n in slots:
                step_data[n] = step_data[n].copy()
                step_data[n].attach_grad()
                data_vars.append((n, step_data[n]))
        result = graph.recorded()(*_args(graph.graph, step_data, starts, closure))
        return starts, data_vars, list(result) if isinstance(result, (list, tuple)) else [result]

    def _state_at(self, t):
        """The loop state entering step ``t`` (a segment's start), from the checkpoints."""
        graph, own = self.graph, [k for k in range(len(self.init)) if k not in self.graph.aliases]
        if t == 0:
            return list(self.init)
        kept = {i: buf[t // self.k] for i, buf in zip(own, self.buffers)}
        return [self.out_data[graph.aliases[i]][t - 1] if i in graph.aliases else kept[i]
                for i in range(len(self.init))]

    # -- backward -------------------------------------------------------------------------

    def backward_segments(self, out_grads):
        if not isinstance(self.remat, int):   # "auto"/a budget
            return self.backward_steps(out_grads)
        graph, num_out, ns, nd_ = self.graph, self.num_out, len(self.init), len(self.data)
        rec = graph.recorded()
        slots = set(graph.graph.slots)   # what the step graph reads: data, states, closure
        step_grads, state_grads = out_grads[:num_out], list(out_grads[num_out:])
        wants_data = [d.grad is not None and _remat._float(d) and n in slots
                      for n, d in enumerate(self.data)]
        data_grads: list = [mx.nd.zeros(d.shape, ctx=d.context, dtype=d.dtype)
                      if d.grad is not None and _remat._float(d) else None for d in self.data]
        # The closure's gradients add up over the segments in buffers of their own; each
        # segment writes into one of its own, added after (NOTE [closure gradients of a remat
        # segment]), several segments' at once (NOTE [the engine's work in a remat backward]).
        closure, closure_grads = list(self.closure), [None] * len(self.closure)
        for i, c in enumerate(self.closure):
            if c.grad is not None and nd_ + ns + i in slots:
                closure_grads[i] = mx.nd.zeros(c.shape, ctx=c.context, dtype=c.dtype)
        marked_closure = any(g is not None for g in closure_grads)
        parts = _ClosureParts(closure_grads)
        mismatches: list = []
        pending: list = []
        span = self.k * self._segments_per_backward()   # NOTE [the engine's work in a remat
        for segment in reversed(range(math.ceil(self.steps / span))):   # backward]
            b = segment * span
            e = min(b + span, self.steps)
            starts = [s.copy() for s in self._state_at(b)]
            segment_grads = parts.next()
            for i, part in enumerate(segment_grads):
                if part is not None:
                    closure[i] = self.closure[i].detach()
                    mx.autograd.mark_variables([closure[i]], [part], "write")
            marked = marked_closure or any(wants_data)
            for i, s in enumerate(starts):
                if _remat._float(s) and nd_ + i in slots:   # written by the backward: empty
                    mx.autograd.mark_variables([s], [mx.nd.empty(s.shape, s.context, s.dtype)],
                                               "write")
                    marked = True
            heads, head_grads, data_vars = [], [], []
            with mx.autograd.record(train_mode=self.training):
                current = starts
                for t in range(b, e):
                    if self.random and self.seed_base is not None and t % self.k == 0:
                        mx.random.seed(self.seed_base + t // self.k, ctx=self.ctx)
                    step_data = [d[t] for d in self.data]
                    for n, wanted in enumerate(wants_data):
                        if wanted:
                            step_data[n] = step_data[n].copy()
                            step_data[n].attach_grad()
                            data_vars.append((n, t, step_data[n]))
                    result = rec(*_args(graph.graph, step_data, current, closure))
                    result = list(result) if isinstance(result, (list, tuple)) else [result]
                    for j in range(num_out):
                        heads.append(result[j])
                        head_grads.append(step_grads[j][t])
                        if self.random:
                            mismatches.append(_remat._differs(result[j], self.out_data[j][t]))
                    current = graph.states_of(result, ns, num_out)
            _remat.recomputed.add(e - b)
            if self.random:
                after = self._state_at(e) if e < self.steps else self.out_data[num_out:]
                mismatches.extend(_remat._differs(o, kept) for o, kept in zip(current, after))
            # A call reading a marked array is recorded, and so are all its outputs, and the
            # calls reading those (NOTE [where a rematerialised loop's memory goes]).
            keep = _node.merged_heads([(h, g) for h, g in zip(heads + current,
                                                               head_grads + state_grads)
                                       if _remat._float(h)]) if marked else []
            if keep:
                mx.autograd.backward([h for h, _ in keep], [g for _, g in keep],
                                     train_mode=self.training)
            # Waiting for the gradients of the segment before last (not the last: Python
            # prepares this segment while the engine computes that one) keeps two segments'
            # intermediates alive at most.
            _remat._throttle(pending)
            pending = state_grads
            state_grads = [s.grad if keep and s.grad is not None else mx.nd.zeros_like(s)
                           for s in starts]
            for n, t, x in data_vars:
                data_grads[n][t] = x.grad
            if keep:
                parts.written()
        parts.add()
        self._check_mismatches(mismatches)
        return data_grads + state_grads + closure_grads

    def _segments_per_backward(self):
        """How many segments one backward recomputes and backpropagates at once: up to
        ``MERGED_MOST``, their steps' intermediates (``step_bytes`` each, as estimated) at
        most ``MERGED_BYTES`` (NOTE [the engine's work in a remat backward])."""
        if not self.step_bytes or self.step_bytes <= 0:
            return 1
        return max(1, min(MERGED_MOST, MERGED_BYTES // (self.step_bytes * self.k)))

    def backward_steps(self, out_grads):
        """The backward of "auto"/a budget (NOTE [remat budgets]): segments last to first,
        each recomputed one graph per step, then backpropagated one step at a time, at most
        two steps' backward in flight, so that what is alive is bounded: the checkpoints,
        one segment's recorded steps, and two steps' gradients."""
        num_out, ns, nd_ = self.num_out, len(self.init), len(self.data)
        step_grads, state_grads = out_grads[:num_out], list(out_grads[num_out:])
        data_grads: list = [mx.nd.zeros(d.shape, ctx=d.context, dtype=d.dtype)
                            if d.grad is not None and _remat._float(d) else None
                            for d in self.data]
        closure, closure_grads = self._marked_closure()
        mismatches: list = []
        in_flight: list = []
        for segment in reversed(range(math.ceil(self.steps / self.k))):
            b, e = segment * self.k, min(segment * self.k + self.k, self.steps)
            recorded, current = [], self._state_at(b)
            with mx.autograd.record(train_mode=self.training):
                if self.random and self.seed_base is not None:
                    mx.random.seed(self.seed_base + segment, ctx=self.ctx)
                for t in range(b, e):
                    recorded.append(self._record_step(t, current, closure))
                    result = recorded[-1][2]
                    if self.random:
                        mismatches += [_remat._differs(result[j], self.out_data[j][t])
                                       for j in range(num_out)]
                    current = self.graph.states_of(result, ns, num_out)
            _remat.recomputed.add(e - b)
            if self.random:
                after = self._state_at(e) if e < self.steps else self.out_data[num_out:]
                mismatches.extend(_remat._differs(o, kept) for o, kept in zip(current, after))
            for t in reversed(range(b, e)):
                starts, data_vars, result = recorded.pop()
                pairs = [(result[j], step_grads[j][t]) for j in range(num_out)]
                pairs += zip(self.graph.states_of(result, ns, num_out), state_grads)
                keep = _node.merged_heads([(h, g) for h, g in pairs if _remat._float(h)
                                           and _node.recorded(h)])
                variables = [s for s in starts if s.grad is not None] + \
                    [x for _, x in data_vars] + [c for c, g in zip(closure, closure_grads)
                                                 if g is not None]
                got = {}
                if keep and variables:   # the steps share the closure's marked arrays:
                    # clearing a step's graph would clear theirs, which the steps before
                    # still read; gradients into arrays of their own, the closure's added
                    # after (NOTE [closure gradients of a remat segment])
                    got = dict(zip(map(id, variables), mx.autograd.grad(
                        [h for h, _ in keep], variables, [g for _, g in keep],
                        retain_graph=True, train_mode=self.training)))
                state_grads = [got[id(s)] if id(s) in got else mx.nd.zeros_like(s)
                               for s in starts]
                for n, x in data_vars:
                    if id(x) in got:
                        data_grads[n][t] = got[id(x)]
                for c, total in zip(closure, closure_grads):
                    if total is not None and id(c) in got:
                        total += got[id(c)]
                in_flight.append(state_grads)
                if len(in_flight) > 2:
                    _remat._throttle(in_flight.pop(0))
                del starts, data_vars, result, pairs, keep
        self._check_mismatches(mismatches)
        return data_grads + state_grads + closure_grads



# NOTE [the engine's work in a remat backward]
#     With remat=True a hybridized LSTMCell scan's backward (H=256, B=32) ran, per step beyond
#     the recomputed forward and its backward: an ``autograd.backward`` of its own (a graph
#     built and planned per call), six zero fills (the step's two start states marked by
#     ``attach_grad``, a zeroed buffer per closure array for the step's closure gradients) and
#     four in-place adds of 1 MB closure gradients into their sums (2,400 ``zeros_like`` and
#     2,000 ``broadcast_add`` at T=400 in MXNet's profiler, about as much engine time as the
#     steps' FullyConnected). Now:
#
#     * one backward recomputes and backpropagates up to ``MERGED_MOST`` segments at once,
#       from the first one's checkpoint, while their steps' intermediates (``step_bytes``,
#       the static estimate of NOTE [remat budgets]) stay under ``MERGED_BYTES``: what is
#       kept between forward and backward is unchanged (a checkpoint every ``k`` steps), the
#       backward's peak grows by that bound at most (with random operators, each segment's
#       seed is set at its first step, as in the forward);
#     * the buffers the backward writes (grad_req "write": a CachedOp's backward writes every
#       input's gradient, zero where none reaches it) start empty;
#     * the closure gradients of up to ``_ClosureParts.MOST`` backwards (at most
#       ``_ClosureParts.BYTES`` of buffers) are added into their sums by one ``add_n`` each.
#
#     Measured at T=1,600, alternating with no remat in one process (2 loaded cores, median of
#     3): 1.53-1.75x the wall time of no remat before, 1.09-1.32x after (README).


class _ClosureParts:
    """Buffers for the closure gradients of successive segments (None where the closure
    array needs none), added into ``totals`` several at a time (NOTE above)."""

    MOST, BYTES = 8, 16 << 20

    def __init__(self, totals):
        self.totals = totals
        size = sum(t.size * np.dtype(t.dtype).itemsize for t in totals if t is not None)
        self.most = max(1, min(self.MOST, self.BYTES // max(1, size)))
        self.sets: list = []     # buffer sets, the first ``filled`` written
        self.filled = 0

    def next(self):
        """The buffers the next segment writes its closure gradients into."""
        if self.filled == len(self.sets):
            self.sets.append([None if t is None else mx.nd.empty(t.shape, t.context, t.dtype)
                              for t in self.totals])
        return self.sets[self.filled]

    def written(self):
        """The buffers handed out last hold a segment's gradients: counted in the sums."""
        self.filled += 1
        if self.filled == self.most:
            self.add()

    def add(self):
        """Add the written buffers into the sums."""
        if self.filled:
            for i, total in enumerate(self.totals):
                if total is not None:
                    mx.nd.add_n(total, *[s[i] for s in self.sets[:self.filled]], out=total)
            self.filled = 0
