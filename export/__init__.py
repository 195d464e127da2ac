"""Export of gluon_cf models (installed as gluon_cf.export).

* :func:`export_onnx` / :func:`export_onnx_symbol`: standard ONNX (cond -> If, foreach -> Scan,
  while_loop -> Loop, recursion whose structure comes from integer inputs -> loops over the
  levels of the call trees); any ONNX runtime runs it.
* :func:`save_artifact` / :func:`load`: models with ``@gluon_cf.recursive`` functions, as ONNX
  plus two operators (``Recursion``, holding the functions' graphs, and ``Invoke``, a call, in
  the ``ai.gluon_cf`` domain; the format is described in ``artifact_format.py``); ``load``
  runs them with onnxruntime, without MXNet or the model's class.
* ``gluon-cf-export`` (``python -m gluon_cf.export.cli``): both from the command line.

The modules, by concern: ``artifact_format`` (what a file holds, limits, errors),
``artifact_validate`` (checking untrusted files), ``artifact`` (loader and interpreter),
``artifact_save`` (conversion of recursion nodes, ``save_artifact``), ``index_bounds`` (index
inputs); ``onnx_export`` (ONNX API, shape planning, converters of cond/foreach/while_loop),
``onnx_graph`` (MXNet symbol -> ONNX graph through mx2onnx). Loading and running need no
MXNet: the saving side is imported on first use.
"""
import importlib

from .artifact import Artifact, load
from .artifact_format import ArtifactDepthError, ArtifactError, Limits

_SAVING = {"export_onnx": "onnx_export", "export_onnx_symbol": "onnx_export",
           "save_artifact": "artifact_save"}


def __getattr__(name):
    """The saving API, imported (with MXNet) on first use."""
    if name in _SAVING:
        return getattr(importlib.import_module("." + _SAVING[name], __name__), name)
    raise AttributeError("module 'gluon_cf.export' has no attribute %r" % name)


__all__ = ["export_onnx", "export_onnx_symbol", "save_artifact", "load", "Artifact",
           "ArtifactError", "ArtifactDepthError", "Limits"]
