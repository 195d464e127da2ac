"""Hostile review of round 24's MXNet semantics change (helper r24sym), MXNet 1.9.1's own
contrib ops as the oracle: sparse inputs MXNet's control flow runs, partial shapes
``infer_shape_partial`` answers for a foreach's data, Embedding(sparse_grad=True) in a
hybridized body."""
import os
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

import gluon_cf

S = mx.sym
OPS = {"mxnet": mx.sym.contrib, "gluon_cf": gluon_cf}
X, H, W, A = S.var("x"), S.var("h"), S.var("w"), S.var("a")

warnings.filterwarnings("ignore", message="Cannot decide type")
os.environ.setdefault("MXNET_STORAGE_FALLBACK_LOG_VERBOSE", "0")


def _build(ops, program):
    with mx.name.NameManager():
        return program(ops)


def _csr():
    return nd.array([[1, 0, 2], [0, 0, 0], [0, 3, 0]]).tostype("csr")


# ------------------------------------------- sparse inputs MXNet's cond/while/foreach run
def _cond_reading_csr(ops):
    return ops.cond(S.sum(H) > 0, lambda: S.dot(A, W) * 2, lambda: S.dot(A, W) - 1)


def _while_reading_csr(ops):
    out, state = ops.while_loop(lambda s: S.sum(s) < 200, lambda s: (s * 1, [S.dot(A, s) + 1]),
                                [W], max_iterations=4)
    return S.Group([out, state[0]])


def _while_carrying_csr(ops):
    out, state = ops.while_loop(lambda a, s: S.sum(s) < 200,
                                lambda a, s: (S.dot(a, s), [a, S.dot(a, s) + 1]),
                                [A, W], max_iterations=4)
    return S.Group([out, state[1]])


def _foreach_reading_csr(ops):
    out, state = ops.foreach(lambda d, s: (S.dot(A, d) + s, s + 1), X, W)
    return S.Group([out, state])


SPARSE_READERS = [_cond_reading_csr, _while_reading_csr, _while_carrying_csr,
                  _foreach_reading_csr]


@pytest.mark.parametrize("program", SPARSE_READERS, ids=lambda p: p.__name__[1:])
def test_a_csr_array_read_by_a_body_bound_runs_as_mxnet(program):
    """MXNet's cond, while_loop (a free variable or a loop variable) and foreach (a free
    variable) run a body reading a csr array (``dot(csr, dense)``); gluon_cf refused it
    ("MXNet 1.9.1's own control-flow operators refuse sparse ones too", untrue)."""
    args = {"a": _csr(), "h": nd.ones(2), "w": nd.array(np.arange(6).reshape(3, 2)),
            "x": nd.array(np.arange(24).reshape(4, 3, 2))}
    got = []
    for ops in OPS.values():
        sym = _build(ops, program)
        executor = sym.bind(mx.cpu(), {n: args[n] for n in sym.list_arguments()})
        got.append([o.asnumpy() for o in executor.forward()])
    for g, w in zip(got[1], got[0]):
        np.testing.assert_allclose(g, w)


class _CsrCond(gluon.HybridBlock):
    def __init__(self, ops, **kwargs):
        super().__init__(**kwargs)
        self.ops = ops
        with self.name_scope():
            self.w = self.params.get("w", shape=(3, 2), init=mx.init.Uniform(1))

    def hybrid_forward(self, F, h, a, w):
        return (self.ops or F.contrib).cond(F.sum(h) > 0, lambda: F.dot(a, w) * h,
                                            lambda: F.dot(a, w) * 2)


@pytest.mark.parametrize("static", [False, True], ids=["plain", "static"])
def test_a_csr_input_of_a_hybridized_cond_trains_as_mxnets(static):
    """A hybridized block passing a csr batch into ``cond`` (gluonnlp-style sparse features):
    MXNet's cond runs it, forward and the parameter's gradient; gluon_cf refused it."""
    seen = []
    for ops in (None, gluon_cf):
        mx.random.seed(3)
        net = _CsrCond(ops)
        net.initialize()
        net.hybridize(static_alloc=static, static_shape=static)
        h = nd.array([[1, 2], [3, 4], [5, 6]])
        with autograd.record():
            out = net(h, _csr())
        out.backward()
        seen.append((out.asnumpy(), net.w.grad().asnumpy()))
    for g, w in zip(seen[1], seen[0]):
        np.testing.assert_allclose(g, w, rtol=1e-5)


def test_a_csr_state_of_a_foreach_is_still_refused_naming_mxnets_rule():
    """MXNet's foreach refuses sparse data and states ("doesn't support the sparse format");
    gluon_cf refuses them naming the input, without claiming every control-flow operator
    of MXNet refuses sparse arrays."""
    sym = _build(gluon_cf, lambda ops: S.Group(list(ops.foreach(
        lambda d, s: (S.dot(d, s), s * 2), X, H))))
    with pytest.raises(mx.MXNetError) as err:
        sym.bind(mx.cpu(), {"x": nd.ones((2, 3, 3)), "h": _csr()}).forward()[0].asnumpy()
    assert "input 1 is csr" in str(err.value) and __file__ in str(err.value)
    assert "own control-flow operators refuse" not in str(err.value)


# ------------------------------------------- infer_shape_partial of a foreach's partial data
def _scan_mul(ops):
    return S.Group(list(ops.foreach(lambda d, s: (d * s, s + 1), X, H)))


def _scan_concat(ops):
    return S.Group(list(ops.foreach(lambda d, s: (S.concat(d, s, dim=-1), s * 2), X, H)))


def _scan_nested(ops):
    return S.Group(list(ops.foreach(
        lambda d, s: ops.foreach(lambda dd, ss: (dd * ss, ss + dd), d, s), X, H)))


PARTIAL_DATA = [(_scan_mul, {"x": (0, 0, 4), "h": (2, 4)}),
                (_scan_mul, {"x": (0, 0, 4), "h": (2, 0)}),
                (_scan_mul, {"x": (3, 0, 0), "h": (0, 4)}),
                (_scan_mul, {"x": (3, 0, 0), "h": (2, 0)}),
                (_scan_concat, {"x": (0, 0, 4), "h": (2, 5)}),
                (_scan_concat, {"x": (3, 0, 0), "h": (2, 5)}),
                (_scan_nested, {"x": (3, 0, 0), "h": (2,)})]


@pytest.mark.parametrize("program, given", PARTIAL_DATA, ids=[
    "%s-%s" % (p.__name__[6:], "-".join("%s%s" % kv for kv in g.items()))
    for p, g in PARTIAL_DATA])
def test_infer_shape_partial_completes_a_foreachs_data_as_mxnet(program, given):
    """The body tells the data's unknown dimensions after the first: MXNet's foreach answers
    them for the data argument ((3, 0, 0) with a state (0, 4) -> (3, 0, 4)); gluon_cf
    answered the data as given (only a complete step shape with a known length was read, and
    a partial answer never replaced a partial shape in the enclosing graph)."""
    want, got = (_build(ops, program).infer_shape_partial(**given) for ops in OPS.values())
    assert got == want


# ------------------------------------------- Embedding(sparse_grad=True) in a hybridized body
class _SparseEmbeddingBranches(gluon.HybridBlock):
    def __init__(self, ops, kind, **kwargs):
        super().__init__(**kwargs)
        self.ops, self.kind = ops, kind
        with self.name_scope():
            self.emb = gluon.nn.Embedding(10, 3, sparse_grad=True)

    def hybrid_forward(self, F, tokens, h):
        ops = self.ops or F.contrib
        if self.kind == "cond":
            return ops.cond(F.sum(h) > 0, lambda: self.emb(tokens) * h,
                            lambda: self.emb(tokens))
        return ops.while_loop(lambda i, s: F.sum(i) < 2,
                              lambda i, s: (s, [i + 1, s * h + self.emb(tokens)]),
                              [F.zeros((1,)), h], max_iterations=3)[1][1]


def _train_sparse_embedding(ops, kind, hybridize):
    mx.random.seed(7)
    net = _SparseEmbeddingBranches(ops, kind)
    net.initialize(mx.init.Uniform(1))
    if hybridize:
        net.hybridize()
    tokens, h = nd.array([[1, 2], [3, 1]]), nd.array(np.arange(12).reshape(2, 2, 3) / 10)
    with autograd.record():
        loss = net(tokens, h).sum()
    loss.backward()
    grad = net.emb.weight.grad()
    return loss.asnumpy(), grad.stype, grad.asnumpy(), sorted(grad.indices.asnumpy().tolist())


@pytest.mark.parametrize("kind", ["cond", "while_loop"])
def test_a_sparse_gradient_embedding_in_a_hybridized_branch_is_refused_honestly(kind):
    """An Embedding(sparse_grad=True) read in a hybridized cond branch: MXNet's cond trains it
    (its while_loop fails inside, "req != write"); gluon_cf's node cannot give a sparse
    gradient (NOTE [sparse gradients of a node] in gluon_cf/node_storage.py) and refuses it, naming
    the node and the user's line. It claimed MXNet's own control-flow operators refuse it
    too, untrue of cond. Eagerly gluon_cf gives MXNet's row_sparse gradient."""
    want = _train_sparse_embedding(None, kind, hybridize=False)
    got = _train_sparse_embedding(gluon_cf, kind, hybridize=False)
    assert got[1] == want[1] == "row_sparse" and got[3] == want[3] == [1, 2, 3]
    np.testing.assert_allclose(got[2], want[2], rtol=1e-5)
    if kind == "cond":
        assert _train_sparse_embedding(None, kind, hybridize=True)[1] == "row_sparse"
    with pytest.raises(mx.MXNetError) as err:
        _train_sparse_embedding(gluon_cf, kind, hybridize=True)
    message = str(err.value)
    assert "sparse_grad=False" in message and __file__ in message, message
    assert "own control-flow operators refuse" not in message, message


# ------------------------------------------- partial shapes never reach MXNet's shape pass
def _scan_concatenating_its_state(ops):
    return S.Group(list(ops.foreach(lambda d, s: (S.concat(d, s, dim=-1), s * 1), X, H)))


@pytest.mark.parametrize("bind", ["simple_bind", "module"])
def test_a_state_the_body_shapes_in_part_is_refused_not_bound_empty_as_mxnet(bind):
    """``simple_bind(x=(3, 2, 4))`` of a body concatenating its state: the body tells the
    state's rows (2, ?) but not its width. MXNet refuses ("cannot decide shapes ... h:
    [2,-1]"); gluon_cf's node answered MXNet's shape pass the partial (2, 0), which MXNet
    reads as a known empty dimension: h was bound as a (2, 0) array and the loop ran on it."""
    def bound(ops):
        sym = _build(ops, _scan_concatenating_its_state)
        if bind == "simple_bind":
            return sym.simple_bind(mx.cpu(), x=(3, 2, 4))
        module = mx.mod.Module(sym, data_names=["x"], label_names=None)
        module.bind(data_shapes=[("x", (3, 2, 4))], for_training=False)
        return module
    for ops in OPS.values():
        with pytest.raises(RuntimeError) as err:
            bound(ops)
        assert "cannot decide shapes" in str(err.value) and "h" in str(err.value)


# ------------------------------------------- a sparse head gradient of a node's output
class _SparseTable(gluon.HybridBlock):
    def __init__(self, ops, **kwargs):
        super().__init__(**kwargs)
        self.ops = ops

    def hybrid_forward(self, F, tokens, h, w):
        table = (self.ops or F.contrib).cond(F.sum(h) > 0, lambda: w * 2, lambda: w)
        return F.Embedding(tokens, table, input_dim=5, output_dim=3, sparse_grad=True)


def test_an_output_read_by_a_sparse_gradient_embedding_trains_as_mxnets_cond():
    """A cond's output used as the table of an Embedding(sparse_grad=True): its backward hands
    the node a row_sparse head gradient. MXNet's hybridized cond trains it; gluon_cf failed
    with MXNet's internal "Storage type inconsistent, Provided = row_sparse"."""
    seen = []
    for ops in (None, gluon_cf):
        net = _SparseTable(ops)
        net.hybridize()
        w = nd.array(np.arange(15).reshape(5, 3))
        w.attach_grad()
        with autograd.record():
            out = net(nd.array([1, 3]), nd.ones(2), w)
        out.backward()
        seen.append((out.asnumpy(), w.grad.asnumpy()))
    for g, w in zip(seen[1], seen[0]):
        np.testing.assert_allclose(g, w)
