"""Issue 24, round 25h: the blocks of ``hostile_programs25h.py`` (``tf.while_loop`` ports with
tuples of tuples and nested lists, int32/float16/float64 values, gluonnlp 0.10's layers in
gluon_cf's loops, autograph with properties, static- and classmethods, partials, decorators,
frozen dataclass configs, ``*args``/``**kwargs``, default-argument closures, generators, Python
recursion, ``super()``, early returns, nested loops with break/continue, in-place updates,
negative-step slices, dtype casts, masks keeping every or no row, zero-length inputs, child
blocks in bodies) against their oracles (MXNet's own ``mx.nd.contrib`` ops, plain Python on
NDArrays), forward and gradients, eager and hybridized; call histories of the dynamic-shape
ones; gradients accumulated by ``grad_req='add'`` and by two backwards; and what the round
fixed."""
import re
import subprocess
import sys
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd
from mxnet.gluon import HybridBlock, nn

import gluon_cf

import hostile_harness
import hostile_programs25h as programs

FILES = [programs.__file__]
_classified = hostile_harness.cached_classifier(programs.PROGRAMS, FILES, export=False)

# refused hybridized at the user's line, each documented: a generator function called while
# hybridizing (its body is not converted), ``.shape`` of a loop body's own value, a state that
# is None before the first step of a tensor for (a graph's loop carries arrays only)
REFUSED = {programs.GeneratorHelperYieldingConstantsInTensorFor,
           programs.ShapeReadInsideTensorFor, programs.OptionalStateIsNoneInTensorFor}
# refused in both modes at the user's line for a mask keeping no row: a foreach over no step
# (MXNet's own foreach fails on it too; README, "foreach over zero-length data")
REFUSED_BOTH = {programs.ForeachOverKeptRows}
# hybridized training of a BatchNorm inside a body is refused (NOTE [auxiliary state under
# remat] and ``operators.aux_state_error``): the message names the BatchNorm's line
BATCHNORM = {programs.BatchNormInForeachBodyTraining}


@pytest.mark.parametrize("block_class", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_hostile_program_equals_its_oracle_or_is_refused_at_its_line(block_class):
    result = _classified(block_class)
    kinds = {mode: kind for mode, (kind, _) in result.items()}
    if block_class in BATCHNORM:
        assert kinds["eager"] == "equal", result
        line = hostile_harness.line_in(programs.__file__, "self.bn(xt)", block_class)
        assert f"BatchNorm at {programs.__file__}:{line} " in result["hybrid"][1], result
        return
    hostile_harness.assert_kinds(result, block_class in REFUSED_BOTH, block_class in REFUSED)


# ---- call histories of the dynamic-shape programs (issue 24, item 2) ----------------------------

DYNAMIC = [programs.ForeachBodySumsMaskedRows, programs.WhileBodySumsMaskedRows,
           programs.CondBranchOfMaskedMean, programs.AutographForOverMaskedRows,
           programs.AutographMaskedMeanInTensorIf, programs.MaskedRowsCountBoundsWhile,
           programs.AutographForOverZeroRows, programs.ForeachOverKeptRows,
           programs.RecursionOverMaskedPrefix, programs.NegativeStepSlicesInsideTensorFor,
           programs.TfWhileStopsOnValueNoOutputs, programs.EarlyReturnInsideTensorWhile]


def _plain(cls):
    return getattr(cls, "plain_forward", None) or cls.hybrid_forward.__wrapped__


# (and every other program but those whose layers infer their weights' shapes on a first call:
# gluonnlp's deferred Dense layers take a wider first input on a fresh block, as in plain
# Gluon, and refuse it after a narrower one)
DEFERRED = {programs.NlpMultiHeadAttentionInWhile, programs.NlpPositionwiseFFNInForeach,
            programs.NlpUniversalTransformerEncoderCell,
            programs.NlpDotAttentionMaskedInCondInWhile}
HISTORIES = DYNAMIC + [c for c in programs.PROGRAMS
                       if c not in DYNAMIC and c not in DEFERRED | BATCHNORM]


@pytest.mark.parametrize("cls", HISTORIES, ids=lambda c: c.__name__)
def test_program_whatever_came_before_equals_a_fresh_block(cls):
    inputs = programs.PROGRAMS[cls]
    oracles = {}

    def oracle(k):
        if k not in oracles:
            oracles[k] = hostile_harness._outcome(lambda: hostile_harness.run_with_gradients(
                hostile_harness._make(cls), inputs[k], forward=_plain(cls)))
        return oracles[k]
    hostile_harness.check_call_history(cls, inputs, hostile_harness._make, oracle,
                                       getattr(cls, "TOL", None) or (1e-4, 1e-5))


# ---- gradients accumulated: grad_req 'add', two backwards ---------------------------------------

# (and a program of no gradient: int32 data, no parameter)
NOT_ACCUMULATED = REFUSED | BATCHNORM | {programs.Int32RowsCastInTensorFor}


def _accumulated_grads(net, arrays, calls, retain, req="add"):
    """Input and parameter gradients after ``calls`` recorded calls (``retain``: one call,
    backward ``calls`` times with retain_graph), every gradient under grad_req ``req``."""
    for p in net.collect_params().values():
        if p.grad_req != "null":
            p.grad_req = req
            p.zero_grad()
    inputs = [mx.nd.array(a, dtype=a.dtype) for a in arrays]
    for k, a in enumerate(inputs):
        if k not in getattr(type(net), "NO_GRAD", ()):
            a.attach_grad(grad_req=req)
    for _ in range(1 if retain else calls):
        with autograd.record():
            out = net(*inputs)
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
            total = sum((o.astype("float64") * (i + 1.5)).sum().astype("float32")
                        for i, o in enumerate(outs))
        for k in range(calls if retain else 1):
            total.backward(retain_graph=retain and k < calls - 1)
    return [a.grad.asnumpy() for a in inputs if a.grad is not None] + \
        [p.grad().asnumpy() for _, p in sorted(net.collect_params().items())
         if p.grad_req != "null"]


@pytest.mark.parametrize("retain", [False, True], ids=["two calls", "two backwards"])
@pytest.mark.parametrize("cls", [c for c in programs.PROGRAMS if c not in NOT_ACCUMULATED],
                         ids=lambda c: c.__name__)
def test_grad_req_add_accumulates_as_eager_mxnet_does(cls, retain):
    """Hybridized, grad_req 'add' (inputs and parameters) over two recorded calls, or one
    call's graph differentiated twice (retain_graph): each gradient is twice the eager
    block's for one call."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # (the first input eager MXNet can differentiate: not a call that reads no input or
        # parameter with a gradient, nor a mask keeping no row)
        for arrays in programs.PROGRAMS[cls]:
            # (grad_req 'write' here: MXNet 1.9.1's own boolean_mask backward under 'add'
            # writes the gradient of the first kept row only, eagerly, without gluon_cf:
            # ``x.attach_grad(grad_req='add')``, ``boolean_mask(ones((4, 3)), [1, 0, 1, 1])
            # .sum().backward()`` gives rows [1, 0, 0, 0]; gluon_cf's nodes give [1, 0, 1, 1])
            once = hostile_harness._outcome(lambda: _accumulated_grads(
                hostile_harness._make(cls), arrays, 1, False, "write"))
            if once[0] == "value":
                break
        assert once[0] == "value", once
        net = hostile_harness._make(cls)
        net.hybridize()
        twice = _accumulated_grads(net, arrays, 2, retain)
    tol = getattr(cls, "TOL", None) or (1e-4, 1e-5)
    assert len(once[1]) == len(twice)
    for a, b in zip(once[1], twice):
        np.testing.assert_allclose(b, 2 * a, rtol=tol[0], atol=tol[1])


# ---- Dropout in a loop body: a mask per step, none in predict mode ------------------------------

class _DropoutPerStep(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.drop = nn.Dropout(0.5)

    def hybrid_forward(self, F, x):
        outs, _ = gluon_cf.foreach(lambda r, s: (self.drop(r), s), x, [F.zeros((1,))])
        return outs


@pytest.mark.parametrize("hybridize", [False, True])
def test_dropout_in_a_foreach_body_draws_a_mask_per_step(hybridize):
    net = _DropoutPerStep()
    net.initialize()
    if hybridize:
        net.hybridize()
    x = mx.nd.ones((6, 40))
    with autograd.train_mode():
        rows = net(x).asnumpy()
    assert set(np.unique(rows)) <= {0.0, 2.0}
    assert len({r.tobytes() for r in rows}) == len(rows)     # (not one mask for every step)
    with autograd.predict_mode():
        np.testing.assert_array_equal(net(x).asnumpy(), x.asnumpy())


# ---- what this round fixed ----------------------------------------------------------------------

class _DeferredDenseShapeErrorInBody(HybridBlock):
    """A Dense of deferred input size (as gluonnlp's layers make them) in a foreach body whose
    state has the wrong width: the user's shape error."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, flatten=False)

    def hybrid_forward(self, F, x):
        def body(xt, s):
            y = self.fc(xt) + s[0]                 # (3 columns + 4: the user's mistake)
            return y, [y]
        outs, _ = gluon_cf.foreach(body, x, [F.zeros((4,))])
        return outs


def test_a_body_error_through_deferred_initialisation_is_gluon_cfs_own():
    """It was "ValueError: Deferred initialization failed because shape cannot be inferred.
    <ours>" hybridized (MXNet's wrapping, another type than without deferred parameters:
    NOTE [errors through deferred initialisation]); now the same OperatorShapeError at the
    user's line as a block whose Dense has its ``in_units``."""
    net = _DeferredDenseShapeErrorInBody()
    net.initialize()
    net.hybridize()
    line = hostile_harness.line_in(__file__, "y = self.fc(xt) + s[0]")
    with pytest.raises(mx.MXNetError) as caught:
        net(mx.nd.ones((2, 2, 3)))
    text = str(caught.value)
    assert text.startswith(f"{__file__}:{line}: elemwise_add"), text
    assert "Deferred initialization failed" not in text, text
    assert hostile_harness.located(caught.value, [__file__]), text


def test_gluonnlp_ffn_with_the_users_shape_error_names_the_users_line():
    """gluonnlp's PositionwiseFFN (deferred Dense layers) in a foreach body, given a state of
    the wrong shape (``x[0]`` of a Symbol is the symbol itself, MXNet's own semantics): the
    error is gluon_cf's, at the user's line, not MXNet's deferred-initialisation wrapper."""
    ffn = programs._nlp().model.transformer.PositionwiseFFN(units=4, hidden_size=8)

    class Ported(HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.ffn = ffn

        def hybrid_forward(self, F, x):
            def body(xt, s):
                y = self.ffn(xt) + s[0]                # the ported line
                return y, [y]
            outs, _ = gluon_cf.foreach(body, x, [F.zeros_like(x[0])])
            return outs
    net = Ported()
    net.initialize()
    net.hybridize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        err = hostile_harness._outcome(lambda: net(mx.nd.ones((3, 2, 4))))
    assert err[0] == "error" and hostile_harness.located(err[1], [__file__]), err
    assert re.search(r":%d: " % hostile_harness.line_in(__file__, "# the ported line"),
                     str(err[1])), err


def test_no_program_hangs_in_a_fresh_process():
    """The slowest of the programs' styles (gluonnlp's transformer cell in a while_loop, a
    tensor while with an early return) run in a fresh process within a time limit."""
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import hostile_harness, hostile_programs25h as p\n"
            "for c in (p.NlpUniversalTransformerEncoderCell, p.EarlyReturnInsideTensorWhile):\n"
            "    r = hostile_harness.classify(c, p.PROGRAMS[c], [p.__file__], export=False)\n"
            "    assert {k for k, _ in r.values()} == {'equal'}, r\n") % str(
                __import__("pathlib").Path(__file__).parent)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]


class _BatchDotInCondInWhile(HybridBlock):
    """A Luong attention step (batch_dot of the state and the memory) in a cond's branch per
    step of a while_loop, given a query of one more axis (batch_dot takes 3-D arrays)."""

    def hybrid_forward(self, F, q, mem):
        def body(i, h):
            h2 = gluon_cf.cond(F.sum(h) > 0, lambda: F.batch_dot(h, mem) + h,  # the step
                               lambda: h * 0.5)
            return [], [i + 1, h2]
        _, (i, h) = gluon_cf.while_loop(lambda i, h: i < 3, body, [F.zeros((1,)), q],
                                        max_iterations=3)
        return h


class _BatchDotInCond(HybridBlock):
    def hybrid_forward(self, F, q, mem):
        return gluon_cf.cond(F.sum(q) > 0, lambda: F.batch_dot(q, mem) + q,  # the step
                             lambda: q * 0.5)


@pytest.mark.parametrize("first_good", [False, True], ids=["fresh", "after a good call"])
@pytest.mark.parametrize("cls", [_BatchDotInCondInWhile, _BatchDotInCond],
                         ids=lambda c: c.__name__)
def test_an_operators_own_shape_check_in_a_branch_names_the_users_line(cls, first_good):
    """An operator refusing its inputs with words of its own ("batch_dot currently only
    support N-D*N-D array", not "Incompatible attr"), in a cond's branch: it was MXNet's
    "MXNetError: Error in operator ..._batch_dot0: ... ../src/operator/tensor/./dot-inl.h:1448"
    with no line of the user's (and, through gluonnlp's deferred layers on a first call,
    wrapped in "Deferred initialization failed"); now an OperatorShapeError at the line that
    made the batch_dot, on every call, whatever came before."""
    net = cls()
    net.initialize()
    net.hybridize()
    mem = mx.nd.ones((2, 4, 4)) * 0.1
    if first_good:
        net(mx.nd.ones((2, 1, 4)), mem).wait_to_read()
    with pytest.raises(mx.MXNetError) as caught:
        net(mx.nd.ones((1, 2, 1, 4)), mem).wait_to_read()
    line = hostile_harness.line_in(__file__, "# the step", cls)
    assert str(caught.value).startswith(f"{__file__}:{line}: batch_dot (node "), caught.value
    assert hostile_harness.located(caught.value, [__file__]), caught.value
