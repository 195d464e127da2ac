"""Issue 24 (item 1), review r29agrev of round 29ag: each program run as plain Python on
NDArrays (the oracle) and converted, eagerly and hybridized with gradients
(``hostile_harness.classify``).

- A variable a tensor loop or ``if`` inside a ``try`` assigns, with no value before it, that
  only the ``try``'s handlers read (``try: for r in x: t = r * 2; h = h + t`` / ``except
  ValueError: h = h + t``) was refused hybridized ("has no value before it") since round
  29ag made the handlers' reads live after any statement of the body: such a variable is not
  carried (NOTE [what only a handler reads]); where the first step re-runs as Python on an
  IndexError it holds what that step left, and a handler reading it after an exception raised
  past the loop is refused, saying why.
- The ``else`` clause of a ``try`` was not counted as reading after a loop or ``if`` in its
  body: a variable only the else read kept its value before the loop, eagerly and hybridized
  (silently; before round 29ag too).
- A zero-argument ``super()`` in a default of a nested function or lambda (evaluated in the
  method) took the nested function's first parameter since round 29ag (NameError).
- ``pop``, ``insert``, ``clear`` and ``reverse`` of a list a tensor loop collected, which
  round 29ag made Python's where the input shapes give its length, ran once while tracing
  inside a tensor ``if`` or loop, whatever the branch or the steps (silently); and a method
  changing such a list inside a closure or helper was not checked at all: refused, as for
  any Python list.
- A ``while True`` ended by a ``break`` under no ``if`` (``try: r = next(it)`` / ``except
  StopIteration: break``) that holds another loop with a break, or a ``continue`` under an
  ``if``, was traced as one graph loop and refused ("'r' has no value before it"): only its
  own break and return flags decide (NOTE [a while True ended only by Python]).
"""
from mxnet.gluon import HybridBlock

import pytest
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand = hostile_harness.rand
ROWS = ([rand(3, 2, seed=2911)], [rand(4, 2, seed=2912)])


@program(*ROWS)
class HandlerOnlyReadsLoopTemporary(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        try:
            for r in x:
                t = r * 2
                h = h + t
        except ValueError:
            h = h + t
        return h


@program(*ROWS)
class HandlerOnlyReadsWhileTemporary(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h, i = x[0] * 0, x[0, :1] * 0
        try:
            while F.sum(i) < 3:
                t = x[0] * i
                h = h + t
                i = i + 1
        except ValueError:
            h = h + t
        return h


@program(*ROWS)
class HandlerOnlyReadsIfTemporary(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        try:
            if F.sum(x) > 0:
                t = x[0] * 2
                h = h + t
        except ValueError:
            h = h + t
        return h


@program(*ROWS)
class HandlerOnlyReadsNestedLoopTemporary(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        try:
            for r in x:
                for c in x:
                    t = r * c
                    h = h + t
        except ValueError:
            h = h + t
        return h


@program(*ROWS)
class HandlerReadsTemporaryOfFirstStep(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        try:
            for r in x:
                t = r * 2
                h = h + t
                h = h * x[8]
        except IndexError:
            h = h + t
        return h


@program(*ROWS)
class HandlerReadsIfTemporaryInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        try:
            for r in x:
                if F.sum(r) > 0:
                    t = r * 2
                else:
                    t = r * 3
                h = h + t
        except ValueError:
            h = h + t
        return h


@program(*ROWS)
class HandlerReadsTemporaryAfterLoopRaised(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 0
        try:
            for r in x:
                t = r * 2
                h = h + t
            h = h + x[9]
        except IndexError:
            h = h + t
        return h


@program(*ROWS)
class TryElseReadsLoopVariable(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h, t = x[0] * 0, x[1]
        try:
            for r in x:
                t = r * 2
        except IndexError:
            h = h - 1
        else:
            h = h + t
        return h


@program(*ROWS)
class TryElseReadsIfVariable(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h, t = x[0] * 0, x[1]
        try:
            if F.sum(x) > 0:
                t = x[0] * 2
            else:
                t = x[0] * 3
        except IndexError:
            h = h - 1
        else:
            h = h + t
        return h


class Base(HybridBlock):
    def scale(self, v):
        return v * 2

    def one(self):
        return 1.5


@program(*ROWS)
class SuperInDefaultOfNestedFunction(Base):
    """(a default is evaluated in the method: its self, not the nested function's first
    parameter)"""

    @autograph
    def hybrid_forward(self, F, x):
        def f(v, k=super().one()):
            return v * k
        return f(x)


@program(*ROWS)
class SuperInDefaultOfLambda(Base):
    @autograph
    def hybrid_forward(self, F, x):
        f = lambda v, k=super().scale(x): v * k     # noqa: E731 - what ported code writes
        return f(x)


@program(*ROWS)
class NestedWhileTrueOverIterators(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h, it = x[0] * 0, iter(x)
        while True:
            try:
                r = next(it)
            except StopIteration:
                break
            inner = iter(x)
            while True:
                try:
                    c = next(inner)
                except StopIteration:
                    break
                h = h + r * c
        return h


@program(*ROWS)
class WhileTrueWithContinueUnderPythonIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        it, h = iter(x), x[0] * 0
        n = 0
        while True:
            try:
                r = next(it)
                n += 1
            except StopIteration:
                break
            if n > 2:
                continue
            h = h + r * n
        return h


@program(*ROWS)
class WhileTrueAroundTensorLoopWithBreak(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h, it = x[0] * 0, iter([1, 2])
        while True:
            try:
                m = next(it)
            except StopIteration:
                break
            for r in x:
                h = h + r * m
                if F.sum(h) > 3:
                    break
        return h


@program(*ROWS)
class EarlierItemsReversedThenPopped(HybridBlock):
    """(the joined list's length, from the input shapes, read only where asked: the
    graph of F.stack(h0, *states) exports again, hostile round 7's)"""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [x[0] * 10]
        for r in x:
            outs.append(r)
        outs.append(x[1] * 7)
        outs.reverse()
        a = outs.pop(1)
        return F.stack(*outs) * a + outs[0] * len(outs)


@program(*ROWS)
class ExtendedInPlaceThenPopped(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r)
        outs += [x[0] * 3]
        a = outs.pop(0)
        h = x[0] * 0
        for o in outs:
            h = h * 0.5 + o
        return h + a * len(outs)


def drop(items):
    items.pop()
    return 1


@program(*ROWS)
class PopInTensorLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r * 2)
        h = x[0] * 0
        for r in x:
            h = h + outs.pop() * r
        return h


@program(*ROWS)
class PopInTensorIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r * 2)
        if F.sum(x) > 0:
            a = outs.pop()
        else:
            a = outs[0]
        return a + F.stack(*outs).sum(axis=0)


@program(*ROWS)
class ReverseInTensorIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r * 2)
        h = x[0]
        if F.sum(x) > 0:
            outs.reverse()
            h = h * 2
        return F.stack(*outs) + h


@program(*ROWS)
class PopThroughHelperInTensorIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r * 2)
        h = x[0]
        if F.sum(x) > 0:
            drop(outs)
            h = h * 2
        return F.stack(*outs) + h


@program(*ROWS)
class PopThroughAttributeInTensorIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r * 2)
        self.kept = outs
        h = x[0]
        if F.sum(x) > 0:
            self.kept.pop()
            h = h * 2
        return F.stack(*outs) + h


@program(*ROWS)
class PopThroughClosureInTensorIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r)

        def last():
            return outs.pop()
        h = x[0]
        if F.sum(x) > 0:
            h = h * 2 + last()
        return F.stack(*outs) + h


@program(*ROWS)
class AppendThroughClosureInTensorIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r)
        push = lambda v: outs.append(v)     # noqa: E731 - what ported code writes
        h = x[0]
        if F.sum(x) > 0:
            push(h)
            h = h * 2
        return F.stack(*outs) + h


_CHANGED_IN_GRAPH = (PopInTensorLoop, PopInTensorIf, ReverseInTensorIf,
                     PopThroughHelperInTensorIf, PopThroughAttributeInTensorIf,
                     PopThroughClosureInTensorIf, AppendThroughClosureInTensorIf)
_REFUSED = (HandlerReadsTemporaryAfterLoopRaised,) + _CHANGED_IN_GRAPH
_classified = hostile_harness.cached_classifier(PROGRAMS, [__file__], export=False)


@pytest.mark.parametrize("block_class", [c for c in PROGRAMS if c not in _REFUSED],
                         ids=lambda c: c.__name__)
def test_converted_as_python(block_class):
    """Values and gradients (or Python's own exception) as plain Python, eagerly and
    hybridized."""
    hostile_harness.assert_kinds(_classified(block_class))


def test_handler_reading_what_the_loop_did_not_carry_is_refused():
    """An exception raised after the loop: the handler reads a variable the graph's loop did
    not carry (it had no value before the loop): refused, saying why."""
    hostile_harness.assert_kinds(_classified(HandlerReadsTemporaryAfterLoopRaised),
                                 refused=True)
    err = hostile_harness.hybridized_error(HandlerReadsTemporaryAfterLoopRaised, ROWS[0][0])
    assert "variable 't' is read by a handler of the try around this loop on a tensor" in \
        str(err), err


@pytest.mark.parametrize("block_class", _CHANGED_IN_GRAPH, ids=lambda c: c.__name__)
def test_collected_list_changed_in_a_tensor_if_or_loop_is_refused(block_class):
    """pop, reverse or append of a list a tensor loop collected, inside a tensor if or loop
    (directly, through a helper, an attribute or a closure): eagerly Python's, hybridized
    refused (it ran once, while tracing, whatever the branch or the steps)."""
    hostile_harness.assert_kinds(_classified(block_class), refused=True)
    err = hostile_harness.hybridized_error(block_class, ROWS[0][0])
    assert "list" in str(err) and "StepList" not in str(err), err
