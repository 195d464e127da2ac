"""The layers of ARCHITECTURE.md, enforced by import-linter's contracts in setup.cfg."""
import os
import shutil
import subprocess
import sys
import textwrap

from conftest import REPO


def lint_imports(cwd, config=None):
    exe = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    args = [exe if os.path.exists(exe) else shutil.which("lint-imports"), "--no-cache"]
    if config:
        args += ["--config", config]
    return subprocess.run(args, capture_output=True, text=True, cwd=cwd, timeout=300)


def test_contracts_are_kept():
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    """The contracts can fail: a copy of the package whose registry imports an op is refused."""
    shutil.copytree(os.path.join(REPO, "gluon_cf"), tmp_path / "gluon_cf")
    shutil.copytree(os.path.join(REPO, "export"), tmp_path / "export")
    shutil.copy(os.path.join(REPO, "setup.cfg"), tmp_path / "setup.cfg")
    with open(tmp_path / "gluon_cf" / "registry.py", "a") as f:
        f.write(textwrap.dedent("""
            def _upward():
                from .ops import cond  # noqa: F401
        """))
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "gluon_cf.registry -> gluon_cf.ops.cond" in result.stdout, result.stdout[-3000:]


def absolute_gluon_cf_imports(path):
    """``gluon_cf...`` module names a file imports by absolute name, at any depth."""
    import ast
    with open(path) as f:
        tree = ast.parse(f.read())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "gluon_cf"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "gluon_cf":
            found += ["gluon_cf." + a.name for a in node.names]  # from gluon_cf import registry
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "gluon_cf":
            found.append(node.module)
    return found


def test_what_the_contracts_cannot_see():
    """grimp reads ``gluon_cf.export.*`` (installed from export/) as ``gluon_cf``, so the
    contracts ignore those imports in the op files (setup.cfg). Here: the op files reach the
    export kit only, and the kit reaches only the bottom layer of gluon_cf, so there is no
    cycle through the public package."""
    ops = ["gluon_cf/ops/cond.py", "gluon_cf/ops/foreach.py", "gluon_cf/ops/while_loop.py",
           "gluon_cf/recursion/rules.py", "gluon_cf/autograph/operators/item_check.py"]
    for path in ops:
        for name in absolute_gluon_cf_imports(os.path.join(REPO, path)):
            assert name.startswith("gluon_cf.export."), (path, name)
    kit = ["export/onnx_kit.py", "export/onnx_shapes.py", "export/artifact_kit.py",
           "export/artifact_format.py"] + sorted(
        os.path.relpath(os.path.join(REPO, "export", "onnx_graph", name), REPO)
        for name in os.listdir(os.path.join(REPO, "export", "onnx_graph")) if name.endswith(".py"))
    bottom = {"gluon_cf.registry", "gluon_cf.errors", "gluon_cf.executor", "gluon_cf.staging",
              "gluon_cf.operators"}
    for path in kit:
        for name in absolute_gluon_cf_imports(os.path.join(REPO, path)):
            assert name in bottom, (path, name)
    assert absolute_gluon_cf_imports(os.path.join(REPO, "gluon_cf/ops/cond.py")) == [
        "gluon_cf.export.onnx_kit"]  # the check above saw the export rule's import
