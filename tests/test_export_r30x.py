"""Round 30x (issue 24, items 2, 4 and 5) on loops of no step, collected rows and export.

* a while_loop of no step whose body concatenated a row with the ``gather_nd`` of an input of
  no row: MXNet's legacy inference read the 0 as unknown and summed it into a complete (1, 3)
  where the row is (1, 6), and the hybridized block gave (2, 1, 3) zero rows, silently (the
  exports (2, 1, 6)): now the rows are inferred only where a dim of 0 cannot change them
  (NOTE [a dim of 0 read as unknown]), else func's graph runs and fails at the gather_nd's
  line, hybridized and exported, whatever the earlier calls;
* a converted ``for`` over kept rows collecting them, hybridized, refused a mask keeping none
  where eager and the exports give values (NOTE [a foreach of no step]);
* exported, a while_loop of exact length that ran no step gave rows of width 0 where the
  width was known only at run time, and the shape plan took MXNet's (1, 4) for a row of a
  gather_nd of kept rows concatenated to a row, (1, 8).
"""
import inspect

import mxnet as mx
import numpy as np
import pytest

import gluon_cf
from test_export_r28x import _runs


def _line_of(cls, fn_name, offset):
    code = next(c for c in cls.hybrid_forward.__code__.co_consts
                if getattr(c, "co_name", "") == fn_name)
    return r"test_export_r30x\.py:%d" % (code.co_firstlineno + offset)


class _RowAndGatherNdOfAnInput(mx.gluon.HybridBlock):
    """Step rows (1, 2 d): row i of x and the gather_nd of y's row 0."""
    def hybrid_forward(self, F, x, y, n):
        def body(i):
            r = F.take(x, i, mode="clip").reshape((1, -1))
            g = F.gather_nd(y, F.zeros((1, 1))).reshape((1, -1))
            return F.concat(r, g, dim=-1), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < n, body, [F.zeros((1,))], max_iterations=2)
        return outs


def _gather_case(rng, rows_y, steps, d=3):
    return [rng.uniform(-1, 1, (3, d)).astype(np.float32),
            rng.uniform(-1, 1, (rows_y, d)).astype(np.float32), np.array([steps], np.float32)]


def _gather_oracle(x, y, n):
    """numpy: the rows the steps give, then zero rows to max_iterations (2)."""
    steps = int(n[0])
    out = np.zeros((2, 1, 2 * x.shape[1]), np.float32)
    for i in range(min(steps, 2)):
        out[i, 0] = np.concatenate([x[min(i, len(x) - 1)], y[0]])
    return out


@pytest.fixture(scope="module")
def gather_runs(tmp_path_factory):
    net = _RowAndGatherNdOfAnInput()
    net.hybridize()
    example = _gather_case(np.random.RandomState(0), 2, 1)
    return net, _runs(net, example, {0: [0, 1], 1: [0, 1]}, tmp_path_factory.mktemp("g"))


def test_a_gather_nd_of_no_row_in_a_loop_of_no_step_is_refused_at_its_line(gather_runs):
    """Hybridized gave (2, 1, 3) zero rows, silently; the exports (2, 1, 6). Rows of y: the
    loop's zero rows are (2, 1, 2 d), equal to numpy's; no row of y: every path fails at the
    gather_nd's line, on every call whatever came before."""
    import onnxruntime as ort
    from gluon_cf.export import ArtifactError
    from gluon_cf.hybrid import BlockZeroSizeError
    net, runs = gather_runs
    rng = np.random.RandomState(1)
    fine = [_gather_case(rng, 2, 0), _gather_case(rng, 2, 2), _gather_case(rng, 1, 1, d=5),
            _gather_case(rng, 3, 0, d=5)]
    empty = _gather_case(rng, 0, 0)
    # (the loop's line since round 31x: func's graph, whose gather_nd of no row failed at
    # its line, is not run for a loop of no step, as MXNet's)
    line = _line_of(_RowAndGatherNdOfAnInput, "body", 4)
    fresh = _RowAndGatherNdOfAnInput()
    fresh.hybridize()
    for block in (fresh, net):   # (a fresh block, then one that ran other shapes first)
        for arrays in fine + [empty] + fine[:1]:
            want = _gather_oracle(*arrays) if arrays is not empty else None
            if want is None:
                with pytest.raises(BlockZeroSizeError, match="while_loop at .*" + line):
                    block(*[mx.nd.array(a) for a in arrays])
                continue
            got = block(*[mx.nd.array(a) for a in arrays]).asnumpy()
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for arrays in fine:
        for run in runs:
            got, = run(*arrays)
            assert got.shape == _gather_oracle(*arrays).shape
            np.testing.assert_allclose(got, _gather_oracle(*arrays), rtol=1e-5, atol=1e-6)
    for run, error in zip(runs, (ort.capi.onnxruntime_pybind11_state.InvalidArgument,
                                 ArtifactError)):
        with pytest.raises(error, match=r"loop of no step at .*" + line):
            run(*empty)


def test_a_gather_nd_row_loops_gradient_equals_eager():
    """Gradients of the stepped loop, hybridized, equal eager Gluon's (x's rows and y's)."""
    arrays = _gather_case(np.random.RandomState(4), 2, 2)
    grads = []
    for hybrid in (False, True):
        net = _RowAndGatherNdOfAnInput()
        if hybrid:
            net.hybridize()
        x, y, n = [mx.nd.array(a) for a in arrays]
        x.attach_grad()
        y.attach_grad()
        with mx.autograd.record():
            out = net(x, y, n)
            loss = (out * mx.nd.arange(12).reshape((2, 1, 6))).sum()
        loss.backward()
        grads.append((x.grad.asnumpy(), y.grad.asnumpy()))
    for eager, hybridized in zip(*grads):
        np.testing.assert_allclose(hybridized, eager, rtol=1e-5, atol=1e-6)


# ---- a converted for over kept rows, collecting them ------------------------------------------

class _CollectKeptRowsThenMean(mx.gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        items = [F.zeros((4,))]
        for r in F.contrib.boolean_mask(x, m):
            items.append(r * 2)
        return F.mean(F.stack(*items, axis=0), axis=0)


def _collect_oracle(x, m):
    """numpy: the mean of a zero row and twice each kept row."""
    return np.mean(np.concatenate([np.zeros((1, 4), np.float32), 2 * x[m > 0]]), axis=0)


def _mask_case(rng, flags):
    return [rng.uniform(-1, 1, (len(flags), 4)).astype(np.float32),
            np.array(flags, np.float32)]


def test_collected_kept_rows_of_a_mask_keeping_none_equal_eager_and_numpy(tmp_path):
    """Hybridized, the converted for over a mask keeping no row was refused ("at least one
    step is required") where eager Gluon and the exports give zeros: now its collected rows
    are rows of none of the inferred row shape, values and gradients as eager's, on every
    call whatever came before."""
    net = _CollectKeptRowsThenMean()
    net.hybridize()
    rng = np.random.RandomState(5)
    runs = _runs(net, _mask_case(rng, [1, 0, 1]), {0: [0], 1: [0]}, tmp_path)
    cases = [_mask_case(rng, f) for f in ([0, 0, 0, 0], [1, 1], [0, 1, 0, 0, 1], [0], [1, 0])]
    fresh = _CollectKeptRowsThenMean()
    fresh.hybridize()
    eager = _CollectKeptRowsThenMean()
    for arrays in cases + cases[:1]:
        want = _collect_oracle(*arrays)
        grads = []
        for block in (eager, net, fresh):
            x, m = [mx.nd.array(a) for a in arrays]
            x.attach_grad()
            with mx.autograd.record():
                out = block(x, m)
                loss = (out * mx.nd.array([1, 2, 3, 4])).sum()
            np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-5, atol=1e-6)
            if not arrays[1].any():   # (no row read: no graph to differentiate, as eager's)
                with pytest.raises(mx.MXNetError, match="not in a computational graph"):
                    loss.backward()
                continue
            loss.backward()
            grads.append(x.grad.asnumpy())
        # d loss / d x: each kept row gets 2 * [1, 2, 3, 4] / (1 + kept rows)
        kept = arrays[1] > 0
        want_grad = np.outer(kept, 2 * np.arange(1, 5) / (1 + kept.sum())).astype(np.float32)
        for grad in grads:
            np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-6)
        for run in runs:
            got, = run(*arrays)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class _CollectPositivePartsOfKeptRows(mx.gluon.HybridBlock):
    """A collected row of run-time width: no row shape to give rows of none."""
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        items = []
        for r in F.contrib.boolean_mask(x, m):
            items.append(F.contrib.boolean_mask(r, r > 0))
        return F.concat(F.zeros((1,)), *items, dim=0)


def test_collected_rows_of_run_time_width_over_no_row_refused_on_every_call():
    """Where the row's shape is known only by running the body, a mask keeping none is
    refused at the for's line on every call, whatever came before; rows kept still work."""
    from gluon_cf.errors import ZeroSizeError
    net = _CollectPositivePartsOfKeptRows()
    net.hybridize()
    rng = np.random.RandomState(6)
    lines, first = inspect.getsourcelines(_CollectPositivePartsOfKeptRows.hybrid_forward)
    line = r"test_export_r30x\.py:%d" % (
        first + next(k for k, text in enumerate(lines) if "for r in" in text))
    for flags in ([1, 0], [0, 0], [1, 1], [0, 0, 0]):
        x, m = _mask_case(rng, flags)
        if not any(flags):
            with pytest.raises(ZeroSizeError, match="the for loop at .*" + line):
                net(mx.nd.array(x), mx.nd.array(m))
            continue
        want = np.concatenate([[0]] + [r[r > 0] for r in x[m > 0]])
        np.testing.assert_allclose(net(mx.nd.array(x), mx.nd.array(m)).asnumpy(), want,
                                   rtol=1e-5, atol=1e-6)


# ---- loops of exact length that run no step, exported ----------------------------------------

class _ExactLengthRowsOfDynamicWidth(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x, n):
        def body(i):
            return F.take(x, i, mode="clip").reshape((1, -1)) * 2, [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < n, body, [F.zeros((1,))])
        return F.sum(outs, axis=0)


def test_an_exact_length_loop_of_no_step_exports_its_rows_width(tmp_path):
    """The Loop's empty scan outputs took the dims its body declares, 0 where unknown: the
    sum of no row of width 6 was (1, 0) from onnxruntime and load(), (1, 6) zeros in Gluon.
    numpy: the rows taken, doubled, summed."""
    net = _ExactLengthRowsOfDynamicWidth()
    net.hybridize()
    rng = np.random.RandomState(7)
    example = [rng.uniform(-1, 1, (3, 4)).astype(np.float32), np.array([2], np.float32)]
    runs = _runs(net, example, {0: [0, 1]}, tmp_path)
    for rows, width, steps in ((2, 6, 0), (4, 5, 0), (4, 3, 1), (3, 4, 3)):
        x = rng.uniform(-1, 1, (rows, width)).astype(np.float32)
        n = np.array([steps], np.float32)
        want = 2 * x[[min(i, rows - 1) for i in range(steps)]].sum(axis=0, keepdims=True) \
            if steps else np.zeros((1, width), np.float32)
        for run in [lambda *a: [net(*[mx.nd.array(v) for v in a]).asnumpy()]] + runs:
            got, = run(x, n)
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class _ExactLengthGatherNdOfKept(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)

        def body(i):
            r = F.take(x, i, mode="clip").reshape((1, -1))
            g = F.gather_nd(kept, F.zeros((1, 1))).reshape((1, -1))
            return F.concat(r, g, dim=-1), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < F.sum(m).reshape((1,)), body,
                                      [F.zeros((1,))])
        return F.sum(outs, axis=0)


def test_an_exact_length_loop_reading_a_gather_nd_of_kept_rows_fails_alike(tmp_path):
    """The shape plan inferred the step row (1, 4) (MXNet summed the gather_nd's unknown
    width as 0) where it is (1, 8): with no row kept the exports gave (1, 4) zeros, and the
    artifact (1, 0), where Gluon fails at the gather_nd's line: now all fail there; rows kept
    equal numpy."""
    import onnxruntime as ort
    from gluon_cf.export import ArtifactError
    from gluon_cf.hybrid import BlockZeroSizeError
    net = _ExactLengthGatherNdOfKept()
    net.hybridize()
    rng = np.random.RandomState(8)
    runs = _runs(net, _mask_case(rng, [1, 0, 1]), {0: [0], 1: [0]}, tmp_path)
    for flags in ([1, 1], [0, 1, 0, 0, 1]):
        x, m = _mask_case(rng, flags)
        kept = x[m > 0]
        want = np.concatenate([x[[min(i, len(x) - 1) for i in range(len(kept))]],
                               np.repeat(kept[:1], len(kept), axis=0)], axis=1).sum(axis=0)
        for run in [lambda *a: [net(*[mx.nd.array(v) for v in a]).asnumpy()]] + runs:
            got, = run(x, m)
            np.testing.assert_allclose(got, want[None], rtol=1e-5, atol=1e-6)
    x, m = _mask_case(rng, [0, 0, 0, 0])
    line = _line_of(_ExactLengthGatherNdOfKept, "body", 4)   # (the loop's: round 31x)
    with pytest.raises(BlockZeroSizeError, match="while_loop at .*" + line):
        net(mx.nd.array(x), mx.nd.array(m))
    for run, error in zip(runs, (ort.capi.onnxruntime_pybind11_state.InvalidArgument,
                                 ArtifactError)):
        with pytest.raises(error, match=r"loop of no step at .*" + line):
            run(x, m)
