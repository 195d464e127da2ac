"""Converts calls: the functions and methods converted code calls go through ``converted``
(the user's are converted when called, NOTE [autograph calls]), builtins that iterate are
checked and ``print`` warns in a graph region, ``F.stack(*items)`` of a collected list is
computed from its rows, ``setattr``/``delattr`` and mutating methods on outside objects are
checked, and zero-argument ``super()`` and private names compile as the class body would."""
import ast
import copy

from ..operators.py_builtins import ITERATING
from ..pyct.static_analysis.activity import COMPREHENSIONS, MUTATORS, root_name
from ..pyct.templates import runtime_call
from .base import Converter

# Names that hold library modules by convention (F: hybrid_forward's mx.nd or mx.sym): calls
# of their attributes are library calls, left as they are (converted() would return them);
# __ag__ is the run-time operators.
_LIBRARY_NAMES = {"F", "mx", "nd", "sym", "np", "math", "gluon_cf", "autograd", "__ag__"}
# autograd.is_training() and is_recording(): the graph being traced is one for the call's
# mode (NOTE [graphs traced for input shapes] in gluon_cf/hybrid.py)
_MODE_READERS = {"is_training", "is_recording"}
# autograd's scopes: refused while a graph is traced (NOTE [autograd scopes in a graph])
_MODE_SCOPES = {"pause", "predict_mode", "train_mode", "record"}
# F's functions that join a list's items with other arrays (F.concat(start, *items, dim=0)):
# computed from a collected list's rows (NOTE [autograph lists])
_JOINING = {"concat", "Concat", "stack", "add_n", "ElementWiseSum"}
# builtins that read the iterables they are given (zip, map... as their results are read, in
# the step): an iterator's items are consumed
_CONSUMING = {"next", "sum", "list", "tuple", "sorted", "min", "max", "any", "all", "set",
              "frozenset", "dict", "zip", "map", "filter", "enumerate"}

# builtins that look at what they are given without reading its items
_INSPECTING = {"isinstance", "issubclass", "type", "id", "hasattr", "getattr", "callable",
               "repr", "str", "hash", "vars", "dir", "setattr", "delattr"}


# what makes a scope of its own, whose first parameter a zero-argument super() takes
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_SCOPES = _FUNCTIONS + COMPREHENSIONS


def _is_builtin_call(func, name):
    """Whether ``func`` is converted code's ``__ag__.builtin(<name>, where)``."""
    return isinstance(func, ast.Call) and getattr(func.func, "attr", None) == "builtin" and \
        bool(func.args) and isinstance(func.args[0], ast.Name) and func.args[0].id == name


# an NDArray's attributes (not methods) a call may read: ``x.dtype(2)`` reads ``x.dtype``
# as ``__ag__.attribute`` does, refused on a Symbol at the line (it was MXNet's
# AttributeError)
_CALLED_METADATA = frozenset({"dtype", "context", "ctx", "stype", "grad", "shape", "size"})


class CallTreesConverter(Converter):
    """Calls, attributes (private names) and ``super()``."""

    # -- super() and private names, as the class body would have compiled them
    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and node.args and \
                node in self.parents:
            root = root_name(node.args[0])
            if root is None or self._scope(node).outer(root):
                node.func = runtime_call("changing", [func, ast.Constant(self.where(node))])
        if isinstance(func, ast.Attribute) and func.attr in MUTATORS and node in self.parents:
            root = root_name(func.value)
            if not (isinstance(func.value, ast.Name) and
                    self._collecting(node, func.value.id)) and \
                    (root is None or self._scope(node).outer(root)):
                func.value = runtime_call("mutable", [func.value, ast.Constant(self.where(node)),
                                                      ast.Constant(func.attr)])
        starred = [a for a in node.args if isinstance(a, ast.Starred)]
        collected = len(starred) == 1 and self._collected(starred[0].value)
        self.generic_visit(node)
        if collected and isinstance(starred[0].value, ast.Call) and \
                getattr(starred[0].value.func, "attr", None) == "iterated":
            starred[0].value = starred[0].value.args[0]   # (the list itself: unpacked's)
        if collected and isinstance(starred[0].value, ast.Call) and \
                isinstance(starred[0].value.func, ast.Attribute) and \
                starred[0].value.func.attr == "collected_item":
            # *outs[1:]: the rows the slice keeps, the list's length unread (control_flow)
            starred[0].value.func.attr = "unpacked_slice"
        if collected and isinstance(starred[0].value, ast.Call) and \
                _is_builtin_call(starred[0].value.func, "reversed") and \
                len(starred[0].value.args) == 1:
            # *reversed(outs): the rows backwards, the list's length unread (list_parts)
            starred[0].value = runtime_call("unpacked_reversed", [
                starred[0].value.func, starred[0].value.args[0],
                ast.Constant(self.where(node))])
        if collected and (
                len(node.args) == 1 or getattr(node.func, "attr", None) in _JOINING):
            # F.stack(*outs, ...), F.concat(h0, *outs, dim=0) of a list a tensor loop
            # collected (NOTE [autograph lists])
            keywords = ast.Dict(keys=[ast.Constant(k.arg) for k in node.keywords],
                                values=[k.value for k in node.keywords])
            if any(k.arg is None for k in node.keywords):
                return node
            at = node.args.index(starred[0])
            return ast.copy_location(runtime_call("unpacked", [
                node.func, starred[0].value, keywords, ast.Constant(self.where(node)),
                ast.Tuple(elts=node.args[:at], ctx=ast.Load()),
                ast.Tuple(elts=node.args[at + 1:], ctx=ast.Load())]), node)
        if starred and getattr(node.func, "attr", None) in _JOINING and \
                all(k.arg is not None for k in node.keywords):
            # F.concat(*a, *b, dim=0), F.stack(*tail) of a list bound to another name: which
            # parts are collected lists is known at run time (NOTE [autograph lists])
            keywords = ast.Dict(keys=[ast.Constant(k.arg) for k in node.keywords],
                                values=[k.value for k in node.keywords])
            return ast.copy_location(runtime_call("unpacked_parts", [
                node.func,
                ast.Tuple(elts=[a.value if isinstance(a, ast.Starred) else a
                                for a in node.args], ctx=ast.Load()),
                ast.Tuple(elts=[ast.Constant(isinstance(a, ast.Starred)) for a in node.args],
                          ctx=ast.Load()),
                keywords, ast.Constant(self.where(node))]), node)
        # The functions and methods it calls, `helper(x)`, `self.method(x)`, `obj.step(h)`,
        # are converted when called if they are user code (NOTE [autograph calls]).
        if isinstance(node.func, ast.Name) and node.func.id in ITERATING:
            if node.func.id in _CONSUMING:
                node.args = [self._consumed(a, node) if isinstance(a, ast.Name) else a
                             for a in node.args]
            node.func = runtime_call("builtin", [node.func, ast.Constant(self.where(node))])
            return node
        if isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            # (getattr(x, "dtype", None) on a Symbol: NOTE [autograph indexing])
            node.func = runtime_call("attribute_builtin", [node.func,
                                                           ast.Constant(self.where(node))])
            return node
        if isinstance(node.func, ast.Name) and node.func.id == "print":
            node.func = runtime_call("printing", [node.func, ast.Constant(self.where(node))])
            return node
        named = isinstance(node.func, ast.Name) and \
            node.func.id not in ("super", "len", "max_iterations") or \
            isinstance(node.func, ast.Attribute) and \
            root_name(node.func.value) not in _LIBRARY_NAMES and \
            root_name(node.func.value) not in self.collected_names or \
            not isinstance(node.func, (ast.Name, ast.Attribute, ast.Lambda)) or \
            isinstance(node.func, ast.Attribute) and \
            node.func.attr in _MODE_READERS | _MODE_SCOPES
        own = isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS and \
            isinstance(node.func.value, ast.Name) and node in self.parents and \
            not self._scope(node).outer(node.func.value.id)
        if named and not (isinstance(node.func, ast.Name) and node.func.id in _INSPECTING):
            # a Python iterator given to a call (parts.extend(it), itertools.islice(it, 1), a
            # helper's next(it)) is consumed as a builtin's argument is
            node.args = [self._consumed(a, node) if isinstance(a, ast.Name) else a
                         for a in node.args]
        if named and own:
            # (parts = [] ... parts.append(r): a container this call made, changed as it is;
            # NOTE [autograph side effects])
            node.func = ast.BoolOp(op=ast.Or(), values=[
                runtime_call("own_method", [node.func, ast.Constant(self.where(node))]),
                runtime_call("converted", [copy.deepcopy(node.func)])])
        elif named:
            node.func = runtime_call("converted", [node.func])
        if isinstance(node.func, ast.Name) and node.func.id == "super" and not node.args \
                and self.self_name is not None:
            node.args = self._super_arguments(node)
        return node

    def _collecting(self, node, name):
        """Whether a loop around the call ``node`` (in its function) collects the list
        ``name`` (its append is the loop's: NOTE [autograph lists]); elsewhere, a method
        changing such a list (``def drop(): outs.pop()`` called under a tensor if) is
        checked as any list's."""
        parent = self.parents.get(node)
        while parent is not None and not isinstance(parent, _SCOPES):
            if name in self.collected.get(parent, ()):
                return True
            parent = self.parents.get(parent)
        return False

    def _super_arguments(self, node):
        """The arguments Python gives the zero-argument ``super()`` at ``node``: the class
        and the first parameter of the function it is in, which may be a nested function or
        lambda (none: Python's RuntimeError) or a comprehension (its iterator: Python's
        TypeError); the converted method's own ``self`` only in the method itself."""
        at = node
        while True:
            path, parent = [at], self.parents.get(at)
            while parent is not None and not isinstance(parent, _SCOPES):
                path, parent = path + [parent], self.parents.get(parent)
            if isinstance(parent, _FUNCTIONS) and parent is not self.func and \
                    path[-1] not in (parent.body if isinstance(parent.body, list) else
                                     [parent.body]):
                # a default, an annotation or a decorator: evaluated in the scope around
                # (``def f(v, k=super().one())``: the method's self)
                at = parent
                continue
            if not isinstance(parent, COMPREHENSIONS):
                break
            if not (len(path) > 1 and path[-1] is parent.generators[0] and
                    path[-2] is parent.generators[0].iter):
                # (a comprehension's first parameter is the iterator of its first iterable,
                # not an instance of the class: `[super().f() for _ in range(2)]` is Python's
                # TypeError "super(type, obj): obj must be an instance or subtype of type",
                # which the runtime module, never an instance either, gives as well)
                return [ast.Name(id="__class__", ctx=ast.Load()),
                        ast.Name(id="__ag__", ctx=ast.Load())]
            at = parent       # (its first iterable runs in the scope around it)
        if parent is None or parent is self.func:
            first = self.self_name
        else:
            arguments = parent.args
            positional = arguments.posonlyargs + arguments.args
            first = positional[0].arg if positional else None
        if first is None:
            return []       # (Python's RuntimeError: super(): no arguments)
        return [ast.Name(id="__class__", ctx=ast.Load()), ast.Name(id=first, ctx=ast.Load())]

    def _collected(self, expr):
        """Whether ``expr`` is a list a tensor loop collected, a slice of it or ``reversed``
        of it, ``reversed`` of it, or these of those (``F.stack(*outs[-2:])``,
        ``F.stack(*reversed(outs))``, ``F.stack(*reversed(outs[1:]))``, ``outs[1:][-2:]``)."""
        while True:
            if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and \
                    expr.func.id == "reversed" and len(expr.args) == 1 and not expr.keywords:
                expr = expr.args[0]
            elif isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Slice):
                expr = expr.value
            else:
                break
        return isinstance(expr, ast.Name) and expr.id in self.collected_names

    def _mangle(self, name):
        if self.owner and name.startswith("__") and not name.endswith("__"):
            return "_%s%s" % (self.owner.lstrip("_"), name)
        return name

    def visit_Attribute(self, node):
        self.generic_visit(node)
        node.attr = attr = self._mangle(node.attr)
        parent = self.parents.get(node)
        above = parent
        while isinstance(above, ast.Attribute):
            above = self.parents.get(above)
        if parent is None or not isinstance(node.ctx, ast.Load) or \
                isinstance(above, (ast.MatchValue, ast.MatchClass, ast.MatchMapping)) or \
                isinstance(parent, ast.Call) and parent.func is node and \
                attr not in _CALLED_METADATA or root_name(node.value) in _LIBRARY_NAMES:
            return node
        # an NDArray's attributes on a Symbol, properties of user classes
        # (NOTE [autograph indexing]); a pattern's (case Mode.A:, case self.Kind():,
        # case {Reg.key: v}:) is Python's: a call there does not compile
        return ast.copy_location(runtime_call("attribute", [
            node.value, ast.Constant(node.attr), ast.Constant(self.where(node))]), node)
