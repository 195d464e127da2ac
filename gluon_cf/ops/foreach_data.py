"""What ``gluon_cf.foreach``'s data must be, checked before a step runs: rows MXNet can take
one at a time, of one length along axis 0, and at least one step (NOTE [a foreach of no step]
in ``foreach.py``)."""
import mxnet as mx

from ..checks import ArrayTypeError, MismatchError, op_at
from ..errors import ZeroSizeError
from ..zero_size import shape_or_no_element

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
    """The length of data ``array`` along axis 0 (0 for a scalar); a ZeroSizeError at the
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


def check_lengths(lengths, where=None, num_out=None):
    """``num_out``: the body's per-step outputs, given for a converted ``for`` (NOTE [a foreach
    of no step])."""
    at = " at %s" % where if where else ""
    if len(set(lengths)) > 1:
        # (an MXNetError too: MXNet 1.9.1's foreach raises one from infer_shape, bind, forward)
        raise MismatchError("gluon_cf.foreach%s: all data arrays must have the same length "
                            "along axis 0, got %s" % (at, ", ".join(
                                "data[%d]: %d" % (i, n) for i, n in enumerate(lengths))))
    if lengths[0] == 0 and num_out != 0:
        raise ZeroSizeError("gluon_cf.foreach%s: data has length 0 along axis 0; at least one "
                            "step is required (its outputs would have no step to take their "
                            "shape from, and MXNet's own foreach fails on no step too): skip "
                            "the call for empty data" % at, located=bool(where))
