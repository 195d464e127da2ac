"""Helpers in a module of their own, called by the converted blocks of test_autograph_calls.py:
user code in another module (NOTE [autograph calls])."""
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
