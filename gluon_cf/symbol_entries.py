"""Checking what a gluon_cf node's subgraphs hold, with MXNet's own operator registry, before
MXNet loads or runs them.

NOTE [subgraph contents are checked before MXNet runs them]
    ``symbol_file.py`` checks the structure of a symbol's JSON in pure Python (NOTE [files are
    checked before MXNet reads them]); what each node of a subgraph *means* only MXNet knows.
    MXNet's loader trusts it: a head or an input naming output 5 of a node with one output
    loads, then segfaults in shape inference; an operator that does not exist, an attribute
    it cannot parse or a Custom operator never registered gives MXNet's raw message, naming
    nodes of our subgraph the user never wrote; a node given more or fewer inputs than its
    operator takes fails later, deep inside MXNet. So when a gluon_cf node is decoded (from
    the operator's constructor, which never raises: NOTE [callbacks never take the process
    down] in ``node.py``), every node of its subgraphs is created alone by MXNet, from its op
    and attributes, as MXNet's own symbol API does (``MXSymbolCreateAtomicSymbol``): that
    says whether MXNet accepts it, how many inputs it takes and how many outputs it gives;
    every input and head must then name an output that exists. The error names the gluon_cf
    node, the subgraph, the node inside it and what is wrong. Nodes of MXNet's own
    ``_foreach``, ``_while_loop`` and ``_cond`` are checked by ``symbol_file``'s
    ``control_flow_outputs`` instead (NOTE [MXNet's control-flow nodes]), and their subgraphs
    like any; another operator's subgraphs (a backend's) are MXNet's: their outputs are not
    counted. Where gluon_cf loads a file holding gluon_cf nodes or subgraphs itself
    (``SymbolBlock.imports``, ``save_artifact`` from files, the CLI's ``convert``), the file's own
    nodes are checked the same way: an input reading output 3 of a one-output node there segfaulted
    too.
"""
import ctypes
import json
from typing import List, Optional

import mxnet as mx
from mxnet._ctypes.symbol import _symbol_creator
from mxnet.base import _LIB, OpHandle, c_str, check_call

from . import registry
from .errors import SymbolFileError
from .symbol_file import (CONTROL_FLOW_OPS, check_spec, check_symbol_json, control_flow_outputs,
                          holds_checked_nodes, read_symbol_file)


def check_symbol_file_contents(path):
    """``symbol_file.check_symbol_json`` on the file at ``path``, then the contents of the
    file's own nodes (NOTE above), if it holds gluon_cf nodes. A missing file is left to the
    loader."""
    text = read_symbol_file(path)
    if text is not None:
        check_symbol_text_contents(text, str(path))


def check_symbol_text_contents(text, where):
    """:func:`check_symbol_file_contents` for a file's text already read."""
    if holds_checked_nodes(text):
        check_symbol_json(text, where)
        check_entries(text, where)


def load_parameter_file(path):
    """``mx.nd.load(path)`` of a ``net.export()`` parameter file; a file MXNet cannot read is a
    ValueError naming it (:func:`parameter_file_error`), not MXNet's C++ check."""
    try:
        return mx.nd.load(str(path))
    except mx.MXNetError as err:
        ours = parameter_file_error(err, path)
        if ours is None:
            raise
        raise ours from None


def parameter_file_error(err, path):
    """The ValueError, in our words, for MXNet's error ``err`` reading the parameter file at
    ``path``; None if ``err`` is not about reading it. MXNet says "Check failed:
    fi->Read(data): Invalid NDArray file format" for a truncated, empty or damaged file and
    "Failed to allocate CPU Memory" for a shape in it larger than memory (a damaged size)."""
    text = str(err)
    if "Invalid NDArray file format" in text:
        return ValueError("%s: not a parameter file MXNet can read (MXNet saves them with "
                          "net.export or mx.nd.save): it is truncated, empty or damaged" % path)
    if "Failed to allocate" in text:
        return ValueError("%s: a parameter in it declares a shape larger than the memory of "
                          "this machine (a damaged file?)" % path)
    return None


def check_node_spec(kind, spec_text):
    """A gluon_cf node's ``spec`` attribute, decoded and checked: its structure
    (``symbol_file.check_spec``), then its subgraphs' contents (NOTE above)."""
    return check_subgraphs(kind, check_spec(kind, spec_text))


def check_subgraphs(kind, spec):
    """Check the contents of every subgraph of a gluon_cf node of ``kind`` whose ``spec``
    passed ``symbol_file.check_spec`` (NOTE above); returns ``spec``."""
    where = "a gluon_cf.%s node %r" % (kind, spec.get("node", ""))
    for role, graph in spec["graphs"].items():
        check_entries(graph["json"], "%s, subgraph %r" % (where, role))
    return spec


def check_entries(text, where):
    """Check the nodes, inputs and heads of one symbol JSON (structurally valid already), and
    of the subgraphs of MXNet's own control-flow nodes in it (NOTE [MXNet's control-flow
    nodes] in ``symbol_file.py``)."""
    stack = [(json.loads(text), where)]
    while stack:
        graph, where = stack.pop()
        outputs: List[Optional[int]] = []   # per node: its number of outputs, None if unknown
        for i, node in enumerate(graph["nodes"]):
            label = "%s: node %d (%r, %s)" % (where, i, node["name"], node["op"])
            for entry in node.get("inputs", []):
                _check_entry(entry, outputs, graph, "%s reads" % label)
            if node["op"] == "null":
                outputs.append(1)
            elif node["op"] in CONTROL_FLOW_OPS:
                outputs.append(control_flow_outputs(node, label))
            elif "subgraphs" in node:   # another op's subgraphs (a backend's): MXNet's
                outputs.append(None)
            else:
                outputs.append(_check_node(node, label))
            stack.extend((subgraph, "%s, subgraph %d" % (label, k))
                         for k, subgraph in enumerate(node.get("subgraphs", ())))
        for k, entry in enumerate(graph["heads"]):
            _check_entry(entry, outputs, graph, "%s: its output %d is" % (where, k))


def _check_entry(entry, outputs, graph, what):
    node, index = entry[0], entry[1]
    count = outputs[node]
    if count is not None and index >= count:
        raise SymbolFileError("%s output %d of node %d (%r), which has %s" % (
            what, index, node, graph["nodes"][node]["name"],
            "1 output" if count == 1 else "%d outputs" % count))


def _check_node(node, label):
    """MXNet creates the node alone: its number of outputs, after checking its inputs."""
    attrs = dict(node.get("attrs", node.get("attr", node.get("param", {}))))
    handle = OpHandle()
    try:
        check_call(_LIB.NNGetOpHandle(c_str(node["op"]), ctypes.byref(handle)))
    except mx.MXNetError:
        handle.value = None
    if not handle.value:
        raise SymbolFileError("%s: MXNet has no operator %r" % (label, node["op"]))
    try:
        symbol = _symbol_creator(handle.value, None, None, list(attrs), list(attrs.values()),
                                 "check", False)
        takes, gives = len(symbol.list_inputs()), len(symbol.list_outputs())
    except SymbolFileError as err:   # a nested gluon_cf node: its own error names it
        raise err.with_traceback(None) from None
    except mx.MXNetError as err:
        raise SymbolFileError("%s: MXNet refuses it: %s" % (label, _mxnet_words(err))) \
            from None
    has = len(node.get("inputs", []))
    if has != takes:
        raise SymbolFileError("%s: has %d input%s, but %s with its attributes takes %d"
                              % (label, has, "" if has == 1 else "s", node["op"], takes))
    return gives


def _mxnet_words(err):
    """MXNet's message without its C++ traceback and source locations."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith(("Traceback", "File ", "["))]
    text = (useful or lines or ["(no message)"])[0]
    for prefix in ("MXNetError: ",):
        if text.startswith(prefix):
            text = text[len(prefix):]
    if "Check failed: " in text:   # "Check failed: <C++ condition>: <message>"
        text = text.rsplit(": ", 1)[-1]
    return text[:300]


def check_parameter_shapes(block, symbol_file, param_file):
    """A ValueError naming the parameter, the file and both shapes when a parameter that
    ``SymbolBlock.imports`` loaded has a shape the graph cannot take (a file of another model,
    or edited): found from the graph alone (MXNet's partial inference, the data unknown)
    where its operators fix the shape (``num_hidden``, the next layer's units), instead of
    MXNet's "Error in operator dense0_fwd: Unexpected shape for bias" at the first call."""
    params = {name: p.data() for name, p in block.collect_params().items()
              if p._data is not None}
    if not params:
        return
    symbol = block._cached_graph[1] if block._cached_graph else None
    if symbol is None:
        return
    try:
        args, _, aux = symbol.infer_shape_partial()
    except Exception:  # noqa: BLE001 - not inferable without the data: MXNet checks it later
        return
    expected = dict(zip(symbol.list_arguments(), args or []))
    expected.update(zip(symbol.list_auxiliary_states(), aux or []))
    for name, value in params.items():
        want = expected.get(name)
        if not want:
            continue
        fits = len(want) == len(value.shape) and all(
            w in (0, -1) or w == h for w, h in zip(want, value.shape))
        if not fits:
            dims = [str(d) if d > 0 else "?" for d in want]
            shape = "(%s)" % (dims[0] + "," if len(dims) == 1 else ", ".join(dims))
            raise ValueError(
                "%s: parameter %r has shape %s, but the graph of %s needs %s (is the parameter "
                "file of another model, or of another version of this one?)"
                % (param_file, name, tuple(value.shape), symbol_file, shape))
