"""Renaming a converted graph: every name it defines, nested subgraphs included, gets the
graph's prefix, so that separately converted graphs can be nested and inlined without clashes
(NOTE [mx2onnx pitfalls] in ``mx2onnx_fixes.py``); names resolve lexically, as in ONNX."""
import onnx


def _defined_names(graph):
    names = [vi.name for vi in graph.input] + [init.name for init in graph.initializer]
    names += [out for node in graph.node for out in node.output if out]
    return names


def _prefix_names(graph, prefix, fixed, scope=None):
    """Prefix every name defined in ``graph`` and its nested subgraphs, in place.

    ``fixed`` gives final names for some names defined (or referenced) at this level;
    ``scope`` maps names visible from enclosing graphs.  Names resolve lexically, as ONNX
    does, and names defined nowhere are left alone.  Returns the mapping for this level.
    """
    mapping = dict(scope or {})
    mapping.update({name: prefix + name for name in _defined_names(graph)})
    mapping.update(fixed)
    rename = lambda name: mapping.get(name, name) if name else name  # noqa: E731

    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        value.name = rename(value.name)
    for init in graph.initializer:
        init.name = rename(init.name)
    for node in graph.node:
        node.input[:] = [rename(n) for n in node.input]
        node.output[:] = [rename(n) for n in node.output]
        if node.name:
            node.name = prefix + node.name
        for attr in node.attribute:
            subgraphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs
            for subgraph in subgraphs:
                _prefix_names(subgraph, prefix, {}, mapping)
    return mapping

