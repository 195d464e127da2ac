"""The pieces of syntax the converters build: calls of the run-time operators (``__ag__.name``),
thunks, tuples of names, flag assignments, and the numbers that keep generated names unique."""
import ast
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


def assign_constant(name, value):
    return ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=ast.Constant(value))


def running_test(flags):
    return runtime_call("running", [ast.Name(id=f, ctx=ast.Load()) for f in flags])
