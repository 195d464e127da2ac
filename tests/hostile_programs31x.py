"""Round 31x's hostile programs (issue 24, items 2, 4 and 5): blocks written as users port
decoders, masked loops and collected lists, each with input lists of several lengths and
masks (some keeping no row); ``PROGRAMS``: ``{class: [input lists]}``, checked by
``test_hostile_export31x.py`` (eager == hybridized == onnxruntime == load(), and call
histories)."""
import numpy as np
from mxnet import gluon
from mxnet.gluon import nn

import gluon_cf

PROGRAMS = {}
W = 4


def _rand(rows, width=W, seed=0, dtype=np.float32):
    return np.random.RandomState(seed).uniform(-1, 1, (rows, width)).astype(dtype)


def _masks(dtype=np.float32):
    """(x, mask) lists: several lengths, masks keeping some, all and none."""
    flags = ([1, 0, 1], [0, 0, 0, 0], [0, 1, 0, 0, 1], [1, 1])
    return [[_rand(len(f), seed=k), np.array(f, dtype)] for k, f in enumerate(flags)]


def program(inputs):
    def register(cls):
        PROGRAMS[cls] = inputs
        return cls
    return register


# ---- converted for loops over kept rows (autograph) ------------------------------------------

@program(_masks())
class DecoderOverKeptRows(gluon.HybridBlock):
    """A tanh cell over the kept rows, its states collected after a first zero state."""
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = nn.Dense(W, in_units=W)

    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        h = F.zeros((1, W))
        outs = [h]
        for r in F.contrib.boolean_mask(x, m):
            h = F.tanh(self.cell(r.reshape((1, -1))) + h)
            outs.append(h)
        return F.concat(*outs, dim=0).sum(axis=0)


@program(_masks())
class SumOfKeptRowsAsState(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        total = F.zeros((W,))
        for r in F.contrib.boolean_mask(x, m):
            total = total + r * r
        return total


@program(_masks())
class MaxOfKeptRowsWithFloor(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        best = F.ones((W,)) * -5
        for r in F.contrib.boolean_mask(x, m):
            best = F.maximum(best, r)
        return best


@program(_masks())
class CountKeptRowsAbove(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        n = F.zeros((1,))
        for r in F.contrib.boolean_mask(x, m):
            if F.sum(r) > 0:
                n = n + 1
            else:
                n = n + 0.5
        return n


@program(_masks())
class CollectedKeptRowsStackedAfterZero(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        items = [F.zeros((W,))]
        for r in F.contrib.boolean_mask(x, m):
            items.append(F.relu(r))
        return F.stack(*items, axis=0).mean(axis=0)


@program(_masks())
class CollectedKeptRowsAddN(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        items = [F.ones((W,))]
        for r in F.contrib.boolean_mask(x, m):
            items.append(r * 3)
        return F.add_n(*items)


@program(_masks())
class CollectedKeptRowsConcatWithStartAndEnd(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        items = []
        for r in F.contrib.boolean_mask(x, m):
            items.append(r.reshape((1, -1)) - 1)
        return F.concat(F.zeros((1, W)), *items, F.ones((1, W)), dim=0)


@program(_masks())
class CollectedKeptRowsStackedOnAxisOne(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        items = [F.zeros((W,)) + 2]
        for r in F.contrib.boolean_mask(x, m):
            items.append(r)
        return F.stack(*items, axis=1).sum(axis=1)


@program(_masks())
class TwoLoopsAppendToOneList(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        items = [F.zeros((W,))]
        for r in F.contrib.boolean_mask(x, m):
            items.append(r)
        for r in x:
            items.append(r * 0.5)
        return F.stack(*items).sum(axis=0)


@program(_masks())
class KeptRowsScaledByRunningMean(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        mean = F.mean(x, axis=0)
        acc = F.zeros_like(mean)
        for r in F.contrib.boolean_mask(x, m):
            acc = acc + r * mean
        return acc


@program(_masks())
class ForOverRowsWithMaskedInnerSum(gluon.HybridBlock):
    """For each row, the sum of its positive entries (a mask per row, some keeping none)."""
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        out = F.zeros((1,))
        for r in x:
            pos = F.contrib.boolean_mask(r, r > 0.5)
            out = out + F.sum(pos * 0 + 1) * 0 + F.sum(F.relu(r - 0.5))
        return out


@program(_masks())
class KeptRowsWithCondSizeChangeThenLoop(gluon.HybridBlock):
    """A cond whose branches differ in size, then a loop over its rows."""
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        if F.sum(m) > 1:
            y = F.contrib.boolean_mask(x, m)
        else:
            y = x
        acc = F.zeros((W,))
        for r in y:
            acc = acc + r
        return acc


# ---- explicit loops ---------------------------------------------------------------------------

@program(_masks())
class ForeachOverKeptRowsWithState(gluon.HybridBlock):
    """The user's own foreach: MXNet's refuses data of no row (so do all paths)."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        outs, h = gluon_cf.foreach(lambda r, h: (r + h, h + r), kept, F.zeros((W,)))
        return outs, h


@program([[_rand(n, seed=n), np.array([s], np.float32)] for n, s in
          ((3, 2), (5, 0), (1, 1), (4, 4), (2, 0))])
class WhileOverRowsByCount(gluon.HybridBlock):
    def hybrid_forward(self, F, x, n):
        def body(i, h):
            r = F.take(x, i, mode="clip").reshape((-1,))
            return r * 2, [i + 1, h + r]
        outs, (_, h) = gluon_cf.while_loop(lambda i, h: i < n, body,
                                           [F.zeros((1,)), F.zeros((W,))], max_iterations=4)
        return outs, h


@program([[_rand(n, seed=n), np.array([s], np.float32)] for n, s in
          ((3, 2), (5, 0), (1, 1), (4, 4), (2, 0))])
class WhileStepOfConstantWidthNoStep(gluon.HybridBlock):
    """Reads its step outputs: eagerly ``[]`` where no step ran (MXNet's eager loop)."""
    EAGER_EMPTY = True

    def hybrid_forward(self, F, x, n):
        def body(i):
            return F.broadcast_mul(F.ones((1, 3)), i), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < n, body, [F.zeros((1,))],
                                      max_iterations=3)
        return F.broadcast_add(outs, F.sum(x))


@program(_masks())
class WhileOverKeptCountTakingKeptRows(gluon.HybridBlock):
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)

        def body(i, acc):
            r = F.take(kept, i, mode="clip").reshape((-1,))
            return r, [i + 1, acc + r]
        outs, (_, acc) = gluon_cf.while_loop(lambda i, acc: i < F.sum(m).reshape((1,)), body,
                                             [F.zeros((1,)), F.zeros((W,))],
                                             max_iterations=6)
        return outs, acc


@program(_masks())
class WhileStepAddsKeptToConstant(gluon.HybridBlock):
    """A step row kept + t (t (2, W)): no row kept has no step shape to infer."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        t = F.ones((2, W))

        def body(i):
            return F.take(kept, F.zeros((2,)), mode="clip") + t, [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < F.sum(m).reshape((1,)), body,
                                      [F.zeros((1,))], max_iterations=2)
        return outs


@program(_masks())
class NestedForeachThenWhile(gluon.HybridBlock):
    """Per row, a while over a fixed count adding the row."""
    def hybrid_forward(self, F, x, m):
        def row_step(r, states):
            def inner(j, acc):
                return [], [j + 1, acc + r]
            _, (_, acc) = gluon_cf.while_loop(lambda j, acc: j < 2, inner,
                                              [F.zeros((1,)), states[0]], max_iterations=2)
            return acc, [acc]
        outs, (h,) = gluon_cf.foreach(row_step, x, [F.zeros((W,))])
        return outs.sum(axis=0), h


@program(_masks())
class CondOfKeptCountThenForeach(gluon.HybridBlock):
    def hybrid_forward(self, F, x, m):
        y = gluon_cf.cond(F.sum(m) > 0, lambda: x * 2, lambda: x - 1)
        outs, h = gluon_cf.foreach(lambda r, h: (r * h, h + r), y, F.ones((W,)))
        return outs, h


@program([[_rand(n, seed=n).astype(np.float64), np.array(f, np.float64)] for n, f in
          ((3, [1, 0, 1]), (2, [0, 0]), (4, [1, 1, 1, 1]))])
class Float64KeptRowsSum(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        total = F.zeros((W,), dtype="float64")
        for r in F.contrib.boolean_mask(x, m):
            total = total + r
        return total


@program([[_rand(n, seed=n), np.array(f, np.int32)] for n, f in
          ((3, [1, 0, 1]), (2, [0, 0]), (4, [1, 1, 1, 1]), (1, [0]))])
class Int32MaskKeptRowsMean(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        total = F.zeros((W,))
        for r in F.contrib.boolean_mask(x, m):
            total = total + r
        return total / (F.sum(m.astype("float32")) + 1)


# ---- collected lists, every join, with and without earlier items ------------------------------

class _Collect(gluon.HybridBlock):
    """Rows (kept by the mask, or all) times 2 collected after ``earlier`` items, joined by
    ``join``: a family of the ways users join what a loop collects."""
    source, join, earlier = "mask", "stack0", 0

    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        items = [F.ones((W,)) * (k + 1) for k in range(self.earlier)]
        rows = F.contrib.boolean_mask(x, m) if self.source == "mask" else x
        for r in rows:
            items.append(r * 2)
        if self.join == "stack0":
            return F.stack(*items, axis=0).sum(axis=0)
        if self.join == "stack1":
            return F.stack(*items, axis=1)
        if self.join == "concat0":
            return F.concat(*items, dim=0)
        if self.join == "add_n":
            return F.add_n(*items)
        return F.mean(F.stack(*items), axis=0, keepdims=True)


for _source in ("mask", "rows"):
    for _join in ("stack0", "stack1", "concat0", "add_n", "mean"):
        for _earlier in (0, 1):
            _name = "Collect%s%s%s" % (_source.title(), _join.title(), "AfterOne" * _earlier)
            PROGRAMS[type(_name, (_Collect,), {"source": _source, "join": _join,
                                                "earlier": _earlier,
                                                "__module__": __name__})] = _masks()


# ---- rows of a width known only at run time ---------------------------------------------------

def _masks_of_widths():
    """(x, mask) lists whose x's width changes too."""
    cases = ((3, 4, [1, 0, 1]), (2, 6, [0, 0]), (4, 5, [0, 1, 0, 0]), (3, 7, [1, 1, 1]))
    return [[_rand(n, w, seed=k), np.array(f, np.float32)] for k, (n, w, f) in enumerate(cases)]


@program(_masks_of_widths())
class DecoderOfRunTimeWidthOverKeptRows(gluon.HybridBlock):
    """A state of x's width, collected after its first value, over kept rows."""
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        h = F.zeros_like(F.take(x, F.zeros((1,))))
        outs = [h]
        for r in F.contrib.boolean_mask(x, m):
            h = F.tanh(r.reshape((1, -1)) + h * 0.5)
            outs.append(h)
        return F.concat(*outs, dim=0).mean(axis=0)


@program(_masks_of_widths())
class KeptRowsOfRunTimeWidthStackedAndSummed(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        items = [F.zeros_like(F.take(x, F.zeros((1,)))).reshape((-1,))]
        for r in F.contrib.boolean_mask(x, m):
            items.append(F.sigmoid(r))
        return F.stack(*items, axis=0).sum(axis=0)


@program(_masks_of_widths())
class KeptRowsOfRunTimeWidthAddN(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        items = [F.ones_like(F.take(x, F.zeros((1,)))).reshape((-1,))]
        for r in F.contrib.boolean_mask(x, m):
            items.append(r * r)
        return F.add_n(*items)


@program(_masks_of_widths())
class KeptRowsOfRunTimeWidthConcatOnAxisOne(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        items = []
        for r in F.contrib.boolean_mask(x, m):
            items.append(r.reshape((1, -1)) + 1)
        return F.concat(F.zeros_like(F.take(x, F.zeros((1,)))), *items, dim=1)


@program(_masks_of_widths())
class KeptRowPairsOfRunTimeWidth(gluon.HybridBlock):
    """Two collected lists of different widths (a row and the row twice)."""
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        singles, doubles = [], []
        for r in F.contrib.boolean_mask(x, m):
            singles.append(r)
            doubles.append(F.concat(r, r, dim=0))
        base = F.zeros_like(F.take(x, F.zeros((1,)))).reshape((-1,))
        return F.concat(base, *singles, dim=0), F.concat(base, base, *doubles, dim=0)


# ---- collected lists backwards and sliced -----------------------------------------------------

@program(_masks())
class CollectedRowsBackwards(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        outs = []
        for r in x:
            outs.append(r * 2 + 1)
        return F.stack(*outs[::-1])


@program(_masks())
class KeptRowsBackwardsAfterOne(gluon.HybridBlock):
    """Backwards with an earlier item; a mask keeping none leaves that one item."""
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        outs = [F.ones((W,))]
        for r in F.contrib.boolean_mask(x, m):
            outs.append(F.tanh(r))
        return F.stack(*outs[::-1], axis=1)


@program(_masks())
class KeptRowsBackwardsNoneKeptFails(gluon.HybridBlock):
    """Backwards, nothing else: a mask keeping none stacks no item (Python's error)."""
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        outs = []
        for r in F.contrib.boolean_mask(x, m):
            outs.append(r - 1)
        return F.stack(*outs[::-1]).sum(axis=0)


@program(_masks())
class EveryOtherCollectedRow(gluon.HybridBlock):
    """``outs[::2]``: hybridizes per input shape; export refuses at the line."""
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        outs = []
        for r in x:
            outs.append(r + 1)
        return F.stack(*outs[::2])


@program(_masks())
class ReversedTailOfCollectedRows(gluon.HybridBlock):
    """``reversed(outs[1:])`` after a first item: export refuses at the line."""
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, m):
        outs = [F.zeros((W,))]
        for r in x:
            outs.append(r * 3)
        return F.stack(*reversed(outs[1:]))
