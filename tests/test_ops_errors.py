"""User errors: each raises an exception that names the op, with a pinned message.

Three moments an error can be detected:

* eagerly, when the op runs on NDArrays;
* while tracing, when a hybridized block calls the op on Symbols (raised directly);
* at the first hybridized call, when shapes and dtypes become known. MXNet calls our shape and
  type inference from C++; the error still reaches the caller once, as our own exception type
  with our message and the node's name, and nothing is printed (NOTE [error messages]).

None of them may crash or hang the process; a subprocess checks that a process that hit them
still works and exits.
"""
import re

import mxnet as mx
import numpy as np
import pytest

import gluon_cf
from conftest import Block, run_python

nd = mx.nd
X = nd.ones((2, 3))


def call_hybridized(fn, *shapes, dtype="float32"):
    net = Block(fn)
    net.hybridize()
    out = net(*[nd.ones(s, dtype=dtype) for s in shapes])
    mx.nd.waitall()
    return out


def line_of(case, nth=0):
    """``file:line`` of the call in the ``nth`` table entry named ``case`` (the line after its
    name)."""
    lines = open(__file__).read().splitlines()
    named = [k for k, line in enumerate(lines) if line == '    ("%s",' % case]
    return "%s:%d" % (__file__, named[nth] + 2)


def line_named(case):
    """``file:line`` of the table entry named ``case`` whose call is on the line of its name."""
    lines = open(__file__).read().splitlines()
    named = [k for k, line in enumerate(lines) if line.startswith('    ("%s", ' % case)]
    return "%s:%d" % (__file__, named[0] + 1)


# (the while_vars_structure cases: fewer loop variables than loop_vars, tf.while_loop's body)
WHILE_PAIR_HINT = "; func returns a pair (step outputs, new loop_vars): ([], loop_vars) for " \
    "no step outputs"


def exact(message):
    """Regex that matches ``message`` literally, anywhere in the exception text."""
    return re.escape(message)


# ---------------------------------------------------------------------------------------------
# Eager mode (NDArrays).

def step_output_grows(i):
    return nd.ones((int(i.asscalar()) + 1,)), i + 1


EAGER = [
    ("cond_then_not_callable", lambda: gluon_cf.cond(X.sum() > 0, 1, lambda: X), TypeError,
     f"gluon_cf.cond at {line_named('cond_then_not_callable')}: "
     "then_func must be callable, got int"),
    ("cond_else_not_callable", lambda: gluon_cf.cond(X.sum() > 0, lambda: X, None), TypeError,
     f"gluon_cf.cond at {line_named('cond_else_not_callable')}: "
     "else_func must be callable, got NoneType"),
    ("foreach_body_not_callable", lambda: gluon_cf.foreach("body", X, X), TypeError,
     f"gluon_cf.foreach at {line_named('foreach_body_not_callable')}: "
     "body must be callable, got str"),
    ("while_cond_not_callable", lambda: gluon_cf.while_loop(True, lambda v: (v, v), X,
                                                            max_iterations=2), TypeError,
     f"gluon_cf.while_loop at {line_named('while_cond_not_callable')}: "
     "cond must be callable, got bool"),
    ("while_func_not_callable", lambda: gluon_cf.while_loop(lambda v: v.sum() < 9, [], X,
                                                            max_iterations=2), TypeError,
     f"gluon_cf.while_loop at {line_named('while_func_not_callable')}: "
     "func must be callable, got list"),
    ("cond_pred_not_one_element",
     lambda: gluon_cf.cond(X > 0, lambda: X, lambda: X),
     ValueError, f"gluon_cf.cond at {line_of('cond_pred_not_one_element')}: pred must have "
                 "exactly one element, got shape (2, 3)"),
    ("while_cond_not_one_element",
     lambda: gluon_cf.while_loop(lambda v: v < 3, lambda v: (v, v + 1), X, max_iterations=3),
     ValueError, f"gluon_cf.while_loop at {line_of('while_cond_not_one_element')}: the value "
                 "returned by cond must have exactly one element, got shape (2, 3)"),
    ("cond_branch_returns_int",
     lambda: gluon_cf.cond(nd.ones(1), lambda: 3, lambda: X),
     TypeError, f"{line_of('cond_branch_returns_int')}: gluon_cf.cond: the value returned by a "
     "branch must be an NDArray/Symbol or a (nested) list of them, got int"),
    # (a state changing structure, shape or dtype runs eagerly, as MXNet's eager loops:
    # tests/test_eager_states26e.py; hybridized it is refused: TRACE, SHAPES, HYBRID_RUN)
    ("foreach_data_lengths",
     lambda: gluon_cf.foreach(lambda d, s: (d[0], s), [nd.ones((3, 2)), nd.ones((4, 2))],
                              [nd.ones(2)]),
     ValueError, f"gluon_cf.foreach at {line_of('foreach_data_lengths')}: all data arrays "
                 f"must have the same length along axis 0, got data[0]: 3, data[1]: 4"),
    ("foreach_zero_length",
     lambda: gluon_cf.foreach(lambda d, s: (d, s), nd.array(np.zeros((0, 2))), nd.ones(2)),
     ValueError, f"gluon_cf.foreach at {line_of('foreach_zero_length')}: data has length 0 "
                 f"along axis 0; at least one step is required (its outputs would have no "
                 f"step to take their shape from, and MXNet's own foreach fails on no step "
                 f"too): skip the call for empty data"),
    # (the loop variable is also the step output: MXNet's eager while_loop refuses stacking it)
    ("while_var_changes_shape",
     lambda: gluon_cf.while_loop(lambda v: v.sum() < 30, lambda v: (v, nd.concat(v, v, dim=0)),
                                 X, max_iterations=3),
     mx.MXNetError, f"gluon_cf.while_loop at {line_of('while_var_changes_shape')}: "
                    "step output 0 changes shape across steps:\n"
                    "  step 0: (2, 3)\n  step 1: (4, 3)\n  step 2: (8, 3)"),
    ("while_var_changes_dtype",
     lambda: gluon_cf.while_loop(lambda v: v.sum() < 30, lambda v: (v, v.astype("float64")),
                                 X, max_iterations=3),
     mx.MXNetError, f"gluon_cf.while_loop at {line_of('while_var_changes_dtype')}: "
                    "step output 0 changes dtype across steps:\n"
                    "  step 0: float32\n  step 1: float64\n  step 2: float64"),
    ("while_step_output_changes_shape",
     lambda: gluon_cf.while_loop(lambda i: i < 3, step_output_grows, nd.zeros(1),
                                 max_iterations=3),
     mx.MXNetError, f"gluon_cf.while_loop at {line_of('while_step_output_changes_shape')}: "
                    "step output 0 changes shape across steps:\n"
                 "  step 0: (1,)\n  step 1: (2,)\n  step 2: (3,)"),
    ("while_vars_structure",
     lambda: gluon_cf.while_loop(lambda a, b: a < 3, lambda a, b: (a, [a]),
                                 [nd.zeros(1), nd.zeros(1)], max_iterations=3),
     ValueError, f"gluon_cf.while_loop at {line_of('while_vars_structure')}: "
      "func returned new_loop_vars structured as [array], but "
                 "loop_vars is structured as [array, array]" + WHILE_PAIR_HINT),
    ("while_func_not_pair",
     lambda: gluon_cf.while_loop(lambda v: v.sum() < 30, lambda v: v + 1, X, max_iterations=3),
     TypeError, f"gluon_cf.while_loop at {line_of('while_func_not_pair')}: "
      "func must return a pair (step_output, new_loop_vars), "
                "got NDArray"),
    ("while_func_triple",
     lambda: gluon_cf.while_loop(lambda v: v.sum() < 30, lambda v: (v, v, v), X,
                                 max_iterations=3),
     TypeError, f"gluon_cf.while_loop at {line_of('while_func_triple')}: "
      "func must return a pair (step_output, new_loop_vars), "
                "got tuple"),
    ("foreach_body_not_pair",
     lambda: gluon_cf.foreach(lambda d, s: d, nd.ones((3, 2)), nd.ones(2)),
     TypeError, f"gluon_cf.foreach at {line_of('foreach_body_not_pair')}: "
      "body must return a pair (outputs, new_states), got NDArray"),
    ("while_empty_loop_vars",
     lambda: gluon_cf.while_loop(lambda: True, lambda: ([], []), [], max_iterations=3),
     ValueError, f"gluon_cf.while_loop at {line_of('while_empty_loop_vars')}: "
                 "loop_vars must contain at least one array"),
    # (2.5 runs 2 steps and -1 none, as MXNet's: NOTE [max_iterations] in ops/while_loop.py)
    ("while_max_iterations_not_int",
     lambda: gluon_cf.while_loop(lambda v: v.sum() < 3, lambda v: (v, v + 1), X,
                                 max_iterations="x"),
     ValueError, f"gluon_cf.while_loop at {line_of('while_max_iterations_not_int')}: "
                 "cannot convert max_iterations to a Python int, got 'x'"),
    ("foreach_data_not_array",
     lambda: gluon_cf.foreach(lambda d, s: (d, s), [np.ones((3, 2))], nd.ones(2)),
     TypeError, f"gluon_cf.foreach at {line_of('foreach_data_not_array')}: "
                "data must be an NDArray/Symbol or a (nested) list of them, "
                "got ndarray"),
    # Mixing NDArrays and Symbols.
    ("foreach_mixes_ndarray_and_symbol",
     lambda: gluon_cf.foreach(lambda d, s: (d, s), mx.sym.var("x"), [nd.ones(2)]),
     TypeError, f"gluon_cf.foreach at {line_of('foreach_mixes_ndarray_and_symbol')}: "
                "data and init_states mix NDArrays and Symbols"),
    ("while_mixes_ndarray_and_symbol",
     lambda: gluon_cf.while_loop(lambda a, b: a < 3, lambda a, b: (a, [a, b]),
                                 [mx.sym.var("x"), nd.ones(2)], max_iterations=2),
     TypeError, f"gluon_cf.while_loop at {line_of('while_mixes_ndarray_and_symbol')}: "
                "loop_vars mix NDArrays and Symbols"),
    ("cond_symbol_pred_ndarray_branch",
     lambda: gluon_cf.cond(mx.sym.var("p"), lambda: X, lambda: X),
     TypeError, f"gluon_cf.cond at {line_of('cond_symbol_pred_ndarray_branch')}: "
                "then_func returned an NDArray in symbolic mode; return Symbols "
                "computed from its inputs"),
    ("cond_ndarray_pred_symbol_branch",
     lambda: gluon_cf.cond(nd.ones(1), lambda: mx.sym.var("x"), lambda: mx.sym.var("x")),
     TypeError, f"gluon_cf.cond at {line_of('cond_ndarray_pred_symbol_branch')}: "
                "pred is an NDArray (eager mode) but the branch returned Symbols; "
                "in eager mode branches must compute NDArrays"),
    ("cond_branch_mixes",
     lambda: gluon_cf.cond(nd.ones(1), lambda: [X, mx.sym.var("y")], lambda: [X, X]),
     TypeError, f"gluon_cf.cond at {line_of('cond_branch_mixes')}: "
                "the values returned by a branch mix NDArrays and Symbols"),
]


@pytest.mark.parametrize("call,exc,message", [c[1:] for c in EAGER], ids=[c[0] for c in EAGER])
def test_eager_error(call, exc, message):
    with pytest.raises(exc, match="^" + exact(message) + "$"):
        call()


# ---------------------------------------------------------------------------------------------
# Symbolic mode, detected while tracing: raised as they are.

TRACE = [
    ("foreach_body_not_callable",
     lambda F, x, h: gluon_cf.foreach(3, x, h), [(3, 2), (2,)], TypeError,
     f"gluon_cf.foreach at {line_of('foreach_body_not_callable')}: "
     "body must be callable, got int"),
    ("foreach_body_returns_ndarray",
     lambda F, x, h: gluon_cf.foreach(lambda d, s: (nd.ones(1), s), x, h), [(3, 2), (2,)],
     TypeError, f"gluon_cf.foreach at {line_of('foreach_body_returns_ndarray')}: "
                "body returned an NDArray in symbolic mode; return Symbols "
                "computed from its inputs"),
    ("while_func_returns_ndarray",
     lambda F, x: gluon_cf.while_loop(lambda v: v.sum() < 3, lambda v: (v, nd.ones(2)), x,
                                      max_iterations=2), [(2,)],
     TypeError, f"gluon_cf.while_loop at {line_of('while_func_returns_ndarray')}: "
                "func returned an NDArray in symbolic mode; return Symbols "
                "computed from its inputs"),
    ("cond_branch_counts",
     lambda F, x: gluon_cf.cond(x.sum() > 0, lambda: [x, x], lambda: x), [(2, 3)], ValueError,
     f"gluon_cf.cond at {line_of('cond_branch_counts')}: "
     "then_func and else_func return different structures: then_func returns "
     "[array, array], else_func returns array"),
    # (as many arrays nested otherwise: then_func's structure, as MXNet's symbolic cond)
    ("cond_branch_nesting",
     lambda F, x: gluon_cf.cond(x.sum() > 0, lambda: [x, [x]], lambda: [x, x, x]), [(2, 3)],
     ValueError, f"gluon_cf.cond at {line_of('cond_branch_nesting')}: "
                 "then_func and else_func return different structures: then_func "
                 "returns [array, [array]], else_func returns [array, array, array]"),
    ("cond_branch_returns_ndarray",
     lambda F, x: gluon_cf.cond(x.sum() > 0, lambda: nd.ones(1), lambda: x), [(1,)], TypeError,
     f"gluon_cf.cond at {line_of('cond_branch_returns_ndarray')}: "
     "then_func returned an NDArray in symbolic mode; return Symbols computed "
     "from its inputs"),
    ("foreach_states_structure",
     lambda F, x, h: gluon_cf.foreach(lambda d, s: (d, [s[0], s[0]]), x, [h]), [(3, 2), (2,)],
     ValueError, f"gluon_cf.foreach at {line_of('foreach_states_structure')}: "
      "body returned states structured as [array, array], but "
                 "init_states is structured as [array]; a hybridized loop's (or a remat "
                 "loop's) states keep one structure across steps (MXNet's eager foreach lets "
                 "it change: run it without hybridize() or remat)"),
    ("foreach_body_not_pair",
     lambda F, x, h: gluon_cf.foreach(lambda d, s: (d,), x, h), [(3, 2), (2,)], TypeError,
     f"gluon_cf.foreach at {line_of('foreach_body_not_pair', 1)}: "
      "body must return a pair (outputs, new_states), got tuple"),
    ("while_max_iterations_zero",
     lambda F, x: gluon_cf.while_loop(lambda v: v.sum() < 3, lambda v: (v, v + 1), x,
                                      max_iterations=0), [(2,)],
     ValueError, f"gluon_cf.while_loop at {line_of('while_max_iterations_zero')}: "
                 "max_iterations must be >= 1 in hybridized mode, got 0"),
    ("while_func_not_pair",
     lambda F, x: gluon_cf.while_loop(lambda v: v.sum() < 30, lambda v: v + 1, x,
                                      max_iterations=3), [(2, 3)], TypeError,
     f"gluon_cf.while_loop at {line_of('while_func_not_pair', 1)}: "
      "func must return a pair (step_output, new_loop_vars), got Symbol"),
    ("while_vars_structure",
     lambda F, a, b: gluon_cf.while_loop(lambda a, b: a < 3, lambda a, b: (a, [a]), [a, b],
                                         max_iterations=3), [(1,), (1,)], ValueError,
     f"gluon_cf.while_loop at {line_of('while_vars_structure', 1)}: "
      "func returned new_loop_vars structured as [array], but loop_vars is "
     "structured as [array, array]" + WHILE_PAIR_HINT),
    ("while_cond_returns_two",
     lambda F, x: gluon_cf.while_loop(lambda v: [v.sum() < 3, v.sum() < 4],
                                      lambda v: (v, v + 1), x, max_iterations=3), [(2,)],
     ValueError, f"gluon_cf.while_loop at {line_of('while_cond_returns_two')}: "
                 "cond must return a Symbol (a one-element predicate computed from the loop "
                 "variables) in symbolic mode, got a list of 2 items"),
]


@pytest.mark.parametrize("fn,shapes,exc,message", [c[1:] for c in TRACE],
                         ids=[c[0] for c in TRACE])
def test_trace_error(fn, shapes, exc, message):
    with pytest.raises(exc, match="^" + exact(message) + "$"):
        call_hybridized(fn, *shapes)


# ---------------------------------------------------------------------------------------------
# Symbolic mode, detected when shapes / dtypes are known (the first hybridized call).

SHAPES = [
    # (Branches may differ in size and rank, as in MXNet: tests/test_symbolic_semantics2.py.)
    ("cond_branch_dtypes",
     lambda F, x: gluon_cf.cond(x.sum() > 0, lambda: [x, x], lambda: [x, x.astype("float64")]),
     [(2, 3)],
     "gluon_cf.cond: output dtypes of then_func and else_func differ:\n"
     "  output 0: then_func float32, else_func float32\n"
     "  output 1: then_func float32, else_func float64   <-- differs"),
    ("cond_pred_not_one_element",
     lambda F, x: gluon_cf.cond(x > 0, lambda: x, lambda: x), [(2, 3)],
     "gluon_cf.cond: pred must have exactly one element, got shape (2, 3)"),
    ("while_cond_not_one_element",
     lambda F, x: gluon_cf.while_loop(lambda v: v < 3, lambda v: (v, v + 1), x,
                                      max_iterations=3), [(2, 3)],
     "gluon_cf.while_loop: the value returned by cond must have exactly one element, got shape "
     "(2, 3)"),
    ("foreach_data_lengths",
     lambda F, x, y, h: gluon_cf.foreach(lambda d, s: (d[0], s), [x, y], [h]),
     [(3, 2), (4, 2), (2,)],
     f"gluon_cf.foreach at {line_of('foreach_data_lengths', 1)}: all data arrays must have the "
     f"same length along axis 0, got data[0]: 3, data[1]: 4"),
    ("foreach_state_changes_shape",
     lambda F, x, h: gluon_cf.foreach(lambda d, s: (d, F.concat(s, s, dim=0)), x, h),
     [(3, 2), (2,)],
     "gluon_cf.foreach: state shapes before and after body differ:\n"
     "  output 0: init_states (2,), new_states (4,)   <-- differs"
     "\nstates changing shape or dtype across steps cannot be hybridized (a graph's values have "
     "one shape and dtype); run it without hybridize(), as MXNet's eager foreach does"),
    ("while_var_changes_shape",
     lambda F, x: gluon_cf.while_loop(lambda v: v.sum() < 30, lambda v: (v, F.concat(v, v, dim=0)),
                                      x, max_iterations=3), [(2, 3)],
     "gluon_cf.while_loop: loop variable shapes before and after func differ:\n"
     "  output 0: loop_vars (2, 3), new_loop_vars (4, 3)   <-- differs"
     "\nloop variables changing shape or dtype across steps cannot be hybridized (a graph's "
     "values have one shape and dtype); run it without hybridize(), as MXNet's eager while_loop "
     "does"),
]
SHAPE_IDS = [c[0] for c in SHAPES]


@pytest.mark.parametrize("fn,shapes,message", [c[1:] for c in SHAPES], ids=SHAPE_IDS)
def test_shape_error_is_reported_once_and_quietly(fn, shapes, message, capfd):
    """Our own exception, naming the node, and nothing printed on stdout/stderr. (A mismatch of
    two sides is an MXNetError too, as MXNet raises for its own ops, but not MXNet's own.)"""
    with pytest.raises(ValueError) as raised:
        call_hybridized(fn, *shapes)
    assert type(raised.value) is not mx.MXNetError
    assert re.search(r"\n\(in gluon_cf node 'block\d+__(cond|foreach|while_loop)\d+' at "
                     r"[^:]+test_ops_errors.py:\d+\)$", str(raised.value)), str(raised.value)
    printed = capfd.readouterr()
    assert printed.out == "" and printed.err == ""


@pytest.mark.parametrize("fn,shapes,message", [c[1:] for c in SHAPES], ids=SHAPE_IDS)
def test_shape_error_text_has_our_message(fn, shapes, message):
    with pytest.raises(ValueError, match=exact(message)):
        call_hybridized(fn, *shapes)


# ---------------------------------------------------------------------------------------------
# After any of these, the process still works and exits (no crash, no hang at shutdown).

AFTER_ERRORS = """
import sys
import mxnet as mx
import gluon_cf
sys.path.insert(0, "tests")
from conftest import Block

def call(fn, *shapes):
    net = Block(fn)
    net.hybridize()
    out = net(*[mx.nd.ones(s) for s in shapes])
    mx.nd.waitall()
    return out

bad = [
    (lambda F, x, y: gluon_cf.cond(x.sum() > 0, lambda: x, lambda: y.astype("float64")),
     [(2, 3), (2, 3)]),
    (lambda F, x: gluon_cf.while_loop(lambda v: v < 3, lambda v: (v, v + 1), x,
                                      max_iterations=3), [(2, 3)]),
    (lambda F, x, h: gluon_cf.foreach(lambda d, s: (d, F.concat(s, s, dim=0)), x, h),
     [(3, 2), (2,)]),
]
for fn, shapes in bad:
    try:
        call(fn, *shapes)
    except ValueError:
        pass
    else:
        raise SystemExit("no error")
out = call(lambda F, x, h: gluon_cf.foreach(lambda d, s: (d + s, s * 2), x, h), (3, 2), (2,))
print("ok", out[1].asnumpy().tolist())
"""


def test_process_survives_errors():
    proc = run_python(AFTER_ERRORS, timeout=60)
    assert proc is not None, "process hung after shape errors"
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok [8.0, 8.0]")


# ---------------------------------------------------------------------------------------------
# Issue 10, item 2: more cases found when the first hybridized call runs, each reaching the
# caller once as our own exception naming the op and the node, and nothing printed.

HYBRID_RUN = [
    ("foreach_state_changes_dtype",
     lambda F, x, h: gluon_cf.foreach(lambda d, s: (d, s.astype("float64")), x, h),
     [(3, 2), (2,)], ValueError,
     "gluon_cf.foreach: state dtypes before and after body differ:\n"
     "  output 0: init_states float32, new_states float64   <-- differs"
     "\nstates changing shape or dtype across steps cannot be hybridized (a graph's values have "
     "one shape and dtype); run it without hybridize(), as MXNet's eager foreach does"),
    ("while_var_changes_dtype",
     lambda F, x: gluon_cf.while_loop(lambda v: v.sum() < 3, lambda v: (v, v.astype("float16")),
                                      x, max_iterations=3), [(2,)], ValueError,
     "gluon_cf.while_loop: loop variable dtypes before and after func differ:\n"
     "  output 0: loop_vars float32, new_loop_vars float16   <-- differs"
     "\nloop variables changing shape or dtype across steps cannot be hybridized (a graph's "
     "values have one shape and dtype); run it without hybridize(), as MXNet's eager while_loop "
     "does"),
]


@pytest.mark.parametrize("fn,shapes,exc,message", [c[1:] for c in HYBRID_RUN],
                         ids=[c[0] for c in HYBRID_RUN])
def test_error_at_first_hybridized_call(fn, shapes, exc, message, capfd):
    net = Block(fn)
    net.hybridize()
    with pytest.raises(exc, match=exact(message)) as raised:
        out = net(*[nd.array(np.ones(s)) for s in shapes])
        mx.nd.waitall()
        del out
    assert re.search(r"\n\(in gluon_cf node '[^']+'( at [^:]+:\d+)?\)$", str(raised.value))
    printed = capfd.readouterr()
    assert printed.out == "" and printed.err == ""


@pytest.mark.parametrize("pred", [True, False, 1.0, 0])
@pytest.mark.parametrize("hybridize", [False, True])
def test_python_scalar_pred_picks_a_branch_in_both_modes(pred, hybridize):
    net = Block(lambda F, x: gluon_cf.cond(pred, lambda: x * 2, lambda: x * 3))
    if hybridize:
        net.hybridize()
    out = net(nd.ones((2,)))
    np.testing.assert_array_equal(out.asnumpy(), [2, 2] if pred else [3, 3])


@gluon_cf.recursive
def _halve_until_small(x):
    return gluon_cf.cond(x.sum() < 1, lambda: x, lambda: _halve_until_small(x / 2))


ZERO_SIZE = [
    ("foreach", lambda F, x: gluon_cf.foreach(lambda d, s: (d + s, s), x, F.ones((2,)))[0],
     (0, 2)),
    ("cond", lambda F, x: gluon_cf.cond(F.ones((1,)) > 0, lambda: x * 2, lambda: x + 1),
     (0, 2)),
    ("while_loop", lambda F, x: gluon_cf.while_loop(lambda v: v.sum() < 3, lambda v: (v, v + 1),
                                                   x, max_iterations=3)[1], (2, 0)),
    ("recursion", lambda F, x: _halve_until_small(x), (0, 3)),
]


@pytest.mark.parametrize("fn,shape", [c[1:] for c in ZERO_SIZE], ids=[c[0] for c in ZERO_SIZE])
def test_hybridized_zero_size_input_runs_as_eager_or_is_its_error_naming_the_line(fn, shape,
                                                                                 capfd):
    """MXNet 1.9.1 hybridized graphs cannot hold zero-size arrays (0 means "unknown"): its own
    ``x + 1`` fails. A call with a zero-size input runs partitioned, operator by operator
    (NOTE [zero-size block inputs] in gluon_cf/hybrid.py): it gives what eager code gives, the
    recursion's empty x returned as plain Python returns it, or the error eager gluon_cf
    raises, naming the op and the user's line, on every call alike, and an MXNetError for
    code that catches MXNet's (its CachedOp raised one until round 23)."""
    kind = [c[0] for c in ZERO_SIZE if c[1] is fn][0]
    net = Block(fn)
    net.hybridize()
    x = nd.array(np.zeros(shape))
    if kind == "recursion":   # x.sum() < 1 at once: x itself, as plain Python returns it
        for _ in range(2):
            assert net(x).shape == shape
    else:
        eager_op = {"foreach": r"gluon_cf\.foreach", "cond": r"gluon_cf: _mul_scalar",
                    "while_loop": r"gluon_cf: _plus_scalar"}[kind]
        at = r" at %s:\d+" % re.escape(__file__)        # the user's line of the operator
        for _ in range(2):
            with pytest.raises(gluon_cf.ZeroSizeError) as raised:
                net(x).wait_to_read()
            assert isinstance(raised.value, ValueError) and \
                isinstance(raised.value, mx.MXNetError)
            assert re.match(eager_op + at, str(raised.value)), str(raised.value)
            if kind != "foreach":
                # (the operator inside the body that refused it: its input 0)
                assert "input 0 of shape %s" % (shape,) in str(raised.value)
            with pytest.raises(gluon_cf.ZeroSizeError) as eagerly:   # the same error eagerly
                Block(fn)(x).wait_to_read()
            assert re.match(eager_op + at, str(eagerly.value)), str(eagerly.value)
    printed = capfd.readouterr()
    assert printed.out == ""
    # the same block still runs non-empty inputs
    assert net(nd.array(np.ones(tuple(d or 1 for d in shape)))).shape[0] >= 1


def test_plain_mxnet_refuses_zero_size_hybridized_too():
    """The oracle for the test above: MXNet's own operators, hybridized, have no zero-size
    result to match."""
    net = Block(lambda F, x: x + 1)
    net.hybridize()
    with pytest.raises(mx.MXNetError):
        net(nd.array(np.zeros((0, 2)))).wait_to_read()


def test_unknown_dimension_placeholder_passes_through_like_mxnet_foreach():
    """``infer_shape_partial`` with MXNet's 0 placeholder flowing into a gluon_cf node answers
    what MXNet's own foreach answers (issue 12, item 3), also through an operator after it."""
    data = mx.sym.var("data", shape=(0, 3, 4))
    state = mx.sym.var("s", shape=(3, 4))
    answers = []
    for foreach in (gluon_cf.foreach, mx.sym.contrib.foreach):
        out, _ = foreach(lambda d, s: (d * 2, s), data, state)
        dense = mx.sym.FullyConnected(out, num_hidden=5, flatten=False, name="fc")
        answers.append((out.infer_shape_partial(), dense.infer_shape_partial(),
                        dense.infer_shape(data=(7, 3, 4))))
    assert answers[0] == answers[1]
    assert answers[0][1] == ([(0, 3, 4), (3, 4), (5, 4), (5,)], [(0, 3, 5)], [])


class _DeclaresThreeRowsReturnsOne(gluon_cf.registry.Rule):
    """A rule whose shape rule and forward disagree: what the run-time guard is for."""

    kind = "_test_declares_three_rows_returns_one"

    def infer_shape(self, node, in_shapes):
        return list(in_shapes), [(3, 2)]

    def infer_type(self, node, in_types):
        return list(in_types), [in_types[0]]

    def forward(self, node, inputs, out_shapes, frame):
        return [mx.nd.ones((1, 2))]
        yield  # pragma: no cover - a generator, as the contract asks


gluon_cf.registry.register(_DeclaresThreeRowsReturnsOne())


def test_output_of_another_shape_than_declared_is_an_error_not_a_broadcast(capfd):
    """MXNet's assign would broadcast a wrong-shaped output into the declared buffer (how
    boolean_mask once gave 5x3 for 1x3). The node refuses instead, naming op and node."""
    from gluon_cf import node as gcf_node

    net = Block(lambda F, x: gcf_node.make_node(_DeclaresThreeRowsReturnsOne.kind, [x],
                                                {"graphs": {}, "num_outputs": 1}, None)[0])
    net.hybridize()
    with pytest.raises(ValueError, match=r"^gluon_cf\._test_declares_three_rows_returns_one: "
                       r"output 0 has shape \(1, 2\) at run time, but its shape rule declared "
                       r"\(3, 2\) to MXNet; shapes that depend on values are not supported in "
                       r"hybridized graphs yet\n\(in gluon_cf node '[^']+'( at [^:]+:\d+)?\)$"):
        net(nd.ones((2,))).asnumpy()
    printed = capfd.readouterr()
    assert printed.out == "" and printed.err == ""
