"""A backward pass in another thread than the ``record()`` of eager remat recursive calls
(NOTE [closure gradients per backward pass] in gluon_cf/remat_gates.py), against the same
program with ``remat=False`` (plain MXNet autograd: the oracle): gradients, fresh flags,
``grad_req`` write and add, ``Trainer`` steps after.

Before, gates were handled by their own thread's passes only, and such a pass was refused
("a backward in another thread than the record") where plain MXNet runs it."""
import queue
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from mxnet import autograd, gluon

from gluon_cf import remat_gates
from test_remat_gates_review import assert_same, inputs, net_of, state


def in_thread(fn, *args):
    """``fn(*args)`` in a thread of its own; its exception raised here."""
    out, errors = [], []

    def run():
        try:
            out.append(fn(*args))
        except BaseException as err:   # noqa: BLE001 - raised again below
            errors.append(err)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join(120)
    assert not thread.is_alive()
    if errors:
        raise errors[0]
    return out[0]


def trainer_of(net):
    return gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})


def test_record_here_backward_in_another_thread():
    """Depth 2 (both layers read) and depth 0 (``odd`` unread: its gradient and flag left),
    ``grad_req`` write and add, a batch of two trees and ``autograd.backward`` of two heads
    in a thread pool, each followed by a step here."""
    got = {}
    for remat in (True, False):
        net = net_of(remat)
        trainer = trainer_of(net)
        runs = []
        for req in ("write", "add"):
            net.collect_params().setattr("grad_req", req)
            for depth in (2, 0):
                with autograd.record():
                    y = net(inputs(depth), depth).sum()
                in_thread(y.backward)
                runs.append(state(net))
                trainer.step(1, ignore_stale_grad=True)
            with autograd.record():
                y1, y2 = net(inputs(5), 1).sum(), net(inputs(6), 2).sum()
            with ThreadPoolExecutor(1) as pool:
                pool.submit(autograd.backward, [y1, y2]).result(120)
            runs.append(state(net))
            trainer.step(1)
            runs.append(state(net))
        got[remat] = runs
        assert not remat_gates._passed
    assert_same(got[True], got[False])


def test_backward_in_another_thread_while_this_one_trains_another_block():
    """The other thread backpropagates this thread's record of ``net`` twice (``grad_req``
    write: the same gradients): between this thread's record of ``mine`` (remat too) and its
    backward, then while this thread trains ``mine`` (records, backpropagates, steps)."""
    got = {}
    for remat in (True, False):
        net, mine = net_of(remat), net_of(remat, 1)
        trainer, own = trainer_of(net), trainer_of(mine)
        with autograd.record():
            y = net(inputs(1), 2).sum()
        start, first = threading.Event(), threading.Event()

        def other():
            start.wait(60)
            y.backward(retain_graph=True)
            first.set()
            y.backward()
        thread = threading.Thread(target=other)
        thread.start()
        for k in range(5):
            with autograd.record():
                z = mine(inputs(10 + k), k % 3).sum()
            if k == 1:
                start.set()
                assert first.wait(60)
            z.backward()
            own.step(1, ignore_stale_grad=True)
        thread.join(120)
        assert not thread.is_alive()
        trainer.step(1)
        got[remat] = [state(net), state(mine)]
    assert_same(got[True], got[False])


def test_autograd_grad_in_another_thread():
    """``autograd.grad`` of this thread's record, asked for a parameter and the input: plain
    MXNet's values; the parameters' gradients untouched, nothing left for a later pass."""
    got = {}
    for remat in (True, False):
        net = net_of(remat)
        x = inputs(3)
        x.attach_grad()
        with autograd.record():
            y = net(x, 2).sum()
        weight = net.odd.weight.data()
        grads = in_thread(autograd.grad, y, [weight, x])
        with autograd.record():
            z = net(inputs(4), 1).sum()
        z.backward()
        got[remat] = ([g.asnumpy() for g in grads], state(net))
        assert not remat_gates._passed
    for a, b in zip(got[True][0], got[False][0]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert_same([got[True][1]], [got[False][1]])


def test_threads_recording_and_one_backpropagating_for_them():
    """Two threads each record their own block three times and hand the loss to a third
    thread, which backpropagates it; each steps after."""
    got = {}
    for remat in (True, False):
        nets = [net_of(remat, seed) for seed in (1, 2)]
        jobs: "queue.Queue" = queue.Queue()
        errors = []

        def backprop():
            while True:
                job = jobs.get()
                if job is None:
                    return
                y, done = job
                try:
                    y.backward()
                except BaseException as err:   # noqa: BLE001 - checked below
                    errors.append(err)
                done.set()

        def train(net, seed):
            trainer = trainer_of(net)
            for k in range(3):
                with autograd.record():
                    y = net(inputs(seed + k), (seed + k) % 3).sum()
                done = threading.Event()
                jobs.put((y, done))
                assert done.wait(60)
                trainer.step(1, ignore_stale_grad=True)
        helper = threading.Thread(target=backprop)
        helper.start()
        workers = [threading.Thread(target=train, args=(net, 20 * k))
                   for k, net in enumerate(nets)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(120)
        jobs.put(None)
        helper.join(60)
        assert not errors and not helper.is_alive()
        got[remat] = [state(net) for net in nets]
    assert_same(got[True], got[False])
