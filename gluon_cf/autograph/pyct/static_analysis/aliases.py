"""Which variables of a function may hold an array that something else holds too: where an
NDArray's in-place ``x += v`` would be seen (NOTE [autograph augmented assignment]).

NOTE [autograph augmented assignment]
    Plain Python's ``x += v`` on an NDArray writes into the array (``broadcast_add(x, v,
    out=x)``): every other name, list, dict or view holding it sees the new values. Eagerly,
    converted code does exactly that wherever plain MXNet would (:func:`augmented` in
    ``operators/variables.py``); where plain MXNet refuses (autograd recording an array that
    is already in its graph, which it writes and then refuses; a value that broadcasts past
    the target's shape; ``**=`` and ``//=``, which NDArray lacks) it is ``x = x op v``, out
    of place, as a Symbol's would be. A graph cannot write into an array, so hybridized
    ``x op= v`` is out of place, which equals plain Python only when nothing else can see the
    array. Hybridized, ``x op= v`` is therefore accepted only when the array is provably new
    and given to nothing that may keep it, and otherwise an AutographError at its line naming
    what else may hold the array, saying to write ``x = x op v``. Two rule sets decide it:

    From the syntax, per function (here): a variable *may share* its array when it is a
    parameter (the caller holds it), ``global`` or ``nonlocal``, a ``for`` or ``with``
    target (an item or view of the iterable), read by a nested function, lambda or class (a
    closure may return or keep it), or is bound or read where a reference is kept: assigned
    from or to a name, item, attribute, view (``x[...]``, ``x.reshape``, ``x.detach``,
    ``x.as_in_context``, ``x.astype(..., copy=False)``; not ``F.reshape(x, ...)``, an
    operator), the ``out=`` of a call
    (``F.relu(x, out=y)`` is y), a container display or comprehension, also as an operand
    (``outs + [h]``, ``outs += [h]``, ``[h] * 2``), or one of several
    targets (``h = h0 = ...``, ``y = (h := ...)``, ``outs.append(h := ...)``: a walrus's
    target holds the array it passes on), or bound from a frame's dict (``a =
    locals()["h"]``); appended, inserted or otherwise given to a container's method (the
    container then holds it too); yielded. A dict whose items the conversion rebinds
    (NOTE [autograph dict items]) may share them when a value put into it, or read from it
    to be kept, may share. An array's ``shape``, ``ndim``, ``size``, ``dtype``, ``context``
    and ``stype`` are not its array: ``n, c = h.shape`` shares nothing of ``h``.

    From the callee, when the call runs (``operators/call_results.py``): for each variable
    an in-place ``name op= v`` changes, every call that binds it (the value of an assignment
    to it, or an item, view, branch or element of that value: ``h = self.fc(x)``, ``h =
    f(x)[0]``, ``h = f(x) if c else g(x)``) or is given it (an argument, or the object of a
    method: ``y = helper(h)``, ``self.log(h)``) is checked (:func:`checked_calls`); while
    hybridizing (a Symbol among its arguments, or in what it returns, searched a few levels
    into containers and objects: ``h = self.memory().h`` binds an attribute; what an
    iterator it returns yields, as it is unpacked: ``a, b = self.states()``), unless the
    callee is proven to neither return nor keep an array something else holds, eagerly on
    NDArrays as plain Python would run it, the call is an
    AutographError at the ``op=``'s line naming the call's line. Proven are: an operator
    generated for one of MXNet's registered operators (``F.relu``, ``nd.zeros``,
    ``F.contrib.box_nms``, the ``F.random`` samplers, ``nd.array``...) not given an ``out``
    array, by keyword or position; an NDArray method named as a registered operator
    (derived from ``mx.nd.op``: ``x.sin()``, ``x.sum()``, ``x.transpose()``), less
    ``reshape`` (a view) and ``flatten``/``expand_dims``/``squeeze`` with ``inplace=True``
    (views), again without ``out``; ``x.copy()``; ``x.astype(t)`` (copy left true); Python's
    ``sum(items)`` (``0 + a + b``: new unless no items, then the start, a number); one of
    Gluon's built-in layers whose forward ends in an operator of its input (``nn.Dense``,
    the convolutions and poolings, the norms, activations, ``Dropout``, ``Embedding``,
    ``Flatten``: exactly that class, a subclass may override forward), with no forward set
    on the object, no forward hook or pre-hook (a hook may keep the output or input),
    children of the same kind, and, for a (Hybrid)Sequential, at least one child (an empty
    one returns its input).
    Everything else may return or keep an array something else holds: the user's functions
    and blocks (a helper may ``return v`` or a view of it; a block may return its input, a
    parameter's array or an array it keeps), RNN cells (``out, states = self.cell(x,
    states)``: the output is ``states[0]`` too), ``F.contrib.cond`` / ``while_loop`` and
    gluon_cf's own (eagerly they return what a branch returns), ``dict.get``,
    ``x.as_in_context``, ``x.copyto`` and unknown callables. The check is at the call, not
    the ``op=``: a graph's ``cond`` or loop makes new Symbols of what its branches and steps
    bind, so only the call knows its callee; like the syntax rules it holds for the whole
    function (a call binding ``h`` is checked even if ``h`` is rebound before its ``op=``).
    So ``h = self.fc(x); h += b`` and ``out = F.relu(x); out *= 2`` convert; ``y =
    self.proj(x); y += 1`` converts when proj is a non-empty Sequential of built-in layers.
    (Eagerly nothing is refused: the NDArray runs plain Python's in place.)

    An item or attribute (``outs[0] += v``, ``self.total += v``) is always held by its
    container: with plain names and constants for its parts it runs as ``outs[0] =
    augmented(outs[0], v)`` (Python evaluates them once; these read the same), as plain
    Python eagerly and refused hybridized (a Symbol's ``+=`` was MXNet's
    NotImplementedForSymbol, naming no line); other targets stay as written.
"""
import ast
from typing import Dict, Optional

_VIEW_METHODS = {"reshape", "detach", "as_in_context", "as_in_ctx", "as_nd_ndarray",
                 "as_np_ndarray"}
_KEEPING_METHODS = {"append", "extend", "insert", "add", "setdefault", "update", "appendleft",
                    "extendleft", "put", "push", "__setitem__"}
_CONTAINER_BUILDERS = {"dict", "list", "tuple", "set", "frozenset", "zip", "enumerate",
                       "reversed", "sorted", "iter"}
# Names of MXNet's operator modules, by convention (an array so named is still checked at
# its calls: operators/call_results.py)
_OPERATOR_MODULES = {"F", "nd", "mx.nd", "mx.ndarray", "sym", "mx.sym", "mx.symbol"}
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def existing(value) -> Optional[ast.Name]:
    """The variable whose array (or container) ``value`` may be, as written: ``x``, ``x[i]``,
    ``x.attr``, ``x.reshape(...)`` ..., ``a if c else x``; None for a new value (arithmetic,
    a call)."""
    if isinstance(value, ast.Name):
        return value
    if isinstance(value, (ast.Subscript, ast.Attribute, ast.Starred)):
        return existing(value.value) or _root(value.value)
    if _viewing(value):
        return _root(value.func.value)
    if isinstance(value, ast.Call):      # F.relu(x, out=y) is y
        out = next((k.value for k in value.keywords if k.arg == "out"), None)
        return existing(out) if out is not None else None
    if isinstance(value, ast.IfExp):
        return existing(value.body) or existing(value.orelse)
    if isinstance(value, ast.BoolOp):
        return next((n for n in map(existing, value.values) if n is not None), None)
    if isinstance(value, ast.NamedExpr):     # (h := F.relu(x)) is h's array
        return value.target
    return None


def _viewing(value):
    """Whether ``value`` is a call of a method returning a view of its object (or the object
    itself): ``x.reshape(...)``, ``x.detach()``, ``x.astype(t, copy=False)`` ..."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return False
    if ast.unparse(value.func.value) in _OPERATOR_MODULES:
        return False         # F.reshape(x, ...) is MXNet's operator: checked when it runs
    if value.func.attr == "astype":        # a view only with copy=False
        return len(value.args) > 1 or any(k.arg in ("copy", None) for k in value.keywords)
    return value.func.attr in _VIEW_METHODS


def _root(value):
    """The variable whose array ``value`` is a part or view of; what another call returns
    is decided when it runs (``operators/call_results.py``)."""
    while True:
        if isinstance(value, (ast.Subscript, ast.Attribute)):
            value = value.value
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
                _viewing(value):
            value = value.func.value
        else:
            break
    return value if isinstance(value, ast.Name) else existing(value)


def _kept(value):
    """The variables ``value`` hands over to be kept (itself, or in a display)."""
    if _metadata(value):
        return []
    if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        return [n for elt in value.elts for n in _kept(elt)]
    if isinstance(value, ast.BinOp):      # outs + [h], [h] * 2: the displays' items
        return _displayed(value)
    if isinstance(value, ast.NamedExpr):  # y = (h := x): h's array, also x's
        return [value.target] + _kept(value.value)
    if isinstance(value, (ast.Subscript, ast.Starred)):
        return _kept(value.value)        # [a, b][i]: what the base holds
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
            _viewing(value):
        return _kept(value.func.value)
    if isinstance(value, ast.IfExp):
        return _kept(value.body) + _kept(value.orelse)
    if isinstance(value, ast.BoolOp):
        return [n for v in value.values for n in _kept(v)]
    if isinstance(value, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        return _kept(value.elt)          # [h for _ in r]: every item is h's array
    if isinstance(value, ast.DictComp):
        return _kept(value.value)
    if isinstance(value, ast.Dict):
        # (``{**d, ...}`` copies d's items: the values are kept, not d)
        return [n for k, v in zip(value.keys, value.values) if k is not None
                for n in _kept(v)]
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id in _CONTAINER_BUILDERS:     # dict(h=x), list(xs): the items kept
        return [n for v in list(value.args) + [k.value for k in value.keywords]
                for n in _kept(v)]
    found = existing(value)
    return [found] if found is not None else []


# An array's attributes that are never an array (NDArray's; gluon_cf gives a Symbol's shape)
_METADATA = {"shape", "dtype", "ndim", "size", "context", "ctx", "stype"}


def _metadata(value):
    """Whether ``value`` reads a variable's metadata, ``h.shape`` or ``h.shape[0]``: not the
    variable's array when it has one (then its ``op=`` is plain Python's anyway)."""
    while isinstance(value, ast.Subscript):
        value = value.value
    return isinstance(value, ast.Attribute) and value.attr in _METADATA and \
        isinstance(value.value, ast.Name)


_DISPLAYS = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp,
             ast.GeneratorExp)


def _displayed(value):
    """The variables the container displays among the operands of ``value`` hold: ``outs +
    [h]``, ``(h,) * 2``, ``{} | {"h": h}`` make containers holding ``h``'s array (not ``h *
    2``: arithmetic on arrays makes a new one)."""
    if isinstance(value, ast.BinOp):
        return _displayed(value.left) + _displayed(value.right)
    if isinstance(value, ast.IfExp):
        return _displayed(value.body) + _displayed(value.orelse)
    if isinstance(value, ast.BoolOp):
        return [n for v in value.values for n in _displayed(v)]
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id in _CONTAINER_BUILDERS:
        return _kept(value)
    return _kept(value) if isinstance(value, _DISPLAYS) else []


def shared_arrays(func) -> Dict[str, ast.AST]:
    """``{variable: the statement or node where its array may be shared}`` for ``func``'s own
    variables (NOTE [autograph augmented assignment]); nested functions are analysed on their
    own."""
    shared: Dict[str, ast.AST] = {}

    def mark(name, node):
        shared.setdefault(name, node)

    args = func.args
    for arg in args.posonlyargs + args.args + args.kwonlyargs + \
            [a for a in (args.vararg, args.kwarg) if a is not None]:
        mark(arg.arg, func)
    for node in _own_nodes(func):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                mark(name, node)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            for n in ast.walk(node.target):
                if isinstance(n, ast.Name):
                    mark(n.id, node)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            for n in ast.walk(node.optional_vars):
                if isinstance(n, ast.Name):
                    mark(n.id, node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and \
                node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            held = _kept(node.value)
            if len(targets) > 1 or any(map(_reads_frame, _result_calls(node.value))):
                # a = locals()["h"]: what a frame's dict holds is any variable's array
                # h = h0 = F.zeros(...): one array, two names (what calls return is decided
                # when they run: checked_calls)
                held = held + [n for t in targets for n in ast.walk(t)
                               if isinstance(n, ast.Name)]
            for name in held:
                mark(name.id, node)
            for target in targets if held or _metadata(node.value) else ():
                for n in ast.walk(target):    # (d[k] = x: d holds x too)
                    if isinstance(n, ast.Name):
                        mark(n.id, node)
        elif isinstance(node, ast.AugAssign) and _displayed(node.value):
            # outs += [h]: the list holds h's array too
            for name in _displayed(node.value) + [
                    n for n in ast.walk(node.target) if isinstance(n, ast.Name)]:
                mark(name.id, node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in _KEEPING_METHODS:
            held = [n for value in list(node.args) + [k.value for k in node.keywords]
                    for n in _kept(value)]
            receiver = _root(node.func.value)
            for name in held + ([receiver] if held and receiver is not None else []):
                mark(name.id, node)
        elif isinstance(node, (ast.Yield, ast.YieldFrom)) and node.value is not None:
            for name in _kept(node.value):
                mark(name.id, node)
        elif isinstance(node, _NESTED):
            # a closure reading the variable may return or keep its array (or a view)
            for n in ast.walk(node):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    mark(n.id, node)
    return shared


def checked_calls(func):
    """``[(call, name, binds, augmented)]``: in each function nested in ``func`` (itself too),
    the calls that bind (``binds``: the call is the value, or what a view or item of it
    reads, of an assignment to ``name``) or are given (as an argument, or as the object of
    the method) a variable ``name`` that an in-place ``name op= v`` (the first,
    ``augmented``) changes: checked when they run (``operators/call_results.py``; NOTE
    [autograph augmented assignment])."""
    found = []
    for function in ast.walk(func):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        changed: Dict[str, ast.AugAssign] = {}
        for n in sorted((n for n in _own_nodes(function) if isinstance(n, ast.AugAssign) and
                         isinstance(n.target, ast.Name) and isinstance(n.op, _IN_PLACE_OPS)),
                        key=lambda n: (n.lineno, n.col_offset)):
            changed.setdefault(ast.unparse(n.target), n)
        if not changed:
            continue
        seen = set()
        for node in _own_nodes(function):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and \
                    node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [n.id for t in targets for n in ast.walk(t)
                         if isinstance(n, ast.Name) and n.id in changed]
                for call in _result_calls(node.value) if names else ():
                    if _reads_frame(call):
                        continue         # (shared_arrays: it may be any variable's array)
                    seen.add(id(call))
                    found.append((call, names[0], True, changed[names[0]]))
        for call in _own_nodes(function):
            if not isinstance(call, ast.Call) or id(call) in seen or \
                    isinstance(call.func, ast.Name) and call.func.id in _UNCHECKED:
                continue
            given = [n.id for value in list(call.args) + [k.value for k in call.keywords] +
                     ([call.func.value] if isinstance(call.func, ast.Attribute) else [])
                     for n in _kept(value) if n.id in changed]
            if given:
                found.append((call, given[0], False, changed[given[0]]))
    return [entry for entry in found if hasattr(entry[0], "lineno")]


def _reads_frame(call):
    """Whether ``call`` is of a builtin reading its caller's frame (``locals()``,
    ``super()``): it cannot be wrapped in a check, which would be its caller."""
    return isinstance(call.func, ast.Name) and call.func.id in _FRAME_READERS


def _result_calls(value):
    """The calls whose result, or an item or view of it, ``value`` may be."""
    if isinstance(value, ast.Call):
        if isinstance(value.func, ast.Attribute) and _viewing(value):
            return _result_calls(value.func.value)
        return [value]
    if isinstance(value, (ast.Subscript, ast.Attribute, ast.Starred, ast.NamedExpr,
                          ast.Await)):
        return _result_calls(value.value)
    if isinstance(value, ast.IfExp):
        return _result_calls(value.body) + _result_calls(value.orelse)
    if isinstance(value, ast.BoolOp):
        return [c for v in value.values for c in _result_calls(v)]
    if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        return [c for v in value.elts for c in _result_calls(v)]
    if isinstance(value, ast.Dict):
        return [c for v in value.values for c in _result_calls(v)]
    return []


_IN_PLACE_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Mod)
# (builtins that read their caller's frame, and some that never return or keep an array)
_FRAME_READERS = {"super", "locals", "vars", "globals", "eval", "exec", "dir"}
_UNCHECKED = _FRAME_READERS | {"len", "isinstance", "print", "max_iterations"}


def _own_nodes(func):
    """The nodes of ``func``'s body, not those of the functions and classes nested in it."""
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _NESTED):
            stack.extend(ast.iter_child_nodes(node))
