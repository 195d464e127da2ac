"""How evenly do workers share a synchronous step: mini-batches split by tree count vs by nodes.

    python -m gluon_cf.bench.split_balance [--workers 2 4] [--batches 20] [--batch-size 25]

For SST-like mini-batches (``synthetic_treebank(shape="sst")``), each batch is cut into one
shard per worker by count (``count_shards``) and node-balanced (``balanced_shards``), and the
hybridized TreeLSTM's training step (forward and backward, batching executor) is timed on
every shard, one after the other in this process, best of ``--repeats``. A synchronous
data-parallel step lasts as long as its slowest shard, so the table gives, per split: the mean
spread between the slowest and the fastest worker (as a fraction of the step), the mean step
(the slowest shard), the node imbalance (largest shard's nodes over the mean), and the ratio of
steps count/balanced. Timing shards in one process leaves out the network and the servers,
which cost the same under both splits.
"""
import argparse
import time

from typing import Dict, List

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import gluon_cf

from gluon_cf.data.split import balanced_shards, count_shards, shard_sizes
from gluon_cf.data.trees import batchify_forest, build_vocab, encode_tree, synthetic_treebank
from gluon_cf.models import TreeLSTM

__all__ = ["measure", "main"]


def _step_seconds(net, loss_fn, trees, repeats):
    forest = batchify_forest(trees)
    inputs = [mx.nd.array(a) for a in (forest.tokens, forest.left, forest.right, forest.roots)]
    labels = mx.nd.array(forest.root_labels)
    best = float("inf")
    for attempt in range(repeats + 1):          # the first builds the graphs: not timed
        start = time.perf_counter()
        with autograd.record():
            loss = loss_fn(net(*inputs), labels).sum()
        loss.backward()
        mx.nd.waitall()
        if attempt:
            best = min(best, time.perf_counter() - start)
    return best


def measure(num_workers=2, num_batches=20, batch_size=25, hidden_size=48, repeats=3, seed=0,
            executor="batched"):
    """``{split: {"spread", "step", "node_imbalance"}}``: means over the batches for the splits
    "count" and "nodes", under the recursion ``executor`` (see the module's docstring). The two
    splits of a batch are timed one after the other."""
    gluon_cf.set_executor(executor)
    trees = synthetic_treebank(num_batches * batch_size, shape="sst", seed=seed)
    vocab = build_vocab(trees)
    encoded = [encode_tree(t, vocab) for t in trees]
    net = TreeLSTM(len(vocab), embed_size=hidden_size, hidden_size=hidden_size, num_classes=5)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    rows: Dict[str, Dict[str, List[float]]] = {
        name: {"spread": [], "step": [], "node_imbalance": []} for name in ("count", "nodes")}
    for b in range(num_batches):
        batch = encoded[b * batch_size:(b + 1) * batch_size]
        sizes = [t.num_nodes for t in batch]
        splits = {"count": count_shards(len(batch), num_workers),
                  "nodes": balanced_shards(sizes, num_workers)}
        for name, shards in splits.items():
            seconds = [_step_seconds(net, loss_fn, [batch[i] for i in shard], repeats)
                       for shard in shards]
            rows[name]["spread"].append((max(seconds) - min(seconds)) / max(seconds))
            rows[name]["step"].append(max(seconds))
            nodes = shard_sizes(sizes, shards)
            rows[name]["node_imbalance"].append(max(nodes) / float(np.mean(nodes)))
    return {name: {k: float(np.mean(v)) for k, v in row.items()} for name, row in rows.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--executors", nargs="+", default=["unbatched", "batched"],
                        choices=("unbatched", "batched"))
    args = parser.parse_args(argv)
    print("executor   workers  split   spread (slowest-fastest)/step  step ms  node imbalance")
    for executor in args.executors:
        for workers in args.workers:
            result = measure(workers, args.batches, args.batch_size, repeats=args.repeats,
                             executor=executor)
            for name in ("count", "nodes"):
                r = result[name]
                print("%-9s  %7d  %-6s  %29.1f%%  %7.2f  %14.3f"
                      % (executor, workers, name, 100 * r["spread"], 1000 * r["step"],
                         r["node_imbalance"]))
            print("%-9s  %7d  step count/nodes: %.2fx" % (
                executor, workers, result["count"]["step"] / result["nodes"]["step"]),
                flush=True)
    return 0


if __name__ == "__main__":
    main()
