"""A collected list emptied by ``clear()`` and then joined to another (``a + b``,
``a.extend(b)``, ``a += b``) adds no item, as Python's list (hybridized, its rows were joined:
three items more, silently). Oracle: the same program on numpy rows, plain Python lists."""
import mxnet as mx
import numpy as np
import pytest
from mxnet.gluon import HybridBlock

from gluon_cf import autograph


class ClearedThenJoined(HybridBlock):
    def __init__(self, how, **kwargs):
        super().__init__(**kwargs)
        self.how = how

    @autograph
    def hybrid_forward(self, F, x):
        a = []
        for r in x:
            a.append(r * 2)
        b = []
        for r in x:
            b.append(r + 1)
        b.clear()
        if self.how == "add":
            a = a + b
        elif self.how == "extend":
            a.extend(b)
        else:
            a += b
        a.append(x[0] * 0 + len(a))
        return F.stack(*a, axis=0)


def _python(x, how):
    a = [r * 2 for r in x]
    a = a + [] if how == "add" else a
    a.append(x[0] * 0 + len(a))
    return np.stack(a)


@pytest.mark.parametrize("how", ["add", "extend", "iadd"])
def test_a_cleared_list_joins_no_item(how):
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    want = _python(x, how)
    net = ClearedThenJoined(how)
    np.testing.assert_array_equal(net(mx.nd.array(x)).asnumpy(), want)
    net.hybridize()
    np.testing.assert_array_equal(net(mx.nd.array(x)).asnumpy(), want)
