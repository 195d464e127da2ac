"""Session 34 (issue 24): where MKLDNN is on, a block's outputs that are a gluon_cf node's, and
the nodes' outputs other operators read, pass through a ``Cast`` to their own dtype in the
graph the block's CachedOp runs (NOTE [MKLDNN values read by a node] in
gluon_cf/_cachedop.py). The dtype is inferred for the call the CachedOp is built for; the
review of the change found four ways a call met a Cast built for other dtypes: a ``None``
input before the others (the dtypes given to the wrong variables), parameters cast one by
one (``Parameter.cast``, which does not clear the CachedOp), two threads calling with
float32 and float64 (one switched the CachedOp while the other's call was on its way), and
the graphs kept per autograd mode (the CachedOp of the other mode restored). Each gave an
output of another dtype (with the None input, other values: uint8 -4 became 252). Oracle:
the block eager, numpy. Without MKLDNN the same tests check the plain path."""
import collections
import threading

import mxnet as mx
import numpy as np
from mxnet import autograd
from mxnet.gluon import HybridBlock, SymbolBlock, nn

import gluon_cf


class _NoneFirst(HybridBlock):
    def hybrid_forward(self, F, a=None, b=None, c=None):
        out, _ = gluon_cf.foreach(lambda d, s: (d * 2, s), c, [])
        return out, b * 1


def test_a_none_input_before_the_others():
    for b_dtype, c_dtype in (("float64", "float32"), ("int32", "float32"),
                             ("uint8", "float16")):
        args = (None, mx.nd.ones((2, 3), dtype=b_dtype),
                mx.nd.array([[1.7, -2, 3]] * 2, dtype=c_dtype))
        want = _NoneFirst()(*args)
        net = _NoneFirst()
        net.hybridize()
        got = net(*args)
        assert [o.dtype for o in got] == [o.dtype for o in want] == \
            [np.dtype(c_dtype), np.dtype(b_dtype)]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.asnumpy(), w.asnumpy())


class _Lookup(HybridBlock):
    def __init__(self, **kw):
        super().__init__(**kw)
        with self.name_scope():
            self.w = self.params.get("w", shape=(3,), init=mx.init.Constant(0.1234567891234))

    def hybrid_forward(self, F, x, w):
        out, _ = gluon_cf.foreach(lambda d, s: (F.take(w, d), s), x, [])
        return out


def test_parameters_cast_one_by_one_after_a_call():
    x = mx.nd.array([[0, 1], [2, 0]], dtype="int32")
    net = _Lookup()
    net.initialize()
    net.hybridize()
    assert net(x).dtype == np.float32
    for p in net.collect_params().values():
        p.cast("float64")
    eager = _Lookup()
    eager.initialize()
    eager.cast("float64")
    want = eager(x)
    got = net(x)
    assert got.dtype == want.dtype == np.float64
    np.testing.assert_array_equal(got.asnumpy(), want.asnumpy())
    assert got.asnumpy()[0, 1] == np.float64(np.float32(0.1234567891234))


class _Doubled(HybridBlock):
    def hybrid_forward(self, F, x):
        out, _ = gluon_cf.foreach(lambda d, s: (d * 2, s), x, [])
        return out


def test_threads_calling_with_other_dtypes():
    net = _Doubled()
    net.hybridize()
    wrong, errors = collections.Counter(), []

    def run(dtype):
        x = mx.nd.array([[1.1, 2, 3]] * 2, dtype=dtype)
        for _ in range(150):
            try:
                y = net(x)
                if y.dtype != np.dtype(dtype):
                    wrong[(dtype, y.dtype.name)] += 1
                np.testing.assert_allclose(y.asnumpy(), x.asnumpy() * 2)
            except Exception as err:   # noqa: BLE001 - reported below
                errors.append(repr(err)[:300])
    threads = [threading.Thread(target=run, args=(d,)) for d in ("float32", "float64")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not wrong and not errors, (dict(wrong), errors[:2])


def test_calls_alternating_dtypes_keep_one_cachedop_each():
    """A block called with float32 and float64 in turn builds a CachedOp per dtypes once
    (before the review: a rebuild on every call, 4-5 times slower), recorded too."""
    net = _Doubled()
    net.hybridize()
    xs = [mx.nd.array([[1.5, 2]], dtype=d) for d in ("float32", "float64")]
    ops = set()
    for k in range(6):
        x = xs[k % 2]
        x.attach_grad()
        with autograd.record():
            y = net(x)
        y.backward()
        assert y.dtype == x.dtype
        np.testing.assert_allclose(x.grad.asnumpy(), [[2, 2]])
        ops.add(id(net._cached_op))
    assert len(ops) <= 2, len(ops)


class _TrainingHalves(HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        if autograd.is_training():
            x = x * 0.5
        out, _ = gluon_cf.foreach(lambda d, s: (d * 1, s), x, [])
        return out


def test_graphs_kept_per_autograd_mode():
    x32 = mx.nd.array([[1.1, 2.2]])
    x64 = x32.astype("float64")
    results = []
    for hybridize in (False, True):
        net = _TrainingHalves()
        if hybridize:
            net.hybridize()
        got = [net(x32)]
        with autograd.record():
            got.append(net(x64))
        got.append(net(x64))
        results.append([(y.dtype, y.asnumpy().tolist()) for y in got])
    assert results[1] == results[0]
    assert [d for d, _ in results[0]] == [np.float32, np.float64, np.float64]


class _DoubledImage(HybridBlock):
    def hybrid_forward(self, F, h):
        out, _ = gluon_cf.foreach(lambda d, s: (d * 2 + s[0], [s[0] + 1]), h,
                                  [F.zeros((16, 6, 6))])
        return out


def _conv_around(block, x):
    """Values and gradients of ``c2(block(c1(x)))``: eager convolutions (MKLDNN's blocked
    layout) before and after the block."""
    c1 = nn.Conv2D(16, 3, padding=1, in_channels=4)
    c2 = nn.Conv2D(8, 3, padding=1, in_channels=16)
    for k, c in enumerate((c1, c2)):
        c.initialize()
        for j, p in enumerate(c.collect_params().values()):
            p.set_data(mx.nd.array(np.random.RandomState(10 * k + j).randn(*p.shape) * 0.1))
    x = x.copy()
    x.attach_grad()
    with autograd.record():
        out = c2(block(c1(x)))
        loss = (out * out).sum()
    loss.backward()
    return [out.asnumpy(), x.grad.asnumpy()] + \
        [p.grad().asnumpy() for c in (c1, c2) for p in c.collect_params().values()]


def test_a_symbolblock_imported_from_an_export_between_convolutions(tmp_path):
    """``net.export`` then ``SymbolBlock.imports``, hybridized, between two eager
    convolutions: values and every gradient equal the block's eager ones (before the guard of
    a block's outputs: 3 of 5 imported blocks' gradients wrong)."""
    net = _DoubledImage()
    net.hybridize()
    net(mx.nd.ones((2, 16, 6, 6)))
    net.export(str(tmp_path / "doubled"))
    x = mx.nd.array(np.random.RandomState(0).randn(2, 4, 6, 6))
    want = _conv_around(_DoubledImage(), x)
    for _ in range(5):
        imported = SymbolBlock.imports(str(tmp_path / "doubled-symbol.json"), ["data"], None)
        imported.hybridize()
        for w, g in zip(want, _conv_around(imported, x)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
