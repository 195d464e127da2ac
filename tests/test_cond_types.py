"""Issue 24, left over: the dtypes ``infer_type`` gives a graph holding a symbolic
``gluon_cf.cond`` equal MXNet 1.9.1's ``mx.sym.contrib.cond`` (the oracle) when some input
dtypes are not given: the branches' outputs are one set of dtypes, so what one branch
decides, the other's inputs are inferred from (``CondType``: one ``out_type`` for both).
An unknown predicate is float32, as MXNet's ``CondType`` makes it (inferred back into the
predicate's inputs); a known float64 or int32 predicate, which MXNet refuses, gluon_cf keeps.
``foreach`` and ``while_loop`` give MXNet's dtypes too, with partly known inputs.
(Shapes are not compared with MXNet's here: its ``cond`` and ``while_loop`` are dynamic-shape
operators whose ``infer_shape`` answers nothing; gluon_cf's answers what its graphs compute.)"""
import mxnet as mx
import numpy as np
import pytest

import gluon_cf


def _graph(impl):
    a, b, c = mx.sym.var("a"), mx.sym.var("b"), mx.sym.var("c")
    out = impl(mx.sym.sum(a) > 0, lambda: b * 2, lambda: c + 1)
    return out[0] if isinstance(out, list) else out


@pytest.mark.parametrize("given", [
    {"a": np.float32}, {"a": np.float32, "b": np.float32}, {"a": np.float32, "c": np.float64},
    {"a": np.float32, "b": np.float16, "c": np.float16}, {"a": np.float32, "b": np.int32}, {}],
    ids=lambda g: "-".join(f"{k}_{v.__name__}" for k, v in g.items()) or "none")
def test_infer_type_is_mxnets(given):
    ours, theirs = _graph(gluon_cf.cond), _graph(mx.sym.contrib.cond)
    assert ours.infer_type(**given) == theirs.infer_type(**given)
    assert ours.infer_type_partial(**given) == theirs.infer_type_partial(**given)


def test_an_unknown_predicate_is_float32_as_mxnets_and_a_known_one_is_kept():
    ours, theirs = _graph(gluon_cf.cond), _graph(mx.sym.contrib.cond)
    args, outs, _ = ours.infer_type_partial(b=np.float64)
    assert (args, outs) == ([np.float32, np.float64, np.float64], [np.float64])
    assert theirs.infer_type_partial(b=np.float64)[0] == args
    assert ours.infer_type(c=np.float16) == theirs.infer_type(c=np.float16)
    assert ours.infer_type(c=np.float16)[0] == [np.float32, np.float16, np.float16]
    # MXNet's predicate must be float32; gluon_cf's may be float64
    with pytest.raises(mx.MXNetError):
        theirs.infer_type(a=np.float64, b=np.float32)
    args, outs, _ = ours.infer_type(a=np.float64, b=np.float32)
    assert (args, outs) == ([np.float64, np.float32, np.float32], [np.float32])


def _loops(lib):
    data, s, i, h = (mx.sym.var(n) for n in ("data", "s", "i", "h"))
    outs, states = lib.foreach(lambda x, st: (x + st, x * st), data, s)
    w_outs, w_states = lib.while_loop(lambda i, h: i < 3, lambda i, h: (h * 2, [i + 1, h + 1]),
                                      [i, h], max_iterations=4)
    return mx.sym.Group([outs, states, w_outs] + list(w_states))


@pytest.mark.parametrize("given", [
    {}, {"data": np.float32}, {"s": np.float64}, {"i": np.float32}, {"h": np.float16},
    {"data": np.float64, "s": np.float64, "i": np.float32, "h": np.float32}],
    ids=lambda g: "-".join(f"{k}_{v.__name__}" for k, v in g.items()) or "none")
def test_loops_infer_types_as_mxnets(given):
    ours, theirs = _loops(gluon_cf), _loops(mx.sym.contrib)
    assert ours.list_arguments() == theirs.list_arguments()
    assert ours.infer_type(**given) == theirs.infer_type(**given)
    assert ours.infer_type_partial(**given) == theirs.infer_type_partial(**given)


def test_a_dtype_decided_by_the_other_branch_runs():
    """Bound with the inferred dtypes, the graph computes the branch's value."""
    ours = _graph(gluon_cf.cond)
    args, _, _ = ours.infer_type(a=np.float32, b=np.float64)
    values = {"a": mx.nd.array([-1.0]), "b": mx.nd.array([3.0], dtype="float64"),
              "c": mx.nd.array([5.0], dtype=args[2])}
    out = ours.bind(mx.cpu(), values).forward()[0]
    assert out.dtype == np.float64 and out.asnumpy().tolist() == [6.0]
