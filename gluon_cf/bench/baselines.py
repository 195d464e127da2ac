"""The benchmark's model, data and baseline methods (a, c, d, f).

Every method runs the same model, `TreeModel` (embedding -> tree cell -> Dense head over the root
state), with the same weights, and implements the runner interface of `gluon_cf.bench`:

    runner.infer(batch)       -> (root states (B, H), logits (B, C))
    runner.train_step(batch)  -> loss; forward + backward + one SGD step

Methods (numbering of the benchmark plan):

a. `EagerRunner`: the eager references of gluon_cf.models.reference, one tree at a time, one
   Gluon call per node; a mini-batch is a Python loop over its trees (losses summed, see
   NOTE: [Per-tree backward]).
c. `IterativeRunner`: the "iterative" baseline of the EuroSys'18 recursion paper: a tree's nodes
   in topological (post-)order through a Python loop, one node at a time, states kept in a list.
   The per-node cell functions are hybridized (static graphs, as the paper's loop body is) and a
   tree's embeddings come from one lookup; a mini-batch is a loop over its trees.
d. `LevelBatchedRunner`: hand-batched by level, the best a person writes without a framework:
   one call per tree height over the whole forest (children gathered with `take`, results
   scattered into state buffers with `index_copy`), each level step a hybridized block.
f. `TorchRunner`: method a in PyTorch, with cells copied weight for weight.

NOTE: [Per-tree backward]
The per-node methods (a, c) run one backward per tree, accumulating parameter gradients
(grad_req='add'), which is the gradient of the summed loss. One backward over the whole
mini-batch would be the same gradient, but MXNet's autograd keeps every use's weight gradient
alive until it sums them at the end: for the RNTN that is 54 MB of V gradient per internal node
(H = 150), over 24 GB for a batch of 25 SST-like trees. PyTorch accumulates as it goes, so the
torch runner does one backward per mini-batch.

Every runner hands a mini-batch's host arrays to MXNet by `to_nd` (NOTE: [Uploads] in
gluon_cf/uploads.py).
"""
from dataclasses import dataclass
from typing import TYPE_CHECKING, List

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn

if TYPE_CHECKING:   # imported when called (make_batches), as the encoders are
    from gluon_cf.data.trees import EncodedForest, EncodedTree
from gluon_cf.uploads import to_nd
from gluon_cf.models import (BinaryTreeLSTMCell, RNTNCell, TreeRNNCell, rntn_eager,
                             treelstm_eager, treernn_eager)

__all__ = [
    'MODEL_KINDS', 'ModelConfig', 'TreeModel', 'make_model', 'clone_model', 'Batch',
    'make_batches', 'MethodUnavailable', 'EagerRunner', 'IterativeRunner',
    'LevelBatchedRunner', 'TorchRunner', 'FloorRunner', 'NumpyRunner',
]

# kind -> (cell class, eager reference returning the root state(s))
MODEL_KINDS = {
    'treelstm': (BinaryTreeLSTMCell, treelstm_eager),
    'treernn': (TreeRNNCell, treernn_eager),
    'rntn': (RNTNCell, rntn_eager),
}
LEARNING_RATE = 0.01


class MethodUnavailable(Exception):
    """Raised by a method builder that cannot run here; the harness skips it with the reason."""


# ---------------------------------------------------------------------------------------------
# Model and data

@dataclass(frozen=True)
class ModelConfig:
    kind: str
    vocab_size: int
    embed_size: int = 300
    hidden_size: int = 150
    num_classes: int = 5


class TreeModel(gluon.Block):
    """The parameters every method shares: `embed`, `cell` (per `config.kind`) and `head`.

    It is a container, not a model: each method decides how to run the tree.
    """

    def __init__(self, config, prefix='treemodel_'):
        super().__init__(prefix=prefix)
        if config.kind not in MODEL_KINDS:
            raise ValueError(f'TreeModel: unknown kind {config.kind!r}; expected one of '
                             f'{", ".join(MODEL_KINDS)}')
        self.config = config
        with self.name_scope():
            self.embed = nn.Embedding(config.vocab_size, config.embed_size,
                                      weight_initializer=mx.init.Uniform(0.1), prefix='embed_')
            self.cell = MODEL_KINDS[config.kind][0](config.hidden_size, config.embed_size,
                                                    prefix='cell_')
            self.head = nn.Dense(config.num_classes, in_units=config.hidden_size,
                                 weight_initializer=mx.init.Xavier(), prefix='head_')

    @property
    def num_states(self):
        return self.cell.num_states

    def forward(self, *args):
        raise TypeError('TreeModel holds parameters only; run it through a benchmark runner')


def make_model(config, seed=0):
    """A freshly initialized `TreeModel`, deterministic per `seed`."""
    mx.random.seed(seed)
    model = TreeModel(config)
    model.initialize()
    return model


def clone_model(model):
    """A new `TreeModel` with copies of `model`'s parameter values (builders must not share
    blocks: hybridizing a clone leaves the original and the other methods untouched)."""
    clone = TreeModel(model.config, prefix=model.prefix)
    clone.initialize()
    src = model.collect_params()
    for name, param in clone.collect_params().items():
        param.set_data(src[name].data().copy())
    return clone


@dataclass
class Batch:
    """A mini-batch in both forms: `trees` (list of EncodedTree) and their `forest`."""
    trees: List["EncodedTree"]
    forest: "EncodedForest"

    @property
    def size(self):
        return len(self.trees)

    @property
    def labels(self):
        return self.forest.root_labels


def make_batches(encoded_trees, batch_size, num_batches, seed=None):
    """`num_batches` mini-batches of `batch_size`: consecutive trees, cycling through them, or,
    with a `seed`, the trees reshuffled every pass (so that mini-batches are new forests, as in
    training, rather than the same few forests again)."""
    from gluon_cf.data.trees import batchify_forest

    n = len(encoded_trees)
    rng = None if seed is None else np.random.RandomState(seed)
    order: List[int] = []
    while len(order) < num_batches * batch_size:
        order.extend(range(n) if rng is None else rng.permutation(n))
    batches = []
    for b in range(num_batches):
        trees = [encoded_trees[i] for i in order[b * batch_size:(b + 1) * batch_size]]
        batches.append(Batch(trees, batchify_forest(trees)))
    return batches


def _as_tuple(states):
    return tuple(states) if isinstance(states, (list, tuple)) else (states,)


class _GluonRunner:
    """Shared parts of the MXNet runners: a private clone, the loss and the trainer.

    Subclasses define `root_states(batch)` -> (B, H) root h of the whole mini-batch.
    """

    def __init__(self, model):
        self.model = clone_model(model)
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        self.trainer = gluon.Trainer(self.model.collect_params(), 'sgd',
                                     {'learning_rate': LEARNING_RATE})

    def root_states(self, batch):
        raise NotImplementedError(f"{type(self).__name__} defines no root_states")

    def infer(self, batch):
        root_h = self.root_states(batch)
        return root_h, self.model.head(root_h)

    def train_step(self, batch):
        labels = to_nd(batch.labels)
        with autograd.record():
            loss = self.loss_fn(self.model.head(self.root_states(batch)), labels).mean()
        loss.backward()
        # A mini-batch of single-leaf trees leaves `combine` unused: its gradient is stale and
        # SGD must leave it alone (as torch does for parameters without a gradient).
        self.trainer.step(1, ignore_stale_grad=True)
        return loss


class _PerTreeRunner(_GluonRunner):
    """A runner that handles one tree at a time (`root_h(tree)` -> (1, H)); a mini-batch is a
    Python loop over its trees, with one backward per tree (NOTE: [Per-tree backward])."""

    def __init__(self, model):
        super().__init__(model)
        self.model.collect_params().setattr('grad_req', 'add')

    def root_h(self, tree):
        raise NotImplementedError(f"{type(self).__name__} defines no root_h")

    def root_states(self, batch):
        return mx.nd.concat(*[self.root_h(t) for t in batch.trees], dim=0)

    def infer(self, batch):
        roots = [self.root_h(t) for t in batch.trees]
        logits = [self.model.head(h) for h in roots]
        return mx.nd.concat(*roots, dim=0), mx.nd.concat(*logits, dim=0)

    def train_step(self, batch):
        total = 0.0
        for tree, label in zip(batch.trees, batch.labels):
            with autograd.record():
                loss = self.loss_fn(self.model.head(self.root_h(tree)), to_nd([label]))
            loss.backward()
            total = total + loss
        self.trainer.step(batch.size, ignore_stale_grad=True)   # mean loss; see _GluonRunner
        self.model.collect_params().zero_grad()
        return total / batch.size


# ---------------------------------------------------------------------------------------------
# a. Eager per-node recursion (the references), a Python loop over the trees.

class EagerRunner(_PerTreeRunner):
    def __init__(self, model):
        super().__init__(model)
        self._reference = MODEL_KINDS[model.config.kind][1]

    def root_h(self, tree):
        return _as_tuple(self._reference(self.model.embed, self.model.cell, tree))[0]


# ---------------------------------------------------------------------------------------------
# c. Iterative: a Python loop over a tree's nodes in post-order, hybridized node functions.

class IterativeRunner(_PerTreeRunner):
    def __init__(self, model):
        super().__init__(model)
        cell = self.model.cell
        # Every node call has batch 1, so static shapes let the CachedOps reuse their memory.
        cell.leaf.hybridize(static_alloc=True, static_shape=True)
        cell.combine.hybridize(static_alloc=True, static_shape=True)

    def root_h(self, tree):
        cell = self.model.cell
        x = self.model.embed(to_nd(tree.tokens, 'int32'))
        left, right = tree.left.tolist(), tree.right.tolist()
        states: List[tuple] = [()] * len(left)   # set in post-order, before any reader
        for node, (l, r) in enumerate(zip(left, right)):
            if l < 0:
                states[node] = _as_tuple(cell.leaf(x[node:node + 1]))
            else:
                states[node] = _as_tuple(cell.combine(*states[l], *states[r]))
        return states[-1][0]


# ---------------------------------------------------------------------------------------------
# d. Hand-written level batching.

class _LevelStep(gluon.HybridBlock):
    """All nodes of one height: gather children states, combine, scatter into the buffers.

    Inputs: `nodes`, `left`, `right` (int32 index vectors of this level) and the state buffers
    (N, H) (h, or h and c). Returns the updated buffers.
    """

    def __init__(self, combine):
        super().__init__()
        self.combine = combine

    def hybrid_forward(self, F, nodes, left, right, *buffers):
        children = [F.take(buf, left) for buf in buffers] + [F.take(buf, right) for buf in buffers]
        new = _as_tuple(self.combine(*children))
        return tuple(F.contrib.index_copy(buf, nodes, s) for buf, s in zip(buffers, new))


class _LeafStep(gluon.HybridBlock):
    """All leaves: embed, leaf cell, scatter into fresh buffers (rows of internal nodes are 0)."""

    def __init__(self, embed, leaf):
        super().__init__()
        self.embed = embed
        self.leaf = leaf

    def hybrid_forward(self, F, tokens, nodes, zeros):
        states = _as_tuple(self.leaf(self.embed(tokens)))
        return tuple(F.contrib.index_copy(zeros, nodes, s) for s in states)


class LevelBatchedRunner(_GluonRunner):
    def __init__(self, model):
        super().__init__(model)
        # Level sizes vary, so no static shapes: the CachedOps re-infer shapes per call.
        self._leaf_step = _LeafStep(self.model.embed, self.model.cell.leaf)
        self._level_step = _LevelStep(self.model.cell.combine)
        self._leaf_step.hybridize()
        self._level_step.hybridize()

    def root_states(self, batch):
        forest = batch.forest
        levels = forest.levels()
        nd32 = lambda a: to_nd(a, 'int32')  # noqa: E731
        zeros = mx.nd.zeros((forest.num_nodes, self.model.config.hidden_size))
        leaves = levels[0]
        buffers = _as_tuple(self._leaf_step(nd32(forest.tokens[leaves]), nd32(leaves), zeros))
        for nodes in levels[1:]:
            buffers = _as_tuple(self._level_step(nd32(nodes), nd32(forest.left[nodes]),
                                                 nd32(forest.right[nodes]), *buffers))
        return mx.nd.take(buffers[0], nd32(forest.roots))


# ---------------------------------------------------------------------------------------------
# h. numpy level batching: the same arithmetic without a framework (inference).

def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


class NumpyRunner:
    """h: level-batched inference in numpy (float32) with the model's weights: one gather,
    cell and scatter per level, as d does in MXNet. Inference only."""

    trains = False

    def __init__(self, model):
        self.kind = model.config.kind
        self.hidden = model.config.hidden_size
        params = {name[len(model.prefix):]: p.data().asnumpy()
                  for name, p in model.collect_params().items()}
        self.p = params
        self.embed = params['embed_weight']
        self.head_w, self.head_b = params['head_weight'], params['head_bias']

    def _dense(self, prefix, x):
        return x @ self.p[prefix + 'weight'].T + self.p[prefix + 'bias']

    def _leaf(self, x):
        if self.kind == 'treelstm':
            i, o, u = np.split(self._dense('cell_leaf_iou_', x), 3, axis=1)
            c = _sigmoid(i) * np.tanh(u)
            return [_sigmoid(o) * np.tanh(c), c]
        return [np.tanh(self._dense('cell_leaf_', x))]

    def _combine(self, left, right):
        if self.kind == 'treelstm':
            (h_l, c_l), (h_r, c_r) = left, right
            gates = self._dense('cell_combine_gates_', np.concatenate([h_l, h_r], axis=1))
            i, f_l, f_r, o, u = np.split(gates, 5, axis=1)
            c = _sigmoid(i) * np.tanh(u) + _sigmoid(f_l) * c_l + _sigmoid(f_r) * c_r
            return [_sigmoid(o) * np.tanh(c), c]
        ab = np.concatenate([left[0], right[0]], axis=1)
        if self.kind == 'treernn':
            return [np.tanh(self._dense('cell_combine_proj_', ab))]
        hidden, two_h = self.hidden, 2 * self.hidden
        t = (ab @ self.p['cell_combine_V'].T).reshape(-1, hidden, two_h)
        bilinear = np.einsum('bki,bi->bk', t, ab)
        return [np.tanh(bilinear + self._dense('cell_combine_linear_', ab))]

    def infer(self, batch):
        forest = batch.forest
        levels = forest.levels()
        leaves = levels[0]
        leaf_states = self._leaf(self.embed[forest.tokens[leaves]])
        states = [np.zeros((forest.num_nodes, self.hidden), np.float32) for _ in leaf_states]
        for buf, value in zip(states, leaf_states):
            buf[leaves] = value
        for nodes in levels[1:]:
            left = [buf[forest.left[nodes]] for buf in states]
            right = [buf[forest.right[nodes]] for buf in states]
            for buf, value in zip(states, self._combine(left, right)):
                buf[nodes] = value
        root_h = states[0][forest.roots]
        return root_h, root_h @ self.head_w.T + self.head_b

    def train_step(self, batch):
        raise MethodUnavailable('numpy level batching is inference only')


# ---------------------------------------------------------------------------------------------
# f. PyTorch eager per-node recursion.

def import_torch():
    """torch with one intra-op thread; MethodUnavailable if it is not installed."""
    try:
        import torch
    except ImportError as e:
        raise MethodUnavailable(
            f'torch is not importable ({e}); install the CPU build with '
            '`pip install torch==2.13.0` to run method f') from None
    # Per-node ops are too small to split across threads: on this 2-core machine one thread is
    # as fast for the TreeLSTM and 1.5-2x faster for the RNTN, and two threads fight with
    # MXNet's OpenMP threads in the same process (erratic timings). torch imported after
    # MXNet already starts with one thread; this makes it explicit.
    torch.set_num_threads(1)
    return torch


class TorchRunner:
    """Method a in PyTorch: the same cells and per-node loop, weights copied from the model."""

    def __init__(self, model):
        torch = import_torch()
        self.torch = torch
        config = model.config
        values = {name[len(model.prefix):]: p.data().asnumpy()
                  for name, p in model.collect_params().items()}
        if config.kind == 'rntn':      # NOTE: [RNTN tensor layout] in gluon_cf.models.cells
            h = config.hidden_size
            values['cell_combine_V'] = values['cell_combine_V'].reshape(h, 2 * h, 2 * h)
        self.params = {name: torch.tensor(v, requires_grad=True) for name, v in values.items()}
        self.kind = config.kind
        self.optimizer = torch.optim.SGD(list(self.params.values()), lr=LEARNING_RATE)

    # The cell equations, mirroring gluon_cf.models.cells (weights are (out, in) as in Gluon).
    def _linear(self, name, x):
        return self.torch.nn.functional.linear(x, self.params[name + '_weight'],
                                               self.params[name + '_bias'])

    def _leaf(self, token):
        x = self.torch.nn.functional.embedding(token, self.params['embed_weight'])
        if self.kind == 'treelstm':
            i, o, u = self._linear('cell_leaf_iou', x).chunk(3, dim=-1)
            c = i.sigmoid() * u.tanh()
            return o.sigmoid() * c.tanh(), c
        return (self._linear('cell_leaf', x).tanh(),)

    def _combine(self, left, right):
        torch = self.torch
        if self.kind == 'treelstm':
            (hl, cl), (hr, cr) = left, right
            gates = self._linear('cell_combine_gates', torch.cat([hl, hr], dim=-1))
            i, fl, fr, o, u = gates.chunk(5, dim=-1)
            c = i.sigmoid() * u.tanh() + fl.sigmoid() * cl + fr.sigmoid() * cr
            return o.sigmoid() * c.tanh(), c
        ab = torch.cat([left[0], right[0]], dim=-1)
        if self.kind == 'treernn':
            return (self._linear('cell_combine_proj', ab).tanh(),)
        bilinear = torch.nn.functional.bilinear(ab, ab, self.params['cell_combine_V'])
        return ((bilinear + self._linear('cell_combine_linear', ab)).tanh(),)

    def _root_h(self, tree):
        torch = self.torch
        left, right = tree.left.tolist(), tree.right.tolist()
        states: List[tuple] = [()] * len(left)   # set in post-order, before any reader
        for node, (l, r) in enumerate(zip(left, right)):
            if l < 0:
                states[node] = self._leaf(torch.tensor(tree.tokens[node:node + 1],
                                                       dtype=torch.long))
            else:
                states[node] = self._combine(states[l], states[r])
        return states[-1][0]

    def infer(self, batch):
        with self.torch.no_grad():
            roots = [self._root_h(t) for t in batch.trees]
            logits = [self._linear('head', h) for h in roots]
            return self.torch.cat(roots).numpy(), self.torch.cat(logits).numpy()

    def train_step(self, batch):
        torch = self.torch
        self.optimizer.zero_grad()
        losses = [torch.nn.functional.cross_entropy(
                      self._linear('head', self._root_h(t)), torch.tensor([int(label)]))
                  for t, label in zip(batch.trees, batch.labels)]
        loss = torch.stack(losses).sum() / batch.size
        loss.backward()
        self.optimizer.step()
        return loss.item()


# ---------------------------------------------------------------------------------------------
# b, e. gluon_cf: the recursive model hybridized, run by the unbatched or the batching executor.

class _RecursiveEncoder(gluon.HybridBlock):
    """The benchmark model's embedding and cell, encoded by gluon_cf recursion (hybridized)."""

    def __init__(self, embed, cell):
        super().__init__(prefix='gluoncf_')
        self.embed = embed
        self.cell = cell

    def hybrid_forward(self, F, tokens, left, right, roots):
        from gluon_cf.models.recursive import encode_binary_trees
        return encode_binary_trees(F, self.embed, self.cell, tokens, left, right, roots)


class _GluonCfRunner(_GluonRunner):
    executor: str                  # 'unbatched' or 'batched': each subclass sets it
    ahead_of_time = True

    def __init__(self, model):
        super().__init__(model)
        self.encoder = _RecursiveEncoder(self.model.embed, self.model.cell)
        self.encoder.hybridize(static_alloc=True)

    def root_states(self, batch):
        import gluon_cf
        gluon_cf.set_executor(self.executor, ahead_of_time=self.ahead_of_time)
        f = batch.forest
        return self.encoder(to_nd(f.tokens), to_nd(f.left), to_nd(f.right), to_nd(f.roots))


class GluonCfUnbatchedRunner(_GluonCfRunner):
    """b: one invocation at a time (the EuroSys'18 paper's recursive executor)."""
    executor = 'unbatched'

    def train_step(self, batch):
        if self.model.config.kind != 'rntn':
            return super().train_step(batch)
        # RNTN: one backward per tree, as a and c do (NOTE: [Per-tree backward]).
        total = 0.0
        for b in range(batch.size):
            one = Batch([batch.trees[b]], _single(batch.trees[b]))
            with autograd.record():
                loss = self.loss_fn(self.model.head(self.root_states(one)),
                                    to_nd(one.labels)).mean()
            loss.backward()
            total = total + loss
            self.trainer.step(batch.size, ignore_stale_grad=True)
        return total / batch.size


def _single(tree):
    from gluon_cf.data.trees import batchify_forest
    return batchify_forest([tree])


class GluonCfBatchedRunner(_GluonCfRunner):
    """e: the batching executor (ahead-of-time schedules where the tree comes from the input,
    NOTE [ahead-of-time schedules]; else dynamic batching within and across trees)."""
    executor = 'batched'


class GluonCfDynamicRunner(GluonCfBatchedRunner):
    """i: the batching executor with dynamic batching only (e before issue 13)."""
    ahead_of_time = False


# ---------------------------------------------------------------------------------------------
# j, k. The exported model: standard ONNX in onnxruntime, and the artifact's runtime.

class _RecursiveClassifier(gluon.HybridBlock):
    """Root states and logits of the benchmark model by gluon_cf recursion: what is exported."""

    def __init__(self, model):
        super().__init__(prefix='exported_')
        self.encoder = _RecursiveEncoder(model.embed, model.cell)
        self.head = model.head

    def hybrid_forward(self, F, tokens, left, right, roots):
        root_h = self.encoder(tokens, left, right, roots)
        return root_h, self.head(root_h)


# A 3-node tree: the example the export runs the model on (node and tree axes are dynamic).
_EXAMPLE = [np.array(a, np.float32) for a in ([1, 2, 0], [-1, -1, 0], [-1, -1, 1], [2])]
_NODE_AXES = {0: [0], 1: [0], 2: [0], 3: [0]}


def _forest_inputs(batch):
    f = batch.forest
    return [a.astype(np.float32) for a in (f.tokens, f.left, f.right, f.roots)]


class OnnxRunner:
    """j: the model exported by ``export_onnx`` (standard ONNX: recursion as loops over the
    levels of the call trees) run by onnxruntime. Inference only."""

    trains = False

    def __init__(self, model):
        import onnxruntime

        from gluon_cf.export import export_onnx
        net = _RecursiveClassifier(clone_model(model))
        net.hybridize()
        exported = export_onnx(net, _EXAMPLE, dynamic_axes=_NODE_AXES)
        self.session = onnxruntime.InferenceSession(exported.SerializeToString(),
                                                    providers=['CPUExecutionProvider'])
        self.names = [i.name for i in self.session.get_inputs()]

    def infer(self, batch):
        return self.session.run(None, dict(zip(self.names, _forest_inputs(batch))))

    def train_step(self, batch):
        raise MethodUnavailable('an exported ONNX model is inference only')


class ArtifactRunner:
    """k: the model saved by ``save_artifact`` and run by ``gluon_cf.export.load`` (one
    function call at a time, on onnxruntime). Inference only."""

    trains = False

    def __init__(self, model):
        import tempfile

        from gluon_cf.export import load, save_artifact
        net = _RecursiveClassifier(clone_model(model))
        net.hybridize()
        with tempfile.TemporaryDirectory() as directory:
            path = directory + '/model.onnx'
            save_artifact(net, _EXAMPLE, path, dynamic_axes=_NODE_AXES)
            self.artifact = load(path)

    def infer(self, batch):
        return self.artifact(*_forest_inputs(batch))

    def train_step(self, batch):
        raise MethodUnavailable('an artifact is inference only')
