"""Round 31mk (issue 24): the paths NOTE [MKLDNN values read by a node] (``_cachedop.py``)
left unguarded and untested, each given a Conv2D's value (MKLDNN keeps a 4-D convolution's
output in a blocked layout, nChw8c). MXNet 1.9.1 gives a ``Custom`` operator a default-layout
*copy* of such an input, freed before its Python callback reads it. Wrong before this round:
a user CustomOp reading it in a block that runs partitioned (``mx.nd.Custom`` called
imperatively by ``graph/partitioned.py``): 16 of 20 fresh blocks' values other numbers at the
top level, 10 of 20 in a ``foreach`` body; a recorded eager ``remat`` foreach and an eager
``@recursive(remat=True)`` call over rows of it: MXNetError "Check failed: !is_view" (MXNet
1.9.1 cannot copy a view of an MKLDNN array, ``conv(x)[0].copy()``). Right before and kept so here (each of these tests
fails with the block graph's guard taken out): a partitioned block's gluon_cf nodes (run in
the calling thread, no Custom operator), a Conv2D in a ``cond`` branch read by a nested node,
a Conv2D in a ``foreach`` body and in a recursive function (values and gradients), inference
of a recursion (``hybrid_inline.py``), ``SymbolBlock.imports`` of an exported block.
Oracles: the same block eager (every run with ``MXNET_MKLDNN_ENABLED=0`` agrees) and the
Conv2D's own value times two."""
import os

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd
from mxnet.gluon import HybridBlock, SymbolBlock, nn

import gluon_cf

TOL = dict(rtol=1e-5, atol=1e-5)


class _Twice(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0] * 2)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], out_grad[0] * 2)


@mx.operator.register("twice_r31mk")
class _TwiceProp(mx.operator.CustomOpProp):
    def list_arguments(self):
        return ["data"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return _Twice()


def _mask_cond(F, x, h):
    """A cond reading a boolean_mask's value: the block runs partitioned."""
    kept = F.contrib.boolean_mask(x.reshape((-1,)), x.reshape((-1,)) > 0)
    return gluon_cf.cond(F.sum(kept) > -1e9, lambda: h * 2, lambda: h)


def _nested_foreach(F, h, conv):
    def branch():
        out, _ = gluon_cf.foreach(lambda d, s: (d * 2 + s[0], [s[0]]), conv(h),
                                  [F.zeros((16, 6, 6))])
        return out
    return gluon_cf.cond(F.sum(h) > -1e9, branch, lambda: h)


def _between(kind, F, x, h, conv, dense):
    if kind == "partitioned":
        return _mask_cond(F, x, h)
    if kind == "branch_read_by_cond":
        return gluon_cf.cond(F.sum(h) > -1e9, lambda: gluon_cf.cond(
            F.sum(h) > -1e9, lambda: conv(h) * 2 + 0, lambda: h) + 1, lambda: h)
    if kind == "branch_read_by_foreach":
        return _nested_foreach(F, h, conv)
    if kind == "foreach_body":
        out, _ = gluon_cf.foreach(
            lambda d, s: (conv(d.expand_dims(0)).squeeze(0) + s[0], [s[0]]), h,
            [F.zeros((16, 6, 6))])
        return out

    @gluon_cf.recursive
    def f(n, v):
        def step():
            if kind == "recursion_conv":
                return f(n - 1, conv(v))
            return f(n - 1, dense(v.reshape((0, 16, -1))).reshape((0, 16, 6, 6)))
        return gluon_cf.cond(n > 0, step, lambda: v * 1)
    return f(F.sum(x).reshape((1,)) * 0 + 2, h)


class ConvThenNode(HybridBlock):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        with self.name_scope():
            self.c1 = nn.Conv2D(16, 3, padding=1, in_channels=4)
            self.c2 = nn.Conv2D(8, 3, padding=1, in_channels=16)
            self.c3 = nn.Conv2D(16, 3, padding=1, in_channels=16)
            self.d = nn.Dense(36, in_units=36, flatten=False)

    def hybrid_forward(self, F, x):
        if self.kind == "imported":
            h = self.c1(x)
            return self.c2(gluon_cf.cond(F.sum(h) > -1e9, lambda: h * 2, lambda: h))
        return self.c2(_between(self.kind, F, x, self.c1(x), self.c3, self.d))


def _seeded(net, hybridize):
    net.initialize()
    for p in net.collect_params().values():   # (the same values in every fresh block)
        seed = len(p.name.split("_", 1)[1])
        p.set_data(mx.nd.array(np.random.RandomState(seed).randn(*p.shape) * 0.1))
    if hybridize:
        net.hybridize()
    return net


def _net(kind, hybridize, tmp=None):
    net = _seeded(ConvThenNode(kind), hybridize)
    if tmp is not None:
        net(mx.nd.ones((2, 4, 6, 6)))
        net.export(os.path.join(tmp, "m"))
        net = SymbolBlock.imports(os.path.join(tmp, "m-symbol.json"), ["data"],
                                  os.path.join(tmp, "m-0000.params"))
        net.hybridize()
    return net


def _run(net, x, head, train):
    x = x.copy()
    x.attach_grad()
    if not train:
        return [net(x).asnumpy()]
    with autograd.record():
        y = net(x)
    y.backward(head)
    return [y.asnumpy(), x.grad.asnumpy()]


KINDS = ["partitioned", "branch_read_by_cond", "branch_read_by_foreach", "foreach_body",
         "recursion_conv", "recursion_dense", "imported"]


@pytest.mark.parametrize("kind", KINDS)
def test_round_31mk_a_convolutions_value_on_every_path(kind, tmp_path):
    rng = np.random.RandomState(0)
    x = mx.nd.array(rng.randn(2, 4, 6, 6))
    head = mx.nd.array(rng.randn(2, 8, 6, 6))
    tmp = str(tmp_path) if kind == "imported" else None
    wrong = []
    for train in (False, True):
        want = _run(_net(kind, False), x, head, train)
        for _ in range(5):
            got = _run(_net(kind, True, tmp), x, head, train)
            wrong.append(not all(np.allclose(g, w, **TOL) for g, w in zip(got, want)))
    assert sum(wrong) == 0, wrong


class UserOpReadsConv(HybridBlock):
    def __init__(self, in_body):
        super().__init__()
        self.in_body = in_body
        with self.name_scope():
            self.c1 = nn.Conv2D(16, 3, padding=1, in_channels=4)

    def hybrid_forward(self, F, x):
        if self.in_body:   # (a foreach body holding a user CustomOp runs partitioned)
            out, _ = gluon_cf.foreach(lambda d, s: (F.Custom(
                self.c1(d.expand_dims(0)), op_type="twice_r31mk").squeeze(0), s), x,
                [F.zeros((1,))])
            return out
        return F.broadcast_add(F.Custom(self.c1(x), op_type="twice_r31mk"),
                               0 * F.sum(_mask_cond(F, x, x)))


@pytest.mark.parametrize("in_body", [False, True], ids=["top_level", "foreach_body"])
def test_round_31mk_a_user_customop_reading_a_convolution_in_a_partitioned_block(in_body):
    """16 of 20 fresh blocks other numbers before (10 of 20 in the body)."""
    x = mx.nd.array(np.random.RandomState(0).randn(2, 4, 6, 6))
    wrong = 0
    for _ in range(20):
        net = UserOpReadsConv(in_body)
        net.initialize()
        want = net.c1(x).asnumpy() * 2
        net.hybridize()
        wrong += not np.allclose(net(x).asnumpy(), want, **TOL)
    assert wrong == 0


def test_round_31mk_an_eager_convolutions_value_given_to_an_imported_block(tmp_path):
    conv = nn.Conv2D(16, 3, padding=1, in_channels=4)
    conv.initialize()
    x = mx.nd.array(np.random.RandomState(0).randn(2, 4, 6, 6))
    want = conv(x).asnumpy() * 2

    class Cond(HybridBlock):
        def hybrid_forward(self, F, h):
            return gluon_cf.cond(F.sum(h) > -1e9, lambda: h * 2, lambda: h)
    net = Cond()
    net.hybridize()
    net(conv(x))
    net.export(os.path.join(str(tmp_path), "m"))
    wrong = 0
    for _ in range(20):
        imported = SymbolBlock.imports(os.path.join(str(tmp_path), "m-symbol.json"), ["data"])
        imported.hybridize()
        wrong += not np.allclose(imported(conv(x)).asnumpy(), want, **TOL)
    assert wrong == 0


def test_round_31mk_the_guard_follows_mxnets_own_switch():
    """MXNet reads ``MXNET_MKLDNN_ENABLED``; gluon_cf read ``MXNETMKLDNN_ENABLED`` before, so
    with MKLDNN switched off it still copied every guarded value."""
    import subprocess
    import sys
    code = "import gluon_cf._cachedop as c; print(c.MKLDNN)"
    env = dict(os.environ, MXNET_MKLDNN_ENABLED="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.split()[-1] == "False", out.stderr[-2000:]


class RematOverConv(HybridBlock):
    def __init__(self, op, remat):
        super().__init__()
        self.op, self.remat = op, remat
        with self.name_scope():
            self.c1 = nn.Conv2D(16, 3, padding=1, in_channels=4)
            self.c3 = nn.Conv2D(16, 3, padding=1, in_channels=16)

    def hybrid_forward(self, F, x):
        h = self.c1(x)
        if self.op == "foreach":
            out, _ = gluon_cf.foreach(
                lambda d, s: (self.c3(d.expand_dims(0)).squeeze(0) * s[0], [s[0] * 1.1]), h,
                [F.ones((16, 6, 6))], remat=self.remat)
            return out
        out, _ = gluon_cf.while_loop(
            lambda i, v: i < 3, lambda i, v: (v, (i + 1, self.c3(v) * 0.5)), (F.zeros((1,)), h),
            max_iterations=3, remat=self.remat)
        return out


@pytest.mark.parametrize("op", ["foreach", "while_loop"])
@pytest.mark.parametrize("hybridize", [False, True], ids=["eager", "hybridized"])
def test_round_31mk_remat_over_a_convolutions_value(op, hybridize):
    """A recorded ``remat`` foreach over a Conv2D's value: MXNetError "Check failed: !is_view"
    before, eager (remat copied each step's slice, a view of an array in an MKLDNN layout,
    which MXNet 1.9.1 cannot copy: ``conv(x)[0].copy()``). Oracle: remat=False, eager."""
    rng = np.random.RandomState(0)
    x = mx.nd.array(rng.randn(2, 4, 6, 6))
    head = mx.nd.array(rng.randn(*((2, 16, 6, 6) if op == "foreach" else (3, 2, 16, 6, 6))))

    def run(remat, hybrid):
        net = _seeded(RematOverConv(op, remat), hybrid)
        return _run(net, x, head, True) + [net.c3.weight.grad().asnumpy()]
    want = run(False, False)
    for _ in range(3):
        got = run(1, hybridize)
        assert all(np.allclose(g, w, **TOL) for g, w in zip(got, want))


def test_round_31mk_a_remat_recursion_given_rows_of_a_convolutions_value():
    """``@recursive(remat=True)`` called eagerly on ``conv(x)[0:1]`` (a view of an array in an
    MKLDNN layout): MXNetError "Check failed: !is_view" in backward before (the call's
    arguments copied for the recomputation). Oracle: remat=False."""
    c1 = nn.Conv2D(16, 3, padding=1, in_channels=4)
    c3 = nn.Conv2D(16, 3, padding=1, in_channels=16)
    c1.initialize()
    c3.initialize()
    x = mx.nd.array(np.random.RandomState(0).randn(2, 4, 6, 6))

    def run(remat):
        @gluon_cf.recursive(remat=remat)
        def f(n, v):
            return gluon_cf.cond(n > 0, lambda: f(n - 1, c3(v)), lambda: v * 1)
        xx = x.copy()
        xx.attach_grad()
        with autograd.record():
            h = c1(xx)
            y = f(mx.nd.array([2]), h[0:1]) + f(mx.nd.array([1]), h[1:2])
        y.backward()
        return [y.asnumpy(), xx.grad.asnumpy(), c3.weight.grad().asnumpy()]
    want = run(False)
    for _ in range(3):
        assert all(np.allclose(g, w, **TOL) for g, w in zip(run(True), want))
