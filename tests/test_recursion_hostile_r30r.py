"""Round 30r (issue 24): hostile recursion programs (``hostile_programs30r.py``), each against
its plain eager Python recursion (values, input and parameter gradients), eager and
hybridized, and a call history on one hybridized block (NOTE [loops of no step]: a call
failing inside a leaf's empty loop ran its step's recursive calls 20,000 deep first); and
dropout inside a recursion drawing a mask per call."""
import numpy as np
import pytest
from mxnet import autograd, nd
from mxnet.gluon import HybridBlock, nn

import gluon_cf
import hostile_harness
import hostile_programs30r as programs
from conftest import run_python
from test_recursion_hostile2 import make

TOL = (1e-5, 1e-6)


def _oracle(cls, inputs):
    cache = {}

    def oracle(k):
        if k not in cache:
            net = make(cls)
            cache[k] = hostile_harness._outcome(lambda: hostile_harness.run_with_gradients(
                net, inputs[k], type(net).plain_forward))
        return cache[k]
    return oracle


@pytest.mark.parametrize("cls", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_program_equals_plain_python_and_its_call_history(cls):
    inputs = programs.PROGRAMS[cls]
    oracle = _oracle(cls, inputs)

    def check(mode, k, got):
        assert oracle(k)[0] == "value", oracle(k)[1]
        hostile_harness.assert_equal_to_oracle(oracle(k), got, [programs.__file__], TOL,
                                               (mode, k))
    hostile_harness.run_eager_and_hybridized(cls, inputs, make, check)
    hostile_harness.check_call_history(cls, inputs, make, oracle, TOL)


def test_a_failing_call_does_not_run_an_empty_loops_step():
    """A malformed call (x one column wider) fails in the node's Dense: before, each leaf's
    empty while_loop over its children, whose inference failed, ran its step's graph and so
    its recursive calls, 20,000 deep (55-80 s) before the same error."""
    done = run_python(
        "import sys, warnings; sys.path.insert(0, 'tests'); warnings.simplefilter('ignore')\n"
        "import hostile_harness as h, hostile_programs30r as p\n"
        "from test_recursion_hostile2 import make\n"
        "net = make(p.CsrChildSum); net.hybridize()\n"
        "arrays = h.malformed_call(p.NARY[0], 'wider')\n"
        "got = h._outcome(lambda: h.run_with_gradients(net, arrays, record=False))\n"
        "print(got[0], str(got[1]).split(':')[:2])\n", timeout=40)
    assert done is not None, "a failing call ran past 40 s"
    assert done.returncode == 0, done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("error") and "hostile_programs30r.py" in last, last


class DropLeaves(HybridBlock):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def hybrid_forward(self, F, x, left, right, root):
        @gluon_cf.recursive
        def node(i):
            return gluon_cf.cond(F.take(left, i) < 0, lambda: self.drop(F.take(x, i)),
                                 lambda: F.concat(node(F.take(left, i)),
                                                  node(F.take(right, i)), dim=0))
        return node(root)


@pytest.mark.parametrize("hybrid", [False, True])
def test_dropout_in_a_recursion_draws_a_mask_per_call(hybrid):
    """Each leaf's row its own mask, each forward new masks (as eager Python draws them);
    predict mode the identity."""
    n = 31
    left = [2 * i + 1 if 2 * i + 2 < n else -1 for i in range(n)]
    args = [nd.ones((n, 64)), nd.array(left), nd.array([c + 1 if c >= 0 else -1
                                                        for c in left]), nd.array([0])]
    net = DropLeaves()
    net.initialize()
    if hybrid:
        net.hybridize()
    outs = []
    for _ in range(2):
        with autograd.record():
            outs.append(net(*args).asnumpy())
    assert outs[0].shape == (16, 64) and set(np.unique(outs[0])) == {0.0, 2.0}
    assert len({row.tobytes() for row in outs[0]}) == 16
    assert not np.array_equal(outs[0], outs[1])
    assert 0.8 < outs[0].mean() < 1.2
    with autograd.predict_mode():
        np.testing.assert_allclose(net(*args).asnumpy(), np.ones((16, 64)))
