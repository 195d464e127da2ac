"""Two threads training hybridized recursive nets on the same input arrays (NOTE [inputs
shared between threads] in gluon_cf/shared_handles.py). Before, 4 runs in 6 of two threads each
training its own hybridized TreeRNN on the same 5 batches failed in ``loss.backward()``
("The any container is empty requested=...AGInfo", "shape_num_unknown_nodes (8 vs. 0)") or
killed the process (segmentation fault, "pure virtual method called", "double free"). Each
run is a fresh interpreter (a crash must fail the test, not end the suite); the oracle is the
same net trained eagerly (plain Python recursion) in one thread, float64."""
import textwrap

from conftest import run_python

THREADS_SHARING_BATCHES = """
    import os, sys, threading
    sys.path.insert(0, "tests")
    import numpy as np
    import mxnet as mx
    from mxnet import gluon
    import gluon_cf
    import test_review_round20c as T

    if os.environ.get("NO_OWN_HANDLES"):   # (checks that the test fails without the fix)
        import gluon_cf.hybrid as h
        h.own_handles = lambda value: value
    gluon_cf.set_executor(EXECUTOR, ahead_of_time=True)
    MODELS = {"TreeRNN": T.TreeRNN, "TreeLSTM": T.TreeLSTM}
    make = lambda: MODELS[MODEL](len(T.VOCAB), embed_size=4, hidden_size=3, num_classes=2)
    BATCHES = T.BATCHES[:5]

    def train(net, errors):
        try:
            trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.3})
            for inputs in BATCHES:   # the same arrays in both threads
                T._step(net, inputs, trainer)
        except Exception as err:
            errors.append(str(err).strip().splitlines()[-1][:200])

    def params(net):
        return [p.data().asnumpy() for p in net.collect_params().values()]

    oracle = T._net(make)   # eager, one thread
    train(oracle, [])
    want = params(oracle)
    failed = 0
    for rep in range(REPS):
        nets = [T._net(make), T._net(make)]
        for net in nets:
            net.hybridize()
            T._step(net, BATCHES[0])   # built before the threads (no parameter moves)
        errors = []
        threads = [threading.Thread(target=train, args=(n, errors)) for n in nets]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            failed += 1
            print("errors", rep, errors)
            continue
        for net in nets:
            for g, w in zip(params(net), want):
                np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    print("failed", failed)
"""


def _run(model, executor, reps):
    code = "MODEL, EXECUTOR, REPS = %r, %r, %d\n" % (model, executor, reps)
    proc = run_python(code + textwrap.dedent(THREADS_SHARING_BATCHES), timeout=120)
    assert proc is not None, "the process hung (timeout 120 s)"
    assert proc.returncode == 0, "exit %d (a negative code is a signal)\n%s" % (
        proc.returncode, proc.stderr[-4000:])
    assert proc.stdout.split()[-2:] == ["failed", "0"], proc.stdout[-2000:]


def test_two_threads_train_hybridized_tree_rnns_on_shared_batches():
    """Batched executor (ahead-of-time schedules), 5 repetitions: parameters after 5 SGD
    steps in each thread equal eager training's."""
    _run("TreeRNN", "batched", 5)


def test_two_threads_train_hybridized_tree_lstms_on_shared_batches_unbatched():
    _run("TreeLSTM", "unbatched", 3)


# Nested remat loops reading one global table (``take``) in one user thread: each inner
# loop's backward records its steps again on one of MXNet's Custom-operator worker threads
# while the other loops' backwards run on others. Before, "The any container is empty
# requested=...AGInfo" in 5 calls of 30 on a busy machine (load ~4), 7 of 84 with two
# CPU-bound processes beside it, 0 of 90 on an idle one: a race, seen under load (the suite
# runs on two workers). After, 0 of 84 with the same load. The oracle: the same loops in
# plain Python.
NESTED_REMAT_LOOPS_SHARING_A_TABLE = """
    import os
    import numpy as np
    import mxnet as mx
    from mxnet import autograd
    import gluon_cf

    if os.environ.get("NO_OWN_HANDLES"):   # (checks that the test fails without the fix)
        import gluon_cf.shared_handles as s
        s.own_inputs = lambda ndargs: ndargs
    T, H = 5, 3
    TABLE = mx.nd.array(np.random.RandomState(0).randn(T + 4, H))

    def go(outer, inner, plain=False):
        w = mx.nd.array([[0.5, -1.0, 2.0]])
        w.attach_grad()
        xs = mx.nd.array(np.linspace(-1, 1, T).reshape(T, 1))

        def inner_loop(x, h):
            def body(j, g):
                g = mx.nd.tanh(mx.nd.take(TABLE, mx.nd.floor(g[:, 0] * 0)) * w * x + g)
                return g, [j + 1, g]
            if plain:
                j, g = mx.nd.zeros((1,)), h
                for _ in range(3):
                    _, (j, g) = body(j, g)
                return g
            _, (j, g) = gluon_cf.while_loop(lambda j, g: j < 3, body, [mx.nd.zeros((1,)), h],
                                            max_iterations=4, remat=inner)
            return g

        def obody(x, s):
            i, h = s
            h = inner_loop(x, h) + mx.nd.take(TABLE, i) * 0.1
            return h, [i + 1, h]

        with autograd.record():
            init = [mx.nd.zeros((1,)), mx.nd.zeros((1, H))]
            if plain:
                s, outs = init, []
                for t in range(T):
                    o, s = obody(xs[t], s)
                    outs.append(o)
                outs = mx.nd.stack(*outs)
            else:
                outs, s = gluon_cf.foreach(obody, xs, init, remat=outer)
            loss = (outs * mx.nd.arange(outs.size).reshape(outs.shape)).sum() + (s[1] ** 2).sum()
        loss.backward()
        return loss.asscalar(), w.grad.asnumpy()

    want = go(None, None, plain=True)
    failed = 0
    for rep in range(8):
        for outer, inner in ((False, 1), (False, 2), (2, 2)):
            try:
                got = go(outer, inner)
            except mx.MXNetError as err:
                failed += 1
                print("error", outer, inner, str(err).strip().splitlines()[-1][:200])
                continue
            np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
            np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
    print("failed", failed)
"""


def test_nested_remat_loops_reading_one_table_backward_on_worker_threads():
    proc = run_python(textwrap.dedent(NESTED_REMAT_LOOPS_SHARING_A_TABLE), timeout=120)
    assert proc is not None, "the process hung (timeout 120 s)"
    assert proc.returncode == 0, "exit %d (a negative code is a signal)\n%s" % (
        proc.returncode, proc.stderr[-4000:])
    assert proc.stdout.split()[-2:] == ["failed", "0"], proc.stdout[-2000:]
