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


# ---- a Python iterator made outside a tensor loop or if, consumed inside ----------------

class NextOfGeneratorMadeBeforeTheLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0]) + 1
        gen = (h * w for w in (1.0, 2.0, 3.0))
        total = F.zeros_like(x[0])
        for r in x:
            h = h + r
            total = total + next(gen)
        return total


class SumOfIteratorMadeBeforeTheLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        terms = iter([x[0], x[1] * 2])
        h = F.zeros_like(x[0])
        i = F.zeros((1,))
        while F.sum(i) < 2:
            h = h + F.take(x, i)[0] + sum(terms, h * 0)
            i = i + 1
        return h


class NextInATensorIfThenAfter(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        it = iter([x[0], x[1]])
        if F.sum(x) > 0:
            h = next(it)
        else:
            h = x[2]
        return h + next(it)


class IteratorsMadeInTheStep(HybridBlock):
    """Made in the step (or passed inline) and read there: each step makes its own."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        ws = [1.0, 2.0]
        for r in x:
            it = iter((r, r * 2))
            if F.sum(r) > 1:
                break
            h = h + next(it) + next(it) + sum(r * w for w in ws) + max(ws)
            for w, b in zip(ws, (r, r * 3)):
                h = h + w * b
        return h


@pytest.mark.parametrize("block_class, line, name", [
    (NextOfGeneratorMadeBeforeTheLoop, "total = total + next(gen)", "gen"),
    (SumOfIteratorMadeBeforeTheLoop, "h = h + F.take(x, i)[0] + sum(terms, h * 0)", "terms"),
    (NextInATensorIfThenAfter, "h = next(it)", "it")], ids=lambda v: getattr(v, "__name__", None))
def test_an_iterator_from_outside_consumed_in_a_tensor_loop_or_if_is_refused(
        block_class, line, name):
    """``next(gen)``/``sum(it)`` inside a tensor loop's step or if's branch, the iterator made
    before it: Python consumes it step by step (or only where the condition holds), a graph
    traced once consumed it once: other values, silently (or a value where Python raises
    StopIteration). Now refused at the call's line."""
    inputs = [[hostile_harness.rand(3, 4)], [-np.abs(hostile_harness.rand(3, 4, seed=1))]]
    result = hostile_harness.classify(block_class, inputs, FILES, export=False)
    assert result["eager"][0] == "equal", result
    number = next(k for k, text in enumerate(open(__file__), 1) if text.strip() == line)
    kind, detail = result["hybrid"]
    assert kind == "refused" and detail.startswith(
        "AutographError: %s:%d: %s: this statement consumes the Python iterator %r" % (
            __file__, number, line, name)), result


def test_iterators_made_in_the_step_still_convert():
    inputs = [[hostile_harness.rand(3, 4)], [-np.abs(hostile_harness.rand(3, 4, seed=1))],
              [np.abs(hostile_harness.rand(3, 4, seed=1))]]
    result = hostile_harness.classify(IteratorsMadeInTheStep, inputs, FILES)
    assert {mode: kind for mode, (kind, _) in result.items()} == {
        "eager": "equal", "hybrid": "equal", "export": "equal"}, result


class ForOverIteratorMadeBeforeTheLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        ws = iter([1.0, 2.0])
        for r in x:
            for w in ws:
                h = h + w * r
        return h


class ZipOfIteratorMadeBeforeTheLoop(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        ws = iter([1.0, 2.0, 3.0])
        for r in x:
            for w, k in zip(ws, range(1)):
                h = h + w * r
        return h


class IteratorMadeInTheStepReadByAnInnerFor(HybridBlock):
    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x[0])
        for r in x:
            ws = iter([1.0, 2.0])
            for w, k in zip(ws, (r, r * 2)):
                h = h + w * k
            for w in ws:
                h = h + w
        return h


@pytest.mark.parametrize("block_class, line", [
    (ForOverIteratorMadeBeforeTheLoop, "for w in ws:"),
    (ZipOfIteratorMadeBeforeTheLoop, "for w, k in zip(ws, range(1)):")],
    ids=lambda v: getattr(v, "__name__", None))
def test_a_python_for_over_an_iterator_from_outside_is_refused(block_class, line):
    """A Python ``for`` (or zip) inside a tensor loop's step over an iterator made before
    the loop: Python's first step emptied it, the graph's every step read all its items."""
    inputs = [[hostile_harness.rand(3, 4)], [hostile_harness.rand(2, 4, seed=1)]]
    result = hostile_harness.classify(block_class, inputs, FILES, export=False)
    number = next(k for k, text in enumerate(open(__file__), 1) if text.strip() == line)
    kind, detail = result["hybrid"]
    assert kind == "refused" and detail.startswith(
        "AutographError: %s:%d: %s this statement consumes the Python iterator 'ws'" % (
            __file__, number, line)), result


def test_an_iterator_made_in_the_step_read_by_an_inner_for_converts():
    inputs = [[hostile_harness.rand(3, 4)], [hostile_harness.rand(2, 4, seed=1)]]
    result = hostile_harness.classify(IteratorMadeInTheStepReadByAnInnerFor, inputs, FILES)
    assert {mode: kind for mode, (kind, _) in result.items()} == {
        "eager": "equal", "hybrid": "equal", "export": "equal"}, result
