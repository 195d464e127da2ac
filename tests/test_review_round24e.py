"""Review of issue 24 item 5 (helper h24err): errors that reached users as MXNet's own
messages with no line of theirs. ``F.take(..., mode='raise')`` with an index out of bounds
in a hybridized body (NOTE [an index out of bounds at run time])."""
import inspect

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

import gluon_cf


def _take_in_cond(F, x, i):
    return gluon_cf.cond(F.sum(x) > 0, lambda: F.take(x, i, mode="raise"), lambda: x * 2)


def _take_in_foreach(F, x, i):
    outs, _ = gluon_cf.foreach(lambda row, s: (F.take(row, i, mode="raise"), s), x, [x])
    return outs


def _take_in_while(F, x, i):
    def step(j, v):
        return F.take(v, i, mode="raise"), [j + 1, v]
    outs, _ = gluon_cf.while_loop(lambda j, v: j < 2, step, [F.zeros((1,)), x],
                                  max_iterations=2)
    return outs


class _Net(gluon.HybridBlock):
    def __init__(self, program):
        super().__init__()
        self.program = program

    def hybrid_forward(self, F, x, i):
        return self.program(F, x, i)


def _line_of_take(program):
    lines, first = inspect.getsourcelines(program)
    return first + next(k for k, text in enumerate(lines) if "F.take" in text)


@pytest.mark.parametrize("program", [_take_in_cond, _take_in_foreach, _take_in_while])
def test_take_out_of_bounds_in_a_hybridized_body_names_the_users_line(program):
    x = nd.array([[1., 2, 3], [4, 5, 6]])
    net = _Net(program)
    net.hybridize()
    within = net(x, nd.array([1])).asnumpy()     # (the oracle: eager, and MXNet's clip)
    np.testing.assert_allclose(within, _Net(program)(x, nd.array([1])).asnumpy())
    for _ in range(2):      # every call alike, and the block usable after
        with pytest.raises(IndexError) as info:
            net(x, nd.array([7])).asnumpy()
        text = str(info.value)
        assert "%s:%d: take" % (__file__, _line_of_take(program)) in text, text
        assert "mode='clip'" in text and "::" not in text and "indexing_op" not in text
    np.testing.assert_allclose(net(x, nd.array([1])).asnumpy(), within)
