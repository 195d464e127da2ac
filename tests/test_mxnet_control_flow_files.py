"""Symbol files holding MXNet's own control-flow nodes (``_foreach``, ``_while_loop``, ``_cond``,
from ``F.contrib``), tampered: refused with a SymbolFileError naming the node and what is
wrong, before MXNet reads them (NOTE [MXNet's control-flow nodes] in ``symbol_file.py``).

Was (issue 24, item 5): several of these segfaulted the process that loaded the file
(``SymbolBlock.imports``, ``mx.sym.load(...).eval``: a subgraph's head reading an output its
node lacks, ``num_outputs`` of 0, an out-of-range ``func_var_locs``); others gave MXNet's C++
check text (``_Map_base::at``, ``Check failed: ...``) or ``std::bad_alloc``. All tamperings
run in one subprocess: a crash fails the test with its signal.
"""
import json
import textwrap

from conftest import run_python

TAMPERED = """
    import contextlib, copy, io, json, os, sys, tempfile
    import numpy as np
    import mxnet as mx
    from mxnet import gluon, nd
    import gluon_cf
    from gluon_cf.errors import SymbolFileError
    from gluon_cf.export import cli

    class Net(gluon.HybridBlock):             # MXNet's own control flow only
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.d = gluon.nn.Dense(3, in_units=3)
        def hybrid_forward(self, F, x, h):
            def body(xt, st):
                o = self.d(xt) + st[0]
                return o, [o]
            outs, st = F.contrib.foreach(body, x, [h])
            ys, (i, s) = F.contrib.while_loop(lambda i, s: i < 3,
                                              lambda i, s: (s * 2, (i + 1, s * 2)),
                                              [F.zeros((1,)), st[0]], max_iterations=4)
            return outs, ys, F.contrib.cond(F.sum(s) > 0, lambda: s * 2, lambda: s - 1)

    kept_dir = tempfile.TemporaryDirectory()   # (removed when the script ends)
    tmp = kept_dir.name
    net = Net()
    net.initialize()
    x, h = nd.random.normal(shape=(4, 2, 3)), nd.ones((2, 3))
    net.hybridize()
    expected = [o.asnumpy() for o in net(x, h)]
    net.export(os.path.join(tmp, "net"))
    params = os.path.join(tmp, "net-0000.params")
    base = json.load(open(os.path.join(tmp, "net-symbol.json")))

    def node(d, op):
        return [n for n in d["nodes"] if n["op"] == op][0]

    def body_op(d):     # the foreach body's first operator node
        return [n for n in node(d, "_foreach")["subgraphs"][0]["nodes"] if n["op"] != "null"][0]

    def nest(d, depth):     # the cond's 'then' wrapped in `depth` _cond nodes
        n = node(d, "_cond")
        g = n["subgraphs"][1]
        for _ in range(depth):
            g = {{"nodes": [{{"op": "null", "name": "v", "inputs": []}},
                           {{"op": "_cond", "name": "c", "attrs": dict(n["attrs"]),
                             "inputs": [[0, 0, 0]] * 3, "subgraphs": [
                                 n["subgraphs"][0], g, n["subgraphs"][2]]}}],
                 "arg_nodes": [0], "heads": [[1, 0, 0]]}}
        n["subgraphs"][1] = g

    tamper = {{
        "head_out_of_range": lambda d: node(d, "_foreach")["subgraphs"][0]["heads"][0]
            .__setitem__(1, 5),
        "input_out_of_range": lambda d: body_op(d)["inputs"][0].__setitem__(1, 3),
        "num_outputs_0": lambda d: node(d, "_foreach")["attrs"].__setitem__("num_outputs", "0"),
        "num_outputs_negative": lambda d: node(d, "_foreach")["attrs"]
            .__setitem__("num_outputs", "-3"),
        "num_args": lambda d: node(d, "_foreach")["attrs"].__setitem__("num_args", "50"),
        "in_data_locs": lambda d: node(d, "_foreach")["attrs"].__setitem__("in_data_locs", "[9]"),
        "remain_locs_twice": lambda d: node(d, "_foreach")["attrs"]
            .__setitem__("remain_locs", "[1, 1]"),
        "func_var_locs": lambda d: node(d, "_while_loop")["attrs"]
            .__setitem__("func_var_locs", "[7, 0]"),
        "cond_input_locs": lambda d: node(d, "_while_loop")["attrs"]
            .__setitem__("cond_input_locs", "[5]"),
        "max_iterations": lambda d: node(d, "_while_loop")["attrs"]
            .__setitem__("max_iterations", "1000000000000"),
        "num_out_data": lambda d: node(d, "_while_loop")["attrs"]
            .__setitem__("num_out_data", "9"),
        "else_input_locs": lambda d: node(d, "_cond")["attrs"]
            .__setitem__("else_input_locs", "[a"),
        "two_subgraphs": lambda d: node(d, "_cond")["subgraphs"].pop(),
        "no_subgraphs": lambda d: node(d, "_cond").pop("subgraphs"),
        "subgraph_cycle": lambda d: body_op(d)["inputs"][0].__setitem__(0, 6),
        "subgraph_unknown_op": lambda d: body_op(d).__setitem__("op", "NoSuchOp"),
        "unknown_attribute": lambda d: node(d, "_foreach")["attrs"]
            .__setitem__("max_iterations", "3"),
        "nested_too_deep": lambda d: nest(d, 120),
    }}
    results = {{}}
    for how, change in tamper.items():
        d = copy.deepcopy(base)
        change(d)
        path = os.path.join(tmp, how + "-symbol.json")
        json.dump(d, open(path, "w"))
        try:
            gluon.SymbolBlock.imports(path, ["data0", "data1"], params)(x, h)
            mx.nd.waitall()
            imported = "loaded"
        except SymbolFileError as err:
            imported = str(err)
        except Exception as err:
            imported = "other %s: %s" % (type(err).__name__, err)
        try:
            mx.sym.load(path).eval(data0=x, data1=h)[0].asnumpy()
            loaded = "loaded"
        except SymbolFileError as err:
            loaded = str(err)
        except Exception as err:
            loaded = "other %s: %s" % (type(err).__name__, err)
        out = io.StringIO()
        with contextlib.redirect_stderr(out), contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(["convert", path, params, "-i", "data0:4,2,3", "-i", "data1:2,3",
                             "-o", os.path.join(tmp, "out.onnx")])
        results[how] = [imported, "exit %d: %s" % (code, out.getvalue()), loaded]
    # the untampered file: checked, then run by MXNet as before
    outs = gluon.SymbolBlock.imports(os.path.join(tmp, "net-symbol.json"), ["data0", "data1"],
                                     params)(x, h)
    for got, want in zip(outs, expected):   # (MXNet leaves the while_loop's 4th row unset)
        np.testing.assert_allclose(got.asnumpy()[:3], want[:3], rtol=1e-6)
    print(json.dumps(results))
"""

_EXPECTED = {
    "head_out_of_range": "('net0__foreach0', _foreach), subgraph 0: its output 0 is output 5 of "
                         "node 5 ('net0__plus0'), which has 1 output",
    "input_out_of_range": "subgraph 0: node 3 ('net0_dense0_fwd', FullyConnected) reads output 3"
                          " of node 0 ('data0-0'), which has 1 output",
    "num_outputs_0": "('net0__foreach0', _foreach): attribute num_outputs must be >= 1, got 0",
    "num_outputs_negative": "attribute num_outputs must be >= 1, got -3",
    "num_args": "attribute num_args must be 5 (its 4 inputs and 1 subgraph), got 50",
    "in_data_locs": "attribute in_data_locs holds 9, not a location below 4",
    "remain_locs_twice": "attributes in_data_locs, in_state_locs and remain_locs must place each "
                         "of the body's 4 inputs once, got [0, 3, 1, 1]",
    "func_var_locs": "_while_loop): attribute func_var_locs holds 7, not a location below 2",
    "cond_input_locs": "attribute cond_input_locs holds 5, not a location below 2",
    "max_iterations": "attribute max_iterations must be at most 10000000 (its outputs have as "
                      "many rows), got 1000000000000",
    "num_out_data": "attribute num_out_data must be at most num_outputs (3), got 9",
    "else_input_locs": "_cond): attribute else_input_locs must be a list of integers, got '[a'",
    "two_subgraphs": "_cond holds 3 subgraphs (cond, then, else), got 2",
    "no_subgraphs": "'subgraphs' must be a list of graphs",
    "subgraph_cycle": "reads node 6, which is not an earlier node",
    "subgraph_unknown_op": "subgraph 0: node 3 ('net0_dense0_fwd', NoSuchOp): MXNet has no "
                           "operator 'NoSuchOp'",
    "unknown_attribute": "_foreach has no attribute 'max_iterations'",
    "nested_too_deep": "subgraphs nested more than 100 deep",
}


def test_tampered_mxnet_control_flow_nodes_are_refused_not_killed():
    proc = run_python(textwrap.dedent(TAMPERED.format()), timeout=300)
    assert proc is not None, "the process hung"
    assert proc.returncode == 0, "exit %d (a negative code is a signal)\n%s" % (
        proc.returncode, proc.stderr[-4000:])
    results = json.loads(proc.stdout.splitlines()[-1])
    assert sorted(results) == sorted(_EXPECTED)
    for how, (imported, cli, loaded) in results.items():
        assert _EXPECTED[how] in imported and "-symbol.json" in imported, (how, imported)
        assert loaded == imported, (how, loaded)
        assert cli.startswith("exit 1: gluon-cf-export: error: "), (how, cli)
        assert cli.count("\n") == 1 and _EXPECTED[how] in cli, (how, cli)


NESTED = """
    import json, os, tempfile
    import mxnet as mx
    from mxnet import gluon, nd
    import gluon_cf
    from gluon_cf.errors import SymbolFileError

    class Net(gluon.HybridBlock):           # MXNet's foreach inside a gluon_cf.cond branch
        def hybrid_forward(self, F, x):
            def then():
                return F.contrib.foreach(lambda r, s: (r + s[0], [s[0] * 2]), x,
                                         [F.ones((3,))])[0]
            return gluon_cf.cond(F.sum(x) > 0, then, lambda: x * 2)

    kept_dir = tempfile.TemporaryDirectory()   # (removed when the script ends)
    tmp = kept_dir.name
    net = Net()
    net.hybridize()
    x = nd.ones((2, 3))
    assert (net(x).asnumpy() == [[2, 2, 2], [3, 3, 3]]).all()
    net.export(os.path.join(tmp, "net"))
    d = json.load(open(os.path.join(tmp, "net-symbol.json")))
    node = [n for n in d["nodes"] if n["op"] == "Custom"][0]
    spec = json.loads(node["attrs"]["spec"])
    body = json.loads(spec["graphs"]["then"]["json"])
    [n for n in body["nodes"] if n["op"] == "_foreach"][0]["subgraphs"][0]["heads"][0][1] = 5
    spec["graphs"]["then"]["json"] = json.dumps(body)
    node["attrs"]["spec"] = json.dumps(spec)
    path = os.path.join(tmp, "bad-symbol.json")
    json.dump(d, open(path, "w"))
    for load in (lambda: mx.sym.load(path).eval(data=x)[0].asnumpy(),
                 lambda: gluon.SymbolBlock.imports(path, ["data"],
                                                   os.path.join(tmp, "net-0000.params"))(x)):
        try:
            load()
            print("loaded")
        except SymbolFileError as err:
            print(err)
"""


def test_tampered_mxnet_foreach_inside_a_gluon_cf_body_is_refused_by_sym_load():
    """Was: a segmentation fault in ``mx.sym.load(...).eval`` and ``SymbolBlock.imports``."""
    proc = run_python(textwrap.dedent(NESTED), timeout=300)
    assert proc is not None, "the process hung"
    assert proc.returncode == 0, "exit %d (a negative code is a signal)\n%s" % (
        proc.returncode, proc.stderr[-4000:])
    lines = proc.stdout.splitlines()[-2:]
    assert lines == ["a gluon_cf.cond node 'net0__cond0', subgraph 'then': node 2 "
                     "('net0__foreach0', _foreach), subgraph 0: its output 0 is output 5 of node "
                     "2 ('net0__plus0'), which has 1 output"] * 2, proc.stdout + proc.stderr[-3000:]
