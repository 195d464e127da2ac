"""Round 30r (issue 24): recursion's leftovers. A recursive body changing a module's variable
(``import counts; counts.n += 1``): before, hybridized gave one trace's count for every call,
silently; now refused at the statement's line as other Python state is (NOTE [a module's
state]). Oracle: plain Python recursion (numpy)."""
import importlib
import sys
import textwrap
import warnings

import numpy as np
import pytest
from mxnet import nd
from mxnet.gluon import HybridBlock

import gluon_cf

LEFT, RIGHT = [1, 3, -1, -1, -1], [2, 4, -1, -1, -1]
XS = np.arange(15, dtype="float32").reshape(5, 3)
ARGS = [XS, np.array(LEFT, "float32"), np.array(RIGHT, "float32"), np.array([0], "float32")]

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
