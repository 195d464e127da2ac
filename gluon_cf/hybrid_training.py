"""Training of a block holding a recursion with its gluon_cf nodes run in the calling thread
(NOTE [recursion training in the calling thread]): which calls may, and the node recorded as
one autograd node whose backward is the Custom operator's."""
import mxnet as mx

from . import executor, node as _node, registry, remat_record
from .executor import done

INLINE = [True]   # NOTE [recursion training in the calling thread] (False: to measure, tests)
RUNS = [0]        # nodes run so (for tests, tools)
_REQS = {0: "null", 1: "write", 2: "inplace", 3: "add"}   # MXNet's OpReqType


# NOTE [recursion training in the calling thread]
#     Training, a hybridized block's graph runs as one CachedOp in which the outermost gluon_cf
#     node is MXNet's Custom operator (NOTE [recursion inference in the calling thread] in
#     hybrid_inline.py says what that costs before the first group call); its forward runs on
#     a Custom-op thread, which copies its outputs into MXNet's arrays, and the caller's thread
#     and that one take turns holding the GIL. So a recorded call in train mode of a graph
#     that inference would run in the calling thread (a recursion, no random numbers, no user
#     CustomOp; not a rematerialised node) runs partitioned as inference does, the ordinary
#     operators as CachedOp segments recorded on the caller's tape, and each top-level node
#     as the Custom operator would run it (``node._NodeOperator``, the same object and code):
#     on aliases (``detach``) of its inputs, its float inputs marked, its forward recorded on
#     a tape of its own (the planned backward handed to it, NOTE [planned backward] in
#     recursion/planned_backward.py). Its outputs, aliases again, are recorded on the
#     caller's tape as one autograd node (``remat_record.record_node``) whose backward is
#     the Custom operator's ``backward`` with MXNet's requests, on MXNet's thread as the
#     Custom operator's: the same gradients, written or added alike, the inputs MXNet asks
#     a gradient for re-marked by a re-run forward as there. That backward reads the inputs
#     themselves (a Custom operator gets copies of MXNet's arrays with engine variables of
#     their own, guarded by its operator's dependencies), and pushes its operators only when
#     MXNet's engine runs it: a ``Trainer.step`` pushed after ``backward()`` would come
#     first in a parameter's queue (the update waiting for the gradient, the backward's read
#     of the parameter waiting for the update: a hang). So ``backward()`` waits for the
#     engine while such a node is alive, as for eager remat's nodes (NOTE [a remat backward
#     reads what it recomputes from] in remat_record.py). A call whose run raises anything
#     runs again as the CachedOp (what the first attempt recorded reaches no output); one
#     whose backward never runs drops the node with its outputs.
def training_inline():
    """Whether this call is a training the batching executor runs in the calling thread (NOTE
    above): recording, train mode."""
    return mx.autograd.is_recording() and mx.autograd.is_training() \
        and executor.get_executor() == "batched" and INLINE[0]


def training_graph(js):
    """Whether a block's graph (JSON ``js``) that inference runs in the calling thread may
    train so (NOTE above): none of its top-level nodes is rematerialised."""
    for n in js["nodes"]:
        kind = registry.kind_of(n)
        if kind:
            rule, node = registry.rule_of(kind), registry.decode(kind, n["attrs"]["spec"])
            rematerialised = getattr(rule, "rematerialised", None)
            if rematerialised is not None and rematerialised(node):
                return False
    return True


def run_recorded(rule, node, inputs, out_shapes):
    """A top-level node's outputs, run as its Custom operator would run them (NOTE above),
    recorded on the caller's tape as one node (a generator, as a rule's forward)."""
    op = _node._NodeOperator(rule, node, out_shapes)
    in_data = [x.detach() for x in inputs]
    op.forward_done = op.backward_done = False
    op._refuse_training()
    op.is_train = True
    marks = op._default_marks(in_data)
    with mx.autograd.pause():   # (the node's own tape: _run records what it marks)
        heads, written, planned = op._run(in_data, True, marks)
    op.saved = (in_data, heads, marks, written, planned)
    op.forward_done = True
    outputs = remat_record.fresh([o for o, _, _ in heads])

    def backward(out_grads, in_grads, reqs):
        # New aliases, unmarked, as MXNet gives a Custom operator's backward: one re-running
        # the forward marks what MXNet asks. The head gradients stand for the outputs (their
        # shapes and dtypes: a re-run's scratch arrays): held here, the outputs would keep
        # the node alive, and this, for good.
        op.backward([_REQS[r] for r in reqs], out_grads, [x.detach() for x in inputs],
                    out_grads, in_grads, [])

    remat_record.record_node(inputs, outputs, backward, writes=True)
    RUNS[0] += 1
    return done(outputs)

