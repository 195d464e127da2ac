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
from typing import Any, List, Optional, Sequence

import numpy as np

__all__ = ["count_shards", "balanced_shards", "shard_loss_scale", "shard_sizes", "tree_heights"]


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


def balanced_shards(sizes: Sequence[int], num_shards: int,
                    heights: Optional[Sequence[int]] = None,
                    level_cost: float = 0.0) -> List[List[int]]:
    """Indices of the items cut into ``num_shards`` shards of about equal total ``sizes``
    (tree nodes, sequence lengths), each in increasing order, none empty. The split depends on
    the sizes alone, so every worker computes the same one.

    Items go from the largest down, each to the shard with the smallest total so far (the
    longest-processing-time rule: the largest shard is at most 4/3 of the best possible, and
    close to the mean when items are small against the shards).

    With ``heights`` (each tree's height, `tree_heights`) and ``level_cost`` (what one level
    costs, in units of size), a shard costs its total size plus ``level_cost`` times its tallest
    tree's height, for executors that run a shard level by level: the ``num_shards`` tallest
    trees then go one to each shard first.

    >>> balanced_shards([9, 1, 1, 1, 8], 2)
    [[0, 2], [1, 3, 4]]
    """
    # NOTE [balanced shards]: ties go to the lower shard, and items of equal size are taken
    # lower index first, so that every worker, computing the split alone from the same sizes,
    # gets the same shards without a message. With a level cost, a shard's levels are set by
    # its tallest tree, and putting two of the tallest together would make one shard pay for
    # both; so the tallest trees seed the shards, and every later tree, no taller than any
    # shard's tallest, only adds its size: the rest is the same rule from shards that start
    # with their level cost.
    sizes = [int(s) for s in sizes]
    _check(len(sizes), num_shards, "balanced_shards")
    if any(s < 0 for s in sizes):
        raise ValueError("balanced_shards: sizes must be >= 0, got %r" % min(sizes))
    by_size = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    shards: List[List[int]] = [[] for _ in range(num_shards)]
    costs = [0.0] * num_shards
    if heights is not None and level_cost > 0:
        if len(heights) != len(sizes):
            raise ValueError("balanced_shards: %d heights for %d sizes"
                             % (len(heights), len(sizes)))
        tallest = sorted(range(len(sizes)), key=lambda i: (-heights[i], -sizes[i], i))
        for k, i in enumerate(tallest[:num_shards]):
            shards[k].append(i)
            costs[k] = sizes[i] + level_cost * heights[i]
        seeded = set(tallest[:num_shards])
        by_size = [i for i in by_size if i not in seeded]
    heap = [(cost, k) for k, cost in enumerate(costs)]
    heapq.heapify(heap)
    for i in by_size:
        cost, k = heapq.heappop(heap)
        shards[k].append(i)
        heapq.heappush(heap, (cost + sizes[i], k))
    return [sorted(shard) for shard in shards]


def tree_heights(trees: Sequence[Any]) -> List[int]:
    """The height of each encoded tree (its root's; a leaf alone is 0).

    >>> from gluon_cf.data import build_vocab, encode_tree, parse_tree
    >>> tree = parse_tree("(3 (2 It) (4 (2 's) (3 good)))")
    >>> tree_heights([encode_tree(tree, build_vocab([tree]))])
    [2]
    """
    return [int(t.heights()[-1]) if t.num_nodes else 0 for t in trees]


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
