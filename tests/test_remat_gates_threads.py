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
from conftest import run_python
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


INTERRUPTED_WHILE_WAITING = r'''
import linecache, os, signal, sys, threading, time
# Inherited as ignored (a background job of a non-interactive shell, as CI may run pytest)
# SIGINT never interrupted the wait, and the program hung: Python raises KeyboardInterrupt
# only where it installed its handler at startup.
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, "tests")
from mxnet import autograd
from gluon_cf import remat_gates
from test_remat_gates_review import inputs, net_of
net = net_of(True)
ys, roles = {}, {}
recorded, assigned, held, go = threading.Barrier(3), *(threading.Event() for _ in range(3))
def worker(k):
    with autograd.record():
        ys[k] = net(inputs(k), 2).sum()
    recorded.wait(); assigned.wait()
    if roles[k] == "hold":   # its lock held, as by a long pass of its own
        with remat_gates._owners.setdefault(threading.get_ident(), threading.RLock()):
            held.set(); go.wait()
        return
    go.wait()
    with autograd.record():
        z = net(inputs(7), 2).sum()
    z.backward()            # its own record: its lock
    ys["main"].backward()   # main's record: main's lock
    roles[k] = "done"
ts = [threading.Thread(target=worker, args=(k,), daemon=True) for k in (0, 1)]
for t in ts: t.start()
with autograd.record():
    ys["main"] = net(inputs(5), 2).sum()
recorded.wait()
hold = max((0, 1), key=lambda k: ts[k].ident)   # (main's or the other's lock comes first)
roles[hold], roles[1 - hold] = "hold", "free"
assigned.set(); held.wait()
main = threading.main_thread().ident
target = remat_gates._owners[ts[hold].ident]
def interrupt():   # once this thread waits for the held lock
    while True:
        f = sys._current_frames()[main]
        if f.f_code.co_name == "_acquire" and f.f_locals.get("lock") is target and \
                "acquire()" in linecache.getline(f.f_code.co_filename, f.f_lineno):
            break
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=interrupt, daemon=True).start()
try:
    autograd.backward([ys[0], ys[1]], retain_graph=True)   # reaches both workers' gates
except KeyboardInterrupt:
    print("interrupted", flush=True)
go.set()
ts[1 - hold].join(30)
print(roles[1 - hold], flush=True)
os._exit(0)
'''


def test_interrupted_while_waiting_for_another_threads_lock_keeps_no_lock():
    """``KeyboardInterrupt`` while a pass waits for another thread's lock (one held by a pass
    there): the locks it took before are released (before, they stayed held, and the next
    pass of their threads waited for good). (Under a CI run whose SIGINT was ignored, the
    program waited for good: it installs Python's handler itself.)"""
    done = run_python(INTERRUPTED_WHILE_WAITING, timeout=90)
    assert done is not None and done.stdout.split() == ["interrupted", "done"], \
        done and done.stdout + done.stderr
