"""Checking MXNet symbol JSON (a ``-symbol.json`` file, a gluon_cf node's ``spec``) before MXNet
reads it.

NOTE [files are checked before MXNet reads them]
    MXNet trusts a symbol file. A gluon_cf node in it is a ``Custom`` node whose ``spec``
    attribute MXNet hands to our operator's constructor from inside a C callback; an exception
    there (a tampered spec: ``"{}"``, truncated JSON, a count that is a string) cannot be
    reported by MXNet 1.9.1 and took the process down (segmentation fault, or
    ``terminate called without an active exception``). A node whose inputs form a cycle loads,
    then fails deep inside MXNet (``_Map_base::at``). So:

    * the operator's constructor never raises (``node.py``: it keeps the error, and the next
      callback, which MXNet does guard, reports it, NOTE [callbacks never take the process
      down] there), and it checks the spec with :func:`check_spec` first, so that what is
      wrong is said in words (the field, what it must hold, what it holds);
    * where gluon_cf itself loads a file (``SymbolBlock.imports``, ``export_onnx`` from files,
      the CLI's ``convert``), :func:`symbol_entries.check_symbol_file_contents` checks the whole
      file first, nested specs included, and names the file, the node and what is wrong.

    The checks are structural: valid JSON of the right shape, nodes in topological order (each
    input an earlier node, as MXNet writes them: no cycle), heads and arguments that exist,
    string attributes, and for each gluon_cf node the fields its op declares
    (``Rule.spec_fields``), subgraphs whose input slots exist, and at most
    ``MAX_NESTING`` levels of nodes nested in subgraphs. Pure Python: the CLI checks a file
    before it imports MXNet's loader. ``SymbolBlock.imports`` also checks the parameters it
    loaded against the shapes the graph alone fixes (``symbol_entries.check_parameter_shapes``):
    a parameter of another shape names the file, the parameter and both shapes, instead of
    MXNet's "Error in operator dense0_fwd: Unexpected shape for bias" at the first call.
"""
import json

from . import registry
from ._graph_json import reached_ids
from .errors import SymbolFileError

MAX_NODE_OUTPUTS = 65536   # a node's outputs: MXNet allocates per output when it loads one
MAX_NESTING = 100   # gluon_cf nodes nested in subgraphs (each level is a few C stack frames)

# What a field of a spec must hold (``Rule.spec_fields`` uses these names).
_FIELD_CHECKS = {
    "count": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
              "a count (an int >= 0)"),
    "count or null": (lambda v: v is None or isinstance(v, int) and not isinstance(v, bool)
                      and v >= 0, "a count (an int >= 0) or null"),
    "text": (lambda v: isinstance(v, str), "a string"),
    "flag": (lambda v: isinstance(v, bool), "true or false"),
    "positions": (lambda v: isinstance(v, list) and len(v) <= 100_000 and all(
        isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in v),
        "a list of input positions (ints >= 0)"),
}
_COMMON_FIELDS = {"graphs": None, "num_inputs": "count", "num_outputs": "count"}
_GRAPH_FIELDS = {"json": "text", "inputs": None, "num_outputs": "count"}


def read_symbol_file(path):
    """The text of the symbol JSON file at ``path`` if it holds gluon_cf nodes or nodes with
    subgraphs, else None (other files are MXNet's alone; a missing file is left to the
    loader)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if not holds_checked_nodes(data):
        return None
    return decode_symbol_file(data, path)


def holds_checked_nodes(data):
    """Whether a symbol file's text or bytes may hold gluon_cf nodes or nodes with subgraphs
    (MXNet's own control flow: NOTE [MXNet's control-flow nodes]); other files are MXNet's."""
    if isinstance(data, str):
        return registry.OP_PREFIX in data or '"subgraphs"' in data
    return registry.OP_PREFIX.encode() in data or b'"subgraphs"' in data


def decode_symbol_file(data, path):
    """A symbol file's bytes as text; a file that is not UTF-8 is a SymbolFileError."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SymbolFileError("%s: not a symbol file: not UTF-8 text (%s)" % (path, err)) \
            from None


def check_symbol_json(text, where="symbol JSON"):
    """Check a symbol's JSON text and every gluon_cf node in it, nested ones included."""
    # (each text with the function table of the recursion node it is inside, if any: an
    # invoke node must call one of its functions, with its number of arguments and outputs)
    stack = [(text, where, 0, None)]
    while stack:
        text, where, depth, functions = stack.pop()
        for kind, node_where, spec_text, num_inputs in _gluon_cf_nodes(text, where):
            if depth >= MAX_NESTING:
                raise SymbolFileError("%s: gluon_cf nodes nested more than %d deep"
                                      % (node_where, MAX_NESTING))
            spec = check_spec(kind, spec_text, node_where)
            if spec["num_inputs"] != num_inputs:
                raise SymbolFileError("%s: its spec attribute is invalid: the node has %d "
                                      "inputs, but its num_inputs is %d"
                                      % (node_where, num_inputs, spec["num_inputs"]))
            if kind == "invoke" and functions is not None:
                _check_call(spec, functions, node_where)
            inner = spec["graphs"] if kind == "recursion" else functions
            for role, graph in spec["graphs"].items():
                stack.append((graph["json"], "%s, subgraph %r" % (node_where, role), depth + 1,
                              inner))


def _check_call(spec, functions, where):
    """An invoke node's spec against the function table of its recursion node."""
    callee = functions.get(spec.get("function"))
    if callee is None:
        raise SymbolFileError("%s: its spec attribute is invalid: it calls function %r, which "
                              "its recursion node does not define (it defines %s)"
                              % (where, spec.get("function"), sorted(functions)))
    for what, here, there in (("arguments", spec["num_inputs"], callee.get("num_args")),
                              ("outputs", spec["num_outputs"], callee.get("num_outputs"))):
        if here != there:
            raise SymbolFileError("%s: its spec attribute is invalid: it has %d %s, but the "
                                  "function %r it calls has %s" % (where, here, what,
                                                                   spec["function"], there))


def check_spec(kind, spec_text, where=None):
    """Check a gluon_cf node's ``spec`` attribute; returns it decoded. Its subgraphs' JSON is
    checked as graphs (nodes, inputs, heads), not their own gluon_cf nodes' specs."""
    where = where or "a gluon_cf.%s node" % kind

    def fail(what):
        return SymbolFileError("%s: its spec attribute is invalid: %s" % (where, what))

    if not isinstance(spec_text, str):
        raise fail("it is missing")
    spec = _loads(spec_text, fail)
    if not isinstance(spec, dict):
        raise fail("it must be a JSON object, got %s" % _kind_of_value(spec))
    try:
        rule = registry.rule_of(kind)
    except KeyError:
        raise fail("gluon_cf has no op %r (its ops: %s)" % (kind, ", ".join(registry.kinds()))) \
            from None
    _check_fields(spec, dict(_COMMON_FIELDS, **rule.spec_fields), "", fail)
    graphs = spec["graphs"]
    if not isinstance(graphs, dict):
        raise fail("field 'graphs' must be an object of subgraphs, got %s"
                   % _kind_of_value(graphs))
    problem = rule.spec_problem(spec)
    if problem is not None:
        raise fail(problem)
    if not 1 <= spec["num_outputs"] <= MAX_NODE_OUTPUTS:
        raise fail("field 'num_outputs' must be from 1 to %d, got %s"
                   % (MAX_NODE_OUTPUTS, spec["num_outputs"]))
    roles = rule.graph_roles
    if roles is not None and sorted(graphs) != sorted(roles):
        raise fail("field 'graphs' must hold the subgraphs %s, it holds %s"
                   % (sorted(roles), sorted(graphs)))
    for role, graph in graphs.items():
        prefix = "subgraph %r: " % role
        if not isinstance(graph, dict):
            raise fail("%smust be an object, got %s" % (prefix, _kind_of_value(graph)))
        _check_fields(graph, dict(_GRAPH_FIELDS, **rule.graph_fields), prefix, fail)
        slots, num_slots = graph["inputs"], rule.num_slots(spec, graph)
        if not isinstance(slots, list) or not all(
                _FIELD_CHECKS["count"][0](s) and s < num_slots for s in slots):
            raise fail("%sfield 'inputs' must list slots below %d, got %s"
                       % (prefix, num_slots, _short(slots)))
        heads = len(_graph_of(graph["json"], "%s, subgraph %r" % (where, role))["heads"])
        if heads != graph["num_outputs"]:
            raise fail("%shas %d outputs, but its num_outputs is %d"
                       % (prefix, heads, graph["num_outputs"]))
        if role == rule.outputs_graph and heads != spec["num_outputs"]:
            raise fail("the node has the outputs of subgraph %r (%d), but its num_outputs is %d"
                       % (role, heads, spec["num_outputs"]))
    return spec


def _check_fields(obj, fields, prefix, fail):
    for name, kind in fields.items():
        optional = kind is not None and kind.startswith("optional ")
        if name not in obj:
            if optional:
                continue
            raise fail("%sfield %r is missing" % (prefix, name))
        if kind is None:
            continue
        check, what = _FIELD_CHECKS[kind[len("optional "):] if optional else kind]
        if not check(obj[name]):
            raise fail("%sfield %r must be %s, got %s" % (prefix, name, what, _short(obj[name])))


def _gluon_cf_nodes(text, where):
    """Check one symbol JSON document; yields ``(kind, where, spec text, number of inputs)``
    for its gluon_cf nodes."""
    for i, node in enumerate(_graph_of(text, where)["nodes"]):
        kind = registry.kind_of(node)
        if kind is not None:
            yield (kind, "%s: node %d (%r, gluon_cf.%s)" % (where, i, node["name"], kind),
                   node["attrs"].get("spec"), len(node["inputs"]))


def _graph_of(text, where):
    """Check one symbol JSON document (NOTE above), the subgraphs of MXNet's own control-flow
    nodes in it included (NOTE [MXNet's control-flow nodes]); returns it decoded."""
    def fail(what):
        return SymbolFileError("%s: not a valid MXNet symbol: %s" % (where, what))

    document = _loads(text, fail)
    stack = [(document, where, 0, None)]
    while stack:
        graph, graph_where, depth, outermost = stack.pop()
        for label, subgraphs in _check_graph(graph, graph_where):
            if depth >= MAX_NESTING:
                raise SymbolFileError("%s: subgraphs nested more than %d deep in it"
                                      % (outermost, MAX_NESTING))
            stack.extend((subgraph, "%s, subgraph %d" % (label, k), depth + 1,
                          outermost or label) for k, subgraph in enumerate(subgraphs))
    return document


def _check_graph(graph, where):
    """Check one graph, a document's or a subgraph's; returns ``(label, subgraphs)`` for each
    of its nodes holding subgraphs."""
    def fail(what):
        return SymbolFileError("%s: not a valid MXNet symbol: %s" % (where, what))

    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list):
        raise fail("expected a JSON object with a list of 'nodes'")
    nodes = graph["nodes"]
    holding = []
    for i, node in enumerate(nodes):
        if not isinstance(node, dict) or not isinstance(node.get("op"), str) \
                or not isinstance(node.get("name"), str):
            raise fail("node %d must be an object with string 'op' and 'name'" % i)
        for key in ("attrs", "attr", "param"):
            attrs = node.get(key, {})
            if not isinstance(attrs, dict) or not all(isinstance(v, str) for v in attrs.values()):
                raise fail("node %d (%r): its %r must map names to strings"
                           % (i, node["name"], key))
        inputs = node.get("inputs", [])
        if not isinstance(inputs, list):
            raise fail("node %d (%r): 'inputs' must be a list" % (i, node["name"]))
        for entry in inputs:
            if not _is_entry(entry):
                raise fail("node %d (%r): input %s is not [node, output, version]"
                           % (i, node["name"], _short(entry)))
            if entry[0] >= i:
                raise fail("node %d (%r) reads node %d, which is not an earlier node (MXNet "
                           "writes nodes in order; a later node makes a cycle)"
                           % (i, node["name"], entry[0]))
        if node["op"] == "Custom" and not isinstance(node.get("attrs", {}).get("op_type"), str):
            raise fail("node %d (%r): a Custom node needs an op_type" % (i, node["name"]))
        if "subgraphs" in node or node["op"] in CONTROL_FLOW_OPS:
            subgraphs = node.get("subgraphs")
            if not isinstance(subgraphs, list) or not all(isinstance(g, dict)
                                                          for g in subgraphs):
                raise fail("node %d (%r): 'subgraphs' must be a list of graphs"
                           % (i, node["name"]))
            holding.append(("%s: node %d (%r, %s)" % (where, i, node["name"], node["op"]),
                            subgraphs))
    heads = graph.get("heads")
    if not isinstance(heads, list) or not heads:
        raise fail("'heads' must list the outputs")
    for entry in heads:
        if not _is_entry(entry) or entry[0] >= len(nodes):
            raise fail("output %s is not an entry [node, output, version] of a node"
                       % _short(entry))
    args = graph.get("arg_nodes", [])
    if not isinstance(args, list) or not all(
            _FIELD_CHECKS["count"][0](a) and a < len(nodes) and nodes[a]["op"] == "null"
            for a in args):
        raise fail("'arg_nodes' must list variable nodes, got %s" % _short(args))
    return holding


# NOTE [MXNet's control-flow nodes]
#     A node of MXNet's own ``_foreach``, ``_while_loop`` or ``_cond`` (``F.contrib``'s ops, in
#     a file or inside a gluon_cf node's body) holds its bodies as ``subgraphs`` and maps its
#     inputs onto theirs with attributes (``in_data_locs``, ``func_var_locs``, ...) that MXNet
#     1.9.1 indexes with unchecked (src/operator/control_flow.cc): a tampered count or
#     location segfaulted ``SymbolBlock.imports``'s first call, or allocated without bound.
#     So, before MXNet reads such a file: the subgraphs are checked as graphs (``_graph_of``,
#     at most ``MAX_NESTING`` deep), their nodes' contents as any graph's (NOTE [subgraph
#     contents are checked before MXNet runs them] in ``symbol_entries.py``), and the node's
#     attributes against its inputs and subgraphs (:func:`control_flow_outputs`): the counts
#     MXNet's Python API writes, every location within what it indexes and one per input of
#     the subgraph it feeds. Files holding such nodes are checked like those holding gluon_cf
#     nodes (``holds_checked_nodes``), by ``mx.sym.load`` too (``hybrid.py`` wraps it, as
#     it wraps ``SymbolBlock.imports``); other files are MXNet's alone.
MAX_ITERATIONS = 10 ** 7   # a _while_loop's max_iterations: its outputs have as many rows

# op -> (its subgraphs, num_args minus its inputs, its attributes but hidden ones: __x__)
CONTROL_FLOW_OPS = {
    "_foreach": (("body",), 1, {"num_args", "num_outputs", "num_out_data", "in_state_locs",
                                "in_data_locs", "remain_locs"}),
    "_while_loop": (("cond", "func"), 2, {"num_args", "num_outputs", "num_out_data",
                                          "max_iterations", "cond_input_locs",
                                          "func_input_locs", "func_var_locs"}),
    "_cond": (("cond", "then", "else"), 3, {"num_args", "num_outputs", "cond_input_locs",
                                            "then_input_locs", "else_input_locs"}),
}


def control_flow_outputs(node, where):
    """The number of outputs of a node of MXNet's ``_foreach``, ``_while_loop`` or ``_cond``
    whose graphs passed :func:`_graph_of`, after checking its attributes (NOTE [MXNet's
    control-flow nodes]); SymbolFileError naming ``where`` and the attribute otherwise."""
    op, attrs = node["op"], _attrs_of(node)
    names, graph_args, known = CONTROL_FLOW_OPS[op]

    def fail(what):
        return SymbolFileError("%s: %s" % (where, what))

    unknown = sorted(k for k in attrs if k not in known
                     and not (k.startswith("__") and k.endswith("__")))
    if unknown:
        raise fail("%s has no attribute %r (its attributes: %s)"
                   % (op, unknown[0], ", ".join(sorted(known))))

    def count(name, low=0):
        text = attrs.get(name)
        try:
            value = int(text)
        except (TypeError, ValueError):
            raise fail("attribute %s must be an integer, got %s"
                       % (name, "nothing" if text is None else _short(text))) from None
        if value < low:
            raise fail("attribute %s must be >= %d, got %d" % (name, low, value))
        return value

    def locations(name, below, length, of):
        text = attrs.get(name, "").strip()
        try:
            if text[:1] + text[-1:] not in ("[]", "()"):
                raise ValueError
            values = [int(v) for v in text[1:-1].split(",") if v.strip()]
        except ValueError:
            raise fail("attribute %s must be a list of integers, got %s"
                       % (name, _short(text))) from None
        if length is not None and len(values) != length:
            raise fail("attribute %s must list %d location%s (%s), got %d"
                       % (name, length, "" if length == 1 else "s", of, len(values)))
        bad = [v for v in values if not 0 <= v < below]
        if bad:
            raise fail("attribute %s holds %d, not a location below %d" % (name, bad[0], below))
        return values

    subgraphs = node["subgraphs"]
    if len(subgraphs) != len(names):
        raise fail("%s holds %d subgraph%s (%s), got %d" % (
            op, len(names), "" if len(names) == 1 else "s", ", ".join(names), len(subgraphs)))
    heads = [len(g["heads"]) for g in subgraphs]
    takes = [_reachable_variables(g) for g in subgraphs]
    inputs = len(node.get("inputs", []))
    num_args = count("num_args")
    if num_args != inputs + graph_args:
        raise fail("attribute num_args must be %d (its %d inputs and %d subgraph%s), got %d"
                   % (inputs + graph_args, inputs, graph_args, "" if graph_args == 1 else "s",
                      num_args))
    num_outputs = count("num_outputs", 1)
    if num_outputs != heads[-1]:
        raise fail("attribute num_outputs must be %d (the outputs of subgraph %r), got %d"
                   % (heads[-1], names[-1], num_outputs))
    if op != "_foreach" and heads[0] != 1:
        raise fail("subgraph 'cond' must have one output, it has %d" % heads[0])
    if op == "_cond":
        if heads[1] != heads[2]:
            raise fail("subgraphs 'then' and 'else' must have as many outputs, they have %d "
                       "and %d" % (heads[1], heads[2]))
        for k, name in enumerate(names):
            locations("%s_input_locs" % name, inputs, takes[k], "the inputs of subgraph %r"
                      % name)
        return num_outputs
    num_out_data = count("num_out_data")
    if num_out_data > num_outputs:
        raise fail("attribute num_out_data must be at most num_outputs (%d), got %d"
                   % (num_outputs, num_out_data))
    states = num_outputs - num_out_data
    if op == "_foreach":
        data = locations("in_data_locs", takes[0], None, "")
        if not 1 <= len(data) <= inputs - states:
            raise fail("attribute in_data_locs must list 1 to %d locations (the sliced inputs), "
                       "got %d" % (inputs - states, len(data)))
        every = (data + locations("in_state_locs", takes[0], states, "one per state output")
                 + locations("remain_locs", takes[0], inputs - len(data) - states,
                             "the other inputs"))
        if sorted(every) != list(range(takes[0])):
            raise fail("attributes in_data_locs, in_state_locs and remain_locs must place "
                       "each of the body's %d inputs once, got %s"
                       % (takes[0], _short(every)))
        return num_outputs
    if count("max_iterations", 1) > MAX_ITERATIONS:
        raise fail("attribute max_iterations must be at most %d (its outputs have as many "
                   "rows), got %s" % (MAX_ITERATIONS, attrs["max_iterations"]))
    locations("cond_input_locs", inputs, takes[0], "the inputs of subgraph 'cond'")
    func_inputs = locations("func_input_locs", inputs, takes[1], "the inputs of subgraph "
                            "'func'")
    locations("func_var_locs", len(func_inputs), states, "one per loop variable output")
    return num_outputs


def _attrs_of(node):
    return node.get("attrs", node.get("attr", node.get("param", {})))


def _reachable_variables(graph):
    """How many variables a graph's heads read: MXNet's inputs of a subgraph."""
    nodes = graph["nodes"]
    heads = [h[0] for h in graph["heads"]]
    return sum(nodes[i]["op"] == "null" for i in reached_ids(nodes, heads))


def _is_entry(entry):
    return isinstance(entry, list) and len(entry) in (2, 3) and all(
        _FIELD_CHECKS["count"][0](v) for v in entry)


def _loads(text, fail):
    try:
        return json.loads(text)
    except RecursionError:
        raise fail("JSON nested too deep") from None
    except ValueError as err:
        raise fail("not valid JSON (%s)" % err) from None


def _kind_of_value(value):
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _short(value):
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
