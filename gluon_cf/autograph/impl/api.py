"""The public API: the ``@autograph`` decorator, ``to_code`` (the source it compiled) and
``max_iterations`` (a loop's bound, written first in its body)."""
import functools
import types
from typing import Callable, Optional

from .conversion import convert_function, entry


def autograph(fn: Optional[Callable] = None, *, max_iterations: Optional[int] = None
              ) -> Callable:
    """Convert ``fn`` (typically ``hybrid_forward``) so that plain Python ``if``, ``while``
    and ``for`` statements on tensors hybridize: usable as ``@autograph`` or
    ``@autograph(max_iterations=N)``.

    The source is read and rewritten once, when decorating. At run time an ``if`` on a Python
    value runs as Python; on an NDArray (eager) it runs the branch the value selects; on a
    Symbol (while hybridizing) it becomes ``gluon_cf.cond``, whose outputs are the variables
    the branches assign and the code after the ``if`` reads. Such a variable must be an array
    in both branches (or the same Python value); otherwise an ``AutographError`` names it and
    the ``if``'s file and line. A ``while`` on a Symbol becomes ``gluon_cf.while_loop`` bounded
    by ``max_iterations`` (or a ``gluon_cf.max_iterations(N)`` first in its body; with neither
    it runs to exact length), a ``for`` over a Symbol ``gluon_cf.foreach`` over its rows.
    ``break``, ``continue`` and ``return`` in loops, early ``return``, and lists appended to
    once per step of a tensor loop convert too, and so do the user's functions and methods it
    calls (not library code). ``to_code`` shows the converted source.

    Example:

    >>> import mxnet as mx, gluon_cf
    >>> class Gate(mx.gluon.HybridBlock):
    ...     @gluon_cf.autograph
    ...     def hybrid_forward(self, F, x):
    ...         if x.sum() > 0:
    ...             y = x * 2
    ...         else:
    ...             y = -x
    ...         return y
    >>> net = Gate()
    >>> net.hybridize()
    >>> net(mx.nd.array([1.0, -3.0])).asnumpy()
    array([-1.,  3.], dtype=float32)
    """
    if fn is None:
        return lambda f: autograph(f, max_iterations=max_iterations)
    if isinstance(fn, types.MethodType):
        # gluon_cf.autograph(self.step): converting the function alone dropped the bound
        # object, a TypeError about a missing argument at the call (issue 24)
        return types.MethodType(autograph(fn.__func__, max_iterations=max_iterations),
                                fn.__self__)
    converted, code = convert_function(fn, max_iterations)
    converted = functools.wraps(fn)(entry(converted))
    setattr(converted, "__wrapped__", fn)
    setattr(converted, "__gluon_cf_autograph_code__", code)
    return converted


def to_code(fn: Callable) -> str:
    """The source ``@autograph`` compiled for ``fn`` (a converted function, or one to
    convert).

    >>> import gluon_cf
    >>> def relu_or_double(x):
    ...     if x.sum() > 0:
    ...         x = x * 2
    ...     return x
    >>> print(gluon_cf.to_code(relu_or_double).splitlines()[0])
    def relu_or_double(x):
    """
    code = getattr(fn, "__gluon_cf_autograph_code__", None)
    return code if code is not None else convert_function(fn)[1]


# The spelling, gluon_cf.autograph.to_code(fn), where gluon_cf.autograph is this
# decorator (the name shadows the package in gluon_cf).
setattr(autograph, "to_code", to_code)


def max_iterations(bound: Optional[int]) -> Optional[int]:
    """As the first statement of a loop body converted by ``@autograph``: the loop runs at
    most ``bound`` steps when its condition is a tensor (an expression such as
    ``self.max_len`` is evaluated where the loop starts). Outside converted code it does
    nothing.

    >>> import gluon_cf
    >>> gluon_cf.max_iterations(8)
    8
    """
    return bound
