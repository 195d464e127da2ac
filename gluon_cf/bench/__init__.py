"""Benchmark of recursive tree models: trees/second per model, mode, batch size and method.

Run it with ``python -m gluon_cf.bench [--quick | --smoke] [--methods a,c,d,f] [--plot PATH]``.

A method is a name, a label and a builder, kept in `METHODS` by `register_method`. The harness
calls ``builder(model)`` once per model with a `baselines.TreeModel` holding the shared weights
(the builder must not modify it; `baselines.clone_model` gives a private copy) and gets a runner:

    runner.infer(batch)       -> (root states (B, H), logits (B, C)); numpy, NDArray or tensor
    runner.train_step(batch)  -> loss; forward + backward + one SGD step

`batch` is a `baselines.Batch` (`trees`, `forest`, `labels`). A builder that cannot run here
raises `baselines.MethodUnavailable` and the method is skipped with its reason. Before timing,
every method's root states and logits are checked against method 'a' on one mini-batch, but for
a runner with ``checked = False`` (the compute floor, whose values are not the model's); a
runner with ``trains = False`` is timed in inference only.

Adding a method is one line in the registration block at the end of this file.
"""
from collections import namedtuple

Method = namedtuple('Method', ['name', 'label', 'builder'])

METHODS: dict = {}


def register_method(name, label, builder):
    """Register (or replace) benchmark method `name` (a short identifier, shown as a column)
    with a `label` for the tables and figure and a `builder`: ``builder(model)`` gets a
    ``baselines.TreeModel`` holding the shared weights and returns a runner with
    ``infer(batch)`` and ``train_step(batch)``, or raises ``baselines.MethodUnavailable``.

    Example (a builder gets the shared model and returns a runner)::

        >>> from gluon_cf.bench import METHODS, register_method
        >>> class Mine:
        ...     def __init__(self, model):
        ...         self.model = model
        >>> register_method("z", "my method", Mine)
        Method(name='z', label='my method', builder=<class '...Mine'>)
        >>> del METHODS["z"]
    """
    if not (isinstance(name, str) and name.isidentifier()):
        raise ValueError(f'register_method: name must be a short identifier such as "e", '
                         f'got {name!r}')
    METHODS[name] = Method(name, label, builder)
    return METHODS[name]


# Registration block: the benchmark plan's methods in order.
from gluon_cf.bench import baselines, floors  # noqa: E402

register_method('a', 'eager per-node (Gluon)', baselines.EagerRunner)
register_method('b', 'gluon_cf hybridized, unbatched executor', baselines.GluonCfUnbatchedRunner)
register_method('c', 'iterative post-order loop (Gluon)', baselines.IterativeRunner)
register_method('d', 'hand-written level batching (Gluon)', baselines.LevelBatchedRunner)
register_method('e', 'gluon_cf hybridized, batching executor', baselines.GluonCfBatchedRunner)
register_method('f', 'eager per-node (PyTorch)', baselines.TorchRunner)
register_method('g', 'compute floor: the cell calls of each level only (MXNet)',
                floors.FloorRunner)
register_method('h', 'level batching in numpy (inference)', baselines.NumpyRunner)
register_method('i', 'gluon_cf hybridized, batching executor, dynamic schedules only',
                baselines.GluonCfDynamicRunner)
register_method('j', 'exported standard ONNX in onnxruntime (inference)', baselines.OnnxRunner)
register_method('k', 'exported artifact in gluon_cf.export.load (inference)',
                baselines.ArtifactRunner)
register_method('l', 'compute floor whose cell inputs need gradients in training (MXNet)',
                floors.FloorWithInputGradsRunner)
