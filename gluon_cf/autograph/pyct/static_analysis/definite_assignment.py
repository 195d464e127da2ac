"""Definite assignment: the names an ``if`` assigns on every path that goes on after it, and
whether a block always returns (or raises)."""
import ast
from typing import Set

from .activity import assigned_names, captured_names
from ..nodes import walk


def definitely_assigned(statement):
    """The names an ``if`` assigns on every path that goes on after it (a branch that always
    returns or raises does not go on)."""
    sides = []
    for branch in (statement.body, statement.orelse):
        if always_returns(branch):
            continue
        names: Set[str] = set()
        for inner in branch:
            names |= definitely_assigned(inner) if isinstance(inner, ast.If) else \
                with_assigned(inner) if isinstance(inner, ast.With) else \
                match_assigned(inner) if isinstance(inner, ast.Match) else \
                set() if isinstance(inner, (ast.For, ast.While, ast.AsyncFor,
                                            ast.Try)) else assigned_names([inner])
        sides.append(names)
    if not sides:
        return set()
    return set.intersection(*sides)


def try_assigned(statement):
    """The names a ``try`` assigns on every path that goes on after it: its body and else
    clause completing, or each handler that does not always return or raise (after any part
    of the body), and in every case its finally clause."""
    sides = [_block_assigned(statement.body + statement.orelse)] + [
        _block_assigned(handler.body) - ({handler.name} if handler.name else set())
        for handler in statement.handlers if not always_returns(handler.body)]
    return set.intersection(*sides) | _block_assigned(statement.finalbody)


def with_assigned(statement):
    """The names a ``with`` assigns on the path that goes on after it: its ``as`` targets and
    what its body assigns (the body runs whole; a context manager that suppresses an
    exception leaves the rest unassigned, and Python's read of one raises)."""
    targets = [item.optional_vars for item in statement.items if item.optional_vars]
    return assigned_names(targets) | _block_assigned(statement.body)


def match_assigned(statement):
    """The names a ``match`` assigns on every path that goes on after it: with an irrefutable
    last case (``case _:``, ``case name:``, no guard), what the pattern and body of each case
    that does not always return or raise assign; else nothing (no case may match)."""
    last = statement.cases[-1]
    if not (isinstance(last.pattern, ast.MatchAs) and last.pattern.pattern is None and
            last.guard is None):
        return set()
    sides = [captured_names(list(walk(case.pattern))) | _block_assigned(case.body)
             for case in statement.cases if not always_returns(case.body)]
    return set.intersection(*sides) if sides else set()


def _block_assigned(statements):
    """The names a block of statements run in order assigns on every path through it."""
    names: Set[str] = set()
    for inner in statements:
        names |= definitely_assigned(inner) if isinstance(inner, ast.If) else \
            try_assigned(inner) if isinstance(inner, ast.Try) else \
            with_assigned(inner) if isinstance(inner, ast.With) else \
            match_assigned(inner) if isinstance(inner, ast.Match) else \
            set() if isinstance(inner, (ast.For, ast.While, ast.AsyncFor)) \
            else assigned_names([inner])
    return names


def always_returns(block):
    if not block:
        return False
    last = block[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return always_returns(last.body) and always_returns(last.orelse)
    if isinstance(last, ast.Try) and getattr(last, "ag_escaping", False):
        return always_returns(last.body)  # (a converted statement: its handler re-raises)
    return False
