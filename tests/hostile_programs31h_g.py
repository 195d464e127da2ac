"""Round 31h (issue 24): more ports - autograph decoders with breaks, enumerate/zip and
closures over loop variables (plain Python is the oracle), and nested loops, dicts of states
and loops of one step on ``C``'s ops (MXNet's F.contrib ops are the oracle)."""
from mxnet.gluon import HybridBlock, nn, rnn

import hostile_harness
from gluon_cf import autograph
from hostile_harness31h import C, PythonOracle, log_add

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats
SEQ = ([rand(4, 3)], [rand(1, 3, seed=1)], [rand(6, 3, seed=2)])
PAIRS = ([rand(4, 3), rand(4, 3, seed=5)], [rand(2, 3, seed=1), rand(2, 3, seed=6)])


@program(*SEQ)
class AgDecoderRangeWithTensorBreak(PythonOracle):
    """The commonest decoder: for t in range(5), one append, a tensor break."""
    def __init__(self):
        super().__init__()
        self.d = nn.Dense(3, in_units=3)

    @autograph
    def hybrid_forward(self, F, x):
        y = F.mean(x, axis=0, keepdims=True)
        outs = []
        for t in range(5):
            y = F.tanh(self.d(y))
            outs.append(y)
            if F.sum(y) < -0.5:
                break
        return F.concat(*outs, dim=0)


@program(*SEQ)
class AgEnumerateRows(PythonOracle):
    @autograph
    def hybrid_forward(self, F, x):
        acc = F.zeros((3,))
        for k, r in enumerate(x):
            acc = acc * 0.5 + r
        return acc


@program(*PAIRS)
class AgZipTwoSequences(PythonOracle):
    @autograph
    def hybrid_forward(self, F, x, y):
        acc = F.zeros((3,))
        for a, b in zip(x, y):
            acc = acc + a * b
        return acc


@program(*SEQ)
class AgNestedFunctionReadsLoopVar(PythonOracle):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.ones((3,))

        def step():
            return h * 0.5
        for r in x:
            h = step() + r
        return h


@program(*SEQ)
class AgWhileWithElseBranchState(PythonOracle):
    @autograph
    def hybrid_forward(self, F, x):
        i = F.zeros((1,))
        h = F.zeros((3,))
        while i < 3:
            if F.sum(h) > 0:
                h = h - F.mean(x, axis=0)
            else:
                h = h + F.max(x, axis=0)
            i = i + 1
        return h, i


@program(*SEQ)
class AgListOfStatesPerLayer(PythonOracle):
    def __init__(self):
        super().__init__()
        self.c1 = rnn.GRUCell(3, input_size=3)
        self.c2 = rnn.GRUCell(3, input_size=3)

    @autograph
    def hybrid_forward(self, F, x):
        h1 = F.zeros((1, 3))
        h2 = F.zeros((1, 3))
        for r in x:
            o, (h1,) = self.c1(r.reshape((1, 3)), [h1])
            o, (h2,) = self.c2(o, [h2])
        return h1, h2


@program(*SEQ)
class AgEarlyReturnInsideIf(PythonOracle):
    @autograph
    def hybrid_forward(self, F, x):
        s = F.sum(x)
        if s > 0:
            return x * 2
        return x - 1


@program(*SEQ)
class AgAccumulateMaxWithIfExpression(PythonOracle):
    @autograph
    def hybrid_forward(self, F, x):
        best = F.ones((3,)) * -10
        for r in x:
            best = F.maximum(best, r) if F.sum(r) > -1 else best
        return best


# MXNet's F.contrib ops are the oracle
@program(*([rand(3, 2, 4), rand(3, 2, 4, seed=9)], [rand(1, 1, 4, seed=1),
                                                    rand(1, 1, 4, seed=2)]))
class ForeachTwoDataDictStates(HybridBlock):
    def hybrid_forward(self, F, a, b):
        zeros = F.zeros_like(F.sum(a, axis=0))
        init = {"sum": zeros, "prod": zeros + 1}

        def step(data, states):
            x, y = data
            s = dict(zip(("sum", "prod"), states))
            return x * y, [s["sum"] + x, s["prod"] * F.tanh(y)]
        outs, (total, prod) = C.foreach(step, [a, b], [init["sum"], init["prod"]])
        return outs, total, prod


@program(*SEQ)
class WhileOfMaxOneIteration(HybridBlock):
    def hybrid_forward(self, F, x):
        def body(i, h):
            return h * 2, [i + 1, h + F.sum(x, axis=0)]
        outs, (i, h) = C.while_loop(lambda i, h: i < 5, body,
                                    [F.zeros((1,)), F.zeros((3,))], max_iterations=1)
        return outs, i, h


@program(*([rand(3, 4, 2)], [rand(2, 1, 2, seed=1)]))
class ForeachInsideWhile(HybridBlock):
    def hybrid_forward(self, F, x):
        def body(i, h):
            outs, last = C.foreach(lambda r, s: (r + s[0], [s[0] + r]), x, [h])
            return F.sum(outs, axis=0), [i + 1, F.tanh(last[0])]
        h0 = F.zeros_like(F.sum(x, axis=0))
        outs, (i, h) = C.while_loop(lambda i, h: i < 2, body, [F.zeros((1,)), h0],
                                    max_iterations=2)
        return outs, h


@program(*([rand(3, 4, 2)], [rand(2, 1, 2, seed=1)]))
class WhileInsideForeach(HybridBlock):
    def hybrid_forward(self, F, x):
        def step(r, s):
            def body(j, h):
                return [], [j + 1, h * 0.5 + r]
            _, (_, h) = C.while_loop(lambda j, h: j < 3, body, [F.zeros((1,)), s[0]],
                                     max_iterations=3)
            return h, [h]
        outs, last = C.foreach(step, x, [F.zeros_like(F.sum(x, axis=0))])
        return outs, last[0]


@program(*SEQ)
class CondReturnsTupleWithIndices(HybridBlock):
    def hybrid_forward(self, F, x):
        def then():
            return F.max(x, axis=0), F.argmax(x, axis=0)

        def other():
            return F.min(x, axis=0), F.argmin(x, axis=0)
        v, idx = C.cond(F.sum(x) > 0, then, other)
        return v, idx


@program(*([rand(4, 2, 3), floats(4, 2)], [rand(4, 3, 3, seed=1), floats(1, 4, 3)]))
class PointerOverMaskedSource(HybridBlock):
    """Pointer scores masked beyond each row's length (SequenceMask with value -1e4)."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, x, length):
        def step(r, s):
            scores = F.sum(F.broadcast_mul(x, s[0].expand_dims(0)), axis=-1)    # (T, B)
            scores = F.SequenceMask(scores, sequence_length=length, use_sequence_length=True,
                                    value=-1e4)
            p = F.softmax(scores, axis=0)
            pointed = F.sum(F.broadcast_mul(p.expand_dims(2), x), axis=0)
            return p, [F.tanh(pointed + r)]
        ps, last = C.foreach(step, x, [F.zeros_like(F.sum(x, axis=0))])
        return ps, last[0]


@program(*([rand(2, 4), rand(4, 2, 4, seed=5)], [rand(1, 4, seed=1), rand(4, 1, 4, seed=6)]))
class ScheduledSamplingLstmAlwaysPredicted(HybridBlock):
    def __init__(self):
        super().__init__()
        self.cell = rnn.LSTMCell(4, input_size=4)
        self.out = nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, x0, xs):
        def step(gold, states):
            prev, h, c = states
            u = F.random.uniform(shape=(1,))
            use_gold = F.broadcast_like((u > 2.0).reshape((1, 1)), gold)    # never gold
            out, (h, c) = self.cell(F.where(use_gold, gold, prev), [h, c])
            pred = F.softmax(self.out(out))
            return pred, [pred, h, c]
        preds, _ = C.foreach(step, xs, [x0, F.zeros_like(x0), F.zeros_like(x0)])
        return preds


CTC2 = ([rand(5, 2, 4, seed=7), floats(1, 2, 3, 3)], [rand(2, 2, 4, seed=8), floats(1, 1, 2, 2)])


@program(*CTC2)
class CTCAlphaWithGatheredEmissions(HybridBlock):
    """CTC's alpha over 5 extended states (labels of 2 per row), emissions gathered by pick
    over a broadcast (B, S, V) view."""
    NO_GRAD = (1,)

    def hybrid_forward(self, F, logits, labels):
        lab = labels.reshape((2, 2))
        ext = F.concat(F.stack(F.zeros_like(lab), lab, axis=2).reshape((2, 4)),
                       F.zeros((2, 1)), dim=1)
        neg = -1e4
        alpha0 = F.concat(F.zeros((2, 2)), F.ones((2, 3)) * neg, dim=1)

        def lse(a, b):
            return log_add(F, a, b)

        def step(lp, states):
            lp = F.log_softmax(lp, axis=-1)
            emit = F.pick(F.broadcast_to(lp.expand_dims(1), (2, 5, 4)), ext, axis=-1)
            alpha = states[0]
            s1 = F.concat(F.ones((2, 1)) * neg, F.slice_axis(alpha, axis=1, begin=0, end=-1),
                          dim=1)
            new = lse(alpha, s1) + emit
            return new, [new]
        alphas, (last,) = C.foreach(step, logits, [alpha0])
        return alphas, last
