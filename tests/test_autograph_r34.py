"""Session 34's autograph round (issue 24): ~140 ported programs, no silent difference; one
refusal where eager Python runs. ``h = x[0]; for r in x[1:]: ...`` on an input of one row:
eagerly the loop runs no step (``x[1:]`` is a view of no row); hybridized, the foreach node
refused the zero-size slice ("IncompleteShapeError ... Skip the call for empty inputs"),
although a zero-size block input to the same loop works. Autograph's index keeping no row is
now made from its inferred shape in the partitioned run (NOTE [zero-size values computed
inside a graph] in gluon_cf/graph/cached_graph.py). Oracle: the block eager, numpy."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd
from mxnet.gluon import HybridBlock

import gluon_cf


class _MaxOverTail(HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x[1:]:
            h = F.maximum(h, r)
        return h * 2


def _run(net, x):
    x = x.copy()
    x.attach_grad()
    with autograd.record():
        y = net(x)
    y.backward()
    return y.asnumpy(), x.grad.asnumpy()


@pytest.mark.parametrize("order", [(1, 3, 1, 2), (3, 1, 2, 1)])
def test_a_loop_over_the_rows_after_the_first_of_one_row(order):
    net = _MaxOverTail()
    net.hybridize()
    for rows in order:
        x = mx.nd.array(np.random.RandomState(rows).rand(rows, 3))
        want = _run(_MaxOverTail(), x)
        got = _run(net, x)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6)
        np.testing.assert_allclose(got[0], x.asnumpy().max(axis=0) * 2, rtol=1e-6)
