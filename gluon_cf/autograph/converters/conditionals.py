"""Converts ``if`` statements (into ``if_stmt``, ``if_return`` or a checked Python ``if``) and
conditional expressions (into ``if_exp``), NOTE [autograph]."""
import ast
from typing import List

from ..operators.conditionals import RAISES
from ..pyct.static_analysis.activity import assigned_names, has_walrus, mutated_names, \
    scoped
from ..pyct.static_analysis.definite_assignment import always_returns, definitely_assigned
from ..pyct.templates import counter, located, names_tuple, runtime_call, thunk
from .base import Converter, not_a_graph
from ..pyct.nodes import walk


class ConditionalsConverter(Converter):
    """``if`` statements, ``match`` statements and conditional expressions."""

    # -- match statements: Python's, a tensor's truth refused (NOTE [autograph match])
    def visit_Match(self, node):
        self.generic_visit(node)
        compares = any(isinstance(part, ast.MatchValue) for case in node.cases
                       for part in walk(case.pattern))
        # value patterns written as dotted names (case Reg.cur:) read as the subject's
        # copies (list_parts.MatchValues), each when Python's match reads it
        dotted = [part for case in node.cases for part in walk(case.pattern)
                  if isinstance(part, ast.MatchValue) and isinstance(part.value, ast.Attribute)]
        values = ast.Name(f"__ag_values_{next(counter)}", ast.Load())
        reads = runtime_call("MatchValues", [ast.Tuple([thunk(part.value) for part in dotted],
                                                       ast.Load()),
                                             ast.Constant(self.where(node))])
        for k, part in enumerate(dotted):
            part.value = ast.copy_location(ast.Attribute(values, f"v{k}", ast.Load()),
                                           part.value)
        subject = runtime_call("match_items", [node.subject, ast.Constant(self.where(node)),
                                               values if dotted else ast.Constant(None)])
        node.subject = ast.copy_location(runtime_call("match_subject", [
            subject, ast.Constant(self.where(node)), ast.Constant(compares)]), node.subject)
        for case in node.cases:
            # (a star's list, a mapping's **rest: their items rebound, NOTE [autograph match])
            rests = {n for part in walk(case.pattern) for n in (
                getattr(part, "name", None) if isinstance(part, ast.MatchStar) else
                getattr(part, "rest", None) if isinstance(part, ast.MatchMapping) else None,)
                if n}
            captured = sorted(rests | {part.name for part in walk(case.pattern)
                                       if isinstance(part, ast.MatchAs) and part.name})

            def originals(names):
                return runtime_call("match_originals", [
                    ast.Tuple([ast.Name(n, ast.Load()) for n in names], ast.Load()),
                    ast.Tuple([ast.Constant(n in rests) for n in names], ast.Load())])
            if captured:      # (the objects themselves where the subject's were copied)
                case.body.insert(0, ast.copy_location(ast.Assign(
                    targets=[ast.Tuple([ast.Name(n, ast.Store()) for n in captured],
                                       ast.Store())],
                    value=originals(captured)), case.body[0]))
            if case.guard is not None:
                # (the guard too: n := match_originals((n,), ...)[0] for each, then the guard)
                guard = ast.copy_location(ast.Subscript(ast.Tuple([ast.NamedExpr(
                    ast.Name(n, ast.Store()), ast.Subscript(originals([n]),
                                                            ast.Constant(0), ast.Load()))
                    for n in captured] + [case.guard], ast.Load()), ast.Constant(-1),
                    ast.Load()), case.guard) if captured else case.guard
                case.guard = ast.copy_location(runtime_call("match_guard", [
                    guard, ast.Constant(self.where(case.guard))]), case.guard)
        if not dotted:
            return node
        return located([ast.Assign(targets=[ast.Name(values.id, ast.Store())], value=reads),
                        node], node)

    # -- if statements
    def visit_If(self, node):
        mutated = mutated_names(node.body + node.orelse)
        # the cells the branches assign, as written (an inner returning if hides its own
        # assignments in its branch functions; these branches must still start from theirs)
        cells_assigned = (assigned_names(node.body) | assigned_names(node.orelse)) & \
            self._scope(node).cells
        # (before the inner ifs and loops move into functions of their own)
        raises = any(isinstance(part, (ast.Raise, ast.Assert))
                     for part in scoped(node.body + node.orelse))
        # (a branch may leave them unassigned: NOTE [what only a handler reads])
        optional = self.handler_only[node] - definitely_assigned(node) - \
            self._scope(node).cells
        self.generic_visit(node)          # inner ifs first
        where = self.where(node)
        node.test = self._no_outer_lists(
            node.test, mutated, where,
            "code after a break, continue or return" if getattr(node, "ag_guard", False)
            else "if")
        returns = always_returns(node.body) and always_returns(node.orelse)
        why = not_a_graph(node.body + node.orelse, allow_return=returns)
        if raises and not why:
            # traced, both branches would run: the raise (or a failing assert) would fire
            # whatever the input (NOTE [autograph side effects])
            why = RAISES
        if why:
            node.test = runtime_call("python_if", [node.test, ast.Constant(where),
                                                   ast.Constant(why)])
            return node
        number = next(counter)
        scope = self._scope(node)
        assigned = sorted(assigned_names(node.body) | assigned_names(node.orelse) | cells_assigned |
                          scope.written_by_calls(node.body + node.orelse))
        cells = scope.cells
        if returns:                       # both branches return: the if is the return value
            then_fn = self._loop_function(f"__ag_then_{number}", assigned, node.body, None,
                                          cells)
            else_fn = self._loop_function(f"__ag_else_{number}", assigned, node.orelse, None,
                                          cells)
            call = runtime_call("if_return", [
                node.test, ast.Name(id=then_fn.name, ctx=ast.Load()),
                ast.Name(id=else_fn.name, ctx=ast.Load()), self._current(assigned, where),
                ast.Constant(where),
                ast.Tuple(elts=[ast.Constant(n) for n in assigned], ctx=ast.Load()),
                ast.Constant(getattr(node, "ag_loop_return", False))])
            statements = [then_fn, else_fn, self._escaping(ast.Return(value=call), assigned,
                                                           number)]
            return located(statements, node)
        live = self.live[node]
        self._record_readers(node, assigned)
        out = names_tuple(assigned)
        then_fn = self._loop_function(f"__ag_then_{number}", assigned, node.body, out, cells)
        else_fn = self._loop_function(f"__ag_else_{number}", assigned,
                                      node.orelse or [ast.Pass()], out, cells)
        call = runtime_call("if_stmt", [
            node.test, ast.Name(id=then_fn.name, ctx=ast.Load()),
            ast.Name(id=else_fn.name, ctx=ast.Load()), self._current(assigned, where),
            ast.Tuple(elts=[ast.Constant(n) for n in assigned], ctx=ast.Load()),
            ast.Tuple(elts=[ast.Constant(n in live) for n in assigned], ctx=ast.Load()),
            ast.Constant(where), ast.Constant(getattr(node, "ag_guard", False))])
        call.keywords.append(ast.keyword(arg="optional", value=ast.Tuple(
            elts=[ast.Constant(n) for n in assigned if n in optional], ctx=ast.Load())))
        statements = [then_fn, else_fn, self._escaping(self._assign(assigned, call), assigned,
                                                       number)]
        return located(statements, node)

    # -- expressions: conditional expressions and boolean operators
    def visit_IfExp(self, node):
        # (as written, for the message of a number side on a tensor test)
        texts: List[ast.expr] = [ast.Constant(ast.unparse(part)) for part in (
            node.test, node.body, node.orelse)]
        sources = ast.Tuple(elts=texts + [ast.Constant(all(
            _number(part) for part in (node.body, node.orelse)))], ctx=ast.Load())
        self.generic_visit(node)
        where = self.where(node)
        if has_walrus(node.body) or has_walrus(node.orelse):
            # its sides would become lambdas, where x := would bind: Python's, a Symbol test
            # refused at the line (Python would take its truth)
            node.test = runtime_call("python_operand", [node.test, ast.Constant(where),
                                                        ast.Constant("conditional expression")])
            return node
        return ast.copy_location(runtime_call("if_exp", [
            node.test, thunk(node.body), thunk(node.orelse), ast.Constant(where), sources]),
            node)


def _number(node):
    """Whether ``node`` is a number written as one (``2``, ``-0.5``)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and \
        not isinstance(node.value, bool)
