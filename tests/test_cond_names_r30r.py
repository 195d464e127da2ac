"""Round 30r (issue 24, client code of F.contrib): a cond whose then_func reads one computed
value and whose else_func another of the same name (``name="v"`` given twice, two Gluon layers
of one prefix) was refused (NameClashError) where MXNet 1.9.1's cond runs it, each branch
reading its own (NOTE [computed values of one name in while_loop]). Oracle: mx.sym.contrib.cond,
values and gradients, both predicates; and eager NDArrays for a hybridized block."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, nd
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf.checks import NameClashError

S = mx.sym
TOL = dict(rtol=1e-5, atol=1e-6)
X = np.array([1.0, 2.0], "float32")


def one_per_branch(cond):
    x, p = S.var("x"), S.var("p")
    a, b = S.identity(x * 2, name="v"), S.identity(x * 3, name="v")
    return cond(p > 0, lambda: a + 1, lambda: b * b)


def swapped(cond):
    x, p = S.var("x"), S.var("p")
    a, b = S.identity(x * 2, name="v"), S.identity(x * 3, name="v")
    return cond(p > 0, lambda: b * x, lambda: a + x)


def variable_named_as_an_output(cond):
    x, p = S.var("x"), S.var("p")
    a = S.identity(x * 2, name="w")
    return cond(p > 0, lambda: a + 1, lambda: S.var("w_output") * x)


HEAD = np.array([1.0, 0.5], "float32")
W = np.array([7.0, 8.0], "float32")
# d out / d x (and d w_output) under the head gradient HEAD, by hand: the oracle of gradients
# (MXNet's own cond fails its backward on ``swapped`` and leaves x's uninitialised in the
# else branch of ``variable_named_as_an_output``)
GRADS = {one_per_branch: lambda p: {"x": HEAD * (2 if p > 0 else 18 * X)},
         swapped: lambda p: {"x": HEAD * (6 * X if p > 0 else 3)},
         variable_named_as_an_output: lambda p: {"x": HEAD * (2 if p > 0 else W),
                                                 "w_output": HEAD * (0 if p > 0 else X)}}


def _run(sym, pred, backward=True):
    args = {"x": nd.array(X), "p": nd.array([pred])}
    if "w_output" in sym.list_arguments():
        args["w_output"] = nd.array(W)
    grads = {k: nd.zeros_like(v) for k, v in args.items() if k != "p" and backward}
    ex = sym.bind(mx.cpu(), args, args_grad=grads, grad_req={k: "write" if k in grads else
                                                              "null" for k in args})
    out = ex.forward(is_train=backward)[0].asnumpy()
    if backward:
        ex.backward(nd.array(HEAD))
    return out, {k: v.asnumpy() for k, v in grads.items()}


@pytest.mark.parametrize("build", [one_per_branch, swapped, variable_named_as_an_output],
                         ids=lambda f: f.__name__)
def test_each_branch_reads_its_own_value_of_one_name_as_mxnet(build):
    want_sym, got_sym = build(S.contrib.cond), build(gluon_cf.cond)
    assert got_sym.list_arguments() == want_sym.list_arguments()
    for pred in (1.0, -1.0):
        want, got = _run(want_sym, pred, backward=False), _run(got_sym, pred)
        np.testing.assert_allclose(got[0], want[0], **TOL)
        for name, grad in GRADS[build](pred).items():
            np.testing.assert_allclose(got[1][name], grad, err_msg=name, **TOL)


def test_one_branch_reading_both_values_of_one_name_is_still_refused():
    """MXNet's cut keeps one of the two for both reads (4x for 2x + 3x), silently."""
    x, p = S.var("x"), S.var("p")
    a, b = S.identity(x * 2, name="v"), S.identity(x * 3, name="v")
    with pytest.raises(NameClashError, match="two different values are both named 'v_output'"):
        gluon_cf.cond(p > 0, lambda: a + 1, lambda: b + a)


class TwoOfOneName(HybridBlock):
    def hybrid_forward(self, F, x, p):
        a, b = F.identity(x * 2, name="v"), F.identity(x * 3, name="v")
        return gluon_cf.cond(F.sum(p) > 0, lambda: a + 1, lambda: b * b)


def test_a_hybridized_block_matches_eager_and_a_call_history():
    """Values and input gradients hybridized equal eager NDArrays' (then: 2x + 1, else: 9x^2),
    for a sequence of calls on one block as for each on a fresh block."""
    net = TwoOfOneName()
    net.hybridize()
    for pred in (1.0, -1.0, -1.0, 1.0):
        x = nd.array(X)
        x.attach_grad()
        with autograd.record():
            out = net(x, nd.array([pred]))
        out.backward()
        want = 2 * X + 1 if pred > 0 else 9 * X * X
        want_grad = X * 0 + 2 if pred > 0 else 18 * X
        np.testing.assert_allclose(out.asnumpy(), want, **TOL)
        np.testing.assert_allclose(x.grad.asnumpy(), want_grad, **TOL)
