"""Calls unpacking a list a tensor loop collected (``F.stack(*outs)``, ``F.concat(h0, *outs,
dim=0)``), several lists, or a list bound to another name where one of them is such a list
(``F.concat(*a, *b, dim=0)``, ``tail = outs[-2:]; F.stack(*tail)``), computed from the lists'
rows (NOTE [autograph lists])."""
import collections.abc
import enum
import threading
import types

import mxnet as mx

from ...ops.cond import cond
from ..errors import AutographError, node_name, op_name, region_at
from .data_structures import ReversedItems, StepList, taken
from .item_check import checked_item

_HEAP_TYPE = 1 << 9               # (Py_TPFLAGS_HEAPTYPE: a class written in Python)
_MATCHED = threading.local()     # (match_items' copies, for match_originals)


def unpacked(func, items, keywords, where, before=(), after=()):
    """A converted ``func(*before, *items, *after, **keywords)``: for a :class:`StepList`,
    the same value computed from its rows; otherwise the call itself."""
    if not isinstance(items, StepList):
        return func(*before, *items, *after, **keywords)
    taken(items, where)
    return rows_unpacked(func, items, keywords, where, before, after)


def unpacked_reversed(reverse, items, where):
    """``reversed(items)`` unpacked by the call it is written in (``F.stack(*reversed(items))``,
    ``reverse``: what converted code calls for ``reversed``): for a list a tensor loop
    collected, its rows backwards, whether or not the traced graph knows its length (the
    iterator is consumed at once, so nothing tells them apart): reading that length made the
    block's graph one for its input shapes, which ``export_onnx`` and ``save_artifact``
    refuse, where ``F.stack(*items)`` exported."""
    if type(items) is StepList and not items.parts:
        return ReversedItems(mx.sym.reverse(items.rows, axis=0, name=op_name(where, "reversed")),
                             items.n_items, items.where, items.most, items.least, items.stale)
    return reverse(items)


def rows_unpacked(func, items, keywords, where, before=(), after=()):
    """:func:`unpacked` of a StepList (already taken: :func:`taken`)."""
    if isinstance(items.n_items, int) and not items.n_items:
        # (emptied by pop or clear: its rows stand for no item; Python's call of none)
        return func(*before, *after, **keywords)
    if before or after:
        return _unpacked_among(func, items, keywords, where, before, after)
    computed = _computed(_joining_name(func), items.rows, keywords)
    if computed is not None and (items.stale or items.least == 0 and
                                 isinstance(items.n_items, mx.sym.Symbol)):
        # holding no item, its rows are a row appended where a condition did not hold; or
        # none, from loops that may run no step: Python's F.stack() and F.add_n() of no item
        # fail, where the rows gave an array of no row or zeros silently (issue 24)
        return checked_item(items.n_items, computed, 0, f"{where}: this unpacks a list that "
                            f"must hold an item (as the call needs): the list",
                            f"the loop at {region_at(items.where)} appended them")
    if computed is not None:
        return computed()
    raise AutographError(f"{where}: this call unpacks a list a loop on a tensor appended to; "
                         f"its items are the rows of one array known only when the graph "
                         f"runs, and only F.stack(*items, axis=0 or 1), F.concat(*items, dim=0 "
                         f"or 1) and F.add_n(*items) (MXNet's own) are computed from them; to "
                         f"a function of your own, pass the list itself")


def _unpacked_among(func, items, keywords, where, before, after):
    """``F.stack(h0, *items)``, ``F.add_n(x, *items)``, ``F.concat(start, *items, end,
    dim=0)``: the arrays before and after the list are items of one list with it (stack,
    add_n: they have the items' shape), or concatenated with what the items' rows give, a
    cond leaving those out where the list holds none (the call has other arrays: no error,
    as in Python)."""
    name = _joining_name(func)
    computed = _computed(name, items.rows, keywords)
    if computed is None:
        rows_unpacked(func, items, keywords, where)        # (its error)
    if name in ("concat", "Concat"):
        def with_items():    # (where the list holds an item: its rows are all items)
            return func(*before, computed(), *after, **keywords)
        if items.least > 0 or not isinstance(items.n_items, mx.sym.Symbol):
            return with_items() if items.least > 0 or items.n_items else \
                func(*before, *after, **keywords)
        return cond(items.n_items > 0, with_items, lambda: func(*before, *after, **keywords),
                    name=node_name(where, "rows"))
    whole = StepList(mx.sym.stack(*before, axis=0), len(before), where) if before else None
    whole = items if whole is None else whole.joined(items.rows, items.n_items, items.most,
                                                     maybe_stale=items.stale)
    for value in after:
        whole = whole.joined(mx.sym.expand_dims(value, axis=0), 1)
    return rows_unpacked(func, whole, keywords, where)


def _joining_name(func):
    """``func``'s name if it is MXNet's own stack, concat or add_n (F is mx.sym while
    hybridizing), else "": a user's function or method named ``add_n`` or ``concat`` that the
    items are passed to is not computed as MXNet's (it was, silently: issue 24)."""
    name = getattr(func, "__name__", "")
    return name if name in ("stack", "concat", "Concat", "add_n", "ElementWiseSum") and \
        getattr(mx.sym, name, None) is func else ""


def _computed(name, rows, keywords):
    """The function computing ``F.<name>(*items, **keywords)`` from a StepList's rows, or
    None for a call that cannot be computed from them."""
    if name == "stack" and set(keywords) <= {"axis"} and keywords.get("axis", 0) in (0, 1):
        return lambda: rows if keywords.get("axis", 0) == 0 else mx.sym.swapaxes(rows, 0, 1)
    if name in ("concat", "Concat") and set(keywords) <= {"dim"} and \
            keywords.get("dim", 1) in (0, 1):
        if keywords.get("dim", 1) == 0:
            return lambda: mx.sym.reshape(rows, shape=(-3, -2))
        return lambda: mx.sym.reshape(mx.sym.swapaxes(rows, 0, 1), shape=(0, -3, -2))
    if name in ("add_n", "ElementWiseSum") and not keywords:
        return lambda: mx.sym.sum(rows, axis=0)
    return None


def unpacked_parts(func, parts, starred, keywords, where):
    """A converted ``F.stack(...)``, ``F.concat(...)`` or ``F.add_n(...)`` whose arguments
    ``parts`` are unpacked where ``starred`` says (``*a``): Python's call where no part is a
    collected list; else the same value computed from the lists' rows, the items of all the
    lists and arrays in their order."""
    pieces, lists = [], 0
    for part, star in zip(parts, starred):
        taken(part, where)
        if star and not isinstance(part, StepList):
            pieces.extend(part)
        else:
            pieces.append(part)
            lists += isinstance(part, StepList)
    if not lists:
        return func(*pieces, **keywords)
    if lists == 1:
        at = next(k for k, p in enumerate(pieces) if isinstance(p, StepList))
        return rows_unpacked(func, pieces[at], keywords, where, tuple(pieces[:at]),
                        tuple(pieces[at + 1:]))
    first = next(p for p in pieces if isinstance(p, StepList))
    name = _joining_name(func)
    if _computed(name, first.rows, keywords) is None:
        return rows_unpacked(func, first, keywords, where)       # (its error)
    if name in ("concat", "Concat"):
        return _concatenated(func, pieces, keywords, where)
    whole = None     # stack, add_n: the items of one list (they have one shape)
    for piece in pieces:
        if not isinstance(piece, StepList):
            piece = StepList(mx.sym.expand_dims(piece, axis=0), 1, where)
        whole = piece if whole is None else \
            whole.joined(piece.rows, piece.n_items, piece.most, maybe_stale=piece.stale)
    return rows_unpacked(func, whole, keywords, where)


def _concatenated(func, pieces, keywords, where):
    """``F.concat`` of arrays and the items of several collected lists: each list's rows
    joined as its items are, left out by a cond where the list may hold none (items of
    different lists may differ in size along ``dim``, as Python's lists' may). Without an
    array among them, the lists must hold an item between them (Python's ``F.concat()`` of
    no item fails): checked when the graph runs."""
    name = _joining_name(func)

    def built(k, arrays):
        if k == len(pieces):
            # (no array at all: only where every list is empty, which the check refuses
            # before this branch runs; any array of the right rank stands in)
            return func(*arrays, **keywords) if arrays else \
                _computed(name, pieces[-1].rows, keywords)()
        piece = pieces[k]
        if not isinstance(piece, StepList):
            return built(k + 1, arrays + [piece])
        with_items = lambda: built(k + 1, arrays + [   # noqa: E731
            _computed(name, piece.rows, keywords)()])
        if piece.least > 0 or not isinstance(piece.n_items, mx.sym.Symbol) and \
                piece.n_items > 0 and not piece.stale:
            return with_items()
        if not isinstance(piece.n_items, mx.sym.Symbol):
            return built(k + 1, arrays)                 # (no item)
        return cond(piece.n_items > 0, with_items, lambda: built(k + 1, arrays),
                    name=node_name(where, "rows"))
    if any(not isinstance(p, StepList) for p in pieces) or \
            any(p.least > 0 for p in pieces):
        return built(0, [])
    total = sum((p.n_items for p in pieces[1:]), pieces[0].n_items)
    if not isinstance(total, mx.sym.Symbol):
        if total == 0:
            return func(**keywords)           # (MXNet's error, as Python's call gives)
        return built(0, [])
    return checked_item(total, lambda: built(0, []), 0,
                        f"{where}: this unpacks lists that may all be empty (Python's "
                        f"F.concat() of no item fails): the list of the call's items",
                        "the loops appending to them")


def match_items(value, where, values=None, depth=0, made=None):
    """A ``match`` statement's subject, a list a tensor loop collected in it (or in a tuple,
    list or dict it is, or in an attribute of an object a class pattern reads, a namedtuple's,
    a dataclass's, a slotted one's) as the Python list of its items, where their number is
    known while tracing, else refused at the line (NOTE [autograph match]). What it makes is
    kept beside the objects it stands for, for ``match_originals``, and for the match's
    ``values`` (its :class:`MatchValues`), compared as the same copies."""
    if depth == 0:
        _MATCHED.originals, made = {}, {}
        if values is not None:
            values.made = made
    if id(value) in made:            # (an object held twice is one object: a is b)
        return made[id(value)]
    new = _match_items(value, where, depth, made)
    made[id(value)] = new
    if new is not value:
        _MATCHED.originals[id(new)] = (new, value)
    return new


def sequence_items(where, value):
    """The items of a ``match``'s subject written as a name whose cases are sequence
    patterns (NOTE [a match on a tuple display]): a tuple of them where Python's match sees
    a sequence (a list, a tuple, a collected list as ``match_items`` gives it, not a str,
    bytes or an array), else None (no sequence pattern matches)."""
    if type(value) is StepList:
        value = match_items(value, where)
    if isinstance(value, collections.abc.Sequence) and \
            not isinstance(value, (str, bytes, bytearray)):
        return tuple(value)
    return None


def match_originals(values, rests=()):
    """A case's captures (``case State(items=[a, b]) as s``), each the object the subject
    held where ``match_items`` made a copy of it (a capture is that object in Python: ``s is
    st``, and a change of ``s`` is one of ``st``); where ``rests`` says, a star's list or a
    mapping's ``**rest`` dict of such objects (``case (h, *others)``: ``others[0] is outs``)."""
    originals = getattr(_MATCHED, "originals", {})

    def original(v):
        return originals[id(v)][1] if originals.get(id(v), (None,))[0] is v else v
    return tuple((dict(zip(v, map(original, v.values()))) if isinstance(v, dict) else
                  list(map(original, v))) if rest else original(v)
                 for v, rest in zip(values, tuple(rests) + (False,) * len(values)))


class MatchValues:
    """A match's value patterns written as dotted names (``case Reg.cur:``), converted into
    ``case values.v0:``: each read (when Python's match compares it, as it would read the
    name) as ``match_items`` gives it, the copy the subject holds where ``match_items``
    copied the object for the patterns (Python's ``subject == Reg.cur`` is ``Reg.cur ==
    Reg.cur``; the copy compared with the object it stands for was another object, not
    equal: silently another case), refused where it is a Symbol (its truth)."""

    def __init__(self, reads, where):
        self.reads, self.where, self.made = reads, where, {}

    def __getattr__(self, name):
        if not (name[:1] == "v" and name[1:].isdigit()):
            raise AttributeError(name)
        value = self.reads[int(name[1:])]()
        if isinstance(value, mx.sym.Symbol):
            raise AutographError(
                f"{self.where}: a value pattern of this match (case a.b:) is a tensor while "
                f"hybridizing; its value exists only when the graph runs, so no case can be "
                f"chosen while tracing. Write an if/elif on the tensor (a graph's cond)")
        return match_items(value, self.where, None, 1, self.made)


def _match_items(value, where, depth, made):
    if type(value) is StepList:
        n = value.known_length(where)
        if n is None:
            value._unknown_length("matched by a match statement's patterns")
        return MatchedItems(value.rows_list(n, range(n), where), value, where)
    if depth >= 8 or isinstance(value, (str, bytes, mx.sym.Symbol, mx.nd.NDArray)) or \
            type(value) in _NUMBERS or isinstance(value, enum.Enum):
        # (holding no list: a number's, an enum member's attributes are its class's; a
        # match on them, case Mode.TRAIN:, walked the member's each time)
        return value
    if isinstance(value, (list, tuple, dict)):
        olds = list(value.values()) if isinstance(value, dict) else list(value)
    elif not isinstance(value, (mx.gluon.Block, type, types.ModuleType)):
        state = _state(value)
        olds = list(state.values())
    else:
        return value
    items = [match_items(v, where, None, depth + 1, made) for v in olds]
    if all(new is old for new, old in zip(items, olds)):
        return value        # (the same object: a pattern may capture it)
    if type(value) in (list, tuple):
        return type(value)(items)
    if type(value) is dict:
        return dict(zip(value, items))
    if isinstance(value, tuple) and hasattr(value, "_make"):       # (a namedtuple)
        return value._make(items)
    if isinstance(value, (list, tuple, dict)):
        raise AutographError(
            f"{where}: this match's subject holds a list a loop on a tensor collected in a "
            f"{type(value).__name__}; match a list, tuple or dict holding it")
    # (a class pattern reads its attributes: an object of its class holding the same state,
    # made running none of the user's code, no __copy__, __new__ or __init__)
    # (the first class that is no Python class: object, an exception's, else refused)
    base = next(k for k in type(value).__mro__ if not k.__flags__ & _HEAP_TYPE)
    if base is not object and not issubclass(base, BaseException):
        raise AutographError(
            f"{where}: this match's subject holds a list a loop on a tensor collected in a "
            f"{type(value).__name__}; match a list, tuple or dict holding it")
    copied = base.__new__(type(value))
    for name, new in zip(state, items):
        object.__setattr__(copied, name, new)
    return copied


_NUMBERS = (int, float, bool, complex, type(None))


def _state(value):
    """An object's attributes by name: its ``__dict__``'s and its slots' that are set."""
    state = dict(getattr(value, "__dict__", {}))
    for kind in type(value).__mro__:
        slots = kind.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            name = f"_{kind.__name__.lstrip('_')}{slot}" if slot.startswith("__") and \
                not slot.endswith("__") else slot
            if slot not in ("__dict__", "__weakref__") and hasattr(value, name):
                state.setdefault(name, getattr(value, name))
    return state


class MatchedItems(list):
    """A list a tensor loop collected as a ``match`` statement's patterns see it, the Python
    list of its items (``match_items``): a case's capture of it (``case [_, *_] as whole``,
    ``case {"o": o}``) changing it in place would change a copy, not the collected list, so
    that is refused at the match's line."""
    python_type: type = list      # NOTE [a collected list's type]

    def __init__(self, items, original, where):
        super().__init__(items)
        self.original, self.where = original, where

    def _changed(self, *args, **kwargs):
        raise AutographError(
            f"{self.where}: a case of this match captured a list a loop on a tensor collected "
            f"and changes it in place (the patterns see the list of its items, not the "
            f"collected list); change the list by its own name after the match")

    append = extend = insert = pop = remove = clear = sort = reverse = _changed
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _changed
