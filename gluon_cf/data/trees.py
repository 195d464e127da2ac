"""Tree data for tree-structured models: read, encode, batch and synthesize treebanks.

The module has three parts, top to bottom:

1. `Tree`, `parse_tree`, `read_trees`, `write_trees`: the PTB / Stanford Sentiment Treebank
   s-expression format, one tree per line::

       (3 (2 It) (4 (2 's) (3 good)))

   Every node is ``(label child ...)`` or ``(label word)``; a label is an integer and a word is any
   run of characters other than whitespace and parentheses (so SST tokens such as ``-LRB-``,
   ``n't`` and ``1\\/2`` need no quoting).

2. `EncodedTree`, `encode_tree`, `build_vocab`, `EncodedForest`, `batchify_forest`: the array
   format every model and benchmark in gluon_cf consumes (nodes in post-order, root last).

3. `synthetic_treebank`, `binary_label`: an SST-like generator, since no real treebank can be
   downloaded here. Its labels follow a hidden compositional rule, so that structure matters.

NOTE [Iterative traversal]: trees can be very deep (benchmarks build linear trees of 5,000+ nodes,
and adversarial input may nest 100,000 levels), so the parser and every traversal use an explicit
stack; nothing here recurses in Python, and no depth hits ``sys.getrecursionlimit()``.
"""
from __future__ import annotations

import bisect
import itertools
import numbers
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, List, Optional, Sequence, TextIO, Union

import numpy as np

__all__ = [
    "Tree", "TreeFormatError", "parse_tree", "read_trees", "write_trees",
    "EncodedTree", "EncodedForest", "encode_tree", "build_vocab", "batchify_forest",
    "SHAPES", "synthetic_treebank", "binary_label",
]

_TOKEN_RE = re.compile(r"\(|\)|[^\s()]+")
_WORD_RE = re.compile(r"[^\s()]+")
_LABEL_RE = re.compile(r"-?[0-9]+")


def _i32(values):
    return np.asarray(values, dtype=np.int32)


def _abbrev(text, limit=60):
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ---------------------------------------------------------------------------------------------
# 1. Trees and the s-expression format
# ---------------------------------------------------------------------------------------------

class Tree:
    """A labelled ordered tree: a leaf holds a `word`, an internal node holds `children`.

    ``label`` is the node's int class label (0..4 in SST); ``word`` the token of a leaf, None
    for an internal node; ``children`` the list of child `Tree` objects, empty for a leaf.
    Trees compare equal when labels, words and shapes agree. All methods are iterative, so
    trees of any depth (a 5,000-node chain) work without Python's recursion limit.

    >>> tree = Tree(3, children=[Tree(2, "a"), Tree(4, "fine")])
    >>> tree.to_sexpr()
    '(3 (2 a) (4 fine))'
    >>> [leaf for leaf in tree.leaves()], tree.depth()
    (['a', 'fine'], 1)
    """

    __slots__ = ("label", "word", "children")

    def __init__(self, label: int, word: Optional[str] = None,
                 children: Iterable["Tree"] = ()) -> None:
        children = list(children)
        if isinstance(label, bool) or not isinstance(label, numbers.Integral):
            raise TypeError(f"Tree: label must be an int, got {label!r}")
        if (word is None) == (not children):
            raise ValueError("Tree: a node needs either a word (leaf) or children (internal node), "
                             f"not both or neither; got word={word!r} and {len(children)} children")
        if word is not None and not (isinstance(word, str) and _WORD_RE.fullmatch(word)):
            raise ValueError(f"Tree: a word must be a non-empty str without whitespace or "
                             f"parentheses, got {word!r}")
        if not all(isinstance(c, Tree) for c in children):
            raise TypeError("Tree: children must be Tree objects")
        self.label, self.word, self.children = int(label), word, children

    @classmethod
    def _new(cls, label, word, children):
        """Unchecked constructor for trusted callers (parser, generator, binarize)."""
        tree = cls.__new__(cls)
        tree.label, tree.word, tree.children = label, word, children
        return tree

    @property
    def is_leaf(self):
        return self.word is not None

    def postorder(self):
        """Yield the nodes children-first, left to right, the root last."""
        stack = [(self, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded or not node.children:
                yield node
            else:
                stack.append((node, True))
                stack.extend((child, False) for child in reversed(node.children))

    def leaves(self):
        """The words of the leaves, left to right."""
        words, stack = [], [self]
        while stack:
            node = stack.pop()
            if node.word is not None:
                words.append(node.word)
            else:
                stack.extend(reversed(node.children))
        return words

    def __len__(self):
        """Number of nodes (leaves and internal nodes)."""
        count, stack = 0, [self]
        while stack:
            count += 1
            stack.extend(stack.pop().children)
        return count

    def depth(self):
        """Number of edges on the longest root-to-leaf path (a single leaf has depth 0)."""
        deepest, stack = 0, [(self, 0)]
        while stack:
            node, d = stack.pop()
            deepest = max(deepest, d)
            stack.extend((child, d + 1) for child in node.children)
        return deepest

    def to_sexpr(self):
        """The canonical one-line s-expression; ``parse_tree(t.to_sexpr()) == t``."""
        parts, stack = [], [self]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                parts.append(item)
            elif item.word is not None:
                parts.append(f"({item.label} {item.word})")
            else:
                parts.append(f"({item.label}")
                stack.append(")")
                for child in reversed(item.children):
                    stack.append(child)
                    stack.append(" ")
        return "".join(parts)

    def binarize(self):
        """Return an equivalent binary tree (every node has 0 or 2 children); `self` is unchanged.

        * An n-ary node ``(L c1 c2 ... ck)`` with k > 2 is right-factored into
          ``(L c1 (L c2 (... (L ck-1 ck))))``: the new internal nodes keep the parent label L.
        * A unary node ``(L c)`` is collapsed into its child, which takes the top label L; so a
          unary chain ``(4 (3 (1 good)))`` becomes the leaf ``(4 good)``. The labels of the
          collapsed lower nodes are dropped.
        """
        done = []  # binarized subtrees whose parent is not yet built
        for node in self.postorder():
            k = len(node.children)
            if k == 0:
                done.append(Tree._new(node.label, node.word, []))
                continue
            kids = done[-k:]
            del done[-k:]
            if k == 1:
                only = kids[0]
                done.append(Tree._new(node.label, only.word, only.children))
                continue
            tree = Tree._new(node.label, None, kids[-2:])
            for child in reversed(kids[:-2]):
                tree = Tree._new(node.label, None, [child, tree])
            done.append(tree)
        return done[0]

    def __eq__(self, other):
        if not isinstance(other, Tree):
            return NotImplemented
        stack = [(self, other)]
        while stack:
            a, b = stack.pop()
            if a.label != b.label or a.word != b.word or len(a.children) != len(b.children):
                return False
            stack.extend(zip(a.children, b.children))
        return True

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self):
        return f"Tree({_abbrev(self.to_sexpr())!r})"


class TreeFormatError(ValueError):
    """Malformed s-expression; the message reads ``file:line:column: reason`` (1-based)."""

    def __init__(self, reason, filename, line, column):
        self.reason, self.filename, self.line, self.column = reason, filename, line, column
        super().__init__(f"{filename or '<input>'}:{line}:{column}: {reason}")

    def __reduce__(self):
        return type(self), (self.reason, self.filename, self.line, self.column)


# Parser states: what the next token must be.
_OPEN, _LABEL, _BODY, _CLOSE_LEAF, _CHILD_OR_CLOSE, _DONE = range(6)
_EXPECTED_AT_END = {
    _OPEN: "expected '(' but found end of line",
    _LABEL: "missing label: expected an integer label but found end of line",
    _BODY: "empty node: expected a word or a child tree but found end of line",
    _CLOSE_LEAF: "expected ')' but found end of line",
    _CHILD_OR_CLOSE: "expected ')' but found end of line",
}


def parse_tree(text: str, line: int = 1, *, filename: Optional[str] = None,
               max_depth: Optional[int] = None) -> Tree:
    """Parse one s-expression tree from `text` (see the module docstring for the format).

    Args:
        text: the tree, normally one line (newlines inside are treated as spaces).
        line: line number of `text` in its file, used in error messages.
        filename: file name used in error messages, if any.
        max_depth: if given, reject trees nested more than this many parentheses deep. The parser
            is iterative, so without it depth is limited only by memory.

    Raises:
        TreeFormatError: on malformed input, with file, line, column and what was wrong.

    Example::

        >>> from gluon_cf.data import TreeFormatError, parse_tree
        >>> tree = parse_tree("(3 (2 not) (1 bad))")
        >>> tree.label, tree.leaves()
        (3, ['not', 'bad'])
        >>> try:
        ...     parse_tree("(3 (2 not) (1 bad)", filename="dev.txt", line=7)
        ... except TreeFormatError as error:
        ...     print(error)
        dev.txt:7:19: expected ')' but found end of line (the '(' at 7:1 is not closed)
    """
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def fail(pos, reason):
        i = bisect.bisect_right(line_starts, pos) - 1
        raise TreeFormatError(reason, filename, line + i, pos - line_starts[i] + 1)

    def where(pos):
        i = bisect.bisect_right(line_starts, pos) - 1
        return f"{line + i}:{pos - line_starts[i] + 1}"

    open_nodes: list = []  # [label, word, children, position of '('] of unclosed nodes
    state, root = _OPEN, None
    for match in _TOKEN_RE.finditer(text):
        tok, pos = match.group(), match.start()
        shown = f"'{_abbrev(tok, 30)}'"
        if state == _DONE:
            fail(pos, f"trailing garbage after the tree: found {shown}")
        elif tok == "(" and state in (_OPEN, _BODY, _CHILD_OR_CLOSE):
            if max_depth is not None and len(open_nodes) >= max_depth:
                fail(pos, f"tree nested deeper than max_depth={max_depth}")
            open_nodes.append([None, None, [], pos])
            state = _LABEL
        elif state == _OPEN:
            fail(pos, f"expected '(' to start a tree but found {shown}")
        elif state == _LABEL:
            if tok in "()":
                fail(pos, f"missing label: expected an integer label after '(' but found {shown}")
            if not _LABEL_RE.fullmatch(tok):
                fail(pos, f"non-integer label {shown}")
            open_nodes[-1][0] = int(tok)
            state = _BODY
        elif tok == ")" and state != _BODY:
            label, word, children, _ = open_nodes.pop()
            node = Tree._new(label, word, children)
            if open_nodes:
                open_nodes[-1][2].append(node)
                state = _CHILD_OR_CLOSE
            else:
                root, state = node, _DONE
        elif state == _BODY:
            if tok == ")":
                fail(pos, f"empty node: expected a word or a child tree after label "
                          f"{open_nodes[-1][0]} but found ')'")
            open_nodes[-1][1] = tok
            state = _CLOSE_LEAF
        elif state == _CLOSE_LEAF:
            word = open_nodes[-1][1]
            if tok == "(":
                fail(pos, f"expected ')' after the word '{word}' but found '(': a node holds "
                          "either one word or child trees")
            fail(pos, f"leaf with two words: expected ')' after '{word}' but found {shown}")
        else:  # _CHILD_OR_CLOSE, and tok is a word
            fail(pos, f"expected '(' or ')' but found the word {shown}: a node holds either one "
                      "word or child trees")
    if state != _DONE:
        reason = _EXPECTED_AT_END[state]
        if state in (_CLOSE_LEAF, _CHILD_OR_CLOSE):
            reason += f" (the '(' at {where(open_nodes[-1][3])} is not closed)"
        fail(len(text.rstrip("\r\n")), reason)
    assert root is not None   # state _DONE: a tree was closed
    return root


def read_trees(source: Union[str, os.PathLike, Iterable[str]], *,
               max_depth: Optional[int] = None) -> List[Tree]:
    """Read one tree per line from a path, an open text file or an iterable of lines.

    Blank lines are skipped (but still counted for line numbers in errors). A `str` is taken as a
    path; to parse text in memory pass ``text.splitlines()``. Returns a list of `Tree`.

    Raises:
        TreeFormatError: naming the file, line and column of the first malformed tree.

    Example::

        >>> from gluon_cf.data import read_trees
        >>> trees = read_trees(["(3 (2 It) (4 good))", "", "(1 (1 bad) (2 .))"])
        >>> [tree.to_sexpr() for tree in trees]
        ['(3 (2 It) (4 good))', '(1 (1 bad) (2 .))']
    """
    if isinstance(source, (str, os.PathLike)):
        if isinstance(source, str) and source.lstrip().startswith("("):
            raise ValueError("read_trees: got tree text where a path was expected; pass "
                             "text.splitlines() or use parse_tree(text)")
        with open(source, encoding="utf-8") as f:
            return _read_lines(f, os.fspath(source), max_depth)
    name = getattr(source, "name", None)
    return _read_lines(source, name if isinstance(name, str) else None, max_depth)


def _read_lines(lines, filename, max_depth):
    trees = []
    for number, text in enumerate(lines, start=1):
        if not isinstance(text, str):
            raise TypeError(f"read_trees: expected lines of str, got {type(text).__name__} "
                            f"at line {number}")
        if text.strip():
            trees.append(parse_tree(text, number, filename=filename, max_depth=max_depth))
    return trees


def write_trees(trees: Iterable[Tree], path: Union[str, os.PathLike, TextIO]) -> None:
    """Write `trees` one s-expression per line to `path` (a path or an open text file).

    Example: a round trip through a file::

        >>> from gluon_cf.data import parse_tree, read_trees, write_trees
        >>> trees = [parse_tree("(3 (2 It) (4 good))"), parse_tree("(1 bad)")]
        >>> write_trees(trees, "trees.txt")
        >>> read_trees("trees.txt") == trees
        True
    """
    text = "".join(tree.to_sexpr() + "\n" for tree in trees)
    if isinstance(path, (str, os.PathLike)):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write(text)


# ---------------------------------------------------------------------------------------------
# 2. Array encoding and forest batching
# ---------------------------------------------------------------------------------------------

class _TreeArrays:
    """Methods shared by `EncodedTree` and `EncodedForest` (post-order CSR node arrays)."""

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

    tokens: np.ndarray
    left: np.ndarray
    right: np.ndarray
    labels: np.ndarray
    child_ptr: np.ndarray
    child_idx: np.ndarray
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
        (array([-1, -1,  0], dtype=int32), array([-1, -1,  1], dtype=int32), array([2, 1, 3], dtype=int32), 2)
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

    tokens: np.ndarray
    left: np.ndarray
    right: np.ndarray
    labels: np.ndarray
    child_ptr: np.ndarray
    child_idx: np.ndarray
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
        (array([2, 3], dtype=int32), array([-1, -1,  0, -1], dtype=int32), array([3, 4], dtype=int32))
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


# ---------------------------------------------------------------------------------------------
# 3. Synthetic SST-like treebanks
# ---------------------------------------------------------------------------------------------

SHAPES = ("balanced", "moderate", "sst", "linear")

# Polarity lexicon: word -> strength. Every other word scores 0.
POSITIVE = {"good": 1, "fun": 1, "charming": 1, "funny": 1, "moving": 1, "enjoyable": 1,
            "great": 2, "brilliant": 2, "excellent": 2, "masterpiece": 2}
NEGATIVE = {"bad": -1, "dull": -1, "boring": -1, "weak": -1, "tedious": -1,
            "awful": -2, "terrible": -2, "mess": -2, "worst": -2, "unwatchable": -2}
NEGATORS = ("not", "never", "n't")
INTENSIFIERS = ("very", "really")
NEUTRAL = ("the", "a", "film", "movie", "it", "'s", "is", "of", "and", "story", "this", "that",
           "director", "with", "in", "to", "as", "its", "cast", "plot", "about", "one", "-LRB-",
           "-RRB-", "characters", ",", ".", "--", "script", "1\\/2")
LEXICON = {**POSITIVE, **NEGATIVE}

# Token category probabilities (the rest is neutral filler).
_P_NEGATOR, _P_INTENSIFIER, _P_POLAR = 0.05, 0.05, 0.15
_P_SHORT = 0.03  # fraction of 1..3-token phrases, so single-token trees occur as in SST


def _score_label(score):
    """SST class of a node score: <= -3 -> 0, -2..-1 -> 1, 0 -> 2, 1..2 -> 3, >= 3 -> 4."""
    return 0 if score <= -3 else 1 if score < 0 else 2 if score == 0 else 3 if score < 3 else 4


def synthetic_treebank(num_trees: int, shape: str = "sst", seed: int = 0, *,
                       mean_length: float = 19.0, max_length: int = 55,
                       length: Optional[int] = None) -> List[Tree]:
    """Generate `num_trees` binary SST-like sentiment trees, deterministic per `seed`.

    Sentences: lengths follow a log-normal with mean `mean_length` (sigma 0.5, as in SST: mean
    ~19, max ~55), rounded and clipped to 1..`max_length`; 3% are short 1..3-token phrases. Pass
    `length` to give every tree exactly that many tokens instead. Tokens are drawn from a small
    built-in vocabulary: `POSITIVE` / `NEGATIVE` polar words with strengths 1 or 2, `NEGATORS`,
    `INTENSIFIERS` and `NEUTRAL` filler; each sentence leans positive or negative.
    The same seed gives the same sentences for every shape; only the bracketing differs.

    Shapes (EuroSys'18 recursion paper, Table 1), validated against `SHAPES`:

    * ``'balanced'``: complete binary bracketing (left half = ceil(n/2)), depth ceil(log2 n).
    * ``'sst'`` / ``'moderate'`` (aliases): random parse-like bracketing biased to
      right-branching: a span's left part is a single token with probability 1/2, else uniform
      in size.
    * ``'linear'``: fully left-branching chain ``(((w1 w2) w3) ...)``, depth n - 1.

    Hidden label rule, applied bottom-up to every node::

        score(leaf w)  = LEXICON.get(w, 0)
        score((L, R))  = -score(R)          if L is a leaf in NEGATORS
                         2 * score(R)       if L is a leaf in INTENSIFIERS
                         score(L) + score(R) otherwise
        label = 0 if score <= -3, 1 if -2..-1, 2 if 0, 3 if 1..2, 4 if score >= 3

    Negation and intensification apply only to a right sibling, so the same words under another
    bracketing can get another label.

    Example::

        >>> from gluon_cf.data import synthetic_treebank
        >>> trees = synthetic_treebank(3, shape="linear", seed=0, length=4)
        >>> [len(tree.leaves()) for tree in trees], [tree.depth() for tree in trees]
        ([4, 4, 4], [3, 3, 3])
        >>> synthetic_treebank(3, shape="linear", seed=0, length=4) == trees   # deterministic
        True
    """
    if isinstance(num_trees, bool) or not isinstance(num_trees, numbers.Integral) or num_trees < 0:
        raise ValueError(f"synthetic_treebank: num_trees must be an int >= 0, got {num_trees!r}")
    if shape not in SHAPES:
        raise ValueError(f"synthetic_treebank: unknown shape {shape!r}; valid shapes are "
                         + ", ".join(repr(s) for s in SHAPES))
    if length is not None and (not isinstance(length, numbers.Integral) or length < 1):
        raise ValueError(f"synthetic_treebank: length must be an int >= 1 or None, got {length!r}")
    if not mean_length > 0 or not max_length >= 1:
        raise ValueError("synthetic_treebank: need mean_length > 0 and max_length >= 1, got "
                         f"mean_length={mean_length!r}, max_length={max_length!r}")
    word_seed, shape_seed = np.random.SeedSequence(seed).spawn(2)
    lengths, words = _sample_sentences(int(num_trees), np.random.default_rng(word_seed),
                                       mean_length, max_length, length)
    rng = np.random.default_rng(shape_seed)
    trees, start = [], 0
    for n in lengths:
        trees.append(_build_tree(words[start:start + n], shape, rng))
        start += n
    return trees


def _sample_sentences(num_trees, rng, mean_length, max_length, length):
    sigma = 0.5
    if length is None:
        # Aim the long sentences so that, mixed with the short phrases (mean 2), the mean is right.
        long_mean = max(mean_length - 2 * _P_SHORT, 1.0) / (1 - _P_SHORT)
        mu = np.log(long_mean) - sigma ** 2 / 2
        lengths = np.clip(np.rint(rng.lognormal(mu, sigma, num_trees)), 1, max_length)
        short = rng.random(num_trees) < _P_SHORT
        lengths[short] = rng.integers(1, 4, num_trees)[short]
        lengths = lengths.astype(np.int64)
    else:
        lengths = np.full(num_trees, int(length), dtype=np.int64)
    total = int(lengths.sum())
    p_positive = np.repeat(rng.uniform(0.1, 0.9, num_trees), lengths)
    u = rng.random(total)
    table = (NEUTRAL, tuple(POSITIVE), tuple(NEGATIVE), NEGATORS, INTENSIFIERS)
    polar = np.where(rng.random(total) < p_positive, 1, 2)
    category = np.select(
        [u < _P_NEGATOR, u < _P_NEGATOR + _P_INTENSIFIER,
         u < _P_NEGATOR + _P_INTENSIFIER + _P_POLAR], [3, 4, polar], 0)
    choice = (rng.random(total) * np.array([len(t) for t in table])[category]).astype(np.int64)
    words = [table[c][i] for c, i in zip(category.tolist(), choice.tolist())]
    return lengths.tolist(), words


def _build_tree(words, shape, rng):
    """Bracket `words` by `shape` and label every node by the hidden rule (iteratively)."""
    n = len(words)
    coins = iter(rng.random(2 * n).tolist()) if shape in ("sst", "moderate") else None
    done = []  # (tree, score) of finished subtrees whose parent is not yet built
    stack = [(0, n, None)]  # (lo, hi, split); split None = not yet expanded
    while stack:
        lo, hi, split = stack.pop()
        if hi - lo == 1:
            word = words[lo]
            score = LEXICON.get(word, 0)
            done.append((Tree._new(_score_label(score), word, []), score))
        elif split is None:
            if shape == "balanced":
                split = lo + (hi - lo + 1) // 2
            elif shape == "linear":
                split = hi - 1
            elif next(coins) < 0.5:
                split = lo + 1
            else:
                split = lo + 1 + int(next(coins) * (hi - lo - 1))
            stack += [(lo, hi, split), (split, hi, None), (lo, split, None)]
        else:
            right, right_score = done.pop()
            left, left_score = done.pop()
            if left.word in NEGATORS:
                score = -right_score
            elif left.word in INTENSIFIERS:
                score = 2 * right_score
            else:
                score = left_score + right_score
            done.append((Tree._new(_score_label(score), None, [left, right]), score))
    return done[0][0]


def binary_label(label: int) -> Optional[int]:
    """SST-2 label of a 5-class SST label: 0, 1 -> 0; 3, 4 -> 1; 2 (neutral) -> None (excluded).

    >>> from gluon_cf.data import binary_label
    >>> [binary_label(label) for label in range(5)]
    [0, 0, None, 1, 1]
    """
    if isinstance(label, bool) or not isinstance(label, numbers.Integral) or not 0 <= label <= 4:
        raise ValueError(f"binary_label: expected an SST label in 0..4, got {label!r}")
    return None if label == 2 else int(label >= 3)
