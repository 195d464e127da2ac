"""``SymbolBlock.imports`` and ``mx.sym.load``, patched to check a file before MXNet reads it
(NOTE [files are checked before MXNet reads them] in ``symbol_file.py``): imported by
``hybrid.py`` for the patches."""
import mxnet as mx
from mxnet.gluon import block as _block

from .symbol_entries import (check_parameter_shapes, check_symbol_file_contents,
                             parameter_file_error)

_original_imports = _block.SymbolBlock.imports


def _imports(symbol_file, *args, **kwargs):
    """``SymbolBlock.imports``, checking the file first (NOTE [files are checked before MXNet
    reads them] in ``symbol_file.py``)."""
    check_symbol_file_contents(symbol_file)
    param_file = args[1] if len(args) > 1 else kwargs.get("param_file")
    try:
        block = _original_imports(symbol_file, *args, **kwargs)
    except mx.MXNetError as err:   # the parameter file's, in our words
        ours = param_file and parameter_file_error(err, param_file)
        if not ours:
            raise
        raise ours from None
    if param_file:
        check_parameter_shapes(block, symbol_file, param_file)
    return block


_imports.__doc__ = _original_imports.__doc__
_original_load = mx.symbol.symbol.load


def _load(fname):
    """``mx.sym.load``, checking a file holding gluon_cf nodes or MXNet's own control-flow
    nodes first (NOTE [MXNet's control-flow nodes] in ``symbol_file.py``): a tampered
    ``_foreach`` loaded, then segfaulted its first run."""
    check_symbol_file_contents(fname)
    return _original_load(fname)


_load.__doc__ = _original_load.__doc__
mx.symbol.symbol.load = mx.symbol.load = mx.sym.load = _load
_block.SymbolBlock.imports = staticmethod(_imports)
