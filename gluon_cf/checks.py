"""Checks of user input shared by every op, recursion included (user-facing errors, once)."""
import inspect

import numpy as np
import mxnet as mx

from . import registry, rowwise
from ._structure import describe, flatten
from .errors import ZeroSizeError
from .operators import user_location


def check_callable(op, **funcs):
    for what, fn in funcs.items():
        # (a Symbol is callable, to compose graphs: cond(p, x, ...) called x() and failed far
        # away, "two different outer values are both named 'x'"; an NDArray is refused here;
        # a symbolic cond's Symbol branch is the branch returning it, as MXNet's, before this)
        if isinstance(fn, mx.sym.Symbol) and op in ("foreach", "while_loop"):
            raise SymbolAsFunctionError(
                "%s: %s must be callable, got Symbol: MXNet 1.9.1's %s calls a Symbol with "
                "the loop's values, composing them into it, which fails (a TypeError for a "
                "list of values, an MXNetError for a graph of operators) or gives a graph "
                "that cannot be bound; pass a function of the loop's values"
                % (op_at(op), what, op))
        if not callable(fn) or isinstance(fn, mx.sym.Symbol):
            raise TypeError("%s: %s must be callable, got %s%s"
                            % (op_at(op), what, type(fn).__name__,
                               "; pass a function (lambda: x for a branch returning x)"
                               if isinstance(fn, (mx.sym.Symbol, mx.nd.NDArray)) else ""))


def check_arity(op, arguments, **funcs):
    """A user's function that cannot take the positional ``arguments`` (names) the op calls it
    with: the TypeError calling it raises (MXNet's ops raise it, "<lambda>() takes 1
    positional argument but 2 were given", with no line of the user's), at the user's call
    and naming the function's role, before anything is traced or run."""
    for what, fn in funcs.items():
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):   # (no signature, a builtin's: its call tells)
            continue
        try:
            signature.bind(*arguments)
        except TypeError as err:
            raise TypeError("%s: %s cannot be called as %s(%s): %s"
                            % (op_at(op), what, what, ", ".join(arguments), err)) from None


class SymbolAsFunctionError(TypeError, ValueError, mx.MXNetError):
    """A Symbol given for a loop's function (foreach's body, while_loop's cond or func). MXNet
    1.9.1's loops call it with the loop's values, and calling a Symbol composes them into it:
    a TypeError when a value is a list, an MXNetError when the Symbol is a graph of operators
    ("General composition only support kwargs for now") or a variable given several values,
    a ValueError unpacking a variable given one value as func, and as cond a graph whose
    inputs cannot be bound (a variable fed by the loop variable). No Symbol makes a working
    loop, so gluon_cf refuses it at the call with an error of each of these types."""


class ArrayTypeError(TypeError, AssertionError):
    """A value that must be arrays (an op's data, states, what a branch returns) is not, or
    mixes NDArrays and Symbols: a TypeError, and the AssertionError MXNet 1.9.1's own ops
    raise there ("must be (nested) list of Symbol")."""


class ScalarDataError(IndexError, mx.MXNetError):
    """foreach data of no axis (a 0-d array, shape ()): there is no axis 0 to loop over. An
    IndexError, as MXNet 1.9.1's eager foreach raises ("tuple index out of range"), and the
    MXNetError its hybridized foreach raises."""


def check_data_has_axis(op, shapes, where):
    """Refuse 0-d data of ``op`` at the user's line ``where`` (no axis 0 to loop over)."""
    for k, shape in enumerate(shapes):
        if isinstance(shape, tuple) and not shape:
            raise ScalarDataError(
                "gluon_cf.%s%s: data[%d] is a 0-d array (shape ()), which has no axis 0 to "
                "loop over; give it one (x.reshape((1,)) for a single step)"
                % (op, " at %s" % where if where else "", k))


class NameClashError(ValueError, AssertionError):
    """Two different values of one name read by a body (computed by two operators, or one
    computed and a variable): a ValueError, and the AssertionError of MXNet 1.9.1's foreach
    and while_loop ("The inputs of the subgraph don't have unique names")."""


class StructureError(ValueError, AssertionError):
    """A step returned states structured otherwise than the states it was given: a ValueError
    (MXNet's ``while_loop`` raises one), and the AssertionError of MXNet's ``foreach``."""


class PairError(TypeError, ValueError):
    """A step function returned something other than a pair: a TypeError, and the ValueError
    MXNet 1.9.1's ops raise unpacking it ("not enough values to unpack")."""


class ArgumentValueError(ValueError, mx.MXNetError):
    """An argument MXNet 1.9.1's operator refuses itself (a ``cond``'s pred of several
    outputs, ``max_iterations`` below 1): a ValueError, and the MXNetError MXNet raises."""


def flatten_argument(op, value, what):
    """``flatten`` of an argument of a public op; an ArrayTypeError at the user's call."""
    try:
        return flatten(value, "gluon_cf." + op, what)
    except TypeError as err:
        raise ArrayTypeError(str(err).replace("gluon_cf.%s:" % op, op_at(op) + ":", 1)) \
            from None


def mode_of(op, arrays, what):
    """'symbol' or 'ndarray' for a flat list of arrays; TypeError on a mix or on other types."""
    kinds = set()
    for a in arrays:
        if isinstance(a, mx.sym.Symbol):
            kinds.add("symbol")
        elif isinstance(a, mx.nd.NDArray):
            kinds.add("ndarray")
        else:
            raise ArrayTypeError("%s: %s must be NDArrays or Symbols, got %s"
                                 % (op_at(op), what, type(a).__name__))
    if len(kinds) > 1:
        raise ArrayTypeError("%s: %s mix NDArrays and Symbols" % (op_at(op), what))
    return kinds.pop() if kinds else None


class PredShapeError(ValueError, mx.MXNetError):
    """A predicate of more than one element: a ValueError, and the MXNetError MXNet 1.9.1's
    symbolic ops raise for it when they run (its eager ones: "The current array is not a
    scalar", a ValueError)."""


# NOTE [predicates of many elements]
#     MXNet 1.9.1's symbolic cond and while_loop check that a predicate holds one element when
#     they run (subgraph_op_common.cc: "Check failed: a.shape().Size() == 1U"), never in shape
#     inference: ``infer_shape`` of such a symbol answers (None, None, None) with its "Cannot
#     decide shape" warning, ``infer_shape_partial`` leaves the outputs unknown. gluon_cf's
#     shape rules do the same (the outputs unknown, nothing raised), and the node's forward
#     raises PredShapeError naming the node and the user's line (``pred_value``).


def scalar_pred_shape(shape):
    """Whether a predicate of ``shape`` may hold exactly one element (one per row when
    checking a batch): unknown and run-time shapes may (checked when it runs)."""
    if shape is None or registry.is_dynamic(shape):   # checked when it runs (pred_value)
        return True
    rows = rowwise.rows_being_checked()   # checking a batch for the batching executor
    if rows and shape[0] == rows and int(np.prod(shape[1:])) == 1:
        return True
    return int(np.prod(shape)) == 1


def pred_shape_error(op, what, shape):
    """The PredShapeError of a predicate of ``shape`` that cannot hold exactly one element
    (one per row when checking a batch), else None."""
    if scalar_pred_shape(shape):
        return None
    error = PredShapeError("gluon_cf.%s: %s must have exactly one element, got shape %s"
                           % (op, what, tuple(shape)))
    error.shape = tuple(shape)   # (an autograph if's message says it: node.name_node)
    return error


def check_scalar_pred(op, what, shape):
    """A predicate must hold exactly one element (one per row when checking a batch)."""
    error = pred_shape_error(op, what, shape)
    if error is not None:
        raise error


def pred_value(op, what, pred, eager=False):
    """Python bool of an eager predicate (NDArray of one element, or a Python/numpy scalar).
    ``eager``: the op runs eagerly, from the user's call, which its errors name (there is no
    graph node to name)."""
    if isinstance(pred, mx.nd.NDArray):
        try:
            check_scalar_pred(op, what, pred.shape)
        except ValueError as err:
            if not eager:
                raise
            raise ValueError(str(err).replace("gluon_cf.%s:" % op, op_at(op) + ":", 1)) \
                from None
        return bool(pred.asscalar())
    if isinstance(pred, (bool, int, float, np.bool_, np.number)) or \
            isinstance(pred, np.ndarray) and pred.size == 1:   # (MXNet's eager ops: bool(pred))
        return bool(pred)
    # MXNet's eager ops take bool() of anything else: a list of one array, None, a string are
    # always true or false whatever the values, so they are refused.
    raise PredValueError("%s: %s must be a one-element NDArray/Symbol or a Python scalar, got "
                         "%s" % (op_at(op) if eager else "gluon_cf." + op, what,
                                 describe_pred(pred)))


def describe_pred(pred):
    if isinstance(pred, np.ndarray):
        return "a numpy array of shape %s" % (pred.shape,)
    if isinstance(pred, (list, tuple)):
        return "a %s of %d item%s" % (type(pred).__name__, len(pred), "" if len(pred) == 1 else "s")
    return type(pred).__name__


class PredValueError(TypeError, ValueError):
    """A predicate (a ``while_loop``'s ``cond`` result, a ``cond``'s ``pred``) that is none:
    a ValueError, the type MXNet 1.9.1 raises ("Return of cond must be a Symbol", "Cannot
    convert Return value of cond to python bool"), and the TypeError gluon_cf raised before."""


class MismatchError(ValueError, mx.MXNetError):
    """Two sides that must agree do not (the dtypes of a cond's branches, a loop's state
    before and after a step): a ValueError listing both, and an MXNetError, the type MXNet
    1.9.1 raises for its own ops' disagreeing sides (``infer_type``, ``bind``, ``forward``)."""


class LoopVarShapeChange(MismatchError):
    """A ``while_loop``'s func changes a loop variable's shape. MXNet 1.9.1 infers no shapes
    through its own ``while_loop`` (it refuses such a loop when it runs), so ``Symbol.infer_shape``
    answers as MXNet does for it (``bind_shapes._infer_shape_impl``); elsewhere it is this error."""


def mismatch(op, what, left_name, left, right_name, right, error=MismatchError, hint=None):
    """A MismatchError (or ``error``) listing two sides that should agree, position by
    position, then ``hint``."""
    lines = ["gluon_cf.%s: %s differ:" % (op, what)]
    for i in range(max(len(left), len(right))):
        a = left[i] if i < len(left) else "<missing>"
        b = right[i] if i < len(right) else "<missing>"
        mark = "" if a == b else "   <-- differs"
        lines.append("  output %d: %s %s, %s %s%s" % (i, left_name, a, right_name, b, mark))
    return error("\n".join(lines + ([hint] if hint else [])))


def not_hybridizable(op, plural):
    """The last line of a hybridized loop's refusal of state changing across steps."""
    return ("%s changing shape or dtype across steps cannot be hybridized (a graph's values "
            "have one shape and dtype); run it without hybridize(), as MXNet's eager %s does"
            % (plural, op))


def arrays_only(op, plural):
    """The end of the refusal of a non-array state by a hybridized or remat loop."""
    return ("; a hybridized loop's (or a remat loop's) %s are arrays (MXNet's eager %s passes "
            "other values on as returned: run it without hybridize() or remat)" % (plural, op))


def check_same_dtypes(op, what, before_name, before, after_name, after, hint=None):
    """ValueError (a ``mismatch``) when known dtypes of loop state differ before and after."""
    before = [dtype_name(t) for t in before]
    after = [dtype_name(t) for t in after]
    if None not in before and None not in after and before != after:
        raise mismatch(op, what, before_name, before, after_name, after, hint=hint)


def dtype_name(t):
    return np.dtype(t).name if t is not None else None


# The loops' checks of what the user's step function returns (foreach's body, while_loop's func).

def check_pair(op, fn_name, names, result):
    """``(first, second)`` of a step function's result, or TypeError if it is not a pair."""
    if not isinstance(result, (list, tuple)) or len(result) != 2:
        raise PairError("%s: %s must return a pair (%s), got %s"
                        % (op_at(op), fn_name, names, type(result).__name__))
    return result


def check_structure(op, returned, fmt, expected_name, expected_fmt):
    """ValueError unless the returned value's structure ``fmt`` is the expected one."""
    if fmt != expected_fmt:
        hint = ""
        if op == "while_loop" and expected_name == "loop_vars" and len(fmt) < len(
                expected_fmt):
            # (tf.while_loop's body returns the loop variables only)
            hint = "; func returns a pair (step outputs, new loop_vars): ([], loop_vars) " \
                   "for no step outputs"
        elif op == "foreach" or isinstance(fmt, list) and isinstance(expected_fmt, list) \
                and len(fmt) == len(expected_fmt):
            # (only eager loops without remat run such steps: NOTE [eager loop states may
            # change] in ops/eager_loops.py)
            hint = "; a hybridized loop's (or a remat loop's) %s keep one structure across " \
                   "steps (MXNet's eager %s lets it change: run it without hybridize() or " \
                   "remat)" % ("states" if op == "foreach" else "loop variables", op)
        raise StructureError("%s: %s structured as %s, but %s is structured as %s%s"
                         % (op_at(op), returned, describe(fmt), expected_name,
                            describe(expected_fmt), hint))


def op_at(op):
    """``gluon_cf.op at file:line`` of the user's call (while it traces or runs it)."""
    where = user_location(2)
    return "gluon_cf.%s%s" % (op, " at %s" % where if where else "")


def _op_where(op, where):
    """``gluon_cf.op at file:line``: ``where`` (a node's user line, given while a graph runs
    it; "" where none is known), else (None) the user's line that called the op eagerly
    (NOTE [run-time loop checks name the user's line])."""
    if where == "":
        return "gluon_cf.%s" % op
    return "gluon_cf.%s at %s" % (op, where) if where else op_at(op)


# NOTE [run-time loop checks name the user's line]
#     What a loop checks as it runs (a state or loop variable changing shape or dtype, step
#     outputs of different shapes, an eager body returning another structure) can only fail
#     where values are computed at run time: eagerly, and hybridized in bodies of run-time
#     shape (boolean_mask). Both name the user's loop call: eagerly, the innermost user frame
#     calling the op (``op_at``; for a remat step recomputed in backward, which has no user
#     frame, the call's line kept in ``_Step.where``); hybridized, the line the node was made
#     at, passed as ``where`` (the frames then are the user's ``net(x)``, not the loop's line),
#     or "" when none is known (a graph loaded from a file in another process): no line rather
#     than ``net(x)``'s (NOTE [where a node was made] in ``errors.py``). Once these named no
#     line at all (issue 24's hostile round 22).


def check_kept_shapes(op, noun, plural, fn_name, old_values, new_values, where=None,
                      remat=False):
    """Loop state must keep its shape and dtype from one step to the next in a hybridized loop
    (a graph node's values have one shape) and in an eager loop with ``remat`` (its backward
    recomputes steps from kept states); a MismatchError. Eagerly without remat it may change,
    as in MXNet's eager loops (NOTE [eager loop states may change] in ``ops/eager_loops.py``).
    """
    for i, (new, old) in enumerate(zip(new_values, old_values)):
        if new.shape != old.shape or new.dtype != old.dtype:
            why = ("with remat, %s must keep their shape and dtype across steps (backward "
                   "recomputes steps from kept ones); remat=False runs such a loop, as MXNet's "
                   "eager %s" % (plural, op)) if remat else (
                not_hybridizable(op, plural))
            raise MismatchError("%s: %s %d changed from shape %s %s to %s %s in %s; %s"
                                % (_op_where(op, where), noun, i, old.shape,
                                   old.dtype.__name__, new.shape, new.dtype.__name__,
                                   fn_name, why))


def stack_steps(op, k, column, where=None):
    """``mx.nd.stack`` of step output ``k`` of every step, after checking that the steps agree
    in shape: MXNet's stack does not check (it returns garbage), and a body that computes
    values of run-time shape may return different shapes at different steps."""
    first = column[0].shape
    if any(x.shape != first for x in column):   # (MXNet's eager loops: an MXNetError)
        raise MismatchError("\n".join(["%s: step output %d changes shape across steps:"
                                        % (_op_where(op, where), k)] +
                                       ["  step %d: %s" % (t, x.shape)
                                        for t, x in enumerate(column)]))
    if any(x.dtype != column[0].dtype for x in column):   # (MXNet's: an MXNetError too)
        raise MismatchError("\n".join(["%s: step output %d changes dtype across steps:"
                                        % (_op_where(op, where), k)] +
                                       ["  step %d: %s" % (t, np.dtype(x.dtype).name)
                                        for t, x in enumerate(column)]))
    if 0 in first and not mx.util.is_np_shape():   # NOTE [zero-size step outputs]
        raise ZeroSizeError("%s: step output %d has shape %s, of no element, at every step; "
                            "MXNet 1.x reads a 0 in a shape as an unknown size and cannot "
                            "stack such outputs (nor can MXNet's own loops): return outputs "
                            "of at least one element, or carry the value as a state instead"
                            % (_op_where(op, where), k, first), located=where != "")
    return mx.nd.stack(*column, axis=0)


# NOTE [zero-size step outputs]
#     A step output of a zero-size shape ((0,), a ``d[:0]`` row slice) cannot be stacked by
#     MXNet 1.x outside numpy shape semantics: ``stack`` reads the 0 as "unknown" and fails with
#     an MXNetError about its own shape inference, naming no line (MXNet's eager loops do the
#     same). The loop refuses it before stacking, naming the user's line and the output; under
#     ``mx.npx.set_np()`` (numpy shapes), where 0 is a size, it stacks.
