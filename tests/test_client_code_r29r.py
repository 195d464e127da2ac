"""Round 29r (issue 24): client code against MXNet 1.9.1's own behaviour, the oracle."""
import re

import mxnet as mx
import numpy as np
import pytest
from mxnet import nd

import gluon_cf


@pytest.mark.parametrize("func", [3, None, "step", []])
@pytest.mark.parametrize("listed", [False, True])
def test_eager_while_loop_of_no_step_with_a_func_not_callable_returns_as_mxnet(func, listed):
    """Before: TypeError "func must be callable" at once; MXNet's eager loop calls func only
    at a step, so a cond false at once returns ([], loop_vars)."""
    x = nd.array([1.0, 2.0])
    loop_vars = [x] if listed else x
    want = mx.nd.contrib.while_loop(lambda v: v.sum() > 5, func, loop_vars, max_iterations=4)
    got = gluon_cf.while_loop(lambda v: v.sum() > 5, func, loop_vars, max_iterations=4)
    assert got[0] == want[0] == []
    assert type(got[1]) is type(want[1])
    np.testing.assert_array_equal((got[1][0] if listed else got[1]).asnumpy(), x.asnumpy())


def test_eager_while_loop_with_a_func_not_callable_is_refused_at_its_first_step():
    x = nd.array([1.0, 2.0])
    with pytest.raises(TypeError, match=r"'int' object is not callable"):
        mx.nd.contrib.while_loop(lambda v: v.sum() < 5, 3, x, max_iterations=4)
    with pytest.raises(TypeError, match=r"^gluon_cf\.while_loop at %s:\d+: func must be "
                       r"callable, got int$" % __file__):
        gluon_cf.while_loop(lambda v: v.sum() < 5, 3, x, max_iterations=4)
    with pytest.raises(TypeError, match="func must be callable, got int"):   # (as symbols)
        gluon_cf.while_loop(lambda v: v.sum() < 5, 3, mx.sym.var("x"), max_iterations=4)


def test_infer_shape_of_an_output_known_only_at_run_time_is_mxnets_none_and_warning():
    """Before: infer_shape answered [(1, 0)] with no warning; MXNet 1.9.1's own cond answers
    (None, None, None) and warns "Cannot decide shape". infer_shape_partial keeps what is
    known (0: unknown); simple_bind and bind refuse the run-time shape, as before."""
    x, p = mx.sym.var("x"), mx.sym.var("p")
    ours = gluon_cf.cond(mx.sym.sum(p) > 0, lambda: x, lambda: mx.sym.concat(x, x, dim=1))
    theirs = mx.sym.contrib.cond(mx.sym.sum(p) > 0, lambda: x,
                                 lambda: mx.sym.concat(x, x, dim=1))
    for sym in (theirs, ours):
        with pytest.warns(UserWarning, match="Cannot decide shape"):
            assert sym.infer_shape(x=(1, 3), p=(1,)) == (None, None, None)
    assert theirs.infer_shape_partial(x=(1, 3), p=(1,)) == ([(1,), (1, 3)], [()], [])
    assert ours.infer_shape_partial(x=(1, 3), p=(1,)) == ([(1,), (1, 3)], [(1, 0)], [])
    with pytest.raises(RuntimeError, match="known only at run time"):
        ours.simple_bind(mx.cpu(), x=(1, 3), p=(1,))
    with pytest.raises(Exception, match="known only at run time"):
        ours.bind(mx.cpu(), {"x": nd.ones((1, 3)), "p": nd.ones((1,))}).forward()
    same = gluon_cf.cond(mx.sym.sum(p) > 0, lambda: x, lambda: x * 2)   # (decided: as before)
    assert same.infer_shape(x=(1, 3), p=(1,)) == ([(1,), (1, 3)], [(1, 3)], [])


def _run_bound(out, args):
    grads = {k: nd.zeros(v.shape) for k, v in args.items() if k != "p"}
    ex = out.bind(mx.cpu(), {k: v.copy() for k, v in args.items()}, args_grad=grads)
    value = ex.forward(is_train=True)[0].asnumpy()
    ex.backward(nd.ones(value.shape))
    return value, {k: g.asnumpy() for k, g in grads.items()}


@pytest.mark.parametrize("positive", [True, False])
def test_a_branch_variable_named_like_an_outer_output_reads_it_as_mxnets_cond(positive):
    """Before: NameClashError ("two different values are both named 'fc_output'"); MXNet
    1.9.1's cond reads the outer value there, within one branch. Its foreach and while_loop
    refuse the two ("don't have unique names"), and gluon_cf's still do."""
    x, p = mx.sym.var("x"), mx.sym.var("p")
    h = mx.sym.FullyConnected(x, num_hidden=2, name="fc", no_bias=True)
    args = {"x": nd.array([[1., 2.]]), "p": nd.array([1. if positive else -1.]),
            "fc_weight": nd.array([[1., 0.5], [0., 1.]])}
    want = mx.sym.contrib.cond(mx.sym.sum(p) > 0, lambda: h + mx.sym.var("fc_output") * 10,
                               lambda: h * 3)
    got = gluon_cf.cond(mx.sym.sum(p) > 0, lambda: h + mx.sym.var("fc_output") * 10,
                        lambda: h * 3)
    assert got.list_arguments() == want.list_arguments() == ["p", "x", "fc_weight"]
    value, grads = _run_bound(got, args)
    ex = want.bind(mx.cpu(), {k: v.copy() for k, v in args.items()})   # (its backward fails)
    np.testing.assert_allclose(value, ex.forward()[0].asnumpy(), rtol=1e-6)
    k = 11. if positive else 3.     # (numpy: k * x W^T, and its gradients)
    w, xs = args["fc_weight"].asnumpy(), args["x"].asnumpy()
    np.testing.assert_allclose(value, k * xs @ w.T, rtol=1e-6)
    np.testing.assert_allclose(grads["x"], k * np.ones((1, 2)) @ w, rtol=1e-6)
    np.testing.assert_allclose(grads["fc_weight"], k * np.ones((2, 1)) @ xs, rtol=1e-6)
    with pytest.raises(AssertionError, match="unique names"):
        mx.sym.contrib.foreach(lambda d, s: (d + mx.sym.var("fc_output") + h, s),
                               mx.sym.var("d"), [x])
    with pytest.raises(ValueError, match="both named 'fc_output'"):
        gluon_cf.foreach(lambda d, s: (d + mx.sym.var("fc_output") + h, s), mx.sym.var("d"), [x])


class _TakeKept(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x, m, idx):
        kept = F.contrib.boolean_mask(x, m)
        return F.take(kept, idx, mode="raise")


def test_take_past_the_kept_rows_in_a_blocks_own_graph_names_the_users_line():
    """Before: MXNet's "take operator contains indices out of bound", no line, at the next
    read. Eagerly MXNet raises it too; hybridized, the IndexError names the take's line."""
    import inspect
    net = _TakeKept()
    x, m = nd.arange(12).reshape(4, 3), nd.array([1, 0, 1, 0])
    with pytest.raises(mx.MXNetError, match="indices out of bound"):
        net(x, m, nd.array([3])).asnumpy()
    net.hybridize()
    np.testing.assert_array_equal(net(x, m, nd.array([1])).asnumpy(), [[6, 7, 8]])
    lines, first = inspect.getsourcelines(_TakeKept.hybrid_forward)
    line = first + next(k for k, text in enumerate(lines) if "F.take" in text)
    with pytest.raises(IndexError, match=r"^%s:%d: take: an index is out of bounds for axis 0"
                       % (__file__, line)):
        net(x, m, nd.array([3])).asnumpy()
    np.testing.assert_array_equal(net(x, m, nd.array([0])).asnumpy(), [[0, 1, 2]])


class _ReshapeAfterCond(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x, m):
        return gluon_cf.cond(F.sum(m) > 0, lambda: x * 2, lambda: x).reshape((2, 6))


def test_an_imported_blocks_reshape_error_names_the_users_call(tmp_path):
    """Before: the ValueError named MXNet's block.py (SymbolBlock's hybrid_forward); now the
    user's call of the imported block."""
    net = _ReshapeAfterCond()
    net.hybridize()
    x, m = nd.arange(12).reshape(4, 3), nd.array([1, 0, 1, 0])
    net(x, m)
    net.export(str(tmp_path / "net"))
    imported = mx.gluon.SymbolBlock.imports(str(tmp_path / "net-symbol.json"),
                                            ["data0", "data1"])
    np.testing.assert_array_equal(imported(x, m).asnumpy(), net(x, m).asnumpy())
    with pytest.raises(ValueError) as err:
        imported(nd.arange(15).reshape(5, 3), m)
    assert str(err.value).startswith("%s:%d: block %r (a graph imported into a SymbolBlock)"
                                     % (__file__, err.tb.tb_lineno, imported.name)), err.value
    assert "target shape (2, 6) has 12 elements" in str(err.value)


class _Loops(mx.gluon.HybridBlock):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def hybrid_forward(self, F, x):
        if self.op == "foreach":
            _, s = gluon_cf.foreach(lambda d, s: ([], [s[0] * d]), x, [F.ones((2,))])
            return s[0]
        _, (_, v) = gluon_cf.while_loop(lambda i, v: i < 2, lambda i, v: ([], [i + 1, v * v]),
                                        [F.zeros((1,)), F.sum(x, axis=0)], max_iterations=2)
        return v


@pytest.mark.parametrize("op", ["foreach"])
def test_a_second_order_gradient_through_a_hybridized_loop_names_the_op_and_line(op):
    """Before: MXNet's "Operator _backward_Custom is non-differentiable" (no op, node or
    line); now the gluon_cf op, its node, the line that made it and what is not supported.
    First-order gradients with create_graph=True still work. (A block MXNet runs as one
    CachedOp refuses create_graph=True itself, saying not to hybridize: the while_loop one.)"""
    import inspect
    from mxnet import autograd
    net = _Loops(op)
    net.hybridize()
    x = nd.array([[1., 2.], [3., 4.]])
    x.attach_grad()
    with autograd.record():
        y = net(x)
        g = autograd.grad(y, [x], create_graph=True)[0]
        z = (g * g).sum()
    assert g.shape == x.shape
    lines, first = inspect.getsourcelines(_Loops.hybrid_forward)
    line = first + next(k for k, text in enumerate(lines) if "gluon_cf.%s(" % op in text)
    with pytest.raises(NotImplementedError) as err:
        z.backward()
    assert isinstance(err.value, mx.MXNetError)
    assert re.match(r"gluon_cf\.%s \(node '[^']+'\) at %s:%d: a second-order gradient through "
                    r"it is not supported" % (op, re.escape(__file__), line),
                    str(err.value)), err.value
