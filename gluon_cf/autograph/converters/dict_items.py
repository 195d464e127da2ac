"""Converts item assignments to a dict no other name can see (before the other converters
run): ``state["h"] += r`` becomes ``state = {**state, "h": state["h"] + r}``, a variable a
tensor ``if`` or loop carries.

NOTE [autograph dict items]
    A graph's branch or step cannot change a Python object in place (traced once, the change
    would happen once): item assignments in a tensor ``if`` or loop are refused (NOTE
    [autograph side effects]). For a dict that only one variable of the function can ever
    reach, assigning an item and rebinding the variable to a copy with that item replaced
    are the same program: ``d[k] = v`` is ``d = {**d, k: v}`` (the key keeps its place, a
    new one goes last, as assignment does) and ``d[k] op= v`` is ``d = {**d, k: d[k] op v}``
    with ``op=`` as ``x op= v`` runs (NOTE [autograph augmented assignment]), in place on a
    list. The
    rebound dict is then a carried structure (NOTE [autograph carried structures]). "Only
    one variable can reach it" is decided from the syntax, conservatively: the variable is
    the function's own (no parameter, ``global`` or ``nonlocal``, no closure, lambda or
    comprehension names it), each of its bindings is a dict display or dict comprehension
    (a new object: ``{...}``, ``{k: v for ...}``, ``dict(k=v, ...)``), the key is a
    constant, and everywhere else it is only read through an item (``d[k]``),
    ``d.get``/``copy``, ``**d`` in a dict display, ``len(d)``, ``k in d`` or ``return d``,
    or changed by ``update``, ``pop`` or ``del d[k]``: no other name, container or call can
    hold the same dict. Those changes become rebindings too: ``d.update(k=v, ...)`` or
    ``d.update({"k": v, ...})`` (constant keys) is ``d = {**d, "k": v, ...}``, ``del d[k]``
    is ``d = without(d, k)`` (Python's KeyError for a missing key), and ``d.pop(k)`` (or
    ``d.pop(k, default)``) in a simple statement reads the item into a temporary and drops
    it before the statement runs, where nothing else in the statement reads that item and
    no short-circuit or closure could have skipped or deferred the pop; any other update or
    pop stays as written (refused in a tensor region, NOTE [autograph side effects]). A view
    (``d.keys()``/``values()``/``items()``) sees later assignments to the dict it came from,
    not to the copy: it is a read only where it is used up at once, as the only argument of
    ``list``, ``tuple``, ``sorted``, ``set``, ``len`` and the like, unpacked
    (``f(*d.values())``) or as the iterable of a ``for`` that assigns no item of the dict
    (``vals = d.values()`` then ``d["a"] = v`` would leave ``vals`` the old values).
    Anything else (``alias = d``, ``f(d)``, ``d.setdefault(...)``, ``del d[key]`` of a
    variable key) leaves every item assignment to it as written, refused in a tensor region
    as before. ``d[k] op= v`` of an item an array something else holds may share is refused
    hybridized (NOTE [autograph augmented assignment]).
"""
import ast
from typing import Any

from ..pyct.static_analysis.activity import COMPREHENSIONS, MUTATORS
from ..pyct.templates import counter, runtime_call
from .assignments import _AUGMENTED, rewrite
from ..pyct.nodes import child_nodes, walk

# (update and pop change only the dict itself, which no other name holds)
_READING_METHODS = {"get", "copy", "update", "pop"}
_VIEWS = {"keys", "values", "items"}
# builtins that use up an iterable before they return (a view given to them is read once)
_CONSUMERS = {"list", "tuple", "sorted", "set", "frozenset", "len", "sum", "min", "max",
              "any", "all", "dict"}
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef) + COMPREHENSIONS


def rebind_dict_items(func, converter=None):
    """Rewrite ``func``'s item assignments to dicts only one of its variables can reach
    (NOTE [autograph dict items]), in place. ``converter``: the Converter whose
    ``shared_array`` says what else may hold the dict's arrays (NOTE [autograph augmented
    assignment])."""
    if not any(isinstance(n, ast.Assign) and (isinstance(n.value, (ast.Dict, ast.DictComp)) or
                                              _dict_call(n.value)) for n in walk(func)):
        return      # (no dict made: none of its own, as _own_dicts would find, only faster)
    parents = {child: parent for parent in walk(func)
               for child in child_nodes(parent)}
    own = _own_dicts(func, parents)
    # (pops hoisted before their statements, planned on the code as written; a dict changed
    # by a call inside a statement that becomes a rebinding, {**d, ...} copying d before the
    # call runs, keeps its item assignments as written)
    plan = _pops(func, own, parents)
    own -= _changed_inside_rebinding(func, own, parents, plan)
    plan = {s: pops for s, pops in plan.items()
            if all(p.func.value.id in own for p in pops)}
    if not own:
        return
    replaced: dict = {}
    for node in list(walk(func)):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                _own_item(node.targets[0], own):
            replaced[node] = _replace(node, _rebound(node.targets[0], node.value), parents)
        elif isinstance(node, ast.AugAssign) and _own_item(node.target, own):
            item: Any = node.target          # (a Subscript of a Name by a Constant)
            read = ast.Subscript(value=ast.Name(id=item.value.id, ctx=ast.Load()),
                                 slice=ast.Constant(item.slice.value), ctx=ast.Load())
            where = converter and converter.where(node)
            shared = converter and converter.shared_array(func, item.value.id, node)
            value = runtime_call("augmented", [read, node.value,
                                               ast.Constant(_AUGMENTED[type(node.op)]),
                                               ast.Constant(where), ast.Constant(shared),
                                               ast.Constant(rewrite(node))])
            replaced[node] = _replace(node, _rebound(item, value), parents)
        elif isinstance(node, ast.Delete) and all(_own_item(t, own) for t in node.targets):
            targets: Any = node.targets      # (Subscripts of a Name by a Constant)
            replaced[node] = _replace(node, [_rebind(t.value.id, _without(t.value.id, t.slice))
                                             for t in targets], parents)
        elif isinstance(node, ast.Expr) and _update(node.value, own):
            call: Any = node.value
            keys, values = _updated_items(call)
            name = call.func.value.id
            replaced[node] = _replace(node, _rebind(name, ast.Dict(
                keys=[None] + keys, values=[ast.Name(id=name, ctx=ast.Load())] + values)),
                parents)
        elif isinstance(node, ast.Call) and _dict_call(node):
            _replace_expression(node, ast.Dict(keys=[ast.Constant(k.arg) for k in node.keywords],
                                               values=[k.value for k in node.keywords]), parents)
    parents = {child: parent for parent in walk(func)
               for child in child_nodes(parent)}
    for statement, pops in plan.items():
        statement = replaced.get(statement, statement)
        hoisted = []
        for call in pops:
            name, key = call.func.value.id, call.args[0]
            temp = f"__ag_popped_{next(counter)}"
            current: ast.expr = ast.Subscript(value=ast.Name(id=name, ctx=ast.Load()),
                                              slice=key, ctx=ast.Load())
            if len(call.args) == 2:       # d.pop(k, default): d.get(k, default)
                current = ast.Call(func=ast.Attribute(value=ast.Name(id=name, ctx=ast.Load()),
                                                      attr="get", ctx=ast.Load()),
                                   args=call.args, keywords=[])
            hoisted += [ast.Assign(targets=[ast.Name(id=temp, ctx=ast.Store())],
                                   value=current),
                        _rebind(name, _without(name, key, quiet=len(call.args) == 2))]
            _replace_expression(call, ast.Name(id=temp, ctx=ast.Load()), parents)
        _replace(statement, hoisted + [statement], parents)


def _rebind(name, value):
    return ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=value)


def _without(name, key, quiet=False):
    """``{k: v for k, v in name.items() if k != key}``, checked first as ``del`` and ``pop``
    check (``__ag__.without``)."""
    return runtime_call("without", [ast.Name(id=name, ctx=ast.Load()), key,
                                    ast.Constant(quiet)])


def _update(call, own):
    """Whether ``call`` is ``d.update(k=v, ...)`` or ``d.update({"k": v, ...})`` of an own
    dict ``d`` (constant keys: the rebound dict's keys are known)."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and
            call.func.attr == "update" and isinstance(call.func.value, ast.Name) and
            call.func.value.id in own):
        return False
    if any(k.arg is None for k in call.keywords):
        return False
    return not call.args or (len(call.args) == 1 and isinstance(call.args[0], ast.Dict) and
                             all(isinstance(k, ast.Constant) for k in call.args[0].keys))


def _updated_items(call):
    keys, values = [], []
    if call.args:
        keys += list(call.args[0].keys)
        values += list(call.args[0].values)
    keys += [ast.Constant(k.arg) for k in call.keywords]
    values += [k.value for k in call.keywords]
    return keys, values


def _dict_call(call):
    """``dict(k=v, ...)``: a new dict, as a display."""
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and \
        call.func.id == "dict" and not call.args and call.keywords and \
        all(k.arg is not None for k in call.keywords)


def _pop(call, own):
    """Whether ``call`` is ``d.pop("k")`` or ``d.pop("k", default)`` of an own dict."""
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
        call.func.attr == "pop" and isinstance(call.func.value, ast.Name) and \
        call.func.value.id in own and not call.keywords and 1 <= len(call.args) <= 2 and \
        isinstance(call.args[0], ast.Constant)


_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)
# where a pop may not run, or run later, than its statement's start
_DEFERRED = (ast.IfExp, ast.BoolOp, ast.Lambda) + COMPREHENSIONS


def _pops(func, own, parents):
    """{statement: the pops of own dicts in it} for the pops a rewrite can run first, before
    the statement: in a simple statement, not under a short-circuit or a closure, in a
    statement that reads no other item of the dict by the same key."""
    found: dict = {}
    node: Any
    for node in walk(func):
        if not _pop(node, own):
            continue
        statement = parents.get(node)
        while statement is not None and not isinstance(statement, ast.stmt):
            if isinstance(statement, _DEFERRED):
                break
            statement = parents.get(statement)
        if not isinstance(statement, _SIMPLE):
            continue
        name, key = node.func.value.id, node.args[0].value
        # the statement's other uses of the dict: items of other constant keys only (a read
        # of the same item, len(d), k in d, d.get(...) would run after the pop, not before)
        if any(isinstance(n, ast.Name) and n.id == name and n is not node.func.value and
               not (isinstance(parents.get(n), ast.Subscript) and parents[n].value is n and
                    isinstance(parents[n].slice, ast.Constant) and
                    parents[n].slice.value != key)
               for n in walk(statement)):
            continue
        found.setdefault(statement, []).append(node)
    return found


def _changed_inside_rebinding(func, own, parents, plan):
    """The dicts of ``own`` a call (``d.pop``, ``d.update`` ...) changes inside a statement
    that becomes a rebinding of one of them (an item assignment, ``del``, ``update``), where
    the call is not a planned hoisted pop."""
    planned = {id(p) for pops in plan.values() for p in pops}
    changed = set()
    for statement in walk(func):
        rebinds = (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and
                   _own_item(statement.targets[0], own)) or \
            (isinstance(statement, ast.AugAssign) and _own_item(statement.target, own)) or \
            (isinstance(statement, ast.Delete) and
             all(_own_item(t, own) for t in statement.targets)) or \
            (isinstance(statement, ast.Expr) and _update(statement.value, own))
        if not rebinds:
            continue
        for call in walk(statement):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                    isinstance(call.func.value, ast.Name) and call.func.value.id in own and \
                    call.func.attr in MUTATORS and id(call) not in planned and \
                    call is not getattr(statement, "value", None):
                changed.add(call.func.value.id)
    return changed


def _replace_expression(node, new, parents):
    ast.copy_location(new, node)
    for part in walk(new):
        ast.copy_location(part, node)
    parent = parents[node]
    for field, value in ast.iter_fields(parent):
        if value is node:
            setattr(parent, field, new)
        elif isinstance(value, list) and node in value:
            value[value.index(node)] = new
    parents[new] = parent


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
    """Put ``new`` (a statement, or a list of them) in ``node``'s place in its block."""
    news = new if isinstance(new, list) else [new]
    for statement in news:
        ast.copy_location(statement, node)
        for part in walk(statement):
            if not hasattr(part, "lineno") or part is statement or part in news:
                ast.copy_location(part, node)
    parent = parents[node]
    for field, block in ast.iter_fields(parent):
        if isinstance(block, list) and node in block:
            k = block.index(node)
            block[k:k + 1] = news
    for statement in news:
        parents[statement] = parent
    return news[0]


def _own_dicts(func, parents):
    """The variables of ``func`` that hold dicts no other name can reach (NOTE above)."""
    params = {a.arg for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs}
    params |= {a.arg for a in (func.args.vararg, func.args.kwarg) if a is not None}
    declared = {name for n in walk(func) if isinstance(n, (ast.Global, ast.Nonlocal))
                for name in n.names}
    nested = {id(n) for inner in walk(func) if isinstance(inner, _NESTED) and
              inner is not func for n in walk(inner)}
    candidates, refused = set(), set(params) | declared
    for node in walk(func):
        if not isinstance(node, ast.Name):
            continue
        if id(node) in nested:
            refused.add(node.id)
        elif isinstance(node.ctx, ast.Store):
            parent = parents[node]
            if isinstance(parent, ast.Assign) and parent.targets == [node] and \
                    (isinstance(parent.value, (ast.Dict, ast.DictComp)) or
                     _dict_call(parent.value)):
                candidates.add(node.id)
            else:
                refused.add(node.id)
        elif not _reads_without_alias(node, parents):
            refused.add(node.id)
    return candidates - refused


def _reads_without_alias(name, parents):
    """Whether the load ``name`` reads the dict without handing it to anything else."""
    parent = parents.get(name)
    if isinstance(parent, ast.Subscript) and parent.value is name:
        return not isinstance(parent.ctx, ast.Del) or isinstance(parent.slice, ast.Constant)
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
                       for n in walk(user))
    return False
