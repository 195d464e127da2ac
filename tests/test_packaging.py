"""What a new user meets before any code runs: the licence, the changelog, and an install on an
unsupported Python that says so before anything is built."""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import REPO


def test_licence_and_changelog():
    with open(os.path.join(REPO, "LICENSE")) as f:
        assert "Apache License" in f.read(500)
    with open(os.path.join(REPO, "setup.cfg")) as f:
        assert "license = Apache-2.0" in f.read()
    with open(os.path.join(REPO, "CHANGELOG.md")) as f:
        text = f.read()
    assert "Keep a Changelog" in text and "## [Unreleased]" in text
    import gluon_cf
    assert f"## [{gluon_cf.__version__}]" in text


def test_setup_refuses_other_pythons_first():
    code = ("import runpy, sys; sys.version_info = (3, 12, 1, 'final', 0); "
            "runpy.run_path('setup.py')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1
    assert "gluon_cf needs Python 3.11, and this is Python 3.12" in proc.stderr


def _other_python():
    """A Python 3.12 or 3.13 that runs (pyenv's shims exist even for versions not selected)."""
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[23]*/bin/python")))
    found += [shutil.which(f"python3.{minor}") for minor in (12, 13)]
    for path in filter(None, found):
        if subprocess.run([path, "--version"], capture_output=True).returncode == 0:
            return path
    return None


@pytest.mark.skipif(_other_python() is None, reason="no Python 3.12 or 3.13 on this machine")
def test_pip_install_on_python_312_says_why():
    """The real thing: pip on a newer Python stops at the project's own build step (before it
    used to fail building numpy 1.23.5 with a distutils error)."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([_other_python(), "-m", "venv", tmp], check=True, timeout=120)
        proc = subprocess.run([os.path.join(tmp, "bin", "pip"), "install", "--no-deps",
                               REPO], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "gluon_cf needs Python 3.11" in out, out[-2000:]
    assert "distutils" not in out
