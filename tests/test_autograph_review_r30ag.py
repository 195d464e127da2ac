"""Review r30ag of round 30ag's autograph: each program run as plain Python on NDArrays (the
oracle) and converted, eagerly and hybridized with gradients (``hostile_harness.classify``,
rtol 1e-5, atol 1e-6).

- A ``finally`` whose jump is in the ``else`` of a loop of its own (``finally: for j in
  range(1): ... / else: break``) leaves the ``finally``, so it drops what the ``try`` raised
  (NOTE [a finally that jumps]): the IndexError went on, eagerly and hybridized (where a
  tensor ``for``'s index past the shape failed as the graph ran).
- ``items[i] = v``, a slice's assignment and ``items.insert(i, v)`` of a collected list with
  an array of another shape or dtype than its rows: MXNet's stack failed as the graph ran
  (naming MXNet's internals); refused at the user's line, saying the items are the rows of
  one array.
- A refusal inside a ``try`` whose ``finally`` jumps (``try: if F.sum(x) > 0: return ... /
  finally: return h * 5``) was dropped by the jump, as Python drops the ``try``'s error:
  hybridized, the rest of the ``try`` did not run, silently. It surfaces when the function
  returns (NOTE [a refusal the user's code catches]).
- ``np.asarray(x)`` of a tensor while hybridizing was numpy's array of 32 nested axes of
  one Symbol object (``np.asarray(x).sum()`` was ``x`` itself: silently another value, with
  or without a ``finally``); refused at the user's line."""
import numpy as np
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


# ---------------------------------------- a collected list given an item of another shape
@program(*ROWS)
class ItemOfAnotherShape(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r * 2)
        outs[0] = x[0][:2]
        return F.concat(*outs, dim=0)


@program(*ROWS)
class SliceOfAnotherShape(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r * 2)
        outs[1:] = [x[0], F.stack(x[0], x[0])]
        return F.concat(*[o.reshape((-1,)) for o in outs], dim=0)


@program(*ROWS)
class InsertedOfAnotherDtype(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r * 2)
        outs.insert(1, F.cast(x[0], "float64"))
        return F.concat(*[F.cast(o, "float32") for o in outs], dim=0)


# ------------------------------------------------------ a refusal a finally's jump dropped
FLAG = [True]


@program(*ROWS)
class RefusalInTryFinallyReturns(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        try:
            if F.sum(x) > 0:
                return h * 2
            h = h + 1
        finally:
            if FLAG[0]:
                return h * 5
        return h


@program(*ROWS)
class AsscalarInTryFinallyReturns(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        try:
            h = h * F.sum(x).asscalar()
        finally:
            return h


@program(*ROWS)
class TensorReturnInTryFinallyContinues(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        for _ in range(2):
            try:
                if F.sum(x) > 0:
                    return h * 2
                h = h + 1
            finally:
                continue
        return h * 3


# ------------------------------------------------------------- numpy's array of a tensor
@program(*ROWS)
class NumpyArrayOfTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        h = h + np.asarray(x).sum()
        return h


for _cls in PROGRAMS:
    _cls.TOL = TOL

_classified = hostile_harness.cached_classifier(PROGRAMS, [__file__], export=False)


_REFUSED = {
    ItemOfAnotherShape: ("outs[0] = x[0][:2]", "an array of shape (2,)", "shape (3,)"),
    SliceOfAnotherShape: ("outs[1:] = [x[0], F.stack(x[0], x[0])]", "an array of shape (2, 3)",
                          "shape (3,)"),
    InsertedOfAnotherDtype: ("outs.insert(1, F.cast(x[0], \"float64\"))",
                             "an array of dtype float64", "dtype float32")}
_REFUSED_HERE = {
    RefusalInTryFinallyReturns: ("if F.sum(x) > 0",
                                 "this if has a tensor condition, but its branches use return"),
    AsscalarInTryFinallyReturns: ("h = h * F.sum(x).asscalar()",
                                  ".asscalar of a tensor while hybridizing"),
    NumpyArrayOfTensor: ("h = h + np.asarray(x).sum()",
                         "numpy's array of a tensor while hybridizing")}


@pytest.mark.parametrize("block_class", [c for c in PROGRAMS
                                         if c not in _REFUSED and c not in _REFUSED_HERE],
                         ids=lambda c: c.__name__)
def test_converted_as_python(block_class):
    """Values and gradients (or Python's own exception) as plain Python, eagerly and
    hybridized."""
    result = _classified(block_class)
    assert {mode: kind for mode, (kind, _) in result.items()} == \
        {"eager": "equal", "hybrid": "equal"}, result


@pytest.mark.parametrize("block_class", list(_REFUSED), ids=lambda c: c.__name__)
def test_item_of_another_shape_refused_at_its_line(block_class):
    """Eagerly Python's; hybridized refused at the assignment's line, naming both shapes
    (dtypes)."""
    hostile_harness.assert_kinds(_classified(block_class), refused=True)
    err = hostile_harness.hybridized_error(block_class, ROWS[0][0])
    text, got, rows = _REFUSED[block_class]
    line = hostile_harness.line_in(__file__, text, block_class)
    assert str(err).startswith(f"{__file__}:{line}: {text}: this puts {got} into a list "), err
    assert f"rows of one array of {rows}" in str(err), err


@pytest.mark.parametrize("block_class", list(_REFUSED_HERE), ids=lambda c: c.__name__)
def test_refused_at_its_line(block_class):
    """Eagerly Python's; hybridized the refusal at its line (was a value, silently)."""
    hostile_harness.assert_kinds(_classified(block_class), refused=True)
    text, says = _REFUSED_HERE[block_class]
    line = hostile_harness.line_in(__file__, text, block_class)
    for arrays in ROWS:
        err = hostile_harness.hybridized_error(block_class, arrays[0])
        assert str(err).startswith(f"{__file__}:{line}: {text}: {says}"), err
