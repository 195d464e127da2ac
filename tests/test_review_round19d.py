"""Found while reviewing the merges of h19rec (batching keys, recursion refusals) and h19export
(rank-varying cond outputs, Scans of run-time length, recursion at opset 12), each against an
oracle (plain numpy, or the eager block)."""
import re

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf

# a binary forest: 0 = (1, 2); 3 = (4, 5); 6 alone (left < 0: a leaf)
X = np.random.RandomState(3).randn(7, 3).astype(np.float32)
LEFT = np.array([1, -1, -1, 4, -1, -1, -1], np.float32)
RIGHT = np.array([2, -1, -1, 5, -1, -1, -1], np.float32)
ROOTS = np.array([0, 3, 6], np.float32)


def _rows_of(F, node, roots):
    hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
    return F.reshape(hs, (-3, -2))


class _SpineInLoopBody(gluon.HybridBlock):
    """A recursive function defined in a loop body inside a recursive body, closing over the
    loop's step value (``LOOP``: foreach over two rows of x, or a while_loop's variable)."""
    LOOP = "foreach"

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            here = F.take(x, i)

            def spine_of(r):
                @gluon_cf.recursive
                def spine(j):
                    return gluon_cf.cond(F.take(left, j) < 0, lambda: F.broadcast_mul(F.take(x, j), r),
                                         lambda: F.take(x, j) + spine(F.take(left, j)) * 0.5)
                return F.broadcast_add(spine(F.take(right, i)), r)

            if self.LOOP == "foreach":
                outs, _ = gluon_cf.foreach(lambda r, s: (spine_of(r), s),
                                           F.slice_axis(x, 0, 0, 2), [])
                total = F.sum(outs, axis=0)
            else:
                _, (_, total) = gluon_cf.while_loop(
                    lambda k, acc: k < 2,
                    lambda k, acc: (None, (k + 1, acc + spine_of(F.take(x, k)))),
                    [F.zeros((1,)), F.zeros_like(here)], max_iterations=2)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: here,
                                 lambda: F.tanh(total + node(F.take(left, i))))
        return _rows_of(F, node, roots)


class _SpineInWhileBody(_SpineInLoopBody):
    LOOP = "while_loop"


def _spine_oracle():
    lt, rt = LEFT.astype(int), RIGHT.astype(int)

    def spine(j, r):
        here = X[j:j + 1]
        return here * r if lt[j] < 0 else here + spine(lt[j], r) * 0.5

    def node(i):
        here = X[i:i + 1]
        if lt[i] < 0:
            return here
        total = sum(spine(rt[i], X[k:k + 1]) + X[k:k + 1] for k in range(2))
        return np.tanh(total + node(lt[i]))
    return np.concatenate([node(int(r)) for r in ROOTS], axis=0)


@pytest.mark.parametrize("block_class", [_SpineInLoopBody, _SpineInWhileBody])
def test_a_recursion_closing_over_a_loop_step_inside_a_recursion_is_refused_at_its_line(
        block_class):
    """Was, hybridized: AssertionError 'Unknown input to HybridBlock: _gcf21_foreach_body_in0'
    (the inner function's environment held the loop's input; refusals.py only knew the
    inputs of recursive functions' traces). Eagerly it runs, equal to plain numpy."""
    args = [mx.nd.array(a) for a in (X, LEFT, RIGHT, ROOTS)]
    net = block_class()
    net.initialize()
    np.testing.assert_allclose(net(*args).asnumpy(), _spine_oracle(), rtol=1e-5, atol=1e-6)
    net.hybridize()
    with pytest.raises(NotImplementedError) as caught:
        net(*args)
    message = str(caught.value)
    assert message.startswith(__file__ + ":"), message
    assert "'spine' reads a value computed in a gluon_cf.%s" % block_class.LOOP in message
    assert "pass it to 'spine' as an argument" in message


class _SpineReadsOnlyInputsInLoopBody(gluon.HybridBlock):
    """The same nesting, the inner function closing over the block's inputs only: runs."""

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            def step(r, s):
                @gluon_cf.recursive
                def spine(j):
                    return gluon_cf.cond(F.take(left, j) < 0, lambda: F.take(x, j),
                                         lambda: F.take(x, j) + spine(F.take(left, j)) * 0.5)
                return F.broadcast_mul(spine(F.take(right, i)), r), s
            outs, _ = gluon_cf.foreach(step, F.slice_axis(x, 0, 0, 2), [])
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i),
                                 lambda: F.tanh(F.sum(outs, axis=0) + node(F.take(left, i))))
        return _rows_of(F, node, roots)


def test_a_recursion_in_a_loop_body_inside_a_recursion_reading_inputs_only_runs():
    lt, rt = LEFT.astype(int), RIGHT.astype(int)

    def spine(j):
        return X[j:j + 1] if lt[j] < 0 else X[j:j + 1] + spine(lt[j]) * 0.5

    def node(i):
        if lt[i] < 0:
            return X[i:i + 1]
        return np.tanh(sum(spine(rt[i]) * X[k:k + 1] for k in range(2)) + node(lt[i]))
    want = np.concatenate([node(int(r)) for r in ROOTS], axis=0)
    for hybrid in (False, True):
        net = _SpineReadsOnlyInputsInLoopBody()
        net.initialize()
        if hybrid:
            net.hybridize()
        args = [mx.nd.array(a) for a in (X, LEFT, RIGHT, ROOTS)]
        args[0].attach_grad()
        with autograd.record():
            out = net(*args)
        out.backward()
        np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-5, atol=1e-6)
        assert np.abs(args[0].grad.asnumpy()).sum() > 0


# ---- export_onnx: an output computed from a cond of two ranks, of one rank either way ------

_ONE_RANK_TAILS = {
    "reshape_-4": lambda F, c, x: F.reshape(F.reshape(c, (-1,)), (-4, 1, -1)),
    "max_of_rows": lambda F, c, x: F.max(F.reshape(c, (-1, 3)), axis=1),
    "dot": lambda F, c, x: F.dot(F.reshape(c, (-1, 3)), x, transpose_b=True),
}


class _OneRankOfTwoRanks(gluon.HybridBlock):
    """A cond of branches of ranks 2 and 1, made of one rank (``TAIL``) before it is output."""
    TAIL = "reshape_-4"

    def hybrid_forward(self, F, x):
        c = gluon_cf.cond(F.sum(x) > 0, lambda: x * 2, lambda: F.sum(x, axis=0))
        return _ONE_RANK_TAILS[self.TAIL](F, c, x)


@pytest.mark.parametrize("tail", sorted(_ONE_RANK_TAILS))
def test_an_output_of_one_rank_computed_from_a_cond_of_two_ranks_exports(tail, capfd):
    """Was refused: 'model output ... has a rank that depends on which branch of this cond
    runs' (any output whose shape MXNet could not infer, reading such a cond, was refused).
    Now the rank is inferred with each branch's outputs (NOTE [outputs of varying rank]); the
    model runs in onnxruntime equal to Gluon on both branches and several lengths, warning
    of no shape."""
    import onnxruntime as ort
    from gluon_cf.export import export_onnx

    net = type("Net", (_OneRankOfTwoRanks,), {"TAIL": tail})()
    net.hybridize()
    example = np.ones((2, 3), np.float32)
    model = export_onnx(net, [mx.nd.array(example)], dynamic_axes={0: [0]})
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    rng = np.random.RandomState(0)
    branches = set()
    for x in (example, -example, np.abs(rng.randn(5, 3)).astype(np.float32),
              -np.abs(rng.randn(1, 3)).astype(np.float32), rng.randn(4, 3).astype(np.float32)):
        want = net(mx.nd.array(x)).asnumpy()
        got, = session.run(None, {name: x})
        assert got.shape == want.shape and got.dtype == want.dtype, (x.shape, got.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        branches.add(bool(x.sum() > 0))
    assert branches == {True, False}
    assert "onnxruntime" not in capfd.readouterr().err


class _RankFollowsTheBranch(gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        c = gluon_cf.cond(F.sum(x) > 0, lambda: x * 2, lambda: F.sum(x, axis=0))
        return F.relu(F.expand_dims(c, 0))


def test_an_output_whose_rank_follows_the_branch_is_still_refused():
    from gluon_cf.export import export_onnx

    net = _RankFollowsTheBranch()
    net.hybridize()
    with pytest.raises(NotImplementedError, match="has a rank that depends on which branch"):
        export_onnx(net, [mx.nd.ones((2, 3))], dynamic_axes={0: [0]})


def test_save_artifact_of_a_function_called_with_two_dtypes_is_refused_at_the_call():
    """h19rec runs a function whose argument is int32 at one call (the roots) and float32 at
    another (the children); an artifact's function has one signature. save_artifact said
    "call '..._node0' passes arguments of dtypes ['float32'] to 'node_0@243392cf8d', another
    call ['int32']" (a ValueError naming gluon_cf's qualified name, no line of the user's)."""
    import export_harness
    import hostile_programs14 as programs

    block_class = programs.RootsInt32ChildrenFloat32
    result = export_harness.export_outcomes(block_class, programs.PROGRAMS[block_class],
                                            [programs.__file__])
    kind, detail = result["artifact"]
    assert kind == "refused", detail
    assert re.match(r"NotImplementedError: %s:\d+: save_artifact: this call of 'node' \(node "
                    % re.escape(programs.__file__), detail), detail
    assert "passes arguments of dtypes ['float32'], another call (or the outermost) " \
           "['int32']" in detail, detail


class _LoopOverChildrenCallsTheFunction(gluon.HybridBlock):
    """A node's children as a row of a padded table; a loop over that row calls the function
    in a cond for each real child (recursion in a loop in recursion): ``LOOP`` foreach, or a
    while_loop over the row's two positions."""
    LOOP = "foreach"

    def hybrid_forward(self, F, x, kids, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)
            row = F.reshape(F.take(kids, idx), (-1, 1))

            def child_value(child):
                return gluon_cf.cond(child < 0, lambda: F.zeros_like(here), lambda: node(child))
            if self.LOOP == "foreach":
                _, total = gluon_cf.foreach(
                    lambda child, t: (t, t + child_value(child)), row, F.zeros_like(here))
            else:
                def child_at(k):
                    return F.reshape(F.take(row, F.minimum(k, 1)), (1,))
                # (the child is a loop variable read only by the cond calling the function)
                _, (_, _, total) = gluon_cf.while_loop(
                    lambda k, child, t: k < 2,
                    lambda k, child, t: (None, (k + 1, child_at(k + 1),
                                                t + child_value(child))),
                    [F.zeros((1,)), child_at(F.zeros((1,))), F.zeros_like(here)],
                    max_iterations=2)
            return F.tanh(here + total * 0.5)
        return _rows_of(F, node, roots)


class _WhileOverChildrenCallsTheFunction(_LoopOverChildrenCallsTheFunction):
    LOOP = "while_loop"


@pytest.mark.parametrize("block_class", [_LoopOverChildrenCallsTheFunction,
                                         _WhileOverChildrenCallsTheFunction])
def test_a_loop_calling_the_function_in_a_cond_inside_a_recursion_hybridizes(block_class):
    """Was refused hybridized with MXNet's AssertionError 'the data arrays have to be used in
    the loop body ... body does not read data [0]' (foreach) or 'The 1-th loop_var doesn't
    involve into the computation' (while_loop): while discovering the function's signature, the
    cond keeps its branch without the call and drops the node reading the child (a graph
    thrown away), and the loop's check judged that graph. Equal to numpy, eager and
    hybridized, with the input's gradient."""
    kids = np.array([[1, 2], [-1, -1], [3, -1], [-1, -1], [0, 3]], np.float32)
    x = np.random.RandomState(5).randn(5, 3).astype(np.float32)
    roots = np.array([0, 4, 3], np.float32)

    def node(i):
        total = sum((node(int(c)) for c in kids[i] if c >= 0), np.zeros((1, 3), np.float32))
        return np.tanh(x[i:i + 1] + total * 0.5)
    want = np.concatenate([node(int(r)) for r in roots], axis=0)
    grads = []
    for hybrid in (False, True):
        net = block_class()
        if hybrid:
            net.hybridize()
        args = [mx.nd.array(a) for a in (x, kids, roots)]
        args[0].attach_grad()
        with autograd.record():
            out = net(*args)
        out.backward()
        np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-5, atol=1e-6)
        grads.append(args[0].grad.asnumpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-6)
