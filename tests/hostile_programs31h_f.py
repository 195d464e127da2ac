"""Round 31h (issue 24): Trainer loops (several steps of SGD/Adam, ``clip_global_norm``) over
blocks sharing parameters (``params=``, one child reused by two parents), written against
``C``: :func:`train` gives the losses and the final parameters, to compare gluon_cf (eager,
hybridized) with MXNet's F.contrib ops eagerly."""
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import HybridBlock, nn, rnn

import hostile_harness
from hostile_harness31h import C, backend

rand = hostile_harness.rand
TRAINERS = {}


def trainer_program(optimizer, clip=None, steps=3):
    def register(make):
        TRAINERS[make.__name__] = (make, optimizer, clip, steps)
        return make
    return register


def train(name, ops, hybridize, batches):
    """Losses of each step and the final parameters of program ``name`` trained on
    ``batches`` (a list of input lists) with ``ops`` as ``C``."""
    make, optimizer, clip, steps = TRAINERS[name]
    with backend(ops):
        mx.random.seed(0)
        np.random.seed(0)
        net = make()
        net.initialize(mx.init.Xavier())
        if hybridize:
            net.hybridize()
        trainer = gluon.Trainer(net.collect_params(), optimizer[0], optimizer[1])
        losses = []
        for step in range(steps):
            arrays = [mx.nd.array(a) for a in batches[step % len(batches)]]
            with autograd.record():
                loss = net(*arrays)
            loss.backward()
            if clip is not None:
                grads = [p.grad() for p in net.collect_params().values()
                         if p.grad_req != "null"]
                gluon.utils.clip_global_norm(grads, clip)
            trainer.step(1, ignore_stale_grad=True)
            losses.append(loss.asnumpy())
        return losses + [p.data().asnumpy() for p in net.collect_params().values()]


class _Encoder(HybridBlock):
    def __init__(self, embed=None):
        super().__init__()
        self.embed = embed or nn.Embedding(7, 4)
        self.cell = rnn.GRUCell(4, input_size=4)

    def hybrid_forward(self, F, tokens):
        def step(tok, s):
            o, s = self.cell(self.embed(tok), s)
            return o, s
        outs, last = C.foreach(step, F.transpose(tokens), [F.zeros((2, 4))])
        return outs, last[0]


class _Decoder(HybridBlock):
    def __init__(self, embed):
        super().__init__()
        self.embed = embed
        self.cell = rnn.GRUCell(4, input_size=8)
        self.out = nn.Dense(7, in_units=4)

    def hybrid_forward(self, F, tokens, h, memory):
        ctx = F.mean(memory, axis=0)

        def step(tok, s):
            o, s = self.cell(F.concat(self.embed(tok), ctx, dim=-1), s)
            return F.log_softmax(self.out(o)), s
        logp, _ = C.foreach(step, F.transpose(tokens), [h])
        return logp


class SharedEmbeddingSeq2Seq(HybridBlock):
    """Encoder and decoder share one Embedding block; teacher-forced NLL."""
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(7, 4)
        self.enc = _Encoder(self.embed)
        self.dec = _Decoder(self.embed)

    def hybrid_forward(self, F, src, tgt):
        memory, h = self.enc(src)
        logp = self.dec(tgt, h, memory)
        return -F.mean(F.pick(logp, F.transpose(tgt), axis=-1))


trainer_program(("sgd", {"learning_rate": 0.5}), clip=1.0)(
    lambda: SharedEmbeddingSeq2Seq())
TRAINERS["SharedEmbeddingSeq2SeqSGDClip"] = TRAINERS.pop("<lambda>")


class _Looper(HybridBlock):
    def __init__(self, cell, steps):
        super().__init__()
        self.cell = cell
        self.steps = steps

    def hybrid_forward(self, F, x):
        def body(i, h):
            o, (h,) = self.cell(x, [h])
            return o, [i + 1, h]
        outs, (_, h) = C.while_loop(lambda i, h: i < self.steps, body,
                                    [F.zeros((1,)), F.zeros_like(x)], max_iterations=self.steps)
        return F.sum(outs, axis=0) + h


class TwoParentsOneCell(HybridBlock):
    """One RNN cell instance in two loop blocks of different lengths, and a Dense shared
    through ``params=``."""
    def __init__(self):
        super().__init__()
        self.cell = rnn.RNNCell(3, input_size=3)
        self.a = _Looper(self.cell, 2)
        self.b = _Looper(self.cell, 4)
        self.head = nn.Dense(1, in_units=3)
        self.head2 = nn.Dense(1, in_units=3, params=self.head.collect_params())

    def hybrid_forward(self, F, x, y):
        pa = self.head(self.a(x))
        pb = self.head2(self.b(x))
        return F.mean(F.square(pa - y) + F.square(pb - y))


def _tree_loss():
    class TreeRegressor(HybridBlock):
        """A recursive binary-tree encoder whose leaves and root share one Dense."""
        def __init__(self):
            super().__init__()
            self.shared = nn.Dense(3, in_units=3)
            self.comb = nn.Dense(3, in_units=6)

        def hybrid_forward(self, F, x, left, right, y):
            @C.recursive
            def node(i):
                li = F.take(left, i)
                return C.cond(li < 0, lambda: F.tanh(self.shared(F.take(x, i))),
                              lambda: F.tanh(self.comb(F.concat(node(li),
                                                                node(F.take(right, i)),
                                                                dim=-1))))
            root = self.shared(node(F.zeros((1,))))
            return F.mean(F.square(root - y))
    return TreeRegressor()


class ClipInsideLoopRegressor(HybridBlock):
    """States clipped inside the loop, gradients clipped by global norm outside (Adam)."""
    def __init__(self):
        super().__init__()
        self.d = nn.Dense(3, in_units=6)

    def hybrid_forward(self, F, x, y):
        def step(r, s):
            h = F.clip(self.d(F.concat(r, s[0], dim=-1)), -0.5, 0.5)
            return h, [h]
        outs, last = C.foreach(step, x, [F.zeros((2, 3))])
        return F.mean(F.square(F.sum(outs, axis=0) - y))


trainer_program(("sgd", {"learning_rate": 0.3}))(TwoParentsOneCell)
trainer_program(("adam", {"learning_rate": 0.05}), clip=0.5, steps=4)(ClipInsideLoopRegressor)
trainer_program(("sgd", {"learning_rate": 0.2}), steps=3)(_tree_loss)
TRAINERS["TreeRegressorSharedLeafSGD"] = TRAINERS.pop("_tree_loss")

BATCHES = {
    "SharedEmbeddingSeq2SeqSGDClip": [[np.array([[1, 2, 3], [4, 5, 6]], np.float32),
                                       np.array([[2, 3], [6, 1]], np.float32)],
                                      [np.array([[0, 0, 1], [3, 3, 3]], np.float32),
                                       np.array([[1, 1], [0, 2]], np.float32)]],
    "TwoParentsOneCell": [[rand(2, 3), rand(2, 1, seed=1)], [rand(2, 3, seed=2),
                                                             rand(2, 1, seed=3)]],
    "ClipInsideLoopRegressor": [[rand(4, 2, 3), rand(2, 3, seed=1)],
                                [rand(4, 2, 3, seed=2), rand(2, 3, seed=3)]],
    "TreeRegressorSharedLeafSGD": [[rand(5, 3), np.array([1, 3, -1, -1, -1], np.float32),
                                         np.array([2, 4, -1, -1, -1], np.float32),
                                         rand(1, 3, seed=1)],
                                        [rand(5, 3, seed=2),
                                         np.array([-1, -1, -1, -1, -1], np.float32),
                                         np.array([-1, -1, -1, -1, -1], np.float32),
                                         rand(1, 3, seed=3)]],
}
