"""Hostile round 29h, issue 24 item 2: no history in a block. One hybridized block called with
a random sequence of inputs (other lengths, masks that keep nothing, loops of no step, zero-row
values, predict then record then predict, other batch sizes and dtypes, malformed calls) gives
on each call what an eager block given the same sequence gives: outputs, input gradients,
parameter gradients accumulated with ``grad_req='add'``, BatchNorm's running statistics, and
Dropout in predict mode; and every call equals a fresh block's
(``hostile_harness.check_call_history``)."""
import random
import warnings

import mxnet as mx
import pytest
from mxnet import autograd
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from gluon_cf import autograph

import hostile_harness

PROGRAMS, program = hostile_harness.program_registry()
rand, floats = hostile_harness.rand, hostile_harness.floats
TOL = (1e-5, 1e-6)

MASKED = ([rand(4, 3, seed=2921), floats(1, 0, 1, 1)], [rand(4, 3, seed=2922), floats(0, 0, 0, 0)],
          [rand(2, 3, seed=2923), floats(1, 1)], [rand(3, 3, seed=2924), floats(0, 0, 0)],
          [rand(5, 3, seed=2925), floats(0, 1, 0, 0, 0)])
COUNTS = ([rand(2, 3, seed=2926), floats(3)], [rand(2, 3, seed=2927), floats(0)],
          [rand(4, 3, seed=2928), floats(1)], [rand(1, 3, seed=2929), floats(0)],
          [rand(3, 3, seed=2930), floats(2)])
ROWS = ([rand(4, 3, seed=2931)], [rand(1, 3, seed=2932)], [rand(6, 3, seed=2933)],
        [rand(2, 3, seed=2934)])


@program(*MASKED)
class MaskedRowsSummedInWhile(HybridBlock):
    """``boolean_mask`` inside a ``while`` body, its rows summed (zero rows: zeros)."""

    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3)

    @autograph
    def hybrid_forward(self, F, x, mask):
        h = F.zeros((1, 3))
        i = F.zeros((1,))
        while F.sum(i) < 2:
            kept = F.contrib.boolean_mask(self.fc(x), mask)
            h = F.tanh(h + F.sum(kept, axis=0, keepdims=True) + i)
            i = i + 1
        return h


@program(*MASKED)
class MaskedCountGatesForOverRows(HybridBlock):
    """A tensor ``for`` over the rows a mask keeps (rows the input shapes do not give)."""

    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, mask):
        kept = F.contrib.boolean_mask(x, mask)
        h = F.ones((3,))
        n = F.zeros((1,))
        for row in kept:
            h = h * 0.5 + row
            n = n + 1
        return h, n


@program(*COUNTS)
class WhileOfInputCountMayRunNoStep(HybridBlock):
    """``while i < n`` where ``n`` is an input: 0 runs no step."""

    NO_GRAD = (1,)

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3)

    @autograph
    def hybrid_forward(self, F, x, n):
        h = x
        i = F.zeros_like(n)
        while F.sum(i) < F.sum(n):
            gluon_cf.max_iterations(4)
            h = F.tanh(self.fc(h))
            i = i + 1
        return h, i


@program(*COUNTS)
class ForAppendsThenStacksWithStart(HybridBlock):
    """Steps appended while ``i < n``, stacked after a start row (no step: the start only)."""

    NO_GRAD = (1,)

    @autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        h = x[0]
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            gluon_cf.max_iterations(4)
            h = h * 2 + 1
            outs.append(h)
            i = i + 1
        return F.stack(x[0], *outs).sum(axis=0)


@program(*ROWS)
class BatchNormInTensorLoop(HybridBlock):
    """BatchNorm applied to the carried state at each step of a tensor ``for``."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3)
            self.bn = nn.BatchNorm(in_channels=3)

    @autograph
    def hybrid_forward(self, F, x):
        h = F.zeros((2, 3))
        for row in x:
            h = self.bn(self.fc(h) + row.reshape((1, -1)))
        return h


@program(*ROWS)
class DropoutInWhileBody(HybridBlock):
    """Dropout inside a ``while`` body (compared in predict mode, where it is the identity)."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.fc = nn.Dense(3, in_units=3)
            self.drop = nn.Dropout(0.5)

    @autograph
    def hybrid_forward(self, F, x):
        h = x
        i = F.zeros((1,))
        while F.sum(i) < 3:
            h = self.drop(F.tanh(self.fc(h)))
            i = i + 1
        return h


def _make(cls, grad_req="write"):
    net = hostile_harness._make(cls)
    for k, (_, p) in enumerate(sorted(net.collect_params().items())):
        if p.grad_req == "null":        # (running statistics other than their defaults)
            p.set_data(mx.nd.array(rand(*p.shape, seed=2950 + k) + 1.5))
    if grad_req != "write":
        for p in net.collect_params().values():
            if p.grad_req != "null":
                p.grad_req = grad_req
    return net


def _call(net, arrays, mode, no_grad):
    """Outputs and input gradients of one call: ``mode`` "train" (recorded, training),
    "record_predict" (recorded in predict mode) or "predict"."""
    inputs = [mx.nd.array(a, dtype=a.dtype) for a in arrays]
    if mode != "predict":
        for k, a in enumerate(inputs):
            if k not in no_grad:
                a.attach_grad()
    if mode == "predict":
        out = net(*inputs)
    else:
        with autograd.record(train_mode=mode == "train"):
            out = net(*inputs)
            outs = out if isinstance(out, (list, tuple)) else [out]
            total = sum((o.astype("float32") * (k + 1.5)).sum() for k, o in enumerate(outs))
        total.backward()
    outs = out if isinstance(out, (list, tuple)) else [out]
    return [o.asnumpy() for o in outs] + [a.grad.asnumpy() for a in inputs
                                          if a.grad is not None]


def _params(net):
    return [p for _, p in sorted(net.collect_params().items()) if p.grad_req != "null"]


def _state(net):
    """Every parameter's gradient (where it has one) and every auxiliary state."""
    out = []
    for name, p in sorted(net.collect_params().items()):
        if p.grad_req == "null":
            out.append(p.data().asnumpy())
        else:
            out.append(p.grad().asnumpy())
    return out


def _same_sequence(cls, calls, grad_req, modes):
    """``calls`` (indices of ``PROGRAMS[cls]``) with modes drawn from ``modes`` on an eager and
    a hybridized block: the same outputs, gradients and states after every call."""
    rng = random.Random(cls.__name__ + grad_req)
    no_grad = getattr(cls, "NO_GRAD", ())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager, hybrid = _make(cls, grad_req), _make(cls, grad_req)
        hybrid.hybridize()
        for step, k in enumerate(calls):
            mode = rng.choice(modes)
            arrays = PROGRAMS[cls][k]
            want = hostile_harness._outcome(lambda: _call(eager, arrays, mode, no_grad))
            got = hostile_harness._outcome(lambda: _call(hybrid, arrays, mode, no_grad))
            if want[0] == "error" and isinstance(want[1], mx.MXNetError) and \
                    got[0] == "value":
                # plain MXNet's zero-size limits (a sum of no row) or its backward of a
                # value that reads no input: the hybridized call equals a fresh block's
                fresh = _make(cls, grad_req)
                fresh.hybridize()
                assert hostile_harness._compare(_call(fresh, arrays, mode, no_grad), got[1],
                                                TOL), (step, k, mode)
                if mode != "predict":
                    for p, q in zip(_params(eager), _params(hybrid)):
                        p.grad()[:] = q.grad()     # (the eager block could not add them)
                continue
            if want[0] == got[0] == "error":
                # (plain MXNet's backward of a value that reads no input, as eagerly)
                assert type(want[1]) is type(got[1]) and \
                    hostile_harness._unnamed(want[1]) == hostile_harness._unnamed(got[1])
                continue
            assert want[0] == got[0] == "value", (step, k, mode, want, got)
            assert hostile_harness._compare(want[1], got[1], TOL), (step, k, mode)
            assert hostile_harness._compare(_state(eager), _state(hybrid), TOL), \
                (step, k, mode, "parameter gradients or running statistics")


def _calls(cls, n=9):
    rng = random.Random(cls.__name__)
    count = len(PROGRAMS[cls])
    return [rng.randrange(count) for _ in range(n)] + list(range(count))


SEQUENCES = [(MaskedRowsSummedInWhile, "add", ("train", "record_predict", "predict")),
             (MaskedCountGatesForOverRows, "write", ("train", "predict")),
             (WhileOfInputCountMayRunNoStep, "add", ("train", "record_predict", "predict")),
             (ForAppendsThenStacksWithStart, "write", ("train", "predict")),
             (BatchNormInTensorLoop, "add", ("record_predict", "predict")),
             (DropoutInWhileBody, "add", ("record_predict", "predict"))]


@pytest.mark.parametrize("cls, grad_req, modes", SEQUENCES,
                         ids=lambda v: getattr(v, "__name__", None))
def test_hybridized_block_follows_the_eager_block_over_a_sequence(cls, grad_req, modes):
    _same_sequence(cls, _calls(cls), grad_req, modes)


HISTORY = [MaskedRowsSummedInWhile, MaskedCountGatesForOverRows, WhileOfInputCountMayRunNoStep,
           ForAppendsThenStacksWithStart]


@pytest.mark.parametrize("cls", HISTORY, ids=lambda c: c.__name__)
def test_each_call_equals_a_fresh_block(cls):
    inputs = PROGRAMS[cls]
    hostile_harness.check_call_history(cls, inputs, hostile_harness._make,
                                       hostile_harness.eager_oracle(cls, inputs), TOL)


def test_a_dtype_change_between_calls():
    """float32, then float64, then float32 again on one hybridized block: each call equals the
    eager block's on the same dtype (MXNet retraces a hybridized block for a new dtype)."""
    cls = WhileOfInputCountMayRunNoStep
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager, hybrid = _make(cls), _make(cls)
        hybrid.hybridize()
        for dtype in ("float32", "float64", "float32"):
            for net in (eager, hybrid):
                net.cast(dtype)
            for arrays in PROGRAMS[cls][:3]:
                arrays = [a.astype(dtype) for a in arrays]
                want = _call(eager, arrays, "train", (1,))
                got = _call(hybrid, arrays, "train", (1,))
                assert [w.dtype for w in want] == [g.dtype for g in got], dtype
                assert hostile_harness._compare(want, got, TOL), dtype


def test_a_refused_training_call_leaves_the_block_usable():
    """BatchNorm in a loop body, hybridized, refuses a training call (its running statistics
    would not be updated): the same refusal on every training call, and the predict calls
    before and after it equal the eager block's."""
    cls = BatchNormInTensorLoop
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager, hybrid = _make(cls), _make(cls)
        hybrid.hybridize()
        errors = []
        for k, arrays in enumerate(PROGRAMS[cls] * 2):
            want = _call(eager, arrays, "predict", ())
            assert hostile_harness._compare(want, _call(hybrid, arrays, "predict", ()), TOL)
            with pytest.raises(NotImplementedError) as info:
                _call(hybrid, arrays, "train", ())
            errors.append(str(info.value))
        assert len(set(errors)) == 1, errors
        assert "%s:%d" % (__file__, hostile_harness.line_in(__file__, "h = self.bn(")) in \
            errors[0]


class TiedWeightsTrainingBranch(HybridBlock):
    """Two Dense layers sharing one weight (``params=``), a frozen third (``grad_req='null'``),
    a BatchNorm before a ``while`` whose body branches on ``autograd.is_training()``."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.a = nn.Dense(3, in_units=3)
            self.b = nn.Dense(3, in_units=3, params=self.a.collect_params())
            self.c = nn.Dense(3, in_units=3)
            self.bn = nn.BatchNorm(in_channels=3)

    @autograph
    def hybrid_forward(self, F, x):
        h = self.bn(x)
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < 3:
            if autograd.is_training():
                h = F.tanh(self.a(h)) + self.c(h)
            else:
                h = F.tanh(self.b(h)) * 0.5
            outs.append(h)
            i = i + 1
        return F.concat(*outs, dim=0)


PROGRAMS[TiedWeightsTrainingBranch] = [[rand(2, 3, seed=2935)], [rand(4, 3, seed=2936)],
                                       [rand(1, 3, seed=2937)]]


def test_tied_weights_frozen_layer_and_training_branch_over_a_sequence():
    """predict, train, record in predict mode, train on one row ...: outputs, input
    gradients, the shared weight's added gradients and BatchNorm's running statistics equal
    the eager block's after every call."""
    cls = TiedWeightsTrainingBranch

    def make(_cls, grad_req="write"):
        net = _make(_cls, grad_req)
        net.c.collect_params().setattr("grad_req", "null")
        net.a.collect_params().setattr("grad_req", "add")
        return net
    calls = _calls(cls, 6)
    rng = random.Random(cls.__name__)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager, hybrid = make(cls), make(cls)
        hybrid.hybridize()
        for step, k in enumerate(calls):
            mode = rng.choice(("train", "record_predict", "predict"))
            want = _call(eager, PROGRAMS[cls][k], mode, ())
            assert hostile_harness._compare(want, _call(hybrid, PROGRAMS[cls][k], mode, ()),
                                            TOL), (step, mode)
            assert hostile_harness._compare(_state(eager), _state(hybrid), TOL), (step, mode)
