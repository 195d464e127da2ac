"""Converted ``if`` statements and ``a if test else b`` at run time: each runs as Python on a
Python condition, selects eagerly on an NDArray, and becomes ``cond`` on a Symbol, both
branches traced (NOTE [autograph] in ``impl/conversion.py``)."""
import mxnet as mx

from ...ops.cond import cond
from ..errors import AmbiguousTruthError, AutographError, node_name, python_value, read_by
from .call_results import surfaced
from .carried import Carried, spec_of
from .control_flow import OWN_DICT, flags_as_arrays, no_structure, uncarried
from .loop_escape import escaped, record
from .side_effects import graph_region
from .variables import Undefined, is_tensor, several_elements, truth


def if_stmt(pred, then_fn, else_fn, values, names, live, where, guard=False, optional=()):
    """Run a converted ``if`` (NOTE [autograph]): returns the branch variables' new values.
    ``guard``: the ``if`` is not the user's but runs the rest of a loop's step after a
    ``break``, ``continue`` or ``return`` (NOTE [autograph jumps]). ``optional``: the names
    only the handlers of a try around it read, which a branch may leave unassigned (NOTE
    [what only a handler reads])."""
    if isinstance(pred, mx.sym.Symbol):
        try:
            # (not carried where they have no value before it)
            live = tuple(read and not (name in optional and isinstance(value, Undefined))
                         for read, name, value in zip(live, names, values))
            return uncarried(_symbolic_if(pred, then_fn, else_fn, values, names, live, where,
                                          guard), values, names, optional, where, "if")
        except Exception as exc:      # NOTE [an exception leaving a loop]
            escaped(exc)        # (what a loop inside recorded: not this if's)
            surfaced(exc, where, "if")
            raise
    if isinstance(pred, mx.nd.NDArray):
        if pred.size != 1:
            raise AmbiguousTruthError(several_elements(where, "if", pred.shape))
        pred = bool(pred.asscalar())
    return _python_branch(then_fn if pred else else_fn, values, names)


def _python_branch(fn, values, names):
    """``fn(*values)``, an if's branch run as Python (NOTE [an exception leaving a loop])."""
    try:
        return fn(*values)
    except BaseException as exc:
        record(exc, exc.__traceback__, fn, names, values)
        raise


def _symbolic_if(pred, then_fn, else_fn, values, names, live, where, guard):
    results = {}

    def branch(fn, key):
        def run():
            with graph_region(where, "if", names):
                out = flags_as_arrays(tuple(fn(*values)), names)
            results[key] = out
            arrays = []
            for k, (name, value) in enumerate(zip(names, out)):
                if not live[k]:
                    continue
                if key == "else":
                    _check_same_kind(name, results["then"][k], value, where, guard)
                if isinstance(value, mx.sym.Symbol):
                    arrays.append(value)
                elif isinstance(spec_of(value), tuple):   # NOTE [autograph carried structures]
                    arrays.extend(Carried([value], [name], where, "if").arrays([value]))
                elif isinstance(value, Undefined) or is_tensor(value):
                    raise AutographError(
                        f"{where}: variable {name!r} is read after this if"
                        f"{read_by(where, name)} but the {key} branch "
                        f"does not assign it; with a tensor condition both branches run as one "
                        f"graph, so assign it before the if or in both branches")
            # a cond needs an output: with no array to return, a placeholder nothing reads
            return arrays or [mx.sym.zeros((1,))]
        return run

    arrays = cond(pred, branch(then_fn, "then"), branch(else_fn, "else"),
                  name=node_name(where, "if"))
    arrays = list(arrays) if isinstance(arrays, (list, tuple)) else [arrays]
    merged = []
    for k, value in enumerate(results["then"]):
        if live[k] and isinstance(value, mx.sym.Symbol):
            merged.append(arrays.pop(0))
        elif live[k] and isinstance(spec_of(value), tuple):
            layout = Carried([value], [names[k]], where, "if")
            size = len(layout.arrays([value]))
            merged.append(layout.rebuild(arrays[:size])[0])
            del arrays[:size]
        else:
            merged.append(value)
    return tuple(merged)


def _check_same_kind(name, then_value, else_value, where, guard=False):
    for side, value, other in (("then", then_value, else_value),
                               ("else", else_value, then_value)):
        if isinstance(value, Undefined) and isinstance(spec_of(other), tuple):
            raise AutographError(
                f"{where}: variable {name!r} is read after this if{read_by(where, name)} but "
                f"the {side} branch does not assign it; with a tensor condition both branches "
                f"run as one graph, so assign it before the if or in both branches")
    no_structure(name, then_value, else_value, where, "this if on a tensor")
    if isinstance(spec_of(then_value), tuple):
        return          # the same structure of arrays in both (checked above): carried
    then_array, else_array = isinstance(then_value, mx.sym.Symbol), \
        isinstance(else_value, mx.sym.Symbol)
    if then_array != else_array:
        if isinstance(then_value, Undefined) or isinstance(else_value, Undefined):
            side = "else" if isinstance(else_value, Undefined) else "then"
            raise AutographError(
                f"{where}: variable {name!r} is read after this if{read_by(where, name)} but "
                f"the {side} branch does not assign it; with a tensor condition both branches "
                f"run as one graph, so assign it before the if or in both branches")
        raise AutographError(
            f"{where}: variable {name!r}{read_by(where, name)} is an array in one branch of "
            f"this if and the Python "
            f"value {python_value(then_value if not then_array else else_value)} in the "
            f"other; with a "
            f"tensor condition both must be arrays (use F.full / F.zeros_like for constants)")
    if not then_array and not isinstance(then_value, Undefined) and then_value != else_value \
            and guard:
        raise AutographError(
            f"{where}: variable {name!r}{read_by(where, name)} becomes the Python value "
            f"{python_value(then_value)} here but stays {python_value(else_value)} when a "
            f"break, continue or return on a tensor condition ends the loop's step before "
            f"this line; the loop then runs as a graph, which "
            f"cannot carry a Python value that changes. Make it an array (i = F.zeros((1,)) "
            f"before the loop, i = i + 1 in it), or loop over a Python range "
            f"(for i in range(n): ... break)")
    if not then_array and not isinstance(then_value, Undefined) and then_value != else_value:
        raise AutographError(
            f"{where}: variable {name!r}{read_by(where, name)} is the Python value "
            f"{python_value(then_value)} in one branch of "
            f"this if and {python_value(else_value)} in the other; with a tensor condition "
            f"it must be an array in both (F.full) or the same value")


# why an if whose branches raise (or assert) stays Python (converters/conditionals.py)
RAISES = "raise an exception (or assert)"


def python_if(pred, where, why):
    """The condition of an ``if`` left as Python (its branches do what a graph cannot)."""
    if isinstance(pred, mx.sym.Symbol) and why == RAISES:
        raise AutographError(f"{where}: this if has a tensor condition and its branches "
                             f"{why}; a graph traces both branches, so the exception would "
                             f"be raised whatever the input. Check the values after the block "
                             f"runs (or eagerly), or compute a flag (F.sum(x) < -100) and "
                             f"return it as an output")
    if isinstance(pred, mx.sym.Symbol):
        raise AutographError(f"{where}: this if has a tensor condition, but its branches {why}, "
                             f"which gluon_cf.cond cannot express; compute the result in both "
                             f"branches and assign it to a variable instead" + (
                                 OWN_DICT if why.endswith("attributes or items") else ""))
    if isinstance(pred, mx.nd.NDArray):
        return bool(pred.asscalar())
    return pred


def if_exp(test, then_value, else_value, where, sources=None):
    """A converted conditional expression ``a if test else b`` (each side a function).
    On a Symbol test both sides must be arrays: ``2.0 if F.sum(x) > 0 else 0.5`` stays
    refused, since Python gives a float there and a graph only an array of the test's
    shape, whose uses differ from the number's (``range``, a shape, ``[0] * k``, a
    float16 array's dtype, broadcasting against a row): the message says to write the
    number as an array of the other side's shape (both numbers: ``F.where`` of the test on
    two ``F.full``), whose uses are then the user's. ``sources``: the test's, the sides'
    source and whether both are numbers as written."""
    if isinstance(test, mx.sym.Symbol):
        def side(fn, which):
            def run():
                with graph_region(where, "conditional expression"):
                    value = fn()
                if not isinstance(value, mx.sym.Symbol):
                    # (Python gives that value itself, a number where the other side
                    # gives an array: no graph output is; NOTE [autograph and/or])
                    raise AutographError(f"{where}: the {which} side of this conditional "
                                         f"expression is the Python value "
                                         f"{python_value(value)}; with a tensor condition "
                                         f"both sides must be arrays" + (_number_side(
                                             value, which, sources) if isinstance(
                                                 value, (int, float)) else ""))
                return value
            return run
        return cond(test, side(then_value, "if"), side(else_value, "else"),
                    name=node_name(where, "ifexp"))
    return then_value() if truth(test, where, "conditional expression") else else_value()


def _number_side(value, which, sources):
    """What the message of a number side on a tensor test says to write."""
    test, then, other, numbers = sources or ("cond", "a", "a", False)
    if which == "else":
        then, other = other, then
    write = f"F.where({test}, F.full((1,), {then}), F.full((1,), {other}))" if numbers \
        else f"F.ones_like({other}) * {value!r}"
    return (f" (plain Python gives that number itself where it is chosen, a graph only an "
            f"array, whose uses differ from a number's: range(n), a shape, an index, a "
            f"float16 array's dtype): write the choice as an array, {write}, and use it as "
            f"one")


def if_return(pred, then_fn, else_fn, values, where, names=(), loop_return=False):
    """Run a converted ``if`` both of whose branches return: returns the returned value.
    ``names``: the variables the branches start from (the function ends in them, so a
    closure's nonlocal write of one is part of the value). ``loop_return``: the ``if`` is
    ``if flag: return value`` after a loop whose body returns (NOTE [autograph jumps]), the
    user's ``return`` at ``where``."""
    if not isinstance(pred, mx.sym.Symbol):
        return _python_branch(then_fn if truth(pred, where, "if") else else_fn, values, names)
    kinds, structures = {}, {}

    def branch(fn, key):
        def run():
            with graph_region(where, "if", names):
                value = fn(*values)
            if not _arrays_only(value) and loop_return and key == "else":
                what = "nothing (None)" if value is None else repr(value)
                raise AutographError(
                    f"{where}: this return is inside a loop that runs as a graph, and the "
                    f"loop may also end without it (its condition, a break, or the loop's "
                    f"max_iterations bound), after which the function returns {what}; a "
                    f"graph returns one structure of arrays either way, so end the function "
                    f"after the loop with a return of arrays of the same structure")
            if not _arrays_only(value):
                raise AutographError(
                    f"{where}: the {key} branch of this if returns {value!r}; with a tensor "
                    f"condition both branches run as one graph, so both must return arrays "
                    f"(or lists or tuples of arrays) of the same structure")
            kinds[key], structures[key] = type(value), _structure(value)
            if len(set(structures.values())) > 1:
                # (gluon_cf.cond's own error named no line of the user's)
                raise AutographError(
                    f"{where}: " + ("this return is inside a loop that runs as a graph, and "
                                    "the function returns " if loop_return else
                                    "the then branch of this if returns ") +
                    f"{structures['then']} " + ("here and " if loop_return else
                                               "and the else branch ") +
                    f"{structures['else']}" + (" after the loop" if loop_return else "") +
                    "; with a tensor condition both run as one graph, which returns one "
                    "structure of arrays: return as many arrays, in the same nesting, in both")
            return value
        return run
    try:
        result = cond(pred, branch(then_fn, "then"), branch(else_fn, "else"),
                      name=node_name(where, "if"))
    except Exception as exc:      # NOTE [an exception leaving a loop]
        escaped(exc)        # (what a loop inside recorded: not this if's)
        surfaced(exc, where, "if")
        raise
    return tuple(result) if kinds.get("then") is tuple else result


def _structure(value):
    """How a branch's returned value nests its arrays, in words: 'an array', '(an array, an
    array)', a list's as a tuple's (the results are a tuple where the then branch's is)."""
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_structure(v) for v in value) + ")"   # (a list alike)
    return "an array"


def _arrays_only(value):
    if isinstance(value, (list, tuple)):
        return len(value) > 0 and all(_arrays_only(v) for v in value)
    return isinstance(value, mx.sym.Symbol)
