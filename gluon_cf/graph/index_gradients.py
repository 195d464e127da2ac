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
    followed through the subgraphs, nested nodes output by output (a nested loop's counter
    updated beside a state needing a gradient needs none, as eagerly), loop states (a state
    reaches what its step's new value reaches) and a recursion's calls (an argument reaches
    what its callee's parameter reaches; a call's outputs what its callee's do), but not
    through operators that pass no gradient back (``round``, ``argmax``, comparisons,
    ``topk``'s indices: ``_STOPS``; ``broadcast_like``'s shape source, ``where``'s condition:
    ``_NO_GRADIENT_INPUTS``), where MXNet asks none either: a beam search feeding ``topk``'s
    indices back as its next input trains. ``take``, ``pick``
    and the others are not refused: MXNet gives their indices a gradient of 0.
"""
import json
from typing import Dict, Optional, Tuple

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

# Inputs MXNet asks no gradient of through the output (their gradient is zeros_like, checked
# against MXNet 1.9.1 as above): a ``broadcast_like``'s or ``reshape_like``'s shape source
# (``broadcast_like(zeros, x)`` as a loop counter), a ``where``'s condition.
_NO_GRADIENT_INPUTS = {"broadcast_like": (1,), "reshape_like": (1,), "where": (0,)}


class IndexGradientError(mx.MXNetError):
    """A gradient asked through an Embedding's indices, which MXNet does not define."""


def check_index_gradients(node, wanted):
    """Raise :class:`IndexGradientError` if an input of decoded node ``node`` in ``wanted`` (those
    needing a gradient) reaches an Embedding's indices (NOTE [gradients asked of indices])."""
    cache = node.__dict__.setdefault("_index_refusals", {})
    key = tuple(wanted)
    if key not in cache:
        found, _ = _reaching(node, {w: w for w in wanted})
        cache[key] = None if found is None else _refusal(
            "gluon_cf.%s: a gradient was asked for input %d of this node (its Symbol was "
            "given args_grad, or its NDArray attach_grad())" % (node.kind, found[1]), found[0])
    if cache[key] is not None:
        raise IndexGradientError(cache[key])


def _refusal(asked, embedding):
    """The message of IndexGradientError: the gradient ``asked`` reaches ``embedding``'s
    indices (its JSON node)."""
    return ("%s, and it reaches the indices of %s, whose gradient MXNet does not define (MXNet "
            "1.9.1 refuses this too: 'Embedding layer doesn't support calculate data "
            "gradient'). Do not ask a gradient of the indices (grad_req 'null', no "
            "attach_grad), or pass them through F.BlockGrad" % (asked, describe_node(embedding)))


def inputs_reaching_indices(js, names, shown):
    """For a block's graph (JSON ``js``, inputs ``names`` in order, ``shown`` as the user
    calls them): {position: the message of IndexGradientError} for each input whose gradient
    would go through an Embedding's indices, in the graph itself or inside its gluon_cf nodes
    (NOTE [index gradients of a partitioned block] in index_guard.py)."""
    refusals = {}
    for k, (name, called) in enumerate(zip(names, shown)):
        found, _ = _graph_reaching(js, {name: k})
        if found is not None:
            refusals[k] = _refusal("gluon_cf: a gradient was asked of the block's input %r "
                                   "(its NDArray attach_grad(), or computed from one)"
                                   % called, found[0])
    return refusals


def _reaching(decoded, slots, calls=None):
    """For decoded node ``decoded`` whose input slots ``slots`` are tainted (slot -> the wanted
    input of the outermost node it depends on): (Embedding JSON node, wanted input) when one
    reaches its indices, else None; and for each of the node's outputs the wanted input it
    depends on, or None (None for all of them: the node is not a control-flow node, read as
    every output depending on every input)."""
    kind, spec = decoded.kind, decoded.spec
    if kind == "recursion" and slots:
        return _recursion_reaching(decoded, slots)
    if kind not in ("cond", "foreach", "while_loop"):
        return None, None
    if not slots and calls is None:
        return None, [None] * spec["num_outputs"]
    # input positions -> slots (NOTE [while_loop input order] in ops/while_loop.py)
    positions = registry.rule_of(kind).slot_order(spec, range(spec["num_inputs"]))
    slots = {s: slots[p] for s, p in enumerate(positions) if p in slots}
    roles = [r for r in decoded.graphs if not (kind == "while_loop" and r == "cond")]
    feedback = {}   # state slot -> the body output giving its next value
    if kind == "foreach":
        first, num_out = spec["num_data"], spec["num_out_data"]
        feedback = {first + j: num_out + j for j in range(spec["num_states"])}
    elif kind == "while_loop":
        feedback = {j: spec["num_out_data"] + j for j in range(spec["num_vars"])}
    origin = dict(slots)   # tainted slot -> the wanted input it comes from
    while True:
        grown, heads = False, []
        for role in roles:
            graph = decoded.graphs[role]
            names = {n: origin[s] for n, s in zip(graph.input_names, graph.slots) if s in origin}
            found, outs = _graph_reaching(json.loads(spec["graphs"][role]["json"]), names,
                                          calls)
            if found is not None:
                return found, None
            heads.append(outs)
            for slot, out in feedback.items():
                if slot not in origin and outs[out] is not None:
                    origin[slot], grown = outs[out], True
        if not grown:   # a node's outputs are its graphs' heads (a cond's: either branch's)
            return None, [next((s for s in outs if s is not None), None)
                          for outs in zip(*heads)]


def _graph_reaching(js, names, calls=None):
    """In a subgraph's JSON whose inputs ``names`` (name -> wanted slot) are tainted: (the
    Embedding reached, slot) or None, and for each head the wanted slot it depends on or None.
    ``calls``: the :class:`_Calls` of the recursion whose function this graph is (its
    ``invoke`` nodes taint their callees' arguments and read their outputs' taint)."""
    # node id -> (the wanted slot all its outputs depend on, or None: those in the dict do)
    taint: Dict[int, Tuple[Optional[int], Dict[int, int]]] = {}
    for nid, n in enumerate(js["nodes"]):
        if n["op"] == "null":
            if n["name"] in names:
                taint[nid] = (names[n["name"]], {})
            continue
        ins = [_source(taint, i) for i in n["inputs"]]
        if n["op"] in REFUSING_INDEX_GRADIENT and ins and ins[0] is not None:
            return (n, ins[0]), None
        passing = [s for k, s in enumerate(ins) if k not in _NO_GRADIENT_INPUTS.get(n["op"], ())]
        source = next((s for s in passing if s is not None), None)
        kind = registry.kind_of(n)
        if kind == "invoke" and calls is not None:
            callee = json.loads(n["attrs"]["spec"])["function"]
            calls.taint(callee, {k: s for k, s in enumerate(ins) if s is not None})
            taint[nid] = (None, {k: s for k, s in enumerate(calls.outs.get(callee, ()))
                                 if s is not None})
        elif kind is not None and (source is not None or calls is not None):   # (calls:
            # an invoke inside may read its callee's tainted environment)
            inner = {k: s for k, s in enumerate(ins) if s is not None}
            found, outs = _reaching(registry.decode(kind, n["attrs"]["spec"]), inner, calls)
            if found is not None:
                return found, None
            taint[nid] = (source, {}) if outs is None else (
                None, {k: s for k, s in enumerate(outs) if s is not None})
        elif source is not None and n["op"] not in _STOPS:
            # topk: the values carry a gradient (output 0 of "value" and "both"), indices not
            taint[nid] = (source, {}) if n["op"] != "topk" else (None, (
                {0: source} if n.get("attrs", {}).get("ret_typ") in ("value", "both") else {}))
    return None, [_source(taint, h) for h in js["heads"]]


def _source(taint, entry):
    """The wanted slot graph entry ``[node, output, version]`` depends on, or None."""
    every, some = taint.get(entry[0], (None, {}))
    return every if every is not None else some.get(entry[1])


class _Calls:
    """A recursion node's functions, as far as taint goes: which of each function's slots (its
    arguments, then the environment) are tainted, from which wanted slot, and each function's
    outputs' taint; grown to a fixpoint by :func:`_recursion_reaching`.

    NOTE [taint through a cycle of calls]: a value tainted by several wanted slots is labelled
    with one of them (the first its graph meets), which only names the input in the error. In
    a cycle of calls (a -> b -> c -> a, each output combining its callee's with its own
    environment) that label can move round the cycle for ever: a's output labelled by b's,
    b's by c's, c's by a's, each pass changing the next. Only whether a slot is tainted decides
    what is refused, and that only grows (finitely), so a label, once given, is kept: the
    fixpoint is reached when no slot or output becomes tainted (round 25r: three functions in
    turn, each reading a Dense of its own, hung ``backward``)."""

    def __init__(self, decoded):
        self.decoded, self.origin, self.outs, self.grown = decoded, {}, {}, False

    def merge_outs(self, qname, outs):
        """Function ``qname``'s outputs' taint grown by ``outs``: an output tainted keeps the
        wanted slot it first had (NOTE [taint through a cycle of calls])."""
        old = self.outs.get(qname)
        if old is None:
            self.outs[qname], self.grown = list(outs), True
            return
        for k, (was, now) in enumerate(zip(old, outs)):
            if was is None and now is not None:
                old[k], self.grown = now, True

    def taint(self, qname, slots):
        origin = self.origin.setdefault(qname, {})
        for slot, source in slots.items():
            if slot not in origin:
                origin[slot], self.grown = source, True


def _recursion_reaching(decoded, slots):
    """``_reaching`` for a ``recursion`` node: taint follows the calls (``invoke`` nodes) from
    the entry function through every function, to a fixpoint; the environment (the node's
    inputs after the entry's arguments) is every function's, after its own arguments."""
    spec, calls = decoded.spec, _Calls(decoded)
    n = spec["num_args"]
    for qname, graph in spec["graphs"].items():
        calls.taint(qname, {graph["num_args"] + s - n: w for s, w in slots.items() if s >= n})
    calls.taint(spec["entry"], {s: w for s, w in slots.items() if s < n})
    while calls.grown:
        calls.grown = False
        for qname in spec["graphs"]:
            graph, origin = decoded.graphs[qname], calls.origin.get(qname, {})
            names = {name: origin[s] for name, s in zip(graph.input_names, graph.slots)
                     if s in origin}
            found, outs = _graph_reaching(json.loads(spec["graphs"][qname]["json"]), names,
                                          calls)
            if found is not None:
                return found, None
            calls.merge_outs(qname, outs)
    return None, calls.outs.get(spec["entry"], [None] * spec["num_outputs"])
