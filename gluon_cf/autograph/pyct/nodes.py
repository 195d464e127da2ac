"""Walking a syntax tree: ``ast.walk`` and ``ast.iter_child_nodes``, the same nodes in the
same order, faster (conversion walks the function's tree many times)."""
import ast
import collections
import re
from typing import Dict, Iterator, List, Tuple

# NOTE [conversion speed]
#     Converting a function walks its syntax tree many times (each analysis on its own), so
#     the walks are the cost of conversion. ``ast.walk`` and ``ast.iter_child_nodes`` are
#     replaced by :func:`walk` and :func:`child_nodes` (the same nodes in the same order;
#     only the fields whose type in Python's grammar can hold a node are read: ``Name.id``
#     is a string), and the analyses that run between two rewrites of the tree (the scopes
#     and liveness of ``_Rewriter.convert``) keep what they found per node in a dict the
#     caller drops before the tree changes: keyed by the node's id with the node kept
#     beside it (a dropped node's id may be reused), never kept across a rewrite.
#     tools/conversion_oracle.py checks the converted code is unchanged.

_AST = ast.AST
# (Python's grammar: fields of these types hold strings, numbers or constants, not nodes)
_LEAF_TYPES = {"identifier", "int", "string", "constant"}
_NODE_FIELDS: Dict[type, Tuple[str, ...]] = {}


def _node_fields(cls) -> Tuple[str, ...]:
    """The fields of ``cls`` that may hold nodes, from the grammar in its docstring (every
    field when it does not say)."""
    signature = re.fullmatch(r"\w+\((.*)\)", (cls.__doc__ or "").strip().split("\n")[0])
    types = {}
    if signature and signature.group(1):
        for part in signature.group(1).split(", "):
            kind, _, name = part.rpartition(" ")
            types[name] = kind.rstrip("?*")
    fields = _NODE_FIELDS[cls] = tuple(f for f in cls._fields
                                       if types.get(f) not in _LEAF_TYPES)
    return fields


def child_nodes(node: ast.AST) -> List[ast.AST]:
    """The list ``ast.iter_child_nodes(node)`` yields, read now."""
    fields = _NODE_FIELDS.get(node.__class__)
    if fields is None:
        fields = _node_fields(node.__class__)
    children = []
    for name in fields:
        field = getattr(node, name, None)
        if isinstance(field, _AST):
            children.append(field)
        elif isinstance(field, list):
            children.extend([item for item in field if isinstance(item, _AST)])
    return children


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk``: breadth first, a node's children read when it is reached (before it is
    yielded), so a caller changing the tree as it walks sees what ``ast.walk`` shows."""
    todo = collections.deque([node])
    while todo:
        node = todo.popleft()
        todo.extend(child_nodes(node))
        yield node
