"""The conversion driver: reads a function's source, runs the converters over its syntax tree
(jumps first, then one pass of the construct converters), compiles the result under the
user's file name and line numbers with the run-time operators reachable as ``__ag__``, and
converts the functions converted code calls (:func:`converted`).

NOTE [autograph]
    The decorator reads the function's source once, when it decorates, and rewrites every
    ``if`` statement into a call of ``if_stmt`` with its two branches as local functions:

        if x.sum() > 0:                    def __ag_then_1(y):
            y = x * 2                          y = x * 2
        else:                      ->          return (y,)
            y = -x                         def __ag_else_1(y):
                                               y = -x
                                               return (y,)
                                           (y,) = __ag__.if_stmt(x.sum() > 0, __ag_then_1,
                                                                 __ag_else_1, (...current y...),
                                                                 ...)

    The variables a branch assigns are its parameters (their values before the ``if``, or
    ``Undefined`` where there were none) and its results. Which of them are read after the
    ``if`` (*live*) is found by liveness over the function's statements: following statements
    in the same and enclosing blocks, and the whole body of an enclosing loop. At run time
    ``if_stmt`` decides: a Python predicate runs plain Python; an NDArray predicate (eager)
    runs the branch it selects, as ``cond`` does eagerly; a Symbol predicate (hybridizing)
    becomes ``gluon_cf.cond``, both branches traced, whose outputs are the live variables that
    are arrays. A live variable assigned in only one branch, an array in one branch and a
    Python value in the other, or Python values that differ between the branches is an
    AutographError naming the variable and the ``if``'s line.

    The converted function is compiled under the original file name and line numbers, so
    tracebacks land on the user's lines, and its graph nodes are named after them
    (``model_line12_while``); zero-argument ``super()`` and private names (``self.__x``) are
    rewritten as the class body would have compiled them. ``x += y`` on a tensor is
    ``x = x + y`` (an NDArray's ``+=`` writes through every alias and fails under autograd;
    a Symbol's never did), in place on anything else. An ``if`` whose branches ``yield``, use
    ``global``/``nonlocal`` or assign attributes or items is left as Python and fails with an
    AutographError when its predicate is a tensor.

    The rule set: autograph never changes a value. A construct on a tensor is converted when
    its graph computes what Python computes, eagerly and hybridized, values and gradients;
    otherwise it is an AutographError at the first trace (or when decorating), beginning with
    the construct's ``file:line: source`` and saying what to write instead. Python values
    keep Python's semantics (the rewritten code runs as Python on them). The notes beside the
    code say what converts; everything on a tensor that a graph traced once cannot express is
    refused, and the refusals are listed where they arise: NOTE [autograph closures]
    (``pyct/static_analysis/activity.py``), NOTE [autograph side effects]
    (``operators/side_effects.py``), NOTE [autograph iteration] (``operators/py_builtins.py``),
    NOTE [autograph jumps] (``converters/jumps.py``), NOTE [autograph loops]
    (``operators/control_flow.py``) and NOTE [autograph lists]
    (``operators/data_structures.py``).

NOTE [autograph calls]
    As TF AutoGraph does, converted code converts the user's functions it calls, recursively,
    and not library code: a call ``helper(x)``, ``self.method(x)`` or ``obj.step(h)`` becomes
    ``__ag__.converted(helper)(x)``, and :func:`converted` converts a plain function or method
    (once, cached on it) whose file is not library code, whatever its module: not the standard
    library, not an installed package (site-packages), not gluon_cf. So a helper in another
    module of the user's, or a method of another of the user's objects, changing Python state
    inside a tensor ``if`` or loop is refused at its line (NOTE [autograph side effects]),
    never run once silently, and its own ``if``/``while``/``for`` on tensors convert.
    Gluon blocks (``self.fc(x)``: their ``hybrid_forward`` is the block's business), MXNet,
    builtins, functions wrapped by a decorator (``__wrapped__``: the decorator must run) and
    the nested functions converted with their enclosing function run as they are; so does a
    function without source to read (a lambda, ``exec``). Calls of attributes of the names
    ``F``, ``mx``, ``np`` ... are not wrapped (library modules by convention). ``print`` in a
    tensor ``if`` or loop runs once, while tracing, and prints Symbols: it warns once per line
    (``printing``), since refusing a debugging aid would be harsher than the harm.

    Calls: NOTE [autograph calls].

    Expressions: ``a if test else b`` becomes ``if_exp`` (``cond`` on a Symbol test),
    ``and``/``or``/``not`` become ``and_``/``or_``/``not_``, which keep Python's
    short-circuit semantics on Python values and are the elementwise logical operations on
    tensors (0 or 1; every operand evaluated, as a graph must).
"""
import ast
import functools
import inspect
import os
import site
import sysconfig
import textwrap
import types
from typing import Dict, List, Optional, Tuple

from .. import operators
from ..converters.assignments import AssignmentsConverter
from ..converters.call_trees import CallTreesConverter
from ..converters.conditionals import ConditionalsConverter
from ..converters.iteration import IterationConverter
from ..converters.lists import ListsConverter, collected_lists
from ..converters.logical_expressions import LogicalConverter
from ..converters.loops import LoopsConverter
from ..converters.jumps import lower_jumps
from ..errors import AutographError
from ..pyct.static_analysis.activity import Scope
from ..pyct.static_analysis.liveness import exposed_names, live_after


def convert_function(fn, max_iterations=None):
    filename = inspect.getsourcefile(fn) or "<unknown>"
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as err:
        raise AutographError(f"{filename}: gluon_cf.autograph needs the source of "
                             f"{fn.__qualname__!r}, which Python cannot find ({err}); define it "
                             f"in a file or a notebook cell, not with exec or as a lambda") \
            from None
    tree = ast.parse(textwrap.dedent("".join(lines)))
    func = tree.body[0]
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise AutographError(f"{filename}:{first}: gluon_cf.autograph converts functions, got "
                             f"{type(func).__name__}")
    func.decorator_list = []          # the converted function is not decorated again
    owner = _owner_class(fn)
    _Rewriter(filename, first - 1, lines, owner, max_iterations).convert(func)
    freevars = fn.__code__.co_freevars
    factory = ast.FunctionDef(
        name="__ag_factory", args=ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=name) for name in freevars], vararg=None,
            kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=[func, ast.Return(value=ast.Name(id=func.name, ctx=ast.Load()))],
        decorator_list=[], returns=None)
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, first - 1)
    code_text = ast.unparse(func)
    # The converted function shares the original's globals (names defined later in the module
    # stay visible; the runtime is reachable as __ag__) and its closure cells, so a method's
    # __class__ cell, filled only once the class exists, serves super() in both.
    fn.__globals__.setdefault("__ag__", _runtime())
    factory_code = _code_named(compile(module, filename, "exec"), "__ag_factory")
    inner_code = _code_named(factory_code, func.name)
    _CONVERTED_CODE.update((id(code), code) for code in _nested_code(inner_code))
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    closure = tuple(cells[name] for name in inner_code.co_freevars)
    converted = types.FunctionType(inner_code, fn.__globals__, fn.__name__, fn.__defaults__,
                                   closure or None)
    converted.__kwdefaults__ = fn.__kwdefaults__
    return converted, code_text


def _nested_code(code: types.CodeType) -> List[types.CodeType]:
    """``code`` and the code objects of the functions, lambdas and classes in it."""
    found = [code]
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            found += _nested_code(constant)
    return found


def _code_named(code, name):
    return next(c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == name)


def _runtime():
    """What converted code reaches as ``__ag__``: the run-time operators and :func:`converted`
    (made once)."""
    global _RUNTIME
    if _RUNTIME is None:
        _RUNTIME = types.ModuleType("gluon_cf.autograph.__ag__", _runtime.__doc__)
        _RUNTIME.__dict__.update({name: getattr(operators, name) for name in operators.__all__})
        _RUNTIME.__dict__["converted"] = converted
    return _RUNTIME


_RUNTIME: Optional[types.ModuleType] = None


def _owner_class(fn):
    """The name of the class ``fn`` is defined in, for private-name mangling (or None)."""
    parts = fn.__qualname__.split(".")
    if len(parts) >= 2 and parts[-2] != "<locals>":
        return parts[-2]
    return None


def converted(fn):
    """``fn`` converted (once, cached on it) when it is a plain function or method of user
    code with source to read (NOTE [autograph calls]); ``fn`` itself otherwise: builtins,
    MXNet, library code (installed packages, the standard library, gluon_cf), Gluon blocks,
    functions wrapped by a decorator and nested functions converted with their enclosing
    one run as they are."""
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if not isinstance(target, types.FunctionType) or _in_library(target.__code__) or \
            target.__code__.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE |
                                        inspect.CO_ASYNC_GENERATOR) or \
            hasattr(target, "__wrapped__") or \
            _CONVERTED_CODE.get(id(target.__code__)) is target.__code__:
        return fn
    done = target.__dict__.get("__gluon_cf_autograph_converted__")
    if done is None:
        try:
            function, code = convert_function(target)
            done = functools.wraps(target)(function)
            setattr(done, "__gluon_cf_autograph_code__", code)
        except (AutographError, OSError, TypeError, SyntaxError):
            done = target           # no source to read (a lambda, exec): it runs as it is
        target.__dict__["__gluon_cf_autograph_converted__"] = done
    if isinstance(fn, types.MethodType):
        return types.MethodType(done, fn.__self__)
    return done


# The code objects conversion compiled (a converted function's own and its nested
# functions'), by identity (equal code elsewhere is not converted code): a nested function
# made by converted code was converted with it.
_CONVERTED_CODE: Dict[int, types.CodeType] = {}

# File name -> whether it is library code, which runs as it is (NOTE [autograph calls]).
_LIBRARY_FILES: Dict[str, bool] = {}
_GLUON_CF = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _library_roots() -> Tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots |= set(getattr(site, "getsitepackages", lambda: [])())
    roots.add(site.getusersitepackages())
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots) + \
        (os.path.join(_GLUON_CF, ""),)


def _in_library(code: types.CodeType) -> bool:
    filename = code.co_filename
    known = _LIBRARY_FILES.get(filename)
    if known is None:
        path = os.path.realpath(filename)
        # (a notebook cell's "<ipython-input-...>" is user code; "<frozen ...>" the library)
        known = filename.startswith("<frozen") or path.startswith(_library_roots()) or \
            any(part in ("site-packages", "dist-packages") for part in path.split(os.sep))
        _LIBRARY_FILES[filename] = known
    return known


class _Rewriter(ConditionalsConverter, LoopsConverter, ListsConverter, IterationConverter,
                CallTreesConverter, AssignmentsConverter, LogicalConverter):
    """Rewrites one function (NOTE [autograph])."""

    def convert(self, func):
        for function in [n for n in ast.walk(func) if isinstance(n, ast.FunctionDef)]:
            lower_jumps(function)      # nested functions' own returns too
        self.collected = collected_lists(func)
        self.collected_names = {n for names in self.collected.values() for n in names}
        for parent in ast.walk(func):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self.func = func
        self.scopes = {fn: Scope(fn) for fn in ast.walk(func)
                       if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))}
        self.self_name = func.args.args[0].arg if func.args.args else None
        # Liveness on the code as written (after the jumps' rewrite): the rewritten code
        # passes every value an if assigns into its branches, which would read as uses.
        self.live, self.exposed = {}, {}
        for node in ast.walk(func):
            if isinstance(node, (ast.If, ast.While, ast.For)):
                # a closure may read its function's variables whenever it is called: they
                # are live everywhere (NOTE [autograph closures])
                self.live[node] = live_after(node, self.parents, func) | self._scope(node).cells
                self.exposed[node] = exposed_names(node.body)
        self.generic_visit(func)
        for fn, scope in self.scopes.items():
            if scope.cells and isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # `if False: v = None`: generated functions' `nonlocal v` binds
                fn.body.insert(0, ast.copy_location(ast.If(
                    test=ast.Constant(False), orelse=[], body=[ast.Assign(
                        targets=[ast.Name(id=n, ctx=ast.Store()) for n in sorted(scope.cells)],
                        value=ast.Constant(None))]), fn.body[0]))
