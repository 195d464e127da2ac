"""Converts the lists a loop appends to once per step (NOTE [autograph lists]): which lists a
loop collects, their appends made step outputs (one ending a ``for`` step after a break made a
function of the step's end), and ``items[i]`` of one made ``item``."""
import ast
from typing import Any

from ..pyct.static_analysis.activity import assigned_names, scoped
from ..pyct.templates import runtime_call, thunk
from .base import Converter
from .jumps import lowerable
from ..pyct.nodes import child_nodes, walk


def appended_name(statement):
    """``name`` when ``statement`` is ``name.append(value)``, else None."""
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        call = statement.value
        if isinstance(call.func, ast.Attribute) and call.func.attr == "append" and \
                isinstance(call.func.value, ast.Name) and len(call.args) == 1 and \
                not call.keywords and not isinstance(call.args[0], ast.Starred):
            return call.func.value.id
    return None


def collected_lists(func):
    """For each loop whose jumps became flags: the names its body appends to by a statement
    of the body itself (once per step), that the body neither assigns nor reads otherwise."""
    collected: dict = {}
    for function in walk(func):     # (a nested helper's own loops too: round 31ag)
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _collected_in(function, collected)
    return collected


def _collected_in(func, collected):
    local: list = []            # (the function's own names, found once if a loop needs them)
    for loop in scoped(func.body):
        if not isinstance(loop, (ast.While, ast.For)) or not lowerable(loop):
            continue
        if not local:
            local.append(_own_lists(func))
        appended = [appended_name(s) for s in step_statements(loop)]
        guarded = guarded_append(loop)
        if guarded is not None:
            appended.append(appended_name(guarded[-1]))
        names = []
        for name in sorted({n for n in appended if n is not None}):
            reads = sum(1 for n in scoped(loop.body) if isinstance(n, ast.Name) and
                        n.id == name and isinstance(n.ctx, ast.Load))
            if reads == appended.count(name) == 1 and name not in assigned_names(loop.body) \
                    and name in local[0] and _made_here(func, name, loop) and \
                    not _aliased_before(func, name, loop):
                names.append(name)
        if names:
            collected[loop] = names


def appended_in_clauses(loop, names, where):
    """``(name, "the finally at file:line")`` for each list of ``names`` a loop's step appends
    to inside a ``finally`` or ``except`` clause of a ``try`` (``where(node)``: its
    ``file:line: source``): no statement of the step, not collected (Python runs it on a step
    whose ``try`` raised, where a graph's step records no row), refused with that reason
    (``no_outer_lists``)."""
    found: list = []
    for node in scoped(loop.body):
        if not isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            continue
        clauses: Any = node       # (a Try or TryStar)
        for kind, block in [("finally", clauses.finalbody)] + [
                ("except clause", h.body) for h in clauses.handlers]:
            for statement in scoped(block):
                name = appended_name(statement)
                if name in names and name not in dict(found):
                    found.append((name, f"the {kind} at {where(statement).split(': ')[0]}"))
    return tuple(found)


def read_in_step(loop, names):
    """The names of ``names`` a loop's step appends to by a statement of its own and also
    reads (``outs.append(outs[-1] * 0.5 + row)``): not collected (a graph's step sees no
    item an earlier step appended), refused with that reason (``no_outer_lists``)."""
    appended = [appended_name(s) for s in step_statements(loop)]
    return sorted(name for name in names if name in appended and sum(
        1 for n in scoped(loop.body) if isinstance(n, ast.Name) and n.id == name and
        isinstance(n.ctx, ast.Load)) > appended.count(name))


def _own_lists(func):
    """The names the function binds itself (not its parameters, globals, ``nonlocal``
    names or free variables): a list a loop collects is rebound to the collected rows, which
    the caller's list, a global or an enclosing function's would never see."""
    declared = {name for n in scoped(func.body) if isinstance(n, (ast.Global, ast.Nonlocal))
                for name in n.names}
    args = func.args
    parameters = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs,
                                  args.vararg, args.kwarg] if a is not None}
    return assigned_names(func.body) - declared - parameters


def _fresh(value):
    """Whether ``value`` makes a new list no other name holds: a display or comprehension,
    ``list(...)``, a slice (``prefix[:]``), ``.copy()``, ``+`` or ``*`` of lists."""
    if isinstance(value, (ast.List, ast.ListComp)):
        return True
    if isinstance(value, ast.Call):
        return isinstance(value.func, ast.Name) and value.func.id == "list" or \
            isinstance(value.func, ast.Attribute) and value.func.attr == "copy" and \
            not value.args
    if isinstance(value, ast.Subscript):
        return isinstance(value.slice, ast.Slice)
    if isinstance(value, ast.IfExp):
        return _fresh(value.body) and _fresh(value.orelse)
    return isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Mult))


def _made_here(func, name, loop):
    """Whether every binding of ``name`` before ``loop`` is ``name = <a new list>`` with no
    other target: ``outs = self.outs = []``, ``outs = history`` or ``outs = self.cache`` give
    the list another name (or take one that has it), which would keep the list the loop never
    appends to (Python's appends reach it)."""
    for node in scoped(func.body):
        if not hasattr(node, "lineno") or \
                (node.lineno, node.col_offset) >= (loop.lineno, loop.col_offset):
            continue
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            pairs = [(node.target, node.value)]
        else:
            if isinstance(node, ast.Name) and node.id == name and \
                    isinstance(node.ctx, ast.Store) and not _assigned_by_statement(func, node):
                return False    # a for target, with ... as, :=, import, del
            continue
        for target, value in pairs:
            if isinstance(target, (ast.Tuple, ast.List)) and \
                    isinstance(value, (ast.Tuple, ast.List)) and \
                    len(target.elts) == len(value.elts) and \
                    not any(isinstance(e, ast.Starred) for e in target.elts + value.elts):
                pairs_in = list(zip(target.elts, value.elts))
            else:
                pairs_in = [(target, value)]
            for t, v in pairs_in:
                binds = any(isinstance(n, ast.Name) and n.id == name and
                            isinstance(n.ctx, ast.Store) for n in walk(t))
                if binds and not (isinstance(t, ast.Name) and len(pairs) == 1 and _fresh(v)):
                    return False
    return True


def _assigned_by_statement(func, name_node):
    """Whether the store ``name_node`` is a target of an assignment statement (checked by
    :func:`_made_here` itself) or ``op=`` (which changes the list in place)."""
    for node in scoped(func.body):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(name_node is n for t in targets for n in walk(t)):
                return True
    return False


# where a list's name is read without another name, object or container being given the
# list: an item or attribute of it (``outs[0]``, ``outs.append(v)``: the method called),
# its items (``*outs``, ``for o in outs``), ``len(outs)``
def _no_alias(node, parent):
    if isinstance(parent, ast.Subscript) and parent.value is node or \
            isinstance(parent, ast.Starred) or \
            isinstance(parent, (ast.For, ast.comprehension)) and parent.iter is node or \
            isinstance(parent, ast.Compare):
        return True
    return False


def _aliased_before(func, name, loop):
    """Whether ``func`` may give the list ``name`` to another name, object, container or
    call before ``loop`` (``history = outs``, ``helper(outs)``, ``self.trace = outs``,
    ``push = outs.append``): that one would keep the list the loop never appends to."""
    parents = {child: parent for parent in walk(func)
               for child in child_nodes(parent)}
    for node in walk(func):
        if not (isinstance(node, ast.Name) and node.id == name and
                isinstance(node.ctx, ast.Load)) or not hasattr(node, "lineno") or \
                (node.lineno, node.col_offset) >= (loop.lineno, loop.col_offset):
            continue
        parent = parents.get(node)
        if _no_alias(node, parent):
            continue
        call = parents.get(parent) if parent is not None else None
        if isinstance(parent, ast.Attribute) and isinstance(call, ast.Call) and \
                call.func is parent:
            continue            # outs.append(v): the method called, not kept
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and \
                parent.func.id == "len":
            continue
        return True
    return False


def step_statements(loop):
    """The statements a loop's body runs once per step: the body, or for a ``for`` that may
    break, the body of its ``if running(...)`` wrapper (NOTE [autograph jumps])."""
    if isinstance(loop, ast.For) and getattr(loop, "ag_stop", None) and len(loop.body) == 1 \
            and isinstance(loop.body[0], ast.If):
        return loop.body[0].body
    return loop.body


def guarded_append(loop):
    """The block ending a ``for`` loop's step whose last statement is ``name.append(v)`` run
    only while none of the loop's break and return flags is set (the guards the jumps'
    lowering puts after a break: NOTE [autograph lists]), or None."""
    if not isinstance(loop, ast.For) or not getattr(loop, "ag_stop", None):
        return None
    stop, block = set(getattr(loop, "ag_stop")), step_statements(loop)
    guards = 0
    while block and isinstance(block[-1], ast.If) and getattr(block[-1], "ag_guard", False) \
            and not block[-1].orelse and _guard_flags(block[-1]) <= stop:
        block, guards = block[-1].body, guards + 1
    return block if guards and block and appended_name(block[-1]) else None


def _guard_flags(guard):
    """The flags a guard ``if __ag__.running(flag, ...)`` tests."""
    return {a.id for a in getattr(guard.test, "args", []) if isinstance(a, ast.Name)}


def collect_appends(loop, names):
    """Make the appends of the lists ``names`` a loop collects step outputs
    (NOTE [autograph lists]): each ``name.append(value)`` of its step becomes
    ``__agc_name = value``; one ending the step after a break (:func:`guarded_append`)
    becomes ``__agc_name = lambda: value`` first in the step, called by ``for_stmt`` at the
    end of the step and kept where no flag is set. Returns the names and which are kept so."""
    body = step_statements(loop)
    for k, statement in enumerate(body):
        name = appended_name(statement)
        if name in names:
            body[k] = ast.copy_location(ast.Assign(
                targets=[ast.Name(id="__agc_" + name, ctx=ast.Store())],
                value=statement.value.args[0]), statement)
    kept = []
    guarded = guarded_append(loop)
    if guarded is not None and appended_name(guarded[-1]) in names:
        statement = guarded.pop()
        kept.append(appended_name(statement))
        guarded.append(ast.copy_location(ast.Pass(), statement))
        body.insert(0, ast.copy_location(ast.Assign(
            targets=[ast.Name(id="__agc_" + kept[0], ctx=ast.Store())],
            value=thunk(statement.value.args[0])), statement))
    return names, kept


class ListsConverter(Converter):
    """``items[i]`` of a list a loop collects."""

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name) and \
                node.value.id in self.collected_names:
            return ast.copy_location(runtime_call("collected_item", [
                node.value, index_value(node.slice), ast.Constant(self.where(node))]), node)
        if node not in self.parents:
            return node                      # written by the conversion
        # any other subscript: tensors index as NDArrays do (NOTE [autograph indexing])
        if isinstance(node.ctx, ast.Load):
            return ast.copy_location(runtime_call("subscript", [
                node.value, index_value(node.slice), ast.Constant(self.where(node))]), node)
        node.value = runtime_call("item_target", [node.value, ast.Constant(self.where(node))])
        return node


def index_value(index):
    """A subscript's index as an expression (``a:b`` is ``slice(a, b)``, built by the
    runtime's own reference to the builtin: the user may rebind ``slice``)."""
    if isinstance(index, ast.Slice):
        none = ast.Constant(None)
        return ast.copy_location(runtime_call("py_slice", [
            index.lower or none, index.upper or none, index.step or none]), index)
    if isinstance(index, ast.Tuple):
        return ast.copy_location(ast.Tuple(elts=[index_value(e) for e in index.elts],
                                           ctx=ast.Load()), index)
    return index
