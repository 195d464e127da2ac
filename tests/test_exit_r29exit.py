"""Review 29 of Ctrl-C and exit handling (NOTE [no KeyboardInterrupt inside MXNet's callbacks]
in gluon_cf/_interrupts.py, NOTE [exit with work pending] and NOTE [daemon threads at exit] in
gluon_cf/_custom_ops.py), one fresh interpreter for all cases, compared with what Python and
plain MXNet do.

Found: a KeyboardInterrupt's traceback ended in gluon_cf's handler, not the user's line; a SIGINT
handler installed through a reference to ``signal.signal`` taken before ``import gluon_cf`` was
not guarded (Ctrl-C at a random time of a training loop: SIGSEGV then abort in 5 runs of 30);
an atexit handler registered before ``import gluon_cf`` joining a daemon thread that calls a
hybridized block hung the process at exit (plain MXNet: the join returns, exit 0); predict
calls of a hybridized foreach whose body calls a user CustomOp hung within 6 calls (3 runs of
3)."""
import signal

from conftest import run_python

CTRL_C_AND_EXIT = """
import atexit, signal, threading, time, traceback
_orig_signal = signal.signal   # taken before gluon_cf: what it installs is not wrapped
import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

results = {}

def join_worker():   # registered before gluon_cf's handlers: ran after gluon_cf's wait
    worker.join()
    print("joined", results.get("calls"), flush=True)

atexit.register(join_worker)
import gluon_cf
from gluon_cf import node


class Branch(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = gluon.nn.Dense(3, in_units=3)
    def hybrid_forward(self, F, x):
        return gluon_cf.cond(x.sum() > 0, lambda: F.tanh(self.d(x)), lambda: self.d(x) * 2)

armed = [False]

def ctrl_c_inside(function):
    def wrapper(*args, **kwargs):   # Ctrl-C now: its handler runs inside MXNet's callback
        if armed[0]:
            armed[0] = False
            signal.raise_signal(signal.SIGINT)
        return function(*args, **kwargs)
    return wrapper

node._NodeOperator = ctrl_c_inside(node._NodeOperator)

def train(block):
    with autograd.record():
        out = block(mx.nd.ones((2, 3)))
    out.backward()
    out.asnumpy()
    time.sleep(4)   # (held in the callback, it is raised a few milliseconds later)

def interrupted_here():
    signal.raise_signal(signal.SIGINT)
    sum(range(10))

def report(run):
    try:
        run()
        print("not interrupted", flush=True)
    except KeyboardInterrupt as exc:
        last = traceback.extract_tb(exc.__traceback__)[-1]   # (Python's handler: the line
        # interrupted; where it lands when held in a callback: anywhere after it, not ours)
        print("interrupted in", "gluon_cf._interrupts" if last.filename.endswith(
            "_interrupts.py") else last.name if run is interrupted_here else "the call",
              flush=True)

import sys
sys.path.insert(0, "tests")   # (the subprocess runs in the repository)
from test_history_r29exit import WANT, X, _Loop as UserOpLoop   # a user CustomOp in a foreach

user_op_loop = UserOpLoop()
user_op_loop.hybridize()
for calls in range(12):   # (a user CustomOp on MXNet's custom-op thread hung it)
    assert np.allclose(user_op_loop(mx.nd.array(X)).asnumpy(), WANT, rtol=1e-6, atol=1e-6)
print("user CustomOp calls", calls + 1, flush=True)
report(interrupted_here)   # Python's handler, guarded by gluon_cf
_orig_signal(signal.SIGINT, signal.default_int_handler)   # (a framework reinstalling it)
for run in (interrupted_here, lambda: train(block)):
    block = Branch()
    block.initialize()
    block.hybridize()
    armed[0] = True
    report(run)

block = Branch()
block.initialize()
block.hybridize()
block(mx.nd.ones((2, 3))).asnumpy()
started = threading.Event()

def work():   # still calling the block when the script ends
    x = mx.nd.ones((2, 3))
    for calls in range(1, 101):
        x = block(x)
        started.set()
    x.asnumpy()
    results["calls"] = calls

worker = threading.Thread(target=work, daemon=True)
worker.start()
started.wait()
armed[0] = True
train(block)   # uncaught: the script ends by it
"""


def test_ctrl_c_and_exit():
    """Was: the traceback's last frame was gluon_cf's ``on_sigint``; with the handler
    installed by the saved ``signal.signal``, the KeyboardInterrupt escaped MXNet's ctypes
    callback ("Exception ignored on calling ctypes callback function"; SIGSEGV, abort or a
    hang, at random; deterministically here the interrupt was lost or the process died);
    the atexit handler's ``join`` never returned (the daemon thread parked by gluon_cf's
    atexit handler, which ran first); the calls of a block with a user CustomOp hung."""
    proc = run_python(CTRL_C_AND_EXIT, timeout=60)
    assert proc is not None, "the process hung"
    assert "Exception ignored" not in proc.stderr, proc.stderr[-4000:]
    assert proc.returncode == -signal.SIGINT, "exit %d\n%s" % (proc.returncode,
                                                               proc.stderr[-4000:])
    assert proc.stdout.splitlines() == ["user CustomOp calls 12",
        "interrupted in interrupted_here", "interrupted in interrupted_here",
        "interrupted in the call", "joined 100"], proc.stdout
    frames = [line for line in proc.stderr.splitlines() if line.startswith('  File "')]
    assert frames and "_interrupts.py" not in frames[-1], proc.stderr[-4000:]
