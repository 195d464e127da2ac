"""The CachedOps that run every subgraph."""
import mxnet as mx


class CachedOpPair:
    """Two CachedOps of one symbol: static memory for inference, dynamic under autograd.

    A ``static_alloc`` CachedOp reuses its buffers from call to call, which is what makes it fast
    but also makes it unsafe to call again while an earlier recorded call still awaits backward
    (seen here: wrong gradients when a forward is recomputed in backward). So recorded calls use
    a CachedOp without static memory.

    The recorded CachedOp multiplies every output by 1; see :func:`_no_gradient_passthrough`.

    MXNet refuses to build a CachedOp for a graph without inputs (a ``cond`` branch returning
    constants, MXNet issue 12154); such a graph runs in a bound executor, its outputs copied out.
    """

    def __init__(self, symbol):
        self.symbol = symbol
        self.constant = not symbol.list_inputs()
        if self.constant:
            self.executor = symbol.bind(mx.current_context(), {})
        else:
            self._build()

    def _build(self):
        self.static = mx.nd.CachedOp(self.symbol, flags=[("static_alloc", True)])
        self.dynamic = mx.nd.CachedOp(_no_gradient_passthrough(self.symbol))

    def __call__(self, *args, out=None):
        """The outputs; ``out``: arrays (views too) the outputs are written into instead."""
        if self.constant:
            outputs = self.executor.forward(is_train=mx.autograd.is_training())
            if out is not None:
                for dst, value in zip(out, outputs):
                    dst[:] = value
                return out
            return [o.copy() for o in outputs]
        op = self.dynamic if mx.autograd.is_recording() else self.static
        try:
            return op(*args) if out is None else op(*args, out=out)
        except mx.MXNetError:
            # A CachedOp whose shape inference failed keeps half of its state: the next call
            # fails otherwise ("Graph attr dependency shape is required by pass
            # MXPlanMemory"), whatever its inputs. Fresh ones: every call fails or works
            # alike, whatever came before.
            self._build()
            raise


def _no_gradient_passthrough(symbol):
    """``symbol`` with every output multiplied by 1.

    MXNet 1.9's CachedOp backward fails ("storage_type_num_unknown_nodes") when the call is chained
    (a loop body's outputs fed to its next call) and an input's gradient is an output gradient
    passed straight through (``s + y`` hands the gradient of the sum to ``s`` and ``y`` as is).
    ``out * 1`` makes every output gradient go through a real operator. Values are unchanged.
    """
    outputs = [symbol[i] for i in range(len(symbol.list_outputs()))]
    return mx.sym.Group([o * 1 for o in outputs])


# NOTE [an input returned as an output]
#     A hybridized block's graph holding a Custom operator (a gluon_cf node, MXNet's own
#     ``F.contrib.cond`` as well) whose output is one of the block's inputs as it is
#     (``return out, h``, a state passed through), recorded: when that output's gradient
#     reaches backward and the input needs none, MXNet 1.9.1's CachedOp backward fails its
#     own check ("storage_type_num_unknown_nodes (1 vs. 0)", naming no line), where the same
#     block eagerly, or without the node, trains. The block's CachedOp is built from its graph
#     with such heads copied (``identity``): a real operator between the input and the output,
#     as MXNet's check needs; values and gradients unchanged (round 26r). Its graph, exported
#     and inspected, stays the user's.
#     An auxiliary state returned (``self.bn.running_mean``) is not copied: the copy is not
#     ordered after the BatchNorm updating the state in place, and returned the value before
#     the update, where eagerly and in MXNet's CachedOp it is the updated one (review round
#     26r); an auxiliary state never needs a gradient, and MXNet's backward takes it as it is.
def copied_variable_heads(symbol):
    """``symbol`` with every output that is a variable, but an auxiliary state, copied through
    ``identity``, or None when none is (NOTE [an input returned as an output])."""
    outputs = [symbol[i] for i in range(len(symbol.list_outputs()))]
    aux = set(symbol.list_auxiliary_states())

    def copied(o):
        return o.get_children() is None and o.name not in aux
    if not any(copied(o) for o in outputs):
        return None
    return mx.sym.Group([mx.sym.identity(o) if copied(o) else o for o in outputs])
