"""Walks over a graph's JSON (``Symbol.tojson()``'s ``nodes``): pure Python, no MXNet, so the
artifact loader and the file checks use it as the executors do."""
from typing import Callable, Iterable, Iterator, List, Optional


def reached_ids(nodes: List[dict], start: Iterable[int],
            inputs: Optional[Callable[[dict], Iterable[int]]] = None) -> Iterator[int]:
    """The ids of the nodes reached from node ids ``start`` through their inputs, each once.
    ``inputs(node)`` gives the ids to go on to from a reached node (default: all its inputs);
    a walk stops at a node by giving none. A generator: a search may stop at its first find."""
    seen, todo = set(), list(start)
    while todo:
        nid = todo.pop()
        if nid in seen:
            continue
        seen.add(nid)
        yield nid
        node = nodes[nid]
        todo.extend(inputs(node) if inputs is not None
                    else (entry[0] for entry in node.get("inputs", ())))
