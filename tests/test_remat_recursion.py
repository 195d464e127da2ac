"""``@gluon_cf.recursive(remat=True)`` in eager mode (NOTE [rematerialised recursive calls] in
gluon_cf/recursion/remat_calls.py): gradients equal those of ``remat=False`` (the oracle, itself
checked against hybridized recursion and the models' references elsewhere), every call's body
is recomputed exactly once, what keeps less memory does, and what it cannot do is refused."""
import subprocess
import sys
import textwrap

import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from mxnet import autograd, gluon

import gluon_cf
from gluon_cf.node import recorded
from gluon_cf import remat as R

TOL = dict(rtol=1e-5, atol=1e-5)
H = 5


def _random_tree(seed, size):
    """A random binary tree of ``size`` leaves: arrays left, right (-1 at a leaf), word; the
    root is the last node."""
    rng = np.random.RandomState(seed)
    nodes = [(-1, -1, rng.randint(0, 7)) for _ in range(size)]
    pending = list(range(size))
    while len(pending) > 1:
        j = rng.randint(0, len(pending) - 1)
        a, b = pending[j], pending[j + 1]
        nodes.append((a, b, rng.randint(0, 7)))
        pending[j:j + 2] = [len(nodes) - 1]
    left, right, word = (mx.nd.array([n[k] for n in nodes]) for k in range(3))
    return left, right, word, len(nodes)


class _TreeLSTM(gluon.Block):
    """A binary TreeLSTM over a tree given as index arrays, by eager recursion: a node's result
    is ``[h, c]``; its children's are computed by recursive calls."""

    def __init__(self, remat):
        super().__init__()
        self.remat = remat
        with self.name_scope():
            self.embed = gluon.nn.Embedding(7, H)
            self.iou = gluon.nn.Dense(4 * H, in_units=3 * H)

    def forward(self, left, right, word, root):
        def cell(x, hl, cl, hr, cr):
            gates = self.iou(mx.nd.concat(x, hl, hr, dim=1))
            i, fl, fr, u = mx.nd.split(gates, num_outputs=4, axis=1)
            c = mx.nd.sigmoid(i) * mx.nd.tanh(u) + mx.nd.sigmoid(fl) * cl + \
                mx.nd.sigmoid(fr) * cr
            return [mx.nd.tanh(c) * 2, c]

        @gluon_cf.recursive(remat=self.remat)
        def node(n):
            x = self.embed(mx.nd.take(word, n))
            zero = mx.nd.zeros((1, H))

            def inner():
                hl, cl = node(mx.nd.take(left, n))
                hr, cr = node(mx.nd.take(right, n))
                return cell(x, hl, cl, hr, cr)
            return gluon_cf.cond(mx.nd.take(left, n) < 0,
                                 lambda: cell(x, zero, zero, zero, zero), inner)
        return node(root)


def _tree_grads(remat, tree):
    left, right, word, size = tree
    mx.random.seed(1)
    net = _TreeLSTM(remat)
    net.initialize(mx.init.Uniform(0.5))
    with autograd.record():
        h, c = net(left, right, word, mx.nd.array([size - 1]))
        loss = (h ** 2).sum() + (c * 3).sum()
    loss.backward()
    mx.nd.waitall()
    return [loss.asnumpy()] + [p.grad().asnumpy() for p in net.collect_params().values()]


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 10 ** 6), leaves=st.integers(1, 12))
def test_treelstm_gradients_equal_on_random_trees(seed, leaves):
    tree = _random_tree(seed, leaves)
    want = _tree_grads(False, tree)
    before = R.recomputed.steps
    got = _tree_grads(True, tree)
    assert R.recomputed.steps - before == tree[3]   # every call's body recomputed exactly once
    for a, b in zip(want, got):
        np.testing.assert_allclose(a, b, **TOL)


def _chain(remat, length, cell, xs):
    """h_i = cell([x_i, h_{i-1}]) down a chain of ``length`` calls."""
    @gluon_cf.recursive(remat=remat)
    def chain(i):
        x = mx.nd.take(xs, i)
        return gluon_cf.cond(i < 1, lambda: mx.nd.tanh(x),
                             lambda: cell(mx.nd.concat(x, chain(i - 1), dim=1)))
    return chain(mx.nd.array([length - 1]))


def test_chain_of_2000_calls():
    mx.random.seed(2)
    cell = gluon.nn.Dense(4, in_units=8, activation="tanh")
    cell.initialize()
    xs = mx.nd.random.normal(shape=(2000, 4))
    xs.attach_grad()   # a closure array needing a gradient, read by every call
    results = []
    for remat in (False, True):
        for p in cell.collect_params().values():
            p.zero_grad()
        before = R.recomputed.steps
        with autograd.record():
            loss = (_chain(remat, 2000, cell, xs) ** 2).sum()
        loss.backward()
        mx.nd.waitall()
        assert R.recomputed.steps - before == (2000 if remat else 0)
        results.append([loss.asnumpy(), xs.grad.asnumpy()] +
                       [p.grad().asnumpy() for p in cell.collect_params().values()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, **TOL)


@pytest.mark.parametrize("odd_remat", [True, False])
def test_mutual_recursion(odd_remat):
    """even(n) = w * odd(n - 1) + 1, odd(n) = tanh(v * even(n - 1)); a call of a function
    without remat inside a remat body is part of that body (recomputed with it)."""
    w, v = mx.nd.array([0.7]), mx.nd.array([1.3])
    w.attach_grad()
    v.attach_grad()

    def run(remat, odd_remat):
        @gluon_cf.recursive(remat=remat)
        def even(n):
            return gluon_cf.cond(n < 1, lambda: w * 2, lambda: w * odd(n - 1) + 1)

        @gluon_cf.recursive(remat=odd_remat)
        def odd(n):
            return mx.nd.tanh(v * even(n - 1))

        before = R.recomputed.steps
        with autograd.record():
            y = even(mx.nd.array([10]))
        y.backward()
        mx.nd.waitall()
        return R.recomputed.steps - before, [y.asnumpy(), w.grad.asnumpy(), v.grad.asnumpy()]

    _, want = run(False, False)
    count, got = run(True, odd_remat)
    assert count == (11 if odd_remat else 6)   # even at 10, 8, .., 0 (and odd at 9, .., 1)
    for a, b in zip(want, got):
        np.testing.assert_allclose(a, b, **TOL)


def test_no_recomputation_without_recording():
    cell = gluon.nn.Dense(4, in_units=8)
    cell.initialize()
    xs = mx.nd.ones((5, 4))
    before = R.recomputed.steps
    out = _chain(True, 5, cell, xs)
    assert not recorded(out)
    with autograd.record():
        _chain(False, 5, cell, xs).backward()
    mx.nd.waitall()
    assert R.recomputed.steps == before


def test_arguments_recorded_outside_pass_through():
    """The outermost call's argument needs a gradient and is passed down unchanged: each call's
    node takes it as an input, so its gradient needs no parent's graph."""
    h0 = mx.nd.array([[0.5, -1.0]])
    grads = []
    for remat in (False, True):
        @gluon_cf.recursive(remat=remat)
        def f(h, n):
            return gluon_cf.cond(n < 1, lambda: h * 1, lambda: mx.nd.tanh(f(h, n - 1) + h))
        h0.attach_grad()
        with autograd.record():
            y = f(h0, mx.nd.array([6]))
        y.backward()
        grads.append(h0.grad.asnumpy())
    np.testing.assert_allclose(grads[0], grads[1], **TOL)


def _backward_error(fn, *args):
    with autograd.record():
        y = fn(*args)
    y.backward()
    mx.nd.waitall()


def _values_and_gradients(fn, args, params):
    for a in list(args) + list(params):
        a.attach_grad()
    with autograd.record():
        y = fn(*args)
    y.backward()
    mx.nd.waitall()
    return [y.asnumpy()] + [a.grad.asnumpy().copy() for a in list(args) + list(params)]


def test_computed_argument_needing_a_gradient_runs_in_its_callers_node():
    """Top-down: the child's argument is computed from the parent's. It was refused; now the
    call runs inside its caller's node (NOTE [arguments computed in a remat body]): remat=False's
    values and gradients, not silently dropped."""
    w = mx.nd.array([0.5])
    results = []
    for remat in (False, True):
        @gluon_cf.recursive(remat=remat)
        def down(h, n):
            return gluon_cf.cond(n < 1, lambda: h * 1, lambda: down(mx.nd.tanh(w * h), n - 1))
        results.append(_values_and_gradients(lambda h: down(h, mx.nd.array([3])),
                                             [mx.nd.ones((1,)) * 0.7], [w]))
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, **TOL)


def test_argument_computed_only_by_the_outermost_call_gets_its_gradient():
    """Only the outermost call (the first of its function, whose body runs recorded to check
    its reads) computes its child's argument from its own; deeper calls pass theirs on
    unchanged. The argument computed in that recorded run counted as received recorded, and
    the gradient through it to the outermost argument was dropped (a difference of 2.7 in a
    review's run, no error); then refused as any computed argument; now remat=False's
    gradients (NOTE [arguments computed in a remat body])."""
    w = mx.nd.array([[0.5, -0.3], [0.2, 0.4]])
    results = []
    for remat in (False, True):
        @gluon_cf.recursive(remat=remat)
        def f(i, h):
            k = int(i.asscalar())
            if k == 0:
                return h * 2
            if k == 6:
                return f(i - 1, mx.nd.tanh(mx.nd.dot(h, w)))
            return mx.nd.tanh(mx.nd.dot(f(i - 1, h), w)) + h

        h0 = mx.nd.array([[0.3, -0.7]])
        results.append(_values_and_gradients(lambda h: f(mx.nd.array([6]), h), [h0], [w]))
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, **TOL)


def test_randomness_is_refused():
    drop = gluon.nn.Dropout(0.5)
    w = mx.nd.ones((1, 20))
    w.attach_grad()

    @gluon_cf.recursive(remat=True)
    def f(n):
        return gluon_cf.cond(n < 1, lambda: drop(w), lambda: drop(f(n - 1) * w))

    with pytest.raises(NotImplementedError, match=r"gluon_cf.recursive at .*"
                       r"test_remat_recursion.py:\d+: remat=True for 'f' whose body runs "
                       r"Dropout"):
        _backward_error(f, mx.nd.array([2]))


@pytest.mark.parametrize("draw", ["normal", "dropout"])
def test_a_random_draw_is_refused_in_the_forward_at_its_line(draw):
    """A draw without inputs (``mx.nd.random.normal(shape=...)``) is not recorded: before, it
    was found only when the recomputed values differed, in backward, with a message naming
    neither the op nor the line. Now the forward refuses any random op the body calls, naming
    it and the user's line (a recorded one, Dropout, too); nothing runs backward."""
    drop = gluon.nn.Dropout(0.5)
    w = mx.nd.ones((1, 3))
    w.attach_grad()
    line = sys._getframe().f_lineno + (6 if draw == "normal" else 7)

    @gluon_cf.recursive(remat=True)
    def f(n):
        if int(n.asscalar()) == 0:
            return w * 2
        return (f(n - 1) * w + mx.nd.random.normal(shape=(1, 3)) if draw == "normal" else
                drop(f(n - 1) * w))
    op = "_random_normal" if draw == "normal" else "Dropout"
    with autograd.record():
        with pytest.raises(NotImplementedError, match=r"remat=True for 'f' whose body runs "
                           r"%s at .*test_remat_recursion.py:%d: " % (op, line)):
            f(mx.nd.array([2]))


@pytest.mark.parametrize("remat, error, text", [
    (2, NotImplementedError, "remat=2 is not implemented for recursive functions"),
    ("auto", NotImplementedError, "remat='auto' is not implemented for recursive functions"),
    (gluon_cf.MemoryBudget(1 << 20), NotImplementedError,
     r"remat=MemoryBudget\(1048576\) is not implemented"),
    ("sometimes", ValueError, "remat='sometimes'"),
    (1.5, TypeError, "got float 1.5"),
])
def test_bad_remat(remat, error, text):
    with pytest.raises(error, match="gluon_cf.recursive.*" + text):
        gluon_cf.recursive(lambda n: n, remat=remat)
    if error is NotImplementedError:
        with pytest.raises(error, match=r"gluon_cf.recursive at .*test_remat_recursion.py:\d+"):
            @gluon_cf.recursive(remat=remat)
            def f(n):
                return n


MEMORY_SCRIPT = textwrap.dedent("""
    import sys, time, mxnet as mx, gluon_cf
    from mxnet import autograd, gluon
    remat, depth = sys.argv[1] == "True", int(sys.argv[2])
    mx.random.seed(0)
    wide = gluon.nn.Dense(2048, in_units=64, activation="relu")
    narrow = gluon.nn.Dense(64, in_units=2048)
    wide.initialize(); narrow.initialize()
    xs = mx.nd.random.normal(shape=(depth, 32, 64))

    @gluon_cf.recursive(remat=remat)
    def chain(i):
        x = mx.nd.take(xs, i).reshape((32, 64))
        return gluon_cf.cond(i < 1, lambda: mx.nd.tanh(x),
                             lambda: mx.nd.tanh(narrow(wide(chain(i - 1) * 0.5)) + x))

    def run(n):
        with autograd.record():
            loss = chain(mx.nd.array([n - 1])).sum()
        loss.backward()
        mx.nd.waitall()

    def peak_kib():   # VmHWM: ru_maxrss carries the parent's (pytest's) peak over execve
        with open("/proc/self/status") as status:
            return next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))

    run(3)   # warm up
    base = peak_kib()
    start = time.perf_counter()
    run(depth)
    print(peak_kib() - base, time.perf_counter() - start)
""")


def test_remat_keeps_less_memory_in_a_fresh_process():
    """Peak RSS growth of one forward+backward down a 300-call chain whose cell's intermediates
    (32 x 2048) are 32x its result (32 x 64): remat keeps far less (loose bound)."""
    growth = {}
    for remat in ("False", "True"):
        done = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, remat, "300"],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        growth[remat] = int(done.stdout.split()[-2])   # kB
    assert growth["False"] > 50 * 1024 and growth["True"] * 2 < growth["False"], growth


HANG_SCRIPT = textwrap.dedent("""
    import numpy as np
    import mxnet as mx, gluon_cf
    from mxnet import autograd, gluon
    from gluon_cf import remat as R

    class Cell(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.d = gluon.nn.Dense(4, in_units=8)

        def hybrid_forward(self, F, x):
            return gluon_cf.cond(x.sum() > 0, lambda: F.tanh(self.d(x)), lambda: self.d(x))

    def run(remat):
        mx.random.seed(2)
        cell = Cell(); cell.initialize(); cell.hybridize()
        xs = mx.nd.random.normal(shape=(5, 4))

        @gluon_cf.recursive(remat=remat)
        def chain(i):
            x = mx.nd.take(xs, i)
            return gluon_cf.cond(i < 1, lambda: mx.nd.tanh(x),
                                 lambda: cell(mx.nd.concat(x, chain(i - 1), dim=1)))

        with autograd.record():
            loss = chain(mx.nd.array([4])).sum()
        loss.backward(); mx.nd.waitall()
        return [loss] + [p.grad() for p in cell.collect_params().values()]

    want = run(False)
    before = R.recomputed.steps
    got = run(True)
    assert R.recomputed.steps - before == 5, R.recomputed.steps - before   # chain(4) .. chain(0)
    for a, b in zip(want, got):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-6)
    print("ok")
""")


def test_hybridized_gluon_cf_block_in_a_remat_body():
    """Its node's backward inside the call's hung MXNet's engine (then it was refused): in a
    remat body the block runs partitioned, its nodes inline. Gradients equal remat=False's."""
    done = subprocess.run([sys.executable, "-c", HANG_SCRIPT], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split()[-1] == "ok", done.stdout


def test_a_body_that_recomputes_differently_fails_the_backward():
    """A body reading Python state that changes between forward and backward: the recomputed
    results differ from the forward's, and the backward says so (never another gradient)."""
    w = mx.nd.array([0.5])
    w.attach_grad()
    scale = [1.0]

    @gluon_cf.recursive(remat=True)
    def f(n):
        scale[0] += 1
        return gluon_cf.cond(n < 1, lambda: w * scale[0], lambda: f(n - 1) * w)

    with pytest.raises(RuntimeError, match=r"gluon_cf.recursive at .*test_remat_recursion.py:"
                       r"\d+: with remat, recomputing a call of 'f' in backward gave different "
                       r"values"):
        _backward_error(f, mx.nd.array([3]))


def test_batchnorm_under_training_is_refused():
    bn = gluon.nn.BatchNorm(in_channels=3)
    bn.initialize()
    w = mx.nd.ones((2, 3))
    w.attach_grad()

    @gluon_cf.recursive(remat=True)
    def f(n):
        return gluon_cf.cond(n < 1, lambda: bn(w), lambda: bn(f(n - 1) * w))

    with pytest.raises(NotImplementedError, match=r"gluon_cf.recursive at .*"
                       r"test_remat_recursion.py:\d+: remat=True for 'f' whose body runs "
                       r"BatchNorm"):
        _backward_error(f, mx.nd.array([2]))


# ---- values recorded before the call (NOTE [values recorded before a remat call]) ------------

class _ChainReadingZ(gluon.HybridBlock):
    """``f(n) = tanh(cell(f(n - 1)) + z)``, ``z = pre(x)`` computed before the recursion; read
    from the closure (``via_arg=False``) or passed down as an argument."""

    def __init__(self, remat, via_arg):
        super().__init__()
        self.remat, self.via_arg = remat, via_arg
        with self.name_scope():
            self.pre = gluon.nn.Dense(4, in_units=4)
            self.cell = gluon.nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, x, n):
        z = self.pre(x)
        cell, via_arg = self.cell, self.via_arg

        @gluon_cf.recursive(remat=self.remat)
        def f(n, z_arg):
            zz = z_arg if via_arg else z
            return gluon_cf.cond(n < 1, lambda: F.tanh(zz),
                                 lambda: F.tanh(cell(f(n - 1, z_arg)) + zz))
        return f(n, z)


def _chain_grads(remat, via_arg, hybridize=False, unrolled=False):
    mx.random.seed(3)
    net = _ChainReadingZ(remat, via_arg)
    net.initialize(mx.init.Xavier())
    if hybridize:
        net.hybridize()
    x = mx.nd.array(np.random.RandomState(0).rand(1, 4))
    x.attach_grad()
    with autograd.record():
        if unrolled:   # the oracle: plain MXNet operators, no gluon_cf
            z = net.pre(x)
            out = mx.nd.tanh(z)
            for _ in range(3):
                out = mx.nd.tanh(net.cell(out) + z)
        else:
            out = net(x, mx.nd.array([3]))
        loss = (out * out).sum()
    loss.backward()
    return [x.grad.asnumpy()] + [p.grad().asnumpy() for p in net.collect_params().values()]


def test_value_recorded_before_the_call_read_from_the_closure_is_refused():
    """The gradient through ``z`` was silently lost (it differed from remat=False by ~1):
    now the forward refuses, naming the function and the user's line."""
    with pytest.raises(NotImplementedError, match=r"'f' reads an array computed under "
                       r"autograd.record\(\) before the call.*FullyConnected") as info:
        _chain_grads(True, via_arg=False)
    assert "test_remat_recursion.py" in str(info.value)
    oracle = _chain_grads(False, False, unrolled=True)
    for hybridize in (False, True):
        for got, want in zip(_chain_grads(False, False, hybridize), oracle):
            np.testing.assert_allclose(got, want, **TOL)
    for got, want in zip(_chain_grads(True, False, hybridize=True), oracle):
        np.testing.assert_allclose(got, want, **TOL)


def test_value_recorded_before_the_call_passed_as_argument():
    """The supported form: eager and hybridized remat=True equal remat=False and the unrolled
    oracle, and the eager calls were recomputed."""
    oracle = _chain_grads(False, True, unrolled=True)
    before = R.recomputed.steps
    for remat, hybridize in [(False, False), (True, False), (True, True)]:
        for got, want in zip(_chain_grads(remat, True, hybridize), oracle):
            np.testing.assert_allclose(got, want, **TOL)
    assert R.recomputed.steps - before == 4   # the 4 eager calls, once each


def test_value_recorded_before_the_call_read_only_in_the_base_case_is_refused():
    """Leaves reading embeddings computed before the recursion: the first call takes the
    recursive branch, so the base case is inspected on its own."""
    cell = gluon.nn.Dense(4, in_units=4)
    cell.initialize()
    x = mx.nd.ones((1, 4))
    x.attach_grad()

    @gluon_cf.recursive(remat=True)
    def f(n):
        if n.asscalar() <= 0:
            return mx.nd.tanh(z)
        return mx.nd.tanh(cell(f(n - 1)))

    with autograd.record():
        z = cell(x)
        with pytest.raises(NotImplementedError, match="'f' reads an array computed"):
            f(mx.nd.array([2]))


def test_each_body_runs_once_in_the_forward_but_the_first_base_case_and_once_in_backward():
    """A Python side effect in the body (here: a list of the calls made) shows every body run:
    the forward runs each call's body once, but the first base case twice (paused, then
    recorded to inspect its reads: NOTE [values recorded before a remat call]; running every
    call down to it recorded instead made a chain's forward quadratic in its depth), and the
    backward recomputes each once."""
    cell = gluon.nn.Dense(3, in_units=3)
    cell.initialize(mx.init.Uniform(0.5))
    x = mx.nd.array([[0.1, -0.2, 0.3]])
    x.attach_grad()
    seen = []

    @gluon_cf.recursive(remat=True)
    def f(n):
        k = int(n.asscalar())
        seen.append(k)
        if k <= 0:
            return mx.nd.tanh(x)
        return mx.nd.tanh(cell(f(n - 1) + f(n - 2 if k > 1 else n - 1) * 0.5))

    with autograd.record():
        out = f(mx.nd.array([3]))
        loss = out.sum()
    forward = list(seen)
    calls = [3, 2, 1, 0, 0, 0, 1, 0, 0]   # the plain Python recursion's call order
    assert forward == calls[:4] + [0] + calls[4:]   # the first base case's second run
    loss.backward()
    mx.nd.waitall()
    assert sorted(seen[len(forward):]) == sorted(calls)
    x_grad = x.grad.asnumpy().copy()

    def g(k):   # the oracle: plain recorded recursion
        if k <= 0:
            return mx.nd.tanh(x)
        return mx.nd.tanh(cell(g(k - 1) + g(k - 2 if k > 1 else k - 1) * 0.5))
    with autograd.record():
        want = g(3)
        loss = want.sum()
    loss.backward()
    np.testing.assert_allclose(out.asnumpy(), want.asnumpy(), **TOL)
    np.testing.assert_allclose(x_grad, x.grad.asnumpy(), **TOL)
