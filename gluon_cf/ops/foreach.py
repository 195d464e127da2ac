"""``gluon_cf.foreach``: scan a function over the leading axis of the data, carrying states."""
import json
from typing import Callable, Tuple

import mxnet as mx
import numpy as np

from .. import executor, node as _node, registry, remat as _remat, rowwise
from ..executor import Parallel, done
from ..graph import Graph, decode
from .._names import name_manager
from .._structure import containers_of, describe, flatten, regroup, regroup_like
from ..tracing import (count_subgraph_names, flatten_returned, merge_captures, trace,
                       user_location)
from ..checks import (arrays_only, check_arity, check_callable, check_data_has_axis,
                      check_kept_shapes, check_pair, check_same_dtypes, check_structure,
                      flatten_argument, mismatch, mode_of, not_hybridizable, op_at, stack_steps)
from .._typing import Arrays
from ..zero_size import eagerly
from . import eager_loops
from .foreach_data import check_lengths, check_sliceable, length_of, no_step_outputs
from .foreach_memory import forward_into as _forward_into
from .foreach_remat import forward_into as _remat_forward_into
from .foreach_onnx import declare_step_shapes, scan_of_any_length, standard_nodes_only
from .loops import keeping_shapes, loop_batching_rule, per_row, stacked_shape

OP = "foreach"


def foreach(body: Callable[[Arrays, Arrays], Tuple[Arrays, Arrays]], data: Arrays,
            init_states: Arrays, name: str = "foreach",
            remat: _remat.Remat = False) -> Tuple[Arrays, Arrays]:
    """Scan ``body`` over axis 0 of ``data``, as ``mx.nd.contrib.foreach`` /
    ``mx.sym.contrib.foreach``.

    ``data`` and ``init_states`` are an array or a (nested) list of arrays; ``body(data_t, states)``
    returns ``(outputs, new_states)`` with ``new_states`` structured like ``init_states``. The
    semantics are those of this Python function::

        def foreach(body, data, init_states):
            states, outputs = init_states, []
            for t in range(len(data)):
                out, states = body(data[t], states)
                outputs.append(out)
            return stack(outputs, axis=0), states

    All data arrays must share the same (non-zero) length along axis 0. Outputs keep their
    structure, shapes and dtypes from step to step. States do in hybridized mode and with
    ``remat``; eagerly without it they may change shape, dtype or structure from step to step,
    as in MXNet's eager foreach, which hands whatever the body returned to the next step. Values
    the body reads from its closure (outer arrays, Gluon parameters) become explicit inputs of
    the graph node in hybridized mode, so gradients reach them.

    ``remat`` (training memory; the README's section on ``remat``): ``False`` keeps every
    step's intermediates for backward; ``True`` keeps only what each step receives and returns
    and recomputes the step in backward; an int ``k`` keeps the states of every k-th step and
    recomputes k steps at a time; ``"auto"`` or ``gluon_cf.MemoryBudget(nbytes)`` choose k from
    the loop length and the measured size of a step. Gradients are those of ``remat=False``.

    Example: a running sum over the rows of ``data``:

    >>> import mxnet as mx, gluon_cf
    >>> data = mx.nd.array([[1, 2], [3, 4], [5, 6]])
    >>> sums, [total] = gluon_cf.foreach(lambda x, s: (x + s[0], [x + s[0]]),
    ...                                  data, [mx.nd.zeros((2,))])
    >>> sums.asnumpy()
    array([[ 1.,  2.],
           [ 4.,  6.],
           [ 9., 12.]], dtype=float32)
    """
    check_callable(OP, body=body)
    flat_data, data_fmt = flatten_argument(OP, data, "data")
    flat_states, states_fmt = flatten_argument(OP, init_states, "init_states")
    if not flat_data:
        raise ValueError("%s: data must contain at least one array" % op_at(OP))
    check_arity(OP, ("data", "states"), body=body)
    mode = mode_of(OP, flat_data + flat_states, "data and init_states")
    remat = _remat.check_remat(OP, remat)
    step = _Step(body, data_fmt, states_fmt)
    if mode == "symbol":
        return _foreach_symbolic(step, flat_data, flat_states, name, remat,
                                 getattr(body, NO_STEP_ON_EMPTY_DATA, False))
    check_sliceable(flat_data)
    # (lengths first: a 1-D boolean_mask result of no element has no readable shape)
    lengths = [length_of(d, user_location()) for d in flat_data]
    check_data_has_axis(OP, [d.shape for d in flat_data], user_location())
    check_lengths(lengths, user_location())
    if _remat.applies(remat):
        nd_ = len(flat_data)
        step.where = user_location()   # (a step recomputed in backward has no user frame)
        loop_ = _remat.Loop(OP, remat, step.where, flat_data, flat_states,
                            _remat.closure_arrays(body),
                            lambda t, slices, states: done(eagerly(step.eager, slices + states,
                                                                   nd_)),
                            eager=True, length=lengths[0])
        outputs, states = _remat_outputs(loop_, executor.run(loop_.forward()))
        return regroup(outputs, step.out_fmt), step.regroup_states(states)

    # (NOTE [eager loop states may change] in eager_loops.py)
    return eager_loops.foreach(body, flat_data, data_fmt, init_states, lengths[0])


class _Step:
    """Calls the user's body on flat values and checks what it returns."""

    def __init__(self, body, data_fmt, states_fmt):
        self.body, self.data_fmt, self.states_fmt = body, data_fmt, states_fmt
        self.out_fmt = None
        self.returned_states = None   # the containers of what body returned last
        self.where = None   # the user's call, for checks run with no user frame (remat)

    def regroup_states(self, flat):
        """The final states as MXNet's eager foreach returns them: in the containers of what
        body returned last (a tuple stays a tuple)."""
        if self.returned_states is None:
            return regroup(flat, self.states_fmt)
        return regroup_like(flat, self.returned_states)

    def __call__(self, values, num_data):
        outputs, states = check_pair(OP, "body", "outputs, new_states", self.body(
            regroup(values[:num_data], self.data_fmt), regroup(values[num_data:], self.states_fmt)))
        flat_states, states_fmt = flatten_returned(states, "gluon_cf.foreach",
                                                   "the states returned by body",
                                                   arrays_only(OP, "states"))
        check_structure(OP, "body returned states", states_fmt, "init_states", self.states_fmt)
        flat_out, out_fmt = flatten_returned(outputs, "gluon_cf.foreach",
                                             "the outputs returned by body")
        if self.out_fmt is not None and out_fmt != self.out_fmt:
            raise ValueError("%s: body returned outputs structured as %s, earlier steps "
                             "returned %s" % (op_at(OP), describe(out_fmt),
                                              describe(self.out_fmt)))
        self.out_fmt = out_fmt
        self.returned_states = containers_of(states)
        return [outputs, states]

    def eager(self, slots, num_data):
        outputs, states = self(slots, num_data)
        flat_out = flatten(outputs, "gluon_cf.foreach", "outputs")[0]
        flat_states = flatten(states, "gluon_cf.foreach", "states")[0]
        check_kept_shapes(OP, "state", "states", "body", slots[num_data:], flat_states,
                          self.where, remat=True)
        return flat_out + flat_states


def loop(data_at, length, body, states, captured, where=None):
    """The loop itself, shared by eager mode and the node: returns ``(flat_outputs, states)``.

    A generator (NOTE [trampoline]). ``data_at(t)`` gives the data slices of step ``t``;
    ``body(slots)`` is a generator returning the flat outputs followed by the flat new states.
    ``where``: the node's user line (NOTE [run-time loop checks name the user's line]).
    """
    per_step = []
    num_states = len(states)
    for t in range(length):
        result = yield body(data_at(t) + list(states) + list(captured))
        cut = len(result) - num_states
        per_step.append(result[:cut])
        states = result[cut:]
        if per_step and len(per_step[-1]) != len(per_step[0]):  # eager bodies may vary
            raise ValueError("%s: body returned %d outputs at step %d but %d at step 0"
                             % (op_at(OP), len(per_step[-1]), t, len(per_step[0])))
    outputs = [stack_steps(OP, k, column, where) for k, column in enumerate(zip(*per_step))]
    return outputs, list(states)


def _remat_outputs(loop_, result, where=None):
    """The outputs of a loop run by :class:`remat.Loop`, stacked, recorded as one node."""
    per_step, states = result
    outputs = [stack_steps(OP, k, column, where) for k, column in enumerate(zip(*per_step))]
    flat = loop_.record(outputs + list(states), per_step)
    return flat[:len(outputs)], flat[len(outputs):]


# The attribute a converted for's body carries (NOTE [a foreach of no step])
NO_STEP_ON_EMPTY_DATA = "runs_no_step_on_empty_data"


def _rows_told(data_shape, step_shape):
    """``data_shape`` (partly known: MXNet's 0) with its unknown dimensions after the first
    taken from a step's shape the body inferred, as MXNet's foreach answers them; None when
    that tells nothing more."""
    if not (isinstance(data_shape, tuple) and len(data_shape) >= 2 and
            isinstance(step_shape, tuple) and len(step_shape) == len(data_shape) - 1) or \
            any(d and s and d != s for d, s in zip(data_shape[1:], step_shape)):
        return None
    told = data_shape[:1] + tuple(d or s for d, s in zip(data_shape[1:], step_shape))
    return told if told != data_shape else None


# NOTE [a foreach of no step]
#     MXNet 1.9.1's F.contrib.foreach fails on data of length 0, eagerly (an UnboundLocalError)
#     and in a graph, whatever its body returns; gluon_cf.foreach called by the user refuses
#     it alike, eager and hybridized (its eager body has not run, so what it would return is
#     unknown there; hybridized, a body of states only once ran no step while the same call
#     eagerly refused: a block's result depended on hybridize(), issue 24). A ``for`` over a
#     tensor that autograph converts is plain Python eagerly, where no row runs no step: its
#     foreach (``NO_STEP_ON_EMPTY_DATA`` set on its body, the spec's ``no_steps_ok``) runs no
#     step when it collects no rows, its states unchanged (``for r in
#     F.contrib.boolean_mask(x, m)`` whose mask keeps nothing), and what the loop collects
#     (its step outputs) is rows of none of the shapes its body's graph infers for one step
#     (``no_step_outputs``: eagerly, Python's list of no item; NOTE [a dim of 0 read as
#     unknown]); where only running the body could tell them, it is refused at the for's
#     line on every call (issue 24).


def _count_state_copies(body_g, num_out):
    """Count the identity MXNet 1.9.1's foreach copies a new state through when it is also an
    output (``return h, [h]``), as gluon_cf's body needs none: the nodes made after the loop
    are named as MXNet names them (NOTE [node names])."""
    outputs, states = body_g.out_value
    out_names = {o.name for o in flatten(outputs, "gluon_cf.foreach", "outputs")[0]}
    for k, state in enumerate(flatten(states, "gluon_cf.foreach", "states")[0]):
        if state.name in out_names and body_g.symbol[num_out + k].name == state.name:
            name_manager().get(None, "identity")


def _foreach_symbolic(step, flat_data, flat_states, name, remat=False, no_steps_ok=False):
    num_data, num_states = len(flat_data), len(flat_states)
    count_subgraph_names(name)
    body_g = trace(OP, "body", num_data + num_states, lambda vs: step(vs, num_data))
    num_out = body_g.num_outputs - num_states
    _count_state_copies(body_g, num_out)
    captured, slot_of = merge_captures(OP, [body_g], first_slot=num_data + num_states,
                                       walk_order=True)
    spec = {"graphs": {"body": body_g.spec(range(num_data + num_states), slot_of)},
            "num_data": num_data, "num_states": num_states, "num_out_data": num_out,
            "num_outputs": body_g.num_outputs}
    if remat:
        spec["remat"] = _remat.to_text(remat)
        spec["remat_where"] = user_location() or ""
    if no_steps_ok:
        spec["no_steps_ok"] = True
    outputs = _node.make_node(OP, flat_data + flat_states + captured, spec, name,
                              user_location())
    return (regroup(outputs[:num_out], step.out_fmt),
            regroup(outputs[num_out:], step.states_fmt))


# NOTE [unrolled steps]
#     A step of a hybridized loop is a CachedOp call (~50-130 us here) and, under autograd, one
#     recorded node whose backward is another call: for small bodies that is the whole cost
#     (MXNet's own _foreach runs its steps in C++). So a stateful foreach whose body is a plain
#     graph (no gluon_cf nodes, no run-time shapes, outside recursion) runs UNROLL steps per
#     call: one graph holding UNROLL copies of the body, each reading its slice of a block of
#     the data and the states the previous copy computed, outputs stacked inside. Same
#     operators, same order: the values and gradients are those of step-by-step execution.
#     The outermost node runs its own form of these graphs, which keeps no more memory than
#     the steps themselves need (NOTE [where a loop's memory goes] in ``foreach_memory.py``);
#     the form here serves a foreach nested in another node's graph.
UNROLL = 10


def _unrolled_loop(node, data, states, captured, frame):
    """Generator: the loop as calls of :func:`_unrolled_body` graphs (NOTE [unrolled steps])."""
    length = data[0].shape[0]
    chunks = []
    for begin in range(0, length, UNROLL):
        steps = min(UNROLL, length - begin)
        graph = _unrolled_body(node, steps, [d.shape[1:] for d in data])
        result = yield graph.run([d[begin:begin + steps] for d in data] + list(states)
                                 + list(captured), frame)
        cut = len(result) - len(states)
        chunks.append(result[:cut])
        states = result[cut:]
    outputs = [column[0] if len(column) == 1 else mx.nd.concat(*column, dim=0)
               for column in zip(*chunks)]
    return outputs + list(states)


def _unrolled_body(node, steps, data_row_shapes):
    """The body of ``node`` unrolled ``steps`` times as one Graph (cached per node, step count
    and data row shapes); its slots are the node's, data slots taking blocks of ``steps``
    rows."""
    cache = node.__dict__.setdefault("unrolled_bodies", {})
    key = (steps, tuple(data_row_shapes))
    graph = cache.get(key)
    if graph is not None:
        return graph
    spec = node.spec
    nd_, ns, num_out = spec["num_data"], spec["num_states"], spec["num_out_data"]
    body_spec = spec["graphs"]["body"]
    body = mx.sym.load_json(body_spec["json"])
    slot_of = dict(zip(body.list_inputs(), body_spec["inputs"]))
    # The unrolled graph's inputs: the body's own variables (a data variable takes the block).
    outer = {slot: mx.sym.var(name) for name, slot in slot_of.items()}
    state_syms = [outer.get(nd_ + k) for k in range(ns)]   # None: a state the body never reads
    per_step = []
    for t in range(steps):
        bind = {}
        for name, slot in slot_of.items():
            if slot < nd_:   # data[t]: shape[1:], or (1,) for 1-D data (NDArray indexing)
                row = tuple(data_row_shapes[slot]) or (1,)
                bind[name] = mx.sym.reshape(mx.sym.slice_axis(outer[slot], axis=0, begin=t,
                                                              end=t + 1), shape=row)
            elif slot < nd_ + ns:
                bind[name] = state_syms[slot - nd_]
            else:
                bind[name] = outer[slot]
        result = body(**bind)
        outs = [result[k] for k in range(len(result.list_outputs()))]
        per_step.append(outs[:num_out])
        state_syms = outs[num_out:]
    stacked = [mx.sym.stack(*column, axis=0) for column in zip(*per_step)]
    unrolled = mx.sym.Group(stacked + state_syms)
    slot_by_name = {var.name: slot for slot, var in outer.items()}
    graph = cache[key] = Graph.from_spec({
        "json": unrolled.tojson(), "inputs": [slot_by_name[n] for n in unrolled.list_inputs()],
        "num_outputs": len(stacked) + ns})
    return graph


def _remat_forward(node, data, states, captured, frame):
    """Generator: the node's loop with rematerialisation (NOTE [rematerialisation])."""
    nd_, ns = node.spec["num_data"], node.spec["num_states"]
    body = node.graphs["body"]
    where = _node.where_created(node) or ""   # ("": no line known, not net(x)'s)

    def step(t, slices, states):
        if node.run_time_shapes:
            return keeping_shapes(OP, "state", "states", "body",
                                  body.run(slices + states + loop_.closure, frame), states,
                                  where)
        return body.run(slices + states + loop_.closure, frame)   # (Loop.backward_segments)

    _remat.refuse_wanted_integers(OP, node, list(data) + list(states) + list(captured))
    slots = [d[0] for d in data] + list(states) + list(captured)
    loop_ = _remat.Loop(OP, _remat.from_text(OP, node.spec["remat"]),
                        node.spec.get("remat_where") or None, data, states, captured, step,
                        eager=False, random=_remat.holds_random_ops(node.spec),
                        step_bytes=_remat.graph_bytes_of(body, slots), length=data[0].shape[0])
    _remat.nested_in_node(loop_, node)
    outputs, states = _remat_outputs(loop_, (yield from loop_.forward()), where)
    return outputs + states


def _step_slice(shape):
    """The shape of data[t] for data of ``shape``: shape[1:], or (1,) for 1-D data as NDArray
    indexing gives; data of run-time shape gives slices of run-time shape."""
    if registry.is_dynamic(shape):
        dims = shape.dims
        return registry.Dynamic(None if dims is None else (dims[1:] or (1,)))
    return (shape[1:] or (1,)) if shape is not None else None


class ForeachRule(registry.Rule):
    """Node inputs and slots: ``[*data, *states, *captured]``; in slots, data are step slices.

    Outputs: ``[*stacked_outputs, *final_states]``.
    """

    kind = OP
    spec_fields = {"num_data": "count", "num_states": "count", "num_out_data": "count",
                   "remat": "optional text", "remat_where": "optional text",
                   "no_steps_ok": "optional flag"}
    graph_roles = ("body",)
    outputs_graph = "body"
    # A data shape with unknown dimensions (MXNet's 0, ``infer_shape_partial``) still gives
    # its steps' slices when only the length is unknown.
    accepts_partial_shapes = True

    def slot_shapes(self, spec, in_shapes):
        # A step sees data[t]: shape[1:], or (1,) for 1-D data as NDArray indexing gives.
        num_data = spec["num_data"]
        return [_step_slice(s) if k < num_data else s for k, s in enumerate(in_shapes)]

    def infer_shape(self, node, in_shapes):
        nd_, ns = node.spec["num_data"], node.spec["num_states"]
        data = in_shapes[:nd_]
        check_data_has_axis(OP, data, _node.where_created(node))
        if all(registry.is_complete(s) for s in data):
            check_lengths([s[0] for s in data], _node.where_created(node))
        inferred, outs = node.graphs["body"].infer_shape(self.slot_shapes(node.spec, in_shapes),
                                                         keep_partial=True)
        shapes = list(in_shapes)
        for slot, shape in inferred.items():
            if slot >= nd_ and (shapes[slot] is None or
                                isinstance(shapes[slot], tuple)
                                and not registry.is_complete(shapes[slot])):
                shapes[slot] = shape
            elif slot < nd_ and _rows_told(shapes[slot], shape) is not None:
                shapes[slot] = _rows_told(shapes[slot], shape)   # (MXNet's foreach does too)
        num_out = node.spec["num_out_data"]
        new_states, old_states = outs[num_out:], shapes[nd_:nd_ + ns]
        if all(registry.is_complete(s) for s in new_states + old_states) and \
                new_states != old_states:
            raise mismatch(OP, "state shapes before and after body", "init_states", old_states,
                           "new_states", new_states, hint=not_hybridizable(OP, "states"))
        length = data[0][0] if isinstance(data[0], tuple) else data[0]
        return shapes, [stacked_shape(length, s) for s in outs[:num_out]] + outs[num_out:]

    def infer_type(self, node, in_types):
        inferred, outs = node.graphs["body"].infer_type(in_types)
        types = [t if t is not None else inferred.get(i) for i, t in enumerate(in_types)]
        nd_, ns = node.spec["num_data"], node.spec["num_states"]
        check_same_dtypes(OP, "state dtypes before and after body", "init_states",
                          types[nd_:nd_ + ns], "new_states", outs[node.spec["num_out_data"]:],
                          hint=not_hybridizable(OP, "states"))
        return types, outs

    def forward(self, node, inputs, out_shapes, frame):
        nd_, ns = node.spec["num_data"], node.spec["num_states"]
        data, states, captured = inputs[:nd_], inputs[nd_:nd_ + ns], inputs[nd_ + ns:]
        body = node.graphs["body"]
        where = _node.where_created(node) or ""   # ("": no line known, not net(x)'s)
        length = [length_of(d, where) for d in data][0]   # (before reading shapes: above)
        check_data_has_axis(OP, [d.shape for d in data], where)
        empty = no_step_outputs(node, data, states, captured) if length == 0 else None
        if node.run_time_shapes or length == 0:   # a length known only now: checked as eager
            # mode does (zero rows: no step to run)
            check_lengths([d.shape[0] for d in data], where, empty)
        if length == 0 and (ns or empty):   # no step: the states as they came in, as copies
            return list(empty or []) + [mx.nd.identity(s) for s in states]
        if ns == 0:
            as_rows = _steps_as_rows(node, data, captured, out_shapes, frame)
            if as_rows is not None:
                return (yield as_rows)
            # No state: the steps are independent, a map. Running them as one Parallel request
            # lets the batching executor batch what they invoke (e.g. one tree per step).
            results = yield Parallel(body.run([d[t] for d in data] + captured, frame)
                                     for t in range(length))
            return [stack_steps(OP, k, column, where)
                    for k, column in enumerate(zip(*results))]
        if _remat.applies(node.spec.get("remat")):
            return (yield from _remat_forward(node, data, states, captured, frame))
        if not node.run_time_shapes and not body.partitioned and \
                (frame is None or frame.recursion is None):
            return (yield _unrolled_loop(node, data, states, captured, frame))
        step = lambda slots: body.run(slots, frame)  # noqa: E731
        if node.run_time_shapes:
            step = lambda slots: keeping_shapes(OP, "state", "states", "body",  # noqa: E731
                                                body.run(slots, frame), slots[nd_:nd_ + ns],
                                                where)
        outputs, states = yield loop(lambda t: [d[t] for d in data], length, step, states,
                                     captured, where)
        return outputs + states

    def forward_into(self, node, inputs, out_data, is_train):
        """The outermost node writes into MXNet's outputs (NOTE [where a loop's memory goes]
        in ``foreach_memory.py``): heads for backward, or None to run ``forward`` (which
        runs a recorded loop with remat, NOTE [rematerialisation])."""
        if _remat.applies(node.spec.get("remat")):
            # foreach_remat.py: (NOTE [where a rematerialised loop's memory goes])
            return _remat_forward_into(node, inputs, out_data, is_train)
        return _forward_into(node, inputs, out_data, is_train)

    def forward_batched(self, node, inputs, frame):
        """Once per row (NOTE [row-wise rules]: the loops' batching rule)."""
        return (yield per_row(self.forward, node, inputs, None, frame))

    def batching_rule(self, node, in_flags, in_shapes, out_shapes, used, rows):
        loop_batching_rule(self, node, in_flags, in_shapes, used)

    def to_onnx(self, custom_node):
        """Export rule: foreach -> Scan over axis 0 (NOTE [gluon_cf ops as ONNX control flow]
        in ``export/onnx_kit.py``)."""
        from gluon_cf.export.onnx_kit import ConverterNode, rank

        node = ConverterNode(custom_node, OP)
        spec = node.spec
        num_data, num_states, num_out = spec["num_data"], spec["num_states"], spec["num_out_data"]
        as_rows = _export_steps_as_rows(node, custom_node)
        if as_rows is not None:
            return as_rows
        data_slots = list(range(num_data))
        state_slots = list(range(num_data, num_data + num_states))
        captured = range(num_data + num_states, len(custom_node.inputs))

        data = []
        for k in data_slots:
            data_rank = rank(node.in_shapes[k], f"data input {k}", node)
            name = custom_node.inputs[k]
            if data_rank == 1:  # steps see (1,) slices
                name = node.add("Reshape", [name, node.const([-1, 1])])
            data.append(name)
        num_body_out = num_out + num_states
        body = node.convert("body", f"{node.name}_body", formal=state_slots + data_slots,
                            outer_slots=captured,
                            output_order=list(range(num_out, num_body_out)) + list(range(num_out)))
        declare_step_shapes(body.graph.output[num_states:], node.out_shapes[:num_out])
        outs = custom_node.outputs
        dtypes = [v.dtype for v in body.outputs]
        states = [custom_node.inputs[k] for k in state_slots]
        steps = [None if s is None else s[1:] for s in node.out_shapes[:num_out]]
        if (node.in_shapes[0] is None or node.in_shapes[0][0] is None) and \
                all(s is not None for s in steps) and standard_nodes_only(body.graph) and \
                all(np.dtype(d).kind in "iuf" for d in dtypes[num_states:]):
            scan_of_any_length(node, states, data, body.graph, dtypes, steps)
        else:
            node.add("Scan", states + data, outs[num_out:] + outs[:num_out], body=body.graph,
                     num_scan_inputs=num_data)
        return node.nodes, dtypes[num_states:] + dtypes[:num_states]


def _export_steps_as_rows(node, custom_node):
    """Export rule's form for a foreach whose steps can run as rows (NOTE [steps as rows]): the
    body once on all steps, no Scan; so a recursion inside runs once for all steps, its call
    trees' levels batched across them. None when that is not proven for this node: states,
    steps or outputs without a leading axis of 1, or a body not row-wise (checked with each
    dynamic dimension at two sizes)."""
    from gluon_cf.export.onnx_graph import ValueSpec

    spec = node.spec
    num_data = spec["num_data"]
    planned = node.in_shapes
    if spec["num_states"] or any(s is None for s in planned) or \
            any(len(s) > 1 and s[1] != 1 for s in planned[:num_data]):
        return None
    body = decode(OP, custom_node.attrs["spec"]).graphs["body"]
    # The row-wise rules speak of gluon_cf's executors; in ONNX, If, Scan and Loop run once per
    # call, not per row, so only a recursion (lowered level by level, any number of rows) may
    # be inside. An artifact's Recursion node runs one call per row: never as rows there.
    from gluon_cf.export.artifact_kit import SIGNATURES
    kinds = {registry.kind_of(n) for n in json.loads(spec["graphs"]["body"]["json"])["nodes"]}
    if SIGNATURES.get() is not None or kinds - {None, "recursion"}:
        return None
    # Dynamic dimensions (None in the plan) take two different sizes; both must pass.
    for size in (2, 3):
        shapes = [tuple(size if d is None else d for d in s) for s in planned]
        length = shapes[0][0]
        rows = [(length,) + s[2:] for s in shapes[:num_data]]
        values = [rowwise.Shaped(r) for r in rows] + \
            [rowwise.Shaped(s) for s in shapes[num_data:]]
        flags = [True] * num_data + [False] * (len(shapes) - num_data)
        try:
            _, outs = body.infer_shape([(1,) + r[1:] for r in rows] + shapes[num_data:])
        except Exception:   # noqa: BLE001 - no proof: keep the Scan
            return None
        if any(not registry.is_complete(o) or o[0] != 1 for o in outs) or \
                body.rows_rejected([values[s] for s in body.slots],
                                   [flags[s] for s in body.slots]) is not None:
            return None
    data_names, outer = [], {}
    for k in range(num_data):
        name = custom_node.inputs[k]
        shape = planned[k]
        if len(shape) == 2:   # (T, 1) -> (T,): the steps' (1,) slices stacked
            name = node.add("Reshape", [name, node.const([-1])])
        elif len(shape) > 2:  # (T, 1, ...) -> (T, ...): the steps' (1, ...) slices stacked
            if custom_node.opset >= 13:
                name = node.add("Squeeze", [name, node.const([1])])
            else:
                name = node.add("Squeeze", [name], axes=[1])
        outer[k] = ValueSpec(name, (None,) + tuple(shape[2:]), custom_node.input_dtypes[k])
        data_names.append(name)
    converted = node.convert("body", f"{node.name}_rows", outer_slots=range(len(planned)),
                             outer_values=outer)
    steps = node.add("Gather", [node.add("Shape", [data_names[0]]), node.const([0])])
    for out_name, produced, step_shape in zip(custom_node.outputs, node.inline(converted),
                                              outs):
        # An output the same for every step (one row) is repeated, as the executor does.
        rest = node.add("Slice", [node.add("Shape", [produced]), node.const([1]),
                                  node.const([np.iinfo(np.int64).max])])
        full = node.add("Expand", [produced, node.add("Concat", [steps, rest], axis=0)])
        node.add("Reshape", [full, node.const([-1] + list(step_shape))], [out_name])
    return node.nodes, [v.dtype for v in converted.outputs]


def _steps_as_rows(node, data, captured, out_shapes, frame):
    """A stateless foreach run as one batch of rows, one per step, or None.

    NOTE [steps as rows]
        The steps of a foreach without states are independent, and when its body acts row by
        row (NOTE [row-wise rules] in ``rowwise.py``) on the steps' slices stacked along axis
        0, running the body once on all of them equals running it per step: the batching
        executor's convention for a batch of invocations. So the batching executor runs it
        once (a recursive call in the body becomes one request of ``length`` rows instead of
        ``length`` requests) when each step's slice and each step's output have a leading
        axis of 1 (a 1-D data array gives (1,) slices): then the stacked steps are the data
        reshaped, and the stacked outputs the body's outputs reshaped.
    """
    length = data[0].shape[0] if data else 0
    if executor.get_executor() != "batched" or length < 2 or (frame is not None and frame.rows > 1):
        return None
    rows = []
    for d in data:
        if d.ndim != 1 and d.shape[1] != 1:
            return None
        rows.append(d if d.ndim == 1 else d.reshape((-1,) + d.shape[2:]))
    body = node.graphs["body"]
    slots = rows + list(captured)
    flags = [True] * len(rows) + [False] * len(captured)
    if out_shapes is not None and all(registry.is_complete(o) for o in out_shapes):
        outs = [tuple(o[1:]) for o in out_shapes]   # the node's stacked outputs, as inferred
    else:
        _, outs = body.infer_shape([(1,) + r.shape[1:] for r in rows] +
                                   [c.shape for c in captured])
    if any(not registry.is_complete(o) or o[0] != 1 for o in outs):
        return None
    if body.rows_rejected([slots[s] for s in body.slots], [flags[s] for s in body.slots]):
        return None
    return _run_steps_as_rows(body, slots, flags, length, outs, frame)


def _run_steps_as_rows(body, slots, flags, length, step_shapes, frame):
    outs = yield body.run(slots, executor.Frame(frame.recursion if frame else None, length,
                                                flags, frame.depth if frame else 0))
    stacked = []
    for k, (out, shape) in enumerate(zip(outs, step_shapes)):
        if out.shape[0] == 1 and length > 1:   # the same for every step (e.g. a parameter)
            out = mx.nd.repeat(out, length, axis=0)
        if out.shape != (length,) + tuple(shape[1:]):
            # (a recursive body whose output grows with the tree): reshape would fail inside
            # MXNet, or, were the sizes equal, reorder the values silently
            raise ValueError(
                "gluon_cf.foreach: output %d has shape %s per step at run time, but its shape "
                "rule declared %s to MXNet; shapes that depend on values are not supported in "
                "hybridized graphs yet" % (k, (1,) + out.shape[1:], tuple(shape)))
        stacked.append(out.reshape((length,) + tuple(shape)))
    return stacked


registry.register(ForeachRule())

