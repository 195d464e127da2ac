"""Issue 24, twenty-second round: the autograph blocks of ``hostile_programs22a.py`` (``:=`` in
a tensor while's test, returns inside tensor loops and inside ``try`` under a tensor ``if``,
``reversed``/``zip``/``enumerate`` of collected lists, ``and``/``or`` and conditional
expressions of tensors) run as plain Python on NDArrays (the oracle), eagerly and hybridized
with gradients (``hostile_harness.classify``, in this process: a few seconds). And what this
round fixed, each on its own."""
import re

import mxnet as mx
import pytest

import gluon_cf

import hostile_harness
import hostile_programs22a as programs

FILES = [programs.__file__]

# converted, equal to plain Python eagerly and hybridized (the rest: refused at the line)
CONVERTED = set(programs.PROGRAMS) - {programs.MixedDtypeAnd, programs.TernaryWithNumberSide,
                                        programs.ReversedUsedTwice, programs.ReturnRowFromFor,
                                        programs.EnumerateWhileList, programs.ZipWhileLists,
                                        programs.LenOfWhileList,
                                        programs.WalrusLateInChainedComparison}


_classified = hostile_harness.cached_classifier(programs.PROGRAMS, FILES, export=False)


@pytest.mark.parametrize("block_class", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_hostile_program_equals_its_oracle_or_is_refused_at_its_line(block_class):
    result = _classified(block_class)
    assert not hostile_harness.not_equal_or_refused(result), result
    if block_class in CONVERTED:
        assert {mode: kind for mode, (kind, _) in result.items()} == {
            "eager": "equal", "hybrid": "equal"}, result


def _line(text):
    return next(k for k, line in enumerate(open(programs.__file__), 1) if text in line)


_hybridized_error = hostile_harness.hybridized_error


def test_a_walrus_in_a_tensor_while_test_converts_and_keeps_pythons_last_value():
    """It was refused (a graph's loop cannot express yet); the loop runs as one graph loop."""
    net = programs.WalrusWhileSum()
    net.hybridize()
    x = mx.nd.array([0.5, 0.25])
    got = net(x)
    h = x
    while (s := h.sum()) < 4:
        h = h + 1
    assert (got.asnumpy() == (h * s).asnumpy()).all()
    assert "while_loop" in net._cached_graph[1].tojson()


def test_reversed_of_a_collected_list_is_not_subscriptable_as_pythons():
    """``reversed(outs)[0]`` of a list a graph's while collected gave its last item, where
    Python raises TypeError; ``reversed(outs)`` used twice gave the items twice."""
    err = _hybridized_error(programs.ReversedIndexOfWhileList, mx.nd.array([0.5, 0.25]))
    assert type(err) is TypeError
    assert str(err) == "'list_reverseiterator' object is not subscriptable"


def test_a_mixed_dtype_and_names_the_and_and_the_dtypes():
    """It was cond's MismatchError about then_func and else_func."""
    err = _hybridized_error(programs.MixedDtypeAnd, mx.nd.array([0.5, -0.25]))
    line = _line("return a and b")
    assert isinstance(err, gluon_cf.AutographError)
    assert str(err).startswith(f"{programs.__file__}:{line}: return a and b: this and on a "
                               f"tensor gives one of its operands itself"), err
    assert "the right operand is int32 and the left operand is float32" in str(err)
    assert "then_func" not in str(err)


def test_a_conditional_expression_with_a_number_side_says_what_to_write():
    err = _hybridized_error(programs.TernaryWithNumberSide, mx.nd.array([0.5, -0.25]))
    line = _line("return x * (a if F.sum(x) > 0 else 1.0)")
    assert isinstance(err, gluon_cf.AutographError)
    assert re.match(re.escape(f"{programs.__file__}:{line}: return x * (a if F.sum(x) > 0 "
                              f"else 1.0): the else side"), str(err)), err
    assert "F.ones_like(a) * 1.0" in str(err)


def test_a_late_walrus_in_a_chained_comparison_is_refused_at_its_line():
    """Python's chain is kept (a function of the operand would bind the name in its own
    scope): its Symbol operands, whose truth Python takes, are refused at the user's line."""
    err = _hybridized_error(programs.WalrusLateInChainedComparison, mx.nd.array([0.5, 0.25]))
    line = _line("while -10 < F.sum(h) < (s := F.sum(h) * 0 + 4):")
    assert isinstance(err, gluon_cf.AutographError)
    assert str(err).startswith(f"{programs.__file__}:{line}: "), err
    assert "a := in an operand after the second" in str(err)


def test_a_mixed_dtype_message_is_the_nodes_own_not_one_of_the_same_name():
    """The and/or's words were kept by node name: a user's own cond of that name under the
    same prefix (two blocks' prefixes, fresh NameManagers) was said as the and/or's, at its
    line; they are kept by the node's identity (NOTE [where a node was made])."""
    net = programs.MixedDtypeAnd(prefix="same_")
    net.initialize()
    net.hybridize()
    x = mx.nd.array([0.5, -0.25])
    with pytest.raises(gluon_cf.AutographError):
        net(x)
    name = "hostile_programs22a_line%d_andor" % _line("return a and b")

    class OwnCond(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            a = F.sum(x)
            return gluon_cf.cond(a > 0, lambda: a, lambda: F.cast(a, "int32"), name=name)

    err = _hybridized_error(lambda: OwnCond(prefix="same_"), x)
    assert not isinstance(err, gluon_cf.AutographError), err
    assert "then_func float32, else_func int32" in str(err), err
