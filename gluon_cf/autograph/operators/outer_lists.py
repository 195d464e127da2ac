"""The check of a converted tensor ``if``'s or loop's condition or iterable that its region
changes no Python list, dict or set from outside it (NOTE [autograph side effects] in
``side_effects.py``), a list a tensor loop collected included."""
import mxnet as mx

from ..errors import AutographError
from .data_structures import StepList


def no_outer_lists(value, names, values, where, what, read=(), clauses=()):
    """A converted condition or iterable whose region mutates outside objects by method
    calls: on a Symbol, a list, dict or set among them is an error (a graph's branch or step
    cannot change a Python object). ``read``: the lists its step appends to and reads;
    ``clauses``: (name, "the finally at file:line") of those it appends to in a clause."""
    if isinstance(value, mx.sym.Symbol):
        for name, current in zip(names, values):
            if isinstance(current, list) and name in read:   # (outs.append(outs[-1] + r))
                raise AutographError(
                    f"{where}: this {what} is on a tensor and its step reads the list {name!r}"
                    f" it appends to; a graph's loop is one step traced once, which sees no "
                    f"item an earlier step appended. Carry what the step needs in a variable "
                    f"(h = h * 0.5 + row; {name}.append(h)); read the list after the loop")
            clause = dict(clauses).get(name)
            if isinstance(current, list) and clause is not None:
                raise AutographError(
                    f"{where}: this {what} is on a tensor and appends to the list {name!r} in "
                    f"{clause}; a graph's loop collects only appends that are statements of "
                    f"its step (Python runs one in a clause also on a step whose try raised, "
                    f"which a graph's step cannot record). Write the append as a statement of "
                    f"the step: after the try, and before an if that breaks (where the finally "
                    f"ran it on that step too)")
            # (a list a tensor loop collected too: its pop, insert, clear, reverse would
            # run once, while tracing, whatever the branch or however many the steps)
            kind = "list" if isinstance(current, StepList) else type(current).__name__
            if isinstance(current, (list, dict, set, StepList)) and \
                    what.startswith("code after"):
                raise AutographError(
                    f"{where}: this statement runs after a break, continue or return under a "
                    f"tensor if (whether it runs is known only when the graph runs) and changes "
                    f"the {kind} {name!r} from outside the loop; to collect "
                    f"rows, append once per step before the if that breaks (in a while loop) "
                    f"or after it in a for over a Python range (as the last statement of the "
                    f"step)")
            if isinstance(current, (list, dict, set, StepList)):
                raise AutographError(
                    f"{where}: this {what} is on a tensor and changes the {kind}"
                    f" {name!r} from outside it; a graph's {what.split()[0]} runs as one graph "
                    f"built once, so it cannot change a Python {kind} (in a "
                    f"loop, append once per step, as a statement of the loop's body, to "
                    f"collect rows: in a while loop before any break, in a for over a Python "
                    f"range before a break or last in the step after it, to a list the "
                    f"function makes and gives to no other name, object or call before the "
                    f"loop; in an if, assign an array in both branches)")
    return value
