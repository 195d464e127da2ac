"""Lists that tensor loops append to, at run time: the rows of a graph loop's steps as a
:class:`StepList`, what converted code computes from one (``items[i]``, ``F.stack(*items)``
...), and the refusal of other changes of outside containers in a tensor if or loop.

NOTE [autograph lists]
    A statement ``items.append(value)`` of a loop's body itself (so once per step; not under
    an ``if``, not after a possible ``break``), where the body neither assigns nor otherwise
    reads ``items``, makes ``value`` a step output. Run as Python, it is appended to the list
    after each step; as a graph loop (an exact-length ``while_loop`` when bounded, whose rows
    are the steps that ran), the rows become a :class:`StepList` bound to ``items``: one array
    (after the list's earlier items) whose number of rows is known only when the graph runs.
    ``F.stack(*items)``, ``F.concat(*items, dim=...)`` and ``F.add_n(*items)``, also with
    other arrays before or after the items (rewritten into ``list_parts.unpacked``; also of
    ``items[a:b]`` and ``reversed(items)``), ``items[i]`` and ``items.append(x)`` compute from
    it. Where the number of items is known while tracing (loops of a Python count, or rows of
    a shape the input shapes give: NOTE [graphs traced for input shapes]), ``len``, truth,
    slices, ``reversed``, iteration, ``pop``, ``insert``, ``items[i] = v`` and ``del
    items[i]`` are Python's on the list of its rows (the last four restack them, in place);
    ``clear`` and ``reverse`` are in place in any case; ``index``, ``count``, ``remove`` and
    ``sort`` compare arrays, whose truth only the run knows, and are refused; otherwise a
    slice of step 1 whose bounds are both from the start or both from the end is a StepList of the
    rows Python's slice keeps (a cond on the count where it may hold fewer than the bound),
    a new StepList as Python's slice is a new list, ``reversed`` the rows reversed (a
    :class:`ReversedItems`: Python's iterator, used once, not subscriptable), a ``for``
    over it a graph loop over its rows (under a cond on the count where its rows may stand
    for no item), ``items + other``, ``items * k``, ``list(items)`` and ``items[:]`` new
    StepLists, ``sum(items)`` the rows summed (checked when it may hold no item: Python's 0
    is an int), and ``len``, truth and other slices are AutographErrors at the line reading
    it (:meth:`StepList._unknown_length`): the count exists only as a one-element array,
    and giving it where Python gives an int changes what the int does next (``range(n)``,
    ``[0] * n``, ``n // 2``, an index, a shape), so ``len`` and ``enumerate`` of such a
    list stay refused, saying to count the steps as an array in the loop (``i = i + 1``:
    the array is then the user's, and so are its uses). ``for a, b in zip(outs, other)``
    stays refused too: ``zip`` is Python's, which has no rows to iterate here; one graph
    loop over several lists' rows would need the lists' counts to agree, which only the run
    knows unless one loop appended them all (the message says to append what a step needs
    to one list, and loop over that: ``for a, b in outs`` over a list of stacked pairs
    converts, NOTE [autograph unpacking loops]). ``sum(items, start)`` is
    ``start`` plus the rows' sum, ``start`` itself by a cond where the loop appended none (a
    number ``start`` there is checked, as ``sum(items)``'s 0). A call of ``F.stack``, ``F.concat``
    or ``F.add_n`` unpacking a list bound to another name or several lists
    (``F.concat(*a, *b, dim=0)``) goes through ``list_parts.unpacked_parts``, which finds the
    StepLists at run time; ``items[i]`` past what bounded loops can have appended is an IndexError
    at its line. In a ``for`` over a Python iterable with a ``break`` under a tensor ``if`` (a
    decoder over ``range(n)``), a step after the flag became a tensor runs with its flags cleared,
    its results count where no flag is set (a cond picks them or the values before the step) and its
    append is one row or none (``control_flow._where``, :func:`appended_where`; a list of arrays
    such as an RNN cell's ``state`` is chosen item by item, while a graph loop or cond that changes
    one is an AutographError saying to unpack it); a ``for`` over a tensor that appends and may
    break is an AutographError (write a ``while``). In such a ``for`` over a Python iterable, an
    append that ends the step after the ``if`` that breaks (only while no break or return flag is
    set: the guards of NOTE [autograph jumps]) is collected too: its value is computed at the end of
    the step (``__agc_items = lambda: value`` first in the step) and appended where no flag is set
    after the step, one row or none; a list that may then hold no item is checked when unpacked
    (NOTE [checked items]). In a graph's ``while`` the step that breaks would still give its row, so
    an append after a break there stays refused. Any other change of an outside list, dict or set by
    a method call (``append`` under an ``if``, ``seen.add(x)``) in an ``if`` or loop on a tensor is
    an AutographError (``outer_lists.no_outer_lists``): traced once, it would happen once,
    whatever the condition; a step reading the list it appends to is told so (no step sees
    earlier items), and so is a step appending in a ``try``'s ``finally`` or ``except`` (no
    statement of the step: Python runs it on a step whose ``try`` raised). A nested
    function's own loops collect the lists that function makes, as the converted function's
    do (round 31ag: a ``scan`` helper written inside ``hybrid_forward`` was refused)."""
import linecache
import operator
from typing import List, Optional

import mxnet as mx

from ...ops.cond import cond, refused_at_once
from ...hybrid_trace import static_shape
from ...operators import user_location
from ..errors import (AutographError, list_operand, node_name, op_name, one_colon, python_value,
                      region_at)
from .caught_errors import past_known_length
from .list_operators import add_refused_operators
from .item_check import checked_item, list_index, rows_alike, summed


_LIST_METHODS = {name for name in dir(list) if not name.startswith("_")} - {"append"}
# (list's methods comparing items)
_COMPARING = {"index", "count", "remove", "sort"}


def _line_here():
    """``file:line: source`` of the user's line running (converted code's frames are under
    the user's file), or None."""
    here = user_location(2)
    if here:
        path, _, line = here.rpartition(":")
        here = f"{here}: {linecache.getline(path, int(line)).strip()}"
    return here


def _ordering(op):
    """A collected list's ``__<op>__`` (``StepList._ordered``)."""
    def compare(self, other):
        return self._ordered(other, op)
    compare.__name__ = f"__{op}__"
    return compare


@add_refused_operators
class StepList:
    """A list a loop on a tensor appended to, while hybridizing: its items are the rows of one
    array (the loop's stacked step outputs), their number ``n_items`` (an int, or a one-element
    array: not ``count``, which users call, ``items.count(v)``) known only when the graph runs,
    at most ``most`` (an int where the loops that appended are bounded, else None).
    ``F.stack(*items)``, ``F.concat(*items, dim=0 or 1)``, ``F.add_n(*items)``, ``items[i]``,
    ``items[a:b]``, ``reversed(items)``, ``for`` and ``items.append(x)`` work as on the list;
    ``len`` only where the number of items is known while tracing (NOTE [autograph lists])."""
    python_type: type = list      # NOTE [a collected list's type]

    def __init__(self, rows, count, where, most=None, least=0, stale=False):
        self.rows, self.n_items, self.where = rows, count, where
        self.most = count if isinstance(count, int) else most
        # how many items it surely holds (earlier items, appends after the loops)
        self.least = count if isinstance(count, int) else least
        # whether, holding no item, its rows are a row appended where a condition did not
        # hold (not zero rows): unpacking it is checked (NOTE [checked items])
        self.stale = stale and self.least == 0
        # the lists joined into this one (StepList.joined), whose numbers of items add up
        # to its own, or None
        self.parts: Optional[List["StepList"]] = None

    def joined(self, rows, count, most=None, maybe_stale=False):
        """These items, then ``rows`` (``count`` of them). MXNet 1.x cannot compute on an
        array of zero rows (0 is its unknown size), so where either side may have none, a
        cond picks the other. ``maybe_stale``: ``rows`` is one row that counts only where the
        array ``count`` holds."""
        if isinstance(count, int) and not count:   # (theirs, emptied by clear, stand for none)
            return self.copy()
        mine, theirs = self.rows, rows
        name = node_name(self.where, "rows")
        n_items, mine_most, least = self.n_items, self.most, self.least

        def with_theirs():      # computed in the branch where these rows exist
            both = lambda: mx.sym.concat(mine, theirs, dim=0)   # noqa: E731
            if isinstance(count, mx.sym.Symbol):
                return refused_at_once(cond(count > 0, both, lambda: mine, name=name),
                                       self._other_shapes)
            return both()
        if isinstance(n_items, mx.sym.Symbol):
            joined = refused_at_once(cond(n_items > 0, with_theirs, lambda: theirs,
                                          name=name), self._other_shapes)
        else:       # (holding no item, emptied by pop or clear: its rows stand for none)
            joined = with_theirs() if n_items else theirs
        most = count if isinstance(count, int) else most
        out = StepList(joined, n_items + count, self.where,
                       None if mine_most is None or most is None else mine_most + most,
                       least + (count if isinstance(count, int) else 0),
                       self.stale or maybe_stale)
        # (where the input shapes give each part's number, the joined list's is known,
        # read only where asked: a graph read for input shapes is not exported)
        if not (out.stale or isinstance(out.n_items, int)):
            # (a copy of this one: append and += make it the joined list in place)
            mine_now = StepList(mine, n_items, self.where, mine_most, least)
            out.parts = (self.parts or [mine_now] if not (isinstance(n_items, int) and
                                                        not n_items) else []) + \
                [StepList(rows, count, self.where, most)]
        return out

    def _other_shapes(self):
        """The error of arrays joined to these items whose shape is not theirs (shape
        inference refused their concat: it failed as the value was read, round 31x)."""
        return AutographError(one_colon(
            f"{self.where}: a list the loop on a tensor here appends to holds items of other "
            f"shapes (earlier items, or items appended elsewhere, of another shape than the "
            f"arrays appended here); its items are the rows of one array, of one shape: start "
            f"the list empty and join other arrays after the loop (F.concat(first, *items, "
            f"dim=0)), or append arrays of the items' shape"))

    def _become(self, joined):
        """This list holds ``joined``'s items from now on (in place, as a list's own)."""
        self.rows, self.n_items, self.most = joined.rows, joined.n_items, joined.most
        self.least, self.stale, self.parts = joined.least, joined.stale, joined.parts

    def append(self, value):
        self._become(self.joined(mx.sym.expand_dims(value, axis=0), 1))

    def __getitem__(self, index):
        # (an int or a slice read where conversion did not see a collected list, c = a + b;
        # c[9]: its IndexError or shape read names this line, not the loop's; any other
        # index keeps the refusal saying how to count the items)
        index = list_index(index)
        if isinstance(index, (slice, int)):
            return self.item(index, _line_here() or self.where)
        return self.item(index, self.where)

    def item(self, index, where):
        """``items[index]`` at ``where``: an IndexError there when the loops that appended
        are bounded and cannot have appended that many items; else, unless the list surely
        holds that item, checked when the graph runs (NOTE [checked items])."""
        index = list_index(index)
        if isinstance(index, slice):
            return self._sliced(index, where)
        if not isinstance(index, int):
            if where == self.where:
                self._unknown_length(f"indexed with {index!r}")
            raise AutographError(
                f"{where}: this indexes a list that the loop on a tensor at "
                f"{region_at(self.where)} appended to with {index!r}, but how many items it "
                f"holds is known only when the graph runs; index the stacked rows instead "
                f"(F.stack(*items)[1:]), or use items[i]")
        if self.most is not None and not -self.most <= index < self.most:
            raise IndexError(one_colon(
                f"{where}: list index {index} out of range: the list holds at most "
                f"{self.most} items (the loop at {region_at(self.where)} appended them)"))
        past_known_length(lambda: self.known_length(where), index)
        rows = self.rows

        def sliced():
            row = mx.sym.slice_axis(rows, axis=0, begin=index,
                                    end=None if index == -1 else index + 1,
                                    name=op_name(where, "item"))
            return mx.sym.squeeze(row, axis=0)
        if -self.least <= index < self.least or not isinstance(self.n_items, mx.sym.Symbol):
            return sliced()
        return checked_item(self.n_items, sliced, index,
                            f"{where}: list index {index} out of range: the list",
                            f"the loop at {region_at(self.where)} appended them")

    def known_length(self, where):
        """How many items the list holds, where the graph being traced knows it: loops of a
        Python count, or rows of a shape the block's input shapes give (NOTE [graphs traced
        for input shapes]); else None. (A list that may hold a row appended where a
        condition did not hold has rows that are not its items.)"""
        if isinstance(self.n_items, int):
            return self.n_items
        if self.parts and not self.stale:
            counts = [part.known_length(where) for part in self.parts]
            return None if None in counts else sum(counts)
        shape = None if self.stale else static_shape(self.rows, where)
        return shape[0] if shape else None

    def rows_list(self, n, indices, where):
        """The items at ``indices`` (of the ``n`` the list holds) as a Python list."""
        if self.parts and not isinstance(self.n_items, int):
            # (rows joined by a cond: each part's own items)
            items = [item for part in self.parts for item in part.rows_list(
                part.known_length(where), range(part.known_length(where)), where)]
            return [items[k] for k in indices]
        shape = static_shape(self.rows, where) if not isinstance(self.n_items, int) else None
        out = []
        for k in indices:
            row = mx.sym.slice_axis(self.rows, axis=0, begin=k, end=k + 1,
                                    name=op_name(where, "item"))
            out.append(mx.sym.reshape(row, shape=shape[1:], name=op_name(where, "item"))
                       if shape and len(shape) > 1 else mx.sym.squeeze(row, axis=0))
        return out

    def _sliced(self, index, where, unread=False):
        """``items[a:b]`` (NOTE [autograph lists]): Python's list of the items where the
        number of items is known while tracing (but ``unread``: for a slice the rows give,
        unpacked at once); else, for a step of 1, a list of the rows Python's slice keeps,
        however many the list holds when the graph runs (a cond on its count where it may
        hold fewer than the slice's bound)."""
        n = None if unread and (rows_slice(index) or _backwards(index)) else \
            self.known_length(where)
        if n is not None:
            return self.rows_list(n, range(n)[index], where)
        if _backwards(index):
            # items[::-1]: a new list of the items backwards
            return StepList(mx.sym.reverse(self.rows, axis=0, name=op_name(where, "reversed")),
                            self.n_items, self.where, self.most, self.least, self.stale)
        start, stop = index.start, index.stop
        if index.step not in (None, 1) or start is not None and stop is not None and \
                (start < 0) != (stop < 0):
            raise AutographError(
                f"{where}: this slices a list that the loop on a tensor at "
                f"{region_at(self.where)} appended to with [{_slice_text(index)}], but how "
                f"many items it holds is known only when the graph runs; slices of a step of "
                f"1 whose bounds are both from the start or both from the end are computed "
                f"(items[-2:], items[1:], items[:3], items[:-1]), else index the stacked "
                f"rows (F.stack(*items))")
        out = self.copy()        # (a new list, as Python's slice: appending to it leaves this)
        if start is not None and start < 0:       # the last -start items, or all of them
            out = out._kept(-start, last=True, where=where)
            start = None
        if stop is not None and stop < 0:         # all but the last -stop items
            out = out._dropped(-stop, last=True, where=where)
            stop = None
        if start:
            out = out._dropped(start, last=False, where=where)
            stop = None if stop is None else max(stop - start, 0)
        if stop is not None:
            out = out._kept(stop, last=False, where=where)
        return out

    def _kept(self, k, last, where):
        """The first (last) ``k`` items, all where the list holds fewer."""
        count = self.n_items
        if k == 0:
            return []
        rows = self.rows

        def part():
            return mx.sym.slice_axis(rows, axis=0, begin=-k if last else 0,
                                     end=None if last else k, name=op_name(where, "items"))
        if self.least >= k:
            kept = part()
        else:
            kept = cond(count >= k, part, lambda: rows,
                        name=node_name(where, "items"))
        return StepList(kept, mx.sym.clip(count, 0, k), self.where,
                        None if self.most is None else min(self.most, k),
                        min(self.least, k), self.stale)

    def _dropped(self, k, last, where):
        """All but the first (last) ``k`` items: where the list holds no more than ``k``,
        none (its rows then stand for no item, as a row appended where a condition did not
        hold: unpacking it is checked, NOTE [checked items])."""
        count, rows = self.n_items, self.rows

        def part():
            return mx.sym.slice_axis(rows, axis=0, begin=0 if last else k,
                                     end=-k if last else None, name=op_name(where, "items"))
        dropped = part() if self.least > k else cond(
            count > k, part, lambda: rows, name=node_name(where, "items"))
        least = max(self.least - k, 0)
        return StepList(dropped, mx.sym.relu(count - k), self.where,
                        None if self.most is None else max(self.most - k, 0), least,
                        self.stale or least == 0)

    def copy(self):
        """A new list of the same items (``items[:]``, ``list(items)``, ``items.copy()``):
        appending to it leaves this one as it is."""
        copied = StepList(self.rows, self.n_items, self.where, self.most, self.least,
                          self.stale)
        copied.parts = self.parts
        return copied

    def __add__(self, other):
        """``items + other``: a new list of these items then ``other``'s (a collected list or
        a list of arrays)."""
        mine = _as_step_list(other, self.where)
        if mine is None:
            return list_operand(other, "+")
        if isinstance(mine, list):                  # (no item)
            return self.copy()
        return self.joined(mine.rows, mine.n_items, mine.most, maybe_stale=mine.stale)

    def __iadd__(self, other):
        """``items += other``: in place, as a list's (every name holding it sees it); a tuple
        extends it as a list's += does (``+`` of a list and a tuple is Python's TypeError)."""
        joined = self + (list(other) if isinstance(other, tuple) else other)
        if joined is NotImplemented:
            return NotImplemented
        self._become(joined)
        return self

    def __radd__(self, other):
        mine = _as_step_list(other, self.where)
        if mine is None:
            return list_operand(other, "+", right=True)
        return self.copy() if isinstance(mine, list) else mine + self

    def __mul__(self, times):
        """``items * k``: the items k times over (no item for k <= 0, as Python's)."""
        try:   # (any integer Python's list takes: a bool, numpy's int64, by __index__)
            times = operator.index(times)
        except TypeError:
            return list_operand(times, "*")
        if times <= 0:
            return []
        out = self.copy()
        for _ in range(times - 1):
            out = out + self
        return out

    __rmul__ = __mul__

    def builtin_of_rows(self, name, where, *start):
        """``list(items)``, ``tuple(items)``: a new list of its items; ``sum(items)``: their
        sum, ``sum(items, start)`` (``start``) start's; where their number is known only
        when the graph runs (else NotImplemented: Python's builtin iterates the items)."""
        if name not in ("list", "tuple", "sum") or self.known_length(where) is not None or \
                start and name != "sum":
            return NotImplemented
        taken(self, where)
        # (StepList's copy: a reversed iterator's own copy is Python's AttributeError)
        return summed(self, where, *start) if name == "sum" else StepList.copy(self)

    def __reversed__(self):
        """``reversed(items)``: the items backwards, the rows reversed (a list holding a row
        appended where a condition did not hold keeps that mark: its count is unchanged)."""
        where = user_location(2) or self.where
        n = self.known_length(where)
        if n is not None:       # (Python's own list_reverseiterator)
            return reversed(self.rows_list(n, range(n), where))
        return ReversedItems(mx.sym.reverse(self.rows, axis=0,
                                            name=op_name(where, "reversed")),
                             self.n_items, self.where, self.most, self.least, self.stale)

    def iterable(self, where):
        """What a ``for`` over the list iterates: its items where their number is known while
        tracing, else its rows (a graph loop over them, as over a tensor) and, where the
        list may hold no item though its rows are one (``stale``), the count that
        tells (the loop then runs under a cond on it)."""
        taken(self, where)
        n = self.known_length(where)
        if n is not None:
            return self.rows_list(n, range(n), where), None
        return self.rows, self.n_items if self.stale else None

    def _unknown_length(self, what, instead=None):
        raise AutographError(
            f"{_line_here() or self.where}: a list the loop on a tensor at "
            f"{region_at(self.where)} appended to is {what}, but how many items it holds is "
            f"known only when the graph runs (the input shapes do not give it here); " + (
                instead or
                "use F.stack(*items), F.concat(*items, dim=...), F.add_n(*items), "
                "sum(items), items[i] or a for over it, and for its length count the steps "
                "as an array in the loop (n = F.zeros((1,)) before it, n = n + 1 in it)"))

    def _known_items(self, what, instead):
        """The items as a Python list, where their number is known while tracing (else the
        refusal saying what to write ``instead``), and the line asking."""
        where = _line_here() or self.where
        n = self.known_length(where)
        if n is None:
            self._unknown_length(what, instead)
        return self.rows_list(n, range(n), where), where

    def _hold(self, items, where, old=None):
        """Make this list hold ``items`` (arrays), in place (every name holding it sees it);
        those not in ``old`` (its items before) of the rows' shape and dtype."""
        for value in items:
            if not isinstance(value, mx.sym.Symbol):
                raise AutographError(
                    f"{where}: this puts {python_value(value)} into a list the loop on a "
                    f"tensor at {region_at(self.where)} appended to, whose items are the rows "
                    f"of one array; put an array of the items' shape (F.full, F.zeros_like)")
        rows_alike(self.rows, [v for v in items if old is not None and
                               not any(v is o for o in old)], where, self.where)
        if items:
            self.rows = mx.sym.stack(*items, axis=0, name=op_name(where, "items"))
        # (no item: the rows stay, standing for none, as the count says)
        self.n_items = self.most = self.least = len(items)
        self.parts = None
        self.stale = False

    def pop(self, index=-1):
        """``items.pop(i)``: Python's, in place, where the number of items is known while
        tracing (NOTE [autograph lists])."""
        items, where = self._known_items(
            "changed with .pop()", "read items[-1] and make a new list, items = items[:-1]")
        value = items.pop(index)
        self._hold(items, where)
        return value

    def insert(self, index, value):
        """``items.insert(i, v)``: Python's, in place, where the number of items is known
        while tracing."""
        items, where = self._known_items(
            "changed with .insert()", "make a new list, items = [v] + items (or items + [v])")
        old = list(items)
        items.insert(index, value)
        self._hold(items, where, old)

    def clear(self):
        """``items.clear()``: no item, in place (as ``del items[:]``)."""
        self._hold([], _line_here() or self.where)

    def reverse(self):
        """``items.reverse()``: the rows reversed, in place (a list that may hold a row
        appended where a condition did not hold keeps that mark: its count is unchanged)."""
        where = _line_here() or self.where
        self.rows = mx.sym.reverse(self.rows, axis=0, name=op_name(where, "reversed"))
        if self.parts:        # (each part's rows reversed, the last part first)
            self.parts = [StepList(mx.sym.reverse(part.rows, axis=0,
                                                  name=op_name(where, "reversed")),
                                   part.n_items, part.where, part.most)
                          for part in reversed(self.parts)]

    def __len__(self):
        n = self.known_length(user_location(2) or self.where)
        if n is None:
            self._unknown_length("measured with len()")
        return n

    def __bool__(self):
        n = self.known_length(user_location(2) or self.where)
        if n is None:
            self._unknown_length("tested for truth (if items: is len(items) > 0)")
        return n > 0

    def __eq__(self, other):
        # (a list's ==: lengths first, then the items; it was identity: `outs == []` was
        # False hybridized whatever the loop appended, silently)
        where = user_location(2) or self.where
        n = self.known_length(where)
        if n is None:
            self._unknown_length("compared with == or !=")
        return self.rows_list(n, range(n), where) == other

    def __ne__(self, other):
        return not self.__eq__(other)

    def _ordered(self, other, op):
        # (items <= items: Python's compares the items with == and <, arrays whose truth
        # exists only when the graph runs; it was Python's TypeError hybridized, naming no
        # line, where eagerly a list of one-element arrays compares)
        if not isinstance(other, list) and getattr(type(other), "python_type", None) is not list:
            return NotImplemented   # (Python's TypeError, for a list: variables.binary)
        where = _line_here() or self.where
        if isinstance(other, list) and not other:
            # (against an empty list Python compares no item, only the lengths)
            n = self.known_length(where)
            held = n > 0 if n is not None else True if self.least > 0 else None
            if held is None:
                self._unknown_length("compared with an empty list (whether it holds an item)")
            return {"lt": False, "le": not held, "gt": held, "ge": True}[op]
        raise AutographError(
            f"{where}: a list the loop on a tensor at "
            f"{region_at(self.where)} appended to is compared with <, <=, > or >=, which "
            f"compares its items (==, <), and a comparison of arrays is an array whose truth "
            f"exists only when the graph runs (eagerly, of arrays of several elements, "
            f"Python's ValueError); compute on the stacked items instead (F.stack(*items): "
            f"F.broadcast_lesser, F.argmax)")

    __lt__, __le__, __gt__, __ge__ = (_ordering(op) for op in ("lt", "le", "gt", "ge"))

    def __hash__(self):     # (a list's: unhashable; None named this class in Python's words)
        raise TypeError("unhashable type: 'list'")

    def __setitem__(self, index, value):
        """``items[i] = v`` (a slice too): Python's, in place, as :meth:`pop`."""
        self._not_in_a_graph_region("assigns an item of")
        items, where = self._known_items(
            "changed by items[i] = v", "make a new list: items = items[:i] + [v] + "
            "items[i + 1:]")
        old = list(items)
        items[index] = value
        self._hold(items, where, old)

    def __delitem__(self, index):
        """``del items[i]`` (a slice too): Python's, in place, as :meth:`pop`."""
        self._not_in_a_graph_region("deletes an item of")
        items, where = self._known_items(
            "changed by del items[i]", "make a new list: items = items[:i] + items[i + 1:]")
        del items[index]
        self._hold(items, where)

    def _not_in_a_graph_region(self, what):
        """An in-place change inside a tensor ``if`` or loop of a list made outside it: once
        while tracing, refused (NOTE [autograph side effects])."""
        from .side_effects import effect, made_here     # (side_effects reads this module)
        if not made_here(self):
            effect(_line_here() or self.where, f"{what} a list the loop on a tensor at "
                                               f"{region_at(self.where)} appended to")

    def extend(self, other):
        """``items.extend(other)``: in place, as a list's, for a list of arrays or a collected
        list (other iterables as ``list`` methods are: refused where unknown)."""
        other = list(other) if isinstance(other, tuple) else other
        if _as_step_list(other, self.where) is None:
            self._unknown_length("extended by something other than a list of arrays")
        self += other

    def __getattr__(self, name):
        # list's other methods (index, count, remove, sort): the user's call names the list's
        # method, not this class (its name used to reach users: no attribute 'index' of
        # 'StepList')
        if name in _COMPARING:
            raise AutographError(
                f"{_line_here() or self.where}: .{name}() of a list the loop on a tensor at "
                f"{region_at(self.where)} appended to compares its items (==, <), and a "
                f"comparison of arrays is an array whose truth exists only when the graph "
                f"runs (eagerly, of arrays of several elements, Python's ValueError); compute "
                f"on the stacked items instead (F.stack(*items): F.argmax, F.sort, F.topk)")
        if name in _LIST_METHODS:
            self._unknown_length(f"changed or searched with .{name}()")
        raise AttributeError(name)

    def __iter__(self):
        n = self.known_length(user_location(2) or self.where)
        if n is None:
            self._unknown_length(
                "iterated over (by zip, enumerate, map, a comprehension or unpacking: for "
                "enumerate write a for over the list with a counter array, i = F.zeros((1,)) "
                "before it and i = i + 1 in it; for zip, append what a step needs to one list "
                "in the loop that collects it, pairs.append(F.stack(a, b)), and unpack its "
                "rows: for a, b in pairs)")
        return iter(self.rows_list(n, range(n), self.where))

    def __repr__(self):
        return f"<StepList of the rows of {self.rows.name}>"


def _no_attribute(name):
    def missing(self, *args, **kwargs):
        raise AttributeError(f"'list_reverseiterator' object has no attribute '{name}'")
    return missing


def rows_slice(index):
    """Whether ``_sliced`` computes the slice ``index`` from the rows, the number of items
    unknown: a step of 1, both bounds from the start or both from the end."""
    return isinstance(index, slice) and index.step in (None, 1) and not (
        index.start is not None and index.stop is not None and
        (index.start < 0) != (index.stop < 0))


def _backwards(index):
    """Whether ``index`` is ``[::-1]``: the rows backwards, their number unread (unpacked at
    once, ``F.stack(*outs[::-1])``, it exported as the rows reversed; it read the input
    shapes' count and export refused it, round 31x)."""
    return isinstance(index, slice) and index.step == -1 and index.start is None and \
        index.stop is None


class ReversedItems(StepList):
    """``reversed(items)`` of a collected list whose length only the graph's run knows: the
    rows backwards, but what Python's ``list_reverseiterator`` is (NOTE [autograph lists]):
    unpacked (``F.stack(*reversed(items))``), iterated by a ``for``, or made a list
    (``list(...)``, ``sum(...)``) once, as an iterator is consumed (a second use is an
    AutographError: Python's would see no item); indexing, ``len``, ``reversed``, ``+``,
    ``*`` and the list's methods are Python's TypeError or AttributeError for the iterator
    (``reversed(items)[0]`` gave the last item, where Python raises TypeError); its truth
    is True and ``==`` identity, as an iterator's."""

    consumed = False
    python_type: type = type(reversed([]))

    def item(self, index, where):
        raise TypeError("'list_reverseiterator' object is not subscriptable")

    def __len__(self):
        raise TypeError("object of type 'list_reverseiterator' has no len()")

    def __bool__(self):
        return True

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other
    __hash__ = object.__hash__

    def __reversed__(self):
        raise TypeError("'list_reverseiterator' object is not reversible")

    def _not_a_list(self, *args, **kwargs):
        return NotImplemented

    __add__ = __radd__ = __mul__ = __rmul__ = __iadd__ = _not_a_list

    def __getattr__(self, name):
        if name in _LIST_METHODS or name == "append":
            raise AttributeError(f"'list_reverseiterator' object has no attribute '{name}'")
        raise AttributeError(name)

    # (StepList's own methods: Python's iterator has none of them)
    append, extend, copy, pop, insert, clear, reverse = (
        _no_attribute(name) for name in ("append", "extend", "copy", "pop", "insert", "clear",
                                         "reverse"))

    def __next__(self):
        raise AutographError(
            f"{user_location(2) or self.where}: next() of reversed(items), a list a loop on a "
            f"tensor appended to whose length is known only when the graph runs, is not "
            f"converted; use items[-1] (and items[-2] ...) instead")

    def __repr__(self):
        return f"<list_reverseiterator of the rows of {self.rows.name}>"


def taken(items, where):
    """Marks ``reversed(items)`` consumed by its first use; a second use is an error (Python's
    exhausted iterator would give no item: a value where Python's call fails or loop does
    nothing)."""
    if isinstance(items, ReversedItems):
        if items.consumed:
            raise AutographError(
                f"{where}: this uses reversed(items) a second time; Python's iterator is "
                f"consumed by its first use and gives no item again, which a graph cannot "
                f"express: call reversed(items) again where it is used")
        items.consumed = True


def _as_step_list(value, where):
    """``value`` as a StepList (a list of arrays stacked as its rows), ``[]`` for an empty
    list, None for what is neither."""
    if isinstance(value, StepList):
        return value
    if isinstance(value, list) and all(isinstance(v, mx.sym.Symbol) for v in value):
        return StepList(mx.sym.stack(*value, axis=0), len(value), where) if value else []
    return None


def _slice_text(index):
    return ":".join("" if v is None else str(v) for v in (index.start, index.stop)) + \
        ("" if index.step is None else f":{index.step}")


def item(items, index, where):
    """A converted ``items[index]`` of a list a loop collected (NOTE [autograph lists])."""
    return items.item(index, where) if isinstance(items, StepList) else items[index]
