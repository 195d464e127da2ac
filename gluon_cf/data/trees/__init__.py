"""Tree data for tree-structured models, in four rooms, each importing only those below it:
`tree` (the `Tree` type, NOTE [Iterative traversal]), `ptb` (the PTB / SST s-expression format:
`parse_tree`, `read_trees`, `write_trees`), `encoding` (`encode_tree`, `build_vocab`,
`batchify_forest`: the post-order arrays every model and benchmark in gluon_cf consumes) and
`synthetic` (`synthetic_treebank`, `binary_label`: an SST-like generator whose labels follow a
hidden compositional rule, so that structure matters).
"""
from .encoding import EncodedForest, EncodedTree, batchify_forest, build_vocab, encode_tree
from .ptb import TreeFormatError, parse_tree, read_trees, write_trees
from .synthetic import SHAPES, binary_label, synthetic_treebank
from .synthetic import INTENSIFIERS, LEXICON, NEGATORS  # noqa: F401 -- the lexicon, for tests
from .tree import Tree

__all__ = [
    "Tree", "TreeFormatError", "parse_tree", "read_trees", "write_trees",
    "EncodedTree", "EncodedForest", "encode_tree", "build_vocab", "batchify_forest",
    "SHAPES", "synthetic_treebank", "binary_label",
]
