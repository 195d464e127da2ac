"""Review of round 27's exit handling (session 27): processes that end while gluon_cf's work is
alive, each run in a fresh interpreter (NOTE [exit with work pending] and NOTE [Custom
operators alive at exit] in gluon_cf/_custom_ops.py, NOTE [upload deleters at exit] in
gluon_cf/uploads.py)."""
import test_exit27

DAEMON_THREAD_AT_EXIT = """
import sys, threading
import numpy as np
import mxnet as mx
from mxnet import autograd, gluon
import gluon_cf
from gluon_cf.uploads import from_numpy, to_nd

class Loop(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = gluon.nn.Dense(3, flatten=False)
    def hybrid_forward(self, F, x):
        def body(d, s):
            h = self.d(d) + s[0]
            return h, [h]
        return gluon_cf.foreach(body, x, [F.zeros((2, 3))])[0]

# uploads (gluon_cf's and MXNet's) held in globals, a class, a closure and a cycle at exit
a = np.arange(6, dtype=np.float32)
before = sys.getrefcount(a)
held = [from_numpy(a) for _ in range(50)]
assert sys.getrefcount(a) == before + 50, (before, sys.getrefcount(a))
del held
mx.nd.waitall()   # (before the thread starts: it would wait for ever after)
assert sys.getrefcount(a) == before, (before, sys.getrefcount(a))

class Holder:
    mine, theirs = to_nd([1.0, 2.0]), mx.nd.from_numpy(np.ones(3, np.float32))

def closure():
    mine, theirs = to_nd([1.0]), mx.nd.from_numpy(np.zeros(2, np.float32))
    return lambda: (mine, theirs)

kept = closure()
cycle = [to_nd([1.0]), mx.nd.from_numpy(np.zeros(2, np.float32))]
cycle.append(cycle)
del cycle
block = Loop()
block.initialize()
block.hybridize()
calls = threading.Semaphore(0)

def train_for_ever():
    while True:
        x = mx.nd.ones((4, 2, 3))
        x.attach_grad()
        with autograd.record():
            out = block(x)
        out.backward()
        calls.release()

threading.Thread(target=train_for_ever, daemon=True).start()
for _ in range(3):
    calls.acquire()

print("ok", flush=True)
"""


def test_a_daemon_thread_calling_a_block_at_exit():
    """Was: the process never ended: the atexit handler's ``mx.nd.waitall()`` waited for the
    work a daemon thread, still running then, kept pushing (plain MXNet exits)."""
    test_exit27.assert_quiet_exit(DAEMON_THREAD_AT_EXIT, timeout=20)
