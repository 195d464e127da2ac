"""Rematerialisation (NOTE [rematerialisation] in gluon_cf/remat.py): gradients with remat equal
those without (the oracle: the same loop with remat=False, itself checked against MXNet's
foreach elsewhere), eager and hybridized; recomputed steps are counted; bad input is refused."""
import subprocess
import sys
import textwrap

import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from mxnet import autograd, gluon

import gluon_cf
from gluon_cf import remat as R

REMATS = [True, 1, 2, 3, 100, "auto", gluon_cf.MemoryBudget(1 << 20)]


def _cell(seed=0):
    mx.random.seed(seed)
    cell = gluon.rnn.LSTMCell(6, input_size=4)
    cell.initialize()
    return cell


class _Scan(gluon.HybridBlock):
    def __init__(self, cell, remat):
        super().__init__()
        self.cell, self.remat = cell, remat

    def hybrid_forward(self, F, x, h, c):
        out, st = gluon_cf.foreach(lambda xt, s: self.cell(xt, s), x, [h, c], remat=self.remat)
        return out, st[0], st[1]


def _grads(cell, x, remat, hybridize):
    """Loss and gradients (data, parameters) of an LSTM scan."""
    xx = x.copy()
    xx.attach_grad()
    h0, c0 = mx.nd.zeros((x.shape[1], 6)), mx.nd.ones((x.shape[1], 6)) * 0.1
    for p in cell.collect_params().values():
        p.zero_grad()
    with autograd.record():
        if hybridize:
            net = _Scan(cell, remat)
            net.hybridize()
            out, h, c = net(xx, h0, c0)
        else:
            out, (h, c) = gluon_cf.foreach(lambda xt, s: cell(xt, s), xx, [h0, c0], remat=remat)
        loss = (out ** 2).sum() + (h * 3).sum() + c.sum()
    loss.backward()
    return [loss.asnumpy(), xx.grad.asnumpy()] + [p.grad().asnumpy()
                                                   for p in cell.collect_params().values()]


@pytest.mark.parametrize("hybridize", [False, True])
def test_foreach_lstm_gradients_equal(hybridize):
    cell = _cell()
    x = mx.nd.random.normal(shape=(7, 3, 4))
    want = _grads(cell, x, False, hybridize)
    for remat in REMATS:
        before = R.recomputed.steps
        got = _grads(cell, x, remat, hybridize)
        assert R.recomputed.steps - before == 7, remat   # every step recomputed once
        for a, b in zip(want, got):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=str(remat))


def test_no_recomputation_without_remat_or_recording():
    cell = _cell()
    x = mx.nd.random.normal(shape=(5, 2, 4))
    before = R.recomputed.steps
    _grads(cell, x, False, False)
    gluon_cf.foreach(lambda xt, s: cell(xt, s), x, [mx.nd.zeros((2, 6))] * 2, remat=True)
    assert R.recomputed.steps == before


@settings(max_examples=12, deadline=None)
@given(length=st.integers(1, 9), k=st.integers(1, 10), hybridize=st.booleans())
def test_foreach_random_lengths_and_intervals(length, k, hybridize):
    w = mx.nd.array([0.5, -0.3])
    w.attach_grad()

    class Net(gluon.HybridBlock):
        def hybrid_forward(self, F, x, s, w):
            out, st = gluon_cf.foreach(lambda xt, s: (F.tanh(xt * w + s * 0.9),) * 2, x, s,
                                       remat=remat)
            return out, st

    x = mx.nd.array(np.random.RandomState(length).randn(length, 2))
    results = []
    for remat in (False, k):
        net = Net()
        if hybridize:
            net.hybridize()
        xx, s0 = x.copy(), mx.nd.ones((2,))
        xx.attach_grad()
        s0.attach_grad()
        with autograd.record():
            out, st = net(xx, s0, w)
            loss = (out ** 2).sum() + st.sum()
        loss.backward()
        results.append([g.asnumpy() for g in (xx.grad, s0.grad, w.grad)])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


class _DropoutLoop(gluon.HybridBlock):
    """out[t] = dropout(x[t]) * w under remat=2: d(sum out)/dw = sum(out) / w."""

    def __init__(self):
        super().__init__()
        self.drop = gluon.nn.Dropout(0.5)

    def hybrid_forward(self, F, x, s, w):
        return gluon_cf.foreach(lambda xt, s: (F.broadcast_mul(self.drop(xt), w), s + 1),
                                x, s, remat=2)


def _train_dropout_loop(net, calls):
    """``calls`` recorded calls and backwards of ``net``; the last output and w's gradient."""
    w = mx.nd.array([1.5])
    w.attach_grad()
    for _ in range(calls):
        with autograd.record():
            out, _ = net(mx.nd.ones((6, 50)), mx.nd.zeros((1,)), w)
        out.backward()
    return out, w.grad


@pytest.mark.parametrize("hybridize", [False, True])
def test_dropout_replays_the_same_mask(hybridize):
    """d(sum out)/dw = sum(dropout(x)) = sum(out) / w: the gradient of the forward's masks."""
    net = _DropoutLoop()
    if hybridize:
        net.hybridize()
    # Twice: a hybridized node's first backward re-runs its forward when it learns which
    # inputs need a gradient (NOTE [gradients through a node]), with fresh masks.
    out, w_grad = _train_dropout_loop(net, 2)
    assert 0 < (out == 0).sum().asscalar() < out.size   # a real mask
    np.testing.assert_allclose(w_grad.asnumpy(), out.sum().asnumpy() / 1.5, rtol=1e-5)


@pytest.mark.parametrize("op", ["foreach", "while_loop"])
@pytest.mark.parametrize("remat", [True, 2])
def test_eager_draw_without_inputs_replays(op, remat):
    """``mx.nd.random.normal(shape=...)`` has no input, so MXNet does not record it and step
    0's graph did not show it: the loop was not seeded and its backward failed ("different
    values"). The operators a step calls are seen by the escape watch; d(sum out)/dw =
    sum(out) / w, the gradient of the forward's draws."""
    w = mx.nd.array([1.5])
    w.attach_grad()
    with autograd.record():
        if op == "foreach":
            out, _ = gluon_cf.foreach(
                lambda xt, s: (mx.nd.random.normal(shape=(50,)) * xt * w, s + 1),
                mx.nd.ones((7, 50)), mx.nd.zeros((1,)), remat=remat)
        else:
            out = gluon_cf.while_loop(
                lambda i: i < 7, lambda i: (mx.nd.random.normal(shape=(50,)) * w, [i + 1]),
                [mx.nd.zeros((1,))], max_iterations=7, remat=remat)[0]
    out.backward()
    assert len(np.unique(out.asnumpy())) > 300   # real draws, a fresh one per step
    np.testing.assert_allclose(w.grad.asnumpy(), out.sum().asnumpy() / 1.5, rtol=1e-5)


def test_first_backward_of_a_random_remat_loop_never_loses_autograd_entries():
    """A hybridized remat foreach with Dropout re-runs its forward in its first backward; the
    remat backward that this reaches ran on another worker thread while the node's backward
    cleared the entries of the inputs it was reading: "The any container is empty" in about 1
    block in 5 (NOTE [autograd on MXNet's worker threads]). 30 fresh blocks: none may fail."""
    for _ in range(30):
        net = _DropoutLoop()
        net.hybridize()
        out, w_grad = _train_dropout_loop(net, 1)
        np.testing.assert_allclose(w_grad.asnumpy(), out.sum().asnumpy() / 1.5, rtol=1e-5)


@pytest.mark.parametrize("remat, error, text", [
    ("sometimes", ValueError, "remat='sometimes'"),
    (0, ValueError, "remat=0"),
    (-2, ValueError, "remat=-2"),
    (1.5, TypeError, "got float 1.5"),
    (None, TypeError, "got NoneType"),
])
def test_bad_remat(remat, error, text):
    x = mx.nd.ones((3, 2))
    with pytest.raises(error, match="gluon_cf.foreach: .*" + text.replace("(", r"\(")
                       .replace(".", r"\.")):
        gluon_cf.foreach(lambda xt, s: (xt, s), x, mx.nd.zeros((2,)), remat=remat)


def test_budget_smaller_than_a_step():
    cell = _cell()
    x = mx.nd.random.normal(shape=(5, 3, 4))
    with pytest.raises(ValueError, match=r"gluon_cf.foreach at .*test_remat.py:\d+: "
                                         r"remat=MemoryBudget\(10\) is smaller than one step"):
        _grads(cell, x, gluon_cf.MemoryBudget(10), False)
    with pytest.raises(ValueError, match="nbytes must be positive"):
        gluon_cf.MemoryBudget(0)


def test_choose_interval():
    # 100 steps, 1 kB of state, 10 kB of intermediates per step
    assert R.choose_interval("foreach", gluon_cf.MemoryBudget(10 ** 9), 100, 1000, 10000) == 100
    k = R.choose_interval("foreach", gluon_cf.MemoryBudget(150000), 100, 1000, 10000)
    assert R.peak_bytes(100, k, 1000, 10000) <= 150000 < R.peak_bytes(100, k + 1, 1000, 10000)
    # the backward's working set counts against the budget (NOTE [remat budgets])
    k2 = R.choose_interval("foreach", gluon_cf.MemoryBudget(150000), 100, 1000, 10000,
                           fixed_bytes=20000)
    assert k2 < k and R.peak_bytes(100, k2, 1000, 10000, 20000) <= 150000
    with pytest.raises(ValueError, match="cannot be met for 100 steps"):
        R.choose_interval("foreach", gluon_cf.MemoryBudget(40000), 100, 1000, 10000)
    R_auto = R.choose_interval("foreach", "auto", 10 ** 6, 1000, 10 ** 6)   # budget unmet
    assert R_auto == min(range(1, 2000), key=lambda k: R.peak_bytes(10 ** 6, k, 1000, 10 ** 6))


def test_batchnorm_under_training_is_refused():
    bn = gluon.nn.BatchNorm(in_channels=2)
    bn.initialize()
    x = mx.nd.ones((3, 4, 2))
    with pytest.raises(NotImplementedError, match=r"gluon_cf.foreach at .*test_remat.py:\d+: "
                                                  r"remat with a body that updates auxiliary"):
        with autograd.record():
            gluon_cf.foreach(lambda xt, s: (bn(xt), s), x, mx.nd.zeros((1,)), remat=True)


class _While(gluon.HybridBlock):
    """h <- tanh(W h + x) while the step count is below n (a loop var), at most 8 steps."""

    def __init__(self, remat, exact=False):
        super().__init__()
        self.remat, self.exact = remat, exact
        with self.name_scope():
            self.dense = gluon.nn.Dense(5, in_units=5)

    def hybrid_forward(self, F, h, x, n):
        def func(h, i):
            h = F.tanh(self.dense(h) + x)
            return h * 2, [h, i + 1]
        outs, (h, i) = gluon_cf.while_loop(lambda h, i: i < n, func, [h, F.zeros_like(n)],
                                           max_iterations=8, exact_length=self.exact,
                                           remat=self.remat)
        return outs, h


def _while_grads(remat, hybridize, steps, exact=False):
    mx.random.seed(3)
    net = _While(remat, exact)
    net.initialize()
    if hybridize:
        net.hybridize()
    h0 = mx.nd.random.normal(shape=(2, 5))
    x = mx.nd.random.normal(shape=(2, 5))
    h0.attach_grad()
    x.attach_grad()
    with autograd.record():
        outs, h = net(h0, x, mx.nd.array([steps]))
        loss = (outs ** 2).sum() + (h * 3).sum()
    loss.backward()
    return [loss.asnumpy(), h0.grad.asnumpy(), x.grad.asnumpy()] + \
        [p.grad().asnumpy() for p in net.collect_params().values()]


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("steps", [0, 1, 5, 8])
def test_while_loop_gradients_equal(hybridize, steps):
    if steps == 0 and not hybridize:
        pytest.skip("an eager loop of no step has no step outputs (NOTE [loops of no step])")
    want = _while_grads(False, hybridize, steps)
    for remat in (True, 2, 3, "auto", gluon_cf.MemoryBudget(1 << 20)):
        before = R.recomputed.steps
        got = _while_grads(remat, hybridize, steps)
        assert R.recomputed.steps - before == steps, remat
        for a, b in zip(want, got):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=str(remat))


def test_while_loop_exact_length_hybridized():
    want = _while_grads(False, True, 6, exact=True)
    got = _while_grads(2, True, 6, exact=True)
    for a, b in zip(want, got):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


class _Nested(gluon.HybridBlock):
    """An outer foreach over blocks of rows, an inner foreach over each block's rows, and a
    while_loop inside the inner body."""

    def __init__(self, outer, inner, innermost=None):
        super().__init__()
        self.outer, self.inner = outer, inner
        self.innermost = inner if innermost is None else innermost
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=3)

    def hybrid_forward(self, F, x, s):
        def inner_body(xt, s):
            _, (v,) = gluon_cf.while_loop(lambda v: v.sum() < 1e9, lambda v: (None, [v * 0.5]),
                                          [xt], max_iterations=2, remat=self.innermost)
            h = F.tanh(self.dense(s) + v)
            return h, h

        def outer_body(block, s):
            outs, s = gluon_cf.foreach(inner_body, block, s, remat=self.inner)
            return outs.sum(axis=0), s

        return gluon_cf.foreach(outer_body, x, s, remat=self.outer)


def test_nested_loops():
    hybridize = False   # hybridized: tests/test_remat_nesting.py, in a fresh process
    results = []
    combos = [(False, False, False), (True, False, False), (2, False, False),
              ("auto", False, False), (False, 2, False), (False, False, True),
              (True, 2, True), ("auto", True, 2)]   # inner ones without remat (remat.applies)
    for outer, inner, innermost in combos:
        mx.random.seed(4)
        net = _Nested(outer, inner, innermost)
        net.initialize()
        if hybridize:
            net.hybridize()
        x = mx.nd.random.normal(shape=(4, 3, 2, 3))
        s = mx.nd.random.normal(shape=(2, 3))
        x.attach_grad()
        s.attach_grad()
        with autograd.record():
            outs, last = net(x, s)
            loss = (outs ** 2).sum() + last.sum()
        loss.backward()
        results.append([loss.asnumpy(), x.grad.asnumpy(), s.grad.asnumpy()] +
                       [p.grad().asnumpy() for p in net.collect_params().values()])
    for got in results[1:]:
        for a, b in zip(results[0], got):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_remat_keeps_less_memory_in_a_fresh_process():
    """Peak RSS growth of one forward+backward of a hybridized LSTM scan (H=128, B=32, T=400):
    remat=True keeps far less than remat=False (loose bound; numbers in the README)."""
    code = textwrap.dedent("""
        import sys, mxnet as mx, gluon_cf
        from mxnet import autograd, gluon
        from gluon_cf.bench.memory import PeakRSS
        remat = {"False": False, "True": True}[sys.argv[1]]
        class Scan(gluon.HybridBlock):
            def __init__(self):
                super().__init__()
                with self.name_scope():
                    self.cell = gluon.rnn.LSTMCell(128, input_size=128)
            def hybrid_forward(self, F, x, h, c):
                out, st = gluon_cf.foreach(lambda xt, s: self.cell(xt, s), x, [h, c],
                                           remat=remat)
                return out, st[0]
        net = Scan(); net.initialize(); net.hybridize()
        h = mx.nd.zeros((32, 128))
        x = mx.nd.random.normal(shape=(8, 32, 128))
        x.attach_grad()
        with autograd.record():   # warm up: CachedOps built
            out, last = net(x, h, h)
            loss = out.sum() + last.sum()
        loss.backward(); mx.nd.waitall()
        x = mx.nd.random.normal(shape=(400, 32, 128))
        x.attach_grad()
        mx.nd.waitall()
        # (not getrusage's ru_maxrss: Linux carries the parent's peak over execve, so under
        # a large pytest process both runs measured 0)
        with PeakRSS() as peak:
            with autograd.record():
                out, last = net(x, h, h)
                loss = out.sum() + last.sum()
            loss.backward(); mx.nd.waitall()
        print(peak.growth // 1024)
    """)
    growth = {}
    for remat in ("False", "True"):
        done = subprocess.run([sys.executable, "-c", code, remat], capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        growth[remat] = int(done.stdout.split()[-1])   # kB
    assert growth["True"] * 2 < growth["False"], growth


def test_exported_graph_ignores_remat(tmp_path):
    """A saved graph keeps remat in the node spec; loading and inference are unaffected."""
    cell = _cell()
    net = _Scan(cell, True)
    net.hybridize()
    x, h = mx.nd.random.normal(shape=(5, 3, 4)), mx.nd.zeros((3, 6))
    want = net(x, h, h)[0].asnumpy()
    net.export(str(tmp_path / "scan"))
    loaded = gluon.SymbolBlock.imports(str(tmp_path / "scan-symbol.json"),
                                       ["data0", "data1", "data2"],
                                       str(tmp_path / "scan-0000.params"))
    np.testing.assert_allclose(loaded(x, h, h)[0].asnumpy(), want, rtol=1e-6)


def _loop_reading_a_recorded_value(remat, as_state, op):
    """z = dense(x) recorded before an eager loop whose body reads z (from its closure, or as
    a state passed through unchanged); z is also used after the loop."""
    dense = gluon.nn.Dense(4, in_units=4, flatten=False)
    dense.initialize(mx.init.Constant(0.3))
    rs = np.random.RandomState(0)
    x, s0 = mx.nd.array(rs.randn(1, 4)), mx.nd.array(rs.randn(1, 4))
    x.attach_grad()
    with autograd.record():
        z = dense(x)
        if op == "foreach":
            def body(y, states):
                zz = states[1] if as_state else z
                u = mx.nd.tanh(states[0] + y * zz)
                return u, [u, zz]
            out, states = gluon_cf.foreach(body, mx.nd.stack(x, x * 2), [s0, z * 1],
                                           remat=remat)
        else:
            def step(i, h, zz):
                u = mx.nd.tanh(h + (zz if as_state else z))
                return u, [i + 1, u, zz]
            out, states = gluon_cf.while_loop(lambda i, h, zz: i < 2, step,
                                              [mx.nd.zeros((1,)), s0, z * 1], max_iterations=2,
                                              remat=remat)[0], None
        loss = (out ** 2).sum() + (z * 0.9).sum()
    loss.backward()
    return [loss.asnumpy(), x.grad.asnumpy(), dense.weight.grad().asnumpy()]


@pytest.mark.parametrize("op", ["foreach", "while_loop"])
def test_eager_body_reading_a_value_recorded_before_the_loop_is_refused(op):
    """Its gradient would be lost (the user's backward clears its history before the loop's
    runs): silently wrong gradients before (NOTE [values recorded before a remat loop])."""
    with pytest.raises(NotImplementedError, match=r"gluon_cf\.%s at .*test_remat\.py:\d+: with "
                       r"remat, the body reads an array computed under autograd\.record\(\) "
                       r"before the loop" % op):
        _loop_reading_a_recorded_value(True, False, op)


@pytest.mark.parametrize("op", ["foreach", "while_loop"])
def test_a_value_recorded_before_the_loop_passed_as_a_state_has_its_gradient(op):
    """The refusal's advice works: the same value as a state, gradients those of remat=False."""
    for a, b in zip(_loop_reading_a_recorded_value(False, True, op),
                    _loop_reading_a_recorded_value(True, True, op)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_hybridized_remat_backward_merges_small_segments(monkeypatch):
    """remat=True over 12 steps of a small LSTM: the backward recomputes and backpropagates
    several steps per ``autograd.backward`` (NOTE [the engine's work in a remat backward] in
    ops/foreach_remat.py: one call per step cost a graph's passes and six zero fills each),
    its intermediates bounded by bytes; a cell whose step holds more than that bound still
    goes a step at a time. Gradients equal remat=False's (and every step is recomputed)."""
    from gluon_cf.ops import foreach_remat
    calls = []
    backward = mx.autograd.backward
    monkeypatch.setattr(mx.autograd, "backward",
                        lambda *a, **k: (calls.append(1), backward(*a, **k))[1])
    cell = _cell()
    x = mx.nd.random.normal(shape=(12, 3, 4))
    want = _grads(cell, x, False, True)
    del calls[:]
    before = R.recomputed.steps
    got = _grads(cell, x, True, True)
    assert R.recomputed.steps - before == 12
    for a, b in zip(want, got):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    # the node's own backward and the loop's: 12 steps in one span (16 at most)
    assert len(calls) == 2, len(calls)
    monkeypatch.setattr(foreach_remat, "MERGED_BYTES", 1)
    del calls[:]
    got = _grads(cell, x, True, True)
    assert len(calls) == 1 + 12, len(calls)
    for a, b in zip(want, got):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
