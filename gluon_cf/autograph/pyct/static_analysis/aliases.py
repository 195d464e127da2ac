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
    what else may hold the array, saying to write ``x = x op v``. Three rule sets decide it:

    From the syntax (here): the *share events* of a variable, where its array may come to
    be held by something else: it is ``global`` or ``nonlocal``, read by a nested function,
    lambda or class or by a generator expression kept for later (a closure may return or
    keep it, whatever the variable holds when it runs), held by a ``for``'s or a
    comprehension's iterable (``for v in (h,)``: v, and what keeps v, is h's array), or read
    where a reference is kept: assigned to a name, item or attribute (``g = h``, ``d[k] =
    h``), as a view (``h[...]``, ``h.reshape``, ``h.detach``, ``h.as_in_context``,
    ``h.astype(..., copy=False)``; not ``F.reshape(h, ...)``, an operator), the ``out=`` of
    a call (``F.relu(x, out=h)`` is h), in a container display or comprehension, also as an
    operand (``outs + [h]``, ``outs += [h]``, ``[h] * 2``), a walrus's value (``y = (h :=
    ...)``, ``outs.append(h := ...)``); appended, inserted or otherwise given to a
    container's method (the container then holds it too); yielded; in a frame's dict
    (``locals()``, ``vars()``, ``eval``, ``exec``, ``f_locals`` share every variable);
    captured by a ``match`` pattern (an item of the subject). An item of arithmetic on
    containers is an item of its operands (``(outs + rest)[0]``; ``{**d}["a"]`` is d's),
    and unpacking it may bind one array to several names (``h, c = [F.zeros(s)] * 2``:
    both targets shared). And
    its *bindings*, each *new* or not: new is the value of an assignment to it (or of its
    walrus, or ``h **= v``, ``h //= v``, which NDArray lacks and rebind) that is
    arithmetic or a call (then checked when it runs, below) and holds no variable's array;
    not new: a parameter (the caller holds it), a ``for`` or ``with`` target (an item or
    view of the iterable), one of several targets (``h = h0 = ...``), bound where it is
    shared (``y = h``: y; ``a = locals()["h"]``), what a generator's caller sends
    (``h = yield``), a name of ``import``, ``def`` or ``class``. An array's ``shape``,
    ``ndim``, ``size``, ``dtype``, ``context`` and ``stype`` are not its array:
    ``n, c = h.shape`` shares nothing of ``h``. A dict whose items the conversion rebinds
    (NOTE [autograph dict items]) may share them when a value put into it, or read from it to be
    kept, may share anywhere in the function.

    Where they happen (``reaching.py``): for each in-place ``name op= v``, the bindings of
    ``name`` that *reach* it, in a control-flow graph of the function's statements (if and
    else; ``for`` and ``while`` with their back edges, ``else``, ``break``, ``continue``;
    ``return``, ``raise``; ``with``, whose context manager may suppress an exception
    raised anywhere in its body, even halfway through a statement, so what reaches any
    point of the body, shared by that statement, goes on after it), each with the share
    events and the calls given ``name`` on some path from it to the ``op=`` (a
    reaching-definitions analysis to a fixed point). The ``op=`` is refused when a reaching
    binding is not new or a share event lies on such a path, including one before an earlier
    ``op=`` (``h op= v`` rebinds nothing: the array stays the one shared; nor does ``h =
    h.reshape(s)``, ``h = h[0]``, a view or item of its own array and nothing else: the
    bindings reaching it reach on, with what they shared). So the RNN unroll
    ``for row in x: h = self.fc(row); h += b; outs.append(h)`` converts (each step's
    ``+=`` changes the step's new array; its append comes after, and the next step rebinds
    ``h`` first), while ``h = self.fc(r); outs.append(h); h += b``, or ``if c: h =
    self.fc(r)`` before ``h += b; outs.append(h)`` in a loop (the back edge brings the
    appended array) are refused. A variable that is ``global``, ``nonlocal`` or read by a
    closure is shared everywhere; a function with ``try``, ``match`` or ``async`` statements
    is not followed: there every share event, binding and call of the function reaches
    every ``op=``, as before this analysis. (An ``op=`` no path reaches, after a ``return``,
    never runs.)

    From the callee, when the call runs (``operators/call_results.py``): for each in-place
    ``name op= v``, every call of a binding that reaches it (the value of an assignment to
    ``name``, or an item, view, branch or element of that value: ``h = self.fc(x)``, ``h =
    f(x)[0]``, ``h = f(x) if c else g(x)``) and every call given ``name`` on a path from
    one to the ``op=`` (an argument, or the object of a
    method: ``y = helper(h)``, ``self.log(h)``) is checked; while
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
    bind, so only the call knows its callee (a call checked for several ``op=`` is checked
    once, as binding if it binds one, naming the first). A call given the variable only as
    its method's object is not checked when that object is no array (``outs.append(h)``
    for a list ``outs``: a list's ``op=`` is in place, and a variable keeps its type until
    rebound). So ``h = self.fc(x); h += b`` and ``out = F.relu(x); out *= 2`` convert; ``y =
    self.proj(x); y += 1`` converts when proj is a non-empty Sequential of built-in layers.
    (Eagerly nothing is refused: the NDArray runs plain Python's in place.) A refusal is an
    AutographError, a ValueError: the user's ``try: ... except Exception`` or
    ``contextlib.suppress`` may catch it and run on, on another path than plain Python's (the
    call's result not bound, the ``op=`` not done), so the function ``@autograph`` gives
    raises the first refusal made while it ran when it returns (or in place of what the
    handler raised instead).

    An item or attribute (``outs[0] += v``, ``self.total += v``) is always held by its
    container: with plain names and constants for its parts it runs as ``outs[0] =
    augmented(outs[0], v)`` (Python evaluates them once; these read the same), as plain
    Python eagerly and refused hybridized (a Symbol's ``+=`` was MXNet's
    NotImplementedForSymbol, naming no line); other targets stay as written.
"""
import ast
from typing import Dict, List, Optional

from ..nodes import child_nodes, walk

_VIEW_METHODS = {"reshape", "detach", "as_in_context", "as_in_ctx", "as_nd_ndarray",
                 "as_np_ndarray"}
_KEEPING_METHODS = {"append", "extend", "insert", "add", "setdefault", "update", "appendleft",
                    "extendleft", "put", "push", "__setitem__"}
_CONTAINER_BUILDERS = {"dict", "list", "tuple", "set", "frozenset", "zip", "enumerate",
                       "reversed", "sorted", "iter"}
# Names of MXNet's operator modules, by convention (an array so named is still checked at
# its calls: operators/call_results.py)
_OPERATOR_MODULES = {"F", "nd", "mx.nd", "mx.ndarray", "sym", "mx.sym", "mx.symbol"}
NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


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
        # [a, b][i]: what the base holds; (outs + rest)[0], *(pair * 2): what the operands
        # hold (arithmetic on containers keeps their items)
        return _operands(value.value)
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
        # ({**d, ...} holds d's items: what d holds)
        return [n for v in value.values for n in _kept(v)]
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id in _CONTAINER_BUILDERS:     # dict(h=x), list(xs): the items kept
        return [n for v in list(value.args) + [k.value for k in value.keywords]
                for n in _kept(v)]
    found = existing(value)
    return [found] if found is not None else []


def _operands(value):
    """The variables whose arrays (or items) ``value``'s items may be: an item of ``outs +
    rest`` or ``pair * 2`` is an item of ``outs``, ``rest`` or ``pair`` (not known to be lists:
    an array's item, a view of a new array, is refused with them)."""
    if isinstance(value, ast.BinOp):
        return _operands(value.left) + _operands(value.right)
    return _kept(value)


def _repeated(value):
    """Whether unpacking ``value`` may bind one array to several names: items of arithmetic
    on containers (``h, c = [F.zeros(s)] * 2``: one array, twice)."""
    if isinstance(value, ast.IfExp):
        return _repeated(value.body) or _repeated(value.orelse)
    if isinstance(value, ast.BoolOp):
        return any(map(_repeated, value.values))
    if isinstance(value, (ast.Subscript, ast.Starred, ast.NamedExpr)):
        return _repeated(value.value)
    return isinstance(value, ast.BinOp)


def _received(value):
    """Whether ``value`` may be (an item or view of) what a generator's caller sent (``h =
    yield``): the caller holds it."""
    return any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)) for n in walk(value))


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
    variables, anywhere in it (NOTE [autograph augmented assignment]; ``reaching.py`` says
    where, for a variable's ``op=``); nested functions are analysed on their own."""
    shared: Dict[str, ast.AST] = {}
    args = func.args
    for arg in args.posonlyargs + args.args + args.kwonlyargs + \
            [a for a in (args.vararg, args.kwarg) if a is not None]:
        shared.setdefault(arg.arg, func)
    for node in own_nodes(func):
        for name in node_shares(node):
            # (for v in (h,): h's array is what the loop's iterable holds)
            iterated = isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and \
                name not in [n.id for n in walk(node.target) if isinstance(n, ast.Name)]
            shared.setdefault(name, node.iter if iterated else node)
    frames = frame_reads(func)
    for node in frames:
        # (marked on the code as written, for not_a_graph: the conversion rewrites the call)
        setattr(node, "ag_reads_frame", True)
    frame = frames[0] if frames else None
    if frame is not None:
        # NOTE [a frame's dict shares every variable]
        #     ``keep = locals()["outputs"]`` (or vars(), eval, exec, f_locals) binds ``keep``
        #     to any variable's array, with no name of it in the syntax: every variable is
        #     shared there (an item write after it was the graph's new array while
        #     ``keep`` saw plain Python's write). Likewise every variable is read there
        #     (``liveness.live_after``: ``return h + eval("g")`` after a loop assigning g).
        #     An alias reads it as well (``L = locals`` ... ``L()["outputs"]``), and so do
        #     eval and exec given None for a dict (the frame's), any frame object
        #     (``getattr(sys._getframe(), "f_locals")``) and a nested function's caller's
        #     frame (``sys._getframe(1)``): ``frame_reads``. A helper defined elsewhere
        #     reading its caller's frame is not seen here: its f_locals of a converted
        #     function's frame is refused when it runs (``tensor_access.attribute``).
        for node in walk(func):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                shared.setdefault(node.id, frame)
    return shared


_VARIABLE_READERS = ("locals", "vars", "eval", "exec")
# (a frame object's: f_locals is its dict, f_back a caller's frame)
_FRAME_GETTERS = ("_getframe", "currentframe", "f_locals", "f_back")


def _reader(node):
    """The builtin of ``_VARIABLE_READERS`` that ``node`` (read) names (``locals``,
    ``builtins.locals``), else None."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        name = node.id
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
            node.value.id in ("builtins", "__builtins__"):
        name = node.attr
    else:
        return None
    return name if name in _VARIABLE_READERS else None


def _frame_getter(node):
    """Whether ``node`` names what gives a frame object or its dict (``sys._getframe``,
    ``inspect.currentframe``, ``.f_locals``, ``.f_back``)."""
    return isinstance(node, ast.Attribute) and node.attr in _FRAME_GETTERS or \
        isinstance(node, ast.Name) and node.id in _FRAME_GETTERS


def reads_its_frame(node, aliases=()):
    """Whether ``node`` reads its frame's variables (``locals()``, ``vars()``, ``eval``,
    ``exec``, ``builtins.locals()``, a frame object: ``sys._getframe()``, ``.f_locals``; a
    call of one of ``aliases``, names bound to one of them)."""
    if isinstance(node, ast.Call):
        # (vars(obj) reads obj; eval(s, globals) reads no local, eval(s, None) the frame's:
        # None is the frame's globals and locals)
        name = _reader(node.func)
        return isinstance(node.func, ast.Name) and node.func.id in aliases or \
            name in ("locals", "vars") and not node.args or \
            name in ("eval", "exec") and not node.keywords and (
                len(node.args) < 2 or any(isinstance(a, ast.Constant) and a.value is None
                                          for a in node.args[1:3]))
    return _frame_getter(node)


def frame_reads(func):
    """The nodes of ``func``'s own body that read its frame's variables: those of
    :func:`reads_its_frame`, calls of a name bound to ``locals``, ``vars``, ``eval`` or
    ``exec`` (``L = locals`` ... ``L()["g"]``), any other use of those as a value (given
    to a call, it may be called with the frame's dict), and a frame object got in a nested
    function (``sys._getframe(1).f_locals``, its caller's: NOTE [a frame's dict shares every
    variable])."""
    nodes = list(own_nodes(func))
    aliases = {target.id for node in nodes if isinstance(node, ast.Assign) and
               _reader(node.value) for target in node.targets if isinstance(target, ast.Name)}
    called = {id(node.func) for node in nodes if isinstance(node, ast.Call)}
    own = {id(node) for node in nodes}
    return [node for node in nodes if reads_its_frame(node, aliases) or (
        _reader(node) and id(node) not in called)] + \
        [node for node in walk(func) if id(node) not in own and _frame_getter(node)]


# Builtins given an array keep nothing of it and return no view of it
_KEEPS_NOTHING = {"len", "print", "isinstance", "repr", "str", "id", "type", "hash", "bool",
                  "hasattr", "callable"}


def _operator_call(call):
    """Whether ``call`` is of one of MXNet's operators (``F.relu(...)``, ``mx.nd.zeros``):
    its result is a new array, and it keeps none of its arguments."""
    func = ast.unparse(call.func)
    return any(func.startswith(m + ".") for m in _OPERATOR_MODULES) or \
        func in _KEEPS_NOTHING and isinstance(call.func, ast.Name) or \
        isinstance(call.func, ast.Attribute) and call.func.attr == "copy" and not call.args


def given_to_calls(func) -> Dict[str, List[ast.stmt]]:
    """``{variable: the statements of func}`` that bind it to what a call other than
    an operator's returns (``outputs = helper(x)``: it may return ``x``) or gives it to one
    (``keep = helper(outputs)``, ``self.log(outputs)``: it may keep or return it): for an
    item assignment, which no call is checked for when it runs (NOTE [autograph item
    assignment]); on the code as written."""
    found: Dict[str, List[ast.stmt]] = {}
    for node in own_nodes(func):
        if not isinstance(node, ast.stmt):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        value = getattr(node, "value", None)
        if isinstance(value, ast.Call) and not _operator_call(value):
            for target in targets:
                if not isinstance(target, ast.Subscript):
                    for n in walk(target):
                        if isinstance(n, ast.Name):
                            found.setdefault(n.id, []).append(node)
        for call in _own_calls(node):
            if not _operator_call(call):
                for part in list(call.args) + [k.value for k in call.keywords]:
                    for n in walk(part):
                        if isinstance(n, ast.Name):
                            found.setdefault(n.id, []).append(node)
    return found


def _own_calls(statement):
    """The calls of ``statement`` itself (not of the statements in its blocks)."""
    stack = [c for field, c in ast.iter_fields(statement)
             if field not in ("body", "orelse", "finalbody", "handlers", "cases")]
    while stack:
        part = stack.pop()
        if isinstance(part, list):
            stack.extend(part)
            continue
        if not isinstance(part, ast.AST) or isinstance(part, (ast.stmt,) + NESTED):
            continue
        if isinstance(part, ast.Call):
            yield part
        stack.extend(child_nodes(part))


def _holder(target):
    """What holds the value assigned to ``target``: ``x[i] = v`` of a variable's array is
    out of place on a Symbol, a copy into it on an NDArray (NOTE [autograph item
    assignment]), so ``x`` holds no array of ``v``'s: its index alone; else the target."""
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
        return target.slice
    return target


def node_shares(node) -> List[str]:
    """The variables whose array may be shared at ``node`` (this node, not its children):
    kept by a name, item, attribute, view, container or closure, or bound where one is
    (NOTE [autograph augmented assignment])."""
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        # (for v in (h,): v is h's array, and so is what keeps v)
        return [n.id for n in walk(node.target) if isinstance(n, ast.Name)] + \
            [n.id for n in _kept(node.iter)]
    if isinstance(node, ast.withitem):
        return [n.id for n in walk(node.optional_vars) if isinstance(n, ast.Name)] \
            if node.optional_vars is not None else []
    if isinstance(node, ast.Match):         # (case [v]: v is an item of the subject)
        return [n.id for n in _kept(node.subject)]
    if isinstance(node, (ast.MatchAs, ast.MatchStar, ast.MatchMapping)):
        # a name a pattern captures is the subject, an item of it or a part (**rest)
        name = node.rest if isinstance(node, ast.MatchMapping) else node.name
        return [name] if name else []
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
        if node.value is None:
            return []
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        held = [n.id for n in _kept(node.value)]
        unpacked = any(isinstance(t, (ast.Tuple, ast.List)) for t in targets)
        if len(targets) > 1 or any(map(reads_frame, result_calls(node.value))) or \
                unpacked and _repeated(node.value) or _received(node.value):
            # a = locals()["h"]: what a frame's dict holds is any variable's array
            # h, c = [F.zeros(s)] * 2: one array, two names; h = yield: the sender's
            # h = h0 = F.zeros(...): one array, two names (what calls return is decided
            # when they run: checked_calls)
            held = held + [n.id for t in targets for n in walk(t)
                           if isinstance(n, ast.Name)]
        if held or _metadata(node.value):
            held = held + [n.id for t in targets for n in walk(_holder(t))   # (d[k] = x:
                           if isinstance(n, ast.Name)]                  # d holds x too)
        return held
    if isinstance(node, ast.AugAssign):
        # outs += [h]: the list holds h's array too
        displayed = _displayed(node.value)
        return [n.id for n in displayed] + [n.id for n in walk(node.target)
                                            if isinstance(n, ast.Name)] if displayed else []
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in _KEEPING_METHODS:
        held_names = [n for value in list(node.args) + [k.value for k in node.keywords]
                      for n in _kept(value)]
        receiver = _root(node.func.value)
        return [n.id for n in held_names +
                ([receiver] if held_names and receiver is not None else [])]
    if isinstance(node, (ast.Yield, ast.YieldFrom)) and node.value is not None:
        return [n.id for n in _kept(node.value)]
    if isinstance(node, NESTED):
        # a closure reading the variable may return or keep its array (or a view)
        return [n.id for n in walk(node)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    return []


def own_view(statement) -> Optional[List[ast.Call]]:
    """When ``statement`` rebinds a variable to its own array, an item, view or attribute of
    it and nothing else (``h = h.reshape(s)``, ``h = h[0]``: no other holder; the array stays
    the one the variable's bindings made, ``reaching.py`` lets them reach on): the calls
    making the views (given the variable, and keeping none of it); None otherwise."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        target = statement.target
    else:
        return None
    if not isinstance(target, ast.Name) or result_calls(statement.value) or \
            _metadata(statement.value) or \
            {n.id for n in _kept(statement.value)} != {target.id}:
        return None
    views, value = [], statement.value
    while True:
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            views.append(value)               # (result_calls: only views here)
            value = value.func.value
        elif isinstance(value, (ast.Subscript, ast.Attribute)):
            value = value.value
        else:
            return views


def given_names(call) -> List[str]:
    """The variables whose arrays ``call`` is given (an argument, or the object of the
    method), for the check when it runs (``operators/call_results.py``)."""
    if isinstance(call.func, ast.Name) and call.func.id in _UNCHECKED:
        return []
    return [n.id for value in list(call.args) + [k.value for k in call.keywords] +
            ([call.func.value] if isinstance(call.func, ast.Attribute) else [])
            for n in _kept(value)]


def given_as_receiver(call, name) -> bool:
    """Whether ``call`` is given the variable ``name`` only as its method's object
    (``outs.append(h)`` for ``outs``)."""
    return isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) \
        and call.func.value.id == name and name not in [
            n.id for value in list(call.args) + [k.value for k in call.keywords]
            for n in _kept(value)]


def checked_calls(function):
    """``[(call, name, binds, augmented)]``, anywhere in ``function`` (not in the functions
    nested in it): the calls that bind (``binds``: the call is the value, or what a view or
    item of it reads, of an assignment to ``name``) or are given (as an argument, or as the
    object of the method) a variable ``name`` that an in-place ``name op= v`` (the first,
    ``augmented``) changes: checked when they run (``operators/call_results.py``; NOTE
    [autograph augmented assignment]). ``reaching.py`` says which, for a function it can
    follow."""
    changed: Dict[str, ast.AugAssign] = {}
    for n in sorted((n for n in own_nodes(function) if isinstance(n, ast.AugAssign) and
                     isinstance(n.target, ast.Name) and isinstance(n.op, IN_PLACE_OPS)),
                    key=lambda n: (n.lineno, n.col_offset)):
        changed.setdefault(ast.unparse(n.target), n)
    found: list = []
    if not changed:
        return found
    seen = set()
    for node in own_nodes(function):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and \
                node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [n.id for t in targets for n in walk(t)
                     if isinstance(n, ast.Name) and n.id in changed]
            for call in result_calls(node.value) if names else ():
                if reads_frame(call):
                    continue         # (shared_arrays: it may be any variable's array)
                seen.add(id(call))
                found.append((call, names[0], True, changed[names[0]]))
    for call in own_nodes(function):
        if not isinstance(call, ast.Call) or id(call) in seen:
            continue
        given = [name for name in given_names(call) if name in changed]
        if given:
            found.append((call, given[0], False, changed[given[0]]))
    return [entry for entry in found if hasattr(entry[0], "lineno")]


def reads_frame(call):
    """Whether ``call`` is of a builtin reading its caller's frame (``locals()``,
    ``super()``): it cannot be wrapped in a check, which would be its caller."""
    return isinstance(call.func, ast.Name) and call.func.id in _FRAME_READERS


def result_calls(value):
    """The calls whose result, or an item or view of it, ``value`` may be."""
    if isinstance(value, ast.Call):
        if isinstance(value.func, ast.Attribute) and _viewing(value):
            return result_calls(value.func.value)
        return [value]
    if isinstance(value, (ast.Subscript, ast.Attribute, ast.Starred, ast.NamedExpr,
                          ast.Await)):
        return result_calls(value.value)
    if isinstance(value, ast.IfExp):
        return result_calls(value.body) + result_calls(value.orelse)
    if isinstance(value, ast.BoolOp):
        return [c for v in value.values for c in result_calls(v)]
    if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        return [c for v in value.elts for c in result_calls(v)]
    if isinstance(value, ast.Dict):
        return [c for v in value.values for c in result_calls(v)]
    return []


IN_PLACE_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Mod)
# (builtins that read their caller's frame, and some that never return or keep an array)
_FRAME_READERS = {"super", "locals", "vars", "globals", "eval", "exec", "dir"}
_UNCHECKED = _FRAME_READERS | {"len", "isinstance", "print", "max_iterations"}


def own_nodes(func):
    """The nodes of ``func``'s body, not those of the functions and classes nested in it."""
    stack = list(child_nodes(func))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, NESTED):
            stack.extend(child_nodes(node))
