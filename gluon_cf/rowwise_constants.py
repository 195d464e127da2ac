"""The constant a recursive function's branch returns, found for the row-wise check's message:
a call of the function gives one row for all its invocations, and what to change is the
constant's line, not the call's (NOTE [row-wise rules] in rowwise.py)."""
import json

from . import registry
from ._graph_json import reached_ids
from .operators import SOURCE_ATTR
from .rowwise import ROWS, _internal_shapes, load_graph


def one_row_output(symbol, graph_json, flags, shapes, rows=ROWS):
    """The operator node whose output ``graph_json`` returns with one row for a batch of
    ``rows`` invocations (a value reading none of the arguments: a constant), named with the
    user's line, looked for inside a ``cond`` returning it too (a nested one in a leaf
    branch); None when there is none (or the shapes cannot be inferred)."""
    try:
        by_entry = _internal_shapes(symbol, graph_json, shapes, rows)
    except Exception:  # noqa: BLE001 - nothing proven: nothing named
        return None
    nodes = graph_json["nodes"]
    for nid, k, *_ in graph_json["heads"]:
        shape = by_entry.get((nid, k))
        while nodes[nid]["op"] in ("_copy", "identity") and nodes[nid]["inputs"]:
            nid, k = nodes[nid]["inputs"][0][:2]      # (the branch's output copies: cond.py)
        node = nodes[nid]
        if not shape or shape[0] != 1:
            continue
        if registry.kind_of(node) == "cond":   # (its predicate is batched: its branches tell)
            found = _in_branches(node, nodes, by_entry, flags, rows)
            if found is not None:
                return found
        elif node.get("attrs", {}).get(SOURCE_ATTR) and not any(
                flags.get(nodes[i]["name"]) for i in _variables_read(nodes, nid)):
            return node
    return None


def _in_branches(node, nodes, by_entry, flags, rows):
    """:func:`one_row_output` of either branch of the ``cond`` JSON ``node`` (of ``nodes``,
    whose entries' shapes ``by_entry`` holds)."""
    spec = json.loads(node["attrs"]["spec"])
    loaded = registry.decode("cond", node["attrs"]["spec"]).__dict__.setdefault(
        "rowwise_graphs", {})   # (as the cond's batching rule keeps them)
    for role in ("then", "else"):
        graph = spec["graphs"][role]
        graph_json, symbol = load_graph(graph["json"], loaded)
        sources = [node["inputs"][s] for s in graph["inputs"]]
        names = symbol.list_inputs()
        branch_flags = {n: any(flags.get(nodes[i]["name"]) for i in _variables_read(nodes, src))
                        for n, (src, *_) in zip(names, sources)}
        branch_shapes = {n: by_entry[(src, k)] for n, (src, k, *_) in zip(names, sources)
                         if by_entry.get((src, k))}
        found = one_row_output(symbol, graph_json, branch_flags, branch_shapes, rows)
        if found is not None:
            return found
    return None


def _variables_read(nodes, nid):
    """Ids of the variables (``null`` nodes) node ``nid`` reads, directly or not."""
    return [i for i in reached_ids(nodes, [nid]) if nodes[i]["op"] == "null"]
