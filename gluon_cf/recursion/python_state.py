"""Python state a recursive function's body changes while it is traced (issue 24): refused
when the traced graph depends on it, else a warning (NOTE [Python state in a recursive body]).

NOTE [Python state in a recursive body]
    Hybridized, a recursive function's body is traced into one graph (a discovery trace, then
    the body's), not run once per call as eagerly. A body changing Python state it reads,
    ``self.calls += 1`` ... ``node(l) + node(r) * self.calls``, ran eagerly once per call
    ([[87, 97, 107]] on a tree of five nodes) but hybridized once per trace, the count of the
    last trace a constant of the graph ([[45, 50, 55]]), silently. The state a body can reach
    is what Python names in it: its closure's cells and the globals it reads, followed a few
    levels deep (round 29r: one level missed ``state["n"][0]``, ``self.stats.n``,
    ``objs[0].n``): the items of Python containers (any mapping, sequence or set, a deque
    too), the attributes of objects (``__dict__`` and ``__slots__``; a Block's own but not
    Gluon's: its children, parameters, cached graph), a class's attributes, numpy arrays'
    bytes, and the closures and globals of the user's functions reached there (a helper
    ``bump()`` whose ``nonlocal`` or ``global`` changes, a method of an object reached); a
    snapshot of it is taken around the body's trace, bounded in depth and size. When the
    trace changed it, the body is traced once more: a graph that differs (constants,
    operators; not the names MXNet numbers) depends on the state it changes,
    which the graph cannot follow call by call: ``NotImplementedError`` at the statement's
    line; so is state the body's code reads besides the statement changing it, whatever the
    graphs (NOTE [state a body changes and reads] in ``state_reads.py``: two traces sample
    the counts the calls see). State never read so, a counter or a log for logging, is the
    same graph: a warning, not a refusal, since the values are eager mode's, but the change
    happens per trace, not per call. As autograph's refusal of a Python value changed in a
    tensor loop (NOTE [autograph side effects]), whose source conversion a plain recursive
    body does not go through, the refusal is a statement that changes Python state where a
    graph is traced once; here it is found by the state's change, not by the statement.
"""
import ast
import collections.abc
import dis
import functools
import hashlib
import inspect
import itertools
import json
import os
import random
import re
import sys
import sysconfig
import textwrap
import types
import warnings
from typing import Any, Dict, List, Tuple

import mxnet as mx
import numpy as np

from . import state_reads
from .state_reads import chain as _chain, chain_names as _chain_names
from .state_reads import names_read as _names_read

_PLAIN = (bool, int, float, complex, str, bytes, type(None))
_NOT_STATE = (types.BuiltinFunctionType, mx.sym.Symbol, mx.nd.NDArray,
              mx.gluon.Parameter, mx.gluon.ParameterDict)
_MAX_ITEMS = 256     # items of a container looked at (a table of thousands is no counter)
_MAX_DEPTH = 4       # names, items and attributes followed from a body's names
_MAX_KEYS = 4096     # values compared in all (a snapshot is taken around every body trace)
_MAX_ARRAY = 4096    # elements of a numpy array compared (a larger one: a table, not a counter)
_MAX_ARRAY_BYTES = 1 << 20   # bytes of arrays digested in all (NOTE [a snapshot's cost])
# NOTE [a snapshot's cost]
#     A snapshot is taken twice per body trace, of whatever a model holds: a vocabulary of a
#     million words, a ``range(10**9)``, hundreds of embedding tables in numpy. Walking them
#     whole made a first call seconds slower (``list(d.items())`` of 1e6 items: 0.6 s per
#     snapshot), copied every array's bytes (126 MB for 256 lists of 16 small arrays) and
#     ``list(range(10**9))`` ran out of memory (round 29r review). So a container gives its
#     first ``_MAX_ITEMS`` items by iteration, never a list of all, and arrays are digested
#     (blake2b, no copy of a contiguous one) up to ``_MAX_ARRAY_BYTES`` in all, the others
#     keeping their identity: a table, not a counter.
# Gluon's own attributes of a Block (its children and parameters, registered on use): the
# underscored names MXNet's block.py and gluon_cf set; a user's ``self._calls`` is state
_GLUON_ATTRS = frozenset(re.findall(r"self\.(_\w+)\s*=", inspect.getsource(mx.gluon.block)))


def _library_attrs(cls) -> frozenset:
    """The underscored attributes the library classes of ``cls``'s MRO set (a Gluon
    ``LSTMCell``'s ``_counter``, ``_init_counter``: its calls and ``begin_state`` count them,
    which is Gluon's bookkeeping, not the user's state; round 29r review: a warning for every
    TreeLSTM calling a cell)."""
    if cls in _LIBRARY_ATTRS:
        return _LIBRARY_ATTRS[cls]
    names = set(_GLUON_ATTRS)
    for base in cls.__mro__:
        if _library_type(base) and base.__module__.split(".")[0] != "collections":
            try:
                names.update(re.findall(r"self\.(_\w+)\s*=", inspect.getsource(base)))
            except (OSError, TypeError):
                continue
    found = _LIBRARY_ATTRS[cls] = frozenset(names)
    return found


_LIBRARY_ATTRS: Dict[type, frozenset] = {}
_LIBRARIES = tuple(os.path.dirname(os.path.abspath(str(m.__file__))) + os.sep
                   for m in (mx, np, ast))   # (functions of which are not the user's)


def _user_function(fn) -> bool:
    code = getattr(fn, "__code__", None)
    return code is not None and not os.path.abspath(code.co_filename).startswith(
        _LIBRARIES + (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,))


# NOTE [a module's state]
#     A body changing or reading a module's variable (``import counts``; ``counts.n += 1``,
#     ``counts.table[k]``) reaches state as a global does: hybridized, one trace's count was a
#     constant of the graph for every call, silently (round 30r: eager [[87, 97, 107]],
#     hybridized [[45, 50, 55]]). A module is a namespace, not a value: the snapshot walks
#     the attributes of it the functions reached name (never all of a module), of the user's
#     modules only (the standard library's, MXNet's, numpy's and gluon_cf's are not the
#     user's state; ``random``'s and numpy's generators: NOTE [a Python random generator in a
#     recursive body]), whether the module is a global or imported in the body. A name
#     there is one the code reads or holds as a string (``getattr(counts, "n")``,
#     ``counts.__dict__["n"]``), and a module is also one a string names (``sys.modules[
#     "counts"]``, ``importlib.import_module("counts")``) or ``import pkg.sub as s`` imports
#     when ``pkg`` is a global too (round 30r review: each of these ran, one trace's count for
#     every call, silently). A name built at run time (``getattr(counts, "n" + k)``) is not
#     seen.
_STDLIB = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep


def _user_module(module) -> bool:
    path = getattr(module, "__file__", None)
    if not isinstance(path, str):   # (a builtin module, a namespace package)
        return False
    path = os.path.abspath(path)
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    if path.startswith(_LIBRARIES + (ours,)):
        return False
    return not path.startswith(_STDLIB) or any(
        part in path for part in (os.sep + "site-packages" + os.sep,
                                  os.sep + "dist-packages" + os.sep))


def _imported(code: types.CodeType):
    """The modules ``code`` and the functions defined in it import (``import a.b``: a.b), and
    the strings it holds that name a loaded module (``sys.modules["a"]``,
    ``importlib.import_module("a")``)."""
    imports, strings = _imports_and_strings(code)
    return set(imports) | {const for const in strings if const in sys.modules}


@functools.lru_cache(maxsize=4096)
def _imports_and_strings(code: types.CodeType):
    """What ``_imported`` reads of ``code``, which never changes: its imports and string
    constants, and its nested functions' (a disassembly per snapshot walking a function was
    2.9 of 5 s of 16 mutual recursive functions' first call)."""
    imports = {ins.argval for ins in dis.get_instructions(code) if ins.opname == "IMPORT_NAME"}
    strings = set()
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            inner = _imports_and_strings(const)
            imports |= inner[0]
            strings |= inner[1]
        elif isinstance(const, str):
            strings.add(const)
    return frozenset(imports), frozenset(strings)


def _strings(code: types.CodeType):
    """The identifiers ``code`` and the functions defined in it hold as strings: a module's
    variable named by a string (``getattr(mod, "n")``, ``mod.__dict__["n"]``)."""
    names = set()
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _strings(const)
        elif isinstance(const, str) and const.isidentifier():
            names.add(const)
    return names


class Snapshot:
    """The Python state a body can reach from its names, as comparable keys: a path from a
    name (``("counts", "[0]")``, ``("self", ".stats", ".n")``) to a plain value, a container's
    length, a numpy array's bytes. ``functions``: the user's functions reached (the body, the
    helpers it calls), where the statement that changes the state is looked for."""

    def __init__(self, fn):
        self.state: Dict[Tuple[Any, ...], Any] = {}
        self.functions: List[types.FunctionType] = []
        self._seen = set()
        self._names: set = set()   # (the names the functions reached read: a module's parts)
        self._array_bytes = 0
        self.methods: set = set()   # (methods of a value's class, met walking the value)
        self._function(fn, 0)
        # (where a change is looked for: the class's other methods, ``hybrid_forward``
        # resetting the state before the call, last)
        self.functions.sort(key=lambda f: f is not fn and id(f) in self.methods)

    def _function(self, fn, depth):
        if id(fn) in self._seen or depth > _MAX_DEPTH or not _user_function(fn):
            return
        self._seen.add(id(fn))
        self.functions.append(fn)
        code = fn.__code__
        scope = id(fn)    # (two helpers' names alike are two names)
        names = _names_read(code)
        self._names |= names | _strings(code)
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:   # (a cell not yet bound)
                continue
            self._walk((scope, name), value, depth)
        globals_ = getattr(fn, "__globals__", {})
        for name in sorted(names):
            if name in globals_:
                self._walk((id(globals_), name), globals_[name], depth)
        for name in sorted(_imported(code)):   # (``import mod``: NOTE [a module's state])
            if name in sys.modules and not (name in names and name in globals_):
                self._walk((scope, name), sys.modules[name], depth)

    def _walk(self, path, value, depth):
        if len(self.state) >= _MAX_KEYS:
            return
        generator = _generator(value)
        if generator is not None:   # NOTE [a Python random generator in a recursive body]
            if generator is not value:
                path = path + (" generator",)
            self.state[path] = ("generator", _progress(generator))
            return
        if isinstance(value, _NOT_STATE):
            return
        if isinstance(value, types.ModuleType):   # NOTE [a module's state]
            if _user_module(value) and depth < _MAX_DEPTH:
                for attr in sorted(self._names & set(vars(value))):
                    self._walk(path + ("." + attr,), vars(value)[attr], depth + 1)
            return
        if isinstance(value, _PLAIN):
            self.state[path] = ("value", type(value), value)
            return
        if isinstance(value, np.ndarray):
            self.state[path] = self._array(value)
            return
        if isinstance(value, types.FunctionType):   # (a helper the body calls)
            self._function(value, depth + 1)
            return
        if isinstance(value, types.MethodType):
            self._walk(path, value.__self__, depth)
            self._function(value.__func__, depth + 1)
            return
        if id(value) in self._seen or depth >= _MAX_DEPTH:
            self.state[path] = ("object", id(value))
            return
        self._seen.add(id(value))
        if isinstance(value, functools_partial):
            self._walk(path + (".func",), value.func, depth + 1)
            self._walk(path + (".args",), value.args, depth + 1)
            self._walk(path + (".keywords",), value.keywords, depth + 1)
            return
        self.state[path] = ("object", id(value), _length(value), _progress(value))
        try:
            self._parts(path, value, depth)
        except Exception:   # noqa: BLE001 - a user's mapping failing (a KeyError): its identity
            pass   # (a container changed by another thread, a user's odd mapping: its identity)

    def _array(self, value):
        """A numpy array's key: a digest of its bytes, within the snapshot's budget
        (NOTE [a snapshot's cost]), else its identity."""
        if value.size > _MAX_ARRAY or self._array_bytes + value.nbytes > _MAX_ARRAY_BYTES \
                or value.dtype.hasobject:
            return ("object", id(value))
        self._array_bytes += value.nbytes
        data: Any = np.ascontiguousarray(value).reshape(-1).view(np.uint8)   # (no copy)
        return ("array", value.shape, value.dtype.str, hashlib.blake2b(data).digest())

    def _parts(self, path, value, depth):
        """The items, attributes and methods of ``value``, walked (the first
        ``_MAX_ITEMS`` of a container, never all of it: NOTE [a snapshot's cost])."""
        if isinstance(value, collections.abc.Mapping):
            for key, item in itertools.islice(value.items(), _MAX_ITEMS):
                self._walk(path + ("[%r]" % (key,),), item, depth + 1)
        elif isinstance(value, (collections.abc.Sequence, collections.abc.Set)):
            items = list(itertools.islice(value, _MAX_ITEMS))
            if isinstance(value, collections.abc.Set):
                self.state[path + ("{}",)] = sorted(repr(v) for v in items)
            else:
                for k, item in enumerate(items):
                    self._walk(path + ("[%d]" % k,), item, depth + 1)
        if isinstance(value, type):
            if value.__module__ not in ("builtins",) and not _library_type(value):
                for attr, item in list(vars(value).items()):
                    if attr[:2] != "__":
                        self._walk(path + ("." + attr,), item, depth + 1)
            return
        if not _library_type(type(value)):   # (its methods: a call may change it, or read
            for item in list(vars(type(value)).values()):   # it, a property's getter too)
                for method in _methods_of(item):
                    self.methods.add(id(method))
                    self._function(method, depth + 1)
        block = isinstance(value, mx.gluon.Block)
        attrs = getattr(value, "__dict__", None)
        if isinstance(attrs, dict):
            for attr, item in list(attrs.items()):
                if not (block and (attr in _library_attrs(type(value)) or
                                   attr.startswith("_gluon_cf"))):
                    self._walk(path + ("." + attr,), item, depth + 1)
        for attr in getattr(type(value), "__slots__", ()):
            if isinstance(attr, str) and hasattr(value, attr):
                self._walk(path + ("." + attr,), getattr(value, attr), depth + 1)


functools_partial = functools.partial


def _methods_of(item):
    """The functions a class's attribute ``item`` runs: a method, a property's getter and
    setter, a static or class method's function, a cached property's."""
    if isinstance(item, property):
        found = [item.fget, item.fset, item.fdel]
    elif isinstance(item, (staticmethod, classmethod)):
        found = [item.__func__]
    elif isinstance(item, functools.cached_property):
        found = [item.func]
    else:
        found = [item]
    return [f for f in found if isinstance(f, types.FunctionType)]


def _library_type(cls) -> bool:
    return cls.__module__.split(".")[0] in ("mxnet", "numpy", "gluon_cf", "collections")


# NOTE [a Python random generator in a recursive body]
#     A body drawing from Python's or numpy's random generators (``random.randint(1, 9)``,
#     ``np.random.rand()``, ``self.rng.random()``, ``from random import random``) draws once
#     per call eagerly, but once per trace hybridized: the draw of one trace was a constant
#     of the graph for every call, silently (round 29r review: eager [[135, 149, 163]],
#     hybridized [[153, 170, 187]]). A generator's state is state the body changes, like a
#     counter: a ``random.Random``, numpy's ``RandomState`` or ``Generator`` reached by name,
#     a builtin method bound to one, and the modules' own (``random``, ``np.random``) when the
#     body names the module. Drawn for the value: refused; drawn for something else (a
#     shuffle for a log): a warning.
_GENERATORS = (random.Random, np.random.RandomState, np.random.Generator)


def _generator(value):
    """The random generator ``value`` is, is bound to, or is the module of (above); else
    None."""
    if isinstance(value, _GENERATORS):
        return value
    if isinstance(value, types.BuiltinMethodType) and \
            isinstance(getattr(value, "__self__", None), _GENERATORS):
        return value.__self__
    if value is random:
        return getattr(random, "_inst", None)
    if value is np or value is np.random:
        return getattr(np.random.mtrand, "_rand", None)
    return None


def _progress(value):
    """How far an iterator with no attributes has gone (``next(counter)``): an
    ``itertools.count``'s repr, a builtin iterator's index, a random generator's state (a
    digest); else None."""
    if isinstance(value, random.Random):
        return hash(value.getstate())
    if isinstance(value, np.random.RandomState):
        state: Any = value.get_state()
        return (hashlib.blake2b(state[1].tobytes()).digest(),) + tuple(state[2:])
    if isinstance(value, np.random.Generator):
        return repr(value.bit_generator.state)
    if isinstance(value, itertools.count):
        return repr(value)
    if type(value).__module__ == "builtins" and type(value).__name__.endswith("iterator"):
        try:
            reduced = value.__reduce__()
        except (TypeError, ValueError):
            return None
        return reduced[2] if len(reduced) > 2 and isinstance(reduced[2], int) else None
    return None


def _length(value):
    try:
        return len(value)
    except Exception:   # (no length, or one that fails: the object's identity alone)
        return None


def snapshot(fn) -> Snapshot:
    """The Python state ``fn``'s body can reach by name (:class:`Snapshot`)."""
    return Snapshot(fn)


def changed(before: Snapshot, after: Snapshot):
    """The paths (``(scope, "self", ".calls")``) whose state differs between two snapshots."""
    paths = [key for key in sorted(set(before.state) | set(after.state), key=repr)
             if before.state.get(key) != after.state.get(key)]
    differ = set(paths)   # (a container's new items: the container alone is named)
    return [p for p in paths if not any(p[:k] in differ for k in range(2, len(p)))]


def _shown(path) -> str:
    """``self.stats.n``, ``state['n'][0]``: a path as the user's code names it."""
    return path[1] + "".join(path[2:])


# NOTE [two traces, one graph]
#     Two traces of one body differ in what MXNet and gluon_cf number per trace, which is no
#     part of the computation: the names of operator nodes (and a gluon_cf node's ``node``
#     label, read by messages only), the ``_gcf<k>_`` prefix of a trace's names and of its
#     inputs, and the attributes of a parameter's variable (its shape, init ... at its first
#     use only). Everything else must be equal, exactly: round 29 stripped every digit that
#     followed a letter from every string, so a body picking ``self.layers[self.calls % 2]``
#     (``dense0_weight`` or ``dense1_weight``), a ``Custom`` op_type or a ``ctx_group``
#     chosen by the state changed was one graph: a warning, and one trace's layer for every
#     call, silently (round 30r: eager [[-31.5 ...]], hybridized [[45 ...]]). A dtype is a
#     value too (round 29r review: float16 against float32). A nested graph's variables (a
#     ``cond`` branch's, bound to its node's inputs by position) are named by MXNet's
#     numbering of the outer values they stand for (``_mulscalar1_output``): numbered in
#     their order of appearance, the outer graph naming what they are bound to. A recursive
#     function the body defines is made anew by each trace (``countdown_1``, then
#     ``countdown_3`` in its table): named by its name and order of appearance; one made
#     before the trace (a list of functions made by a factory, picked by the state) keeps
#     its own name, so that picking another is another graph. The graphs compared are the
#     body's and those of the recursive functions it calls (and they call ...), each traced
#     under the state its trace left: a helper reading the count the body changes
#     (``v * self.calls``), or one the body makes with a scale the count picks, called by one
#     same body graph, was a warning and one trace's helper for every call (round 30r review:
#     eager x3*3 + x4*4 + x2*5, hybridized one count for all).
_TRACE_NUMBER = re.compile(r"(?<![A-Za-z0-9])_gcf\d+_")


def _canonical(value, names=None, fresh=None):
    """A graph's JSON (or a gluon_cf node's spec in it) without what two traces of one body
    differ in (NOTE [two traces, one graph]). ``names``: a nested graph's variables met so
    far (None in the trace's own graph, whose variables are bound by name); ``fresh``: the
    walk's :class:`_Functions`."""
    if isinstance(value, str):
        if value[:1] == "{":
            try:
                return _canonical(json.loads(value), {}, fresh)   # (a spec, a nested graph)
            except ValueError:
                pass
        return _TRACE_NUMBER.sub("_gcf_", value)
    if isinstance(value, list):
        return [_canonical(v, names, fresh) for v in value]
    if not isinstance(value, dict):
        return value
    if isinstance(value.get("nodes"), list) and names is not None:
        names = {}   # (a nested graph: its own variables)
    if "op" in value and "inputs" in value:   # a node: its name is numbered, unless a variable
        value = {k: v for k, v in value.items() if k not in (
            ("attrs",) if value["op"] == "null" else ("name",))}
        if value["op"] == "null" and names is not None:
            value["name"] = names.setdefault(value.get("name"), "var%d" % len(names))
    elif isinstance(value.get("node"), str) and "num_outputs" in value:   # a gluon_cf spec
        value = {k: v for k, v in value.items() if k != "node"}
        if fresh is not None and isinstance(value.get("function"), str):
            value["function"] = fresh.name(value["function"])
    return {k: _canonical(v, names, fresh) for k, v in value.items()}


class _Functions:
    """The recursive functions one walk of a trace and its callees' bodies calls (NOTE [two
    traces, one graph]): ``called``, in order of appearance; a function the trace made
    named by its name and that order."""

    def __init__(self, made_in_trace):
        self.made_in_trace = made_in_trace
        self.called: List[str] = []
        self._order: Dict[str, int] = {}

    def name(self, qname):
        if qname not in self._order:
            self._order[qname] = len(self._order)
            self.called.append(qname)
        if self.made_in_trace is not None and self.made_in_trace(qname):
            return "%s#%d" % (qname.rsplit("_", 1)[0], self._order[qname])
        return qname


def _graphs(trace, made_in_trace, body_of):
    """The canonical JSON of a trace, then of the body of each recursive function it calls
    (and they call, ...) as ``body_of(qname)`` traces it now (None: not traced)."""
    fresh = _Functions(made_in_trace)
    graphs = [_canonical(json.loads(trace.symbol.tojson()), None, fresh)]
    k = 0
    while body_of is not None and k < len(fresh.called):
        body = body_of(fresh.called[k])
        k += 1
        if body is not None:
            graphs.append(_canonical(json.loads(body.symbol.tojson()), None, fresh))
    return graphs


def _changes(node, hit) -> bool:
    """Whether statement ``node`` assigns an expression ``hit`` accepts."""
    targets = node.targets if isinstance(node, ast.Assign) else \
        [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
    return any(hit(target) for target in targets)


def _mutates(node, hit) -> bool:
    """Whether simple statement ``node`` calls a method of an expression ``hit`` accepts
    (``seen.append(1)``), advances one (``k = next(counter)``), calls one (a generator's
    draw) or sets an attribute of one (``setattr(counts, "n", 1)``)."""
    if not isinstance(node, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)):
        return False
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        if isinstance(call.func, ast.Attribute) and hit(call.func.value):
            return True
        if isinstance(call.func, ast.Name) and call.func.id == "next" and call.args and \
                hit(call.args[0]):
            return True
        if isinstance(call.func, ast.Name) and hit(call.func):
            return True
        if isinstance(call.func, ast.Name) and call.func.id in ("setattr", "delattr") and \
                call.args and hit(call.args[0]):   # (``setattr(counts, "n", ...)``)
            return True
    return False


def _hits(chains, names):
    """The tests of an expression, most precise first: its chain extends a changed path's
    (``self.nrng.randint`` for ``self.nrng``, not ``self.rng.randint``), is a prefix of one
    (``counter.bump()`` for ``counter.box.n``), or names any name along one."""
    return (lambda e: any(_chain(e)[:len(c)] == c for c in chains),
            lambda e: any(c[:len(_chain(e))] == _chain(e) for c in chains if _chain(e)),
            lambda e: bool(_chain_names(e) & names))


def _statement_line(functions, paths):
    """``file:line`` of the first statement of the functions reached (the body first, then
    the helpers it names, then the others) assigning one of the changed ``paths``
    (``self.calls += 1``, ``calls[0] = ...``) or calling a method of one
    (``seen.append(1)``), the most precise match first (:func:`_hits`), else the body's
    ``def``."""
    code = functions[0].__code__
    where = "%s:%d" % (code.co_filename, code.co_firstlineno)
    called = _names_read(code)   # (the helpers the body names before the others reached)
    ordered = functions[:1] + sorted(functions[1:], key=lambda f: f.__name__ not in called)
    parsed = []
    for fn in ordered:
        try:
            parsed.append((fn.__code__, ast.parse(textwrap.dedent(inspect.getsource(fn)))))
        except (OSError, TypeError, SyntaxError):
            continue
    chains = {(path[1],) + tuple(p[1:] for p in path[2:] if p[:1] == ".") for path in paths}
    names = {part.lstrip(".") for path in paths for part in path[1:] if part[:1] != "["}
    for hit in _hits(chains, names):
        for fn_code, tree in parsed:
            for test in (_changes, _mutates):
                for node in ast.walk(tree):
                    if isinstance(node, ast.stmt) and test(node, hit):
                        return "%s:%d" % (fn_code.co_filename,
                                          fn_code.co_firstlineno + node.lineno - 1)
    return where


def check_trace(rfn, before, traced, table, made):
    """After the body trace ``traced`` of recursive function ``rfn`` (``before``: the
    :func:`snapshot` taken before it): a refusal if it changed Python state its graph, or the
    graph of a recursive function it calls, depends on, a warning if it changed state they do
    not read (NOTE [Python state in a recursive body]). ``table``: the recursion's table of
    functions (``qnames``, ``signatures``, ``trace_body(fn)``); ``made``: the count of
    recursive functions made (``RecursiveFunction.made``) when the trace began."""
    after = snapshot(rfn.fn)
    paths = changed(before, after)
    if not paths:
        return
    what = ", ".join(sorted({_shown(path) for path in paths}))
    where = _statement_line(after.functions or [rfn.fn], paths)

    def made_in_trace(qname):   # (NOTE [two traces, one graph])
        return max([f.made for f, q in table.qnames.items() if q == qname], default=-1) > made

    def body_of(qname):   # (a callee's body, now; rfn's own is compared already)
        fn = next((f for f, q in table.qnames.items() if q == qname), rfn)
        return None if fn is rfn or fn not in table.signatures else table.trace_body(fn)
    # NOTE [state a body changes and reads] in state_reads.py
    read = state_reads.first_read(after.functions or [rfn.fn], after.methods, paths,
                                  {**before.state, **after.state})
    if read is not None or _graphs(traced, made_in_trace, body_of) != _graphs(
            table.trace_body(rfn), made_in_trace, body_of):   # (the callees under its state)
        raise NotImplementedError(
            "%s: gluon_cf.recursive: %r changes Python state (%s) that its value depends on%s; "
            "hybridized, its body is traced into one graph, not run once per call, so the "
            "graph would hold the value of one trace for every call (eagerly it changes per "
            "call). Pass the value as an argument of the recursive call (an array, e.g. a "
            "depth), or compute it from arrays" % (
                where, rfn.name, what, "" if read is None else " (read at %s)" % read))
    line = where.rsplit(":", 1)
    warnings.warn_explicit(
        "gluon_cf.recursive: %r changes Python state (%s) while traced; hybridized, its body "
        "is traced, not run per call, so the change happens once per trace, not once per "
        "call as eagerly (the values do not depend on it)" % (rfn.name, what), UserWarning,
        line[0], int(line[1]) if line[1].isdigit() else 0)

