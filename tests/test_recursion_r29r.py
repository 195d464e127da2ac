"""Round 29r (issue 24): a recursive body changing Python state deeper than one name (items
of items, attributes of attributes, a helper's closure, a class attribute, a numpy array...):
eagerly plain Python's values, hybridized refused at the statement's line; before, hybridized
gave the count of one trace for every call, silently (NOTE [Python state in a recursive
body])."""
import inspect
import warnings

import numpy as np
import pytest
from mxnet import nd

import hostile_programs29r as TREES
import python_state_programs29r as programs

LEFT, RIGHT = [1, 3, -1, -1, -1], [2, 4, -1, -1, -1]
XS = np.arange(15, dtype="float32").reshape(5, 3)
ARGS = [XS, np.array(LEFT, "float32"), np.array(RIGHT, "float32"), np.array([0], "float32")]


def counted(i, calls):
    """Plain recursion: x_i at a leaf, else node(l) + node(r) * (the count of calls so far)."""
    calls[0] += 1
    if LEFT[i] < 0:
        return XS[i:i + 1]
    left = counted(LEFT[i], calls)
    return left + counted(RIGHT[i], calls) * calls[0]


def _line_of(text):
    lines, _ = inspect.getsourcelines(programs)
    found = [k + 1 for k, line in enumerate(lines) if line.strip() == text]
    assert found, text
    return found


@pytest.mark.parametrize("cls,statement", programs.READ, ids=[c.__name__ for c, _ in
                                                              programs.READ])
def test_deep_state_the_value_reads_is_refused_at_its_line(cls, statement):
    want = counted(0, [0])
    np.testing.assert_allclose(want, [[87, 97, 107]])
    net = cls()
    np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want)
    np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want)   # (state reset)
    net.hybridize()
    with pytest.raises(NotImplementedError) as err:
        net(*map(nd.array, ARGS))
    where, rest = str(err.value).split(": ", 1)
    path, line = where.rsplit(":", 1)
    assert path == programs.__file__ and int(line) in _line_of(statement), str(err.value)
    assert rest.startswith("gluon_cf.recursive: 'node' changes Python state ("), rest
    assert "that its value depends on" in rest


def test_deep_state_the_value_does_not_read_is_a_warning_at_its_line():
    """A log of the calls in a dict of lists: the graph does not read it, so the values are
    plain Python's; hybridized the log grows per trace: a warning at the statement."""
    net = programs.DeepLog()
    want = programs.scaled(0)
    np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want)
    assert len(net.log["calls"]) == 5
    net.hybridize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_allclose(net(*map(nd.array, ARGS)).asnumpy(), want)
    mine = [w for w in caught if "changes Python state (self.log['calls'])" in str(w.message)]
    assert len(mine) == 1 and "once per trace" in str(mine[0].message), [
        str(w.message) for w in caught]
    assert (mine[0].filename, mine[0].lineno) == (
        programs.__file__, _line_of('self.log["calls"].append(1)')[0])


# ---- recursion ported from TreeLSTM/TreeRNN code, against plain Python recursion ------------

@pytest.mark.parametrize("mode", ["eager", "batched"])
@pytest.mark.parametrize("cls", list(TREES.PROGRAMS), ids=lambda c: c.__name__)
def test_ported_tree_program_equals_plain_python(cls, mode):
    """Outputs, input and parameter gradients equal plain Python recursion's, eagerly and
    hybridized (the default batching executor)."""
    import hostile_harness
    from test_recursion_hostile2 import make, run, with_mode
    net = make(cls)
    if mode != "eager":
        net.hybridize()
    for k, arrays in enumerate(TREES.PROGRAMS[cls]):
        oracle_net = make(cls)
        want = hostile_harness._outcome(lambda: run(oracle_net, arrays, plain=True))
        assert want[0] == "value", want[1]
        got = hostile_harness._outcome(lambda: with_mode(mode, lambda: run(net, arrays)))
        hostile_harness.assert_equal_to_oracle(want, got, [TREES.__file__], (1e-4, 1e-5),
                                               (mode, k))
