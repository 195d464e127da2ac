"""Sphinx configuration of gluon_cf's API reference (built by tests/test_docs.py with -W)."""
import os
import sys

sys.path.insert(0, os.path.abspath(".."))

project = "gluon_cf"
author = "gluon_cf developers"
copyright = "2026, gluon_cf developers (Apache-2.0)"

import gluon_cf  # noqa: E402  (after the path is set)

release = version = gluon_cf.__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
autodoc_member_order = "bysource"
# Signatures are typed for mypy and IDEs (py.typed); the pages show names and defaults, and the
# docstrings say what each argument is. (Sphinx 9 renders the aliases of gluon_cf/_typing.py
# nested in Callable[...] as "TypeAliasForwardRef('Arrays')", which no reader needs.)
autodoc_typehints = "none"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = True
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path = []
