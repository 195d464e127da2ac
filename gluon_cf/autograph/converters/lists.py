"""Converts the lists a loop appends to once per step (NOTE [autograph lists]): which lists a
loop collects, their appends made step outputs, and ``items[i]`` of one made ``item``."""
import ast

from ..pyct.static_analysis.activity import assigned_names, scoped
from ..pyct.templates import runtime_call
from .base import Converter
from .jumps import lowerable


def appended_name(statement):
    """``name`` when ``statement`` is ``name.append(value)``, else None."""
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        call = statement.value
        if isinstance(call.func, ast.Attribute) and call.func.attr == "append" and \
                isinstance(call.func.value, ast.Name) and len(call.args) == 1 and \
                not call.keywords and not isinstance(call.args[0], ast.Starred):
            return call.func.value.id
    return None


def collected_lists(func):
    """For each loop whose jumps became flags: the names its body appends to by a statement
    of the body itself (once per step), that the body neither assigns nor reads otherwise."""
    collected = {}
    for loop in scoped(func.body):
        if not isinstance(loop, (ast.While, ast.For)) or not lowerable(loop):
            continue
        appended = [appended_name(s) for s in step_statements(loop)]
        names = []
        for name in sorted({n for n in appended if n is not None}):
            reads = sum(1 for n in scoped(loop.body) if isinstance(n, ast.Name) and
                        n.id == name and isinstance(n.ctx, ast.Load))
            if reads == appended.count(name) == 1 and name not in assigned_names(loop.body):
                names.append(name)
        if names:
            collected[loop] = names
    return collected


def step_statements(loop):
    """The statements a loop's body runs once per step: the body, or for a ``for`` that may
    break, the body of its ``if running(...)`` wrapper (NOTE [autograph jumps])."""
    if isinstance(loop, ast.For) and getattr(loop, "ag_stop", None) and len(loop.body) == 1 \
            and isinstance(loop.body[0], ast.If):
        return loop.body[0].body
    return loop.body


def collect_appends(loop, names):
    """Make the appends of the lists ``names`` a loop collects step outputs
    (NOTE [autograph lists]): each ``name.append(value)`` of its step becomes
    ``__agc_name = value``."""
    body = step_statements(loop)
    for k, statement in enumerate(body):
        name = appended_name(statement)
        if name in names:
            body[k] = ast.copy_location(ast.Assign(
                targets=[ast.Name(id="__agc_" + name, ctx=ast.Store())],
                value=statement.value.args[0]), statement)
    return names


class ListsConverter(Converter):
    """``items[i]`` of a list a loop collects."""

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name) and \
                node.value.id in self.collected_names and not isinstance(node.slice, ast.Slice):
            return ast.copy_location(runtime_call("item", [node.value, node.slice,
                                                           ast.Constant(self.where(node))]), node)
        return node
