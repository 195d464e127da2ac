"""Round 29r (issue 24): a recursive body changing Python state deeper than one name (items
of items, attributes of attributes, a helper's closure, a class attribute, a numpy array...):
eagerly plain Python's values, hybridized refused at the statement's line; before, hybridized
gave the count of one trace for every call, silently (NOTE [Python state in a recursive
body])."""
import inspect
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import nd
from mxnet.gluon import HybridBlock

import gluon_cf

import hostile_programs29r as TREES
import python_state_programs29r as programs

LEFT, RIGHT = [1, 3, -1, -1, -1], [2, 4, -1, -1, -1]
XS = np.arange(15, dtype="float32").reshape(5, 3)
ARGS = [XS, np.array(LEFT, "float32"), np.array(RIGHT, "float32"), np.array([0], "float32")]


def counted(i, calls, at_entry=False):
    """Plain recursion: x_i at a leaf, else node(l) + node(r) * (the count of calls so far,
    ``at_entry``: when the call began)."""
    calls[0] += 1
    k = calls[0]
    if LEFT[i] < 0:
        return XS[i:i + 1]
    left = counted(LEFT[i], calls, at_entry)
    return left + counted(RIGHT[i], calls, at_entry) * (k if at_entry else calls[0])


def _line_of(text):
    lines, _ = inspect.getsourcelines(programs)
    found = [k + 1 for k, line in enumerate(lines) if line.strip() == text]
    assert found, text
    return found


@pytest.mark.parametrize("cls,statement", programs.READ, ids=[c.__name__ for c, _ in
                                                              programs.READ])
def test_deep_state_the_value_reads_is_refused_at_its_line(cls, statement):
    want = counted(0, [0], getattr(cls, "AT_ENTRY", False))
    np.testing.assert_allclose(want, [[39, 43, 47]] if getattr(cls, "AT_ENTRY", False) else
                               [[87, 97, 107]])
    net = cls()
    np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want)
    np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want)   # (state reset)
    net.hybridize()
    with pytest.raises(NotImplementedError) as err:
        net(*map(nd.array, ARGS))
    where, rest = str(err.value).split(": ", 1)
    path, line = where.rsplit(":", 1)
    assert path == programs.__file__ and int(line) in _line_of(statement), str(err.value)
    assert rest.startswith("gluon_cf.recursive: 'node' changes Python state ("), rest
    assert "that its value depends on" in rest


def test_deep_state_the_value_does_not_read_is_a_warning_at_its_line():
    """A log of the calls in a dict of lists: the graph does not read it, so the values are
    plain Python's; hybridized the log grows per trace: a warning at the statement."""
    net = programs.DeepLog()
    want = programs.scaled(0)
    np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want)
    assert len(net.log["calls"]) == 5
    net.hybridize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want)
    mine = [w for w in caught if "changes Python state (self.log['calls'])" in str(w.message)]
    assert len(mine) == 1 and "once per trace" in str(mine[0].message), [
        str(w.message) for w in caught]
    assert (mine[0].filename, mine[0].lineno) == (
        programs.__file__, _line_of('self.log["calls"].append(1)')[0])


# ---- recursion ported from TreeLSTM/TreeRNN code, against plain Python recursion ------------

@pytest.mark.parametrize("mode", ["eager", "batched"])
@pytest.mark.parametrize("cls", list(TREES.PROGRAMS), ids=lambda c: c.__name__)
def test_ported_tree_program_equals_plain_python(cls, mode):
    """Outputs, input and parameter gradients equal plain Python recursion's, eagerly and
    hybridized (the default batching executor)."""
    import hostile_harness
    from test_recursion_hostile2 import make, run, with_mode
    net = make(cls)
    if mode != "eager":
        net.hybridize()
    for k, arrays in enumerate(TREES.PROGRAMS[cls]):
        oracle_net = make(cls)
        want = hostile_harness._outcome(lambda: run(oracle_net, arrays, plain=True))
        assert want[0] == "value", want[1]
        got = hostile_harness._outcome(lambda: with_mode(mode, lambda: run(net, arrays)))
        hostile_harness.assert_equal_to_oracle(want, got, [TREES.__file__], (1e-4, 1e-5),
                                               (mode, k))


# ---- eager remat: an argument computed in the body from values needing a gradient -------------

class _TopDown(HybridBlock):
    """A parent's state passed down (``down = tanh(u(top))``); ``mutual``: ``outer`` passes
    it to ``inner``, which calls ``outer`` on indices only (a node of its own again)."""

    def __init__(self, remat, mutual=False):
        super().__init__()
        self.remat, self.mutual = remat, mutual
        with self.name_scope():
            self.u = mx.gluon.nn.Dense(3, in_units=3, flatten=False)

    def hybrid_forward(self, F, x, left, right, root):
        leaf = lambda i: F.take(left, i) < 0   # noqa: E731
        if self.mutual:
            table = {}

            @gluon_cf.recursive(remat=self.remat)
            def outer(i):
                return table["inner"](i, F.tanh(self.u(F.take(x, i))))

            @gluon_cf.recursive(remat=self.remat)
            def inner(i, h):
                return gluon_cf.cond(leaf(i), lambda: h * 2, lambda: h * outer(
                    F.take(left, i)) + outer(F.take(right, i)))
            table["inner"] = inner
            return outer(root)

        @gluon_cf.recursive(remat=self.remat)
        def node(i, top):
            down = F.tanh(self.u(top))
            return gluon_cf.cond(leaf(i), lambda: F.take(x, i) * down, lambda: node(
                F.take(left, i), down) - node(F.take(right, i), top * 0.5))
        return node(root, F.ones((1, 3)))


def _top_down_plain(net, x, mutual):
    """Plain Python recursion on NDArrays (the tree read on the host)."""
    if mutual:
        def outer(i):
            h = nd.tanh(net.u(x[i:i + 1]))
            return h * 2 if LEFT[i] < 0 else h * outer(LEFT[i]) + outer(RIGHT[i])
        return outer(0)

    def node(i, top):
        down = nd.tanh(net.u(top))
        return x[i:i + 1] * down if LEFT[i] < 0 else \
            node(LEFT[i], down) - node(RIGHT[i], top * 0.5)
    return node(0, nd.ones((1, 3)))


def _grads_of(net, run):
    x = nd.array(XS / 10)
    x.attach_grad()
    with mx.autograd.record():
        y = run(x)
    y.backward()
    return [y.asnumpy(), x.grad.asnumpy(), net.u.weight.grad().asnumpy(),
            net.u.bias.grad().asnumpy()]


@pytest.mark.parametrize("mutual", [False, True], ids=["passed-down", "mutual"])
def test_eager_remat_runs_a_call_whose_argument_the_body_computed(mutual):
    """Before: NotImplementedError "argument 1 of a call to 'node' is computed in the body"
    eagerly with remat, where hybridized remat accepts it. Now the same values and gradients
    as plain Python recursion, remat=False, and hybridized remat."""
    results = {}
    for name, remat, hybrid in (("plain", False, None), ("eager", False, False),
                                ("eager remat", True, False), ("hybrid remat", True, True)):
        mx.random.seed(0)
        net = _TopDown(remat, mutual)
        net.initialize(mx.init.Xavier())
        if hybrid:
            net.hybridize()
        rest = [nd.array(LEFT), nd.array(RIGHT), nd.array([0])]
        results[name] = _grads_of(net, (lambda x: _top_down_plain(net, x, mutual)) if
                                  name == "plain" else (lambda x: net(x, *rest)))
    for name in ("eager", "eager remat", "hybrid remat"):
        for got, want in zip(results[name], results["plain"]):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)
