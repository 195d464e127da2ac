"""Eager loop states may change shape, dtype and structure, as in MXNet 1.9.1's eager
``nd.contrib.foreach``/``while_loop`` (NOTE [eager loop states may change] in
``gluon_cf/ops/eager_loops.py``): each program runs on gluon_cf and on MXNet's own eager ops
(the oracle), values, the final states' containers and gradients under ``autograd.record``;
what MXNet refuses (step outputs that disagree) gluon_cf refuses with the same exception type,
naming the user's line; hybridized, a state that changes is refused, saying why."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from mxnet import autograd, nd

import gluon_cf
from conftest import Block

DATA = nd.array(np.random.RandomState(7).uniform(0.5, 1.5, (3, 4)))


def _fold(loops, x):    # the mxnet.fold test: the (4,) state becomes (1,) after a step
    return loops.foreach(lambda data, states: (data + states[0], states[0] * 2), x, [x[0] * 1])


def _growing_list(loops, x):    # superpointnet's post-processing: a list growing each step
    return loops.foreach(lambda d, s: (d * 2, s + [d.sum() * s[-1]]), x, [x[0].sum()])


def _pam(loops, x):    # a PAM clustering loss: medoids chosen so far, and their costs
    def step(d, s):
        medoids, costs = s
        cost = ((d - medoids[-1]) ** 2).sum()
        return cost, (medoids + [d * 0.5], costs + [cost])
    return loops.foreach(step, x, [[x[0]], []])


def _dtype_and_int(loops, x):   # a float64 state, a state that becomes a Python int
    return loops.foreach(lambda d, s: (d * s[1], (s[0].astype("float64") + d.astype("float64"),
                                                  3)), x, [x[0], nd.ones(1)])


# (the while_loops run max_iterations steps: MXNet leaves the rows after the last step
# uninitialised, gluon_cf zeros them)
def _while_grows(loops, x):
    return loops.while_loop(lambda i, v: i < 3, lambda i, v: (
        i * 2, (i + 1, nd.concat(v, v * 0.5, dim=0))), (nd.zeros(1), x), max_iterations=3)


def _while_shrinks_to_list(loops, x):   # a single loop variable: an array, then a list
    return loops.while_loop(lambda v: v[0].sum() < 1e9, lambda v: (
        v[0].sum(), [[v[0].sum(axis=0) * 2, v[-1]]]), [[x, x[0]]], max_iterations=4)


def _while_dtype(loops, x):
    return loops.while_loop(lambda i, v: i < 2, lambda i, v: (
        i, [i + 1, v.astype("float64") * v.astype("float64")]), [nd.zeros(1), x], 2)


PROGRAMS = [_fold, _growing_list, _pam, _dtype_and_int, _while_grows,
            _while_shrinks_to_list, _while_dtype]


def _leaves(value):
    """Flat (container types, leaves) of a result: the containers must agree too."""
    if isinstance(value, (list, tuple)):
        kinds, leaves = [type(value).__name__ + str(len(value))], []
        for v in value:
            k, lv = _leaves(v)
            kinds += k
            leaves += lv
        return kinds, leaves
    return [type(value).__name__], [value]


def _run(program, loops):
    x = DATA.copy()
    x.attach_grad()
    with autograd.record():
        result = program(loops, x)
        kinds, leaves = _leaves(result)
        arrays = [v for v in leaves if isinstance(v, nd.NDArray)]
        loss = sum(a.astype("float32").sum() for a in arrays)
    loss.backward()
    return kinds, [v.asnumpy() if isinstance(v, nd.NDArray) else v for v in leaves], \
        x.grad.asnumpy()


def _assert_same(program, loops=gluon_cf):
    got, want = _run(program, loops), _run(program, nd.contrib)
    assert got[0] == want[0]
    for g, w in zip(got[1], want[1]):
        assert type(g) is type(w)
        if isinstance(w, np.ndarray):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6)
        else:
            assert g == w
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6)


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_eager_states_change_as_in_mxnet(program):
    _assert_same(program)


# ---- hypothesis: random patterns of change of a list of states, step by step -----------------

CHANGES = {
    "shrink": lambda s, d: s[:-1] + [s[-1].sum(axis=0, keepdims=True)],
    "grow": lambda s, d: s[:-1] + [nd.concat(s[-1], s[-1] * 0.5, dim=0)],
    "f64": lambda s, d: s[:-1] + [s[-1].astype("float64") * 1.5],
    "f32": lambda s, d: s[:-1] + [s[-1].astype("float32") + 1],
    "keep": lambda s, d: s[:-1] + [s[-1] * d.sum().astype(s[-1].dtype)],
    "append": lambda s, d: s + [d * 1],
    "tuple": lambda s, d: tuple(s),
    "list": lambda s, d: list(s),
}


def _pattern_program(pattern, op):
    def body(d, s):
        s = CHANGES[pattern[len(calls)]](list(s) if op == "while" else s, d)
        calls.append(1)
        out = d + sum(v.sum().astype("float32") for v in s)
        return out, s

    calls = []
    if op == "foreach":
        return lambda loops, x: loops.foreach(body, x[:len(pattern)], [x[0]])
    steps = nd.array([len(pattern)])
    return lambda loops, x: loops.while_loop(
        lambda i, s: i < steps, lambda i, s: (lambda o, n: ((o,), [i + 1, n]))(
            *body(x[min(int(i.asscalar()), len(x) - 1)], s)), [nd.zeros(1), [x[0]]],
        max_iterations=len(pattern))


@settings(max_examples=12, deadline=None, derandomize=True)
@given(pattern=st.lists(st.sampled_from(sorted(CHANGES)), min_size=1, max_size=3),
       op=st.sampled_from(["foreach", "while"]))
def test_random_state_changes_match_mxnet(pattern, op):
    program = _pattern_program(pattern, op)
    got = _run(lambda loops, x: program(loops, x), gluon_cf)
    program = _pattern_program(pattern, op)   # (its step counter afresh)
    want = _run(lambda loops, x: program(loops, x), nd.contrib)
    assert got[0] == want[0]
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-6)
        assert g.dtype == w.dtype
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6)


# ---- what MXNet's eager loops refuse: the same exception type, at the user's line --------------

def _line(tag):
    lines = open(__file__).read().splitlines()
    return "%s:%d" % (__file__, next(k for k, t in enumerate(lines) if t.endswith(tag)) + 1)


REFUSED = [   # (program, tag, what gluon_cf's message says after "gluon_cf.<op> at <line>: ")
    (lambda loops: loops.foreach(lambda d, s: (s, nd.concat(s, s, dim=0)),   # R_FE_SHAPE
                                 DATA, DATA[0]), "# R_FE_SHAPE",
     "step output 0 changes shape across steps:\n  step 0: (4,)\n  step 1: (8,)"),
    (lambda loops: loops.foreach(lambda d, s: (s, s.astype("float64")),   # R_FE_DTYPE
                                 DATA, DATA[0]), "# R_FE_DTYPE",
     "step output 0 changes dtype across steps:\n  step 0: float32\n  step 1: float64"),
    (lambda loops: loops.while_loop(lambda v: v.sum() < 99, lambda v: (   # R_WL_SHAPE
        v, nd.concat(v, v, dim=0)), DATA, max_iterations=3), "# R_WL_SHAPE",
     "step output 0 changes shape across steps:\n  step 0: (3, 4)\n  step 1: (6, 4)"),
    (lambda loops: loops.while_loop(lambda a, b: a < 3, lambda a, b: (   # R_WL_VARS
        a, [a + 1]), [nd.zeros(1), DATA], max_iterations=3), "# R_WL_VARS",
     "func returned new_loop_vars structured as [array], but loop_vars is structured as "
     "[array, array]"),
    (lambda loops: loops.foreach(lambda d, s: (d, [s[1].sum(), 3]),   # R_FE_INT
                                 DATA, [DATA[0], DATA[0]]), "# R_FE_INT",
     "body failed at step 1 on states[1], of type int as the step before returned it"),
    (lambda loops: loops.while_loop(lambda i: i < 3, lambda i: (   # R_WL_OUTS
        [i] * int(i.asscalar() + 1), i + 1), nd.zeros(1), max_iterations=3), "# R_WL_OUTS",
     "func returned step_output structured as [array, array] at one step and [array]"),
]


def _refusal(call):
    with pytest.raises(Exception) as info:
        result = call()
        nd.waitall()
        for v in _leaves(result)[1]:
            v.asnumpy()   # (MXNet's foreach fails stacking outputs only when they are read)
    return info.value


@pytest.mark.parametrize("call, tag, text", REFUSED, ids=[r[1][2:] for r in REFUSED])
def test_refused_as_mxnet_refuses_naming_the_line(call, tag, text):
    mxnet_error = _refusal(lambda: call(nd.contrib))
    error = _refusal(lambda: call(gluon_cf))
    assert isinstance(error, type(mxnet_error)), (error, mxnet_error)
    op = "foreach" if "_FE_" in tag else "while_loop"
    assert str(error).startswith("gluon_cf.%s at %s: %s" % (op, _line(tag), text)), str(error)


# ---- hybridized: a state changing shape or structure is refused, naming the line and why ------

def _hybrid_growing(F, x):
    return gluon_cf.foreach(lambda d, s: (d, s + [d]), x, [x])[0]   # H_LIST


def _hybrid_shrinking(F, x, h):
    return gluon_cf.foreach(lambda d, s: (d, F.sum(s, keepdims=True)), x, h)[1]   # H_SHAPE


@pytest.mark.parametrize("fn, shapes, tag, text", [
    (_hybrid_growing, [(3, 4)], "# H_LIST", "states keep one structure across steps"),
    (_hybrid_shrinking, [(3, 4), (4,)], "# H_SHAPE",
     "states changing shape or dtype across steps cannot be hybridized"),
])
def test_hybridized_refuses_states_that_change(fn, shapes, tag, text):
    args = [nd.ones(s) for s in shapes]
    Block(fn)(*args).wait_to_read()   # eagerly it runs (as MXNet's eager foreach)
    net = Block(fn)
    net.hybridize()
    with pytest.raises(ValueError) as info:
        net(*args).asnumpy()
    assert text in str(info.value) and _line(tag) in str(info.value), str(info.value)


# ---- recursion: a recursive function's eager loops are the plain loops ------------------------

def _halving(recurse, loops, cond):
    def fn(x):
        out, states = loops.foreach(lambda d, s: (d + s[-1], s + [s[-1].sum(keepdims=True)]),
                                    x, [x[0]])
        return cond(out.sum() > 60, lambda: out, lambda: recurse(out + len(states)))
    return fn


_recursive = gluon_cf.recursive(_halving(lambda x: _recursive(x), gluon_cf, gluon_cf.cond))


def _plain(x):
    return _halving(_plain, nd.contrib, lambda p, a, b: a() if p.asscalar() else b())(x)


def test_recursion_eager_loops_change_states_as_plain_loops():
    got = _run(lambda loops, x: _recursive(x), None)
    want = _run(lambda loops, x: _plain(x), None)
    np.testing.assert_allclose(got[1][0], want[1][0], rtol=1e-6)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6)
