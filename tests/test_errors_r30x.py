"""Round 30x (issue 24, item 5): errors that named no line or misled.

* ``F.var("extra")`` read inside a loop's body or a cond branch, hybridized: Gluon's
  "Unknown input to HybridBlock: extra", naming no line (NOTE [a variable read in a body]);
* ``save_artifact((sym, params), ...)``: os.fspath's "expected str, ... not Symbol"; symbol
  files with ``example_inputs="bad"``: "got 3 example inputs" (its letters counted).
"""
import inspect

import mxnet as mx
import numpy as np
import pytest

import gluon_cf


class _VarInAWhileBody(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        def body(i):
            return x * F.var("extra"), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < 2, body, [F.zeros((1,))], max_iterations=2)
        return outs


class _VarInAForeachBody(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        def body(r, states):
            return r * F.var("extra"), [states[0] + r]
        outs, _ = gluon_cf.foreach(body, x, [F.zeros((3,))])
        return outs


class _VarInACondBranch(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        return gluon_cf.cond(F.sum(x) > 0, lambda: x * F.var("extra"), lambda: x)


def _line_reading(cls, text):
    lines, first = inspect.getsourcelines(cls.hybrid_forward)
    return r"test_errors_r30x\.py:%d: " % (first + next(
        k for k, line in enumerate(lines) if text in line))


@pytest.mark.parametrize("cls, op", [(_VarInAWhileBody, "while_loop"),
                                     (_VarInAForeachBody, "foreach"),
                                     (_VarInACondBranch, "cond")])
def test_a_variable_made_in_a_body_names_its_line_on_every_call(cls, op):
    """Was Gluon's AssertionError "Unknown input to HybridBlock: extra" with no line; an
    AssertionError still (Gluon's type), at the body's line, saying what to do, each call.
    Eagerly F is mx.nd, which has no var: the same block is plain Gluon's error there."""
    net = cls()
    net.hybridize()
    pattern = "^.*" + _line_reading(cls, 'F.var("extra")') + \
        r"a body of gluon_cf\.%s reads the variable 'extra'.*Pass the value to the block " \
        r"as an input" % op
    for _ in range(2):
        with pytest.raises(AssertionError, match=pattern):
            net(mx.nd.ones((2, 3)))


def test_a_free_variable_of_plain_gluon_keeps_gluons_message():
    """A variable read by no gluon_cf node is plain Gluon code: Gluon's own message."""
    class Plain(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return x * F.var("extra")
    net = Plain()
    net.hybridize()
    with pytest.raises(AssertionError, match="^Unknown input to HybridBlock: extra$"):
        net(mx.nd.ones((2, 3)))


@pytest.fixture(scope="module")
def symbol_files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("files")
    sym = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=2, name="fc")
    params = {"fc_weight": mx.nd.ones((2, 3)), "fc_bias": mx.nd.zeros((2,))}
    sym.save(str(tmp / "m-symbol.json"))
    mx.nd.save(str(tmp / "m.params"), {"arg:" + k: v for k, v in params.items()})
    return sym, params, (str(tmp / "m-symbol.json"), str(tmp / "m.params")), tmp


def test_save_artifact_of_a_symbol_and_params_says_to_give_paths(symbol_files):
    from gluon_cf.export import save_artifact
    sym, params, _, tmp = symbol_files
    with pytest.raises(TypeError, match=r"^save_artifact: give a HybridBlock or the paths "
                                        r"\(symbol_json_path, params_path\).*got a pair of "
                                        r"Symbol and dict; to save a Symbol"):
        save_artifact((sym, params), "bad", str(tmp / "x.onnx"))


@pytest.mark.parametrize("examples", ["bad", ["bad"], 5, None, mx.nd.ones((1, 3)),
                                      {"data": "x"}])
def test_save_artifact_of_files_says_what_example_inputs_must_be(symbol_files, examples):
    """"bad" was "got 3 example inputs"; a single array counted its rows."""
    from gluon_cf.export import save_artifact
    _, _, files, tmp = symbol_files
    with pytest.raises(TypeError, match=r"^save_artifact: example_inputs for symbol files "
                                        r"must be a list of arrays"):
        save_artifact(files, examples, str(tmp / "x.onnx"))


def test_save_artifact_of_files_runs_as_mxnet(symbol_files):
    """The forms still taken (a list, (shape, dtype) pairs, a dict) equal MXNet's own run."""
    from gluon_cf.export import load, save_artifact
    sym, params, files, tmp = symbol_files
    x = np.random.RandomState(0).uniform(-1, 1, (1, 3)).astype(np.float32)
    want = sym.eval(ctx=mx.cpu(), data=mx.nd.array(x), **params)[0].asnumpy()
    for k, examples in enumerate([[mx.nd.array(x)], [((1, 3), "float32")], {"data": x}]):
        save_artifact(files, examples, str(tmp / ("ok%d.onnx" % k)))
        got, = load(str(tmp / ("ok%d.onnx" % k)))(x)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
