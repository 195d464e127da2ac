"""``gluon_cf.cond``: run one of two functions depending on a one-element predicate."""
import copy
import json
import weakref
from typing import Callable

import mxnet as mx
import numpy as np

from .. import node as _node, registry, rowwise
from ..rowwise_constants import one_row_output
from ..errors import spec_key
from ..executor import Frame, Parallel
from .._names import name_manager
from .._structure import describe, flatten, regroup
from ..tracing import (PendingShape, PendingSignature, count_subgraph_names,
                       merge_captures, pending_shapes, rename_other_values_of_one_name, trace,
                       user_location)
from ..checks import (ArgumentValueError, ArrayTypeError, check_arity, check_callable,
                      dtype_name, mismatch, mode_of, op_at, pred_shape_error, pred_value,
                      scalar_pred_shape)
from .._typing import Array, Arrays
from ..uploads import from_numpy
from ..zero_size import eagerly

OP = "cond"


def cond(pred: Array, then_func: Callable[[], Arrays], else_func: Callable[[], Arrays],
         name: str = "cond") -> Arrays:
    """Run ``then_func()`` if ``pred`` is true, else ``else_func()``.

    Same calling convention as ``mx.nd.contrib.cond`` / ``mx.sym.contrib.cond``: the branches take
    no arguments and read whatever they need from their closure (outer arrays, Gluon parameters);
    in hybridized mode everything a branch reads from outside becomes an explicit input of the
    graph node, so gradients reach it. Only the taken branch is executed. The semantics are
    those of this Python function::

        def cond(pred, then_func, else_func):
            return then_func() if bool(pred.asscalar()) else else_func()

    Both branches must return as many arrays (an array or a nested list of arrays) with the
    same shapes and dtypes; in hybridized mode this is checked when shapes are known, and the
    error lists both sides. Nested otherwise, hybridized the result has then_func's structure
    (as MXNet's symbolic cond), eagerly the branch's that ran (as MXNet's eager cond). Branches
    may return values that do not depend on any input (MXNet issue 12154), and the ops inside
    them need no special backward support (issue 16188): the gradient is taken by autograd
    through the branch that ran.

    Example, eager (inside ``hybrid_forward`` the same call builds a graph node):

    >>> import mxnet as mx, gluon_cf
    >>> x = mx.nd.array([1.0, -3.0])
    >>> gluon_cf.cond(x.sum() > 0, lambda: x * 2, lambda: -x).asnumpy()
    array([-1.,  3.], dtype=float32)
    """
    pred = _one_symbol(pred)
    if isinstance(pred, mx.sym.Symbol):
        then_func, else_func = _symbol_as_branch(then_func), _symbol_as_branch(else_func)
    check_callable(OP, then_func=then_func, else_func=else_func)
    check_arity(OP, (), then_func=then_func, else_func=else_func)
    if isinstance(pred, mx.sym.Symbol):
        return _cond_symbolic(pred, then_func, else_func, name)
    branch = then_func if pred_value(OP, "pred", pred, eager=True) else else_func
    value = eagerly(branch)     # (NOTE [eager zero-size values])
    try:
        flat, _ = flatten(value, "gluon_cf.cond", "the value returned by a branch")
    except TypeError as err:     # (a branch returning None: the user's cond, not ours)
        where = user_location()
        raise ArrayTypeError("%s%s" % ("%s: " % where if where else "", err)) from None
    # A Python scalar pred is decided now, in either mode: the graph holds the chosen branch.
    if isinstance(pred, mx.nd.NDArray) and \
            mode_of(OP, flat, "the values returned by a branch") == "symbol":
        raise ArrayTypeError("%s: pred is an NDArray (eager mode) but the branch returned "
                             "Symbols; in eager mode branches must compute NDArrays" % op_at(OP))
    return value


def _symbol_as_branch(branch):
    """A Symbol given for a branch of a symbolic cond is a branch returning it: MXNet 1.9.1's
    symbolic cond calls it, and a Symbol called with no arguments is a copy of itself, whose
    values the branch gives (``cond(p, x, self.transforms(x))``, MXNet 2.0-alpha's
    HybridRandomApply). An NDArray stays refused: eagerly MXNet calls it, a TypeError."""
    if isinstance(branch, mx.sym.Symbol):
        return lambda: branch
    return branch


def _one_symbol(pred):
    """A (nested) list holding one Symbol is that Symbol, as MXNet 1.9.1's symbolic cond reads
    it (it flattens pred and asks for one output). A list of one NDArray stays refused: MXNet's
    eager cond takes ``bool()`` of the list, true whatever the array holds."""
    if not isinstance(pred, (list, tuple)):
        return pred
    try:
        flat, _ = flatten(pred, "gluon_cf.cond", "pred")
    except TypeError:
        return pred
    return flat[0] if len(flat) == 1 and isinstance(flat[0], mx.sym.Symbol) else pred


def _cond_symbolic(pred, then_func, else_func, name):
    if len(pred.list_outputs()) != 1:
        raise ArgumentValueError("%s: pred must be a single Symbol, got a group of %d"
                                 % (op_at(OP), len(pred.list_outputs())))
    count_subgraph_names(name + "_pred", name + "_then", name + "_else")
    # MXNet's cond copies pred into its subgraph through an identity: counted, so that the
    # nodes made after it are named as MXNet names them (NOTE [node names])
    name_manager().get(None, "identity")
    then_g = _trace_branch("then_func", then_func)
    else_g = _trace_branch("else_func", else_func)
    for pending, other in ((then_g, else_g), (else_g, then_g)):
        if isinstance(pending, PendingSignature):
            if isinstance(other, PendingSignature):
                raise pending
            # Discovering a recursive function's signature: the branch that does not recurse
            # decides the structure (NOTE [recursion design]); this graph is thrown away.
            return other.out_value
    if then_g.num_outputs != else_g.num_outputs:
        # (MXNet 1.9.1: "Number of outputs differs between then-branch and else-branch"; of
        # as many arrays nested otherwise, its symbolic cond returns then_func's structure, as
        # gluon_cf's does)
        raise ValueError("%s: then_func and else_func return different structures: "
                         "then_func returns %s, else_func returns %s"
                         % (op_at(OP), describe(then_g.out_fmt), describe(else_g.out_fmt)))
    # (NOTE [computed values of one name in while_loop]: each branch its own; else's renamed)
    rename_other_values_of_one_name(else_g, then_g)
    captured, slot_of = merge_captures(OP, [then_g, else_g], first_slot=1, walk_order=True)
    spec = {"graphs": {"then": then_g.spec([], slot_of), "else": else_g.spec([], slot_of)},
            "num_outputs": then_g.num_outputs}
    outputs = _node.make_node(OP, [pred] + captured, spec, name, user_location())
    return regroup(outputs, then_g.out_fmt)


def _trace_branch(role, fn):
    try:
        return trace(OP, role, 0, lambda _: fn())
    except PendingSignature as pending:
        return pending


def _branch_shapes(graph, in_shapes):
    """Infer a branch; ``({}, None)`` if it needs the shapes of a recursive call being inferred.

    The expected PendingShape arrives from MXNet's callback machinery as itself, and nothing is
    printed on the way (NOTE [error messages] in ``node.py``). (``sys.stdout`` must not be
    swapped here: it is process-wide, and threads inferring at once would leave it swapped.)
    """
    before = pending_shapes()
    try:
        return graph.infer_shape(in_shapes)
    except (mx.MXNetError, PendingShape):
        if pending_shapes() > before:
            return {}, None
        raise


def _branch_types(graph, in_types, out_types=None):
    """``graph.infer_type``, or unknown outputs where an operator refused the unknown dtype
    of a recursive call being inferred.

    NOTE [dtypes of a call being inferred]: a recursive function's dtypes are inferred to a
    fixpoint, its recursive calls answering unknown dtypes at first (``out_types`` in
    recursion/table.py), and MXNet's Dropout refuses an input of unknown dtype ("input type to
    dropout is not specified") where other operators pass it on: a TreeLSTM's dropout on its
    children's states failed hybridized. Such a branch answers unknown dtypes, as a branch
    whose shapes are pending does (``_branch_shapes``); the base case decides them, and the
    next round infers the branch with its calls' dtypes known. An answer given while a call's
    dtypes were pending is no graph's to keep (``Graph.infer_type``), nor a function's whose
    last round waited for another's (``out_types``: mutual recursion): kept, the function's
    graph answered the next round from its cache, the branch was never inferred again, and
    one casting its calls' sum to float16 ran, its float16 values in a float32 result
    (without the Dropout, the cond's MismatchError)."""
    before = registry.pending_types()
    try:
        return graph.infer_type(in_types, out_types)
    except (mx.MXNetError, ValueError):
        if registry.pending_types() > before:
            return {}, [None] * graph.num_outputs
        raise


def _branch_shapes_or_error(graph, in_shapes):
    """``(inputs, outputs, None)`` of ``_branch_shapes``, or ``({}, None, error)`` for a branch
    refusing inputs of known shapes: MXNet 1.9.1's ``_cond`` infers no shapes (it has no
    FInferShape) and runs the taken branch only, so a branch that cannot run on these inputs
    is an error only if it is taken (its run raises the same error then); the outputs are
    the other branch's. NOTE [a branch refusing its inputs]"""
    # (only what the branch reads: the deferred weight of a Dense in the other branch is not;
    # a shape known in part is not known: NOTE [shapes known in part in a cond])
    known = all(registry.is_complete(in_shapes[k]) for k in graph.slot_set)
    try:
        inputs, outputs = _branch_shapes(graph, in_shapes)
    except (mx.MXNetError, ValueError) as error:
        if not known or isinstance(error, PendingShape):
            raise
        return {}, None, error
    return inputs, outputs, None


# NOTE [a branch refusing its inputs]
#     ``cond(F.sum(x) > 0, lambda: x * 2, lambda: x - w)`` with ``x`` of shape (4, 3) and ``w``
#     of shape (3,): the else branch cannot run (a Symbol's ``-`` needs equal shapes), and MXNet
#     1.9.1 binds and runs the cond while the then branch is taken. gluon_cf infers both
#     branches' shapes; it refused the whole node. Now a branch that shape inference refuses
#     with every input shape known takes no part in the node's output shapes: it can never
#     run on these inputs (running it raises that error: MXNet raises when it runs too), so
#     declaring the other branch's shapes is never wrong. With the shape of an input the
#     branch reads unknown the error may be an artefact of the unknown dimension, and it is
#     raised as before (an unknown input the branch does not read, the deferred weight of a
#     Dense in the other branch, leaves its error kept: Gluon initialises that weight); both
#     branches refusing is the then branch's error. A branch refusing is raised, too, when
#     the other's shapes are not known yet (its recursive call still being inferred): the
#     refusing branch is then the base case, and setting it aside left the recursion with
#     no path to a shape and an error naming no line of the user's.
#     The refused branch's error is kept (per decoded node and input shapes) and raised when
#     that branch is taken, before it runs: its run alone does not always fail. A nested
#     node's checks are made by shape inference only (a ``while_loop`` whose loop variable
#     grows: its run in the branch's graph of run-time shapes grew it, and the cond failed
#     later with "output 0 has shape (32, 3) at run time", or, had the branch sliced it back
#     to the declared shape, returned the values of a loop eager gluon_cf refuses).


# decoded cond node -> {(branch, input shapes): the error its shape inference raised}
_REFUSALS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

# The conds converted code makes for a construct of the user's (an ``and``/``or``: NOTE
# [autograph and/or]), by the digest of the node's spec text, its identity (NOTE [where a node
# was made]; not its name: two blocks of one prefix, or fresh NameManagers, give one name, and a
# user's own cond of that name, in another file, was said as the other file's and/or):
# ``error(then_dtypes, else_dtypes)`` is the error of branches whose dtypes differ, in the
# construct's words, not then_func's and else_func's.
SIDES: dict = {}


def describe_sides(outputs, error):
    """Says the dtype mismatch of the cond node whose ``outputs`` (a Symbol) these are with
    ``error`` (:data:`SIDES`)."""
    return _kept_in(SIDES, outputs, error)


def _kept_in(table, outputs, value):
    """``outputs``, a cond's, after keeping ``value`` in ``table`` by the node's spec key
    (bounded: the oldest half goes)."""
    if len(table) >= 10_000:
        for old in list(table)[:5_000]:
            table.pop(old, None)     # (another thread may have taken it)
    table[spec_key(outputs.attr("spec"))] = value
    return outputs


# The conds converted code makes whose branch refusing its inputs is the program's error, by
# the digest of the node's spec text: ``error()`` is raised by shape inference, before the
# graph runs (a list's earlier items and the rows a loop appended to it, of other shapes:
# their concat, taken only where the loop appended, failed as the value was read, after the
# block returned an array of the other branch's shape, round 31x).
REFUSED_AT_ONCE: dict = {}


def refused_at_once(outputs, error):
    """``outputs`` of a cond whose branch refusing its inputs raises ``error()`` at shape
    inference (:data:`REFUSED_AT_ONCE`)."""
    return _kept_in(REFUSED_AT_ONCE, outputs, error)


_MAX_REFUSALS = 64      # per node (input shapes a graph was inferred for); the oldest goes


def _shapes_key(shapes):
    return tuple(s if s is None or registry.is_dynamic(s) else tuple(s) for s in shapes)


def _remember_refusals(node, in_shapes, errors):
    """Keep the error of a branch that shape inference refused for these input shapes, for
    its run: a nested node's checks (a ``while_loop``'s loop variable changing shape) are
    made by shape inference only, and a run of the branch would not repeat them. NOTE [a
    branch refusing its inputs]"""
    table = _REFUSALS.get(node)
    key = _shapes_key(in_shapes)
    for role, error in errors.items():
        if error is None:
            if table is not None:
                table.pop((role, key), None)
            continue
        if table is None:
            table = _REFUSALS.setdefault(node, {})
        if len(table) >= _MAX_REFUSALS:
            del table[next(iter(table))]
        table[(role, key)] = error.with_traceback(None)     # (its frames are not kept alive)


def _refusal(node, role, inputs):
    """A fresh copy of the error shape inference raised for branch ``role`` on inputs of
    the shapes of ``inputs`` (it is raised when the branch is taken), or None."""
    error = (_REFUSALS.get(node) or {}).get((role, _shapes_key([x.shape for x in inputs])))
    if error is None:
        return None
    try:
        return copy.copy(error)     # (each raise its own: name_node adds to its message)
    except Exception:  # noqa: BLE001 - an exception type that cannot be copied: itself
        return error


def _merge_branch_shapes(then_out, else_out):
    """The output shapes of a cond whose branches give these: equal shapes are that shape;
    different shapes are known only at run time (the branch taken decides; what is known is
    the dimensions they agree on, if their ranks agree), as MXNet 1.9.1's ``cond`` runs them.
    One side unknown: unknown, not the other side's (the branches may differ)."""
    merged = []
    for a, b in zip(then_out, else_out):
        if a == b or a is None or b is None:
            merged.append(a if a == b else None)
        else:   # what the branches agree on; the rest is decided by the branch taken
            merged.append(registry.Dynamic(registry.common_dims(a, b)))
    return merged


def _known_at_all(shape):
    """Whether ``shape`` is known whole, or known at run time only (Dynamic)."""
    return registry.is_complete(shape) or registry.is_dynamic(shape)


class CondRule(registry.Rule):
    """Node inputs: ``[pred, *captured]``; slots are the node inputs; outputs: the branch's."""

    kind = OP
    graph_roles = ("then", "else")
    outputs_graph = "then"

    # NOTE [shapes known in part in a cond]
    #     ``infer_shape_partial`` hands a node MXNet's shape with a 0 for an unknown dimension
    #     (a table of unknown rows, (0, 4)). Taken as unknown, the branches' ``take`` of a row
    #     saw a table of unknown rank, and MXNet's take refused it ("Axis should be in the
    #     range of [-r, r-1]", naming an internal node) where MXNet's own take answers (1, 4):
    #     the branches are inferred with what is known, as MXNet's foreach infers its body,
    #     and such a shape is unknown everywhere else (a predicate of unknown size is not
    #     refused; a branch refusing it is not set aside as one that cannot run).
    accepts_partial_shapes = True

    def infer_shape(self, node, in_shapes):
        pred_shape = in_shapes[0] if _known_at_all(in_shapes[0]) else None
        if not scalar_pred_shape(pred_shape):    # NOTE [predicates of many elements]
            return list(in_shapes), [registry.Dynamic()] * node.spec["num_outputs"]
        then_in, then_out, then_error = _branch_shapes_or_error(node.graphs["then"], in_shapes)
        else_in, else_out, else_error = _branch_shapes_or_error(node.graphs["else"], in_shapes)
        forced = registry.COND_BRANCH_SHAPES.get()
        # A refusing branch is set aside only for a sibling whose shapes are known: one
        # still pending (its recursive call being inferred) cannot stand in for it.
        if then_error is not None and (else_out is None or forced == "then"):
            raise then_error
        if else_error is not None and (then_out is None or forced == "else"):
            raise else_error
        refused = REFUSED_AT_ONCE.get(node.spec_key) if (then_error or else_error) else None
        if refused is not None:    # (NOTE [a branch refusing its inputs]: converted code's)
            raise refused()
        _remember_refusals(node, in_shapes, {"then": then_error, "else": else_error})
        if then_out is None and else_out is None:
            raise PendingShape("both branches of cond")
        then_out = then_out or else_out
        else_out = else_out or then_out
        shapes = list(in_shapes)
        for inferred in (then_in, else_in):
            for slot, shape in inferred.items():
                if not _known_at_all(shapes[slot]):
                    shapes[slot] = shape
        if forced is not None:
            return shapes, list(then_out if forced == "then" else else_out)
        return shapes, _merge_branch_shapes(then_out, else_out)

    def static_shape_error(self, node, in_shapes):
        return pred_shape_error(OP, "pred", in_shapes[0])

    def infer_type(self, node, in_types):
        if in_types[0] is None:
            # An unknown predicate is float32, as MXNet 1.9.1's CondType makes its cond_func's
            # output (``cond_out_type = {0}``: inferred back into the predicate's inputs). A
            # known one keeps its dtype: MXNet refuses all but float32, gluon_cf takes any.
            in_types = [np.float32] + list(in_types[1:])
        then_in, then_out = _branch_types(node.graphs["then"], in_types)
        else_in, else_out = _branch_types(node.graphs["else"], in_types)
        # The branches' outputs are one set of dtypes: what one branch decides, the other's
        # inputs are inferred from (MXNet 1.9.1's CondType infers both branches into one
        # out_type: then_func's x * 2 of a float64 x makes else_func's y + 1 read a float64 y)
        for role, outs, other in (("then", then_out, else_out), ("else", else_out, then_out)):
            if any(a is None and b is not None for a, b in zip(outs, other)):
                inferred, outs = _branch_types(node.graphs[role], in_types, other)
                if role == "then":
                    then_in, then_out = inferred, outs
                else:
                    else_in, else_out = inferred, outs
        if None not in then_out and None not in else_out and \
                [dtype_name(t) for t in then_out] != [dtype_name(t) for t in else_out]:
            sides = SIDES.get(node.spec_key)
            if sides is not None:    # (a cond of converted code: said in the user's words)
                raise sides([dtype_name(t) for t in then_out],
                            [dtype_name(t) for t in else_out])
            raise mismatch(OP, "output dtypes of then_func and else_func", "then_func",
                           [dtype_name(t) for t in then_out], "else_func",
                           [dtype_name(t) for t in else_out])
        types = list(in_types)
        for inferred in (then_in, else_in):
            for slot, t in inferred.items():
                types[slot] = types[slot] if types[slot] is not None else t
        return types, [a if a is not None else b for a, b in zip(then_out, else_out)]

    def forward(self, node, inputs, out_shapes, frame):
        try:
            taken = "then" if pred_value(OP, "pred", inputs[0]) else "else"
        except ValueError as err:
            # (a graph of run-time shapes runs this outside MXNet's callbacks, which name it)
            _node.name_node(err, node)
            raise
        refused = _refusal(node, taken, inputs) if node in _REFUSALS else None
        if refused is not None:
            raise refused
        return (yield node.graphs[taken].run(inputs, frame))

    def forward_batched(self, node, inputs, frame):
        """Rows with a batched predicate are split by it, each branch runs on its rows."""
        if frame.batched(0):
            return (yield from_batch(node, inputs, frame))
        return (yield self.forward(node, inputs, None, frame))

    def batching_rule(self, node, in_flags, in_shapes, out_shapes, used, rows):
        _branches_act_row_by_row(node, in_flags, in_shapes, rows)

    def to_onnx(self, custom_node):
        """Export rule: cond -> If (NOTE [gluon_cf ops as ONNX control flow] in
        ``export/onnx_kit.py``); both branches read every captured slot from the enclosing
        scope."""
        from gluon_cf.export.onnx_kit import ConverterNode

        node = ConverterNode(custom_node, OP)
        pred = node.truth(custom_node.inputs[0])
        captured = range(1, len(custom_node.inputs))
        branches = [node.convert(key, f"{node.name}_{key}", outer_slots=captured)
                    for key in ("then", "else")]
        node.add("If", [pred], custom_node.outputs, then_branch=branches[0].graph,
                 else_branch=branches[1].graph)
        return node.nodes, [spec.dtype for spec in branches[0].outputs]


def from_batch(node, inputs, frame):
    """Batching rule: split the rows by their predicate, run each branch on its rows (as one
    Parallel request, so recursive calls of both branches batch together), merge in order."""
    rows = frame.rows
    # The one synchronisation of a split: the predicate is read to the host, where the
    # permutation is computed (a few small device ops cost more than this round trip).
    taken = inputs[0].asnumpy().reshape(rows, -1)[:, 0] != 0
    num_taken = int(taken.sum())
    if num_taken in (0, rows):   # one branch for every row: its shared outputs repeated too
        outs = yield node.graphs["then" if num_taken else "else"].run(inputs, frame)
        return [_rows(v, rows, k) if v.ndim and v.shape[0] == 1 else v
                for k, v in enumerate(outs)]
    # perm puts the rows taking "then" first (each side in order); inverse undoes it.
    perm = np.argsort(~taken, kind="stable")
    inverse = np.empty_like(perm)
    inverse[perm] = np.arange(rows)
    index = from_numpy(np.concatenate([perm, inverse]).astype(np.int32))  # no copy
    if inputs[0].context != index.context:
        index = index.as_in_context(inputs[0].context)
    perm, inverse = index[:rows], index[rows:]
    works = []
    for name, begin, end in (("then", 0, num_taken), ("else", num_taken, rows)):
        rows_index = perm[begin:end]
        used = node.graphs[name].slot_set  # gather only what the branch reads
        sub = [mx.nd.take(x, rows_index, axis=0) if i in used and frame.batched(i) else x
               for i, x in enumerate(inputs)]
        works.append(node.graphs[name].run(sub, Frame(frame.recursion, end - begin, frame.flags,
                                                      frame.depth)))
    then_out, else_out = yield Parallel(works)
    return [mx.nd.take(mx.nd.concat(_rows(a, num_taken, k), _rows(b, rows - num_taken, k),
                                    dim=0), inverse, axis=0)
            for k, (a, b) in enumerate(zip(then_out, else_out))]


def _branches_act_row_by_row(node, in_flags, in_shapes, rows):
    """Batching rule (NOTE [row-wise rules]): both branches must act row by row, as graphs,
    on the rows the batched split hands them."""
    spec = json.loads(node["attrs"]["spec"])
    # (decoded: a dict hit, the graph holding this node holds it; its loaded branches live
    # with it, NOTE [decoded nodes live as long as their users])
    loaded = registry.decode(OP, node["attrs"]["spec"]).__dict__.setdefault("rowwise_graphs", {})

    def branch(role):
        graph = spec["graphs"][role]
        graph_json, symbol = rowwise.load_graph(graph["json"], loaded)
        names = symbol.list_inputs()
        return (symbol, graph_json, {n: in_flags[s] for n, s in zip(names, graph["inputs"])},
                {n: in_shapes[s] for n, s in zip(names, graph["inputs"])})

    for role in ("then", "else"):
        try:
            symbol, graph_json, flags, shapes = branch(role)
            rowwise.check_symbol(symbol, graph_json, flags, shapes, rows)
        except rowwise.Rejected as inner:
            other = "else" if role == "then" else "then"
            # (a recursive call giving one row, because the other branch returns a constant:
            # the constant's line is what to change, not the call's; hostile review of
            # session 34)
            constant = None
            if rowwise.one_row_from_a_call(inner):
                symbol, graph_json, flags, shapes = branch(other)
                constant = one_row_output(symbol, graph_json, flags, shapes, rows)
            if constant is not None:
                raise rowwise.Rejected(constant, inner.why + " (in the %s branch of cond %r)"
                                       % (other, node["name"]), inner.hint) from None
            inner.why += " (in the %s branch of cond %r)" % (role, node["name"])
            raise


def _rows(value, rows, k):
    """A branch output with one row per row of the branch: a value that does not depend on the
    rows (one row, e.g. a parameter) is repeated."""
    if value.shape[0] == rows:
        return value
    if value.shape[0] == 1:
        return mx.nd.repeat(value, rows, axis=0)
    raise mx.MXNetError("gluon_cf.cond: in a batch of %d rows, output %d of a branch has shape "
                        "%s; it must have one row per row, or one row for all"
                        % (rows, k, value.shape))


registry.register(CondRule())
