"""Rewrites a ``match`` on a tuple display whose cases compare its items with literals into
the ``if``/``elif`` chain Python's match runs, before the other converters, so that an item
that is a tensor (``match (k, row): case (0, r):`` in a ``for k, row in enumerate(x)``
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
    Other matches stay as written (NOTE [autograph match] in ``operators/logical.py``).
"""
import ast
import itertools
from typing import List, Optional, Tuple

_NUMBERS = itertools.count(1)


def tuple_matches_as_ifs(func):
    """Rewrite, in ``func``, each ``match`` that NOTE [a match on a tuple display] rewrites
    (innermost first: a case's body is moved into its ``if``)."""
    for parent in reversed(list(ast.walk(func))):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if not isinstance(block, list):
                continue
            for k, statement in reversed(list(enumerate(block))):
                if isinstance(statement, ast.Match):
                    rewritten = _as_ifs(statement)
                    if rewritten is not None:
                        block[k:k + 1] = rewritten


def _simple(pattern):
    return isinstance(pattern, (ast.MatchValue, ast.MatchSingleton)) or \
        isinstance(pattern, ast.MatchAs) and pattern.pattern is None


def _as_ifs(match):
    subject = match.subject
    if not isinstance(subject, ast.Tuple) or \
            any(isinstance(e, ast.Starred) for e in subject.elts):
        return None
    for case in match.cases:
        entire = isinstance(case.pattern, ast.MatchAs) and case.pattern.pattern is None
        if case.guard is not None or not entire and not (
                isinstance(case.pattern, ast.MatchSequence) and
                all(_simple(p) for p in case.pattern.patterns)):
            return None
    if not any(isinstance(p, (ast.MatchValue, ast.MatchSingleton))
               for case in match.cases for p in ast.walk(case.pattern)):
        return None     # (nothing compares: Python's match binds as written)
    number = next(_NUMBERS)
    items = [f"__agm_{number}_{i}" for i in range(len(subject.elts))]
    out = [ast.copy_location(ast.Assign(targets=[ast.Name(n, ast.Store())], value=e), match)
           for n, e in zip(items, subject.elts)]
    chain: List[Tuple[Optional[ast.expr], list, ast.AST]] = []   # (test, body, where)
    for case in match.cases:
        pattern = case.pattern
        if isinstance(pattern, ast.MatchAs):        # the whole: always matches
            whole: List[ast.stmt] = [] if pattern.name is None else [ast.Assign(
                targets=[ast.Name(pattern.name, ast.Store())],
                value=ast.Tuple([ast.Name(n, ast.Load()) for n in items], ast.Load()))]
            chain.append((None, whole + case.body, pattern))
            break
        if len(pattern.patterns) != len(items):
            continue        # (a sequence of another length: never matches)
        tests: List[ast.expr] = []
        bind: List[ast.stmt] = []
        for name, part in zip(items, pattern.patterns):
            item = ast.Name(name, ast.Load())
            if isinstance(part, ast.MatchValue):
                tests.append(ast.Compare(left=item, ops=[ast.Eq()], comparators=[part.value]))
            elif isinstance(part, ast.MatchSingleton):
                tests.append(ast.Compare(left=item, ops=[ast.Is()],
                                         comparators=[ast.Constant(part.value)]))
            elif part.name is not None:
                bind.append(ast.Assign(targets=[ast.Name(part.name, ast.Store())], value=item))
        test = None if not tests else tests[0] if len(tests) == 1 else \
            ast.BoolOp(op=ast.And(), values=tests)
        chain.append((test, bind + case.body, pattern))
        if test is None:
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
