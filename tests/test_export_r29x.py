"""Round 29x (issue 24, items 4 to 6) on export: loops of no step whose step shapes follow no
input, past the shape plan's sizes, float16, and the exported symbol files' attributes.

* a while_loop that ran no step, whose step output's dim follows no input as ``p * d + q``
  (``dot`` of a kept row with itself, flattened: d * d) or whose input is wider than the shape
  plan's runs (x of width 1100), probed func for the zero rows' shape, and func's ``take`` of
  a row of none failed onnxruntime and ``load`` (a Gather error, no user line) where Gluon
  gives zero rows (in mode 'wrap': "Integer modulo by zero"): now the probe's gathers stay in
  range (NOTE [dims a loop's rows follow]); where Gluon runs the body for those shapes (a
  boolean_mask in it) and fails, the exported model fails in the same take, at its line;
* float16: onnxruntime's difference from MXNet measured as the README states it;
* a parameter first used in a body showed ``__gcf_src__`` in ``net.export()``'s symbol file;
* save_artifact's refusals said "export_onnx: ".
"""
import warnings

import numpy as np
import pytest

import mxnet as mx

import gluon_cf
from test_export_r28x import _assert_runs_equal, _runs


class _DotOfKeptRows(mx.gluon.HybridBlock):
    """Step output (1, d * d): the outer product of a kept row with itself, flattened."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m).reshape((1,))

        def body(i):
            r = F.take(kept, i, mode="raise").reshape((-1, 1))
            return F.dot(r, r, transpose_b=True).reshape((1, -1)), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < count, body, [F.zeros((1,))],
                                      max_iterations=3)
        return outs


class _PickOfKeptRows(mx.gluon.HybridBlock):
    """A GatherElements (``pick``) and a clipped take of a kept row: (1, d) and (1, 1)."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m).reshape((1,))

        def body(i):
            r = F.take(kept, i, mode="clip")
            picked = F.pick(r, F.zeros((1,)), axis=-1, keepdims=True)
            return [F.concat(r, r * r, dim=-1), picked], [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < count, body, [F.zeros((1,))],
                                      max_iterations=2)
        return F.concat(outs[0], F.broadcast_mul(outs[1], F.ones_like(outs[0])), dim=-1)


class _WrappedTakeAndPickOfKeptRows(mx.gluon.HybridBlock):
    """take and pick in mode 'wrap': an index modulo the rows' count, 0 with no row kept."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m).reshape((1,))

        def body(i):
            r = F.take(kept, i, mode="wrap").reshape((-1, 1))
            first = F.pick(F.take(kept, i, mode="wrap"), i, axis=-1, mode="wrap")
            return [F.dot(r, r, transpose_b=True).reshape((1, -1)), first], [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < count, body, [F.zeros((1,))],
                                      max_iterations=3)
        return F.concat(outs[0], outs[1].reshape((3, 1, 1)), dim=-1)


def _case(rng, n, d, flags):
    return [rng.uniform(-1, 1, (n, d)).astype(np.float32), np.array(flags, np.float32)]


@pytest.mark.parametrize("cls", [_DotOfKeptRows, _PickOfKeptRows,
                                 _WrappedTakeAndPickOfKeptRows])
def test_a_loop_of_no_step_whose_step_dims_follow_no_input_exports(cls, tmp_path):
    """Masks keeping 0, 1 and 2 rows at widths 2 to 6 (d * d columns, 4 to 36): each
    exported model equals Gluon; with no row kept both failed in the probe's Gather."""
    net = cls()
    net.hybridize()
    rng = np.random.RandomState(0)
    runs = _runs(net, _case(rng, 3, 4, [1, 0, 1]), {0: [0, 1], 1: [0]}, tmp_path)
    _assert_runs_equal(net, runs, [_case(rng, 3, 3, [0, 0, 0]), _case(rng, 2, 5, [0, 1]),
                                   _case(rng, 1, 2, [0]), _case(rng, 2, 6, [0, 0]),
                                   _case(rng, 4, 4, [1, 1, 0, 0])])


def test_a_loop_of_no_step_past_the_planned_widths_exports(tmp_path):
    """x of widths 1100 and 2000 (the shape plan's runs stop near 1031), no row kept: Gluon
    gives (4, 1, width) zeros; the exported models failed in the probe's Gather."""
    import hostile_programs28x as P
    net = P.WhileOverKeptRowsTakeRaise()
    net.hybridize()
    rng = np.random.RandomState(1)
    runs = _runs(net, _case(rng, 3, 4, [1, 0, 1]), {0: [0, 1], 1: [0]}, tmp_path)
    _assert_runs_equal(net, runs, [_case(rng, 2, 1100, [0, 0]), _case(rng, 1, 2000, [0]),
                                   _case(rng, 2, 1100, [0, 1])])


def test_a_loop_of_no_step_gluon_runs_fails_exported_at_the_users_line(tmp_path):
    """A body holding a boolean_mask (no shapes to infer): for a loop of no step hybridized
    gluon_cf runs the body's graph, whose take of a row of none raises BlockZeroSizeError at
    its line; the exported models fail in that take's Gather, named after the same line
    (onnxruntime's message had MXNet's node name only)."""
    import onnxruntime as ort
    from gluon_cf.export import ArtifactError
    from gluon_cf.hybrid import BlockZeroSizeError
    import hostile_programs29x as P
    net = P.WhileNoStepMaskInsideBody()
    net.hybridize()
    cases = P.PROGRAMS[P.WhileNoStepMaskInsideBody]
    runs = _runs(net, cases[0], {0: [0], 1: [0]}, tmp_path)
    x, m = cases[1]    # (no row kept)
    # (the loop's line since round 31x: func's graph is not run for no step, as MXNet's)
    line = r"hostile_programs29x\.py:%d" % (
        P.WhileNoStepMaskInsideBody.hybrid_forward.__code__.co_firstlineno + 7)
    with pytest.raises(BlockZeroSizeError, match="while_loop at .*" + line):
        net(mx.nd.array(x), mx.nd.array(m))
    for run, error in zip(runs, (ort.capi.onnxruntime_pybind11_state.InvalidArgument,
                                 ArtifactError)):
        with pytest.raises(error, match=r"loop of no step at .*" + line):
            run(x, m)
    _assert_runs_equal(net, runs, [cases[0], cases[2], cases[3]])


class _ParameterFirstUsedInABranch(mx.gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        self.fc = mx.gluon.nn.Dense(3, in_units=2)

    def hybrid_forward(self, F, x):
        return gluon_cf.cond(F.sum(x) > 0, lambda: self.fc(x) + 1,
                             lambda: F.broadcast_mul(F.sum(x, axis=-1, keepdims=True),
                                                     F.ones((1, 3))))


def test_the_exported_symbol_file_has_no_source_attribute_on_variables(tmp_path):
    """A parameter first used inside a cond's branch: its variable carried ``__gcf_src__``
    (the branch's line) in ``net.export``'s JSON, ``tojson``, ``attr_dict`` and
    ``list_attr``, which MXNet's export of the same program (F.contrib.cond) has not. Now
    none, and ``SymbolBlock.imports`` of the file gives the block's values."""
    import json
    net = _ParameterFirstUsedInABranch()
    net.initialize(mx.init.Uniform(1.0))
    net.hybridize()
    x = mx.nd.array([[1, 2]])
    want = net(x).asnumpy()
    net.export(str(tmp_path / "net"))
    text = (tmp_path / "net-symbol.json").read_text()
    variables = [n for n in json.loads(text)["nodes"] if n["op"] == "null"]
    # (the Dense's prefix counts the Dense blocks made before in this process: dense<k>_)
    dense = net.fc.prefix
    assert [n["name"] for n in variables] == ["data", dense + "weight", dense + "bias"]
    assert not any("__gcf_src__" in n.get("attrs", {}) for n in variables)
    sym = mx.sym.load(str(tmp_path / "net-symbol.json"))
    assert "__gcf_src__" not in sym.get_internals()[dense + "weight"].tojson()
    assert not any("__gcf_src__" in attrs for attrs in sym.attr_dict().values())
    assert "__gcf_src__" not in sym.get_internals()[dense + "bias"].list_attr()
    with warnings.catch_warnings():     # (MXNet's "Cannot decide type" of the data input)
        warnings.simplefilter("ignore")
        imported = mx.gluon.SymbolBlock.imports(str(tmp_path / "net-symbol.json"), ["data"],
                                                str(tmp_path / "net-0000.params"))
    for arrays in (x, mx.nd.array([[-1, -2]])):
        np.testing.assert_array_equal(imported(arrays).asnumpy(), net(arrays).asnumpy())
    np.testing.assert_array_equal(imported(x).asnumpy(), want)


class _Float16Steps(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        def body(r, states):
            h = states[0]
            h = F.tanh(F.broadcast_add(F.sum(h, axis=-1, keepdims=True) * 0.7,
                                       h * 0.2 + r * 1.3)) / 3 + F.exp(r) * 0.01
            return h, [h]
        outs, states = gluon_cf.foreach(body, x, [F.zeros((1, 8), dtype="float16")])
        return outs, states[0]


def test_float16_exports_differ_from_mxnet_by_the_documented_size(tmp_path):
    """The README's export section: onnxruntime computes float16 in float32 (MXNet rounds
    each op's result to float16): a 50-step foreach differs from MXNet by up to 5 float16
    ulps (2.8e-3 relative), a single step's ops by at most one."""
    net = _Float16Steps()
    net.hybridize()
    x = np.random.RandomState(0).uniform(-1, 1, (50, 1, 8)).astype(np.float16)
    runs = _runs(net, [x], {0: [0]}, tmp_path)
    for steps, most in ((1, 1), (50, 5)):
        arrays = [x[:steps]]
        want = net(mx.nd.array(arrays[0], dtype="float16"))
        for run in runs:
            for got, w in zip(run(*arrays), want):
                w = w.asnumpy()
                assert got.dtype == w.dtype == np.float16 and got.shape == w.shape
                ulps = np.abs(got.astype(np.float64) - w) / np.spacing(np.abs(w))
                assert ulps.max() <= most, (steps, ulps.max())


# ---- the round's programs -------------------------------------------------------------------

# A sample of hostile_programs29x's 58 programs (all of them, exported both ways: ~45 s; each
# equals Gluon or is refused at the user's line): collected lists (with earlier items, from
# two loops, two per step), loops over kept rows of masks keeping none, a loop after a cond
# of different-size branches, loops of no step, float64, recursion, MXNet's own cond.
EXPORTED = ["CollectAfterAnEarlierItem", "TwoLoopsAppendToOneList", "ListOfTwoCollectedPerStep",
            "CollectKeptRowsThenMean", "CondOfDifferentSizesThenLoop",
            "ForeachOverKeptRowsWithOutputs", "WhileOverKeptRowsGramDiagonal",
            "Float64WhileOverKeptRows", "ForeachOverKeptRowsStatesOnly"]
REFUSED = {"EnumerateWeightedRows": {"onnx": "the shape read here while hybridizing",
                                     "artifact": "the shape read here while hybridizing"},
           "TreeMaxChildGate": {"onnx": "cannot be lowered to standard ONNX loops"},
           # (save_artifact's refusals said "export_onnx: ", which the user had not called)
           "MxnetContribCond": {"onnx": r"py:\d+: export_onnx: node .*'_cond'.*gluon_cf\.cond",
                                "artifact": r"py:\d+: save_artifact: node .*'_cond'"}}


@pytest.mark.parametrize("name", EXPORTED + sorted(REFUSED))
def test_round_29x_exports_equal_gluon(name):
    import export_harness
    import hostile_programs29x as P
    cls = getattr(P, name)
    result = export_harness.export_outcomes(cls, P.PROGRAMS[cls], [P.__file__])
    export_harness.assert_equal_or_refused(result, REFUSED.get(name, {}))
