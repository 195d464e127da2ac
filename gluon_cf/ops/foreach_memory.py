"""A stateful ``foreach`` node run as MXNet's own ``_foreach`` keeps memory: its outputs written
into MXNet's output arrays, nothing stacked, concatenated or copied on the way.

NOTE [where a loop's memory goes]
    Measured (``python -m gluon_cf.bench.memory``; hybridized LSTMCell H=256, B=32, T=400, one
    forward under ``autograd.record()``, peak RSS growth): gluon_cf's unrolled loop (NOTE
    [unrolled steps] in ``foreach.py``) kept 222 MB, MXNet's ``_foreach`` 144 MB and a Python
    loop of the hybridized cell on views of the data 160 MB; with backward 254 vs 169 MB
    (0.64 vs 0.42 MB per step). Unrolling itself costs nothing (one step per graph kept as
    much). What a step kept beyond the body's own intermediates, each one more copy of a
    step's output (32 KB here) or data slice, all alive until backward:

    * the data block sliced inside the graph (``slice_axis``): a copy of the step's data,
      kept because ``FullyConnected``'s backward reads it (MXNet's ``_foreach`` and NDArray
      indexing give views);
    * the outputs stacked inside the graph, then multiplied by 1 (NOTE in ``_cachedop.py``):
      two copies, the second an output of the recorded call, so kept;
    * the chunks' outputs concatenated into the node's output: one more, kept by the node for
      backward (NOTE [gradients through a node]), and copied once more into MXNet's output
      array (``assign``).

    In inference the same chain (chunk outputs, concatenation, MXNet's output) held three
    copies of the outputs at once: 180 MB for 52 MB of outputs at T=1,600.

    So the outermost node of a stateful foreach whose body is a plain graph runs here
    (``ForeachRule.forward_into``, called by ``node.py`` with MXNet's output arrays): the
    unrolled graph takes each step's data as its own input, views of the data (``d[t]``),
    and returns each step's outputs as they are. In training the steps' outputs are copied
    into MXNet's output array (unrecorded) and kept as the recorded heads of backward, each
    with its rows of the output's gradient; nothing is stacked or concatenated. In inference
    the graph stacks its outputs and its static CachedOp writes them straight into the rows
    of MXNet's output array (``out=``), states alternating between two buffers and the last
    into MXNet's: outputs are allocated once (by MXNet) and a step's intermediates are the
    static CachedOp's, reused by the next call. Values and gradients are those of the same
    operators in the same order.
"""
import json
import threading

import mxnet as mx

from .._cachedop import CachedOpPair
from ..graph import Graph
from . import foreach as _foreach


IN_FLIGHT = 2   # calls of the unrolled graph pushed ahead of MXNet's engine at most


def forward_into(node, inputs, out_data, is_train):
    """Run ``node`` (a stateful foreach) writing its outputs into ``out_data`` (NOTE [where a
    loop's memory goes]). Returns the heads for backward, ``[(array, output index, rows)]``
    (``rows``: the step whose row of that output it is, or None for all of it), or None
    when this node does not run here (the caller then runs the rule's ``forward``)."""
    spec = node.spec
    nd_, ns, num_out = spec["num_data"], spec["num_states"], spec["num_out_data"]
    body = node.graphs["body"]
    if ns == 0 or node.run_time_shapes or body.partitioned or len(out_data) != num_out + ns:
        return None
    data, states, captured = inputs[:nd_], list(inputs[nd_:nd_ + ns]), inputs[nd_ + ns:]
    length = data[0].shape[0]
    if length == 0 or any(d.shape[0] != length for d in data) or \
            any(0 in a.shape for a in inputs):
        return None   # checked and reported by the rule's forward
    row_shapes = [d.shape[1:] for d in data]
    recording = mx.autograd.is_recording()
    heads = []
    buffers = None
    in_flight = []   # the states of the calls pushed and maybe not run yet (NOTE above)
    for begin in range(0, length, _foreach.UNROLL):
        steps = min(_foreach.UNROLL, length - begin)
        if len(in_flight) > IN_FLIGHT:
            for s in in_flight.pop(0):
                s.wait_to_read()
        last = begin + steps == length
        graph = _step_graph(node, steps, row_shapes, stacked=not recording)
        op = graph.cached_op()
        step_data = [d[begin + t] for t in range(steps) for d in data]
        if recording:
            rows = [out_data[k][begin + t] for k in range(num_out) for t in range(steps)]
            result = graph.recorded()(*_args(op, step_data, states, captured),
                                      out=rows + [mx.nd.empty(s.shape, dtype=s.dtype)
                                                  for s in states])
            result = list(result) if isinstance(result, (list, tuple)) else [result]
            for k in range(num_out):
                heads.extend((o, k, begin + t)
                             for t, o in enumerate(result[k * steps:(k + 1) * steps]))
            states = result[num_out * steps:]
            in_flight.append(states)
            if last:
                with mx.autograd.pause(train_mode=is_train):
                    for k, s in enumerate(states):
                        out_data[num_out + k][:] = s
                heads.extend((s, num_out + k, None) for k, s in enumerate(states))
        else:
            if last:
                targets = list(out_data[num_out:])
            else:
                if buffers is None:
                    buffers = [[mx.nd.empty(s.shape, dtype=s.dtype) for s in states]
                               for _ in range(2)]
                targets = buffers[(begin // _foreach.UNROLL) % 2]
            outs = [out_data[k][begin:begin + steps] for k in range(num_out)] + targets
            CachedOpPair.__call__(op, *_args(op, step_data, states, captured), out=outs)
            states = targets
            in_flight.append(states)
    return heads


def _args(op, step_data, states, captured):
    """The unrolled graph's inputs in its ``list_inputs`` order, from the slot values."""
    slots = step_data + list(states) + list(captured)
    return [slots[s] for s in op.slots]


def _step_graph(node, steps, data_row_shapes, stacked):
    """The body of ``node`` unrolled ``steps`` times, each step's data slices inputs of their
    own: slots ``[data of step 0 ..., data of step 1 ..., states, captured]``. Outputs: each
    output of every step (output-major), or each output stacked over the steps when
    ``stacked``, then the final states. Cached per node, step count, row shapes and form."""
    cache = node.__dict__.setdefault("step_graphs", {})
    key = (steps, tuple(data_row_shapes), stacked)
    graph = cache.get(key)
    if graph is not None:
        return graph
    spec = node.spec
    nd_, ns, num_out = spec["num_data"], spec["num_states"], spec["num_out_data"]
    body_spec = spec["graphs"]["body"]
    body = mx.sym.load_json(body_spec["json"])
    slot_of = dict(zip(body.list_inputs(), body_spec["inputs"]))
    step_slots = nd_ * steps
    variables = {}

    def var(slot):   # the variable of unrolled slot ``slot``
        if slot not in variables:
            variables[slot] = mx.sym.var("slot%d" % slot)
        return variables[slot]

    state_syms = [var(step_slots + k) if nd_ + k in slot_of.values() else None
                  for k in range(ns)]
    per_step = []
    for t in range(steps):
        bind = {}
        for name, slot in slot_of.items():
            if slot < nd_:
                bind[name] = var(t * nd_ + slot)
            elif slot < nd_ + ns:
                bind[name] = state_syms[slot - nd_]
            else:
                bind[name] = var(step_slots + slot - nd_)
        result = body(**bind)
        outs = [result[k] for k in range(len(result.list_outputs()))]
        per_step.append(outs[:num_out])
        state_syms = outs[num_out:]
    if stacked:
        out_syms = [mx.sym.stack(*column, axis=0) for column in zip(*per_step)]
    else:
        out_syms = [o for column in zip(*per_step) for o in column]
    unrolled = mx.sym.Group(out_syms + state_syms)
    slots = [int(n[len("slot"):]) for n in unrolled.list_inputs()]
    graph = Graph.from_spec({"json": unrolled.tojson(), "inputs": slots,
                             "num_outputs": len(out_syms) + ns})
    graph = cache[key] = _Unrolled(graph)
    return graph


class _Unrolled:
    """A step graph's CachedOps for this thread, with the graph's slot map."""

    def __init__(self, graph):
        self.graph = graph
        self._recorded = {}   # thread id -> CachedOp for recorded calls

    def cached_op(self):
        op = self.graph.cached_op()
        op.slots = self.graph.slots
        return op

    def recorded(self):
        """The CachedOp for recorded calls (one per thread, as ``Graph``'s): outputs multiplied
        by 1 only where NOTE [gradients passed straight through] asks for it."""
        thread = threading.get_ident()
        op = self._recorded.get(thread)
        if op is None:
            op = self._recorded[thread] = mx.nd.CachedOp(
                passthrough_guarded(self.graph.symbol))
        return op


# NOTE [gradients passed straight through]
#     ``_cachedop.py`` multiplies every output of a recorded CachedOp by 1: MXNet 1.9's CachedOp
#     backward fails when calls are chained and an input's gradient is an output's gradient
#     passed on as is (``s + y``). For the unrolled steps that copy is a step's output kept
#     twice (NOTE [where a loop's memory goes]), so here an output is multiplied by 1 only
#     when its gradient could reach an input unchanged: when, walking back from it through
#     operators other than COMPUTED_GRADIENTS (whose backward computes each input's gradient
#     as a new array), a graph input is reached, or when it repeats an earlier output (two
#     outputs of one entry could not be written into two arrays).
COMPUTED_GRADIENTS = frozenset({
    "FullyConnected", "Activation", "elemwise_mul", "_mul", "broadcast_mul", "_mul_scalar",
    "elemwise_div", "_div", "broadcast_div", "_div_scalar", "_rdiv_scalar", "sigmoid", "tanh",
    "relu", "exp", "log", "sqrt", "square", "dot", "batch_dot", "Convolution", "LeakyReLU",
    "softmax", "log_softmax", "Embedding"})


def passthrough_guarded(symbol):
    """``symbol`` with the outputs NOTE [gradients passed straight through] names multiplied
    by 1."""
    js = json.loads(symbol.tojson())
    nodes = js["nodes"]
    reaches = []   # per node, in the JSON's topological order
    for n in nodes:
        reaches.append(n["op"] == "null" or (n["op"] not in COMPUTED_GRADIENTS and
                                             any(reaches[i[0]] for i in n["inputs"])))
    outputs, seen = [], set()
    for k, head in enumerate(js["heads"]):
        entry = (head[0], head[1])
        guard = entry in seen or reaches[head[0]]
        seen.add(entry)
        outputs.append(symbol[k] * 1 if guard else symbol[k])
    return mx.sym.Group(outputs)
