"""Shared helpers for the control-flow tests: run modes, a configurable HybridBlock, a plain-Python
reference implementation of the three ops, result comparison and subprocess runs.

NOTE [three implementations of one model]
    A test model is a function ``fn(F, cf, net, p, *inputs)`` where ``cf`` provides ``cond``,
    ``foreach`` and ``while_loop``. The same function is run with ``cf = gluon_cf`` (under test, in
    every MODE), with ``cf = F.contrib`` (MXNet's own ops, eager only: the oracle MXNet ships) and
    with ``cf = PY`` (plain Python loops over NDArrays below: the reference semantics, written
    independently of gluon_cf). Forward values and gradients of all three are compared.
"""
import contextlib
import fcntl
import os
import signal
import subprocess
import tempfile
import sys
import threading
from types import SimpleNamespace

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

MODES = ("eager", "hybrid", "static")
RTOL, ATOL = 1e-5, 1e-6
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# NOTE [tests that run alone]
#     The suite runs on two pytest-xdist workers (setup.cfg's addopts: ``-n 2``): on this
#     project's 2-core machines that halves it (~900 s one worker). Some tests measure what
#     a second worker beside them changes: peak memory ratios in fresh processes (MXNet's
#     threaded engine holds more work in flight under load; a ratio once measured 0.72
#     against a bound of 0.7 beside another job), 2 GiB address-space runs, launch jobs
#     whose workers must print within a progress timeout. Those are ``alone`` (the files
#     and name parts below: a pure function of the test's node id, so that xdist's
#     controller, which collects nothing, can tell them too) and run with the other worker
#     idle: every test holds a run-wide lock shared, an ``alone`` test holds it
#     exclusively, from before its module's fixtures to after their teardown. A turnstile
#     taken before the lock keeps a waiting ``alone`` test from being starved by the other
#     worker's stream of shared holders. With ``-n 0`` (one process, no workers) the locks
#     are not taken.
#     The ``alone`` tests are one work unit, handed out first (``pytest_xdist_make_scheduler``):
#     until session 22 each ``alone`` file or test took the lock on its own, a dozen times a
#     run, and each time its worker first waited, idle, for the other's current test to end
#     (up to 40 s). Now the lock changes hands once or twice a run, and an ``alone`` test
#     followed by another keeps it. Fresh-clone runs on quiet machines: 16:01-17:12 of pytest
#     before (session 22), 12:19 after with ~330 more tests; the tests' summed time (setups
#     waiting for the lock included) fell from ~2,700 s to ~1,850 s under similar load from
#     other jobs (1,197 s quiet).
#     A file is ``alone`` when most of its tests measure; a file whose measuring tests are few
#     has them marked by name, and its other tests (values, gradients, reports) run shared:
#     test_foreach_memory.py's equality tests (~40 s under load) and test_bench_memory.py's
#     quick preset (fresh processes; it asserts only that memory grows somewhere) beside them.
#     The name parts say what a test measures: a run "in_a_fresh_process" alone is not a
#     measurement (an import or a run in a fresh process checking values), nor is a refused
#     "--timeout" argument; they ran alone, ~25 s of the other worker idle, until session 20.
#     Nor are test_no_crash.py's 2 GiB chains of max_depth (~64 s) and the launch jobs
#     (test_launch.py, ~60 s), alone until session 27: measured under a load of 4-7 (four
#     other jobs), each chain peaked 16-40% under its limit (VmPeak 1,227-1,713 MiB, as quiet)
#     and every launch test passed, twice; what is left of test_launch.py alone is the job
#     whose stall report needs its workers started within a 15 s progress timeout.
ALONE_FILES = ("test_eager_depth_memory.py", "test_artifact_limits.py", "test_bench_loops.py")
ALONE_NAME_PARTS = ("memory_in_a_fresh_process", "foreach_in_a_fresh_process", "peak_rss",
                    "wall_time", "test_timeout", "when_they_stall")
ALONE_UNIT = "tests that run alone"


def is_alone(nodeid):
    """Whether the test ``nodeid`` runs alone (NOTE [tests that run alone])."""
    path, _, name = nodeid.partition("::")
    return os.path.basename(path) in ALONE_FILES or any(part in name for part in ALONE_NAME_PARTS)


def pytest_configure(config):
    config.addinivalue_line("markers", "alone: run with no other test beside it "
                            "(NOTE [tests that run alone])")


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` (setup.cfg), except that the ``alone`` tests of every file are one
    work unit, handed out first (NOTE [tests that run alone])."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class AloneFirst(LoadFileScheduling):
        def _split_scope(self, nodeid):
            return ALONE_UNIT if is_alone(nodeid) else super()._split_scope(nodeid)

        def _assign_work_unit(self, node):
            if ALONE_UNIT in self.workqueue:
                self.workqueue.move_to_end(ALONE_UNIT, last=False)
            super()._assign_work_unit(node)
    return AloneFirst(config, log)


# The longest files first (quiet CI, session 20): ``--dist loadfile`` hands out files in
# collection order, so one of these started last kept one worker busy for a minute or two
# while the other had nothing left (longest first is the classic bound for such a schedule).
# pytest-xdist 3.8 reorders loadfile's files by their number of tests unless given
# ``--no-loadscope-reorder``, so this order does not take effect now: two CI runs with that
# flag took 15:14 (loaded) and 17:12 (quiet) against 14:11 without it, so it stays off until
# measured properly (the time a worker waits for the other's ``alone`` tests dominates).
# Only the order of whole files changes; each still runs on one worker, its tests in order.
FIRST_FILES = ("test_recursion_hostile2.py", "test_recursion.py", "test_remat_escapes.py",
               "test_autograph_programs.py", "test_hostile_round16.py", "test_autograph.py",
               "test_export_cli.py", "test_hostile_export7.py", "test_call_history.py",
               "test_autograph_hostile.py", "test_notebooks.py", "test_export_recursive_onnx.py")


def pytest_collection_modifyitems(items):
    for item in items:
        if is_alone(item.nodeid):
            item.add_marker(pytest.mark.alone)
    rank = {name: k for k, name in enumerate(FIRST_FILES)}
    items.sort(key=lambda item: rank.get(os.path.basename(str(item.fspath)), len(rank)))


class _RunLock:
    """One run's lock shared by its xdist workers (NOTE [tests that run alone])."""
    held = None   # None, or whether this worker holds it exclusively

    def __init__(self):
        run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
        self.active = run is not None and os.environ.get("PYTEST_XDIST_WORKER") is not None
        if self.active:
            base = os.path.join(tempfile.gettempdir(), "gluon_cf_tests_%s" % run)
            self.turnstile = open(base + ".turnstile", "a")
            self.lock = open(base + ".lock", "a")

    def take(self, alone):
        if self.held is not None:
            if self.held == alone:
                return
            self.give()
        fcntl.flock(self.turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)
        self.held = alone

    def give(self):
        fcntl.flock(self.lock, fcntl.LOCK_UN)
        self.held = None


_RUN_LOCK = _RunLock()


def pytest_sessionfinish(session):
    """The run's lock files go with it (they were left in /tmp, two per run). Every worker
    opened them as it started, and an open file keeps its locks when its name goes."""
    if _RUN_LOCK.active:
        for kept in (_RUN_LOCK.turnstile, _RUN_LOCK.lock):
            try:
                os.unlink(kept.name)
            except FileNotFoundError:   # (the other worker's finish took it)
                pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Each test holds the run's lock from before its fixtures' setup (a module's fixtures
    are set up in its first test's) to after their teardown; an ``alone`` test followed by
    another keeps it for that one (NOTE [tests that run alone])."""
    if not _RUN_LOCK.active:
        yield
        return
    alone = is_alone(item.nodeid)
    _RUN_LOCK.take(alone=alone)
    try:
        yield
    finally:
        if not (alone and nextitem is not None and is_alone(nextitem.nodeid)):
            _RUN_LOCK.give()


@pytest.fixture(autouse=True)
def _drain_engine():
    """Errors raised inside MXNet's engine surface at the next sync point; keep them in their
    own test by syncing after each one."""
    yield
    try:
        mx.nd.waitall()
    except mx.MXNetError:
        pass


@pytest.fixture(autouse=True)
def _check_exported_models(monkeypatch):
    """Every model the suite exports -- standard ONNX (``make_onnx_model``) and artifacts
    (``artifact_save.convert``) -- must pass ``onnx.checker.check_model(full_check=True)`` and
    hold no initializer that nothing reads (checked here independently of the exporter's own
    pruning)."""
    import onnx
    from gluon_cf.export import artifact_save, onnx_export
    from gluon_cf.export.onnx_graph import model as onnx_model
    exported = []

    def watch(module, name):
        original = getattr(module, name)

        def watched(*args, **kwargs):
            model = original(*args, **kwargs)
            exported.append(model)
            return model
        monkeypatch.setattr(module, name, watched)
    watch(onnx_model, "make_onnx_model")
    watch(onnx_export, "make_onnx_model")
    watch(artifact_save, "convert")
    yield
    monkeypatch.undo()
    for model in exported:
        assert unused_initializers(model.graph) == [], \
            "an exported model holds initializers nothing reads"
        onnx.checker.check_model(model, full_check=True)


def unused_initializers(graph, where="main"):
    """``where:name`` of each initializer of ``graph`` or its subgraphs that no node, nested
    subgraph, output or input of its own graph reads."""
    def subgraphs(node):
        for attr in node.attribute:
            yield from ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)

    def read(g):
        names = {value.name for value in g.output} | {value.name for value in g.input}
        for node in g.node:
            names.update(node.input)
            for sub in subgraphs(node):
                names |= read(sub)
        return names
    names = read(graph)
    found = [f"{where}:{init.name}" for init in graph.initializer if init.name not in names]
    for node in graph.node:
        for sub in subgraphs(node):
            found += unused_initializers(sub, f"{where}/{node.name}")
    return found


def set_mode(net, mode):
    """Put ``net`` in one of MODES."""
    if mode == "hybrid":
        net.hybridize()
    elif mode == "static":
        net.hybridize(static_alloc=True, static_shape=True)
    elif mode != "eager":
        raise ValueError("unknown mode %r" % mode)


# ---------------------------------------------------------------------------------------------
# Structures (independent of gluon_cf._structure on purpose).

def flat(value):
    """Flat list of the arrays in a (nested) list/tuple structure; ``None`` counts as empty."""
    if value is None:
        return []
    if isinstance(value, (mx.nd.NDArray, mx.sym.Symbol, np.ndarray)):
        return [value]
    out = []
    for item in value:
        out.extend(flat(item))
    return out


def shape_of(value):
    """Structure of ``value`` with each array replaced by the string 'a' (lists stay lists)."""
    if isinstance(value, (mx.nd.NDArray, mx.sym.Symbol, np.ndarray)):
        return "a"
    return [shape_of(v) for v in value]


def regroup(values, like):
    values = list(values)

    def build(fmt):
        if fmt == "a":
            return values.pop(0)
        return [build(f) for f in fmt]
    return build(like)


# ---------------------------------------------------------------------------------------------
# The reference semantics: plain Python loops over NDArrays (autograd records them as usual).

class _PythonControlFlow:
    """``cond``/``foreach``/``while_loop`` as the documented Python semantics."""

    @staticmethod
    def cond(pred, then_func, else_func):
        return then_func() if bool(pred.asscalar()) else else_func()

    @staticmethod
    def foreach(body, data, init_states):
        arrays, fmt = flat(data), shape_of(data)
        states, steps = init_states, []
        for t in range(arrays[0].shape[0]):
            out, states = body(regroup([a[t] for a in arrays], fmt), states)
            steps.append(out)
        columns = zip(*[flat(o) for o in steps])
        stacked = [mx.nd.stack(*c, axis=0) for c in columns]
        return regroup(stacked, shape_of(steps[0]) if steps[0] is not None else []), states

    @staticmethod
    def while_loop(cond, func, loop_vars, max_iterations=None):
        single = isinstance(loop_vars, mx.nd.NDArray)
        loop_vars = [loop_vars] if single else list(loop_vars)
        steps = []
        while (max_iterations is None or len(steps) < max_iterations) and \
                bool(cond(*loop_vars).asscalar()):
            out, new = func(*loop_vars)
            steps.append([] if out is None else out)
            loop_vars = [new] if isinstance(new, mx.nd.NDArray) else list(new)
        if not steps:  # zero steps, as hybridized (eagerly gluon_cf returns MXNet's []):
            # the reference may learn the step outputs' shapes from one untracked call
            with autograd.pause():
                probe = func(*loop_vars)[0]
            probe = [] if probe is None else probe
            rows = max_iterations or 0
            zeros = [mx.nd.zeros((rows,) + o.shape, dtype=o.dtype) for o in flat(probe)]
            return regroup(zeros, shape_of(probe)), loop_vars[0] if single else loop_vars
        stacked = []
        for column in zip(*[flat(s) for s in steps]):
            value = mx.nd.stack(*column, axis=0)
            pad = (max_iterations or 0) - len(column)
            if pad:
                value = mx.nd.concat(value, mx.nd.zeros((pad,) + column[0].shape,
                                                       dtype=value.dtype), dim=0)
            stacked.append(value)
        return regroup(stacked, shape_of(steps[0])), loop_vars[0] if single else loop_vars


PY = _PythonControlFlow()


def control_flow(impl, F):
    """The ``cf`` namespace for implementation ``impl`` in 'ours', 'mxnet', 'python'."""
    if impl == "ours":
        import gluon_cf
        return gluon_cf
    if impl == "mxnet":
        return F.contrib
    if impl == "python":
        return PY
    raise ValueError(impl)


# ---------------------------------------------------------------------------------------------
# A configurable model.

class Block(gluon.HybridBlock):
    """A HybridBlock whose ``hybrid_forward`` is ``fn(F, *inputs)``."""

    def __init__(self, fn):
        super().__init__()
        self._fn = fn

    def hybrid_forward(self, F, *inputs):
        return self._fn(F, *inputs)


class Model(gluon.HybridBlock):
    """``hybrid_forward`` is ``fn(F, cf, self, p, *inputs)``.

    ``children``: ``{name: factory}`` of child blocks (``self.<name>``); ``params``:
    ``{name: shape}`` of direct parameters, handed to ``fn`` as attributes of ``p`` (NDArrays or
    Symbols like any hybrid_forward argument).
    """

    def __init__(self, fn, impl="ours", children=None, params=None):
        super().__init__()
        self._fn, self.impl = fn, impl
        with self.name_scope():
            for name, factory in (children or {}).items():
                setattr(self, name, factory())
            for name, shape in (params or {}).items():
                setattr(self, name, self.params.get(name, shape=shape))

    def hybrid_forward(self, F, *inputs, **params):
        return self._fn(F, control_flow(self.impl, F), self, SimpleNamespace(**params), *inputs)


def make_model(fn, impl="ours", children=None, params=None, seed=0, init=True):
    """A Model with deterministic initial values: the same ``seed`` gives the same weights."""
    net = Model(fn, impl, children, params)
    if init:
        mx.random.seed(seed)
        net.initialize(mx.init.Uniform(0.5))
    return net


def copy_params(dst, src):
    for p_dst, p_src in zip(dst.collect_params().values(), src.collect_params().values()):
        p_dst.set_data(p_src.data())


def head_grads(outputs, seed=7):
    """Fixed random head gradients, one per output array (by shape)."""
    rng = np.random.RandomState(seed)
    return [mx.nd.array(rng.uniform(-1, 1, size=o.shape), dtype=o.dtype) for o in outputs]


def recorded(array):
    """Whether autograd recorded ``array`` (constant outputs, e.g. of a loop that ran no step,
    are not)."""
    try:
        autograd.get_symbol(array)
        return True
    except mx.MXNetError:
        return False


def run(net, inputs, grad=True, heads=None):
    """Forward (and backward with fixed head gradients) of ``net`` on numpy ``inputs``.

    Returns ``SimpleNamespace(out, flat, grads, param_grads)`` with numpy values: ``out`` the
    nested outputs, ``flat`` the flat outputs, ``grads`` of the float inputs (None for others),
    ``param_grads`` in ``collect_params()`` order.
    """
    arrays = [mx.nd.array(x, dtype=x.dtype) for x in inputs]
    if grad and net._reg_params is not None:
        # A parameter the recorded graph does not use keeps its old gradient in eager Gluon.
        for p in net.collect_params().values():
            if p._data is not None and p.grad_req != "null":
                p.zero_grad()
    floats = [np.issubdtype(x.dtype, np.floating) for x in inputs]
    for a, is_float in zip(arrays, floats):
        if is_float and grad:
            a.attach_grad()
    with autograd.record(train_mode=grad):
        out = net(*arrays)
    outputs = flat(out)
    if grad:
        hg = heads(outputs) if heads else head_grads(outputs)
        keep = [(o, g) for o, g in zip(outputs, hg)
                if np.issubdtype(o.dtype, np.floating) and recorded(o)]
        if keep:
            autograd.backward([o for o, _ in keep], [g for _, g in keep])
    to_np = lambda v: regroup([a.asnumpy() for a in flat(v)], shape_of(v))  # noqa: E731
    return SimpleNamespace(
        out=to_np(out) if outputs else out, flat=[o.asnumpy() for o in outputs],
        grads=[a.grad.asnumpy() if grad and f else None for a, f in zip(arrays, floats)],
        param_grads=[p.grad().asnumpy() for p in net.collect_params().values()
                     if grad and p.grad_req != "null"])


def assert_close(actual, expected, what="", rtol=RTOL, atol=ATOL):
    actual, expected = flat(actual), flat(expected)
    assert len(actual) == len(expected), "%s: %d arrays vs %d" % (what, len(actual),
                                                                  len(expected))
    for i, (a, e) in enumerate(zip(actual, expected)):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape, "%s[%d]: shape %s vs %s" % (what, i, a.shape, e.shape)
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg="%s[%d]" % (what, i))


def assert_same_results(actual, expected, what="", outputs=True):
    if outputs:
        assert_close(actual.flat, expected.flat, what + " outputs")
    assert_close([g for g in actual.grads if g is not None],
                 [g for g in expected.grads if g is not None], what + " input grads")
    assert_close(actual.param_grads, expected.param_grads, what + " param grads")


# ---------------------------------------------------------------------------------------------
# Subprocesses: for anything that might crash or hang the interpreter.

# Code for a subprocess (after ``D, I, H, O`` and the imports of np, mx, nd and
# TopDownTreeLSTM): a TopDownTreeLSTM ``net`` that grows a chain of D levels from ``z``, every
# left child growing and no right child. The sides' inputs are opposite and dominate the gates
# (the forget gate is nearly shut), so a left child's h points along u and a right child's
# against it; the root's h is tanh(u). No braces: templates that hold it are str.format-ted.
TOPDOWN_CHAIN = """
    net = TopDownTreeLSTM(input_size=I, hidden_size=H, output_size=O, max_depth=D)
    mx.random.seed(7)
    net.initialize(mx.init.Xavier())
    cell, rng = net.cell, np.random.RandomState(0)
    u = rng.normal(size=(1, H))
    cell.left_child.input.set_data(nd.array(2 * u))
    cell.right_child.input.set_data(nd.array(-2 * u))
    cell.lstm.i2h_weight.set_data(nd.array(2 * np.tile(np.eye(H), (4, 1))
                                           + 0.1 * rng.normal(size=(4 * H, H))))
    cell.lstm.h2h_weight.set_data(nd.array(0.3 * rng.normal(size=(4 * H, H))))
    cell.lstm.i2h_bias.set_data(nd.array(0.2 * rng.normal(size=4 * H)))
    cell.lstm.h2h_bias.set_data(nd.array(np.repeat([0.0, -6.0, 0.0, 0.0], H)))
    cell.expand_logit.weight.set_data(nd.array(u))
    cell.expand_logit.bias.set_data(nd.zeros((1,)))
    net.init.weight.set_data(0.1 * nd.array(rng.normal(size=(H, I))))
    net.init.bias.set_data(nd.array(u[0]))
    z = nd.array(rng.normal(size=(1, I)))
    # its parameters in float64 (by name after the model's prefix), for a numpy oracle
    p = dict((k[len(net.prefix):], v.data().asnumpy().astype(np.float64))
             for k, v in net.collect_params().items())
    Wi, bi = p["cell_lstm_i2h_weight"], p["cell_lstm_i2h_bias"]
    Wh, bh = p["cell_lstm_h2h_weight"], p["cell_lstm_h2h_bias"]
    We, be = p["cell_expand_weight"], p["cell_expand_bias"]
    Wo, bo = p["cell_output_weight"], p["cell_output_bias"]
    sides = (p["cell_left_input"][0], p["cell_right_input"][0])
    sig = lambda v: 1 / (1 + np.exp(-v))
"""


@contextlib.contextmanager
def _sigint_as_from_a_terminal():
    """Children started inside get SIGINT's default disposition (Python makes it the
    KeyboardInterrupt), as a program started from a terminal does, also where this run's
    SIGINT is ignored: POSIX has a non-interactive shell's background job ignore it, its
    children inherit that, and a test of Ctrl-C then saw no KeyboardInterrupt at all. A
    handler (unlike an ignored signal) is reset to the default at exec."""
    ignored = threading.current_thread() is threading.main_thread() and \
        signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_python(code, timeout=120, cwd=None, env=None):
    """Run ``code`` in a fresh interpreter (``env``: variables added to this environment),
    SIGINT as from a terminal; returns CompletedProcess (text), or None on timeout."""
    try:
        with _sigint_as_from_a_terminal():
            return subprocess.run([sys.executable, "-c", code], capture_output=True,
                                  text=True, timeout=timeout, cwd=cwd or REPO,
                                  env=dict(os.environ, **env) if env else None)
    except subprocess.TimeoutExpired:
        return None
