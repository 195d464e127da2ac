"""Issue 24, left over: zero-size values inside a cond branch (a boolean_mask keeping no row)
given to an MXNet 1.9.1 operator that ends the process on them (measured: ``take`` of zero-size
data and ``slice_like`` like a zero-size array: segmentation faults; ``SequenceLast`` and
``SequenceMask`` of zero-size data: SIGFPE; ``Embedding`` of a zero-size weight) are a
ZeroSizeError naming the operator and the user's line, eager and hybridized, on every call,
the block working after (``operators.CRASHES_ON_ZERO_SIZE``); here take and slice_like. Each runs in a subprocess with a
timeout: a signal or a hang fails."""
import pytest

from conftest import run_python

SCENARIO = r'''
import sys
import mxnet as mx
from mxnet import autograd, gluon
import gluon_cf

variant = sys.argv[1] if len(sys.argv) > 1 else %(variant)r


class Masked(gluon.HybridBlock):
    def hybrid_forward(self, F, x, m):
        def then():
            kept = F.contrib.boolean_mask(x, m)
            if variant == "take":
                got = F.take(kept, F.zeros((1,)))
            else:
                got = F.slice_like(x, kept, axes=(0,))
            return F.sum(got, axis=0, keepdims=True) + F.sum(x, axis=0, keepdims=True)
        return gluon_cf.cond(F.sum(x) > 0, then, lambda: F.sum(x, axis=0, keepdims=True))


for hybrid in (False, True):
    net = Masked()
    if hybrid:
        net.hybridize()
    x = mx.nd.array([[1., 2.], [3., 4.]])
    x.attach_grad()
    for mask in ([1., 0.], [0., 0.], [1., 1.], [0., 0.]):
        try:
            with autograd.record():
                y = net(x, mx.nd.array(mask))
            y.backward()
            print("VALUE", hybrid, mask, y.asnumpy().tolist(), x.grad.asnumpy().tolist())
        except gluon_cf.ZeroSizeError as err:
            print("REFUSED", hybrid, mask, str(err).replace("\n", " "))
'''


def _expected(variant, mask):
    """Plain numpy: the branch's value and x's gradient for a mask keeping some rows."""
    import numpy as np
    x = np.array([[1., 2.], [3., 4.]])
    kept = x[np.array(mask) > 0]
    if variant == "take":
        got, grad = kept[:1], np.ones_like(x)
        grad[np.flatnonzero(np.array(mask) > 0)[0]] += 1
    else:
        got = x[:len(kept)]
        grad = np.ones_like(x)
        grad[:len(kept)] += 1
    return (got.sum(axis=0, keepdims=True) + x.sum(axis=0, keepdims=True)).tolist(), \
        grad.tolist()


@pytest.mark.parametrize("variant, op, line", [
    ("take", "take", "got = F.take(kept, F.zeros((1,)))"),
    ("slice_like", "slice_like", "got = F.slice_like(x, kept, axes=(0,))")])
def test_an_operator_mxnet_crashes_on_is_refused_at_the_line(variant, op, line):
    check_refused_or_expected(SCENARIO % {"variant": variant}, op, line,
                              lambda mask: _expected(variant, mask))


def check_refused_or_expected(code, op, line, expected):
    """Runs ``code`` (a SCENARIO printing VALUE/REFUSED lines for four masks, eager and
    hybridized) in a subprocess: a mask keeping no row is refused naming ``op`` at ``line``,
    any other equals ``expected(mask)``'s (value, gradient)."""
    done = run_python(code, timeout=240)
    assert done is not None, "hung"
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [t for t in done.stdout.splitlines() if t.startswith(("VALUE", "REFUSED"))]
    assert len(lines) == 8, done.stdout
    number = [t.strip() for t in code.splitlines()].index(line) + 1
    for text in lines:
        kind, hybrid, rest = text.split(" ", 2)
        mask = [float(v) for v in rest[1:rest.index("]")].split(", ")]
        if sum(mask) == 0:
            assert kind == "REFUSED", text
            assert f"gluon_cf: {op} at <string>:{number}" in text and \
                "end the process" in text, text
        else:
            assert kind == "VALUE", text
            value, grad = expected(mask)
            assert rest.endswith(f"{value} {grad}"), (text, value, grad)
