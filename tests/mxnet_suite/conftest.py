"""Runs the vendored suites of this directory against gluon_cf.

NOTE [MXNet's own control-flow suite]
    gluon_cf's promise is that code written for MXNet's ``F.contrib.foreach``, ``while_loop``
    and ``cond`` switches by import. Here that code is MXNet 1.9.1's own control-flow tests
    (``test_contrib_control_flow.py``) and gluonnlp 0.10.0's beam search test, vendored
    unchanged but for what their headers list. Each test runs with ``mx.nd.contrib.X`` and
    ``mx.sym.contrib.X`` (so also every ``F.contrib.X``) replaced, in up to three ways:
    ``gluon_cf`` replaces both, as client code switched by import runs; ``symbolic`` only
    the Symbol ops, so that MXNet's eager ops compute the tests' reference values; ``eager``
    only the NDArray ops, against MXNet's symbolic ones. ``@pytest.mark.substitutions(...)``
    narrows a test to some of them (gluonnlp's hybridized sampler fails on MXNet's own
    symbolic ops: gluon-nlp issue 1020). The replacement is undone after each test: the
    other test files use MXNet's ops as their oracle.
"""
import mxnet as mx
import pytest

import gluon_cf
from mxnet_suite.common import FULL_SIZE

OPS = ("foreach", "while_loop", "cond")
SUBSTITUTIONS = {"gluon_cf": (mx.nd.contrib, mx.sym.contrib), "symbolic": (mx.sym.contrib,),
                 "eager": (mx.nd.contrib,)}


def pytest_configure(config):
    config.addinivalue_line("markers", "substitutions(*names): the ways of replacing MXNet's "
                            "control-flow ops a test runs with (NOTE [MXNet's own control-flow "
                            "suite])")


# The longest test (10-20 s a way here) leaves out its "eager" way (gluon_cf's eager
# while_loop against MXNet's symbolic one) unless GLUON_CF_FULL_MXNET_SUITE=1: the other
# while_loop tests run that way
REDUCED = {"test_while_loop_for_foreach": ("gluon_cf", "symbolic")}


def pytest_generate_tests(metafunc):
    if "substitution" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("substitutions")
        names = marker.args if marker else sorted(SUBSTITUTIONS)
        if not FULL_SIZE:
            names = REDUCED.get(metafunc.function.__name__, names)
        metafunc.parametrize("substitution", names, indirect=True)


@pytest.fixture(autouse=True)
def substitution(request, monkeypatch):
    """MXNet's control-flow ops replaced by gluon_cf's (NOTE [MXNet's own control-flow
    suite])."""
    for module in SUBSTITUTIONS[request.param]:
        for op in OPS:
            monkeypatch.setattr(module, op, getattr(gluon_cf, op))
    return request.param
