"""Index inputs: which model inputs are used, unconditionally, as ``take`` indices into which.

NOTE [index bounds]
    MXNet's ``take`` clips out-of-range indices by default (``mode='clip'``), and the exported
    model does the same, so a tree model given a root index past the end of its node arrays
    answers for the last node, silently. A deployed model's inputs come from files and other
    programs, where such an index is a bug in the caller, so at export time we find the inputs
    whose values *must* be valid indices, record them in the model's metadata
    (``gluon_cf.index_bounds``, a JSON list of ``{"input", "indexes", "axis", "node"}``), and the
    runtime (:func:`gluon_cf.export.load`'s artifacts, the CLI for plain ONNX too) refuses values
    outside ``[0, size)`` before running.

    "Must" is proven, never guessed: a constraint is recorded only when the input's values
    reach the indices of a ``take(mode='clip')`` on a path that always runs, by operators that
    only move elements (``Reshape``, ``Cast``, ``slice``, the data side of ``take``, ...) and
    gluon_cf's structure: a ``foreach`` slices its data into its body (which runs for every
    step), captured values and states enter a body unchanged (states at step 0), a
    ``recursion`` node passes its arguments to its entry function, an ``invoke`` to its callee.
    A ``cond`` branch or ``while_loop`` body may not run, so nothing inside one counts: an index
    guarded by a test (``cond(i < 0, ...)``) stays the model's business, with MXNet's clipping.
    The indexed array must *be* a model input or parameter (not a value computed from one), so
    its size is known when the model runs.

This module reads MXNet's symbol JSON only; it imports neither MXNet nor ONNX.
"""
import json

from gluon_cf import registry

METADATA_KEY = "gluon_cf.index_bounds"

# Operators whose output holds only elements of their (first) input: the values of an index
# input survive them unchanged (Cast: integral values stay equal; MXNet's take casts them too).
_MOVES_ELEMENTS = frozenset({
    "_copy", "identity", "BlockGrad", "stop_gradient", "Reshape", "reshape", "Flatten",
    "flatten", "expand_dims", "squeeze", "transpose", "slice", "slice_axis", "slice_like",
    "SliceChannel", "split", "Cast", "cast", "repeat", "tile", "flip", "reverse",
    "broadcast_to", "broadcast_like", "_split_v2", "swapaxes", "SwapAxis"})


class _Value:
    """What is known of one graph entry: the model inputs whose elements it holds (``within``)
    and the model input or parameter it *is* (``equals``)."""
    __slots__ = ("within", "equals")

    def __init__(self, within=frozenset(), equals=None):
        self.within, self.equals = within, equals


_NOTHING = _Value()


def find(symbol_json, names=None):
    """The index bounds of a model's symbol JSON (a dict or text), as a list of dicts.

    ``names`` maps MXNet variable names to the names the exported model uses (ONNX input names);
    variables not in it keep their names (parameters).
    """
    graph = json.loads(symbol_json) if isinstance(symbol_json, str) else symbol_json
    names = dict(names or {})
    finder = _Finder()
    top = [_Value(frozenset([names.get(n["name"], n["name"])]), names.get(n["name"], n["name"]))
           for n in graph["nodes"] if n["op"] == "null"]
    finder.graph(graph, top, functions=None, environment=None)
    return [dict(input=i, indexes=d, axis=a, node=node)
            for (i, d, a), node in sorted(finder.found.items())]


class _Finder:
    def __init__(self):
        self.found = {}       # (input, indexed, axis) -> take node name
        self.visited = set()  # (function, argument flows): each callee analysed once per flow

    def graph(self, graph, inputs, functions, environment):
        """Walk one graph whose variables (in order) hold ``inputs``."""
        values = {}
        variables = iter(inputs)
        for k, node in enumerate(graph["nodes"]):
            if node["op"] == "null":
                values[(k, 0)] = next(variables, _NOTHING)
                continue
            args = [values.get((i, j), _NOTHING) for i, j, *_ in node["inputs"]]
            attrs = node.get("attrs", {})
            op = node["op"]
            if op == "take" and len(args) == 2:
                self._take(node, attrs, args)
            if op == "take" and args:
                values[(k, 0)] = _Value(args[0].within)
            elif op in _MOVES_ELEMENTS and args:
                within = args[0].within
                for out in range(int(attrs.get("num_outputs", 1) or 1)):
                    values[(k, out)] = _Value(within)
            elif registry.kind_of(node) is not None:
                self._node(registry.kind_of(node), attrs, args, functions, environment)

    def _take(self, node, attrs, args):
        data, indices = args
        axis = int(attrs.get("axis", 0))
        if attrs.get("mode", "clip") != "clip" or axis < 0 or data.equals is None:
            return
        for name in indices.within:
            self.found.setdefault((name, data.equals, axis), node["name"])

    def _node(self, kind, attrs, args, functions, environment):
        spec = json.loads(attrs["spec"])
        graphs = spec.get("graphs", {})
        if kind == "foreach":
            num_data = spec["num_data"]
            # data arrive sliced (elements of the node's input); states at step 0 and captured
            # values as they are. The body runs at least once (zero-length data is an error).
            slots = [_Value(a.within) for a in args[:num_data]] + list(args[num_data:])
            self._subgraph(graphs["body"], slots, functions, environment)
        elif kind == "recursion":
            num_args = spec["num_args"]
            table = graphs
            env = args[num_args:]
            self._call(table, spec["entry"], args[:num_args], env)
        elif kind == "invoke" and functions is not None:
            self._call(functions, spec["function"], args, environment)
        # cond branches and while_loop bodies may not run: nothing in them is a must.

    def _call(self, table, function, arguments, environment):
        graph = table.get(function)
        if graph is None:
            return
        key = (function, tuple((a.within, a.equals) for a in arguments))
        if key in self.visited:
            return
        self.visited.add(key)
        self._subgraph(graph, list(arguments) + list(environment), table, environment)

    def _subgraph(self, graph_spec, slots, functions, environment):
        inputs = [slots[s] if 0 <= s < len(slots) else _NOTHING for s in graph_spec["inputs"]]
        self.graph(json.loads(graph_spec["json"]), inputs, functions, environment)


# ----------------------------------------------------------------------------- run time

def read(metadata):
    """The bounds recorded in a model's metadata (``{key: value}``), validated; [] if none.
    Raises ValueError on a malformed entry (the file may be hostile)."""
    text = metadata.get(METADATA_KEY)
    if text is None:
        return []
    what = f"the model's {METADATA_KEY} metadata"
    if len(text) > _MAX_METADATA_CHARS:
        raise ValueError(f"{what} has {len(text)} characters, more than the "
                         f"{_MAX_METADATA_CHARS} an index-bounds list can need")
    try:
        bounds = json.loads(text)
    except RecursionError:   # a hostile file: JSON nested deeper than Python's parser goes
        raise ValueError(f"{what} is malformed: JSON nested too deep (expected a list of "
                         f"{{input, indexes, axis, node}})") from None
    except ValueError as err:
        raise ValueError(f"{what} is not JSON ({err})") from None
    if not isinstance(bounds, list):
        raise ValueError(f"{what} is malformed: expected a list of {{input, indexes, axis, "
                         f"node}}, got a JSON {type(bounds).__name__}")
    for k, b in enumerate(bounds):
        problem = None
        if not isinstance(b, dict) or set(b) != {"input", "indexes", "axis", "node"}:
            problem = "is not an object with exactly the keys input, indexes, axis, node"
        elif not all(isinstance(b[key], str) for key in ("input", "indexes", "node")):
            problem = "has an input, indexes or node that is not a string"
        elif type(b["axis"]) is not int or b["axis"] < 0:
            problem = f"has axis {b['axis']!r}, not an int >= 0"
        if problem is not None:
            raise ValueError(f"{what} is malformed: entry {k} {problem}")
    return bounds


_MAX_METADATA_CHARS = 1 << 24


def initializer_shapes(graph):
    """The shapes of an ONNX graph's initializers (indexed parameters), for :func:`check`."""
    return {init.name: tuple(init.dims) for init in graph.initializer}


def check(bounds, names, arrays, constant_shapes):
    """Raise ValueError if an index input holds a value outside ``[0, size)``.

    ``names``/``arrays``: the model's inputs; ``constant_shapes``: :func:`initializer_shapes`.
    """
    import numpy as np

    if not bounds:
        return
    shapes = dict(constant_shapes)
    arrays = dict(zip(names, arrays))
    shapes.update((name, np.shape(x)) for name, x in arrays.items())

    for bound in bounds:
        values = arrays.get(bound["input"])
        shape = shapes.get(bound["indexes"])
        if values is None or shape is None or bound["axis"] >= len(shape) \
                or shape[bound["axis"]] is None:
            continue
        size = int(shape[bound["axis"]])
        values = np.asarray(values)
        if values.size == 0:
            continue
        if values.dtype.kind == "f":
            # take reads a float index as C's static_cast<int> does (toward zero), as does
            # the exported Cast: -0.5 and 6.7 are rows 0 and 6 of 7, not out of range
            read = np.trunc(values)
            bad = np.isnan(read) | (read < 0) | (read >= size)
        else:
            bad = (values < 0) | (values >= size)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            value = values[where].item()
            if isinstance(value, float) and value.is_integer():
                value = int(value)  # float32 index inputs (MXNet's default dtype)
            raise ValueError(
                f"input {bound['input']!r} holds {value!r} at {list(where)}, but its values "
                f"index axis {bound['axis']} of {bound['indexes']!r} (size {size}) in "
                f"{bound['node']!r}, so they must lie in [0, {size - 1}] (MXNet's take would "
                f"clip it to the nearest valid index, silently)")
