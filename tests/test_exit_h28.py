"""Round 28 (session 28): a daemon thread pushing MXNet operators at exit, run in a fresh
interpreter (NOTE [daemon threads at exit] in gluon_cf/_custom_ops.py)."""
from conftest import run_python


DAEMON_THREAD_PUSHING_OPERATORS = """
import threading, time
import mxnet as mx
import gluon_cf

pushed = threading.Event()

def push_for_ever():
    x = mx.nd.ones((200, 200))
    while True:
        y = mx.nd.dot(x, x) / 200   # never waited for
        pushed.set()

threading.Thread(target=push_for_ever, daemon=True).start()
pushed.wait()
time.sleep(0.2)
print("ok", flush=True)
"""


def test_a_daemon_thread_pushing_operators_at_exit():
    """Was: the process never ended (gluon_cf's atexit ``waitall`` waited for the operators the
    thread kept pushing; plain MXNet exits, in 3 s here)."""
    proc = run_python(DAEMON_THREAD_PUSHING_OPERATORS, timeout=30)
    assert proc is not None, "the process hung"
    assert proc.returncode == 0, "exit %d\n%s" % (proc.returncode, proc.stderr[-4000:])
    assert proc.stdout.strip() == "ok", proc.stdout
