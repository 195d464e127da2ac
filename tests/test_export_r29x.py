"""Round 29x (issue 24, items 4 to 6) on export: loops of no step whose step shapes follow no
input, past the shape plan's sizes, float16, and the exported symbol files' attributes.

* a while_loop that ran no step, whose step output's dim follows no input as ``p * d + q``
  (``dot`` of a kept row with itself, flattened: d * d) or whose input is wider than the shape
  plan's runs (x of width 1100), probed func for the zero rows' shape, and func's ``take`` of
  a row of none failed onnxruntime and ``load`` (a Gather error, no user line) where Gluon
  gives zero rows: now the probe's gathers stay in range (NOTE [dims a loop's rows follow]).
"""
import numpy as np
import pytest

import mxnet as mx

import gluon_cf
from test_export_r28x import _assert_runs_equal, _runs


class _DotOfKeptRows(mx.gluon.HybridBlock):
    """Step output (1, d * d): the outer product of a kept row with itself, flattened."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m).reshape((1,))

        def body(i):
            r = F.take(kept, i, mode="raise").reshape((-1, 1))
            return F.dot(r, r, transpose_b=True).reshape((1, -1)), [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < count, body, [F.zeros((1,))],
                                      max_iterations=3)
        return outs


class _PickOfKeptRows(mx.gluon.HybridBlock):
    """A GatherElements (``pick``) and a clipped take of a kept row: (1, d) and (1, 1)."""
    def hybrid_forward(self, F, x, m):
        kept = F.contrib.boolean_mask(x, m)
        count = F.sum(m).reshape((1,))

        def body(i):
            r = F.take(kept, i, mode="clip")
            picked = F.pick(r, F.zeros((1,)), axis=-1, keepdims=True)
            return [F.concat(r, r * r, dim=-1), picked], [i + 1]
        outs, _ = gluon_cf.while_loop(lambda i: i < count, body, [F.zeros((1,))],
                                      max_iterations=2)
        return F.concat(outs[0], F.broadcast_mul(outs[1], F.ones_like(outs[0])), dim=-1)


def _case(rng, n, d, flags):
    return [rng.uniform(-1, 1, (n, d)).astype(np.float32), np.array(flags, np.float32)]


@pytest.mark.parametrize("cls", [_DotOfKeptRows, _PickOfKeptRows])
def test_a_loop_of_no_step_whose_step_dims_follow_no_input_exports(cls, tmp_path):
    """Masks keeping 0, 1 and 2 rows at widths 2 to 6 (d * d columns, 4 to 36): each
    exported model equals Gluon; with no row kept both failed in the probe's Gather."""
    net = cls()
    net.hybridize()
    rng = np.random.RandomState(0)
    runs = _runs(net, _case(rng, 3, 4, [1, 0, 1]), {0: [0, 1], 1: [0]}, tmp_path)
    _assert_runs_equal(net, runs, [_case(rng, 3, 3, [0, 0, 0]), _case(rng, 2, 5, [0, 1]),
                                   _case(rng, 1, 2, [0]), _case(rng, 2, 6, [0, 0]),
                                   _case(rng, 4, 4, [1, 1, 0, 0])])


def test_a_loop_of_no_step_past_the_planned_widths_exports(tmp_path):
    """x of widths 1100 and 2000 (the shape plan's runs stop near 1031), no row kept: Gluon
    gives (4, 1, width) zeros; the exported models failed in the probe's Gather."""
    import hostile_programs28x as P
    net = P.WhileOverKeptRowsTakeRaise()
    net.hybridize()
    rng = np.random.RandomState(1)
    runs = _runs(net, _case(rng, 3, 4, [1, 0, 1]), {0: [0, 1], 1: [0]}, tmp_path)
    _assert_runs_equal(net, runs, [_case(rng, 2, 1100, [0, 0]), _case(rng, 1, 2000, [0]),
                                   _case(rng, 2, 1100, [0, 1])])
