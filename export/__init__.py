"""Export of gluon_cf models (installed as gluon_cf.export).

* :func:`export_onnx` / :func:`export_onnx_symbol`: standard ONNX (cond -> If, foreach -> Scan,
  while_loop -> Loop) for models without recursion; any ONNX runtime runs it.
* :func:`save_artifact` / :func:`load`: models with ``@gluon_cf.recursive`` functions, as ONNX
  plus two operators (NOTE [artifact format] in ``artifact.py``); ``load`` runs them with
  onnxruntime, without the model's class.
* ``gluon-cf-export`` (``python -m gluon_cf.export.cli``): both from the command line.
"""
from .artifact import (Artifact, ArtifactDepthError, ArtifactError, Limits, load,
                       save_artifact)
from .onnx_export import export_onnx, export_onnx_symbol

__all__ = ["export_onnx", "export_onnx_symbol", "save_artifact", "load", "Artifact",
           "ArtifactError", "ArtifactDepthError", "Limits"]
