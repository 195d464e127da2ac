"""What every converter shares: :class:`Converter`, the transformer base holding the analysis
of the function being converted (parents, scopes, liveness, collected lists), the user's lines
for messages, and the branch and loop functions the rewrite makes; and why a block cannot be a
graph's branch or step."""
import ast
import linecache
from typing import Dict, List, Optional, Set

from ..errors import READERS
from ..pyct.static_analysis.activity import Scope, assigned_names, scoped
from ..pyct.static_analysis.aliases import reads_its_frame
from ..pyct.static_analysis.reaching import Position, position
from ..pyct.nodes import node_fields, walk
from ..pyct.templates import runtime_call, thunk



_NOT_A_GRAPH = (ast.Return, ast.Break, ast.Continue, ast.Yield, ast.YieldFrom, ast.Global,
                ast.Nonlocal)


def not_a_graph(statements, allow_return=False):
    """Why these branches cannot become a cond's (None if they can)."""
    for node in scoped(statements):
        if isinstance(node, ast.Return) and allow_return:
            continue
        if isinstance(node, _NOT_A_GRAPH):
            return "use %s" % type(node).__name__.lower()
        if getattr(node, "ag_item_assignment", False):
            return "assign attributes or items"     # (x[i] = v, rewritten as x = ...)
        if getattr(node, "ag_reads_frame", False) or reads_its_frame(node):
            # (a branch or step made a function sees no variable of the user's by name:
            # eval("h") there was a NameError; NOTE [a frame's dict shares every variable])
            return "read variables by name (eval, exec, locals() or vars())"
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for part in walk(target):
                    if isinstance(part, (ast.Attribute, ast.Subscript)) and \
                            isinstance(part.ctx, ast.Store):
                        return "assign attributes or items"
    return None


def body_does(why):
    """``why`` (what branches do, from not_a_graph) said of one loop body."""
    if why is None:
        return None
    verb, rest = why.split(" ", 1)
    return f"its body {verb}s {rest}"


class Converter(ast.NodeTransformer):
    """The base of the converters: one function's analysis, shared by the passes of its
    conversion (NOTE [autograph])."""

    def __init__(self, filename: str, line_offset: int, lines: List[str], owner: Optional[str],
                 max_iterations: Optional[int] = None):
        self.filename, self.offset, self.lines, self.owner = filename, line_offset, lines, owner
        self.max_iterations = max_iterations
        self.parents: Dict[ast.AST, ast.AST] = {}
        # filled by the driver before the converters run (impl/conversion.py)
        self.func: ast.FunctionDef
        self.scopes: Dict[ast.AST, Scope] = {}
        self.self_name: Optional[str] = None
        self.collected: Dict[ast.AST, List[str]] = {}     # loop -> the lists it collects
        self.collected_names: Set[str] = set()
        self.live: Dict[ast.AST, Set[str]] = {}           # if or loop -> names read after it
        self.read_after: Dict[ast.AST, Set[str]] = {}     # ... by code, not closures
        self.exposed: Dict[ast.AST, Set[str]] = {}        # loop -> names its body reads first
        # ... read after it only by the handlers of a try around it (what the code after it,
        # a closure or its next step reads is not: NOTE [what only a handler reads])
        self.handler_only: Dict[ast.AST, Set[str]] = {}
        self.shared: Dict[ast.AST, Dict[str, ast.AST]] = {}   # function -> shared_arrays
        self.given: Dict[ast.AST, Dict[str, List[ast.stmt]]] = {}   # -> given_to_calls
        self.augmented: Dict[Position, Optional[ast.AST]] = {}   # op= -> why refused

    def generic_visit(self, node):
        """``ast.NodeTransformer.generic_visit``, reading only the fields that may hold
        nodes."""
        # (NOTE [conversion speed])
        for field in node_fields(node.__class__):
            old_value = getattr(node, field, None)
            if isinstance(old_value, list):
                new_values = []
                for value in old_value:
                    if isinstance(value, ast.AST):
                        value = self.visit(value)
                        if value is None:
                            continue
                        if not isinstance(value, ast.AST):
                            new_values.extend(value)
                            continue
                    new_values.append(value)
                old_value[:] = new_values
            elif isinstance(old_value, ast.AST):
                new_node = self.visit(old_value)
                if new_node is None:
                    delattr(node, field)
                else:
                    setattr(node, field, new_node)
        return node

    def where(self, node):
        line = node.lineno + self.offset
        text = linecache.getline(self.filename, line).strip() or \
            (self.lines[node.lineno - 1].strip() if node.lineno - 1 < len(self.lines) else "")
        return f"{self.filename}:{line}: {text}"

    def shared_array(self, function, name, node):
        """What else may hold the array of ``function``'s variable ``name`` (NOTE [autograph
        augmented assignment]), said for the message of ``node``'s ``op=``; None if nothing."""
        if isinstance(node, ast.AugAssign) and position(node) in self.augmented:
            # (what reaches it: pyct/static_analysis/reaching.py)
            found = self.augmented[position(node)]
        else:
            found = self.shared.get(function, {}).get(name)
        if found is None:
            return None
        if found is function:
            return f"{name!r} is a parameter (the caller holds its array)"
        if isinstance(found, (ast.Global, ast.Nonlocal)):
            return f"{name!r} is {type(found).__name__.lower()} (another scope holds it)"
        if isinstance(found, (ast.For, ast.AsyncFor, ast.comprehension, ast.withitem)):
            line = getattr(found, "lineno", None) or node.lineno
            return f"{name!r} is an item of what the loop or with at " \
                f"{self.filename}:{line + self.offset} holds"
        return f"{name!r} may hold an array something else holds too " \
            f"({self.where(found)})"

    def _record_readers(self, node, names):
        """Remember, for the messages about ``names`` at ``node``, the closures that read
        them (NOTE [autograph closures])."""
        scope, where = self._scope(node), self.where(node)
        for name in names:
            closure = scope.readers.get(name)
            if closure is not None:
                kind = {ast.Lambda: "the lambda", ast.GeneratorExp: "the generator expression"
                        }.get(type(closure)) or \
                    f"the {'class' if isinstance(closure, ast.ClassDef) else 'function'} " \
                    f"{closure.name!r}"
                READERS[(where, name)] = \
                    f"{kind} at {self.filename}:{closure.lineno + self.offset}"

    def _consumed(self, value, node):
        """``value`` (a Name ``node`` reads all items of: a builtin's argument, a for's
        iterable), checked at run time when no loop or if around ``node`` makes it: a Python
        iterator made outside a graph region and consumed inside is an error
        (``operators.consumed``)."""
        if self._made_in_its_loop(node, value.id):
            return value
        return ast.copy_location(runtime_call("consumed", [
            value, ast.Constant(self.where(node)), ast.Constant(value.id)]), value)

    def _made_in_its_loop(self, node, name):
        """Whether ``name`` is assigned in the innermost loop or if (the user's) around
        ``node`` (a for's iterable and an if's test are outside theirs): an iterator made in
        the step or branch and read there (each makes its own), or with none around it, one
        made and read outside any."""
        child, parent = node, self.parents.get(node)
        while parent is not None and not isinstance(parent, (
                ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            outside = child is getattr(parent, "iter" if isinstance(parent, ast.For) else
                                       "test", None) and not isinstance(parent, ast.While)
            if not outside and (isinstance(parent, (ast.For, ast.While)) or isinstance(
                    parent, ast.If) and not getattr(parent, "ag_guard", False)):
                return name in assigned_names(parent.body + parent.orelse)
            child, parent = parent, self.parents.get(parent)
        return True

    def _scope(self, node):
        """The Scope of the function ``node`` (of the code as written) is in."""
        parent = self.parents.get(node)
        while parent is not None and not isinstance(parent, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef, ast.Lambda)):
            parent = self.parents.get(parent)
        return self.scopes[parent if parent is not None else self.func]

    def _loop_function(self, name, params, body, returned, cells=()):
        """``def name(*params): body; return returned`` (a branch, a loop's test or body).
        A parameter that is one of ``cells`` (a variable closures read) stays the enclosing
        function's variable: ``nonlocal v; v = __agv_v`` (NOTE [autograph closures])."""
        shared = [n for n in params if n in cells]
        start = [ast.Nonlocal(names=shared)] + [
            ast.Assign(targets=[ast.Name(id=n, ctx=ast.Store())],
                       value=ast.Name(id="__agv_" + n, ctx=ast.Load())) for n in shared] \
            if shared else []
        return ast.FunctionDef(
            name=name, args=ast.arguments(
                posonlyargs=[], args=[ast.arg(arg="__agv_" + n if n in shared else n)
                                      for n in params], vararg=None,
                kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
            body=start + list(body) + ([] if returned is None else [ast.Return(value=returned)]),
            decorator_list=[], returns=None)

    def _current(self, names, where):
        return ast.Tuple(elts=[
            runtime_call("ld", [thunk(ast.Name(id=n, ctx=ast.Load())), ast.Constant(n),
                                ast.Constant(where)]) for n in names],
            ctx=ast.Load())

    def _no_outer_lists(self, value, names, where, what, read=(), clauses=()):
        """``value`` (a condition or iterable), checked at run time: when it is a Symbol, the
        lists, dicts and sets the region mutates by method calls must not come from outside
        it (NOTE [autograph lists]); ``read``: those a loop's step appends to and reads;
        ``clauses``: (name, clause) of those it appends to in a try's finally or except."""
        if not names:
            return value
        names = sorted(names)
        return runtime_call("no_outer_lists", [
            value, ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load()),
            self._current(names, where), ast.Constant(where), ast.Constant(what),
            ast.Tuple(elts=[ast.Constant(n) for n in read], ctx=ast.Load()),
            ast.Tuple(elts=[ast.Tuple(elts=[ast.Constant(n), ast.Constant(c)], ctx=ast.Load())
                            for n, c in clauses], ctx=ast.Load())])

    @staticmethod
    def _names(names):
        return ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load())

    @staticmethod
    def _escaping(statement, names, number):
        """``try: statement / except BaseException as e: <rebind names>; raise``: the
        variables an exception leaving the loop (or if) carries (NOTE [an exception leaving a
        loop])."""
        if not names:
            return statement
        caught, carried = f"__ag_exc_{number}", f"__ag_esc_{number}"
        rebind = [ast.If(
            test=ast.Compare(left=ast.Constant(n), ops=[ast.In()],
                             comparators=[ast.Name(id=carried, ctx=ast.Load())]),
            body=[ast.Assign(targets=[ast.Name(id=n, ctx=ast.Store())],
                             value=ast.Subscript(value=ast.Name(id=carried, ctx=ast.Load()),
                                                 slice=ast.Constant(n), ctx=ast.Load()))],
            orelse=[]) for n in names]
        handler = ast.ExceptHandler(
            type=ast.Name(id="BaseException", ctx=ast.Load()), name=caught,
            body=[ast.Assign(targets=[ast.Name(id=carried, ctx=ast.Store())],
                             value=runtime_call("escaped", [ast.Name(id=caught,
                                                                     ctx=ast.Load())]))] +
            rebind + [ast.Raise(exc=None, cause=None)])
        escaping = ast.Try(body=[statement], handlers=[handler], orelse=[], finalbody=[])
        setattr(escaping, "ag_escaping", True)     # (returns if its statement does)
        return escaping

    @staticmethod
    def _assign(names, call):
        if not names:
            return ast.Expr(value=call)
        target = ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Store()) for n in names],
                           ctx=ast.Store())
        return ast.Assign(targets=[target], value=call)
