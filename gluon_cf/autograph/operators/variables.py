"""Variables of converted code at run time: :class:`Undefined` (a variable a branch or the
steps run so far did not assign), reading a variable that may be unbound (:func:`ld`), ``x op=
y`` as plain Python runs it (:func:`augmented`), and the tests of what a value is that every
operator shares."""
import linecache
import operator
import os
import sys

import mxnet as mx
import numpy as np

from ...errors import several_elements
from ..errors import AmbiguousTruthError, AutographError, in_python_types
from .call_results import refusal


class Undefined:
    """The value of a variable an ``if`` did not assign on the branch it took: any use of it
    raises an AutographError naming the variable."""

    def __init__(self, name, where, deleted=False, why=None):
        self._name, self._where, self._deleted, self._why = name, where, deleted, why

    def _fail(self, *args, **kwargs):
        if self._why:
            raise AutographError(f"{self._where}: variable {self._name!r} {self._why}")
        if self._deleted:
            raise AutographError(f"{self._where}: variable {self._name!r} is used after this "
                                 f"del removed it (Python's NameError); assign it again "
                                 f"before using it")
        raise AutographError(f"{self._where}: variable {self._name!r} is used here without a "
                             f"value (the branch taken, or the steps run so far, did not assign "
                             f"it); assign it before this statement or on every path")

    __getattr__ = __call__ = __add__ = __radd__ = __mul__ = __rmul__ = __sub__ = _fail
    __rsub__ = __truediv__ = __rtruediv__ = __getitem__ = __bool__ = __iter__ = _fail
    __neg__ = __pow__ = __rpow__ = __mod__ = __rmod__ = __floordiv__ = __rfloordiv__ = _fail
    __lt__ = __le__ = __gt__ = __ge__ = __hash__ = _fail

    def __repr__(self):
        return f"<undefined {self._name}>"


def deleted(read, name, where):
    """A converted ``del name`` (at ``where``): the variable's new value, an :class:`Undefined`
    whose every use fails; a variable without a value is Python's NameError."""
    value = read()
    if isinstance(value, Undefined):
        value._fail()
    return Undefined(name, where, deleted=True)


def ld(read, name, where):
    """The current value of a variable, or :class:`Undefined` where it has none yet."""
    try:
        return read()
    except NameError:        # unbound local or free variable
        return Undefined(name, where)


def augmented(target, value, op, where=None, shared=None, rewrite=None):
    """A converted ``target op= value`` (NOTE [autograph augmented assignment]): on an NDArray
    in place wherever plain Python's ``+=`` would run (so every alias sees it, as in plain
    Python), out of place where plain MXNet refuses it (autograd recording an array already
    in its graph; shapes that broadcast past the target's); on a Symbol out of place, an
    AutographError at ``where`` if ``shared`` (what else may hold the array) is given,
    advising ``rewrite``; in place on anything else (lists)."""
    if isinstance(target, mx.nd.NDArray):
        if _in_place_runs(target, value, op):
            return getattr(operator, "i" + op)(target, value)
    elif isinstance(target, mx.sym.Symbol) and shared is not None and op in _IN_PLACE:
        raise refusal(where, _SIGNS[op], shared, rewrite)
    if is_tensor(target):
        return binary(target, value, op) if op in BROADCAST else \
            getattr(operator, op)(target, value)
    return getattr(operator, "i" + op.rstrip("_"))(target, value)


# NDArray's in-place operators (``**=``, ``//=`` ... rebind the name, even on an NDArray)
_IN_PLACE = {"add", "sub", "mul", "truediv", "mod"}
_SIGNS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "mod": "%"}


def _in_place_runs(target, value, op):
    """Whether plain ``target op= value`` on an NDArray would change it in place without an
    error: an in-place operator, a writable target, a number or an array that broadcasts to
    the target's shape, and no autograd recording of an array already in its graph (MXNet
    writes the array, then refuses)."""
    if op not in _IN_PLACE or not target.writable:
        return False
    if isinstance(value, mx.nd.NDArray):
        try:
            shape = np.broadcast_shapes(target.shape, value.shape)
        except ValueError:
            return False
        if shape != target.shape or value.dtype != target.dtype or \
                value.context != target.context:
            return False
    elif not isinstance(value, (int, float, np.number, np.bool_)):
        return False
    if not mx.autograd.is_recording():
        return True
    try:
        mx.autograd.get_symbol(target)    # (only an array in autograd's graph has one)
    except mx.MXNetError:
        return True
    return False


# The operators of NDArray-NDArray arithmetic and comparison (NDArray's __add__ ... use them)
BROADCAST = {"add": "broadcast_add", "sub": "broadcast_sub", "mul": "broadcast_mul",
             "truediv": "broadcast_div", "mod": "broadcast_mod", "pow": "broadcast_power",
             "gt": "broadcast_greater", "ge": "broadcast_greater_equal",
             "lt": "broadcast_lesser", "le": "broadcast_lesser_equal",
             "eq": "broadcast_equal", "ne": "broadcast_not_equal"}


_HERE = os.path.dirname(os.path.abspath(__file__))


def binary(left, right, op):
    """``left op right`` in converted code (``op`` a name of :data:`BROADCAST`): of two
    Symbols, MXNet's broadcasting operator, as of two NDArrays; otherwise Python's
    (NOTE [autograph indexing])."""
    if isinstance(left, mx.sym.Symbol) and isinstance(right, mx.sym.Symbol):
        return getattr(mx.sym, BROADCAST[op])(left, right)
    # a bool with a Symbol: the number, as an NDArray takes it (MXNet's Symbol passes
    # scalar="True" to its operator, which refuses it)
    if isinstance(left, mx.sym.Symbol) and isinstance(right, (bool, np.bool_)):
        right = float(right)
    elif isinstance(right, mx.sym.Symbol) and isinstance(left, (bool, np.bool_)):
        left = float(left)
    if isinstance(left, mx.sym.Symbol) and isinstance(right, mx.nd.NDArray) or \
            isinstance(left, mx.nd.NDArray) and isinstance(right, mx.sym.Symbol):
        # (MXNet's "TypeError: type NDArray not supported", naming no line)
        caller = sys._getframe(1)         # converted code runs under the user's lines
        while caller.f_back is not None and caller.f_code.co_filename.startswith(_HERE):
            caller = caller.f_back            # (through augmented, compare_chain)
        line = linecache.getline(caller.f_code.co_filename, caller.f_lineno).strip()
        raise AutographError(
            f"{caller.f_code.co_filename}:{caller.f_lineno}: {line}: this computes with an "
            f"NDArray (mx.nd...) and a tensor of the graph while hybridizing; a graph holds "
            f"Symbols only, so make the constant with F (F.ones((4,)), F.full(...)) or pass "
            f"it to the block as an input or a parameter")
    if isinstance(right, Undefined):
        right._fail()                     # (an NDArray's + would raise MXNet's TypeError)
    try:
        return getattr(operator, op)(left, right)
    except TypeError as err:
        raise in_python_types(err, left, right) from None


def is_tensor(value):
    return isinstance(value, (mx.nd.NDArray, mx.sym.Symbol))


def truth(value, where, what):
    if isinstance(value, mx.nd.NDArray):
        if value.size != 1:
            raise AmbiguousTruthError(several_elements(where, what, value.shape))
        return bool(value.asscalar())
    return value


def holds_symbols(value):
    """Whether a list or tuple holds a Symbol (at any depth)."""
    return any(isinstance(v, mx.sym.Symbol) or isinstance(v, (list, tuple)) and
               holds_symbols(v) for v in value)


def without(items, key, quiet):
    """A converted ``del d[key]`` or ``d.pop(key)`` (``quiet``: ``d.pop(key, default)``) of a
    dict no other name holds: a copy without ``key`` (NOTE [autograph dict items]); a missing
    key is plain Python's KeyError unless ``quiet``."""
    if key not in items and not quiet:
        raise KeyError(key)
    return {k: v for k, v in items.items() if k != key}
