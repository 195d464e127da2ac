"""Issue 24, eighth round (export of everything that hybridizes): blocks written the way people
port MXNet and TensorFlow code, each run plain, eager, hybridized with gradients and exported
through ``export_onnx`` and ``save_artifact`` on several lengths and masks
(``tests/test_hostile_export8.py``): tensor ``if``s of one and several outputs, ``for`` and
``while`` loops over run-time lengths (zero steps included), lists collected and joined by
``stack``/``concat`` (with earlier items, from two loops), loops after masks and after a
``cond`` that changes sizes, nested control flow, parameters shared between loops, int32 and
float64 models, outputs that are inputs or constants, explicit ``cond``/``foreach``/
``while_loop`` and users' own recursion. Autograph blocks' oracle is the plain Python
function on NDArrays; the others have a ``plain_forward`` written in plain Python."""
import mxnet as mx
import numpy as np
from mxnet.gluon import HybridBlock, nn, rnn

import gluon_cf
from gluon_cf import autograph

import hostile_harness
from hostile_programs4 import DEEPER, SHARED, SINGLE, TWO_TREES, _ids, _row

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats

# rows (T, 4) of several lengths, sums of both signs
ROWS = ([rand(3, 4)], [rand(5, 4, seed=1) * 2], [-np.abs(rand(2, 4, seed=2))],
        [rand(1, 4, seed=3) + 1])
# rows and a count n (a loop of n steps; 0: no step)
COUNTS = ([rand(4, 4, seed=4), floats(2)], [rand(6, 4, seed=5), floats(5)],
          [rand(3, 4, seed=6), floats(0)])
# rows (T, 3) and a mask over them, keeping some, all, one
MASKS = ([rand(4, 3, seed=7), floats(1, 0, 1, 1)], [rand(6, 3, seed=8), floats(1, 1, 1, 1, 1, 1)],
         [rand(3, 3, seed=9), floats(0, 1, 0)])
# a batch (B, T, 4) and per-row lengths
LENGTHS = ([rand(2, 4, 4, seed=10), floats(3, 1)], [rand(3, 5, 4, seed=11), floats(5, 2, 4)],
           [rand(1, 2, 4, seed=12), floats(2)])
FLOAT64_ROWS = tuple([a.astype(np.float64) for a in arrays] for arrays in ROWS)
TOKENS = ([floats(1, 3, 0, 2).astype(np.int32)], [floats(4, 4, 1).astype(np.int32)],
          [floats(2).astype(np.int32)])


# ------------------------------------------------------------------------- conds

@program(*ROWS)
class IfOfOneOutput(HybridBlock):
    """A tensor if on the sum: one output, the same shape in both branches."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            y = x * 2
        else:
            y = F.abs(x) - 1
        return y


@program(*ROWS)
class IfOfSeveralOutputs(HybridBlock):
    """Three outputs of different shapes set in both branches, one of them the input."""

    @autograph
    def hybrid_forward(self, F, x):
        if F.max(x) > 0.5:
            a, b, c = x, F.sum(x, axis=0), F.max(x, axis=1)
        else:
            a, b, c = -x, F.mean(x, axis=0), F.min(x, axis=1)
        return a, b, c


@program(*ROWS)
class ElifChain(HybridBlock):
    """if / elif / else on the mean."""

    @autograph
    def hybrid_forward(self, F, x):
        m = F.mean(x)
        if m > 0.3:
            y = x * 3
        elif m > 0:
            y = x + 1
        else:
            y = F.tanh(x)
        return y * m


@program(*ROWS)
class IfReadsParameter(HybridBlock):
    """A branch reads a Dense; the other reads the block's own parameter."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = nn.Dense(4, in_units=4, flatten=False)
            self.scale = self.params.get("scale", shape=(1, 4), init=mx.init.Constant(0.3))

    @autograph
    def hybrid_forward(self, F, x, scale):
        if F.sum(x) > 0:
            y = self.dense(x)
        else:
            y = F.broadcast_mul(x, scale)
        return y


@program(*ROWS)
class CondOfSizeChangingBranchesThenLoop(HybridBlock):
    """A cond whose branches give different numbers of rows, then a loop over its rows."""

    def hybrid_forward(self, F, x):
        y = gluon_cf.cond(F.sum(x) > 0, lambda: F.concat(x, x, dim=0), lambda: x * 3)
        hs, h = gluon_cf.foreach(lambda r, h: (r + h, r + h), y, F.zeros((4,)))
        return h, F.sum(hs, axis=0)

    def plain_forward(self, F, x):
        y = F.concat(x, x, dim=0) if F.sum(x).asscalar() > 0 else x * 3
        h = F.zeros((4,))
        hs = []
        for r in y:
            h = r + h
            hs.append(h)
        return h, F.sum(F.stack(*hs), axis=0)


@program(*ROWS)
class CondRankReducedThenSummed(HybridBlock):
    """Branches of different ranks whose value is summed to one element: the model's output has
    one rank."""

    def hybrid_forward(self, F, x):
        y = gluon_cf.cond(F.sum(x) > 0, lambda: x * 2, lambda: F.sum(x, axis=0))
        return F.sum(y) + 1

    def plain_forward(self, F, x):
        y = x * 2 if F.sum(x).asscalar() > 0 else F.sum(x, axis=0)
        return F.sum(y) + 1


# ------------------------------------------------------------------------- loops

@program(*ROWS)
class ForOverRowsWithIf(HybridBlock):
    """for over the rows, a tensor if on each row."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((4,))
        for row in x:
            if F.sum(row) > 0:
                h = h + row
            else:
                h = h * 0.5
        return h


@program(*ROWS)
class BreakOnNegativeRow(HybridBlock):
    """A tensor break in a for over the rows."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((4,))
        for row in x:
            if F.sum(row) < -0.5:
                break
            h = h * 0.9 + row
        return h


@program(*ROWS)
class ContinueOnSmallRow(HybridBlock):
    """A tensor continue in a for over the rows."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((4,))
        for row in x:
            if F.max(row) < 0.2:
                continue
            h = F.tanh(h + row)
        return h


@program(*COUNTS)
class WhileOfCountSteps(HybridBlock):
    """while i < n over the rows, n from the input (0: no step)."""

    @autograph
    def hybrid_forward(self, F, x, n):
        i = F.zeros((1,))
        h = F.zeros((4,))
        while i < n:
            gluon_cf.max_iterations(8)
            h = h + F.take(x, i)[0] * (i + 1)
            i = i + 1
        return h, i


@program(*COUNTS)
class WhileCollectsRows(HybridBlock):
    """A while collecting each step's row in a list, stacked (0 steps: refused or empty)."""

    @autograph
    def hybrid_forward(self, F, x, n):
        i = F.zeros((1,))
        outs = []
        while i < n:
            gluon_cf.max_iterations(8)
            outs.append(F.take(x, i)[0] * 2)
            i = i + 1
        return F.stack(*outs)


@program(*ROWS)
class NestedForOverRowsAndValues(HybridBlock):
    """A for over each row's values inside a for over the rows."""

    @autograph
    def hybrid_forward(self, F, x):
        s = F.zeros((1,))
        for row in x:
            for v in row:
                s = s * 0.5 + v
        return s


@program(*COUNTS)
class WhileInsideIf(HybridBlock):
    """A while loop in one branch of a tensor if."""

    @autograph
    def hybrid_forward(self, F, x, n):
        h = F.zeros((4,))
        if F.sum(x) > 0:
            i = F.zeros((1,))
            while i < n:
                gluon_cf.max_iterations(8)
                h = h + F.take(x, i)[0]
                i = i + 1
        else:
            h = h - 1
        return h


@program(*COUNTS)
class IfInsideWhile(HybridBlock):
    """A tensor if on each step of a while."""

    @autograph
    def hybrid_forward(self, F, x, n):
        i = F.zeros((1,))
        h = F.zeros((4,))
        while i < n:
            gluon_cf.max_iterations(8)
            row = F.take(x, i)[0]
            if F.sum(row) > 0:
                h = h + row
            else:
                h = h - row * 0.5
            i = i + 1
        return h


@program(*ROWS)
class LoopCarriesInputUnchanged(HybridBlock):
    """A state the loop never changes is returned (an output equal to an input)."""

    @autograph
    def hybrid_forward(self, F, x):
        keep = x
        h = F.zeros((4,))
        for row in x:
            h = h + row
        return keep, h


@program(*ROWS)
class ConstantAndInputOutputs(HybridBlock):
    """Outputs: the input itself, a constant, and a loop's result."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((4,))
        for row in x:
            h = F.maximum(h, row)
        return x, F.ones((2,)) * 3, h


# ------------------------------------------------------------------------- collected lists

@program(*ROWS)
class CollectedRowsStacked(HybridBlock):
    """Rows collected by a for, joined by stack."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        h = F.zeros((4,))
        for row in x:
            h = F.tanh(h + row)
            outs.append(h)
        return F.stack(*outs)


@program(*ROWS)
class CollectedRowsConcatenated(HybridBlock):
    """Rows collected by a for, joined by concat on axis 0 (item 4's case)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row.expand_dims(0) * 2)
        return F.concat(*outs, dim=0)


@program(*ROWS)
class CollectedWithEarlierItems(HybridBlock):
    """A list holding an item before the loop, joined by concat."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = [F.zeros((1, 4))]
        for row in x:
            outs.append(row.expand_dims(0) + 1)
        return F.concat(*outs, dim=0)


@program(*ROWS)
class TwoLoopsAppendOneList(HybridBlock):
    """Two for loops append to one list, joined by concat."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(row.expand_dims(0))
        for row in x:
            outs.append(row.expand_dims(0) * -1)
        return F.concat(*outs, dim=0)


@program(*ROWS)
class CollectedScalarsSummed(HybridBlock):
    """One element per step collected, stacked and summed with the rows' count."""

    @autograph
    def hybrid_forward(self, F, x):
        sums = []
        for row in x:
            sums.append(F.sum(row, keepdims=True))
        total = F.concat(*sums, dim=0)
        return F.sum(total), total


# ------------------------------------------------------------------------- masks

@program(*MASKS)
class LoopOverMaskedRows(HybridBlock):
    """boolean_mask keeps some rows; a for over the kept rows (run-time length)."""

    @autograph
    def hybrid_forward(self, F, x, mask):
        kept = F.contrib.boolean_mask(x, mask)
        h = F.zeros((3,))
        for row in kept:
            h = F.tanh(h * 0.5 + row)
        return h


@program(*MASKS)
class ForeachOverMaskedRows(HybridBlock):
    """An explicit foreach over the rows a mask keeps, its step outputs returned."""

    def hybrid_forward(self, F, x, mask):
        kept = F.contrib.boolean_mask(x, mask)
        outs, h = gluon_cf.foreach(lambda r, h: (r * h, h + r), kept, F.ones((3,)))
        return outs, h

    def plain_forward(self, F, x, mask):
        h = F.ones((3,))
        outs = []
        for k, row in enumerate(x):
            if mask[k].asscalar():
                outs.append(row * h)
                h = h + row
        return F.stack(*outs), h


@program(*MASKS)
class MaskedMeanByWhere(HybridBlock):
    """A where-mask inside a loop: only kept rows are added."""

    @autograph
    def hybrid_forward(self, F, x, mask):
        h = F.zeros((3,))
        count = F.zeros((1,))
        for k in range(3):
            row = x[k]
            h = h + F.where(mask[k:k + 1].broadcast_to((3,)) > 0, row, F.zeros_like(row))
            count = count + mask[k:k + 1]
        return h / F.maximum(count, 1)


@program(*LENGTHS)
class SequenceMaskThenLoop(HybridBlock):
    """SequenceMask by lengths, then a for over the time axis."""

    @autograph
    def hybrid_forward(self, F, x, lengths):
        masked = F.SequenceMask(x.swapaxes(0, 1), sequence_length=lengths,
                                use_sequence_length=True)
        h = F.zeros_like(masked[0])
        for step in masked:
            h = F.tanh(h * 0.5 + step)
        return h


# ------------------------------------------------------------------------- parameters, cells

@program(*ROWS)
class DenseSharedByTwoLoops(HybridBlock):
    """One Dense used in two loops and outside them."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = nn.Dense(4, in_units=4)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1, 4))
        for row in x:
            h = F.tanh(self.dense(h) + row.expand_dims(0))
        g = self.dense(h)
        for row in x:
            g = g * 0.5 + self.dense(row.expand_dims(0))
        return h, g


@program(*ROWS)
class GruCellOverRows(HybridBlock):
    """A gluon GRUCell over the rows, the state list unpacked each step."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = rnn.GRUCell(3, input_size=4)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1, 3))
        for row in x:
            out, states = self.cell(row.expand_dims(0), [h])
            h = states[0]
        return h


@program(*TOKENS)
class EmbeddingLookupLoop(HybridBlock):
    """int32 tokens embedded one by one in a for (an Embedding in the loop)."""
    NO_GRAD = (0,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.embed = nn.Embedding(5, 3)

    @autograph
    def hybrid_forward(self, F, tokens):
        h = F.zeros((3,))
        for tok in tokens:
            h = F.tanh(h + self.embed(tok)[0])
        return h


# ------------------------------------------------------------------------- dtypes

@program(*FLOAT64_ROWS)
class Float64LoopAndIf(HybridBlock):
    """A float64 model: a for with an if inside."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((4,), dtype="float64")
        for row in x:
            if F.sum(row) > 0:
                h = F.tanh(h + row)
            else:
                h = h * 0.25
        return h


@program(*TOKENS)
class Int32CountAndSum(HybridBlock):
    """int32 values summed and counted in a loop (integer arithmetic throughout)."""
    NO_GRAD = (0,)

    @autograph
    def hybrid_forward(self, F, tokens):
        total = F.zeros((1,), dtype="int32")
        big = F.zeros((1,), dtype="int32")
        for tok in tokens:
            total = total + tok
            if F.sum(tok) > 1:
                big = big + 1
        return total, big


@program(*ROWS)
class ArgmaxCastInLoop(HybridBlock):
    """argmax of each row, cast to int32 and collected: an integer output."""

    @autograph
    def hybrid_forward(self, F, x):
        ids = []
        for row in x:
            ids.append(F.argmax(row, axis=0).astype("int32"))
        return F.concat(*ids, dim=0)


# ------------------------------------------------------------------------- explicit ops

@program(*ROWS)
class ForeachTwoDataTwoStates(HybridBlock):
    """foreach over two data arrays with two states."""

    def hybrid_forward(self, F, x):
        def step(data, states):
            a, b = data
            h, c = states
            return a * h + b, [h + a, c * b]
        outs, (h, c) = gluon_cf.foreach(step, [x, x * 2], [F.ones((4,)), F.ones((4,))])
        return outs, h, c

    def plain_forward(self, F, x):
        h, c, outs = F.ones((4,)), F.ones((4,)), []
        for a, b in zip(x, x * 2):
            outs.append(a * h + b)
            h, c = h + a, c * b
        return F.stack(*outs), h, c


@program(*COUNTS[:2])
class WhileLoopWithStepOutputs(HybridBlock):
    """while_loop with step outputs and max_iterations: the outputs padded to the bound (with
    no step, MXNet's eager while_loop returns no outputs at all: not run here)."""

    def hybrid_forward(self, F, x, n):
        outs, (i, h) = gluon_cf.while_loop(
            lambda i, h: i < n,
            lambda i, h: (h * 2, [i + 1, h + F.take(x, i).reshape((-1,))]),
            [F.zeros((1,)), F.zeros((4,))], max_iterations=6)
        return outs, i, h

    def plain_forward(self, F, x, n):
        i, h, outs = 0, F.zeros((4,)), []
        while i < n.asscalar() and i < 6:
            outs.append(h * 2)
            h = h + x[i]
            i += 1
        padded = outs + [F.zeros((4,))] * (6 - len(outs))
        return F.stack(*padded), F.array([i]), h


@program(*ROWS)
class CondInsideForeach(HybridBlock):
    """An explicit cond in each step of an explicit foreach."""

    def hybrid_forward(self, F, x):
        def step(row, h):
            h = gluon_cf.cond(F.sum(row) > 0, lambda: h + row, lambda: h * row)
            return h, h
        return gluon_cf.foreach(step, x, F.ones((4,)))

    def plain_forward(self, F, x):
        h, outs = F.ones((4,)), []
        for row in x:
            h = h + row if F.sum(row).asscalar() > 0 else h * row
            outs.append(h)
        return F.stack(*outs), h


@program(*COUNTS)
class ForeachInsideWhileLoop(HybridBlock):
    """An explicit foreach over the rows in each step of a while_loop."""

    def hybrid_forward(self, F, x, n):
        def body(i, h):
            _, s = gluon_cf.foreach(lambda r, s: (r, s * 0.5 + r), x, h)
            return [], [i + 1, s]
        _, (i, h) = gluon_cf.while_loop(lambda i, h: i < n, body,
                                        [F.zeros((1,)), F.zeros((4,))], max_iterations=6)
        return h

    def plain_forward(self, F, x, n):
        h = F.zeros((4,))
        for _ in range(min(int(n.asscalar()), 6)):
            for r in x:
                h = h * 0.5 + r
        return h


# ------------------------------------------------------------------------- recursion

def _plain_tree(F, x, left, right, roots, leaf, combine):
    lt, rt, n = _ids(left), _ids(right), x.shape[0]

    def node(i):
        i = _row(i, n)
        here = F.take(x, F.array([i]))
        if lt[i] < 0:
            return leaf(F, here)
        return combine(F, here, node(lt[i]), node(rt[i]))
    return F.concat(*[node(r) for r in _ids(roots)], dim=0)


def _leaf(F, here):
    return F.tanh(here)


def _combine(F, here, a, b):
    return F.tanh(here + a * 0.5 + b)


@program(TWO_TREES, DEEPER, SHARED, SINGLE)
class TreeRecursionRoots(HybridBlock):
    """A recursive function over left/right arrays, a foreach over the roots."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.tanh(here),
                                 lambda: F.tanh(here + node(F.take(left, idx)) * 0.5 +
                                                node(F.take(right, idx))))
        hs, _ = gluon_cf.foreach(lambda r, _: (node(r), []), roots, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        return _plain_tree(F, x, left, right, roots, _leaf, _combine)


@program(TWO_TREES, DEEPER, SHARED, SINGLE)
class TreeRecursionTwoOutputs(HybridBlock):
    """The recursion returns (value, size); both returned, the size as a second output."""
    NO_GRAD = (1, 2, 3)

    def hybrid_forward(self, F, x, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            here = F.take(x, idx)

            def internal():
                lv, ls = node(F.take(left, idx))
                rv, rs = node(F.take(right, idx))
                return F.tanh(here + lv * 0.5 + rv), ls + rs + 1
            return gluon_cf.cond(F.take(left, idx) < 0,
                                 lambda: (F.tanh(here), F.ones((1, 1))), internal)
        (hs, sizes), _ = gluon_cf.foreach(lambda r, _: (list(node(r)), []), roots, [])
        return F.reshape(hs, (-3, 0)), F.reshape(sizes, (-3, 0))

    def plain_forward(self, F, x, left, right, roots):
        lt, rt, n = _ids(left), _ids(right), x.shape[0]

        def size(i):
            i = _row(i, n)
            return 1 if lt[i] < 0 else size(lt[i]) + size(rt[i]) + 1
        sizes = F.array([[size(r)] for r in _ids(roots)])
        return _plain_tree(F, x, left, right, roots, _leaf, _combine), sizes


@program([floats(1, 2, 3, 4), floats(3)], [floats(5, 1, 2), floats(2)],
         [floats(2, 2, 2, 2, 2, 2), floats(5)])
class LinearRecursionSumTo(HybridBlock):
    """total(i) = values[i] + total(i - 1): a recursion on a counter."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, values, n):
        @gluon_cf.recursive
        def total(i):
            return gluon_cf.cond(i < 1, lambda: F.take(values, i),
                                 lambda: F.take(values, i) * 0.5 + total(i - 1))
        return total(n)

    def plain_forward(self, F, values, n):
        out = values[0:1]
        for i in range(1, int(n.asscalar()) + 1):
            out = values[i:i + 1] * 0.5 + out
        return out


# ------------------------------------------------------------------------- round two

# masks keeping nothing after the first (the hybridized block refuses a loop over no row:
# MXNet's zero-size limit; the exports are compared on what the block runs)
EMPTY_MASKS = MASKS + ([rand(4, 3, seed=13), floats(0, 0, 0, 0)],)


@program(*EMPTY_MASKS)
class SumOfMaskedRowsInLoop(HybridBlock):
    """boolean_mask, then a for over the kept rows collecting them, joined by concat."""

    @autograph
    def hybrid_forward(self, F, x, mask):
        kept = F.contrib.boolean_mask(x, mask)
        outs = [F.ones((1, 3))]
        for row in kept:
            outs.append(row.expand_dims(0) * 2)
        return F.concat(*outs, dim=0)


@program(*ROWS)
class DecoderRangeWithBreak(HybridBlock):
    """for t in range(6) with one append and a tensor break: the commonest decoder."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((4,))
        outs = [h]
        for t in range(6):
            h = F.tanh(h + x[0] * (t + 1))
            if F.sum(h) > 1.5:
                break
            outs.append(h)
        return F.stack(*outs)


@program(*ROWS)
class SameValueTwiceAndAParameter(HybridBlock):
    """The loop's result returned twice, and a parameter as an output."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.bias = self.params.get("bias", shape=(4,), init=mx.init.Constant(0.25))

    @autograph
    def hybrid_forward(self, F, x, bias):
        h = bias
        for row in x:
            h = h * 0.5 + row
        return h, h, bias * 1


@program([rand(3, 2, 4, seed=14)], [rand(5, 3, 4, seed=15)], [rand(1, 1, 4, seed=16)])
class LoopOverTwoDynamicAxes(HybridBlock):
    """A for over axis 0 of data whose axes 0 and 1 both change (a batch of run-time size)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for step in x:
            h = F.tanh(h + step)
        return h, F.sum(h, axis=1)


@program(*COUNTS)
class WhileReadsParameterInCondition(HybridBlock):
    """A while whose condition compares with a parameter."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.limit = self.params.get("limit", shape=(1,), init=mx.init.Constant(1.5),
                                         grad_req="null")

    @autograph
    def hybrid_forward(self, F, x, n, limit):
        i = F.zeros((1,))
        h = F.zeros((4,))
        while (i < n) * (F.sum(h) < limit * 4):
            gluon_cf.max_iterations(8)
            h = h + F.abs(F.take(x, i).reshape((-1,)))
            i = i + 1
        return h, i


@program(*LENGTHS)
class SequenceReverseThenLoop(HybridBlock):
    """SequenceReverse by lengths, then a for over time collecting the states."""

    @autograph
    def hybrid_forward(self, F, x, lengths):
        rev = F.SequenceReverse(x.swapaxes(0, 1), sequence_length=lengths,
                                use_sequence_length=True)
        h = F.zeros_like(rev[0])
        outs = []
        for step in rev:
            h = h * 0.5 + step
            outs.append(h)
        return F.stack(*outs, axis=1)


@program(*ROWS)
class MxnetContribForeach(HybridBlock):
    """MXNet's own F.contrib.foreach beside a gluon_cf loop."""

    def hybrid_forward(self, F, x):
        outs, h = F.contrib.foreach(lambda r, h: (r * 2, h + r), x, F.zeros((4,)))
        _, g = gluon_cf.foreach(lambda r, g: (r, g * 0.5 + r), outs, h)
        return g

    def plain_forward(self, F, x):
        h = F.zeros((4,))
        outs = []
        for r in x:
            outs.append(r * 2)
            h = h + r
        for r in outs:
            h = h * 0.5 + r
        return h


@program(*ROWS)
class MxnetContribCond(HybridBlock):
    """MXNet's own F.contrib.cond on the sum."""

    def hybrid_forward(self, F, x):
        return F.contrib.cond(F.sum(x) > 0, lambda: x * 2, lambda: x - 1)

    def plain_forward(self, F, x):
        return x * 2 if F.sum(x).asscalar() > 0 else x - 1


@program([rand(4, 3, seed=17), floats(3, 1, 0, 2)], [rand(2, 3, seed=18), floats(2, 1)],
         [rand(5, 3, seed=19), floats(0, 0, 0, 0, 1)])
class RecursionWithLoopInLeaf(HybridBlock):
    """total(i): a leaf sums the rows with a while_loop of a constant counter; internal nodes
    recurse on i - 1 (the issue's batching case)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, ids):
        @gluon_cf.recursive
        def total(i):
            def leaf():
                _, (k, s) = gluon_cf.while_loop(
                    lambda k, s: k < 2,
                    lambda k, s: ([], [k + 1, s + F.broadcast_mul(F.take(x, i), k + 1)]),
                    [F.zeros((1,)), F.zeros((1, 3))], max_iterations=3)
                return s
            return gluon_cf.cond(i < 1, leaf, lambda: F.take(x, i) + total(i - 1) * 0.5)
        hs, _ = gluon_cf.foreach(lambda r, _: (total(r), []), ids, [])
        return F.reshape(hs, (-3, 0))

    def plain_forward(self, F, x, ids):
        def total(i):
            if i < 1:
                return F.take(x, F.array([i])) * 3
            return F.take(x, F.array([i])) + total(i - 1) * 0.5
        return F.concat(*[total(int(i)) for i in ids.asnumpy()], dim=0)


@program(*ROWS)
class EnumerateOverRows(HybridBlock):
    """enumerate over a tensor's rows in a for (converted or refused at the line)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((4,))
        for k, row in enumerate(x):
            h = h + row * (k + 1)
        return h


# ------------------------------------------------------------------------- round three

# one row first: every dynamic size of the example is 1
ONE_ROW_FIRST = (ROWS[3], ROWS[0], ROWS[1], ROWS[2])


@program(*[arrays + [rand(2, seed=20)] for arrays in ROWS])
class UnusedSecondInput(HybridBlock):
    """A second input the model never reads."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, unused):
        h = F.zeros((4,))
        for row in x:
            h = h + row
        return h


@program(*[[rand(2, seed=21)] + arrays for arrays in ROWS])
class FirstInputReadOnlyInLoop(HybridBlock):
    """The first input is read only inside the loop body (captured), the second is looped."""

    @autograph
    def hybrid_forward(self, F, w, x):
        h = F.zeros((4,))
        for row in x:
            h = h + row * F.sum(w)
        return h


@program(*ONE_ROW_FIRST)
class OneRowExampleLoopAndBroadcast(HybridBlock):
    """Exported from a one-row example: a loop with broadcasting against the row count."""

    @autograph
    def hybrid_forward(self, F, x):
        mean = F.mean(x, axis=0, keepdims=True)
        h = F.zeros((1, 4))
        for row in x:
            h = F.broadcast_add(h * 0.5, row.expand_dims(0))
        return F.broadcast_sub(x, mean), h


@program(COUNTS[2], COUNTS[0], COUNTS[1])
class ZeroStepExampleWhile(HybridBlock):
    """Exported from an example whose while runs no step."""

    @autograph
    def hybrid_forward(self, F, x, n):
        i = F.zeros((1,))
        h = F.ones((4,))
        while i < n:
            gluon_cf.max_iterations(8)
            h = h * 0.5 + F.take(x, i).reshape((-1,))
            i = i + 1
        return h


@program(*ROWS)
class CondOfDifferentSizesAsOutput(HybridBlock):
    """A cond whose branches give different numbers of rows, returned as it is. (Not
    ``x[:1]``: a Symbol's slice selects outputs, so hybridized it is ``x``, in MXNet too.)"""

    def hybrid_forward(self, F, x):
        return gluon_cf.cond(F.sum(x) > 0, lambda: F.concat(x, x * 2, dim=0),
                             lambda: F.slice_axis(x, axis=0, begin=0, end=1))

    def plain_forward(self, F, x):
        return F.concat(x, x * 2, dim=0) if F.sum(x).asscalar() > 0 else x[:1]


@program(*ROWS)
class ReversedRowsAndReshapeCodes(HybridBlock):
    """A loop over x[::-1] collecting reshaped states (reshape codes 0, -1, -3, -4)."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((1, 4))
        outs = []
        for row in F.reverse(x, axis=0):
            h = F.tanh(h + row.reshape((1, -1)))
            outs.append(h.reshape((-4, 1, -1, 0)).reshape((-3, 0)))
        return F.concat(*outs, dim=0).reshape((0, 2, -1))


@program(*ROWS)
class LoopOverTransposeWithArange(HybridBlock):
    """A for over the columns (x.T), each weighted by its row position (arange_like)."""

    @autograph
    def hybrid_forward(self, F, x):
        pos = F.contrib.arange_like(x, axis=0)
        h = F.zeros_like(pos)
        for col in x.T:
            h = h + col * (pos + 1)
        return h


@program([rand(3, 4).astype(np.float64), floats(1, 0, 1)],
         [rand(5, 4, seed=22).astype(np.float64), floats(0, 1, 1, 1, 0)])
class Float64MaskedLoop(HybridBlock):
    """float64 rows, a float32 mask cast to float64, a for with where."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, mask):
        keep = mask.astype("float64")
        h = F.zeros((4,), dtype="float64")
        for k in range(2):
            h = h + F.where(keep[k:k + 1].broadcast_to((4,)) > 0, x[k], -x[k])
        return h


@program(*ROWS)
class TakeWrapInLoop(HybridBlock):
    """take with mode='wrap' of step-dependent indices over a run-time row count."""

    @autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = F.zeros((4,))
        for row in x:
            h = h + F.take(x, i + 3, mode="wrap").reshape((-1,)) * row
            i = i + 1
        return h


@program([rand(3, 4), floats(2).astype(np.int64)],
         [rand(5, 4, seed=23), floats(4).astype(np.int64)],
         [rand(2, 4, seed=24), floats(0).astype(np.int64)])
class Int64CountWhile(HybridBlock):
    """An int64 count compared with a float counter cast to int64."""
    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, n):
        i = F.zeros((1,))
        h = F.zeros((4,))
        while i.astype("int64") < n:
            gluon_cf.max_iterations(8)
            h = h + F.take(x, i).reshape((-1,))
            i = i + 1
        return h


@program(*ROWS)
class CondOfDifferentRanksAsOutput(HybridBlock):
    """A cond whose branches give different ranks, returned as it is: export_onnx refuses it
    at the cond's line (an ONNX model output declares one rank), save_artifact exports it."""

    def hybrid_forward(self, F, x):
        return gluon_cf.cond(F.sum(x) > 0, lambda: x * 2, lambda: F.sum(x, axis=0))

    def plain_forward(self, F, x):
        return x * 2 if F.sum(x).asscalar() > 0 else F.sum(x, axis=0)


# ------------------------------------------------------------------------- round four

@program(*ROWS)
class ListInIfInLoop(HybridBlock):
    """A tensor if inside a for sets the row a list collects."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            if F.sum(row) > 0:
                v = row * 2
            else:
                v = row - 1
            outs.append(v.expand_dims(0))
        return F.concat(*outs, dim=0)


@program(*ROWS)
class InnerLoopCollects(HybridBlock):
    """An inner for's result collected by the outer for."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            s = F.zeros((1,))
            for v in row:
                s = s + v * v
            outs.append(s)
        return F.concat(*outs, dim=0)


@program(*ROWS)
class WhileBreakCollect(HybridBlock):
    """A while True collecting rows after a tensor break: refused at the append's line
    (autograph's rule), in every mode."""

    @autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        outs = [F.zeros((4,))]
        while True:
            gluon_cf.max_iterations(6)
            row = F.take(x, i).reshape((-1,))
            if F.sum(row) < 0:
                break
            outs.append(row)
            i = i + 1
            if F.sum(i >= 3) > 0:
                break
        return F.stack(*outs), i


@program(*ROWS)
class LastItem(HybridBlock):
    """outs[-1] + outs[0] of a collected list (checked items, exported under an If)."""

    @autograph
    def hybrid_forward(self, F, x):
        outs = []
        for row in x:
            outs.append(F.tanh(row))
        return outs[-1] + outs[0]


@program(*ROWS)
class TupleState(HybridBlock):
    """A tuple of states unpacked and rebuilt each step."""

    @autograph
    def hybrid_forward(self, F, x):
        state = (F.zeros((4,)), F.ones((4,)))
        for row in x:
            a, b = state
            state = (a + row * b, b * 0.5)
        return state[0], state[1]


@program(*ROWS)
class DictState(HybridBlock):
    """A dict of states updated by key each step."""

    @autograph
    def hybrid_forward(self, F, x):
        d = {"h": F.zeros((4,)), "n": F.zeros((1,))}
        for row in x:
            d["h"] = d["h"] + row
            d["n"] = d["n"] + 1
        return d["h"] / d["n"]


@program(*ROWS)
class ReturnInLoop(HybridBlock):
    """A return under a tensor if inside a for."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((4,))
        for row in x:
            h = h + row
            if F.sum(h) > 1:
                return h * 10
        return h


# ------------------------------------------------------------------------- round five

@program(*MASKS)
class MaskAsOutput(HybridBlock):
    """boolean_mask's rows as an output (a rank MXNet infers as unknown) and their sum."""

    def hybrid_forward(self, F, x, mask):
        kept = F.contrib.boolean_mask(x, mask)
        return kept * 2, F.sum(kept, axis=0)

    def plain_forward(self, F, x, mask):
        kept = F.contrib.boolean_mask(x, mask)
        return kept * 2, F.sum(kept, axis=0)


@program(*MASKS)
class CondOfMaskOrRows(HybridBlock):
    """A cond between a mask's rows and all rows (branches of different sizes)."""

    def hybrid_forward(self, F, x, mask):
        return gluon_cf.cond(F.sum(mask) > 2, lambda: F.contrib.boolean_mask(x, mask),
                             lambda: x * 3)

    def plain_forward(self, F, x, mask):
        return F.contrib.boolean_mask(x, mask) if F.sum(mask).asscalar() > 2 else x * 3


@program(*MASKS)
class IntCond(HybridBlock):
    """A cond on int32 values giving int32 outputs, beside a float output."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, mask):
        m = mask.astype("int32")
        y = gluon_cf.cond(F.sum(m) > 1, lambda: m * 2, lambda: m - 1)
        return y, x * 1

    def plain_forward(self, F, x, mask):
        m = mask.astype("int32")
        return (m * 2 if F.sum(m).asscalar() > 1 else m - 1), x * 1


@program(*MASKS)
class ComparisonsInLoop(HybridBlock):
    """Comparisons summed in a loop, and a comparison as an output."""

    @autograph
    def hybrid_forward(self, F, x, mask):
        c = F.zeros((3,))
        for row in x:
            c = c + (row > 0)
        return c, (x > 0.5)
