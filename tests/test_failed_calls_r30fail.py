"""Round 30: a failed call carried by its outputs must not reach other computations through
MXNet's shared temporary space (issue 24; NOTE [failures carried by the outputs] in
gluon_cf/failed_calls.py).

Was (round 29's carrying op, a failing ``gather_nd``, which asks MXNet for temporary space):
MXNet 1.9.1 marks every array an op writes with its failure, the temporary space it was lent
too (one of four shared by every CPU op asking for it). The next op on that space whose own
inputs are fine took the failure over and was skipped: a healthy ``nd.sum`` raised the failed
call's error, other sums then read unwritten memory (1.5e-21), and the failed call's output
read 0.0 instead of raising. Between calls of six failing blocks (round 29's test) this gave
one call's outputs another's error and left the other's unwritten (1.87e+35 in a whole-suite
run): a later call's failing op took over an earlier call's failure from the shared space."""
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

print("RESULT " + json.dumps(out))
"""


def test_carried_failures_stay_in_their_own_call():
    out = _result(CODE)
    assert out["carried"] is True
    assert out["sums"] == [True] * 8
    assert out["written"] == ["ValueError", "its own"]
