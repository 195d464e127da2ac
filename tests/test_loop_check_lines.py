"""NOTE [where a node was made]: a hybridized loop's run-time check names
its own block's line, even when another block of the same prefix made a node of the same name
at another line (once it named the other block's line); a graph whose node has no known line
(loaded from a file in a fresh process) names no line rather than the ``net(x)`` call's."""
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

import gluon_cf
import gluon_cf.errors as errors

X = nd.array([[1, -1, 2], [1, 1, 1], [-1, -1, 3]])
S = nd.zeros((1,))
# the shapes boolean_mask(row, row > 0) gives per row (plain numpy: the oracle of the message)
ROWS = [(int((r > 0).sum()),) for r in X.asnumpy()]


def line(tag):
    lines = open(__file__).read().splitlines()
    return "%s:%d" % (__file__, next(k for k, t in enumerate(lines) if t.endswith(tag)) + 1)


class MaskingForeach(gluon.HybridBlock):
    def hybrid_forward(self, F, x, s):
        def body(d, st):
            return F.contrib.boolean_mask(d, d > 0), st
        return gluon_cf.foreach(body, x, [s])[0]   # LINE_A


class DoublingForeach(gluon.HybridBlock):
    def hybrid_forward(self, F, x, s):
        def body(d, st):
            return d * 2, st
        return gluon_cf.foreach(body, x, [s])[0]   # LINE_B


def _row0(F, x):
    return F.reshape(F.slice_axis(x, axis=0, begin=0, end=1), (-1,))   # (a Symbol's x[0]: output 0)


class MaskingWhile(gluon.HybridBlock):
    def hybrid_forward(self, F, x, s):
        def func(i, v):
            return i, (i + 1, F.contrib.boolean_mask(v, F.broadcast_greater(v, i)))
        return gluon_cf.while_loop(lambda i, v: i < 2, func, (s, _row0(F, x)),   # LINE_C
                                   max_iterations=3)[1][1]


class CountingWhile(gluon.HybridBlock):
    def hybrid_forward(self, F, x, s):
        return gluon_cf.while_loop(lambda i, v: i < 2, lambda i, v: (i, (i + 1, v * 2)),
                                   (s, _row0(F, x)), max_iterations=3)[1][1]   # LINE_D


def _message(fn):
    with pytest.raises(ValueError) as info:
        fn().asnumpy()
    return str(info.value)


@pytest.mark.parametrize("bad, good, tag, other, text", [
    (MaskingForeach, DoublingForeach, "# LINE_A", "# LINE_B",
     "step output 0 changes shape across steps:\n" + "\n".join(
         "  step %d: %s" % (t, shape) for t, shape in enumerate(ROWS))),
    (MaskingWhile, CountingWhile, "# LINE_C", "# LINE_D",
     "loop variable 1 changed from shape (3,) float32 to (2,) float32 in func"),
])
def test_same_prefix_blocks_name_their_own_line(bad, good, tag, other, text):
    eager = bad(prefix="model_")
    eager_text = "gluon_cf.%s at %s: %s" % (
        "foreach" if bad is MaskingForeach else "while_loop", line(tag), text)
    if bad is MaskingForeach:   # the eager call refuses step outputs alike, naming the line
        assert _message(lambda: eager(X, S)).startswith(eager_text)
    else:   # a loop variable may change shape eagerly, as in MXNet's while_loop: plain Python
        v = X.asnumpy()[0]
        for i in range(2):
            v = v[v > i]
        np.testing.assert_array_equal(eager(X, S).asnumpy(), v)
    a, b = bad(prefix="model_"), good(prefix="model_")
    a.hybridize()
    b.hybridize()
    assert _message(lambda: a(X, S)).startswith(eager_text.split("\n(in")[0])
    result = b(X, S).asnumpy()     # b's node has a's name, made at b's line
    want = X.asnumpy() * 2 if good is DoublingForeach else X.asnumpy()[0] * 4
    np.testing.assert_allclose(result, want)
    hybrid_text = _message(lambda: a(X, S))
    assert hybrid_text.startswith(eager_text.split("\n(in")[0]), hybrid_text
    assert line(other) not in hybrid_text


def test_node_of_no_known_line_names_no_line(tmp_path, monkeypatch):
    a = MaskingForeach()
    a.hybridize()
    a(nd.ones((3, 3)), S).wait_to_read()
    a.export(str(tmp_path / "a"))
    monkeypatch.setattr(errors, "_CREATED_AT", {})   # as in a fresh process
    net = gluon.SymbolBlock.imports(str(tmp_path / "a-symbol.json"), ["data0", "data1"],
                                    str(tmp_path / "a-0000.params"))
    text = _message(lambda: net(X, S))
    assert text.startswith("gluon_cf.foreach: step output 0 changes shape"), text
    assert __file__ not in text


def _grows_after(steps, op):
    """A body (``op``'s step function) that keeps its state's shape for ``steps`` calls, then
    doubles it: remat's backward recomputes the steps, and its check runs with no user frame."""
    calls = [0]

    def step(v):
        calls[0] += 1
        return nd.concat(v, v, dim=0) if calls[0] > steps else v * 1
    if op == "foreach":
        return lambda d, st: (d * st[0], [step(st[0])])
    return lambda i, v: (v * 1, (i + 1, step(v)))


def _run(op, fn, remat, x):
    if op == "foreach":
        return gluon_cf.foreach(fn, x, [nd.ones((2,))], remat=remat)[0]   # LINE_E
    return gluon_cf.while_loop(lambda i, v: i < 3, fn, (nd.zeros((1,)), x[0]),   # LINE_F
                               max_iterations=3, remat=remat)[0]


@pytest.mark.parametrize("op, tag", [("foreach", "# LINE_E"), ("while_loop", "# LINE_F")])
def test_eager_remat_backward_check_names_the_loop_line(op, tag):
    x = nd.ones((3, 2))
    x.attach_grad()
    with autograd.record():   # (eagerly without remat the state may change, as in MXNet)
        x_oracle = _message(lambda: _run(op, _grows_after(0, op), True, x))  # fails in forward
    head = "gluon_cf.%s at %s: " % (op, line(tag))
    assert x_oracle.startswith(head), x_oracle
    assert "with remat, " in x_oracle and "remat=False runs such a loop" in x_oracle
    with autograd.record():
        out = _run(op, _grows_after(3, op), True, x)   # the forward passes
        loss = out.sum()
    with pytest.raises(ValueError) as info:              # the recomputation refuses
        loss.backward()
        nd.waitall()
    assert str(info.value).startswith(x_oracle.split(";")[0]), str(info.value)
