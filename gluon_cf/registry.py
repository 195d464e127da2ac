"""The op registry: which op kinds exist, how their graph nodes are named, and their rules.

A gluon_cf op kind ``k`` (``cond``, ``foreach``, ``while_loop``, ``recursion``, ``invoke``) is
an MXNet ``Custom`` node with ``op_type="_gluon_cf_k"`` (NOTE [node design] in ``node.py``).
This module owns that naming and the table from kind to the op's rules (an object with the
methods of :class:`Rule`); each op file registers its rules once, at its end, with
:func:`register`. Other layers learn of registrations through :func:`on_register` (the MXNet
bridge in ``node.py`` registers a Custom operator per kind) instead of importing the ops.

Pure Python: the artifact loader and export's JSON analyses use it without MXNet.
"""
import contextvars
import threading
from typing import Any, Callable, Optional, Tuple

OP_PREFIX = "_gluon_cf_"

_RULES: dict = {}
_LISTENERS: list = []
_PENDING_TYPES = threading.local()


def note_pending_types():
    """A recursive call answered dtypes still being inferred (unknown): an operator after it
    refusing an unknown dtype (MXNet's Dropout: "input type to dropout is not specified") is
    then no error, as for PendingShape, and an answer given meanwhile is no graph's to keep
    (NOTE [dtypes of a call being inferred] in ops/cond.py); counted per thread."""
    _PENDING_TYPES.value = pending_types() + 1


def pending_types():
    return getattr(_PENDING_TYPES, "value", 0)


_PENDING_SHAPES = threading.local()


def note_pending_shapes(provisional_only=False):
    """A recursive call's shapes were asked while being inferred (``tracing.PendingShape``),
    or answered while still being settled (``provisional_only``): an answer given meanwhile is
    no graph's to keep (NOTE [one shape per call] in recursion/table.py); counted per thread."""
    pending, provisional = getattr(_PENDING_SHAPES, "value", (0, 0))
    _PENDING_SHAPES.value = (pending + (not provisional_only), provisional + 1)


def pending_shapes():
    """How many PendingShape this thread raised."""
    return getattr(_PENDING_SHAPES, "value", (0, 0))[0]


def provisional_shapes():
    """How many answers this thread gave of shapes pending or being settled."""
    return getattr(_PENDING_SHAPES, "value", (0, 0))[1]


def op_type(kind):
    """The MXNet ``op_type`` of a gluon_cf op kind."""
    return OP_PREFIX + kind


def mxnet_node_name(kind):
    """The name MXNet 1.9.1 gives the node of its own op ``kind`` (``_foreach``), or None
    (NOTE [node names])."""
    return _MXNET_NODE_NAMES.get(kind)


# NOTE [node names]
#     Client code of MXNet's ``F.contrib`` ops finds their outputs by name
#     (``sym.get_internals()["_foreach0_output0"]``, ``Executor.output_dict``), so a node of
#     ``cond``, ``foreach`` or ``while_loop`` is named as MXNet 1.9.1 names its ``_cond``,
#     ``_foreach``, ``_while_loop``: by the op, counted by the NameManager, under the enclosing
#     Prefix (a Gluon block's ``net0_``) once; the ops' ``name=`` names their subgraphs only, as
#     MXNet's does, but for the names autograph makes from source lines (``NAMED_AT``:
#     ``model_line12_if``, which map MXNet's errors back to the line). Outputs are nnvm's
#     default names: ``output`` for a node of one output, else ``output0``, ``output1``...
#     Before, ``mx.sym.Custom(name=...)`` applied the Prefix a second time
#     (``net0_net0_foreach0_out0``).
#     The identities MXNet's ops put in their subgraphs and gluon_cf's need not (a cond's pred; a
#     foreach state that is also an output) are counted all the same, so that the nodes made
#     after a control-flow node are named as after MXNet's (``identity1``, not ``identity0``).
_MXNET_NODE_NAMES = {"cond": "_cond", "foreach": "_foreach", "while_loop": "_while_loop"}


def output_names(count):
    """A node's output names, nnvm's defaults (NOTE [node names])."""
    return ["output"] if count == 1 else ["output%d" % i for i in range(count)]


def kind_of_op_type(text):
    """The op kind named by an MXNet ``op_type``, or None if it is not a gluon_cf op."""
    return text[len(OP_PREFIX):] if text.startswith(OP_PREFIX) else None


def kind_of(node):
    """The gluon_cf op kind of a node of MXNet's symbol JSON, or None for any other node."""
    if node["op"] != "Custom":
        return None
    return kind_of_op_type(node.get("attrs", {}).get("op_type", ""))


def is_user_custom(node):
    """Whether a JSON node is a user's ``mx.operator.CustomOp`` (a Custom node not ours)."""
    return node["op"] == "Custom" and kind_of(node) is None


class Dynamic:
    """A shape known only at run time (NOTE [run-time shapes] in ``graph/shape_inference.py``):
    the output of an operator whose shape depends on values (``boolean_mask``), of an exact-length
    ``while_loop``, of a ``cond`` whose branches differ in size, and what is computed from them.
    ``dims``: what is known of it, a tuple with None for each dimension known only at run time
    (``boolean_mask`` of a (5, 3) array: ``(None, 3)``), or None when not even the rank is."""

    __slots__ = ("dims",)

    def __init__(self, dims=None):
        self.dims = None if dims is None else tuple(dims)

    @property
    def rank(self):
        return None if self.dims is None else len(self.dims)

    @classmethod
    def of_rank(cls, rank):
        return cls(None if rank is None else (None,) * rank)

    def __eq__(self, other):
        return isinstance(other, Dynamic) and other.dims == self.dims

    def __hash__(self):
        return hash(("Dynamic", self.dims))

    def __repr__(self):
        return "<known at run time%s>" % ("" if self.dims is None else ": %s" % (self.dims,))


def is_dynamic(shape):
    return isinstance(shape, Dynamic)


def is_complete(shape):
    """Whether ``shape`` is a shape with every dimension known: a non-empty tuple (or list)
    without MXNet's legacy 0 ("unknown dimension"); None, () and Dynamic are not."""
    return isinstance(shape, (tuple, list)) and len(shape) > 0 and all(d > 0 for d in shape)


def rank_of(shape):
    """The number of dimensions of a shape (a tuple or :class:`Dynamic`), None if unknown."""
    if shape is None:
        return None
    return shape.rank if isinstance(shape, Dynamic) else len(shape)


def dims_of(shape):
    """What is known of each dimension (None: unknown), or None when the rank is unknown."""
    if shape is None:
        return None
    return shape.dims if isinstance(shape, Dynamic) else tuple(shape)


# While "then" or "else": every cond infers its outputs as that branch's (export_onnx asks
# whether a model output's rank follows a cond's branch, NOTE [outputs of varying rank]).
COND_BRANCH_SHAPES: "contextvars.ContextVar[Optional[str]]" = contextvars.ContextVar(
    "gluon_cf_cond_branch_shapes", default=None)


def common_dims(a, b):
    """The dims two shapes (tuples or Dynamic) have in common; None if their ranks differ."""
    a, b = dims_of(a), dims_of(b)
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


class Rule:
    """What an op kind must define (its rules); ``node`` is a decoded :class:`gluon_cf.graph.Node`,
    shapes are tuples, ``None`` (unknown yet) or :class:`Dynamic` (known only at run time)."""

    kind: Optional[str] = None
    needs_out_shapes = False  # whether forward reads out_shapes (inferring them has a cost)

    # The node's ``spec`` beyond what every op has (``graphs``, ``num_inputs``,
    # ``num_outputs``): field -> "count", "count or null", "text", "flag", each possibly
    # "optional ..."; the names of its subgraphs (None: any); its subgraphs' own extra fields.
    # Checked before MXNet reads a file (NOTE [files are checked before MXNet reads them]).
    spec_fields: dict = {}
    graph_roles: Optional[tuple] = None
    graph_fields: dict = {}
    # The subgraph whose outputs are the node's own (its num_outputs must be the node's; a
    # tampered count made MXNet read past the node's outputs), or None.
    outputs_graph: Optional[str] = None

    def spec_problem(self, spec):
        """What is wrong with a spec whose fields have the right kinds, beyond what every op
        checks (a field naming a subgraph it does not hold...), or None."""
        return None

    def num_slots(self, spec, graph):
        """How many slots (NOTE [slots]) subgraph ``graph`` of a (checked) ``spec`` may read:
        most ops' subgraphs read the node's inputs."""
        return spec["num_inputs"]

    def infer_shape(self, node, in_shapes):
        """Return ``(in_shapes, out_shapes)``, inputs possibly completed (e.g. parameters).
        An output whose shape depends on values is :class:`Dynamic`, never a guess."""
        raise NotImplementedError

    def infer_type(self, node, in_types):
        raise NotImplementedError

    def static_shape_error(self, node, in_shapes):
        """The error a graph MXNet runs itself (bind) raises for the node's run-time output
        shapes, when they come from a mistake (a predicate of many elements, NOTE
        [predicates of many elements] in checks.py) rather than from values; else None.
        (Raised from MXNet's callback, which names the node.)"""
        return None

    def slot_shapes(self, spec, in_shapes):
        """The shapes the node's subgraphs see in its slots (NOTE [slots]), from the node's
        input shapes; most ops pass inputs through as slots."""
        return self.slot_order(spec, in_shapes)

    def slot_order(self, spec, items):
        """Per-input ``items`` of a node (arrays, shapes, names, input positions) in the order
        of the slots they feed (NOTE [slots]); most ops' inputs are their slots, in order (a
        ``while_loop``'s are not: NOTE [while_loop input order])."""
        return list(items)

    def input_order(self, spec, items):
        """The inverse of :meth:`slot_order`: per-slot ``items`` in the node's input order."""
        return list(items)

    def forward(self, node, inputs, out_shapes, frame):
        """Generator computing the node's outputs (list of NDArrays) from its inputs.

        Subgraphs are run by yielding ``graph.run(slots, frame)``; see NOTE [trampoline].
        """
        raise NotImplementedError

    def forward_batched(self, node, inputs, frame):
        """Generator: the outputs for ``frame.rows`` invocations at once, when some inputs hold
        one row per invocation (``frame.batched(i)``, NOTE [batching]); called instead of
        ``forward`` then. Default: ``forward``, for ops whose forward handles batches."""
        return self.forward(node, inputs, None, frame)

    # ``batching_rule(node_json, in_flags, in_shapes, out_shapes, used, rows)``: raise
    # ``rowwise.Rejected`` unless the node, given inputs batched as ``in_flags`` says, returns
    # one row per invocation (NOTE [row-wise rules]). None: the node never batches.
    batching_rule: Optional[Callable[..., None]] = None

    # Export rules (NOTE [gluon_cf ops as ONNX control flow] in export/onnx_kit.py), each
    # importing onnx and the export kit when called: ``to_onnx(custom_node)`` for an op standard
    # ONNX can express, ``to_artifact(custom_node)`` for one only artifacts can (recursion);
    # both return ``(onnx nodes, output dtypes)``. None: the op cannot be exported.
    to_onnx: Optional[Callable[[Any], Tuple[list, list]]] = None
    to_artifact: Optional[Callable[[Any], Tuple[list, list]]] = None


def register(rule):
    """Register an op's rules (``rule.kind`` names it); returns ``rule``."""
    if rule.kind in _RULES:
        raise ValueError("gluon_cf: op kind %r is registered twice" % rule.kind)
    _RULES[rule.kind] = rule
    for listener in _LISTENERS:
        listener(rule)
    return rule


def on_register(listener):
    """Call ``listener(rule)`` for every op registered, now and later."""
    _LISTENERS.append(listener)
    for rule in list(_RULES.values()):
        listener(rule)


_DECODER: list = []


def set_decoder(decode):
    """Set the function turning ``(kind, spec text)`` into the decoded node rules take
    (``graph/decoded.py``'s ``decode``, which registers itself: this module stays MXNet-free)."""
    _DECODER[:] = [decode]


def decode(kind, spec_text):
    """The decoded node of a gluon_cf node's ``spec`` (needs MXNet: see :func:`set_decoder`)."""
    return _DECODER[0](kind, spec_text)


def rule_of(kind):
    """The rules of a registered op kind (KeyError if none)."""
    return _RULES[kind]


def kinds():
    return tuple(_RULES)
