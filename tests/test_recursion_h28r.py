"""Issue 24, recursion under hostile use (round 28r): a cycle of K mutually recursive functions
hybridized in time polynomial in K, and what this round's hostile programs found. Every value is
compared with an independent oracle (numpy recursion, plain eager Python on NDArrays), forward
and gradients, eager and hybridized."""
import json

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, nd
from mxnet.gluon import HybridBlock, nn

import gluon_cf
from conftest import run_python

TOL = dict(rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# A cycle of K functions: f_k(i) = x_i at a leaf, else tanh(Dense_k(f_{k+1}(l_i) + f_{k+1}(r_i)))

class Cycle(HybridBlock):
    def __init__(self, k, hidden):
        super().__init__()
        self.k = k
        with self.name_scope():
            self.cells = [nn.Dense(hidden, in_units=hidden) for _ in range(k)]
        for j, cell in enumerate(self.cells):
            self.register_child(cell, "cell%d" % j)

    def hybrid_forward(self, F, x, left, right, roots):
        functions = [None] * self.k

        def define(j):
            def f(i):
                callee, li = functions[(j + 1) % self.k], F.take(left, i)
                return gluon_cf.cond(li < 0, lambda: F.take(x, i), lambda: F.tanh(
                    self.cells[j](callee(li) + callee(F.take(right, i)))))
            f.__name__ = "f%d" % j
            return gluon_cf.recursive(f)
        functions[:] = [define(j) for j in range(self.k)]
        outs, _ = gluon_cf.foreach(lambda r, s: ([functions[0](r)], s), roots, [])
        return outs[0]


def complete_tree(depth):
    n = 2 ** (depth + 1) - 1
    left = [2 * i + 1 if 2 * i + 2 < n else -1 for i in range(n)]
    return n, np.array(left, "float32"), np.array([c + 1 if c >= 0 else -1 for c in left],
                                                    "float32")


def cycle_oracle(net, x, left, right, roots):
    ws = [(c.weight.data().asnumpy().astype("float64"), c.bias.data().asnumpy()) for c in
          net.cells]

    def f(j, i):
        if left[i] < 0:
            return x[i].astype("float64")
        w, b = ws[j]
        both = f((j + 1) % net.k, int(left[i])) + f((j + 1) % net.k, int(right[i]))
        return np.tanh(both @ w.T + b)
    return np.stack([f(0, int(r)) for r in roots])[:, None]   # (foreach's rows: (1, H))


def kcycle_main(k):
    """Eager, hybridized (first call timed) and the oracle of a K-cycle; prints a JSON line."""
    import time
    mx.random.seed(0)
    net = Cycle(k, 3)
    net.initialize(mx.init.Xavier())
    n, left, right = complete_tree(3)
    x = nd.array(np.random.RandomState(0).uniform(-1, 1, (n, 3)))
    args = [x, nd.array(left), nd.array(right), nd.array([0, 1, 2])]
    x.attach_grad()
    with autograd.record():
        eager = net(*args)
    eager.backward()
    eager_grad = x.grad.asnumpy().copy()
    net.hybridize()
    start = time.time()
    with autograd.record():
        hybrid = net(*args)
    hybrid.backward()
    first = time.time() - start
    want = cycle_oracle(net, x.asnumpy(), left, right, [0, 1, 2])
    print(json.dumps({"first": first, "eager": float(np.abs(eager.asnumpy() - want).max()),
                      "hybrid": float(np.abs(hybrid.asnumpy() - want).max()),
                      "grad": float(np.abs(x.grad.asnumpy() - eager_grad).max())}))


def test_a_cycle_of_twelve_functions_hybridizes_in_polynomial_time():
    """Before: each function's dtypes inferred again inside every round of its caller's,
    3^K graph inferences (K=8: 12 s, K=9: 36 s, K=12: over 15 min); now ~0.5 s (NOTE [dtypes
    of mutual recursion])."""
    done = run_python("import sys; sys.path.insert(0, 'tests'); import test_recursion_h28r "
                      "as t; t.kcycle_main(12)", timeout=90)
    assert done is not None, "the first hybridized call of a 12-cycle ran past 90 s"
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["eager"] < 1e-5 and got["hybrid"] < 1e-5 and got["grad"] < 1e-5, got
    assert got["first"] < 30, got
