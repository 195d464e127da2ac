"""Liveness: the names a block may read before assigning them, and the names read after a
statement (by what follows it in its block and the enclosing ones, and by the next step of
every enclosing loop)."""
import ast
from typing import Set

from .activity import assigned_names, captured_names, loaded_names, walrus_bound
from .aliases import frame_reads
from .definite_assignment import definitely_assigned, match_assigned, try_assigned, \
    with_assigned
from ..nodes import child_nodes, walk


def exposed_names(statements, memo=None):
    """Names ``statements`` may read before assigning them (in order; what a nested block or
    one branch assigns does not count as assigned). ``memo``: a dict the caller keeps while
    the tree does not change, so a statement is analysed once."""
    # (NOTE [conversion speed])
    exposed: Set[str] = set()
    assigned: Set[str] = set()
    for statement in statements:
        if memo is None:
            reads, assigns = _effect(statement, None)
        else:
            entry = memo.get(id(statement))
            if entry is None or entry[0] is not statement:
                entry = memo[id(statement)] = (statement, *_effect(statement, memo))
            reads, assigns = entry[1], entry[2]
        exposed |= reads - assigned
        assigned |= assigns
    return exposed


def _effect(statement, memo):
    """What ``statement`` may read before assigning (``exposed``) and what it surely assigns
    (``assigned``): :func:`exposed_names` folds these over a block."""
    exposed: Set[str] = set()
    assigned: Set[str] = set()
    if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)):
        value = getattr(statement, "value", None)
        reads = loaded_names(value) if value is not None else set()
        targets = getattr(statement, "targets", None) or \
            [getattr(statement, "target", None)]
        for target in filter(None, targets):
            reads |= loaded_names(target)        # a[i] = ... reads a and i
        if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
            reads.add(statement.target.id)  # x += 1 reads x
        exposed |= reads - assigned
        assigned |= assigned_names([statement])
    elif isinstance(statement, ast.If):     # assigns what both branches assign
        # (if (s := F.sum(r)) > 0: the branches read the s the test binds)
        exposed |= (loaded_names(statement.test) | (
            exposed_names(statement.body, memo) | exposed_names(statement.orelse, memo)) -
            walrus_bound(statement.test)) - assigned
        assigned |= definitely_assigned(statement) | walrus_bound(statement.test)
    elif isinstance(statement, ast.While):
        exposed |= (loaded_names(statement.test) | (
            exposed_names(statement.body, memo) | exposed_names(statement.orelse, memo)) -
            walrus_bound(statement.test)) - assigned
        assigned |= walrus_bound(statement.test)
    elif isinstance(statement, ast.For):    # its body reads its item after assigning it
        exposed |= (loaded_names(statement.iter) | exposed_names(statement.body, memo) -
                    assigned_names([statement.target]) |
                    exposed_names(statement.orelse, memo)) - assigned
    elif isinstance(statement, ast.Try):
        # a handler or the finally clause may run after any part of the body
        exposed |= (exposed_names(statement.body + statement.orelse, memo) |
                    exposed_names(statement.finalbody, memo) |
                    set().union(*[exposed_names(h.body, memo) | loaded_names(h.type or ast.Pass())
                                  for h in statement.handlers])) - assigned
        assigned |= try_assigned(statement)
    elif isinstance(statement, ast.Match):  # its subject, then a case's pattern, guard, body
        reads = loaded_names(statement.subject)
        for case in statement.cases:
            bound = captured_names(list(walk(case.pattern)))
            reads |= loaded_names(case.pattern) | (
                (loaded_names(case.guard or ast.Pass()) |
                 exposed_names(case.body, memo)) - bound)
        exposed |= reads - assigned
        assigned |= match_assigned(statement)
    elif isinstance(statement, ast.With):   # its items, then its body, in order
        exposed |= (set().union(*[loaded_names(item.context_expr)
                                  for item in statement.items]) |
                    exposed_names(statement.body, memo)) - assigned
        assigned |= with_assigned(statement)
    elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        # a def reads its decorators and defaults (and bases) where written, binds its
        # name; its body reads when called (a closure's variables are cells: NOTE
        # [autograph closures])
        heads = list(statement.decorator_list)
        if isinstance(statement, ast.ClassDef):
            heads += list(statement.bases) + [k.value for k in statement.keywords]
        else:
            heads += list(statement.args.defaults) + [
                d for d in statement.args.kw_defaults if d is not None]
        exposed |= set().union(*[loaded_names(h) for h in heads]) - assigned
        assigned.add(statement.name)
    else:
        exposed |= loaded_names(statement) - assigned


    return exposed, assigned


_TRIES = (ast.Try, ast.TryStar)

# NOTE [what only a handler reads]
#     The handlers of a try read their variables after any statement of its body (an
#     exception may leave there), so a tensor loop or if in the body carries what they read
#     (NOTE [an index error the user's try catches]). A variable that only they read, with no
#     value before the loop (``try: for r in x: t = r * 2; h = h + t`` / ``except
#     ValueError: h = h + t``), or that a branch of the if may leave unassigned, needs none
#     where no exception leaves: the graph's loop or if does not carry it (``optional`` of
#     ``for_stmt``, ``while_stmt``, ``if_stmt``). Where an exception leaves the loop's first
#     step re-run as Python it holds what that step left (NOTE [an exception leaving a
#     loop]); read by a handler after an exception raised past the loop or if, it is an
#     ``Undefined`` saying why (refused: plain Python's holds what the loop left). Read
#     otherwise after it, it is carried (and refused without a value before it), as before.


def live_after(node, parents, func, memo=None, handlers=True):
    """Names read after ``node`` before being assigned: by the following statements of its
    block and of every enclosing block, and by the next step of every enclosing loop.
    ``parents``: each node's parent in ``func``, the function being converted; ``memo``: as
    :func:`exposed_names`'s. Without ``handlers``: not counting the handlers of the tries
    around it (what only they read needs no value where no exception leaves: NOTE [what only
    a handler reads])."""
    names, child = set(), node
    parent = parents.get(child)
    while parent is not None and child is not func:
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and child in block:
                names |= exposed_names(block[block.index(child) + 1:], memo)
        if isinstance(parent, _TRIES) and child in parent.body:
            # the else clause runs after the body (it was left out: a loop in the body did
            # not carry what only the else read, eagerly too)
            names |= exposed_names(parent.body[parent.body.index(child) + 1:] + parent.orelse,
                                    memo)
        if handlers and isinstance(parent, _TRIES) and child in parent.body:
            # an exception leaving any part of a try's body runs its handlers, then its
            # finally (NOTE [an exception leaving a loop]: the variables are carried out)
            names |= set().union(*[exposed_names(h.body, memo) - {h.name} |
                                   loaded_names(h.type or ast.Pass())
                                   for h in parent.handlers])
        if isinstance(parent, _TRIES) and child not in parent.finalbody:
            names |= exposed_names(parent.finalbody, memo)
        if isinstance(parent, (ast.For, ast.While, ast.AsyncFor)):   # the next step
            names |= exposed_names(parent.body, memo) | \
                loaded_names(getattr(parent, "test", None) or ast.Pass())
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            break
        child, parent = parent, parents.get(parent)
    # a global or nonlocal name is read after the function returns (a nested function's loop
    # assigning its enclosing function's variable: nonlocal n; for n in items)
    function = node
    while function is not None and not isinstance(function, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef)):
        function = parents.get(function)
    if function is not None:
        if memo is None:
            names |= _read_after_return(function)
        else:
            entry = memo.get(("function", id(function)))
            if entry is None or entry[0] is not function:
                entry = memo[("function", id(function))] = \
                    (function, _read_after_return(function))
            names |= entry[1]
    return names


def _read_after_return(function):
    """What :func:`live_after` adds for any node of ``function``: its globals and nonlocals,
    and every variable when it reads its frame."""
    names: Set[str] = set()
    if frame_reads(function):
        # (locals()["g"], eval("g"): any variable is read there, with no name of it in the
        # syntax: NOTE [a frame's dict shares every variable])
        args = function.args
        names |= assigned_names(function.body) | {
            a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    stack: list = list(function.body)
    while stack:
        statement = stack.pop()
        if isinstance(statement, (ast.Global, ast.Nonlocal)):
            names |= set(statement.names)
        elif not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef,
                                        ast.ClassDef, ast.Lambda)):
            stack.extend(child_nodes(statement))
    return names
