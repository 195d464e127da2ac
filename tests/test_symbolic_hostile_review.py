"""Review of the symbolic API round (session 21, h21r1), against eager gluon_cf and MXNet's own
ops: a ``cond`` whose untaken branch shape inference refuses (NOTE [a branch refusing its
inputs]), the names of the nodes made after a control-flow node (NOTE [node names]), and a
Symbol given where a function is expected."""
import re

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf


def _grown_while(F, x):
    """A while_loop whose loop variable doubles its rows, sliced back to x's rows."""
    grown = gluon_cf.while_loop(lambda s: F.sum(s) > -100,
                                lambda s: ([], [F.concat(s, s, dim=0)]), [x],
                                max_iterations=3)[1][0]
    return F.slice_axis(grown, axis=0, begin=0, end=4)


def _grown_foreach(F, x):
    """A foreach whose state doubles its rows, sliced back to x's rows."""
    grown = gluon_cf.foreach(lambda d, s: (d, F.concat(s, s, dim=0)), x, x)[1]
    return F.slice_axis(grown, axis=0, begin=0, end=4)


class _CondOverGrowth(gluon.HybridBlock):
    def __init__(self, grow):
        super().__init__()
        self.grow = grow

    def hybrid_forward(self, F, x):
        return gluon_cf.cond(F.sum(x) > 0, lambda: x * 2, lambda: self.grow(F, x))


@pytest.mark.parametrize("grow", [_grown_while, _grown_foreach])
@pytest.mark.parametrize("record", [False, True])
def test_a_taken_branch_whose_nested_loop_changes_shape_raises_hybridized(grow, record):
    """The else branch's loop changes its variable's shape: shape inference refuses the
    branch; eagerly the loop runs, as MXNet's eager loops (NOTE [eager loop states may
    change]). Taken, the hybridized branch once ran the loop and returned its sliced values
    ([-1, -1, -1]); it raises the loop's error now, on every call taking it, while calls taking
    the then branch run as eagerly (the predicate flips)."""
    net = _CondOverGrowth(grow)
    net.hybridize(static_alloc=True)
    x = mx.nd.ones((4, 3))
    # (the oracle: MXNet's eager loop, its state doubled each step then sliced back: -x)
    double = lambda s: mx.nd.concat(s, s, dim=0)   # noqa: E731
    if grow is _grown_while:
        oracle = mx.nd.contrib.while_loop(lambda s: s.sum() > -100, lambda s: ([], [double(s)]),
                                          [-x], max_iterations=3)[1][0][:4]
    else:
        oracle = mx.nd.contrib.foreach(lambda d, s: (d, double(s)), -x, -x)[1][:4]
    np.testing.assert_array_equal(_CondOverGrowth(grow)(-x).asnumpy(), oracle.asnumpy())
    for sign in (1, -1, 1, -1):
        x = mx.nd.ones((4, 3)) * sign
        x.attach_grad()
        if sign < 0:
            with pytest.raises(ValueError, match=r"(?s)\(4, 3\).*\(8, 3\).*cannot be "
                                                 r"hybridized"):
                with autograd.record(record):
                    net(x).asnumpy()
            continue
        with autograd.record(record):
            y = net(x)
        np.testing.assert_array_equal(y.asnumpy(), x.asnumpy() * 2)
        if record:
            y.backward()
            np.testing.assert_array_equal(x.grad.asnumpy(), np.full((4, 3), 2, np.float32))


def test_a_symbol_executor_raises_the_refused_branchs_error_when_it_is_taken():
    sym = _CondOverGrowth(_grown_while)(mx.sym.var("x"))
    ex = sym.bind(mx.cpu(), {"x": mx.nd.ones((4, 3))})
    np.testing.assert_array_equal(ex.forward()[0].asnumpy(), np.full((4, 3), 2, np.float32))
    ex.arg_dict["x"][:] = -1
    with pytest.raises(ValueError, match="loop variable"):
        ex.forward()[0].asnumpy()
    ex.arg_dict["x"][:] = 1
    np.testing.assert_array_equal(ex.forward()[0].asnumpy(), np.full((4, 3), 2, np.float32))


class _DenseOrRefused(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, flatten=False)

    def hybrid_forward(self, F, x, w):
        return gluon_cf.cond(F.sum(x) > 0, lambda: self.dense(x), lambda: x - w)


def test_a_refused_branch_leaves_a_deferred_parameter_of_the_other_branch_initialised():
    """The else branch cannot run on x (4, 3) and w (3,); the then branch's Dense has a
    deferred weight. The else branch's inputs are all known, so its refusal is kept and the
    weight is inferred from the then branch (it failed: 'elemwise_sub refused its inputs');
    the values are the eager block's, and taking the else branch raises its error."""
    x, w = mx.nd.ones((4, 3)), mx.nd.ones(3)
    net = _DenseOrRefused()
    net.initialize(mx.init.Uniform(0.5))
    net.hybridize()
    got = net(x, w).asnumpy()
    assert net.dense.weight.shape == (3, 3)
    eager = _DenseOrRefused()
    eager.initialize()
    eager(x, w)
    eager.dense.weight.set_data(net.dense.weight.data())
    eager.dense.bias.set_data(net.dense.bias.data())
    np.testing.assert_allclose(got, eager(x, w).asnumpy(), rtol=1e-6)
    with pytest.raises(mx.MXNetError, match="refused its inputs"):
        net(-x, w).asnumpy()


S = mx.sym
_X, _H, _W, _I = (S.var(n) for n in "xhwi")
# programs whose nodes after the control flow are named by counters MXNet's ops also advance
COUNTED_NAMES = {
    "cond": lambda ops: ops.cond(S.sum(_H) > 0, lambda: _H * 2, lambda: _H),
    "cond_reading_outer_values": lambda ops: ops.cond(S.sum(_H) > 0, lambda: _W * 2,
                                                      lambda: _H * _W),
    "cond_in_foreach": lambda ops: ops.foreach(
        lambda d, s: (ops.cond(S.sum(d) > 0, lambda: d * s, lambda: d), s + 1), _X, _H),
    # (MXNet's foreach copies a state that is also an output through an identity)
    "foreach_state_is_the_output": lambda ops: ops.foreach(
        lambda d, s: (lambda h: (h, h))(S.tanh(d + s)), _X, _H),
    "foreach_outputs_of_one_split": lambda ops: ops.foreach(
        lambda d, s: (lambda parts: (parts[0], parts[1]))(S.split(S.concat(d, s, dim=0),
                                                                  num_outputs=2, axis=0)),
        _X, _H),
    "foreach_of_inputs_swapped": lambda ops: ops.foreach(lambda d, s: (s, d), _X, _H),
    "cond_in_while_loop": lambda ops: ops.while_loop(
        lambda i, s: i < 3, lambda i, s: (s, [i + 1, ops.cond(S.sum(s) > 1, lambda: s * _W,
                                                              lambda: s)]),
        [_I, _H], max_iterations=3),
}


def _flat(value):
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in _flat(item)]
    return [value]


@pytest.mark.parametrize("name", sorted(COUNTED_NAMES))
def test_nodes_made_after_a_cond_are_named_as_after_mxnets(name):
    """MXNet's cond copies its pred through an identity, and its foreach a state that is also
    an output, which gluon_cf's did not count: the user's ``identity`` after a cond was
    ``identity0`` where MXNet's is ``identity1``, so ``get_internals()["identity1_output"]``
    picked another node (or none)."""
    observed = []
    for ops in (mx.sym.contrib, gluon_cf):
        with mx.name.NameManager() as names:
            out = _flat(COUNTED_NAMES[name](ops))
            tail = S.identity(out[0]) * 2
            graph = S.Group(out + [tail])
            observed.append((dict(names._counter), graph.get_internals().list_outputs()))
    assert observed[0] == observed[1]


def test_an_array_given_for_a_branch_is_refused_eagerly_and_a_symbol_is_its_value():
    """``cond(p, x, lambda: x)`` (a forgotten lambda): eagerly 'then_func must be callable',
    as MXNet's eager cond fails calling an NDArray. Hybridized MXNet's cond calls the Symbol,
    a copy of itself: its value, which gluon_cf's gives too (gluon_cf called it and said 'two
    different outer values are both named 'data''; then refused it, a TypeError)."""
    class Net(gluon.HybridBlock):
        def __init__(self, op):
            super().__init__()
            self.op = op

        def hybrid_forward(self, F, x):
            return self.op(F.sum(x) > 0, x, lambda: x) * 2 + self.op(F.sum(x) < 0, x - 1, x + 1)

    with pytest.raises(TypeError, match=r"at %s:\d+: then_func must be callable, got "
                       r"NDArray; pass a function" % re.escape(__file__)):
        Net(gluon_cf.cond)(mx.nd.ones((2, 3)))
    for sign in (1, -1):
        outs = []
        for op in (mx.sym.contrib.cond, gluon_cf.cond):
            net = Net(op)
            net.hybridize()
            outs.append(net(mx.nd.ones((2, 3)) * sign).asnumpy())
        np.testing.assert_array_equal(outs[1], outs[0])


def test_exporting_a_cond_whose_branch_cannot_run_names_the_branchs_line():
    """Gluon runs the cond while its then branch is taken; ONNX's If holds both branches, so
    the export refuses, leading with the line of the branch that cannot run (it named only
    MXNet's node, 'c0__minus0')."""
    from gluon_cf.export import export_onnx

    class Net(gluon.HybridBlock):
        def hybrid_forward(self, F, x, w):
            return gluon_cf.cond(F.sum(x) > 0, lambda: x * 2,
                                 lambda: x - w)     # (4, 3) - (3,): a Symbol's - refuses

    net = Net()
    net.hybridize()
    example = [np.ones((4, 3), np.float32), np.ones(3, np.float32)]
    np.testing.assert_array_equal(net(*map(mx.nd.array, example)).asnumpy(), example[0] * 2)
    with pytest.raises(ValueError, match=r"^%s:\d+: export_onnx: MXNet cannot infer the "
                       r"model's shapes.*Incompatible attr" % re.escape(__file__)):
        export_onnx(net, example)
