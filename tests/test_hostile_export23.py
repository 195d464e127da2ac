"""Issue 24 items 2-7, session 23: the models of ``hostile_programs23x.py`` (decoders with conds
inside loops, attention with SequenceMask and boolean_mask, variable-length batches, tree models
with ``@gluon_cf.recursive``, nested loops, autograph decoders) the way users port and then
export them:

* eager and hybridized, outputs and input and parameter gradients, equal the oracle (plain
  Python on NDArrays, or the eager block for gluon_cf's own models) at 1e-5;
* (item 2) a random sequence of calls on one hybridized block (empty masks and zero-step
  loops included, recorded or not) equals each call on a fresh block;
* (item 4) ``export_onnx`` (onnxruntime) and ``save_artifact`` (``load``) equal the hybridized
  block on every input list at 1e-5, or refuse at the user's line with the reason; models
  exported to a symbol file and loaded back with ``SymbolBlock.imports`` export the same; the
  CLI converts and runs them;
* (item 6) files and limits: ``load()`` limits inside onnxruntime pieces, malformed metadata
  is an ``ArtifactError``, the CLI prints one line on failure;
* (item 7) an eager ``while_loop`` of no step never calls its body; ``max_children`` refuses
  a node past the bound.
"""
import json
import os
import re
import subprocess
import sys
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd

import gluon_cf

import export_harness
import hostile_harness
from hostile_harness import run_with_gradients
import hostile_programs14
import hostile_programs23x as programs
from test_recursion_hostile2 import make

# (the recursion's node is made where it is first called: _rows_of, in hostile_programs14)
FILES = [programs.__file__, hostile_programs14.__file__]
TOL = (1e-5, 1e-5)
HERE = os.path.dirname(os.path.abspath(__file__))

# Eagerly, a while_loop of no step returns [] as its step outputs, as MXNet 1.9.1's eager
# while_loop does (README: read step outputs of a loop that may run no step hybridized): the
# program's unpacking of them fails, in Python, at the program's line.
EAGER_NO_STEP = {(programs.GreedyWhileCondOnEos, 2), (programs.BeamSearchWhileTwoBeams, 2),
                 (programs.Seq2SeqEncodeThenAttendDecode, 2),
                 (programs.MaskedSoftmaxAttentionInWhile, 1),
                 (programs.WhileBodyRunsForeachOverData, 1)}
# Eagerly, a sum of the rows of masks keeping none is not in MXNet's autograd graph (eager
# MXNet's own boolean_mask records no zero-size output): its backward fails as MXNet's does.
EAGER_NO_GRAPH = {(programs.BooleanMaskInForeachBodyEmptySteps, 1)}
# MXNet 1.x's zero-size limit (a product of (0, 1) arrays, kept by a boolean_mask keeping none
# inside a while_loop body): refused, eagerly and hybridized, at the product's line.
ZERO_SIZE = {(programs.BooleanMaskInWhileBodyShrinks, 1),
             (programs.BooleanMaskInWhileBodyShrinks, 2)}


def _plain(cls):
    if getattr(cls, "EAGER_ORACLE", False):
        return None
    if hasattr(cls, "plain_forward"):
        return cls.plain_forward
    return cls.hybrid_forward.__wrapped__


_ORACLES: dict = {}


def _oracle(cls, k):
    if (cls, k) not in _ORACLES:
        _ORACLES[cls, k] = hostile_harness._outcome(
            lambda: run_with_gradients(make(cls), programs.PROGRAMS[cls][k], _plain(cls)))
    return _ORACLES[cls, k]


def _check(cls, mode, k, got, want):
    if mode == "eager" and (cls, k) in EAGER_NO_STEP:
        assert got[0] == "error" and isinstance(got[1], (ValueError, IndexError,
                                                         AttributeError)), (k, got)
        return
    if (cls, k) in ZERO_SIZE:
        assert got[0] == "error" and isinstance(got[1], gluon_cf.ZeroSizeError) and \
            re.search(r"(broadcast|elemwise)_mul at %s:\d+ " % re.escape(FILES[0]),
                      str(got[1])), (mode, k, got)
        return
    if mode == "eager" and (cls, k) in EAGER_NO_GRAPH:
        assert got[0] == "error" and "no inputs in computation graph that require " \
            "gradients" in str(got[1]), (k, got)
        return
    hostile_harness.assert_equal_to_oracle(want, got, FILES, TOL, (mode, k))


@pytest.mark.parametrize("cls", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_eager_and_hybridized_equal_the_oracle_with_gradients(cls):
    hostile_harness.run_eager_and_hybridized(
        cls, programs.PROGRAMS[cls], make,
        lambda mode, k, got: _check(cls, mode, k, got, _oracle(cls, k)))


@pytest.mark.parametrize("cls", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_one_block_over_a_random_history_equals_fresh_blocks(cls):
    """Item 2: every input (empty masks, zero-step loops), in a random order with repeats and
    calls most programs refuse (an input one column wider, of one more axis, float64),
    recorded or not, on one hybridized block: each call equals the same call on a fresh
    hybridized block (a failing call fails the same way, and leaves the block usable)."""
    hostile_harness.check_call_history(cls, programs.PROGRAMS[cls], make,
                                       lambda k: _oracle(cls, k), TOL)


# export_onnx refuses recursions whose body does not act row by row (NOTE [row-wise rules]),
# naming the call's line, the operator's and what to change; save_artifact exports them all.
_ROWS = r"cannot be lowered to standard ONNX loops: function '\w+': its body does not act " \
    r"row by row .*at .*hostile_programs23x\.py:\d+.*save_artifact"
REFUSED = {
    # F.take(x, i) + ctx: a captured (1, H) value added to a per-invocation row
    programs.TreeRnnCapturingOuterDenseAndContext: {"onnx": _ROWS.replace(
        ".*at", ".*elemwise_add .*at")},
    # kids' base case F.zeros((1, H)): one row for all the level's calls
    programs.NaryMutualNodeAndChildList: {"onnx": r"shape inference fails for 3 invocations "
                                                  r"at once.*F\.zeros_like.*save_artifact"},
    # F.sum(self.score(h)) > -0.3: a sum over every axis, the invocations' too
    programs.TopDownTreeDecoderMaxDepth: {"onnx": _ROWS.replace(".*at", ".*operator sum .*at")},
    programs.NaryForeachOverMaskedChildren: {
        "onnx": r"hostile_programs14\.py:\d+: export_onnx: .*its body holds "
                r"_contrib_boolean_mask .*which the schedule does not inline\. Export the model "
                r"with gluon_cf\.export\.save_artifact"},
    programs.RecursionLeafRunsWhileCondInside: {
        "onnx": r"hostile_programs14\.py:\d+: export_onnx: .*its body holds while_loop .*"
                r"which the schedule does not inline\. Export the model with "
                r"gluon_cf\.export\.save_artifact"},
}


@pytest.mark.parametrize("cls", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_export_equals_gluon_or_refuses_at_the_users_line(cls):
    result = export_harness.export_outcomes(cls, programs.PROGRAMS[cls], FILES)
    export_harness.assert_equal_or_refused(result, REFUSED.get(cls, {}))


# ---- what this round fixed ----------------------------------------------------------------------

class _RowsCounted(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        n = F.shape_array(x).slice_axis(axis=0, begin=0, end=1).astype("float32")
        _, (i, s) = gluon_cf.while_loop(lambda i, s: i < n, lambda i, s: ([], [i + 1, s * 0.5]),
                                        [F.zeros((1,)), F.ones((2,))], max_iterations=4)
        return i, F.broadcast_add(s, F.sum(x))


@pytest.mark.parametrize("record", [False, True])
def test_an_empty_batch_after_a_full_one_works_as_on_a_fresh_block(record):
    """Item 2: the block's own CachedOp, planned for (4, 2), failed on the (0, 2) rows of an
    empty batch with MXNet's "Cannot find attribute forward_mem_plan in the graph", while a
    fresh block computed them (NOTE [zero-size block inputs])."""
    net = _RowsCounted()
    net.hybridize()
    for rows in (4, 0, 3, 0):
        x = mx.nd.array(np.ones((rows, 2), np.float32))
        with autograd.record() if record else autograd.predict_mode():
            i, s = net(x)
        steps = min(rows, 4)
        assert i.asnumpy().tolist() == [steps], rows
        np.testing.assert_allclose(s.asnumpy(), 0.5 ** steps + rows * 2.0, rtol=1e-6)


def _nd(arrays):
    return [mx.nd.array(a, dtype=a.dtype) for a in arrays]


def _exported(cls, tmp_path):
    net = make(cls)
    net.hybridize()
    net(*_nd(programs.PROGRAMS[cls][0]))
    net.export(str(tmp_path / "net"))
    return net


IMPORTED = [programs.BeamSearchWhileTwoBeams, programs.SequenceMaskAttentionInForeach,
            programs.GluonCfChildSumTreeLstmModel, programs.AutographWhileBreakConcatItems,
            programs.ZeroStepWhileReadsFinalVarsOnly]


@pytest.mark.parametrize("cls", IMPORTED, ids=lambda c: c.__name__)
def test_a_model_loaded_back_with_symbolblock_imports_exports_equal(cls, tmp_path):
    """A model loaded back with ``SymbolBlock.imports`` runs its graph whether or not it is
    hybridized (MXNet 1.9.1 always calls a SymbolBlock's CachedOp): export_onnx refused it
    ("net is not hybridized; call net.hybridize() first"); it exports, and onnxruntime equals
    the original block on every input list."""
    import onnxruntime as ort
    from gluon_cf.export import export_onnx
    inputs = programs.PROGRAMS[cls]
    net = _exported(cls, tmp_path)
    names = ["data%d" % k for k in range(len(inputs[0]))] if len(inputs[0]) > 1 else ["data"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = mx.gluon.SymbolBlock.imports(str(tmp_path / "net-symbol.json"), names,
                                              str(tmp_path / "net-0000.params"))
        model = export_onnx(loaded, _nd(inputs[0]),
                            dynamic_axes=export_harness.dynamic_axes(inputs))
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    feeds = [i.name for i in session.get_inputs()]
    for arrays in inputs:
        want = net(*_nd(arrays))
        want = want if isinstance(want, (list, tuple)) else [want]
        mine = loaded(*_nd(arrays))
        mine = mine if isinstance(mine, (list, tuple)) else [mine]
        got = session.run(None, dict(zip(feeds, arrays)))
        assert len(got) == len(want) == len(mine)
        for g, m, w in zip(got, mine, want):
            assert g.shape == w.shape and m.shape == w.shape, (g.shape, w.shape)
            np.testing.assert_allclose(m.asnumpy(), w.asnumpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(g, w.asnumpy(), rtol=1e-5, atol=1e-6)


@pytest.fixture
def cli(capfd):
    """The CLI's ``main`` (``python -m gluon_cf.export``): (status, stdout, stderr), stderr
    read at the file descriptor (onnxruntime's and MXNet's C++ log lines included)."""
    from gluon_cf.export.cli import main

    def run(*argv):
        capfd.readouterr()
        status = main([str(a) for a in argv])
        out, err = capfd.readouterr()
        return status, out, err
    return run


def test_cli_converts_and_runs_a_recursive_nary_model_equal_to_gluon(tmp_path, cli):
    """``python -m gluon_cf.export convert`` of the n-ary node counter (recursion whose base
    case is a loop of no step) and ``run`` of the result on every forest: equal to Gluon."""
    cls = programs.NaryCountNodesEmptyLoopBase
    net = _exported(cls, tmp_path)
    status, _, err = cli("convert", tmp_path / "net-symbol.json", tmp_path / "net-0000.params",
                          "--input", "data0:n=11,4", "--input", "data1:p=12",
                          "--input", "data2:c=9", "--input", "data3:r=3",
                          "-o", tmp_path / "m.onnx")
    assert status == 0, err
    export_harness.assert_cli_runs_equal(cli, tmp_path, tmp_path / "m.onnx", net,
                                         programs.PROGRAMS[cls])


@pytest.fixture(scope="module")
def three_way_artifact(tmp_path_factory):
    """The bytes of ThreeWayMutualRecursionByLevel's artifact, saved once for the CLI's
    failures (~1.5 s each time), checked as conftest's _check_exported_models checks every
    model the tests export (a module's fixture is set up before that fixture watches)."""
    import onnx
    from conftest import unused_initializers
    from gluon_cf.export import save_artifact
    cls = programs.ThreeWayMutualRecursionByLevel
    net = make(cls)
    net.hybridize()
    path = tmp_path_factory.mktemp("three_way") / "m.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        save_artifact(net, _nd(programs.PROGRAMS[cls][0]), str(path),
                      dynamic_axes={0: [0], 1: [0], 2: [0], 3: [0]})
    model = onnx.load(str(path))
    assert unused_initializers(model.graph) == []
    onnx.checker.check_model(model, full_check=True)
    return path.read_bytes()


@pytest.mark.parametrize("how", ["missing input", "wrong dtype", "metadata", "truncated",
                                 "no such file"])
def test_cli_failure_is_exactly_one_line(how, tmp_path, cli, three_way_artifact):
    """Item 6: whatever fails (an input missing, of another dtype, a file whose metadata is
    malformed or cut short, a path that does not exist), ``run`` prints exactly one line,
    ours, on stderr: no traceback, no onnxruntime or MXNet log line before it."""
    import onnx
    arrays = programs.PROGRAMS[programs.ThreeWayMutualRecursionByLevel][0]
    path = tmp_path / "m.onnx"
    path.write_bytes(three_way_artifact)
    paths = []
    for j, a in enumerate(arrays):
        paths.append(tmp_path / f"in{j}.npy")
        np.save(paths[-1], a)
    if how == "missing input":
        paths = paths[:-1]
    elif how == "wrong dtype":
        np.save(paths[0], arrays[0].astype(np.complex64))   # (float64 is cast, same kind)
    elif how == "metadata":
        model = onnx.load(str(path))
        for prop in model.metadata_props:
            prop.value = "{" + prop.value[: len(prop.value) // 2]
        path.write_bytes(model.SerializeToString())
    elif how == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 3])
    else:
        path = tmp_path / "absent.onnx"
    status, out, err = cli("run", path, "--input", *paths, "-o", tmp_path / "o")
    assert status == 1, (status, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gluon-cf-export: error: "), err
    assert not re.search(r"Traceback|\.cc:\d|onnxruntime::|\[E:onnxruntime|::", lines[0]), err


def test_load_refuses_malformed_metadata_with_an_artifact_error(tmp_path):
    """Item 6: every metadata value of an artifact replaced by something malformed (not JSON,
    JSON of another type, nested 100,000 deep) is an ArtifactError from load(), never a
    JSONDecodeError, KeyError, TypeError or RecursionError."""
    import onnx
    from gluon_cf.export import ArtifactError, load, save_artifact
    cls = programs.ThreeWayMutualRecursionByLevel
    net = make(cls)
    net.hybridize()
    path = tmp_path / "m.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        save_artifact(net, _nd(programs.PROGRAMS[cls][0]), str(path))
    good = onnx.load(str(path))
    keys = [p.key for p in good.metadata_props]
    assert keys
    bad_values = ["{", "[]", "null", "1e999", '"text"', "[" * 100_000 + "]" * 100_000,
                  json.dumps({"a": [1, 2]}), "\u0000"]
    tried = 0
    for key in keys:
        for value in bad_values:
            model = onnx.ModelProto()
            model.CopyFrom(good)
            for prop in model.metadata_props:
                if prop.key == key:
                    prop.value = value
            bad = tmp_path / "bad.onnx"
            bad.write_bytes(model.SerializeToString())
            try:
                loaded = load(str(bad))
            except ArtifactError:
                tried += 1
                continue
            # (a key the loader does not read: the file still runs, equal)
            want = net(*_nd(programs.PROGRAMS[cls][0]))
            got = loaded(*programs.PROGRAMS[cls][0])
            np.testing.assert_allclose(got[0], want.asnumpy(), rtol=1e-5, atol=1e-6)
    assert tried, keys


_FAILED_BACKWARD_THEN_EXIT = """
import mxnet as mx, numpy as np
from mxnet import autograd
import gluon_cf


class Gate(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        return gluon_cf.cond(F.sum(x) > 0, lambda: x * 2, lambda: x * 3)


net = Gate()
net.hybridize()
x = mx.nd.array(np.ones((4, 2), np.float32))
x.attach_grad()
with autograd.record():
    out = net(x)
try:
    out.sum().backward()       # (the sum outside record: MXNet refuses the backward)
except mx.MXNetError:
    print("refused")
del out
print("end")
"""


def test_exit_after_a_failed_backward_does_not_abort():
    """A recorded call of a hybridized gluon_cf node, ``out.sum().backward()`` written outside
    ``autograd.record()`` (MXNet's "not in a computational graph"), ``out`` dropped, then the
    script ends: the process aborted at exit in about half the runs ("terminate called without
    an active exception", NOTE [operations released after waitall]). Three processes, at
    once."""
    procs = [subprocess.Popen([sys.executable, "-c", _FAILED_BACKWARD_THEN_EXIT], cwd=HERE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail("hung at exit")
        assert proc.returncode == 0 and out.split() == ["refused", "end"], \
            (proc.returncode, err[-1500:])


# ---- item 6: load()'s limits inside onnxruntime pieces, control flow nested --------------------

_NESTED_LIMITS = """
import resource, sys, time
sys.path.insert(0, "tests")
import numpy as np
from onnx import TensorProto, helper
from gluon_cf.export import ArtifactError, Limits, load   # (no MXNet: a fast start)
F, I, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
_vi = helper.make_tensor_value_info


def _model(graph):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("ai.gluon_cf", 1)])
    model.ir_version = 7
    helper.set_model_props(model, {"format": "gluon_cf.artifact", "format_version": "1"})
    return model
cap = 3 << 30       # address space: a 6 GiB intermediate cannot even be reserved
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def counting_body():
    return helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Add", ["v", "one"], ["v_out"])], "inner",
        [_vi("i", I, []), _vi("c", B, []), _vi("v", F, [1])],
        [_vi("c_out", B, []), _vi("v_out", F, [1])],
        [helper.make_tensor("one", F, [1], [1.0])])


# a Scan over x whose body runs a Loop of x[k] steps
scan_body = helper.make_graph(
    [helper.make_node("Cast", ["xk"], ["n"], to=I),
     helper.make_node("Loop", ["n", "", "s"], ["s2"], body=counting_body()),
     helper.make_node("Identity", ["s2"], ["out"])], "scanbody",
    [_vi("s", F, [1]), _vi("xk", F, [])], [_vi("s2", F, [1]), _vi("out", F, [1])])
scan_loop = _model(helper.make_graph(
    [helper.make_node("Scan", ["s0", "x"], ["s", "outs"], body=scan_body, num_scan_inputs=1)],
    "main", [_vi("s0", F, [1]), _vi("x", F, [None])],
    [_vi("s", F, [1]), _vi("outs", F, [None, 1])]))
# an If whose taken branch runs a Loop of x steps
if_loop = _model(helper.make_graph(
    [helper.make_node("Greater", ["x", "zero"], ["p"]),
     helper.make_node("If", ["p"], ["y"], then_branch=helper.make_graph(
         [helper.make_node("Cast", ["x"], ["n"], to=I),
          helper.make_node("Loop", ["n", "", "v0"], ["v"], body=counting_body())], "then",
         [], [_vi("v", F, [1])]), else_branch=helper.make_graph(
         [helper.make_node("Identity", ["v0"], ["w"])], "else", [], [_vi("w", F, [1])]))],
    "main", [_vi("x", F, []), _vi("v0", F, [1])], [_vi("y", F, [1])],
    [helper.make_tensor("zero", F, [], [0.0])]))
# an If whose taken branch sums ConstantOfShape(n)
if_big = _model(helper.make_graph(
    [helper.make_node("Greater", ["x", "zero"], ["p"]),
     helper.make_node("If", ["p"], ["y"], then_branch=helper.make_graph(
         [helper.make_node("ConstantOfShape", ["n"], ["big"]),
          helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0)], "then", [],
         [_vi("s", F, [])]), else_branch=helper.make_graph(
         [helper.make_node("Identity", ["z"], ["s2"])], "else", [], [_vi("s2", F, [])]))],
    "main", [_vi("x", F, []), _vi("n", I, [1])], [_vi("y", F, [])],
    [helper.make_tensor("zero", F, [], [0.0]), helper.make_tensor("z", F, [], [0.0])]))
f32 = lambda *v: np.array(v, np.float32)
for name, model, inputs in [
        ("scan small", scan_loop, [f32(0), f32(2, 3)]),
        ("scan 1e12", scan_loop, [f32(0), f32(2, 1e12)]),
        ("if 1e12", if_loop, [np.array(1e12, np.float32), f32(0)]),
        ("big small", if_big, [np.array(1.0, np.float32), np.array([10], np.int64)]),
        ("big 6GiB", if_big, [np.array(1.0, np.float32), np.array([3 << 29], np.int64)])]:
    f = load(model.SerializeToString(), limits=Limits(timeout=1.0, max_tensor_bytes=16 << 20))
    start = time.monotonic()
    try:
        print(name, "|", [o.ravel().tolist() for o in f(*inputs)], flush=True)
    except ArtifactError as err:
        print(name, "|", time.monotonic() - start < 30, err, flush=True)
"""


def test_limits_hold_for_control_flow_nested_inside_an_onnxruntime_piece():
    """Item 6: a Loop of 1e12 computed steps inside a Scan's body and inside an If's branch
    stops at the time limit; a 6 GiB ConstantOfShape inside an If's branch is refused at the
    per-tensor limit (address space capped at 3 GiB); small inputs run."""
    from conftest import run_python
    proc = run_python(_NESTED_LIMITS, timeout=120, cwd=os.path.dirname(HERE))
    assert proc is not None, "hung"
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(" | ", 1) for line in proc.stdout.strip().splitlines())
    assert lines["scan small"] == "[[5.0], [2.0, 5.0]]" and lines["big small"] == "[[0.0]]"
    stopped = "True the main graph: nodes %s: stopped inside onnxruntime: the artifact ran " \
              "longer than timeout=1.0 s"
    assert lines["scan 1e12"] == stopped % "'Scan'", lines
    assert lines["if 1e12"] == stopped % "'Greater', 'If'", lines
    assert lines["big 6GiB"] == (
        "True the main graph: nodes 'Greater', 'If': onnxruntime needed more than "
        "max_tensor_bytes=16777216 bytes for the tensors inside this piece (a tensor over the "
        "limit, or tensors alive together over it)"), lines


# ---- item 7 ----------------------------------------------------------------------------------

def test_eager_while_loop_of_no_step_never_calls_its_body():
    calls = []

    def func(i, s):
        calls.append(1)
        return [s * 2], [i + 1, s + 1]
    outs, (i, s) = gluon_cf.while_loop(lambda i, s: i < 0, func,
                                       [mx.nd.zeros((1,)), mx.nd.ones((2, 3))],
                                       max_iterations=3)
    assert not calls and outs == [] and i.shape == (1,) and s.shape == (2, 3)
    assert s.asnumpy().tolist() == [[1.0] * 3] * 2


def test_childsum_past_max_children_raises_or_warns_in_every_mode(tmp_path):
    """Item 7: a node of 4 children under max_children=3: eagerly a ValueError naming the
    node; hybridized inside a user's block (no check sees the values) a TruncationWarning on
    every call; the exported ONNX model and the artifact refuse to run it."""
    import onnxruntime as ort
    from gluon_cf.export import ArtifactError, export_onnx, load, save_artifact
    cls = programs.GluonCfChildSumTreeLstmModel
    wide = programs._nary_tokens([[1, 2, 3, 4], [], [], [], []], [0], 9)
    with pytest.raises(ValueError, match=r"node 0 has 4 children, more than max_children=3"):
        make(cls)(*_nd(wide))
    net = make(cls)
    net.hybridize()
    for _ in range(2):
        with pytest.warns(gluon_cf.TruncationWarning, match=r"max_children=3.*stopped at its "
                          r"bound of 3 iterations"):
            net(*_nd(wide)).asnumpy()
    first = programs.PROGRAMS[cls][0]
    axes = {k: [0] for k in range(4)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = export_onnx(net, _nd(first), dynamic_axes=axes)
        save_artifact(net, _nd(first), str(tmp_path / "a.onnx"), dynamic_axes=axes)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = dict(zip([i.name for i in session.get_inputs()], wide))
    with pytest.raises(Exception, match="max_iterations_exceeded"):
        session.run(None, feeds)
    with pytest.raises(ArtifactError):
        load(str(tmp_path / "a.onnx"))(*wide)


@pytest.mark.parametrize("opset", [7, 11, 15])
@pytest.mark.parametrize("api", ["export_onnx", "save_artifact"])
def test_an_opset_mx2onnx_does_not_convert_is_refused_before_anything_runs(api, opset,
                                                                          tmp_path):
    """At opset 11 export_onnx blamed the model's first node ("node '..._zeros0' (MXNet op
    '_zeros') in the model cannot be converted: mx2onnx has no converter for '_zeros' at opset
    11"), and at 15 named an internal function (symbol_to_onnx_graph): the opset is refused
    by the API the user called, naming the opsets there are."""
    import gluon_cf.export as export
    cls = programs.ZeroStepWhileReadsFinalVarsOnly
    net = make(cls)
    net.hybridize()
    args = (str(tmp_path / "m.onnx"),) if api == "save_artifact" else ()
    with pytest.raises(ValueError, match=r"^%s: opset %d is not supported; mx2onnx has "
                       r"converters for opsets \[12, 13\] only \(default 13\)$" % (api, opset)):
        getattr(export, api)(net, _nd(programs.PROGRAMS[cls][0]), *args, opset=opset)


@pytest.mark.parametrize("fmt", ["auto", "artifact"])
def test_cli_convert_refuses_an_opset_it_cannot_write_as_usage(fmt, tmp_path, cli):
    """``convert --opset 11 --format artifact`` blamed the model's first node (mx2onnx has no
    converter for '_zeros' at opset 11): a usage error, one line, exit status 2."""
    _exported(programs.ZeroStepWhileReadsFinalVarsOnly, tmp_path)
    status, _, err = cli("convert", tmp_path / "net-symbol.json", tmp_path / "net-0000.params",
                         "--input", "data:r=4,2", "--opset", "11", "--format", fmt,
                         "-o", tmp_path / "m.onnx")
    assert status == 2 and err.strip() == (
        "gluon-cf-export: error: argument --opset: invalid choice: 11 (choose from 12, 13) "
        "(see gluon-cf-export convert --help)"), err


class _PlainMaskedMean(mx.gluon.HybridBlock):
    """No gluon_cf node: a Dense over a sum of rows (none, for an empty batch)."""

    NO_GRAD = (0,)     # (MXNet cannot attach a gradient to a zero-size array)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = mx.gluon.nn.Dense(3, in_units=2)

    def hybrid_forward(self, F, x):
        return F.broadcast_add(self.fc(F.sum(x, axis=0, keepdims=True)), F.sum(x))


def test_a_block_without_nodes_runs_an_empty_batch_whatever_came_before():
    """The same history in a block of plain MXNet operators: after a recorded call on (4, 2),
    a recorded call on (0, 2) failed ("Cannot find attribute full_mem_plan in the graph") and
    a fresh block failed otherwise ("shape_num_unknown_nodes"); both now compute what eager
    code computes, with the Dense's gradients."""
    mx.random.seed(0)
    net = _PlainMaskedMean()
    net.initialize()
    eager = _PlainMaskedMean()
    eager.initialize()
    eager.fc.weight.set_data(net.fc.weight.data())
    eager.fc.bias.set_data(net.fc.bias.data())
    net.hybridize()
    for rows, record in ((4, True), (0, True), (0, False), (3, False), (0, True)):
        got = run_with_gradients(net, [np.ones((rows, 2), np.float32)], record=record)
        # (no row: the output is the bias; the gradients of 1.5 * its sum: none for the
        # weight, which multiplies a sum of no row, 1.5 for the bias; in the block's order)
        want = run_with_gradients(eager, [np.ones((rows, 2), np.float32)], record=record) \
            if rows else \
            [eager.fc.bias.data().asnumpy().reshape((1, 3))] + \
            ([np.zeros((3, 2), np.float32), np.full(3, 1.5, np.float32)] if record else [])
        assert hostile_harness._compare(want, got, TOL), (rows, record, got)
