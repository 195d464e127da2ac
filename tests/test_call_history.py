"""Issue 24, item 2: no history in a block. A hybridized block's result for an input never
depends on the inputs it saw before: for every dynamic-shape test block, a random sequence of
calls (other shapes, masks that keep no row, loops of no step, with and without autograd)
gives, call by call, what the same call gives on a fresh block with the same parameters -
values and gradients, or an error of the same type and message. Sequences are seeded per
block (both executors), and chosen by hypothesis (derandomized) per block, hybridized and
static_alloc, with the outputs of recorded calls read before or after backward.

Oracle: a fresh hybridized block per call (its CachedOps have seen nothing else). Where a
call errors, both must raise alike; NOTE [zero-size calls] in ``graph/cached_graph.py`` says
which calls work (what works eagerly on zero-size arrays) and which are a ZeroSizeError.
"""
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import mxnet as mx
from mxnet import autograd, gluon, nd

import gluon_cf
from test_dynamic_shapes import POSITIONS, Net, _mask

SEED = 24
CALLS = 7
TOL = dict(rtol=1e-5, atol=1e-5)


def foreach_mask_of_closure(F, net, y, m):
    """The issue's case: a boolean_mask of a closure value in a foreach body, reduced."""
    def body(t, states):
        kept = _mask(F, y, m)
        return F.broadcast_mul(kept.sum(axis=0), t), [states[0] + kept.sum()]
    outs, (total,) = gluon_cf.foreach(body, F.arange(1, 4), [F.zeros((1,))])
    return outs, total


def while_mask_of_closure(F, net, y, m):
    """The issue's case: a boolean_mask of a closure value in a while_loop body, reduced."""
    def func(v, i):
        kept = _mask(F, y, m)
        return kept.sum(axis=0), [F.broadcast_add(v * 0.5, kept.mean()), i + 1]
    outs, (final, _) = gluon_cf.while_loop(lambda v, i: i < 3, func, [y, F.zeros((1,))],
                                           max_iterations=4)
    return outs, final


def foreach_mask_into_dense(F, net, y, m):
    """Arithmetic and a Dense on the masked rows inside a foreach body: MXNet refuses zero
    rows there (eagerly too), so an empty mask is an error, on every call alike."""
    def body(t, states):
        kept = F.contrib.boolean_mask(y, m)
        rows = net.after(F.broadcast_mul(kept, t.reshape((1, 1))))
        return rows.sum(axis=0), states
    return gluon_cf.foreach(body, F.arange(1, 3), [F.zeros((1,))])[0]


def while_zero_steps_then_reduced(F, net, y, m):
    """An exact-length loop that may run no step, its rows reduced after it."""
    outs, final = gluon_cf.while_loop(lambda v: v.norm() > 2, lambda v: (v.sum(axis=0), v * 0.5),
                                      y)
    return outs.sum(axis=0), final


def recursion_with_mask_in_loop(F, net, y, m):
    """A recursive function whose body masks inside a while_loop."""
    @gluon_cf.recursive
    def halve(v):
        def func(u, i):
            return _mask(F, u, m).sum(axis=0), [u * 0.5, i + 1]
        _, (u, _) = gluon_cf.while_loop(lambda u, i: i < 1, func, [v, F.zeros((1,))],
                                        max_iterations=2)
        return gluon_cf.cond(u.sum() < 1, lambda: u, lambda: halve(u))
    return halve(F.abs(y))


def recursion_with_zero_step_loop(F, net, y, m):
    """A recursive function whose exact-length loop runs no step for some arguments, its
    zero rows reduced."""
    @gluon_cf.recursive
    def settle(v):
        outs, u = gluon_cf.while_loop(lambda u: u.norm() > 2, lambda u: (u.sum(axis=0), u * 0.5),
                                      v)
        return gluon_cf.cond(u.sum() < 1, lambda: F.broadcast_add(u, outs.sum()),
                             lambda: settle(F.broadcast_add(u * 0.3, outs.sum() * 0)))
    return settle(F.abs(F.contrib.boolean_mask(y, m)).sum(axis=0, keepdims=True))


def foreach_over_masked_rows(F, net, y, m):
    """A foreach over the rows a mask keeps: a mask keeping none is no step to run, the same
    ValueError as eagerly (it once was a KeyError from the partitioned graph, hybridized)."""
    outs, (total,) = gluon_cf.foreach(lambda r, s: (r * 2, [s[0] + r]),
                                      F.contrib.boolean_mask(y, m), [F.zeros_like(y).sum(axis=0)])
    return outs.sum(axis=0), total


def mask_reshaped_in_foreach(F, net, y, m):
    """The masked rows reshaped inside a foreach body: zero rows are refused by the node
    while MXNet runs it (asynchronously), a call's error that must not reach later calls."""
    def body(t, states):
        kept = F.contrib.boolean_mask(y, m).reshape((-1, 3))
        return t * 2, [states[0] + kept.sum() + t.sum()]
    outs, (total,) = gluon_cf.foreach(body, F.arange(1, 3), [F.zeros((1,))])
    return net.after(F.broadcast_mul(y, total)), outs


def sums_of_no_rows_in_three_bodies(F, net, y, m):
    """Sums of the masked rows in a foreach, a while_loop and a cond body: a mask keeping no
    row is a sum of nothing, with zero gradients through it."""
    def body(t, states):
        return t * 2, [states[0] + _mask(F, y, m).sum() + t.sum()]
    outs, (total,) = gluon_cf.foreach(body, F.arange(1, 3), [F.zeros((1,))])
    _, (_, w) = gluon_cf.while_loop(
        lambda i, w: i < 2, lambda i, w: ([], [i + 1, w + _mask(F, y, m).sum(axis=0) * 0.5]),
        [F.zeros((1,)), F.zeros((3,))], max_iterations=3)
    picked = gluon_cf.cond(F.sum(m) >= 0, lambda: _mask(F, y, m).sum() * 3,
                           lambda: F.zeros((1,)))
    return outs.sum() + total + w.sum() + picked, w


BLOCKS = dict(POSITIONS)
BLOCKS.update({f.__name__: f for f in (
    foreach_mask_of_closure, while_mask_of_closure, foreach_mask_into_dense,
    while_zero_steps_then_reduced, recursion_with_mask_in_loop,
    recursion_with_zero_step_loop, foreach_over_masked_rows, mask_reshaped_in_foreach,
    sums_of_no_rows_in_three_bodies)})


def _calls(seed):
    """A random sequence of calls: (x, mask, recorded), rows from 3 to 6, masks keeping any
    number of rows (none included), scales giving loops of 0 to several steps."""
    rng = np.random.RandomState(seed)
    keeps = list(rng.choice(["none", "some", "all"], size=CALLS, p=[0.4, 0.4, 0.2]))
    keeps[0] = "all"                            # the issue's order: rows kept first,
    keeps[rng.randint(1, CALLS)] = "none"       # then none, at some later call
    calls = []
    for keep in keeps:
        rows = rng.randint(3, 7)
        mask = np.zeros(rows) if keep == "none" else np.ones(rows) if keep == "all" else \
            (rng.rand(rows) > 0.5) * 1.0
        scale = rng.choice([0.05, 0.5, 2.0])
        calls.append((nd.array(rng.randn(rows, 3) * scale), nd.array(mask), rng.rand() < 0.5))
    return calls


def _outcome(net, x, m, recorded, read_first=False):
    """Outputs (and, recorded, every gradient) as numpy, or the error's type and message.
    ``read_first``: the outputs are read before backward is called (after an error too: the
    order in which a loaded machine may run ``backward(); asnumpy()``)."""
    try:
        if not recorded:
            out = net(x, m)
            outs = out if isinstance(out, (list, tuple)) else [out]
            return "values", [o.asnumpy() for o in outs]
        for p in net.collect_params().values():
            p.zero_grad()
        x = x.copy()
        x.attach_grad()
        with autograd.record():
            out = net(x, m)
            outs = out if isinstance(out, (list, tuple)) else [out]
            loss = sum((o.astype("float32") * (k + 1)).sum() for k, o in enumerate(outs))
        if read_first:
            try:
                values = [o.asnumpy() for o in outs]
            finally:
                try:
                    loss.backward()
                except Exception:   # noqa: BLE001 - the error read first is the call's
                    pass
            grads = [p.grad().asnumpy() for _, p in sorted(net.collect_params().items())]
            return "values", values + grads + [x.grad.asnumpy()]
        loss.backward()
        grads = [p.grad().asnumpy() for _, p in sorted(net.collect_params().items())]
        return "values", [o.asnumpy() for o in outs] + grads + [x.grad.asnumpy()]
    except Exception as err:   # noqa: BLE001 - compared below
        return "error", (type(err).__name__, _normalised(str(err)))


def _normalised(message):
    """An error message without what differs between two blocks of one class: MXNet's time
    stamps and the numbers Gluon gives block names (net3_dense1 / net7_dense1)."""
    message = re.sub(r"\[\d\d:\d\d:\d\d\] ", "", message)
    return re.sub(r"\b([a-z]+)\d+(?=[_'])", r"\1#", message)


def _fresh_like(net, body, static=False):
    fresh = Net(body)
    fresh.initialize()   # every parameter's shape is known (in_units given)
    for (_, mine), (_, theirs) in zip(sorted(fresh.collect_params().items()),
                                      sorted(net.collect_params().items())):
        mine.set_data(theirs.data())
    fresh.hybridize(static_alloc=static, static_shape=static)
    return fresh


def _same(got, want, where):
    assert got[0] == want[0], (where, got, want)
    if got[0] == "error":
        assert got[1] == want[1], where
        return
    assert [g.shape for g in got[1]] == [w.shape for w in want[1]], where
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, err_msg=where, **TOL)


@pytest.mark.parametrize("executor", ["batched", "unbatched"])
@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_a_call_gives_what_it_gives_on_a_fresh_block(name, executor):
    previous = gluon_cf.get_executor()
    gluon_cf.set_executor(executor)
    try:
        mx.random.seed(0)
        net = Net(BLOCKS[name])
        net.initialize(mx.init.Xavier())
        net.hybridize()
        outcomes = set()
        for k, (x, m, recorded) in enumerate(_calls(SEED + len(name))):
            where = "%s, call %d: x %s, mask %s, %s" % (
                name, k, x.shape, m.asnumpy().tolist(), "recorded" if recorded else "inference")
            got = _outcome(net, x, m, recorded)
            want = _outcome(_fresh_like(net, BLOCKS[name]), x, m, recorded)
            _same(got, want, where)
            outcomes.add(got[0])
        # The block is still usable: a call with a mask keeping rows works after anything.
        x, m = nd.array(np.random.RandomState(1).randn(5, 3)), nd.array([1, 0, 1, 1, 0])
        _same(_outcome(net, x, m, True), _outcome(_fresh_like(net, BLOCKS[name]), x, m, True),
              name + ", last call")
    finally:
        gluon_cf.set_executor(previous)


def test_a_foreach_over_a_mask_keeping_no_row_is_eager_modes_error_hybridized():
    """Zero rows to loop over: hybridized, the ValueError eager mode raises (a bare KeyError
    from the partitioned graph before), on every call, and the block still works after."""
    x = nd.array(np.random.RandomState(2).randn(4, 3))
    none, some = nd.zeros((4,)), nd.array([1, 0, 1, 0])
    messages, totals = [], []
    for hybridize in (False, True):
        net = Net(foreach_over_masked_rows)
        mx.random.seed(3)   # the same parameters in both modes
        net.initialize(mx.init.Xavier())
        if hybridize:
            net.hybridize()
        for _ in range(2):
            with pytest.raises(ValueError, match="data has length 0 along axis 0") as err:
                net(x, none)
            messages.append(str(err.value))
        totals.append(net(x, some)[1].asnumpy())
    assert len(set(messages)) == 1, messages
    np.testing.assert_allclose(totals[1], totals[0], **TOL)


def test_the_issue_case_empty_mask_after_a_kept_row_in_a_foreach():
    """A non-empty mask, then an all-zero one, then a non-empty one: each as on a fresh block
    (the all-zero one once raised ZeroSizeError about a loop of no step, and broke the block)."""
    net = Net(foreach_mask_of_closure)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    x = nd.array(np.random.RandomState(0).randn(5, 3))
    some, none = nd.array([0, 1, 0, 1, 1]), nd.zeros((5,))
    first = _outcome(net, x, some, False)
    empty = _outcome(net, x, none, False)
    assert empty[0] == "values", empty
    _same(empty, _outcome(_fresh_like(net, foreach_mask_of_closure), x, none, False), "empty")
    np.testing.assert_allclose(empty[1][0], np.zeros((3, 3)))   # sums over no row
    _same(_outcome(net, x, some, False), first, "again")


def test_an_operator_refusing_zero_rows_is_one_clear_error_every_time():
    """broadcast_mul on the rows of a mask that kept none, in a foreach body: the same
    ZeroSizeError on every call, naming the operator, the user's line and the mask's."""
    net = Net(foreach_mask_into_dense)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    x = nd.ones((5, 3))
    messages = set()
    for m in (nd.zeros((5,)), nd.ones((5,)), nd.zeros((5,)), nd.zeros((5,))):
        outcome = _outcome(net, x, m, False)
        if m.sum().asscalar() == 0:
            assert outcome[0] == "error" and outcome[1][0] == "ZeroSizeError", outcome
            messages.add(outcome[1][1])
        else:
            assert outcome[0] == "values"
    assert len(messages) == 1, messages
    message = messages.pop()
    assert re.search(r"broadcast_mul at .*test_call_history\.py:\d+ \(node '.*'\) was given a "
                     r"zero-size array \(input 0 of shape \(0, 3\), the result of "
                     r"_contrib_boolean_mask at .*test_call_history\.py:\d+\)", message), message


def two_rows_in_a_body(F, net, y, m):
    """A broadcast in a loop body that fits masks keeping one or two rows only."""
    def body(t, states):
        rows = F.broadcast_add(_mask(F, y, m), F.ones((2, 3)))
        return F.broadcast_mul(rows, t.reshape((1, 1))), states
    return gluon_cf.foreach(body, F.arange(1, 3), [F.zeros((1,))])[0]


def two_rows_after_a_node(F, net, y, m):
    """The same broadcast in the block's own graph, after a node of static shapes: the
    block's graph runs as one CachedOp."""
    kept = gluon_cf.cond(m.sum() > 0, lambda: _mask(F, y, m).sum(axis=0, keepdims=True),
                         lambda: y.sum(axis=0, keepdims=True))
    return F.broadcast_add(F.broadcast_mul(F.ones_like(y), kept), F.ones((2, 3)))


X5 = nd.array(np.random.RandomState(0).randn(5, 3))


@pytest.mark.parametrize("body, fails, fits", [
    (two_rows_in_a_body, (X5, nd.array([1, 1, 0, 1, 0])), (X5, nd.array([0, 1, 0, 1, 0]))),
    (two_rows_after_a_node, (X5[:3], nd.array([1, 0, 1])), (X5[:2], nd.array([1, 0])))],
    ids=["body", "block"])
def test_a_failed_shape_inference_leaves_the_block_as_it_was(body, fails, fits):
    """A broadcast that fits only some inputs: a call that fails gives the same error every
    time (a CachedOp whose shape inference had failed once answered the next call with "Graph
    attr dependency shape is required by pass MXPlanMemory", or "Cannot find attribute shape
    in the graph"), and a call that fits works after it."""
    net = Net(body)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    failed = [_outcome(net, *fails, recorded) for recorded in (False, False, True, False)]
    assert all(f[0] == "error" for f in failed), failed
    assert len({f[1] for f in failed}) == 1, failed
    assert "broadcast_add" in failed[0][1][1], failed[0]
    for recorded in (False, True):
        _same(_outcome(net, *fits, recorded), _outcome(_fresh_like(net, body), *fits, recorded),
              "fits")
    assert _outcome(net, *fails, False) == failed[0]


def _masked_sums(select):
    """A foreach and a while_loop summing the rows of y a mask keeps, ``select(F, y, m)``
    choosing them: boolean_mask, or (the oracle) a product by the mask, equal for every mask,
    values and gradients."""
    def body(F, net, y, m):
        def step(t, states):
            kept = select(F, y, m)
            return F.broadcast_mul(kept.sum(axis=0), t), [states[0] + kept.sum()]
        outs, (total,) = gluon_cf.foreach(step, F.arange(1, 3), [F.zeros((1,))])

        def func(v, i):
            kept = select(F, y, m)
            return kept.sum() * 0.5, [F.broadcast_add(v, kept.sum(axis=0)), i + 1]
        steps, (v, _) = gluon_cf.while_loop(lambda v, i: i < 2, func,
                                            [F.zeros((3,)), F.zeros((1,))], max_iterations=3)
        return net.after(outs), total, steps, v
    return body


def test_empty_masks_in_loop_bodies_work_with_gradients():
    """A mask that keeps no row inside loop bodies, hybridized and recorded: the values of
    sums over no row and zero gradients through them, as the product by the mask gives
    (eager MXNet 1.x cannot differentiate through a zero-size array at all)."""
    by_mask = Net(_masked_sums(lambda F, y, m: _mask(F, y, m)))
    by_product = Net(_masked_sums(lambda F, y, m: F.broadcast_mul(y, m.reshape((-1, 1)))))
    by_mask.initialize(mx.init.Xavier())
    by_product.initialize()
    for (_, mine), (_, theirs) in zip(sorted(by_product.collect_params().items()),
                                      sorted(by_mask.collect_params().items())):
        mine.set_data(theirs.data())
    by_mask.hybridize()
    x = nd.array(np.random.RandomState(3).randn(5, 3))
    for m in ([0, 0, 0, 0, 0], [1, 0, 1, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]):
        got = _outcome(by_mask, x, nd.array(m), True)
        want = _outcome(by_product, x, nd.array(m), True)   # eager
        _same(got, want, "mask %s" % m)


@pytest.mark.parametrize("static", [False, True], ids=["hybridize", "static_alloc"])
def test_the_backward_of_a_refused_call_leaves_no_error_for_the_next_call(static):
    """A call refused inside a node (zero rows into broadcast_mul in a foreach body), its
    refusal read, and its backward run after that (the order a loaded machine gives
    ``backward(); asscalar()``): the node's backward ran its failed forward again and left a
    second copy of the error on buffers the block reuses, and the next call, which works on a
    fresh block, raised it (NOTE [backward of a failed forward] in gluon_cf/node.py). Also:
    an error not yet read still reaches its reader, the gradient."""
    net = Net(foreach_mask_into_dense)
    net.initialize(mx.init.Xavier())
    net.hybridize(static_alloc=static, static_shape=static)
    x, some, none = nd.ones((5, 3)), nd.array([1, 0, 1, 1, 0]), nd.zeros((5,))
    want = _outcome(_fresh_like(net, foreach_mask_into_dense), x, some, True)
    _same(_outcome(net, x, some, True), want, "before")
    for _ in range(2):
        with autograd.record():
            out = net(x, none)
            loss = out.sum()
        with pytest.raises(gluon_cf.ZeroSizeError):
            loss.asscalar()
        loss.backward()
        _same(_outcome(net, x, some, True), want, "after a refusal and its backward")
    data = x.copy()
    data.attach_grad()
    with autograd.record():
        loss = net(data, none).sum()
    loss.backward()
    with pytest.raises(gluon_cf.ZeroSizeError):   # read first: the call's error, not lost
        data.grad.asnumpy()
    _same(_outcome(net, x, some, True), want, "after a refusal read from the gradient")


# ---- hypothesis: random sequences of calls, hybridized and static_alloc --------------------

POOL = 5                 # calls per block hypothesis draws from (their oracles are cached)
_ORACLES: dict = {}      # (block, static, call, recorded) -> outcome on a fresh block


def _pool(name):
    """POOL calls of _calls, the second one's mask keeping no row."""
    pool = _calls(SEED * 7 + len(name))[:POOL]
    x, _, recorded = pool[1]
    pool[1] = (x, nd.zeros((x.shape[0],)), recorded)
    return pool


@pytest.mark.parametrize("static", [False, True], ids=["hybridize", "static_alloc"])
@pytest.mark.parametrize("name", sorted(BLOCKS))
@settings(max_examples=3, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(sequence=st.lists(st.tuples(st.integers(0, POOL - 1),
                                   st.sampled_from(["inference", "recorded", "read first"])),
                         min_size=3, max_size=6))
def test_random_sequences_of_calls_give_what_each_gives_on_a_fresh_block(static, name,
                                                                         sequence):
    """For every block, hypothesis chooses sequences of calls (masks keeping all, some or no
    rows, loops of 0 to several steps, calls refused; inference, recorded with backward, and
    recorded with the outputs read before backward). Each call gives what it gives on a fresh
    block with the same parameters and flags: values and gradients, or the same error; and
    the block still works after the sequence."""
    mx.random.seed(0)
    net = Net(BLOCKS[name])
    net.initialize(mx.init.Xavier())
    parameters = tuple(float(p.data().sum().asscalar()) for _, p in
                       sorted(net.collect_params().items()))   # the same from seed 0
    net.hybridize(static_alloc=static, static_shape=static)
    pool = _pool(name)
    for k, (index, how) in enumerate(sequence + [(0, "recorded")]):
        x, m, _ = pool[index]
        recorded = how != "inference"
        key = (name, static, index, recorded, parameters)
        if key not in _ORACLES:
            _ORACLES[key] = _outcome(_fresh_like(net, BLOCKS[name], static), x, m, recorded)
        got = _outcome(net, x, m, recorded, read_first=how == "read first")
        _same(got, _ORACLES[key], "%s, call %d of %s: x %s, mask %s" % (
            name, k, sequence, x.shape, m.asnumpy().tolist()))


class _DrawingLoop(gluon.HybridBlock):
    """A loop whose body draws random numbers: Dropout (training) and uniform noise (both)."""

    def __init__(self, mxnet_foreach=False, **kwargs):
        super().__init__(**kwargs)
        self.mxnet_foreach = mxnet_foreach
        with self.name_scope():
            self.dense = gluon.nn.Dense(4, in_units=4, flatten=False)
            self.drop = gluon.nn.Dropout(0.5)

    def hybrid_forward(self, F, x):
        foreach = F.contrib.foreach if self.mxnet_foreach else gluon_cf.foreach

        def step(row, states):
            h = self.drop(self.dense(row)) + F.random.uniform_like(row) + states[0]
            return h, [h]
        out, _ = foreach(step, x, [F.zeros((4,))])
        return out


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize("mxnet_foreach", [True, False], ids=["mxnet", "gluon_cf"])
def test_the_users_seed_fixes_what_a_hybridized_node_draws(mxnet_foreach, train, static):
    """NOTE [the caller's seed]: with the same ``mx.random.seed``, a hybridized block whose
    gluon_cf loop draws random numbers gives the same values and gradients on every run, as
    MXNet's own foreach does (gluon_cf's body drew on a worker thread the seed never reached:
    other values on every run); successive calls still draw anew. A static_alloc CachedOp
    keeps its operators: only its first call's draws are the seed's there."""
    x = mx.nd.array(np.random.RandomState(0).uniform(-1, 1, (3, 4)))
    runs = []
    for _ in range(2):
        mx.random.seed(0)
        net = _DrawingLoop(mxnet_foreach)
        net.initialize(mx.init.Xavier())
        net.hybridize(static_alloc=static, static_shape=static)
        calls = []
        for _ in range(3):
            with autograd.record(train_mode=train):
                y = net(x)
            y.backward()
            calls.append([y.asnumpy(), net.dense.weight.grad().asnumpy().copy()])
        runs.append(calls)
    repeated = 1 if static and not mxnet_foreach else 3
    for first, second in zip(runs[0][:repeated], runs[1][:repeated]):
        for a, b in zip(first, second):
            np.testing.assert_array_equal(a, b)
    assert not np.array_equal(runs[0][0][0], runs[0][1][0])   # each call draws anew
