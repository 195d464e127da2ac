"""Issue 24 items 4-6, session 25: the models of ``hostile_programs25x.py``,
``hostile_programs25x_nested.py`` and ``hostile_programs25x_trees.py`` (greedy decoders with a
tensor stop, beam search with back-pointers and length penalties, a pointer network, attention
decoders over memory of run-time length, foreach with states of several shapes and dtypes,
Viterbi and CTC recurrences, nested loops, conds of other sizes followed by loops, layers and
RNN cells in loop bodies, zero-step loops, gluon_cf.models' recursive models and users'
recursive functions) exported:

* ``export_onnx`` (onnxruntime) and ``save_artifact`` (``load``) equal the hybridized block on
  every input list (lengths, masks, counts of no step) at 1e-5, or refuse at the user's line
  with the reason and what to do;
* exported to symbol files, the CLI converts and runs them equal to Gluon, and a run it cannot
  do prints one line.
"""
import re

import mxnet as mx
import numpy as np
import pytest

import gluon_cf

import export_harness
import hostile_programs25x as A
import hostile_programs25x_more as D
import hostile_programs25x_nested as B
import hostile_programs25x_trees as C
from hostile_harness import _make as make
from test_hostile_export23 import cli  # noqa: F401 - the CLI's main, a fixture

FILES = [A.__file__, B.__file__, C.__file__, D.__file__]
PROGRAMS = {**A.PROGRAMS, **B.PROGRAMS, **C.PROGRAMS, **D.PROGRAMS}

_LOWERING = r"cannot be lowered to standard ONNX loops: .*hostile_programs25x_trees\.py:\d+" \
    r".*save_artifact"
# What export_onnx refuses, at the user's line, with the reason and what to do (save_artifact
# runs them).
REFUSED = {
    # MXNet's own foreach: the refusal says to call gluon_cf.foreach, which exports as Scan
    D.MxnetContribForeachInBlock: {api: r"hostile_programs25x_more\.py:\d+: .*F\.contrib\."
                                        r"foreach: call gluon_cf\.foreach instead"
                                   for api in ("onnx", "artifact")},
    # a leaf returning constants (F.ones((1,))): one row for all of a level's calls; the
    # refusal says to compute them from an argument (UserRecursionSumCountDepthOfArgument)
    C.UserRecursionSumCountDepth: {"onnx": _LOWERING.replace(
        r".*save", r".*gives one row for \d+ invocations.*F\.zeros_like\(idx\).*save")},
    # a leaf's foreach (a char RNN) inside the recursion: not inlined by the schedule
    C.RecursionLeafRunsForeachOverCharacters: {"onnx": r"hostile_programs25x_trees\.py:\d+: "
                                                       r".*foreach.*save_artifact"},
}


@pytest.mark.parametrize("cls", list(PROGRAMS), ids=lambda c: c.__name__)
def test_export_equals_gluon_or_refuses_at_the_users_line(cls):
    result = export_harness.export_outcomes(cls, PROGRAMS[cls], FILES)
    export_harness.assert_equal_or_refused(result, REFUSED.get(cls, {}))


CLI_MODELS = [A.GreedyEosFlagInt64Tokens, A.GreedyWritesTokensIntoBufferByIndexCopy, A.BeamSearchBackpointersThenBacktrack,
              A.PointerNetworkMasksPickedRows, A.AttentionDecoderSequenceMaskOnScores,
              A.TeacherForcedAttentionSoftmaxLength, A.ForeachStatesOfFiveShapes,
              A.ViterbiBackpointersThenBacktrack, B.ForeachInWhileInCond,
              B.ZeroStepInnerWhilePerForeachRow, B.Int32StatesWhileSumOfSquares,
              B.Int64ForeachRunningMaxAndSum, B.EmbeddingLayerNormDropoutGru,
              B.BatchNormInferenceInWhileBody, B.CondDoublesRowsThenForeachGru,
              C.GluonCfRntnClassifier, C.MutualRecursionLeafAndBranchKinds,
              C.TreeRnnInt32Indices, C.RecursionLeafRunsForeachOverCharacters]


@pytest.mark.parametrize("cls", CLI_MODELS, ids=lambda c: c.__name__)
def test_cli_converts_and_runs_equal_to_gluon(cls, tmp_path, cli):
    """A model exported to a symbol file, ``convert``ed by the CLI (its run-time axes named)
    and ``run`` on every input list: equal to Gluon; ``run`` given inputs of another rank
    fails printing one line."""
    inputs = PROGRAMS[cls]
    net = make(cls)
    net.hybridize()
    model = export_harness.cli_convert(cli, tmp_path, net, inputs)
    export_harness.assert_cli_runs_equal(cli, tmp_path, model, net, inputs)
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, inputs[0][0][None])
    paths = [wrong] + [tmp_path / f"in0_{j}.npy" for j in range(1, len(inputs[0]))]
    status, out, err = cli("run", model, "--input", *paths, "-o", tmp_path / "bad")
    assert status != 0 and len(err.strip().splitlines()) == 1 and not out.strip(), (out, err)


# ---- what this round fixed ----------------------------------------------------------------------

class _AttendByLengthInForeach(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, mem, valid, targets):
        def func(y, states):
            w = F.softmax(F.dot(states[0], mem, transpose_b=True), length=valid,
                          use_length=True, axis=1)
            h = F.dot(w, mem) + y.reshape((1, -1))
            return h, [h]
        outs, (h,) = gluon_cf.foreach(func, targets, [F.ones((1, 3))])
        return outs, h


def test_softmax_by_length_over_memory_of_run_time_rows_in_a_loop_body_exports():
    """A teacher-forced decoder's foreach body attending over memory of run-time rows with
    softmax(length=..., axis=1): export_onnx refused it ("softmax with use_length=True of an
    input whose rank is known only at run time"): MXNet's partial shape inference of the body
    failed on the memory's unknown rows (``F.dot`` of (1, 0) and (0, 3)), so no value of the
    body had a shape. The body's shapes are now probed (NOTE [probing run-time dims]):
    onnxruntime equals Gluon for every memory length, valid length and target count."""
    import onnxruntime as ort
    from gluon_cf.export import export_onnx
    net = _AttendByLengthInForeach()
    net.hybridize()
    rng = np.random.RandomState(0)
    calls = [[rng.rand(t, 3).astype(np.float32), np.array([v], np.int32),
              rng.rand(n, 3).astype(np.float32)] for t, v, n in ((5, 3, 2), (2, 2, 4),
                                                                 (7, 1, 1), (3, 0, 3))]
    model = export_onnx(net, [mx.nd.array(a, dtype=a.dtype) for a in calls[0]],
                        dynamic_axes={0: [0], 2: [0]})
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for arrays in calls:
        want = net(*[mx.nd.array(a, dtype=a.dtype) for a in arrays])
        got = session.run(None, dict(zip(names, arrays)))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.asnumpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("api", ["onnx", "artifact"])
def test_a_scan_output_whose_rank_mxnet_loses_runs_in_onnxruntime(api):
    """A foreach step attending over all rows (``F.dot(w, x)`` of a (T,) ``w`` and a (T, H)
    ``x``, T run-time) exported, but every run failed in onnxruntime ("Subgraph must have the
    shape set for all outputs"): MXNet's partial inference gives ``F.dot`` of a (0,) and a
    (0, H) no rank at all, so the Scan body's output was declared without a shape. Such
    entries' shapes are now probed too (NOTE [probing run-time dims]); equal to Gluon."""
    cls = A.CausalSelfAttentionByArangeInForeach
    result = export_harness.export_outcomes(cls, PROGRAMS[cls], FILES)
    assert result[api] == ("equal", ""), result[api]


def test_index_copy_of_a_decoders_token_buffer_exports():
    """A greedy decoder writing each step's token into a buffer with F.contrib.index_copy
    was refused by export_onnx and save_artifact (mx2onnx has no converter for
    '_contrib_index_copy'); it lowers to ScatterND of the rows: equal to Gluon for 0, 3 and
    5 steps."""
    cls = A.GreedyWritesTokensIntoBufferByIndexCopy
    result = export_harness.export_outcomes(cls, PROGRAMS[cls], FILES)
    assert result == {"onnx": ("equal", ""), "artifact": ("equal", "")}, result
