"""onnxruntime 1.32's ConstantFolding inlines an ``If`` on a constant condition and breaks when
the inlined branch holds control flow: nested ``If``s around a ``Loop`` / ``Scan`` whose body
reads a main-graph input, with a constant in the inner branch, segfaulted while ``load()`` (and
``gluon-cf-export run``) built the piece's session; an ``If`` around a ``Loop`` around a ``Loop``
failed with "vector::reserve".  Such pieces get their session without ConstantFolding
(NOTE [onnxruntime folding nested If]): the files load and run, equal to numpy."""
import json

import onnx

from onnx import TensorProto as T
from onnx import helper as h

from conftest import run_python
from gluon_cf.export.artifact_validate import session_disabled_optimizers

# Builds the crafted files in the child, runs each through load() and through the CLI's
# main(), and prints one JSON line per file: [name, max |load - 4x|, max |cli - 4x|].
CHILD = r'''
import json, os, sys, tempfile
import numpy as np
from onnx import TensorProto as T, helper as h
from gluon_cf.export import load
from gluon_cf.export.cli import main

def V(n, t=T.FLOAT, shape=(None,)):
    return h.make_tensor_value_info(n, t, list(shape))

def leaf(k, const, scan, loop_wrapped):
    nodes, inits = [], []
    if scan:
        inits.append(h.make_tensor("sq", T.FLOAT, [3], [1, 2, 3]))
        body = h.make_graph([h.make_node("Add", ["s", "x"], ["s2"]), h.make_node("Identity", ["e"], ["o"])],
                            "sb", [V("s"), V("e", shape=())], [V("s2"), V("o", shape=())])
        nodes.append(h.make_node("Scan", ["x", "sq"], ["y", "sc"], body=body, num_scan_inputs=1, name=f"scan{k}"))
    else:
        if const:
            nodes.append(h.make_node("Constant", [], ["n"], value=h.make_tensor("v", T.INT64, [], [3]), name=f"k{k}"))
        else:
            inits.append(h.make_tensor("n", T.INT64, [], [3]))
        body = h.make_graph([h.make_node("Identity", ["c"], ["c2"]), h.make_node("Add", ["s", "x"], ["s2"])], "lb",
                            [V("i", T.INT64, ()), V("c", T.BOOL, ()), V("s")], [V("c2", T.BOOL, ()), V("s2")])
        nodes.append(h.make_node("Loop", ["n", "", "x"], ["y"], body=body, name=f"loop{k}"))
    if loop_wrapped:   # a one-step Loop around it: its scan output, squeezed
        body = h.make_graph(nodes + [h.make_node("Identity", ["c"], ["c2"]), h.make_node("Identity", ["y"], ["ys"])],
                            "w", [V("j", T.INT64, ()), V("c", T.BOOL, ())], [V("c2", T.BOOL, ()), V("ys")],
                            initializer=inits)
        nodes, inits = [h.make_node("Loop", ["one", ""], ["y1"], body=body, name=f"wl{k}"),
                        h.make_node("Squeeze", ["y1", "zero"], ["y"])], []
    return h.make_graph(nodes, f"g{k}", [], [V("y")] + ([V("sc")] if scan else []), initializer=inits)

def model(depth, const=False, scan=False, loop_wrapped=False):
    g = leaf(0, const, scan, loop_wrapped)
    outs = [o.name for o in g.output]
    for k in range(depth):
        g = h.make_graph([h.make_node("If", ["t"], outs, name=f"if{k}", then_branch=g,
                                      else_branch=leaf(k + 1, const, scan, loop_wrapped))],
                         f"w{k}", [], list(g.output))
    top = h.make_graph(list(g.node), "main", [V("x")], list(g.output), initializer=[
        h.make_tensor("t", T.BOOL, [], [True]), h.make_tensor("one", T.INT64, [], [1]),
        h.make_tensor("zero", T.INT64, [1], [0])])
    return h.make_model(top, ir_version=8, opset_imports=[h.make_opsetid("", 13)])

CASES = {"if_if_loop_initializer": model(2), "if_if_loop_constant": model(2, const=True),
         "if_if_scan_initializer": model(2, scan=True), "if20_loop_initializer": model(20),
         "if_loop_loop": model(1, loop_wrapped=True)}
kept_dir = tempfile.TemporaryDirectory()   # (removed when the script ends)
tmp = kept_dir.name
x = np.random.RandomState(0).uniform(-1, 1, 5).astype(np.float32)
np.save(os.path.join(tmp, "x.npy"), x)
for name, m in CASES.items():
    path = os.path.join(tmp, name + ".onnx")
    open(path, "wb").write(m.SerializeToString())
    got = load(path)(x)
    out = os.path.join(tmp, name)
    status = main(["run", path, "-i", os.path.join(tmp, "x.npy"), "-o", out])
    cli = np.load(os.path.join(out, "y.npy")) if status == 0 else None
    print(json.dumps([name, float(np.abs(got[0] - 4 * x).max()),
                      None if cli is None else float(np.abs(cli - 4 * x).max())]), flush=True)
'''


def test_nested_if_around_loops_loads_and_runs_instead_of_crashing():
    r = run_python(CHILD, timeout=240)
    assert r is not None, "timed out"
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("[")]
    assert [row[0] for row in rows] == ["if_if_loop_initializer", "if_if_loop_constant",
                                        "if_if_scan_initializer", "if20_loop_initializer",
                                        "if_loop_loop"], r.stdout
    for name, by_load, by_cli in rows:
        assert by_load < 1e-6 and by_cli is not None and by_cli < 1e-6, (name, r.stderr)


def _graph(nodes, name="g"):
    return h.make_graph(nodes, name, [], [h.make_tensor_value_info("y", T.FLOAT, None)])


def _if(inner, cond="t"):
    return h.make_node("If", [cond], ["y"], then_branch=_graph(inner),
                       else_branch=_graph([h.make_node("Identity", ["x"], ["y"])]))


def _loop(inner):
    return h.make_node("Loop", ["n", ""], ["y"], body=_graph(inner))


def _disabled(nodes, inits=("t",)):
    """What load() disables for a piece of ``nodes`` with input ``x`` (dims unknown, as load()
    declares them) and boolean initializers ``inits``."""
    graph = h.make_graph(nodes, "piece", [h.make_tensor_value_info("x", T.FLOAT, [None, None])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)],
                         [h.make_tensor(name, T.BOOL, [], [True]) for name in inits])
    return session_disabled_optimizers(h.make_model(graph))


def test_constant_folding_is_disabled_exactly_when_it_may_inline_control_flow():
    plain = [h.make_node("Relu", ["x"], ["y"])]
    keep, drop = ["NoopElimination"], ["NoopElimination", "ConstantFolding"]
    assert _disabled(plain) == keep
    assert _disabled([_if(plain)]) == keep                       # no control flow inlined
    assert _disabled([_loop([_loop(plain)])]) == keep            # no If
    assert _disabled([_loop([_if(plain)])]) == keep
    assert _disabled([_if([_if(plain)])]) == drop
    assert _disabled([_if([_loop(plain)])]) == drop
    assert _disabled([_loop([_if([_loop(plain)])])]) == drop     # at any depth
    assert _disabled([_if([_loop(plain)])], inits=()) == keep    # t is a runtime input
    node = _if(plain)                                            # the else branch counts
    node.attribute[1].g.node[0].CopyFrom(_loop(plain))
    assert _disabled([plain[0], node]) == drop
    # a condition computed from constants folds too
    assert _disabled([h.make_node("Not", ["t"], ["u"]), h.make_node("Not", ["u"], ["v"]),
                      _if([_loop(plain)], "v")]) == drop
    # foreach's guard Shape(x)[0] > 0 on a runtime dim keeps the folding (not a constant) ...
    guard = [h.make_node("Shape", ["x"], ["s"], start=0, end=1),
             h.make_node("Constant", [], ["z"], value=h.make_tensor("z", T.INT64, [1], [0])),
             h.make_node("Greater", ["s", "z"], ["g1"]),
             h.make_node("Squeeze", ["g1"], ["g"]), _if([_loop(plain)], "g")]
    assert _disabled(guard) == keep
    # ... but not on a dim known before the run, or known once folding made a value constant
    assert _disabled([h.make_node("Constant", [], ["w"], value=h.make_tensor(
        "w", T.FLOAT, [2, 3], [0] * 6)), h.make_node("Add", ["x", "w"], ["x2"])]
        + [h.make_node("Shape", ["x2"], ["s"], start=1, end=2)] + guard[1:]) == drop
    later = [h.make_node("Constant", [], ["c"], value=h.make_tensor("c", T.INT64, [2], [-2, -3])),
             h.make_node("Abs", ["c"], ["c2"]), h.make_node("Reshape", ["x", "c2"], ["x2"]),
             h.make_node("Shape", ["x2"], ["s"], start=0, end=1)]
    assert _disabled(later + guard[1:]) == drop
    # a value of no inferred shape (Reshape to a runtime shape) is not known before the run
    runtime = [h.make_node("Shape", ["x"], ["sx"]), h.make_node("Reshape", ["x", "sx"], ["x3"]),
               h.make_node("Shape", ["x3"], ["s"], start=0, end=1)]
    assert _disabled(runtime + guard[1:]) == keep


def test_constant_folding_is_disabled_when_shape_inference_fails(monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("inference failed")
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", fail)
    guard = [h.make_node("Shape", ["x"], ["s"], start=0, end=1),
             h.make_node("Constant", [], ["z"], value=h.make_tensor("z", T.INT64, [1], [0])),
             h.make_node("Greater", ["s", "z"], ["g1"]), h.make_node("Squeeze", ["g1"], ["g"]),
             _if([_loop([h.make_node("Relu", ["x"], ["y"])])], "g")]
    assert _disabled(guard) == ["NoopElimination", "ConstantFolding"]
