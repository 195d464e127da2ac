"""The trampoline that runs gluon_cf rules without Python recursion.

NOTE [trampoline]
    Every rule's ``forward`` is a generator. To run a subgraph it *yields* a generator for that
    work (``Graph.run``), and receives the outputs back when that work is done. :func:`run` keeps
    the chain of suspended generators on an explicit list, so a body nested 5,000 levels deep (a
    recursive function on a linear tree) costs 5,000 list entries, not 5,000 Python frames.
    Exceptions travel back up the chain with ``generator.throw``, so each level may add context
    or clean up in ``finally``.
"""


def run(gen):
    """Drive the generator ``gen`` (and everything it yields) to completion; return its value."""
    stack = [gen]
    value, error = None, None
    while True:
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
        stack.append(request)
        value = None


def done(value):
    """A generator that yields nothing and returns ``value`` (for work that needs no suspension)."""
    return value
    yield  # pragma: no cover - makes this a generator
