"""``@gluon_cf.autograph``: plain Python ``if``, ``while`` and ``for`` on tensors inside
``hybrid_forward``, rewritten into calls that become ``cond``, ``while_loop`` and ``foreach``
on Symbols. Laid out like TensorFlow's AutoGraph: ``impl/`` (the API and the conversion driver,
NOTE [autograph] in ``impl/conversion.py``), ``converters/`` (one source transformer per
construct), ``pyct/static_analysis/`` (activity, liveness, definite assignment) and
``operators/`` (what converted code calls at run time)."""
from .errors import AutographError, AutographWarning
from .impl.api import autograph, max_iterations, to_code
from .operators.variables import Undefined

__all__ = ["autograph", "to_code", "max_iterations", "AutographError", "AutographWarning",
           "Undefined"]
