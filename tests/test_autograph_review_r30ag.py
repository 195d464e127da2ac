"""Review r30ag of round 30ag's autograph: each program run as plain Python on NDArrays (the
oracle) and converted, eagerly and hybridized with gradients (``hostile_harness.classify``,
rtol 1e-5, atol 1e-6).

- A ``finally`` whose jump is in the ``else`` of a loop of its own (``finally: for j in
  range(1): ... / else: break``) leaves the ``finally``, so it drops what the ``try`` raised
  (NOTE [a finally that jumps]): the IndexError went on, eagerly and hybridized (where a
  tensor ``for``'s index past the shape failed as the graph ran)."""
from mxnet.gluon import HybridBlock

import pytest
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand = hostile_harness.rand
ROWS = ([rand(4, 3, seed=3101)], [rand(2, 3, seed=3102)], [rand(1, 3, seed=3103)])
TOL = (1e-5, 1e-6)


# ------------------------------------------------------- a finally's jump in a loop's else
@program(*ROWS)
class FinallyBreakInForElse(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for k in range(3):
            try:
                h = h + x[k + 2]
            finally:
                for _ in range(1):
                    h = h + 1
                else:
                    break
        return h


@program(*ROWS)
class TensorForFinallyBreakInForElse(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for r in x:
            try:
                h = h + r * x[2]
            finally:
                for _ in range(2):
                    h = h + 1
                else:
                    break
        return h


@program(*ROWS)
class FinallyContinueInWhileElse(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for k in range(3):
            try:
                h = h + x[k + 1]
                if k == 0:
                    break
            finally:
                j = 0
                while j < 1:
                    j += 1
                else:
                    if k < 2:
                        continue
            h = h * 2
        return h


for _cls in PROGRAMS:
    _cls.TOL = TOL

_classified = hostile_harness.cached_classifier(PROGRAMS, [__file__], export=False)


@pytest.mark.parametrize("block_class", list(PROGRAMS), ids=lambda c: c.__name__)
def test_converted_as_python(block_class):
    """Values and gradients (or Python's own exception) as plain Python, eagerly and
    hybridized."""
    result = _classified(block_class)
    assert {mode: kind for mode, (kind, _) in result.items()} == \
        {"eager": "equal", "hybrid": "equal"}, result
