"""Recursive SubGraphs for Gluon (NOTE [recursion design] in ``api.py``)."""
from . import batching as _batching  # noqa: F401  (registers the batching scheduler)
from . import rules as _rules  # noqa: F401  (registers the recursion and invoke operators)
from .api import DEFAULT_MAX_DEPTH, RecursionDepthError, RecursiveFunction, invoke, recursive

__all__ = ["recursive", "invoke", "RecursiveFunction", "RecursionDepthError", "DEFAULT_MAX_DEPTH"]
