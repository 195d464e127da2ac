"""This thread's MXNet name manager, read as MXNet's own symbol creation reads it.

``mx.name.NameManager.current`` warns a DeprecationWarning on every read (pointing into MXNet,
not at the user's code), and ``NameManager._current.value`` is missing in a thread that has
made no symbol yet; MXNet's ``_symbol_creator`` makes one there, and so does
:func:`name_manager`. Nodes are named through it so that their names are MXNet's own (NOTE
[node names] in registry.py).
"""
import mxnet as mx


def name_manager() -> "mx.name.NameManager":
    """The calling thread's current ``mx.name.NameManager``."""
    current = mx.name.NameManager._current
    if not hasattr(current, "value"):
        current.value = mx.name.NameManager()
    return current.value
