"""Which gradients of a node's inputs would go through an ``Embedding``'s indices.

NOTE [gradients asked of indices]
    Subgraphs run with a ``BlockGrad`` on the index inputs of ``Embedding`` and its kin
    (``block_index_gradients`` in ``cached_graph.py``): a loop counter computed beside the
    states would otherwise look differentiable, and MXNet's own ``foreach`` refuses such a body
    in backward ("Embedding layer doesn't support calculate data gradient"). The block must not
    hide a gradient the user asked for: when an input whose gradient MXNet asks of a node
    (``req`` not ``null``: the user's ``attach_grad``, a ``bind`` with ``args_grad``) reaches an
    ``Embedding``'s indices, MXNet 1.9.1 refuses, eagerly and hybridized, and so does the node,
    naming the Embedding and the user's line, instead of a gradient of 0. What reaches what is
    followed through the subgraphs, nested nodes, and loop states (a state reaches what its
    step's new value reaches), but not through operators that pass no gradient back (``round``,
    ``argmax``, comparisons, ``topk``'s indices: ``_STOPS``), where MXNet asks none either: a
    beam search feeding ``topk``'s indices back as its next input trains. ``take``, ``pick``
    and the others are not refused: MXNet gives their indices a gradient of 0.
"""
import json
from typing import Dict, Optional, Set, Tuple

import mxnet as mx

from .. import registry
from ..operators import describe_node

# The operators MXNet refuses to differentiate with respect to their indices (input 0).
REFUSING_INDEX_GRADIENT = frozenset({"Embedding", "_contrib_SparseEmbedding"})
# Operators whose inputs MXNet asks no gradient of through their outputs (no FGradient using
# the output's gradient): an index computed through one needs none, as MXNet decides. Each was
# checked against MXNet 1.9.1 (``Embedding(op(x))`` with ``x`` needing a gradient runs); ``sign``
# and ``cast`` are not among them (MXNet refuses). ``topk`` below, by output.
_COMPARISONS = [p + op + q for op in ("equal", "not_equal", "greater", "greater_equal", "lesser",
                                      "lesser_equal", "logical_and", "logical_or", "logical_xor")
                for p, q in (("_", ""), ("_", "_scalar"), ("broadcast_", ""))]
_STOPS = frozenset(_COMPARISONS + [
    "BlockGrad", "stop_gradient", "zeros_like", "ones_like", "shape_array", "size_array",
    "argmax", "argmin", "argsort", "round", "rint", "floor", "ceil", "trunc", "fix",
    "one_hot", "logical_not", "_contrib_arange_like", "_contrib_index_array"])


class IndexGradientError(mx.MXNetError):
    """A gradient asked through an Embedding's indices, which MXNet does not define."""


def check_index_gradients(node, wanted):
    """Raise :class:`IndexGradientError` if an input of decoded node ``node`` in ``wanted`` (those
    needing a gradient) reaches an Embedding's indices (NOTE [gradients asked of indices])."""
    cache = node.__dict__.setdefault("_index_refusals", {})
    key = tuple(wanted)
    if key not in cache:
        found = _reaching(node, set(wanted))
        cache[key] = None if found is None else (
            "gluon_cf.%s: a gradient was asked for input %d of this node (its Symbol was "
            "given args_grad, or its NDArray attach_grad()), and it reaches the indices of "
            "%s, whose gradient MXNet does not define (MXNet 1.9.1 refuses this too: "
            "'Embedding layer doesn't support calculate data gradient'). Do not ask a "
            "gradient of the indices (grad_req 'null', no attach_grad), or pass them "
            "through F.BlockGrad" % (node.kind, found[1], describe_node(found[0])))
    if cache[key] is not None:
        raise IndexGradientError(cache[key])


def _reaching(decoded, slots):
    """(Embedding JSON node, slot) when a slot in ``slots`` of decoded node ``decoded`` reaches
    its indices, else None."""
    kind, spec = decoded.kind, decoded.spec
    if kind not in ("cond", "foreach", "while_loop") or not slots:
        return None
    roles = [r for r in decoded.graphs if not (kind == "while_loop" and r == "cond")]
    feedback = {}   # state slot -> the body output giving its next value
    if kind == "foreach":
        first, num_out = spec["num_data"], spec["num_out_data"]
        feedback = {first + j: num_out + j for j in range(spec["num_states"])}
    elif kind == "while_loop":
        feedback = {j: spec["num_out_data"] + j for j in range(spec["num_vars"])}
    origin = {s: s for s in slots}   # tainted slot -> the wanted slot it comes from
    while True:
        grown = False
        for role in roles:
            graph = decoded.graphs[role]
            names = {n: origin[s] for n, s in zip(graph.input_names, graph.slots) if s in origin}
            found, outs = _graph_reaching(json.loads(spec["graphs"][role]["json"]), names)
            if found is not None:
                return found
            for slot, out in feedback.items():
                if slot not in origin and outs[out] is not None:
                    origin[slot], grown = outs[out], True
        if not grown:
            return None


def _graph_reaching(js, names):
    """In a subgraph's JSON whose inputs ``names`` (name -> wanted slot) are tainted: (the
    Embedding reached, slot) or None, and for each head the wanted slot it depends on or None."""
    # node id -> (the wanted slot it depends on, its outputs that do, or None: all of them)
    taint: Dict[int, Tuple[int, Optional[Set[int]]]] = {}
    for nid, n in enumerate(js["nodes"]):
        if n["op"] == "null":
            if n["name"] in names:
                taint[nid] = (names[n["name"]], None)
            continue
        ins = [_source(taint, i) for i in n["inputs"]]
        if n["op"] in REFUSING_INDEX_GRADIENT and ins and ins[0] is not None:
            return (n, ins[0]), None
        kind = registry.kind_of(n)
        if kind is not None:
            inner = {k: s for k, s in enumerate(ins) if s is not None}
            found = _reaching(registry.decode(kind, n["attrs"]["spec"]), set(inner))
            if found is not None:
                return (found[0], inner[found[1]]), None
        source = next((s for s in ins if s is not None), None)
        if source is not None and n["op"] not in _STOPS:
            # topk: the values carry a gradient (output 0 of "value" and "both"), indices not
            taint[nid] = (source, None if n["op"] != "topk" else
                          {0} if n.get("attrs", {}).get("ret_typ") in ("value", "both") else set())
    return None, [_source(taint, h) for h in js["heads"]]


def _source(taint, entry):
    """The wanted slot graph entry ``[node, output, version]`` depends on, or None."""
    source, outputs = taint.get(entry[0], (None, None))
    return source if outputs is None or entry[1] in outputs else None
