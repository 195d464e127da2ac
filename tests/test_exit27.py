"""Round 27 (session 27): ctypes callbacks MXNet calls when it frees an array, alive until the
process ends (NOTE [Custom operators alive at exit] in gluon_cf/_custom_ops.py, NOTE [upload
deleters at exit] in gluon_cf/uploads.py).

Found on main: ``pytest -n 0 "tests/test_hostile_round25r.py::test_a_random_call_sequence_equals
_the_oracle[NaryDepthPassedDownAndLeafCount]" tests/test_remat_recursion_hybrid.py::test_models_on
_random_forests_recompute_every_group`` passed both tests, then died of SIGSEGV in the
interpreter's last garbage collection (2 runs of 2, 3 of 3): a suspended generator of a batched
cond's split (``from_batch``) held the index it had uploaded without a copy, and was freed after
finalization had set ``mxnet.ndarray.ndarray``'s globals to None, freeing the upload's deleter
callback. The script below puts the same order in a few lines, deterministically: arrays held by
a module cleared after mxnet's, and, just before they go, new ctypes callbacks that take the
memory of callbacks freed before (so a freed callback calls another instead of crashing now and
then)."""
from conftest import run_python

HELD_PAST_MXNET = """
import ctypes, sys, types
late = types.ModuleType("late_holder")   # in sys.modules before mxnet: cleared after it at exit
sys.modules["late_holder"] = late
sys.late_holder = late                    # alive through the first collection at exit
import mxnet as mx
from mxnet import autograd
import gluon_cf
from gluon_cf.uploads import to_nd

sys.kept_callbacks = []

def wrong(_):
    print("a freed callback called another", flush=True)
    return 1

class Reallocate:
    def __del__(self):   # ctypes callbacks made now take the memory of callbacks freed before
        sys.kept_callbacks.extend(ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(wrong)
                                  for _ in range(64))

x = mx.nd.array([1.0, 2.0])
x.attach_grad()
with autograd.record():   # a remat node: its delete callback runs when its output goes
    out = gluon_cf.foreach(lambda d, s: (d * s[0], [s[0] + d]), x, [mx.nd.ones((1,))],
                           remat=True)[0]
late.a_reallocate = Reallocate()
late.b_upload = to_nd([1.0, 2.0, 3.0])   # an upload: its deleter runs when it goes
late.c_recorded = out
del out
print("ok")
"""


def test_arrays_freed_after_mxnet_at_exit():
    """Was: the upload's deleter, freed with ``mxnet.ndarray.ndarray``'s globals, called
    another callback (SIGSEGV in the pytest run above); the remat node's delete callback read
    ``remat_record._alive``, None by then ("Exception ignored ... AttributeError")."""
    assert_quiet_exit(HELD_PAST_MXNET, timeout=120)


def assert_quiet_exit(code, timeout):
    """Run ``code`` in a fresh interpreter: it prints "ok" and exits 0 within ``timeout``
    seconds, without a signal or "Exception ignored" on its stderr."""
    proc = run_python(code, timeout=timeout)
    assert proc is not None, "the process hung"
    assert proc.returncode == 0, "exit %d (a negative code is a signal)\n%s" % (
        proc.returncode, proc.stderr[-4000:])
    assert proc.stdout.strip() == "ok", proc.stdout
    assert "Exception ignored" not in proc.stderr, proc.stderr[-4000:]
