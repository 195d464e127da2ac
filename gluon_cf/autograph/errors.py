"""What autograph's messages are made of: :class:`AutographError`, the locations of the user's
lines (``file:12: source``) and graph node names derived from them, and the closures that read
a variable (recorded by the conversion, named by the messages about that variable)."""
import numbers
import os
import re
import site
import sysconfig
from typing import Dict, Tuple


from .._names import name_manager
from ..errors import NAMED_AT


class AutographError(ValueError):
    """What ``@gluon_cf.autograph`` cannot convert or run; the message begins with the file,
    line and source line of the construct, and says what to do."""

    def __init__(self, message):
        super().__init__(one_colon(message))


class AmbiguousTruthError(AutographError):
    """The truth of an NDArray of more than one element (an ``if``, ``while``, ``and``/``or``,
    ``not``, a chained comparison on it): plain Python's ``bool`` raises ValueError on the
    same values, so the user's ``except ValueError:`` (or ``Exception``) catches it as it
    catches Python's (NOTE [a refusal the user's code catches])."""


class HashedSymbolError(AutographError, TypeError):
    """A tensor hashed while hybridizing (a set's item, a dict's key), which MXNet's Symbol
    cannot be: Python's TypeError on a Symbol, at the user's line, caught as it is."""


class CalledTensorError(AutographError, TypeError):
    """A tensor called as a function (``h = h(row)``) while hybridizing: eagerly Python's
    TypeError "'NDArray' object is not callable"; a Symbol is callable (MXNet composes a graph
    into it), which failed far from the call. At the user's line, caught as Python's is."""


class AutographWarning(UserWarning):
    """Converted code that runs, but not as it would eagerly: a ``print`` inside a tensor
    ``if`` or loop prints once, while tracing. The message begins with the file and line."""


def one_colon(message):
    """``file:12: while True:`` then ``: what`` would read ``while True:: what``."""
    return re.sub(r"^(.*?:\d+: .*?):: ", r"\1: ", message, count=1)


def python_value(value):
    """A Python value for a message: functions by what they are and where they were defined
    (their repr names converted code's __ag_ functions and an address), long reprs cut."""
    code = getattr(value, "__code__", None)
    if code is not None:
        what = "a lambda" if value.__name__ == "<lambda>" else f"the function {value.__name__!r}"
        return f"{what} (defined at {code.co_filename}:{code.co_firstlineno})"
    if type(value).__name__ == "Symbol":
        return "an array"           # (not MXNet's repr, which names an internal node)
    if isinstance(value, (tuple, list)) and any(type(v).__name__ == "Symbol" for v in value):
        if all(type(v).__name__ == "Symbol" for v in value):
            return f"a {type(value).__name__} of {len(value)} arrays"
        return f"a {type(value).__name__} ({', '.join(python_value(v) for v in value)})"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def region_at(where):
    """``file:12 (while x < 3:)`` from a location ``file:12: while x < 3:``."""
    match = re.match(r"(.*?:\d+): (.*)", where)
    return f"{match.group(1)} ({match.group(2)})" if match else where


def node_name(where, kind):
    """A graph node's name from its source line: ``model_line12_while`` for a while loop on
    line 12 of model.py (MXNet appends a number where the name repeats)."""
    match = re.match(r"(.*?):(\d+): ", where)
    if match is None:
        return kind
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(match.group(1)))[0])
    name = f"{stem}_line{match.group(2)}_{kind}"
    NAMED_AT[name] = where       # (MXNet's errors about it, gluon_cf.errors.index_error_of)
    return name


def op_name(where, kind):
    """A name for one MXNet operator converted code makes at ``where``: ``node_name`` and a
    count of the names made from it in this graph (``model_line12_index0``, ``..._index1``).
    MXNet keeps a name it is given as it is, and a gluon_cf body captures outer values by
    name: ``x[0]`` and ``x[1]`` on one line, both read in a loop, were 'two different outer
    values both named' one name (issue 24). The count is the trace's own (a block's name
    scope starts a new one), so a graph's names are the same on every trace."""
    hint = node_name(where, kind)
    counter = name_manager()._counter     # NameManager.get(None, hint)'s count
    count = counter.get(hint, 0)
    counter[hint] = count + 1
    return f"{hint}{count}"


# (where, variable) -> the closure that reads the variable: "the lambda at file:12", for the
# messages about that variable at that if or loop (filled by the conversion)
READERS: Dict[Tuple[str, str], str] = {}


def read_by(where, name):
    reader = READERS.get((where, name))
    return f" (read by {reader})" if reader else ""


def hashes_symbol(err):
    """Whether ``err`` is Python's ``TypeError: unhashable type: 'Symbol'``."""
    return isinstance(err, TypeError) and "unhashable type: 'Symbol'" in str(err)


def refuse_hashed_symbol(err, where, what):
    """Python's ``TypeError: unhashable type: 'Symbol'`` (naming no line of the user's) while
    ``what`` (``set() of tensors``) runs at ``where``: an AutographError there; another
    TypeError as it is."""
    if not hashes_symbol(err):
        raise err
    raise HashedSymbolError(
        f"{where}: {what} while hybridizing: it hashes them, and MXNet's Symbol has no hash "
        f"(an NDArray's is its identity). Keep the tensors in a list, or key them by a Python "
        f"value (a name, an index)") from None


# File name -> whether it is library code, which runs as it is (NOTE [autograph calls]).
_LIBRARY_FILES: Dict[str, bool] = {}
_GLUON_CF = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _library_roots() -> Tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots |= set(getattr(site, "getsitepackages", lambda: [])())
    roots.add(site.getusersitepackages())
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots) + \
        (os.path.join(_GLUON_CF, ""),)


def in_library_file(filename: str) -> bool:
    """Whether the code of the file ``filename`` is library code (Python's, installed packages',
    gluon_cf's own), not the user's."""
    known = _LIBRARY_FILES.get(filename)
    if known is None:
        path = os.path.realpath(filename)
        # (a notebook cell's "<ipython-input-...>" is user code; "<frozen ...>" the library)
        known = filename.startswith("<frozen") or path.startswith(_library_roots()) or \
            any(part in ("site-packages", "dist-packages") for part in path.split(os.sep))
        _LIBRARY_FILES[filename] = known
    return known


def list_operand(other, op, right=False):
    """Python's TypeError for a list and ``other`` (no list) under ``op``, for a collected
    list (whose own type name Python's message would show); NotImplemented where ``other``'s
    type may take a list by its own (reflected) operator, as an array's."""
    python = getattr(type(other), "python_type", None)
    if op == "*" and (isinstance(other, list) or python is not None):
        # (items * items: Python's words for a list, not "unsupported operand type(s)")
        raise TypeError(f"can't multiply sequence by non-int of type "
                        f"'{(python or type(other)).__name__}'")
    if not isinstance(other, (numbers.Number, str, bytes, type(None), tuple, dict, set)):
        return NotImplemented
    if op == "*":
        raise TypeError(f"can't multiply sequence by non-int of type '{type(other).__name__}'")
    if right:
        raise TypeError(f"unsupported operand type(s) for {op}: '{type(other).__name__}' and "
                        f"'list'")
    raise TypeError(f'can only concatenate list (not "{type(other).__name__}") to list')


def in_python_types(err, *operands):
    """``err`` (Python's TypeError of an operator) naming the type Python's own would: a
    list a tensor loop collected is a ``list`` (NOTE [a collected list's type]), not the
    class standing for it (``items - items``: unsupported ... 'list' and 'list')."""
    text = str(err)
    for value in operands:
        python = getattr(type(value), "python_type", None)
        if python is not None:
            text = text.replace(f"'{type(value).__name__}'", f"'{python.__name__}'")
            # (a Symbol's own: type <class 'gluon_cf....StepList'> not supported)
            text = text.replace(str(type(value)), str(python))
            # (round(items): type StepList doesn't define __round__ method)
            text = text.replace(f"type {type(value).__name__} ", f"type {python.__name__} ")
    return err if text == str(err) else TypeError(text)
