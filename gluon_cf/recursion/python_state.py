"""Python state a recursive function's body changes while it is traced (issue 24): refused
when the traced graph depends on it, else a warning (NOTE [Python state in a recursive body]).

NOTE [Python state in a recursive body]
    Hybridized, a recursive function's body is traced into one graph (a discovery trace, then
    the body's), not run once per call as eagerly. A body changing Python state it reads,
    ``self.calls += 1`` ... ``node(l) + node(r) * self.calls``, ran eagerly once per call
    ([[87, 97, 107]] on a tree of five nodes) but hybridized once per trace, the count of the
    last trace a constant of the graph ([[45, 50, 55]]), silently. The state a body can reach
    is what Python names in it: its closure's cells and the globals it reads, their plain
    values, the items of a Python container there (``calls = [0]`` ... ``calls[0] += 1``) and
    the attributes of an object there (``self``); a snapshot of it is taken around the body's
    trace. When the trace changed it, the body is traced once more: a graph that differs
    (constants, operators; not the names MXNet numbers) depends on the state it changes,
    which the graph cannot follow call by call: ``NotImplementedError`` at the statement's
    line. A graph that does not differ (a counter for logging, a cache filled once) is the
    same graph, but the change happens per trace, not per call: a warning, not a refusal,
    since the values are eager mode's. As autograph's refusal of a Python value changed in a
    tensor loop (NOTE [autograph side effects]), whose source conversion a plain recursive
    body does not go through, the refusal is a statement that changes Python state where a
    graph is traced once; here it is found by the state's change, not by the statement.
"""
import ast
import inspect
import json
import re
import textwrap
import types
import warnings
from typing import Any, Dict, Tuple

import mxnet as mx

_PLAIN = (bool, int, float, complex, str, bytes, type(None))
_CONTAINERS = (list, dict, set, tuple)
_NOT_STATE = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
              type, mx.sym.Symbol, mx.nd.NDArray)
_MAX_ITEMS = 256     # items of a container looked at (a table of thousands is no counter)


def _value_key(value) -> Any:
    """What a change of ``value`` changes: a plain value itself, a container's items (an item
    not plain by its identity)."""
    if isinstance(value, _PLAIN):
        return ("value", type(value), value)
    if isinstance(value, _CONTAINERS):
        if isinstance(value, dict):
            items = [(_item_key(k), _item_key(v)) for k, v in list(value.items())[:_MAX_ITEMS]]
        else:
            items = [_item_key(v) for v in list(value)[:_MAX_ITEMS]]
            if isinstance(value, set):
                items.sort(key=repr)
        return ("items", id(value), len(value), tuple(items))
    return ("object", id(value))


def _item_key(value) -> Any:
    return _value_key(value) if isinstance(value, _PLAIN) else ("object", id(value))


def _names_read(code: types.CodeType):
    """The global names ``code`` and the functions defined in it read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_read(const)
    return names


def snapshot(fn) -> Dict[Tuple[str, ...], Any]:
    """The Python state ``fn``'s body can reach by name, as keys comparable after a trace."""
    state: Dict[Tuple[str, ...], Any] = {}
    code = getattr(fn, "__code__", None)
    if code is None:
        return state
    reached = []
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            reached.append((name, cell.cell_contents))
        except ValueError:   # (a cell not yet bound)
            continue
    scope = getattr(fn, "__globals__", {})
    reached += [(name, scope[name]) for name in sorted(_names_read(code)) if name in scope]
    for name, value in reached:
        if isinstance(value, _NOT_STATE) or callable(value) and not hasattr(value, "__dict__"):
            continue
        state[(name,)] = _value_key(value)
        attrs = getattr(value, "__dict__", None)
        if isinstance(attrs, dict) and not isinstance(value, _CONTAINERS):
            block = isinstance(value, mx.gluon.Block)
            for attr, item in list(attrs.items()):
                # (a Block's own, Gluon's: its children and parameters, registered on use)
                if not isinstance(item, _NOT_STATE) and not (block and attr[:1] == "_"):
                    state[(name, attr)] = _value_key(item)
    return state


def changed(before, after):
    """The names (``("self", "calls")``) whose state differs between two snapshots."""
    return [key for key in sorted(set(before) | set(after), key=repr)
            if before.get(key) != after.get(key)]


# MXNet's numbering of node and trace names (``_plus12``, ``_gcf7_recursive_node_body_in0``):
# two traces of one body differ there, and in the attributes of a parameter's variable (its
# shape, init ... at its first use only)
_NUMBERED = re.compile(r"(?<=[A-Za-z_])\d+")


def _canonical(value):
    """A graph's JSON (or a gluon_cf node's spec in it) without what two traces of one body
    differ in (above)."""
    if isinstance(value, str):
        if value[:1] == "{":
            try:
                return _canonical(json.loads(value))
            except ValueError:
                pass
        return _NUMBERED.sub("", value)
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "op" in value and "inputs" in value:   # a node: its name is numbered, unless a variable
        value = {k: v for k, v in value.items() if k not in (
            ("attrs",) if value["op"] == "null" else ("name",))}
    return {k: _canonical(v) for k, v in value.items()}


def same_graph(traced, again) -> bool:
    """Whether two traces of one body are one graph, MXNet's numbering of names aside."""
    return _canonical(traced.symbol.tojson()) == _canonical(again.symbol.tojson())


def _statement_line(fn, names):
    """``file:line`` of the first statement of ``fn`` assigning one of ``names``
    (``self.calls += 1``, ``calls[0] = ...``), or its ``def``'s."""
    code = fn.__code__
    where = "%s:%d" % (code.co_filename, code.co_firstlineno)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return where
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            while isinstance(target, ast.Subscript):
                target = target.value
            if isinstance(target, ast.Attribute) and target.attr in names or \
                    isinstance(target, ast.Name) and target.id in names:
                return "%s:%d" % (code.co_filename, code.co_firstlineno + node.lineno - 1)
    return where


def check_trace(rfn, before, traced, trace_again):
    """After the body trace ``traced`` of recursive function ``rfn`` (``before``: the
    :func:`snapshot` taken before it): a refusal if it changed Python state its graph depends
    on, a warning if it changed state its graph does not read (NOTE [Python state in a
    recursive body]). ``trace_again()``: another trace of the body."""
    names = changed(before, snapshot(rfn.fn))
    if not names:
        return
    what = ", ".join(".".join(key) for key in names)
    where = _statement_line(rfn.fn, {key[-1] for key in names})
    if not same_graph(traced, trace_again()):
        raise NotImplementedError(
            "%s: gluon_cf.recursive: %r changes Python state (%s) that its value depends on; "
            "hybridized, its body is traced into one graph, not run once per call, so the "
            "graph would hold the value of one trace for every call (eagerly it changes per "
            "call). Pass the value as an argument of the recursive call (an array, e.g. a "
            "depth), or compute it from arrays" % (where, rfn.name, what))
    line = where.rsplit(":", 1)
    warnings.warn_explicit(
        "gluon_cf.recursive: %r changes Python state (%s) while traced; hybridized, its body "
        "is traced, not run per call, so the change happens once per trace, not once per "
        "call as eagerly (the values do not depend on it)" % (rfn.name, what), UserWarning,
        line[0], int(line[1]) if line[1].isdigit() else 0)
