"""Round 6 of hostile programs (issue 24): MXNet's own tests' and gluonnlp's uses of the
F.contrib-compatible ops, compared with MXNet's ``mx.nd.contrib``/``mx.sym.contrib`` as the
oracle, eager, hybridized and through the symbolic API; and the errors of a body's own
operators, which named only an MXNet graph node (NOTE [operators refusing shapes at run time]).
"""
import inspect
import re

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf
import hostile_harness


# ---- a body's operator refusing its shapes names the user's line -----------------------------

class MaskedRowSums(gluon.HybridBlock):
    """Per step, the kept entries of a row summed into a state (gluonnlp-style masked
    accumulation); ``st[0] + kept.sum()`` is (W,) + (1,): an NDArray's + broadcasts, a
    Symbol's does not."""

    def hybrid_forward(self, F, x, m, h):
        def body(d, st):
            row, keep = d
            kept = F.contrib.boolean_mask(row, keep)
            return kept.sum(axis=0) + st[0], [st[0] + kept.sum()]   # the user's mistake
        return gluon_cf.foreach(body, [x, m], [h])


class RowsIntoState(gluon.HybridBlock):
    """The kept rows of a step summed into a state of the caller's width: rows of 3 into a
    state of 2 are the user's error, a state of 3 works."""

    def hybrid_forward(self, F, x, m, h):
        def body(d, st):
            row, keep = d
            total = F.contrib.boolean_mask(row, keep).sum(axis=0) + st[0]
            return total, [total]
        return gluon_cf.foreach(body, [x, m], [h])


def _line_of(cls, text):
    source, first = inspect.getsourcelines(cls)
    return first + next(k for k, line in enumerate(source) if text in line)


def _call(net, *arrays):
    outs, states = net(*[mx.nd.array(a) for a in arrays])
    return [outs.asnumpy()] + [s.asnumpy() for s in states]


def test_a_shape_mismatch_beside_a_mask_in_a_loop_body_names_the_users_line():
    """Hybridized, the body of a loop holding a boolean_mask is inferred when it runs: MXNet's
    error ("Error in operator maskedrowsums0__plus1: ... elemwise_op_common.h:134: Check
    failed: assign(&dattr, vec.at(i))", or with an empty mask "Incompatible attr in node  at")
    reached the user raw, at the next read of an output. Now an OperatorShapeError (a
    ValueError) at the line of the +, for every mask, on every call, trained or not."""
    pattern = r"^%s:%d: elemwise_add \(node '\w+'\) refused its inputs.*expected \[3\], " \
        r"got \[1\].*F\.broadcast_add" % (re.escape(__file__),
                                          _line_of(MaskedRowSums, "the user's mistake"))
    net = MaskedRowSums()
    net.hybridize()
    for keep in ([1, 1, 1, 1], [1, 0, 1, 0], [0, 0, 0, 0], [1, 0, 1, 0]):
        for record in (False, True):
            with pytest.raises(ValueError, match=pattern) as caught:
                with autograd.record(record):
                    out = net(mx.nd.ones((4, 4, 3)), mx.nd.array([keep] * 4), mx.nd.ones(3))
                mx.nd.waitall()
                out[0].asnumpy()
            text = str(caught.value)
            assert not hostile_harness.INTERNAL.search(text.split(" (Error in")[0]), text
            assert ".h:" not in text and "::" not in text and "Check failed" not in text, text


def test_a_failed_call_of_a_masked_loop_leaves_the_block_working():
    """A state of the wrong width fails with the user's line; the next calls with a right one
    equal a fresh block's and eager Python, whatever failed before."""
    rng = np.random.RandomState(0)
    x, eager = rng.rand(3, 4, 3).astype("f"), RowsIntoState()
    masks = [(rng.rand(3, 4) > p).astype("f") for p in (0.5, 1.0, 0.0)]
    net = RowsIntoState()
    net.hybridize(static_alloc=True)
    line = _line_of(RowsIntoState, "sum(axis=0) + st[0]")
    for m in masks:
        with pytest.raises(ValueError, match=r"^%s:%d: elemwise_add" % (re.escape(__file__),
                                                                          line)):
            _call(net, x, m, np.ones(2, "f"))
        mx.nd.waitall()
        fresh = RowsIntoState()
        fresh.hybridize()
        want = _call(eager, x, m, np.ones(3, "f"))
        for got in (_call(net, x, m, np.ones(3, "f")), _call(fresh, x, m, np.ones(3, "f"))):
            for w, g in zip(want, got):
                np.testing.assert_allclose(g, w, rtol=1e-5)


def test_a_symbol_of_the_wrong_shape_in_a_while_body_names_the_users_line():
    """``x * i`` of shapes (4,) and (1,) in a while_loop's func (a Symbol's * does not
    broadcast): the ValueError names the line of the *, not only the block's
    hybrid_forward (moved here from test_autograph_hostile4.py)."""
    programs9 = pytest.importorskip("hostile_programs9")
    net = hostile_harness._make(programs9.ContribWhileEmptyOutputs)
    net.hybridize()
    line = _line_of(programs9.ContribWhileEmptyOutputs, "row * i")
    for _ in range(2):
        with pytest.raises(ValueError, match=r"^%s:%d: elemwise_mul \(node '\w+__mul0'\) "
                           r"refused its inputs.*expected \[4\], got \[1\]"
                           % (re.escape(programs9.__file__), line)):
            net(mx.nd.ones((3, 4)))


def _nested_loops(F, ops, data, h):
    def body(x, s):
        o, st = ops.while_loop(lambda i, a: i < 3, lambda i, a: ([a * 2], [i + 1, a + x]),
                               [F.zeros((1,)), s[0]], max_iterations=3)
        return o[0], [st[1]]
    outs, st = ops.foreach(body, data, [h])
    return outs, st[0]


def _nested_while_in_foreach(ops):
    return mx.sym.Group(list(_nested_loops(mx.sym, ops, mx.sym.var("data"), mx.sym.var("h"))))


def test_symbolic_infer_shape_of_a_state_of_the_wrong_shape_names_the_users_line():
    """``Symbol.infer_shape`` with a state of (3,) for rows of (2,) raised MXNet's raw error
    (its C++ file and check, no line of the user's)."""
    graph = _nested_while_in_foreach(gluon_cf)
    line = _line_of(_nested_loops, "a + x")
    with pytest.raises(ValueError, match=r"^%s:%d: elemwise_add .*expected \[3\], got \[2\]"
                       % (re.escape(__file__), line)):
        graph.infer_shape(data=(4, 2), h=(3,))
    assert graph.infer_shape(data=(4, 2), h=(2,))[1] == [(4, 3, 2), (2,)]


class KeptPerRow(gluon.HybridBlock):
    """Per row, the sum of the entries its mask keeps (a 1-D boolean_mask in a loop body)."""

    def hybrid_forward(self, F, x, m):
        out, _ = gluon_cf.foreach(
            lambda d, _: (F.contrib.boolean_mask(d[0], d[1]).sum(), []), [x, m], [])
        return out


class KeptOfTree(gluon.HybridBlock):
    """A tree's sum of the entries each node's mask keeps, by recursion."""

    def hybrid_forward(self, F, vals, mask, left, right, roots):
        @gluon_cf.recursive
        def node(i):
            own = F.contrib.boolean_mask(F.take(vals, i).reshape((-1,)),
                                         F.take(mask, i).reshape((-1,))).sum().reshape((1, 1))
            return gluon_cf.cond(F.take(left, i) < 0, lambda: own,
                                 lambda: own + node(F.take(left, i)) + node(F.take(right, i)))
        out, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return out


def test_a_1d_boolean_mask_keeping_nothing_is_a_zero_size_error_at_the_users_line():
    """MXNet 1.x cannot hold a 1-D array of no element: a boolean_mask of a row keeping
    nothing gave an array whose shape could not be read, "Shape is unknown" from tuple.h:521
    at the next read, eagerly in a body and hybridized (a loop body, a recursive function,
    every executor). Now a ZeroSizeError at the boolean_mask's line, on every call, and the
    same block then computes masks that keep something, equal to eager."""
    x = np.arange(6, dtype="f").reshape(2, 3)
    some, none_in_one = np.array([[1, 0, 1], [0, 1, 0]], "f"), np.array([[1, 0, 0], [0] * 3], "f")
    line = _line_of(KeptPerRow, "(F.contrib.boolean_mask")
    for hybrid in (False, True):
        net = KeptPerRow()
        if hybrid:
            net.hybridize()
        for _ in range(2):
            with pytest.raises(gluon_cf.ZeroSizeError, match=r"^gluon_cf: \w*boolean_mask "
                               r"at %s:%d .*kept no element of its 1-D input \(shape \(3,\)\)"
                               % (re.escape(__file__), line)):
                net(mx.nd.array(x), mx.nd.array(none_in_one)).asnumpy()
            np.testing.assert_array_equal(net(mx.nd.array(x), mx.nd.array(some)).asnumpy(),
                                          [[2], [4]])
    forest = [np.ones((3, 2), "f"), np.zeros((3, 2), "f"), np.array([-1, -1, 0], "f"),
              np.array([-1, -1, 1], "f"), np.array([2, 0], "f")]
    line = _line_of(KeptOfTree, "own = F.contrib.boolean_mask")
    for executor in (("batched", True), ("batched", False), ("unbatched", True)):
        gluon_cf.set_executor(*executor)
        try:
            net = KeptOfTree()
            net.hybridize()
            with pytest.raises(gluon_cf.ZeroSizeError, match=r"at %s:%d .*kept no element"
                               % (re.escape(__file__), line)):
                net(*[mx.nd.array(a) for a in forest]).asnumpy()
            forest[1][:, 0] = 1
            np.testing.assert_array_equal(
                net(*[mx.nd.array(a) for a in forest]).asnumpy().ravel(), [3, 1])
            forest[1][:] = 0
        finally:
            gluon_cf.set_executor("batched")


class KeptWhenAny(gluon.HybridBlock):
    """Per row, the sum of the kept entries if any, else 0; the boolean_mask runs on every row,
    its result used only by the branch taken (and a mask computed for nothing)."""

    def __init__(self, least=0):
        super().__init__()
        self.least = least   # -1: the branch that uses the mask is always taken

    def hybrid_forward(self, F, x, m):
        def body(d, st):
            row, keep = d
            kept = F.contrib.boolean_mask(row, keep)
            F.contrib.boolean_mask(row, keep * 0)   # never used
            total = gluon_cf.cond(keep.sum() > self.least, lambda: kept.sum().reshape((1,)),
                                  lambda: F.zeros((1,)))
            return total, st
        out, _ = gluon_cf.foreach(body, [x, m], [F.zeros((1,))])
        return out


def test_a_1d_boolean_mask_keeping_nothing_unused_is_no_error():
    """A 1-D boolean_mask keeping nothing is an error where its result is used (above), not
    where it is not, as in MXNet: the mask of a row computed before a cond whose branch taken
    does not use it, and one never used, were refused as ZeroSizeError (eagerly both, and
    hybridized the one given to the cond), though they worked before. Equal to numpy."""
    x = np.arange(9, dtype="f").reshape(3, 3)
    m = np.array([[1, 0, 1], [0, 0, 0], [0, 1, 0]], "f")
    for hybrid in (False, True):
        net = KeptWhenAny()
        if hybrid:
            net.hybridize()
        for _ in range(2):
            np.testing.assert_array_equal(net(mx.nd.array(x), mx.nd.array(m)).asnumpy().ravel(),
                                          (x * m).sum(axis=1), err_msg=str(hybrid))
        net = KeptWhenAny(least=-1)   # used: the error at the boolean_mask's line, as above
        if hybrid:
            net.hybridize()
        with pytest.raises(gluon_cf.ZeroSizeError, match=r"boolean_mask at %s:%d .*kept no "
                           % (re.escape(__file__), _line_of(KeptWhenAny, "kept = F.contrib"))):
            net(mx.nd.array(x), mx.nd.array(m)).asnumpy()


def test_symbolic_infer_type_and_bind_of_a_float64_state_name_the_users_line():
    """A float64 state beside float32 rows in a symbolic foreach: ``infer_type`` and ``bind``
    raised MXNet's raw error (elemwise_op_common.h:134, "Check failed: assign(&dattr, ...)"),
    as MXNet's own foreach does; now the operator and the line of the *."""
    data, h = mx.sym.var("data"), mx.sym.var("h")
    outs, st = gluon_cf.foreach(lambda x, s: (x * s[0], [s[0] + x]), data, [h])
    graph = mx.sym.Group([outs, st[0]])
    line = inspect.currentframe().f_lineno - 2
    pattern = r"^%s:%d: elemwise_mul .*expected float32, got float64" % (
        re.escape(__file__), line)
    with pytest.raises(ValueError, match=pattern):
        graph.infer_type(data="float32", h="float64")
    with pytest.raises(ValueError, match=pattern):
        graph.bind(mx.cpu(), {"data": mx.nd.ones((3, 2)),
                              "h": mx.nd.ones(2, dtype="float64")}).forward()


def _eager_predicates_of_two_elements():
    x = mx.nd.array([1.0, -2.0])
    yield "cond", "pred", lambda: gluon_cf.cond(x > 0, lambda: x, lambda: -x)
    yield "while_loop", "the value returned by cond", lambda: gluon_cf.while_loop(
        lambda i: i < 3, lambda i: ([i], [i + 1]), [x], max_iterations=3)


def test_an_eager_predicate_of_two_elements_names_the_users_call():
    """Eagerly, cond's pred and while_loop's cond value of two elements said "gluon_cf.cond:
    pred must have exactly one element", naming no line (hybridized names the node's)."""
    source, first = inspect.getsourcelines(_eager_predicates_of_two_elements)
    for op, what, call in _eager_predicates_of_two_elements():
        line = first + next(k for k, text in enumerate(source) if "gluon_cf.%s(" % op in text)
        with pytest.raises(ValueError, match=r"^gluon_cf\.%s at %s:%d: %s must have exactly one "
                           r"element, got shape \(2,\)$" % (op, re.escape(__file__), line, what)):
            call()


# ---- MXNet's own contrib ops as the oracle ---------------------------------------------------

def test_symbolic_nested_loops_equal_mxnet_for_both_binds_and_grad_reqs():
    """foreach holding a while_loop, bound by ``bind`` (grad_req 'null' and 'add', two
    backwards) and ``simple_bind`` (float64), after a JSON round trip: equal to MXNet's own
    contrib ops run eagerly (MXNet's executor cannot infer its own nested graph: "InferShape
    failed in operator _foreach0")."""
    data = mx.nd.array(np.arange(8).reshape(4, 2))
    h = mx.nd.ones(2)
    h.attach_grad()
    with autograd.record():
        want = _nested_loops(mx.nd, mx.nd.contrib, data, h)
        (want[0].sum() + want[1].sum()).backward()
    grads = {"data": mx.nd.ones((4, 2)), "h": mx.nd.ones(2)}
    ex = mx.sym.load_json(_nested_while_in_foreach(gluon_cf).tojson()).bind(
        mx.cpu(), {"data": data, "h": mx.nd.ones(2)}, args_grad=grads,
        grad_req={"data": "null", "h": "add"})
    for _ in range(2):
        ex.forward(is_train=True)
        ex.backward([mx.nd.ones((4, 3, 2)), mx.nd.ones(2)])
    for w, g in zip(want, ex.outputs):
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(grads["h"].asnumpy(), 1 + 2 * h.grad.asnumpy(), rtol=1e-6)
    np.testing.assert_array_equal(grads["data"].asnumpy(), 1)
    ex = _nested_while_in_foreach(gluon_cf).simple_bind(
        mx.cpu(), data=(4, 2), h=(2,), type_dict={"data": "float64", "h": "float64"})
    ex.arg_dict["data"][:] = data.astype("float64")
    ex.arg_dict["h"][:] = 1
    ex.forward()
    for w, g in zip(want, ex.outputs):
        assert g.dtype == np.float64
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-6)


class _Contrib(gluon.HybridBlock):
    """A block written against F.contrib; ``use`` picks MXNet's ops or ours."""

    def __init__(self, use, program):
        super().__init__()
        self.use, self.program = use, program

    def hybrid_forward(self, F, *args):
        return self.program(F, F.contrib if self.use == "mxnet" else gluon_cf, *args)


def _state_is_output(F, ops, x, h):
    def body(row, st):
        new = st[0] * row
        return new, [new]
    outs, st = ops.foreach(body, x, [h])
    return outs, st[0]


def _nested(F, ops, x, h):
    def outer(row, st):
        return ops.foreach(lambda e, s2: (e * s2[0], [s2[0] + e]), row, [st[0]])
    outs, st = ops.foreach(outer, x, [h])
    return outs, st[0]


def _states_only_gradient(F, ops, x, h):
    _, st = ops.foreach(lambda row, st: (row * 5, [st[0] * 2]), x, [h])   # output unused
    return st[0]


def _float64_states(F, ops, x, h):
    outs, st = ops.foreach(lambda row, st: (row * st[0], [st[0] + row]), x, [h])
    return outs, st[0]


def _two_outputs_one_unused(F, ops, x, h):
    _, b = ops.cond(x.sum() > 2, lambda: (x * 2, h + 1), lambda: (x - 1, h * h))
    return b


def _while_reaching_max_iterations(F, ops, x, h):
    outs, (i, s) = ops.while_loop(lambda i, s: i < 9, lambda i, s: (s * 2, [i + 1, s + 1]),
                                  [F.zeros((1,)), h], max_iterations=3)
    return outs, i, s


@pytest.mark.parametrize("program,arrays", [
    (_state_is_output, [np.random.RandomState(1).rand(3, 2), np.ones(2)]),
    (_nested, [np.random.RandomState(2).rand(3, 4, 2), np.ones(2)]),
    (_states_only_gradient, [np.random.RandomState(3).rand(3, 2), np.ones(2)]),
    (_float64_states, [np.random.RandomState(4).rand(3, 2).astype("float64"),
                       np.ones(2, "float64")]),
    (_two_outputs_one_unused, [np.random.RandomState(5).rand(2), np.ones(2)]),
    (_two_outputs_one_unused, [np.random.RandomState(5).rand(2) * 3, np.ones(2)]),
    (_while_reaching_max_iterations, [np.ones(2, "f"), np.ones(2, "f")])],
    ids=lambda v: getattr(v, "__name__", None))
def test_contrib_programs_equal_mxnets_own_ops(program, arrays):
    """Values and gradients equal MXNet's own eager contrib ops, eager, hybridized and with
    static_alloc/static_shape."""
    arrays = [a if a.dtype == np.float64 else a.astype("float32") for a in arrays]

    def run(use, **hybrid):
        net = _Contrib(use, program)
        if hybrid.pop("on", False):
            net.hybridize(**hybrid)
        xs = [mx.nd.array(a, dtype=a.dtype) for a in arrays]
        for x in xs:
            x.attach_grad()
        with autograd.record():
            outs = net(*xs)
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            loss = sum((o * (k + 1)).sum() for k, o in enumerate(outs))
        loss.backward()
        return [o.asnumpy() for o in outs] + [x.grad.asnumpy() for x in xs]
    want = run("mxnet")
    for got in (run("ours"), run("ours", on=True),
                run("ours", on=True, static_alloc=True, static_shape=True)):
        assert len(got) == len(want)
        for w, g in zip(want, got):
            assert w.dtype == g.dtype and w.shape == g.shape
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_an_exported_treelstm_imported_trains_like_the_original(tmp_path):
    """``net.export`` of a hybridized TreeLSTM with a frozen embedding (grad_req 'null'),
    ``SymbolBlock.imports``, then gradients and two Adam steps: equal to the original."""
    from gluon_cf.models import TreeLSTM
    forest = [np.array(a, "f") for a in ([1, 2, 3, 4, 5], [-1, -1, 0, -1, 2],
                                         [-1, -1, 1, -1, 3], [4, 2, 4])]
    mx.random.seed(0)
    net = TreeLSTM(10, embed_size=4, hidden_size=3, num_classes=2)
    net.initialize(mx.init.Xavier())
    net.embed.weight.grad_req = "null"
    net.hybridize()
    net(*[mx.nd.array(a) for a in forest])
    net.export(str(tmp_path / "tree"))
    imported = gluon.SymbolBlock.imports(str(tmp_path / "tree-symbol.json"),
                                         ["data0", "data1", "data2", "data3"],
                                         str(tmp_path / "tree-0000.params"))
    imported.collect_params()[net.embed.weight.name].grad_req = "null"
    imported.hybridize()
    results = []
    for model in (net, imported):
        trainer = gluon.Trainer(model.collect_params(), "adam", {"learning_rate": 0.01})
        for _ in range(2):
            with autograd.record():
                loss = (model(*[mx.nd.array(a) for a in forest]) ** 2).sum()
            loss.backward()
            trainer.step(1)
        params = model.collect_params()
        results.append([model(*[mx.nd.array(a) for a in forest]).asnumpy()] +
                       [params[k].data().asnumpy() for k in sorted(net.collect_params())])
    for want, got in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
