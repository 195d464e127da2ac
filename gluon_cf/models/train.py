"""Training a recursive TreeLSTM on the embedded SST-like synthetic treebank (used by the demo).

The labels of the synthetic treebank come from a hidden compositional rule (polarity words,
negators, intensifiers; see ``gluon_cf.data.trees.synthetic_treebank``), so a model has to use
the tree structure to do well. Root labels are SST's 5 classes.

Training keeps the parameters of the epoch with the best dev accuracy (written to ``save_path``
whenever dev improves) and stops once dev has not improved for ``patience`` epochs; test
accuracy is measured once, on those best parameters.

With a distributed kvstore (``kvstore="dist_sync"``, under ``python -m gluon_cf.launch``) each
worker trains on its shard of every mini-batch (``gluon_cf.models.distributed``), takes the
same early-stopping decisions as the others, and rank 0 alone reports and saves.
"""
import os
import sys
import time
from dataclasses import dataclass, field
from typing import List, Optional

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from tqdm import tqdm

from ..data.trees import batchify_forest, build_vocab, encode_tree, synthetic_treebank
from ..data.split import shard_loss_scale
from ..uploads import to_nd  # NOTE: [Uploads]
from .distributed import workers_of
from .recursive import TreeLSTM


@dataclass
class EpochResult:
    """One epoch of :func:`train_demo`."""
    epoch: int
    loss: float
    train_accuracy: float
    dev_accuracy: float
    trees_per_second: float


@dataclass
class TrainResult:
    """What :func:`train_demo` returns: the best epoch's model and every epoch's numbers."""
    net: gluon.HybridBlock
    best_epoch: int
    dev_accuracy: float
    test_accuracy: float
    trees_per_second: float          # training throughput over all epochs run
    save_path: Optional[str]
    history: List[EpochResult] = field(default_factory=list)


def _tree_batches(encoded, batch_size, rng=None, min_size=1):
    """Mini-batches (lists of encoded trees); a last one under ``min_size`` trees (fewer than
    the workers sharing it) joins the one before."""
    order = np.arange(len(encoded))
    if rng is not None:
        rng.shuffle(order)
    starts = list(range(0, len(order), batch_size))
    if len(starts) > 1 and len(order) - starts[-1] < min_size:
        starts.pop()
    for start, end in zip(starts, starts[1:] + [len(order)]):
        yield [encoded[i] for i in order[start:end]]


def _arrays(trees):
    forest = batchify_forest(trees)
    # float32, as nd.array gave them (the forest's index arrays are read as float indices)
    return ([to_nd(forest.tokens), to_nd(forest.left), to_nd(forest.right),
             to_nd(forest.roots)], to_nd(forest.root_labels))


def _batches(encoded, batch_size, rng=None):
    for trees in _tree_batches(encoded, batch_size, rng):
        yield _arrays(trees)


def accuracy(net, encoded, batch_size=25):
    correct = 0
    for inputs, labels in _batches(encoded, batch_size):
        correct += int((net(*inputs).argmax(axis=1) == labels).sum().asscalar())
    return correct / len(encoded)


def demo_splits(num_trees, seed=0):
    """``(trees, vocab, train, dev, test)`` of :func:`train_demo`: ``num_trees`` synthetic
    trees for training and a quarter as many each for dev and test, encoded with a vocabulary
    of the training trees' words."""
    held_out = max(1, num_trees // 4)
    trees = synthetic_treebank(num_trees + 2 * held_out, shape="sst", seed=seed)
    vocab = build_vocab(trees[:num_trees])
    encoded = [encode_tree(t, vocab) for t in trees]
    return (trees, vocab, encoded[:num_trees], encoded[num_trees:num_trees + held_out],
            encoded[num_trees + held_out:])


def _silent(line, interactive):
    pass


def _say(line, interactive):
    """A line of the report; above a live progress bar on a terminal, flushed otherwise (a
    file or pipe would hold it in its buffer until the process ends)."""
    if interactive:
        tqdm.write(line)
    else:
        print(line, flush=True)


def train_demo(epochs=20, num_trees=2000, batch_size=25, hidden_size=48, embed_size=48,
               learning_rate=0.05, seed=0, patience=3, save_path="treelstm-best.params",
               progress=None, kvstore=None, balance="nodes", on_batch=None):
    """Train a hybridized TreeLSTM with early stopping; returns a :class:`TrainResult`.

    ``num_trees`` train trees, and a quarter as many each for dev and test. At most ``epochs``
    epochs; training stops after ``patience`` epochs without a better dev accuracy. The best
    epoch's parameters are kept (saved to ``save_path`` unless it is None) and scored on test.
    ``progress``: show per-batch progress bars (default: when stdout is a terminal); without
    them there is one flushed line per epoch.

    ``kvstore``: the Trainer's kvstore (a name or an ``mx.kv.KVStore``; default ``"device"``).
    A distributed one trains this worker's shard of every mini-batch, split by tree nodes
    (``balance="nodes"``) or by count (``"count"``); only rank 0 prints and saves.
    ``on_batch``: called after every step (e.g. ``gluon_cf.launch.heartbeat``).
    """
    if epochs < 1 or patience < 1:
        raise ValueError(f"train_demo: epochs and patience must be >= 1, got {epochs}, "
                         f"{patience}")
    workers = workers_of(kvstore, balance)
    interactive = sys.stdout.isatty() if progress is None else progress
    report = _say if workers.rank == 0 else _silent      # rank 0 reports for the job
    mx.random.seed(seed)
    rng = np.random.RandomState(seed)
    trees, vocab, train, dev, test = demo_splits(num_trees, seed)
    net = TreeLSTM(len(vocab), embed_size=embed_size, hidden_size=hidden_size, num_classes=5)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "adagrad", {"learning_rate": learning_rate},
                            kvstore=workers.kvstore if workers.distributed else
                            (kvstore or "device"))
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    report("\n== recursive TreeLSTM (hybridized) on synthetic SST-like trees: %d train, %d dev, "
           "%d test ==" % (len(train), len(dev), len(test)), interactive)
    report("vocabulary %d words, mean sentence length %.1f tokens; up to %d epochs, early "
           "stopping after %d without a better dev accuracy"
           % (len(vocab), np.mean([len(t.leaves()) for t in trees]), epochs, patience),
           interactive)
    report("epoch 0: dev accuracy %.3f (chance 0.2)" % accuracy(net, dev, batch_size),
           interactive)

    history, best, best_params = [], None, None
    trained, train_seconds = 0, 0.0
    for epoch in range(1, epochs + 1):
        total, seen, start = 0.0, 0, time.perf_counter()
        bar = tqdm(list(_tree_batches(train, batch_size, rng, workers.num_workers)),
                   desc="epoch %d" % epoch, unit="batch", leave=False,
                   disable=not interactive, file=sys.stdout)
        for batch in bar:
            inputs, labels = _arrays(workers.shard(batch))
            with autograd.record():
                loss = loss_fn(net(*inputs), labels)
                if workers.distributed:
                    # the mean over the WHOLE mini-batch, however it was split
                    scaled = loss.sum() * shard_loss_scale(len(batch))
            if workers.distributed:
                scaled.backward()
                trainer.step(1)
            else:
                loss.backward()
                trainer.step(labels.shape[0])
            total += float(loss.sum().asscalar())
            seen += labels.shape[0]
            bar.set_postfix(loss="%.3f" % (total / seen))
            if on_batch is not None:
                on_batch()
        workers.synchronize(trainer)   # NOTE [same decision on every worker]
        seconds = time.perf_counter() - start
        trained, train_seconds = trained + len(train), train_seconds + seconds
        result = EpochResult(epoch, total / seen, accuracy(net, train, batch_size),
                             accuracy(net, dev, batch_size), len(train) / seconds)
        history.append(result)
        improved = best is None or result.dev_accuracy > best.dev_accuracy
        if improved:
            best = result
            best_params = {name: p.data().copy() for name, p in net.collect_params().items()}
        report("epoch %d: loss %.3f  train accuracy %.3f  dev accuracy %.3f  (%.0f trees/s)%s"
               % (epoch, result.loss, result.train_accuracy, result.dev_accuracy,
                  result.trees_per_second, "  best so far" if improved else ""), interactive)
        assert best is not None
        if epoch - best.epoch >= patience:
            report("no better dev accuracy for %d epochs: stopping" % patience, interactive)
            break

    assert best is not None and best_params is not None     # epochs >= 1
    for name, param in net.collect_params().items():
        for data in param.list_data():  # in place: a distributed Trainer cannot be reset
            data[:] = best_params[name]
    if save_path is not None:
        save_path = os.path.abspath(save_path)
        if workers.rank == 0:       # one file for the job (every worker holds the same)
            net.save_parameters(save_path)
    start = time.perf_counter()
    test_accuracy = accuracy(net, test, batch_size)
    test_speed = len(test) / (time.perf_counter() - start)
    speed = trained / train_seconds
    if workers.distributed:
        # from every worker, which must agree: NOTE [same decision on every worker]
        print("rank %d of %d: best epoch %d of %d" % (workers.rank, workers.num_workers,
                                                      best.epoch, len(history)), flush=True)
    report("best epoch %d of %d: dev accuracy %.3f, test accuracy %.3f"
           % (best.epoch, len(history), best.dev_accuracy, test_accuracy), interactive)
    report("speed: %.0f trees/s training, %.0f trees/s inference (batch %d)"
           % (speed, test_speed, batch_size), interactive)
    report("model saved to %s (TreeLSTM(%d, embed_size=%d, hidden_size=%d, num_classes=5)"
           ".load_parameters)" % (save_path, len(vocab), embed_size, hidden_size)
           if save_path else "model not saved", interactive)
    return TrainResult(net, best.epoch, best.dev_accuracy, test_accuracy, speed, save_path,
                       history)
