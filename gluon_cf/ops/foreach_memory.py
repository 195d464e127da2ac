"""The outermost stateful ``foreach`` node writes its outputs into MXNet's output arrays: nothing
stacked, concatenated or copied on the way.

NOTE [where a loop's memory goes]
    Measured with ``python -m gluon_cf.bench.memory`` and by taking the loop apart (hybridized
    LSTMCell H=256, B=32, peak RSS growth of one call in a fresh process). Before this module,
    at T=400 a recorded forward kept 222 MB against 144 MB for MXNet's ``_foreach`` and
    160 MB for a Python loop of the hybridized cell on views of the data; with backward 257
    against 170 MB (0.64 against 0.43 MB per step). Unrolling itself cost nothing (one step
    per graph kept as much). Each step kept, beyond its body's own buffers, copies of its
    output (32 KB here) or data:

    * the data block sliced inside the graph (``slice_axis``): a copy of the step's data,
      kept because ``FullyConnected``'s backward reads it (``_foreach`` and NDArray indexing
      give views);
    * the outputs stacked inside the graph, then multiplied by 1 (``_cachedop.py``): two
      copies, the second an output of the recorded call, so kept;
    * the chunks' outputs concatenated into the node's output: one more, kept by the node for
      backward (NOTE [gradients through a node]) and copied into MXNet's output array.

    Inference (185 MB for 50 MB of outputs at T=1,600) held the chunks' outputs, their
    concatenation and MXNet's output at once, and pushed every call to MXNet's engine before
    the first had run: a static-memory CachedOp called while its earlier calls are pending
    gives each call fresh buffers (MXNet's NaiveEngine, which runs each call at once, grew by
    the outputs alone).

    So the outermost node of a stateful foreach whose body is a plain graph runs here
    (``ForeachRule.forward_into``, called by ``node.py`` with MXNet's output arrays): the
    unrolled graph takes each step's data as its own input, a view (``d[t]``), and returns
    each step's outputs as they are. In training the recorded call writes each step's output
    into its row of MXNet's output array (``out=``) and the node keeps it as a head of
    backward with that row of the gradient; nothing is stacked or concatenated, and an output
    is multiplied by 1 only where NOTE [gradients passed straight through] asks. In
    inference the graph stacks its outputs and its static CachedOp writes them into the rows
    of MXNet's output array, the states alternating between two buffers and the last into
    MXNet's, with at most IN_FLIGHT calls pending: outputs are allocated once (by MXNet) and a
    step's intermediates are the static CachedOp's, reused by the next call. Values and
    gradients are those of the same operators in the same order.

    After: inference at T=1,600 grows 53 MB for its 50 MB of outputs (``_foreach`` 84 MB);
    training keeps 0.40-0.43 MB per step with one step per recorded call (NOTE [one recorded
    step per call]; seven runs at T=1,600 gave 644-651 MB four times and 691-694 MB three
    times, ``_foreach`` 686-688 MB every time: about the outputs' 50 MB, alive at the peak or
    not depending on when MXNet's engine frees what), 0.48 with ten: the forward of ten-step calls
    holds what a Python loop of the hybridized cell holds (660 against 658 MB at T=1,600: what
    MXNet's CachedOp keeps for a recorded call, every buffer of its forward planned together with
    its backward; ``_foreach`` 590 MB) and their backward adds 105 MB (the Python loop 66 MB,
    ``_foreach`` 69 MB), whatever the number of heads. Later, recorded calls run op by op
    (NOTE [recorded calls run op by op]): 0.40-0.41 MB per step at T=1,600, below ``_foreach``.
"""
import json
import threading
from typing import List

import mxnet as mx
import numpy as np

from .._cachedop import CachedOpPair
from ..node import recorded as _recorded
from ..graph import Graph
from ..graph.operator_errors import bounds_error
from . import foreach as _foreach


IN_FLIGHT = 2   # calls of the unrolled graph pushed ahead of MXNet's engine at most
# NOTE [one recorded step per call]
#     In training, unrolled calls of 10 steps kept more than calls of one step each: at
#     T=1,600 (LSTM H=256, B=32) 761 against 647 MB (2 steps 753, 5 steps 757, 20-80 steps
#     769-785), the difference appearing in backward (each call's backward buffers are planned
#     for all of its steps). A call costs ~0.1 ms, which matters for small steps only (NOTE
#     [unrolled steps] in ``foreach.py``: a body of H=8 trained 1.3-1.4x slower one step per
#     call): so a recorded loop whose states hold at least ONE_STEP_STATE_BYTES per step (an
#     LSTM of H=256, B=32 holds 64 KB) runs one step per call, smaller ones UNROLL steps.
ONE_STEP_STATE_BYTES = 64 * 1024
# NOTE [recorded calls run op by op]
#     A recorded call of a (non-static) CachedOp allocates every buffer of its memory plan,
#     planned for its forward and backward together, and keeps them until its backward: an
#     LSTM step (H=256, B=32) kept its gates before the split (128 KB, the FullyConnected
#     outputs summed in place), which no backward reads: 288 KB per step against _foreach's
#     219 (MXNet's profiler, storage allocated per step, NaiveEngine). MXNet's own flag
#     ``is_dynamic`` (CachedOpConfig: "the graph contains dynamic shape operators") runs the graph
#     op by op instead (``NaiveRunGraph``), each output allocated as its operator runs and dropped
#     after its last reader unless the backward reads it, as ``_foreach`` runs its body. Same
#     operators, same order, same values. Measured (peak RSS growth, forward + backward, fresh
#     process per run, three runs alternating with the old form and ``_foreach``, other jobs
#     running): T=1,600 647-655 MB against 660-699 before and ``_foreach``'s 689-690; T=400 159-166
#     against 168-177 and 171.
RECORDED_FLAGS = [("is_dynamic", "true")]


def forward_into(node, inputs, out_data, is_train):
    """Run ``node`` (a stateful foreach) writing its outputs into ``out_data`` (NOTE [where a
    loop's memory goes]). Returns the heads for backward, ``[(array, output index, row)]``
    (``row``: the step whose row of that output it is, or None for all of it), recorded
    arrays only; or None when this node does not run here (the caller then runs the rule's
    ``forward``). A body checking its indices when it runs (take(mode='raise'), index_copy's
    rows) is waited for, its error at the user's line (NOTE [an index out of bounds at run
    time]): the steps' CachedOps are called here, not through the graph's own call."""
    body = node.graphs["body"]
    checking = [] if body.partitioned else body.cached_op().bounds_checking()
    if not checking:
        return _forward_steps_into(node, inputs, out_data, is_train)
    try:
        heads = _forward_steps_into(node, inputs, out_data, is_train)
        if heads is not None:
            for array in out_data:
                array.wait_to_read()
        return heads
    except mx.MXNetError as err:
        ours = bounds_error(checking, err)
        if ours is None:
            raise
        raise ours from None


def _forward_steps_into(node, inputs, out_data, is_train):
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
    slot_shapes = row_shapes + [a.shape for a in inputs[nd_:]]
    body.cached_op().check_reshapes(tuple(slot_shapes[s] for s in body.slots))
    if body.cached_op().zero_size_nodes(tuple(slot_shapes[s] for s in body.slots)):
        # a step computes a zero-size array: the rule's forward runs it operator by operator
        # (NOTE [zero-size values computed inside a graph] in graph/cached_graph.py)
        return None
    recording = mx.autograd.is_recording()
    # Which slot values autograd recorded (marked inputs; a view of one is too): a call is
    # recorded when one of its inputs is, and then so are all its outputs. Asked of the inputs
    # only, not of every step's output (autograd's answer walks back the whole history).
    marked = [_recorded(a) for a in data] + [_recorded(s) for s in states] + \
        [_recorded(c) for c in captured] if recording else []
    heads: List[mx.nd.NDArray] = []
    buffers = None
    # The states of the calls pushed and maybe not run yet (NOTE above).
    in_flight: List[List[mx.nd.NDArray]] = []
    state_bytes = sum(s.size * np.dtype(s.dtype).itemsize for s in states)
    # How many steps a call runs: NOTE [one recorded step per call].
    per_call = 1 if recording and state_bytes >= ONE_STEP_STATE_BYTES else _foreach.UNROLL
    for begin in range(0, length, per_call):
        steps = min(per_call, length - begin)
        if len(in_flight) > IN_FLIGHT:
            for s in in_flight.pop(0):
                s.wait_to_read()
        last = begin + steps == length
        graph = _step_graph(node, steps, row_shapes, stacked=not recording)
        op = graph.cached_op()
        step_data = [d[begin + t] for t in range(steps) for d in data]
        # (arrays on the states' context: NOTE [arrays of a node on another context])
        if recording:
            rows = [out_data[k][begin + t] for k in range(num_out) for t in range(steps)]
            result = graph.recorded()(*_args(op, step_data, states, captured),
                                      out=rows + [mx.nd.empty(s.shape, s.context, s.dtype)
                                                  for k, s in enumerate(states)
                                                  if k not in graph.aliases])
            result = list(result) if isinstance(result, (list, tuple)) else [result]
            recorded = any(marked[_slot_value(s, steps, nd_, ns)] for s in op.slots)
            if recorded:
                for k in range(num_out):
                    heads.extend((o, k, begin + t)
                                 for t, o in enumerate(result[k * steps:(k + 1) * steps]))
            marked[nd_:nd_ + ns] = [recorded] * ns
            states = graph.states_of(result, ns, num_out * steps)
            in_flight.append(states)
            if last:
                with mx.autograd.pause(train_mode=is_train):
                    for k, s in enumerate(states):
                        out_data[num_out + k][:] = s
                if recorded:
                    heads.extend((s, num_out + k, None) for k, s in enumerate(states))
        else:
            if last:
                targets = list(out_data[num_out:])
            else:
                if buffers is None:
                    buffers = [[mx.nd.empty(s.shape, s.context, s.dtype) for s in states]
                               for _ in range(2)]
                targets = buffers[(begin // per_call) % 2]
            outs = [out_data[k][begin:begin + steps] for k in range(num_out)] + targets
            CachedOpPair.__call__(op, *_args(op, step_data, states, captured), out=outs)
            states = targets
            in_flight.append(states)
    return heads


def _slot_value(slot, steps, num_data, num_states):
    """Which node input (data, state, captured) unrolled slot ``slot`` holds a value of."""
    if slot < num_data * steps:
        return slot % num_data
    return slot - num_data * steps + num_data


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
    # A final state that is the last step's output k (an LSTM's h) is not an output of its
    # own: its array is that output's row (a copy multiplied by 1 would be kept per call).
    aliases = {}
    if not stacked:
        heads = json.loads(mx.sym.Group(out_syms + state_syms).tojson())["heads"]
        last_step = {tuple(heads[k * steps + steps - 1][:2]): k * steps + steps - 1
                     for k in range(num_out)}
        for k in range(ns):
            aliases[k] = last_step.get(tuple(heads[len(out_syms) + k][:2]))
        aliases = {k: i for k, i in aliases.items() if i is not None}
    kept_states = [sym for k, sym in enumerate(state_syms) if k not in aliases]
    unrolled = mx.sym.Group(out_syms + kept_states)
    slots = [int(n[len("slot"):]) for n in unrolled.list_inputs()]
    graph = Graph.from_spec({"json": unrolled.tojson(), "inputs": slots,
                             "num_outputs": len(out_syms) + len(kept_states)})
    graph = cache[key] = _Unrolled(graph, aliases)
    return graph


class _Unrolled:
    """A step graph's CachedOps for this thread, with the graph's slot map."""

    def __init__(self, graph, aliases):
        self.graph = graph
        self.aliases = aliases   # final state -> the output (position) that is its value
        self._recorded = {}   # thread id -> CachedOp for recorded calls

    def states_of(self, result, num_states, first_state):
        """The final states from a call's ``result`` (states from ``first_state`` on, but
        for the aliases)."""
        kept = iter(result[first_state:])
        return [result[self.aliases[k]] if k in self.aliases else next(kept)
                for k in range(num_states)]

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
                passthrough_guarded(self.graph.symbol), flags=RECORDED_FLAGS)
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
    reaches: List[bool] = []   # per node, in the JSON's topological order
    for n in nodes:
        reaches.append(n["op"] == "null" or (n["op"] not in COMPUTED_GRADIENTS and
                                             any(reaches[i[0]] for i in n["inputs"])))
    outputs, seen = [], set()
    for k, head in enumerate(js["heads"]):
        entry = (head[0], head[1])
        guard = entry in seen or reaches[head[0]]
        seen.add(entry)
        outputs.append(symbol[k] * 1 if guard else symbol[k])
    return _heads_kept_apart(mx.sym.Group(outputs))


# NOTE [outputs MXNet would merge]
#     A CachedOp eliminates common expressions (MXNET_ELIMINATE_COMMON_EXPR, on by default):
#     nodes of one operator, attributes and inputs become one, and outputs that then name one
#     entry get ``_copy`` nodes inserted. Steps of an unrolled graph whose output does not
#     depend on the step (a loop appending a value computed before it, ``outs.append(h)``)
#     are such nodes, and the ``is_dynamic`` CachedOp, writing into rows of one output array
#     (``out=`` views), wrote the first row only, leaving the others as they were: garbage
#     (review, session 19). A hidden attribute of its own on every output's node (``__x__``
#     attributes are kept by MXNet and ignored by operators) keeps them apart: no output
#     shares its node with another output's, so none is merged or copied.
def _heads_kept_apart(symbol):
    """``symbol`` with every output's node marked by an attribute of its own (NOTE [outputs
    MXNet would merge])."""
    js = json.loads(symbol.tojson())
    for k, head in enumerate(js["heads"]):
        node = js["nodes"][head[0]]
        if node["op"] != "null":
            node.setdefault("attrs", {})["__gluon_cf_output__"] = str(k)
    return mx.sym.load_json(json.dumps(js))
