"""A recursion node's ahead-of-time analyses are dropped with it (``skeleton._forget``, keyed
by the id of its function graphs, NOTE [decoded nodes live as long as their users] in
``gluon_cf/graph/decoded.py``), also when two threads analyse two of its functions for the
first time at once: each recorded a fresh set of analysed functions and one replaced the
other's, so that function's analysis outlived the node, under an id another node may get."""
import threading
import weakref

from gluon_cf.recursion import skeleton


class _Node:   # what analyse needs of a node: a weak reference (the finalize)
    pass


class _Context:
    def __init__(self):
        self.node = _Node()
        self.graphs = {}   # no function here: each analysis is refused, and cached
        self.specs = {q: {"name": q} for q in ("f@t", "g@t")}


class _Racing(dict):
    """``_ANALYSED`` whose ``get`` lets two threads meet first (the interleaving, forced)."""

    def __init__(self, base):
        super().__init__(base)
        self.barrier = threading.Barrier(2)

    def get(self, *args):
        found = super().get(*args)
        try:   # both threads have read before either writes
            self.barrier.wait(timeout=0.5)
        except threading.BrokenBarrierError:   # serialised (the lock): no meeting
            pass
        return found


def test_two_threads_first_analyses_are_both_forgotten_with_the_node(monkeypatch):
    context = _Context()
    monkeypatch.setattr(skeleton, "_ANALYSED", _Racing(skeleton._ANALYSED))
    workers = [threading.Thread(target=skeleton.analyse, args=(context, q))
               for q in ("f@t", "g@t")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    key = id(context.graphs)
    assert {(key, "f@t"), (key, "g@t")} <= set(skeleton._ANALYSES)
    node = weakref.ref(context.node)
    del context
    assert node() is None
    left = [k for k in skeleton._ANALYSES if k[0] == key]
    assert not left, left
