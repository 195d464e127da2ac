"""gluon_cf.export.save_artifact / load: recursive models as self-contained ONNX-based files.

Round trips export in this process and run the artifacts in a fresh interpreter that imports only
gluon_cf and numpy (no model class); outputs must equal the hybridized Gluon block.  The safety
tests edit valid artifacts into hostile ones and pin the errors (NOTE [artifact safety]).
"""
import json
import os
import textwrap

import mxnet as mx
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from mxnet import gluon, nd
from onnx import helper

import gluon_cf
from gluon_cf.data.trees import (batchify_forest, build_vocab, encode_tree, parse_tree,
                                 synthetic_treebank)
from gluon_cf.export import (ArtifactDepthError, ArtifactError, Limits, load,
                             save_artifact)
from gluon_cf.models.recursive import ChildSumTreeLSTM, TopDownTreeLSTM, TreeLSTM, TreeRNN

from conftest import REPO, run_python

TOL = dict(rtol=1e-5, atol=1e-5)
TREE_INPUTS = ["tokens", "left", "right", "roots"]
NODE_AXES = {0: [0], 1: [0], 2: [0], 3: [0]}  # every tree input: its node / root axis


# ----------------------------------------------------------------------------- models and data

class AlternatingTreeRNN(gluon.HybridBlock):
    """Mutual recursion: nodes at even depth use cell ``a``, at odd depth cell ``b``; ``odd``
    takes one more argument than ``even`` (a scale it applies), so the two functions have
    different signatures."""

    def __init__(self, vocab_size, hidden=4, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.embed = gluon.nn.Embedding(vocab_size, hidden)
            self.a = gluon.nn.Dense(hidden, in_units=2 * hidden, activation="tanh",
                                    flatten=False)
            self.b = gluon.nn.Dense(hidden, in_units=2 * hidden, activation="sigmoid",
                                    flatten=False)

    def hybrid_forward(self, F, tokens, left, right, roots):
        def leaf(idx):
            return self.embed(F.take(tokens, idx))

        @gluon_cf.recursive
        def even(idx):
            def internal():
                scale = F.ones((1, 1)) * 0.5
                children = [odd(F.take(left, idx), scale), odd(F.take(right, idx), scale)]
                return self.a(F.concat(*children, dim=-1))
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: leaf(idx), internal)

        @gluon_cf.recursive
        def odd(idx, scale):
            def internal():
                children = [even(F.take(left, idx)), even(F.take(right, idx))]
                return F.broadcast_mul(self.b(F.concat(*children, dim=-1)), scale)
            return gluon_cf.cond(F.take(left, idx) < 0, lambda: leaf(idx), internal)

        hs, _ = gluon_cf.foreach(lambda root, _: (even(root), []), roots, [])
        return F.reshape(hs, (-3, 0))


def forest_arrays(trees, vocab, binary=True, names=TREE_INPUTS):
    forest = batchify_forest([encode_tree(t, vocab, binary=binary) for t in trees])
    return [getattr(forest, name).astype(np.float32) for name in names]


def treebank():
    trees = list(synthetic_treebank(6, seed=0, max_length=10)) + [parse_tree("(1 good)")]
    return trees, build_vocab(trees)


def linear_tree(num_leaves=2501):
    """A left-deep tree with 2 * num_leaves - 1 nodes (5,001 by default)."""
    text = "(2 w0)"
    for k in range(1, num_leaves):
        text = "(2 %s (2 w%d))" % (text, k % 7)
    return parse_tree(text)


def initialized(net, seed=0):
    mx.random.seed(seed)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    return net


def gluon_outputs(net, inputs):
    out = net(*[nd.array(x, dtype=x.dtype) for x in inputs])
    return [o.asnumpy() for o in (out if isinstance(out, (list, tuple)) else [out])]


def model_cases():
    """(name, net, example inputs, dynamic_axes, [other inputs])."""
    trees, vocab = treebank()
    first, second = forest_arrays(trees[:4], vocab), forest_arrays(trees[4:], vocab)
    cases = []
    for model in (TreeLSTM, TreeRNN):
        net = initialized(model(len(vocab), embed_size=6, hidden_size=5, num_classes=3))
        cases.append((model.__name__, net, first, NODE_AXES, [second]))
    nary = trees[:3] + [parse_tree("(2 (1 a) (3 b) (2 c) (4 d))"), parse_tree("(0 lone)")]
    nary_vocab = build_vocab(nary)
    names = ["tokens", "child_ptr", "child_idx", "roots"]
    net = initialized(ChildSumTreeLSTM(len(nary_vocab), embed_size=6, hidden_size=5,
                                       num_classes=3, max_children=8), seed=1)
    cases.append(("ChildSumTreeLSTM", net, forest_arrays(nary[:4], nary_vocab, False, names),
                  NODE_AXES, [forest_arrays(nary[3:], nary_vocab, False, names)]))
    net = initialized(TopDownTreeLSTM(input_size=4, hidden_size=6, max_depth=4), seed=3)
    z = [np.random.RandomState(k).normal(0, 3, size=(n, 4)).astype(np.float32)
         for k, n in ((0, 6), (1, 3))]
    cases.append(("TopDownTreeLSTM", net, [z[0]], {0: [0]}, [[z[1]]]))
    net = initialized(AlternatingTreeRNN(len(vocab)), seed=4)
    cases.append(("AlternatingTreeRNN", net, first, NODE_AXES, [second]))
    return cases


def save_runs(directory, name, inputs_list, outputs_list):
    """Write each run's inputs and expected outputs as .npz; returns [(inputs, expected)]."""
    runs = []
    for k, (inputs, outputs) in enumerate(zip(inputs_list, outputs_list)):
        paths = [os.path.join(directory, f"{name}_{k}_{what}.npz") for what in ("in", "out")]
        np.savez(paths[0], *inputs)
        np.savez(paths[1], *outputs)
        runs.append(paths)
    return runs


# A fresh interpreter: imports gluon_cf and numpy only, loads each artifact, compares every run.
FRESH_PROCESS_CHECK = textwrap.dedent("""
    import json, sys
    import numpy as np
    import gluon_cf
    from gluon_cf.export import load

    def arrays(path):
        npz = np.load(path)
        return [npz["arr_%d" % k] for k in range(len(npz.files))]

    cases = json.load(open(sys.argv[1]))
    for name, path, runs in cases:
        artifact = load(path)
        for inputs, expected in runs:
            got = artifact(*arrays(inputs))
            want = arrays(expected)
            assert len(got) == len(want), name
            for g, w in zip(got, want):
                assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, w.shape)
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)
    assert not [m for m in sys.modules if m.startswith(("gluon_cf.models", "test_"))]
    print("checked", len(cases))
""")


def check_in_fresh_process(tmp_path, cases):
    manifest = tmp_path / "cases.json"
    manifest.write_text(json.dumps(cases))
    script = tmp_path / "check.py"
    script.write_text(FRESH_PROCESS_CHECK)
    result = run_python(f"import runpy, sys; sys.argv = ['check', {str(manifest)!r}]; "
                        f"runpy.run_path({str(script)!r}, run_name='__main__')", timeout=120)
    assert result is not None, "the fresh process timed out"
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"checked {len(cases)}" in result.stdout


# ----------------------------------------------------------------------------- round trips

def test_recursive_models_run_in_a_fresh_process_without_their_classes(tmp_path):
    """TreeLSTM, TreeRNN, child-sum TreeLSTM (while_loop around recursive calls), the top-down
    generator and mutual recursion, on the example and on inputs of other sizes."""
    cases = []
    for name, net, example, axes, others in model_cases():
        path = str(tmp_path / f"{name}.onnx")
        model = save_artifact(net, example, path, dynamic_axes=axes)
        assert onnx.load(path) == model
        runs = [example] + others
        cases.append([name, path, save_runs(str(tmp_path), name, runs,
                                            [gluon_outputs(net, x) for x in runs])])
    # The 5,001-node linear tree: 5,001 nested calls, far beyond Python's recursion limit.
    tree = linear_tree()
    vocab = build_vocab([tree])
    net = initialized(TreeRNN(len(vocab), embed_size=4, hidden_size=4, num_classes=2))
    small = forest_arrays([parse_tree("(2 (1 w1) (3 w2))")], vocab)
    path = str(tmp_path / "linear.onnx")
    save_artifact(net, small, path, dynamic_axes=NODE_AXES)
    deep = forest_arrays([tree], vocab)
    assert deep[0].shape == (5001,)
    cases.append(["linear", path, save_runs(str(tmp_path), "linear", [deep],
                                            [gluon_outputs(net, deep)])])
    check_in_fresh_process(tmp_path, cases)


def test_loader_needs_no_mxnet(tmp_path):
    """With MXNet made unimportable, ``gluon_cf.export.load`` runs a TreeLSTM artifact, no MXNet
    module is loaded, and what needs MXNet says so when used."""
    (name, net, example, axes, _), *_ = model_cases()
    path = str(tmp_path / "tree.onnx")
    save_artifact(net, example, path, dynamic_axes=axes)
    np.savez(tmp_path / "in.npz", *example)
    np.save(tmp_path / "want.npy", gluon_outputs(net, example)[0])
    result = run_python(textwrap.dedent(f"""
        import sys
        import numpy as np
        sys.modules["mxnet"] = None  # any import of MXNet now fails
        import gluon_cf
        from gluon_cf.export import ArtifactDepthError, load
        inputs = np.load({str(tmp_path / "in.npz")!r})
        got, = load({path!r})(*[inputs["arr_%d" % k] for k in range(4)])
        np.testing.assert_allclose(got, np.load({str(tmp_path / "want.npy")!r}), rtol=1e-5,
                                   atol=1e-5)
        assert issubclass(ArtifactDepthError, gluon_cf.RecursionDepthError)
        assert not [m for m in sys.modules if m.startswith("mxnet") and sys.modules[m]]
        try:
            gluon_cf.cond
        except ImportError as err:
            assert "gluon_cf.cond needs MXNet" in str(err), err
        else:
            raise SystemExit("gluon_cf.cond without MXNet")
        print("ok")
    """))
    assert result is not None and result.returncode == 0, result and result.stderr[-3000:]


def test_format_recursion_and_invoke_nodes(tmp_path):
    (_, net, example, axes, _), *_ = model_cases()
    model = save_artifact(net, example, tmp_path / "tree.onnx", dynamic_axes=axes,
                          input_names=TREE_INPUTS, output_names=["logits"])
    onnx.checker.check_model(model)
    artifact = load(tmp_path / "tree.onnx")
    assert [(n, s, str(d)) for n, s, d in artifact.inputs] == [
        (name, (None,), "float32") for name in TREE_INPUTS]
    assert [(n, s, str(d)) for n, s, d in artifact.outputs] == [("logits", (None, 3), "float32")]
    np.testing.assert_allclose(artifact(*example)[0], gluon_outputs(net, example)[0], **TOL)
    assert {(o.domain, o.version) for o in model.opset_import} == {("", 13), ("ai.gluon_cf", 1)}
    props = {p.key: p.value for p in model.metadata_props}
    bounds = json.loads(props.pop("gluon_cf.index_bounds"))  # NOTE [index bounds]
    assert props == {"format": "gluon_cf.artifact", "format_version": "1"}
    assert [(b["input"], b["indexes"], b["axis"]) for b in bounds] == [("roots", "left", 0)]
    found = {}
    for node in walk_nodes(model.graph):
        if node.domain == "ai.gluon_cf":
            found.setdefault(node.op_type, []).append(node)
    (recursion,), invokes = found["Recursion"], found["Invoke"]
    attrs = {a.name: helper.get_attribute_value(a) for a in recursion.attribute}
    assert sorted(attrs) == ["entry", "function_names", "functions", "max_depth", "num_args"]
    (function,) = attrs["functions"]
    assert function.name == attrs["entry"].decode()
    assert attrs["num_args"] == [1] and attrs["max_depth"] == [20000]
    assert attrs["function_names"] == [b"node"]
    # inputs: the argument, then the environment (tokens, left, right and the parameters)
    assert len(function.input) == len(recursion.input)
    assert len(invokes) == 2 and all(
        helper.get_attribute_value(n.attribute[0]) == attrs["entry"] for n in invokes)
    # parameters are initializers of the main graph only
    params = {i.name for i in model.graph.initializer}
    assert any(p.endswith("embedding0_weight") for p in params)


def test_model_without_recursion_saves_standard_onnx(tmp_path):
    class Net(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.fc = gluon.nn.Dense(3, in_units=3)

        def hybrid_forward(self, F, x):
            return gluon_cf.cond(x.sum() > 0, lambda: self.fc(x), lambda: -x)

    net = initialized(Net())
    x = np.random.RandomState(0).randn(2, 3).astype(np.float32)
    path = str(tmp_path / "plain.onnx")
    model = save_artifact(net, [x], path)
    assert [o.domain for o in model.opset_import if o.domain] == ["ai.gluon_cf"]
    assert not any(n.domain for n in walk_nodes(model.graph))
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for sign in (1, -1):
        want = gluon_outputs(net, [sign * x])[0]
        np.testing.assert_allclose(session.run(None, {"data": sign * x})[0], want, **TOL)
        np.testing.assert_allclose(load(path)(sign * x)[0], want, **TOL)


def test_save_from_symbol_files(tmp_path):
    (_, net, example, axes, others), *_ = model_cases()
    gluon_outputs(net, example)
    net.export(str(tmp_path / "tree"))
    files = (tmp_path / "tree-symbol.json", tmp_path / "tree-0000.params")
    by_name = {f"data{k}": (x.shape, x.dtype) for k, x in enumerate(example)}
    save_artifact(files, by_name, tmp_path / "tree.onnx", dynamic_axes=axes)
    artifact = load(tmp_path / "tree.onnx")
    for inputs in [example] + others:
        np.testing.assert_allclose(artifact(*inputs)[0], gluon_outputs(net, inputs)[0], **TOL)
    assert [name for name, _, _ in artifact.inputs] == ["data0", "data1", "data2", "data3"]


# ----------------------------------------------------------------------------- runtime bounds

@pytest.fixture(scope="module")
def tree_artifact(tmp_path_factory):
    """(serialized artifact of a small TreeRNN, example inputs, expected outputs)."""
    trees, vocab = treebank()
    net = initialized(TreeRNN(len(vocab), embed_size=3, hidden_size=3, num_classes=2))
    example = forest_arrays(trees[:3], vocab)
    path = tmp_path_factory.mktemp("artifact") / "tree.onnx"
    save_artifact(net, example, path, dynamic_axes=NODE_AXES)
    return path.read_bytes(), example, gluon_outputs(net, example)


def edited(data, edit):
    model = onnx.ModelProto()
    model.ParseFromString(data)
    edit(model)
    return model.SerializeToString()


def walk_nodes(graph):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == attr.GRAPH else attr.graphs:
                yield from walk_nodes(sub)


def node_of(model, op_type):
    return next(n for n in walk_nodes(model.graph) if n.op_type == op_type)


def attribute(node, name):
    return next(a for a in node.attribute if a.name == name)


def test_depth_bound_stops_deep_recursion(tree_artifact):
    data, example, expected = tree_artifact
    shallow = edited(data, lambda m: attribute(node_of(m, "Recursion"), "max_depth")
                     .ints.__setitem__(0, 3))
    with pytest.raises(ArtifactDepthError, match=r"^recursive function 'node' exceeded "
                                                 r"max_depth=3 nested calls; does it reach a "
                                                 r"base case\?$"):
        load(shallow)(*example)
    np.testing.assert_allclose(load(data)(*example)[0], expected[0], **TOL)


def test_wrong_inputs_are_value_errors(tree_artifact):
    data, example, _ = tree_artifact
    artifact = load(data)
    with pytest.raises(ValueError, match=r"^artifact: expected 4 inputs \['data0', 'data1', "
                                         r"'data2', 'data3'\], got 3$"):
        artifact(*example[:3])
    with pytest.raises(ValueError, match=r"^artifact: input 'data0' must have shape \[None\] "):
        artifact(example[0].reshape(1, -1), *example[1:])
    np.testing.assert_allclose(artifact(*[x.astype(np.int32) for x in example])[0],
                               artifact(*example)[0])  # int indices are cast


def test_timeout(tree_artifact):
    data, example, _ = tree_artifact
    with pytest.raises(ArtifactError, match=r"ran longer than timeout=0 s"):
        load(data, limits=Limits(timeout=0))(*example)


# ----------------------------------------------------------------------------- hostile files

def set_input(node, k, name):
    node.input[k] = name


HOSTILE = {
    "unknown domain": (
        lambda m: setattr(node_of(m, "Invoke"), "domain", "com.evil"),
        r"node '[^']*/Invoke' \(Invoke\): operator domain 'com.evil' is not imported by the "
        r"model or not supported"),
    "unknown custom op": (
        lambda m: setattr(node_of(m, "Invoke"), "op_type", "Eval"),
        r"unknown operator 'Eval' in domain 'ai.gluon_cf' \(it has Recursion, Invoke\)"),
    "unknown standard op": (
        lambda m: setattr(node_of(m, "Gemm"), "op_type", "Gemmm"),
        r"unknown operator 'Gemmm' in the default domain at opset 13"),
    "imported unknown domain": (
        lambda m: m.opset_import.add(domain="com.evil", version=1),
        r"^unknown operator domain 'com.evil' imported"),
    "undefined function": (
        lambda m: setattr(attribute(node_of(m, "Invoke"), "function"), "s", b"eval@0"),
        r"Invoke of function 'eval@0', which no enclosing Recursion node defines$"),
    "cycle": (
        lambda m: set_input(node_of(m, "Gemm"), 0, node_of(m, "Gemm").output[0]),
        r"node '[^']*' \(Gemm\) reads '[^']*' before node '[^']*' defines it: the nodes are "
        r"not in topological order \(a cycle\?\)$"),
    "wrong attribute type": (
        lambda m: attribute(node_of(m, "Invoke"), "function").CopyFrom(
            helper.make_attribute("function", 3)),
        r"\(Invoke\): attribute 'function' must be STRING, got INT$"),
    "huge declared shape": (
        lambda m: m.graph.input[0].type.tensor_type.shape.dim[0].__setattr__(
            "dim_value", 1 << 40),
        r"^the main graph: value 'data0' declares shape \[1099511627776\], more than "
        r"max_tensor_elements=268435456$"),
    "huge initializer": (
        lambda m: m.graph.initializer[0].dims.extend([1 << 20, 1 << 20]),
        r"^the main graph: initializer '[^']*' declares shape \[.*\], more than "
        r"max_tensor_elements"),
    "invoke arg count": (
        lambda m: node_of(m, "Invoke").input.append(node_of(m, "Invoke").input[0]),
        r"\(Invoke\): Invoke of '[^']*' passes 2 arguments, the function takes 1$"),
    "function input count": (
        lambda m: attribute(node_of(m, "Recursion"), "functions").graphs[0].input.pop(),
        r"^function 'node': has (\d+) inputs, expected 1 arguments \+ \1 environment "
        r"values$"),
    "num_args shifts the environment": (
        lambda m: attribute(node_of(m, "Recursion"), "num_args").ints.__setitem__(0, 2),
        r"\(Invoke\): Invoke of '[^']*' passes 1 arguments, the function takes 2$"),
    "entry missing": (
        lambda m: setattr(attribute(node_of(m, "Recursion"), "entry"), "s", b"main"),
        r"\(Recursion\): entry function 'main' is not in its table \['node_0@"),
    "excessive max_depth": (
        lambda m: attribute(node_of(m, "Recursion"), "max_depth").ints.__setitem__(0, 10**9),
        r"\(Recursion\): function 'node' declares max_depth=1000000000; this loader allows "
        r"1\.\.100000$"),
    "external data": (
        lambda m: m.graph.initializer[0].external_data.add(key="location", value="/etc/passwd"),
        r"^the main graph: initializer '[^']*' refers to external data; artifacts are "
        r"self-contained$"),
    "local functions": (
        lambda m: m.functions.add(name="f", domain="local"),
        r"^the model defines 1 local functions"),
    "string tensors": (
        lambda m: setattr(m.graph.input[0].type.tensor_type, "elem_type", onnx.TensorProto.STRING),
        r"^the main graph: value 'data0' has unsupported element type 8 \(STRING\)$"),
    "duplicate definition": (
        lambda m: m.graph.node.append(m.graph.node[-1]),
        r"name '[^']*' is defined twice in the same graph$"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_file_is_rejected_with_a_clear_error(tree_artifact, case):
    data, example, _ = tree_artifact
    edit, message = HOSTILE[case]
    with pytest.raises(ArtifactError, match=message):
        load(edited(data, edit))(*example)


def test_truncated_file(tree_artifact):
    data, _, _ = tree_artifact
    with pytest.raises(ArtifactError, match=r"^the artifact bytes is not an ONNX model "
                                            r"\(protobuf parse failed: .*\); truncated or "
                                            r"corrupted\?$"):
        load(data[:len(data) // 2])


def test_file_size_bound(tree_artifact, tmp_path):
    data, _, _ = tree_artifact
    path = tmp_path / "big.onnx"
    path.write_bytes(data)
    with pytest.raises(ArtifactError, match=rf"big.onnx' is {len(data)} bytes, more than "
                                            rf"max_file_bytes=1000$"):
        load(path, limits=Limits(max_file_bytes=1000))
    with pytest.raises(ArtifactError, match=r"^cannot read '[^']*missing.onnx': "):
        load(tmp_path / "missing.onnx")


def test_node_and_nesting_bounds(tree_artifact):
    data, _, _ = tree_artifact
    with pytest.raises(ArtifactError, match=r"^the model has more than max_nodes=10 nodes and graphs$"):
        load(data, limits=Limits(max_nodes=10))
    # main graph -> Scan body -> function -> If branch: nesting 3
    with pytest.raises(ArtifactError, match=r"^the (then|else)_branch of If node '[^']*': "
                                            r"graphs are nested more than max_nesting=2 "
                                            r"levels deep$"):
        load(data, limits=Limits(max_nesting=2))
    load(data, limits=Limits(max_nesting=3))


def test_constant_loop_trip_counts_are_bounded(tmp_path):
    cases = [case for case in model_cases() if case[0] == "ChildSumTreeLSTM"]
    (_, net, example, axes, _), = cases
    data = save_artifact(net, example, tmp_path / "childsum.onnx",
                         dynamic_axes=axes).SerializeToString()
    with pytest.raises(ArtifactError, match=r"\(Loop\): trip count 8 is more than "
                                            r"max_loop_iterations=5$"):
        load(data, limits=Limits(max_loop_iterations=5))


def test_child_sum_past_max_children_fails_the_run(tmp_path):
    """Issue 24: an artifact of a ChildSumTreeLSTM dropped the children past max_children
    silently. A node with more children now fails the run, naming the loop's
    .../max_iterations_exceeded node; at the bound the artifact equals Gluon."""
    trees = [parse_tree("(3 (1 d) (2 e) (3 f))"), parse_tree("(1 (2 a) (0 b))")]
    wide = parse_tree("(3 (1 d) (2 e) (3 f) (1 g))")
    vocab = build_vocab(trees + [wide])
    net = initialized(ChildSumTreeLSTM(len(vocab), embed_size=4, hidden_size=3, num_classes=2,
                                       max_children=3))
    names = ["tokens", "child_ptr", "child_idx", "roots"]
    inputs = forest_arrays(trees, vocab, binary=False, names=names)
    path = str(tmp_path / "child_sum.onnx")
    save_artifact(net, inputs, path, dynamic_axes=NODE_AXES)
    run = load(path)
    np.testing.assert_allclose(run(*inputs)[0], gluon_outputs(net, inputs)[0], rtol=1e-5,
                               atol=1e-6)
    with pytest.raises(ArtifactError, match="max_iterations_exceeded"):
        run(*forest_arrays([trees[1], wide], vocab, binary=False, names=names))
