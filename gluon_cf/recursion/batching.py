"""The batching executor: dynamic batching of recursive invocations, decided at run time.

NOTE [batching]
    TF Fold batches the nodes of a tree known in advance. Here the tree need not be known: the
    executor runs the rules (generators, NOTE [trampoline]) as *tasks*, and an invocation of a
    recursive function is not run when it is requested. When no task can make progress, every
    task is waiting for invocations; the executor takes the largest group of pending invocations
    of one function (same function table and environment), concatenates their arguments along
    axis 0 and runs the body **once** for all of them, then hands each requester its rows.

    A batched value holds one row per invocation along axis 0; values shared by all rows
    (parameters, the environment, constants) are not batched, and every rule knows which of its
    inputs are (``Frame.flags``). Inside a batched body:

    * ordinary operators run once on all rows; a function is batched only if every operator in
      it is known to treat axis 0 as independent rows (NOTE [row-wise rules] in
      ``rowwise.py``); otherwise it runs row by row, with a one-time warning at the user's line
      naming the operator and how to write it batch-agnostically;
    * ``cond`` splits the rows by their predicate and runs each branch on its rows;
    * ``foreach``/``while_loop`` with batched inputs run once per row;
    * independent pieces of work (the call sites of one stage of a body, both branches of a
      cond, the rows of a loop, the steps of a stateless foreach such as the trees of a
      mini-batch) are requested together (``Parallel``), so their invocations meet in the
      pending groups.

    So left and right children of all nodes of a level, across all trees of a mini-batch, run as
    one batch - also for trees the model decides while running (the top-down generator).

    Plain graphs run on batched values (a cond branch without recursive calls, such as a tree's
    leaf case) are deferred the same way (``graph.GraphCall``), and only run when no
    invocation is pending: by then the recursion has reached the bottom, so the leaves of every
    level of every tree run as one batch, as TF Fold's schedule would have them. A graph is
    deferred only if it passes the same row-wise rules.
    Autograd records the concatenations and splits like any other operator, so training works
    unchanged and gives the gradients of the unbatched executor.
"""
import warnings
from typing import Dict, List, Tuple

import mxnet as mx

from .. import executor, rowwise
from ..errors import CallTreeTooLargeError
from ..executor import Parallel
from ..graph import GraphCall
from . import schedule
from .invocation import Invocation


class _Task:
    __slots__ = ("gen", "parent", "slot", "value")

    def __init__(self, gen, parent=None, slot=None):
        self.gen, self.parent, self.slot = gen, parent, slot
        self.value = None


class _Join:
    """A task waiting for several results (a Parallel request or a batched invocation)."""

    __slots__ = ("task", "results", "missing")

    def __init__(self, task, count):
        self.task, self.results, self.missing = task, [None] * count, count


def run_batched(gen):
    """Run ``gen`` with dynamic batching of the recursive invocations it (transitively) makes."""
    root = _Task(gen)
    ready = [root]
    pending: Dict[tuple, List[Tuple[_Task, Invocation]]] = {}   # (context, qname, args) -> ...
    calls: Dict[tuple, List[Tuple[_Task, GraphCall]]] = {}      # GraphCall.key() -> ...
    outcome = []
    invocations = [0]   # batched so far: a cycle in the tree arrays doubles them every level

    def deliver(task, value):
        """``task`` finished with ``value``: resume whoever waits for it."""
        parent, slot = task.parent, task.slot
        if parent is None:
            if task is root:
                outcome.append(value)
            return
        if isinstance(parent, _Join):
            parent.results[slot] = value
            parent.missing -= 1
            if parent.missing == 0:
                parent.task.value = parent.results
                ready.append(parent.task)
        else:
            parent.value = value
            ready.append(parent)

    while ready or pending or calls:
        if not ready:
            if pending:
                ready.append(_batch(pending, deliver, invocations))
            else:
                _run_calls(calls, deliver)
            continue
        task = ready.pop()
        try:
            request = task.gen.send(task.value)
        except StopIteration as stop:
            deliver(task, stop.value)
            continue
        task.value = None
        if isinstance(request, Parallel):
            join = _Join(task, len(request.works))
            if not request.works:
                task.value = []
                ready.append(task)
            # Reversed, so that the first piece of work runs first (program order).
            for i in reversed(range(len(request.works))):
                ready.append(_Task(request.works[i], join, i))
        elif isinstance(request, Invocation):
            if _batchable(request):
                # invocations whose arguments concatenate (a function's argument may be int32
                # at one call site, float32 at another: each runs as its own batch)
                key = (request.context.key, request.qname,
                       tuple((a.dtype, a.shape[1:]) for a in request.args))
                pending.setdefault(key, []).append((task, request))
            else:
                ready.append(_Task(request.unbatched(), task))
        elif isinstance(request, GraphCall):
            calls.setdefault(request.key(), []).append((task, request))
        else:
            ready.append(_Task(request, task))
    return outcome[0]


def _batch(pending, deliver, invocations):
    """Take the largest pending group; return a task that runs it as one batched invocation.
    ``invocations``: ``[count]`` of this run's batched invocations, refused beyond
    ``schedule.MAX_INVOCATIONS`` as an ahead-of-time schedule refuses them (breadth first, a
    cycle in the tree arrays exhausted memory long before max_depth: a review found it)."""
    key = max(pending, key=lambda k: sum(r.rows for _, r in pending[k]))
    group = pending.pop(key)
    first = group[0][1]
    rows = sum(r.rows for _, r in group)
    depth = max(r.depth for _, r in group)
    invocations[0] += rows
    if invocations[0] > schedule.MAX_INVOCATIONS:
        raise CallTreeTooLargeError(
            "gluon_cf.recursive: %r would make more than %d calls for one batch (%d levels "
            "deep so far); does it reach a base case, or do the tree arrays hold a cycle?"
            % (first.context.specs[first.qname]["name"], schedule.MAX_INVOCATIONS, depth))
    args = _concat_rows(group, [True] * len(first.args))

    def batched():
        outputs = schedule.run(first.context, first.qname, args, rows, depth)
        if outputs is not None:   # NOTE [ahead-of-time schedules]: one row per invocation
            _hand_out(group, outputs, deliver)
            return
        outputs = yield first.context.run(first.qname, args, rows, depth)
        graph = first.context.graphs[first.qname]
        # An output computed from the environment alone is every invocation's own value.
        _hand_out(group, outputs, deliver,
                  graph.batched_outputs([s < len(args) for s in graph.slots]), per_row=True)

    return _Task(batched())


def _run_calls(calls, deliver):
    """Run every group of pending plain-graph calls, each group as one batch."""
    groups = list(calls.values())
    calls.clear()
    for group in groups:
        first = group[0][1]
        outputs = first.graph.cached_op()(*_concat_rows(group, first.flags))
        _hand_out(group, list(outputs) if isinstance(outputs, (list, tuple)) else [outputs],
                  deliver, first.batched_outputs())


def _concat_rows(group, flags):
    """The arguments of a group of requests: batched ones (``flags``) concatenated along axis
    0, shared ones (the same object in every request of a group) as they are."""
    first = group[0][1]
    if len(group) == 1:
        return first.args
    return [mx.nd.concat(*[r.args[i] for _, r in group], dim=0) if batched else a
            for i, (a, batched) in enumerate(zip(first.args, flags))]


def _hand_out(group, outputs, deliver, batched=None, per_row=False):
    """Give each requesting task of ``group`` its rows of ``outputs`` (views, no copies).

    An output not ``batched`` (per output; None: all are) was computed from shared values
    alone: one value for all the rows, as each request would have computed it on its own -
    whole for a plain graph (run once on a request's rows), once per row for an invocation
    (``per_row``: the unbatched executor runs a request's invocations one by one and
    concatenates what each returns)."""
    start = 0
    batched = batched or [True] * len(outputs)
    for task, request in group:
        part = []
        for out, rows in zip(outputs, batched):
            if rows:
                part.append(out if len(group) == 1 else out[start:start + request.rows])
            elif per_row and request.rows > 1:
                part.append(mx.nd.tile(out, reps=(request.rows,) + (1,) * (out.ndim - 1)))
            else:
                part.append(out)
        start += request.rows
        deliver(_Task(None, task), part)


_checked: dict = {}
_warned: set = set()   # functions warned about (once each, whatever the batch)
_seen: dict = {}        # exact shapes -> verdict, before the row-check key is computed


def _batchable(request):
    """Whether the function's body may run on stacked invocations: every operator in it is
    known to act row by row (NOTE [row-wise rules] in ``rowwise.py``). Decided once per function
    and what the verdict depends on (``Graph.row_check_key``); when it may not, warns once, at
    the user's line."""
    context = request.context
    shapes = tuple(a.shape for a in request.args)   # (.shape is a C call: read once)
    exact = (context.namespace, request.qname, request.rows, shapes, context.env_shapes)
    verdict = _seen.get(exact)   # cheap: the same shapes as an earlier request
    if verdict is not None:
        return verdict
    graph = context.graphs[request.qname]
    # The key reads shapes only: those read already (the environment's by its context)
    values = [rowwise.Shaped(s) for s in shapes + tuple(context.env_shapes)]
    values, flags = ([values[s] for s in graph.slots], [s < len(shapes) for s in graph.slots])
    key = (context.namespace, request.qname, request.rows, shapes,
           graph.row_check_key(values, flags))
    verdict = _checked.get(key)
    if verdict is None:
        rejected = _check(context, graph, request)
        verdict = _checked[key] = rejected is None
        if rejected is not None and (context.namespace, request.qname) not in _warned:
            _warned.add((context.namespace, request.qname))
            _warn(context.specs[request.qname], rejected)
    if len(_seen) > 4096:   # one entry per forest shape seen: bounded
        _seen.clear()
    _seen[exact] = verdict
    return verdict


def _slot_values(context, graph, request):
    """The graph's inputs for ``request`` and which of them are batched (the arguments)."""
    values = list(request.args) + list(context.env)
    return ([values[s] for s in graph.slots],
            [s < len(request.args) for s in graph.slots])


def _check(context, graph, request):
    """None if ``graph`` may run batched, else the :class:`rowwise.Rejected` saying why."""
    for i, arg in enumerate(request.args):
        if arg.ndim == 0 or arg.shape[0] != request.rows:
            return rowwise.Rejected(
                {"name": "its argument #%d" % i},
                "has shape %s, not one row per invocation" % (arg.shape,),
                "Give per-invocation arguments a leading axis of 1, e.g. idx of shape (1,)")
    return graph.rows_rejected(*_slot_values(context, graph, request))


def _warn(spec, rejected):
    message = ("gluon_cf: recursive function %r runs unbatched, row by row: %s"
               % (spec["name"], rejected.describe()))
    # At the operator's line, else at the function's definition.
    filename, _, line = (rejected.source or spec.get("source") or "<gluon_cf>:0").rpartition(":")
    warnings.warn_explicit(message, UserWarning, filename, int(line) if line.isdigit() else 0)


executor.register_scheduler("batched", run_batched)
