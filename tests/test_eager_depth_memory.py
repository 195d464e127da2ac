"""Issue 24, item 7: what eager recursion of depth ``max_depth`` itself costs, in OS threads
and address space, in the environment a user has (no ``OMP_NUM_THREADS``, no
``MALLOC_ARENA_MAX``), each case in a fresh subprocess.

``threading.active_count()`` (what the chain tests in test_no_crash.py print) counts Python
threads only; an OpenMP pool or an engine thread started per stack hop would not show there.
These cases read the OS thread count and the address space from ``/proc/self/status`` at the
deepest call (NOTE [eager recursion stack]).
"""
import textwrap

from conftest import run_python

DEEPEST_CALL_THREADS_AND_ADDRESS_SPACE = """
    import sys
    import numpy as np
    import mxnet as mx
    from mxnet import autograd, nd
    import gluon_cf
    from gluon_cf.recursion.api import DEFAULT_MAX_DEPTH

    def status():
        fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
        return (int(fields["Threads"]), int(fields["VmSize"].split()[0]) >> 10,
                int(fields["VmPeak"].split()[0]) >> 10)

    assert DEFAULT_MAX_DEPTH == {depth} + 1   # nested calls: depth + 1, max_depth's
    w = nd.array([[0.2, -0.2, 0.5], [0.25, 0.1, -0.1], [0.0, 0.25, 0.25]])
    b = nd.array([0.1, -0.2, 0.3])
    w.attach_grad()
    b.attach_grad()
    x0 = nd.array([[1.0, 2.0, 3.0]])
    deepest = {{}}

    @gluon_cf.recursive
    def chain(k, x):
        # a FullyConnected (oneDNN, OpenMP) and a tanh per level: contracting, so float32
        # rounding does not grow with the depth
        if int(k.asscalar()) == 0:
            deepest["status"] = status()
            return x
        return chain(k - 1, nd.tanh(nd.FullyConnected(x, w, b, num_hidden=3)))

    limit = sys.getrecursionlimit()
    # every thread MXNet starts, and its first arena, exist before the recursion starts
    nd.tanh(nd.FullyConnected(x0, w, b, num_hidden=3)).wait_to_read()
    before = status()
    out = chain(nd.array([{depth}]), x0)
    out.wait_to_read()
    unrecorded = deepest.pop("status")
    with autograd.record():
        loss = chain(nd.array([{depth}]), x0).sum()
    recorded = deepest.pop("status")
    loss.backward()
    after = status()

    # the oracle: the same chain in float64 numpy, loops both ways; x_k = tanh(x_(k-1) W^T + b)
    W, B = (a.asnumpy().astype(np.float64) for a in (w, b))
    xs = [x0.asnumpy().astype(np.float64)]
    for _ in range({depth}):
        xs.append(np.tanh(xs[-1] @ W.T + B))
    np.testing.assert_allclose(out.asnumpy(), xs[-1], rtol=1e-5)
    np.testing.assert_allclose(loss.asscalar(), xs[-1].sum(), rtol=1e-5)
    g, dW, dB = np.ones_like(xs[-1]), np.zeros((3, 3)), np.zeros(3)
    for k in range({depth}, 0, -1):
        a = g * (1 - xs[k] ** 2)
        dW += a.T @ xs[k - 1]; dB += a[0]
        g = a @ W
    np.testing.assert_allclose(w.grad.asnumpy(), dW, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(b.grad.asnumpy(), dB, rtol=1e-4, atol=1e-6)
    assert sys.getrecursionlimit() == limit, "the recursion limit was changed"
    print("threads", before[0], unrecorded[0], recorded[0], after[0])
    print("grown_mib", unrecorded[1] - before[1])
    print("vmpeak_mib", after[2])
"""


def test_recursion_of_max_depth_starts_no_os_thread_and_its_stacks_cost_little():
    """A chain of ``max_depth`` nested calls, each a FullyConnected (oneDNN, parallel with
    OpenMP) and a tanh, unrecorded and then recorded with gradients against a numpy
    loop: at the deepest call the process has the OS threads it had before the outermost call
    (7 here: the interpreter, NumPy's OpenBLAS worker, MXNet's engine threads), and the
    unrecorded chain has grown the address space by what its 20,000 levels of Python frames,
    greenlet stacks saved on the heap and small NDArrays take (~60 MiB measured), not by a
    thread stack, malloc arena or OpenMP pool per hop (8 + 64 MiB each; ~70 hops). Once a hop
    was a thread: ~400 threads, ~9 GB at this depth. The whole run, with gradients, peaks at
    VmPeak ~1,275 MiB, within 2 GiB with no environment variable set. Issue 10, item 1: the
    recursion limit is left alone (it was once raised)."""
    proc = run_python(textwrap.dedent(DEEPEST_CALL_THREADS_AND_ADDRESS_SPACE.format(
        depth=19999)), timeout=540)
    assert proc is not None, "the process hung (timeout 540 s)"
    assert proc.returncode == 0, "exit %d (a negative code is a signal)\n%s" % (
        proc.returncode, proc.stderr[-4000:])
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    threads = lines["threads"].split()
    assert len(set(threads)) == 1, "OS threads before, at the deepest call (unrecorded, " \
        "recorded), after backward: %s" % threads
    assert int(lines["grown_mib"]) < 192, lines["grown_mib"]
    # the whole run, recorded chain and backward included (1,275 MiB measured)
    assert int(lines["vmpeak_mib"]) <= 2048, lines["vmpeak_mib"]
