"""Converts ``while`` and ``for`` statements into ``while_stmt`` and ``for_stmt`` (or a
checked Python loop where the body does what a graph cannot): their carried variables, bound
and collected lists (NOTE [autograph loops])."""
import ast

from ..pyct.static_analysis.activity import (MUTATORS, assigned_names, free_names,
                                             has_walrus, in_scope, loaded_names, mutated_names)
from ..pyct.templates import counter, located, names_tuple, runtime_call, unpacked_levels
from .base import Converter, body_does, not_a_graph
from .lists import appended_in_clauses, collect_appends, read_in_step
from ..pyct.nodes import walk


def unpacked_targets(func):
    """Each ``for a, b in it:`` of ``func`` (a target of names, nested tuples or lists of
    names; no ``*rest``) as ``for __agu_N in it: a, b = __agu_N`` (the same Python), the
    loop marked with the target's structure (``ag_unpack``: a tuple, per item ``None`` for a
    name or the structure of a nested target) for ``for_stmt`` to give a graph's steps their
    rows' items (NOTE [autograph unpacking loops])."""
    for loop in [n for n in walk(func) if isinstance(n, (ast.For, ast.AsyncFor))]:
        structure = _structure(loop.target)
        if isinstance(loop, ast.AsyncFor) or not isinstance(structure, tuple):
            continue
        name = f"__agu_{next(counter)}"
        located_at = loop.target
        loop.body[:0] = unpacked_levels(loop.target, name, located_at)
        loop.target = ast.copy_location(ast.Name(id=name, ctx=ast.Store()), located_at)
        setattr(loop, "ag_unpack", structure)


def _structure(target):
    """None for a name, a tuple of the items' structures for a tuple or list of them, else
    False (``*rest``, an attribute or item target: left as written)."""
    if isinstance(target, ast.Name):
        return None
    if isinstance(target, (ast.Tuple, ast.List)):
        items = tuple(_structure(t) for t in target.elts)
        return items if items and all(i is not False for i in items) else False
    return False


def is_forever(test):
    """Whether a (lowered) while condition is ``running_and(flags, lambda: <constant>)``."""
    return isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and \
        test.func.attr == "running_and" and isinstance(test.args[1], ast.Lambda) and \
        isinstance(test.args[1].body, ast.Constant) and bool(test.args[1].body.value)


# NOTE [a while True ended only by Python]
#     A ``while True`` whose break or return flags are set under an ``if`` of the user's runs as
#     one graph loop from the start while tracing (``while_stmt``'s ``forever``): the ``if``
#     may test a tensor. Where every break or return is set outside any ``if`` or ``match``
#     (``try: r = next(it) / except StopIteration: break`` over a traced input's rows, which
#     ``iter`` gives as a Python list's), Python alone ends the loop: it runs as Python's
#     steps, as eagerly (as a graph loop it carried ``r``, which has no value before it, and
#     consumed the Python iterator once, while tracing).


def _flag_under_user_if(body, flags):
    """Whether a flag of ``flags`` (the break and return flags ending the lowered loop of
    ``body``) is set under an ``if`` or ``match`` of the user's (not a guard the lowering
    added, whose test reads flags only) or inside a loop nested in it (a nested function's
    flags are its own; a nested loop's break and continue flags too)."""
    pending = [(statement, False) for statement in body]
    while pending:
        node, under = pending.pop()
        if isinstance(node, ast.Assign) and under and any(
                isinstance(t, ast.Name) and t.id in flags for t in node.targets):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        user_if = isinstance(node, (ast.Match, ast.IfExp)) or isinstance(node, ast.If) and \
            not all(n.id == "__ag__" or n.id.startswith("__agf_") for n in ast.walk(node.test)
                    if isinstance(n, ast.Name))
        pending.extend((child, under or user_if or isinstance(node, (ast.While, ast.For)))
                       for child in ast.iter_child_nodes(node))
    return False


def _changed_after_break(body, names):
    """The first statement of a loop's ``body`` changing one of ``names`` by a method call
    after a jump (inside the ``if`` guarding what follows a ``break``, NOTE [autograph
    jumps]; not in a nested loop), or None."""
    pending = list(body)
    while pending:
        statement = pending.pop(0)
        if isinstance(statement, (ast.For, ast.While, ast.FunctionDef, ast.AsyncFunctionDef,
                                  ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(statement, ast.If) and getattr(statement, "ag_guard", False):
            for inner in walk(ast.Module(body=statement.body, type_ignores=[])):
                if isinstance(inner, ast.stmt) and not isinstance(inner, ast.If) and \
                        mutated_names([inner]) & names:
                    return inner
        pending.extend(child for child in ast.iter_child_nodes(statement)
                       if isinstance(child, ast.stmt))
    return None


class LoopsConverter(Converter):
    """``while`` and ``for`` statements."""

    def _loop_bound(self, node):
        """The ``gluon_cf.max_iterations(N)`` hint first in ``node``'s body (removed), or the
        decorator's default."""
        first = node.body[0] if node.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Call):
            func = first.value.func
            name = func.attr if isinstance(func, ast.Attribute) else \
                func.id if isinstance(func, ast.Name) else None
            if name == "max_iterations" and len(first.value.args) == 1:
                node.body = node.body[1:] or [ast.Pass()]
                return first.value.args[0], True
        return ast.Constant(self.max_iterations), False

    def visit_While(self, node):
        # (before the ifs inside are converted: NOTE [a while True ended only by Python])
        forever = is_forever(node.test) and _flag_under_user_if(
            node.body, {f.id for f in node.test.args[0].elts if isinstance(f, ast.Name)})
        mutated = mutated_names(node.body) - set(self.collected.get(node, []))
        read = read_in_step(node, mutated)       # (on the body as written)
        clauses = appended_in_clauses(node, mutated, self.where)
        after_break = _changed_after_break(node.body, mutated) if forever else None
        self.generic_visit(node)
        where = self.where(node)
        # (a while True, a tensor loop by its breaks under tensor ifs, changing a list after
        # one: that statement named, as an if's check names it, not the loop's line)
        node.test = self._no_outer_lists(node.test, mutated, where, "while loop", read,
                                         clauses) \
            if after_break is None else self._no_outer_lists(
                node.test, mutated, self.where(after_break),
                "code after a break, continue or return", read)
        # the else clause first: it keeps the loop's break as Python (NOTE [autograph jumps])
        why = ("it has an else clause" if node.orelse else None) or \
            body_does(not_a_graph(node.body)) or \
            ("it assigns in its condition (:=)" if has_walrus(node.test) else None)
        if why:
            node.test = runtime_call("python_loop", [
                node.test, ast.Constant(where), ast.Constant(why), ast.Constant("while")])
            return node
        bound, hinted = self._loop_bound(node)
        number = next(counter)
        lists, _ = collect_appends(node, self.collected.get(node, []))
        names = self._carried(node, loaded_names(node.test))
        out = names_tuple(names + ["__agc_" + n for n in lists])
        cells = self._scope(node).cells
        test_fn = self._loop_function(f"__ag_test_{number}", names, [], node.test, cells)
        body_fn = self._loop_function(f"__ag_body_{number}", names, node.body, out, cells)
        call = runtime_call("while_stmt", [
            ast.Name(id=test_fn.name, ctx=ast.Load()), ast.Name(id=body_fn.name, ctx=ast.Load()),
            self._current(names, where),
            ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load()),
            ast.Constant(where), bound, self._current(lists, where), ast.Constant(hinted),
            ast.Constant(forever), self._names(lists)])
        call.keywords.append(self._only_handlers_read(node, names, loaded_names(node.test)))
        statements = [test_fn, body_fn, self._escaping(self._assign(names + lists, call),
                                                       names + lists, number)]
        return located(statements, node)

    def visit_For(self, node):
        iterable = node.iter
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and \
                iterable.func.id == "reversed" and len(iterable.args) == 1 and \
                not iterable.keywords and node in self.parents:
            # for row in reversed(x): the rows of x reversed (NOTE [autograph iteration])
            node.iter = ast.copy_location(runtime_call("reversed_rows", [
                iterable.func, iterable.args[0]]), iterable)
        mutated = mutated_names(node.body) - set(self.collected.get(node, []))
        read = read_in_step(node, mutated)
        clauses = appended_in_clauses(node, mutated, self.where)
        # (on the body as written, before it converts)
        one_step = isinstance(node.target, ast.Name) and \
            self._closures_of_one_step(node, node.target.id)
        # (inside the running() wrapper: before it converts)
        lists, kept = collect_appends(node, self.collected.get(node, []))
        self.generic_visit(node)
        where = self.where(node)
        if isinstance(node.iter, ast.Name):       # for w in gen: (an iterator from outside)
            node.iter = self._consumed(node.iter, node)
        node.iter = self._no_outer_lists(node.iter, mutated, where, "for loop", read,
                                         clauses)
        why = ("it has an else clause" if node.orelse else None) or \
            body_does(not_a_graph(node.body)) or \
            (None if isinstance(node.target, ast.Name) else "it unpacks its items")
        if why:
            node.iter = runtime_call("python_loop", [
                node.iter, ast.Constant(where), ast.Constant(why), ast.Constant("for")])
            return node
        number = next(counter)
        item = node.target.id
        names = self._carried(node, set(), exclude={item})
        out = names_tuple(names + ["__agc_" + n for n in lists])
        cells = self._scope(node).cells
        body_fn = self._loop_function(f"__ag_body_{number}", [item] + names, node.body, out,
                                      cells)
        # (a closure reads it: a cell, live; but not a closure that lives in one step)
        keep_item = item in self.live[node] and not (
            item not in self.read_after[node] and one_step)
        call = runtime_call("for_stmt", [
            node.iter, ast.Name(id=body_fn.name, ctx=ast.Load()), self._current(names, where),
            ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load()),
            ast.Constant(where),
            self._current([item], where) if keep_item else ast.Constant(None),
            self._current(lists, where),
            ast.Tuple(elts=[ast.Constant(f) for f in getattr(node, "ag_stop", [])],
                      ctx=ast.Load()),
            ast.Tuple(elts=[ast.Constant(n in kept) for n in lists], ctx=ast.Load()),
            self._names(lists),
            ast.Constant(keep_item and item not in cells and self._read_by_returns(node, item)),
            ast.Constant(getattr(node, "ag_unpack", None))])
        call.keywords.append(self._only_handlers_read(node, names))
        bound_names = names + lists + ([item] if keep_item else [])
        statements = [body_fn, self._escaping(self._assign(bound_names, call), bound_names,
                                              number)]
        return located(statements, node)

    def _read_by_returns(self, node, item):
        """Whether the for loop ``node``, a statement of the function's own body, has its
        ``item`` read after it only by the ``if flag: return value`` its returns became
        (NOTE [autograph jumps]): ``return row, h`` inside it, which a graph's loop carries
        (the row of the step that returned; ``control_flow.for_stmt``)."""
        flags = {f for f in getattr(node, "ag_stop", []) if f.startswith("__agf_return_")}
        parent = self.parents.get(node)
        if not flags or not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
                node not in parent.body:
            return False

        def reads(statements):
            for statement in statements:
                if isinstance(statement, ast.If) and isinstance(statement.test, ast.Name) and \
                        statement.test.id in flags:
                    if reads(statement.orelse):
                        return True
                    continue
                if any(isinstance(n, ast.Name) and n.id == item
                       for n in walk(statement)):
                    return True
            return False
        return not reads(parent.body[parent.body.index(node) + 1:])

    def _closures_of_one_step(self, node, item):
        """Whether every closure reading the for loop ``node``'s ``item`` is made in its body
        and used there only: a lambda or generator expression passed to a call (not kept by a
        container's method: ``sum(w * r for w in ws)``), or a lambda or def whose name is only
        called, in the body (NOTE [autograph closures]).
        Then each reads the step's item, as in Python, and none outlives the step."""
        scope = self._scope(node)
        inside = {id(n) for statement in node.body for n in walk(statement)}
        readers = [c for c in scope.closures if item in free_names(c)]
        own = {id(n) for n in in_scope(self._function_of(node).body)[0]}
        for closure in readers:
            if id(closure) not in inside or isinstance(closure, ast.ClassDef):
                return False
            parent, argument = self.parents.get(closure), closure
            if isinstance(parent, ast.Starred):     # f(*(r * w for w in ws))
                parent, argument = self.parents.get(parent), parent
            if isinstance(closure, (ast.Lambda, ast.GeneratorExp)) and \
                    isinstance(parent, ast.Call) and \
                    argument in parent.args + [k.value for k in parent.keywords]:
                if isinstance(parent.func, ast.Attribute) and \
                        parent.func.attr in MUTATORS | {"__setitem__"}:
                    return False
                continue
            if isinstance(closure, ast.GeneratorExp):
                return False        # (kept: a later step would read the row it moved to)
            if isinstance(closure, ast.Lambda):
                if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and
                        isinstance(parent.targets[0], ast.Name)):
                    return False
                name = parent.targets[0].id
            else:
                name = closure.name
            for use in walk(self.func):
                if isinstance(use, ast.Name) and use.id == name and \
                        isinstance(use.ctx, ast.Load) and not (
                            id(use) in inside and id(use) in own and
                            isinstance(self.parents.get(use), ast.Call) and
                            getattr(self.parents[use], "func", None) is use):
                    return False
        return True

    def _function_of(self, node):
        parent = self.parents.get(node)
        while parent is not None and not isinstance(parent, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef)):
            parent = self.parents.get(parent)
        return parent if parent is not None else self.func

    def _carried(self, node, read_by_test, exclude=()):
        """A loop's variables: what its body assigns and the test reads, a step reads before
        assigning (carried to the next step), or the code after the loop reads. The body's
        other names are temporaries of one step."""
        assigned = (assigned_names(node.body) | self._scope(node).written_by_calls(
            node.body + [ast.Expr(value=getattr(node, "test", ast.Constant(None)))])) - \
            set(exclude)
        wanted = read_by_test | self.exposed[node] | self.live[node]
        self._record_readers(node, assigned & wanted)
        return sorted(assigned & wanted)

    def _only_handlers_read(self, node, names, read_by_test=frozenset()):
        """The keyword ``optional=(...)``: which of ``names`` only the handlers of a try
        around ``node`` read (NOTE [what only a handler reads])."""
        only = self.handler_only[node] - self._scope(node).cells - read_by_test - \
            self.exposed.get(node, set())
        return ast.keyword(arg="optional", value=ast.Tuple(
            elts=[ast.Constant(n) for n in names if n in only], ctx=ast.Load()))
