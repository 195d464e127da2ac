"""Boolean operators of converted code at run time: ``and``/``or``/``not`` as Python's.

NOTE [autograph and/or]
    ``a and b`` is Python's ``b if a else a``, ``a or b`` Python's ``a if a else b``: the
    operand itself (its shape and dtype, a Python number stays one), the right side evaluated
    only when Python evaluates it (its side effects, errors, cost; a ``(n > 0) and total / n``
    has no NaN gradient where ``n`` is 0). Eagerly an NDArray's truth is Python's: one
    element, more refused at the user's line (Python's ValueError). A Symbol's truth exists
    only when the graph runs: the rest of the expression is a ``cond`` on it (one element at
    run time, both sides of the same shape and dtype, as a cond's branches; a Python number
    side an array of the tensor's shape; operands of different dtypes are an AutographError
    naming the and/or, its operands' dtypes and the cast to write, not the cond's branches:
    ``ops.cond.describe_sides``). A conditional expression ``a if t else 1.0`` on a tensor
    ``t`` is refused where a side is a Python value (Python gives the number itself where it
    is chosen and an array where the other side is, which no graph output is; the message
    says to write ``F.ones_like(a) * 1.0``). ``not`` is Python's eagerly (a bool), on a Symbol a
    cond on it (one element at run time) giving 0 or 1 in its shape and dtype. A chained
    comparison ``a < b < c`` is Python's ``a < b and b < c``, ``b`` evaluated once.
"""
import mxnet as mx
import numpy as np

from ...hybrid_trace import shape_checked
from ...ops.cond import cond, describe_sides
from ..errors import (AmbiguousTruthError, AutographError, node_name, python_value,
                      refuse_hashed_symbol)
from .side_effects import graph_region


def asserted(test, where):
    """The test of a converted ``assert``: a Symbol is refused (its value exists only when
    the graph runs, and a graph cannot raise Python's AssertionError); anything else is
    itself, for Python's assert."""
    if isinstance(test, mx.sym.Symbol):
        raise AutographError(
            f"{where}: this asserts a condition on a tensor while hybridizing; its value "
            f"exists only when the graph runs, so the assert cannot be checked. Check it "
            f"eagerly (before hybridize()), outside the block, or remove it")
    return test


# NOTE [autograph match]
#     A ``match`` statement runs as Python's: its patterns bind and compare Python values and
#     NDArrays as plain Python does (a literal pattern ``case 0:`` takes the truth of
#     ``subject == 0``, one element). A Symbol has no truth while the graph is traced, so a
#     literal pattern compared with a subject that is or holds a Symbol (MXNet's
#     NotImplementedForSymbol naming no line), or a guard ``case ... if F.sum(x) > 0:`` that
#     is one, is refused at the user's line: an ``if``/``elif`` on the tensor converts (a
#     cond). Capture, wildcard, class, sequence and mapping patterns of a Symbol compare
#     nothing and run as Python. A list a loop on a tensor collected (a ``StepList``, its
#     items the rows of one array) is no Sequence to a pattern: ``case [a, b, *rest]:``
#     matched nothing, silently another case than eagerly, so the subject (or a tuple's,
#     list's or dict's item, or an attribute a class pattern reads: ``case State(items=[a,
#     b])`` of a namedtuple, a dataclass, a slotted or nested object, copied running none of
#     the user's code: no ``__copy__``) is the Python list of its items where their number
#     is known while tracing, else refused at the line (as ``len(items)`` is). A case's
#     captures, and the items of its star's list and ``**rest`` dict, are then rebound, in
#     its guard and body, to the objects the subject held (``case [*_] as whole:
#     whole.append(v)`` changes ``outs``, ``s is st``, ``case (h, *others)``: ``others[0] is
#     outs``: ``match_originals``); a copy reached otherwise (``case (x, [*_] as o)`` where
#     ``o`` is an item of a copy) refuses changes. A value pattern written as a dotted name
#     (``case Reg.cur:``, Python's ``subject == Reg.cur``) is read, when Python's match reads
#     it, as the copy the subject holds of that object (``list_parts.MatchValues``): compared
#     with the object it stands for, a copy was another object, silently another case.
def match_subject(subject, where, compares):
    """The subject of a converted ``match`` (NOTE [autograph match]): itself (a collected
    list given as the list of its items, by ``list_parts.match_items``), a Symbol in it
    refused when a literal pattern would compare it."""
    if compares and _holds_symbol(subject):
        raise AutographError(
            f"{where}: this match compares a tensor with a literal or value pattern (case "
            f"0:, case Mode.A:) while hybridizing; its value exists only when the graph runs, "
            f"so no case can be chosen while tracing. Write an if/elif on the tensor (a "
            f"graph's cond)")
    return subject


def match_guard(guard, where):
    """The guard of a ``case ... if guard:`` (NOTE [autograph match]): a Symbol refused."""
    if isinstance(guard, mx.sym.Symbol):
        raise AutographError(
            f"{where}: this case's guard is a tensor condition while hybridizing; its value "
            f"exists only when the graph runs, so no case can be chosen while tracing. Write "
            f"an if/elif on the tensor inside the case (a graph's cond)")
    return guard


def _holds_symbol(value, depth=0):
    if isinstance(value, mx.sym.Symbol):
        return True
    if depth < 8 and isinstance(value, (list, tuple)):
        return any(_holds_symbol(v, depth + 1) for v in value)
    if depth < 8 and isinstance(value, dict):
        return any(_holds_symbol(v, depth + 1) for v in value.values())
    return False


def and_(first, rest, where):
    """A converted ``a and b and ...`` (``first`` the value of ``a``, ``rest`` the other
    operands as functions, evaluated left to right): Python's ``b if a else a``
    (:func:`_bool_op`)."""
    return _bool_op(first, rest, where, stop_on=False)


def or_(first, rest, where):
    """A converted ``a or b or ...``: Python's ``a if a else b`` (:func:`_bool_op`)."""
    return _bool_op(first, rest, where, stop_on=True)


def python_operand(value, where, what="and/or"):
    """The first operand of an and/or (or the test of a conditional expression) left as
    Python's (a ``:=`` in a later operand or a side): a Symbol refused at the user's line
    (Python would take its truth, which exists only when the graph runs)."""
    if isinstance(value, mx.sym.Symbol):
        part = {"and/or": "an operand after the first",
                "chained comparison": "an operand after the second"}.get(what, "a side")
        raise AutographError(f"{where}: this {what} on a tensor has a := in {part}, which "
                             f"gluon_cf cannot run as a graph's cond; assign that value in a "
                             f"statement before the {what}")
    return value


def _bool_op(result, rest, where, stop_on, what="and/or"):
    """Python's short circuit: stop at the first operand whose truth is ``stop_on``, returning
    that operand itself, else the last; a later operand is evaluated only when Python would
    evaluate it (its side effects, errors and cost, and the gradient of what it computes).
    An NDArray's truth is Python's (one element; more is ambiguous: refused at the user's
    line, where Python raises ValueError); a Symbol's is known only when the graph runs, so
    the rest is a cond on it (NOTE [autograph and/or])."""
    for value in rest:
        if isinstance(result, mx.sym.Symbol):
            _one_element(result, where, what)
            result = _symbolic(result, value, stop_on, where)
            continue
        if _truth(result, where, what) == stop_on:
            return result
        result = value()
    return result


def _one_element(symbol, where, what):
    """A Symbol whose truth a cond takes: refused as an NDArray's is (:func:`_truth`) where
    the shapes of the inputs the graph is traced for give it more than one element (the
    cond would fail on every call with them, naming no remedy); checked when the trace ends
    (``shape_checked``)."""
    def check(shape):
        if int(np.prod(shape)) != 1:
            # (not Python's own error: the user's except cannot catch it after the trace)
            _truth(mx.nd.zeros(shape), where, what, AutographError)
    shape_checked(symbol, check)


def _truth(value, where, what="and/or", error=AmbiguousTruthError):
    if isinstance(value, mx.nd.NDArray) and value.size != 1:
        raise error(
            f"{where}: this {what} takes the truth of an array of shape {value.shape}, which "
            f"Python cannot (its ValueError: the truth value of an NDArray with multiple "
            f"elements is ambiguous); elementwise, " +
            ("write F.broadcast_logical_and(a < b, b < c) for a < b < c"
             if what == "chained comparison" else
             "write F.where(a, b, a) for a and b, F.where(a, a, b) for a or b, "
             "F.logical_not(a) for not a"))
    return bool(value.asscalar()) if isinstance(value, mx.nd.NDArray) else bool(value)


def _symbolic(a, rest, stop_on, where):
    """``a and rest()`` (``stop_on`` false) or ``a or rest()`` of a Symbol ``a``: a cond on
    ``a`` whose branch evaluating ``rest`` runs only when Python would evaluate it; a Python
    number ``rest()`` an array of ``a``'s shape and dtype (Python's number where it is
    chosen)."""
    def other():
        with graph_region(where, "and/or"):
            b = rest()
        if isinstance(b, (bool, int, float)) and not isinstance(b, mx.sym.Symbol):
            # an integral number is exact in a's dtype; another (0.5) only in a float one: the
            # float32 array meets a's dtype in the cond, which refuses an integer a's (Python
            # would give an int array or a float, which no graph output is)
            b = mx.sym.ones_like(a) * float(b) if float(b).is_integer() else \
                mx.sym.ones_like(a).astype("float32") * float(b)
        if not isinstance(b, mx.sym.Symbol):
            raise AutographError(f"{where}: this and/or mixes a tensor with the Python "
                                 f"value {python_value(b)}; make both tensors (or Python "
                                 f"numbers)")
        return b

    def itself():
        return mx.sym.identity(a)

    then_func, else_func = (itself, other) if stop_on else (other, itself)
    sides = ("the left operand", "the right operand")
    then_side, else_side = sides if stop_on else sides[::-1]

    def mismatch(then_dtypes, else_dtypes):
        return AutographError(
            f"{where}: this {'or' if stop_on else 'and'} on a tensor gives one of its "
            f"operands itself (Python's a and b is b if a else a; a or b is a if a else b), "
            f"which hybridized is a graph's cond whose result has one dtype, but {then_side} "
            f"is {', '.join(map(str, then_dtypes))} and {else_side} is "
            f"{', '.join(map(str, else_dtypes))}; cast one to the other's dtype (F.cast(b, "
            f"dtype={str((then_dtypes if stop_on else else_dtypes)[0])!r})), or for the "
            f"truth of both write F.broadcast_logical_and(a != 0, b != 0) (or _or)")
    return describe_sides(cond(a, then_func, else_func, name=node_name(where, "andor")),
                          mismatch)


def compare_chain(left, right, rest, ops, where):
    """A converted chained comparison ``a < b <= c ...`` (``left`` and ``right`` its first two
    operands' values, ``rest`` functions of the others, evaluated once, left to right; ``ops``
    names of BROADCAST): Python's ``a < b and (b <= c ...)``, the rest of the chain evaluated
    only where Python evaluates it, with and's truth (:func:`_bool_op`): an NDArray of one
    element, more refused at the user's line where Python raises ValueError; on a Symbol a
    cond (one element when the graph runs). Issue 24: it was the elementwise logical and, a
    value where Python raises. The first two are values, not functions, so that a ``:=`` in
    them binds the user's name (``while -9 < (s := F.sum(h)) < 4:``: it was left Python's
    chain, MXNet's NotImplementedForSymbol hybridized)."""
    from .variables import binary
    first = binary(left, right, ops[0])
    if not rest:
        return first
    return _bool_op(first, [lambda: compare_chain(right, rest[0](), rest[1:], ops[1:], where)],
                    where, stop_on=False, what="chained comparison")


def contains(item, container, negated, where):
    """A converted ``item in container`` (``not in`` where ``negated``): Python's; where it
    compares a tensor with the items (``==``, after identity) while hybridizing, or hashes
    one (a dict's, a set's), refused at the user's line (MXNet's NotImplementedForSymbol,
    Python's TypeError named none)."""
    try:
        found = item in container
    except mx.base.NotImplementedForSymbol:
        raise AutographError(
            f"{where}: this 'in' compares a tensor with the items (==) while hybridizing; "
            f"its truth exists only when the graph runs. Compare Python values (indices, "
            f"names), or compute the test with F ops on the stacked items") from None
    except TypeError as err:
        refuse_hashed_symbol(err, where, "this 'in' of a tensor")
    return not found if negated else found


def not_(value, where):
    """A converted ``not x``: Python's (an NDArray's truth: one element, else refused at the
    user's line where Python raises ValueError); on a Symbol, whose truth exists only when
    the graph runs, a cond on it giving 0 or 1 (Python's bool as a number, in its shape and
    dtype): one element when the graph runs, as eagerly, not an elementwise not that Python
    never computes (issue 24: ``not x`` of two elements was silently elementwise)."""
    if isinstance(value, mx.sym.Symbol):
        _one_element(value, where, "not")
        return cond(value, lambda: mx.sym.zeros_like(value), lambda: mx.sym.ones_like(value),
                    name=node_name(where, "not"))
    return not _truth(value, where, "not")


def positive(value, where):
    """A converted ``+x``: Python's; on a Symbol (which, as an NDArray, has no unary plus:
    Python's TypeError names no line of the user's) an error at the user's line."""
    if isinstance(value, mx.sym.Symbol):
        raise AutographError(f"{where}: unary + of a tensor: MXNet's arrays (NDArray and "
                             f"Symbol) have no unary plus; write the value itself")
    return +value
