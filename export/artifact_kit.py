"""The kit of the recursion ops' export rules (``to_artifact`` in gluon_cf/recursion/rules.py):
what a conversion learns about the functions it converts, and a converter node for one function.

NOTE [function signatures at conversion]
    A function graph declares its formal inputs ``[*args, *environment]`` with dtypes, and every
    ``Invoke`` its output dtypes.  The environment's dtypes are the recursion node's input
    dtypes and the entry function's argument dtypes its first inputs'.  The argument dtypes of
    the other functions (mutual recursion) are those their call sites pass, which we only see
    while converting the callers: so functions are converted in call order, entry first, each
    once its first call site has been converted.  Output dtypes come from MXNet's type
    inference through gluon_cf's function table; at the end every ``Invoke`` is checked
    against the graph it calls.  Shapes come from the export's shape plan
    (``onnx_shapes._collect_function_shapes``), dims that differ between calls or with the
    dynamic axes being ``None``.
"""
import contextvars
from typing import Optional

from .onnx_graph import ValueSpec
from .onnx_kit import ConverterNode
from .onnx_shapes import PLAN


class Signatures:
    """What the conversion learns about functions (NOTE [function signatures at conversion])."""

    def __init__(self):
        self.arg_dtypes = {}   # qname -> [dtype per argument], from the first call converted
        self.calls = []        # (qname, invoke node name, [output dtypes]) per Invoke
        self.outputs = {}      # qname -> [output dtype], once converted
        self.names = {}        # qname -> the Python name of the function


SIGNATURES: "contextvars.ContextVar[Optional[Signatures]]" = contextvars.ContextVar(
    "gluon_cf_artifact_signatures", default=None)


class FunctionNode(ConverterNode):
    """One function of a recursion node: its slots are ``[*its args, *environment]``."""

    def __init__(self, custom_node, slot_specs):
        super().__init__(custom_node, "recursion")
        self.slot_specs = slot_specs  # [(shape or None, dtype)] per slot

    def slot(self, k, onnx_name=None):
        shape, dtype = self.slot_specs[k]
        return ValueSpec(onnx_name or f"_gluon_cf_slot{k}", shape, dtype)


def signatures():
    """The signatures of the conversion running (NOTE [function signatures at conversion])."""
    found = SIGNATURES.get()
    if found is None:
        raise ValueError("gluon_cf recursion nodes are converted by save_artifact only; "
                         "export_onnx produces standard ONNX, which has no recursion")
    return found


def planned_shapes():
    """The export's shape plan (NOTE [shape plan])."""
    return PLAN.get() or {}
