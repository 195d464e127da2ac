"""How ``while_loop`` reads its arguments and lays out its node as MXNet 1.9.1's does: the
bound ``max_iterations`` (NOTE [max_iterations]), the order of its node's inputs (NOTE
[while_loop input order]), what cond returns symbolically, the loop vars and step outputs of
no step."""
from typing import Dict

import mxnet as mx

from .. import registry
from .._structure import flatten, regroup
from ..checks import ArgumentValueError, PredValueError, describe_pred, op_at
from ..errors import ZeroSizeError
from ..graph.decoded import nodes_of_spec
from ..tracing import merge_captures, rename_other_values_of_one_name

OP = "while_loop"


def check_max_iterations(max_iterations, mode):
    """``max_iterations`` as MXNet 1.9.1's ops read it (NOTE [max_iterations])."""
    if max_iterations is None:   # gluon_cf's exact length (MXNet refuses None)
        return None
    given = max_iterations
    if hasattr(max_iterations, "asscalar"):
        try:
            max_iterations = max_iterations.asscalar()
        except ValueError:
            raise ValueError("%s: max_iterations must be a scalar; got an array of shape %s"
                             % (op_at(OP), max_iterations.shape)) from None
    try:
        max_iterations = int(max_iterations)
    except Exception:  # noqa: BLE001 - whatever int() refuses, as MXNet's bare except
        raise ValueError("%s: cannot convert max_iterations to a Python int, got %r"
                         % (op_at(OP), given)) from None
    if mode == "symbol" and max_iterations < 1:
        raise ArgumentValueError("%s: max_iterations must be >= 1 in hybridized mode, got %d%s"
                                 % (op_at(OP), max_iterations,
                                    "" if type(given) is int else " (from %r)" % (given,)))
    return max(max_iterations, 0)


# NOTE [max_iterations]
#     MXNet 1.9.1's while_loop reads max_iterations with ``int()`` (after ``asscalar()`` of an
#     array), eagerly and symbolically: 2.5 and 2.9 run 2 steps, True 1, numpy integers and
#     "3" are ints, and what int() refuses (nan, inf, [3], "x") is a ValueError ("Cannot
#     convert max_iteration to python int"); gluon_cf does the same. Eagerly a bound below 1
#     runs no step; a symbolic node needs one of at least 1 (MXNet's parameter's lower bound,
#     an MXNetError when the symbol is made). None is gluon_cf's exact length (MXNet: "max_
#     iterations should be specified").


# NOTE [while_loop input order]
#     MXNet 1.9.1's symbolic while_loop gives its node the inputs of cond's graph, then those
#     of func's graph not seen yet, each graph's in the order of a depth-first walk of it
#     (``list_inputs()``), loop variables among them where the walk meets them
#     (``_union_inputs``); ``list_arguments()``, what a positional ``bind`` or
#     ``infer_shape`` follows, and a hybridized block's CachedOp inputs follow that order.
#     gluon_cf's node takes its inputs in that order too. Its slots (NOTE [slots]) stay the
#     loop variables, then what the graphs captured: the spec's ``var_inputs`` lists the
#     input position of each loop variable (absent: the first ``num_vars`` inputs, as in
#     graphs saved before), and the captured values follow in input order. The rule's entry
#     points take node inputs and put them in slot order (``slot_order``/``input_order``,
#     which readers of a node's inputs outside the rule use as well: gradients asked of
#     indices, the ONNX export), the batched executor's flags of inputs holding rows too. A loop
#     variable neither graph reads (MXNet refuses it) comes after the others.


def mxnet_input_order(flat_vars, cond_g, func_g):
    """The node's inputs in MXNet's order (NOTE [while_loop input order]): ``(inputs,
    var_inputs, slot_of)``, ``var_inputs[k]`` the input position of loop variable ``k``,
    ``slot_of`` the slot of each captured name."""
    nv = len(flat_vars)
    # (NOTE [computed values of one name in while_loop]: func_g's input renamed in place)
    rename_other_values_of_one_name(func_g, cond_g)
    captured, pooled_slot = merge_captures(OP, [cond_g, func_g], first_slot=nv, walk_order=True)
    outer = {name: captured[slot - nv] for name, slot in pooled_slot.items()}
    order: list = []
    for graph in (cond_g, func_g):
        fresh = {name: k for k, name in enumerate(graph.input_names)}
        for name in graph.symbol.list_inputs():
            item = ("var", fresh[name]) if name in fresh else ("captured", name)
            if item not in order:
                order.append(item)
    order += [("var", k) for k in range(nv) if ("var", k) not in order]
    order += [("captured", name) for name in outer if ("captured", name) not in order]
    inputs: list = []
    var_inputs = [0] * nv
    slot_of: Dict[str, int] = {}
    for kind, key in order:
        if kind == "var":
            var_inputs[key] = len(inputs)
            inputs.append(flat_vars[key])
        else:
            slot_of[key] = nv + len(slot_of)
            inputs.append(outer[key])
    return inputs, var_inputs, slot_of


def slot_order(spec, items):
    """Per-input ``items`` of a node in slot order (NOTE [while_loop input order])."""
    items = list(items)
    var_inputs = spec.get("var_inputs")
    if var_inputs is None:
        return items
    taken = set(var_inputs)
    return [items[p] for p in var_inputs] + [x for p, x in enumerate(items) if p not in taken]


def input_order(spec, items):
    """Per-slot ``items`` of a node in input order (the inverse of :func:`_slot_order`)."""
    items = list(items)
    var_inputs = spec.get("var_inputs")
    if var_inputs is None:
        return items
    positions = slot_order(spec, range(len(items)))
    out = [None] * len(items)
    for slot, position in enumerate(positions):
        out[position] = items[slot]
    return out


def symbolic_pred(value):
    """What cond returned while tracing: a Symbol, else the ValueError of MXNet 1.9.1's
    symbolic while_loop ("Return of cond must be a Symbol"). A list of one Symbol too: MXNet's
    eager while_loop takes it as always true (``bool([x])``), which gluon_cf's eager loop
    refuses; reading the Symbol in it gave other values than that (NOTE [what gluon_cf
    accepts beyond MXNet's symbolic ops] in tests/test_mxnet_semantics23.py)."""
    if isinstance(value, mx.sym.Symbol):
        return value
    raise PredValueError("%s: cond must return a Symbol (a one-element predicate computed from "
                         "the loop variables) in symbolic mode, got %s"
                         % (op_at(OP), describe_pred(value)))


def unchanged_vars(loop_vars, final, vars_fmt):
    """The final loop vars of an eager loop of no step: ``loop_vars`` itself, as MXNet 1.9.1's
    eager while_loop returns it (a tuple stays a tuple), when its arrays are ``final``."""
    flat, _ = flatten(loop_vars, "gluon_cf.while_loop", "loop_vars")
    if len(flat) == len(final) and all(a is b for a, b in zip(flat, final)):
        return loop_vars
    return regroup(final, vars_fmt)


class PendingStepOutputs(list):
    """The step outputs of a loop on its path of no step while a recursive function's
    signature is discovered (NOTE [loops of no step]): any use raises the PendingSignature
    (the graph is thrown away)."""

    __slots__ = ("pending",)

    def __init__(self, pending: Exception) -> None:
        super().__init__()
        self.pending = pending

    def refuse(self, *args, **kwargs):
        raise self.pending

    def __getitem__(self, index):
        if isinstance(index, slice):
            return []
        self.refuse()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        self.refuse()

    __add__ = __radd__ = __iadd__ = __mul__ = __rmul__ = __imul__ = __sub__ = __rsub__ = refuse
    __truediv__ = __rtruediv__ = __pow__ = __rpow__ = __neg__ = __abs__ = __array__ = refuse
    __lt__ = __le__ = __gt__ = __ge__ = __matmul__ = __rmatmul__ = refuse


def unknown_rows_of_no_step(where):
    """The error of a hybridized loop of no step whose step outputs' shapes only running func
    could tell, where gluon_cf does not run it (NOTE [loops of no step]), at the loop's line
    ``where``."""
    return ZeroSizeError(
        "gluon_cf.while_loop%s: the loop runs no step here (cond is false at once) and the "
        "shapes of its step outputs are known only by running func (MXNet's inference of "
        "func's graph on these inputs is incomplete, or changes with a dim of 0: a value of "
        "no row, such as a boolean_mask keeping none); MXNet never runs func for a loop of no "
        "step, and gluon_cf runs its graph only on inputs of no dim of 0 where it makes no "
        "recursive call; guard the loop with an if on the row count, or return step outputs "
        "whose shapes do not follow a value of no row" % (" at %s" % where if where else ""),
        located=bool(where))


def calls_recursively(spec):
    """Whether a loop node's graphs (nested ones included) make a recursive call."""
    return any(registry.kind_of(n) in ("recursion", "invoke") for n in nodes_of_spec(spec))


def func_may_run(spec, inputs):
    """Whether a hybridized loop of no step may run func's graph for its step outputs' shapes
    on ``inputs`` (NOTE [loops of no step]): none has a dim of 0, func makes no recursive
    call."""
    return not calls_recursively(spec) and not any(map(_no_element, inputs))


def _no_element(x):
    """Whether an array has a dim of 0 (a 1-D one of no element has no shape MXNet reads)."""
    try:
        return 0 in x.shape
    except mx.MXNetError:
        return True
