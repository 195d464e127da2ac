"""The plain values of Python state a recursive body changes, set back to what they were before
its first trace, for one more trace (NOTE [a trace under the first call's state])."""
import ast
import types
from typing import Any, Dict, List, Optional, Tuple

# NOTE [a trace under the first call's state]
#     Two traces of a body that changes Python state (NOTE [Python state in a recursive body]
#     in ``python_state.py``) both run after the discovery trace, which changed the state
#     first: neither sees what the first call sees eagerly. A body scaling by
#     ``2.0 if state["n"] > 1 else 1.0`` after ``state["n"] += 1`` traced with n = 2 and 3,
#     one graph (a warning), and hybridized gave [[45, 50, 55]] where eagerly the first call
#     scales by 1.0: [[39, 43, 47]], silently. So the plain values the traces changed (ints,
#     floats, strings... reached by names, items and attributes) are set back to what they
#     were before the discovery trace, the body is traced once more and its graph compared
#     too, and the values are put back as the traces left them. Only plain values found again
#     by their path are set; a container grown or an object replaced is not (its graph was
#     compared as before). Like any comparison of traces, this samples the states the calls
#     see: a threshold past the third call's count still reads one graph for all.


def _key(part: str) -> Any:
    return ast.literal_eval(part[1:-1])


def _get(value, part: str):
    return getattr(value, part[1:]) if part[:1] == "." else value[_key(part)]


def _set(value, part: str, new) -> None:
    if part[:1] == ".":
        setattr(value, part[1:], new)
    else:
        value[_key(part)] = new


def _root(functions: List[types.FunctionType], scope: int, name: str):
    """(container, setter) of a path's first name: a closure's cell or a module's global."""
    for fn in functions:
        if id(fn) == scope and name in fn.__code__.co_freevars:
            cell = (fn.__closure__ or ())[fn.__code__.co_freevars.index(name)]
            return cell.cell_contents, lambda new, cell=cell: setattr(cell, "cell_contents", new)
        globals_ = getattr(fn, "__globals__", None)
        if globals_ is not None and id(globals_) == scope and name in globals_:
            return globals_[name], lambda new, g=globals_: g.__setitem__(name, new)
    raise LookupError(name)


def _place(functions, path: Tuple[Any, ...]):
    """(current value, setter) of the state at ``path``."""
    value, setter = _root(functions, path[0], path[1])
    for part in path[2:]:
        if not isinstance(part, str) or part[:1] not in ".[":
            raise LookupError(part)
        owner = value
        value = _get(owner, part)
        setter = (lambda new, owner=owner, part=part: _set(owner, part, new))
    return value, setter


def set_back(initial, now) -> Optional[List]:
    """Set the plain values ``initial`` (a snapshot before the first trace) holds and ``now``
    (one after the traces) does not, back; the ``[(setter, value now)]`` that puts them as they
    were, or None if none could be set."""
    undo: List = []
    changed: Dict[Tuple[Any, ...], Any] = {
        path: entry[2] for path, entry in initial.state.items()
        if entry[0] == "value" and now.state.get(path) != entry}
    for path, value in changed.items():
        entry = now.state.get(path)
        try:
            current, setter = _place(now.functions, path)
            if entry is None or entry[0] != "value" or type(current) is not entry[1]:
                continue
            setter(value)
        except Exception:   # noqa: BLE001 - a path not found again: not set (NOTE above)
            continue
        undo.append((setter, current))
    return undo or None


def put_back(undo) -> None:
    for setter, value in reversed(undo):
        setter(value)
