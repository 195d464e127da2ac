"""What ``gluon_cf.foreach``'s data must be, checked before a step runs: rows MXNet can take
one at a time, of one length along axis 0, and at least one step (NOTE [a foreach of no step]
in ``foreach.py``)."""
import mxnet as mx

from ..checks import ArrayTypeError, MismatchError, op_at
from ..errors import ZeroSizeError
from ..zero_size import shape_or_no_element
from .loops import inferred_step_rows

OP = "foreach"


def check_sliceable(flat_data):
    """A RowSparseNDArray gives no row by an integer index (MXNet's eager foreach fails on it
    with its bare Exception "__getitem__ with int key is not implemented")."""
    for k, d in enumerate(flat_data):
        if d.stype == "row_sparse":
            raise ArrayTypeError("%s: data[%d] is a RowSparseNDArray, whose rows MXNet cannot "
                                 "take one step at a time; convert it with "
                                 ".tostype('default') (or 'csr')" % (op_at(OP), k))


def length_of(array, where):
    """The length of data ``array`` along axis 0 (0-d data is refused before, by
    ``check_data_has_axis``); a ZeroSizeError at the
    user's line for a 1-D array of no element, whose shape MXNet 1.x cannot read (NOTE [a
    one-dimensional result of no element] in ``graph/partitioned.py``)."""
    try:
        shape = shape_or_no_element(array)
    except mx.MXNetError:
        raise ZeroSizeError(
            "gluon_cf.foreach%s: data is a one-dimensional array of no element (a boolean_mask "
            "of 1-D data that kept nothing), which MXNet 1.x cannot hold (its legacy shapes "
            "read (0,) as unknown), eagerly either. Give the data a trailing axis "
            "(x.reshape((-1, 1)), then (0, 1) rows are possible) or guard the loop with "
            "gluon_cf.cond on the mask's sum" % (" at %s" % where if where else ""),
            located=bool(where)) from None
    return shape[0] if shape else 0


def check_lengths(lengths, where=None, no_step_rows=None):
    """``no_step_rows``: for a converted ``for`` (NOTE [a foreach of no step]), its step
    outputs over data of no row (``no_step_outputs``), or False where they are unknown."""
    at = " at %s" % where if where else ""
    if len(set(lengths)) > 1:
        # (an MXNetError too: MXNet 1.9.1's foreach raises one from infer_shape, bind, forward)
        raise MismatchError("gluon_cf.foreach%s: all data arrays must have the same length "
                            "along axis 0, got %s" % (at, ", ".join(
                                "data[%d]: %d" % (i, n) for i, n in enumerate(lengths))))
    if lengths[0] == 0 and no_step_rows is False:
        raise ZeroSizeError(
            "gluon_cf: the for loop%s runs over no row here (a boolean_mask keeping none), and "
            "what it collects per row has a shape known only by running its body on a row, "
            "so its rows of none have no shape in a hybridized graph (MXNet 1.x's legacy "
            "shapes); guard the loop with an if on the row count, or collect values of a "
            "shape known without running it" % at, located=bool(where))
    if lengths[0] == 0 and no_step_rows is None:
        raise ZeroSizeError("gluon_cf.foreach%s: data has length 0 along axis 0; at least one "
                            "step is required (its outputs would have no step to take their "
                            "shape from, and MXNet's own foreach fails on no step too): skip "
                            "the call for empty data" % at, located=bool(where))


def no_step_outputs(node, data, states, captured):
    """The step outputs of a converted ``for`` over data of no row (NOTE [a foreach of no
    step]): rows of none of the shapes the body's graph infers for one step, or False where
    inference cannot tell them (``inferred_step_rows``), which ``check_lengths`` refuses;
    None for the user's own foreach."""
    num_out = node.spec["num_out_data"]
    if not node.spec.get("no_steps_ok"):
        return None
    if num_out == 0:
        return []
    body = node.graphs["body"]
    slots = [d.shape[1:] for d in data] + [x.shape for x in list(states) + list(captured)]
    try:
        rows = inferred_step_rows(body, slots, num_out)
        dtypes = body.infer_type([x.dtype for x in list(data) + list(states) +
                                  list(captured)])[1][:num_out]
    except (mx.MXNetError, ValueError):
        return False
    if rows is None or None in dtypes:
        return False
    ctx = data[0].context
    # (mx.nd.zeros cannot make an array of no row under MXNet 1.x's shapes; empty can)
    return [mx.nd.empty((0,) + row, ctx=ctx, dtype=t) for row, t in zip(rows, dtypes)]
