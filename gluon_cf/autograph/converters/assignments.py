"""Converts assignments: checks before changing Python state that may come from outside the
call (NOTE [autograph side effects]), ``x op= y`` out of place on tensors (``augmented``), and
unpacking checked against iterating a tensor."""
import ast
from typing import List

from ..pyct.static_analysis.activity import root_name
from ..pyct.templates import counter, runtime_call, thunk, unpacked_levels
from .base import Converter
from .lists import index_value
from ..pyct.nodes import replace_statements, walk


_AUGMENTED = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
              ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "matmul",
              ast.LShift: "lshift", ast.RShift: "rshift", ast.BitAnd: "and_",
              ast.BitOr: "or_", ast.BitXor: "xor"}


def rewrite(node):
    """``x op= v`` written out of place: ``x = x op v`` (for messages)."""
    target, value = ast.unparse(node.target), ast.unparse(node.value)
    if not isinstance(node.value, (ast.Name, ast.Constant, ast.Subscript, ast.Attribute,
                                   ast.Call)):
        value = "(%s)" % value
    return "%s = %s %s %s" % (target, target, _SIGNS[type(node.op)], value)


def _pure(node):
    """Whether evaluating ``node`` twice is evaluating it once: names, constants, and items
    and attributes of them (a converted subscript or attribute read is a call of ``__ag__``
    on such parts)."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, ast.Attribute):
        return _pure(node.value)
    if isinstance(node, ast.Subscript):
        return _pure(node.value) and _pure(node.slice)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            isinstance(node.func.value, ast.Name) and node.func.value.id == "__ag__" and \
            node.func.attr in ("subscript", "attribute", "py_slice", "item_target") and \
            not node.keywords:
        return all(_pure(a) for a in node.args)
    if isinstance(node, ast.Slice):
        return all(p is None or _pure(p) for p in (node.lower, node.upper, node.step))
    if isinstance(node, ast.Tuple):
        return all(_pure(e) for e in node.elts)
    return False


def _container(value):
    """Whether ``value`` makes a new Python container: a display, a comprehension or a call
    of ``list``, ``dict``, ``set``, ``bytearray`` (converted: a call of ``__ag__``)."""
    if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp,
                          ast.SetComp)):
        return True
    func = value.func if isinstance(value, ast.Call) else None
    if isinstance(func, ast.Call) and func.args:      # (__ag__.builtin(list, where))
        func = func.args[0]
    return isinstance(func, ast.Name) and func.id in ("list", "dict", "set", "bytearray")


def _loaded(target):
    """The target ``target`` (a Store) as an expression reading it."""
    node = ast.parse(ast.unparse(target), mode="eval").body
    return ast.copy_location(node, target)


_SIGNS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
          ast.Mod: "%", ast.Pow: "**", ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>",
          ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}


class AssignmentsConverter(Converter):
    """Assignments, augmented assignments and deletions."""

    # -- side effects on Python state (NOTE [autograph side effects])
    def _effects(self, node, targets):
        """``__ag__.effect(...)`` statements to run before ``node``, which assigns (or
        deletes) ``targets``: one per attribute or item of an object that may come from
        outside, and per global or nonlocal variable."""
        if node not in self.parents:
            return []                    # written by the conversion
        scope, checks = self._scope(node), []
        for target in targets:
            for part in walk(target):
                what = name = None
                if isinstance(part, (ast.Attribute, ast.Subscript)) and \
                        isinstance(part.ctx, (ast.Store, ast.Del)):
                    root = root_name(part)
                    if root is None or scope.outer(root):
                        what = ("deletes " if isinstance(part.ctx, ast.Del) else
                                "assigns ") + ast.unparse(part)
                elif isinstance(part, ast.Name) and isinstance(part.ctx, (ast.Store, ast.Del)):
                    if part.id in scope.globals:
                        what = f"assigns the global variable {part.id!r}"
                    elif part.id in scope.nonlocals:
                        what, name = f"assigns the nonlocal variable {part.id!r}", part.id
                if what is not None:
                    checks.append(ast.copy_location(ast.Expr(value=runtime_call("effect", [
                        ast.Constant(self.where(node)), ast.Constant(what),
                        ast.Constant(name)])), node))
        return checks

    def visit_Assign(self, node):
        target = node.targets[0]
        if node in self.parents and len(node.targets) == 1 and \
                isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and \
                target.value.id in self._scope(node).bound:
            # (no static effect check: item_assigned checks the container when it runs, so
            # a helper's items[0] = v of a list the step made converts, as its append does:
            # NOTE [autograph side effects])
            checks: List[ast.stmt] = []
            # (a local: rebinding a global, nonlocal or free name would make it the
            # function's own, unbound)
            # name[i] = v: name = item_assigned(v, name, i) (NOTE [autograph item
            # assignment]; Python's order: the value, the object, the index)
            name = target.value.id
            function = self.parents.get(node)
            while function is not None and not isinstance(function, (ast.FunctionDef,
                                                                     ast.AsyncFunctionDef)):
                function = self.parents.get(function)
            function = function or self.func
            call = runtime_call("item_assigned", [
                node.value, ast.Name(id=name, ctx=ast.Load()), index_value(target.slice),
                ast.Constant(self.where(node)),
                ast.Constant(self.shared_array(function, name, node) or
                             self._given_to_calls(function, name, node))])
            node = ast.copy_location(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())],
                                                value=call), node)
            setattr(node, "ag_item_assignment", True)    # (not in a graph's if or loop)
            self.generic_visit(node)
            return checks + [node] if checks else node
        checks = self._effects(node, node.targets)
        self.generic_visit(node)
        if node in self.parents and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and _container(node.value):
            # parts = [row]: a container the graph region being traced made is its own
            # (NOTE [autograph side effects])
            node.value = runtime_call("made", [node.value])
        if node in self.parents and any(isinstance(t, (ast.Tuple, ast.List))
                                        for t in node.targets):
            node.value = runtime_call("iterated", [node.value, ast.Constant(self.where(node)),
                                                   ast.Constant("unpacking assignment")])
            target = node.targets[0]
            if len(node.targets) == 1 and isinstance(target, (ast.Tuple, ast.List)) and \
                    any(isinstance(t, (ast.Tuple, ast.List)) for t in target.elts):
                # (i, (a, b)) = v: each level unpacked as checked (a Symbol's rows)
                temp = f"__agn_{next(counter)}"
                levels = unpacked_levels(target, temp, node)
                for level in levels[1:]:
                    level.value = runtime_call("iterated", [
                        level.value, ast.Constant(self.where(node)),
                        ast.Constant("unpacking assignment")])
                node.targets = [ast.Name(id=temp, ctx=ast.Store())]
                levels[0].value = ast.Name(id=temp, ctx=ast.Load())
                return checks + [node] + levels
        return checks + [node] if checks else node

    def _given_to_calls(self, function, name, node):
        """What the message of the item assignment ``node`` says of a call that may hold the
        array of ``name`` before it (NOTE [autograph item assignment]: on an earlier line, or
        in a loop around it); None if none (``return self.proj(outputs)`` after the writes
        sees their values in both)."""
        loops, parent = [], self.parents.get(node)
        while parent is not None and parent is not function:
            if isinstance(parent, (ast.For, ast.While, ast.AsyncFor)):
                loops.append((parent.lineno, getattr(parent, "end_lineno", None) or 10**9))
            parent = self.parents.get(parent)
        found = next((s for s in self.given.get(function, {}).get(name, [])
                      if s.lineno <= node.lineno or any(
                          start <= s.lineno <= end for start, end in loops)), None)
        return None if found is None else \
            f"{name!r} may hold an array something else holds too: a call may return or " \
            f"keep it ({self.where(found)})"

    def visit_AnnAssign(self, node):
        checks = self._effects(node, [node.target]) if node.value is not None else []
        self.generic_visit(node)
        if node in self.parents and isinstance(node.target, ast.Name) and \
                node.value is not None and _container(node.value):
            node.value = runtime_call("made", [node.value])     # (parts: list = [row])
        return checks + [node] if checks else node

    def visit_Delete(self, node):
        checks = self._effects(node, node.targets)
        self.generic_visit(node)
        if node not in self.parents:
            return checks + [node] if checks else node
        # del v: v bound to a value whose every use fails, as Python's NameError (a branch
        # or step function then passes v in and out as any variable it assigns; a del made
        # v that function's own unbound local: UnboundLocalError on the branch's first read)
        scope, where = self._scope(node), ast.Constant(self.where(node))
        statements: List[ast.stmt] = []
        for target in node.targets:       # (in order, as Python deletes them)
            statement: ast.stmt
            if isinstance(target, ast.Name) and target.id not in scope.globals and \
                    target.id not in scope.nonlocals:
                statement = ast.Assign(
                    targets=[ast.Name(id=target.id, ctx=ast.Store())],
                    value=runtime_call("deleted", [thunk(ast.Name(id=target.id,
                                                                  ctx=ast.Load())),
                                                   ast.Constant(target.id), where]))
            else:
                statement = ast.Delete(targets=[target])
            statements.append(ast.copy_location(statement, node))
        return checks + statements

    # -- x op= value: out of place on tensors (NOTE [autograph])
    def visit_AugAssign(self, node):
        checks = self._effects(node, [node.target])
        node = self._augmented(node)
        return checks + [node] if checks else node

    def _augmented(self, node):
        written = rewrite(node)          # (of the code as written)
        self.generic_visit(node)
        if isinstance(node.target, (ast.Subscript, ast.Attribute)) and _pure(node.target):
            # outs[0] += v: the container holds the array (NOTE [autograph augmented
            # assignment]); its parts are names and constants, read twice as once
            read = _loaded(node.target)
            call = runtime_call("augmented", [read, node.value,
                                              ast.Constant(_AUGMENTED[type(node.op)]),
                                              ast.Constant(self.where(node)),
                                              ast.Constant("its container holds it"),
                                              ast.Constant(written)])
            return ast.copy_location(ast.Assign(targets=[node.target], value=call), node)
        if not isinstance(node.target, ast.Name):
            return node
        op = _AUGMENTED[type(node.op)]
        function = self.parents.get(node)
        while function is not None and not isinstance(function, (ast.FunctionDef,
                                                                 ast.AsyncFunctionDef)):
            function = self.parents.get(function)
        shared = self.shared_array(function or self.func, node.target.id, node)
        call = runtime_call("augmented", [ast.Name(id=node.target.id, ctx=ast.Load()), node.value,
                                          ast.Constant(op), ast.Constant(self.where(node)),
                                          ast.Constant(shared), ast.Constant(written)])
        return ast.copy_location(ast.Assign(targets=[ast.Name(id=node.target.id,
                                                              ctx=ast.Store())],
                                            value=call), node)


def _item_method(statement, name, count):
    """The ``(container, args)`` of the statement ``container.<name>(*args)`` (``count``
    positional arguments, no keyword) on a name or its items and attributes, or None."""
    call = statement.value if isinstance(statement, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and
            call.func.attr == name and len(call.args) == count and not call.keywords and
            not any(isinstance(a, ast.Starred) for a in call.args)):
        return None
    root = call.func.value
    while isinstance(root, (ast.Attribute, ast.Subscript)):
        root = root.value
    return (call.func.value, call.args) if isinstance(root, ast.Name) else None


def item_methods_as_subscripts(func):
    """``d.__setitem__(k, v)`` and ``d.__delitem__(k)`` as statements: ``d[k] = v`` and
    ``del d[k]``, which Python runs by the same methods of the container's type, converted as
    those are (a tensor loop's side effect on a Python container refused at the line, a dict
    of a loop's own carried; it was an AssertionError of the loop's plumbing)."""
    def rewritten(statement):
        new: ast.stmt
        found = _item_method(statement, "__setitem__", 2)
        if found is not None:
            container, (key, value) = found
            new = ast.Assign(targets=[ast.Subscript(value=container, slice=key,
                                                    ctx=ast.Store())], value=value)
        else:
            found = _item_method(statement, "__delitem__", 1)
            if found is None:
                return None
            new = ast.Delete(targets=[ast.Subscript(value=found[0], slice=found[1][0],
                                                    ctx=ast.Del())])
        for node in ast.walk(new):
            ast.copy_location(node, statement)
        return [new]
    replace_statements(func, rewritten)
