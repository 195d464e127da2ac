"""Issue 24, hostile recursion round 26r. The blocks of ``hostile_programs26r.py`` and
``hostile_programs26r_b.py`` run plain (their ``plain_forward``: Python recursion on NDArrays,
the oracle), eagerly and hybridized on each executor (batched with ahead-of-time schedules,
batched dynamically, unbatched), recorded and in prediction (a hybridized block's inference
then runs in the calling thread, NOTE [recursion inference in the calling thread]); a sample
runs here. And what this round fixed."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

import gluon_cf
import hostile_harness
import hostile_programs26r as programs
import hostile_programs26r_b as programs_b
from gluon_cf import hybrid_inline
from test_recursion_hostile2 import make, run, with_mode

FILES = [programs.__file__, programs_b.__file__]
MODES = ("eager", "batched", "dynamic", "unbatched")
PROGRAMS = {**programs.PROGRAMS, **programs_b.PROGRAMS}


# ---- what this round fixed -------------------------------------------------------------------

class _NormBefore(gluon.HybridBlock):
    """BatchNorm over x, then a loop (``foreach``) or a recursion whose body reads its
    result, captured (the recursion sums the rows; "plain": its oracle)."""

    def __init__(self, ops, recursion=False, **kwargs):
        super().__init__(**kwargs)
        self.ops, self.recursion = ops, recursion
        with self.name_scope():
            self.bn = gluon.nn.BatchNorm(in_channels=3)

    def hybrid_forward(self, F, x, h):
        y = self.bn(x)
        if self.recursion == "plain":
            return F.sum(y, axis=0, keepdims=True).expand_dims(0), h
        if self.recursion:    # (each row: its own plus the next one's, the last alone)
            n = F.sum(F.ones_like(F.slice_axis(x, axis=1, begin=0, end=1)))

            @gluon_cf.recursive
            def down(i):
                return gluon_cf.cond(i + 1 < n, lambda: F.take(y, i) + down(i + 1),
                                     lambda: F.take(y, i))
            rows, _ = gluon_cf.foreach(lambda i, _: (down(i), []), F.zeros((1,)), [])
            return rows, h
        return (self.ops or F.contrib).foreach(
            lambda d, s: (d * 2 + s, F.broadcast_add(s, F.sum(y))), x, h)


def _trained(net, hybridize):
    mx.random.seed(0)
    net.initialize()
    if hybridize:
        net.hybridize()
    x = nd.array(np.random.RandomState(0).uniform(-1, 1, (4, 3)))
    h = nd.ones((3,))
    x.attach_grad()
    with autograd.record():
        out, state = net(x, h)
        loss = (out * out).sum() + state.sum()
    loss.backward()
    return [out.asnumpy(), state.asnumpy(), x.grad.asnumpy(),
            net.bn.running_mean.data().asnumpy(), net.bn.running_var.data().asnumpy()]


@pytest.mark.parametrize("recursion", [False, True], ids=["foreach", "recursion"])
def test_a_batchnorm_before_a_body_reading_its_result_trains_hybridized(recursion):
    """Round 26r: a BatchNorm applied before a loop (or a recursion) whose body reads its
    result refused hybridized training ("gluon_cf.foreach: body calls BatchNorm ... training
    is refused"): the check looked at the body's graph before the outer values were cut off
    (NOTE [what a body holds] in tracing.py). Outputs, x's gradient and the running
    statistics equal MXNet's own foreach (eager, hybridized) and eager gluon_cf."""
    want = _trained(_NormBefore(None, "plain" if recursion else False), False)
    for ops, hybridize in ((None, True), (gluon_cf, False), (gluon_cf, True)):
        got = _trained(_NormBefore(ops, recursion), hybridize)
        for k, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=(ops, k))


class _PassesStateThrough(gluon.HybridBlock):
    """A cond (or MXNet's own ``F.contrib.cond``: ``ops`` None) on x, and the state h returned
    as it came in: ``return out, h``."""

    def __init__(self, ops, **kwargs):
        super().__init__(**kwargs)
        self.ops = ops

    def hybrid_forward(self, F, x, h):
        out = (self.ops or F.contrib).cond(F.sum(x) > 0, lambda: x * 2, lambda: x * 3)
        return out, h


def _passed_through(net, flags):
    if flags is not None:
        net.hybridize(**flags)
    x = nd.array(np.random.RandomState(0).uniform(-1, 1, (4, 3)))
    h = nd.ones((3,))     # (no gradient asked of h)
    x.attach_grad()
    with autograd.record():
        out, state = net(x, h)
        loss = (out * out).sum() + (state * 3).sum()
    loss.backward()
    return [out.asnumpy(), state.asnumpy(), x.grad.asnumpy()]


@pytest.mark.parametrize("flags", [{}, {"static_alloc": True, "static_shape": True}],
                         ids=["hybridized", "static"])
def test_an_input_returned_as_an_output_trains_hybridized(flags):
    """Round 26r: a hybridized block holding a gluon_cf node and returning an input that needs
    no gradient as it came in (a state passed through), recorded: ``backward`` failed with
    MXNet's "storage_type_num_unknown_nodes (1 vs. 0)" (MXNet's own F.contrib.cond fails so;
    NOTE [an input returned as an output] in _cachedop.py). Values and x's gradient equal
    MXNet's eager cond."""
    want = _passed_through(_PassesStateThrough(None), None)
    got = _passed_through(_PassesStateThrough(gluon_cf), flags)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def _named_layers_in_both_branches(ops):
    x = mx.sym.var("x")
    return ops.cond(mx.sym.sum(x) > 0, lambda: mx.sym.FullyConnected(x, num_hidden=3, name="fc"),
                    lambda: mx.sym.FullyConnected(x * 2, num_hidden=3, name="fc"))


def _symbolic_recursion_sharing_a_layer():
    """Two functions in turn, each creating the layer "cell" (its variables twice)."""
    x, left, roots = mx.sym.var("x"), mx.sym.var("left"), mx.sym.var("roots")
    table = []

    def make(k):
        def body(i):
            def internal():
                return mx.sym.FullyConnected(table[1 - k](mx.sym.take(left, i)), num_hidden=3,
                                             name="cell")
            return gluon_cf.cond(mx.sym.take(left, i) < 0, lambda: mx.sym.take(x, i), internal)
        return gluon_cf.recursive(body, name="f%d" % k)
    table.extend(make(k) for k in range(2))
    out, _ = gluon_cf.foreach(lambda r, _: (table[0](r), []), roots, [])
    return out


@pytest.mark.parametrize("sign", [1, -1])
def test_layers_of_one_name_in_both_branches_share_their_variables(sign):
    """Round 26r: ``mx.sym.FullyConnected(..., name="fc")`` in both branches of a symbolic
    cond (each branch creates ``fc_weight`` and ``fc_bias``) was refused: "two different outer
    values are both named 'fc_weight'" (no line; MXNet binds arguments by name: NOTE
    [variables of one name] in tracing.py). It binds one ``fc_weight``, infers its shape (MXNet
    1.9.1's own cond lists it once but cannot infer it, even given), and trains as eager
    MXNet computes the branch taken."""
    with mx.name.NameManager():
        sym = _named_layers_in_both_branches(gluon_cf)
    assert sym.list_arguments() == ["x", "fc_weight", "fc_bias"]
    assert sym.infer_shape(x=(4, 3))[0] == [(4, 3), (3, 3), (3,)]
    values = {"x": nd.array(np.arange(12).reshape(4, 3) * sign - 0.5),
              "fc_weight": nd.array(np.arange(9).reshape(3, 3) / 10), "fc_bias": nd.ones((3,))}
    ex = sym.simple_bind(mx.cpu(), x=(4, 3))
    for name, value in values.items():
        ex.arg_dict[name][:] = value
    out = ex.forward(is_train=True)[0]
    ex.backward(nd.ones_like(out) * 2)
    for value in values.values():
        value.attach_grad()
    with autograd.record():
        x = values["x"] * (1 if float(values["x"].sum().asscalar()) > 0 else 2)
        want = nd.FullyConnected(x, values["fc_weight"], values["fc_bias"], num_hidden=3)
    want.backward(nd.ones_like(want) * 2)
    np.testing.assert_allclose(out.asnumpy(), want.asnumpy(), rtol=1e-6)
    for name, value in values.items():
        np.testing.assert_allclose(ex.grad_dict[name].asnumpy(), value.grad.asnumpy(),
                                   rtol=1e-6, err_msg=name)


def test_a_symbolic_recursion_of_two_functions_sharing_a_layer_binds_it_once():
    """Round 26r: the same with two recursive functions in turn, each creating the layer
    "cell": one ``cell_weight``; values and its gradient as plain Python recursion."""
    with mx.name.NameManager():
        sym = _symbolic_recursion_sharing_a_layer()
    assert sym.list_arguments().count("cell_weight") == 1
    left = [1, 2, -1, -1]
    values = {"x": nd.array(np.random.RandomState(3).uniform(-1, 1, (4, 3))),
              "left": nd.array(left), "roots": nd.array([0, 1, 3]),
              "cell_weight": nd.array(np.random.RandomState(4).uniform(-1, 1, (3, 3))),
              "cell_bias": nd.array([0.1, 0.2, 0.3])}
    ex = sym.bind(mx.cpu(), values, args_grad={"cell_weight": nd.zeros((3, 3))},
                  grad_req={"cell_weight": "write"})
    out = ex.forward(is_train=True)[0]
    ex.backward(nd.ones_like(out))
    w = values["cell_weight"].copy()
    w.attach_grad()
    with autograd.record():
        def node(i):
            if left[i] < 0:
                return values["x"][i:i + 1]
            return nd.FullyConnected(node(left[i]), w, values["cell_bias"], num_hidden=3)
        want = nd.stack(*[node(r) for r in (0, 1, 3)])
    want.backward()
    np.testing.assert_allclose(out.asnumpy(), want.asnumpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ex.grad_dict["cell_weight"].asnumpy(), w.grad.asnumpy(),
                               rtol=1e-5, atol=1e-6)


def _symbolic_tree_rnn():
    """A TreeRNN as a symbol: the weight w of its FullyConnected read inside the recursion."""
    x, left, right, roots, w = (mx.sym.var(n) for n in ("x", "left", "right", "roots", "w"))

    @gluon_cf.recursive
    def node(i):
        def internal():
            both = mx.sym.concat(node(mx.sym.take(left, i)), node(mx.sym.take(right, i)), dim=1)
            return mx.sym.tanh(mx.sym.FullyConnected(both, weight=w, no_bias=True, num_hidden=3))
        return gluon_cf.cond(mx.sym.take(left, i) < 0, lambda: mx.sym.take(x, i), internal)
    out, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
    return mx.sym.reshape(out, (-3, -2))


def _plain_tree_rnn(arrays, w):
    x, left, right, roots = arrays
    lt, rt = [int(v) for v in left], [int(v) for v in right]

    def node(i):
        if lt[i] < 0:
            return x[i:i + 1]
        both = nd.concat(node(lt[i]), node(rt[i]), dim=1)
        return nd.tanh(nd.FullyConnected(both, weight=w, no_bias=True, num_hidden=3))
    return nd.concat(*[node(int(r)) for r in roots], dim=0)


def test_executor_reshape_with_the_datas_shapes_keeps_a_weight_read_in_a_recursion():
    """Round 26r: ``Executor.reshape`` given the data's shapes alone (as ``Module.reshape``
    and a BucketingModule call it) of a symbol whose recursion reads a weight failed:
    "Shape of unspecifie arg: w changed" (the weight is not inferred from the data; NOTE
    [arguments a reshape leaves] in bind_shapes.py). It keeps its bound shape; values and x's
    gradient as plain Python recursion, on a larger then a smaller forest."""
    with mx.name.NameManager():
        sym = _symbolic_tree_rnn()
    w = nd.array(np.random.RandomState(5).uniform(-1, 1, (3, 6)))
    forests = [programs.TWO_BAL, programs.MIXED, programs.COMB]
    first = forests[0]
    ex = sym.simple_bind(mx.cpu(), x=first[0].shape, left=first[1].shape, right=first[2].shape,
                         roots=first[3].shape, w=(3, 6), grad_req={
                             "x": "write", "w": "write", "left": "null", "right": "null",
                             "roots": "null"})
    ex.arg_dict["w"][:] = w
    for arrays in forests:
        ex = ex.reshape(allow_up_sizing=True, **dict(zip(("x", "left", "right", "roots"),
                                                         (a.shape for a in arrays))))
        for name, a in zip(("x", "left", "right", "roots"), arrays):
            ex.arg_dict[name][:] = a
        assert ex.arg_dict["w"].shape == (3, 6)
        out = ex.forward(is_train=True)[0]
        ex.backward(nd.ones_like(out))
        x = nd.array(arrays[0])
        x.attach_grad()
        with autograd.record():
            want = _plain_tree_rnn([x] + list(arrays[1:]), ex.arg_dict["w"].copy())
        want.backward()
        np.testing.assert_allclose(out.asnumpy(), want.asnumpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), x.grad.asnumpy(), rtol=1e-5,
                                   atol=1e-6)


# ---- the programs: a sample run in CI (the round ran each on every mode) ---------------------

# (program, the executor its recorded calls run on): prediction runs on the batched executor,
# in the calling thread (NOTE [recursion inference in the calling thread])
SAMPLE = [(programs.HeadSoftmaxArgmaxAndSum, "dynamic"),
          (programs.LeafCountsAndSharedScalar, "unbatched"),
          (programs_b.ThreeFunctionsInTurn, "batched"),
          (programs.RecursionInsideBlockCond, "dynamic"),
          (programs.InputThroughBatchNormThenRecursion, "batched"),
          (programs_b.NaryLeafReturnsBiasMaxPool, "batched")]


@pytest.mark.parametrize("cls,mode", SAMPLE, ids=[c.__name__ for c, _ in SAMPLE])
def test_program_equals_plain_python_recorded_and_predicted(cls, mode):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for record in (True, False):
            net = make(cls)
            net.hybridize()
            before = hybrid_inline.INLINE_RUNS[0]
            for k, arrays in enumerate(PROGRAMS[cls][:3]):   # (mixed, one node, leaves)
                want = hostile_harness._outcome(
                    lambda: run(make(cls), arrays, plain=True, record=record))
                assert want[0] == "value", want[1]
                got = hostile_harness._outcome(lambda: with_mode(
                    mode if record else "batched", lambda: run(net, arrays, record=record)))
                hostile_harness.assert_equal_to_oracle(want, got, FILES, None, (record, k))
            if not record:
                assert hybrid_inline.INLINE_RUNS[0] - before == len(PROGRAMS[cls][:3])


class _CustomOpBefore(gluon.HybridBlock):
    """A user's CustomOp (doubling) applied to x before a foreach whose body reads it."""

    def hybrid_forward(self, F, x, h):
        y = F.Custom(x, op_type="hostile26r_scale2") if F is mx.sym else x * 2
        return gluon_cf.foreach(lambda d, s: (d + s, F.broadcast_add(s, F.sum(y))), x, h)


def test_a_user_custom_op_before_a_body_reading_its_result_trains_hybridized():
    """Round 26r: as the BatchNorm above, "body calls the user CustomOp ... training is
    refused" for a CustomOp outside the body; it trains as eager MXNet (x * 2 for it)."""
    results = []
    for hybridize in (False, True):
        net = _CustomOpBefore()
        if hybridize:
            net.hybridize()
        x = nd.array(np.random.RandomState(1).uniform(-1, 1, (4, 3)))
        x.attach_grad()
        with autograd.record():
            out, state = net(x, nd.ones((3,)))
            loss = (out * out).sum() + state.sum()
        loss.backward()
        results.append([out.asnumpy(), state.asnumpy(), x.grad.asnumpy()])
    for g, w in zip(*results[::-1]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


class _Chain(gluon.HybridBlock):
    """A chain down ``left`` from each root (a cycle in ``left``: RecursionDepthError)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=3, flatten=False)

    def hybrid_forward(self, F, x, left, roots):
        @gluon_cf.recursive(max_depth=6)
        def down(i):
            here = self.dense(F.take(x, i))
            return gluon_cf.cond(F.take(left, i) < 0, lambda: F.tanh(here),
                                 lambda: F.tanh(here + down(F.take(left, i))))
        out, _ = gluon_cf.foreach(lambda r, _: (down(r), []), roots, [])
        return out


def _chain(k):
    n = 3 + k % 4
    left = [(j + 1) % n for j in range(n)] if k % 3 == 0 else list(range(1, n)) + [-1]
    return [nd.array(np.random.RandomState(k).uniform(-1, 1, (n, 3))), nd.array(left),
            nd.array([0, n - 1])]


def _outcome_of(net, arrays):
    try:
        return net(*arrays).asnumpy()
    except gluon_cf.RecursionDepthError as err:
        assert hostile_harness.located(err, [__file__]), err
        return "RecursionDepthError"


def hybridized_and_eager(cls):
    """A hybridized block of ``cls`` and an eager one holding its parameters' values."""
    net = cls()
    net.initialize()
    net.hybridize()
    eager = cls()
    eager.initialize()
    for mine, theirs in zip(eager.collect_params().values(), net.collect_params().values()):
        mine.set_data(theirs.data())
    return net, eager


def lose_failures(monkeypatch):
    """Blocks' CachedOp calls whose Custom operator fails return their outputs unwritten, as
    when MXNet loses the failure to another thread's (NOTE [a failure lost to another
    thread] in hybrid_inline.py)."""
    from gluon_cf import hybrid
    real = hybrid._original_call_cached_op

    def losing(block, *args):
        out = real(block, *args)
        try:
            out.wait_to_read()
        except Exception:   # noqa: BLE001 - (its failure lost: its outputs never written)
            return nd.empty(out.shape)
        return out
    monkeypatch.setattr(hybrid, "_original_call_cached_op", losing)


def test_a_failure_lost_to_another_thread_raises_the_calling_threads_error(monkeypatch):
    """Round 26r: inference of a forest with a cycle (RecursionDepthError in the calling
    thread, then the Custom operator's run) from 6 threads at once returned values for 3 of
    48 calls: MXNet keeps one Custom-operator failure at a time, the other's outputs are
    left unwritten (NOTE [a failure lost to another thread] in hybrid_inline.py). Simulated
    here deterministically (the Custom operator's failure swallowed, its outputs unwritten),
    then with threads: every call raises or equals the eager block's value."""
    import threading
    net, eager = hybridized_and_eager(_Chain)
    wants = [_outcome_of(eager, _chain(k)) for k in range(12)]
    lose_failures(monkeypatch)
    assert _outcome_of(net, _chain(0)) == "RecursionDepthError"
    monkeypatch.undo()
    seen = {}

    def work(t):
        for k in range(t, 12, 6):
            seen[k] = _outcome_of(net, _chain(k))
    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, want in enumerate(wants):
        if isinstance(want, str):
            assert seen[k] == want, k
        else:
            np.testing.assert_allclose(seen[k], want, rtol=1e-5, atol=1e-6, err_msg=k)
