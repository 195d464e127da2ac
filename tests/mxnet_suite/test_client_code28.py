"""A third round of client code of MXNet's ``F.contrib`` control flow, switched to
gluon_cf (client_programs28.py, 28b.py, 28c.py; NOTE [other client code of F.contrib] in
test_client_code26.py): each program runs with MXNet's ops, then with gluon_cf's, and
returns the same values, shapes, dtypes and names, or raises an exception of the type
MXNet's raises. Where MXNet's own symbolic or hybridized ops fail or are wrong, a program's
oracle (``ORACLES``) computes MXNet's answer otherwise, with its eager ops or its graph
without control flow: its while_loop fails in backward when cond reads a value of the outer
graph, its foreach of no state fails in backward, it infers no shape through while_loop or
cond and no float64 through cond, refuses nested loop_vars and variables of one name
symbolically, cannot infer a cond inside foreach, its foreach computes the backward of an
executor's second forward from the data of its first, and its cond leaves an element of a
gradient unwritten when pred and a branch read one outer value.
"""
import re

import mxnet as mx
import numpy as np
import pytest

import gluon_cf

from mxnet_suite import client_programs28 as programs
from mxnet_suite import client_programs28b, client_programs28c  # noqa: F401 (PROGRAMS)
from mxnet_suite.test_client_code26 import TOL, mxnet_ops


def _plain(value):
    """What a program returned, as numpy arrays and plain Python values."""
    if isinstance(value, mx.nd.NDArray):
        return ("ndarray", value.shape, np.dtype(value.dtype), value.asnumpy())
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _assert_same(want, got, where):
    if isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray) and got.shape == want.shape, (where, want, got)
        assert got.dtype == want.dtype, (where, want.dtype, got.dtype)
        np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL, err_msg=where)
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want), (where, want, got)
        for k, (w, g) in enumerate(zip(want, got)):
            _assert_same(w, g, "%s[%d]" % (where, k))
    elif isinstance(want, dict):
        assert sorted(want) == sorted(got), (where, want, got)
        for k in want:
            _assert_same(want[k], got[k], "%s[%r]" % (where, k))
    elif isinstance(want, float):   # (a metric's score: as its arrays, not to the last bit)
        assert isinstance(got, float), (where, want, got)
        np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL, err_msg=where)
    else:
        assert got == want, (where, want, got)


def _outcome(fn):
    try:
        return _plain(fn()), None
    except Exception as err:   # (the oracle's exception, compared by type)
        return None, err


@pytest.mark.substitutions("gluon_cf")
@pytest.mark.parametrize("name", sorted(programs.PROGRAMS))
def test_client_program(name):
    check_program(programs, name)


def check_program(module, name):
    """Run program ``name`` of ``module`` with MXNet's ops (or its oracle), then with
    gluon_cf's, and compare what they return or the types of what they raise."""
    fn = module.PROGRAMS[name]
    with mxnet_ops(), mx.name.NameManager():
        want, want_error = _outcome(module.ORACLES.get(name, fn))
    with mx.name.NameManager():
        got, error = _outcome(fn)
    if want_error is not None:
        assert name.startswith("error_"), (name, want_error)
        assert isinstance(error, type(want_error)), (name, want_error, error)
        return
    assert error is None, (name, error)
    _assert_same(want, got, name)


@pytest.mark.substitutions("gluon_cf")
@pytest.mark.parametrize("role", ["body", "cond", "func"])
def test_symbol_given_for_a_loop_function(role):
    """A Symbol for foreach's body or while_loop's cond or func: MXNet 1.9.1 calls it,
    composing the loop's values into it, a TypeError, an MXNetError or a ValueError, or a graph
    that cannot be bound (a variable as cond); gluon_cf refused it as a TypeError only (client
    code catching MXNet's MXNetError missed it). Now an error of all three types, at the
    user's line, hybridized and eagerly (where MXNet's calling it is a TypeError)."""
    x = mx.sym.var("x")
    fn = x * 2
    calls = {"body": lambda: gluon_cf.foreach(fn, x, x),
             "cond": lambda: gluon_cf.while_loop(fn, lambda v: (v, v), [x], max_iterations=2),
             "func": lambda: gluon_cf.while_loop(lambda v: v < 1, fn, [x], max_iterations=2)}
    with pytest.raises(TypeError) as info:
        calls[role]()
    assert isinstance(info.value, ValueError) and isinstance(info.value, mx.MXNetError)
    op = "foreach" if role == "body" else "while_loop"
    assert re.match(r"gluon_cf\.%s at %s:\d+: %s must be callable, got Symbol: MXNet 1\.9\.1's "
                    % (op, re.escape(__file__), role), str(info.value)), info.value
    assert "pass a function of the loop's values" in str(info.value)
    with mxnet_ops(), pytest.raises(TypeError):   # eagerly MXNet's is a TypeError too
        mx.nd.contrib.foreach(fn, mx.nd.ones((2, 2)), mx.nd.ones((2,)))
    with pytest.raises(TypeError, match="body must be callable, got Symbol"):
        gluon_cf.foreach(fn, mx.nd.ones((2, 2)), mx.nd.ones((2,)))
