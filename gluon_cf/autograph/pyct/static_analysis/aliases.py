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
    array. Hybridized, ``x op= v`` is therefore accepted only when the array is provably new,
    and otherwise an AutographError at its line naming what else may hold the array, saying
    to write ``x = x op v``. Two rule sets decide it:

    From the syntax, per function (here): a variable *may share* its array when it is a
    parameter (the caller holds it), ``global`` or ``nonlocal``, a ``for`` or ``with``
    target (an item or view of the iterable), or is bound or read where a reference is kept:
    assigned from or to a name, item, attribute, view (``x[...]``, ``x.reshape``,
    ``x.detach``, ``x.as_in_context``, ``x.astype(..., copy=False)``), the ``out=`` of a
    call (``F.relu(x, out=y)`` is y) or a container display, or one of several targets
    (``h = h0 = ...``); appended, inserted or otherwise given to a container's method (the
    container then holds it too); yielded. A dict whose items the conversion rebinds (NOTE
    [autograph dict items]) may share them when a value put into it, or read from it to be
    kept, may share.

    From the callee, when the call runs (``operators/call_results.py``): in a function with
    an in-place ``name op= v``, every call whose result is used is watched
    (:func:`watched_calls`); while hybridizing, what a call returns is marked as possibly
    held elsewhere (and so is an item or slice read from it) unless the callee is proven to
    return new arrays, eagerly on NDArrays as plain Python would run it: an operator
    generated for one of MXNet's registered operators (``F.relu``, ``nd.zeros``,
    ``F.contrib.box_nms``, the ``F.random`` samplers, ``nd.array``...) not given an ``out``
    array, by keyword or position; an NDArray method named as a registered operator
    (derived from ``mx.nd.op``: ``x.sin()``, ``x.sum()``, ``x.transpose()``), less
    ``reshape`` (a view) and ``flatten``/``expand_dims``/``squeeze`` with ``inplace=True``
    (views), again without ``out``; ``x.copy()``; ``x.astype(t)`` (copy left true); one of
    Gluon's built-in layers whose forward ends in an operator of its input (``nn.Dense``,
    the convolutions and poolings, the norms, activations, ``Dropout``, ``Embedding``,
    ``Flatten``: exactly that class, a subclass may override forward), with no forward set
    on the object, no forward hook (a hook may keep the output), children of the same kind,
    and, for a (Hybrid)Sequential, at least one child (an empty one returns its input).
    Everything else may return an array something else holds, and ``op=`` on its result is
    refused: the user's functions and blocks (a helper may ``return v``; a block may return
    its input, a parameter's array or an array it keeps), RNN cells (``out, states =
    self.cell(x, states)``: the output is ``states[0]`` too), ``F.contrib.cond`` /
    ``while_loop`` and gluon_cf's own (eagerly they return what a branch returns),
    ``dict.get``, ``x.as_in_context``, ``x.copyto`` and unknown callables. So ``h =
    self.fc(x); h += b`` and ``out = F.relu(x); out *= 2`` convert; ``y = self.proj(x); y +=
    1`` converts when proj is a non-empty Sequential of built-in layers. (Eagerly nothing is
    refused and nothing is marked: the NDArray runs plain Python's in place.)

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
    if isinstance(value, ast.NamedExpr):
        return existing(value.value)
    return None


def _viewing(value):
    """Whether ``value`` is a call of a method returning a view of its object (or the object
    itself): ``x.reshape(...)``, ``x.detach()``, ``x.astype(t, copy=False)`` ..."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return False
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
    if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        return [n for elt in value.elts for n in _kept(elt)]
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
            if len(targets) > 1:
                # h = h0 = F.zeros(...): one array, two names (what calls return is decided
                # when they run: watched_calls)
                held = held + [n for t in targets for n in ast.walk(t)
                               if isinstance(n, ast.Name)]
            for name in held:
                mark(name.id, node)
            for target in targets if held else ():
                for n in ast.walk(target):    # (d[k] = x: d holds x too)
                    if isinstance(n, ast.Name):
                        mark(n.id, node)
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
    return shared


def watched_calls(func):
    """The calls whose results are checked when they run (:func:`call_results.watched`), in
    the functions nested in ``func`` (itself too) that have an in-place ``name op= v``: all
    their calls but those whose result is dropped, the builtins that read their caller's frame
    (``super()``, ``locals()`` ...) and those that never return an array (NOTE [autograph
    augmented assignment])."""
    found = []
    for function in ast.walk(func):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or not any(
                isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and
                isinstance(n.op, _IN_PLACE_OPS) for n in _own_nodes(function)):
            continue
        dropped = {id(n.value) for n in _own_nodes(function) if isinstance(n, ast.Expr)}
        found += [n for n in _own_nodes(function) if isinstance(n, ast.Call) and
                  id(n) not in dropped and not (isinstance(n.func, ast.Name) and
                                                n.func.id in _UNWATCHED)]
    return found


_IN_PLACE_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Mod)
_UNWATCHED = {"super", "locals", "vars", "globals", "eval", "exec", "dir", "len", "isinstance",
              "print", "max_iterations"}


def _own_nodes(func):
    """The nodes of ``func``'s body, not those of the functions and classes nested in it."""
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _NESTED):
            stack.extend(ast.iter_child_nodes(node))
