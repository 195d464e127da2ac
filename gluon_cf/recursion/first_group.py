"""The first group of an ahead-of-time schedule, found before its layout.

NOTE [the first group before the layout]
    An inference batch's host work before its first group call (the block's call, the node's
    forward, expansion, grouping and gather indices, uploads) runs while MXNet's engine has
    nothing to compute: on a quiet machine it adds to the batch's wall time, where g's host
    work overlaps its cell calls (README, issue 28, session 24: by CPU time e/g met TreeRNN
    batch 25's target, by wall time it did not). The first group of the layout
    (``_Schedule.lay_out``: groups ordered by height, function, variant) is known from the
    expansion alone: its height is 0, and a row's height is 0 exactly when it makes no call
    (every child -1); the first function in the plan's order with such rows, their smallest
    variant, and those rows in id order (the layout's sort is stable), at the start of the
    function's table. When that variant gathers nothing (a leaf), its sized call (NOTE
    [padded rows] in recursion/value_graphs.py) is pushed before the layout is computed, on
    its own rows' arguments, into tables made with room for any group's padding (``SLACK``),
    and the group loop skips it (``_Schedule.push_first``): the engine computes the leaves
    while the host lays out the rest. A group the loop would call unpadded (more than 512
    rows, or a graph not sized this batch) is called unpadded here too. The values are those
    of the group's call in the loop, the same graph on the same rows; its padding rows, as in
    the loop, are written into rows of later groups, which write them before any group reads
    them. The loop runs the group again if its rows differ from those pushed.
"""
from typing import Dict, Optional, Tuple

import mxnet as mx
import numpy as np

from .views import call_on_rows, rows

# Rows a schedule's padded groups may add past a table's invocations: ``_padded(rows) - rows``
# is below 64 for every group of at most 512 rows (``schedule.PADDED_ROWS``).
SLACK = 64
PUSHED = [0]   # first groups pushed before the layout (for tests, tools)
EARLY = [True]   # False: the first group runs in the loop, as before (to measure)


def find(plan, variants: Dict[str, np.ndarray],
         children: Dict[str, np.ndarray]) -> Optional[Tuple[str, int, np.ndarray]]:
    """``(function, variant, ids)`` of the layout's first group when it gathers nothing (NOTE
    above), from each live function's invocations' variants and children; else None."""
    for q in sorted(variants, key=plan.order.__getitem__):
        leaf = (children[q] < 0).all(axis=1)
        if leaf.any():
            vid = int(variants[q][leaf].min())
            if plan.functions[q].callees(vid):
                return None
            return q, vid, np.flatnonzero(leaf & (variants[q] == vid))
    return None


def inputs(graph, args, env, edged) -> Optional[list]:
    """The first group's inputs: its arguments ``args``, the environment ``env`` (edged by
    ``edged(i)`` where the graph reads it so); None if it reads a table or an index."""
    edges = graph.edged()
    values: list = []
    for role, i, _, _ in graph.inputs:
        if role == "arg":
            values.append(args[i])
        elif role == "env":
            values.append(edged(i) if i in edges else env[i])
        else:
            return None
    return values


def call(graph, sized, size, values, tables) -> bool:
    """The first group's call on ``values`` into rows ``0:size`` of ``tables`` (its outputs'):
    by ``sized`` (NOTE [padded rows] in recursion/value_graphs.py), or by the graph's own
    CachedOp when None, as the loop would call it; False on MXNet's error (the loop's call
    of the group then gives it)."""
    try:
        if sized is None:
            graph.nonempty(*values, out=[rows(t, 0, size) for t in tables])
        else:
            call_on_rows(sized, values, [(t, 0, size) for t in tables])
    except mx.MXNetError:
        if sized is not None:
            graph.forget(size)
        return False
    return True
