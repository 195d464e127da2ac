"""Which graphs may run on stacked rows: an explicit batching rule per MXNet operator.

NOTE [row-wise rules]
    The batching executor stacks the invocations of a function along axis 0 and runs its body
    once (NOTE [batching] in ``recursion/batching.py``). That is correct only if every operator
    of the body treats axis 0 as independent rows: row ``r`` of every output depends on row ``r``
    of the batched inputs only, and on the shared inputs (parameters, the environment). Equal
    shapes prove nothing (``x / norm(x)`` keeps the shape and mixes every row into every other),
    so a graph is accepted only when each of its operators has a rule here that accepts it
    *for the attributes it was called with and the inputs that are batched*:

    * elementwise operators (any inputs; binary ones without broadcasting need every input
      batched, since a shared input of the same shape would be one with R rows);
    * broadcasting operators whose shared inputs have no batch axis or a batch axis of 1;
    * reductions, softmax, norms, sorts over axes that exclude axis 0;
    * shape operators that keep axis 0 in place (``reshape`` with 0 or -1 first and the rest
      fixed, ``Flatten``, ``expand_dims``/``transpose``/``slice``/``concat``/``stack``/``split``
      off axis 0);
    * ``FullyConnected``, ``Embedding``, ``dot``, convolutions and pooling with batched data and
      shared weights; ``take`` of a shared table at batched indices, or of batched data off axis 0;
    * gluon_cf's own nodes: ``cond`` (its branches are checked the same way), loops (which run
      per row; each row's outputs must have one row), ``invoke``/``recursion`` (one row per
      invocation; callees are checked on their own).

    Anything else - an unknown operator, a user CustomOp, ``BatchNorm``, a reduction over axis 0
    or over all axes, ``reshape`` that moves rows - rejects the graph, with a reason naming the
    operator, the node and the user's line (NOTE [source locations] in ``tracing.py``), and the
    executor runs it row by row. A value of one row for all invocations coming out of a call or a
    ``cond`` (a base case returning a constant such as ``F.zeros((1,))``: the function's value
    is inferred with one row whatever the number of calls) is blamed on that call's node and
    line, saying so, not on the row-wise operator that reads it. Shapes are used only to read
    attributes (which axis is the batch axis, which side of a broadcast has a batch axis of 1),
    never to decide by comparison.
"""
import ast
import contextlib
import json
import threading
from typing import Dict, Optional, Tuple

from . import errors, registry
from .operators import SOURCE_ATTR

ROWS = 3    # rows used to infer the internal shapes of a batched graph


class Shaped:
    """Stands for an array where only its shape is read (what a row-wise check is given when
    there are no arrays yet: an export, a schedule's layout)."""

    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = shape


class Rejected(Exception):
    """A node of the graph is not known to act row by row."""

    def __init__(self, node, why, hint):
        super().__init__(why)
        self.op = node.get("op")
        self.node = node.get("name", "?")
        self.why = why
        self.hint = hint
        self.source = node.get("attrs", {}).get(SOURCE_ATTR)

    def describe(self, hint=True):
        """What rejects the graph and where, then (``hint``) what to do."""
        tail = ". %s" % self.hint if hint else ""
        if self.op is None:
            return "%s %s%s" % (self.node, self.why, tail)
        where = " at %s" % self.source if self.source else ""
        return "operator %s (node %r)%s %s%s" % (self.op, self.node, where, self.why, tail)


# ---- attribute parsing ---------------------------------------------------------------------

def _value(text, default=None):
    if text is None:
        return default
    if text in ("None", "none", ""):
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _axes(attrs, key, ndim, default=None):
    """The normalised axes of attribute ``key`` (None: the attribute means 'all axes')."""
    value = _value(attrs.get(key), default)
    if value is None or value == ():
        return None
    value = value if isinstance(value, (tuple, list)) else (value,)
    return {int(a) % ndim if ndim else int(a) for a in value}


def _true(attrs, key, default=False):
    value = attrs.get(key)
    if value is None:
        return default
    return str(value).lower() in ("true", "1")


# ---- the rules ----------------------------------------------------------------------------------
# A rule gets (attrs, in_shapes, in_flags, out_shapes) and returns None to accept, or
# (why, hint) to reject. Shapes are those of a batch of ROWS rows.

HINT_AXIS = ("Reduce or normalise over the feature axes (axis=-1, or axis=1 with "
              "keepdims=True), never over axis 0 or all axes")
HINT_RESHAPE = ("Keep axis 0 as it is: reshape with 0 or -1 first, e.g. x.reshape((0, -1)) or "
                 "x.reshape((-1, 4)), not x.reshape((1, 4))")
HINT_SHARED = ("Build per-invocation values from the batched inputs (F.zeros_like, "
                "F.broadcast_like) so that they carry one row per invocation")
HINT_ONE_ROW = ("Compute such a value from an argument (F.zeros_like(idx), idx * 0 + 1) so "
                "that each call has a row of its own")
HINT_UNKNOWN = ("gluon_cf has no batching rule for this operator; if it acts on each row "
                 "independently, write the body with operators that do (or accept row-by-row "
                 "execution)")


def _elementwise(attrs, shapes, flags, outs):
    return None


def _all_batched(attrs, shapes, flags, outs):
    if not all(flags):
        return ("combines a batched input with a shared one of the same shape, which would need "
                "that shared value to hold one row per invocation", HINT_SHARED)
    return None


def _broadcast(attrs, shapes, flags, outs):
    ndim = len(outs[0])
    for shape, batched in zip(shapes, flags):
        if batched and len(shape) != ndim:
            return ("broadcasts a batched input with fewer axes than its output, so its rows are "
                    "not along axis 0", HINT_SHARED)
        if not batched and len(shape) == ndim and shape[0] != 1:
            return ("broadcasts a shared input of shape %s whose axis 0 is not 1 against the rows"
                    % (tuple(shape),), HINT_SHARED)
    return None


def _broadcast_like(attrs, shapes, flags, outs):
    """``broadcast_like(lhs, rhs)``: lhs takes the sizes of rhs (all axes, or the paired
    ``lhs_axes``/``rhs_axes``). Axis 0 of the output is rhs's when lhs axis 0 is broadcast from
    rhs axis 0 (then rhs must be batched and lhs have one row), else it stays lhs's."""
    lhs_axes = _axes(attrs, "lhs_axes", len(shapes[0]))
    rhs_axes = _axes(attrs, "rhs_axes", len(shapes[1]))
    if (lhs_axes is None) != (rhs_axes is None):
        return "broadcasts along unpaired axes", HINT_UNKNOWN
    if lhs_axes is None:
        pairs = {a: a for a in range(len(shapes[0]))} if len(shapes[0]) == len(shapes[1]) \
            else None
    else:
        lhs_list = [int(a) % len(shapes[0]) for a in _value(attrs.get("lhs_axes"))]
        rhs_list = [int(a) % len(shapes[1]) for a in _value(attrs.get("rhs_axes"))]
        pairs = dict(zip(lhs_list, rhs_list))
    if pairs is None:
        return "broadcasts between different numbers of axes", HINT_UNKNOWN
    if 0 in pairs:
        if pairs[0] != 0:
            return "broadcasts axis 0 from another axis", HINT_UNKNOWN
        if not flags[1]:
            return "takes the size of axis 0 from a shared value", HINT_SHARED
        if flags[0] or shapes[0][0] != 1:
            return "broadcasts a value whose axis 0 is not 1 against the rows", HINT_SHARED
        return None
    if not flags[0]:
        return "keeps the axis 0 of a shared value", HINT_SHARED
    if flags[1] and 0 in pairs.values():
        return "takes a size from the rows' axis", HINT_UNKNOWN
    return None


def _broadcast_to(attrs, shapes, flags, outs):
    shape = _value(attrs.get("shape"), ())
    if not shape or shape[0] != 0:
        return "sets the size of axis 0 to a constant", "Use 0 for axis 0 in shape=..."
    return None


def _off_axis0(key, default=None):
    """Operators that act along the axes named by ``key`` (default ``default``; none: all)."""
    def rule(attrs, shapes, flags, outs):
        ndim = len(shapes[0])
        axes = _axes(attrs, key, ndim, default)
        if axes is None:
            return "acts over all axes, axis 0 (the invocations) included", HINT_AXIS
        if _true(attrs, "exclude"):
            axes = set(range(ndim)) - axes
        if 0 in axes:
            return "acts along axis 0, the axis of the invocations", HINT_AXIS
        return None
    return rule


def _reduction(attrs, shapes, flags, outs):
    return _off_axis0("axis")(attrs, shapes, flags, outs)


def _softmax(attrs, shapes, flags, outs):
    if _true(attrs, "use_length"):
        return "takes a length input", HINT_UNKNOWN
    return _off_axis0("axis", default=-1)(attrs, shapes, flags, outs)


def _reshape(attrs, shapes, flags, outs):
    if _true(attrs, "reverse"):
        return "reshapes in reverse", HINT_RESHAPE
    shape = _value(attrs.get("shape"), ())
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if not shape:
        return "has no target shape", HINT_RESHAPE
    rest = shape[1:]
    if shape[0] == 0 and all(d > 0 or d in (0, -1) for d in rest) and rest.count(-1) <= 1 \
            and (0 not in rest or all(d != -1 for d in rest)):
        return None
    if shape[0] == -1 and all(d > 0 for d in rest):
        in_rest = 1
        for d in shapes[0][1:]:
            in_rest *= d
        out_rest = 1
        for d in rest:
            out_rest *= d
        if in_rest == out_rest:
            return None
    return "does not keep axis 0 (target shape %s)" % (shape,), HINT_RESHAPE


def _expand_dims(attrs, shapes, flags, outs):
    if int(_value(attrs.get("axis"), 0)) % (len(shapes[0]) + 1) == 0:
        return "inserts an axis in front of the rows", "Use an axis >= 1"
    return None


def _squeeze(attrs, shapes, flags, outs):
    axes = _axes(attrs, "axis", len(shapes[0]))
    if axes is None or 0 in axes:
        return ("may remove axis 0 (it removes every axis of size 1 unless given axes)",
                "Pass axis=... naming axes >= 1")
    return None


def _transpose(attrs, shapes, flags, outs):
    axes = _value(attrs.get("axes"), ())
    if not axes or int(axes[0]) % len(shapes[0]) != 0:
        return "moves axis 0", "Keep axes[0] == 0"
    return None


def _swapaxes(attrs, shapes, flags, outs):
    ndim = len(shapes[0])
    dims = (int(_value(attrs.get("dim1"), 0)), int(_value(attrs.get("dim2"), 0)))
    if any(d % ndim == 0 for d in dims):
        return "swaps axis 0", "Swap axes >= 1"
    return None


def _slice(attrs, shapes, flags, outs):
    begin, end = _value(attrs.get("begin"), ()), _value(attrs.get("end"), ())
    step = _value(attrs.get("step"), ()) or ()
    if (begin and begin[0] is not None) or (end and end[0] is not None) or \
            (step and step[0] not in (None, 1)):
        return "slices axis 0", "Slice axes >= 1 (slice_axis with axis >= 1)"
    return None


def _concat(attrs, shapes, flags, outs):
    if int(_value(attrs.get("dim"), 1)) % len(outs[0]) == 0:
        return "concatenates along axis 0", "Concatenate along an axis >= 1"
    return _all_batched(attrs, shapes, flags, outs)


def _stack(attrs, shapes, flags, outs):
    if int(_value(attrs.get("axis"), 0)) % len(outs[0]) == 0:
        return "stacks along axis 0", "Stack along an axis >= 1"
    return _all_batched(attrs, shapes, flags, outs)


def _split(attrs, shapes, flags, outs):
    if int(_value(attrs.get("axis"), 1)) % len(shapes[0]) == 0:
        return "splits axis 0", "Split along an axis >= 1"
    if _true(attrs, "squeeze_axis") and len(shapes[0]) < 2:
        return "squeezes away axes", HINT_UNKNOWN
    return None


def _tile(attrs, shapes, flags, outs):
    reps = tuple(_value(attrs.get("reps"), ()))
    ndim = len(shapes[0])
    if len(reps) > ndim or (len(reps) == ndim and reps[0] != 1):
        return "repeats along axis 0 (or adds axes in front)", "Tile with reps[0] == 1"
    return None


def _repeat(attrs, shapes, flags, outs):
    axis = _value(attrs.get("axis"))
    if axis is None or int(axis) % len(shapes[0]) == 0:
        return "repeats along axis 0 (or flattens)", "Repeat along an axis >= 1"
    return None


def _pad(attrs, shapes, flags, outs):
    width = tuple(_value(attrs.get("pad_width"), ()))
    if width[:2] != (0, 0):
        return "pads axis 0", "Pad axes >= 1 only"
    return None


def _data_batched_weights_shared(*data_positions):
    """Layers: batched data, shared parameters (FullyConnected, Embedding, Convolution...)."""
    def rule(attrs, shapes, flags, outs):
        for i, batched in enumerate(flags):
            if batched and i not in data_positions:
                return ("has a batched parameter input (#%d), which would mix the rows' weights"
                        % i, HINT_SHARED)
        return None
    return rule


def _dot(attrs, shapes, flags, outs):
    if flags[1] or _true(attrs, "transpose_a"):
        return "multiplies with the rows on the wrong side", (
            "Put the batched value on the left: dot(x, W) with x of shape (rows, ...)")
    return None


def _batch_dot(attrs, shapes, flags, outs):
    if not all(flags):
        return "pairs a batched batch with a shared one", HINT_SHARED
    return None


def _gemm2(attrs, shapes, flags, outs):
    if len(shapes[0]) == 2:
        return _dot(attrs, shapes, flags, outs)
    return _batch_dot(attrs, shapes, flags, outs)


def _take(attrs, shapes, flags, outs):
    axis = int(_value(attrs.get("axis"), 0)) % len(shapes[0])
    data, indices = flags
    if axis == 0:
        if data:
            return ("indexes the rows (axis 0) of batched data, mixing invocations",
                    "Index a shared table (take(table, batched_indices)) or use axis >= 1")
        return None    # a shared table at batched indices: one result per index row
    if indices:
        return "takes batched indices along an axis >= 1", HINT_UNKNOWN
    return None


def _pick(attrs, shapes, flags, outs):
    if int(_value(attrs.get("axis"), -1)) % len(shapes[0]) == 0:
        return "picks along axis 0", "Pick along an axis >= 1"
    return _all_batched(attrs, shapes, flags, outs)


def _dropout(attrs, shapes, flags, outs):
    axes = _axes(attrs, "axes", len(shapes[0]), ())
    if axes and 0 in axes:
        return "shares its mask along axis 0", "Use axes >= 1"
    return None


def _layer_norm(attrs, shapes, flags, outs):
    if int(_value(attrs.get("axis"), -1)) % len(shapes[0]) == 0:
        return "normalises along axis 0", HINT_AXIS
    return _data_batched_weights_shared(0)(attrs, shapes, flags, outs)


def _reject(why, hint=HINT_UNKNOWN):
    def rule(attrs, shapes, flags, outs):
        return why, hint
    return rule


_ELEMENTWISE = """
relu sigmoid tanh softsign exp expm1 log log1p log2 log10 sqrt rsqrt cbrt rcbrt square abs negative
sign round rint floor ceil fix trunc sin cos tan arcsin arccos arctan sinh cosh arcsinh arccosh
arctanh degrees radians reciprocal erf erfinv gamma gammaln logical_not hard_sigmoid Activation
LeakyReLU clip Cast cast amp_cast identity _copy BlockGrad stop_gradient make_loss MakeLoss
zeros_like ones_like _plus_scalar _minus_scalar _rminus_scalar _mul_scalar _div_scalar
_rdiv_scalar _power_scalar _rpower_scalar _maximum_scalar _minimum_scalar _mod_scalar
_rmod_scalar _equal_scalar _not_equal_scalar _greater_scalar _greater_equal_scalar
_lesser_scalar _lesser_equal_scalar _logical_and_scalar _logical_or_scalar _logical_xor_scalar
_hypot_scalar smooth_l1 _contrib_div_sqrt_dim _contrib_quadratic _random_uniform_like
_random_normal_like isnan isinf isfinite _contrib_gelu
""".split()
_ELEMENTWISE_SAME_SHAPE = """
elemwise_add elemwise_sub elemwise_mul elemwise_div _plus _minus _mul _div _Plus _Minus _Mul _Div
_add _sub _power _Power _maximum _minimum _Maximum _Minimum _mod _hypot _equal _not_equal _greater
_greater_equal _lesser _lesser_equal _logical_and _logical_or _logical_xor add_n ElementWiseSum
_grad_add where
""".split()
_BROADCAST = """
broadcast_add broadcast_sub broadcast_mul broadcast_div broadcast_plus broadcast_minus
broadcast_power broadcast_maximum broadcast_minimum broadcast_mod broadcast_hypot broadcast_equal
broadcast_not_equal broadcast_greater broadcast_greater_equal broadcast_lesser
broadcast_lesser_equal broadcast_logical_and broadcast_logical_or broadcast_logical_xor
""".split()
_REDUCTIONS = "sum mean max min prod nansum nanprod sum_axis max_axis min_axis norm".split()

RULES: dict = {}
RULES.update((op, _elementwise) for op in _ELEMENTWISE)
RULES.update((op, _all_batched) for op in _ELEMENTWISE_SAME_SHAPE)
RULES.update((op, _broadcast) for op in _BROADCAST)
RULES.update((op, _reduction) for op in _REDUCTIONS)
RULES.update({
    "argmax": _off_axis0("axis"), "argmin": _off_axis0("axis"),
    "argmax_channel": _elementwise,
    "topk": _off_axis0("axis", default=-1), "sort": _off_axis0("axis", default=-1),
    "argsort": _off_axis0("axis", default=-1),
    "softmax": _softmax, "log_softmax": _softmax, "softmin": _softmax,
    "SoftmaxActivation": _elementwise,      # over the axes after axis 0 (or axis 1)
    "L2Normalization": _elementwise,        # every mode normalises within one sample
    "LayerNorm": _layer_norm,
    "InstanceNorm": _data_batched_weights_shared(0),
    "broadcast_like": _broadcast_like, "broadcast_to": _broadcast_to,
    "broadcast_axis": _off_axis0("axis"), "broadcast_axes": _off_axis0("axis"),
    "Reshape": _reshape, "reshape": _reshape,
    "Flatten": _elementwise, "flatten": _elementwise,
    "expand_dims": _expand_dims, "squeeze": _squeeze,
    "transpose": _transpose, "SwapAxis": _swapaxes, "swapaxes": _swapaxes,
    "slice_axis": _off_axis0("axis"), "slice": _slice, "crop": _slice,
    "slice_like": _off_axis0("axes"),
    "Concat": _concat, "concat": _concat, "stack": _stack,
    "SliceChannel": _split, "split": _split, "_split_v2": _split,
    "tile": _tile, "repeat": _repeat, "Pad": _pad, "pad": _pad,
    "reverse": _off_axis0("axis"), "flip": _off_axis0("axis"),
    "FullyConnected": _data_batched_weights_shared(0),
    "Embedding": _data_batched_weights_shared(0),
    "Convolution": _data_batched_weights_shared(0),
    "Deconvolution": _data_batched_weights_shared(0),
    "Pooling": _data_batched_weights_shared(0),
    "UpSampling": _data_batched_weights_shared(0),
    "one_hot": _elementwise,
    "dot": _dot, "batch_dot": _batch_dot, "_linalg_gemm2": _gemm2, "linalg_gemm2": _gemm2,
    "take": _take, "batch_take": _all_batched, "pick": _pick,
    "Dropout": _dropout,
    "BatchNorm": _reject("normalises with statistics over axis 0, across invocations",
                         "Use LayerNorm or InstanceNorm inside recursive functions"),
    "SyncBatchNorm": _reject("normalises with statistics over axis 0, across invocations",
                             "Use LayerNorm or InstanceNorm inside recursive functions"),
    "_contrib_SyncBatchNorm": _reject("normalises with statistics over axis 0",
                                      "Use LayerNorm inside recursive functions"),
    "RNN": _reject("takes its batch along axis 1 (layout TNC)"),
    "Custom": _reject("is a user CustomOp, whose effect on rows gluon_cf cannot know"),
})


# ---- the check -----------------------------------------------------------------------------

def load_graph(graph_json_text, cache):
    """``(parsed JSON, Symbol)`` of a graph's JSON text, kept in ``cache`` (a dict): branch
    graphs are met again and again. The caller's ``cache`` lives with the decoded node that
    holds the graph: a Symbol holds its gluon_cf nodes' decoded nodes (NOTE [decoded nodes live
    as long as their users] in graph/decoded.py), so a process-wide one kept them all."""
    found = cache.get(graph_json_text)
    if found is None:
        import mxnet as mx
        found = cache[graph_json_text] = (json.loads(graph_json_text),
                                          mx.sym.load_json(graph_json_text))
    return found


_rows = threading.local()


@contextlib.contextmanager
def _rows_setting(name, value):
    """The per-thread setting ``name`` of the row-wise checks is ``value`` inside."""
    previous = getattr(_rows, name, None)
    setattr(_rows, name, value)
    try:
        yield
    finally:
        setattr(_rows, name, previous)


def batch_rows(rows):
    """Shape inference for a batch of ``rows`` invocations: predicates may then hold one element
    per row (``rows_being_checked``, read by the ops' predicate checks)."""
    return _rows_setting("value", rows)


def rows_being_checked():
    """The batch size shape inference is running for (see batch_rows), or None."""
    return getattr(_rows, "value", None)


# NOTE [loops lowered on rows]
#     The batching executor runs a loop once per row (its batching rule only asks for one row
#     per invocation out of it), so its ``cond`` and ``func`` may mix rows. The ONNX lowering
#     of a recursion does not: a ``while_loop`` making recursive calls runs for every row of a
#     level at once, its ``cond`` and ``func`` evaluated on all the rows (NOTE [recursion as
#     ONNX loops] in export/onnx_recursion/lowering.py). A ``cond`` of ``F.sum(k < end) > 0``
#     then summed the rows of all the level's calls, and the exported model counted children
#     that were not there, silently; so did a call's argument or a counter's update reading
#     ``F.min(k)``. So while the lowering plans (``lowering_rows()``), a ``while_loop``'s
#     ``cond`` must act row by row itself, and so must its ``func`` with the recursive calls
#     cut out (``skeleton_rejected`` in rowwise_skeleton.py: a call infers one row for all
#     the invocations, so its value stands as a batched input of one row per invocation; what
#     is computed from it is checked too, as ``n + count(c) * F.sum(F.ones_like(k))``
#     counted sibling calls), in ``while_loop``'s batching rule; row-wise verdicts are cached
#     per mode (``Graph.rows_rejected``).
def lowering_rows():
    """Row-wise checks for the ONNX lowering (NOTE [loops lowered on rows])."""
    return _rows_setting("lowering", True)


def lowering_now():
    """Whether the row-wise checks running are the ONNX lowering's (see lowering_rows)."""
    return bool(getattr(_rows, "lowering", None))


_UNINFERRED = "has shapes that cannot be inferred for a batch"
_ONE_ROW = ("gives one row for %d invocations: the value a call returns has one row whatever "
            "the number of calls, as when a branch of the function returns a value that reads "
            "none of its arguments (a constant such as F.zeros((1,)))")


def one_row_from_a_call(rejected):
    """Whether ``rejected`` blames a call (or cond) giving one row for all invocations."""
    return rejected.why.startswith(_ONE_ROW.split("%", 1)[0])


def _blame_one_row_call(nodes, ins, in_flags, in_shapes, rows):
    """A node that gives too few rows because its batched input from a call or a cond has one
    row (a base case returning a constant: NOTE [row-wise rules]) blames that input's node,
    whose line is the call's, not the operator after it, which acts row by row."""
    for (src, _), batched, shape in zip(ins, in_flags, in_shapes):
        producer = nodes[src]
        kind = registry.kind_of(producer)
        if batched and shape and shape[0] == 1 and kind is not None:
            raise Rejected(dict(producer, op="gluon_cf.%s" % kind), _ONE_ROW % rows,
                           HINT_ONE_ROW)


def check_symbol(symbol, graph_json, flags, shapes, rows=ROWS):
    """Raise :class:`Rejected` unless ``symbol`` acts row by row on its batched inputs.

    ``flags``/``shapes``: per input name, whether it is batched and its shape in a batch of
    ``rows`` rows (shared inputs: their own shape). ``rows=1`` only looks for an operator to
    blame (rules, no row counts): what a failed inference with ``ROWS`` rows falls back to.
    """
    if rows == 1:
        _walk(graph_json, flags, _internal_shapes(symbol, graph_json, shapes, 1), 1)
        return
    try:
        by_entry = _internal_shapes(symbol, graph_json, shapes, ROWS)
    except Exception as err:  # noqa: BLE001 - any failure means "not provably row-wise"
        _blame_one_row(symbol, graph_json, flags, shapes)
        # as users read MXNet's words: no C++ source location, no C++ condition
        first = errors.mxnet_message(str(err).strip().splitlines()[0]) if str(err).strip() \
            else type(err).__name__
        if len(first) > 300:      # (cut at a word: the warning quotes it mid-sentence)
            # (to 301: a word ending at the 300th character is whole, the space after it)
            first = first[:301].rsplit(" ", 1)[0] + " ..."
        raise Rejected({"name": "its shape inference"},
                       "fails for %d invocations at once (%s)" % (ROWS, first),
                       HINT_SHARED) from None
    try:
        _walk(graph_json, flags, by_entry, ROWS)
    except Rejected as rejected:
        if rejected.why == _UNINFERRED:   # e.g. a cond whose branches differ for ROWS rows
            _blame_one_row(symbol, graph_json, flags, shapes)
        raise


def _blame_one_row(symbol, graph_json, flags, shapes):
    """Find the operator to blame with the shapes of one row (those the graph really runs
    with): raise its :class:`Rejected`; return if every rule passes."""
    one_row = {n: (1,) + tuple(s[1:]) if flags.get(n) else s for n, s in shapes.items()}
    try:
        _walk(graph_json, flags, _internal_shapes(symbol, graph_json, one_row, 1), 1)
    except Rejected:
        raise
    except Exception:  # noqa: BLE001
        pass


def _internal_shapes(symbol, graph_json, shapes, rows):
    """Shape of every entry ``(node id, output)`` of the graph, for a batch of ``rows``."""
    internals = symbol.get_internals()
    with batch_rows(rows if rows > 1 else None):
        _, out_shapes, _ = internals.infer_shape_partial(**shapes)
    by_entry: Dict[Tuple[int, int], Optional[Tuple[int, ...]]] = {}
    for entry, shape in zip(_internal_entries(internals, graph_json["nodes"]), out_shapes or []):
        by_entry[entry] = tuple(shape) if shape and all(d > 0 for d in shape) else None
    return by_entry


def _internal_entries(internals, nodes):
    """The entry ``(node id, output)`` of each output of ``internals``, in their order.

    Names do not tell nodes apart: a Gluon block called twice in one body (``self.l(h)`` in
    both children's calls of a decoder) makes two nodes of one name (``..._dense0_fwd``), so
    the entries are the heads of the internals' own JSON (as export's ``_collect_shapes``
    reads them), whose nodes are the graph's when their names are; otherwise none (the
    shapes unknown: the body is not proved row-wise)."""
    graph = json.loads(internals.tojson())
    if [n["name"] for n in graph["nodes"]] != [n["name"] for n in nodes]:
        return []
    return [(nid, k) for nid, k, *_ in graph["heads"]]


def _walk(graph_json, flags, by_entry, rows):
    flags_by_entry = {(nid, 0): bool(flags.get(n["name"], False))
                      for nid, n in enumerate(graph_json["nodes"]) if n["op"] == "null"}
    check_nodes(graph_json["nodes"], graph_json["heads"], flags_by_entry, by_entry,
                lambda node, in_flags, in_shapes, out_shapes, used: _own_node(
                    node, in_flags, in_shapes, out_shapes, used, rows=rows), rows)


def _own_node(node, in_flags, in_shapes, out_shapes, used, rows=ROWS):
    """gluon_cf's own nodes: each op's ``batching_rule`` (in its op file, via the registry)."""
    rule = getattr(registry.rule_of(registry.kind_of(node)), "batching_rule", None)
    if rule is None:
        raise Rejected(node, "has no batching rule", HINT_UNKNOWN)
    rule(node, in_flags, in_shapes, out_shapes, used, rows)


def check_nodes(nodes, heads, flags_by_entry, shapes_by_entry, own_node_rule, rows=ROWS):
    """Walk ``nodes`` in order, propagating which entries are batched; raise :class:`Rejected`.

    ``flags_by_entry`` holds the variables' flags ``{(nid, 0): bool}`` and is completed in
    place; ``shapes_by_entry`` maps every entry to its inferred shape (a batch of ROWS rows).
    ``own_node_rule(node, in_flags, in_shapes, out_shapes, used)`` checks gluon_cf nodes.
    ``rows``: the batch the shapes are for; with 1, row counts are not checked.
    """
    consumed = {(src, idx) for n in nodes for src, idx, *_ in n["inputs"]}
    consumed.update((h[0], h[1]) for h in heads)
    for nid, node in enumerate(nodes):
        if node["op"] == "null":
            continue
        ins = [(src, idx) for src, idx, *_ in node["inputs"]]
        in_flags = [flags_by_entry.get(e, False) for e in ins]
        outs = [e for e in shapes_by_entry if e[0] == nid] or [(nid, 0)]
        outs.sort()
        batched = any(in_flags)
        for e in outs:
            flags_by_entry[e] = batched
        if not batched:
            continue
        in_shapes = [shapes_by_entry.get(e) for e in ins]
        out_shapes = [shapes_by_entry.get(e) for e in outs]
        if any(s is None for s in in_shapes + out_shapes):
            raise Rejected(node, _UNINFERRED, HINT_UNKNOWN)
        attrs = node.get("attrs", {})
        if registry.kind_of(node) is not None:
            own_node_rule(node, in_flags, in_shapes, out_shapes, [e in consumed for e in outs])
            continue
        rule = RULES.get(node["op"])
        if rule is None:
            raise Rejected(node, "has no batching rule", HINT_UNKNOWN)
        verdict = rule(attrs, in_shapes, in_flags, out_shapes)
        if verdict is not None:
            raise Rejected(node, *verdict)
        for e, shape in zip(outs, out_shapes):
            if rows > 1 and e in consumed and shape[0] != rows:
                _blame_one_row_call(nodes, ins, in_flags, in_shapes, rows)
                raise Rejected(node, "returns %d rows for %d invocations" % (shape[0], ROWS),
                               HINT_UNKNOWN)
