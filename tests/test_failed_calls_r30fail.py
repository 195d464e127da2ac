"""Round 30: a failed call carried by its outputs must not reach other computations through
MXNet's shared temporary space (issue 24; NOTE [failures carried by the outputs] in
gluon_cf/failed_calls.py).

Was (round 29's carrying op, a failing ``gather_nd``, which asks MXNet for temporary space):
MXNet 1.9.1 marks every array an op writes with its failure, the temporary space it was lent
too (one of four shared by every CPU op asking for it). The next op on that space whose own
inputs are fine took the failure over and was skipped: a healthy ``nd.sum`` raised the failed
call's error, other sums then read unwritten memory (1.5e-21), and the failed call's output
read 0.0 instead of raising. Five calls failing in turn, read after all ran: the third call's
output raised the first call's error, and the last three calls' outputs read 0.0: round 29's
whole-suite failure (one of six failing blocks read 1.87e+35, reads got other calls' errors),
which needed the threads' timing there, shown without it."""
from test_failed_calls_r29fail import PRELUDE, _result

CODE = PRELUDE + r"""
import numpy as np
from gluon_cf import node   # (MXNet's errors mapped back to the kept exceptions)

out = {}
y = nd.array(np.arange(12.0).reshape(3, 4)); y.wait_to_read()
expect = np.arange(12.0).reshape(3, 4).sum(axis=0).tolist()   # numpy: the oracle
written = [nd.zeros((2,)), nd.zeros((2, 2), dtype="int32"), nd.zeros((3,), dtype="bool")]
out["carried"] = failed_calls.carry(ValueError("its own"), written)
sums = [nd.sum(y, axis=0) for _ in range(8)]   # (temporary space: all four copies, twice)
out["sums"] = [read(s) == ["value", expect] for s in sums]
out["written"] = read(written[0])
first = nd.zeros((2,))   # five calls failing in turn, their outputs read after all ran
failed_calls.carry(ValueError("call 0"), [first])
later = [nd.zeros((2,)) for _ in range(4)]
for k, o in enumerate(later):
    failed_calls.carry(ValueError("call %d" % (k + 1)), [o])
out["calls"] = [read(o) for o in later + [first]]
sparse = nd.zeros((3, 3)).tostype("row_sparse")   # (its .size raises): raised the old way
out["sparse"] = [failed_calls.carry(ValueError("sparse"), [sparse]), len(failed_calls.KEPT)]

print("RESULT " + json.dumps(out))
"""


def test_carried_failures_stay_in_their_own_call():
    out = _result(CODE)
    assert out["carried"] is True
    assert out["sums"] == [True] * 8
    assert out["written"] == ["ValueError", "its own"]
    assert out["sparse"] == [False, 0]
    assert out["calls"] == [["ValueError", "call %d" % k] for k in (1, 2, 3, 4, 0)]
