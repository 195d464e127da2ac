"""MXNet 1.9.1's own contrib ops as the oracle (session 22): a symbolic ``while_loop``'s input
order (NOTE [while_loop input order]), ``max_iterations`` read as MXNet reads it (NOTE
[max_iterations]), the exception types of a ``cond`` returning no predicate, where an error
says a node was made when two nodes share a name (NOTE [where a node was made]), failed
calls whose outputs are read later (NOTE [failed calls read later]), the structures ``cond``
and an eager ``while_loop`` of no step return. MXNet's symbolic ``while_loop`` runs forward
only (no backward, no shape inference): gluon_cf's backward by position is checked against
its bind by name, and hybridized gradients against its eager loop."""
import textwrap
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

import gluon_cf
from conftest import run_python

S = mx.sym
OPS = {"mxnet": mx.sym.contrib, "gluon_cf": gluon_cf}
A, B, C = S.var("a"), S.var("b"), S.var("c")
I, H, G = S.var("i"), S.var("h"), S.var("g")


def _flat(value):
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in _flat(v)]
    return [value]


def _build(ops, program):
    with mx.name.NameManager():
        return S.Group(_flat(program(ops)))


def _nested_while(ops):
    def func(i, s):
        _, (j, t) = ops.while_loop(lambda j, t: j < C, lambda j, t: ([], [j + 1, t * A]),
                                   [i * 0, s], max_iterations=2)
        return s, [i + 1, t + B]
    return ops.while_loop(lambda i, s: i < 3, func, [I, H], max_iterations=3)


def _cond_in_while(ops):
    def func(i, s):
        return s, [i + 1, ops.cond(S.sum(s) > A, lambda: s * B, lambda: s + C)]
    return ops.while_loop(lambda i, s: i < 3, func, [I, H], max_iterations=3)


def _foreach_in_while(ops):
    def func(i, s):
        out, st = ops.foreach(lambda d, t: (d * A + t, t + B), G, s)
        return S.sum(out), [i + 1, st]
    return ops.while_loop(lambda i, s: i < 3, func, [I, H], max_iterations=3)


# What each reads, and in which order, differs: list_arguments (what a positional bind, a
# simple_bind's arg_arrays and a hybridized block's CachedOp inputs follow) must be MXNet's.
PROGRAMS = {
    "cond_reads_a_free_variable_first": lambda ops: ops.while_loop(
        lambda i, s: A > i, lambda i, s: (s, [i + 1, s * B]), [I, H], max_iterations=3),
    "cond_reads_the_second_variable": lambda ops: ops.while_loop(
        lambda s, i: i < 3, lambda s, i: (s, [s * B, i + 1]), [H, I], max_iterations=3),
    "cond_reads_variables_backwards": lambda ops: ops.while_loop(
        lambda s, i: i < S.sum(s), lambda s, i: (s, [s * B, i + 1]), [H, I], max_iterations=3),
    "func_reads_free_variables_between_variables": lambda ops: ops.while_loop(
        lambda i, s: i < 3, lambda i, s: (B * s, [C * 0 + i + 1, A * s]), [I, H],
        max_iterations=3),
    "both_read_one_free_variable": lambda ops: ops.while_loop(
        lambda i, s: i < A, lambda i, s: (s * A, [i + 1, s * B]), [I, H], max_iterations=3),
    "three_variables_cond_reads_the_last": lambda ops: ops.while_loop(
        lambda i, s, g: S.sum(g) < 1000, lambda i, s, g: (s, [i + 1, s * A,
                                                             S.broadcast_add(g, s)]),
        [I, H, G], max_iterations=3),
    "cond_reads_two_free_variables": lambda ops: ops.while_loop(
        lambda i, s: S.broadcast_lesser(i * B, C), lambda i, s: ([s, i], [i + 1, s * A]),
        [I, H], max_iterations=3),
    "free_variable_computed_outside": lambda ops: ops.while_loop(
        lambda i, s: i < S.sum(A * 2), lambda i, s: (s, [i + 1, s * (B + C)]), [I, H],
        max_iterations=3),
    "nested_while_loops": _nested_while,
    "cond_inside_while_loop": _cond_in_while,
    "foreach_inside_while_loop": _foreach_in_while,
}
SHAPES = {"a": (1,), "b": (1,), "c": (1,), "i": (1,), "h": (1,), "g": (2, 1)}
VALUES = {"a": [5.0], "b": [1.2], "c": [50.0], "i": [0.0], "h": [5.0], "g": [[1.0], [2.0]]}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_while_loop_inputs_are_in_mxnets_order(name):
    """list_arguments, and a positional bind (args as a list) and simple_bind computing as
    MXNet's, forward and backward."""
    syms = {k: _build(ops, PROGRAMS[name]) for k, ops in OPS.items()}
    want = syms["mxnet"].list_arguments()
    assert syms["gluon_cf"].list_arguments() == want
    assert syms["gluon_cf"].list_inputs() == syms["mxnet"].list_inputs()
    values = [nd.array(VALUES[n]) for n in want]
    # MXNet's symbolic while_loop runs forward only (no backward, no shape inference): its
    # outputs (every loop runs all its steps) are the oracle of a positional bind's; gluon_cf's
    # backward by position is checked against its bind by name.
    mxnet_outs = syms["mxnet"].bind(mx.cpu(), list(values)).forward()
    sym = syms["gluon_cf"]
    by_position, by_name = {}, {}
    for how, args in ((by_position, list(values)), (by_name, dict(zip(want, values)))):
        grads = [nd.zeros(v.shape) for v in values]
        ex = sym.bind(mx.cpu(), args, args_grad=grads if how is by_position
                      else dict(zip(want, grads)))
        outs = ex.forward(is_train=True)
        ex.backward([nd.ones(o.shape) for o in outs])
        how.update(outs=[o.asnumpy() for o in outs], grads=[g.asnumpy() for g in grads])
    simple = sym.simple_bind(mx.cpu(), **{n: SHAPES[n] for n in want})
    for arr, v in zip(simple.arg_arrays, values):
        arr[:] = v
    simple_outs = [o.asnumpy() for o in simple.forward()]
    assert any(np.abs(g).sum() > 0 for g in by_position["grads"])
    for outs in (by_position["outs"], by_name["outs"], simple_outs):
        for g, w in zip(outs, mxnet_outs):
            np.testing.assert_allclose(g, w.asnumpy(), rtol=1e-5)
    for g, w in zip(by_position["grads"], by_name["grads"]):
        np.testing.assert_allclose(g, w, rtol=1e-5)


def test_hybridized_block_takes_its_inputs_in_mxnets_order():
    """A block whose while_loop's cond reads a parameter: the CachedOp's inputs (data and
    parameters, in the graph's list_inputs order) are MXNet's, and so are outputs and
    gradients."""
    class Net(gluon.HybridBlock):
        def __init__(self, ops, **kwargs):
            super().__init__(**kwargs)
            self.ops = ops
            with self.name_scope():
                self.w = self.params.get("w", shape=(1,), init=mx.init.Constant(0.9))
                self.v = self.params.get("v", shape=(1,), init=mx.init.Constant(2.5))

        def hybrid_forward(self, F, x, i, w, v):
            loop = self.ops.while_loop if self.ops is not None else F.contrib.while_loop
            out, (_, s) = loop(lambda s, i: F.broadcast_lesser(i, v),
                               lambda s, i: (s * w, [s * w, i + 1]), [x, i], max_iterations=4)
            return out, s

    # (MXNet's hybridized while_loop trains not: "Assigning to NDArrays that are already in
    # a computational graph"; gradients are checked against gluon_cf's eager loop)
    results = {}
    for k, ops, hybridize in (("mxnet", None, True), ("gluon_cf", gluon_cf, True),
                              ("eager", gluon_cf, False)):
        net = Net(ops, prefix="net_")
        net.initialize()
        if hybridize:
            net.hybridize()
        x, i = nd.array([1.5]), nd.zeros((1,))
        x.attach_grad()
        if k == "mxnet":
            out, s = net(x, i)
            results[k] = (net._cached_graph[1].list_inputs(), out.asnumpy(), s.asnumpy())
            continue
        with mx.autograd.record():
            out, s = net(x, i)
            total = out.sum() + s.sum()
        total.backward()
        results[k] = (net._cached_graph[1].list_inputs() if hybridize else None,
                      out.asnumpy(), s.asnumpy(), x.grad.asnumpy(), net.w.grad().asnumpy())
    got, want, eager = results["gluon_cf"], results["mxnet"], results["eager"]
    assert got[0] == want[0] and got[0].index("net_v") < got[0].index("net_w")
    np.testing.assert_allclose(got[1][:3], want[1][:3], rtol=1e-5)   # (MXNet: 3 steps of 4,
    np.testing.assert_allclose(got[2], want[2], rtol=1e-5)           # its last row unset)
    for g, w in zip(got[1:], eager[1:]):
        np.testing.assert_allclose(g, w, rtol=1e-5)
    assert np.abs(got[4]).sum() > 0


# ------------------------------------------------------------------------- max_iterations
def _eager_loop(wl, bound):
    outs, final = wl(lambda x: x.sum() < 100, lambda x: (x * 1, x * 2), nd.array([1.0]),
                     max_iterations=bound)
    return (outs.shape if isinstance(outs, nd.NDArray) else len(outs)), final.asnumpy()


def _symbolic_loop(wl, bound):
    outs, final = wl(lambda x: S.sum(x) < 100, lambda x: (x * 1, x * 2), S.var("x"),
                     max_iterations=bound)
    outs = outs[0] if isinstance(outs, list) else outs
    ex = S.Group([outs, final]).bind(mx.cpu(), {"x": nd.array([1.0])})
    return tuple(o.asnumpy().tolist() for o in ex.forward())


BOUNDS = [2.5, 2.9, np.float32(2.5), np.int64(3), np.int32(2), True, "3", nd.array([3]),
          nd.array([2.7]), 0, -1, False, "x", float("nan"), float("inf"), [3], 3 + 0j]


@pytest.mark.parametrize("bound", BOUNDS, ids=[repr(b).replace("\n", "") for b in BOUNDS])
def test_max_iterations_is_read_as_mxnet_reads_it(bound):
    """Eager and symbolic: the same results, or an error of the type MXNet's raises."""
    for run, mxnet_op in ((_eager_loop, nd.contrib.while_loop),
                          (_symbolic_loop, S.contrib.while_loop)):
        outcome = {}
        for k, wl in (("mxnet", mxnet_op), ("gluon_cf", gluon_cf.while_loop)):
            try:
                outcome[k] = run(wl, bound)
            except (ValueError, mx.MXNetError) as err:
                outcome[k] = type(err)
        if isinstance(outcome["mxnet"], type):
            assert isinstance(outcome["gluon_cf"], type), (run.__name__, outcome)
            assert issubclass(outcome["gluon_cf"], outcome["mxnet"]), (run.__name__, outcome)
        else:
            got, want = outcome["gluon_cf"], outcome["mxnet"]
            assert repr(got) == repr(want), (run.__name__, got, want)


def test_max_iterations_errors_are_located():
    with pytest.raises(ValueError, match=r"^gluon_cf\.while_loop at .*test_mxnet_semantics22"
                                         r"\.py:\d+: cannot convert max_iterations to a Python "
                                         r"int, got nan$"):
        _eager_loop(gluon_cf.while_loop, float("nan"))
    with pytest.raises(mx.MXNetError, match=r"max_iterations must be >= 1 in hybridized mode, "
                                            r"got 0 \(from False\)$"):
        _symbolic_loop(gluon_cf.while_loop, False)


# ---------------------------------------------------------------- what a cond returns
CONDS = {
    "python_bool": lambda x: True, "python_int": lambda x: 1, "numpy_bool": lambda x: np.bool_(0),
    "none": lambda x: None, "string": lambda x: "yes",
    "two_elements": lambda x: S.broadcast_to(x, shape=(2,)) < 100 if isinstance(x, S.Symbol)
    else x.broadcast_to((2,)) < 100,
    "list_of_two": lambda x: [x.sum() < 1, x.sum() < 2] if isinstance(x, nd.NDArray)
    else [S.sum(x) < 1, S.sum(x) < 2],
    "empty_list": lambda x: [],
}


@pytest.mark.parametrize("name", sorted(CONDS))
def test_symbolic_cond_returning_no_symbol_raises_mxnets_type(name):
    """MXNet's symbolic while_loop: ValueError("Return of cond must be a Symbol"), or an
    MXNetError when it runs (a predicate of two elements); gluon_cf's are located."""
    def run(wl):
        return _symbolic_loop(lambda c, f, v, max_iterations: wl(CONDS[name], f, v,
                                                                 max_iterations=max_iterations),
                              3)
    with pytest.raises((ValueError, mx.MXNetError)) as want:
        run(S.contrib.while_loop)
    with pytest.raises(type(want.value)) as got:
        run(gluon_cf.while_loop)
    assert "test_mxnet_semantics22.py:" in str(got.value)


@pytest.mark.parametrize("name", sorted(CONDS))
def test_eager_cond_returns_as_mxnet_or_refused_as_valueerror(name):
    """Eagerly MXNet takes ``bool()`` of what cond returns: scalars run as MXNet's; a list,
    None or a string (always true or false, whatever the values) are refused with the
    ValueError MXNet raises for a value it cannot convert."""
    def run(wl):
        return _eager_loop(lambda c, f, v, max_iterations: wl(CONDS[name], f, v,
                                                              max_iterations=max_iterations), 3)
    try:
        want = run(nd.contrib.while_loop)
    except ValueError:
        want = ValueError
    if name in ("none", "string", "list_of_two", "empty_list"):
        with pytest.raises(ValueError, match=r"^gluon_cf\.while_loop at .*"
                                             r"test_mxnet_semantics22\.py:\d+: the value "
                                             r"returned by cond must be a one-element"):
            run(gluon_cf.while_loop)
        return
    try:
        got = run(gluon_cf.while_loop)
    except ValueError:
        got = ValueError
    assert repr(got) == repr(want)


# ------------------------------------------------------------------ where nodes were made
def test_errors_name_the_line_of_their_own_node_when_names_repeat():
    """Two ``_foreach0`` nodes made under fresh NameManagers: each one's error names its own
    line, whichever was made last."""
    def make(bad):
        with mx.name.NameManager():
            x, y = S.var("x"), S.var("y")
            if bad:
                outs, _ = gluon_cf.foreach(lambda d, s: (d[0] + d[1], s), [x, y], S.var("h"))
                line = _line()
            else:
                outs, _ = gluon_cf.foreach(lambda d, s: (d[0] - d[1], s), [x, y], S.var("h"))
            return outs, (line - 1 if bad else None)

    for order in ((True, False), (False, True)):
        made = [make(bad) for bad in order]
        sym, line = next(m for m in made if m[1] is not None)
        assert all("_foreach0_output0" in m[0].get_internals().list_outputs() for m in made)
        with pytest.raises(ValueError, match=r"\(in gluon_cf node '_foreach0' at .*"
                                             r"test_mxnet_semantics22\.py:%d\)$" % line):
            sym.bind(mx.cpu(), {"x": nd.ones((3, 2)), "y": nd.ones((4, 2)),
                                "h": nd.ones((2,))}).forward()[0].asnumpy()


def _line():
    import sys
    return sys._getframe(1).f_lineno


# ------------------------------------------------------------- failed calls read later
def test_failed_calls_read_later_carry_gluon_cf_messages():
    """Two failed hybridized calls whose outputs are unread: reading the second, then
    ``waitall()``, then the first (MXNet reports the failures in any of these) raise gluon_cf's
    message each time (a single kept error: MXNet's custom.cc text the second time). Calls
    failing alike (MXNet keeps one Custom-op failure at a time: each call's must land before
    the next fails, so the test waits for it)."""
    code = textwrap.dedent("""
        import time, warnings
        warnings.simplefilter("ignore")
        import mxnet as mx, gluon_cf
        from gluon_cf import failed_calls, node as N
        from mxnet import gluon, nd

        @gluon_cf.recursive(max_depth=3)
        def f(n):
            return gluon_cf.cond(n > 0, lambda: f(n - 1) + 1, lambda: n)

        class Net(gluon.HybridBlock):
            def hybrid_forward(self, F, x):
                return f(x)

        # (the Custom operator's runs: a call run in the calling thread first fails there,
        # at the call, NOTE [a failure lost to another thread] in hybrid_inline.py)
        from gluon_cf import hybrid_inline
        hybrid_inline.INLINE[0] = False
        net = Net(); net.hybridize()
        outs = []
        for k in range(2):
            outs.append(net(nd.array([10.0])))
            deadline = time.time() + 30
            while len(N._kept_run) + len(failed_calls.KEPT) < k + 1 \\
                    and time.time() < deadline:
                time.sleep(0.01)
            time.sleep(0.3)   # (MXNet takes the failure from its one slot)
        reports = []
        for read in (lambda: outs[1].asnumpy(), nd.waitall, lambda: outs[0].asnumpy()):
            try:
                read()
                reports.append("no error")
            except Exception as err:
                reports.append("%s: %s" % (type(err).__name__, str(err).splitlines()[0]))
        print("\\n".join(reports))
        nd.waitall()
        print("kept after waitall:", len(N._kept_run))
    """)
    result = run_python(code, timeout=120)
    assert result is not None, "timed out"
    lines = result.stdout.strip().splitlines()
    errors = [ln for ln in lines if ln != "no error" and not ln.startswith("kept")]
    assert len(errors) == 2, result.stdout + result.stderr
    for ln in errors:
        assert ln == ("RecursionDepthError: gluon_cf.recursive: 'f' exceeded max_depth=3 nested "
                      "calls; does it reach a base case?"), result.stdout
    assert lines[-1] == "kept after waitall: 0"


def test_a_waitall_that_raises_leaves_no_stale_failure():
    """Calls failing as depth 2 and 3 unread; ``waitall()`` raises the first and MXNet forgets
    both: a third call failing (depth 4) is reported as itself (it was reported as the
    forgotten depth-3 failure, "one of 2 ... the oldest", when the raising waitall kept it);
    the same with ``mx.npx.waitall`` (MXNet's same function, which kept them even returning)."""
    code = textwrap.dedent("""
        import time, warnings
        warnings.simplefilter("ignore")
        import mxnet as mx, gluon_cf
        from gluon_cf import failed_calls, node as N
        from mxnet import gluon, nd

        def make(depth):
            @gluon_cf.recursive(max_depth=depth)
            def f(n):
                return gluon_cf.cond(n > 0, lambda: f(n - 1) + 1, lambda: n)
            class Net(gluon.HybridBlock):
                def hybrid_forward(self, F, x):
                    return f(x)
            net = Net(); net.hybridize(); return net

        from gluon_cf import hybrid_inline   # (the Custom operator's runs, as above)
        hybrid_inline.INLINE[0] = False
        nets = [make(d) for d in (2, 3, 4)]
        for waitall in (nd.waitall, mx.npx.waitall):
            outs = []
            for k in range(2):
                outs.append(nets[k](nd.array([10.0])))
                deadline = time.time() + 30
                while len(N._kept_run) + len(failed_calls.KEPT) < k + 1 \\
                    and time.time() < deadline:
                    time.sleep(0.01)
                time.sleep(0.3)
            for read in (waitall, lambda: nets[2](nd.array([10.0])).asnumpy()):
                try:
                    read()
                    print("no error")
                except Exception as err:
                    print(str(err).splitlines()[0])
    """)
    result = run_python(code, timeout=120)
    assert result is not None, "timed out"
    want = "gluon_cf.recursive: 'f' exceeded max_depth=%d nested calls; does it reach a base case?"
    assert result.stdout.strip().splitlines() == [want % 2, want % 4] * 2, \
        result.stdout + result.stderr


warnings.filterwarnings("ignore", message="Cannot decide type")


# ------------------------------------------------------------------ cond's structures
@pytest.mark.parametrize("then_first", [True, False])
def test_cond_branches_nested_otherwise_return_then_funcs_structure_as_mxnet(then_first):
    """As many arrays nested otherwise ([h] and h, [h, [g]] and [[h], g]): MXNet's symbolic
    cond returns then_func's structure, whichever branch runs; gluon_cf's too."""
    results = {}
    for k, ops in OPS.items():
        with mx.name.NameManager():
            h, g = S.var("h"), S.var("g")
            pred = (S.sum(h) > 0) if then_first else (S.sum(h) < 0)
            one = ops.cond(pred, lambda: [h * 2], lambda: h * 3)
            two = ops.cond(pred, lambda: [h * 2, [g + 1]], lambda: [[h - 1], g * 2])
        assert isinstance(one, list) and len(one) == 1
        assert isinstance(two, list) and isinstance(two[1], list) and len(two[1]) == 1
        ex = S.Group([one[0], two[0], two[1][0]]).bind(
            mx.cpu(), {"h": nd.array([1.0, 2.0]), "g": nd.array([3.0])})
        results[k] = [o.asnumpy() for o in ex.forward()]
    for got, want in zip(results["gluon_cf"], results["mxnet"]):
        np.testing.assert_allclose(got, want)


# ------------------------------------- readers of a while_loop's inputs in MXNet's order
class _ReadsParameterInCond(gluon.HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.w = self.params.get("w", shape=(1,), init=mx.init.Constant(0.9))
            self.v = self.params.get("v", shape=(1,), init=mx.init.Constant(2.5))

    def hybrid_forward(self, F, x, i, w, v):
        out, (s, j) = gluon_cf.while_loop(lambda s, i: F.broadcast_lesser(i, v),
                                          lambda s, i: (s * w, [s * w, i + 1]), [x, i],
                                          max_iterations=4)
        return out, s, j


def test_export_and_imports_of_a_loop_whose_inputs_are_permuted(tmp_path):
    """ONNX export and export + SymbolBlock.imports read the loop variables where they are
    (NOTE [while_loop input order]): onnxruntime and the imported block equal the block."""
    import onnxruntime as ort
    from gluon_cf.export import export_onnx

    net = _ReadsParameterInCond(prefix="net_")
    net.initialize()
    net.hybridize()
    x, i = nd.array([1.5]), nd.zeros((1,))
    want = [o.asnumpy() for o in net(x, i)]
    assert net._cached_graph[1].list_inputs()[:2] == ["data1", "net_v"]
    session = ort.InferenceSession(export_onnx(net, [x, i]).SerializeToString())
    got = session.run(None, dict(zip([s.name for s in session.get_inputs()],
                                     [x.asnumpy(), i.asnumpy()])))
    net.export(str(tmp_path / "m"))
    imported = gluon.SymbolBlock.imports(str(tmp_path / "m-symbol.json"), ["data0", "data1"],
                                         str(tmp_path / "m-0000.params"))
    for outs in (got, [o.asnumpy() for o in imported(x, i)]):
        for g, w in zip(outs, want):
            np.testing.assert_allclose(g, w, rtol=1e-5)


def test_gradients_asked_of_indices_name_the_input_in_mxnets_order():
    """``idx`` (loop variable 1) is the node's input 0: asking its gradient is refused naming
    input 0; asking the others' trains (the refusal read input positions as slots)."""
    with mx.name.NameManager():
        w, idx, h, n = S.var("w"), S.var("idx"), S.var("h"), S.var("n")
        _, (final, _) = gluon_cf.while_loop(
            lambda h, i: S.sum(i) < S.sum(n),
            lambda h, i: (h, [h + S.Embedding(i, w, input_dim=5, output_dim=2).reshape((2,)),
                              i + 1]), [h, idx], max_iterations=3)
    assert final.list_arguments() == ["idx", "n", "h", "w"]
    args = {"w": nd.ones((5, 2)), "idx": nd.array([0.0]), "h": nd.zeros((2,)),
            "n": nd.array([2.0])}
    for asked in (["h", "w"], ["h", "w", "idx"]):
        grads = {k: nd.zeros(args[k].shape) for k in asked}
        ex = final.bind(mx.cpu(), args, args_grad=grads,
                        grad_req={k: "write" if k in asked else "null" for k in args})
        ex.forward(is_train=True)
        if "idx" in asked:
            with pytest.raises(mx.MXNetError, match="a gradient was asked for input 0 of this "
                                                    "node"):
                ex.backward([nd.ones((2,))])
                grads["h"].asnumpy()
            continue
        ex.backward([nd.ones((2,))])
        np.testing.assert_allclose(grads["h"].asnumpy(), [1.0, 1.0])
        np.testing.assert_allclose(grads["w"].asnumpy()[:2], [[1.0, 1.0], [1.0, 1.0]])


@pytest.mark.parametrize("steps", [0, 2])
def test_eager_loop_vars_come_back_as_mxnets(steps):
    """A tuple of loop_vars: after steps a list (func's new_loop_vars), after none the tuple
    itself, as MXNet's eager while_loop."""
    h = nd.array([1.0, 1.0])
    results = {}
    for k, wl in (("mxnet", nd.contrib.while_loop), ("gluon_cf", gluon_cf.while_loop)):
        loop_vars = (h, h * 2)
        outs, final = wl(lambda a, b: a.sum() < 2 * steps + 1, lambda a, b: (a, (a + 1, b)),
                         loop_vars, max_iterations=3)
        results[k] = (type(final), final is loop_vars, [v.asnumpy().tolist() for v in final],
                      type(outs), len(outs))
    assert results["gluon_cf"] == results["mxnet"]


class _BatchedLoopInRecursion(gluon.HybridBlock):
    """A while_loop whose cond reads a parameter first, in a recursion the batched executor
    runs as rows: its node's inputs are ``[lim, y, k, w]``, its slots ``[y, k, lim, w]``."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.lim = self.params.get("lim", shape=(1, 1), init=mx.init.Constant(4.0))
            self.w = self.params.get("w", shape=(1, 2), init=mx.init.Constant(1.3))

    def hybrid_forward(self, F, x, n, lim, w):
        @gluon_cf.recursive(max_depth=6)
        def f(x, n):
            def deeper():
                _, (y, _k) = gluon_cf.while_loop(
                    lambda y, k: F.broadcast_greater(lim, F.sum(y, axis=1, keepdims=True) + k),
                    lambda y, k: (y, [F.broadcast_add(F.broadcast_mul(y, w), k * 0.1), k + 1]),
                    [x, n * 0], max_iterations=4)
                return f(y, n - 1) + f(y * -0.5 + 0.2, n - 1)
            return gluon_cf.cond(n > 0, deeper, lambda: x)
        return f(x, n)


def test_batched_rows_of_a_permuted_loop_are_flagged_per_slot(monkeypatch):
    """The loop's subgraphs see which slots hold per-invocation rows (the loop vars) and which
    are shared (the parameters): they were given the flags of the node's inputs by slot index
    (``lim`` batched, ``y`` shared), which lost the batching of the loop's steps; outputs and
    gradients equal the eager recursion's."""
    from gluon_cf.graph import runtime
    from gluon_cf.ops.while_loop import WhileLoopRule

    seen = []
    forward, run = WhileLoopRule.forward, runtime.Graph.run

    def spying_forward(self, node, inputs, out_shapes, frame):
        monkeypatch.setattr(runtime.Graph, "run", spying_run)
        try:
            return (yield from forward(self, node, inputs, out_shapes, frame))
        finally:
            monkeypatch.setattr(runtime.Graph, "run", run)

    def spying_run(graph, slots, frame=None, record=True):
        if frame is not None and frame.flags is not None and len(slots) == 4:
            seen.append(list(frame.flags))
        return run(graph, slots, frame, record)

    monkeypatch.setattr(WhileLoopRule, "forward", spying_forward)
    results = []
    for hybridize in (False, True):
        net = _BatchedLoopInRecursion(prefix="rows_")
        net.initialize()
        if hybridize:
            net.hybridize()
        x, n = nd.array([[0.3, 0.1]]), nd.array([[3.0]])
        x.attach_grad()
        with mx.autograd.record():
            y = net(x, n)
        y.backward()
        results.append([y.asnumpy(), x.grad.asnumpy()] +
                       [p.grad().asnumpy() for p in net.collect_params().values()])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert seen and all(flags == [True, True, False, False] for flags in seen), seen[:3]


def test_threads_making_nodes_at_once_keep_the_location_map_bounded(monkeypatch):
    """Threads remembering where nodes were made while the map is full (NOTE [where a node was
    made]): each one's evicting the oldest half raced the others' (a KeyError or "dictionary
    changed size during iteration" out of make_node); the map stays within its bound."""
    import sys
    import threading
    from gluon_cf import errors

    monkeypatch.setattr(errors, "_MAX_CREATED_AT", 200)
    monkeypatch.setattr(errors, "_CREATED_AT", {})
    failures = []

    def make(t):
        try:
            for i in range(5000):
                errors.remember_where("spec %d %d" % (t, i), "user.py:%d" % t,
                                      lambda n: "instance %d" % n)
        except Exception as err:  # noqa: BLE001 - any is the failure tested
            failures.append(repr(err))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=make, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures == []
    assert len(errors._CREATED_AT) <= 200
    assert errors.remember_where("spec 0 0", "user.py:7", lambda n: "instance %d" % n) == \
        "spec 0 0"   # (evicted: no other line known for it)
    assert errors._CREATED_AT[errors.spec_key("spec 0 0")] == "user.py:7"
