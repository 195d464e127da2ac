"""Hostile round 31ag, issue 24 (the second half of the programs of
``test_hostile_r31ag.py``): TF2, PyTorch and JAX code ported into autograph HybridBlocks
(closures, nested helpers changing state, generators, try/except/finally in tensor loops,
walrus, match guards, chained comparisons on tensors, early returns, recursion in helpers).
Each equals plain Python on NDArrays, eager and hybridized, values and gradients, or is
refused hybridized at the user's line (``REFUSED``: the text its AutographError holds)."""
import contextlib
import functools

import pytest
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness
from test_hostile_r31ag import SEQ, TOL, Fc

PROGRAMS, program = hostile_harness.program_registry()
REFUSED = {
    "Q70AttrAugAssignInLoop": "its body assigns attributes or items",
    "Q87ConditionalAppend": "changes the list 'outs' from outside it",
    "Q88PythonCounterInTensorLoop": "variable 'k' changes in this for loop on a tensor",
    "Q112HelperObjectMutatedInTensorIf": "its branches assign attributes or items",
    "Q113LambdaInTensorIfBranches": "variable 'f' is the Python value a lambda",
    "Q114MatchGuardOnTensor": "this case's guard is a tensor condition",
    "Q119AugAssignListOfArraysPython": "a graph cannot change an array in place",
    "Q128OptionalStateInTensorLoop": "is the Python value None before or after a step"}


@program(*SEQ)
class Q67IndexPastOneStep(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r * 2)
        return outs[-2] + outs[-1]


@program(*SEQ)
class Q68LenOfCollected(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r * 2)
        return F.stack(*outs).sum(axis=0) / len(outs)


@program(*SEQ)
class Q69WalrusInComprehensionLeaks(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        ys = [(y := r * 2) for r in [x[0], x[1 % x.shape[0]]]]
        return F.stack(*ys).sum(axis=0) + y


@program(*SEQ)
class Q70AttrAugAssignInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        self.total = F.zeros((3,))
        for r in x:
            self.total = self.total + r
        return self.total


@program(*SEQ)
class Q71FcInComprehension(Fc):
    @autograph
    def hybrid_forward(self, F, x):
        rows = [self.fc(r.expand_dims(0)) for r in x]
        return F.concat(*rows, dim=0)


@program(*SEQ)
class Q72DefaultCapturesStateBeforeUpdate(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        g = lambda v, h=h: v + h
        for r in x:
            h = h * 0.5 + r
        return g(h)


@program(*SEQ)
class Q73TryZeroDivisionPython(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for t in range(x.shape[0]):
            try:
                w = 1.0 / t
            except ZeroDivisionError:
                w = 0.0
            h = h + x[t] * w
        return h


@program(*SEQ)
class Q74SortedRangeReverse(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for t in sorted(range(x.shape[0]), reverse=True):
            h = h * 0.5 + x[t]
        return h


@program(*SEQ)
class Q75DelLocalInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            tmp = r * 2
            h = h + tmp
            del tmp
        return h


@program(*SEQ)
class Q76ReturnInsideWithInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            with contextlib.suppress(KeyError):
                h = h + r
                if F.sum(h) > 0.8:
                    return h * 2
        return h


_G = {"scale": 1.0}


@program(*SEQ)
class Q77LambdaBeforeLoopReadsState(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        f = lambda: h * 0.5
        for r in x:
            h = f() + r
        return h


@program(*SEQ)
class Q78NestedDefReadsIfReassigned(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        s = x[0] * 1

        def read():
            return s * 2
        if F.sum(x) > 0:
            s = s + 1
        return read()


@program(*SEQ)
class Q79NestedDefReadsOneBranch(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        s = x[0] * 1
        read = lambda: s + 0
        if F.sum(x) > 0:
            s = s * 3
        return read() + s


@program(*SEQ)
class Q80ClassBodyReadsRow(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            class Step:
                scale = 2.0
            h = h + r * Step.scale
        return h


@program(*SEQ)
class Q81GeneratorLateBinding(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        g = (h * k for k in range(1, 3))
        for r in x:
            h = h + r
        return F.stack(*g).sum(axis=0)


@program(*SEQ)
class Q82PartialEarlyBinding(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        add_h = functools.partial(F.broadcast_add, h)
        for r in x:
            h = h * 0.5 + r
        return add_h(h)


@program(*SEQ)
class Q83ClosureAfterWhile(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 1
        i = F.zeros((1,))
        get = lambda: h * i
        while i < 3:
            gluon_cf.max_iterations(3)
            h = h + 1
            i = i + 1
        return get()


@program(*SEQ)
class Q84LambdasInComprehensionLateBinding(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        fs = [lambda: r * 2 for r in x]
        return F.stack(*[f() for f in fs]).sum(axis=0)


@program(*SEQ)
class Q85IfExpInComprehension(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*[r if F.sum(r) > 0 else -r for r in x]).sum(axis=0)


@program(*SEQ)
class Q86HelperWithEarlyReturnLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def first_big(rows):
            for r in rows:
                if F.sum(r) > 0.2:
                    return r
            return rows[0] * 0
        return first_big(x) * 3


@program(*SEQ)
class Q87ConditionalAppend(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = [x[0] * 0]
        for r in x:
            if F.sum(r) > 0:
                outs.append(r)
        return F.stack(*outs).sum(axis=0)


@program(*SEQ)
class Q88PythonCounterInTensorLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        k = 0
        h = F.zeros((3,))
        for r in x:
            h = h + r
            k += 1
        return h / k


@program(*SEQ)
class Q89GlobalDictInLoopHelper(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def scaled(v):
            return v * _G["scale"]
        h = F.zeros((3,))
        for r in x:
            h = scaled(h) + r
        return h


@program(*SEQ)
class Q90DictGetDefaultInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        cache = {}
        h = F.zeros((3,))
        for r in x:
            h = cache.get("h", h) * 0.5 + r
        return h


@program(*SEQ)
class Q91SharedFcRecursion(Fc):
    @autograph
    def hybrid_forward(self, F, x):
        def tree(v, depth):
            if depth == 0:
                return F.tanh(self.fc(v))
            return tree(v, depth - 1) + tree(v * 0.5, depth - 1)
        return tree(x, 2)


@program(*SEQ)
class Q92StarredAppendThenConcat(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r.expand_dims(0))
        return F.concat(x[:1], *outs, dim=0)


@program(*SEQ)
class Q93TupleOfListsState(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        hs = []
        cs = []
        h = c = F.zeros((3,))
        for r in x:
            h, c = F.tanh(h + r), c + r
            hs.append(h)
            cs.append(c)
        return F.stack(*hs).sum(axis=0), F.stack(*cs).mean(axis=0)


@program(*SEQ)
class Q94NestedFunctionDefaultFromLoopTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            def upd(v, bias=r * 0.1):
                return v + bias
            h = upd(h) + r
        return h


@program(*SEQ)
class Q95KeywordOnlyHelper(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def cell(h, *, row, decay=0.5):
            return h * decay + row
        h = F.zeros((3,))
        for r in x:
            h = cell(h, row=r)
        return h


@program(*SEQ)
class Q96MinOfPythonAndLen(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        steps = min(3, x.shape[0])
        h = F.zeros((3,))
        for t in range(steps):
            h = h + x[t]
        return h


def _scan(F, f, init, xs):
    carry, ys = init, []
    for x in xs:
        carry, y = f(carry, x)
        ys.append(y)
    return carry, F.stack(*ys)


@program(*SEQ)
class Q97JaxStyleScanModuleHelper(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def step(c, row):
            c = F.tanh(c + row)
            return c, c * 2
        c, ys = _scan(F, step, F.zeros((3,)), x)
        return c, ys


@program(*SEQ)
class Q98JaxStyleScanNestedHelper(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def scan(f, init, xs):
            carry, ys = init, []
            for row in xs:
                carry, y = f(carry, row)
                ys.append(y)
            return carry, F.stack(*ys)
        return scan(lambda c, r: (c * 0.5 + r, c - r), F.zeros((3,)), x)


@program(*SEQ)
class Q99NestedHelperCollectsThenIndexes(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def states(rows):
            out = []
            h = F.zeros((3,))
            for r in rows:
                h = F.tanh(h + r)
                out.append(h)
            return out
        hs = states(x)
        return hs[-1] + hs[0] * 0.5


@program(*SEQ)
class Q100TryExceptFinallyAllInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        n = F.zeros((1,))
        for r in x:
            try:
                h = h + r[4]
            except IndexError:
                h = h * 0.5 + r
            else:
                h = h * 0
            finally:
                n = n + 1
        return h, n


@program(*SEQ)
class Q101GeneratorTryFinally(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        log = []

        def rows():
            try:
                for i in range(5):
                    yield x[i]
            except IndexError:
                log.append("end")
            finally:
                log.append("done")
        out = F.stack(*rows()).sum(axis=0)
        return out * len(log)


@program(*SEQ)
class Q102DelitemMethodOnDict(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        st = {"h": x[0] * 1, "tmp": x[0] * 2}
        st.__delitem__("tmp")
        st.__setitem__("h", st["h"] + len(st))
        return st["h"]


@program(*SEQ)
class Q103SetitemOnAttributeDict(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        self.cache = {}
        self.cache.__setitem__("h", x * 2)
        return self.cache["h"] + 1


@program(*SEQ)
class Q104CollectedTimesTwo(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        both = items * 2
        return F.stack(*both).sum(axis=0) + F.stack(*(items + [x[0]])).sum(axis=0)


@program(*SEQ)
class Q105ZerosLikeDtype(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            h = h + F.cast(r, "float32")
        return h


@program(*SEQ)
class Q106TfStyleWhileReduceAny(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.abs(x[0]) + 0.1
        n = F.zeros((1,))
        while F.max(h < 1.0):
            gluon_cf.max_iterations(20)
            h = h * 1.7
            n = n + 1
        return h, n


@program(*SEQ)
class Q107PyTorchSizeZero(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for t in range(x.shape[0]):
            h = h * 0.5 + x[t]
        return h / x.shape[0]


@program(*SEQ)
class Q108GeneratorWithSendValue(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def acc():
            total = x[0] * 0
            while True:
                v = yield total
                total = total + v
        g = acc()
        next(g)
        for t in range(x.shape[0]):
            out = g.send(x[t])
        return out


@program(*SEQ)
class Q109SuppressInGeneratorLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def rows():
            for i in range(4):
                with contextlib.suppress(IndexError):
                    yield x[i] * i
        return F.stack(*rows()).sum(axis=0)


@program(*SEQ)
class Q110TryYieldNestedIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def rows():
            for i in range(4):
                try:
                    if i % 2 == 0:
                        yield x[i]
                    else:
                        yield x[i] * -1
                except IndexError:
                    yield x[0] * 0
        return F.stack(*rows()).sum(axis=0)



class _Counter:
    def __init__(self):
        self.k = 0

    def scaled(self, v):
        return v * 2


@program(*SEQ)
class Q111HelperObjectMethodPure(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        c = _Counter()
        h = F.zeros((3,))
        for r in x:
            h = c.scaled(h) * 0.25 + r
        return h


@program(*SEQ)
class Q112HelperObjectMutatedInTensorIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        c = _Counter()
        if F.sum(x) > 0:
            c.k = 2
        return x * (c.k + 1)


@program(*SEQ)
class Q113LambdaInTensorIfBranches(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            f = lambda v: v * 2
        else:
            f = lambda v: v - 1
        return f(x)


@program(*SEQ)
class Q114MatchGuardOnTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        kind = "a"
        match kind:
            case "a" if F.sum(x) > 0:
                return x * 2
            case _:
                return x * 3


@program(*SEQ)
class Q115WalrusInIfUsedAfter(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 1
        if (m := F.max(x)) > 0.5:
            h = h + m
        return h * m


@program(*SEQ)
class Q116ReturnInsideWhile(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 1
        i = F.zeros((1,))
        while i < 5:
            gluon_cf.max_iterations(5)
            h = h * 1.3 + 0.1
            i = i + 1
            if F.sum(h) > 2:
                return h, i
        return h * -1, i


@program(*SEQ)
class Q117RecursiveClosureFib(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        def fib(n):
            return x[0] * 0 + 1 if n < 2 else fib(n - 1) + fib(n - 2)
        return fib(5) * x


@program(*SEQ)
class Q118ClosureOverLoopIndexPythonRange(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        fs = []
        for t in range(3):
            fs.append(lambda v: v * t)
        return sum(f(x) for f in fs)


@program(*SEQ)
class Q119AugAssignListOfArraysPython(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        acc = [x * 0, x * 0]
        for k in range(2):
            acc[k] += x * (k + 1)
        return acc[0] + acc[1]


def _oracle119(self, F, x, **params):
    acc = [x * 0, x * 0]
    for k in range(2):
        acc[k] = acc[k] + x * (k + 1)
    return acc[0] + acc[1]


Q119AugAssignListOfArraysPython.oracle_where_plain_fails = _oracle119


@program(*SEQ)
class Q120TryExceptKeyErrorDictInLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        st = {}
        h = F.zeros((3,))
        for r in x:
            try:
                prev = st["h"]
            except KeyError:
                prev = h
            h = prev * 0.5 + r
        return h


@program(*SEQ)
class Q121NestedComprehensionsRows(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*[F.stack(*[v * k for k in range(2)]).sum(axis=0)
                         for v in x]).sum(axis=0)


@program(*SEQ)
class Q122GeneratorClosureOverState(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0] * 1

        def gen():
            for k in range(2):
                yield h * k
        first = F.stack(*gen())
        h = h + 1
        second = F.stack(*gen())
        return first + second


@program(*SEQ)
class Q123ChainedCompareThreeTensors(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        a, b, c = F.min(x), F.mean(x), F.max(x)
        if a <= b <= c:
            return x * 2
        return x


@program(*SEQ)
class Q124BreakInPythonLoopInsideTensorLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            for k in range(5):
                if k == 2:
                    break
                h = h + r * k
        return h


@program(*SEQ)
class Q125StaticmethodHelper(HybridBlock):
    @staticmethod
    def _cell(F, h, r):
        return F.tanh(h + r)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            h = self._cell(F, h, r)
        return h


@program(*SEQ)
class Q126PropertyReadInLoop(HybridBlock):
    @property
    def decay(self):
        return 0.7

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for r in x:
            h = h * self.decay + r
        return h


@program(*SEQ)
class Q127IsNoneCheckState(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = None
        for t in range(x.shape[0]):
            h = x[t] if h is None else h * 0.5 + x[t]
        return h


@program(*SEQ)
class Q128OptionalStateInTensorLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = None
        for r in x:
            h = r if h is None else h + r
        return h


@program(*SEQ)
class Q129SumStartTensor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(r)
        return sum(outs, x[0] * 10)


@program(*SEQ)
class Q130DivmodPython(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        q, rem = divmod(x.shape[0], 2)
        return x * q + rem


_classified = hostile_harness.cached_classifier(PROGRAMS, [__file__], export=False)


@pytest.mark.parametrize("cls", [c for c in PROGRAMS if c is not Q67IndexPastOneStep],
                         ids=lambda c: c.__name__)
def test_ported_program_equals_plain_python_or_is_refused_at_its_line(cls):
    refused = {c: REFUSED[c.__name__] for c in PROGRAMS if c.__name__ in REFUSED}
    hostile_harness.assert_program(cls, PROGRAMS, _classified, refused)


@pytest.mark.parametrize("cls", [c for c in PROGRAMS if c.__name__ not in REFUSED and
                                 c is not Q67IndexPastOneStep][::12], ids=lambda c: c.__name__)
def test_ported_program_call_history_equals_fresh_eager_calls(cls):
    inputs = PROGRAMS[cls]
    hostile_harness.check_call_history(cls, inputs, hostile_harness._make,
                                       hostile_harness.eager_oracle(cls, inputs), TOL)


def test_index_past_a_one_step_list_is_pythons_index_error_at_the_line():
    hostile_harness.assert_kinds(_classified(Q67IndexPastOneStep), refused=True)
    err = hostile_harness.hybridized_error(Q67IndexPastOneStep, *SEQ[1])
    line = hostile_harness.line_in(__file__, "outs[-2] + outs[-1]", Q67IndexPastOneStep)
    assert type(err) is IndexError and str(err).startswith(f"{__file__}:{line}: "), repr(err)
    assert "list index -2 out of range" in str(err), str(err)
