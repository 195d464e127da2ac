"""Review of round 30h: ONNX export of a recursion whose ``while_loop`` makes recursive calls.

* a counter updated from what a recursive call returns and a reduction over all the rows
  (``n + count(c) * F.sum(F.ones_like(k))``: a loop of one invocation multiplies by 1)
  exported silently: the skeleton check skipped every value reached from a call, but the
  lowering runs ``func`` on all the rows of a level, so the sum counted sibling calls and the
  model gave 7 nodes of a 5-node tree (onnxruntime; Gluon and the artifact gave 5). Now the
  calls are cut out and their values stand as batched inputs: refused at the sum's line.
* recursive functions calling each other only from their loops ended export_onnx in a
  KeyError of the lowering's own; now a refusal naming the function.
"""
import itertools
import warnings

import numpy as np
import pytest

import mxnet as mx

import gluon_cf

from test_hostile_r30h import _TREES, _count


def _counter(F, ptr, cidx, callee, after=None):
    """The nodes under node ``i``: a while_loop over its children calling ``callee()``, what
    a call returns going through ``after(F, k, got)``."""
    def count(i):
        end = F.take(ptr, i + 1)

        def func(k, n):
            got = callee()(F.take(cidx, k))
            return [], [k + 1, n + (after(F, k, got) if after else got)]
        _, (_, n) = gluon_cf.while_loop(lambda k, n: k < end, func,
                                        [F.take(ptr, i), F.ones((1,))], max_iterations=4)
        return n
    return count


class _CountMixed(mx.gluon.HybridBlock):
    def __init__(self, after):
        super().__init__()
        self.after = after

    def hybrid_forward(self, F, ptr, cidx, root):
        count = gluon_cf.recursive(_counter(F, ptr, cidx, lambda: count, self.after))
        return count(root)


def _mixed(F, k, got):
    return got * F.sum(F.ones_like(k))   # the sum refused


def _row_wise(F, k, got):
    return F.sum(F.stack(got, k - k, axis=1), axis=1)


@pytest.mark.parametrize("after", [_mixed, _row_wise])
def test_a_counter_update_mixing_rows_with_a_calls_value_is_refused(after, tmp_path):
    import inspect
    from gluon_cf.export import export_onnx, load, save_artifact
    net = _CountMixed(after)
    net.initialize()
    net.hybridize()
    counts = [_count(ptr, cidx, int(root[0])) for ptr, cidx, root in _TREES]
    example = [mx.nd.array(a) for a in _TREES[0]]
    axes = {0: [0], 1: [0]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        save_artifact(net, example, str(tmp_path / "m.onnx"), dynamic_axes=axes)
        runs = [load(str(tmp_path / "m.onnx")),
                lambda *xs: [net(*[mx.nd.array(x) for x in xs]).asnumpy()]]
        if after is _mixed:
            with pytest.raises(NotImplementedError) as refused:
                export_onnx(net, example, dynamic_axes=axes)
            text = str(refused.value)
            line = inspect.getsourcelines(_mixed)[1] + 1
            assert "operator sum (node" in text and "at %s:%d acts over all axes" % (
                __file__, line) in text, text
            assert "runs its func on the rows" in text and "::" not in text, text
        else:
            runs.append(_onnxruntime(export_onnx(net, example, dynamic_axes=axes)))
    for run, (tree, want) in itertools.product(runs, zip(_TREES, counts)):
        np.testing.assert_allclose(run(*tree)[0], [want], rtol=1e-5, atol=1e-6)


def _onnxruntime(model):
    """The model run by onnxruntime: a function of the inputs giving the outputs."""
    import onnxruntime as ort
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return lambda *xs: session.run(None, dict(zip(names, xs)))


class _EvenOdd(mx.gluon.HybridBlock):
    """Nodes under ``root`` by two functions calling each other from their loops."""

    def hybrid_forward(self, F, ptr, cidx, root):
        odd = gluon_cf.recursive(_counter(F, ptr, cidx, lambda: even))
        even = gluon_cf.recursive(_counter(F, ptr, cidx, lambda: odd))
        return even(root)


def test_a_function_called_only_from_loops_is_refused_not_a_keyerror(tmp_path):
    """export_onnx of two functions calling each other only from their while_loops ended in
    a KeyError of the lowering's own (the callee's argument specs come from calls outside
    loops); now refused naming it, and save_artifact's model equals Gluon and Python."""
    from gluon_cf.export import export_onnx, load, save_artifact
    net = _EvenOdd()
    net.hybridize()
    example = [mx.nd.array(a) for a in _TREES[0]]
    axes = {0: [0], 1: [0]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NotImplementedError, match="'count' is called only from inside a "
                                                      "while_loop") as refused:
            export_onnx(net, example, dynamic_axes=axes)
        assert str(refused.value).startswith(__file__ + ":"), str(refused.value)
        save_artifact(net, example, str(tmp_path / "m.onnx"), dynamic_axes=axes)
    artifact = load(str(tmp_path / "m.onnx"))
    for ptr, cidx, root in _TREES:
        want = [_count(ptr, cidx, int(root[0]))]
        got = net(*[mx.nd.array(a) for a in (ptr, cidx, root)]).asnumpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(artifact(ptr, cidx, root)[0], want, rtol=1e-5, atol=1e-6)
