"""Round 29r (issue 24): client code against MXNet 1.9.1's own behaviour, the oracle."""
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
