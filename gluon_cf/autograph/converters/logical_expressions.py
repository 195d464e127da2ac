"""Converts ``and``, ``or`` and ``not`` into the run-time operators that keep Python's short
circuit on Python values and are elementwise on tensors."""
import ast

from ..pyct.static_analysis.activity import has_walrus
from ..pyct.templates import runtime_call, thunk
from .base import Converter


class LogicalConverter(Converter):
    """``and``, ``or`` and ``not``."""

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        if has_walrus(node):
            return node
        name = "and_" if isinstance(node.op, ast.And) else "or_"
        return ast.copy_location(runtime_call(name, [
            ast.List(elts=[thunk(v) for v in node.values], ctx=ast.Load()),
            ast.Constant(self.where(node))]), node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(runtime_call("not_", [node.operand]), node)
        return node
