"""Helpers of ``hostile_programs17.py`` that live in a module of their own (converted code
calls the user's functions in any module)."""
import functools

SCALE = 0.5


def decay(h, row, rate=SCALE):
    """A step written in another module, with a tensor ``if`` of its own."""
    if (h * row).sum() > 0:
        h = h * rate + row
    else:
        h = h - row * rate
    return h


def counted(fn):
    """A decorator of the user's (functools.wraps) that only forwards."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


def power(h, k):
    """Python recursion on a Python ``k``."""
    return h if k == 0 else power(h, k - 1) * h
