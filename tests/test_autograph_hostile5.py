"""Issue 24, sixth round: the blocks of ``hostile_programs10.py`` run as plain Python on
NDArrays (the oracle), converted eagerly and hybridized with gradients
(``hostile_harness.classify``): each equals the oracle, or is a clear refusal at the user's
line. Then what this round changed: shapes read while hybridizing (a graph per input shape,
NOTE [graphs traced for input shapes]), closures made in a tensor for's body, dict
``update``/``pop``/``del``/``dict(...)``, and ``x op= v`` as plain Python runs it (NOTE
[autograph augmented assignment]), including outside autograd's recording."""
import inspect
import re

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd
from mxnet.gluon import HybridBlock

import gluon_cf
from gluon_cf import autograph

import hostile_harness
import hostile_programs10 as programs

FILES = [programs.__file__, __file__]


_classified = hostile_harness.cached_classifier(programs.PROGRAMS, FILES, export=False)


@pytest.mark.parametrize("block_class", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_hostile_program_equals_its_oracle_or_is_refused_at_its_line(block_class):
    bad = hostile_harness.not_equal_or_refused(_classified(block_class))
    assert not bad, bad


# What converts eagerly and hybridized (each refused hybridized before this round, or, for
# the in-place ones, run out of place where plain MXNet writes in place)
@pytest.mark.parametrize("block_class", [
    programs.RangeOfShapeThroughDense, programs.ShapeSplitsInHalves, programs.ReshapeByShape,
    programs.ShapeReadInsideTensorLoop, programs.LambdaAndDefReadTheRow,
    programs.CondLambdasReadTheRow, programs.DictUpdateEachStep,
    programs.DictUpdateWithDisplay, programs.DictPopTemporary, programs.DictMadeByDictCall,
    programs.DictDelThenSet, programs.FreshAugmentedInLoop, programs.EarlyReturnInTensorFor,
    programs.NestedRangeAndTensorLoops, programs.WhileElseNoBreak,
    programs.TryFinallyInTensorLoop, programs.BreakAfterPythonRange,
    programs.PythonIfOnShape, programs.LenOfTensorAsBound, programs.PythonWhileOverShape,
    programs.ReshapeByNumpyProduct, programs.LambdaInBodyReadsCarriedState,
    programs.ClosureInWhileBody, programs.ForOverTransposeAndSlice,
    programs.WhereKeepsStateInLoop, programs.EnumerateSkipOdd, programs.ZipWithIndexWeight,
    programs.SumOfGeneratorOverRows, programs.ListCompOfRowsStacked],
    ids=lambda c: c.__name__)
def test_converts_eager_and_hybridized(block_class):
    result = _classified(block_class)
    assert {mode: kind for mode, (kind, _) in result.items()} == \
        {"eager": "equal", "hybrid": "equal"}, result


def _line_of(text, block_class):
    start = inspect.getsourcelines(block_class)[1]
    return next(k for k, line in enumerate(open(programs.__file__), 1)
                if k >= start and line.strip().startswith(text))


@pytest.mark.parametrize("block_class,line,message", [
    (programs.AliasThenAugmented, "z += 1", "z += 1: on an NDArray this += changes the array "
     "in place, and 'z' may hold an array something else holds too (%s:{z = y}: z = y)"),
    (programs.AppendThenAugmented, "h += x[t]", "h += x[t]: on an NDArray this += changes "
     "the array in place, and 'h' may hold an array something else holds too "
     "(%s:{outs.append(h)}: outs.append(h))"),
    (programs.ChainedNamesAugmented, "h += x[0]", "h += x[0]: on an NDArray this += changes "
     "the array in place, and 'h' may hold an array something else holds too "
     "(%s:{h = h0 =}: h = h0 = F.zeros_like(x[0]))"),
    (programs.TupleStateUnpackedAugmented, "h += c", "h += c: on an NDArray this += changes "
     "the array in place, and 'h' may hold an array something else holds too "
     "(%s:{h, c = state}: h, c = state)"),
    (programs.HelperAugmentsItsArgument, "v += 1", "v += 1: on an NDArray this += changes "
     "the array in place, and 'v' is a parameter (the caller holds its array), which would "
     "see the change; a graph cannot change an array in place (its value would differ from "
     "plain Python's). Write it out of place, v = v + 1 (what else holds"),
    (programs.ClosuresKeptPastTheLoop, "for r in x:", "for r in x: this for loop is on a "
     "tensor and its item is read after the loop (or by a return inside it, such as return "
     "row, h, or by a closure, locals(), vars() or eval in the function)"),
    # a Symbol's += of an item or attribute was MXNet's NotImplementedForSymbol, no line
    (programs.ListItemAugmented, "outs[0] += x[1]", "outs[0] += x[1]: on an NDArray this += "
     "changes the array in place, and its container holds it, which would see the change"),
    (programs.AttributeAugmented, "self.total += x[1]", "self.total += x[1]: on an NDArray "
     "this += changes the array in place, and its container holds it"),
    (programs.DictUpdateWithAliasThenAugmented, 'state["h"] += x[1]', "state[\"h\"] += "
     "x[1]: on an NDArray this += changes the array in place, and 'state' may hold an array "
     "something else holds too (%s:{state.update(h=h)}: state.update(h=h))")],
    ids=lambda v: getattr(v, "__name__", None))
def test_refused_hybridized_at_the_users_line(block_class, line, message):
    result = _classified(block_class)
    assert result["eager"][0] == "equal", result
    assert result["hybrid"][0] == "refused", result
    where = programs.__file__
    message = re.sub(r"\{(.*?)\}", lambda m: str(_line_of(m.group(1), block_class)),
                     message.replace("%s", where))
    at = "%s:%d: " % (where, _line_of(line, block_class))
    assert result["hybrid"][1].split(": ", 1)[1].startswith(at + message[:200]), result


# ---- shapes read while hybridizing: a graph per input shape (NOTE [graphs traced for input
# shapes])

def _outputs_and_grads(net, x):
    x = mx.nd.array(x)
    x.attach_grad()
    with autograd.record():
        out = net(x)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        total = sum((o * (k + 1.5)).sum() for k, o in enumerate(outs))
    total.backward()
    return [o.asnumpy() for o in outs] + [x.grad.asnumpy()] + [
        p.grad().asnumpy() for p in net.collect_params().values() if p.grad_req != "null"]


@pytest.mark.parametrize("block_class", [programs.RangeOfShapeThroughDense,
                                         programs.ShapeSplitsInHalves],
                         ids=lambda c: c.__name__)
def test_a_call_history_of_two_shapes_equals_fresh_blocks(block_class):
    """Shapes (3, 4) and (5, 4) alternating on one hybridized block: each call equals that
    input on a fresh hybridized block and on plain Python, values and gradients. (One graph
    for all shapes gave the first shape's loop for the second: fails with the switch
    removed.)"""
    inputs = {3: hostile_harness.rand(3, 4), 5: hostile_harness.rand(5, 4, seed=1)}
    net = hostile_harness._make(block_class)
    net.hybridize()
    fresh = {}
    for n, x in inputs.items():
        block = hostile_harness._make(block_class)
        block.hybridize()
        fresh[n] = _outputs_and_grads(block, x)
        plain = hostile_harness._run(hostile_harness._make(block_class), [x], True)
        assert all(np.allclose(a, b, rtol=1e-5, atol=1e-6)
                   for a, b in zip(fresh[n], plain[:len(fresh[n])])), n
    for n in [3, 5, 5, 3, 5, 3, 3]:
        got = _outputs_and_grads(net, inputs[n])
        for want, value in zip(fresh[n], got):
            np.testing.assert_allclose(value, want, rtol=1e-6, atol=1e-7)
    assert len(net.__dict__["_gluon_cf_graphs"]) == 1     # the other shape's, kept


def test_export_of_a_graph_traced_for_its_input_shapes_is_refused_at_the_line(tmp_path):
    net = hostile_harness._make(programs.RangeOfShapeThroughDense)
    net.hybridize()
    net(mx.nd.array(hostile_harness.rand(3, 4)))
    line = _line_of("for i in range(y.shape[0]):", programs.RangeOfShapeThroughDense)
    with pytest.raises(ValueError, match=r"^%s:%d: for i in range\(y\.shape\[0\]\): the shape "
                       r"read here while hybridizing makes the block's graph one for the "
                       r"input shapes it was traced for \(\(3, 4\);" % (
                           re.escape(programs.__file__), line)):
        net.export(str(tmp_path / "net"))
    net.hybridize()             # (a new graph: the shapes are read again when it is traced)
    assert "_gluon_cf_traced_shapes" not in net.__dict__


# ---- x op= v as plain Python runs it, outside autograd's recording too

def _aliased_row_sum(F, x):
    outs = []
    h = x[0] * 0
    for r in x:
        h += r
        outs.append(h)
    return F.stack(*outs)


def _row_items_incremented(F, x):
    for r in x:
        r += 1
    return x * 1


def _alias_of_an_input_row(F, x):
    h = x[0]
    h += 1
    return x * 1


def _dict_holding_an_array(F, x):
    h = x[0] * 1
    d = {"h": h}
    for r in x:
        d["h"] += r
    return h


def _view_then_augmented(F, x):
    y = x * 1
    r = y[0]
    y += 1
    return r


def _alias_in_a_tensor_if(F, x):
    h = x[0] * 1
    g = h
    if F.sum(x) > 0:
        h += 1
    return g


@pytest.mark.parametrize("function", [
    _aliased_row_sum, _row_items_incremented, _alias_of_an_input_row, _dict_holding_an_array,
    _view_then_augmented, _alias_in_a_tensor_if], ids=lambda f: f.__name__)
def test_in_place_updates_equal_plain_python_eagerly_and_are_refused_hybridized(function):
    """Not recording, plain NDArray code writes in place: the other names, the list, the
    dict and the input itself see it. Converted code did it out of place (their old values,
    no error); now eagerly as plain Python, and hybridized an AutographError at the line."""
    x0 = hostile_harness.rand(3, 4)
    x_plain, x_converted = mx.nd.array(x0), mx.nd.array(x0)
    want = function(mx.nd, x_plain).asnumpy()
    got = autograph(function)(mx.nd, x_converted).asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(x_converted.asnumpy(), x_plain.asnumpy(), rtol=1e-6)

    class Block(HybridBlock):
        converted = staticmethod(autograph(function))

        def hybrid_forward(self, F, x):
            return self.converted(F, x)
    net = Block()
    net.hybridize()
    line = inspect.getsourcelines(function)[1] + next(
        k for k, text in enumerate(inspect.getsourcelines(function)[0]) if "+=" in text)
    with pytest.raises(gluon_cf.AutographError, match=r"^%s:%d: .* \+= .*: on an NDArray "
                       r"this \+= changes the array in place" % (re.escape(__file__), line)):
        net(mx.nd.array(x0))


def test_a_deleted_or_popped_missing_key_is_pythons_key_error():
    @autograph
    def delete(x):
        d = {"h": x}
        del d["c"]
        return d

    @autograph
    def pop(x):
        d = {"h": x}
        return d.pop("c")
    for function in (delete, pop):
        with pytest.raises(KeyError, match="'c'"):
            function(mx.nd.ones((2,)))
    assert "__ag__.without(d, 'c', False)" in gluon_cf.to_code(delete)


def _pop_read_twice(x):
    d = {"h": x * 0, "tmp": x}
    for _ in range(2):
        d["h"] = d["tmp"] + d.pop("tmp")     # the same item read before the pop
        d["tmp"] = x
    return d["h"], len(d)


def _pop_after_len(x):
    d = {"h": x * 0, "tmp": x}
    d["h"] = d["h"] + len(d) + d.pop("tmp")   # len(d) counts the item before the pop
    return d["h"], len(d)


def _pop_inside_update(x):
    d = {"h": x * 0, "tmp": x}
    d.update(h=d.pop("tmp"))                  # {**d, ...} would copy tmp before the pop
    return d["h"], len(d)


@pytest.mark.parametrize("function", [_pop_read_twice, _pop_after_len, _pop_inside_update],
                         ids=lambda f: f.__name__)
def test_a_pop_that_cannot_run_first_keeps_the_dict_as_written(function):
    """A pop is hoisted before its statement only where nothing else in the statement reads
    the dict; otherwise the dict's item assignments stay as written (a rebinding copying d
    before the pop kept the popped key)."""
    x = mx.nd.ones((2,))
    (want, want_len), (got, got_len) = function(x), autograph(function)(x)
    np.testing.assert_allclose(got.asnumpy(), want.asnumpy())
    assert got_len == want_len


def test_calls_from_threads_with_two_shapes_each_get_their_shapes_graph():
    """Six threads calling one block with inputs of three shapes: each result is the fresh
    block's (another thread's call could switch graphs between a call's switch and its run;
    the whole call now holds the block's lock)."""
    import threading
    block_class = programs.ShapeSplitsInHalves
    inputs = {n: hostile_harness.rand(n, 4, seed=n) for n in (3, 5, 6)}
    want = {}
    for n, x in inputs.items():
        fresh = hostile_harness._make(block_class)
        fresh.hybridize()
        want[n] = fresh(mx.nd.array(x)).asnumpy()
    net = hostile_harness._make(block_class)
    net.hybridize()
    wrong = []

    def calls(seed):
        order = np.random.RandomState(seed).choice([3, 5, 6], 30)
        for n in order:
            if not np.allclose(net(mx.nd.array(inputs[n])).asnumpy(), want[n]):
                wrong.append(n)
    threads = [threading.Thread(target=calls, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong


class _CellOutputAugmented(HybridBlock):
    """out, states = self.cell(...); out += 1: an LSTMCell returns its output again as
    states[0], so plain Python's += changes both (hybridized, out of place, states[0] kept
    the old value: silently 1 less)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.cell = mx.gluon.rnn.LSTMCell(4, input_size=3)

    @autograph
    def hybrid_forward(self, F, x):
        states = self.cell.begin_state(batch_size=2, func=F.zeros)
        out, states = self.cell(x, states)
        out += 1
        return out + states[0]


class _EmptyProjectionAugmented(HybridBlock):
    """y = self.proj(x); y += 1 with an empty HybridSequential: y is x, so plain Python's +=
    changes x too (hybridized, out of place: x kept its value, silently 1 less)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.proj = mx.gluon.nn.HybridSequential()

    @autograph
    def hybrid_forward(self, F, x):
        y = self.proj(x)
        y += 1
        return x + y


def _kept(v):
    return v


class _HelperReturnsItsArgument(HybridBlock):
    """g = _kept(h); g += x: g is h."""

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros_like(x)
        g = _kept(h)
        g += x
        return h * 2 + g


class _DictGetAugmented(HybridBlock):
    """v = d.get('a'); v += 1: the dict holds v's array."""

    @autograph
    def hybrid_forward(self, F, x):
        d = {'a': x * 1}
        v = d.get('a')
        v += 1
        return v + d['a']


class _SplitThenAugmented(HybridBlock):
    """a, b = F.split(x, ...): an operator's outputs are new arrays, a += converts."""

    @autograph
    def hybrid_forward(self, F, x):
        a, b = F.split(x, num_outputs=2, axis=0)
        a += 1
        return a * b


def test_augmented_on_what_a_call_returned_may_change_another_array():
    x = mx.nd.random.uniform(shape=(2, 3))
    net = _CellOutputAugmented()
    net.initialize()
    plain = inspect.unwrap(_CellOutputAugmented.hybrid_forward)(net, mx.nd, x)
    np.testing.assert_allclose(net(x).asnumpy(), plain.asnumpy(), rtol=1e-6)
    net.hybridize()
    start = inspect.getsourcelines(_CellOutputAugmented)[1]
    line = next(k for k, text in enumerate(open(__file__), 1)
                if k > start and text.strip() == "out += 1")
    with pytest.raises(gluon_cf.AutographError, match=r"^%s:%d: out \+= 1: .*'out' may hold an "
                       r"array something else holds too .*out, states = self.cell"
                       % (re.escape(__file__), line)):
        net(x)
    for block_class, text, target in [(_EmptyProjectionAugmented, "y += 1", "y = self.proj"),
                                      (_HelperReturnsItsArgument, "g += x", "g = _kept"),
                                      (_DictGetAugmented, "v += 1", "v = d.get")]:
        net = block_class()
        net.initialize()
        plain = inspect.unwrap(block_class.hybrid_forward)(net, mx.nd, x.copy())
        np.testing.assert_allclose(net(x.copy()).asnumpy(), plain.asnumpy(), rtol=1e-6)
        net.hybridize()
        start = inspect.getsourcelines(block_class)[1]
        line = next(k for k, t in enumerate(open(__file__), 1) if k > start and t.strip() == text)
        with pytest.raises(gluon_cf.AutographError, match=r"^%s:%d: %s: .*may hold an array "
                           r"something else holds too .*%s" % (
                               re.escape(__file__), line, re.escape(text), re.escape(target))):
            net(x.copy())
    split = _SplitThenAugmented()
    expected = split(x).asnumpy()
    split.hybridize()
    np.testing.assert_allclose(split(x).asnumpy(), expected, rtol=1e-6)
