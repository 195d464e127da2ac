"""Issue 24 item 1, round 25c: ``for a, b in x`` over a tensor (each row unpacked; NOTE
[autograph unpacking loops]) converts, so does a helper appending to a list the step made
(NOTE [autograph side effects]) and ``outputs[t] = h`` on a tensor (NOTE [autograph item
assignment]); each level of a nested unpacking is a tensor's rows. The blocks of
``hostile_programs25c.py`` equal plain Python on NDArrays (the oracle), eagerly and
hybridized, values and gradients, over 0, 1 and several rows; the variants that cannot
convert are refused at the user's line. And random programs of unpacking loops (the
hypothesis generator of ``test_autograph_programs``)."""
import re
import warnings

import mxnet as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings, strategies as st

import gluon_cf

import hostile_harness
import hostile_programs25c as programs
import test_autograph
import test_autograph_ported
import test_autograph_programs as generated

FILES = [programs.__file__]
_classified = hostile_harness.cached_classifier(programs.PROGRAMS, FILES, export=False)

REFUSED = {programs.UnpackTooFewNames, programs.UnpackedNameWithoutValueReadAfter,
           programs.UnpackStarredTarget, programs.UnpackAppendAndBreak,
           programs.EnumerateOfWhileList, programs.HelperAppendsToTheStepsListUnderTensorIf,
           programs.HelperAppendsToAListMadeBeforeTheLoop, programs.TernaryOfTwoNumbers,
           programs.NestedUnpackingInATensorStep, programs.PreallocatedRowWrittenAtATensorIndex,
           programs.PreallocatedRowsWithAnAlias, programs.PreallocatedRowWrittenInATensorLoop}


@pytest.mark.parametrize("block_class", list(programs.PROGRAMS), ids=lambda c: c.__name__)
def test_unpacking_loop_equals_its_oracle_or_is_refused_at_its_line(block_class):
    hostile_harness.assert_kinds(_classified(block_class), refused=block_class in REFUSED)


def _line(text, block_class=None):
    return hostile_harness.line_in(programs.__file__, text, block_class)


def test_a_tensor_for_unpacking_its_rows_is_one_foreach():
    """``for a, b in x`` was refused ("it unpacks its items, which a graph's loop cannot
    express yet"); it is one foreach whose steps unpack the row."""
    net = hostile_harness._make(programs.UnpackEachRow)
    net.hybridize()
    net(mx.nd.array(programs.PAIRS[0][0]))
    graph = net._cached_graph[1].tojson()
    assert "foreach" in graph and graph.count('"op": "_foreach"') + \
        graph.count("gluon_cf") >= 1, graph[:300]


def test_the_unpacking_loop_of_test_autograph_converts():
    """test_autograph's ``ForUnpacks`` (``for a, b in F.stack(x, x, axis=1)``), its refusal
    example until this round, equals plain Python hybridized."""
    inputs = [test_autograph.INPUTS[0] * 4]
    result = hostile_harness.classify(test_autograph.ForUnpacks, [[np.asarray(
        inputs[0], np.float32)]], [test_autograph.__file__], export=False)
    assert {m: k for m, (k, _) in result.items()} == {"eager": "equal", "hybrid": "equal"}, \
        result


def test_rows_of_another_length_are_pythons_value_error_at_the_line():
    err = hostile_harness.hybridized_error(programs.UnpackTooFewNames, programs.TRIPLES[0][0])
    text = "for a, b in x:"
    assert isinstance(err, gluon_cf.AutographError) and isinstance(err, ValueError), repr(err)
    assert str(err).startswith(
        f"{programs.__file__}:{_line(text, programs.UnpackTooFewNames)}: {text} too many "
        f"values to unpack (expected 2): each row of this for loop's tensor holds 3 "
        f"items"), err


@pytest.mark.parametrize("block_class,text,message", [
    (programs.UnpackedNameWithoutValueReadAfter, "for a, b in x:",
     "variable 'a' is assigned in this for loop on a tensor but has no value before it"),
    (programs.UnpackStarredTarget, "for a, *rest in x:",
     "this for loop is on a tensor, but it unpacks its items, which a graph's loop cannot "
     "express yet"),
    (programs.UnpackAppendAndBreak, "for a, b in x:",
     "this for loop over a tensor appends to a list and may end under a tensor condition"),
], ids=lambda v: getattr(v, "__name__", None))
def test_unpacking_variants_that_stay_refused_name_the_line(block_class, text, message):
    err = hostile_harness.hybridized_error(block_class, programs.PAIRS[0][0])
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    # (the line's own colon ends its quote: file:12: for a, b in x: message)
    assert str(err).startswith(f"{programs.__file__}:{_line(text, block_class)}: {text} "
                               f"{message}"), err


@pytest.mark.parametrize("block_class,region", [
    (programs.HelperAppendsToTheStepsListUnderTensorIf, "if F.sum(row) > 0:"),
    (programs.HelperAppendsToAListMadeBeforeTheLoop, "for row in x:")],
    ids=lambda v: getattr(v, "__name__", None))
def test_a_helper_changing_a_list_of_another_region_is_refused_at_its_line(block_class,
                                                                          region):
    """A helper's ``items.append(v)`` of a list the step made converts (it was refused: the
    check could not tell it from an outside list); a list made outside the innermost tensor
    if or loop being traced stays refused, naming the helper's line and the region's."""
    err = hostile_harness.hybridized_error(block_class, programs.ROWS[0][0])
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    assert str(err).startswith(
        f"{programs.__file__}:{_line('    items.append(v)')}: items.append(v): this "
        f"statement changes a Python list (.append), inside the "), err
    assert f"{programs.__file__}:{_line(region, block_class)} ({region})" in str(err), err


def test_a_ternary_of_two_numbers_on_a_tensor_says_to_write_the_choice_as_an_array():
    """``k = 2 if F.sum(x) > 0 else 3`` stays refused (a graph gives no int; an array's uses
    differ from it: range(k), shapes, indexes); the message said "write it as an array of
    the other side's shape, F.ones_like(a) * 2", naming a side that is a number too. It
    names the F.where of the test on the two numbers, which converts
    (TernaryOfTwoNumbersAsTheMessageSays)."""
    err = hostile_harness.hybridized_error(programs.TernaryOfTwoNumbers,
                                           programs.STATES[0][0])
    text = "k = 2 if F.sum(x) > 0 else 3"
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    line = _line("        " + text, programs.TernaryOfTwoNumbers)
    assert str(err).startswith(f"{programs.__file__}:{line}: {text}: the if side of "
                               f"this conditional expression is the Python value 2; with a "
                               f"tensor condition both sides must be arrays"), err
    assert "range(n), a shape, an index" in str(err), err
    assert "write the choice as an array, F.where(F.sum(x) > 0, F.full((1,), 2), " \
        "F.full((1,), 3)), and use it as one" in str(err), err


def test_a_nested_unpacking_of_a_step_row_is_refused_at_its_line():
    """``(a, b), c = row, h`` in a tensor for: each level is unpacked as checked; the inner
    one was MXNet's Symbol iterated as one item, Python's ValueError naming no line of the
    user's (of a target of one name, ``(a,), c = x[0:1], x[0]``, the whole array silently:
    NestedUnpackingOfOneRow converts now)."""
    err = hostile_harness.hybridized_error(programs.NestedUnpackingInATensorStep,
                                           programs.PAIRS[0][0])
    text = "(a, b), c = row, h"
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    line = _line("            " + text, programs.NestedUnpackingInATensorStep)
    assert str(err).startswith(f"{programs.__file__}:{line}: {text}: this unpacking "
                               f"assignment iterates over a tensor"), err


def test_zip_of_a_while_list_says_to_collect_pairs_and_unpack_them():
    """``zip``/``enumerate`` of a list a while collected stay refused (its count is known only
    when the graph runs); the advice for zip was to append ``F.concat(a, b, dim=0)`` and loop
    over that, whose halves then had to be sliced by hand: it says to collect
    ``F.stack(a, b)`` and unpack the rows, which converts (UnpackWhileCollectedRows)."""
    err = hostile_harness.hybridized_error(programs.EnumerateOfWhileList,
                                           programs.STATES[0][0])
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    assert "for zip, append what a step needs to one list in the loop that collects it, " \
        "pairs.append(F.stack(a, b)), and unpack its rows: for a, b in pairs" in str(err), err


PREALLOCATED = [programs.PreallocatedRowsWrittenByIndex, programs.PreallocatedRowsWrittenBySlice,
                programs.PreallocatedColumnsAndNumbers, test_autograph_ported.AssignsItems]


@pytest.mark.parametrize("block_class", PREALLOCATED, ids=lambda c: c.__name__)
def test_items_written_by_index_equal_plain_pythons_in_place_writes(block_class):
    """``outputs[t] = h`` on a Symbol was refused ("this assigns items of a tensor while
    hybridizing"); it is the new array (NOTE [autograph item assignment]). Outside
    autograd, where plain MXNet writes in place, the hybridized block equals plain Python
    (under autograd plain MXNet refuses the write: the oracle collects the same rows)."""
    plain = type(hostile_harness._make(block_class)).hybrid_forward.__wrapped__
    # (test_autograph_ported's AssignsItems, y[:] = x * 3, was its refusal example)
    for arrays in programs.PROGRAMS.get(block_class, programs.TIMES):
        net = hostile_harness._make(block_class)
        want = hostile_harness.run_with_gradients(net, arrays, forward=plain, record=False)
        net.hybridize()
        got = hostile_harness.run_with_gradients(net, arrays, record=False)
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_an_item_written_where_something_else_holds_the_array_is_refused_at_its_line():
    err = hostile_harness.hybridized_error(programs.PreallocatedRowsWithAnAlias,
                                           programs.TIMES[0][0])
    text = "outputs[0] = x[0] * 2"
    assert isinstance(err, gluon_cf.AutographError), repr(err)
    line = _line("        " + text, programs.PreallocatedRowsWithAnAlias)
    assert str(err).startswith(f"{programs.__file__}:{line}: {text}: on an NDArray this "
                               f"assignment changes the array in place, and 'outputs' may "
                               f"hold an array something else holds too"), err


@pytest.mark.timeout(300)
def test_writing_items_with_gradients_does_not_crash_mxnet():
    """A number written into a slice of an array that an earlier write made (``outputs[:,
    0] = s`` then ``outputs[-1] = 1.5``) as ones_like of a slice of it crashed MXNet's
    backward (a segmentation fault, eagerly, while this round's code was written): the
    hybridized block, with gradients, in a subprocess."""
    import subprocess
    import sys
    code = ("import sys; sys.path[:0] = [%r]\n"
            "import hostile_harness as H, hostile_programs25c as P\n"
            "c = P.PreallocatedColumnsAndNumbers\n"
            "for a in P.PROGRAMS[c] + [[P.rand(2, 3, seed=9)]]:\n"
            "    net = H._make(c); net.hybridize()\n"
            "    H.run_with_gradients(net, a)\n"
            "print('done')\n" % str(hostile_harness.__file__.rsplit("/", 1)[0]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=280)
    assert proc.returncode == 0 and "done" in proc.stdout, (proc.returncode,
                                                           proc.stderr[-2000:])


def test_random_programs_of_unpacking_loops_equal_plain_python_or_are_refused(
        tmp_path_factory):
    """``tensor_blocks(unpack=True)``: the generator of test_autograph_programs with loops
    unpacking their items (over a tensor's rows, reversed, a slice, enumerate, zip) among
    its ifs, loops, breaks and appends; a fixed seed."""
    tmp_path = tmp_path_factory.mktemp("unpacking_programs")
    counts = {}
    sources = []

    @seed(2525)
    @settings(max_examples=150, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(generated.tensor_blocks(unpack=True), st.floats(-1, 1, width=32),
           st.floats(-1, 1, width=32))
    def check(lines, x0, y0):
        sources.append(generated.check_tensor_program(lines, x0, y0, tmp_path, counts,
                                                      located=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check()
    print("programs:", len(sources), "outcomes (mode, plain, converted):", counts)
    unpacking = [s for s in sources if re.search(r"for a\d, b\d in ", s)]
    assert len(unpacking) > 45, len(unpacking)
    # most run hybridized and are compared with plain Python
    assert counts.get(("hybrid", "value", "value"), 0) > 90, counts
