"""Helpers in a module of their own, called by the converted blocks of test_autograph_calls.py:
user code in another module (NOTE [autograph calls])."""
import functools

import mxnet as mx

CALLS = [0]
SEEN = []


def reset():
    CALLS[0] = 0
    SEEN.clear()


def count_calls(h):
    CALLS[0] = CALLS[0] + 1
    return h * CALLS[0]


def remember(h):
    SEEN.append(h)
    return h * 2


def gate(h):
    """A tensor if in a helper: converted with the function that calls it."""
    if h.sum() > 0:
        h = h * 3
    else:
        h = h - 1
    return h


class Counter:
    """A plain Python object whose method changes its state."""

    def __init__(self):
        self.k = 0

    def step(self, h):
        self.k = self.k + 1
        return h * self.k

    def scale(self, h):
        return h * 2


def make_step():
    """A closure made by a factory that is not converted: converted when called."""
    total = [0]

    def step(h):
        total[0] = total[0] + 1
        return h + total[0]
    return step


def gate_by(h, c):
    """A tensor if, called through functools.partial."""
    if h.sum() > c:
        return h * 3
    return h - c


# A lambda of another module, with a conditional expression on a tensor: converted
scaled = lambda h: h * 3 if h.sum() > 0 else h - 1
# ... and one appending to a list of this module: refused inside a tensor if or loop
noted = lambda h: SEEN.append(h) or h * 2

# A function compiled by exec (no source to read): cannot be converted
exec("def generated(h):\n    return h * 2\n")


def traced(fn):
    """A decorator written by the user (functools.wraps sets __wrapped__): its wrapper is
    user code, converted, and converts the function it calls."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@traced
def traced_gate(h):
    if h.sum() > 0:
        h = h * 3
    else:
        h = h - 1
    return h


@traced
def traced_count(h):
    CALLS[0] = CALLS[0] + 2
    return h * CALLS[0]


@functools.singledispatch
def dispatched(h):
    """Wrapped by a library's decorator (functools.singledispatch): not converted."""
    return h * 2


class Scorer:
    """A callable object of a user class: its __call__ is converted when called."""

    def __init__(self):
        self.calls = 0

    def __call__(self, h):
        if h.sum() > 0:
            return h * 2
        return h + 1


class CountingScorer(Scorer):
    def __call__(self, h):
        self.calls = self.calls + 1
        return h * self.calls


def doubled_rows(x):
    """A generator (yield: not convertible): eager only."""
    for row in x:
        yield row * 2
