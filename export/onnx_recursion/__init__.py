"""Recursion as standard ONNX: the export rule of the ``recursion`` node, which lowers its call
trees to two ``Loop``s (NOTE [recursion as ONNX loops] in ``lowering.py``). ``plan`` decides,
before anything is emitted, what the functions of the node's table lower to (or refuses, naming
the function and why); ``base`` holds what both Loops share; ``expansion`` emits the Loop over
call depths, ``values`` the Loop from the deepest level up; ``lowering`` runs them in order."""
from .lowering import lower_recursion
from .plan import MAX_INVOCATIONS

__all__ = ["MAX_INVOCATIONS", "lower_recursion"]
