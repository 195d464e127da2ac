"""Review 29: a user CustomOp inside a hybridized gluon_cf body, refused in every recorded call
alike, whatever calls came before (issue 24 item 2: no history in a block; NOTE [training
refused by the node] in gluon_cf/graph/decoded.py).

Was: a fresh block's first recorded call was refused while tracing, naming the user's line;
a block first called in predict mode was refused only in the node's backward, on MXNet's
worker thread, without the line, at a later read; ``autograd.record(train_mode=False)`` was
refused on a fresh block and ran on one first called in predict mode; training mode not
recorded was refused at the read on a block first called so, and ran after a predict call."""
import numpy as np
import pytest

import mxnet as mx
from mxnet import autograd, gluon

import gluon_cf


class _Double(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0] * 2)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], out_grad[0] * 2)


@mx.operator.register("r29exit_double")
class _DoubleProp(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=True)

    def list_arguments(self):
        return ["data"]

    def list_outputs(self):
        return ["output"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return _Double()


CUSTOM_LINE = []


class _Loop(gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        def body(d, s):
            CUSTOM_LINE[:] = [_line() + 1]
            h = F.Custom(d, op_type="r29exit_double") + s[0]
            return h, [h]
        return gluon_cf.foreach(body, x, [F.zeros((2, 3))])[0]


def _line():
    import sys
    return sys._getframe(1).f_lineno


X = np.random.RandomState(0).uniform(-1, 1, (4, 2, 3)).astype(np.float32)
WANT = np.cumsum(X * 2, axis=0)   # plain numpy: the running sum of the doubled rows


def _predict(block):
    return block(mx.nd.array(X)).asnumpy()


def _train_mode(block):
    with autograd.train_mode():
        return block(mx.nd.array(X)).asnumpy()


def _recorded(train_mode):
    def call(block):
        with autograd.record(train_mode=train_mode):
            block(mx.nd.array(X))   # refused here, at the call
        raise AssertionError("a recorded call through a user CustomOp was not refused")
    return call


@pytest.mark.parametrize("before", [[], [_predict], [_train_mode], [_recorded(False)],
                                    [_predict, _recorded(True)]])
def test_a_user_custom_op_refused_alike_whatever_came_before(before):
    block = _Loop()
    block.hybridize()
    for call in before:
        try:
            got = call(block)
        except NotImplementedError:
            continue
        np.testing.assert_allclose(got, WANT, rtol=1e-6, atol=1e-6)
    for train_mode in (True, False):
        with pytest.raises(NotImplementedError) as err:
            _recorded(train_mode)(block)
        assert "body calls the user CustomOp 'r29exit_double' (Custom at %s:%d" % (
            __file__, CUSTOM_LINE[0]) in str(err.value), err.value
    # (not recorded, it runs, in either mode, before and after a refusal)
    np.testing.assert_allclose(_predict(block), WANT, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(_train_mode(block), WANT, rtol=1e-6, atol=1e-6)
