"""Converts comprehensions, generator expressions and ``*x`` unpacking into code that refuses
to iterate a tensor at run time (NOTE [autograph iteration])."""
import ast

from ..pyct.templates import runtime_call, thunk
from .base import Converter


_FRAME_READERS = {"locals", "vars", "eval", "exec", "super", "dir", "globals", "__class__"}


class IterationConverter(Converter):
    """Comprehensions, generator expressions, ``*x`` and set and dict displays."""

    # -- comprehensions, generator expressions and *x on tensors are refused
    def _comprehension(self, node):
        self.generic_visit(node)
        for generator in node.generators:
            generator.iter = runtime_call("iterated", [
                generator.iter, ast.Constant(self.where(node)), ast.Constant("comprehension")])
            # (its ifs take their tests' truth: a Symbol's is refused at the line)
            generator.ifs = [ast.copy_location(runtime_call("filtered", [
                test, ast.Constant(self.where(node))]), test) for test in generator.ifs]
        if isinstance(node, (ast.SetComp, ast.DictComp)):
            return self._hashed(node)
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_Set(self, node):
        # ({*outs}, {h, c}: a Symbol's hash refused at the line, not Python's TypeError)
        self.generic_visit(node)
        if all(isinstance(e, ast.Constant) for e in node.elts):
            return node
        return self._hashed(node)

    def visit_Dict(self, node):
        # ({h: 1}: a key that is a tensor, its hash refused at the line; {"h": h} as it is)
        self.generic_visit(node)
        if all(k is None or isinstance(k, ast.Constant) for k in node.keys):
            return node
        return self._hashed(node)

    def _hashed(self, node):
        """A set or dict display or comprehension ``node`` as ``hashed(lambda: node)``, where
        the lambda cannot change what it computes: not where it binds (``:=``), yields, or
        reads its frame or class (``locals()``, ``vars()``, ``eval``, ``super()``,
        ``sys._getframe``: the lambda's own), which stay as they are."""
        if any(isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) or
               isinstance(n, ast.Name) and n.id in _FRAME_READERS or
               isinstance(n, ast.Attribute) and n.attr == "_getframe" for n in ast.walk(node)):
            return node
        return ast.copy_location(runtime_call("hashed", [
            thunk(node), ast.Constant(self.where(node))]), node)

    def visit_Starred(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and not (isinstance(node.value, ast.Name) and
                                                   node.value.id in self.collected_names):
            node.value = runtime_call("iterated", [node.value, ast.Constant(self.where(node)),
                                                   ast.Constant("unpacking (*)")])
        return node
