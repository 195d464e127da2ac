"""Checks and helpers shared by the op modules (user-facing errors live here, once)."""
import numpy as np
import mxnet as mx

from .. import rowwise
from ..graph import decode
from ..executor import Frame, Parallel


def check_callable(op, **funcs):
    for what, fn in funcs.items():
        if not callable(fn):
            raise TypeError("gluon_cf.%s: %s must be callable, got %s"
                            % (op, what, type(fn).__name__))


def mode_of(op, arrays, what):
    """'symbol' or 'ndarray' for a flat list of arrays; TypeError on a mix or on other types."""
    kinds = set()
    for a in arrays:
        if isinstance(a, mx.sym.Symbol):
            kinds.add("symbol")
        elif isinstance(a, mx.nd.NDArray):
            kinds.add("ndarray")
        else:
            raise TypeError("gluon_cf.%s: %s must be NDArrays or Symbols, got %s"
                            % (op, what, type(a).__name__))
    if len(kinds) > 1:
        raise TypeError("gluon_cf.%s: %s mix NDArrays and Symbols" % (op, what))
    return kinds.pop() if kinds else None


def check_scalar_pred(op, what, shape):
    """A predicate must hold exactly one element (one per row when checking a batch)."""
    rows = rowwise.rows_being_checked()   # checking a batch for the batching executor
    if shape is not None and rows and shape[0] == rows and int(np.prod(shape[1:])) == 1:
        return
    if shape is not None and int(np.prod(shape)) != 1:
        raise ValueError("gluon_cf.%s: %s must have exactly one element, got shape %s"
                         % (op, what, tuple(shape)))


def pred_value(op, what, pred):
    """Python bool of an eager predicate (NDArray of one element, or a Python/numpy scalar)."""
    if isinstance(pred, mx.nd.NDArray):
        check_scalar_pred(op, what, pred.shape)
        return bool(pred.asscalar())
    if isinstance(pred, (bool, int, float, np.bool_, np.number)):
        return bool(pred)
    raise TypeError("gluon_cf.%s: %s must be a one-element NDArray/Symbol or a Python scalar, "
                    "got %s" % (op, what, type(pred).__name__))


def mismatch(op, what, left_name, left, right_name, right):
    """ValueError listing two sides that should agree, position by position."""
    lines = ["gluon_cf.%s: %s differ:" % (op, what)]
    for i in range(max(len(left), len(right))):
        a = left[i] if i < len(left) else "<missing>"
        b = right[i] if i < len(right) else "<missing>"
        mark = "" if a == b else "   <-- differs"
        lines.append("  output %d: %s %s, %s %s%s" % (i, left_name, a, right_name, b, mark))
    return ValueError("\n".join(lines))


def check_same_dtypes(op, what, before_name, before, after_name, after):
    """ValueError (a ``mismatch``) when known dtypes of loop state differ before and after."""
    before = [dtype_name(t) for t in before]
    after = [dtype_name(t) for t in after]
    if None not in before and None not in after and before != after:
        raise mismatch(op, what, before_name, before, after_name, after)


def dtype_name(t):
    return np.dtype(t).name if t is not None else None


def per_row(forward, node, inputs, out_shapes, ctx):
    """Batching rule of the loops: run the loop once per row of the batched inputs, all rows as
    one Parallel request (so recursive calls inside batch across rows), then concatenate.

    NOTE [batching] (``recursion/batching.py``): a batched value holds one row per invocation.
    """
    works = []
    for r in range(ctx.rows):
        row = [x[r:r + 1] if ctx.batched(i) else x
               for i, x in enumerate(inputs)]
        works.append(forward(node, row, out_shapes, Frame(ctx.recursion, 1, ctx.flags, ctx.depth)))
    results = yield Parallel(works)
    return [mx.nd.concat(*column, dim=0) for column in zip(*results)]


def loop_batching_rule(rule, node, in_flags, in_shapes, used):
    """Batching rule of the loops (NOTE [row-wise rules]): they run once per row
    (:func:`per_row`) and their rows are concatenated, which is right when each row's used
    outputs hold exactly one row."""
    one_row = [(1,) + tuple(s[1:]) if f else tuple(s) for s, f in zip(in_shapes, in_flags)]
    try:
        _, outs = rule.infer_shape(decode(rule.kind, node["attrs"]["spec"]), one_row)
    except Exception as err:  # noqa: BLE001
        raise rowwise.Rejected(node, "cannot infer its shapes for one row (%s)" % err,
                               rowwise.HINT_UNKNOWN) from None
    for k, shape in enumerate(outs):
        if used[k] and (shape is None or shape[0] != 1):
            raise rowwise.Rejected(
                node, "returns %s for one invocation, not one row, so rows of several "
                "invocations cannot be told apart" % (shape,),
                "Return per-invocation values with a leading axis of 1 from the loop (e.g. the "
                "final states), or reshape its outputs to (1, ...)")
