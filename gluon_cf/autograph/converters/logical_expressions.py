"""Converts ``and``, ``or`` and ``not`` into the run-time operators that keep Python's short
circuit on Python values and are elementwise on tensors."""
import ast

from ..pyct.static_analysis.activity import has_walrus
from ..pyct.templates import runtime_call, thunk
from .base import Converter


_BINARY = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
           ast.Mod: "mod", ast.Pow: "pow", ast.Gt: "gt", ast.GtE: "ge", ast.Lt: "lt",
           ast.LtE: "le", ast.Eq: "eq", ast.NotEq: "ne"}


def _constant(node):
    """A constant operand (``2``, ``-1.5``): with it the operator is Python's either way."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant)


class LogicalConverter(Converter):
    """``and``, ``or``, ``not`` and the test of ``assert``."""

    # -- arithmetic and comparisons of two tensors broadcast (NOTE [autograph indexing])
    def visit_BinOp(self, node):
        self.generic_visit(node)
        op = _BINARY.get(type(node.op))
        if op is None or node not in self.parents or _constant(node.left) or \
                _constant(node.right):
            return node
        return ast.copy_location(runtime_call("binary", [node.left, node.right,
                                                         ast.Constant(op)]), node)

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) > 1 and node in self.parents and \
                all(type(op) in _BINARY for op in node.ops):
            # a < b < c: Python takes the truth of a < b, which a Symbol has not
            where = ast.Constant(self.where(node))
            operands = [node.left] + node.comparators
            if any(has_walrus(v) for v in operands[2:]):
                # (a function of the operand would bind the := name in its own scope):
                # Python's chain, an operand of a comparison whose truth Python takes (all
                # but the last) refused when a Symbol
                node.left = runtime_call("python_operand", [
                    node.left, where, ast.Constant("chained comparison")])
                node.comparators[:-1] = [runtime_call("python_operand", [
                    v, where, ast.Constant("chained comparison")]) for v in node.comparators[:-1]]
                return node
            # the first two operands values (a := in them binds the function's name)
            return ast.copy_location(runtime_call("compare_chain", [
                operands[0], operands[1],
                ast.List(elts=[thunk(v) for v in operands[2:]], ctx=ast.Load()),
                ast.List(elts=[ast.Constant(_BINARY[type(op)]) for op in node.ops],
                         ctx=ast.Load()), where]), node)
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) and \
                node in self.parents:
            # (item in items compares the items with ==: a Symbol's truth refused at the line)
            return ast.copy_location(runtime_call("contains", [
                node.left, node.comparators[0], ast.Constant(isinstance(node.ops[0], ast.NotIn)),
                ast.Constant(self.where(node))]), node)
        op = _BINARY.get(type(node.ops[0]))
        if len(node.ops) != 1 or op is None or node not in self.parents or \
                (_constant(node.left) or _constant(node.comparators[0])) and \
                not self._of_collected(node.left, node.comparators[0]):
            return node
        return ast.copy_location(runtime_call("binary", [node.left, node.comparators[0],
                                                         ast.Constant(op)]), node)

    def _of_collected(self, *operands):
        """An operand names a list a tensor loop collects: its comparison with a constant is
        ``binary``'s, whose TypeError names a ``list`` as Python's (``items < 1`` named the
        class standing for it)."""
        return any(isinstance(v, ast.Name) and v.id in self.collected_names for v in operands)

    def visit_Assert(self, node):
        self.generic_visit(node)
        if node in self.parents:
            node.test = runtime_call("asserted", [node.test, ast.Constant(self.where(node))])
        return node

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        where = ast.Constant(self.where(node))
        if any(has_walrus(v) for v in node.values[1:]):
            # (a function of the operand would bind the := name in its own scope): Python's
            # and/or, its first operand refused when a Symbol, whose truth Python cannot take
            node.values[0] = runtime_call("python_operand", [node.values[0], where])
            return node
        # the first operand a value (a := in it binds the function's name), the rest functions
        name = "and_" if isinstance(node.op, ast.And) else "or_"
        return ast.copy_location(runtime_call(name, [
            node.values[0],
            ast.List(elts=[thunk(v) for v in node.values[1:]], ctx=ast.Load()), where]), node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(runtime_call("not_", [
                node.operand, ast.Constant(self.where(node))]), node)
        if isinstance(node.op, ast.UAdd) and node in self.parents and \
                not isinstance(node.operand, ast.Constant):
            return ast.copy_location(runtime_call("positive", [
                node.operand, ast.Constant(self.where(node))]), node)
        return node
