"""Issue 24, the hostile user again: the blocks of ``hostile_programs.py`` (decoders, attention
loops, LSTM cells, helpers and methods, closures, comprehensions, casts, F.contrib control flow
mixed with converted code, masks that keep nothing) run as plain Python on NDArrays (the
oracle), converted eagerly, hybridized with gradients and exported to onnxruntime
(``hostile_harness.classify``): each is equal to plain Python (values and input gradients), or
a clear refusal whose message begins with the user's ``file:line`` (or names it as the node's
line), with no MXNet internals, TypeError or AttributeError from the plumbing, or double
colon. Before this work 13 of them ended in internal-looking errors (the table is in the
commit messages); the tests below pin each fix's message."""
import inspect
import re
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf
import hostile_harness
import hostile_programs as programs

HERE = programs.__file__


def _at(line, block_class=None):
    """The start of a message about ``line`` of hostile_programs.py (in ``block_class``, if
    given), with one colon after it."""
    return f"{HERE}:{_line_of(line, block_class)}: {line}" + \
        (" " if line.endswith(":") else ": ")


def _line_of(text, block_class=None):
    source = open(HERE).read().splitlines()
    start = inspect.getsourcelines(block_class)[1] - 1 if block_class else 0
    return next(i for i, line in enumerate(source) if i >= start and line.strip() == text) + 1


_classified = hostile_harness.cached_classifier(programs.PROGRAMS, [HERE])


@pytest.mark.parametrize("block_class", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_hostile_program_equals_plain_python_or_is_refused_at_its_line(block_class):
    result = _classified(block_class)
    bad = hostile_harness.not_equal_or_refused(result)
    assert not bad, bad


# Converted now (internal-looking errors before): each equal to plain Python, values and
# gradients, eager, hybridized and exported
@pytest.mark.parametrize("block_class", [
    programs.SplitSqueezeLoop, programs.ChainedComparison, programs.ShapePrintDebug,
    programs.GluonCFForeachWithAutographIf, programs.FormatTensorInError,
    # lists and tuples of arrays carried (NOTE [autograph carried structures])
    programs.LSTMCellLoop, programs.StatesUnpackTwo, programs.TupleStateInWhile,
    programs.LSTMCellLoopWithBreak, programs.NestedStructureInWhile,
    programs.StructureInIfAndLoop, programs.LSTMCellTensorForBreak,
    programs.StructureReadByClosure, programs.NestedLoopsTupleState,
    programs.ReturnStructureFromTensorFor, programs.DictStateInLoop,
    programs.NamedTupleStateInLoop, programs.DictStateInIf, programs.DictStateRangeBreak,
    programs.NamedTupleStateRangeBreak], ids=lambda c: c.__name__)
def test_converted_now(block_class):
    result = _classified(block_class)
    assert {mode: kind for mode, (kind, _) in result.items()} == \
        {"eager": "equal", "hybrid": "equal", "export": "equal"}, result


def _call(net, *arrays):
    inputs = [mx.nd.array(a) for a in arrays]
    for a in inputs:
        a.attach_grad()
    with autograd.record():
        out = net(*inputs)
    out.backward()
    return out


def _hybridized(block_class):
    net = block_class()
    net.initialize()
    net.hybridize()
    return net


@pytest.mark.parametrize("block_class, line, index", [
    (programs.ItemPastTheEnd, "return items[3]", 3),
    (programs.NegativeItemPastTheStart, "return items[-4]", -4)], ids=lambda v: getattr(v, "__name__", None))
def test_item_past_a_fixed_length_loops_items_is_an_index_error_at_the_line(block_class, line,
                                                                            index):
    """Once MXNet's slice_axis error ('Invalid end for end=4 as axis_size is 3'); on every
    call, and the block stays usable (plain Python: IndexError)."""
    net = _hybridized(block_class)
    header = f"{HERE}:{_line_of('for r in x:')}"
    for _ in range(2):
        with pytest.raises(IndexError, match=re.escape(
                f"{HERE}:{_line_of(line)}: {line}: list index {index} out of range: the "
                f"list holds 3 items this call (the loop at ")) as info:
            _call(net, np.ones((3, 4)))
        assert header[:-4] in str(info.value) and "::" not in str(info.value)


def test_ndarray_only_methods_called_on_a_symbol_are_refused_at_the_line():
    net = _hybridized(programs.AsscalarInIf)
    line = "if x.sum().asscalar() > 0:"
    with pytest.raises(gluon_cf.AutographError, match=re.escape(
            f"{_at(line)}.asscalar of a tensor while hybridizing")):
        _call(net, np.ones((3, 4)))
    np.testing.assert_allclose(programs.AsscalarInIf()(mx.nd.ones((2,))).asnumpy(), [2, 2])


class ContribCondInForeach(gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        def body(r, h):
            h = F.contrib.cond(F.sum(h) > 1, lambda: h * 0.5, lambda: h + r)
            return h, h
        return gluon_cf.foreach(body, x, F.zeros((4,)))[0]


class ContribWhileInCond(gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        def inner():
            return F.contrib.while_loop(lambda i: i < 2, lambda i: (i, i + 1), [F.zeros((1,))],
                                        max_iterations=3)[1][0] + x
        return gluon_cf.cond(x.sum() > 0, inner, lambda: x)


@pytest.mark.parametrize("block_class, line, op, public", [
    (ContribCondInForeach, "h = F.contrib.cond(F.sum(h) > 1, lambda: h * 0.5, lambda: h + r)",
     "foreach", "cond"),
    (ContribWhileInCond, "return F.contrib.while_loop(lambda i: i < 2, lambda i: (i, i + 1), "
     "[F.zeros((1,))],", "cond", "while_loop"),
    (programs.ContribCondInLoop, "h = F.contrib.cond(F.sum(h) > 1, lambda: h * 0.5, "
     "lambda: h + 0.5)", "while_loop", "cond")], ids=lambda v: getattr(v, "__name__", None))
def test_mxnet_control_flow_inside_a_gluon_cf_body_is_refused_at_its_line(block_class, line,
                                                                           op, public):
    """Once '_copyto inferring shapes failed', 'tuple index out of range' or a shape rule
    that 'declared ()': MXNet cannot infer its cond's and while_loop's shapes from a symbol.
    Its foreach, which it can, still runs inside ours (ContribForeachWithIfBody)."""
    net = _hybridized(block_class)
    source = open(__file__ if block_class.__module__ == __name__ else HERE).read()
    number = source[:source.index(line)].count("\n") + 1
    path = __file__ if block_class.__module__ == __name__ else HERE
    with pytest.raises(NotImplementedError, match=re.escape(
            f"{path}:{number}: gluon_cf.{op}: ") + ".*" + re.escape(
            f"calls MXNet's F.contrib.{public} (node ") + ".*" + re.escape(
            f"call gluon_cf.{public} instead")):
        _call(net, np.ones((3, 4)))


def test_a_raise_under_a_tensor_if_is_refused_hybridized_and_raises_only_when_taken_eagerly():
    """Hybridized, the raise once fired whatever the input (both branches are traced)."""
    line = "if F.sum(x) < -100:"
    net = programs.RaiseUnderTensorIf()
    np.testing.assert_allclose(_call(net, np.ones((2, 2))).asnumpy(), 2 * np.ones((2, 2)))
    with pytest.raises(ValueError, match="diverged"):
        _call(net, -100 * np.ones((2, 2)))
    net.hybridize()
    with pytest.raises(gluon_cf.AutographError, match=re.escape(
            f"{_at(line)}this if has a tensor condition and its branches "
            f"raise an exception (or assert)")):
        _call(net, np.ones((2, 2)))


def test_chained_comparisons_keep_pythons_short_circuit_on_python_values():
    calls = []

    def seen(v):
        calls.append(v)
        return v

    def chain(a):
        return seen(a) < seen(1) < seen(0), 0 < seen(a) <= seen(5) != seen(4)
    converted = gluon_cf.autograph(chain)
    for a in (-1, 0, 3, 7):
        calls.clear()
        want = chain(a)
        want_calls = list(calls)
        calls.clear()
        assert converted(a) == want and calls == want_calls


def test_python_values_in_messages_are_described_without_internal_names():
    net = _hybridized(programs.LambdasCollectedInTensorLoop)
    with pytest.raises(gluon_cf.AutographError) as info:
        _call(net, np.ones((3, 4)))
    message = str(info.value)
    assert "appends the Python value a lambda (defined at " in message, message
    assert "__ag" not in message and " at 0x" not in message, message


@pytest.mark.parametrize("block_class, line", [
    (programs.NDArrayConstantTopLevel, "return x + mx.nd.ones((4,))"),
    (programs.NDArrayConstantInLoop, "h = h + r * mx.nd.ones((4,))"),
    (programs.NDArrayConstantAugmented, "h -= mx.nd.ones((4,)) * 0.1")], ids=lambda v: getattr(v, "__name__", None))
def test_an_ndarray_in_a_graph_is_refused_at_the_line(block_class, line):
    """Once MXNet's 'TypeError: type NDArray not supported', naming no line."""
    with pytest.raises(gluon_cf.AutographError, match=re.escape(
            f"{HERE}:{_line_of(line)}: {line}: this computes with an NDArray (mx.nd...) and a "
            f"tensor of the graph while hybridizing")):
        _call(_hybridized(block_class), np.ones((3, 4)))


def test_imports_names_a_parameter_of_the_wrong_shape(tmp_path):
    """Once MXNet's 'Error in operator dense0_fwd: Unexpected shape for bias [3,7]' at the
    first call."""
    mx.random.seed(0)
    net = _hybridized(programs.GreedyDecoder)
    x = mx.nd.array(np.ones((2, 4)))
    want = net(x).asnumpy()
    net.export(str(tmp_path / "net"))
    symbol_file, param_file = tmp_path / "net-symbol.json", tmp_path / "net-0000.params"
    loaded = gluon.SymbolBlock.imports(str(symbol_file), ["data"], str(param_file))
    np.testing.assert_allclose(loaded(x).asnumpy(), want, rtol=1e-6)
    params = mx.nd.load(str(param_file))
    name = next(k for k in sorted(params) if k.endswith("bias"))
    params[name] = mx.nd.ones((3, 7))
    bad = tmp_path / "bad-0000.params"
    mx.nd.save(str(bad), params)
    with pytest.raises(ValueError, match=re.escape(
            f"{bad}: parameter {name.split(':', 1)[1]!r} has shape (3, 7), but the graph of "
            f"{symbol_file} needs (")):
        gluon.SymbolBlock.imports(str(symbol_file), ["data"], str(bad))


@pytest.mark.parametrize("block_class, line", [
    (programs.TensorIndexPastTheEnd, "return x[5] * 2"),
    (programs.TensorIndexPastTheEndInLoop, "h = h + r * r[7]")],
    ids=lambda v: getattr(v, "__name__", None))
def test_an_int_index_past_a_tensors_axis_is_an_index_error_at_the_line(block_class, line):
    """Eagerly Python's IndexError; hybridized once MXNet's 'cannot select an axis to squeeze
    out which has size=0', naming only the node. On every call."""
    with pytest.raises(IndexError):
        _call(block_class(), np.ones((3, 4)))
    net = _hybridized(block_class)
    for _ in range(2):
        with pytest.raises(IndexError, match=re.escape(
                f"{_at(line)}index out of range: an int in this index is past the size of its "
                f"axis of the tensor")):
            _call(net, np.ones((3, 4)))


def test_an_empty_slice_of_a_tensor_is_refused_at_the_line():
    """MXNet 1.x graphs cannot hold a zero-size axis ('shape_num_unknown_nodes' before)."""
    line = "return x[2:2].sum() + x.sum()"
    with pytest.raises(gluon_cf.AutographError, match=re.escape(
            f"{_at(line)}this slice of a tensor (2:2) keeps nothing")):
        _call(_hybridized(programs.EmptySlice), np.ones((3, 4)))


@pytest.mark.parametrize("block_class, line, message", [
    (programs.StructureGrowsInLoop, "for r in x:",
     "variable 'states' is a list of 1 (an array), then a list of 2 (an array, an array) in "
     "this for loop on a tensor; a graph carries the same arrays throughout"),
    (programs.ListThenTupleInIf, "if F.sum(x) > 0:",
     "variable 's' is a tuple of 2 (an array, an array), then a list of 2 (an array, an "
     "array) in this if on a tensor"),
    (programs.MixedListState, "for r in x:",
     "variable 'state' is a list holding arrays (and other values) that this for loop on a "
     "tensor changes"),
    (programs.DataclassStateInLoop, "for r in x:",
     "variable 'state' is a DecoderState holding arrays (and other values) that this for "
     "loop on a tensor changes")], ids=lambda v: getattr(v, "__name__", None))
def test_a_carried_structure_that_changes_is_refused_at_the_line(block_class, line, message):
    with pytest.raises(gluon_cf.AutographError, match=re.escape(_at(line, block_class) +
                                                                 message)):
        _call(_hybridized(block_class), np.ones((3, 4)))


@pytest.mark.parametrize("block_class, line, what", [
    (programs.AugAssignListInTensorIf, "if F.sum(x) > 0:", "if is on a tensor and changes the "
     "list 'outs' from outside it"),
    (programs.AugAssignDictInTensorIf, "if F.sum(x) > 0:", "if is on a tensor and changes the "
     "dict 'seen' from outside it"),
    (programs.AugAssignListInTensorFor, "for r in x:", "for loop is on a tensor and changes the "
     "list 'outs' from outside it")], ids=lambda v: getattr(v, "__name__", None))
def test_augmented_assignment_of_an_outer_container_in_a_tensor_region_is_refused(
        block_class, line, what):
    """``outs += [x[1]]`` under a tensor if changed the list while tracing, once: hybridized
    the then branch's list whatever the condition (silently wrong; for a dict too), and in a
    tensor for a TypeError from Symbol.Group. Plain Python's value eagerly."""
    for arrays in programs.PROGRAMS[block_class]:
        plain = block_class.hybrid_forward.__wrapped__(block_class(), mx.nd,
                                                       *[mx.nd.array(a) for a in arrays])
        np.testing.assert_allclose(block_class()(*[mx.nd.array(a) for a in arrays]).asnumpy(),
                                   plain.asnumpy())
        with pytest.raises(gluon_cf.AutographError, match=re.escape(
                _at(line, block_class) + "this " + what)):
            _call(_hybridized(block_class), *arrays)


@pytest.mark.parametrize("block_class, line, words", [
    (programs.ContribForeachWithIfBody, "outs, states = F.contrib.foreach(body, x, [h])",
     "(MXNet's F.contrib.foreach: call gluon_cf.foreach instead, the same signature, which "
     "exports as ONNX Scan)")],
    ids=lambda v: getattr(v, "__name__", None))
@pytest.mark.parametrize("exporter", ["export_onnx", "save_artifact"])
def test_what_cannot_be_exported_is_refused_at_the_users_line(block_class, line, words,
                                                               exporter, tmp_path):
    """save_artifact once named no line of the user's (export_onnx did); MXNet's own
    F.contrib.foreach is refused saying to call gluon_cf's."""
    from gluon_cf import export
    net = _hybridized(block_class)
    arrays = [mx.nd.array(a) for a in programs.PROGRAMS[block_class][0]]
    net(*arrays)
    with pytest.raises(NotImplementedError) as info:
        if exporter == "export_onnx":
            export.export_onnx(net, arrays)
        else:
            export.save_artifact(net, arrays, tmp_path / "model.onnx")
    message = str(info.value)
    assert message.startswith(f"{HERE}:{_line_of(line, block_class)}: "), message
    assert words in message, message


@pytest.mark.parametrize("block_class", [
    programs.GreedyDecoder, programs.LSTMCellLoop, programs.MaskKeepsNothingInFor,
    programs.TupleStateInWhile, programs.ItemsReadInPythonLoop,
    # (x[::-1]: refused as mx2onnx's 'slice operator does not support negative steps yet'
    # before the second hostile round)
    programs.LoopOverTransposeAndSlices],
    ids=lambda c: c.__name__)
def test_save_artifact_equals_gluon(block_class, tmp_path):
    from gluon_cf import export
    net = _hybridized(block_class)
    first = [mx.nd.array(a, dtype=a.dtype) for a in programs.PROGRAMS[block_class][0]]
    net(*first)
    export.save_artifact(net, first, tmp_path / "model.onnx")
    artifact = export.load(tmp_path / "model.onnx")
    for arrays in programs.PROGRAMS[block_class]:
        if any(a.shape != b.shape for a, b in zip(arrays, first)):
            continue
        want = net(*[mx.nd.array(a, dtype=a.dtype) for a in arrays])
        want = want if isinstance(want, (list, tuple)) else [want]
        for w, g in zip(want, artifact(*arrays)):
            np.testing.assert_allclose(g, w.asnumpy(), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- carried structures, generated

_KINDS = {   # how a program reads a state's two items and makes a new state
    "list": ("s[0]", "s[1]", "[{a}, {b}]"),
    "tuple": ("s[0]", "s[1]", "({a}, {b})"),
    "dict": ('s["a"]', 's["b"]', '{{"a": {a}, "b": {b}}}'),
    "namedtuple": ("s.a", "s.b", "Pair({a}, {b})"),
    "nested": ("s[0][0]", "s[1]", "[({a},), {b}]"),
}


def _updates(kind, k):
    a, b, make = _KINDS[kind]
    return [f"s = {make.format(a=f'F.tanh({a} + r * {k})', b=f'{b} * 0.5 + {a}')}",
            f"s = {make.format(a=b, b=a)}",
            f"s = {make.format(a=f'{a} * {k} - {b}', b=b)}"]


def _program(draw_regions, kind):
    a, b, make = _KINDS[kind]
    lines = ["import collections", "import mxnet as mx, gluon_cf",
             "Pair = collections.namedtuple('Pair', ['a', 'b'])",
             "class Net(mx.gluon.HybridBlock):",
             "    @gluon_cf.autograph(max_iterations=4)",
             "    def hybrid_forward(self, F, x, y, seq):",
             f"        s = {make.format(a='x', b='y')}"]
    for header, body, extra in draw_regions:
        lines += ["        " + h for h in header]
        lines += ["            " + line for line in body + extra]
    lines.append(f"        return {a} + {b}")
    return "\n".join(lines) + "\n"


def test_generated_programs_carrying_structures_equal_plain_python(tmp_path_factory):
    """Random blocks whose state is a list, tuple, dict, named tuple or nested list of arrays
    reassigned in tensor fors, whiles, ifs and Python-range loops with a tensor break: the
    converted block, eager and hybridized, equals plain Python, values and gradients (NOTE
    [autograph carried structures]); before, each was refused or failed hybridized."""
    import importlib.util
    from hypothesis import HealthCheck, given, settings, strategies as st

    tmp_path = tmp_path_factory.mktemp("carried")
    counts = {"programs": 0, "compared": 0}

    regions = st.sampled_from([
        (["for r in seq:"], [], []),
        (["w = F.zeros((1,))", "while w < 2:"], ["w = w + 1", "r = seq[0]"], []),
        (["r = seq[1]", "if x.sum() > y.sum():"], [], []),
        (["for t in range(2):"], ["r = seq[t]"], ["if F.sum(r) > 0.1:", "    break"]),
    ])

    @settings(max_examples=40, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(sorted(_KINDS)), st.lists(
        st.tuples(regions, st.lists(st.integers(0, 2), min_size=1, max_size=2),
                  st.sampled_from([0.5, 1.5])), min_size=1, max_size=3),
        st.floats(-1, 1, width=32), st.floats(-1, 1, width=32))
    def check(kind, drawn, x0, y0):
        picked = [(header, body + [_updates(kind, k)[u] for u in updates], extra)
                  for (header, body, extra), updates, k in drawn]
        source = _program(picked, kind)
        path = tmp_path / f"carried_{counts['programs']}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        arrays = [np.array([x0, 0.3], np.float32), np.array([y0, -0.2], np.float32),
                  np.array([[0.5, -0.1], [-0.3, 0.2], [0.2, 0.4]], np.float32)]
        counts["programs"] += 1

        def run(net, plain):
            inputs = [mx.nd.array(a) for a in arrays]
            for a in inputs:
                a.attach_grad()
            with autograd.record():
                out = module.Net.hybrid_forward.__wrapped__(net, mx.nd, *inputs) if plain \
                    else net(*inputs)
            out.backward()
            return [out.asnumpy()] + [a.grad.asnumpy() for a in inputs]
        net = module.Net()
        want = run(net, True)
        for hybrid in (False, True):
            if hybrid:
                net.hybridize()
            for g, w in zip(run(net, False), want):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=source)
        counts["compared"] += 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check()
    print(counts)
    assert counts["compared"] == counts["programs"] >= 40
