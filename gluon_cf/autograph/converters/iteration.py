"""Converts comprehensions, generator expressions and ``*x`` unpacking into code that refuses
to iterate a tensor at run time (NOTE [autograph iteration])."""
import ast

from ..pyct.static_analysis.activity import has_walrus
from ..pyct.templates import runtime_call, thunk
from .base import Converter


class IterationConverter(Converter):
    """Comprehensions, generator expressions, ``*x`` and set displays."""

    # -- comprehensions, generator expressions and *x on tensors are refused
    def _comprehension(self, node):
        self.generic_visit(node)
        for generator in node.generators:
            generator.iter = runtime_call("iterated", [
                generator.iter, ast.Constant(self.where(node)), ast.Constant("comprehension")])
            # (its ifs take their tests' truth: a Symbol's is refused at the line)
            generator.ifs = [ast.copy_location(runtime_call("filtered", [
                test, ast.Constant(self.where(node))]), test) for test in generator.ifs]
        if isinstance(node, (ast.SetComp, ast.DictComp)) and not has_walrus(node):
            # (a Symbol's hash refused at the line, not Python's TypeError; := would bind
            # in the thunk)
            return ast.copy_location(runtime_call("hashed", [
                thunk(node), ast.Constant(self.where(node))]), node)
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_Set(self, node):
        # ({*outs}, {h, c}: a Symbol's hash refused at the line, not Python's TypeError)
        self.generic_visit(node)
        if all(isinstance(e, ast.Constant) for e in node.elts) or has_walrus(node):
            return node
        return ast.copy_location(runtime_call("hashed", [
            thunk(ast.Set(node.elts)), ast.Constant(self.where(node))]), node)

    def visit_Starred(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and not (isinstance(node.value, ast.Name) and
                                                   node.value.id in self.collected_names):
            node.value = runtime_call("iterated", [node.value, ast.Constant(self.where(node)),
                                                   ast.Constant("unpacking (*)")])
        return node
