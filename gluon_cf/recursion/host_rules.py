"""Host rules: the operators an ahead-of-time schedule may evaluate in numpy, each exactly as
MXNet computes it for the values a control skeleton sees (``take`` on axis 0, comparisons,
integer-scalar arithmetic, copies, casts), and :class:`_NotPlannable`, the reason a function
keeps the dynamic executor (NOTE [ahead-of-time schedules] in recursion/schedule.py).
"""
import numpy as np

_EXACT_SCALAR = 1 << 24     # integer scalars below this are exact in float32 too


class _NotPlannable(Exception):
    """Why a function keeps the dynamic executor (a sentence naming the node)."""


def _small_integer(node):
    text = node.get("attrs", {}).get("scalar", "0")
    value = float(text)
    if not value.is_integer() or abs(value) >= _EXACT_SCALAR:
        raise _NotPlannable("operator %s (node %r) uses the scalar %s, which is not a small "
                            "integer" % (node["op"], node["name"], text))
    return value


def _compare(fn, scalar=False):
    def rule(node):
        if scalar:
            value = _small_integer(node)
            return lambda x: fn(x, x.dtype.type(value)).astype(x.dtype)
        return lambda x, y: fn(x, y).astype(x.dtype)
    return rule


def _arithmetic(fn, scalar=False, reverse=False):
    def rule(node):
        if scalar:
            value = _small_integer(node)
            if reverse:
                return lambda x: fn(x.dtype.type(value), x)
            return lambda x: fn(x, x.dtype.type(value))
        return fn
    return rule


def _take(node):
    attrs = node.get("attrs", {})
    mode = attrs.get("mode", "clip")
    if int(attrs.get("axis", "0")) != 0 or mode not in ("clip", "wrap"):
        raise _NotPlannable("operator take (node %r) has axis=%s, mode=%s; the schedule "
                            "evaluates take only on axis 0 in clip or wrap mode"
                            % (node["name"], attrs.get("axis", "0"), mode))

    def take(table, indices):
        # MXNet casts the indices to integers (truncation) and then clips or wraps them.
        index = indices.astype(np.int64)
        if mode == "wrap":
            return table[np.mod(index, len(table))]
        np.maximum(index, 0, out=index)
        np.minimum(index, len(table) - 1, out=index)
        return table[index]
    return take


def _cast(node):
    dtype = np.dtype(node["attrs"]["dtype"])
    return lambda x: x.astype(dtype)


def _same(node):
    return lambda x: x


# Operator -> rule(node) returning a numpy function equal to MXNet's operator on that node.
HOST_RULES = {
    "take": _take,
    "Cast": _cast, "cast": _cast,
    "BlockGrad": _same, "stop_gradient": _same, "_copy": _same, "identity": _same,
    "negative": lambda node: np.negative, "abs": lambda node: np.abs,
    "zeros_like": lambda node: np.zeros_like, "ones_like": lambda node: np.ones_like,
    "_plus_scalar": _arithmetic(np.add, True), "_minus_scalar": _arithmetic(np.subtract, True),
    "_rminus_scalar": _arithmetic(np.subtract, True, True),
    "_mul_scalar": _arithmetic(np.multiply, True),
    "_maximum_scalar": _arithmetic(np.maximum, True),
    "_minimum_scalar": _arithmetic(np.minimum, True),
    "elemwise_add": _arithmetic(np.add), "elemwise_sub": _arithmetic(np.subtract),
    "elemwise_mul": _arithmetic(np.multiply),
    "broadcast_add": _arithmetic(np.add), "broadcast_plus": _arithmetic(np.add),
    "broadcast_sub": _arithmetic(np.subtract), "broadcast_minus": _arithmetic(np.subtract),
    "broadcast_mul": _arithmetic(np.multiply),
    "_maximum": _arithmetic(np.maximum), "_minimum": _arithmetic(np.minimum),
    "broadcast_maximum": _arithmetic(np.maximum), "broadcast_minimum": _arithmetic(np.minimum),
}
for _name, _fn in (("lesser", np.less), ("greater", np.greater), ("equal", np.equal),
                   ("not_equal", np.not_equal), ("lesser_equal", np.less_equal),
                   ("greater_equal", np.greater_equal)):
    HOST_RULES["_%s" % _name] = _compare(_fn)
    HOST_RULES["broadcast_%s" % _name] = _compare(_fn)
    HOST_RULES["_%s_scalar" % _name] = _compare(_fn, scalar=True)

