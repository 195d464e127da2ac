"""Boolean operators of converted code at run time: ``and``/``or``/``not`` keep Python's
short-circuit semantics on Python values and are elementwise on tensors, Python's value at each
element (``and``/``or`` the operand Python would return, ``not`` 0 or 1; every operand
evaluated, as a graph must)."""
import mxnet as mx

from ..errors import AutographError
from .variables import is_tensor


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


def and_(values, where):
    """A converted ``a and b and ...`` (each operand a function, evaluated left to right): on
    tensors elementwise Python's (:func:`_logical`, each operand evaluated); else Python's."""
    return _bool_op(values, where, stop_on=False, op="broadcast_logical_and")


def or_(values, where):
    """A converted ``a or b or ...``: on tensors elementwise Python's; else Python's."""
    return _bool_op(values, where, stop_on=True, op="broadcast_logical_or")


def _bool_op(values, where, stop_on, op):
    """Python's short circuit (stop at the first operand whose truth is ``stop_on``) while the
    first operand is a Python value; else ``op`` over every operand."""
    result = values[0]()
    tensor = is_tensor(result)
    for value in values[1:]:
        if not tensor and bool(result) == stop_on:
            return result
        result = _logical(op, result, value(), where) if tensor else value()
    return result


def compare_chain(operands, ops, where):
    """A converted chained comparison ``a < b <= c ...`` (each operand a function, evaluated
    once, left to right; ``ops`` names of BROADCAST): Python's ``a < b and b <= c ...``, so on
    tensors the elementwise logical and of the comparisons (a Symbol has no truth for
    Python's chain to take)."""
    from .variables import binary
    left = operands[0]()
    result = None
    for op, operand in zip(ops, operands[1:]):
        right = operand()
        step = binary(left, right, op)
        result = step if result is None else _logical("broadcast_logical_and", result, step,
                                                      where) \
            if is_tensor(result) or is_tensor(step) else step
        if not is_tensor(result) and not result:
            return result
        left = right
    return result


def not_(value):
    """A converted ``not x``: on a tensor the elementwise logical not; else Python's."""
    if isinstance(value, mx.sym.Symbol):
        return mx.sym.logical_not(value)
    if isinstance(value, mx.nd.NDArray):
        return mx.nd.logical_not(value)
    return not value


def positive(value, where):
    """A converted ``+x``: Python's; on a Symbol (which, as an NDArray, has no unary plus:
    Python's TypeError names no line of the user's) an error at the user's line."""
    if isinstance(value, mx.sym.Symbol):
        raise AutographError(f"{where}: unary + of a tensor: MXNet's arrays (NDArray and "
                             f"Symbol) have no unary plus; write the value itself")
    return +value


def _logical(op, a, b, where):
    """``a and b`` (``op`` the logical and) or ``a or b`` of a tensor ``a``, elementwise as
    Python's on one element: ``b`` where ``a`` is true (``a`` where it is false) for and, ``a``
    where ``a`` is true (else ``b``) for or -- so 0 or 1 for comparisons, and the operands'
    own values otherwise (``(x.sum() > 1) and 3`` is 3 where Python's is, not 1); a Python
    number ``b`` an array of ``a``'s shape."""
    symbolic = isinstance(a, mx.sym.Symbol) or isinstance(b, mx.sym.Symbol)
    if symbolic and not is_tensor(b) and isinstance(b, (bool, int, float)):
        b = mx.sym.ones_like(a) * float(b)
    if symbolic:
        if not (is_tensor(a) and is_tensor(b)):
            raise AutographError(f"{where}: this and/or mixes a tensor with the Python value "
                                 f"{b if is_tensor(a) else a!r}; make both tensors")
        F = mx.sym
    else:
        F = mx.nd
        if not isinstance(b, mx.nd.NDArray):
            b = mx.nd.array([b], ctx=a.context, dtype=a.dtype)
    common = F.broadcast_add(F.zeros_like(a), F.zeros_like(b))
    a, b = F.broadcast_add(a, common), F.broadcast_add(b, common)
    true = a != 0
    return F.where(true, b, a) if op == "broadcast_logical_and" else F.where(true, a, b)
