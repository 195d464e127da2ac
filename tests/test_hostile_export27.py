"""Hostile round 27 (issue 24 items 2, 4-6) on export and dynamic shapes: the models of
``hostile_programs27.py`` run eager, hybridized (values and gradients) and exported
(``export_onnx`` through onnxruntime and ``save_artifact`` through ``load``), call histories
on blocks with values of run-time length, and what the round fixed:

* ``squeeze`` with no axis exported as ONNX's Squeeze of no axes, which drops every axis of
  1 at run time: a (n, 1) value of n = 1 became a scalar where MXNet keeps (1,), so
  ``F.sum(F.squeeze(x), axis=0, keepdims=True)`` gave () and ``F.expand_dims(F.squeeze(x),
  0)`` (1,) for MXNet's (1, 1), silently; a concat or stack of two failed in onnxruntime. A
  squeeze whose rank depends on a run-time axis being 1 declared the example's rank;
* a while_loop of no step filled its step outputs from a probe run of its body on the
  initial loop vars even when their shapes were planned: a body reading a row of a value of
  no row (``F.take`` of the kept rows) failed in onnxruntime where Gluon runs no step (the
  artifact always; export_onnx's model without onnxruntime's constant folding);
* ``take`` in mode 'raise' exported a Gather that counts a negative index from the end
  (MXNet refuses it): a row -1 read the last row, silently;
* a zero-size value computed in a block's own graph holding gluon_cf nodes (a slice keeping
  no row, summed) killed the process (SIGFPE in MXNet's CachedOp).
"""
import re
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest

import gluon_cf

import export_harness
import hostile_harness
import hostile_programs27 as P

FILES = [P.__file__]


def _session(model, optimized=True):
    import onnxruntime as ort
    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def _run(session, arrays):
    return session.run(None, dict(zip([i.name for i in session.get_inputs()], arrays)))


# ---- what this round fixed ----------------------------------------------------------------

_SQUEEZED = {
    "sum_keepdims": lambda F, x: F.sum(F.squeeze(x), axis=0, keepdims=True),
    "expand_dims": lambda F, x: F.expand_dims(F.squeeze(x), 0),
    "concat": lambda F, x: F.concat(F.squeeze(x), F.squeeze(x) * 2, dim=0),
    "stack": lambda F, x: F.stack(F.squeeze(x), F.squeeze(x) * 2, axis=0),
}


@pytest.mark.parametrize("opset", [12, 13])
def test_squeeze_of_a_run_time_axis_keeps_one_axis_as_mxnet(opset):
    """(n, 1) squeezed with no axis, exported with n dynamic: at n = 1 MXNet gives (1,),
    ONNX's Squeeze of no axes a scalar: () for (1,) and (1,) for (1, 1), silently, or
    onnxruntime's "Cannot concatenate scalars". Now equal to Gluon at n = 1, 2 and 5."""
    from gluon_cf.export import export_onnx
    for name, fn in _SQUEEZED.items():
        class Squeezed(mx.gluon.HybridBlock):
            def hybrid_forward(self, F, x):
                return fn(F, x)
        net = Squeezed()
        net.hybridize()
        session = _session(export_onnx(net, [mx.nd.ones((3, 1))], dynamic_axes={0: [0]},
                                       opset=opset))
        for n in (1, 2, 5):
            x = np.arange(1, n + 1, dtype=np.float32).reshape(n, 1)
            want = net(mx.nd.array(x)).asnumpy()
            got, = _run(session, [x])
            assert got.shape == want.shape, (name, n, got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("api", ["onnx", "artifact"])
def test_squeeze_whose_rank_follows_a_run_time_axis_is_refused_at_the_users_line(api,
                                                                                   tmp_path):
    """(n, 4, 1) squeezed with no axis: (n, 4), or (4,) at n = 1; the model declared rank 2
    and onnxruntime warned at n = 1. Refused at the squeeze's line, naming the axis to give."""
    from gluon_cf.export import export_onnx, save_artifact
    net = hostile_harness._make(P.SqueezeOfAxisThatMayBeOne)
    net.hybridize()
    with pytest.raises(NotImplementedError) as err:
        if api == "onnx":
            export_onnx(net, [mx.nd.ones((2, 4))], dynamic_axes={0: [0]})
        else:
            save_artifact(net, [mx.nd.ones((2, 4))], str(tmp_path / "m.onnx"),
                          dynamic_axes={0: [0]})
    line = hostile_harness.line_in(P.__file__, "F.squeeze(x.expand_dims(2))")
    assert re.match(re.escape(P.__file__) + r":%d: .*squeeze with no axis of a value of "
                    r"shape \(n, 4, 1\).*give squeeze the axes to drop \(axis=\(2,\)\)" % line,
                    str(err.value)), str(err.value)


def test_while_loop_of_no_step_never_runs_its_body_in_the_exported_model(tmp_path):
    """A while_loop over the kept count taking kept row i: with no row kept, the exported
    model ran the body once on the initial loop vars for its step outputs' shape (planned
    already) and failed ("indices element out of data bounds, idx=-1"): always in the
    artifact, in export_onnx's model when onnxruntime does not fold it away. Now equal to
    Gluon on every mask, both ways."""
    from gluon_cf.export import export_onnx, load, save_artifact
    cls = P.WhileOverKeptCountCondPicksRow
    inputs = P.PROGRAMS[cls]
    net = hostile_harness._make(cls)
    net.hybridize()
    session = _session(export_onnx(net, [mx.nd.array(a) for a in inputs[0]]),
                       optimized=False)
    save_artifact(net, [mx.nd.array(a) for a in inputs[0]], str(tmp_path / "m.onnx"))
    artifact = load(str(tmp_path / "m.onnx"))
    for arrays in inputs:
        want = [o.asnumpy() for o in net(*[mx.nd.array(a) for a in arrays])]
        for got in (_run(session, arrays), artifact(*arrays)):
            for g, w in zip(got, want):
                assert g.shape == w.shape
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


class _TakeRaiseInForeach(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x, rows):
        outs, _ = gluon_cf.foreach(lambda r, s: (F.take(x, r, mode="raise"), s), rows,
                                   [F.zeros((1,))])
        return outs


def test_take_in_raise_mode_refuses_a_negative_index_as_mxnet():
    """take(mode='raise') of row -1: MXNet refuses it ("take operator contains indices out
    of bound"; the hybridized block at the user's line); the exported Gather read the last
    row, silently. Now onnxruntime refuses it too; rows in range equal Gluon."""
    import onnxruntime as ort
    from gluon_cf.export import export_onnx
    net = _TakeRaiseInForeach()
    net.hybridize()
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    session = _session(export_onnx(net, [mx.nd.array(x), mx.nd.array([1, 2])],
                                   dynamic_axes={0: [0], 1: [0]}))
    got, = _run(session, [x, np.array([3, 0], np.float32)])
    np.testing.assert_array_equal(got, net(mx.nd.array(x), mx.nd.array([3, 0])).asnumpy())
    with pytest.raises(Exception):
        net(mx.nd.array(x), mx.nd.array([-1, 0])).asnumpy()
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidArgument,
                       match="indices element out of data bounds"):
        _run(session, [x, np.array([-1, 0], np.float32)])


_ZERO_SIZE_SCRIPT = '''
import mxnet as mx
import gluon_cf

class SliceThenForeach(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        inner = F.sum(F.slice(x, begin=(1, 0), end=(-1, 2)), axis=0)
        outs, _ = gluon_cf.foreach(lambda r, s: (r * 2, [s[0] + r]), x, [F.zeros((3,))])
        return inner, outs

net = SliceThenForeach()
net.hybridize()
for n, record in ((2, False), (8, False), (2, True), (5, True), (2, False)):
    x = mx.nd.ones((n, 3))
    x.attach_grad()
    try:
        with mx.autograd.record(record):
            out = net(x)
        if record:
            mx.autograd.backward(out)
        print("value", [o.shape for o in out], float(out[0].asnumpy().sum()), flush=True)
    except Exception as err:
        print("error", type(err).__name__, str(err).replace("\\n", " "), flush=True)
'''


def test_a_slice_keeping_no_row_in_a_blocks_graph_is_an_error_not_a_crash(tmp_path):
    """A block's graph holding a foreach and a slice of rows 1..-1 summed: 2 rows made a
    zero-size value in MXNet's CachedOp, and reading the result killed the process
    (Floating point exception). Now the ZeroSizeError naming the slice and the user's
    hybrid_forward on every such call, recorded or not, and the calls between work."""
    script = tmp_path / "zero_size.py"
    script.write_text(_ZERO_SIZE_SCRIPT)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("value", "error"))]
    assert [line.split()[0] for line in lines] == ["error", "value", "error", "value",
                                                   "error"], proc.stdout
    for line in lines[0::2]:
        assert re.search(r"BlockZeroSizeError gluon_cf: slice \(node '\w+'\) computes a "
                         r"zero-size array from inputs of shapes \(2, 3\).*%s:\d+" %
                         re.escape(str(script)), line), line
    assert lines[1] == "value [(2,), (8, 3)] 12.0" and lines[3] == "value [(2,), (5, 3)] 6.0"


# ---- the round's programs -------------------------------------------------------------------

# a sample of the programs (all of them: ~40 s), eager against hybridized with gradients,
# exported (equal to the hybridized block on every input list, or refused at the user's line)
EXPORTED = [P.TakeWrapInWhileBody, P.ReshapeCodesInWhileBody, P.PickWrapInForeachBody,
            P.WhereRowsInWhileBodySquareByChance, P.SequenceOpsInForeachOverBatch,
            P.MaskedRowsGruCellInForeachInCond, P.GreedyAttentionDecoderMaxFromData,
            P.WhileStepOutputsOfPlannedAndRunTimeShapes]


@pytest.mark.parametrize("cls", EXPORTED, ids=lambda c: c.__name__)
def test_export_equals_gluon(cls):
    result = export_harness.export_outcomes(cls, P.PROGRAMS[cls], FILES)
    assert result == {"onnx": ("equal", ""), "artifact": ("equal", "")}, result


HISTORY = [P.WhileOverKeptCountCondPicksRow, P.ForeachRowsInnerWhileCountFromRow,
           P.CondBranchesKeptVsAllRowsThenForeach]


@pytest.mark.parametrize("cls", HISTORY, ids=lambda c: c.__name__)
def test_call_history_never_changes_a_result(cls):
    """Issue 24 item 2: masks keeping 0..all rows, loops of data-given length, in a random
    order with malformed calls, recorded or not: each call equals the eager block's result,
    or a fresh hybridized block's (the same error), and a failed call leaves the block
    usable."""
    inputs = P.PROGRAMS[cls]
    hostile_harness.check_call_history(cls, inputs, hostile_harness._make,
                                       hostile_harness.eager_oracle(cls, inputs),
                                       (1e-4, 1e-5))
