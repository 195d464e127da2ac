"""Round 31x (issue 24, items 2, 4 and 5): a converted ``for`` over kept rows, collecting rows
of a width known only at run time, exported (NOTE [rows of none of a run-time width] in
``gluon_cf/ops/foreach_onnx.py``), and the user's own foreach over data of no row, exported.
"""
import inspect
import os

import mxnet as mx
import numpy as np
import pytest

import gluon_cf
from test_export_r28x import _runs
from test_export_r30x import _CollectPositivePartsOfKeptRows   # (a width only a run tells)


def _line(cls, text):
    lines, first = inspect.getsourcelines(cls.hybrid_forward)
    name = os.path.basename(inspect.getsourcefile(cls)).replace(".", r"\.")
    return r"%s:%d" % (name, first + next(k for k, t in enumerate(lines) if text in t))


class _CollectRowsOfRunTimeWidth(mx.gluon.HybridBlock):
    """A zero row of x's width, then twice each kept row: their sum."""
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        items = [F.zeros_like(F.take(x, F.zeros((1,))))]
        for r in F.contrib.boolean_mask(x, m):
            items.append(r.reshape((1, -1)) * 2)
        return F.sum(F.stack(*items, axis=0), axis=0)


def _rows_oracle(x, m):
    return 2 * x[m > 0].sum(axis=0, keepdims=True)


def _case(rng, rows, width, flags):
    return [rng.uniform(-1, 1, (rows, width)).astype(np.float32), np.array(flags, np.float32)]


def test_rows_of_run_time_width_over_a_mask_keeping_none_export_as_gluon(tmp_path):
    """x's width a dynamic axis: onnxruntime and load() raised 'indices element out of data
    bounds' (no user line) where the mask kept no row, where Gluon gives (1, w) zeros. Now
    every path equals numpy, on several widths and masks, whatever came before."""
    rng = np.random.RandomState(0)
    net = _CollectRowsOfRunTimeWidth()
    net.hybridize()
    runs = _runs(net, _case(rng, 3, 4, [1, 0, 1]), {0: [0, 1], 1: [0]}, tmp_path)
    eager = _CollectRowsOfRunTimeWidth()
    cases = [_case(rng, 2, 6, [0, 0]), _case(rng, 4, 5, [0, 1, 0, 0]), _case(rng, 1, 3, [0]),
             _case(rng, 3, 7, [1, 1, 1]), _case(rng, 5, 2, [0, 0, 0, 0, 0])]
    for arrays in cases + cases[:1]:
        want = _rows_oracle(*arrays)
        fresh = _CollectRowsOfRunTimeWidth()
        fresh.hybridize()
        for run in [lambda *a, b=b: [b(*[mx.nd.array(v) for v in a]).asnumpy()]
                    for b in (eager, net, fresh)] + runs:
            got, = run(*arrays)
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _positives(arrays):
    """As many positives in each row (width - 1): the collected rows stack."""
    x, m = arrays
    x = np.abs(x) + 0.1
    x[:, -1] *= -1
    return x, m


def test_rows_of_a_width_known_by_running_the_body_fail_at_the_for_line(tmp_path):
    """Where Gluon's inference cannot tell the rows (hybridized: ZeroSizeError at the for's
    line), the exports fail in a node named after that line; rows kept equal numpy."""
    import onnxruntime as ort
    from gluon_cf.errors import ZeroSizeError
    from gluon_cf.export import ArtifactError
    rng = np.random.RandomState(1)
    net = _CollectPositivePartsOfKeptRows()
    net.hybridize()
    runs = _runs(net, _positives(_case(rng, 3, 4, [1, 0, 1])), {0: [0, 1], 1: [0]}, tmp_path)
    line = _line(_CollectPositivePartsOfKeptRows, "for r in")
    body_line = _line(_CollectPositivePartsOfKeptRows, "items.append")   # (its first op's)
    for arrays in (_case(rng, 2, 5, [1, 1]), _case(rng, 3, 3, [0, 0, 0]),
                   _case(rng, 4, 2, [0, 1, 0, 1])):
        x, m = _positives(arrays)
        if not m.any():
            with pytest.raises(ZeroSizeError, match="the for loop at .*" + line):
                net(mx.nd.array(x), mx.nd.array(m))
            for run, error in zip(runs, (ort.capi.onnxruntime_pybind11_state.InvalidArgument,
                                         ArtifactError)):
                with pytest.raises(error, match=r"no_step_gives_no_output_shape \(.*" +
                                   body_line):
                    run(x, m)
            continue
        want = np.concatenate([[0]] + [r[r > 0] for r in x[m > 0]])
        for run in [lambda *a: [net(*[mx.nd.array(v) for v in a]).asnumpy()]] + runs:
            got, = run(x, m)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class _UsersForeachOfFixedRows(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        outs, h = gluon_cf.foreach(lambda r, h: (r * 2, h + r), kept, F.zeros((3,)))
        return outs, h


def test_the_users_foreach_over_no_row_fails_exported_as_hybridized(tmp_path):
    """The user's own foreach refuses data of no row hybridized (as MXNet's); its export gave
    (0, 3) rows and the initial state there (a value no Gluon mode gives): now it fails at
    the foreach's line; rows kept equal numpy."""
    import onnxruntime as ort
    from gluon_cf.export import ArtifactError
    rng = np.random.RandomState(2)
    net = _UsersForeachOfFixedRows()
    net.hybridize()
    runs = _runs(net, _case(rng, 3, 3, [1, 0, 1]), {0: [0], 1: [0]}, tmp_path)
    line = _line(_UsersForeachOfFixedRows, "outs, h = gluon_cf.foreach")
    x, m = _case(rng, 2, 3, [0, 0])
    with pytest.raises(ValueError, match="data has length 0"):
        net(mx.nd.array(x), mx.nd.array(m))
    for run, error in zip(runs, (ort.capi.onnxruntime_pybind11_state.InvalidArgument,
                                 ArtifactError)):
        with pytest.raises(error, match=r"no_step_gives_no_output_shape \(.*" + line):
            run(x, m)
    x, m = _case(rng, 4, 3, [0, 1, 1, 0])
    kept = x[m > 0]
    for run in runs:
        outs, h = run(x, m)
        np.testing.assert_allclose(outs, 2 * kept, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(h, kept.sum(axis=0), rtol=1e-5, atol=1e-6)


# ---- while_loops of no step whose rows only running func could tell ---------------------------

class _KeptPlusT(mx.gluon.HybridBlock):
    """A step row ``kept + t``: inference reads kept's 0 rows as unknown and answers t's."""
    def hybrid_forward(self, F, x, m, t):
        kept = F.contrib.boolean_mask(x, m)
        outs, _ = gluon_cf.while_loop(lambda i: i < F.sum(m).reshape((1,)),
                                      lambda i: (kept + t, [i + 1]), [F.zeros((1,))],
                                      max_iterations=3)
        return outs


def _kept_plus_t_oracle(x, m, t):
    """numpy: ``kept + t`` for each step (as many as kept rows, here 2 = t's rows), zeros
    after, up to 3 rows."""
    kept, out = x[m > 0], np.zeros((3,) + t.shape, np.float32)
    for i in range(min(len(kept), 3)):
        out[i] = kept + t
    return out


def test_a_no_step_row_inferred_only_with_the_0_read_as_unknown_is_refused(tmp_path):
    """kept (0, 4) + t (2, 4) infers (2, 4) with the 0 read as unknown and made 2; the loop of
    no step gave (3, 2, 4) zeros hybridized and exported, where a step's add has no shape.
    Now refused at the loop's line on every call, whatever came before, in all three; two
    rows kept equal numpy."""
    import onnxruntime as ort
    from gluon_cf.errors import ZeroSizeError
    from gluon_cf.export import ArtifactError
    rng = np.random.RandomState(3)
    t = rng.uniform(-1, 1, (2, 4)).astype(np.float32)
    net = _KeptPlusT()
    net.hybridize()
    first = [rng.uniform(-1, 1, (3, 4)).astype(np.float32), np.array([1, 0, 1], np.float32), t]
    runs = _runs(net, first, {0: [0], 1: [0]}, tmp_path)
    line = _line(_KeptPlusT, "outs, _ = gluon_cf.while_loop")
    cases = [[rng.uniform(-1, 1, (len(f), 4)).astype(np.float32), np.array(f, np.float32), t]
             for f in ([1, 1, 0], [0, 0, 0], [0, 1, 0, 1], [0], [1, 1])]
    fresh = _KeptPlusT()
    fresh.hybridize()
    for block in (fresh, net):
        for arrays in cases + cases[:2]:
            if not arrays[1].any():
                with pytest.raises(ZeroSizeError, match="while_loop at .*" + line):
                    block(*[mx.nd.array(a) for a in arrays])
                continue
            got = block(*[mx.nd.array(a) for a in arrays]).asnumpy()
            np.testing.assert_allclose(got, _kept_plus_t_oracle(*arrays), rtol=1e-5, atol=1e-6)
    for arrays in cases:
        for run, error in zip(runs, (ort.capi.onnxruntime_pybind11_state.InvalidArgument,
                                     ArtifactError)):
            if not arrays[1].any():
                with pytest.raises(error, match=r"loop of no step at .*" + line):
                    run(*arrays)
                continue
            got, = run(*arrays)
            np.testing.assert_allclose(got, _kept_plus_t_oracle(*arrays), rtol=1e-5, atol=1e-6)


class _StepOfPositivesOfAKeptRow(mx.gluon.HybridBlock):
    """A step row whose width only its values tell: a boolean_mask of kept row 0."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)

        def body(i):
            row = F.take(kept, F.zeros((1,)), mode="clip").reshape((-1,))
            return F.contrib.boolean_mask(row, row > 0).reshape((1, -1)), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < F.sum(m).reshape((1,)), body,
                                      [F.zeros((1,))], max_iterations=2)
        return outs


def test_a_loop_of_no_step_never_runs_funcs_graph():
    """Its step rows' shape is known only by running func: hybridized, func's graph ran once
    on the initial vars for it (MXNet never runs func for no step) and gave zero rows shaped
    by that run. Now refused at the loop's line, on every call; steps taken equal numpy."""
    from gluon_cf.errors import ZeroSizeError
    net = _StepOfPositivesOfAKeptRow()
    net.hybridize()
    line = _line(_StepOfPositivesOfAKeptRow, "outs, _ = gluon_cf.while_loop")
    x = np.array([[1, -1, 2], [3, 4, -5], [-1, 2, 2]], np.float32)
    for flags in ([0, 0, 0], [1, 0, 1], [0, 0, 0], [0, 1, 0]):
        m = np.array(flags, np.float32)
        if not m.any():
            with pytest.raises(ZeroSizeError, match="while_loop at .*" + line):
                net(mx.nd.array(x), mx.nd.array(m))
            continue
        row = x[m > 0][0]
        want = np.zeros((2, 1, (row > 0).sum()), np.float32)
        want[:min(2, int(m.sum()))] = row[row > 0]
        np.testing.assert_allclose(net(mx.nd.array(x), mx.nd.array(m)).asnumpy(), want,
                                   rtol=1e-5, atol=1e-6)
