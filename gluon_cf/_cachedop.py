"""The CachedOps that run every subgraph."""
import json
import os

import mxnet as mx
import numpy as np


class CachedOpPair:
    """Two CachedOps of one symbol: static memory for inference, dynamic under autograd.

    A ``static_alloc`` CachedOp reuses its buffers from call to call, which is what makes it fast
    but also makes it unsafe to call again while an earlier recorded call still awaits backward
    (seen here: wrong gradients when a forward is recomputed in backward). So recorded calls use
    a CachedOp without static memory.

    The recorded CachedOp multiplies every output by 1; see :func:`_no_gradient_passthrough`.

    MXNet refuses to build a CachedOp for a graph without inputs (a ``cond`` branch returning
    constants, MXNet issue 12154); such a graph runs in a bound executor, its outputs copied out.
    """

    def __init__(self, symbol):
        self.symbol = symbol
        self.constant = not symbol.list_inputs()
        if self.constant:
            self.executor = symbol.bind(mx.current_context(), {})
        else:
            self._build()

    def _build(self):
        self.static = mx.nd.CachedOp(self.symbol, flags=[("static_alloc", True)])
        self.dynamic = mx.nd.CachedOp(_no_gradient_passthrough(self.symbol))

    def __call__(self, *args, out=None):
        """The outputs; ``out``: arrays (views too) the outputs are written into instead."""
        if self.constant:
            outputs = self.executor.forward(is_train=mx.autograd.is_training())
            if out is not None:
                for dst, value in zip(out, outputs):
                    dst[:] = value
                return out
            return [o.copy() for o in outputs]
        op = self.dynamic if mx.autograd.is_recording() else self.static
        try:
            return op(*args) if out is None else op(*args, out=out)
        except mx.MXNetError:
            # A CachedOp whose shape inference failed keeps half of its state: the next call
            # fails otherwise ("Graph attr dependency shape is required by pass
            # MXPlanMemory"), whatever its inputs. Fresh ones: every call fails or works
            # alike, whatever came before.
            self._build()
            raise


def _no_gradient_passthrough(symbol):
    """``symbol`` with every output multiplied by 1.

    MXNet 1.9's CachedOp backward fails ("storage_type_num_unknown_nodes") when the call is chained
    (a loop body's outputs fed to its next call) and an input's gradient is an output gradient
    passed straight through (``s + y`` hands the gradient of the sum to ``s`` and ``y`` as is).
    ``out * 1`` makes every output gradient go through a real operator. Values are unchanged.
    """
    outputs = [symbol[i] for i in range(len(symbol.list_outputs()))]
    return mx.sym.Group([o * 1 for o in outputs])


# NOTE [an input returned as an output]
#     A hybridized block's graph holding a Custom operator (a gluon_cf node, MXNet's own
#     ``F.contrib.cond`` as well) whose output is one of the block's inputs as it is
#     (``return out, h``, a state passed through), recorded: when that output's gradient
#     reaches backward and the input needs none, MXNet 1.9.1's CachedOp backward fails its
#     own check ("storage_type_num_unknown_nodes (1 vs. 0)", naming no line), where the same
#     block eagerly, or without the node, trains. The block's CachedOp is built from its graph
#     with such heads copied (``identity``): a real operator between the input and the output,
#     as MXNet's check needs; values and gradients unchanged (round 26r). Its graph, exported
#     and inspected, stays the user's.
#     An auxiliary state returned (``self.bn.running_mean``) is not copied: the copy is not
#     ordered after the BatchNorm updating the state in place, and returned the value before
#     the update, where eagerly and in MXNet's CachedOp it is the updated one (review round
#     26r); an auxiliary state never needs a gradient, and MXNet's backward takes it as it is.
def copied_variable_heads(symbol):
    """``symbol`` with every output that is a variable, but an auxiliary state, copied through
    ``identity``, or None when none is (NOTE [an input returned as an output])."""
    outputs = [symbol[i] for i in range(len(symbol.list_outputs()))]
    aux = set(symbol.list_auxiliary_states())

    def copied(o):
        return o.get_children() is None and o.name not in aux
    if not any(copied(o) for o in outputs):
        return None
    return mx.sym.Group([mx.sym.identity(o) if copied(o) else o for o in outputs])


# NOTE [MKLDNN values read by a node]
#     A node is an MXNet ``Custom`` operator, which MXNet 1.9.1 runs asynchronously: its
#     ``ForwardEx``/``BackwardEx`` wrap each input in an NDArray over the same buffer
#     (``AllocateNDArrayCopy``, not owning it) and queue the Python callback on a worker
#     thread. Custom is no MKLDNN operator, so for an input in an MKLDNN layout
#     (``IsMKLDNNData``) ``PushOperator`` first makes a default-layout copy
#     (``CreateDefaultInputs``: ``Reorder2Default``, a new chunk and engine variable) in a
#     vector local to the engine operation; it is freed when ``ForwardEx`` returns, nothing
#     waits on its variable, and the callback reads the freed buffer: a race, not a layout
#     read (other bytes in 5-10 of 30 calls; every call with a 10 ms sleep in a plain
#     CustomOp's forward; never with ``MXNET_MKLDNN_ENABLED=0`` or NaiveEngine, which runs the
#     callback at once). Such inputs: an MKLDNN concat (``F.concat(a, b, dim=1)``, gluonnlp's
#     HybridBeamSearchSampler's ``init_scores``), a 4-D convolution's value (nChw8c), an
#     eager convolution's output given to the block, and in backward the gradient a
#     convolution after the node hands it (10 of 10 fresh blocks' gradients wrong; MXNet's
#     own hybridized ``F.contrib.cond`` gets these gradients wrong too). The buffer is gone
#     before the callback runs, so the node cannot reorder it; no Python API marks Custom
#     MKLDNN-aware. So where MKLDNN is on, the graph a block's CachedOp runs passes through
#     ``expand_dims`` and ``squeeze`` (MKLDNN reshapes: they write the default layout, and
#     their gradients ``_backward_reshape`` too) each input of a Custom node but another
#     node's output (written by Python, default) and each input or parameter that may be
#     sparse (not given dense when the graph was built; a parameter with a sparse value or
#     gradient) or 0-d (given 0-d then: no MKLDNN layout, and outside numpy-shape mode
#     ``expand_dims`` cannot infer an unknown shape, where MXNet's own error or gluon_cf's
#     ``ScalarInputError`` must come). A node's output gets its gradient from the operators
#     reading it, in the graph or after the block (an eager convolution's backward: MKLDNN's
#     blocked layout, every gradient before the block wrong in 10 of 10 fresh blocks): each
#     node output another operator reads, and each that is the block's output, passes
#     through ``Cast`` to its own dtype (inferred for the dtypes of the inputs and parameters
#     of the call the CachedOp is built for; one CachedOp is kept per such dtypes and chosen
#     under the block's lock right before it runs, ``_cached_op_for_dtypes`` in hybrid.py:
#     the review found outputs of other dtypes from threads calling with float32 and
#     float64, ``Parameter.cast``, graphs kept per autograd mode; where none is inferred,
#     one read by an operator through ``expand_dims`` and ``squeeze``, the block's output
#     unguarded). Cast is no MKLDNN operator: MXNet hands its
#     backward the gradient reordered to the default layout, synchronously, and it writes
#     the node's so. (Not for a node's inputs: a concat's MKLDNN value through a Cast, the
#     node read other bytes in 30 of 30 calls, test_hostile_r31h_mkldnn; why, not found.) And Cast
#     asks for no resource: an operator that does (``_copy``, ``expand_dims``, ``squeeze``,
#     ``_mul_scalar`` ask for temporary space under MKLDNN) and is skipped after the node
#     failed marks the temporary space it was lent with that failure (MXNet's ``OnStart``
#     reads the variables an operator writes too), and an operator of a later call lent the
#     same copy of it is skipped with the old error (session 33's ``_copy`` of a block's
#     outputs: export's healthy call raised a failed call's boolean_mask error,
#     test_hostile_export24; session 31's ``expand_dims`` and ``squeeze`` there:
#     test_failed_calls_r30review; and with them after nodes' outputs read by operators,
#     a failed call's error raised twice, test_failed_calls_r29fail). Tried and refused
#     there: ``_mul_scalar`` by 1 (a bool output became int64), ``reshape_like`` (failed
#     shape inference on 0-d outputs before gluon_cf's own errors), ``amp_multicast``
#     (MKLDNN's "unknown type" for bool, int64, float16, float64),
#     ``_identity_with_attr_like_rhs`` (a zeros_like more in backward). Memory while
#     recording: one to two more buffers of the guarded outputs (the node keeps its own for
#     its backward, and the Cast's gradient is one more): a recorded 400-step LSTM foreach
#     with 12.5 MB of outputs peaks 17 MB higher (medians of 7 fresh runs, 308 -> 325 MB;
#     test_foreach_memory and test_remat_budget count one buffer apart). Only that graph:
#     the block's own (``export``, ``export_onnx``) is unchanged. Cost: the beam decoder of
#     tests/hostile_programs31h_c.py ~11.5 -> ~14 ms a call on a loaded machine (its node
#     reads eight parameters, each now copied); memory: each copied input, kept for the
#     backward (a recorded foreach over a 13 MB sequence peaks 13 MB higher than MXNet's).
#     A partitioned graph (NOTE [partitioned blocks] in hybrid.py) runs its gluon_cf nodes in
#     the calling thread, no Custom operator (a Conv2D's value is right there, unguarded), but
#     a user's CustomOp as an imperative ``mx.nd.Custom`` (NOTE [user CustomOps at run
#     time]): its inputs but nodes' outputs pass through the same two operators there
#     (``default_layout``; before, 16 of 20 fresh blocks' values wrong, a Conv2D's value read
#     by a user CustomOp in a block that runs partitioned, 10 of 20 in a foreach body).
#     MXNet 1.9.1 cannot ``copy()`` a view of an array in an MKLDNN layout (``conv(x)[0]``:
#     "Check failed: !is_view"); remat's copies of loop slices and recursive calls' arguments
#     read them through the same two operators first (``copy_of``).
#     MXNet's CachedOp records a graph of at most ``inline_limit`` operators (2 by default, no
#     ``static_alloc``) operator by operator, as eagerly; a larger one is recorded as one
#     ``_CachedOp``, whose backward refuses ``create_graph=True`` ("CachedOp does not support
#     higher order gradients"). The copies must not change which: a graph MXNet would record
#     by operators (a foreach after ``F.ones``) has its guarded CachedOp's ``inline_limit``
#     raised to the guarded graph's operators (:func:`inlined_as_before`), so a first-order
#     gradient with ``create_graph=True`` still works and a second-order one still raises
#     gluon_cf's error naming the node (round fix31b; the copies' ``_backward_reshape`` or
#     ``_backward_cast``, which MXNet meets first and cannot differentiate either, is taken
#     for the node's:
#     ``remat_record.second_order_error``). Recorded by operators, the graph runs the same
#     operators (the copies included) through the same engine calls.

MKLDNN = mx.runtime.Features().is_enabled("MKLDNN") and \
    os.environ.get("MXNET_MKLDNN_ENABLED", "1") != "0"


def _maybe_sparse(node, dense):
    """Whether ``node`` is a variable that may hold, or get as gradient, a sparse value."""
    return node["op"] == "null" and node["name"] not in dense


def default_layout(array):
    """``array`` through expand_dims and squeeze (default layout, recorded by autograd like
    any operator) where MKLDNN is on (NOTE [MKLDNN values read by a node])."""
    if not MKLDNN or array.stype != "default":
        return array
    return mx.nd.squeeze(mx.nd.expand_dims(array, axis=0), axis=0)


def copy_of(array):
    """``array.copy()``, which MXNet 1.9.1 refuses for a view of an array in an MKLDNN layout
    (``conv(x)[0].copy()``: "Check failed: !is_view"); with MKLDNN it copies the view read
    through :func:`default_layout`."""
    return default_layout(array).copy()


def _entry_dtypes(graph, entries, given):
    """The dtype names of the JSON ``graph``'s ``entries`` (``[node, output, version]``) for
    variables of the dtypes ``given`` (by name), None where MXNet cannot infer one."""
    if not entries:
        return []
    probe = dict(graph, heads=[list(e) for e in entries])
    probe.pop("node_row_ptr", None)
    try:
        _, types, _ = mx.sym.load_json(json.dumps(probe)).infer_type_partial(**given)
    except mx.MXNetError:
        return [None] * len(entries)
    return [None if t is None else np.dtype(t).name for t in types]


def default_layout_inputs(symbol, dense=(), ours=lambda node: False, given=None):
    """``symbol`` with the inputs of its Custom nodes (but nodes' outputs and variables not in
    ``dense``: inputs given dense arrays, dense parameters with dense gradients) passed through
    expand_dims and squeeze, and the nodes' outputs other operators read and the outputs of
    the nodes ``ours`` names (gluon_cf's, whose outputs are dense; a user CustomOp's may be
    sparse) that are the graph's outputs through ``Cast`` to their own dtype (inferred for
    variables of the dtypes ``given``, by name; where none is, the first through expand_dims
    and squeeze, the second unguarded); None when MKLDNN is off or none is (NOTE [MKLDNN
    values read by a node])."""
    if not MKLDNN:
        return None
    graph = json.loads(symbol.tojson())
    nodes = graph["nodes"]
    values, gradients = [], []   # (node, input) of each entry a guard is for
    for i, node in enumerate(nodes):
        for k, entry in enumerate(node["inputs"]):
            op = nodes[entry[0]]["op"]
            if node["op"] == "Custom":      # (its value)
                if op in ("Custom", "cast_storage") or op.startswith("_sparse") or \
                        _maybe_sparse(nodes[entry[0]], dense):
                    continue    # (nodes; sparse values have no layout to restore)
                values.append((i, k))
            elif op == "Custom" and node["op"] != "cast_storage" and \
                    not node["op"].startswith("_sparse"):
                gradients.append((i, k))   # (the gradient an operator reading a node's output
    heads = [k for k, entry in enumerate(graph["heads"]) if ours(nodes[entry[0]])]  # hands it)
    entries = {(e[0], e[1]): e for e in
               [nodes[i]["inputs"][k] for i, k in gradients] + [graph["heads"][k] for k in heads]}
    dtypes = dict(zip(entries, _entry_dtypes(graph, list(entries.values()), given or {})))
    made = {}

    def guarded(entry, gradient_only=False):
        key = (entry[0], entry[1])
        if key not in made:
            name = "%s_layout%d" % (nodes[entry[0]]["name"], entry[1])
            if dtypes.get(key) is not None:
                nodes.append({"op": "Cast", "name": name + "_cast",
                              "attrs": {"dtype": dtypes[key]}, "inputs": [list(entry)]})
            elif gradient_only:
                return list(entry)
            else:
                nodes.append({"op": "expand_dims", "name": name + "_expand",
                              "attrs": {"axis": "0"}, "inputs": [list(entry)]})
                nodes.append({"op": "squeeze", "name": name + "_squeeze",
                              "attrs": {"axis": "(0,)"}, "inputs": [[len(nodes) - 1, 0, 0]]})
            made[key] = len(nodes) - 1
        return [made[key], 0, 0]
    for i, k in values + gradients:
        nodes[i]["inputs"][k] = guarded(nodes[i]["inputs"][k])
    for k in heads:   # (the gradient an operator after the block hands the node)
        graph["heads"][k] = guarded(graph["heads"][k], gradient_only=True)
    if not made:
        return None
    graph.pop("node_row_ptr", None)   # (the loader recomputes it)
    return mx.sym.load_json(json.dumps(graph))


def _operators(symbol):
    """The number of operators (nodes but variables) of ``symbol``'s graph."""
    return sum(n["op"] != "null" for n in json.loads(symbol.tojson())["nodes"])


def inlined_as_before(flags, before, after):
    """``flags`` of a CachedOp of ``after`` (``before`` with copies added) whose
    ``inline_limit`` records ``after`` operator by operator where MXNet would record
    ``before`` so (NOTE [MKLDNN values read by a node])."""
    flags = list(flags)
    given = dict(flags)
    limit = int(given.get("inline_limit", 2))
    static = str(given.get("static_alloc", False)).lower() in ("true", "1")
    if static or _operators(before) > limit:
        return flags
    return [(k, v) for k, v in flags if k != "inline_limit"] + \
        [("inline_limit", max(limit, _operators(after)))]
