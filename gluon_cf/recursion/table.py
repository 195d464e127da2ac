"""The function tables: output shapes and dtypes of recursive functions, per table namespace,
learnt during graph-build inference (NOTE [recursion design] in ``api.py``, last paragraph) and
read by the rules and by the ahead-of-time schedules."""
import mxnet as mx

from ..tracing import PendingShape

_TABLES: dict = {}
_IN_PROGRESS = object()


class _FunctionTable:
    def __init__(self, node):
        self.graphs = node.graphs
        self.specs = node.spec["graphs"]
        self.env_shapes = None
        self.env_types = None
        self.shapes = {}
        self.types = {}

    def out_shapes(self, qname, arg_shapes):
        """Output shapes of ``qname`` for ``arg_shapes`` (``None`` entries while unknown)."""
        key = (qname, tuple(arg_shapes))
        if key in self.shapes:
            if self.shapes[key] is _IN_PROGRESS:
                raise PendingShape(qname)
            return self.shapes[key]
        n = self.specs[qname]["num_outputs"]
        if self.env_shapes is None or None in arg_shapes:
            return [None] * n
        graph = self.graphs[qname]
        self.shapes[key] = _IN_PROGRESS  # recursive calls raise PendingShape; cond copes
        try:
            _, outs = graph.infer_shape(list(arg_shapes) + self.env_shapes)
        except (mx.MXNetError, PendingShape):
            del self.shapes[key]
            raise
        if None in outs:
            del self.shapes[key]
            raise ValueError("gluon_cf.recursive: cannot infer the output shapes of %r for "
                             "arguments of shapes %s (got %s); does it have a base case whose "
                             "shapes do not depend on the recursive call?"
                             % (self.specs[qname]["name"], list(arg_shapes), outs))
        self.shapes[key] = outs
        return outs

    def out_types(self, qname, arg_types):
        key = (qname, tuple(str(t) for t in arg_types))
        if key in self.types:
            return self.types[key]
        n = self.specs[qname]["num_outputs"]
        if self.env_types is None or None in arg_types:
            return [None] * n
        graph = self.graphs[qname]
        self.types[key] = [None] * n
        outs = self.types[key]
        for _ in range(8):
            _, new = graph.infer_type(list(arg_types) + self.env_types)
            new = [t if t is not None else o for t, o in zip(new, outs)]
            if new == outs:
                break
            outs = self.types[key] = new
        return outs


def table(namespace, node=None):
    table = _TABLES.get(namespace)
    if table is None and node is not None:
        table = _TABLES[namespace] = _FunctionTable(node)
    return table
