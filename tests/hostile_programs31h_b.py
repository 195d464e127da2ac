"""Round 31h (issue 24): tree models and decoders written against ``C`` (gluon_cf's ops and
``C.recursive``, or MXNet's F.contrib ops with plain Python recursion as the oracle; see
``hostile_harness31h``): top-down tree decoders that decide the tree, n-ary TreeLSTMs over
padded child lists with masks, incremental transformer decoders with state dicts, scheduled
sampling, blocks shared between parents."""
import numpy as np
from mxnet.gluon import HybridBlock, nn, rnn

import hostile_harness
from hostile_harness31h import C

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats


def ints(*values):
    return np.array(values, np.float32)


# n-ary trees as padded child tables: children[i] = up to 3 child ids, -1 padding
TREES = ([rand(5, 3), ints(1, 2, 3, 4, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1), ints(0)],
         [rand(5, 3, seed=1), ints(1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1, -1, -1, -1, -1),
          ints(0)],
         [rand(5, 3, seed=2), -np.ones(15, np.float32), ints(3)])


class _NaryTree(HybridBlock):
    NO_GRAD = (1, 2)

    def __init__(self):
        super().__init__()
        self.leaf = nn.Dense(4, in_units=3)
        self.comb = nn.Dense(4, in_units=4 * 3 + 3)


@program(*TREES)
class NaryTreeMaskedChildren(_NaryTree):
    """Each node combines its 3 child slots; a missing child's state is masked to zeros (the
    recursive call on a padded slot returns zeros through a cond on its id)."""
    def hybrid_forward(self, F, x, children, root):
        table = children.reshape((-1, 3))

        @C.recursive
        def node(i):
            row = F.take(table, i).reshape((-1,))

            def leaf():
                return F.tanh(self.leaf(F.take(x, i)))

            def inner():
                states = []
                for k in range(3):
                    c = F.slice_axis(row, axis=0, begin=k, end=k + 1)
                    states.append(C.cond(c >= 0, lambda c=c: node(c),
                                         lambda: F.zeros((1, 4))))
                return F.tanh(self.comb(F.concat(*states, F.take(x, i), dim=-1)))
            return C.cond(F.max(row) < 0, leaf, inner)
        return node(root)


@program(*TREES)
class NaryTreeChildSumWithMaskCount(_NaryTree):
    """Child-sum style: children's states summed with a mask, divided by the child count."""
    def hybrid_forward(self, F, x, children, root):
        table = children.reshape((-1, 3))

        @C.recursive
        def node(i):
            row = F.take(table, i).reshape((-1,))
            mask = row >= 0

            def leaf():
                return F.tanh(self.leaf(F.take(x, i)))

            def inner():
                total = F.zeros((1, 4))
                for k in range(3):
                    c = F.slice_axis(row, axis=0, begin=k, end=k + 1)
                    total = total + C.cond(c >= 0, lambda c=c: node(c),
                                           lambda: F.zeros((1, 4)))
                avg = total / F.sum(mask)
                return F.tanh(self.leaf(F.take(x, i)) + avg)
            return C.cond(F.sum(mask) == 0, leaf, inner)
        return node(root)


DEPTHS = ([rand(1, 4), floats(3)], [rand(1, 4, seed=1), floats(0)],
          [rand(1, 4, seed=2), floats(1)], [rand(1, 4, seed=3), floats(5)])


@program(*DEPTHS)
class TopDownTreeDecoderDecidesTree(HybridBlock):
    """A tree decoder that decides the tree: at each node a gate (from the hidden state and
    the depth budget) says expand or stop; expanding grows two children by two cells.
    Returns the sum of the leaves' outputs and the node count."""
    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        self.left = nn.Dense(4, in_units=4)
        self.right = nn.Dense(4, in_units=4)
        self.gate = nn.Dense(1, in_units=4)
        self.out = nn.Dense(2, in_units=4)

    def hybrid_forward(self, F, h0, budget):
        @C.recursive
        def grow(h, b):
            expand = (F.sigmoid(self.gate(h)).reshape((1,)) > 0.3) * (b > 0)

            def stop():
                return self.out(h), F.ones((1,))

            def split():
                ol, nl = grow(F.tanh(self.left(h)), b - 1)
                orr, nr = grow(F.tanh(self.right(h)), b - 2)
                return ol + orr, nl + nr + 1
            return C.cond(expand, split, stop)
        return grow(h0, budget)


@program(*DEPTHS)
class TopDownDecoderWithWhileInLeaf(HybridBlock):
    """Leaves unroll a small RNN for budget+1 steps (a while_loop in the base case)."""
    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        self.split = nn.Dense(8, in_units=4)
        self.cell = rnn.RNNCell(4, input_size=4)

    def hybrid_forward(self, F, h0, budget):
        @C.recursive
        def grow(h, b):
            def leaf():
                def body(i, s):
                    out, (s,) = self.cell(s, [s])
                    return [], [i + 1, out]
                _, (_, s) = C.while_loop(lambda i, s: i <= b, body, [F.zeros((1,)), h],
                                         max_iterations=6)
                return s

            def inner():
                both = F.tanh(self.split(h))
                a = grow(F.slice_axis(both, axis=1, begin=0, end=4), b - 2)
                c = grow(F.slice_axis(both, axis=1, begin=4, end=8), b - 3)
                return a * c
            return C.cond(b < 2, leaf, inner)
        return grow(h0, budget)


STEPS = ([rand(2, 4), rand(4, 2, 4, seed=5)], [rand(1, 4, seed=1), rand(4, 1, 4, seed=6)],
         [rand(3, 4, seed=2), rand(4, 3, 4, seed=7)])


class _Attn(HybridBlock):
    """Single-head self-attention over a cache (B, T, 4) with a key/value dict state."""
    def __init__(self):
        super().__init__()
        self.q = nn.Dense(4, in_units=4, use_bias=False)
        self.k = nn.Dense(4, in_units=4, use_bias=False)
        self.v = nn.Dense(4, in_units=4, use_bias=False)
        self.o = nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, x, keys, values):
        q = self.q(x).expand_dims(1)
        keys = F.concat(keys, self.k(x).expand_dims(1), dim=1)
        values = F.concat(values, self.v(x).expand_dims(1), dim=1)
        w = F.softmax(F.batch_dot(q, keys, transpose_b=True) / 2.0, axis=-1)
        return self.o(F.batch_dot(w, values).reshape((0, -1))) + x, keys, values


@program(*STEPS)
class IncrementalTransformerDecoderForeach(HybridBlock):
    """A decoder layer run step by step; its cache is a dict {"k", "v"} carried in foreach:
    the cache grows (concat) each step, so it is kept as a fixed-size buffer with a mask."""
    def __init__(self):
        super().__init__()
        self.attn = _Attn()
        self.ffn = nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, x0, xs):
        steps = 4
        zeros = F.zeros_like(F.broadcast_like(x0.expand_dims(1), F.zeros((1, steps, 1)),
                                              lhs_axes=(1,), rhs_axes=(1,)))
        state = {"k": zeros, "v": zeros, "t": F.zeros((1,))}

        def step(x, s):
            s = dict(zip(("k", "v", "t"), s))
            q = self.attn.q(x).expand_dims(1)
            pos = F.one_hot(s["t"], steps).reshape((1, steps, 1))
            k = s["k"] + F.broadcast_mul(self.attn.k(x).expand_dims(1), pos)
            v = s["v"] + F.broadcast_mul(self.attn.v(x).expand_dims(1), pos)
            valid = (F.arange(steps) <= s["t"]).reshape((1, 1, steps))
            sc = F.batch_dot(q, k, transpose_b=True) / 2.0
            sc = F.where(F.broadcast_like(valid, sc), sc, F.ones_like(sc) * -1e9)
            y = self.attn.o(F.batch_dot(F.softmax(sc), v).reshape((0, -1))) + x
            y = y + F.relu(self.ffn(y))
            return y, [k, v, s["t"] + 1]
        ys, (k, v, t) = C.foreach(step, xs, [state["k"], state["v"], state["t"]])
        return ys, k, t


@program(*STEPS)
class IncrementalDecoderGreedyWhileConcatCache(HybridBlock):
    """The common port: a while_loop whose cache grows by concat each step. MXNet's while
    loop needs fixed-shape loop vars, so this is refused or fails in both."""
    def __init__(self):
        super().__init__()
        self.attn = _Attn()

    def hybrid_forward(self, F, x0, xs):
        empty = F.zeros_like(x0.expand_dims(1))

        def body(i, x, k, v):
            y, k, v = self.attn(x, k, v)
            return y, [i + 1, F.tanh(y), k, v]
        outs, (_, x, k, v) = C.while_loop(lambda i, *_: i < 3, body,
                                          [F.zeros((1,)), x0, empty, empty],
                                          max_iterations=3)
        return outs, x


@program(*STEPS)
class ScheduledSamplingWithRandomDraws(HybridBlock):
    """Scheduled sampling: each step draws uniform(0, 1) and feeds back the prediction or
    the gold input. Random draws: the gold/pred choice is made with probability 0 or 1 so
    the values do not depend on the draw order, only on the draws' shapes working."""
    def __init__(self):
        super().__init__()
        self.cell = rnn.GRUCell(4, input_size=4)
        self.out = nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, x0, xs):
        def step(gold, states):
            prev, h = states
            u = F.random.uniform(shape=(1,))
            use_gold = F.broadcast_like((u < 2.0).reshape((1, 1)), gold)    # always gold
            inp = F.where(use_gold, gold, prev)
            out, (h,) = self.cell(inp, [h])
            pred = F.softmax(self.out(out))
            return [pred, u * 0], [pred, h]
        (preds, us), _ = C.foreach(step, xs, [x0, F.zeros_like(x0)])
        return preds, us


@program(*STEPS)
class ScheduledSamplingRandomChoiceValuesOnly(ScheduledSamplingWithRandomDraws):
    """A real draw: the choice depends on the draw (the oracle's random stream differs), so
    only quantities invariant to the choice are returned (sums of softmax rows: 1)."""
    def hybrid_forward(self, F, x0, xs):
        def step(gold, states):
            prev, h = states
            u = F.random.uniform(shape=(1,))
            use_gold = F.broadcast_like((u < 0.5).reshape((1, 1)), gold)
            out, (h,) = self.cell(F.where(use_gold, gold, prev), [h])
            pred = F.softmax(self.out(out))
            return F.sum(pred, axis=-1), [pred, h]
        sums, _ = C.foreach(step, xs, [x0, F.zeros_like(x0)])
        return sums


class _SharedEncoder(HybridBlock):
    def __init__(self):
        super().__init__()
        self.d = nn.Dense(4, in_units=4)

    def hybrid_forward(self, F, x):
        return F.tanh(self.d(x))


class _UsesEncoder(HybridBlock):
    def __init__(self, enc, steps):
        super().__init__()
        self.enc = enc
        self.steps = steps

    def hybrid_forward(self, F, x):
        def body(i, h):
            return [], [i + 1, self.enc(h) + x]
        _, (_, h) = C.while_loop(lambda i, h: i < self.steps, body, [F.zeros((1,)), x],
                                 max_iterations=self.steps)
        return h


@program(*[[a[0]] for a in STEPS])
class SharedBlockInTwoParentsAndTopLevel(HybridBlock):
    """One encoder block reused by two loop-running children (hybridized separately by the
    user) and directly by the parent."""
    def __init__(self):
        super().__init__()
        self.enc = _SharedEncoder()
        self.a = _UsesEncoder(self.enc, 2)
        self.b = _UsesEncoder(self.enc, 3)
        self.a.hybridize()

    def hybrid_forward(self, F, x):
        def step(r, s):
            return self.enc(r) + s[0], [s[0] + self.b(r)]
        outs, last = C.foreach(step, x.expand_dims(1), [F.zeros_like(x.expand_dims(1)[0])])
        return self.a(x) + self.enc(x), outs, last[0]
