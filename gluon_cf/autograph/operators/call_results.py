"""Which calls of converted code return arrays nothing else holds, decided at run time from
the callee (NOTE [autograph augmented assignment]): MXNet's operators and the arrays' methods
that are operators, Gluon's built-in layers; and :func:`checked`, which refuses, while
hybridizing, a call not proven so that binds or is given a variable an ``op=`` changes."""
import builtins
import collections.abc
import contextlib
import copy
import dis
import functools
import itertools
import linecache
import numbers
import os
import pickle
import threading
import types
import weakref
from typing import FrozenSet, List, Optional, Set

import mxnet as mx
import numpy as np
from mxnet.gluon import nn

from ..errors import (AmbiguousTruthError, AutographError, hashes_symbol, in_library_file,
                      refuse_hashed_symbol)
from . import caught_errors


def refusal(where, sign, shared, rewrite):
    """The AutographError of a hybridized ``x op= v`` (at ``where``) whose array ``shared``
    says what else may hold (made known to :func:`surfacing_refusals`)."""
    err = AutographError(
        f"{where}: on an NDArray this {sign}= changes the array in place, and {shared}, which "
        f"would see the change; a graph cannot change an array in place (its value would "
        f"differ from plain Python's). Write it out of place, {rewrite} (what else holds the "
        f"array keeps the old value), or keep a copy there (F.identity(...)) if it must not "
        f"change")
    for made in _RUNNING.refusals:
        made.append(err)
    return err


def _goes_on(exc):
    """Whether ``exc`` is a refusal the user's code cannot catch: an AutographError, but not
    one where plain Python raises its own ValueError on the same values; a Symbol's hash
    (NOTE [a hashed Symbol])."""
    return isinstance(exc, AutographError) and not isinstance(exc, AmbiguousTruthError) or \
        _display_hashed_symbol(exc)


def refusal_caught(exc):
    """Run first in the user's ``except`` clause that caught ``exc``: an AutographError goes
    on (NOTE [a refusal the user's code catches]), a Symbol's hash as the AutographError at
    the user's line (NOTE [a hashed Symbol]); ``except*`` catches a group holding it."""
    if _display_hashed_symbol(exc):
        _hashed_at_user_line(exc)
    if _goes_on(exc):
        raise exc
    if isinstance(exc, BaseExceptionGroup):
        refused = exc.subgroup(_goes_on)
        while isinstance(refused, BaseExceptionGroup):
            refused = refused.exceptions[0]
        if refused is not None:
            raise refused


def refusal_kept(exc):
    """:func:`refusal_caught` in the handler standing for a ``finally`` that jumps (NOTE [a
    finally that jumps]): the refusal it raises also surfaces when the function returns
    (:func:`surfaced`), as the ``finally``'s jump drops it."""
    try:
        refusal_caught(exc)
    except AutographError as err:
        surfaced(err, "")
        raise


def refusals_kept(manager, convert=None):
    """The context manager of a ``with`` in converted code: ``manager`` itself, its
    ``__exit__`` not suppressing an AutographError (NOTE [a refusal the user's code catches])
    when it suppresses what it is given (a class's returning True, a
    ``@contextlib.contextmanager`` catching in its generator). ``convert``: what a bound
    ``__enter__``/``__exit__`` is called through (the conversion's ``converted``: a user
    class's run converted, so their side effects inside a tensor ``if`` or loop are refused,
    NOTE [autograph side effects], not run once while tracing)."""
    kind = type(manager)
    if not (hasattr(kind, "__enter__") and hasattr(kind, "__exit__")):
        return manager                  # (Python's TypeError at the with)
    return _RefusalsKept(manager, convert)


class _RefusalsKept:
    __slots__ = ("_manager", "_convert")

    def __init__(self, manager, convert):
        self._manager = manager
        self._convert = convert or (lambda method: method)

    def _method(self, name):
        return self._convert(getattr(type(self._manager), name).__get__(self._manager))

    def __enter__(self):
        return self._method("__enter__")()

    def __exit__(self, exctype, excinst, exctb):
        suppressed = self._method("__exit__")(exctype, excinst, exctb)
        return suppressed and not _goes_on(excinst)


class RefusalsNotSuppressed(contextlib.suppress):
    """``contextlib.suppress(...)`` called by converted code: an AutographError goes on
    (NOTE [a refusal the user's code catches]); what it suppresses is known to indexing
    inside it (NOTE [an index error the user's try catches])."""

    def __init__(self, *exceptions):
        super().__init__(*exceptions)
        self._caught = exceptions

    def __enter__(self):
        caught_errors.catching("a contextlib.suppress", lambda: self._caught).__enter__()
        return super().__enter__()

    def __exit__(self, exctype, excinst, exctb):
        caught_errors.catching("", tuple).__exit__(exctype, excinst, exctb)
        if _goes_on(excinst):
            return False
        return super().__exit__(exctype, excinst, exctb)


def surfaced(exc, where, what="loop"):
    """Make ``exc``, which leaves a loop (``what``: or an if) on a tensor (at ``where``) while
    it is traced, known to :func:`surfacing_refusals`: an AutographError as is, another
    exception as the AutographError saying a graph's loop cannot stop partway (NOTE [an
    exception leaving a loop]). Raised when the function returns if the user's code caught
    ``exc``."""
    if not isinstance(exc, AutographError) and type(exc).__module__.startswith("gluon_cf"):
        return        # (gluon_cf's own signals, a recursive function's pending signature)
    err = exc
    if not isinstance(exc, AutographError):
        err = AutographError(
            f"{where}: {type(exc).__name__}({exc}) left this {what} on a tensor while it was "
            f"traced, and the code around it caught it; a graph's {what} runs whole (the "
            f"variables would keep their values before the {what}, where plain Python's hold "
            f"what the code before the exception made), so catch it inside the {what}'s body "
            f"or outside the function")
        setattr(err, "left_loop", exc)
    for made in _RUNNING.refusals:
        if all(err is not known for known in made):
            made.append(err)


def surfaced_inside(exc):
    """Whether a tensor ``if`` or loop inside the one being traced already let ``exc`` out
    (:func:`surfaced`): which steps or branch reach it the values decide."""
    return any(getattr(refused, "left_loop", None) is exc
               for made in _RUNNING.refusals for refused in made)


def converted_running():
    """Whether a decorated (converted) function runs in this thread."""
    return bool(_RUNNING.refusals)


class _Running(threading.local):
    """For each decorated function running in this thread (innermost last): the refusals
    made while it runs."""

    def __init__(self):
        self.refusals: List[List[AutographError]] = []


_RUNNING = _Running()


def surfacing_refusals(fn):
    """``fn`` (a converted function, as ``@autograph`` gives it) raising the first refusal of
    an ``op=`` made while it ran, also when the user's code caught it: an AutographError is
    a ValueError, and a ``try: ... except Exception`` (or ``contextlib.suppress``) around the
    call or the ``op=`` would run on, on another path than plain Python's (the call's result
    not bound, the ``op=`` not done) and silently give other values."""
    @functools.wraps(fn)     # (its name, docstring, signature and __wrapped__: the user's)
    def run(*args, **kwargs):
        made: List[AutographError] = []
        _RUNNING.refusals.append(made)
        try:
            result = fn(*args, **kwargs)
        except BaseException as err:
            if made and all(err is not refused and getattr(refused, "left_loop", None) is
                            not err for refused in made):
                raise made[0] from err     # (what the user's code raised having caught it)
            if isinstance(err, mx.base.NotImplementedForSymbol):
                _symbol_only_at_user_line(err)
            if hashes_symbol(err):
                _hashed_at_user_line(err)
            if _symbol_output_index(err):
                _symbol_index_at_user_line(err)
            raise
        finally:
            _RUNNING.refusals.pop()
        if made:
            raise made[0]
        return result
    return run


# NOTE [a hashed Symbol]
# A set or dict display or comprehension of Symbols ({*outs}, {h: 1}, {o: k for ...}) is
# Python's TypeError "unhashable type: 'Symbol'", naming no line of the user's. Converted code
# leaves displays as they are (wrapping each in a function, hashed(lambda: {...}), cost 2.5
# times a small dict display eagerly, and changed scoping: a class body's display read the
# module's names, not the class's; a name assigned later was NameError, not
# UnboundLocalError). The error is made the AutographError at the user's innermost line where
# it surfaces: leaving the decorated function (surfacing_refusals), or caught by the user's
# except, with or contextlib.suppress, where the instruction it stopped at builds a set or
# dict (refusal_caught, _goes_on: it goes on, as an eager run takes no except path; the
# user's code catching another hash, try: hash(h) except TypeError: id(h), runs as Python's).
# Calls that hash (set(outs), Counter, dict.fromkeys, d.get(h)) are refused at the call by
# their wrappers; item in container by logical.contains.
_DISPLAYS = {"BUILD_SET", "SET_ADD", "SET_UPDATE", "BUILD_MAP", "MAP_ADD", "DICT_UPDATE",
             "DICT_MERGE"}


def _user_line(err):
    """The innermost line of the user's code ``err`` passed through (the converted code runs
    under the user's file and lines, also where that is an installed package's: its module
    holds ``__ag__``; other library code's, Python's and gluon_cf's, is not), as ``(file,
    line, instruction name)``, or None."""
    frame, where = err.__traceback__, None
    while frame is not None:
        code = frame.tb_frame.f_code
        if "__ag__" in frame.tb_frame.f_globals or not code.co_filename.startswith("<") and \
                not in_library_file(code.co_filename):
            where = (code.co_filename, frame.tb_lineno,
                     dis.opname[code.co_code[frame.tb_lasti]] if frame.tb_lasti >= 0 else "")
        frame = frame.tb_next
    return where


def _hashed_at_user_line(err):
    """Python's TypeError hashing a Symbol as the AutographError at the user's innermost
    line (NOTE [a hashed Symbol])."""
    where = _user_line(err)
    if where is not None:
        refuse_hashed_symbol(err, f"{where[0]}:{where[1]}: "
                                  f"{linecache.getline(*where[:2]).strip()}",
                             "a set or dict of tensors" if where[2] in _DISPLAYS else
                             "this hashes a tensor (a set's item, a dict's key)")


def _display_hashed_symbol(err):
    """Whether ``err`` is Python's TypeError hashing a Symbol in a set or dict display or
    comprehension of the user's (NOTE [a hashed Symbol])."""
    if not hashes_symbol(err):
        return False
    where = _user_line(err)
    return where is not None and where[2] in _DISPLAYS


class SymbolOnlyError(AutographError, mx.base.NotImplementedForSymbol):
    """MXNet's NotImplementedForSymbol met by the user's code while hybridizing, at the
    user's line: an AutographError, and caught as plain MXNet's error is (``except
    NotImplementedForSymbol``, ``except MXNetError``)."""

    __str__ = AutographError.__str__


def _symbol_only_at_user_line(err):
    """MXNet's NotImplementedForSymbol (a Symbol's truth, or another NDArray-only function)
    met by Python code autograph leaves Python's (a match's value pattern comparing tensors
    held deep in objects, ``case Plain(items=other):``) names no line of the user's: a
    :class:`SymbolOnlyError` at the innermost line of the user's code it passed through."""
    where = _user_line(err)
    if where is None:
        return
    what = "takes the truth of a tensor (compares tensors, bool())" if err.alias == "bool" \
        else f"calls {err.function} of a tensor"
    refused = SymbolOnlyError(
        f"{where[0]}:{where[1]}: {linecache.getline(*where[:2]).strip()}: this {what} while "
        f"hybridizing, which MXNet's Symbol has only as an NDArray: its value exists only "
        f"when the graph runs. Compute it with F ops (an if or while on the tensor "
        f"converts), or compare Python values")
    refused.function, refused.alias = err.function, err.alias
    raise refused from None


def _symbol_output_index(err):
    """Whether ``err`` is the bare IndexError of MXNet's ``Symbol.__getitem__`` (an int past
    a Symbol's outputs), raised in library code the converted code called (a Gluon RNN cell
    reading ``states[1]`` of a state given as one array, not a list)."""
    if type(err) is not IndexError or str(err):
        return False
    frame = err.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and frame.tb_frame.f_code.co_name == "__getitem__" and \
        frame.tb_frame.f_code.co_filename.endswith(os.path.join("mxnet", "symbol", "symbol.py"))


def _symbol_index_at_user_line(err):
    """The bare IndexError of :func:`_symbol_output_index` (eagerly the same code indexes the
    array's rows, and fails otherwise or not at all), named at the user's innermost line
    and still an IndexError (as the user's ``except IndexError:`` catches)."""
    where = _user_line(err)
    if where is None:
        return
    raise IndexError(
        f"{where[0]}:{where[1]}: {linecache.getline(*where[:2]).strip()}: while hybridizing, "
        f"code called here indexed a tensor (a Symbol) past its outputs: MXNet's Symbol[k] is "
        f"its k-th output, not its k-th row as an NDArray's, so library code written for a "
        f"list of arrays (an RNN cell's states [h, c]) fails on one array. Pass what it "
        f"expects (a list of arrays); in your own code x[k] is a row (autograph rewrites "
        f"it)") from None


def checked(fn, call, name, binds, where, sign, rewrite, receiver=False):
    """``fn``, called as converted code calls it at ``call`` (``file:line: source``), where
    the call binds (``binds``) or is given the variable ``name`` that ``name op= v`` at
    ``where`` changes: while hybridizing, an AutographError at ``where`` unless
    :func:`returns_new_arrays` proves the call neither returns nor keeps an array
    something else holds. ``receiver``: the variable is given only as the method's object
    (``outs.append(h)``), so none of this when it is no array (a list's ``op=`` is in
    place, and the variable keeps its type until it is rebound)."""
    if receiver and not isinstance(getattr(fn, "__self__", None), (mx.nd.NDArray,
                                                                   mx.sym.Symbol)):
        return fn
    def refuse():
        how = f"it is what {call} returns" if binds else f"{call} is given it"
        return refusal(where, sign, f"{name!r} may hold an array something else holds too "
                       f"({how}: a function, method or block may return or keep its "
                       f"argument or an array it keeps; only MXNet's operators and Gluon's "
                       f"built-in layers are known to return new arrays and keep none)",
                       rewrite)

    def run(*args, **kwargs):
        result = fn(*args, **kwargs)
        # (what is bound may be an attribute or item of the result: h = self.memory().h)
        if (_holds_symbol(result, _DEPTH) or _has_symbol(args) or _has_symbol(kwargs) or
                _has_symbol(getattr(fn, "__self__", None))) and \
                not returns_new_arrays(fn, args, kwargs):
            raise refuse()
        if binds and isinstance(result, collections.abc.Iterator) and \
                not isinstance(result, (mx.nd.NDArray, mx.sym.Symbol)) and \
                not returns_new_arrays(fn, args, kwargs):
            # a, b = self.states(): what a generator yields is known only as it is unpacked
            return _checked_items(result, refuse)
        return result
    return run


def _checked_items(items, refuse):
    for item in items:
        if _holds_symbol(item, _DEPTH):
            raise refuse()
        yield item


def returns_new_arrays(fn, args, kwargs) -> bool:
    """Whether plain MXNet's ``fn(*args, **kwargs)`` (eagerly, on NDArrays) returns only
    arrays it allocated: an operator (``F.tanh``, ``nd.zeros``, ``F.contrib.box_nms``) with no
    ``out``; an array's method that is an operator (``x.sin()``, ``x.sum()``; not
    ``x.reshape``, a view, nor ``x.flatten(inplace=True)``), ``x.copy()``, ``x.astype(t)``
    with ``copy`` left true; a Gluon built-in layer (:func:`block_returns_new_arrays`);
    Python's ``sum`` with a number to start from."""
    if isinstance(fn, types.MethodType) and isinstance(fn.__self__, (mx.nd.NDArray,
                                                                     mx.sym.Symbol)):
        return _method_returns_new(fn.__name__, args, kwargs)
    if isinstance(fn, types.FunctionType) and fn in _operator_functions():
        return not _writes_out(fn, args, kwargs)
    if isinstance(fn, mx.gluon.Block):
        return block_returns_new_arrays(fn)
    # sum: start + a + b ..., a new array, or start (a number here) if there are no items
    if getattr(fn, "checked_builtin", fn) is builtins.sum:
        start = args[1] if len(args) > 1 else kwargs.get("start", 0)
        return isinstance(start, numbers.Number)
    return False


# Gluon's layers whose forward ends in an operator of their input (their hybrid_forward in
# MXNet 1.9.1: F.FullyConnected, F.Convolution, F.Pooling, F.BatchNorm, F.LeakyReLU ...,
# never the input itself); tests/test_augmented_aliases.py checks each
NEW_ARRAY_BLOCKS: FrozenSet[type] = frozenset(
    getattr(nn, name) for name in (
        "Activation", "AvgPool1D", "AvgPool2D", "AvgPool3D", "BatchNorm", "BatchNormReLU",
        "Conv1D", "Conv1DTranspose", "Conv2D", "Conv2DTranspose", "Conv3D", "Conv3DTranspose",
        "Dense", "Dropout", "ELU", "Embedding", "Flatten", "GELU", "GlobalAvgPool1D",
        "GlobalAvgPool2D", "GlobalAvgPool3D", "GlobalMaxPool1D", "GlobalMaxPool2D",
        "GlobalMaxPool3D", "GroupNorm", "InstanceNorm", "LayerNorm", "LeakyReLU", "MaxPool1D",
        "MaxPool2D", "MaxPool3D", "PReLU", "ReflectionPad2D", "SELU", "Swish")
    if hasattr(nn, name))
_SEQUENTIAL_BLOCKS = (nn.Sequential, nn.HybridSequential)


def block_returns_new_arrays(block) -> bool:
    """Whether calling ``block`` returns a new array: exactly one of Gluon's layers of
    :data:`NEW_ARRAY_BLOCKS` (a subclass may override its forward), or a non-empty
    (Hybrid)Sequential (an empty one returns its input), with no forward replaced on the
    object, no forward hook (a hook may keep the input or output) and children of the same
    kind (a Dense's activation)."""
    kind = type(block)
    if kind not in NEW_ARRAY_BLOCKS and kind not in _SEQUENTIAL_BLOCKS:
        return False
    if "forward" in vars(block) or "hybrid_forward" in vars(block) or \
            block._forward_hooks or block._forward_pre_hooks:
        return False
    children = list(block._children.values())
    if kind in _SEQUENTIAL_BLOCKS and not children:
        return False
    return all(block_returns_new_arrays(child) for child in children)


# The arrays' methods with an operator's name that do not just call it (MXNet 1.9.1's
# ndarray.py): reshape is a view; flatten, expand_dims and squeeze are views with inplace=True
# (its position among their arguments); diag, broadcast_to and broadcast_like call operators
_VIEW_METHODS = {"reshape"}
_INPLACE_ARGUMENT = {"flatten": 0, "expand_dims": 1, "squeeze": 1}
_ALLOCATING_METHODS = {"copy"}


def operator_methods() -> Set[str]:
    """The NDArray methods named as one of MXNet's registered operators (``mx.nd.op``), less
    :data:`_VIEW_METHODS`: derived, so every operator method counts (``x.sin()``, ``x.erf()``)."""
    global _OPERATOR_METHODS
    if _OPERATOR_METHODS is None:
        _OPERATOR_METHODS = {name for name, value in vars(mx.nd.NDArray).items()
                             if callable(value) and _generated(getattr(mx.nd.op, name, None))
                             } - _VIEW_METHODS
    return _OPERATOR_METHODS


_OPERATOR_METHODS: Optional[Set[str]] = None


def _method_returns_new(name, args, kwargs):
    if name == "astype":                      # astype(dtype, copy=True): self if not copy
        return bool(args[1] if len(args) > 1 else kwargs.get("copy", True))
    if name in _ALLOCATING_METHODS:
        return True
    if name not in operator_methods():
        return False
    at = _INPLACE_ARGUMENT.get(name)
    if at is not None and (args[at] if len(args) > at else kwargs.get("inplace", False)):
        return False
    return not _writes_out(getattr(mx.nd.op, name), (None,) + tuple(args), kwargs)


def _writes_out(fn, args, kwargs):
    """Whether the call writes into a given ``out`` array (and returns it)."""
    if kwargs.get("out") is not None:
        return True
    code = fn.__code__
    names = code.co_varnames[:code.co_argcount]
    return "out" in names and len(args) > names.index("out") and \
        args[names.index("out")] is not None


def _generated(fn):
    """MXNet's functions generated for its registered operators (compiled from a string)."""
    return isinstance(fn, types.FunctionType) and fn.__code__.co_filename == "<string>"


_OPERATOR_FUNCTIONS: Optional[Set[types.FunctionType]] = None
# MXNet's functions that allocate their result but are not generated operators
_ALLOCATING = ("zeros", "ones", "full", "empty", "array", "arange", "linspace", "eye")
_RANDOM = ("uniform", "normal", "randn", "poisson", "exponential", "gamma",
           "negative_binomial", "generalized_negative_binomial", "randint", "shuffle")


def _operator_functions():
    global _OPERATOR_FUNCTIONS
    if _OPERATOR_FUNCTIONS is None:
        found: Set[types.FunctionType] = set()
        for api in (mx.nd, mx.sym):
            modules = [api] + [getattr(api, name) for name in (
                "op", "contrib", "linalg", "sparse", "image", "random", "_internal")
                if hasattr(api, name)]
            for module in modules:
                found.update(v for v in vars(module).values() if _generated(v))
            found.update(getattr(api, name) for name in _ALLOCATING if hasattr(api, name))
            found.update(getattr(api.random, name) for name in _RANDOM
                         if hasattr(api.random, name))
        _OPERATOR_FUNCTIONS = {f for f in found if isinstance(f, types.FunctionType)}
    return _OPERATOR_FUNCTIONS


def _has_symbol(value):
    if isinstance(value, mx.sym.Symbol):
        return True
    if isinstance(value, (tuple, list)):
        return any(map(_has_symbol, value))
    if isinstance(value, dict):
        return any(map(_has_symbol, value.values()))
    return False


# how deep a call's result is searched for a Symbol: h = self.memory().cell.h
_DEPTH = 4
_LEAVES = (mx.nd.NDArray, str, bytes, int, float, complex, type(None), range, types.ModuleType,
           type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def _holds_symbol(value, depth, seen=None):
    """Whether ``value`` is a Symbol or holds one within ``depth`` levels: items of any
    sequence, set or mapping (a deque, a UserList ...) and attributes of any object (a
    dataclass, a SimpleNamespace, the user's class): an attribute or item of what a call
    returns may be bound (``h = self.memory().h``), and a Symbol there means hybridizing.
    Iterators and generators are not consumed."""
    if isinstance(value, mx.sym.Symbol):
        return True
    if depth == 0 or isinstance(value, _LEAVES) or isinstance(value, np.ndarray):
        return False
    seen = set() if seen is None else seen
    if id(value) in seen:
        return False
    seen.add(id(value))
    if isinstance(value, collections.abc.Mapping):
        parts = list(value.values())
    elif isinstance(value, (collections.abc.Sequence, collections.abc.Set)):
        parts = list(value)
    else:
        parts = list(getattr(value, "__dict__", {}).values()) + [
            getattr(value, name, None) for name in getattr(type(value), "__slots__", ())
            if isinstance(name, str)]
    return any(_holds_symbol(part, depth - 1, seen) for part in parts)


def callbacks_converted(args, kwargs, convert, where, callee=None):
    """``args`` and ``kwargs`` of a call of library code or a builtin by converted code, the
    user's functions among them (``sorted(ws, key=self._key)``, ``map(f, ws)``,
    ``functools.reduce(self._add, ws)``) converted by ``convert`` (NOTE [autograph calls]):
    run unconverted, their side effects inside a tensor ``if`` or loop ran once while
    tracing, unchecked. Classes and other objects are given as they are, and so is every
    argument of ``callee`` when it takes functions as values, never calling them
    (``pickle.dumps(f)`` refused the converted function, not the module's; ``copy.copy(f)
    is f`` and ``functools.wraps(f)(g).__wrapped__ is f`` were False: eagerly too)."""
    if convert is None or any(callee is f for f in _FUNCTIONS_AS_VALUES):
        return args, kwargs
    callee = getattr(callee, "library_checked", callee)     # (py_builtins.library_iterating)

    def one(value, called):
        # an object of a user class is converted (its __call__) where it is surely called: a
        # key= (sorted's, max's, heapq's ...), map's, filter's, reduce's, itertools'
        # function; elsewhere it may be data (a callable config given to json, dataclasses)
        if isinstance(value, (types.FunctionType, types.MethodType, functools.partial)) or \
                called and not isinstance(value, type) and \
                isinstance(getattr(type(value), "__call__", None), types.FunctionType) or \
                called and isinstance(value, types.BuiltinFunctionType):
            return convert(value, where)
        return value
    first = any(callee is f for f in _CALLING_FIRST)
    return tuple(one(a, first and k == 0) for k, a in enumerate(args)), \
        {k: one(v, k == "key") for k, v in kwargs.items()}


# library functions given the user's functions as values (pickled, copied, stored as
# ``__wrapped__``, referred to weakly), not to call: callbacks_converted gives them as they are
_FUNCTIONS_AS_VALUES = (pickle.dumps, pickle.dump, copy.copy, copy.deepcopy, functools.wraps,
                        functools.update_wrapper, weakref.ref, weakref.proxy, weakref.WeakMethod,
                        weakref.WeakSet, weakref.WeakKeyDictionary, weakref.WeakValueDictionary)
# ... and those that call their first argument
_CALLING_FIRST = (map, filter, functools.reduce, itertools.starmap, itertools.filterfalse,
                  itertools.takewhile, itertools.dropwhile)
