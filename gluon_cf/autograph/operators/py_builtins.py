"""Iteration over tensors at run time: comprehensions, unpacking and the builtins that iterate
(or measure) their arguments, refused on a Symbol at the user's line.

NOTE [autograph iteration]
    MXNet's ``Symbol.__iter__`` yields the whole symbol once, so everything that iterates a
    Symbol as Python would is refused at its line: comprehensions and generator expressions
    (:func:`iterated`; an ``if`` of theirs on a Symbol, :func:`filtered`), ``*x`` in a
    call, and the builtins ``enumerate``, ``zip``, ``range``,
    ``sum``, ``len``, ``list`` ... called with a Symbol (:func:`builtin`), except where the
    shapes of the inputs a block's graph is traced for give the Symbol's shape (NOTE [graphs
    traced for input shapes] in ``gluon_cf/hybrid.py``): there ``len`` is its first axis,
    and comprehensions, unpacking, the builtins but ``range``, ``reversed`` and the
    comparing ones (but those given a ``key=``), and the standard library's functions that
    iterate their arguments (``functools.reduce(f, x)``, ``itertools.accumulate(x)``:
    :func:`library_iterating`) iterate its rows (:func:`static_rows`, as an NDArray yields
    them: the loop unrolled, a graph per input shape). ``any``, ``all``,
    ``min``, ``max`` and ``sorted`` of Symbols (a list or generator of them) would take their
    truth or compare them, which MXNet refuses with no line of the user's: refused at the
    call (with a ``key=``, ``min``, ``max`` and ``sorted`` compare only the keys: a key that
    is a Symbol is refused, Python numbers sort the Symbols); so are ``float``, ``int``,
    ``bool``, ``round`` and ``complex`` of a Symbol (a Python number
    of a value the graph computes later). ``for row in reversed(x)`` on a tensor is the
    ``for`` over ``F.reverse(x, axis=0)`` (:func:`reversed_rows`): the rows backwards, as
    ``reversed`` yields an NDArray's. A ``for`` statement over a tensor converts (``foreach``,
    NOTE [autograph loops]); over a Symbol of several outputs (``F.split``'s) it is Python's loop
    over them, as over the eager list.
"""
import collections.abc
import contextlib
import functools
import itertools
import linecache
import os
import sys
import threading
import types

import mxnet as mx

from ...hybrid_trace import static_shape
from ...operators import user_location
from ..errors import AutographError, in_python_types, op_name, refuse_hashed_symbol
from .call_results import callbacks_converted, converted_running


def iterated(value, where, what):
    """The iterable of a comprehension, generator expression or unpacking (``*x``): a Symbol
    of one output is an error (MXNet's Symbol.__iter__ yields the whole symbol, not its rows;
    a Symbol of several outputs, ``F.split``'s, yields them as the eager list does)."""
    if one_output(value):
        rows = static_rows(value, where)
        if rows is not None:
            return rows
        raise AutographError(
            f"{where}: this {what} iterates over a tensor; while hybridizing a Symbol has no "
            f"rows to iterate (MXNet would yield the whole array once), so write a for "
            f"statement over it (a graph loop, appending the rows to a list), or index it")
    return value


def filtered(test, where):
    """The test of a comprehension's ``if``, whose truth Python takes: a Symbol's is known
    only when the graph runs (NOTE [autograph iteration]), and how many items pass with it,
    so it is refused at the line (MXNet's NotImplementedForSymbol named no line)."""
    if isinstance(test, mx.sym.Symbol):
        raise AutographError(
            f"{where}: this comprehension's if tests a tensor; while hybridizing its truth "
            f"exists only when the graph runs, and so does how many items pass. Keep every "
            f"item and weigh it by the test (F.where(test, item, F.zeros_like(item)), or "
            f"item * test), or write a for statement with an if on the tensor")
    return test


# Builtins that iterate over (or measure) their arguments: on a Symbol they would see one item.
ITERATING = {"enumerate", "zip", "reversed", "iter", "list", "tuple", "sorted", "map",
              "filter", "sum", "min", "max", "any", "all", "set", "frozenset", "dict", "len",
              "range", "next", "float", "int", "bool", "round", "complex", "isinstance",
              "type"}
# ... of which these take a Python number from their argument
_VALUE = {"float", "int", "bool", "round", "complex"}


def builtin(fn, where, convert=None):
    """``fn`` (a name in ITERATING at a call of converted code): when it is the builtin, a
    call with a Symbol argument is an error naming the call. ``convert``: what the user's
    functions it is given (``key=``, ``map``'s) are converted by
    (``call_results.callbacks_converted``)."""
    import builtins
    name = getattr(fn, "__name__", None)
    the_builtin = getattr(builtins, name, None) if name in ITERATING else None
    if the_builtin is None or the_builtin is not fn:
        return fn

    @functools.wraps(the_builtin)
    def checked(*args, **kwargs):
        if name in ("isinstance", "type"):
            return _type_of(the_builtin, args, kwargs, where)
        args, kwargs = callbacks_converted(args, kwargs, convert, where, the_builtin)
        # (looked up on the type: a user's object answering any attribute is no such list)
        # (sum's start: sum(items, start) or sum(items, start=...))
        start = _sum_start(args, kwargs) if name == "sum" else None
        own = getattr(type(args[0]), "builtin_of_rows", None) if args and (
            len(args) == 1 and not kwargs or start is not None) else None
        if own is not None:
            # a list a tensor loop collected, its length known when the graph runs: a new
            # list of its items, their sum (NOTE [autograph lists])
            result = own(args[0], name, where) if start is None else \
                own(args[0], name, where, start[0])
            if result is not NotImplemented:
                return result
        keyed = name in _KEYED and kwargs.get("key") is not None
        if keyed:
            # (sorted(rows, key=lambda r: 0): the keys are compared, never the items)
            kwargs = dict(kwargs, key=_symbol_free_key(kwargs["key"], name, where))
        elif name in _COMPARING and len(args) == 1 and not isinstance(
                args[0], (mx.sym.Symbol, str, bytes, dict)):
            # (checked item by item as the builtin reads them: any() and all() stop early)
            args = (_no_symbols(args[0], name, where),)
        elif name in _COMPARING and len(args) > 1 and \
                any(isinstance(a, mx.sym.Symbol) for a in args):
            _refuse_truth(name, where)
        if name in _VALUE and any(isinstance(a, mx.sym.Symbol)
                                  for a in list(args) + list(kwargs.values())):
            raise AutographError(
                f"{where}: {name}() of a tensor while hybridizing: its value exists only "
                f"when the graph runs, so it cannot become a Python number. Keep it an array "
                f"(an if or while on it converts; F.cast, F.round for the arithmetic)")
        if name == "len" and len(args) == 1 and isinstance(args[0], mx.sym.Symbol):
            # the first axis of a traced input's shape (NOTE [graphs traced for input
            # shapes] in gluon_cf/hybrid.py)
            shape = static_shape(args[0], where)
            if shape is not None:
                return shape[0]
        iterated_args = _ITERATED_ARGS.get(str(name), slice(None))
        if any(one_output(a) for a in args[iterated_args]):
            if name in _COMPARING and not keyed or name in ("range", "reversed"):
                _refuse_iteration(name, where)
            # the rows of the traced input's shape, as the NDArray's iteration yields them
            positions = range(len(args))[iterated_args]
            args = tuple(static_rows(a, where) if k in positions and one_output(a) else a
                         for k, a in enumerate(args))
            if any(a is None for a in args):
                _refuse_iteration(name, where)
        if name == "filter" and len(args) == 2:
            args = (_truth_checked(args[0], where), args[1])
        with _truth_refused(name, where):
            try:
                return the_builtin(*args, **kwargs)
            except TypeError as err:    # (round(items): Python's naming a list)
                raise in_python_types(err, *args) from None
    checked.checked_builtin = the_builtin  # type: ignore[attr-defined]  # (call_results)
    return checked


def _type_of(the_builtin, args, kwargs, where):
    """``isinstance(v, kinds)`` and ``type(v)`` in converted code.

    NOTE [a collected list's type]: a list a tensor loop collected is, while hybridizing, an
    object of another class (its items the rows of one array: NOTE [autograph lists])
    standing for the list;
    ``isinstance(outs, list)`` and ``type(outs) == list`` were False, silently another branch
    than eagerly. Its ``python_type`` answers for it (``list``; ``reversed(outs)``'s the
    list_reverseiterator), and its ``outs.__class__`` (``tensor_access.attribute``). Only
    gluon_cf's own stand-ins answer so: a user's class with a ``python_type`` attribute is
    itself (``isinstance(spec, float)`` was True). A class whose metaclass checks instances
    its own way (``__instancecheck__``, not ``abc``'s) is given the list's items as a Python
    list, their number known while tracing, else refused: it may look at the object, not its
    class (``type(obj) is list and len(obj) > 2`` was False)."""
    kind = python_type(args[0]) if args and not kwargs else None
    if kind is not None and the_builtin is isinstance and len(args) == 2:
        if not _own_instancecheck(args[1]):
            return issubclass(kind, args[1])
        n = args[0].known_length(where) if hasattr(args[0], "rows_list") else None
        if n is None:
            raise AutographError(
                f"{where}: isinstance() of a list a loop on a tensor collected, whose length "
                f"is known only when the graph runs, with a class checking instances its own "
                f"way (__instancecheck__); check isinstance(v, list) or the items instead")
        return the_builtin(list(args[0].rows_list(n, range(n), where)), args[1])
    if kind is not None and the_builtin is type and len(args) == 1:
        return kind
    return the_builtin(*args, **kwargs)


def _own_instancecheck(kinds):
    """Whether a class of ``isinstance``'s ``kinds`` (a class, a tuple or union of them, a
    typing alias) answers by an ``__instancecheck__`` of its own (not ``type``'s or
    ``abc``'s, which answer as ``issubclass`` of the object's class does)."""
    if isinstance(kinds, (tuple, types.UnionType)):
        parts = kinds if isinstance(kinds, tuple) else kinds.__args__
        return any(_own_instancecheck(k) for k in parts)
    check = getattr(type(kinds), "__instancecheck__", None)
    return check is not None and check is not type.__instancecheck__ and \
        getattr(check, "__module__", None) not in ("abc", "_py_abc")


def python_type(value):
    """The class gluon_cf's stand-in ``value`` answers for (NOTE [a collected list's type]),
    else None (a user's class with a ``python_type`` attribute is itself)."""
    kind = type(value)
    return getattr(kind, "python_type", None) if kind.__module__.startswith("gluon_cf.") \
        else None


def _sum_start(args, kwargs):
    """``(start,)`` of a call ``sum(items, start)`` or ``sum(items, start=start)``, else
    None."""
    if len(args) == 2 and not kwargs:
        return (args[1],)
    if len(args) == 1 and set(kwargs) == {"start"}:
        return (kwargs["start"],)
    return None


def _truth_checked(predicate, where):
    """filter's predicate (None: the items themselves), whose results filter takes the
    truth of: a Symbol's is an error naming the call."""
    def test(item):
        result = item if predicate is None else predicate(item)
        if isinstance(result, mx.sym.Symbol):
            _refuse_truth("filter", where)
        return result
    return test


def _refuse_iteration(name, where):
    raise AutographError(
        f"{where}: {name}() of a tensor: while hybridizing a Symbol has no rows to "
        f"{'count' if name == 'len' else 'iterate'} (MXNet would see the whole array "
        f"as one item), so it cannot run as Python. Loop with a for statement over "
        f"the tensor itself (a graph loop) and keep a counter as an array "
        f"(i = F.zeros((1,)) ... i = i + 1), or use F ops (F.shape_array, F.sum)")


# ... and the keyword arguments they iterate (itertools.compress(data=x, selectors=m))
_ITERATED_KEYWORDS = ("iterable", "data", "selectors")


# The standard library's functions that iterate their arguments as the builtins above do
# (functools.reduce(f, x) over a Symbol would return the Symbol itself): the positional
# arguments they iterate
_LIBRARY_ITERATING = {
    functools.reduce: slice(1, 2), itertools.accumulate: slice(0, 1),
    itertools.chain: slice(None), itertools.starmap: slice(1, 2),
    itertools.islice: slice(0, 1), itertools.cycle: slice(0, 1),
    itertools.product: slice(None), itertools.combinations: slice(0, 1),
    itertools.permutations: slice(0, 1), itertools.zip_longest: slice(None),
    itertools.groupby: slice(0, 1), itertools.tee: slice(0, 1),
    itertools.pairwise: slice(0, 1), itertools.compress: slice(None),
    itertools.dropwhile: slice(1, 2), itertools.takewhile: slice(1, 2),
    itertools.filterfalse: slice(1, 2)}


# NOTE [a tensor iterated by library code]
#     Library code converted code calls (not converted: NOTE [autograph calls]) may iterate a
#     tensor it is given: ``collections.deque(x, maxlen=2)``, ``random.choice(x)``,
#     ``heapq.nlargest(2, x)``. MXNet's ``Symbol.__iter__`` yields the whole one-output
#     Symbol once and ``len`` is its number of outputs, 1, so hybridized such a call silently
#     saw one item (a deque of the last two rows was the whole array). While a library call
#     with a one-output Symbol among its arguments runs (:func:`library_call`), iterating a
#     one-output Symbol yields its rows where the input shapes give them (as an NDArray's
#     iteration, :func:`static_rows`; NOTE [graphs traced for input shapes]) and is refused
#     at the call's line otherwise; its ``len`` is refused (MXNet's indexing by an int picks
#     an output, not a row). Outside such calls MXNet's own behaviour stands. A Symbol the
#     call is given counts as an argument, an item of a list, tuple or dict argument or held
#     by a ``functools.partial`` (``itertools.chain.from_iterable([x, y])``, a C class's
#     method: ``side_effects.lent``), and an iterator the call returns runs each step as the
#     call did (``heapq.merge(x)``, a library's generator: they iterate ``x`` lazily).
_library = threading.local()


@contextlib.contextmanager
def library_call(name, where):
    """While library code ``name`` called by converted code at ``where`` runs with a tensor
    argument: its iteration of a Symbol is checked (NOTE [a tensor iterated by library
    code])."""
    stack = _library.__dict__.setdefault("calls", [])
    stack.append((name, where))
    try:
        yield
    finally:
        stack.pop()


def _by_library(depth=2):
    """Whether the code iterating (measuring) a Symbol, ``depth`` frames up, is neither
    MXNet's nor gluon_cf's own (they take a Symbol as MXNet does); the checking call itself
    (``side_effects``) stands for C library code such as ``collections.deque``."""
    filename = sys._getframe(depth).f_code.co_filename
    if filename.startswith(_MXNET_DIR):
        return False
    return not filename.startswith(_GLUON_CF_DIR) or \
        os.path.basename(filename) == "side_effects.py"


_MXNET_DIR = os.path.dirname(mx.__file__) + os.sep
_GLUON_CF_DIR = os.path.dirname(os.path.dirname(os.path.dirname(__file__))) + os.sep


def _checked_iter(symbol):
    calls = getattr(_library, "calls", None)
    if calls and one_output(symbol) and _by_library():
        name, where = calls[-1]
        rows = static_rows(symbol, str(where))
        if rows is None:
            _refuse_iteration(name, str(where))
        return iter(rows)
    return _SYMBOL_ITER(symbol)


def _checked_len(symbol):
    calls = getattr(_library, "calls", None)
    if calls and one_output(symbol) and _by_library():
        _refuse_iteration(calls[-1][0], str(calls[-1][1]))
    return _SYMBOL_LEN(symbol)


_SYMBOL_ITER, _SYMBOL_LEN = mx.sym.Symbol.__iter__, mx.sym.Symbol.__len__
mx.sym.Symbol.__iter__, mx.sym.Symbol.__len__ = _checked_iter, _checked_len


def _symbol_array(symbol):
    """numpy's ``__array__`` of a Symbol inside a converted function: a refusal at the user's
    line. A Symbol has none, so ``np.asarray(x)`` took it as a sequence (its ``__len__`` 1,
    its ``[0]`` itself): an array of 32 nested axes of one Symbol object, and
    ``np.asarray(x).sum()`` was ``x`` itself, silently (review r30ag). Elsewhere (MXNet's
    own code, a Symbol used without autograph) it has none, as before."""
    if not converted_running() or user_location(2) is None:
        raise AttributeError("__array__")

    def refused(*args, **kwargs):
        here = user_location(2) or "<unknown>:0"
        path, _, line = here.rpartition(":")
        raise AutographError(
            f"{here}: {linecache.getline(path, int(line)).strip()}: numpy's array of a "
            f"tensor while hybridizing: a Symbol has no values (they exist only when the "
            f"graph runs), so numpy would make an array of the Symbol object itself; use F "
            f"ops on the tensor (F.sum(x), F.mean(x), F.shape_array(x)) or compute with "
            f"numpy outside the block")
    return refused


mx.sym.Symbol.__array__ = property(_symbol_array)


def library_iterating(fn, where, convert=None):
    """``fn`` checked as :func:`builtin` checks the builtins when it is one of the standard
    library's functions that iterate their arguments (``functools.reduce``, ``itertools``'):
    a Symbol it iterates is its rows where the input shapes give them, else refused; one of
    those builtins given as a value (``sorted(parts, key=len)``, ``map(len, parts)``,
    ``count = len``) is :func:`builtin`'s check (``convert``: as there); else None."""
    measured = builtin(fn, where, convert) if isinstance(fn, types.BuiltinFunctionType) \
        else fn
    if measured is not fn:
        return measured
    try:
        iterated = _LIBRARY_ITERATING.get(fn)
    except TypeError:       # (an unhashable callable)
        return None
    if iterated is None:
        return None
    name = f"{fn.__module__}.{fn.__name__}".replace("_functools.", "functools.")

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        if any(one_output(kwargs.get(k)) for k in _ITERATED_KEYWORDS):
            # (itertools.accumulate(iterable=x): the rows, as given by position)
            kwargs = {k: static_rows(v, str(where)) if k in _ITERATED_KEYWORDS and
                      one_output(v) else v for k, v in kwargs.items()}
            if any(kwargs.get(k, ()) is None for k in _ITERATED_KEYWORDS):
                _refuse_iteration(name, str(where))
        elif not any(one_output(a) for a in args[iterated]):
            return fn(*args, **kwargs)
        # the rows of the traced input's shape, as the NDArray's iteration yields them
        # (functools.reduce(f, x) folds them, unrolled), as the builtins iterate them
        positions = range(len(args))[iterated]
        args = tuple(static_rows(a, str(where)) if k in positions and one_output(a)
                     else a for k, a in enumerate(args))
        # (a None among the others is the caller's: itertools.islice(x, 1, None))
        if any(args[k] is None for k in positions):
            _refuse_iteration(name, str(where))
        with _truth_refused(name, str(where)):
            result = fn(*args, **kwargs)
        # (itertools' are lazy: what they test, they test as they are iterated)
        return _truth_refused_each(result, name, str(where)) if \
            isinstance(result, collections.abc.Iterator) else result
    checked.library_checked = fn  # type: ignore[attr-defined]  # (still library code)
    return checked


# The positional arguments a builtin iterates (or measures), where not all of them: sum's start,
# enumerate's start, next's default may be tensors (sum([h, r], x * 0) adds them, issue 24),
# map's and filter's function is not iterated
_ITERATED_ARGS = {"sum": slice(0, 1), "enumerate": slice(0, 1), "next": slice(0, 1),
                  "map": slice(1, None), "filter": slice(1, None)}
# Builtins that take the truth of (or compare) the items they are given
_COMPARING = {"any", "all", "min", "max", "sorted"}


# ... of which these compare what their key= gives, when given one
_KEYED = {"min", "max", "sorted"}


def _symbol_free_key(key, name, where):
    def checked_key(item):
        value = key(item)
        if isinstance(value, mx.sym.Symbol) or isinstance(value, (list, tuple)) and \
                any(isinstance(v, mx.sym.Symbol) for v in value):
            _refuse_truth(name, where)
        return value
    return checked_key


def _no_symbols(iterable, name, where):
    for item in iterable:
        if isinstance(item, mx.sym.Symbol):
            _refuse_truth(name, where)
        yield item


@contextlib.contextmanager
def _truth_refused(name, where):
    """While a builtin or library function runs on tensors: its truth of a Symbol (a row it
    tests, ``itertools.takewhile``'s predicate, ``max`` comparing two) and its hash (``set``)
    are refused at the call, not MXNet's NotImplementedForSymbol (Python's TypeError)
    naming no line."""
    try:
        yield
    except mx.base.NotImplementedForSymbol:
        _refuse_truth(name, where)
    except TypeError as err:
        # (set(items) of a collected list: Python's TypeError named no line)
        refuse_hashed_symbol(err, where, f"{name}() of tensors")


def _truth_refused_each(iterator, name, where):
    while True:
        with _truth_refused(name, where):
            try:
                item = next(iterator)
            except StopIteration:
                return
        yield item


def _refuse_truth(name, where):
    raise AutographError(
        f"{where}: {name}() of tensors while hybridizing: it compares them or takes their "
        f"truth, which a Symbol has only when the graph runs. Use F ops on the stacked "
        f"values (F.max, F.min, F.sort, F.sum(...) > 0 for any, F.min(...) > 0 for all)")


def reversed_rows(fn, value):
    """The iterable of ``for ... in reversed(value)`` (``fn``: what ``reversed`` names
    there): the builtin on a Symbol is the Symbol's rows in reverse order, ``reverse`` along
    axis 0, for the loop to convert (a ``foreach``)."""
    import builtins
    if fn is builtins.reversed and one_output(value):
        return mx.sym.reverse(value, axis=0)
    return fn(value)


def static_rows(symbol, where):
    """The rows of ``symbol`` as iterating an NDArray yields them (``x[i]``: the first axis
    dropped, a 1-D array's items of shape (1,)), where the shapes of the inputs the block's
    graph is traced for give its shape (NOTE [graphs traced for input shapes] in
    ``gluon_cf/hybrid.py``), else None."""
    shape = static_shape(symbol, where)
    if shape is None:
        return None
    rows = []
    for k in range(shape[0]):
        row = mx.sym.slice_axis(symbol, axis=0, begin=k, end=k + 1,
                                name=op_name(where, "row"))
        rows.append(mx.sym.reshape(row, shape=shape[1:], name=op_name(where, "row"))
                    if len(shape) > 1 else row)
    return rows


def own_method(fn, where):
    """``parts.append`` where every binding of ``parts`` in the calling function is a new
    object (``parts = []`` in a loop's step): the method as it is when a Python container's
    (the change is of an object nothing outside the call holds; :func:`container_call`), else
    None (the call is converted as any other). Not ``sort`` and ``remove``, which compare the
    items (as tensors while hybridizing) and call a key the user gives: converted as any
    other (NOTE [autograph side effects])."""
    if type(getattr(fn, "__self__", None)) not in (list, dict, set, bytearray) or \
            fn.__name__ in ("sort", "remove"):
        return None
    return container_call(fn, where)


def container_call(fn, where):
    """``fn``, a Python container's method, as converted code calls it: its ``extend`` or
    ``update`` given a tensor (which iterate it: ``parts.extend(x)``) is given its rows as an
    NDArray's iteration yields them, where the input shapes give them, else refused (MXNet's
    Symbol is one item); a set's or dict's given a tensor to hash (``seen.add(h)``) is
    refused at the call (an NDArray hashes by identity; a Symbol is unhashable)."""
    name, receiver = getattr(fn, "__name__", None), getattr(fn, "__self__", None)
    if name not in ("extend", "update") and not isinstance(receiver, (set, dict)):
        return fn

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        given = [one_output(a) for a in args]
        if any(given) and name in ("extend", "update"):
            args = tuple(static_rows(a, str(where)) if symbol else a
                         for a, symbol in zip(args, given))
            if any(a is None for a, symbol in zip(args, given) if symbol):
                _refuse_iteration(f"{type(receiver).__name__}.{name}", str(where))
        try:
            return fn(*args, **kwargs)
        except TypeError as err:
            refuse_hashed_symbol(err, where, f".{name}() of a {type(receiver).__name__} "
                                             f"given a tensor")
    return checked


def one_output(value):
    return isinstance(value, mx.sym.Symbol) and len(value.list_outputs()) == 1
