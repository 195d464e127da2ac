"""Issue 24 items 4 and 6, eighth round (export of everything that hybridizes): the programs of
``hostile_programs15.py`` run plain, eager, hybridized with gradients, and exported through
``export_onnx`` (onnxruntime) and ``save_artifact`` (``load``), compared with Gluon at 1e-5 on
every input list, with no onnxruntime warning; the refusals are the expected ones, each at the
user's line with its reason. And the round's decisions: a model output whose rank depends on a
cond's branch (NOTE [outputs of varying rank]), a forest of no trees (exports give its rows of
none, as onnxruntime's Scan does; the hybridized block refuses zero-size data, MXNet 1.9.1's
legacy shapes), float64 ops onnxruntime has no kernel for."""
import re

import mxnet as mx
import numpy as np
import pytest

import gluon_cf
from gluon_cf.export import export_onnx, load, save_artifact
from gluon_cf.models.recursive import TreeRNN

import export_harness
import hostile_harness
import hostile_programs15 as programs
from test_schedule import FORESTS, _forest

FILES = [programs.__file__]

# What MXNet 1.9.1 itself does, hybridized, where the plain Python oracle runs:
# F.contrib.foreach's own backward after another foreach (two F.contrib.foreach fail the same
# way). (A gradient through an output that is the block's input, LoopCarriesInputUnchanged,
# failed as plain Gluon fails, "not in a computational graph", until round 26r: a block holding
# gluon_cf nodes copies such outputs, NOTE [an input returned as an output] in _cachedop.py,
# and it equals plain Python now.)
MXNET_OWN = {
    programs.MxnetContribForeach: "storage_type_num_unknown_nodes",
}

# (api -> what its refusal says); every other program exports through both, equal to Gluon.
REFUSED = {
    programs.TreeRecursionTwoOutputs: {"onnx": "does not act row by row.*save_artifact"},
    programs.RecursionWithLoopInLeaf: {"onnx": "holds while_loop.*save_artifact"},
    programs.CondOfDifferentRanksAsOutput: {"onnx": "has a rank that depends on which branch "
                                                    "of this cond runs.*save_artifact"},
    programs.EnumerateOverRows: {api: "the shape read here while hybridizing"
                                 for api in ("onnx", "artifact")},
    programs.MxnetContribForeach: {api: "call gluon_cf.foreach instead"
                                   for api in ("onnx", "artifact")},
    programs.MxnetContribCond: {api: "call gluon_cf.cond instead"
                                for api in ("onnx", "artifact")},
    # (at the append's own line again since round 30ag)
    programs.WhileBreakCollect: {api: r"outs\.append\(row\): this statement runs after a "
                                      "break, continue or return under a tensor if"
                                 for api in ("onnx", "artifact")},
}


def _nd(arrays):
    return [mx.nd.array(a, dtype=a.dtype) for a in arrays]


@pytest.mark.parametrize("block_class", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_program_equals_plain_python_or_is_refused_at_its_line(block_class):
    result = hostile_harness.classify(block_class, programs.PROGRAMS[block_class], FILES,
                                      export=False)
    bad = hostile_harness.not_equal_or_refused(result)
    if block_class in MXNET_OWN:
        assert list(bad) == ["hybrid"] and MXNET_OWN[block_class] in bad["hybrid"], result
        return
    assert not bad, bad


@pytest.mark.parametrize("block_class", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_program_exports_equal_to_gluon_or_is_refused_at_its_line(block_class, capfd):
    result = export_harness.export_outcomes(block_class, programs.PROGRAMS[block_class], FILES)
    export_harness.assert_equal_or_refused(result, REFUSED.get(block_class, {}))
    printed = capfd.readouterr().err
    assert "onnxruntime" not in printed, printed       # no warning from a declared shape


def test_outputs_of_varying_rank_are_refused_by_export_onnx_and_run_as_an_artifact(tmp_path,
                                                                                   capfd):
    """NOTE [outputs of varying rank]: export_onnx declared the example's rank; onnxruntime
    warned on every run taking the other branch ('Expected shape from model of {-1,-1} does
    not match actual shape of {4}'). Now refused at the cond's line; the artifact runs both
    branches; a value of that cond reduced to one rank exports with no warning."""
    block_class = programs.CondOfDifferentRanksAsOutput
    net = hostile_harness._make(block_class)
    net.hybridize()
    inputs = programs.PROGRAMS[block_class]
    with pytest.raises(NotImplementedError) as refused:
        export_onnx(net, _nd(inputs[0]), dynamic_axes={0: [0]})
    line = [k for k, text in enumerate(open(programs.__file__), 1)
            if "lambda: x * 2, lambda: F.sum(x, axis=0))" in text][-1]   # (the last program)
    assert str(refused.value).startswith(f"{programs.__file__}:{line}: export_onnx: model "
                                         f"output "), str(refused.value)
    assert "then_func returns output 0 of rank 2, its else_func of rank 1" in str(refused.value)
    path = str(tmp_path / "ranks.onnx")
    save_artifact(net, _nd(inputs[0]), path, dynamic_axes={0: [0]})
    model = load(path)
    ranks = set()
    for arrays in inputs:
        want = net(*_nd(arrays)).asnumpy()
        got, = model(*arrays)
        ranks.add(got.ndim)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert ranks == {1, 2}
    result = export_harness.export_outcomes(programs.CondRankReducedThenSummed,
                                            programs.PROGRAMS[programs.CondRankReducedThenSummed],
                                            FILES)
    assert result == {"onnx": ("equal", ""), "artifact": ("equal", "")}
    assert "onnxruntime" not in capfd.readouterr().err


def test_a_forest_of_no_trees_gives_no_rows_from_both_exports(tmp_path):
    """The exports compute what the model computes per tree, for no tree: rows of none, as
    onnxruntime's Scan of no step does (the artifact's Scan made (0, 0) from its body's
    undeclared dims: a Gemm failure, an ArtifactError). The hybridized block refuses the
    empty roots at the model's foreach (MXNet 1.9.1's legacy shapes read a 0 as unknown: no
    hybridized MXNet graph takes zero-size data), a refusal the exports need not copy: the
    value they give is the one the oracle gives."""
    import onnxruntime as ort
    vocab, (tokens, left, right, roots) = _forest(FORESTS["sst"]())
    net = TreeRNN(len(vocab), embed_size=3, hidden_size=3, num_classes=2)
    net.initialize()
    net.hybridize()
    inputs = [tokens, left, right, roots]
    with pytest.raises(ValueError, match="(length 0|with a 0 dimension)"):
        net(tokens, left, right, roots[:0]).asnumpy()
    axes = {k: [0] for k in range(4)}
    model = export_onnx(net, inputs, dynamic_axes=axes)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    empty = [a.asnumpy() for a in inputs[:3]] + [roots.asnumpy()[:0]]
    path = str(tmp_path / "forest.onnx")
    save_artifact(net, inputs, path, dynamic_axes=axes)
    for got in (session.run(None, dict(zip(names, empty)))[0], load(path)(*empty)[0]):
        assert got.shape == (0, 2) and got.dtype == np.float32


def test_exports_of_a_mask_keeping_nothing_equal_the_plain_oracle(tmp_path):
    """The hybridized block runs no step over the no row a mask kept, as plain Python (it
    refused, at the foreach's line, before round 30x: NOTE [a foreach of no step]); both
    exports give plain Python's value. onnxruntime's Scan
    failed on the empty rows ('Invalid dim0_offset of 0'): a loop with step outputs over data
    of run-time length is a Scan under an If, as a loop of states only was."""
    block_class = programs.SumOfMaskedRowsInLoop
    inputs = programs.PROGRAMS[block_class]
    empty = inputs[-1]
    assert not empty[1].any()
    net = hostile_harness._make(block_class)
    want = block_class.hybrid_forward.__wrapped__(net, mx.nd, *_nd(empty)).asnumpy()
    assert want.shape == (1, 3)
    net.hybridize()
    np.testing.assert_allclose(net(*_nd(empty)).asnumpy(), want, rtol=1e-5, atol=1e-6)
    axes = export_harness.dynamic_axes(inputs)
    for run in (export_harness._onnx_runner(net, inputs[0], axes),
                export_harness._artifact_runner(net, inputs[0], axes, str(tmp_path))):
        np.testing.assert_allclose(run(empty)[0], want, rtol=1e-5, atol=1e-6)


class _Float64Op(mx.gluon.HybridBlock):
    def __init__(self, op):
        super().__init__()
        self.op = op
        with self.name_scope():
            self.conv = mx.gluon.nn.Conv2D(2, 3, in_channels=1)

    def hybrid_forward(self, F, x):
        if self.op == "Conv":
            return self.conv(x)
        if self.op == "AveragePool":
            return F.Pooling(x, kernel=(2, 2), pool_type="avg")
        return F.erf(x)


@pytest.mark.parametrize("op", ["Conv", "AveragePool", "Erf"])
def test_float64_ops_without_an_onnxruntime_kernel_are_refused_naming_op_node_and_line(op):
    """onnxruntime 1.x has float kernels only for Conv, AveragePool and Erf; no exact float64
    rewrite from ops it has is made (an im2col Conv or a pool are graphs of their own; erf
    needs a polynomial of its own), so they are refused: the op, its MXNet node, the user's
    line, and what to change."""
    net = _Float64Op(op)
    net.initialize()
    net.cast("float64")
    net.hybridize()
    x = mx.nd.ones((1, 1, 5, 5), dtype="float64")
    for api, export in (("export_onnx", export_onnx),
                        ("save_artifact", lambda n, i: save_artifact(n, i, "unused.onnx"))):
        with pytest.raises(NotImplementedError) as refused:
            export(net, [x])
        line = [k for k, text in enumerate(open(__file__), 1)
                if {"Conv": "return self.conv(x)", "AveragePool": "pool_type=\"avg\")",
                    "Erf": "return F.erf(x)"}[op] in text][0]
        assert re.match(re.escape(f"{__file__}:{line}: {api}: onnxruntime has no kernel "
                                  f"for ONNX's {op} (converted from node '") +
                        r"\w+'\) of T=tensor\(double\) .*: compute it in a dtype onnxruntime "
                        r"has", str(refused.value)), str(refused.value)


@pytest.mark.parametrize("block_class", [programs.TreeRecursionRoots,
                                         programs.LinearRecursionSumTo],
                         ids=lambda c: c.__name__)
def test_recursion_lowers_at_opset_12(block_class):
    """The lowering's Unsqueeze took its axes as an input (opset 13's form): at opset 12 ONNX's
    checker refused every lowered recursion ('Unsqueeze:11 has input size 2'), a message naming
    no line of the user's."""
    inputs = programs.PROGRAMS[block_class]
    net = hostile_harness._make(block_class)
    net.hybridize()
    run = export_harness._onnx_runner(net, inputs[0], export_harness.dynamic_axes(inputs),
                                      opset=12)
    for arrays in inputs:
        want = net(*_nd(arrays)).asnumpy()
        got, = run(arrays)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_an_item_of_a_list_holding_too_few_fails_in_onnxruntime_at_the_users_line(tmp_path):
    """``F.stack(*outs)`` of a while that appended nothing: Python and the hybridized block
    raise IndexError at the line; the exported model gave (0, 4) rows, a value no mode gives.
    Now onnxruntime fails in a node named after that line (both exports)."""
    block_class = programs.WhileCollectsRows
    inputs = programs.PROGRAMS[block_class]
    none = inputs[2]
    assert none[1][0] == 0
    net = hostile_harness._make(block_class)
    net.hybridize()
    with pytest.raises(IndexError, match="holds 0 items this call"):
        net(*_nd(none))
    line = [k for k, text in enumerate(open(programs.__file__), 1)
            if "return F.stack(*outs)" in text][0]
    axes = export_harness.dynamic_axes(inputs)
    for run in (export_harness._onnx_runner(net, inputs[0], axes),
                export_harness._artifact_runner(net, inputs[0], axes, str(tmp_path))):
        np.testing.assert_allclose(run(inputs[0])[0], net(*_nd(inputs[0])).asnumpy(),
                                   rtol=1e-5, atol=1e-6)
        with pytest.raises(Exception, match=re.escape(
                f"index_out_of_range ({programs.__file__}:{line})")):
            run(none)


class _StepsOfInputWidth(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x, mask):
        kept = F.contrib.boolean_mask(x, mask)
        return gluon_cf.foreach(lambda r, h: (r * 2, h + F.sum(r)), kept, F.zeros((1,)))


def test_a_loop_of_no_step_whose_step_width_is_known_at_run_time_fails_at_the_users_line(
        tmp_path):
    """Its steps' width is the input's (dynamic): with no row kept there is no step to take the
    outputs' shape from. The hybridized foreach refuses data of no row; onnxruntime's Scan
    failed with 'Invalid dim0_offset of 0' (no line); now the exports fail in a node named
    after the foreach's line, and equal Gluon where rows are kept."""
    inputs = [[hostile_harness.rand(4, 3), hostile_harness.floats(1, 0, 1, 1)],
              [hostile_harness.rand(3, 5, seed=1), hostile_harness.floats(0, 1, 1)]]
    none = [hostile_harness.rand(2, 2, seed=2), hostile_harness.floats(0, 0)]
    net = hostile_harness._make(_StepsOfInputWidth)
    net.hybridize()
    with pytest.raises(ValueError, match="data has length 0"):
        net(*_nd(none))
    line = [k for k, text in enumerate(open(__file__), 1)
            if "return gluon_cf.foreach(lambda r, h: (r * 2, h + F.sum(r))" in text][0]
    axes = export_harness.dynamic_axes(inputs)
    for run in (export_harness._onnx_runner(net, inputs[0], axes),
                export_harness._artifact_runner(net, inputs[0], axes, str(tmp_path))):
        for arrays in inputs:
            for got, want in zip(run(arrays), net(*_nd(arrays))):
                np.testing.assert_allclose(got, want.asnumpy(), rtol=1e-5, atol=1e-6)
        with pytest.raises(Exception, match=re.escape(
                f"no_step_gives_no_output_shape ({__file__}:{line})")):
            run(none)
