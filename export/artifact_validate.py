"""Validation of artifacts and ONNX models read from untrusted files.

NOTE [artifact safety]), then compiles every graph into
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

from typing import Dict, List, Optional, Set, Tuple

import onnx

from .artifact_format import (CUSTOM_OPS, DEFAULT_DOMAINS, DOMAIN, DOMAIN_VERSION, ELEM_TYPES,
                              FORMAT, FORMAT_VERSION, MIN_IR, MIN_OPSET, ArtifactError,
                              first_line)


# ----------------------------------------------------------------------------- reading

def read_model(source, limits):
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
                            f"{first_line(err)}); truncated or corrupted?") from None
    if not model.HasField("graph"):
        raise ArtifactError(f"{where} is not an ONNX model: it has no graph")
    return model


# ----------------------------------------------------------------------------- validation

def check_model(model, limits):
    """Whole-model checks (NOTE [artifact safety]); returns the default-domain opset."""
    if not MIN_IR <= model.ir_version <= onnx.IR_VERSION:
        raise ArtifactError(f"unsupported IR version {model.ir_version} (supported "
                            f"{MIN_IR}..{onnx.IR_VERSION})")
    opset = None
    for entry in model.opset_import:
        _check_names([entry.domain], "an opset import")
        if entry.domain in DEFAULT_DOMAINS:
            if not MIN_OPSET <= entry.version <= onnx.defs.onnx_opset_version():
                raise ArtifactError(f"unsupported default-domain opset {entry.version}")
            opset = entry.version
        elif entry.domain == DOMAIN:
            if entry.version != DOMAIN_VERSION:
                raise ArtifactError(f"unsupported version {entry.version} of domain {DOMAIN!r}"
                                    f" (this loader reads version {DOMAIN_VERSION})")
        else:
            raise ArtifactError(f"unknown operator domain {entry.domain!r} imported; artifacts "
                                f"use only the default domain and {DOMAIN!r}")
    if opset is None:
        raise ArtifactError("the model imports no default-domain opset")
    _check_metadata(model)
    if len(model.functions):
        raise ArtifactError(f"the model defines {len(model.functions)} local functions; "
                            f"artifacts keep functions in Recursion nodes only")
    if len(model.training_info):
        raise ArtifactError("the model has training info, which artifacts do not use")
    _Validator(model, opset, limits).graph(model.graph, "the main graph", _Scope(None), 0, ())
    try:
        onnx.checker.check_model(model)
    except Exception as err:  # noqa: BLE001 -- ValidationError, or anything from the C++ side
        raise ArtifactError(f"the model is not valid ONNX: {first_line(err)}") from None
    return opset


def _check_metadata(model):
    """gluon_cf's metadata keys (NOTE [artifact format]): each at most once, and an artifact's
    format version one this loader reads. Index bounds are read by ``index_bounds.read``."""
    seen: Set[str] = set()
    twice: Set[str] = set()
    for prop in model.metadata_props:
        (twice if prop.key in seen else seen).add(prop.key)
    if twice:
        raise ArtifactError(f"the model's metadata has the keys {sorted(twice)[:5]} more than "
                            f"once (which one holds?)")
    props = {prop.key: prop.value for prop in model.metadata_props}
    if props.get("format") == FORMAT and props.get("format_version") != FORMAT_VERSION:
        raise ArtifactError(f"the model's format_version metadata is "
                            f"{props.get('format_version')!r}: this loader reads gluon_cf "
                            f"artifacts of format version {FORMAT_VERSION}")


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
        later: Dict[str, onnx.NodeProto] = {}   # name -> the node defining it
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
        if node.domain in DEFAULT_DOMAINS:
            try:
                onnx.defs.get_schema(node.op_type, self.opset, "")
            except Exception:  # noqa: BLE001 -- SchemaError: no such operator at this opset
                raise ArtifactError(f"{label}: unknown operator {node.op_type!r} in the default "
                                    f"domain at opset {self.opset}") from None
        elif node.domain == DOMAIN and self.with_domain:
            if node.op_type not in CUSTOM_OPS:
                raise ArtifactError(f"{label}: unknown operator {node.op_type!r} in domain "
                                    f"{DOMAIN!r} (it has {', '.join(CUSTOM_OPS)})")
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
                    self.graph(sub, sub_where(node, attr.name), scope, nesting + 1, tables)
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
        if tensor.elem_type not in ELEM_TYPES:
            raise ArtifactError(f"{what} has unsupported element type {tensor.elem_type} "
                                f"({_elem_name(tensor.elem_type)})")
        if tensor.HasField("shape"):
            self.dims([d.dim_value for d in tensor.shape.dim if d.HasField("dim_value")],
                      what)

    def tensor(self, tensor, what, check_type=True):
        if tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data):
            raise ArtifactError(f"{what} refers to external data; artifacts are self-contained")
        if check_type and tensor.data_type not in ELEM_TYPES:
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


def sub_where(node, attr_name):
    return f"the {attr_name} of {node.op_type} node {node.name!r}"


def _subgraphs(attr):
    if attr.type == onnx.AttributeProto.GRAPH:
        return [attr.g]
    if attr.type == onnx.AttributeProto.GRAPHS:
        return list(attr.graphs)
    return []


# ----------------------------------------------------------------------------- onnxruntime

def session_disabled_optimizers(model):
    """The onnxruntime graph optimizers to disable for a piece's ``model``
    (NOTE [onnxruntime folding nested If])."""
    disabled = ["NoopElimination"]   # see Piece._session in artifact.py
    if _folding_may_inline_control_flow(model):
        disabled.append("ConstantFolding")
    return disabled


def _folding_may_inline_control_flow(model):
    """Whether an ``If`` whose condition may fold to a constant has a node with a subgraph
    directly in one of its branches (NOTE [onnxruntime folding nested If]).  An explicit
    stack, as nesting comes from the file; nodes come in order (``load`` checked it)."""
    if not _control_flow_inside_if(model.graph.node):
        return False
    shapes = _LazyShapes(model)
    stack: List[Tuple[list, Set[str], Set[str]]] = [
        (list(model.graph.node), {t.name for t in model.graph.initializer}, set())]
    while stack:
        graph_nodes, folds, later = stack.pop()   # later: values folded by onnxruntime, or
        for node in graph_nodes:                  # computed from one (see the NOTE)
            inputs = [name for name in node.input if name]
            subs = [sub for attr in node.attribute for sub in _subgraphs(attr)]
            if node.op_type == "If":
                constant = bool(inputs) and inputs[0] in folds
                if constant and any(_subgraphs(attr) for sub in subs for n in sub.node
                                    for attr in n.attribute):
                    return True
            elif node.op_type in ("Shape", "Size") and inputs:
                constant = inputs[0] in folds or inputs[0] in later or shapes.static(node)
            else:
                constant = not subs and all(name in folds for name in inputs)
            for sub in subs:
                formal = {v.name for v in sub.input}
                stack.append((list(sub.node),
                              (folds | {t.name for t in sub.initializer}) - formal,
                              set(later) - formal))
            outputs = [name for name in node.output if name]
            if constant:
                folds.update(outputs)
            if (constant and node.op_type not in ("Constant", "Shape", "Size")) or any(
                    n in later for n in inputs):
                later.update(outputs)
    return False


def _control_flow_inside_if(nodes):
    """Whether any ``If`` of ``nodes``, at any depth, has a node with a subgraph in a branch."""
    stack = [list(nodes)]
    while stack:
        for node in stack.pop():
            subs = [sub for attr in node.attribute for sub in _subgraphs(attr)]
            if node.op_type == "If" and any(_subgraphs(attr) for sub in subs
                                            for n in sub.node for attr in n.attribute):
                return True
            stack.extend(list(sub.node) for sub in subs)
    return False


class _LazyShapes:
    """onnx's shape inference (with data propagation) of a model, run on first use."""

    def __init__(self, model):
        self.model = model
        self.dims: Optional[Dict[str, List[bool]]] = None
        self.failed = False

    def static(self, node):
        """Whether the dims a ``Shape`` / ``Size`` node reads may be known before the run."""
        if self.failed:
            return True
        if self.dims is None:
            self.dims = {}
            try:
                inferred = onnx.shape_inference.infer_shapes(self.model, data_prop=True)
            except Exception:   # noqa: BLE001 -- any failure: assume the dims are known
                self.failed = True
                return True
            graphs = [inferred.graph]
            while graphs:
                graph = graphs.pop()
                for info in list(graph.value_info) + list(graph.input) + list(graph.output):
                    shape = info.type.tensor_type.shape
                    if info.type.tensor_type.HasField("shape"):
                        self.dims[info.name] = [d.HasField("dim_value") for d in shape.dim]
                graphs.extend(sub for n in graph.node for a in n.attribute
                              for sub in _subgraphs(a))
        known = self.dims.get(node.input[0])
        if known is None:   # no shape inferred: onnxruntime infers no more (but see `later`)
            return False
        if node.op_type == "Shape":
            attrs = {a.name: a.i for a in node.attribute}
            known = known[attrs.get("start", 0):attrs.get("end", len(known))]
        return all(known)


# NOTE [onnxruntime folding nested If]
#     onnxruntime 1.32's ConstantFolding inlines an ``If`` whose condition folds to a constant
#     (its branch's nodes and initializers move into the enclosing graph).  When the inlined
#     branch itself holds control flow, the inlining breaks: two nested ``If``s on constant
#     conditions whose inner branch holds a constant (an initializer or a ``Constant``) and a
#     ``Loop`` / ``Scan`` whose body reads a main-graph input segfault while the session is
#     built (the process dies); an ``If`` on a constant around a ``Loop`` around a ``Loop``
#     fails with "vector::reserve".  No other optimizer is involved (such files load and run
#     with ConstantFolding off, and crash with only it on, at ORT_ENABLE_BASIC), and an ``If``
#     on a runtime condition is never inlined, so never crashes.  The condition need not be an
#     initializer (``Not(Not(t))`` folds too), so a piece gets its session without
#     ConstantFolding when an ``If`` whose condition *may fold* has a node with a subgraph in
#     a branch.  May fold, an over-approximation of onnxruntime's folding: an initializer, the
#     output of a node (not control flow) whose inputs all may fold, of an ``If`` on a
#     condition that may fold, and of a ``Shape`` / ``Size`` unless the dims it reads are
#     unknown to onnx's shape inference (with data propagation; onnxruntime runs the same
#     inference functions; if it fails, they count as known) and do not depend on a value
#     that only folding makes constant (onnxruntime re-infers shapes after folding: a
#     ``Reshape`` to ``Abs(c)`` gets a static shape only then; a static ``Shape`` is known to
#     data propagation, what is computed from it is not); a subgraph's formal inputs never
#     fold.  Such files load and run with the same results (folding only precomputes
#     what the session computes) instead of taking the process down.  The exporter's ``If``s
#     (the empty-sequence guard of ``foreach``: ``Shape(data)[0] > 0``) test runtime dims, so
#     its pieces keep the folding: a ViterbiCrf export ran 1.0-1.3 ms a call with it, 2-4 ms
#     without.
