"""What a graph's loop or cond carries of converted code's variables: arrays, and lists,
tuples, named tuples and dicts of arrays (an RNN cell's ``states``), flattened into the arrays
the graph carries and rebuilt around them.

NOTE [autograph carried structures]
    ``out, states = self.cell(x_t, states)`` in a ``for`` over a tensor, ``state = (a + b,
    a)`` in a tensor ``while``, ``states = [states[1], states[0]]`` in a tensor ``if``: a
    variable holding a (nested) list, tuple, named tuple or dict (string keys) whose items
    are all arrays is carried as its arrays, in order, and rebuilt as the same type (a
    dict with the same keys in the same order) around the graph's
    values, in every step and branch and after the loop or ``if``. What Python computes on
    it is then computed on the graph's values, values and gradients (each array is an
    ordinary loop variable). The structure (types, lengths, nesting) must stay the same from
    step to step and between the branches: a loop cannot carry a list that grows (a list
    appended to once per step is collected instead, NOTE [autograph lists]), so another
    structure after a step, or in the other branch, is an AutographError naming the
    variable and both structures. A dict may hold Python numbers, strings, bools and None
    beside its arrays (``state = {"h": h, "k": 2}``): they are part of its structure, not
    carried (each step and branch rebuilds it with them), so a step or branch changing one
    (``state["k"] += 1``) is refused as another structure is (round 30ag: any such dict was
    refused). A list mixing arrays with Python values, or an empty one, is not carried (a
    changed one is refused where it is compared), nor is any other object holding arrays (a
    dataclass: refused, its comparison would ask a Symbol for its truth).
"""
import types
from typing import Any, List, Optional

import mxnet as mx

from ..errors import AutographError, read_by


def spec_of(value) -> Optional[Any]:
    """``"array"`` for a Symbol; ``(type, [specs])`` for a non-empty list, tuple or named
    tuple whose items are (at any depth) all Symbols, ``(dict, keys, [specs])`` for such a
    dict with string keys; None for anything else (not carried as arrays)."""
    if isinstance(value, mx.sym.Symbol):
        return "array"
    if (type(value) in (list, tuple) or _named_tuple(value)) and value:
        specs = [spec_of(item) for item in value]
        if all(s is not None for s in specs):
            return (type(value), specs)
    if type(value) is dict and value and all(isinstance(k, str) for k in value):
        specs = [spec_of(item) if type(item) not in _CONSTANTS else
                 ("constant", item, type(item)) for item in value.values()]
        if all(s is not None for s in specs) and any(
                s == "array" or s is not None and s[0] != "constant" for s in specs):
            return (dict, tuple(value), specs)
    return None


# A dict's Python values carried beside its arrays, unchanged (NOTE [autograph carried
# structures]); a constant's type is part of it (2 and 2.0, True and 1: other values)
_CONSTANTS = (int, float, bool, str, type(None))


def holds_arrays(value, depth=0) -> bool:
    """Whether ``value`` holds a Symbol: in a list, tuple, set or dict, or an attribute of an
    object (a dataclass), a few levels deep."""
    if isinstance(value, mx.sym.Symbol):
        return True
    if depth > 4 or isinstance(value, (str, bytes, type, types.ModuleType, types.FunctionType,
                                       types.MethodType, mx.gluon.Block)):
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
    elif isinstance(value, dict):
        items = list(value.values())
    else:
        items = list(getattr(value, "__dict__", {}).values())
    return any(holds_arrays(item, depth + 1) for item in items)


def _named_tuple(value):
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def described(spec) -> str:
    if spec == "array":
        return "an array"
    if spec is None:
        return "not a list or tuple of arrays"
    if spec[0] == "constant":
        return repr(spec[1])
    kind, items = spec[0], spec[-1]
    if kind is dict:
        # keys by name and in order: two dicts of as many arrays differ in their keys or in
        # the keys' order (the order Python iterates them in), said plainly (issue 24)
        return "a dict {" + ", ".join(f"{key!r}: {described(s)}"
                                      for key, s in zip(spec[1], items)) + "}"
    return f"a {kind.__name__} of {len(items)} ({', '.join(described(s) for s in items)})"


def _has_constant(spec):
    return isinstance(spec, tuple) and (spec[0] == "constant" or
                                        any(_has_constant(s) for s in spec[-1]))


def keep_what(*specs) -> str:
    """What a refusal of a changed structure says to keep (its Python values too where a
    dict holds some: NOTE [autograph carried structures])."""
    if any(_has_constant(s) for s in specs):
        return ("keep its structure and its Python values (a number the loop or if changes "
                "must be an array: F.full((1,), 2.0))")
    return "keep its structure (collect a growing list with one append per step instead)"


class Carried:
    """The layout of a loop's or cond's variables ``values`` (named ``names``): which are
    carried, as how many arrays (:func:`spec_of`)."""

    def __init__(self, values, names, where, what):
        self.values, self.names, self.where, self.what = tuple(values), names, where, what
        self.specs = [spec_of(v) for v in self.values]

    def structured(self, k) -> bool:
        return isinstance(self.specs[k], tuple)

    def arrays(self, values) -> List[mx.sym.Symbol]:
        """The arrays the graph carries for ``values`` (the initial values, or a step's or
        branch's new ones, whose structures must be the initial ones)."""
        out: List[mx.sym.Symbol] = []
        for k, (spec, value) in enumerate(zip(self.specs, values)):
            if spec is None:
                continue
            if spec_of(value) != spec:
                name = self.names[k]
                raise AutographError(
                    f"{self.where}: variable {name!r}{read_by(self.where, name)} is "
                    f"{described(spec)} before this {self.what} and {described(spec_of(value))} "
                    f"after it; a graph carries the same arrays throughout, so "
                    f"{keep_what(spec, spec_of(value))}")
            _flatten(value, out)
        return out

    def rebuild(self, arrays):
        """The variables' values around the graph's ``arrays`` (as many as :meth:`arrays`
        gives): those not carried keep their values."""
        leaves = iter(arrays)
        return tuple(value if spec is None else _build(spec, leaves)
                     for spec, value in zip(self.specs, self.values))


def _flatten(value, out):
    if isinstance(value, mx.sym.Symbol):
        out.append(value)
    elif type(value) in _CONSTANTS:
        return              # (a dict's constant: kept in its spec)
    else:
        for item in (value.values() if isinstance(value, dict) else value):
            _flatten(item, out)


def _build(spec, leaves):
    if spec == "array":
        return next(leaves)
    if spec[0] == "constant":
        return spec[1]
    kind, items = spec[0], spec[-1]
    built = [_build(s, leaves) for s in items]
    if kind is dict:
        return dict(zip(spec[1], built))
    return kind(*built) if kind not in (list, tuple) else kind(built)


def carries_nothing(step, where):
    """Refuse a tensor ``while`` that carries no array, naming what its ``step`` changes.

    NOTE [a tensor while carrying no array]: a tensor ``while`` whose variables hold no
    array (a Python counter ``k = k + 1``, a dataclass or a dict holding a Python number
    beside its arrays) would reach ``while_loop`` with no loop variable, whose error
    ("loop_vars must contain at least one array") names the library's parameter. One step
    traced on its own (Symbols: nothing runs) finds the variable that changes and refuses it
    as any step does (control_flow's ``_check_loop_vars``); a step changing nothing is
    refused too, as its condition could never change."""
    step()
    raise AutographError(f"{where}: this while loop is on a tensor but its steps change no "
                         f"array (its condition stays what it was), so it runs no step or "
                         f"never ends; make what the step changes an array")
