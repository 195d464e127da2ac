"""Hostile round 31tr on the first group of a planned run called before the layout (NOTE [the
first group in training] in gluon_cf/recursion/planned_backward.py) and the unbulked group
loops: recursive models as users write them (random leaves, leaves reading arrays computed on
the tape or a marked input, several outputs, two recursions or one called twice, recursions
in loop and cond bodies, mutual recursion whose entry has no base case, accumulated
gradients, ``autograd.grad``, a failed call, a history of forests and two blocks in two
threads). Each: the early call made (``PUSHED``), values and every gradient equal to the loop's
own call (``EARLY[0] = False``), the recorded backward (``ENABLED[0] = False``) and eager
recursion (random leaves: the hybridized runs under one seed)."""
import re
import threading

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

import gluon_cf
from gluon_cf.data.trees import batchify_forest, build_vocab, encode_tree, parse_tree
from gluon_cf.recursion import planned_backward
from test_planned_first_round31tr import restore  # noqa: F401 (the flags restored, autouse)
from test_schedule import FORESTS, TOL, _linear_tree

TREES = {"sst": FORESTS["sst"](), "mixed": FORESTS["mixed"](), "one": [parse_tree("(1 good)")],
         "chain": [_linear_tree(6)]}
VOCAB = build_vocab([t for trees in TREES.values() for t in trees]
                    + [parse_tree("(0 (1 (2 bad) (3 a)) (4 b))")])
V, H = len(VOCAB), 4


def _inputs(trees):
    forest = batchify_forest([encode_tree(t, VOCAB) for t in trees])
    return [nd.array(getattr(forest, n)) for n in ("tokens", "left", "right", "roots")]


class _Net(gluon.HybridBlock):
    """A tree fold whose leaves and callers vary with the words of ``kind``."""

    def __init__(self, kind, dtype="float32", **kwargs):
        super().__init__(**kwargs)
        self.kind = kind
        with self.name_scope():
            self.embed = gluon.nn.Embedding(V, H, dtype=dtype)
            self.w = self.params.get("w", shape=(1, H), init=mx.init.Uniform(1), dtype=dtype)
            if dtype != "float16":   # (MXNet's FullyConnected has no float16 on the CPU)
                self.cell = gluon.nn.Dense(H, in_units=2 * H, activation="tanh",
                                           flatten=False)
                self.lw = gluon.nn.Dense(H, in_units=H, flatten=False)
                self.drop = gluon.nn.Dropout(0.5)

    def hybrid_forward(self, F, X, tokens, left, right, roots, w):
        kind = self.kind
        table = self.lw(X) if "layer" in kind else X

        def leaf(idx):
            t = F.take(tokens, idx)
            x = F.Embedding(t, table, input_dim=V, output_dim=H) if "env" in kind \
                else self.embed(t)
            x = self.drop(x) if "drop" in kind else x
            x = x * F.random.uniform_like(x) if "uniform" in kind else x
            x = F.broadcast_mul(x, w)
            return (x, self.lw(x)) if "pair" in kind else x

        def combine(l, r):
            if "pair" in kind:
                return self.cell(F.concat(l[0], r[1], dim=-1)), l[1] * r[0]
            if "elementwise" in kind:
                return F.tanh(F.broadcast_add(l * r + l, w))
            return self.cell(F.concat(l, r, dim=-1))

        @gluon_cf.recursive(remat="remat" in kind)
        def node(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: leaf(idx),
                                 lambda: combine(node(F.take(left, idx)),
                                                 node(F.take(right, idx))))

        def fold(root):
            if "cond" in kind:
                return gluon_cf.cond(root > 3, lambda: node(root), lambda: node(root) * 2)
            return node(root)

        if "while" in kind:
            def body(i, acc):
                h = node(F.take(roots, i))
                return h, [i + 1, acc + h]
            _, (_, acc) = gluon_cf.while_loop(lambda i, acc: i < 2, body,
                                              [F.zeros((1,)), F.zeros((1, H))], max_iterations=3)
            return acc
        hs, _ = gluon_cf.foreach(lambda root, _: (fold(root), []), roots, [])
        out = F.reshape(hs[0] + hs[1] if "pair" in kind else hs, (-3, 0))
        if "twice" in kind:
            def first(h):
                return h[0] if "pair" in kind else h
            again, _ = gluon_cf.foreach(lambda root, _: (first(node(root)) * 3, []), roots, [])
            out = out + F.reshape(again, (-3, 0))
        return out


def _net(kind, dtype="float32"):
    mx.random.seed(0)
    net = _Net(kind, dtype)
    net.initialize(mx.init.Uniform(0.5))
    return net


def _step(net, X, inputs, seed=5, grad=False, batches=1, retain=False):
    """Outputs and parameter gradients (and ``X``'s, if it has a gradient buffer) of
    ``sum(out**2)``: by backward (``batches`` times, ``retain``: twice each, the graph
    kept), or by ``autograd.grad`` of the parameters."""
    params = {re.sub(r"^_net\d+_", "", k): p for k, p in net.collect_params().items()
              if p.grad_req != "null"}
    for _ in range(batches):
        mx.random.seed(seed)
        with autograd.record():
            out = net(X, *inputs)
            loss = (out * out).sum()
        if grad:
            wanted = sorted(k for k in params if "embedding" in k or k == "w")
            grads = dict(zip(wanted, autograd.grad(loss, [params[k].data() for k in wanted])))
            return [out.asnumpy()], {k: g.asnumpy() for k, g in grads.items()}
        loss.backward(retain_graph=retain)
        if retain:
            loss.backward()
    grads = {k: p.grad().asnumpy().copy() for k, p in params.items()}
    if X.grad is not None:
        grads["X"] = X.grad.asnumpy().copy()
    return [out.asnumpy()], grads


def _each_way(kind, trees, dtype="float32", marked=True, grad_req="write", pushed=True,
              eager_tol=TOL, **step):
    """The early call's run equals the others (see the module's docstring)."""
    inputs = _inputs(trees)
    got = {}
    random = "drop" in kind or "uniform" in kind
    for way in ("early", "late", "recorded") if random else ("early", "late", "recorded", "eager"):
        net = _net(kind, dtype)
        for p in net.collect_params().values():
            p.grad_req = grad_req
            p.zero_grad()
        X = nd.array(np.random.RandomState(1).uniform(-1, 1, (V, H)), dtype=dtype)
        if marked:
            X.attach_grad(grad_req)
        if way == "eager":
            net.hybridize(active=False)
        else:
            gluon_cf.set_executor("batched", ahead_of_time=True)
            net.hybridize()
        planned_backward.ENABLED[0] = way != "recorded"
        planned_backward.EARLY[0] = way == "early"
        before = planned_backward.PUSHED[0]
        got[way] = _step(net, X, inputs, **step)
        if way == "early":
            assert (planned_backward.PUSHED[0] > before) == pushed
        planned_backward.EARLY[0] = planned_backward.ENABLED[0] = True
    for way in ("late", "recorded") if random else ("late", "recorded", "eager"):
        tol = eager_tol if way == "eager" else TOL
        for g, e in zip(got[way][0], got["early"][0]):
            np.testing.assert_allclose(e, g, err_msg=way, **tol)
        assert sorted(got[way][1]) == sorted(got["early"][1])
        for k, g in got[way][1].items():
            np.testing.assert_allclose(got["early"][1][k], g, err_msg=way + " " + k, **tol)


@pytest.mark.parametrize("kind, forest", [
    ("drop", "mixed"), ("uniform", "one"), ("env", "mixed"), ("env layer drop", "sst"),
    ("pair", "one"), ("cond", "chain"), ("pair twice", "mixed")])
def test_leaves_and_callers(kind, forest):
    _each_way(kind, TREES[forest])


def test_remat_leaves_are_not_called_early():
    _each_way("remat drop", TREES["sst"], pushed=False)


def test_while_loop_body():
    _each_way("while", TREES["mixed"])


@pytest.mark.parametrize("dtype, tol", [("float64", TOL),
                                        ("float16", dict(rtol=2e-2, atol=2e-2))])
def test_dtypes(dtype, tol):
    _each_way("elementwise", TREES["sst"], dtype=dtype, eager_tol=tol)


@pytest.mark.parametrize("marked", [True, False])
def test_accumulated_gradients_over_two_batches(marked):
    _each_way("env layer", TREES["one" if marked else "mixed"], marked=marked, grad_req="add",
              batches=2)


def test_backward_twice_on_a_kept_graph_and_autograd_grad():
    _each_way("env layer", TREES["mixed"], retain=True)
    _each_way("pair", TREES["mixed"], grad=True)


class _Mutual(gluon.HybridBlock):
    """``wrap`` (no base case: it always calls ``even``) the entry; ``even`` and ``odd``
    leaves of two variants each; ``odd`` calls back into ``wrap``."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.embed = gluon.nn.Embedding(V, H)
            self.a = gluon.nn.Dense(H, in_units=2 * H, activation="tanh", flatten=False)
            self.b = gluon.nn.Dense(H, in_units=2 * H, activation="sigmoid", flatten=False)
            self.c = gluon.nn.Dense(H, in_units=H, flatten=False)

    def hybrid_forward(self, F, tokens, left, right, roots):
        def embed(idx):
            return self.embed(F.take(tokens, idx))

        def big(idx):
            return F.take(tokens, idx) > 2

        @gluon_cf.recursive
        def wrap(idx):
            return self.c(even(idx))

        @gluon_cf.recursive
        def even(idx):
            return gluon_cf.cond(
                F.take(left, idx) >= 0,
                lambda: self.a(F.concat(odd(F.take(left, idx)), odd(F.take(right, idx)), dim=-1)),
                lambda: gluon_cf.cond(big(idx), lambda: F.tanh(embed(idx)),
                                      lambda: embed(idx) * 3))

        @gluon_cf.recursive
        def odd(idx):
            return gluon_cf.cond(
                F.take(left, idx) >= 0,
                lambda: self.b(F.concat(wrap(F.take(left, idx)), even(F.take(right, idx)),
                                        dim=-1)),
                lambda: gluon_cf.cond(big(idx), lambda: self.c(embed(idx)),
                                      lambda: embed(idx) * 2))

        hs, _ = gluon_cf.foreach(lambda root, _: (wrap(root), []), roots, [])
        return F.reshape(hs, (-3, 0))


def _mutual_step(net, inputs):
    with autograd.record():
        out = net(*inputs)
        loss = (out * out).sum()
    loss.backward()
    return [out.asnumpy()], {re.sub(r"^_mutual\d+_", "", k): p.grad().asnumpy().copy()
                             for k, p in net.collect_params().items()}


SMALL = {"small": [parse_tree("(1 (2 a) (3 (4 b) (2 good)))"), parse_tree("(1 good)"),
                   parse_tree("(0 (1 (2 bad) (3 a)) (4 b))")],
         "one": TREES["one"]}


@pytest.mark.parametrize("forest", sorted(SMALL))
def test_mutual_recursion_entry_without_a_base_case(forest):
    """(Small trees: a level of the trees is three steps of the expansion, whose count times
    the seven variants bounds the groups run early, NOTE [the first group in training].)"""
    inputs = _inputs(SMALL[forest])
    got = {}
    for way in ("early", "late", "eager"):
        mx.random.seed(0)
        net = _Mutual()
        net.initialize(mx.init.Uniform(0.5))
        gluon_cf.set_executor("batched", ahead_of_time=True)
        net.hybridize(active=way != "eager")
        planned_backward.EARLY[0] = way == "early"
        before = planned_backward.PUSHED[0]
        got[way] = _mutual_step(net, inputs)
        assert (planned_backward.PUSHED[0] > before) == (way == "early")
    for way in ("late", "eager"):
        np.testing.assert_allclose(got["early"][0][0], got[way][0][0], **TOL)
        for k, g in got[way][1].items():
            np.testing.assert_allclose(got["early"][1][k], g, err_msg=k, **TOL)


def test_a_failed_batch_then_good_batches():
    """A batch whose loss fails after the recursion ran (its planned backward never runs),
    then batches of other forests: each equals eager's, the first group called early."""
    net = _net("env layer")
    gluon_cf.set_executor("batched", ahead_of_time=True)
    net.hybridize()
    X = nd.array(np.random.RandomState(1).uniform(-1, 1, (V, H)))
    with pytest.raises(mx.MXNetError):
        with autograd.record():
            out = net(X, *_inputs(TREES["sst"]))
            (out * nd.ones((99, 99))).sum().backward()
    for forest in ("mixed", "sst"):
        inputs = _inputs(TREES[forest])
        before = planned_backward.PUSHED[0]
        got = _step(net, X, inputs)
        assert planned_backward.PUSHED[0] > before
        net.hybridize(active=False)
        eager = _step(net, X, inputs)
        net.hybridize()
        np.testing.assert_allclose(got[0][0], eager[0][0], **TOL)
        for k, g in eager[1].items():
            np.testing.assert_allclose(got[1][k], g, err_msg=k, **TOL)


def _history(kind, sequence, results):
    net = _net(kind)
    net.hybridize()
    X = nd.array(np.random.RandomState(1).uniform(-1, 1, (V, H)))
    results[kind] = [_step(net, X, _inputs(trees)) for trees in sequence]


def test_history_of_forests_in_two_threads():
    """Two blocks, each fed a random sequence of forests by its own thread: each batch equals
    the batch on a fresh block."""
    rng = np.random.RandomState(0)
    pool = list(TREES.values())
    sequence = [pool[i] for i in rng.randint(len(pool), size=4)]
    gluon_cf.set_executor("batched", ahead_of_time=True)
    results: dict = {}
    threads = [threading.Thread(target=_history, args=(kind, sequence, results))
               for kind in ("env layer", "pair twice")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for kind, got in results.items():
        for n, trees in enumerate(sequence):
            fresh = {}
            _history(kind, [trees], fresh)
            # (each fresh block's parameters are the first block's: set by the same seed)
            (values, grads), = fresh[kind]
            np.testing.assert_allclose(got[n][0][0], values[0], **TOL)
            for k, g in grads.items():
                np.testing.assert_allclose(got[n][1][k], g, err_msg=k, **TOL)
