"""Round 31h (issue 24): the silent difference its 100 ported programs found. A value that an
MKLDNN kernel (``F.concat(..., dim=1)``) computes in a hybridized block's graph reaches a
gluon_cf node - a MXNet ``Custom`` operator - as other bytes, about one call in four (and
every call of gluonnlp's HybridBeamSearchSampler with gluon_cf's while_loop swapped in, whose
``init_scores`` is such a concat: other scores and samples, no error). Plain MXNet Custom
operators read the same bytes; MXNet's own ``F.contrib.cond`` (no Custom operator) and every
call with ``MXNET_MKLDNN_ENABLED=0`` were right (30 of 30 calls of the concat below, run in a
process with that variable set). Fixed by NOTE [MKLDNN values read by a node] in
``gluon_cf/_cachedop.py``; before it, both tests below failed (5-10 of 30 concat calls, 10 of 10
samplers wrong)."""
import mxnet as mx
import numpy as np
from mxnet.gluon import HybridBlock

import gluon_cf

import hostile_harness
import hostile_programs31h_c as BEAM


class ConcatIntoCond(HybridBlock):
    def hybrid_forward(self, F, x):
        init = F.concat(F.slice_axis(x, axis=1, begin=0, end=1),
                        F.slice_axis(x, axis=1, begin=1, end=3), dim=1)
        return gluon_cf.cond(F.sum(x) > 0, lambda: init * 2, lambda: init)


def test_round_31h_concat_into_a_node_is_right():
    """``F.concat(..., dim=1)`` in hybrid_forward feeding ``gluon_cf.cond`` (or while_loop,
    foreach; gluonnlp's HybridBeamSearchSampler's init_scores): 30 fresh hybridized blocks
    all give the eager value."""
    x = mx.nd.array(np.arange(6).reshape(2, 3) / 6 + 0.1)
    wrong = 0
    for _ in range(30):
        net = ConcatIntoCond()
        net.hybridize()
        wrong += not np.allclose(net(x).asnumpy(), x.asnumpy() * 2)
    assert wrong == 0


def test_round_31h_ported_beam_search_hybridized_equals_eager():
    cls = BEAM.BeamSearchB2K3L4E1A1_0
    arrays = [mx.nd.array(a) for a in BEAM.PROGRAMS[cls][0]]
    eager = hostile_harness._make(cls)
    want = [o.asnumpy() for o in eager(*arrays)]
    for _ in range(10):
        net = hostile_harness._make(cls)
        net.hybridize()
        got = [o.asnumpy() for o in net(*arrays)]
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
