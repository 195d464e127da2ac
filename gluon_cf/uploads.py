"""Host arrays handed to MXNet without a round trip through its engine.

NOTE: [Uploads]
Host arrays (a mini-batch's forest, a level's indices, the labels) go to MXNet by `to_nd`:
`mx.nd.from_numpy` of a fresh copy, zero-copy, not `mx.nd.array`. The latter writes into a new
NDArray by `SyncCopyFromCPU`, whose `WaitToWrite` pushes an empty operation to the engine and
waits for it: a round trip through the engine's threads per array, 170-240 us of CPU here and
~0.5 ms of wall time on a loaded machine (py-spy), so the benchmark measured MXNet's upload
path rather than the methods (d uploads four arrays per level, e four per mini-batch, g none),
and the training loop of gluon_cf.models.train paid it five times per mini-batch. The copy
keeps the caller's array writable (`from_numpy` marks the array it is given read-only) and
costs a few microseconds.
"""
import mxnet as mx
import numpy as np

__all__ = ['to_nd']


def to_nd(values, dtype='float32'):
    """An NDArray (CPU) holding a copy of host `values` (NOTE: [Uploads]); float32 as
    `mx.nd.array`'s default."""
    return mx.nd.from_numpy(np.array(values, dtype=dtype), zero_copy=True)
