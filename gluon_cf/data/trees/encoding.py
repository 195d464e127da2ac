"""Trees as the arrays every model and benchmark in gluon_cf consumes: `encode_tree` (one tree
as post-order int32 node arrays, root last, with CSR child lists), `build_vocab`, and
`batchify_forest`, which concatenates a mini-batch into one `EncodedForest`; both know their
heights and levels, for level-batched models."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from .tree import Tree, _abbrev

def _i32(values):
    return np.asarray(values, dtype=np.int32)


@dataclass(eq=False)
class _TreeArrays:
    """The node arrays and methods shared by `EncodedTree` and `EncodedForest` (post-order CSR
    node arrays, described at `EncodedTree`)."""

    tokens: np.ndarray
    left: np.ndarray
    right: np.ndarray
    labels: np.ndarray
    child_ptr: np.ndarray
    child_idx: np.ndarray

    @property
    def num_nodes(self):
        return len(self.tokens)

    def heights(self):
        """int32 (N,): 0 for leaves, 1 + the largest child height for internal nodes."""
        ptr, idx = self.child_ptr.tolist(), self.child_idx.tolist()
        height = [0] * len(self.tokens)
        for i in range(len(height)):
            if ptr[i] != ptr[i + 1]:  # children come earlier in post-order
                height[i] = 1 + max(height[j] for j in idx[ptr[i]:ptr[i + 1]])
        return np.asarray(height, dtype=np.int32)

    def levels(self):
        """Node indices grouped by height: ``levels()[h]`` is an ascending int32 array.

        Every node of level h depends only on levels < h, so level-batched models can run one
        batched cell call per level, leaves first.
        """
        height = self.heights()
        order = np.argsort(height, kind="stable").astype(np.int32)
        return np.split(order, np.cumsum(np.bincount(height))[:-1])


@dataclass(eq=False)
class EncodedTree(_TreeArrays):
    """One tree as flat int32 arrays, nodes in post-order (children before parents, root last).

    Attributes:
        tokens: (N,) vocab index of each leaf's word; internal nodes get the padding index.
        left, right: (N,) index of the first / last child, -1 for leaves. For binary trees these
            are the left and right child; for n-ary trees (``binary=False``) use the CSR arrays.
        labels: (N,) label of each node.
        child_ptr: (N+1,) CSR offsets; the children of node i, in order, are
            ``child_idx[child_ptr[i]:child_ptr[i+1]]``.
        child_idx: (E,) child indices, E = N - 1.
        root: index of the root, always N - 1.
    """

    root: int


def encode_tree(tree: Tree, vocab: Any, binary: bool = True) -> EncodedTree:
    """Encode `tree` as an `EncodedTree` using `vocab` (a `gluonnlp.Vocab`, see `build_vocab`).

    Reference semantics::

        nodes = list(tree.postorder())
        tokens[i] = vocab[nodes[i].word] if leaf else vocab[vocab.padding_token]
        child_idx lists, for each node in order, the positions of its children in `nodes`
        left[i], right[i] = first and last child of node i (-1, -1 for leaves)

    Args:
        binary: if True (default), require every node to have 0 or 2 children, as binary models
            (TreeLSTM etc.) read only `left`/`right`; call `Tree.binarize` first for n-ary trees.
            If False, any arity is accepted and `left`/`right` are the first/last child.

    Raises:
        ValueError: if ``binary=True`` and a node has another number of children, or if `vocab`
            has no padding token.

    Example::

        >>> from gluon_cf.data import build_vocab, encode_tree, parse_tree
        >>> tree = parse_tree("(3 (2 not) (1 bad))")
        >>> encoded = encode_tree(tree, build_vocab([tree]))
        >>> encoded.left, encoded.right, encoded.labels, encoded.root
        (array([-1, -1,  0], dtype=int32), array([-1, -1,  1], dtype=int32),
         array([2, 1, 3], dtype=int32), 2)
    """
    if getattr(vocab, "padding_token", None) is None:
        raise ValueError("encode_tree: vocab has no padding_token, which internal nodes use; "
                         "build the vocab with build_vocab()")
    pad = vocab[vocab.padding_token]
    tokens, labels, left, right, child_ptr, child_idx = [], [], [], [], [0], []
    done: list = []  # post-order indices of encoded subtrees whose parent is not yet encoded
    for i, node in enumerate(tree.postorder()):
        k = len(node.children)
        if k == 0:
            tokens.append(node.word)
            left.append(-1)
            right.append(-1)
        else:
            if binary and k != 2:
                raise ValueError(
                    f"encode_tree: node {i} (post-order index) has {k} children, but binary=True "
                    f"needs 0 or 2: {_abbrev(node.to_sexpr())}. Call tree.binarize() first, or "
                    "pass binary=False for n-ary models")
            kids = done[-k:]
            del done[-k:]
            tokens.append(None)
            left.append(kids[0])
            right.append(kids[-1])
            child_idx.extend(kids)
        labels.append(node.label)
        child_ptr.append(len(child_idx))
        done.append(i)
    leaf_ids = iter(vocab[[w for w in tokens if w is not None]])
    tokens = [pad if w is None else next(leaf_ids) for w in tokens]
    return EncodedTree(_i32(tokens), _i32(left), _i32(right), _i32(labels), _i32(child_ptr),
                       _i32(child_idx), root=len(tokens) - 1)


def build_vocab(trees: Iterable[Tree], min_freq: int = 1) -> Any:
    """A `gluonnlp.Vocab` of the leaf words of `trees` (words seen fewer than `min_freq` times
    map to ``<unk>``). Its ``<pad>`` token is the token of internal nodes; no bos/eos tokens.

    Example::

        >>> from gluon_cf.data import build_vocab, parse_tree
        >>> vocab = build_vocab([parse_tree("(3 (2 It) (4 (2 is) (4 good)))")])
        >>> len(vocab), vocab["good"], vocab["unseen"] == vocab[vocab.unknown_token]
        (5, 3, True)
    """
    import gluonnlp  # deferred: importing gluonnlp loads mxnet

    counter = gluonnlp.data.count_tokens(
        itertools.chain.from_iterable(tree.leaves() for tree in trees))
    return gluonnlp.Vocab(counter, min_freq=min_freq, bos_token=None, eos_token=None)


@dataclass(eq=False)
class EncodedForest(_TreeArrays):
    """A mini-batch of B encoded trees concatenated into one forest.

    The node arrays (`tokens`, `left`, `right`, `labels`, `child_ptr`, `child_idx`) are those of
    `EncodedTree`, concatenated with every child index shifted to point into the concatenation
    (-1 stays -1); each tree stays in post-order, so children still come before parents.

    Attributes:
        roots: (B,) index of each tree's root, ``offsets[1:] - 1``.
        offsets: (B+1,) tree b occupies nodes ``offsets[b]:offsets[b+1]``.
        root_labels: (B,) label of each root, ``labels[roots]``.
    """

    roots: np.ndarray
    offsets: np.ndarray
    root_labels: np.ndarray

    @property
    def num_trees(self):
        return len(self.roots)

    def tree(self, b):
        """The `EncodedTree` of tree `b`, indices shifted back to start at 0."""
        start, stop = int(self.offsets[b]), int(self.offsets[b + 1])
        e0, e1 = int(self.child_ptr[start]), int(self.child_ptr[stop])
        left, right = self.left[start:stop], self.right[start:stop]
        return EncodedTree(self.tokens[start:stop].copy(),
                           _i32(np.where(left >= 0, left - start, -1)),
                           _i32(np.where(right >= 0, right - start, -1)),
                           self.labels[start:stop].copy(),
                           _i32(self.child_ptr[start:stop + 1] - e0),
                           _i32(self.child_idx[e0:e1] - start), root=stop - start - 1)

    def split(self):
        """Undo `batchify_forest`: the list of `EncodedTree`."""
        return [self.tree(b) for b in range(self.num_trees)]


def batchify_forest(encoded_trees: Sequence[EncodedTree]) -> EncodedForest:
    """Concatenate a list of `EncodedTree` into an `EncodedForest` (usable as a DataLoader
    ``batchify_fn``).

    gluonnlp's ``batchify.Stack`` is not used for the root labels: it returns MXNet NDArrays in
    shared memory, while this format is numpy throughout (callers index with it).

    Example: two trees of 3 and 1 nodes become one forest of 4 nodes::

        >>> from gluon_cf.data import batchify_forest, build_vocab, encode_tree, parse_tree
        >>> trees = [parse_tree("(3 (2 not) (1 bad))"), parse_tree("(4 good)")]
        >>> vocab = build_vocab(trees)
        >>> forest = batchify_forest([encode_tree(tree, vocab) for tree in trees])
        >>> forest.roots, forest.left, forest.root_labels
        (array([2, 3], dtype=int32), array([-1, -1,  0, -1], dtype=int32),
         array([3, 4], dtype=int32))
    """
    trees = list(encoded_trees)
    if not trees:
        raise ValueError("batchify_forest: got no trees; a forest needs at least one")
    for b, t in enumerate(trees):
        if t.root != t.num_nodes - 1:
            raise ValueError(f"batchify_forest: tree {b} has root {t.root}, expected the last "
                             f"node {t.num_nodes - 1}; encode trees with encode_tree()")
    sizes = np.array([t.num_nodes for t in trees], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    node_shift = np.repeat(offsets[:-1], sizes)
    edge_counts = [len(t.child_idx) for t in trees]
    edge_offsets = np.concatenate([[0], np.cumsum(edge_counts)]).astype(np.int32)

    def cat(name):
        return np.concatenate([getattr(t, name) for t in trees]).astype(np.int32)

    def shifted(name):
        a = cat(name)
        return np.where(a >= 0, a + node_shift, a).astype(np.int32)

    child_ptr = np.concatenate([t.child_ptr[:-1] + e for t, e in zip(trees, edge_offsets)]
                               + [edge_offsets[-1:]]).astype(np.int32)
    child_idx = (cat("child_idx") + np.repeat(offsets[:-1], edge_counts)).astype(np.int32)
    labels = cat("labels")
    roots = (offsets[1:] - 1).astype(np.int32)
    return EncodedForest(cat("tokens"), shifted("left"), shifted("right"), labels, child_ptr,
                         child_idx, roots, offsets, labels[roots])

