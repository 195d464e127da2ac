"""Issue 24, a review of round 28's recursion (round 28r): Python state a recursive function's
body changes while hybridized (NOTE [Python state in a recursive body]). Values are compared with
plain eager Python recursion (numpy), eagerly and hybridized."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import nd
from mxnet.gluon import HybridBlock

import gluon_cf

LEFT, RIGHT = [1, 3, -1, -1, -1], [2, 4, -1, -1, -1]
XS = np.arange(15, dtype="float32").reshape(5, 3)
ARGS = [XS, np.array(LEFT, "float32"), np.array(RIGHT, "float32"), np.array([0], "float32")]
COUNT = 0


class SelfCounter(HybridBlock):
    """A call counter on the block, read by the value (the count of calls made so far)."""

    reads = True

    def hybrid_forward(self, F, x, left, right, root):
        self.calls = 0

        @gluon_cf.recursive
        def node(i):
            self.calls += 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * (self.calls if self.reads else 2))
        return node(root)


class ListCounter(HybridBlock):
    """The same counter in a closure's list."""

    def hybrid_forward(self, F, x, left, right, root):
        calls = [0]

        @gluon_cf.recursive
        def node(i):
            calls[0] += 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * calls[0])
        return node(root)


class GlobalCounter(HybridBlock):
    """The same counter in a global."""

    def hybrid_forward(self, F, x, left, right, root):
        global COUNT
        COUNT = 0

        @gluon_cf.recursive
        def node(i):
            global COUNT
            COUNT += 1
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * COUNT)
        return node(root)


class LoggingCounter(SelfCounter):
    """A counter for logging: the value does not read it."""

    reads = False


def counted(i, calls, scale=None):
    """Plain recursion: node(i) = x_i at a leaf, else node(l) + node(r) * (the count of calls
    so far, or ``scale``)."""
    calls[0] += 1
    if LEFT[i] < 0:
        return XS[i:i + 1]
    left = counted(LEFT[i], calls, scale)
    return left + counted(RIGHT[i], calls, scale) * (calls[0] if scale is None else scale)


def _line_of(cls, text):
    import inspect
    lines, first = inspect.getsourcelines(cls.hybrid_forward)
    return first + next(k for k, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("cls,statement", [(SelfCounter, "self.calls += 1"),
                                           (ListCounter, "calls[0] += 1"),
                                           (GlobalCounter, "COUNT += 1")])
def test_state_the_value_reads_is_refused_at_its_line(cls, statement):
    """Before: eagerly [[87, 97, 107]] (the count per call), hybridized [[45, 50, 55]] (the
    count of the body's last trace, a constant of its graph), silently. Now refused at the
    statement changing it, hybridized; eagerly the value stays plain Python's."""
    want = counted(0, [0])
    np.testing.assert_allclose(want, [[87, 97, 107]])
    net = cls()
    np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want)
    net.hybridize()
    with pytest.raises(NotImplementedError) as err:
        net(*map(nd.array, ARGS))
    where = "%s:%d: gluon_cf.recursive: 'node' changes Python state" % (
        __file__, _line_of(cls, statement))
    assert str(err.value).startswith(where), str(err.value)
    assert "that its value depends on" in str(err.value)


def test_state_the_value_does_not_read_is_a_warning_at_its_line():
    """A counter for logging: the graph is the same whatever its count, so the values are
    plain Python's; hybridized the count changes per trace, not per call: a warning at the
    statement, not a refusal."""
    net = LoggingCounter()
    want = counted(0, [0], scale=2)
    np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want)
    assert net.calls == 5
    net.hybridize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want)
    mine = [w for w in caught if "changes Python state (self.calls)" in str(w.message)]
    assert len(mine) == 1 and "once per trace" in str(mine[0].message)
    assert (mine[0].filename, mine[0].lineno) == (
        __file__, _line_of(LoggingCounter, "self.calls += 1"))


def test_a_model_with_layers_traces_without_a_warning():
    """Gluon's own state of a block (its children and parameters, registered at their first
    use in a trace) is no Python state of the body's: no warning, the values eager's."""
    class Layers(HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.dense = mx.gluon.nn.Dense(3, in_units=3)

        def hybrid_forward(self, F, x, left, right, root):
            @gluon_cf.recursive
            def node(i):
                return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: F.tanh(
                    self.dense(node(F.take(left, i)) + node(F.take(right, i)))))
            return node(root)
    net = Layers()
    net.initialize()
    want = net(*map(nd.array, ARGS)).asnumpy()
    net.hybridize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = net(*map(nd.array, ARGS)).asnumpy()
    assert not [w for w in caught if "Python state" in str(w.message)]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# A layer after a recursion whose result's width changes with the tree (NOTE [one shape per
# call]): its input size is known at run time only

class WidthsThenDense(HybridBlock):
    def __init__(self, in_units=0):
        super().__init__()
        with self.name_scope():
            self.out = mx.gluon.nn.Dense(2, in_units=in_units, flatten=False)

    def hybrid_forward(self, F, x, left, right, root):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: F.concat(
                node(F.take(left, i)), node(F.take(right, i)), dim=1) * 2)
        return self.out(node(root))


def test_a_deferred_layer_after_widths_known_at_run_time_says_what_to_give():
    """Before: "Deferred initialization failed because shape cannot be inferred." then
    MXNet's "Cannot decide shape for the following arguments", naming no cause, or, its
    warning once shown, "list index out of range" (MXNet read a warning it had not caught;
    a cond whose branches differ in size alike). Now the
    parameter, its shape known in part and what to give, at the user's call; given its input
    size, the layer runs as eagerly."""
    args = [nd.array(XS[:3]), nd.array([1, -1, -1]), nd.array([2, -1, -1]), nd.array([0])]
    net = WidthsThenDense()
    net.initialize()
    net.hybridize()
    with pytest.raises(ValueError) as err:
        net(*args)
    message = str(err.value)
    assert "%s:" % __file__ in message and "parameter '%s" % net.out.weight.name in message
    assert "(2, 0)" in message and "known only at run time" in message, message
    assert "in_units" in message
    for hybridize in (False, True):
        mx.random.seed(0)
        net = WidthsThenDense(in_units=6)
        net.initialize()
        if hybridize:
            net.hybridize()
        got = net(*args).asnumpy()
        w, b = net.out.weight.data().asnumpy(), net.out.bias.data().asnumpy()
        want = np.concatenate([XS[1:2], XS[2:3]], axis=1) * 2 @ w.T + b
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _symbolic_tree(widen):
    """node(i) = x_i at a leaf, else concat (``widen``) or sum of its children's, as a Symbol."""
    x, left, right, root = (mx.sym.var(n) for n in ("x", "left", "right", "root"))

    @gluon_cf.recursive
    def node(i):
        def internal():
            kids = node(mx.sym.take(left, i)), node(mx.sym.take(right, i))
            return mx.sym.concat(*kids, dim=1) * 2 if widen else kids[0] + kids[1]
        return gluon_cf.cond(mx.sym.take(left, i) < 0, lambda: mx.sym.take(x, i), internal)
    return node(root)


def test_widths_of_a_recursion_over_a_table_of_unknown_rows_stay_unknown():
    """Before: with x's rows unknown (x: (0, 3)), infer_shape_partial answered the leaf's
    (1, 3) for a recursion whose width changes with the tree (1, 6 a level up, ...: NOTE [one
    shape per call]), where x's rows given it answers (1, 0), known at run time only; a
    width that does not change is still known."""
    given = dict(left=(5,), right=(5,), root=(1,))
    for widen, want in ((True, [(1, 0)]), (False, [(1, 3)])):
        with mx.name.NameManager():
            sym = _symbolic_tree(widen)
        assert sym.infer_shape_partial(x=(5, 3), **given)[1] == want
        assert sym.infer_shape_partial(x=(0, 3), **given)[1] == want
