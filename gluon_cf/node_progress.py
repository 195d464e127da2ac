"""A recorded block call that waits for its recursion node's first group call.

NOTE [the caller waits for the first group]
    A recorded call of a hybridized block holding a recursion runs the recursion node as MXNet's
    Custom operator, on MXNet's custom-op thread (training keeps it there: NOTE [planned
    backward] in recursion/planned_backward.py). The block's call returns as soon as MXNet has
    pushed the operator, and the caller's Python (the loss, ``backward()``, ``Trainer.step``,
    ~1.1 ms a TreeRNN batch) then held Python's lock while the node's forward waited for it:
    the node's host work before its first group call (the skeleton's expansion, the first
    group's inputs, ~1.6 ms) started only after the caller's, and MXNet's worker, with nothing
    to compute until that first group call, sat idle through both (MXNet's profiler, TreeRNN
    training at batch 25: the node's forward began 1.2-2.4 ms after the block's call, the
    first group 2.7-3.95 ms). So such a call, once MXNet's call returned, waits (the lock
    released) until the node's forward has called its first group (``progressed`` by
    recursion/planned_backward.py) or ended (``progressed`` by node.py's forward, failed or
    not), or for ``WAIT_S[0]`` seconds at most; the caller's Python then runs while the
    worker computes the groups. Nothing else changes: the same operators, pushed in the same
    order by each thread; a progress of another thread's node only ends the wait sooner.
    Measured (the benchmark's e without and with the wait and g alternating batch by batch in
    one process, 100 batches, five runs, load 4-7): TreeRNN training at batch 25, e's median
    0.7-1.25 ms a batch less in every run (12.5-17.4 -> 11.5-16.2 ms), g/e by medians
    0.58-0.61 -> 0.62-0.65; TreeLSTM training at batch 25 0.80, 0.80 -> 0.85, 0.85 (two runs).
    The first group is called ~1.2 ms sooner after the call (2.7 against 3.9 ms); the caller
    gets Python's lock back later (its call returns at ~4.6 ms, while the node's thread loops
    over the groups), which costs nothing: what it pushes next (the loss, the backward) waits
    for the node's outputs anyway.
    A node whose inputs are still being computed (a long computation pushed before the call)
    does not start soon, and a caller waiting the whole ``WAIT_S`` for it lost those 5 ms a
    call (review r31tr2: 51.5 -> 53.8 ms a step behind 40 chained 300x300 ``dot``s). So the
    wait has two steps: at most ``START_S[0]`` for some node's forward to start (``started``,
    by node.py's forward; ~0.2 ms after the call returns in the benchmark's batches), and only
    then at most ``WAIT_S[0]`` for its progress. A node that has not started by then leaves the
    caller to go on, as without the wait.
"""
import threading

WAIT_S = [0.005]    # NOTE above: the longest wait (seconds); 0: no wait (tests compare)
START_S = [0.001]   # NOTE above: the longest wait for a node's forward to start (seconds)
WAITS = [0]         # recorded calls that waited (for tests, tools)
NOT_STARTED = [0]   # of those, calls whose wait ended as no node's forward had started

_cond = threading.Condition()
_count = [0, 0]     # [progresses, starts]


def token():
    """What :func:`wait` compares against: the progress and starts made so far."""
    return tuple(_count)


def started():
    """A node's forward started: wake the callers waiting for a start."""
    with _cond:
        _count[1] += 1
        _cond.notify_all()


def progressed():
    """A node's forward called its first group, or ended: wake the callers waiting."""
    with _cond:
        _count[0] += 1
        _cond.notify_all()


def wait(since):
    """Wait until some node's forward started and progressed after :func:`token` gave
    ``since``: at most ``START_S[0]`` seconds for a start, then ``WAIT_S[0]`` for the progress
    (NOTE above)."""
    with _cond:
        WAITS[0] += 1
        if not _cond.wait_for(lambda: _count[1] != since[1] or _count[0] != since[0],
                              START_S[0]):
            NOT_STARTED[0] += 1
            return
        _cond.wait_for(lambda: _count[0] != since[0], WAIT_S[0])
