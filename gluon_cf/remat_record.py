"""The pieces rematerialisation records with: one autograd node with its own backward
(:func:`record_node`), fresh output arrays, and the arrays an eager body reads from its closure
(NOTE [rematerialisation] in ``remat.py``).

NOTE [integers computed from values needing a gradient]
    MXNet 1.9.1 records ``Cast`` to an integer type like any operator and its backward casts
    the head gradient (to that integer type: truncated), so with ``remat=False`` a gradient
    passes ``h -> (h * 3).astype('int32') -> .astype('float32') -> loss``. Remat carries
    gradients only through float arrays (an integer argument, state or output is not an input
    or head of its node, and a leaf of an integer type cannot be marked usefully), so such a
    value was silently given no gradient (a recursive call's argument: 135 against 0; an int
    loop state: -23 against -56), or MXNet failed with "Cannot differentiate node". Refused
    instead, naming the op and the user's line: an eager remat call's argument of a non-float
    type recorded from a marked array (:func:`live_integer`; the outermost call's at its
    forward, a nested call's when its parent's body is recomputed, where the argument is
    recorded), and an eager remat loop's step output or state of a non-float type recorded
    from a marked array (its step 0 at the forward, any step when recomputed). Integers
    computed from integers, and integer arrays not recorded, are fine."""
import ctypes
import functools
import itertools
import json
import threading
import types
from typing import List, Optional, Tuple, Union

import mxnet as mx
import numpy as np
from mxnet import autograd
from mxnet.base import MXCallbackList, NDArrayHandle, _LIB, c_array, c_handle_array, check_call

from . import failed_calls, node as _node, registry
from ._custom_ops import engine_calls_us, keep_to_the_end
from ._interrupts import defer_interrupts_in
from ._graph_json import reached_ids
from .errors import _CREATED_AT, spec_key
from .graph.index_gradients import _NO_GRADIENT_INPUTS, _STOPS
from .operators import INDEX_INPUTS

# ---------------------------------------------------------------------------------------------
# One autograd node with its own backward


_BACKWARD = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int,
                             ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int),
                             ctypes.c_int, ctypes.c_void_p)
_DELETE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_alive: dict = {}   # the callbacks of recorded nodes: NOTE [Custom operators alive at exit]
keep_to_the_end(_alive)
_keys = itertools.count()


class _Unread:
    """What a remat backward gives for an input of its node that nothing it recomputed read
    (NOTE [parameters no step reads])."""

    def __repr__(self):
        return "UNREAD"


UNREAD = _Unread()

# NOTE [parameters no step reads]
#     Plain eager MXNet leaves the gradient of a marked array no recorded operator between it
#     and the heads reads as it was, and its "fresh" flag too (``Trainer.step`` then warns,
#     or skips it with ``ignore_stale_grad=True``). A remat node lists as inputs every array
#     its body may read from its closure (``closure_arrays``: all of a block's parameters),
#     and MXNet's backward marks every input variable fresh before it runs and hands each
#     node a buffer for each input: a parameter no step (no call) read was written 0 and
#     marked fresh, unlike the same code without remat. So a remat backward gives
#     :data:`UNREAD` for such an input, and where the buffer MXNet hands is the array's own
#     gradient buffer (the node is its only reader in the graph: MXNet sums several readers'
#     buffers into it), :func:`record_node` leaves it unwritten and puts back the fresh flag
#     the array had when the node was recorded; elsewhere it writes 0 (another reader writes
#     the array's gradient, which is then fresh anyway). Eager remat recursive calls read
#     their closure through variables of their own and leave the parameters' gradients to
#     the backward pass around them (NOTE [closure gradients per backward pass] in
#     ``remat_gates.py``): a batch of several outermost calls is one reader. Hybridized,
#     every parameter of the block's graph is written and fresh whatever reads it (MXNet's
#     CachedOp), so gluon_cf writes 0 there (README, Recursion: "Parameters a step does not
#     reach").


def _data_pointer(array):
    pointer = ctypes.c_void_p()
    check_call(_LIB.MXNDArrayGetData(array.handle, ctypes.byref(pointer)))
    return pointer.value


def record_node(inputs, outputs, backward):
    """Record ``outputs = f(inputs)`` as one autograd node whose gradient is
    ``backward(out_grads)``: a list with one NDArray, None (zero) or :data:`UNREAD` (an input
    nothing read: NOTE [parameters no step reads]) per input.

    MXNet's ``autograd.Function`` does this too, but its callback stops at the first input that
    needs no gradient (later inputs get none) and ignores ``grad_req='add'``; and its errors
    are printed rather than raised. Here an error reaches the user as its own exception
    (NOTE [error messages] in ``node.py``). ``outputs`` must not be recorded already."""
    key = next(_keys)
    inputs = list(inputs)
    # (an input's fresh flag when recorded: put back where nothing read it)
    was_fresh = [x._fresh_grad if x.grad is not None else None for x in inputs]

    def backward_entry(num_ograds, num_igrads, ptrs, reqs, is_train, _):
        _callback.depth = getattr(_callback, "depth", 0) + 1
        written = []
        try:
            out_grads = [mx.nd.NDArray(ctypes.cast(ptrs[i], NDArrayHandle), writable=False)
                         for i in range(num_ograds)]
            in_grads = [mx.nd.NDArray(ctypes.cast(ptrs[num_ograds + i], NDArrayHandle),
                                      writable=True) for i in range(num_igrads)]
            written = [g for i, g in enumerate(in_grads) if reqs[i] != 0]
            with autograd.pause(train_mode=bool(is_train)):
                grads = backward(out_grads)
                for k, (dst, grad, req) in enumerate(
                        zip(in_grads, grads, [reqs[i] for i in range(num_igrads)])):
                    if req == 0:          # null
                        continue
                    if grad is UNREAD:
                        x = inputs[k]
                        if x.grad is not None and \
                                _data_pointer(dst) == _data_pointer(x.grad):
                            x._fresh_grad = was_fresh[k]
                            continue
                        grad = None
                    if grad is None:
                        if req != 3:
                            dst[:] = 0
                    elif req == 3:        # add
                        dst[:] += grad
                    else:                 # write, inplace
                        dst[:] = grad
        except Exception as exc:  # noqa: BLE001 - reported through node.py (NOTE there)
            if failed_calls.carry(exc, written):   # NOTE [failures carried by the outputs]
                return True
            _node._remember("backward", exc, None)
            return False
        finally:
            _callback.depth -= 1
        return True

    def delete_entry(_, forget=_alive.pop):   # (no module global: it may run at exit)
        forget(key, None)
        return True

    callbacks = [ctypes.cast(_BACKWARD(backward_entry), ctypes.CFUNCTYPE(ctypes.c_int)),
                 ctypes.cast(_DELETE(delete_entry), ctypes.CFUNCTYPE(ctypes.c_int))]
    context = MXCallbackList(ctypes.c_int(len(callbacks)),
                             ctypes.cast(c_array(ctypes.CFUNCTYPE(ctypes.c_int), callbacks),
                                         ctypes.POINTER(ctypes.CFUNCTYPE(ctypes.c_int))),
                             ctypes.cast(c_array(ctypes.c_void_p, [None] * len(callbacks)),
                                         ctypes.POINTER(ctypes.c_void_p)))
    _alive[key] = (context, callbacks, backward_entry, delete_entry)
    engine_calls_us()   # NOTE [exit with work pending]
    check_call(_LIB.MXCustomFunctionRecord(
        ctypes.c_int(len(inputs)), c_handle_array(inputs), ctypes.c_int(len(outputs)),
        c_handle_array(outputs), ctypes.byref(context)))


# its callbacks: NOTE [no KeyboardInterrupt inside MXNet's callbacks] in _interrupts.py
defer_interrupts_in(record_node)


def _leaf_name(array):
    """The name autograd gave a marked array (``attach_grad``): ``var<N>``."""
    return autograd.get_symbol(array).list_inputs()[0]


def recorded_graph(*arrays):
    """The recorded graph of ``arrays`` as ``json.loads(Group(...).tojson())`` gives it: nodes
    (``op``, ``name``, ``inputs``) inputs first, and ``heads``; read from ``debug_str``
    (NOTE [tojson keeps custom nodes alive])."""
    symbol = autograd.get_symbol(arrays[0]) if len(arrays) == 1 else \
        mx.sym.Group([autograd.get_symbol(a) for a in arrays])
    nodes: List[dict] = []
    index: dict = {}
    outputs: List[tuple] = []
    inputs: Optional[list] = None
    for line in symbol.debug_str().splitlines():
        if line.startswith("Variable:"):
            index[line[9:]] = len(nodes)
            nodes.append({"op": "null", "name": line[9:], "inputs": []})
            inputs = None
        elif line.startswith("Op:"):
            op, _, name = line[3:].partition(", Name=")
            index[name] = len(nodes)
            inputs = []
            nodes.append({"op": op, "name": name, "inputs": inputs})
        elif line.startswith("\toutput["):
            outputs.append(_entry_of(line))
        elif line.startswith("\targ[") and inputs is not None:
            name, k = _entry_of(line)
            inputs.append([index[name], k, 0])
        elif not line.startswith("\t"):   # (Attrs:, Control deps:, a separator)
            inputs = None if line != "Inputs:" else inputs
    return {"nodes": nodes, "heads": [[index[name], k, 0] for name, k in outputs]}


def _entry_of(line):
    """``\targ[0]=node_3(1) version=0`` -> ("node_3", 1)."""
    name, _, k = line.split("=", 1)[1].split(" ")[0].rpartition("(")
    return name, int(k[:-1])


# NOTE [tojson keeps custom nodes alive]
#     In MXNet 1.9.1, ``tojson()`` of a symbol holding a recorded ``_CustomFunction`` node
#     (:func:`record_node`'s) keeps that node alive for good: its delete callback never runs,
#     and its backward, holding a remat call (its saved results, its arguments), with it.
#     Eager remat recursion read its recorded graphs so on every call: every training step
#     kept all its calls (a 6-deep recursion of 256 x 512 arrays: 4 MB a step). gluon_cf reads
#     recorded graphs from ``debug_str`` instead (:func:`recorded_graph`), which keeps nothing.


_callback = threading.local()   # .depth: record_node backwards running in this thread


def in_node_backward():
    """Whether record_node's backward runs in this thread (a pass it starts reaches none of
    record_node's nodes: its recomputed graph reads the nodes below as leaves)."""
    return bool(getattr(_callback, "depth", 0))


def on_mxnet_thread():
    """Whether this is one of MXNet's threads (a Custom operator's or record_node's backward
    runs there: waiting there for the engine would wait for itself)."""
    return bool(getattr(_callback, "depth", 0)) or \
        isinstance(threading.current_thread(), threading._DummyThread)


# (before(heads: a callable giving the pass's heads), after(what before returned, failed))
# around each backward pass not on MXNet's threads (NOTE [closure gradients per backward pass]
# in remat_gates.py)
pass_hooks: list = []


def _synchronised(backward, heads_of):
    """``backward`` (MXNet's ``NDArray.backward``, ``autograd.backward``) waiting for the
    backward it pushed where record_node's nodes may be in it (NOTE [a remat backward reads
    what it recomputes from]), with :data:`pass_hooks` around it (``before`` is given the
    pass's heads, ``heads_of(args, kwargs)``)."""
    @functools.wraps(backward)
    def run(*args, **kwargs):
        if on_mxnet_thread():
            return pass_on_mxnet_thread(lambda: backward(*args, **kwargs),
                                        lambda: heads_of(args, kwargs))
        states: list = []
        failed = True
        try:   # (hooks that started are ended however the pass ends: they hold locks)
            for before, _ in pass_hooks:
                states.append(before(lambda: heads_of(args, kwargs)))
            try:
                result = backward(*args, **kwargs)
            except mx.MXNetError as err:
                ours = second_order_error(err, heads_of(args, kwargs))
                if ours is None:
                    raise
                raise ours from None
            if _alive:
                mx.nd.waitall()
            failed = False
        finally:
            for (_, after), state in zip(pass_hooks, states):
                after(state, failed)
        return result
    return run


class SecondOrderGradientError(NotImplementedError, mx.MXNetError):
    """A backward through the recorded backward of a gluon_cf node (a second-order gradient);
    an MXNetError too, as the error it replaces."""


def second_order_error(err, heads):
    """Ours for MXNet's "Operator _backward_Custom is non-differentiable" when the backward of
    a gluon_cf node was recorded (``autograd.grad(..., create_graph=True)``) and a backward
    through it asked: the op, its node, the line that made it; None for other errors."""
    custom = "_backward_Custom is non-differentiable" in str(err)
    # (the gradients of the MKLDNN copies around a node, which MXNet meets first: NOTE [MKLDNN
    # values read by a node] in _cachedop.py)
    if not custom and not any("_backward_%s is non-differentiable" % op in str(err)
                              for op in ("reshape", "squeeze", "cast")):
        return None
    found = []
    for head in heads:
        try:
            nodes = json.loads(autograd.get_symbol(head).tojson())["nodes"]
        except mx.MXNetError:   # (a head not recorded)
            continue
        backward = {src for n in nodes if n["op"] == "_backward_Custom"
                    for src, *_ in n["inputs"]}
        for k, node in enumerate(nodes):
            kind = registry.kind_of_op_type(node.get("attrs", {}).get("op_type", ""))
            if node["op"] == "Custom" and kind is not None and (custom or k in backward):
                spec = node["attrs"].get("spec", "{}")
                where = _CREATED_AT.get(spec_key(spec))
                found.append("gluon_cf.%s (node %r)%s" % (
                    kind, json.loads(spec).get("node", "?"), " at %s" % where if where else ""))
    if not found:
        return None
    return SecondOrderGradientError(
        "%s: a second-order gradient through it is not supported: autograd.grad(..., "
        "create_graph=True) recorded its backward (MXNet's _backward_Custom), and a backward "
        "through that backward was asked, which MXNet 1.9.1 cannot differentiate (a Custom "
        "operator's backward has no gradient of its own). Take first-order gradients only "
        "through gluon_cf's ops (create_graph=False), or compute the second-order term "
        "outside them" % "; ".join(sorted(set(found))))


unsynchronised_backward = autograd.backward

# (run, heads) -> the result of the pass ``run()`` started on MXNet's threads, whose heads are
# ``heads()``: NOTE [a backward inside a Custom operator's backward] in remat_gates.py
nested_passes: list = []


def pass_on_mxnet_thread(run, heads):
    """A backward pass (``run()``) started on one of MXNet's threads: as it is inside
    record_node's backward (its recomputed graph holds none of record_node's nodes), else as
    :data:`nested_passes` runs it."""
    if in_node_backward() or not nested_passes:
        return run()
    return nested_passes[0](run, heads)


def in_own_thread(run):
    """``run()`` in a new thread, waited for; its exception raised here."""
    out: list = []

    def target():
        try:
            out.append((True, run()))
        except BaseException as err:   # noqa: BLE001 - raised again in the caller's thread
            out.append((False, err))
    thread = threading.Thread(target=target, name="gluon_cf pass off MXNet's thread",
                              daemon=True)
    thread.start()
    thread.join()
    done, value = out[0]
    if not done:
        raise value
    return value


def _heads_of_backward(args, kwargs):
    heads = args[0] if args else kwargs["heads"]
    return [heads] if isinstance(heads, mx.nd.NDArray) else list(heads)


mx.nd.NDArray.backward = _synchronised(mx.nd.NDArray.backward, lambda args, _: [args[0]])
autograd.backward = _synchronised(autograd.backward, _heads_of_backward)

# NOTE [a remat backward reads what it recomputes from]
#     MXNet's ``backward()`` returns once it pushed the backward's operators; a record_node
#     node's backward (a remat call's, a remat loop's) runs later on an engine thread and
#     recomputes from the parameters, pushing operators that read them then. A
#     ``Trainer.step`` (or any write of a parameter) pushed right after ``backward()`` comes
#     first in the parameter's queue: the recomputation waited for the update, which waited for
#     the gradient the recomputation computes. MXNet hung there (eager remat recursion with a
#     Trainer and no ``waitall`` between: the second step never started; found by a hostile
#     review). So ``backward()`` waits for the engine where record_node's nodes are alive
#     (not inside one's backward, nor a Custom operator's: they run on the engine's threads).


def fresh(values):
    """Unrecorded copies of ``values`` that share no array with each other (outputs of
    :func:`record_node` must be new arrays)."""
    seen, out = set(), []
    for v in values:
        v = v.detach()
        if id(v) in seen:
            v = v.copy()
        seen.add(id(v))
        out.append(v)
    return out


# ---------------------------------------------------------------------------------------------
# Closure arrays of an eager body


def closure_arrays(fn, limit=3):
    """The arrays needing a gradient that the eager callable ``fn`` may read: Gluon parameters
    of blocks and parameters in its closure, ``self``, defaults, partial arguments and the
    globals it names, and arrays with a gradient buffer there (NOTE [rematerialisation])."""
    found, seen = {}, set()

    def add_array(a):
        if isinstance(a, mx.nd.NDArray) and a.grad is not None:
            found[id(a)] = a

    def visit(obj, depth):
        if id(obj) in seen or depth > limit:
            return
        seen.add(id(obj))
        if isinstance(obj, mx.nd.NDArray):
            add_array(obj)
        elif isinstance(obj, mx.gluon.Parameter):
            if obj.grad_req != "null" and obj._data is not None:
                for a in obj.list_data():
                    add_array(a)
        elif isinstance(obj, mx.gluon.Block):
            for p in obj.collect_params().values():
                visit(p, 0)
        elif isinstance(obj, (list, tuple, set, frozenset)):
            for o in obj:
                visit(o, depth + 1)
        elif isinstance(obj, dict):
            for o in obj.values():
                visit(o, depth + 1)
        elif isinstance(obj, functools.partial):
            visit(obj.func, depth + 1)
            visit(obj.args, depth + 1)
            visit(obj.keywords, depth + 1)
        elif isinstance(obj, types.MethodType):
            visit(obj.__self__, depth)
            visit(obj.__func__, depth)
        elif isinstance(obj, types.FunctionType):
            for cell in obj.__closure__ or ():
                try:
                    visit(cell.cell_contents, depth + 1)
                except ValueError:   # an empty cell
                    pass
            visit(obj.__defaults__, depth + 1)
            visit(obj.__kwdefaults__, depth + 1)
            names = _code_names(obj.__code__)
            for name in names:
                if name in obj.__globals__:
                    value = obj.__globals__[name]
                    if not isinstance(value, types.ModuleType):
                        visit(value, depth + 1)
        elif hasattr(obj, "fn") and callable(getattr(obj, "fn")):   # a RecursiveFunction
            visit(obj.fn, depth)
        elif callable(obj) and hasattr(obj, "__dict__"):
            visit(vars(obj), depth + 1)

    visit(fn, 0)
    return list(found.values())


def _code_names(code):
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def live(a):
    """Whether ``a`` needs a gradient: a float array marked (``attach_grad``) or recorded from a
    marked one. MXNet records every operator under ``record()``, reading unmarked inputs as
    ``null<N>``; an input that needs none must stay unmarked (Embedding refuses to
    differentiate its integer-valued data, even as float32)."""
    if not isinstance(a, mx.nd.NDArray) or not np.issubdtype(np.dtype(a.dtype), np.floating):
        return False
    return _from_marked(a)


def live_integer(a):
    """Whether ``a`` is a non-float array recorded from a marked one (``(h * 3).astype('int32')``
    for ``h`` needing a gradient). MXNet 1.9.1 passes gradients through ``Cast`` into integer
    arrays (truncated to integers), so without remat a gradient reaches ``h`` through it; remat
    does not carry one through non-float arguments, states or outputs (NOTE [integers computed
    from values needing a gradient])."""
    if not isinstance(a, mx.nd.NDArray) or np.issubdtype(np.dtype(a.dtype), np.floating):
        return False
    return _from_marked(a)


def needs_gradient(a):
    """Whether a gradient reaches a marked array from ``a``: :func:`live`, and not only through
    operators passing none back (a greedy decoder's first token, ``argmax`` of logits computed
    from parameters, is recorded from marked arrays and needs none; marked, an ``Embedding`` of
    it failed in backward: NOTE [loop states needing no gradient])."""
    if not live(a):
        return False
    if a.grad is not None:
        return True
    leaves = gradient_leaves(recorded_graph(a))
    return any(name.startswith("var") for name in leaves)


def _from_marked(a):
    if a.grad is not None:
        return True
    try:
        inputs = autograd.get_symbol(a).list_inputs()
    except mx.MXNetError:
        return False
    return any(name.startswith("var") for name in inputs)


def record_handed(inputs, outputs, backward, where):
    """Inside the forward of a gluon_cf node (``node.top_level_node()``, a loop nested in it):
    what :func:`record_node` does, without a custom backward inside the node's (NOTE [nested
    custom backward] in ``tests/test_remat_nesting.py``). The float ``outputs`` become
    variables of the node's tape (gradients added into buffers of their own), and the node's
    backward, once its ``autograd.backward`` has filled those buffers, runs ``backward`` in its
    own thread (``node.hand_backward``, in reverse order of the forward) and passes the inputs'
    gradients on: into the buffer of an input that is a variable (one of the node's marked
    inputs, or the output of a loop recorded so before), and through the node's tape for an
    input recorded on it, by ``autograd.grad`` to the variables it reads, whose buffers they
    are added into. ``where`` names the op for errors."""
    inputs = list(inputs)
    wanted = [live(x) for x in inputs]   # whether recorded now (the node's tape may go)
    floats = [o for o in outputs if np.issubdtype(np.dtype(o.dtype), np.floating)]
    buffers = [mx.nd.zeros_like(o) for o in floats]
    if floats:
        autograd.mark_variables(floats, buffers, "add")
    known = [x for x in (_node.top_level_inputs() or []) if x.grad is not None]
    for earlier in _node.handed_backwards():
        known += getattr(earlier, "variables", [])

    def run(train_mode):
        by_id = {id(o): b for o, b in zip(floats, buffers)}
        out_grads = [by_id.get(id(o)) if id(o) in by_id else mx.nd.zeros_like(o)
                     for o in outputs]
        with autograd.pause(train_mode=train_mode):
            grads = backward(out_grads)
        pairs = [(x, g) for x, g, w in zip(inputs, grads, wanted)
                 if w and g is not None and g is not UNREAD]
        for x, g in pairs:
            if x.grad is not None:
                x.grad[:] += g
        taped = _node.merged_heads([(x, g) for x, g in pairs if x.grad is None])
        if not taped:
            return
        reached = set(mx.sym.Group([autograd.get_symbol(x) for x, _ in taped]).list_inputs())
        names: dict = {}
        for v in known:
            names.setdefault(_leaf_name(v), v)
        unknown = sorted(n for n in reached if n.startswith("var") and n not in names)
        if unknown:
            raise NotImplementedError(
                "%s: with remat inside a hybridized gluon_cf node, the loop's inputs are "
                "computed from %d array(s) needing a gradient that are not the node's inputs; "
                "their gradient would be lost. Use remat=False" % (where, len(unknown)))
        used = [names[n] for n in sorted(reached) if n in names]
        if used:
            values = autograd.grad([x for x, _ in taped], used, [g for _, g in taped],
                                   retain_graph=True, train_mode=train_mode)
            for v, g in zip(used, values):
                v.grad[:] += g

    run.variables = floats   # type: ignore[attr-defined]
    _node.hand_backward(run)


# ---------------------------------------------------------------------------------------------
# Loop states needing a gradient

# NOTE [loop states needing no gradient]
#     A remat loop's backward recomputes a segment from its checkpoint's states, marked as
#     needing a gradient: the forward ran unrecorded, so it cannot tell which do. Marking a
#     float loop counter that a step reads as ``take``'s indices (``take(xs, i)``, the usual
#     ``while_loop``) asked MXNet for the indices' gradient while ``xs`` needed none, and its
#     backward failed ("wrong req"); an ``Embedding`` of a counter or of a fed-back token failed
#     too ("doesn't support calculate data gradient"), where ``remat=False`` runs (such a state
#     is not recorded there). So an eager body's step 0, run recorded with its data and states
#     marked, tells which new states a gradient reaches from which data and states
#     (:func:`gradient_leaves`: not through ``take``'s indices and its kin, nor through
#     operators passing no gradient back, as MXNet decides: NOTE [gradients asked of
#     indices]); from the states and data needing one at the start and the closure, those
#     needing one follow (a fixpoint); an initial state or data recorded from marked arrays and
#     read as indices needs none if a gradient reaches those only through operators passing
#     none back (a greedy decoder's first token, an ``argmax`` of logits: :func:`needs_gradient`).
#     A state that step 0 reads as indices and that needs no
#     gradient is not marked in backward (its gradient is exactly 0); every other state is, as
#     before (a state that step 0 computes without the parameters, ``h = x``, and later steps
#     with them is marked). A state left unmarked that a later step computes from values
#     needing a gradient after all (Python branching on the step) is refused when its segment
#     is recomputed, never a lost gradient. Hybridized bodies block index gradients in their
#     graphs (NOTE [gradients asked of indices]) and mark every state.


def _float(a):
    return isinstance(a, mx.nd.NDArray) and np.issubdtype(a.dtype, np.floating)


def gradient_leaves(js):
    """The names of the variables of recorded graph ``js`` a gradient reaches from its heads:
    not through ``take``'s indices and its kin, nor through an operator passing none back
    (NOTE [loop states needing no gradient])."""
    nodes = js["nodes"]

    def passing(node):
        op = node["op"]
        if op == "null" or op in _STOPS:
            return ()
        skip = set(INDEX_INPUTS.get(op, ())) | set(_NO_GRADIENT_INPUTS.get(op, ()))
        return [e[0] for k, e in enumerate(node["inputs"]) if k not in skip]
    heads = [h[0] for h in js["heads"]]
    return {nodes[nid]["name"] for nid in reached_ids(nodes, heads, passing)
            if nodes[nid]["op"] == "null"}


def _index_leaves(js):
    """The names of the variables of recorded graph ``js`` that an index input reads."""
    nodes = js["nodes"]
    todo = [n["inputs"][k][0] for n in nodes for k in INDEX_INPUTS.get(n["op"], ())
            if k < len(n["inputs"])]
    return {nodes[nid]["name"] for nid in reached_ids(nodes, todo) if nodes[nid]["op"] == "null"}


def states_needing_gradients(slots, closure, result, live_states, live_data, refine):
    """Per loop state, whether a remat loop's backward marks it (NOTE [loop states needing no
    gradient]), and per data, whether it needs a gradient. ``slots``: name -> ("data" |
    "state", position) of step 0's marked leaves; ``closure``: the names of the closure's
    arrays needing a gradient; ``result``: step 0's outputs and new states; ``live_states``,
    ``live_data``: which initial states and data are recorded from marked arrays;
    ``refine(kind, position)``: whether one of those, read as indices, needs a gradient
    (:func:`needs_gradient`, asked only then: it reads the array's whole recorded graph)."""
    new_states = result[len(result) - len(live_states):]
    recorded = [s for s in result if _float(s) and _node.recorded(s)]
    if not recorded:
        return [True] * len(new_states), live_data
    index_read = _index_leaves(recorded_graph(*recorded))
    read_slots = {slots[n] for n in index_read if n in slots}
    live_states = [w and (("state", k) not in read_slots or refine("state", k))
                   for k, w in enumerate(live_states)]
    live_data = [w and (("data", k) not in read_slots or refine("data", k))
                 for k, w in enumerate(live_data)]
    reads: List[Union[bool, List[Tuple[str, int]]]] = []   # per new state: the data and states
    for state in new_states:                              # its gradient reaches, or True
        if not (_float(state) and _node.recorded(state)):
            reads.append([])
            continue
        names = gradient_leaves(recorded_graph(state))
        reads.append(True if names & closure else [slots[n] for n in names if n in slots])
    needs = list(live_states)
    grown = True
    while grown:
        grown = False
        for j, read in enumerate(reads):
            if not needs[j] and (read is True or any(
                    live_data[k] if kind == "data" else needs[k]
                    for kind, k in (read if isinstance(read, list) else []))):
                needs[j] = grown = True
    return ([need or ("state", j) not in read_slots for j, need in enumerate(needs)],
            live_data)
