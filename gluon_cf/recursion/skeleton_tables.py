"""The control skeleton of a function evaluated once for every index of the batch's forest.

NOTE [skeleton tables]
    The host expansion (NOTE [ahead-of-time schedules] in recursion/schedule.py) evaluates a
    function's skeleton once per frontier (call depth): an SST forest of 25 trees is ~18
    frontiers, each a dozen numpy calls on a handful of rows, the cond branches split and
    evaluated apart. In tree models the skeleton reads one argument, a node index, and the
    forest's arrays (``left``, ``right``): every frontier is a set of indices into them. So,
    once per batch, the skeleton is evaluated on **every** index ``0 .. L-1`` of those arrays at
    once (:class:`SkeletonTable`), and each frontier is then a few lookups: each row's variant,
    and per call site whether the row calls it and with which arguments.

    This is exact, not a guess, because a looked-up row is the row the frontier would have
    evaluated: the skeleton's host rules are pure functions of a row's own argument and of the
    environment, once the function's body is proven to act row by row for these argument
    shapes (its layout, cached by the first batch: ``schedule._proven_row_by_row``; before
    that, the frontier is evaluated as before), and a frontier row is looked up only when its
    argument is bit for bit the table's row (an integer value in ``[0, L)`` of the same dtype,
    not ``-0.0``). Any other frontier (an index out of range, a fraction, a function whose
    skeleton reads several arguments or arguments of several elements) is evaluated directly,
    and an empty environment array gets no table (``take`` from it fails, which only a row
    that reaches it may do).
    The call sites of a lookup come in the order evaluation lists them (a fixed order of the
    body: cond branches in order, then the body's own calls), so the call tree's numbering,
    and with it the groups' rows, are those of the direct evaluation.

NOTE [chained expansion]
    A frontier lookup still costs a dozen numpy calls and the Python around them, per frontier
    (~18 for a batch of 25 SST trees, ~1.2-1.7 ms of host time per batch). In a tree fold the
    table closes on itself: the function takes one argument and every call it makes is a call
    of itself whose argument is one of the table's rows (``child_index`` of every call is
    known). Then the table is a graph, ``children[i, c]`` the row of index i's c-th call
    (:attr:`SkeletonTable.chain`), and once one frontier (one function, every row in the
    table) is reached, every later frontier is ``children[index]`` with the unreached calls
    dropped, taken call-major (``_Schedule._expand_chain`` in recursion/schedule.py): the same
    rows in the same order as the frontier by frontier lookups, numbered the same way, each
    row's argument the table's row bit for bit (which ``_index`` checked). The arguments of
    all those frontiers are one gather from the table's rows at the end. The depth bound and
    the call-count bound are checked at every frontier as before.
"""
from typing import List, Optional, Tuple

import numpy as np

MAX_ROWS = 1 << 17   # a larger environment is not tabulated (one table costs O(rows) per batch)
LOOKUPS = [0]        # frontiers looked up in a table (for tests, tools)


class SkeletonTable:
    """``function``'s skeleton on every index of its environment's arrays (NOTE above)."""

    def __init__(self, function, values, arg, example, size):
        """``values``: the skeleton's environment inputs; ``arg``: the name of the argument
        it reads, ``example`` a frontier's value of it; ``size``: the number of indices."""
        self.dtype, self.shape = example.dtype, example.shape[1:]
        rows = np.arange(size, dtype=np.int64).astype(self.dtype).reshape((size,) + self.shape)
        self.rows = rows
        values = dict(values)
        values[arg] = rows
        with np.errstate(all="ignore"):   # rows no frontier reaches may overflow or compare NaN
            codes, keys, calls = function.body.evaluate(values, size)
        self.size = size
        self.variants = np.array([function.variant(k) for k in keys], np.int64)[codes]
        # Per call site reached: (site, callee, row of each index in its arguments or -1,
        # its arguments' arrays, and for a call of the function itself the index of each
        # row's argument in this table, None unless every row has one).
        self.calls: List[Tuple[int, str, np.ndarray, list, Optional[np.ndarray]]] = []
        self.argument = function.host_args[arg]
        for site, picked, callee, args in calls:
            where = np.full(size, -1, np.int64)
            where[picked] = np.arange(len(picked))
            index = self._index(args[self.argument]) if callee == function.qname else None
            if index is not None and len(index) and index.min() < 0:
                index = None   # some row's argument is not in the table: looked up anew
            self.calls.append((site, callee, where, args, index))
        self.chain = self._chain(function)

    def _chain(self, function):
        """``(sites, children)`` when every call ``function`` makes is a call of itself whose
        one argument is some index's row of this table (NOTE [chained expansion]):
        ``children[i, c]`` is the table index of index i's argument at ``sites[c]`` (the
        calls in this table's order), -1 where i does not make that call; else None."""
        sites = [site for site, _, _, _, _ in self.calls]
        if function.num_args != 1 or len(set(sites)) != len(sites) or any(
                callee != function.qname or index is None
                for _, callee, _, _, index in self.calls):
            return None
        children = np.full((self.size, len(sites)), -1, np.int64)
        for c, (_, _, where, _, index) in enumerate(self.calls):
            assert index is not None   # checked above
            reached = where >= 0
            children[reached, c] = index[where[reached]]
        return sites, children

    def _index(self, arg):
        """Each row's index in the table, -1 where the row is not one of the table's."""
        if arg.dtype != self.dtype or arg.shape[1:] != self.shape:
            return np.full(len(arg), -1, np.int64)
        flat = arg.reshape(-1)
        with np.errstate(all="ignore"):
            index = flat.astype(np.int64)
        bad = (index < 0) | (index >= self.size)
        if self.dtype.kind == "f":   # a fraction, NaN or -0.0 is not the table's row
            bad |= (index.astype(self.dtype) != flat) | np.signbit(flat)
        index[bad] = -1
        return index

    @classmethod
    def build(cls, function, values, args, size):
        """The table of ``function`` for this batch, or None when its frontiers cannot be
        looked up in one (NOTE above)."""
        read = set(function.host_args.values())
        if len(read) != 1 or not 0 < size <= MAX_ROWS:
            return None
        if any(v.ndim and not len(v) for v in values.values()):
            return None   # take from an empty array fails: only where a frontier row takes it
        (k,) = read
        arg = args[k]
        if arg.ndim > 2 or arg.size != len(arg) or arg.dtype.kind not in "fiu":
            return None
        if arg.dtype.kind == "f" and size >= 1 << (np.finfo(arg.dtype).nmant + 1):
            return None   # an index a float of this dtype does not hold exactly
        names = [name for name, i in function.host_args.items() if i == k]
        if len(names) != 1:
            return None
        return cls(function, values, names[0], arg, size)

    def lookup(self, args, index=None) -> Optional[tuple]:
        """``(variant ids, calls, indices)`` of a frontier whose arguments are ``args``:
        variant ids and calls as ``_Body.evaluate`` gives them, and per call the index of its
        rows' arguments in this table (None where some row has none); None when some row of
        the frontier is not in the table. ``index``: the frontier's index, if known."""
        if index is None:
            index = self._index(args[self.argument])
            if len(index) and index.min() < 0:
                return None
        calls, indices = [], []
        for site, callee, where, args, child_index in self.calls:
            rows = where[index]
            picked = np.flatnonzero(rows >= 0)
            if len(picked):
                taken = rows[picked]
                calls.append((site, picked, callee, [a[taken] for a in args]))
                indices.append(None if child_index is None else child_index[taken])
        LOOKUPS[0] += 1
        return self.variants[index], calls, indices
