"""Hybridized Gluon blocks whose graphs hold values of run-time shape.

NOTE [partitioned blocks]
    A hybridized block runs its graph as one MXNet CachedOp, in which every gluon_cf node is a
    Custom operator that must declare its output shapes before it runs. A node whose outputs'
    shapes are known only at run time (NOTE [run-time shapes] in ``graph.py``), or whose inputs
    are, cannot. For such a graph the block runs partitioned instead: ``graph.PartitionedGraph``
    cuts it at its gluon_cf nodes, the ordinary operators between them stay CachedOps (MXNet
    infers their shapes just before each runs, ``boolean_mask`` included), and the nodes run
    by their rules in the calling thread, recorded by autograd like the segments, so gradients
    need nothing special.

    Which way a block runs is decided once per signature of input shapes, by inferring the
    block's graph with the actual shapes (``_Plan.needs_partition``): graphs with static shapes
    only keep the single CachedOp and its speed. Blocks without gluon_cf nodes are MXNet's
    business alone: one attribute lookup per call.

    ``HybridBlock._call_cached_op`` is MXNet 1.9.1's one entry to running a hybridized block
    (``SymbolBlock``, which ``SymbolBlock.imports`` returns for an exported model, included);
    it is wrapped here, and the original runs everything that needs no partitioning.
"""
import json
import threading

import mxnet as mx
from mxnet.gluon import block as _block

from . import executor
from .graph import PartitionedGraph, block_index_gradients, has_gluon_cf_nodes, inference_graph

_original_call_cached_op = _block.HybridBlock._call_cached_op


class _Plan:
    """What gluon_cf knows of one built CachedOp of a block: whether its graph has gluon_cf
    nodes, and per signature of input shapes, whether it must run partitioned."""

    def __init__(self, block):
        self.cached_op = block._cached_op
        self.symbol = block._cached_graph[1]
        self.text = self.symbol.tojson()
        self.js = json.loads(self.text)
        self.has_nodes = has_gluon_cf_nodes(self.js)
        self.partition_by_shapes = {}   # data shapes -> whether to run partitioned
        self.partitioned = {}   # thread id -> PartitionedGraph

    def needs_partition(self, cargs):
        """Whether a node has an input or output of run-time shape for these arguments."""
        graph = inference_graph(self.text)
        try:
            return bool(graph.calls_with_run_time_shapes([a.shape for a in cargs]))
        except Exception:  # noqa: BLE001 - the CachedOp reports it, in MXNet's or our words
            return False

    def run_partitioned(self, cargs):
        # One PartitionedGraph (its CachedOps) per thread: a CachedOp must not be entered by
        # two threads at once (as in graph.Graph).
        thread = threading.get_ident()
        partitioned = self.partitioned.get(thread)
        if partitioned is None:
            blocked = block_index_gradients(self.js)  # as in Graph: one CachedOp per segment
            partitioned = self.partitioned[thread] = PartitionedGraph(
                self.symbol if blocked is None else mx.sym.load_json(blocked))
        return executor.run_node(partitioned.run(cargs, None))


def _call_cached_op(self, *args):
    """``HybridBlock._call_cached_op``, running graphs of run-time shapes partitioned."""
    if self._cached_op is None:
        self._build_cache(*args)
    plan = getattr(self, "_gluon_cf_plan", None)
    if plan is None or plan.cached_op is not self._cached_op:
        plan = self._gluon_cf_plan = _Plan(self)
    if not plan.has_nodes:
        return _original_call_cached_op(self, *args)
    flat, fmt = _block._flatten(args, "input")
    flat = [a for a in flat if a is not None]
    # Keyed by the data's shapes: the parameters' are fixed once the cache is built.
    key = tuple(a.shape for a in flat)
    partition = plan.partition_by_shapes.get(key)
    if partition is False or fmt != self._in_format:   # (MXNet checks the format, in its words)
        return _original_call_cached_op(self, *args)
    cargs = [flat[x] if is_arg else x.data() for is_arg, x in self._cached_op_args]
    if partition is None:
        partition = plan.partition_by_shapes[key] = plan.needs_partition(cargs)
        if not partition:
            return _original_call_cached_op(self, *args)
    out = plan.run_partitioned(cargs)
    return _block._regroup(out, self._out_format)


_block.HybridBlock._call_cached_op = _call_cached_op
