"""Every tree model cast to float64 (``net.cast('float64')``) equals the float64 eager
reference of ``gluon_cf.models.reference``, values and gradients, eager and hybridized.
ChildSumTreeLSTM failed in both modes and TopDownTreeLSTM hybridized (issue 24): their zeros
(the children's sums of a leaf, the depth counter) were F.zeros, always float32."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import nd

from gluon_cf.models import reference
from gluon_cf.models.recursive import ChildSumTreeLSTM, RNTN, TopDownTreeLSTM, TreeLSTM, TreeRNN

from test_recursion import _arrays, _forest, _reference_loss, _run, _topdown_reference

TOL = dict(rtol=1e-10, atol=1e-12)
BINARY = ["tokens", "left", "right", "roots"]


@pytest.mark.parametrize("model, fold, binary", [
    (TreeLSTM, lambda e, c, t: reference.treelstm_eager(e, c, t)[0], True),
    (TreeRNN, reference.treernn_eager, True),
    (RNTN, reference.rntn_eager, True),
    (ChildSumTreeLSTM, lambda e, c, t: reference.childsum_eager(e, c, t)[0], False)],
    ids=lambda v: getattr(v, "__name__", None))
@pytest.mark.parametrize("hybridize", [False, True])
def test_tree_models_in_float64_equal_the_float64_reference(model, fold, binary, hybridize):
    vocab, encoded, forest = _forest(binary=binary, extra=["(1 good)"] if binary else [
        "(2 (1 a) (3 b) (2 c) (4 d))", "(0 lone)"])
    mx.random.seed(1)
    net = model(len(vocab), embed_size=6, hidden_size=5, num_classes=3,
                **({} if binary else {"max_children": 8}))
    net.initialize(mx.init.Xavier())
    net.cast("float64")
    expected, expected_grads = _reference_loss(net, encoded, fold)
    names = BINARY if binary else ["tokens", "child_ptr", "child_idx", "roots"]
    (got,), grads = _run(net, _arrays(forest, names), hybridize)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, expected, **TOL)
    for name in expected_grads:
        assert grads[name].dtype == np.float64
        np.testing.assert_allclose(grads[name], expected_grads[name], err_msg=name, **TOL)


@pytest.mark.parametrize("hybridize", [False, True])
def test_topdown_generator_in_float64_equals_the_float64_reference(hybridize):
    mx.random.seed(3)
    net = TopDownTreeLSTM(input_size=4, hidden_size=6, max_depth=4)
    net.initialize(mx.init.Xavier())
    net.cast("float64")
    z = nd.random.normal(0, 3, shape=(6, 4)).astype("float64")
    expected, counts, _, expected_grads = _topdown_reference(net, z)
    (got, got_counts), grads = _run(net, [z], hybridize)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, expected, **TOL)
    assert got_counts.ravel().tolist() == counts
    for name in expected_grads:
        np.testing.assert_allclose(grads[name], expected_grads[name], err_msg=name, **TOL)
