"""Session 34 (issue 24, no history in a block; errors at the user's line): calls whose input
format differs from the first call's in a way Gluon 1.9.1 accepts (a trailing ``None`` left
out, ``net(x)`` after ``net(x, None)``, or given after ``net(x)``) ran MXNet's CachedOp alone,
past gluon_cf's run-time shapes: a mask keeping no row before a foreach raised MXNet's
"Operator expand_dims inferring shapes failed" naming nothing of the user's, where the call in
the first call's format raised BlockZeroSizeError at the user's line. Now both formats take
the same path. A call missing an input raises Gluon's own ValueError (was a bare IndexError
from gluon_cf's zero-size check; test_hostile_export34). Oracles: the block eager, the call
in the first call's format."""
import mxnet as mx
import numpy as np
import pytest
from mxnet.gluon import HybridBlock

import gluon_cf


class _MaskThenForeach(HybridBlock):
    def hybrid_forward(self, F, x, n=None):
        kept = F.contrib.boolean_mask(x, F.sum(x, axis=1) > 0)
        _, (s,) = gluon_cf.foreach(lambda r, st: ([], [st[0] + r * 2]), kept, [F.zeros((2,))])
        return s if n is None else s * n


def _result(call):
    try:
        return "value", call().asnumpy().tolist()
    except Exception as err:   # noqa: BLE001 - compared below
        return type(err).__name__, str(err)


@pytest.mark.parametrize("first", ["with None", "without"])
def test_a_trailing_none_left_out_takes_the_same_path(first):
    x = mx.nd.array([[1, 2], [-3, -1], [4, 0]])
    empty = mx.nd.array([[-1, -2]])
    net = _MaskThenForeach()
    net.hybridize()
    net(x, None) if first == "with None" else net(x)
    for data in (x, empty, x, empty):
        with_none = _result(lambda: net(data, None))
        without = _result(lambda: net(data))
        assert with_none == without, (with_none, without)
        if data is x:
            assert with_none == ("value", _MaskThenForeach()(data).asnumpy().tolist())
        else:
            assert with_none[0] == "BlockZeroSizeError", with_none
            assert "%s:" % __file__ in with_none[1], with_none
    np.testing.assert_allclose(net(x).asnumpy(), [10, 4])
