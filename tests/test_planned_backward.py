"""The planned backward of ahead-of-time schedules (NOTE [planned backward] in
gluon_cf/recursion/planned_backward.py): its gradients equal the recorded schedule's and eager
Python recursion's; it runs only where it applies, and never hangs where a recursion runs
inside a loop's steps."""
import json
import subprocess
import sys
import textwrap

import hypothesis.strategies as st
import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings
from mxnet import gluon, nd

import gluon_cf
from gluon_cf.data.trees import (batchify_forest, build_vocab, encode_tree, parse_tree,
                                  synthetic_treebank)
from gluon_cf.models.recursive import TopDownTreeLSTM, TreeLSTM, TreeRNN
from gluon_cf.recursion import planned_backward, schedule
from test_schedule import (FORESTS, TOL, _EvenOdd, _ValueArgument, _assert_same, _forest,
                           _linear_tree, _run)


@pytest.fixture(autouse=True)
def restore_executor():
    previous = gluon_cf.get_executor()
    yield
    gluon_cf.set_executor(previous)
    planned_backward.ENABLED[0] = True


def _trained(net, inputs, planned):
    """``_run``'s outputs and gradients on a schedule, and how many runs were planned."""
    planned_backward.ENABLED[0] = planned
    before = planned_backward.RUNS[0]
    got = _run(net, inputs, "batched")
    return got, planned_backward.RUNS[0] - before


def _three_ways(net, inputs):
    """Planned, recorded and eager: equal; the first was planned, the second not."""
    eager = _run(net, inputs, None)
    planned, runs = _trained(net, inputs, True)
    recorded, none = _trained(net, inputs, False)
    assert runs >= 1 and none == 0, (runs, none)
    _assert_same(planned, recorded)
    _assert_same(planned, eager)


def _tree_lstm(vocab, seed=0):
    mx.random.seed(seed)
    net = TreeLSTM(len(vocab), embed_size=3, hidden_size=3, num_classes=2)
    net.initialize(mx.init.Xavier())
    return net


@settings(max_examples=6, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10 ** 6), shape=st.sampled_from(["sst", "balanced", "linear"]),
       trees=st.integers(1, 4), length=st.integers(1, 9))
def test_random_forests(seed, shape, trees, length):
    vocab, inputs = _forest(synthetic_treebank(trees, shape=shape, seed=seed, max_length=length))
    _three_ways(_tree_lstm(vocab, seed % 7), inputs)


@pytest.mark.parametrize("forest", sorted(FORESTS))   # single nodes, sst, balanced, mixed
def test_forests(forest):
    vocab, inputs = _forest(FORESTS[forest]())
    _three_ways(_tree_lstm(vocab), inputs)


def test_repeated_roots():
    vocab, inputs = _forest(FORESTS["sst"]())
    roots = inputs[3].asnumpy()
    inputs[3] = nd.array(np.concatenate([roots, roots[::-1], roots[:1]]))
    _three_ways(_tree_lstm(vocab), inputs)


def test_chain_deeper_than_the_recursion_limit():
    """1,201 levels (2,401 nodes), one planned group a level: more than Python's 1,000 frames
    would allow a plan that recursed once per level (equality is the point here; depth is
    proven by tests/test_recursion.py's 5,001 nodes and test_no_crash.py's 19,999 levels)."""
    vocab, inputs = _forest([_linear_tree(1201)])
    mx.random.seed(0)
    net = TreeRNN(len(vocab), embed_size=2, hidden_size=2, num_classes=2)
    net.initialize(mx.init.Xavier())
    planned, runs = _trained(net, inputs, True)
    recorded, none = _trained(net, inputs, False)
    assert runs == 1 and none == 0
    _assert_same(planned, recorded)


def test_mutual_recursion():
    trees = list(synthetic_treebank(5, shape="sst", seed=7, max_length=10)) + \
        [parse_tree("(1 good)")]
    vocab, inputs = _forest(trees)
    mx.random.seed(1)
    net = _EvenOdd(len(vocab))
    net.initialize(mx.init.Uniform(1.0))
    _three_ways(net, inputs)


class _TopLevel(gluon.HybridBlock):
    """The recursion node is the block's outermost gluon_cf node (no foreach around it)."""

    def __init__(self, vocab_size, hidden=3, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.embed = gluon.nn.Embedding(vocab_size, hidden)
            self.cell = gluon.nn.Dense(hidden, in_units=2 * hidden, activation="tanh",
                                       flatten=False)

    def hybrid_forward(self, F, tokens, left, right, root):
        @gluon_cf.recursive
        def node(idx):
            return gluon_cf.cond(
                F.take(left, idx) < 0, lambda: self.embed(F.take(tokens, idx)),
                lambda: self.cell(F.concat(node(F.take(left, idx)), node(F.take(right, idx)),
                                           dim=-1)))
        return node(root) * 2


def test_recursion_node_at_the_top_level():
    vocab, inputs = _forest(synthetic_treebank(1, shape="sst", seed=5, max_length=9))
    mx.random.seed(2)
    net = _TopLevel(len(vocab))
    net.initialize(mx.init.Uniform(1.0))
    _three_ways(net, inputs)


def test_unplannable_skeletons_keep_the_dynamic_executor():
    values = _ValueArgument()   # a value argument: the skeleton is not plannable
    values.initialize()
    inputs = [nd.array([[[3]], [[0]], [[5]]])]
    before = dict(schedule.RUNS)
    got, runs = _trained(values, inputs, True)
    assert runs == 0 and dict(schedule.RUNS) == before
    _assert_same(got, _run(values, inputs, None))

    mx.random.seed(0)
    net = TopDownTreeLSTM(input_size=4, hidden_size=5, max_depth=4)   # computed predicates
    net.initialize(mx.init.Xavier())
    z = nd.random.normal(0, 3, shape=(5, 4))
    grads = []
    for hybrid in (False, True):
        net.hybridize(active=hybrid)
        runs = planned_backward.RUNS[0]
        with mx.autograd.record():
            loss = net(z)[0].sum()
        loss.backward()
        grads.append({k: p.grad().asnumpy().copy() for k, p in net.collect_params().items()})
        assert planned_backward.RUNS[0] == runs
    for k in grads[0]:
        np.testing.assert_allclose(grads[1][k], grads[0][k], err_msg=k, **TOL)


# A recursion every step of a stateful foreach, under autograd.record(): the position where an
# earlier planned backward (an autograd Function nested inside the loop's backward) hung MXNet's
# threaded engine. Run in a subprocess with a timeout that fails on a hang or a signal. The
# first loop's recursion reads only the block's parameters (planned); the second's reads the
# loop state, an array computed on the tape after the first step (recorded).
_NESTED = textwrap.dedent("""
    import sys
    sys.path.insert(0, %(tests)r)
    import mxnet as mx, numpy as np
    from mxnet import autograd, gluon, nd
    import gluon_cf
    from gluon_cf.data.trees import synthetic_treebank
    from gluon_cf.recursion import planned_backward
    from test_schedule import _forest

    class Stateful(gluon.HybridBlock):
        def __init__(self, vocab_size, reads_state, **kwargs):
            super().__init__(**kwargs)
            self.reads_state = reads_state
            with self.name_scope():
                self.embed = gluon.nn.Embedding(vocab_size, 3)
                self.cell = gluon.nn.Dense(3, in_units=6, activation="tanh", flatten=False)

        def hybrid_forward(self, F, tokens, left, right, roots):
            def step(root, states):
                s = states[0]
                @gluon_cf.recursive
                def node(idx):
                    def leaf():
                        h = self.embed(F.take(tokens, idx))
                        return F.broadcast_add(h, s) if self.reads_state else h
                    return gluon_cf.cond(F.take(left, idx) < 0, leaf, lambda: self.cell(
                        F.concat(node(F.take(left, idx)), node(F.take(right, idx)), dim=-1)))
                h = node(root)
                return h, [F.tanh(s + h)]
            hs, last = gluon_cf.foreach(step, roots, [F.zeros((1, 3))])
            return F.reshape(hs, (-3, 0)).sum() + last[0].sum()

    vocab, inputs = _forest(synthetic_treebank(4, shape="sst", seed=3, max_length=8))
    for reads_state in (False, True):
        mx.random.seed(0)
        net = Stateful(len(vocab), reads_state)
        net.initialize(mx.init.Uniform(1.0))
        grads = []
        for hybrid in (False, True):
            net.hybridize(active=hybrid)
            before = planned_backward.RUNS[0]
            with autograd.record():
                loss = net(*inputs)
            loss.backward()
            grads.append({k: p.grad().asnumpy().copy() for k, p in net.collect_params().items()})
            runs = planned_backward.RUNS[0] - before
        # Four steps: each planned, or only the first (whose state is the loop's input).
        assert runs == (1 if reads_state else 4), (reads_state, runs)
        for k in grads[0]:
            np.testing.assert_allclose(grads[1][k], grads[0][k], rtol=1e-5, atol=1e-6,
                                       err_msg=k)
    print("ok")
""")


def test_recursion_in_every_step_of_a_stateful_foreach_does_not_hang(tmp_path):
    script = tmp_path / "nested.py"
    script.write_text(_NESTED % {"tests": str(__import__("pathlib").Path(__file__).parent)})
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    assert proc.stdout.strip().endswith("ok")


@pytest.mark.parametrize("model", [TreeLSTM, TreeRNN])
@pytest.mark.parametrize("forest", ["mixed", "sst"])
def test_static_recorded_groups(model, forest):
    """NOTE [static recorded groups]: the planned run's recorded group calls are static
    CachedOps (counted), and give the gradients of the dynamic ones and of eager recursion."""
    vocab, inputs = _forest(FORESTS[forest]())
    mx.random.seed(3)
    net = model(len(vocab), embed_size=4, hidden_size=3, num_classes=2)
    net.initialize(mx.init.Xavier())
    eager = _run(net, inputs, None)
    before = planned_backward.STATIC_CALLS[0]
    static, runs = _trained(net, inputs, True)
    assert runs >= 1 and planned_backward.STATIC_CALLS[0] > before
    planned_backward.STATIC[0] = False
    try:
        before = planned_backward.STATIC_CALLS[0]
        dynamic, _ = _trained(net, inputs, True)
        assert planned_backward.STATIC_CALLS[0] == before
    finally:
        planned_backward.STATIC[0] = True
    _assert_same(static, dynamic)
    _assert_same(static, eager)


def _dense_tanh(F, x, y):
    return [F.Activation(F.FullyConnected(x, y, num_hidden=3, no_bias=True, flatten=False),
                         act_type="tanh")]


_GRAPHS = {   # name: the outputs of inputs x, y (of shape (3, 3)) by MXNet's module F
    "add of an input": lambda F, x, y: [x + F.tanh(y)],
    "an input as output": lambda F, x, y: [x, F.tanh(y)],
    "an output twice": lambda F, x, y: [F.tanh(x) * y] * 2,
    "products added": lambda F, x, y: [x * y + F.sigmoid(x) * y],
    "tanh of a dense layer": _dense_tanh,
}


@pytest.mark.parametrize("name", sorted(_GRAPHS))
def test_gradient_passing_through_keeps_the_multiplication(name):
    """A static CachedOp whose input gets an output's gradient as is replaces that input's
    gradient buffer (grad_req add) instead of adding into it (MXNet 1.9.1): the check says so
    for every graph where that loses a gradient, and lets the others run without ``* 1``.
    Oracle: the same operators eagerly."""
    graph = _GRAPHS[name]
    symbol = mx.sym.Group(graph(mx.sym, mx.sym.var("x"), mx.sym.var("y")))
    passes = planned_backward._gradient_passes_through(json.loads(symbol.tojson()))
    rng = np.random.RandomState(0)
    values = [rng.uniform(-1, 1, (3, 3)) for _ in range(2)]
    x, y = (nd.array(v) for v in values)
    x.attach_grad(), y.attach_grad()
    with mx.autograd.record():
        (graph(nd, x, y)[0] * 2).sum().backward()
    op = mx.nd.CachedOp(symbol, flags=[("static_alloc", True)])
    x2, y2 = (nd.array(v) for v in values)
    gx, gy = nd.ones((3, 3)) * 5, nd.ones((3, 3)) * 5
    mx.autograd.mark_variables([x2, y2], [gx, gy], grad_reqs="add")
    with mx.autograd.record():
        out = op(x2, y2)
    out = out if isinstance(out, (list, tuple)) else [out]
    mx.autograd.backward(out[:1], [nd.ones(out[0].shape) * 2])
    right = all(np.allclose(g.asnumpy(), e.grad.asnumpy() + 5, rtol=1e-5, atol=1e-6)
                for g, e in ((gx, x), (gy, y)))
    assert passes or right, (name, gx.asnumpy(), x.grad.asnumpy())
    assert passes == (name in ("add of an input", "an input as output", "an output twice")), name
    if name in ("add of an input", "an input as output"):   # why the check exists
        assert not right


def test_long_schedules_keep_dynamic_recorded_groups():
    """A schedule of more than STATIC_GROUPS groups (a chain, one group per level) runs its
    recorded groups by the dynamic CachedOp (a static one keeps a state per outstanding call
    for good, NOTE [static recorded groups]); its gradients are eager's all the same."""
    vocab, inputs = _forest([_linear_tree(planned_backward.STATIC_GROUPS + 10)])
    before = planned_backward.STATIC_CALLS[0]
    _three_ways(_tree_lstm(vocab), inputs)
    assert planned_backward.STATIC_CALLS[0] == before
    vocab, inputs = _forest([_linear_tree(planned_backward.STATIC_GROUPS // 2 - 2)])
    _three_ways(_tree_lstm(vocab), inputs)
    assert planned_backward.STATIC_CALLS[0] > before


@pytest.mark.parametrize("model", [TreeLSTM, TreeRNN])
def test_sized_and_bulked_recorded_groups_across_batches(model):
    """NOTE [sized recorded groups], NOTE [bulked groups]: forests of one vocabulary in
    sequence through one hybridized net, so that the CachedOps of a row count and their states
    are reused by later forests on other tables, and a smaller forest runs on the rows kept
    from a larger one; each forest's outputs and gradients are eager recursion's, and those of
    the planned run with one CachedOp per graph and the other bulking."""
    forests = [FORESTS[name]() for name in ("sst", "mixed", "balanced", "sst")]
    forests.append(synthetic_treebank(9, shape="sst", seed=5, max_length=12))
    vocab = build_vocab([t for trees in forests for t in trees])
    mx.random.seed(4)
    net = model(len(vocab), embed_size=4, hidden_size=3, num_classes=2)
    net.initialize(mx.init.Xavier())
    every = []
    for trees in forests:
        forest = batchify_forest([encode_tree(t, vocab) for t in trees])
        every.append([nd.array(getattr(forest, n)) for n in ("tokens", "left", "right", "roots")])
    before, kept = planned_backward.SIZED_CALLS[0], planned_backward.KEPT_TABLES[0]
    gluon_cf.set_executor("batched", ahead_of_time=True)
    net.hybridize()   # once: one trace, so one plan keeps its tables' rows
    planned_backward.ENABLED[0] = True
    runs, sized = planned_backward.RUNS[0], []
    for inputs in every:
        with mx.autograd.record():
            out = net(*inputs)
            loss = (out * out).sum()
        loss.backward()
        sized.append(([out.asnumpy()], {k: p.grad().asnumpy().copy()
                                        for k, p in net.collect_params().items()}))
    assert planned_backward.RUNS[0] - runs == len(every)
    assert planned_backward.SIZED_CALLS[0] > before
    assert planned_backward.KEPT_TABLES[0] > kept   # a forest on an earlier one's tables
    for inputs, got in zip(every, sized):
        _assert_same(got, _run(net, inputs, None))
        bulk = planned_backward.BULK[0]   # the other way of bulking too (NOTE [bulked groups])
        planned_backward.SIZED_ROWS[0], planned_backward.BULK[0] = 0, 64 - bulk
        try:
            calls = planned_backward.SIZED_CALLS[0]
            plain, _ = _trained(net, inputs, True)
            assert planned_backward.SIZED_CALLS[0] == calls
        finally:
            planned_backward.SIZED_ROWS[0], planned_backward.BULK[0] = 64, bulk
        _assert_same(got, plain)


def test_views_off_the_tape_restore_recording():
    """NOTE [views off the tape]: recording is off inside ``Unrecorded`` and back as it was
    after it (also after an exception, and when it was off); a view made inside reads the
    array's rows."""
    from gluon_cf.recursion.views import Unrecorded, rows
    table = nd.arange(12).reshape((4, 3))
    with mx.autograd.record():
        with Unrecorded():
            assert not mx.autograd.is_recording()
            view = rows(table, 1, 3)
        assert mx.autograd.is_recording()
        with pytest.raises(ZeroDivisionError):
            with Unrecorded():
                1 / 0
        assert mx.autograd.is_recording()
    with Unrecorded():
        assert not mx.autograd.is_recording()
    assert not mx.autograd.is_recording()
    np.testing.assert_array_equal(view.asnumpy(), table.asnumpy()[1:3])
