"""The eager ``foreach`` and ``while_loop`` (without remat): MXNet 1.9.1's Python loops.

NOTE [eager loop states may change]
    MXNet 1.9.1's eager ``nd.contrib.foreach`` and ``nd.contrib.while_loop`` are Python loops
    that hand whatever the body returned as states to the next step, untouched: a state may
    change shape ((10,) becoming (1,): the mxnet.fold test's ``lambda data, states: (data +
    states[0], states[0] * 2)``), dtype, or structure (a Python list growing each step, as
    superpointnet's post-processing and a PAM clustering loss carry), and the final states are
    the very object the body returned last. Only the step OUTPUTS must agree, as they are
    stacked: MXNet's foreach fails stacking outputs of different shapes or dtypes (an
    MXNetError, for shapes only when the result is read) and its while_loop on a step
    returning another number of them (ValueError) or of different shapes (MXNetError). Client
    code that runs on MXNet eagerly runs the same here, values and gradients (autograd records
    the steps as MXNet's loops let it). Once gluon_cf refused state changes eagerly too, saying
    MXNet did: wrong for states, right for step outputs, which gluon_cf refuses after the last
    step (as MXNet, earlier than its asynchronous read) as a MismatchError (a ValueError and an
    MXNetError) naming the user's line, and a step returning outputs structured otherwise than
    the first (MXNet: an IndexError, or silently the first outputs only) as a ValueError at
    that step. gluon_cf keeps its own decisions where MXNet's are vague (zero rows padding a
    while_loop's outputs, ``max_iterations=None``). What cannot follow: a hybridized loop (a
    graph node's states have one shape and dtype, so a state changing shape across steps
    cannot be hybridized: refused, naming the line) and an eager loop with remat under
    ``autograd.record`` (its backward recomputes steps from kept states of fixed shapes:
    refused, saying remat=False runs it; unrecorded, remat does not apply and the loop is
    this one).
"""
from typing import List

import mxnet as mx

from ..checks import StructureError, check_pair, op_at, pred_value, stack_steps
from .._structure import describe, flatten, is_array, regroup
from ..tracing import flatten_returned
from ..zero_size import eagerly


def foreach(body, flat_data, data_fmt, init_states, length):
    """``(outputs, final_states)`` of MXNet's eager foreach; ``flat_data`` (checked) has
    ``length`` rows."""
    states, out_fmt, per_step = init_states, None, []
    for t in range(length):
        slices = regroup([d[t] for d in flat_data], data_fmt)
        outputs, states = _blaming("foreach", "body", t, "states", states,
                                   _call_body, body, slices, states)
        flat_out, fmt = flatten_returned(outputs, "gluon_cf.foreach",
                                         "the outputs returned by body")
        if out_fmt is not None and fmt != out_fmt:
            raise ValueError("%s: body returned outputs structured as %s at step %d, step 0 "
                             "returned %s" % (op_at("foreach"), describe(fmt), t,
                                              describe(out_fmt)))
        out_fmt = fmt
        per_step.append(flat_out)
    return _stacked("foreach", per_step, out_fmt, None), states


def _call_body(body, slices, states):
    return check_pair("foreach", "body", "outputs, new_states", body(slices, states))


def while_loop(cond, func, loop_vars, max_iterations, pad_to):
    """``(outputs, final_loop_vars)`` of MXNet's eager while_loop (``outputs`` ``[]`` if no
    step ran), step outputs padded with zero rows to ``pad_to`` rows (None: as many as ran)."""
    single = is_array(loop_vars)
    current = [loop_vars] if single else loop_vars
    out_fmt = None
    per_step: List[list] = []   # per step, its flat outputs
    while (max_iterations is None or len(per_step) < max_iterations) and pred_value(
            "while_loop", "the value returned by cond",
            _blaming("while_loop", "cond", len(per_step), "loop_vars", current, cond, *current),
            eager=True):
        outputs, new_vars = _blaming("while_loop", "func", len(per_step), "loop_vars", current,
                                     _call_func, func, current)
        flat_out, fmt = flatten_returned(outputs, "gluon_cf.while_loop",
                                         "the step_output returned by func")
        if out_fmt is not None and fmt != out_fmt:
            raise ValueError("%s: func returned step_output structured as %s at one step "
                             "and %s at another" % (op_at("while_loop"), describe(fmt),
                                                    describe(out_fmt)))
        out_fmt, current = fmt, new_vars
        per_step.append(flat_out)
    if not per_step:   # (NOTE [loops of no step] in while_loop.py)
        return [], loop_vars
    return _stacked("while_loop", per_step, out_fmt, pad_to), current[0] if single else current


def _blaming(op, role, step, name, states, fn, *args):
    """``fn(*args)`` as an eager body (NOTE [eager zero-size values]). A state the previous
    step returned that is no array (``3``), passed on as MXNet passes it, often fails in the
    user's code with MXNet's AssertionError naming no line: the same type, naming the loop's
    line and the state."""
    try:
        return eagerly(fn, *args)
    except (AssertionError, TypeError, AttributeError) as err:
        odd = _not_an_array(states, name) if step else None
        if odd is None or type(err) not in (AssertionError, TypeError, AttributeError):
            raise
        raise type(err)("%s: %s failed at step %d on %s, of type %s as the step before "
                        "returned it (MXNet's eager %s passes states on as returned): %s"
                        % (op_at(op), role, step, odd[0], odd[1], op, err)) from err


def _not_an_array(value, path):
    """``(path, type name)`` of the first item of ``value`` that is no NDArray, or None."""
    if isinstance(value, (list, tuple)):
        for k, item in enumerate(value):
            found = _not_an_array(item, "%s[%d]" % (path, k))
            if found is not None:
                return found
        return None
    return None if isinstance(value, mx.nd.NDArray) else (path, type(value).__name__)


def _call_func(func, current):
    outputs, new_vars = check_pair("while_loop", "func", "step_output, new_loop_vars",
                                   func(*current))
    outputs = [] if outputs is None else outputs
    new_vars = [] if new_vars is None else new_vars
    new_vars = list(new_vars) if isinstance(new_vars, tuple) else new_vars
    new_vars = new_vars if isinstance(new_vars, list) else [new_vars]
    if len(new_vars) != len(current):    # (MXNet: "The length of loop_vars should be ...")
        hint = "" if len(new_vars) > len(current) else \
            "; func returns a pair (step outputs, new loop_vars): ([], loop_vars) for no " \
            "step outputs"   # (tf.while_loop's body returns the loop variables only)
        raise StructureError("%s: func returned new_loop_vars structured as %s, but loop_vars "
                             "is structured as %s%s" % (op_at("while_loop"), _describe(new_vars),
                                                       _describe(current), hint))
    return outputs, new_vars


def _describe(value):
    """``describe`` of a value that may hold other things than arrays (a Python int state)."""
    try:
        return describe(flatten(value, "", "")[1])
    except TypeError:
        return "a %s of %d items" % (type(value).__name__, len(value))


def _stacked(op, per_step, out_fmt, pad_to):
    """The step outputs stacked (``stack_steps`` refuses steps of different shapes or dtypes,
    naming the user's line), padded with zero rows to ``pad_to`` rows, regrouped."""
    outputs = []
    for k, column in enumerate(zip(*per_step)):
        stacked = stack_steps(op, k, column)
        pad = (pad_to or 0) - len(column)
        if pad > 0:
            stacked = mx.nd.concat(stacked, mx.nd.zeros((pad,) + column[0].shape,
                                                        ctx=stacked.context,
                                                        dtype=stacked.dtype), dim=0)
        outputs.append(stacked)
    return regroup(outputs, out_fmt)
