"""Types of gluon_cf's public signatures.

MXNet 1.9.1 ships no type information, so to a type checker its arrays are ``Any``; these
aliases say in a signature what is meant: an ``Array`` is an ``mx.nd.NDArray`` eagerly and an
``mx.sym.Symbol`` inside a hybridized block, and ``Arrays`` is one array or a (nested)
list or tuple of them, as the ``F.contrib`` control-flow ops take.
"""
from os import PathLike
from typing import Any, Sequence, Union

Array = Any
Arrays = Union[Array, Sequence[Any]]
Path = Union[str, "PathLike[str]"]
