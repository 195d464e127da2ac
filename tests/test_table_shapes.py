"""The function table's output shapes are learnt once for forests of every size when the
forest's arrays are only tables of ``take`` (recursion/table.py, ``_env_key``), and anew for
every size when an environment array's shape reaches the outputs."""
import threading

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

import gluon_cf
from gluon_cf.data.trees import synthetic_treebank
from gluon_cf.models.recursive import TreeRNN
from gluon_cf.recursion import table as tables

from test_schedule import TOL, _forest


@pytest.fixture(autouse=True)
def restore_executor():
    previous = gluon_cf.get_executor()
    yield
    gluon_cf.set_executor(previous)


def _forests():
    """Forests of three sizes (distinct node counts)."""
    found = {}
    for seed in range(40):
        vocab, inputs = _forest(synthetic_treebank(3, shape="sst", seed=seed, max_length=12))
        found.setdefault(inputs[0].shape[0], inputs)
        if len(found) == 3:
            break
    return list(found.values())


def _compare(net, forests):
    gluon_cf.set_executor("batched")
    net.hybridize()
    hybrid = [net(*inputs).asnumpy() for inputs in forests]
    net.hybridize(active=False)
    for got, inputs in zip(hybrid, forests):
        np.testing.assert_allclose(got, net(*inputs).asnumpy(), **TOL)


def test_shapes_learnt_once_for_forests_of_every_size():
    forests = _forests()
    mx.random.seed(0)
    net = TreeRNN(50, embed_size=3, hidden_size=3, num_classes=2)
    net.initialize(mx.init.Xavier())
    gluon_cf.set_executor("batched")
    net.hybridize()
    known = set(tables._TABLES)
    net(*forests[0]).asnumpy()
    (table,) = [t for name, t in tables._TABLES.items() if name not in known]
    learnt = len(table.shapes)
    hybrid = [net(*inputs).asnumpy() for inputs in forests]
    assert len(table.shapes) == learnt, list(table.shapes)   # no entry per forest size
    net.hybridize(active=False)
    for got, inputs in zip(hybrid, forests):
        np.testing.assert_allclose(got, net(*inputs).asnumpy(), **TOL)


class _Counting(gluon.HybridBlock):
    """A tree fold whose outputs have as many columns as the forest has nodes: ``tokens``
    reaches the outputs' shape, so the table must not answer a size with another's shapes."""

    def hybrid_forward(self, F, tokens, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            everyone = F.reshape(F.zeros_like(tokens), (1, -1))

            def leaf():
                return F.broadcast_add(everyone, F.reshape(F.take(tokens, idx), (-1, 1)))

            def internal():
                return node(F.take(left, idx)) + node(F.take(right, idx))
            return gluon_cf.cond(F.take(left, idx) < 0, leaf, internal)

        hs, _ = gluon_cf.foreach(lambda root, _: (node(root), []), roots, [])
        return F.reshape(hs, (-3, 0))


def test_shapes_that_depend_on_the_forest_are_learnt_per_size():
    forests = _forests()
    _compare(_Counting(), forests)
    gluon_cf.set_executor("batched")
    net = _Counting()
    net.hybridize()
    shapes = [net(*inputs).shape for inputs in forests]
    assert shapes == [(inputs[3].shape[0], inputs[0].shape[0]) for inputs in forests]


def test_types_in_progress_in_one_thread_are_not_another_threads_answer(monkeypatch):
    """Two threads inferring a function's output types at once (two calls of a block on
    MXNet's worker threads): the second got the first one's [None, ...] so far, so its
    schedule had no layout and ran dynamically (the flaky test_schedule_tables.py test whose
    one-tree forest ran its levels apart). Each thread now infers on its own."""
    forests = _forests()
    net = TreeRNN(50, embed_size=3, hidden_size=3, num_classes=2)
    net.initialize(mx.init.Xavier())
    gluon_cf.set_executor("batched")
    net.hybridize()
    known, asked = set(tables._TABLES), []
    out_types = tables._FunctionTable.out_types

    def recorded(self, qname, types):
        asked.append((qname, list(types)))
        return out_types(self, qname, types)

    monkeypatch.setattr(tables._FunctionTable, "out_types", recorded)
    net(*forests[0]).asnumpy()
    monkeypatch.setattr(tables._FunctionTable, "out_types", out_types)
    (table,) = [t for name, t in tables._TABLES.items() if name not in known]
    asked = [(q, types) for q, types in asked if None not in types]
    expected = {qname: table.out_types(qname, types) for qname, types in asked}
    assert all(None not in types for types in expected.values()), expected
    table.types.clear()
    started, release, answers = threading.Event(), threading.Event(), {}
    graphs = dict(table.graphs)

    class Paused:
        """The function's graph, whose first type inference waits for ``release``."""

        def __init__(self, graph):
            self.graph = graph

        def infer_type(self, types):
            if threading.current_thread().name == "first":
                started.set()
                assert release.wait(60)
            return self.graph.infer_type(types)

    table.graphs = {q: Paused(g) for q, g in graphs.items()}
    try:
        qname, types = asked[0]
        first = threading.Thread(name="first", target=lambda: answers.setdefault(
            "first", table.out_types(qname, types)))
        first.start()
        assert started.wait(60)
        answers["second"] = table.out_types(qname, types)
        release.set()
        first.join(60)
    finally:
        release.set()
        table.graphs = graphs
    assert answers == {"first": expected[qname], "second": expected[qname]}
