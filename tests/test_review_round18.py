"""Review of session 18's index-gradient refusal (NOTE [gradients asked of indices]): it must
refuse what MXNet refuses, eagerly and hybridized, and only that. The oracle is eager
autograd (MXNet decides there: ``Embedding`` refuses a gradient of its indices, a loop
counter computed beside the states trains).

- A control-flow node nested in a body counted every output as depending on every tainted
  input: an outer foreach whose body's inner loop (or cond) updates a counter beside a
  state needing a gradient refused the Embedding of the counter, which runs eagerly.
- A ``recursion`` node was not looked into: the gradient asked of indices reaching an
  Embedding inside a recursive function was silently 0 hybridized (eagerly MXNet refuses).
- ``broadcast_like``'s and ``reshape_like``'s shape source and ``where``'s condition pass
  no gradient in MXNet: an index made from them was refused.
"""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

import gluon_cf
from gluon_cf.graph.index_gradients import IndexGradientError


class _NestedCounter(gluon.HybridBlock):
    """An outer foreach whose body updates a counter and a state in one inner node, then
    embeds the counter."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        with self.name_scope():
            self.emb = gluon.nn.Embedding(10, 3)

    def hybrid_forward(self, F, x):
        def body(d, s):
            cnt, h = s
            if self.inner == "foreach":
                _, (cnt2, h2) = gluon_cf.foreach(
                    lambda dd, ss: (dd * 1, [ss[0] + 1, ss[1] * 0.5 + dd]),
                    F.expand_dims(d, 0), [cnt, h])
            elif self.inner == "while_loop":
                _, (_, cnt2, h2) = gluon_cf.while_loop(
                    lambda j, c, hh: j < 2,
                    lambda j, c, hh: (hh, [j + 1, c + 1, hh * 0.5 + d]),
                    [F.zeros((1,)), cnt, h], max_iterations=2)
            elif self.inner == "cond":
                cnt2, h2 = gluon_cf.cond(F.sum(d) > 0, lambda: (cnt + 1, h * 2 + d),
                                         lambda: (cnt + 2, h + d))
            elif self.inner == "broadcast_like":   # no gradient through the shape source
                cnt2 = cnt + F.broadcast_like(F.ones((1,)), F.sum(h, axis=-1))
                h2 = h * 0.5 + d
            else:   # nor through a where's condition
                cnt2, h2 = F.where(F.sum(h, axis=-1), cnt + 1, cnt + 2), h * 0.5 + d
            nh = h2 + self.emb(cnt2)
            return nh, [cnt2, nh]
        return gluon_cf.foreach(body, x, [F.zeros((2,)), F.zeros((2, 3))])[1][1]


@pytest.mark.parametrize("inner", ["foreach", "while_loop", "cond", "broadcast_like",
                                   "where"])
def test_a_counter_updated_in_a_nested_node_trains_as_eagerly(inner):
    results = []
    for hybrid in (False, True):
        net = _NestedCounter(inner)
        net.initialize(mx.init.Constant(0.25))
        if hybrid:
            net.hybridize()
        x = nd.array(np.arange(18).reshape(3, 2, 3) / 10.0 - 0.5)
        x.attach_grad()
        with autograd.record():
            y = net(x)
            loss = (y * y).sum()
        loss.backward()
        results.append((y.asnumpy(), x.grad.asnumpy(), net.emb.weight.grad().asnumpy()))
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5)
    assert np.abs(results[1][2]).sum() > 0


class _RecursiveEmbedding(gluon.HybridBlock):
    def __init__(self, where, through_h):
        super().__init__()
        self.where, self.through_h = where, through_h
        with self.name_scope():
            self.emb = gluon.nn.Embedding(10, 3)

    def hybrid_forward(self, F, idx, x):
        emb, through_h = self.emb, self.through_h

        @gluon_cf.recursive
        def shifted(i, h):      # a callee whose output becomes an index
            return i + F.sum(h, axis=-1) * 0 if through_h else i * 1

        @gluon_cf.recursive
        def walk(i, h):
            return gluon_cf.cond(F.sum(i) > 0,
                                 lambda: walk(i - 1, h + emb(shifted(i, h) * 1)), lambda: h)
        if self.where == "top":
            return walk(idx, x)
        return gluon_cf.foreach(lambda d, s: (walk(s[0], d), [s[0]]), x, [idx])[0]


def _run(where, through_h, hybrid, wanted):
    net = _RecursiveEmbedding(where, through_h)
    net.initialize(mx.init.Constant(0.25))
    if hybrid:
        net.hybridize()
    shape = (1, 3) if where == "top" else (2, 1, 3)
    inputs = {"idx": nd.array([2.0]), "x": nd.array(np.arange(3.0 * shape[0]).reshape(shape))}
    for name in wanted:
        inputs[name].attach_grad()
    with autograd.record():
        y = net(inputs["idx"], inputs["x"])
        loss = (y * y).sum()
    loss.backward()
    return [y.asnumpy(), net.emb.weight.grad().asnumpy()] + [
        inputs[name].grad.asnumpy() for name in wanted]


@pytest.mark.parametrize("where", ["top", "foreach"])
@pytest.mark.parametrize("through_h, wanted", [(False, ("idx",)), (True, ("x",))])
def test_a_gradient_asked_of_indices_inside_a_recursion_is_refused_as_eagerly(
        where, through_h, wanted):
    """The indices need a gradient as an argument of the recursion, or as the output of a
    call whose argument needs one."""
    for hybrid, error in ((False, mx.MXNetError), (True, IndexGradientError)):
        with pytest.raises(error, match="Embedding"):
            _run(where, through_h, hybrid, wanted)


@pytest.mark.parametrize("where", ["top", "foreach"])
def test_a_recursion_embedding_indices_needing_no_gradient_trains_as_eagerly(where):
    eager, hybrid = (_run(where, False, h, ("x",)) for h in (False, True))
    for got, want in zip(hybrid, eager):
        np.testing.assert_allclose(got, want, rtol=1e-5)
    assert np.abs(hybrid[1]).sum() > 0


def test_a_default_left_out_before_a_keyword_argument_is_named_not_called_keyword_only():
    """``f(x, c=y)`` of ``def f(a, b=None, c=None)``: Python would run it with b's default;
    a recursive function's arguments are positional arrays, so it is refused, saying why
    (it said 'c' was keyword-only)."""
    @gluon_cf.recursive
    def f(a, b=None, c=None):
        return a * 2

    @gluon_cf.recursive
    def g(a, *, k):
        return a * 2

    with pytest.raises(TypeError, match=r"test_review_round18.py:\d+: .*'f' is called without "
                       r"'b', which comes before 'c' given by name.*pass 'b' too"):
        f(nd.ones((1,)), c=nd.ones((1,)))
    with pytest.raises(TypeError, match="'g' takes 'k' by keyword only"):
        g(nd.ones((1,)), k=nd.ones((1,)))
    np.testing.assert_allclose(f(nd.ones((1,)), b=nd.ones((1,))).asnumpy(), [2.0])
