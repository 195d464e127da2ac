"""Issue 24, hostile recursion round 25r. The blocks of ``hostile_programs25r.py``, ``_b.py``
and ``_c.py`` run plain (their ``plain_forward``: Python recursion on NDArrays, the oracle),
eagerly, and hybridized on each executor (batched with ahead-of-time schedules, batched
dynamically, unbatched), recorded: outputs, input and parameter gradients equal the
oracle's (float32: rtol 1e-4, atol 1e-5); warnings name the programs' files. Then a random
sequence of calls on one hybridized block (recorded or not, malformed calls among them) equals
the oracle call by call; ``grad_req='add'`` over several calls, Dropout in predict and train
mode, and what this round fixed."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd

import hostile_harness
import hostile_programs25r as programs_a
import hostile_programs25r_b as programs_b
import hostile_programs25r_c as programs_c
from conftest import run_python
from test_recursion_hostile2 import make, run, with_mode

FILES = [programs_a.__file__, programs_b.__file__, programs_c.__file__]
MODES = ("eager", "batched", "dynamic", "unbatched")
TOL = (1e-4, 1e-5)
PROGRAMS = {**programs_a.PROGRAMS, **programs_b.PROGRAMS, **programs_c.PROGRAMS}

_ORACLES: dict = {}


def oracle(cls, k, record=True):
    if (cls, k, record) not in _ORACLES:
        net = make(cls)
        _ORACLES[cls, k, record] = hostile_harness._outcome(
            lambda: run(net, PROGRAMS[cls][k], plain=True, record=record))
    return _ORACLES[cls, k, record]


def _cases():
    """(program, mode): every program eagerly and on the batched executor with schedules; the
    dynamic and the unbatched executor each on every other program (the suite's time: the
    round ran every program on all four); the chain of 3,000 nodes batched, the forest of 500
    trees eagerly, batched and dynamically."""
    for k, cls in enumerate(PROGRAMS):
        modes = ("batched",) if cls is programs_b.ChainOfThreeThousand else \
            MODES[:3] if cls is programs_b.FiveHundredTrees else MODES[:2] + (MODES[2 + k % 2],)
        yield from (pytest.param(cls, m, id="%s-%s" % (cls.__name__, m)) for m in modes)


# (the call histories of the programs with the most per-call state: constants and loops in
# bodies, outputs of several dtypes, values decided trees, forests of one size and two shapes)
HISTORY = [programs_a.TreeLstmReturnsHAndC, programs_a.SizeHeightAndVectorDtypes,
           programs_a.ContextFromAllNodesChangesPerCall, programs_a.BaseCaseByFeatureSum,
           programs_a.LeafWhileLoopWithConstantCounter, programs_a.DepthArgumentAndKeywordCall,
           programs_b.RematThreeFunctionsInTurn, programs_b.TopDownDecoderSumsAndCounts,
           programs_b.ForeachRootsCarriesPreviousTreeIntoRecursion,
           programs_b.ChildMaxPoolOverMaskedForeach, programs_b.NaryDepthPassedDownAndLeafCount,
           programs_b.NaryThreeFunctionsNodeRangeChild, programs_c.Int32IndexArrays,
           programs_c.NaryDecoderChildCountFromValue]


@pytest.mark.parametrize("cls,mode", list(_cases()))
def test_program_equals_plain_python(cls, mode):
    net = make(cls)
    if mode != "eager":
        net.hybridize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k, arrays in enumerate(PROGRAMS[cls]):
            want = oracle(cls, k)
            assert want[0] == "value", want[1]
            got = hostile_harness._outcome(lambda: with_mode(mode, lambda: run(net, arrays)))
            hostile_harness.assert_equal_to_oracle(want, got, FILES, TOL, (mode, k))
    for w in caught:
        if "is not used by any computation" not in str(w.message):
            assert w.filename in FILES, (mode, w.filename, str(w.message)[:300])


@pytest.mark.parametrize("cls", HISTORY, ids=lambda c: c.__name__)
def test_a_random_call_sequence_equals_the_oracle(cls):
    hostile_harness.check_call_history(
        cls, PROGRAMS[cls], make, lambda k: oracle(cls, k), TOL)


# ---- training: grad_req='add' over calls, Dropout in predict and train mode ------------------

def _accumulated(cls, mode, calls):
    """Parameter gradients after ``calls`` recorded calls and backward passes, grad_req 'add'."""
    net = make(cls)
    for p in net.collect_params().values():
        p.grad_req = "add"
    if mode == "plain":
        params = {k: v.data() for k, v in net._reg_params.items()}
        call = lambda *xs: cls.plain_forward(net, mx.nd, *xs, **params)   # noqa: E731
    else:
        if mode != "eager":
            net.hybridize()
        call = net
    for arrays in calls:
        xs = [mx.nd.array(a, dtype=a.dtype) for a in arrays]
        with autograd.record():
            outs = with_mode(mode if mode != "plain" else "eager", lambda: call(*xs))
            outs = outs if isinstance(outs, (list, tuple)) else [outs]
            loss = sum((o.astype("float32") * (k + 1.5)).sum() for k, o in enumerate(outs))
        with_mode(mode if mode != "plain" else "eager", loss.backward)
    return [p.grad().asnumpy() for _, p in sorted(net.collect_params().items())]


@pytest.mark.parametrize("cls", [programs_a.TreeLstmReturnsHAndC, programs_a.RematTreeLstmHAndC,
                                 programs_b.NaryThreeFunctionsNodeRangeChild,
                                 programs_c.NaryDecoderChildCountFromValue],
                         ids=lambda c: c.__name__)
def test_grad_req_add_accumulates_as_plain_python(cls):
    inputs = PROGRAMS[cls]
    calls = [inputs[0], inputs[-1], inputs[0]]       # (another forest between two equal ones)
    want = _accumulated(cls, "plain", calls)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mode in MODES:
            got = _accumulated(cls, mode, calls)
            for k, (g, w) in enumerate(zip(got, want)):
                np.testing.assert_allclose(g, w, rtol=TOL[0], atol=TOL[1], err_msg=(mode, k))


def test_dropout_predicts_as_plain_python_and_trains_with_a_fresh_mask_per_call():
    """Dropout in the combination: under ``predict_mode`` and ``record(train_mode=False)``
    every mode equals plain Python; recorded in train mode the rows differ from prediction
    (masks drawn), two calls draw other masks, and leaves (no Dropout) pass unchanged."""
    cls = programs_b.DropoutInCombine
    arrays = [mx.nd.array(a) for a in programs_a.MIXED]
    net = make(cls)
    params = {k: v.data() for k, v in net._reg_params.items()}
    with autograd.predict_mode():
        want = cls.plain_forward(net, mx.nd, *arrays, **params).asnumpy()
    for mode in MODES:
        net = make(cls)
        if mode != "eager":
            net.hybridize()
        with autograd.predict_mode():
            got = with_mode(mode, lambda: net(*arrays)).asnumpy()
        np.testing.assert_allclose(got, want, rtol=TOL[0], atol=TOL[1], err_msg=mode)
        with autograd.record(train_mode=False):
            got = with_mode(mode, lambda: net(*arrays)).asnumpy()
        np.testing.assert_allclose(got, want, rtol=TOL[0], atol=TOL[1], err_msg=mode)
        with autograd.record():
            draws = [with_mode(mode, lambda: net(*arrays)).asnumpy() for _ in range(2)]
        leaf = 1   # (roots 0, 9, 10, 0, 9: root 9 is a single node)
        for d in draws:
            np.testing.assert_allclose(d[leaf], want[leaf], err_msg=mode)
        assert not np.allclose(draws[0], want) and not np.allclose(draws[0], draws[1]), mode


# ---- what this round fixed -------------------------------------------------------------------

_THREE_IN_TURN = """
import warnings
warnings.simplefilter("ignore")
from mxnet import autograd, gluon, nd
import gluon_cf


class Net(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.a = gluon.nn.Dense(2, in_units=2, flatten=False)
            self.b = gluon.nn.Dense(2, in_units=2, flatten=False)

    def hybrid_forward(self, F, x, left, right, roots):
        dense = [self.a, self.b, lambda v: v * 0.5]
        table = []

        def make(k):
            def body(i):
                nxt = table[(k + 1) % 3]
                return gluon_cf.cond(
                    F.take(left, i) < 0, lambda: dense[k](F.take(x, i)),
                    lambda: F.tanh(dense[k](nxt(F.take(left, i))) - nxt(F.take(right, i))))
            return gluon_cf.recursive(body, name="turn%d" % k)
        table.extend(make(k) for k in range(3))
        hs, _ = gluon_cf.foreach(lambda r, _: (table[0](r), []), roots, [])
        return hs


net = Net()
net.initialize()
net.hybridize()
x = nd.array([[1, 2], [3, 4], [5, 6]])
x.attach_grad()
with autograd.record():
    y = net(x, nd.array([1, -1, -1]), nd.array([2, -1, -1]), nd.array([0]))
y.backward()
print("done", float(x.grad.sum().asscalar()))
"""


def test_backward_through_three_functions_in_turn_each_with_its_own_dense_ends():
    """Round 25r: a recursion of three functions calling each other in turn (a -> b -> c ->
    a), each reading a Dense of its own, hybridized and recorded with an input's gradient:
    ``backward`` hung for ever (the check of gradients asked of indices moved the label of a
    tainted output round the cycle: NOTE [taint through a cycle of calls])."""
    done = run_python(_THREE_IN_TURN, timeout=90)
    assert done is not None, "backward hung"
    assert done.returncode == 0 and "done" in done.stdout, done.stderr[-2000:]


@pytest.mark.parametrize("mode", ["batched", "dynamic", "unbatched"])
def test_a_branch_constant_taken_by_every_row_of_a_batch_is_each_rows(mode):
    """Round 25r: when every row of a batch took the cond branch returning ``F.ones((1, 1))``,
    the batch's output kept one row, and the invocations after the first got zero rows:
    MKL-DNN's 'could not create a primitive descriptor for a sum primitive' (no user line)
    where the unbatched executor and eager Python count the leaves."""
    arrays = [mx.nd.array(a) for a in programs_b.NARY[0]]
    net = make(programs_b.NaryDepthPassedDownAndLeafCount)   # (its leaf count F.ones((1, 1)))
    want = net(*arrays)[1].asnumpy()
    np.testing.assert_array_equal(want.ravel(), [6, 1, 5, 6])    # (leaves under each root)
    net.hybridize()
    for _ in range(2):
        np.testing.assert_array_equal(with_mode(mode, lambda: net(*arrays))[1].asnumpy(), want)
