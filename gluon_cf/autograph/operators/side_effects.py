"""Side effects of converted code at run time: the graph regions (a tensor if's branch or a
tensor loop's step being traced, which run once into one graph) and the checks converted code
runs before changing Python state, which are errors inside a region.

NOTE [autograph side effects]
    Python state changed inside a tensor ``if`` or loop would change once, while tracing,
    whatever the condition or the number of steps. Besides the static checks of a branch or
    loop body itself (attribute and item assignment, ``global``/``nonlocal``,
    :func:`~gluon_cf.autograph.operators.outer_lists.no_outer_lists`), every converted
    function (helpers and methods reached from the converted one included) runs
    :func:`effect` before assigning an attribute or item of an object that may come from
    outside the call (a parameter, a global, a free variable, or a local not bound to a new
    object), a ``global`` or ``nonlocal`` variable, and :func:`mutable` around the receiver of
    a mutating method (``append``, ``add``, ``update`` ...; of a local every binding of which
    is a new object, ``parts = []`` ... ``parts.append(r)`` in a loop's step, a Python
    container's runs as it is: ``py_builtins.own_method``; a container converted code made
    by an assignment, ``parts = [row]``, while the innermost region was traced is that
    region's own (:func:`made`), so a helper given it may change it there (``lst.append(v)``,
    ``lst[0] = v``, ``d[k] = v``: ``item_assigned`` checks the container when it runs): the
    region's
    trace is one step's run, and nothing outside the step holds it unless an assignment or
    a container's change already refused put it there; one made outside that region, an
    enclosing step's list changed under a tensor if in it included, stays refused), and
    library code it
    calls in a graph region is checked not to change a container given to it (:func:`lent`:
    it is not converted, so only its effect can be seen; a container the step itself made is
    refused too, which the check cannot tell apart: a refusal, never a value that differs).
    While a
    tensor ``if``'s branch or
    a tensor loop's step is traced (:func:`graph_region`) these are AutographErrors naming the
    statement's line and the ``if``'s or loop's line, except a closure's ``nonlocal`` write of
    a variable that region carries out (NOTE [autograph closures]). Run as Python (eagerly, or
    on a Python condition) they run as Python does, once per step.
"""
import collections.abc
import contextlib
import functools
import sys
import threading
import warnings
from typing import Set

import mxnet as mx

from ..errors import AutographError, AutographWarning, refuse_hashed_symbol, region_at
from .call_results import callbacks_converted


_state = threading.local()


@contextlib.contextmanager
def graph_region(where, kind, owned=()):
    """While tracing a tensor if's branch or a tensor loop's step (which run once, into one
    graph): Python side effects of converted code in it are errors (:func:`effect`).
    ``owned``: the variables the region carries out (a closure's ``nonlocal`` write of one
    is part of its value)."""
    stack = _state.__dict__.setdefault("regions", [])
    outermost = all(w != where for w, _, _ in stack)
    stack.append((where, kind, frozenset(owned)))
    _state.__dict__.setdefault("made", []).append([])
    try:
        yield
    except RecursionError:
        if not outermost:
            raise
        # the same if or loop reached again while its branches were traced, until Python's
        # stack ran out: a function calling itself under a tensor condition (traced, both
        # branches run, so the recursion never reaches its base case)
        raise AutographError(
            f"{where}: this {kind} on a tensor was reached again and again while its "
            f"branches were traced, until Python's recursion limit: a function calls itself "
            f"under a tensor condition, and a graph traces every branch, so the recursion "
            f"never ends. Write the recursion with @gluon_cf.recursive, or bound it by a "
            f"Python value (a depth argument)") from None
    finally:
        stack.pop()
        _state.made.pop()


def made(value):
    """A new container converted code binds (``parts = [row]``): inside a graph region, the
    region's own, which converted code may change there (a helper's ``lst.append(v)`` given
    it: NOTE [autograph side effects]); held until the region ends (no id reused)."""
    regions = getattr(_state, "made", None)
    if regions:
        regions[-1].append(value)
    return value


def made_here(value):
    """Whether ``value`` was made by converted code in the innermost graph region."""
    regions = getattr(_state, "made", None) or [[]]
    return any(v is value for v in regions[-1])


def effect(where, what, name=None, instead=None):
    """Before a statement of converted code that changes Python state
    (NOTE [autograph side effects]): an error inside a graph region (a tensor if or loop
    being traced), saying what to write ``instead`` (by default: return the new value)."""
    stack = getattr(_state, "regions", None)
    if not stack:
        return
    region, kind, owned = stack[-1]
    if name is not None and name in owned:
        return
    raise AutographError(
        f"{where}: this statement {what}, inside the {kind} on a tensor at "
        f"{region_at(region)}; that {kind} runs as one graph, traced once, so the change would "
        f"happen once whatever the condition or the number of steps. " + (
            instead or "Return the new value instead (assign it to a variable of the if, or "
                       "carry it through the loop)"))


def mutable(receiver, where, method):
    """The receiver of a mutating method call (``items.append(x)``) in converted code whose
    object may come from outside: a Python container changed inside a graph region is an
    error (:func:`effect`)."""
    kind = _container_kind(receiver)
    if kind is not None and not made_here(receiver):
        effect(where, f"changes a Python {kind} (.{method})")
    return receiver


def _container_kind(value):
    """The name of the Python container ``value`` is, else None: a list a tensor loop
    collected (gluon_cf's stand-in, whose pop, insert, clear and reverse change it in place:
    NOTE [a collected list's type]) is a list."""
    kind = type(value)
    if kind.__module__.startswith("gluon_cf.") and getattr(kind, "python_type", None) is list:
        return "list"
    if isinstance(value, (list, dict, set, bytearray, collections.abc.MutableSequence,
                          collections.abc.MutableMapping, collections.abc.MutableSet)):
        return kind.__name__
    return None


def container_method(fn, where, mutators, convert=None, call_as=None):
    """``fn`` checked as :func:`mutable` checks ``items.append(x)`` when it is a mutating
    method (one of ``mutators``) of a Python container called through another name
    (``push = outs.append`` ... ``push(h)``), else None. ``convert``: what a ``sort``'s
    ``key=`` is converted by (``key=len`` measures a tensor's rows, as ``len(x)`` does);
    ``call_as(fn, where)``: ``fn`` as it is called (``py_builtins.container_call``: a
    tensor's rows where it iterates one, a tensor it hashes refused)."""
    receiver = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", None)
    if name not in mutators or isinstance(receiver, type) or \
            _container_kind(receiver) is None:
        return None

    call = fn if call_as is None else call_as(fn, where)

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        mutable(receiver, str(where), name)
        if name == "sort" and convert is not None and kwargs.get("key") is not None:
            kwargs = dict(kwargs, key=convert(kwargs["key"], where))
        try:
            return call(*args, **kwargs)
        except mx.base.NotImplementedForSymbol:
            # (parts.sort(), parts.remove(a): Python compares the items, tensors while
            # hybridizing, whose truth exists only when the graph runs)
            raise AutographError(
                f"{where}: .{name}() of a {type(receiver).__name__} of tensors while "
                f"hybridizing: it compares them (or their keys), and a comparison of "
                f"tensors is known only when the graph runs. Compare with F ops (F.topk, "
                f"F.argsort, F.where), or by Python values (key=lambda a: a.shape[0])") \
                from None
    return checked


_CONTAINERS = (list, dict, set, bytearray, collections.abc.MutableSequence,
               collections.abc.MutableMapping, collections.abc.MutableSet)


def _contents(value):
    """What a Python container holds, by identity and order (None: no container, or a list
    a tensor loop collected, whose items the graph gives)."""
    if not isinstance(value, _CONTAINERS) or \
            getattr(type(value), "builtin_of_rows", None) is not None:
        return None
    if isinstance(value, collections.abc.Mapping):
        return [(key, id(item)) for key, item in value.items()]
    return [id(item) for item in value]


_AS_THEY_ARE = {"mxnet", "gluon_cf", "builtins", "sys", "inspect", "warnings", "_warnings"}


def lent(fn, where, symbol_call=None, convert=None):
    """``fn``, library code called by converted code, checked inside a graph region not to
    change a Python container among its arguments (``heapq.heappush(heap, h)``,
    ``operator.setitem(d, k, v)``, ``random.shuffle(items)``): traced once, the change would
    happen once whatever the condition or the number of steps -- an error (:func:`effect`).
    What it does not change runs as it is. ``symbol_call(name, where)``: the context a call
    with a Symbol argument runs in (``py_builtins.library_call``: NOTE [a tensor iterated by
    library code]); ``convert``: what the user's functions it is given are converted by
    (``call_results.callbacks_converted``). Gluon blocks and MXNet's and gluon_cf's own code
    run as they are (they take Symbols as Symbols), and so do the builtins, ``sys``,
    ``inspect`` and ``warnings`` (``locals()``, ``sys._getframe()``, ``warnings.warn``'s
    stacklevel read their caller's frame: a wrapper's would be read)."""
    owner = getattr(fn, "__self__", None)   # (a C class's method: chain.from_iterable's None)
    module = getattr(fn, "__module__", None) or isinstance(owner, type) and \
        owner.__module__ or getattr(type(fn), "__module__", None) or ""
    if owner is dict and getattr(fn, "__name__", None) == "fromkeys":
        return functools.partial(_fromkeys, fn, where)
    if isinstance(fn, mx.gluon.Block) or module.split(".")[0] in _AS_THEY_ARE:
        return fn

    # (no functools.wraps: called at once, never kept; copying its attributes per call cost
    # microseconds per library call eagerly)
    def checked(*args, **kwargs):
        args, kwargs = callbacks_converted(args, kwargs, convert, where, fn)
        try:
            if symbol_call is not None and _gives_symbol(fn, args, kwargs):
                with symbol_call(_name(fn), where):
                    result = _unchanged(fn, args, kwargs, where)
                if isinstance(result, collections.abc.Iterator):
                    return _IteratedInCall(result,
                                           functools.partial(symbol_call, _name(fn), where))
                return result
            return _unchanged(fn, args, kwargs, where)
        except TypeError as err:
            # (collections.Counter(items) of a collected list: Python's TypeError, no line)
            refuse_hashed_symbol(err, where, f"{_name(fn)} given tensors")
    return checked


def _fromkeys(fn, where, *args):
    """``dict.fromkeys(keys, ...)`` of converted code: a Symbol's hash refused at the line."""
    try:
        return fn(*args)
    except TypeError as err:
        refuse_hashed_symbol(err, where, "dict.fromkeys() given tensors")


def _name(fn):
    """What a refusal calls library code ``fn``: its repr only when it has no name (made when
    refused: a ``functools.partial``'s repr holding an NDArray reads the array, every call)."""
    return getattr(fn, "__qualname__", None) or repr(fn)


def _gives_symbol(fn, args, kwargs):
    """Whether a library call is given a Symbol: an argument, an item of a list, tuple or
    dict argument (``itertools.chain.from_iterable([x, y])``) or what a
    ``functools.partial`` holds (``functools.partial(list, x)()``) -- NOTE [a tensor iterated
    by library code]."""
    given = [*args, *kwargs.values()]
    while isinstance(fn, functools.partial):
        given += [*fn.args, *fn.keywords.values()]
        fn = fn.func
    return any(isinstance(a, mx.sym.Symbol) or isinstance(a, (list, tuple, dict)) and any(
        isinstance(b, mx.sym.Symbol) for b in (a.values() if isinstance(a, dict) else a))
        for a in given)


class _IteratedInCall:
    """The iterator a library call given a Symbol returns (``heapq.merge(x)``, a library's
    generator, ``itertools.chain.from_iterable``), each step run as the call was: it iterates
    what it was given lazily, after the call returned (NOTE [a tensor iterated by library
    code])."""
    __slots__ = ("_iterator", "_context")

    def __init__(self, iterator, context):
        self._iterator, self._context = iterator, context

    def __iter__(self):
        return self

    def __next__(self):
        with self._context():
            return next(self._iterator)

    def __getattr__(self, name):        # (a generator's send, throw, close ...)
        return getattr(self._iterator, name)


def _unchanged(fn, args, kwargs, where):
    """``fn(*args, **kwargs)``, an error inside a graph region if it changed a Python
    container among its arguments (:func:`lent`)."""
    if not in_graph_region():
        return fn(*args, **kwargs)
    given = [a for a in (*args, *kwargs.values()) if isinstance(a, _CONTAINERS)]
    before = [_contents(a) for a in given]
    result = fn(*args, **kwargs)
    for value, contents in zip(given, before):
        if contents is not None and _contents(value) != contents:
            effect(where, f"changes a Python {type(value).__name__} it gives to {_name(fn)}, "
                          f"library code")
    return result


def consumed(value, where, name):
    """The argument ``name`` of ``next(name)`` or ``sum(name)`` (a builtin that reads what it
    is given) in converted code, where no loop around the call makes ``name``: a Python
    iterator (a generator, ``iter(...)``) is consumed by reading it, and inside a graph region,
    traced once, it would be consumed once, not once per step or only where the condition
    holds (silently other values: issue 24) -- an error (:func:`effect`). A list is not."""
    if isinstance(value, collections.abc.Iterator):
        effect(where, f"consumes the Python iterator {name!r} "
                      f"({type(value).__name__}, made outside the if or loop around it)",
               instead=f"Loop over what {name!r} iterates instead of calling next() on it "
                       f"(for r in x:, a graph's loop over the rows of a tensor, whose break "
                       f"under a tensor if is converted; its end stands for next()'s "
                       f"StopIteration or default), or call next() outside the tensor if or "
                       f"loop")
    return value


def changing(fn, where):
    """``setattr``/``delattr`` at a call of converted code on an object that may come from
    outside: an error inside a graph region (:func:`effect`)."""
    import builtins
    if fn is builtins.setattr or fn is builtins.delattr:
        @functools.wraps(fn)
        def checked(obj, name, *rest):
            effect(where, f"{'assigns' if fn is builtins.setattr else 'deletes'} the attribute "
                          f"{name!r} of {type(obj).__name__} (by {fn.__name__})")
            return fn(obj, name, *rest)
        return checked
    return fn


_WARNED: Set[str] = set()     # the print, logging and write calls that warned


def in_graph_region():
    """Whether a tensor if's branch or a tensor loop's step is being traced."""
    return bool(getattr(_state, "regions", None))


def _warn_output(where, what, verb):
    """Output (``print``, logging, a stream's ``write``) inside a graph region runs once,
    while tracing, and shows Symbols: it warns once per line (NOTE [autograph calls])."""
    stack = getattr(_state, "regions", None)
    if stack and where not in _WARNED:
        _WARNED.add(where)
        region, kind, _ = stack[-1]
        warnings.warn(
            f"{where}: this {what} is inside the {kind} on a tensor at {region_at(region)}, "
            f"which runs as one graph, traced once: it {verb}s once, while tracing, and "
            f"{verb}s Symbols, not values at each step. {verb.capitalize()} eagerly (before "
            f"hybridize()) to see values", AutographWarning, stacklevel=3)


def printing(fn, where):
    """``print`` (the builtin, at a call of converted code): inside a graph region it runs
    once, while tracing, and prints Symbols; it warns once per line (NOTE [autograph calls])."""
    import builtins
    if fn is not builtins.print:
        return fn

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        _warn_output(where, "print", "print")
        return fn(*args, **kwargs)
    return checked


_LOGGING_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical",
                    "fatal", "log"}


def output(fn, where):
    """``fn`` wrapped to warn inside a graph region (:func:`_warn_output`) when it is a
    logging call (``logging.info``, a ``Logger``'s or ``LoggerAdapter``'s ``info`` ...) or a
    stream's ``write``/``writelines`` (``sys.stdout.write``, an open file's); None for
    anything else."""
    import io
    import logging
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", None)
    if name in _LOGGING_METHODS and (
            isinstance(owner, (logging.Logger, logging.LoggerAdapter)) or
            getattr(fn, "__module__", None) == "logging" and fn is getattr(logging, name, None)):
        what, verb = "logging call", "log"
    elif name in ("write", "writelines") and (
            isinstance(owner, io.IOBase) or owner is not None and
            any(owner is stream for stream in (sys.stdout, sys.stderr,
                                               sys.__stdout__, sys.__stderr__))):
        what, verb = f"{name} to a stream", "write"
    else:
        return None
    where = str(where)

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        _warn_output(where, what, verb)
        if verb == "log":        # the record names the user's line, not this function's
            kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
        return fn(*args, **kwargs)
    return checked
