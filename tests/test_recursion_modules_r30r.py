"""Round 30r review: a recursive body changing a module's variable it reaches by a string
(``getattr(counts, "n")``, ``counts.__dict__["n"]``, ``vars(counts)``, ``sys.modules[...]``,
``importlib.import_module``) or by ``import pkg.sub as s`` while ``pkg`` is a global ran
hybridized with one trace's count for every call, silently; now refused as the attribute form
is (NOTE [a module's state]). Oracle: plain Python recursion (numpy)."""
import importlib
import sys
import textwrap

import numpy as np
import pytest
from mxnet import nd
from mxnet.gluon import HybridBlock

import gluon_cf

LEFT, RIGHT = [1, 3, -1, -1, -1], [2, 4, -1, -1, -1]
XS = np.arange(15, dtype="float32").reshape(5, 3)
ARGS = [XS, np.array(LEFT, "float32"), np.array(RIGHT, "float32"), np.array([0], "float32")]
NAME, PACKAGE = "modcounts_r30r", "modpkg_r30r"


def counted(i, calls):
    """Plain recursion: x_i at a leaf, else node(l) + node(r) * (the count at this call)."""
    calls[0] += 1
    k = calls[0]
    if LEFT[i] < 0:
        return XS[i:i + 1]
    return counted(LEFT[i], calls) + counted(RIGHT[i], calls) * k


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    where = tmp_path_factory.mktemp("r30r_modules")
    (where / (NAME + ".py")).write_text("n = 0\n")
    (where / PACKAGE).mkdir()
    (where / PACKAGE / "__init__.py").write_text("")
    (where / PACKAGE / "sub.py").write_text("n = 0\n")
    sys.path.insert(0, str(where))
    try:
        counts = importlib.import_module(NAME)
        globals()[PACKAGE] = importlib.import_module(PACKAGE + ".sub") and \
            sys.modules[PACKAGE]   # (the package a global, as ``import modpkg_r30r.sub``)
        yield counts, sys.modules[PACKAGE + ".sub"]
    finally:
        sys.path.remove(str(where))
        globals().pop(PACKAGE, None)
        for name in (NAME, PACKAGE, PACKAGE + ".sub"):
            sys.modules.pop(name, None)


def _bumps(counts, sub):
    """Ways of adding 1 to a module's count and reading it back (each its statement)."""
    def by_string():
        setattr(counts, "n", getattr(counts, "n") + 1)   # (statement)
        return getattr(counts, "n")

    def by_dict():
        counts.__dict__["n"] += 1   # (statement)
        return vars(counts)["n"]

    def by_sys_modules():
        mod = sys.modules["modcounts_r30r"]
        mod.n += 1   # (statement)
        return mod.n

    def by_importlib():
        mod = importlib.import_module("modcounts_r30r")
        mod.n += 1   # (statement)
        return mod.n

    def submodule_alias():
        import modpkg_r30r.sub as s
        s.n += 1   # (statement)
        return s.n

    def submodule():
        import modpkg_r30r.sub
        modpkg_r30r.sub.n += 1   # (statement)
        return modpkg_r30r.sub.n
    return by_string, by_dict, by_sys_modules, by_importlib, submodule_alias, submodule


class Counted(HybridBlock):
    """node(l) + node(r) * (the count after this call's bump), the count in a module."""

    def __init__(self, bump):
        super().__init__()
        self.bump = bump

    def hybrid_forward(self, F, x, left, right, root):
        for module in (sys.modules[NAME], sys.modules[PACKAGE + ".sub"]):
            setattr(module, "n", 0)   # (no name ``n`` read here: the bumps' own ways only)

        @gluon_cf.recursive
        def node(i):
            k = self.bump()
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.take(x, i), lambda: node(
                F.take(left, i)) + node(F.take(right, i)) * k)
        return node(root)


def _statement_lines():
    import inspect
    lines, first = inspect.getsourcelines(_bumps)
    return {first + k for k, line in enumerate(lines) if "# (statement)" in line}


@pytest.mark.parametrize("which", range(6))
def test_module_state_reached_by_a_string_or_a_submodule_is_refused(modules, which):
    want = counted(0, [0])
    np.testing.assert_allclose(want, [[39, 43, 47]])
    net = Counted(_bumps(*modules)[which])
    np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want, rtol=1e-5, atol=1e-6)
    net.hybridize()
    with pytest.raises(NotImplementedError) as err:
        net(*map(nd.array, ARGS))
    where, rest = str(err.value).split(": ", 1)
    path, line = where.rsplit(":", 1)
    assert path == __file__ and int(line) in _statement_lines(), str(err.value)
    assert "changes Python state (" in rest and "that its value depends on" in rest, rest


# ---- a recursive function the body calls reads the state the body changes (NOTE [two traces,
# one graph]): the body's own graph was the same, a warning, and one trace's helper for all

class HelperReads(HybridBlock):
    """A helper made before the body's trace reads the count the body changes."""

    def hybrid_forward(self, F, x, left, right, root):
        self.calls = 0

        @gluon_cf.recursive
        def scaled(k, v):
            return gluon_cf.cond(k <= 0, lambda: v * self.calls, lambda: scaled(k - 1, v))

        @gluon_cf.recursive
        def node(i):
            self.calls += 1   # (callee)
            return gluon_cf.cond(F.take(left, i) < 0, lambda: scaled(F.ones((1,)), F.take(x, i)),
                                 lambda: node(F.take(left, i)) + node(F.take(right, i)))
        return node(root)


class MadeInBody(HybridBlock):
    """A helper the body makes anew per trace, its scale picked by the count."""

    def hybrid_forward(self, F, x, left, right, root):
        self.calls = 0

        @gluon_cf.recursive
        def node(i):
            self.calls += 1   # (callee)
            scale = [0.5, 2.0][self.calls % 2]

            @gluon_cf.recursive
            def countdown(k, v):
                return gluon_cf.cond(k <= 0, lambda: v, lambda: countdown(k - 1, v * scale))
            return gluon_cf.cond(F.take(left, i) < 0,
                                 lambda: countdown(F.ones((1,)) * 2, F.take(x, i)),
                                 lambda: node(F.take(left, i)) + node(F.take(right, i)))
        return node(root)


@pytest.mark.parametrize("cls, factors", [(HelperReads, (3, 4, 5)), (MadeInBody, (4, .25, 4))],
                         ids=["HelperReads", "MadeInBody"])
def test_a_callee_reading_the_state_the_body_changes_is_refused(cls, factors):
    want = XS[3:4] * factors[0] + XS[4:5] * factors[1] + XS[2:3] * factors[2]   # (calls 3, 4, 5)
    net = cls()
    np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want, rtol=1e-5, atol=1e-6)
    net.hybridize()
    with pytest.raises(NotImplementedError) as err:
        net(*map(nd.array, ARGS))
    import inspect
    lines, first = inspect.getsourcelines(cls)
    line = first + next(k for k, text in enumerate(lines) if "# (callee)" in text)
    assert str(err.value).startswith("%s:%d: " % (__file__, line)), str(err.value)
    assert "changes Python state (self.calls) that its value depends on" in str(err.value)
