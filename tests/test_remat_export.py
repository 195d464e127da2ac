"""Export ignores remat (issue 25 item 5): a hybridized ``foreach(..., remat=...)`` and a
``TreeLSTM(..., remat=True)`` export to a gluon_cf artifact that ``load()`` (and, for the loop, onnxruntime) runs
with the block's own outputs (the oracle: the block in MXNet, and the same model exported with
remat=False), and exporting says nothing about remat. ~5 s."""
import warnings

import mxnet as mx
import numpy as np
import onnxruntime as ort
import pytest
from mxnet import gluon, nd

import gluon_cf
from gluon_cf.data.trees import batchify_forest, build_vocab, encode_tree, synthetic_treebank
from gluon_cf.export import load, save_artifact
from gluon_cf.models.recursive import TreeLSTM

TOL = dict(rtol=1e-5, atol=1e-5)


class _Scan(gluon.HybridBlock):
    def __init__(self, remat):
        super().__init__()
        self.remat = remat
        with self.name_scope():
            self.cell = gluon.nn.Dense(4, in_units=8, flatten=False)

    def hybrid_forward(self, F, xs, h):
        def body(x, s):
            new = F.tanh(self.cell(F.concat(x, s[0], dim=-1)))
            return new, [new]
        out, states = gluon_cf.foreach(body, xs, [h], remat=self.remat)
        return out, states[0]


def _scan(remat):
    mx.random.seed(0)
    net = _Scan(remat)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    rs = np.random.RandomState(0)
    return net, [rs.randn(5, 2, 4).astype(np.float32), rs.randn(2, 4).astype(np.float32)], None


def _tree(remat):
    trees = list(synthetic_treebank(4, seed=0, max_length=8))
    vocab = build_vocab(trees)
    forest = batchify_forest([encode_tree(t, vocab) for t in trees])
    inputs = [getattr(forest, n).astype(np.float32) for n in ("tokens", "left", "right", "roots")]
    mx.random.seed(0)
    net = TreeLSTM(len(vocab), embed_size=6, hidden_size=5, num_classes=3, remat=remat)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    return net, inputs, {0: [0], 1: [0], 2: [0], 3: [0]}


def _outputs(net, inputs):
    out = net(*[nd.array(x) for x in inputs])
    return [o.asnumpy() for o in (out if isinstance(out, (list, tuple)) else [out])]


@pytest.mark.parametrize("make, remat", [(_scan, True), (_scan, 2), (_scan, "auto"),
                                         (_tree, True)])
def test_export_ignores_remat(tmp_path, make, remat):
    net, inputs, axes = make(remat)
    plain, _, _ = make(False)
    want = _outputs(net, inputs)
    for a, b in zip(want, _outputs(plain, inputs)):
        np.testing.assert_allclose(a, b, **TOL)   # the same model
    path = str(tmp_path / "model.onnx")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        save_artifact(net, inputs, path, dynamic_axes=axes)
    assert not [w for w in caught if "remat" in str(w.message)]
    if make is _scan:   # (a recursion's artifact holds gluon_cf's Recursion: load() runs it)
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        for a, b in zip(session.run(None, dict(zip(names, inputs))), want):
            np.testing.assert_allclose(a, b, **TOL)
    for a, b in zip(load(path)(*inputs), want):
        np.testing.assert_allclose(a, b, **TOL)
