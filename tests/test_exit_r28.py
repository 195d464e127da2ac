"""Review of round 28's exit and Ctrl-C handling (NOTE [daemon threads at exit] in
gluon_cf/_custom_ops.py, NOTE [no KeyboardInterrupt inside MXNet's callbacks] in
gluon_cf/_interrupts.py), each program run in a fresh interpreter and compared with what plain
MXNet does."""
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
