"""The function tables: output shapes and dtypes of recursive functions, per table namespace,
learnt during graph-build inference (NOTE [recursion design] in ``api.py``, last paragraph) and
read by the rules and by the ahead-of-time schedules."""
import contextlib
import threading
import weakref

import mxnet as mx
import numpy as np

from .. import registry
from ..registry import note_pending_types, pending_types
from ..tracing import PendingShape

# The largest max_depth of a recursive function (a depth is a C long in places: export's
# attributes, a symbol file's check); no recursion runs 2^31 nested calls.
MAX_DEPTH = 2 ** 31 - 1

# Weak (NOTE [decoded nodes live as long as their users] in graph/decoded.py): a table lives
# while a decoded recursion node of its namespace holds it (``function_table``); its
# functions' graphs hold the CachedOps and nested nodes of every body.
_TABLES: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()
# One lock for every table's dtype inference (a function's may enter another table's): a
# thread waits for another's answer instead of reading its guess (NOTE below).
_TYPES_LOCK = threading.RLock()

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

# NOTE [an environment known in part]
#     ``infer_shape_partial``/``infer_type_partial``, MXNet's shape pass in ``simple_bind``
#     and ``Module.bind``, and Gluon's deferred initialisation ask a recursion node's shapes
#     with part of its environment unknown: a layer's weight that only the functions read.
#     * Nothing is taken from the table's last seen environment (another inference's): its
#       outputs came out (2, 1, 4) or float64 from the inference before, for data of width 3
#       or of float16.
#     * What the functions' operators infer of the unknown part is the node's answer, as
#       MXNet's foreach infers a weight its body reads (its FullyConnected from its data):
#       ``infer_environment`` infers the entry as the full environment does (a recursive call
#       in progress is pending, its cond infers the other branch), keeping what it learns
#       in that inference only; then infers each call it reaches again, its calls' shapes
#       now known, and takes the environment's shapes their inputs answer; until nothing
#       more is found. The calls a call meets are kept per environment, function and
#       arguments (``_partial_calls``: a graph's cached answer meets no call), and only
#       those the entry's arguments reach are taken: kept per environment alone, a call of
#       data of width 4 from an earlier inference declared w (3, 4) for data of unknown
#       shape, and refused data of width 5. ``Graph.infer_shape`` keeps no answer whose
#       unknown inputs it did not all infer, which the second pass completes. Dtypes
#       likewise (``out_types`` notes the calls met in ``_partial_calls``). An inference
#       failing with part unknown (MXNet's take refuses a table of unknown rank) answers
#       unknown, as before; the error, if any, is the full environment's to give.

# NOTE [one table, many threads]
#     A block's recursion nodes run on MXNet's Custom-operator worker threads, two batches at
#     once when the caller does not wait between calls, and all share their function table.
#     What one thread is in the middle of must not be another's answer:
#     * dtypes being inferred (``[None, ...]`` until known) are seen by the inferring
#       thread's own recursive calls only; another thread asking for the same dtypes waits
#       for the answer. Read by an ahead-of-time schedule, such a guess made a batch of one
#       tree run dynamically, one batch in a few under load (its values right, its path and
#       time not the same for the same input);
#     * the environment's shapes and dtypes are given with the question by the recursion
#       node's inference and by a schedule (each its own batch's), not read from the table's
#       "last seen", which the other thread's batch may have set meanwhile; nested calls of
#       the same inference read them from their thread. What a call's bodies infer at run
#       time reads the last environment its own thread set (its recursion node's forward):
#       read from the table's, two threads calling one block with rows of widths 2 and 3
#       inferred each other's bodies, recursing until RecursionDepthError.


class _FunctionTable:
    def __init__(self, node):
        self.graphs = node.graphs
        self.specs = node.spec["graphs"]
        self._env_shapes = None   # the environment's last seen (see env_shapes)
        self._env_types = None
        self.shapes = {}
        self.types = {}
        # .in_progress: keys inferred now by this thread; .types: dtypes being inferred by
        # this thread (what its recursive calls see); .env_shapes, .env_types: the
        # environment of the inference this thread runs (NOTE [one table, many threads])
        self._local = threading.local()
        self._take_env = None   # environment indices every function uses as take's table only
        # {(("shapes" or "types", environment known in part), function, arguments):
        # {(function, arguments)}}: the calls an inference of a call met (a graph's answer
        # cached, its calls are not met again: NOTE [an environment known in part])
        self._partial_calls = {}

    env_shapes = property(lambda self: self._env("shapes"),
                          lambda self, value: self._see_env("shapes", value))
    env_types = property(lambda self: self._env("types"),
                         lambda self, value: self._see_env("types", value))

    def _see_env(self, what, value):
        # The last seen of all threads, and of this thread's calls: a thread reads its own
        # (NOTE [one table, many threads]).
        setattr(self, "_env_" + what, value)
        setattr(self._local, "seen_" + what, value)

    def _env(self, what):
        for mine in (getattr(self._local, "env_" + what, None),
                     getattr(self._local, "seen_" + what, None)):
            if mine is not None:
                return mine
        return getattr(self, "_env_" + what)

    def out_shapes(self, qname, arg_shapes, env=None):
        """Output shapes of ``qname`` for ``arg_shapes`` (``None`` entries while unknown), with
        the environment's shapes ``env`` (default: the last seen)."""
        if env is not None and getattr(self._local, "env_shapes", None) is None:
            self._local.env_shapes = list(env)
            try:
                return self.out_shapes(qname, arg_shapes)
            finally:
                self._local.env_shapes = None
        env = self.env_shapes
        n = self.specs[qname]["num_outputs"]
        if env is None:
            return [None] * n
        if known_in_part(env):   # NOTE [an environment known in part]
            return self._partial_out_shapes(qname, arg_shapes, env)
        key = (qname, tuple(arg_shapes), self._env_key(env))
        in_progress = getattr(self._local, "in_progress", None)
        if in_progress is None:
            in_progress = self._local.in_progress = set()
        if key in in_progress:
            raise PendingShape(qname)   # a recursive call: NOTE above
        outs = self.shapes.get(key)
        if outs is not None:
            if key in (getattr(self._local, "settling", None) or ()):
                registry.note_pending_shapes(provisional_only=True)   # (no graph keeps it)
            return outs
        if None in arg_shapes:
            return [None] * n
        outermost = not in_progress
        if outermost:
            self._local.learnt, pending = [], registry.pending_shapes()
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
        self._local.learnt.append((key, list(arg_shapes)))
        if outermost and registry.pending_shapes() != pending:
            try:
                self._settle_shapes(self._local.learnt, env, self.shapes)
            except BaseException:
                for other, _ in self._local.learnt:   # (every inference of them fails alike)
                    self.shapes.pop(other, None)
                raise
            return self.shapes[key]
        return outs

    def _settle_shapes(self, learnt, env, store):
        """The calls learnt while a recursive call's shapes were pending, inferred again with
        every call's shapes known until none changes (NOTE [one shape per call]). ``store``:
        where their shapes are (``self.shapes``, or an inference's of an environment known in
        part)."""
        self._local.settling = {key for key, _ in learnt}
        try:
            for _ in range(2 + sum(len(registry.dims_of(o) or ()) + 1
                                   for key, _ in learnt for o in store[key])):
                changed = False
                for key, arg_shapes in learnt:
                    _, again = self.graphs[key[0]].infer_shape(list(arg_shapes) + list(env))
                    outs = store[key]
                    settled = [o if a == o or a is None else registry.Dynamic(
                        registry.common_dims(o, a)) for o, a in zip(outs, again)]
                    if settled != outs:
                        store[key], changed = settled, True
                if not changed:
                    return
        finally:
            self._local.settling = None

    def infer_environment(self, qname, arg_shapes, env):
        """``(environment, output shapes)`` of ``qname`` for ``arg_shapes`` and an environment
        known in part (``None`` where unknown): what its functions' operators infer of the
        unknown part (a weight's shape from its layer's data), then the outputs, unknown where
        they depend on what stays unknown (NOTE [an environment known in part])."""
        env, given = list(env), list(env)
        before = (getattr(self._local, "partial", None), getattr(self._local, "env_shapes", None))
        for _ in range(len(env) + 1):
            if not known_in_part(env):
                return env, self.out_shapes(qname, arg_shapes, env)
            self._local.partial, self._local.env_shapes = {}, env
            try:
                outs = self._partial_out_shapes(qname, arg_shapes, env)
                found = list(env)
                for callee, args in self._calls_reached(("shapes", self._env_key(env)),
                                                        qname, arg_shapes):
                    num_args = self.specs[callee]["num_args"]
                    with self._calling(("shapes", self._env_key(env)), callee, args):
                        ins, _ = self.graphs[callee].infer_shape(list(args) + env)
                    for slot, shape in ins.items():
                        if slot >= num_args and _unknown(found[slot - num_args]):
                            found[slot - num_args] = shape
            except (mx.MXNetError, ValueError):
                # (MXNet's take refuses a table of unknown rank: unknown, as before; what is
                # wrong is said by the inference of the whole environment)
                return given, [None] * self.specs[qname]["num_outputs"]
            finally:
                self._local.partial, self._local.env_shapes = before
            if found == env:
                return env, outs
            env = found
        return env, outs

    def infer_environment_types(self, qname, arg_types, env):
        """``(environment, output dtypes)`` as ``infer_environment`` for shapes: the entry's
        dtypes inferred with the environment known in part, then each function it met
        inferred again for what its operators say of the environment's unknown dtypes."""
        env, given = _type_classes(env), _type_classes(env)
        n = self.specs[qname]["num_outputs"]
        before = getattr(self._local, "env_types", None)
        for _ in range(len(env) + 1):
            if None not in env:
                return env, self.out_types(qname, arg_types, env)
            if None in arg_types:
                break
            self._local.env_types = env
            try:
                outs = self.out_types(qname, arg_types)
                found = list(env)
                scope = ("types", tuple(str(t) for t in env))
                for callee, args in self._calls_reached(scope, qname, _type_classes(arg_types)):
                    with self._calling(scope, callee, args):
                        ins, _ = self.graphs[callee].infer_type(list(args) + env)
                    num_args = self.specs[callee]["num_args"]
                    found = [t if t is not None else ins.get(num_args + k)
                             for k, t in enumerate(found)]
            except (mx.MXNetError, ValueError):   # (as infer_environment's)
                return given, [None] * n
            finally:
                self._local.env_types = before
            if found == env:
                return env, outs
            env = found
        return env, [None] * n

    def _partial_out_shapes(self, qname, arg_shapes, env):
        """``out_shapes`` with ``env`` known in part, inside ``infer_environment`` (unknown
        outside it): the shapes learnt are kept by that inference only."""
        n = self.specs[qname]["num_outputs"]
        learnt = getattr(self._local, "partial", None)
        key = (qname, tuple(arg_shapes))
        if learnt is None or None in arg_shapes:
            return [None] * n
        scope = ("shapes", self._env_key(env))
        self._note_call(scope, qname, key[1])
        if learnt.get(key) is not None:
            return learnt[key]
        if key in learnt:
            raise PendingShape(qname)   # a recursive call: its cond infers the other branch
        outermost, pending = None not in learnt.values(), registry.pending_shapes()
        learnt[key] = None
        try:
            with self._calling(scope, qname, key[1]):
                _, outs = self.graphs[qname].infer_shape(list(arg_shapes) + list(env))
        except PendingShape:
            outs = None
        if outs is None or None in outs:
            del learnt[key]
            return [None] * n
        learnt[key] = outs
        if outermost and registry.pending_shapes() != pending:   # NOTE [one shape per call]
            self._settle_shapes([(k, list(k[1])) for k, o in learnt.items() if o is not None],
                                env, learnt)
            return learnt[key]
        return outs

    def _note_call(self, scope, qname, args):
        """A call of ``qname`` on ``args`` met in an inference of an environment known in part
        (``scope``): an edge from the call being inferred in this thread, if any (NOTE [an
        environment known in part])."""
        caller = getattr(self._local, "caller", None)
        if caller is not None and caller[0] == scope:
            self._partial_calls.setdefault(caller, set()).add((qname, tuple(args)))

    @contextlib.contextmanager
    def _calling(self, scope, qname, args):
        """The calls met meanwhile in this thread are ``qname``'s on ``args`` (``scope``:
        ``_note_call``'s; None: none noted)."""
        before = getattr(self._local, "caller", None)
        self._local.caller = None if scope is None else (scope, qname, tuple(args))
        try:
            yield
        finally:
            self._local.caller = before

    def _calls_reached(self, scope, qname, args):
        """The calls (``(function, arguments)``) an inference of ``qname`` on ``args`` meets,
        itself first, in this or an earlier inference of the environment ``scope`` (a graph's
        answer cached, its calls are not met again): never another entry's or arguments'."""
        reached, todo = [], [(qname, tuple(args))]
        while todo:
            call = todo.pop()
            if call not in reached and None not in call[1]:
                reached.append(call)
                todo.extend(sorted(self._partial_calls.get((scope,) + call, ()), key=repr))
        return reached

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
                     else None if s is None else tuple(s) for i, s in enumerate(env))

    def out_types(self, qname, arg_types, env=None):
        # The environment's types are part of the key, as for shapes (parameters of another
        # dtype are another function), and a failed inference is not kept: a later inference
        # of the same types must fail the same way, not find [None, ...] and pass.
        if env is not None and getattr(self._local, "env_types", None) is None:
            self._local.env_types = list(env)
            try:
                return self.out_types(qname, arg_types)
            finally:
                self._local.env_types = None
        # numpy's type classes, as MXNet's callbacks pass them (export's plan passed np.dtype
        # objects: of float64 arrays, the graphs' inference answered no dtype)
        arg_types = _type_classes(arg_types)
        env = None if self.env_types is None else _type_classes(self.env_types)
        key = (qname, tuple(str(t) for t in arg_types),
               None if env is None else tuple(str(t) for t in env))
        scope = None
        if env is not None and None in env and None not in arg_types:
            # (the calls met, for infer_environment_types: NOTE [an environment known in part])
            scope = ("types", tuple(str(t) for t in env))
            self._note_call(scope, qname, tuple(arg_types))
        if key in self.types:
            return self.types[key]
        n = self.specs[qname]["num_outputs"]
        if env is None or None in arg_types:
            return [None] * n
        inference = getattr(self._local, "types", None)
        if inference is not None:   # a call met by this thread's inference of dtypes
            return inference.ask(key, (qname, arg_types, scope))
        with _TYPES_LOCK:   # another thread inferring the same types: its answer
            if key in self.types:
                return self.types[key]
            inference = self._local.types = _DtypesInference(self)
            try:
                outs, kept = inference.run(key, (qname, arg_types, scope))
            finally:
                self._local.types = None
            self.types.update(kept)
        return outs

    def _infer_types_of(self, qname, arg_types, scope):
        """One inference of the output dtypes of ``qname`` for ``arg_types`` by its graph,
        the calls it meets answered by this thread's inference (``scope``: ``_calling``'s)."""
        with self._calling(scope, qname, tuple(arg_types)):
            _, outs = self.graphs[qname].infer_type(
                list(arg_types) + _type_classes(self.env_types))
        return outs


# NOTE [dtypes of mutual recursion]
#     A function's output dtypes are inferred to a fixpoint: its recursive calls answer what is
#     known so far (unknown at first), and its graph is inferred again until its answer stands
#     (NOTE [dtypes of a call being inferred] in ops/cond.py). With mutual recursion each call
#     met was inferred the same way, inside each round of its caller, and not kept when it had
#     waited for a caller's dtypes: f0 calling f1 ... f(K-1) calling f0 inferred f(K-1) 2^K
#     times or more (K=8: 12 s on the first call of a hybridized block; K=11: minutes). So one
#     thread's inference of a table's dtypes is one fixpoint over every call it meets
#     (``_DtypesInference``): a round infers each call once, in the order met, a call met again
#     in the same round (or being inferred: a recursive call) answering what is known of it so
#     far; rounds repeat until one learns nothing, so in its last every call was inferred with
#     its calls' final dtypes and every branch was checked against them. Dtypes only become
#     known, so there are at most as many rounds as outputs, each inferring every call once.
#     The answers kept are those of calls whose last inference waited for no unknown dtypes.


class _DtypesInference:
    """One thread's inference of the output dtypes of the calls of a table it meets
    (NOTE [dtypes of mutual recursion])."""

    def __init__(self, table):
        self._table = table
        self.outs = {}              # call (out_types' key) -> its output dtypes known so far
        self.calls = {}             # call -> (function, argument dtypes, _calling's scope)
        self.rounds = {}            # call -> the round it was last inferred in
        self.waited = {}            # call -> whether that inference met unknown dtypes
        self.now = 0
        self.learnt = False

    def ask(self, key, call):
        """What is known of ``key``'s dtypes in this round: inferred once per round."""
        if self.rounds.get(key) != self.now:
            self._infer(key, call)
        outs = self.outs[key]
        if None in outs:   # waiting for dtypes being inferred
            note_pending_types()
        return list(outs)

    def run(self, key, call):
        """``(output dtypes of key, {key: dtypes to keep})``: ``call`` is ``(function,
        argument dtypes, _calling's scope)``."""
        self._infer(key, call)
        while self.learnt and self.now <= sum(len(o) + 1 for o in self.outs.values()):
            self.learnt, self.now = False, self.now + 1
            for key_ in list(self.outs):
                if self.rounds[key_] != self.now:
                    self._infer(key_, self.calls[key_])
        kept = {} if self.learnt else {
            key_: outs for key_, outs in self.outs.items() if not self.waited[key_]}
        return list(self.outs[key]), kept

    def _infer(self, key, call):
        old = self.outs.get(key)
        if old is None:
            old = self.outs[key] = [None] * self._table.specs[key[0]]["num_outputs"]
            self.calls[key] = call
            self.learnt = True
        self.rounds[key] = self.now
        pending = pending_types()
        new = self._table._infer_types_of(*call)
        self.waited[key] = pending_types() != pending
        new = [t if t is not None else o for t, o in zip(new, old)]
        if new != old:
            self.outs[key], self.learnt = new, True


def table(namespace, node=None):
    table = _TABLES.get(namespace)
    if table is None and node is not None:
        table = _TABLES[namespace] = _FunctionTable(node)
    if node is not None and getattr(node, "function_table", None) is not table:
        node.function_table = table   # keeps it (see _TABLES)
    return table


# NOTE [one shape per call]
#     A recursive call's output shapes are learnt from the path that does not recurse: the
#     recursive call raises PendingShape and its ``cond`` answers the other branch's shapes.
#     ``node(i) = cond(leaf, x[i] (width 3), concat(node(l), node(r)))`` was declared (1, 3)
#     for every call, though a call one level up returns (1, 6), eagerly and at run time:
#     hybridized it failed at the first read of its output, after it ran ("output 0 has shape
#     (1, 6) at run time, but its shape rule declared (1, 3)"), naming no branch. So the calls
#     learnt while a call's shapes were pending are inferred again, every call's shapes now
#     known and every branch inferred, until none changes: a call whose answer changes has no
#     one shape whatever the depth, and is known at run time only (``registry.Dynamic``, what
#     its shapes agree on), as a ``cond`` whose branches differ in size is (NOTE [run-time
#     shapes]): the block runs partitioned, each call's shapes those its run gives, as eager
#     mode's. Answers given meanwhile are no graph's to keep (``Graph.infer_shape``, counted by
#     ``registry.note_pending_shapes``): the function's graph answered the second inference
#     from its cache, the first's.


def _unknown(shape):
    """Unknown, or known in part (MXNet's 0 for an unknown dimension, ``()``)."""
    return shape is None or isinstance(shape, (tuple, list)) and not registry.is_complete(shape)


def known_in_part(env):
    """Whether some of the environment's shapes are unknown, or known in part."""
    return any(_unknown(s) for s in env)


def _type_classes(types):
    return [None if t is None else np.dtype(t).type for t in types]
