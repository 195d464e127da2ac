"""Recursive tree models (TreeLSTM, TreeRNN, RNTN, child-sum TreeLSTM, a top-down tree generator),
their cells, and eager reference implementations of each model."""
from gluon_cf.models.cells import (BinaryTreeLSTMCell, ChildSumTreeLSTMCell,
                                   RNTNCell, TopDownTreeLSTMCell, TreeRNNCell)
from gluon_cf.models.recursive import (RNTN, ChildSumTreeLSTM, TopDownTreeLSTM, TreeLSTM,
                                       TreeRNN)
from gluon_cf.models.reference import (childsum_eager, rntn_eager,
                                       topdown_eager, treelstm_eager, treernn_eager)

__all__ = ["TreeLSTM", "TreeRNN", "RNTN", "ChildSumTreeLSTM", "TopDownTreeLSTM",
           "BinaryTreeLSTMCell", "TreeRNNCell", "RNTNCell", "ChildSumTreeLSTMCell",
           "TopDownTreeLSTMCell",
           "treelstm_eager", "treernn_eager", "rntn_eager", "childsum_eager", "topdown_eager"]
