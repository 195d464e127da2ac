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


_REFUSED = (HandlerReadsTemporaryAfterLoopRaised,)
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
