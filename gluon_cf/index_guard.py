"""The gradient a partitioned block's input asks through an Embedding's indices, refused as
MXNet refuses it.

NOTE [index gradients of a partitioned block]
    A block whose graph runs partitioned (NOTE [partitioned blocks] in hybrid.py) runs its
    ordinary operators as CachedOp segments with a BlockGrad on every Embedding's indices
    (``block_index_gradients``: NOTE [gradients asked of indices] in graph/index_gradients.py
    says why), and its gluon_cf nodes by their rules in the calling thread, recorded operator
    by operator. No Custom operator's ``backward`` sees ``req`` there, so a gradient the user
    asked of indices (``tok.attach_grad()`` on a decoder's first token) came back as zeros,
    silently, where MXNet, and the same block run as one Custom operator, refuse it (hostile
    review of session 35: a decoder whose loop collects a list of run-time length, which makes
    the block run partitioned). So while recording, each block input whose value reaches an
    Embedding's indices (through the graph, its nodes' bodies and recursions:
    ``inputs_reaching_indices``) passes through the identity operator here. MXNet asks its
    backward for that input's gradient (``req`` not ``null``) exactly when the input needs
    one, as it would ask the Embedding, and the backward then raises IndexGradientError
    naming the Embedding and its line. An input no gradient reaches is not recorded, and the
    operator is not run backward at all; one in no graph (token data) skips it.

    Inside a remat body's recomputation (``remat.running_body()``: an eager remat loop or
    recursive call whose body calls the block) a Custom operator's backward would run inside
    the remat node's, which hangs MXNet (NOTE [nested custom backward] in
    tests/test_remat_nesting.py). There the input passes instead through MXNet's own check:
    an Embedding of one row read by nothing but a sum times zero added back to it, whose
    backward MXNet asks for the input's gradient exactly as the real one would, and refuses
    with its own message, as it refuses the same body run eagerly (hostile review of session
    35: a remat loop calling the block trained to zeros).
"""
import inspect
import itertools
import re
import threading
from typing import Dict, List, Sequence

import mxnet as mx

from ._custom_ops import register_guarded, write_like_assign
from .graph.index_gradients import IndexGradientError, inputs_reaching_indices
from .node import reporting
from .shared_handles import needs_no_gradient

_OP_TYPE = "_gluon_cf_index_guard"
# key -> message: our operators are given one string parameter, ``spec`` (NOTE [callbacks never
# take the process down] in node.py; an unknown one, from a file, is the generic message)
_REFUSALS: Dict[str, str] = {}
_KEYS: Dict[str, str] = {}
_GENERIC = ("gluon_cf: a gradient was asked through the indices of an Embedding, whose gradient "
            "MXNet does not define")
_keys = itertools.count(1)
_lock = threading.Lock()


class _IndexGuard(mx.operator.CustomOp):
    """The identity forward; a backward asked the input's gradient refuses (NOTE above)."""

    def __init__(self, refusal):
        super().__init__()
        self.refusal = refusal
        self.node = None   # (read by ``reporting``: no gluon_cf node to name)

    @reporting
    def forward(self, is_train, req, in_data, out_data, aux):
        write_like_assign(self, out_data[0], req[0], in_data[0])

    @reporting
    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        if req[0] != "null":
            raise IndexGradientError(self.refusal)


class _IndexGuardProp(mx.operator.CustomOpProp):
    def __init__(self, spec=""):   # (never raises: NOTE [callbacks never take the process down])
        super().__init__(need_top_grad=True)
        self.refusal = _REFUSALS.get(spec, _GENERIC)

    def list_arguments(self):
        return ["data"]

    def list_outputs(self):
        return ["output"]

    def infer_shape(self, in_shape):
        return in_shape, in_shape, []

    def infer_type(self, in_type):
        return in_type, in_type, []

    # (the default backward dependencies, all arrays: MXNet's Python side reads which arrays
    # a backward is given from one registry-wide list, ``result_deps``, that the last
    # operator to declare its own set; declaring fewer gave "unknown storage type: -1")

    def create_operator(self, ctx, in_shapes, in_dtypes):
        return _IndexGuard(self.refusal)


register_guarded(_OP_TYPE, _IndexGuardProp)


def _checked_by_mxnet(x):
    """``x`` (its value, exactly) through an Embedding of MXNet's own, refusing in backward
    as the Embedding ``x`` reaches would (NOTE above: a remat body)."""
    probe = mx.nd.Embedding(x, mx.nd.zeros((1, 1), ctx=x.context), input_dim=1, output_dim=1)
    return mx.nd.broadcast_add(x, (probe.sum() * 0).astype(x.dtype).reshape((1,) * x.ndim))


def _called(forward, name):
    """The name the user's ``hybrid_forward(self, F, ...)`` gives the block's input ``name``
    (Gluon's ``data`` or ``data<k>``; a parameter's own name otherwise)."""
    match = re.fullmatch(r"data(\d*)", name)
    try:
        given = list(inspect.signature(forward).parameters)[2:]
    except (TypeError, ValueError):
        return name
    k = int(match.group(1) or 0) if match else None
    return given[k] if k is not None and k < len(given) else name


def guard_inputs(inputs: Sequence, plan, in_remat_body=False) -> List:
    """``inputs`` (a partitioned block's, in its graph's order), those reaching indices
    through the guard while recording (NOTE [index gradients of a partitioned block]);
    ``in_remat_body``: through MXNet's own check instead. ``plan``: the block's graph
    (hybrid.py's ``_Plan``), which keeps which inputs reach indices."""
    inputs = list(inputs)
    refusals = plan.index_refusals
    if refusals is None:
        names = plan.symbol.list_inputs()
        refusals = plan.index_refusals = inputs_reaching_indices(
            plan.js, names, [_called(plan.forward, n) for n in names])
    if not refusals:   # (called while recording only: hybrid.py)
        return inputs
    for k, refusal in refusals.items():
        x = inputs[k]
        if not isinstance(x, mx.nd.NDArray) or x.stype != "default" or x.size == 0 or \
                needs_no_gradient(x):
            continue   # (no gradient of indices to ask: nothing to refuse; and the guard, a
            # Custom operator, costs ~0.5-2.5 ms a call: token inputs in no graph skip it)
        if in_remat_body:
            if x.ndim:   # (a 0-d one is MXNet's unknown shape: refused elsewhere)
                inputs[k] = _checked_by_mxnet(x)
            continue
        with _lock:
            key = _KEYS.get(refusal)
            if key is None:
                key = _KEYS[refusal] = str(next(_keys))
                _REFUSALS[key] = refusal
        inputs[k] = mx.nd.Custom(x, op_type=_OP_TYPE, spec=key)
    return inputs
