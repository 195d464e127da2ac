"""Issue 24 (items 1 and 5), round 29ag: autograph's leftovers, each program run as plain
Python on NDArrays (the oracle) and converted, eagerly and hybridized with gradients
(``hostile_harness.classify``).

- A zero-argument ``super()`` inside a comprehension, a lambda or a nested function of a
  converted method took the method's ``self``; Python takes the first parameter of the scope
  it is in (a comprehension's iterator: TypeError; a lambda of none: RuntimeError)."""
from mxnet.gluon import HybridBlock

import pytest
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand = hostile_harness.rand
ROWS = ([rand(3, 2, seed=2901)], [rand(4, 2, seed=2902)])


class Base(HybridBlock):
    def scale(self, v):
        return v * 2

    def one(self):
        return 1.5


@program(*ROWS)
class SuperInListComprehension(Base):
    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*[super().scale(x[i]) for i in range(2)])


@program(*ROWS)
class SuperInGeneratorExpression(Base):
    @autograph
    def hybrid_forward(self, F, x):
        return sum(super().scale(x[i]) for i in range(2))


@program(*ROWS)
class SuperInDictComprehension(Base):
    @autograph
    def hybrid_forward(self, F, x):
        d = {i: super().one() for i in range(2)}
        return x * d[0]


@program(*ROWS)
class SuperInComprehensionInTensorLoop(Base):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x:
            h = h + sum([super().scale(r) for _ in range(2)])
        return h


@program(*ROWS)
class SuperInComprehensionOfNoItem(Base):
    @autograph
    def hybrid_forward(self, F, x):
        return x * len([super().one() for _ in range(0)])


@program(*ROWS)
class SuperInFirstIterable(Base):
    """(a comprehension's first iterable runs in the method: its self)"""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*[r for r in [z for z in [super().scale(x)]]])


@program(*ROWS)
class SuperInFirstIterableOfInnerComprehension(Base):
    """(the inner one's first iterable runs in the outer comprehension: its iterator)"""

    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*[F.stack(*[z for z in [super().scale(r)]]) for r in [x, x]])


@program(*ROWS)
class SuperInLambdaOfNoParameter(Base):
    @autograph
    def hybrid_forward(self, F, x):
        f = lambda: super().one()     # noqa: E731 - what ported code writes
        return x * f()


@program(*ROWS)
class SuperInLambdaGivenSelf(Base):
    @autograph
    def hybrid_forward(self, F, x):
        f = lambda s: super().one()   # noqa: E731
        return x * f(self)


@program(*ROWS)
class SuperInNestedFunctionOfAnArray(Base):
    @autograph
    def hybrid_forward(self, F, x):
        def g(v):
            return super().scale(v)
        return g(x)


@program(*ROWS)
class SuperInNestedFunctionGivenSelf(Base):
    @autograph
    def hybrid_forward(self, F, x):
        def g(s, v):
            return super().scale(v)
        return g(self, x)


@program(*ROWS)
class SuperInTensorLoop(Base):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x:
            h = h + super().scale(r)
        return h


_classified = hostile_harness.cached_classifier(PROGRAMS, [__file__], export=False)


@pytest.mark.parametrize("block_class", list(PROGRAMS), ids=lambda c: c.__name__)
def test_converted_as_python(block_class):
    """Values and gradients (or Python's own exception) as plain Python, eagerly and
    hybridized."""
    hostile_harness.assert_kinds(_classified(block_class))
