"""Issue 24, twenty-second round (b): the blocks of ``hostile_programs22b.py``, ported code.

* ``F.contrib`` semantics (``ContribBlock``): each block runs on gluon_cf eagerly and
  hybridized, and its oracle is the same code on MXNet's own ``mx.nd.contrib`` ops (values and
  input and parameter gradients at 1e-5); hybridized, the forward also equals MXNet's own
  ``mx.sym.contrib`` ops wherever MXNet's graph runs it (MXNet 1.9.1's symbolic ``while_loop``
  fails in backward, and its symbolic ``cond`` returns garbage gradients for branches that
  return inputs or read a Dense: gradients there are checked against its eager ops only).
* Dynamic shapes inside bodies and recursion: against plain Python on NDArrays, eagerly and
  hybridized on the batching executor and, for recursion, the unbatched one.
* (a) call history: each mode runs one block over a random sequence of the program's inputs
  (shapes, batch sizes, predict and record, ``grad_req`` 'write' and 'add', calls that fail),
  and every call equals the oracle.
* What this round fixed: the run-time checks of a loop (a state changing shape, step outputs
  of different shapes, an eager body returning another structure) name the user's line.
"""
import random
import re
import warnings

import mxnet as mx
import numpy as np
import pytest

import gluon_cf

import hostile_harness
import hostile_programs22b as programs
from test_recursion_hostile2 import make, run, with_mode

FILES = [programs.__file__]
CONTRIB = [c for c in programs.PROGRAMS if issubclass(c, programs.ContribBlock)]
OTHERS = [c for c in programs.PROGRAMS if c not in CONTRIB]
RECURSIVE = {programs.DepthPassedDownAsArgument, programs.MutualEvenOddLevels,
             programs.ModelDecidesTheTree, programs.RecursionReturnsSumAndCount,
             programs.LeafRunsForeachOverItsFeatures, programs.SharedSubtrees,
             programs.BranchesChooseWhichChildToVisit, programs.RecursionOverMaskedRowsCount,
             programs.RecursionCallsWhileWithArgumentBound,
             programs.RecursionFrozenDenseTrainedDense, programs.MutualRecursionOfTwoArities}

# Refused at the user's line, by (program, input): a foreach over zero rows called by the user
# (MXNet's own foreach fails on no step too; README, "foreach over zero-length data").
REFUSED = {(programs.TakeLeadingRowsThenForeach, 1): "data has length 0 along axis 0"}
# Eagerly, a while_loop of no step returns [] as its step outputs, as MXNet 1.9.1's eager
# while_loop does (README: read step outputs of a loop that may run no step hybridized).
EAGER_NO_STEP = {(programs.WhilePaddedOutputsAreZeros, 2): "list index out of range"}
# Eagerly, a sum of the rows of a mask keeping none is not in MXNet's autograd graph (eager
# MXNet's own foreach fails on it too, with a shape error)
EAGER_NO_GRAPH = {(programs.ForeachMaskCountsAndSums, 1):
                  "no inputs in computation graph that require gradients"}


def _check(cls, mode, k, got, want):
    key = (cls, k)
    if key in REFUSED:
        assert got[0] == "error" and re.search(REFUSED[key], str(got[1])) and \
            hostile_harness.located(got[1], FILES), (mode, k, got)
        return
    for known in (EAGER_NO_STEP, EAGER_NO_GRAPH):
        if mode == "eager" and key in known:
            assert got[0] == "error" and known[key] in str(got[1]), (mode, k, got)
            return
    kind = hostile_harness.classify_pair(want, got, FILES, tol=(1e-5, 1e-5))
    assert kind == "equal", (mode, k, kind, got[1] if got[0] == "error" else "another value")


def _grad_req(net, req):
    for p in net.collect_params().values():
        if p.grad_req != "null":
            p.grad_req = req


_ORACLES: dict = {}


def _oracle(cls, k):
    if (cls, k) not in _ORACLES:
        _ORACLES[cls, k] = hostile_harness._outcome(
            lambda: run(make(cls), programs.PROGRAMS[cls][k], plain=True))
    return _ORACLES[cls, k]


def _calls(cls, mode):
    """(a) call history: every input, in a random order, with a call that most programs
    refuse (a wider or higher-rank input, float64) mixed in, then the first again."""
    rng = random.Random(cls.__name__ + mode)
    calls = list(range(len(programs.PROGRAMS[cls])))
    rng.shuffle(calls)
    # (not one more axis for a recursion over a forest: every row then reads all of x)
    bad = ["wider", "float64"] + ([] if cls in RECURSIVE else ["rank"])
    calls.insert(rng.randrange(len(calls) + 1), rng.choice(bad))
    return rng, calls + [0]


@pytest.mark.parametrize("cls", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_program_equals_its_oracle_whatever_came_before(cls):
    """Each program on one block per mode (eager, the batching executor, the unbatched one
    where there is recursion) over a random sequence of its inputs, recorded or in predict
    mode, grad_req 'write' or 'add', calls that fail mixed in: every call equals the oracle
    (outputs, and recorded, input and parameter gradients); a failing call raises at the
    user's line or gives the value it gives eagerly."""
    modes = ("eager", "batched", "unbatched") if cls in RECURSIVE else ("eager", "batched")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mode in modes:
            net = make(cls)
            if mode != "eager":
                net.hybridize()
            rng, calls = _calls(cls, mode)
            for k in calls:
                record = mode == "eager" or rng.random() < 0.7
                _grad_req(net, rng.choice(["write", "add"]))
                arrays = hostile_harness.malformed_call(programs.PROGRAMS[cls][0], k) \
                    if isinstance(k, str) else programs.PROGRAMS[cls][k]
                got = hostile_harness._outcome(
                    lambda: with_mode(mode, lambda: run(net, arrays, record=record)))
                if isinstance(k, str):
                    if got[0] == "error":
                        assert isinstance(got[1], mx.MXNetError) or \
                            hostile_harness.located(got[1], FILES), (mode, k, got[1])
                    else:
                        eager = hostile_harness._outcome(
                            lambda: run(make(cls), arrays, record=record))
                        assert eager[0] == "value" and hostile_harness._compare(
                            eager[1], got[1], (1e-5, 1e-5)), (mode, k, eager)
                    continue
                want = _oracle(cls, k)
                if not record and want[0] == "value" and got[0] == "value":
                    want = ("value", want[1][:len(got[1])])      # (outputs only)
                _check(cls, mode, k, got, want)


# MXNet 1.9.1's symbolic ops cannot run these forward (its _foreach infers no shape through a
# nested cond or while_loop)
MXNET_SYMBOLIC_FAILS = {programs.CondInsideForeachBody, programs.WhileInsideForeachBody}


# MXNet 1.9.1's symbolic backward fails (its while_loop's: a CachedOp output count check) or
# returns uninitialised memory (its cond's, for branches returning inputs or reading a Dense)
MXNET_SYMBOLIC_BACKWARD_FAILS = {
    programs.WhileHitsMaxIterationsExactly, programs.WhileLoopVarsOnlyAnyStepCount,
    programs.WhileNestedListOutputs, programs.WhileSingleLoopVarNotAList,
    programs.ForeachOverWhileOutputs, programs.CondInWhileBodyWithDense,
    programs.WhileMaxIterationsOne, programs.CondPredFromDense,
    programs.CondBothBranchesReturnInputs}


@pytest.mark.parametrize("cls", [c for c in CONTRIB if c not in MXNET_SYMBOLIC_FAILS],
                         ids=lambda c: c.__name__)
def test_hybridized_equals_mxnets_own_symbolic_ops(cls):
    """Forward, and where MXNet's own symbolic backward works, the gradients too."""
    record = cls not in MXNET_SYMBOLIC_BACKWARD_FAILS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs, ours = make(cls), make(cls)
        theirs.use_mxnet = True
        theirs.hybridize()
        ours.hybridize()
        for arrays in programs.PROGRAMS[cls]:
            want = run(theirs, arrays, record=record)
            got = run(ours, arrays, record=record)
            assert hostile_harness._compare(want, got, (1e-5, 1e-5)), cls.__name__


# ---- what this round fixed -----------------------------------------------------------------------

F = mx.nd
X3, IDX = mx.nd.ones((3, 3)), mx.nd.array([0, 1, 2])
M2 = mx.nd.array([[1, 1, 0], [1, 0, 0]])


class _Outputs(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x, m):
        return gluon_cf.foreach(lambda ts, s: (F.contrib.boolean_mask(ts[0], ts[1]), [s[0] + 1]),
                                [x, m], [F.zeros((1,))])[0]


class _States(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x, m):
        return gluon_cf.foreach(lambda ts, s: (ts[0], [F.contrib.boolean_mask(ts[0], ts[1])]),
                                [x, m], [F.zeros((2,))])[0]


class _Vars(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x, m):
        return gluon_cf.while_loop(lambda v: F.sum(v) > -1, lambda v: (
            [], [F.contrib.boolean_mask(v, F.sum(m, axis=0) > 1)]), [F.sum(x, axis=0)],
            max_iterations=2)[1][0]


_EAGER = [
    lambda: gluon_cf.foreach(lambda i, s: (i, [s[0] + F.take(X3, i)]), IDX, [F.zeros((3,))]),
    lambda: gluon_cf.while_loop(lambda s: F.sum(s) < 5, lambda s: ([], [s.astype("float64")]),
                                [F.zeros((3,))], max_iterations=3),
    lambda: gluon_cf.foreach(lambda i, s: ([i, i] if F.sum(s[0]) > 0 else [i], [s[0] + 1]),
                             IDX, [F.zeros((3,))]),
    lambda: gluon_cf.while_loop(lambda s: F.sum(s) < 50, lambda s: (
        [s] if F.sum(s) > 3 else [s, s], [s + 1]), [F.zeros((3,))], max_iterations=5),
    lambda: gluon_cf.while_loop(lambda s: F.sum(s) < 50, lambda s: (
        [s[0:1]] if F.sum(s) > 3 else [s], [s + 1]), [F.zeros((3,))], max_iterations=5),
]


def _as_mxnet(monkeypatch, call):
    """``call()`` with gluon_cf's loops replaced by MXNet's eager ones (the oracle): its
    result, or the exception it raised."""
    with monkeypatch.context() as patched:
        patched.setattr(gluon_cf, "foreach", mx.nd.contrib.foreach)
        patched.setattr(gluon_cf, "while_loop", mx.nd.contrib.while_loop)
        try:
            return call()
        except Exception as err:   # noqa: BLE001 - the oracle's answer
            return err


@pytest.mark.parametrize("case", range(len(_EAGER)))
def test_a_loops_run_time_checks_name_the_users_line_eagerly(case, monkeypatch):
    """Step outputs of different shapes or structures are found only as a loop runs: the
    error names the loop's line (it named none, NOTE [run-time loop checks name the user's
    line]). A state changing shape or dtype (cases 0, 1) runs, as MXNet's eager loops run it
    (NOTE [eager loop states may change])."""
    fn = _EAGER[case]
    if case < 2:
        want = _as_mxnet(monkeypatch, fn)
        got = fn()
        assert got[0] == [] if case == 1 else got[0].shape == want[0].shape
        np.testing.assert_array_equal(got[1][0].asnumpy(), want[1][0].asnumpy())
        assert got[1][0].dtype == want[1][0].dtype
        return
    with pytest.raises(ValueError, match=r"^gluon_cf\.(foreach|while_loop) at %s:%d: " % (
            re.escape(__file__), fn.__code__.co_firstlineno)):
        fn()


@pytest.mark.parametrize("cls", [_Outputs, _States, _Vars], ids=lambda c: c.__name__)
@pytest.mark.parametrize("hybridize", [False, True])
def test_a_loops_run_time_checks_name_the_users_line_in_blocks(cls, hybridize, monkeypatch):
    """The same in bodies of run-time shape (boolean_mask), hybridized too: the node's line,
    not the ``net(x)`` that ran it. Eagerly a state may change shape, as in MXNet's eager loops:
    those blocks give what they give with MXNet's loops (_Vars: its boolean_mask refusing the
    shrunk variable, the user's operator failing as MXNet's)."""
    net = cls()
    if hybridize:
        net.hybridize()
    elif cls is not _Outputs:
        want = _as_mxnet(monkeypatch, lambda: net(X3[:2], M2))
        if isinstance(want, Exception):
            with pytest.raises(type(want)):
                net(X3[:2], M2).asnumpy()
        else:
            np.testing.assert_array_equal(net(X3[:2], M2).asnumpy(), want.asnumpy())
        return
    with pytest.raises(ValueError, match=r"^gluon_cf\.(foreach|while_loop) at %s:%d: .*(changed "
                       r"from shape|changes shape across steps)" % (
                           re.escape(__file__), cls.hybrid_forward.__code__.co_firstlineno + 1)):
        net(X3[:2], M2)
