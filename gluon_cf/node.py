"""Control-flow nodes in MXNet graphs: one ``Custom`` operator per op kind.

NOTE [node design]
    A gluon_cf node is an MXNet ``Custom`` node with ``op_type="_gluon_cf_<kind>"`` and one string
    attribute, ``spec``: JSON holding the node's subgraphs (MXNet symbol JSON plus slot maps, see
    NOTE [slots] in ``subgraph.py``) and the op's own fields. Because the subgraphs travel inside
    the attribute, a graph saved with ``net.export()`` is self-contained: loading it in a process
    that has imported ``gluon_cf`` (which registers the operators) rebuilds everything.

    Each op provides a :class:`Rule` - shape and type inference and a ``forward`` that runs the
    subgraphs' CachedOps. This module does the rest once for all ops: registration, spec decoding,
    and gradients.

NOTE [gradients through a node]
    Forward in training runs the op's ``forward`` under ``autograd.record()`` on inputs marked as
    variables, and keeps (inputs, outputs) on the operator instance: that is the node's saved state
    for backward. ``backward`` calls ``autograd.backward`` on the outputs with the incoming head
    gradients and hands back the inputs' gradients. If backward comes without a recorded forward
    (``autograd.record(train_mode=False)`` makes MXNet call forward with ``is_train=False``), the
    forward is recomputed under recording first.
"""
import json

import numpy as np

import mxnet as mx
from mxnet import autograd

from . import executor
from .subgraph import Graph, dumps

OP_PREFIX = "_gluon_cf_"

# NOTE [error messages]
#     An exception raised in a Custom operator's callback (our shape inference rejecting a cond
#     whose branches disagree, a RecursionDepthError in forward) is printed by MXNet and replaced
#     by a generic "Check failed: ...callbacks[...]" MXNetError raised later, elsewhere. We keep
#     the last such exception's message and put it in front of the next MXNetError that MXNet's
#     Python binding builds (``mxnet.base.get_last_ffi_error``, looked up at call time by every
#     ``check_call``), so the user's exception names the op and says what was wrong.
_last_error = []
_original_get_last_ffi_error = mx.base.get_last_ffi_error


def _remember(exc):
    _last_error[:] = ["%s: %s" % (type(exc).__name__, exc)]


def _get_last_ffi_error():
    err = _original_get_last_ffi_error()
    if _last_error and "Custom" in str(err):
        message = _last_error.pop()
        err = type(err)("%s\n\n(reported by MXNet as: %s)" % (message, str(err).strip()))
    return err


mx.base.get_last_ffi_error = _get_last_ffi_error


def _reporting(method):
    """Wrap a Custom operator callback so that its exception reaches the user (see above)."""
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except Exception as exc:
            _remember(exc)
            raise
    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper
_RULES = {}
_SPECS = {}


class Rule:
    """What an op kind must define. ``node`` is a :class:`Node`; shapes are tuples or ``None``."""

    kind = None
    needs_out_shapes = False  # whether forward reads out_shapes (inferring them has a cost)

    def infer_shape(self, node, in_shapes):
        """Return ``(in_shapes, out_shapes)``, inputs possibly completed (e.g. parameters)."""
        raise NotImplementedError

    def infer_type(self, node, in_types):
        raise NotImplementedError

    def forward(self, node, inputs, out_shapes, ctx):
        """Generator computing the node's outputs (list of NDArrays) from its inputs.

        Subgraphs are run by yielding ``graph.run(slots, ctx)``; see NOTE [trampoline].
        """
        raise NotImplementedError


class Node:
    """A decoded ``spec``: the op's fields plus its subgraphs as runnable :class:`Graph` objects."""

    def __init__(self, kind, spec):
        self.kind = kind
        self.spec = spec
        self.num_inputs = spec["num_inputs"]
        self.num_outputs = spec["num_outputs"]
        self.graphs = {name: Graph.from_spec(g) for name, g in spec["graphs"].items()}
        self.wanted = None  # inputs whose gradient backward asked for (see _NodeOperator)


def rule_of(kind):
    return _RULES[kind]


def decode(kind, spec_text):
    key = (kind, spec_text)
    node = _SPECS.get(key)
    if node is None:
        try:
            spec = json.loads(spec_text)
        except ValueError as err:
            raise ValueError("gluon_cf.%s: the node's spec attribute is not valid JSON: %s"
                             % (kind, err)) from None
        node = _SPECS[key] = Node(kind, spec)
    return node


def make_node(kind, inputs, spec, name):
    """Create the Symbol for a node of ``kind``; returns the list of its outputs."""
    spec = dict(spec, num_inputs=len(inputs))
    hint = name or kind
    name = mx.name.NameManager._current.value.get(None, hint)
    sym = mx.sym.Custom(*inputs, op_type=OP_PREFIX + kind, spec=dumps(spec), name=name)
    return [sym[i] for i in range(spec["num_outputs"])]


def is_float(dtype):
    return np.issubdtype(np.dtype(dtype), np.floating)


def _recorded(array):
    """Whether ``array`` is part of the graph autograd recorded (constants are not)."""
    try:
        autograd.get_symbol(array)
        return True
    except mx.MXNetError:
        return False


class _NodeOperator(mx.operator.CustomOp):
    """Runs a node (NOTE [gradients through a node]).

    Which inputs need a gradient is only known in ``backward`` (from ``req``). Marking an input
    that needs none is not harmless (Embedding refuses to differentiate its integer-valued data),
    so forward marks the inputs the previous backward asked for (every float input the first
    time); when that guess is wrong, backward recomputes the forward with the right marks. The
    answer is kept on the decoded node, which outlives this operator (plain ``hybridize()``
    creates a new operator on every call).
    """

    def __init__(self, rule, node, out_shapes):
        super().__init__()
        self.rule = rule
        self.node = node
        self.out_shapes = out_shapes
        self.saved = None
        self.is_train = False

    def _forward(self, inputs):
        return self.rule.forward(self.node, inputs, self.out_shapes, None)

    def _run(self, inputs, is_train, marks):
        if marks is None:
            with autograd.pause(train_mode=is_train):
                return executor.run_node(self._forward(inputs))
        for i in marks:
            inputs[i].attach_grad()
        with autograd.record(train_mode=is_train):
            return executor.run_node(self._forward(inputs))

    def _default_marks(self, inputs):
        if self.node.wanted is not None:
            return self.node.wanted
        return tuple(i for i, x in enumerate(inputs) if is_float(x.dtype))

    @_reporting
    def forward(self, is_train, req, in_data, out_data, aux):
        self.is_train = is_train
        inputs = list(in_data)
        marks = self._default_marks(inputs) if is_train else None
        outputs = self._run(inputs, is_train, marks)
        self.saved = (inputs, outputs, marks) if is_train else None
        for dst, r, value in zip(out_data, req, outputs):
            self.assign(dst, r, value)

    @_reporting
    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        wanted = tuple(i for i, (x, r) in enumerate(zip(in_data, req))
                       if r != "null" and is_float(x.dtype))
        self.node.wanted = wanted
        saved, self.saved = self.saved, None
        if saved is None or saved[2] != wanted:
            inputs = list(in_data)
            saved = (inputs, self._run(inputs, self.is_train, wanted), wanted)
        inputs, outputs, _ = saved
        heads = [(o, g) for o, g in zip(outputs, out_grad) if is_float(o.dtype) and _recorded(o)]
        if heads and wanted:
            autograd.backward([o for o, _ in heads], [g for _, g in heads],
                              train_mode=self.is_train)
        for i, (dst, r) in enumerate(zip(in_grad, req)):
            if r == "null":
                continue
            if i in wanted and inputs[i].grad is not None:
                self.assign(dst, r, inputs[i].grad)
            elif r in ("write", "inplace"):
                dst[:] = 0


def _prop_class(rule):
    class _NodeProp(mx.operator.CustomOpProp):
        def __init__(self, spec, **_scope_attrs):
            # _scope_attrs: attributes MXNet adds from an enclosing AttrScope (e.g. the
            # __subgraph_name__ mark of an outer trace); they are not ours to interpret.
            super().__init__(need_top_grad=True)
            self.node = decode(rule.kind, spec)

        def list_arguments(self):
            return ["in%d" % i for i in range(self.node.num_inputs)]

        def list_outputs(self):
            return ["out%d" % i for i in range(self.node.num_outputs)]

        @_reporting
        def infer_shape(self, in_shape):
            shapes = [tuple(s) if s and all(d > 0 for d in s) else None for s in in_shape]
            ins, outs = rule.infer_shape(self.node, shapes)
            return ([s if s is not None else () for s in ins],
                    [s if s is not None else () for s in outs], [])

        @_reporting
        def infer_type(self, in_type):
            ins, outs = rule.infer_type(self.node, list(in_type))
            return ins, outs, []

        def create_operator(self, ctx, in_shapes, in_dtypes):
            _, outs = rule.infer_shape(self.node, [tuple(s) for s in in_shapes])
            return _NodeOperator(rule, self.node, outs)

    _NodeProp.__name__ = "_NodeProp_" + rule.kind
    return _NodeProp


def register(rule):
    """Register ``rule`` (an instance of :class:`Rule`) as MXNet operator ``_gluon_cf_<kind>``."""
    _RULES[rule.kind] = rule
    mx.operator.register(OP_PREFIX + rule.kind)(_prop_class(rule))
    return rule
