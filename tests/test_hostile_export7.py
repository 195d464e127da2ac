"""Issue 24, seventh round (export, users' recursion, files): the programs of
``hostile_programs12.py`` against plain Python recursion (eager, hybridized with gradients,
exported to onnxruntime), the artifact for what standard ONNX cannot hold, exports of loops
with masks, integer and float64/float16 models, and the command line on symbol files whose
gluon_cf specs were tampered with (exactly one line, exit 1, in a real process)."""
import json
import os
import re

import mxnet as mx
import numpy as np
import onnxruntime as ort
import pytest

import gluon_cf
from gluon_cf.export import export_onnx, load, save_artifact

import hostile_harness
import hostile_programs12 as programs
from test_export_cli import assert_same_as_a_real_process, cli_main_per_case
from test_export_onnx import build, check_export, dense, randn

FILES = [programs.__file__]
FLOAT16 = (programs.Float16Features,)     # exported: compared at float16's precision below
TREE_AXES = {0: [0], 1: [0], 2: [0], 3: [0]}


def _nd(arrays):
    return [mx.nd.array(a, dtype=a.dtype) for a in arrays]


def _hybridized(block_class):
    net = hostile_harness._make(block_class)
    net.hybridize()
    return net


def _outputs(value):
    return [o.asnumpy() for o in (value if isinstance(value, (list, tuple)) else [value])]


@pytest.mark.parametrize("block_class", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_recursive_program_equals_plain_python_or_is_refused_at_its_line(block_class):
    result = hostile_harness.classify(block_class, programs.PROGRAMS[block_class], FILES,
                                      export=block_class not in FLOAT16)
    bad = hostile_harness.not_equal_or_refused(result)
    assert not bad, bad


def test_keyword_call_of_a_recursive_function_binds_like_python():
    """``node(idx=...)`` was ``TypeError: RecursiveFunction.__call__() got an unexpected
    keyword argument 'idx'``; a keyword Python would not bind is Python's TypeError, at the
    user's line."""
    @gluon_cf.recursive
    def count(i, step):
        return gluon_cf.cond(i < 1, lambda: i * 0, lambda: count(step=step, i=i - step) + 1)
    assert count(mx.nd.array([3]), step=mx.nd.array([1])).asscalar() == 3
    with pytest.raises(TypeError) as refused:
        count(mx.nd.array([3]), size=mx.nd.array([1]))
    assert re.match(re.escape(__file__) + r":\d+: gluon_cf.recursive: 'count': ",
                    str(refused.value)), str(refused.value)


def test_keyword_only_parameters_and_a_function_returning_none_name_the_users_lines():
    """A function returning None (a forgotten ``return``) named the trace
    ('the value returned by node_discover ...') and no line, hybridized; eagerly cond's
    refusal named no line either."""
    class ReturnsNone(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, x, left, right, roots):
            @gluon_cf.recursive
            def node(idx):
                gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx),
                              lambda: node(F.take(left, idx)))
            return programs._foreach_roots(F, node, roots)

    for hybridize, said in ((False, "gluon_cf.cond: the value returned by a branch must be"),
                            (True, "gluon_cf.recursive: 'node' returned None, not an")):
        net = ReturnsNone()
        if hybridize:
            net.hybridize()
        with pytest.raises(TypeError) as refused:
            net(*_nd(programs.DEEPER))
        assert re.match(re.escape(__file__) + r":\d+: " + re.escape(said),
                        str(refused.value)), str(refused.value)

    @gluon_cf.recursive
    def scaled(i, *, scale):
        return gluon_cf.cond(i < 1, lambda: i, lambda: scaled(i - 1, scale=scale) * scale)
    with pytest.raises(TypeError, match="'scaled' takes 'scale' by keyword only; a recursive "
                       "function's arguments are positional") as refused:
        scaled(mx.nd.array([2]), scale=mx.nd.array([3]))
    assert str(refused.value).startswith(__file__ + ":"), str(refused.value)


def test_a_python_number_argument_is_refused_at_the_users_line_in_both_modes():
    """Was a TypeError naming no line (``must be an NDArray/Symbol ..., got int``)."""
    for hybridize in (False, True):
        net = hostile_harness._make(programs.PythonIntArgument)
        if hybridize:
            net.hybridize()
        with pytest.raises(ValueError, match=r"argument #1 of 'node' is of type int \(1\)") \
                as refused:
            net(*_nd(programs.TWO_TREES))
        assert str(refused.value).startswith(programs.__file__ + ":"), str(refused.value)


def test_no_base_case_names_the_functions_definition():
    """``F.where`` computes both sides: every path recurses. The refusal named no line."""
    net = _hybridized(programs.WhereInsteadOfCond)
    with pytest.raises(ValueError, match="'node' has no base case") as refused:
        net(*_nd(programs.TWO_TREES))
    line = [k for k, text in enumerate(open(programs.__file__), 1)
            if "@gluon_cf.recursive(max_depth=40)" in text][0]     # (the def's first line)
    assert str(refused.value).startswith("%s:%d: " % (programs.__file__, line)), \
        str(refused.value)


@pytest.mark.parametrize("block_class", [programs.BooleanMaskInLeaf, programs.VeryWideCsrNodes,
                                         programs.ForeachOverChildrenCallsTheFunction],
                         ids=lambda c: c.__name__)
def test_what_standard_onnx_refuses_runs_as_an_artifact(block_class, tmp_path):
    """A mask in a leaf, a loop reshaping per call, a foreach whose steps call the function:
    export_onnx refuses at the user's line, naming save_artifact; the artifact equals Gluon
    on every forest."""
    net = _hybridized(block_class)
    inputs = programs.PROGRAMS[block_class]
    axes = {k: [0] for k in range(len(inputs[0]))}
    with pytest.raises(NotImplementedError, match="save_artifact") as refused:
        export_onnx(net, _nd(inputs[0]), dynamic_axes=axes)
    assert str(refused.value).startswith(programs.__file__ + ":"), str(refused.value)
    path = str(tmp_path / "model.onnx")
    save_artifact(net, _nd(inputs[0]), path, dynamic_axes=axes)
    model = load(path)
    for arrays in inputs:
        want = _outputs(net(*_nd(arrays)))
        got = model(*arrays)
        assert [g.dtype for g in got] == [w.dtype for w in want]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_float64_index_arrays_lower_to_standard_onnx():
    """float64 features and index arrays: the lowering was refused ("its outputs (shapes
    [(1, 3)], dtypes [None]) are not one row per call of one dtype"): the function table
    answered no dtype to np.dtype objects. onnxruntime equals Gluon (the programs' test) and
    the model is standard ONNX."""
    net = _hybridized(programs.Float64Everything)
    model = export_onnx(net, _nd(programs.PROGRAMS[programs.Float64Everything][0]),
                        dynamic_axes=TREE_AXES)
    assert {o.domain for o in model.opset_import} == {""}
    assert model.graph.output[0].type.tensor_type.elem_type == 11      # DOUBLE


def test_float16_recursion_exports_within_float16_rounding():
    """onnxruntime rounds float16 arithmetic in another order than MXNet: a few units in
    the last place (measured: 2 at most, after four levels of three operations each)."""
    net = _hybridized(programs.Float16Features)
    inputs = programs.PROGRAMS[programs.Float16Features]
    model = export_onnx(net, _nd(inputs[0]), dynamic_axes=TREE_AXES)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for arrays in inputs:
        want, = _outputs(net(*_nd(arrays)))
        got, = session.run(None, dict(zip(names, arrays)))
        assert got.dtype == want.dtype == np.float16
        ulp = np.spacing(np.abs(want)).astype(np.float32)
        assert np.all(np.abs(got.astype(np.float32) - want) <= 4 * ulp)


def test_max_depth_bounds_agree_across_executors_and_exports(tmp_path):
    """A tree four nested calls deep: max_depth=4 runs everywhere (the program above); with
    max_depth=3 eager, hybridized, the standard ONNX model and the artifact all refuse it."""
    class MaxDepthThree(programs.MaxDepthIsExactlyTheDepth):
        def hybrid_forward(self, F, x, left, right, roots):
            @gluon_cf.recursive(max_depth=3)
            def node(idx):
                return gluon_cf.cond(F.take(left, idx) < 0, lambda: F.take(x, idx),
                                     lambda: node(F.take(left, idx)) * 2 +
                                     node(F.take(right, idx)))
            return programs._foreach_roots(F, node, roots)
    shallow, deep = programs.TWO_TREES, programs.DEEPER
    eager = hostile_harness._make(MaxDepthThree)
    with pytest.raises(gluon_cf.RecursionDepthError):
        eager(*_nd(deep))
    net = _hybridized(MaxDepthThree)
    with pytest.raises(gluon_cf.RecursionDepthError):
        net(*_nd(deep)).asnumpy()
    model = export_onnx(net, _nd(shallow), dynamic_axes=TREE_AXES)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    np.testing.assert_allclose(session.run(None, dict(zip(names, shallow)))[0],
                               net(*_nd(shallow)).asnumpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(Exception, match="max_depth_exceeded"):
        session.run(None, dict(zip(names, deep)))
    path = str(tmp_path / "tree.onnx")
    save_artifact(net, _nd(shallow), path, dynamic_axes=TREE_AXES)
    with pytest.raises(gluon_cf.RecursionDepthError):
        load(path)(*deep)


def _parameter_gradients(block_class, arrays, mode):
    net = hostile_harness._make(block_class)
    if mode == "hybrid":
        net.hybridize()
    inputs = _nd(arrays)
    with mx.autograd.record():
        if mode == "plain":
            params = {k: v.data() for k, v in net._reg_params.items()}
            out = block_class.plain_forward(net, mx.nd, *inputs, **params)
        else:
            out = net(*inputs)
        outs = out if isinstance(out, (list, tuple)) else [out]
        total = sum((o * (k + 1.5)).sum() for k, o in enumerate(outs))
    total.backward()
    return [p.grad().asnumpy() for _, p in sorted(net.collect_params().items())]


@pytest.mark.parametrize("block_class", [programs.LstmCellInsideRecursion,
                                         programs.ParametersOfThreeBlocks,
                                         programs.Float64Everything,
                                         programs.RecursionFeedsAnRnnForeach],
                         ids=lambda c: c.__name__)
def test_parameter_gradients_equal_plain_python_eager_and_hybridized(block_class):
    """The programs' test compares the inputs' gradients; these read several blocks'
    parameters inside the recursion: their gradients too."""
    for arrays in programs.PROGRAMS[block_class][:3]:      # (a lone leaf reads no parameter)
        want = _parameter_gradients(block_class, arrays, "plain")
        assert want and any(np.any(w) for w in want)
        for mode in ("eager", "hybrid"):
            got = _parameter_gradients(block_class, arrays, mode)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=mode)


# ---- exports of loops with masks, integer, float64 and float16 models ------------------------

def _masked_while(F, self, x, n):
    def body(i, s):
        row = F.reshape(F.take(x, i), (-1, 1))
        kept = F.contrib.boolean_mask(row, F.reshape(row > 0, (-1,)))
        return [], [i + 1, s + F.sum(kept) * 2]
    _, (_, s) = gluon_cf.while_loop(lambda i, s: i < n, body, [F.zeros((1,)), F.zeros((1,))],
                                    max_iterations=5)
    return s


def _masked_foreach(F, self, x):
    def step(v, s):
        kept = F.contrib.boolean_mask(v, F.sum(v, axis=1) > 0)
        return F.broadcast_add(F.sum(kept, axis=0, keepdims=True), s), s + 1
    return gluon_cf.foreach(step, x, F.zeros((1, 1)))


def _greedy(F, self, tok, n):
    def body(i, t):
        nxt = F.cast(F.argmax(self.d(self.emb(t)), axis=-1), "int32")
        return [nxt], [i + 1, nxt]
    outs, (_, t) = gluon_cf.while_loop(lambda i, t: i < n, body,
                                       [F.zeros((1,), dtype="int32"), tok], max_iterations=6)
    return outs, t


def _float64_while(F, self, x, n):
    _, (i, h) = gluon_cf.while_loop(lambda i, h: i < n,
                                    lambda i, h: ([], [i + 1, F.tanh(self.d(h))]),
                                    [F.zeros_like(n), x], max_iterations=10)
    return h, i


def _three_dtypes(F, self, x):
    h = self.d(x)
    return h, F.argmax(h, axis=1).astype("int32"), F.cast(h > 0, "float64")


def _size_changing_cond(F, self, x):
    grown = gluon_cf.cond(F.sum(x) > 0, lambda: F.concat(x, x, dim=0), lambda: x * 3)
    return grown, F.sum(grown, axis=0)


def _exact_length_while(F, self, x, n):
    outs, _ = gluon_cf.while_loop(lambda i: i < n, lambda i: ([F.take(x, i) * 2], [i + 1]),
                                  [F.zeros((1,))], max_iterations=6)
    return outs


def _int(*values):
    return np.array(values, np.int32)


def _f64(*shape, seed=0):
    return np.random.RandomState(seed).randn(*shape)


EXPORTS = {
    "boolean_mask in a while_loop body, keeping no row in some steps": (
        _masked_while, {}, None,
        [randn(3, 4), np.array([3.0], np.float32)],
        [[randn(5, 6, seed=1), np.array([5.0], np.float32)],
         [-np.abs(randn(2, 4)), np.array([2.0], np.float32)],
         [randn(2, 1), np.array([0.0], np.float32)]], {0: [0, 1]}),
    "boolean_mask in a foreach step, length and batch varying": (
        _masked_foreach, {}, None, [randn(3, 4, 2)],
        [[randn(1, 6, 2, seed=2)], [-np.abs(randn(4, 3, 2))], [randn(5, 1, 2, seed=3)]],
        {0: [0, 1]}),
    "int32 tokens decoded greedily for a run-time number of steps": (
        _greedy, {"emb": lambda: mx.gluon.nn.Embedding(5, 4), "d": dense(5, 4)}, None,
        [_int(1, 2), _int(3)], [[_int(0, 4, 3), _int(6)], [_int(2), _int(0)]], {0: [0]}),
    "float64 while_loop with a Dense, batch varying": (
        _float64_while, {"d": dense(3, 3)}, "float64", [_f64(2, 3), np.array([3.0])],
        [[_f64(5, 3, seed=1), np.array([0.0])], [_f64(1, 3, seed=2), np.array([10.0])]],
        {0: [0]}),
    "float32, int32 and float64 outputs of one model": (
        _three_dtypes, {"d": dense(4, 3)}, None, [randn(2, 3)], [[randn(6, 3, seed=4)]],
        {0: [0]}),
    "a cond whose branches differ in rows, then a reduction": (
        _size_changing_cond, {}, None, [randn(2, 3)],
        [[-np.abs(randn(4, 3))], [np.abs(randn(1, 3))]], {0: [0]}),
    "a while_loop of a run-time number of steps, outputs padded to max_iterations": (
        _exact_length_while, {}, None, [randn(6, 3), np.array([2.0], np.float32)],
        [[randn(6, 3, seed=5), np.array([6.0], np.float32)],
         [randn(6, 3, seed=6), np.array([0.0], np.float32)]], None),
}


@pytest.mark.parametrize("case", sorted(EXPORTS))
def test_exports_equal_gluon_on_other_lengths_batches_and_masks(case):
    fn, children, dtype, example, others, axes = EXPORTS[case]
    net = build(fn, **children)
    if dtype:
        net.cast(dtype)
    check_export(net, example, others, dynamic_axes=axes)


# ---- the command line on tampered symbol files ------------------------------------------------

def _tampered(doc):
    """``{case: symbol JSON}``: the recursion node (inside the foreach over roots) and the
    invoke nodes (inside its functions' conds) of ``doc`` with one field changed each."""
    def rewrite(graph, fn):
        for node in graph["nodes"]:
            attrs = node.get("attrs") or {}
            if "spec" in attrs:
                spec = json.loads(attrs["spec"])
                fn(attrs.get("op_type"), spec)
                for sub in spec["graphs"].values():
                    sub["json"] = json.dumps(rewrite(json.loads(sub["json"]), fn))
                attrs["spec"] = json.dumps(spec)
        return graph

    def case(kind, change):
        return json.dumps(rewrite(json.loads(json.dumps(doc)),
                                  lambda op, spec: change(spec) if op == kind else None))
    recursion, invoke = "_gluon_cf_recursion", "_gluon_cf_invoke"
    return {
        "entry names no function": case(recursion, lambda s: s.update(entry="nope@x")),
        "max_depth past a C long": case(recursion, lambda s: [
            g.update(max_depth=10 ** 30) for g in s["graphs"].values()]),
        "num_args more than the inputs": case(recursion, lambda s: s.update(num_args=99)),
        "an invoke of no function": case(invoke, lambda s: s.update(function="ghost@zz")),
        "an invoke of 7 outputs": case(invoke, lambda s: s.update(num_outputs=7)),
    }


MESSAGES = {
    "entry names no function": "field 'entry' names function 'nope@x', which field 'graphs' "
                               "does not hold",
    "max_depth past a C long": "field 'max_depth' must be from 1 to 2147483647, got 1" + "0" * 30,
    "num_args more than the inputs": "field 'num_args' is 99, more than the node's 4 inputs",
    "an invoke of no function": "it calls function 'ghost@zz', which its recursion node does "
                                "not define",
    "an invoke of 7 outputs": "it has 7 outputs, but the function",
}


def test_tampered_recursion_specs_are_one_line_each(tmp_path):
    """Were ``KeyError: 'nope@x'``, ``OverflowError: Python int too large to convert to C
    long``, "field 'inputs' must list slots below -94", a shape error blaming the base case,
    and a Custom op's empty refusal (a converted model for none)."""
    net = _hybridized(programs.ThreeFunctionCycleOfPairs)
    inputs = programs.PROGRAMS[programs.ThreeFunctionCycleOfPairs][0]
    net(*_nd(inputs))
    net.export(str(tmp_path / "tree"))
    params = tmp_path / "tree-0000.params"
    doc = json.loads((tmp_path / "tree-symbol.json").read_text())
    cases = {}
    for name, text in _tampered(doc).items():
        symbol = tmp_path / ("%s-symbol.json" % name.replace(" ", "_"))
        symbol.write_text(text)
        cases[name] = ["convert", symbol, params, "--input", "data0:n=7,3", "--input",
                       "data1:n=7", "--input", "data2:n=7", "--input", "data3:b=2", "-o",
                       tmp_path / ("%s.onnx" % name.replace(" ", "_"))]
    huge = list(cases["entry names no function"])
    huge[huge.index("data0:n=7,3")] = "data0:n=100000000000,3"
    huge[1] = tmp_path / "tree-symbol.json"
    ran = cli_main_per_case(dict(cases, huge=huge), tmp_path)
    status, _, stderr = ran["huge"]      # was: MXNet's "Exception: [_infer_shape_impl] Size of
    assert status == 2 and stderr == (   # tensor you are trying to allocate is larger than 2^31"
        "gluon-cf-export: error: --input 'data0:n=100000000000,3': an example of "
        "300,000,000,000 elements; at most 268,435,456 (2^28): give small example sizes (a "
        "named dim, n=45, may change size when the model runs)\n"), stderr
    for name, argv in cases.items():
        status, stdout, stderr = ran[name]
        lines = stderr.splitlines()
        assert status == 1 and len(lines) == 1, (name, status, stderr)
        assert lines[0].startswith("gluon-cf-export: error: %s: " % argv[1]), (name, stderr)
        assert MESSAGES[name] in lines[0], (name, stderr)
        assert not os.path.exists(argv[-1])
    assert_same_as_a_real_process(cases["an invoke of no function"],
                                  ran["an invoke of no function"])


def test_max_depth_past_a_c_long_is_refused_where_the_function_is_declared():
    """A symbol file may not declare max_depth past 2^31 - 1 (test above); the decorator
    refuses it too, so that a model's own export is never refused on loading."""
    with pytest.raises(ValueError, match=r"max_depth must be an int from 1 to 2147483647, "
                       r"got 2147483648") as refused:
        gluon_cf.recursive(max_depth=2 ** 31)(lambda i: i)
    assert str(refused.value).startswith(__file__ + ":"), str(refused.value)
    assert gluon_cf.recursive(max_depth=2 ** 31 - 1)(lambda i: i).max_depth == 2 ** 31 - 1
