"""The function tables: output shapes and dtypes of recursive functions, per table namespace,
learnt during graph-build inference (NOTE [recursion design] in ``api.py``, last paragraph) and
read by the rules and by the ahead-of-time schedules."""
import threading

from ..tracing import PendingShape

_TABLES: dict = {}

# NOTE [pending shapes stay inside the table]
#     Inferring a recursive function's output shapes runs its body, whose recursive calls ask
#     the table for the shapes being inferred: such a call raises PendingShape, and the ``cond``
#     around it infers its other branch (NOTE [recursion design] in ``api.py``). So PendingShape
#     is an answer between the table and the conds of its own functions, never an error; it
#     escaped to users three ways, each closed here:
#     * the calls in progress were marked in the table shared by all threads, so a thread
#       inferring a fresh block's first call saw another thread's work in progress as its own
#       recursion (32 threads calling a fresh block): they are per thread;
#     * an inference ended by any other error (export_onnx refusing a model, a shape error)
#       left its mark behind, and every later inference of those shapes, in the same process
#       (save_artifact of the same block), raised PendingShape: the mark is removed whatever
#       ends the inference;
#     * a PendingShape no cond resolved came out of the outermost inference (export_onnx infers
#       each function on its own, entering mutual recursion at any function, with whatever the
#       table had learnt by then): there it means the function has no path to a base case
#       whose shapes are known, which is said in words.
#     The shapes learnt are keyed by the environment's shapes too (a forest of another size).


class _FunctionTable:
    def __init__(self, node):
        self.graphs = node.graphs
        self.specs = node.spec["graphs"]
        self.env_shapes = None
        self.env_types = None
        self.shapes = {}
        self.types = {}
        # .in_progress: shape keys inferred now by this thread; .types: type keys -> types so far
        self._local = threading.local()
        self._take_env = None   # environment indices every function uses as take's table only

    def out_shapes(self, qname, arg_shapes):
        """Output shapes of ``qname`` for ``arg_shapes`` (``None`` entries while unknown)."""
        env = self.env_shapes
        key = (qname, tuple(arg_shapes), None if env is None else self._env_key(env))
        in_progress = getattr(self._local, "in_progress", None)
        if in_progress is None:
            in_progress = self._local.in_progress = set()
        if key in in_progress:
            raise PendingShape(qname)   # a recursive call: NOTE above
        outs = self.shapes.get(key)
        if outs is not None:
            return outs
        n = self.specs[qname]["num_outputs"]
        if env is None or None in arg_shapes:
            return [None] * n
        outermost = not in_progress
        in_progress.add(key)
        try:
            _, outs = self.graphs[qname].infer_shape(list(arg_shapes) + list(env))
        except PendingShape:
            if not outermost:
                raise
            outs = None
        finally:
            in_progress.discard(key)
        if outs is None or None in outs:
            raise ValueError("gluon_cf.recursive: cannot infer the output shapes of %r for "
                             "arguments of shapes %s (got %s); does it have a base case whose "
                             "shapes do not depend on the recursive call?"
                             % (self.specs[qname]["name"], list(arg_shapes),
                                "none: every path reaches a recursive call" if outs is None
                                else outs))
        self.shapes[key] = outs
        return outs

    def _env_key(self, env):
        """The environment's shapes as far as output shapes depend on them: not the rows of
        an array every function uses only as the table of ``take`` along axis 0 (the
        forest's arrays, new with every batch), which change no shape but their own (as in
        ``Graph.row_check_key``, NOTE [row-wise rules] in ``rowwise.py``)."""
        if self._take_env is None:
            self._take_env = frozenset(
                i for i in range(len(env))
                if all(name in graph.take_tables() for qname, graph in self.graphs.items()
                       for name, slot in zip(graph.input_names, graph.slots)
                       if slot == self.specs[qname]["num_args"] + i))
        return tuple(("any rows",) + tuple(s[1:]) if i in self._take_env and s and s[0] > 0
                     else tuple(s) for i, s in enumerate(env))

    def out_types(self, qname, arg_types):
        # The environment's types are part of the key, as for shapes (parameters of another
        # dtype are another function), and a failed inference is not kept: a later inference
        # of the same types must fail the same way, not find [None, ...] and pass. The types
        # known so far of an inference in progress are what a recursive call sees, in this
        # thread only, as for shapes (NOTE above): another thread finding them took the
        # [None, ...] of a first inference for the answer, and refused a schedule its layout
        # (tests/test_table_shapes.py).
        env = self.env_types
        key = (qname, tuple(str(t) for t in arg_types),
               None if env is None else tuple(str(t) for t in env))
        outs = self.types.get(key)
        if outs is not None:
            return outs
        n = self.specs[qname]["num_outputs"]
        if env is None or None in arg_types:
            return [None] * n
        in_progress = getattr(self._local, "types", None)
        if in_progress is None:
            in_progress = self._local.types = {}
        if key in in_progress:
            return in_progress[key]
        graph = self.graphs[qname]
        outs = in_progress[key] = [None] * n
        try:
            for _ in range(8):
                _, new = graph.infer_type(list(arg_types) + env)
                new = [t if t is not None else o for t, o in zip(new, outs)]
                if new == outs:
                    break
                outs = in_progress[key] = new
        finally:
            del in_progress[key]
        self.types[key] = outs
        return outs


def table(namespace, node=None):
    table = _TABLES.get(namespace)
    if table is None and node is not None:
        table = _TABLES[namespace] = _FunctionTable(node)
    return table
