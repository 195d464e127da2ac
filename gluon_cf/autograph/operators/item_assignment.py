"""``x[i] = v`` in converted code (NOTE [autograph item assignment]).

NOTE [autograph item assignment]
    ``name[index] = value`` (a variable's item; not ``self.x[i]`` or ``a[0][1]``) is written
    ``name = item_assigned(value, name, index, ...)`` (``converters/assignments.py``): a Python
    container's item is assigned as Python does (inside a tensor if's branch or loop's step
    being traced, of a container that region made only: NOTE [autograph side effects]); an
    NDArray's in place, as plain Python does, so every alias sees it (and under
    ``autograd.record()`` on an array autograd recorded, MXNet's error, as plain Python's: the
    preallocated ``outputs = F.zeros_like(x); outputs[t] = h`` of a PyTorch port trains
    hybridized only). A Symbol's is the new array (the parts before and after the index along
    its axis and the value, broadcast as an NDArray's assignment broadcasts it, concatenated:
    values and gradients of both), bound to the name, which converts only where nothing else may
    hold the array (the same analysis as ``x += y``'s: a parameter, an alias, a view, a
    container, a closure refuse, naming what holds it: plain Python's in-place change would
    reach them, a graph's value cannot), nor where the name is bound to what a call other than
    an operator's returns (``outputs = helper(x)`` may be ``x``) or given to one (``keep =
    helper(outputs)``, ``self.log(outputs)`` may keep it): ``aliases.given_to_calls``, on the
    code as written, since no call is checked when it runs as an ``op=``'s are (a call after the
    writes, on a later line outside any loop around them, sees their values in both: ``return
    self.proj(outputs)``). The index is one axis's: an int or a slice of step 1 (``outputs[t]``,
    ``outputs[t:t + 1]``, ``outputs[:, t]``; trailing whole axes and an Ellipsis as an
    NDArray reads them: ``outputs[t, :]``, ``outputs[..., t]``), of Python ints, on an array
    whose shape the input shapes give (NOTE [graphs traced for input shapes]); an int past
    the axis is the IndexError an NDArray raises. An int item of a 1-D array is of shape (1,),
    as MXNet 1.x's ``scores[t]`` is (``scores[t] = F.sum(v)``, a (1,) value, converts). A
    value of another dtype than the array's (inferred from the call's inputs' dtypes) is
    refused, saying to cast it (an NDArray casts it; a graph's concat refuses two dtypes).
    Any other index (a tensor, a step, several axes), a value whose shape does not broadcast
    to the part, or an unknown shape is refused at the line."""
import numbers

import mxnet as mx
import numpy as np

from ...hybrid_trace import static_dtypes, static_shape
from ..errors import AutographError, op_name
from .side_effects import effect, in_graph_region, made_here


def item_assigned(value, target, index, where, shared=None, rewrite=None):
    """``target[index] = value`` of converted code, returning what the name is bound to
    after it (NOTE [autograph item assignment])."""
    if isinstance(target, mx.sym.Symbol):
        if in_graph_region():
            # (the name would be a variable the if or loop assigns, which it does not carry)
            effect(where, "assigns an item of a tensor")
        if shared is not None:
            raise AutographError(
                f"{where}: on an NDArray this assignment changes the array in place, and "
                f"{shared}, which would see the change; a graph cannot change an array in "
                f"place (its value would differ from plain Python's). Make the new array "
                f"instead (F.concat of the parts), or keep a copy (F.identity(...)) for what "
                f"must not change")
        return _with_item(mx.sym, target, static_shape(target, where), index, value, where)
    if not made_here(target):
        effect(where, f"assigns an item of {_what(target)}")
    if isinstance(index, mx.sym.Symbol) and isinstance(target, (dict, set)):
        # (Python's TypeError "unhashable type: 'Symbol'" named no line)
        raise AutographError(
            f"{where}: this assigns an item of a {type(target).__name__} keyed by a tensor "
            f"while hybridizing, and MXNet's Symbol has no hash (an NDArray's is its "
            f"identity). Keep the tensors in a list, or key them by a Python value (a name, "
            f"an index)")
    target[index] = value
    return target


def _with_item(F, target, shape, index, value, where):
    """The array ``target`` (of ``shape``) with ``index`` set to ``value``, out of place, by
    ``F``'s operators (``mx.sym``)."""
    if shape is None:
        _refuse(where, "the array's shape is known only when the graph runs (it is not given "
                       "by the input shapes)")
    axis, item = _axis_item(index, len(shape), where)
    size = shape[axis]
    if isinstance(item, slice):
        start, stop, _ = item.indices(size)
        stop = max(stop, start)
        part = shape[:axis] + (stop - start,) + shape[axis + 1:]
    else:
        if not -size <= item < size:
            raise IndexError(f"{where}: index {item} is out of bounds for axis {axis} with "
                             f"size {size}")
        start = item % size
        stop = start + 1
        # (an item of a 1-D NDArray is of shape (1,) in MXNet 1.x: scores[t] = F.sum(v))
        part = shape[:axis] + shape[axis + 1:] or (1,)
    if stop == start:
        if isinstance(value, (mx.sym.Symbol, mx.nd.NDArray)):
            # (MXNet's NDArray raises "Shape inconsistent" for an array into no row)
            _refuse(where, "its slice keeps nothing of the axis, where an NDArray's "
                           "assignment of an array raises MXNet's shape error")
        return target         # (a number into an empty part: nothing assigned)
    if isinstance(value, (numbers.Number, np.number)) and not isinstance(value, bool):
        # (a number fills the part, of the array's dtype; ones_like of a slice, whose
        # gradient is no one's, crashed MXNet's backward eagerly: the slice of ones_like)
        block = F.slice_axis(F.ones_like(target, **_named(F, where)), axis=axis,
                             begin=start, end=stop, **_named(F, where)) * value
    else:
        block = _broadcast(F, value, part, where)
        dtypes = static_dtypes([target, value])
        if dtypes is not None and np.dtype(dtypes[0]) != np.dtype(dtypes[1]):
            # (an NDArray casts the value to its dtype; a graph's concat refuses two)
            _refuse(where, f"its value is {np.dtype(dtypes[1]).name} and the array "
                           f"{np.dtype(dtypes[0]).name} (an NDArray casts the value: write "
                           f"F.cast(value, '{np.dtype(dtypes[0]).name}'))")
        if not isinstance(item, slice) and len(shape) > 1:
            block = F.expand_dims(block, axis=axis, **_named(F, where))
    pieces = []
    if start > 0:
        pieces.append(F.slice_axis(target, axis=axis, begin=0, end=start, **_named(F, where)))
    pieces.append(block)
    if stop < size:
        pieces.append(F.slice_axis(target, axis=axis, begin=stop, end=size,
                                   **_named(F, where)))
    if len(pieces) == 1:
        return F.identity(block, **_named(F, where))
    return F.concat(*pieces, dim=axis, **_named(F, where))


def _named(F, where):
    return {"name": op_name(where, "item_assign")} if F is mx.sym else {}


def _axis_item(index, ndim, where):
    """``(axis, int or slice)`` of an index that selects along one axis: ``i``, ``a:b``,
    ``(:, ..., i)``."""
    parts = index if isinstance(index, tuple) else (index,)
    given = len(parts) - sum(p is Ellipsis for p in parts)
    if given > ndim:
        # (before the trailing ':' are dropped: an NDArray's scores[t, :] of a 1-D array
        # raises, it is no scores[t])
        raise IndexError(f"{where}: too many indices ({given}) for array with {ndim} "
                         f"dimensions")
    if sum(p is Ellipsis for p in parts) == 1 and len(parts) <= ndim + 1:
        # (x[..., t] is x[:, :, t]; x[t, ...] is x[t])
        at = next(k for k, p in enumerate(parts) if p is Ellipsis)
        parts = parts[:at] + (slice(None),) * (ndim + 1 - len(parts)) + parts[at + 1:]
    while len(parts) > 1 and isinstance(parts[-1], slice) and parts[-1] == slice(None):
        parts = parts[:-1]        # (x[t, :] = h is x[t] = h: the trailing axes whole)
    if not parts or len(parts) > ndim:
        _refuse(where, "its index is not one int or slice of one axis")
    *before, item = parts
    if any(not (isinstance(p, slice) and p == slice(None)) for p in before):
        _refuse(where, "its index selects along more than one axis (write one axis's part, "
                       "the others as ':')")
    if isinstance(item, slice):
        if item.step not in (None, 1) or any(
                b is not None and not isinstance(b, numbers.Integral) or isinstance(b, bool)
                for b in (item.start, item.stop)):
            _refuse(where, "its slice is not of Python ints with step 1")
    elif not isinstance(item, numbers.Integral) or isinstance(item, (bool, np.bool_)):
        _refuse(where, f"its index is {_what(item)}, not a Python int or slice (for an index "
                       f"only the graph knows, write F.one_hot(i, n) * v + x * (1 - "
                       f"F.one_hot(i, n)) with the shapes lined up)")
    return len(before), item


def _what(item):
    if isinstance(item, (mx.sym.Symbol, mx.nd.NDArray)):
        return "a tensor"
    return f"a {type(item).__name__}"


def _broadcast(F, value, part, where):
    """The array ``value`` as an array of shape ``part``, as an NDArray's item assignment
    broadcasts it."""
    if not isinstance(value, mx.sym.Symbol):
        _refuse(where, f"its value is {_what(value)}" + (
            " made by mx.nd (write F's operators)" if isinstance(value, mx.nd.NDArray) else ""))
    shape = static_shape(value, where) if F is mx.sym else value.shape
    if shape is None:
        _refuse(where, "the value's shape is known only when the graph runs")
    if tuple(shape) == tuple(part):
        return value
    try:
        broadcast = np.broadcast_shapes(tuple(shape), tuple(part))
    except ValueError:
        broadcast = None
    if broadcast != tuple(part):
        _refuse(where, f"its value of shape {tuple(shape)} does not broadcast to the part of "
                       f"shape {tuple(part)} it writes (an NDArray raises ValueError)")
    padded = (1,) * (len(part) - len(shape)) + tuple(shape)
    if padded != tuple(shape):
        value = F.reshape(value, shape=padded, **_named(F, where))
    return F.broadcast_to(value, shape=tuple(part), **_named(F, where))


def _refuse(where, why):
    raise AutographError(f"{where}: this assigns an item of a tensor while hybridizing, but "
                         f"{why}; a graph's item assignment converts for one int or slice "
                         f"(step 1) of one axis, of Python ints, on an array whose shape the "
                         f"input shapes give (NOTE [autograph item assignment])")
