"""Where a recursive body, or a function it calls, reads Python state its trace changed,
besides the statement changing it (NOTE [state a body changes and reads]).

NOTE [state a body changes and reads]
    Comparing traces of a body that changes Python state (NOTE [Python state in a recursive
    body] in ``python_state.py``) samples the states its calls see: traced with counts 1, 2
    and 3 (the discovery trace and two more), ``k = 2.0 if state["n"] > t else 1.0`` after
    ``state["n"] += 1`` is one graph for any ``t >= 3``, and hybridized gave every call the
    scale of the first calls (round 31c review: a tree of four inner nodes, t = 3, 4, 5: eager
    [[108, 114, 120]], hybridized [[90, 95, 100]] with only a warning); a flag set once at a
    count, a modulus of a count sampled alike. A round-31c extra trace with the plain values
    set back to their state before the discovery trace moved the sample but did not end it,
    and wrote the user's objects (properties, ``__setattr__``) to do so: removed. The rule
    is now read from the code: state the trace changed (a random generator's too, below) that
    the body, or a function it calls, names anywhere but in a statement changing it, is state
    its graph may depend on: refused at the changing statement's line, naming the read's
    line. A statement changing it (``self.calls += 1``, ``self.calls = self.calls + 1``,
    ``self.log.append(1)``, ``setattr(self, "n", 1)`` as a statement of its own) is not a read
    of it; its value used (``k = next(counter)``, ``if self.calls > 3: self.calls += 1``) is.
    A name is matched by the path's chain of names (``self.calls``, ``state`` for
    ``state["n"]``, any item; or by another name the snapshot found for one of the objects
    along it: ``seen.append(1)`` then ``len(self.log)``, one list, was a warning and one
    trace's length for every call), either way round: naming the container whole
    (``helper(self)``, ``getattr(state, k)``) reads it; in a function the body calls (whose
    names for it may differ), any name along the path but its root. The functions searched are
    the body and the functions it reaches (NOTE [Python state in a recursive body]), a class's
    methods (a property's getter too: ``k = self.scale`` reading ``self.calls`` was a warning)
    only when a function searched names them, or when Python runs them unnamed (``__len__``,
    ``__getattr__``, ...). Only what is never read so, a counter or a log for logging, stays
    a warning, its graphs compared as before (a name the snapshot did not reach is still found
    when its graphs differ). A call of ``eval``, ``exec``, ``globals``, ``locals`` or ``vars``
    (however it is named: ``builtins.eval``, an alias), which may read state without naming
    it, reads every path changed, but where the code shows it cannot: a source string written
    out that names none of them (``eval("2.0")``), empty namespaces given (``eval(s, {},
    {})``), ``vars(obj)`` (a read of ``obj``, by the rule for names). A branch
    whose test is a plain value the trace did not change, read without running a property
    (``self.calls if self.reads else 2``, ``reads = False``), is one no call takes; a value
    read into a name that straight-line code assigns again before reading it
    (``s = rng.randint(1, 9)`` then ``s = 2``) goes nowhere. A random generator's draw is its
    change and its read at once: ``k = 2.0 if rng.random() > 0.8 else 1.0`` was one graph over
    two traces' draws, a warning, and hybridized [[90, 95, 100]] where plain Python with the
    same seed gives [[123, 130, 137]]; now refused like a count.
"""
import ast
import builtins
import inspect
import textwrap
import types
from typing import Dict, List, Optional, Tuple


def chain_names(node):
    """The names along ``a.b[0].c``: ``{"a", "b", "c"}``, and whether it roots at a name."""
    names = set()
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        names.add(node.id)
    return names


def chain(node):
    """The names along ``a.b[0].c``, root first: ``("a", "b", "c")`` (() if not rooted at a
    name)."""
    names = []
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
        node = node.value
    return tuple([node.id] + names[::-1]) if isinstance(node, ast.Name) else ()


def path_chain(path) -> Tuple[str, ...]:
    """``("self", "calls")`` of a snapshot's path ``(scope, "self", ".calls")``."""
    return (path[1],) + tuple(p[1:] for p in path[2:] if p[:1] == ".")


def _related(names: Tuple[str, ...], target: Tuple[str, ...], body: bool) -> bool:
    if not names:
        return False
    if names[:len(target)] == target or target[:len(names)] == names:
        return True
    return not body and bool(set(names[1:]) & set(target[1:]))


def _targets(node) -> List[ast.expr]:
    found = list(node.targets) if isinstance(node, ast.Assign) else [node.target]
    flat: List[ast.expr] = []
    while found:
        target = found.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            found.extend(target.elts)
        elif isinstance(target, ast.Starred):
            found.append(target.value)
        else:
            flat.append(target)
    return flat


def _mutating_call(call, hit) -> bool:
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    if isinstance(func, ast.Attribute) and hit(func.value) or hit(func):
        return True
    return isinstance(func, ast.Name) and func.id in ("next", "setattr", "delattr") and \
        bool(call.args) and hit(call.args[0])


def _updates(stmt, hit, reads) -> bool:
    """Whether simple statement ``stmt`` only changes what ``hit`` accepts: assigns it (its
    value read for nothing else: one target, or no read in the value), or calls a method of it
    as a statement of its own."""
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = _targets(stmt)
        if not any(hit(t) for t in targets):
            return False
        return len(targets) == 1 or stmt.value is None or not reads(stmt.value)
    return isinstance(stmt, ast.Expr) and _mutating_call(stmt.value, hit)


def _parsed(fn) -> Optional[ast.AST]:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None


def _searched(functions: List[types.FunctionType], methods) -> List[types.FunctionType]:
    """The body and the functions reached, a class's methods only once a searched function
    names them (``self.helper()``, a property ``self.scale``), to a fixed point, or Python
    runs them unnamed (``__getattr__``, ``__len__`` ...: not ``__init__``)."""
    chosen = [f for f in functions if id(f) not in methods or f is functions[0] or (
        f.__name__[:2] == f.__name__[-2:] == "__" and f.__name__ not in _NOT_RUN)]
    named = set()
    while True:
        for fn in chosen:
            named |= names_read(fn.__code__)
        more = [f for f in functions if f not in chosen and f.__name__ in named]
        if not more:
            return chosen
        chosen += more


_NOT_RUN = ("__init__", "__repr__", "__str__", "__del__", "__init_subclass__")


def names_read(code: types.CodeType):
    """The global names ``code`` and the functions defined in it read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= names_read(const)
    return names


def _aliases(paths, state) -> set:
    """``paths`` and the other paths of the snapshot's ``state`` to the same objects along
    them (``seen`` changed, ``self.log`` the same list: both)."""
    named: Dict[int, list] = {}
    for path, entry in state.items():
        if isinstance(entry, tuple) and entry[:1] == ("object",):
            named.setdefault(entry[1], []).append(path)
    found = set(paths)
    for path in paths:
        for k in range(2, len(path) + 1):
            entry = state.get(path[:k])
            if isinstance(entry, tuple) and entry[:1] == ("object",):
                found |= {other + path[k:] for other in named.get(entry[1], ())}
    return found


def first_read(functions: List[types.FunctionType], methods, paths, state) -> Optional[str]:
    """``file:line`` of the first expression of the searched functions (the body first)
    reading one of the changed ``paths``, or another path of the
    snapshot's ``state`` to the same object, outside a statement changing it, or None
    (NOTE [state a body changes and reads])."""
    targets = {path_chain(p) for p in _aliases(paths, state)}
    if not targets:
        return None
    for fn in _searched(functions, methods):
        tree = _parsed(fn)
        if tree is None:
            continue
        body = fn is functions[0]
        parents: Dict[int, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[id(child)] = node
        found = [_read_line(tree, parents, target, body, _dead(tree, fn, targets))
                 for target in sorted(targets)] + [_unseen_read_line(tree, fn, targets)]
        lines = [line for line in found if line is not None]
        if lines:
            code = fn.__code__
            return "%s:%d" % (code.co_filename, code.co_firstlineno + min(lines) - 1)
    return None


# builtins reading names the code does not show: ``eval('2.0 if state["n"] > 3 else 1.0')``
# after ``state["n"] += 1`` was a warning and hybridized the first traces' scale for every
# call ([[90, 95, 100]] where Python gives [[108, 114, 120]])
_UNSEEN_READS = {id(f): f for f in (eval, exec, globals, locals, vars)}


def _bound_names(tree) -> set:
    """The names ``tree`` binds anywhere (assigned, a lambda's or nested function's argument):
    not the global or closure's value of the same name."""
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and
            not isinstance(n.ctx, ast.Load)} | {a.arg for a in ast.walk(tree)
                                                if isinstance(a, ast.arg)}


def _root_value(name, fn, with_builtins=False):
    """The value ``name`` has in ``fn`` where the code shows it: a closure's cell, a global,
    a builtin (``with_builtins``); ``_UNKNOWN`` for a local of ``fn`` or an empty cell."""
    code = fn.__code__
    if name in code.co_varnames or name in code.co_cellvars:
        return _UNKNOWN
    if name in code.co_freevars:
        try:
            return (fn.__closure__ or ())[code.co_freevars.index(name)].cell_contents
        except (ValueError, IndexError):   # (an empty cell)
            return _UNKNOWN
    if name in fn.__globals__:
        return fn.__globals__[name]
    return getattr(builtins, name, _UNKNOWN) if with_builtins else _UNKNOWN


def _called(func, fn, bound):
    """The object a call's ``func`` (``eval``, ``builtins.eval``, an alias ``EV``) names in
    ``fn``, where the code shows it (a global, a closure's cell, a builtin; attributes of
    modules only); None where it cannot tell, or a name ``fn``'s code binds."""
    path = chain(func)
    if not path or isinstance(func, ast.Subscript) or path[0] in bound:
        return None
    value = _root_value(path[0], fn, with_builtins=True)
    for name in path[1:]:
        if not isinstance(value, types.ModuleType):
            return None
        value = getattr(value, name, None)
    return None if value is _UNKNOWN else value


def _sees_changed(call, called, target_names) -> bool:
    """Whether ``call`` of ``called`` (eval, exec, globals, locals or vars) may read a changed
    path, whose root names are ``target_names``: a source string written out is read for its
    names (``eval("2.0")`` reads none), a namespace given as an empty literal (``eval(s, {},
    {})``) is all it sees, and ``vars(obj)`` reads ``obj``, which the rule for names reads
    (as ``getattr(obj, k)``)."""
    if not call.args:
        return True   # (globals(), locals(), vars(): the whole namespace)
    if called is vars:
        return False
    spaces = call.args[1:] + [k.value for k in call.keywords if k.arg in ("globals", "locals")]
    if spaces and all(isinstance(a, ast.Dict) and not a.keys for a in spaces):
        return False
    source = call.args[0]
    if isinstance(source, ast.Constant) and isinstance(source.value, str):
        try:
            parsed = ast.parse(source.value)
        except SyntaxError:
            return True
        return any(isinstance(n, ast.Name) and n.id in target_names for n in ast.walk(parsed))
    return True


def _unseen_read_line(tree, fn, targets) -> Optional[int]:
    """The first line of ``tree`` (``fn``'s) calling eval, exec, globals, locals or vars
    (resolved: ``builtins.eval``, an alias) in a way that may read a changed path of
    ``targets``: a read of it the code does not show by name."""
    target_names = {t[0] for t in targets if t}
    bound = _bound_names(tree)
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = _called(node.func, fn, bound)
        if called is None or _UNSEEN_READS.get(id(called)) is not called:
            continue
        if _sees_changed(node, called, target_names):
            lines.append(node.lineno)
    return min(lines) if lines else None


def _constant(expr, fn, targets, bound):
    """The plain value of ``expr``, a chain of attributes (``self.reads``) rooted at a closure's
    cell or a global of ``fn`` (no name ``bound`` in its code: a lambda's argument, a nested
    function's local) that the trace did not change, read without running a
    property (or ``not`` it, or it ``is None``, ``is not None``); ``_UNKNOWN`` else."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        value = _constant(expr.operand, fn, targets, bound)
        return value if value is _UNKNOWN else not value
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1 and \
            isinstance(expr.ops[0], (ast.Is, ast.IsNot)) and \
            isinstance(expr.comparators[0], ast.Constant) and expr.comparators[0].value is None:
        value = _constant(expr.left, fn, targets, bound)
        return value if value is _UNKNOWN else \
            (value is None) == isinstance(expr.ops[0], ast.Is)
    names = chain(expr)
    node = expr
    while isinstance(node, ast.Attribute):
        node = node.value
    if not isinstance(node, ast.Name) or node.id in bound or \
            any(_related(names, t, True) for t in targets):
        return _UNKNOWN
    value = _root_value(names[0], fn)
    try:
        for attr in names[1:]:
            if value is _UNKNOWN:
                break
            value = inspect.getattr_static(value, attr)
    except AttributeError:
        return _UNKNOWN
    return value if isinstance(value, (bool, int, float, str, type(None))) else _UNKNOWN


_UNKNOWN = object()


def _dead(tree, fn, targets):
    """The nodes of the branches ``fn`` never takes, their test an unchanged plain value
    (``x if self.reads else 2``, ``self.reads`` False)."""
    dead = set()
    bound = _bound_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp)):
            value = _constant(node.test, fn, targets, bound)
            if value is not _UNKNOWN:
                for part in ([node.orelse] if value else [node.body]):
                    for stmt in (part if isinstance(part, list) else [part]):
                        dead |= {id(n) for n in ast.walk(stmt)}
    return dead


def _read_line(tree, parents, target, body, exempt) -> Optional[int]:
    def hit(expr):
        return _related(chain(expr), target, body)

    def reads(expr):
        return any(_is_read(n, parents, hit) for n in ast.walk(expr))
    dead, exempt = exempt, set(exempt)
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.stmt) and _updates(stmt, hit, reads):
            exempt |= {id(n) for n in ast.walk(stmt)}
    lines = [getattr(n, "lineno") for n in ast.walk(tree)
             if id(n) not in exempt and _is_read(n, parents, hit) and
             not _overwritten(n, parents, dead)]
    return min(lines) if lines else None


def _loads(node, name, dead) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and id(n) not in dead
               for n in ast.walk(node))


def _overwritten(node, parents, dead) -> bool:
    """Whether ``node`` is read into a name (``s = rng.randint(1, 9)``) that the statements
    after it assign again (``s = 2 if kept else s``, ``kept`` True) before any reads it, in
    straight-line code (out of an ``if``, not of a loop): its value goes nowhere."""
    stmt = node
    while not isinstance(stmt, ast.stmt):
        stmt = parents.get(id(stmt))
        if stmt is None:
            return False
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and
            isinstance(stmt.targets[0], ast.Name)):
        return False
    name = stmt.targets[0].id
    while True:
        parent = parents.get(id(stmt))
        block = next((b for b in (getattr(parent, "body", None), getattr(parent, "orelse", None))
                      if isinstance(b, list) and any(s is stmt for s in b)), None)
        if block is None:
            return False
        for after in block[next(k for k, s in enumerate(block) if s is stmt) + 1:]:
            if isinstance(after, ast.Assign) and len(after.targets) == 1 and \
                    isinstance(after.targets[0], ast.Name) and after.targets[0].id == name:
                return not _loads(after.value, name, dead)
            if _loads(after, name, dead) or not isinstance(after, (ast.Assign, ast.Expr)):
                return False
        if not isinstance(parent, ast.If):
            return False
        stmt = parent


def _is_read(node, parents, hit) -> bool:
    """Whether ``node`` is a whole chain (``a.b[0]``, not its ``a.b``) loaded and ``hit``."""
    if not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
        return False
    parent = parents.get(id(node))
    if isinstance(parent, (ast.Attribute, ast.Subscript)) and parent.value is node:
        return False
    return isinstance(getattr(node, "ctx", None), ast.Load) and hit(node)
