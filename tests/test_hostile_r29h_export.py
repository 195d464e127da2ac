"""Hostile round 29h (issue 24): ``hybridize()``, calls, ``export()``, then
``SymbolBlock.imports`` round trips of this round's programs (decoders, masks keeping nothing,
loops of no step, BatchNorm and Dropout in bodies, beam search): the imported block, plain and
hybridized again, gives the block's outputs on every input, and recorded, its input gradients,
whatever was called before the export (training calls, predict calls, other lengths)."""
import warnings

import mxnet as mx
import pytest
from mxnet import autograd, gluon

import hostile_harness
import test_hostile_r29h_builtins as B
import test_hostile_r29h_containers as C
import test_hostile_r29h_decoders as D
import test_hostile_r29h_history as Hs

TOL = (1e-5, 1e-6)
MODELS = [(D.GreedyRangeAppendThenBreak, D.PROGRAMS), (D.BeamSearchFunctionalWhileLoop, D.PROGRAMS),
          (Hs.MaskedRowsSummedInWhile, Hs.PROGRAMS),
          (Hs.WhileOfInputCountMayRunNoStep, Hs.PROGRAMS),
          (Hs.BatchNormInTensorLoop, Hs.PROGRAMS), (Hs.DropoutInWhileBody, Hs.PROGRAMS),
          (C.EarlyReturnInsideForOverRows, C.PROGRAMS), (B.NamedtupleStateInFor, B.PROGRAMS)]


def _outputs(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _run(net, arrays, no_grad, record):
    inputs = [mx.nd.array(a, dtype=a.dtype) for a in arrays]
    if not record:
        return [o.asnumpy() for o in _outputs(net(*inputs))]
    for k, a in enumerate(inputs):
        if k not in no_grad:
            a.attach_grad()
    with autograd.record(train_mode=False):
        outs = _outputs(net(*inputs))
        total = sum((o.astype("float32") * (k + 1.5)).sum() for k, o in enumerate(outs))
    try:
        total.backward()
    except mx.MXNetError as err:    # (a value of no input: as plain MXNet, on both sides)
        return [o.asnumpy() for o in outs] + ["no graph" in str(err) or
                                              "not in a computational graph" in str(err)]
    return [o.asnumpy() for o in outs] + [a.grad.asnumpy() for a in inputs if a.grad is not None]


def _equal(want, got):
    return len(want) == len(got) and all(
        w == g if isinstance(w, bool) else hostile_harness._compare([w], [g], TOL)
        for w, g in zip(want, got))


@pytest.mark.parametrize("cls, programs", MODELS, ids=lambda v: getattr(v, "__name__", ""))
def test_export_then_imports_gives_the_blocks_outputs_and_gradients(cls, programs, tmp_path):
    inputs = programs[cls]
    no_grad = getattr(cls, "NO_GRAD", ())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = Hs._make(cls)
        net.hybridize()
        for arrays in inputs[::-1]:           # (a history before the export)
            try:
                with autograd.record():
                    _outputs(net(*[mx.nd.array(a) for a in arrays]))
            except NotImplementedError:       # (BatchNorm's training refused in a body)
                pass
        net.export(str(tmp_path / "m"), epoch=3)
        names = ["data"] if len(inputs[0]) == 1 else ["data%d" % k for k in range(len(inputs[0]))]
        loaded = gluon.SymbolBlock.imports(str(tmp_path / "m-symbol.json"), names,
                                           str(tmp_path / "m-0003.params"))
        again = gluon.SymbolBlock.imports(str(tmp_path / "m-symbol.json"), names,
                                          str(tmp_path / "m-0003.params"))
        again.hybridize()
        for k, arrays in enumerate(inputs + inputs[:1]):
            for record in (False, True):
                want = _run(net, arrays, no_grad, record)
                for block in (loaded, again):
                    got = _run(block, arrays, no_grad, record)
                    assert _equal(want, got), (k, record, block is again)


def test_export_of_rows_unrolled_by_map_is_refused_at_the_line(tmp_path):
    """``F.stack(*map(f, x))`` unrolls over the traced rows: a graph per input shape, which
    export refuses naming the line (rather than writing a graph of one length)."""
    net = Hs._make(B.MapLambdaOverRows)
    net.hybridize()
    net(mx.nd.array(B.PROGRAMS[B.MapLambdaOverRows][0][0]))
    line = hostile_harness.line_in(B.__file__, "return F.stack(*map(")
    with pytest.raises(ValueError, match="%s:%d: .*an exported graph would run them on inputs "
                       "of any shape" % (B.__file__, line)):
        net.export(str(tmp_path / "m"))
