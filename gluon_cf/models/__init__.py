"""Tree cells and models."""
from gluon_cf.models.cells import (BinaryTreeLSTMCell, ChildSumTreeLSTMCell, TreeRNNCell,
                                   RNTNCell, TopDownTreeLSTMCell)
from gluon_cf.models.reference import (treelstm_eager, childsum_eager, treernn_eager,
                                       rntn_eager, topdown_eager)
