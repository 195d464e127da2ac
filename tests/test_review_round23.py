"""Hostile review of round 23's merges (zero-size block inputs, MXNet 1.9.1 semantics of
while_loop/cond/foreach, backward passes inside a Custom operator's backward), as a user
porting code would meet them: call histories of a plain hybridized block against eager code,
the zero-size check every plain block call makes, a failing or accumulating pass inside an
``autograd.Function``'s backward (subprocess with a time limit), and what is left."""
import contextlib
import re
import sys

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd

import gluon_cf
from gluon_cf import hybrid
from conftest import run_python
from test_remat_gates_review import inputs, net_of, state


class _TwoInputs(mx.gluon.HybridBlock):
    """No gluon_cf node; either input may be empty (a mask keeping no row)."""

    def __init__(self, dtype):
        super().__init__()
        with self.name_scope():
            self.d = mx.gluon.nn.Dense(3, in_units=2, dtype=dtype)

    def hybrid_forward(self, F, x, m):
        return F.broadcast_add(self.d(x) * 2, F.sum(m)), F.concat(m, m, dim=0)


def _history(hybridize, dtype, calls, record):
    mx.random.seed(1)
    net = _TwoInputs(dtype)
    net.initialize(mx.init.Xavier())
    if hybridize is not None:
        net.hybridize(**hybridize)
    out = []
    for rows, mask_rows in calls:
        x = mx.nd.array(np.arange(rows * 2).reshape(rows, 2) / 7., dtype=dtype)
        m = mx.nd.array(np.ones((mask_rows, 2)), dtype=dtype)
        if rows:   # (MXNet 1.9.1 cannot attach a gradient to a zero-size array)
            x.attach_grad()
        try:
            with autograd.record() if record else contextlib.nullcontext():
                a, b = net(x, m)
                loss = a.sum() + b.sum()
            if record:
                loss.backward()
        except mx.MXNetError as err:   # (Concat of empty masks, eagerly too: MXNet's type)
            out.append("MXNetError" + (" at the user's line" if re.search(
                r"test_review_round23.py:\d+", str(err)) else ""))
            continue
        out.append([a.asnumpy(), b.asnumpy()] + ([
            net.d.weight.grad().asnumpy().copy(), net.d.bias.grad().asnumpy().copy(),
            x.grad.asnumpy() if rows else np.zeros(0, dtype)] if record else []))
    return out


@pytest.mark.parametrize("record", [False, True])
@pytest.mark.parametrize("static", [False, True])
def test_a_plain_block_with_either_input_empty_computes_as_eager_whatever_came_before(
        record, static):
    """Empty first input, then empty second, then a full call again, float64, static or not,
    recorded or not: eager Gluon's values and gradients (before the merge: MXNet's "Cannot
    find attribute forward_mem_plan", and with static_shape "Graph attr dependency shape is
    required by pass" on the call after). An operator refusing the empty mask (Concat, as
    eagerly) raises an MXNetError naming the line: the type MXNet's CachedOp raised for it
    before round 23 (round 23's ZeroSizeError was a ValueError only, missed by ``except
    mx.MXNetError``)."""
    calls = ((4, 3), (4, 0), (0, 3), (4, 3), (0, 0), (2, 2))
    want = _history(None, "float64", calls, record)
    got = _history({"static_alloc": True, "static_shape": True} if static else {}, "float64",
                   calls, record)
    for k, (w, g) in enumerate(zip(want, got)):
        assert isinstance(w, str) == isinstance(g, str), (k, calls[k], w, g)
        if isinstance(w, str):   # (hybridized, gluon_cf's message names the line)
            assert g == "MXNetError at the user's line", (k, calls[k], g)
            continue
        for u, v in zip(w, g):
            assert u.shape == v.shape and u.dtype == v.dtype, (k, calls[k])
            np.testing.assert_allclose(v, u, rtol=1e-6, atol=1e-6, err_msg=str(calls[k]))


def test_the_zero_size_check_sees_every_kind_of_input():
    """The check on every call of a plain hybridized block (its fast path reads dense
    NDArrays' shapes from MXNet): nested, None, scalar and unknown shapes as Gluon flattens
    them."""
    full, empty = mx.nd.ones((2, 3)), mx.nd.array(np.ones((0, 3)))
    check = hybrid._has_zero_size_input
    assert not check((full,)) and not check((full, full))
    assert check((empty,)) and check((full, empty))
    assert check(([full, [empty]],)) and not check(([full, [full]],))
    assert check((None, empty)) and not check((full, None))
    assert not check((mx.nd.NDArray(mx.nd.ndarray._new_empty_handle()),))   # (shape unknown)
    with mx.util.np_shape(True):
        assert not check((mx.nd.array(np.float32(1.0)),))   # (a scalar: no axis)


class _Listed(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, xs):
        return F.sum(xs[0], axis=0) + F.sum(xs[1], axis=0)


def test_an_empty_array_in_a_list_input_after_a_full_call():
    """A block taking a list of arrays (the check's slow path): after a call on full arrays,
    one empty array in the list computes as eager code does."""
    net = _Listed()
    net.hybridize()
    for rows in (3, 0, 2):
        xs = [mx.nd.array(np.full((rows, 2), 2.0)), mx.nd.ones((4, 2))]
        np.testing.assert_allclose(net(xs).asnumpy(), _Listed()(xs).asnumpy())


_READS = {   # how a body reads a parameter of deferred shape, computed outside it
    "expand_dims, reshape(-1)": (lambda F, w: F.expand_dims(w, axis=0).reshape((-1,)), (0,)),
    "transpose, reshape(-1)": (lambda F, w: F.transpose(w).reshape((-1,)), (0, 1)),
    "tanh": (lambda F, w: F.tanh(w), (0,)),
}


class _DeferredRead(mx.gluon.HybridBlock):
    def __init__(self, ours, read, **kwargs):
        super().__init__(**kwargs)
        self.ours, self.read = ours, read
        with self.name_scope():
            self.w = self.params.get("w", shape=_READS[read][1], allow_deferred_init=True)

    def hybrid_forward(self, F, x, w):
        v = _READS[self.read][0](F, w)
        loop = gluon_cf.foreach if self.ours else F.contrib.foreach
        out, states = loop(lambda d, s: (d * v, [s[0] + d * v]), x, [F.zeros((3,))])
        return out, states[0]


@pytest.mark.parametrize("read", sorted(_READS))
def test_a_deferred_parameter_read_in_a_body_gets_mxnets_shape(read):
    """A parameter declared of shape (0,) (or (0, 1)) read in a foreach body through
    expand_dims or transpose and a reshape(-1): MXNet's foreach infers its shape (its
    declared rank known, the reshape inferred backwards); gluon_cf's backward inference left
    it unknown (Deferred initialization failed: "Cannot decide shape"), as it passed MXNet
    only the complete shapes of the segment's inputs."""
    got = []
    for ours in (False, True):
        net = _DeferredRead(ours, read, prefix="n_")
        net.initialize(mx.init.Uniform(0.5))
        net.hybridize()
        mx.random.seed(0)
        out, state = net(mx.nd.array(np.arange(6).reshape(2, 3) / 5.))
        got.append((net.w.shape, net.w.data().asnumpy(), out.asnumpy(), state.asnumpy()))
    (shape, *want), (got_shape, *values) = got
    assert got_shape == shape
    for w, g in zip(want, values):
        np.testing.assert_allclose(g, w, rtol=1e-6)


NESTED = r'''
import faulthandler, json, sys
faulthandler.dump_traceback_later(%(limit)d, exit=True)
sys.path.insert(0, "tests")
import mxnet as mx
from mxnet import autograd
from test_remat_gates_review import ThenTwice as Inner, inputs, net_of, state

MODE = %(mode)r


def run(remat):
    net = net_of(remat)
    if MODE == "add":
        for p in net.collect_params().values():
            p.grad_req = "add"
    x = inputs(1)
    x.attach_grad()
    with autograd.record():
        y = net(x, 2).sum()

    def nested():
        if MODE == "twice":
            y.backward()   # (frees the graph: the next y.backward() fails)
        elif MODE == "bad head":
            y.backward(mx.nd.ones((5, 5)))
        else:
            y.backward(retain_graph=True)
    out = {}
    u = inputs(3)
    u.attach_grad()
    try:
        with autograd.record():
            z = Inner(nested)(u).sum()
        z.backward()
        mx.nd.waitall()
        out["u"] = u.grad.asnumpy().tolist()
    except mx.MXNetError:
        out["u"] = "failed"
    try:
        y.backward()
        mx.nd.waitall()
        out["again"] = [g.tolist() for _, g, _ in state(net)]
    except mx.MXNetError:
        out["again"] = "failed"
    with autograd.record():   # (a fresh pass runs: no lock kept)
        w = net(x, 2).sum()
    w.backward()
    mx.nd.waitall()
    out["fresh"] = [g.tolist() for _, g, _ in state(net)]
    out["x"] = x.grad.asnumpy().tolist()
    return out


print("RESULT " + json.dumps({"remat": run(True), "plain": run(False)}), flush=True)
'''


def _flat(value):
    return value if isinstance(value, str) else np.concatenate(
        [np.ravel(np.asarray(v, np.float64)) for v in value])


@pytest.mark.parametrize("mode", ["twice", "bad head", "add"])
def test_a_failing_or_accumulating_pass_inside_a_functions_backward(mode):
    """A pass of remat calls inside an ``autograd.Function``'s backward that fails (the graph
    freed by it, a head gradient of the wrong shape) or accumulates (grad_req 'add'): plain
    MXNet's errors and gradients, no lock kept (the next passes run), no hang (before the
    merge: the engine hung)."""
    import json
    done = run_python(NESTED % {"limit": 80, "mode": mode}, timeout=100)
    assert done is not None, "timed out: a pass inside the Function's backward hung"
    assert done.returncode == 0, done.stdout + done.stderr
    got = json.loads([ln for ln in done.stdout.splitlines()
                      if ln.startswith("RESULT ")][0][len("RESULT "):])
    for key in got["plain"]:
        a, b = _flat(got["remat"][key]), _flat(got["plain"][key])
        if isinstance(a, str) or isinstance(b, str):
            assert a == b, (mode, key, a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=key)


@pytest.mark.xfail(strict=True, reason="left: remat hands a closure array its gradient "
                   "through the array's marking at backward time, MXNet through the one "
                   "recorded (see the report of round 23's review)")
def test_grad_req_changed_between_record_and_backward_as_mxnet():
    """``p.grad_req = 'add'`` after ``record()`` and before ``backward()`` re-marks the
    parameters with new gradient arrays: MXNet writes into the old ones (``p.grad()`` stays
    zero); eager remat calls write into the new ones."""
    got = {}
    for remat in (True, False):
        net = net_of(remat)
        with autograd.record():
            y = net(inputs(1), 2).sum()
        for p in net.collect_params().values():
            p.grad_req = "add"
        y.backward()
        got[remat] = [g for _, g, _ in state(net)]
    for a, b in zip(got[True], got[False]):
        np.testing.assert_allclose(a, b, atol=1e-7)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-n", "0", "-q"]))
