"""A second round of real client code of MXNet's ``F.contrib`` control flow, switched to
gluon_cf (client_programs27.py, each with its source; NOTE [other client code of F.contrib]):
MXNet's control-flow tutorial, a CRF and its Viterbi decoder of ``functools.partial`` bodies,
an adaptive softmax loss (boolean_mask and index_copy in a cond), a TimeDistributed layer,
MXNet 2.0-alpha's RandomGray and HybridRandomApply, ``mx.sym.contrib``'s docstring examples and
a CRF of eager ``nd.contrib.foreach``. MXNet's eager ops are the oracle (its hybridized ones
fail on the tutorial's SkipRNN, the CRF's gradients and a static Scan, and give other gradients
of the adaptive softmax when a cluster is empty); the hybridized blocks are also exported to
ONNX and run by onnxruntime.
"""
import contextlib
import re

import mxnet as mx
import numpy as np
import onnxruntime
import pytest
from mxnet import autograd

from gluon_cf.export import export_onnx

from mxnet_suite import client_programs27 as programs
from mxnet_suite.test_client_code26 import _assert_same, _bind, _normal, check_block, mxnet_ops

EMISSIONS = np.array([   # the CRF module's own example (its __main__)
    [[0.9383, 0.4889, -0.6731, 0.8728, 1.0554], [0.1778, -0.2303, -0.3918, -1.5810, 1.7066]],
    [[-0.4462, 0.7440, 1.5210, 3.4105, -1.1256], [-0.3170, -1.0925, -0.0852, -0.0933, 0.6871]],
    [[-0.8383, 0.0009, -0.7504, 0.1854, 0.6211], [0.6382, -0.2460, 2.3025, -1.8817, -0.0497]]],
    np.float32)
TRANSITIONS = np.array([
    [-0.0693, -0.1000, 0.0145, 0.0948, 0.0549], [-0.0347, 0.0900, -0.0808, -0.0608, -0.0277],
    [-0.0747, -0.0884, -0.0698, 0.0517, -0.0683], [0.0845, -0.0411, -0.0849, -0.0357, -0.0408],
    [0.0506, -0.0526, -0.0175, -0.0538, 0.0537]], np.float32)
TAGS = np.array([[0, 1], [2, 4], [3, 1]], np.float32)
MASK = np.array([[1, 1], [1, 1], [1, 0]], np.float32)


def _crf():
    crf = programs.Crf(5)
    crf.transitions.initialize(mx.init.Constant(mx.nd.array(TRANSITIONS)))
    return crf


def _viterbi():
    return programs.ViterbiDecoder(5, mx.nd.array(TRANSITIONS))


# name: (block factory, inputs, indices of inputs whose gradient is not compared, static)
BLOCKS = {
    "tutorial_map": (programs.Map, [np.arange(5, dtype="float32")], (), True),
    "tutorial_scan": (programs.Scan, [np.arange(5, dtype="float32")], (), True),
    "tutorial_scan_v2": (programs.ScanV2, [np.arange(5, dtype="float32")], (), False),
    "tutorial_dynamic_rnn": (
        programs.TutorialDynamicRNN,
        [_normal(6, 2, 5), _normal(2, 6), _normal(2, 6, seed=1), np.array([3, 6], "float32")],
        (3,), False),
    "tutorial_skip_rnn": (
        programs.TutorialSkipRNN,
        [np.array([3], "float32"), _normal(5, 1, 3), _normal(1, 3), _normal(1, 3, seed=1)],
        (0,), True),
    "crf_loss": (_crf, [EMISSIONS, TAGS, MASK], (1, 2), False),
    "crf_viterbi": (_viterbi, [EMISSIONS, np.ones_like(MASK)], (), True),
    "adaptive_softmax_every_cluster": (
        lambda: programs.AdaptiveSoftmax(8, 20, [4, 10]),
        [_normal(6, 8), np.array([0, 5, 12, 3, 19, 1], "float32"), np.arange(6, dtype="float32")],
        (1, 2), True),
    "adaptive_softmax_empty_cluster": (   # (MXNet's hybridized gradients are wrong here)
        lambda: programs.AdaptiveSoftmax(8, 20, [4, 10]),
        [_normal(6, 8), np.array([5, 6, 7, 8, 9, 4], "float32"), np.arange(6, dtype="float32")],
        (1, 2), False),
    "time_distributed_two_outputs": (
        lambda: programs.TimeDistributed(programs.TwoOutputs()), [_normal(2, 5, 4)], (), True),
    "random_gray_kept": (lambda: programs.RandomGray(0.0), [_normal(2, 3)], (), False),
    "random_gray_converted": (lambda: programs.RandomGray(1.0), [_normal(2, 3)], (), False),
}


@pytest.mark.substitutions("gluon_cf")
@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_client_block(name, tmp_path):
    """MXNet's eager outputs and gradients, eager, hybridized and exported (check_block), and
    from onnxruntime: the Viterbi decoder's 2-D SequenceReverse made an invalid ONNX Split
    (mx2onnx split every shape in three), refused with a misleading dtype hint."""
    make, arrays = BLOCKS[name][:2]
    want, net = check_block(*BLOCKS[name], tmp_path)
    if name.startswith("random_gray"):
        with pytest.raises(NotImplementedError, match=r"^%s:\d+: export_onnx: .*'_full'"
                           % re.escape(programs.__file__)):
            export_onnx(net, arrays)
        return
    session = onnxruntime.InferenceSession(export_onnx(net, arrays).SerializeToString())
    got = session.run(None, {i.name: a for i, a in zip(session.get_inputs(), arrays)})
    _assert_same(want, [(g.shape, g.dtype, g) for g in got], "onnxruntime")


@pytest.mark.substitutions("gluon_cf")
def test_crf_module_gives_its_own_checked_values():
    """The values the CRF module's __main__ asserts, hybridized with gluon_cf's foreach."""
    crf, decoder = _crf(), _viterbi()
    for block in (crf, decoder):
        block.initialize()
        block.hybridize()
    emissions, tags = mx.nd.array(EMISSIONS), mx.nd.array(TAGS)
    assert abs(crf(emissions, tags, mx.nd.array(MASK)).sum().asscalar() + 8.072865) <= 1e-4
    assert abs(crf(emissions, tags, mx.nd.ones_like(tags)).sum().asscalar() + 10.966491) <= 1e-4
    paths, _ = decoder(emissions, mx.nd.array(MASK))
    assert paths.asnumpy().T.astype(int).tolist() == [[0, 3, 4], [4, 4, 0]]
    paths, scores = decoder(emissions, mx.nd.ones_like(tags))
    assert paths.asnumpy().T.astype(int).tolist() == [[0, 3, 4], [4, 4, 2]]
    np.testing.assert_allclose(scores.asnumpy(), [5.0239, 4.7324], atol=1e-4)


@pytest.mark.substitutions("gluon_cf")
def test_eager_crf_of_nd_contrib_foreach():
    """The eager CRF (a Block; its score loop increments a state in place): MXNet's loss,
    gradients, path scores and paths."""
    def run():
        mx.random.seed(0)
        crf = programs.CRF({"B": 0, "I": 1, "O": 2, programs.START_TAG: 3,
                            programs.STOP_TAG: 4})
        crf.initialize()
        feats = mx.nd.array(_normal(4, 3, 5))
        feats.attach_grad()
        with autograd.record():
            loss = crf.neg_log_likelihood(feats, mx.nd.array([[0, 1, 2, 0], [2, 2, 1, 0],
                                                              [1, 0, 0, 2]]))
        loss.backward()
        return [loss, feats.grad, crf.transitions.grad()] + list(crf(feats))

    with mxnet_ops():
        want = [(w.shape, np.dtype(w.dtype), w.asnumpy()) for w in run()]
    _assert_same(want, [(g.shape, np.dtype(g.dtype), g.asnumpy()) for g in run()], "CRF")


@pytest.mark.substitutions("gluon_cf")
@pytest.mark.parametrize("build", [programs.doc_foreach, programs.doc_while_loop])
def test_symbol_docstring_examples(build):
    """mx.sym.contrib's docstring examples: MXNet's bind values and gradients through bind,
    simple_bind (MXNet's own fails on both) and a JSON round trip; while_loop's rows past its
    last step are arbitrary in MXNet (empty memory), 0 in gluon_cf."""
    args = ({"data": _normal(4, 3), "state": _normal(3)} if build is programs.doc_foreach
            else {"i": np.array([0], "float32"), "s": np.array([1], "float32")})
    with mxnet_ops():
        want, want_grads = _bind(build(), args, "write", simple=False)
    symbol = build()
    assert symbol.infer_shape(**{k: v.shape for k, v in args.items()})[1] == [
        w[0] for w in want]
    for sym in (symbol, mx.sym.load_json(symbol.tojson())):
        for simple in (False, True):
            got, grads = _bind(sym, args, "write", simple)
            if build is programs.doc_while_loop:
                np.testing.assert_array_equal(got[0][2][6:], 0)
                got[0], want[0] = got[0][:2] + (got[0][2][:6],), want[0][:2] + (want[0][2][:6],)
            _assert_same(want, got, "outputs (simple_bind=%s)" % simple)
            _assert_same(want_grads, grads, "gradients (simple_bind=%s)" % simple)


@pytest.mark.substitutions("gluon_cf")
def test_random_apply_giving_arrays_for_functions():
    """HybridRandomApply passes arrays, not functions, to cond. Eagerly MXNet's cond calls the
    NDArray, a TypeError, as gluon_cf's refusal at the line is; hybridized it calls the Symbol,
    a copy of itself, and gives its values: the input or the transformed input, as the random
    draw decides (gluon_cf refused the Symbol, a TypeError)."""
    def run(hybridize, seed):
        mx.random.seed(seed)
        net = programs.HybridRandomApply(mx.gluon.nn.Dense(
            3, in_units=3, flatten=False, weight_initializer=mx.init.Constant(0.5)))
        net.initialize()
        if hybridize:
            net.hybridize()
        return [net(mx.nd.array(_normal(2, 3))).asnumpy() for _ in range(4)]

    for ops in (mxnet_ops(), contextlib.nullcontext()):
        with ops, pytest.raises(TypeError) as info:
            run(False, 0)
    assert re.match(r"gluon_cf.cond at %s:\d+: then_func must be callable, got NDArray"
                    % re.escape(programs.__file__), str(info.value)), info.value
    sums = set()
    for seed in (0, 1):
        with mxnet_ops():
            want = run(True, seed)
        for w, g in zip(want, run(True, seed)):
            np.testing.assert_allclose(g, w, rtol=1e-6)
            sums.add(float(w.sum()))
    assert len(sums) == 2    # (both branches taken)
