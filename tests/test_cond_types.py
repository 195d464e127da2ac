"""Issue 24, left over: the dtypes ``infer_type`` gives a graph holding a symbolic
``gluon_cf.cond`` equal MXNet 1.9.1's ``mx.sym.contrib.cond`` (the oracle) when some input
dtypes are not given: the branches' outputs are one set of dtypes, so what one branch
decides, the other's inputs are inferred from (``CondType``: one ``out_type`` for both).
The predicate's inputs are the exception: MXNet's ``CondType`` makes the predicate float32
(so it refuses a float64 or int32 predicate, below), gluon_cf takes any dtype and leaves an
unknown one unknown."""
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
    (args, outs, aux), (want_args, want_outs, want_aux) = \
        ours.infer_type_partial(**given), theirs.infer_type_partial(**given)
    # (the predicate's input: see the next test)
    assert (args[1:], outs, aux) == (want_args[1:], want_outs, want_aux)
    assert args[0] == given.get("a")


def test_an_unknown_predicate_stays_unknown_where_mxnet_guesses_float32():
    ours, theirs = _graph(gluon_cf.cond), _graph(mx.sym.contrib.cond)
    args, outs, _ = ours.infer_type_partial(b=np.float64)
    assert (args, outs) == ([None, np.float64, np.float64], [np.float64])
    assert theirs.infer_type_partial(b=np.float64)[0] == [np.float32, np.float64, np.float64]
    # ... because MXNet's predicate must be float32; gluon_cf's may be float64
    with pytest.raises(mx.MXNetError):
        theirs.infer_type(a=np.float64, b=np.float32)
    args, outs, _ = ours.infer_type(a=np.float64, b=np.float32)
    assert (args, outs) == ([np.float64, np.float32, np.float32], [np.float32])


def test_a_dtype_decided_by_the_other_branch_runs():
    """Bound with the inferred dtypes, the graph computes the branch's value."""
    ours = _graph(gluon_cf.cond)
    args, _, _ = ours.infer_type(a=np.float32, b=np.float64)
    values = {"a": mx.nd.array([-1.0]), "b": mx.nd.array([3.0], dtype="float64"),
              "c": mx.nd.array([5.0], dtype=args[2])}
    out = ours.bind(mx.cpu(), values).forward()[0]
    assert out.dtype == np.float64 and out.asnumpy().tolist() == [6.0]
