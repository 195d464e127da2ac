"""Execute every ``notebooks/*.ipynb``: the notebooks assert their claims, so running one is a test.

Each notebook runs top to bottom in a fresh kernel on this interpreter (a temporary kernelspec
points at ``sys.executable``, so the venv's packages are used whatever ``python`` is on PATH),
in a temporary working directory, with a per-cell timeout. A failing cell fails the test with
that cell's source and error.
"""
import json
import os
import pathlib
import re
import sys

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402  (after importorskip)
from jupyter_client.manager import KernelManager  # noqa: E402
from nbclient.exceptions import CellExecutionError, CellTimeoutError  # noqa: E402

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT = 120  # seconds per cell; a whole notebook is meant to take well under a minute
KERNEL_NAME = "python3"


@pytest.fixture
def kernel_manager(tmp_path, monkeypatch):
    """A KernelManager for a ``python3`` kernelspec that runs ``sys.executable``."""
    spec_dir = tmp_path / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (%s)" % sys.executable,
        "language": "python",
    }))
    # The kernel inherits the environment: put this interpreter's bin directory first so that
    # subprocesses started from a notebook (e.g. `python`) find the same environment.
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep
                       + os.environ.get("PATH", ""))
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    # (the notebooks' tempfile.mkdtemp() directories in tmp_path too: the kernel does not
    # remove them, and they were left in /tmp, one per notebook and run)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    specs = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")], ensure_native_kernel=False)
    # (its connection file in tmp_path: left in /tmp otherwise, one per notebook and run)
    return KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs,
                         connection_file=str(tmp_path / "kernel.json"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, kernel_manager):
    notebook = nbformat.read(str(path), as_version=4)
    workdir = tmp_path / "work"
    workdir.mkdir()
    client = nbclient.NotebookClient(
        notebook, km=kernel_manager, timeout=CELL_TIMEOUT, kernel_name=KERNEL_NAME,
        resources={"metadata": {"path": str(workdir)}})
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError) as err:
        message = re.sub(r"\x1b\[[0-9;]*m", "", str(err))  # drop the traceback's colours
        pytest.fail("%s failed:\n%s" % (path.name, message), pytrace=False)


def test_notebooks_are_found_and_stored_without_outputs():
    assert NOTEBOOKS, "no notebooks found"
    for path in NOTEBOOKS:
        notebook = nbformat.read(str(path), as_version=4)
        for i, cell in enumerate(notebook.cells):
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, \
                    "%s: cell %d is stored with outputs; clear them" % (path.name, i)
