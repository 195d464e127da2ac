"""A hostile review of issue 24's seventh round's fixes (a list a loop collected joined with
other arrays, frozen BatchNorm in bodies, lambdas and generators in bodies, where's export):
what it found, each pinned on its own."""
import re

import mxnet as mx
import numpy as np
import pytest
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness

FILES = [__file__]


# ---- a user's function named like F's joining functions --------------------------------

def add_n(*values):
    """The user's own add_n, not MXNet's: twice the sum."""
    return (mx.sym if isinstance(values[0], mx.sym.Symbol) else mx.nd).add_n(*values) * 2


class UserAddNOfCollected(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        return add_n(*items)


class UserConcatMethodOfCollected(HybridBlock):
    def concat(self, *values, dim=0):
        return F_of(values[0]).concat(*values, dim=dim) + 100

    @autograph
    def hybrid_forward(self, F, x):
        items = []
        for r in x:
            items.append(r * 2)
        return self.concat(x[0], *items, dim=0)


def F_of(value):
    return mx.sym if isinstance(value, mx.sym.Symbol) else mx.nd


@pytest.mark.parametrize("block_class", [UserAddNOfCollected, UserConcatMethodOfCollected],
                         ids=lambda c: c.__name__)
def test_a_users_function_named_add_n_or_concat_is_not_computed_as_mxnets(block_class):
    """``add_n(*items)``, ``self.concat(x0, *items)`` of a list a tensor loop collected, the
    functions the user's own: hybridized, the items' rows were summed or concatenated as
    MXNet's add_n and concat would (the user's *2 and +100 lost, silently). Now refused at the
    call's line (eagerly they run, as Python)."""
    result = hostile_harness.classify(block_class, [[hostile_harness.rand(3, 4)]], FILES,
                                      export=False)
    assert result["eager"][0] == "equal", result
    kind, detail = result["hybrid"]
    assert kind == "refused", result
    assert re.match(r"AutographError: %s:\d+: return (add_n|self\.concat)\(" % re.escape(
        __file__), detail), detail
