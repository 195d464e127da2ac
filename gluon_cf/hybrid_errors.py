"""Errors of a hybridized block's call with gluon_cf nodes, at the user's lines: MXNet's
messages about operators of the block's own graph (which have no line of their own) named
with the ``hybrid_forward`` that made them (split from ``hybrid.py``)."""
import ast
import inspect
import json
import re
import textwrap

import mxnet as mx
import numpy as np
from mxnet.gluon import block as _block

from .errors import ZeroSizeError, mxnet_message
from .graph.operator_errors import OperatorShapeError, body_operator_error
from .node import DynamicShapeError, IncompleteShapeError
from .operators import SOURCE_ATTR, is_mxnet_module, user_location

_RESHAPE_CHECKED = "_gluon_cf_reshape_checked"   # on the error of _check_reshapes_once


# a dtype's name in MXNet's message: its type inference failed, not its shape inference
_DTYPE_NAME = re.compile(r"\b(float16|float32|float64|bfloat16|u?int(8|16|32|64)|bool)\b")


def _graph_error_of(err, block, args):
    """The error, at the block's hybrid_forward, for MXNet's error ``err`` about an operator
    of the graph of a block with gluon_cf nodes (shape inference failed: ``x * i`` of shapes
    (4,) and (1,) in a body, a Symbol's ``*`` not broadcasting; rows of 5 added to a state of
    4): MXNet's message named only its node. A ZeroSizeError when an input has no element
    (MXNet 1.9.1 reads a 0 in a shape as unknown: a take in the graph says its axis is out of
    range), else a ValueError; None for other errors. Raised alike on every such call (the
    CachedOp is rebuilt)."""
    plan = getattr(block, "_gluon_cf_plan", None)
    text = str(err)
    if plan is None or not (plan.has_nodes or getattr(err, _RESHAPE_CHECKED, False)) or \
            "gluon_cf" in text or \
            isinstance(err, (DynamicShapeError, IncompleteShapeError, OperatorShapeError)) or \
            "Error in operator " not in text:
        # (a graph without gluon_cf nodes is MXNet's business alone, but for gluon_cf's
        # Reshape check; a node's own refusal, or an operator's of a body, already names it)
        return None
    function = inspect.unwrap(type(block).hybrid_forward)
    code = getattr(function, "__code__", None)
    if code is None:
        return None
    flat, _ = _block._flatten(args, "input")
    if not any(0 in a.shape for a in flat if isinstance(a, mx.nd.NDArray)):
        # NOTE [a body's operator named by a block's error] in graph/operator_errors.py
        body = body_operator_error(plan.js, err)
        if body is not None:
            return body
    arrays = [a for a in flat if isinstance(a, mx.nd.NDArray)]
    empty = [(k, a.shape) for k, a in enumerate(arrays) if 0 in a.shape]
    detail = mxnet_message(next(line for line in text.splitlines()
                                if "Error in operator " in line))
    at = "%s:%d: hybrid_forward of block %r" % (code.co_filename, code.co_firstlineno,
                                                block.name)
    at = _operator_lines(plan.js, text, block) or at
    if is_mxnet_module(getattr(function, "__module__", None) or ""):
        # (a SymbolBlock's: MXNet's hybrid_forward; the user's line is the call's)
        at = "%s: block %r (a graph imported into a %s)" % (
            user_location() or "<unknown>", block.name, type(block).__name__)
    if empty:
        return ZeroSizeError(
            "%s was called with %s, which has no element; MXNet 1.9.1 reads a 0 in a shape "
            "as an unknown size and could not run the block's graph on it (%s). Call it with "
            "at least one row, or guard the call (x.shape[0] > 0) before it"
            % (at, " and ".join("input %d of shape %s" % e for e in empty), detail),
            located=True)
    if _DTYPE_NAME.search(detail):   # type inference failed: the shapes may be fine
        return ValueError(
            "%s: MXNet could not run the block's graph on inputs of dtypes %s (%s). The "
            "operator is this hybrid_forward's or a function's it passes to gluon_cf: check "
            "the dtypes it combines (MXNet's operators do not promote: cast the inputs, "
            "x.astype('float32'), or the block, block.cast('float64'))"
            % (at, ", ".join(np.dtype(a.dtype).name for a in arrays), detail))
    return ValueError(
        "%s: MXNet could not run the block's graph on inputs of shapes %s (%s). The operator "
        "is this hybrid_forward's or a function's it passes to gluon_cf: check the shapes it "
        "combines (a Symbol's +, -, *, / need equal shapes where an NDArray's broadcast: "
        "F.broadcast_add, F.broadcast_mul ...)"
        % (at, ", ".join(str(a.shape) for a in arrays), detail))


# MXNet's operators whose Python name (``F.concat``, ``x.reshape``) is not their own in lower case
_CALLED_AS = {"Concat": "concat", "SliceChannel": "split", "_rnn_param_concat": "concat"}


def _operator_lines(js, text, block):
    """``file:line: hybrid_forward of block 'name'`` naming the calls (at most three, joined
    by "or") in the source of the hybrid_forward of ``block`` or of its child whose prefix
    the operator's name has, that may have made the operator of the block's own graph named
    in MXNet's error ``text`` (``F.reshape(...)`` or ``x.reshape(...)`` for a Reshape: no line
    of its own); or None (an operator no call names, ``+``; or more calls than help: the
    def's line then; hostile review of session 35)."""
    match = re.search(r"Error in operator (\S+?):", text)
    node = match and next((n for n in js["nodes"] if n["name"] == match.group(1)), None)
    if not node or node["op"] == "null" or SOURCE_ATTR in node.get("attrs", {}):
        return None
    owner = block   # (the child block whose hybrid_forward made it: its prefix)
    while True:
        child = next((c for c in owner._children.values()
                      if node["name"].startswith(c.prefix)), None)
        if child is None:
            break
        owner = child
    function = getattr(type(owner), "hybrid_forward", None)
    if function is None or not inspect.isfunction(inspect.unwrap(function)):
        return None
    function = inspect.unwrap(function)
    op = re.sub(r"^_(contrib|npi|npx)_", "", node["op"])
    found = _call_lines(function, _CALLED_AS.get(node["op"], op.lower()))
    return "%s: hybrid_forward of block %r" % (" or ".join(found), owner.name) \
        if 0 < len(found) <= 3 else None


def _located_takes(symbol, forward):
    """``symbol`` whose ``take(..., mode='raise')`` nodes of the block's own graph (made by
    its ``hybrid_forward``, not traced by gluon_cf: no line of their own) carry the lines of
    the ``take(..., mode='raise')`` calls in ``forward``'s source, so that a partitioned run
    waits for them and names those lines (NOTE [an index out of bounds at run time]), not
    MXNet's "take operator contains indices out of bound" at the next read."""
    js = json.loads(symbol.tojson())
    takes = [n for n in js["nodes"] if n["op"] == "take" and n.get("attrs", {}).get(
        "mode") == "raise" and SOURCE_ATTR not in n["attrs"]]
    lines = _raising_take_lines(forward) if takes else []
    if not lines:
        return symbol
    for node in takes:
        node["attrs"][SOURCE_ATTR] = " or ".join(lines)
    return mx.sym.load_json(json.dumps(js))


def _raising_take_lines(function):
    """``file:line`` of each ``take(..., mode='raise')`` call in ``function``'s source."""
    return _call_lines(function, "take", lambda node: any(
        k.arg == "mode" and isinstance(k.value, ast.Constant) and k.value.value == "raise"
        for k in node.keywords))


def _call_lines(function, attr, test=lambda node: True):
    """``file:line`` of each ``F.<attr>(...)`` call (``test`` of its ast.Call true) in
    ``function``'s source."""
    try:
        source, first = inspect.getsourcelines(function)
        tree = ast.parse(textwrap.dedent("".join(source)))
    except (OSError, TypeError, SyntaxError):
        return []
    filename = inspect.getsourcefile(function) or function.__code__.co_filename
    return ["%s:%d" % (filename, first + node.lineno - 1) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == attr and test(node)]


_ZERO_SIZE_OPERATOR = re.compile(r"^gluon_cf: (\w+) \(node '[^']*'\) was given")
_ZERO_SIZE_ORIGIN = re.compile(r"the result of (\w+)(?=[);])")


def _lines_of_operators(text, forward):
    """A block's ZeroSizeError ``text`` naming operators of its own graph (no line of their
    own), each named with the lines of ``forward`` calling it (``F.take(...)``,
    ``F.contrib.boolean_mask(...)``); and those of the operator refusing, or None."""
    def lines(op):
        found = _call_lines(forward, re.sub(r"^_(contrib|npi|npx)_", "", op))
        return " or ".join(found) if 0 < len(found) <= 3 else None
    text = _ZERO_SIZE_ORIGIN.sub(lambda m: m.group(0) + (
        " at %s" % lines(m.group(1)) if lines(m.group(1)) else ""), text)
    match = _ZERO_SIZE_OPERATOR.match(text)
    return text, None if match is None else lines(match.group(1))


def _forward_of(block):
    """``hybrid_forward of block 'name' at file:line``: where an operator of the block's own
    graph (not traced by gluon_cf, so without a line of its own) was written."""
    function = inspect.unwrap(type(block).hybrid_forward)
    code = getattr(function, "__code__", None)
    where = "" if code is None else " at %s:%d" % (code.co_filename, code.co_firstlineno)
    return "hybrid_forward of block %r%s" % (block.name, where)
