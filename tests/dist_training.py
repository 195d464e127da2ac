"""A few data-parallel SGD steps of gluon_cf models, run by tests/test_launch.py.

As a worker of ``python -m gluon_cf.launch``::

    python tests/dist_training.py --kvstore dist_sync --out DIR [--models a,b] [--die-at STEP]

each worker trains every model on its shard of the same mini-batches and writes the final
parameters to ``DIR/<model>-rank<r>.npz``. In one process, ``train(name, None)`` trains the
same model on the whole mini-batches: the oracle the workers' parameters must equal.
"""
import argparse
import os
import subprocess
import sys

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_cf
from gluon_cf.data import batchify_forest, build_vocab, encode_tree, synthetic_treebank
from gluon_cf.data.split import balanced_shards, count_shards, shard_loss_scale
from gluon_cf.models import TreeLSTM

STEPS, BATCH = 3, 4


class Decoder(gluon.HybridBlock):
    """A greedy decoder written as plain Python, converted by @gluon_cf.autograph: a `while` on
    a tensor (a while_loop) feeding each step's argmax token back in."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.init = gluon.nn.Dense(4, in_units=3, flatten=False)
            self.embed = gluon.nn.Embedding(6, 4)
            self.fc = gluon.nn.Dense(6, in_units=4, flatten=False)

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        h = F.tanh(self.init(x))
        total = F.zeros_like(h)
        steps = F.zeros((1,))
        while steps < 3:
            gluon_cf.max_iterations(4)
            token = F.argmax(self.fc(h), axis=-1)
            h = F.tanh(self.embed(token) + h)
            total = total + h
            steps = steps + 1
        return self.fc(total)


class ForeachLSTM(gluon.HybridBlock):
    """An LSTM over (T, B, 4) sequences with gluon_cf.foreach, classifying the last state."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(5, input_size=4)
            self.out = gluon.nn.Dense(3, in_units=5)

    def hybrid_forward(self, F, seq):
        h0 = F.zeros_like(F.slice_axis(F.sum(seq, axis=0), axis=1, begin=0, end=1))
        h0 = F.broadcast_axis(h0, axis=1, size=5)
        _, (h, _) = gluon_cf.foreach(lambda x, s: self.cell(x, s), seq, [h0, h0])
        return self.out(h)


class Masked(gluon.HybridBlock):
    """Dynamic shapes: the rows a mask keeps (a run-time count) go on through a Dense; the
    hybridized block runs partitioned around ``boolean_mask``."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense = gluon.nn.Dense(4, in_units=3, flatten=False)
            self.after = gluon.nn.Dense(3, in_units=4, flatten=False)

    def hybrid_forward(self, F, x, keep):
        return self.after(F.contrib.boolean_mask(F.tanh(self.dense(x)), keep))


def _tree_data():
    trees = synthetic_treebank(STEPS * BATCH, shape="sst", seed=5)
    vocab = build_vocab(trees)
    encoded = [encode_tree(t, vocab) for t in trees]
    labels = [int(t.label) for t in trees]
    return len(vocab), encoded, labels


def _tree_inputs(encoded, labels, rows):
    forest = batchify_forest([encoded[i] for i in rows])
    inputs = [mx.nd.array(a) for a in (forest.tokens, forest.left, forest.right, forest.roots)]
    return inputs, mx.nd.array([labels[i] for i in rows])


def _model(name):
    """(net, inputs_of(rows) -> (inputs, labels), sizes for balancing or None)."""
    rng = np.random.RandomState(7)
    if name in ("treelstm", "treelstm_unbatched"):
        vocab_size, encoded, labels = _tree_data()
        net = TreeLSTM(vocab_size, embed_size=6, hidden_size=6, num_classes=5)
        return net, lambda rows: _tree_inputs(encoded, labels, rows), \
            [t.num_nodes for t in encoded]
    if name == "decoder":
        x = rng.uniform(-1, 1, (STEPS * BATCH, 3)).astype(np.float32)
        y = rng.randint(0, 6, STEPS * BATCH)
        return Decoder(), lambda rows: ([mx.nd.array(x[rows])], mx.nd.array(y[rows])), None
    if name == "lstm":
        seq = rng.uniform(-1, 1, (6, STEPS * BATCH, 4)).astype(np.float32)
        y = rng.randint(0, 3, STEPS * BATCH)
        return ForeachLSTM(), lambda rows: ([mx.nd.array(seq[:, rows])], mx.nd.array(y[rows])), \
            None
    if name == "masked":        # even rows kept: every shard of a count split keeps one
        x = rng.uniform(-1, 1, (STEPS * BATCH, 3)).astype(np.float32)
        keep = (np.arange(STEPS * BATCH) % 2 == 0).astype(np.float32)
        y = rng.randint(0, 3, STEPS * BATCH)
        return Masked(), lambda rows: ([mx.nd.array(x[rows]), mx.nd.array(keep[rows])],
                                       mx.nd.array(y[rows][keep[rows] > 0])), None
    raise ValueError(name)


def _shard(batch, sizes, rank, num_workers):
    if sizes is None:
        shards = count_shards(len(batch), num_workers)
    else:
        shards = balanced_shards([sizes[i] for i in batch], num_workers)
    return [batch[i] for i in shards[rank]]


def _executor(name):
    return "unbatched" if name.endswith("unbatched") else "batched"


def train(names, kvstore, rank=0, num_workers=1, die_at=None, steps=STEPS, fail_at=None,
          fail_at_how="exit"):
    """``{name: parameters (a list of arrays)}`` after ``steps`` SGD steps of the models ``names``.

    One Trainer holds the parameters of every model: a distributed kvstore serves one Trainer
    (its keys are the Trainer's parameter indices; a second Trainer would reuse them)."""
    models, params = {}, []
    for name in names:
        gluon_cf.set_executor(_executor(name))
        net, inputs_of, sizes = _model(name)
        net.initialize(mx.init.Xavier())
        net.hybridize()
        net(*inputs_of(list(range(BATCH)))[0])          # finish deferred shapes
        rng = np.random.RandomState(11)
        for param in net.collect_params().values():      # the same start in every process
            param.set_data(mx.nd.array(rng.uniform(-0.4, 0.4, param.shape)))
        models[name] = (net, inputs_of, sizes)
        params += list(net.collect_params().values())
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": 0.5}, kvstore=kvstore)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for step in range(steps):
        if die_at is not None and step == die_at and os.environ.get("DMLC_TASK_ID") == "1":
            print("worker task 1 kills itself at step %d" % step, flush=True)
            os.kill(os.getpid(), 9)
        if fail_at is not None and step == fail_at and os.environ.get("DMLC_TASK_ID") == "1" \
                and fail_at_how != "pending":
            print("worker task 1 fails at step %d" % step, flush=True)
            if fail_at_how == "exit":
                sys.exit(3)
            if fail_at_how == "return":
                sys.exit(0)
            raise RuntimeError("worker task 1 raises at step %d" % step)
        batch = list(range(step * BATCH, (step + 1) * BATCH))
        for name, (net, inputs_of, sizes) in models.items():
            gluon_cf.set_executor(_executor(name))
            inputs, labels = inputs_of(_shard(batch, sizes, rank, num_workers))
            with autograd.record():
                loss = loss_fn(net(*inputs), labels).sum() * shard_loss_scale(len(batch))
            loss.backward()
        trainer.step(1)
        print("step %d" % step, flush=True)
        if fail_at_how == "pending" and step == fail_at \
                and os.environ.get("DMLC_TASK_ID") == "1":
            for net, _, _ in models.values():          # this step's push and pull are done
                [p.data().asnumpy() for p in net.collect_params().values()]
            trainer.step(1)      # a push no other worker matches: it never completes
            print("worker task 1 fails at step %d with a push pending" % step, flush=True)
            sys.exit(3)
    gluon_cf.set_executor("batched")
    return {name: [p.data().asnumpy() for p in net.collect_params().values()]
            for name, (net, _, _) in models.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kvstore", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--models", default="treelstm,treelstm_unbatched,decoder,lstm,masked")
    parser.add_argument("--die-at", type=int, help="worker task 1 kills itself (SIGKILL) here")
    parser.add_argument("--fail-at", type=int, help="worker task 1's script fails here")
    parser.add_argument("--fail-how", choices=["exit", "raise", "return", "pending"],
                        default="exit",
                        help="sys.exit(3), an uncaught RuntimeError, the script ends "
                             "(status 0) before the other workers, or sys.exit(3) after "
                             "step --fail-at with a push no other worker matches pending")
    parser.add_argument("--spawn-child", action="store_true",
                        help="leave a long sleep running as a child (the launcher must end it)")
    args = parser.parse_args()
    if args.spawn_child:
        subprocess.Popen(["sleep", "600"])
    kv = mx.kv.create(args.kvstore)
    print("rank %d of %d" % (kv.rank, kv.num_workers), flush=True)
    trained = train(args.models.split(","), kv, kv.rank, kv.num_workers, args.die_at,
                    fail_at=args.fail_at, fail_at_how=args.fail_how)
    for name, params in trained.items():
        np.savez(os.path.join(args.out, "%s-rank%d.npz" % (name, kv.rank)), *params)
    print("trained", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
