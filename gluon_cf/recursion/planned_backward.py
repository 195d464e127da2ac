"""The planned backward of an ahead-of-time schedule run at the top level under autograd.

NOTE [planned backward]
    Under ``autograd.record()`` a schedule (NOTE [ahead-of-time schedules] in
    recursion/schedule.py) cannot keep a function's rows in one table written in place (autograd
    cannot record a write into a view), so its recorded run gathers each group's children from
    the outputs of the source groups: a ``take``, ``Concat`` and permutation per callee whose
    backward costs about a third of the batch's backward, and every parameter's gradient is
    the sum of one ``_grad_add`` per group. Where it is safe, the run is planned instead:

    * **Forward**: the rows live in per-function tables, in run order, as in inference. Each
      group's children rows are taken from the callee's table unrecorded and become a leaf
      (``attach_grad``); the group's graph (with ``rows`` inputs, recursion/value_graphs.py) is
      recorded from those leaves and from aliases of the environment's arrays (``detach`` +
      ``attach_grad(grad_req="add")``), and its output copied into its table unrecorded. So
      every group is a small tape of its own; the roots' rows are one more leaf, from which
      the recursion's outputs are recorded on the enclosing tape.
    * **Backward**, run by the enclosing node's own backward once its ``autograd.backward``
      has given the roots' leaf its gradient (:func:`gluon_cf.node.hand_backward`): the
      groups in reverse run order (parents before children), each by ``autograd.backward`` of
      its output with its rows of the function's gradient table as the head gradient; the
      children leaves' gradients are written into the callees' gradient tables at the rows
      they were taken from (``_scatter_set_nd``: every invocation's rows are read by exactly
      one call site, or are one root, so a write, not a sum, is exact). Each group's backward
      adds its share into the aliases' buffers inside the CachedOp's own backward; at the end
      each alias's gradient is added once into the node input's gradient.

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
"""
from typing import Dict, List

import mxnet as mx
import numpy as np

from .. import node as _node
from .value_graphs import _result_graph, _value_graph

ENABLED = [True]   # NOTE above: tests compare the planned and the recorded backward
RUNS = [0]         # schedules run with a planned backward (for tests, tools)


def applies(context, depth):
    """Whether a schedule for this call may run with a planned backward (NOTE above)."""
    if not (ENABLED[0] and depth == 1 and context.parent is None
            and mx.autograd.is_recording() and _node.top_level_node() is not None):
        return False
    inputs = {id(a) for a in _node.top_level_inputs()}
    return all(id(value) in inputs or not _node.is_float(value.dtype) for value in context.env)


def run(schedule, ctx, upload):
    """The outputs of ``schedule`` (laid out in place), each group recorded on a tape of its
    own; hands the node its planned backward."""
    plan, layouts = schedule.plan, schedule.layouts
    # Aliases of the environment, so that the groups' tapes share nothing with the enclosing
    # one (whose backward frees the nodes it visits): each group's backward adds into the
    # marked ones' gradients.
    originals = schedule.context.env
    env = [value.detach() for value in originals]
    marked = [i for i, value in enumerate(originals) if value.grad is not None]
    for i in marked:
        env[i].attach_grad(grad_req="add")
    tables = {q: mx.nd.empty((n, layouts[q]["width"]), ctx=ctx, dtype=layouts[q]["dtype"])
              for q, n in schedule.counts.items() if n}
    callees = [[callee for callee, _ in plan.functions[q].callees(vid)]
               for q, vid, _, _, _ in schedule.groups]
    regions, inverse, spans = _leaf_gradient_places(schedule, callees, tables)
    index = upload(schedule.indices, ctx)
    inverse = upload(inverse, ctx)
    uploaded = {q: [upload(a, ctx) for a in args] for q, args in schedule.sorted_args.items()}
    # The children leaves' gradients, in gather order (NOTE above).
    leaf_grads = {q: mx.nd.zeros(t.shape, ctx=ctx, dtype=t.dtype) for q, t in tables.items()}
    taped: List[tuple] = []   # per group: (qname, first, rows, output)

    def gathered(names, calls, starts):
        leaves, views = [], []
        with mx.autograd.pause():
            for callee, (_, slices, _), start in zip(names, calls, starts):
                a, b = slices[0]
                leaves.append(mx.nd.take(tables[callee], index[a:b], axis=0, mode="clip"))
                views.append(leaf_grads[callee][start:start + b - a])
        if leaves:
            mx.autograd.mark_variables(leaves, views)
        return leaves

    for (q, vid, first, rows, calls), names, starts in zip(schedule.groups, callees, regions):
        leaves = gathered(names, calls, starts)
        graph = _value_graph(plan, layouts, q, vid, "rows")
        values = []
        for role, i, _ in graph.inputs:
            values.append(uploaded[q][i][first:first + rows] if role == "arg" else
                          env[i] if role == "env" else leaves[i])
        out = graph.op(*values, out=[tables[q][first:first + rows]])   # written in place
        # A group of leaves reading no marked array is a constant to autograd: nothing to do.
        if leaves or any(role == "env" and env[i].grad is not None
                         for role, i, _ in graph.inputs):
            taped.append((q, first, rows, out[0]))
    roots = gathered([plan.entry], [schedule.result], regions[-1])
    graph = _result_graph(plan, layouts, "rows")
    outputs = graph.op(roots[0])   # recorded on the enclosing tape, from the roots' leaf
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]

    def backward(train_mode):
        # The enclosing backward has written the roots' gradient; each group's head gradient
        # is its rows of the gathers' gradients, complete once its parents (higher, earlier
        # in this loop) have run.
        for q, first, rows, out in reversed(taped):
            start = spans[q] + first
            with mx.autograd.pause():
                head = mx.nd.take(leaf_grads[q], inverse[start:start + rows], axis=0)
            # retain_graph: an unrecorded input (the environment's unmarked aliases) gets a
            # variable node on its first recorded use, shared by every group's tape; a
            # backward that frees its graph empties that node, and the next group's fails.
            mx.autograd.backward([out], [head], retain_graph=True, train_mode=train_mode)
        with mx.autograd.pause():
            for i in marked:
                originals[i].grad[:] += env[i].grad

    _node.hand_backward(backward)
    RUNS[0] += 1
    return outputs


def _leaf_gradient_places(schedule, callees, tables):
    """Where the gradient of every gather's leaf goes: a slice of the callee's leaf-gradient
    buffer, in gather order (per group: the start of each callee's slice; the roots' last),
    and per function the inverse permutation (table row -> gather row), all functions' in one
    int32 vector, with each function's offset in it. Every invocation's rows are gathered
    exactly once (by its parent's call site, or as a root), so the gathers of a function are
    a permutation of its table's rows."""
    filled = dict.fromkeys(tables, 0)
    order: Dict[str, list] = {q: [] for q in tables}

    def place(callee, slices):
        a, b = slices[0]
        start = filled[callee]
        filled[callee] += b - a
        order[callee].append(schedule.indices[a:b])
        return start

    regions = [[place(callee, calls[k][1]) for k, callee in enumerate(names)]
               for names, (_, _, _, _, calls) in zip(callees, schedule.groups)]
    regions.append([place(schedule.plan.entry, schedule.result[1])])
    inverses, spans, offset = [], {}, 0
    for q, table in tables.items():
        n = table.shape[0]
        rows = np.concatenate(order[q])
        inverse = np.full(n, -1, np.int32)
        inverse[rows] = np.arange(len(rows), dtype=np.int32)
        if len(rows) != n or (inverse < 0).any():
            raise AssertionError("gluon_cf: the ahead-of-time schedule of %r gathers %d rows "
                                 "of a table of %d, not each once" % (q, len(rows), n))
        inverses.append(inverse)
        spans[q] = offset
        offset += n
    return regions, np.concatenate(inverses), spans
