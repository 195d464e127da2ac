"""The CachedOps that run every subgraph."""
import mxnet as mx

# How many input-shape signatures a CachedOpPair keeps a CachedOp for (per mode).
SHAPES_KEPT = 64


class CachedOpPair:
    """CachedOps of one symbol, one per input-shape signature, for plain and recorded calls.

    A CachedOp re-infers shapes and re-plans its graph whenever the input shapes differ from its
    previous call, which costs as much as the call itself. Inside a batch the row count changes
    from call to call, so a CachedOp is kept per signature (the last ``SHAPES_KEPT``); each
    then always sees the same shapes.

    Only the first signature of plain (not recorded) calls gets ``static_alloc`` memory, which is
    the fast path of the common case of one signature (a loop body, an unbatched branch); with
    it for every signature, its buffers would be kept for each. Recorded calls never use it: a
    ``static_alloc`` CachedOp gives wrong gradients when called again before backward (seen
    here: a forward recomputed in backward). Recorded calls use a copy of the symbol whose
    outputs are multiplied by 1; see :func:`_no_gradient_passthrough`.

    MXNet refuses to build a CachedOp for a graph without inputs (a ``cond`` branch returning
    constants, MXNet issue 12154); such a graph runs in a bound executor, its outputs copied out.
    """

    def __init__(self, symbol):
        self.constant = not symbol.list_inputs()
        if self.constant:
            self.executor = symbol.bind(mx.current_context(), {})
        else:
            self.symbols = (symbol, _no_gradient_passthrough(symbol))
            self.ops = ({}, {})   # plain, recorded: input shapes -> CachedOp
            self.has_static = False

    def __call__(self, *args):
        if self.constant:
            outputs = self.executor.forward(is_train=mx.autograd.is_training())
            return [o.copy() for o in outputs]
        recorded = int(mx.autograd.is_recording())
        ops = self.ops[recorded]
        key = tuple(a.shape for a in args)
        op = ops.get(key)
        if op is None:
            if len(ops) >= SHAPES_KEPT:
                del ops[next(iter(ops))]   # the oldest signature
            static = not recorded and not self.has_static
            self.has_static = self.has_static or static
            op = ops[key] = mx.nd.CachedOp(self.symbols[recorded],
                                           flags=[("static_alloc", True)] if static else [])
        return op(*args)


def _no_gradient_passthrough(symbol):
    """``symbol`` with every output multiplied by 1.

    MXNet 1.9's CachedOp backward fails ("storage_type_num_unknown_nodes") when the call is chained
    (a loop body's outputs fed to its next call) and an input's gradient is an output gradient
    passed straight through (``s + y`` hands the gradient of the sum to ``s`` and ``y`` as is).
    ``out * 1`` makes every output gradient go through a real operator. Values are unchanged.
    """
    outputs = [symbol[i] for i in range(len(symbol.list_outputs()))]
    return mx.sym.Group([o * 1 for o in outputs])
