"""Calls unpacking several lists, or a list bound to another name, where one of them is a list
a tensor loop collected (``F.concat(*a, *b, dim=0)``, ``tail = outs[-2:]; F.stack(*tail)``),
computed from the lists' rows (NOTE [autograph lists])."""
import mxnet as mx

from ...ops.cond import cond
from ..errors import node_name
from .data_structures import StepList, _computed, _joining_name, rows_unpacked, taken
from .item_check import checked_item


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
            whole.joined(piece.rows, piece.count, piece.most, maybe_stale=piece.stale)
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
        if piece.least > 0 or not isinstance(piece.count, mx.sym.Symbol) and \
                piece.count > 0 and not piece.stale:
            return with_items()
        if not isinstance(piece.count, mx.sym.Symbol):
            return built(k + 1, arrays)                 # (no item)
        return cond(piece.count > 0, with_items, lambda: built(k + 1, arrays),
                    name=node_name(where, "rows"))
    if any(not isinstance(p, StepList) for p in pieces) or \
            any(p.least > 0 for p in pieces):
        return built(0, [])
    total = sum((p.count for p in pieces[1:]), pieces[0].count)
    if not isinstance(total, mx.sym.Symbol):
        if total == 0:
            return func(**keywords)           # (MXNet's error, as Python's call gives)
        return built(0, [])
    return checked_item(total, lambda: built(0, []), 0,
                        f"{where}: this unpacks lists that may all be empty (Python's "
                        f"F.concat() of no item fails): the list of the call's items",
                        "the loops appending to them")


def match_items(value, where, depth=0):
    """A ``match`` statement's subject, a list a tensor loop collected in it (or in a tuple,
    list or dict it is) as the Python list of its items, where their number is known while tracing,
    else refused at the line (NOTE [autograph match])."""
    if type(value) is StepList:
        n = value.known_length(where)
        if n is None:
            value._unknown_length("matched by a match statement's patterns")
        return value.rows_list(n, range(n), where)
    if depth < 8 and type(value) in (list, tuple, dict):
        olds = list(value.values()) if type(value) is dict else value
        items = [match_items(v, where, depth + 1) for v in olds]
        if any(new is not old for new, old in zip(items, olds)):
            # (else the same object: a pattern may capture it)
            return dict(zip(value, items)) if type(value) is dict else type(value)(items)
    return value
