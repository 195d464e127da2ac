"""Hostile round 31ag, issue 24 (a third set): ported code reading ``x.dtype`` (PyTorch's
``torch.zeros(..., dtype=x.dtype)``, ``np.finfo(x.dtype).eps``, mixed-precision branches) and
using lists a tensor loop collected as Python lists. Each equals plain Python on NDArrays,
eager and hybridized, values and gradients, or is refused hybridized at the user's line."""
import numpy as np
import pytest
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand = hostile_harness.rand
SEQ = ([rand(4, 3, seed=1)], [rand(1, 3, seed=2)], [rand(5, 3, seed=3)],
       [rand(3, 3, seed=4).astype(np.float64)])
TOL = (1e-5, 1e-6)
REFUSED = {"C10EpsInLoopBody": "use x.dtype read before the loop"}


@program(*SEQ)
class C01ZerosOfInputDtype(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,), dtype=x.dtype)
        for r in x:
            h = h * 0.5 + r
        return h


@program(*SEQ)
class C02FinfoEps(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        eps = float(np.finfo(x.dtype).eps)
        return x / (F.norm(x) + eps * 1e6)


@program(*SEQ)
class C03MixedPrecisionBranch(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        if x.dtype == np.float64:
            return x * 2
        return x * 3


@program(*SEQ)
class C04CastToOtherDtype(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        y = F.ones_like(x).astype("float32")
        return x + y.astype(x.dtype)


@program(*SEQ)
class C05DtypeNameString(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return x * (2 if np.dtype(x.dtype).name == "float32" else 5)


@program(*SEQ)
class C06FullWithDtype(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.full((3,), 0.5, dtype=x.dtype)
        for r in x:
            h = F.tanh(h + r)
        return h


@program(*SEQ)
class C07CollectedPlusCollected(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        a = []
        for r in x:
            a.append(r * 2)
        b = a + a
        return F.stack(*b).sum(axis=0)


@program(*SEQ)
class C08CollectedEqualsEmpty(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        a = []
        for t in range(x.shape[0]):
            a.append(x[t] * 2)
        return x * (1 if a == [] else 2)


@program(*SEQ)
class C09CollectedLenCompare(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        a = []
        for t in range(x.shape[0]):
            a.append(x[t])
        return F.stack(*a).sum(axis=0) * (3 if len(a) > 2 else 1)


@program(*SEQ)
class C10EpsInLoopBody(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            h = h + r * float(np.finfo(r.dtype).eps) * 1e6
        return h


@program(*SEQ)
class C11DtypeReadBeforeLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        eps = float(np.finfo(x.dtype).eps)
        h = F.zeros_like(x[0])
        for r in x:
            h = h + r * eps * 1e6
        return h


@program(*SEQ)
class C12CollectedNegatedRows(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        a = []
        for r in x:
            a.append(r)
        return F.stack(*[-v for v in a]).sum(axis=0)


@program(*SEQ)
class C13WhileDtypeCounter(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,), dtype=x.dtype)
        h = x[0] * 1
        while i < 3:
            gluon_cf.max_iterations(3)
            h = h * 0.5 + 1
            i = i + 1
        return h, i


_classified = hostile_harness.cached_classifier(PROGRAMS, [__file__], export=False)


@pytest.mark.parametrize("cls", list(PROGRAMS), ids=lambda c: c.__name__)
def test_ported_program_equals_plain_python_or_is_refused_at_its_line(cls):
    refused = {c: REFUSED[c.__name__] for c in PROGRAMS if c.__name__ in REFUSED}
    hostile_harness.assert_program(cls, PROGRAMS, _classified, refused)


@pytest.mark.parametrize("cls", [C01ZerosOfInputDtype, C03MixedPrecisionBranch],
                         ids=lambda c: c.__name__)
def test_dtype_program_call_history_equals_fresh_eager_calls(cls):
    inputs = PROGRAMS[cls]
    hostile_harness.check_call_history(cls, inputs, hostile_harness._make,
                                       hostile_harness.eager_oracle(cls, inputs), TOL)
