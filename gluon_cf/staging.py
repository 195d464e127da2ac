"""Staging: cutting a graph at the nodes that cannot run inside a compiled piece.

NOTE [staging]
    gluon_cf's partitioned execution (``graph/partitioned.py``, NOTE [partitioned execution])
    and the artifact loader (``export/artifact.py``, NOTE [artifact loader]) both run a graph as
    compiled pieces of ordinary nodes (a CachedOp, an onnxruntime session) interleaved with
    *special* nodes that run on their own (gluon_cf nodes and user CustomOps; ``Recursion``,
    ``Invoke`` and control flow holding them). A node's *stage* is the number of special nodes
    on its longest path from the graph's inputs. The ordinary nodes of stage ``s`` form one
    piece; the special nodes of stage ``s`` only read values of stages ``<= s``, so they run
    after that piece and before the piece of stage ``s + 1``, and are independent of each
    other. The fewest pieces that respect the dependencies: one per stage.

    An ordinary node then moves as late as its readers allow (to the earliest stage that reads
    it): a node that only feeds a later piece belongs to that piece. That matters for shapes:
    ``F.zeros((2, 0, H))`` (an RNN's begin state, batch size 0 = "infer it") learns its shape
    from the RNN that reads it, so the two must be in one CachedOp.

Pure Python: the artifact loader uses it without MXNet.
"""
from typing import Collection, List, Sequence, Tuple


def stages(predecessors: Sequence[Collection[int]],
           special: Sequence[bool]) -> List[Tuple[List[int], List[int]]]:
    """Group items (nodes in topological order) by stage.

    ``predecessors[k]``: the earlier items item ``k`` reads; ``special[k]``: whether it runs on
    its own. Returns one ``(ordinary, specials)`` pair of item lists per stage, in order; a
    list may be empty.
    """
    stage: List[int] = []
    for k, preds in enumerate(predecessors):
        stage.append(max((stage[j] + (1 if special[j] else 0) for j in preds), default=0))
    readers: List[List[int]] = [[] for _ in predecessors]
    for k, preds in enumerate(predecessors):
        for j in preds:
            readers[j].append(k)
    for k in reversed(range(len(stage))):   # readers come later: already final
        if not special[k] and readers[k]:
            stage[k] = min(stage[r] for r in readers[k])
    levels = max(stage, default=-1) + 1
    grouped: List[Tuple[List[int], List[int]]] = [([], []) for _ in range(levels)]
    for k, s in enumerate(stage):
        grouped[s][1 if special[k] else 0].append(k)
    return grouped
