"""Review of round 28's exit and Ctrl-C handling (NOTE [daemon threads at exit] in
gluon_cf/_custom_ops.py, NOTE [no KeyboardInterrupt inside MXNet's callbacks] in
gluon_cf/_interrupts.py), each program run in a fresh interpreter and compared with what plain
MXNet does."""
import re

import numpy as np

from conftest import run_python

ATEXIT_WAITS_FOR_A_DAEMON_THREAD = """
import atexit, threading
import mxnet as mx

results = {}

def report():   # registered before gluon_cf's: runs after it
    worker.join(5)
    print("joined" if not worker.is_alive() else "still running", flush=True)
    print(results["v"].asnumpy().sum() if "v" in results else "no result", flush=True)

atexit.register(report)
from gluon_cf.uploads import to_nd
to_nd([1.0])   # gluon_cf gave the engine a callback: its atexit handler waits for the engine

def work():
    x = mx.nd.ones((30, 30))
    for _ in range(40):
        x = mx.nd.dot(x, x) / 30
    results["v"] = x

worker = threading.Thread(target=work, daemon=True)
worker.start()
"""


def test_an_atexit_handler_waiting_for_a_daemon_threads_result():
    """Was: the daemon thread parked for ever on its first operator once gluon_cf's atexit
    handler ran, so the user's handler (registered before ``import gluon_cf``, run after
    it) never got its result (``worker.join()`` hung); plain MXNet computes it."""
    proc = run_python(ATEXIT_WAITS_FOR_A_DAEMON_THREAD, timeout=30)
    assert proc is not None, "the process hung"
    assert proc.returncode == 0, "exit %d\n%s" % (proc.returncode, proc.stderr[-4000:])
    lines = proc.stdout.split()
    assert lines[0] == "joined", proc.stdout
    x = np.ones((30, 30), np.float32)
    for _ in range(40):
        x = x.dot(x) / 30
    assert float(lines[1]) == x.sum(), proc.stdout


HANDLER_INSTALLED_AFTER_IMPORT = """
import signal, sys, threading, time, types
import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

kernel = types.ModuleType("kernel")   # as ipykernel runs a cell, imported before gluon_cf
exec('''
from signal import signal, SIGINT, default_int_handler
def run_cell(cell):
    saved = signal(SIGINT, default_int_handler)
    try:
        return cell()
    finally:
        signal(SIGINT, saved)
''', kernel.__dict__)
sys.modules["kernel"] = kernel
threading.Thread(target=__import__, args=("gluon_cf",)).start()   # imported in another thread
time.sleep(0.1)
import gluon_cf
from gluon_cf import node

class Branch(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = gluon.nn.Dense(3, in_units=3)
    def hybrid_forward(self, F, x):
        return gluon_cf.cond(x.sum() > 0, lambda: F.tanh(self.d(x)), lambda: self.d(x) * 2)

def ctrl_c_inside(function):
    def wrapper(*args, **kwargs):   # Ctrl-C now: its handler runs inside MXNet's callback
        signal.raise_signal(signal.SIGINT)
        return function(*args, **kwargs)
    return wrapper

node._NodeOperator = ctrl_c_inside(node._NodeOperator)

def train():
    block = Branch()
    block.initialize()
    block.hybridize()
    with autograd.record():
        out = block(mx.nd.ones((2, 3)))
    out.backward()
    print(out.asnumpy().sum(), flush=True)
    time.sleep(4)

for run in (train, lambda: kernel.run_cell(train)):
    try:
        run()
    except KeyboardInterrupt:
        print("interrupted", flush=True)

def graceful_exit(signum, frame):
    print("saving", flush=True)
    sys.exit(3)

signal.signal(signal.SIGINT, graceful_exit)   # after import gluon_cf
train()
"""


def test_a_sigint_handler_installed_after_import_raising_system_exit():
    """Was: the handler's ``SystemExit`` escaped MXNet's ctypes callback ("Exception ignored
    on calling ctypes callback function"), then SIGSEGV and abort; now it is held until the
    callback returns, as Python's own handler is, and the process exits with its code. So
    was Python's handler installed by a module that imported ``signal.signal`` by name
    earlier (ipykernel, before each cell: a kernel interrupt killed the kernel), and Python's
    own when gluon_cf was first imported in another thread than the main one."""
    proc = run_python(HANDLER_INSTALLED_AFTER_IMPORT, timeout=30)
    assert proc is not None, "the process hung"
    assert "Exception ignored" not in proc.stderr, proc.stderr[-4000:]
    assert proc.returncode == 3, "exit %d\n%s" % (proc.returncode, proc.stderr[-4000:])
    # (by words, not lines: the interrupt may land inside ``print`` of the sum, between the
    # number and its newline, "0.020660408interrupted", a fresh clone's CI of session 34)
    said = re.findall(r"interrupted|saving", proc.stdout)
    assert said == ["interrupted", "interrupted", "saving"], proc.stdout   # (with a sum or not:
    # held in the callback, the interrupt may land after ``asnumpy``)


ASYNCIO_RUN = """
import asyncio, os, signal, threading
import gluon_cf

assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
mine = lambda signum, frame: None
old = signal.signal(signal.SIGINT, mine)
assert old is signal.default_int_handler and signal.getsignal(signal.SIGINT) is mine
assert signal.signal(signal.SIGINT, old) is mine

async def main():
    try:
        await asyncio.sleep(20)
    except asyncio.CancelledError:   # asyncio.run's handler cancels the main task on Ctrl-C
        await asyncio.sleep(0.01)
        return "saved"

threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
print(asyncio.run(main()), flush=True)
print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, flush=True)
"""


def test_asyncio_run_sees_pythons_sigint_handler():
    """Was: ``signal.getsignal`` answered gluon_cf's guard, not Python's
    ``default_int_handler``, so ``asyncio.run`` installed no handler of its own: a Ctrl-C
    raised KeyboardInterrupt inside the event loop instead of cancelling the main task."""
    proc = run_python(ASYNCIO_RUN, timeout=30)
    assert proc is not None, "the process hung"
    assert proc.returncode == 0, "exit %d\n%s" % (proc.returncode, proc.stderr[-4000:])
    assert proc.stdout.split() == ["saved", "True"], proc.stdout
