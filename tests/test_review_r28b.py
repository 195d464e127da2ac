"""Review r28b of round 28's autograph ``try`` (NOTE [an index error the user's try
catches]): an int index of a tensor loop's row inside a ``try`` catching IndexError was
refused while tracing ("shape not known"), though in range it is the plain slice, and such
code ran hybridized as eagerly before round 28. Now it runs; past the axis the graph's run
raises the IndexError at the user's line naming the ``try``; a shape known only as the graph
runs (after boolean_mask) is still refused while tracing. Oracle: plain Python on NDArrays,
eagerly and hybridized (values and gradients), inputs of 3, 7 and again 3 rows."""
import numpy as np
import pytest
from mxnet import autograd
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness
import test_history_h28 as history

PROGRAMS, program = hostile_harness.program_registry()
ROWS = ([hostile_harness.rand(3, 2, seed=2881)], [hostile_harness.rand(7, 2, seed=2882)],
        [hostile_harness.rand(3, 2, seed=2883)])
KEPT = np.array([[1., 2], [3, 4], [5, 6]], dtype=np.float32)
MASKED = ([KEPT], [KEPT * np.array([[1], [-1], [-1]], dtype=np.float32)], [KEPT])


def second(r):
    try:
        return r[1] * 2
    except IndexError:
        return r


@program(*ROWS)
class RowOfTensorLoopInTry(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1,))
        for row in x:
            try:
                h = h + row[-1] * row[0]
            except IndexError:
                h = h - 1
            h = h + second(row)
        return h


@program(*MASKED)
class RowOfMaskedLoopInTry(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1,))
        for row in F.contrib.boolean_mask(x, x.sum(axis=1) > 0):
            try:
                h = h + row[1]
            except IndexError:
                h = h - 1
        return h


@program(*MASKED)
class MaskedIndexInTry(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        kept = F.contrib.boolean_mask(x, x.sum(axis=1) > 0)
        try:
            r = kept[1] * 3
        except IndexError:
            r = kept[0]
        return r


_classified = hostile_harness.cached_classifier(PROGRAMS, [__file__], export=False)


def test_row_of_a_tensor_loop_indexed_in_range_inside_a_try_runs_as_eagerly():
    """(refused while tracing: "the tensor's shape is not known as the graph is traced")"""
    hostile_harness.assert_kinds(_classified(RowOfTensorLoopInTry))
    hostile_harness.assert_kinds(_classified(RowOfMaskedLoopInTry))


def test_index_of_a_shape_known_only_as_the_graph_runs_is_refused_naming_the_try():
    """Past the axis of boolean_mask's rows the partitioned graph's error names no line: the
    index inside a try is refused while tracing, at the user's line."""
    hostile_harness.assert_kinds(_classified(MaskedIndexInTry), refused=True)
    err = hostile_harness.hybridized_error(MaskedIndexInTry, MASKED[1][0])
    index = hostile_harness.line_in(__file__, "r = kept[1] * 3")
    assert isinstance(err, gluon_cf.AutographError), err
    assert str(err).startswith(f"{__file__}:{index}: r = kept[1] * 3: "), err
    assert f"inside the try at {__file__}:{index - 1}, which catches IndexError" in str(err)


CALLS = []


def index_errors():
    CALLS.append("called")
    return IndexError


@program(*ROWS)
class HandlerOfACall(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        try:
            r = x[1] * 2 + x[-1]
        except index_errors():
            r = x[0]
        return r


def test_an_except_clause_is_not_evaluated_where_no_exception_reaches_it():
    """``except index_errors():`` is Python's call only when an exception reaches the
    clause: hybridized, tracing called it for each index inside the try."""
    del CALLS[:]
    hostile_harness.assert_kinds(hostile_harness.classify(
        HandlerOfACall, PROGRAMS[HandlerOfACall], [__file__], export=False))
    assert CALLS == [], CALLS


# Review r28b of round 28's BatchNorm training refused by the node (NOTE [training refused by
# the node]): refused in MXNet's worker thread, a fresh block's training call returned, and
# ``backward`` and ``trainer.step`` ran; the refusal came at a later read, or at the gradient
# of the next call, recorded in predict mode, that should work (before round 28, tracing
# refused the call itself). Oracle: plain eager code with the same parameters.


def _recorded_predict(net, x):
    x = x.copy()
    x.attach_grad()
    with autograd.record(train_mode=False):
        out = net(x)
        loss = (out * out * out).sum()
    loss.backward()
    return [out.asnumpy(), x.grad.asnumpy()] + [
        p.grad().asnumpy() for p in net.collect_params().values() if p.grad_req != "null"]


@pytest.mark.parametrize("body", [history.cond_bn, history.foreach_bn,
                                  history.masked_foreach_bn], ids=lambda b: b.__name__)
def test_a_refused_training_call_raises_at_the_call_and_the_next_call_works(body):
    x = history.X[3] if body is history.masked_foreach_bn else history.X[2]
    net = history._make(body)
    eager = history._make(body, like=net, hybridize=False)
    with pytest.raises(NotImplementedError, match=r"the body calls BatchNorm at .*"
                       r"test_history_h28\.py:\d+ \(node"):
        with autograd.record():
            net(x)                # (refused by the call, not at a later read)
    for got, want in zip(_recorded_predict(net, x), _recorded_predict(eager, x)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for mine, theirs in zip(net.collect_params().values(), eager.collect_params().values()):
        np.testing.assert_array_equal(mine.data().asnumpy(), theirs.data().asnumpy())
