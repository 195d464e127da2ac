"""Round 30x's programs (``hostile_programs30x``: masks keeping none or all, loops of no step
reading values of no row, cond branches of different sizes before and inside loops, collected
lists, foreach over run-time-length data, recursion), exported through ``export_onnx`` and
``save_artifact`` and compared with the hybridized block on every input list (1e-5), and run
eager and hybridized (values and gradients) against plain Python where eager Gluon gives a
value for every list (a while_loop of no step is ``[]`` eagerly, as MXNet's: those compare
with Gluon only through the exports). All 20 were run so (~9 s exported, ~6 s eager and
hybridized); a sample runs here (the loop of no step reading a gather_nd of no row is
``test_export_r30x``'s)."""
import pytest

import hostile_harness
import hostile_programs30x as P
from export_harness import assert_equal_or_refused, export_outcomes

EXPORTED = ["WhileOverKeptRowsClipped", "WhileRowAndSumOfKeptRows",
            "CollectFromTwoMasksIntoOneList", "ForOverKeptRowsWithDense",
            "CondOfKeptOrAllThenForeach", "WhileBodyCondOfDifferentSizes",
            "ForeachRowsWhileOverKeptEntries",
            "WhileOverKeptRowsPick", "MaskKeepsAllOrNoneThenMeanOfRows"]
REFUSED = {
    # (a tensor break in a for that collects rows: refused at its line with what to write)
    "AutographForWithTensorBreak": {"onnx": r"for r in x: .*write it as a while loop",
                                    "artifact": r"for r in x: .*write it as a while loop"},
    # (an environment value of 4 rows read by a recursive function: its levels are batched)
    "RecursiveOverKeptRowCount": {"onnx": r"cannot be lowered to standard ONNX loops"}}
EAGER_EQUAL = ["CollectKeptRowsWithEarlierItemThenStack", "CollectFromTwoMasksIntoOneList",
               "ForOverKeptRowsStatesAndRows", "ForOverKeptRowsTensorIf",
               "CondWiderBranchThenWhile", "AutographWhileCollectsRows"]


@pytest.mark.parametrize("name", EXPORTED + sorted(REFUSED))
def test_round_30x_exports_equal_gluon(name):
    cls = getattr(P, name)
    result = export_outcomes(cls, P.PROGRAMS[cls], [P.__file__])
    assert_equal_or_refused(result, REFUSED.get(name, {}))


@pytest.mark.parametrize("name", EAGER_EQUAL)
def test_round_30x_eager_and_hybridized_equal_plain_python(name):
    cls = getattr(P, name)
    result = hostile_harness.classify(cls, P.PROGRAMS[cls], [P.__file__], export=False)
    assert {mode: kind for mode, (kind, _) in result.items()} == \
        {"eager": "equal", "hybrid": "equal"}, result
