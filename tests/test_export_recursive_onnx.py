"""Recursive models as standard ONNX (NOTE [recursion as ONNX loops] in export/onnx_recursion/):
TreeLSTM, TreeRNN, RNTN, the top-down generator, the child-sum TreeLSTM and mutual recursion
export with export_onnx to the default domain only, and onnxruntime -
and, on small cases, onnx's own ReferenceEvaluator, a second runtime written independently - give
Gluon's outputs on single-node trees, a 5,001-node chain, balanced trees, SST-like forests,
shuffled node order and repeated roots. Models whose recursion the lowering cannot express are
refused with the function's name and the reason."""
import subprocess
import sys

import mxnet as mx
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from mxnet import nd
from onnx.reference import ReferenceEvaluator

import gluon_cf
from gluon_cf.data import batchify_forest, build_vocab, encode_tree, parse_tree, synthetic_treebank
from gluon_cf.export import export_onnx
from gluon_cf.models import RNTN, ChildSumTreeLSTM, TopDownTreeLSTM, TreeLSTM, TreeRNN

NODE_AXES = {0: [0], 1: [0], 2: [0], 3: [0]}
TOL = dict(rtol=1e-5, atol=1e-5)
MODELS = [TreeLSTM, TreeRNN, RNTN]


def chain(num_leaves):
    text = "(2 w0)"
    for k in range(1, num_leaves):
        text = "(2 %s (2 w%d))" % (text, k % 7)
    return parse_tree(text)


def balanced(depth, start=0):
    if depth == 0:
        return "(2 w%d)" % (start % 7)
    return "(3 %s %s)" % (balanced(depth - 1, start), balanced(depth - 1, start + 2 ** depth))


TREES = {
    "sst": list(synthetic_treebank(8, seed=2, max_length=14)),
    "single": [parse_tree("(1 w1)"), parse_tree("(4 w2)"), parse_tree("(0 w3)")],
    "balanced": [parse_tree(balanced(4)), parse_tree(balanced(2, 5))],
}
VOCAB = build_vocab(TREES["sst"] + [chain(8)])


def arrays(trees, roots=None, shuffle=None):
    """The model's inputs for ``trees``: node arrays of the forest, optionally with its nodes
    renumbered by a random permutation (seed ``shuffle``) and ``roots(forest roots)`` as the
    roots."""
    forest = batchify_forest([encode_tree(t, VOCAB) for t in trees])
    tokens, left, right = forest.tokens, forest.left, forest.right
    roots = forest.roots if roots is None else roots(forest.roots)
    if shuffle is not None:
        perm = np.random.RandomState(shuffle).permutation(len(tokens))   # old -> new
        moved = lambda idx: np.where(idx >= 0, perm[np.maximum(idx, 0)], -1)  # noqa: E731
        new_tokens, new_left, new_right = (np.empty_like(tokens) for _ in range(3))
        new_tokens[perm], new_left[perm], new_right[perm] = tokens, moved(left), moved(right)
        tokens, left, right, roots = new_tokens, new_left, new_right, perm[roots]
    return [a.astype(np.float32) for a in (tokens, left, right, roots)]


def make(model, seed=0):
    mx.random.seed(seed)
    net = model(len(VOCAB), embed_size=6, hidden_size=5, num_classes=3)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    return net


def gluon(net, inputs):
    return net(*[nd.array(x) for x in inputs]).asnumpy()


def ort_run(model, inputs):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, inputs)))[0]


def op_types(graph):
    found = set()
    for node in graph.node:
        found.add((node.domain, node.op_type))
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                found |= op_types(attr.g)
    return found


@pytest.fixture(scope="module", params=MODELS, ids=lambda m: m.__name__)
def exported(request):
    net = make(request.param)
    model = export_onnx(net, arrays(TREES["sst"][:3]), dynamic_axes=NODE_AXES)
    return net, model


def test_standard_onnx_only(exported):
    _, model = exported
    ops = op_types(model.graph)
    assert {domain for domain, _ in ops} == {""}
    assert ("", "Loop") in ops and ("", "Scan") not in ops   # steps as rows: one batch
    assert [o.domain for o in model.opset_import] == [""]


CASES = {
    "sst forest": lambda: arrays(TREES["sst"]),
    "sst, one tree": lambda: arrays(TREES["sst"][3:4]),
    "single-node trees": lambda: arrays(TREES["single"]),
    "balanced": lambda: arrays(TREES["balanced"]),
    "mixed": lambda: arrays(TREES["single"][:1] + TREES["balanced"] + TREES["sst"][:2]),
    "shuffled nodes": lambda: arrays(TREES["sst"], shuffle=3),
    "repeated roots": lambda: arrays(TREES["sst"][:3], roots=lambda r: r[[2, 0, 2, 2, 1]]),
    "subtrees as roots": lambda: arrays(TREES["sst"][:1], roots=lambda r: np.array([0, r[0]])),
}


@pytest.mark.parametrize("case", list(CASES))
def test_onnxruntime_equals_gluon(exported, case):
    net, model = exported
    inputs = CASES[case]()
    np.testing.assert_allclose(ort_run(model, inputs), gluon(net, inputs), **TOL)


@pytest.mark.parametrize("case", ["single-node trees", "sst, one tree", "repeated roots"])
def test_reference_evaluator_equals_gluon(exported, case):
    net, model = exported
    inputs = CASES[case]()
    evaluator = ReferenceEvaluator(model)
    names = [i.name for i in model.graph.input]
    got = evaluator.run(None, dict(zip(names, inputs)))[0]
    np.testing.assert_allclose(got, gluon(net, inputs), **TOL)


def test_chain_of_5001_nodes():
    net = make(TreeLSTM, seed=1)
    model = export_onnx(net, arrays(TREES["sst"][:2]), dynamic_axes=NODE_AXES)
    inputs = arrays([chain(2501)])
    np.testing.assert_allclose(ort_run(model, inputs), gluon(net, inputs), **TOL)


def run_without_gluon_cf(model, inputs, tmp_path):
    """The outputs of ``model`` on ``inputs`` from onnxruntime in a fresh process where
    importing gluon_cf or mxnet fails."""
    onnx.save(model, str(tmp_path / "model.onnx"))
    np.savez(tmp_path / "inputs.npz", *inputs)
    code = f"""
import sys
sys.modules["mxnet"] = sys.modules["gluon_cf"] = None     # import fails for both
import numpy as np, onnxruntime as ort
for name in ("mxnet", "gluon_cf"):
    try:
        __import__(name)
    except ImportError:
        pass
    else:
        raise SystemExit(name + " imported")
inputs = np.load({str(tmp_path / "inputs.npz")!r})
session = ort.InferenceSession({str(tmp_path / "model.onnx")!r},
                               providers=["CPUExecutionProvider"])
feed = {{i.name: inputs["arr_%d" % k] for k, i in enumerate(session.get_inputs())}}
np.savez({str(tmp_path / "out.npz")!r}, *session.run(None, feed))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = np.load(tmp_path / "out.npz")
    return [out["arr_%d" % k] for k in range(len(out.files))]


def test_runs_where_gluon_cf_and_mxnet_cannot_be_imported(exported, tmp_path):
    net, model = exported
    inputs = CASES["sst forest"]()
    (got,) = run_without_gluon_cf(model, inputs, tmp_path)
    np.testing.assert_allclose(got, gluon(net, inputs), **TOL)


class Bounded(TreeRNN):
    """TreeRNN whose recursion may nest at most 6 calls."""

    def encode(self, F, tokens, left, right, roots):
        @gluon_cf.recursive(max_depth=6)
        def node(idx):
            def leaf():
                return self.cell.leaf(self.embed(F.take(tokens, idx)))

            def internal():
                return self.cell.combine(node(F.take(left, idx)), node(F.take(right, idx)))
            return gluon_cf.cond(F.take(left, idx) < 0, leaf, internal)
        hs, _ = gluon_cf.foreach(lambda root, _: (node(root), []), roots, [])
        return F.reshape(hs, (-3, 0))


def test_deeper_than_max_depth_fails_the_run():
    check_depth_bound(make(Bounded), shallow=6, deep=8)   # 5 nested calls pass, 7 do not


def check_depth_bound(net, shallow, deep):
    """A chain of ``shallow`` leaves runs as in Gluon; one of ``deep`` leaves fails in both
    (Gluon raises RecursionDepthError, the exported model fails at its named guard)."""
    model = export_onnx(net, arrays([chain(3)]), dynamic_axes=NODE_AXES)
    inputs = arrays([chain(shallow)])
    np.testing.assert_allclose(ort_run(model, inputs), gluon(net, inputs), **TOL)
    inputs = arrays([chain(deep)])
    with pytest.raises(gluon_cf.RecursionDepthError):
        gluon(net, inputs)
    with pytest.raises(Exception, match="max_depth_exceeded"):
        ort_run(model, inputs)


def test_cyclic_tree_arrays_fail_without_hanging(tmp_path):
    """left/right pointing back at the node: the call tree doubles at every level; the run
    stops at MAX_INVOCATIONS calls with an error, in a subprocess with a timeout."""
    net = make(TreeRNN)
    model = export_onnx(net, arrays(TREES["sst"][:2]), dynamic_axes=NODE_AXES)
    onnx.save(model, str(tmp_path / "model.onnx"))
    code = f"""
import numpy as np, onnxruntime as ort
session = ort.InferenceSession({str(tmp_path / "model.onnx")!r},
                               providers=["CPUExecutionProvider"])
names = [i.name for i in session.get_inputs()]
tokens, left, right, roots = (np.array(a, np.float32) for a in ([1, 2], [-1, 1], [-1, 1], [1]))
try:
    session.run(None, dict(zip(names, (tokens, left, right, roots))))
except Exception as error:
    print("refused:", "max_depth_exceeded" in str(error))
else:
    print("ran")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "refused: True"


@pytest.mark.parametrize("rows", [1, 6, 9])
def test_top_down_generator_whose_tree_depends_on_hidden_states(rows, tmp_path):
    """TopDownTreeLSTM decides from each node's hidden state whether it expands: the levels are
    expanded as they are computed, arguments are values (h, c, depth)."""
    mx.random.seed(3)
    net = TopDownTreeLSTM(input_size=4, hidden_size=8, max_depth=4)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    model = export_onnx(net, [np.ones((2, 4), np.float32)], dynamic_axes={0: [0]})
    z = np.random.RandomState(rows).normal(0, 3, size=(rows, 4)).astype(np.float32)
    want = [o.asnumpy() for o in net(nd.array(z))]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: z})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **TOL)
    assert want[1].max() > 1                  # some trees grew
    reference = ReferenceEvaluator(model).run(None, {model.graph.input[0].name: z})
    for g, w in zip(reference, want):
        np.testing.assert_allclose(g, w, **TOL)
    if rows == 6:
        for g, w in zip(run_without_gluon_cf(model, [z], tmp_path), want):
            np.testing.assert_allclose(g, w, **TOL)


class EvenOdd(TreeRNN):
    """Mutual recursion: nodes at even depth combine with the cell, at odd depth with a Dense
    of their own; ``odd`` takes one more argument than ``even`` (a scale, the same for every
    call), and may be called at most ``odd_max_depth`` calls deep."""

    odd_max_depth = 20000

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        with self.name_scope():
            self.odd_combine = mx.gluon.nn.Dense(5, in_units=10, activation="sigmoid")

    def encode(self, F, tokens, left, right, roots):
        def leaf(idx):
            return self.cell.leaf(self.embed(F.take(tokens, idx)))

        @gluon_cf.recursive
        def even(idx):
            def internal():
                scale = F.ones((1, 1)) * 0.5
                return self.cell.combine(odd(F.take(left, idx), scale),
                                         odd(F.take(right, idx), scale))
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: leaf(idx), internal)

        @gluon_cf.recursive(max_depth=self.odd_max_depth)
        def odd(idx, scale):
            def internal():
                both = F.concat(even(F.take(left, idx)), even(F.take(right, idx)), dim=-1)
                return F.broadcast_mul(self.odd_combine(both), scale)
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: leaf(idx), internal)
        hs, _ = gluon_cf.foreach(lambda root, _: (even(root), []), roots, [])
        return F.reshape(hs, (-3, 0))


@pytest.mark.parametrize("case", ["sst forest", "single-node trees", "balanced",
                                  "shuffled nodes", "repeated roots"])
def test_mutual_recursion(case, tmp_path):
    net = make(EvenOdd)
    model = export_onnx(net, arrays(TREES["sst"][:2]), dynamic_axes=NODE_AXES)
    inputs = CASES[case]()
    np.testing.assert_allclose(ort_run(model, inputs), gluon(net, inputs), **TOL)
    if case in ("single-node trees", "repeated roots"):
        names = [i.name for i in model.graph.input]
        got = ReferenceEvaluator(model).run(None, dict(zip(names, inputs)))[0]
        np.testing.assert_allclose(got, gluon(net, inputs), **TOL)
    if case == "sst forest":
        (got,) = run_without_gluon_cf(model, inputs, tmp_path)
        np.testing.assert_allclose(got, gluon(net, inputs), **TOL)


class ShallowOdd(EvenOdd):
    odd_max_depth = 9


def test_each_function_keeps_its_own_max_depth():
    """odd may be called 9 calls deep: a chain whose odd calls go deeper fails, like Gluon."""
    check_depth_bound(make(ShallowOdd), shallow=8, deep=13)


class MixesRows(TreeRNN):
    """Adds the mean over all calls of a level to each internal node: not row by row."""

    def encode(self, F, tokens, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            def leaf():
                return self.cell.leaf(self.embed(F.take(tokens, idx)))

            def internal():
                h = self.cell.combine(node(F.take(left, idx)), node(F.take(right, idx)))
                return F.broadcast_add(h, F.mean(h, axis=0, keepdims=True))
            return gluon_cf.cond(F.take(left, idx) < 0, leaf, internal)
        hs, _ = gluon_cf.foreach(lambda root, _: (node(root), []), roots, [])
        return F.reshape(hs, (-3, 0))


NARY = [parse_tree("(2 (1 a) (3 b) (2 c))"), parse_tree("(0 lone)"),
        parse_tree("(3 (4 (1 d) (2 e) (3 f) (1 g)) (2 e))"), parse_tree("(1 (2 a) (0 b))")]
NARY_VOCAB = build_vocab(NARY)


def nary_arrays(trees):
    forest = batchify_forest([encode_tree(t, NARY_VOCAB, binary=False) for t in trees])
    return [getattr(forest, n).astype(np.float32)
            for n in ("tokens", "child_ptr", "child_idx", "roots")]


def child_sum(max_children=4, seed=0):
    mx.random.seed(seed)
    net = ChildSumTreeLSTM(len(NARY_VOCAB), embed_size=4, hidden_size=3,
                           max_children=max_children)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    return net


@pytest.mark.parametrize("max_children", [4, 64])
def test_child_sum_loops_around_its_calls(max_children, tmp_path):
    """ChildSumTreeLSTM sums a node's children with a while_loop around its recursive calls:
    the expansion runs the loop's skeleton for every row (which children each row calls),
    the values run the loop over the gathered children's rows."""
    net = child_sum(max_children)
    model = export_onnx(net, nary_arrays(NARY[:2]), dynamic_axes=NODE_AXES)
    for trees in (NARY, NARY[2:3], NARY[1:], [NARY[1], NARY[0], NARY[1], NARY[3]]):
        inputs = nary_arrays(trees)
        np.testing.assert_allclose(ort_run(model, inputs), gluon(net, inputs), **TOL)
    if max_children == 4:
        inputs = nary_arrays(NARY)
        names = [i.name for i in model.graph.input]
        got = ReferenceEvaluator(model).run(None, dict(zip(names, inputs)))[0]
        np.testing.assert_allclose(got, gluon(net, inputs), **TOL)
        (got,) = run_without_gluon_cf(model, inputs, tmp_path)
        np.testing.assert_allclose(got, gluon(net, inputs), **TOL)


def test_child_sum_without_any_edge():
    """Single-node trees only: the child table is empty, which no gather can read, and the
    loop's calls must not be computed. (Hybridized MXNet refuses the empty table: the oracle
    is the same model run eagerly.)"""
    net = child_sum()
    model = export_onnx(net, nary_arrays(NARY[:2]), dynamic_axes=NODE_AXES)
    eager = ChildSumTreeLSTM(len(NARY_VOCAB), embed_size=4, hidden_size=3, max_children=4)
    eager.initialize()
    for mine, theirs in zip(eager.collect_params().values(), net.collect_params().values()):
        mine.set_data(theirs.data())
    inputs = nary_arrays([NARY[1], NARY[1]])
    assert inputs[2].size == 0
    np.testing.assert_allclose(ort_run(model, inputs), eager(*[nd.array(x) for x in inputs])
                               .asnumpy(), **TOL)


class UntilLarge(TreeRNN):
    """Adds children's states until their sum exceeds 1: how many calls a node makes depends
    on what the calls return."""

    def encode(self, F, tokens, left, right, roots):
        @gluon_cf.recursive
        def node(idx):
            def leaf():
                return self.cell.leaf(self.embed(F.take(tokens, idx)))

            def internal():
                def more(k, total):
                    return (total.sum() < 1) * (k < 2)

                def step(k, total):
                    child = F.take(F.stack(F.take(left, idx), F.take(right, idx)), k)
                    return [], [k + 1, total + node(F.reshape(child, (1,)))]
                _, (_, total) = gluon_cf.while_loop(
                    more, step, [F.zeros((1,)), F.zeros((1, 5))], max_iterations=2)
                return F.tanh(total)
            return gluon_cf.cond(F.take(left, idx) < 0, leaf, internal)
        hs, _ = gluon_cf.foreach(lambda root, _: (node(root), []), roots, [])
        return F.reshape(hs, (-3, 0))


def test_models_the_lowering_cannot_express_name_the_function():
    with pytest.raises(NotImplementedError, match=r"function 'node'.*is computed from what a "
                                                  r"recursive call returns.*save_artifact"):
        export_onnx(make(UntilLarge), arrays(TREES["sst"][:2]), dynamic_axes=NODE_AXES)
    with pytest.raises(NotImplementedError, match=r"function 'node'.*does not act row by row.*"
                                                  r"save_artifact"):
        export_onnx(make(MixesRows), arrays(TREES["sst"][:2]), dynamic_axes=NODE_AXES)

def test_onnx_benchmark_smoke(tmp_path):
    """``python -m gluon_cf.bench.onnx --smoke``: every method checked against numpy, then a
    table and a JSON summary with the ratios of the exported model."""
    proc = subprocess.run([sys.executable, "-m", "gluon_cf.bench.onnx", "--smoke",
                           "--methods", "h,j,k"], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["treelstm_b4_onnx_vs_artifact"] > 0
    assert set(summary["chain_seconds"]["treernn"]) == {"h", "j", "k"}


def test_child_sum_past_max_children_fails_the_run():
    """Issue 24: an exported ChildSumTreeLSTM dropped the children past max_children silently
    (3, 4 and 7 children gave one output). A node with more children now fails the run at a
    Gather named .../max_iterations_exceeded (ONNX has no error of its own); at the bound it
    equals Gluon."""
    net = child_sum(max_children=3)
    trees = [parse_tree("(3 (1 d) (2 e) (3 f))"), parse_tree("(1 (2 a) (0 b))")]
    model = export_onnx(net, nary_arrays(trees), dynamic_axes=NODE_AXES)
    np.testing.assert_allclose(ort_run(model, nary_arrays(trees)), gluon(net, nary_arrays(trees)),
                               **TOL)
    for wide in ("(3 (1 d) (2 e) (3 f) (1 g))", "(3 (1 d) (2 e) (3 f) (1 g) (2 a) (0 b) (2 e))"):
        with pytest.raises(Exception, match="max_iterations_exceeded"):
            ort_run(model, nary_arrays([trees[1], parse_tree(wide)]))
