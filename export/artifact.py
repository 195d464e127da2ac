"""Self-contained files for recursive gluon_cf models: :func:`save_artifact` and :func:`load`.

    save_artifact(net, [tokens, left, right, roots], "tree.onnx", dynamic_axes={0: [0], ...})
    f = load("tree.onnx")              # no model class, no MXNet: onnxruntime runs the ops
    logits, = f(tokens, left, right, roots)

Standard ONNX has no recursion, so :func:`gluon_cf.export.export_onnx` cannot export a model
with ``@gluon_cf.recursive`` functions.  An *artifact* is an ONNX model extended by exactly two
operators, run by :func:`load` (NOTE [artifact format]).  A model without recursion saves as
plain ONNX that any runtime runs, and ``load`` runs plain ONNX models too.

NOTE [artifact format]
    An artifact is an ONNX ``ModelProto`` (default-domain opset 12 or 13, as ``export_onnx``
    writes; ``load`` accepts opset 11 and later) that also imports the domain ``ai.gluon_cf``
    at version 1 and has the metadata ``format = gluon_cf.artifact``, ``format_version = 1``.
    It may also have ``gluon_cf.index_bounds`` (NOTE [index bounds] in ``index_bounds.py``),
    which plain ONNX models exported by gluon_cf carry too.
    Parameters are initializers of the main graph; ``cond`` / ``foreach`` / ``while_loop`` are
    ``If`` / ``Scan`` / ``Loop`` exactly as in ``export_onnx``.  The two extra operators:

    ``ai.gluon_cf.Recursion(*entry_args, *environment) -> entry outputs`` -- the outermost call
        of a recursive function (gluon_cf's ``recursion`` node, NOTE [recursion design]).
        Attributes: ``functions`` (GRAPHS): the function table, one graph per function, named
        by the graph's ``name``; ``entry`` (STRING): the name of the function called;
        ``num_args``, ``max_depth`` (INTS) and ``function_names`` (STRINGS): per function, in
        the order of ``functions``, its number of arguments, its bound on nested calls and its
        Python name (for messages).  A function graph's inputs are ``[*its args,
        *environment]``; it is *closed*: it reads no outer-scope value, everything it needs
        from outside (parameters, inputs of the model) is in the environment, which all
        functions of the table share.  ``len(environment) = len(inputs) - num_args[entry]``.
    ``ai.gluon_cf.Invoke(*args) -> outputs`` -- a call site, inside a function graph (or a
        subgraph nested in one).  Attribute ``function`` (STRING): the callee, a function of
        an enclosing ``Recursion`` node (the innermost one defining that name).  The
        environment is the one of the running call of that ``Recursion`` node.

    Semantics (what :func:`load` implements, in Python)::

        def recursion(node, *inputs):
            n = node.num_args[node.entry]
            ctx = Context(node.functions, env=inputs[n:], depth=0)
            return ctx.call(node.entry, inputs[:n])

        def call(ctx, name, args):                         # an Invoke: ctx.call(function, args)
            ctx.depth += 1
            if ctx.depth > max_depth[name]: raise ArtifactDepthError
            outputs = run_graph(functions[name], [*args, *ctx.env])
            ctx.depth -= 1
            return outputs

NOTE [artifact loader]
    :func:`load` validates the file (NOTE [artifact safety]), then compiles every graph into
    *steps*.  Nodes that need the interpreter are ``Recursion`` and ``Invoke``, and ``If`` /
    ``Loop`` / ``Scan`` nodes with such a node somewhere in their subgraphs; every other node is
    ordinary.  As in gluon_cf's partitioned execution (NOTE [partitioned execution]), a node's
    *stage* is the number of interpreted nodes on its longest path from the graph's inputs
    (reads of enclosing-scope values by its subgraphs count as inputs); ordinary nodes of
    stage ``s`` form one *piece*, run by onnxruntime, followed by the interpreted nodes of
    stage ``s``.  A piece becomes an ONNX model whose inputs are the values it reads and whose
    outputs are the values read after it; one ``InferenceSession`` is cached per piece and
    per input dtypes and ranks (dims are left symbolic, so tree sizes do not multiply
    sessions).  Interpreted nodes are generators run by an explicit-stack trampoline
    (NOTE [trampoline] in gluon_cf's executor): a nested call costs a few list entries, not
    Python frames, so a 5,000-node linear tree runs at the default ``max_depth`` of 20,000.
    Values are numpy arrays; a graph run sees the values of the graphs it is nested in
    (If branches, loop bodies), a function graph only its own inputs.

NOTE [artifact safety]
    ``load`` treats the file as hostile: it uses protobuf parsing (no pickle, no eval) and
    checks, before building any session: file size, IR version and opsets (only the default
    domain and ``ai.gluon_cf`` are allowed), no external data / sparse tensors / local
    functions / training info, element types (numeric and bool only), declared shapes and
    tensor sizes, the total number of nodes, graph nesting, that every operator exists in
    its domain at the imported opset, that every value is defined before it is read (so a
    cycle is reported as such), single assignment, the attributes of ``Recursion`` / ``Invoke``
    (types, lengths, unique names, an entry that exists, argument and output counts of every
    call, closed function graphs), ``max_depth`` within the loader's bound, and constant
    ``Loop`` trip counts; then ``onnx.checker`` checks the standard operators.  At run time
    the depth of nested calls, interpreted loop iterations and, if asked, wall time are
    bounded.  Every problem is an :class:`ArtifactError` (a ``ValueError``) naming what is
    wrong and where; onnxruntime's own errors are wrapped into one.  Limits are the fields of
    :class:`Limits`.
"""
import os
import threading
import time
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from . import index_bounds

__all__ = ["save_artifact", "load", "Artifact", "ArtifactError", "ArtifactDepthError",
           "Limits", "is_artifact", "DOMAIN"]

DOMAIN = "ai.gluon_cf"
_DOMAIN_VERSION = 1
_DEFAULT_DOMAINS = ("", "ai.onnx")
_CUSTOM_OPS = ("Recursion", "Invoke")
# Element types a value may have: the numeric numpy types and bool.
_ELEM_TYPES = {getattr(onnx.TensorProto, t): np.dtype(d) for t, d in (
    ("FLOAT", np.float32), ("DOUBLE", np.float64), ("FLOAT16", np.float16),
    ("INT8", np.int8), ("INT16", np.int16), ("INT32", np.int32), ("INT64", np.int64),
    ("UINT8", np.uint8), ("UINT16", np.uint16), ("UINT32", np.uint32), ("UINT64", np.uint64),
    ("BOOL", np.bool_))}
_TENSOR_OF_DTYPE = {d: t for t, d in _ELEM_TYPES.items()}
_MIN_OPSET, _MIN_IR = 11, 3  # If / Loop / Scan as the loader interprets them


class ArtifactError(ValueError):
    """The file is not a valid artifact, or running it broke one of its bounds."""


class ArtifactDepthError(ArtifactError):
    """A recursive function went deeper than its ``max_depth`` (no base case reached?)."""


@dataclass(frozen=True)
class Limits:
    """Bounds :func:`load` enforces (NOTE [artifact safety]); pass your own to ``load``."""
    max_file_bytes: int = 1 << 30          # 1 GiB
    max_nodes: int = 200_000               # nodes and graphs, all graphs together
    max_nesting: int = 24                  # graphs inside graphs (branches, bodies, functions)
    max_tensor_elements: int = 1 << 28     # per initializer, constant or declared shape
    max_functions: int = 10_000            # per Recursion node
    max_depth: int = 100_000               # largest max_depth a function may declare
    max_loop_iterations: int = 10_000_000  # per Loop / Scan run by the loader, and constant
                                           # trip counts of every Loop
    max_steps: int = 5_000_000             # per call: invocations, pieces and loop steps run
                                           # (exponential recursion stops here)
    max_tensor_bytes: int = 1 << 30        # per tensor a piece produces (1 GiB)
    max_bytes_produced: int = 1 << 36      # per call, all tensors produced together (64 GiB)
    timeout: float = 600.0                 # seconds per call of the loaded artifact (None:
                                           # no bound)


# ----------------------------------------------------------------------------- public API

def save_artifact(net_or_symbol_files, example_inputs, path, *, dynamic_axes=None,
                  input_names=None, output_names=None, opset=13):
    """Save a gluon_cf model, recursive or not, as an artifact at ``path``; returns the
    ``onnx.ModelProto``.

    ``net_or_symbol_files``: a hybridized ``HybridBlock`` (run once on ``example_inputs``), or
    the pair ``(symbol_json_path, params_path)`` written by ``net.export()``.  For a block,
    ``example_inputs`` are its arrays; for files, a list of arrays (or ``(shape, dtype)``
    pairs) for the symbol's data inputs ``data`` / ``data0``, ``data1``, ... in order, or a
    dict from those names.  ``dynamic_axes``, ``input_names``, ``output_names`` and ``opset``
    are those of :func:`gluon_cf.export.export_onnx`; give ``dynamic_axes`` for every axis
    whose size changes between calls (e.g. the node axis of tree inputs), since :func:`load`
    enforces the other declared dims.
    """
    from . import _artifact_convert
    from .onnx_export import _net_symbol

    if isinstance(net_or_symbol_files, (tuple, list)):
        sym, params, inputs = _symbol_files(net_or_symbol_files, example_inputs)
    else:
        sym, params, inputs = _net_symbol(net_or_symbol_files, example_inputs, "save_artifact")
    model = _artifact_convert.convert(sym, params, inputs, opset, dynamic_axes=dynamic_axes,
                                      input_names=input_names, output_names=output_names)
    onnx.save(model, os.fspath(path))
    return model


def load(source, *, limits=None):
    """Load an artifact (or a plain ONNX model) from a path or from ``bytes``, validating it
    (NOTE [artifact safety]); returns an :class:`Artifact`, called as
    ``artifact(*numpy_arrays) -> [numpy arrays]``.  Raises :class:`ArtifactError`."""
    limits = limits or Limits()
    model = _read_model(source, limits)
    return Artifact(model, limits)


def is_artifact(model):
    """Whether the ``ModelProto`` uses the ``ai.gluon_cf`` operators (so needs :func:`load`)."""
    return any(op.domain == DOMAIN for op in model.opset_import)


class Artifact:
    """A loaded, validated artifact.  ``inputs`` / ``outputs``: ``(name, shape, dtype)`` as
    declared, ``None`` for a dim that may vary."""

    def __init__(self, model, limits):
        self.limits = limits
        opset = _check_model(model, limits)
        self._opset, self._ir_version = opset, max(int(model.ir_version), 7)
        graph = model.graph
        constants = {init.name for init in graph.initializer}
        for value_info in list(graph.input) + list(graph.output):
            if value_info.type.WhichOneof("value") != "tensor_type":
                raise ArtifactError(f"the main graph's input or output {value_info.name!r} "
                                    f"has no tensor type")
        self.inputs = [_describe(vi) for vi in graph.input if vi.name not in constants]
        try:
            self.index_bounds = index_bounds.read({p.key: p.value for p in model.metadata_props})
        except ValueError as err:
            raise ArtifactError(str(err)) from None
        self._constant_shapes = {init.name: tuple(init.dims) for init in graph.initializer}
        self.outputs = [_describe(vi) for vi in graph.output]
        self._main = _Compiler(self).program(graph, "the main graph", ())

    def __repr__(self):
        show = lambda specs: ", ".join(f"{n}{list(s)}:{d}" for n, s, d in specs)  # noqa: E731
        return f"<gluon_cf artifact ({show(self.inputs)}) -> ({show(self.outputs)})>"

    def __call__(self, *arrays):
        if len(arrays) != len(self.inputs):
            raise ValueError(f"artifact: expected {len(self.inputs)} inputs "
                             f"{[name for name, _, _ in self.inputs]}, got {len(arrays)}")
        values = [_check_input(x, spec) for x, spec in zip(arrays, self.inputs)]
        check_index_bounds(self.index_bounds, values, self.inputs, self._constant_shapes)
        budget = _Budget(self.limits)
        previous = getattr(_budgets, "current", None)
        _budgets.current = budget
        try:
            return _trampoline(self._main.run(values, None, None), budget)
        finally:
            _budgets.current = previous


def _check_input(x, spec):
    name, shape, dtype = spec
    x = np.asarray(x)
    if x.dtype != dtype:
        if not np.can_cast(x.dtype, dtype, "same_kind"):
            raise ValueError(f"artifact: input {name!r} must have dtype {dtype}, got {x.dtype}")
        x = x.astype(dtype)
    if shape is not None:
        if x.ndim != len(shape) or any(d is not None and d != s for d, s in zip(shape, x.shape)):
            raise ValueError(f"artifact: input {name!r} must have shape {list(shape)} (None: "
                             f"any size), got {list(x.shape)}; other sizes need dynamic_axes "
                             f"at export")
    return np.ascontiguousarray(x)


def check_index_bounds(bounds, values, specs, constant_shapes):
    """Refuse out-of-range values of index inputs (NOTE [index bounds] in index_bounds.py)."""
    if not bounds:
        return
    arrays = {name: x for (name, _, _), x in zip(specs, values)}
    shapes = dict(constant_shapes, **{name: np.shape(x) for name, x in arrays.items()})
    try:
        index_bounds.check(bounds, arrays, shapes)
    except ValueError as err:
        raise ValueError(f"artifact: {err}") from None


def _describe(value_info):
    tensor = value_info.type.tensor_type
    shape = None
    if tensor.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else None
                      for d in tensor.shape.dim)
    return value_info.name, shape, _ELEM_TYPES[tensor.elem_type]


def _symbol_files(files, example_inputs):
    """``(symbol, params, [(name, shape, dtype)])`` from ``net.export()`` files."""
    import mxnet as mx

    if len(files) != 2:
        raise ValueError(f"save_artifact: give a HybridBlock or (symbol_json_path, params_path),"
                         f" got {len(files)} paths")
    sym = mx.sym.load(os.fspath(files[0]))
    params = mx.nd.load(os.fspath(files[1]))
    param_names = {name.split(":", 1)[-1] for name in params}
    data_names = sorted((n for n in sym.list_inputs() if n not in param_names),
                        key=lambda n: (len(n), n))
    if isinstance(example_inputs, dict):
        unknown = sorted(set(example_inputs) - set(data_names))
        missing = [n for n in data_names if n not in example_inputs]
        if unknown or missing:
            raise ValueError(f"save_artifact: the symbol's data inputs are {data_names}; "
                             f"missing {missing}, unknown {unknown}")
        examples = [(n, example_inputs[n]) for n in data_names]
    else:
        if len(example_inputs) != len(data_names):
            raise ValueError(f"save_artifact: the symbol has {len(data_names)} data inputs "
                             f"{data_names}, got {len(example_inputs)} example inputs")
        examples = list(zip(data_names, example_inputs))
    inputs = []
    for name, value in examples:
        if isinstance(value, tuple) and len(value) == 2 and not hasattr(value, "shape"):
            shape, dtype = value
        else:
            value = value.asnumpy() if hasattr(value, "asnumpy") else np.asarray(value)
            shape, dtype = value.shape, value.dtype
        inputs.append((name, tuple(shape), np.dtype(dtype)))
    return sym, params, inputs


# ----------------------------------------------------------------------------- reading

def _read_model(source, limits):
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        where = "the artifact bytes"
    else:
        path = os.fspath(source)
        where = repr(path)
        try:
            size = os.path.getsize(path)
            if size > limits.max_file_bytes:
                raise ArtifactError(f"{where} is {size} bytes, more than max_file_bytes="
                                    f"{limits.max_file_bytes}")
            with open(path, "rb") as f:   # memory in proportion to the file, not the limit
                data = f.read(size + 1)
        except OSError as err:
            raise ArtifactError(f"cannot read {where}: {err}") from None
    if len(data) > limits.max_file_bytes:
        raise ArtifactError(f"{where} has {len(data)} bytes, more than max_file_bytes="
                            f"{limits.max_file_bytes}")
    if not data:
        raise ArtifactError(f"{where} is empty")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as err:  # noqa: BLE001 -- protobuf's DecodeError and friends
        raise ArtifactError(f"{where} is not an ONNX model (protobuf parse failed: "
                            f"{_first_line(err)}); truncated or corrupted?") from None
    if not model.HasField("graph"):
        raise ArtifactError(f"{where} is not an ONNX model: it has no graph")
    return model


# ----------------------------------------------------------------------------- validation

def _check_model(model, limits):
    """Whole-model checks (NOTE [artifact safety]); returns the default-domain opset."""
    if not _MIN_IR <= model.ir_version <= onnx.IR_VERSION:
        raise ArtifactError(f"unsupported IR version {model.ir_version} (supported "
                            f"{_MIN_IR}..{onnx.IR_VERSION})")
    opset = None
    for entry in model.opset_import:
        _check_names([entry.domain], "an opset import")
        if entry.domain in _DEFAULT_DOMAINS:
            if not _MIN_OPSET <= entry.version <= onnx.defs.onnx_opset_version():
                raise ArtifactError(f"unsupported default-domain opset {entry.version}")
            opset = entry.version
        elif entry.domain == DOMAIN:
            if entry.version != _DOMAIN_VERSION:
                raise ArtifactError(f"unsupported version {entry.version} of domain {DOMAIN!r}"
                                    f" (this loader reads version {_DOMAIN_VERSION})")
        else:
            raise ArtifactError(f"unknown operator domain {entry.domain!r} imported; artifacts "
                                f"use only the default domain and {DOMAIN!r}")
    if opset is None:
        raise ArtifactError("the model imports no default-domain opset")
    if len(model.functions):
        raise ArtifactError(f"the model defines {len(model.functions)} local functions; "
                            f"artifacts keep functions in Recursion nodes only")
    if len(model.training_info):
        raise ArtifactError("the model has training info, which artifacts do not use")
    _Validator(model, opset, limits).graph(model.graph, "the main graph", _Scope(None), 0, ())
    try:
        onnx.checker.check_model(model)
    except Exception as err:  # noqa: BLE001 -- ValidationError, or anything from the C++ side
        raise ArtifactError(f"the model is not valid ONNX: {_first_line(err)}") from None
    return opset


class _Scope:
    """Names visible while validating: this graph's, then the enclosing graphs'."""

    def __init__(self, parent):
        self.names = set()
        self.parent = parent

    def __contains__(self, name):
        scope = self
        while scope is not None:
            if name in scope.names:
                return True
            scope = scope.parent
        return False


class _Validator:
    def __init__(self, model, opset, limits):
        self.opset = opset
        self.limits = limits
        self.with_domain = any(e.domain == DOMAIN for e in model.opset_import)
        self.num_nodes = 0

    def graph(self, graph, where, outer, nesting, tables):
        """Check ``graph``; ``outer``: the enclosing scope (None for closed graphs), ``tables``:
        the enclosing Recursion nodes' ``{name: function graph}``, innermost last."""
        limits = self.limits
        if nesting > limits.max_nesting:
            raise ArtifactError(f"{where}: graphs are nested more than max_nesting="
                                f"{limits.max_nesting} levels deep")
        self.num_nodes += 1 + len(graph.node)  # a graph counts as a node: empty ones cost too
        if self.num_nodes > limits.max_nodes:
            raise ArtifactError(f"the model has more than max_nodes={limits.max_nodes} nodes "
                                f"and graphs")
        if len(graph.sparse_initializer):
            raise ArtifactError(f"{where}: sparse initializers are not supported")
        _check_names([graph.name] + [v.name for v in graph.input] + [v.name for v in graph.output]
                     + [v.name for v in graph.value_info] + [t.name for t in graph.initializer]
                     + [n for node in graph.node for n in [node.name, node.op_type, node.domain,
                                                           *node.input, *node.output]]
                     + [a.name for node in graph.node for a in node.attribute], where)
        scope = _Scope(outer)
        later = {}
        for node in graph.node:
            for out in node.output:
                later.setdefault(out, node)
        for value_info in list(graph.input) + list(graph.output) + list(graph.value_info):
            self.value_info(value_info, where)
        for init in graph.initializer:
            self.tensor(init, f"{where}: initializer {init.name!r}")
            self.define(scope, init.name, f"{where}: initializer")
        inputs = set()
        for value_info in graph.input:
            if value_info.name in inputs:
                raise ArtifactError(f"{where}: input {value_info.name!r} is declared twice")
            inputs.add(value_info.name)
            if value_info.name not in scope.names:  # else: an initializer's default value
                self.define(scope, value_info.name, f"{where}: input")
        for node in graph.node:
            self.node(node, where, scope, later, nesting, tables)
        for value_info in graph.output:
            if value_info.name not in scope:
                raise ArtifactError(f"{where}: output {value_info.name!r} is never defined")

    def define(self, scope, name, what):
        if not name:
            raise ArtifactError(f"{what} has an empty name")
        if name in scope.names:
            raise ArtifactError(f"{what}: name {name!r} is defined twice in the same graph")
        scope.names.add(name)

    def node(self, node, where, scope, later, nesting, tables):
        label = f"{where}: node {node.name or node.op_type!r} ({node.op_type})"
        if node.domain in _DEFAULT_DOMAINS:
            try:
                onnx.defs.get_schema(node.op_type, self.opset, "")
            except Exception:  # noqa: BLE001 -- SchemaError: no such operator at this opset
                raise ArtifactError(f"{label}: unknown operator {node.op_type!r} in the default "
                                    f"domain at opset {self.opset}") from None
        elif node.domain == DOMAIN and self.with_domain:
            if node.op_type not in _CUSTOM_OPS:
                raise ArtifactError(f"{label}: unknown operator {node.op_type!r} in domain "
                                    f"{DOMAIN!r} (it has {', '.join(_CUSTOM_OPS)})")
        else:
            raise ArtifactError(f"{label}: operator domain {node.domain!r} is not imported by "
                                f"the model or not supported")
        for name in node.input:
            if not name:
                if node.domain == DOMAIN:
                    raise ArtifactError(f"{label}: has an empty input name")
                continue
            if name not in scope:
                if name in later:
                    other = later[name]
                    raise ArtifactError(
                        f"{label} reads {name!r} before node {other.name or other.op_type!r} "
                        f"defines it: the nodes are not in topological order (a cycle?)")
                raise ArtifactError(f"{label} reads {name!r}, which is not defined")
        for attr in node.attribute:
            self.attribute(attr, label)
        if node.domain == DOMAIN:
            self.custom(node, label, scope, nesting, tables)
        else:
            for attr in node.attribute:
                for sub in _subgraphs(attr):
                    self.graph(sub, _sub_where(node, attr.name), scope, nesting + 1, tables)
        for name in node.output:
            if name:
                self.define(scope, name, label)
            elif node.domain == DOMAIN:
                raise ArtifactError(f"{label}: has an empty output name")

    def attribute(self, attr, label):
        if attr.type == attr.SPARSE_TENSOR or attr.type == attr.SPARSE_TENSORS:
            raise ArtifactError(f"{label}: sparse tensor attribute {attr.name!r} is not "
                                f"supported")
        if attr.ref_attr_name:
            raise ArtifactError(f"{label}: attribute {attr.name!r} refers to a function "
                                f"attribute, which needs a local function")
        tensors = [attr.t] if attr.type == attr.TENSOR else \
            list(attr.tensors) if attr.type == attr.TENSORS else []
        for tensor in tensors:
            self.tensor(tensor, f"{label} attribute {attr.name!r}", check_type=False)

    def custom(self, node, label, scope, nesting, tables):
        attrs = {}
        for attr in node.attribute:
            if attr.name in attrs:
                raise ArtifactError(f"{label}: attribute {attr.name!r} is given twice")
            attrs[attr.name] = attr
        if node.op_type == "Invoke":
            _expect_attrs(attrs, {"function": onnx.AttributeProto.STRING}, label)
            name = _text(attrs["function"].s, label)
            callee = next((table[name] for table in reversed(tables) if name in table), None)
            if callee is None:
                raise ArtifactError(f"{label}: Invoke of function {name!r}, which no enclosing "
                                    f"Recursion node defines")
            num_args, graph = callee
            if len(node.input) != num_args:
                raise ArtifactError(f"{label}: Invoke of {name!r} passes {len(node.input)} "
                                    f"arguments, the function takes {num_args}")
            if len(node.output) != len(graph.output):
                raise ArtifactError(f"{label}: Invoke of {name!r} has {len(node.output)} "
                                    f"outputs, the function returns {len(graph.output)}")
            return
        types = onnx.AttributeProto
        _expect_attrs(attrs, {"entry": types.STRING, "functions": types.GRAPHS,
                              "num_args": types.INTS, "max_depth": types.INTS,
                              "function_names": types.STRINGS}, label)
        graphs = list(attrs["functions"].graphs)
        num_args, max_depth = list(attrs["num_args"].ints), list(attrs["max_depth"].ints)
        names = [_text(s, label) for s in attrs["function_names"].strings]
        if not 1 <= len(graphs) <= self.limits.max_functions:
            raise ArtifactError(f"{label}: has {len(graphs)} functions (1.."
                                f"{self.limits.max_functions} allowed)")
        if not len(num_args) == len(max_depth) == len(names) == len(graphs):
            raise ArtifactError(f"{label}: num_args ({len(num_args)}), max_depth "
                                f"({len(max_depth)}) and function_names ({len(names)}) must "
                                f"have one entry per function ({len(graphs)})")
        table = {}
        for graph, n, depth, name in zip(graphs, num_args, max_depth, names):
            key = graph.name
            if not key or key in table:
                raise ArtifactError(f"{label}: function graph names must be unique and "
                                    f"non-empty, got {key!r} twice or empty")
            if n < 0:
                raise ArtifactError(f"{label}: function {name!r} has num_args={n}")
            if not 1 <= depth <= self.limits.max_depth:
                raise ArtifactError(f"{label}: function {name!r} declares max_depth={depth}; "
                                    f"this loader allows 1..{self.limits.max_depth}")
            table[key] = (n, graph)
        entry = _text(attrs["entry"].s, label)
        if entry not in table:
            raise ArtifactError(f"{label}: entry function {entry!r} is not in its table "
                                f"{sorted(table)}")
        num_env = len(node.input) - table[entry][0]
        if num_env < 0:
            raise ArtifactError(f"{label}: has {len(node.input)} inputs, fewer than the "
                                f"{table[entry][0]} arguments of its entry function")
        if len(node.output) != len(table[entry][1].output):
            raise ArtifactError(f"{label}: has {len(node.output)} outputs, its entry function "
                                f"returns {len(table[entry][1].output)}")
        inner = tables + (table,)
        for (key, (n, graph)), name in zip(table.items(), names):
            fn_where = f"function {name!r}"
            if len(graph.input) != n + num_env:
                raise ArtifactError(f"{fn_where}: has {len(graph.input)} inputs, expected "
                                    f"{n} arguments + {num_env} environment values")
            self.graph(graph, fn_where, None, nesting + 1, inner)

    def value_info(self, value_info, where):
        what = f"{where}: value {value_info.name!r}"
        if not value_info.HasField("type"):
            return  # untyped (allowed for inner values)
        if value_info.type.WhichOneof("value") != "tensor_type":
            raise ArtifactError(f"{what} is not a tensor (sequences, maps and optionals are "
                                f"not supported)")
        tensor = value_info.type.tensor_type
        if tensor.elem_type not in _ELEM_TYPES:
            raise ArtifactError(f"{what} has unsupported element type {tensor.elem_type} "
                                f"({_elem_name(tensor.elem_type)})")
        if tensor.HasField("shape"):
            self.dims([d.dim_value for d in tensor.shape.dim if d.HasField("dim_value")],
                      what)

    def tensor(self, tensor, what, check_type=True):
        if tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data):
            raise ArtifactError(f"{what} refers to external data; artifacts are self-contained")
        if check_type and tensor.data_type not in _ELEM_TYPES:
            raise ArtifactError(f"{what} has unsupported element type {tensor.data_type} "
                                f"({_elem_name(tensor.data_type)})")
        self.dims(list(tensor.dims), what)

    def dims(self, dims, what):
        total = 1
        for d in dims:
            if d < 0:
                raise ArtifactError(f"{what} declares a negative dim {d}")
            total *= d
            if total > self.limits.max_tensor_elements:
                raise ArtifactError(f"{what} declares shape {list(dims)}, more than "
                                    f"max_tensor_elements={self.limits.max_tensor_elements}")
        if len(dims) > 64:
            raise ArtifactError(f"{what} declares rank {len(dims)} (at most 64)")


def _expect_attrs(attrs, expected, label):
    for name, kind in expected.items():
        if name not in attrs:
            raise ArtifactError(f"{label}: missing attribute {name!r}")
        if attrs[name].type != kind:
            raise ArtifactError(f"{label}: attribute {name!r} must be "
                                f"{onnx.AttributeProto.AttributeType.Name(kind)}, got "
                                f"{_attr_type_name(attrs[name].type)}")
    extra = sorted(set(attrs) - set(expected))
    if extra:
        raise ArtifactError(f"{label}: unknown attributes {extra}")


def _attr_type_name(kind):
    try:
        return onnx.AttributeProto.AttributeType.Name(kind)
    except ValueError:
        return str(kind)


def _elem_name(elem_type):
    try:
        return onnx.TensorProto.DataType.Name(elem_type)
    except ValueError:
        return "unknown"


def _check_names(names, where):
    """Protobuf hands out a string field holding invalid UTF-8 as ``bytes``."""
    if any(not isinstance(name, str) for name in names):
        raise ArtifactError(f"{where}: a name is not valid UTF-8")


def _text(raw, label):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ArtifactError(f"{label}: a name is not valid UTF-8") from None


def _sub_where(node, attr_name):
    return f"the {attr_name} of {node.op_type} node {node.name!r}"


def _subgraphs(attr):
    if attr.type == onnx.AttributeProto.GRAPH:
        return [attr.g]
    if attr.type == onnx.AttributeProto.GRAPHS:
        return list(attr.graphs)
    return []


def _first_line(err):
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


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
            if node.op_type == "Constant" and node.domain in _DEFAULT_DOMAINS:
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
                subs[attr.name] = self.program(attr.g, _sub_where(node, attr.name), tables,
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
        raise ArtifactError(f"{what}: cannot decode its data: {_first_line(err)}") from None
    if array.dtype.kind not in "biuf":
        raise ArtifactError(f"{what}: unsupported element type {array.dtype}")
    return array


def _constant_value(node, label):
    for attr in node.attribute:
        if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
            if attr.t.data_type in _ELEM_TYPES:
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
        """NOTE [artifact loader]: stage = interpreted nodes on the longest path."""
        producer = {}
        stages = []
        for k, (node, step, reads) in enumerate(entries):
            stage = 0
            for name in reads:
                if name in producer:
                    j = producer[name]
                    stage = max(stage, stages[j] + (entries[j][1] is not None))
            stages.append(stage)
            for name in node.output:
                if name:
                    producer[name] = k
        steps = []
        for stage in range(max(stages, default=-1) + 1):
            members = [k for k, s in enumerate(stages) if s == stage and entries[k][1] is None]
            if members:
                steps.append(self._piece(artifact, entries, members))
            steps.extend(entries[k][1] for k, s in enumerate(stages)
                         if s == stage and entries[k][1] is not None)
        return steps

    def _piece(self, artifact, entries, members):
        member_set = set(members)
        defined = {n for k in members for n in entries[k][0].output if n}
        reads = []
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
        try:
            outputs = session.run(self.outputs, feeds)
        except Exception as err:  # noqa: BLE001 -- onnxruntime's error classes
            raise ArtifactError(f"{self.describe()}: onnxruntime failed: "
                                f"{_first_line(err)}") from None
        budget = getattr(_budgets, "current", None)
        if budget is not None:
            budget.produced(self.describe(), zip(self.outputs, outputs))
        scope.values.update(zip(self.outputs, outputs))

    def _session(self, feeds):
        import onnxruntime as ort

        inputs = []
        for name, value in feeds.items():
            elem = _TENSOR_OF_DTYPE.get(value.dtype)
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
        try:
            return ort.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])
        except Exception as err:  # noqa: BLE001 -- onnxruntime's error classes
            raise ArtifactError(f"{self.describe()}: onnxruntime rejects them: "
                                f"{_first_line(err)}") from None


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
            dtype = _ELEM_TYPES.get(tensor.elem_type, np.dtype(np.float32))
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

    def step(self):
        """One more generator started; an ArtifactError when over a limit, else None."""
        self.steps += 1
        if self.steps > self.limits.max_steps:
            return ArtifactError(f"the artifact ran more than max_steps={self.limits.max_steps} "
                                 f"steps (invocations, pieces and loop steps) in one call")
        if self.deadline is not None and self.steps % 64 == 1 and \
                time.monotonic() > self.deadline:
            return ArtifactError(f"the artifact ran longer than timeout={self.limits.timeout} s")
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


def _trampoline(gen, budget):
    """Drive ``gen`` and the generators it yields with an explicit stack; return its value."""
    stack = [gen]
    value, error = None, None
    while True:
        if error is None and budget is not None:
            error = budget.step()
        top = stack[-1]
        try:
            if error is not None:
                request, error = top.throw(error), None
            else:
                request = top.send(value)
        except StopIteration as stop:
            stack.pop()
            if not stack:
                return stop.value
            value = stop.value
            continue
        except BaseException as exc:  # noqa: B902 -- re-raised below or thrown into the caller
            stack.pop()
            if not stack:
                raise
            error = exc
            continue
        stack.append(request)
        value = None
