"""Control-flow nodes in MXNet graphs: one ``Custom`` operator per op kind.

NOTE [node design]
    A gluon_cf node is an MXNet ``Custom`` node with ``op_type="_gluon_cf_<kind>"`` and one string
    attribute, ``spec``: JSON holding the node's subgraphs (MXNet symbol JSON plus slot maps, see
    NOTE [slots] in ``tracing.py``) and the op's own fields. Because the subgraphs travel inside
    the attribute, a graph saved with ``net.export()`` is self-contained: loading it in a process
    that has imported ``gluon_cf`` (which registers the operators) rebuilds everything.

    Each op provides a :class:`Rule` - shape and type inference and a ``forward`` that runs the
    subgraphs' CachedOps. This module does the rest once for all ops: registration, spec decoding,
    and gradients.

NOTE [gradients through a node]
    Forward in training runs the op's ``forward`` under ``autograd.record()`` on inputs marked as
    variables, and keeps (inputs, outputs) on the operator instance: that is the node's saved state
    for backward. ``backward`` calls ``autograd.backward`` on the outputs with the incoming head
    gradients and hands back the inputs' gradients. A rule with ``forward_into`` (the outermost
    stateful foreach, NOTE [where a loop's memory goes] in ``ops/foreach_memory.py``) writes
    MXNet's output arrays itself and keeps, in place of the outputs, the recorded arrays that
    wrote each output row: backward hands each its row of the head gradient. If backward
    comes without a recorded forward (``autograd.record(train_mode=False)`` makes MXNet call
    forward with ``is_train=False``), the forward is recomputed under recording first.
"""
import builtins
import inspect
import json
import re
import threading
from typing import Dict, Tuple

import numpy as np

import mxnet as mx
from mxnet import autograd

from . import _names, executor, failed_calls, node_progress, registry
from ._custom_ops import NOT_UTF8, engine_calls_us, register_guarded, write_like_assign
from .errors import (NAMED_AT, PendingFailures, SymbolFileError, condition_line, created_at,
                     own_line, remember_where, several_elements, where_created)
from .graph import decode
from .graph.decoded import holds_random_ops
from .graph.index_gradients import check_index_gradients
from .graph.shape_inference import refuse_numpy_scalars
from .checks import MismatchError, PredShapeError
from .node_storage import (backward_storage_types, dense_copies, forward_storage_types,
                           inference_copies)
from .node_shape_errors import (DynamicShapeError, IncompleteShapeError, explain_unknown_dims,
                                names_node, note_unknown_dims, refuse_run_time_shapes,
                                refuse_scalar_inputs)

# NOTE [error messages]
#     An exception raised in a Custom operator's callback (our shape inference rejecting a cond
#     whose branches disagree, a RecursionDepthError in forward) does not reach the user by
#     itself: MXNet's callback wrapper prints its traceback on stdout and reports a generic
#     "Check failed: ...callbacks[...]" MXNetError, raised later, elsewhere (at the next sync).
#     So the callbacks are wrapped (``_reporting``): the exception is kept, and what MXNet sees
#     is a marker exception whose printout is dropped (``mx.operator``'s ``print`` is ours, and
#     passes everything else through). When MXNet's Python binding next builds an error
#     (``mxnet.base.get_last_ffi_error``, looked up at call time by every ``check_call``) and it
#     comes from a Custom callback, the kept exception is raised instead: its own type
#     (RecursionDepthError, ValueError, TypeError, ...), its own message naming the op and the
#     node, once, with a traceback that starts at the user's call rather than in a worker thread.
_kept_inference = threading.local()   # (exception, node name): shape/type inference, same thread
_kept_listing = threading.local()     # exception: list_arguments/list_outputs, same thread
_kept_run = PendingFailures()         # forward/backward, on MXNet's worker threads
_original_get_last_ffi_error = mx.base.get_last_ffi_error
_MARKER = "gluon_cf: error reported to the caller"


class _Reported(Exception):
    """What MXNet's callback wrapper sees in place of our exception (and does not print)."""

    def __init__(self):
        super().__init__(_MARKER)


def _remember(callback, exc, node):
    if callback in ("list_arguments", "list_outputs"):
        # Called synchronously while MXNet reads the node (NOTE [callbacks never take the
        # process down]), which raises its error in this same thread.
        _kept_listing.value = exc
    elif callback in ("infer_shape", "infer_type", "infer_storage_type",
                      "infer_storage_type_backward"):
        # MXNet calls inference synchronously and raises its error in this same thread.
        _kept_inference.value = (exc, node.spec.get("node") or "")
    else:
        _kept_run.add(exc)   # NOTE [failed calls read later] in errors.py


def _get_last_ffi_error():
    """MXNet's error, or the exception one of our callbacks kept for it (NOTE above)."""
    err = _original_get_last_ffi_error()
    text = str(err)
    carried = failed_calls.exception_for(text)   # NOTE [failures carried by the outputs]
    if carried is not None:
        return carried.with_traceback(None)
    if "kCustomOpPropInfer" in text or "kCustomOpPropBackwardInfer" in text:
        kept = getattr(_kept_inference, "value", None)
        _kept_inference.value = None
        # only the node whose callback failed (MXNet names a backward node by its own name)
        if kept is not None and (names_node(text, kept[1]) or "PropBackward" in text):
            return kept[0].with_traceback(None)
    elif "callbacks[Type]" in text and getattr(_kept_listing, "value", None) is not None:
        kept, _kept_listing.value = _kept_listing.value, None
        return kept.with_traceback(None)
    elif any(k in text for k in ("kCustomOpForward", "kCustomOpBackward", "kCustomOpPropCreate",
                                 "kCustomFunctionBackward")):   # the last: remat.record_node
        kept = _kept_run.oldest()
        if kept is not None:
            return kept.with_traceback(None)
    elif "Shape inconsistent" in text:
        return explain_unknown_dims(err, text)
    return err


def _quiet_print(*args, **kwargs):
    """``print`` for ``mx.operator``'s callback wrappers: drops the printout of _Reported."""
    if args and isinstance(args[0], str) and _MARKER in args[0]:
        return
    builtins.print(*args, **kwargs)


def name_node(exc, node):
    """Add the name of the graph node to a user-facing error raised while running it."""
    if node is None or isinstance(exc, mx.MXNetError) and \
            not isinstance(exc, (MismatchError, PredShapeError)) \
            or not isinstance(exc, (ValueError, TypeError, NotImplementedError, RuntimeError)):
        return
    name = node.spec.get("node")
    shape = getattr(exc, "shape", None) if isinstance(exc, PredShapeError) else None
    condition = condition_line(name) if name and shape is not None else None
    if condition is not None and not getattr(exc, "_gluon_cf_node", None):
        # (an autograph if or while on several elements: eager's message, its line and
        # remedy, not the cond's or while_loop's the user never wrote; autograph review of
        # session 34)
        what, where = condition
        exc.args = (several_elements(where, what, shape),)
        setattr(exc, "_gluon_cf_node", name)
        return
    if name and len(exc.args) == 1 and isinstance(exc.args[0], str) \
            and not getattr(exc, "_gluon_cf_node", None):
        exc.args = ("%s\n(in gluon_cf node %r%s)" % (exc.args[0], name, created_at(node)),)
        setattr(exc, "_gluon_cf_node", name)   # read back by getattr above


mx.base.get_last_ffi_error = _get_last_ffi_error
mx.operator.print = _quiet_print
_original_waitall = mx.nd.ndarray.waitall


def _waitall():
    """``mx.nd.waitall()``; once it returns or raises, no failure is pending in MXNet (its
    WaitForAll raises the first and forgets all): what is kept is stale (NOTE [failed calls
    read later])."""
    try:
        _original_waitall()
    finally:
        _kept_run.clear()
        failed_calls.KEPT.clear()


_waitall.__doc__ = _original_waitall.__doc__
for _module in (mx.nd.ndarray, mx.nd, getattr(mx, "npx", None)):   # (mx.npx.waitall: the same)
    if getattr(_module, "waitall", None) is _original_waitall:
        setattr(_module, "waitall", _waitall)


# NOTE [callbacks never take the process down]
#     MXNet's ``mx.operator.register`` runs every callback of a CustomOpProp inside a ``try`` that
#     turns an exception into a False return, which MXNet's C++ side turns into an MXNetError
#     (and our ``_reporting`` into the exception itself, NOTE [error messages]) - every callback
#     but one: the operator's constructor, called by the ``creator`` callback outside any
#     ``try``. An exception there returns garbage to C++, which then calls uninitialised
#     callback pointers: a tampered ``spec`` in a file (NOTE [files are checked before MXNet
#     reads them] in ``symbol_file.py``) killed any process that loaded it. So the
#     constructor never raises: it keeps what went wrong, and ``list_arguments``, the callback
#     MXNet calls next while reading the node, raises it, on the same thread, as the error
#     of the MXNet call that read the file (``mx.sym.load``, ``SymbolBlock.imports``, ...).


_WRITING = {   # the arrays a failed forward/backward writes (NOTE in failed_calls.py)
    "forward": lambda a: [o for o, r in zip(a["out_data"], a["req"]) if r != "null"],
    "backward": lambda a: [g for g, r in zip(a["in_grad"], a["req"]) if r != "null"]}


def _reporting(method):
    """Wrap a Custom operator callback so that its exception reaches the user (see above)."""
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            name_node(exc, self.node)
            if method.__name__ in _WRITING and failed_calls.carry(exc, _WRITING[method.__name__](
                    inspect.signature(method).bind(self, *args, **kwargs).arguments)):
                return None   # NOTE [failures carried by the outputs] in failed_calls.py
            _remember(method.__name__, exc, self.node)
            raise _Reported() from None
    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


reporting = _reporting   # (index_guard.py's operator)


def make_node(kind, inputs, spec, name, where=None):
    """The outputs of a new node of ``kind``, named as MXNet names its own (NOTE [node names]).
    ``where``: ``"file:line"`` of the user's call that made it, for messages about the node."""
    hint = name if name in NAMED_AT else registry.mxnet_node_name(kind) or name or kind
    where = own_line(name, where)
    name = _names.name_manager().get(None, hint)
    spec = dict(spec, num_inputs=len(inputs), node=name)
    text = dumps(spec)
    if where is not None:
        text = remember_where(text, where, lambda instance: dumps(dict(spec, instance=instance)))
    with mx.name.NameManager():     # the name is final: an enclosing Prefix is in it already
        sym = mx.sym.Custom(*inputs, op_type=registry.op_type(kind), spec=text, name=name)
    return [sym[i] for i in range(spec["num_outputs"])]


def is_float(dtype):
    return np.issubdtype(np.dtype(dtype), np.floating)


def merged_heads(pairs):
    """(head, gradient) pairs with one pair per distinct head array, its gradients summed:
    autograd counts a repeated head once, and a loop may return one array as a step output
    and as a state."""
    merged: Dict[int, Tuple[mx.nd.NDArray, mx.nd.NDArray]] = {}
    for head, grad in pairs:
        merged[id(head)] = (head, merged[id(head)][1] + grad if id(head) in merged else grad)
    return list(merged.values())


def recorded(array):
    """Whether ``array`` is part of the graph autograd recorded (constants are not)."""
    try:
        autograd.get_symbol(array)
        return True
    except mx.MXNetError:
        return False


class _NodeOperator(mx.operator.CustomOp):
    """Runs a node (NOTE [gradients through a node]).

    Which inputs need a gradient is only known in ``backward`` (from ``req``). Marking an input
    that needs none is not harmless (Embedding refuses to differentiate its integer-valued data),
    so forward marks the inputs the previous backward asked for (every float input the first
    time); when that guess is wrong, backward recomputes the forward with the right marks. The
    answer is kept on the decoded node, which outlives this operator (plain ``hybridize()``
    creates a new operator on every call).
    """

    def __init__(self, rule, node, out_shapes):
        super().__init__()
        self.rule = rule
        self.node = node
        self.out_shapes = out_shapes
        self.saved = None
        self.is_train = False
        self.seed = None
        self.caller_seed = None     # NOTE [the caller's seed]
        self.remat = False          # NOTE [hybridized remat recursion]
        self.forward_done = False   # see NOTE [backward of a failed forward]
        self.backward_done = False  # since the last completed forward (a repeated backward)

    def _forward(self, inputs):
        return self.rule.forward(self.node, inputs, self.out_shapes, None)

    def _run(self, inputs, is_train, marks, out_data=None, remat=False):
        """Run the node: its heads for backward, ``[(array, output index, rows)]`` (NOTE
        [where a loop's memory goes] in ``ops/foreach_memory.py``: a rule's ``forward_into``
        writes MXNet's output arrays ``out_data`` itself and returns heads each covering
        one row of an output), and whether the outputs are written already. ``remat``: the
        marked inputs' forward runs unrecorded (NOTE [hybridized remat recursion])."""
        _top_level.node, _top_level.inputs, _top_level.planned = self.node, inputs, []
        _top_level.remat = remat
        _top_level_runs[0] += 1
        try:
            heads, written = self._run_marked(inputs, is_train, marks, out_data, remat)
            return heads, written, _top_level.planned
        finally:
            _top_level.node = _top_level.inputs = _top_level.planned = None
            _top_level.remat = False

    def _run_marked(self, inputs, is_train, marks, out_data, remat=False):
        if marks:   # as attach_grad() on each, in one C call
            marked = [inputs[i] for i in marks]
            autograd.mark_variables(marked, [mx.nd.zeros_like(a) for a in marked])
        with autograd.pause(train_mode=is_train) if marks is None or remat else \
                autograd.record(train_mode=is_train):
            into = getattr(self.rule, "forward_into", None)
            if into is not None and out_data is not None:
                heads = into(self.node, inputs, out_data, is_train)
                if heads is not None:
                    return heads, True
            outputs = executor.run_node(self._forward(inputs))
        return [(o, k, None) for k, o in enumerate(outputs)], False

    def _default_marks(self, inputs):
        if self.node.wanted is not None:
            return self.node.wanted
        return tuple(i for i, x in enumerate(inputs) if is_float(x.dtype))

    @_reporting
    def forward(self, is_train, req, in_data, out_data, aux):
        self.forward_done = self.backward_done = False
        node_progress.started()   # NOTE [the caller waits for the first group]
        try:
            self._forward_outputs(is_train, req, in_data, out_data)
        finally:   # NOTE [the caller waits for the first group] in node_progress.py
            node_progress.progressed()
        self.forward_done = True

    def _forward_outputs(self, is_train, req, in_data, out_data):
        if is_train:   # (recorded training is refused by its backward and the block's call)
            self._refuse_training(recording=False, device_type=in_data[0].context.device_type
                                  if in_data else "cpu")
        self.is_train = is_train
        inputs = dense_copies(in_data)
        if not is_train:   # NOTE [weights reordered in a body]
            inputs = inference_copies(self.node, inputs)
        marks = self._default_marks(inputs) if is_train else None
        direct = all(r in ("write", "inplace") for r in req)
        caller_seed, self.caller_seed = self.caller_seed, None   # (a kept operator: drawn here)
        # Predict mode too: a forward recorded with train_mode=False is re-run by backward,
        # which must draw the forward's numbers (``random.uniform`` draws in either mode).
        self.seed = _replay_seed(self.node, caller_seed)
        rematerialised = getattr(self.rule, "rematerialised", None)
        self.remat = bool(is_train and rematerialised is not None and rematerialised(self.node))
        heads, written, planned = self._run(inputs, is_train, marks,
                                            out_data if direct else None, self.remat)
        self.saved = (inputs, heads, marks, written, planned) if is_train else None
        if self.remat and not planned:   # kept: nothing (NOTE [hybridized remat recursion])
            self.saved = None
        if written:
            return
        for k, (dst, r, value) in enumerate(zip(out_data, req, [o for o, _, _ in heads])):
            if value.shape != dst.shape:
                # assign would broadcast, e.g. one row into the rows MXNet allocated: a value
                # of the wrong shape, silently. Declared shapes come from the op's shape rule.
                raise ValueError(
                    "gluon_cf.%s: output %d has shape %s at run time, but its shape rule "
                    "declared %s to MXNet; shapes that depend on values are not supported in "
                    "hybridized graphs yet" % (self.node.kind, k, value.shape, dst.shape))
            write_like_assign(self, dst, r, value)

    def _refuse_training(self, is_train=True, recording=True, device_type="cpu"):
        """``is_train``: the forward's; ``recording``: False in the forward, which does not
        know whether a backward will come (NOTE [training refused by the node])."""
        self.node.refuse_training_call(recording, device_type, is_train)

    @_reporting
    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        done, self.forward_done = self.forward_done, False
        if not done and not self.backward_done:   # (NOTE [backward of a failed forward])
            return
        out_grad = dense_copies(out_grad)   # (NOTE [sparse inputs of a node])
        self._refuse_training(self.is_train)   # NOTE [the mode of a node's backward]
        backward_train = autograd.is_training()   # (the same NOTE)
        # the inputs asked a gradient (NOTE [integer inputs needing a gradient])
        wanted = tuple(i for i, r in enumerate(req) if r != "null")
        self.node.wanted = wanted
        check_index_gradients(self.node, wanted)   # NOTE: [gradients asked of indices]
        saved, self.saved = self.saved, None
        dropped = saved is None and self.remat   # NOTE [hybridized remat recursion]
        if saved is None or saved[2] != wanted:
            inputs = dense_copies(in_data)
            if self.seed is not None:   # the forward's random draws again
                mx.random.seed(self.seed, ctx=inputs[0].context)
            # Into arrays of its own: MXNet's outputs may be read meanwhile (on their
            # context: NOTE [arrays of a node on another context]).
            scratch = [mx.nd.empty(o.shape, o.context, o.dtype) for o in out_data]
            heads, written, planned = self._run(inputs, self.is_train, wanted, scratch)
            saved = (inputs, heads, wanted, written, planned)
            if self.remat:
                REMAT_RERUNS[0] += dropped   # (not a re-run for other marks)
                if self.seed is not None:   # the rule checks the random draws replayed
                    self.rule.check_recomputed(self.node, heads, out_data)
        inputs, saved_heads, _, written, planned = saved
        # A rule's forward_into returns recorded heads only (one per step: asking autograd
        # for each one's graph would cost time and memory quadratic in the steps).
        heads = [(o, out_grad[k] if row is None else out_grad[k][row].reshape(o.shape))
                 for o, k, row in saved_heads if written or recorded(o)]
        heads = merged_heads(heads)   # a loop's last state may be its last output row
        if heads and wanted:
            # retain_graph: NOTE [autograd on MXNet's worker threads]
            try:
                autograd.backward([o for o, _ in heads], [g for _, g in heads],
                                  retain_graph=True, train_mode=backward_train)
            except mx.MXNetError as err:   # NOTE [outputs of no differentiable input]
                if _NOT_CONNECTED not in str(err):
                    raise
        if wanted:   # NOTE [planned backward] in recursion/planned_backward.py
            for backward in reversed(planned or []):
                backward(backward_train)
        for i, (dst, r) in enumerate(zip(in_grad, req)):
            if r == "null":
                continue
            if i in wanted and inputs[i].grad is not None:
                write_like_assign(self, dst, r, inputs[i].grad)
            elif r in ("write", "inplace"):
                dst[:] = 0
        self.backward_done = True


# NOTE [arrays of a node on another context]
#     MXNet hands a Custom operator its arrays labelled with its engine run context's device
#     id, 0 for every CPU (custom.cc): a node of a block run on ``mx.cpu(1)`` (data-parallel
#     training over ``[cpu(0), cpu(1)]``) sees ``cpu(0)`` arrays, while the current context
#     is the caller's ``cpu(1)``. An array a node makes for itself is made on the context of
#     the arrays it goes with, never the current one: mixed, one CachedOp refused them ("all
#     inputs to live on the same context") or autograd's backward failed its shape check.
# NOTE [outputs of no differentiable input]
#     A node's recorded outputs may reach none of its marked inputs by a differentiable path:
#     a loop whose states are a counter and a flag set under an `if` whose condition reads
#     the inputs (autograph's `return` in a `while`), `take` whose only input is its index.
#     MXNet's autograd.backward then refuses ('There are no inputs in computation graph that
#     require gradients'), which reached the user from their own `backward()` (issue 24). Such
#     inputs' gradients are zero: they stay as attach_grad made them.
_NOT_CONNECTED = "There are no inputs in computation graph that require gradients"
# NOTE [backward of a failed forward]
#     MXNet's threaded engine skips an operation whose inputs carry a pending exception (an
#     earlier operation's failure, not yet read) and passes that exception on to its outputs.
#     Once the user has read the exception, it is cleared, and operations that start later run
#     on the failed values. A hybridized call that a node refused asynchronously has usually
#     queued its backward already (``total.backward()`` before ``total.asscalar()``): MXNet's
#     own operators then compute unread garbage, but a node whose forward failed or was
#     skipped would run its forward again in backward and fail again, a second copy of the
#     error the user has just seen. That copy lands on buffers the block reuses (a static_alloc
#     CachedOp's, and through MXNet's one ``CustomOperator`` exception slot, on the Custom op
#     that finishes next), so the block's next call raised the old error, depending on timing
#     (issue 24). So a backward whose forward did not complete on this operator since the
#     last backward does what the engine does when the error is still pending: nothing. The
#     error is the user's already, or still pending where MXNet put it. (A refused call
#     whose outputs are never read keeps its error pending, as MXNet keeps its own
#     operators' errors: the next read of anything computed from it raises it, and the
#     engine passes it on to whatever next writes the buffers it sits on - with static_alloc,
#     or with gradients, the block's next call. Only waiting for every call would change that.)
#     A backward after this operator's completed backward with no forward since is the user's
#     ``backward(retain_graph=True)`` then ``backward()``: it runs, re-running the forward
#     from its inputs as remat does (the first backward dropped what the forward kept).
#     Returning there left MXNet's gradient buffers unwritten: garbage gradients (1e26 for an
#     input a hybridized recursion read from its closure, tests/test_remat_review.py).
# NOTE [autograd on MXNet's worker threads]
#     A node's backward runs on one of MXNet's Custom-operator worker threads, and the custom
#     backward it reaches through ``autograd.backward`` (a remat loop's or call's, recorded by
#     ``remat.record_node``) runs on another, at once. ``autograd.backward`` ends by clearing the
#     history of the graph it walked, and that clears the autograd entries of its inputs that
#     need no gradient (MXNet's ``AGInfo::Clear``). The remat backward on the other thread reads
#     those same input arrays while it records its recomputation; when the clearing lands
#     between its recording and its own ``autograd.backward``, MXNet fails with "The any
#     container is empty requested=...AGInfo" (1 call in 5 for a hybridized remat foreach with
#     Dropout whose first backward re-runs its forward; CI saw it). MXNet's autograd has no
#     lock, so the node's backward keeps its graph (``retain_graph=True``): nothing is cleared
#     under the other thread, and the graph goes when its head arrays do, as the backward returns.
# NOTE [integer inputs needing a gradient]
#     MXNet 1.9.1 passes gradients through Cast to integer types: an integer input it asks a
#     gradient for is marked like a float one, and integer outputs' head gradients are passed
#     on, as eager. Before, zeros (0 against 23,328 through a recursion's int32 argument).
_top_level = threading.local()   # .node: the node whose Custom operator runs in this thread
# How many times a node's Custom operator has run in this process: a remat recursive call
# refuses a body that ran one (NOTE [rematerialised recursive calls]).
_top_level_runs = [0]


# Forwards of rematerialised nodes re-run whole in their backward (tests read it).
REMAT_RERUNS = [0]


def remat_forward():
    """Whether the node running in this thread is a rematerialised recursion whose training
    forward runs unrecorded (NOTE [hybridized remat recursion] in planned_backward.py)."""
    return bool(getattr(_top_level, "remat", False))


def node_runs():
    """How many times a gluon_cf node's Custom operator has run in this process."""
    return _top_level_runs[0]


def top_level_node():
    """The decoded node whose MXNet Custom operator is running in this thread, or None."""
    return getattr(_top_level, "node", None)


def top_level_inputs():
    """The input arrays of :func:`top_level_node` (its marked ones have grad buffers)."""
    return getattr(_top_level, "inputs", None)


def hand_backward(backward):
    """Called while :func:`top_level_node` runs its forward: ``backward(train_mode)`` is run by
    the node's backward after ``autograd.backward`` on its outputs (in reverse order of the
    calls), and adds what it computes into the grad buffers of the node's marked inputs
    (NOTE [planned backward] in recursion/planned_backward.py)."""
    _top_level.planned.append(backward)


def handed_backwards():
    """The backwards handed to :func:`top_level_node` so far in its forward (in order)."""
    return list(getattr(_top_level, "planned", None) or [])


def draws_random(node):
    """Whether the node's subgraphs (nested ones included) draw random numbers (cached on the
    decoded node)."""
    random = getattr(node, "holds_random_ops", None)
    if random is None:
        random = node.holds_random_ops = holds_random_ops(node.spec)
    return random


def drawn_seed():
    """A seed drawn from MXNet's generator (so that a user's ``mx.random.seed`` fixes it)."""
    return int(mx.nd.random.randint(0, 1 << 30, shape=(1,), dtype="int32").asscalar())


def _replay_seed(node, seed=None):
    """For a node whose subgraphs draw random numbers (Dropout, ``random_*``): a seed (``seed``,
    drawn in the caller's thread, or one drawn now), with which its forward is seeded, so that
    a backward that must re-run the forward (see :class:`_NodeOperator`) draws the same
    numbers; a gradient of other draws would not be the forward's. None for other nodes
    (seeding costs ~2 ms). NOTE [the caller's seed]."""
    if not draws_random(node):
        return None
    if seed is None:
        seed = drawn_seed()
    mx.random.seed(seed)
    return seed


# NOTE [the caller's seed]
#     MXNet's random generators are per thread, and a node's forward runs on a Custom-operator
#     worker thread, which the user's ``mx.random.seed`` never reaches: a hybridized node
#     drawing random numbers (Dropout in a loop body) gave other values on every run with the
#     same seed (MXNet's ``F.contrib`` ops and gluon_cf eager repeat them). The operator is
#     created in the caller's thread for each call (a ``static_alloc`` CachedOp's are kept:
#     their later forwards draw on the worker), so a seed drawn there seeds the forward.


def _prop_class(rule):
    class _NodeProp(mx.operator.CustomOpProp):
        def __init__(self, spec=None, **_scope_attrs):
            # _scope_attrs: attributes MXNet adds from an enclosing AttrScope (e.g. the
            # __subgraph_name__ mark of an outer trace); they are not ours to interpret.
            super().__init__(need_top_grad=True)
            # Never raises: NOTE [callbacks never take the process down].
            self.node, self.invalid = None, None
            self._inferred = None   # (complete input shapes, output shapes) of infer_shape
            try:
                if spec == NOT_UTF8:
                    raise SymbolFileError("a gluon_cf.%s node: its spec attribute is invalid: "
                                          "it is not UTF-8 text" % rule.kind)
                self.node = decode(rule.kind, spec)
            except Exception as exc:  # noqa: BLE001 - reported by list_arguments, see the NOTE
                self.invalid = exc

        def _decoded(self):
            """The decoded node, or the error of its invalid spec (MXNet asks list_arguments
            first, which reports it: NOTE [callbacks never take the process down])."""
            if self.invalid is not None:
                raise self.invalid
            assert self.node is not None   # decode returned it, or raised self.invalid
            return self.node

        @_reporting
        def list_arguments(self):
            return ["in%d" % i for i in range(self._decoded().num_inputs)]

        @_reporting
        def list_outputs(self):
            return registry.output_names(self._decoded().num_outputs)

        @_reporting
        def infer_shape(self, in_shape):
            note_unknown_dims(self.node, in_shape)
            shapes = [tuple(s) if s and all(d > 0 for d in s) else None for s in in_shape]
            ins, outs = rule.infer_shape(self.node, shapes)
            refused = refuse_numpy_scalars(self.node, in_shape, ins, outs)
            if refused is not None:
                raise refused
            if any(registry.is_dynamic(s) for s in outs):
                # Only MXNet calls this (gluon_cf infers its graphs itself, NOTE [run-time
                # shapes]): a graph it runs needs static shapes.
                raise rule.static_shape_error(self.node, shapes) or \
                    refuse_run_time_shapes(self.node, outs)
            if None not in shapes:   # what create_operator asks next (a pure function of them)
                self._inferred = (tuple(shapes), outs)
            # () for what we could not complete. A Python Custom op cannot say "unknown" in
            # MXNet 1.9.1: custom.cc reads the returned dims as uint32 into a TShape of the
            # returned length, so a -1 dim comes back as 4294967295 (a huge known dim: handing
            # MXNet its own partial shape, e.g. (-1, 3) while exporting with dynamic axes,
            # allocated that and crashed) and no length means ndim -1. () is at least
            # refused as inconsistent where MXNet knows better (see explain_unknown_dims).
            # A partial shape (a foreach's, MXNet's 0 for an unknown dimension) is () too:
            # MXNet reads a 0 a Custom op answers as a known empty dimension, and bound a state
            # the body shapes only in part as an empty array (NOTE [arguments of undecided
            # shape] in bind_shapes.py).
            return ([s if registry.is_complete(s) else () for s in ins],
                    [s if registry.is_complete(s) else () for s in outs], [])

        @_reporting
        def infer_storage_type(self, in_stype):
            return forward_storage_types(self._decoded(), in_stype)

        @_reporting
        def infer_storage_type_backward(self, ograd_stype, in_stype, out_stype, igrad_stype,
                                        aux_stype):
            return backward_storage_types(self._decoded, ograd_stype, in_stype, out_stype,
                                          igrad_stype, aux_stype)

        @_reporting
        def infer_type(self, in_type):
            ins, outs = rule.infer_type(self.node, list(in_type))
            return ins, outs, []

        @_reporting
        def create_operator(self, ctx, in_shapes, in_dtypes):
            engine_calls_us()   # NOTE [exit with work pending]
            shapes = [tuple(s) for s in in_shapes]
            refused = refuse_scalar_inputs(self.node, shapes)   # NOTE [a 0-d predicate of a node]
            if refused is not None:
                raise refused
            inferred = self._inferred
            if inferred is not None and inferred[0] == tuple(shapes):
                op = _NodeOperator(rule, self.node, inferred[1])
            else:
                op = _NodeOperator(rule, self.node, rule.infer_shape(self.node, shapes)[1])
            if draws_random(self.node):   # NOTE [the caller's seed]
                op.caller_seed = drawn_seed()
            return op

    _NodeProp.__name__ = "_NodeProp_" + rule.kind
    return _NodeProp


def dumps(spec):
    return json.dumps(spec, separators=(",", ":"), sort_keys=True)


def _register_with_mxnet(rule):
    """Each registered op kind becomes MXNet Custom operator ``_gluon_cf_<kind>``."""
    register_guarded(registry.op_type(rule.kind), _prop_class(rule))


registry.on_register(_register_with_mxnet)
