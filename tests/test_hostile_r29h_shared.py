"""Hostile round 29h (issue 24): one autograph block called twice in a parent's graph (a shared
encoder, a siamese network: ``self.encoder(x) + self.encoder(y)``). Autograph names graph nodes
after the user's line, so the two calls make nodes of one name; the hybridized parent's
zero-size check looked internal outputs up by name, and the first call raised MXNet's
``ValueError: There are multiple outputs with name "..._line10_index0_output"`` naming no user
line. Now: values and gradients (``grad_req`` write and add) equal the eager parent's over calls
of other lengths, and export / ``SymbolBlock.imports`` / onnxruntime give the same outputs."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon
from mxnet.gluon import HybridBlock, nn

from gluon_cf import autograph

import hostile_harness

rand = hostile_harness.rand
TOL = (1e-5, 1e-6)
PAIRS = [[rand(3, 3, seed=2981), rand(2, 3, seed=2982)],
         [rand(1, 3, seed=2983), rand(4, 3, seed=2984)],
         [rand(3, 3, seed=2981), rand(2, 3, seed=2982)],
         [rand(2, 3, seed=2985), rand(1, 3, seed=2986)]]


class Encoder(HybridBlock):
    """A tensor ``for`` over the rows, starting from ``x[0]`` (an index node named after this
    line), through a Dense layer."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3)

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0].reshape((1, -1))
        for row in x:
            h = F.tanh(self.fc(h) + row.reshape((1, -1)))
        return h


class Siamese(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.encoder = Encoder()

    def hybrid_forward(self, F, x, y):
        a, b = self.encoder(x), self.encoder(y)
        return F.sum(F.square(a - b), axis=-1) + self.encoder(F.concat(x, y, dim=0)).sum()


def _run(net, arrays):
    inputs = [mx.nd.array(a) for a in arrays]
    for a in inputs:
        a.attach_grad()
    with autograd.record():
        out = net(*inputs)
    out.backward()
    return [out.asnumpy()] + [a.grad.asnumpy() for a in inputs] + \
        [p.grad().asnumpy() for _, p in sorted(net.collect_params().items())]


@pytest.mark.parametrize("grad_req", ["write", "add"])
def test_a_block_called_twice_in_a_hybridized_parent(grad_req):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager, hybrid = hostile_harness._make(Siamese), hostile_harness._make(Siamese)
        hybrid.hybridize()
        for net in (eager, hybrid):
            net.collect_params().setattr("grad_req", grad_req)
        for k, arrays in enumerate(PAIRS):
            assert hostile_harness._compare(_run(eager, arrays), _run(hybrid, arrays), TOL), k


def test_the_shared_block_exports_and_imports(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from gluon_cf.export import export_onnx
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = hostile_harness._make(Siamese)
        net.hybridize()
        first = [mx.nd.array(a) for a in PAIRS[0]]
        net(*first)
        net.export(str(tmp_path / "s"))
        loaded = gluon.SymbolBlock.imports(str(tmp_path / "s-symbol.json"), ["data0", "data1"],
                                           str(tmp_path / "s-0000.params"))
        model = export_onnx(net, first, dynamic_axes={0: [0], 1: [0]})
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        for arrays in PAIRS:
            want = net(*[mx.nd.array(a) for a in arrays]).asnumpy()
            got = loaded(*[mx.nd.array(a) for a in arrays]).asnumpy()
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
            got = session.run(None, dict(zip(names, arrays)))[0]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
