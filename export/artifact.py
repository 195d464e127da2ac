"""Loading and running artifacts (and plain ONNX models): the interpreter.

    save_artifact(net, [tokens, left, right, roots], "tree.onnx", dynamic_axes={0: [0], ...})
    f = load("tree.onnx")              # no model class, no MXNet: onnxruntime runs the ops
    logits, = f(tokens, left, right, roots)

Standard ONNX has no recursion, so :func:`gluon_cf.export.export_onnx` cannot export a model
with ``@gluon_cf.recursive`` functions.  An *artifact* is an ONNX model extended by exactly two
operators, run by :func:`load` (

NOTE [artifact loader]
    :func:`load` validates the file (
"""
import threading
import time
from typing import Dict, List, Optional, Set, Union

import numpy as np
import onnx
from onnx import helper, numpy_helper

from gluon_cf._typing import Path
from gluon_cf.executor import run
from gluon_cf.staging import stages

from . import index_bounds
from .artifact_format import (DEFAULT_DOMAINS, DOMAIN, ELEM_TYPES, TENSOR_OF_DTYPE,
                              ArtifactDepthError, ArtifactError, Limits, describe_value_info,
                              first_line, is_artifact)
from .artifact_validate import check_model, read_model, session_disabled_optimizers, sub_where

__all__ = ["load", "Artifact", "ArtifactError", "ArtifactDepthError", "Limits", "is_artifact",
           "DOMAIN"]


def load(source: Union[Path, bytes], *, limits: Optional[Limits] = None) -> "Artifact":
    """Load an artifact (or a plain ONNX model) from a path or from ``bytes``, validating it
    against ``limits`` (a :class:`Limits`; files may come from anyone, so sizes, nesting,
    recursion depth and run time are bounded); returns an :class:`Artifact`, called as
    ``artifact(*numpy_arrays) -> [numpy arrays]``.

    A file that breaks the format or one of ``limits`` raises :class:`ArtifactError` naming what
    and where, before anything runs; a plain ONNX model (e.g. from :func:`export_onnx`) loads too:

    >>> import numpy as np
    >>> from onnx import TensorProto, helper
    >>> from gluon_cf.export import ArtifactError, load
    >>> graph = helper.make_graph(
    ...     [helper.make_node("Add", ["x", "x"], ["y"])], "double",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    >>> double = load(helper.make_model(graph).SerializeToString())
    >>> double(np.array([1, 2], np.float32))
    [array([2., 4.], dtype=float32)]
    >>> try:
    ...     load(b"not a model")
    ... except ArtifactError as error:
    ...     print("refused")
    refused
    """
    limits = limits or Limits()
    model = read_model(source, limits)
    return Artifact(model, limits)


class Artifact:
    """A loaded, validated artifact.  ``inputs`` / ``outputs``: ``(name, shape, dtype)`` as
    declared, ``None`` for a dim that may vary."""

    def __init__(self, model: onnx.ModelProto, limits: Limits) -> None:
        self.limits = limits
        opset = check_model(model, limits)
        self._opset, self._ir_version = opset, max(int(model.ir_version), 7)
        graph = model.graph
        constants = {init.name for init in graph.initializer}
        for value_info in list(graph.input) + list(graph.output):
            if value_info.type.WhichOneof("value") != "tensor_type":
                raise ArtifactError(f"the main graph's input or output {value_info.name!r} "
                                    f"has no tensor type")
        self.inputs = [describe_value_info(vi) for vi in graph.input if vi.name not in constants]
        try:
            self.index_bounds = index_bounds.read({p.key: p.value for p in model.metadata_props})
        except ValueError as err:
            raise ArtifactError(str(err)) from None
        self.outputs = [describe_value_info(vi) for vi in graph.output]
        self._constant_shapes = index_bounds.initializer_shapes(graph)
        self._main = _Compiler(self).program(graph, "the main graph", ())

    def __repr__(self):
        show = lambda specs: ", ".join(f"{n}{list(s)}:{d}" for n, s, d in specs)  # noqa: E731
        return f"<gluon_cf artifact ({show(self.inputs)}) -> ({show(self.outputs)})>"

    def __call__(self, *arrays: np.ndarray) -> List[np.ndarray]:
        if len(arrays) != len(self.inputs):
            raise ValueError(f"artifact: expected {len(self.inputs)} inputs "
                             f"{[name for name, _, _ in self.inputs]}, got {len(arrays)}")
        values = [_check_input(x, spec) for x, spec in zip(arrays, self.inputs)]
        try:  # NOTE [index bounds] in index_bounds.py
            index_bounds.check(self.index_bounds, [n for n, _, _ in self.inputs], values,
                               self._constant_shapes)
        except ValueError as err:
            raise ValueError(f"artifact: {err}") from None
        budget = _Budget(self.limits)
        previous = getattr(_budgets, "current", None)
        _budgets.current = budget
        try:
            return run(self._main.run(values, None, None), step=budget.step)
        finally:
            budget.close()
            _budgets.current = previous


def _check_input(x, spec):
    name, shape, dtype = spec
    x = np.asarray(x)
    if x.dtype != dtype:
        # Integers (indices) are cast where their values stay the same. Floats are not: the
        # hybridized block computes in x's dtype or refuses it against its parameters', and
        # onnxruntime refuses it; a float64 x cast to float32 gave float32 results, silently.
        cast = x.astype(dtype) if x.dtype.kind in "biu" and \
            np.can_cast(x.dtype, dtype, "same_kind") else None
        if cast is None or not np.array_equal(cast, x):
            raise ValueError(f"artifact: input {name!r} must have dtype {dtype}, got "
                             f"{x.dtype}{'' if cast is None else ' of values it changes'} "
                             f"(cast it first: x.astype({str(dtype)!r}))")
        x = cast
    if shape is not None:
        if x.ndim != len(shape) or any(d is not None and d != s for d, s in zip(shape, x.shape)):
            raise ValueError(f"artifact: input {name!r} must have shape {list(shape)} (None: "
                             f"any size), got {list(x.shape)}; other sizes need dynamic_axes "
                             f"at export")
    return np.ascontiguousarray(x)




# ----------------------------------------------------------------------------- compilation

class _Compiler:
    """Turns validated graphs into :class:`_Program` objects (NOTE [artifact loader])."""

    def __init__(self, artifact):
        self.artifact = artifact
        self.limits = artifact.limits

    def program(self, graph, where, tables, parent_constants=None):
        constants = {}
        for init in graph.initializer:
            constants[init.name] = _to_array(init, f"{where}: initializer {init.name!r}")
        small = dict(parent_constants or {})  # small integer constants, for Loop trip counts
        small.update({k: v for k, v in constants.items() if v.size == 1})
        entries = []  # (node, interpreted step or None, names it reads)
        for node in graph.node:
            label = f"{where}: node {node.name or node.op_type!r} ({node.op_type})"
            step, reads = self.node(node, label, tables, small)
            entries.append((node, step, reads))
            if node.op_type == "Constant" and node.domain in DEFAULT_DOMAINS:
                value = _constant_value(node, label)
                if value is not None and value.size == 1:
                    small[node.output[0]] = value
        return _Program(self.artifact, graph, where, constants, entries)

    def node(self, node, label, tables, small):
        """``(interpreted step or None, names the node reads incl. its subgraphs' outer reads)``."""
        reads = [n for n in node.input if n]
        if node.domain == DOMAIN and node.op_type == "Invoke":
            name = helper.get_attribute_value(node.attribute[0]).decode()
            table = next(t for t in reversed(tables) if name in t.functions)
            return _Invoke(node, label, table, name), reads
        if node.domain == DOMAIN:
            return self.recursion(node, label, tables), reads
        if node.op_type == "Loop" and node.input and node.input[0] in small:
            trips = small[node.input[0]]
            if trips.dtype.kind in "iu" and int(trips.reshape(-1)[0]) > \
                    self.limits.max_loop_iterations:
                raise ArtifactError(f"{label}: trip count {int(trips.reshape(-1)[0])} is more "
                                    f"than max_loop_iterations="
                                    f"{self.limits.max_loop_iterations}")
        subs = {}
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                subs[attr.name] = self.program(attr.g, sub_where(node, attr.name), tables,
                                               small)
        for sub in subs.values():
            reads.extend(sub.free)
        if not any(sub.interpreted for sub in subs.values()):
            return None, reads
        make = {"If": _If, "Loop": _Loop, "Scan": _Scan}.get(node.op_type)
        if make is None:
            raise ArtifactError(f"{label}: a {node.op_type} node cannot contain Recursion or "
                                f"Invoke nodes (only If, Loop and Scan can)")
        return make(node, label, subs, self.limits), reads

    def recursion(self, node, label, tables):
        attrs = {attr.name: helper.get_attribute_value(attr) for attr in node.attribute}
        table = _Table(attrs["entry"].decode())
        inner = tables + (table,)
        for graph, num_args, max_depth, name in zip(attrs["functions"], attrs["num_args"],
                                                     attrs["max_depth"],
                                                     attrs["function_names"]):
            table.functions[graph.name] = _Function(graph.name, name.decode(), num_args,
                                                    max_depth)
        for graph in attrs["functions"]:
            function = table.functions[graph.name]
            function.program = self.program(graph, f"function {function.name!r}", inner)
        table.num_args = table.functions[table.entry].num_args
        return _Recursion(node, label, table)


def _to_array(tensor, what):
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as err:  # noqa: BLE001 -- malformed data: wrong length, bad type
        raise ArtifactError(f"{what}: cannot decode its data: {first_line(err)}") from None
    if array.dtype.kind not in "biuf":
        raise ArtifactError(f"{what}: unsupported element type {array.dtype}")
    return array


def _constant_value(node, label):
    for attr in node.attribute:
        if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
            if attr.t.data_type in ELEM_TYPES:
                return _to_array(attr.t, f"{label} value")
    return None


class _Function:
    def __init__(self, key, name, num_args, max_depth):
        self.key, self.name = key, name
        self.num_args, self.max_depth = num_args, max_depth
        self.program = None


class _Table:
    """The function table of one Recursion node."""

    def __init__(self, entry):
        self.entry = entry
        self.num_args = None
        self.functions = {}


# ----------------------------------------------------------------------------- programs

class _Program:
    """One graph, compiled: pieces (onnxruntime) and interpreted steps, in order."""

    def __init__(self, artifact, graph, where, constants, entries):
        self.where = where
        # An input that is also an initializer has a default value: it stays a constant.
        self.input_names = [vi.name for vi in graph.input if vi.name not in constants]
        self.output_names = [vi.name for vi in graph.output]
        self.output_infos = list(graph.output)
        self.constants = constants
        defined = set(self.input_names) | set(constants)
        for node, _, _ in entries:
            defined.update(n for n in node.output if n)
        read = {n for _, _, reads in entries for n in reads} | set(self.output_names)
        self.free = sorted(read - defined)  # read from enclosing graphs
        self.interpreted = any(step is not None for _, step, _ in entries)
        self.steps = self._partition(artifact, entries)

    def _partition(self, artifact, entries):
        """Pieces and interpreted steps, stage by stage (NOTE [staging] in gluon_cf)."""
        producer: Dict[str, int] = {}          # name -> the entry defining it
        predecessors: List[Set[int]] = []
        for k, (node, _, reads) in enumerate(entries):
            predecessors.append({producer[name] for name in reads if name in producer})
            producer.update((name, k) for name in node.output if name)
        steps = []
        for ordinary, special in stages(predecessors, [step is not None for _, step, _ in entries]):
            if ordinary:
                steps.append(self._piece(artifact, entries, ordinary))
            steps.extend(entries[k][1] for k in special)
        return steps

    def _piece(self, artifact, entries, members):
        member_set = set(members)
        defined = {n for k in members for n in entries[k][0].output if n}
        reads: List[str] = []
        for k in members:
            reads.extend(n for n in entries[k][2] if n not in defined and n not in reads)
        used_later = set(self.output_names)
        for k, (_, _, node_reads) in enumerate(entries):
            if k not in member_set:
                used_later.update(node_reads)
        outputs = [n for k in members for n in entries[k][0].output if n and n in used_later]
        embedded = [n for n in reads if n in self.constants]
        inputs = [n for n in reads if n not in self.constants]
        return _Piece(artifact, self, [entries[k][0] for k in members], inputs, outputs,
                      embedded)

    def run(self, inputs, parent, ctx):
        """Generator: the graph's outputs (NOTE [trampoline] in gluon_cf's executor)."""
        values = dict(self.constants)
        values.update(zip(self.input_names, inputs))
        scope = _Values(values, parent)
        for step in self.steps:
            if isinstance(step, _Piece):
                step.run(scope)
            else:
                outputs = yield step.run(scope, ctx)
                values.update((n, v) for n, v in zip(step.node.output, outputs) if n)
        return [scope.get(name) for name in self.output_names]


class _Values:
    """The values of one graph run, and of the runs it is nested in."""

    __slots__ = ("values", "parent")

    def __init__(self, values, parent):
        self.values = values
        self.parent = parent

    def get(self, name):
        scope = self
        while scope is not None:
            value = scope.values.get(name)
            if value is not None:
                return value
            scope = scope.parent
        raise ArtifactError(f"value {name!r} is read but was never computed")


class _Piece:
    """Ordinary nodes run as one onnxruntime session per input dtypes and ranks."""

    def __init__(self, artifact, program, nodes, inputs, outputs, embedded):
        self.artifact = artifact
        self.program = program
        self.nodes = nodes
        self.inputs = inputs
        self.outputs = outputs
        self.embedded = embedded
        self.sessions = {}

    def describe(self):
        names = [n.name or n.op_type for n in self.nodes]
        shown = ", ".join(repr(n) for n in names[:3]) + (", ..." if len(names) > 3 else "")
        return f"{self.program.where}: nodes {shown}"

    def run(self, scope):
        feeds = {name: np.ascontiguousarray(scope.get(name)) for name in self.inputs}
        key = tuple((v.dtype.str, v.ndim) for v in feeds.values())
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = self._session(feeds)
        budget = getattr(_budgets, "current", None)
        try:
            outputs = session.run(self.outputs, feeds,
                                  None if budget is None else budget.run_options())
        except Exception as err:  # noqa: BLE001 -- onnxruntime's error classes
            raise self._failure(err, budget) from None
        if budget is not None:
            budget.produced(self.describe(), zip(self.outputs, outputs))
        scope.values.update(zip(self.outputs, outputs))

    def _failure(self, err, budget):
        """The ArtifactError for onnxruntime's ``err`` (NOTE [limits inside pieces])."""
        if budget is not None and budget.timed_out:
            return budget.timeout_error(f"{self.describe()}: stopped inside onnxruntime: ")
        if "Available memory of" in str(err) and "bfc_arena" in str(err):
            cap = self.artifact.limits.max_tensor_bytes
            return ArtifactError(f"{self.describe()}: onnxruntime needed more than "
                                 f"max_tensor_bytes={cap} bytes for the tensors inside this "
                                 f"piece (a tensor over the limit, or tensors alive together "
                                 f"over it)")
        return ArtifactError(f"{self.describe()}: onnxruntime failed: {first_line(err)}")

    def _session(self, feeds):
        import onnxruntime as ort

        inputs = []
        for name, value in feeds.items():
            elem = TENSOR_OF_DTYPE.get(value.dtype)
            if elem is None:
                raise ArtifactError(f"{self.describe()}: value {name!r} has unsupported dtype "
                                    f"{value.dtype}")
            inputs.append(helper.make_tensor_value_info(name, elem, [None] * value.ndim))
        initializers = [numpy_helper.from_array(self.program.constants[name], name)
                        for name in self.embedded]
        graph = helper.make_graph(self.nodes, "piece", inputs,
                                  [onnx.ValueInfoProto(name=n) for n in self.outputs],
                                  initializers)
        model = helper.make_model(graph, ir_version=self.artifact._ir_version,
                                  opset_imports=[helper.make_opsetid("", self.artifact._opset)])
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 4
        options.add_session_config_entry("session.use_env_allocators", "1")
        try:
            with _arena_lock:   # NOTE [limits inside pieces]
                ort.create_and_register_allocator(
                    ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                                      ort.OrtMemType.DEFAULT),
                    ort.OrtArenaCfg({"max_mem": self.artifact.limits.max_tensor_bytes,
                                     "arena_extend_strategy": 1}))   # kSameAsRequested
                # NoopElimination drops a float64 x * c, x / c (c within float32's rounding
                # of 1) and x + c, x - c (c rounding to float32's 0): x * 1.00000005 was x;
                # ConstantFolding may go too (NOTE [onnxruntime folding nested If])
                return ort.InferenceSession(model.SerializeToString(), options,
                                            providers=["CPUExecutionProvider"],
                                            disabled_optimizers=session_disabled_optimizers(model))
        except Exception as err:  # noqa: BLE001 -- onnxruntime's error classes
            raise ArtifactError(f"{self.describe()}: onnxruntime rejects them: "
                                f"{first_line(err)}") from None


# NOTE [limits inside pieces]
#     A piece runs in onnxruntime, out of the interpreter's reach: a ``Loop`` inside it with a
#     computed trip count of 1e12, or an ``Expand`` to 6 GiB, would run unchecked between two
#     of the interpreter's steps. So each piece's session allocates from its own memory arena
#     capped at ``max_tensor_bytes`` (onnxruntime's environment allocator, registered afresh
#     just before the session is created, which takes the one registered then; "same as
#     requested" growth, and shrunk after each run): a tensor inside the piece over the limit,
#     or tensors alive together over it, fails the allocation before any memory is touched,
#     and the error names the limit. And each call's pieces run with one ``RunOptions`` whose
#     ``terminate`` flag a timer sets at the call's deadline: onnxruntime checks it between
#     nodes, and between the steps of a ``Loop`` or ``Scan``, so ``timeout`` holds inside
#     pieces too.
_arena_lock = threading.Lock()


# ----------------------------------------------------------------------------- interpreted nodes

class _Step:
    def __init__(self, node, label):
        self.node = node
        self.label = label

    def read(self, scope, k):
        return scope.get(self.node.input[k]) if self.node.input[k] else None


class _Recursion(_Step):
    def __init__(self, node, label, table):
        super().__init__(node, label)
        self.table = table

    def run(self, scope, ctx):
        args = [scope.get(name) for name in self.node.input]
        n = self.table.num_args
        context = _Context(self.table, args[n:], ctx)
        return (yield context.call(self.table.entry, args[:n]))


class _Invoke(_Step):
    def __init__(self, node, label, table, function):
        super().__init__(node, label)
        self.table = table
        self.function = function

    def run(self, scope, ctx):
        args = [scope.get(name) for name in self.node.input]
        target = ctx
        while target is not None and target.table is not self.table:
            target = target.parent
        if target is None:
            raise ArtifactError(f"{self.label}: Invoke of {self.function!r} outside a run of "
                                f"the Recursion node defining it")
        return (yield target.call(self.function, args))


class _Context:
    """One run of a Recursion node: its environment values and the depth of nested calls."""

    def __init__(self, table, env, parent):
        self.table = table
        self.env = env
        self.parent = parent
        self.depth = 0

    def call(self, key, args):
        function = self.table.functions[key]
        self.depth += 1
        try:
            if self.depth > function.max_depth:
                raise ArtifactDepthError(
                    f"recursive function {function.name!r} exceeded max_depth="
                    f"{function.max_depth} nested calls; does it reach a base case?")
            return (yield function.program.run(list(args) + self.env, None, self))
        finally:
            self.depth -= 1


class _If(_Step):
    def __init__(self, node, label, subs, limits):
        super().__init__(node, label)
        self.branches = [subs.get("then_branch"), subs.get("else_branch")]
        for branch in self.branches:
            if branch is None or len(branch.output_names) != len(node.output):
                raise ArtifactError(f"{label}: needs then_branch and else_branch graphs with "
                                    f"{len(node.output)} outputs each")

    def run(self, scope, ctx):
        take = _truth(self.read(scope, 0), self.label, "condition")
        return (yield self.branches[0 if take else 1].run([], scope, ctx))


class _Loop(_Step):
    def __init__(self, node, label, subs, limits):
        super().__init__(node, label)
        self.body = subs.get("body")
        self.limit = limits.max_loop_iterations
        self.num_vars = len(node.input) - 2
        if self.body is None or self.num_vars < 0 \
                or len(self.body.input_names) != self.num_vars + 2 \
                or len(self.body.output_names) < self.num_vars + 1 \
                or len(node.output) != len(self.body.output_names) - 1:
            raise ArtifactError(f"{label}: inputs, outputs and body signature do not match "
                                f"(ONNX Loop: body (i, cond, *vars) -> (cond, *vars, *scans))")

    def run(self, scope, ctx):
        trips = self.read(scope, 0)
        trips = None if trips is None else _scalar(trips, self.label, "trip count", "iu")
        use_cond = bool(self.node.input[1])
        cond = _truth(self.read(scope, 1), self.label, "condition") if use_cond else True
        loop_vars = [self.read(scope, k) for k in range(2, len(self.node.input))]
        steps = []
        i = 0
        while (trips is None or i < trips) and cond:
            if i >= self.limit:
                raise ArtifactError(f"{self.label}: more than max_loop_iterations="
                                    f"{self.limit} iterations")
            outputs = yield self.body.run(
                [np.array(i, np.int64), np.array(cond)] + loop_vars, scope, ctx)
            if use_cond:
                cond = _truth(outputs[0], self.label, "condition")
            loop_vars = outputs[1:1 + self.num_vars]
            steps.append(outputs[1 + self.num_vars:])
            i += 1
        infos = self.body.output_infos[1 + self.num_vars:]
        return loop_vars + _stack(steps, infos, self.label)


class _Scan(_Step):
    def __init__(self, node, label, subs, limits):
        super().__init__(node, label)
        self.body = subs.get("body")
        self.limit = limits.max_loop_iterations
        attrs = {a.name: a for a in node.attribute}
        extra = sorted(set(attrs) - {"body", "num_scan_inputs"})
        if extra:
            raise ArtifactError(f"{label}: a Scan containing Recursion or Invoke nodes supports "
                                f"only the default axes and directions, got attributes {extra}")
        num = attrs.get("num_scan_inputs")
        self.num_scans = num.i if num is not None and num.type == num.INT else -1
        self.num_states = len(node.input) - self.num_scans
        if self.body is None or not 0 < self.num_scans <= len(node.input) \
                or len(self.body.input_names) != len(node.input) \
                or len(self.body.output_names) != len(node.output) \
                or len(node.output) < self.num_states:
            raise ArtifactError(f"{label}: inputs, outputs and body signature do not match "
                                f"(ONNX Scan: body (*states, *slices) -> (*states, *scans))")

    def run(self, scope, ctx):
        values = [self.read(scope, k) for k in range(len(self.node.input))]
        states, data = values[:self.num_states], values[self.num_states:]
        if any(x is None or x.ndim == 0 for x in data):
            raise ArtifactError(f"{self.label}: scan inputs must have rank >= 1")
        length = data[0].shape[0]
        if any(x.shape[0] != length for x in data):
            raise ArtifactError(f"{self.label}: scan inputs differ in length "
                                f"{[x.shape[0] for x in data]}")
        if length > self.limit:
            raise ArtifactError(f"{self.label}: {length} steps, more than "
                                f"max_loop_iterations={self.limit}")
        steps = []
        for t in range(length):
            outputs = yield self.body.run(states + [x[t] for x in data], scope, ctx)
            states = outputs[:self.num_states]
            steps.append(outputs[self.num_states:])
        infos = self.body.output_infos[self.num_states:]
        return states + _stack(steps, infos, self.label)


def _truth(value, label, what):
    if value is None or value.size != 1:
        raise ArtifactError(f"{label}: the {what} must have exactly one element, got shape "
                            f"{None if value is None else list(value.shape)}")
    return bool(value.reshape(-1)[0])


def _scalar(value, label, what, kinds):
    if value.size != 1 or value.dtype.kind not in kinds:
        raise ArtifactError(f"{label}: the {what} must be one integer, got {value.dtype} of "
                            f"shape {list(value.shape)}")
    return int(value.reshape(-1)[0])


def _stack(steps, infos, label):
    """Step outputs stacked on a new axis 0; zero steps: empty arrays of the declared rank."""
    if not steps:
        stacked = []
        for info in infos:
            tensor = info.type.tensor_type
            dtype = ELEM_TYPES.get(tensor.elem_type, np.dtype(np.float32))
            dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tensor.shape.dim]
            stacked.append(np.zeros([0] + dims, dtype))
        return stacked
    columns = []
    for k, column in enumerate(zip(*steps)):
        try:
            columns.append(np.stack(column))
        except ValueError:
            raise ArtifactError(f"{label}: scan output {k} changes shape between steps "
                                f"({sorted({c.shape for c in column})})") from None
    return columns


# ----------------------------------------------------------------------------- trampoline

_budgets = threading.local()   # the _Budget of the call running in this thread


class _Budget:
    """What one call of an artifact may still spend (``Limits``: steps, bytes, wall time)."""

    def __init__(self, limits):
        self.limits = limits
        self.steps = 0
        self.bytes = 0
        self.deadline = None if limits.timeout is None else time.monotonic() + limits.timeout
        self.timed_out = False
        self._run_options = None
        self._timer = None

    def run_options(self):
        """The onnxruntime ``RunOptions`` of this call's pieces (NOTE [limits inside pieces])."""
        if self._run_options is None:
            import onnxruntime as ort

            options = self._run_options = ort.RunOptions()
            options.log_severity_level = 4   # its errors become ArtifactErrors
            options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
            if self.deadline is not None:
                self._timer = threading.Timer(max(0.0, self.deadline - time.monotonic()),
                                              self._terminate)
                self._timer.daemon = True
                self._timer.start()
        if self.timed_out:
            raise self.timeout_error()
        return self._run_options

    def _terminate(self):
        self.timed_out = True
        if self._run_options is not None:   # always: the timer starts once they exist
            self._run_options.terminate = True

    def close(self):
        if self._timer is not None:
            self._timer.cancel()

    def timeout_error(self, where=""):
        return ArtifactError(f"{where}the artifact ran longer than timeout="
                             f"{self.limits.timeout} s")

    def step(self):
        """One more generator started; an ArtifactError when over a limit, else None."""
        self.steps += 1
        if self.steps > self.limits.max_steps:
            return ArtifactError(f"the artifact ran more than max_steps={self.limits.max_steps} "
                                 f"steps (invocations, pieces and loop steps) in one call")
        if self.deadline is not None and self.steps % 64 == 1 and \
                time.monotonic() > self.deadline:
            return self.timeout_error()
        return None

    def produced(self, where, arrays):
        for name, array in arrays:
            size = getattr(array, "nbytes", 0)
            if size > self.limits.max_tensor_bytes:
                raise ArtifactError(f"{where}: output {name!r} has {size} bytes, more than "
                                    f"max_tensor_bytes={self.limits.max_tensor_bytes}")
            self.bytes += size
        if self.bytes > self.limits.max_bytes_produced:
            raise ArtifactError(f"{where}: the call produced more than max_bytes_produced="
                                f"{self.limits.max_bytes_produced} bytes")
