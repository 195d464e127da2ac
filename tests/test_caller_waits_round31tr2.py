"""A recorded block call waits for its recursion node's first group call (NOTE [the caller
waits for the first group] in gluon_cf/node_progress.py): the same values and gradients as
without the wait and as eager; the wait ends at the first group call (the early one or the
loop's) or at the end of a failing forward, never at its time limit; no wait in inference, on
the dynamic executor, or unrecorded; several threads at once."""
import sys
import threading
import time

import mxnet as mx
import pytest
from mxnet import autograd, nd

import gluon_cf
from gluon_cf import node_progress
from gluon_cf.models.recursive import TreeLSTM, TreeRNN
from gluon_cf.recursion import planned_backward, schedule
from test_planned_first_round31tr import _net
from test_schedule import FORESTS, _assert_same, _forest, _run

LONG = 30.0   # a time limit no call may reach: every wait must end by a node's progress


@pytest.fixture(autouse=True)
def restore():
    previous = gluon_cf.get_executor()
    yield
    gluon_cf.set_executor(previous)
    node_progress.WAIT_S[0] = 0.005
    node_progress.START_S[0] = 0.001
    planned_backward.EARLY[0] = True


def _timed(net, inputs, mode="batched", ahead_of_time=True):
    start, waits = time.perf_counter(), node_progress.WAITS[0]
    got = _run(net, inputs, mode, ahead_of_time=ahead_of_time)
    return got, time.perf_counter() - start, node_progress.WAITS[0] - waits


@pytest.mark.parametrize("model", [TreeLSTM, TreeRNN])
@pytest.mark.parametrize("early", [True, False])
def test_waits_and_values_are_unchanged(model, early):
    """With a limit no call may reach, each call waits and returns: the first group's call
    (early, or the loop's) ended the wait; values and gradients as without the wait, and
    eager's."""
    vocab, inputs = _forest(FORESTS["mixed"]())
    net = _net(model, vocab, 1)
    eager = _run(net, inputs, None)
    planned_backward.EARLY[0] = early
    node_progress.WAIT_S[0] = 0
    unwaited, _, none = _timed(net, inputs)
    node_progress.WAIT_S[0] = LONG
    for _ in range(3):
        waited, seconds, waits = _timed(net, inputs)
        assert waits == 1 and seconds < LONG / 3, (waits, seconds)
        _assert_same(waited, eager)
    assert none == 0
    _assert_same(unwaited, eager)


def test_a_failing_forward_ends_the_wait(monkeypatch):
    """The node's forward fails before any group call (its expansion raises): the error is
    raised as before, and the forward's end ended the wait."""
    vocab, inputs = _forest(FORESTS["sst"]())
    net = _net(TreeRNN, vocab)
    _run(net, inputs, "batched")

    def failing(*args):
        raise ValueError("the expansion failed here")
    monkeypatch.setattr(schedule._Schedule, "expand", failing)
    node_progress.WAIT_S[0] = LONG
    start, waits = time.perf_counter(), node_progress.WAITS[0]
    with pytest.raises(ValueError, match="the expansion failed here"):
        with autograd.record():
            out = net(*inputs)
        out.asnumpy()
    assert node_progress.WAITS[0] == waits + 1
    assert time.perf_counter() - start < LONG / 3


def test_a_node_behind_a_long_computation_is_not_waited_for(monkeypatch):
    """The node's input is computed by a long chain of ``dot``s pushed just before the call:
    its forward cannot start before the chain ends, and the caller, which waited for it up to
    ``WAIT_S`` (review r31tr2: 5 ms a call), now waits only ``START_S`` for some node's start:
    with ``WAIT_S`` of 30 s, its waits are far shorter than the chain; values and gradients
    are eager's."""
    vocab, inputs = _forest(FORESTS["sst"]())
    net = _net(TreeRNN, vocab)
    eager = _run(net, inputs, None)
    _run(net, inputs, "batched")
    node_progress.WAIT_S[0] = LONG
    waited = []
    real_wait = node_progress.wait

    def timed_wait(since):
        start = time.perf_counter()
        real_wait(since)
        waited.append(time.perf_counter() - start)
    monkeypatch.setattr(node_progress, "wait", timed_wait)
    square = nd.array([[0.5, 0.0], [0.0, 0.5]])

    def chain():
        slow = nd.ones((300, 300)) * 0.001
        for _ in range(240):
            slow = nd.dot(slow, slow)   # (the chain's values vanish; its time does not)
        return slow
    for _ in range(2):
        start = time.perf_counter()
        chain().wait_to_read()
        chain_seconds = time.perf_counter() - start
        late = [inputs[0] + nd.sum(nd.dot(chain()[:2, :2], square)) * 0] + inputs[1:]
        not_started = node_progress.NOT_STARTED[0]
        got, seconds, waits = _timed(net, late)
        assert waits == 1 and seconds < LONG / 3
        assert node_progress.NOT_STARTED[0] == not_started + 1   # (its start wait ended it)
        assert waited[-1] < chain_seconds / 2, (waited[-1], chain_seconds)
        _assert_same(got, eager)


def test_no_wait_unrecorded_or_on_the_dynamic_executor():
    vocab, inputs = _forest(FORESTS["sst"]())
    net = _net(TreeRNN, vocab)
    node_progress.WAIT_S[0] = LONG
    _, _, waits = _timed(net, inputs, ahead_of_time=False)
    assert waits == 0
    waits = node_progress.WAITS[0]
    _run(net, inputs, "batched", train=False)
    with autograd.train_mode():
        net(*inputs).asnumpy()
    assert node_progress.WAITS[0] == waits


def test_threads():
    """Four threads training calls of one net at once, each waiting: all return with eager's
    values (another thread's progress only ends a wait sooner)."""
    vocab, inputs = _forest(FORESTS["balanced"]())
    net = _net(TreeLSTM, vocab, 2)
    eager = _run(net, inputs, None)
    gluon_cf.set_executor("batched")
    net.hybridize()
    node_progress.WAIT_S[0] = LONG
    outputs, errors = [], []

    def work():
        try:
            for _ in range(2):
                with autograd.record():
                    out = net(*inputs)
                outputs.append(out.asnumpy())
        except Exception as err:   # noqa: BLE001 - reported below
            errors.append(err)
    threads = [threading.Thread(target=work) for _ in range(4)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(LONG)
    assert not errors and len(outputs) == 8, errors
    assert time.perf_counter() - start < LONG / 3
    for out in outputs:
        _assert_same(([out], {}), (eager[0], {}))


@pytest.mark.parametrize("early", [True, False])
def test_the_first_group_call_ends_the_wait(monkeypatch, early):
    """The first progress of a call is its first group's call (the early one, or the loop's),
    made before the node's forward ends."""
    vocab, inputs = _forest(FORESTS["sst"]())
    net = _net(TreeRNN, vocab)
    planned_backward.EARLY[0] = early
    gluon_cf.set_executor("batched")
    net.hybridize()

    def step():   # (after the first, the node's forward records the marks backward wants)
        with autograd.record():
            out = net(*inputs)
        out.backward()
        mx.nd.waitall()
    step()
    callers = []
    progressed = node_progress.progressed

    def noting():
        callers.append(sys._getframe(1).f_code.co_name)
        progressed()
    monkeypatch.setattr(node_progress, "progressed", noting)
    node_progress.WAIT_S[0] = LONG
    step()
    assert callers == ["push_first" if early else "run", "forward"], callers
