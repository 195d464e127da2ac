"""Export of gluon_cf models (installed as gluon_cf.export)."""
from .onnx_export import export_onnx, export_onnx_symbol

__all__ = ["export_onnx", "export_onnx_symbol"]
