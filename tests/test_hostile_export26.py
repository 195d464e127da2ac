"""Hostile round 26x (issue 24 items 2, 4-6) on export and dynamic shapes: the models of
``hostile_programs26x.py`` run plain, eager, hybridized and exported (``export_onnx`` through
onnxruntime and ``save_artifact`` through ``load``), call histories on blocks with values of
run-time length, and what the round fixed:

* a length clipped to a constant (a sequence truncated to 8 steps) before an operator that
  refuses the size 1 (a width-3 convolution) was declared static by the shape plan: an output
  declared (1, 2, 6) for every length, and a loop body reading such a value failed in
  onnxruntime (NOTE [dims agreeing by chance]);
* a model taking even lengths only (rows two by two) was refused, "the model's shapes do not
  allow the dynamic axes to change"; the refusal of a model that takes no other length named
  no line of the user's (NOTE [growths a model takes]).
"""
import re

import mxnet as mx
import numpy as np
import pytest

import gluon_cf

import export_harness
import hostile_harness
import hostile_programs26x as P
import hostile_programs26x_b as B
from test_hostile_export23 import cli  # noqa: F401 - the CLI's main, a fixture

FILES = [P.__file__, B.__file__]


def _export(net, arrays, axes):
    from gluon_cf.export import export_onnx
    return export_onnx(net, [mx.nd.array(a, dtype=a.dtype) for a in arrays], dynamic_axes=axes)


def _dims(values):
    return [[d.dim_value if d.HasField("dim_value") else None
             for d in v.type.tensor_type.shape.dim] for v in values]


# ---- what this round fixed ----------------------------------------------------------------

@pytest.mark.parametrize("cls", [P.TruncateToEightThenConv, B.TruncateTo32ThenWideConv],
                         ids=lambda c: c.__name__)
def test_a_length_clipped_before_an_operator_refusing_one_step_is_not_declared_static(cls):
    """Truncated to 8 steps then convolved (width 3): the plan's runs at 10, 13 and 1031
    steps all give 6 steps out and the run at 1 step fails, so the output was declared
    (1, 2, 6); onnxruntime gave 3 steps for 5 ("Expected shape from model of {1,2,6} does
    not match"). The smallest length the model takes (3) now shows the clip; so does 24 for
    a clip to 32 before a width-20 convolution."""
    net = hostile_harness._make(cls)
    net.hybridize()
    model = _export(net, (P.PROGRAMS.get(cls) or B.PROGRAMS[cls])[0], {0: [2]})
    assert [dims[:2] for dims in _dims(model.graph.output)] == [[1, 2 if cls is
                                                                P.TruncateToEightThenConv
                                                                else 1]]
    assert _dims(model.graph.output)[0][2] is None


@pytest.mark.parametrize("cls", [P.TruncatedMemoryPooledInForeach, P.EvenPairsReshape],
                         ids=lambda c: c.__name__)
def test_export_equals_gluon_where_it_failed(cls):
    """A foreach step pooling (width 3) its scores over memory truncated to 8 rows: its
    output was declared 6 columns and onnxruntime failed on 5 rows of memory; rows taken
    two by two (an even length) were refused. Both equal Gluon on every length now."""
    result = export_harness.export_outcomes(cls, P.PROGRAMS[cls], FILES)
    assert result == {"onnx": ("equal", ""), "artifact": ("equal", "")}, result


class _AddsAFixedTable(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        return x + F.ones((5, 2))


@pytest.mark.parametrize("api", ["onnx", "artifact"])
def test_a_model_taking_no_other_length_is_refused_at_the_users_line(api, tmp_path):
    """A (5, 2) input added to a (5, 2) table, exported with its rows dynamic: refused (no
    growth runs), the message now led by the user's line of the add."""
    from gluon_cf.export import export_onnx, save_artifact
    net = _AddsAFixedTable()
    net.hybridize()
    with pytest.raises(ValueError) as err:
        if api == "onnx":
            export_onnx(net, [mx.nd.ones((5, 2))], dynamic_axes={0: [0]})
        else:
            save_artifact(net, [mx.nd.ones((5, 2))], str(tmp_path / "m.onnx"),
                          dynamic_axes={0: [0]})
    called = "export_onnx" if api == "onnx" else "save_artifact"
    assert re.match(re.escape(__file__) + r":\d+: %s: the model's shapes do not "
                    r"allow the dynamic axes" % called, str(err.value)), str(err.value)


class _TopkOfKeptRows(mx.gluon.HybridBlock):
    def __init__(self, ret_typ, ascend):
        super().__init__()
        self.ret_typ, self.ascend = ret_typ, ascend

    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        out = F.topk(kept, axis=0, k=0, ret_typ=self.ret_typ, is_ascend=self.ascend,
                     dtype="int32" if self.ascend else "float32")
        return out if self.ret_typ == "both" else [out]


@pytest.mark.parametrize("ascend", [False, True])
@pytest.mark.parametrize("ret_typ", ["value", "indices", "both", "mask"])
def test_topk_of_every_kept_row_exports(ret_typ, ascend):
    """topk with k=0 (every element, sorted) over boolean_mask's rows, a length known at
    run time: refused ("topk with k < 1 (all elements) along an axis whose length is known
    only at run time"); now TopK with K read at run time, equal to Gluon (values, int32 and
    float32 indices, masks) for 5, 1 and 6 rows kept."""
    import onnxruntime as ort
    net = _TopkOfKeptRows(ret_typ, ascend)
    net.hybridize()
    rng = np.random.RandomState(0)
    calls = [[rng.rand(6, 3).astype(np.float32), np.array(m, np.float32)]
             for m in ([1, 0, 1, 1, 1, 1], [0, 0, 1, 0, 0, 0], [1] * 6)]
    model = _export(net, calls[0], None)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for arrays in calls:
        want = [w.asnumpy() for w in net(*[mx.nd.array(a) for a in arrays])]
        got = session.run(None, dict(zip(names, arrays)))
        assert [(g.dtype, g.shape) for g in got] == [(w.dtype, w.shape) for w in want]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


# ---- the round's programs -------------------------------------------------------------------

# a sample of the programs (all of them: ~20 s): exported, equal to the hybridized block on
# every input list, or refused at the user's line
EXPORTED = [P.MaskedRowsTruncatedThenConv, P.StridedSliceStepTen, P.ReshapeCodesOnDynamicAxis,
            P.ReshapeMinusOneInForeachBody, P.TruncateConvThenSortAll,
            P.IndexCopyInForeachWritesStepRows, P.IndexCopyOfMaskedRows,
            P.Float16ForeachRunningSum, P.Float64WhileNewtonSteps, P.CondInForeachInWhile,
            B.MaskedRowsReshapedInWhileBody, B.SequenceLastOfTruncatedInForeach,
            B.WindowOfRunTimeLengthInForeach, B.FirstFourMemoryRowsInWhile,
            B.TopkTwoOfClippedRowsInForeach, B.Int64SequenceKeepAbove,
            B.IndexCopyInForeachSameRowsEachStep]
REFUSED = {B.RecursionOverMaskedRowCount: r"hostile_programs26x_b\.py:\d+: export_onnx: "
                                          r"recursion node .*save_artifact"}


@pytest.mark.parametrize("cls", EXPORTED + list(REFUSED), ids=lambda c: c.__name__)
def test_export_equals_gluon_or_refuses_at_the_users_line(cls):
    inputs = P.PROGRAMS.get(cls) or B.PROGRAMS[cls]
    result = export_harness.export_outcomes(cls, inputs, FILES)
    if cls in REFUSED:
        assert result["onnx"][0] == "refused" and \
            re.search(REFUSED[cls], result["onnx"][1], re.S), result
        assert result["artifact"] == ("equal", ""), result
        return
    assert result == {"onnx": ("equal", ""), "artifact": ("equal", "")}, result
    # every output dim the model declares is the one onnxruntime computes (a dim declared
    # static by chance is declared wrong: NOTE [dims agreeing by chance])
    import onnxruntime as ort
    net = hostile_harness._make(cls)
    net.hybridize()
    model = _export(net, inputs[0], export_harness.dynamic_axes(inputs))
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for arrays in inputs:
        for declared, got in zip(_dims(model.graph.output),
                                 session.run(None, dict(zip(names, arrays)))):
            assert len(declared) == got.ndim and all(
                d in (None, n) for d, n in zip(declared, got.shape)), (declared, got.shape)


HISTORY = [P.IndexCopyOfMaskedRows, B.MaskedSumInWhileBody, B.MaskedRowsPerForeachStep,
           B.ExactLoopThenSumOfSteps, B.DenseOfMaskedRowsInWhile,
           B.ExactLoopOverKeptRowsThenConcat, B.RecursionOverMaskedRowCount]


@pytest.mark.parametrize("cls", HISTORY, ids=lambda c: c.__name__)
def test_call_history_never_changes_a_result(cls):
    """Issue 24 item 2: empty masks, zero-step loops and zero-row values in bodies and
    recursion, in a random order with malformed calls, recorded or not: each call equals
    plain MXNet's eager result, or a fresh block's (the same error), and a failed call leaves
    the block usable."""
    inputs = P.PROGRAMS.get(cls) or B.PROGRAMS[cls]
    hostile_harness.check_call_history(cls, inputs, hostile_harness._make,
                                       hostile_harness.eager_oracle(cls, inputs),
                                       getattr(cls, "TOL", (1e-4, 1e-5)))


@pytest.mark.parametrize("cls", [P.TruncateToEightThenConv, P.IndexCopyOfMaskedRows,
                                 B.WindowOfRunTimeLengthInForeach], ids=lambda c: c.__name__)
def test_cli_converts_and_runs_equal_to_gluon(cls, tmp_path, cli):
    """Symbol files ``convert``ed by the CLI (run-time axes named) and ``run`` on every input
    list: equal to Gluon."""
    inputs = P.PROGRAMS.get(cls) or B.PROGRAMS[cls]
    net = hostile_harness._make(cls)
    net.hybridize()
    model = export_harness.cli_convert(cli, tmp_path, net, inputs)
    export_harness.assert_cli_runs_equal(cli, tmp_path, model, net, inputs)


class _ReshapeCodePastTheAxes(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        outs, _ = gluon_cf.foreach(lambda r, s: (r.reshape((-3, 0)), s), x, [F.zeros((1,))])
        return outs


def test_a_body_operators_failed_check_names_its_line_and_what_failed():
    """A foreach step's ``r.reshape((-3, 0))`` of 2-D rows (a 0 code past the merged axes):
    a ValueError at the block's hybrid_forward quoting "(Error in operator
    _reshapecodepasttheaxes0_reshape0:)", with nothing after it (MXNet's check carries only
    its condition). Now the OperatorShapeError at the step's line naming Reshape and the
    check, on every call; then 3-D rows run (NOTE [a body's operator named by a block's
    error])."""
    from gluon_cf.graph.operator_errors import OperatorShapeError
    net = _ReshapeCodePastTheAxes()
    net.hybridize()
    line = hostile_harness.line_in(__file__, "r.reshape((-3, 0))")
    for _ in range(2):
        with pytest.raises(OperatorShapeError) as err:
            net(mx.nd.ones((2, 6, 4)))
        assert re.match(re.escape(__file__) + r":%d: Reshape \(node '\w+'\) refused its "
                        r"inputs \(Error in operator \w+: its check src_idx < dshape_len "
                        r"\(2 vs\. 2\) failed\)" % line, str(err.value)), str(err.value)
    assert net(mx.nd.ones((2, 3, 4, 5))).shape == (2, 12, 5)
