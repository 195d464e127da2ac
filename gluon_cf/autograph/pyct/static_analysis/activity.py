"""Activity analysis of a function's syntax tree: which names its statements assign and read,
what each function scope binds, what its closures read and write (:class:`Scope`), and which
objects may come from outside a call.

NOTE [autograph closures]
    Nested functions, lambdas, classes (their methods) and generator expressions read their
    enclosing function's variables when they run, not when written; default arguments are
    read when the ``def`` runs (where it is written, as Python). A variable some closure reads
    (a *cell*, :class:`Scope`) stays the function's own in the branch and loop functions the
    rewrite makes: they declare it ``nonlocal`` and start by setting it from their parameter
    (``v = __agv_v``), so a closure called in a branch or step sees that branch's or step's
    value, the other branch of a traced ``cond`` starts again from the value before the
    ``if``, and the value after the ``if`` or loop is the merged one. A cell counts as read
    after every ``if`` and loop (a closure may be called anywhere later), so it is an output
    of every tensor ``if`` and carried by every tensor loop that assigns it; where that cannot
    be (assigned in one branch only, a Python value a tensor loop changes, no value before a
    tensor loop) the AutographError names the variable, the closure that reads it and both
    lines. A named nested function that assigns a variable ``nonlocal`` assigns it wherever it
    is called: an ``if`` or loop whose code names it assigns that variable too (carried out,
    as if assigned there). A closure reading a tensor ``for``'s item is made in its body and
    used there only (a lambda passed to a call, or a lambda or def whose name is only called
    in the body): it reads the step's row, as in Python, and the loop need not keep its last
    row (a closure kept past the loop is refused: it would read the last row). A ``def``
    reads its decorators and defaults where it is written, its body when called.
    Comprehensions run where they are written; their variables are their own (not assigned
    or read by the code around them).
"""
import ast
from typing import Dict, FrozenSet, List, Set, Tuple

from ..nodes import child_nodes, walk


def scoped(statements):
    """The nodes of ``statements`` outside nested functions, lambdas and classes (a def or
    class statement shows as the name it binds)."""
    stack = list(statements)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield ast.Name(id=node.name, ctx=ast.Store())
            continue
        if isinstance(node, ast.Lambda):
            continue
        yield node
        stack.extend(comprehension_parts(node) if isinstance(node, COMPREHENSIONS) else
                     child_nodes(node))


def assigned_names(statements):
    nodes = list(scoped(statements))
    return {n.id for n in nodes if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store) and not n.id.startswith("__ag_")} | \
        captured_names(nodes)


def captured_names(nodes):
    """The names the ``match`` patterns among ``nodes`` bind (``case [a, *rest]:``, ``case
    {"k": v, **more}:``, ``case P as name:``): assigned as a ``Name`` store is."""
    return {name for n in nodes for name in (
        [n.name] if isinstance(n, (ast.MatchAs, ast.MatchStar)) else
        [n.rest] if isinstance(n, ast.MatchMapping) else []) if name}


def loaded_names(node):
    """The names ``node`` reads (a comprehension's own variables and a lambda's parameters
    are not read outside it)."""
    names: Set[str] = set()
    stack: List[Tuple[ast.AST, FrozenSet[str]]] = [(node, frozenset())]
    while stack:
        node, hidden = stack.pop()
        if isinstance(node, COMPREHENSIONS):
            inner = hidden | _comprehension_targets(node)
            stack.extend((child, inner) for child in comprehension_parts(node))
            continue
        if isinstance(node, ast.Lambda):    # its defaults read here; its parameters are its own
            args = node.args
            stack.extend((d, hidden) for d in args.defaults + args.kw_defaults if d is not None)
            stack.append((node.body, hidden | {a.arg for a in [
                *args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
                if a is not None}))
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and \
                node.id not in hidden:
            names.add(node.id)
        stack.extend((child, hidden) for child in child_nodes(node))
    return names


COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _comprehension_targets(node):
    return {n.id for g in node.generators for n in walk(g.target)
            if isinstance(n, ast.Name)}


def comprehension_parts(node):
    """A comprehension's children but its targets (which bind in its own scope)."""
    parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
    return parts + [g.iter for g in node.generators] + \
        [i for g in node.generators for i in g.ifs]


def contains(node, kind):
    return any(isinstance(n, kind) for n in scoped([node]))


def has_walrus(node):
    return any(isinstance(n, ast.NamedExpr) for n in walk(node))


def walrus_bound(node):
    """Names a ``:=`` in the expression ``node`` surely binds when it is evaluated: not in a
    short-circuited operand (``a and (s := b)``), a conditional expression's side, a lambda
    or a comprehension (its own scope, or maybe no item)."""
    bound, stack = set(), [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.NamedExpr):
            bound.add(n.target.id)
        if isinstance(n, ast.BoolOp):
            stack.append(n.values[0])
        elif isinstance(n, ast.IfExp):
            stack.append(n.test)
        elif not isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                                ast.GeneratorExp)):
            stack.extend(child_nodes(n))
    return bound


def root_name(target):
    """The variable an attribute or item target (``self.a.b[i]``) hangs from, or None."""
    while isinstance(target, (ast.Attribute, ast.Subscript)):
        target = target.value
    return target.id if isinstance(target, ast.Name) else None


MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault",
             "add", "discard", "sort", "reverse", "popitem"}


def mutated_names(statements):
    """Names whose method a mutating call (``items.append(x)``, ``seen.add(x)`` ...) uses in
    ``statements`` without the statements assigning them: objects from outside."""
    called = {n.func.value.id for s in statements for n in walk(s)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and n.func.attr in MUTATORS and isinstance(n.func.value, ast.Name)}
    # ``items += [x]`` changes a list in place too (a number or tensor it rebinds: the run-time
    # check refuses only lists, dicts and sets), unless the statements also bind it otherwise
    nodes = list(scoped(statements))
    targets = {id(n.target): n.target.id for n in nodes
               if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)}
    augmented = set(targets.values())
    bound = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
             and id(n) not in targets} | captured_names(nodes)
    return (called - assigned_names(statements)) | (augmented - bound)


# What a function's closures are: nested functions, lambdas, classes (their methods) and
# generator expressions run later than they are written, reading the enclosing function's
# variables when they run (NOTE [autograph closures]). Comprehensions run where written.
_CLOSURES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.GeneratorExp)


def in_scope(nodes):
    """The nodes under ``nodes`` outside closures, and the closures directly in them."""
    inside, closures, stack = [], [], list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, _CLOSURES) and not getattr(node, "ag_thunk", False):
            closures.append(node)
            continue
        inside.append(node)
        stack.extend(comprehension_parts(node) if isinstance(node, COMPREHENSIONS) else
                     child_nodes(node))
    return inside, closures


def _params(fn):
    args = fn.args
    return {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} | \
        {a.arg for a in (args.vararg, args.kwarg) if a is not None}


def _declared(nodes, kind):
    return {name for n in nodes if isinstance(n, kind) for name in n.names}


class Scope:
    """What one function (or lambda) of the converted code binds, and what its closures read
    and write of it."""

    def __init__(self, fn, memo=None):
        # (``memo``: the Scopes of nested functions already made, while the tree does not
        # change: NOTE [conversion speed])
        body = fn.body if isinstance(fn.body, list) else [fn.body]
        inside, self.closures = in_scope(body)
        self.params = _params(fn)
        self.globals = _declared(inside, ast.Global)
        self.nonlocals = _declared(inside, ast.Nonlocal)
        stored = {n.id for n in inside if isinstance(n, ast.Name) and
                  isinstance(n.ctx, (ast.Store, ast.Del))} | captured_names(inside) | \
            {c.name for c in self.closures if not isinstance(c, (ast.Lambda, ast.GeneratorExp))}
        self.used = {n.id for n in inside if isinstance(n, ast.Name)}
        self.bound = (self.params | stored) - self.globals - self.nonlocals
        # a variable whose every binding is a new object ([], {}, dict(), Cls()): changing
        # that object changes nothing outside this call (NOTE [autograph side effects])
        new = {id(n.targets[0]) for n in inside if isinstance(n, ast.Assign) and
               len(n.targets) == 1 and _new_object(n.value)}
        stores = [n for n in inside if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
        # (a match pattern's capture binds whatever the subject holds: case {"buf": parts})
        self.fresh = {n.id for n in stores} - {n.id for n in stores if id(n) not in new} - \
            self.params - self.globals - self.nonlocals - captured_names(inside)
        if isinstance(fn, ast.FunctionDef) and fn.name == "__init__" and fn.args.args and \
                fn.args.args[0].arg not in {n.id for n in stores}:
            # __init__'s self is the object being made (NOTE [autograph side effects])
            self.fresh.add(fn.args.args[0].arg)
        self.free = self.used - self.bound - self.globals
        for closure in self.closures:
            self.free |= free_names(closure, memo) - self.bound
        self.cells = self.bound & set().union(*[free_names(c, memo) for c in self.closures])
        # cell -> the first closure (in the source) reading it
        self.readers: Dict[str, ast.AST] = {}
        for closure in sorted(self.closures, key=lambda c: (c.lineno, c.col_offset)):
            for name in free_names(closure, memo) & self.cells:
                self.readers.setdefault(name, closure)
        # variables of this scope a named closure assigns (nonlocal), itself or through the
        # closures it names
        writes = {}
        for closure in self.closures:
            if isinstance(closure, (ast.FunctionDef, ast.AsyncFunctionDef)):
                writes[closure.name] = (_nonlocal_writes(closure, memo) & self.cells,
                                        scope_of(closure, memo).used)
        self.writes = {name: set(w) for name, (w, _) in writes.items()}
        changed = True
        while changed:
            changed = False
            for name, (_, used) in writes.items():
                for other in used & set(writes) - {name}:
                    if not self.writes[other] <= self.writes[name]:
                        self.writes[name] |= self.writes[other]
                        changed = True

    def outer(self, name):
        """Whether the object ``name`` holds may exist outside this call of the function."""
        return name not in self.fresh

    def written_by_calls(self, statements):
        """The variables the named closures ``statements`` mention assign (nonlocal)."""
        mentioned = {n.id for n in in_scope(statements)[0] if isinstance(n, ast.Name)}
        return set().union(*[self.writes[n] for n in mentioned & set(self.writes)])


def _new_object(value):
    """Whether an expression makes a new object: a display, a comprehension, a constant, a
    container's constructor (``dict()``) or a class's (``Cls()``, by the naming convention;
    ``get_cache()`` may return an object from outside)."""
    return isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp,
                              ast.SetComp, ast.Constant, ast.Tuple)) or \
        isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
        (value.func.id in ("list", "dict", "set", "bytearray", "tuple", "frozenset") or
         value.func.id[:1].isupper())


def scope_of(fn, memo=None):
    """``Scope(fn)``, made once per function while ``memo`` (a dict) is kept."""
    if memo is None:
        return Scope(fn)
    entry = memo.get(id(fn))
    if entry is None or entry[0] is not fn:
        entry = memo[id(fn)] = (fn, Scope(fn, memo))
    return entry[1]


def free_names(closure, memo=None):
    """The names a closure reads or assigns (nonlocal) from its enclosing functions."""
    if isinstance(closure, ast.ClassDef):     # methods skip the class body's scope
        return set().union(*[free_names(c, memo) for c in in_scope(closure.body)[1]])
    if isinstance(closure, ast.GeneratorExp):     # its first iterable is read where written
        parts = [closure.elt] + [g.target for g in closure.generators] + \
            [i for g in closure.generators for i in g.ifs] + \
            [g.iter for g in closure.generators[1:]]
        inside, closures = in_scope(parts)
        targets = {n.id for g in closure.generators for n in walk(g.target)
                   if isinstance(n, ast.Name)}
        used = {n.id for n in inside if isinstance(n, ast.Name)}
        return (used | set().union(*[free_names(c, memo) for c in closures])) - targets
    return set(scope_of(closure, memo).free)


def _nonlocal_writes(fn, memo=None):
    scope = scope_of(fn, memo)
    inside = in_scope(fn.body)[0]
    return {n.id for n in inside if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            and n.id in scope.nonlocals}
