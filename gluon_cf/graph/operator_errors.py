"""Errors of operators of a traced body that refuse the shapes or dtypes they are given, at the
user's line that made them (NOTE [operators refusing shapes at run time])."""
import re
from typing import Any, Dict, List, Optional, Sequence

import mxnet as mx
import numpy as np

from ..errors import mxnet_message
from ..operators import SOURCE_ATTR

# NOTE [operators refusing shapes at run time]
#     A body whose shapes are known only at run time (a boolean_mask in a loop's step) is
#     inferred by MXNet when its CachedOp runs, on the shapes of that run: a shape mismatch of
#     the user's own code there (a Symbol's ``+`` of shapes (3,) and (1,), which NDArrays
#     broadcast) is an MXNetError naming only a graph node, raised inside the node's run (on
#     one of MXNet's worker threads, reaching the user at the next read of any output). The
#     operator's node in the body knows the user's line that made it (NOTE [source
#     locations]), so the error is an OperatorShapeError naming the operator, that line and
#     the shapes, on every such call. Likewise when MXNet infers such a body's shapes for
#     ``Symbol.infer_shape`` of a graph holding gluon_cf nodes (a state of the wrong shape).
OPERATOR_NAMED = re.compile(r"Error in operator (\S+?):")
# MXNet's words for an operator refusing its inputs' shapes or dtypes
_REFUSED = re.compile(r"Incompatible attr|Shape inconsistent|inferring shapes failed|"
                      r"shape error|[Ii]nfer ?[Ss]hape|[Ii]nfer ?[Tt]ype|type inconsistent|"
                      r"could not be broadcast together|dim size must be known|"
                      # (batch_dot's rank check: "batch_dot currently only support N-D*N-D
                      # array (N >= 3)", a 4-D query into gluonnlp's attention cells. Not
                      # every "Error in operator": a parameter file's weight of the wrong
                      # shape, "Unexpected shape for bias", is no fault of the user's line)
                      r"currently only support \S+ array")

# A check that says nothing but its condition (Reshape's "Check failed: src_idx < dshape_len
# (2 vs. 2) : "): the operator refused what it was given, whatever the check (NOTE [a body's
# operator named by a block's error])
_BARE_CHECK = re.compile(r"Check failed: [^\n]*\)\s*:\s*$", re.M)

# MXNet's words for a dtype mismatch (type inference: "expected float64, got float32")
_DTYPES_DIFFER = re.compile(r"expected (?:float|int|uint|bool)\w*, got |type inconsistent|"
                            r"[Ii]nfer ?[Tt]ype")


class OperatorShapeError(ValueError, mx.MXNetError):
    """An operator of a body refused the shapes or dtypes it was given (NOTE
    [operators refusing shapes at run time]); its message names the operator, the user's line
    and the shapes. An MXNetError too, as what it replaces."""


def operator_error(node: Dict[str, Any], inputs: Optional[Sequence[Any]],
                   err: Exception, any_check: bool = False) -> Optional[OperatorShapeError]:
    """The OperatorShapeError for MXNet's error ``err`` about JSON node ``node`` (of a body
    traced by gluon_cf, so with the user's line) refusing the shapes or dtypes of
    its NDArrays ``inputs`` (None: not known, the node ran inside a CachedOp); None for other
    errors or nodes (``any_check``: every MXNet check of the node's, NOTE [a body's operator
    named by a block's error])."""
    text = str(err)
    where = node.get("attrs", {}).get(SOURCE_ATTR)
    if where is None or not (any_check or _REFUSED.search(text) or _BARE_CHECK.search(text)) or \
            type(err).__module__.startswith("gluon_cf"):   # (ours says what it is already)
        return None
    detail = next((mxnet_message(line) for line in text.splitlines() if "Check failed" in line
                   or "Error in operator" in line), mxnet_message(text.strip().splitlines()[-1]))
    detail = detail.replace(" in node  at ", " at ")   # (imperatively MXNet names no node)
    given = "" if inputs is None else " of shapes %s, dtypes %s" % (
        ", ".join(str(a.shape) for a in inputs),
        ", ".join(np.dtype(a.dtype).name for a in inputs))
    if _DTYPES_DIFFER.search(detail):
        advice = ("Its inputs' dtypes differ: cast one to the other's (F.cast(x, dtype=...)), "
                  "or the block's parameters with .cast(...)")
    else:
        advice = ("Check the shapes and dtypes it combines (a Symbol's +, -, *, / need equal "
                  "shapes where an NDArray's broadcast: F.broadcast_add, F.broadcast_mul ...)")
    return OperatorShapeError("%s: %s (node %r) refused its inputs%s (%s). %s"
                              % (where, node["op"], node["name"], given, detail, advice))


# NOTE [a body's operator named by a block's error]
#     MXNet's shape inference of a block's whole graph runs the bodies' (a foreach step's
#     ``r.reshape((-3, 0))`` of a 2-D row: "Check failed: src_idx < dshape_len (2 vs. 2)"),
#     and its error names the body's node only: it was the ValueError at the block's
#     hybrid_forward, quoting "Error in operator r0_reshape0:" with nothing after it. The node
#     is looked up in the graph's bodies, at any depth, and the error is its OperatorShapeError
#     at the user's line of the operator, whatever MXNet's check said. A body run on its own
#     (a cond's branch taken at run time, its CachedOp inferring shapes on a worker thread)
#     reached the same check raw, "Check failed: src_idx < dshape_len (2 vs. 2) : " and no
#     line, at the read of the output: a check saying nothing but its condition is a refusal
#     of the operator's inputs there too (``_BARE_CHECK``); other checks keep to _REFUSED's
#     words (a parameter file's "Unexpected shape for bias" is no fault of the line).
def body_operator_error(js: Dict[str, Any], err: Exception) -> Optional[OperatorShapeError]:
    """:func:`operator_error` of the node MXNet's ``err`` names, searched in the JSON graph
    ``js`` and its gluon_cf nodes' subgraphs; None where none is named or has a line."""
    from .. import registry   # (the registry's decoders import this module's package)
    import json
    named = OPERATOR_NAMED.search(str(err))
    if named is None:
        return None
    graphs = [js]
    while graphs:
        for node in graphs.pop()["nodes"]:
            if node["name"] == named.group(1) and node.get("attrs", {}).get(SOURCE_ATTR):
                return operator_error(node, None, err, any_check=True)
            if registry.kind_of(node) is not None:
                graphs += [json.loads(g["json"]) for g in
                           json.loads(node["attrs"]["spec"]).get("graphs", {}).values()]
    return None


# NOTE [an index out of bounds at run time]
#     ``F.take(..., mode='raise')`` checks its indices when it runs, and MXNet's error ("take
#     operator contains indices out of bound") names no node: in a body, raised on a worker
#     thread, it reached the user at the next read of any output with no line of theirs. A
#     graph holding such a node waits for its outputs where it runs (the check reads every
#     index on the host anyway: only graphs that ask for it pay) and raises an IndexError
#     naming the operator and the user's line that made it (an MXNetError too, as MXNet's
#     was); graphs without one stay async.
_OUT_OF_BOUNDS = {"take": "take operator contains indices out of bound"}
# On a take checking the rows of an index_copy (NOTE [index_copy out of bounds] in
# cached_graph.py): the op it checks.
CHECKS_ATTR = "__gcf_checks__"


def bounds_checking_nodes(nodes: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The JSON ``nodes`` that check their indices when they run, made at a user's line
    (NOTE [an index out of bounds at run time])."""
    return [n for n in nodes if n["op"] in _OUT_OF_BOUNDS and SOURCE_ATTR in n.get("attrs", {})
            and n["attrs"].get("mode") == "raise"]


class IndexOutOfBoundsError(IndexError, mx.MXNetError):
    """An operator of a body found an index out of bounds when it ran (NOTE [an index out of
    bounds at run time]); an MXNetError too, as what it replaces."""


def bounds_error(nodes: Sequence[Dict[str, Any]],
                 err: Exception) -> Optional[IndexOutOfBoundsError]:
    """The IndexError, at the user's line, for MXNet's error ``err`` that one of the
    ``bounds_checking_nodes`` found an index out of bounds; None for other errors."""
    text = str(err)
    found = [n for n in nodes if _OUT_OF_BOUNDS[n["op"]] in text]
    if not found:
        return None
    checked = [n for n in found if CHECKS_ATTR in n["attrs"]]
    if checked:    # NOTE [index_copy out of bounds] in cached_graph.py
        return IndexOutOfBoundsError(
            "%s: index_copy: an index is out of bounds for the rows of the array it copies "
            "into (MXNet 1.9.1 checks none and writes outside the array). Keep each index in "
            "[0, rows)" % " or ".join(sorted({n["attrs"][SOURCE_ATTR] for n in checked})))
    return IndexOutOfBoundsError(
        "%s: %s: an index is out of bounds for axis %s of the array it indexes (mode='raise'). "
        "Keep the indices below that axis's size, or use mode='clip' or mode='wrap'"
        % (" or ".join(sorted({n["attrs"][SOURCE_ATTR] for n in found})), found[0]["op"],
           found[0]["attrs"].get("axis", "0")))


def graph_operator_error(nodes: Sequence[Dict[str, Any]], err: Exception
                         ) -> Optional[OperatorShapeError]:
    """The OperatorShapeError for MXNet's error ``err`` about a node of the JSON ``nodes`` of a
    graph it ran or inferred; None when it names none of them with the user's line."""
    match = OPERATOR_NAMED.search(str(err))
    node = match and next((n for n in nodes if n["name"] == match.group(1)), None)
    return operator_error(node, None, err) if node else None
