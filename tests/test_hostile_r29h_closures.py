"""Hostile round 29h (issue 24 item 1): closures and defaults around tensor ``if``s and loops,
written as ports do: default arguments bound before a tensor ``if`` reassigns the name, a
lambda made in a loop step and called in the same step, a class body reading a variable, a
``del`` in a loop body, ``try``/``except`` around a tensor loop, a walrus in a comprehension, a
closure reading a list that a loop collects. Each equals plain Python on NDArrays, eagerly and
hybridized, values and gradients, or is refused hybridized at the user's line."""
import pytest
from mxnet.gluon import HybridBlock

from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats
ROWS = ([rand(4, 3, seed=2971)], [rand(1, 3, seed=2972) + 1])
STATES = ([floats(1.0, 2.0)], [floats(-1.0, -2.0)], [floats(0.25, -0.1)])


@program(*STATES)
class DefaultArgumentBoundBeforeTensorIf(HybridBlock):
    """``def f(v, s=scale)`` binds the value before a tensor ``if`` reassigns ``scale``."""

    @autograph
    def hybrid_forward(self, F, x):
        scale = x * 0 + 1

        def f(v, s=scale):
            return v * s
        if F.sum(x) > 0:
            scale = scale * 3
        else:
            scale = scale * 5
        return f(x) + scale


@program(*STATES)
class LambdaReadsNameReassignedInBothBranches(HybridBlock):
    """``g = lambda v: v + scale`` made before a tensor ``if`` reassigning ``scale``, called
    after it: Python's late binding shows the branch taken."""

    @autograph
    def hybrid_forward(self, F, x):
        scale = x * 2
        g = lambda v: v + scale   # noqa: E731
        if F.sum(x) > 0:
            scale = scale + 10
        else:
            scale = scale - 10
        return g(x)


@program(*ROWS)
class LambdaMadeAndCalledInSameStep(HybridBlock):
    """``f = lambda v: v * row`` made in a tensor ``for`` step and called in it."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones_like(x[0])
        for row in x:
            f = lambda v: v * F.sigmoid(row)   # noqa: E731
            h = f(h) + 0.1
        return h


@program(*ROWS)
class ClassBodyReadsVariableAfterLoop(HybridBlock):
    """A class defined after a tensor loop whose body reads the loop's variable."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for row in x:
            h = h * 0.5 + row

        class Box:
            value = h * 2
        return Box.value


@program(*ROWS)
class DelTemporaryInLoopBody(HybridBlock):
    """``tmp = ...; h = h + tmp; del tmp`` in each step of a tensor ``for``."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            tmp = F.relu(row)
            h = h + tmp
            del tmp
        return h


@program(*ROWS)
class TryExceptAroundTensorLoop(HybridBlock):
    """``try: <tensor for> except ValueError: ...`` where nothing raises."""

    @autograph
    def hybrid_forward(self, F, x):
        try:
            h = F.zeros_like(x[0])
            for row in x:
                h = h + row * 2
        except ValueError:
            h = x[0]
        return h


@program(*ROWS)
class WalrusInComprehensionOverPython(HybridBlock):
    """``[(y := r * 2) + y for r in parts]`` over a Python list of rows after a loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for row in x:
            h = F.tanh(h + row)
        parts = [h, h * 2]
        return F.stack(*[(y := r * 2) + y for r in parts])


@program(*ROWS)
class ClosureReadsCollectedListAfterLoop(HybridBlock):
    """``total = lambda: F.add_n(*outs)`` made before a loop that appends, called after."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [x[0]]
        total = lambda: F.add_n(*outs)   # noqa: E731
        for row in x:
            outs.append(row * 3)
        return total()


@program(*STATES)
class NestedFunctionWithTensorIfCalledTwice(HybridBlock):
    """A nested function holding a tensor ``if``, called with two different arguments."""

    @autograph
    def hybrid_forward(self, F, x):
        def clip(v):
            if F.sum(v) > 1:
                return v * 0.5
            return v
        return clip(x) + clip(x * 4)


@program(*STATES)
class RecursivePythonHelperDepthByPythonInt(HybridBlock):
    """A Python-recursive helper (depth a Python int) with a tensor ``if`` at each level."""

    @autograph
    def hybrid_forward(self, F, x):
        def go(v, depth):
            if depth == 0:
                return v
            if F.sum(v) > 0:
                return go(v * 0.5, depth - 1)
            return go(v + 1, depth - 1)
        return go(x, 3)


@program(*ROWS)
class GlobalReadInLoop(HybridBlock):
    """A module constant read (not written) in a tensor loop."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for row in x:
            h = h * DECAY + row
        return h


DECAY = 0.75
REFUSED = {}
_classified = hostile_harness.cached_classifier(PROGRAMS, [__file__], export=False)


@pytest.mark.parametrize("block_class", list(PROGRAMS), ids=lambda c: c.__name__)
def test_program_equals_its_oracle_or_is_refused_at_its_line(block_class):
    hostile_harness.assert_program(block_class, PROGRAMS, _classified, REFUSED)
