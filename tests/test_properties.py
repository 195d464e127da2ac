"""Property-based tests (hypothesis, issue 10 item 11): the ops against their pure-Python
reference semantics (the docstrings' few lines of plain Python, here on numpy) over random
shapes, lengths, numbers of states and predicates, eager and hybridized, forward and
gradients. Derandomized (a fixed seed) with a bounded number of examples, so CI is repeatable;
the number of examples run is printed with ``-s``."""
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st
from mxnet import autograd, nd

import gluon_cf
from test_ops_errors import Block   # HybridBlock(fn): hybrid_forward(F, *xs) = fn(F, *xs)

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))
COUNT = {"foreach": 0, "while_loop": 0, "cond": 0, "masks": 0}


def run(fn, arrays, hybridize):
    """Outputs and input gradients (head gradient 1 on every output) of ``fn`` on ``arrays``."""
    net = Block(fn)
    if hybridize:
        net.hybridize()
    xs = [nd.array(a) for a in arrays]
    for x in xs:
        x.attach_grad()
    with autograd.record():
        outs = net(*xs)
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        flat = []
        for o in outs:
            flat.extend(o if isinstance(o, (list, tuple)) else [o])
        loss = sum(o.sum() for o in flat)
    loss.backward()
    return [o.asnumpy() for o in flat], [x.grad.asnumpy() for x in xs]


shapes = st.tuples(st.integers(1, 4), st.integers(1, 3))


@SETTINGS
@given(length=st.integers(1, 5), shape=shapes, num_states=st.integers(1, 3),
       scale=st.floats(-1.5, 1.5), hybridize=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_foreach_matches_python_reference(length, shape, num_states, scale, hybridize, seed):
    rng = np.random.RandomState(seed)
    data = rng.uniform(-1, 1, (length,) + shape).astype(np.float32)
    states = [rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(num_states)]

    def body(d, s):                      # out_t = d * s0 ; s_k <- tanh(s_k * scale + d)
        return d * s[0], [F_.tanh(x * scale + d) for x in s]

    # Reference semantics (foreach's docstring), in numpy.
    ref_states, ref_outs = [s.copy() for s in states], []
    for t in range(length):
        ref_outs.append(data[t] * ref_states[0])
        ref_states = [np.tanh(x * scale + data[t]) for x in ref_states]

    def fn(F, d, *s):
        global F_
        F_ = F
        outs, new_states = gluon_cf.foreach(body, d, list(s))
        return [outs] + list(new_states)

    got, grads = run(fn, [data] + states, hybridize)
    np.testing.assert_allclose(got[0], np.stack(ref_outs), rtol=1e-5, atol=1e-6)
    for g, r in zip(got[1:], ref_states):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
    # Gradients: eager gluon_cf (plain Python loop) is the oracle for hybridized.
    if hybridize:
        _, eager_grads = run(fn, [data] + states, False)
        for g, e in zip(grads, eager_grads):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
    COUNT["foreach"] += 1


@SETTINGS
@given(limit=st.integers(0, 6), max_iterations=st.integers(1, 6), shape=shapes,
       hybridize=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_while_loop_matches_python_reference(limit, max_iterations, shape, hybridize, seed):
    x0 = np.random.RandomState(seed).uniform(-1, 1, shape).astype(np.float32)

    def fn(F, x):
        outs, final = gluon_cf.while_loop(lambda i, v: i < limit,
                                          lambda i, v: (v * 2, [i + 1, F.sin(v) + 0.5]),
                                          [F.zeros((1,)), x], max_iterations=max_iterations)
        if isinstance(outs, list) and outs == []:   # eager, no step: MXNet's [], func not called
            assert limit == 0 and not hybridize
            outs = F.zeros((max_iterations,) + shape)
        return [outs] + list(final)

    # Reference (while_loop's docstring): run while cond holds, at most max_iterations steps;
    # the output rows after the last step are zeros (gluon_cf's documented choice).
    i, v, outs = 0, x0.copy(), []
    while i < limit and len(outs) < max_iterations:
        outs.append(v * 2)
        i, v = i + 1, np.sin(v) + 0.5
    expected = np.zeros((max_iterations,) + shape, np.float32)
    if outs:
        expected[:len(outs)] = np.stack(outs)
    got, grads = run(fn, [x0], hybridize)
    np.testing.assert_allclose(got[0], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], [i])
    np.testing.assert_allclose(got[2], v, rtol=1e-5, atol=1e-6)
    COUNT["while_loop"] += 1


@SETTINGS
@given(value=st.floats(-3, 3, width=32, allow_subnormal=False),
       threshold=st.floats(-3, 3, width=32, allow_subnormal=False), shape=shapes,
       pred_dtype=st.sampled_from(["float32", "int32", "uint8"]), hybridize=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_cond_matches_python_reference(value, threshold, shape, pred_dtype, hybridize, seed):
    x = np.random.RandomState(seed).uniform(-1, 1, shape).astype(np.float32)
    c = np.array([value], np.float32)

    def fn(F, x, c):
        pred = (c > threshold).astype(pred_dtype)
        return gluon_cf.cond(pred, lambda: F.broadcast_mul(F.exp(x), c),
                             lambda: F.broadcast_sub(x, c))

    taken = np.float32(value) > np.float32(threshold)
    expected = np.exp(x) * c if taken else x - c
    expected_grad_x = np.exp(x) * c if taken else np.ones_like(x)
    got, grads = run(fn, [x, c], hybridize)
    np.testing.assert_allclose(got[0], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads[0], expected_grad_x, rtol=1e-5, atol=1e-6)
    COUNT["cond"] += 1


@SETTINGS
@given(rows=st.integers(1, 6), cols=st.integers(1, 3), data=st.data(),
       hybridize=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_masked_rows_match_numpy(rows, cols, data, hybridize, seed):
    """Issue 12: boolean_mask inside a cond branch and a foreach body, over random masks (at
    least one row kept), against numpy: values, and gradients (1 on every kept row)."""
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=rows, max_size=rows)), bool)
    mask[data.draw(st.integers(0, rows - 1))] = True
    x = np.random.RandomState(seed).uniform(-1, 1, (rows, cols)).astype(np.float32)
    m = mask.astype(np.float32)

    def fn(F, x, m):
        picked = gluon_cf.cond(m.sum() > 0, lambda: F.contrib.boolean_mask(x, m) * 3,
                               lambda: x)
        means, _ = gluon_cf.foreach(
            lambda t, s: (F.contrib.boolean_mask(F.broadcast_mul(x, t.reshape((1, 1))),
                                                 m).mean(axis=0), s),
            F.arange(1, 3), [F.zeros((1,))])
        return picked, means

    got, grads = run(fn, [x, m], hybridize)
    kept = x[mask]
    np.testing.assert_allclose(got[0], kept * 3, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], np.stack([kept.mean(axis=0), 2 * kept.mean(axis=0)]),
                               rtol=1e-5, atol=1e-6)
    # d/dx: 3 from the cond, (1 + 2) / kept rows from the two means, on kept rows only
    expected = np.where(mask[:, None], 3 + 3.0 / mask.sum(), 0).astype(np.float32)
    np.testing.assert_allclose(grads[0], np.broadcast_to(expected, x.shape), rtol=1e-5,
                               atol=1e-6)
    COUNT["masks"] += 1


def test_report_examples_run():
    """Runs last in this file: how many examples each property ran (shown with -s)."""
    print("hypothesis examples run:", COUNT)
    assert all(n > 0 for n in COUNT.values()), COUNT
