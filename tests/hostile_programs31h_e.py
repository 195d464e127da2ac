"""Round 31h (issue 24): generated families of ported seq2seq decoders (cell x attention x
loop) and n-ary tree encoders (arity x how children combine), on ``C``'s ops (MXNet's
F.contrib ops, with plain Python recursion, are the oracle; see ``hostile_harness31h``)."""
import numpy as np
from mxnet.gluon import HybridBlock, nn, rnn

import hostile_harness
from hostile_harness31h import C

PROGRAMS, program = hostile_harness.program_registry()
rand = hostile_harness.rand

SRC = ([rand(2, 5, 4), rand(2, 3, 4, seed=1)], [rand(1, 5, 4, seed=2), rand(1, 3, 4, seed=3)],
       [rand(3, 5, 4, seed=4), rand(3, 3, 4, seed=5)])
CELLS = {"Rnn": rnn.RNNCell, "Gru": rnn.GRUCell, "Lstm": rnn.LSTMCell}


def _attend(F, kind, block, query, keys):
    if kind == "None":
        return F.mean(keys, axis=1)
    if kind == "Additive":
        e = block.v(F.tanh(F.broadcast_add(block.wk(keys), block.uq(query).expand_dims(1))))
        scores = e.reshape((0, -1))
    else:
        scores = F.batch_dot(keys, query.expand_dims(2)).reshape((0, -1))
        if kind == "Scaled":
            scores = scores / 2.0
    w = F.softmax(scores, axis=-1)
    return F.batch_dot(w.expand_dims(1), keys).reshape((0, -1))


def _decoder(cell_name, attention, loop):
    class Decoder(HybridBlock):
        __doc__ = f"A {cell_name} decoder, {attention} attention, over {loop}."

        def __init__(self):
            super().__init__()
            self.cell = CELLS[cell_name](4, input_size=8)
            self.out = nn.Dense(4, in_units=8)
            self.wk = nn.Dense(4, flatten=False, in_units=4, use_bias=False)
            self.uq = nn.Dense(4, in_units=4)
            self.v = nn.Dense(1, flatten=False, in_units=4, use_bias=False)

        def _step(self, F, y, states, keys):
            ctx = _attend(F, attention, self, states[0], keys)
            out, new = self.cell(F.concat(y, ctx, dim=-1), states)
            return self.out(F.concat(out, ctx, dim=-1)), new

        def hybrid_forward(self, F, src, tgt):
            keys = F.tanh(src)
            h0 = F.zeros_like(F.sum(keys, axis=1))
            states = [h0, h0] if cell_name == "Lstm" else [h0]
            if loop == "Foreach":
                outs, last = C.foreach(lambda y, s: self._step(F, y, s, keys),
                                       F.swapaxes(tgt, 0, 1), states)
                return outs, last[0]
            y0 = F.squeeze(F.slice_axis(tgt, axis=1, begin=0, end=1), axis=1)

            def body(i, y, *s):
                logits, new = self._step(F, y, list(s), keys)
                return logits, [i + 1, F.softmax(logits)] + list(new)
            outs, final = C.while_loop(lambda i, *_: i < 3, body,
                                       [F.zeros((1,)), y0] + states, max_iterations=4)
            return outs, final[2]
    name = f"{cell_name}{attention}AttentionOver{loop}"
    Decoder.__name__ = Decoder.__qualname__ = name
    return program(*SRC)(Decoder)


DECODERS = [_decoder(c, a, lp) for c in CELLS for a in ("None", "Dot", "Scaled", "Additive")
            for lp in ("Foreach", "While")]


def ints(*values):
    return np.array(values, np.float32)


def _tree_inputs(arity):
    """Three trees of 6 nodes as padded child tables of ``arity`` slots (-1: none)."""
    shapes = [{0: [1, 2], 1: [3, 4, 5]}, {0: [1], 1: [2], 2: [3], 3: [4], 4: [5]}, {}]
    out = []
    for k, children in enumerate(shapes):
        table = -np.ones((6, arity), np.float32)
        for parent, kids in children.items():
            kids = kids[:arity]
            table[parent, :len(kids)] = kids
        out.append([rand(6, 3, seed=k), table.reshape(-1), ints(0)])
    return out


def _tree(arity, combine):
    class Tree(HybridBlock):
        __doc__ = f"An {arity}-ary tree encoder, children combined by {combine}."
        NO_GRAD = (1, 2)

        def __init__(self):
            super().__init__()
            self.leaf = nn.Dense(4, in_units=3)
            self.gate = nn.Dense(4, in_units=4 + 3)

        def hybrid_forward(self, F, x, children, root):
            table = children.reshape((-1, arity))

            @C.recursive
            def node(i):
                row = F.take(table, i).reshape((-1,))
                xi = F.take(x, i)

                def leaf():
                    return F.tanh(self.leaf(xi))

                def inner():
                    states = [C.cond(c >= 0, lambda c=c: node(c), lambda: F.zeros((1, 4)))
                              for c in [F.slice_axis(row, axis=0, begin=k, end=k + 1)
                                        for k in range(arity)]]
                    if combine == "Sum":
                        h = F.add_n(*states)
                    elif combine == "Max":
                        h = F.max(F.stack(*states, axis=0), axis=0)
                    else:
                        h = F.zeros((1, 4))
                        for s in states:
                            g = F.sigmoid(self.gate(F.concat(s, xi, dim=-1)))
                            h = h + g * s
                    return F.tanh(self.leaf(xi) + h)
                return C.cond(F.max(row) < 0, leaf, inner)
            return node(root)
    Tree.__name__ = Tree.__qualname__ = f"Tree{arity}Ary{combine}"
    return program(*_tree_inputs(arity))(Tree)


TREES = [_tree(a, c) for a in (1, 2, 3) for c in ("Sum", "Max", "Gated")]
globals().update({cls.__name__: cls for cls in DECODERS + TREES})
