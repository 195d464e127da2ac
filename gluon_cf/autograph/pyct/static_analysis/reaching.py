"""Which bindings of a variable reach its in-place ``x op= v``, and whether the array may
have been shared on the way: a control-flow graph of one function's statements and a
reaching-definitions analysis over it (NOTE [autograph augmented assignment])."""
import ast
from typing import Dict, FrozenSet, List, Optional, Set, Tuple

from .aliases import (IN_PLACE_OPS, NESTED, checked_calls, given_names, node_shares,
                      own_nodes, own_view, reads_frame, result_calls, shared_arrays)
from ..nodes import child_nodes, walk

Position = Tuple[int, int, int, int]
# the calls an op= needs checked when they run: call -> (call, name, binds, the op=)
Checks = Dict[Position, Tuple[ast.Call, str, bool, ast.AugAssign]]


def position(node) -> Position:
    """Where ``node`` is in the user's code: the key of a node that the conversion may copy
    (``converters/jumps.py`` copies statements into branches)."""
    return (node.lineno, node.col_offset, node.end_lineno or 0, node.end_col_offset or 0)


def augmented_assignments(func) -> Tuple[Dict[Position, Optional[ast.AST]], Checks]:
    """For ``func`` and the functions nested in it, as written: ``({op=: the node saying why
    its array may be held elsewhere, or None}, {call: (name, binds, op=)})`` (NOTE
    [autograph augmented assignment]): each in-place ``name op= v`` with a node in the first
    is refused hybridized; each call in the second is checked when it runs, as binding
    (``binds``) or given the variable ``name`` of that ``op=``."""
    refused: Dict[Position, Optional[ast.AST]] = {}     # (None: accepted)
    checks: Checks = {}
    for function in walk(func):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        changes = [n for n in own_nodes(function) if isinstance(n, ast.AugAssign) and
                   isinstance(n.target, ast.Name) and isinstance(n.op, IN_PLACE_OPS)]
        if not changes:
            continue
        try:
            graph = _Graph(function, {n.target.id for n in changes})     # type: ignore
        except _NotFollowed:
            # the whole-function rule: what happens anywhere in it reaches every op=
            shared = shared_arrays(function)
            for change in changes:
                refused[position(change)] = shared.get(change.target.id)  # type: ignore
            for call, name, binds, change in checked_calls(function):
                checks.setdefault(position(call), (call, name, binds, change))
            continue
        for change in sorted(changes, key=position):
            reason, binding, given = graph.reaching(change)
            refused[position(change)] = reason
            name = change.target.id                                      # type: ignore
            for call in sorted(binding, key=position):
                checks.setdefault(position(call), (call, name, True, change))
            for call in sorted(given - binding, key=position):
                if position(call) not in checks:
                    checks[position(call)] = (call, name, False, change)
    # (a call binding one variable and given another is checked as binding)
    return refused, checks


class _NotFollowed(Exception):
    """A statement the graph does not model (try, match, async): the whole-function rule."""


class _Def:
    """One binding of a variable: ``reason`` why its array may be held elsewhere (None: a
    new array, when the ``calls`` it is the result of return new arrays)."""
    __slots__ = ("reason", "calls")

    def __init__(self, reason: Optional[ast.AST], calls: Tuple[ast.Call, ...]):
        self.reason, self.calls = reason, calls


# a variable's facts: {binding that may reach: (where its array may have been shared since,
# or None; the calls given it since)}
Facts = Dict[str, Dict[_Def, Tuple[Optional[ast.AST], FrozenSet[ast.Call]]]]


class _Node:
    """One simple statement, or the header of a compound one (its test, iterable, target or
    context managers): what it shares, gives to calls, binds and unbinds."""

    def __init__(self, of=None):
        self.preds: List["_Node"] = []
        self.of: Optional["_Node"] = of      # an exceptional exit: the node it leaves
        self.shares: Dict[str, ast.AST] = {}
        self.given: Dict[str, Set[ast.Call]] = {}
        self.binds: Dict[str, List[_Def]] = {}
        self.kills: Set[str] = set()
        self.frame: Optional[ast.AST] = None     # reads the frame: shares every variable


def _order(node) -> Tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


class _Graph:
    """The control-flow graph of ``function``'s statements (loops' back edges, if/else,
    break, continue, return, with) and the facts of ``names`` that reach each node."""

    def __init__(self, function, names):
        self.names = names
        self.nodes: List[_Node] = []
        self.loops: List[Tuple[_Node, List[_Node]]] = []    # (test, breaks)
        self.guarded: List[List[_Node]] = []     # the nodes of each with's body around
        self.at: Dict[int, _Node] = {}           # op= -> its node
        # what may hold a variable's array wherever it is: global, nonlocal, a closure's
        self.everywhere: Dict[str, ast.AST] = {}
        consumed = _consumed(function)
        for node in own_nodes(function):
            if isinstance(node, (ast.Global, ast.Nonlocal) + NESTED) or \
                    isinstance(node, ast.GeneratorExp) and id(node) not in consumed:
                for name in _lazily_read(node):
                    self.everywhere[name] = _first(self.everywhere.get(name), node)
        self.entry = entry = self._node([])
        args = function.args
        for arg in args.posonlyargs + args.args + args.kwonlyargs + \
                [a for a in (args.vararg, args.kwarg) if a is not None]:
            entry.binds.setdefault(arg.arg, []).append(_Def(function, ()))
        for name in names - set(entry.binds):
            entry.binds[name] = [_Def(None, ())]      # unbound: reading it is an error
        self._block(function.body, [entry])
        self._solve()

    def reaching(self, change) -> Tuple[Optional[ast.AST], Set[ast.Call], Set[ast.Call]]:
        """For ``change`` (``name op= v``): why its array may be held elsewhere (None if
        nothing may), the calls of the bindings that reach it and those given it since."""
        name = change.target.id
        if name in self.everywhere:
            return self.everywhere[name], set(), set()
        node = self.at[id(change)]
        facts = self._effect(node, self.ins[id(node)], binding=False).get(name, {})
        reasons = [r for d, (shared, _) in facts.items() for r in (d.reason, shared)
                   if r is not None]
        binding = {c for d in facts for c in d.calls}
        given = {c for _, calls in facts.values() for c in calls}
        return (min(reasons, key=_order) if reasons else None), binding, given

    # -- the graph
    def _node(self, preds, parts=(), statement=None, of=None):
        node = _Node(of)
        node.preds = list(preds)
        self.nodes.append(node)
        if of is None:
            for body in self.guarded:
                body.append(node)
        for part in parts:
            self._read(node, part)
        if statement is not None:
            self._bind(node, statement)
        return node

    def _block(self, statements, preds):
        for statement in statements:
            preds = self._statement(statement, preds)
        return preds

    def _statement(self, s, preds):
        if isinstance(s, ast.If):
            test = self._node(preds, [s.test])
            return self._block(s.body, [test]) + self._block(s.orelse, [test])
        if isinstance(s, (ast.While, ast.For)):
            if isinstance(s, ast.For):
                preds = [self._node(preds, [s.iter])]       # (evaluated once)
                for name in set(node_shares(s)) - set(_target_names(s.target)):
                    preds[0].shares.setdefault(name, s.iter)    # for v in (h,)
            test = self._node(preds, [s.test] if isinstance(s, ast.While) else [])
            breaks: List[_Node] = []
            self.loops.append((test, breaks))
            first = [test] if isinstance(s, ast.While) else \
                [self._node([test], [], statement=s)]       # binds the target
            test.preds += self._block(s.body, first)
            self.loops.pop()
            return self._block(s.orelse, [test]) + breaks
        if isinstance(s, ast.With):
            enter = self._node(preds, [item.context_expr for item in s.items], statement=s)
            self.guarded.append([])
            out = self._block(s.body, [enter])
            body = self.guarded.pop()
            # a context manager may suppress an exception raised in any statement of the
            # body, even halfway (after an append, before a binding): then what reaches
            # it, or leaves it, with its sharing, goes on after the with
            return out + [self._node([], of=node) for node in body]
        if isinstance(s, (ast.Return, ast.Raise)):
            self._node(preds, [s])
            return []
        if isinstance(s, (ast.Break, ast.Continue)):
            node = self._node(preds)
            test, breaks = self.loops[-1]
            (breaks if isinstance(s, ast.Break) else test.preds).append(node)
            return []
        if isinstance(s, (ast.Try, ast.Match, ast.AsyncFor, ast.AsyncWith)) or \
                type(s).__name__ == "TryStar":
            raise _NotFollowed()
        if isinstance(s, NESTED):        # (what it reads: self.everywhere)
            return [self._node(preds, [], statement=s)]
        views = own_view(s)
        if views is not None:
            # h = h.reshape(s): the bindings reaching it reach on, with what they share (its
            # value's parts may share, give or bind by walrus; the views keep nothing)
            node = self._node(preds, [s.value])
            for calls in node.given.values():
                calls.difference_update(views)
            return [node]
        return [self._node(preds, [s], statement=s)]

    def _read(self, node, part):
        """What evaluating ``part`` (a statement or expression, not its nested statements)
        shares, gives to calls, binds by walrus, and reads of the frame."""
        stack = [part]
        while stack:
            n = stack.pop()
            for name in node_shares(n):
                # ([v for v in (h,)]: h's array is what the iterable holds)
                iterated = isinstance(n, ast.comprehension) and \
                    name not in _target_names(n.target)
                node.shares.setdefault(name, n.iter if iterated else n)
            if isinstance(n, ast.Call):
                if isinstance(n.func, ast.Name) and n.func.id in _FRAME_READERS:
                    node.frame = node.frame or n
                for name in given_names(n):
                    node.given.setdefault(name, set()).add(n)
            if isinstance(n, ast.Attribute) and n.attr == "f_locals":
                node.frame = node.frame or n
            if isinstance(n, ast.NamedExpr):       # (maybe not evaluated: no kill)
                node.binds.setdefault(n.target.id, []).append(_Def(None, _calls(n.value)))
            if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and \
                    isinstance(n.op, IN_PLACE_OPS):
                self.at[id(n)] = node
            if not isinstance(n, NESTED):
                stack.extend(child_nodes(n))

    def _bind(self, node, s):
        """The variables statement ``s`` rebinds (for a compound one, in its header)."""
        def bind(target, reason, calls=()):
            for name in _target_names(target):
                node.kills.add(name)
                node.binds.setdefault(name, []).append(_Def(reason, calls))
            for n in walk(target) if reason is not None else ():
                # (for d[k] in ...: d holds the iterable's items)
                if isinstance(n, ast.Name) and n.id not in _target_names(target):
                    node.shares.setdefault(n.id, reason)

        if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None:
            calls = _calls(s.value)
            for target in s.targets if isinstance(s, ast.Assign) else [s.target]:
                bind(target, None, calls)
        elif isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and \
                not isinstance(s.op, IN_PLACE_OPS):
            bind(s.target, None)              # h **= 2 is h = h ** 2 on an NDArray
        elif isinstance(s, ast.Delete):
            for target in s.targets:
                bind(target, None)            # (reading it after is an error)
        elif isinstance(s, ast.For):
            bind(s.target, s)
        elif isinstance(s, ast.With):
            for item in s.items:
                if item.optional_vars is not None:
                    bind(item.optional_vars, item)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            for alias in s.names:
                name = alias.asname or alias.name.split(".")[0]
                node.kills.add(name)
                node.binds.setdefault(name, []).append(_Def(s, ()))
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.kills.add(s.name)
            node.binds.setdefault(s.name, []).append(_Def(s, ()))

    # -- the facts
    def _solve(self):
        self.ins: Dict[int, Facts] = {}
        outs: Dict[int, Facts] = {}
        changed = True
        while changed:
            changed = False
            for node in self.nodes:
                if node is self.entry:
                    facts: Facts = {}
                elif node.of is not None:
                    facts = _join([self.ins.get(id(node.of), {}),
                                   outs.get(id(node.of), {})])
                else:
                    facts = _join([outs.get(id(p), {}) for p in node.preds])
                out = self._effect(node, facts, binding=node.of is None)
                if self.ins.get(id(node)) != facts or outs.get(id(node)) != out:
                    self.ins[id(node)], outs[id(node)] = facts, out
                    changed = True

    def _effect(self, node, facts: Facts, binding: bool) -> Facts:
        """The facts after ``node`` (without ``binding``: only what it shares and gives,
        as an op= sees them, or an exception halfway through may leave them)."""
        out: Facts = {}
        for name in self.names:
            here = dict(facts.get(name, {}))
            shared = node.frame or node.shares.get(name)
            given = frozenset(node.given.get(name, ()))
            if shared is not None or given:
                here = {d: (_first(s, shared), g | given) for d, (s, g) in here.items()}
            if binding:
                if name in node.kills:
                    here = {}
                for d in node.binds.get(name, ()):
                    # (shared or given in the statement that binds it: maybe after)
                    here[d] = (shared, given)
            if here:
                out[name] = here
        return out


def _first(a, b):
    if a is None or b is None:
        return a if b is None else b
    return min(a, b, key=_order)


def _join(all_facts: List[Facts]) -> Facts:
    joined: Facts = {}
    for facts in all_facts:
        for name, defs in facts.items():
            mine = joined.setdefault(name, {})
            for d, (shared, given) in defs.items():
                if d in mine:
                    old_shared, old_given = mine[d]
                    mine[d] = (_first(old_shared, shared), old_given | given)
                else:
                    mine[d] = (shared, given)
    return joined


def _calls(value) -> Tuple[ast.Call, ...]:
    """The calls whose result, or an item or view of it, ``value`` may be, to check when they
    run (not ``locals()``: a check would be its caller)."""
    return tuple(c for c in result_calls(value) if not reads_frame(c))


def _target_names(target) -> List[str]:
    """The variables an assignment to ``target`` rebinds (not ``d`` of ``d[k] = v``)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _target_names(elt)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


def _lazily_read(node) -> List[str]:
    """The variables a closure (or global, nonlocal) may read, keep or rebind (``nonlocal
    h; h = ...``) whenever it runs."""
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    return [n.id for n in walk(node) if isinstance(n, ast.Name)] + [
        name for n in walk(node) if isinstance(n, ast.Nonlocal) for name in n.names]


# builtins that use up a generator expression before they return
_CONSUMERS = {"sum", "list", "tuple", "min", "max", "any", "all", "sorted", "set",
              "frozenset", "dict"}
# (builtins that read their caller's frame: what they return holds every variable's array)
_FRAME_READERS = {"locals", "vars", "eval", "exec"}


def _consumed(function) -> Set[int]:
    """The generator expressions of ``function`` a builtin uses up where they are made (not
    closures kept for later: ``sum(h * w for w in ws)``)."""
    return {id(arg) for call in own_nodes(function) if isinstance(call, ast.Call) and
            isinstance(call.func, ast.Name) and call.func.id in _CONSUMERS
            for arg in call.args if isinstance(arg, ast.GeneratorExp)}
