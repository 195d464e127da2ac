"""The public API is typed: annotated signatures, ``py.typed`` markers, and mypy passing on the
package with the configuration in ``setup.cfg``."""
import importlib
import inspect
import os
import subprocess
import sys

import pytest

from conftest import REPO

PUBLIC_MODULES = ["gluon_cf", "gluon_cf.export", "gluon_cf.data", "gluon_cf.models"]


def _public_callables():
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value):
                if issubclass(value, BaseException) or "__init__" not in vars(value):
                    continue
                yield f"{module_name}.{name}", value.__init__
            elif callable(value):
                yield f"{module_name}.{name}", value


def test_public_signatures_are_annotated():
    missing = []
    for qualname, fn in _public_callables():
        signature = inspect.signature(fn)
        for param in signature.parameters.values():
            if param.name != "self" and param.annotation is inspect.Parameter.empty:
                missing.append(f"{qualname}: parameter {param.name}")
        if signature.return_annotation is inspect.Signature.empty:
            missing.append(f"{qualname}: return")
    assert not missing, missing


def test_py_typed_markers_are_installed():
    import gluon_cf
    import gluon_cf.export
    for package in (gluon_cf, gluon_cf.export):
        assert os.path.exists(os.path.join(os.path.dirname(package.__file__), "py.typed"))


@pytest.mark.timeout(300)
def test_mypy_passes(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Success" in proc.stdout
