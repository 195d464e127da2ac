"""``@gluon_cf.autograph``: plain Python ``if`` on tensors inside ``hybrid_forward`` (NOTE below).

NOTE [autograph]
    The decorator reads the function's source once, when it decorates, and rewrites every
    ``if`` statement into a call of :func:`if_stmt` with its two branches as local functions:

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
    :func:`if_stmt` decides: a Python predicate runs plain Python; an NDArray predicate (eager)
    runs the branch it selects, as ``cond`` does eagerly; a Symbol predicate (hybridizing)
    becomes ``gluon_cf.cond``, both branches traced, whose outputs are the live variables that
    are arrays. A live variable assigned in only one branch, an array in one branch and a
    Python value in the other, or Python values that differ between the branches is an
    :class:`AutographError` naming the variable and the ``if``'s line.

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
    keep Python's semantics (the rewritten code runs as Python on them). The sections below
    say what converts; everything on a tensor that a graph traced once cannot express is
    refused, and the refusals are listed where they arise.

    Closures: nested functions, lambdas, classes (their methods) and generator expressions
    read their enclosing function's variables when they run, not when written; default
    arguments are read when the ``def`` runs (where it is written, as Python). A variable
    some closure reads (a *cell*, :class:`_Scope`) stays the function's own in the branch and
    loop functions the rewrite makes: they declare it ``nonlocal`` and start by setting it
    from their parameter (``v = __agv_v``), so a closure called in a branch or step sees that
    branch's or step's value, the other branch of a traced ``cond`` starts again from the
    value before the ``if``, and the value after the ``if`` or loop is the merged one. A cell
    counts as read after every ``if`` and loop (a closure may be called anywhere later), so
    it is an output of every tensor ``if`` and carried by every tensor loop that assigns it;
    where that cannot be (assigned in one branch only, a Python value a tensor loop changes,
    no value before a tensor loop) the AutographError names the variable, the closure that
    reads it and both lines. A named nested function that assigns a variable ``nonlocal``
    assigns it wherever it is called: an ``if`` or loop whose code names it assigns that
    variable too (carried out, as if assigned there). Comprehensions run where they are
    written; their variables are their own (not assigned or read by the code around them).

    Side effects: Python state changed inside a tensor ``if`` or loop would change once,
    while tracing, whatever the condition or the number of steps. Besides the static checks
    of a branch or loop body itself (attribute and item assignment, ``global``/``nonlocal``,
    :func:`no_outer_lists`), every converted function (helpers and methods reached from the
    converted one included) runs :func:`effect` before assigning an attribute or item of an
    object that may come from outside the call (a parameter, a global, a free variable, or
    a local not bound to a new object), a ``global`` or ``nonlocal`` variable, and
    :func:`mutable` around the receiver of a mutating method (``append``, ``add``, ``update``
    ...). While a tensor ``if``'s branch or a tensor loop's step is traced
    (:func:`_graph_region`) these are AutographErrors naming the statement's line and the
    ``if``'s or loop's line, except a closure's ``nonlocal`` write of a variable that region
    carries out (above). Run as Python (eagerly, or on a Python condition) they run as
    Python does, once per step.

    Iteration over tensors: MXNet's ``Symbol.__iter__`` yields the whole symbol once, so
    everything that iterates a Symbol as Python would is refused at its line: comprehensions
    and generator expressions (:func:`iterated`), ``*x`` in a call, and the builtins
    ``enumerate``, ``zip``, ``range``, ``sum``, ``len``, ``list`` ... called with a Symbol
    (:func:`builtin`). A ``for`` statement over a tensor converts (``foreach``).

    Named functions: a call ``helper(x)`` or ``self.method(x)`` becomes
    ``__ag__.converted(helper, module)(x)``: a plain function or method defined in the same
    module as the converted function is converted too, once (cached on it); anything else
    (Gluon blocks, MXNet, library code, builtins, nested functions, which were converted with
    their enclosing one) runs as it is.

    Jumps (before the rewrite above, as TF AutoGraph does): in a loop, ``break``,
    ``continue`` and ``return`` become assignments of flag variables (``__agf_break_N`` ...);
    the statements after one run under ``if not flag``; a ``while`` tests ``not flag and
    test`` (:func:`running_and`), a ``for`` runs its later steps as no-ops (a Python
    iterable stops); a ``return`` inside loops becomes ``if flag: return value`` after the
    outermost one, so what ``value`` reads must be a loop variable. Then the statements after
    an ``if`` that may return move into the branches that do not, so such an ``if`` returns
    on every path and becomes :func:`if_return`: ``return cond(...)`` on a tensor. Flags
    are Python bools until a tensor ``if`` or loop carries them, where they become
    one-element arrays. A ``while`` whose test becomes a tensor through a ``break`` under a
    tensor ``if`` runs its first steps as Python and the rest as a graph loop; a ``while
    True`` carries its flags as arrays from the start while tracing (one graph loop). A loop
    with an ``else`` clause or a ``for`` that unpacks its items keeps its jumps as Python.

    Loops the same way: ``while test: body`` becomes :func:`while_stmt` with the test and the
    body as functions of the loop variables: what the body assigns and the test reads, a
    step reads before assigning, or the code after the loop reads (the body's other names
    are one step's temporaries). On a Symbol condition it is ``gluon_cf.while_loop`` over
    those that are arrays, bounded by a ``max_iterations(N)`` first in the body, else the
    decorator's ``max_iterations``, else exact length. The bound holds eagerly too: a loop's
    own ``max_iterations(N)`` whatever its condition (a ``while True`` ended by a tensor
    ``break`` is Python eagerly), the decorator's for a tensor condition. Stopping at the
    bound while the condition holds warns (``TruncationWarning``). ``for name in iterable``
    becomes :func:`for_stmt`: ``gluon_cf.foreach`` over a Symbol's rows, plain Python
    otherwise. A Python value a tensor loop changes, or a loop
    variable without a value before the loop, is an AutographError.

    Lists: a statement ``items.append(value)`` of a loop's body itself (so once per step;
    not under an ``if``, not after a possible ``break``), where the body neither assigns nor
    otherwise reads ``items``, makes ``value`` a step output. Run as Python, it is appended
    to the list after each step; as a graph loop (an exact-length ``while_loop`` when
    bounded, whose rows are the steps that ran), the rows become a :class:`StepList` bound
    to ``items``: one array (after the list's earlier items) whose number of rows is known
    only when the graph runs. ``F.stack(*items)``, ``F.concat(*items, dim=...)`` and
    ``F.add_n(*items)`` (rewritten into :func:`unpacked`), ``items[i]`` and
    ``items.append(x)`` compute from it; ``len`` and iteration are AutographErrors;
    ``items[i]`` past what bounded loops can have appended is an IndexError at its line. In
    a ``for`` over a Python iterable with a ``break`` under a tensor ``if`` (a decoder over
    ``range(n)``), a step after the flag became a tensor runs with its flags cleared, its
    results count where no flag is set (a cond picks them or the values before the step)
    and its append is one row or none (:func:`_where`, :func:`_appended_where`; a list of
    arrays such as an RNN cell's ``state`` is chosen item by item, while a graph loop or
    cond that changes one is an AutographError saying to unpack it); a ``for``
    over a tensor that appends and may break is an AutographError (write a ``while``). Any
    other change of an outside list, dict or set by a method call (``append`` under an
    ``if``, ``seen.add(x)``) in an ``if`` or loop on a tensor is an AutographError
    (:func:`no_outer_lists`): traced once, it would happen once, whatever the condition.

    Expressions: ``a if test else b`` becomes :func:`if_exp` (``cond`` on a Symbol test),
    ``and``/``or``/``not`` become :func:`and_`/:func:`or_`/:func:`not_`, which keep Python's
    short-circuit semantics on Python values and are the elementwise logical operations on
    tensors (0 or 1; every operand evaluated, as a graph must).
"""
import ast
import collections.abc
import contextlib
import copy
import functools
import inspect
import itertools
import linecache
import operator
import os
import re
import textwrap
import threading
import types
from typing import Callable, Optional

import mxnet as mx

from .ops.cond import cond
from .ops.while_loop import warn_truncation, while_loop

__all__ = ["autograph", "to_code", "max_iterations", "AutographError", "Undefined"]


class AutographError(ValueError):
    """What ``@gluon_cf.autograph`` cannot convert or run; the message begins with the file,
    line and source line of the construct, and says what to do."""

    def __init__(self, message):
        super().__init__(_one_colon(message))


def _one_colon(message):
    """``file:12: while True:`` then ``: what`` would read ``while True:: what``."""
    return re.sub(r"^(.*?:\d+: .*?):: ", r"\1: ", message, count=1)


class Undefined:
    """The value of a variable an ``if`` did not assign on the branch it took: any use of it
    raises an AutographError naming the variable."""

    def __init__(self, name, where):
        self._name, self._where = name, where

    def _fail(self, *args, **kwargs):
        raise AutographError(f"{self._where}: variable {self._name!r} is used here without a "
                             f"value (the branch taken, or the steps run so far, did not assign "
                             f"it); assign it before this statement or on every path")

    __getattr__ = __call__ = __add__ = __radd__ = __mul__ = __rmul__ = __sub__ = _fail
    __rsub__ = __truediv__ = __getitem__ = __bool__ = __iter__ = __neg__ = _fail

    def __repr__(self):
        return f"<undefined {self._name}>"


# ---------------------------------------------------------------------------- graph regions

_state = threading.local()


@contextlib.contextmanager
def _graph_region(where, kind, owned=()):
    """While tracing a tensor if's branch or a tensor loop's step (which run once, into one
    graph): Python side effects of converted code in it are errors (:func:`effect`).
    ``owned``: the variables the region carries out (a closure's ``nonlocal`` write of one
    is part of its value)."""
    stack = _state.__dict__.setdefault("regions", [])
    stack.append((where, kind, frozenset(owned)))
    try:
        yield
    finally:
        stack.pop()


def _region_at(where):
    """``file:12 (while x < 3:)`` from a location ``file:12: while x < 3:``."""
    match = re.match(r"(.*?:\d+): (.*)", where)
    return f"{match.group(1)} ({match.group(2)})" if match else where


def effect(where, what, name=None):
    """Before a statement of converted code that changes Python state (NOTE [autograph],
    side effects): an error inside a graph region (a tensor if or loop being traced)."""
    stack = getattr(_state, "regions", None)
    if not stack:
        return
    region, kind, owned = stack[-1]
    if name is not None and name in owned:
        return
    raise AutographError(
        f"{where}: this statement {what}, inside the {kind} on a tensor at "
        f"{_region_at(region)}; that {kind} runs as one graph, traced once, so the change would "
        f"happen once whatever the condition or the number of steps. Return the new value "
        f"instead (assign it to a variable of the if, or carry it through the loop)")


def mutable(receiver, where, method):
    """The receiver of a mutating method call (``items.append(x)``) in converted code whose
    object may come from outside: a Python container changed inside a graph region is an
    error (:func:`effect`)."""
    if isinstance(receiver, (list, dict, set, bytearray, collections.abc.MutableSequence,
                             collections.abc.MutableMapping, collections.abc.MutableSet)):
        effect(where, f"changes a Python {type(receiver).__name__} (.{method})")
    return receiver


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


def iterated(value, where, what):
    """The iterable of a comprehension, generator expression or unpacking (``*x``): a Symbol
    of one output is an error (MXNet's Symbol.__iter__ yields the whole symbol, not its rows;
    a Symbol of several outputs, ``F.split``'s, yields them as the eager list does)."""
    if _one_output(value):
        raise AutographError(
            f"{where}: this {what} iterates over a tensor; while hybridizing a Symbol has no "
            f"rows to iterate (MXNet would yield the whole array once), so write a for "
            f"statement over it (a graph loop, appending the rows to a list), or index it")
    return value


# Builtins that iterate over (or measure) their arguments: on a Symbol they would see one item.
_ITERATING = {"enumerate", "zip", "reversed", "iter", "list", "tuple", "sorted", "map",
              "filter", "sum", "min", "max", "any", "all", "set", "frozenset", "dict", "len",
              "range", "next"}


def builtin(fn, where):
    """``fn`` (a name in _ITERATING at a call of converted code): when it is the builtin, a
    call with a Symbol argument is an error naming the call."""
    import builtins
    name = getattr(fn, "__name__", None)
    if name not in _ITERATING or getattr(builtins, name, None) is not fn:
        return fn

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        if any(_one_output(a) for a in args):
            raise AutographError(
                f"{where}: {name}() of a tensor: while hybridizing a Symbol has no rows to "
                f"{'count' if name == 'len' else 'iterate'} (MXNet would see the whole array "
                f"as one item), so it cannot run as Python. Loop with a for statement over "
                f"the tensor itself (a graph loop) and keep a counter as an array "
                f"(i = F.zeros((1,)) ... i = i + 1), or use F ops (F.shape_array, F.sum)")
        return fn(*args, **kwargs)
    return checked


def _one_output(value):
    return isinstance(value, mx.sym.Symbol) and len(value.list_outputs()) == 1


def _is_tensor(value):
    return isinstance(value, (mx.nd.NDArray, mx.sym.Symbol))


def ld(read, name, where):
    """The current value of a variable, or :class:`Undefined` where it has none yet."""
    try:
        return read()
    except NameError:        # unbound local or free variable
        return Undefined(name, where)


def if_stmt(pred, then_fn, else_fn, values, names, live, where):
    """Run a converted ``if`` (NOTE [autograph]): returns the branch variables' new values."""
    if isinstance(pred, mx.sym.Symbol):
        return _symbolic_if(pred, then_fn, else_fn, values, names, live, where)
    if isinstance(pred, mx.nd.NDArray):
        if pred.size != 1:
            raise AutographError(f"{where}: the if's condition is an array of shape "
                                 f"{pred.shape}; a tensor condition must have one element")
        pred = bool(pred.asscalar())
    return then_fn(*values) if pred else else_fn(*values)


def _symbolic_if(pred, then_fn, else_fn, values, names, live, where):
    results = {}

    def branch(fn, key):
        def run():
            with _graph_region(where, "if", names):
                out = _flags_as_arrays(tuple(fn(*values)), names)
            results[key] = out
            arrays = []
            for k, (name, value) in enumerate(zip(names, out)):
                if not live[k]:
                    continue
                if key == "else":
                    _check_same_kind(name, results["then"][k], value, where)
                if isinstance(value, mx.sym.Symbol):
                    arrays.append(value)
                elif isinstance(value, Undefined) or _is_tensor(value):
                    raise AutographError(
                        f"{where}: variable {name!r} is read after this if"
                        f"{_read_by(where, name)} but the {key} branch "
                        f"does not assign it; with a tensor condition both branches run as one "
                        f"graph, so assign it before the if or in both branches")
            # a cond needs an output: with no array to return, a placeholder nothing reads
            return arrays or [mx.sym.zeros((1,))]
        return run

    arrays = cond(pred, branch(then_fn, "then"), branch(else_fn, "else"),
                  name=_node_name(where, "if"))
    arrays = list(arrays) if isinstance(arrays, (list, tuple)) else [arrays]
    merged = []
    for k, value in enumerate(results["then"]):
        if live[k] and isinstance(value, mx.sym.Symbol):
            merged.append(arrays.pop(0))
        else:
            merged.append(value)
    return tuple(merged)


def _no_structure(name, a, b, where, what):
    """A list or tuple holding arrays, carried by a graph's loop or out of a cond: an error
    saying to unpack it (comparing it as a Python value would ask a Symbol for its truth)."""
    if a is b:
        return
    for value in (a, b):
        if isinstance(value, (list, tuple)) and _holds_symbols(value):
            raise AutographError(
                f"{where}: variable {name!r}{_read_by(where, name)} is a "
                f"{type(value).__name__} of arrays that {what} changes; a graph carries "
                f"arrays, not lists of them, so unpack it into variables (h, c = state) and "
                f"pack it again where it is used ([h, c])")


def _check_same_kind(name, then_value, else_value, where):
    _no_structure(name, then_value, else_value, where, "this if on a tensor")
    then_array, else_array = isinstance(then_value, mx.sym.Symbol), \
        isinstance(else_value, mx.sym.Symbol)
    if then_array != else_array:
        if isinstance(then_value, Undefined) or isinstance(else_value, Undefined):
            side = "else" if isinstance(else_value, Undefined) else "then"
            raise AutographError(
                f"{where}: variable {name!r} is read after this if{_read_by(where, name)} but "
                f"the {side} branch does not assign it; with a tensor condition both branches run as one graph, so "
                f"assign it before the if or in both branches")
        raise AutographError(
            f"{where}: variable {name!r}{_read_by(where, name)} is an array in one branch of "
            f"this if and the Python "
            f"value {then_value if not then_array else else_value!r} in the other; with a "
            f"tensor condition both must be arrays (use F.full / F.zeros_like for constants)")
    if not then_array and not isinstance(then_value, Undefined) and then_value != else_value:
        raise AutographError(
            f"{where}: variable {name!r}{_read_by(where, name)} is the Python value "
            f"{then_value!r} in one branch of "
            f"this if and {else_value!r} in the other; with a tensor condition it must be an "
            f"array in both (F.full) or the same value")


def python_if(pred, where, why):
    """The condition of an ``if`` left as Python (its branches do what a graph cannot)."""
    if isinstance(pred, mx.sym.Symbol):
        raise AutographError(f"{where}: this if has a tensor condition, but its branches {why}, "
                             f"which gluon_cf.cond cannot express; compute the result in both "
                             f"branches and assign it to a variable instead")
    if isinstance(pred, mx.nd.NDArray):
        return bool(pred.asscalar())
    return pred


def if_exp(test, then_value, else_value, where):
    """A converted conditional expression ``a if test else b`` (each side a function)."""
    if isinstance(test, mx.sym.Symbol):
        def side(fn, which):
            def run():
                with _graph_region(where, "conditional expression"):
                    value = fn()
                if not isinstance(value, mx.sym.Symbol):
                    raise AutographError(f"{where}: the {which} side of this conditional "
                                         f"expression is the Python value {value!r}; with a "
                                         f"tensor condition both sides must be arrays")
                return value
            return run
        return cond(test, side(then_value, "if"), side(else_value, "else"),
                    name=_node_name(where, "ifexp"))
    return then_value() if _truth(test, where, "conditional expression") else else_value()


def and_(values, where):
    """A converted ``a and b and ...`` (each operand a function, evaluated left to right): on
    tensors, the elementwise logical and of all operands (each evaluated); else Python's."""
    return _bool_op(values, where, stop_on=False, op="broadcast_logical_and")


def or_(values, where):
    """A converted ``a or b or ...``: on tensors the elementwise logical or; else Python's."""
    return _bool_op(values, where, stop_on=True, op="broadcast_logical_or")


def _bool_op(values, where, stop_on, op):
    """Python's short circuit (stop at the first operand whose truth is ``stop_on``) while the
    first operand is a Python value; else ``op`` over every operand."""
    result = values[0]()
    tensor = _is_tensor(result)
    for value in values[1:]:
        if not tensor and bool(result) == stop_on:
            return result
        result = _logical(op, result, value(), where) if tensor else value()
    return result


def not_(value):
    """A converted ``not x``: on a tensor the elementwise logical not; else Python's."""
    if isinstance(value, mx.sym.Symbol):
        return mx.sym.logical_not(value)
    if isinstance(value, mx.nd.NDArray):
        return mx.nd.logical_not(value)
    return not value


def _logical(op, a, b, where):
    if isinstance(a, mx.sym.Symbol) or isinstance(b, mx.sym.Symbol):
        if not (_is_tensor(a) and _is_tensor(b)):
            raise AutographError(f"{where}: this and/or mixes a tensor with the Python value "
                                 f"{b if _is_tensor(a) else a!r}; make both tensors")
        return getattr(mx.sym, op)(a, b)
    if not isinstance(b, mx.nd.NDArray):
        b = mx.nd.array([b], ctx=a.context, dtype=a.dtype)
    return getattr(mx.nd, op)(a, b)


def augmented(target, value, op):
    """A converted ``target op= value``: out of place when ``target`` is a tensor (an NDArray's
    ``+=`` writes into the array, so every alias of it changes and autograd refuses it while
    recording; a Symbol's is ``target = target + value``), in place otherwise (lists)."""
    if _is_tensor(target):
        return getattr(operator, op)(target, value)
    return getattr(operator, "i" + op.rstrip("_"))(target, value)


def converted(fn, module):
    """``fn`` converted (once, cached on it) when it is a plain function or method defined in
    ``module`` (the converted function's own) with source to read; ``fn`` itself otherwise:
    builtins, MXNet, library code and Gluon blocks run as they are."""
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if not isinstance(target, types.FunctionType) or target.__module__ != module or \
            target.__code__.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE |
                                        inspect.CO_ASYNC_GENERATOR) or \
            hasattr(target, "__gluon_cf_autograph_code__") or "<" in target.__qualname__:
        return fn                   # a nested function was converted with its enclosing one
    done = target.__dict__.get("__gluon_cf_autograph_converted__")
    if done is None:
        try:
            function, code = _convert(target)
            done = functools.wraps(target)(function)
            setattr(done, "__gluon_cf_autograph_code__", code)
        except (AutographError, OSError, TypeError, SyntaxError):
            done = target           # no source to read: it runs as it is
        target.__dict__["__gluon_cf_autograph_converted__"] = done
    if isinstance(fn, types.MethodType):
        return types.MethodType(done, fn.__self__)
    return done


def max_iterations(bound: Optional[int]) -> Optional[int]:
    """As the first statement of a loop body converted by ``@autograph``: the loop runs at
    most ``bound`` steps when its condition is a tensor (an expression such as
    ``self.max_len`` is evaluated where the loop starts). Outside converted code it does
    nothing.

    >>> import gluon_cf
    >>> gluon_cf.max_iterations(8)
    8
    """
    return bound


def while_stmt(test, body, values, names, where, bound, lists=(), hinted=False,
               forever=False):
    """Run a converted ``while`` (NOTE [autograph]): returns its variables' final values,
    then the lists it appended to. ``hinted``: the bound is the loop's own
    ``max_iterations(N)``, which holds whatever its condition; the decorator's holds for a
    tensor condition only (eagerly too). ``forever``: the condition is a constant and the
    loop has break or return flags; while tracing they are arrays from the start."""
    lists, count = list(lists), len(values)
    if forever and any(isinstance(v, mx.sym.Symbol) for v in values):
        values = _flags_as_arrays(values, names)    # while True ended by a break: one graph
    first = test(*values)
    steps = 0
    while not isinstance(first, mx.sym.Symbol):
        if not _truth(first, where, "while"):
            return values + tuple(lists)
        if bound is not None and (hinted or _is_tensor(first)) and steps >= bound:
            warn_truncation(where, bound)
            return values + tuple(lists)
        result = tuple(body(*values))
        values = result[:count]
        _append(lists, result[count:], where)
        first = test(*values)
        steps += 1
    # A Symbol condition, from the start or after Python steps (a break under a tensor if in
    # a `while True`): the remaining steps are one graph loop.
    if bound is not None:
        bound -= steps
        if bound < 1:
            return values + tuple(lists)
    values = _flags_as_arrays(values, names)
    arrays = _loop_arrays(values, names, where, "while")
    slots = [k for k, value in enumerate(values) if isinstance(value, mx.sym.Symbol)]

    def full(vs):
        out = list(values)
        for k, v in zip(slots, vs):
            out[k] = v
        return out

    counted = bool(lists)     # the collected rows' number, to join them to other rows

    def step(*vs):
        with _graph_region(where, "while loop", names):
            result = tuple(body(*full(vs[:len(slots)])))
        new = _flags_as_arrays(result[:count], names)
        _check_loop_vars(values, new, names, where, "while")
        return _step_rows(result[count:], where), [new[k] for k in slots] + \
            ([vs[-1] + 1] if counted else [])
    def condition(*vs):
        with _graph_region(where, "while loop", names):
            return test(*full(vs[:len(slots)]))
    rows, final = while_loop(condition, step,
                             arrays + ([mx.sym.zeros((1,))] if counted else []),
                             max_iterations=bound, name=_node_name(where, "while"),
                             report_truncation=where, exact_length=counted)
    final = list(final) if isinstance(final, (list, tuple)) else [final]
    steps = final.pop() if counted else None
    return tuple(full(final)) + _extended(lists, rows, steps, where, most=bound)


def for_stmt(iterable, body, values, names, where, item=None, lists=(), stop=()):
    """Run a converted ``for`` (NOTE [autograph]): returns its variables' final values, the
    lists it appended to, and the last item when ``item`` holds the current value of a loop
    variable read after the loop. ``stop``: the names of its break and return flags."""
    keep_item, lists, count = item is not None, list(lists), len(values)
    stop = [names.index(name) for name in stop if name in names]
    if not isinstance(iterable, mx.sym.Symbol):
        last = item[0] if keep_item else None
        for last in iterable:
            going = running(*[values[k] for k in stop])
            if lists and isinstance(going, mx.sym.Symbol):
                # a tensor break ended it or not: the step runs as a graph, its results count
                # where `going` holds, and what it appends is one row or none
                cleared = tuple(False if k in stop else v for k, v in enumerate(values))
                result = tuple(body(last, *cleared))
                values = _where(going, _flags_as_arrays(result[:count], names),
                                _flags_as_arrays(values, names), names, where)
                lists = _appended_where(going, lists, result[count:], where)
                continue
            result = tuple(body(last, *values))
            values = result[:count]
            _append(lists, result[count:], where)
            if any(not _is_tensor(values[k]) and values[k] for k in stop):
                break        # a break or return (under a Python condition) ends the loop
        if keep_item and any(isinstance(values[k], mx.sym.Symbol) for k in stop):
            # the later steps ran as no-ops under a tensor flag, but the item moved on
            raise AutographError(
                f"{where}: this for loop may end under a tensor condition (a break or return "
                f"under a tensor if) and its item is read after it (or by the return); which "
                f"item it stopped at is known only when the graph runs, so assign what you "
                f"need to a variable that has a value before the loop, then break")
        return values + tuple(lists) + ((last,) if keep_item else ())
    if lists and stop:
        raise AutographError(f"{where}: this for loop over a tensor appends to a list and may "
                             f"end under a tensor condition (a break or return under a tensor "
                             f"if); a graph's for runs every row, so write it as a while loop "
                             f"over a counter (i = F.zeros((1,)); while i < n: ... i = i + 1), "
                             f"which stops where the break is")
    if keep_item:
        raise AutographError(f"{where}: this for loop is on a tensor and its item is read "
                             f"after the loop (or by a closure defined in the function); a "
                             f"graph's loop does not keep its last row, so "
                             f"assign what you need to a variable (given a value before the "
                             f"loop) inside it")
    from .ops.foreach import foreach
    values = _flags_as_arrays(values, names)
    arrays = _loop_arrays(values, names, where, "for")
    slots = [k for k, value in enumerate(values) if isinstance(value, mx.sym.Symbol)]

    counted = bool(lists)

    def step(row, states):
        current = list(values)
        for k, v in zip(slots, states):
            current[k] = v
        with _graph_region(where, "for loop", names):
            result = tuple(body(row, *current))
        new = _flags_as_arrays(result[:count], names)
        _check_loop_vars(values, new, names, where, "for")
        return _step_rows(result[count:], where), [new[k] for k in slots] + \
            ([states[-1] + 1] if counted else [])
    rows, final = foreach(step, iterable, arrays + ([mx.sym.zeros((1,))] if counted else []),
                          name=_node_name(where, "for"))
    final = list(final)
    steps = final.pop() if counted else None
    current = list(values)
    for k, v in zip(slots, final):
        current[k] = v
    return tuple(current) + _extended(lists, rows, steps, where)


# ---------------------------------------------------------------------------- collected lists

def _append(lists, values, where):
    for items, value in zip(lists, values):
        items.append(value)          # Undefined raises: the list was never assigned


def _where(going, new, old, names, where):
    """The values of a step that ran only where the array ``going`` holds: ``new`` there,
    ``old`` elsewhere (a cond choosing between them). Lists and tuples of arrays (an RNN
    cell's ``state``) are chosen item by item."""
    pairs = []

    def pair(name, n, o):
        if isinstance(n, mx.sym.Symbol) and isinstance(o, mx.sym.Symbol):
            pairs.append((n, o))
        elif isinstance(n, (list, tuple)) and isinstance(o, (list, tuple)) and \
                len(n) == len(o) and (_holds_symbols(n) or _holds_symbols(o)):
            for a, b in zip(n, o):
                pair(name, a, b)
        else:
            _check_loop_vars([o], [n], [name], where, "for")
    for name, n, o in zip(names, new, old):
        pair(name, n, o)
    if not pairs:
        return tuple(new)
    chosen = cond(going, lambda: [n for n, _ in pairs], lambda: [o for _, o in pairs],
                  name=_node_name(where, "step"))
    chosen = list(chosen) if isinstance(chosen, (list, tuple)) else [chosen]

    def rebuilt(n, o):
        if isinstance(n, mx.sym.Symbol) and isinstance(o, mx.sym.Symbol):
            return chosen.pop(0)
        if isinstance(n, (list, tuple)) and isinstance(o, (list, tuple)) and \
                len(n) == len(o) and (_holds_symbols(n) or _holds_symbols(o)):
            return type(n)(rebuilt(a, b) for a, b in zip(n, o))
        return n
    return tuple(rebuilt(n, o) for n, o in zip(new, old))


def _holds_symbols(value):
    """Whether a list or tuple holds a Symbol (at any depth)."""
    return any(isinstance(v, mx.sym.Symbol) or isinstance(v, (list, tuple)) and
               _holds_symbols(v) for v in value)


def _appended_where(going, lists, values, where):
    """The lists after appending each of ``values`` where the array ``going`` holds (one row
    or none: StepLists)."""
    out = []
    for items, value in zip(lists, _step_rows(values, where)):
        if isinstance(items, list):
            if not items or not all(isinstance(i, mx.sym.Symbol) for i in items):
                raise AutographError(f"{where}: this loop appends to a list under a tensor "
                                     f"condition (after a break under a tensor if), and the "
                                     f"list holds no array before it; start it with arrays")
            items = StepList(mx.sym.stack(*items, axis=0), len(items), where)
        if not isinstance(items, StepList):
            raise AutographError(f"{where}: this loop on a tensor appends to {items!r}, which "
                                 f"is not a list")
        out.append(items.joined(mx.sym.expand_dims(value, axis=0), going, 1))
    return out


def _step_rows(values, where):
    for value in values:
        if not isinstance(value, mx.sym.Symbol):
            raise AutographError(f"{where}: this loop on a tensor appends the Python value "
                                 f"{value!r} to a list at each step; the steps of a graph's "
                                 f"loop are collected as rows of an array, so append arrays")
    return list(values)


def _extended(lists, rows, steps, where, most=None):
    """The lists a graph loop appended to, as StepLists: a list's earlier items come first.
    ``most``: the loop's bound on its steps (None: unknown)."""
    if not lists:
        return ()
    rows = rows if isinstance(rows, (list, tuple)) else [rows]
    out = []
    for items, stacked in zip(lists, rows):
        if isinstance(items, StepList):
            out.append(items.joined(stacked, steps, most))
        elif isinstance(items, list):
            if not all(isinstance(i, mx.sym.Symbol) for i in items):
                raise AutographError(f"{where}: a list this loop on a tensor appends to "
                                     f"already holds Python values; start it empty")
            first = StepList(mx.sym.stack(*items, axis=0), len(items), where) if items else \
                None
            out.append(first.joined(stacked, steps, most) if first is not None else
                       StepList(stacked, steps, where, most))
        else:
            raise AutographError(f"{where}: this loop on a tensor appends to {items!r}, which "
                                 f"is not a list")
    return tuple(out)


class StepList:
    """A list a loop on a tensor appended to, while hybridizing: its items are the rows of
    one array (the loop's stacked step outputs), their number ``count`` (an int, or a
    one-element array) known only when the graph runs, and at most ``most`` (an int where
    the loops that appended are bounded, else None). ``F.stack(*items)``,
    ``F.concat(*items, dim=0 or 1)``, ``F.add_n(*items)``, ``items[i]`` and
    ``items.append(x)`` work as on the list; ``len`` and iteration cannot."""

    def __init__(self, rows, count, where, most=None):
        self.rows, self.count, self.where = rows, count, where
        self.most = count if isinstance(count, int) else most

    def joined(self, rows, count, most=None):
        """These items, then ``rows`` (``count`` of them). MXNet 1.x cannot compute on an
        array of zero rows (0 is its unknown size), so where either side may have none, a
        cond picks the other."""
        mine, theirs = self.rows, rows
        name = _node_name(self.where, "rows")

        def with_theirs():      # computed in the branch where these rows exist
            both = lambda: mx.sym.concat(mine, theirs, dim=0)   # noqa: E731
            if isinstance(count, mx.sym.Symbol):
                return cond(count > 0, both, lambda: mine, name=name)
            return both()
        if isinstance(self.count, mx.sym.Symbol):
            joined = cond(self.count > 0, with_theirs, lambda: theirs, name=name)
        else:
            joined = with_theirs()
        most = count if isinstance(count, int) else most
        return StepList(joined, self.count + count, self.where,
                        None if self.most is None or most is None else self.most + most)

    def append(self, value):
        joined = self.joined(mx.sym.expand_dims(value, axis=0), 1)
        self.rows, self.count, self.most = joined.rows, joined.count, joined.most

    def __getitem__(self, index):
        return self.item(index, self.where)

    def item(self, index, where):
        """``items[index]`` at ``where``: an IndexError there when the loops that appended
        are bounded and cannot have appended that many items."""
        if not isinstance(index, int) or isinstance(index, bool):
            self._unknown_length(f"indexed with {index!r}")
        if self.most is not None and not -self.most <= index < self.most:
            raise IndexError(_one_colon(
                f"{where}: list index {index} out of range: the list holds at most "
                f"{self.most} items (the loop at {_region_at(self.where)} appended them)"))
        row = mx.sym.slice_axis(self.rows, axis=0, begin=index,
                                end=None if index == -1 else index + 1,
                                name=_node_name(where, "item"))
        return mx.sym.squeeze(row, axis=0)

    def _unknown_length(self, what):
        raise AutographError(f"{self.where}: a list this loop on a tensor appended to is "
                             f"{what}, but how many items it holds is known only when the graph "
                             f"runs; use F.stack(*items), F.concat(*items, dim=...), "
                             f"F.add_n(*items) or items[i]")

    def __len__(self):
        self._unknown_length("measured with len()")

    def __iter__(self):
        self._unknown_length("iterated over")

    def __repr__(self):
        return f"<StepList of the rows of {self.rows.name}>"


def item(items, index, where):
    """A converted ``items[index]`` of a list a loop collected (NOTE [autograph], lists)."""
    if isinstance(items, StepList):
        return items.item(index, where)
    return items[index]


def unpacked(func, items, keywords, where):
    """A converted ``func(*items, **keywords)``: for a :class:`StepList`, the same value
    computed from its rows; otherwise the call itself."""
    if not isinstance(items, StepList):
        return func(*items, **keywords)
    name, rows = getattr(func, "__name__", ""), items.rows
    if name == "stack" and set(keywords) <= {"axis"} and keywords.get("axis", 0) in (0, 1):
        return rows if keywords.get("axis", 0) == 0 else mx.sym.swapaxes(rows, 0, 1)
    if name in ("concat", "Concat") and set(keywords) <= {"dim"} and \
            keywords.get("dim", 1) in (0, 1):
        if keywords.get("dim", 1) == 0:
            return mx.sym.reshape(rows, shape=(-3, -2))
        return mx.sym.reshape(mx.sym.swapaxes(rows, 0, 1), shape=(0, -3, -2))
    if name in ("add_n", "ElementWiseSum") and not keywords:
        return mx.sym.sum(rows, axis=0)
    raise AutographError(f"{where}: this call unpacks a list a loop on a tensor appended to; "
                         f"its items are the rows of one array known only when the graph "
                         f"runs, and only F.stack(*items, axis=0 or 1), F.concat(*items, dim=0 "
                         f"or 1) and F.add_n(*items) are computed from them")


# Flags the conversion adds for break, continue and return (NOTE [autograph], jumps).
_FLAGS = ("__agf_break_", "__agf_return_", "__agf_continue_")


def no_outer_lists(value, names, values, where, what):
    """A converted condition or iterable whose region mutates outside objects by method
    calls: on a Symbol, a list, dict or set among them is an error (a graph's branch or step
    cannot change a Python object: the change would happen once, while tracing)."""
    if isinstance(value, mx.sym.Symbol):
        for name, current in zip(names, values):
            if isinstance(current, (list, dict, set)) and what.startswith("code after"):
                raise AutographError(
                    f"{where}: this statement runs after a break, continue or return under a "
                    f"tensor if (whether it runs is known only when the graph runs) and changes "
                    f"the {type(current).__name__} {name!r} from outside the loop; to collect "
                    f"rows, append once per step before the if that breaks (in a while loop "
                    f"or a for over a Python range)")
            if isinstance(current, (list, dict, set)):
                raise AutographError(
                    f"{where}: this {what} is on a tensor and changes the {type(current).__name__}"
                    f" {name!r} from outside it; a graph's {what.split()[0]} runs as one graph "
                    f"built once, so it cannot change a Python {type(current).__name__} (in a "
                    f"loop, append once per step, as a statement of the loop's body, to "
                    f"collect rows; in an if, assign an array in both branches)")
    return value


def _flags_as_arrays(values, names):
    """The flags among ``values`` that are Python bools as one-element arrays: a graph's
    branches and loops carry arrays."""
    return tuple((mx.sym.ones if value else mx.sym.zeros)((1,))
                 if name.startswith(_FLAGS) and not _is_tensor(value)
                 and not isinstance(value, Undefined) else value
                 for name, value in zip(names, values))


def running(*flags):
    """``not (flag_1 or flag_2 ...)``: a Python bool while every flag is one, else an array."""
    arrays = []
    for flag in flags:
        if isinstance(flag, mx.sym.Symbol):
            arrays.append(flag)
        elif _truth(flag, "", "flag"):
            return False
    if not arrays:
        return True
    result = mx.sym.logical_not(arrays[0])
    for flag in arrays[1:]:
        result = result * mx.sym.logical_not(flag)
    return result


def running_and(flags, test):
    """A loop's condition once a break or return may end it: ``running(*flags) and test()``
    (the test is not evaluated once a flag is set)."""
    going = running(*flags)
    if going is False:
        return False
    value = test()
    if going is True:
        return value
    if isinstance(value, mx.sym.Symbol):
        return mx.sym.broadcast_logical_and(going, mx.sym.cast(value, "float32"))
    return going if _truth(value, "", "while") else False


def if_return(pred, then_fn, else_fn, values, where, names=()):
    """Run a converted ``if`` both of whose branches return: returns the returned value.
    ``names``: the variables the branches start from (the function ends in them, so a
    closure's nonlocal write of one is part of the value)."""
    if not isinstance(pred, mx.sym.Symbol):
        return then_fn(*values) if _truth(pred, where, "if") else else_fn(*values)
    kinds = {}

    def branch(fn, key):
        def run():
            with _graph_region(where, "if", names):
                value = fn(*values)
            if not _arrays_only(value):
                raise AutographError(
                    f"{where}: the {key} branch of this if returns {value!r}; with a tensor "
                    f"condition both branches run as one graph, so both must return arrays "
                    f"(or lists or tuples of arrays) of the same structure")
            kinds[key] = type(value)
            return value
        return run
    result = cond(pred, branch(then_fn, "then"), branch(else_fn, "else"),
                  name=_node_name(where, "if"))
    return tuple(result) if kinds.get("then") is tuple else result


def _arrays_only(value):
    if isinstance(value, (list, tuple)):
        return len(value) > 0 and all(_arrays_only(v) for v in value)
    return isinstance(value, mx.sym.Symbol)


def _node_name(where, kind):
    """A graph node's name from its source line: ``model_line12_while`` for a while loop on
    line 12 of model.py (MXNet appends a number where the name repeats)."""
    match = re.match(r"(.*?):(\d+): ", where)
    if match is None:
        return kind
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(match.group(1)))[0])
    return f"{stem}_line{match.group(2)}_{kind}"


def _truth(value, where, what):
    if isinstance(value, mx.nd.NDArray):
        if value.size != 1:
            raise AutographError(f"{where}: the {what}'s condition is an array of shape "
                                 f"{value.shape}; a tensor condition must have one element")
        return bool(value.asscalar())
    return value


# (where, variable) -> the closure that reads the variable: "the lambda at file:12", for the
# messages about that variable at that if or loop (filled by the conversion)
_READERS: dict = {}


def _read_by(where, name):
    reader = _READERS.get((where, name))
    return f" (read by {reader})" if reader else ""


def _loop_arrays(values, names, where, what):
    for name, value in zip(names, values):
        if isinstance(value, Undefined):
            raise AutographError(f"{where}: variable {name!r}{_read_by(where, name)} is "
                                 f"assigned in this {what} loop "
                                 f"on a tensor but has no value before it; a graph's loop "
                                 f"carries its variables from step to step, so give it one "
                                 f"before the loop")
    return [v for v in values if isinstance(v, mx.sym.Symbol)]


def _check_loop_vars(before, after, names, where, what):
    for name, old, new in zip(names, before, after):
        _no_structure(name, old, new, where, f"this {what} loop on a tensor")
        if isinstance(old, mx.sym.Symbol) != isinstance(new, mx.sym.Symbol) or \
                (not isinstance(old, mx.sym.Symbol) and old is not new and old != new):
            raise AutographError(
                f"{where}: variable {name!r}{_read_by(where, name)} changes in this {what} "
                f"loop on a tensor but is "
                f"the Python value {old if not isinstance(old, mx.sym.Symbol) else new!r} "
                f"before or after a step; a graph's loop can only carry arrays (make it one, "
                f"e.g. F.zeros((1,)) for a counter)")


def python_loop(value, where, why, what):
    """The condition or iterable of a loop left as Python (its body does what a graph
    cannot)."""
    if isinstance(value, mx.sym.Symbol):
        raise AutographError(f"{where}: this {what} loop is on a tensor, but {why}, which a "
                             f"graph's loop cannot express yet" + (
                                 "; set a flag array where it breaks and run the else clause's "
                                 "statements under an if on it after the loop"
                                 if why.endswith("else clause") else ""))
    return _truth(value, where, what) if what == "while" else value


# ---------------------------------------------------------------------------- conversion

def autograph(fn: Optional[Callable] = None, *, max_iterations: Optional[int] = None
              ) -> Callable:
    """Convert ``fn`` (typically ``hybrid_forward``) so that plain Python ``if``, ``while``
    and ``for`` statements on tensors hybridize: usable as ``@autograph`` or
    ``@autograph(max_iterations=N)``.

    The source is read and rewritten once, when decorating. At run time an ``if`` on a Python
    value runs as Python; on an NDArray (eager) it runs the branch the value selects; on a
    Symbol (while hybridizing) it becomes ``gluon_cf.cond``, whose outputs are the variables
    the branches assign and the code after the ``if`` reads. Such a variable must be an array
    in both branches (or the same Python value); otherwise an ``AutographError`` names it and
    the ``if``'s file and line. A ``while`` on a Symbol becomes ``gluon_cf.while_loop`` bounded
    by ``max_iterations`` (or a ``gluon_cf.max_iterations(N)`` first in its body; with neither
    it runs to exact length), a ``for`` over a Symbol ``gluon_cf.foreach`` over its rows.
    ``break``, ``continue`` and ``return`` in loops, early ``return``, and lists appended to
    once per step of a tensor loop convert too, and so do the functions and methods it calls
    that are defined in its module. ``to_code`` shows the converted source.

    Example:

    >>> import mxnet as mx, gluon_cf
    >>> class Gate(mx.gluon.HybridBlock):
    ...     @gluon_cf.autograph
    ...     def hybrid_forward(self, F, x):
    ...         if x.sum() > 0:
    ...             y = x * 2
    ...         else:
    ...             y = -x
    ...         return y
    >>> net = Gate()
    >>> net.hybridize()
    >>> net(mx.nd.array([1.0, -3.0])).asnumpy()
    array([-1.,  3.], dtype=float32)
    """
    if fn is None:
        return lambda f: autograph(f, max_iterations=max_iterations)
    converted, code = _convert(fn, max_iterations)
    converted = functools.wraps(fn)(converted)
    setattr(converted, "__wrapped__", fn)
    setattr(converted, "__gluon_cf_autograph_code__", code)
    return converted


def to_code(fn: Callable) -> str:
    """The source ``@autograph`` compiled for ``fn`` (a converted function, or one to
    convert).

    >>> import gluon_cf
    >>> def relu_or_double(x):
    ...     if x.sum() > 0:
    ...         x = x * 2
    ...     return x
    >>> print(gluon_cf.to_code(relu_or_double).splitlines()[0])
    def relu_or_double(x):
    """
    code = getattr(fn, "__gluon_cf_autograph_code__", None)
    return code if code is not None else _convert(fn)[1]


# The issue's spelling, gluon_cf.autograph.to_code(fn), where gluon_cf.autograph is this
# decorator (the name shadows the module in the package).
setattr(autograph, "to_code", to_code)

_counter = itertools.count(1)


def _convert(fn, max_iterations=None):
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
    _Rewriter(filename, first - 1, lines, owner, max_iterations,
              getattr(fn, "__module__", None)).convert(func)
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
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    closure = tuple(cells[name] for name in inner_code.co_freevars)
    converted = types.FunctionType(inner_code, fn.__globals__, fn.__name__, fn.__defaults__,
                                   closure or None)
    converted.__kwdefaults__ = fn.__kwdefaults__
    return converted, code_text


def _code_named(code, name):
    return next(c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == name)


def _runtime():
    import sys
    return sys.modules[__name__]


def _owner_class(fn):
    """The name of the class ``fn`` is defined in, for private-name mangling (or None)."""
    parts = fn.__qualname__.split(".")
    if len(parts) >= 2 and parts[-2] != "<locals>":
        return parts[-2]
    return None


_AUGMENTED = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
              ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "matmul",
              ast.LShift: "lshift", ast.RShift: "rshift", ast.BitAnd: "and_",
              ast.BitOr: "or_", ast.BitXor: "xor"}

_NOT_A_GRAPH = (ast.Return, ast.Break, ast.Continue, ast.Yield, ast.YieldFrom, ast.Global,
                ast.Nonlocal)


class _Rewriter(ast.NodeTransformer):
    """Rewrites the ifs, ``super()`` and private names of one function (NOTE [autograph])."""

    def __init__(self, filename, line_offset, lines, owner, max_iterations=None, module=None):
        self.filename, self.offset, self.lines, self.owner = filename, line_offset, lines, owner
        self.max_iterations, self.module = max_iterations, module
        self.parents = {}

    def where(self, node):
        line = node.lineno + self.offset
        text = linecache.getline(self.filename, line).strip() or \
            (self.lines[node.lineno - 1].strip() if node.lineno - 1 < len(self.lines) else "")
        return f"{self.filename}:{line}: {text}"

    def convert(self, func):
        for function in [n for n in ast.walk(func) if isinstance(n, ast.FunctionDef)]:
            _lower_jumps(function)      # nested functions' own returns too
        self.collected = _collected_lists(func)
        self.collected_names = {n for names in self.collected.values() for n in names}
        for parent in ast.walk(func):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self.func = func
        self.scopes = {fn: _Scope(fn) for fn in ast.walk(func)
                       if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))}
        self.self_name = func.args.args[0].arg if func.args.args else None
        # Liveness on the code as written (after the jumps' rewrite): the rewritten code
        # passes every value an if assigns into its branches, which would read as uses.
        self.live, self.exposed = {}, {}
        for node in ast.walk(func):
            if isinstance(node, (ast.If, ast.While, ast.For)):
                # a closure may read its function's variables whenever it is called: they
                # are live everywhere (NOTE [autograph], closures)
                self.live[node] = self._live_after(node) | self._scope(node).cells
                self.exposed[node] = _exposed(node.body)
        self.generic_visit(func)
        for fn, scope in self.scopes.items():
            if scope.cells and not isinstance(fn, ast.Lambda):
                # `if False: v = None`: generated functions' `nonlocal v` binds
                fn.body.insert(0, ast.copy_location(ast.If(
                    test=ast.Constant(False), orelse=[], body=[ast.Assign(
                        targets=[ast.Name(id=n, ctx=ast.Store()) for n in sorted(scope.cells)],
                        value=ast.Constant(None))]), fn.body[0]))

    def _record_readers(self, node, names):
        """Remember, for the messages about ``names`` at ``node``, the closures that read
        them (NOTE [autograph], closures)."""
        scope, where = self._scope(node), self.where(node)
        for name in names:
            closure = scope.readers.get(name)
            if closure is not None:
                kind = {ast.Lambda: "the lambda", ast.GeneratorExp: "the generator expression"
                        }.get(type(closure)) or \
                    f"the {'class' if isinstance(closure, ast.ClassDef) else 'function'} " \
                    f"{closure.name!r}"
                _READERS[(where, name)] = \
                    f"{kind} at {self.filename}:{closure.lineno + self.offset}"

    def _scope(self, node):
        """The _Scope of the function ``node`` (of the code as written) is in."""
        parent = self.parents.get(node)
        while parent is not None and not isinstance(parent, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef, ast.Lambda)):
            parent = self.parents.get(parent)
        return self.scopes[parent if parent is not None else self.func]

    # -- side effects on Python state (NOTE [autograph], side effects)
    def _effects(self, node, targets):
        """``__ag__.effect(...)`` statements to run before ``node``, which assigns (or
        deletes) ``targets``: one per attribute or item of an object that may come from
        outside, and per global or nonlocal variable."""
        if node not in self.parents:
            return []                    # written by the conversion
        scope, checks = self._scope(node), []
        for target in targets:
            for part in ast.walk(target):
                what = name = None
                if isinstance(part, (ast.Attribute, ast.Subscript)) and \
                        isinstance(part.ctx, (ast.Store, ast.Del)):
                    root = _root(part)
                    if root is None or scope.outer(root):
                        what = f"assigns {ast.unparse(part)}"
                elif isinstance(part, ast.Name) and isinstance(part.ctx, (ast.Store, ast.Del)):
                    if part.id in scope.globals:
                        what = f"assigns the global variable {part.id!r}"
                    elif part.id in scope.nonlocals:
                        what, name = f"assigns the nonlocal variable {part.id!r}", part.id
                if what is not None:
                    checks.append(ast.copy_location(ast.Expr(value=_call("effect", [
                        ast.Constant(self.where(node)), ast.Constant(what),
                        ast.Constant(name)])), node))
        return checks

    def visit_Assign(self, node):
        checks = self._effects(node, node.targets)
        self.generic_visit(node)
        if node in self.parents and any(isinstance(t, (ast.Tuple, ast.List))
                                        for t in node.targets):
            node.value = _call("iterated", [node.value, ast.Constant(self.where(node)),
                                            ast.Constant("unpacking assignment")])
        return checks + [node] if checks else node

    def visit_AnnAssign(self, node):
        checks = self._effects(node, [node.target]) if node.value is not None else []
        self.generic_visit(node)
        return checks + [node] if checks else node

    def visit_Delete(self, node):
        checks = self._effects(node, node.targets)
        self.generic_visit(node)
        return checks + [node] if checks else node

    # -- super() and private names, as the class body would have compiled them
    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and node.args and \
                node in self.parents:
            root = _root(node.args[0])
            if root is None or self._scope(node).outer(root):
                node.func = _call("changing", [func, ast.Constant(self.where(node))])
        if isinstance(func, ast.Attribute) and func.attr in _MUTATORS and node in self.parents:
            root = _root(func.value)
            if not (isinstance(func.value, ast.Name) and
                    func.value.id in self.collected_names) and \
                    (root is None or self._scope(node).outer(root)):
                func.value = _call("mutable", [func.value, ast.Constant(self.where(node)),
                                               ast.Constant(func.attr)])
        self.generic_visit(node)
        starred = [a for a in node.args if isinstance(a, ast.Starred)]
        if len(node.args) == 1 and starred and isinstance(starred[0].value, ast.Name) and \
                starred[0].value.id in self.collected_names:
            # F.stack(*outs, ...) of a list a tensor loop collected (NOTE [autograph], lists)
            keywords = ast.Dict(keys=[ast.Constant(k.arg) for k in node.keywords],
                                values=[k.value for k in node.keywords])
            if any(k.arg is None for k in node.keywords):
                return node
            return ast.copy_location(_call("unpacked", [
                node.func, starred[0].value, keywords, ast.Constant(self.where(node))]), node)
        # The functions it names, `helper(x)` or `self.method(x)`, defined in its own module,
        # are converted when called (a method of a tensor or of F is never one).
        if isinstance(node.func, ast.Name) and node.func.id in _ITERATING:
            node.func = _call("builtin", [node.func, ast.Constant(self.where(node))])
            return node
        named = isinstance(node.func, ast.Name) and \
            node.func.id not in ("super", "len", "max_iterations") or \
            isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and \
            self.owner is not None and node.func.value.id == self.self_name
        if named and self.module is not None:
            node.func = _call("converted", [node.func, ast.Constant(self.module)])
        if isinstance(node.func, ast.Name) and node.func.id == "super" and not node.args \
                and self.self_name is not None:
            node.args = [ast.Name(id="__class__", ctx=ast.Load()),
                         ast.Name(id=self.self_name, ctx=ast.Load())]
        return node

    def _mangle(self, name):
        if self.owner and name.startswith("__") and not name.endswith("__"):
            return "_%s%s" % (self.owner.lstrip("_"), name)
        return name

    def visit_Attribute(self, node):
        self.generic_visit(node)
        node.attr = self._mangle(node.attr)
        return node

    # -- x op= value: out of place on tensors (NOTE [autograph])
    def visit_AugAssign(self, node):
        checks = self._effects(node, [node.target])
        node = self._augmented(node)
        return checks + [node] if checks else node

    def _augmented(self, node):
        self.generic_visit(node)
        if not isinstance(node.target, ast.Name):
            return node
        op = _AUGMENTED[type(node.op)]
        call = _call("augmented", [ast.Name(id=node.target.id, ctx=ast.Load()), node.value,
                                   ast.Constant(op)])
        return ast.copy_location(ast.Assign(targets=[ast.Name(id=node.target.id,
                                                              ctx=ast.Store())],
                                            value=call), node)

    # -- if statements
    def visit_If(self, node):
        mutated = _mutated(node.body + node.orelse)
        # the cells the branches assign, as written (an inner returning if hides its own
        # assignments in its branch functions; these branches must still start from theirs)
        cells_assigned = (_assigned(node.body) | _assigned(node.orelse)) & \
            self._scope(node).cells
        self.generic_visit(node)          # inner ifs first
        where = self.where(node)
        node.test = self._no_outer_lists(
            node.test, mutated, where,
            "code after a break, continue or return" if getattr(node, "ag_guard", False)
            else "if")
        returns = _always_returns(node.body) and _always_returns(node.orelse)
        why = _not_a_graph(node.body + node.orelse, allow_return=returns)
        if why:
            node.test = _call("python_if", [node.test, ast.Constant(where), ast.Constant(why)])
            return node
        number = next(_counter)
        scope = self._scope(node)
        assigned = sorted(_assigned(node.body) | _assigned(node.orelse) | cells_assigned |
                          scope.written_by_calls(node.body + node.orelse))
        cells = scope.cells
        if returns:                       # both branches return: the if is the return value
            then_fn = self._loop_function(f"__ag_then_{number}", assigned, node.body, None,
                                          cells)
            else_fn = self._loop_function(f"__ag_else_{number}", assigned, node.orelse, None,
                                          cells)
            call = _call("if_return", [
                node.test, ast.Name(id=then_fn.name, ctx=ast.Load()),
                ast.Name(id=else_fn.name, ctx=ast.Load()), self._current(assigned, where),
                ast.Constant(where),
                ast.Tuple(elts=[ast.Constant(n) for n in assigned], ctx=ast.Load())])
            statements = [then_fn, else_fn, ast.Return(value=call)]
            return _located(statements, node)
        live = self.live[node]
        self._record_readers(node, assigned)
        out = _names(assigned)
        then_fn = self._loop_function(f"__ag_then_{number}", assigned, node.body, out, cells)
        else_fn = self._loop_function(f"__ag_else_{number}", assigned,
                                      node.orelse or [ast.Pass()], out, cells)
        call = _call("if_stmt", [
            node.test, ast.Name(id=then_fn.name, ctx=ast.Load()),
            ast.Name(id=else_fn.name, ctx=ast.Load()), self._current(assigned, where),
            ast.Tuple(elts=[ast.Constant(n) for n in assigned], ctx=ast.Load()),
            ast.Tuple(elts=[ast.Constant(n in live) for n in assigned], ctx=ast.Load()),
            ast.Constant(where)])
        statements = [then_fn, else_fn, self._assign(assigned, call)]
        return _located(statements, node)

    # -- expressions: conditional expressions and boolean operators
    def visit_IfExp(self, node):
        self.generic_visit(node)
        if _walrus(node):                 # its operands become lambdas: x := would bind there
            return node
        where = self.where(node)
        return ast.copy_location(_call("if_exp", [node.test, _thunk(node.body),
                                                  _thunk(node.orelse), ast.Constant(where)]),
                                 node)

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        if _walrus(node):
            return node
        name = "and_" if isinstance(node.op, ast.And) else "or_"
        return ast.copy_location(_call(name, [
            ast.List(elts=[_thunk(v) for v in node.values], ctx=ast.Load()),
            ast.Constant(self.where(node))]), node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call("not_", [node.operand]), node)
        return node

    def _loop_bound(self, node):
        """The ``gluon_cf.max_iterations(N)`` hint first in ``node``'s body (removed), or the
        decorator's default."""
        first = node.body[0] if node.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Call):
            func = first.value.func
            name = func.attr if isinstance(func, ast.Attribute) else \
                func.id if isinstance(func, ast.Name) else None
            if name == "max_iterations" and len(first.value.args) == 1:
                node.body = node.body[1:] or [ast.Pass()]
                return first.value.args[0], True
        return ast.Constant(self.max_iterations), False

    def _loop_function(self, name, params, body, returned, cells=()):
        """``def name(*params): body; return returned`` (a branch, a loop's test or body).
        A parameter that is one of ``cells`` (a variable closures read) stays the enclosing
        function's variable: ``nonlocal v; v = __agv_v`` (NOTE [autograph], closures)."""
        shared = [n for n in params if n in cells]
        start = [ast.Nonlocal(names=shared)] + [
            ast.Assign(targets=[ast.Name(id=n, ctx=ast.Store())],
                       value=ast.Name(id="__agv_" + n, ctx=ast.Load())) for n in shared] \
            if shared else []
        return ast.FunctionDef(
            name=name, args=ast.arguments(
                posonlyargs=[], args=[ast.arg(arg="__agv_" + n if n in shared else n)
                                      for n in params], vararg=None,
                kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
            body=start + list(body) + ([] if returned is None else [ast.Return(value=returned)]),
            decorator_list=[], returns=None)

    # -- comprehensions, generator expressions and *x on tensors are refused
    def _comprehension(self, node):
        self.generic_visit(node)
        for generator in node.generators:
            generator.iter = _call("iterated", [generator.iter, ast.Constant(self.where(node)),
                                                ast.Constant("comprehension")])
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name) and \
                node.value.id in self.collected_names and not isinstance(node.slice, ast.Slice):
            return ast.copy_location(_call("item", [node.value, node.slice,
                                                    ast.Constant(self.where(node))]), node)
        return node

    def visit_Starred(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and not (isinstance(node.value, ast.Name) and
                                                   node.value.id in self.collected_names):
            node.value = _call("iterated", [node.value, ast.Constant(self.where(node)),
                                            ast.Constant("unpacking (*)")])
        return node

    def _current(self, names, where):
        return ast.Tuple(elts=[
            _call("ld", [_thunk(ast.Name(id=n, ctx=ast.Load())), ast.Constant(n),
                         ast.Constant(where)]) for n in names],
            ctx=ast.Load())

    def visit_While(self, node):
        mutated = _mutated(node.body) - set(self.collected.get(node, []))
        self.generic_visit(node)
        where = self.where(node)
        node.test = self._no_outer_lists(node.test, mutated, where, "while loop")
        # the else clause first: it keeps the loop's break as Python (NOTE [autograph], jumps)
        why = ("it has an else clause" if node.orelse else None) or \
            _body_does(_not_a_graph(node.body)) or \
            ("it assigns in its condition (:=)" if _walrus(node.test) else None)
        if why:
            node.test = _call("python_loop", [node.test, ast.Constant(where), ast.Constant(why),
                                              ast.Constant("while")])
            return node
        bound, hinted = self._loop_bound(node)
        number = next(_counter)
        lists = self._collect(node)
        names = self._carried(node, _loaded(node.test))
        out = _names(names + ["__agc_" + n for n in lists])
        cells = self._scope(node).cells
        test_fn = self._loop_function(f"__ag_test_{number}", names, [], node.test, cells)
        body_fn = self._loop_function(f"__ag_body_{number}", names, node.body, out, cells)
        call = _call("while_stmt", [
            ast.Name(id=test_fn.name, ctx=ast.Load()), ast.Name(id=body_fn.name, ctx=ast.Load()),
            self._current(names, where),
            ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load()),
            ast.Constant(where), bound, self._current(lists, where), ast.Constant(hinted),
            ast.Constant(_forever(node.test))])
        statements = [test_fn, body_fn, self._assign(names + lists, call)]
        return _located(statements, node)

    def visit_For(self, node):
        mutated = _mutated(node.body) - set(self.collected.get(node, []))
        lists = self._collect(node)      # (inside the running() wrapper: before it converts)
        self.generic_visit(node)
        where = self.where(node)
        node.iter = self._no_outer_lists(node.iter, mutated, where, "for loop")
        why = ("it has an else clause" if node.orelse else None) or \
            _body_does(_not_a_graph(node.body)) or \
            (None if isinstance(node.target, ast.Name) else "it unpacks its items")
        if why:
            node.iter = _call("python_loop", [node.iter, ast.Constant(where), ast.Constant(why),
                                              ast.Constant("for")])
            return node
        number = next(_counter)
        item = node.target.id
        names = self._carried(node, set(), exclude={item})
        out = _names(names + ["__agc_" + n for n in lists])
        cells = self._scope(node).cells
        body_fn = self._loop_function(f"__ag_body_{number}", [item] + names, node.body, out,
                                      cells)
        keep_item = item in self.live[node]     # (a closure reads it: a cell, live)
        call = _call("for_stmt", [
            node.iter, ast.Name(id=body_fn.name, ctx=ast.Load()), self._current(names, where),
            ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load()),
            ast.Constant(where),
            self._current([item], where) if keep_item else ast.Constant(None),
            self._current(lists, where),
            ast.Tuple(elts=[ast.Constant(f) for f in getattr(node, "ag_stop", [])],
                      ctx=ast.Load())])
        statements = [body_fn, self._assign(names + lists + ([item] if keep_item else []),
                                            call)]
        return _located(statements, node)

    def _no_outer_lists(self, value, names, where, what):
        """``value`` (a condition or iterable), checked at run time: when it is a Symbol, the
        lists, dicts and sets the region mutates by method calls must not come from outside
        it (NOTE [autograph], lists)."""
        if not names:
            return value
        names = sorted(names)
        return _call("no_outer_lists", [value, ast.Tuple(elts=[ast.Constant(n) for n in names],
                                                         ctx=ast.Load()),
                                        self._current(names, where), ast.Constant(where),
                                        ast.Constant(what)])

    def _collect(self, node):
        """The lists this loop's body appends to once per step (NOTE [autograph], lists):
        each ``name.append(value)`` becomes ``__agc_name = value``, a step output."""
        names = self.collected.get(node, [])
        body = _step_statements(node)
        for k, statement in enumerate(body):
            name = _appended(statement)
            if name in names:
                body[k] = ast.copy_location(ast.Assign(
                    targets=[ast.Name(id="__agc_" + name, ctx=ast.Store())],
                    value=statement.value.args[0]), statement)
        return names

    def _carried(self, node, read_by_test, exclude=()):
        """A loop's variables: what its body assigns and the test reads, a step reads before
        assigning (carried to the next step), or the code after the loop reads. The body's
        other names are temporaries of one step."""
        assigned = (_assigned(node.body) | self._scope(node).written_by_calls(
            node.body + [ast.Expr(value=getattr(node, "test", ast.Constant(None)))])) - \
            set(exclude)
        wanted = read_by_test | self.exposed[node] | self.live[node]
        self._record_readers(node, assigned & wanted)
        return sorted(assigned & wanted)

    @staticmethod
    def _assign(names, call):
        if not names:
            return ast.Expr(value=call)
        target = ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Store()) for n in names],
                           ctx=ast.Store())
        return ast.Assign(targets=[target], value=call)

    def _live_after(self, node):
        """Names read after ``node`` before being assigned: by the following statements of
        its block and of every enclosing block, and by the next step of every enclosing
        loop."""
        names, child = set(), node
        parent = self.parents.get(child)
        while parent is not None and child is not self.func:
            for field in ("body", "orelse", "finalbody"):
                block = getattr(parent, field, None)
                if isinstance(block, list) and child in block:
                    names |= _exposed(block[block.index(child) + 1:])
            if isinstance(parent, (ast.For, ast.While, ast.AsyncFor)):   # the next step
                names |= _exposed(parent.body) | _loaded(getattr(parent, "test", None) or
                                                         ast.Pass())
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                break
            child, parent = parent, self.parents.get(parent)
        return names


def _forever(test):
    """Whether a (lowered) while condition is ``running_and(flags, lambda: <constant>)``."""
    return isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and \
        test.func.attr == "running_and" and isinstance(test.args[1], ast.Lambda) and \
        isinstance(test.args[1].body, ast.Constant) and bool(test.args[1].body.value)


_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault",
             "add", "discard", "sort", "reverse", "popitem"}


def _mutated(statements):
    """Names whose method a mutating call (``items.append(x)``, ``seen.add(x)`` ...) uses in
    ``statements`` without the statements assigning them: objects from outside."""
    called = {n.func.value.id for s in statements for n in ast.walk(s)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and n.func.attr in _MUTATORS and isinstance(n.func.value, ast.Name)}
    return called - _assigned(statements)


def _body_does(why):
    """``why`` (what branches do, from _not_a_graph) said of one loop body."""
    if why is None:
        return None
    verb, rest = why.split(" ", 1)
    return f"its body {verb}s {rest}"


def _walrus(node):
    return any(isinstance(n, ast.NamedExpr) for n in ast.walk(node))


def _appended(statement):
    """``name`` when ``statement`` is ``name.append(value)``, else None."""
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        call = statement.value
        if isinstance(call.func, ast.Attribute) and call.func.attr == "append" and \
                isinstance(call.func.value, ast.Name) and len(call.args) == 1 and \
                not call.keywords and not isinstance(call.args[0], ast.Starred):
            return call.func.value.id
    return None


def _collected_lists(func):
    """For each loop whose jumps became flags: the names its body appends to by a statement
    of the body itself (once per step), that the body neither assigns nor reads otherwise."""
    collected = {}
    for loop in _scoped(func.body):
        if not isinstance(loop, (ast.While, ast.For)) or not _lowerable(loop):
            continue
        appended = [_appended(s) for s in _step_statements(loop)]
        names = []
        for name in sorted({n for n in appended if n is not None}):
            reads = sum(1 for n in _scoped(loop.body) if isinstance(n, ast.Name) and
                        n.id == name and isinstance(n.ctx, ast.Load))
            if reads == appended.count(name) == 1 and name not in _assigned(loop.body):
                names.append(name)
        if names:
            collected[loop] = names
    return collected


def _step_statements(loop):
    """The statements a loop's body runs once per step: the body, or for a ``for`` that may
    break, the body of its ``if running(...)`` wrapper (NOTE [autograph], jumps)."""
    if isinstance(loop, ast.For) and getattr(loop, "ag_stop", None) and len(loop.body) == 1 \
            and isinstance(loop.body[0], ast.If):
        return loop.body[0].body
    return loop.body


def _located(statements, node):
    """``statements`` (what ``node`` was rewritten into) at ``node``'s source position."""
    for statement in statements:
        ast.copy_location(statement, node)
    return statements


def _names(names):
    """The tuple expression ``(name_1, name_2, ...)``."""
    return ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Load()) for n in names], ctx=ast.Load())


def _thunk(expression):
    """``lambda: expression``, called where it is written (not a closure of the user's)."""
    thunk = ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                          kw_defaults=[], kwarg=None, defaults=[]),
                       body=expression)
    setattr(thunk, "ag_thunk", True)
    return thunk


def _call(name, args):
    return ast.Call(func=ast.Attribute(value=ast.Name(id="__ag__", ctx=ast.Load()), attr=name,
                                       ctx=ast.Load()), args=args, keywords=[])


def _scoped(statements):
    """The nodes of ``statements`` outside nested functions, lambdas and classes (a def or
    class statement shows as the name it binds)."""
    stack = list(statements)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield ast.Name(id=node.name, ctx=ast.Store())
            continue
        if isinstance(node, ast.Lambda):
            continue
        yield node
        stack.extend(_comprehension_parts(node) if isinstance(node, _COMPREHENSIONS) else
                     ast.iter_child_nodes(node))


def _assigned(statements):
    return {n.id for n in _scoped(statements) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store) and not n.id.startswith("__ag_")}


def _exposed(statements):
    """Names ``statements`` may read before assigning them (in order; what a nested block or
    one branch assigns does not count as assigned)."""
    exposed, assigned = set(), set()
    for statement in statements:
        if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)):
            value = getattr(statement, "value", None)
            reads = _loaded(value) if value is not None else set()
            targets = getattr(statement, "targets", None) or \
                [getattr(statement, "target", None)]
            for target in filter(None, targets):
                reads |= _loaded(target)        # a[i] = ... reads a and i
            if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
                reads.add(statement.target.id)  # x += 1 reads x
            exposed |= reads - assigned
            assigned |= _assigned([statement])
        elif isinstance(statement, ast.If):     # assigns what both branches assign
            exposed |= (_loaded(statement.test) | _exposed(statement.body) |
                        _exposed(statement.orelse)) - assigned
            assigned |= _definite(statement)
        elif isinstance(statement, ast.While):
            exposed |= (_loaded(statement.test) | _exposed(statement.body) |
                        _exposed(statement.orelse)) - assigned
        elif isinstance(statement, ast.For):    # its body reads its item after assigning it
            exposed |= (_loaded(statement.iter) | _exposed(statement.body) -
                        _assigned([statement.target]) | _exposed(statement.orelse)) - assigned
        else:
            exposed |= _loaded(statement) - assigned
    return exposed


def _definite(statement):
    """The names an ``if`` assigns on every path that goes on after it (a branch that always
    returns or raises does not go on)."""
    sides = []
    for branch in (statement.body, statement.orelse):
        if _always_returns(branch):
            continue
        names = set()
        for inner in branch:
            names |= _definite(inner) if isinstance(inner, ast.If) else \
                set() if isinstance(inner, (ast.For, ast.While, ast.AsyncFor, ast.With,
                                            ast.Try)) else _assigned([inner])
        sides.append(names)
    if not sides:
        return set()
    return set.intersection(*sides)


def _loaded(node):
    """The names ``node`` reads (a comprehension's own variables are not read outside it)."""
    names, stack = set(), [(node, frozenset())]
    while stack:
        node, hidden = stack.pop()
        if isinstance(node, _COMPREHENSIONS):
            inner = hidden | _comprehension_targets(node)
            stack.extend((child, inner) for child in _comprehension_parts(node))
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and \
                node.id not in hidden:
            names.add(node.id)
        stack.extend((child, hidden) for child in ast.iter_child_nodes(node))
    return names


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _comprehension_targets(node):
    return {n.id for g in node.generators for n in ast.walk(g.target)
            if isinstance(n, ast.Name)}


def _comprehension_parts(node):
    """A comprehension's children but its targets (which bind in its own scope)."""
    parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
    return parts + [g.iter for g in node.generators] + \
        [i for g in node.generators for i in g.ifs]


def _not_a_graph(statements, allow_return=False):
    """Why these branches cannot become a cond's (None if they can)."""
    for node in _scoped(statements):
        if isinstance(node, ast.Return) and allow_return:
            continue
        if isinstance(node, _NOT_A_GRAPH):
            return "use %s" % type(node).__name__.lower()
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, (ast.Attribute, ast.Subscript)) and \
                            isinstance(part.ctx, ast.Store):
                        return "assign attributes or items"
    return None


# ---------------------------------------------------------------------------- closures

# What a function's closures are: nested functions, lambdas, classes (their methods) and
# generator expressions run later than they are written, reading the enclosing function's
# variables when they run (NOTE [autograph], closures). Comprehensions run where written.
_CLOSURES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.GeneratorExp)


def _in_scope(nodes):
    """The nodes under ``nodes`` outside closures, and the closures directly in them."""
    inside, closures, stack = [], [], list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, _CLOSURES) and not getattr(node, "ag_thunk", False):
            closures.append(node)
            continue
        inside.append(node)
        stack.extend(_comprehension_parts(node) if isinstance(node, _COMPREHENSIONS) else
                     ast.iter_child_nodes(node))
    return inside, closures


def _params(fn):
    args = fn.args
    return {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} | \
        {a.arg for a in (args.vararg, args.kwarg) if a is not None}


def _declared(nodes, kind):
    return {name for n in nodes if isinstance(n, kind) for name in n.names}


class _Scope:
    """What one function (or lambda) of the converted code binds, and what its closures read
    and write of it."""

    def __init__(self, fn):
        body = fn.body if isinstance(fn.body, list) else [fn.body]
        inside, self.closures = _in_scope(body)
        self.params = _params(fn)
        self.globals = _declared(inside, ast.Global)
        self.nonlocals = _declared(inside, ast.Nonlocal)
        stored = {n.id for n in inside if isinstance(n, ast.Name) and
                  isinstance(n.ctx, (ast.Store, ast.Del))} | \
            {c.name for c in self.closures if not isinstance(c, (ast.Lambda, ast.GeneratorExp))}
        self.used = {n.id for n in inside if isinstance(n, ast.Name)}
        self.bound = (self.params | stored) - self.globals - self.nonlocals
        # a variable whose every binding is a new object ([], {}, dict(), Cls()): changing
        # that object changes nothing outside this call (NOTE [autograph], side effects)
        new = {id(n.targets[0]) for n in inside if isinstance(n, ast.Assign) and
               len(n.targets) == 1 and _new_object(n.value)}
        stores = [n for n in inside if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
        self.fresh = {n.id for n in stores} - {n.id for n in stores if id(n) not in new} - \
            self.params - self.globals - self.nonlocals
        self.free = self.used - self.bound - self.globals
        for closure in self.closures:
            self.free |= _free(closure) - self.bound
        self.cells = self.bound & set().union(*[_free(c) for c in self.closures])
        self.readers = {}             # cell -> the first closure (in the source) reading it
        for closure in sorted(self.closures, key=lambda c: (c.lineno, c.col_offset)):
            for name in _free(closure) & self.cells:
                self.readers.setdefault(name, closure)
        # variables of this scope a named closure assigns (nonlocal), itself or through the
        # closures it names
        writes = {}
        for closure in self.closures:
            if isinstance(closure, (ast.FunctionDef, ast.AsyncFunctionDef)):
                writes[closure.name] = (_nonlocal_writes(closure) & self.cells,
                                        _Scope(closure).used)
        self.writes = {name: set(w) for name, (w, _) in writes.items()}
        changed = True
        while changed:
            changed = False
            for name, (_, used) in writes.items():
                for other in used & set(writes) - {name}:
                    if not self.writes[other] <= self.writes[name]:
                        self.writes[name] |= self.writes[other]
                        changed = True

    def outer(self, name):
        """Whether the object ``name`` holds may exist outside this call of the function."""
        return name not in self.fresh

    def written_by_calls(self, statements):
        """The variables the named closures ``statements`` mention assign (nonlocal)."""
        mentioned = {n.id for n in _in_scope(statements)[0] if isinstance(n, ast.Name)}
        return set().union(*[self.writes[n] for n in mentioned & set(self.writes)])


def _new_object(value):
    """Whether an expression makes a new object: a display, a comprehension, a constant, a
    container's constructor (``dict()``) or a class's (``Cls()``, by the naming convention;
    ``get_cache()`` may return an object from outside)."""
    return isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp,
                              ast.SetComp, ast.Constant, ast.Tuple)) or \
        isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
        (value.func.id in ("list", "dict", "set", "bytearray", "tuple", "frozenset") or
         value.func.id[:1].isupper())


def _free(closure):
    """The names a closure reads or assigns (nonlocal) from its enclosing functions."""
    if isinstance(closure, ast.ClassDef):     # methods skip the class body's scope
        return set().union(*[_free(c) for c in _in_scope(closure.body)[1]])
    if isinstance(closure, ast.GeneratorExp):     # its first iterable is read where written
        parts = [closure.elt] + [g.target for g in closure.generators] + \
            [i for g in closure.generators for i in g.ifs] + \
            [g.iter for g in closure.generators[1:]]
        inside, closures = _in_scope(parts)
        targets = {n.id for g in closure.generators for n in ast.walk(g.target)
                   if isinstance(n, ast.Name)}
        used = {n.id for n in inside if isinstance(n, ast.Name)}
        return (used | set().union(*[_free(c) for c in closures])) - targets
    return _Scope(closure).free


def _nonlocal_writes(fn):
    scope = _Scope(fn)
    inside = _in_scope(fn.body)[0]
    return {n.id for n in inside if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            and n.id in scope.nonlocals}


def _root(target):
    """The variable an attribute or item target (``self.a.b[i]``) hangs from, or None."""
    while isinstance(target, (ast.Attribute, ast.Subscript)):
        target = target.value
    return target.id if isinstance(target, ast.Name) else None


# ---------------------------------------------------------------------------- jumps

class _LoopFlags:
    """The flags of one loop whose ``break``/``continue``/``return`` become assignments."""

    def __init__(self, number):
        self.brk, self.cont = f"__agf_break_{number}", f"__agf_continue_{number}"
        self.used_break = self.used_continue = False


def _lowerable(loop):
    """Whether a loop's jumps become flags: no ``else`` clause, and a ``for`` over one name."""
    if loop.orelse:
        return False
    return isinstance(loop, ast.While) or isinstance(loop.target, ast.Name)


def _lower_jumps(func):
    """Rewrite ``break``, ``continue`` and ``return`` inside loops into flag variables, then
    move the code after an ``if`` that returns into its branches (NOTE [autograph], jumps)."""
    func.body, returns = _lower_block(func.body, None)
    assert not returns          # the outermost loops placed them
    if any(isinstance(n, ast.If) and _contains(n, ast.Return) for n in _scoped(func.body)):
        if not _always_returns(func.body):
            end = func.body[-1]
            func.body.append(ast.copy_location(ast.Return(value=ast.Constant(None)), end))
        func.body = _returns_into_branches(func.body)


def _lower_block(statements, loop):
    """``statements`` with the jumps belonging to ``loop`` (a _LoopFlags, None outside loops)
    replaced by flag assignments; returns them and the ``(flag, value)`` of each ``return``
    inside a loop that the enclosing loops still have to pass on."""
    out, returns = [], []
    for statement in statements:
        if isinstance(statement, (ast.While, ast.For)) and _lowerable(statement):
            flags = _LoopFlags(next(_counter))
            body, inner_returns = _lower_block(statement.body, flags)
            stop = ([flags.brk] if flags.used_break else []) + [f for f, _ in inner_returns]
            guards = stop + ([flags.cont] if flags.used_continue else [])
            body = _guard(body, guards)
            if stop and isinstance(statement, ast.For):
                wrapper = ast.If(test=_running(stop), body=body, orelse=[])
                setattr(wrapper, "ag_guard", True)
                body = [ast.copy_location(wrapper, statement)]
                setattr(statement, "ag_stop", stop)      # for_stmt ends a Python loop by them
            elif stop:
                statement.test = _call("running_and", [
                    ast.Tuple(elts=[ast.Name(id=f, ctx=ast.Load()) for f in stop],
                              ctx=ast.Load()), _thunk(statement.test)])
            if flags.used_continue:   # first, so that it is a step's temporary
                body = [ast.copy_location(_set(flags.cont, False), statement)] + body
            statement.body = body
            # a return's flag starts False once, before the outermost loop it leaves
            out.extend(ast.copy_location(_set(f, False), statement) for f in stop
                       if loop is None or not f.startswith("__agf_return_"))
            out.append(statement)
            if loop is None:         # the outermost loop: return after it
                out.extend(ast.copy_location(ast.If(
                    test=ast.Name(id=f, ctx=ast.Load()),
                    body=[ast.copy_location(ast.Return(value=value), value)], orelse=[]), value)
                    for f, value in inner_returns)
            else:
                returns.extend(inner_returns)
        elif isinstance(statement, (ast.While, ast.For, ast.AsyncFor)):
            out.append(statement)    # its jumps stay Python (NOTE [autograph])
        elif loop is not None and isinstance(statement, ast.Break):
            loop.used_break = True
            out.append(ast.copy_location(_set(loop.brk, True), statement))
        elif loop is not None and isinstance(statement, ast.Continue):
            loop.used_continue = True
            out.append(ast.copy_location(_set(loop.cont, True), statement))
        elif loop is not None and isinstance(statement, ast.Return):
            flag = f"__agf_return_{next(_counter)}"
            returns.append((flag, statement.value or
                            ast.copy_location(ast.Constant(None), statement)))
            out.append(ast.copy_location(_set(flag, True), statement))
        else:
            for field in ("body", "orelse", "finalbody"):
                block = getattr(statement, field, None)
                if isinstance(block, list) and not isinstance(
                        statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    new, inner = _lower_block(block, loop)
                    setattr(statement, field, new)
                    returns.extend(inner)
            if isinstance(statement, ast.Try):
                for handler in statement.handlers:
                    handler.body, inner = _lower_block(handler.body, loop)
                    returns.extend(inner)
            out.append(statement)
    return out, returns


def _guard(block, flags):
    """``block`` with everything after a statement that may set one of ``flags`` run only
    while none is set (in nested blocks too)."""
    if not flags:
        return block
    for k, statement in enumerate(block):
        if not isinstance(statement, (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef,
                                      ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):    # if, with, try
                inner = getattr(statement, field, None)
                if isinstance(inner, list) and inner:
                    setattr(statement, field, _guard(inner, flags))
            for handler in getattr(statement, "handlers", []):
                handler.body = _guard(handler.body, flags)
        set_here = sorted(_assigned([statement]) & set(flags))
        if set_here and k + 1 < len(block):
            rest = _guard(block[k + 1:], flags)
            guard = ast.If(test=_running(set_here), body=rest, orelse=[])
            setattr(guard, "ag_guard", True)      # not the user's if: messages say so
            return block[:k + 1] + [ast.copy_location(guard, block[k + 1])]
    return block


def _returns_into_branches(block):
    """Move the statements after an ``if`` that may return into those of its branches that
    do not always return, so that every such ``if`` returns on every path."""
    for k, statement in enumerate(block):
        if isinstance(statement, ast.If) and _contains(statement, ast.Return):
            rest = block[k + 1:]
            for field in ("body", "orelse"):
                branch = getattr(statement, field)
                if not _always_returns(branch):
                    branch = branch + copy.deepcopy(rest)
                setattr(statement, field, _returns_into_branches(branch))
            return block[:k + 1]
    return block


def _always_returns(block):
    if not block:
        return False
    last = block[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return _always_returns(last.body) and _always_returns(last.orelse)
    return False


def _contains(node, kind):
    return any(isinstance(n, kind) for n in _scoped([node]))


def _set(name, value):
    return ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=ast.Constant(value))


def _running(flags):
    return _call("running", [ast.Name(id=f, ctx=ast.Load()) for f in flags])
