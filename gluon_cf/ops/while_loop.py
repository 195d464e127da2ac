"""``gluon_cf.while_loop``: repeat a function while a condition holds, collecting step outputs."""
import json
from typing import Callable, List, Optional, Tuple

import mxnet as mx
import numpy as np

from .. import executor, node as _node, registry, remat as _remat, rowwise, rowwise_skeleton
from ..executor import done
from ..graph import Graph, decode
from .._structure import containers_of, describe, regroup, regroup_like
from ..tracing import (PendingShape, PendingSignature, count_subgraph_names, flatten_returned,
                       pending_shapes, trace, user_location)
from ..checks import (LoopVarShapeChange, arrays_only, check_arity, check_callable,
                      check_kept_shapes, check_pair, check_same_dtypes, check_structure,
                      flatten_argument, mismatch, mode_of, not_hybridizable, op_at,
                      pred_shape_error, pred_value, scalar_pred_shape, stack_steps)
from .._typing import Array, Arrays
from ..zero_size import eagerly
from . import eager_loops
from .loops import (NOT_ZERO, inferred_step_rows, keeping_shapes, loop_batching_rule,
                    per_row, stacked_shape)
from .while_loop_arguments import (PendingStepOutputs, check_max_iterations, func_may_run,
                                   input_order, mxnet_input_order, slot_order, symbolic_pred,
                                   unchanged_vars, unknown_rows_of_no_step)

OP = "while_loop"


def while_loop(cond: Callable[..., Array], func: Callable[..., Tuple[Optional[Arrays], Arrays]],
               loop_vars: Arrays, max_iterations: Optional[int] = None, name: str = "while_loop",
               exact_length: bool = False, report_truncation: Optional[str] = None,
               truncation_advice: Optional[str] = None,
               remat: _remat.Remat = False
               ) -> Tuple[Arrays, Arrays]:
    """Loop ``func`` while ``cond`` holds, as ``mx.nd.contrib.while_loop`` /
    ``mx.sym.contrib.while_loop``.

    ``cond(*loop_vars)`` returns a one-element predicate; ``func(*loop_vars)`` returns
    ``(step_output, new_loop_vars)``, where ``step_output`` may be ``None``/``[]`` and
    ``new_loop_vars`` has the structure, shapes and dtypes of ``loop_vars`` in hybridized mode
    and with ``remat`` (eagerly without it, as many items, which may change shape, dtype or
    structure from step to step, as in MXNet's eager while_loop). The semantics are those of
    this Python function::

        def while_loop(cond, func, loop_vars, max_iterations):
            steps, outputs = 0, []
            while steps < max_iterations and cond(*loop_vars):
                step_output, loop_vars = func(*loop_vars)
                outputs.append(step_output)
                steps += 1
            pad = [zeros_like(outputs[0])] * (max_iterations - steps)
            return stack(outputs + pad, axis=0), loop_vars

    Decisions where MXNet is vague:

    * With ``max_iterations`` given, outputs have ``max_iterations`` rows (MXNet's shape); rows
      after the last step are **zeros** (MXNet leaves them uninitialised).
    * **Exact length**: with ``max_iterations=None`` the loop runs until ``cond`` fails, and with
      ``exact_length=True`` until ``cond`` fails or ``max_iterations`` steps ran; either way the
      outputs have exactly as many rows as steps ran, eager and hybridized. Hybridized, their
      shape is then known only at run time, and the block runs partitioned: its ordinary
      operators still run as compiled graphs, with shapes inferred just before each runs.
    * A loop that runs zero times never calls ``func`` (as MXNet) and returns the initial
      ``loop_vars``. Hybridized, its step outputs are ``max_iterations`` rows of zeros (zero rows
      for exact length), shaped by shape inference (MXNet's symbolic loop: ``max_iterations``
      rows). Eagerly, as MXNet's eager loop, they are ``[]``: nothing can tell their structure
      and shapes without calling ``func``.
    * ``max_iterations`` must be at least 1 in hybridized mode.
    * A single array ``loop_vars`` gives a single array back; a list gives a list.
    * ``remat``: what training keeps, as ``foreach``'s (the README's section on
      ``remat``); ``"auto"`` and budgets take ``max_iterations`` as the loop's length
      (``remat.UNKNOWN_LENGTH`` without it).
    * ``report_truncation`` (gluon_cf's, used by ``@autograph``): a ``"file:line: source"``
      location; a hybridized loop that stops at ``max_iterations`` while ``cond`` still holds
      then warns (:class:`gluon_cf.TruncationWarning`) at that location, ending with
      ``truncation_advice`` if given (else how to raise an autograph loop's bound). MXNet's
      loop, and this one without it, stops there silently.

    Example: halve ``x`` while its sum exceeds 1, recording the sum before each step:

    >>> import mxnet as mx, gluon_cf
    >>> sums, x = gluon_cf.while_loop(lambda x: x.sum() > 1, lambda x: (x.sum(), x / 2),
    ...                               mx.nd.array([4.0]), max_iterations=5)
    >>> sums.asnumpy().ravel(), x.asnumpy()
    (array([4., 2., 0., 0., 0.], dtype=float32), array([1.], dtype=float32))
    """
    check_callable(OP, cond=cond)
    if isinstance(loop_vars, (list, tuple)) and len(loop_vars) == 0:
        raise ValueError("%s: loop_vars must contain at least one array" % op_at(OP))
    flat_vars, vars_fmt = flatten_argument(OP, loop_vars, "loop_vars")
    if callable(func) or any(isinstance(v, mx.sym.Symbol) for v in flat_vars):
        check_callable(OP, func=func)
    else:   # eagerly, as MXNet's, refused only at its first step (NOTE [loops of no step])
        func = _not_callable(func, op_at(OP))
    check_arity(OP, ["loop_vars[%d]" % k for k in range(len(vars_fmt))] if vars_fmt != 0 else
                ["loop_vars"], cond=cond, func=func)
    mode = mode_of(OP, flat_vars, "loop_vars")
    max_iterations = check_max_iterations(max_iterations, mode)
    remat = _remat.check_remat(OP, remat)
    pad_to = None if exact_length else max_iterations
    step = _Step(cond, func, vars_fmt)
    if mode == "symbol":
        return _while_symbolic(step, flat_vars, max_iterations, pad_to, name,
                               report_truncation, truncation_advice, remat)
    if _remat.applies(remat):
        step.where = user_location()   # (a step recomputed in backward has no user frame)
        loop_ = _remat.Loop(OP, remat, step.where, [], flat_vars,
                            _remat.closure_arrays([cond, func]),
                            lambda t, slices, vs: done(eagerly(step.eager, vs)), eager=True,
                            length=max_iterations)
        outputs, final = executor.run(_remat_loop(
            loop_, lambda vs: done(pred_value(OP, "the value returned by cond",
                                              eagerly(step.cond, vs), eager=True)), pad_to))
        if outputs is None:   # no step ran: func is not called (NOTE [loops of no step])
            return [], unchanged_vars(loop_vars, final, vars_fmt)
        return regroup(outputs, step.out_fmt), step.last_vars(final)
    # (NOTE [eager loop states may change] in eager_loops.py)
    return eager_loops.while_loop(cond, func, loop_vars, max_iterations, pad_to)


# NOTE [loops of no step]
#     A while_loop whose cond is false at once never calls func, eagerly or hybridized, as
#     MXNet's: calling it would repeat its Python side effects and, inside a recursive function,
#     make the recursive calls of a step that does not exist (a function whose base case is an
#     empty loop would never end). What its step outputs would have been is then known only
#     where a graph says it: hybridized, shape inference gives their shapes (``zero_rows``).
#     Where only running func could tell them (inference incomplete, or changing with a dim of
#     0: NOTE [a dim of 0 read as unknown]), func's graph (no Python code) runs once,
#     untracked, for them (``_rows_of_a_run``: a body whose step output is a boolean_mask's
#     rows, or a nested loop's collected list, of a counter past its bound), except where
#     an input has a dim of 0 or func makes a recursive call: that call is refused at the
#     loop's line (``unknown_rows_of_no_step``), as MXNet's symbolic loop never runs func
#     for no step (its step outputs of unknown shape are (1,) arrays of no defined value):
#     MXNet's operators on a value of no row gave what its kernels give on one ((0, 4) +
#     (2, 4) ran as (2, 4), and MXNet aborted at exit on the array it made), and in a
#     recursive function a leaf's empty loop ran its step's recursive calls 20,000 deep,
#     80 s (round 30r). Round 31x refused every such call, the counter's too (review 31x:
#     a while nested in an autograph while of no step, eager's (2, 4), was refused). Eagerly
#     only calling func could tell, and
#     MXNet 1.9.1's eager while_loop returns ``[]`` (its ``stacked_outputs`` of no step, not
#     regrouped: a plain empty list whatever func returns), which gluon_cf returns too; code
#     that may loop zero times and reads the step outputs runs hybridized (as it does under
#     MXNet, whose eager ``[]`` and symbolic ``max_iterations`` rows differ the same way).
#     A func that is not callable is refused only when a step would call it, eagerly (MXNet's
#     eager loop calls it then: a loop of no step returns ``[]`` and loop_vars there too);
#     hybridized it is refused at once, as the symbolic loop traces func whatever cond says.
#     While a recursive function's signature is discovered (NOTE [recursion design]), a body
#     that calls the function being discovered is the loop's non-recursive path: the loop
#     gives its initial loop_vars, and step outputs that raise PendingSignature when used.


def _rows_of_a_run(node, inputs, frame, pad_to, where):
    """Generator: the step outputs of a hybridized loop of no step whose shapes only running
    func tells, from one untracked run of func's graph on ``inputs`` (slot order) where none
    has a dim of 0 and func makes no recursive call, else refused at the loop's line
    ``where`` (NOTE [loops of no step])."""
    if not func_may_run(node.spec, inputs):
        raise unknown_rows_of_no_step(where)
    with mx.autograd.pause(train_mode=mx.autograd.is_training()):
        probe = yield node.graphs["func"].run(list(inputs), frame, record=False)
    return zero_rows(probe[:node.spec["num_out_data"]], pad_to)


def _not_callable(func, where):
    """A stand-in for an eager loop's ``func`` that is not callable: the TypeError MXNet's
    first step raises, at the user's call (a loop whose cond is false at once returns)."""
    def step(*loop_vars):
        raise TypeError("%s: func must be callable, got %s" % (where, type(func).__name__))
    return step


def _remat_loop(loop_, more, pad_to, where=None):
    """Generator: a loop run by :class:`remat.Loop`, its step outputs stacked and padded to
    ``pad_to`` rows, recorded as one node; ``(None, initial vars)`` if no step ran."""
    per_step, final = yield from loop_.forward(more)
    if not per_step:
        return None, loop_.init
    outputs = []
    for i, column in enumerate(zip(*per_step)):
        stacked = stack_steps(OP, i, column, where)
        pad = (pad_to or 0) - len(column)
        if pad > 0:
            stacked = mx.nd.concat(stacked, mx.nd.zeros((pad,) + column[0].shape,
                                                        ctx=stacked.context, dtype=stacked.dtype),
                                   dim=0)
        outputs.append(stacked)
    flat = loop_.record(outputs + list(final), per_step)
    return flat[:len(outputs)], flat[len(outputs):]


def _result(outputs, final, out_fmt, vars_fmt):
    return regroup(outputs, out_fmt), regroup(final, vars_fmt)


class _Step:
    """Calls the user's cond and func on flat loop variables and checks what they return."""

    def __init__(self, cond, func, vars_fmt):
        self.cond_fn, self.func_fn, self.vars_fmt = cond, func, vars_fmt
        self.out_fmt = None
        self.where = None   # the user's call, for checks run with no user frame (remat)
        self.vars_like = None   # the containers of what func last returned as new_loop_vars

    def last_vars(self, final):
        """An eager loop's final loop vars in the containers func last returned them in
        (its top level a list): MXNet 1.9.1's eager while_loop returns func's last
        ``new_loop_vars`` object, a tuple nested in it kept a tuple (regroup made lists)."""
        if self.vars_like is None or self.vars_fmt == 0:
            return regroup(final, self.vars_fmt)
        return regroup_like(final, self.vars_like)

    def _args(self, values):
        return regroup(values, self.vars_fmt) if self.vars_fmt != 0 else [values[0]]

    def cond(self, values):
        return self.cond_fn(*self._args(values))

    def func(self, values):
        outputs, new_vars = check_pair(OP, "func", "step_output, new_loop_vars",
                                       self.func_fn(*self._args(values)))
        outputs = [] if outputs is None else outputs
        if self.vars_fmt != 0 and isinstance(new_vars, tuple):
            new_vars = list(new_vars)
        if self.vars_fmt != 0 and not isinstance(new_vars, list):
            new_vars = [new_vars]
        if self.vars_fmt == 0 and isinstance(new_vars, (list, tuple)) and len(new_vars) == 1:
            new_vars = new_vars[0]
        # (flatten_returned: the user's value, named at the user's line as foreach's and
        # cond's are, an ArrayTypeError (an AssertionError too, as MXNet's while_loop raises))
        flat_vars, fmt = flatten_returned(new_vars, "gluon_cf.while_loop",
                                          "the new_loop_vars returned by func",
                                          arrays_only(OP, "loop variables"))
        check_structure(OP, "func returned new_loop_vars", fmt, "loop_vars", self.vars_fmt)
        self.vars_like = containers_of(new_vars)
        flat_out, out_fmt = flatten_returned(outputs, "gluon_cf.while_loop",
                                             "the step_output returned by func")
        if self.out_fmt is not None and out_fmt != self.out_fmt:
            raise ValueError("%s: func returned step_output structured as %s at one step "
                             "and %s at another" % (op_at(OP), describe(out_fmt),
                                                    describe(self.out_fmt)))
        self.out_fmt = out_fmt
        return flat_out, flat_vars

    def eager(self, values):
        flat_out, flat_vars = self.func(values)
        check_kept_shapes(OP, "loop variable", "loop variables", "func", values, flat_vars,
                          self.where, remat=True)
        return flat_out + flat_vars


class _Like:
    """What :func:`zero_rows` reads of a step output: its shape, dtype and context."""

    def __init__(self, shape, dtype, context):
        self.shape, self.dtype, self.context = shape, dtype, context


def zero_rows(rows_like, pad_to):
    """The step outputs of a loop that ran no step: ``pad_to`` rows of zeros shaped like the
    step outputs ``rows_like`` (zero rows when ``pad_to`` is None: exact length)."""
    rows = pad_to or 0
    if rows == 0:
        # mx.nd.zeros cannot make a 0-row array under MXNet 1.x shape semantics (0 = unknown);
        # an empty allocation of that shape is fine (and holds no data to initialise).
        return [mx.nd.empty((0,) + o.shape, ctx=o.context, dtype=o.dtype) for o in rows_like]
    return [mx.nd.zeros((rows,) + o.shape, ctx=o.context, dtype=o.dtype) for o in rows_like]


def loop(pred, func, loop_vars, captured, max_iterations, pad_to, zero_outputs, where=None):
    """The loop itself, shared by eager mode and the node: returns ``(flat_outputs, loop_vars)``.

    A generator (NOTE [trampoline]): ``pred(slots)`` is a generator returning a bool,
    ``func(slots)`` one returning the flat step outputs then the new loop vars. Outputs are
    padded with zero rows to ``pad_to`` rows (None: exact length).
    ``zero_outputs()`` gives the outputs of a loop that ran no step. ``where``: the node's user
    line (NOTE [run-time loop checks name the user's line] in ``checks.py``).
    """
    num_vars = len(loop_vars)
    per_step: List[list] = []   # per step, its flat outputs
    while (max_iterations is None or len(per_step) < max_iterations) and \
            (yield pred(list(loop_vars) + list(captured))):
        result = yield func(list(loop_vars) + list(captured))
        cut = len(result) - num_vars
        per_step.append(result[:cut])
        loop_vars = result[cut:]
    if not per_step:
        return zero_outputs(), list(loop_vars)
    outputs = []
    for i, column in enumerate(zip(*per_step)):
        stacked = stack_steps(OP, i, column, where)
        pad = (pad_to or 0) - len(column)
        if pad > 0:
            zeros = mx.nd.zeros((pad,) + column[0].shape, ctx=stacked.context,
                                dtype=stacked.dtype)
            stacked = mx.nd.concat(stacked, zeros, dim=0)
        outputs.append(stacked)
    return outputs, list(loop_vars)


def _func_then_cond(node):
    """One graph computing func's outputs and then cond on the new loop vars: a step is one
    call (and one read of the predicate) instead of two calls. Built once per node; its last
    output is the predicate, its slots are the node's."""
    fused = getattr(node, "func_then_cond", None)
    if fused is None:
        nv, num_out = node.spec["num_vars"], node.spec["num_out_data"]
        graphs = node.spec["graphs"]
        func = mx.sym.load_json(graphs["func"]["json"])
        cond = mx.sym.load_json(graphs["cond"]["json"])
        func_outputs = [func[k] for k in range(len(func.list_outputs()))]
        func_inputs = func.get_internals()
        func_var_of_slot = dict(zip(graphs["func"]["inputs"], func.list_inputs()))
        bind = {}
        for name, slot in zip(cond.list_inputs(), graphs["cond"]["inputs"]):
            if slot < nv:
                bind[name] = func_outputs[num_out + slot]
            elif slot in func_var_of_slot:
                bind[name] = func_inputs[func_var_of_slot[slot]]
        fused_symbol = mx.sym.Group(func_outputs + [cond(**bind)])
        slot_of = {n: s for n, s in zip(cond.list_inputs(), graphs["cond"]["inputs"])}
        slot_of.update(zip(func.list_inputs(), graphs["func"]["inputs"]))
        fused = node.func_then_cond = Graph.from_spec({
            "json": fused_symbol.tojson(),
            "inputs": [slot_of[n] for n in fused_symbol.list_inputs()],
            "num_outputs": len(func_outputs) + 1})
    return fused


def _static(shapes):
    return all(isinstance(s, tuple) for s in shapes)


def _pad_to(spec):
    """The rows a node's step outputs are padded to; None for exact length."""
    return None if spec.get("exact_length") else spec["max_iterations"]


def warn_truncation(where, bound, advice=None):
    """Report a loop that stopped at its bound with its condition still true, at the user's
    line ``where`` (``"file:line: source"``), ending with ``advice`` (how to raise the bound)."""
    import re
    import warnings
    from ..errors import TruncationWarning
    match = re.match(r"(.*?):(\d+): ", where)
    filename, line = (match.group(1), int(match.group(2))) if match else ("<unknown>", 0)
    warnings.warn_explicit(
        f"{where.rstrip(':')}: this loop stopped at its bound of {bound} iterations while its "
        f"condition still held; its results are those of the first {bound} steps ("
        + (advice or "raise the bound with gluon_cf.max_iterations(N) or the decorator's "
           "max_iterations") + ")",
        TruncationWarning, filename, line)


def _while_symbolic(step, flat_vars, max_iterations, pad_to, name, report_truncation=None,
                    truncation_advice=None, remat=False):
    nv = len(flat_vars)
    count_subgraph_names(name + "_cond", name + "_func")
    cond_g = trace(OP, "cond", nv, lambda vs: symbolic_pred(step.cond(vs)))
    if cond_g.num_outputs != 1:
        raise ValueError("%s: cond must return one Symbol, got %d outputs"
                         % (op_at(OP), cond_g.num_outputs))
    try:
        func_g = trace(OP, "func", nv, lambda vs: list(step.func(vs)))
    except PendingSignature as pending:
        # Discovering a recursive function that func calls: zero steps is the loop's path
        # without the call (NOTE [loops of no step]); this graph is thrown away.
        return PendingStepOutputs(pending), regroup(flat_vars, step.vars_fmt)
    inputs, var_inputs, slot_of = mxnet_input_order(flat_vars, cond_g, func_g)
    num_out = func_g.num_outputs - nv
    spec = {"graphs": {"cond": cond_g.spec(range(nv), slot_of),
                       "func": func_g.spec(range(nv), slot_of)},
            "num_vars": nv, "num_out_data": num_out, "max_iterations": max_iterations,
            "num_outputs": func_g.num_outputs}
    if var_inputs != list(range(nv)):   # NOTE [while_loop input order]
        spec["var_inputs"] = var_inputs
    if pad_to is None:
        spec["exact_length"] = True   # absent in graphs saved before exact length existed
    if remat:
        spec["remat"] = _remat.to_text(remat)
        spec["remat_where"] = user_location() or ""
    if report_truncation is not None and max_iterations is not None:
        spec["report_truncation"] = report_truncation
        if truncation_advice is not None:
            spec["truncation_advice"] = truncation_advice
    outputs = _node.make_node(OP, inputs, spec, name, user_location())
    return _result(outputs[:num_out], outputs[num_out:], step.out_fmt, step.vars_fmt)


def _func_shapes(node, in_shapes):
    """Infer func's graph. While the shapes of a recursive function that func calls are being
    inferred (NOTE [recursion design]), the loop is on its path of no step: its final loop vars
    are its initial ones, its step outputs unknown (NOTE [loops of no step])."""
    before = pending_shapes()
    try:
        return node.graphs["func"].infer_shape(in_shapes)
    except (mx.MXNetError, PendingShape):
        if pending_shapes() == before:
            raise
    nv, num_out = node.spec["num_vars"], node.spec["num_out_data"]
    return {}, [None] * num_out + list(in_shapes[:nv])


def _rows_swayed(node, in_shapes, func_out, num_out):
    """``func_out`` with each complete step output shape that a dim of an input known only at
    run time changes made Dynamic there (NOTE [a dim of 0 read as unknown]: MXNet reads that
    dim as unknown, and a gather_nd's row concatenated to another answered a complete (1, 4)
    for a (1, 8) row; the shape plan of export_onnx took it for the zero rows of no step)."""
    dims = [registry.dims_of(s) if registry.is_dynamic(s) else None for s in in_shapes]
    if not any(d is not None and None in d for d in dims):
        return func_out
    sized = [tuple(NOT_ZERO[0] if x is None else x for x in d) if d is not None else s
             for s, d in zip(in_shapes, dims)]
    try:
        other = node.graphs["func"].infer_shape(sized)[1]
    except (mx.MXNetError, ValueError, PendingShape):
        return func_out
    swayed = list(func_out)
    for k in range(num_out):
        shape, alt = func_out[k], other[k]
        if registry.is_complete(shape) and registry.is_complete(alt) and \
                len(alt) == len(shape) and tuple(alt) != tuple(shape):
            swayed[k] = registry.Dynamic(tuple(a if a == b else None
                                               for a, b in zip(shape, alt)))
        elif registry.is_complete(shape) and not registry.is_complete(alt):
            swayed[k] = registry.Dynamic(None)
    return swayed


class WhileLoopRule(registry.Rule):
    """Slots: ``[*loop_vars, *captured]``; node inputs: the same values in MXNet's order
    (NOTE [while_loop input order]), put in slot order by each entry point.

    Outputs: ``[*step_outputs, *final_loop_vars]``; step outputs have one row per step
    (``exact_length``, or ``max_iterations`` None) or are padded to ``max_iterations`` rows.
    """

    kind = OP
    spec_fields = {"num_vars": "count", "num_out_data": "count",
                   "max_iterations": "count or null", "exact_length": "optional flag",
                   "report_truncation": "optional text", "remat": "optional text",
                   "remat_where": "optional text", "var_inputs": "optional positions"}
    graph_roles = ("cond", "func")
    outputs_graph = "func"

    def spec_problem(self, spec):
        var_inputs = spec.get("var_inputs")
        if var_inputs is not None and (
                len(var_inputs) != spec["num_vars"] or len(set(var_inputs)) != len(var_inputs)
                or any(p >= spec["num_inputs"] for p in var_inputs)):
            return ("field 'var_inputs' must list %d distinct input positions below %d, got %s"
                    % (spec["num_vars"], spec["num_inputs"], var_inputs))
        return None

    def slot_order(self, spec, items):
        return slot_order(spec, items)

    def input_order(self, spec, items):
        return input_order(spec, items)

    def infer_shape(self, node, in_shapes):
        ins, outs = self._infer_shape(node, self.slot_order(node.spec, in_shapes))
        return self.input_order(node.spec, ins), outs

    def _infer_shape(self, node, in_shapes):
        nv, num_out = node.spec["num_vars"], node.spec["num_out_data"]
        cond_in, cond_out = node.graphs["cond"].infer_shape(in_shapes)
        if not scalar_pred_shape(cond_out[0]):    # NOTE [predicates of many elements]
            return list(in_shapes), [registry.Dynamic() for _ in range(num_out + nv)]
        func_in, func_out = _func_shapes(node, in_shapes)
        func_out = _rows_swayed(node, in_shapes, func_out, num_out)
        shapes = list(in_shapes)
        for inferred in (cond_in, func_in):
            for slot, shape in inferred.items():
                shapes[slot] = shapes[slot] or shape
        new_vars, old_vars = func_out[num_out:], shapes[:nv]
        if _static(new_vars) and _static(old_vars) and new_vars != old_vars:
            raise mismatch(OP, "loop variable shapes before and after func", "loop_vars",
                           old_vars, "new_loop_vars", new_vars, LoopVarShapeChange,
                           hint=not_hybridizable(OP, "loop variables"))
        pad_to = _pad_to(node.spec)
        rows = registry.Dynamic() if pad_to is None else pad_to   # exact length: as steps run
        stacked = [None if s is None else stacked_shape(rows, s) for s in func_out[:num_out]]
        return shapes, stacked + func_out[num_out:]

    def static_shape_error(self, node, in_shapes):
        cond_out = node.graphs["cond"].infer_shape(self.slot_order(node.spec, in_shapes))[1]
        return pred_shape_error(OP, "the value returned by cond", cond_out[0])

    def infer_type(self, node, in_types):
        ins, outs = self._infer_type(node, self.slot_order(node.spec, in_types))
        return self.input_order(node.spec, ins), outs

    def _infer_type(self, node, in_types):
        types = list(in_types)
        for name in ("cond", "func"):
            inferred, outs = node.graphs[name].infer_type(types)
            types = [t if t is not None else inferred.get(i) for i, t in enumerate(types)]
        nv, num_out = node.spec["num_vars"], node.spec["num_out_data"]
        check_same_dtypes(OP, "loop variable dtypes before and after func", "loop_vars",
                          types[:nv], "new_loop_vars", outs[num_out:],
                          hint=not_hybridizable(OP, "loop variables"))
        return types, outs

    def forward(self, node, inputs, out_shapes, frame):
        given, inputs = inputs, self.slot_order(node.spec, inputs)
        if frame is not None and frame.flags is not None:   # batched inputs, per slot too
            frame = frame.with_flags(self.slot_order(node.spec, frame.flags))
        nv, num_out = node.spec["num_vars"], node.spec["num_out_data"]
        loop_vars, captured = inputs[:nv], inputs[nv:]
        cond_g = node.graphs["cond"]
        pad_to = _pad_to(node.spec)

        if _remat.applies(node.spec.get("remat")):
            return (yield from self._remat_forward(node, inputs, frame, given))
        fused = _func_then_cond(node)
        where_made = _node.where_created(node) or ""   # ("": no line known)
        next_pred: list = []   # the predicate the last fused step computed on its new loop vars

        def pred(slots):
            if next_pred:
                value = next_pred.pop()
            else:
                value = (yield cond_g.run(slots, frame, record=False))[0]
            return _pred_of(node, value)

        steps = []

        def fused_step(slots):
            result = yield fused.run(slots, frame)
            next_pred.append(result[-1])
            steps.append(1)
            return result[:-1]

        step = fused_step
        if node.run_time_shapes:
            step = lambda slots: keeping_shapes(  # noqa: E731
                OP, "loop variable", "loop variables", "func", fused_step(slots), slots[:nv],
                where_made)
        per_step = yield loop(pred, step, loop_vars,
                              captured, node.spec["max_iterations"], pad_to,
                              zero_outputs=lambda: None, where=where_made)
        outputs, final = per_step
        where, bound = node.spec.get("report_truncation"), node.spec["max_iterations"]
        if where is not None and len(steps) == bound and \
                pred_value(OP, "the value returned by cond", next_pred[-1]):
            warn_truncation(where, bound, node.spec.get("truncation_advice"))
        if outputs is None:   # no step ran (NOTE [loops of no step])
            outputs = [] if num_out == 0 else self._no_step_outputs(node, inputs, pad_to)
        if outputs is None:   # shapes only running func tells
            outputs = yield from _rows_of_a_run(node, inputs, frame, pad_to, where_made)
        return outputs + final

    def _remat_forward(self, node, inputs, frame, given):
        """Generator: the loop with rematerialisation (NOTE [rematerialisation]); ``inputs``
        in slot order, ``given`` in the node's."""
        _remat.refuse_wanted_integers(OP, node, given)
        nv, num_out = node.spec["num_vars"], node.spec["num_out_data"]
        loop_vars, captured = inputs[:nv], inputs[nv:]
        cond_g, func_g = node.graphs["cond"], node.graphs["func"]
        bound, pad_to = node.spec["max_iterations"], _pad_to(node.spec)
        where_made = _node.where_created(node) or ""   # ("": no line known)

        def more(vs):
            value = (yield cond_g.run(list(vs) + captured, frame, record=False))[0]
            return _pred_of(node, value)

        def step(t, slices, vs):
            run = func_g.run(list(vs) + loop_.closure, frame)   # (Loop.backward_segments)
            if node.run_time_shapes:
                return keeping_shapes(OP, "loop variable", "loop variables", "func", run, vs,
                                      where_made)
            return run

        loop_ = _remat.Loop(OP, _remat.from_text(OP, node.spec["remat"]),
                            node.spec.get("remat_where") or None, [], loop_vars, captured, step,
                            eager=False, random=_remat.holds_random_ops(node.spec),
                            step_bytes=_remat.graph_bytes_of(func_g, inputs), length=bound)
        _remat.nested_in_node(loop_, node)
        outputs, final = yield from _remat_loop(loop_, more, pad_to, where_made)
        where = node.spec.get("report_truncation")
        if where is not None and loop_.steps == bound and (yield from more(final)):
            warn_truncation(where, bound, node.spec.get("truncation_advice"))
        if outputs is None:   # no step ran (NOTE [loops of no step])
            outputs = [] if num_out == 0 else self._no_step_outputs(node, inputs, pad_to)
            if outputs is None:
                outputs = yield from _rows_of_a_run(node, inputs, frame, pad_to, where_made)
        return outputs + final

    def _no_step_outputs(self, node, inputs, pad_to):
        """The step outputs of a loop that ran no step, shaped by inference on ``inputs`` (func
        is not run); None when their shapes are known only at run time."""
        num_out = node.spec["num_out_data"]
        try:   # (a 1-D array of no element has no shape MXNet can read: run func instead)
            rows = inferred_step_rows(node.graphs["func"], [x.shape for x in inputs], num_out)
            _, out_types = self._infer_type(node, [x.dtype for x in inputs])
        except (mx.MXNetError, ValueError):
            return None
        dtypes = out_types[:num_out]
        if rows is None or None in dtypes:
            return None
        ctx = inputs[0].context
        return zero_rows([_Like(tuple(r), t, ctx) for r, t in zip(rows, dtypes)], pad_to)

    def forward_batched(self, node, inputs, frame):
        """Once per row (NOTE [row-wise rules]: the loops' batching rule)."""
        return (yield per_row(self.forward, node, inputs, None, frame))

    def batching_rule(self, node, in_flags, in_shapes, out_shapes, used, rows):
        loop_batching_rule(self, node, in_flags, in_shapes, used)
        if rowwise.lowering_now():   # NOTE [loops lowered on rows] in rowwise.py
            spec = json.loads(node["attrs"]["spec"])
            graphs = decode(OP, node["attrs"]["spec"]).graphs
            # (the lowering carries every loop variable for all the rows)
            flags = [k < spec["num_vars"] or f
                     for k, f in enumerate(self.slot_order(spec, in_flags))]
            shapes = self.slot_order(spec, in_shapes)
            for role in ("cond", "func"):
                graph = graphs[role]
                if role == "cond":
                    rejected = graph.rows_rejected(
                        [rowwise.Shaped(tuple(shapes[k])) for k in graph.slots],
                        [flags[k] for k in graph.slots])
                else:   # (its recursive calls infer one row for all the invocations)
                    rejected = rowwise_skeleton.skeleton_rejected(graph.symbol, {
                        n: flags[k] for n, k in zip(graph.input_names, graph.slots)}, {
                        n: (rowwise.ROWS,) + tuple(shapes[k][1:]) if flags[k] else
                        tuple(shapes[k]) for n, k in zip(graph.input_names, graph.slots)})
                if rejected is not None:
                    raise rowwise.Rejected(
                        dict(node, op="gluon_cf.%s" % OP), "runs its %s on the rows of all "
                        "the invocations at once, and there %s" % (
                            role, rejected.describe(hint=False)), rejected.hint)

    def to_onnx(self, custom_node):
        """Export rule: while_loop -> Loop (NOTE [gluon_cf ops as ONNX control flow] in
        ``export/onnx_kit.py``)."""
        from gluon_cf.export.onnx_graph import ValueSpec, value_info
        from gluon_cf.export.onnx_kit import ConverterNode, Emitter, set_outputs

        from .while_loop_onnx import onnx_bound_guard, onnx_pad_rows
        node = ConverterNode(custom_node, OP)
        spec = node.spec
        num_vars, num_out = spec["num_vars"], spec["num_out_data"]
        var_slots = list(range(num_vars))
        captured = range(num_vars, len(custom_node.inputs))   # slots

        # The condition before the first step, on the initial loop vars.
        first_cond = node.convert("cond", f"{node.name}_cond_init",
                                  outer_slots=range(len(custom_node.inputs)))
        keep_going = node.truth(node.inline(first_cond)[0])

        # Body (i, cond, *vars) -> (cond(new_vars), *new_vars, *step_outputs).
        body_name = f"{node.name}_body"
        body = node.convert(
            "func", body_name, formal=[ValueSpec("iteration", (), np.dtype(np.int64)),
                                       ValueSpec("cond", (), np.dtype(bool))] + var_slots,
            outer_slots=captured,
            output_order=list(range(num_out, num_out + num_vars)) + list(range(num_out)))
        new_vars = {k: node.slot(k, name) for k, name in enumerate(body.output_names[:num_vars])}
        next_cond = node.convert("cond", f"{node.name}_cond_next", outer_slots=captured,
                                 outer_values=new_vars)
        tail = Emitter(f"{body_name}/cond_next")
        cond_out = tail.truth(tail.inline(next_cond)[0], into=f"{body_name}/cond_out")
        body.graph.node.extend(tail.nodes)
        set_outputs(body.graph, [value_info(cond_out, bool, ())] + list(body.graph.output))

        exact = _pad_to(spec) is None
        # Exact length: the Loop's scan outputs, one row per step (none: of the step shapes)
        stacked = [node.fresh("stacked") for _ in range(num_out)]
        bound = "" if spec["max_iterations"] is None else node.const(spec["max_iterations"])
        finals = list(custom_node.outputs[num_out:])
        refuse = spec.get("truncation_advice") is not None and spec["max_iterations"] is not None
        if refuse:   # the first loop var passes through the guard below
            finals[0] = node.fresh("final")
        node.add("Loop", [bound, keep_going] + [node.slot(k).name for k in var_slots],
                 finals + stacked, body=body.graph)
        if refuse:
            onnx_bound_guard(node, custom_node, finals)
        dtypes = [v.dtype for v in body.outputs]
        if num_out:
            onnx_pad_rows(node, stacked, dtypes[num_vars:], exact)
        return node.nodes, dtypes[num_vars:] + dtypes[:num_vars]


def _pred_of(node, value):
    """The Python bool of cond's ``value`` in ``node``'s forward; a value of many elements
    is a PredShapeError naming the node and the user's line (NOTE [predicates of many
    elements]: a graph of run-time shapes runs the node outside MXNet's callbacks, which
    name it)."""
    try:
        return pred_value(OP, "the value returned by cond", value)
    except ValueError as err:
        _node.name_node(err, node)
        raise


registry.register(WhileLoopRule())
