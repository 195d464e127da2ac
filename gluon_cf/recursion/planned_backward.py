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


def _scatter(table, rows, index):
    """``table[index] = rows`` in place (``index``: distinct row numbers, an int32 vector)."""
    mx.nd._internal._scatter_set_nd(lhs=table, rhs=rows, indices=index.reshape((1, -1)),
                                    shape=table.shape, out=table)


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
    index = upload(schedule.indices, ctx)
    uploaded = {q: [upload(a, ctx) for a in args] for q, args in schedule.sorted_args.items()}
    tables = {q: mx.nd.empty((n, layouts[q]["width"]), ctx=ctx, dtype=layouts[q]["dtype"])
              for q, n in schedule.counts.items() if n}
    taped: List[tuple] = []   # per group: (qname, first, rows, output, [(callee, leaf, (a, b))])

    def gathered(callees, calls):
        leaves = []
        with mx.autograd.pause():
            for callee, (_, slices, _) in zip(callees, calls):
                a, b = slices[0]
                leaf = mx.nd.take(tables[callee], index[a:b], axis=0, mode="clip")
                leaves.append((callee, leaf, (a, b)))
        for _, leaf, _ in leaves:
            leaf.attach_grad()
        return leaves

    for q, vid, first, rows, calls in schedule.groups:
        leaves = gathered([callee for callee, _ in plan.functions[q].callees(vid)], calls)
        graph = _value_graph(plan, layouts, q, vid, "rows")
        values = []
        for role, i, _ in graph.inputs:
            values.append(uploaded[q][i][first:first + rows] if role == "arg" else
                          env[i] if role == "env" else leaves[i][1])
        out = graph.op(*values)
        out = out[0] if isinstance(out, (list, tuple)) else out
        with mx.autograd.pause():
            out.copyto(tables[q][first:first + rows])
        # A group of leaves reading no marked array is a constant to autograd: nothing to do.
        if leaves or any(role == "env" and env[i].grad is not None
                         for role, i, _ in graph.inputs):
            taped.append((q, first, rows, out, leaves))
    roots = gathered([plan.entry], [schedule.result])
    graph = _result_graph(plan, layouts, "rows")
    outputs = graph.op(roots[0][1])   # recorded on the enclosing tape, from the roots' leaf
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]

    def backward(train_mode):
        grads: Dict[str, mx.nd.NDArray] = {
            q: mx.nd.zeros(t.shape, ctx=ctx, dtype=t.dtype) for q, t in tables.items()}

        def hand_down(leaves):
            with mx.autograd.pause():
                for callee, leaf, (a, b) in leaves:
                    _scatter(grads[callee], leaf.grad, index[a:b])

        hand_down(roots)
        for q, first, rows, out, leaves in reversed(taped):
            # retain_graph: an unrecorded input (the environment's unmarked aliases) gets a
            # variable node on its first recorded use, shared by every group's tape; a
            # backward that frees its graph empties that node, and the next group's fails.
            mx.autograd.backward([out], [grads[q][first:first + rows]], retain_graph=True,
                                 train_mode=train_mode)
            hand_down(leaves)
        with mx.autograd.pause():
            for i in marked:
                originals[i].grad[:] += env[i].grad

    _node.hand_backward(backward)
    RUNS[0] += 1
    return outputs
