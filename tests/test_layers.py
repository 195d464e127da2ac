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
