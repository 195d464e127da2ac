"""Issue 24, autograph's remainder: side effects on Python state inside a tensor if or loop,
reached through helpers in other modules, methods of other objects and ``print`` (NOTE
[autograph calls]); each is converted, refused at its line, or (print) warns once naming its
line, never silently run once while tracing. Every block is checked against plain Python on
NDArrays (the unconverted function), values and gradients, eager and hybridized."""
import functools
import json
import logging
import re
import sys
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

import autograph_helpers as helpers
import gluon_cf
from gluon_cf import AutographError
from gluon_cf.autograph import AutographWarning

from test_autograph import compare_with_plain

HERE = __file__
HELPERS = helpers.__file__


def line_in(path, text):
    lines = open(path).read().splitlines()
    return next(i for i, line in enumerate(lines) if line.strip() == text) + 1


class CallsCounterElsewhere(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        while i < 3:
            x = helpers.count_calls(x)
            i = i + 1
        return x


class RemembersElsewhere(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            x = helpers.remember(x)
        return x


class OtherObjectsMethod(gluon.HybridBlock):
    """Once silently wrong through a method of another object (not self)."""

    def __init__(self):
        super().__init__()
        self.counter = helpers.Counter()

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        for row in x:
            x = self.counter.step(x)
        return x


class FactoryClosure(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        self.step = helpers.make_step()

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        while i < 2:
            x = self.step(x)
            i = i + 1
        return x


class CountsThroughPartial(gluon.HybridBlock):
    """A side effect through functools.partial (it was run once, while tracing)."""

    def __init__(self):
        super().__init__()
        self.step = functools.partial(helpers.count_calls)

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        while 3 > i:
            x = self.step(x)
            i = i + 1
        return x


class CountsThroughDecorator(gluon.HybridBlock):
    """A side effect in a function wrapped by the user's decorator (functools.wraps)."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        while i <= 2:
            x = helpers.traced_count(x)
            i = i + 1
        return x


class CountsThroughCallableObject(gluon.HybridBlock):
    """A side effect in the __call__ of a user object."""

    def __init__(self):
        super().__init__()
        self.score = helpers.CountingScorer()

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        for item in x:
            x = self.score(x)
        return x


class NotesThroughLambda(gluon.HybridBlock):
    """A side effect in a lambda of another module."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) >= 0:
            x = helpers.noted(x)
        return x


@pytest.mark.parametrize("model, args, line, header, message", [
    (CallsCounterElsewhere, [[1, 2]], (HELPERS, "CALLS[0] = CALLS[0] + 1"), "while i < 3:",
     "this statement assigns CALLS[0], inside the while loop on a tensor at"),
    (RemembersElsewhere, [[1, 2]], (HELPERS, "SEEN.append(h)"), "if F.sum(x) > 0:",
     "this statement changes a Python list (.append), inside the if on a tensor at"),
    (OtherObjectsMethod, [np.ones((2, 2))], (HELPERS, "self.k = self.k + 1"), "for row in x:",
     "this statement assigns self.k, inside the for loop on a tensor at"),
    (FactoryClosure, [[1, 2]], (HELPERS, "total[0] = total[0] + 1"), "while i < 2:",
     "this statement assigns total[0], inside the while loop on a tensor at"),
    (CountsThroughPartial, [[1, 2]], (HELPERS, "CALLS[0] = CALLS[0] + 1"), "while 3 > i:",
     "this statement assigns CALLS[0], inside the while loop on a tensor at"),
    (CountsThroughDecorator, [[1, 2]], (HELPERS, "CALLS[0] = CALLS[0] + 2"), "while i <= 2:",
     "this statement assigns CALLS[0], inside the while loop on a tensor at"),
    (CountsThroughCallableObject, [np.ones((2, 2))],
     (HELPERS, "self.calls = self.calls + 1"), "for item in x:",
     "this statement assigns self.calls, inside the for loop on a tensor at"),
    (NotesThroughLambda, [[1, 2]], (HELPERS, "noted = lambda h: SEEN.append(h) or h * 2"),
     "if F.sum(x) >= 0:",
     "this statement changes a Python list (.append), inside the if on a tensor at"),
], ids=lambda v: getattr(v, "__name__", None))
def test_side_effects_elsewhere_are_refused_at_their_line(model, args, line, header, message):
    """Eagerly the converted block equals plain Python; hybridized (where the loop or if runs
    once, while tracing) it is an AutographError naming the helper's line and the region's."""
    inputs = [mx.nd.array(a) for a in args]
    helpers.reset()
    want = type(model()).hybrid_forward.__wrapped__(model(), mx.nd, *inputs).asnumpy()
    helpers.reset()
    np.testing.assert_allclose(model()(*inputs).asnumpy(), want)
    net = model()
    net.hybridize()
    path, text = line
    region = f"{HERE}:{line_in(HERE, header)} ({header})"
    with pytest.raises(AutographError, match=re.escape(
            f"{path}:{line_in(path, text)}: {text}: {message} {region}; that ")):
        net(*inputs)


class GateElsewhere(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        self.counter = helpers.Counter()

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        y = helpers.gate(x)
        return self.counter.scale(helpers.gate(y * -1))


@pytest.mark.parametrize("args", [[[1.0, 2.0]], [[-1.0, 0.5]], [[-3.0, -1.0]]])
def test_helpers_elsewhere_are_converted(args):
    """A tensor if in a helper of another module converts (it was Python on a Symbol)."""
    compare_with_plain(GateElsewhere, args)
    assert "__ag__.if_stmt" in helpers.gate.__gluon_cf_autograph_converted__ \
        .__gluon_cf_autograph_code__


def test_library_code_runs_as_it_is():
    from gluon_cf.autograph.impl.conversion import converted
    for library in (np.exp, json.dumps, mx.nd.relu, gluon_cf.cond, re.sub, abs):
        assert converted(library) is library
    net = gluon.nn.Dense(2)
    assert converted(net) is net
    assert converted(net.forward).__func__ is gluon.nn.Dense.forward


class PrintsInLoop(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        while i < 3:
            print("step", i)
            x = x * 2
            i = i + 1
        print("done")
        return x


def test_print_in_a_tensor_loop_warns_once_naming_its_line(capsys):
    x = mx.nd.array([1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutographWarning)
        np.testing.assert_allclose(PrintsInLoop()(x).asnumpy(), [8, 16])   # eager: no warning
    assert capsys.readouterr().out.count("step") == 3
    net = PrintsInLoop()
    net.hybridize()
    line = line_in(HERE, 'print("step", i)')
    with pytest.warns(AutographWarning, match=re.escape(
            f"{HERE}:{line}: print(\"step\", i): this print is inside the while loop on a "
            f"tensor at {HERE}:{line - 1} (while i < 3:), which runs as one graph, traced "
            f"once: it prints once")) as record:
        np.testing.assert_allclose(net(x).asnumpy(), [8, 16])
    assert len([w for w in record if issubclass(w.category, AutographWarning)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutographWarning)
        net(x * 2)                       # a new shape traces again: no second warning


def test_a_notebook_cells_helper_is_user_code():
    """A function compiled from a notebook cell (``<ipython-input-...>``, its source in
    linecache) is converted, as when it was in the converted function's own module."""
    import linecache
    from gluon_cf.autograph.impl.conversion import converted
    source = "def cell_helper(v):\n    if v.sum() > 0:\n        return v * 2\n    return v - 1\n"
    name = "<ipython-input-7-autograph>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    namespace = {}
    exec(compile(source, name, "exec"), namespace)
    helper = namespace["cell_helper"]
    assert "__ag__.if_return" in converted(helper).__gluon_cf_autograph_code__


class GatesThroughPartialsDecoratorsAndLambdas(gluon.HybridBlock):
    """Tensor ifs in helpers reached through functools.partial (of a function and of a
    partial), a user's decorator and a lambda of another module: all converted."""

    def __init__(self):
        super().__init__()
        self.gate = functools.partial(functools.partial(helpers.gate_by), c=0.5)

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        y = self.gate(x) + helpers.traced_gate(x * -1)
        return helpers.scaled(y) + functools.partial(helpers.gate_by, x)(-1.0)


@pytest.mark.parametrize("args", [[[1.0, 2.0]], [[-1.0, 0.5]], [[-3.0, -1.0]], [[0.2, 0.1]]])
def test_partials_decorated_helpers_and_lambdas_are_converted(args):
    compare_with_plain(GatesThroughPartialsDecoratorsAndLambdas, args)
    from gluon_cf.autograph.impl.conversion import converted
    assert "__ag__.if_exp" in converted(helpers.scaled).__gluon_cf_autograph_code__
    wrapper = converted(helpers.traced_gate)
    assert "__ag__.converted(fn)" in wrapper.__gluon_cf_autograph_code__


class CallsGenerated(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        while i < 2:
            x = helpers.generated(x)
            i = i + 1
        return x


@pytest.mark.parametrize("hybridize", [False, True])
def test_a_helper_that_cannot_be_converted_is_refused_at_the_call(hybridize):
    """A user function whose conversion fails (here: compiled by exec, no source to read) is
    not run unconverted (its Python side effects would run once, while tracing): an
    AutographError naming the call's line and the function's, on every call."""
    net = CallsGenerated()
    if hybridize:
        net.hybridize()
    line = line_in(HERE, "x = helpers.generated(x)")
    for _ in range(2):
        with pytest.raises(AutographError, match=re.escape(
                f"{HERE}:{line}: x = helpers.generated(x): this calls 'generated' (defined at "
                f"<string>:1), user code that gluon_cf.autograph converts when called but "
                f"cannot convert: gluon_cf.autograph needs the source of 'generated'")):
            net(mx.nd.array([1.0, 2.0]))


class CallsDispatched(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        return helpers.dispatched(x) + 1


def test_a_library_decorator_is_run_eagerly_and_refused_hybridized():
    """functools.singledispatch wraps the user's function in library code: it runs as plain
    Python eagerly; hybridized, where its unconverted body would be traced, the call is an
    AutographError naming the call's line, the function and the decorator."""
    x = mx.nd.array([1.0, 2.0])
    np.testing.assert_allclose(CallsDispatched()(x).asnumpy(), [3, 5])
    net = CallsDispatched()
    net.hybridize()
    line = line_in(HERE, "return helpers.dispatched(x) + 1")
    with pytest.raises(AutographError, match=re.escape(
            f"{HERE}:{line}: return helpers.dispatched(x) + 1: this calls 'dispatched' "
            f"(defined at {HELPERS}:{line_in(HELPERS, 'def dispatched(h):') - 1}) through a "
            f"library's decorator (functools.singledispatch.<locals>.wrapper)")):
        net(x)


LOG = logging.getLogger("gluon_cf.tests.autograph_calls")


class LogsInLoop(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        while i < 2.5:
            LOG.info("step %s", i)
            logging.getLogger("gluon_cf.tests.autograph_calls").debug("again")
            sys.stderr.write("step\n")
            x = x * 2
            i = i + 1
        LOG.info("done")
        return x


def test_logging_and_writes_in_a_tensor_loop_warn_once_naming_their_lines(caplog):
    x = mx.nd.array([1.0, 2.0])
    caplog.set_level(logging.DEBUG, logger="gluon_cf.tests.autograph_calls")
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutographWarning)
        np.testing.assert_allclose(LogsInLoop()(x).asnumpy(), [8, 16])   # eager: no warning
    assert [r.getMessage() for r in caplog.records].count("again") == 3
    assert {r.pathname for r in caplog.records} == {HERE}     # the user's line, as unconverted
    net = LogsInLoop()
    net.hybridize()
    with pytest.warns(AutographWarning) as record:
        np.testing.assert_allclose(net(x).asnumpy(), [8, 16])
    messages = [str(w.message) for w in record if issubclass(w.category, AutographWarning)]
    region = f"inside the while loop on a tensor at {HERE}:{line_in(HERE, 'while i < 2.5:')} "
    for text, what in [('LOG.info("step %s", i)', "logging call"),
                       ('logging.getLogger("gluon_cf.tests.autograph_calls").debug("again")',
                        "logging call"),
                       ('sys.stderr.write("step\\n")', "write to a stream")]:
        assert f"{HERE}:{line_in(HERE, text)}: {text}: this {what} is {region}" in \
            "\n".join(messages), messages
    assert len(messages) == 3, messages
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutographWarning)
        net(x * 2)                       # a new shape traces again: no second warning


class ScoresWithAnObject(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        self.score = helpers.Scorer()

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        return self.score(x) + self.score(x * -1)


@pytest.mark.parametrize("args", [[[1.0, 2.0]], [[-1.0, 0.5]]])
def test_a_callable_object_of_a_user_class_is_converted(args):
    compare_with_plain(ScoresWithAnObject, args)
    assert "__gluon_cf_autograph_converted__" in helpers.Scorer.__call__.__dict__


class SumsGeneratedRows(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        total = F.zeros((2,))
        for row in helpers.doubled_rows(x):
            total = total + row
        return total


def test_a_generator_runs_eagerly_and_is_refused_hybridized():
    """A generator's body cannot be converted (yield): hybridized its for over x would see
    the whole Symbol once (MXNet's Symbol.__iter__), a silently different value."""
    x = mx.nd.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    np.testing.assert_allclose(SumsGeneratedRows()(x).asnumpy(), [18, 24])
    net = SumsGeneratedRows()
    net.hybridize()
    line = line_in(HERE, "for row in helpers.doubled_rows(x):")
    with pytest.raises(AutographError, match=re.escape(
            f"{HERE}:{line}: for row in helpers.doubled_rows(x): this calls 'doubled_rows' "
            f"(defined at {HELPERS}:{line_in(HELPERS, 'def doubled_rows(x):')}) a generator "
            f"function (yield: its body cannot be converted)")):
        net(x)


def test_code_installed_in_site_packages_is_library_code(tmp_path):
    """Installed code (a site-packages directory) runs as it is, as MXNet does, even if the
    user wrote it; the same file outside site-packages is user code, converted."""
    import importlib.util
    from gluon_cf.autograph.impl.conversion import converted
    source = "def gate(v):\n    if v.sum() > 0:\n        return v * 2\n    return v - 1\n"
    found = {}
    for folder in ("site-packages", "project"):
        path = tmp_path / folder / f"gate_{folder.replace('-', '_')}.py"
        path.parent.mkdir()
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found[folder] = module.gate
    assert converted(found["site-packages"]) is found["site-packages"]
    assert "__ag__.if_return" in converted(found["project"]).__gluon_cf_autograph_code__
