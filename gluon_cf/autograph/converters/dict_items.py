"""Converts item assignments to a dict no other name can see (before the other converters
run): ``state["h"] += r`` becomes ``state = {**state, "h": state["h"] + r}``, a variable a
tensor ``if`` or loop carries.

NOTE [autograph dict items]
    A graph's branch or step cannot change a Python object in place (traced once, the change
    would happen once): item assignments in a tensor ``if`` or loop are refused (NOTE
    [autograph side effects]). For a dict that only one variable of the function can ever
    reach, assigning an item and rebinding the variable to a copy with that item replaced
    are the same program: ``d[k] = v`` is ``d = {**d, k: v}`` (the key keeps its place, a
    new one goes last, as assignment does) and ``d[k] op= v`` is ``d = {**d, k: d[k] op v}``,
    out of place on a tensor as ``x op= v`` is (NOTE [autograph]), in place on a list. The
    rebound dict is then a carried structure (NOTE [autograph carried structures]). "Only
    one variable can reach it" is decided from the syntax, conservatively: the variable is
    the function's own (no parameter, ``global`` or ``nonlocal``, no closure, lambda or
    comprehension names it), each of its bindings is a dict display or dict comprehension
    (a new object), the key is a constant, and everywhere else it is only read through an
    item (``d[k]``), ``d.get``/``copy``, ``**d`` in a dict display, ``len(d)``, ``k in d``
    or ``return d``: no other name, container or call can hold the same dict. A view
    (``d.keys()``/``values()``/``items()``) sees later assignments to the dict it came from,
    not to the copy: it is a read only where it is used up at once, as the only argument of
    ``list``, ``tuple``, ``sorted``, ``set``, ``len`` and the like, unpacked
    (``f(*d.values())``) or as the iterable of a ``for`` that assigns no item of the dict
    (``vals = d.values()`` then ``d["a"] = v`` would leave ``vals`` the old values).
    Anything else (``alias = d``, ``f(d)``, ``d.update(...)``, ``del d[k]``) leaves every
    item assignment to it as written, refused in a tensor region as
    before.
"""
import ast
from typing import Any

from ..pyct.static_analysis.activity import COMPREHENSIONS
from ..pyct.templates import runtime_call
from .assignments import _AUGMENTED

_READING_METHODS = {"get", "copy"}
_VIEWS = {"keys", "values", "items"}
# builtins that use up an iterable before they return (a view given to them is read once)
_CONSUMERS = {"list", "tuple", "sorted", "set", "frozenset", "len", "sum", "min", "max",
              "any", "all", "dict"}
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef) + COMPREHENSIONS


def rebind_dict_items(func):
    """Rewrite ``func``'s item assignments to dicts only one of its variables can reach
    (NOTE [autograph dict items]), in place."""
    parents = {child: parent for parent in ast.walk(func)
               for child in ast.iter_child_nodes(parent)}
    own = _own_dicts(func, parents)
    if not own:
        return
    for node in list(ast.walk(func)):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                _own_item(node.targets[0], own):
            _replace(node, _rebound(node.targets[0], node.value), parents)
        elif isinstance(node, ast.AugAssign) and _own_item(node.target, own):
            item: Any = node.target          # (a Subscript of a Name by a Constant)
            read = ast.Subscript(value=ast.Name(id=item.value.id, ctx=ast.Load()),
                                 slice=ast.Constant(item.slice.value), ctx=ast.Load())
            value = runtime_call("augmented", [read, node.value,
                                               ast.Constant(_AUGMENTED[type(node.op)])])
            _replace(node, _rebound(item, value), parents)


def _own_item(target, own):
    return isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and \
        target.value.id in own and isinstance(target.slice, ast.Constant)


def _rebound(target, value):
    """``name = {**name, key: value}`` for the item ``target`` (``name[key]``)."""
    name = target.value.id
    return ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=ast.Dict(
        keys=[None, ast.Constant(target.slice.value)],
        values=[ast.Name(id=name, ctx=ast.Load()), value]))


def _replace(node, new, parents):
    ast.copy_location(new, node)
    for part in ast.walk(new):
        ast.copy_location(part, node)
    parent = parents[node]
    for field, block in ast.iter_fields(parent):
        if isinstance(block, list) and node in block:
            block[block.index(node)] = new


def _own_dicts(func, parents):
    """The variables of ``func`` that hold dicts no other name can reach (NOTE above)."""
    params = {a.arg for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs}
    params |= {a.arg for a in (func.args.vararg, func.args.kwarg) if a is not None}
    declared = {name for n in ast.walk(func) if isinstance(n, (ast.Global, ast.Nonlocal))
                for name in n.names}
    nested = {id(n) for inner in ast.walk(func) if isinstance(inner, _NESTED) and
              inner is not func for n in ast.walk(inner)}
    candidates, refused = set(), set(params) | declared
    for node in ast.walk(func):
        if not isinstance(node, ast.Name):
            continue
        if id(node) in nested:
            refused.add(node.id)
        elif isinstance(node.ctx, ast.Store):
            parent = parents[node]
            if isinstance(parent, ast.Assign) and parent.targets == [node] and \
                    isinstance(parent.value, (ast.Dict, ast.DictComp)):
                candidates.add(node.id)
            else:
                refused.add(node.id)
        elif isinstance(node.ctx, ast.Del) or not _reads_without_alias(node, parents):
            refused.add(node.id)
    return candidates - refused


def _reads_without_alias(name, parents):
    """Whether the load ``name`` reads the dict without handing it to anything else."""
    parent = parents.get(name)
    if isinstance(parent, ast.Subscript) and parent.value is name:
        return not isinstance(parent.ctx, ast.Del)
    if isinstance(parent, ast.Attribute) and parent.value is name:
        call = parents.get(parent)
        if not (isinstance(call, ast.Call) and call.func is parent):
            return False
        if parent.attr in _VIEWS:
            return _used_up(call, parent.value.id, parents)
        return parent.attr in _READING_METHODS
    if isinstance(parent, ast.Dict):
        return any(key is None and value is name
                   for key, value in zip(parent.keys, parent.values))
    if isinstance(parent, ast.Call):
        return isinstance(parent.func, ast.Name) and parent.func.id == "len" and \
            parent.args == [name]
    if isinstance(parent, ast.Compare):
        return name in parent.comparators and all(
            isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops)
    return isinstance(parent, ast.Return)


def _used_up(view, name, parents):
    """Whether the view call ``view`` of the dict ``name`` is read at once, before any item
    of the dict can be assigned (NOTE [autograph dict items])."""
    user = parents.get(view)
    if isinstance(user, ast.Call) and user.args == [view] and not user.keywords:
        return isinstance(user.func, ast.Name) and user.func.id in _CONSUMERS
    if isinstance(user, ast.Starred):   # f(*d.values()), [*d]: unpacked before the call
        return isinstance(parents.get(user), (ast.Call, ast.List, ast.Tuple, ast.Set))
    if isinstance(user, (ast.For, ast.AsyncFor)) and user.iter is view:
        return not any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and
                       n.value.id == name and isinstance(n.ctx, ast.Store)
                       for n in ast.walk(user))
    return False
