"""The recursion API: mutual recursion, loops inside recursive functions, explicit invoke, errors."""
import numpy as np
import pytest
import mxnet as mx
from mxnet import autograd, gluon, nd

import gluon_cf

TOL = dict(rtol=1e-5, atol=1e-6)


class Collatz(gluon.HybridBlock):
    """Mutual recursion: even(n) and odd(n) call each other; counts steps to reach 1, with a
    learned scale applied at every step so that gradients flow through the recursion."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.scale = self.params.get("scale", shape=(1,), init=mx.init.Constant(0.9))

    def hybrid_forward(self, F, n, scale):
        @gluon_cf.recursive
        def even(n, acc):
            return gluon_cf.cond(n <= 1, lambda: acc,
                                 lambda: gluon_cf.invoke(step, n / 2, acc * scale))

        @gluon_cf.recursive
        def odd(n, acc):
            return gluon_cf.cond(n <= 1, lambda: acc, lambda: step(3 * n + 1, acc * scale + 1))

        @gluon_cf.recursive
        def step(n, acc):
            is_even = F.round(n / 2) * 2 == n
            return gluon_cf.cond(is_even, lambda: even(n, acc), lambda: odd(n, acc))

        return step(n, F.ones_like(n))


def _collatz_reference(n, scale):
    acc = 1.0
    while n > 1:
        if n % 2 == 0:
            n, acc = n // 2, acc * scale
        else:
            n, acc = 3 * n + 1, acc * scale + 1
    return acc


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("start", [2, 6, 7, 27])
def test_mutual_recursion_matches_python(start, hybridize):
    net = Collatz()
    net.initialize()
    if hybridize:
        net.hybridize()
    n = nd.array([start])
    with autograd.record():
        out = net(n)
    out.backward()
    expected = _collatz_reference(start, 0.9)
    np.testing.assert_allclose(out.asnumpy(), [expected], rtol=1e-4)
    eps = 1e-3
    numeric = (_collatz_reference(start, 0.9 + eps) - _collatz_reference(start, 0.9 - eps)) / (2 * eps)
    np.testing.assert_allclose(net.scale.grad().asnumpy(), [numeric], rtol=2e-2, atol=1e-3)


class SumOfScans(gluon.HybridBlock):
    """A recursive function with a foreach inside: f(k) = scan(x * k) + f(k - 1), f(0) = 0."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=3, flatten=False)

    def hybrid_forward(self, F, x, k):
        @gluon_cf.recursive
        def f(k):
            def more():
                def body(x_t, states):
                    h = F.tanh(self.dense(x_t) + states[0])
                    return h, [h]
                outs, _ = gluon_cf.foreach(body, F.broadcast_mul(x, F.reshape(k, (1, 1, 1))),
                                           [F.zeros((1, 3))])
                return outs.sum(axis=0) + f(k - 1)
            return gluon_cf.cond(k < 1, lambda: F.zeros((1, 3)), more)
        return f(k)


def test_recursion_with_foreach_inside_matches_eager():
    x = nd.random.uniform(-1, 1, shape=(4, 1, 3))
    results = []
    for hybridize in (False, True):
        mx.random.seed(0)
        net = SumOfScans()
        net.initialize(mx.init.Xavier())
        if hybridize:
            net.hybridize()
        with autograd.record():
            out = net(x, nd.array([3]))
        out.backward()
        results.append((out.asnumpy(), net.dense.weight.grad().asnumpy().copy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, **TOL)


class Forever(gluon.HybridBlock):
    def __init__(self, max_depth, **kwargs):
        super().__init__(**kwargs)
        self.max_depth = max_depth

    def hybrid_forward(self, F, x):
        @gluon_cf.recursive(max_depth=self.max_depth)
        def loop(x):
            return gluon_cf.cond(x < 0, lambda: x * 2, lambda: loop(x + 1))
        return loop(x)


def test_depth_bound_eager_names_function_and_depth():
    net = Forever(max_depth=50)
    net.initialize()
    with pytest.raises(gluon_cf.RecursionDepthError, match=r"'loop' exceeded max_depth=50"):
        net(nd.array([0]))


@pytest.mark.parametrize("executor", ["batched", "unbatched"])
def test_depth_bound_hybridized_is_an_error_not_a_hang(executor, capfd):
    net = Forever(max_depth=300)
    net.initialize()
    net.hybridize()
    previous = gluon_cf.get_executor()
    gluon_cf.set_executor(executor)
    try:
        with pytest.raises(gluon_cf.RecursionDepthError,
                           match=r"'loop' exceeded max_depth=300 nested calls") as raised:
            net(nd.array([0])).asnumpy()
    finally:
        gluon_cf.set_executor(previous)
    # Short: it starts at the user's call, not in MXNet's worker thread or the executor.
    assert len(raised.traceback) <= 6, [str(e) for e in raised.traceback]
    assert capfd.readouterr().out == ""
    # A call that reaches its base case still works afterwards.
    np.testing.assert_allclose(net(nd.array([-3])).asnumpy(), [-6])


def test_no_base_case_is_rejected_when_hybridizing():
    class NoBase(gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            @gluon_cf.recursive
            def f(x):
                return f(x + 1) * 2
            return f(x)
    net = NoBase()
    net.hybridize()
    with pytest.raises(ValueError, match=r"gluon_cf.recursive: 'f' has no base case"):
        net(nd.array([0]))


def test_calls_with_different_argument_structure_are_rejected():
    class Mismatch(gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            @gluon_cf.recursive
            def f(a, b):
                return gluon_cf.cond(a < 0, lambda: a + b, lambda: f(a - 1))
            return f(x, x)
    net = Mismatch()
    net.hybridize()
    with pytest.raises(TypeError, match=r"gluon_cf.invoke: 'f' is called with arguments"):
        net(nd.array([2]))


def test_invoke_rejects_non_callables_and_mixed_arguments():
    with pytest.raises(TypeError, match=r"gluon_cf.invoke at .*test_recursion_api.py:\d+: fn must be callable"):
        gluon_cf.invoke(3, nd.array([1]))
    with pytest.raises(TypeError, match=r"gluon_cf.invoke at .*test_recursion_api.py:\d+: the arguments of 'f' mix"):
        gluon_cf.invoke(gluon_cf.recursive(lambda a, b: a, name="f"), nd.array([1]),
                        mx.sym.var("x"))


# ---- issue 24, item 7: a base case that is a loop of no step ------------------------------------

# n-ary trees as CSR arrays: the children of node i are CHILD_IDX[CHILD_PTR[i]:CHILD_PTR[i+1]].
CHILDREN = [[1, 2, 3], [4, 5], [], [6, 7, 8, 9], [], [10], [], [], [], [], []]
CHILD_PTR = np.cumsum([0] + [len(c) for c in CHILDREN]).astype(np.float32)
CHILD_IDX = np.array(sum(CHILDREN, []), np.float32)


class CountNodes(gluon.HybridBlock):
    """A weighted count of the nodes under a node: recursion over the children inside a
    while_loop, whose leaves (no child) are a loop of no step, with no cond at all."""

    def __init__(self, max_iterations, **kwargs):
        super().__init__(**kwargs)
        self.max_iterations = max_iterations
        with self.name_scope():
            self.w = self.params.get("w", shape=(1,), init=mx.init.Constant(0.7))

    def hybrid_forward(self, F, child_ptr, child_idx, root, w):
        @gluon_cf.recursive
        def count(i):
            start, end = F.take(child_ptr, i), F.take(child_ptr, i + 1)

            def add_child(k, total):
                return None, [k + 1, total + count(F.take(child_idx, k))]

            own = F.broadcast_mul(F.ones_like(i), w)   # one row per invocation: batches
            _, (_, total) = gluon_cf.while_loop(lambda k, total: k < end, add_child, [start, own],
                                                max_iterations=self.max_iterations)
            return F.tanh(total * 0.5) + own

        return count(root)


def _count_reference(i, w):
    """Plain Python recursion over the children lists."""
    total = w * 1.0
    for child in CHILDREN[i]:
        total = total + _count_reference(child, w)
    return nd.tanh(total * 0.5) + w


@pytest.mark.parametrize("max_iterations", [4, None])
@pytest.mark.parametrize("mode", ["eager", "unbatched", "batched"])
@pytest.mark.parametrize("root", [0, 1, 2, 3])
def test_base_case_of_a_loop_of_no_step(root, mode, max_iterations):
    """Leaves run a while_loop of no step, which never calls its body (a call would recurse
    forever eagerly; hybridized, the function had "no base case"); values and gradients are
    plain Python's, eager and hybridized with both executors."""
    w = nd.array([0.7])
    w.attach_grad()
    with autograd.record():
        expected = _count_reference(root, w)
    expected.backward()
    net = CountNodes(max_iterations)
    net.initialize()
    previous = gluon_cf.get_executor()
    if mode != "eager":
        gluon_cf.set_executor(mode)
        net.hybridize()
    try:
        with autograd.record():
            got = net(nd.array(CHILD_PTR), nd.array(CHILD_IDX), nd.array([root]))
        got.backward()
    finally:
        gluon_cf.set_executor(previous)
    np.testing.assert_allclose(got.asnumpy(), expected.asnumpy(), **TOL)
    np.testing.assert_allclose(net.w.grad().asnumpy(), w.grad.asnumpy(), **TOL)


def test_malloc_arena_cap_changes_nothing_off_glibc_or_where_the_user_set_it(monkeypatch):
    """NOTE [malloc arenas under a limit]: off glibc (no ``CS_GNU_LIBC_VERSION``, as on macOS
    and musl; no ``os.confstr``, as on Windows) and where ``MALLOC_ARENA_MAX`` is set, the cap
    calls no ``mallopt``; the arenas of this process are left as they are."""
    from gluon_cf.recursion import malloc_arenas

    def no_name(name):
        raise ValueError("unrecognized configuration name")

    monkeypatch.setattr(malloc_arenas, "_capped", False)
    monkeypatch.setattr(malloc_arenas.os, "confstr", no_name)
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert malloc_arenas._glibc() is None
    assert malloc_arenas.cap_arenas() is False
    monkeypatch.delattr(malloc_arenas.os, "confstr")
    assert malloc_arenas._glibc() is None
    assert malloc_arenas.cap_arenas() is False
    monkeypatch.undo()
    monkeypatch.setattr(malloc_arenas, "_capped", False)
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")
    monkeypatch.setattr(malloc_arenas, "_glibc", lambda: pytest.fail("mallopt looked up"))
    assert malloc_arenas.cap_arenas() is False


def test_free_memory_counts_only_where_malloc_reports_it(monkeypatch):
    """NOTE [memory after an address-space error]: within the headroom of the limit, memory
    malloc holds free counts only where it can be read (glibc's ``mallinfo2``), and never
    within ``ADDRESS_SPACE_FLOOR`` of the limit; a reading covers ``slack / 2 MiB`` checks."""
    from gluon_cf.recursion import api, malloc_arenas
    limit = 2 << 30
    used = limit - (32 << 20)
    monkeypatch.setattr(api._eager, "free_credit", None, raising=False)
    monkeypatch.setattr(malloc_arenas, "free_bytes", lambda: None)
    assert not api._freed_memory_covers(used, limit)
    monkeypatch.setattr(malloc_arenas, "free_bytes", lambda: 40 << 20)   # slack 8 MiB
    assert api._freed_memory_covers(used, limit)
    assert api._eager.free_credit == (used, 4)
    monkeypatch.setattr(malloc_arenas, "free_bytes", lambda: pytest.fail("read again"))
    for left in (3, 2, 1, 0):
        assert api._freed_memory_covers(used, limit)
        assert api._eager.free_credit == (used, left)
    monkeypatch.setattr(malloc_arenas, "free_bytes", lambda: 16 << 20)   # no slack
    assert not api._freed_memory_covers(used, limit)
    assert api._eager.free_credit is None
    monkeypatch.setattr(malloc_arenas, "free_bytes", lambda: 1 << 30)
    assert not api._freed_memory_covers(limit - (8 << 20), limit)   # the floor
