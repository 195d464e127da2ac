"""Session 33: a failed call's output given to a recursion block in predict mode (NOTE [an
input's failure read in the calling thread] in gluon_cf/hybrid_inline.py).

Was: ``other(g(x))`` with ``g`` recursing past its max_depth=3 and ``other`` a max_depth=6
recursion: the call's run in the calling thread read ``y`` and raised g's failure, which that
read cleared, and the call then ran again as the CachedOp, whose Custom operator read ``y``'s
unwritten memory: 1-3 of 12 calls raised other's own max_depth=6 error (the recursion on what
the memory held) instead of g's. The oracle: plain Python's recursion (``f(n)`` needs n + 1
nested calls, so 30 fails at depth 3 and 6 alike, and it is g's call that fails first)."""
from test_failed_calls_r29fail import PRELUDE, _result

CODE = PRELUDE + r"""
from gluon_cf import hybrid_inline

def read_error(e):
    found = re.search(r"max_depth=(\d+)", str(e))
    return [type(e).__name__, int(found.group(1)) if found else str(e)[:200]]

ident = lambda F, y: y
x = nd.array([30.0]); x.attach_grad()
out = {}
for mode in ("g's output", "g's output + 0"):
    g, other = make(3, ident), make(6, ident)
    reads, failed_inline = [], hybrid_inline.INLINE_FAILED[0]
    for rep in range(12):
        with autograd.record():   # (in predict mode g's own call raises)
            y = g(x)
        if mode == "g's output + 0":
            y = y + 0   # (an eager operator between: skipped, it carries g's failure)
        try:
            reads.append(read(other(y)))
        except Exception as e:   # the failure of other's input, raised by other's call
            reads.append(read_error(e))
    out[mode] = reads
    # other's run in the calling thread never started: y's failure stopped it at the call
    out[mode + ": inline runs failed"] = hybrid_inline.INLINE_FAILED[0] - failed_inline
print("RESULT " + json.dumps(out))
"""


def test_a_failed_input_raises_its_own_error_at_the_call_of_a_recursion_block():
    out = _result(CODE)
    for mode in ("g's output", "g's output + 0"):
        assert out[mode] == [["RecursionDepthError", 3]] * 12, mode
        assert out[mode + ": inline runs failed"] == 0, mode
