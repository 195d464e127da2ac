"""Indexing and attributes of tensors at run time: ``x[i]``, ``x[a:b, 0]`` and ``x.T`` on a
Symbol computed as on an NDArray; what a Symbol cannot have (``x.shape``, ``x.context``,
item assignment, indexing by a tensor) refused at the user's line; and properties of user
classes read through their converted getter.

NOTE [autograph indexing]
    MXNet's ``Symbol.__getitem__`` selects an *output*: ``x[0]`` of a one-output Symbol is
    the whole of ``x`` (an NDArray's ``x[0]`` is its first row), ``x[1]`` a bare IndexError,
    ``x[1:]`` a group of no outputs, ``x[:, 0]`` a TypeError. So converted code reads every
    subscript through :func:`subscript`: on a one-output Symbol, an index of ints, slices
    and one ``...`` is computed as the NDArray's basic indexing is, by ``F.slice`` (leading
    axes, any step) and ``slice_axis`` (axes after ``...``, step 1), then ``squeeze`` of the
    axes an int selects (MXNet's squeeze keeps one axis of a scalar, as an NDArray's
    ``x[0]`` of a vector is ``(1,)``). Slices clip as an NDArray's do; a slice whose bounds
    alone say it keeps nothing (``x[2:2]``) is refused (MXNet 1.x graphs cannot hold a
    zero-size axis). An int past the axis fails MXNet's shape inference, which names only
    the node (named after the user's line): that error is turned into the IndexError eager
    code raises, at the user's line, on every call (``gluon_cf.errors.index_error_of``,
    called by ``hybrid.py``; the failed CachedOp is dropped). ``None`` (a new axis), a step
    after ``...``, and an index that is itself a tensor, list or array (advanced indexing)
    are refused at the user's line with what to write (``F.expand_dims``, ``F.take``, ``F.pick``,
    ``F.gather_nd``). The outputs of a multi-output Symbol (``F.split``'s) are selected as they
    were. Item assignment (``x[i] = v``) on a Symbol is refused (a graph's values cannot be changed
    in place: ``F.where`` or ``F.concat`` make the new value); ``x += v`` on a tensor is
    ``x = x + v`` (NOTE [autograph]).

    Arithmetic and comparisons of two Symbols in converted code (``a + b``, ``a > b`` ...)
    are MXNet's ``broadcast_*`` operators (:func:`binary`), as an NDArray's are: a Symbol's
    own ``+`` is elementwise and fails on shapes the eager code broadcasts ((3, 2) + (2,)),
    with a shape-inference error naming no line of the user's. A bool with a Symbol is its
    number, as an NDArray takes it (a Symbol hands MXNet ``scalar="True"``); an NDArray
    with a Symbol (``mx.nd.ones`` written in ``hybrid_forward``) is refused at the line
    (MXNet's TypeError names none); a chained comparison ``a < s < b`` is Python's ``and`` of
    its comparisons (``logical.compare_chain``, NOTE [autograph and/or]), each operand
    evaluated once, where Python evaluates it.

    Attributes only an NDArray has (``shape``, ``ndim``, ``size``, ``dtype``, ``context``,
    ``ctx``, ``grad``, ``stype``, ``asnumpy``, ``asscalar``, ``attach_grad`` ...) read on a
    Symbol are refused at the user's line, saying which F operator gives the value in a
    graph (a Symbol has no shape until the block is bound), except ``shape`` and ``ndim``
    where the shapes of the inputs a block's graph is traced for give them (NOTE [graphs
    traced for input shapes] in ``gluon_cf/hybrid.py``), and so are calls of those
    methods (``x.sum().asscalar()``: MXNet's NotImplementedForSymbol named no line), and
    ``getattr(x, "dtype", None)`` reads them so (``hasattr`` of them is True, as eagerly);
    ``x.T`` on a Symbol is ``transpose`` (what ``NDArray.T`` computes), ``x.detach()``
    ``BlockGrad`` (an NDArray's ``detach`` stops gradients as ``F.stop_gradient`` does). A property
    of a user class (not library code) read by converted code runs its getter converted
    (NOTE [autograph calls]).
"""
import builtins
import math
import numbers
import os
import sys
import types
from typing import List, Optional

import mxnet as mx

from ...hybrid_trace import autograd_mode_read, graph_traced, static_dtype, static_shape
from ..errors import AutographError, op_name
from .caught_errors import checked_ints
from .py_builtins import one_output, python_type
from .variables import BROADCAST, binary

__all__ = ["attribute", "attribute_builtin", "autograd_mode", "binary", "BROADCAST",
           "item_target", "py_slice", "subscript"]

py_slice = builtins.slice      # (converted code's a:b, whatever the user's ``slice`` is)

# Attributes of an NDArray that a Symbol lacks or refuses, and what to write in a graph
NDARRAY_ONLY = {
    "shape": "F.shape_array(x) (an array), or ops that take shapes from arrays: "
             "F.zeros_like, F.reshape_like, F.broadcast_like, F.slice_like, reshape with 0 "
             "and -1",
    "ndim": "ops that do not need it (reshape with 0 and -1, F.expand_dims)",
    "size": "F.size_array(x)",
    "dtype": "x.dtype read before the loop (or outside the recursive function, passed to "
             "it), where the inputs the graph is traced for give it, ops that keep the "
             "input's type (F.zeros_like, F.cast), or pass the dtype to the block",
    "context": "F.zeros_like(x) and F.ones_like(x) (made where x is) instead of ctx=",
    "ctx": "F.zeros_like(x) and F.ones_like(x) (made where x is) instead of ctx=",
    "grad": "autograd outside the block",
    "stype": "F.cast_storage",
    "asnumpy": "F ops on the array (its values exist only when the graph runs)",
    "asscalar": "F ops on the array, and an if or while on it (converted to cond and "
                "while_loop)",
    "attach_grad": "autograd outside the block",
    "copyto": "F.identity(x)",
    "tostype": "F.cast_storage",
    "wait_to_read": "nothing (a graph has no asynchronous values to wait for)",
    "copy": "F.identity(x)",
    "as_in_context": "nothing (a graph runs where its inputs are), or F.zeros_like(x) and "
                     "F.ones_like(x) for new arrays",
    "backward": "autograd outside the block",
}


def attribute(value, name, where):
    """``value.name`` read by converted code (NOTE [autograph indexing]; a user property is
    read through ``impl.conversion.attribute``, which calls this for anything else)."""
    if isinstance(value, mx.sym.Symbol):
        if name in ("T", "detach") and not one_output(value):
            # (nnvm's "Keyword Argument data is a tuple, single value is required", no line)
            count = len(value.list_outputs())
            raise AutographError(
                f"{where}: .{name} of a value of {count} outputs (as F.split's with "
                f"num_outputs): eagerly a list, which has no {name}; take it of each item "
                f"([v.{name}{'()' if name == 'detach' else ''} for v in ...])")
        if name == "T":
            return mx.sym.transpose(value, name=op_name(where, "T"))
        if name == "detach":
            # (MXNet's Symbol.detach raises NotImplementedForSymbol, naming no line)
            return lambda: mx.sym.BlockGrad(value, name=op_name(where, "detach"))
        if name in ("shape", "ndim", "size"):
            # while a block's graph is traced: the shape the traced inputs give it, the graph
            # then one for those input shapes (NOTE [graphs traced for input shapes]); .size
            # is NDArray's product of the shape
            shape = static_shape(value, where)
            if shape is not None:
                return shape if name == "shape" else len(shape) if name == "ndim" else \
                    math.prod(shape)
            raise AutographError(
                f"{where}: .{name} of a tensor while hybridizing, whose shape the inputs the "
                f"block's graph is traced for do not give (a value inside the body of a loop "
                f"or if on a tensor or of a recursive function, or of a size known only when "
                f"the graph runs, as a "
                f"boolean_mask's); read it before the loop or if (n = x.shape[0]), or use "
                f"{NDARRAY_ONLY[name]}")
        dtype = static_dtype(value, where) if name == "dtype" else None
        if dtype is not None:       # (x.dtype(2): NOTE [graphs traced for input shapes])
            return dtype
        if name == "dtype" and graph_traced():
            raise AutographError(
                f"{where}: .dtype of a tensor while hybridizing, whose dtype the inputs the "
                f"block's graph is traced for do not give (a value inside the body of a loop "
                f"on a tensor or of a recursive function, whose variables' dtypes are known "
                f"only when the graph runs); use {NDARRAY_ONLY[name]}")
        instead = NDARRAY_ONLY.get(name)
        if instead is not None:
            raise AutographError(
                f"{where}: .{name} of a tensor while hybridizing: a Symbol has no {name} "
                f"(its values and shape exist only when the graph runs); use {instead}")
    if name == "__class__" and python_type(value) is not None:
        return python_type(value)           # NOTE [a collected list's type]
    if name == "f_locals" and isinstance(value, types.FrameType):
        _no_converted_callers_variables(value, where)
    return getattr(value, name)


def attribute_builtin(fn, where):
    """``getattr`` or ``hasattr`` (``fn``, what the name holds) called by converted code: on
    a Symbol, an attribute an NDArray has and a Symbol lacks is read as ``x.dtype`` is
    (:func:`attribute`), ``hasattr`` True (round 31ag review: ``getattr(x, "dtype", None)``
    was None and ``hasattr(x, "shape")`` False hybridized, what eager code never sees)."""
    if fn is not builtins.getattr and fn is not builtins.hasattr:
        return fn

    def read(value, name, *default):
        if one_output(value) and isinstance(name, str) and not hasattr(value, name) and \
                hasattr(mx.nd.NDArray, name):     # (F.split's outputs: a list eagerly)
            return True if fn is builtins.hasattr else attribute(value, name, where)
        return fn(value, name, *default)
    return read


_AUTOGRAPH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _no_converted_callers_variables(frame, where):
    """``frame.f_locals`` read by converted code, of another function's frame: refused when
    that function is converted code (NOTE [a frame's dict shares every variable]: a helper's
    ``sys._getframe(1).f_locals["g"]`` cannot be seen where its caller is converted, which
    keeps a variable read by name only where its own code reads it so)."""
    reader: Optional[types.FrameType] = sys._getframe(1)
    while reader is not None and reader.f_code.co_filename.startswith(_AUTOGRAPH):
        reader = reader.f_back            # (through impl.conversion.attribute)
    if frame is reader or "__ag__" not in frame.f_code.co_names:
        return                            # (its own: analysed where it is converted)
    raise AutographError(
        f"{where}: this reads the variables of {frame.f_code.co_name!r} (at "
        f"{frame.f_code.co_filename}:{frame.f_lineno}) through its frame's f_locals; "
        f"gluon_cf.autograph converts that function, and converted code keeps a variable as "
        f"written only where its own code reads it (a variable a tensor loop or if assigns "
        f"may still hold its value before it). Give the values to this function as arguments")


def autograd_mode(fn, where):
    """``fn`` called by converted code (at ``where``, made text only when it is one):
    ``autograd.is_training``/``is_recording`` mark the block's graph being traced as one for
    the call's autograd mode (NOTE [graphs traced for input shapes] in
    ``gluon_cf/hybrid.py``); True for them, None for anything else."""
    if fn is mx.autograd.is_training or fn is mx.autograd.is_recording:
        autograd_mode_read(str(where))
        return True
    if fn in _AUTOGRAD_SCOPES and graph_traced():
        # See NOTE [autograd scopes in a graph]
        raise AutographError(
            f"{where}: autograd.{fn.__name__}() while hybridizing: a block's graph is "
            f"recorded and run as one, in the autograd mode of its call, so the scope would "
            f"change nothing in it (eagerly what it encloses "
            f"{_AUTOGRAD_SCOPES[fn]}); write F.stop_gradient(v) for what should get no "
            f"gradient, and leave the mode of layers (Dropout, BatchNorm) to the call")
    return None


# NOTE [autograd scopes in a graph]
#     ``with autograd.pause():`` (PyTorch's ``torch.no_grad()``), ``predict_mode()``,
#     ``train_mode()`` or ``record()`` in converted code change what eager code computes: no
#     gradient for what ``pause`` encloses, Dropout off under ``predict_mode``. A graph being
#     traced is recorded and run as one operator in its call's mode (MXNet's own hybridized
#     blocks ignore such a scope), so the block would silently differ hybridized from eager,
#     in gradients or values: entering one while a hybridized block's graph is traced is
#     refused (a block not hybridized traces its graph only to infer the shapes of deferred
#     parameters, then runs its code on arrays: its scopes are eager code's).
_AUTOGRAD_SCOPES = {mx.autograd.pause: "is not recorded and runs in predict mode",
                    mx.autograd.predict_mode: "runs in predict mode",
                    mx.autograd.train_mode: "runs in training mode",
                    mx.autograd.record: "is recorded, in training mode by default"}


def subscript(value, index, where):
    """``value[index]`` read by converted code (NOTE [autograph indexing])."""
    if not one_output(value):
        if isinstance(value, (list, tuple)) and isinstance(index, mx.sym.Symbol):
            # (Python's TypeError 'list indices must be integers or slices, not Symbol',
            # with no line: eagerly an NDArray of one element indexes the list, issue 24)
            raise AutographError(
                f"{where}: this indexes a Python {type(value).__name__} with a tensor; while "
                f"hybridizing its value exists only when the graph runs, so it cannot pick an "
                f"item. Stack the items and pick one by the tensor: F.take(F.stack(*items), "
                f"index)")
        return value[index]
    items = index if isinstance(index, tuple) else (index,)
    items = tuple(int(i) if isinstance(i, numbers.Integral) and not isinstance(i, bool) else i
                  for i in items)                      # (numpy's ints index as ints)
    for item in items:
        if isinstance(item, bool) or not (isinstance(item, (numbers.Integral, builtins.slice))
                                          or item is Ellipsis or item is None):
            raise AutographError(
                f"{where}: this indexes a tensor with {_described(item)} (advanced indexing); "
                f"while hybridizing "
                f"only ints, slices and ... index a tensor as Python would. Use F.take(x, "
                f"indices, axis=...), F.pick, F.gather_nd or F.boolean_mask")
        if isinstance(item, builtins.slice) and not all(
                part is None or isinstance(part, numbers.Integral) and not isinstance(part, bool)
                for part in (item.start, item.stop, item.step)):
            raise AutographError(
                f"{where}: this slices a tensor with bounds that are not ints (its "
                f"{_not_ints(item)}); "
                f"while hybridizing use F.slice_like, F.take or F.contrib.index_array")
        if item is None:
            raise AutographError(
                f"{where}: this indexes a tensor with None (a new axis); write "
                f"F.expand_dims(x, axis=...) instead")
        if isinstance(item, builtins.slice) and _empty(item):
            raise AutographError(
                f"{where}: this slice of a tensor ({_text(item)}) keeps nothing; MXNet 1.x "
                f"graphs cannot hold an array with an axis of size 0 (0 means an unknown "
                f"size there), so leave the empty part out of the computation")
    if sum(item is Ellipsis for item in items) > 1:
        raise IndexError(f"{where}: an index can only have a single ellipsis ('...')")
    cut = items.index(Ellipsis) if Ellipsis in items else len(items)
    leading, trailing = items[:cut], items[cut + 1:]
    checked_ints(value, leading, trailing, where)   # (inside a try catching IndexError)
    result, squeezed = value, []
    if leading:
        begin: List[Optional[int]] = []
        end: List[Optional[int]] = []
        step: List[Optional[int]] = []
        for axis, item in enumerate(leading):
            if isinstance(item, int):
                begin.append(item)
                end.append(None if item == -1 else item + 1)
                step.append(None)
                squeezed.append(axis)
            else:
                begin.append(item.start)
                end.append(item.stop)
                step.append(item.step)
        if any(b is not None for b in begin + end + step):
            result = mx.sym.slice(result, begin=tuple(begin), end=tuple(end), step=tuple(step),
                                  name=op_name(where, "index"))
    for offset, item in enumerate(trailing):
        axis = offset - len(trailing)
        if isinstance(item, int):
            result = mx.sym.slice_axis(result, axis=axis, begin=item,
                                       end=None if item == -1 else item + 1,
                                       name=op_name(where, "index"))
            squeezed.append(axis)
        elif item.step not in (None, 1):
            raise AutographError(
                f"{where}: this slices a tensor with a step after '...'; while hybridizing "
                f"the axis must be counted from the front (x[:, ::2], not x[..., ::2])")
        elif item.start is not None or item.stop is not None:
            result = mx.sym.slice_axis(result, axis=axis, begin=item.start or 0,
                                       end=item.stop, name=op_name(where, "index"))
    if squeezed:
        result = mx.sym.squeeze(result, axis=tuple(squeezed),
                                name=op_name(where, "index"))
    return result


def item_target(value, where):
    """The object of an item assignment or deletion in converted code (``value[i] = v``): a
    Symbol is refused (NOTE [autograph indexing])."""
    if isinstance(value, mx.sym.Symbol):
        raise AutographError(
            f"{where}: this assigns items of a tensor while hybridizing; a graph's values "
            f"cannot change in place. Make the new value instead (F.where(mask, new, x), "
            f"F.concat of the parts, or F.one_hot(i, n) * v + x * (1 - F.one_hot(i, n)))")
    return value


def _empty(item):
    """Whether the slice ``item`` keeps nothing of any axis (known from its bounds alone:
    both of one sign, the stop not past the start in the step's direction)."""
    start, stop, step = item.start, item.stop, item.step or 1
    if start is None or stop is None or (start < 0) != (stop < 0):
        return False
    return stop <= start if step > 0 else stop >= start


def _text(item):
    return ":".join("" if part is None else str(part)
                    for part in (item.start, item.stop) + ((item.step,) if item.step else ()))


def _not_ints(item):
    """``start is a tensor``, ``stop is a float`` ...: the bounds of a slice that are not ints."""
    return " and ".join(f"{key} is {_described(part)}" for key, part in
                        (("start", item.start), ("stop", item.stop), ("step", item.step))
                        if part is not None and not isinstance(part, numbers.Integral))


def _described(item):
    if isinstance(item, (mx.sym.Symbol, mx.nd.NDArray)):
        return "a tensor"
    return f"a {type(item).__name__}"
