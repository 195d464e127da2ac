"""A hybridized block without gluon_cf nodes reshaping a value to another size (NOTE [a
reshape to another size] in gluon_cf/graph/cached_graph.py): MXNet 1.9.1's CachedOp copied
the elements and corrupted the heap (a wrong value, then "free(): invalid next size",
SIGABRT); now the block's call raises a ValueError at its hybrid_forward, as with gluon_cf
nodes, and a valid call after it computes what eager code does. A plain Symbol bound to such
shapes too."""

import textwrap

import mxnet as mx
import numpy as np
from mxnet.gluon import HybridBlock

import gluon_cf
from conftest import run_python

_CASES = textwrap.dedent("""
    import mxnet as mx, numpy as np
    from mxnet.gluon import HybridBlock
    import gluon_cf

    class Plain(HybridBlock):
        def hybrid_forward(self, F, x):
            return x.reshape((3, 2)) * 2

    class Converted(HybridBlock):
        @gluon_cf.autograph
        def hybrid_forward(self, F, x):
            return x.reshape((3, 2)) * 2

    lines = {Plain: 8, Converted: 13}   # (the reshape's: the def's until session 35)
    for cls, flags in ((Plain, {}), (Converted, {}),
                       (Plain, dict(static_alloc=True, static_shape=True))):
        eager = cls()
        eager.initialize()
        block = cls()
        block.initialize()
        block.hybridize(**flags)
        for shape, valid in (((3, 2), True), ((7, 2), False), ((6, 1), True),
                             ((2, 2), False), ((3, 2), True)):
            x = mx.nd.array(np.arange(np.prod(shape)).reshape(shape))
            try:
                eager(x)
            except (ValueError, mx.MXNetError):   # (NDArray.reshape's own checks)
                assert not valid, shape
            try:
                x.attach_grad()
                with mx.autograd.record():
                    y = block(x)
                y.backward()
            except ValueError as err:
                assert not valid, shape
                assert "%s:%d: hybrid_forward of block" % (__file__, lines[cls]) in str(err), err
                assert "has 6 elements, the source %s has %d" % (
                    shape, np.prod(shape)) in str(err), err
                continue
            assert valid, shape
            xs = x.asnumpy()
            assert np.array_equal(y.asnumpy(), eager(x).asnumpy()), shape
            assert np.array_equal(y.asnumpy(), xs.reshape((3, 2)) * 2), shape
            assert np.array_equal(x.grad.asnumpy(), np.full(shape, 2.0)), shape

    # a plain Symbol bound (bind, eval, simple_bind, Executor.reshape) to such shapes
    y = mx.sym.var("x").reshape((3, 2)) * 2
    for bound in (lambda: y.bind(mx.cpu(), {"x": mx.nd.ones((7, 2))}),
                  lambda: y.eval(x=mx.nd.ones((7, 2))),
                  lambda: y.simple_bind(mx.cpu(), x=(7, 2)),
                  lambda: y.simple_bind(mx.cpu(), x=(3, 2)).reshape(allow_up_sizing=True,
                                                                    x=(7, 2))):
        try:
            bound()
            raise AssertionError("bound")
        except mx.MXNetError as err:
            assert "the target shape (3, 2) has 6 elements, the source (7, 2)" in str(err), err
    assert np.array_equal(y.eval(x=mx.nd.ones((6, 1)))[0].asnumpy(), np.full((3, 2), 2.0))
    print("done")
""")


def test_reshape_to_another_size_in_plain_blocks_raises(tmp_path):
    # (in a file: autograph reads the source)
    path = tmp_path / "plain_reshape_cases.py"
    path.write_text(_CASES)
    proc = run_python("import runpy; runpy.run_path(%r, run_name='__main__')" % str(path),
                      timeout=60)
    assert proc is not None, "timed out"
    assert proc.returncode == 0 and "done" in proc.stdout, (proc.returncode, proc.stderr[-2000:])


class _Flat(HybridBlock):
    def __init__(self, shape, **kwargs):
        super().__init__(**kwargs)
        self.shape = shape

    def hybrid_forward(self, F, x):
        return x.reshape(self.shape) + 1


def test_plain_reshape_checks_kept_per_plan_and_bounded():
    # Reshapes that keep the size for any input: MXNet's call as it was, nothing per shapes
    kept = _Flat((0, -1))
    kept.hybridize()
    for n in (2, 3):
        x = mx.nd.ones((n, 2, 3))
        assert np.array_equal(kept(x).asnumpy(), x.asnumpy().reshape((n, 6)) + 1)
    assert not kept._gluon_cf_plan.resizing_reshapes
    assert not kept._gluon_cf_plan.reshapes_checked
    # a given dimension: checked once per data shapes, at most 1024 kept
    given = _Flat((-1, 2))
    given.hybridize()
    for n in range(1, 1031):
        given(mx.nd.ones((n, 2)))
    plan = given._gluon_cf_plan
    assert plan.resizing_reshapes and 0 < len(plan.reshapes_checked) <= 1024
    assert len(plan.reshape_checks.keys) <= 1024
    assert gluon_cf is not None
