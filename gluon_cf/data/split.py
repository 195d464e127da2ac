"""Splitting a mini-batch between data-parallel workers: by count, or balanced by work.

In synchronous data-parallel training every step waits for the slowest worker, and the time a
worker spends on a shard of trees grows with the shard's number of nodes (one cell call per
node), on sequences with their total length. Splitting a mini-batch by tree count gives the
worker with the big trees most of the work. `balanced_shards` gives every worker about the
same total size instead.

The result of a step must not depend on the split: each worker's loss is the sum over its shard
divided by the size of the WHOLE mini-batch (`shard_loss_scale`), and the kvstore sums the
workers' gradients, so the update is the mean gradient of the mini-batch however it was cut.

    shards = balanced_shards([t.num_nodes for t in batch], kv.num_workers)
    mine = [batch[i] for i in shards[kv.rank]]
    loss = loss_fn(net(*inputs_of(mine)), labels).sum() * shard_loss_scale(len(batch))
    loss.backward(); trainer.step(1)
"""
import heapq
from typing import List, Sequence

import numpy as np

__all__ = ["count_shards", "balanced_shards", "shard_loss_scale", "shard_sizes"]


def _check(num_items: int, num_shards: int, caller: str) -> None:
    if num_shards < 1:
        raise ValueError("%s: num_shards must be >= 1, got %d" % (caller, num_shards))
    if num_items < num_shards:
        raise ValueError(
            "%s: %d items cannot give each of %d shards at least one (every worker of a "
            "synchronous step must take part); use mini-batches of at least %d items"
            % (caller, num_items, num_shards, num_shards))


def count_shards(num_items: int, num_shards: int) -> List[List[int]]:
    """Indices of ``num_items`` items cut into ``num_shards`` contiguous runs whose counts differ
    by at most one (what ``gluon.utils.split_data`` does with ``even_split=False``).

    >>> count_shards(5, 2)
    [[0, 1], [2, 3, 4]]
    """
    _check(num_items, num_shards, "count_shards")
    bounds = np.linspace(0, num_items, num_shards + 1).round().astype(int)
    return [list(range(bounds[k], bounds[k + 1])) for k in range(num_shards)]


def balanced_shards(sizes: Sequence[int], num_shards: int) -> List[List[int]]:
    """Indices of the items cut into ``num_shards`` shards of about equal total ``sizes``
    (tree nodes, sequence lengths), each in increasing order, none empty. The split depends on
    the sizes alone, so every worker computes the same one.

    Items go from the largest down, each to the shard with the smallest total so far (the
    longest-processing-time rule: the largest shard is at most 4/3 of the best possible, and
    close to the mean when items are small against the shards).

    >>> balanced_shards([9, 1, 1, 1, 8], 2)
    [[0, 2], [1, 3, 4]]
    """
    # NOTE [balanced shards]: ties go to the lower shard, and items of equal size are taken
    # lower index first, so that every worker, computing the split alone from the same sizes,
    # gets the same shards without a message. Sizes are the work of a shard when its time
    # grows with its nodes (the unbatched executor, eager models: one cell call per node).
    # The batching executor runs a shard level by level, and its time changed little with
    # the nodes in gluon_cf.bench.split_balance; weighing each shard's levels too (its
    # tallest tree's height times a fitted cost per level) was tried there and measured no
    # better than nodes alone, within the noise of the measurement (README).
    sizes = [int(s) for s in sizes]
    _check(len(sizes), num_shards, "balanced_shards")
    if any(s < 0 for s in sizes):
        raise ValueError("balanced_shards: sizes must be >= 0, got %r" % min(sizes))
    # Among shards of equal total the one with fewer items comes first, so items of size 0
    # still reach every shard (each worker must have a part in a synchronous step).
    heap = [(0, 0, k) for k in range(num_shards)]
    shards: List[List[int]] = [[] for _ in range(num_shards)]
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        total, count, k = heapq.heappop(heap)
        shards[k].append(i)
        heapq.heappush(heap, (total + sizes[i], count + 1, k))
    return [sorted(shard) for shard in shards]


def shard_sizes(sizes: Sequence[int], shards: Sequence[Sequence[int]]) -> List[int]:
    """The total size of each shard.

    >>> shard_sizes([9, 1, 1, 1, 8], [[0, 2], [1, 3, 4]])
    [10, 10]
    """
    return [int(sum(sizes[i] for i in shard)) for shard in shards]


def shard_loss_scale(batch_size: int) -> float:
    """What a worker multiplies its shard's summed loss by: one over the WHOLE mini-batch's
    size, so that the kvstore's sum of the workers' gradients is the mini-batch's mean gradient,
    whatever the split (use ``trainer.step(1)``).

    >>> shard_loss_scale(4)
    0.25
    """
    if batch_size < 1:
        raise ValueError("shard_loss_scale: batch_size must be >= 1, got %d" % batch_size)
    return 1.0 / batch_size
