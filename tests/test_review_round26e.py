"""Review of round 26's eager loops whose states may change (NOTE [eager loop states may
change] in ``gluon_cf/ops/eager_loops.py``): more argument forms against MXNet's own eager
``nd.contrib`` loops (values, dtypes, containers, gradients), the message the loops add to a
user's error at a step after a non-array state keeps its type and text, and a zero-size step
output is refused at the user's line (NOTE [zero-size step outputs] in ``gluon_cf/checks.py``).
"""
import mxnet as mx
import pytest
from mxnet import nd

import gluon_cf
from gluon_cf.errors import ZeroSizeError
from test_eager_states26e import _assert_same


def _counted(first, later):   # a body returning ``first`` at step 0, ``later`` after it
    calls = []

    def body(d, s):
        calls.append(1)
        return (first if len(calls) == 1 else later)(d, s)
    return body


# (while_loops run exactly max_iterations steps: MXNet leaves rows after the last step
# uninitialised, gluon_cf zeros them)
PROGRAMS = {
    "single_state": lambda L, x: L.foreach(lambda d, s: (d + s, s * 2), x, x[0] * 1),
    "tuple_states": lambda L, x: L.foreach(lambda d, s: (d + s[0], (s[0] * 2, s[1])), x,
                                           (x[0] * 1, x[1] * 1)),
    "nested_tuple": lambda L, x: L.foreach(lambda d, s: (d + s[0][0], s), x,
                                           [(x[0] * 1, x[1] * 1)]),
    "data_list": lambda L, x: L.foreach(lambda d, s: ([d[0] + s[0], d[1]], [s[0] * d[1]]),
                                        [x, x * 2], [x[0] * 1]),
    "empty_grows": lambda L, x: L.foreach(lambda d, s: (d * 2, s + [d]), x, []),
    "no_outputs": lambda L, x: L.foreach(lambda d, s: ([], [s[0] + d]), x, [x[0] * 0]),
    "tuple_outputs": lambda L, x: L.foreach(lambda d, s: ((d * 2, d), [s[0] + d]), x,
                                            [x[0] * 0]),
    "states_to_none": lambda L, x: L.foreach(lambda d, s: (d, None), x, [x[0]]),
    "list_to_tuple": lambda L, x: L.foreach(lambda d, s: (d, tuple(s)), x, [x[0]]),
    "to_other_context": lambda L, x: L.foreach(lambda d, s: (d * 2, [(s[0] + d).as_in_context(
        mx.cpu(1))]), x, [x[0] * 1]),
    "f16_outputs": lambda L, x: L.foreach(lambda d, s: (
        d.astype("float16") * s[0].astype("float16"), [s[0] * d]), x, [x[0] * 1]),
    "grad_through_growth": lambda L, x: L.foreach(lambda d, s: (
        d.sum() * s[0].sum(), [nd.concat(s[0], d, dim=0)]), x, [x[0] * 1]),
    "wl_tuple_no_step": lambda L, x: L.while_loop(lambda i, v: i < 0, lambda i, v: (
        v * 2, (i + 1, v + 1)), (nd.zeros(1), x[0] * 1), max_iterations=5),
    "wl_single_no_step": lambda L, x: L.while_loop(lambda v: v.sum() < 0, lambda v: (
        v * 2, v + 1), x[0] * 1, max_iterations=5),
    "wl_single_tuple1": lambda L, x: L.while_loop(lambda v: v.sum() < 1e9, lambda v: (
        v, (v + 1,)), x[0] * 1, max_iterations=3),
    "wl_nested_vars": lambda L, x: L.while_loop(lambda a, b: a < 9, lambda a, b: (b[0], [
        a + 1, [b[0] * 2, b[1]]]), [nd.zeros(1), [x[0] * 1, x[1] * 1]], max_iterations=3),
    "wl_var_to_number": lambda L, x: L.while_loop(lambda i, v: i < 9, lambda i, v: (
        i * x.sum(), (i + 1, 2)), (nd.zeros(1), x[0] * 1), max_iterations=3),
    "wl_max_as_array": lambda L, x: L.while_loop(lambda v: v.sum() < 1e9, lambda v: (
        (v, v * 2), [v + 1]), [x[0] * 1], max_iterations=nd.array([3])),
    "wl_dtype_change": lambda L, x: L.while_loop(lambda i, v: i < 9, lambda i, v: (
        v.astype("float64"), (i + 1, v.astype("float64") + 1)),
        (nd.zeros(1, dtype="int32"), x[0] * 1), max_iterations=3),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_more_forms_as_mxnet_eager_loops(name):
    _assert_same(PROGRAMS[name])


def _int_state_then(error):
    def body(d, s):
        if len(s) > 1:
            raise error
        return d, [s[0], 3]
    return body


class MyTypeError(TypeError):
    pass


@pytest.mark.parametrize("error", [TypeError("my own text"), AssertionError("my own text"),
                                   AttributeError("my own text"), MyTypeError("my own text"),
                                   KeyError("my own text")])
def test_a_users_error_after_a_number_state_keeps_type_and_text(error):
    with pytest.raises(type(error)) as info:
        gluon_cf.foreach(_int_state_then(error), nd.ones((3, 2)), [nd.ones(2)])
    assert type(info.value) is type(error) and "my own text" in str(info.value)


def test_zero_size_step_outputs_are_refused_at_the_line():
    x = nd.ones((3, 4))
    with pytest.raises(ZeroSizeError) as info:
        gluon_cf.foreach(lambda d, s: (d[:0], [s[0] + d]), x, [x[0]])   # ZS_FOREACH
    assert "test_review_round26e.py:%d" % (_tag_line("ZS_FOREACH")) in str(info.value)
    assert "step output 0 has shape (0,)" in str(info.value)
    with pytest.raises(ZeroSizeError) as info:
        gluon_cf.while_loop(lambda v: v.sum() < 9, lambda v: (
            [v, v[:0]], [v + 1]), [x[0]], max_iterations=2)   # ZS_WHILE
    assert "test_review_round26e.py:%d" % (_tag_line("ZS_WHILE") - 1) in str(info.value)
    assert "step output 1 has shape (0,)" in str(info.value)


def _tag_line(tag):
    lines = open(__file__).read().splitlines()
    return next(k for k, t in enumerate(lines) if t.endswith(tag)) + 1


def _number_state(F, x):
    return gluon_cf.foreach(lambda d, s: (d, [s[0], 3]), x, [x[0]])[0]   # NUM_STATE


@pytest.mark.parametrize("how", ["hybridized", "remat"])
def test_a_number_state_refused_saying_eagerly_it_runs(how):
    from mxnet import autograd
    from conftest import Block
    x = nd.ones((3, 4))
    _number_state(nd, x).wait_to_read()   # eagerly, as MXNet's eager foreach
    with pytest.raises(AssertionError) as info:
        if how == "remat":
            with autograd.record():
                gluon_cf.foreach(lambda d, s: (d, [s[0], 3]), x, [x[0]], remat=True)
        else:
            net = Block(_number_state)
            net.hybridize()
            net(x)
    assert "run it without hybridize() or remat" in str(info.value), str(info.value)
    if how == "hybridized":
        assert "test_review_round26e.py:%d" % _tag_line("NUM_STATE") in str(info.value)
