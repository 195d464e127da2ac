"""Graphs at run time, the subgraphs of gluon_cf nodes and the graphs holding those nodes.

The rooms, top to bottom (contract in setup.cfg): ``decoded`` (a node's spec decoded into a
:class:`Node` whose subgraphs are :class:`Graph` objects; it registers the registry's decoder,
through which the rooms below reach it), ``runtime`` (:class:`Graph`: a body as a CachedOp per
thread, its inference and row-wise verdicts; :class:`GraphCall`), ``partitioned``
(:class:`PartitionedGraph`: graphs holding nodes run and inferred piece by piece, NOTE
[partitioned execution]), then ``shape_inference`` (NOTE [run-time shapes]) beside
``cached_graph`` (:class:`CachedGraph`: one CachedOp, op by op on zero-size arrays, NOTE
[zero-size calls]).
"""
from .cached_graph import CachedGraph, block_index_gradients
from .decoded import Node, decode, refusing_training
from .partitioned import (PartitionedGraph, has_gluon_cf_nodes, holds_gluon_cf_nodes,
                          inference_graph)
from .runtime import Graph, GraphCall

__all__ = [
    "CachedGraph", "Graph", "GraphCall", "Node", "PartitionedGraph", "block_index_gradients",
    "decode", "has_gluon_cf_nodes", "holds_gluon_cf_nodes", "inference_graph",
    "refusing_training",
]
