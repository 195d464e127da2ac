"""Tree cells: the per-node computations of recursive tree models.

Each cell is a container HybridBlock whose children are the per-node functions, so a model
reads like its equations::

    h, c = cell.leaf(embed(token))             # BinaryTreeLSTMCell
    h, c = cell.combine(h_l, c_l, h_r, c_r)

The children work on NDArrays and, inside a hybridized parent, on Symbols.

NOTE: [Row independence]
Every child treats the leading axis as independent rows: row b of every output depends only on
row b of every input (and on the parameters). Only such ops are used (Dense, elementwise,
concat/split on the last axis, batch_dot, broadcasts of parameter rows). This is what lets a
batching executor stack the calls of many nodes into one call and slice the results apart.
"""
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from mxnet import gluon, init, nd, sym
from mxnet.gluon import nn, rnn

__all__ = [
    'BinaryTreeLSTMCell',
    'ChildSumTreeLSTMCell',
    'TreeRNNCell',
    'RNTNCell',
    'TopDownTreeLSTMCell',
]


def _dense(units, in_units, prefix, activation=None, use_bias=True):
    """A Dense layer on (B, in_units) rows with Xavier weights and zero bias.

    Initializers are set on the parameters themselves so they do not depend on the `init`
    passed to `initialize()` (that one is only a default for parameters without their own).
    """
    return nn.Dense(units, in_units=in_units, activation=activation, use_bias=use_bias,
                    flatten=False, weight_initializer=init.Xavier(),
                    bias_initializer='zeros', prefix=prefix)


def _lstm_state(F, i, o, u, *forgotten):
    """c = sigmoid(i) * tanh(u) + sum(forgotten), h = sigmoid(o) * tanh(c)."""
    c = F.sigmoid(i) * F.tanh(u)
    for term in forgotten:
        c = c + term
    return F.sigmoid(o) * F.tanh(c), c


class _TreeCell(gluon.HybridBlock):
    """Base of the cells: holds sizes; the cell itself is not callable, its children are."""

    def __init__(self, hidden_size, input_size, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self._hidden_size = hidden_size
        self._input_size = input_size
        self._eager_graphs: Dict[tuple, _EagerGraph] = {}

    def eager(self, child: str, *args, embed: Optional[gluon.Block] = None):
        """``getattr(self, child)(*args)``; on NDArrays as one CachedOp call, so that under
        ``autograd.record`` it is one autograd node (a deep tree's record stays small).
        With ``embed`` (a block such as the model's ``Embedding``), the first argument is
        ``embed``'s input: ``child(embed(args[0]), *args[1:])``, in the same CachedOp."""
        # (NOTE [eager cells])
        block = getattr(self, child)
        if not isinstance(args[0], nd.NDArray):
            return block(*args) if embed is None else block(embed(args[0]), *args[1:])
        build = block if embed is None else lambda x, *rest: block(embed(x), *rest)
        return self._eager_graph(child, len(args), build, embed)(*args)

    def eager_combine(self, children: Sequence[Any], embed: gluon.Block):
        """``combine`` of the children's states, on NDArrays as one CachedOp call; a child
        given as a :class:`LeafToken` is a leaf computed in the same call,
        ``leaf(embed(token))`` (NOTE [eager cells])."""
        pattern = tuple(isinstance(child, LeafToken) for child in children)
        args = [a for child in children
                for a in ((child.token,) if isinstance(child, LeafToken) else _states(child))]
        num_states = getattr(self, 'num_states')

        def build(*inputs):
            rest, states = list(inputs), []
            for is_leaf in pattern:
                if is_leaf:
                    states += _states(self.leaf(embed(rest.pop(0))))
                else:
                    states += [rest.pop(0) for _ in range(num_states)]
            return self.combine(*states)

        return self._eager_graph(('combine',) + pattern, len(args), build, embed)(*args)

    def _eager_graph(self, name, num_inputs, build, embed=None):
        """The graph of ``build`` (``name`` on ``num_inputs`` inputs, after ``embed``)."""
        graph = self._eager_graphs.get((name, num_inputs, embed))
        if graph is None:
            params = list(self.collect_params().values())
            if embed is not None:
                params += list(embed.collect_params().values())
            graph = self._eager_graphs[name, num_inputs, embed] = _EagerGraph(
                build, num_inputs, params)
        return graph

    @property
    def hidden_size(self):
        return self._hidden_size

    @property
    def input_size(self):
        return self._input_size

    def hybrid_forward(self, F, *args, **kwargs):
        raise TypeError(
            f'{type(self).__name__} is a container of per-node functions and is not callable '
            f'itself; call one of its children instead ({", ".join(self._children)}).')


# NOTE [eager cells]
#     Eagerly, every operator a recursive model runs under ``autograd.record`` stays on MXNet's
#     tape until ``backward``, which then builds one gradient graph over all of them: a few KB
#     per recorded operator (its node, its outputs, their gradient nodes, shapes and buffers),
#     so at depth 20,000 the tape, not the stack, is what fills the address space. A cell's
#     per-node function (``cell.eager('combine', ...)``, ``ChildSumTreeLSTMCell.node``) runs on
#     NDArrays as one CachedOp of its own blocks called once on Symbols: one ``_CachedOp``
#     node on the tape, one ``_backward_CachedOp`` in ``backward``, with MXNet's gradients of
#     the same operators (equal to the operator-by-operator path to 1e-6). The binary models
#     go further: all leaves of the forest, embeddings included, are one call
#     (``recursive._eager_leaves``), its rows split apart by one ``split`` per state (a
#     ``take`` per leaf would have a gradient of the whole array per call, quadratic); a
#     leaf's row equals its one-row call to float rounding (1e-5 against the per-node
#     reference, as the hybridized executor's batches). With ``remat=True`` (each call
#     recomputed on its own in ``backward``) an internal node's call computes its leaf
#     children as before (``eager_combine`` with ``LeafToken``s): a value computed outside
#     the calls and read by many was not checked against remat. ChildSum embeds every
#     node's token in one ``Embedding``, split into rows likewise (its node's call computed
#     its own embedding once; still so with ``remat=True``): one tape node per tree node. A
#     19,999-deep ChildSumTreeLSTM chain
#     with gradients once recorded 25 operators per level, later 17 (2.6 GB of address
#     space), then two (~1.7 GB); binary chains of 19,998 levels (39,997 nodes), VmPeak in
#     MiB: TreeLSTM 2,840 -> 2,116 -> ~2,000 (1,915 to 2,029; 1,756 with OMP_NUM_THREADS=1,
#     which drops OpenBLAS's 256 MiB), RNTN 2,410 -> 1,940 -> 1,899, TreeRNN 1,720 -> 1,680
#     -> 1,605 (tests/test_no_crash.py). What is left per level is MXNet's, ~33 KB forward and
#     ~31 KB more while ``backward`` runs for TreeLSTM. Measured on bare CachedOps of MXNet
#     1.9.1 (20,000 recorded calls, one arena): a call costs ~5.7 KB on the tape and ~5 KB in
#     ``backward``, each value of its graph ~0.8 KB and ~0.4 KB more, each parameter it reads
#     ~3.7 KB in ``backward`` (a gradient per call, all summed at the end). Packing a node's
#     parameters into one input, sliced in the graph, saves ~9 KB a level in ``backward``
#     but costs ~14 KB on the tape: not done. The saved buffers are the CachedOp's (each
#     value of its graph an NDArray of ~0.6 KB before its data, ~8 KB a level of them
#     oneDNN memory descriptors) and the gradient graph ``backward`` builds over the whole
#     tape (nodes, entries, and the sum of each parameter's per-call gradients). The eager
#     TopDownTreeLSTM records less still (NOTE [eager top-down tree]).
#     With no environment variable set (2 cores), ~1,000 MiB is reserved before the first
#     node: OpenBLAS's 128 MiB per OpenMP thread, one per core, and 64 MiB per malloc arena
#     for the five threads MXNet starts at its first operator. The chains then peak at
#     TreeRNN 1,915, ChildSum 1,975, RNTN 2,145, TreeLSTM 2,225 and TopDown (19,999 levels)
#     3,696 MiB (now ~1,870), 7 OS threads throughout (no thread per hop,
#     tests/test_eager_depth_memory.py).
#     Under a 2 GiB address-space limit (prlimit --as, fresh process each, no variable set):
#     every chain's inference passes (VmPeak 1,085-1,219 MiB, TopDown 1,527); with gradients
#     TreeRNN passed (1,855-1,874), ChildSum in 3 of 4 runs (1,926-1,977), RNTN and TreeLSTM
#     failed in ``backward`` with MXNet's bad_alloc error while an internal node's call
#     computed its leaf children; with all leaves in one call TreeLSTM peaks at ~1,890 and
#     RNTN at ~1,730 MiB, ChildSum with all embeddings in one at ~1,900 (README:
#     Recursion). Per level, measured on a loop of the cells' calls (8,000
#     levels, resident memory, leaf children in the call): TreeLSTM ~32 KB after the forward,
#     ~60 KB at the peak of ``backward``; RNTN ~50, TreeRNN ~42. Our Python objects (frames,
#     greenlet stacks) peak at 2-3.6 KB a level (tracemalloc), and are gone before
#     ``backward``. Fusing K levels of the TreeLSTM chain into one call (the same operators,
#     a bigger graph) gives ~52 KB a level at K = 2, ~48 at K = 4: the values of the graph,
#     not the calls, are most of it; oneDNN's memory descriptors are ~9 KB a level of the
#     forward (23 KB with MXNET_MKLDNN_ENABLED=0). With MXNet's NaiveEngine, TreeLSTM ~56 and
#     RNTN ~38: the threaded engine's queue holds ~4-11 KB a level of ``backward`` in
#     flight.
#     ``remat=True`` records one node per call: a 5,000-level TreeLSTM chain peaked 366 MB
#     over its start with it, 335 MB without.
#     Hybridized, the cells' blocks are called as before.


# NOTE [eager top-down tree]
#     The eager TopDownTreeLSTM grows a tree under ``autograd.record`` one recorded call per
#     growing node, so at its max_depth of 19,999 levels the tape, not the tree, decides
#     whether training fits in 2 GiB (issue 24, item 7). Operator by operator the cells held
#     ~180 KB a level; both children with their outputs and logits as one call of the
#     cell's blocks (two LSTM steps, ~40 values, ten parameters read per call) ~120 KB: the
#     chain needed ~3.7 GB and stopped with AddressSpaceError at depth ~17,150. Now, per
#     tree, ``eager_root`` computes once what does not depend on a node: the LSTM gates of
#     both side inputs with both LSTM biases (``gates_x``, (2, 4H)) and one weight stacking
#     the output, expansion and ``h2h`` weights; and per node a *head*, that weight times
#     ``h`` without bias: the output, the logit and ``h2h(h)`` at once. A growing node's
#     children are then one two-row LSTM step (``eager_grow``): gates = ``gates_x`` + the
#     node's ``h2h`` row, one sigmoid and one tanh over all gates, sliced, and the children's
#     heads. ~15 values a level and two tensors read per call, instead of ~40 and ten. The
#     biases the heads leave out are added once: the logit's on the host (the growth is
#     read there anyway), the output's as ``count * output.bias`` to the sum of all heads'
#     outputs, one ``sum`` over their ``concat`` (no per-level ``out + l_out + r_out``), in
#     pieces of at most 1 MiB of heads: one ``concat`` of all of them is a block of the
#     tree's size after the recursion's last address-space check (78 MiB at H = 256 and
#     10,000 levels), which may not fit under a limit (NOTE [memory after an address-space
#     error] in recursion/api.py).
#     Same equations, other float32 rounding: values and gradients equal the cells' blocks
#     called node by node to 1e-5 of each gradient's scale (tests/test_recursion.py).
#     Measured on the 19,999-level chain (H = 4) with gradients, fresh process, no
#     environment variable, 2 cores: ~17 KB a level after the forward (~6 KB of it our
#     frames and greenlets, unrecorded), ~33 KB at the peak of ``backward``; VmPeak
#     ~1,870 MiB with the numpy oracle in the process, under a 2 GiB limit
#     (tests/test_no_crash.py) with glibc's default arenas, 1,594-1,660 with two, what
#     gluon_cf sets under a limit (NOTE [malloc arenas under a limit]); 5x faster than before.
#     What did not help: ``dot`` for the head's FullyConnected (OpenBLAS's own threads
#     reserved ~200 MiB more). The hybridized model calls the cell's blocks as before; so
#     does the eager one when a subclass or the user put other blocks in the cell
#     (``fuses_eagerly``; the fused graphs are keyed by the blocks they were built of). The
#     root is the model's ``root_state`` (a subclass's too). The expansion bias goes through
#     ``eager_root``'s call, so that ``backward`` writes its (zero) gradient: a Trainer raises
#     on a parameter whose gradient is stale.


class LeafToken(NamedTuple):
    """A leaf child given by its token, for :meth:`_TreeCell.eager_combine`."""
    token: nd.NDArray


def _states(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


class _EagerGraph:
    """``build(*inputs)`` of a cell's blocks, called once on Symbols, run on NDArrays by one
    CachedOp (NOTE [eager cells]); the parameters are read at each call."""

    def __init__(self, build, num_inputs, params):
        inputs = [sym.var('input%d' % k) for k in range(num_inputs)]
        outputs = build(*inputs)
        symbol = sym.Group(list(outputs)) if isinstance(outputs, (list, tuple)) else outputs
        by_name = {p.var().name: p for p in params}
        names = [v.name for v in inputs]
        # each input of the graph: the position of an argument, or a parameter
        self.sources = [names.index(name) if name in names else by_name[name]
                        for name in symbol.list_inputs()]
        # MXNet records the operators of a graph of up to two (its default inline_limit) one by
        # one, as if there were no CachedOp: never here
        self.op = nd.CachedOp(symbol, flags=[('inline_limit', 0)])

    def __call__(self, *args):
        return self.op(*[args[s] if isinstance(s, int) else s.data(args[0].context)
                         for s in self.sources])


# ---------------------------------------------------------------------------------------------
# Binary (constituency) TreeLSTM, Tai et al. 2015, section 3.2 with N = 2.

class _LSTMLeaf(gluon.HybridBlock):
    """(h, c) of a leaf: i, o, u from x; c = i * u; h = o * tanh(c)."""

    def __init__(self, hidden_size, input_size, prefix=None):
        super().__init__(prefix=prefix)
        with self.name_scope():
            self.iou = _dense(3 * hidden_size, input_size, 'iou_')

    def hybrid_forward(self, F, x):
        i, o, u = F.split(self.iou(x), num_outputs=3, axis=-1)
        return _lstm_state(F, i, o, u)


class _BinaryLSTMCombine(gluon.HybridBlock):
    """(h, c) of an internal node from its two children.

    Gates i, f_l, f_r, o, u come from one fused Dense over [h_l; h_r] (5H outputs, in that
    order); c = i * u + f_l * c_l + f_r * c_r; h = o * tanh(c).
    """

    def __init__(self, hidden_size, prefix=None):
        super().__init__(prefix=prefix)
        with self.name_scope():
            self.gates = _dense(5 * hidden_size, 2 * hidden_size, 'gates_')

    def hybrid_forward(self, F, h_l, c_l, h_r, c_r):
        gates = self.gates(F.concat(h_l, h_r, dim=-1))
        i, f_l, f_r, o, u = F.split(gates, num_outputs=5, axis=-1)
        return _lstm_state(F, i, o, u, F.sigmoid(f_l) * c_l, F.sigmoid(f_r) * c_r)


class BinaryTreeLSTMCell(_TreeCell):
    """Constituency (binary N-ary) TreeLSTM of Tai et al. 2015.

    Children: ``leaf(x) -> (h, c)`` and ``combine(h_l, c_l, h_r, c_r) -> (h, c)``;
    x is (B, input_size), states are (B, hidden_size).
    """
    num_states = 2

    def __init__(self, hidden_size: int, input_size: int, prefix: Optional[str] = None,
                 params: Optional[gluon.ParameterDict] = None) -> None:
        super().__init__(hidden_size, input_size, prefix=prefix, params=params)
        with self.name_scope():
            self.leaf = _LSTMLeaf(hidden_size, input_size, prefix='leaf_')
            self.combine = _BinaryLSTMCombine(hidden_size, prefix='combine_')


# ---------------------------------------------------------------------------------------------
# Child-sum TreeLSTM, Tai et al. 2015, section 3.1.

class _ChildSumForget(gluon.HybridBlock):
    """f_k * c_k with f_k = sigmoid(W_f x + U_f h_k + b_f), for one child k per row."""

    def __init__(self, hidden_size, input_size, prefix=None):
        super().__init__(prefix=prefix)
        with self.name_scope():
            # One Dense over [x; h_k] is W_f x + U_f h_k + b_f with W_f, U_f side by side.
            self.f = _dense(hidden_size, input_size + hidden_size, 'f_')

    def hybrid_forward(self, F, x, h_k, c_k):
        return F.sigmoid(self.f(F.concat(x, h_k, dim=-1))) * c_k


class _ChildSumCombine(gluon.HybridBlock):
    """(h, c) from x, the sum of the children's h and the sum of their f_k * c_k.

    i, o, u = W x + U h_sum + b (one Dense over [x; h_sum]); c = i * u + fc_sum; h = o * tanh(c).
    """

    def __init__(self, hidden_size, input_size, prefix=None):
        super().__init__(prefix=prefix)
        with self.name_scope():
            self.iou = _dense(3 * hidden_size, input_size + hidden_size, 'iou_')

    def hybrid_forward(self, F, x, h_sum, fc_sum):
        i, o, u = F.split(self.iou(F.concat(x, h_sum, dim=-1)), num_outputs=3, axis=-1)
        return _lstm_state(F, i, o, u, fc_sum)


class ChildSumTreeLSTMCell(_TreeCell):
    """Child-sum TreeLSTM of Tai et al. 2015 (any number of children).

    Children: ``forget(x, h_k, c_k) -> f_k * c_k`` (x is the parent's input, repeated per child)
    and ``combine(x, h_sum, fc_sum) -> (h, c)``. A leaf is ``combine(x, zeros, zeros)``.
    ``node(x, children)`` is a whole node of NDArrays as one CachedOp call.
    """
    num_states = 2

    def __init__(self, hidden_size: int, input_size: int, prefix: Optional[str] = None,
                 params: Optional[gluon.ParameterDict] = None) -> None:
        super().__init__(hidden_size, input_size, prefix=prefix, params=params)
        with self.name_scope():
            self.forget = _ChildSumForget(hidden_size, input_size, prefix='forget_')
            self.combine = _ChildSumCombine(hidden_size, input_size, prefix='combine_')

    def node(self, x: nd.NDArray, children: Sequence[Sequence[nd.NDArray]],
             embed: Optional[gluon.Block] = None) -> List[nd.NDArray]:
        """``[h, c]`` of a node from its input ``x`` and its children's ``(h_k, c_k)``, in
        order, for NDArrays: ``combine(x, sum h_k, sum forget(x, h_k, c_k))``, summed from the
        first child, as one CachedOp call (one autograd node). With ``embed``, ``x`` is
        ``embed``'s input (the node's token) and the input is ``embed(x)``, in the same call."""
        # (NOTE [eager cells])
        n = len(children)

        def build(x, *states):
            return self._node(x if embed is None else embed(x), states[:n], states[n:])

        graph = self._eager_graph('node', 1 + 2 * n, build, embed)
        return graph(x, *[h for h, _ in children], *[c for _, c in children])

    def _node(self, x, hs, cs):
        if hs:
            h_sum, fc_sum = hs[0], self.forget(x, hs[0], cs[0])
            for h, c in zip(hs[1:], cs[1:]):
                h_sum, fc_sum = h_sum + h, fc_sum + self.forget(x, h, c)
        else:
            # (of x's dtype: sym.zeros is float32, and the model may be cast to float64)
            h_sum = fc_sum = sym.tile(sym.zeros_like(sym.slice_axis(x, axis=1, begin=0, end=1)),
                                      reps=(1, self.hidden_size))
        return self.combine(x, h_sum, fc_sum)


# ---------------------------------------------------------------------------------------------
# Recursive neural networks of Socher et al.: TreeRNN (2011) and RNTN (2013).

class _TanhCombine(gluon.HybridBlock):
    """h = tanh(W [h_l; h_r] + b)."""

    def __init__(self, hidden_size, prefix=None):
        super().__init__(prefix=prefix)
        with self.name_scope():
            self.proj = _dense(hidden_size, 2 * hidden_size, 'proj_', activation='tanh')

    def hybrid_forward(self, F, h_l, h_r):
        return self.proj(F.concat(h_l, h_r, dim=-1))


class TreeRNNCell(_TreeCell):
    """Recursive neural network of Socher et al. 2011.

    Children: ``leaf(x) -> h = tanh(W_e x + b_e)`` and
    ``combine(h_l, h_r) -> h = tanh(W [h_l; h_r] + b)``.
    """
    num_states = 1

    def __init__(self, hidden_size: int, input_size: int, prefix: Optional[str] = None,
                 params: Optional[gluon.ParameterDict] = None) -> None:
        super().__init__(hidden_size, input_size, prefix=prefix, params=params)
        with self.name_scope():
            self.leaf = _dense(hidden_size, input_size, 'leaf_', activation='tanh')
            self.combine = _TanhCombine(hidden_size, prefix='combine_')


class _RNTNCombine(gluon.HybridBlock):
    """h = tanh(ab^T V^[1:H] ab + W ab + b) with ab = [h_l; h_r] and V^[k] of shape (2H, 2H).

    NOTE: [RNTN tensor layout]
    The parameter `V` holds the (H, 2H, 2H) tensor flattened to (H * 2H, 2H): row k * 2H + i is
    V^[k][i, :], so ``V.data().reshape((H, 2H, 2H))`` is the tensor of the equations. Then the
    bilinear term is one GEMM plus one batch_dot, row by row: FullyConnected gives
    t[b, k * 2H + i] = sum_j V^[k][i, j] ab[b, j], and batch_dot with ab[b] sums over i. The flat
    layout matters: with a 3-D parameter a hybridized graph copies all H * 4H^2 values into
    the Reshape output on every call (8x slower at H = 150), and NDArray views do not exist there.
    """

    def __init__(self, hidden_size, prefix=None):
        super().__init__(prefix=prefix)
        self._hidden_size = hidden_size
        two_h = 2 * hidden_size
        with self.name_scope():
            # Small tensor weights keep tanh out of saturation at the start (the bilinear term
            # sums (2H)^2 products); Socher et al. likewise start V near zero.
            self.V = self.params.get('V', shape=(hidden_size * two_h, two_h),
                                     init=init.Normal(1.0 / (4 * hidden_size)))
            self.linear = _dense(hidden_size, two_h, 'linear_')

    def hybrid_forward(self, F, h_l, h_r, V):
        hidden, two_h = self._hidden_size, 2 * self._hidden_size
        ab = F.concat(h_l, h_r, dim=-1)                                        # (B, 2H)
        t = F.FullyConnected(ab, V, no_bias=True, num_hidden=hidden * two_h,
                             flatten=False)                                    # (B, H * 2H)
        bilinear = F.batch_dot(t.reshape((0, hidden, two_h)), ab.expand_dims(axis=2))
        return F.tanh(bilinear.reshape((0, hidden)) + self.linear(ab))


class RNTNCell(_TreeCell):
    """Recursive neural tensor network of Socher et al. 2013.

    Children: ``leaf(x) -> tanh(W_e x + b_e)`` (as TreeRNNCell) and
    ``combine(h_l, h_r) -> tanh(ab^T V^[1:H] ab + W ab + b)`` with ab = [h_l; h_r]; the tensor
    V is stored flat as `combine.V`, see NOTE: [RNTN tensor layout].
    """
    num_states = 1

    def __init__(self, hidden_size: int, input_size: int, prefix: Optional[str] = None,
                 params: Optional[gluon.ParameterDict] = None) -> None:
        super().__init__(hidden_size, input_size, prefix=prefix, params=params)
        with self.name_scope():
            self.leaf = _dense(hidden_size, input_size, 'leaf_', activation='tanh')
            self.combine = _RNTNCombine(hidden_size, prefix='combine_')


# ---------------------------------------------------------------------------------------------
# Top-down tree generator.

class _SideStep(gluon.HybridBlock):
    """One LSTM step from a parent's (h, c) whose input is this side's learned vector.

    The LSTM weights are shared between the sides (the `lstm` block is a child of both steps and
    of the cell; Gluon collects its parameters once); only the input vector differs.
    """

    def __init__(self, lstm, input_size, prefix=None):
        super().__init__(prefix=prefix)
        with self.name_scope():
            self.input = self.params.get('input', shape=(1, input_size),
                                         init=init.Normal(1.0))
        self.lstm = lstm

    def hybrid_forward(self, F, h, c, input):
        x = F.broadcast_like(input, h, lhs_axes=(0,), rhs_axes=(0,))          # (B, input_size)
        _, (h_next, c_next) = self.lstm(x, [h, c])
        return h_next, c_next


class TopDownTreeLSTMCell(_TreeCell):
    """Generates a binary tree top-down from a root state (h, c), each (B, hidden_size).

    Children: ``expand_logit(h) -> (B, 1)``; a node gets two children iff the logit is > 0 and
    its depth < max_depth. ``left_child(h, c)`` and ``right_child(h, c) -> (h', c')`` are steps
    of one shared LSTM whose input is a learned per-side vector. ``output(h) -> (B, output_size)``
    is the per-node output (output_size defaults to hidden_size).
    """
    num_states = 2

    def __init__(self, hidden_size: int, output_size: Optional[int] = None,
                 input_size: Optional[int] = None, prefix: Optional[str] = None,
                 params: Optional[gluon.ParameterDict] = None) -> None:
        output_size = hidden_size if output_size is None else output_size
        input_size = hidden_size if input_size is None else input_size
        super().__init__(hidden_size, input_size, prefix=prefix, params=params)
        self._output_size = output_size
        with self.name_scope():
            self.lstm = rnn.LSTMCell(hidden_size, input_size=input_size,
                                     i2h_weight_initializer=init.Xavier(),
                                     h2h_weight_initializer=init.Orthogonal(),
                                     prefix='lstm_')
            self.expand_logit = _dense(1, hidden_size, 'expand_')
            self.left_child = _SideStep(self.lstm, input_size, prefix='left_')
            self.right_child = _SideStep(self.lstm, input_size, prefix='right_')
            self.output = _dense(output_size, hidden_size, 'output_')

    @property
    def output_size(self):
        return self._output_size

    def eager_root(self, h0: nd.NDArray) -> List[nd.NDArray]:
        """The root ``h0`` (1, hidden_size) of an eagerly generated tree as one CachedOp call
        (NOTE [eager top-down tree]): ``[head0, gates_x, weight, expand_bias]``, where
        ``weight`` is the output, expansion and LSTM ``h2h`` weights stacked,
        ``head0 = FullyConnected(h0, weight, no_bias=True)`` the root's head (see
        :meth:`eager_grow`), ``gates_x`` (2, 4H) the LSTM's gates of the left and right
        input vectors, with both LSTM biases, and ``expand_bias`` a copy of the expansion
        bias (through the call, so that ``backward`` writes its gradient, zero, as the
        cell's blocks would: a Trainer refuses a parameter whose gradient is stale)."""
        lstm, size = self.lstm, 4 * self._hidden_size

        def build(h0):
            weight = sym.concat(self.output.weight.var(), self.expand_logit.weight.var(),
                                lstm.h2h_weight.var(), dim=0)
            inputs = sym.concat(self.left_child.input.var(), self.right_child.input.var(), dim=0)
            gates_x = sym.FullyConnected(inputs, lstm.i2h_weight.var(),
                                         lstm.i2h_bias.var() + lstm.h2h_bias.var(),
                                         num_hidden=size)
            head0 = sym.FullyConnected(h0, weight, no_bias=True, num_hidden=self._head_size)
            return [head0, gates_x, weight, sym.identity(self.expand_logit.bias.var())]

        return self._eager_graph(('root', self._blocks()), 1, build)(h0)

    def eager_grow(self, side: int, c_pair: nd.NDArray, head_pair: nd.NDArray,
                   gates_x: nd.NDArray, weight: nd.NDArray) -> List[nd.NDArray]:
        """Both children of the node in row ``side`` of ``c_pair`` and ``head_pair`` (its
        cell state and head), as one CachedOp call (NOTE [eager top-down tree]): ``[c, head]``,
        each with the left child in row 0 and the right one in row 1, a child's head being
        ``[output(h) - output.bias, expand_logit(h) - expand_logit.bias, h2h(h) - h2h.bias]``
        of its ``h``."""
        hidden, skip = self._hidden_size, self._output_size + 1

        def build(c_pair, head_pair, gates_x, weight):
            c = sym.slice_axis(c_pair, axis=0, begin=side, end=side + 1)
            h2h = sym.slice(head_pair, begin=(side, skip), end=(side + 1, skip + 4 * hidden))
            gates = sym.broadcast_add(gates_x, h2h)
            # each activation on all four gates, then sliced: fewer values than four of each
            sigmoid, tanh = sym.sigmoid(gates), sym.tanh(gates)
            i, f, _, o = (sym.slice_axis(sigmoid, axis=1, begin=k * hidden,
                                         end=(k + 1) * hidden) for k in range(4))
            g = sym.slice_axis(tanh, axis=1, begin=2 * hidden, end=3 * hidden)
            c_next = sym.broadcast_mul(f, c) + i * g
            h_next = o * sym.tanh(c_next)
            return [c_next, sym.FullyConnected(h_next, weight, no_bias=True,
                                               num_hidden=self._head_size)]

        return self._eager_graph(('grow', side, self._blocks()), 4, build)(
            c_pair, head_pair, gates_x, weight)

    def fuses_eagerly(self) -> bool:
        """Whether the blocks are still the ones whose equations :meth:`eager_root` and
        :meth:`eager_grow` fuse (Dense layers without activation, the LSTM's tanh and sigmoid,
        this class's side steps sharing it); a subclass's or a user's other blocks are
        called as they are (NOTE [eager top-down tree])."""
        lstm = self.lstm
        return all(type(d) is nn.Dense and d.act is None and d.bias is not None
                   for d in (self.output, self.expand_logit)) and \
            type(lstm) is rnn.LSTMCell and \
            (lstm._activation, lstm._recurrent_activation) == ('tanh', 'sigmoid') and \
            all(type(s) is _SideStep and s.lstm is lstm
                for s in (self.left_child, self.right_child))

    def _blocks(self):
        # the blocks a fused graph was built of: one swapped in later builds another
        return (self.output, self.expand_logit, self.lstm, self.left_child, self.right_child)

    @property
    def _head_size(self):
        return self._output_size + 1 + 4 * self._hidden_size
