"""Round 30r (issue 24): recursion's leftovers. A recursive body changing a module's variable
(``import counts; counts.n += 1``): before, hybridized gave one trace's count for every call,
silently; now refused at the statement's line as other Python state is (NOTE [a module's
state]). Oracle: plain Python recursion (numpy)."""
import importlib
import sys
import textwrap
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import nd
from mxnet.gluon import HybridBlock, nn

import gluon_cf

LEFT, RIGHT = [1, 3, -1, -1, -1], [2, 4, -1, -1, -1]
XS = np.arange(15, dtype="float32").reshape(5, 3)
ARGS = [XS, np.array(LEFT, "float32"), np.array(RIGHT, "float32"), np.array([0], "float32")]
TOL = dict(rtol=1e-5, atol=1e-6)

MODULE = '''
n = 0
table = {"k": 0}
log = []


def bump():
    global n
    n += 1
    return n
'''


def counted(i, calls):
    """Plain recursion: x_i at a leaf, else node(l) + node(r) * (the count of calls so far)."""
    calls[0] += 1
    if LEFT[i] < 0:
        return XS[i:i + 1]
    left = counted(LEFT[i], calls)
    return left + counted(RIGHT[i], calls) * calls[0]


@pytest.fixture(scope="module")
def counts(tmp_path_factory):
    where = tmp_path_factory.mktemp("r30r")
    (where / "counts_r30r.py").write_text(textwrap.dedent(MODULE))
    sys.path.insert(0, str(where))
    try:
        yield importlib.import_module("counts_r30r")
    finally:
        sys.path.remove(str(where))
        sys.modules.pop("counts_r30r", None)


def _programs(counts):
    class Attr(HybridBlock):
        def hybrid_forward(self, F, x, left, right, root):
            counts.n = 0

            @gluon_cf.recursive
            def node(i):
                counts.n += 1   # (statement)
                return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                    F.take(left, i)) + node(F.take(right, i)) * counts.n)
            return node(root)

    class Item(HybridBlock):
        def hybrid_forward(self, F, x, left, right, root):
            counts.table["k"] = 0

            @gluon_cf.recursive
            def node(i):
                counts.table["k"] += 1   # (statement)
                return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                    F.take(left, i)) + node(F.take(right, i)) * counts.table["k"])
            return node(root)

    class Helper(HybridBlock):
        def hybrid_forward(self, F, x, left, right, root):
            counts.n = 0

            @gluon_cf.recursive
            def node(i):
                k = counts.bump()   # (statement)
                return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                    F.take(left, i)) + node(F.take(right, i)) * counts.n + k * 0)
            return node(root)

    class Imported(HybridBlock):
        def hybrid_forward(self, F, x, left, right, root):
            counts.n = 0

            @gluon_cf.recursive
            def node(i):
                import counts_r30r
                counts_r30r.n += 1   # (statement)
                return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                    F.take(left, i)) + node(F.take(right, i)) * counts_r30r.n)
            return node(root)

    class Log(HybridBlock):
        def hybrid_forward(self, F, x, left, right, root):
            @gluon_cf.recursive
            def node(i):
                counts.log.append(1)   # (statement)
                return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                    F.take(left, i)) + node(F.take(right, i)) * 2)
            return node(root)
    return Attr, Item, Helper, Imported, Log


def _statement_lines():
    import inspect
    lines, first = inspect.getsourcelines(_programs)
    return {first + k for k, line in enumerate(lines) if "# (statement)" in line}


@pytest.mark.parametrize("which", range(4))
def test_module_state_the_value_reads_is_refused_at_its_line(counts, which):
    cls = _programs(counts)[which]
    want = counted(0, [0])
    np.testing.assert_allclose(want, [[87, 97, 107]])
    net = cls()
    for _ in range(2):   # (eagerly, per call: the state is reset by the block)
        np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want,
                                   rtol=1e-5, atol=1e-6)
    net.hybridize()
    with pytest.raises(NotImplementedError) as err:
        net(*map(nd.array, ARGS))
    where, rest = str(err.value).split(": ", 1)
    path, line = where.rsplit(":", 1)
    if cls.__name__ == "Helper":   # (the helper's ``n += 1``, in the module)
        assert (path, line) == (counts.__file__, "9"), str(err.value)
    else:
        assert path == __file__ and int(line) in _statement_lines(), str(err.value)
    assert "changes Python state (" in rest and "that its value depends on" in rest, rest


def test_module_state_the_value_does_not_read_is_a_warning(counts):
    net = _programs(counts)[4]()
    want = (XS[3] + XS[4] * 2) + XS[2] * 2
    np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy()[0], want)
    net.hybridize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy()[0], want)
    mine = [w for w in caught if "changes Python state (counts.log)" in str(w.message)]
    assert len(mine) == 1 and mine[0].lineno in _statement_lines(), [
        str(w.message) for w in caught]


# ---- two traces, one graph: only MXNet's numbering is ignored (NOTE [two traces, one graph])

class PickLayer(HybridBlock):
    """The body picks a child layer by a call counter: dense0 or dense1, whose names differ
    only in a digit."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.a = nn.Dense(3, in_units=3, weight_initializer=mx.init.Constant(0.5))
            self.b = nn.Dense(3, in_units=3, weight_initializer=mx.init.Constant(-1.0))

    def hybrid_forward(self, F, x, left, right, root):
        self.calls = 0
        layers = [self.a, self.b]

        @gluon_cf.recursive
        def node(i):
            self.calls += 1   # (picks)
            layer = layers[self.calls % 2]
            return gluon_cf.cond(F.take(left, i) < 0, lambda: layer(F.take(x, i)), lambda: node(
                F.take(left, i)) + node(F.take(right, i)))
        return node(root)


class LogOnly(HybridBlock):
    """A log the value does not read; the body's cond captures values the body computed
    (nested graphs' variables named by MXNet's numbering), runs a foreach and a while_loop."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.d = nn.Dense(3, in_units=3, weight_initializer=mx.init.Constant(0.1))
        self.log = []

    def hybrid_forward(self, F, x, left, right, root):
        @gluon_cf.recursive
        def node(i):
            self.log.append(1)
            v = self.d(F.take(x, i)) * 2

            def leaf():
                out, _ = gluon_cf.foreach(lambda d, s: (d + s[0], [s[0] + d]),
                                          F.expand_dims(v, 0), [F.zeros_like(v)])
                return F.sum(out, axis=0) + v

            def inner():
                _, (c,) = gluon_cf.while_loop(lambda c: F.sum(c) < 3, lambda c: (None, [c + 1]),
                                              [F.zeros((1,))], max_iterations=5)
                return F.broadcast_add(node(F.take(left, i)) + node(F.take(right, i)) * v, c)
            return gluon_cf.cond(F.take(left, i) < 0, leaf, inner)
        return node(root)


def _dense(i):
    return XS[i:i + 1].sum() * 0.1 + np.zeros((1, 3), "float32")


def _log_only(i):
    v = _dense(i) * 2
    if LEFT[i] < 0:
        return v * 2
    return _log_only(LEFT[i]) + _log_only(RIGHT[i]) * v + 3


def test_a_layer_picked_by_state_is_refused_not_one_layer_for_every_call():
    picks = [0]

    def plain(i):   # (leaf i: layers[count % 2], a (0.5) or b (-1.0))
        picks[0] += 1
        weight = [0.5, -1.0][picks[0] % 2]
        if LEFT[i] < 0:
            return XS[i:i + 1].sum() * weight + np.zeros((1, 3))
        return plain(LEFT[i]) + plain(RIGHT[i])
    net = PickLayer()
    net.initialize()
    want = plain(0)
    np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want, rtol=1e-5, atol=1e-6)
    net.hybridize()
    with pytest.raises(NotImplementedError) as err:
        net(*map(nd.array, ARGS))
    assert str(err.value).startswith("%s:%d: " % (__file__, _line("(picks)"))), str(err.value)


def test_a_log_with_nested_graphs_is_one_graph_a_warning():
    want = _log_only(0)
    for hybrid in (False, True):
        net = LogOnly()
        net.initialize()
        if hybrid:
            net.hybridize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):
                np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want,
                                           rtol=1e-5, atol=1e-6)
        mine = [w for w in caught if "changes Python state (self.log)" in str(w.message)]
        assert len(mine) == hybrid, [str(w.message) for w in caught]


def _line(marker):
    import inspect
    lines, first = inspect.getsourcelines(sys.modules[__name__])
    return next(k + 1 for k, line in enumerate(lines) if "# " + marker in line)


class InnerHelper(HybridBlock):
    """A body defining its own recursive helper (made anew by each trace), and a log; or,
    ``pick``: a helper picked by a call counter among two made by a factory before."""

    def __init__(self, pick=False):
        super().__init__()
        self.log, self.pick, self.calls = [], pick, 0

    def hybrid_forward(self, F, x, left, right, root):
        def make(scale):
            @gluon_cf.recursive
            def countdown(k, v):
                return gluon_cf.cond(k <= 0, lambda: v, lambda: countdown(k - 1, v * scale))
            return countdown
        helpers = [make(0.5), make(2.0)]
        self.calls = 0

        @gluon_cf.recursive
        def node(i):
            self.log.append(1)   # (helper)
            self.calls += 1
            helper = helpers[self.calls % 2] if self.pick else make(0.5)
            return gluon_cf.cond(F.take(left, i) < 0,
                                 lambda: helper(F.ones((1,)) * 2, F.take(x, i)),
                                 lambda: node(F.take(left, i)) + node(F.take(right, i)))
        return node(root)


def test_a_helper_the_body_defines_is_one_graph_a_picked_one_is_refused():
    want = (XS[2] + XS[3] + XS[4]) * 0.25
    net = InnerHelper()
    net.hybridize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy()[0], want, **TOL)
    assert any("changes Python state (self.calls, self.log)" in str(w.message) for w in caught)
    picked = InnerHelper(pick=True)
    eager = picked(*map(nd.array, ARGS)).asnumpy()[0]   # (calls 3, 5 odd: 2.0; 4: 0.5)
    np.testing.assert_allclose(eager, (XS[2] + XS[3]) * 4 + XS[4] * 0.25, **TOL)
    picked.hybridize()
    with pytest.raises(NotImplementedError, match="changes Python state"):
        picked(*map(nd.array, ARGS))
