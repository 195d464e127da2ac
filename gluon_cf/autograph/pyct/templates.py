"""The pieces of syntax the converters build: calls of the run-time operators (``__ag__.name``),
thunks, tuples of names, flag assignments, and the numbers that keep generated names unique."""
import ast
import copy
import itertools


counter = itertools.count(1)


def runtime_call(name, args):
    return ast.Call(func=ast.Attribute(value=ast.Name(id="__ag__", ctx=ast.Load()), attr=name,
                                       ctx=ast.Load()), args=args, keywords=[])


def thunk(expression):
    """``lambda: expression``, called where it is written (not a closure of the user's)."""
    thunk = ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                          kw_defaults=[], kwarg=None, defaults=[]),
                       body=expression)
    setattr(thunk, "ag_thunk", True)
    return thunk


def names_tuple(names):
    """The tuple expression ``(name_1, name_2, ...)``."""
    return ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Load()) for n in names], ctx=ast.Load())


def located(statements, node):
    """``statements`` (what ``node`` was rewritten into) at ``node``'s source position."""
    for statement in statements:
        ast.copy_location(statement, node)
    return statements


def unpacked_levels(target, name, located_at):
    """``target = name`` (``target`` a tuple or list) as one assignment per level of it
    (``i, (a, b) = v``: ``i, v_0 = v; a, b = v_0``), each of which converted code checks as
    it unpacks a tensor (a Symbol yields itself once, not its rows)."""
    items: list = []
    inner: list = []
    for item in target.elts:
        if isinstance(item, (ast.Tuple, ast.List)):
            temp = f"{name}_{len(inner)}"
            inner.append((item, temp))
            item = ast.Name(id=temp, ctx=ast.Store())
        items.append(item)
    flat = type(target)(elts=items, ctx=ast.Store())
    statements = [ast.copy_location(ast.Assign(targets=[flat], value=ast.Name(
        id=name, ctx=ast.Load())), located_at)]
    for item, temp in inner:
        statements += unpacked_levels(item, temp, located_at)
    return statements


def assign_constant(name, value):
    return ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=ast.Constant(value))


def running_test(flags):
    return runtime_call("running", [ast.Name(id=f, ctx=ast.Load()) for f in flags])


def unparse(tree):
    """The source of ``tree``, as ``ast.unparse``; where that fails (before Python 3.12 an
    f-string's expression cannot hold a backslash, and the converted code's located strings
    quote the user's line, ``end="\\r"`` and all) its f-strings are written as the
    ``"".join(format(...))`` they compute."""
    try:
        return ast.unparse(tree)
    except ValueError:
        return ast.unparse(_FormattedAsCalls().visit(copy.deepcopy(tree)))


class _FormattedAsCalls(ast.NodeTransformer):
    """``f"a{v!r:>4}"`` as ``"".join(("a", format(repr(v), ">4")))``: the value of each
    piece, converted (``!s``/``!r``/``!a``) and then formatted with its spec."""
    _CONVERSIONS = {ord("s"): "str", ord("r"): "repr", ord("a"): "ascii"}

    def visit_JoinedStr(self, node):
        self.generic_visit(node)
        return ast.Call(func=ast.Attribute(value=ast.Constant(""), attr="join",
                                           ctx=ast.Load()),
                        args=[ast.Tuple(elts=list(node.values), ctx=ast.Load())], keywords=[])

    def visit_FormattedValue(self, node):
        self.generic_visit(node)
        value = node.value
        if node.conversion in self._CONVERSIONS:
            value = ast.Call(func=ast.Name(id=self._CONVERSIONS[node.conversion],
                                           ctx=ast.Load()), args=[value], keywords=[])
        spec = [node.format_spec] if node.format_spec is not None else []
        return ast.Call(func=ast.Name(id="format", ctx=ast.Load()), args=[value] + spec,
                        keywords=[])
