"""A review of round 28's variables of one name (client_programs28r.py): each program runs with
MXNet's ops, then with gluon_cf's, and returns the same argument lists, attributes, values and
gradients; where MXNet's own cond is wrong (it drops one use's gradient of an argument a branch
reads twice) the program's oracle is the taken branch's graph without control flow.
"""
import mxnet as mx
import numpy as np
import pytest

from mxnet_suite import client_programs28r as programs
from mxnet_suite.test_client_code26 import mxnet_ops
from mxnet_suite.test_client_code28 import check_program


@pytest.mark.substitutions("gluon_cf")
@pytest.mark.parametrize("name", sorted(programs.PROGRAMS))
def test_client_program(name):
    check_program(programs, name)


@pytest.mark.substitutions("gluon_cf")
def test_a_variable_named_as_a_computed_value_reads_what_mxnet_s_cond_reads():
    """A variable one branch creates, named as the output of an operator the other branch
    reads: MXNet 1.9.1's cond runs it, each branch reading its own value (the variable an
    argument of its own); gluon_cf's cond does the same since round 30r (it was refused as
    NameClashError from round 28r, whose claim that MXNet's cond cannot bind it was wrong).
    Oracle: MXNet's own cond, both predicates."""
    def build():
        x, s = mx.sym.var("x"), mx.sym.var("s")
        computed = mx.sym.identity(s, name="fc")
        return mx.sym.contrib.cond(
            mx.sym.sum(x) > 0, lambda: mx.sym.broadcast_mul(x, computed),
            lambda: mx.sym.broadcast_mul(x, mx.sym.var("fc_output")))

    def run(out):
        values = []
        for x in ([1.0, 2.0], [-1.0, -2.0]):
            args = {"x": mx.nd.array(x), "s": mx.nd.array([3.0, 4.0]),
                    "fc_output": mx.nd.array([5.0, 6.0])}
            values.append(out.bind(mx.cpu(), args).forward()[0].asnumpy())
        return out.list_arguments(), values

    ours = run(build())
    with mxnet_ops():
        theirs = run(build())
    assert ours[0] == theirs[0] == ["x", "s", "fc_output"]
    for got, want in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    tol = dict(rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours[1][0], [3.0, 8.0], **tol)     # then: x * s
    np.testing.assert_allclose(ours[1][1], [-5.0, -12.0], **tol)  # else: x * fc_output