"""gluon_cf: control flow and recursion for MXNet Gluon that survive ``hybridize()``.

Importing this package registers the gluon_cf graph operators with MXNet, which is also what a
process needs before loading an exported model that contains them.
"""
from .ops.cond import cond
from .ops.foreach import foreach
from .ops.while_loop import while_loop
from .executor import get_mode as get_executor, set_mode as set_executor
from .node import ZeroSizeShapeError
from .recursion import RecursionDepthError, invoke, recursive

__all__ = ["cond", "foreach", "while_loop", "recursive", "invoke", "RecursionDepthError",
           "ZeroSizeShapeError", "set_executor", "get_executor"]
__version__ = "0.1.0"
