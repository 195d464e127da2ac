"""The planned backward of an ahead-of-time schedule run under autograd inside a node's forward.

NOTE [planned backward]
    Under ``autograd.record()`` a schedule (NOTE [ahead-of-time schedules] in
    recursion/schedule.py) cannot keep a function's rows in one table written in place (autograd
    cannot record a write into a view), so its recorded run gathers each group's children from
    the outputs of the source groups: a ``take``, ``Concat`` and permutation per callee whose
    backward costs about a third of the batch's backward, and every parameter's gradient is
    the sum of one ``_grad_add`` per group. Where it is safe, the run is planned instead:

    * **Forward**: the rows live in tables, one per output of each function (NOTE [one table
      per output] in recursion/value_graphs.py), in run order, as in inference, and each
      group's graph takes its children's rows from the callees' tables (the in-place graphs of
      recursion/value_graphs.py) and writes its outputs into its own rows (``out=``).
      Every group is recorded on a small tape of its own, whose variables are aliases
      (``detach``) of the tables and of the environment, with ``grad_req="add"``: a table's
      gradient buffer is its gradient table, a marked environment array's is the
      node input's own gradient buffer. The roots' rows are taken from the entry's table by
      one more graph, recorded on the enclosing tape.
    * **Backward**, run by the enclosing node's own backward once its ``autograd.backward``
      has added the roots' gradient into the entry's gradient table
      (:func:`gluon_cf.node.hand_backward`): the groups in reverse run order (parents before
      children), each by ``autograd.backward`` of its outputs with their rows of the
      gradient tables (views) as the head gradients. ``take``'s backward adds each child's
      gradient into its callee's gradient table at the rows it took (a scatter-add, no
      ``Concat`` or permutation), and each group adds its share of a parameter's gradient into
      the parameter's buffer once, inside the CachedOp's backward (no ``_grad_add`` chain).
      Every invocation's rows are read by exactly one call site (or are one root), so a
      group's head gradient is complete when its turn comes. The enclosing backward writes a
      parameter's buffer (``grad_req="write"``) before the planned backward adds into it: the
      engine runs writes to one array in the order they were pushed.

    **Where** (:func:`applies`): while a gluon_cf node's MXNet Custom operator runs its
    forward under recording (``node.top_level_node()``), at the entry call of a recursion not
    nested in another recursion, when every float array of the environment is one of that
    node's own input arrays (so no gradient has to flow from the planned backward back into
    the node's tape) and the outputs are float. The planned backward is plain Python run by
    the node's backward in its own thread, after its ``autograd.backward`` returned: no
    autograd ``Function`` (whose callback, nested inside a node's backward, hung MXNet's
    threaded engine in an earlier attempt: a stateful foreach calling a recursion every step,
    tests/test_planned_backward.py). Everything else (a forward recomputed inside a backward by
    remat, an environment value computed on the tape) keeps the recorded run. :data:`ENABLED`
    switches it off (tests compare both).

NOTE [static recorded groups]
    A recorded group call runs a CachedOp with ``static_alloc``, one per group graph, as g's
    floor does, instead of :class:`CachedOpPair`'s dynamic one (which plans memory and
    creates every operator's state anew on each call, and multiplies every output by 1). MXNet
    1.9.1's ``CachedOp::GetCachedOpState`` hands a static CachedOp's call a state no one else
    holds (``i.unique()``): a recorded call's autograd node keeps its state, with its
    buffers, until its backward is done and its outputs are gone, so the ~20 calls of one
    graph in a batch have ~20 states, each reused by a later batch; ``StaticBackward``
    reads the forward's buffers of its own state. A CachedOp keeps its states for good and
    looks for a free one by scanning them all, so only schedules of at most
    ``STATIC_GROUPS`` groups run this way (a 2,500-level chain, one group per level, took
    1.4x the time and 120 MB more with a state per level). Only where the planned backward
    runs (:func:`run`, not with remat, whose groups are recomputed inside the backward: those
    keep the dynamic CachedOp). Each output is multiplied by 1 as before
    (:func:`gluon_cf._cachedop._no_gradient_passthrough`) unless
    :func:`_gradient_passes_through` proves that no input of the graph gets an output's
    gradient as is: when one does, MXNet's CachedOp backward replaces the input's gradient
    array (the gradient table, or a parameter's buffer, with ``grad_req="add"``) by the
    output's gradient instead of adding into it (``*outputs[i] = arrays[eid]->Detach()`` in
    ``CachedOp::DynamicBackward`` and ``StaticBackward``), and an output that is an input, or
    two outputs of one entry, would not be written into its table. The proof walks from every
    output towards the inputs, stopping at operators whose gradient is a node of its own
    reading the output gradient (``_GRADIENT_NODE_OPS``, each checked in MXNet 1.9.1's
    ``FGradient`` registrations); reaching an input through any other operator
    (``elemwise_add``'s ``CloneGradient`` hands the output gradient to both inputs, ``take``,
    ``BlockGrad``, ...) keeps the multiplication. A static call that fails is dropped and the
    group runs as before, raising what it always raised.

NOTE [sized recorded groups]
    A static CachedOp call re-infers shapes and re-plans memory (``SetForwardGraph``, and
    ``SetBackwardGraph`` in its backward) whenever its state last ran on other input shapes:
    with one CachedOp per graph, every batch's groups of new row counts, about a fifth of the
    node's CPU time in TreeLSTM training. So a group of at most ``SIZED_ROWS`` rows runs by a
    static CachedOp of its own row count (same symbol, same flags: a choice of instance,
    never of values), and where they are used the tables (and their gradient tables) have a
    power of two of rows, so that their shapes, inputs of every group, repeat from batch to
    batch; the rows after a function's last invocation are never read (every index is a row
    of an invocation) and their gradients stay zero. The plan keeps each function's rows
    (:func:`whole_rows`) while a batch needs at least a quarter of them: the benchmark's
    forests of 25 trees have 750-1,080 nodes, and rounding each batch's own count flipped the
    tables between 1,024 and 2,048 rows in 12 batches of 42, each flip re-planning every
    state of every sized CachedOp, forward and backward. At most ``SIZED_ROWS`` CachedOps per
    graph, each keeping a state per outstanding call (about 50 MB more peak memory in the
    benchmark's TreeLSTM training at H = 150). An input shape that still differs (an
    environment value the size of the forest) is re-inferred as before.

NOTE [bulked groups]
    The planned run's group loops, forward and backward, run inside ``mx.engine.bulk(BULK)``:
    MXNet's engine then pushes this thread's synchronous operators in bulks (in order, one
    engine operation of their joined variables) instead of waking a worker for each
    CachedOp's flush (1-3% less CPU per training batch, batch by batch; within noise against
    g across processes). Values are unchanged: the engine still orders every bulk after the
    writes it reads; a wait, a non-bulkable push (a variable's deletion) or leaving the scope
    flushes the pending bulk, so nothing is left pending when the node returns. Not in
    inference's loop (measured as nothing there). **Off since session 31** (``BULK[0] =
    0``): by wall time it held the groups' compute back while the host looped (MXNet's
    profiler, TreeRNN training at batch 25: the worker idle ~2-3 ms before the backward's
    groups ran, all after the loop's end), and with the first group called before the layout
    (NOTE below) e ran 13.15-14.39 ms a batch unbulked against 13.41-15.50 bulked (medians of
    three processes, e and g alternating batch by batch; TreeLSTM training unchanged).
    Pushing each group's bulk at its end (``set_bulk_size`` to 0 and back after each call)
    did not help: the backward's groups still ran only after the loop.

NOTE [the first group in training]
    As in inference (NOTE [the first group before the layout] in recursion/first_group.py),
    the layout's first group (height 0: leaves, gathering nothing) is known from the
    expansion alone, so :func:`push_first` calls it, recorded on its tape as the loop would
    (the same static CachedOp of its row count, the same environment aliases and tables,
    made then and kept for :func:`run`), before the layout, the gradient tables and the
    uploads of the other groups: MXNet's engine computes the leaves (the largest group of a
    forest) while the host lays out the rest, where it sat idle before. Only where the loop
    would call it the same way: static and sized (the groups, distinct (height, function,
    variant), are at most ``STATIC_GROUPS`` whenever the expansion's steps times the variants
    are), not remat. The loop uses that call for its group 0 when it is the same (function,
    variant, ids), and calls group 0 itself otherwise (the early rows are then rewritten,
    every row of a table by its own group). Tests compare with ``EARLY[0] = False`` and eager.
    The gradient tables (zeros, the size of the tables) are made there too, before that call
    (``GRADS[0] = "before"``): their zero fill runs on MXNet's worker while it waits for the
    first group, where it ran between the groups' forward calls before (``"run"``; MXNet's
    profiler, TreeRNN training at batch 25: a ~0.19 ms ``_zeros`` in the worker's idle time
    before the leaves). By wall time within the noise of alternating runs (batch medians
    11.8-13.7 ms "before", 12.2-12.6 "after" the call, 12.7-13.8 "run", three runs).

NOTE [hybridized remat recursion]
    ``@recursive(remat=True)`` in a hybridized block: the unit is the outermost call's
    ``recursion`` node, rematerialised when any function of its table has ``remat=True``
    (``RecursionRule.rematerialised``; eagerly each call is its own unit, NOTE
    [rematerialised recursive calls]). Two ways, chosen at run time:

    * **On a planned schedule** (where the planned backward applies, NOTE above): the forward
      runs every group *unrecorded* into the tables, which then hold every call's results
      (what remat keeps anyway); only the roots' graph is recorded. The planned backward
      re-runs each group, in reverse run order, under ``record()`` from its arguments, the
      environment and its children's rows of the tables, and backpropagates it at once with
      its rows of the gradient tables: one group's intermediates are alive at a time.
      ``RECOMPUTED`` counts the groups recomputed. A group whose graph draws random numbers
      (``Dropout``, ``random_*``) keeps its draws in the forward and reads them back when
      recomputed (NOTE [replayed draws] in recursion/group_draws.py): the same numbers, as
      with ``remat=False``, without touching MXNet's generator; a group whose draws cannot be
      kept is seeded instead, and its recomputed outputs compared with its rows of the tables,
      a difference failing the backward naming the function and the user's line, never a
      different gradient. Other groups are deterministic: the same CachedOp on the same values.
    * **Elsewhere** (the dynamic batching and the unbatched executors, a recursion whose
      schedule is not planned): a top-level node (``node.remat_forward``) runs its forward
      unrecorded and keeps only its inputs and outputs; its backward re-runs the whole
      forward recorded (seeded alike, compared with the forward's outputs when it holds
      random operators: ``RecursionRule.check_recomputed``) and backpropagates it. That
      frees the recursion's intermediates between forward and backward, not at the peak of
      the backward, which holds them all, as with ``remat=False``. A recursion running
      inside another node's body (a loop's step) is recorded on that node's tape as with
      ``remat=False`` unless its schedule is planned (a remat loop around it recomputes it).
"""
import contextlib
import json
import threading
from typing import List

import mxnet as mx
import numpy as np

from .. import node as _node, node_progress, remat as _remat
from .._graph_json import reached_ids
from ..graph.decoded import random_ops
from .._cachedop import CachedOpPair, _no_gradient_passthrough
from . import first_group
from .group_draws import SEED, group_draws
from .value_graphs import _result_graph, _value_graph
from .views import Unrecorded, rows as rows_of

ENABLED = [True]   # NOTE above: tests compare the planned and the recorded backward
RUNS = [0]         # schedules run with a planned backward (for tests, tools)
RECOMPUTED = [0]   # groups recomputed by a remat recursion's planned backward (for tests)
REPLAYED = [0]     # groups recomputed from their kept draws (NOTE [replayed draws])
SEEDED = [0]       # group runs seeded instead (for tests)
SEED_GROUPS = [True]   # NOTE [replayed draws] in group_draws.py: tests switch it off
STATIC = [True]    # NOTE [static recorded groups]: tests compare both
STATIC_CALLS = [0]   # recorded group calls run by a static CachedOp (for tests)
STATIC_GROUPS = 64   # the most groups of a schedule run by static CachedOps (NOTE above)
SIZED_ROWS = [64]   # NOTE [sized recorded groups]: groups of at most this many rows; 0: none
SIZED_CALLS = [0]  # recorded group calls run by the static CachedOp of their row count (tests)
KEPT_TABLES = [0]  # tables given more rows than their power of two, kept from a batch before
BULK = [0]   # NOTE [bulked groups]: operators per engine push; 0: MXNet's own (tests compare)
EARLY = [True]   # NOTE [the first group in training]: False: called in the loop (tests compare)
PUSHED = [0]     # first groups called before the layout (for tests)
# Where the gradient tables are zeroed when the first group is called early: "before" its call,
# "after" it, "run" in the loop as otherwise (tests compare; NOTE [the first group in training])
GRADS = ["before"]
# Operators whose gradient (FGradient in MXNet 1.9.1) is a node of its own reading the output
# gradient: ActivationGrad, FullyConnectedGrad, ConcatGrad (MakeGradNode), ElemwiseGradUseIn /
# ElemwiseGradUseOut (MakeNonlossGradNode: a node, or zeros). NOTE [static recorded groups]
_GRADIENT_NODE_OPS = frozenset({"Activation", "FullyConnected", "Concat", "elemwise_mul",
                                "broadcast_mul", "tanh", "sigmoid"})


def applies(context, depth):
    """Whether a schedule for this call may run with a planned backward (NOTE above)."""
    recording = mx.autograd.is_recording() or _node.remat_forward()
    if not (ENABLED[0] and depth == 1 and context.parent is None
            and recording and _node.top_level_node() is not None):
        return False
    inputs = {id(a) for a in _node.top_level_inputs()}
    return all(id(value) in inputs or not _node.is_float(value.dtype) for value in context.env)


def push_first(schedule, ctx, upload):
    """Whether ``schedule`` (expanded) still runs planned: not when an output is not float.
    Calls the layout's first group before the layout where it can (NOTE [the first group in
    training])."""
    schedule.planned_first = None
    if not schedule.roots:
        return True
    variants, children, args = schedule._flat()
    if not schedule._layouts(args):   # (lay_out refuses it)
        return True
    plan = schedule.plan
    if not all(_node.is_float(layout["dtype"]) for layout in schedule.layouts.values()):
        return False
    # Groups are distinct (height, function, variant), a height below the expansion's steps.
    bound = len(schedule.steps) * sum(len(plan.functions[q].keys) for q in variants)
    if not (EARLY[0] and STATIC[0] and SIZED_ROWS[0] > 0 and bound <= STATIC_GROUPS
            and mx.autograd.is_recording() and not remat_run(schedule)
            and schedule.nonempty(args)):
        return True
    found = first_group.find(plan, variants, children)
    if found is None:
        return True
    q, vid, ids = found
    tables = schedule.tables(ctx, whole=True)
    # The gradient tables' zero fill, pushed while MXNet's worker waits for the first call
    grads = _gradient_tables(tables, ctx) if GRADS[0] == "before" else None
    env = _env_aliases(schedule)
    state: tuple = (env, tables, {}, grads)
    graph, _, taped_inputs = _variant(schedule, state, q, vid)
    values = first_group.inputs(graph, [upload(a[ids], ctx) for a in args[q]], env,
                                env.__getitem__)
    if values is None:
        return True
    rows = len(ids)
    with Unrecorded():   # See NOTE [views off the tape] in views.py
        out = [rows_of(t, 0, rows) for t in tables[q]]
    key = rows if rows <= SIZED_ROWS[0] else None
    try:
        outputs = _call(graph, True, values, out, True, key)
    except mx.MXNetError:   # the loop's call of the group gives the error
        return True
    if GRADS[0] == "after":
        state = state[:3] + (_gradient_tables(tables, ctx),)
    schedule.planned_first = (q, vid, ids, state, (outputs, taped_inputs, None))
    PUSHED[0] += 1
    node_progress.progressed()   # NOTE [the caller waits for the first group]
    return True


def _env_aliases(schedule):
    """Aliases of the environment, so that the groups' tapes share nothing with the enclosing
    one (whose backward frees the nodes it visits); a marked one's gradient buffer is the
    original's, each group's backward adding its share into it."""
    originals = schedule.context.env
    env = [value.detach() for value in originals]
    grads = [value.grad for value in originals]   # (a C call and a new handle each)
    marked = [i for i, grad in enumerate(grads) if grad is not None]
    if marked:
        mx.autograd.mark_variables([env[i] for i in marked], [grads[i] for i in marked],
                                   grad_reqs="add")
    return _Aliases(env, marked)


class _Aliases(list):
    """The environment's aliases (:func:`_env_aliases`), with the indices of those marked."""

    def __init__(self, env, marked):
        super().__init__(env)
        self.marked = frozenset(marked)


def _gradient_tables(tables, ctx):
    """A zeroed gradient table per table (NOTE [planned backward])."""
    return {q: [mx.nd.zeros(t.shape, ctx=ctx, dtype=t.dtype) for t in ts]
            for q, ts in tables.items()}


def _variant(schedule, state, q, vid):
    """(qname, vid)'s graph, callees and whether it reads an array needing a gradient: the
    same for every group of the variant while the plan, the layouts and the marks of this run
    hold (kept per thread in ``state``: a remat recomputation runs on the backward's)."""
    env, _, variants, _ = state
    key = (q, vid, threading.get_ident())
    found = variants.get(key)
    if found is None:
        plan = schedule.plan
        callees = [callee for callee, _ in plan.functions[q].callees(vid)]
        graph = _value_graph(plan, schedule.layouts, q, vid, None)
        # A group of leaves reading no marked array is a constant to autograd.
        found = variants[key] = graph, callees, bool(callees) or any(
            role == "env" and i in env.marked for role, i, _, _ in graph.inputs)
    return found


def run(schedule, ctx, upload):
    """The outputs of ``schedule`` (laid out in place), each group recorded on a tape of its
    own; hands the node its planned backward."""
    plan = schedule.plan
    static = not remat_run(schedule) and len(schedule.groups) <= STATIC_GROUPS
    sized = static and STATIC[0] and SIZED_ROWS[0] > 0   # NOTE [sized recorded groups]
    early = getattr(schedule, "planned_first", None)   # NOTE [the first group in training]
    if early is not None and (early[:2] != schedule.groups[0][:2]
                              or not np.array_equal(early[2], schedule.first_ids)):
        early = None   # (not the layout's first group: called again in the loop)
    # NOTE [one table per output] in value_graphs.py
    state = (_env_aliases(schedule), schedule.tables(ctx, whole=sized), {}, None) \
        if early is None else early[3]
    env, tables, _, grads = state
    # Aliases of the tables are variables whose gradients add up in ``grads``: a group's
    # graph takes its children's rows from them, and take's backward adds into the rows it
    # took (NOTE above). The groups write into the tables themselves (autograd refuses a
    # write into a variable).
    # One alias per call site reading a table (NOTE [one table per output]): a variable read
    # by two takes of one group would have its gradient summed from table-sized arrays.
    sites = dict.fromkeys(tables, 1)
    for q, vid, _, _, _ in schedule.groups:
        for callee, at in plan.functions[q].callees(vid):
            sites[callee] = max(sites[callee], len(at))
    sources = {q: [[t.detach() for t in ts] for _ in range(sites[q])]
               for q, ts in tables.items()}
    index = upload(schedule.indices, ctx)
    uploaded = {q: [upload(a, ctx) for a in args] for q, args in schedule.sorted_args.items()}
    taped: List[tuple] = []   # per group: (number, qname, vid, first, rows, calls, kept)
    nonempty = schedule.nonempty()
    training = mx.autograd.is_training()
    remat = remat_run(schedule)
    seed: List[int] = []   # drawn once, for seeded groups (NOTE [replayed draws])
    def call_group(number, q, vid, first, rows, calls, into_tables, kept=None):
        """Group ``number``'s graph on its inputs (``into_tables``: into its rows of the
        tables), the outputs, whether it reads an array needing a gradient, and what it keeps
        for its recomputation: its draws, or True for a seeded group (remat only). ``kept``:
        the forward's, when recomputing."""
        graph, callees, taped_inputs = _variant(schedule, state, q, vid)
        values = []
        with Unrecorded():   # See NOTE [views off the tape] in views.py
            out = [rows_of(t, first, first + rows) for t in tables[q]] if into_tables else None
            for role, i, j, site in graph.inputs:
                if role == "arg":   # (a view of rows, no general indexing)
                    values.append(rows_of(uploaded[q][i], first, first + rows))
                elif role == "env":
                    values.append(env[i])
                elif role == "table":
                    values.append(sources[callees[i]][site][j])
                else:   # call site j's rows of the site-major indices
                    a = calls[i][1][0][0] + j * rows
                    values.append(rows_of(index, a, a + rows))
        draws = group_draws(graph, training) if remat else None
        if draws is None:
            key = rows if sized and rows <= SIZED_ROWS[0] else None
            return _call(graph, nonempty, values, out, static, key), taped_inputs, None
        if draws == SEED:
            if SEED_GROUPS[0]:
                if not seed:
                    seed.append(_node.drawn_seed())
                mx.random.seed(seed[0] + number, ctx=ctx)
            SEEDED[0] += 1
            return _call(graph, nonempty, values, out), taped_inputs, True
        if kept is None:   # the forward: outputs into the tables, draws kept
            outputs = _call(draws.forward, nonempty, values, None)
            assert out is not None   # the forward runs into the tables
            for value, dst in zip(outputs, out):
                value.copyto(dst)
            return out, taped_inputs, outputs[draws.outputs:]
        REPLAYED[0] += 1
        return _call(draws.recompute, nonempty,
                     [values[k] if role == "input" else kept[k] for role, k in draws.inputs],
                     None), taped_inputs, kept

    with bulk():   # NOTE [bulked groups]
        if grads is None:
            grads = _gradient_tables(tables, ctx)
        mx.autograd.mark_variables([a for q in sources for s in sources[q] for a in s],
                                   [g for q in sources for _ in sources[q] for g in grads[q]],
                                   grad_reqs="add")
        for number, (q, vid, first, rows, calls) in enumerate(schedule.groups):
            # Written in place, each output into its rows of its table; unrecorded with remat.
            if number == 0 and early is not None:   # called already
                out, taped_inputs, kept = early[4]
            else:
                with mx.autograd.pause(train_mode=training) if remat else \
                        contextlib.nullcontext():
                    out, taped_inputs, kept = call_group(number, q, vid, first, rows, calls, True)
                if number == 0:   # NOTE [the caller waits for the first group]
                    node_progress.progressed()
            if taped_inputs:
                taped.append((number, q, vid, first, rows, calls, kept if remat else out))
    graph = _result_graph(plan, schedule.layouts, None)
    a, b = schedule.result[1][0]
    # Recorded on the enclosing tape: its backward adds the roots' gradients into the tables'.
    with mx.autograd.record(train_mode=training) if remat else contextlib.nullcontext():
        outputs = graph.op(*[sources[plan.entry][0][j] if role == "table" else rows_of(index, a, b)
                             for role, _, j, _ in graph.inputs])
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]

    def backward(train_mode):
        # Each group's head gradient is its rows of its function's gradient table, complete
        # once its parents (higher, earlier in this loop) have run.
        differ = []
        with bulk():   # NOTE [bulked groups]
            for number, q, vid, first, rows, calls, kept in reversed(taped):
                if remat:   # recomputed now, alone (NOTE [hybridized remat recursion])
                    with mx.autograd.record(train_mode=train_mode):
                        out, _, kept = call_group(number, q, vid, first, rows, calls, False, kept)
                    out = list(out) if isinstance(out, (list, tuple)) else [out]
                    if kept is True:   # seeded: the draws replayed, or the backward fails
                        differ += [d for d in (_remat._differs(o, rows_of(t, first, first + rows))
                                               for o, t in zip(out, tables[q])) if d is not None]
                    RECOMPUTED[0] += 1
                else:
                    out = kept
                # retain_graph: an unrecorded input (the environment's unmarked aliases) gets a
                # variable node on its first recorded use, shared by every group's tape; a
                # backward that frees its graph empties that node, and the next group's fails.
                mx.autograd.backward(out, [rows_of(g, first, first + rows) for g in grads[q]],
                                     retain_graph=True, train_mode=train_mode)
                out = kept = None
        if differ and mx.nd.add_n(*differ).asscalar() > 0:
            _refuse_different(schedule.context.node)

    _node.hand_backward(backward)
    RUNS[0] += 1
    return outputs


def bulk():
    """MXNet's engine bulking of this thread's operators for a planned run's group loop
    (NOTE [bulked groups])."""
    return mx.engine.bulk(BULK[0]) if BULK[0] else contextlib.nullcontext()


def _call(graph, nonempty, values, out, static=False, key=None):
    """``graph`` (a ``_ValueGraph`` or a :class:`CachedGraph`) on ``values``; the check for a
    zero-size input is skipped when the schedule has none. ``static``: a recorded call of the
    planned backward's forward, run by a static CachedOp (NOTE [static recorded groups]), the
    one of ``key`` (NOTE [sized recorded groups]; None: the graph's shared one)."""
    op = graph.op if hasattr(graph, "op") else graph
    if nonempty:
        if static and STATIC[0] and not op.constant and mx.autograd.is_recording():
            ops = getattr(op, "planned_static", None)
            if ops is None:
                symbol = op.symbol
                if _gradient_passes_through(json.loads(symbol.tojson())):
                    symbol = _no_gradient_passthrough(symbol)
                ops = op.planned_static = {None: symbol}   # None: the symbol
                op.planned_static_shared = None
            recorded = ops.get(key) if key is not None else op.planned_static_shared
            if recorded is None:
                recorded = mx.nd.CachedOp(ops[None], flags=[("static_alloc", True)])
                if key is None:
                    op.planned_static_shared = recorded
                else:
                    ops[key] = recorded
            try:
                outputs = recorded(*values, out=out)
            except mx.MXNetError:   # dropped (it keeps half its state); the error as always
                op.planned_static = None
            else:
                STATIC_CALLS[0] += 1
                SIZED_CALLS[0] += key is not None
                return outputs
        return CachedOpPair.__call__(op, *values, out=out)
    return op(*values, out=out)


def whole_rows(plan, q, rows):
    """The rows of function ``q``'s tables holding ``rows`` rows: a power of two, kept from
    batch to batch while it is at most four times ``rows`` rounded up (NOTE [sized recorded
    groups])."""
    need = 1 << (rows - 1).bit_length()
    kept = plan.table_rows.get(q, 0)
    if not need <= kept <= 4 * need:
        kept = plan.table_rows[q] = need
    KEPT_TABLES[0] += kept > need
    return kept


def remat_run(schedule):
    """Whether a function of ``schedule``'s recursion has ``remat=True`` (NOTE [hybridized
    remat recursion])."""
    return any(spec.get("remat") for spec in schedule.context.specs.values())


def _gradient_passes_through(js):
    """Whether an input of graph JSON ``js`` may get an output's gradient as is, or an output
    is an input or another output (NOTE [static recorded groups])."""
    nodes, heads = js["nodes"], [tuple(h[:2]) for h in js["heads"]]
    if len(set(heads)) < len(heads):
        return True

    def passing(node):
        return () if node["op"] in _GRADIENT_NODE_OPS else [e[0] for e in node["inputs"]]
    return any(nodes[nid]["op"] == "null"
               for nid in reached_ids(nodes, [nid for nid, _ in heads], passing))


def _refuse_different(node):
    spec = node.spec
    raise RuntimeError(
        "gluon_cf.recursive %r%s: with remat=True, a group of calls recomputed in backward gave "
        "other values than in the forward (random operators: %s), so its gradient would not be "
        "the forward's; use remat=False" % (
            spec["graphs"][spec["entry"]]["name"], _node.created_at(node),
            ", ".join(random_ops(spec)) or "none"))
