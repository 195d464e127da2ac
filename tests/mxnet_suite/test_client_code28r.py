"""A review of round 28's variables of one name (client_programs28r.py): each program runs with
MXNet's ops, then with gluon_cf's, and returns the same argument lists, attributes, values and
gradients; where MXNet's own cond is wrong (it drops one use's gradient of an argument a branch
reads twice) the program's oracle is the taken branch's graph without control flow.
"""
import re

import mxnet as mx
import pytest

from mxnet_suite import client_programs28r as programs
from mxnet_suite.test_client_code28 import check_program


@pytest.mark.substitutions("gluon_cf")
@pytest.mark.parametrize("name", sorted(programs.PROGRAMS))
def test_client_program(name):
    check_program(programs, name)


@pytest.mark.substitutions("gluon_cf")
def test_a_variable_named_as_a_computed_value_is_named_in_the_error():
    """A variable a branch creates, named as the output of an operator the other branch
    reads: refused (MXNet 1.9.1's cond cannot bind the graph across branches), as
    NameClashError at the user's line, saying which two values clash. Within one branch
    MXNet's cond reads the computed value for the variable, and so does gluon_cf's (round
    29r: tests/test_client_code_r29r.py)."""
    x, s = mx.sym.var("x"), mx.sym.var("s")
    computed = mx.sym.identity(s, name="fc")
    variable = (lambda: mx.sym.broadcast_mul(x, mx.sym.var("fc_output")))
    with pytest.raises(AssertionError) as info:
        mx.sym.contrib.cond(mx.sym.sum(x) > 0, lambda: mx.sym.broadcast_mul(x, computed),
                            variable)
    assert isinstance(info.value, ValueError)
    assert re.match(r"gluon_cf\.cond at %s:\d+: two different values are both named "
                    r"'fc_output' \(the output of an operator 'fc', a variable\); give them "
                    r"distinct names$" % re.escape(__file__), str(info.value)), info.value
