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


# ---- returns of different structures --------------------------------------------------

class IfReturnsDifferentStructures(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        if F.sum(x) > 0:
            return x, x * 2
        else:
            return x


class LoopReturnsOtherStructureThanAfter(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            h = h + r
            if F.sum(h) > 0.5:
                return h, h
        return h


@pytest.mark.parametrize("block_class, line, message", [
    (IfReturnsDifferentStructures, "if F.sum(x) > 0:",
     "the then branch of this if returns (an array, an array) and the else branch an array;"),
    (LoopReturnsOtherStructureThanAfter, "return h, h",
     "this return is inside a loop that runs as a graph, and the function returns (an "
     "array, an array) here and an array after the loop;")], ids=["if", "loop"])
def test_returns_of_different_structures_are_refused_at_the_users_line(
        block_class, line, message):
    """A tensor if whose branches return different structures, or a return in a tensor loop
    with another structure than the return after the loop: gluon_cf.cond's ValueError named
    no line of the user's and spoke of then_func and else_func, which the user did not
    write. Python's results differ by input (both are run eagerly)."""
    inputs = [[hostile_harness.rand(3, 4)], [-np.abs(hostile_harness.rand(3, 4, seed=2))]]
    result = hostile_harness.classify(block_class, inputs, FILES, export=False)
    assert result["eager"][0] == "equal", result
    number = next(k for k, text in enumerate(open(__file__), 1) if text.strip() == line)
    kind, detail = result["hybrid"]
    header = line if line.endswith(":") else line + ":"
    assert kind == "refused" and detail.startswith("AutographError: %s:%d: %s %s" % (
        __file__, number, header, message)), result
