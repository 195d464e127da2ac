"""The CachedOps that run every subgraph."""
import math
import threading

import mxnet as mx
import numpy as np

# How many input-shape signatures a CachedOpPair keeps a CachedOp for (per mode).
SHAPES_KEPT = 64
# Bytes of static_alloc buffers all CachedOpPairs of the process may keep (estimated).
STATIC_BYTES = 256 << 20

_static = {"bytes": 0, "lock": threading.Lock()}


class CachedOpPair:
    """CachedOps of one symbol, one per input-shape signature, for plain and recorded calls.

    A CachedOp re-infers shapes and re-plans its graph whenever the input shapes differ from its
    previous call, which costs twice a call with known shapes. Inside a batch the row count
    changes from call to call, so a signature seen twice gets a CachedOp of its own (the
    ``SHAPES_KEPT`` most recently used are kept), which then always sees the same shapes;
    a signature seen once runs in a shared CachedOp (creating one costs about ten calls).

    Plain (not recorded) calls of a signature's own CachedOp use ``static_alloc`` and
    ``static_shape``, the fast path, as long as their buffers fit in ``STATIC_BYTES`` for the
    whole process (estimated from the shapes of the graph's internal values); beyond that they
    allocate per call. Recorded calls never use static memory: a ``static_alloc`` CachedOp
    gives wrong gradients when called again before backward (seen here: a forward recomputed in
    backward). Recorded calls use a copy of the symbol whose outputs are multiplied by 1; see
    :func:`_no_gradient_passthrough`.

    MXNet refuses to build a CachedOp for a graph without inputs (a ``cond`` branch returning
    constants, MXNet issue 12154); such a graph runs in a bound executor, its outputs copied out.
    """

    def __init__(self, symbol):
        self.constant = not symbol.list_inputs()
        if self.constant:
            self.executor = symbol.bind(mx.current_context(), {})
        else:
            self.symbols = (symbol, _no_gradient_passthrough(symbol))
            self.shared = tuple(mx.nd.CachedOp(s) for s in self.symbols)
            self.ops = ({}, {})   # plain, recorded: input shapes -> (CachedOp, static bytes)
            self.seen = (set(), set())

    def __call__(self, *args):
        if self.constant:
            outputs = self.executor.forward(is_train=mx.autograd.is_training())
            return [o.copy() for o in outputs]
        recorded = int(mx.autograd.is_recording())
        ops = self.ops[recorded]
        key = tuple(a.shape for a in args)
        entry = ops.pop(key, None)
        if entry is None:
            seen = self.seen[recorded]
            if key not in seen:
                if len(seen) >= 16 * SHAPES_KEPT:
                    seen.clear()
                seen.add(key)
                return self.shared[recorded](*args)
            if len(ops) >= SHAPES_KEPT:
                _release(ops.pop(next(iter(ops)))[1])   # the least recently used
            entry = self._create(recorded, args)
        ops[key] = entry   # (re)inserted last: most recently used
        return entry[0](*args)

    def _create(self, recorded, args):
        symbol = self.symbols[recorded]
        size = 0 if recorded else _static_size(symbol, args)
        with _static["lock"]:
            static = not recorded and _static["bytes"] + size <= STATIC_BYTES
            if static:
                _static["bytes"] += size
        flags = [("static_alloc", True), ("static_shape", True)] if static else []
        return mx.nd.CachedOp(symbol, flags=flags), size if static else 0


def _static_size(symbol, args):
    """Estimated bytes of the static buffers of ``symbol`` for inputs ``args``."""
    shapes = {name: a.shape for name, a in zip(symbol.list_inputs(), args)}
    _, out_shapes, _ = symbol.get_internals().infer_shape_partial(**shapes)
    itemsize = max(np.dtype(a.dtype).itemsize for a in args)
    return itemsize * sum(math.prod(s) for s in out_shapes or [] if s)


def _release(size):
    with _static["lock"]:
        _static["bytes"] -= size


def _no_gradient_passthrough(symbol):
    """``symbol`` with every output multiplied by 1.

    MXNet 1.9's CachedOp backward fails ("storage_type_num_unknown_nodes") when the call is chained
    (a loop body's outputs fed to its next call) and an input's gradient is an output gradient
    passed straight through (``s + y`` hands the gradient of the sum to ``s`` and ``y`` as is).
    ``out * 1`` makes every output gradient go through a real operator. Values are unchanged.
    """
    outputs = [symbol[i] for i in range(len(symbol.list_outputs()))]
    return mx.sym.Group([o * 1 for o in outputs])
