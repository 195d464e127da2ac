"""Hostile review of recursion inference in the calling thread (round 25i; NOTE [recursion
inference in the calling thread] in gluon_cf/hybrid_inline.py). A node's output of another
shape or dtype than its rules declared ran inline to a value while training and the CachedOp
refused it (NOTE [declared shapes in the calling thread]); a csr input failed inline on every
call and ran twice. Results kept across calls, hybridize flags, autograd modes, executors
switched between calls, threads, dtypes, a KeyboardInterrupt, SymbolBlock.imports, the block's
own loops, random call histories and a failing call's warnings agree with the Custom
operator's path and eager code."""
import contextlib
import threading
import warnings

import hypothesis.strategies as st
import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings
from mxnet import autograd, gluon, nd

import gluon_cf
import hostile_harness
import hostile_programs4 as programs
from gluon_cf import hybrid_inline
from gluon_cf.checks import MismatchError
from test_schedule_h28b1 import batched_executor  # noqa: F401 - its autouse fixture


class _Depth(gluon.HybridBlock):
    """Each root's depth (a recursion in a foreach), fed to a Dense head, softmax, argmax."""

    def __init__(self, warn=False, **kwargs):
        super().__init__(**kwargs)
        self.warn = warn
        with self.name_scope():
            self.head = gluon.nn.Dense(3, flatten=False)

    def hybrid_forward(self, F, left, roots):
        @gluon_cf.recursive(max_depth=4)
        def depth(idx):
            if self.warn:
                warnings.warn("traced")
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.ones_like(idx),
                                 lambda: depth(F.take(left, idx)) + 1)

        out, _ = gluon_cf.foreach(lambda root, _: (depth(root), []), roots, [])
        h = self.head(out.expand_dims(-1))
        return out, F.softmax(h), F.argmax(h, axis=-1)


FORESTS = [(nd.array([1, 2, -1, -1]), nd.array([0, 3, 1])),
           (nd.array([-1, 0, 1]), nd.array([2, 0])),
           (nd.array([1, 2, 3, -1]), nd.array([0]))]


def _numpy(out):
    return [o.asnumpy() for o in out]


def _eager(net, args):
    net.hybridize(active=False)
    try:
        return _numpy(net(*args))
    finally:
        net.hybridize()


def _depth_net(**flags):
    mx.random.seed(3)
    net = _Depth()
    net.initialize()   # (deferred: the first call, an inference, shapes the head)
    net.hybridize(**flags)
    return net


def _same(got, want):
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_an_output_wider_than_its_leaves_is_the_same_in_inference_and_training():
    """Before: one root's recursion whose output grows with the tree ran inline to a value,
    while the CachedOp (and training) refused it; then the inference raised the same error;
    since round 28r the calls' shapes are known at run time (NOTE [one shape per call] in
    recursion/table.py): inline, not inline and recorded, plain Python's value."""
    net = hostile_harness._make(programs.OutputWidthGrowsWithDepth)
    net.hybridize()
    args = [nd.array(a, dtype=a.dtype)
            for a in programs.PROGRAMS[programs.OutputWidthGrowsWithDepth][0]]
    want = net.plain_forward(nd, *args).asnumpy()
    for inline in (True, False):
        hybrid_inline.INLINE[0] = inline
        try:
            np.testing.assert_allclose(net(*args).asnumpy(), want, rtol=1e-6, atol=1e-7)
        finally:
            hybrid_inline.INLINE[0] = True
    with autograd.record():
        np.testing.assert_allclose(net(*args).asnumpy(), want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("flags", [{}, dict(static_alloc=True),
                                   dict(static_alloc=True, static_shape=True)],
                         ids=["plain", "static_alloc", "static_shape"])
def test_results_kept_across_calls_are_not_overwritten(flags):
    net = _depth_net(**flags)
    first = net(*FORESTS[0])
    kept = _numpy(first)
    later = [net(*f) for f in FORESTS[1:] + FORESTS[:1]]
    _same(_numpy(first), kept)
    for f, out in zip(FORESTS[1:] + FORESTS[:1], later):
        _same(_numpy(out), _eager(net, f))
    assert hybrid_inline.INLINE_RUNS[0] > 0


def test_modes_and_executors_between_calls_equal_eager():
    net = _depth_net()
    want = _eager(net, FORESTS[0])
    runs = hybrid_inline.INLINE_RUNS[0]
    outs = [net(*FORESTS[0])]
    with autograd.record(train_mode=False):
        outs.append(net(*FORESTS[0]))
    with autograd.record():
        with autograd.predict_mode():
            outs.append(net(*FORESTS[0]))
        with autograd.pause():
            outs.append(net(*FORESTS[0]))
    with autograd.train_mode():
        outs.append(net(*FORESTS[0]))
    gluon_cf.set_executor("unbatched")
    outs.append(net(*FORESTS[0]))
    gluon_cf.set_executor("batched", ahead_of_time=True)
    outs.append(net(*FORESTS[0]))
    for out in outs:
        _same(_numpy(out), want)
    assert hybrid_inline.INLINE_RUNS[0] == runs + 3   # (first, pause()'s, last)


def test_threads_get_their_own_forests_values():
    net = _depth_net()
    want = [_eager(net, f) for f in FORESTS]
    bad = []

    def work(k):
        for i in range(20):
            j = (k + i) % len(FORESTS)
            got = _numpy(net(*FORESTS[j]))
            if not all(np.allclose(a, b) for a, b in zip(got, want[j])):
                bad.append((k, i))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_float64_inline_equals_the_custom_operator():
    net = _depth_net()
    net.cast("float64")
    args = [a.astype("float64") for a in FORESTS[0]]
    inline = _numpy(net(*args))
    hybrid_inline.INLINE[0] = False
    custom = _numpy(net(*args))
    assert inline[1].dtype == np.float64
    _same(inline, custom)


def test_a_failing_call_warns_as_the_custom_operators_and_leaves_the_block_usable():
    """Too deep for max_depth: the inline attempt fails and the CachedOp's run gives the
    error; the trace's warnings are given as often as with the Custom operator alone."""
    counts = []
    for inline in (True, False):
        hybrid_inline.INLINE[0] = inline
        net = _Depth(warn=True)
        net.initialize()
        net.hybridize()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with pytest.raises(gluon_cf.RecursionDepthError, match="max_depth=4"):
                _numpy(net(nd.array([1, 2, 3, 4, 5, -1]), nd.array([0])))
        counts.append(len([w for w in seen if str(w.message) == "traced"]))
        _same(_numpy(net(*FORESTS[1])), _eager(net, FORESTS[1]))
    assert counts[0] == counts[1]


class _Float64Leaves(gluon.HybridBlock):
    """float64 features, float32 parameters: the internal branch's Dense is float32, the
    leaves' float64; a forest of one leaf never runs the internal branch."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.proj = gluon.nn.Dense(3, in_units=3, flatten=False)

    def hybrid_forward(self, F, x, left, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: F.tanh(self.proj(node(F.take(left, i)))))

        out, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return out


def test_a_node_typed_otherwise_than_declared_is_refused_in_inference_too():
    """Before: one leaf's forest ran inline to its (eager) float64 value, while the CachedOp
    and training refused the graph's types (the cond's branches: float64 and float32); now
    the inference raises the same error."""
    net = _Float64Leaves()
    net.initialize()
    args = [nd.array([[0.5, -1.0, 2.0]], dtype="float64"), nd.array([-1.0]), nd.array([0.0])]
    np.testing.assert_array_equal(net(*args).asnumpy(), [[[0.5, -1.0, 2.0]]])   # eager
    net.hybridize()
    errors = []
    for inline in (True, False):
        hybrid_inline.INLINE[0] = inline
        with pytest.raises(MismatchError, match="then_func float64, else_func float32"
                           ) as err:
            net(*args).asnumpy()
        errors.append(str(err.value))
    assert errors[0] == errors[1]
    with pytest.raises(MismatchError):
        with autograd.record():
            net(*args).asnumpy()


def test_keyboard_interrupt_inline_propagates_and_leaves_the_block_usable(monkeypatch):
    """A KeyboardInterrupt is not an error to run again as the CachedOp: it reaches the
    caller, once; the next call runs inline with the eager values."""
    from gluon_cf.graph import partitioned
    net = _depth_net()
    want = _eager(net, FORESTS[0])
    original = partitioned._CfCall.run
    interrupted = []

    def interrupting(self, values, frame):
        if frame is None and not interrupted:
            interrupted.append(1)
            raise KeyboardInterrupt
        return original(self, values, frame)

    monkeypatch.setattr(partitioned._CfCall, "run", interrupting)
    failed = hybrid_inline.INLINE_FAILED[0]
    with pytest.raises(KeyboardInterrupt):
        net(*FORESTS[0])
    monkeypatch.setattr(partitioned._CfCall, "run", original)
    runs = hybrid_inline.INLINE_RUNS[0]
    _same(_numpy(net(*FORESTS[0])), want)
    assert hybrid_inline.INLINE_RUNS[0] == runs + 1
    assert hybrid_inline.INLINE_FAILED[0] == failed


def test_exported_model_imported_runs_inline_with_the_blocks_values(tmp_path):
    net = _depth_net()
    want = _numpy(net(*FORESTS[0]))
    net.export(str(tmp_path / "depth"))
    imported = gluon.SymbolBlock.imports(str(tmp_path / "depth-symbol.json"), ["data0", "data1"],
                                         str(tmp_path / "depth-0000.params"))
    runs = hybrid_inline.INLINE_RUNS[0]
    for forest in FORESTS:
        _same(_numpy(imported(*forest)), _numpy(net(*forest)))
    _same(_numpy(imported(*FORESTS[0])), want)
    assert hybrid_inline.INLINE_RUNS[0] >= runs + 4


class _InLoops(gluon.HybridBlock):
    """The recursion inside the block's while_loop and cond."""

    def hybrid_forward(self, F, left, roots, x):
        @gluon_cf.recursive(max_depth=20)
        def depth(idx):
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.ones_like(idx),
                                 lambda: depth(F.take(left, idx)) + 1)

        def body(i, acc):
            return [], [i + 1, acc + depth(F.take(roots, i))]

        _, (_, acc) = gluon_cf.while_loop(lambda i, acc: i < 3, body,
                                          [F.zeros((1,)), F.zeros((1,))], max_iterations=5)
        return acc, gluon_cf.cond(x.sum() > 0, lambda: depth(F.take(roots, F.zeros((1,)))) * 10,
                                  lambda: acc)


def test_recursion_in_the_blocks_while_loop_and_cond_equals_eager():
    net = _InLoops()
    net.initialize()
    left, roots = nd.array([1, 2, -1, -1, 3]), nd.array([0, 3, 4])
    calls = [(left, roots, nd.ones((1,))), (left, roots, -nd.ones((1,)))]
    want = [_numpy(net(*c)) for c in calls]
    net.hybridize()
    runs = hybrid_inline.INLINE_RUNS[0]
    for c, w in zip(calls, want):
        _same(_numpy(net(*c)), w)
    assert hybrid_inline.INLINE_RUNS[0] == runs + 2
    np.testing.assert_array_equal(want[0][1], [30])


class _SparseFeatures(gluon.HybridBlock):
    def hybrid_forward(self, F, x, left, roots):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: node(F.take(left, i)) * 2)

        out, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return out


def test_a_sparse_input_is_not_run_twice():
    """Before: a sparse feature array (a foreach's free variable) reached the node's rule
    sparse in the calling thread, which failed ("reshape ... not supported for
    SparseNDArray") on every call, each then run again as the CachedOp: twice the work. The
    Custom operator gives a node dense copies; such a call is not tried inline."""
    x = nd.array([[1., 0.], [0., 4.], [5., 6.]]).tostype("csr")
    args = [x, nd.array([-1, 0, 1]), nd.array([0, 2])]
    net = _SparseFeatures()
    want = net(*args).asnumpy()
    net.hybridize()
    failed = hybrid_inline.INLINE_FAILED[0]
    for _ in range(3):
        np.testing.assert_array_equal(net(*args).asnumpy(), want)
    assert hybrid_inline.INLINE_FAILED[0] == failed
    np.testing.assert_array_equal(want, [[[1, 0]], [[4, 0]]])


TOO_DEEP = (nd.array([1, 2, 3, 4, 5, -1]), nd.array([0]))


@settings(max_examples=10, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["inline", "custom", "record", "train", "flags"]),
                          st.integers(0, len(FORESTS))), min_size=1, max_size=8))
def test_call_histories_equal_eager(calls):
    """Random histories of one block (inline, by the Custom operator, recorded, train mode,
    hybridized again with other flags; forests and a too-deep one): each call's outputs are
    the eager ones, or the eager error."""
    net = _depth_net()
    eager = {k: _eager(net, f) for k, f in enumerate(FORESTS)}
    for how, k in calls:
        hybrid_inline.INLINE[0] = how != "custom"
        if how == "flags":
            net.hybridize(static_alloc=k % 2 == 0, static_shape=k % 2 == 0)
        args = FORESTS[k] if k < len(FORESTS) else TOO_DEEP
        with autograd.record() if how == "record" else \
                autograd.train_mode() if how == "train" else contextlib.nullcontext():
            if k == len(FORESTS):
                with pytest.raises(gluon_cf.RecursionDepthError, match="max_depth=4"):
                    _numpy(net(*args))
                continue
            out = net(*args)
        _same(_numpy(out), eager[k])
    hybrid_inline.INLINE[0] = True
