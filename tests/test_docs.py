"""The API reference: Sphinx builds it from the docstrings with warnings as errors, the public
docstrings stand on their own (no references to notes in the source), and every public function
has an example that doctest runs."""
import doctest
import importlib
import inspect
import subprocess
import sys

import pytest

from conftest import REPO

# Every public function, by the name a user calls it with; each needs a doctest example.
PUBLIC_FUNCTIONS = [
    "gluon_cf.cond", "gluon_cf.foreach", "gluon_cf.while_loop", "gluon_cf.recursive",
    "gluon_cf.invoke", "gluon_cf.set_executor", "gluon_cf.get_executor",
    "gluon_cf.autograph", "gluon_cf.to_code", "gluon_cf.max_iterations",
    "gluon_cf.recursion.schedule.report",
    "gluon_cf.export.export_onnx", "gluon_cf.export.export_onnx_symbol",
    "gluon_cf.export.save_artifact", "gluon_cf.export.load",
    "gluon_cf.data.parse_tree", "gluon_cf.data.read_trees", "gluon_cf.data.write_trees",
    "gluon_cf.data.synthetic_treebank", "gluon_cf.data.binary_label",
    "gluon_cf.data.build_vocab", "gluon_cf.data.encode_tree", "gluon_cf.data.batchify_forest",
    "gluon_cf.models.treelstm_eager", "gluon_cf.models.treernn_eager",
    "gluon_cf.models.rntn_eager", "gluon_cf.models.childsum_eager",
    "gluon_cf.models.topdown_eager",
    "gluon_cf.bench.register_method", "gluon_cf.bench.plot.plot_summary",
    "gluon_cf.bench.plot.speedup_table",
    "gluon_cf.data.split.count_shards", "gluon_cf.data.split.balanced_shards",
    "gluon_cf.data.split.shard_sizes", "gluon_cf.data.split.shard_loss_scale",
    "gluon_cf.launch.heartbeat",
]
# Public classes: documented on the reference pages, examples where they help.
PUBLIC_CLASSES = [
    "gluon_cf.recursion.RecursiveFunction", "gluon_cf.export.Artifact", "gluon_cf.export.Limits",
    "gluon_cf.AutographError", "gluon_cf.TruncationWarning",
    "gluon_cf.data.Tree", "gluon_cf.data.EncodedTree", "gluon_cf.data.EncodedForest",
    "gluon_cf.models.TreeLSTM", "gluon_cf.models.TreeRNN", "gluon_cf.models.RNTN",
    "gluon_cf.models.ChildSumTreeLSTM", "gluon_cf.models.TopDownTreeLSTM",
]


def _resolve(dotted):
    module_name, _, attr = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except ModuleNotFoundError:
        return getattr(_resolve(module_name), attr)


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS + PUBLIC_CLASSES)
def test_docstring_is_self_contained(name):
    doc = inspect.getdoc(_resolve(name)) or ""
    assert doc, f"{name} has no docstring"
    assert "NOTE [" not in doc, f"{name}'s docstring points at a note in the source"


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS + PUBLIC_CLASSES)
def test_examples_run(name, tmp_path, monkeypatch):
    obj = _resolve(name)
    globs = dict(vars(inspect.getmodule(obj)))
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs=globs)
    examples = sum(len(t.examples) for t in tests)
    if name in PUBLIC_FUNCTIONS:
        assert examples, f"{name} has no example"
    monkeypatch.chdir(tmp_path)            # examples may write files
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    assert runner.failures == 0, f"{name}: {runner.failures} of {examples} examples failed"


def test_sphinx_builds_without_warnings(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "docs",
         str(tmp_path / "html")], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    for page in ["index", "tutorials", "api/gluon_cf", "api/export", "api/models", "api/data",
                 "api/bench"]:
        text = (tmp_path / "html" / f"{page}.html").read_text()
        assert "NOTE [" not in text, f"{page} points at a note in the source"
    assert "01_control_flow.ipynb" in (tmp_path / "html" / "tutorials.html").read_text()
