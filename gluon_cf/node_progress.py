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
"""
import threading

WAIT_S = [0.005]   # NOTE above: the longest wait (seconds); 0: no wait (tests compare)
WAITS = [0]        # recorded calls that waited (for tests, tools)

_cond = threading.Condition()
_count = [0]


def token():
    """What :func:`wait` compares against: the progress made so far."""
    return _count[0]


def progressed():
    """A node's forward called its first group, or ended: wake the callers waiting."""
    with _cond:
        _count[0] += 1
        _cond.notify_all()


def wait(since):
    """Wait until some node's forward progressed after :func:`token` gave ``since``, or for
    ``WAIT_S[0]`` seconds (NOTE above)."""
    WAITS[0] += 1
    with _cond:
        _cond.wait_for(lambda: _count[0] != since, WAIT_S[0])
