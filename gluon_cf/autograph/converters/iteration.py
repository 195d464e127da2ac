"""Converts comprehensions, generator expressions and ``*x`` unpacking into code that refuses
to iterate a tensor at run time (NOTE [autograph iteration])."""
import ast

from ..pyct.templates import runtime_call
from .base import Converter


class IterationConverter(Converter):
    """Comprehensions, generator expressions and ``*x``."""
    # (a set or dict display or comprehension stays as written: a Symbol's hash is refused
    # where Python's TypeError surfaces, NOTE [a hashed Symbol])

    # -- comprehensions, generator expressions and *x on tensors are refused
    def _comprehension(self, node):
        self.generic_visit(node)
        for generator in node.generators:
            generator.iter = runtime_call("iterated", [
                generator.iter, ast.Constant(self.where(node)), ast.Constant("comprehension")])
            # (its ifs take their tests' truth: a Symbol's is refused at the line)
            generator.ifs = [ast.copy_location(runtime_call("filtered", [
                test, ast.Constant(self.where(node))]), test) for test in generator.ifs]
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_Starred(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and not (isinstance(node.value, ast.Name) and
                                                   node.value.id in self.collected_names):
            node.value = runtime_call("iterated", [node.value, ast.Constant(self.where(node)),
                                                   ast.Constant("unpacking (*)")])
        return node
