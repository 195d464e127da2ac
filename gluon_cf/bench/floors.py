"""Methods g and l of ``python -m gluon_cf.bench``: MXNet's compute floors for a level-batched
forest (per level one hybridized cell call on preallocated inputs, nothing else), whose values
are not the model's (not checked)."""
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from gluon_cf.bench.baselines import _as_tuple, _GluonRunner


class _FloorCall(gluon.HybridBlock):
    """One cell function (`leaf` or `combine`) as its own hybridized call."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def hybrid_forward(self, F, *inputs):
        return self.fn(*inputs)


class FloorRunner(_GluonRunner):
    """g: what a level-batched forest costs at least in MXNet: per level one hybridized cell
    call on ready, preallocated inputs of that level's size (views of buffers allocated once),
    no gathering, scattering, index uploads or scheduling; leaves one `leaf` call on embedded
    rows. Its values are not the model's (children are not their own children's states), so it
    is not checked; training differentiates the sum of every call's outputs."""

    checked = False

    def __init__(self, model):
        super().__init__(model)
        self._leaf = _FloorCall(self.model.cell.leaf)
        self._combine = _FloorCall(self.model.cell.combine)
        self._leaf.hybridize(static_alloc=True)
        self._combine.hybridize(static_alloc=True)
        self._grow(4096)

    def _grow(self, rows):
        cfg = self.model.config
        self._rows = rows
        rng = np.random.RandomState(0)
        self._x = mx.nd.array(rng.uniform(-0.1, 0.1, (rows, cfg.embed_size)))
        self._states = [mx.nd.array(rng.uniform(-0.1, 0.1, (rows, cfg.hidden_size)))
                        for _ in range(self.model.num_states)]

    def _levels(self, batch):
        """The forest's levels, the buffers grown to hold the widest."""
        levels = batch.forest.levels()
        if max(len(level) for level in levels) > self._rows:
            self._grow(2 * max(len(level) for level in levels))
        return levels

    def _calls(self, batch):
        levels = self._levels(batch)
        outputs = [_as_tuple(self._leaf(self._x[:len(levels[0])]))]
        for nodes in levels[1:]:
            children = [s[:len(nodes)] for s in self._states]
            outputs.append(_as_tuple(self._combine(*children, *children)))
        return outputs

    def root_states(self, batch):
        return self._calls(batch)[-1][0][:batch.size]

    def train_step(self, batch):
        with autograd.record():
            outputs = self._calls(batch)
            loss = mx.nd.add_n(*[o.sum() for out in outputs for o in out])
        loss.backward()
        self.trainer.step(1, ignore_stale_grad=True)
        return loss


class FloorWithInputGradsRunner(FloorRunner):
    """l: g whose cell calls' inputs need gradients in training, as in any training of the
    tree model (a node's gradient reaches its children's states, a leaf's its embedded rows):
    every call's inputs are marked as variables with gradient buffers of their own (views of
    buffers allocated once), so each call's backward computes its inputs' gradients too, which
    g's skips. Still no gathering, scattering or adding up of those gradients: a floor for
    training that e must compute at least; in inference it is g."""

    def _grow(self, rows):
        super()._grow(rows)
        # Right children read buffers of their own: two views of one array marked as two
        # variables would share one gradient.
        self._right = [s.copy() for s in self._states]
        self._grads = [mx.nd.zeros(a.shape) for a in [self._x] + self._states + self._right]

    def _calls(self, batch):
        if not autograd.is_recording():
            return super()._calls(batch)
        levels = self._levels(batch)
        x = self._x[:len(levels[0])]
        autograd.mark_variables([x], [self._grads[0][:len(levels[0])]])
        outputs = [_as_tuple(self._leaf(x))]
        for nodes in levels[1:]:
            n = len(nodes)
            children = [s[:n] for s in self._states + self._right]
            autograd.mark_variables(children, [g[:n] for g in self._grads[1:]])
            outputs.append(_as_tuple(self._combine(*children)))
        return outputs
