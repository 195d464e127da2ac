"""Whether a ``while_loop`` making recursive calls acts row by row with its calls cut out
(NOTE [loops lowered on rows] in ``rowwise.py``): what the ONNX lowering of a recursion asks of
each such loop's ``func``, which it runs on the rows of all a level's calls at once."""
import json
from typing import Dict, List, Tuple

import mxnet as mx

from . import registry
from .rowwise import HINT_UNKNOWN, ROWS, Rejected, _internal_shapes, check_symbol


def skeleton_rejected(symbol, flags, shapes):
    """None if a loop's ``func`` (``symbol``) acts row by row with its recursive calls cut out
    - the calls' arguments, and its outputs with each call's value standing as a batched input
    of one row per invocation - else the :class:`Rejected` saying why (NOTE [loops lowered on
    rows] in rowwise.py). ``flags`` and ``shapes``: per input name, whether it is batched, its
    shape for ``ROWS`` rows."""
    js = json.loads(symbol.tojson())
    nodes = js["nodes"]
    calls = {nid for nid, n in enumerate(nodes) if registry.kind_of(n) == "invoke"}
    if not calls:
        return _rejected_by(symbol, js, flags, shapes)
    # (a call's value for one invocation: its shape inferred with one row per batched input)
    one_row = {n: (1,) + tuple(s[1:]) if flags.get(n) else tuple(s) for n, s in shapes.items()}
    try:
        by_entry = _internal_shapes(symbol, js, one_row, 1)
    except Exception:  # noqa: BLE001 - any failure means "not provably row-wise"
        by_entry = {}
    cut = sorted({(src, k) for n in nodes for src, k, *_ in n["inputs"] if src in calls} |
                 {(h[0], h[1]) for h in js["heads"] if h[0] in calls})
    kept: List[dict] = []
    ids: Dict[Tuple[int, int], int] = {}
    for nid, node in enumerate(nodes):
        if nid in calls:
            for entry in (e for e in cut if e[0] == nid):
                shape = by_entry.get(entry)
                if shape is None:
                    return Rejected(node, "has a value whose shape cannot be inferred",
                                    HINT_UNKNOWN)
                name = "%s_value%d" % (node["name"], entry[1])
                ids[entry] = len(kept)
                kept.append({"op": "null", "name": name, "inputs": []})
                flags, shapes = dict(flags, **{name: True}), dict(shapes, **{
                    name: (ROWS,) + tuple(shape[1:])})
            continue
        ids[(nid, 0)] = len(kept)
        kept.append(dict(node, inputs=[_moved(e, nodes, ids) for e in node["inputs"]]))
    # (the calls' arguments stay checked as outputs of their own)
    heads = [_moved(e, nodes, ids) for e in js["heads"]] + [
        _moved(e, nodes, ids) for nid in sorted(calls) for e in nodes[nid]["inputs"]]
    graph = {k: v for k, v in js.items() if k != "node_row_ptr"}
    part = mx.sym.load_json(json.dumps(dict(graph, nodes=kept, heads=heads, arg_nodes=[
        k for k, n in enumerate(kept) if n["op"] == "null"])))
    return _rejected_by(part, json.loads(part.tojson()), flags, shapes)


def _moved(entry, nodes, ids):
    """``entry`` of the loop's graph in the graph with its calls cut out (skeleton_rejected)."""
    src, k = entry[0], entry[1]
    if (src, k) in ids:
        return [ids[(src, k)], 0, 0]
    return [ids[(src, 0)], k, 0]


def _rejected_by(symbol, graph_json, flags, shapes):
    names = symbol.list_inputs()
    try:
        check_symbol(symbol, graph_json, {n: flags[n] for n in names},
                     {n: shapes[n] for n in names})
    except Rejected as rejected:
        return rejected
    return None
