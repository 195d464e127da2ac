"""Converts ``break``, ``continue`` and ``return`` (before the other converters run): in
loops they become flag assignments guarding what follows, and the code after an ``if`` that
may return moves into its branches.

NOTE [autograph jumps]
    Before the rewrite of ifs and loops, as TF AutoGraph does: in a loop, ``break``,
    ``continue`` and ``return`` become assignments of flag variables (``__agf_break_N`` ...),
    also inside an ``if``, ``with``, ``try`` or a ``match``'s cases (a ``match`` stays
    Python's); the statements after one run under ``if not flag``; a ``while`` tests ``not flag and
    test`` (``running_and``), a ``for`` runs its later steps as no-ops (a Python iterable
    stops); a ``return`` inside loops becomes ``if flag: return value`` after the outermost
    one, so what ``value`` reads must be a loop variable. Then the statements after an ``if``
    that may return move into the branches that do not, so such an ``if`` returns on every
    path and becomes ``if_return``: ``return cond(...)`` on a tensor. Flags are Python bools
    until a tensor ``if`` or loop carries them, where they become one-element arrays. A
    ``while`` whose test becomes a tensor through a ``break`` under a tensor ``if`` runs its
    first steps as Python and the rest as a graph loop; a ``while True`` carries its flags as
    arrays from the start while tracing (one graph loop). A loop's ``else`` clause runs after
    it under ``if not (break or return flag)`` (unguarded when the loop has neither), a
    tensor ``if`` when the flags are arrays. A ``for`` that unpacks its items keeps its jumps
    as Python. A ``while`` whose test assigns (``while (s := F.sum(h)) < 4:``, with an
    ``else`` or not) tests a variable holding the test's value, assigned before the loop and
    again last in each step unless a break or return flag is set (also after a ``continue``):
    the test runs exactly where Python runs it, and what it assigns is a loop variable with
    Python's value after the loop.
    ``return row, h`` inside a ``for`` over a tensor reads the loop's item after it: the
    loop carries the item (NOTE [autograph loops]). A return inside a ``with`` or ``try``
    in the loop is computed where it returns (``keep_return`` into a box made before the
    outermost loop, ``kept_return`` after it) wherever the loop runs as Python: after the
    loop it would run outside the context manager (``autograd.pause()``: a gradient plain
    Python has not), outside the handler that would catch its error, and after a finally
    that changed what it reads (``log.append(k)``). A graph's step is traced once and
    cannot keep it: there it is computed after the loop, and a return inside a ``try``
    whose ``finally`` (inside the loop) assigns a name the returned value reads is refused
    when it runs (``returned_through_finally``). A jump leaving a ``try``'s body skips its
    ``else`` clause, as in Python: the clause runs under ``if not flag`` of the flags its
    body sets.
"""
import ast
import builtins
import copy
from typing import List, Tuple

from ..pyct.static_analysis.activity import assigned_names, contains, has_walrus, scoped
from ..pyct.static_analysis.definite_assignment import always_returns
from ..pyct.templates import assign_constant, counter, running_test, runtime_call, thunk
from ..pyct.nodes import walk


# Statements whose blocks run code when left (a context manager's exit, a handler, a finally)
_HOLDING = (ast.With, ast.AsyncWith, ast.Try) + tuple(
    getattr(ast, n) for n in ("TryStar",) if hasattr(ast, n))


class _LoopFlags:
    """The flags of one loop whose ``break``/``continue``/``return`` become assignments."""

    def __init__(self, number):
        self.brk, self.cont = f"__agf_break_{number}", f"__agf_continue_{number}"
        self.used_break = self.used_continue = False


def lowerable(loop):
    """Whether a loop's jumps become flags: a ``while``, or a ``for`` over one name."""
    return isinstance(loop, ast.While) or isinstance(loop.target, ast.Name)


def lower_jumps(func):
    """Rewrite ``break``, ``continue`` and ``return`` inside loops into flag variables, then
    move the code after an ``if`` that returns into its branches (NOTE [autograph jumps])."""
    func.body, returns = _lower_block(func.body, None)
    assert not returns          # the outermost loops placed them
    if any(isinstance(n, ast.If) and contains(n, ast.Return) for n in scoped(func.body)):
        if not always_returns(func.body):
            end = func.body[-1]
            func.body.append(ast.copy_location(ast.Return(value=ast.Constant(None)), end))
        func.body = _returns_into_branches(func.body)


def _lower_block(statements, loop, held=False):
    """``statements`` with the jumps belonging to ``loop`` (a _LoopFlags, None outside loops)
    replaced by flag assignments; returns them and the ``(flag, value)`` of each ``return``
    inside a loop that the enclosing loops still have to pass on. ``held``: inside a
    ``with`` or ``try`` in a loop, where a return's value is computed where it returns
    (NOTE [autograph jumps])."""
    out: List[ast.stmt] = []
    returns: List[Tuple[str, ast.expr]] = []
    for statement in statements:
        if isinstance(statement, (ast.While, ast.For)) and lowerable(statement):
            flags = _LoopFlags(next(counter))
            body, inner_returns = _lower_block(statement.body, flags, held)
            stop = ([flags.brk] if flags.used_break else []) + [f for f, _ in inner_returns]
            guards = stop + ([flags.cont] if flags.used_continue else [])
            body = _guard(body, guards)
            if isinstance(statement, ast.While) and has_walrus(statement.test):
                # (with an else clause too: a := in the running_and's function below bound
                # its own name, Python's NameError after a loop with a break and an else)
                body = _test_in_a_variable(statement, body, stop, out)
            if stop and isinstance(statement, ast.For):
                wrapper = ast.If(test=running_test(stop), body=body, orelse=[])
                setattr(wrapper, "ag_guard", True)
                body = [ast.copy_location(wrapper, statement)]
                setattr(statement, "ag_stop", stop)      # for_stmt ends a Python loop by them
            elif stop and isinstance(statement, ast.While):
                statement.test = runtime_call("running_and", [
                    ast.Tuple(elts=[ast.Name(id=f, ctx=ast.Load()) for f in stop],
                              ctx=ast.Load()), thunk(statement.test)])
            if flags.used_continue:   # first, so that it is a step's temporary
                body = [ast.copy_location(assign_constant(flags.cont, False), statement)] + body
            statement.body = body
            # the else clause: after the loop, run unless a break or return left it
            orelse, statement.orelse = statement.orelse, []
            if orelse:
                orelse, inner = _lower_block(orelse, loop, held)
                if stop:
                    guard = ast.If(test=running_test(stop), body=orelse, orelse=[])
                    orelse = [ast.copy_location(guard, orelse[0])]
            # a return's flag starts False once, before the outermost loop it leaves
            out.extend(ast.copy_location(assign_constant(f, False), statement) for f in stop
                       if loop is None or not f.startswith("__agf_return_"))
            if loop is None:          # (and the boxes of values returned inside a with or try)
                out.extend(ast.copy_location(ast.Assign(
                    targets=[ast.Name(id=value.ag_box, ctx=ast.Store())],
                    value=runtime_call("return_box", [])), statement)
                    for _, value in inner_returns if hasattr(value, "ag_box"))
            out.append(statement)
            out.extend(orelse)
            if orelse:
                returns.extend(inner)
            if loop is None:         # the outermost loop: return after it
                for f, value in inner_returns:
                    after = ast.If(test=ast.Name(id=f, ctx=ast.Load()), body=[
                        ast.copy_location(ast.Return(value=value), value)], orelse=[])
                    setattr(after, "ag_loop_return", True)    # messages say so
                    out.append(ast.copy_location(after, value))
            else:
                returns.extend(inner_returns)
        elif isinstance(statement, (ast.While, ast.For, ast.AsyncFor)):
            out.append(statement)    # its jumps stay Python (NOTE [autograph jumps])
        elif loop is not None and isinstance(statement, ast.Break):
            loop.used_break = True
            out.append(ast.copy_location(assign_constant(loop.brk, True), statement))
        elif loop is not None and isinstance(statement, ast.Continue):
            loop.used_continue = True
            out.append(ast.copy_location(assign_constant(loop.cont, True), statement))
        elif loop is not None and isinstance(statement, ast.Return):
            flag = f"__agf_return_{next(counter)}"
            value = statement.value or ast.copy_location(ast.Constant(None), statement)
            if held:
                # inside a with or try: computed here, as Python does, where the loop runs
                # as Python (not after it, outside the context manager or the handler, after
                # the finally); a graph's step keeps it for after the loop
                box = f"__agr_box_{next(counter)}"
                out.append(ast.copy_location(ast.Expr(value=runtime_call("keep_return", [
                    ast.Name(id=box, ctx=ast.Load()), thunk(value)])), statement))
                value = ast.copy_location(runtime_call("kept_return", [
                    ast.Name(id=box, ctx=ast.Load()), thunk(copy.deepcopy(value))]), value)
                setattr(value, "ag_box", box)
            returns.append((flag, value))
            out.append(ast.copy_location(assign_constant(flag, True), statement))
        else:
            # what a finally around a return assigns (NOTE [autograph jumps])
            rebound = {n for n in assigned_names(getattr(statement, "finalbody", None) or [])
                       if not n.startswith("__ag")}
            for field in ("body", "orelse", "finalbody"):
                block = getattr(statement, field, None)
                if isinstance(block, list) and not isinstance(
                        statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    new, inner = _lower_block(block, loop, held or loop is not None and
                                              isinstance(statement, _HOLDING))
                    setattr(statement, field, new)
                    returns.extend(inner if field == "finalbody" else
                                   _through_finally(inner, rebound))
            if isinstance(statement, ast.Try) or type(statement).__name__ == "TryStar":
                for handler in getattr(statement, "handlers", []):
                    handler.body, inner = _lower_block(handler.body, loop,
                                                       held or loop is not None)
                    returns.extend(_through_finally(inner, rebound))
            for case in getattr(statement, "cases", []):      # (a match statement's)
                case.body, inner = _lower_block(case.body, loop, held)
                returns.extend(inner)
            if loop is not None and getattr(statement, "finalbody", None):
                pending = _flags_set(statement.body + statement.orelse + [
                    s for h in getattr(statement, "handlers", []) for s in h.body])
                statement.finalbody = _cancelling(statement.finalbody, pending)
            out.append(statement)
    return out, returns


def _flags_set(block):
    """The jump flags ``block`` (lowered) may set."""
    return {n.targets[0].id for n in walk(ast.Module(body=block, type_ignores=[]))
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and
            isinstance(n.targets[0], ast.Name) and n.targets[0].id.startswith("__agf_") and
            isinstance(n.value, ast.Constant) and n.value.value is True}


def _cancelling(block, pending):
    """A ``finally``'s lowered ``block`` where each jump of its own also clears the flags
    in ``pending`` (those its ``try`` may have set): in Python a jump leaving a ``finally``
    replaces the ``try``'s pending break, continue or return (``finally: continue`` after
    ``return h`` goes on looping). Nested loops' jumps are their own."""
    out: List[ast.stmt] = []
    for statement in block:
        own = _flags_set([statement]) if isinstance(statement, ast.Assign) else set()
        # (cleared before it is set: what follows a flag set runs guarded, NOTE [autograph
        # jumps])
        out.extend(ast.copy_location(assign_constant(f, False), statement)
                   for f in sorted(pending - own) if own)
        out.append(statement)
        if own or isinstance(statement, (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef,
                                         ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(statement, field, None)
            if isinstance(inner, list) and inner:
                setattr(statement, field, _cancelling(inner, pending))
        for part in getattr(statement, "handlers", []) + getattr(statement, "cases", []):
            part.body = _cancelling(part.body, pending)
    return out


def _through_finally(returns, rebound):
    """The ``(flag, value)`` of returns inside a loop, each ``value`` reading a name in
    ``rebound`` (what a ``finally`` between the return and the loop assigns) replaced by the
    refusal ``returned_through_finally`` (its ``file:line`` filled in by the rewrite:
    ``ag_where_needed``): evaluated after the loop, the value would read what the finally
    assigned, where Python returns the value computed before it ran."""
    out = []
    for flag, value in returns:
        kept = value
        if hasattr(value, "ag_box"):   # (what a graph's step evaluates after the loop)
            value = kept.args[1].body
        clash = sorted({n.id for n in walk(value) if isinstance(n, ast.Name)} & rebound)
        # a function the value calls may be a closure reading them (return get())
        callees = sorted({n.func.id for n in walk(value) if isinstance(n, ast.Call) and
                          isinstance(n.func, ast.Name) and not hasattr(builtins, n.func.id)})
        via = ""
        if rebound and callees and not clash:
            clash = sorted(rebound)
            via = " (through " + ", ".join(f"{c}()" for c in callees) + ", which may)"
        if clash:
            value = ast.copy_location(runtime_call("returned_through_finally", [
                ast.Constant(", ".join(repr(n) for n in clash)), ast.Constant(via)]), value)
            setattr(value, "ag_where_needed", True)
        if hasattr(kept, "ag_box"):
            kept.args[1].body = value
            value = kept
        out.append((flag, value))
    return out


def _test_in_a_variable(loop, body, stop, out):
    """A ``while`` whose test assigns (``while (s := F.sum(h)) < 4:``) tests a variable the
    test's value is assigned to before the loop (appended to ``out``) and again at the end
    of each step unless a break or return flag is set (after a ``continue`` too), as Python
    evaluates the test, so the names it assigns are the loop's variables with Python's
    values (NOTE [autograph jumps]); returns the body."""
    name = f"__agw_test_{next(counter)}"
    test, loop.test = loop.test, ast.copy_location(ast.Name(id=name, ctx=ast.Load()), loop.test)
    out.append(ast.copy_location(ast.Assign(
        targets=[ast.Name(id=name, ctx=ast.Store())], value=test), loop))
    again: ast.stmt = ast.copy_location(ast.Assign(
        targets=[ast.Name(id=name, ctx=ast.Store())], value=copy.deepcopy(test)), loop)
    if stop:
        again = ast.copy_location(ast.If(test=running_test(stop), body=[again], orelse=[]),
                                  loop)
        setattr(again, "ag_guard", True)
    return body + [again]


def _guard(block, flags):
    """``block`` with everything after a statement that may set one of ``flags`` run only
    while none is set (in nested blocks too)."""
    if not flags:
        return block
    for k, statement in enumerate(block):
        if not isinstance(statement, (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef,
                                      ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):    # if, with, try
                inner = getattr(statement, field, None)
                if isinstance(inner, list) and inner:
                    setattr(statement, field, _guard(inner, flags))
            for part in getattr(statement, "handlers", []) + getattr(statement, "cases", []):
                part.body = _guard(part.body, flags)
            left = sorted(assigned_names(statement.body) & set(flags)) if isinstance(
                statement, _HOLDING[2:]) and statement.orelse else []
            if left:
                # a try's else runs only where its body ran to its end (no jump left it)
                guard = ast.If(test=running_test(left), body=statement.orelse, orelse=[])
                setattr(guard, "ag_guard", True)
                statement.orelse = [ast.copy_location(guard, statement.orelse[0])]
        set_here = sorted(assigned_names([statement]) & set(flags))
        if set_here and k + 1 < len(block):
            rest = _guard(block[k + 1:], flags)
            guard = ast.If(test=running_test(set_here), body=rest, orelse=[])
            setattr(guard, "ag_guard", True)      # not the user's if: messages say so
            return block[:k + 1] + [ast.copy_location(guard, block[k + 1])]
    return block


def _returns_into_branches(block):
    """Move the statements after an ``if`` that may return into those of its branches that
    do not always return, so that every such ``if`` returns on every path."""
    for k, statement in enumerate(block):
        if isinstance(statement, ast.If) and contains(statement, ast.Return):
            rest = block[k + 1:]
            for field in ("body", "orelse"):
                branch = getattr(statement, field)
                if not always_returns(branch):
                    branch = branch + copy.deepcopy(rest)
                setattr(statement, field, _returns_into_branches(branch))
            return block[:k + 1]
    return block
