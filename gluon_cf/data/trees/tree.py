"""The `Tree` type of gluon_cf's tree data: a labelled ordered tree, each leaf holding a word,
with its traversals (post-order nodes, leaves, height), binarization and canonical s-expression.

NOTE [Iterative traversal]: trees can be very deep (benchmarks build linear trees of 5,000+ nodes,
and adversarial input may nest 100,000 levels), so the parser and every traversal use an explicit
stack; nothing here recurses in Python, and no depth hits ``sys.getrecursionlimit()``.
"""
from __future__ import annotations

import numbers
import re
from typing import Iterable, List, Optional, Union

_WORD_RE = re.compile(r"[^\s()]+")


def _abbrev(text, limit=60):
    return text if len(text) <= limit else text[:limit - 3] + "..."


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
    label: int
    word: Optional[str]              # a leaf's word; None for an internal node
    children: List["Tree"]

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
        parts: List[str] = []
        stack: List[Union["Tree", str]] = [self]   # nodes still to write, and ")" / " "
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

