"""What the user's ``try`` statements around converted code catch, known while a graph is
traced, so that a tensor's ``x[i]`` inside one raises the IndexError eager code raises where
the traced shapes prove it, and is refused where they cannot tell.

NOTE [an index error the user's try catches]
    Eagerly ``x[i]`` of an NDArray past its axis raises IndexError, and ported code uses it as
    control flow (``try: h = h + x[i] / except IndexError: break``). A Symbol's index raises
    nothing while tracing: its slice fails only when the graph runs (MXNet's shape inference,
    turned into the IndexError at the user's line, NOTE [autograph indexing]), after the
    handler's chance has passed, so the block failed hybridized where eager code went on.
    Converted code runs each ``try`` body that has ``except`` clauses inside
    ``__ag__.catching`` (and ``contextlib.suppress`` pushes what it suppresses), a stack of
    what the enclosing handlers catch, evaluated only when asked (in a generator, each run
    of the body's statements between yields, a yield's value computed inside and yielded
    outside: a generator suspended inside would leave its entry on the stack). A Symbol
    indexed with an int while a handler catching IndexError (``except IndexError``, ``LookupError``,
    ``Exception``, bare ``except``) encloses it reads the shape the graph is traced for
    (NOTE [graphs traced for input shapes] in ``gluon_cf/hybrid.py``: the graph is then one
    for those input shapes): an int past its axis raises IndexError there and then, as the
    NDArray does, so the handler runs as it does eagerly; in range it is the plain slice. A
    tensor ``for``'s row and the values it carries are known there too (``shape_hint``: the
    shapes of the loop's data past its first axis, where it has a row, and of the carried
    values before the loop; round 30ag: ``for r in x: try: r[5] / except IndexError:`` ran
    the graph, which failed, where eager code took the handler). A shape not known while
    tracing because it is another body's (a value a tensor ``while`` carries) leaves the
    slice as it is: in range it is right (review r28b: refused while tracing, such code ran
    eagerly and hybridized before and was refused), past the axis the graph's run raises
    the IndexError at the user's line (``gluon_cf.errors.index_error_of``) saying that the
    ``try`` around it is not taken hybridized. A shape known only as the
    graph runs (computed by ``boolean_mask``, or by a gluon_cf node) is refused at the
    user's line naming the ``try``: past its axis, the partitioned graph's error names no
    line. Such an IndexError leaving the body of a tensor ``for`` as it is traced (not from
    inside a tensor ``if`` or loop there, whose branch or steps the values choose) is what
    the eager loop's first step raises where the rows exist: where the shapes the graph is
    traced for give the loop a row, ``for_stmt`` runs that first step as Python on the first
    row, which raises it again, its variables and collected rows left as the eager step
    leaves them (NOTE [an exception leaving a loop]), so the user's handler runs as eagerly;
    a loop of no row, a ``while``, or rows the shapes do not give stay refused (NOTE [an
    exception leaving a loop]). The handlers' and the ``finally``'s reads are read after any
    statement of the ``try``'s body (``pyct/static_analysis/liveness.py``), so a loop there
    carries out what they read. Handlers catching other exceptions leave the index as it
    was, and so does a handler whose expression does more than read names (``except
    errors():``: Python calls it only when an exception reaches the clause, and
    ``catching`` reads what it catches when no exception did; review r28b).
"""
import json
import threading

from ... import registry
from ...errors import CAUGHT_AT
from ...hybrid_trace import static_shape
from ...operators import DYNAMIC_SHAPE_OPS
from ..errors import AutographError

_caught = threading.local()


def _stack():
    if not hasattr(_caught, "stack"):
        _caught.stack = []
    return _caught.stack


class catching:
    """``with __ag__.catching(what, types):`` around a converted ``try``'s body (``what``:
    "the try at file:line"): ``types()`` is the tuple of what its ``except`` clauses catch
    (None for a bare ``except``)."""

    __slots__ = ("_entry",)

    def __init__(self, where, types):
        self._entry = (where, types)

    def __enter__(self):
        _stack().append(self._entry)

    def __exit__(self, exctype, excinst, exctb):
        _stack().pop()
        return False


def _catches_index_error(types):
    for kind in types:
        if kind is None:
            return True
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if any(isinstance(k, type) and issubclass(IndexError, k) for k in kinds):
            return True
    return False


def catching_index_error():
    """The innermost enclosing ``try`` (or suppress) that catches IndexError, or None."""
    for where, types in reversed(_stack()):
        try:
            kinds = types()
        except Exception:   # noqa: BLE001 - (a name bound later: Python reads it only if
            continue        # an exception reaches the clause; the index is left as it was)
        if _catches_index_error(kinds):
            return where
    return None


def _shaped_as_it_runs(value):
    """Whether ``value``'s shape is known only as its graph runs: computed by an operator
    whose output shape depends on values, or by a gluon_cf node (whose run-time shapes are
    not those of a body's inputs)."""
    return any(n["op"] in DYNAMIC_SHAPE_OPS or registry.kind_of(n)
               for n in json.loads(value.tojson())["nodes"])


def checked_ints(value, leading, trailing, where):
    """Raise the NDArray's IndexError for an int of ``leading`` (axes from the front) or
    ``trailing`` (axes from the back) past its axis of the Symbol ``value`` when a handler
    catching IndexError encloses it (NOTE [an index error the user's try catches])."""
    ints = [(a, i) for a, i in enumerate(leading) if isinstance(i, int)] + \
        [(a - len(trailing), i) for a, i in enumerate(trailing) if isinstance(i, int)]
    if not ints or not _stack():
        return
    handler = catching_index_error()
    if handler is None:
        return
    shape = static_shape(value, where, hinted=True)
    if shape is None and _shaped_as_it_runs(value):
        raise AutographError(
            f"{where}: this indexes a tensor with an int inside {handler}, which catches "
            f"IndexError; while hybridizing the tensor's shape depends on the values it is "
            f"computed from (an operator such as boolean_mask before it), so an index past "
            f"its axis would fail only when the graph runs, where no handler catches it. "
            f"Check the length before reading instead of catching the IndexError")
    if shape is None:   # (a body's value: past the axis, the graph's run says why)
        CAUGHT_AT[where] = handler
        return
    if len(leading) + len(trailing) > len(shape):
        raise IndexError(f"too many indices ({len(leading) + len(trailing)}) for array "
                         f"with {len(shape)} dimensions")
    for axis, item in ints:
        size = shape[axis]
        if not -size <= item < size:
            err = IndexError(f"index {item} is out of bounds for axis "
                             f"{axis % len(shape)} with size {size}")
            setattr(err, _EVERY_STEP, True)
            raise err


# (marks the IndexError raised above: the shapes the graph is traced for raise it, so an
# eager step reaching that line raises it whatever the values)
_EVERY_STEP = "_gluon_cf_index_of_traced_shape"


def raised_by_traced_shapes(exc):
    """Whether ``exc`` is the IndexError :func:`checked_ints` raised: an int index past an
    axis of a shape the graph is traced for (NOTE [an index error the user's try catches])."""
    return getattr(exc, _EVERY_STEP, False)


def past_known_length(known_length, index):
    """A collected list's int ``index`` inside a ``try`` catching IndexError: Python's
    IndexError now, where the traced shapes give its length ``known_length()``, not the
    graph's check as it runs, which no handler catches (NOTE [an index error the user's try
    catches])."""
    if _stack() and catching_index_error() is not None:
        n = known_length()
        if n is not None and not -n <= index < n:
            raise IndexError("list index out of range")


def raised_pending(exc):
    """After a ``finally`` that did not jump: raise what its ``try`` raised, if anything
    (NOTE [a finally that jumps]). A call, not a ``raise`` statement: a jump's flag guarding
    it may be an array inside a tensor loop, and an ``if`` on it that raises is refused."""
    if exc is not None:
        raise exc
