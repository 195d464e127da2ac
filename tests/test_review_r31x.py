"""Review of round 31x (h31x, merged as 2e1e8ec): a hybridized while_loop of no step whose step
shapes only running func tells was refused at its line on every call, also where no input has
a dim of 0 (a counter past its bound): a ``while`` nested in an autograph ``while``, or a step
output of a boolean_mask's rows, ran on main before the merge and eagerly, and was refused
(hybridized and in both exports). And a list a tensor loop appends to, holding earlier items
of another shape (``items = [F.zeros((1,))]; for r in x: items.append(r)``), gave hybridized
an array whose ``.shape`` was the earlier items' (1,) and whose read raised MXNet's concat
error naming no line; its export raised that error too. Oracles: numpy, eager Python.
"""
import inspect
import os

import mxnet as mx
import numpy as np
import pytest

import gluon_cf
from test_export_r28x import _runs

W = 4


def _line(cls, text):
    lines, first = inspect.getsourcelines(cls.hybrid_forward)
    name = os.path.basename(inspect.getsourcefile(cls)).replace(".", r"\.")
    return r"%s:%d" % (name, first + next(k for k, t in enumerate(lines) if text in t))


class _WhileInAWhileOfACount(mx.gluon.HybridBlock):
    """Per outer step i (n of them), the first two rows of x, collected by an inner while,
    times i."""
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = [F.zeros((2, W))]
        i = F.zeros((1,))
        while i < n:
            inner = []
            j = F.zeros((1,))
            while j < 2:
                inner.append(F.take(x, j).reshape((-1,)))
                j = j + 1
            outs.append(F.stack(*inner) * i)
            i = i + 1
        return F.concat(*outs, dim=0)


def _nested_oracle(x, n):
    return np.concatenate([np.zeros((2, W), np.float32)] + [x[:2] * i for i in range(n)])


class _MaskedRowsOfACount(mx.gluon.HybridBlock):
    """n times, the rows of x whose first entry is positive, times the step's number."""
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = [F.zeros((2, W))]
        i = F.zeros((1,))
        while i < n:
            outs.append(F.contrib.boolean_mask(x, x[:, 0] > 0) * i)
            i = i + 1
        return F.concat(*outs, dim=0)


def _masked_oracle(x, n):
    return np.concatenate([np.zeros((2, W), np.float32)] +
                          [x[x[:, 0] > 0] * i for i in range(n)])


def _cases():
    rng = np.random.RandomState(31)
    x = rng.uniform(-1, 1, (3, W)).astype(np.float32)
    x[:, 0] = [0.5, -0.5, 0.25]
    return [[x, np.array([n], np.float32)] for n in (2, 0, 3, 0, 1)]


@pytest.mark.parametrize("cls, oracle", [(_WhileInAWhileOfACount, _nested_oracle),
                                         (_MaskedRowsOfACount, _masked_oracle)],
                         ids=["nested_while", "masked_rows"])
def test_a_while_of_a_count_past_its_bound_gives_eagers_rows_everywhere(cls, oracle, tmp_path):
    """A count of 0 (no input has a dim of 0): hybridized, round 31x raised 'the loop runs no
    step here' at the outer while's line, and onnxruntime and load() failed in its guard,
    where eager gives the first item; now func's graph runs once for the step shapes (as on
    main before round 31x): values and gradients equal numpy's at counts 2, 0, 3, 0, 1."""
    net = cls()
    net.hybridize()
    cases = _cases()
    runs = _runs(net, cases[0], None, tmp_path)
    eager = cls()
    for x, n in cases:
        want = oracle(x, int(n[0]))
        weights = np.random.RandomState(int(n[0])).uniform(-1, 1, want.shape)
        for block in (eager, net):
            xs = mx.nd.array(x)
            xs.attach_grad()
            with mx.autograd.record():
                got = block(xs, mx.nd.array(n))
                loss = (got * mx.nd.array(weights)).sum()
            assert got.shape == want.shape
            np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5, atol=1e-6)
            if not n[0]:
                continue     # (eagerly no value reads x: MXNet's backward refuses)
            loss.backward()
            grad = np.zeros_like(x)     # d sum(y * weights) / dx, from the oracle's rows
            kept = np.arange(2) if cls is _WhileInAWhileOfACount else \
                np.flatnonzero(x[:, 0] > 0)
            for step in range(int(n[0])):
                first = 2 + step * len(kept)
                grad[kept] += step * weights[first:first + len(kept)]
            np.testing.assert_allclose(xs.grad.asnumpy(), grad, rtol=1e-5, atol=1e-6)
        for run in runs:
            got, = run(x, n)
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class _EarlierItemOfAnotherShape(mx.gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        items = [F.zeros((1,))]
        for r in x:
            items.append(r)
        return F.concat(*items, dim=0)


def test_earlier_items_of_another_shape_are_refused_at_the_loops_line_before_a_value():
    """Eagerly (13,) (numpy's concat); hybridized the call returned an array whose shape was
    (1,), its read raising MXNet's concat error with no line; export_onnx and save_artifact
    raised that error. Now each refuses at the loop's line, before any value."""
    from gluon_cf.autograph import AutographError
    from gluon_cf.export import export_onnx, save_artifact
    x = np.random.RandomState(7).uniform(-1, 1, (4, 3)).astype(np.float32)
    eager = _EarlierItemOfAnotherShape()(mx.nd.array(x)).asnumpy()
    np.testing.assert_allclose(eager, np.concatenate([[0]] + list(x)), rtol=1e-6)
    line = _line(_EarlierItemOfAnotherShape, "for r in x")
    net = _EarlierItemOfAnotherShape()
    net.hybridize()
    for call in (lambda: net(mx.nd.array(x)), lambda: export_onnx(net, [mx.nd.array(x)]),
                 lambda: save_artifact(net, [mx.nd.array(x)], os.devnull)):
        with pytest.raises(AutographError, match=r"^[^\n]*%s: for r in x: a list the loop on "
                           r"a tensor here appends to holds items of other shapes" % line):
            call()
    with pytest.raises(AutographError, match=line):   # (every call)
        net(mx.nd.array(x[:2]))


class _ItemsJoinedAfterTheLoop(mx.gluon.HybridBlock):
    """The refusal's advice: the list started empty, the other array joined after the loop."""
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r)
        return F.concat(F.zeros((1,)), *items, dim=0)


def test_the_refusals_advice_gives_eagers_values_and_gradients(tmp_path):
    x = np.random.RandomState(8).uniform(-1, 1, (4, 3)).astype(np.float32)
    net = _ItemsJoinedAfterTheLoop()
    net.hybridize()
    runs = _runs(net, [x], {0: [0]}, tmp_path)
    for rows in (4, 2, 1):
        want = np.concatenate([[0]] + list(x[:rows]))
        for block in (_ItemsJoinedAfterTheLoop(), net):
            xs = mx.nd.array(x[:rows])
            xs.attach_grad()
            with mx.autograd.record():
                got = block(xs)
                (got * mx.nd.arange(got.shape[0])).sum().backward()
            np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(xs.grad.asnumpy().ravel(), np.arange(1, 3 * rows + 1),
                                       rtol=1e-5)
        for run in runs:
            got, = run(x[:rows])
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class _IntegersOverKeptRows(mx.gluon.HybridBlock):
    """12 divided (as integers) by each kept row, collected after a zero row of x's width."""
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        items = [F.zeros_like(F.take(x, F.zeros((1,)))).reshape((-1,))]
        for r in F.contrib.boolean_mask(x, m):
            items.append(F.broadcast_div(F.ones_like(r) * 12, r))
        return F.stack(*items).sum(axis=0)


def test_a_body_dividing_integers_by_its_row_exports_rows_of_none(tmp_path):
    """x's width a dynamic axis, no row kept: the export's probe step ran the body on a row
    of zeros, and onnxruntime and load() failed in 'Integer division by zero' (no user
    line) where Gluon gives the zero row; the probe's row is ones now (NOTE [rows of none of
    a run-time width]). Every path equals numpy's integer division."""
    cases = [[np.array([[1, 2, 3, 4], [2, 3, 4, 6], [3, 3, 3, 3]], np.int32),
              np.array([1, 0, 1], np.float32)],
             [np.array([[1, 2, 3], [2, 3, 4]], np.int32), np.array([0, 0], np.float32)],
             [np.array([[5, 6], [1, 2], [3, 4], [4, 4]], np.int32),
              np.array([0, 1, 0, 1], np.float32)]]
    net = _IntegersOverKeptRows()
    net.hybridize()
    runs = _runs(net, cases[0], {0: [0, 1], 1: [0]}, tmp_path)
    for x, m in cases:
        want = (12 // x[m > 0]).sum(axis=0) if m.any() else np.zeros(x.shape[1], np.int32)
        blocks = [_IntegersOverKeptRows(), net]
        for got in [b(mx.nd.array(x, dtype="int32"), mx.nd.array(m)).asnumpy()
                    for b in blocks] + [run(x, m)[0] for run in runs]:
            assert got.dtype == np.int32
            np.testing.assert_array_equal(got, want)
