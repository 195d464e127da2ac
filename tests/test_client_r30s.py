"""Round 30s: client code against MXNet 1.9.1's own contrib ops, the oracle."""
import re

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

import gluon_cf
from gluon_cf.checks import ScalarDataError

_SCALAR = r"^gluon_cf\.foreach at %s:\d+: data\[%d\] is a 0-d array \(shape \(\)\), which has " \
          r"no axis 0 to loop over; give it one \(x\.reshape\(\(1,\)\) for a single step\)$"


class _Loop(gluon.HybridBlock):
    def __init__(self, theirs=False):
        super().__init__()
        self.theirs = theirs

    def hybrid_forward(self, F, x, h):
        return (F.contrib if self.theirs else gluon_cf).foreach(lambda d, s: (d * 2, s + d), x, h)


@pytest.mark.parametrize("hybridize", [False, True])
def test_foreach_over_a_0d_array_is_refused_at_the_users_line(hybridize):
    """Before: eagerly "data has length 0 along axis 0" (a 0-d array is no empty data), and
    hybridized a bare IndexError "tuple index out of range" from inside the CachedOp naming
    no line. MXNet 1.9.1's own foreach fails too: IndexError eagerly, MXNetError hybridized."""
    scalar, h = nd.array(3.0), nd.ones((1,))
    assert scalar.shape == ()
    theirs = _Loop(theirs=True)
    if hybridize:
        theirs.hybridize()
    with pytest.raises(mx.MXNetError if hybridize else IndexError):
        theirs(scalar, h)
    ours = _Loop()
    if hybridize:
        ours.hybridize()
    for error in (IndexError, mx.MXNetError):
        with pytest.raises(error, match=_SCALAR % (__file__, 0)):
            ours(scalar, h)
    one_row = nd.array([3.0])   # (the same value with an axis: one step, as MXNet's)
    want = mx.nd.contrib.foreach(lambda d, s: (d * 2, s + d), one_row, h)
    for got, exp in zip(ours(one_row, h), want):
        np.testing.assert_allclose(got.asnumpy(), exp.asnumpy(), rtol=1e-5, atol=1e-6)


def test_foreach_over_a_0d_array_among_data_and_bound_as_a_symbol_is_refused():
    with pytest.raises(ScalarDataError, match=_SCALAR % (__file__, 1)):
        gluon_cf.foreach(lambda d, s: (d[0] + d[1], s), [nd.ones((3,)), nd.array(2.0)],
                         nd.ones((1,)))
    x, h = mx.sym.var("x"), mx.sym.var("h")
    out, state = gluon_cf.foreach(lambda d, s: (d * 2, s + d), x, h)
    with pytest.raises(ScalarDataError, match=_SCALAR % (__file__, 0)):   # (where MXNet's
        # own foreach raises its MXNetError "index = 0 must be in range [0, -1)")
        mx.sym.Group([out, state]).bind(mx.cpu(), {"x": nd.array(3.0), "h": nd.ones((1,))})


_AFTER_MXNET = (r"^%s:\d+: gluon_cf\.%s \(node '\w+'\) reads the output of MXNet's own cond "
                r"\(node '\w+'\), whose shape MXNet decides only when it runs")
_CHILD = r"""
import mxnet as mx, numpy as np
import gluon_cf
x = mx.sym.var("x")
c = mx.sym.contrib.cond(mx.sym.sum(x) > 0, lambda: x * 2, lambda: x * 3)
out = gluon_cf.foreach(lambda d, s: (d * s, s), c, mx.sym.ones((1,)))[0]
try:
    out.bind(mx.cpu(), {"x": mx.nd.ones((4,))}).forward()
except mx.MXNetError as err:
    print(str(err).splitlines()[0])
"""


def test_binding_a_node_after_mxnets_own_cond_is_refused_not_a_crash():
    """Before: a gluon_cf foreach reading MXNet's own cond's output crashed bind (segmentation
    fault), a gluon_cf cond raised "std::bad_alloc" (NOTE [after MXNet's own cond or
    while_loop]); now a clear error at the user's line, in a subprocess against a crash."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(_AFTER_MXNET % ("<string>", "foreach"), proc.stdout), proc.stdout


def test_a_node_after_mxnets_own_cond_is_refused_by_bind_and_runs_in_a_symbol_block():
    """The oracle: the same program eagerly with MXNet's own nd.contrib.cond."""
    x = mx.sym.var("x")
    theirs = mx.sym.contrib.cond(mx.sym.sum(x) > 0, lambda: x * 2, lambda: x * 3)
    ours = gluon_cf.cond(mx.sym.sum(theirs) > 0, lambda: theirs * 2, lambda: theirs)
    value = nd.array([1.0, -2.0, 3.0, 0.5])
    for bind in (lambda: ours.bind(mx.cpu(), {"x": value}),
                 lambda: ours.simple_bind(mx.cpu(), x=(4,))):
        with pytest.raises(ValueError, match=_AFTER_MXNET % (__file__, "cond")):
            bind()
    block = gluon.SymbolBlock(ours, [x])
    block.hybridize()
    got = value.copy()
    got.attach_grad()
    with mx.autograd.record():
        out = block(got)
    out.backward()
    want = value.copy()
    want.attach_grad()
    with mx.autograd.record():
        first = mx.nd.contrib.cond(want.sum() > 0, lambda: want * 2, lambda: want * 3)
        expected = mx.nd.contrib.cond(first.sum() > 0, lambda: first * 2, lambda: first)
    expected.backward()
    np.testing.assert_allclose(out.asnumpy(), expected.asnumpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.grad.asnumpy(), want.grad.asnumpy(), rtol=1e-5, atol=1e-6)
