"""A review of round 28's variables of one name (client_programs28r.py): each program runs with
MXNet's ops, then with gluon_cf's, and returns the same argument lists, attributes, values and
gradients; where MXNet's own cond is wrong (it drops one use's gradient of an argument a branch
reads twice) the program's oracle is the taken branch's graph without control flow.
"""
import mxnet as mx
import pytest

from mxnet_suite import client_programs28r as programs
from mxnet_suite.test_client_code26 import mxnet_ops
from mxnet_suite.test_client_code28 import _assert_same, _outcome


@pytest.mark.substitutions("gluon_cf")
@pytest.mark.parametrize("name", sorted(programs.PROGRAMS))
def test_client_program(name):
    fn = programs.PROGRAMS[name]
    with mxnet_ops(), mx.name.NameManager():
        want, want_error = _outcome(programs.ORACLES.get(name, fn))
    assert want_error is None, (name, want_error)
    with mx.name.NameManager():
        got, error = _outcome(fn)
    assert error is None, (name, error)
    _assert_same(want, got, name)
