"""Decoded gluon_cf nodes: :func:`decode` turns a node's ``spec`` (checked first) into a
:class:`Node`, the op's fields and its subgraphs as runnable :class:`Graph` objects, with what
its subgraphs hold (user CustomOps, operators with auxiliary states, run-time shapes); cached
per spec, and registered as the registry's decoder, through which the layers below reach it.
"""
import json
import weakref

from .. import registry
from ..errors import spec_key
from ..operators import (AUX_STATE_OPS, DYNAMIC_SHAPE_OPS, aux_state_error, describe_node,
                         is_random_op, remat_aux_error, updates_aux_state,
                         user_custom_op_error)
from ..symbol_entries import check_node_spec
from .runtime import Graph


def user_custom_op_types(spec):
    """The ``op_type`` of every user CustomOp in a node's subgraphs, nested nodes included."""
    return sorted({n.get("attrs", {}).get("op_type", "?")
                   for n in _nodes_of(spec) if registry.is_user_custom(n)})


def aux_state_nodes(spec):
    """The JSON nodes of a node's subgraphs (nested included) that update auxiliary state in
    training (:func:`operators.updates_aux_state`)."""
    return [n for n in _nodes_of(spec) if updates_aux_state(n)]


def remat_aux_nodes(spec, in_remat=False):
    """The JSON nodes of AUX_STATE_OPS (``use_global_stats`` or not) inside a rematerialised
    loop of a node, itself or nested (NOTE [auxiliary state under remat] in ``node.py``)."""
    in_remat = in_remat or spec.get("remat") not in (None, "", "False", "0", "None")
    found = []
    for graph in spec.get("graphs", {}).values():
        for n in json.loads(graph["json"])["nodes"]:
            if in_remat and n["op"] in AUX_STATE_OPS:
                found.append(n)
            if registry.kind_of(n):
                found.extend(remat_aux_nodes(json.loads(n["attrs"]["spec"]), in_remat))
    return found


def holds_random_ops(spec):
    """Whether a node's subgraphs (nested ones included) hold a random operator."""
    return any(is_random_op(n["op"]) for n in _nodes_of(spec))


def random_ops(spec):
    """The random operators of a node's subgraphs (nested ones included), sorted."""
    return sorted({n["op"] for n in _nodes_of(spec) if is_random_op(n["op"])})


def holds_recursion(node):
    """Whether a graph's JSON node is a gluon_cf recursion node or a gluon_cf node whose
    subgraphs (nested ones included) hold one."""
    kind = registry.kind_of(node)
    return bool(kind) and (kind == "recursion" or any(
        registry.kind_of(m) == "recursion"
        for m in _nodes_of(json.loads(node["attrs"]["spec"]))))


def nodes_of_spec(spec):
    """Every JSON node of a node's subgraphs, nested gluon_cf nodes' subgraphs included."""
    return _nodes_of(spec)


def _nodes_of(spec):
    """Every JSON node of a node's subgraphs, nested gluon_cf nodes' subgraphs included."""
    for graph in spec.get("graphs", {}).values():
        for n in json.loads(graph["json"])["nodes"]:
            yield n
            if registry.kind_of(n):
                yield from _nodes_of(json.loads(n["attrs"]["spec"]))


# NOTE [decoded nodes live as long as their users]
#     A decoded node (and its Graphs, each with a CachedOp per thread holding nested nodes'
#     MXNet Custom operators) is cached per spec text, weakly: it lives while something uses
#     it, and then only. Its users hold it: the ``_NodeProp`` of each MXNet Custom node of that
#     spec (a Symbol, a block's CachedOp, a loaded symbol file: MXNet's operator registry keeps
#     the prop until the C++ node is freed), a PartitionedGraph running it, a caller. The spec
#     text carries every parameter name, so each block built adds specs: kept for the process
#     (a dict), 30 blocks built and deleted left 30 blocks' graphs, CachedOps and registry
#     entries behind (hyperparameter search, cross-validation, serving leaked without bound).
#     Decoding is a pure function of the spec text (what is learnt later, inferred shapes and
#     dtypes, which gradients backward asked for, is learnt again), so a node decoded again
#     after its users went is the same node; Graph's cache (runtime.py) and the recursion
#     function tables (recursion/table.py) are weak alike.
_SPECS: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()


class Node:
    """A decoded ``spec``: the op's fields plus its subgraphs as runnable :class:`Graph` objects."""

    def __init__(self, kind, spec):
        self.kind = kind
        self.spec = spec
        self.num_inputs = spec["num_inputs"]
        self.num_outputs = spec["num_outputs"]
        self.graphs = {name: Graph.from_spec(g) for name, g in spec["graphs"].items()}
        self.wanted = None  # inputs whose gradient backward asked for (see _NodeOperator)
        self.spec_key = b""  # set by decode
        self.user_custom_nodes = [n for n in _nodes_of(spec) if registry.is_user_custom(n)]
        self.user_custom_ops = user_custom_op_types(spec)
        self.aux_state_nodes = aux_state_nodes(spec)
        self.remat_aux_nodes = remat_aux_nodes(spec)
        # Whether its subgraphs may compute values of run-time shape (NOTE [run-time shapes]):
        # an operator of DYNAMIC_SHAPE_OPS or a nested node (a cond may change sizes, a
        # while_loop may have exact length). Conservative: it only adds run-time checks.
        self.run_time_shapes = any(n["op"] in DYNAMIC_SHAPE_OPS or registry.kind_of(n)
                                   for n in _nodes_of(spec))

    # NOTE [training refused by the node]
    #     A node whose subgraphs update auxiliary state (a BatchNorm's running statistics)
    #     refuses recorded training (``operators.aux_state_error``): MXNet 1.9.1 updates them on
    #     the CPU in the operator's backward, which through a gluon_cf node would not update the
    #     block's (MXNet's own hybridized foreach fails there: "cached_op.cc:1188 outputs.size()").
    #     Training mode not recorded (``with autograd.train_mode(): net(x)``, an executor's
    #     ``forward(is_train=True)``) runs: the body in training mode as eager code does (batch
    #     statistics, Dropout drawing) and, no backward coming, the running statistics left as
    #     eager code and MXNet's own foreach leave them, unchanged (measured on the CPU for
    #     BatchNorm of every layout and dtype, oneDNN or not, BatchNorm_v1, SyncBatchNorm).
    #     On another device (cuDNN updates them in the forward) training mode is refused,
    #     recorded or not: the body runs on copies of its inputs.
    #     A hybridized block's recorded training call is refused before its graph runs, in the
    #     calling thread (``refusing_training``, read by ``hybrid.py``): the node's own refusal
    #     (its backward's, ``node.py``) runs in MXNet's worker thread, and was raised at a later
    #     read (after ``backward`` and ``trainer.step``), or at the next recorded call's
    #     gradient, of a call that should work (review r28b). An executor's ``backward`` is
    #     refused so too (``bind_shapes.py``): raised in the worker thread, the backward of the
    #     operators after the node had run first, their running statistics and gradients
    #     updated (review r28bn). Tracing refuses nothing of it:
    #     refused there, the refusal depended on the mode of the block's first call, and a
    #     partitioned block first called in predict mode trained, its running statistics other
    #     than eager code's, silently (tests/test_history_h28.py).
    #     A user CustomOp in a node's subgraphs is refused so, in every recorded call (its
    #     backward hangs MXNet: NOTE [user CustomOps at run time] in ``partitioned.py``), at
    #     the block's call, naming its line: refused while tracing, a fresh block refused a
    #     recorded predict-mode call that one first called in predict mode ran, and refused
    #     training there at a later read, without the line (review 29).
    def refuse_aux_state_training(self):
        """Raise the refusal of training through this node (NOTE [training refused by the
        node]), if its subgraphs update auxiliary state."""
        if self.aux_state_nodes:
            raise aux_state_error(self.kind, "the body calls %s" % ", ".join(
                describe_node(n) for n in self.aux_state_nodes))

    def refuse_training_call(self, recording=True, device_type="cpu", training=True):
        """Raise what this node refuses of a call (training or recorded) of the graph holding
        it: before the call runs, and in the node's own forward (``recording`` False: it does
        not know whether a backward will come) and backward (NOTE [training refused by the
        node]; a remat loop's backward in every mode: NOTE [auxiliary state under remat])."""
        if self.remat_aux_nodes and recording:
            raise remat_aux_error(self.kind, self.remat_aux_nodes)
        if self.user_custom_nodes and recording:   # (NOTE [user CustomOps at run time])
            raise user_custom_op_error(self.kind, "the body calls the user CustomOp %s" % (
                ", ".join("%r (%s)" % (n.get("attrs", {}).get("op_type"), describe_node(n))
                          for n in self.user_custom_nodes)))
        if training and (recording or device_type != "cpu"):
            self.refuse_aux_state_training()


def refusing_training(graph_json):
    """The decoded gluon_cf nodes of a graph (a block's) that refuse a training call
    (NOTE [training refused by the node]), in the graph's order."""
    found = []
    for n in graph_json["nodes"]:
        kind = registry.kind_of(n)
        node = decode(kind, n["attrs"]["spec"]) if kind else None
        if node is not None and (node.aux_state_nodes or node.remat_aux_nodes
                                 or node.user_custom_nodes):
            found.append(node)
    return found


def decode(kind, spec_text) -> Node:
    """The decoded node of a ``kind`` node's ``spec`` text, checked first (cached per spec)."""
    key = (kind, spec_text)
    node = _SPECS.get(key)
    if node is None:
        spec = check_node_spec(kind, spec_text)  # NOTE [files are checked before MXNet reads them]
        node = _SPECS[key] = Node(kind, spec)
        # (where the node was made, if in this process: NOTE [where a node was made] in errors.py)
        node.spec_key = spec_key(spec_text)
    return node



registry.set_decoder(decode)
