"""Ahead-of-time schedules: recursion whose control flow depends only on integer inputs.

NOTE [ahead-of-time schedules]
    In most recursive models (TreeLSTM, TreeRNN, RNTN) every ``cond`` predicate and every
    recursive call's argument is computed from the function's index arguments and integer
    inputs of the block (``left``, ``right``), never from parameters or computed values. Then the
    whole call tree of a mini-batch is known before any value is computed (what TF Fold asks its
    users to provide), and the dynamic batching executor's per-level work (a predicate read to
    the host, splits, concatenations, one call per piece) can be replaced by a schedule:

    1. **Analysis**, once per function table (:func:`analyse`, in recursion/skeleton.py,
       with the numpy rules of recursion/host_rules.py). A function qualifies when
       * its body (with every nested ``cond`` branch) holds only ordinary operators, ``cond``
         and ``invoke`` nodes of the same table (no loops, nested recursion nodes, CustomOps or
         run-time-shape operators);
       * its *control skeleton* - the operators computing each ``cond`` predicate and each
         ``invoke`` argument - reads only the function's arguments and the environment through
         operators with a host rule (``HOST_RULES``: ``take``, comparisons, integer-scalar
         arithmetic, copies, casts), each exact in numpy for the values MXNet computes;
       * its arguments are *index-only*: everything computed from them reaches only the
         skeleton and index inputs (``take``'s indices, ``Embedding``'s data), so no gradient
         flows into them and a host copy of them is as good as the original;
       * its outputs have one row per invocation and one dtype (they are stored packed).
       Anything else keeps the dynamic executor; :func:`report` says why, per function.
    2. **Host expansion** (:meth:`_Schedule.expand`): starting from the batch's root calls, the
       skeleton is evaluated in numpy one frontier (call depth) at a time, for all rows at
       once: the predicate of every ``cond`` picks each row's branch, the arguments of every
       ``invoke`` become the next frontier. The result is the call tree: for every invocation
       its *variant* (the branches it takes), its arguments and its children. The depth bound
       is checked here, before any value is computed.
    3. **Values** (:meth:`_Schedule.run`): invocations are grouped by (height above the leaves,
       function, variant) and every group runs as **one** CachedOp call: the variant's body
       with the chosen branches inlined and each ``invoke`` replaced by a gather of the
       children's rows from the outputs of earlier groups (:func:`_value_graph`, in
       recursion/value_graphs.py). The
       arguments and all gather indices of the whole schedule are uploaded once. A batch
       costs one call per (height, variant) plus two host reads (root arguments, the
       environment's integer arrays), where the dynamic executor pays several calls and one
       host read per level.

    Autograd records the group calls like any other, so training gets the same gradients
    (inside a node's forward, each group on a tape of its own with a planned backward, NOTE
    [planned backward] in recursion/planned_backward.py); the
    skeleton's operators are not recorded, which changes nothing because, being index-only,
    they receive no gradient in the dynamic executor either. When a value the skeleton reads
    from the environment has a gradient buffer attached, the dynamic executor runs instead, so
    that buffer is written exactly as before.
"""
import collections
from typing import Any, Dict, List, Optional, Union

import mxnet as mx
import numpy as np

from .. import executor, node, registry, rowwise
from ..uploads import from_numpy
from ..errors import CallTreeTooLargeError, RecursionDepthError
from . import first_group, planned_backward
from .skeleton import _REPORT, analyse, report  # noqa: F401 (report: the public entry)
from . import skeleton_tables
from .skeleton_tables import SkeletonTable
from .table import table as _table
from .value_graphs import _edged_rows, _result_graph, _value_graph
from .views import call_on_rows, rows as _rows

# Invocations one schedule may hold: beyond, the call tree is refused with CallTreeTooLargeError
# before any value is computed (a cycle in the tree arrays doubles it at every level, and the
# dynamic executor would exhaust memory long before max_depth).
MAX_INVOCATIONS = 1 << 22
SKELETON_TABLES = [True]   # NOTE [skeleton tables]: tests compare with direct evaluation
CHAINED = [True]           # NOTE [chained expansion]: tests compare with lookups per frontier
# A skeleton table of n indices is built once a function's frontiers evaluated directly number
# n / TABLE_ROWS_PER_LEVEL: a frontier costs about as much as tabulating this many indices
# (numpy calls dominate both), so a long array read by few calls is not tabulated at once.
# 1024, not 512: a table also lets every later frontier of a tree fold be chained (NOTE [chained
# expansion]), so the benchmark's forests of 25 trees (750-1,080 nodes) are tabulated at their
# first frontier instead of evaluating it directly (~120 us of host time per batch).
TABLE_ROWS_PER_LEVEL = 1024
PADDED = [True]   # NOTE [padded rows] in recursion/value_graphs.py (tests compare with eager)
PADDED_ROWS = 512   # larger groups run unpadded: their arithmetic outweighs a call's set-up
PADDED_TABLE_BYTES = 1 << 22   # padded, a table's rows are a multiple of this many bytes' worth
RUNS: collections.Counter = collections.Counter()   # function name -> batches on a schedule


def run(context, qname, args, rows, depth):
    """The outputs of ``rows`` invocations of ``qname`` on ``args`` (one row each) on an
    ahead-of-time schedule, or None when the dynamic executor must run them."""
    if not executor.ahead_of_time():
        return None
    plan = analyse(context, qname)
    if plan is None:
        return None
    # A rematerialised node's forward runs unrecorded, as if recorded (NOTE [hybridized remat
    # recursion] in planned_backward.py)
    recording = mx.autograd.is_recording() or (depth == 1 and node.remat_forward())
    if recording and any(context.env[i].grad is not None for i in plan.env_needs):
        return None
    schedule = _Schedule(plan, context)
    schedule.expand([a.asnumpy() for a in args], depth)
    planned = planned_backward.applies(context, depth)
    if not recording and not planned:   # NOTE [the first group before the layout]
        schedule.push_first(args[0].context)
    elif planned:   # False when an output is not float (NOTE [planned backward])
        planned = planned_backward.push_first(schedule, args[0].context, _upload)
    if not schedule.lay_out(in_place=planned or not recording):
        return None
    if planned and schedule.roots:   # NOTE [planned backward]
        outputs = planned_backward.run(schedule, args[0].context, _upload)
    else:
        outputs = schedule.run(args[0].context)
    RUNS[plan.functions[qname].name] += 1
    return outputs


def _layout_key(plan, context, qname, arg_shapes, arg_dtypes):
    """(the key of ``plan.layouts``, the graph's row-check values and flags)."""
    function = plan.functions[qname]
    graph = function.graph
    values = [rowwise.Shaped((3,) + s[1:]) for s in arg_shapes] + \
        [rowwise.Shaped(s) for s in context.env_shapes]
    values, flags = ([values[s] for s in graph.slots],
                     [s < function.num_args for s in graph.slots])
    # The outputs' dtypes may follow the environment's (an embedding matrix of float16):
    # a layout of an earlier batch's dtypes would give tables of the wrong dtype.
    key = (qname, tuple(arg_shapes), tuple(str(d) for d in arg_dtypes),
           tuple(str(d) for d in context.env_dtypes), graph.row_check_key(values, flags))
    return key, values, flags


def _proven_row_by_row(plan, context, qname, args):
    """Whether an earlier batch proved ``qname``'s body acts row by row for arguments like
    ``args`` (its layout is cached and not None), without inferring anything now."""
    key, _, _ = _layout_key(plan, context, qname, [(1,) + a.shape[1:] for a in args],
                            [a.dtype for a in args])
    return plan.layouts.get(key) is not None


def _layout(plan, context, qname, arg_shapes, arg_dtypes):
    """How ``qname``'s outputs are packed into one row per invocation, for these argument
    shapes: ``{"shapes", "sizes", "width"}``; None if they cannot be, or if its body is not
    known to act row by row for them (cached)."""
    function = plan.functions[qname]
    graph = function.graph
    key, values, flags = _layout_key(plan, context, qname, arg_shapes, arg_dtypes)
    if key in plan.layouts:
        return plan.layouts[key]
    table = _table(context.namespace)
    layout = None
    # This batch's environment, not the table's last seen (NOTE [one table, many threads])
    outs = table.out_shapes(qname, list(arg_shapes), context.env_shapes) \
        if table is not None else None
    types = table.out_types(qname, list(arg_dtypes), list(context.env_dtypes)) \
        if table is not None else None
    if not outs or None in outs or any(registry.is_dynamic(o) or not o or o[0] != 1
                                       for o in outs) \
            or not types or None in types or len({np.dtype(t) for t in types}) != 1:
        _REPORT[function.label] = ("its outputs (shapes %s, dtypes %s) are not one row per "
                                  "invocation of one dtype" % (outs, types))
    else:
        rejected = graph.rows_rejected(values, flags)
        if rejected is not None:
            _REPORT[function.label] = "it does not act row by row: " + rejected.describe()
        else:
            sizes = [int(np.prod(o[1:], dtype=np.int64)) for o in outs]
            layout = {"shapes": [tuple(o[1:]) for o in outs], "sizes": sizes,
                      "width": sum(sizes), "dtype": np.dtype(types[0])}
    plan.layouts[key] = layout
    return layout


class _Schedule:
    """One batch's call tree (host expansion) and its run (NOTE [ahead-of-time schedules])."""

    def __init__(self, plan, context):
        self.plan = plan
        self.context = context
        self.groups: list = []   # (qname, variant, first position, rows, calls): lay_out
        self.sorted_args: Dict[Any, list] = {}   # per function: its arguments in run order
        self.indices: Optional[np.ndarray] = None
        self.result: Any = None   # where the roots' rows are (lay_out's gather)
        self.flat: Optional[tuple] = None   # per function: variants, children, arguments
        self.early: Optional[tuple] = None   # the group pushed by push_first, its tables
        self.edged_env: Dict[int, mx.nd.NDArray] = {}
        self.layouts: Dict[str, Any] = {}   # per function called: how its outputs are stored

    def expand(self, root_args, depth):
        """Evaluate the skeleton frontier by frontier from the root calls."""
        plan = self.plan
        self.roots = len(root_args[0])
        counts = self.counts = dict.fromkeys(plan.functions, 0)
        self.steps: list = []   # per depth: [(qname, first id, variant ids, children)]
        self.args: Dict[str, list] = {q: [] for q in plan.functions}   # per call: its arguments
        if not self.roots:   # an empty batch calls nothing: its outputs have no rows
            self.root_args = root_args
            return
        env = {i: self.context.env[i].asnumpy() for i in plan.env_needs}
        frontier = {plan.entry: (list(root_args), None)}   # callee -> (arguments, index)
        total = 0
        tables: Dict[str, Union[SkeletonTable, bool]] = {}   # NOTE [skeleton tables]
        levels: Dict[str, int] = {}   # frontiers of each function so far
        while frontier:
            step: list = []
            following: Dict[str, list] = {}   # callee -> the arguments of its calls
            # The first id of each callee's calls in the next frontier.
            first = {q: counts[q] + (len(frontier[q][0][0]) if q in frontier else 0)
                     for q in plan.functions}
            for qname, (args, index) in frontier.items():
                function = plan.functions[qname]
                _check_depth(function, depth)
                rows = len(args[0])
                table = tables.get(qname)
                if table is None:   # not yet worth its cost, or never possible (False)
                    levels[qname] = levels.get(qname, 0) + 1
                    table = self._skeleton_table(function, args, env, levels[qname])
                    if table is not None:
                        tables[qname] = table
                if len(frontier) == 1 and isinstance(table, SkeletonTable) \
                        and table.chain is not None and CHAINED[0]:
                    if index is None:
                        index = table._index(args[table.argument])
                    if not len(index) or index.min() >= 0:   # NOTE [chained expansion]
                        total = self._expand_chain(function, table, index, depth, counts, total)
                        frontier = {}
                        break
                    index = None
                found = table.lookup(args, index) if isinstance(table, SkeletonTable) else None
                if found is not None:
                    variant_ids, calls, indices = found
                else:
                    values = {name: args[k] for name, k in function.host_args.items()}
                    values.update((name, env[i]) for name, i in function.host_env.items())
                    codes, keys, calls = function.body.evaluate(values, rows)
                    indices = [None] * len(calls)
                    variant_ids = np.array([function.variant(k) for k in keys],
                                           np.int64)[codes]
                children = np.full((rows, len(function.sites)), -1, np.int64)
                for (site, picked, callee, callee_args), callee_index in zip(calls, indices):
                    chunks = following.setdefault(callee, [0, [], []])
                    children[picked, site] = np.arange(first[callee] + chunks[0],
                                                       first[callee] + chunks[0] + len(picked))
                    chunks[0] += len(picked)
                    chunks[1].append(callee_args)
                    chunks[2].append(callee_index)
                step.append((qname, counts[qname], variant_ids, children))
                self.args[qname].append(args)
                counts[qname] += rows
                total += rows
            if not frontier:   # expanded to the end by _expand_chain
                break
            self.steps.append(step)
            if total + sum(c[0] for c in following.values()) > MAX_INVOCATIONS:
                self._too_large({plan.functions[q].name for q in frontier})
            frontier = {callee: ([np.concatenate(parts) for parts in zip(*chunks[1])],
                                 None if any(i is None for i in chunks[2])
                                 else np.concatenate(chunks[2]))
                        for callee, chunks in following.items()}
            depth += 1

    def _expand_chain(self, function, table, index, depth, counts, total):
        """The frontiers from ``index`` (rows of ``table``) to the leaves, each one lookup of
        its rows' children in ``table.chain`` (NOTE [chained expansion]); returns ``total``
        with their invocations added."""
        qname = function.qname
        sites, chain = table.chain
        every_site = list(sites) == list(range(len(function.sites)))   # in the sites' order
        levels, kids = [], []   # per frontier: its rows' table indices, their children's
        while len(index):
            _check_depth(function, depth)
            found = chain[index].T    # (calls, rows): call-major, as the frontier numbers them
            levels.append(index)
            kids.append(found)
            total += len(index)
            skeleton_tables.LOOKUPS[0] += 1
            index = found[found >= 0]
            if total + len(index) > MAX_INVOCATIONS:   # (its steps not built: unused)
                self._too_large({function.name}, len(self.steps) + len(levels))
            depth += 1
        self._chain_steps(function, table, every_site, levels, kids, counts)
        self.args[qname].append([table.rows[np.concatenate(levels)]])
        return total

    def _chain_steps(self, function, table, every_site, levels, kids, counts):
        """The steps of the frontiers ``levels`` expanded by :meth:`_expand_chain`, their
        children numbered at once: each frontier's reached calls are the next frontier, whose
        invocations are numbered on from the frontier's own, so the reached calls of all the
        frontiers, in order, are numbered by one count from the first frontier's end."""
        if not levels:
            return
        qname = function.qname
        first = counts[qname]
        flat = np.concatenate([k.reshape(-1) for k in kids])
        reached = flat >= 0
        numbered = np.full(len(flat), -1, np.int64)
        start = first + len(levels[0])
        numbered[reached] = np.arange(start, start + int(np.count_nonzero(reached)))
        variants = table.variants[np.concatenate(levels)]
        at = row = 0
        for index, found in zip(levels, kids):
            rows = len(index)
            mine = numbered[at:at + found.size].reshape(found.shape).T
            at += found.size
            if every_site:
                children = mine
            else:
                children = np.full((rows, len(function.sites)), -1, np.int64)
                children[:, table.chain[0]] = mine
            self.steps.append([(qname, first + row, variants[row:row + rows], children)])
            row += rows
        counts[qname] += row

    def _too_large(self, names, levels=None):
        raise CallTreeTooLargeError(
            "gluon_cf.recursive: %s would make more than %d calls for one batch (%d "
            "levels deep so far); does it reach a base case, or do the tree arrays "
            "hold a cycle?" % (", ".join(map(repr, sorted(names))), MAX_INVOCATIONS,
                               len(self.steps) if levels is None else levels))

    def _skeleton_table(self, function, args, env, levels):
        """``function``'s skeleton on every index of its environment's arrays (NOTE
        [skeleton tables]) at its ``levels``-th frontier: None while the frontiers evaluated so
        far cost less than the table would, False when it has none."""
        if not SKELETON_TABLES[0] or not function.host_env:
            return False
        values = {name: env[i] for name, i in function.host_env.items()}
        size = max(len(v) if v.ndim else 0 for v in values.values())
        if size > levels * TABLE_ROWS_PER_LEVEL:
            return None
        if not _proven_row_by_row(self.plan, self.context, function.qname, args):
            return False
        return SkeletonTable.build(function, values, args, size) or False

    def lay_out(self, in_place):
        """Group the invocations by (height, function, variant), in the order they run, and
        compute every gather index; ``in_place``: each function's rows in one table (below).
        False if some function's outputs cannot be packed."""
        plan, counts = self.plan, self.counts
        self.in_place = in_place
        if not self.roots:   # only the entry's layout: the shapes of the empty outputs
            layout = _layout(plan, self.context, plan.entry,
                             [(1,) + a.shape[1:] for a in self.root_args],
                             [a.dtype for a in self.root_args])
            self.layouts = {plan.entry: layout}
            return layout is not None
        live = [q for q in plan.functions if counts[q]]
        variants, children, args = self._flat()
        if not self._layouts(args):
            return False
        # A level's height: 1 + its children's highest. Each array ends with a -1 that a call
        # not made (child -1) reads: its "child" then counts 0, as a leaf's height.
        heights = {q: np.zeros(counts[q] + 1, np.int64) for q in live}
        for q in live:
            heights[q][-1] = -1
        reads = {q: [(heights[callee], columns)
                     for callee, columns in plan.functions[q].site_columns() if counts[callee]]
                 for q in live}
        for step in reversed(self.steps):
            for qname, first, _, kids in step:
                mine = heights[qname][first:first + len(kids)]
                for below, columns in reads[qname]:
                    highest = below[kids if columns is None else kids[:, columns]].max(axis=1)
                    highest += 1
                    np.maximum(mine, highest, out=mine)
        heights = {q: h[:-1] for q, h in heights.items()}

        groups = []   # (height, function order, variant, qname, ids, first position)
        self.sorted_args, orders = {}, {}
        for q in live:
            width = len(plan.functions[q].keys)
            key = heights[q] * width + variants[q]
            order = np.argsort(key, kind="stable")
            ordered = key[order]
            bounds = np.concatenate([[0], np.flatnonzero(np.diff(ordered)) + 1, [len(order)]])
            for a, b in zip(bounds[:-1], bounds[1:]):
                groups.append((int(ordered[a] // width), plan.order[q], int(ordered[a] % width),
                               q, order[a:b], int(a)))
            self.sorted_args[q] = [a[order] for a in args[q]]
            orders[q] = order
        groups.sort(key=lambda g: g[:3])
        self.first_ids = groups[0][4]
        group_of: Dict[str, np.ndarray] = {}   # gathers from source groups' outputs only
        row_of: Dict[str, np.ndarray] = {}
        if not in_place:
            group_of = {q: np.empty(counts[q], np.int64) for q in live}
            row_of = {q: np.empty(counts[q], np.int64) for q in live}
            for g, (_, _, _, q, ids, _) in enumerate(groups):
                group_of[q][ids] = g
                row_of[q][ids] = np.arange(len(ids))

        indices: List[np.ndarray] = []
        self.offset = 0
        # Inference: every function's rows live in one table, in run order (a group's rows
        # are one slice of it), so a gather is one take. Under autograd a table written in
        # place cannot be recorded: rows are gathered from the outputs of the source groups,
        # unless the backward is planned (NOTE [planned backward]).
        if self.in_place:
            position = {}
            for q in live:
                position[q] = np.empty(counts[q], np.int64)
                position[q][orders[q]] = np.arange(counts[q])

        def gather(callee, wanted):
            """Where the rows of invocations ``wanted`` (ids of ``callee``) are: (source
            groups, index slices into each, the permutation slice or None); in place: the
            positions in the callee's table."""
            if self.in_place:
                return None, [self._push(indices, position[callee][wanted])], None
            sources, rows = group_of[callee][wanted], row_of[callee][wanted]
            if (sources == sources[0]).all():
                return [int(sources[0])], [self._push(indices, rows)], None
            order = np.argsort(sources, kind="stable")
            ordered = sources[order]
            bounds = np.concatenate([[0], np.flatnonzero(np.diff(ordered)) + 1, [len(order)]])
            picked = rows[order]
            parts = [self._push(indices, picked[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
            perm = np.empty_like(order)
            perm[order] = np.arange(len(order))
            return [int(ordered[a]) for a in bounds[:-1]], parts, self._push(indices, perm)

        self.groups = []
        kids = {q: children[q][orders[q]] for q in live}   # a group's: one slice
        # In place, per (function, callee): each row's children's positions in the callee's
        # table, so that a group's site-major indices are one slice of it. Entries no group
        # takes (a call the row does not make: -1; a site calling another function, whose ids
        # are clipped into range) read some position.
        placed: Dict[Any, np.ndarray] = {}
        for height, _, vid, q, ids, first in groups:
            calls = []
            rows = len(ids)
            for callee, sites in plan.functions[q].callees(vid):
                if self.in_place:
                    found = placed.get((q, callee))
                    if found is None:
                        found = placed[(q, callee)] = position[callee][
                            np.minimum(kids[q], counts[callee] - 1)]
                    columns = _columns(sites)
                    block = found[first:first + rows, columns].T.reshape(-1)   # site-major
                    calls.append((None, [self._push(indices, block)], None))
                else:
                    wanted = kids[q][first:first + rows][:, sites].T.reshape(-1)   # site-major
                    calls.append(gather(callee, wanted))
            self.groups.append((q, vid, first, rows, calls))
        self.result = gather(plan.entry, np.arange(self.roots))
        self.indices = np.concatenate(indices).astype(np.int32) if indices else None
        return True

    def _flat(self):
        """Per function called: its invocations' variants, children and arguments, by id."""
        if self.flat is None:
            live = [q for q in self.plan.functions if self.counts[q]]
            self.flat = tuple({q: np.concatenate(parts(q)) for q in live} for parts in (
                lambda q: [s[2] for step in self.steps for s in step if s[0] == q],
                lambda q: [s[3] for step in self.steps for s in step if s[0] == q]))
            self.flat += ({q: [np.concatenate(a) for a in zip(*self.args[q])] for q in live},)
        return self.flat

    def _layouts(self, args):
        """``self.layouts`` of the functions called (``args``: their arguments), once; False
        when some function's outputs cannot be packed."""
        if not self.layouts:
            layouts = {q: _layout(self.plan, self.context, q,
                                  [(1,) + a.shape[1:] for a in arrays], [a.dtype for a in arrays])
                       for q, arrays in args.items()}
            if None in layouts.values():
                return False
            self.layouts = layouts
        return True

    def push_first(self, ctx):
        """The layout's first group, called before the layout when it gathers nothing (NOTE
        [the first group before the layout] in recursion/first_group.py)."""
        if not self.roots or not PADDED[0] or not first_group.EARLY[0]:
            return
        variants, children, args = self._flat()
        if not self._layouts(args) or not self.nonempty(args):
            return
        found = first_group.find(self.plan, variants, children)
        if found is None:
            return
        q, vid, ids = found
        graph = _value_graph(self.plan, self.layouts, q, vid, None)
        rows = len(ids)   # padded when sized, as the loop calls it (NOTE [padded rows])
        sized = graph.sized(_padded(rows), self.context.env_shapes) \
            if rows <= PADDED_ROWS else None
        size = rows if sized is None else _padded(rows)
        values = first_group.inputs(
            graph, [_upload(_pad(a[ids], size - rows), ctx) for a in args[q]], self.context.env,
            self.context.env.__getitem__ if sized is None else lambda i: self._edged(i, ctx))
        if values is None:
            return
        tables = self.tables(ctx, first_group.SLACK, True)
        if not first_group.call(graph, sized, size, values, tables[q]):
            return
        self.early = ((q, vid, 0, rows, ids), tables)
        first_group.PUSHED[0] += 1

    def _edged(self, i, ctx):
        """Environment value i with copies of its last row up to ``_edged_rows`` rows (NOTE
        [padded rows]: read only by ``take`` in mode ``clip``), once per batch."""
        if i not in self.edged_env:
            self.edged_env[i] = _edged(self.context.env[i], ctx)
        return self.edged_env[i]

    def nonempty(self, args=None):
        """Whether no input of a group's graph can be a zero-size array (which the CachedOps
        must not be given, NOTE [zero-size calls] in graph/cached_graph.py): every group and
        call site has rows, so only a zero in a row shape (arguments, outputs) or in an
        environment value's shape makes one."""
        shapes = [s for layout in self.layouts.values() for s in layout["shapes"]]
        shapes += [a.shape[1:] for arrays in (args or self.sorted_args).values()
                   for a in arrays]
        shapes += list(self.context.env_shapes)   # (read once per batch: .shape is a C call)
        return not any(0 in shape for shape in shapes)

    def tables(self, ctx, slack=0, round_up=False, whole=False):
        """Per function, one table per output (NOTE [one table per output] in
        recursion/value_graphs.py): its invocations' rows in run order, then ``slack`` rows;
        ``round_up``: and more, to a multiple of ``PADDED_TABLE_BYTES`` (NOTE [padded rows]
        there); ``whole``: to the rows kept for the function, a power of two (NOTE [sized
        recorded groups] in recursion/planned_backward.py)."""
        tables = {}
        for q, n in self.counts.items():
            if n:
                layout = self.layouts[q]
                dtype = layout["dtype"]
                tables[q] = [mx.nd.empty((_round_up(n + slack, size * dtype.itemsize)
                                          if round_up else
                                          planned_backward.whole_rows(self.plan, q, n + slack)
                                          if whole else n + slack,) + shape,
                                         ctx=ctx, dtype=dtype)
                             for shape, size in zip(layout["shapes"], layout["sizes"])]
        return tables

    def _push(self, indices, values):
        start = self.offset
        indices.append(values)
        self.offset += len(values)
        return (start, self.offset)

    def run(self, ctx):
        """The values: one CachedOp call per group, then the roots' rows, unpacked."""
        plan, env = self.plan, self.context.env
        if not self.roots:   # no row: nothing for autograd to record either
            layout = self.layouts[plan.entry]
            return [mx.nd.empty((0,) + shape, ctx=ctx, dtype=layout["dtype"])
                    for shape in layout["shapes"]]
        nonempty = self.nonempty()
        # NOTE [padded rows] in recursion/value_graphs.py
        padding = self.in_place and nonempty and PADDED[0] and not mx.autograd.is_recording()
        slack = max((_padded(g[3]) - g[3] for g in self.groups), default=0) if padding else 0
        index = _upload(_pad(self.indices, slack), ctx) if self.indices is not None else None
        uploaded = {q: [_upload(_pad(a, slack), ctx) for a in args]
                    for q, args in self.sorted_args.items()}
        outputs: List[mx.nd.NDArray] = []
        # Padded, the tables' shapes, inputs of the sized CachedOps, change only between
        # batches of very different sizes.
        early, tables = self.early if padding and self.early is not None else (None, None)
        if tables is None or slack > first_group.SLACK:
            early, tables = None, self.tables(ctx, slack, padding) if self.in_place else {}
        callees: Dict[Optional[str], List[str]] = {}

        def value(role: str, i: int, j: int, q: Optional[str], first: int, rows: int,
                  calls, size: int = 0, view=_rows) -> Any:
            """Input ``role`` of a group's graph; ``view``: how rows of an array are given."""
            size = size or rows   # rows read: ``rows`` and the padding after them
            if role == "arg":
                return view(uploaded[q][i], first, first + size)
            if role == "env":
                return env[i]
            if role == "src":
                return outputs[calls[i][0][j]]
            if role == "table":   # NOTE [one table per output] in recursion/value_graphs.py
                return tables[callees[q][i]][j]
            assert index is not None, "a gather without an index buffer"
            if self.in_place:   # call site j's rows of the site-major indices
                a = calls[i][1][0][0] + j * rows
                return view(index, a, a + size)
            a, b = calls[i][2] if role == "perm" else calls[i][1][j]
            return _rows(index, a, b)

        graphs: Dict[Any, Any] = {}   # (function, variant) -> its graph and callees, in place
        for q, vid, first, rows, calls in self.groups:
            if early is not None and early[:4] == (q, vid, first, rows) \
                    and np.array_equal(early[4], self.first_ids):   # pushed: the same call
                early = None
                continue
            if self.in_place:
                found = graphs.get((q, vid))
                if found is None:
                    found = graphs[(q, vid)] = (
                        _value_graph(plan, self.layouts, q, vid, None),
                        [callee for callee, _ in plan.functions[q].callees(vid)])
                graph, callees[q] = found
            else:
                graph = _value_graph(plan, self.layouts, q, vid,
                                     tuple(len(sources) for sources, _, _ in calls))
            sized = graph.sized(_padded(rows), self.context.env_shapes) \
                if padding and rows <= PADDED_ROWS else None
            if sized is not None:
                size = _padded(rows)
                try:
                    edges = graph.edged()
                    # See NOTE [group calls on raw views] in views.py
                    call_on_rows(sized, [self._edged(i, ctx) if role == "env" and i in edges
                                         else value(role, i, j, q, first, rows, calls, size,
                                                    _span)
                                         for role, i, j, _ in graph.inputs],
                                 [(t, first, first + size) for t in tables[q]])
                    continue
                except mx.MXNetError:   # its error, if any, as an unpadded call gives it
                    graph.forget(size)
            values = [value(role, i, j, q, first, rows, calls)
                      for role, i, j, _ in graph.inputs]
            call = graph.nonempty if nonempty else graph.op
            if self.in_place:   # written into its rows of the tables (views): no copy
                call(*values, out=[_rows(t, first, first + rows) for t in tables[q]])
            else:
                out = call(*values)
                outputs.append(out[0] if isinstance(out, (list, tuple)) else out)
        callees[None] = [plan.entry]
        if self.in_place and self.indices is not None:
            # The roots' rows in run order, one after the other: views, no result graph.
            a, b = self.result[1][0]
            positions = self.indices[a:b]
            if len(positions) and (np.diff(positions) == 1).all():
                start = int(positions[0])
                return [_rows(t, start, start + self.roots) for t in tables[plan.entry]]
        graph = _result_graph(plan, self.layouts,
                              None if self.in_place else len(self.result[0]))
        out = graph.op(*[value(role, i, j, None, 0, self.roots, [self.result])
                         for role, i, j, _ in graph.inputs])
        return list(out) if isinstance(out, (list, tuple)) else [out]


def _columns(sites):
    """``sites`` (column numbers, ascending) as a slice when they are consecutive (a view, not
    numpy's fancy indexing)."""
    if sites == list(range(sites[0], sites[-1] + 1)):
        return slice(sites[0], sites[-1] + 1)
    return sites


def _span(array, start, stop):
    """Rows ``start:stop`` of ``array`` for :func:`views.call_on_rows`."""
    return (array, start, stop)


def _padded(rows):
    """The rows a group of ``rows`` runs on (NOTE [padded rows] in recursion/value_graphs.py):
    up to 16 the next power of two, then four size classes per doubling (at most a quarter
    more rows), above ``PADDED_ROWS`` the rows themselves."""
    if rows <= 16:
        return 1 << (rows - 1).bit_length()
    if rows > PADDED_ROWS:
        return rows
    step = 1 << ((rows - 1).bit_length() - 3)
    return -(-rows // step) * step


def _edged(array, ctx):
    """``array`` followed by copies of its last row up to ``_edged_rows`` rows: one ``take``
    in mode ``clip`` of an index cached per size (NOTE [padded rows])."""
    rows = array.shape[0]
    want = _edged_rows(rows)
    if want == rows:
        return array
    index = _EDGE_INDEX.get((want, ctx))
    if index is None:
        index = _EDGE_INDEX[(want, ctx)] = mx.nd.arange(want, ctx=ctx, dtype="int32")
    return mx.nd.take(array, index, axis=0, mode="clip")


_EDGE_INDEX: Dict[Any, mx.nd.NDArray] = {}   # (rows, context) -> arange(rows), read only


def _round_up(rows, row):
    """``rows`` rounded up to a multiple of ``PADDED_TABLE_BYTES`` of rows of ``row`` bytes."""
    step = max(1, PADDED_TABLE_BYTES // row) if row else 1
    return -(-rows // step) * step


def _pad(array, slack):
    """``array`` and ``slack`` copies of its last row (NOTE [padded rows])."""
    return np.concatenate([array, np.repeat(array[-1:], slack, axis=0)]) if slack else array


def _check_depth(function, depth):
    if depth > function.max_depth:
        raise RecursionDepthError(
            "gluon_cf.recursive: %r exceeded max_depth=%d nested calls; does it "
            "reach a base case?" % (function.name, function.max_depth))


def _upload(array, ctx):
    """An NDArray of a fresh numpy array: without a copy on the CPU (the NDArray keeps it)."""
    value = from_numpy(np.ascontiguousarray(array))   # See NOTE [lean DLPack uploads]
    return value if value.context == ctx else value.as_in_context(ctx)

