"""Training a recursive TreeLSTM on the embedded SST-like synthetic treebank (used by the demo).

The labels of the synthetic treebank come from a hidden compositional rule (polarity words,
negators, intensifiers; see ``gluon_cf.data.trees.synthetic_treebank``), so a model has to use
the tree structure to do well. Root labels are SST's 5 classes.
"""
import time

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon, nd
from tqdm import tqdm

from ..data.trees import batchify_forest, build_vocab, encode_tree, synthetic_treebank
from .recursive import TreeLSTM


def _batches(encoded, batch_size, rng=None):
    order = np.arange(len(encoded))
    if rng is not None:
        rng.shuffle(order)
    for start in range(0, len(order), batch_size):
        forest = batchify_forest([encoded[i] for i in order[start:start + batch_size]])
        yield ([nd.array(forest.tokens), nd.array(forest.left), nd.array(forest.right),
                nd.array(forest.roots)], nd.array(forest.root_labels))


def accuracy(net, encoded, batch_size=25):
    correct = 0
    for inputs, labels in _batches(encoded, batch_size):
        correct += int((net(*inputs).argmax(axis=1) == labels).sum().asscalar())
    return correct / len(encoded)


def train_demo(epochs=6, num_trees=2000, batch_size=25, hidden_size=48, embed_size=48,
               learning_rate=0.05, seed=0):
    """Train a hybridized TreeLSTM; print per-epoch loss and train/dev accuracy."""
    mx.random.seed(seed)
    rng = np.random.RandomState(seed)
    trees = synthetic_treebank(num_trees + num_trees // 4, shape="sst", seed=seed)
    vocab = build_vocab(trees)
    encoded = [encode_tree(t, vocab) for t in trees]
    train, dev = encoded[:num_trees], encoded[num_trees:]
    net = TreeLSTM(len(vocab), embed_size=embed_size, hidden_size=hidden_size, num_classes=5)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "adagrad", {"learning_rate": learning_rate})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    print("\n== recursive TreeLSTM (hybridized) on %d synthetic SST-like trees, %d for dev =="
          % (len(train), len(dev)))
    print("vocabulary %d words, mean sentence length %.1f tokens"
          % (len(vocab), np.mean([len(t.leaves()) for t in trees])))
    print("epoch 0: dev accuracy %.3f (chance 0.2)" % accuracy(net, dev, batch_size))
    for epoch in range(1, epochs + 1):
        total, start = 0.0, time.time()
        bar = tqdm(list(_batches(train, batch_size, rng)), desc="epoch %d" % epoch,
                   unit="batch", leave=False, disable=None)
        for inputs, labels in bar:
            with autograd.record():
                loss = loss_fn(net(*inputs), labels)
            loss.backward()
            trainer.step(labels.shape[0])
            total += float(loss.sum().asscalar())
            bar.set_postfix(loss="%.3f" % (total / ((bar.n + 1) * batch_size)))
        print("epoch %d: loss %.3f  train accuracy %.3f  dev accuracy %.3f  (%.1f trees/s)"
              % (epoch, total / len(train), accuracy(net, train, batch_size),
                 accuracy(net, dev, batch_size), len(train) / (time.time() - start)))
    return net
