"""Graph rules of the ``recursion`` (outermost call, owns the function table) and ``invoke``
(call site) nodes, and the recursive-invoke executor.

NOTE [recursive executor]
    The ``recursion`` node's forward creates a :class:`RecursionContext` (function table plus the
    environment values) and invokes the entry function. An invocation runs the function's body
    graph; bodies contain ``invoke`` and ``cond`` nodes, so they run partitioned (NOTE
    [partitioned execution]) and every nested call is yielded to the trampoline (NOTE
    [trampoline]): depth costs no Python stack. Each CachedOp call is recorded by autograd on its
    own, which gives every invocation its own saved state for backward (the paper's
    per-invocation backprop cache). MXNet's engine runs the pushed operators asynchronously, so
    independent invocations overlap with the Python that issues the next ones.
"""
import json
from typing import Dict

import mxnet as mx
import numpy as np

from .. import node as _node, registry, remat as _remat, rowwise
from ..operators import SOURCE_ATTR
from ..graph.decoded import random_ops
from .invocation import RecursionContext
from .table import MAX_DEPTH, known_in_part, table as _table

def _namespace_of(qname):
    return qname.rsplit("@", 1)[1]


class RecursionRule(registry.Rule):
    """Node inputs: ``[*entry_args, *environment]``; outputs: the entry function's outputs."""

    kind = "recursion"
    spec_fields = {"entry": "text", "num_args": "count", "namespace": "text"}
    graph_fields = {"num_args": "count", "max_depth": "count", "name": "text",
                    "remat": "optional flag"}

    def rematerialised(self, node):
        """Whether the node's training forward keeps nothing but its inputs and outputs
        (NOTE [hybridized remat recursion] in recursion/planned_backward.py)."""
        return any(g.get("remat") for g in node.spec["graphs"].values())

    def check_recomputed(self, node, heads, out_data):
        """A rematerialised node's forward re-run in backward (``heads``) must give the
        forward's outputs: its random operators are seeded alike, but may draw in another
        order when the re-run takes another executor path (NOTE [hybridized remat recursion])."""
        for (value, k, row), kept in zip(heads, out_data):
            if row is not None or not _node.is_float(value.dtype) or value.shape != kept.shape:
                continue
            bad = _remat._differs(value, kept)
            if bad is not None and bad.asscalar():
                spec = node.spec
                raise RuntimeError(
                    "gluon_cf.recursive %r%s: with remat=True, the recursion recomputed in "
                    "backward gave other values than its forward: its random operators (%s) "
                    "drew other numbers (the re-run took another executor path), so its "
                    "gradient would not be the forward's. Use remat=False"
                    % (spec["graphs"][spec["entry"]]["name"],
                       _node.created_at(node), ", ".join(random_ops(spec))))

    def spec_problem(self, spec):
        graphs, entry = spec["graphs"], spec["entry"]
        if not isinstance(graphs, dict) or entry not in graphs:
            return "field 'entry' names function %r, which field 'graphs' does not hold" % (
                entry,)
        if spec["num_args"] > spec["num_inputs"]:
            return "field 'num_args' is %d, more than the node's %d inputs" % (
                spec["num_args"], spec["num_inputs"])
        for qname, graph in graphs.items():
            if not isinstance(graph, dict):
                continue                       # (checked as a subgraph next)
            depth, args = graph.get("max_depth"), graph.get("num_args")
            if isinstance(depth, int) and not 1 <= depth <= MAX_DEPTH:
                return "function %r: field 'max_depth' must be from 1 to %d, got %s" % (
                    qname, MAX_DEPTH, depth)
            if qname == entry and isinstance(args, int) and args != spec["num_args"]:
                return "the entry function %r takes %d arguments, but the node passes %d" % (
                    qname, args, spec["num_args"])
        return None

    def num_slots(self, spec, graph):
        # A function reads its own arguments, then the environment, the node's inputs after
        # the entry's arguments.
        return graph["num_args"] + spec["num_inputs"] - spec["num_args"]

    # An environment's shape known in part (MXNet's 0 for an unknown dimension) is read as
    # far as it is known (NOTE [an environment known in part] in table.py); an argument's is
    # unknown.
    accepts_partial_shapes = True

    def infer_shape(self, node, in_shapes):
        table = _table(node.spec["namespace"], node)
        n = node.spec["num_args"]
        args = [s if registry.is_complete(s) or registry.is_dynamic(s) else None
                for s in in_shapes[:n]]
        env = list(in_shapes[n:])   # (in part unknown: NOTE [an environment known in part])
        if not known_in_part(env):   # NOTE [one table, many threads] in table.py
            table.env_shapes = env
            return list(args) + env, table.out_shapes(node.spec["entry"], args, env)
        env, outs = table.infer_environment(node.spec["entry"], args, env)
        return list(args) + env, outs

    def infer_type(self, node, in_types):
        table = _table(node.spec["namespace"], node)
        n = node.spec["num_args"]
        env = list(in_types[n:])
        if None not in env:
            table.env_types = env
            return list(in_types), table.out_types(node.spec["entry"], in_types[:n], env)
        env, outs = table.infer_environment_types(node.spec["entry"], in_types[:n], env)
        return list(in_types[:n]) + env, outs

    def forward(self, node, inputs, out_shapes, frame):
        n = node.spec["num_args"]
        context = RecursionContext(node, inputs[n:], frame.recursion if frame else None)
        # This call's environment is the table's last seen from now on: a body inferred at
        # run time keys its caches with it (InvokeRule.inference_key), and a call whose
        # inference is cached (the block's signature seen before) infers the recursion node
        # no more. Left as an earlier call of other shapes set it (one that failed), the
        # next call's bodies were inferred for those shapes: calls with no base case reached.
        table = _table(node.spec["namespace"], node)
        table.env_shapes = list(context.env_shapes)
        table.env_types = [np.dtype(t).type for t in context.env_dtypes]
        return (yield context.request(node.spec["entry"], inputs[:n], frame, 1))

    def batching_rule(self, node, in_flags, in_shapes, out_shapes, used, rows):
        # The environment is shared by every invocation, whatever its shape: only the entry
        # arguments need one row per invocation.
        num_args = json.loads(node["attrs"]["spec"])["num_args"]
        _call_batching_rule(node, in_flags[:num_args], in_shapes[:num_args])

    def to_onnx(self, custom_node):
        """Export rule for standard ONNX: the call trees' levels as two Loops (NOTE [recursion
        as ONNX loops] in ``export/onnx_recursion.py``), for functions whose structure comes
        from their index arguments alone; NotImplementedError naming the function otherwise."""
        from gluon_cf.export.onnx_recursion import lower_recursion
        return lower_recursion(custom_node)

    def to_artifact(self, custom_node):
        """Export rule: recursion -> Recursion(*entry_args, *environment) holding the function
        graphs (NOTE [artifact format] in ``export/artifact_format.py``)."""
        from onnx import helper

        from gluon_cf.export.artifact_format import DOMAIN
        from gluon_cf.export.artifact_kit import signatures as conversion_signatures
        from gluon_cf.export.onnx_kit import ConverterNode

        signatures = conversion_signatures()
        node = ConverterNode(custom_node, "recursion")
        spec = node.spec
        num_args, entry, functions = spec["num_args"], spec["entry"], spec["graphs"]
        env = [(shape, dtype) for shape, dtype in zip(node.in_shapes[num_args:],
                                                      custom_node.input_dtypes[num_args:])]
        for qname, function in functions.items():
            signatures.names[qname] = function["name"]
        signatures.arg_dtypes.setdefault(entry, list(custom_node.input_dtypes[:num_args]))

        graphs: Dict[str, dict] = {}   # qname -> the function's artifact graph
        while len(graphs) < len(functions):
            ready = [q for q in functions if q not in graphs and q in signatures.arg_dtypes]
            if not ready:
                missing = [functions[q]["name"] for q in functions if q not in graphs]
                raise ValueError(f"save_artifact: recursion node {node.name!r}: functions "
                                 f"{missing} are in its table but no converted call reaches "
                                 f"them")
            for qname in ready:
                graphs[qname] = _function_to_artifact(custom_node, qname, functions[qname], env,
                                                  signatures)
        order = [entry] + [q for q in functions if q != entry]
        onnx_node = helper.make_node(
            "Recursion", list(custom_node.inputs), list(custom_node.outputs),
            name=node.fresh("Recursion"), domain=DOMAIN, entry=entry,
            functions=[graphs[q] for q in order],
            num_args=[functions[q]["num_args"] for q in order],
            max_depth=[functions[q]["max_depth"] for q in order],
            function_names=[functions[q]["name"] for q in order])
        return [onnx_node], signatures.outputs[entry]


class InvokeRule(registry.Rule):
    """Node inputs: the callee's arguments; outputs: the callee's outputs."""

    kind = "invoke"
    spec_fields = {"function": "text"}
    graph_roles = ()

    def infer_shape(self, node, in_shapes):
        return self._ask_table(node, in_shapes, "out_shapes")

    def infer_type(self, node, in_types):
        return self._ask_table(node, in_types, "out_types")

    @staticmethod
    def inference_key(qnames, question):
        """What the answers of ``_ask_table`` for calls of ``qnames`` depend on besides
        their arguments: their tables' environments as this thread's inference sees them,
        shapes without the rows of take tables (``_env_key``) or dtypes (``question``:
        "shapes", "types"). A graph holding calls keys its inference caches with it (NOTE
        [inference of graphs with calls] in graph/runtime.py)."""
        key = []
        for qname in qnames:
            table = _table(_namespace_of(qname))
            env = None if table is None else getattr(table, "env_" + question)
            key.append(None if env is None else table._env_key(env) if question == "shapes"
                       else tuple(str(t) for t in env))
        return tuple(key)

    @staticmethod
    def _ask_table(node, values, question):
        """The callee's output shapes/types from its function table (unknown before the
        table's recursion node was inferred)."""
        qname = node.spec["function"]
        table = _table(_namespace_of(qname))
        if table is None:
            return list(values), [None] * node.num_outputs
        return list(values), getattr(table, question)(qname, values)

    def forward(self, node, inputs, out_shapes, frame):
        qname = node.spec["function"]
        if frame is None or frame.recursion is None:
            raise mx.MXNetError("gluon_cf.invoke: call of %r outside of its recursion node"
                                % qname)
        callee = frame.recursion.find(qname)
        return (yield callee.request(qname, inputs, frame, frame.depth + 1))

    def batching_rule(self, node, in_flags, in_shapes, out_shapes, used, rows):
        _call_batching_rule(node, in_flags, in_shapes)

    def to_onnx(self, custom_node):
        """Standard ONNX: call sites are lowered with their recursion node (which replaces each
        by the rows of its callee's level), so one met on its own is outside any function."""
        raise NotImplementedError(
            f"export_onnx: invoke node {custom_node.name!r} is outside the recursive functions "
            f"of a recursion node; export the model with gluon_cf.export.save_artifact")

    def to_artifact(self, custom_node):
        """Export rule: invoke -> Invoke(*args), attribute ``function``: the callee's qualified
        name (NOTE [artifact format])."""
        from onnx import helper

        from gluon_cf.export.artifact_format import DOMAIN
        from gluon_cf.export.artifact_kit import signatures as conversion_signatures

        signatures = conversion_signatures()
        spec = json.loads(custom_node.attrs["spec"])
        qname = spec["function"]
        dtypes = list(custom_node.input_dtypes)
        known = signatures.arg_dtypes.setdefault(qname, dtypes)
        if [np.dtype(d) for d in known] != [np.dtype(d) for d in dtypes]:
            # (the executors run each dtype as its own batch; an artifact's function has one
            # signature, its Invoke one per call of the whole recursion)
            where = custom_node.attrs.get(SOURCE_ATTR)
            name = signatures.names.get(qname, qname)
            raise NotImplementedError(
                f"{where + ': ' if where else ''}save_artifact: this call of {name!r} (node "
                f"{custom_node.name!r}) passes arguments of dtypes {[str(d) for d in dtypes]}, "
                f"another call (or the outermost) {[str(d) for d in known]}: a function of an "
                f"artifact takes one dtype per argument; cast the arguments to one dtype (e.g. "
                f"F.cast(i, {str(known[0])!r})) where the function is called")
        out_dtypes = custom_node.output_dtypes
        if out_dtypes is None or any(d is None for d in out_dtypes):
            out_dtypes = signatures.outputs.get(qname)
        if out_dtypes is None:
            raise ValueError(f"save_artifact: MXNet cannot infer the output dtypes of call "
                             f"{custom_node.name!r} of {qname!r}")
        signatures.calls.append((qname, custom_node.name, list(out_dtypes)))
        onnx_node = helper.make_node("Invoke", list(custom_node.inputs), list(custom_node.outputs),
                                     name=f"{custom_node.name}/Invoke", domain=DOMAIN,
                                     function=qname)
        return [onnx_node], list(out_dtypes)


def _function_to_artifact(custom_node, qname, function, env, signatures):
    from gluon_cf.export.artifact_kit import FunctionNode, planned_shapes

    num_args = function["num_args"]
    arg_dtypes = signatures.arg_dtypes[qname]
    if len(arg_dtypes) != num_args:
        raise ValueError(f"save_artifact: {function['name']!r} takes {num_args} arguments but "
                         f"is called with {len(arg_dtypes)}")
    planned = (planned_shapes().get(("function", qname)) or ([None] * num_args, None))[0]
    slot_specs = list(zip(planned, arg_dtypes)) + env
    converted = FunctionNode(custom_node, slot_specs).convert(
        qname, qname, formal=range(len(slot_specs)))
    converted.graph.name = qname
    signatures.outputs[qname] = [np.dtype(v.dtype) for v in converted.outputs]
    return converted.graph


def _call_batching_rule(node, in_flags, in_shapes):
    """Batching rule of recursion and invoke nodes (NOTE [row-wise rules]): calls batch with
    the other calls when each shared argument is one row (the callee checks its own body)."""
    for i, (shape, batched) in enumerate(zip(in_shapes, in_flags)):
        if not batched and shape[0] != 1:
            raise rowwise.Rejected(node, "passes a shared argument #%d of shape %s, which is not "
                                   "one row" % (i, shape), rowwise.HINT_SHARED)


registry.register(RecursionRule())
registry.register(InvokeRule())
