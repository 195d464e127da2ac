"""Round 30x (issue 24, items 2 and 4): blocks written as people port code, around loops of no
step and values of no row: masks keeping none or all, no-step loops whose bodies read values
of no row, cond branches of different sizes before and inside loops, collected lists,
foreach over run-time-length data, recursion. ``tests/test_hostile_r30x.py`` runs them
eager, hybridized (values and gradients, against plain Python) and exported."""
import numpy as np
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness
from hostile_programs28x import mask

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

MASKED = ([rand(3, 4), mask(1, 0, 1)], [rand(4, 4, seed=1), mask(0, 0, 0, 0)],
          [rand(2, 4, seed=2), mask(1, 1)], [rand(5, 4, seed=3), mask(0, 1, 0, 0, 1)],
          [rand(1, 4, seed=4), mask(0)])
STEPS = ([rand(3, 4), floats(2)], [rand(4, 4, seed=1), floats(0)],
         [rand(2, 4, seed=2), floats(3)], [rand(5, 4, seed=3), floats(1)])


@program(*MASKED)
class WhileOverKeptRowsClipped(HybridBlock):
    """A decoder over the kept rows, bounded by max_iterations: none kept runs no step."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m).reshape((1,))

        def body(i, h):
            r = F.take(kept, i, mode="clip").reshape((1, -1))
            h = F.tanh(h + r)
            return h * 2, [i + 1, h]
        outs, (_, h) = gluon_cf.while_loop(lambda i, h: i < count, body,
                                           [F.zeros((1,)), F.zeros((1, 4))], max_iterations=3)
        return outs, h


@program(*MASKED)
class WhileRowAndSumOfKeptRows(HybridBlock):
    """Each step: the row and the kept rows' sum (a reduction over no row is zeros)."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        total = F.sum(kept, axis=0, keepdims=True)

        def body(i):
            r = F.take(x, i, mode="clip").reshape((1, -1))
            return F.concat(r, total, dim=-1), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < F.sum(m).reshape((1,)), body,
                                      [F.zeros((1,))], max_iterations=2)
        return outs


@program(*MASKED)
class CollectKeptRowsWithEarlierItemThenStack(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x, m):
        items = [F.ones((4,))]
        for r in F.contrib.boolean_mask(x, m):
            items.append(F.tanh(r))
        return F.sum(F.stack(*items, axis=0), axis=0)


@program(*MASKED)
class CollectKeptRowSumsThenConcat(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x, m):
        sums = [F.zeros((1,))]
        for r in F.contrib.boolean_mask(x, m):
            sums.append(F.sum(r * r, keepdims=True))
        return F.concat(*sums, dim=0)


@program(*MASKED)
class CollectFromTwoMasksIntoOneList(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x, m):
        items = [F.zeros((4,))]
        for r in F.contrib.boolean_mask(x, m):
            items.append(r)
        for r in F.contrib.boolean_mask(x, 1 - m):
            items.append(-r)
        return F.mean(F.stack(*items, axis=0), axis=0)


@program(*MASKED)
class ForOverKeptRowsStatesAndRows(HybridBlock):
    """A running state and the rows collected: none kept gives the state unchanged."""
    @autograph
    def hybrid_forward(self, F, x, m):
        h = F.zeros((4,))
        rows = [h]
        for r in F.contrib.boolean_mask(x, m):
            h = h * 0.5 + r
            rows.append(h)
        return h, F.stack(*rows, axis=0).sum(axis=0)


@program(*MASKED)
class ForOverKeptRowsWithDense(HybridBlock):
    """A Dense applied to each kept row, collected, then averaged with a zero row."""
    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(3, in_units=4)

    @autograph
    def hybrid_forward(self, F, x, m):
        items = [F.zeros((1, 3))]
        for r in F.contrib.boolean_mask(x, m):
            items.append(self.dense(r.reshape((1, 4))))
        return F.mean(F.concat(*items, dim=0), axis=0)


@program(*MASKED)
class ForOverKeptRowsTensorIf(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x, m):
        acc = F.zeros((4,))
        for r in F.contrib.boolean_mask(x, m):
            if F.sum(r) > 0:
                acc = acc + r
            else:
                acc = acc - r * 0.5
        return acc


@program(*MASKED)
class CondOfKeptOrAllThenForeach(HybridBlock):
    """A cond choosing the kept rows or all rows (branches of different sizes), then a
    foreach over what it chose."""
    def hybrid_forward(self, F, x, m):
        chosen = gluon_cf.cond(F.sum(m) > 0, lambda: F.contrib.boolean_mask(x, m),
                               lambda: x * 2)

        def body(r, states):
            h = states[0] + r
            return h * 3, [h]
        outs, states = gluon_cf.foreach(body, chosen, [F.zeros((4,))])
        return F.sum(outs, axis=0), states[0]


@program(*MASKED)
class CondWiderBranchThenWhile(HybridBlock):
    """A cond whose branches are of different widths, then a loop reading its value."""
    def hybrid_forward(self, F, x, m):
        v = gluon_cf.cond(F.sum(m) > 1, lambda: F.concat(x, x, dim=-1), lambda: x)

        def body(i):
            return F.take(v, i, mode="clip").reshape((1, -1)), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < 2, body, [F.zeros((1,))], max_iterations=2)
        return outs


@program(*MASKED)
class WhileBodyCondOfDifferentSizes(HybridBlock):
    """A cond in the body whose branches differ in size; no row kept runs no step."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m).reshape((1,))

        def body(i):
            r = F.take(kept, i, mode="clip").reshape((1, -1))
            o = gluon_cf.cond(F.sum(r) > 0, lambda: F.concat(r, r, dim=-1),
                              lambda: F.concat(r, r * 2, dim=-1))
            return o, [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < count, body, [F.zeros((1,))],
                                      max_iterations=2)
        return outs


@program(*STEPS)
class WhileExactLengthRows(HybridBlock):
    """A while_loop of exact length (no max_iterations): n rows, none for n = 0."""
    def hybrid_forward(self, F, x, n):
        def body(i, h):
            r = F.take(x, i, mode="clip")
            return F.broadcast_mul(r, h), [i + 1, h * 0.5]
        outs, (_, h) = gluon_cf.while_loop(lambda i, h: i < n, body,
                                           [F.zeros((1,)), F.ones((1,))])
        return F.broadcast_add(F.sum(outs, axis=0, keepdims=True), h), h


@program(*STEPS)
class AutographWhileCollectsRows(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x, n):
        i = F.zeros((1,))
        rows = [F.zeros((1, 4))]
        while i < n:
            rows.append(F.take(x, i, mode="clip").reshape((1, 4)))
            i = i + 1
        return F.concat(*rows, dim=0).sum(axis=0)


@program(*STEPS)
class AutographForWithTensorBreak(HybridBlock):
    """The decoder shape: for over rows, a tensor break when a running sum passes n."""
    @autograph
    def hybrid_forward(self, F, x, n):
        total = F.zeros((1,))
        outs = [F.zeros((4,))]
        for r in x:
            total = total + F.sum(F.abs(r)).reshape((1,))
            if total > n:
                break
            outs.append(r)
        return F.stack(*outs, axis=0).sum(axis=0), total


@program(*STEPS)
class RecursiveHalvingSum(HybridBlock):
    """A recursive function on a counter: each level halves the rest and adds a row."""
    def hybrid_forward(self, F, x, n):
        @gluon_cf.recursive
        def down(k):
            row = F.take(x, k, mode="clip")
            return gluon_cf.cond(k < 1, lambda: row, lambda: down(k - 1) * 0.5 + row)
        return down(F.minimum(n, F.ones((1,)) * 3))


@program(*MASKED)
class RecursiveOverKeptRowCount(HybridBlock):
    """Recursion over the number of kept rows (none: the base case at once)."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        total = F.sum(kept, axis=0)

        @gluon_cf.recursive
        def down(k):
            return gluon_cf.cond(k < 1, lambda: total * 0 + 1, lambda: down(k - 1) * 0.5 + total)
        return down(F.sum(m).reshape((1,)))


@program(*MASKED)
class ForeachRowsWhileOverKeptEntries(HybridBlock):
    """Per row a while_loop over its positive entries, as a (1, 4) padded row."""
    def hybrid_forward(self, F, x, m):
        def body(r, states):
            pos = F.contrib.boolean_mask(r.reshape((-1, 1)), r > 0)
            count = F.sum(r > 0).reshape((1,))

            def step(i, acc):
                v = F.take(pos, i, mode="clip").reshape((1,))
                return v * 2, [i + 1, acc + v]
            outs, (_, acc) = gluon_cf.while_loop(lambda i, acc: i < count, step,
                                                 [F.zeros((1,)), F.zeros((1,))],
                                                 max_iterations=4)
            return outs.reshape((1, 4)), [states[0] + acc]
        outs, states = gluon_cf.foreach(body, F.broadcast_mul(x, m.reshape((-1, 1))),
                                        [F.zeros((1,))])
        return outs, states[0]


@program(*MASKED)
class MaskKeepsAllOrNoneThenMeanOfRows(HybridBlock):
    """Mean of the kept rows with a guard on the count (the user's cond around the mean)."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m).reshape((1,))
        return gluon_cf.cond(count > 0, lambda: F.broadcast_div(F.sum(kept, axis=0), count),
                             lambda: F.zeros((4,)))


@program(*MASKED)
class WhileOverKeptRowsPick(HybridBlock):
    """pick and take in mode 'wrap' on the kept rows: no row kept runs no step."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m).reshape((1,))

        def body(i):
            r = F.take(kept, i, mode="wrap")
            p = F.pick(r, F.zeros((1,)), axis=-1, keepdims=True)
            return F.concat(r, p, dim=-1), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < count, body, [F.zeros((1,))],
                                      max_iterations=2)
        return outs


for _cls in PROGRAMS:
    # The masks and counts get no gradient: MXNet's boolean_mask writes none for its mask
    # (eagerly uninitialised memory, 1e31), nor does a loop's bound.
    _cls.NO_GRAD = (1,)
    if not hasattr(_cls.hybrid_forward, "__wrapped__"):   # (the oracle: eager Gluon)
        _cls.plain_forward = _cls.hybrid_forward
