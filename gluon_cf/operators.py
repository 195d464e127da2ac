"""What gluon_cf knows about MXNet's operators, by operator name, and how it names them.

Operator sets that change how gluon_cf treats a graph (value-dependent shapes, auxiliary state,
index inputs), the hidden attribute that records where the user created a node (NOTE [source
locations] in ``tracing.py``) and how that place is found (``user_location``), and the
messages that name an operator. Per-operator row rules
for batching are in ``rowwise.py``.
"""
import functools
import os
import sys
import types
from typing import Optional

import mxnet as mx

SOURCE_ATTR = "__gcf_src__"

# MXNet 1.9.1's operators whose output shape depends on input values (found by their names in
# MXNet's operator registry): their outputs have shapes known only at run time (NOTE [run-time
# shapes] in graph/shape_inference.py).
DYNAMIC_SHAPE_OPS = frozenset({"_contrib_boolean_mask", "_npi_boolean_mask", "_npi_nonzero",
                               "_npx_nonzero", "_npi_unique"})

# Inputs of such operators that carry no gradient (a mask's values only select rows). MXNet
# 1.9.1's boolean_mask backward never writes its index's gradient: where that index is also
# used elsewhere (``count = F.sum(m)``), autograd adds the unwritten buffer, so eagerly (and
# when gluon_cf runs the operator on its own) the mask's gradient is uninitialised memory,
# where the hybridized graph gives 0. gluon_cf hands them over detached.
NO_GRADIENT_INPUTS = {"_contrib_boolean_mask": (1,), "_npi_boolean_mask": (1,)}

# Inputs whose gradient such an operator gets wrong when added into (grad_req 'add' on the
# array passed): MXNet 1.9.1's boolean_mask backward launches its kAddTo kernel once per row
# where it reads one element per thread, so only the first rows' first elements are added
# (x.grad [1, 0, 0, 0, 0] where [1, 0, 1, 0, 1]). gluon_cf hands them over through a copy,
# whose gradient the operator writes and the copy adds.
NO_ADDED_GRADIENT_INPUTS = {"_contrib_boolean_mask": (0,), "_npi_boolean_mask": (0,)}

# The rank of such an operator's output: that of its input "data", or a fixed number. Lets a
# shape rule catch cond branches that disagree in rank before anything runs.
DYNAMIC_SHAPE_RANKS = {"_contrib_boolean_mask": "data", "_npi_boolean_mask": "data",
                       "_npi_nonzero": 2, "_npx_nonzero": 2, "_npi_unique": 1}


# Operators that update auxiliary state (running statistics) in training. Inside a node, MXNet
# neither writes the update back (a model trained hybridized predicts with stale statistics) nor
# finishes cleanly (the process may hang at exit), so training through them is refused: when
# the body is traced in training mode, else when a node runs a training forward (node.py).
# Inference and export read the statistics only, and work.
AUX_STATE_OPS = frozenset({"BatchNorm", "BatchNorm_v1", "SyncBatchNorm", "_contrib_SyncBatchNorm",
                           "_contrib_BatchNormWithReLU"})


def updates_aux_state(node):
    """Whether a JSON node updates auxiliary state in training: an operator of AUX_STATE_OPS
    not told ``use_global_stats`` (which normalizes by the running statistics and leaves them
    as they are, eagerly too: a frozen BatchNorm in a loop body trains hybridized)."""
    return node["op"] in AUX_STATE_OPS and node.get("attrs", {}).get(
        "use_global_stats", "False") not in ("True", "true", "1")

# Operators whose listed inputs are indices, with no gradient defined (MXNet refuses to compute
# one).
INDEX_INPUTS = {"Embedding": (0,), "_contrib_SparseEmbedding": (0,), "take": (1,),
                "batch_take": (1,), "pick": (1,), "gather_nd": (1,), "one_hot": (0,)}


# Operators that return their (first) input unchanged in shape: given a zero-size array (no
# element), their result is that array itself. MXNet 1.x refuses to run them on one (its
# legacy shapes read 0 as unknown: "Operator _copy inferring shapes failed"), so the zero-size
# calls of a graph (NOTE [zero-size calls] in graph/cached_graph.py) pass the array through:
# a cond branch returning an outer zero-size value (an identity), the rows of a loop of no
# step reversed for ``for o in reversed(items)``.
SAME_WHEN_EMPTY = frozenset({"_copy", "identity", "reverse", "flip", "BlockGrad",
                             "stop_gradient", "_NoGradient"})


# Inputs that, zero-size, make MXNet 1.9.1's operator take the process down (measured: a
# segmentation fault, or SIGFPE from a division by the zero rows) where others raise an
# MXNetError: the zero-size calls of a graph and the eager bodies of gluon_cf's ops refuse
# them before MXNet runs them (a ZeroSizeError naming the operator and the user's line).
# (SequenceReverse: SIGFPE; pick of zero-size data: a segmentation fault:
# tests/test_review_round20d.py; boolean_mask of a mask of no element, the data of no row:
# "terminate called without an active exception", tests/test_hostile_r30h.py)
CRASHES_ON_ZERO_SIZE = {"take": (0,), "slice_like": (1,), "Embedding": (1,),
                        "SequenceMask": (0,), "SequenceLast": (0,), "SequenceReverse": (0,),
                        "InstanceNorm": (0,), "pick": (0,), "_contrib_boolean_mask": (1,),
                        "boolean_mask": (1,)}


def crashing_zero_size(op, shapes):
    """The positions among ``shapes`` (an operator's input shapes) whose zero-size input
    would crash MXNet's ``op`` (CRASHES_ON_ZERO_SIZE)."""
    return [k for k in CRASHES_ON_ZERO_SIZE.get(op, ()) if k < len(shapes) and 0 in shapes[k]]


CRASH_DETAIL = "MXNet 1.9.1 would end the process on it: a segmentation fault or SIGFPE"


def describe_node(node):
    """``op at file:line (node 'name')`` for error messages (NOTE [source locations])."""
    where = node.get("attrs", {}).get(SOURCE_ATTR)
    return "%s%s (node %r)" % (node["op"], " at " + where if where else "", node["name"])


def aux_state_error(op, what):
    return NotImplementedError(
        "gluon_cf.%s: %s, whose running statistics would not be updated by hybridized training "
        "through a gluon_cf node (a model trained this way predicts differently from one "
        "trained eagerly), so training is refused. Inference works, and on the CPU training "
        "mode not recorded; to train, use LayerNorm or InstanceNorm inside the body, apply it "
        "outside the control flow, or run the block without hybridize()" % (op, what))


# NOTE [auxiliary state under remat]
#     A hybridized loop with remat whose body holds a BatchNorm (its running statistics are
#     auxiliary inputs, whether or not it uses them) deadlocks MXNet 1.9.1's engine when the
#     loop is recomputed in its backward: every engine thread idle, the gradient never written
#     (found in review, session 19: use_global_stats=True always, and a BatchNorm recorded with
#     train_mode=False once its backward was allowed). So its backward is refused in every
#     mode, and a recorded call (training or not: review r28bn) at the block's call and an
#     executor's backward, before MXNet can hang (training mode not recorded runs: no backward
#     comes; NOTE [training refused by the node]).
def remat_aux_error(op, nodes):
    return NotImplementedError(
        "gluon_cf.%s: %s inside a loop with remat: MXNet 1.9.1's engine deadlocks when the loop "
        "is recomputed in backward, so its gradient is refused; use remat=False for this loop, "
        "or LayerNorm in place of BatchNorm" % (op, ", ".join(describe_node(n) for n in nodes)))


def user_custom_op_error(op, what):
    return NotImplementedError(
        "gluon_cf.%s: %s; differentiating through a user CustomOp inside a "
        "hybridized gluon_cf node hangs MXNet 1.9.1's engine (NOTE [user CustomOps at run "
        "time]), so training is refused. Inference works; to train, run the block without "
        "hybridize() or write the op with MXNet operators" % (op, what))


_MXNET_DIR = os.path.dirname(os.path.abspath(mx.__file__)) + os.sep
_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_USER_DIRS = tuple(_OWN_DIR + d + os.sep for d in ("models", "bench"))  # our own "user" code


# NOTE [modules named like MXNet]
#     MXNet's modules are ``mxnet`` and ``mxnet.*``; a user's module whose name merely starts
#     with "mxnet" (``mxnet_utils``, a test package ``mxnet_suite``) is the user's code. Read as
#     MXNet's, its frames were skipped and errors named the line that called it (pytest's).


def is_mxnet_module(name: str) -> bool:
    """Whether the module named ``name`` is MXNet's (NOTE [modules named like MXNet])."""
    return name == "mxnet" or name.startswith("mxnet.")


def user_location(skip: int = 1, models_are_user: bool = True) -> Optional[str]:
    """``"file:line"`` of the innermost caller outside MXNet and gluon_cf's core, or None.
    ``models_are_user=False``: outside all of gluon_cf, its models and benchmark too (the
    line of the user who called one of our models)."""
    frame: Optional[types.FrameType] = sys._getframe(skip)
    while frame is not None:
        path = frame.f_code.co_filename
        # MXNet's operator functions are generated with exec() (file "<string>") in its modules.
        module = frame.f_globals.get("__name__") or ""
        # (a user's module named mxnet_* is the user's: NOTE [modules named like MXNet])
        if not is_mxnet_module(module) and not path.startswith(_MXNET_DIR) and (
                not path.startswith(_OWN_DIR) or (models_are_user and path.startswith(_USER_DIRS))):
            return "%s:%d" % (path, frame.f_lineno)
        frame = frame.f_back
    return None


def is_random_op(op):
    """Whether MXNet operator ``op`` draws random numbers (a node holding one is seeded so that
    a re-run forward or a remat recomputation draws the same numbers)."""
    return op in ("Dropout", "_contrib_dropout") or "random" in op or op.startswith("_sample")


def reshape_to_another_size(source, target):
    """What is wrong with a Reshape of a ``source``-shaped value to ``target`` when their
    numbers of elements differ (NOTE [a reshape to another size] in graph/cached_graph.py),
    else (or either unknown) None."""
    if not source or not target or 0 in source or 0 in target:
        return None
    have, want = _size(source), _size(target)
    if have == want:
        return None
    return "the target shape %s has %d elements, the source %s has %d" % (
        tuple(target), want, tuple(source), have)


def _size(shape):
    size = 1
    for d in shape:
        size *= int(d)
    return size


def reshaped_shape(attrs, source):
    """The shape MXNet's Reshape with ``attrs`` gives a value of shape ``source``; None when
    MXNet refuses it (its own error follows where the operator runs)."""
    return _reshaped_shape(tuple(sorted((str(k), str(v)) for k, v in attrs.items())),
                           tuple(source))


@functools.lru_cache(maxsize=1024)
def _reshaped_shape(attrs, source):
    try:
        _, outs, _ = mx.sym.Reshape(mx.sym.var("data"), **dict(attrs)).infer_shape_partial(
            data=source)
    except mx.MXNetError:
        return None
    return tuple(outs[0]) if outs else None
