"""Export of gluon_cf models (installed as gluon_cf.export).

* :func:`export_onnx` / :func:`export_onnx_symbol`: standard ONNX (cond -> If, foreach -> Scan,
  while_loop -> Loop) for models without recursion; any ONNX runtime runs it.
* :func:`save_artifact` / :func:`load`: models with ``@gluon_cf.recursive`` functions, as ONNX
  plus two operators (NOTE [artifact format] in ``artifact.py``); ``load`` runs them with
  onnxruntime, without the model's class.
* ``gluon-cf-export`` (``python -m gluon_cf.export.cli``): both from the command line.
"""
from . import artifact as _artifact
from .artifact import Artifact, ArtifactError, Limits, load, save_artifact
from .onnx_export import export_onnx, export_onnx_symbol
from ..recursion import RecursionDepthError as _RecursionDepthError


class ArtifactDepthError(_artifact.ArtifactDepthError, _RecursionDepthError):
    """A recursive function of an artifact went deeper than its ``max_depth``: an
    ``ArtifactError`` and a ``gluon_cf.RecursionDepthError``, like every executor's.

    ``artifact.py`` must import without gluon_cf (and MXNet), so there it is an ArtifactError
    only; loaded through ``gluon_cf.export``, the loader raises this class (it looks its
    global ``ArtifactDepthError`` up when raising)."""


_artifact.ArtifactDepthError = ArtifactDepthError

__all__ = ["export_onnx", "export_onnx_symbol", "save_artifact", "load", "Artifact",
           "ArtifactError", "ArtifactDepthError", "Limits"]
