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
    array. That is decided here from the syntax, conservatively, per function: a variable
    *may share* its array when it is a parameter (the caller holds it), ``global`` or
    ``nonlocal``, a ``for`` or ``with`` target (an item or view of the iterable), or is
    bound or read where a reference is kept: assigned from or to a name, item, attribute,
    view (``x[...]``, ``x.reshape``, ``x.detach``, ``x.as_in_context``, ``x.astype(...,
    copy=False)``) or container display, or one of several targets (``h = h0 = ...``);
    appended, inserted or otherwise given to a container's method (the container then holds
    it too); yielded; bound from a call of a function or block (``y = self.proj(x)``: an
    empty HybridSequential returns its input, a helper may ``return v``; ``out, states =
    self.cell(x, states)``: an RNN cell returns its output again in its states). Operators
    (``F.tanh(x)``, ``nd.zeros(...)``) and an array's computing methods (``x.sum()``,
    ``x.copy()``) are not: they return new arrays. A dict whose items the conversion rebinds (NOTE [autograph
    dict items]) may share them when a value put into it, or read from it to be kept, may
    share. Hybridized, ``x op= v`` on such a variable is an AutographError at its line
    naming what else may hold the array, saying to write ``x = x op v``. An item or
    attribute (``outs[0] += v``, ``self.total += v``) is always held by its container: with
    plain names and constants for its parts it runs as ``outs[0] = augmented(outs[0], v)``
    (Python evaluates them once; these read the same), as plain Python eagerly and refused
    hybridized (a Symbol's ``+=`` was MXNet's NotImplementedForSymbol, naming no line);
    other targets stay as written.
"""
import ast
from typing import Dict, Optional

_VIEW_METHODS = {"reshape", "detach", "as_in_context", "as_in_ctx", "astype", "as_nd_ndarray",
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
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
            value.func.attr in _VIEW_METHODS:
        return _root(value.func.value)
    if isinstance(value, ast.IfExp):
        return existing(value.body) or existing(value.orelse)
    if isinstance(value, ast.BoolOp):
        return next((n for n in map(existing, value.values) if n is not None), None)
    if isinstance(value, ast.NamedExpr):
        return existing(value.value)
    return None


def _root(value):
    while isinstance(value, (ast.Subscript, ast.Attribute, ast.Call)):
        value = value.func if isinstance(value, ast.Call) else value.value
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
            if len(targets) > 1 or _may_return_a_held_array(node.value):
                # h = h0 = F.zeros(...): one array, two names; out, states = self.cell(x,
                # states): a function's results may be one array (an RNN cell returns its
                # output again in its states)
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


def _may_return_a_held_array(value):
    """Whether the call ``value`` may return an array something else holds: a function's or
    block's result may be its argument (an empty HybridSequential returns its input; a helper
    ``return v``) or one array twice (an RNN cell returns its output again in its states).
    Not an operator of ``F``, ``nd``, ``mx.nd`` ... nor an array's method that computes
    (``x.sum()``, ``x.copy()``), nor Python's builtins of numbers: they return new values."""
    if not isinstance(value, ast.Call):
        return False
    if isinstance(value.func, ast.Name):
        return value.func.id not in _NEW_VALUE_BUILTINS
    if isinstance(value.func, ast.Attribute):
        owner = ast.unparse(value.func.value)
        return owner not in _OPERATOR_MODULES and (
            owner == "self" or owner.startswith("self.") or
            value.func.attr not in _COMPUTING_METHODS)
    return True


_OPERATOR_MODULES = {"F", "nd", "mx.nd", "mx.sym", "sym", "mx.ndarray", "mx.symbol", "np",
                     "numpy", "math", "gluon_cf", "__ag__"}
_NEW_VALUE_BUILTINS = {"len", "int", "float", "bool", "round", "abs", "range", "str", "repr",
                       "isinstance", "hasattr", "min", "max", "sum", "divmod", "pow"}
_COMPUTING_METHODS = {"copy", "sum", "mean", "max", "min", "prod", "exp", "log", "sqrt",
                      "square", "tanh", "sigmoid", "relu", "softmax", "log_softmax", "abs",
                      "clip", "transpose", "flatten", "dot", "norm", "sign", "round", "floor",
                      "ceil", "zeros_like", "ones_like", "slice_axis", "take", "pick",
                      "broadcast_to", "broadcast_like", "tile", "repeat", "split", "swapaxes",
                      "expand_dims", "squeeze", "argmax", "argmin", "topk", "sort", "one_hot",
                      "asnumpy", "asscalar", "tolist", "item"}


def _own_nodes(func):
    """The nodes of ``func``'s body, not those of the functions and classes nested in it."""
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _NESTED):
            stack.extend(ast.iter_child_nodes(node))
