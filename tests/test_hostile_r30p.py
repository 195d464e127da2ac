"""Hostile round 30p, issue 24: PyTorch code ported literally into autograph HybridBlocks
(``for t in range(x.shape[0])``, per-row masks, ``h += ...``, ``out[t] = h`` on a preallocated
list or array, a ``while`` over a ``done`` mask, ``enumerate(zip(...))``, dict states,
``getattr(self, f"layer{i}")``, helpers with defaults, builtins over collected rows). Each
equals plain Python on NDArrays (or an oracle written out of place where plain MXNet refuses
an in-place write under autograd), eager and hybridized, values and gradients, or is refused
hybridized at the user's line; a random call history on one hybridized block equals a fresh
eager block's calls (``hostile_harness.check_call_history``)."""
import gluon_cf
import pytest
from mxnet.gluon import HybridBlock, nn
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats
TOL = (1e-5, 1e-6)
REFUSED = {"P61AliasThenAugAssign": "h_prev = h"}
SEQ = ([rand(4, 3, seed=1)], [rand(1, 3, seed=2)], [rand(6, 3, seed=3)], [rand(2, 3, seed=4)])
MSK = ([rand(4, 3, seed=5), floats(1, 0, 1, 1)], [rand(2, 3, seed=6), floats(0, 0)],
       [rand(3, 3, seed=7), floats(1, 1, 1)], [rand(5, 3, seed=8), floats(0, 1, 0, 0, 1)])
SEQB = ([rand(4, 2, 3, seed=9)], [rand(1, 2, 3, seed=10)], [rand(3, 2, 3, seed=11)])
PAIR = ([rand(4, 3, seed=12), rand(4, 3, seed=13)], [rand(2, 3, seed=14), rand(2, 3, seed=15)])


class Fc(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3)


@program(*SEQ)
class P02PreallocList(Fc):
    @autograph
    def hybrid_forward(self, F, x):
        T = x.shape[0]
        out = [None] * T
        h = F.zeros((1, 3))
        for t in range(T):
            h = F.tanh(self.fc(x[t:t + 1]) + h)
            out[t] = h
        return F.concat(*out, dim=0)


@program(*MSK)
class P05MaskRows(Fc):
    NO_GRAD = (1,)
    @autograph
    def hybrid_forward(self, F, x, m):
        h = F.zeros((1, 3))
        for t in range(x.shape[0]):
            h_prev = h
            h = F.tanh(self.fc(x[t:t + 1]) + h)
            mt = m[t]
            h = h * mt + (1 - mt) * h_prev
        return h


@program(*SEQ)
class P07AugAssign(Fc):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1, 3))
        for t in range(x.shape[0]):
            h += self.fc(x[t:t + 1])
            h = F.tanh(h)
        return h


@program(*SEQB)
class P09WhileDone(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        B = x.shape[1]
        done = F.zeros((B,))
        h = F.zeros((B, 3))
        i = F.zeros((1,))
        while F.sum(done) < B:
            gluon_cf.max_iterations(8)
            h = h + (1 - done).expand_dims(1) * F.tanh(x[0] + h)
            done = F.maximum(done, F.broadcast_maximum(F.sum(F.abs(h), axis=1) > 1.5, i >= 3))
            i = i + 1
        return h, i


@program(*PAIR)
class P10EnumZip(HybridBlock):
    @autograph
    def hybrid_forward(self, F, xs, ys):
        acc = F.zeros((3,))
        for i, (a, b) in enumerate(zip(xs, ys)):
            acc = acc + a * b * (i + 1)
        return acc


@program(*SEQ)
class P24DictState(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        state = {"h": F.zeros((3,)), "c": F.ones((3,))}
        for row in x:
            state["c"] = state["c"] * 0.5 + row
            state["h"] = F.tanh(state["c"])
        return state["h"], state["c"]


@program(*SEQ)
class P25GetattrLayers(HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            for i in range(3):
                setattr(self, f"layer{i}", nn.Dense(3, in_units=3))

    @autograph
    def hybrid_forward(self, F, x):
        for i in range(3):
            x = F.relu(getattr(self, f"layer{i}")(x)) + x
        return x


@program(*SEQ)
class P41WhileEarlyReturn(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        k = F.zeros((1,))
        while F.sum(k) < 5:
            h = F.tanh(h * 2)
            k = k + 1
            if F.sum(h) > 2.5:
                return h, k
        return h * 0, k


@program(*SEQ)
class P53ItemAssignLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        T = x.shape[0]
        out = F.zeros((T, 3))
        h = F.zeros((3,))
        for t in range(T):
            h = F.tanh(x[t] + h)
            out[t] = h
        return out


@program(*SEQ)
class P58MutableDefaultHelper(HybridBlock):
    def collect(self, F, x, acc=[]):
        acc.append(x)
        return F.stack(*acc)

    @autograph
    def hybrid_forward(self, F, x):
        return self.collect(F, x * 1, [x * 0])


def _oracle07(self, F, x):
    h = F.zeros((1, 3))
    for t in range(x.shape[0]):
        h = F.tanh(h + self.fc(x[t:t + 1]))
    return h
P07AugAssign.oracle_where_plain_fails = _oracle07


def _oracle53(self, F, x):
    out = []
    h = F.zeros((3,))
    for t in range(x.shape[0]):
        h = F.tanh(x[t] + h)
        out.append(h)
    return F.stack(*out)
P53ItemAssignLoop.oracle_where_plain_fails = _oracle53


@program(*SEQ)
class P61AliasThenAugAssign(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,)) + 1
        for row in x:
            h_prev = h
            h += row
            h = h + h_prev
        return h


@program(*SEQ)
class P64MeanOfList(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for t in range(x.shape[0]):
            if t == 0:
                continue
            outs.append(x[t] * t)
        if not outs:
            return x[0]
        return sum(outs) / len(outs)


@program(*SEQ)
class P72StepListSum(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(F.sum(row))
        return sum(outs)


@program(*SEQ)
class P73ListItemInTensorFor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        out = [None] * x.shape[0]
        h = F.zeros((3,))
        for t, row in enumerate(x):
            h = F.tanh(row + h)
            out[t] = h
        return F.stack(*out)


@program(*SEQ)
class P74DictAugInIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        st = {"h": F.zeros((3,))}
        for row in x:
            if F.sum(row) > 0:
                st["h"] += row
            else:
                st["h"] = st["h"] * 0.5
        return st["h"]


@program(*SEQ)
class P78ReverseFillPrealloc(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        T = x.shape[0]
        out = [None] * T
        h = F.zeros((3,))
        for t in range(T - 1, -1, -1):
            h = F.tanh(x[t] + h)
            out[t] = h
        return F.stack(*out)


@program(*SEQB)
class P79WhileAnyNotDone(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = x[0]
        done = F.zeros((2,))
        while F.sum(done == 0) > 0:
            gluon_cf.max_iterations(6)
            h = h * 1.5
            done = F.sum(F.abs(h), axis=1) > 2
        return h


def _oracle74(self, F, x):
    h = F.zeros((3,))
    for row in x:
        h = h + row if F.sum(row) > 0 else h * 0.5
    return h
P74DictAugInIf.oracle_where_plain_fails = _oracle74


@program(*SEQ)
class P83ItemAssignInTensorFor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        out = F.zeros_like(x) + 0
        for t, row in enumerate(x):
            out[t] = row * 2
        return out


@program(*MSK)
class P84PerRowTensorIfPyLoop(HybridBlock):
    NO_GRAD = (1,)
    @autograph
    def hybrid_forward(self, F, x, m):
        h = F.zeros((3,))
        for t in range(x.shape[0]):
            if m[t] > 0:
                h = F.tanh(x[t] + h)
        return h


@program(*SEQ)
class P87SliceAssignCol(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        out = x * 2
        out[:, 0] = x[:, 1]
        return out


@program(*MSK)
class P88TernaryMaskRow(HybridBlock):
    NO_GRAD = (1,)
    @autograph
    def hybrid_forward(self, F, x, m):
        h = F.zeros((3,))
        for row, mt in zip(x, m):
            new = F.tanh(row + h)
            h = new if mt > 0 else h
        return h


def _oracle83(self, F, x):
    return x * 2
P83ItemAssignInTensorFor.oracle_where_plain_fails = _oracle83


def _oracle87(self, F, x):
    out = x * 2
    return F.concat(x[:, 1:2], out[:, 1:], dim=1)
P87SliceAssignCol.oracle_where_plain_fails = _oracle87


@program(*SEQ)
class SizeOfTracedShapes(HybridBlock):
    """``x.size`` (a PyTorch port's ``x.numel()``) as ``x.shape``: from the traced input shapes,
    hybridized (it was refused, saying to use F.size_array)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((3,))
        for t in range(x.shape[0]):
            h = h + x[t] / x[t].size
        return h * x.shape[-1] + x.ndim + x.size


@program(*SEQ)
class P102LambdaAfterLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))
        f = lambda v: v * h
        for row in x:
            h = F.tanh(row + h)
        return f(x[0])


@program(*SEQ)
class P105ComprehensionRows(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        return F.stack(*[r * 2 for r in x]).sum(axis=0)


@program(*MSK)
class P106DictOfStatesMask(HybridBlock):
    NO_GRAD = (1,)
    @autograph
    def hybrid_forward(self, F, x, m):
        st = {"h": F.zeros((3,)), "n": F.zeros((1,))}
        for row, mt in zip(x, m):
            new = {"h": F.tanh(row + st["h"]), "n": st["n"] + 1}
            st = {k: new[k] * mt + (1 - mt) * st[k] for k in st}
        return st["h"], st["n"]


_classified = hostile_harness.cached_classifier(PROGRAMS, [__file__], export=False)


@pytest.mark.parametrize("cls", list(PROGRAMS), ids=lambda c: c.__name__)
def test_ported_program_equals_plain_python_or_is_refused_at_its_line(cls):
    refused = {c: REFUSED[c.__name__] for c in PROGRAMS if c.__name__ in REFUSED}
    hostile_harness.assert_program(cls, PROGRAMS, _classified, refused)


@pytest.mark.parametrize("cls", [c for c in PROGRAMS if c.__name__ not in REFUSED][::3],
                         ids=lambda c: c.__name__)
def test_ported_program_call_history_equals_fresh_eager_calls(cls):
    inputs = PROGRAMS[cls]
    hostile_harness.check_call_history(cls, inputs, hostile_harness._make,
                                       hostile_harness.eager_oracle(cls, inputs), TOL)
