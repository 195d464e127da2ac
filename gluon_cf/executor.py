"""The executors that run gluon_cf rules without Python recursion.

NOTE [trampoline]
    Every rule's ``forward`` is a generator. To run a subgraph it *yields* a generator for that
    work (``Graph.run``), and receives the outputs back when that work is done. :func:`run` keeps
    the chain of suspended generators on an explicit list, so a body nested 5,000 levels deep (a
    recursive function on a linear tree) costs 5,000 list entries, not 5,000 Python frames.
    Exceptions travel back up the chain with ``generator.throw``.

    Besides generators, a rule may yield two kinds of requests, which is what lets the batching
    executor (``recursion/batching.py``) reorder work: :class:`Parallel` (independent pieces of
    work; the result is the list of their results) and an invocation of a recursive function
    (an object with ``unbatched()``, see ``recursion/batching.py``). :func:`run` executes both in
    program order: Parallel pieces one after the other, invocations one at a time.
"""
MODES = ("batched", "unbatched")
_default_mode = ["batched"]
_ahead_of_time = [True]   # NOTE [ahead-of-time schedules] in recursion/schedule.py
_SCHEDULERS: dict = {}   # mode -> function running a node's forward generator (see run_node)


class Parallel:
    """A request to run independent generators; the answer is the list of their results."""

    __slots__ = ("works",)

    def __init__(self, works):
        self.works = list(works)

    def sequential(self):
        results = []
        for work in self.works:
            results.append((yield work))
        return results


def run(gen, step=None):
    """Drive the generator ``gen`` (and everything it yields) to completion; return its value.

    ``step()``, if given, is called before each resumption and may return an exception to throw
    into the running generator instead (the artifact runtime's budget, ``export/artifact.py``).
    """
    stack = [gen]
    value, error = None, None
    while True:
        if step is not None and error is None:
            error = step()
        top = stack[-1]
        try:
            if error is not None:
                request, error = top.throw(error), None
            else:
                request = top.send(value)
        except StopIteration as stop:
            stack.pop()
            if not stack:
                return stop.value
            value = stop.value
            continue
        except BaseException as exc:  # noqa: B902 - re-raised below or thrown into the caller
            stack.pop()
            if not stack:
                raise
            error = exc
            continue
        if isinstance(request, Parallel):
            request = request.sequential()
        elif hasattr(request, "unbatched"):
            request = request.unbatched()
        stack.append(request)
        value = None


def done(value):
    """A generator that yields nothing and returns ``value`` (for work that needs no suspension)."""
    return value
    yield  # pragma: no cover - makes this a generator


def set_executor(mode: str, ahead_of_time: bool = True) -> None:
    """Choose the executor of recursive functions for this process: 'batched' (default) or
    'unbatched' (one invocation at a time, the EuroSys'18 paper's executor).

    ``ahead_of_time`` (batched only): run recursion whose control flow depends only on integer
    inputs on a schedule planned before any value is computed (whole levels of the batch's call
    trees in one call each, with no reads of predicates back to Python); False batches every
    level dynamically. ``gluon_cf.recursion.schedule.report()`` says which functions ran ahead
    of time and why the others did not.

    Raises ``ValueError`` for another mode:

    >>> import gluon_cf
    >>> gluon_cf.set_executor("unbatched")
    >>> gluon_cf.get_executor()
    'unbatched'
    >>> gluon_cf.set_executor("batched")     # the default
    """
    if mode not in MODES:
        raise ValueError("gluon_cf.set_executor: mode must be one of %s, got %r" % (MODES, mode))
    if not isinstance(ahead_of_time, bool):
        raise TypeError("gluon_cf.set_executor: ahead_of_time must be a bool, got %r"
                        % (ahead_of_time,))
    _default_mode[0] = mode
    _ahead_of_time[0] = ahead_of_time


def get_executor() -> str:
    """The executor of recursive functions in this process: 'batched' or 'unbatched' (see
    :func:`set_executor`).

    >>> import gluon_cf
    >>> gluon_cf.get_executor() in ("batched", "unbatched")
    True
    """
    return _default_mode[0]


def ahead_of_time() -> bool:
    """Whether the batching executor may run recursion on ahead-of-time schedules."""
    return _ahead_of_time[0]


def register_scheduler(mode, run_forward):
    """``run_forward(gen)`` runs top-level node forwards in ``mode`` (the batching scheduler,
    ``recursion/batching.py``, registers itself: it sits above this module)."""
    _SCHEDULERS[mode] = run_forward


def run_node(gen):
    """Run a top-level node's forward with the selected executor."""
    return _SCHEDULERS[get_executor()](gen)


class Frame:
    """Where a rule runs: passed to every ``Rule.forward`` as ``frame`` (or ``None`` at top level).

    ``recursion``: the enclosing recursion context (function table and environment), if any.
    ``rows``: inside a batched invocation, how many invocations the values hold along axis 0.
    ``flags``: per input of the rule (or per slot of the graph being run), whether that value is
    batched (one row per invocation) or shared by all rows (environment, constants).
    ``depth``: number of nested recursive invocations, for the depth bound.
    NOTE [batching] in ``recursion/batching.py``.
    """

    __slots__ = ("recursion", "rows", "flags", "depth")

    def __init__(self, recursion=None, rows=1, flags=None, depth=0):
        self.recursion, self.rows, self.flags, self.depth = recursion, rows, flags, depth

    def with_flags(self, flags):
        return Frame(self.recursion, self.rows, flags, self.depth)

    def batched(self, i):
        return self.rows > 1 and self.flags is not None and self.flags[i]


register_scheduler("unbatched", run)
