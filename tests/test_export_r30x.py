"""Round 30x (issue 24, items 2, 4 and 5) on loops of no step, collected rows and export.

* a while_loop of no step whose body concatenated a row with the ``gather_nd`` of an input of
  no row: MXNet's legacy inference read the 0 as unknown and summed it into a complete (1, 3)
  where the row is (1, 6), and the hybridized block gave (2, 1, 3) zero rows, silently (the
  exports (2, 1, 6)): now the rows are inferred only where a dim of 0 cannot change them
  (NOTE [a dim of 0 read as unknown]), else func's graph runs and fails at the gather_nd's
  line, hybridized and exported, whatever the earlier calls;
"""
import re
import warnings

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
    line = _line_of(_RowAndGatherNdOfAnInput, "body", 2)
    fresh = _RowAndGatherNdOfAnInput()
    fresh.hybridize()
    for block in (fresh, net):   # (a fresh block, then one that ran other shapes first)
        for arrays in fine + [empty] + fine[:1]:
            want = _gather_oracle(*arrays) if arrays is not empty else None
            if want is None:
                with pytest.raises(BlockZeroSizeError, match="gather_nd at .*" + line):
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
