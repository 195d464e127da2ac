"""Tracing, the first half of the one subgraph mechanism shared by every gluon_cf op: a body
function becomes a Symbol whose closure is captured as explicit inputs (``graph/`` runs it).

NOTE [closure capture]
    A body function is traced once on fresh variables under an ``AttrScope`` that marks every node
    it creates with MXNet's ``__subgraph_name__`` attribute (a unique name per trace). Anything the
    body uses that does not carry the mark was created outside: a Gluon parameter, an outer input,
    the output of an outer op, or a value captured by a lambda. MXNet's ``MXSymbolCutSubgraph``
    replaces each such edge by a variable named after the outer value; we collect those outer
    Symbols and make them explicit inputs of the control-flow node (``captured``). Variables that
    were created *inside* the trace but are not the fresh inputs (a Gluon parameter whose ``var()``
    was first requested inside the body) are free variables and are captured the same way.
    Nesting works because an inner node is created in the outer trace's scope, so the inner node's
    own captured inputs are, in turn, cut by the outer trace.

NOTE [source locations]
    The trace's scope (:class:`_TraceScope`) also stamps every node it creates with the hidden
    attribute ``__gcf_src__``: the file and line of the user's code that created it (the first
    frame outside MXNet and gluon_cf's core). A body holding MXNet's own ``_cond`` or
    ``_while_loop`` is refused at that line (:func:`_refuse_unsupported_ops`): MXNet cannot
    infer their outputs' shapes from a symbol, so inside a node they failed at run time with
    a shape or tuple-index error of the plumbing; its ``_foreach`` it infers, and runs.
    Errors and warnings about a node (e.g. the batching executor's, NOTE [row-wise rules])
    point there, not into gluon_cf. Hidden attributes are ignored by MXNet's operators (and
    by user CustomOps, NOTE [user CustomOps]). Variables are not stamped, but the trace's own
    inputs (inside the node's graphs, where a refusal names the loop that made one): a Gluon
    parameter first used in a body keeps its variable for every later graph, so the block's
    exported symbol file, ``tojson`` and ``attr_dict`` showed ``__gcf_src__`` on it, which
    MXNet's export of the same program has not (issue 24).

NOTE [slots]
    A node's subgraphs do not see node inputs directly; they see *slots*. Each op defines its slot
    layout (e.g. foreach: data slices, then states, then captured values) and a subgraph records,
    for each of its inputs in ``list_inputs()`` order, the slot that feeds it. Several subgraphs of
    one node (cond's branches, while_loop's cond and body) share one pool of captured slots, so
    every subgraph accepts the captures of all of them (as JAX pads cond branches).
"""
import ctypes
import itertools
import json
import sys
import threading
from typing import Dict

import mxnet as mx
from mxnet.attribute import AttrScope
from mxnet.base import _LIB, SymbolHandle, check_call

from . import _custom_ops, registry
from ._structure import flatten
from .checks import ArrayTypeError, NameClashError, op_at
from .operators import SOURCE_ATTR, user_location

_TAG = "__subgraph_name__"
_trace_ids = itertools.count()


def trace_mark():
    """A number below the id of every trace started after this call (the ``<id>`` of their
    inputs' names, ``_gcf<id>_<op>_<role>_in<k>``): which traces ran inside a piece of code."""
    return next(_trace_ids)


def _made_by_var(frame):
    """Whether ``frame`` is ``mx.sym.var`` creating a variable for anyone but :func:`trace`."""
    return frame.f_code.co_name == "var" and \
        frame.f_globals.get("__name__") == "mxnet.symbol.symbol" and \
        frame.f_back is not None and frame.f_back.f_globals.get("__name__") != __name__


class _TraceScope(AttrScope):
    """The trace's AttrScope: the trace's mark plus the user's source line on every node."""

    def get(self, attr):
        attrs = dict(super().get(attr))
        if _made_by_var(sys._getframe(1)):
            return attrs   # (NOTE [source locations]: variables are not stamped)
        location = user_location(2)
        if location is not None:
            attrs[SOURCE_ATTR] = location
        return attrs


class PendingSignature(Exception):
    """Raised while tracing when a recursive call's result structure is not known yet.

    See NOTE [recursion design] in ``recursion/api.py``: ``cond`` catches it from one branch and
    uses the other branch; the recursion machinery turns an uncaught one into a clear error.
    """

    def __init__(self, key):
        super().__init__(key)
        self.key = key


class PendingShape(Exception):
    """Raised by shape inference of a recursive call whose shapes are being inferred.

    MXNet's Custom operators cannot report "unknown" output shapes, so a recursive call raises
    instead; ``cond`` infers the other branch (NOTE [recursion design]). ``pending_shapes()``
    counts these per thread, which lets ``cond`` tell them from genuine errors after MXNet has
    wrapped them in an MXNetError.
    """

    def __init__(self, what):
        super().__init__(what)
        registry.note_pending_shapes()


def pending_shapes():
    return registry.pending_shapes()


class Traced:
    """A body function traced into a Symbol, still linked to the outer graph by ``captured``.

    ``symbol``: the body graph (a Group of its flat outputs); ``input_names``: names of the fresh
    variables standing for the explicit inputs; ``captured``: ordered ``[(name, outer_symbol)]``;
    ``out_fmt``: structure of the outputs (see ``_structure``); ``outputs``: the flat outputs before
    grouping, for op-specific checks.
    """

    def __init__(self, symbol, input_names, captured, out_value, out_fmt):
        self.symbol = symbol
        self.input_names = input_names
        self.captured = captured
        self.out_value = out_value
        self.out_fmt = out_fmt
        self.num_outputs = len(symbol.list_outputs())

    def spec(self, explicit_slots, capture_slots):
        """Serialisable description of this graph: JSON plus the slot feeding each input."""
        slot_of = dict(zip(self.input_names, explicit_slots))
        slot_of.update(capture_slots)
        return {"json": self.symbol.tojson(),
                "inputs": [slot_of[name] for name in self.symbol.list_inputs()],
                "num_outputs": self.num_outputs}


def count_subgraph_names(*names):
    """Count ``names`` in ``AttrScope._subgraph_names`` as MXNet 1.9.1's symbolic ``foreach``,
    ``while_loop`` and ``cond`` count their subgraphs' names (``name``; ``name_cond``,
    ``name_func``; ``name_pred``, ``name_then``, ``name_else``): code reading the count, as
    MXNet's own tests do, sees the same after gluon_cf's ops."""
    for name in names:
        mx.symbol.contrib._get_unique_subgraph_name(name)


def flatten_returned(value, owner, what, hint=""):
    """``flatten`` of what a user's function returned: a None, a dict... is the user's value,
    not ours, so its TypeError names the user's line (then ``hint``)."""
    try:
        return flatten(value, owner, what)
    except TypeError as err:
        where = user_location()
        raise ArrayTypeError("%s%s%s" % ("%s: " % where if where else "", err, hint)) from None


def trace(op, role, num_inputs, call):
    """Trace ``call(fresh_vars) -> structure`` into a :class:`Traced` graph.

    ``op``/``role`` name the public op and the function's role for error messages and node names.
    """
    uid = "_gcf%d_%s_%s" % (next(_trace_ids), op, role)
    _custom_ops.rewire_registered()  # NOTE [user CustomOps]
    with _TraceScope(**{_TAG: uid}):
        fresh = [mx.sym.var("%s_in%d" % (uid, k)) for k in range(num_inputs)]
        value = call(fresh)
        flat, fmt = flatten_returned(value, "gluon_cf." + op, "the value returned by %s" % role)
        for out in flat:
            if not isinstance(out, mx.sym.Symbol):
                raise ArrayTypeError("%s: %s returned an NDArray in symbolic mode; return "
                                     "Symbols computed from its inputs" % (op_at(op), role))
        # MXSymbolCutSubgraph needs every head to be a marked op node, and a head may not be an
        # input: copy inputs, outer values and variables through an identity inside the scope.
        flat = [o if _is_own_op(o, uid) else mx.sym.identity(o) for o in flat]
        group = mx.sym.Group(flat)
    captured = _cut(group, uid, op)
    group = _one_variable_per_name(group, captured, op)
    # (refused once the outer values are cut off: NOTE [what a body holds])
    _refuse_unsupported_ops(group, op, role)
    fresh_names = {v.name for v in fresh}
    internals = None
    for name in group.list_inputs():
        if name in fresh_names or name in captured:
            continue
        # A free variable created inside the trace (e.g. a parameter first used in the body).
        internals = internals if internals is not None else group.get_internals()
        captured[name] = internals[name]
    return Traced(group, [v.name for v in fresh], list(captured.items()), value, fmt)


def _refuse_unsupported_ops(group, op, role):
    """Refuse operators a body cannot hold: MXNet's own cond and while_loop. (Auxiliary state
    and user CustomOps in recorded calls are refused by the block's call and the node, in
    every call alike: NOTE [training refused by the node] in graph/decoded.py.)

    NOTE [what a body holds]: ``group``, once cut (:func:`_cut`), holds the body's own
    operators only; before the cut it also held every outer operator the body's captured
    values were computed by, so a BatchNorm (or a user CustomOp, MXNet's own cond) applied
    *before* a loop or recursion whose body reads its result refused hybridized training
    ("body calls BatchNorm"), where it runs in the block's graph, outside every gluon_cf
    node, and trains as eagerly (round 26r)."""
    for node in json.loads(group.tojson())["nodes"]:
        if node["op"] in _MXNET_CONTROL_FLOW:
            # MXNet cannot infer the shapes of their outputs from a symbol (only its CachedOp
            # runs them), so inside a node they were declared () and failed at run time with
            # a shape or tuple-index error naming gluon_cf's plumbing
            where = node.get("attrs", {}).get(SOURCE_ATTR)
            public = _MXNET_CONTROL_FLOW[node["op"]]
            raise NotImplementedError(
                "%sgluon_cf.%s: %s calls MXNet's F.contrib.%s (node %r), whose output shapes "
                "MXNet cannot infer inside a gluon_cf node; call gluon_cf.%s instead (the same "
                "signature and results), or write a Python if/while under @gluon_cf.autograph"
                % (where + ": " if where else "", op, role, public, node["name"], public))


# MXNet's control-flow operators a gluon_cf body cannot hold (its _foreach can: MXNet infers it)
_MXNET_CONTROL_FLOW = {"_cond": "cond", "_while_loop": "while_loop"}


def _is_own_op(sym, uid):
    return len(sym.list_outputs()) == 1 and sym.get_children() is not None \
        and sym.attr(_TAG) == uid


def _cut(group, uid, op):
    """Cut the edges from outer nodes into ``group`` (in place); return ``{name: outer_symbol}``."""
    num = ctypes.c_int(0)
    handles = ctypes.POINTER(SymbolHandle)()
    check_call(_LIB.MXSymbolCutSubgraph(group.handle, ctypes.byref(handles), ctypes.byref(num)))
    captured: Dict[str, mx.sym.Symbol] = {}
    for i in range(num.value):
        outer = mx.sym.Symbol(ctypes.cast(handles[i], SymbolHandle))
        name = outer.list_outputs()[0]
        if name in captured and not _same_value(captured[name], outer):
            raise _same_name_error(op, name, captured[name], outer)
        # the last of one name is the argument, at the first one's place (NOTE [variables of
        # one name])
        captured[name] = outer
    return captured


def _same_value(a, b):
    """Whether two outer symbols of one name are one value: the same node, or variables.

    NOTE [variables of one name]: MXNet binds arguments by name, so two variables of one name
    are one argument (``S.FullyConnected(..., name="fc")`` in both branches of a cond creates
    ``fc_weight`` twice, inside each branch's trace: MXNet 1.9.1's own cond lists it once and
    binds it once). They were refused as "two different outer values" (round 26r); computed
    values of one name still are: which one a body reads would be a guess. The body's graph
    holds one node for them (:func:`_one_variable_per_name`). Which outer variable is the
    argument is MXNet's cond's choice: of one graph's (a branch's, a body's) the last its cut
    meets (its ``{name: symbol}`` of the cut values keeps the last), of several graphs' the
    first graph's; listed at the first one's place. That one carries its attributes
    (``init``, ``lr_mult``, ``shape``: ``attr_dict``, a Module's initialisation) and is the
    node the outer graph holds: with the first, a graph also using the last outside the cond
    held two arguments "w" and ``bind`` refused it ("Duplicate names detected"), where
    MXNet's binds (round 28r)."""
    return a is b or (a.get_children() is None and b.get_children() is None) or \
        a.tojson() == b.tojson()


def _one_variable_per_name(group, captured, op):
    """``group`` with one variable node per input name (NOTE [variables of one name]).

    Two variables of one name reach a body's graph as two nodes: two outer variables (each
    edge cut into a variable of its own) or an outer one and one the body creates
    (``mx.sym.var("w")`` inside it). Left apart, the graph had two inputs of one name, which
    the node's slots (by name) cannot tell apart: its run failed inside the node with
    "invalid literal for int()". They are one argument, as in MXNet 1.9.1's cond, so their
    uses are joined on the first node. In a cond's branch so are a variable the body creates
    and an outer computed value of its name (``mx.sym.var("fc_output")`` beside ``fc``'s
    output): MXNet 1.9.1's cond cuts the outer value into an input named by its output and
    the body's variable reads that value (round 29r; refused before). Its foreach and
    while_loop refuse them ("The inputs of the subgraph don't have unique names"), and so
    does gluon_cf, as two different values."""
    names = group.list_inputs()
    if len(set(names)) == len(names):
        return group
    graph = json.loads(group.tojson())
    first: Dict[str, int] = {}
    moved: Dict[int, int] = {}
    for k, node in enumerate(graph["nodes"]):
        if node["op"] == "null":
            if node["name"] in first:
                if op != "cond" and captured.get(node["name"]) is not None and \
                        captured[node["name"]].get_children() is not None:
                    raise _same_name_error(op, node["name"], captured[node["name"]], None)
                moved[k] = first[node["name"]]
            else:
                first[node["name"]] = k
    for node in graph["nodes"]:
        node["inputs"] = [[moved.get(i[0], i[0])] + i[1:] for i in node["inputs"]]
    graph["heads"] = [[moved.get(h[0], h[0])] + h[1:] for h in graph["heads"]]
    return mx.sym.load_json(json.dumps(graph))


def _same_name_error(op, name, first, second):
    """Two different values of one name a body reads (``None``: a variable it creates)."""
    def what(value):
        if value is None:
            return "a variable the body creates"
        return "a variable" if value.get_children() is None else \
            "the output of an operator %r" % value.name
    return NameClashError("%s: two different values are both named %r (%s, %s); give them "
                          "distinct names" % (op_at(op), name, what(first), what(second)))


def rename_other_values_of_one_name(graph, first):
    """Rename, in ``graph``, each captured value named as another value ``first`` captured
    (computed by another operator), so that the two are two inputs of their node.

    NOTE [computed values of one name in while_loop]: MXNet 1.9.1's while_loop joins the
    inputs of its cond's and its func's graphs by node, not by name (``_union_inputs``: each
    graph's own cut values, keyed by ``id``): a cond reading one computed value and a func
    reading another of the same name (``name="fc"`` given twice, two Gluon layers of one
    prefix) read each their own, where gluon_cf's pooling by name refused them as
    ``NameClashError`` (round 28r). Within one graph MXNet refuses them (an AssertionError,
    as gluon_cf). Its cond joins its branches' inputs the same way: a computed value is
    looked up by its operator's name (``v``) among the inputs met before, never found under
    its input's (``v_output``), so a then_func reading one ``v`` and an else_func another
    read each their own, in either order (round 30r: refused before). One branch reading
    both, MXNet's cut keeps one of them for both reads, silently: refused, as in one loop
    graph. Variables of one name stay one argument (NOTE [variables of one name]). Only the
    graph's input variable is renamed: the outer value, its name and ``list_arguments`` are
    the user's."""
    theirs = dict(first.captured)
    clashing = [name for name, sym in graph.captured
                if name in theirs and not _same_value(theirs[name], sym)]
    if not clashing:
        return
    taken = set(graph.symbol.list_inputs()) | set(first.symbol.list_inputs())
    renamed = {}
    for name in clashing:
        k = 1
        while "%s_%d" % (name, k) in taken:
            k += 1
        renamed[name] = "%s_%d" % (name, k)
        taken.add(renamed[name])
    nodes = json.loads(graph.symbol.tojson())
    for node in nodes["nodes"]:
        if node["op"] == "null" and node["name"] in renamed:
            node["name"] = renamed[node["name"]]
    graph.symbol = mx.sym.load_json(json.dumps(nodes))
    graph.captured = [(renamed.get(name, name), sym) for name, sym in graph.captured]


def merge_captures(op, traced_graphs, first_slot, walk_order=False):
    """Pool the captured values of several graphs of one node.

    Returns ``(outer_symbols, slot_of_name)``: the node's captured inputs in slot order, and the
    slot (``first_slot`` + position) of each captured name. ``walk_order``: each graph's in the
    order of a depth-first walk of it (else the order they were read in), as MXNet 1.9.1's own
    ``foreach``, ``while_loop`` and ``cond`` order their nodes' inputs, so that
    ``list_arguments`` (what a positional ``bind`` follows) is MXNet's.
    """
    pooled: Dict[str, mx.sym.Symbol] = {}
    for graph in traced_graphs:
        captured = graph.captured
        if walk_order:
            walk = {name: k for k, name in enumerate(graph.symbol.list_inputs())}
            captured = sorted(captured, key=lambda item: walk.get(item[0], len(walk)))
        for name, sym in captured:
            if name in pooled:
                if not _same_value(pooled[name], sym):
                    raise _same_name_error(op, name, pooled[name], sym)
                continue
            pooled[name] = sym
    names = list(pooled)
    return [pooled[n] for n in names], {n: first_slot + i for i, n in enumerate(names)}

