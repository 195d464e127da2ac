"""Review of issue 24 item 5 (helper h24err): errors that reached users as MXNet's own
messages with no line of theirs. ``F.take(..., mode='raise')`` with an index out of bounds
in a hybridized body (NOTE [an index out of bounds at run time])."""
import inspect
import re

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

import gluon_cf


def _take_in_cond(F, x, i):
    return gluon_cf.cond(F.sum(x) > 0, lambda: F.take(x, i, mode="raise"), lambda: x * 2)


def _take_in_foreach(F, x, i):
    outs, _ = gluon_cf.foreach(lambda row, s: (F.take(row, i, mode="raise"), s), x, [x])
    return outs


def _take_in_while(F, x, i):
    def step(j, v):
        return F.take(v, i, mode="raise"), [j + 1, v]
    outs, _ = gluon_cf.while_loop(lambda j, v: j < 2, step, [F.zeros((1,)), x],
                                  max_iterations=2)
    return outs


def _take_in_recursion(F, x, i):
    @gluon_cf.recursive
    def node(k):
        here = F.take(x, k, mode="raise")
        return gluon_cf.cond(F.sum(k) <= 0, lambda: here, lambda: here + node(k - 1))
    return node(i)


def _take_after_a_mask_in_foreach(F, x, i):   # (run-time shapes: the graph runs partitioned)
    def body(row, s):
        kept = F.contrib.boolean_mask(x, F.sum(x, axis=1) > 0)
        return F.broadcast_add(F.take(kept, i, mode="raise"), row), s
    outs, _ = gluon_cf.foreach(body, x, [x])
    return outs


class _Net(gluon.HybridBlock):
    def __init__(self, program):
        super().__init__()
        self.program = program

    def hybrid_forward(self, F, x, i):
        return self.program(F, x, i)


def _line_of_take(program):
    lines, first = inspect.getsourcelines(program)
    return first + next(k for k, text in enumerate(lines) if "F.take" in text)


@pytest.mark.parametrize("program", [_take_in_cond, _take_in_foreach, _take_in_while,
                                     _take_in_recursion, _take_after_a_mask_in_foreach])
def test_take_out_of_bounds_in_a_hybridized_body_names_the_users_line(program):
    x = nd.array([[1., 2, 3], [4, 5, 6]])
    net = _Net(program)
    net.hybridize()
    within = net(x, nd.array([1])).asnumpy()     # (the oracle: eager, and MXNet's clip)
    np.testing.assert_allclose(within, _Net(program)(x, nd.array([1])).asnumpy())
    for _ in range(2):      # every call alike, and the block usable after
        with pytest.raises(IndexError) as info:
            net(x, nd.array([7])).asnumpy()
        text = str(info.value)
        assert "%s:%d: take" % (__file__, _line_of_take(program)) in text, text
        assert "mode='clip'" in text and "::" not in text and "indexing_op" not in text
        assert isinstance(info.value, mx.MXNetError)    # (what MXNet raised, as before)
    np.testing.assert_allclose(net(x, nd.array([1])).asnumpy(), within)


# ------------------------------------ MXNet's numpy-shape mode (NOTE [numpy-shape mode])
S = mx.sym
_X, _W = S.var("x"), S.var("w")


def _sym_cond(ops):
    return ops.cond(S.sum(_X) > 0, lambda: S.broadcast_mul(_X, _W), lambda: _X)


def _sym_foreach(ops):
    outs, states = ops.foreach(lambda d, s: (S.broadcast_mul(d, s[0]), [s[0] + d]), _X, [_W])
    return S.Group([outs, states[0]])


def _sym_while(ops):
    outs, states = ops.while_loop(lambda i: S.sum(i) < 3, lambda i: (i * 2, [i + 1]), [_W],
                                  max_iterations=4)
    return S.Group([outs, states[0]])


def _bound(symbol, **shapes):
    executor = symbol.simple_bind(mx.cpu(), **shapes)
    for k, array in enumerate(executor.arg_arrays):
        array[:] = nd.arange(array.size).reshape(array.shape) + k
    return [o.asnumpy() for o in executor.forward()]


@pytest.mark.parametrize("program", [_sym_cond, _sym_foreach, _sym_while])
def test_a_scalar_under_numpy_shape_mode_is_refused_at_the_users_line(program):
    with mx.util.np_shape(True):
        with mx.name.NameManager():
            symbol = program(gluon_cf)
        with pytest.raises(Exception) as info:   # (MXNet's own ops refuse it too)
            _bound(symbol, x=(3,), w=())
    text = str(info.value)
    line = inspect.getsourcelines(program)[1] + 1
    assert "\n%s:%d: gluon_cf." % (__file__, line) in text, text   # (after MXNet's bind text)
    assert "numpy-shape mode" in text and "(1,)" in text and "NoneType" not in text


def test_values_of_one_dimension_under_numpy_shape_mode_run_as_mxnets_foreach():
    with mx.util.np_shape(True):
        ours, theirs = [_bound(_sym_foreach(ops), x=(3, 2), w=(2,))
                        for ops in (gluon_cf, mx.sym.contrib)]
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b)


class _ScalarState(gluon.HybridBlock):
    def hybrid_forward(self, F, x, w):
        outs, _ = gluon_cf.foreach(lambda d, s: (F.broadcast_mul(d, s[0]), [s[0] + d]), x, [w])
        return outs


def test_a_hybridized_block_reading_a_scalar_under_numpy_shape_mode_is_refused():
    net = _ScalarState()
    net.hybridize()
    with mx.util.np_shape(True):
        eager = _ScalarState()(nd.ones((3,)), nd.ones(()))   # (runs eagerly, as MXNet's)
        np.testing.assert_allclose(eager.asnumpy(), [1, 2, 3])
        with pytest.raises(ValueError) as info:
            net(nd.ones((3,)), nd.ones(())).asnumpy()
    line = inspect.getsourcelines(_ScalarState)[1] + 2
    assert str(info.value).startswith("%s:%d: gluon_cf.foreach" % (__file__, line)), info.value


def test_infer_shape_of_a_scalar_under_numpy_shape_mode_answers_as_mxnets_cond():
    with mx.util.np_shape(True), pytest.warns(UserWarning, match="Cannot decide shape"):
        answers = []
        for ops in (gluon_cf, mx.sym.contrib):
            with mx.name.NameManager():
                answers.append(_sym_cond(ops).infer_shape(x=(3,), w=()))
    assert answers[0] == answers[1] == (None, None, None)


# ------------------------------------ a node's output reshaped to another size in a Symbol executor
def _reshaped_cond(ops):
    cond = ops.cond(S.sum(_X) > 0, lambda: _X * 2, lambda: _X - 1)
    return S.reshape(cond, shape=(2, 2))


@pytest.mark.parametrize("how", ["simple_bind", "bind", "reshape"])
def test_a_nodes_output_reshaped_to_another_size_is_refused_at_bind(how):
    # MXNet 1.9.1 compiles out Reshape's size check (NOTE [a reshape to another size]): the
    # executor bound and read past the 3 elements; MXNet's own cond refuses the graph
    with mx.name.NameManager():
        symbol = _reshaped_cond(gluon_cf)
    with pytest.raises(mx.MXNetError, match=r"reshape0: Shape inconsistent, the target shape "
                       r"\(2, 2\) has 4 elements, the source \(3,\) has 3"):
        if how == "simple_bind":
            symbol.simple_bind(mx.cpu(), x=(3,))
        elif how == "bind":
            symbol.bind(mx.cpu(), {"x": nd.array([1, 2, 3])})
        else:
            fine = S.reshape(gluon_cf.cond(S.sum(_X) > 0, lambda: _X * 2, lambda: _X - 1),
                             shape=(2, 2), name="reshape0").simple_bind(mx.cpu(), x=(4,))
            fine.reshape(x=(3,), allow_up_sizing=True)
    with mx.name.NameManager():
        with pytest.raises(RuntimeError, match="cannot decide"):   # (the oracle refuses too)
            _reshaped_cond(mx.sym.contrib).simple_bind(mx.cpu(), x=(3,))


# ------------------------- an argument a node reads, shaped only by an operator after it
def _loop_then_outer_use(ops):
    outs, states = ops.while_loop(lambda i: S.sum(i) < 3, lambda i: (i * 2, [i + 1]), [_W],
                                  max_iterations=4)
    return S.Group([outs, states[0], _W + S.var("y")])


def test_an_argument_shaped_only_after_a_node_is_refused_naming_it_and_the_line():
    with mx.name.NameManager():
        symbol = _loop_then_outer_use(gluon_cf)
    with pytest.raises(RuntimeError) as info:   # (was "Incompatible attr ... expected []")
        symbol.simple_bind(mx.cpu(), y=(3,))
    line = inspect.getsourcelines(_loop_then_outer_use)[1] + 1
    assert str(info.value).startswith(
        "%s:%d: simple_bind cannot decide the shape of argument 'w', read by "
        "gluon_cf.while_loop" % (__file__, line)), info.value
    assert str(info.value).endswith("Give it to simple_bind (w=(3,))")
    with mx.name.NameManager(), pytest.raises(RuntimeError, match="cannot decide"):
        _loop_then_outer_use(mx.sym.contrib).simple_bind(mx.cpu(), y=(3,))   # (the oracle)
    with mx.name.NameManager():
        executor = _loop_then_outer_use(gluon_cf).simple_bind(mx.cpu(), w=(3,), y=(3,))
    executor.arg_dict["w"][:] = nd.array([-1, 0, 1])
    executor.arg_dict["y"][:] = nd.array([1, 2, 3])
    outs, state, total = [o.asnumpy() for o in executor.forward()]
    rows, i = [], np.array([-1., 0, 1])      # (plain Python, the oracle)
    while i.sum() < 3:
        rows.append(i * 2)
        i = i + 1
    np.testing.assert_allclose(outs, np.array(rows + [np.zeros(3)] * (4 - len(rows))))
    np.testing.assert_allclose(state, i)
    np.testing.assert_allclose(total, [0, 2, 4])


# ---------------------- an operator outside the nodes refusing a node's output or argument
def _foreach_then_outer_ops(ops):
    outs, _ = ops.foreach(lambda d, s: (d + s[0], [s[0] * 2]), _X, [_W])
    return S.Group([outs + S.var("y"), _W + S.var("z")])


@pytest.mark.parametrize("shapes, what, detail", [
    (dict(x=(3, 2), w=(2,), y=(3, 4), z=(2,)), "the output of", "expected [3,2], got [3,4]"),
    (dict(x=(3, 2), y=(3, 2), z=(4,)), "argument 'w', which is read by",
     "expected [2], got [4]")])
def test_an_operator_refusing_a_nodes_value_names_the_nodes_line(shapes, what, detail):
    with mx.name.NameManager():
        symbol = _foreach_then_outer_ops(gluon_cf)
    with pytest.raises(RuntimeError) as info:
        symbol.simple_bind(mx.cpu(), **shapes)
    text = str(info.value)
    line = inspect.getsourcelines(_foreach_then_outer_ops)[1] + 1
    assert text.startswith("%s:%d: elemwise_add (node " % (__file__, line)), text
    assert ("reading %s gluon_cf.foreach (node '_foreach0')" % what) in text, text
    assert detail in text and "elemwise_op_common" not in text and "::" not in text
    with mx.name.NameManager(), pytest.raises(RuntimeError, match=re.escape(detail)):
        _foreach_then_outer_ops(mx.sym.contrib).simple_bind(mx.cpu(), **shapes)   # (oracle)
