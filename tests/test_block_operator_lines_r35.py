"""MXNet's refusal of an operator of a block's own graph (no line of its own: Gluon, not
gluon_cf, traced it) named the line of ``def hybrid_forward``; it names the line of the call
that made it (``y.reshape(...)``), partitioned or not (hostile review of session 35;
``hybrid_errors._operator_lines``). An operator no call names (``+``) keeps the def's."""
import mxnet as mx
import pytest
from mxnet import gluon

import gluon_cf


class _PairsOfRows(gluon.HybridBlock):
    def __init__(self, masked):
        super().__init__()
        self.masked = masked

    def hybrid_forward(self, F, x, mask):
        rows = F.contrib.boolean_mask(x, mask) if self.masked else x
        pairs = (rows * 2).reshape((-1, 2, 3))      # an odd number of rows: refused
        outs, _ = gluon_cf.foreach(lambda r, s: (r * 2, s), pairs, [F.zeros((1,))])
        return outs + pairs


@pytest.mark.parametrize("masked", [False, True])
def test_a_reshape_of_the_blocks_own_graph_is_named_at_its_line(masked):
    net = _PairsOfRows(masked)
    net.hybridize()
    assert net(mx.nd.ones((4, 3)), mx.nd.ones((4,))).shape == (2, 2, 3)
    first = _PairsOfRows.hybrid_forward.__code__.co_firstlineno
    for _ in range(2):
        with pytest.raises(ValueError) as err:
            net(mx.nd.ones((3, 3)), mx.nd.ones((3,))).asnumpy()
        assert str(err.value).startswith("%s:%d: hybrid_forward of block" % (
            __file__, first + 2)), err.value
        assert "the target shape (1, 2, 3) has 6 elements, the source (3, 3) has 9" in \
            str(err.value), err.value


class _Pairs(gluon.HybridBlock):
    def hybrid_forward(self, F, y):
        return y.reshape((-1, 2, 3))


class _ParentOfPairs(gluon.HybridBlock):
    def __init__(self, masked):
        super().__init__()
        self.masked = masked
        with self.name_scope():
            self.pairs = _Pairs()

    def hybrid_forward(self, F, x, mask):
        x = x.reshape((-1, 3))    # (a reshape of the parent's own, which works)
        rows = F.contrib.boolean_mask(x, mask) if self.masked else x
        outs, _ = gluon_cf.foreach(lambda r, s: (r * 2, s), self.pairs(rows * 2), [])
        return outs


@pytest.mark.parametrize("masked", [False, True])
def test_a_child_blocks_operator_is_named_at_the_childs_line(masked):
    """(Review of the change: the parent's own reshape was named, which works.)"""
    net = _ParentOfPairs(masked)
    net.hybridize()
    assert net(mx.nd.ones((4, 3)), mx.nd.ones((4,))).shape == (2, 2, 3)
    line = _Pairs.hybrid_forward.__code__.co_firstlineno + 1
    with pytest.raises(ValueError) as err:
        net(mx.nd.ones((3, 3)), mx.nd.ones((3,))).asnumpy()
    assert str(err.value).startswith("%s:%d: hybrid_forward of block '%s'" % (
        __file__, line, net.pairs.name)), err.value
