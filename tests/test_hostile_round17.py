"""Issue 24, seventeenth round: the autograph blocks of ``hostile_programs17.py`` (``match``,
``:=``, ``assert``, ``try``/``with`` around tensor loops, augmented items and attributes, dict
and tuple carries, chained comparisons, several returns, generators, decorators, closures made
in loops ...) run as plain Python on NDArrays (the oracle), eagerly, hybridized with gradients
and exported (``hostile_harness.classify``). And what this round fixed, each on its own."""
import re

import mxnet as mx
import numpy as np
import pytest
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness
import hostile_programs17 as programs

FILES = [programs.__file__, __file__, programs.helpers.__file__]
_classified = hostile_harness.cached_classifier(programs.PROGRAMS, FILES)


@pytest.mark.parametrize("block_class", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_hostile_program_equals_its_oracle_or_is_refused_at_its_line(block_class):
    bad = hostile_harness.not_equal_or_refused(_classified(block_class))
    assert not bad, bad


def _line(text, path=__file__):
    return next(k for k, line in enumerate(open(path), 1) if text in line)


# ---- a chained comparison is Python's and of its comparisons ---------------------------------

class ChainOfRows(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return x * (-0.5 < x < 0.5)


class ChainShortCircuits(HybridBlock):
    """The last operand is a user function: Python calls it only where ``lo < s`` holds."""

    calls = 0

    def _hi(self, s):
        type(self).calls += 1
        return s * 0 + 1

    @autograph
    def hybrid_forward(self, F, x):
        s = F.sum(x)
        return x * (0 < s < self._hi(s))


class ChainOfSum(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        s = F.sum(x)
        return x * (0 < s < F.ones_like(s))


def test_a_chained_comparison_of_many_elements_is_refused_where_python_raises():
    """It was the elementwise logical and: a value where Python raises ValueError."""
    x = mx.nd.array([[0.1, 0.9], [-0.2, -0.7]])
    with pytest.raises(ValueError, match="ambiguous"):
        ChainOfRows.hybrid_forward.__wrapped__(ChainOfRows(), mx.nd, x)
    line = _line("return x * (-0.5 < x < 0.5)")
    message = re.escape(f"{__file__}:{line}: return x * (-0.5 < x < 0.5): this chained "
                        f"comparison takes the truth of an array of shape (2, 2)")
    with pytest.raises(gluon_cf.AutographError, match=message):
        ChainOfRows()(x)
    net = ChainOfRows()
    net.hybridize()
    with pytest.raises(gluon_cf.AutographError, match=message):     # (the same, traced)
        net(x)
    net = ChainOfRows()
    net.hybridize()
    net(mx.nd.array([[0.1]]))     # (traced for one element: the graph's cond says it)
    with pytest.raises(ValueError, match=re.escape(f"at {__file__}:{line})")):
        net(x)


@pytest.mark.parametrize("values", [[0.2, 0.3], [-0.2, -0.3], [0.7, 0.6]])
def test_a_chained_comparison_of_one_element_equals_python_and_evaluates_as_it(values):
    x = mx.nd.array(values)
    ChainShortCircuits.calls = 0
    want = ChainShortCircuits.hybrid_forward.__wrapped__(ChainShortCircuits(), mx.nd, x)
    want_calls, ChainShortCircuits.calls = ChainShortCircuits.calls, 0
    got = ChainShortCircuits()(x)
    assert ChainShortCircuits.calls == want_calls == (1 if sum(values) > 0 else 0)
    np.testing.assert_array_equal(got.asnumpy(), want.asnumpy())
    net = ChainOfSum()
    net.hybridize()
    np.testing.assert_array_equal(net(x).asnumpy(), want.asnumpy())


# ---- a with statement's body assigns for liveness -------------------------------------------

def test_a_temporary_assigned_in_a_with_inside_a_tensor_loop_is_the_steps_own():
    """``with self.name_scope(): t = self.fc(row)`` then ``h = F.tanh(t + h)``: refused as a
    loop variable with no value before the loop (the with's body counted as not assigning)."""
    for block_class in (programs.WithScopeTemporaryInLoop, programs.WithAsInBothBranches):
        result = _classified(block_class)
        assert {mode: kind for mode, (kind, _) in result.items()} == {
            "eager": "equal", "hybrid": "equal", "export": "equal"}, result


# ---- autograd scopes while hybridizing ----------------------------------------------------

class ScopeInForward(HybridBlock):
    """``with autograd.<scope>():`` around a product (PyTorch's ``with torch.no_grad():``)."""

    def __init__(self, scope):
        super().__init__()
        self.scope = scope

    @autograph
    def hybrid_forward(self, F, x):
        with getattr(mx.autograd, self.scope)():
            c = x * 2
        return c * x


@pytest.mark.parametrize("scope", ["pause", "predict_mode", "train_mode", "record"])
def test_an_autograd_scope_while_hybridizing_is_refused_at_its_line(scope):
    """Hybridized, ``autograd.pause()`` changed nothing: x's gradient was 4x, eagerly 2x."""
    x0 = np.array([1.0, -2.0], "f")
    want = hostile_harness._run(ScopeInForward(scope), [x0], lambda net, F, x: (
        ScopeInForward.hybrid_forward.__wrapped__(net, F, x)))
    assert hostile_harness._compare(want, hostile_harness._run(ScopeInForward(scope), [x0],
                                                               False))
    net = ScopeInForward(scope)
    net.hybridize()
    line = _line("with getattr(mx.autograd, self.scope)():")
    with pytest.raises(gluon_cf.AutographError, match=re.escape(
            f"{__file__}:{line}: with getattr(mx.autograd, self.scope)(): autograd.{scope}() "
            f"while hybridizing")):
        hostile_harness._run(net, [x0], False)


# ---- match statements ---------------------------------------------------------------------

def _modes(block_class):
    result = _classified(block_class)
    return {mode: kind for mode, (kind, _) in result.items()}, result


@pytest.mark.parametrize("block_class", [programs.MatchCaptureInTensorIf,
                                         programs.MatchAssignsTemporaryInLoop,
                                         programs.MatchCaptureTemporaryInLoop],
                         ids=lambda c: c.__name__)
def test_names_a_match_pattern_binds_are_assigned_for_ifs_and_loops(block_class):
    """``case [a]:`` in a tensor if rebinding ``a``: the if's outputs missed it (the branch's
    own local), so ``a`` after the if kept its old value, eagerly and hybridized; a temporary
    every case assigns was refused as a loop variable with no value before the loop."""
    modes, result = _modes(block_class)
    assert modes == {"eager": "equal", "hybrid": "equal", "export": "equal"}, result


@pytest.mark.parametrize("block_class,text,message", [
    (programs.MatchOnTensorLiteral, "match n:",
     "this match compares a tensor with a literal or value pattern (case 0:, case Mode.A:) "
     "while hybridizing"),
    (programs.MatchGuardOnTensor, 'case "scaled" if F.sum(x) > 0:',
     "this case's guard is a tensor condition while hybridizing")], ids=["literal", "guard"])
def test_a_match_on_a_tensors_truth_is_refused_at_its_line(block_class, text, message):
    """MXNet's NotImplementedForSymbol (Symbol.__bool__), naming no line of the user's."""
    modes, result = _modes(block_class)
    assert modes == {"eager": "equal", "hybrid": "refused"}, result
    net = hostile_harness._make(block_class)
    net.hybridize()
    with pytest.raises(gluon_cf.AutographError, match=re.escape(
            f"{programs.__file__}:{_line(text, programs.__file__)}: {text} {message}")):
        hostile_harness._run(net, programs.PROGRAMS[block_class][0], False)
