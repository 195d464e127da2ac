"""gluon_cf: control flow and recursion for MXNet Gluon that survive ``hybridize()``.

Importing this package registers the gluon_cf graph operators with MXNet, which is also what a
process needs before loading an exported model that contains them.

Where ``import mxnet`` fails, the package still imports: the artifact runtime
(``gluon_cf.export.load`` and the CLI's ``run``/``info``) needs only numpy, onnx and
onnxruntime, and the names below that need MXNet raise an ImportError saying so when used.
"""
import importlib
from typing import Optional

from .errors import (AddressSpaceError, CallTreeTooLargeError, EscapedArrayError,
                     RecursionDepthError, SymbolFileError, TruncationWarning, ZeroSizeError)

_MXNET_NAMES = ("cond", "foreach", "while_loop", "recursive", "invoke", "autograph", "to_code",
                "max_iterations", "AutographError",
                "IncompleteShapeError", "DynamicShapeError", "set_executor", "get_executor",
                "MemoryBudget")
_mxnet_missing: Optional[ImportError]
try:
    importlib.import_module("mxnet")
except ImportError as _err:  # noqa: F841 - kept for the message in __getattr__
    _mxnet_missing = _err
else:
    _mxnet_missing = None
    from .ops.cond import cond
    from .remat import MemoryBudget
    from .ops.foreach import foreach
    from .ops.while_loop import while_loop
    from .executor import get_executor, set_executor
    from .node import DynamicShapeError, IncompleteShapeError
    from . import hybrid  # noqa: F401 - runs hybridized blocks with run-time shapes
    from . import bind_shapes  # noqa: F401 - simple_bind refuses arguments of undecided shape
    from .recursion import invoke, recursive
    from .autograph import AutographError, autograph, max_iterations, to_code


def __getattr__(name):
    if name in _MXNET_NAMES and _mxnet_missing is not None:
        raise ImportError("gluon_cf.%s needs MXNet, and 'import mxnet' failed here (%s); without "
                          "MXNet only gluon_cf.export.load and the CLI's run/info work"
                          % (name, _mxnet_missing))
    raise AttributeError("module 'gluon_cf' has no attribute %r" % name)


__all__ = ["cond", "foreach", "while_loop", "recursive", "invoke", "autograph", "to_code",
           "max_iterations", "AutographError", "TruncationWarning", "RecursionDepthError",
           "AddressSpaceError", "CallTreeTooLargeError", "ZeroSizeError", "SymbolFileError",
           "EscapedArrayError",
           "IncompleteShapeError", "DynamicShapeError", "set_executor", "get_executor",
           "MemoryBudget"]
__version__ = "0.1.0"
