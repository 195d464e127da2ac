"""The checkpoint interval of a remat loop for a memory budget (``remat="auto"``,
``gluon_cf.MemoryBudget``): what an interval costs, and the measured size of one step.

NOTE [remat budgets]
    A budget bounds what a rematerialised loop's run adds to the process's resident memory
    beyond its inputs, its outputs and the gradients (the outputs' incoming ones, the inputs'
    outgoing ones), which any way of computing the gradient holds: the checkpoints and the
    recomputation in backward. For an interval ``k`` over ``T`` steps (``peak_bytes``)::

        ceil(T / k) * checkpoint_bytes
            + HEAP_SLACK * (segments * k * step_bytes + fixed_bytes)

    * ``checkpoint_bytes``: the loop state kept per checkpoint, from its arrays (one buffer per
      state; the outermost hybridized foreach keeps none of a state that is a step output).
    * ``step_bytes``: what one recomputed step keeps until its backward, *measured* where the
      loop can probe its graph (the outermost hybridized foreach, ``measure_step_bytes``):
      ``PROBE_STEPS`` steps are recorded from the initial state exactly as the backward
      records them (after one such step, which allocates what all calls share), and the bytes
      they leave allocated (glibc's heap in use, where MXNet's CPU arrays live, once computed)
      are divided by the steps; then dropped. Once per node and shapes. Elsewhere (the loops
      run by the generic ``remat.Loop``: eager bodies, loops inside nodes, ``while_loop``) it
      is the static estimate ``graph_step_bytes``, the bytes of every value the step's graph
      computes, which was 0.78 MB for the benchmark's LSTM cell where 0.35-0.41 MB is
      measured (MXNet keeps only what backward reads); an estimate there, not a bound.
    * ``segments``: segments whose steps are alive at once. The outermost hybridized foreach's
      budget backward (``backward_steps``) recomputes a segment with one recorded graph per
      step and backpropagates it one step at a time, at most ``STEPS_IN_FLIGHT`` steps behind:
      one segment. Backpropagating a segment's steps as one graph (the interval loops' way)
      lets MXNet allocate every step's backward buffers as Python issues them, ahead of the
      engine (a wide cell's 4 MB weight gradient per step: 2x the budget at T=200); the
      generic loop assumes ``SEGMENTS_ALIVE`` (the next segment recomputed meanwhile).
    * ``fixed_bytes`` (``working_bytes``): the backward's working set whatever ``k``: a buffer
      summing the closure's gradients, and ``STEPS_IN_FLIGHT`` steps each writing a closure
      gradient and a step's gradients.
    * ``HEAP_SLACK``: resident memory exceeds the live heap bytes by glibc's free space (freed
      arrays' holes too small for the next ones, per-thread arenas of MXNet's workers):
      measured up to 1.25x the model's live bytes here (a wide cell at T=200), so 1.5x.

    A budget takes the largest ``k`` whose cost fits (the fewest segments: every ``k`` computes
    each step twice, fewer segments mean less Python work); below one step's cost, or the
    least any ``k`` costs, it is a ``ValueError`` naming the op. ``"auto"`` is the budget
    ``AUTO_BUDGET``, or the ``k`` costing least when that cannot be met. Checked in a fresh
    process against peak RSS (``tests/test_remat_budget.py``).
"""
import collections
import ctypes
import ctypes.util
import math
from typing import Callable, Optional, Sequence

import mxnet as mx
import numpy as np

AUTO_BUDGET = 32 << 20   # bytes "auto" may keep for recomputation (NOTE [remat budgets])
UNKNOWN_LENGTH = 1024    # the length "auto"/budgets assume for a while_loop without a bound
SEGMENTS_ALIVE = 2       # segments' intermediates alive at once in backward (NOTE [remat budgets])
STEPS_IN_FLIGHT = 2      # steps' backward a budget loop lets MXNet's engine run behind Python
HEAP_SLACK = 1.5         # resident memory per live byte of many small arrays (NOTE [remat budgets])
PROBE_STEPS = 4          # steps the probe records to measure one step
# The last intervals chosen in this process, for the memory benchmark and tests: (op, steps,
# budget, k, cost of k, step_bytes, checkpoint bytes, fixed_bytes).
Choice = collections.namedtuple("Choice", "op steps budget k cost step_bytes state_bytes "
                                "fixed_bytes")
choices: collections.deque = collections.deque(maxlen=16)


def peak_bytes(length, k, state_bytes, step_bytes, fixed_bytes=0, segments=SEGMENTS_ALIVE):
    """What a loop of ``length`` steps keeps beyond its inputs, outputs and gradients with
    interval ``k``, ``segments`` segments' steps alive at once (NOTE [remat budgets])."""
    return math.ceil(length / k) * state_bytes + math.ceil(
        HEAP_SLACK * (segments * min(k, length) * step_bytes + fixed_bytes))


def choose_interval(op, remat, length, state_bytes, step_bytes, where=None, fixed_bytes=0,
                    segments=SEGMENTS_ALIVE):
    """The checkpoint interval ``k`` for ``remat`` "auto" or a ``MemoryBudget``.

    A budget: the largest ``k`` (fewest segments) whose :func:`peak_bytes` fits; a budget below
    one step (a checkpoint, a step's intermediates and the backward's working set) or below the
    smallest achievable peak is an error naming the op. "auto": the budget
    :data:`AUTO_BUDGET`, or, when even that cannot be met, the ``k`` keeping the least (about
    ``sqrt(length * state_bytes / (2 * step_bytes))``)."""
    length = max(int(length), 1)
    step_bytes, state_bytes = max(int(step_bytes), 1), max(int(state_bytes), 1)
    fixed_bytes = max(int(fixed_bytes), 0)

    def cost(k):
        return peak_bytes(length, k, state_bytes, step_bytes, fixed_bytes, segments)

    best = min(range(1, length + 1), key=lambda k: (cost(k), k))
    budget = AUTO_BUDGET if remat == "auto" else remat.nbytes
    fitting = [k for k in range(1, length + 1) if cost(k) <= budget]
    if fitting or remat == "auto":
        k = max(fitting) if fitting else best
        choices.append(Choice(op, length, budget, k, cost(k), step_bytes, state_bytes,
                              fixed_bytes))
        return k
    at = " at %s" % where if where else ""
    one_step = peak_bytes(1, 1, state_bytes, step_bytes, fixed_bytes, segments)
    if budget < one_step:
        raise ValueError(
            "gluon_cf.%s%s: remat=%r is smaller than one step: a step's checkpoint (%d bytes), "
            "intermediates (%d) and backward working set (%d) take %d bytes; give a budget of "
            "at least %d bytes" % (op, at, remat, state_bytes, step_bytes, fixed_bytes,
                                   one_step, cost(best)))
    raise ValueError(
        "gluon_cf.%s%s: remat=%r cannot be met for %d steps: the least this loop can keep is "
        "%d bytes (interval %d; a step's state takes %d bytes, its intermediates %d, the "
        "backward's working set %d)" % (op, at, remat, length, cost(best), best, state_bytes,
                                        step_bytes, fixed_bytes))


def nbytes(array_or_shape, dtype=np.float32):
    """The bytes of an array, or of an array of this shape and dtype."""
    shape = getattr(array_or_shape, "shape", array_or_shape)
    dtype = getattr(array_or_shape, "dtype", dtype)
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def working_bytes(closure: Sequence, step_bytes: int, steps=STEPS_IN_FLIGHT) -> int:
    """The backward's working set whatever the interval: a buffer the size of the closure's
    arrays needing a gradient (their sum over the steps), and ``steps`` steps' backward in
    flight, each writing a gradient of that size and of a step's (NOTE [remat budgets])."""
    closure_bytes = sum(nbytes(c) for c in closure if c.grad is not None)
    return closure_bytes + steps * (closure_bytes + int(step_bytes))


def graph_step_bytes(symbol, shapes, dtypes=None):
    """The bytes of every value a graph computes (its internal outputs) for input ``shapes``
    (name -> shape): a static estimate of what recording one step keeps (NOTE [remat
    budgets]). Unknown shapes count 0."""
    internals = symbol.get_internals()
    try:
        _, outs, _ = internals.infer_shape_partial(**shapes)
    except mx.MXNetError:
        return 0
    names = internals.list_outputs()
    total = 0
    inputs = set(symbol.list_inputs())
    for name, shape in zip(names, outs or []):
        if name in inputs or not shape or any(d <= 0 for d in shape):
            continue
        total += nbytes(tuple(shape))
    return total


def graph_bytes_of(graph, slots):
    """:func:`graph_step_bytes` of a :class:`graph.Graph` given its slot values."""
    shapes = {name: slots[slot].shape for name, slot in zip(graph.input_names, graph.slots)}
    return graph_step_bytes(graph.symbol, shapes)


# ---------------------------------------------------------------------------------------------
# Measuring a step


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _mallinfo2():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):   # not glibc, or glibc < 2.33
        return None
    fn.restype = _MallInfo2
    return fn


_MALLINFO2 = _mallinfo2()


def heap_bytes() -> Optional[int]:
    """The bytes glibc's allocator has handed out and not taken back (MXNet's CPU arrays are
    allocated there), or None without glibc's ``mallinfo2``."""
    if _MALLINFO2 is None:
        return None
    info = _MALLINFO2()
    return int(info.uordblks + info.hblkhd)


def measure_step_bytes(run_steps: Callable[[int], list], steps: int,
                       inputs: Sequence) -> Optional[int]:
    """What one step keeps, measured: ``run_steps(steps)`` records ``steps`` steps and returns
    what holds them (their outputs, flat); the heap bytes they leave allocated, per step, after
    one step run the same way (NOTE [remat budgets]). ``inputs``: the arrays they read, waited for
    first (this may run inside an operator MXNet's engine runs, where ``waitall`` would wait for
    itself). None when the heap cannot be measured or the measure is not positive."""
    if _MALLINFO2 is None or steps < 1:
        return None
    warm = run_steps(1)   # a graph's first recorded call allocates what every call shares
    for a in list(inputs) + warm:
        a.wait_to_read()
    before = heap_bytes()
    held = run_steps(steps)
    for a in held:
        a.wait_to_read()
    after = heap_bytes()
    if before is None or after is None or after <= before:
        return None
    return (after - before + steps - 1) // steps
