"""Hybridized Gluon blocks whose graphs hold values of run-time shape.

NOTE [partitioned blocks]
    A hybridized block runs its graph as one MXNet CachedOp, in which every gluon_cf node is a
    Custom operator that must declare its output shapes before it runs. A node whose outputs'
    shapes are known only at run time (NOTE [run-time shapes] in ``graph/shape_inference.py``),
    or whose inputs are, cannot. For such a graph the block runs partitioned instead:
    ``graph.PartitionedGraph`` cuts it at its gluon_cf nodes, the ordinary operators between
    them stay CachedOps (MXNet infers their shapes just before each runs, ``boolean_mask``
    included), and the nodes run by their rules in the calling thread, recorded by autograd
    like the segments, so gradients need nothing special.

    Which way a block runs: the CachedOp first, as long as its nodes can declare their output
    shapes. A node whose output shape is known only at run time refuses, during the CachedOp's
    shape inference (before anything runs), with DynamicShapeError; the block then runs
    partitioned for those input shapes, remembered. A node that reads a value computed by a
    dynamic-shape operator of the block's own graph is not even asked by MXNet, so such a
    graph always runs partitioned (``_Plan.always``, found once). Graphs with static shapes
    keep the single CachedOp and its speed, with no inference of ours added (tree models see
    new shapes with every forest); blocks without gluon_cf nodes are MXNet's business alone,
    but for calls with a zero-size input (NOTE [zero-size block inputs]) and graphs cutting
    rows of a run-time shape (NOTE [rows of a run-time shape cut in a block's own graph]).

    ``HybridBlock._call_cached_op`` is MXNet 1.9.1's one entry to running a hybridized block
    (``SymbolBlock``, which ``SymbolBlock.imports`` returns for an exported model, included);
    it is wrapped here, and the original runs everything that needs no partitioning.
"""
import ctypes
import inspect
import json
import threading

from typing import Any, Dict, List

import mxnet as mx
import numpy as np
from mxnet.base import _LIB, check_call
from mxnet.gluon import block as _block

from . import executor, node_progress, registry, remat as _remat
from .graph import (PartitionedGraph, block_index_gradients, has_gluon_cf_nodes,
                    refusing_training)
from .graph.decoded import holds_recursion
from .index_guard import guard_inputs
from .graph.cached_graph import (SIZE_CUTTERS, ReshapeChecks, check_reshapes,
                                 makes_zero_size, reshapes_may_resize)
from .hybrid_inline import (FAILED_NODE, INLINE_FAILED, INLINE_RUNS, RAISED_AT_CALL,
                            inference_inline, inline_inference_graph, inputs_ready, not_lost)
from .errors import (ZeroSizeError, body_value_outside_error, body_variable_error,
                     index_error_of, named_line)
from .node import DynamicShapeError
from .operators import DYNAMIC_SHAPE_OPS, NO_GRADIENT_INPUTS, SOURCE_ATTR
from ._cachedop import (MKLDNN, copied_variable_heads, default_layout_inputs,
                        inlined_as_before)
from ._custom_ops import park_if_exiting
from .shared_handles import own_handles
from . import symbol_loading  # noqa: F401  (SymbolBlock.imports and mx.sym.load, patched)
from . import hybrid_deferred  # noqa: F401  (deferred initialisation's shapes, patched)
from .hybrid_trace import TRACED, check_shapes
from .hybrid_errors import (_RESHAPE_CHECKED, _forward_of, _graph_error_of, _lines_of_operators,
                            _located_takes)

_original_call_cached_op = _block.HybridBlock._call_cached_op


class _Plan:
    """What gluon_cf knows of one built CachedOp of a block: whether its graph has gluon_cf
    nodes, and per signature of input shapes, whether it must run partitioned."""

    def __init__(self, block):
        self.symbol = block._cached_graph[1]   # a new graph (hybridize again): a new _Plan
        self.forward = inspect.unwrap(type(block).hybrid_forward)
        self.text = self.symbol.tojson()
        self.js = json.loads(self.text)
        self.has_nodes = has_gluon_cf_nodes(self.js)
        self.partitioned_shapes = set()   # data shapes for which a node refused
        # Whether a Reshape may change the size (read once; a graph whose Reshapes all keep it
        # takes MXNet's call as it is), and the data shapes checked (bounded, as zero_size):
        # see NOTE [a reshape to another size]
        self.resizing_reshapes = reshapes_may_resize(self.js["nodes"])
        self.reshapes_checked = set()
        self.zero_size = {}   # data shapes -> bool (NOTE [zero-size values in a block's own graph])
        self.reshape_checks = ReshapeChecks()   # the checks' own (ranks or shapes)
        self.reshape_checks.plain = not self.has_nodes
        # See NOTE [rows of a run-time shape cut in a block's own graph]
        self.always = self.has_nodes and self._fed_by_run_time_shapes() or \
            self._fed_by_run_time_shapes(_cuts_rows) or self._holds_user_custom_ops()
        # Recorded, MXNet's CachedOp adds boolean_mask's never-written mask gradient (whatever
        # its memory held: 1e34, nan) into a mask read elsewhere; run partitioned, gluon_cf
        # hands the mask over detached (operators.NO_GRADIENT_INPUTS).
        self.unwritten_gradients = self.has_nodes and any(
            n["op"] in NO_GRADIENT_INPUTS for n in self.js["nodes"])
        self.partitioned = {}   # thread id -> PartitionedGraph
        self.index_refusals = None   # input position -> IndexGradientError's message
        self.inline_inference = self.has_nodes and inline_inference_graph(self.js)
        self.refusing_training = refusing_training(self.js) if self.has_nodes else []
        # NOTE [the caller waits for the first group] in node_progress.py
        self.recursion = self.has_nodes and any(
            registry.kind_of(n) and holds_recursion(n) for n in self.js["nodes"])

    def _holds_user_custom_ops(self):
        """Whether a gluon_cf node of the graph holds a user CustomOp: run as a Custom
        operator, its CachedOp runs the user's on MXNet's custom-op thread, where MXNet hangs
        (NOTE [user CustomOps at run time]); run partitioned, the node runs in the calling
        thread."""
        return any(registry.decode(registry.kind_of(n), n["attrs"]["spec"]).user_custom_nodes
                   for n in self.js["nodes"] if registry.kind_of(n))

    def _fed_by_run_time_shapes(self, reader=registry.kind_of):
        """Whether a gluon_cf node of the graph (or a node ``reader`` names) reads a value
        computed from a dynamic-shape operator of the graph itself: MXNet would not even ask
        that node for its shapes."""
        nodes = self.js["nodes"]
        dynamic: List[bool] = []   # per node: fed by a dynamic-shape operator
        for n in nodes:
            fed = any(dynamic[src] for src, *_ in n["inputs"])
            if fed and reader(n):
                return True
            dynamic.append(fed or n["op"] in DYNAMIC_SHAPE_OPS)
        return False

    def run_partitioned(self, cargs, declared=False):
        # One PartitionedGraph (its CachedOps) per thread: a CachedOp must not be entered by
        # two threads at once (as in graph.Graph).
        thread = threading.get_ident()
        partitioned = self.partitioned.get(thread)
        if partitioned is None:
            blocked = block_index_gradients(self.js)  # as in Graph: one CachedOp per segment
            partitioned = self.partitioned[thread] = PartitionedGraph(_located_takes(
                self.symbol if blocked is None else mx.sym.load_json(blocked), self.forward))
        given = cargs
        if mx.autograd.is_recording():   # NOTE [index gradients of a partitioned block]
            cargs = guard_inputs(cargs, self, _remat.running_body())
        running: list = []
        try:
            return _owned(executor.run_node(partitioned.run(cargs, None, declared, running)),
                          given)
        except Exception as exc:   # NOTE [a failure lost to another thread]: its nodes
            if running:
                setattr(exc, FAILED_NODE, list(running))
            raise


def _owned(outputs, inputs):
    """A partitioned block's ``outputs`` as MXNet's CachedOp returns them: each an array of
    its own. One that is an input (a parameter or data the block returns) or an earlier
    output (returned twice) is a copy, so that writing into it changes neither the block's
    parameters nor the caller's data nor another output (hostile review of session 35: a
    returned weight written to changed the next call's result, partitioned only)."""
    seen = {x.handle.value for x in inputs if isinstance(x, mx.nd.NDArray)}
    owned = []
    for out in outputs:
        if isinstance(out, mx.nd.NDArray):
            if out.handle.value in seen and out.size:   # (no element: nothing to write,
                out = out.copy()                         # and MXNet cannot copy it)
            seen.add(out.handle.value)
        owned.append(out)
    return owned


def _call_cached_op(self, *args):
    """``HybridBlock._call_cached_op``, running graphs of run-time shapes partitioned; MXNet's
    error about an int index past a tensor's axis in converted code is the IndexError at the
    user's line (:func:`errors.index_error_of`)."""
    try:
        return _run_cached_op(self, *args)
    except Exception as err:   # (one short: NOTE [a failure lost to another thread])
        if getattr(err, RAISED_AT_CALL, False):
            raise err.with_traceback(None) from None
        if not isinstance(err, mx.MXNetError):
            return _other_error(self, err)
        ours = index_error_of(err) or _graph_error_of(err, self, args)
        if ours is None:
            raise
        # (a CachedOp whose call failed answers the next call with "Graph attr dependency
        # shape is required by pass MXPlanMemory": the next call builds a fresh one)
        with _lock_of(self):
            self._cached_op = None
        raise ours from None


# NOTE [rows of a run-time shape cut in a block's own graph]
#     A block's graph without gluon_cf nodes but with a dynamic-shape operator (NOTE [run-time
#     shapes]) ran as MXNet's CachedOp, which infers each operator's shapes as it reaches it.
#     An int index past the rows a boolean_mask kept (autograph's ``kept[1]`` of one row: a
#     slice of no row, then a squeeze) was its "Operator squeeze inferring shapes failed",
#     naming no node nor line, and the slice of no row, left computing on MXNet's engine,
#     failed in its MKLDNN kernel ("Check failed: delay_alloc"): raised by the next read of
#     anything, the next call's output of valid data or MXNet's shutdown at exit. Eagerly
#     NDArray indexing raises IndexError. Such a graph, where a dynamic-shape operator's
#     result reaches an operator that cuts rows (``_cuts_rows``), runs partitioned
#     (``graph.PartitionedGraph``), whose segments after the dynamic-shape operator are
#     CachedGraphs inferred for the shapes of the call: an int index past the axis is the
#     IndexError at the user's line (``errors.index_error_of``), a slice of no row a
#     ZeroSizeError at its line (``errors.named_line``), before anything is left running; the
#     next call of valid data gives eager's values.
def _cuts_rows(node):
    """Whether a JSON node can cut an array to fewer rows (a slice, an index's squeeze, a
    take) or make one of no row: a graph reading a dynamic-shape result with it runs
    partitioned (NOTE [rows of a run-time shape cut in a block's own graph])."""
    return node["op"] in ("squeeze", "take", "pick", "gather_nd") or \
        any(word in node["op"].lower() for word in SIZE_CUTTERS)


def _other_error(self, err):
    """Raise ``err``, a hybridized call's error not MXNet's, or ours for it."""
    if isinstance(err, AssertionError) and self._cached_graph:
        # NOTE [a step's value read outside its body], NOTE [a variable read in a body]
        nodes = json.loads(self._cached_graph[1].tojson())["nodes"]
        for explain in (body_value_outside_error, body_variable_error):
            ours = explain(err, nodes, SOURCE_ATTR, _forward_of(self))
            if ours is not None:
                raise ours from None
    raise err


def _device_type(args):
    """The device type a block's call runs on: its first input array's."""
    flat, _ = _block._flatten(args, "input")
    return next((a.context.device_type for a in flat if a is not None), "cpu")


def _run_cached_op(self, *args):
    park_if_exiting()   # NOTE [daemon threads at exit]
    lock = _lock_of(self)
    with lock:   # NOTE [a block called from many threads]
        _graph_for_shapes(self, args)
        if self._cached_op is None:
            self._build_cache(*args)
        if "_gluon_cf_traced_shapes" in self.__dict__ or \
                "_gluon_cf_traced_mode" in self.__dict__:
            # a graph for these input shapes: the whole call under the lock (an RLock), or
            # another thread's call could switch graphs before this one runs (NOTE [graphs
            # traced for input shapes])
            return _run_built(self, args, lock)
    return _run_built(self, args, lock)


def _run_built(self, args, lock):
    with lock:
        if self._cached_op is None:
            self._build_cache(*args)
        plan = getattr(self, "_gluon_cf_plan", None)
        if plan is None or plan.symbol is not self._cached_graph[1]:
            plan = self._gluon_cf_plan = _Plan(self)
    if plan.refusing_training and (mx.autograd.is_training() or mx.autograd.is_recording()):
        # (in this thread, before the graph runs: NOTE [training refused by the node])
        device = _device_type(args)
        for node in plan.refusing_training:
            node.refuse_training_call(mx.autograd.is_recording(), device,
                                      mx.autograd.is_training())
    if not plan.has_nodes and not plan.always and not _has_zero_size_input(args):
        # (NOTE [zero-size block inputs])
        if plan.resizing_reshapes:   # NOTE [a reshape to another size]
            flat, fmt = _block._flatten(args, "input")
            if _gluon_accepts(self._in_format, fmt):   # (else MXNet's call refuses it)
                flat = [a for a in flat if a is not None]
                _check_reshapes_once(self, plan, tuple(a.shape for a in flat), flat, lock)
        return _original_call_cached_op(self, *args)
    if mx.autograd.is_recording():   # See NOTE [inputs shared between threads]
        args = own_handles(args)
    flat, fmt = _block._flatten(args, "input")
    flat = [a for a in flat if a is not None]
    if _gluon_accepts(self._in_format, fmt):
        # (a trailing None left out: the same inputs, and the same gluon_cf paths; MXNet's
        # CachedOp alone gave "Operator expand_dims inferring shapes failed" for a mask
        # keeping no row, where the call with the None gave the user's line)
        fmt = self._in_format
    key = tuple(a.shape for a in flat)   # the data's shapes: the parameters' are fixed
    # In a remat body the nodes run inline: a node's Custom backward inside the remat node's
    # hangs MXNet (NOTE [nested custom backward] in tests/test_remat_nesting.py).
    inline = _remat.running_body()
    with lock:
        # (a zero-size input: NOTE [zero-size block inputs])
        partitioned = plan.always or key in plan.partitioned_shapes or inline or (
            plan.unwritten_gradients and mx.autograd.is_recording()) or \
            any(0 in shape for shape in key) or \
            (fmt == self._in_format and _makes_zero_size(self, plan, key, flat))
        # See NOTE [recursion inference in the calling thread]
        first_inline = not partitioned and fmt == self._in_format and \
            plan.inline_inference and inference_inline()
        cached_op_args = list(self._cached_op_args)
    if first_inline:
        cargs = [flat[x] if is_arg else x.data() for is_arg, x in cached_op_args]
        # (a sparse one: as the Custom operator gives a node, NOTE [sparse inputs of a node])
        first_inline = all(type(a) is mx.nd.NDArray for a in cargs)
    inline_error = None
    if first_inline:
        inputs_ready(cargs)   # NOTE [an input's failure read in the calling thread]
        try:
            out = plan.run_partitioned(cargs, declared=True)
            INLINE_RUNS[0] += 1
            return _block._regroup(out, self._out_format)
        except Exception as err:   # noqa: BLE001 - the CachedOp's call below gives its own
            INLINE_FAILED[0] += 1
            inline_error = err
    called = since = None
    with lock:
        if not partitioned or fmt != self._in_format:
            if plan.resizing_reshapes:
                _check_reshapes_once(self, plan, key, flat, lock)
            try:   # the CachedOp, as long as every node can declare its output shapes
                if plan.recursion and node_progress.WAIT_S[0] > 0 and \
                        mx.autograd.is_recording() and executor.ahead_of_time() and \
                        executor.get_executor() == "batched":
                    since = node_progress.token()   # NOTE [the caller waits for the first group]
                _cached_op_for_dtypes(self, args)
                out = _original_call_cached_op(self, *args)
                called = [not_lost(out, inline_error, plan.js)]
            except Exception as err:
                # A CachedOp whose call failed answers the next call wrongly ("Cannot find
                # attribute shape in the graph", whatever the inputs): the next call builds a
                # fresh one, from the same graph, so every call fails or works alike.
                self._cached_op = None
                if not isinstance(err, DynamicShapeError) or fmt != self._in_format:
                    raise
            if called is None:
                if len(plan.partitioned_shapes) > _MAX_SIGNATURES:
                    plan.partitioned_shapes.clear()
                plan.partitioned_shapes.add(key)
        if called is None:
            cached_op_args = list(self._cached_op_args)
    if called is not None:   # (outside the block's lock)
        if since is not None:
            node_progress.wait(since)
        return called[0]
    cargs = [flat[x] if is_arg else x.data() for is_arg, x in cached_op_args]
    try:
        out = plan.run_partitioned(cargs)
    except ZeroSizeError as err:
        # (an operator of the block's own graph has no line of its own: the lines calling it
        # in hybrid_forward's source; one autograph made is named after the user's line)
        text, where = str(err), None if err.located else named_line(str(err))
        if not err.located and where is None:
            text, where = _lines_of_operators(text, plan.forward)
        raise BlockZeroSizeError(
            text if err.located else "%s (%sin %s)" % (
                text, "" if where is None else "at %s; " % where, _forward_of(self)),
            located=True) from None
    return _block._regroup(out, self._out_format)


def _check_reshapes_once(self, plan, key, flat, lock):
    """NOTE [a reshape to another size], once per data shapes ``key`` of a call whose inputs
    are ``flat``: every hybridized block's, gluon_cf nodes or none (its CachedOp, given a
    Reshape to another size, corrupts the heap)."""
    if key in plan.reshapes_checked:
        return
    with lock:
        try:
            check_reshapes(plan.symbol, plan.js["nodes"], [
                flat[x].shape if is_arg else x.shape for is_arg, x in self._cached_op_args],
                plan.reshape_checks)
        except mx.MXNetError as err:   # (gluon_cf's check: located in any block's graph)
            setattr(err, _RESHAPE_CHECKED, True)
            raise
        if len(plan.reshapes_checked) >= 1024:
            plan.reshapes_checked.clear()
        plan.reshapes_checked.add(key)


def _gluon_accepts(stored, fmt):
    """Whether Gluon 1.9.1's ``_call_cached_op`` takes a call of input format ``fmt`` for a
    block built with ``stored``: the same, or one with trailing None inputs more or fewer
    (``net(x)`` after ``net(x, None)``); any other it refuses (its ValueError)."""
    if fmt == stored:
        return True
    short, long_ = (fmt, stored) if len(fmt) < len(stored) else (stored, fmt)
    return long_[:len(short)] == short and all(f == -1 for f in long_[len(short):])


def _makes_zero_size(self, plan, key, flat):
    """NOTE [zero-size values in a block's own graph], once per data shapes ``key``."""
    if not plan.has_nodes:   # (MXNet's CachedOp as it is: nothing kept per shapes)
        return False
    if key not in plan.zero_size:
        if len(plan.zero_size) >= 1024:
            plan.zero_size.clear()
        plan.zero_size[key] = makes_zero_size(plan.symbol, plan.js["nodes"], [
            flat[x].shape if is_arg else x.shape for is_arg, x in self._cached_op_args])
    return plan.zero_size[key]


class BlockZeroSizeError(ZeroSizeError, mx.MXNetError):
    """The ZeroSizeError of a hybridized block's call (NOTE [zero-size block inputs]), an
    MXNetError too: such a call, run by the block's CachedOp until round 23, raised MXNet's
    own error for an operator refusing a zero-size array (as eager MXNet does), or gluon_cf's
    IncompleteShapeError (an MXNetError) at a gluon_cf node, and code catching
    ``mx.MXNetError`` around it must still catch it. (``errors.py`` needs no MXNet, so
    ZeroSizeError itself is not one.)"""


def _has_zero_size_input(args):
    """Whether an input of a block's call has a zero-size axis. Every call of a hybridized
    block without gluon_cf nodes asks (NOTE [zero-size block inputs]): dense NDArrays as
    arguments, the usual call, read their shapes straight from MXNet (``NDArray.shape`` and
    Gluon's ``_flatten`` took 2.2 us a call, this 0.95 us; a small Dense's call takes 30-60
    us). Trying the CachedOp first and going partitioned on its error is no way out: a
    recorded empty batch after a full one passes its forward and fails in ``backward()``
    ("shape_num_unknown_nodes")."""
    for a in args:
        if type(a) is not mx.nd.NDArray:   # (nested, None, sparse: as Gluon flattens them)
            flat, _ = _block._flatten(args, "input")
            return any(a is not None and 0 in a.shape for a in flat)
    for a in args:
        ndim, dims = ctypes.c_int(), ctypes.POINTER(ctypes.c_int)()
        check_call(_LIB.MXNDArrayGetShapeEx(a.handle, ctypes.byref(ndim), ctypes.byref(dims)))
        if ndim.value > 0 and 0 in dims[:ndim.value]:   # (-1: a shape unknown)
            return True
    return False


# NOTE [zero-size block inputs]
#     A block's own CachedOp keeps what it inferred and planned for the input shapes it last
#     saw, as a subgraph's does (NOTE [zero-size calls] in graph/cached_graph.py): after a
#     call on (4, 2), the (0, 2) rows of an empty batch failed with MXNet's "Cannot find
#     attribute forward_mem_plan in the graph" (recorded: "full_mem_plan"), while a fresh block
#     computed them (or, recorded, failed otherwise: "shape_num_unknown_nodes"). A call with
#     a zero-size input runs partitioned: the segments between gluon_cf nodes are CachedGraphs,
#     which run a call with a zero-size input operator by operator, as eager code does, so the
#     call works, or fails with the same ZeroSizeError, whatever came before: the error eager
#     gluon_cf gives, raised as a BlockZeroSizeError, an MXNetError as the CachedOp's errors
#     were (``except mx.MXNetError`` still catches it). Blocks without gluon_cf nodes too (a
#     masked mean over an empty batch is the same history): their graph is one segment. The
#     check runs on every call of such a block: ``_has_zero_size_input`` reads dense
#     arguments' shapes straight from MXNet.


# NOTE [a block called from many threads]
#     Gluon's HybridBlock is not thread-safe: a fresh block's first calls from several threads
#     trace it at once (``Block.name_scope`` is per block: AttributeError from ``__exit__``),
#     and one CachedOp called from several threads at once fails now and then ("Graph attr
#     dependency shape is required by pass MXPlanMemory"; a segmentation fault was seen too).
#     Ours added to it: a call whose CachedOp refuses (DynamicShapeError) or fails drops it, so
#     another thread's call found none ("Gluon failed to build the cache. This should never
#     happen"), or read ``_cached_op_args`` while they were rebuilt; and a refusal leaves the
#     CachedOp half-inferred while other threads run it (the MXPlanMemory error, a tenth of
#     the first calls of 32 threads). So a block builds its graph, and a block with gluon_cf
#     nodes runs its CachedOp, under the block's lock: those calls are serialised (the
#     CachedOp only pushes work to MXNet's engine, which runs it in parallel as before). The
#     partitioned runs keep one PartitionedGraph per thread (``_Plan.run_partitioned``) and
#     run unlocked.
def _lock_of(block):
    lock = block.__dict__.get("_gluon_cf_lock")
    if lock is None:   # dict.setdefault is atomic: one lock per block, whoever comes first
        lock = block.__dict__.setdefault("_gluon_cf_lock", threading.RLock())
    return lock


_MAX_SIGNATURES = 4096   # input-shape signatures remembered as needing partitioning


# NOTE [graphs traced for input shapes]
#     Converted code (``@autograph``) may read a Symbol's ``shape`` (``range(x.shape[0])``,
#     ``x.shape[-1]``, ``len(x)``, or iterate its rows: ``enumerate(x)``, ``[f(r) for r in
#     x]``, ``*x``) while the block's graph is traced: :func:`static_shape` answers with
#     MXNet's shape inference from the shapes of the inputs being traced (``_get_graph`` runs
#     with the call's arrays; a parameter's shape where known), or None where that does not
#     give every axis (a loop's row inside a body, a value of run-time shape: refused there).
#     Such a graph holds those shapes as constants, so it is right only for inputs of the
#     shapes it was traced for: the block remembers them (``_gluon_cf_traced_shapes``), and a
#     call with other input shapes switches to the graph traced for them, tracing it the first
#     time (:func:`_graph_for_shapes`; up to ``_MAX_GRAPHS`` kept, as a CachedOp keeps one
#     plan per shape). ``export`` of such a graph is refused (the symbol file would run it on
#     any shape). ``hybridize()`` again, ``cast`` and the like clear them all. A graph traced
#     so is one for the input dtypes too, and ``x.dtype`` read by converted code where the
#     traced inputs' dtypes give it (:func:`static_dtype`, ``x.dtype(2)``, ``if x.dtype ==
#     np.float64:``) makes the graph one for them likewise (round 31ag: it was MXNet's
#     AttributeError of a Symbol).
#     Likewise converted code reading ``autograd.is_training()`` or ``is_recording()`` (a
#     PyTorch ``if self.training:``) while the graph is traced makes it a graph for that
#     mode (``_gluon_cf_traced_mode``, :func:`autograd_mode_read`): a call in another mode
#     switches to the graph traced in it, as eager code reads the mode on every call (the
#     trace read it once: a block trained, then called under ``predict_mode``, kept the
#     training branch). ``export`` writes predict mode's graph (:func:`_predict_mode_graph`),
#     what an exported model runs, whatever the mode of the block's last call.
_MAX_GRAPHS = 16
_original_get_graph = _block.HybridBlock._get_graph
_original_clear_cached_op = _block.HybridBlock._clear_cached_op
_original_export = _block.HybridBlock.export


def _input_shapes(args):
    return tuple(a.shape for a in _block._flatten(args, "input")[0] if a is not None)


def _input_dtypes(args):
    return tuple(a.dtype for a in _block._flatten(args, "input")[0] if a is not None)


def _get_graph(self, *args):
    """``HybridBlock._get_graph``: the trace knows the shapes of the inputs it is traced for
    (NOTE [graphs traced for input shapes])."""
    if self._cached_graph:
        return _original_get_graph(self, *args)
    shapes = _input_shapes(args)
    names = ["data"] if len(shapes) == 1 else ["data%d" % k for k in range(len(shapes))]
    outer = getattr(TRACED, "trace", None)
    # (a block not hybridized traces its graph only to infer its deferred parameters' shapes)
    dtypes = _input_dtypes(args)
    # (the parameters' dtypes as they are: a Parameter's var keeps the dtype it was made
    # with, float32 after net.cast("float64"), read by x.dtype silently)
    given = {p.name: p.dtype for p in self.collect_params().values()}
    trace: Dict[str, Any] = {"shapes": dict(zip(names, shapes)), "read": None, "mode": None,
                             "dtypes": dict(given, **dict(zip(names, dtypes))),
                             "hybridized": bool(getattr(self, "_active", False)), "checks": []}
    TRACED.trace = trace
    try:
        graph = _original_get_graph(self, *args)
    finally:
        TRACED.trace = outer
    try:
        check_shapes(trace)
    except BaseException:
        self._cached_graph = ()         # (refused: the next call traces again)
        raise
    if trace["read"] is not None:
        self.__dict__["_gluon_cf_traced_shapes"] = (shapes, trace["read"], dtypes,
                                                    trace.get("read_dtype", False))
    else:
        self.__dict__.pop("_gluon_cf_traced_shapes", None)
    if trace["mode"] is not None:     # (and the inputs, for export to trace predict mode's)
        flat, fmt = _block._flatten(args, "input")
        spec = [None if a is None else (a.shape, a.dtype, a.context) for a in flat]
        self.__dict__["_gluon_cf_traced_mode"] = (_autograd_mode(), trace["mode"], spec, fmt)
    else:
        self.__dict__.pop("_gluon_cf_traced_mode", None)
    return graph


def _autograd_mode():
    return mx.autograd.is_training(), mx.autograd.is_recording()


def _graph_for_shapes(block, args):
    """Before a call: the graph traced for these input shapes, where the block's graph holds
    the shapes it was traced for (NOTE [graphs traced for input shapes])."""
    traced = block.__dict__.get("_gluon_cf_traced_shapes")
    moded = block.__dict__.get("_gluon_cf_traced_mode")
    if traced is None and moded is None:
        return
    current = (None if traced is None else traced[0::2], None if moded is None else moded[0])
    key = (None if traced is None else (_input_shapes(args), _input_dtypes(args)),
           None if moded is None else _autograd_mode())
    if key == current:
        return
    graphs = block.__dict__.setdefault("_gluon_cf_graphs", {})
    if len(graphs) >= _MAX_GRAPHS:
        graphs.clear()
    graphs[current] = _graph_state(block)
    saved = graphs.pop(key, None)
    if saved is None:       # traced on this call (by _build_cache)
        block._cached_graph, block._cached_op, block._cached_op_args = (), None, []
        block.__dict__.pop("_gluon_cf_traced_shapes", None)
        block.__dict__.pop("_gluon_cf_traced_mode", None)
    else:
        for name, value in saved.items():
            setattr(block, name, value)


def _predict_mode_graph(block):
    """Before ``export``: a graph for the autograd mode of its last call is switched to the one
    for predict mode (traced for the inputs of that call), what an exported graph runs (it
    wrote the training branch of ``if autograd.is_training():`` after a training step)."""
    moded = block.__dict__.get("_gluon_cf_traced_mode")
    if moded is None or moded[0] == (False, False):
        return
    arrays = [None if a is None else mx.nd.zeros(a[0], ctx=a[2], dtype=a[1]) for a in moded[2]]
    args = _block._regroup(arrays, moded[3])
    with mx.autograd.pause(train_mode=False):
        _graph_for_shapes(block, args)
        if block._cached_op is None:
            block._build_cache(*args)     # (export saves the parameters its CachedOp reads)


def _graph_state(block):
    return {name: getattr(block, name, None) for name in (
        "_cached_graph", "_cached_op", "_cached_op_args", "_in_format", "_out_format",
        "_gluon_cf_traced_shapes", "_gluon_cf_traced_mode", "_gluon_cf_plan",
        "_gluon_cf_casts")}


def _clear_cached_op(self):
    _original_clear_cached_op(self)
    self.__dict__.pop("_gluon_cf_traced_shapes", None)
    self.__dict__.pop("_gluon_cf_traced_mode", None)
    self.__dict__.pop("_gluon_cf_graphs", None)


def _export(self, path, *args, **kwargs):
    """``HybridBlock.export``, of predict mode's graph, refused for a graph traced for its
    input shapes (NOTE [graphs traced for input shapes])."""
    with _lock_of(self):
        _predict_mode_graph(self)
    traced = self.__dict__.get("_gluon_cf_traced_shapes")
    if traced is not None:
        where = traced[1][:-1] if traced[1].endswith(":") else traced[1]   # (no "::")
        what, given, instead = ("dtype", [np.dtype(d).name for d in traced[2]],
                                "F.zeros_like, F.ones_like, F.cast to a dtype given to the "
                                "block") if traced[3] else \
            ("shape", traced[0], "F.shape_array, F.zeros_like, F.reshape_like, reshape with "
                                 "0 and -1, gluon_cf.foreach over the rows")
        raise ValueError(
            f"{where}: the {what} read here while hybridizing makes the block's graph one "
            f"for the input {what}s it was traced for ({', '.join(map(str, given))}; the "
            f"block traces a graph per input shape and dtype), and an exported graph would "
            f"run them on inputs of any {what}. To export, take {what}s from arrays in the "
            f"graph ({instead})")
    return _original_export(self, path, *args, **kwargs)


_block.HybridBlock._get_graph = _get_graph
_block.HybridBlock._clear_cached_op = _clear_cached_op
_block.HybridBlock.export = _export


_block.HybridBlock._call_cached_op = _call_cached_op
_original_build_cache = _block.HybridBlock._build_cache


def _given_dtypes(self, args):
    """The dtypes of the block's graph's variables for the call's ``args`` and the
    parameters, by name (the MKLDNN guards' Casts: NOTE [MKLDNN values read by a node])."""
    flat = [a for a in _block._flatten(args, "input")[0] if a is not None]
    given = {v.name: a.dtype for v, a in zip(self._cached_graph[0], flat)}
    given.update({p.name: p.dtype for is_arg, p in self._cached_op_args if not is_arg})
    return given


def _dtypes_signature(self, args):
    """What the Casts of a block's MKLDNN guards are inferred from: the dtypes of the call's
    inputs and of the parameters (``p.cast`` changes them without clearing the CachedOp)."""
    return _input_dtypes(args), tuple(p.dtype for is_arg, p in self._cached_op_args
                                      if not is_arg)


_MAX_CAST_SIGNATURES = 8   # CachedOps kept per block for the dtypes calls alternate between


def _cached_op_for_dtypes(self, args):
    """Right before the block's CachedOp runs (under the block's lock: another thread's call
    of other dtypes cannot switch it in between): the CachedOp whose Casts are for this
    call's dtypes, kept by dtypes (a block called with float32 and float64 in turn builds
    two, once) (NOTE [MKLDNN values read by a node] in _cachedop.py)."""
    casts = self.__dict__.get("_gluon_cf_casts")
    if casts is None or self._cached_op is None:
        return
    signature = _dtypes_signature(self, args)
    if signature == casts["signature"]:
        return
    op = casts["ops"].get(signature)
    if op is None:
        self.__dict__["_gluon_cf_switching"] = True   # (the other dtypes' CachedOps kept)
        try:
            self._build_cache(*args)   # (which keeps it in casts["ops"])
        finally:
            self.__dict__.pop("_gluon_cf_switching", None)
    else:
        self._cached_op, casts["signature"] = op, signature


def _build_cache(self, *args):
    """``HybridBlock._build_cache``: NOTE [an input returned as an output] and NOTE [MKLDNN
    values read by a node] in _cachedop.py."""
    _original_build_cache(self, *args)
    casts = self.__dict__.pop("_gluon_cf_casts", None)
    if not self.__dict__.get("_gluon_cf_switching"):
        casts = None   # (the CachedOp was dropped, maybe after a failed call: none comes back)
    copied, flags = None, self._flags
    if has_gluon_cf_nodes(json.loads(self._cached_graph[1].tojson())):
        copied = copied_variable_heads(self._cached_graph[1])
        flat = [a for a in _block._flatten(args, "input")[0] if a is not None]  # (as the
        dense = {v.name for v, a in zip(self._cached_graph[0], flat)    # graph's inputs: no None)
                 if a.stype == "default" and a.ndim > 0} | \
            {p.name for is_arg, p in self._cached_op_args if not is_arg and
             p._stype == "default" and p._grad_stype == "default"}
        before = copied if copied is not None else self._cached_graph[1]
        laid = default_layout_inputs(before, dense, registry.kind_of,
                                     _given_dtypes(self, args) if MKLDNN else None)
        if laid is not None:   # NOTE [MKLDNN values read by a node]
            copied, flags = laid, inlined_as_before(flags, before, laid)
            if casts is None or casts["graph"] is not self._cached_graph[1] or \
                    len(casts["ops"]) >= _MAX_CAST_SIGNATURES:
                casts = {"graph": self._cached_graph[1], "ops": {}}
            casts["signature"] = _dtypes_signature(self, args)   # (its Casts hold for these)
            self._gluon_cf_casts = casts
    if copied is not None:
        indices = [[k for k, (is_arg, _) in enumerate(self._cached_op_args) if is_arg == kind]
                   for kind in (True, False)]
        self._cached_op = mx.nd.CachedOp(copied, [("data_indices", indices[0]),
                                                  ("param_indices", indices[1])] + flags)
        if "_gluon_cf_casts" in self.__dict__:
            self._gluon_cf_casts["ops"][self._gluon_cf_casts["signature"]] = self._cached_op


_block.HybridBlock._build_cache = _build_cache
