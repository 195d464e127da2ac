"""The CachedOps that run every subgraph."""
import mxnet as mx


class CachedOpPair:
    """Two CachedOps of one symbol: static memory for inference, dynamic under autograd.

    A ``static_alloc`` CachedOp reuses its buffers from call to call, which is what makes it fast
    but also makes it unsafe to call again while an earlier recorded call still awaits backward
    (seen here: wrong gradients when a forward is recomputed in backward). So recorded calls use
    a CachedOp without static memory.
    """

    def __init__(self, symbol):
        self.static = mx.nd.CachedOp(symbol, flags=[("static_alloc", True)])
        self.dynamic = mx.nd.CachedOp(symbol)

    def __call__(self, *args):
        op = self.dynamic if mx.autograd.is_recording() else self.static
        return op(*args)
