"""Eager remat recursive calls differentiated by a backward pass started inside an
``autograd.Function``'s backward (one of MXNet's Custom-operator threads), against the same
programs with ``remat=False`` (plain MXNet autograd: the oracle), each in a subprocess with a
time limit (NOTE [a backward inside a Custom operator's backward] in gluon_cf/remat_gates.py).

Before: with MXNet's default threaded engine such a pass hung the engine (the recording
thread's ``backward`` waited in its ``waitall`` for good), and with the calls recorded in
another thread than the pass around it, it was refused as "a backward gluon_cf does not see
(... bound before gluon_cf was imported)", which it was not."""
import json
import re
import threading

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd

from gluon_cf import remat_gates
from conftest import run_python
from test_remat_gates_review import assert_same, inputs, net_of, state

PROGRAM = r'''
import faulthandler, json, sys, threading
faulthandler.dump_traceback_later(%(limit)d, exit=True)
sys.path.insert(0, "tests")
import mxnet as mx
from mxnet import autograd
from gluon_cf import remat_gates
from test_remat_gates_review import ThenTwice as Inner, inputs, net_of, state


def in_thread(fn):
    errors = []
    def target():
        try:
            fn()
        except BaseException as err:
            errors.append(err)
    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def run(remat, placement, what):
    net = net_of(remat)
    box = {}

    def record():
        box["x"] = inputs(1)
        box["x"].attach_grad()
        with autograd.record():
            box["y"] = net(box["x"], 2).sum()

    def nested():
        if what == "backward":
            box["y"].backward(retain_graph=True)
        else:
            box["g"] = autograd.grad(box["y"], [net.odd.weight.data(), box["x"]],
                                     retain_graph=True)

    def rest():
        if placement == "worker":
            record()
        u = inputs(3)
        u.attach_grad()
        with autograd.record():
            z = Inner(nested)(u).sum()
        z.backward()
        box["u"] = u.grad.asnumpy().tolist()

    if placement == "main":
        record()
        rest()
    elif placement == "worker":   # everything in a worker thread
        in_thread(rest)
    else:                         # the calls recorded here, the pass in a worker
        record()
        in_thread(rest)
    out = {"u": box["u"], "state": [(g.tolist(), bool(f)) for _, g, f in state(net)]}
    if what == "grad":
        out["g"] = [g.asnumpy().tolist() for g in box["g"]]
    box["y"].backward()   # (here: no lock kept, nothing left pending)
    out["again"] = [g.tolist() for _, g, _ in state(net)]
    out["x"] = box["x"].grad.asnumpy().tolist()
    assert not remat_gates._passed
    return out


got = {}
for placement in %(placements)r:
    for remat in (True, False):
        got["%%s %%s" %% (placement, remat)] = run(remat, placement, %(what)r)
if %(refused)r:   # autograd.grad inside the Function's backward of the pass reaching the calls
    try:
        run(True, "main", "grad")
    except mx.MXNetError:
        print("REFUSED", flush=True)
    run(False, "main", "backward")   # (no lock kept)
print("RESULT " + json.dumps(got), flush=True)
'''


def _check(what, placements, refused=False):
    done = run_python(PROGRAM % {"limit": 80, "placements": placements, "what": what,
                                 "refused": refused}, timeout=90)
    assert done is not None, "timed out: the pass inside the Function's backward hung"
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout + done.stderr
    if refused:
        assert "REFUSED" in done.stdout.split() and re.search(
            r"NotImplementedError: autograd.grad at <string>:\d+ inside a Custom operator's "
            r"or autograd.Function's backward reaches eager remat=True recursive calls while "
            r"a backward pass over them runs", done.stdout), done.stdout + done.stderr
    got = json.loads(lines[0][len("RESULT "):])
    for placement in placements:
        a, b = got["%s True" % placement], got["%s False" % placement]
        assert a.keys() == b.keys()
        for key in a:
            if key == "state":
                assert [f for _, f in a[key]] == [f for _, f in b[key]], placement
                for (ga, _), (gb, _) in zip(a[key], b[key]):
                    np.testing.assert_allclose(ga, gb, rtol=1e-5, atol=1e-6,
                                               err_msg=placement)
            else:
                for va, vb in zip(a[key], b[key]) if key in ("g", "again") else [(a[key],
                                                                                  b[key])]:
                    np.testing.assert_allclose(va, vb, rtol=1e-5, atol=1e-6,
                                               err_msg="%s %s" % (placement, key))


def test_backward_inside_a_functions_backward():
    """``y.backward(retain_graph=True)`` of remat calls inside an ``autograd.Function``'s
    backward, the pass around it in the recording thread, all of it in a worker thread, and
    the calls recorded in the main thread with the pass in a worker (before: a hang, a hang,
    and a refusal blaming a backward bound before import); then ``y.backward()`` again."""
    _check("backward", ["main", "worker", "split"])


def test_autograd_grad_inside_a_functions_backward():
    """``autograd.grad`` of remat calls asked for a parameter and the input inside an
    ``autograd.Function``'s backward, the calls recorded in the main thread and the pass
    around it in a worker: plain MXNet's values, the parameters' gradients and fresh flags
    untouched by it. With the pass around it in the thread that recorded the calls, what the
    calls read would mix with that pass's: refused, naming the line (before: MXNet's
    "unreachable" for the parameter, or a hang); the next pass runs."""
    _check("grad", ["split"], refused=True)


class LateInterrupt:
    """A lock whose ``acquire`` is interrupted just after it took the lock, as Python raises
    KeyboardInterrupt when a signal arrives while ``acquire`` returns."""

    def __init__(self):
        self.lock = threading.RLock()

    def acquire(self):
        self.lock.acquire()
        raise KeyboardInterrupt

    def release(self):
        self.lock.release()

    def _is_owned(self):
        return self.lock._is_owned()


def test_an_interrupt_just_after_a_pass_took_its_lock_keeps_no_lock():
    """KeyboardInterrupt landing after a pass's ``acquire`` returned, before the pass counted
    the lock as taken: released (before, kept: the next pass of that thread reaching it from
    another thread waited for good)."""
    me = threading.get_ident()
    late = LateInterrupt()
    kept = remat_gates._owners.get(me)
    remat_gates._owners[me] = late
    try:
        with pytest.raises(KeyboardInterrupt):
            remat_gates._enter()
        assert not late._is_owned()
    finally:
        if kept is None:
            del remat_gates._owners[me]
        else:
            remat_gates._owners[me] = kept


def test_the_lock_table_forgets_threads_that_ended():
    """100 threads at once each run one backward pass and end: the table of the threads'
    locks then keeps the live threads' and those whose gates are alive (a worker's remat
    calls, backpropagated here afterwards: plain MXNet's gradients), not one per thread that
    ever ran a pass (before, 100 more entries)."""
    got = {}
    for remat in (True, False):
        net = net_of(remat)
        box = {}

        def worker():
            with autograd.record():
                box["y"] = net(inputs(1), 2).sum()
            box["y"].backward(retain_graph=True)
            box["owner"] = threading.get_ident()
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        if remat:   # (plain threads: once)
            ran, done = threading.Barrier(101), threading.Event()

            def plain():
                x = mx.nd.ones((2,))
                x.attach_grad()
                with autograd.record():
                    z = (x * 2).sum()
                z.backward()
                ran.wait(60)   # (alive together: 100 thread ids)
                done.wait(60)
            threads = [threading.Thread(target=plain) for _ in range(100)]
            for thread in threads:
                thread.start()
            ran.wait(60)
            done.set()
            for thread in threads:
                thread.join(60)
        box["y"].backward()
        if remat:
            assert len(remat_gates._owners) < threading.active_count() + 20, \
                len(remat_gates._owners)
            assert box["owner"] in remat_gates._owners   # (its gates are alive)
        got[remat] = state(net)
    assert_same([got[True]], [got[False]])
