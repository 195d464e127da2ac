"""Flattening and regrouping of nested lists of arrays (NDArray or Symbol).

Control-flow functions take and return "structures": a single array, or a (nested) list/tuple of
arrays. Nodes work on flat lists; these helpers convert back and forth, with error messages that
name the op and the argument, as `mx.nd.contrib` does, but without asserts.

A *format* (``fmt``) records the shape of a structure: ``0`` for a single array, otherwise a list
with one entry per element, each itself a format.
"""
import mxnet as mx


def is_array(x):
    return isinstance(x, (mx.nd.NDArray, mx.sym.Symbol))


def flatten(value, op, what):
    """Return ``(flat_list, fmt)`` for a structure; raise TypeError naming ``op`` and ``what``."""
    if is_array(value):
        return [value], 0
    if isinstance(value, (list, tuple)):
        flat, fmt = [], []
        for item in value:
            sub, sub_fmt = flatten(item, op, what)
            flat.extend(sub)
            fmt.append(sub_fmt)
        return flat, fmt
    raise TypeError("%s: %s must be an NDArray/Symbol or a (nested) list of them, got %s"
                    % (op, what, type(value).__name__))


def regroup(flat, fmt):
    """Inverse of :func:`flatten`: rebuild the structure described by ``fmt`` from ``flat``."""
    value, rest = _regroup(list(flat), fmt)
    if rest:  # internal invariant, not user input
        raise AssertionError("regroup: %d values left over" % len(rest))
    return value


def _regroup(flat, fmt):
    if fmt == 0:
        return flat[0], flat[1:]
    out = []
    for sub_fmt in fmt:
        value, flat = _regroup(flat, sub_fmt)
        out.append(value)
    return out, flat


def containers_of(value):
    """The lists and tuples of structure ``value`` with None for each array: what
    :func:`regroup_like` needs, keeping no array alive (remat checks that none outlives a step)."""
    if isinstance(value, (list, tuple)):
        built = [containers_of(v) for v in value]
        if isinstance(value, list):
            return built
        return type(value)(*built) if hasattr(value, "_fields") else type(value)(built)
    return None


def regroup_like(flat, like):
    """``flat`` in the containers of structure ``like`` (from :func:`containers_of`), tuples
    kept tuples (``regroup`` makes lists): MXNet 1.9.1's eager ``foreach`` returns the very
    states object its body returned last, a tuple if the body returned one."""
    items = iter(flat)

    def build(value):
        if isinstance(value, (list, tuple)):
            built = [build(v) for v in value]
            if isinstance(value, list):
                return built
            return type(value)(*built) if hasattr(value, "_fields") else type(value)(built)
        return next(items)
    return build(like)


def describe(fmt):
    """Human-readable form of a format, for error messages: ``array`` or ``[array, [array]]``."""
    if fmt == 0:
        return "array"
    return "[" + ", ".join(describe(f) for f in fmt) + "]"
