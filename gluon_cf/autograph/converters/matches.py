"""Rewrites a ``match`` on a tuple display (or a name) whose cases compare its items with
literals into the ``if``/``elif`` chain Python's match runs, before the other converters, so
that an item that is a tensor (``match (k, row): case (0, r):`` in a ``for k, row in enumerate(x)``
over a tensor, whose ``k`` is the step's count) converts as an ``if`` on it does.

NOTE [a match on a tuple display]
    Python matches ``case (0, r):`` against the subject ``(k, row)`` by checking that it is
    a sequence of two items (a tuple display of two: known when compiling), then ``k == 0``
    (its truth), then binding ``r = row``; ``None``, ``True`` and ``False`` compare with
    ``is``. Where the subject is a tuple display (no ``*x``) and every case is a sequence
    pattern of literals, value patterns (``Mode.A``), captures and wildcards (no star, no
    guard, no nesting) or a capture or wildcard of the whole, the match is rewritten as that
    chain: the items evaluated once, in order (``__agm_N_i``), each case an ``if`` or
    ``elif`` on its comparisons (``and``: left to right, stopping at the first that fails),
    its captures bound first in its body; a case whose length differs matches nothing and is
    dropped, a case that compares nothing is the ``else``, and the cases after it are left
    out (Python refuses such a match unless it is the last case). The ``if`` then converts as
    any: on a tensor comparison, a graph's cond (NOTE [autograph]); on Python values, Python's.
    An or-pattern of such sequences (``case (0, r) | (1, r):``) is one ``if``/``elif`` for
    each alternative, in order, each binding its own captures before a copy of the body
    (Python binds those of the first alternative that matches); an item's or-pattern of
    literals (``case (1 | 3, r):``) is an ``or`` of its comparisons. A subject written as a
    name (``pair = (k, row); match pair:``) is read once, its items taken at run time
    (``__ag__.sequence_items``: a tuple of them where Python's match sees a sequence, a
    collected list's rows as ``match_items`` gives them, else None), each case testing
    ``is not None`` and its length first; ``case whole:`` binds the value itself.
    Other matches stay as written (NOTE [autograph match] in ``operators/logical.py``).
"""
import ast
import copy
import itertools
from typing import List, Optional, Tuple

from ..pyct.nodes import replace_statements
from ..pyct.templates import runtime_call

_NUMBERS = itertools.count(1)


def tuple_matches_as_ifs(func):
    """Rewrite, in ``func``, each ``match`` that NOTE [a match on a tuple display] rewrites
    (innermost first: a case's body is moved into its ``if``)."""
    replace_statements(func, lambda statement: _as_ifs(statement) if isinstance(
        statement, ast.Match) else None)


def _compares(pattern):
    return isinstance(pattern, (ast.MatchValue, ast.MatchSingleton)) or \
        isinstance(pattern, ast.MatchOr) and all(_compares(p) for p in pattern.patterns)


def _simple(pattern):
    return _compares(pattern) or isinstance(pattern, ast.MatchAs) and pattern.pattern is None


def _alternatives(pattern):
    """A case's pattern as the patterns Python tries in turn (``(0, r) | (1, r)``: two)."""
    return pattern.patterns if isinstance(pattern, ast.MatchOr) else [pattern]


def _comparison(item, part):
    if isinstance(part, ast.MatchOr):      # (case (1 | 3, r):)
        return ast.BoolOp(op=ast.Or(), values=[_comparison(item, p) for p in part.patterns])
    if isinstance(part, ast.MatchValue):
        return ast.Compare(left=item, ops=[ast.Eq()], comparators=[part.value])
    return ast.Compare(left=item, ops=[ast.Is()], comparators=[ast.Constant(part.value)])


def _as_ifs(match):
    subject = match.subject
    named = isinstance(subject, ast.Name)
    if not named and (not isinstance(subject, ast.Tuple) or
                      any(isinstance(e, ast.Starred) for e in subject.elts)):
        return None
    for case in match.cases:
        entire = isinstance(case.pattern, ast.MatchAs) and case.pattern.pattern is None
        if case.guard is not None or not entire and not all(
                isinstance(p, ast.MatchSequence) and all(_simple(q) for q in p.patterns)
                for p in _alternatives(case.pattern)):
            return None
    if not any(isinstance(p, (ast.MatchValue, ast.MatchSingleton))
               for case in match.cases for p in ast.walk(case.pattern)):
        return None     # (nothing compares: Python's match binds as written)
    number = next(_NUMBERS)
    chain: List[Tuple[Optional[ast.expr], list, ast.AST]] = []   # (test, body, where)
    if named:       # (a name bound to a sequence, pair = (k, row): its items, or None)
        value, items = f"__agm_{number}_v", f"__agm_{number}_s"
        read = runtime_call("sequence_items", [ast.Name(value, ast.Load())])
        setattr(read, "ag_where_needed", True)
        out = [ast.copy_location(ast.Assign(targets=[ast.Name(n, ast.Store())], value=e),
                                 match) for n, e in ((value, subject), (items, read))]
        parts = _Items(items, value)
    else:
        names = [f"__agm_{number}_{i}" for i in range(len(subject.elts))]
        out = [ast.copy_location(ast.Assign(targets=[ast.Name(n, ast.Store())], value=e),
                                 match) for n, e in zip(names, subject.elts)]
        parts = _Items(names)
    for case in match.cases:
        if _chained(chain, case, parts):
            break
    orelse: list = []
    for test, body, where in reversed(chain):
        for statement in body:
            if not hasattr(statement, "lineno"):
                ast.copy_location(statement, where)       # (a capture's binding)
        orelse = body if test is None else \
            [ast.copy_location(ast.If(test=test, body=body, orelse=orelse), where)]
    out.extend(orelse)
    for statement in out:
        ast.fix_missing_locations(statement)
    return out or [ast.copy_location(ast.Pass(), match)]


class _Items:
    """The items of a match's subject: a tuple display's, each a variable (``names``), or
    those of a name's value, a tuple read at run time (``sequence``, None where it is no
    sequence) whose length each case tests (Python's match takes its length)."""

    def __init__(self, names, value=None):
        self.names, self.value = names, value

    def whole(self):
        if self.value is not None:
            return ast.Name(self.value, ast.Load())
        return ast.Tuple([ast.Name(n, ast.Load()) for n in self.names], ast.Load())

    def tests(self, length):
        """The comparisons a sequence of ``length`` makes first, or None where it never
        matches."""
        if self.value is None:
            return [] if length == len(self.names) else None
        sequence = ast.Name(self.names, ast.Load())
        return [ast.Compare(left=sequence, ops=[ast.IsNot()], comparators=[ast.Constant(None)]),
                ast.Compare(left=ast.Call(ast.Name("len", ast.Load()), [sequence], []),
                            ops=[ast.Eq()], comparators=[ast.Constant(length)])]

    def item(self, k):
        if self.value is None:
            return ast.Name(self.names[k], ast.Load())
        return ast.Subscript(ast.Name(self.names, ast.Load()), ast.Constant(k), ast.Load())


def _chained(chain, case, items):
    """Append ``case``'s ``(test, body, where)`` to ``chain``, one for each alternative of
    an or-pattern (each binding its own captures, the body copied: Python binds those of
    the first alternative that matches); whether one always matches (the chain ends)."""
    pattern = case.pattern
    if isinstance(pattern, ast.MatchAs):        # the whole: always matches
        whole: List[ast.stmt] = [] if pattern.name is None else [ast.Assign(
            targets=[ast.Name(pattern.name, ast.Store())], value=items.whole())]
        chain.append((None, whole + case.body, pattern))
        return True
    for k, alternative in enumerate(_alternatives(pattern)):
        tests: Optional[List[ast.expr]] = items.tests(len(alternative.patterns))
        if tests is None:
            continue        # (a sequence of another length: never matches)
        bind: List[ast.stmt] = []
        for i, part in enumerate(alternative.patterns):
            item = items.item(i)
            if _compares(part):
                tests.append(_comparison(item, part))
            elif part.name is not None:
                bind.append(ast.Assign(targets=[ast.Name(part.name, ast.Store())], value=item))
        test = None if not tests else tests[0] if len(tests) == 1 else \
            ast.BoolOp(op=ast.And(), values=tests)
        chain.append((test, bind + (case.body if k == 0 else copy.deepcopy(case.body)),
                      alternative))
        if test is None:
            return True
    return False
