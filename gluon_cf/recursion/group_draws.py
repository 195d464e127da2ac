"""The random draws of a planned remat recursion's groups, kept by the forward and read back
by the recomputation (NOTE [replayed draws]).

NOTE [replayed draws]
    A group recomputed by a remat recursion's planned backward (NOTE [hybridized remat
    recursion] in recursion/planned_backward.py) must draw the random numbers its forward
    drew, or its gradient is not the forward's. Seeding MXNet's generator before each group
    (forward and recomputation alike) did that, at ~2 ms a seed, and drew other numbers than
    ``remat=False`` for the same seed (which draws on, unseeded). Instead the forward of a
    group whose graph draws keeps its draws, as extra outputs of its graph, and the
    recomputation runs a graph in which each draw is an input:

    * an active ``Dropout`` (training, or ``mode="always"``, and ``p > 0``) keeps its mask (its
      hidden second output, scaled by ``1 / (1 - p)``), and is recomputed as
      ``broadcast_mul(data, mask)``, whose gradient is Dropout's (``out_grad * mask``); an
      inactive one draws nothing and stays;
    * a random operator without inputs (``random_uniform(shape=...)``, ...) keeps its output,
      and is recomputed as an input (it has nothing to differentiate).

    The forward draws in the order of ``remat=False`` (the same graphs' operators, unseeded),
    so both give the same values and gradients from one state of the generator, which nothing
    else touches. A group holding another random operator (one with inputs, which may have a
    gradient: ``sample_normal(mu, sigma)``, or a gluon_cf node holding one) is seeded per
    group instead (:func:`group_draws` says "seed"), with a seed drawn once per run, and its
    recomputation compared with the forward's rows. (MXNet 1.9.1 keeps a generator per
    thread, so a seed reaches the draws of the thread that set it only: here the node's Custom
    operator thread, not the user's; other threads' draws do not interleave.) The draws kept
    cost a mask per Dropout per group, about one of the group's intermediates.
"""
import json
import weakref
from typing import Any, Dict, List, Optional, Tuple

import mxnet as mx

from .. import registry
from ..graph import CachedGraph
from ..graph.decoded import holds_random_ops
from ..operators import is_random_op

SEED = "seed"   # group_draws' answer for a group that cannot keep its draws: seed it
_REPLAYS: "weakref.WeakKeyDictionary[Any, Dict[bool, Any]]" = weakref.WeakKeyDictionary()


class GroupDraws:
    """A group graph's two forms: ``forward`` returns its outputs then its ``draws`` (arrays
    to keep); ``recompute`` takes, for each of its inputs ``(role, k)``, the group graph's
    input ``k`` (``role`` "input") or draw ``k`` ("draw")."""

    def __init__(self, forward: CachedGraph, outputs: int, recompute: CachedGraph,
                 inputs: List[Tuple[str, int]]):
        self.forward, self.outputs = forward, outputs
        self.recompute, self.inputs = recompute, inputs


def group_draws(graph, training):
    """None for a group graph (``_ValueGraph``) drawing nothing when run with ``training``,
    :data:`SEED` for one whose draws cannot be kept, else its :class:`GroupDraws` (cached)."""
    cached = _REPLAYS.setdefault(graph, {})
    if training not in cached:
        cached[training] = _build(graph.op.symbol, training)
    return cached[training]


def _active_dropout(node, training):
    attrs = node.get("attrs", {})
    return (training or attrs.get("mode") == "always") and float(attrs.get("p", 0.5)) > 0


def _build(symbol, training) -> Optional[Any]:
    js = json.loads(symbol.tojson())
    nodes = js["nodes"]
    read = {(e[0], e[1]) for n in nodes for e in n["inputs"]} | \
        {(h[0], h[1]) for h in js["heads"]}
    draws: List[Tuple[int, int]] = []   # the (node, output) entries kept
    for nid, n in enumerate(nodes):
        if n["op"] == "null":
            continue
        if registry.kind_of(n):
            if holds_random_ops(json.loads(n["attrs"]["spec"])):
                return SEED
        elif n["op"] == "Dropout":
            if _active_dropout(n, training):
                draws.append((nid, 1))
        elif is_random_op(n["op"]):
            if n["inputs"] or any(k > 0 for m, k in read if m == nid):
                return SEED
            draws.append((nid, 0))
    if not draws:
        return None
    forward = dict(js, heads=js["heads"] + [[m, k, 0] for m, k in draws])
    outputs = len(js["heads"])
    recompute = _recompute_json(js, draws)
    names = symbol.list_inputs()
    recompute_symbol = mx.sym.load_json(json.dumps(recompute))
    inputs = [("draw", int(name[len("_draw"):])) if name.startswith("_draw")
              else ("input", names.index(name)) for name in recompute_symbol.list_inputs()]
    return GroupDraws(CachedGraph(mx.sym.load_json(json.dumps(forward))), outputs,
                      CachedGraph(recompute_symbol), inputs)


def _recompute_json(js, draws):
    """``js`` with each draw an input ``_draw<k>``: a Dropout's output ``data * mask``, a
    random operator's output the input itself."""
    kept = {m: k for k, (m, _) in enumerate(draws)}
    nodes: List[dict] = []
    moved: Dict[int, int] = {}   # old node -> new node (copied as it is)
    replaced: Dict[Tuple[int, int], Tuple[int, int]] = {}   # a draw's entries -> new entries

    def emit(node):
        nodes.append(node)
        return len(nodes) - 1

    def entry(e):
        m, k = replaced.get((e[0], e[1]), (moved.get(e[0]), e[1]))
        return [m, k, 0]

    for nid, n in enumerate(js["nodes"]):
        if nid in kept:
            var = emit({"op": "null", "name": "_draw%d" % kept[nid], "inputs": []})
            if n["op"] == "Dropout":
                mul = emit({"op": "broadcast_mul", "name": n["name"] + "_replayed",
                            "inputs": [entry(n["inputs"][0]), [var, 0, 0]]})
                replaced[(nid, 0)], replaced[(nid, 1)] = (mul, 0), (var, 0)
            else:
                replaced[(nid, 0)] = (var, 0)
            continue
        moved[nid] = emit(dict(n, inputs=[entry(e) for e in n["inputs"]]))
    return {"nodes": nodes,
            "arg_nodes": [i for i, n in enumerate(nodes) if n["op"] == "null"],
            "heads": [entry(h) for h in js["heads"]],
            "attrs": js.get("attrs", {})}

