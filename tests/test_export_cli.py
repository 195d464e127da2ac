"""gluon-cf-export: convert net.export() files and run the result in subprocesses (a group of
failure cases through cli.main() in one process of its own, some also in a process each)."""
import json
import os
import re
import subprocess
import sys

import mxnet as mx
import numpy as np
import onnx
import pytest
from mxnet import gluon, nd

import gluon_cf
from gluon_cf.data.trees import batchify_forest, build_vocab, encode_tree, synthetic_treebank
from gluon_cf.models.recursive import TreeLSTM

from conftest import REPO

TOL = dict(rtol=1e-5, atol=1e-5)
TREE_INPUTS = ["tokens", "left", "right", "roots"]


def cli(*args, timeout=180):
    """Run ``python -m gluon_cf.export.cli *args``; returns the CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "gluon_cf.export.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


# Runs each case's argv through cli.main() in this one process, the process's own file
# descriptors 1 and 2 sent to a file per case (onnxruntime and MXNet write to them directly):
# one interpreter start for many cases instead of one each. What the tests assert on is still
# what the process wrote, and the status python -m gluon_cf.export.cli would exit with.
MAIN_PER_CASE = """
import json, os, sys, tempfile, traceback
from gluon_cf.export import cli

def read_back(file):
    file.seek(0)
    return file.read().decode("utf-8", "replace")

results = {}
for case, argv in json.load(open(sys.argv[1])).items():
    files = [tempfile.TemporaryFile(mode="w+b") for _ in (1, 2)]
    sys.stdout.flush(); sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    os.dup2(files[0].fileno(), 1); os.dup2(files[1].fileno(), 2)
    try:
        try:
            status = cli.main(argv)         # what sys.exit(main()) exits with
        except SystemExit as exit:
            status = exit.code
        except BaseException:               # a traceback, as the process would print it
            traceback.print_exc()
            status = "raised"
    finally:
        sys.stdout.flush(); sys.stderr.flush()
        os.dup2(saved[0], 1); os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
    out, err = (read_back(f) for f in files)
    results[case] = [0 if status is None else status, out, err]
json.dump(results, open(sys.argv[2], "w"))
"""


def cli_main_per_case(cases, directory, timeout=300):
    """``{case: (status, stdout, stderr)}`` of each ``{case: argv}`` run through cli.main() in
    one fresh process (MAIN_PER_CASE)."""
    spec, results = directory / "cases.json", directory / "results.json"
    spec.write_text(json.dumps({case: list(map(str, argv)) for case, argv in cases.items()}))
    proc = subprocess.run([sys.executable, "-c", MAIN_PER_CASE, spec, results],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr[-3000:]
    return {case: tuple(result) for case, result in json.loads(results.read_text()).items()}


def assert_same_as_a_real_process(argv, in_one_process):
    """The real ``python -m gluon_cf.export.cli`` run of ``argv`` exits with the status and
    prints what the case run through cli.main() did (see MAIN_PER_CASE)."""
    proc = cli(*argv)
    assert (proc.returncode, proc.stdout, proc.stderr) == in_one_process, (argv, proc.stderr)


def script():
    """The installed console script next to this interpreter."""
    path = os.path.join(os.path.dirname(sys.executable), "gluon-cf-export")
    if not os.path.exists(path):
        pytest.skip("gluon-cf-export is not installed next to this interpreter")
    return path


def forest(num_trees, seed):
    trees = synthetic_treebank(num_trees, seed=seed, max_length=9)
    return trees


@pytest.fixture(scope="module")
def tree_model(tmp_path_factory):
    """A TreeLSTM saved with net.export(), and two forests of different sizes as .npy files."""
    directory = tmp_path_factory.mktemp("cli")
    trees = forest(5, seed=0)
    vocab = build_vocab(trees)
    mx.random.seed(0)
    net = TreeLSTM(len(vocab), embed_size=5, hidden_size=4, num_classes=3, prefix="tree_")
    net.initialize(mx.init.Xavier())
    net.hybridize()
    runs = []
    for k, group in enumerate((trees[:3], trees[3:])):
        f = batchify_forest([encode_tree(t, vocab) for t in group])
        arrays = [getattr(f, name) for name in TREE_INPUTS]  # int32, as batchify gives them
        paths = []
        for name, array in zip(TREE_INPUTS, arrays):
            paths.append(directory / f"{name}{k}.npy")
            np.save(paths[-1], array)
        runs.append((paths, net(*[nd.array(a) for a in arrays]).asnumpy()))
    net.export(str(directory / "tree"))
    size = len(np.load(runs[0][0][0]))
    inputs = [f"--input=data{k}:n={size}" for k in range(3)] + [f"--input=data3:b=3"]
    return directory, inputs, runs


def test_convert_and_run_recursive_model_as_standard_onnx(tree_model, tmp_path):
    directory, inputs, runs = tree_model
    out = tmp_path / "tree.onnx"
    result = subprocess.run([script(), "convert", directory / "tree-symbol.json",
                             directory / "tree-0000.params", *inputs, "-o", out],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[:2] == [f"wrote ONNX model {out}", "format: ONNX (ai.onnx 13)"]
    assert "recursion: lowered to standard ONNX Loops, level by level" in result.stdout
    ran = cli_main_per_case(dict(           # info, then a run of both forest sizes
        info=["info", out],
        **{f"run {k}": ["run", out, "--input", *paths, "-o", tmp_path / f"out{k}"]
           for k, (paths, _) in enumerate(runs)}), tmp_path)
    assert ran["info"][0] == 0, ran["info"]
    assert any(line.startswith("recursion: lowered") for line in ran["info"][1].splitlines())
    for k, (paths, expected) in enumerate(runs):
        assert ran[f"run {k}"][0] == 0, ran[f"run {k}"][2][-3000:]
        written = tmp_path / f"out{k}" / "tree_dense0_fwd_output.npy"
        np.testing.assert_allclose(np.load(written), expected, **TOL)


@pytest.fixture(scope="module")
def tree_artifact(tree_model, tmp_path_factory):
    """``(path, CompletedProcess)``: the console script's ``convert --format artifact`` of
    tree_model (``python -m gluon_cf.export.cli`` where the script is not installed), made
    once for the tests that only read it."""
    directory, inputs, _ = tree_model
    out = tmp_path_factory.mktemp("artifact") / "tree.onnx"
    argv = ["convert", directory / "tree-symbol.json", directory / "tree-0000.params", *inputs,
            "--format", "artifact", "-o", out]
    path = os.path.join(os.path.dirname(sys.executable), "gluon-cf-export")
    if not os.path.exists(path):
        return out, cli(*argv)
    return out, subprocess.run([path, *argv], capture_output=True, text=True, timeout=180)


def test_convert_and_run_recursive_model(tree_model, tree_artifact, tmp_path):
    script()   # (skips where the console script is not installed)
    directory, inputs, runs = tree_model
    out, result = tree_artifact
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[:2] == [
        f"wrote gluon_cf artifact {out}", "format: gluon_cf artifact (ai.onnx 13, ai.gluon_cf 1)"]
    assert "recursion " in result.stdout and "functions ['node'], max_depth [20000]" in \
        result.stdout
    ran = cli_main_per_case({k: ["run", out, "--input", *paths, "-o", tmp_path / f"out{k}"]
                             for k, (paths, _) in enumerate(runs)}, tmp_path)  # both sizes
    for k, (paths, expected) in enumerate(runs):
        status, stdout, stderr = ran[str(k)]
        assert status == 0, stderr[-3000:]
        (line,) = stdout.splitlines()
        written = tmp_path / f"out{k}" / "tree_dense0_fwd_output.npy"
        assert line == f"tree_dense0_fwd_output: {list(expected.shape)} float32 -> {written}"
        np.testing.assert_allclose(np.load(written), expected, **TOL)


class CondModel(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = gluon.nn.Dense(4, in_units=3, flatten=False)

    def hybrid_forward(self, F, seq, h0):
        def step(x, states):
            h = F.tanh(self.fc(x) + states[0])
            return h, [h]
        outs, (h,) = gluon_cf.foreach(step, seq, [h0])
        return gluon_cf.cond(h.sum() > 0, lambda: outs, lambda: -outs), h


def test_convert_and_run_model_without_recursion_as_standard_onnx(tmp_path):
    mx.random.seed(0)
    net = CondModel()
    net.initialize(mx.init.Uniform(0.5))
    net.hybridize()
    rng = np.random.RandomState(0)
    seqs = [rng.randn(t, 2, 3).astype(np.float32) for t in (5, 8)]
    h0 = rng.randn(2, 4).astype(np.float32)
    expected = [[o.asnumpy() for o in net(nd.array(s), nd.array(h0))] for s in seqs]
    net.export(str(tmp_path / "net"))
    np.save(tmp_path / "h0.npy", h0)
    out = tmp_path / "net.onnx"
    for k, seq in enumerate(seqs):
        np.save(tmp_path / f"seq{k}.npy", seq)
    ran = cli_main_per_case(dict(           # one process: the conversion, then both runs
        convert=["convert", tmp_path / "net-symbol.json", tmp_path / "net-0000.params",
                 "--input", "data0:t=5,2,3", "--input", "data1:2,4:float32",
                 "--output-name", "outs", "--output-name", "h", "-o", out],
        **{f"run {k}": ["run", out, "--input", tmp_path / f"seq{k}.npy", tmp_path / "h0.npy",
                        "-o", tmp_path / f"out{k}"] for k in range(len(seqs))}), tmp_path)
    status, stdout, stderr = ran["convert"]
    assert status == 0, stderr[-3000:]
    assert stdout.splitlines()[:4] == [
        f"wrote ONNX model {out}", "format: ONNX (ai.onnx 13)",
        "inputs: data0['t', 2, 3]:float32, data1[2, 4]:float32",
        "outputs: outs['t', 2, 4]:float32, h[2, 4]:float32"]
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    for k, want in enumerate(expected):
        assert ran[f"run {k}"][0] == 0, ran[f"run {k}"][2][-3000:]
        for name, value in zip(("outs", "h"), want):
            np.testing.assert_allclose(np.load(tmp_path / f"out{k}" / f"{name}.npy"), value,
                                       **TOL)


def test_usage_errors(tree_model, tmp_path):
    directory, inputs, _ = tree_model
    files = [directory / "tree-symbol.json", directory / "tree-0000.params"]
    ran = cli_main_per_case({
        "inputs missing": ["convert", *files, inputs[0], "-o", tmp_path / "x.onnx"],
        "a dim of 0": ["convert", *files, "--input", "data0:n=0", "-o", tmp_path / "x.onnx"]},
        tmp_path)
    status, _, stderr = ran["inputs missing"]
    assert status == 2
    assert stderr.splitlines()[-1] == (
        "gluon-cf-export: error: --input must name each data input of the symbol once: it has "
        "['data0', 'data1', 'data2', 'data3']; missing ['data1', 'data2', 'data3'], unknown []")
    status, _, stderr = ran["a dim of 0"]
    assert status == 2
    assert stderr.splitlines()[-1] == (
        "gluon-cf-export: error: --input 'data0:n=0': dim 'n=0' must be a size >= 1 or "
        "DIM=SIZE (an axis that may change size, example SIZE)")
    assert not os.path.exists(tmp_path / "x.onnx")


def test_run_rejects_a_corrupted_artifact(tree_model, tree_artifact, tmp_path):
    directory, inputs, runs = tree_model
    out, converted = tree_artifact
    assert converted.returncode == 0, converted.stderr[-3000:]
    model = onnx.load(str(out))
    node = next(n for n in model.graph.node if n.op_type == "Scan")
    node.attribute[0].g.node[0].domain = "com.evil"  # the Recursion node
    onnx.save(model, str(tmp_path / "evil.onnx"))
    result = cli("run", tmp_path / "evil.onnx", "--input", *runs[0][0], "-o", tmp_path / "out")
    assert result.returncode == 1
    (message,) = result.stderr.strip().splitlines()
    assert message.startswith("gluon-cf-export: error: the body of Scan node ")
    assert message.endswith("(Recursion): operator domain 'com.evil' is not imported by the "
                            "model or not supported")
    assert not os.path.exists(tmp_path / "out")


BAD_SYMBOLS = {
    "truncated_json": '{"nodes": [}',
    "unknown_operator": '{"nodes": [{"op": "null", "name": "data", "inputs": []}, {"op": '
                        '"NoSuchOp", "name": "x", "inputs": [[0, 0, 0]]}], "arg_nodes": [0], '
                        '"heads": [[1, 0, 0]]}',
    "not_json": "\x00\x01binary",
    "empty": "",
}


@pytest.fixture(scope="module")
def bad_symbol_conversions(tmp_path_factory):
    """``{name: (argv, (status, stdout, stderr))}``: convert of each of BAD_SYMBOLS, all in one
    process; its parameter file is not one either."""
    directory = tmp_path_factory.mktemp("bad_symbols")
    params = directory / "net-0000.params"
    params.write_bytes(b"not params")
    cases = {}
    for name, text in BAD_SYMBOLS.items():
        symbol = directory / f"{name}-symbol.json"
        symbol.write_text(text)
        cases[name] = ["convert", symbol, params, "--input", "data:2", "-o",
                       directory / f"{name}.onnx"]
    ran = cli_main_per_case(cases, directory)
    return {name: (argv, ran[name]) for name, argv in cases.items()}


@pytest.mark.parametrize("name", sorted(BAD_SYMBOLS))
def test_bad_symbol_files_give_one_line_and_exit_1(bad_symbol_conversions, name):
    """Issue 10, item 10: every bad file is one line on stderr and a non-zero exit. The one
    MXNet's own parser refuses runs in a real process of its own as well."""
    argv, (status, stdout, stderr) = bad_symbol_conversions[name]
    if name == "unknown_operator":
        assert_same_as_a_real_process(argv, (status, stdout, stderr))
    assert status == 1, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gluon-cf-export: error: "), stderr
    assert "Traceback" not in stderr + stdout
    assert not os.path.exists(argv[-1])
    if name in ("truncated_json", "not_json", "empty"):   # ours, not MXNet's parser's check
        assert "not a symbol file (MXNet writes JSON)" in lines[0], lines[0]


def test_a_missing_file_is_named_in_our_words(tmp_path):
    """Was: ``MXNetError: LocalFileSystem: Check failed: allow_null``."""
    params = tmp_path / "net-0000.params"
    params.write_bytes(b"x")
    for symbol, what in ((tmp_path / "none-symbol.json", "symbol file"),):
        proc = cli("convert", str(symbol), str(params), "--input", "data:2", "-o",
                   str(tmp_path / "out.onnx"))
        assert proc.returncode == 1 and proc.stderr == (
            "gluon-cf-export: error: cannot read the %s %s: No such file or directory\n"
            % (what, symbol)), proc.stderr


# ---- issue 24, item 6: exactly one line on stderr for every failure ---------------------------

def _plain_model(path, nodes, inputs, outputs, metadata=None):
    from onnx import TensorProto, helper

    types = {"f": TensorProto.FLOAT, "i": TensorProto.INT64}
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, types[t], [None]) for n, t in inputs],
        [helper.make_tensor_value_info(n, types[t], [None]) for n, t in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    if metadata:
        helper.set_model_props(model, metadata)
    onnx.save(model, str(path))
    return path


def _cli_failures(tmp_path):
    """``{case: argv}`` for every failure of the CLI reachable without MXNet files."""
    from onnx import helper

    reshape = _plain_model(tmp_path / "reshape.onnx", [helper.make_node("Reshape", ["x", "s"],
                           ["y"])], [("x", "f"), ("s", "i")], [("y", "f")])
    unknown_op = _plain_model(tmp_path / "unknown.onnx", [helper.make_node("NoSuchOp", ["x"],
                              ["y"])], [("x", "f")], [("y", "f")])
    deep = _plain_model(tmp_path / "deep.onnx", [helper.make_node("Identity", ["x"], ["y"])],
                        [("x", "f")], [("y", "f")],
                        {"gluon_cf.index_bounds": "[" * 100_000 + "]" * 100_000})
    x, s, ints = tmp_path / "x.npy", tmp_path / "s.npy", tmp_path / "ints.npy"
    np.save(x, np.ones(6, np.float32))
    np.save(s, np.array([4], np.int64))
    np.save(ints, np.array([1.5], np.float64))
    pickled = tmp_path / "pickled.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07garbage" * 10)
    out = tmp_path / "out"
    return {
        "onnxruntime fails while running": ["run", reshape, "-i", x, s, "-o", out],
        "onnxruntime cannot load": ["run", unknown_op, "-i", x, "-o", out],
        "index bounds nested 100,000 deep": ["run", deep, "-i", x, "-o", out],
        "too few inputs": ["run", reshape, "-i", x, "-o", out],
        "input of a wrong dtype": ["run", reshape, "-i", x, ints, "-o", out],
        "a pickled input": ["run", reshape, "-i", x, pickled, "-o", out],
        "an input file missing": ["run", reshape, "-i", x, tmp_path / "no.npy", "-o", out],
        "model missing": ["run", tmp_path / "no.onnx", "-i", x, "-o", out],
        "model not ONNX": ["run", garbage, "-i", x, "-o", out],
        "info of a model not ONNX": ["info", garbage],
        "info of a missing model": ["info", tmp_path / "no.onnx"],
        "convert of missing files": ["convert", tmp_path / "no-symbol.json",
                                     tmp_path / "no.params", "-i", "data:2", "-o", out],
        "no command": [],
        "unknown command": ["frobnicate"],
        "run without arguments": ["run"],
        "convert with a bad --input": ["convert", "a", "b", "-i", "data:0", "-o", out],
    }


def test_every_failure_is_one_line(tmp_path):
    """Was: ``run`` let onnxruntime print its own ``[E:onnxruntime ...]`` line before ours."""
    failures = _cli_failures(tmp_path)
    ran = cli_main_per_case(failures, tmp_path)
    for case, argv in failures.items():
        status, stdout, stderr = ran[case]
        assert status in (1, 2), (case, status, stderr)
        lines = stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("gluon-cf-export: error: "), \
            (case, stderr)
        assert "Traceback" not in stdout, (case, stdout)
    # one real process of its own per kind of failure: onnxruntime's (its C++ log), a nesting
    # deep enough to crash a process, ours (exit 1) and argparse's (exit 2)
    for case in ("onnxruntime fails while running", "index bounds nested 100,000 deep",
                 "model not ONNX", "unknown command"):
        assert_same_as_a_real_process(failures[case], ran[case])
    assert not os.path.exists(tmp_path / "out")


# ---- issue 24, item 6: run gives a plain ONNX model load()'s limits ----------------------------

HOSTILE_PLAIN_RUN = """
    import resource, sys, time
    import numpy as np
    import onnx
    from onnx import TensorProto, helper
    sys.path.insert(0, "tests")
    from test_artifact_limits import computed_loop, expanded_sum, peak_rss_kib
    from gluon_cf.export import cli
    from gluon_cf.export.artifact import is_artifact

    def plain(model):   # the same graph as standard ONNX: no gluon_cf domain, no metadata
        model = helper.make_model(model.graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 7
        assert not is_artifact(model)
        return model

    tmp = sys.argv[1]
    cap = 3 << 30       # address space: a 6 GiB intermediate cannot even be reserved
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    onnx.save(plain(computed_loop()), tmp + "/loop.onnx")
    onnx.save(plain(expanded_sum()), tmp + "/expand.onnx")
    np.save(tmp + "/trips.npy", np.array(1e12, np.float32))
    np.save(tmp + "/v0.npy", np.zeros(1, np.float32))
    np.save(tmp + "/one.npy", np.ones(1, np.float32))
    np.save(tmp + "/n.npy", np.array([3 << 29], np.int64))    # 6 GiB of float32
    start = time.monotonic()
    print(cli.main(["run", tmp + "/loop.onnx", "-i", tmp + "/trips.npy", tmp + "/v0.npy",
                    "-o", tmp + "/out", "--timeout", "2"]), time.monotonic() - start < 60)
    print(cli.main(["run", tmp + "/expand.onnx", "-i", tmp + "/one.npy", tmp + "/n.npy",
                    "-o", tmp + "/out"]))
    print(peak_rss_kib() < (1 << 20))   # KiB: under 1 GiB
"""


def test_run_gives_plain_onnx_the_limits_of_load(tmp_path):
    """Was: ``run`` ran a plain ONNX model in its own onnxruntime session, unbounded: a Loop
    with a computed trip count of 1e12 ran for ever, an Expand to 6 GiB allocated it."""
    import textwrap

    try:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(HOSTILE_PLAIN_RUN),
                               str(tmp_path)], capture_output=True, text=True, timeout=180,
                              cwd=REPO)
    except subprocess.TimeoutExpired:
        pytest.fail("hung: the Loop inside onnxruntime was not stopped")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["1", "True", "1", "True"], (proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert lines == [
        "gluon-cf-export: error: the main graph: nodes 'Cast', 'Loop': stopped inside "
        "onnxruntime: the artifact ran longer than timeout=2.0 s",
        "gluon-cf-export: error: the main graph: nodes 'Expand', 'ReduceSum': onnxruntime "
        "needed more than max_tensor_bytes=1073741824 bytes for the tensors inside this piece "
        "(a tensor over the limit, or tensors alive together over it)"], proc.stderr
    assert not os.path.exists(tmp_path / "out")


def test_run_timeout_must_be_seconds(tmp_path):
    cases = {bad: ["run", tmp_path / "m.onnx", "-i", tmp_path / "x.npy", "-o", tmp_path / "o",
                   "--timeout", bad] for bad in ("0", "-1", "inf", "nan", "soon")}
    ran = cli_main_per_case(cases, tmp_path)
    for bad, (status, _, stderr) in ran.items():
        assert status == 2 and stderr.splitlines() == [
            f"gluon-cf-export: error: argument --timeout: {bad!r} is not a number of seconds "
            f"> 0 (see gluon-cf-export run --help)"], stderr
    assert_same_as_a_real_process(cases["soon"], ran["soon"])


def _damaged_parameter_files(directory):
    """net.export()'s parameter file of ``tree_model``, damaged four ways."""
    data = (directory / "tree-0000.params").read_bytes()
    params = nd.load(str(directory / "tree-0000.params"))
    name, first = next(iter(params.items()))
    at = data.find(np.array(first.shape, np.int64).tobytes())
    assert at > 0
    files = {"truncated": data[:len(data) // 2], "empty": b"",
             "huge_shape": data[:at] + np.array([1 << 40] + list(first.shape[1:]),
                                                np.int64).tobytes() + data[at + 8 * first.ndim:]}
    for what, content in files.items():
        (directory / f"{what}.params").write_bytes(content)
    nd.save(str(directory / "int32.params"), dict(params, **{name: first.astype("int32")}))
    return {what: directory / f"{what}.params" for what in list(files) + ["int32"]}


_DAMAGED = {"truncated": "not a parameter file MXNet can read (MXNet saves them with net.export "
                         "or mx.nd.save): it is truncated, empty or damaged",
            "empty": "not a parameter file MXNet can read (MXNet saves them with net.export or "
                     "mx.nd.save): it is truncated, empty or damaged",
            "huge_shape": "a parameter in it declares a shape larger than the memory of this "
                          "machine (a damaged file?)"}


def test_damaged_parameter_files_are_named_in_our_words(tree_model, capfd):
    """Was (issue 24, item 5): MXNet's "MXNetError: MXNetError: Check failed: fi->Read(data):
    Invalid NDArray file format" or "Failed to allocate CPU Memory" from the CLI,
    SymbolBlock.imports and save_artifact; a parameter of the wrong dtype gave the CLI's line
    MXNet's name twice, its C++ source location and check."""
    from gluon_cf.export import cli as cli_module, save_artifact

    directory, inputs, runs = tree_model
    symbol = str(directory / "tree-symbol.json")
    examples = [np.load(path) for path in runs[0][0]]
    for what, path in _damaged_parameter_files(directory).items():
        capfd.readouterr()
        code = cli_module.main(["convert", symbol, str(path), *inputs, "-o",
                                str(directory / "out.onnx")])
        err = capfd.readouterr().err
        assert code == 1 and err.count("\n") == 1, err
        if what == "int32":
            # (the operator named at the model's line its node was traced from)
            assert re.match(r"gluon-cf-export: error: export_onnx: the dtypes of the inputs "
                            r"and parameters do not fit the model: \S+cells\.py:\d+: "
                            r"FullyConnected \(node 'tree_\w+'\) refused its inputs \(Error "
                            r"in operator tree_", err), err
            assert "expected int32, got float32" in err and "MXNetError" not in err \
                and "Check failed" not in err and ".h:" not in err, err
            continue
        assert err == f"gluon-cf-export: error: {path}: {_DAMAGED[what]}\n", err
        with pytest.raises(ValueError) as imported:
            gluon.SymbolBlock.imports(symbol, ["data0", "data1", "data2", "data3"], str(path))
        with pytest.raises(ValueError) as saved:
            save_artifact((symbol, str(path)), examples, directory / "out.onnx")
        for raised in (imported, saved):
            assert str(raised.value) == f"{path}: {_DAMAGED[what]}", raised.value


def test_parameters_of_another_dtype_are_refused_on_every_export(tree_model):
    """Was: save_artifact wrote a model onnxruntime then rejected (a float16 or int32 weight
    where the graph computes in float32); and a second export in the same process passed
    MXNet's type inference, the recursive functions' table having kept the first, failed one
    as known."""
    from gluon_cf.export import load, save_artifact

    directory, inputs, runs = tree_model
    symbol = str(directory / "tree-symbol.json")
    params = nd.load(str(directory / "tree-0000.params"))
    name = next(iter(params))
    examples = [np.load(path) for path in runs[0][0]]
    for dtype in ("float16", "int32", "float16"):
        path = directory / f"{dtype}.params"
        nd.save(str(path), dict(params, **{name: params[name].astype(dtype)}))
        with pytest.raises(ValueError) as refused:
            save_artifact((symbol, str(path)), examples, directory / "out.onnx")
        assert re.match(r"save_artifact: the dtypes of the inputs and parameters do not fit "
                        r"the model: \S+cells\.py:\d+: FullyConnected \(node 'tree_\w+'\) "
                        r"refused its inputs \(Error in operator tree_", str(refused.value)), \
            refused.value
        assert f"expected {dtype}, got float32" in str(refused.value), refused.value
    save_artifact((symbol, str(directory / "tree-0000.params")), examples, directory / "ok.onnx")
    got, = load(directory / "ok.onnx")(*examples)
    np.testing.assert_allclose(got, runs[0][1], **TOL)


def test_an_mxnet_error_line_in_our_words():
    from gluon_cf.errors import mxnet_message
    assert mxnet_message("MXNetError: MXNetError: Error in operator n: [06:43:02] ../src/io/../"
                         "operator/elemwise_op_common.h:134: Check failed: assign(&dattr, "
                         "vec.at(i)): Incompatible attr in node n at 1-th input") == \
        "Error in operator n: Incompatible attr in node n at 1-th input"


def test_a_parameter_missing_from_its_file_is_named_as_such(tree_model, tmp_path, capfd):
    """Was: the CLI asked for the missing weight as a data --input, and a wrong shape in the
    parameter file gave "...: MXNetError: Error in operator ..."."""
    from gluon_cf.export import cli as cli_module

    directory, inputs, _ = tree_model
    params = nd.load(str(directory / "tree-0000.params"))
    name = sorted(params)[-1]
    nd.save(str(tmp_path / "lacking.params"), {k: v for k, v in params.items() if k != name})
    first = sorted(params)[0]
    nd.save(str(tmp_path / "reshaped.params"),
            dict(params, **{first: nd.zeros((params[first].shape[0] + 2,)
                                            + params[first].shape[1:])}))
    symbol, out = str(directory / "tree-symbol.json"), str(tmp_path / "out.onnx")
    capfd.readouterr()
    assert cli_module.main(["convert", symbol, str(tmp_path / "lacking.params"), *inputs, "-o",
                            out]) == 2
    bare = name.split(":", 1)[-1]
    assert capfd.readouterr().err.endswith(
        f"missing ['{bare}'], unknown [] ({bare}: not in the parameter file "
        f"{tmp_path / 'lacking.params'} either; is it the model's?)\n")
    assert cli_module.main(["convert", symbol, str(tmp_path / "reshaped.params"), *inputs,
                            "-o", out]) == 1
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "cannot infer the model's shapes" in err \
        and ": Error in operator tree_" in err and "MXNetError" not in err, err
