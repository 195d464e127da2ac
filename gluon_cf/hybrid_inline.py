"""Inference of a block holding a recursion, run in the calling thread rather than as the
block's CachedOp (NOTE [recursion inference in the calling thread]): which graphs and which
calls may, and the switch and counters tests and tools read."""
import json

import mxnet as mx

from . import executor, registry
from .graph.decoded import holds_random_ops, holds_recursion, nodes_of_spec
from .graph.partitioned import UndeclaredShape
from .errors import created_at
from .node import name_node
from .operators import is_random_op

INLINE = [True]   # NOTE [recursion inference in the calling thread] (False: to measure)
INLINE_RUNS = [0]     # calls run in the calling thread (for tests, tools)
INLINE_FAILED = [0]   # of which failed and were run again by the CachedOp (for tests)
# the attribute of an error of a block's run in the calling thread: the gluon_cf nodes that
# were running, one or those of a step run side by side (NOTE [a failure lost to another
# thread]; set by hybrid.py's run_partitioned)
FAILED_NODE = "_gluon_cf_failed_nodes"
# the attribute of an error raised by not_lost: raised from the block's call, its traceback
# starting there (as one read from the outputs starts at the user's read)
RAISED_AT_CALL = "_gluon_cf_raised_at_call"


# NOTE [recursion inference in the calling thread]
#     Run as the block's CachedOp, a graph's outermost gluon_cf node is an MXNet Custom
#     operator: MXNet infers the whole graph's shapes for every new input shape (tree models see
#     one with every forest: our Python shape rules called back), plans its static memory
#     again, creates the operator (Python again) and hands its forward to a Custom-op thread,
#     which copies the node's outputs into MXNet's arrays; that thread and the caller then take
#     turns holding Python's GIL. For a recursion, this host time comes before its first group
#     call, while MXNet's engine has nothing to compute (README, issue 28, session 25: TreeLSTM
#     batch 1 inference, ~1 ms of CPU per batch of ~5). So a call that records nothing, in
#     predict mode, with the batching executor, of a graph holding a recursion node and drawing
#     no random numbers (a node's thread draws them from the caller's seed, NOTE [the caller's
#     seed] in node.py) and holding no user CustomOp, runs partitioned (NOTE [partitioned
#     blocks]): the ordinary operators as CachedOp segments, the nodes by their rules in the
#     calling thread, as a graph of run-time shapes always runs. The values are the rules' own
#     either way. Errors are left to the CachedOp: a call that raises anything runs again as
#     the CachedOp (nothing recorded, nothing random: the same values or the same error, at
#     the user's line, in its words). Training keeps the Custom operator, whose forward the
#     planned backward needs (NOTE [planned backward] in recursion/planned_backward.py), and
#     so does a call with a sparse input or parameter, of which the Custom operator gives a
#     node dense copies (NOTE [sparse inputs of a node]; inline, a csr array reached the
#     rules and failed on every call, each run twice).
#
# NOTE [declared shapes in the calling thread]
#     The CachedOp infers every node's output shapes and dtypes from its rules (for the whole
#     graph, statically: both branches of a cond, whichever runs), allocates the outputs so,
#     and the node's forward refuses a value of another shape ("output 0 has shape (1, 1, 12)
#     at run time, but its shape rule declared (1, 1, 3)": a recursion whose output grows with
#     the tree). Run in the calling thread, nothing inferred or allocated them: one root's call
#     gave the eager value while training and the Custom operator refused it, and a float64
#     forest of leaves alone (float32 parameters) its float64 value where they refused the
#     cond's branches' dtypes (review round 25i). So each node of the block's own graph has
#     its outputs checked against its rules' shapes and dtypes for its inputs' (TreeLSTM batch
#     5 inference: ~0.15 ms of the calling thread's CPU a batch, of ~3.5); a rule's refusal
#     or a difference (``UndeclaredShape``) fails the attempt and the CachedOp's run gives its
#     error (or, for a dtype, its cast value). With every node's outputs as declared, the
#     segments see the shapes and dtypes MXNet's whole-graph inference would have given them,
#     so a call that inference refuses fails inline too (in a segment's inference).
def inline_inference_graph(js):
    """Whether a block's graph runs its nodes in the calling thread in inference (NOTE
    [recursion inference in the calling thread]): it holds a recursion node (at the top or in a
    node's subgraphs), and neither it nor a node's subgraph draws random numbers or holds a
    user's CustomOp."""
    nodes = js["nodes"]
    if any(registry.is_user_custom(n) or is_random_op(n["op"]) for n in nodes):
        return False
    found = False
    for n in nodes:
        if registry.kind_of(n):
            spec = json.loads(n["attrs"]["spec"])
            if holds_random_ops(spec) or any(registry.is_user_custom(m)
                                             for m in nodes_of_spec(spec)):
                return False
            found = found or holds_recursion(n)
    return found


def inference_inline():
    """Whether this call is an inference the batching executor runs (NOTE [recursion
    inference in the calling thread]): nothing recorded, predict mode."""
    return not mx.autograd.is_recording() and not mx.autograd.is_training() \
        and executor.get_executor() == "batched" and INLINE[0]


def inputs_ready(cargs):
    """Wait for the inputs ``cargs`` of a call about to run in the calling thread; an input's
    failure is raised at the call (NOTE [an input's failure read in the calling thread]).

    NOTE [an input's failure read in the calling thread]
        The output of a failed call (another block's recursion past its ``max_depth``) carries
        the failure in MXNet's engine, and the first read raises it and clears it (MXNet's
        ``ThrowException``; NOTE [failures carried by the outputs] in failed_calls.py). Run in
        the calling thread, the call read that input and raised its failure, and was then run
        again as the CachedOp (NOTE [recursion inference in the calling thread]), whose Custom
        operator read the input's unwritten memory as a value, the failure gone: the call
        raised its own node's error instead of the input's (``other(g(x))``: other's
        max_depth=6 for g's max_depth=3 in 1-3 of 12 calls), or, where that memory made the
        recursion end, returned the value behind the first error. So the inputs are waited
        for first; an input's failure is the call's error, and nothing runs on that input."""
    for array in cargs:
        try:
            array.wait_to_read()
        except Exception as err:
            setattr(err, RAISED_AT_CALL, True)
            raise


def not_lost(outputs, inline_error, graph_json):
    """``outputs`` of the CachedOp's run of a call whose run in the calling thread raised
    ``inline_error`` (None: it did not run so), the block's graph ``graph_json``; NOTE [a
    failure lost to another thread].

    NOTE [a failure lost to another thread]: MXNet 1.9.1 keeps one failure of its Custom
    operators at a time: two calls failing at once from two threads (a forest with a cycle
    each, RecursionDepthError) lose one failure, whose outputs are left unwritten and read as
    values (whatever the memory held), and the other's error may be raised by a third call
    (NOTE [failed calls read later] in errors.py). A call that failed in the calling thread
    with one of gluon_cf's own errors (not ``UndeclaredShape``, where the Custom operator
    casts or refuses otherwise) fails as the Custom operator too: its outputs are waited for
    here, so that the Custom operator's error is raised by this call, and when none comes (the
    failure was lost, or raised elsewhere), the error of the calling thread's run is raised,
    never the unwritten outputs (round 26r: 3 of 48 calls of 6 threads returned values). In a
    graph of several gluon_cf nodes too (a cond after the recursion's loop, two recursions:
    review round 26r, values of unwritten memory for 2 of 144 calls of 8 threads, where round
    26r covered one node only); the error names the node that failed, as the Custom
    operator's does (``FAILED_NODE``, set by the block's partitioned run)."""
    nodes = [n for n in graph_json["nodes"] if registry.kind_of(n)]
    if inline_error is None or not nodes or isinstance(inline_error, UndeclaredShape) \
            or type(inline_error).__module__.partition(".")[0] != "gluon_cf":
        return outputs     # (none, or not known to fail alike: the Custom operator's outcome)
    pending = [outputs]
    while pending:
        value = pending.pop()
        if isinstance(value, (list, tuple)):
            pending.extend(value)
            continue
        try:
            value.wait_to_read()   # (the Custom operator's own error, if it reaches this call)
        except Exception as err:
            setattr(err, RAISED_AT_CALL, True)
            raise
    setattr(inline_error, RAISED_AT_CALL, True)
    # (named as the Custom operator's error names its node)
    failed = getattr(inline_error, FAILED_NODE, None) or (
        [registry.decode(registry.kind_of(nodes[0]), nodes[0]["attrs"]["spec"])]
        if len(nodes) == 1 else [])
    if len(failed) == 1:
        name_node(inline_error, failed[0])
    elif failed and len(inline_error.args) == 1 and isinstance(inline_error.args[0], str):
        inline_error.args = ("%s\n(in one of the gluon_cf nodes run side by side: %s)" % (
            inline_error.args[0], ", ".join("%r%s" % (n.spec.get("node"), created_at(n))
                                            for n in failed)),)
    raise inline_error.with_traceback(None)
