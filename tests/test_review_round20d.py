"""Review of round 20's lists sliced after tensor loops and zero-size refusals (issue 24, left
over), as a user porting decoder code: slices past the list's ends, of lists with items before
the loop, and ``reversed`` of a slice give plain Python's values and gradients, eager and
hybridized, on one block's calls of counts 0 to 6; ``SequenceReverse`` and ``pick`` of a
zero-size array, which end MXNet 1.9.1's process (measured: SIGFPE, a segmentation fault), are
a ZeroSizeError at the user's line (``operators.CRASHES_ON_ZERO_SIZE``), in a subprocess with a
timeout."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_cf

from conftest import MODES, set_mode
from test_autograph_list_slices import assert_counts_are_pythons
from test_zero_size_crashes import check_refused_or_expected

HERE = __file__
COUNTS = (3, 1, 0, 2, 5, 4, 1, 0, 6)


class PastTheEnds(gluon.HybridBlock):
    """Slices past the list's ends (Python keeps what there is) and reversed of a slice."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        return F.concat(F.concat(x * 0, *outs[-5:], x * 2, dim=0),
                        F.concat(x * 0, *outs[3:], dim=0) * 3,
                        F.concat(x * 0, *outs[-4:-2], dim=0) * 5,
                        F.concat(x * 0, *outs[:-3], dim=0) * 7,
                        F.concat(x * 0, *reversed(outs[1:]), dim=0) * 11,
                        F.concat(x * 0, *reversed(outs[1:][-2:]), dim=0) * 13,
                        F.concat(x * 0, *outs[1:][-3:][:-1], dim=0) * 17, dim=0)

class Prefixed(gluon.HybridBlock):
    """Items before the loop: slices across them and the loop's rows."""

    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = [x * 10, x * -20]
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        return F.concat(F.concat(*outs[1:], dim=0), F.concat(*outs[-3:], dim=0) * 3,
                        F.concat(x, *reversed(outs[:-1]), dim=0) * 5, dim=0)


def _run(fn, x, n):
    x = mx.nd.array(x)
    x.attach_grad()
    try:
        with autograd.record():
            out = fn(x, mx.nd.array([n]))
            loss = (out * out).sum()
        loss.backward()
        return out.asnumpy(), x.grad.asnumpy()
    except (ValueError, IndexError, TypeError, mx.MXNetError) as err:
        return type(err)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("block_class", [PastTheEnds, Prefixed], ids=lambda c: c.__name__)
def test_slices_past_the_ends_are_pythons(mode, block_class):
    net = block_class()
    set_mode(net, mode)
    plain = lambda x, n: block_class.hybrid_forward.__wrapped__(None, mx.nd, x, n)  # noqa
    assert_counts_are_pythons(plain, net, [1.5, -2.0], COUNTS, rtol=1e-5, at_least=7, run=_run)


class LoopOverDropped(gluon.HybridBlock):
    @gluon_cf.autograph
    def hybrid_forward(self, F, x, n):
        outs = []
        i = F.zeros((1,))
        while F.sum(i) < F.sum(n):
            outs.append(F.broadcast_mul(x, i + 1))
            i = i + 1
        acc = x
        for o in outs[1:]:
            acc = acc * 2 + o
        return acc


def test_a_loop_over_a_slice_that_may_be_empty_is_pythons():
    """(It was refused; it runs under a cond on the count now: tests/test_autograph_list_parts.py.)"""
    net = LoopOverDropped()
    net.hybridize()
    plain = lambda x, n: LoopOverDropped.hybrid_forward.__wrapped__(None, mx.nd, x, n)  # noqa
    for n in (3, 1, 0, 2):
        want, got = _run(plain, [1.5, -2.0], n), _run(net, [1.5, -2.0], n)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, err_msg=f"n={n}")


SCENARIO = r'''
import sys
import mxnet as mx
from mxnet import autograd, gluon
import gluon_cf

variant = %(variant)r


class Masked(gluon.HybridBlock):
    def hybrid_forward(self, F, x, m):
        def then():
            kept = F.contrib.boolean_mask(x, m)
            if variant == "SequenceReverse":
                got = F.SequenceReverse(kept)
            else:
                got = F.pick(kept, F.zeros((3, 2)), axis=0, keepdims=True)
            return F.sum(got, axis=0, keepdims=True) + F.sum(x, axis=0, keepdims=True)
        return gluon_cf.cond(F.sum(x) > 0, then, lambda: F.sum(x, axis=0, keepdims=True))


for hybrid in (False, True):
    net = Masked()
    if hybrid:
        net.hybridize()
    x = mx.nd.arange(12).reshape((2, 3, 2)) + 1
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
    """Plain numpy: the value and x's gradient for a mask keeping some rows."""
    x = np.arange(12, dtype=np.float64).reshape(2, 3, 2) + 1
    kept = x[np.array(mask) > 0]
    grad = np.ones_like(x)
    if variant == "SequenceReverse":
        got = kept[::-1]
        grad[np.array(mask) > 0] += 1
    else:
        got = kept[:1]
        grad[np.flatnonzero(np.array(mask) > 0)[0]] += 1
    return (got.sum(axis=0, keepdims=True) + x.sum(axis=0, keepdims=True)).tolist(), \
        grad.tolist()


@pytest.mark.parametrize("variant, line", [
    ("SequenceReverse", "got = F.SequenceReverse(kept)"),
    ("pick", "got = F.pick(kept, F.zeros((3, 2)), axis=0, keepdims=True)")])
def test_zero_size_sequence_reverse_and_pick_are_refused_not_a_crash(variant, line):
    check_refused_or_expected(SCENARIO % {"variant": variant}, variant, line,
                              lambda mask: _expected(variant, mask))
