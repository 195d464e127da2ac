"""Invocations of recursive functions at run time: what the schedulers batch or run.

A recursion node's forward creates a :class:`RecursionContext` (its function graphs and its
environment); every call, the entry one and each ``invoke``, is an :class:`Invocation` yielded
to the scheduler (NOTE [trampoline] in ``executor.py``, NOTE [batching] in ``batching.py``).
"""
import mxnet as mx

from ..checks import MismatchError
from ..errors import RecursionDepthError
from ..executor import Frame, Parallel


class RecursionContext:
    """What an invocation needs at run time: the function graphs and the environment values."""

    def __init__(self, node, env, parent):
        self.graphs = node.graphs
        self.specs = node.spec["graphs"]
        self.namespace = node.spec["namespace"]
        self.env = list(env)
        self.parent = parent
        self.node = node
        # Invocations of the same function with the same environment may share a batch.
        self.key = (id(self.graphs), tuple(id(e) for e in self.env))
        self.env_shapes = tuple(e.shape for e in self.env)   # read once: .shape is a C call
        self.env_dtypes = tuple(e.dtype for e in self.env)

    def find(self, qname):
        context = self
        while context is not None and qname not in context.graphs:
            context = context.parent
        if context is None:
            raise mx.MXNetError("gluon_cf.invoke: function %r is not defined in any enclosing "
                                "recursion node" % qname)
        return context

    def request(self, qname, args, frame, depth):
        """An :class:`Invocation` of ``qname`` from a rule running under frame ``frame``."""
        spec = self.specs[qname]
        if depth > spec["max_depth"]:
            raise RecursionDepthError(
                "gluon_cf.recursive: %r exceeded max_depth=%d nested calls; does it reach a base "
                "case?" % (spec["name"], spec["max_depth"]))
        rows = frame.rows if frame is not None and frame.rows > 1 and \
            any(frame.batched(i) for i in range(len(args))) else 1
        if rows > 1:  # a shared argument (a constant) gets one row per invocation
            args = [a if frame.batched(i) else mx.nd.repeat(a, rows, axis=0)
                    for i, a in enumerate(args)]
        return Invocation(self, qname, list(args), rows, depth)

    def run(self, qname, args, rows, depth, batched=True):
        """Generator: the body of ``qname`` on ``args`` holding ``rows`` invocations.

        ``batched=False`` (one invocation, by the unbatched executor) runs it without batch
        flags, so nothing inside is treated as a batch (NOTE [batching]).
        """
        flags = [True] * len(args) + [False] * len(self.env) if batched else None
        frame = Frame(self, rows, flags, depth)
        return self.graphs[qname].run(list(args) + self.env, frame)


class Invocation:
    """A request to invoke a recursive function (NOTE [batching] in ``batching.py``)."""

    __slots__ = ("context", "qname", "args", "rows", "depth")

    def __init__(self, context, qname, args, rows, depth):
        self.context, self.qname, self.args = context, qname, args
        self.rows, self.depth = rows, depth

    def unbatched(self):
        """Generator for the unbatched executor: run it now, on its own (one row at a time)."""
        if self.rows == 1:
            return self.context.run(self.qname, self.args, 1, self.depth, batched=False)
        return self._row_by_row()

    def _row_by_row(self):
        parts = yield Parallel([
            Invocation(self.context, self.qname, [a[r:r + 1] for a in self.args], 1,
                       self.depth).unbatched() for r in range(self.rows)])
        for k, column in enumerate(zip(*parts)):
            shapes = sorted({v.shape for v in column})
            if len({s[1:] for s in shapes}) > 1:   # (MXNet's concat fails at a later read)
                raise MismatchError(
                    "gluon_cf.recursive: calls of %r run row by row returned output %d of "
                    "shapes %s: a recursive function's outputs have one shape, its base "
                    "case's; make every path return that shape" % (
                        self.context.specs[self.qname]["name"], k,
                        " and ".join(str(s) for s in shapes)))
        return [mx.nd.concat(*column, dim=0) for column in zip(*parts)]
