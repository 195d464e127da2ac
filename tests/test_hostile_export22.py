"""Issue 24 items 4 and 6, session 22: the models of ``hostile_programs22.py`` (decoders, beam
search, attention with masks, RNN loops over lengths, Viterbi, pointer networks, gluonnlp
attention cells, autograph loops, users' own recursion) exported through ``export_onnx``
(onnxruntime), ``save_artifact`` (``load``) and the CLI, each equal to the hybridized block at
1e-5 on every input list (lengths, batches, masks), or refused at the user's line with the
reason; the autograph ones also equal plain Python eagerly and hybridized."""
import os
import re
import warnings

import mxnet as mx
import numpy as np
import pytest

import gluon_cf
from gluon_cf.export import export_onnx, load, save_artifact

import export_harness
import hostile_harness
import hostile_programs22 as programs

FILES = [programs.__file__]

# A recursive function whose base case returns a constant (F.zeros((1,)), F.ones((1,))): its
# calls run row by row (the batching executor's warning) and export_onnx refuses it, naming
# the constant, at its line, in the branch that returns it (NOTE [row-wise rules]; it named the
# recursive call of the other branch until session 35); the artifact runs it.
ONE_ROW = r"operator _(ones|zeros) \(node .*\) at .*hostile_programs22\.py:\d+ gives one row " \
          r"for 3 invocations.*\(in the then branch of cond .*F\.zeros_like\(idx\).*save_artifact"
REFUSED = {
    programs.TreeMaxPoolWithDepth: {"onnx": ONE_ROW},
    programs.ParentChainRecursionWithLoopAfter: {"onnx": ONE_ROW},
}


def _nd(arrays):
    return [mx.nd.array(a, dtype=a.dtype) for a in arrays]


@pytest.mark.parametrize("block_class", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_model_exports_equal_to_gluon_or_is_refused_at_its_line(block_class, capfd):
    result = export_harness.export_outcomes(block_class, programs.PROGRAMS[block_class], FILES)
    export_harness.assert_equal_or_refused(result, REFUSED.get(block_class, {}))


AUTOGRAPH = [c for c in programs.PROGRAMS if hasattr(c.hybrid_forward, "__wrapped__")]


@pytest.mark.parametrize("block_class", AUTOGRAPH, ids=lambda c: c.__name__)
def test_autograph_model_equals_plain_python_eager_and_hybridized(block_class):
    result = hostile_harness.classify(block_class, programs.PROGRAMS[block_class], FILES,
                                      export=False)
    assert not hostile_harness.not_equal_or_refused(result), result
    assert all(kind == "equal" for kind, _ in result.values()), result


def test_constant_base_case_warning_names_the_call_not_the_operator_after_it(recwarn):
    """Before: 'operator _maximum ... returns 1 rows for 3 invocations. gluon_cf has no
    batching rule for this operator' blamed `F.maximum(ld, rd) + 1`, which acts row by row;
    the cause is the leaf's `F.ones((1,))`."""
    net = hostile_harness._make(programs.TreeMaxPoolWithDepth)
    net.hybridize()
    arrays = programs.PROGRAMS[programs.TreeMaxPoolWithDepth][0]   # 2 calls on a level
    warnings.simplefilter("always")
    _, depths = net(*_nd(arrays))
    assert depths.asnumpy().ravel().tolist() == [3.0]
    texts = [str(w.message) for w in recwarn.list if "runs unbatched" in str(w.message)]
    assert texts and re.search(r"operator _ones .*:662 gives one row for 3 invocations",
                               texts[0]), texts
    assert "no batching rule" not in texts[0] and "_maximum" not in texts[0], texts


def _cli(*argv):
    from gluon_cf.export.cli import main
    return main([str(a) for a in argv])


@pytest.mark.parametrize("block_class, spec", [
    (programs.AttentionDecoderWithMask, ["data0:b=2,s=5,6", "data1:b=2", "data2:t=3,b=2,6"]),
    (programs.ExpressionTreeEvaluator, ["data0:n=5", "data1:n=5", "data2:n=5", "data3:n=5",
                                        "data4:1"]),
    (programs.WhileLoopGreedyInt32, ["data0:b=1:int32", "data1:b=1,6", "data2:1"]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_cli_convert_and_run_equal_gluon(block_class, spec, tmp_path, capfd):
    net = hostile_harness._make(block_class)
    net.hybridize()
    inputs = programs.PROGRAMS[block_class]
    net(*_nd(inputs[0]))
    net.export(str(tmp_path / "net"))
    argv = ["convert", tmp_path / "net-symbol.json", tmp_path / "net-0000.params"]
    for s in spec:
        argv += ["--input", s]
    assert _cli(*argv, "-o", tmp_path / "m.onnx") == 0, capfd.readouterr().err
    model = load(str(tmp_path / "m.onnx"))
    for k, arrays in enumerate(inputs):
        paths = []
        for j, a in enumerate(arrays):
            paths.append(tmp_path / f"in{k}_{j}.npy")
            np.save(paths[-1], a)
        assert _cli("run", tmp_path / "m.onnx", "--input", *paths, "-o", tmp_path / f"o{k}") == 0
        want = net(*_nd(arrays))
        want = want if isinstance(want, (list, tuple)) else [want]
        got = [np.load(tmp_path / f"o{k}" / (name + ".npy")) for name, _, _ in model.outputs]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, (g, w)
            np.testing.assert_allclose(g, w.asnumpy(), rtol=1e-5, atol=1e-6)


def test_onnxruntime_rejection_of_a_tampered_file_is_one_line_without_cpp(tmp_path, capfd):
    """A Constant node stripped of its value inside a loop body: onnxruntime's message named
    C++ files, lines and a 300-character function signature ("graph.cc:1357
    onnxruntime::Graph::Graph(const onnxruntime::Model&, ...)"), and the CLI's line kept its
    end, losing our start; now the one line names the piece's nodes and what is wrong."""
    import onnx
    net = hostile_harness._make(programs.BeamSearchForeachBacktrack)
    net.hybridize()
    arrays = programs.PROGRAMS[programs.BeamSearchForeachBacktrack][0]
    model = onnx.ModelProto()      # (a copy: conftest checks the exported model itself)
    model.CopyFrom(export_onnx(net, _nd(arrays), dynamic_axes={0: [0]}))

    def constants(graph):
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    yield from (n for n in attr.g.node if n.op_type == "Constant")
                    yield from constants(attr.g)
    stripped = next(iter(constants(model.graph)))
    del stripped.attribute[:]
    (tmp_path / "bad.onnx").write_bytes(model.SerializeToString())   # (not checked: invalid)
    paths = []
    for k, a in enumerate(arrays):
        paths.append(tmp_path / f"in{k}.npy")
        np.save(paths[-1], a)
    capfd.readouterr()
    assert _cli("run", tmp_path / "bad.onnx", "--input", *paths, "-o", tmp_path / "o") == 1
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("gluon-cf-export: error: the ") and \
        f"Constant node: {stripped.name} has no data attributes" in err, err
    assert not re.search(r"\.cc:\d|onnxruntime::|ONNXRuntimeError", err), err
