"""Round 28 (session 28): Ctrl-C during a training loop of a hybridized gluon_cf model, and a
daemon thread pushing MXNet operators at exit, each run in a fresh interpreter (NOTE [no
KeyboardInterrupt inside MXNet's callbacks] in gluon_cf/_interrupts.py, NOTE [daemon threads
at exit] in gluon_cf/_custom_ops.py).

Found with a script training a hybridized model in a loop, sent SIGINT after a random 0.05-1 s:
with a TreeLSTM it hung in 2 runs of 6, with a foreach it aborted ("terminate called without
an active exception" after SIGSEGV) in 1 of 6, each after "Exception ignored on calling ctypes
callback function ... KeyboardInterrupt"; plain MXNet models (an LSTM, MXNet's own foreach)
ended with the KeyboardInterrupt in 12 of 12. After a first fix, a while_loop model went on
training in 1 run of 8: the interrupt landed in MXNet's ``NDArrayBase.__del__``, where Python
drops it. Here the interrupt is raised inside the callbacks it was seen in and in a ``__del__``,
deterministically."""
import signal

from conftest import run_python

CTRL_C_IN_CALLBACKS = """
import signal, time
import numpy as np
import mxnet as mx
from mxnet import autograd, gluon
import gluon_cf
from gluon_cf import node

class Loop(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = gluon.nn.Dense(3, flatten=False, in_units=3)
    def hybrid_forward(self, F, x):
        def body(d, s):
            h = F.tanh(self.d(d) + s[0])
            return h, [h]
        return gluon_cf.foreach(body, x, [F.zeros((2, 3))])[0]

armed = set()

def interrupting(function, where):
    def wrapper(*args, **kwargs):
        if where in armed:   # Ctrl-C now: its handler runs inside MXNet's callback
            armed.discard(where)
            signal.raise_signal(signal.SIGINT)
        return function(*args, **kwargs)
    return wrapper

node.forward_storage_types = interrupting(node.forward_storage_types, "infer_storage_type")
node._NodeOperator = interrupting(node._NodeOperator, "create_operator")

def step(block, x):
    x = x.copy()
    x.attach_grad()
    with autograd.record():
        out = block(x)
    out.backward()
    return out.asnumpy(), x.grad.asnumpy()

x = mx.nd.array(np.random.RandomState(0).randn(4, 2, 3))
for where in ("infer_storage_type", "create_operator"):
    block = Loop()
    block.initialize(mx.init.Xavier())
    block.hybridize()
    armed.add(where)
    try:
        step(block, x)
        time.sleep(5)   # (it is raised a few milliseconds after the callback, maybe here)
        raise AssertionError("no KeyboardInterrupt from " + where)
    except KeyboardInterrupt:
        pass
    assert not armed
    out, grad = step(block, x)   # the block works after it, as eagerly
    block.hybridize(False)
    eager_out, eager_grad = step(block, x)
    assert np.allclose(out, eager_out, atol=1e-6) and np.allclose(grad, eager_grad, atol=1e-6)
class Dropped:
    def __del__(self):
        signal.raise_signal(signal.SIGINT)   # Python drops an exception raised in __del__
        sum(range(100))

try:
    Dropped()
    time.sleep(5)
    raise AssertionError("the KeyboardInterrupt in __del__ was lost")
except KeyboardInterrupt:
    pass
armed.add("create_operator")
block = Loop()
block.initialize()
block.hybridize()
step(block, x)   # uncaught: the process ends by it
time.sleep(5)
"""


def test_ctrl_c_inside_mxnet_callbacks():
    """Was: "Exception ignored on calling ctypes callback function ... KeyboardInterrupt",
    MXNet then read what the callback never wrote (SIGSEGV, abort or a hang, at random); in a
    ``__del__`` the interrupt was lost."""
    proc = run_python(CTRL_C_IN_CALLBACKS, timeout=60)
    assert proc is not None, "the process hung"
    assert proc.returncode == -signal.SIGINT, "exit %d\n%s" % (proc.returncode,
                                                               proc.stderr[-4000:])
    assert "Exception ignored" not in proc.stderr, proc.stderr[-4000:]
    assert proc.stderr.rstrip().endswith("KeyboardInterrupt"), proc.stderr[-4000:]
    last = CTRL_C_IN_CALLBACKS.splitlines().index(
        "step(block, x)   # uncaught: the process ends by it")
    assert 'line %d, in <module>' % (last + 1) in proc.stderr \
        or 'line %d, in <module>' % (last + 2) in proc.stderr, proc.stderr[-4000:]


DAEMON_THREAD_PUSHING_OPERATORS = """
import threading, time
import mxnet as mx
from gluon_cf.uploads import to_nd

to_nd([1.0])   # gluon_cf gave the engine a callback: its atexit handler waits for the engine

def push_for_ever(pushed, numpy):
    x = mx.np.ones((200, 200)) if numpy else mx.nd.ones((200, 200))
    while True:   # never waited for
        y = mx.np.tensordot(x, x) if numpy else mx.nd.dot(x, x) / 200   # (MXNet's FFI)
        pushed.set()

for numpy in (False, True):
    pushed = threading.Event()
    threading.Thread(target=push_for_ever, args=(pushed, numpy), daemon=True).start()
    pushed.wait()
time.sleep(0.2)
print("ok", flush=True)
"""


def test_a_daemon_thread_pushing_operators_at_exit():
    """Was: the process never ended (gluon_cf's atexit ``waitall`` waited for the operators the
    threads kept pushing; plain MXNet exits, in 3 s here)."""
    proc = run_python(DAEMON_THREAD_PUSHING_OPERATORS, timeout=30)
    assert proc is not None, "the process hung"
    assert proc.returncode == 0, "exit %d\n%s" % (proc.returncode, proc.stderr[-4000:])
    assert proc.stdout.strip() == "ok", proc.stdout


BACKLOG_OF_PLAIN_OPERATORS = """
import threading, time
import mxnet as mx
import gluon_cf

pushed = threading.Event()

def push_for_ever():
    x = mx.nd.ones((600, 600))
    while True:   # pushed faster than computed: seconds of work queued at exit
        y = mx.nd.dot(x, x)
        pushed.set()

threading.Thread(target=push_for_ever, daemon=True).start()
pushed.wait()
time.sleep(0.2)
print("ok", flush=True)
"""


def test_no_wait_for_a_backlog_of_plain_operators_at_exit():
    """Was: 37 s at exit, gluon_cf's atexit handler computing the operators a daemon thread had
    queued, though gluon_cf ran nothing (plain MXNet drops them: 2.6 s); it waits only once
    gluon_cf gave MXNet's engine a callback of its own (NOTE [exit with work pending])."""
    proc = run_python(BACKLOG_OF_PLAIN_OPERATORS, timeout=20)
    assert proc is not None, "the process was still waiting after 20 s"
    assert proc.returncode == 0, "exit %d\n%s" % (proc.returncode, proc.stderr[-4000:])
    assert proc.stdout.strip() == "ok", proc.stdout
