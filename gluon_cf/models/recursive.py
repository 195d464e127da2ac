"""Recursive tree models, written as plain recursion with ``@gluon_cf.recursive``.

Each model runs eagerly (Python recursion) and hybridized (one graph: a ``recursion`` node and
``invoke`` call sites, NOTE [recursion design]). Inputs are the arrays of an ``EncodedForest``
(``gluon_cf.data.trees.batchify_forest``): node arrays of the whole mini-batch, with child indices
pointing into them, and ``roots`` (B,). Every model maps each root to its tree's representation
with ``gluon_cf.foreach`` over ``roots``, then classifies it.

* :class:`TreeLSTM` - binary constituency TreeLSTM (Tai et al. 2015).
* :class:`ChildSumTreeLSTM` - child-sum TreeLSTM (Tai et al. 2015), n-ary trees via CSR arrays,
  a ``while_loop`` over the children inside the recursive function.
* :class:`TreeRNN` - recursive neural network (Socher et al. 2011).
* :class:`RNTN` - recursive neural tensor network (Socher et al. 2013).
* :class:`TopDownTreeLSTM` - a generator: from a root vector, each node decides from its own
  hidden state whether to expand into two children (up to ``max_depth``), so the tree's shape is
  decided at run time by the model - the case TF Fold cannot express.
"""
import sys
from typing import Any, Dict, List, Optional, Tuple

import mxnet as mx
import numpy as np
from mxnet import gluon

import gluon_cf
from ..operators import user_location
from ..recursion.api import eager_depth
from .cells import (BinaryTreeLSTMCell, ChildSumTreeLSTMCell, LeafToken, RNTNCell,
                    TopDownTreeLSTMCell, TreeRNNCell)


def _state(value):
    """A cell returns ``(h, c)`` or ``h``; the representation of a node is ``h``."""
    return value[0] if isinstance(value, (list, tuple)) else value


def _as_tuple(value):
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def _row(value, rows):
    """The row ``take`` (mode 'clip') reads for the index ``value`` of ``rows``."""
    return min(max(int(value), 0), len(rows) - 1)


def encode_binary_trees(F, embed, cell, tokens, left, right, roots, remat=False):
    """(B, H) root states of binary trees: ``leaf(embed(token))`` / ``combine(left, right)``.

    ``cell`` is a binary cell of ``gluon_cf.models.cells`` (states ``(h, c)`` or ``h``);
    ``remat``: that of the recursive function (``@gluon_cf.recursive(remat=...)``).
    """

    eager = isinstance(left, mx.nd.NDArray)
    if eager:   # the children's positions, read on the host once (as ChildSumTreeLSTM's)
        left_rows, right_rows = left.asnumpy().ravel(), right.asnumpy().ravel()
        leaves = _eager_leaves(F, embed, cell, tokens, left_rows) if not remat else {}
        # id(child index) -> (that NDArray, its row): the row a parent read on the host is
        # its child's, where reading it back (asscalar) would wait for MXNet's engine, ~150 us
        # a node, a third of a deep chain's eager forward; held while the child's call runs
        child_rows: Dict[int, Tuple[Any, int]] = {}

    @gluon_cf.recursive(remat=remat)
    def node(idx):                        # idx: shape (1,) index of a tree node
        if eager:
            return eager_node(idx)

        def leaf():
            return cell.leaf(embed(F.take(tokens, idx)))

        def internal():
            lstate = node(F.take(left, idx))      # recursive calls = invoke nodes
            rstate = node(F.take(right, idx))
            return cell.combine(*_as_tuple(lstate), *_as_tuple(rstate))

        return gluon_cf.cond(F.take(left, idx) < 0, leaf, internal)

    def eager_node(idx):
        """``node(idx)`` on NDArrays: a leaf is its row of ``leaves`` (all leaves in one
        CachedOp call), an internal node one call (NOTE [eager cells]); with ``remat``, a
        leaf is a call of its own and an internal node's call computes its leaf children. A
        leaf child whose call would exceed ``max_depth`` is called. Rows are read as
        ``take`` reads them."""
        known = child_rows.get(id(idx))
        i = known[1] if known is not None and known[0] is idx else \
            _row(idx.asscalar(), left_rows)
        if left_rows[i] < 0:
            return leaves[i] if leaves else cell.eager('leaf', F.take(tokens, idx), embed=embed)
        children: List[Any] = []
        for rows, array in ((left_rows, left), (right_rows, right)):
            child = F.take(array, idx)
            j = _row(rows[i], left_rows)
            if left_rows[j] < 0 and eager_depth() < node.max_depth:
                children.append(leaves[j] if leaves else LeafToken(F.take(tokens, child)))
            else:
                child_rows[id(child)] = (child, j)
                try:
                    children.append(node(child))
                finally:
                    del child_rows[id(child)]
        return cell.eager_combine(children, embed)

    hs, _ = gluon_cf.foreach(lambda root, _: (_state(node(root)), []), roots, [])
    return F.reshape(hs, (-3, 0))        # (B, 1, H) -> (B, H)


def _rows(F, array):
    """The rows of ``array``, (1, ...) each, split apart by one ``split`` (NOTE [eager cells]):
    a ``take`` per row would have a gradient of the whole array per call."""
    return F.split(array, num_outputs=array.shape[0], axis=0) if array.shape[0] > 1 else [array]


def _eager_leaves(F, embed, cell, tokens, left_rows):
    """{row: state} of every leaf row, ``leaf(embed(token))`` of all of them in one CachedOp
    call, its rows split apart by one ``split`` (NOTE [eager cells])."""
    rows = np.flatnonzero(left_rows < 0)
    if not rows.size:
        return {}
    states = _as_tuple(cell.eager('leaf', F.take(tokens, mx.nd.array(rows, ctx=tokens.context)),
                                  embed=embed))
    parts = [_rows(F, state) for state in states]
    return {int(row): (parts[0][k] if len(parts) == 1 else [part[k] for part in parts])
            for k, row in enumerate(rows)}


class _BinaryTreeClassifier(gluon.HybridBlock):
    """A binary tree fold ``leaf(embed(token))`` / ``combine(*left_state, *right_state)``."""

    cell_class: type   # set by each model below

    def __init__(self, vocab_size: int, embed_size: int = 300, hidden_size: int = 150,
                 num_classes: int = 5, remat: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.remat = remat   # the recursive function's (README: remat)
        with self.name_scope():
            self.embed = gluon.nn.Embedding(vocab_size, embed_size)
            self.cell = self.cell_class(hidden_size, embed_size, prefix="cell_")
            self.out = gluon.nn.Dense(num_classes, in_units=hidden_size)

    def encode(self, F, tokens, left, right, roots):
        """(B, H) root representations."""
        return encode_binary_trees(F, self.embed, self.cell, tokens, left, right, roots,
                                   self.remat)

    def hybrid_forward(self, F, tokens, left, right, roots):
        return self.out(self.encode(F, tokens, left, right, roots))


class TreeLSTM(_BinaryTreeClassifier):
    """Binary constituency TreeLSTM classifier (Tai et al. 2015).

    ``net(tokens, left, right, roots)`` -> (B, num_classes) logits for the roots.
    """

    cell_class = BinaryTreeLSTMCell


class TreeRNN(_BinaryTreeClassifier):
    """Recursive neural network classifier (Socher et al. 2011): h = tanh(W [h_l; h_r] + b)."""

    cell_class = TreeRNNCell


class RNTN(_BinaryTreeClassifier):
    """Recursive neural tensor network classifier (Socher et al. 2013)."""

    cell_class = RNTNCell


class ChildSumTreeLSTM(gluon.HybridBlock):
    """Child-sum TreeLSTM classifier (Tai et al. 2015) over n-ary trees.

    ``net(tokens, child_ptr, child_idx, roots)``; children of node i are
    ``child_idx[child_ptr[i]:child_ptr[i+1]]``. Every node has an input ``embed(token)``.
    Hybridized, the children are summed left to right by a ``while_loop`` inside the recursive
    function, bounded by ``max_children``: a node with more children is a ``ValueError`` naming
    the node, its child count and the bound, eagerly and hybridized (the loop would stop at the
    bound and drop the rest). Eagerly, the children's positions are read from ``child_ptr`` on
    the host (no ``cond``, no ``while_loop``: their eager forms run the same Python), every
    node's embedding is computed at once (one ``Embedding``, split into rows) and a node's
    cell is one CachedOp call, ``cell.node``: one autograd node, so that a deep tree's record
    stays small.
    """

    def __init__(self, vocab_size: int, embed_size: int = 300, hidden_size: int = 150,
                 num_classes: int = 5, max_children: int = 64, remat: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.remat = remat   # the recursive function's (README: remat)
        self.max_children = max_children
        with self.name_scope():
            self.embed = gluon.nn.Embedding(vocab_size, embed_size)
            self.cell = ChildSumTreeLSTMCell(hidden_size, embed_size, prefix="cell_")
            self.out = gluon.nn.Dense(num_classes, in_units=hidden_size)

    def check_children(self, child_ptr: Any) -> None:
        """``ValueError`` unless every node of ``child_ptr`` (an NDArray) has at most
        ``max_children`` children."""
        counts = np.diff(child_ptr.asnumpy().ravel())
        if counts.size and counts.max() > self.max_children:
            node = int(np.argmax(counts))
            raise ValueError(
                f"ChildSumTreeLSTM: node {node} has {int(counts[node])} children, more than "
                f"max_children={self.max_children}: the loop over its children stops at the "
                f"bound, so the rest would be dropped; build the model with max_children >= "
                f"{int(counts.max())}")

    def forward(self, tokens: Any, child_ptr: Any, *args: Any) -> Any:
        if self._active and isinstance(child_ptr, mx.nd.NDArray):
            self.check_children(child_ptr)   # hybridized: the graph cannot check values
        return super().forward(tokens, child_ptr, *args)

    def encode(self, F, tokens, child_ptr, child_idx, roots):
        H = self.hidden_size
        if isinstance(child_ptr, mx.nd.NDArray):
            self.check_children(child_ptr)
        # Where no check saw the values (a graph built by a parent block), the loop warns, at
        # the line of the user's block calling the model (else this one)
        where = "%s: ChildSumTreeLSTM(max_children=%d)" % (
            user_location(models_are_user=False) or "%s:%d" % (
                __file__, sys._getframe().f_lineno), self.max_children)

        eager = isinstance(child_ptr, mx.nd.NDArray)
        if eager:
            ptr = child_ptr.asnumpy().ravel().astype(np.int64)
            inputs = (_rows(F, self.embed(tokens)) if tokens.shape[0] and not self.remat
                      else None)

        @gluon_cf.recursive(remat=self.remat)
        def node(idx):
            if eager:   # one autograd node for the cell (NOTE [eager cells])
                # the rows the graph's take (mode 'clip', float index cast to int) reads, so an
                # index outside [0, N) is what it is hybridized
                v = np.float32(idx.asscalar())
                first, last = _row(v, ptr), _row(v + np.float32(1), ptr)
                children = [node(child_idx[k:k + 1]) for k in range(ptr[first], ptr[last])]
                if inputs is not None:   # every node's embedding, computed at once
                    return self.cell.node(inputs[_row(v, inputs)], children)
                return self.cell.node(F.take(tokens, idx), children, embed=self.embed)
            x = self.embed(F.take(tokens, idx))
            start = F.take(child_ptr, idx)
            end = F.take(child_ptr, idx + 1)

            def zeros():  # one row per invocation, so that the batching executor can batch
                # (of x's dtype, not F.zeros' float32: the model may be cast to float64)
                return F.tile(F.zeros_like(F.slice_axis(x, axis=1, begin=0, end=1)),
                              reps=(1, H))

            def leaf():
                return self.cell.combine(x, zeros(), zeros())

            def internal():
                def has_next(k, h_sum, fc_sum):
                    return k < end

                def add_child(k, h_sum, fc_sum):
                    h, c = node(F.take(child_idx, k))
                    fc = self.cell.forget(x, h, c)
                    return [], [k + 1, h_sum + h, fc_sum + fc]

                _, (_, h_sum, fc_sum) = gluon_cf.while_loop(
                    has_next, add_child, [start, zeros(), zeros()],
                    max_iterations=self.max_children, report_truncation=where,
                    truncation_advice="a node has more children than max_children; build "
                    "the model with a larger max_children")
                return self.cell.combine(x, h_sum, fc_sum)

            return gluon_cf.cond(end - start < 1, leaf, internal)

        hs, _ = gluon_cf.foreach(lambda root, _: (node(root)[0], []), roots, [])
        return F.reshape(hs, (-3, 0))

    def hybrid_forward(self, F, tokens, child_ptr, child_idx, roots):
        return self.out(self.encode(F, tokens, child_ptr, child_idx, roots))


# bytes of heads concatenated at once (NOTE [eager top-down tree]): one level's allocations
_HEADS_PIECE_BYTES = 1 << 20


def _sum_of_outputs(F, heads, output_size):
    """The sum over the rows of ``heads`` (arrays of one or two rows each) of their first
    ``output_size`` columns, (1, output_size), concatenated in pieces of at most
    ``_HEADS_PIECE_BYTES`` (NOTE [eager top-down tree])."""
    row_bytes = heads[0].shape[1] * np.dtype(heads[0].dtype).itemsize
    per_piece = max(1, _HEADS_PIECE_BYTES // (2 * row_bytes))
    sums = [F.sum(F.slice_axis(F.concat(*heads[k:k + per_piece], dim=0), axis=1, begin=0,
                               end=output_size), axis=0, keepdims=True)
            for k in range(0, len(heads), per_piece)]
    return sums[0] if len(sums) == 1 else F.sum(F.concat(*sums, dim=0), axis=0, keepdims=True)


class TopDownTreeLSTM(gluon.HybridBlock):
    """Top-down TreeLSTM generator: the tree's shape is decided at run time by the model.

    ``net(z)`` with ``z`` (B, input_size) -> ``(total, count)``: for each row, a tree is grown
    from ``h0 = tanh(W z)``, ``c0 = 0``; a node with hidden state ``h`` at depth ``d`` expands into
    two children iff ``expand_logit(h) > 0`` and ``d < max_depth``. ``total`` (B, O) is the sum of
    ``output(h)`` over the generated nodes, ``count`` (B, 1) their number. Eagerly, both
    children of a growing node are one two-row LSTM step, one CachedOp call (one autograd
    node), and a node's growth is read on the host.
    """
    # (NOTE [eager top-down tree])

    def __init__(self, input_size: int, hidden_size: int = 150, output_size: Optional[int] = None,
                 max_depth: int = 8, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.max_depth = max_depth
        with self.name_scope():
            self.init = gluon.nn.Dense(hidden_size, in_units=input_size, activation="tanh")
            self.cell = TopDownTreeLSTMCell(hidden_size, output_size=output_size,
                                            prefix="cell_")

    def root_state(self, F, z_row):
        h0 = self.init(z_row)
        return h0, F.zeros_like(h0)

    def hybrid_forward(self, F, z):
        cell, max_depth = self.cell, self.max_depth

        @gluon_cf.recursive
        def node(*args):
            if fused:   # node(c, head) of a node's children, or of the root
                return eager_node(*args)
            h, c, depth = args
            out = cell.output(h)

            def stop():  # count 1, one row per invocation (so that it batches)
                return [out, F.ones_like(F.slice_axis(out, axis=1, begin=0, end=1))]

            def expand():
                l_out, l_count = node(*cell.left_child(h, c), depth + 1)
                r_out, r_count = node(*cell.right_child(h, c), depth + 1)
                return [out + l_out + r_out, 1 + l_count + r_count]

            grow = (cell.expand_logit(h) > 0) * (depth < max_depth)
            return gluon_cf.cond(grow, expand, stop)

        def eager_node(c, head):
            """The number of nodes grown from the siblings (a node's children, or the root) of
            cell states ``c`` and heads ``head``, one row each; the heads of the nodes grown
            are appended to ``heads``; a growing node's children are one CachedOp call (NOTE
            [eager top-down tree]); the tree's depth is the number of calls in progress."""
            depth = eager_depth() - row_depth[0] - 1
            count = c.shape[0]
            if depth >= max_depth:
                return count
            # the expansion logits, their bias added on the host (NOTE [eager top-down tree])
            logits = head.asnumpy()[:, cell.output_size] + expand_bias[0]
            for side, logit in enumerate(logits):
                if logit > 0:
                    c_next, head_next = cell.eager_grow(side, c, head, *constants)
                    heads.append(head_next)
                    count += node(c_next, head_next)
            return count

        # (a subclass's or a user's blocks in the cell are called as they are, eagerly too)
        fused = isinstance(z, mx.nd.NDArray) and cell.fuses_eagerly()
        row_depth = [0]   # eager calls in progress outside the row's tree
        heads: List[Any] = []   # eagerly, the heads of the row's tree's nodes
        constants: List[Any] = []
        expand_bias = [None]

        def per_row(z_row, _):
            h0, c0 = self.root_state(F, z_row)   # (a subclass's own, eagerly too)
            if not fused:
                # (the depth of h0's dtype: the model may be cast to float64)
                total, count = node(h0, c0, F.zeros_like(F.slice_axis(h0, axis=1, begin=0,
                                                                      end=1)))
                return [total, count], []
            row_depth[0] = eager_depth()
            head0, *constants[:], bias = cell.eager_root(h0)
            expand_bias[0] = bias.asnumpy()
            heads[:] = [head0]
            try:
                num_nodes = node(c0, head0)
            except BaseException:
                # ``heads`` is in a reference cycle (``node``'s closure holds ``node``): emptied
                # here, the tree's record is freed as the error leaves, not at the next garbage
                # collection (NOTE [memory after an address-space error] in recursion/api.py)
                heads[:] = []
                raise
            # the outputs of all nodes, their biases added once
            total = _sum_of_outputs(F, heads, cell.output_size)
            total = F.broadcast_add(total, num_nodes * cell.output.bias.data(z_row.context))
            heads[:] = []
            return [total, F.full((1, 1), num_nodes, ctx=total.context, dtype=total.dtype)], []

        (totals, counts), _ = gluon_cf.foreach(per_row, F.expand_dims(z, axis=1), [])
        return F.reshape(totals, (-3, 0)), F.reshape(counts, (-3, 0))
