"""A recursive function whose leaf branch returns a constant runs row by row, with a warning
(and export_onnx refuses it): the warning named the recursive call of the other branch; it
names the constant's operator and line, also inside a cond nested in the leaf branch
(``rowwise_constants.one_row_output``; session 35 and its review). Oracle: the source lines,
and the values of the block run eagerly."""
import re
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

import gluon_cf


class _Depths(gluon.HybridBlock):
    def __init__(self, nested):
        super().__init__()
        self.nested = nested

    def hybrid_forward(self, F, toks, left, right, root):
        @gluon_cf.recursive
        def depth(i):
            def leaf():
                if self.nested:
                    return gluon_cf.cond(F.take(toks, i) > 2, lambda: F.ones((1,)),
                                         lambda: F.zeros((1,)))   # NESTED CONSTANT
                return F.ones((1,))                               # CONSTANT
            return gluon_cf.cond(F.take(left, i) < 0, leaf, lambda: F.maximum(
                depth(F.take(left, i)), depth(F.take(right, i))) + 1)
        return depth(root)


@pytest.mark.parametrize("nested", [False, True])
def test_the_warning_names_the_constants_line(nested):
    args = [mx.nd.array(a) for a in ([1, 2, 3, 4, 5], [1, 3, -1, -1, -1],
                                     [2, 4, -1, -1, -1], [0])]
    want = _Depths(nested)(*args).asnumpy()
    net = _Depths(nested)
    net.hybridize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = net(*args).asnumpy()
    np.testing.assert_array_equal(got, want)
    marker = "# NESTED CONSTANT" if nested else "# CONSTANT"
    line = next(k for k, text in enumerate(open(__file__), 1) if text.rstrip().endswith(marker))
    texts = [str(w.message) for w in caught if "runs unbatched" in str(w.message)]
    lines = "(%d|%d)" % (line - 1, line) if nested else str(line)   # (either constant)
    assert texts and re.search(r"operator _(ones|zeros) \(node '[^']+'\) at %s:%s gives one "
                               r"row for 3 invocations" % (re.escape(__file__), lines),
                               texts[0]), texts
