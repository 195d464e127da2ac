"""Session 35's autograph round (issue 24). A hybridized autograph ``while`` or conditional
expression on a condition of several elements raised the loop's or cond's PredShapeError
("gluon_cf.while_loop: the value returned by cond must have exactly one element"), naming an
op the user never wrote and no remedy; eagerly it is Python's ambiguous-truth message at the
line. Both now give eager's message on every call (``errors.condition_line``), as the ``if``
did since session 34 (its PredShapeError named ``gluon_cf.cond``). Oracle: the same block run
eagerly."""
import mxnet as mx
import pytest
from mxnet.gluon import HybridBlock

import gluon_cf


class _IfOnRowsInLoop(HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        acc = F.zeros((2,))
        for r in x:
            if r > 0:
                acc = acc + r
        return acc


class _WhileOnRows(HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        h = x
        while F.sum(h) < 50 and h < 9:
            h = h + 1
        return h


class _IfExpOnRows(HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        return x * 2 if x > 0 else x * 3


@pytest.mark.parametrize("cls, line, what, of_three", [
    (_IfOnRowsInLoop, 4, "if r > 0: the if's", 3.0),
    (_WhileOnRows, 3, "while F.sum(h) < 50 and h < 9: the while's", 9.0),
    (_IfExpOnRows, 2, "return x * 2 if x > 0 else x * 3: the conditional expression's", 6.0)])
def test_a_condition_on_several_elements_has_eagers_message_hybridized(cls, line, what,
                                                                      of_three):
    x = mx.nd.array([1., 2.]) if cls is not _IfOnRowsInLoop else mx.nd.array([[1., 2.]])
    at = cls.hybrid_forward.__wrapped__.__code__.co_firstlineno + line
    want = "%s:%d: %s condition is an array of shape (2,)" % (__file__, at, what)
    with pytest.raises(ValueError) as eager:
        cls()(x)
    net = cls()
    net.hybridize()
    for _ in range(2):
        with pytest.raises(ValueError) as hybrid:
            net(x).asnumpy()
        for err in (eager.value, hybrid.value):
            assert str(err).startswith(want), str(err)
            assert str(err).endswith("or choose elementwise with F.where(c, a, b)"), str(err)
    y = net(mx.nd.array([3.] if cls is not _IfOnRowsInLoop else [[3.]]))  # still usable
    assert y.asnumpy().ravel().tolist()[-1] == of_three
