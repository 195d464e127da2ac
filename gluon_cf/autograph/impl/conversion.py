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
    AutographError naming the variable and the ``if``'s line. An ``if`` whose branches
    ``raise`` or ``assert`` stays Python and is refused on a tensor condition: traced, both
    branches run, so the exception would be raised whatever the input.

    The converted function is compiled under the original file name and line numbers, so
    tracebacks land on the user's lines, and its graph nodes are named after them
    (``model_line12_while``); zero-argument ``super()`` and private names (``self.__x``) are
    rewritten as the class body would have compiled them. ``x += y`` runs as plain
    Python's on an NDArray where plain MXNet runs it (in place), out of place where it
    refuses, and on a Symbol out of place unless something else may hold the array (NOTE
    [autograph augmented assignment], ``pyct/static_analysis/aliases.py``); in place on
    anything else. An ``if`` whose branches ``yield``, use
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
    (``operators/side_effects.py``), NOTE [autograph iteration] (``operators/py_builtins.py``), NOTE
    [autograph jumps] (``converters/jumps.py``), NOTE [autograph loops]
    (``operators/control_flow.py``), NOTE [autograph unpacking loops] (``operators/unpacking.py``),
    NOTE [autograph lists] (``operators/data_structures.py``), NOTE [autograph carried structures]
    (``operators/carried.py``), NOTE [autograph dict items] (``converters/dict_items.py``), NOTE
    [autograph augmented assignment] (``pyct/static_analysis/aliases.py``), NOTE [graphs traced for
    input shapes] (``gluon_cf/hybrid.py``: ``x.shape`` while hybridizing) and NOTE [autograph
    indexing] (``operators/tensor_access.py``: indexing, broadcasting arithmetic, NDArray-only
    attributes, ``assert``, properties), NOTE [autograph match] and NOTE [autograph and/or]
    (``operators/logical.py``), NOTE [autograd scopes in a graph] (``operators/tensor_access.py``),
    NOTE [a refusal the user's code catches] (``converters/exceptions.py``), NOTE [a match on a
    tuple display] (``converters/matches.py``), NOTE [a while True ended only by Python]
    (``converters/loops.py``).

NOTE [autograph calls]
    As TF AutoGraph does, converted code converts the user's functions it calls, recursively,
    and not library code: a call ``helper(x)``, ``self.method(x)``, ``obj.step(h)`` or
    ``fns[0](x)`` becomes ``__ag__.converted(helper)(x)``, and :func:`converted` converts a
    plain function, lambda or method (once, cached on it) whose file is not library code,
    whatever its module: not the standard library, not an installed package (site-packages,
    even if the user wrote it: installed code is trusted as MXNet is; an editable install
    lives in the user's tree and is converted), not gluon_cf, not code compiled from a string
    by a library module (MXNet's generated operators). So a helper in another module of the
    user's, or a method of another of the user's objects, changing Python state inside a
    tensor ``if`` or loop is refused at its line (NOTE [autograph side effects]), never run
    once silently, and its own ``if``/``while``/``for`` on tensors convert. Through
    ``functools.partial`` the function is converted and the partial rebuilt around it. A
    wrapper the user's decorator made (``functools.wraps``) is user code: it is converted
    from its own source (not the ``__wrapped__`` one inspect would show: the decorator runs),
    and converts the function it calls. A library's decorator written in Python that holds
    the function it wraps (``__wrapped__``) in a closure cell is rebuilt around the converted
    function: the same code, the same other cells (its state stays shared), so the
    decorator runs and calls converted code. Under ``functools.lru_cache``/``cache`` (a C
    wrapper) a call with Python arguments runs as Python does (cached, as plain Python would
    be); with a tensor while hybridizing it is an AutographError (a Symbol is no cache key).
    Any other user function wrapped by a library's decorator (``functools.singledispatch``)
    cannot be converted without skipping the decorator: it runs as plain Python eagerly, and
    while hybridizing (a Symbol argument, or inside a tensor ``if`` or loop being traced) the
    call is an AutographError.
    A user function whose conversion fails (no source: ``exec``; a file changed since
    import) is an AutographError naming the call and the function, eagerly too: run
    unconverted it would be silently wrong. A lambda is found in its file's syntax by its
    line, parameters and code positions, and converted as ``def f(args): return body``.
    An object of a user class (``self.scorer(h)``) is called through its ``__call__``,
    converted. A user generator function (``yield``: not convertible) runs as plain Python
    eagerly and is refused while hybridizing, as a library's decorator is. A user class
    called by converted code (plain metaclass, ``__init__`` in a file of user code; not a
    Gluon block or an exception) is constructed as ``type.__call__`` does, with its
    ``__init__`` converted: its tensor ``if``s and loops convert, and its first parameter is
    the object being made, so setting its attributes is no side effect (class state is). A
    user property read by converted code runs its getter converted (NOTE [autograph
    indexing]). Gluon blocks (``self.fc(x)``: their ``hybrid_forward`` is the block's
    business), MXNet, builtins, other classes, and the nested functions converted with their
    enclosing function run as they are. Calls of attributes of the names ``F``, ``mx``,
    ``np`` ... are not wrapped (library modules by convention). Output in a tensor ``if`` or
    loop runs once, while tracing, and shows Symbols: ``print`` (``printing``), logging calls
    and a stream's ``write`` (``output``) warn once per line, since refusing a debugging aid
    would be harsher than the harm.

    Calls: NOTE [autograph calls].

    Expressions: ``a if test else b`` becomes ``if_exp`` (``cond`` on a Symbol test),
    ``and``/``or``/``not`` become ``and_``/``or_``/``not_``, which keep Python's
    short-circuit semantics on Python values and are elementwise on tensors, Python's value
    at each element (``a and b`` is ``b`` where ``a`` is true, else ``a``; ``not`` 0 or 1;
    every operand evaluated, as a graph must).
"""
import ast
import contextlib
import functools
import inspect
import linecache
import os
import sys
import textwrap
import types
from typing import Dict, List, Optional

import mxnet as mx

from .. import operators
from ..operators import call_results, data_structures, py_builtins, side_effects, tensor_access
from ..operators.call_results import surfacing_refusals
from ..converters.assignments import (AssignmentsConverter, item_methods_as_subscripts,
                                      rewrite)
from ..converters.call_trees import CallTreesConverter
from ..converters.conditionals import ConditionalsConverter
from ..converters.dict_items import rebind_dict_items
from ..converters.exceptions import ExceptionsConverter, finally_jumps_as_handlers
from ..converters.iteration import IterationConverter
from ..converters.lists import ListsConverter, collected_lists
from ..converters.logical_expressions import LogicalConverter
from ..converters.loops import LoopsConverter, unpacked_targets
from ..converters.matches import tuple_matches_as_ifs
from ..converters.jumps import lower_jumps
from ..errors import AutographError, CalledTensorError, in_library_file
from ..pyct.static_analysis.activity import MUTATORS, scope_of
from ..pyct.static_analysis.aliases import given_as_receiver, given_to_calls, shared_arrays
from ..pyct.static_analysis.reaching import augmented_assignments, position
from ..pyct.static_analysis.liveness import exposed_names, live_after
from ..pyct.templates import runtime_call, unparse
from ..pyct.nodes import child_nodes, fix_missing_locations, increment_lineno, unchanged, \
    walk


def convert_function(fn, max_iterations=None):
    # (of its own code: inspect would follow a decorator's __wrapped__ to the function it
    # wraps, and the converted wrapper would skip the decorator)
    filename = inspect.getsourcefile(fn.__code__) or fn.__code__.co_filename
    if fn.__name__ == "<lambda>":
        func, first, lines = _lambda_source(fn, filename)
    else:
        try:
            lines, first = inspect.getsourcelines(fn.__code__)
        except (OSError, TypeError) as err:
            raise _cannot_convert(f"{filename}:{fn.__code__.co_firstlineno}",
                                 f"gluon_cf.autograph needs the source of {fn.__qualname__!r}, "
                                 f"which Python cannot find ({err}); define it in a file or a "
                                 f"notebook cell, not with exec") from None
        try:
            tree = ast.parse(textwrap.dedent("".join(lines)))
        except SyntaxError as err:
            raise _cannot_convert(f"{filename}:{first}",
                                 f"gluon_cf.autograph cannot parse the source of "
                                 f"{fn.__qualname__!r} ({err.msg}); was the file changed after "
                                 f"it was imported?") from None
        func = tree.body[0]
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            raise _cannot_convert(f"{filename}:{first}", f"gluon_cf.autograph converts "
                                 f"functions, got {type(func).__name__}")
    func.decorator_list = []          # the converted function is not decorated again
    owner = _owner_class(fn)
    _Rewriter(filename, first - 1, lines, owner, max_iterations).convert(func)
    freevars = fn.__code__.co_freevars
    factory = ast.FunctionDef(
        name="__ag_factory", args=ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=name) for name in freevars], vararg=None,
            kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        # (`global name`: the function's own name in its body is the module's, as in the
        # original, not the factory's local: a recursive helper calls itself through it)
        body=([ast.Global(names=[func.name])] if func.name not in freevars else []) +
        [func, ast.Return(value=ast.Name(id=func.name, ctx=ast.Load()))],
        decorator_list=[], returns=None)
    module = ast.Module(body=[factory], type_ignores=[])
    fix_missing_locations(module)
    increment_lineno(module, first - 1)
    code_text = unparse(func)
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


def entry(function):
    """The converted ``function`` as ``@autograph`` gives it: raising a refusal of an ``op=``
    made while it runs, also one the user's code caught (:func:`surfacing_refusals`)."""
    run = surfacing_refusals(function)
    _CONVERTED_CODE[id(run.__code__)] = run.__code__     # (converted code calls it as is)
    return run


def _cannot_convert(where, why):
    """The AutographError of a function whose source cannot be read or parsed: ``where: why``
    (``why`` kept for the message of a call of it, :func:`converted`)."""
    err = AutographError(f"{where}: {why}")
    setattr(err, "why", why)
    return err


def _lambda_source(fn, filename):
    """A lambda's syntax as the function ``def __ag_lambda(args): return body``, with the
    line numbering of its whole file: (that function, 1, the file's lines). The lambda is
    the one on its first line with its parameters whose body holds its code's positions."""
    lines = linecache.getlines(filename, fn.__globals__)
    code = fn.__code__
    where = f"{filename}:{code.co_firstlineno}"
    try:
        tree = ast.parse("".join(lines)) if lines else None
    except SyntaxError:
        tree = None
    if tree is None:
        raise _cannot_convert(where, "gluon_cf.autograph cannot read the source of this "
                             "lambda; define it in a file or a notebook cell, not with exec")
    params = list(code.co_varnames[:code.co_argcount])
    starts = {(line, col) for line, _, col, _ in code.co_positions() if line and col}
    found = [node for node in walk(tree) if isinstance(node, ast.Lambda) and
             node.lineno == code.co_firstlineno and
             [a.arg for a in node.args.posonlyargs + node.args.args] == params and
             any((part.lineno, part.col_offset) in starts for part in walk(node.body)
                 if isinstance(part, (ast.expr, ast.stmt)))]
    if len(found) != 1:
        raise _cannot_convert(where, "gluon_cf.autograph cannot tell which lambda of this line "
                             "was called; write it as a def")
    lam = found[0]
    func = ast.copy_location(ast.FunctionDef(
        name="__ag_lambda", args=lam.args, body=[ast.copy_location(ast.Return(value=lam.body),
                                                                  lam.body)],
        decorator_list=[], returns=None), lam)
    return func, 1, lines


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
        _RUNTIME.__dict__["converted"] = called
        _RUNTIME.__dict__["attribute"] = attribute
        _RUNTIME.__dict__["refusals_kept"] = _managed
        _RUNTIME.__dict__["builtin"] = functools.partial(py_builtins.builtin, convert=converted)
    return _RUNTIME


def _managed(manager):
    """A ``with``'s context manager, its ``__enter__``/``__exit__`` called as methods are."""
    where = _CallSite(sys._getframe(1).f_code.co_filename, sys._getframe(1).f_lineno)
    return call_results.refusals_kept(manager, lambda method: called(method, where))


_RUNTIME: Optional[types.ModuleType] = None
_SIGNS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Mod: "%"}


def _owner_class(fn):
    """The name of the class ``fn`` is defined in, for private-name mangling (or None)."""
    parts = fn.__qualname__.split(".")
    if len(parts) >= 2 and parts[-2] != "<locals>":
        return parts[-2]
    return None


def _entered_name_scope(fn):
    """Whether ``fn`` is ``block.name_scope`` of a Gluon block whose scope is the one entered
    now: ``with self.name_scope():`` in the ``hybrid_forward`` that Gluon traces inside that
    same scope. MXNet's ``_BlockScope`` cannot be entered twice: the inner exit drops the
    outer's name prefix, whose own exit then fails with an AttributeError and leaves the
    prefix on every block built after (issue 24). Inside its own scope it changes nothing."""
    if not (isinstance(fn, types.MethodType) and fn.__name__ == "name_scope" and
            isinstance(fn.__self__, mx.gluon.Block)):
        return False
    scope = getattr(fn.__self__, "_scope", None)
    return scope is not None and \
        getattr(mx.gluon.block._BlockScope._current, "value", None) is scope


def called(fn, where=None):
    """``__ag__.converted``: :func:`converted`, library code checked (``side_effects.lent``)."""
    where = where or _CallSite(sys._getframe(1).f_code.co_filename, sys._getframe(1).f_lineno)
    result, code = converted(fn, where), getattr(fn, "__code__", None)
    if result is not fn and getattr(result, "library_checked", None) is not fn or \
            isinstance(code, types.CodeType) and _CONVERTED_CODE.get(id(code)) is code:
        return result
    return side_effects.lent(result, where, py_builtins.library_call, convert=converted)


def converted(fn, where=None):
    """``fn`` converted (once, cached on it) when it is a plain function, lambda or method of
    user code (NOTE [autograph calls]), called from converted code at ``where`` (the call's
    ``file:line: source``; by default the caller's line); ``fn`` itself otherwise: builtins,
    MXNet, library code (installed packages, the standard library, gluon_cf), Gluon blocks
    and the nested functions converted with their enclosing one run as they are. An object
    of a user class is its ``__call__``, converted. A user function that cannot be converted
    is an AutographError naming it and the call; one run through a library's decorator, and
    a generator function, run as they are eagerly and are refused while hybridizing."""
    if where is None:
        caller = sys._getframe(1)          # converted code runs under the user's lines
        where = _CallSite(caller.f_code.co_filename, caller.f_lineno)
    if isinstance(fn, mx.sym.Symbol):
        raise CalledTensorError(f"{where}: this calls a tensor as a function; an NDArray is not "
                                f"callable (eagerly Python's TypeError \"'NDArray' object is "
                                f"not callable\"): call a function or block with the tensor")
    if isinstance(fn, functools.partial):
        inner = converted(fn.func, where)
        return fn if inner is fn.func else functools.partial(inner, *fn.args, **fn.keywords)
    output = side_effects.output(fn, where) or side_effects.container_method(
        fn, where, MUTATORS, converted, py_builtins.container_call)
    if output is not None:
        return output
    iterating = py_builtins.library_iterating(fn, where, converted)   # (text when refused)
    if iterating is not None:
        return iterating
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if isinstance(fn, types.MethodType) and isinstance(fn.__self__, mx.sym.Symbol) and \
            (fn.__name__ in tensor_access.NDARRAY_ONLY or fn.__name__ == "detach"):
        # x.asscalar(), x.asnumpy() ... on a Symbol: refused at the call as the attribute
        # is (NOTE [autograph indexing]), not MXNet's NotImplementedForSymbol; x.detach()
        # is BlockGrad
        return tensor_access.attribute(fn.__self__, fn.__name__, str(where))
    if tensor_access.autograd_mode(fn, where):
        return fn               # (autograd.is_training(): the graph is one for the mode)
    if fn is contextlib.suppress:   # NOTE [a refusal the user's code catches]
        return call_results.RefusalsNotSuppressed
    if isinstance(fn, type):
        return _constructor(fn, where)
    if _entered_name_scope(fn):
        return contextlib.nullcontext
    call = getattr(type(fn), "__call__", None)
    if isinstance(target, types.FunctionType) and \
            _CONVERTED_CODE.get(id(target.__code__)) is target.__code__:
        return fn                   # (converted: a nested function, or @autograph's entry)
    if not isinstance(target, (types.FunctionType, type, mx.gluon.Block)) and \
            isinstance(call, types.FunctionType) and not _is_library(call):
        return converted(types.MethodType(call, fn), where)     # an object of a user class
    if not isinstance(target, types.FunctionType) or _is_library(target):
        wrapped = _wrapped_user_function(target)
        if wrapped is None:
            return fn
        rewrapped = _rewrapped(fn, target, where)
        if rewrapped is not None:
            return rewrapped
        if isinstance(target, _LRU_CACHE):
            return _cached(fn, wrapped, where)
        return _refused_while_hybridizing(
            fn, wrapped, where, f"through a library's decorator ({_decorator_of(fn)})",
            f"Call the undecorated function ({wrapped.__name__}.__wrapped__), or write the "
            f"decorator in your own code (it is converted then, and what it wraps)")
    if _CONVERTED_CODE.get(id(target.__code__)) is target.__code__ or \
            target.__code__.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        return fn
    if target.__code__.co_flags & inspect.CO_GENERATOR:
        return _refused_while_hybridizing(
            fn, target, where, "a generator function (yield: its body cannot be converted)",
            "Return a list from a function instead, or write the loop in the converted "
            "function (a for statement over the tensor converts)")
    done = target.__dict__.get("__gluon_cf_autograph_converted__")
    if done is None:
        try:
            function, code = convert_function(target)
            done = functools.wraps(target)(function)
            setattr(done, "__gluon_cf_autograph_code__", code)
        except AutographError as err:
            done = _Unconvertible(getattr(err, "why", str(err)))
        except Exception as err:  # noqa: BLE001 - a failure of the converters: named below
            done = _Unconvertible(f"the conversion failed ({type(err).__name__}: {err}); "
                                  f"this is a gluon_cf bug, please report it with the function")
        target.__dict__["__gluon_cf_autograph_converted__"] = done
    if isinstance(done, _Unconvertible):
        # Run unconverted, its tensor ifs and loops and Python side effects would run once,
        # while tracing: refused (NOTE [autograph calls])
        raise AutographError(
            f"{where}: this calls {target.__qualname__!r} (defined at "
            f"{_defined_at(target)}), user code that gluon_cf.autograph converts when called "
            f"but cannot convert: {done.why}")
    if isinstance(fn, types.MethodType):
        return types.MethodType(done, fn.__self__)
    return done


def is_user_function(fn) -> bool:
    """Whether ``fn`` is a plain function of user code (converted when called)."""
    return isinstance(fn, types.FunctionType) and not _is_library(fn)


def attribute(value, name, where):
    """``value.name`` read by converted code: a property of a user class runs its getter
    converted (NOTE [autograph calls]); anything else is
    :func:`~gluon_cf.autograph.operators.tensor_access.attribute` (NOTE [autograph
    indexing])."""
    getter = _user_property(type(value), name)
    if getter is not None:
        return converted(getter, where)(value)
    return tensor_access.attribute(value, name, where)


def _user_property(cls, name):
    """The getter of ``cls``'s property ``name`` when it is a plain property of user code,
    else None (library properties, and any other attribute, read as they are)."""
    if issubclass(cls, (mx.nd.NDArray, mx.sym.Symbol)):
        return None
    for klass in cls.__mro__:
        found = klass.__dict__.get(name)
        if found is not None:
            if type(found) is property and is_user_function(found.fget):
                return found.fget
            return None
    return None


def _constructor(cls, where):
    """``cls`` called by converted code: a class of the user's (plain metaclass, its
    ``__init__`` user code in a file) is constructed as ``type.__call__`` does, with its
    ``__init__`` converted (NOTE [autograph calls]); any other class is itself."""
    init = getattr(cls, "__init__", None)
    if type(cls) is not type or issubclass(cls, (mx.gluon.Block, BaseException)) or \
            not isinstance(init, types.FunctionType) or not is_user_function(init) or \
            init.__code__.co_filename.startswith("<"):
        return cls

    @functools.wraps(cls, updated=())
    def construct(*args, **kwargs):
        obj = object.__new__(cls) if cls.__new__ is object.__new__ else \
            cls.__new__(cls, *args, **kwargs)
        if isinstance(obj, cls):
            converted(types.MethodType(init, obj), where)(*args, **kwargs)
        return obj
    return construct


def _rewrapped(fn, wrapper, where):
    """A library's Python wrapper (``functools.wraps``: ``wrapper.__wrapped__`` in one of
    its closure cells) rebuilt around the converted function it wraps: the decorator's code
    runs as it is and calls converted code (NOTE [autograph calls]). None for a wrapper that
    is not a Python function or does not hold what it wraps in a cell."""
    inner = getattr(wrapper, "__wrapped__", None)
    if not isinstance(wrapper, types.FunctionType) or inner is None or \
            not wrapper.__closure__:
        return None
    cells = wrapper.__closure__
    held = [i for i, cell in enumerate(cells) if _cell_value(cell) is inner]
    if not held:
        return None
    inner_converted = converted(inner, where)
    closure = tuple(types.CellType(inner_converted) if i in held else cell
                    for i, cell in enumerate(cells))
    rebuilt = types.FunctionType(wrapper.__code__, wrapper.__globals__, wrapper.__name__,
                                 wrapper.__defaults__, closure)
    rebuilt.__kwdefaults__ = wrapper.__kwdefaults__
    rebuilt.__dict__.update(wrapper.__dict__)
    return types.MethodType(rebuilt, fn.__self__) if isinstance(fn, types.MethodType) \
        else rebuilt


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:                     # an empty cell
        return None


_LRU_CACHE = type(functools.lru_cache(maxsize=None)(lambda: None))


def _cached(fn, user_fn, where):
    """A user function under ``functools.lru_cache``/``cache`` (a C wrapper: it cannot be
    rebuilt around converted code): called with Python values it runs as Python does (once
    per distinct arguments, cached); with a tensor argument while hybridizing it is refused
    (a Symbol is no cache key for values), NOTE [autograph calls]."""

    def checked(*args, **kwargs):
        if _holds_symbol(args) or _holds_symbol(kwargs.values()):
            raise AutographError(
                f"{where}: this calls {user_fn.__qualname__!r} (defined at "
                f"{_defined_at(user_fn)}) through functools' cache with a tensor while "
                f"hybridizing; a Symbol is no key for the values it stands for. Call the "
                f"undecorated function ({user_fn.__name__}.__wrapped__), or cache on Python "
                f"values only")
        return fn(*args, **kwargs)
    return checked


class _CallSite:
    """``file:line: source`` of a call, made into text only for a message."""

    def __init__(self, filename, line):
        self.filename, self.line = filename, line

    def __str__(self):
        text = linecache.getline(self.filename, self.line).strip()
        return f"{self.filename}:{self.line}: {text}"


class _Unconvertible:
    """Cached on a user function whose conversion failed: why (an AutographError's text)."""

    def __init__(self, why):
        self.why = why


def _defined_at(fn):
    code = fn.__code__
    return f"{code.co_filename}:{code.co_firstlineno}"


def _wrapped_user_function(fn):
    """The user function a library's decorator wraps (``fn.__wrapped__``, as ``functools.wraps``
    sets it, followed to the end), or None when ``fn`` wraps none, or wraps library or
    converted code."""
    if getattr(fn, "__wrapped__", None) is None:
        return None
    try:
        inner = inspect.unwrap(fn)
    except ValueError:                       # a cycle of __wrapped__
        return None
    inner = inner.__func__ if isinstance(inner, types.MethodType) else inner
    if not isinstance(inner, types.FunctionType) or _is_library(inner) or \
            _CONVERTED_CODE.get(id(inner.__code__)) is inner.__code__:
        return None
    return inner


def _decorator_of(fn):
    """The library wrapper ``fn``, named by its code (functools.wraps copied the user
    function's names onto it)."""
    function = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if isinstance(function, types.FunctionType):
        return f"{function.__globals__.get('__name__', '?')}.{function.__code__.co_qualname}"
    return f"{type(function).__module__}.{type(function).__qualname__}"


def _refused_while_hybridizing(fn, user_fn, where, how, advice):
    """``fn``, which runs the user function ``user_fn`` unconverted (``how``: through a
    library's decorator, which must run; a generator): eagerly it runs as plain Python; while
    hybridizing (a Symbol argument, or inside a tensor if or loop being traced), where its
    tensor ifs and loops and Python side effects would run once, while tracing, the call is an
    AutographError (NOTE [autograph calls])."""

    def checked(*args, **kwargs):
        if side_effects.in_graph_region() or _holds_symbol(args) or \
                _holds_symbol(kwargs.values()):
            raise AutographError(
                f"{where}: this calls {user_fn.__qualname__!r} (defined at "
                f"{_defined_at(user_fn)}) {how}; gluon_cf.autograph converts the user's "
                f"functions it calls but cannot convert this one, and unconverted, its tensor "
                f"ifs and loops and Python side effects would run once, while tracing. "
                f"{advice}")
        return fn(*args, **kwargs)
    return checked


def _holds_symbol(values, depth=3):
    for value in values:
        if isinstance(value, (mx.sym.Symbol, data_structures.StepList)) or depth and isinstance(
                value, (list, tuple)) and _holds_symbol(value, depth - 1):
            return True
    return False


# The code objects conversion compiled (a converted function's own and its nested
# functions'), by identity (equal code elsewhere is not converted code): a nested function
# made by converted code was converted with it.
_CONVERTED_CODE: Dict[int, types.CodeType] = {}

def _is_library(fn: types.FunctionType) -> bool:
    """Whether ``fn`` is library code: its file is, or it was compiled from a string (no
    file: MXNet's generated operators) by a library module."""
    if _in_library(fn.__code__):
        return True
    if not fn.__code__.co_filename.startswith("<") or \
            fn.__code__.co_filename.startswith("<ipython-input"):
        return False
    path = fn.__globals__.get("__file__")        # the module that compiled it
    return isinstance(path, str) and in_library_file(path)


def _in_library(code: types.CodeType) -> bool:
    return in_library_file(code.co_filename)


class _Rewriter(ConditionalsConverter, LoopsConverter, ListsConverter, IterationConverter,
                CallTreesConverter, AssignmentsConverter, LogicalConverter, ExceptionsConverter):
    """Rewrites one function (NOTE [autograph])."""

    def convert(self, func):
        item_methods_as_subscripts(func)     # (d.__setitem__(k, v): d[k] = v)
        # (on the code as written: NOTE [autograph augmented assignment])
        with unchanged():     # (NOTE [conversion speed])
            self.shared = {fn: shared_arrays(fn) for fn in walk(func)
                           if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))}
            self.given = {fn: given_to_calls(fn) for fn in self.shared}   # (item assignment)
            self.augmented, calls_to_check = augmented_assignments(func)
        rebind_dict_items(func, self)   # NOTE [autograph dict items]
        unpacked_targets(func)     # for a, b in x: NOTE [autograph unpacking loops]
        tuple_matches_as_ifs(func)     # NOTE [a match on a tuple display]
        finally_jumps_as_handlers(func)     # NOTE [a finally that jumps]
        # nested functions' own returns too, innermost first: an outer function's lowering
        # copies the code after a returning if into its branches, nested defs included
        for function in reversed([n for n in walk(func) if isinstance(n, ast.FunctionDef)]):
            lower_jumps(function)
        for node in walk(func):       # (a refusal the lowering made: its user's line)
            if getattr(node, "ag_where_needed", False):
                getattr(node, "args").insert(0, ast.Constant(self.where(node)))
        self.collected = collected_lists(func)
        self.collected_names = {n for names in self.collected.values() for n in names}
        # (the tree does not change from here to the rewrite, generic_visit: one walk, and
        # each function's scope and each statement's liveness found once:
        # NOTE [conversion speed])
        with unchanged():
            nodes = list(walk(func))
            for parent in nodes:
                for child in child_nodes(parent):
                    self.parents[child] = parent
            self.func = func
            scopes: dict = {}
            self.scopes = {fn: scope_of(fn, scopes) for fn in nodes
                           if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))}
            self.self_name = func.args.args[0].arg if func.args.args else None
            # Liveness on the code as written (after the jumps' rewrite): the rewritten code
            # passes every value an if assigns into its branches, which would read as uses.
            self.live, self.exposed, self.read_after, self.handler_only = {}, {}, {}, {}
            liveness: dict = {}
            for node in nodes:
                if isinstance(node, (ast.If, ast.While, ast.For)):
                    # a closure may read its function's variables whenever it is called: they
                    # are live everywhere (NOTE [autograph closures])
                    self.read_after[node] = live_after(node, self.parents, func, liveness)
                    # (NOTE [what only a handler reads])
                    self.handler_only[node] = self.read_after[node] - live_after(
                        node, self.parents, func, liveness, handlers=False)
                    self.live[node] = self.read_after[node] | self._scope(node).cells
                    self.exposed[node] = exposed_names(node.body, liveness)
            # what calls bind or are given is checked when they run (NOTE [autograph augmented
            # assignment]; decided on the code as written, whose statements the jumps' rewrite
            # may have copied)
            checked = [(call, [ast.Constant(self.where(call)), ast.Constant(name),
                               ast.Constant(binds), ast.Constant(self.where(augmented)),
                               ast.Constant(_SIGNS[type(augmented.op)]),
                               ast.Constant(rewrite(augmented)),
                               ast.Constant(not binds and given_as_receiver(call, name))])
                       for call in nodes if isinstance(call, ast.Call) and
                       hasattr(call, "lineno") and position(call) in calls_to_check
                       for written, name, binds, augmented in [calls_to_check[position(call)]]
                       if ast.unparse(call.func) == ast.unparse(written.func)]
        self.generic_visit(func)
        for call, arguments in checked:
            call.func = runtime_call("checked", [call.func] + arguments)
        for fn, scope in self.scopes.items():
            if scope.cells and isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # `if False: v = None`: generated functions' `nonlocal v` binds
                fn.body.insert(0, ast.copy_location(ast.If(
                    test=ast.Constant(False), orelse=[], body=[ast.Assign(
                        targets=[ast.Name(id=n, ctx=ast.Store()) for n in sorted(scope.cells)],
                        value=ast.Constant(None))]), fn.body[0]))
