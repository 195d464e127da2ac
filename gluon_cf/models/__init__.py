"""Tree cells, eager reference implementations and (later) recursive tree models."""
from gluon_cf.models.cells import (BinaryTreeLSTMCell, ChildSumTreeLSTMCell,  # noqa: F401
                                   RNTNCell, TopDownTreeLSTMCell, TreeRNNCell)
from gluon_cf.models.reference import (childsum_eager, rntn_eager,  # noqa: F401
                                       topdown_eager, treelstm_eager, treernn_eager)
