"""The PTB / Stanford Sentiment Treebank s-expression format, one tree per line, e.g.
``(3 (2 It) (4 (2 's) (3 good)))``: every node is ``(label child ...)`` or ``(label word)``, a
label is an integer and a word is any run of characters other than whitespace and parentheses
(so SST tokens such as ``-LRB-``, ``n't`` and ``1\\/2`` need no quoting). `parse_tree`,
`read_trees` and `write_trees`; `TreeFormatError` names the file, line and column of what is
malformed. The parser keeps its own stack (NOTE [Iterative traversal] in tree.py)."""
from __future__ import annotations

import bisect
import os
import re
from typing import Iterable, List, Optional, TextIO, Union

from .tree import Tree, _abbrev

_TOKEN_RE = re.compile(r"\(|\)|[^\s()]+")
_LABEL_RE = re.compile(r"-?[0-9]+")


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

