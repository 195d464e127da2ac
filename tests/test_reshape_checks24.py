"""NOTE [a reshape to another size]: how often the check runs. A Reshape whose ``shape``
codes keep the size for any input is never checked, one whose rank decides it once per input
ranks, one with a given dimension once per input shapes; the check still refuses a rank that
drops dimensions. Each case in a subprocess: a Reshape let through corrupts the heap."""
import subprocess
import sys
import textwrap

import pytest

_PROGRAM = textwrap.dedent("""
    import mxnet as mx, numpy as np
    import gluon_cf
    from gluon_cf.graph import cached_graph
    from gluon_cf.graph.operator_errors import OperatorShapeError

    calls = []
    real = cached_graph._check_reshapes
    def counting(*args):
        calls.append(1)
        return real(*args)
    cached_graph._check_reshapes = counting

    class Rows(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            out = gluon_cf.cond(F.sum(x) > 0, lambda: F.reshape(x, shape=SHAPE) * 2,
                                lambda: F.reshape(x, shape=SHAPE) * 3)
            return out

    net = Rows()
    net.hybridize()
    for n in (2, 3, 5, 7):     # new shapes, the same ranks
        x = np.arange(n * 4 * 5, dtype=np.float32).reshape((n, 4, 5))
        got = net(mx.nd.array(x)).asnumpy()
        assert got.size == x.size and np.array_equal(got.ravel(), (x * 2).ravel()), n
        if n == 2:
            first = len(calls)
    print("checks", first, len(calls) - first)
    try:
        net(mx.nd.ones((2, 3, 4, 5))).asnumpy()   # (-3, 0) drops the last axis
        print("ran")
    except OperatorShapeError as err:
        print("refused", "another size" in str(err) or "elements" in str(err))
""")


# Checked per graph: the block's, and the cond's branch (its shape inference and its runs, on
# whichever of MXNet's Custom-op threads, share its checks since session 33: before, each
# thread's run kept its own, 3 checks for the first call, and a later call of the same ranks
# run on a new thread under load checked again, "checks 3 1" in a whole-suite run).
@pytest.mark.parametrize("shape,checks,last", [
    ((-3, 0), "checks 2 0", "refused True"),   # the rank decides: once per ranks, per graph
    ((-1,), "checks 0 0", "ran"),              # the size kept for any input: never checked
    ((1, -1), "checks 2 6", "ran"),            # a given dimension: once per shapes
])
def test_reshape_checks_run_once_per_what_decides_them(shape, checks, last):
    proc = subprocess.run([sys.executable, "-c", "SHAPE = %r\n" % (shape,) + _PROGRAM],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.split("\n")
    assert checks in lines and last in lines, (proc.stdout, proc.stderr[-1500:])
