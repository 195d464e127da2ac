"""Hostile round 31ag, issue 24 (more in ``test_hostile_r31ag_b.py``): TF2, PyTorch and JAX
code ported into autograph HybridBlocks (closures over loop variables, nested helpers changing
state, generators, comprehensions over tensors, try/except/finally in tensor loops, walrus,
match, chained comparisons on tensors, early returns from loops, augmented assignment to
containers, default arguments capturing loop values, recursion in helpers). Each equals plain
Python on NDArrays, eager and hybridized, values and gradients, or is refused hybridized at
the user's line (``REFUSED``: the text its AutographError holds)."""
import contextlib
import functools

import pytest
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats
SEQ = ([rand(4, 3, seed=1)], [rand(1, 3, seed=2)], [rand(5, 3, seed=3)])
MSK = ([rand(4, 3, seed=5), floats(1, 0, 1, 1)], [rand(3, 3, seed=7), floats(0, 0, 0)],
       [rand(2, 3, seed=6), floats(1, 1)])
PAIR = ([rand(4, 3, seed=12), rand(4, 3, seed=13)], [rand(2, 3, seed=14), rand(2, 3, seed=15)])
TOL = (1e-5, 1e-6)
REFUSED = {
    "Q47ReturnInsideTryInLoop": "inside a try whose finally assigns 'h'",
    "Q49NonlocalCounterHelper": "variable 'n' (read by the function 'tick'",
    "Q51FilteredComprehensionOnTensor": "this comprehension's if tests a tensor",
    "Q55AugAssignPreallocItem": "its body assigns attributes or items",
    "Q58HelperMutatesPassedDict": "this statement assigns an item of a dict",
    "Q59ExtendInTensorLoop": "changes the list 'outs' from outside it"}


class Fc(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3)


def _scaled(h, k=2.0):
    return h * k


def _depth_sum(h, n):
    return h if n == 0 else _depth_sum(h * 0.5 + 1, n - 1)


@program(*SEQ)
class Q01ClosureOverLoopVar(Fc):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            f = lambda v: v * 0.5 + r
            h = F.tanh(f(h))
        return h


@program(*SEQ)
class Q02DefaultArgCapturesRow(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            def step(v, row=r):
                return v * 0.9 + row
            h = step(h)
        return h


@program(*SEQ)
class Q03NestedHelperReturnsState(Fc):
    @autograph
    def hybrid_forward(self, F, x):
        def cell(h, row):
            z = F.sigmoid(self.fc(row.expand_dims(0)))[0]
            return z * h + (1 - z) * F.tanh(row)
        h = F.zeros((3,))
        for r in x:
            h = cell(h, r)
        return h


@program(*SEQ)
class Q04GeneratorOfRange(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def steps(n):
            for t in range(n):
                yield x[t] * (t + 1)
        return F.stack(*steps(x.shape[0])).sum(axis=0)


@program(*SEQ)
class Q05ComprehensionOverRows(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*[F.relu(r) * 2 for r in x]).sum(axis=0)


@program(*SEQ)
class Q06ComprehensionRange(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = [x[t] * t for t in range(x.shape[0])]
        return F.add_n(*outs)


@program(*SEQ)
class Q07TryExceptInTensorLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            try:
                h = h + r[5]
            except IndexError:
                h = h * 0.5 + r
        return h


@program(*SEQ)
class Q08TryFinallyInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        n = F.zeros((1,))
        for r in x:
            try:
                h = h + r
            finally:
                n = n + 1
        return h / n


@program(*SEQ)
class Q09WalrusInTensorIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            if (s := F.sum(r)) > 0:
                h = h + r * s
            else:
                h = h - r
        return h


@program(*SEQ)
class Q10MatchOnPythonMode(HybridBlock):
    MODE = "gru"

    @autograph
    def hybrid_forward(self, F, x):
        match self.MODE:
            case "rnn":
                f = F.tanh
            case "gru":
                f = F.sigmoid
            case _:
                f = F.relu
        h = F.zeros((3,))
        for r in x:
            h = f(h + r)
        return h


@program(*SEQ)
class Q11ChainedCompareOnTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            if -0.5 < F.mean(r) < 0.5:
                h = h + r
            else:
                h = h - r * 0.5
        return h


@program(*SEQ)
class Q12EarlyReturnFromLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            h = h + r
            if F.sum(h) > 1.0:
                return h * 10
        return h


@program(*SEQ)
class Q13AugAssignDictState(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        st = {"h": F.zeros((3,)), "c": F.zeros((3,))}
        for r in x:
            st["c"] += r
            st["h"] = F.tanh(st["c"])
        return st["h"] + st["c"]


def _oracle13(self, F, x, **params):
    st = {"h": F.zeros((3,)), "c": F.zeros((3,))}
    for r in x:
        st["c"] = st["c"] + r
        st["h"] = F.tanh(st["c"])
    return st["h"] + st["c"]


# (plain MXNet refuses += on a recorded NDArray: the oracle written out of place)
Q13AugAssignDictState.oracle_where_plain_fails = _oracle13


@program(*SEQ)
class Q14RecursiveHelperPythonDepth(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            h = _depth_sum(h + r, 2)
        return h


@program(*SEQ)
class Q15HelperMutatesOwnList(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def collect(rows):
            out = []
            for r in rows:
                out.append(r * r)
            return out
        return F.stack(*collect(x)).sum(axis=0)


@program(*SEQ)
class Q16ZipWithRange(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for t, r in zip(range(x.shape[0]), x):
            h = h + r * (t + 1)
        return h


@program(*SEQ)
class Q17EnumerateRows(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for t, r in enumerate(x):
            h = h * 0.5 + r
        return h


@program(*SEQ)
class Q18WhileWithCounterBreak(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = x[0] * 1
        while i < 6:
            gluon_cf.max_iterations(6)
            h = F.tanh(h * 1.5)
            i = i + 1
            if F.max(F.abs(h)) < 0.05:
                break
        return h, i


@program(*SEQ)
class Q19ListOfHelpersLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        fns = [F.tanh, F.sigmoid, F.relu]
        h = x[0] * 1
        for f in fns:
            h = f(h) + x[-1]
        return h


@program(*SEQ)
class Q20LambdasMadeInLoopAppliedAfter(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        fs = []
        for k in range(3):
            fs.append(lambda v, k=k: v * (k + 1))
        h = F.zeros((3,))
        for r in x:
            h = h + sum(f(r) for f in fs)
        return h


@program(*SEQ)
class Q21FunctoolsPartialStep(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        step = functools.partial(_scaled, k=0.5)
        h = F.zeros((3,))
        for r in x:
            h = step(h) + r
        return h


@program(*MSK)
class Q22MaskedUpdateWhere(Fc):
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, m):
        h = F.zeros((1, 3))
        for t in range(x.shape[0]):
            new = F.tanh(self.fc(x[t:t + 1]) + h)
            h = F.where(m[t:t + 1].expand_dims(1).broadcast_like(h) > 0, new, h)
        return h


@program(*PAIR)
class Q23ZipTwoTensors(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x, y):
        h = F.zeros((3,))
        for a, b in zip(x, y):
            h = h + a * b
        return h


@program(*SEQ)
class Q24TupleStateUnpack(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h, c = F.zeros((3,)), F.zeros((3,))
        for r in x:
            h, c = F.tanh(c + r), c * 0.5 + r
        return h, c


@program(*SEQ)
class Q25NestedLoopsInnerPython(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            for k in range(2):
                h = h * 0.5 + r * k
        return h


@program(*SEQ)
class Q26IfElifElseOnTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            s = F.sum(r)
            if s > 0.5:
                h = h + r
            elif s > -0.5:
                h = h * 0.5
            else:
                h = h - 1
        return h


@program(*SEQ)
class Q27ContinueInTensorLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            if F.sum(r) < 0:
                continue
            h = h + r
        return h


@program(*SEQ)
class Q28AppendThenStackReversed(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros((3,))
        for r in x:
            h = F.tanh(h + r)
            outs.append(h)
        return F.stack(*reversed(outs)) * F.arange(len(outs)).expand_dims(1)


@program(*SEQ)
class Q29DictComprehensionOverNames(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        parts = {k: x * (i + 1) for i, k in enumerate(("a", "b"))}
        return parts["a"] + parts["b"]


@program(*SEQ)
class Q30ConditionalExpressionTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            h = h + (r if F.sum(r) > 0 else -r)
        return h


@program(*SEQ)
class Q31AssertOnPythonShape(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        assert x.shape[1] == 3, "three features"
        return x * 2


@program(*SEQ)
class Q32MethodHelperNoSideEffect(HybridBlock):
    def _step(self, F, h, r):
        return F.tanh(h * 0.5 + r)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            h = self._step(F, h, r)
        return h


@program(*SEQ)
class Q33SliceAssignOnCollected(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r + 1)
        firsts = outs[:1]
        return F.stack(*firsts).sum() + F.stack(*outs).sum()


@program(*SEQ)
class Q34SumBuiltinOfRows(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r * 3)
        return sum(outs)


@program(*SEQ)
class Q35MaxOfTwoTensorsPython(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            h = F.maximum(h, r) + F.minimum(h, r) * 0.1
        return h


@program(*SEQ)
class Q36SuppressInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            with contextlib.suppress(IndexError):
                h = h + r[7]
            h = h + r
        return h


@program(*SEQ)
class Q37TryElseInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            try:
                v = r * 2
            except ValueError:
                v = r
            else:
                v = v + 1
            h = h + v
        return h


@program(*SEQ)
class Q38WhileNotDoneFlag(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 1
        done = F.zeros((1,))
        n = F.zeros((1,))
        while not done:
            gluon_cf.max_iterations(10)
            h = h * 0.5
            n = n + 1
            done = F.max(F.abs(h)) < 0.1
        return h, n


@program(*SEQ)
class Q39ClosureReadsReassignedAfterDef(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        scale = F.ones((1,))
        f = lambda v: v * scale
        for r in x:
            scale = scale + 0.5
        return f(x)


@program(*SEQ)
class Q40HelperWithDefaultTensorFromLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        outs = []
        for r in x:
            h = h + r
            outs.append(h)
        def read(k=-1):
            return outs[k]
        return read() + read(0)


@program(*SEQ)
class Q41BreakOnTensorInPythonRange(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros((3,))
        for t in range(x.shape[0]):
            h = h + x[t]
            outs.append(h)
            if F.sum(h) > 0.3:
                break
        return F.stack(*outs).sum(axis=0)


@program(*SEQ)
class Q42NegativeIndexCollected(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(F.tanh(r))
        return outs[-1] * 2 + outs[0]


@program(*SEQ)
class Q43DoubleComprehension(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        rows = [r * 2 for r in x]
        return F.stack(*[F.sigmoid(v) for v in rows]).sum(axis=0)


@program(*SEQ)
class Q44RecursionOverPythonList(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def fold(fs, v):
            if not fs:
                return v
            return fold(fs[1:], fs[0](v))
        return fold([F.tanh, F.relu, F.sigmoid], x)


@program(*SEQ)
class Q45StarUnpackRows(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        first, *rest = [x * 1, x * 2, x * 3]
        return first + F.add_n(*rest)


@program(*SEQ)
class Q46AnyAllOnPython(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        flags = [True, False]
        h = x * 1
        if any(flags) and not all(flags):
            h = h + 1
        return h


@program(*SEQ)
class Q47ReturnInsideTryInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            try:
                h = h + r
                if F.sum(h) > 1.0:
                    return h * 3
            finally:
                h = h * 0.9
        return h


@program(*SEQ)
class Q48SetitemDictHelper(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        st = {"h": F.zeros((3,))}
        for r in x:
            st.__setitem__("h", F.tanh(st["h"] + r))
        return st["h"]


_COUNT = {"n": 0}


def _bump(st, r):
    st["h"] = st["h"] + r
    return st


@program(*SEQ)
class Q49NonlocalCounterHelper(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        n = 0

        def tick(v):
            nonlocal n
            n += 1
            return v * n
        h = F.zeros((3,))
        for r in x:
            h = h + tick(r)
        return h


@program(*SEQ)
class Q50GeneratorExprInSum(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return sum(r * 2 for r in x)


@program(*SEQ)
class Q51FilteredComprehensionOnTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        kept = [r for r in x if F.sum(r) > 0]
        return F.stack(*kept, x[0]).sum(axis=0)


@program(*PAIR)
class Q52EnumerateZipUnpack(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x, y):
        h = F.zeros((3,))
        for i, (a, b) in enumerate(zip(x, y)):
            h = h * 0.5 + a - b
        return h


@program(*SEQ)
class Q53WalrusInWhile(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        n = F.zeros((1,))
        h = x[0] * 1
        while (n := n + 1) < 4:
            gluon_cf.max_iterations(4)
            h = h * 0.5 + n
        return h, n


@program(*SEQ)
class Q54MatchTrueOnTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        match F.sum(x) > 0:
            case True:
                return x * 2
            case _:
                return x * 3


@program(*SEQ)
class Q55AugAssignPreallocItem(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        acc = [F.zeros((3,)), F.zeros((3,))]
        for r in x:
            acc[0] = acc[0] + r
            acc[1] = acc[1] + r * r
        return acc[0], acc[1]


@program(*SEQ)
class Q56RecursiveHelperTensorIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def grow(h, n):
            if n == 0:
                return h
            if F.sum(h) > 2:
                return h
            return grow(h * 1.5 + 0.1, n - 1)
        return grow(F.abs(x[0]), 3)


@program(*SEQ)
class Q57ReturnFromNestedLoops(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            for k in range(2):
                h = h + r * (k + 1)
                if F.sum(h) > 1.5:
                    return h
        return h * -1


@program(*SEQ)
class Q58HelperMutatesPassedDict(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        st = {"h": F.zeros((3,))}
        for r in x:
            st = _bump(st, r)
        return st["h"]


@program(*SEQ)
class Q59ExtendInTensorLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.extend([r, r * 2])
        return F.stack(*outs).sum(axis=0)


@program(*SEQ)
class Q60LenOfSymbolRange(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for t in range(len(x)):
            h = h + x[t] * t
        return h


@program(*SEQ)
class Q61PythonChainInTensorLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for t in range(x.shape[0]):
            if 0 < t < 3:
                h = h + x[t]
        return h


@program(*SEQ)
class Q62LateBindingLambdas(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        fs = []
        for t in range(x.shape[0]):
            r = x[t]
            fs.append(lambda: r * 2)
        return F.stack(*[f() for f in fs]).sum(axis=0)


@program(*SEQ)
class Q63ReversedSliceRows(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x[::-1]:
            h = h * 0.5 + r
        return h


@program(*SEQ)
class Q64WhileTrueBreak(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 1
        i = F.zeros((1,))
        while True:
            gluon_cf.max_iterations(8)
            h = F.tanh(h * 2)
            i = i + 1
            if i >= 3:
                break
        return h, i


@program(*SEQ)
class Q65GeneratorConsumedTwice(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        g = (r * 2 for r in [x[0], x[-1]])
        first = F.stack(*g)
        again = list(g)
        return first.sum(axis=0) * (len(again) + 1)


@program(*SEQ)
class Q66ForElseTensorBreak(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            h = h + r
            if F.sum(h) > 10:
                break
        else:
            h = h * 2
        return h


_classified = hostile_harness.cached_classifier(PROGRAMS, [__file__], export=False)


@pytest.mark.parametrize("cls", list(PROGRAMS), ids=lambda c: c.__name__)
def test_ported_program_equals_plain_python_or_is_refused_at_its_line(cls):
    refused = {c: REFUSED[c.__name__] for c in PROGRAMS if c.__name__ in REFUSED}
    hostile_harness.assert_program(cls, PROGRAMS, _classified, refused)


@pytest.mark.parametrize("cls", [c for c in PROGRAMS if c.__name__ not in REFUSED][::12],
                         ids=lambda c: c.__name__)
def test_ported_program_call_history_equals_fresh_eager_calls(cls):
    inputs = PROGRAMS[cls]
    hostile_harness.check_call_history(cls, inputs, hostile_harness._make,
                                       hostile_harness.eager_oracle(cls, inputs), TOL)

