"""Loops of converted code at run time: ``while`` and ``for`` loops, and the flags of
``break``/``continue``/``return``; each runs as Python on Python values, eagerly on an
NDArray, and becomes ``while_loop`` or ``foreach`` on a Symbol (NOTE [autograph]); ``if``
statements and expressions are ``conditionals.py``'s.

NOTE [autograph loops]
    ``while test: body`` becomes :func:`while_stmt` with the test and the body as functions of
    the loop variables: what the body assigns and the test reads, a step reads before
    assigning, or the code after the loop reads (the body's other names are one step's
    temporaries). On a Symbol condition it is ``gluon_cf.while_loop`` over those that are
    arrays, bounded by a ``max_iterations(N)`` first in the body, else the decorator's
    ``max_iterations``, else exact length. The bound holds eagerly too: a loop's own
    ``max_iterations(N)`` whatever its condition (a ``while True`` ended by a tensor ``break``
    is Python eagerly), the decorator's for a tensor condition. Stopping at the bound while
    the condition holds warns (``TruncationWarning``). ``for name in iterable`` becomes
    :func:`for_stmt`: ``gluon_cf.foreach`` over a Symbol's rows, plain Python otherwise
    (``for a, b in x``: each row unpacked, NOTE [autograph unpacking loops]). A
    Python value a tensor loop changes, or a loop variable without a value before the loop,
    is an AutographError. Flags of jumps (NOTE [autograph jumps]) are Python bools until a
    tensor ``if`` or loop carries them, where they become one-element arrays
    (:func:`flags_as_arrays`). A tensor ``for`` whose item is read only by a ``return``
    inside it (``return row, h``: ``if flag: return value`` after the loop) carries the
    item: each step that runs (no flag set when it starts) keeps its row, a step after the
    return keeps the one before (a cond on the flags), and it starts from the item's value
    before the loop, or, where it has none, from the first row when the input shapes say
    rows exist (a loop of no step then never returns). Where neither holds it is refused
    (no graph gives what Python's unbound name would be). An item read after the loop
    otherwise, or by a closure, stays refused: a loop of no step would leave Python's
    earlier value or none, and a closure made in one step may read it in the next.
"""
import mxnet as mx

from ...ops.cond import cond
from ...ops.foreach import NO_STEP_ON_EMPTY_DATA, foreach
from ...ops.while_loop import warn_truncation, while_loop
from ...hybrid_trace import shape_hint, static_shape
from ..errors import AutographError, node_name, python_value, read_by
from .carried import (Carried, carries_nothing, described, holds_arrays, keep_what,
                      spec_of)
from .py_builtins import one_output
from .data_structures import StepList, item
from .loop_lists import append_rows, appended_where, extended, step_rows
from .call_results import surfaced, surfaced_inside
from .caught_errors import raised_by_traced_shapes
from .loop_escape import escaped, record
from .unpacking import row_items
from .side_effects import graph_region
from .tensor_access import subscript
from .variables import Undefined, holds_symbols, is_tensor, truth


def no_structure(name, a, b, where, what):
    """A list or tuple of arrays whose structure ``a`` and ``b`` share is carried
    (NOTE [autograph carried structures]); another structure, or a list mixing arrays and
    Python values, is an error (comparing it as a Python value would ask a Symbol for its
    truth)."""
    if a is b:
        return
    before, after = spec_of(a), spec_of(b)
    if isinstance(before, tuple) and before == after:
        return              # carried as its arrays (NOTE [autograph carried structures])
    if isinstance(before, tuple) or isinstance(after, tuple):
        raise AutographError(
            f"{where}: variable {name!r}{read_by(where, name)} is {described(before)}, then "
            f"{described(after)} in {what}; a graph carries the same arrays throughout, so "
            f"{keep_what(before, after)}")
    for value in (a, b):
        if not isinstance(value, mx.sym.Symbol) and holds_arrays(value):
            raise AutographError(
                f"{where}: variable {name!r}{read_by(where, name)} is "
                f"{'an' if type(value).__name__[:1] in 'AEIOU' else 'a'} "
                f"{type(value).__name__} holding arrays (and other values) that {what} "
                f"changes; a graph carries arrays, and lists, tuples, named tuples and dicts "
                f"of only arrays, so unpack it into variables (h, k = state) and pack it "
                f"again where it is used ([h, k])")


def while_stmt(test, body, values, names, where, bound, lists=(), hinted=False,
               forever=False, list_names=(), optional=()):
    """Run a converted ``while`` (NOTE [autograph loops]): returns its variables' final values,
    then the lists it appended to. ``hinted``: the bound is the loop's own
    ``max_iterations(N)``, which holds whatever its condition; the decorator's holds for a
    tensor condition only (eagerly too). ``forever``: the condition is a constant and the
    loop has break or return flags; while tracing they are arrays from the start.
    ``optional``: the names only the handlers of a try around the loop read (NOTE [what only
    a handler reads])."""
    lists, count = list(lists), len(values)
    if forever and any(isinstance(v, mx.sym.Symbol) for v in values):
        values = flags_as_arrays(values, names)    # while True ended by a break: one graph
    steps = 0
    try:
        first = test(*values)
        while not isinstance(first, mx.sym.Symbol):
            if not truth(first, where, "while"):
                return values + tuple(lists)
            if bound is not None and (hinted or is_tensor(first)) and steps >= bound:
                warn_truncation(where, bound)
                return values + tuple(lists)
            result = tuple(body(*values))
            values = result[:count]
            append_rows(lists, result[count:], where)
            first = test(*values)
            steps += 1
    except BaseException as exc:      # NOTE [an exception leaving a loop]
        record(exc, exc.__traceback__, body, names, values, lists, list_names)
        raise
    try:      # NOTE [an exception leaving a loop]
        # A Symbol condition, from the start or after Python steps (a break under a tensor if
        # in a `while True`): the remaining steps are one graph loop.
        if bound is not None:
            bound -= steps
            if bound < 1:
                return values + tuple(lists)
        values = flags_as_arrays(values, names)
        _loop_arrays(values, names, where, "while", optional)
        carried = Carried(values, names, where, "while loop on a tensor")
        arrays = carried.arrays(values)

        full = carried.rebuild
        counted = bool(lists)     # the collected rows' number, to join them to other rows

        def step(*vs):
            with graph_region(where, "while loop", names):
                result = tuple(body(*full(vs[:len(arrays)])))
            new = flags_as_arrays(result[:count], names)
            _check_loop_vars(values, new, names, where, "while", optional)
            return step_rows(result[count:], where), carried.arrays(new) + \
                ([vs[-1] + 1] if counted else [])
        def condition(*vs):
            with graph_region(where, "while loop", names):
                return test(*full(vs[:len(arrays)]))
        if not arrays and not counted:
            carries_nothing(step, where)     # NOTE [a tensor while carrying no array]
        rows, final = while_loop(condition, step,
                                 arrays + ([mx.sym.zeros((1,))] if counted else []),
                                 max_iterations=bound, name=node_name(where, "while"),
                                 report_truncation=where, exact_length=counted)
        final = list(final) if isinstance(final, (list, tuple)) else [final]
        ran = final.pop() if counted else None
        return uncarried(full(final), values, names, optional, where, "loop") + \
            extended(lists, rows, ran, where, most=bound)
    except Exception as exc:
        escaped(exc)        # (what a loop inside recorded: not this loop's)
        surfaced(exc, where)
        raise


def for_stmt(iterable, body, values, names, where, item=None, lists=(), stop=(), kept=(),
             list_names=(), returned_item=False, unpack=None, optional=()):
    """Run a converted ``for`` (NOTE [autograph loops]): returns its variables' final values, the
    lists it appended to, and the last item when ``item`` holds the current value of a loop
    variable read after the loop. ``stop``: the names of its break and return flags.
    ``kept``: for each list, whether its append ends the step after a break (its step output
    is a function of no argument, whose value is appended where no flag is set after the
    step: NOTE [autograph lists]). ``list_names``: the lists' names (NOTE [an exception
    leaving a loop]). ``returned_item``: the item is read only by a ``return`` inside the
    loop (``return row, h``), which a graph's loop carries (NOTE [autograph loops]).
    ``unpack``: the structure of the loop's target where it unpacks its items (``for a, b in
    x``: NOTE [autograph unpacking loops]). ``optional``: as :func:`while_stmt`'s."""
    keep_item, lists, count = item is not None, list(lists), len(values)
    items_count = None
    if isinstance(iterable, StepList):    # (its items, or its rows: NOTE [autograph lists])
        iterable, items_count = iterable.iterable(where)
    stop = [names.index(name) for name in stop if name in names]
    kept = list(kept) or [False] * len(lists)
    if not one_output(iterable):
        # (a Symbol of several outputs, F.split's, iterates over them as the eager list does)
        last = item[0] if keep_item else None
        try:
            for last in iterable:
                going = running(*[values[k] for k in stop])
                if lists and isinstance(going, mx.sym.Symbol):
                    # a tensor break ended it or not: the step runs as a graph, its results
                    # count where `going` holds, and what it appends is one row or none
                    cleared = tuple(False if k in stop else v for k, v in enumerate(values))
                    result = tuple(body(last, *cleared))
                    new = flags_as_arrays(result[:count], names)
                    lists = _appended_after_step(lists, result[count:], kept, going,
                                                 running(*[new[k] for k in stop]), where)
                    values = _where(going, new, flags_as_arrays(values, names), names, where)
                    continue
                result = tuple(body(last, *values))
                values = result[:count]
                lists = _appended_after_step(lists, result[count:], kept, True,
                                             running(*[values[k] for k in stop]), where)
                if any(not is_tensor(values[k]) and values[k] for k in stop):
                    break        # a break or return (under a Python condition) ends the loop
            if keep_item and any(isinstance(values[k], mx.sym.Symbol) for k in stop):
                # the later steps ran as no-ops under a tensor flag, but the item moved on
                raise AutographError(
                    f"{where}: this for loop may end under a tensor condition (a break or "
                    f"return under a tensor if) and its item is read after it (or by the "
                    f"return); which item it stopped at is known only when the graph runs, so "
                    f"assign what you need to a variable that has a value before the loop, "
                    f"then break")
            return values + tuple(lists) + ((last,) if keep_item else ())
        except BaseException as exc:      # NOTE [an exception leaving a loop]
            record(exc, exc.__traceback__, body, (_item_name(body),) + tuple(names),
                   (last,) + tuple(values), lists, list_names, kept)
            raise
    before = values
    try:      # NOTE [an exception leaving a loop]
        if lists and stop:
            raise AutographError(
                f"{where}: this for loop over a tensor appends to a list and may end under a "
                f"tensor condition (a break or return under a tensor if); a graph's for runs "
                f"every row, so write it as a while loop over a counter (i = F.zeros((1,)); "
                f"while i < n: ... i = i + 1), which stops where the break is")
        if keep_item and not returned_item:
            raise AutographError(f"{where}: this for loop is on a tensor and its item is read "
                                 f"after the loop (or by a return inside it, such as return "
                                 f"row, h, or by a closure, locals(), vars() or eval in the "
                                 f"function); a graph's loop does not keep its last row, so "
                                 f"assign what you need to a variable (given a value before the "
                                 f"loop) inside it: last = F.zeros_like(x[0]) before the loop, "
                                 f"last = row in it, and read or return last")
        first_item = _first_item(iterable, item[0], items_count, where) if keep_item \
            else None
        values = flags_as_arrays(values, names)
        _loop_arrays(values, names, where, "for", optional)
        items_of = None if unpack is None else row_items(iterable, unpack, where)
        carried = Carried(values, names, where, "for loop on a tensor")
        arrays = carried.arrays(values)
        # the item read after the loop (or by a return in it): carried, the row of each step
        # that runs (NOTE [autograph loops])
        items = [first_item] if keep_item else []

        # (a loop carrying and collecting nothing, a print of each row, counts its steps: a
        # graph's loop needs one value to carry)
        counted = bool(lists) or not arrays and not keep_item

        def step(row, states):
            if items_count is None:     # (NOTE [an index error the user's try catches])
                shape_hint(row, lambda: _row_shape(iterable, where))
            for state, array in zip(states, arrays):
                shape_hint(state, lambda a=array: static_shape(a, where, hinted=True))
            row = row if items_of is None else items_of(row)
            current = carried.rebuild(states[:len(arrays)])
            with graph_region(where, "for loop", names):
                result = tuple(body(row, *current))
            new = flags_as_arrays(result[:count], names)
            _check_loop_vars(values, new, names, where, "for", optional)
            kept_item = []
            if keep_item:
                going = running(*[current[k] for k in stop])
                last = states[len(arrays)]
                kept_item = [row if going is True else cond(
                    going, lambda: row, lambda: last, name=node_name(where, "item"))]
            return step_rows(result[count:], where), carried.arrays(new) + kept_item + \
                ([states[-1] + 1] if counted else [])
        setattr(step, NO_STEP_ON_EMPTY_DATA, True)   # NOTE [a foreach of no step]
        if items_count is not None:
            # a collected list that may hold no item while its rows are one (a slice
            # dropping items, appends under a tensor condition): the loop runs where it holds
            # one, else its variables keep their values (NOTE [autograph lists])
            if counted:
                raise AutographError(
                    f"{where}: this loops over a list a loop on a tensor appended to, which "
                    f"may hold no item (how many is known only when the graph runs), and "
                    f"{'appends to a list' if lists else 'carries no array'}; loop over "
                    f"F.stack(*items) where it surely holds an item")
            final = cond(items_count > 0, lambda: list(foreach(
                step, iterable, arrays, name=node_name(where, "for"))[1]),
                lambda: list(arrays), name=node_name(where, "for_items"))
            return uncarried(carried.rebuild(list(final)), values, names, optional, where, "loop")
        rows, final = foreach(step, iterable, arrays + items +
                              ([mx.sym.zeros((1,))] if counted else []),
                              name=node_name(where, "for"))
        final = list(final)
        steps = final.pop() if counted else None
        last = (final.pop(),) if keep_item else ()
        return uncarried(carried.rebuild(final), values, names, optional, where, "loop") + \
            extended(lists, rows, steps, where) + last
    except Exception as exc:
        escaped(exc)        # (what a loop inside recorded: not this loop's)
        if raised_by_traced_shapes(exc) and not surfaced_inside(exc) and \
                items_count is None:
            _first_step_raising(iterable, body, before, names, where, unpack,
                                (lists, list_names, kept))
        surfaced(exc, where)
        raise


def _row_shape(iterable, where):
    """The shape of a row of ``iterable`` where the shapes the graph is traced for give it
    one row or more, else None (a loop of no step traces a body that never runs)."""
    shape = static_shape(iterable, where, trailing=True, hinted=True)
    return shape[1:] if shape and shape[0] >= 1 else None


def _first_step_raising(iterable, body, values, names, where, unpack, collected):
    """The first step of a tensor ``for`` whose traced body raised the IndexError of a shape
    the graph is traced for, run as Python on the first row where the shapes give one: it
    raises it again, leaving the variables and the collected ``(lists, names, kept)`` as the
    eager step leaves them (NOTE [an index error the user's try catches]). Returns (for the
    refusal) where the loop may run no step or the step raises nothing."""
    shape = static_shape(iterable, where)
    if not shape or shape[0] < 1:
        return
    row = mx.sym.squeeze(mx.sym.slice_axis(iterable, axis=0, begin=0, end=1,
                                           name=node_name(where, "first")), axis=0)
    if unpack is not None:
        row = row_items(iterable, unpack, where)(row)
    lists, list_names, kept = collected
    try:
        body(row, *values)
    except BaseException as exc:      # NOTE [an exception leaving a loop]
        record(exc, exc.__traceback__, body, (_item_name(body),) + tuple(names),
               (row,) + tuple(values), lists, list_names, kept)
        raise


def _item_name(body):
    """The name of a converted for loop's item: its body's first parameter."""
    name = body.__code__.co_varnames[0]
    return name[len("__agv_"):] if name.startswith("__agv_") else name


def _appended_after_step(lists, rows, kept, going, clear, where):
    """The lists after one step of a ``for`` over a Python iterable: each row is appended
    where ``going`` (no flag set before the step) holds, and a kept one (``kept``: appended
    after the break) also where ``clear`` (no flag set by the step) does; each condition is a
    Python bool or an array (then the row is appended or not when the graph runs)."""
    out = []
    for items, row, after_break in zip(lists, rows, kept):
        if after_break:
            row = row()
            when = going if clear is True else False if clear is False else \
                clear if going is True else going * clear
        else:
            when = going
        if when is True:
            append_rows([items], [row], where)
            out.append(items)
        elif when is False:
            out.append(items)
        else:
            out.extend(appended_where(when, [items], [row], where))
    return out


def _first_item(data, before, items_count, where):
    """What a tensor ``for``'s carried item starts from: its value before the loop, an array
    of the row's shape (a loop of no step keeps it, as Python's name keeps it), or, where it
    had none, the first row when the rows surely exist (the first step replaces it; what
    Python's unbound name would be after a loop of no step no graph gives). Else the
    AutographError saying to keep what is needed in a variable."""
    if isinstance(before, mx.sym.Symbol) and one_output(before):
        return before
    shape = static_shape(data, where) if items_count is None else None
    if isinstance(before, Undefined) and shape and shape[0] > 0:
        return mx.sym.squeeze(mx.sym.slice_axis(data, axis=0, begin=0, end=1,
                                                name=node_name(where, "first")), axis=0)
    raise AutographError(f"{where}: this for loop is on a tensor and its item is read "
                         f"by a return inside it, such as return row, h; a graph's loop "
                         f"keeps the row only where the item has a value before the loop "
                         f"or the rows surely exist (how many there are is known only when "
                         f"the graph runs here), so "
                         f"assign what you need to a variable (given a value before the "
                         f"loop) inside it: last = F.zeros_like(x[0]) before the loop, "
                         f"last = row in it, and read or return last")


def _where(going, new, old, names, where):
    """The values of a step that ran only where the array ``going`` holds: ``new`` there,
    ``old`` elsewhere (a cond choosing between them). Lists, tuples and dicts of arrays (an
    RNN cell's ``state``) are chosen item by item."""
    pairs = []

    def pair(name, n, o):
        if isinstance(n, mx.sym.Symbol) and isinstance(o, mx.sym.Symbol):
            pairs.append((n, o))
        elif isinstance(n, (list, tuple)) and isinstance(o, (list, tuple)) and \
                len(n) == len(o) and (holds_symbols(n) or holds_symbols(o)):
            for a, b in zip(n, o):
                pair(name, a, b)
        elif isinstance(n, dict) and isinstance(o, dict) and list(n) == list(o) and \
                (holds_arrays(n) or holds_arrays(o)):
            for key in n:
                pair(name, n[key], o[key])
        else:
            _check_loop_vars([o], [n], [name], where, "for")
    for name, n, o in zip(names, new, old):
        pair(name, n, o)
    if not pairs:
        return tuple(new)
    chosen = cond(going, lambda: [n for n, _ in pairs], lambda: [o for _, o in pairs],
                  name=node_name(where, "step"))
    chosen = list(chosen) if isinstance(chosen, (list, tuple)) else [chosen]

    def rebuilt(n, o):
        if isinstance(n, mx.sym.Symbol) and isinstance(o, mx.sym.Symbol):
            return chosen.pop(0)
        if isinstance(n, (list, tuple)) and isinstance(o, (list, tuple)) and \
                len(n) == len(o) and (holds_symbols(n) or holds_symbols(o)):
            items = [rebuilt(a, b) for a, b in zip(n, o)]
            return type(n)(*items) if hasattr(type(n), "_fields") else type(n)(items)
        if isinstance(n, dict) and isinstance(o, dict) and list(n) == list(o) and \
                (holds_arrays(n) or holds_arrays(o)):
            return {key: rebuilt(n[key], o[key]) for key in n}
        return n
    return tuple(rebuilt(n, o) for n, o in zip(new, old))


def uncarried(values, before, names, optional, where, what):
    """A tensor loop's or if's variables ``values`` after it: each of ``optional`` (read
    only by the handlers of a try around it) that had no value ``before`` it, not carried,
    one whose use says why (NOTE [what only a handler reads])."""
    return tuple(Undefined(name, where, why=(
        f"is read by a handler of the try around this {what} on a tensor, after an exception "
        f"raised past it, and has no value before the {what}; a graph's {what} carries only "
        f"variables that have one (plain Python's would hold what the {what} left), so give "
        f"it a value before the {what}"))
                 if name in optional and isinstance(old, Undefined) else value
                 for name, value, old in zip(names, values, before))


def _loop_arrays(values, names, where, what, optional=()):
    for name, value in zip(names, values):
        # (one only a handler reads stays without a value: NOTE [what only a handler reads])
        if isinstance(value, Undefined) and name not in optional:
            raise AutographError(f"{where}: variable {name!r}{read_by(where, name)} is "
                                 f"assigned in this {what} loop "
                                 f"on a tensor but has no value before it; a graph's loop "
                                 f"carries its variables from step to step, so give it one "
                                 f"before the loop")
    return [v for v in values if isinstance(v, mx.sym.Symbol)]


def _check_loop_vars(before, after, names, where, what, optional=()):
    for name, old, new in zip(names, before, after):
        if isinstance(old, Undefined) and name in optional:
            continue        # (not carried: NOTE [what only a handler reads])
        no_structure(name, old, new, where, f"this {what} loop on a tensor")
        if isinstance(spec_of(old), tuple):
            continue        # the same structure of arrays (checked above): carried
        if isinstance(old, mx.sym.Symbol) != isinstance(new, mx.sym.Symbol) or \
                (not isinstance(old, mx.sym.Symbol) and old is not new and old != new):
            raise AutographError(
                f"{where}: variable {name!r}{read_by(where, name)} changes in this {what} "
                f"loop on a tensor but is "
                f"the Python value "
                f"{python_value(old if not isinstance(old, mx.sym.Symbol) else new)} "
                f"before or after a step; a graph's loop can only carry arrays (make it one, "
                f"e.g. F.zeros((1,)) for a counter)")


# (NOTE [autograph dict items])
OWN_DICT = " (an item of a dict this function makes converts when no other name, call or " \
    "container is given the dict: d = {...}; d[\"h\"] += r)"


def python_loop(value, where, why, what):
    """The condition or iterable of a loop left as Python (its body does what a graph
    cannot)."""
    if isinstance(value, mx.sym.Symbol):
        raise AutographError(f"{where}: this {what} loop is on a tensor, but {why}, which a "
                             f"graph's loop cannot express yet" + (
                                 "; set a flag array where it breaks and run the else clause's "
                                 "statements under an if on it after the loop"
                                 if why.endswith("else clause") else
                                 OWN_DICT if why.endswith("attributes or items") else ""))
    return truth(value, where, what) if what == "while" else value


# Flags the conversion adds for break, continue and return (NOTE [autograph jumps]).
FLAGS = ("__agf_break_", "__agf_return_", "__agf_continue_")


def flags_as_arrays(values, names):
    """The flags among ``values`` that are Python bools as one-element arrays: a graph's
    branches and loops carry arrays."""
    return tuple((mx.sym.ones if value else mx.sym.zeros)((1,))
                 if name.startswith(FLAGS) and not is_tensor(value)
                 and not isinstance(value, Undefined) else value
                 for name, value in zip(names, values))


def running(*flags):
    """``not (flag_1 or flag_2 ...)``: a Python bool while every flag is one, else an array."""
    arrays = []
    for flag in flags:
        if isinstance(flag, mx.sym.Symbol):
            arrays.append(flag)
        elif truth(flag, "", "flag"):
            return False
    if not arrays:
        return True
    result = mx.sym.logical_not(arrays[0])
    for flag in arrays[1:]:
        result = result * mx.sym.logical_not(flag)
    return result


def running_and(flags, test):
    """A loop's condition once a break or return may end it: ``running(*flags) and test()``
    (the test is not evaluated once a flag is set)."""
    going = running(*flags)
    if going is False:
        return False
    value = test()
    if going is True:
        return value
    if isinstance(value, mx.sym.Symbol):
        return mx.sym.broadcast_logical_and(going, mx.sym.cast(value, "float32"))
    return going if truth(value, "", "while") else False


def unpacked_slice(items, index, where):
    """A converted ``items[a:b]`` unpacked by the call it is written in
    (``F.stack(*outs[1:])``): for a list a tensor loop collected, the rows the slice keeps,
    computed in the graph without reading how many items the input shapes give (which made
    the block's graph one for those shapes: export_onnx and save_artifact refused it);
    else :func:`collected_item`'s."""
    if type(items) is StepList and not items.parts and not isinstance(items.n_items, int) \
            and isinstance(index, slice) and all(isinstance(b, (int, type(None))) and
                                                 not isinstance(b, bool) for b in
                                                 (index.start, index.stop, index.step)):
        return items._sliced(index, where, unread=True)
    return collected_item(items, index, where)


def collected_item(items, index, where):
    """A converted ``items[index]`` where ``items`` names a list a loop collects (NOTE
    [autograph lists]): of the list, or, where the name was rebound to a tensor
    (``bps = F.stack(*bps)``), the tensor's indexing (a Symbol's own ``[int]`` selects an
    output, an IndexError: NOTE [autograph indexing])."""
    if is_tensor(items):
        return subscript(items, index, where)
    return item(items, index, where)
