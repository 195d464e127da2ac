"""Round 30h (issue 24, hostile programs): seq2seq and beam decoders, pointer networks, CRF
Viterbi, zoneout, BatchNorm in loops, grad_req='add', shared parameters, nested loops,
top-down and n-ary tree recursion, dtypes and batch sizes, exported.

* a recursive function counting an n-ary tree's nodes with a ``while_loop`` over a node's
  children whose cond reduced over all axes (``F.sum(k < end) > 0``, what a converted
  ``while F.sum(k < end) > 0:`` gives) exported through ``export_onnx`` silently: the
  lowering runs the loop's cond on all the invocations of a level at once, so the sum mixed
  the rows of sibling calls and the model counted 7 nodes of a 5-node tree (onnxruntime;
  Gluon, eagerly and hybridized, and ``save_artifact`` gave 5); so did a call's argument or
  a counter's update reading the least counter of all (``F.min(k)``). Now ``export_onnx``
  refuses them, naming the loop's and the operator's lines (NOTE [loops lowered on rows]);
  a loop acting row by row (``k < end``) still exports and equals Gluon.
* a batch of no row through ``for r in F.contrib.boolean_mask(x, m):`` ended the process
  (MXNet's boolean_mask of a mask of no element), eagerly and hybridized.
"""
import warnings

import numpy as np
import pytest

import mxnet as mx

import gluon_cf


def _f32(*values):
    return np.array(values, np.float32)


# (ptr, cidx, root) of CSR n-ary trees: node i's children are cidx[ptr[i]:ptr[i + 1]]
_TREES = [[_f32(0, 0, 0, 0, 2, 4), _f32(0, 1, 2, 3), _f32(4)],
          [_f32(0, 3, 3, 3, 3), _f32(1, 2, 3), _f32(0)],
          [_f32(0, 1, 1), _f32(1), _f32(0)],
          [_f32(0, 2, 4, 6, 6, 6, 7, 7, 7), _f32(1, 2, 3, 4, 5, 6, 7), _f32(0)]]


def _count(ptr, cidx, i):
    """The oracle: the nodes under node ``i``, in Python."""
    return 1 + sum(_count(ptr, cidx, int(cidx[k])) for k in range(int(ptr[i]), int(ptr[i + 1])))


class _CountNodes(mx.gluon.HybridBlock):
    """The number of nodes under ``root``, the loop over a node's children mixing the rows of
    the invocations (``how``): in its cond (a sum over all axes), in its calls' argument or
    its counter's update (the least counter of all), or not at all ("row-wise")."""

    def __init__(self, how):
        super().__init__()
        self.how = how

    def hybrid_forward(self, F, ptr, cidx, root):
        how = self.how

        @gluon_cf.recursive
        def count(i):
            end = F.take(ptr, i + 1)

            def func(k, n):
                least = F.broadcast_like(F.min(k).reshape((1,)), k)
                arg = least if how == "argument" else k
                step = least + 1 if how == "update" else k + 1
                return [], [step, n + count(F.take(cidx, arg))]

            def cond(k, n):
                return F.sum(k < end) > 0 if how == "cond" else k < end
            _, (_, n) = gluon_cf.while_loop(cond, func, [F.take(ptr, i), F.ones((1,))],
                                            max_iterations=4)
            return n
        return count(root)


@pytest.mark.parametrize("how", ["cond", "argument", "update", "row-wise"])
def test_a_loop_mixing_the_invocations_rows_is_refused_by_export_onnx(how, tmp_path):
    """Each exported the values of sibling calls' rows: 7 nodes of a 5-node tree, 7 or 5 of
    a 8-node one (onnxruntime; Gluon and the artifact counted right)."""
    import onnxruntime as ort
    from gluon_cf.export import export_onnx, load, save_artifact
    net = _CountNodes(how)
    net.initialize()
    net.hybridize()
    counts = [_count(ptr, cidx, int(root[0])) for ptr, cidx, root in _TREES]
    for tree, want in zip(_TREES, counts):
        assert net(*[mx.nd.array(a) for a in tree]).asnumpy().tolist() == [want]
    example = [mx.nd.array(a) for a in _TREES[0]]
    axes = {0: [0], 1: [0]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        save_artifact(net, example, str(tmp_path / "m.onnx"), dynamic_axes=axes)
        runs = [load(str(tmp_path / "m.onnx"))]
        if how != "row-wise":
            with pytest.raises(NotImplementedError) as refused:
                export_onnx(net, example, dynamic_axes=axes)
            text = str(refused.value)
            assert text.startswith(__file__ + ":"), text
            assert "gluon_cf.while_loop" in text and "runs its %s on the rows" % (
                "cond" if how == "cond" else "func") in text, text
            assert "operator %s" % ("sum" if how == "cond" else "min") in text, text
            assert "Custom" not in text and "::" not in text, text
        else:
            model = export_onnx(net, example, dynamic_axes=axes)
            session = ort.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
            names = [i.name for i in session.get_inputs()]
            runs.append(lambda *xs: session.run(None, dict(zip(names, xs))))
    for run in runs:
        for tree, want in zip(_TREES, counts):
            got, = run(*tree)
            np.testing.assert_allclose(got, [want], rtol=1e-5, atol=1e-6)


_MASK_OF_NO_ELEMENT = r'''
import sys, warnings
import numpy as np, mxnet as mx
import gluon_cf
from gluon_cf import autograph
warnings.simplefilter("ignore")


class Sum(mx.gluon.HybridBlock):
    @autograph
    def hybrid_forward(self, F, x, m):
        h = F.zeros((1, 4))
        for r in F.contrib.boolean_mask(x, m):   # the line named
            h = h + r
        return h


for hybridize in (False, True):
    net = Sum()
    net.initialize()
    if hybridize:
        net.hybridize()
    x = mx.nd.array(np.ones((0, 4), np.float32))
    m = mx.nd.array(np.ones((0,), np.float32))
    try:
        net(x, m).wait_to_read()
    except gluon_cf.ZeroSizeError as err:
        print(hybridize, str(err).replace("\n", " "))
    rows = net(mx.nd.ones((2, 4)), mx.nd.array([1, 0])).asnumpy()   # (the block still works)
    print(hybridize, rows.tolist())
'''


def test_a_boolean_mask_of_no_element_is_an_error_not_the_end_of_the_process(tmp_path):
    """A batch of no row through ``for r in F.contrib.boolean_mask(x, m):``: MXNet 1.9.1's
    boolean_mask ended the process ("terminate called without an active exception"), eagerly
    and hybridized; now a ZeroSizeError at the user's line (NOTE [a mask of no element])."""
    import subprocess
    import sys
    script = tmp_path / "mask_of_no_element.py"
    script.write_text(_MASK_OF_NO_ELEMENT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    lines = done.stdout.splitlines()
    assert len(lines) == 4, done.stdout
    eager, eager_rows, hybrid, hybrid_rows = lines
    line = next(k for k, text in enumerate(_MASK_OF_NO_ELEMENT.splitlines(), 1)
                if "the line named" in text)
    assert eager.startswith("False gluon_cf: boolean_mask at %s:%d " % (script, line)), eager
    assert hybrid.startswith("True gluon_cf: ") and str(script) in hybrid, hybrid
    assert "boolean_mask" in hybrid and "::" not in eager + hybrid, hybrid
    assert (eager_rows, hybrid_rows) == ("False [[1.0, 1.0, 1.0, 1.0]]",
                                         "True [[1.0, 1.0, 1.0, 1.0]]")


class _Parent(mx.gluon.HybridBlock):
    def __init__(self, child):
        super().__init__()
        with self.name_scope():
            self.child = child

    def hybrid_forward(self, F, *args):
        return self.child(*args)   # the line the warning names


def test_childsum_past_its_bound_in_a_parent_warns_at_the_users_line():
    """A ChildSumTreeLSTM inside a user's hybridized block, given a node of 5 children past
    max_children=3, warned naming gluon_cf/models/recursive.py; now the user's line calling
    it (the eager model and a hybridized one of its own raise a ValueError)."""
    from gluon_cf.models import ChildSumTreeLSTM
    net = _Parent(ChildSumTreeLSTM(5, embed_size=2, hidden_size=2, num_classes=2,
                                   max_children=3))
    net.initialize()
    net.hybridize()
    inputs = [_f32(0, 1, 2, 3, 4, 0), _f32(0, 5, 5, 5, 5, 5, 5), _f32(1, 2, 3, 4, 5),
              _f32(0)]
    with pytest.warns(gluon_cf.TruncationWarning) as caught:
        net(*[mx.nd.array(a) for a in inputs]).asnumpy()
    import inspect
    line = next(k for k, text in enumerate(inspect.getsource(_Parent).splitlines(),
                                           inspect.getsourcelines(_Parent)[1])
                if "the line the warning names" in text)
    assert str(caught[0].message).startswith(
        "%s:%d: ChildSumTreeLSTM(max_children=3): " % (__file__, line)), str(caught[0].message)


class Acc:
    """A user's object carrying an array (its class name starts with a vowel)."""

    def __init__(self, v):
        self.v = v


class _CarriesAnObject(mx.gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        acc = Acc(F.zeros_like(x[0]))
        for r in x:
            acc = Acc(acc.v + r)
        return acc.v


def test_a_loop_carrying_a_user_object_is_refused_in_plain_english():
    """It said "variable 'acc' is a Acc holding arrays"."""
    net = _CarriesAnObject()
    net.hybridize()
    with pytest.raises(gluon_cf.AutographError, match="variable 'acc' is an Acc holding"):
        net(mx.nd.ones((2, 3)))


class _Backwards(mx.gluon.HybridBlock):
    """A bidirectional encoder's backward half: rows collected, then reversed."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x):
        outs = []
        for r in x:
            outs.append(F.tanh(r * 2))
        return F.stack(*reversed(outs)), F.concat(*reversed(outs), dim=0), \
            F.stack(*outs[1:]), F.concat(*outs[-2:], dim=0)


def test_a_reversed_or_sliced_collected_list_unpacked_exports(tmp_path):
    """``F.stack(*reversed(outs))``, ``F.stack(*outs[1:])`` after a ``for`` over an input read
    the list's length from the input shapes, so export_onnx and save_artifact refused a block
    that hybridizes ("the shape read here ..."); now the rows are reversed and sliced in the
    graph: exported, equal to Gluon and to plain Python at 2, 3 and 5 rows."""
    import onnxruntime as ort
    from gluon_cf.export import export_onnx, load, save_artifact
    net = _Backwards()
    net.hybridize()
    cases = [np.random.RandomState(k).uniform(-1, 1, (n, 2)).astype(np.float32)
             for k, n in enumerate((3, 5, 2))]
    example = [mx.nd.array(cases[0])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = export_onnx(net, example, dynamic_axes={0: [0]})
        save_artifact(net, example, str(tmp_path / "m.onnx"), dynamic_axes={0: [0]})
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    artifact = load(str(tmp_path / "m.onnx"))
    for x in cases:
        rows = [np.tanh(r * 2) for r in x]      # plain Python's
        wants = [np.stack(rows[::-1]), np.concatenate(rows[::-1]), np.stack(rows[1:]),
                 np.concatenate(rows[-2:])]
        for got in ([o.asnumpy() for o in net(mx.nd.array(x))],
                    session.run(None, {session.get_inputs()[0].name: x}), artifact(x)):
            for g, want in zip(got, wants):
                np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
