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


def _learnt_table(net, inputs):
    """The function table a first hybridized call of ``net`` creates."""
    gluon_cf.set_executor("batched")
    net.hybridize()
    known = set(tables._TABLES)
    net(*inputs).asnumpy()
    (table,) = [t for name, t in tables._TABLES.items() if name not in known]
    return table


def test_a_question_with_its_environment_is_not_answered_for_another_threads():
    """NOTE [one table, many threads]: the table's last seen environment is another batch's
    when two run at once; a question that gives its own environment is answered for it."""
    forests = _forests()
    table = _learnt_table(_Counting(), forests[0])
    entry = next(q for q, spec in table.specs.items() if spec["name"] == "node")
    envs = [[(inputs[0].shape[0],), (inputs[1].shape[0],), (inputs[2].shape[0],)]
            for inputs in forests]
    for mine, other in [(0, 1), (1, 2), (2, 0)]:
        table.env_shapes = envs[other]   # what the other thread's batch set last
        (got,) = table.out_shapes(entry, [(1,)], envs[mine])
        assert got == (1, forests[mine][0].shape[0]), (mine, got)


def test_a_thread_waits_for_the_dtypes_another_thread_is_inferring(monkeypatch):
    """While one thread infers a function's dtypes, its guess so far (``None``) is its own
    recursive calls' answer only: another thread asking the same waits for the dtypes (an
    ahead-of-time schedule reading the guess ran a batch dynamically, NOTE [one table, many
    threads])."""
    forests = _forests()
    net = TreeRNN(50, embed_size=3, hidden_size=3, num_classes=2)
    net.initialize()
    table = _learnt_table(net, forests[0])
    entry = next(q for q, spec in table.specs.items() if spec["name"] == "node")
    env = table.env_types
    want = table.out_types(entry, [np.float32], env)
    assert None not in want
    table.types.clear()
    graph = table.graphs[entry]
    started, release = threading.Event(), threading.Event()
    infer_type = graph.infer_type

    def slow(*args):
        started.set()
        release.wait(30)
        return infer_type(*args)

    monkeypatch.setattr(graph, "infer_type", slow)
    answers = {}
    first = threading.Thread(target=lambda: answers.setdefault(
        "first", table.out_types(entry, [np.float32], env)))
    second = threading.Thread(target=lambda: answers.setdefault(
        "second", table.out_types(entry, [np.float32], env)))
    first.start()
    assert started.wait(30)
    second.start()
    second.join(0.5)   # (without the wait it has answered by now)
    release.set()
    first.join(30)
    second.join(30)
    assert answers == {"first": want, "second": want}
