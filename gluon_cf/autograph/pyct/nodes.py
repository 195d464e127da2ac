"""Walking a syntax tree: ``ast.walk`` and ``ast.iter_child_nodes``, the same nodes in the
same order, faster (conversion walks the function's tree many times)."""
import ast
import collections
import contextlib
import re
import threading
from typing import Any, Dict, Iterator, List, Optional, Tuple

# NOTE [conversion speed]
#     Converting a function walks its syntax tree many times (each analysis on its own), so
#     the walks are the cost of conversion. ``ast.walk`` and ``ast.iter_child_nodes`` are
#     replaced by :func:`walk` and :func:`child_nodes` (the same nodes in the same order;
#     only the fields whose type in Python's grammar can hold a node are read: ``Name.id``
#     is a string). The analyses that run between two rewrites of the tree (``shared_arrays``
#     and the reaching definitions, the scopes and liveness of ``_Rewriter.convert``) run
#     :func:`unchanged`: each node's children are read once; and they keep what they found
#     per node in a dict the caller drops before the tree changes. Both are keyed by the
#     node's id with the node kept beside it (a dropped node's id may be reused), and
#     neither outlives the stretch of code that changes no node (analyses set flags,
#     ``ag_...`` attributes, which are no fields).
#     tests/tools/conversion_oracle.py checks the converted code is unchanged.

_AST = ast.AST
# (Python's grammar: fields of these types hold strings, numbers or constants, not nodes)
_LEAF_TYPES = {"identifier", "int", "string", "constant"}
_NODE_FIELDS: Dict[type, Tuple[str, ...]] = {}


def node_fields(cls) -> Tuple[str, ...]:
    """The fields of the node class ``cls`` that may hold nodes, from the grammar in its
    docstring (every field when it does not say)."""
    fields = _NODE_FIELDS.get(cls)
    if fields is not None:
        return fields
    signature = re.fullmatch(r"\w+\((.*)\)", (cls.__doc__ or "").strip().split("\n")[0])
    types = {}
    if signature and signature.group(1):
        for part in signature.group(1).split(", "):
            kind, _, name = part.rpartition(" ")
            types[name] = kind.rstrip("?*")
    fields = _NODE_FIELDS[cls] = tuple(f for f in cls._fields
                                       if types.get(f) not in _LEAF_TYPES)
    return fields


_KEPT = threading.local()      # (.children: id -> (node, its children) while unchanged)


@contextlib.contextmanager
def unchanged():
    """While the trees are not changed (in this thread): each node's children are read
    once."""
    # (NOTE [conversion speed])
    outer: Optional[dict] = getattr(_KEPT, "children", None)
    _KEPT.children = {} if outer is None else outer
    try:
        yield
    finally:
        _KEPT.children = outer


def child_nodes(node: ast.AST) -> List[ast.AST]:
    """The list ``ast.iter_child_nodes(node)`` yields, read now (or, :func:`unchanged`, when
    first asked for; not to be changed)."""
    kept = getattr(_KEPT, "children", None)
    if kept is not None:
        entry = kept.get(id(node))
        if entry is not None and entry[0] is node:
            return entry[1]
    fields = _NODE_FIELDS.get(node.__class__)
    if fields is None:
        fields = node_fields(node.__class__)
    children = []
    for name in fields:
        field = getattr(node, name, None)
        if isinstance(field, _AST):
            children.append(field)
        elif isinstance(field, list):
            children.extend([item for item in field if isinstance(item, _AST)])
    if kept is not None:
        kept[id(node)] = (node, children)
    return children


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk``: breadth first, a node's children read when it is reached (before it is
    yielded), so a caller changing the tree as it walks sees what ``ast.walk`` shows."""
    todo = collections.deque([node])
    while todo:
        node = todo.popleft()
        todo.extend(child_nodes(node))
        yield node


def fix_missing_locations(node: ast.AST) -> ast.AST:
    """``ast.fix_missing_locations``: the same nodes in the same order (depth first), on
    :func:`child_nodes`."""
    todo: List[Tuple[Any, int, int, int, int]] = [(node, 1, 0, 1, 0)]
    current: Any
    while todo:
        current, lineno, col_offset, end_lineno, end_col_offset = todo.pop()
        attributes = current._attributes
        if "lineno" in attributes:
            if not hasattr(current, "lineno"):
                current.lineno = lineno
            else:
                lineno = current.lineno
        if "end_lineno" in attributes:
            if getattr(current, "end_lineno", None) is None:
                current.end_lineno = end_lineno
            else:
                end_lineno = current.end_lineno
        if "col_offset" in attributes:
            if not hasattr(current, "col_offset"):
                current.col_offset = col_offset
            else:
                col_offset = current.col_offset
        if "end_col_offset" in attributes:
            if getattr(current, "end_col_offset", None) is None:
                current.end_col_offset = end_col_offset
            else:
                end_col_offset = current.end_col_offset
        todo.extend((child, lineno, col_offset, end_lineno, end_col_offset)
                    for child in reversed(child_nodes(current)))
    return node


def increment_lineno(node: ast.AST, n: int = 1) -> ast.AST:
    """``ast.increment_lineno``, on :func:`walk`."""
    child: Any
    for child in walk(node):
        if isinstance(child, ast.TypeIgnore):     # (its lineno is a field)
            child.lineno = getattr(child, "lineno", 0) + n
            continue
        if "lineno" in child._attributes:
            child.lineno = getattr(child, "lineno", 0) + n
        if "end_lineno" in child._attributes:
            end_lineno = getattr(child, "end_lineno", 0)
            if end_lineno is not None:
                child.end_lineno = end_lineno + n
    return node


def replace_statements(func: ast.AST, rewrite) -> None:
    """Replace, in every block of ``func`` (innermost first, each from its end), each
    statement for which ``rewrite(statement)`` gives a list of statements by that list."""
    for parent in reversed(list(ast.walk(func))):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if not isinstance(block, list):
                continue
            for k, statement in reversed(list(enumerate(block))):
                rewritten = rewrite(statement)
                if rewritten is not None:
                    block[k:k + 1] = rewritten
