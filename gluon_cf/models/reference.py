"""Eager reference implementations of the tree models: the oracles of tests and benchmarks.

One tree, batch of 1, plain NDArrays, one cell call per node; differentiable under
`mx.autograd.record()`. Each function's docstring gives its recursive definition; the code
computes exactly that (same ops on the same values, in the same order) without Python
recursion, so a 5,000-node linear tree does not hit the recursion limit:

* tree folds walk the node arrays in post-order (children before parents, which the
  `EncodedTree` format guarantees), keeping each node's state in a list;
* the top-down generator, whose tree is not known in advance, is written as the recursive
  definition with `yield` at each recursive call and run by `_run_recursion`.

`tree` is an `EncodedTree` (gluon_cf.data.trees) or anything with the same numpy fields:
`tokens`, `left`, `right` (binary models) or `tokens`, `child_ptr`, `child_idx` (child-sum).
"""
from typing import Any, Tuple

import mxnet as mx
import numpy as np

__all__ = [
    'treelstm_eager',
    'childsum_eager',
    'treernn_eager',
    'rntn_eager',
    'topdown_eager',
]


def _embed_node(embed, tree, node):
    """embed(token of `node`) as a (1, E) NDArray, on the context of the embedding."""
    ctx = embed.weight.list_ctx()[0]
    return embed(mx.nd.array(tree.tokens[node:node + 1], ctx=ctx, dtype='int32'))


def _fold_binary(tree, leaf, combine):
    """Post-order fold over a binary tree: `leaf(node)` or `combine(left_state, right_state)`.

    Equivalent to ``def f(n): return leaf(n) if left[n] < 0 else combine(f(left[n]), f(right[n]))``
    evaluated at the root (the last node).
    """
    left, right = np.asarray(tree.left), np.asarray(tree.right)
    states = [None] * len(left)
    for node in range(len(left)):
        l, r = int(left[node]), int(right[node])
        if l < 0:
            states[node] = leaf(node)
        else:
            _check_post_order(node, l, r)
            states[node] = combine(states[l], states[r])
    return states[-1]


def _check_post_order(node, *children):
    # Internal invariant of EncodedTree (see gluon_cf.data.trees), not a user error.
    if any(child >= node or child < 0 for child in children):
        raise AssertionError(f'tree arrays are not in post-order: node {node} has children '
                             f'{list(children)}')


def treelstm_eager(embed: mx.gluon.Block, cell: mx.gluon.Block,
                   tree: Any) -> Tuple[mx.nd.NDArray, mx.nd.NDArray]:
    """Root (h, c) of a BinaryTreeLSTMCell over one binary tree, each (1, H).

    Semantics::

        def node(n):
            if tree.left[n] < 0:
                return cell.leaf(embed(tree.tokens[n]))
            return cell.combine(*node(tree.left[n]), *node(tree.right[n]))
        return node(root)

    Example::

        >>> import mxnet as mx
        >>> from gluon_cf.data import build_vocab, encode_tree, parse_tree
        >>> from gluon_cf.models import BinaryTreeLSTMCell, treelstm_eager
        >>> tree = parse_tree("(3 (2 not) (1 (2 very) (1 bad)))")
        >>> encoded = encode_tree(tree, build_vocab([tree]))
        >>> embed, cell = mx.gluon.nn.Embedding(6, 4), BinaryTreeLSTMCell(8, 4)
        >>> embed.initialize()
        >>> cell.initialize()
        >>> h, c = treelstm_eager(embed, cell, encoded)
        >>> h.shape, c.shape
        ((1, 8), (1, 8))
    """
    return _fold_binary(tree,
                        lambda n: cell.leaf(_embed_node(embed, tree, n)),
                        lambda l, r: cell.combine(l[0], l[1], r[0], r[1]))


def treernn_eager(embed: mx.gluon.Block, cell: mx.gluon.Block, tree: Any) -> mx.nd.NDArray:
    """Root h of a TreeRNNCell over one binary tree, (1, H).

    Semantics::

        def node(n):
            if tree.left[n] < 0:
                return cell.leaf(embed(tree.tokens[n]))
            return cell.combine(node(tree.left[n]), node(tree.right[n]))
        return node(root)

    Example::

        >>> import mxnet as mx
        >>> from gluon_cf.data import build_vocab, encode_tree, parse_tree
        >>> from gluon_cf.models import TreeRNNCell, treernn_eager
        >>> tree = parse_tree("(3 (2 not) (1 (2 very) (1 bad)))")
        >>> encoded = encode_tree(tree, build_vocab([tree]))
        >>> embed, cell = mx.gluon.nn.Embedding(6, 4), TreeRNNCell(8, 4)
        >>> embed.initialize()
        >>> cell.initialize()
        >>> treernn_eager(embed, cell, encoded).shape
        (1, 8)
    """
    return _fold_binary(tree,
                        lambda n: cell.leaf(_embed_node(embed, tree, n)),
                        cell.combine)


def rntn_eager(embed: mx.gluon.Block, cell: mx.gluon.Block, tree: Any) -> mx.nd.NDArray:
    """Root h of an RNTNCell over one binary tree, (1, H). Same recursion as `treernn_eager`.

    Example::

        >>> import mxnet as mx
        >>> from gluon_cf.data import build_vocab, encode_tree, parse_tree
        >>> from gluon_cf.models import RNTNCell, rntn_eager
        >>> tree = parse_tree("(3 (2 not) (1 (2 very) (1 bad)))")
        >>> encoded = encode_tree(tree, build_vocab([tree]))
        >>> embed, cell = mx.gluon.nn.Embedding(6, 4), RNTNCell(8, 4)
        >>> embed.initialize()
        >>> cell.initialize()
        >>> rntn_eager(embed, cell, encoded).shape
        (1, 8)
    """
    return _fold_binary(tree,
                        lambda n: cell.leaf(_embed_node(embed, tree, n)),
                        cell.combine)


def childsum_eager(embed: mx.gluon.Block, cell: mx.gluon.Block,
                   tree: Any) -> Tuple[mx.nd.NDArray, mx.nd.NDArray]:
    """Root (h, c) of a ChildSumTreeLSTMCell over one n-ary tree, each (1, H).

    Every node, internal ones included, has an input x = embed(token). Children are read from
    the CSR arrays (`child_ptr`, `child_idx`). Semantics::

        def node(n):
            x = embed(tree.tokens[n])
            kids = [node(k) for k in children(n)]
            if not kids:
                return cell.combine(x, zeros, zeros)
            h_sum = sum(h for h, c in kids)                      # left to right
            fc_sum = sum(cell.forget(x, h, c) for h, c in kids)  # left to right
            return cell.combine(x, h_sum, fc_sum)
        return node(root)

    Example::

        >>> import mxnet as mx
        >>> from gluon_cf.data import build_vocab, encode_tree, parse_tree
        >>> from gluon_cf.models import ChildSumTreeLSTMCell, childsum_eager
        >>> tree = parse_tree("(3 (2 not) (1 (2 very) (1 bad)))")
        >>> encoded = encode_tree(tree, build_vocab([tree]), binary=False)
        >>> embed, cell = mx.gluon.nn.Embedding(6, 4), ChildSumTreeLSTMCell(8, 4)
        >>> embed.initialize()
        >>> cell.initialize()
        >>> h, c = childsum_eager(embed, cell, encoded)
        >>> h.shape, c.shape
        ((1, 8), (1, 8))
    """
    ptr, idx = np.asarray(tree.child_ptr), np.asarray(tree.child_idx)
    states: list = [None] * (len(ptr) - 1)
    for node in range(len(states)):
        x = _embed_node(embed, tree, node)
        kids = [int(k) for k in idx[ptr[node]:ptr[node + 1]]]
        if not kids:
            zeros = mx.nd.zeros((1, cell.hidden_size), ctx=x.context, dtype=x.dtype)
            states[node] = cell.combine(x, zeros, zeros)
            continue
        _check_post_order(node, *kids)
        h_sum = _sum_left_to_right(states[k][0] for k in kids)
        fc_sum = _sum_left_to_right(cell.forget(x, *states[k]) for k in kids)
        states[node] = cell.combine(x, h_sum, fc_sum)
    return states[-1]


def _sum_left_to_right(terms):
    terms = iter(terms)
    total = next(terms)
    for term in terms:
        total = total + term
    return total


def topdown_eager(cell: mx.gluon.Block, h0: mx.nd.NDArray, c0: mx.nd.NDArray,
                  max_depth: int) -> Tuple[mx.nd.NDArray, int, tuple]:
    """Generate one tree top-down from (h0, c0), each (1, H), with a TopDownTreeLSTMCell.

    Returns ``(total, count, structure)``: the sum of `cell.output(h)` over the generated nodes
    (1, O), the number of nodes, and the tree shape as nested tuples (a leaf is ``()``, an
    internal node ``(left, right)``). Semantics, for depth 0 at the root::

        def node(h, c, depth):
            out = cell.output(h)
            if depth < max_depth and cell.expand_logit(h) > 0:
                l_out, l_count, l_shape = node(*cell.left_child(h, c), depth + 1)
                r_out, r_count, r_shape = node(*cell.right_child(h, c), depth + 1)
                return out + l_out + r_out, 1 + l_count + r_count, (l_shape, r_shape)
            return out, 1, ()
        return node(h0, c0, 0)

    Example::

        >>> import mxnet as mx
        >>> from gluon_cf.models import TopDownTreeLSTMCell, topdown_eager
        >>> cell = TopDownTreeLSTMCell(8, output_size=2)
        >>> cell.initialize()
        >>> total, count, shape = topdown_eager(cell, mx.nd.ones((1, 8)), mx.nd.zeros((1, 8)),
        ...                                     max_depth=3)
        >>> def nodes(shape):                 # a leaf is (), an internal node (left, right)
        ...     return 1 + sum(nodes(child) for child in shape)
        >>> total.shape, count == nodes(shape)
        ((1, 2), True)
    """
    def node(h, c, depth):
        out = cell.output(h)
        if depth < max_depth and cell.expand_logit(h).asscalar() > 0:
            l_h, l_c = cell.left_child(h, c)
            l_out, l_count, l_shape = yield node(l_h, l_c, depth + 1)
            r_h, r_c = cell.right_child(h, c)
            r_out, r_count, r_shape = yield node(r_h, r_c, depth + 1)
            return out + l_out + r_out, 1 + l_count + r_count, (l_shape, r_shape)
        return out, 1, ()

    return _run_recursion(node(h0, c0, 0))


def _run_recursion(call):
    """Run a recursive function written as a generator, with an explicit stack.

    Inside the function, ``result = yield f(args)`` stands for the recursive call
    ``result = f(args)`` and ``return value`` returns as usual. Only the innermost pending call
    runs at any time, so the depth is bounded by memory, not by Python's recursion limit.
    """
    stack, value = [call], None
    while stack:
        try:
            callee = stack[-1].send(value)
        except StopIteration as done:
            stack.pop()
            value = done.value
        else:
            stack.append(callee)
            value = None
    return value
