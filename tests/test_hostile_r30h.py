"""Round 30h (issue 24, hostile programs): seq2seq and beam decoders, pointer networks, CRF
Viterbi, zoneout, BatchNorm in loops, grad_req='add', shared parameters, nested loops,
top-down and n-ary tree recursion, dtypes and batch sizes, exported.

* a recursive function counting an n-ary tree's nodes with a ``while_loop`` over a node's
  children whose cond reduced over all axes (``F.sum(k < end) > 0``, what a converted
  ``while F.sum(k < end) > 0:`` gives) exported through ``export_onnx`` silently: the
  lowering runs the loop's cond on all the invocations of a level at once, so the sum mixed
  the rows of sibling calls and the model counted 7 nodes of a 5-node tree (onnxruntime;
  Gluon, eagerly and hybridized, and ``save_artifact`` gave 5). Now ``export_onnx`` refuses
  it, naming the loop's and the sum's lines (NOTE [loops lowered on rows]); a cond acting
  row by row (``k < end``) still exports and equals Gluon.
"""
import warnings

import numpy as np
import pytest

import mxnet as mx

import gluon_cf


def _f32(*values):
    return np.array(values, np.float32)


# (ptr, cidx, root) of CSR n-ary trees: node i's children are cidx[ptr[i]:ptr[i + 1]]
_TREES = [[_f32(0, 0, 0, 0, 2, 4), _f32(0, 1, 2, 3), _f32(4)],
          [_f32(0, 3, 3, 3, 3), _f32(1, 2, 3), _f32(0)],
          [_f32(0, 1, 1), _f32(1), _f32(0)],
          [_f32(0, 2, 2, 2), _f32(1, 2), _f32(0)]]
_COUNTS = [5, 4, 2, 3]


class _CountNodes(mx.gluon.HybridBlock):
    """The number of nodes under ``root``; ``summed``: the loop's cond reduces all axes."""

    def __init__(self, summed):
        super().__init__()
        self.summed = summed

    def hybrid_forward(self, F, ptr, cidx, root):
        summed = self.summed

        @gluon_cf.recursive
        def count(i):
            end = F.take(ptr, i + 1)

            def func(k, n):
                return [], [k + 1, n + count(F.take(cidx, k))]

            def cond(k, n):
                return F.sum(k < end) > 0 if summed else k < end   # the reducing cond
            _, (_, n) = gluon_cf.while_loop(cond, func, [F.take(ptr, i), F.ones((1,))],
                                            max_iterations=4)
            return n
        return count(root)


@pytest.fixture(scope="module", params=[True, False], ids=["summed", "row-wise"])
def counted(request):
    net = _CountNodes(request.param)
    net.initialize()
    net.hybridize()
    return request.param, net


def test_a_loop_cond_mixing_the_invocations_rows_is_refused_by_export_onnx(counted, tmp_path):
    import onnxruntime as ort
    from gluon_cf.export import export_onnx, load, save_artifact
    summed, net = counted
    for tree, want in zip(_TREES, _COUNTS):     # (Gluon: the oracle's counts)
        assert net(*[mx.nd.array(a) for a in tree]).asnumpy().tolist() == [want]
    example = [mx.nd.array(a) for a in _TREES[0]]
    axes = {0: [0], 1: [0]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        save_artifact(net, example, str(tmp_path / "m.onnx"), dynamic_axes=axes)
        runs = [load(str(tmp_path / "m.onnx"))]
        if summed:
            with pytest.raises(NotImplementedError) as refused:
                export_onnx(net, example, dynamic_axes=axes)
            text = str(refused.value)
            assert text.startswith(__file__ + ":"), text
            assert "gluon_cf.while_loop" in text and "operator sum" in text, text
            assert "Custom" not in text and "::" not in text, text
        else:
            model = export_onnx(net, example, dynamic_axes=axes)
            session = ort.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
            names = [i.name for i in session.get_inputs()]
            runs.append(lambda *xs: session.run(None, dict(zip(names, xs))))
    for run in runs:
        for tree, want in zip(_TREES, _COUNTS):
            got, = run(*tree)
            np.testing.assert_allclose(got, [want], rtol=1e-5, atol=1e-6)
