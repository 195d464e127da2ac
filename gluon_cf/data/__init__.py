"""Datasets and data formats for gluon_cf models (see `gluon_cf.data.trees`)."""
from .trees import (
    SHAPES, EncodedForest, EncodedTree, Tree, TreeFormatError, batchify_forest, binary_label,
    build_vocab, encode_tree, parse_tree, read_trees, synthetic_treebank, write_trees,
)

__all__ = [
    "Tree", "TreeFormatError", "parse_tree", "read_trees", "write_trees",
    "EncodedTree", "EncodedForest", "encode_tree", "build_vocab", "batchify_forest",
    "SHAPES", "synthetic_treebank", "binary_label",
]
