"""Round fix31a: the backward of a refused call whose refusal was read leaves no error on the
block's gradient buffers, and the call's outputs still raise on every read after it (NOTE [a
backward reads what is marked] in gluon_cf/failed_calls.py).

Was: the refused call's output, marked failed again by the read (NOTE [each output raises]),
was read by the call's backward, which wrote the mark's failure into the parameters' gradient
buffers; the block's next call, healthy on a fresh block, raised the old ZeroSizeError.
Oracle: the same call on a fresh block with the same parameters (values and gradients)."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, nd

import gluon_cf
from test_call_history import Net, _fresh_like, _outcome, _same, foreach_mask_into_dense


def test_outputs_raise_after_the_backward_and_the_next_call_is_healthy():
    net = Net(foreach_mask_into_dense)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    x, some, none = nd.ones((5, 3)), nd.array([1, 0, 1, 1, 0]), nd.zeros((5,))
    want = _outcome(_fresh_like(net, foreach_mask_into_dense), x, some, True)
    with autograd.record():
        out = net(x, none)
        loss = out.sum()
    with pytest.raises(gluon_cf.ZeroSizeError):
        loss.asscalar()
    loss.backward()
    got = _outcome(net, x, some, True)   # (nothing read in between: the backward's order)
    _same(got, want, "the next call")
    np.testing.assert_allclose(got[1][0], want[1][0], rtol=1e-5, atol=1e-6)
    for _ in range(2):   # (the refused call's output: still its refusal, on every read)
        with pytest.raises(gluon_cf.ZeroSizeError):
            out.asnumpy()
    with pytest.raises(gluon_cf.ZeroSizeError):   # (and an op reading it)
        (out + 1).asnumpy()
